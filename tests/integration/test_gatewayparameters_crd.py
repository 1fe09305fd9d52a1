"""The real API server validates GatewayParameters with the CRD's schema and CEL rules, naming the field; what it
stores, the core's parser takes (the same bounds in both places: tests/unit/test_gateway_parameters.py)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import yaml

from tests.support import crdtable
from tests.support.controlplane import ControlPlane
from trafficsplit.core.gatewayapi.parameters import parse_gateway_parameters
from trafficsplit.core.model.errors import SpecError

pytestmark = [pytest.mark.k8s]

_names = itertools.count()


@pytest.fixture(scope="module")
def crd(kube: ControlPlane) -> ControlPlane:
    return crdtable.install(kube, "trafficsplit.dev_gatewayparameters.yaml", "gatewayparameters.trafficsplit.dev")


def body(spec: dict[str, Any]) -> dict[str, Any]:
    return crdtable.body("GatewayParameters", f"gp-{next(_names)}", spec)


INVALID: list[tuple[str, dict[str, Any], list[str]]] = [
    ("replicas-0", {"replicas": 0}, ["spec.replicas", "should be greater than or equal to 1"]),
    ("replicas-101", {"replicas": 101}, ["spec.replicas", "should be less than or equal to 100"]),
    ("service-externalname", {"service": {"type": "ExternalName"}}, ["spec.service.type", "Unsupported value"]),
    ("local-on-clusterip", {"service": {"externalTrafficPolicy": "Local"}},
     ["spec.service.externalTrafficPolicy", "externalTrafficPolicy Local needs service.type NodePort or LoadBalancer"]),
    ("33-annotations", {"service": {"annotations": {f"a{i}": "x" for i in range(33)}}},
     ["spec.service.annotations", "must have at most 32 items"]),
    ("annotation-key", {"service": {"annotations": {"bad key": "x"}}},
     ["spec.service.annotations", "annotation keys are an optional DNS prefix"]),
    ("concurrency-65", {"envoy": {"concurrency": 65}}, ["spec.envoy.concurrency", "less than or equal to 64"]),
    ("loglevel", {"envoy": {"logLevel": "loud"}}, ["spec.envoy.logLevel", "Unsupported value"]),
    ("timeout-0", {"envoy": {"messageTimeoutMs": 0}}, ["spec.envoy.messageTimeoutMs", "greater than or equal to 1"]),
    ("hops-17", {"envoy": {"xffNumTrustedHops": 17}}, ["spec.envoy.xffNumTrustedHops", "less than or equal to 16"]),
    ("heap-small", {"envoy": {"overload": {"maxHeapSizeBytes": 1024}}},
     ["spec.envoy.overload.maxHeapSizeBytes", "greater than or equal to 16777216"]),
    ("prestop-301", {"envoy": {"preStopSleepSeconds": 301}},
     ["spec.envoy.preStopSleepSeconds", "less than or equal to 300"]),
    ("quantity", {"envoy": {"resources": {"limits": {"cpu": "lots"}}}},
     ["spec.envoy.resources.limits.cpu", "should match"]),
    ("requests-over-limits", {"extproc": {"resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "512Mi"}}}},
     ["spec.extproc.resources", "requests.memory must not exceed limits.memory"]),
    ("cpu-over-limits", {"envoy": {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "500m"}}}},
     ["spec.envoy.resources", "requests.cpu must not exceed limits.cpu"]),
    ("unknown-field", {"envoy": {"image": "evil/envoy"}}, ['unknown field "spec.envoy.image"']),
    ("placement", {"placement": "Elsewhere"}, ["spec.placement", "Unsupported value"]),
    ("gateways-per-namespace-0", {"limits": {"gatewaysPerNamespace": 0}},
     ["spec.limits.gatewaysPerNamespace", "greater than or equal to 1"]),
    ("replicas-per-namespace-big", {"limits": {"replicasPerNamespace": 100001}},
     ["spec.limits.replicasPerNamespace", "less than or equal to 100000"]),
    ("replica-cap-under-replicas", {"replicas": 3, "limits": {"replicasPerNamespace": 2}},
     ["spec.limits.replicasPerNamespace", "limits.replicasPerNamespace must be at least replicas"]),
]  # fmt: skip


@pytest.mark.parametrize(("case", "spec", "expect"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_parameters_are_rejected_naming_the_field(
    crd: ControlPlane, case: str, spec: dict[str, Any], expect: list[str]
) -> None:
    b = body(spec)
    name = b["metadata"]["name"]
    crdtable.assert_refused(crd, case, yaml.safe_dump(b), expect)
    crdtable.assert_absent(crd, "gatewayparameters", name)
    # The core refuses it too (what the API server lets through, the parser must take; the reverse holds here).
    with pytest.raises(SpecError):
        parse_gateway_parameters({"metadata": {"name": name}, "spec": spec})


VALID: list[tuple[str, dict[str, Any]]] = [
    ("empty", {}),
    ("everything", {
        "replicas": 100,
        "service": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                    "annotations": {"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal", "plain": "x"}},
        "envoy": {"concurrency": 64, "logLevel": "off", "messageTimeoutMs": 60000, "xffNumTrustedHops": 16,
                  "backendClusterStats": False, "overload": {"maxHeapSizeBytes": 16777216, "maxConnections": 1},
                  "preStopSleepSeconds": 0,
                  "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": 2, "memory": "1Gi"}}},
        "extproc": {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}},
    }),
    ("requests-only", {"envoy": {"resources": {"requests": {"cpu": "4"}}}}),
    ("placed-and-capped", {"placement": "GatewayNamespace", "replicas": 2,
                           "limits": {"gatewaysPerNamespace": 10000, "replicasPerNamespace": 2}}),
    ("cap-without-replicas", {"placement": "ControllerNamespace", "limits": {"replicasPerNamespace": 1}}),
]  # fmt: skip


@pytest.mark.parametrize(("case", "spec"), VALID, ids=[c[0] for c in VALID])
def test_valid_parameters_are_stored_and_parse_in_the_core(crd: ControlPlane, case: str, spec: dict[str, Any]) -> None:
    b = body(spec)
    stored = crdtable.stored(crd, b, "gatewayparameters")
    assert stored["spec"] == spec
    assert parse_gateway_parameters(stored).name == b["metadata"]["name"]


def test_the_table_is_large_enough() -> None:
    assert len(INVALID) >= 12
