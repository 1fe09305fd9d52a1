"""Placement and caps through the real operator with provisioning on (`--dataplane-settings`, as the chart runs it,
GatewayNamespace granted) against a real API server with the Gateway API and GatewayParameters CRDs. There is no
controller-manager: Deployments get no pods, the garbage collector does not run (so every removal seen here is the
operator's own), and a ResourceQuota's status is written by hand, as the quota controller would.

- Both placements: a class with `placement: GatewayNamespace` puts all eight objects of a Gateway's data plane in
  the Gateway's namespace (owned by the Gateway, its own publish token, a copy of the publish certificate, nothing
  in the operator's namespace); the default class keeps its seven there (its own publish token among them), nothing
  in the Gateway's. A class moved from one placement to the other moves its data planes (nothing left behind), and a
  deleted Gateway's objects go from either place.
- A ResourceQuota of 0 Deployments in the Gateway's namespace refuses its data plane: `Programmed: False`,
  `NoResources`, the quota's message; nothing made in the operator's namespace. The quota raised, it is provisioned.
- Caps (ControllerNamespace): a class allowing 2 Gateways per namespace refuses the third (`NoResources`, naming
  `limits.gatewaysPerNamespace`), which gets no object anywhere; deleting one admits it. A replica cap of 3 with 2
  replicas a data plane admits one Gateway and refuses the second.
- With a real extproc + Envoy replica standing in for the pod (the endpoint of an EndpointSlice made by hand in the
  Gateway's namespace for its publish Service): the fleet finds it there and publishes with the Gateway's own token,
  the only token that replica accepts; the Gateway is `Programmed: True`.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import crdtable
from tests.support.controlplane import ControlPlane
from tests.support.dataplane import NameBackends
from tests.support.netns import TestPods
from tests.support.operator import (
    OperatorProcess,
    Operators,
    apply,
    gateway_api_control_plane,
    get_object,
    operator_kubeconfig,
    provisioned_objects,
    render_operator_rbac,
    routable_gateway,
)
from tests.support.provision import settings_doc
from tests.support.waiting import poll
from trafficsplit.operator.dataplane_names import GATEWAY_UID_LABEL, dataplane_name
from trafficsplit.operator.provision import COMPONENT_SELECTOR

pytestmark = [pytest.mark.k8s, pytest.mark.slow]

CONTROLLER = "trafficsplit.dev/gateway-controller"
OPERATOR_NS = "ts-system"
TENANTS = ("tenant", "quota", "capped", "pub")
RELEASE = "rel"  # settings_doc's Secrets are this release's
TLS_SECRET = "rel-publish-tls-gateway"  # settings_doc's tlsSecret: the gateways' publish certificate
SHARED_TOKEN = "s" * 32
PARAMETERS: dict[str, dict[str, Any]] = {
    "here": {"placement": "GatewayNamespace"},
    "there": {"placement": "ControllerNamespace", "limits": {"gatewaysPerNamespace": 2}},
    "thin": {"replicas": 2, "limits": {"replicasPerNamespace": 3}},
    "mover": {"placement": "ControllerNamespace"},
}


def manifest(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None, group: str = "") -> str:
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return yaml.safe_dump({"apiVersion": group, "kind": kind, "metadata": meta, "spec": spec})


def set_parameters(kube: ControlPlane, name: str, spec: dict[str, Any]) -> None:
    apply(kube, manifest("GatewayParameters", name, spec, group="trafficsplit.dev/v1alpha1"))


@pytest.fixture(scope="module")
def gwkube() -> Iterator[ControlPlane]:
    with gateway_api_control_plane() as cp:
        crdtable.install(cp, "trafficsplit.dev_gatewayparameters.yaml", "gatewayparameters.trafficsplit.dev")
        for ns in (OPERATOR_NS, *TENANTS):
            cp.kubectl("create", "namespace", ns)
        fake = {k: base64.b64encode(f"{k} bytes".encode()).decode() for k in ("tls.crt", "tls.key", "ca.crt")}
        meta = {"name": TLS_SECRET, "namespace": OPERATOR_NS}
        apply(cp, yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "metadata": meta,
                                  "data": fake}))  # fmt: skip
        for name, spec in PARAMETERS.items():
            set_parameters(cp, name, spec)
            ref = {"group": "trafficsplit.dev", "kind": "GatewayParameters", "name": name}
            apply(cp, manifest("GatewayClass", name, {"controllerName": CONTROLLER, "parametersRef": ref},
                               group="gateway.networking.k8s.io/v1"))  # fmt: skip
        apply(cp, manifest("GatewayClass", "trafficsplit", {"controllerName": CONTROLLER},
                           group="gateway.networking.k8s.io/v1"))  # fmt: skip
        yield cp


@pytest.fixture
def operator(gwkube: ControlPlane, tmp_path: Path) -> Iterator[OperatorProcess]:
    """One operator, provisioning on, GatewayNamespace data planes granted (the chart's
    gatewayAPI.dataplanes.allowGatewayNamespace), ControllerNamespace the default, running with exactly the chart's
    RBAC for that (so a call the role does not grant, a Secret listed in a tenant's namespace, fails the test)."""
    values = ["gatewayAPI.enabled=true", "gatewayAPI.gatewayClass.create=false",
              "gatewayAPI.dataplanes.allowGatewayNamespace=true"]  # fmt: skip
    kubeconfig = operator_kubeconfig(
        gwkube, OPERATOR_NS, RELEASE, render_operator_rbac(gwkube, OPERATOR_NS, RELEASE, values)
    )
    settings = {**settings_doc(OPERATOR_NS), "gatewayNamespace": True}
    op = Operators(gwkube, tmp_path).start_provisioning(kubeconfig, OPERATOR_NS, settings, SHARED_TOKEN)
    try:
        yield op
    finally:
        op.stop()
        print(op.log_tail(40))


def gateway_yaml(namespace: str, name: str, cls: str) -> str:
    return manifest("Gateway", name, {"gatewayClassName": cls,
                                      "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
                    namespace, group="gateway.networking.k8s.io/v1")  # fmt: skip


def make_gateway(kube: ControlPlane, namespace: str, name: str, cls: str) -> str:
    apply(kube, gateway_yaml(namespace, name, cls))
    return str(get_object(kube, "gateway", name, namespace)["metadata"]["uid"])


def objects(kube: ControlPlane, namespace: str) -> dict[str, dict[str, Any]]:
    """kind/name → object, for every object in `namespace` with the data-plane labels."""
    return provisioned_objects(kube, namespace, COMPONENT_SELECTOR)


def of(kube: ControlPlane, uid: str) -> dict[str, set[str]]:
    """Where the objects of the Gateway `uid` are: namespace → kind/name (namespaces without any left out)."""
    out: dict[str, set[str]] = {}
    for ns in (OPERATOR_NS, *TENANTS):
        found = {k for k, o in objects(kube, ns).items() if o["metadata"]["labels"].get(GATEWAY_UID_LABEL) == uid}
        if found:
            out[ns] = found
    return out


def placed(kube: ControlPlane, uid: str, namespace: str, count: int) -> Callable[[], dict[str, set[str]] | None]:
    """`count` objects of the Gateway `uid` in `namespace`, and none anywhere else."""

    def check() -> dict[str, set[str]] | None:
        where = of(kube, uid)
        return where if set(where) == {namespace} and len(where[namespace]) == count else None

    return check


def gone(kube: ControlPlane, uid: str) -> Callable[[], bool | None]:
    """No object of the Gateway `uid` left in any namespace."""
    return lambda: not of(kube, uid) or None


def programmed(kube: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    conds = (get_object(kube, "gateway", name, namespace).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c.get("type") == "Programmed"), {})


def reason_is(kube: ControlPlane, namespace: str, name: str, reason: str) -> Callable[[], dict[str, Any] | None]:
    def check() -> dict[str, Any] | None:
        c = programmed(kube, namespace, name)
        return c if c.get("reason") == reason else None

    return check


GATEWAY_NAMESPACE_OBJECTS = {
    "Secret/ts-web-cookie-keys", "Secret/ts-web-publish-token", "Secret/ts-web-publish-tls", "Deployment/ts-web",
    "Service/ts-web", "Service/tsp-web", "PodDisruptionBudget/ts-web", "NetworkPolicy/ts-web",
}  # fmt: skip


def test_both_placements_create_move_and_remove_the_objects_in_their_namespace(
    gwkube: ControlPlane, operator: OperatorProcess
) -> None:
    kube = gwkube
    t0 = time.monotonic()
    here = make_gateway(kube, "tenant", "web", "here")
    there = make_gateway(kube, "tenant", "web2", "there")
    where = poll(placed(kube, here, "tenant", 8), 60, "web's eight objects in tenant", 0.2)
    took = time.monotonic() - t0
    assert where["tenant"] == GATEWAY_NAMESPACE_OBJECTS, where
    theirs = poll(placed(kube, there, OPERATOR_NS, 7), 60, "web2's seven objects in the operator's namespace", 0.2)
    assert all(dataplane_name("tenant", "web2") in k for k in theirs[OPERATOR_NS]), theirs
    print(f"GatewayNamespace: 8 objects in tenant, ControllerNamespace: 7 in {OPERATOR_NS}, both in {took:.1f}s")

    tenant = objects(kube, "tenant")
    for key, obj in tenant.items():
        if obj["metadata"]["labels"][GATEWAY_UID_LABEL] == here:
            refs = obj["metadata"]["ownerReferences"]
            assert refs == [{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": "web",
                             "uid": here}], key  # fmt: skip
    token = base64.b64decode(tenant["Secret/ts-web-publish-token"]["data"]["token"]).decode()
    assert len(token) == 64 and token != SHARED_TOKEN
    shared = base64.b64encode(SHARED_TOKEN.encode()).decode()
    assert not [k for k, o in tenant.items() if shared in json.dumps(o.get("data") or {})]  # never copied out
    source = get_object(kube, "secret", TLS_SECRET, OPERATOR_NS)["data"]
    assert tenant["Secret/ts-web-publish-tls"]["data"] == source
    pod = tenant["Deployment/ts-web"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v.get("secret", {}).get("secretName") for v in pod["volumes"]}
    assert (volumes["publish-token"], volumes["publish-tls"]) == ("ts-web-publish-token", "ts-web-publish-tls")
    publish = next(r for r in tenant["NetworkPolicy/ts-web"]["spec"]["ingress"] if r["ports"][0]["port"] == "publish")
    assert publish["from"][0]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": OPERATOR_NS}}

    # A class moved: its data plane moves, nothing is left where it was.
    mover = make_gateway(kube, "tenant", "moving", "mover")
    poll(placed(kube, mover, OPERATOR_NS, 7), 60, "moving's objects in the operator's namespace", 0.2)
    t1 = time.monotonic()
    set_parameters(kube, "mover", {"placement": "GatewayNamespace"})
    moved = poll(placed(kube, mover, "tenant", 8), 60, "moving's objects moved to tenant, none left behind", 0.2)
    print(f"class moved to GatewayNamespace: {len(moved['tenant'])} objects in tenant, 0 left in {OPERATOR_NS}, "
          f"{time.monotonic() - t1:.1f}s")  # fmt: skip
    set_parameters(kube, "mover", {"placement": "ControllerNamespace"})
    poll(placed(kube, mover, OPERATOR_NS, 7), 60, "moved back, none left in tenant", 0.2)

    t2 = time.monotonic()
    for name in ("web", "web2", "moving"):
        kube.kubectl("delete", "gateway", name, "-n", "tenant")
    for uid in (here, there, mover):
        poll(gone(kube, uid), 60, "the data plane removed with its Gateway", 0.2)
    print(
        f"3 Gateways deleted: every object gone from both namespaces in {time.monotonic() - t2:.1f}s "
        "(the operator's removal: no garbage collector runs here)"
    )


def set_quota(kube: ControlPlane, deployments: int) -> None:
    """A ResourceQuota of `deployments` Deployments in `quota`, its status written as the quota controller would."""
    hard = {"count/deployments.apps": str(deployments)}
    apply(kube, yaml.safe_dump({"apiVersion": "v1", "kind": "ResourceQuota",
                                "metadata": {"name": "dp", "namespace": "quota"}, "spec": {"hard": hard}}))  # fmt: skip
    status = {"status": {"hard": hard, "used": {"count/deployments.apps": "0"}}}
    kube.kubectl("patch", "resourcequota", "dp", "-n", "quota", "--subresource=status", "--type=merge",
                 "-p", json.dumps(status))  # fmt: skip


def test_a_quota_of_no_deployments_refuses_the_data_plane_in_the_gateways_namespace(
    gwkube: ControlPlane, operator: OperatorProcess
) -> None:
    kube = gwkube
    set_quota(kube, 0)
    uid = make_gateway(kube, "quota", "web", "here")
    c = poll(reason_is(kube, "quota", "web", "NoResources"), 60, "Programmed False, NoResources", 0.2)
    assert c["status"] == "False" and "Deployment quota/ts-web" in c["message"], c
    assert "exceeded quota: dp" in c["message"] and "count/deployments.apps=0" in c["message"], c
    print(f"quota/web: Programmed {c['status']} {c['reason']}: {c['message']}")
    time.sleep(2)  # more passes, a backoff retry
    where = of(kube, uid)
    assert OPERATOR_NS not in where, where  # nothing made elsewhere
    assert not [k for k in where.get("quota", ()) if k.startswith("Deployment/")], where
    print(f"in quota, made before the Deployment was refused: {sorted(where.get('quota', ()))}")
    t0 = time.monotonic()
    set_quota(kube, 1)
    poll(placed(kube, uid, "quota", 8), 90, "the data plane once the quota allows it (the backoff's next try)", 0.2)
    poll(lambda: programmed(kube, "quota", "web").get("status") != "False" or None, 30, "no longer False", 0.2)
    print(f"quota raised to 1 Deployment: provisioned {time.monotonic() - t0:.1f}s later")
    kube.kubectl("delete", "gateway", "web", "-n", "quota")
    poll(lambda: not of(kube, uid) or None, 60, "removed", 0.2)


def test_the_caps_refuse_the_gateway_past_them_and_admit_it_when_one_goes(
    gwkube: ControlPlane, operator: OperatorProcess
) -> None:
    kube = gwkube
    uids = [make_gateway(kube, "capped", f"c-{i}", "there") for i in range(3)]
    for uid in uids[:2]:
        poll(placed(kube, uid, OPERATOR_NS, 7), 60, "the first two Gateways' data planes", 0.2)
    c = poll(reason_is(kube, "capped", "c-2", "NoResources"), 60, "c-2 Programmed False, NoResources", 0.2)
    assert c["status"] == "False" and "limits.gatewaysPerNamespace" in c["message"], c
    assert "at most 2 Gateways per namespace" in c["message"], c
    print(f"capped/c-2: Programmed {c['status']} {c['reason']}: {c['message']}")
    time.sleep(2)
    assert not of(kube, uids[2]), of(kube, uids[2])  # no object anywhere
    assert all(programmed(kube, "capped", f"c-{i}").get("status") != "False" for i in range(2))
    t0 = time.monotonic()
    kube.kubectl("delete", "gateway", "c-0", "-n", "capped")
    poll(placed(kube, uids[2], OPERATOR_NS, 7), 60, "c-2 admitted once c-0 is gone", 0.2)
    poll(lambda: not of(kube, uids[0]) or None, 60, "c-0's data plane removed", 0.2)
    print(f"c-0 deleted: c-2 provisioned {time.monotonic() - t0:.1f}s later")

    # The replica cap: 3 replicas per namespace, 2 per data plane: one Gateway fits.
    thin = [make_gateway(kube, "capped", f"r-{i}", "thin") for i in range(2)]
    poll(placed(kube, thin[0], OPERATOR_NS, 7), 60, "r-0's data plane", 0.2)
    c = poll(reason_is(kube, "capped", "r-1", "NoResources"), 60, "r-1 Programmed False, NoResources", 0.2)
    assert "limits.replicasPerNamespace" in c["message"] and "may run 3 data-plane replicas" in c["message"], c
    print(f"capped/r-1: {c['reason']}: {c['message']}")
    assert not of(kube, thin[1])
    deployment = get_object(kube, "deployment", dataplane_name("capped", "r-0"), OPERATOR_NS)
    assert deployment["spec"]["replicas"] == 2
    for name in ("c-1", "c-2", "r-0", "r-1"):
        kube.kubectl("delete", "gateway", name, "-n", "capped")
    for uid in (*uids, *thin):
        poll(gone(kube, uid), 60, "removed", 0.2)


@pytest.mark.envoy
@pytest.mark.netns
def test_a_gateway_namespace_data_plane_is_found_there_and_published_with_its_own_token(
    gwkube: ControlPlane, operator: OperatorProcess, name_backends: NameBackends, testpods: TestPods, tmp_path: Path
) -> None:
    kube = gwkube
    uid = make_gateway(kube, "pub", "web", "here")
    poll(placed(kube, uid, "pub", 8), 60, "the data plane in pub", 0.2)
    secret = get_object(kube, "secret", "ts-web-publish-token", "pub")
    token_file = tmp_path / "gateway-token"
    token_file.write_bytes(base64.b64decode(secret["data"]["token"]) + b"\n")
    # The replica accepts this Gateway's token only (the last --token-file wins), and serves this Gateway only.
    extra = [[f"--token-file={token_file}", "--gateway=pub/web"]]
    with routable_gateway(name_backends, testpods, n=1, unit_extra=extra) as replica:
        t0 = time.monotonic()
        apply(kube, yaml.safe_dump({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "tsp-web-x", "namespace": "pub", "labels": {"kubernetes.io/service-name": "tsp-web"}},
            "addressType": "IPv4",
            "ports": [{"name": "publish", "port": replica.units[0].processor.ports["publish"], "protocol": "TCP"}],
            "endpoints": [{"addresses": [replica.publish_host], "conditions": {"ready": True}}],
        }))  # fmt: skip
        poll(lambda: programmed(kube, "pub", "web").get("status") == "True" or None, 60, "pub/web Programmed", 0.2)
        print(f"pub/web Programmed True {time.monotonic() - t0:.1f}s after its publish EndpointSlice appeared in pub, "
              "published with its own token")  # fmt: skip
        kube.kubectl("delete", "gateway", "web", "-n", "pub")
        poll(lambda: not of(kube, uid) or None, 60, "removed", 0.2)
