"""BackendTLSPolicy served by real Envoy: TLS from the gateway to a backend, against real TLS servers (Python `ssl`,
certificates from tests/support/certs.py) that record the SNI each handshake carried and every request they answered.

One Gateway, one HTTP listener, one route per case (by hostname), each to its own Service and server, so a policy's
effect is seen on its server alone: the policy's hostname is the SNI and the name the certificate must carry, its
ConfigMap's CA the only trust anchor, its subjectAltNames (URI) the names checked instead of the hostname; a failed
verification is a 503 to the client (Envoy's `ssl.fail_verify_*` stats say which check refused it), and a policy
whose ConfigMap does not exist leaves its port without endpoints: no connection at all, never cleartext.
"""

from __future__ import annotations

import http.client
import re
import ssl
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socket import socket
from typing import Any

import pytest

from tests.support.certs import Ca, Leaf, issue, make_ca
from tests.support.dataplane import NameBackends, name_backends  # noqa: F401
from tests.support.gatewayplane import NAMESPACE, GatewayPlane
from trafficsplit.core.model.generation import Generation

pytestmark = [pytest.mark.envoy]

CERT_HOST = "abc.example.com"  # the name every backend's certificate carries (a DNS SAN)
SPIFFE = "spiffe://abc.example.com/test-identity"  # and the URI SAN it carries
HANDSHAKE_TIMEOUT = 10.0  # seconds a backend waits on a peer (a stuck handshake or an idle keep-alive connection)


# --- the TLS backends ---------------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as Envoy talks to upstreams
    server_version = "tlsbackend"
    server: TlsBackend

    def do_GET(self) -> None:
        self.server.count_request()
        body = self.server.name.encode()
        self.send_response(200)
        self.send_header("x-backend", self.server.name)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class TlsBackend(ThreadingHTTPServer):
    """An HTTPS server on a free loopback port answering 200 with its name; it counts the connections it accepted,
    the handshakes that failed and the requests it answered, and records each ClientHello's SNI (None: none sent).
    The handshake runs in the connection's own thread, so a failing or stuck peer never blocks the accept loop."""

    daemon_threads = True

    def __init__(self, name: str, leaf: Leaf) -> None:
        self.name = name
        self.lock = threading.Lock()
        self.connections = 0
        self.requests = 0
        self.snis: list[str | None] = []
        self.handshake_errors: list[str] = []
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(str(leaf.cert), str(leaf.key))
        self.ctx.sni_callback = self._sni
        super().__init__(("127.0.0.1", 0), _Handler)
        self.port = self.server_address[1]
        self.thread = threading.Thread(target=self.serve_forever, name=f"tls-backend-{name}", daemon=True)

    def _sni(self, _conn: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _ctx: ssl.SSLContext) -> None:
        with self.lock:
            self.snis.append(server_name)

    def count_request(self) -> None:
        with self.lock:
            self.requests += 1

    def finish_request(self, request: Any, client_address: Any) -> None:
        raw: socket = request
        with self.lock:
            self.connections += 1
        raw.settimeout(HANDSHAKE_TIMEOUT)
        try:
            conn = self.ctx.wrap_socket(raw, server_side=True)
        except OSError as exc:  # ssl.SSLError too: the peer refused our certificate, or spoke no TLS
            with self.lock:
                self.handshake_errors.append(f"{type(exc).__name__}: {exc}")
            return
        with conn:
            _Handler(conn, client_address, self)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a keep-alive connection Envoy dropped mid-read: nothing the tests read

    def seen(self) -> tuple[int, int, list[str | None]]:
        with self.lock:
            return self.connections, self.requests, list(self.snis)

    def __enter__(self) -> TlsBackend:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
        self.thread.join(5)


# --- the cases ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str  # the Service, its server, the route and the policy
    hostname: str  # the policy's validation.hostname
    configmap: str | None  # the ConfigMap its caCertificateRefs name (None: one that does not exist)
    uris: tuple[str, ...] = ()  # its subjectAltNames, type URI

    @property
    def host(self) -> str:
        return f"{self.name}.test"  # the route's hostname


GOOD = Case("good", CERT_HOST, "backend-ca")
HOST_MISMATCH = Case("host-mismatch", "mismatch.example.com", "backend-ca")
CA_MISMATCH = Case("ca-mismatch", CERT_HOST, "other-ca")
URI_OK = Case("uri-ok", CERT_HOST, "backend-ca", (SPIFFE,))
URI_BAD = Case("uri-bad", CERT_HOST, "backend-ca", ("spiffe://abc.example.com/someone-else",))
NO_CONFIGMAP = Case("no-configmap", CERT_HOST, None)
CASES = (GOOD, HOST_MISMATCH, CA_MISMATCH, URI_OK, URI_BAD, NO_CONFIGMAP)

LISTENERS = [{"name": "http", "port": 80, "protocol": "HTTP"}]


def route(case: Case) -> dict[str, Any]:
    return {
        "metadata": {"name": case.name, "namespace": NAMESPACE, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "parentRefs": [{"name": "gw", "sectionName": "http"}],
            "hostnames": [case.host],
            "rules": [{"backendRefs": [{"name": case.name, "port": 80, "weight": 1}]}],
        },
    }


def policy(case: Case) -> dict[str, Any]:
    validation: dict[str, Any] = {
        "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": case.configmap or "not-there"}],
        "hostname": case.hostname,
    }
    if case.uris:
        validation["subjectAltNames"] = [{"type": "URI", "uri": u} for u in case.uris]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "BackendTLSPolicy",
        "metadata": {
            "name": case.name,
            "namespace": NAMESPACE,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "generation": 1,
        },
        "spec": {
            "targetRefs": [{"group": "", "kind": "Service", "name": case.name, "sectionName": "http"}],
            "validation": validation,
        },
    }


def ca_configmap(name: str, ca: Ca) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NAMESPACE}, "data": {"ca.crt": ca.path.read_text()}}


# --- the client ---------------------------------------------------------------------------------------------------


def get(port: int, host: str) -> tuple[int, str]:
    """One request, decisive: these single-backend rules are Envoy's own routes (the processor is never called) and
    the generation is ACKed before any request, so a 503 is the TLS check's (or the empty port's), not a late one."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/", headers={"Host": host, "Connection": "close"})
        r = conn.getresponse()
        return r.status, r.read().decode(errors="replace")
    finally:
        conn.close()


# --- the fixture --------------------------------------------------------------------------------------------------


@dataclass
class World:
    plane: GatewayPlane
    servers: dict[str, TlsBackend]
    gen: Generation

    def cluster_stat(self, case: Case, stat: str) -> int:
        """Envoy's `cluster.<cluster>.<stat>` summed over the clusters of `case`'s Service (one: its backend)."""
        clusters = {b.cluster for s in self.gen.splits for b in s.backends if b.service == case.name}
        assert clusters, (case, self.gen.splits)
        stats = self.plane.envoy.stats("|".join(f"^cluster[.]{re.escape(c)}[.]{re.escape(stat)}$" for c in clusters))
        return sum(stats.values())

    def diagnostics(self) -> str:
        stats = self.plane.envoy.stats(r"^cluster[.].*[.](ssl[.].*|upstream_cx_(total|connect_fail|none_healthy))$")
        return "\n".join(
            [
                *(f"{k}: {v}" for k, v in sorted(stats.items()) if v),
                *(f"{n}: seen={s.seen()} errors={s.handshake_errors[-2:]}" for n, s in self.servers.items()),
                self.plane.envoy.log_tail(20),
            ]
        )


@pytest.fixture(scope="module")
def world(name_backends: NameBackends) -> Iterator[World]:  # noqa: F811
    with tempfile.TemporaryDirectory(prefix="ts-gwbtls-") as tmp:
        d = Path(tmp)
        backend_ca, other_ca = make_ca(d, "backend-ca"), make_ca(d, "other-ca")
        leaf = issue(d, backend_ca, CERT_HOST, server=True, dns=(CERT_HOST,), uris=(SPIFFE,), stem="backend")
        servers = {c.name: TlsBackend(c.name, leaf) for c in CASES}
        for s in servers.values():
            s.__enter__()
        try:
            # The GatewayPlane makes a Service (port 80, named http) and an EndpointSlice per backend name: the TLS
            # servers' loopback ports stand in for the pods.
            backends = NameBackends(name_backends.envoy, {n: s.port for n, s in servers.items()})
            plane = GatewayPlane.start(d, backends, [80])
            try:
                gen = plane.publish(
                    LISTENERS,
                    [route(c) for c in CASES],
                    configmaps=[ca_configmap("backend-ca", backend_ca), ca_configmap("other-ca", other_ca)],
                    backend_tls=[policy(c) for c in CASES],
                )
                yield World(plane, servers, gen)
            finally:
                plane.stop()
        finally:
            for s in servers.values():
                s.__exit__()


# --- the tests ----------------------------------------------------------------------------------------------------


def test_the_policy_is_in_the_generation(world: World) -> None:
    """The translation put each policy on its Service's backend: what the Envoy tests below then check is served."""
    tls = {b.service: b.tls for s in world.gen.splits for b in s.backends}
    assert set(tls) == {c.name for c in CASES}
    for c in (GOOD, HOST_MISMATCH, CA_MISMATCH, URI_OK, URI_BAD):
        t = tls[c.name]
        assert t is not None and t.sni == c.hostname and t.ca is not None, (c, t)
        assert tuple(n.value for n in t.subject_alt_names) == c.uris
    # No usable CA: no TLS to offer, and no endpoint to speak cleartext to.
    refused = [b for s in world.gen.splits for b in s.backends if b.service == NO_CONFIGMAP.name]
    assert refused and all(b.tls is None and not b.endpoints for b in refused), refused


def test_tls_to_the_backend_with_the_policys_hostname_as_sni(world: World) -> None:
    status, body = get(world.plane.ports[80], GOOD.host)
    assert (status, body) == (200, GOOD.name), (status, body, world.diagnostics())
    connections, requests, snis = world.servers[GOOD.name].seen()
    assert requests >= 1 and connections >= 1
    assert snis and set(snis) == {CERT_HOST}, snis  # every handshake named the policy's hostname
    assert world.cluster_stat(GOOD, "ssl.handshake") >= 1, world.diagnostics()


def refused(world: World, case: Case, failed_check: str) -> None:
    """Every request to `case` is a 5xx and none reached its server, whose certificate Envoy refused by `failed_check`
    (an `ssl.` stat of the case's cluster) after a handshake that carried the policy's hostname as SNI."""
    for _ in range(3):
        status, body = get(world.plane.ports[80], case.host)
        assert 500 <= status < 600 and body != case.name, (case, status, body, world.diagnostics())
    connections, requests, snis = world.servers[case.name].seen()
    assert requests == 0, (case, requests)
    assert connections >= 1 and snis and set(snis) == {case.hostname}, (case, connections, snis)
    assert world.cluster_stat(case, failed_check) >= 1, (case, world.diagnostics())
    assert world.cluster_stat(case, "ssl.handshake") == 0, (case, world.diagnostics())


def test_a_certificate_that_does_not_name_the_hostname_is_refused(world: World) -> None:
    refused(world, HOST_MISMATCH, "ssl.fail_verify_san")


def test_a_certificate_another_ca_signed_is_refused(world: World) -> None:
    refused(world, CA_MISMATCH, "ssl.fail_verify_error")


def test_subject_alt_names_are_checked_instead_of_the_hostname(world: World) -> None:
    status, body = get(world.plane.ports[80], URI_OK.host)
    assert (status, body) == (200, URI_OK.name), (status, body, world.diagnostics())
    _, requests, snis = world.servers[URI_OK.name].seen()
    assert requests >= 1 and set(snis) == {CERT_HOST}, (requests, snis)
    # A URI the certificate does not carry: refused, though the certificate names the hostname (only SNI, now).
    refused(world, URI_BAD, "ssl.fail_verify_san")


def test_a_policy_whose_configmap_is_missing_fails_closed(world: World) -> None:
    for _ in range(3):
        status, body = get(world.plane.ports[80], NO_CONFIGMAP.host)
        assert status == 503 and body != NO_CONFIGMAP.name, (status, body, world.diagnostics())
    # Not a connection, so not a cleartext request either.
    assert world.servers[NO_CONFIGMAP.name].seen() == (0, 0, []), world.diagnostics()
    assert world.cluster_stat(NO_CONFIGMAP, "upstream_cx_total") == 0, world.diagnostics()
