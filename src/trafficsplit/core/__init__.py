"""The pure core: every decision trafficsplit makes, with no I/O.

The CLI previews with this code, the operator compiles with it and the dataplane decides with it, so a preview and a
decision can never disagree. Nothing here imports kopf, grpc, asyncio, sockets or files; tests/unit/test_layers.py and
the import-linter contracts in .importlinter keep it that way.

Its plan is its packages, each importing only from itself and the ones below it (.importlinter, `core-plan`):

- `gatewayapi`: Gateway API objects read and translated into a Gateway's route table and status;
- `control`: the TrafficSplit parser, compile, reconcile, status and planning, run when something changes;
- `decide`: the dataplane's per-request decisions;
- `model`: values that check themselves and the pure mechanisms they own (hash, pick, ring, cookie, seal).

A module belongs to its package's layer by where it is: there is no list to register it in.
"""
