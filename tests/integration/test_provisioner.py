"""The Provisioner on the real API server: a Gateway's data plane is applied (server-side, the operator's field
manager), its addresses come from its Service, and deleting it removes every object it had while other Gateways'
objects stay untouched; a fresh Provisioner (an operator restart) still cleans up by label."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane
from tests.support.provision import gateway, params, settings, settings_doc
from trafficsplit.core.gateway_parameters import DEFAULT_PARAMETERS
from trafficsplit.operator.dataplane_names import GATEWAY_LABEL, dataplane_name
from trafficsplit.operator.provision import GatewayAddress
from trafficsplit.operator.provisioner import FIELD_MANAGER, Provisioner

pytestmark = [pytest.mark.k8s]

KINDS = "deployments,services,configmaps,poddisruptionbudgets,networkpolicies"


def objects(kube: ControlPlane, namespace: str, selector: str = "app.kubernetes.io/component") -> dict[str, Any]:
    """kind/name → object, for every object in the namespace matching the label selector."""
    out = kube.kubectl("get", KINDS, "-n", namespace, "-l", selector, "-o", "json", "--show-managed-fields").stdout
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in json.loads(out)["items"]}


def of(kube: ControlPlane, namespace: str, gw_ns: str, gw_name: str) -> dict[str, Any]:
    return objects(kube, namespace, f"{GATEWAY_LABEL}={dataplane_name(gw_ns, gw_name)}")


@pytest.fixture
def provisioner(kube: ControlPlane, namespace: str) -> Provisioner:
    return Provisioner(kube.api_client(), settings(settings_doc(namespace)))


def test_a_gateway_gets_its_data_plane_and_loses_all_of_it_on_delete(
    kube: ControlPlane, namespace: str, provisioner: Provisioner
) -> None:
    a, b = gateway(80, 8080, name="a"), gateway(80, name="b")
    addresses = asyncio.run(provisioner.ensure(a, DEFAULT_PARAMETERS))
    asyncio.run(provisioner.ensure(b, DEFAULT_PARAMETERS))
    got = of(kube, namespace, "shop", "a")
    base = dataplane_name("shop", "a")
    assert sorted(got) == sorted([
        f"ConfigMap/{base}-bootstrap", f"Deployment/{base}", f"Service/{base}", f"Service/{base}-publish",
        f"PodDisruptionBudget/{base}", f"NetworkPolicy/{base}",
    ])  # fmt: skip
    svc = got[f"Service/{base}"]
    assert [p["port"] for p in svc["spec"]["ports"]] == [80, 8080]
    assert addresses == (GatewayAddress("IPAddress", svc["spec"]["clusterIP"]),)
    managers = {m["manager"] for m in got[f"Deployment/{base}"]["metadata"]["managedFields"]}
    assert (
        managers == {FIELD_MANAGER}
        and got[f"Deployment/{base}"]["metadata"]["managedFields"][0]["operation"] == "Apply"
    )
    assert len(of(kube, namespace, "shop", "b")) == 6
    before_b = {k: o["metadata"]["resourceVersion"] for k, o in of(kube, namespace, "shop", "b").items()}

    # Applying the same rendering again changes nothing (server-side apply of identical fields is a no-op).
    versions = {k: o["metadata"]["resourceVersion"] for k, o in got.items()}
    asyncio.run(provisioner.ensure(a, DEFAULT_PARAMETERS))
    assert {k: o["metadata"]["resourceVersion"] for k, o in of(kube, namespace, "shop", "a").items()} == versions

    assert asyncio.run(provisioner.remove("shop/a")) == 6
    assert of(kube, namespace, "shop", "a") == {}
    assert {k: o["metadata"]["resourceVersion"] for k, o in of(kube, namespace, "shop", "b").items()} == before_b
    assert asyncio.run(provisioner.remove("shop/a")) == 0  # nothing left: a second delete is harmless


def test_parameters_change_the_data_plane_and_what_is_no_longer_rendered_goes(
    kube: ControlPlane, namespace: str, provisioner: Provisioner
) -> None:
    gw = gateway(80, name="web")
    asyncio.run(provisioner.ensure(gw, DEFAULT_PARAMETERS))
    big = params({"replicas": 3, "service": {"type": "NodePort", "annotations": {"example.com/x": "1"}}})
    asyncio.run(provisioner.ensure(gw, big))
    got = of(kube, namespace, "shop", "web")
    base = dataplane_name("shop", "web")
    assert got[f"Deployment/{base}"]["spec"]["replicas"] == 3
    assert got[f"Service/{base}"]["spec"]["type"] == "NodePort"
    assert got[f"Service/{base}"]["metadata"]["annotations"]["example.com/x"] == "1"
    # The installation switches the PDB and the NetworkPolicy off: the next ensure deletes them.
    off = Provisioner(
        kube.api_client(),
        settings(settings_doc(namespace, podDisruptionBudget__enabled=False, networkPolicy__enabled=False)),
    )
    asyncio.run(off.ensure(gw, big))
    assert sorted(k.split("/")[0] for k in of(kube, namespace, "shop", "web")) == [
        "ConfigMap", "Deployment", "Service", "Service"
    ]  # fmt: skip


def test_addresses_are_the_load_balancers_once_it_has_one(
    kube: ControlPlane, namespace: str, provisioner: Provisioner
) -> None:
    gw = gateway(80, name="lb")
    lb = params({"service": {"type": "LoadBalancer"}})
    first = asyncio.run(provisioner.ensure(gw, lb))
    assert first and first[0].type == "IPAddress"  # no load balancer yet: the ClusterIP
    # A cloud controller would write this; there is none here, so the test writes it through /status.
    kube.kubectl(
        "patch", "service", dataplane_name("shop", "lb"), "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}}}),
    )  # fmt: skip
    assert asyncio.run(provisioner.ensure(gw, lb)) == (GatewayAddress("IPAddress", "203.0.113.10"),)


def test_a_restarted_operator_removes_the_data_planes_of_gateways_deleted_meanwhile(
    kube: ControlPlane, namespace: str, provisioner: Provisioner
) -> None:
    for name in ("keep", "gone1", "gone2"):
        asyncio.run(provisioner.ensure(gateway(80, name=name), DEFAULT_PARAMETERS))
    # Not ours: a ConfigMap that happens to carry the Gateway label but not the operator's managed-by label.
    stranger = dataplane_name("shop", "gone1")
    kube.kubectl("create", "configmap", "stranger", "-n", namespace)
    kube.kubectl("label", "configmap", "stranger", "-n", namespace, f"{GATEWAY_LABEL}={stranger}")
    keep_before = {k: o["metadata"]["resourceVersion"] for k, o in of(kube, namespace, "shop", "keep").items()}

    restarted = Provisioner(kube.api_client(), settings(settings_doc(namespace)))  # no memory of what it made
    assert asyncio.run(restarted.remove_absent(["shop/keep"])) == ("shop/gone1", "shop/gone2")
    assert of(kube, namespace, "shop", "gone2") == {}
    assert list(of(kube, namespace, "shop", "gone1")) == ["ConfigMap/stranger"]
    assert {k: o["metadata"]["resourceVersion"] for k, o in of(kube, namespace, "shop", "keep").items()} == keep_before
    assert asyncio.run(restarted.remove_absent(["shop/keep"])) == ()
