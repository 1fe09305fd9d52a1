"""Gateway API objects → the split model and the status they imply, against the files beside each input
(tests/unit/gatewayapi.py). After an intended change, regenerate with `python -m tests.gen_golden` and review the
diff."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pytest

from tests.unit.gatewayapi import CASES, cases, load, render
from trafficsplit.core.gatewayapi.httproute import SUPPORTED_ROUTE_FIELDS
from trafficsplit.core.gatewayapi.objects import (
    GATEWAY_CLASS_FIELDS,
    LISTENER_SET_FIELDS,
    REFERENCE_GRANT_FIELDS,
    SUPPORTED_GATEWAY_FIELDS,
)
from trafficsplit.core.gatewayapi.parameters import PARAMETERS_FIELDS
from trafficsplit.core.gatewayapi.policy import POLICY_FIELDS

# The situations the translation must show, one case (or more) each.
REQUIRED_CASES = {
    "weights",  # 70/30/0
    "hostnames",  # intersection
    "precedence",
    "crossns-nogrant",
    "crossns-grant",
    "missing-backend",
    "unsupported",  # kind, filters we do not serve (CORS, ExtensionRef, a mirror with a redirect)
    "timeouts",  # timeouts (Flagger's service.timeout) and retry carried; attempts over our bound refused
    "flagger-mirror",  # RequestMirror (Flagger's blue/green mirror): percent, fraction, granted, unresolved
    "filters",  # header modifiers, rewrites, redirects carried
    "hostless",  # routes serving every host
    "session-cookie",
    "regex-bound",
    "listeners",  # a route on a listener it is not allowed on
    "policy",  # TrafficSplitPolicy: attachment, conflicts, missing targets, an invalid policy, settings applied
    "flagger-sticky",  # the HTTPRoute Flagger writes for a sticky canary
    "parameters",  # GatewayParameters setting every field, refused and missing ones
    "listener-sets",  # ListenerSets: allowed or not, merged precedence and conflicts, routes by set and section
}

# Every kind whose fields the translation reads, with the fields: each must appear in some case.
GUARDED: Mapping[str, Mapping[str, Any]] = {
    "HTTPRoute": SUPPORTED_ROUTE_FIELDS,
    "Gateway": SUPPORTED_GATEWAY_FIELDS,
    "ListenerSet": LISTENER_SET_FIELDS,
    "GatewayClass": GATEWAY_CLASS_FIELDS,
    "ReferenceGrant": REFERENCE_GRANT_FIELDS,
    "GatewayParameters": PARAMETERS_FIELDS,
    "TrafficSplitPolicy": POLICY_FIELDS,
}


def test_every_required_case_exists() -> None:
    assert REQUIRED_CASES - set(cases()) == set()


def supported_paths(fields: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for name, sub in fields.items():
        yield prefix + name
        if sub is not None:
            yield from supported_paths(sub, f"{prefix}{name}.")


def set_paths(value: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(value, Mapping):
        for name, sub in value.items():
            yield prefix + name
            yield from set_paths(sub, f"{prefix}{name}.")
    elif isinstance(value, list):
        for item in value:
            yield from set_paths(item, prefix)


def unused_fields(bodies: Iterable[Mapping[str, Any]]) -> set[str]:
    """Supported fields (`HTTPRoute.rules.matches.method`) that no body sets."""
    used: set[str] = set()
    for body in bodies:
        used.update(f"{body['kind']}.{p}" for p in set_paths(body.get("spec") or {}))
    wanted = {f"{kind}.{p}" for kind, fields in GUARDED.items() for p in supported_paths(fields)}
    return wanted - used


def test_the_guard_names_a_field_no_case_sets() -> None:
    route = {"kind": "HTTPRoute", "spec": {"rules": [{"matches": [{"path": {"value": "/"}}]}]}}
    missing = unused_fields([route])
    assert "HTTPRoute.rules.matches.method" in missing
    assert "HTTPRoute.rules.matches.path.value" not in missing
    assert {"GatewayClass.parametersRef.name", "ReferenceGrant.to.name", "GatewayParameters.envoy.overload"} <= missing


def test_every_supported_field_appears_in_a_case() -> None:
    """A field the translation reads that no case sets would change unseen: each needs a golden diff to show in."""
    assert unused_fields(body for case in cases() for body in load(case)) == set()


@pytest.mark.parametrize("case", cases())
def test_translation_matches_its_golden_files(case: str) -> None:
    for suffix, text in render(case).items():
        path = CASES / f"{case}.{suffix}"
        assert path.exists(), f"missing {path.name}: run python -m tests.gen_golden"
        assert text == path.read_text(encoding="utf-8"), (
            f"{path.name} differs: if the change is intended, run python -m tests.gen_golden and review the diff"
        )
