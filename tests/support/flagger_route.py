"""The HTTPRoute Flagger v1.44.0 writes for a sticky canary (tests/testdata/gatewayapi/flagger-sticky.in.yaml, at
canary weight 10) and the routes its later steps write, derived from pkg/router/gateway_api.go
(`GatewayAPIRouter.SetRoutes`, `getSessionAffinityRouteRules`): for the unit tests (the core's decisions) and the
integration tests (the same route through real Envoy)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from tests.unit.gatewayapi import load

CASE = "flagger-sticky"
HOST = "app.example.com"
PRIMARY, CANARY = "podinfo-primary", "podinfo-canary"
SERVICE_PORT = 9898
COOKIE = "flagger-cookie=JzFTmHpLqR"  # the Canary status' sessionAffinityCookie the fixture carries
SET_COOKIE = f"{COOKIE}; Max-Age=21600"  # SessionAffinity.BuildCookie(cookie, maxAge 21600)
EXPIRE_COOKIE = f"{COOKIE}; Max-Age=-1"  # what the weight-0 rule adds for the previous cookie


def fixture() -> list[dict[str, Any]]:
    """Every object of the golden case: class, Gateway, Flagger's HTTPRoute, Services, EndpointSlices."""
    return load(CASE)


def route_of(bodies: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return next(b for b in bodies if b["kind"] == "HTTPRoute")


def flagger_step(bodies: Sequence[dict[str, Any]], canary_weight: int) -> list[dict[str, Any]]:
    """The route Flagger's SetRoutes writes at a later step (canary weight > 0): the same rules, only the weighted
    rule's weights changed (the cookie stays the one in the Canary's status); generation bumped."""
    assert 0 < canary_weight <= 100
    out = copy.deepcopy(list(bodies))
    route = route_of(out)
    route["metadata"]["generation"] += 1
    primary, canary = route["spec"]["rules"][1]["backendRefs"]
    primary["weight"], canary["weight"] = 100 - canary_weight, canary_weight
    return out


def flagger_weight_zero(bodies: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The route getSessionAffinityRouteRules writes when the canary weight returns to 0 (promotion or rollback): the
    sticky rule is a copy of the weighted rule (primary 100 / canary 0, no backendRef filters) matching the previous
    cookie, with a rule-level ResponseHeaderModifier adding `Set-Cookie: <cookie>; Max-Age=-1`; then the weighted
    rule at 100/0."""
    out = copy.deepcopy(list(bodies))
    route = route_of(out)
    route["metadata"]["generation"] += 1
    sticky, weighted = route["spec"]["rules"]
    for ref in weighted["backendRefs"]:
        ref.pop("filters", None)
    weighted["backendRefs"][0]["weight"], weighted["backendRefs"][1]["weight"] = 100, 0
    sticky["backendRefs"] = copy.deepcopy(weighted["backendRefs"])
    sticky["filters"] = [
        {
            "type": "ResponseHeaderModifier",
            "responseHeaderModifier": {"add": [{"name": "Set-Cookie", "value": EXPIRE_COOKIE}]},
        }
    ]
    return out


PRIMARY_COOKIE = "flagger-primary=QwErTyUiOp"  # with sessionAffinity.primaryCookieName: flagger-primary
PRIMARY_SET_COOKIE = f"{PRIMARY_COOKIE}; Max-Age=60"  # BuildCookie(cookie, analysis.interval 1m in seconds)


def flagger_with_primary_cookie(bodies: Sequence[dict[str, Any]], canary_weight: int) -> list[dict[str, Any]]:
    """The route getSessionAffinityRouteRules writes at canary weight > 0 when `primaryCookieName` is set too: the
    primary's backendRef in the weighted rule also adds a Set-Cookie (Max-Age: the analysis interval), and a sticky
    primary rule (a copy of the weighted rule, matching the primary cookie, primary 100 / canary 0) comes between the
    sticky canary rule and the weighted rule."""
    out = flagger_step(bodies, canary_weight)
    route = route_of(out)
    route["metadata"]["generation"] -= 1  # one write, as flagger_step's
    sticky, weighted = route["spec"]["rules"]
    weighted["backendRefs"][0]["filters"] = [
        {
            "type": "ResponseHeaderModifier",
            "responseHeaderModifier": {"add": [{"name": "Set-Cookie", "value": PRIMARY_SET_COOKIE}]},
        }
    ]
    name, value = PRIMARY_COOKIE.split("=")
    primary_rule = {
        "matches": [{"headers": [{"name": "Cookie", "type": "RegularExpression", "value": f".*{name}.*{value}.*"}]}],
        "backendRefs": [
            {k: v for k, v in ref.items() if k != "filters"} | {"weight": w}
            for ref, w in zip(weighted["backendRefs"], (100, 0), strict=True)
        ],
    }
    route["spec"]["rules"] = [sticky, primary_rule, weighted]
    return out
