"""Edge hardening through a real Envoy: what a client sends that a backend must not see, path normalisation, the
overload manager's connection limit, and a dead endpoint ejected before its endpoint leaves (outlier detection plus
a retry on another endpoint for requests that never reached the dead one).

The name backends echo what they received (`x-seen-*` response headers, tests/support/dataplane.py `ECHOED`), so every
assertion here is about what the backend saw, not about Envoy's config.
"""

from __future__ import annotations

import asyncio
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.dataplane import Dataplane, NameBackends, fetch_all, split_doc
from tests.support.waiting import poll
from trafficsplit.wire.envoy import GATEWAY_FAILURES_TO_EJECT, ROUTING_HEADER

pytestmark = [pytest.mark.envoy]

HOST = "shop.example"


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="ts-edge-") as d:
        yield Path(d)


@pytest.mark.parametrize("processor_up", [True, False])
def test_backends_never_see_the_routing_header(dataplane: Dataplane, processor_up: bool) -> None:
    dataplane.publish([split_doc(HOST, {"stable": 50, "canary": 50}, sticky=True)])
    if not processor_up:
        dataplane.processor.kill()
    for forged in (None, "default/split-0/canary", "trafficsplit_extproc"):
        r = dataplane.get(HOST, headers={ROUTING_HEADER: forged} if forged else {})
        assert r.status == 200, r
        # The processor set the header (when up) and the route read it; the backend gets neither copy.
        assert r.header("x-seen-cluster") is None, (forged, r.headers)


def test_a_clients_forwarded_for_does_not_reach_backends(dataplane: Dataplane) -> None:
    dataplane.publish([split_doc(HOST, {"stable": 100})])
    claims = {"x-forwarded-for": "6.6.6.6, 7.7.7.7", "x-real-ip": "6.6.6.6", "forwarded": "for=6.6.6.6"}
    r = dataplane.get(HOST, headers=claims)
    assert r.status == 200
    # No trusted proxy in front (the default): the backend sees one address, Envoy's own view of the client (for a
    # loopback peer Envoy writes its node's address: measured 192.0.2.2 here), and none of the client's claims.
    xff = r.header("x-seen-xff")
    assert xff is not None and "," not in xff and "6.6.6.6" not in xff, r.headers
    assert r.header("x-seen-external") == "127.0.0.1", r.headers


def test_a_client_cannot_choose_its_request_id(dataplane: Dataplane) -> None:
    """The request id is the key of a split without a sticky cookie: an external client's own value is replaced by
    Envoy's (use_remote_address), so a client cannot steer which backend its requests are weighed onto."""
    dataplane.publish([split_doc(HOST, {"stable": 50, "canary": 50})])
    seen = {dataplane.get(HOST, headers={"x-request-id": "chosen"}).header("x-seen-request-id") for _ in range(5)}
    assert "chosen" not in seen and None not in seen and len(seen) == 5, seen


def test_trusted_hops_take_the_client_address_from_the_trusted_proxy(
    name_backends: NameBackends, workdir: Path
) -> None:
    dp = Dataplane.start(workdir, name_backends, bootstrap={"xff_num_trusted_hops": 1})
    try:
        dp.publish([split_doc(HOST, {"stable": 100})])
        r = dp.get(HOST, headers={"x-forwarded-for": "6.6.6.6"})
        assert r.status == 200
        # One trusted hop (our loopback peer) vouches for 6.6.6.6: it is the client, and the chain is kept.
        xff = r.header("x-seen-xff") or ""
        assert xff.startswith("6.6.6.6,") and xff.count(",") == 1, r.headers
        assert r.header("x-seen-external") == "6.6.6.6", r.headers
    finally:
        dp.stop()


def test_paths_are_normalised_before_routing_and_escaped_slashes_redirect(dataplane: Dataplane) -> None:
    dataplane.publish([split_doc(HOST, {"stable": 100})])
    r = dataplane.get(HOST, "//a/./b/../c//d")
    assert r.status == 200 and r.header("x-seen-path") == "/a/c/d", r.headers
    r = dataplane.get(HOST, "/a%2Fb")
    assert r.status == 307 and r.header("location") == "/a/b", r.headers
    # A header with an underscore could alias a dashed one at the backend: refused.
    assert dataplane.get(HOST, headers={"x_user": "admin"}).status == 400


def test_envoy_starts_without_the_unbounded_connections_warning(dataplane: Dataplane) -> None:
    dataplane.publish([split_doc(HOST, {"stable": 100})])
    assert dataplane.get(HOST).status == 200
    log = dataplane.envoy.log_path.read_text()
    assert "no configured limit" not in log.lower(), log


def _request(sock: socket.socket) -> bytes:
    sock.sendall(f"GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
    return sock.recv(4096)


def test_the_global_connection_limit_closes_connections_beyond_it(name_backends: NameBackends, workdir: Path) -> None:
    limit = 3
    dp = Dataplane.start(workdir, name_backends, bootstrap={"max_connections": limit})
    try:
        dp.publish([split_doc(HOST, {"stable": 100})])
        held = [socket.create_connection(("127.0.0.1", dp.port), timeout=5) for _ in range(limit)]
        try:
            for s in held:
                assert _request(s).startswith(b"HTTP/1.1 200"), "a connection within the limit is served"
            with socket.create_connection(("127.0.0.1", dp.port), timeout=5) as extra:
                try:
                    answer = _request(extra)
                except ConnectionResetError:
                    answer = b""
                assert answer == b"", answer  # closed at accept, no request served
            # Envoy's listener closes the refused socket first and counts the refusal after (TcpListenerImpl: close(),
            # then onReject() increments the counter, on the worker thread), so a client that has seen the close can
            # read the counter one behind: measured 5 of 200 immediate reads at 0 here, each at 1 within 0.2 s.
            # Wait for the count itself, bounded.
            poll(
                lambda: sum(dp.envoy.stats("downstream_global_cx_overflow").values()) >= 1,
                10,
                "downstream_global_cx_overflow to count the refused connection",
            )
        finally:
            for s in held:
                s.close()
        # Below the limit again: served.
        poll(lambda: dp.get(HOST).status == 200, 10, "a connection once the others closed")
    finally:
        dp.stop()


@pytest.mark.parametrize("endpoint_affinity", [False, True], ids=["round-robin", "ring-hash"])
def test_a_dead_endpoint_is_ejected_and_costs_no_client_a_failure(
    dataplane: Dataplane, workdir: Path, endpoint_affinity: bool
) -> None:
    """One of two endpoints of a backend dies while its endpoint is still published (a crashed pod before the
    EndpointSlice catches up): requests that hit it are retried on the live one, and after a bounded number of
    connect failures outlier detection ejects it, so it gets no more attempts and no client sees a failure. With
    endpoint affinity the processor names the pod (override_host) and keeps naming the dead one until its endpoint
    leaves the generation: every such request costs a refused connection and is retried on another endpoint
    (measured: 216 connect failures for 400 requests, none failed at the client), so there only the zero is
    asserted; the ejection does not stop an overridden host (a known limit, docs/security.md)."""
    doomed = NameBackends.start(workdir, names=("doomed",))
    try:
        dataplane.publish(
            [split_doc(HOST, {"stable": 100}, debug=False, endpoint_affinity=endpoint_affinity)],
            endpoints={"stable": ["pod-a", doomed.endpoint("doomed")]},
        )
        before = asyncio.run(fetch_all(dataplane.port, [(HOST, [])] * 40, concurrency=4))
        assert {r.backend for r in before} == {"pod-a", "doomed"}, "both endpoints serve before the crash"
    finally:
        doomed.envoy.stop()  # the endpoint stays in the published generation: connections to it are refused
    cluster = "cluster.default/split-0/stable"
    concurrency = 8
    after = asyncio.run(fetch_all(dataplane.port, [(HOST, [])] * 400, concurrency=concurrency))
    failed = [(r.status, r.body) for r in after if r.status != 200]
    retries = {k: v for k, v in dataplane.envoy.stats("retry").items() if v}
    assert not failed, (len(failed), failed[0], retries)
    assert {r.backend for r in after if r.status == 200} == {"pod-a"}
    stats = dataplane.envoy.stats(f"^{cluster}[.](upstream_cx_connect_fail|outlier_detection[.].*)$")
    ejected = stats.get(f"{cluster}.outlier_detection.ejections_enforced_consecutive_gateway_failure", 0)
    assert ejected == 1 and stats.get(f"{cluster}.outlier_detection.ejections_active") == 1, (ejected, stats)
    if endpoint_affinity:
        return
    # Bounded: the failures that trip the detector plus the requests routed before the workers saw the ejection
    # (measured 3..16, more under CPU contention), far below the ~half of all requests round robin would send it.
    failures = stats.get(f"{cluster}.upstream_cx_connect_fail", 0)
    assert GATEWAY_FAILURES_TO_EJECT <= failures < len(after) // 8, (failures, ejected)
    # Ejected means no more attempts on the dead endpoint while the ejection lasts. Under heavy CPU contention the
    # 15 s can lapse during this phase; the endpoint is then tried again and ejected again (for longer), which the
    # ejection counter shows; only then may it have cost a few more connect failures, and still no client request.
    more = asyncio.run(fetch_all(dataplane.port, [(HOST, [])] * 200, concurrency=concurrency))
    assert [r.status for r in more] == [200] * len(more)
    again = dataplane.envoy.stat(f"{cluster}.outlier_detection.ejections_enforced_total") - 1
    extra = dataplane.envoy.stat(f"{cluster}.upstream_cx_connect_fail") - failures
    assert extra <= again * (len(after) // 8), (extra, again)
