"""The publish API (`trafficsplit.v1alpha1.Publisher`): take a generation whole, make before break, or refuse it.

Order for an offered generation N (under one lock, so publishes never interleave):
1. N <= held → STALE (nothing changes). A proto the core cannot accept → INVALID.
2. Push the transition snapshot (held ∪ new clusters and endpoints, held routes) and wait for Envoy's ACK, so every
   cluster N may pick exists and is warm before any request is decided by N. NACK or timeout → restore the snapshot
   it replaced (with nothing held: none, so Envoy keeps what it has and the refused clusters are never served), INVALID.
3. Swap the held generation; the next request is decided by N.
4. Push N's own snapshot (its routes; the clusters only the old generation used are withdrawn now that no held
   generation picks them) and wait for its ACK; a NACK here swaps back and restores the snapshot (INVALID).
`GetHeld` answers the held number and, when asked (`with_generation`), the held generation message exactly as accepted
(swapped and rolled back with the compiled one), from which a restarted operator seeds its last good forms.
Callers authenticate with `authorization: Bearer <token>`; the token is compared in constant time and never logged.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from trafficsplit.core.errors import SpecError
from trafficsplit.core.sessions import LiveSessions
from trafficsplit.extproc.ads import AckError, AdsServer
from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.v1alpha1 import publish_pb2_grpc as pb_grpc
from trafficsplit.wire.envoy import resources, transition
from trafficsplit.wire.generation import generation_from_proto

log = logging.getLogger(__name__)


class Publisher(pb_grpc.PublisherServicer):  # type: ignore[misc]
    def __init__(
        self,
        held: HeldGeneration,
        ads: AdsServer,
        metrics: Metrics,
        *,
        token: bytes,
        replica: str,
        can_seal: bool = False,
        sessions: LiveSessions | None = None,
        ack_timeout: float,
        on_first_generation: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._held = held
        self._ads = ads
        self._metrics = metrics
        self._expected = b"Bearer " + token
        self._replica = replica
        self._can_seal = can_seal  # cookie keys configured: persistent splits can be served
        self._sessions = sessions  # the processor's live sessions of persistent splits (the Drained signal)
        self._ack_timeout = ack_timeout
        self._on_first = on_first_generation
        self._lock = asyncio.Lock()  # publishes never interleave

    async def _authorize(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        given = b""
        for key, value in context.invocation_metadata() or ():
            if key == "authorization":
                given = value.encode() if isinstance(value, str) else value
        if not hmac.compare_digest(given, self._expected):
            self._metrics.publish.labels("unauthenticated").inc()
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "a valid bearer token is required")

    async def GetHeld(self, request: pb.GetHeldRequest, context: grpc.aio.ServicerContext[Any, Any]) -> pb.HeldReply:
        await self._authorize(context)
        reply = pb.HeldReply(held_number=self._held.number, replica=self._replica, origin=self._held.origin)
        if request.with_generation and self._held.message is not None:
            reply.generation.CopyFrom(self._held.message)
        gen = self._held.current
        if self._sessions is not None and gen is not None:
            persistent = {s.key: s.weights.names for s in gen.splits if s.persistent}
            reply.sessions.extend(
                pb.LiveSessions(split=c.split, backend=c.backend, live=c.live, saturated=c.saturated)
                for c in self._sessions.counts(persistent, time.monotonic())
            )
        return reply

    async def Publish(self, request: pb.PublishRequest, context: grpc.aio.ServicerContext[Any, Any]) -> pb.PublishReply:
        await self._authorize(context)
        async with self._lock:
            reply = await self._publish(request.generation)
        self._metrics.publish.labels(pb.PublishReply.Result.Name(reply.result).lower()).inc()
        log.info(
            "publish generation %d from %r: %s %s",
            request.generation.number,
            request.generation.origin,
            pb.PublishReply.Result.Name(reply.result),
            reply.message,
        )
        return reply

    def _reply(self, result: pb.PublishReply.Result, message: str = "") -> pb.PublishReply:
        return pb.PublishReply(result=result, held_number=self._held.number, message=message, replica=self._replica)

    async def _publish(self, msg: pb.Generation) -> pb.PublishReply:
        held, held_origin, held_msg = self._held.current, self._held.origin, self._held.message
        if msg.number <= self._held.number:
            return self._reply(pb.PublishReply.STALE, f"generation {msg.number} <= held {self._held.number}")
        try:
            gen = generation_from_proto(msg)
        except SpecError as exc:
            return self._reply(pb.PublishReply.INVALID, str(exc))
        unsealable = [s.key for s in gen.splits if s.persistent] if not self._can_seal else []
        if unsealable:
            # Refused whole, as any generation this replica cannot serve as published: the operator reports it.
            return self._reply(
                pb.PublishReply.INVALID,
                f"sticky.mode persistent in {', '.join(unsealable)}: this replica has no cookie keys "
                "(--cookie-key-file)",
            )
        before = self._ads.snapshot()
        try:
            versions = self._ads.set_resources(transition(held, gen), generation=gen.number)
            await self._ads.wait_acked(versions, self._ack_timeout)
        except AckError as exc:
            self._ads.restore(before)
            return self._reply(pb.PublishReply.INVALID, f"not applied to Envoy: {exc}")
        accepted = pb.Generation()
        accepted.CopyFrom(msg)  # our own copy: the request message belongs to grpc
        self._held.swap(gen, msg.origin, accepted)
        try:
            versions = self._ads.set_resources(resources(gen), generation=gen.number)
            await self._ads.wait_acked(versions, self._ack_timeout)
        except AckError as exc:
            self._held.swap(held, held_origin, held_msg)
            self._ads.restore(before)
            return self._reply(pb.PublishReply.INVALID, f"routes not applied to Envoy: {exc}")
        self._metrics.held_generation.set(gen.number)
        if held is None and self._on_first is not None:
            await self._on_first()
        return self._reply(pb.PublishReply.ACCEPTED)
