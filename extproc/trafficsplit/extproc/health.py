"""gRPC health as each server exposes it: Check as is, and at most `MAX_HEALTH_WATCHES` concurrent Watch streams.

Every health endpoint is unauthenticated, and the plaintext one (the chart's health port, for the kubelet) is on the
pod network: a Watch stream is held until the caller leaves, so without a cap any caller could hold thousands (each
costs the process memory it does not give back). The kubelet's probes need none: readiness is a gRPC Check, liveness
a TCP connect. A stream past the cap is refused at once with RESOURCE_EXHAUSTED and counted.
"""

from __future__ import annotations

from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio  # type: ignore[attr-defined,unused-ignore]

from trafficsplit.extproc.metrics import Metrics

# Per server (so a caller on one port cannot use up another's): room for a few watching tools, not for a flood.
MAX_HEALTH_WATCHES = 8


class BoundedHealth(health_pb2_grpc.HealthServicer):  # type: ignore[misc]
    """One server's view of the shared health status (`inner`), with its own Watch cap; `name` labels the metrics."""

    def __init__(
        self, inner: health_aio.HealthServicer, metrics: Metrics, name: str, max_watches: int = MAX_HEALTH_WATCHES
    ) -> None:
        self._inner = inner
        self._max_watches = max_watches
        self._watches = 0
        self._refused = metrics.health_watches_refused.labels(name)
        self._gauge = metrics.health_watches.labels(name)

    async def Check(self, request: health_pb2.HealthCheckRequest, context: Any) -> health_pb2.HealthCheckResponse:
        reply: health_pb2.HealthCheckResponse = await self._inner.Check(request, context)
        return reply

    async def Watch(self, request: health_pb2.HealthCheckRequest, context: Any) -> None:
        if self._watches >= self._max_watches:
            self._refused.inc()
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many health watches on this port")
        self._watches += 1
        self._gauge.inc()
        try:
            await self._inner.Watch(request, context)
        finally:
            self._watches -= 1
            self._gauge.dec()
