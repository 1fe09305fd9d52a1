"""`trafficsplit demo`: the whole product on loopback, as processes, for a first look without a cluster.

`plan` decides what to start from the examples directory (pure), `supervisor` owns the child processes (process
groups, ordered stop, stragglers killed), `backends` is the sample service the demo splits, and `run` wires them.
"""
