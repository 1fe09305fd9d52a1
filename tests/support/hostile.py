"""What a hostile local caller does to the processor's own ports, shared by tests/integration/test_local_callers.py
and bench/bench_local_callers.py: stream a header that never ends, hold Health.Watch streams."""

from __future__ import annotations

import asyncio
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.dataplane import Dataplane
from trafficsplit.wire.bootstrap import EXTPROC_HTTP_PATH

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


async def open_watches(target: str, n: int, channels: int = 20) -> tuple[int, dict[str, int], list[grpc.aio.Channel]]:
    """`n` Health.Watch streams over `channels` connections; returns (streams answered, refusals by status code, the
    channels, which hold the answered streams open until the caller closes them)."""
    chans = [grpc.aio.insecure_channel(target) for _ in range(channels)]
    answered = 0
    refused: dict[str, int] = {}

    async def one(i: int) -> None:
        nonlocal answered
        call = health_pb2_grpc.HealthStub(chans[i % channels]).Watch(health_pb2.HealthCheckRequest(service=""))
        try:
            await asyncio.wait_for(call.read(), 30)
            answered += 1
        except grpc.aio.AioRpcError as exc:
            refused[exc.code().name] = refused.get(exc.code().name, 0) + 1

    await asyncio.gather(*(one(i) for i in range(n)))
    return answered, refused, chans
