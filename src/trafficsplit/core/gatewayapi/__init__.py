"""Gateway API, read and translated: GatewayClasses, Gateways, HTTPRoutes, ReferenceGrants, GatewayParameters and
TrafficSplitPolicies in, a Gateway's route table and every object's status out.

The readers (`reading`, shared; `objects`, `httproute`, `parameters`, `policy`) parse bodies into values; the
translation is a module per part, layered among themselves (.importlinter, `gatewayapi-translation`): `translate`
(the assembly) and `status` (what is written after the replicas ACK) above `actions`, `policy_rules` and `precedence`,
above `attachment`, `backends` and `sessions`, above `classes` and `listeners`, above `conditions`. A rule's split is
built with the TrafficSplit's own constructors (`control`), so the same checks apply; `tables` keeps a rule's
`assignment: minimal` table across operator restarts.
"""
