"""The processor process's health: NOT_SERVING until a generation is held, and for good once SIGTERM's drain began."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2

from tests.unit.test_extproc_processor import FakeContext, generation
from trafficsplit.extproc.server import DataplaneProcessor, Settings
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.bootstrap import EXTPROC_HTTP_PATH, ExtProcTransport
from trafficsplit.wire.generation import generation_to_proto

NOT_SERVING, SERVING = health_pb2.HealthCheckResponse.NOT_SERVING, health_pb2.HealthCheckResponse.SERVING


async def _status(dp: DataplaneProcessor, service: str = "") -> int:
    reply = await dp.health.Check(health_pb2.HealthCheckRequest(service=service), None)
    return int(reply.status)


async def _acked(versions: Any, timeout: float) -> None:
    """Envoy acknowledges everything at once."""


def test_health_follows_the_first_generation_and_a_first_generation_during_the_drain_changes_nothing() -> None:
    async def run() -> None:
        settings = Settings(
            listen="127.0.0.1:0",
            publish="127.0.0.1:0",
            metrics="127.0.0.1:0",
            token=b"t",
            replica="r0",
            drain_seconds=0.3,
        )
        msg = pb.PublishRequest(generation=generation_to_proto(generation(4), origin="op"))

        dp = DataplaneProcessor(settings)
        dp.ads.wait_acked = _acked  # type: ignore[method-assign]
        await dp.start()
        assert await _status(dp) == NOT_SERVING
        reply = await dp.publisher.Publish(msg, FakeContext("t"))  # type: ignore[arg-type]
        assert reply.result == pb.PublishReply.ACCEPTED
        assert [await _status(dp, s) for s in ("", "trafficsplit.v1alpha1.Publisher")] == [SERVING, SERVING]
        await dp.stop()

        dp = DataplaneProcessor(settings)
        dp.ads.wait_acked = _acked  # type: ignore[method-assign]
        await dp.start()
        stopping = asyncio.ensure_future(dp.stop())  # SIGTERM before any generation arrived
        await asyncio.sleep(0.05)
        reply = await dp.publisher.Publish(msg, FakeContext("t"))  # type: ignore[arg-type]
        assert reply.result == pb.PublishReply.ACCEPTED
        assert await _status(dp) == NOT_SERVING  # draining: probes must keep moving away
        await stopping

    asyncio.run(run())


def test_the_http_transport_serves_ext_proc_on_its_own_socket_and_leaves_ads_and_publish_on_grpc(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        sock = tmp_path / "extproc.sock"
        http_sock = tmp_path / "extproc-http.sock"
        settings = Settings(
            listen=f"unix:{sock}",
            publish="127.0.0.1:0",
            metrics="127.0.0.1:0",
            token=b"t",
            replica="r0",
            drain_seconds=0,
            ext_proc_transport=ExtProcTransport.HTTP,
            ext_proc_http_listen=f"unix:{http_sock}",
        )
        dp = DataplaneProcessor(settings)
        await dp.start()
        try:
            assert dp.ports["ext_proc_http"] == f"unix:{http_sock}"
            reader, writer = await asyncio.open_unix_connection(str(http_sock))
            body = b'{"request_headers": {"headers": {"headers": []}}}'
            writer.write(
                b"POST %s HTTP/1.1\r\ncontent-length: %d\r\n\r\n%s" % (EXTPROC_HTTP_PATH.encode(), len(body), body)
            )
            assert (await reader.readline()).startswith(b"HTTP/1.1 200 ")
            writer.close()
            # ext_proc is not served twice: the gRPC socket answers ADS and health, not ExternalProcessor.
            async with grpc.aio.insecure_channel(f"unix:{sock}") as ch:
                call = ch.stream_unary("/envoy.service.ext_proc.v3.ExternalProcessor/Process", None, None)
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await call(iter([b""]))
                assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
                health = ch.unary_unary("/grpc.health.v1.Health/Check", None, None)
                assert await health(health_pb2.HealthCheckRequest().SerializeToString()) is not None
            sample = dp.metrics.registry.get_sample_value
            assert sample("trafficsplit_extproc_transport", {"transport": "http"}) == 1
        finally:
            await dp.stop()
        with pytest.raises(OSError):
            await asyncio.open_unix_connection(str(http_sock))

    asyncio.run(run())


def test_the_http_transport_needs_an_address() -> None:
    with pytest.raises(ValueError, match="ext_proc_http_listen"):
        Settings(
            listen="127.0.0.1:0",
            publish="127.0.0.1:0",
            metrics="127.0.0.1:0",
            token=b"t",
            replica="r0",
            ext_proc_transport=ExtProcTransport.HTTP,
        )
