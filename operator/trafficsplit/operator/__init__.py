"""The operator shell: watches TrafficSplits, Services and EndpointSlices, compiles them with the pure core into one
generation, publishes it to every dataplane replica and reports status.

The decisions are the core's (`trafficsplit.core.control.reconcile`, `.status`, `.resolve`, under its purity contract);
this package keeps what only an operator does: Kubernetes I/O (`cluster` projections, `kubeapi`, `handlers`), events
into
the level-triggered loop and numbering (`engine`), leadership (`leader`), the fleet of replicas (`fleet`,
`publisher`), local mode (`filesource`) and its flags (`config`).
"""
