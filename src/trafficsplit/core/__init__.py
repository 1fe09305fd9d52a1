"""The pure core: every decision trafficsplit makes, with no I/O.

The CLI previews with this code, the operator compiles with it and the dataplane decides with it, so a preview and a
decision can never disagree. Nothing here imports kopf, grpc, asyncio, sockets or files; tests/unit/test_layers.py and
the import-linter contract in .importlinter keep it that way.
"""
