"""A hostile caller inside the pod (or on the pod network) against the processor's own ports, through a real Envoy.

Only Envoy should reach the ext_proc sockets and only the kubelet the plaintext health port, but nothing enforces
that beyond the bind address (and, on the pod network, a NetworkPolicy that may not be enforced): each port bounds
what one caller can make the processor hold, and refuses the excess at the bound, while Envoy's own requests keep
being decided (no fail-open).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.dataplane import Dataplane, Load, NameBackends, Processor, split_doc
from tests.support.hostile import FAIL_OPEN, MiB, metric, open_watches, stream_endless_header
from trafficsplit.extproc.health import MAX_HEALTH_WATCHES
from trafficsplit.extproc.httpservice import MAX_HEAD_BYTES

HOST = "shop.example"


@pytest.mark.envoy
def test_an_endless_header_on_the_http_socket_is_closed_at_the_bound_rss_flat_nothing_fails_open(
    tmp_path: Path, name_backends: NameBackends
) -> None:
    """The issue's case: before, httptools accumulated the header value before any check ran (93 MiB on one
    connection, RSS +100 MB, quadratic CPU, every request failing open meanwhile at a 200 ms message timeout)."""
    dp = Dataplane.start(tmp_path, name_backends, transport="http", message_timeout_ms=200)
    try:
        dp.publish([split_doc(HOST, {"stable": 50, "canary": 50})])
        assert dp.get(HOST).status == 200
        before = dp.processor.rss_bytes()
        with Load(dp.port, HOST, concurrency=4) as load:
            load.wait_for(50)
            sent, closed, peak = asyncio.run(stream_endless_header(dp))
            load.wait_for(50)
        after = dp.processor.rss_bytes()
        fail_open = dp.envoy.stat(FAIL_OPEN)
        rejected = metric(dp, "trafficsplit_extproc_http_rejected_total", reason="head_too_large")
    finally:
        dp.stop()
    print(
        f"endless header: closed={closed} after {sent / 1024:.0f} KiB written (bound {MAX_HEAD_BYTES // 1024} KiB); "
        f"processor RSS {before / MiB:.1f} -> peak {peak / MiB:.1f} -> {after / MiB:.1f} MiB; "
        f"{len(load.results)} requests under it, {len(load.errors)} errors, {fail_open} failed open"
    )
    assert closed, f"still open after {sent / MiB:.1f} MiB"
    # Written before the close was seen: the bound plus what the socket buffers held meanwhile.
    assert sent < MiB, sent
    assert peak - before < 8 * MiB and after - before < 8 * MiB, (before, peak, after)
    assert not load.errors and {s for _, s, _, _ in load.results} == {200}
    assert fail_open == 0
    assert rejected == 1


def test_health_watch_streams_past_the_cap_are_refused_and_rss_stays_flat(tmp_path: Path) -> None:
    """The plaintext health port (the chart's 9004, for the kubelet) is unauthenticated: before, 2,000 Watch streams
    were all held (+46 MB, not returned after they closed)."""
    proc = Processor(tmp_path, token="t" * 32, extra=["--health", "127.0.0.1:0"]).start()
    try:
        target = f"127.0.0.1:{proc.ports['health']}"
        with grpc.insecure_channel(target) as ch:  # the kubelet's probe: Check
            assert health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5).status
        before = proc.rss_bytes()

        async def scenario() -> tuple[int, dict[str, int], int, int]:
            answered, refused, held = await open_watches(target, 2000)
            peak = proc.rss_bytes()
            # While they are held, the kubelet's Check is still answered.
            async with grpc.aio.insecure_channel(target) as ch:
                check = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
            for c in held:
                await c.close(None)
            return answered, refused, peak, int(check.status)

        answered, refused, peak, checked = asyncio.run(scenario())
        time.sleep(1)
        after = proc.rss_bytes()
        refused_metric = sum(
            float(line.rsplit(" ", 1)[1])
            for line in proc.metrics_text().splitlines()
            if line.startswith("trafficsplit_health_watches_refused_total")
        )
    finally:
        proc.terminate()
    print(
        f"2000 Watch streams: {answered} held, refused {refused}; processor RSS {before / MiB:.1f} -> peak "
        f"{peak / MiB:.1f} -> {after / MiB:.1f} MiB after they closed"
    )
    assert checked == health_pb2.HealthCheckResponse.NOT_SERVING  # no generation held: the probe's answer
    # Past the Watch cap: RESOURCE_EXHAUSTED from the servicer (counted), or refused by HTTP/2 past the per-connection
    # stream limit (UNAVAILABLE) before the processor allocates anything for them.
    assert answered <= MAX_HEALTH_WATCHES and sum(refused.values()) == 2000 - answered
    assert set(refused) <= {"RESOURCE_EXHAUSTED", "UNAVAILABLE"}, refused
    assert refused_metric == refused.get("RESOURCE_EXHAUSTED", 0)
    assert peak - before < 16 * MiB and after - before < 8 * MiB, (before, peak, after)
