"""The Provisioner on the real API server: a Gateway's data plane is applied (server-side, the operator's field
manager), its addresses come from its Service, and deleting it removes every object it had while other Gateways'
objects stay untouched; a fresh Provisioner (an operator restart) still cleans up by label."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane
from tests.support.provision import gateway, params, settings, settings_doc
from trafficsplit.core.gatewayapi.objects import Gateway, parse_gateway
from trafficsplit.core.gatewayapi.parameters import DEFAULT_PARAMETERS
from trafficsplit.operator.dataplane_names import GATEWAY_LABEL, GATEWAY_UID_LABEL, dataplane_name
from trafficsplit.operator.ownership import NameConflict
from trafficsplit.operator.provision import (
    KEY_ROTATION_SECONDS,
    KEY_STAGING_SECONDS,
    CookieKeys,
    GatewayAddress,
    cookie_keys_secret_name,
    object_labels,
    parse_cookie_keys,
)
from trafficsplit.operator.provisioner import FIELD_MANAGER, AddressNotUsable, Provisioner

pytestmark = [pytest.mark.k8s]

KINDS = "deployments,services,configmaps,poddisruptionbudgets,networkpolicies,secrets"


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
        f"Deployment/{base}", f"Service/{base}", f"Service/{base}-publish",
        f"PodDisruptionBudget/{base}", f"NetworkPolicy/{base}", f"Secret/{base}-cookie-keys",
        f"Secret/{base}-publish-token",
    ])  # fmt: skip
    svc = got[f"Service/{base}"]
    assert [p["port"] for p in svc["spec"]["ports"]] == [80, 8080]
    assert addresses == (GatewayAddress("IPAddress", svc["spec"]["clusterIP"]),)
    managers = {m["manager"] for m in got[f"Deployment/{base}"]["metadata"]["managedFields"]}
    assert (
        managers == {FIELD_MANAGER}
        and got[f"Deployment/{base}"]["metadata"]["managedFields"][0]["operation"] == "Apply"
    )
    assert len(of(kube, namespace, "shop", "b")) == 7
    before_b = {k: o["metadata"]["resourceVersion"] for k, o in of(kube, namespace, "shop", "b").items()}

    # Applying the same rendering again changes nothing (server-side apply of identical fields is a no-op).
    versions = {k: o["metadata"]["resourceVersion"] for k, o in got.items()}
    asyncio.run(provisioner.ensure(a, DEFAULT_PARAMETERS))
    assert {k: o["metadata"]["resourceVersion"] for k, o in of(kube, namespace, "shop", "a").items()} == versions

    assert asyncio.run(provisioner.remove(a.meta.uid)) == 7
    assert of(kube, namespace, "shop", "a") == {}
    assert {k: o["metadata"]["resourceVersion"] for k, o in of(kube, namespace, "shop", "b").items()} == before_b
    assert asyncio.run(provisioner.remove(a.meta.uid)) == 0  # nothing left: a second delete is harmless


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
        "Deployment", "Secret", "Secret", "Service", "Service"
    ]  # fmt: skip


def test_the_bootstrap_configmap_of_an_older_operator_goes_on_the_next_ensure(
    kube: ControlPlane, namespace: str, provisioner: Provisioner
) -> None:
    """Data planes provisioned before the pods made their own bootstrap had a `<name>-bootstrap` ConfigMap; after an
    upgrade the next pass deletes it with the rest of what is no longer rendered (ConfigMap stays in KINDS)."""
    gw = gateway(80, name="old")
    base = dataplane_name("shop", "old")
    s = settings(settings_doc(namespace))
    meta = {"name": f"{base}-bootstrap", "namespace": namespace, "labels": object_labels(gw, s)}
    left = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"envoy.json": "{}"}}
    kube.kubectl("apply", "-f", "-", input=json.dumps(left))
    assert f"ConfigMap/{base}-bootstrap" in of(kube, namespace, "shop", "old")
    asyncio.run(provisioner.ensure(gw, DEFAULT_PARAMETERS))
    got = of(kube, namespace, "shop", "old")
    assert f"ConfigMap/{base}-bootstrap" not in got and f"Deployment/{base}" in got


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


def pinned(*addresses: str) -> Gateway:
    """Gateway shop/pinned asking for static addresses."""
    body = {"metadata": {"name": "pinned", "namespace": "shop", "uid": "8d7a0f3e-5b1c-4e2a-9f60-0c1d2e3f4a5b"},
            "spec": {"gatewayClassName": "trafficsplit", "addresses": [{"value": a} for a in addresses],
                     "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}  # fmt: skip
    return parse_gateway(body)


def test_a_static_address_is_the_services_cluster_ip_and_one_the_server_refuses_keeps_the_service_serving(
    kube: ControlPlane, namespace: str, provisioner: Provisioner
) -> None:
    """This control plane's service range is 10.0.0.0/24: an address in it becomes the Service's ClusterIP; another
    one in it makes the Service again (a ClusterIP cannot change in place); one outside it, two of one family, or
    both families on this single-stack server is `AddressNotUsable`, naming the addresses, and the Service that
    serves stays as it was."""
    name = dataplane_name("shop", "pinned")

    def service() -> dict[str, Any]:
        return json.loads(kube.kubectl("get", "service", name, "-n", namespace, "-o", "json").stdout)  # type: ignore[no-any-return]

    try:
        # The low end of the range is the one the allocator leaves for static addresses.
        assert asyncio.run(provisioner.ensure(pinned("10.0.0.13"), DEFAULT_PARAMETERS)) == (
            GatewayAddress("IPAddress", "10.0.0.13"),
        )
        first = service()
        assert first["spec"]["clusterIP"] == "10.0.0.13"
        assert asyncio.run(provisioner.ensure(pinned("10.0.0.14"), DEFAULT_PARAMETERS)) == (
            GatewayAddress("IPAddress", "10.0.0.14"),
        )
        second = service()
        assert second["spec"]["clusterIP"] == "10.0.0.14" and second["metadata"]["uid"] != first["metadata"]["uid"]
        with pytest.raises(AddressNotUsable, match=r"spec.addresses 192.0.2.10: Service .*192.0.2.10") as refused:
            asyncio.run(provisioner.ensure(pinned("192.0.2.10"), DEFAULT_PARAMETERS))
        assert refused.value.reason == "AddressNotUsable"
        # Two of one family: a Service holds one ClusterIP per family (refused before anything is applied). Both
        # families on this single-stack server: the server's refusal.
        with pytest.raises(AddressNotUsable, match=r"one ClusterIP per IP family, so 10.0.0.13 cannot be given"):
            asyncio.run(provisioner.ensure(pinned("10.0.0.14", "10.0.0.13"), DEFAULT_PARAMETERS))
        with pytest.raises(AddressNotUsable, match=r"spec.addresses 10.0.0.13, fd00::13: Service .*"):
            asyncio.run(provisioner.ensure(pinned("10.0.0.13", "fd00::13"), DEFAULT_PARAMETERS))
        # None of these refusals took the Service that serves away, nor changed it.
        assert service()["metadata"]["uid"] == second["metadata"]["uid"]
        assert service()["spec"]["clusterIP"] == "10.0.0.14"
    finally:
        asyncio.run(provisioner.remove(pinned("10.0.0.13").meta.uid))


def test_a_restarted_operator_removes_the_data_planes_of_gateways_deleted_meanwhile(
    kube: ControlPlane, namespace: str, provisioner: Provisioner
) -> None:
    for name in ("keep", "gone1", "gone2"):
        asyncio.run(provisioner.ensure(gateway(80, name=name), DEFAULT_PARAMETERS))
    keep = gateway(80, name="keep").meta.uid
    # Not ours: a ConfigMap that happens to carry the Gateway label but not the operator's managed-by label.
    stranger = dataplane_name("shop", "gone1")
    kube.kubectl("create", "configmap", "stranger", "-n", namespace)
    kube.kubectl("label", "configmap", "stranger", "-n", namespace, f"{GATEWAY_LABEL}={stranger}")
    keep_before = {k: o["metadata"]["resourceVersion"] for k, o in of(kube, namespace, "shop", "keep").items()}

    restarted = Provisioner(kube.api_client(), settings(settings_doc(namespace)))  # no memory of what it made
    gone = tuple(f"Gateway shop/{n} (uid {gateway(80, name=n).meta.uid})" for n in ("gone1", "gone2"))
    assert asyncio.run(restarted.remove_absent([keep])) == gone
    assert of(kube, namespace, "shop", "gone2") == {}
    assert list(of(kube, namespace, "shop", "gone1")) == ["ConfigMap/stranger"]
    assert {k: o["metadata"]["resourceVersion"] for k, o in of(kube, namespace, "shop", "keep").items()} == keep_before
    assert asyncio.run(restarted.remove_absent([keep])) == ()


def test_cookie_keys_are_made_once_read_back_after_a_restart_and_rotated_by_the_clock(
    kube: ControlPlane, namespace: str
) -> None:
    now = [1_000_000.0]
    gw = gateway(80, name="keys")
    name = cookie_keys_secret_name("shop", "keys")

    def stored() -> CookieKeys | None:
        body = json.loads(kube.kubectl("get", "secret", name, "-n", namespace, "-o", "json").stdout)
        return parse_cookie_keys(body)

    first = Provisioner(kube.api_client(), settings(settings_doc(namespace)), clock=lambda: now[0])
    asyncio.run(first.ensure(gw, DEFAULT_PARAMETERS))
    made = stored()
    assert made is not None and made.previous is None and made.staged is None and made.since == 1_000_000
    assert len(bytes.fromhex(made.current)) == 32
    other = gateway(80, name="other-keys")
    asyncio.run(first.ensure(other, DEFAULT_PARAMETERS))
    body = json.loads(kube.kubectl("get", "secret", cookie_keys_secret_name("shop", "other-keys"), "-n", namespace,
                                   "-o", "json").stdout)  # fmt: skip
    other_keys = parse_cookie_keys(body)
    assert other_keys is not None and other_keys.current != made.current  # per Gateway

    # A restarted operator (no memory) a day later: the same keys, not rewritten.
    now[0] += 86_400
    rv = ("get", "secret", name, "-n", namespace, "-o", "jsonpath={.metadata.resourceVersion}")
    version = kube.kubectl(*rv).stdout
    restarted = Provisioner(kube.api_client(), settings(settings_doc(namespace)), clock=lambda: now[0])
    asyncio.run(restarted.ensure(gw, DEFAULT_PARAMETERS))
    assert stored() == made
    assert kube.kubectl(*rv).stdout == version

    # A period after it was made: a new key is staged; KEY_STAGING_SECONDS later it signs, the old one previous.
    now[0] = made.since + KEY_ROTATION_SECONDS
    deployment = kube.kubectl("get", "deployment", dataplane_name("shop", "keys"), "-n", namespace, "-o",
                              "jsonpath={.spec.template}").stdout  # fmt: skip
    asyncio.run(restarted.ensure(gw, DEFAULT_PARAMETERS))
    staged = stored()
    assert staged is not None and staged.current == made.current and staged.staged not in (None, made.current)
    now[0] += KEY_STAGING_SECONDS
    asyncio.run(restarted.ensure(gw, DEFAULT_PARAMETERS))
    assert stored() == CookieKeys(current=staged.staged or "", previous=made.current, since=int(now[0]))
    # The pods are not rolled by a rotation: the extproc re-reads the mounted file.
    assert kube.kubectl("get", "deployment", dataplane_name("shop", "keys"), "-n", namespace, "-o",
                        "jsonpath={.spec.template}").stdout == deployment  # fmt: skip

    # Deleted with the Gateway's data plane.
    asyncio.run(restarted.remove(gw.meta.uid))
    assert kube.kubectl("get", "secret", name, "-n", namespace, check=False).returncode != 0

    # A class whose parameters name the user's Secret: that one is mounted, ours is not made (and one made before goes).
    asyncio.run(restarted.ensure(other, params({"extproc": {"cookieKeysSecret": "my-keys"}})))
    other_name = cookie_keys_secret_name("shop", "other-keys")
    assert kube.kubectl("get", "secret", other_name, "-n", namespace, check=False).returncode != 0
    volumes = json.loads(kube.kubectl("get", "deployment", dataplane_name("shop", "other-keys"), "-n", namespace,
                                      "-o", "jsonpath={.spec.template.spec.volumes}").stdout)  # fmt: skip
    assert next(v for v in volumes if v["name"] == "cookie-keys")["secret"]["secretName"] == "my-keys"


def test_an_object_of_a_name_the_data_plane_needs_that_is_not_its_own_stops_it_whole(
    kube: ControlPlane, namespace: str, provisioner: Provisioner
) -> None:
    """A Secret of the cookie keys' name carrying another Gateway's uid (what a collision of names would be): `ensure`
    applies and deletes nothing and names it; the other Gateway's Secret keeps its keys. Without the label it is
    nobody's we know: left alone too."""
    gw = gateway(80, name="wanted")
    name = cookie_keys_secret_name("shop", "wanted")
    foreign = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace,
               "labels": {GATEWAY_UID_LABEL: "0e8a1b2c-other"}}, "stringData": {"current": "theirs"}}  # fmt: skip
    kube.kubectl("apply", "-f", "-", input=json.dumps(foreign))
    with pytest.raises(NameConflict, match=f"Secret {namespace}/{name} belongs to uid 0e8a1b2c-other"):
        asyncio.run(provisioner.ensure(gw, DEFAULT_PARAMETERS))
    assert of(kube, namespace, "shop", "wanted") == {}
    body = json.loads(kube.kubectl("get", "secret", name, "-n", namespace, "-o", "json").stdout)
    assert body["data"] == {"current": base64.b64encode(b"theirs").decode()}
    kube.kubectl("label", "secret", name, "-n", namespace, f"{GATEWAY_UID_LABEL}-")
    with pytest.raises(NameConflict, match="no Gateway uid label"):
        asyncio.run(provisioner.ensure(gw, DEFAULT_PARAMETERS))
    kube.kubectl("delete", "secret", name, "-n", namespace)
    asyncio.run(provisioner.ensure(gw, DEFAULT_PARAMETERS))
    assert len(of(kube, namespace, "shop", "wanted")) == 7
