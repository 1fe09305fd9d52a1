"""Request-time decisions: what the dataplane runs for each request, composed from the model.

The sticky pick (`split`: the session key, the weighted hash pick, the persistent seal, the endpoint on the ring),
the route a request meets (`match`) and what serving it does (`serve`), what a response discloses (`disclosure`), and
the per-replica session counts and stickiness bills (`sessions`, `sketch`). Stands on the model only: no parser, no
compiler, no status.
"""
