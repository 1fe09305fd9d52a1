"""The processor process's health: NOT_SERVING until a generation is held, and for good once SIGTERM's drain began."""

from __future__ import annotations

import asyncio
from typing import Any

from grpc_health.v1 import health_pb2

from tests.unit.test_extproc_processor import FakeContext, generation
from trafficsplit.extproc.server import DataplaneProcessor, Settings
from trafficsplit.v1alpha1 import publish_pb2 as pb
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
