"""Keeps every dataplane replica on the current generation: one worker task per replica.

Why a worker per replica: a slow or dead replica must never delay the others, a replica that comes back (or is
restarted and holds nothing) must get the current generation at once, and the operator must know, per replica, which
number it acknowledged (that is what `Published` reports). Each worker publishes when behind, retries with capped
exponential backoff (an unreachable replica, or one that answers NOT_READY: its Envoy has not acknowledged yet, e.g. a
restarted processor whose Envoy reconnects late; jittered, so replicas restarted together are not retried in step),
retries a generation the replica answered INVALID only with a longer backoff (it would likely be refused again), and
otherwise polls `GetHeld` every `poll_interval` to notice a restarted replica. A refusal is forgotten when the
replica reconnects or restarts (its `instance` changes): it may have been fixed, so it is offered the current
generation at once. The first `GetHeld` to a replica also asks for the generation it holds; the one with the highest
number is kept as `held`, from which a restarted or newly leading operator seeds its last good forms.

Every reply also says what the replica can serve (`capabilities`: the engine leaves out, and names in status, a split
some replica cannot serve) and which splits of an accepted generation it refused alone (`refused`: named in those
splits' status only).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Iterable

import grpc

from trafficsplit.core.control.status import ReplicaAck
from trafficsplit.core.decide.sessions import BackendSessions, sum_replicas
from trafficsplit.core.model.capabilities import Capabilities, SplitRefusal
from trafficsplit.operator.cluster import Replica
from trafficsplit.operator.metrics import FleetMetrics, OperatorMetrics
from trafficsplit.operator.publisher import ClientTlsFiles, PublisherClient, read_token
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.generation import capabilities_from_proto, refusals_from_proto

log = logging.getLogger("trafficsplit.operator.fleet")

BACKOFF_MIN = 0.05
BACKOFF_MAX = 1.0
# NOT_READY: the replica already waited its ACK timeout before answering, so a short first pause; capped so a replica
# whose Envoy comes back is published within seconds.
NOT_READY_MIN = 0.25
NOT_READY_MAX = 5.0
# INVALID: refused whole (an Envoy NACK, a number too far above what it holds). Retried, as the cause may be gone, but
# slowly; a reconnect or restart of the replica retries at once.
REFUSED_MIN = 1.0
REFUSED_MAX = 30.0


class Backoff:
    """The refused-generation retry's curve (REFUSED_MIN doubling to REFUSED_MAX, each pause drawn in its upper half
    so retries that started together spread), kept per thing retried: a replica's refused generation here, and a
    Gateway whose data plane could not be provisioned (gateways.py), so a failure that persists costs a try every
    half-minute, not a hot loop."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = REFUSED_MIN

    def pause(self, rng: random.Random) -> float:
        """The pause before the next try after a failure; the one after that is twice as long (up to the cap)."""
        pause = self._next * rng.uniform(0.5, 1.0)
        self._next = min(self._next * 2, REFUSED_MAX)
        return pause

    def reset(self) -> None:
        """A success, or a change that may have fixed the cause: the next failure starts the curve again."""
        self._next = REFUSED_MIN


_RESULTS = {
    pb.PublishReply.ACCEPTED: "accepted",
    pb.PublishReply.STALE: "stale",
    pb.PublishReply.NOT_READY: "not_ready",
    pb.PublishReply.INVALID: "invalid",
}


class _Worker:
    def __init__(self, fleet: Fleet, replica: Replica) -> None:
        self.fleet = fleet
        self.replica = replica
        self.name = replica.name
        self.acked = 0
        self.known = False  # answered at least once since it was (re)discovered
        self.refused = 0  # the number of the last generation the replica refused whole: offered again at `retry_at`
        self.retry_at = 0.0  # event-loop time
        self.refused_backoff = Backoff()
        self.capabilities: Capabilities | None = None  # as last reported (kept while it is unreachable)
        self.instance = ""  # the replica process's random id: a change is a restart
        self.refusals: tuple[SplitRefusal, ...] = ()  # the splits of the generation it holds that it does not serve
        self.sessions: list[BackendSessions] = []  # its live sessions of persistent splits, from its last GetHeld
        self.wake = asyncio.Event()
        self.client = PublisherClient(replica.address, fleet.token_file, fleet.timeout, fleet.tls, fleet.current_token)
        self.task = asyncio.create_task(self._run(), name=f"publish:{replica.address}")

    def _set(self, acked: int, name: str | None) -> None:
        changed = acked != self.acked or not self.known or (name and name != self.name)
        self.acked, self.known = acked, True
        if name:
            self.name = name
        self.fleet.note_held(acked)
        if changed:
            self.fleet.changed()

    def _forget_refusal(self) -> None:
        """The replica reconnected or restarted (maybe fixed): offer it the current generation at once."""
        self.refused, self.retry_at = 0, 0.0
        self.refused_backoff.reset()

    def _note_replica(self, reply: pb.PublishReply | pb.HeldReply, refused: bool) -> None:
        """What every reply says about the replica: its instance, capabilities and (`refused`: the reply lists the
        held generation's) per-split refusals."""
        if reply.instance and reply.instance != self.instance:
            if self.instance:
                log.info("dataplane %s (%s) restarted", self.name, self.replica.address)
            self.instance = reply.instance[:64]
            self._forget_refusal()
        changed = False
        if reply.HasField("capabilities"):
            caps = capabilities_from_proto(reply.capabilities)
            changed = caps != self.capabilities
            self.capabilities = caps
        if refused:
            refusals = refusals_from_proto(reply.refused)
            changed = changed or refusals != self.refusals
            self.refusals = refusals
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
        with contextlib.suppress(TimeoutError):  # asyncio.timeout keeps a cancel that 3.11's wait_for can drop
            async with asyncio.timeout(seconds * self.fleet.rng.uniform(0.5, 1.0)):
                await self.wake.wait()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = BACKOFF_MIN
        not_ready = NOT_READY_MIN
        started: float | None = None  # set while a Publish call is out (its failure is counted with its duration)
        while True:
            target = self.fleet.target
            started = None
            try:
                if not self.known:
                    # The probe (start, take-over, a re-discovered replica) also takes the held generation to seed
                    # last good forms from; the periodic poll below needs only the number.
                    held = await self.client.get_held(with_generation=True)
                    self.fleet.note_generation(held)
                    self._note_replica(held, refused=True)
                    self._note_sessions(held)
                    self._set(held.held_number, held.replica)
                    continue
                behind = target is not None and self.acked < target.number
                # A generation it refused whole waits for its backoff (or a reconnect, a restart, a newer target).
                waiting = behind and target is not None and self.refused == target.number
                waiting = waiting and loop.time() < self.retry_at
                if target is not None and behind and not waiting:
                    started = loop.time()
                    try:
                        reply = await self.client.publish(target)
                    except grpc.aio.AioRpcError:
                        self.fleet.metrics.observe_publish("unreachable", loop.time() - started)
                        raise
                    self.fleet.metrics.observe_publish(_RESULTS.get(reply.result, "invalid"), loop.time() - started)
                    self._note_replica(reply, refused=reply.result == pb.PublishReply.ACCEPTED)
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
                idle = self.fleet.poll_interval
                if waiting:
                    idle = min(idle, max(0.0, self.retry_at - loop.time()))
                self.wake.clear()
                with contextlib.suppress(TimeoutError):  # (asyncio.timeout: see _pause)
                    async with asyncio.timeout(idle):
                        await self.wake.wait()
                    continue
                held = await self.client.get_held()
                self._note_replica(held, refused=True)
                self._note_sessions(held)
                self._set(held.held_number, held.replica)
            except grpc.aio.AioRpcError as exc:
                if started is None:  # a failed Publish was counted above
                    self.fleet.metrics.error("replica_unreachable")
                if self.known or self.acked:
                    log.warning("dataplane %s (%s): %s", self.name, self.replica.address, exc.code().name)
                    self.acked, self.known = 0, False
                    self.fleet.changed()
                self._forget_refusal()  # it reconnects (maybe restarted, fixed): offered the current one at once
                await self._pause(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)

    async def _handle(self, target: pb.Generation, reply: pb.PublishReply) -> None:
        if reply.result == pb.PublishReply.ACCEPTED:
            refused = "".join(f"; refused {r.split}: {r.message}" for r in self.refusals)
            log.info("dataplane %s holds generation %d%s", reply.replica or self.name, reply.held_number, refused)
            self.refused_backoff.reset()
            # Lag from this target's numbering (a newer target set meanwhile has its own clock).
            if reply.held_number >= target.number > self.acked and self.fleet.target is target:
                self.fleet.metrics.observe_lag(asyncio.get_running_loop().time() - self.fleet.target_at)
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
            pause = self.refused_backoff.pause(self.fleet.rng)
            log.error(
                "dataplane %s refused generation %d (offered again in %.1fs, or when it reconnects): %s",
                reply.replica or self.name,
                target.number,
                pause,
                reply.message,
            )
            self.refused = target.number
            self.retry_at = asyncio.get_running_loop().time() + pause
            self._set(reply.held_number, reply.replica)

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.client.close()


class Numbering:
    """The operator's one generation counter, shared by every fleet it publishes to (the chart's gateway, each
    Gateway's data plane), so a number names one generation whichever replica holds it. A number is taken only once
    the generation it stamps validated, so a content that cannot be numbered does not use numbers up."""

    def __init__(self) -> None:
        self.issued = 0

    def next(self, floor: int) -> int:
        """The number the next generation gets: above everything taken and above `floor` (what a fleet holds)."""
        return max(self.issued, floor) + 1

    def took(self, number: int) -> None:
        self.issued = max(self.issued, number)


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
        metrics: FleetMetrics | None = None,
    ) -> None:
        self.token_file = token_file
        # A token of this fleet's replicas alone (a provisioned data plane's, set by the Gateway plane), sent
        # instead of the one `token_file` holds; None: the file's (the chart gateway's fleet).
        self.token: str | None = None
        self.tls = tls
        self.timeout = timeout
        self.poll_interval = poll_interval
        self._changed = changed
        self.rng = rng or random.Random()  # backoff jitter
        self.metrics = metrics or OperatorMetrics(gateway="").chart  # its counters, under its `gateway` label
        self.target_at = 0.0  # event-loop time the current target was set (publish lag)
        self._target: pb.Generation | None = None
        self._floor = 0  # the highest number any replica ever reported holding
        # The generation with the highest number a replica reported through GetHeld (None: none reported one, e.g.
        # every replica restarted and holds nothing, or runs a version without HeldReply.generation).
        self._held: pb.Generation | None = None
        self._workers: dict[str, _Worker] = {}

    def current_token(self) -> str | None:
        return self.token if self.token is not None else read_token(self.token_file)

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
        self.target_at = asyncio.get_running_loop().time()
        for w in self._workers.values():
            w.wake.set()

    def sessions(self) -> dict[str, dict[str, BackendSessions]]:
        """Live sessions of persistent splits summed over the replicas that answered (the Drained condition)."""
        return sum_replicas([w.sessions for w in self._workers.values() if w.known])

    def capabilities(self) -> dict[str, Capabilities]:
        """Replica name → what it can serve, for every replica that reported it (the engine publishes only what all
        of them can serve). A replica keeps its last report while it is unreachable, so its restart does not flap
        what is published."""
        return {w.name: w.capabilities for w in self._workers.values() if w.capabilities is not None}

    def refusals(self) -> dict[str, tuple[tuple[str, str], ...]]:
        """Split key → (replica name, message) for each replica that refused that split alone from the generation
        it holds."""
        out: dict[str, list[tuple[str, str]]] = {}
        for w in self._workers.values():
            for r in w.refusals:
                out.setdefault(r.split, []).append((w.name, r.message))
        return {k: tuple(sorted(v)) for k, v in out.items()}

    def acks(self) -> tuple[ReplicaAck, ...]:
        return tuple(ReplicaAck(w.name, w.acked) for w in self._workers.values())

    def acked_by_all(self) -> int:
        """The highest number every replica acknowledged (0 without replicas): a status check per route reads it,
        so it builds nothing."""
        return min((w.acked for w in self._workers.values()), default=0)

    def all_known(self) -> bool:
        """Every replica answered once since it was found (so `highest_held` covers them all)."""
        return all(w.known for w in self._workers.values())

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
