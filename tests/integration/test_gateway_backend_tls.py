"""BackendTLSPolicy served by real Envoy: TLS from the gateway to a backend, against real TLS servers (Python `ssl`,
certificates from tests/support/certs.py) that record the SNI each handshake carried and every request they answered.

One Gateway, one HTTP listener, one route per case (by hostname), each to its own Service and server, so a policy's
effect is seen on its server alone: the policy's hostname is the SNI and the name the certificate must carry, its
ConfigMap's CA the only trust anchor, its subjectAltNames (URI) the names checked instead of the hostname; a failed
verification is a 503 to the client (Envoy's `ssl.fail_verify_*` stats say which check refused it), and a policy
whose ConfigMap does not exist leaves its port without endpoints: no connection at all, never cleartext.

A second Gateway (its own data plane) has `spec.tls.backend.clientCertificateRef`: the Secret's certificate is what
its Envoy presents in every TLS handshake with a backend, which a server that requires a client certificate of its
CA then accepts; the first Gateway has none, and that same kind of server refuses its handshakes.
"""

from __future__ import annotations

import base64
import http.client
import re
import ssl
import tempfile
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socket import socket
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from tests.support.certs import Ca, Leaf, issue, make_ca
from tests.support.dataplane import NameBackends, name_backends  # noqa: F401
from tests.support.gatewayplane import NAMESPACE, GatewayPlane
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.tls import Certificate

pytestmark = [pytest.mark.envoy]

CERT_HOST = "abc.example.com"  # the name every backend's certificate carries (a DNS SAN)
SPIFFE = "spiffe://abc.example.com/test-identity"  # and the URI SAN it carries
HANDSHAKE_TIMEOUT = 10.0  # seconds a backend waits on a peer (a stuck handshake or an idle keep-alive connection)
CLIENT_CN = "gw-backend-client"  # the CN of the certificate the second Gateway's spec.tls.backend names
CLIENT_SECRET = "backend-client"  # the kubernetes.io/tls Secret holding it


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

    def __init__(self, name: str, leaf: Leaf, client_ca: Path | None = None) -> None:
        """`client_ca`: the server requires a client certificate that CA signed (and records each one's CN)."""
        self.name = name
        self.lock = threading.Lock()
        self.connections = 0
        self.requests = 0
        self.snis: list[str | None] = []
        self.handshake_errors: list[str] = []
        self.peer_cns: list[str] = []  # the subject CN of each verified client certificate (client_ca only)
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(str(leaf.cert), str(leaf.key))
        if client_ca is not None:
            self.ctx.verify_mode = ssl.CERT_REQUIRED
            self.ctx.load_verify_locations(cafile=str(client_ca))
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
        if self.ctx.verify_mode == ssl.CERT_REQUIRED:
            der = conn.getpeercert(binary_form=True)  # verified: CERT_REQUIRED fails the handshake without one
            subject = x509.load_der_x509_certificate(der).subject if der else None
            cns = [str(a.value) for a in subject.get_attributes_for_oid(NameOID.COMMON_NAME)] if subject else []
            with self.lock:
                self.peer_cns.extend(cns or ["<no CN>"])
        with conn:
            _Handler(conn, client_address, self)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a keep-alive connection Envoy dropped mid-read: nothing the tests read

    def seen(self) -> tuple[int, int, list[str | None]]:
        with self.lock:
            return self.connections, self.requests, list(self.snis)

    def clients(self) -> tuple[list[str], list[str]]:
        """The CNs of the client certificates it verified, and its handshake errors."""
        with self.lock:
            return list(self.peer_cns), list(self.handshake_errors)

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
    client_certificate: bool = False  # its server requires a client certificate of the client CA

    @property
    def host(self) -> str:
        return f"{self.name}.test"  # the route's hostname


GOOD = Case("good", CERT_HOST, "backend-ca")
HOST_MISMATCH = Case("host-mismatch", "mismatch.example.com", "backend-ca")
CA_MISMATCH = Case("ca-mismatch", CERT_HOST, "other-ca")
URI_OK = Case("uri-ok", CERT_HOST, "backend-ca", (SPIFFE,))
URI_BAD = Case("uri-bad", CERT_HOST, "backend-ca", ("spiffe://abc.example.com/someone-else",))
NO_CONFIGMAP = Case("no-configmap", CERT_HOST, None)
CLIENT_CERT = Case("client-cert", CERT_HOST, "backend-ca", client_certificate=True)
CASES = (GOOD, HOST_MISMATCH, CA_MISMATCH, URI_OK, URI_BAD, NO_CONFIGMAP, CLIENT_CERT)  # the Gateway without one
MTLS_CASES = (GOOD, CLIENT_CERT)  # the Gateway with spec.tls.backend.clientCertificateRef
BACKEND = {"clientCertificateRef": {"group": "", "kind": "Secret", "name": CLIENT_SECRET}}  # its spec.tls.backend

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


def tls_secret(name: str, leaf: Leaf) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NAMESPACE},
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": base64.b64encode(leaf.cert.read_bytes()).decode(),
            "tls.key": base64.b64encode(leaf.key.read_bytes()).decode(),
        },
    }


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
        secrets = self.plane.envoy.admin_get("/config_dump?resource=dynamic_active_secrets")[1]
        return "\n".join(
            [
                *(f"{k}: {v}" for k, v in sorted(stats.items()) if v),
                *(f"{n}: seen={s.seen()} clients={s.clients()[0]}" for n, s in self.servers.items()),
                *(f"{n}: errors={s.clients()[1][-2:]}" for n, s in self.servers.items()),
                "active secrets: " + ", ".join(sorted(set(re.findall(r'"name": "([^"]+)"', secrets)))),
                self.plane.envoy.log_tail(20),
            ]
        )


@dataclass(frozen=True)
class Pki:
    directory: Path
    backend_ca: Ca  # signs the servers' certificate (leaf)
    other_ca: Ca  # signs nothing here
    client_ca: Ca  # signs the client certificates the servers that require one accept
    leaf: Leaf  # every server's certificate


@pytest.fixture(scope="module")
def pki() -> Iterator[Pki]:
    with tempfile.TemporaryDirectory(prefix="ts-gwbtls-pki-") as tmp:
        d = Path(tmp)
        backend_ca = make_ca(d, "backend-ca")
        leaf = issue(d, backend_ca, CERT_HOST, server=True, dns=(CERT_HOST,), uris=(SPIFFE,), stem="backend")
        yield Pki(d, backend_ca, make_ca(d, "other-ca"), make_ca(d, "client-ca"), leaf)


@contextmanager
def serving(
    base: NameBackends,
    pki: Pki,
    cases: tuple[Case, ...],
    backend: dict[str, Any] | None = None,
    secrets: tuple[dict[str, Any], ...] = (),
) -> Iterator[World]:
    """A Gateway data plane with a route, a Service, a server and a policy per case; `backend`: its spec.tls.backend
    (`secrets` the Secrets it names)."""
    client_ca = pki.client_ca.path
    servers = {c.name: TlsBackend(c.name, pki.leaf, client_ca if c.client_certificate else None) for c in cases}
    with tempfile.TemporaryDirectory(prefix="ts-gwbtls-") as tmp, ExitStack() as stack:
        for s in servers.values():
            stack.enter_context(s)
        # The GatewayPlane makes a Service (port 80, named http) and an EndpointSlice per backend name: the TLS
        # servers' loopback ports stand in for the pods.
        backends = NameBackends(base.envoy, {n: s.port for n, s in servers.items()})
        plane = GatewayPlane.start(Path(tmp), backends, [80])
        stack.callback(plane.stop)
        gen = plane.publish(
            LISTENERS,
            [route(c) for c in cases],
            secrets=secrets,
            configmaps=[ca_configmap("backend-ca", pki.backend_ca), ca_configmap("other-ca", pki.other_ca)],
            backend_tls=[policy(c) for c in cases],
            backend=backend,
        )
        yield World(plane, servers, gen)


@pytest.fixture(scope="module")
def world(name_backends: NameBackends, pki: Pki) -> Iterator[World]:  # noqa: F811
    """The Gateway without spec.tls.backend: it presents no client certificate."""
    with serving(name_backends, pki, CASES) as w:
        yield w


@pytest.fixture(scope="module")
def client_leaf(pki: Pki) -> Leaf:
    return issue(pki.directory, pki.client_ca, CLIENT_CN, server=False, stem=CLIENT_SECRET)


@pytest.fixture(scope="module")
def mtls_world(
    name_backends: NameBackends,  # noqa: F811
    pki: Pki,
    client_leaf: Leaf,
) -> Iterator[World]:
    """The Gateway with spec.tls.backend.clientCertificateRef naming the client CA's certificate."""
    with serving(name_backends, pki, MTLS_CASES, BACKEND, (tls_secret(CLIENT_SECRET, client_leaf),)) as w:
        yield w


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


# --- the Gateway's client certificate (spec.tls.backend) ----------------------------------------------------------


def test_the_client_certificate_is_in_the_generation(world: World, mtls_world: World, client_leaf: Leaf) -> None:
    """The translation resolved spec.tls.backend to the Secret's certificate and put it on the Gateway's routes (what
    the data plane serves over SDS); the Gateway is Accepted with ResolvedRefs True. Without it: none, no condition."""
    routes = mtls_world.gen.routes
    assert routes is not None
    assert routes.backend_client_certificate == Certificate(client_leaf.cert.read_bytes(), client_leaf.key.read_bytes())
    translation = mtls_world.plane.translation
    assert translation is not None
    (status,) = translation.gateways
    conditions = {c.type: (c.status, c.reason) for c in status.conditions}
    assert conditions.get("Accepted", ("?",))[0] == "True", status.conditions
    assert conditions.get("ResolvedRefs") == ("True", "ResolvedRefs"), status.conditions
    # Every TLS backend keeps its policy: the certificate is presented on those handshakes, not instead of them.
    tls = {b.service: b.tls for s in mtls_world.gen.splits for b in s.backends}
    assert set(tls) == {c.name for c in MTLS_CASES} and all(t is not None for t in tls.values()), tls

    assert world.gen.routes is not None and world.gen.routes.backend_client_certificate is None
    assert world.plane.translation is not None
    (plain,) = world.plane.translation.gateways
    assert "ResolvedRefs" not in {c.type for c in plain.conditions}, plain.conditions


def test_the_gateways_client_certificate_is_presented_to_a_backend_that_requires_one(mtls_world: World) -> None:
    status, body = get(mtls_world.plane.ports[80], CLIENT_CERT.host)
    assert (status, body) == (200, CLIENT_CERT.name), (status, body, mtls_world.diagnostics())
    server = mtls_world.servers[CLIENT_CERT.name]
    _, requests, snis = server.seen()
    cns, _ = server.clients()
    assert requests >= 1 and set(snis) == {CERT_HOST}, (requests, snis)
    assert cns and set(cns) == {CLIENT_CN}, (cns, mtls_world.diagnostics())  # the Secret's certificate, every time
    assert mtls_world.cluster_stat(CLIENT_CERT, "ssl.handshake") >= 1, mtls_world.diagnostics()
    # A TLS backend that asks for no client certificate is served by the same data plane as before.
    status, body = get(mtls_world.plane.ports[80], GOOD.host)
    assert (status, body) == (200, GOOD.name), (status, body, mtls_world.diagnostics())


def test_without_spec_tls_backend_no_client_certificate_is_presented(world: World) -> None:
    """The Gateway without spec.tls.backend shows no certificate: the backend that requires one refuses the
    handshake, so the client gets a 5xx and the backend answers nothing."""
    status, body = get(world.plane.ports[80], CLIENT_CERT.host)
    assert 500 <= status < 600 and body != CLIENT_CERT.name, (status, body, world.diagnostics())
    server = world.servers[CLIENT_CERT.name]
    connections, requests, snis = server.seen()
    cns, errors = server.clients()
    assert requests == 0 and not cns, (requests, cns, world.diagnostics())
    assert connections >= 1 and set(snis) == {CERT_HOST}, (connections, snis)
    # The server's refusal: Envoy sent no certificate (not a failure of the server's own, which the policy checks).
    assert errors and all("PEER_DID_NOT_RETURN_A_CERTIFICATE" in e for e in errors), errors
    assert world.cluster_stat(CLIENT_CERT, "ssl.handshake") == 0, world.diagnostics()
    assert world.cluster_stat(CLIENT_CERT, "ssl.connection_error") >= 1, world.diagnostics()  # Envoy's side of it
