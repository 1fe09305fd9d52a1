"""The real API server validates TrafficSplitPolicies with the CRD's schema and CEL rules, naming the field; the core's
parser refuses the same bodies, and takes what the server stores (tests/unit/test_gateway_policy.py keeps the fields
equal)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
import yaml

from tests.support import crdtable
from tests.support.controlplane import ControlPlane
from trafficsplit.core.gatewayapi.policy import parse_policy
from trafficsplit.core.model.errors import SpecError

pytestmark = [pytest.mark.k8s]

NAMESPACE = "default"
ROUTE = {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "shop"}
_names = itertools.count()


@pytest.fixture(scope="module")
def crd(kube: ControlPlane) -> ControlPlane:
    return crdtable.install(kube, "trafficsplit.dev_trafficsplitpolicies.yaml", "trafficsplitpolicies.trafficsplit.dev")


def body(spec: dict[str, Any]) -> dict[str, Any]:
    return crdtable.body("TrafficSplitPolicy", f"tsp-{next(_names)}", {"targetRefs": [ROUTE], **spec}, NAMESPACE)


INVALID: list[tuple[str, dict[str, Any], list[str]]] = [
    ("no-targets", {"targetRefs": []}, ["spec.targetRefs", "should have at least 1 items"]),
    ("17-targets", {"targetRefs": [{**ROUTE, "name": f"r{i}"} for i in range(17)]},
     ["spec.targetRefs", "must have at most 16 items"]),
    ("kind-gateway", {"targetRefs": [{**ROUTE, "kind": "Gateway"}]}, ["spec.targetRefs[0].kind", "Unsupported value"]),
    ("same-target-twice", {"targetRefs": [ROUTE, ROUTE]}, ["spec.targetRefs", "targetRefs must be unique"]),
    ("section-too-long", {"targetRefs": [{**ROUTE, "sectionName": "x" * 254}]},
     ["spec.targetRefs[0].sectionName", "Too long"]),
    ("assignment", {"assignment": "fast"}, ["spec.assignment", "Unsupported value"]),
    ("mode", {"sticky": {"mode": "sticky"}}, ["spec.sticky.mode", "Unsupported value"]),
    ("drain-rehash", {"sticky": {"mode": "rehash", "drain": True}},
     ["spec.sticky.drain", "sticky.drain needs sticky.mode: persistent"]),
    ("header-upper", {"sticky": {"header": {"name": "X-User"}}}, ["spec.sticky.header.name", "should match"]),
    ("header-cookie", {"sticky": {"header": {"name": "cookie"}}},
     ["spec.sticky.header.name", "the cookie and x-request-id headers cannot carry a sticky key"]),
    ("points-0", {"sticky": {"endpointPoints": 0}}, ["spec.sticky.endpointPoints", "greater than or equal to 1"]),
    ("points-1001", {"sticky": {"endpointPoints": 1001}}, ["spec.sticky.endpointPoints", "less than or equal to 1000"]),
    ("samesite-none", {"sticky": {"cookie": {"sameSite": "None"}}},
     ["spec.sticky.cookie.sameSite", "SameSite=None requires secure=true"]),
    ("partitioned", {"sticky": {"cookie": {"partitioned": True}}},
     ["spec.sticky.cookie.partitioned", "Partitioned requires secure=true"]),
    ("cookie-path", {"sticky": {"cookie": {"path": "nope"}}}, ["spec.sticky.cookie.path", "should match"]),
    ("cookie-name", {"sticky": {"cookie": {"name": "c"}}}, ['unknown field "spec.sticky.cookie.name"']),
    ("unknown-field", {"weights": {"a": 1}}, ['unknown field "spec.weights"']),
]  # fmt: skip


@pytest.mark.parametrize(("case", "spec", "expect"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_policies_are_rejected_naming_the_field(
    crd: ControlPlane, case: str, spec: dict[str, Any], expect: list[str]
) -> None:
    b = body(spec)
    crdtable.assert_refused(crd, case, yaml.safe_dump(b), expect)
    # The core refuses it too: what the API server lets through, the parser must take; the reverse holds here.
    with pytest.raises(SpecError):
        parse_policy({**b, "metadata": {**b["metadata"], "generation": 1}})


VALID: list[tuple[str, dict[str, Any]]] = [
    ("targets-only", {}),
    ("everything", {
        "targetRefs": [ROUTE, {**ROUTE, "sectionName": "cart"}],
        "assignment": "minimal",
        "debugHeaders": True,
        "sticky": {"mode": "persistent", "drain": False, "header": {"name": "x-user-id"}, "endpointAffinity": True,
                   "endpointPoints": 1000,
                   "cookie": {"path": "/cart", "domain": "shop.example.com", "secure": True, "httpOnly": False,
                              "sameSite": "None", "partitioned": True}},
    }),
    ("drain-without-mode", {"sticky": {"drain": True}}),  # the rule's default mode decides (Invalid there if rehash)
]  # fmt: skip


@pytest.mark.parametrize(("case", "spec"), VALID, ids=[c[0] for c in VALID])
def test_valid_policies_are_stored_and_parse_in_the_core(crd: ControlPlane, case: str, spec: dict[str, Any]) -> None:
    b = body(spec)
    stored = crdtable.stored(crd, b, "trafficsplitpolicy")
    assert stored["spec"] == b["spec"]
    assert parse_policy(stored).meta.name == b["metadata"]["name"]


def test_the_status_subresource_takes_ancestors(crd: ControlPlane) -> None:
    b = body({})
    crd.kubectl("apply", "-f", "-", input=yaml.safe_dump(b))
    name = b["metadata"]["name"]
    status = {"status": {"ancestors": [{
        "ancestorRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": NAMESPACE, "name": "gw"},
        "controllerName": "trafficsplit.dev/gateway-controller",
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                        "observedGeneration": 1, "lastTransitionTime": "2026-12-02T00:00:00Z"}],
    }]}}  # fmt: skip
    crd.kubectl("patch", "trafficsplitpolicy", name, "-n", NAMESPACE, "--subresource=status", "--type=merge",
                "-p", json.dumps(status))  # fmt: skip
    stored = json.loads(crd.kubectl("get", "trafficsplitpolicy", name, "-n", NAMESPACE, "-o", "json").stdout)
    assert stored["status"] == status["status"]


def test_the_table_is_large_enough() -> None:
    assert len(INVALID) >= 12
