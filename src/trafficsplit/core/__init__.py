"""The pure core: every decision trafficsplit makes, with no I/O.

The CLI previews with this code, the operator compiles with it and the dataplane decides with it, so a preview and a
decision can never disagree. Nothing here imports kopf, grpc, asyncio, sockets or files; tests/unit/test_layers.py and
the import-linter contracts in .importlinter keep it that way.

The core's plan: three layers, each importing only its own and the ones below it (.importlinter, `core-plan`;
docs/architecture.md says why each module is where it is).

Control-time work, run when something changes (a resource, a weight, a replica's ack), never per request: `change`,
`compiler`, `gateway_actions`, `gateway_attachment`, `gateway_backends`, `gateway_classes`, `gateway_conditions`,
`gateway_httproute`, `gateway_listeners`, `gateway_objects`, `gateway_parameters`, `gateway_policy`,
`gateway_policy_rules`, `gateway_precedence`, `gateway_reading`, `gateway_sessions`, `gateway_status`, `gateway_tables`,
`gateway_translate`, `plan`, `reconcile`, `resolve`, `simulate`, `spec`, `status`. The Gateway translation's modules are
layered among themselves (`gateway-translation`).

Request-time decisions, run by the dataplane for each request: `decide`, `disclosure`, `gateway_match`,
`gateway_serve`, `sessions`, `sketch`.

The model, values that check themselves and the pure mechanisms they own (the hash, the weighted pick, the ring, the
cookie, the seal): `assignment`, `capabilities`, `compiled`, `cookie`, `errors`, `gateway_filters`, `gateway_routes`,
`gateway_tls`, `gateway_values`, `generation`, `hashing`, `headervalue`, `host`, `limits`, `persistent`, `regex`,
`ring`, `rules`, `splitspec`, `vocabulary`, `weights`. Inside it a generation carries the route table, which carries
compiled splits (`core-model-stack`).
"""
