"""Keeps every dataplane replica on the current generation: one worker task per replica.

Why a worker per replica: a slow or dead replica must never delay the others, a replica that comes back (or is
restarted and holds nothing) must get the current generation at once, and the operator must know, per replica, which
number it acknowledged (that is what `Published` reports). Each worker publishes when behind, retries with capped
exponential backoff (an unreachable replica, or one that answers NOT_READY: its Envoy has not acknowledged yet, e.g. a
restarted processor whose Envoy reconnects late; jittered, so replicas restarted together are not retried in step),
never retries a generation the replica answered INVALID (refused: it would be refused again), and otherwise polls
`GetHeld` every `poll_interval` to notice a restarted replica. The first `GetHeld` to a replica also asks for the
generation it holds; the one with the highest number is kept as `held`, from which a restarted or newly leading
operator seeds its last good forms.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Iterable

import grpc

from trafficsplit.core.sessions import BackendSessions, sum_replicas
from trafficsplit.core.status import ReplicaAck
from trafficsplit.operator.cluster import Replica
from trafficsplit.operator.publisher import ClientTlsFiles, PublisherClient
from trafficsplit.v1alpha1 import publish_pb2 as pb

log = logging.getLogger("trafficsplit.operator.fleet")

BACKOFF_MIN = 0.05
BACKOFF_MAX = 1.0
# NOT_READY: the replica already waited its ACK timeout before answering, so a short first pause; capped so a replica
# whose Envoy comes back is published within seconds.
NOT_READY_MIN = 0.25
NOT_READY_MAX = 5.0


class _Worker:
    def __init__(self, fleet: Fleet, replica: Replica) -> None:
        self.fleet = fleet
        self.replica = replica
        self.name = replica.name
        self.acked = 0
        self.known = False  # answered at least once since it was (re)discovered
        self.refused = 0  # the number of the last generation the replica refused: not offered to it again
        self.sessions: list[BackendSessions] = []  # its live sessions of persistent splits, from its last GetHeld
        self.wake = asyncio.Event()
        self.client = PublisherClient(replica.address, fleet.token_file, fleet.timeout, fleet.tls)
        self.task = asyncio.create_task(self._run(), name=f"publish:{replica.address}")

    def _set(self, acked: int, name: str | None) -> None:
        changed = acked != self.acked or not self.known or (name and name != self.name)
        self.acked, self.known = acked, True
        if name:
            self.name = name
        self.fleet.note_held(acked)
        if changed:
            self.fleet.changed()

    def _note_sessions(self, held: pb.HeldReply) -> None:
        sessions = [BackendSessions(c.split, c.backend, c.live, c.saturated) for c in held.sessions]
        if sessions != self.sessions:
            self.sessions = sessions
            self.fleet.changed()

    async def _pause(self, seconds: float) -> None:
        """Sleep `seconds` (jittered down to half), or less if woken (a new target, the replica re-discovered)."""
        self.wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.wake.wait(), seconds * self.fleet.rng.uniform(0.5, 1.0))

    async def _run(self) -> None:
        backoff = BACKOFF_MIN
        not_ready = NOT_READY_MIN
        while True:
            target = self.fleet.target
            try:
                if not self.known:
                    # The probe (start, take-over, a re-discovered replica) also takes the held generation to seed
                    # last good forms from; the periodic poll below needs only the number.
                    held = await self.client.get_held(with_generation=True)
                    self.fleet.note_generation(held)
                    self._note_sessions(held)
                    self._set(held.held_number, held.replica)
                    continue
                if target is not None and self.acked < target.number and self.refused != target.number:
                    reply = await self.client.publish(target)
                    await self._handle(target, reply)
                    backoff = BACKOFF_MIN
                    if reply.result == pb.PublishReply.NOT_READY:
                        await self._pause(not_ready)
                        not_ready = min(not_ready * 2, NOT_READY_MAX)
                    else:
                        not_ready = NOT_READY_MIN
                    continue
                backoff = BACKOFF_MIN
                not_ready = NOT_READY_MIN
                self.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), self.fleet.poll_interval)
                    continue
                held = await self.client.get_held()
                self._note_sessions(held)
                self._set(held.held_number, held.replica)
            except grpc.aio.AioRpcError as exc:
                if self.known or self.acked:
                    log.warning("dataplane %s (%s): %s", self.name, self.replica.address, exc.code().name)
                    self.acked, self.known = 0, False
                    self.fleet.changed()
                await self._pause(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)

    async def _handle(self, target: pb.Generation, reply: pb.PublishReply) -> None:
        if reply.result == pb.PublishReply.ACCEPTED:
            log.info("dataplane %s holds generation %d", reply.replica or self.name, reply.held_number)
            self._set(reply.held_number, reply.replica)
        elif reply.result == pb.PublishReply.STALE:
            # The replica holds a number at least as high (another operator, or our own earlier try that timed out):
            # the engine renumbers above it when needed.
            self._set(reply.held_number, reply.replica)
        elif reply.result == pb.PublishReply.NOT_READY:
            log.warning(
                "dataplane %s not ready for generation %d (will retry): %s",
                reply.replica or self.name,
                target.number,
                reply.message,
            )
            self._set(reply.held_number, reply.replica)
        else:
            log.error(
                "dataplane %s refused generation %d: %s", reply.replica or self.name, target.number, reply.message
            )
            self.refused = target.number
            self._set(reply.held_number, reply.replica)

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.client.close()


class Fleet:
    """The set of replicas and the generation they should hold. `changed` is called on any acknowledgement change."""

    def __init__(
        self,
        token_file: str | None,
        timeout: float,
        poll_interval: float,
        changed: Callable[[], None],
        tls: ClientTlsFiles | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.token_file = token_file
        self.tls = tls
        self.timeout = timeout
        self.poll_interval = poll_interval
        self._changed = changed
        self.rng = rng or random.Random()  # backoff jitter
        self._target: pb.Generation | None = None
        self._floor = 0  # the highest number any replica ever reported holding
        # The generation with the highest number a replica reported through GetHeld (None: none reported one, e.g.
        # every replica restarted and holds nothing, or runs a version without HeldReply.generation).
        self._held: pb.Generation | None = None
        self._workers: dict[str, _Worker] = {}

    @property
    def target(self) -> pb.Generation | None:
        """The generation every replica should hold."""
        return self._target

    @property
    def highest_held(self) -> int:
        """The highest number any replica ever reported holding: numbering continues above it."""
        return self._floor

    @property
    def held_generation(self) -> pb.Generation | None:
        return self._held

    def changed(self) -> None:
        self._changed()

    def note_held(self, number: int) -> None:
        if number > self._floor:
            self._floor = number

    def note_generation(self, reply: pb.HeldReply) -> None:
        if reply.HasField("generation") and reply.generation.number > (self._held.number if self._held else 0):
            self._held = reply.generation

    async def set_replicas(self, replicas: Iterable[Replica]) -> None:
        wanted = {r.address: r for r in replicas}
        for addr in [a for a in self._workers if a not in wanted]:
            await self._workers.pop(addr).close()
        for addr, r in wanted.items():
            if addr not in self._workers:
                self._workers[addr] = _Worker(self, r)
        self._changed()

    def set_target(self, generation: pb.Generation) -> None:
        self._target = generation
        for w in self._workers.values():
            w.wake.set()

    def sessions(self) -> dict[str, dict[str, BackendSessions]]:
        """Live sessions of persistent splits summed over the replicas that answered (the Drained condition)."""
        return sum_replicas([w.sessions for w in self._workers.values() if w.known])

    def acks(self) -> tuple[ReplicaAck, ...]:
        return tuple(ReplicaAck(w.name, w.acked) for w in self._workers.values())

    async def probe(self, timeout: float) -> int:
        """Wait (bounded) until every replica answered once, so numbering continues above what they hold."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline and not all(w.known for w in self._workers.values()):
            await asyncio.sleep(0.02)
        return self._floor

    async def close(self) -> None:
        for w in list(self._workers.values()):
            await w.close()
        self._workers.clear()
