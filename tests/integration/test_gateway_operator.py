"""The operator speaking Gateway API against a real API server with the upstream CRDs, a real extproc + Envoy unit
standing in as the Gateway's one data-plane replica (found, as the provisioned one would be, through the endpoints
of the Gateway's publish Service, which the test creates by hand: there is no controller-manager), and a cluster
without the CRDs where TrafficSplits are still served.

What it shows: the GatewayClass is `Accepted` at once; the route's parent `Accepted` and the Gateway's `Programmed`
come only once the replica ACKed the generation carrying them; with the replica's extproc SIGSTOPped a weight patch
(and a Gateway change) does not advance `observedGeneration`/`Programmed` until SIGCONT.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.certs import issue, make_ca
from tests.support.controlplane import ControlPlane, control_plane
from tests.support.dataplane import NameBackends
from tests.support.netns import TestPods
from tests.support.operator import (
    Gateway,
    OperatorProcess,
    Operators,
    apply,
    gateway_api_control_plane,
    get_object,
    install_crd,
    install_gateway_api_crds,
    routable_gateway,
    service_with_slice,
    ts_manifest,
    wait_condition,
)
from tests.support.waiting import poll
from trafficsplit.operator.dataplane_names import publish_service_name

pytestmark = [pytest.mark.k8s, pytest.mark.envoy, pytest.mark.netns, pytest.mark.slow]

CONTROLLER = "trafficsplit.dev/gateway-controller"
HOST = "shop.example.com"


@pytest.fixture(scope="module")
def gwkube() -> Iterator[ControlPlane]:
    with gateway_api_control_plane() as cp:
        yield cp


@pytest.fixture(scope="module")
def plainkube() -> Iterator[ControlPlane]:
    """A control plane of its own WITHOUT the Gateway API CRDs: the session's `kube` cannot promise their absence
    (tests/integration/test_argo_rollouts_plugin.py installs them into it, and in a whole run it comes first)."""
    with control_plane() as cp:
        install_crd(cp)
        yield cp


@pytest.fixture
def unit(name_backends: NameBackends, testpods: TestPods) -> Iterator[Gateway]:
    with routable_gateway(name_backends, testpods) as gw:
        yield gw


def _cond(conditions: Any, type_: str) -> dict[str, Any] | None:
    return next((dict(c) for c in conditions or [] if c.get("type") == type_), None)


def _our_parent(route: dict[str, Any]) -> dict[str, Any] | None:
    parents = (route.get("status") or {}).get("parents") or []
    return next((p for p in parents if p.get("controllerName") == CONTROLLER), None)


def _route(namespace: str, weights: tuple[int, int]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {
                "parentRefs": [{"name": "gw"}],
                "hostnames": [HOST],
                "rules": [
                    {
                        "backendRefs": [
                            {"name": "shop-stable", "port": 80, "weight": weights[0]},
                            {"name": "shop-canary", "port": 80, "weight": weights[1]},
                        ]
                    }
                ],
            },
        }
    )


def _policy(namespace: str, header: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "trafficsplit.dev/v1alpha1",
            "kind": "TrafficSplitPolicy",
            "metadata": {"name": "keyed", "namespace": namespace},
            "spec": {
                "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "web"}],
                "sticky": {"header": {"name": header}},
            },
        }
    )


def _policy_accepted(kube: ControlPlane, namespace: str) -> dict[str, Any] | None:
    """Our ancestor entry's Accepted condition, with the ancestor's kind and name."""
    ancestors = (get_object(kube, "trafficsplitpolicy", "keyed", namespace).get("status") or {}).get("ancestors") or []
    mine = next((a for a in ancestors if a.get("controllerName") == CONTROLLER), None)
    c = _cond((mine or {}).get("conditions"), "Accepted")
    return None if c is None or mine is None else {**c, "ancestor": mine["ancestorRef"]}


def _gateway(namespace: str, listeners: int = 1) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": namespace},
            "spec": {
                "gatewayClassName": "trafficsplit",
                "listeners": [
                    {"name": f"http-{i}", "port": 80 + i, "protocol": "HTTP", "hostname": HOST}
                    for i in range(listeners)
                ],
            },
        }
    )


def _operator(operators: Operators, kube: ControlPlane, unit: Gateway, namespace: str) -> OperatorProcess:
    return operators.start(
        kube.kubeconfig,
        args=[
            "--leader-election=false",
            "--gateway-api=true",
            # The chart's gateway: a Service with no endpoints here, so only the Gateway's replica is published to.
            "--gateway-service=no-chart-gateway",
            f"--gateway-namespace={namespace}",
            f"--dataplane-namespace={namespace}",
            f"--token-file={unit.token_file}",
            "--publish-timeout=2",
            "--metrics=127.0.0.1:0",
        ],
    )


def test_route_accepted_and_gateway_programmed_only_after_the_replica_acks(
    gwkube: ControlPlane, unit: Gateway, operators: Operators, testpods: TestPods
) -> None:
    kube = gwkube
    ns = kube.create_namespace("gwapi")
    for name in ("stable", "canary"):
        pod = testpods.start(name)
        service_with_slice(kube, ns, f"shop-{name}", [pod.ip], target_port=pod.port)
    apply(
        kube,
        yaml.safe_dump(
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "GatewayClass",
                "metadata": {"name": "trafficsplit"},
                "spec": {"controllerName": CONTROLLER},
            }
        ),
    )
    apply(kube, _gateway(ns))
    apply(kube, _route(ns, (90, 10)))
    op = _operator(operators, kube, unit, ns)

    cls = poll(
        lambda: (
            (
                c := _cond(
                    get_object(kube, "gatewayclass", "trafficsplit").get("status", {}).get("conditions"), "Accepted"
                )
            )
            and c["status"] == "True"
            and c
        ),
        30,
        "GatewayClass Accepted",
        0.1,
    )
    assert cls["observedGeneration"] == 1 and cls["lastTransitionTime"]
    # No replica yet (the publish Service lists none): the Gateway says so, and the route has no parent of ours.
    pending = poll(
        lambda: (
            (c := _cond(get_object(kube, "gateway", "gw", ns).get("status", {}).get("conditions"), "Programmed"))
            and c["reason"] == "Pending"
            and c
        ),
        30,
        "Gateway Programmed Pending",
        0.1,
    )
    assert pending["status"] == "Unknown" and "no replica" in pending["message"], pending
    time.sleep(1.0)
    assert _our_parent(get_object(kube, "httproute", "web", ns)) is None
    assert unit.held() == [0]

    # The Gateway's replica appears (the endpoints of its publish Service): published, ACKed, then status.
    started = time.monotonic()
    service_with_slice(
        kube,
        ns,
        publish_service_name(ns, "gw"),
        [unit.publish_host],
        port=9443,
        target_port=unit.units[0].processor.ports["publish"],
        port_name="publish",
    )

    def accepted(generation: int) -> dict[str, Any] | None:
        p = _our_parent(get_object(kube, "httproute", "web", ns))
        c = _cond((p or {}).get("conditions"), "Accepted")
        return p if c and c["status"] == "True" and c["observedGeneration"] == generation else None

    parent = poll(lambda: accepted(1), 30, "route Accepted at generation 1", 0.05)
    first = time.monotonic() - started
    held = unit.held()[0]
    assert held >= 1, "status written before the replica held a generation"
    assert parent["parentRef"] == {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}
    assert _cond(parent["conditions"], "ResolvedRefs")["status"] == "True"  # type: ignore[index]
    gw = get_object(kube, "gateway", "gw", ns)
    programmed = _cond(gw["status"]["conditions"], "Programmed")
    assert programmed is not None and programmed["status"] == "True" and programmed["observedGeneration"] == 1
    listener = gw["status"]["listeners"][0]
    assert listener["attachedRoutes"] == 1
    assert _cond(listener["conditions"], "Programmed")["status"] == "True"  # type: ignore[index]
    print(f"route Accepted {first:.2f}s after the replica's endpoints appeared (replica holds generation {held})")
    # The operator's metrics report the Gateway's fleet as the chart gateway's, under the Gateway's own label.
    fleet = frozenset({("gateway", f"Gateway/{ns}/gw")})
    m = poll(
        lambda: (m := op.metrics()).get(("trafficsplit_operator_replicas_serving", fleet)) == 1 and m,
        10,
        "the Gateway's fleet in the operator's metrics",
        0.1,
    )
    assert m[("trafficsplit_operator_generation", fleet)] == held, m
    assert m[("trafficsplit_operator_replicas_behind", fleet)] == 0
    accepted_calls = ("trafficsplit_operator_publish_seconds_count", fleet | {("result", "accepted")})
    assert m[accepted_calls] >= 1 and m[("trafficsplit_operator_publish_lag_seconds_count", fleet)] >= 1, m

    # A TrafficSplitPolicy on the route: the operator watches it, and its ancestor entry (the Gateway) is Accepted
    # once the replica holds the generation carrying it.
    apply(kube, _policy(ns, "x-user"))
    pol = poll(
        lambda: (c := _policy_accepted(kube, ns)) and c["observedGeneration"] == 1 and c, 30, "policy Accepted", 0.05
    )
    assert pol["status"] == "True" and pol["ancestor"] == {
        "group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": ns, "name": "gw"
    }, pol  # fmt: skip
    assert unit.held()[0] > held, "policy status written before the replica held the generation carrying it"
    held = unit.held()[0]

    # The replica stops answering; the route's weights and the Gateway's listeners change meanwhile.
    proc = unit.units[0].processor
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        apply(kube, _route(ns, (50, 50)))
        apply(kube, _gateway(ns, listeners=2))
        apply(kube, _policy(ns, "x-tenant"))
        assert get_object(kube, "trafficsplitpolicy", "keyed", ns)["metadata"]["generation"] == 2
        assert get_object(kube, "httproute", "web", ns)["metadata"]["generation"] == 2
        assert get_object(kube, "gateway", "gw", ns)["metadata"]["generation"] == 2
        deadline = time.monotonic() + 6.0  # three publish timeouts
        seen_pending = False
        while time.monotonic() < deadline:
            p = _our_parent(get_object(kube, "httproute", "web", ns))
            assert p is not None
            assert {c["observedGeneration"] for c in p["conditions"]} == {1}, p
            policy_now = _policy_accepted(kube, ns)
            assert policy_now is not None and policy_now["observedGeneration"] == 1, policy_now
            g = get_object(kube, "gateway", "gw", ns)
            prog = _cond(g["status"]["conditions"], "Programmed")
            assert prog is not None
            assert not (prog["status"] == "True" and prog["observedGeneration"] == 2), prog
            seen_pending = seen_pending or (prog["status"] != "True" and prog["observedGeneration"] == 2)
            time.sleep(0.2)
        assert seen_pending, "the Gateway's new generation was never reported as pending"
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    resumed = time.monotonic()
    poll(lambda: accepted(2), 30, "route Accepted at generation 2 after SIGCONT", 0.05)
    after = time.monotonic() - resumed

    def programmed2() -> bool:
        c = _cond(get_object(kube, "gateway", "gw", ns)["status"]["conditions"], "Programmed")
        return c is not None and c["status"] == "True" and c["observedGeneration"] == 2

    poll(programmed2, 30, "Gateway Programmed at generation 2", 0.05)
    poll(
        lambda: (c := _policy_accepted(kube, ns)) and c["observedGeneration"] == 2 and c["status"] == "True",
        30,
        "policy Accepted at generation 2 after SIGCONT",
        0.05,
    )
    assert unit.held()[0] > held
    print(f"after SIGCONT: route Accepted at generation 2 in {after:.2f}s; replica holds {unit.held()[0]}")

    # An HTTPS listener whose Secret does not exist yet, then does: the operator's watch on Secrets resolves it.
    secure = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "secure", "namespace": ns},
        "spec": {
            "gatewayClassName": "trafficsplit",
            "listeners": [
                {
                    "name": "https",
                    "port": 443,
                    "protocol": "HTTPS",
                    "hostname": HOST,
                    "tls": {"certificateRefs": [{"name": "shop-cert"}]},
                }
            ],
        },
    }
    apply(kube, yaml.safe_dump(secure))

    def resolved_refs() -> dict[str, Any] | None:
        listeners = get_object(kube, "gateway", "secure", ns).get("status", {}).get("listeners") or []
        return _cond(listeners[0]["conditions"], "ResolvedRefs") if listeners else None

    missing = poll(
        lambda: (c := resolved_refs()) and c["status"] == "False" and c, 30, "HTTPS listener unresolved", 0.1
    )
    assert missing["reason"] == "InvalidCertificateRef", missing
    d = Path(tempfile.mkdtemp(prefix="ts-gwtls-"))
    leaf = issue(d, make_ca(d, "ca"), HOST, server=True, dns=(HOST,), stem="shop")
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "shop-cert", "namespace": ns},
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": base64.b64encode(leaf.cert.read_bytes()).decode(),
            "tls.key": base64.b64encode(leaf.key.read_bytes()).decode(),
        },
    }
    apply(kube, yaml.safe_dump(secret))
    poll(lambda: (c := resolved_refs()) and c["status"] == "True", 30, "HTTPS listener resolved by the Secret", 0.1)
    accepted_gw = _cond(get_object(kube, "gateway", "secure", ns)["status"]["conditions"], "Accepted")
    assert accepted_gw is not None and accepted_gw["status"] == "True", accepted_gw
    assert leaf.key.read_text().split("\n")[1] not in json.dumps(get_object(kube, "gateway", "secure", ns)["status"])


def test_without_gateway_api_crds_trafficsplits_are_served_and_the_operator_says_why(
    plainkube: ControlPlane, unit: Gateway, operators: Operators, testpods: TestPods
) -> None:
    """A control plane without the Gateway API CRDs (`plainkube`)."""
    kube, namespace = plainkube, "no-gateway-api"
    kube.kubectl("create", "namespace", namespace)
    for name in ("stable", "canary"):
        pod = testpods.start(name)
        service_with_slice(kube, namespace, f"shop-{name}", [pod.ip], target_port=pod.port)
    spec = {
        "hosts": [HOST],
        "backends": [
            {"name": "stable", "service": "shop-stable", "port": 80, "weight": 90},
            {"name": "canary", "service": "shop-canary", "port": 80, "weight": 10},
        ],
    }
    apply(kube, ts_manifest(namespace, "shop", spec))
    op = operators.start(
        kube.kubeconfig,
        identity="op-nogw",
        args=[
            "--leader-election=false",
            "--gateway-api=true",
            f"--token-file={unit.token_file}",
            *unit.dataplane_args(),
        ],
    )
    wait_condition(kube, namespace, "shop", "Published", "True", timeout=30, generation=1)
    assert unit.held()[0] >= 1
    log = op.log()
    assert log.count("Gateway API off") == 1, log
    assert "does not serve gateway.networking.k8s.io/v1" in log

    # The CRDs installed later: the operator notices (it re-checks discovery), starts over in place with Gateway API
    # on, and answers our GatewayClass; the TrafficSplit stays served throughout.
    t = time.monotonic()
    install_gateway_api_crds(kube)
    gateway_class = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "trafficsplit"},
        "spec": {"controllerName": CONTROLLER},
    }
    poll(lambda: kube.kubectl("apply", "-f", "-", input=yaml.safe_dump(gateway_class), check=False).returncode == 0,
         30, "the GatewayClass CRD served", 0.5)  # fmt: skip

    def class_accepted() -> bool:
        conds = get_object(kube, "gatewayclass", "trafficsplit").get("status", {}).get("conditions") or []
        return any(c["type"] == "Accepted" and c["status"] == "True" for c in conds)

    poll(class_accepted, 60, "GatewayClass Accepted by the operator after the CRDs appeared", 0.5)
    print(f"\nCRDs installed later: GatewayClass Accepted {time.monotonic() - t:.1f}s after the apply")
    log = op.log()
    assert "Gateway API CRDs are now served" in log, log[-3000:]
    assert op.running(), "the operator exited instead of starting over in place"
    wait_condition(kube, namespace, "shop", "Published", "True", timeout=30, generation=1)
