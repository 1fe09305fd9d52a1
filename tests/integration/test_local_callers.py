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
from trafficsplit.extproc.health import MAX_HEALTH_WATCHES
from trafficsplit.extproc.httpservice import MAX_HEAD_BYTES
from trafficsplit.wire.bootstrap import EXTPROC_HTTP_PATH

HOST = "shop.example"
MiB = 1024 * 1024
FAIL_OPEN = "http.trafficsplit.ext_proc.trafficsplit.failure_mode_allowed"


def metric(dp: Dataplane, name: str, **labels: str) -> float:
    total = 0.0
    for line in dp.processor.metrics_text().splitlines():
        named = line.startswith(name + "{") or line.startswith(name + " ")
        if named and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def stream_endless_header(dp: Dataplane, limit: int = 64 * MiB, seconds: float = 20) -> tuple[int, bool, int]:
    """One header value that never ends, 64 KiB per write, until the processor closes the connection (or `limit`
    bytes / `seconds` pass). Returns (bytes written when the close was seen, closed, peak processor RSS)."""
    reader, writer = await asyncio.open_unix_connection(str(dp.processor.http_socket))
    eof = asyncio.create_task(reader.read())  # b"" (or an answer) once the server closes
    writer.write(b"POST %s HTTP/1.1\r\nhost: trafficsplit-extproc\r\nx-endless: " % EXTPROC_HTTP_PATH.encode())
    chunk = b"a" * 65536
    sent, closed, peak = 0, False, dp.processor.rss_bytes()
    deadline = time.monotonic() + seconds
    try:
        while sent < limit and time.monotonic() < deadline:
            if eof.done():
                closed = True
                break
            writer.write(chunk)
            try:
                await asyncio.wait_for(writer.drain(), max(0.1, deadline - time.monotonic()))
            except (ConnectionError, TimeoutError):
                closed = isinstance(eof, asyncio.Task) and eof.done()
                break
            sent += len(chunk)
            if sent % MiB == 0:
                peak = max(peak, dp.processor.rss_bytes())
        if not closed:
            try:
                await asyncio.wait_for(asyncio.shield(eof), 1)
                closed = True
            except TimeoutError:
                pass
    finally:
        eof.cancel()
        writer.close()
    return sent, closed, max(peak, dp.processor.rss_bytes())


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


async def open_watches(target: str, n: int, channels: int = 20) -> tuple[int, dict[str, int], list[grpc.aio.Call]]:
    """`n` Health.Watch streams over `channels` connections; returns (streams answered, refusals by code, the open
    calls, to be cancelled by the caller)."""
    chans = [grpc.aio.insecure_channel(target) for _ in range(channels)]
    calls = []
    answered = 0
    refused: dict[str, int] = {}

    async def one(i: int) -> None:
        nonlocal answered
        call = health_pb2_grpc.HealthStub(chans[i % channels]).Watch(health_pb2.HealthCheckRequest(service=""))
        calls.append(call)
        try:
            await asyncio.wait_for(call.read(), 30)
            answered += 1
        except grpc.aio.AioRpcError as exc:
            refused[exc.code().name] = refused.get(exc.code().name, 0) + 1

    await asyncio.gather(*(one(i) for i in range(n)))
    return answered, refused, calls + chans  # type: ignore[operator]


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
                if isinstance(c, grpc.aio.Channel):
                    await c.close()
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
