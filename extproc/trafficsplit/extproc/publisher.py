"""The publish API (`trafficsplit.v1alpha1.Publisher`): take a generation whole, make before break, or refuse it.

Order for an offered generation N (under one lock, so publishes never interleave):
0. A replica of a Gateway (`--gateway namespace/name`, `--gateway-uid`) refuses, INVALID and not held, a generation
   whose `routes.gateway` names another Gateway, whose `routes.gateway_uid` is not its Gateway's, or that carries no
   route table: one Gateway's publisher cannot program another's data plane (core/model/identity.py). The chart's
   gateway (no `--gateway`) takes any generation, as before.
1. N <= held → STALE (nothing changes). N more than MAX_GENERATION_STEP above held → INVALID (not adopted: numbers
   advance by one, and one publish must not bring them to their ceiling). A proto the core cannot accept → INVALID.
   A split this replica cannot serve (core/model/capabilities.py: sticky.mode persistent without cookie keys) is refused
   alone: left out of what is held, named in the reply's `refused`, and every other split is served.
2. Push the transition snapshot (held ∪ new clusters and endpoints, held routes) and wait for Envoy's ACK, so every
   cluster N may pick exists and is warm before any request is decided by N. NACK or timeout → restore the snapshot
   it replaced (with nothing held: none, so Envoy keeps what it has and the refused clusters are never served); a
   NACK answers INVALID (refused: never retry it), a timeout NOT_READY (no Envoy connected yet, or it stalled:
   transient, the caller retries). Each ACK wait ends before the caller's deadline, so the caller gets that answer.
3. Swap the held generation; the next request is decided by N.
4. Push N's own snapshot (its routes) and wait for its ACK; a NACK here swaps back and restores the snapshot
   (INVALID, or NOT_READY on a timeout). The clusters only the replaced generation used stay for `cluster_drain`
   seconds: a decision it made just before the swap may reach Envoy's router just after it. Then a later version
   (the drain task) withdraws them.
`GetHeld` answers the held number and, when asked (`with_generation`), the held generation message exactly as accepted
(swapped and rolled back with the compiled one), from which a restarted operator seeds its last good forms.
Callers authenticate with `authorization: Bearer <token>`; the token is compared in constant time and never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc

from trafficsplit.core.decide.sessions import LiveSessions
from trafficsplit.core.model.capabilities import Capabilities, SplitRefusal, number_refusal, refusal, without_splits
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.identity import GatewayIdentity
from trafficsplit.extproc.ads import AckError, AdsServer, Nacked
from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.v1alpha1 import publish_pb2_grpc as pb_grpc
from trafficsplit.wire.envoy import ROUTE_TYPE
from trafficsplit.wire.generation import generation_from_proto, held_parts
from trafficsplit.wire.snapshot import ResourceBuilder

log = logging.getLogger(__name__)
_REPLY_MARGIN = 0.5  # seconds of the caller's deadline kept for the reply to reach it


@dataclass(frozen=True)
class _Draining:
    """A replaced generation whose clusters Envoy keeps until `until` (event-loop time)."""

    generation: Generation
    until: float


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
        cluster_drain: float = 5.0,
        on_first_generation: Callable[[], Awaitable[None]] | None = None,
        gateway: GatewayIdentity | None = None,
    ) -> None:
        self._held = held
        self._gateway = gateway  # the Gateway this replica serves (None: the chart's gateway)
        self._ads = ads
        self._metrics = metrics
        self._expected = b"Bearer " + token
        self._replica = replica
        self._caps = Capabilities(cookie_keys=can_seal)  # cookie keys configured: persistent splits can be served
        self._caps_pb = pb.Capabilities(cookie_keys=can_seal)
        self._instance = secrets.token_hex(8)  # a restart at the same address is told apart by this
        self._sessions = sessions  # the processor's live sessions of persistent splits (the Drained signal)
        self._ack_timeout = ack_timeout
        self._on_first = on_first_generation
        self._cluster_drain = cluster_drain
        self._lock = asyncio.Lock()  # publishes (and withdrawals) never interleave
        self._draining: list[_Draining] = []
        self._withdraw_task: asyncio.Task[None] | None = None
        self._inflight: set[asyncio.Task[pb.PublishReply]] = set()  # shielded publishes (strong references)
        self._built = ResourceBuilder()  # unchanged splits reuse their Envoy resources from the last publish

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
        reply = pb.HeldReply(
            held_number=self._held.number,
            replica=self._replica,
            origin=self._held.origin,
            capabilities=self._caps_pb,
            instance=self._instance,
            refused=[_refusal_pb(r) for r in self._held.refused],
        )
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
        # Shielded: a caller that goes away (an operator killed mid-publish) must not cancel the publish half-way,
        # which could leave a generation held without its health or metrics, or a transition never resolved.
        task = asyncio.create_task(self._publish_whole(request, context.time_remaining()))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)
        return await asyncio.shield(task)

    async def _publish_whole(self, request: pb.PublishRequest, time_remaining: float | None) -> pb.PublishReply:
        async with self._lock:
            reply = await self._publish(request.generation, time_remaining)
        self._metrics.publish.labels(pb.PublishReply.Result.Name(reply.result).lower()).inc()
        log.info(
            "publish generation %d from %r: %s %s%s",
            request.generation.number,
            request.generation.origin,
            pb.PublishReply.Result.Name(reply.result),
            reply.message,
            "".join(f"; {r.split} refused: {r.message}" for r in reply.refused),
        )
        return reply

    def _reply(
        self, result: pb.PublishReply.Result, message: str = "", refused: tuple[SplitRefusal, ...] = ()
    ) -> pb.PublishReply:
        return pb.PublishReply(
            result=result,
            held_number=self._held.number,
            message=message,
            replica=self._replica,
            refused=[_refusal_pb(r) for r in refused],
            capabilities=self._caps_pb,
            instance=self._instance,
        )

    def _refusal(self, exc: AckError, what: str) -> pb.PublishReply:
        result = pb.PublishReply.INVALID if isinstance(exc, Nacked) else pb.PublishReply.NOT_READY
        return self._reply(result, f"{what}: {exc}")

    async def _publish(self, msg: pb.Generation, time_remaining: float | None) -> pb.PublishReply:
        held_before = self._held.holding
        held, held_msg = held_before.current, held_before.message
        if (other := gateway_refusal(self._gateway, msg)) is not None:
            return self._reply(pb.PublishReply.INVALID, other)
        if msg.number <= self._held.number:
            return self._reply(pb.PublishReply.STALE, f"generation {msg.number} <= held {self._held.number}")
        if (jump := number_refusal(msg.number, self._held.number)) is not None:
            return self._reply(pb.PublishReply.INVALID, jump)
        try:
            # The held splits the message carries unchanged are reused, not parsed and compiled again.
            gen = generation_from_proto(msg, held_parts(held_msg, held) if held and held_msg else None)
        except SpecError as exc:
            return self._reply(pb.PublishReply.INVALID, str(exc))
        return await self._apply(gen, msg, msg.origin, time_remaining)

    async def _apply(
        self, gen: Generation, msg: pb.Generation | None, origin: str, time_remaining: float | None
    ) -> pb.PublishReply:
        held_before = self._held.holding
        held = held_before.current
        accepted: pb.Generation | None = None
        if msg is not None:
            accepted = pb.Generation()
            accepted.CopyFrom(msg)  # our own copy: the request message belongs to grpc
        refused = tuple(r for s in gen.splits if (r := refusal(s, self._caps)) is not None)
        if refused:
            # Isolation: the splits this replica cannot serve are left out, alone; the rest is served. What is held
            # (and GetHeld returns) is what is served.
            out = {r.split for r in refused}
            keep = [i for i, s in enumerate(gen.splits) if s.key not in out]
            gen = without_splits(gen, out)
            if accepted is not None and msg is not None:
                del accepted.splits[:]
                accepted.splits.extend(msg.splits[i] for i in keep)
                for action in accepted.routes.actions:  # a refused rule keeps its place, without its split
                    if action.split in out:
                        action.split = ""
        loop = asyncio.get_running_loop()
        # Both ACK waits end before the caller gives up (a margin for the reply), or it would see a deadline instead
        # of NOT_READY; half each, as the second wait needs its share.
        budget = self._ack_timeout if time_remaining is None else max(0.0, time_remaining - _REPLY_MARGIN) / 2
        wait = min(self._ack_timeout, budget)
        before = self._ads.snapshot()
        draining = [d.generation for d in self._draining]
        try:
            versions = self._ads.set_resources(self._built.transition(held, gen, draining), generation=gen.number)
            await self._ads.wait_acked(versions, wait)
            envoy_took = bool(versions)
        except AckError as exc:
            self._ads.restore(before)
            return self._refusal(exc, "not applied to Envoy")
        self._held.swap(gen, origin, accepted, refused)
        if held is not None:
            draining.append(held)
            self._draining.append(_Draining(held, loop.time() + self._cluster_drain))
        try:
            versions = self._ads.set_resources(self._built.serving(gen, draining), generation=gen.number)
            if not versions and not envoy_took:
                # Nothing of N reached Envoy: its ACK of the routes sent again is what says its proxy holds N.
                versions = self._ads.restamp(ROUTE_TYPE, generation=gen.number)
            await self._ads.wait_acked(versions, wait)
        except AckError as exc:
            self._held.restore(held_before)
            if held is not None:
                self._draining.pop()
            self._ads.restore(before)
            return self._refusal(exc, "routes not applied to Envoy")
        self._schedule_withdrawal()
        self._metrics.held_generation.set(gen.number)
        if held is None and self._on_first is not None:
            await self._on_first()
        return self._reply(pb.PublishReply.ACCEPTED, refused=refused)

    # --- the cluster drain ----------------------------------------------------------------------------------------

    def _schedule_withdrawal(self) -> None:
        if self._draining and (self._withdraw_task is None or self._withdraw_task.done()):
            self._withdraw_task = asyncio.create_task(self._withdraw_drained())

    async def _withdraw_drained(self) -> None:
        """Withdraw replaced generations' clusters once their drain is over, oldest first, each in a later xDS
        version than the swap. Not waited for: nothing depends on the removal, and an Envoy that is not connected
        gets the snapshot when it reconnects, so a disconnected Envoy never holds the lock (and the next publish) up;
        a NACK of it is counted and logged by the ADS server like any other, and Envoy keeps the clusters."""
        loop = asyncio.get_running_loop()
        while self._draining:
            await asyncio.sleep(max(0.0, self._draining[0].until - loop.time()))
            async with self._lock:
                now = loop.time()
                self._draining = [d for d in self._draining if d.until > now]
                held = self._held.current
                if held is None:
                    continue
                self._ads.set_resources(
                    self._built.serving(held, [d.generation for d in self._draining]), generation=held.number
                )

    async def close(self) -> None:
        """Stop the drain task (shutdown)."""
        if self._withdraw_task is not None:
            self._withdraw_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._withdraw_task


def _refusal_pb(r: SplitRefusal) -> pb.SplitRefusal:
    return pb.SplitRefusal(split=r.split, reason=r.reason, message=r.message)


def gateway_refusal(gateway: GatewayIdentity | None, msg: pb.Generation) -> str | None:
    """Why a replica of `gateway` (None: the chart's gateway, which takes any) must not hold `msg`."""
    if gateway is None:
        return None
    if not msg.HasField("routes"):
        return gateway.refusal(msg.number, None)
    return gateway.refusal(msg.number, msg.routes.gateway, msg.routes.gateway_uid)
