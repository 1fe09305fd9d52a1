"""HTTPS listeners served by real Envoy: TLS terminated with the certificate of the Secret each listener names, sent
over ADS as an SDS secret; the listener picked by SNI; a rotated Secret served without a restart."""

from __future__ import annotations

import base64
import socket
import ssl
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from tests.support.certs import Ca, issue, make_ca
from tests.support.dataplane import NameBackends, name_backends  # noqa: F401
from tests.support.gatewayplane import GatewayPlane

pytestmark = [pytest.mark.envoy]

LISTENERS = [
    {
        "name": "shop",
        "port": 443,
        "protocol": "HTTPS",
        "hostname": "shop.example",
        "tls": {"certificateRefs": [{"name": "shop-cert"}]},
    },
    {
        "name": "admin",
        "port": 443,
        "protocol": "HTTPS",
        "hostname": "admin.example",
        "tls": {"certificateRefs": [{"name": "admin-cert"}]},
    },
]


def route(name: str, section: str, host: str, backend: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1},
        "spec": {
            "parentRefs": [{"name": "gw", "sectionName": section}],
            "hostnames": [host],
            "rules": [{"backendRefs": [{"name": backend, "port": 80, "weight": 1}]}],
        },
    }


ROUTES = [route("shop", "shop", "shop.example", "stable"), route("admin", "admin", "admin.example", "fresh")]


def tls_secret(name: str, cert: Path, key: Path) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": base64.b64encode(cert.read_bytes()).decode(),
            "tls.key": base64.b64encode(key.read_bytes()).decode(),
        },
    }


@pytest.fixture
def pki() -> Iterator[tuple[Path, Ca]]:
    with tempfile.TemporaryDirectory(prefix="ts-https-pki-") as d:
        yield Path(d), make_ca(Path(d), "gateway-ca")


@pytest.fixture
def plane(name_backends: NameBackends) -> Iterator[GatewayPlane]:  # noqa: F811
    with tempfile.TemporaryDirectory(prefix="ts-gwhttps-") as d:
        gp = GatewayPlane.start(Path(d), name_backends, [443], tls_hosts={443: ("shop.example", "admin.example")})
        try:
            yield gp
        finally:
            gp.stop()


def get(port: int, host: str, ca: Path) -> tuple[bytes, str]:
    """GET / over TLS with SNI `host`, the CA trusted: (the served leaf's DER, the response)."""
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.set_alpn_protocols(["http/1.1"])
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    with raw, ctx.wrap_socket(raw, server_hostname=host) as s:
        der = s.getpeercert(binary_form=True)
        assert der is not None
        s.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while data := s.recv(65536):
            chunks.append(data)
    return der, b"".join(chunks).decode(errors="replace")


def get_decided(port: int, host: str, ca: Path) -> tuple[bytes, str]:
    """`get`, sent again (at most 5 times) while Envoy fails closed (503: the processor's reply came late)."""
    for _ in range(5):
        der, text = get(port, host, ca)
        if not text.startswith("HTTP/1.1 503"):
            break
    return der, text


def leaf_der(path: Path) -> bytes:
    return x509.load_pem_x509_certificate(path.read_bytes()).public_bytes(Encoding.DER)


def test_sni_picks_the_listener_its_certificate_and_its_routes(plane: GatewayPlane, pki: tuple[Path, Ca]) -> None:
    d, ca = pki
    shop = issue(d, ca, "shop.example", server=True, dns=("shop.example",), stem="shop")
    admin = issue(d, ca, "admin.example", server=True, dns=("admin.example",), stem="admin")
    secrets = [tls_secret("shop-cert", shop.cert, shop.key), tls_secret("admin-cert", admin.cert, admin.key)]
    plane.publish(LISTENERS, ROUTES, secrets)
    port = plane.ports[443]
    der, text = get_decided(port, "shop.example", ca.path)
    assert der == leaf_der(shop.cert)
    assert text.startswith("HTTP/1.1 200") and text.endswith("stable"), text[:300]
    der, text = get_decided(port, "admin.example", ca.path)
    assert der == leaf_der(admin.cert)
    assert text.startswith("HTTP/1.1 200") and text.endswith("fresh"), text[:300]
    # An SNI no listener names has no filter chain: the handshake fails.
    with pytest.raises((ssl.SSLError, ConnectionError)):
        get(port, "other.example", ca.path)


def test_a_rotated_secret_is_served_without_a_restart(plane: GatewayPlane, pki: tuple[Path, Ca]) -> None:
    d, ca = pki
    first = issue(d, ca, "shop.example", server=True, dns=("shop.example",), stem="first")
    admin = issue(d, ca, "admin.example", server=True, dns=("admin.example",), stem="admin")
    admin_secret = tls_secret("admin-cert", admin.cert, admin.key)
    plane.publish(LISTENERS, ROUTES, [tls_secret("shop-cert", first.cert, first.key), admin_secret])
    port = plane.ports[443]
    assert get_decided(port, "shop.example", ca.path)[0] == leaf_der(first.cert)
    proc = plane.envoy.proc
    assert proc is not None
    pid = proc.pid
    second = issue(d, ca, "shop.example", server=True, dns=("shop.example",), stem="second")
    assert leaf_der(second.cert) != leaf_der(first.cert)
    plane.publish(LISTENERS, ROUTES, [tls_secret("shop-cert", second.cert, second.key), admin_secret])
    deadline = time.monotonic() + 10  # the publish returns once Envoy ACKed the secret; new connections get it
    while (der := get_decided(port, "shop.example", ca.path)[0]) != leaf_der(second.cert):
        assert time.monotonic() < deadline, "the rotated certificate was never served"
        time.sleep(0.1)
    assert der == leaf_der(second.cert)
    assert plane.envoy.proc is proc and proc.pid == pid and proc.poll() is None  # the same Envoy, never restarted
    _, text = get_decided(port, "shop.example", ca.path)
    assert text.endswith("stable")
