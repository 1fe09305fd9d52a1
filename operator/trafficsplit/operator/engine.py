"""The level-triggered loop shared by the Kubernetes and file sources: state → generation → publish → status.

Any change marks the engine dirty; after a short debounce (a burst of EndpointSlice updates is one pass) it
recompiles everything from the current state with the pure core. A new number is taken only when the content changed
(or a replica reports a higher number than ours), so a status write, which itself triggers a watch event, never
publishes again. Numbers only grow: they continue above the highest number any replica reports holding.

Last good forms live in memory, so a restarted or newly leading operator seeds the ones it lacks from the generation
the replicas hold (their `GetHeld` replies): a split it cannot compile now keeps the replicas' form, and every other
change keeps being published.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trafficsplit.core.control.reconcile import CompileMemo, Desired, desired_state, seed_last_good
from trafficsplit.core.control.resolve import (
    ServiceInfo,
    SliceInfo,
    SplitObject,
    referenced_services,
    slices_by_service,
)
from trafficsplit.core.control.status import EventIntent, PublishView, SplitStatus, StatusResult, compute_status
from trafficsplit.core.model.compiled import CompiledSplit
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import Generation, GenerationContent
from trafficsplit.operator.cluster import (
    SERVICE_NAME_LABEL,
    Replica,
    replicas_from_slices,
    service_from_body,
    slice_from_body,
    split_from_body,
)
from trafficsplit.operator.fleet import Fleet, Numbering
from trafficsplit.operator.gateways import GATEWAY_KINDS, GatewayPlane
from trafficsplit.operator.heap import freeze_loaded_heap
from trafficsplit.operator.metrics import OperatorState, backend_states
from trafficsplit.operator.store import Key, Parse, WatchStore
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.generation import ProtoParts, generation_from_proto, generation_to_proto

log = logging.getLogger("trafficsplit.operator.engine")

StatusSink = Callable[[SplitObject, StatusResult], Awaitable[None]]


@dataclass
class Store(WatchStore):
    """What the TrafficSplit plane's watches have seen, as small projections keyed by (namespace, name)."""

    parsers: ClassVar[Mapping[str, Parse]] = {
        "trafficsplit": split_from_body,
        "service": service_from_body,
        "endpointslice": slice_from_body,  # None for a slice of no Service
    }

    splits: dict[Key, SplitObject] = field(default_factory=dict)
    services: dict[Key, ServiceInfo] = field(default_factory=dict)
    slices: dict[Key, SliceInfo] = field(default_factory=dict)

    def table(self, kind: str) -> dict[Key, Any]:
        tables: dict[str, dict[Key, Any]] = {
            "trafficsplit": self.splits,
            "service": self.services,
            "endpointslice": self.slices,
        }
        return tables[kind]


def held_forms(msg: pb.Generation) -> dict[str, CompiledSplit]:
    """Split key → the form a held generation (a replica's `GetHeld` reply) carries, read with the dataplane's own
    receiver, so a form is exactly what the replica decides with; a generation that does not read back (a replica of
    another version, a corrupted reply) yields nothing rather than a guess."""
    try:
        gen = generation_from_proto(msg)
    except SpecError:
        return {}
    return {s.key: s for s in gen.splits}


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSettings:
    origin: str  # names this operator in every generation it publishes
    debounce: float  # seconds a burst of events is gathered into one pass
    static_replicas: tuple[Replica, ...] = ()  # local mode and tests: dataplanes given on the command line
    gateway: tuple[str, str] | None = None  # (namespace, Service) whose EndpointSlices list the dataplanes
    publish_port_name: str = "publish"
    static: bool = False  # local mode: no Services; backends use the endpoints the spec lists
    # Gateway API only: no data plane serves TrafficSplits, so none is published; each one's status says so.
    no_gateway: bool = False
    # The operator process's own: after the first pass, freeze what the start-up listing left (heap.py). Off for an
    # engine in a process that is not the operator's (the tests': their objects would never be collected).
    freeze_heap: bool = False


@dataclass(frozen=True, slots=True)
class Carried:
    """The first number that carried one split's served form (its spec and its endpoints: an endpoint change is
    published, and shown in status.generation, as a spec change is). Keyed by the object's uid too: a recreated split
    (new uid, metadata.generation 1 again) is not counted as published by a number that carried its predecessor."""

    uid: str
    number: int
    form: CompiledSplit  # the served form that number carried (its observed_generation says which spec)


@dataclass(frozen=True, slots=True)
class HeldForms:
    """The forms the fleet's held generation carries, read once per held number."""

    number: int = 0
    forms: Mapping[str, CompiledSplit] = field(default_factory=dict)


@dataclass(kw_only=True)
class Publishing:
    """What this leadership published: the number, the content it carries, and when each split's form came."""

    number: int = 0
    content: GenerationContent | None = None
    carried: dict[str, Carried] = field(default_factory=dict)
    # the messages the last payload was built from (a split that did not change is not converted again)
    proto: ProtoParts = field(default_factory=ProtoParts)
    held_back: frozenset[str] = frozenset()  # unsure splits that stop publishing (reconcile.Desired.unsure)

    def since(self) -> dict[str, int]:
        return {key: c.number for key, c in self.carried.items()}

    def record(self, gen: Generation, uids: Mapping[str, str]) -> None:
        self.number, self.content = gen.number, gen.content
        for s in gen.splits:
            uid = uids.get(s.key, "")
            prev = self.carried.get(s.key)
            # The form is content (its metadata.generation included), and the pass's memo hands back the same object
            # for an unchanged split, so `is` settles most of them.
            if prev is None or prev.uid != uid or not (prev.form is s or prev.form == s):
                self.carried[s.key] = Carried(uid, gen.number, s)


@dataclass(frozen=True, slots=True)
class PostedEvent:
    uid: str
    generation: int
    reason: str
    message: str


class StatusWriter:
    """Writes each split's status and Events through `sink`: only a status that differs from what the object has
    (or what was last written), and each Event once per object version."""

    def __init__(self, sink: StatusSink, on_error: Callable[[], None] = lambda: None) -> None:
        self._sink = sink
        self._on_error = on_error
        self._written: dict[str, tuple[str, SplitStatus]] = {}  # by key: the object's uid and its status
        self._posted: set[PostedEvent] = set()

    async def write(self, splits: Iterable[SplitObject], desired: Desired, view: PublishView, now: str) -> None:
        objects = list(splits)
        for obj in objects:
            outcome = desired.outcomes.get(obj.key)
            if outcome is None:
                continue
            written = self._written.get(obj.key)
            # Until the watch brings our write back, the object holds the status before it: what we wrote is the
            # newer, so transitions are timed against it (else a pass a second later restamps and rewrites them).
            ours = written[1] if written is not None and written[0] == obj.uid else None
            result = compute_status(obj, outcome, view, now, ours)
            events = tuple(e for e in result.events if self._posting(obj, e) not in self._posted)
            again = result.status == SplitStatus.from_dict(obj.status) or written == (obj.uid, result.status)
            if again and not events:
                continue
            try:
                await self._sink(obj, StatusResult(result.status, events))
            except Exception as exc:  # logged; retried on the next pass
                log.warning("status of %s not written: %s", obj.key, exc)
                self._on_error()
                continue
            self._written[obj.key] = (obj.uid, result.status)
            self._posted.update(self._posting(obj, e) for e in events)
        for gone in [k for k in self._written if k not in desired.outcomes]:
            del self._written[gone]
        uids = {o.uid for o in objects}
        self._posted = {p for p in self._posted if p.uid in uids}

    def forget(self) -> None:
        """What this writer wrote is no longer the newest (another leader may have written since)."""
        self._written.clear()

    @staticmethod
    def _posting(obj: SplitObject, event: EventIntent) -> PostedEvent:
        return PostedEvent(obj.uid, obj.generation, event.reason, event.message)


class Engine:
    def __init__(
        self,
        fleet: Fleet,
        settings: EngineSettings,
        status_sink: StatusSink | None = None,
        gateways: GatewayPlane | None = None,
    ) -> None:
        self.settings = settings
        self.fleet = fleet
        # Gateway API (None: off). Its Gateways' generations take their numbers from the same counter as the chart's
        # gateway, so a number names one generation whichever data plane holds it.
        self.gateways = gateways
        self.numbering = Numbering()
        self.store = Store()
        self.leader = False
        self.passes = 0
        self._publishing = Publishing()
        self._last_good: dict[str, CompiledSplit] = {}
        self._held = HeldForms()
        self._memo = CompileMemo()  # a pass recompiles only the splits whose spec, endpoints or table changed
        self.metrics = fleet.metrics.operator  # the chart's fleet's registry: every fleet's series are in it
        self._status = StatusWriter(status_sink, self._status_failed) if status_sink is not None else None
        self._replicas: tuple[Replica, ...] | None = None
        self._dirty = asyncio.Event()
        self._ready = asyncio.Event()

    def _status_failed(self) -> None:
        self.metrics.error("status_write")

    @property
    def number(self) -> int:
        return self._publishing.number

    # --- inputs ------------------------------------------------------------------------------------------------------

    def poke(self) -> None:
        self._dirty.set()

    def load(self, kind: str, body: Mapping[str, Any]) -> None:
        """The start-up listing: into the store, no pass (`mark_ready` starts the first)."""
        if kind not in GATEWAY_KINDS:
            self.store.apply(kind, None, body)
        elif self.gateways is not None:
            self.gateways.store.apply(kind, None, body)

    def apply(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        if kind in GATEWAY_KINDS:
            if self.gateways is not None:
                self.gateways.store.apply(kind, event_type, body)
                self.poke()
            return
        self.store.apply(kind, event_type, body)
        if kind == "trafficsplit" or self._concerns_us(kind, body):
            self.poke()

    def replace_splits(self, splits: Mapping[tuple[str, str], SplitObject]) -> None:
        """Local mode: the file source read its directory again."""
        self.store.splits = dict(splits)
        self.poke()

    def _concerns_us(self, kind: str, body: Mapping[str, Any]) -> bool:
        """Services and EndpointSlices that no split names (most of a cluster) are stored but trigger no pass: a
        split that names one later triggers its own pass, which reads the store."""
        meta = body.get("metadata") or {}
        ns = str(meta.get("namespace") or "")
        name = (
            str(meta.get("name") or "")
            if kind == "service"
            else str((meta.get("labels") or {}).get(SERVICE_NAME_LABEL) or "")
        )
        if self.gateways is not None and (ns, name) in self.gateways.referenced:
            return True
        return (ns, name) in referenced_services(self.store.splits.values()) or (ns, name) == self.settings.gateway

    def mark_ready(self) -> None:
        """The initial full listing is in the store: passes may run (before it, a pass would drop splits)."""
        self._ready.set()
        self.poke()

    async def become_leader(self, probe_timeout: float = 3.0) -> None:
        await self._sync_replicas()
        floor = await self.fleet.probe(probe_timeout)
        # What this leadership publishes starts here: the current content under a fresh number above what the
        # replicas hold (another leader may have published meanwhile).
        self._publishing = Publishing(number=max(self._publishing.number, floor))
        self.numbering.took(self._publishing.number)
        if self._status is not None:
            self._status.forget()
        self.leader = True
        log.info("leading: numbering continues above %d", self._publishing.number)
        self.poke()

    async def stop_leading(self) -> None:
        self.leader = False
        await self.fleet.set_replicas(())
        self._replicas = None
        if self.gateways is not None:
            await self.gateways.close()

    # --- the loop ----------------------------------------------------------------------------------------------------

    async def run(self, resync: float = 60.0) -> None:
        await self._ready.wait()
        frozen = False
        while True:
            # A pass at least every `resync` seconds even without events: a failed status write is retried and
            # anything a lost event left stale is recomputed (level-triggered).
            # asyncio.timeout, not wait_for: 3.11's wait_for drops a cancel that lands as the wait ends.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(resync):
                    await self._dirty.wait()
            self._dirty.clear()
            if self.settings.debounce > 0:
                await asyncio.sleep(self.settings.debounce)
                self._dirty.clear()
            try:
                await self.run_pass()
                if self.settings.freeze_heap and not frozen:
                    # the store listed and its first pass done: what stays for long is there now
                    freeze_loaded_heap()
                    frozen = True
            except Exception:  # a bug in one pass must not stop the operator; the next event retries
                log.exception("reconcile pass failed")
                self.metrics.error("pass_failed")
                await asyncio.sleep(0.5)
                self.poke()

    def replicas(self) -> tuple[Replica, ...]:
        if self.settings.gateway is None:
            return self.settings.static_replicas
        ns, svc = self.settings.gateway
        return replicas_from_slices(
            (s for s in self.store.slices.values() if s.namespace == ns and s.service == svc),
            self.settings.publish_port_name,
        )

    async def _sync_replicas(self) -> None:
        replicas = self.replicas()
        if replicas != self._replicas:
            self._replicas = replicas
            log.info("dataplanes: %s", ", ".join(f"{r.name}@{r.address}" for r in replicas) or "none")
            await self.fleet.set_replicas(replicas)

    def compile(self) -> Desired:
        return desired_state(
            self.store.splits.values(),
            self.store.services,
            slices_by_service(self.store.slices.values()),
            self._last_good,
            static=self.settings.static,
            held_tables={k: f.table for k, f in self._held_forms().items() if f.table is not None},
            memo=self._memo,
            capabilities=self.fleet.capabilities(),
        )

    def _held_forms(self) -> Mapping[str, CompiledSplit]:
        """The forms of the generation the dataplanes hold, converted once per held number."""
        held = self.fleet.held_generation
        if held is not None and self._held.number != held.number:
            self._held = HeldForms(held.number, held_forms(held))
        return self._held.forms

    async def run_pass(self) -> None:
        self.passes += 1
        t0 = time.perf_counter()
        desired = self.compile()
        self.metrics.reconcile_seconds.observe(time.perf_counter() - t0)
        if not self.leader:
            # A standby keeps its last good forms warm, so a take-over never drops a split that is unresolved now. Not
            # a slot table it rebuilt or took in place of a refused status.assignment: a standby has no dataplanes'
            # copy, so the leader it becomes reads the table again, with that copy (and says what moved).
            self._last_good = {
                k: f
                for k, f in desired.last_good.items()
                if not (desired.outcomes[k].table_rebuilt or desired.outcomes[k].table_refused)
            }
            self.metrics.set_state(OperatorState())
            return
        await self._sync_replicas()
        if not self.settings.no_gateway:
            if self._seed(desired):
                desired = self.compile()
            self._publish(desired)
        try:
            if self._status is not None:
                await self._status.write(self.store.splits.values(), desired, self.view(), now_rfc3339())
            if self.gateways is not None:
                await self.gateways.read_certificates()
                translation = self.gateways.translate(self.store.services, self.store.slices)
                await self.gateways.run_pass(translation, self.store.slices, self.numbering, now_rfc3339())
        finally:
            # After the Gateways' pass, so a Gateway deleted in it has no series from now on; even when it raised.
            self._export_state()

    def _export_state(self) -> None:
        """The metrics' view of this pass (every acknowledgement change pokes a pass, so it stays current)."""
        published = self._publishing
        self.metrics.set_state(
            OperatorState(
                leader=True,
                generation=published.number,
                acks=self.fleet.acks(),
                refused_splits=sum(len(v) for v in self.fleet.refusals().values()),
                held_back=len(published.held_back),
                backends=backend_states(published.content.splits if published.content is not None else ()),
                gateways=self.gateways.fleet_states() if self.gateways is not None else (),
            )
        )

    def _seed(self, desired: Desired) -> bool:
        """Take the replicas' form as last good for each unsure split this leadership never published (a restart or
        take-over); True when any was taken. Only unsure splits: a stand-in this leadership published itself (a new
        split with a missing Service) must not come back from the replicas as last good."""
        keys = {k for k in desired.unsure if k not in self._publishing.carried}
        held = self.fleet.held_generation
        if not keys or held is None:
            return False
        seeds = seed_last_good(self.store.splits.values(), self._held_forms(), keys)
        if seeds:
            log.info("last good forms of %s taken from generation %d the dataplanes hold", sorted(seeds), held.number)
            self._last_good.update(seeds)
        return bool(seeds)

    def _publish(self, desired: Desired) -> None:
        published = self._publishing
        floor = self.fleet.highest_held
        # A split the replicas may hold in a better form than we can build (unresolved or invalid now, this leadership
        # never published it, and no replica reported a form of it to seed from) stops publishing until it resolves:
        # publishing would make it worse. The fallback only: with seeds (`_seed`) it is not unsure any more.
        unsure = (k for k in desired.unsure if k not in published.carried)
        held_back = frozenset(unsure) if floor > 0 else frozenset()
        if held_back and held_back != published.held_back:
            log.error(
                "no dataplane reported a form of %s: nothing published until they resolve (the replicas keep what "
                "they hold)",
                sorted(held_back),
            )
        published.held_back = held_back
        if held_back:
            return
        content = desired.content
        if content == published.content and floor <= published.number:
            return  # the content the current number carries: nothing new to publish
        number = self.numbering.next(max(published.number, floor))
        try:
            # Numbered once, and the numbered generation validates itself before anything leaves the process: never
            # publish what could not compile. What was checked is exactly what is published.
            gen = content.stamp(number)
        except SpecError as exc:
            log.error("generation %d not published: %s", number, exc)
            self.metrics.error("generation_invalid")
            return
        self.numbering.took(number)
        published.record(gen, {o.key: o.uid for o in self.store.splits.values()})
        self._last_good = dict(desired.last_good)
        log.info("generation %d: %d splits", number, len(gen.splits))
        # Each split's first carrying number goes along: the dataplane's fallback routes disclose it, so a split that
        # did not change keeps its Envoy virtual host (one change among 1,000 splits rebuilds one, not 1,000).
        self.fleet.set_target(generation_to_proto(gen, self.settings.origin, published.since(), published.proto))

    def view(self) -> PublishView:
        published = self._publishing
        return PublishView(
            published.number,
            self.fleet.acks(),
            published.since(),
            held_back=published.held_back,
            sessions=self.fleet.sessions(),
            refused=self.fleet.refusals(),
            no_gateway=self.settings.no_gateway,
        )
