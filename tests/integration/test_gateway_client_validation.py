"""Client certificate validation (a Gateway's `spec.tls.frontend`) served by real Envoy: port 443 takes the default
validation (AllowValidOnly: no request without a certificate the ConfigMap's CA signed), port 8443 a per-port one
(AllowInsecureFallback: asked for, any or none served). The CA bundle reaches Envoy over SDS with the generation;
the mode is the listener's, from the bootstrap's `:mtls` flag, as the provisioner renders it."""

from __future__ import annotations

import socket
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_gateway_https import route, tls_secret
from tests.support.certs import Ca, Leaf, issue, make_ca
from tests.support.dataplane import NameBackends, name_backends  # noqa: F401
from tests.support.gatewayplane import GatewayPlane
from trafficsplit.core.model.tls import ClientCertificates

pytestmark = [pytest.mark.envoy]

HOST = "shop.example"
LISTENERS = [
    {"name": name, "port": port, "protocol": "HTTPS", "hostname": HOST, "tls": {"certificateRefs": [{"name": "cert"}]}}
    for name, port in (("strict", 443), ("lenient", 8443))
]
ROUTES = [route("strict", "strict", HOST, "stable"), route("lenient", "lenient", HOST, "fresh")]
CA_REF = [{"group": "", "kind": "ConfigMap", "name": "clients"}]
FRONTEND = {
    "default": {"validation": {"caCertificateRefs": CA_REF}},
    "perPort": [{"port": 8443, "tls": {"validation": {"mode": "AllowInsecureFallback", "caCertificateRefs": CA_REF}}}],
}


def ca_configmap(ca: Ca) -> dict[str, Any]:
    return {"metadata": {"name": "clients", "namespace": "ns"}, "data": {"ca.crt": ca.path.read_text()}}


def answer(port: int, server_ca: Path, client: Leaf | None) -> str | None:
    """GET / over TLS (SNI HOST), presenting `client`'s certificate when given: the response, or None when the
    handshake or the request was refused (TLS 1.3 reports a refused client certificate at the first read)."""
    ctx = ssl.create_default_context(cafile=str(server_ca))
    ctx.set_alpn_protocols(["http/1.1"])
    if client is not None:
        ctx.load_cert_chain(str(client.cert), str(client.key))
    try:
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        with raw, ctx.wrap_socket(raw, server_hostname=HOST) as s:
            s.sendall(f"GET / HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
            chunks = []
            while data := s.recv(65536):
                chunks.append(data)
    except (ssl.SSLError, ConnectionError):
        return None
    return b"".join(chunks).decode(errors="replace") or None


def decided(port: int, server_ca: Path, client: Leaf | None) -> str | None:
    """`answer`, sent again (at most 5 times) while Envoy fails closed (503: the processor's reply came late)."""
    text = None
    for _ in range(5):
        text = answer(port, server_ca, client)
        if text is None or not text.startswith("HTTP/1.1 503"):
            break
    return text


@pytest.fixture
def plane(name_backends: NameBackends) -> Iterator[GatewayPlane]:  # noqa: F811
    with tempfile.TemporaryDirectory(prefix="ts-gwmtls-") as d:
        gp = GatewayPlane.start(
            Path(d),
            name_backends,
            [443, 8443],
            tls_hosts={443: (HOST,), 8443: (HOST,)},
            client_certificates={443: ClientCertificates.REQUIRE, 8443: ClientCertificates.OPTIONAL},
        )
        try:
            yield gp
        finally:
            gp.stop()


def test_a_port_validates_client_certificates_against_its_configmaps_ca(plane: GatewayPlane) -> None:
    with tempfile.TemporaryDirectory(prefix="ts-mtls-pki-") as tmp:
        d = Path(tmp)
        server_ca, client_ca, other_ca = (make_ca(d, n) for n in ("server-ca", "client-ca", "other-ca"))
        server = issue(d, server_ca, HOST, server=True, dns=(HOST,), stem="server")
        trusted = issue(d, client_ca, "alice", server=False, stem="alice")
        stranger = issue(d, other_ca, "mallory", server=False, stem="mallory")
        gen = plane.publish(
            LISTENERS,
            ROUTES,
            [tls_secret("cert", server.cert, server.key)],
            frontend=FRONTEND,
            configmaps=[ca_configmap(client_ca)],
        )
        assert gen.routes is not None
        validations = {lr.port: lr.client_validation for lr in gen.routes.listeners}
        assert validations[443] is not None and not validations[443].insecure_fallback
        assert validations[8443] is not None and validations[8443].insecure_fallback

        strict, lenient = plane.ports[443], plane.ports[8443]
        ok = decided(strict, server_ca.path, trusted)
        assert ok is not None and ok.startswith("HTTP/1.1 200") and ok.endswith("stable"), ok
        # AllowValidOnly: no certificate, or one another CA signed, is no request at all.
        assert decided(strict, server_ca.path, None) is None
        assert decided(strict, server_ca.path, stranger) is None
        # AllowInsecureFallback: each of the three is served.
        for client in (trusted, None, stranger):
            text = decided(lenient, server_ca.path, client)
            assert text is not None and text.startswith("HTTP/1.1 200") and text.endswith("fresh"), (client, text)
