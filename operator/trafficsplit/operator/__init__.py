"""The operator shell: watches TrafficSplits, Services and EndpointSlices, compiles them with the pure core into one
generation, publishes it to every dataplane replica and reports status.

Logic lives in pure modules (`cluster`, `reconcile`, `status`, `config`); the I/O shells (`handlers`,
`engine`, `fleet`, `publisher`, `kubeapi`, `leader`, `filesource`) stay thin around them.
"""
