"""The Secrets HTTPS listeners name, and the ConfigMaps their client validations name, read by name
(operator/certificates.py): only what one of our listeners may use is read or kept, an object no longer named is
dropped, one created or renewed later is read again on the timer."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.support.certs import issue, make_ca
from trafficsplit.core.gatewayapi.listeners import certificate_secrets
from trafficsplit.core.gatewayapi.objects import parse_gateway, parse_reference_grant
from trafficsplit.operator.certificates import CertificateTiming
from trafficsplit.operator.fleet import Fleet
from trafficsplit.operator.gateways import GatewayPlane, GatewaySettings

CONTROLLER = "trafficsplit.dev/gateway-controller"


def _meta(name: str, namespace: str | None = "shop") -> dict[str, Any]:
    m: dict[str, Any] = {"name": name, "generation": 1, "resourceVersion": "1", "uid": f"uid-{name}"}
    if namespace is not None:
        m["namespace"] = namespace
    return m


def _https(name: str, *refs: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "port": 443, "protocol": "HTTPS", "tls": {"certificateRefs": list(refs)}}


def _gateway(name: str, class_name: str, *listeners: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": _meta(name), "spec": {"gatewayClassName": class_name, "listeners": list(listeners)}}


class FakeSecrets:
    """The API server's Secrets, and which were read."""

    def __init__(self, bodies: Mapping[tuple[str, str], dict[str, Any]]) -> None:
        self.bodies = dict(bodies)
        self.reads: list[tuple[str, str]] = []

    async def __call__(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        self.reads.append((namespace, name))
        return self.bodies.get((namespace, name))


def _tls_body(tmp_path: Path, namespace: str, name: str) -> dict[str, Any]:
    leaf = issue(tmp_path, make_ca(tmp_path, f"ca-{name}"), "a.example", server=True, dns=("a.example",), stem=name)
    data = {
        "tls.crt": base64.b64encode(leaf.cert.read_bytes()).decode(),
        "tls.key": base64.b64encode(leaf.key.read_bytes()).decode(),
    }
    return {"metadata": _meta(name, namespace), "type": "kubernetes.io/tls", "data": data}


def test_only_the_secrets_our_listeners_may_use_are_named() -> None:
    """Another namespace's Secret only with a ReferenceGrant; a Passthrough listener or an HTTP one names none."""
    gw = parse_gateway(
        _gateway(
            "gw",
            "ts",
            _https("a", {"name": "own"}),
            _https("b", {"name": "granted", "namespace": "certs"}),
            _https("c", {"name": "ungranted", "namespace": "other"}),
            _https("d", {"name": "not-a-secret", "kind": "ConfigMap", "group": ""}),
            {"name": "http", "port": 80, "protocol": "HTTP"},
        )
    )
    grant = parse_reference_grant(
        {
            "metadata": _meta("g", "certs"),
            "spec": {
                "from": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "shop"}],
                "to": [{"group": "", "kind": "Secret"}],
            },
        }
    )
    assert certificate_secrets([gw], [grant]) == {("shop", "own"), ("certs", "granted")}
    assert certificate_secrets([gw], []) == {("shop", "own")}


def _plane(
    api: FakeSecrets, pokes: list[int], seconds: float = 60.0, configmaps: FakeSecrets | None = None
) -> GatewayPlane:
    def make_fleet(label: str) -> Fleet:
        raise AssertionError("no fleet in these tests")

    timing = CertificateTiming(refresh_seconds=seconds, retry_seconds=seconds)
    plane = GatewayPlane(
        GatewaySettings(origin="test", namespace="ops", certificates=timing),
        make_fleet,
        lambda: pokes.append(1),
        secret_getter=api,
        configmap_getter=configmaps,
    )
    plane.store.apply("gatewayclass", None, {"metadata": _meta("ts", None), "spec": {"controllerName": CONTROLLER}})
    plane.store.apply("gatewayclass", None, {"metadata": _meta("theirs", None), "spec": {"controllerName": "x/y"}})
    return plane


def _resolved(plane: GatewayPlane) -> str:
    t = plane.translate({}, {})
    (listener,) = t.gateways[0].listeners
    return next(f"{c.status}/{c.reason}" for c in listener.conditions if c.type == "ResolvedRefs")


def test_a_listener_s_secret_is_read_by_name_and_nothing_else_is(tmp_path: Path) -> None:
    """Of many tls Secrets in the API, only the one our listener names is read and kept: not the junk nor the one
    another class's Gateway names; a listener that stops naming it lets it go."""
    bodies = {("shop", f"junk-{i}"): _tls_body(tmp_path, "shop", "junk") for i in range(3)}
    bodies[("shop", "cert")] = _tls_body(tmp_path, "shop", "cert")
    bodies[("shop", "theirs")] = _tls_body(tmp_path, "shop", "theirs")
    api, pokes = FakeSecrets(bodies), list[int]()

    async def main() -> None:
        plane = _plane(api, pokes)
        plane.store.apply("gateway", None, _gateway("gw", "ts", _https("https", {"name": "cert"})))
        plane.store.apply("gateway", None, _gateway("other", "theirs", _https("https", {"name": "theirs"})))
        await plane.read_certificates()
        assert api.reads == [("shop", "cert")]
        assert set(plane.store.secrets) == {("shop", "cert")}
        assert _resolved(plane) == "True/ResolvedRefs"
        await plane.read_certificates()
        assert api.reads == [("shop", "cert")], "read again before its refresh is due"
        plane.store.apply("gateway", None, _gateway("gw", "ts", {"name": "http", "port": 80, "protocol": "HTTP"}))
        await plane.read_certificates()
        assert plane.store.secrets == {}
        await plane.close()

    asyncio.run(main())


def test_a_secret_created_after_its_listener_is_read_on_the_timer(tmp_path: Path) -> None:
    """Absent at first (InvalidCertificateRef), then created: the refresher reads it within retry_seconds and asks
    for a pass; deleted again, it is dropped within refresh_seconds."""
    api, pokes = FakeSecrets({}), list[int]()

    async def main() -> None:
        plane = _plane(api, pokes, seconds=0.05)
        plane.store.apply("gateway", None, _gateway("gw", "ts", _https("https", {"name": "cert"})))
        await plane.read_certificates()
        assert _resolved(plane) == "False/InvalidCertificateRef"
        api.bodies[("shop", "cert")] = _tls_body(tmp_path, "shop", "cert")
        for _ in range(100):
            if pokes:
                break
            await asyncio.sleep(0.02)
        assert pokes, "no pass asked for once the Secret exists"
        assert _resolved(plane) == "True/ResolvedRefs"
        del api.bodies[("shop", "cert")]
        pokes.clear()
        for _ in range(100):
            if plane.store.secrets == {}:
                break
            await asyncio.sleep(0.02)
        assert plane.store.secrets == {} and pokes
        await plane.close()

    asyncio.run(main())


def test_a_client_validations_configmap_is_read_by_name_and_created_later_on_the_timer(tmp_path: Path) -> None:
    """The ConfigMap a Gateway's `spec.tls.frontend` names, and no other, is read; absent at first (the listener
    `Accepted: False, NoValidCACertificate`), then created: the refresher reads it and asks for a pass."""
    secrets = FakeSecrets({("shop", "cert"): _tls_body(tmp_path, "shop", "cert")})
    ca = make_ca(tmp_path, "clients").path.read_text()
    configmaps = FakeSecrets({("shop", "junk"): {"metadata": _meta("junk"), "data": {"ca.crt": ca}}})
    pokes: list[int] = []
    body = _gateway("gw", "ts", _https("https", {"name": "cert"}))
    ref = {"group": "", "kind": "ConfigMap", "name": "clients"}
    body["spec"]["tls"] = {"frontend": {"default": {"validation": {"caCertificateRefs": [ref]}}}}

    def accepted(plane: GatewayPlane) -> str:
        (listener,) = plane.translate({}, {}).gateways[0].listeners
        return next(f"{c.status}/{c.reason}" for c in listener.conditions if c.type == "Accepted")

    async def main() -> None:
        plane = _plane(secrets, pokes, seconds=0.05, configmaps=configmaps)
        plane.store.apply("gateway", None, body)
        await plane.read_certificates()
        assert configmaps.reads == [("shop", "clients")]
        assert accepted(plane) == "False/NoValidCACertificate"
        configmaps.bodies[("shop", "clients")] = {"metadata": _meta("clients"), "data": {"ca.crt": ca}}
        pokes.clear()
        for _ in range(100):
            if plane.store.configmaps:
                break
            await asyncio.sleep(0.02)
        assert set(plane.store.configmaps) == {("shop", "clients")} and pokes
        assert accepted(plane) == "True/Accepted"
        assert ("shop", "junk") not in configmaps.reads
        await plane.close()
        assert plane.store.configmaps == {}

    asyncio.run(main())
