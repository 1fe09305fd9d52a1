"""GatewayParameters: the parser takes every field the CRD has with the CRD's bounds, refuses the rest naming the
field, and a GatewayClass whose parametersRef is missing, of another kind or refused is `InvalidParameters`."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.test_gatewayapi_golden import supported_paths
from trafficsplit.core.gatewayapi.classes import class_parameters
from trafficsplit.core.gatewayapi.objects import parse_gateway, parse_gateway_class
from trafficsplit.core.gatewayapi.parameters import (
    DEFAULT_PARAMETERS,
    DNS_SUBDOMAIN_PATTERN,
    MAX_ANNOTATIONS,
    MAX_CONCURRENCY,
    MAX_CONNECTIONS,
    MAX_GATEWAYS_PER_NAMESPACE,
    MAX_MESSAGE_TIMEOUT_MS,
    MAX_OBJECT_NAME,
    MAX_PRESTOP_SECONDS,
    MAX_REPLICAS,
    MAX_REPLICAS_PER_NAMESPACE,
    MAX_XFF_HOPS,
    MIN_HEAP_BYTES,
    PARAMETERS_FIELDS,
    QUANTITY_PATTERN,
    EnvoyLogLevel,
    Placement,
    Resources,
    ServiceType,
    TrafficPolicy,
    parse_gateway_parameters,
    quantity_value,
)
from trafficsplit.core.gatewayapi.translate import Inputs, translate
from trafficsplit.core.model.errors import SpecError

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "trafficsplit.dev_gatewayparameters.yaml"


def body(spec: dict[str, Any], name: str = "big") -> dict[str, Any]:
    return {"apiVersion": "trafficsplit.dev/v1alpha1", "kind": "GatewayParameters", "metadata": {"name": name},
            "spec": spec}  # fmt: skip


FULL = {
    "replicas": 3,
    "service": {"type": "LoadBalancer", "annotations": {"lb.example.com/scheme": "internal"},
                "externalTrafficPolicy": "Local"},
    "envoy": {"concurrency": 4, "logLevel": "debug", "messageTimeoutMs": 300, "xffNumTrustedHops": 1,
              "backendClusterStats": False, "overload": {"maxHeapSizeBytes": 2**28, "maxConnections": 1000},
              "preStopSleepSeconds": 7, "resources": {"requests": {"cpu": "500m", "memory": "128Mi"},
                                                      "limits": {"cpu": 2, "memory": "512Mi"}}},
    "extproc": {"resources": {"requests": {"cpu": "1", "memory": "256Mi"}}, "cookieKeysSecret": "edge-keys"},
    "placement": "GatewayNamespace",
    "limits": {"gatewaysPerNamespace": 4, "replicasPerNamespace": 9},
}  # fmt: skip


def test_every_field_is_read() -> None:
    p = parse_gateway_parameters(body(FULL))
    assert p.name == "big" and p.replicas == 3
    assert p.service_type is ServiceType.LOAD_BALANCER and p.external_traffic_policy is TrafficPolicy.LOCAL
    assert p.service_annotations == (("lb.example.com/scheme", "internal"),)
    assert (p.envoy_concurrency, p.envoy_log_level, p.message_timeout_ms) == (4, EnvoyLogLevel.DEBUG, 300)
    assert (p.xff_num_trusted_hops, p.backend_cluster_stats, p.max_heap_size_bytes) == (1, False, 2**28)
    assert (p.max_connections, p.pre_stop_sleep_seconds) == (1000, 7)
    assert p.envoy_resources == Resources("500m", "128Mi", "2", "512Mi")
    assert p.extproc_resources == Resources("1", "256Mi", None, None)
    assert p.cookie_keys_secret == "edge-keys"
    assert p.placement is Placement.GATEWAY_NAMESPACE
    assert (p.gateways_per_namespace, p.replicas_per_namespace) == (4, 9)


def test_an_empty_spec_is_the_operators_defaults() -> None:
    assert parse_gateway_parameters(body({})) == DEFAULT_PARAMETERS.__class__(name="big")


BAD = [
    ({"replicas": 0}, "spec.replicas: must be 1..100"),
    ({"replicas": MAX_REPLICAS + 1}, "spec.replicas"),
    ({"replicas": True}, "spec.replicas: expected an integer"),
    ({"service": {"type": "ExternalName"}}, "spec.service.type: 'ExternalName' must be one of"),
    ({"service": {"externalTrafficPolicy": "Local"}}, "Local needs service.type NodePort or LoadBalancer"),
    ({"service": {"annotations": {f"a{i}": "x" for i in range(MAX_ANNOTATIONS + 1)}}}, "at most 32"),
    ({"service": {"annotations": {"bad key!": "x"}}}, "not an annotation key"),
    ({"service": {"annotations": {"a": 1}}}, "expected a string"),
    ({"envoy": {"concurrency": MAX_CONCURRENCY + 1}}, "spec.envoy.concurrency"),
    ({"envoy": {"logLevel": "loud"}}, "spec.envoy.logLevel"),
    ({"envoy": {"messageTimeoutMs": MAX_MESSAGE_TIMEOUT_MS + 1}}, "spec.envoy.messageTimeoutMs"),
    ({"envoy": {"xffNumTrustedHops": MAX_XFF_HOPS + 1}}, "spec.envoy.xffNumTrustedHops"),
    ({"envoy": {"overload": {"maxHeapSizeBytes": MIN_HEAP_BYTES - 1}}}, "spec.envoy.overload.maxHeapSizeBytes"),
    ({"envoy": {"overload": {"maxConnections": MAX_CONNECTIONS + 1}}}, "spec.envoy.overload.maxConnections"),
    ({"envoy": {"preStopSleepSeconds": MAX_PRESTOP_SECONDS + 1}}, "spec.envoy.preStopSleepSeconds"),
    ({"envoy": {"backendClusterStats": "no"}}, "spec.envoy.backendClusterStats: expected true or false"),
    ({"envoy": {"resources": {"limits": {"cpu": "lots"}}}}, "limits.cpu: 'lots' is not a quantity"),
    ({"envoy": {"resources": {"limits": {"gpu": "1"}}}}, "spec.envoy.resources.limits.gpu: unknown field"),
    ({"extproc": {"image": "evil"}}, "spec.extproc.image: unknown field"),
    ({"tls": {}}, "spec.tls: unknown field"),
    ({"extproc": {"cookieKeysSecret": "Not_A_Name"}}, "spec.extproc.cookieKeysSecret: 'Not_A_Name' is not an object"),
    ({"extproc": {"cookieKeysSecret": "a" * 254}}, "spec.extproc.cookieKeysSecret"),
    ({"extproc": {"cookieKeysSecret": 7}}, "spec.extproc.cookieKeysSecret"),
    ({"placement": "Elsewhere"}, "spec.placement: 'Elsewhere' must be one of GatewayNamespace, ControllerNamespace"),
    ({"limits": {"gatewaysPerNamespace": 0}}, "spec.limits.gatewaysPerNamespace: must be 1..10000"),
    ({"limits": {"replicasPerNamespace": MAX_REPLICAS_PER_NAMESPACE + 1}}, "spec.limits.replicasPerNamespace"),
    ({"limits": {"pods": 3}}, "spec.limits.pods: unknown field"),
    ({"replicas": 3, "limits": {"replicasPerNamespace": 2}},
     "spec.limits.replicasPerNamespace: must be at least spec.replicas"),
    ({"envoy": {"resources": {"requests": {"cpu": "1.5"}, "limits": {"cpu": "1"}}}},
     "spec.envoy.resources: requests.cpu must not exceed limits.cpu"),
    ({"extproc": {"resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1000Mi"}}}},
     "spec.extproc.resources: requests.memory must not exceed limits.memory"),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "expect"), BAD, ids=[b[1][:40] for b in BAD])
def test_bad_fields_are_refused_by_path(spec: dict[str, Any], expect: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_gateway_parameters(body(spec))
    assert expect in str(e.value)


def test_quantities_compare_exactly() -> None:
    assert quantity_value("250m") == Fraction(1, 4) and quantity_value("1Gi") == 2**30
    assert quantity_value("1Gi") > quantity_value("1000Mi") and quantity_value("1G") < quantity_value("1Gi")
    assert quantity_value("0.5") == quantity_value("500m")
    p = parse_gateway_parameters(
        body({"envoy": {"resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "0.5"}}}})
    )
    assert p.envoy_resources.requests_cpu == "500m"


def test_all_problems_are_reported_at_once() -> None:
    with pytest.raises(SpecError) as e:
        parse_gateway_parameters(body({"replicas": 0, "envoy": {"concurrency": 0}}))
    assert len(e.value.problems) == 2


def _crd_spec() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema["properties"]["spec"]  # type: ignore[no-any-return]


def _schema_paths(node: Mapping[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for name, sub in (node.get("properties") or {}).items():
        out.add(prefix + name)
        out |= _schema_paths(sub, f"{prefix}{name}.")
    return out


def test_the_parser_reads_exactly_the_crds_fields() -> None:
    """One table for the parser's unknown-field check and the golden guard: the CRD's fields, no more, no fewer."""
    assert set(supported_paths(PARAMETERS_FIELDS)) == _schema_paths(_crd_spec())


def test_the_crds_bounds_are_the_parsers() -> None:
    spec = _crd_spec()["properties"]
    assert (spec["replicas"]["minimum"], spec["replicas"]["maximum"]) == (1, MAX_REPLICAS)
    envoy = spec["envoy"]["properties"]
    assert envoy["concurrency"]["maximum"] == MAX_CONCURRENCY
    assert envoy["messageTimeoutMs"]["maximum"] == MAX_MESSAGE_TIMEOUT_MS
    assert envoy["xffNumTrustedHops"]["maximum"] == MAX_XFF_HOPS
    assert envoy["preStopSleepSeconds"]["maximum"] == MAX_PRESTOP_SECONDS
    assert envoy["overload"]["properties"]["maxHeapSizeBytes"]["minimum"] == MIN_HEAP_BYTES
    assert envoy["overload"]["properties"]["maxConnections"]["maximum"] == MAX_CONNECTIONS
    assert envoy["logLevel"]["enum"] == [x.value for x in EnvoyLogLevel]
    assert spec["service"]["properties"]["type"]["enum"] == [x.value for x in ServiceType]
    assert spec["service"]["properties"]["annotations"]["maxProperties"] == MAX_ANNOTATIONS
    cpu = envoy["resources"]["properties"]["limits"]["properties"]["cpu"]
    assert cpu["pattern"] == QUANTITY_PATTERN
    keys = spec["extproc"]["properties"]["cookieKeysSecret"]
    assert (keys["pattern"], keys["maxLength"]) == (DNS_SUBDOMAIN_PATTERN, MAX_OBJECT_NAME)
    assert spec["placement"]["enum"] == [x.value for x in Placement]
    limits = spec["limits"]["properties"]
    assert (limits["gatewaysPerNamespace"]["minimum"], limits["gatewaysPerNamespace"]["maximum"]) == (
        1,
        MAX_GATEWAYS_PER_NAMESPACE,
    )
    assert limits["replicasPerNamespace"]["maximum"] == MAX_REPLICAS_PER_NAMESPACE


def _class(ref: dict[str, Any] | None) -> Any:
    spec: dict[str, Any] = {"controllerName": "trafficsplit.dev/gateway-controller"}
    if ref is not None:
        spec["parametersRef"] = ref
    return parse_gateway_class({"metadata": {"name": "ts", "generation": 4}, "spec": spec})


REF = {"group": "trafficsplit.dev", "kind": "GatewayParameters", "name": "big"}


def test_a_class_without_parameters_is_accepted_with_the_defaults() -> None:
    params, cond = class_parameters(_class(None), {})
    assert params == DEFAULT_PARAMETERS and cond.ok and cond.observed_generation == 4


def test_a_class_with_valid_parameters_gets_them() -> None:
    big = parse_gateway_parameters(body(FULL))
    params, cond = class_parameters(_class(REF), {"big": big})
    assert params is big and cond.ok


@pytest.mark.parametrize(
    ("ref", "available", "expect"),
    [
        ({**REF, "name": "gone"}, {}, "GatewayParameters 'gone' not found"),
        ({**REF, "group": "", "kind": "ConfigMap"}, {}, "GatewayParameters, not core ConfigMap"),
        ({**REF, "namespace": "ops"}, {}, "cluster-scoped: namespace must be empty"),
        (REF, {"big": "spec.replicas: must be 1..100, got 0"}, "'big' is invalid: spec.replicas: must be 1..100"),
    ],
    ids=["missing", "wrong-kind", "namespaced", "refused"],
)  # fmt: skip
def test_a_bad_parameters_ref_is_invalid_parameters(ref: dict[str, Any], available: Any, expect: str) -> None:
    params, cond = class_parameters(_class(ref), available)
    assert params is None
    assert (cond.type, cond.status, cond.reason) == ("Accepted", "False", "InvalidParameters")
    assert expect in cond.message and cond.observed_generation == 4


def test_the_translation_writes_the_class_condition_and_carries_the_parameters() -> None:
    t = translate(Inputs(classes=(_class({**REF, "name": "gone"}),)))
    assert [(c.name, c.conditions[0].reason, c.parameters) for c in t.classes] == [("ts", "InvalidParameters", None)]
    big = parse_gateway_parameters(body(FULL))
    t = translate(Inputs(classes=(_class(REF),), parameters={"big": big}))
    assert t.classes[0].conditions[0].ok and t.classes[0].parameters is big


def test_a_gateway_of_a_refused_class_is_not_accepted_nor_programmed_at_its_generation() -> None:
    gw = parse_gateway(
        {
            "metadata": {"name": "edge", "namespace": "shop", "generation": 7, "uid": "u"},
            "spec": {"gatewayClassName": "ts", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
        }
    )
    refused = {"big": "spec.replicas: must be 1..100, got 0"}
    (gs,) = translate(Inputs(classes=(_class(REF),), gateways=(gw,), parameters=refused)).gateways
    conds = {c.type: (c.status, c.reason, c.observed_generation) for c in gs.conditions}
    assert conds == {"Accepted": ("False", "InvalidParameters", 7), "Programmed": ("False", "Invalid", 7)}
    for c in gs.conditions:
        assert "GatewayClass ts" in c.message and "'big' is invalid: spec.replicas" in c.message, c
    (ls,) = gs.listeners
    listener = {c.type: (c.status, c.reason) for c in ls.conditions}
    assert listener["Programmed"] == ("False", "Invalid") and listener["Accepted"] == ("True", "Accepted")
    # The same Gateway of an accepted class: Accepted, and Programmed waits for its replicas.
    (gs,) = translate(Inputs(classes=(_class(None),), gateways=(gw,))).gateways
    accepted = {c.type: (c.status, c.reason) for c in gs.conditions}
    assert accepted == {"Accepted": ("True", "Accepted"), "Programmed": ("Unknown", "Pending")}


def test_the_crd_joins_no_category_that_names_a_resource() -> None:
    """`kubectl get trafficsplit NAME` resolves `trafficsplit` as a category when one exists: a second CRD in the
    TrafficSplit CRD's category makes it two resources, and kubectl refuses ("you must specify only one resource")."""
    names = yaml.safe_load(CRD.read_text())["spec"]["names"]
    trafficsplit = yaml.safe_load((ROOT / "crds" / "trafficsplit.dev_trafficsplits.yaml").read_text())["spec"]["names"]
    taken = {
        trafficsplit["singular"],
        trafficsplit["plural"],
        trafficsplit["kind"].lower(),
        *trafficsplit["shortNames"],
    }
    assert not taken & set(names.get("categories", []))
