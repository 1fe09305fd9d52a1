"""HTTPRoute timeouts, retries and RequestMirror served by real Envoy (wire/gateway_routes.py `rule_policies`): a rule
with `timeouts.request: 1s` in front of a backend that answers after 3 s answers 504 within about a second; a rule
with a `retry` stanza is retried when the backend resets the connection after taking the request
(HTTPRouteRetryConnectionError) and when an attempt outlives `timeouts.backendRequest` (HTTPRouteRetryBackendTimeout),
while a rule without one is not; and a mirror's backend receives a copy of each request while the client sees only
the primary's answers."""

from __future__ import annotations

import asyncio
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.dataplane import Connection, NameBackends, Response, name_backends  # noqa: F401
from tests.support.gatewayplane import GatewayPlane

pytestmark = [pytest.mark.envoy]

HOST = "shop.example"
LISTENERS = [{"name": "http", "port": 80, "protocol": "HTTP"}]
SLOW_SECONDS = 3.0


class _Recorder(BaseHTTPRequestHandler):
    """Answers 200 after the server's delay and records each request's path and Host."""

    def do_GET(self) -> None:
        server: _Backend = self.server  # type: ignore[assignment]
        with server.lock:
            first = all(p != self.path for p, _ in server.seen)
            server.seen.append((self.path, self.headers.get("host", "")))
        if first and "/first-reset/" in self.path:  # the request taken, then the connection reset (RST), no answer
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        time.sleep(SLOW_SECONDS if first and "/first-hang/" in self.path else server.delay)
        body = server.label.encode()
        try:
            self.send_response(200)
            self.send_header("x-backend", server.label)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the gateway gave up on it (the timeout under test)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Backend(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, label: str, delay: float) -> None:
        super().__init__(("127.0.0.1", 0), _Recorder)
        self.label, self.delay = label, delay
        self.seen: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    @property
    def port(self) -> int:
        return int(self.server_address[1])


@pytest.fixture
def backends() -> Iterator[dict[str, _Backend]]:
    servers = {
        "slow": _Backend("slow", SLOW_SECONDS),
        "shadow": _Backend("shadow", 0.0),
        "flaky": _Backend("flaky", 0.0),
    }
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers.values()]
    for t in threads:
        t.start()
    try:
        yield servers
    finally:
        for s in servers.values():
            s.shutdown()
            s.server_close()


@pytest.fixture
def plane(name_backends: NameBackends, backends: dict[str, _Backend]) -> Iterator[GatewayPlane]:  # noqa: F811
    # The name backends and these two, each a Service of the translation (tests/support/gatewayplane.services).
    every = replace(name_backends, ports={**name_backends.ports, **{n: s.port for n, s in backends.items()}})
    with tempfile.TemporaryDirectory(prefix="ts-gwtimeouts-") as d:
        gp = GatewayPlane.start(Path(d), every, [80])
        try:
            yield gp
        finally:
            gp.stop()


def _route(rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "shop", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1},
        "spec": {"parentRefs": [{"name": "gw", "sectionName": "http"}], "hostnames": [HOST], "rules": rules},
    }


ROUTES = [
    _route(
        [
            {
                "matches": [{"path": {"type": "PathPrefix", "value": "/slow"}}],
                "timeouts": {"request": "1s"},
                "backendRefs": [{"name": "slow", "port": 80}],
            },
            {
                "matches": [{"path": {"type": "PathPrefix", "value": "/retried"}}],
                "timeouts": {"backendRequest": "500ms"},
                "retry": {"attempts": 2, "backoff": "10ms"},
                "backendRefs": [{"name": "flaky", "port": 80}],
            },
            {
                "matches": [{"path": {"type": "PathPrefix", "value": "/not-retried"}}],
                "backendRefs": [{"name": "flaky", "port": 80}],
            },
            {
                "matches": [{"path": {"type": "PathPrefix", "value": "/mirrored"}}],
                "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "shadow", "port": 80}}}],
                "backendRefs": [{"name": "stable", "port": 80}],
            },
        ]
    )
]


async def _get(port: int, path: str) -> tuple[Response, float]:
    conn = Connection(port)
    try:
        start = time.monotonic()
        r = await conn.request(HOST, path, [])
        return r, time.monotonic() - start
    finally:
        conn.close()


def test_a_request_timeout_answers_504_within_it(plane: GatewayPlane, backends: dict[str, _Backend]) -> None:
    gen = plane.publish(LISTENERS, ROUTES)
    assert gen.routes is not None and gen.routes.by_rule["ns/shop.rule-0"].timeouts is not None
    r, took = asyncio.run(_get(plane.ports[80], "/slow/x"))
    print(f"\n/slow with timeouts.request 1s, backend answering after {SLOW_SECONDS} s: {r.status} in {took:.2f} s")
    assert r.status == 504
    assert 0.9 <= took < 2.0, took
    assert [p for p, _ in backends["slow"].seen] == ["/slow/x"]  # it did reach the backend: Envoy gave up on it


def test_a_rule_with_retry_retries_a_reset_connection_and_an_attempt_past_its_backend_timeout(
    plane: GatewayPlane, backends: dict[str, _Backend]
) -> None:
    plane.publish(LISTENERS, ROUTES)
    port = plane.ports[80]
    results = {}
    for path in ("/retried/first-reset/a", "/retried/first-hang/a", "/not-retried/first-reset/a"):
        r, took = asyncio.run(_get(port, path))
        attempts = sum(p == path for p, _ in backends["flaky"].seen)
        results[path] = (r.status, attempts)
        print(f"\n{path}: {r.status} in {took:.2f} s after {attempts} attempt(s) at the backend")
    # Reset after the backend took the request: retried by the rule's stanza (a connection error).
    assert results["/retried/first-reset/a"] == (200, 2)
    # The first attempt outlives backendRequest (500 ms): Envoy gives up on it and tries again.
    assert results["/retried/first-hang/a"] == (200, 2)
    # Without a retry stanza the same reset is not retried (the request had reached the application).
    status, attempts = results["/not-retried/first-reset/a"]
    assert attempts == 1 and status in (502, 503), results


def test_a_mirrors_backend_gets_copies_the_client_never_sees(
    plane: GatewayPlane, backends: dict[str, _Backend]
) -> None:
    plane.publish(LISTENERS, ROUTES)
    answers = [asyncio.run(_get(plane.ports[80], f"/mirrored/{i}"))[0] for i in range(20)]
    assert [(r.status, r.header("x-backend")) for r in answers] == [(200, "stable")] * 20
    deadline = time.monotonic() + 5  # a copy is sent beside the request, not before its answer
    while len(backends["shadow"].seen) < 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    seen = sorted(backends["shadow"].seen)
    print(f"\nmirrored: {len(seen)} copies of 20 requests at the mirror's backend; the client saw 20 of stable's")
    assert sorted(p for p, _ in seen) == sorted(f"/mirrored/{i}" for i in range(20))
    # Envoy marks a mirrored request's authority with `-shadow`.
    assert {h for _, h in seen} == {f"{HOST}-shadow"}
