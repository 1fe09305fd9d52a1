"""Current cluster state → the desired generation's content, and every split's outcome. Pure.

Level-triggered: the engine calls `desired_state` with everything it knows after any event, so a missed or
duplicated event can never leave the result wrong. A split that cannot be compiled now (invalid spec, missing
Service or port) keeps its last good compiled form, so the dataplane keeps serving what worked. Without one, an
invalid split is left out and an unresolved backend gets no endpoints, so its sessions fail over to the resolved
backends instead of the whole host going away. That stand-in is never remembered as last good (the next pass builds
it again from the current endpoints), and when the split's status says a generation already carried it (an operator
that restarted or took over), the replicas may hold a better form than the stand-in: `Desired.unsure` names it.
The engine then seeds its last good form from the generation the replicas hold (`seed_last_good`), and only when no
replica reports a form of it does it fall back to publishing nothing it has not published itself until the split
resolves. The generation number is the engine's business.

Tenant isolation: a split some dataplane replica cannot serve (core/model/capabilities.py, from what the replicas
report) is that split's problem alone. It keeps its last good form when that one can be served, else it is left out, and
`Outcome.unservable` says why; every other split is published as usual.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from trafficsplit.core.control.compiler import assemble, compile_split
from trafficsplit.core.control.resolve import MissingRef, Resolution, ServiceInfo, SliceInfo, SplitObject, resolve
from trafficsplit.core.model.assignment import AssignmentMode, SlotTable, StoredFields, moved_share, stored_fields
from trafficsplit.core.model.capabilities import Capabilities, fleet_refusal
from trafficsplit.core.model.compiled import CompiledSplit
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import GenerationContent
from trafficsplit.core.model.rules import Endpoint
from trafficsplit.core.model.splitspec import SplitSpec
from trafficsplit.core.model.vocabulary import Reason


@dataclass(frozen=True, slots=True)
class Verdict:
    """One condition's answer for a split: whether it holds, the reason, and the message for people."""

    ok: bool
    reason: Reason
    message: str


ACCEPTED = Verdict(True, Reason.ACCEPTED, "the spec is valid")
RESOLVED = Verdict(True, Reason.RESOLVED_REFS, "every backend Service and port exists")
NOT_RESOLVED_INVALID = Verdict(False, Reason.INVALID, "the spec is invalid")


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What happened to one TrafficSplit in this pass."""

    key: str
    observed_generation: int
    accepted: Verdict
    resolved: Verdict
    spec: SplitSpec | None = None
    resolution: Resolution | None = None
    # What the desired generation carries for this split (maybe an older, last good form; its observed_generation
    # says which metadata.generation it was compiled from).
    served: CompiledSplit | None = None
    kept: bool = False  # `served` is the last good form, kept because the current spec cannot be served
    # spec.assignment: minimal, published before, and no slot table to advance (neither a form here, nor a verified
    # status.assignment, nor the dataplanes' copy): the table was rebuilt from the current weights alone, which may
    # move any session.
    table_rebuilt: bool = False
    # Some replica cannot serve the compiled form (e.g. sticky.mode persistent without cookie keys): not published,
    # `served` is the last good form when every replica can serve that one, else None.
    unservable: Verdict | None = None
    # Why status.assignment was refused (core/model/assignment.py's reader): the table did not come from it.
    table_refused: tuple[str, ...] = ()
    # With table_refused, when the table continued from the dataplanes' copy: the share of slots (so of sessions) the
    # served table moves against that copy. None when unknown (rebuilt) or nothing was refused.
    table_moved: Fraction | None = None

    @property
    def missing(self) -> tuple[MissingRef, ...]:
        return self.resolution.missing if self.resolution is not None else ()

    @property
    def serves_current_spec(self) -> bool:
        return self.served is not None and self.served.observed_generation == self.observed_generation


@dataclass(frozen=True, slots=True)
class Desired:
    content: GenerationContent  # the next generation's content, without a number (generation order: oldest first)
    outcomes: Mapping[str, Outcome]
    last_good: Mapping[str, CompiledSplit]  # the forms worth keeping: compiled from a resolved spec, or kept ones
    unsure: tuple[str, ...]  # split keys the replicas may hold in a better form than `served` gives them


_MemoKey = tuple[SplitSpec, tuple[tuple[str, tuple[Endpoint, ...]], ...], int, SlotTable | None]
_TableKey = tuple[str, StoredFields]  # the object's uid and its status.assignment's fields
_TableRead = tuple[SlotTable | None, tuple[str, ...]]  # the verified table, else why it was refused


class CompileMemo:
    """`compile_split` results of the last pass by their inputs (spec value, endpoints, metadata.generation, slot
    table), and status.assignment reads by their raw value: a pass recompiles only the splits whose inputs changed, so
    one flip among 1,000 splits compiles one, and reads a stored table once per change of it, not once per pass. The
    engine owns one; each pass keeps only what it used (bounded by the splits there are)."""

    __slots__ = ("_last", "_tables_last", "_tables_used", "_used")

    def __init__(self) -> None:
        self._last: dict[_MemoKey, CompiledSplit] = {}
        self._used: dict[_MemoKey, CompiledSplit] = {}
        self._tables_last: dict[_TableKey, _TableRead] = {}
        self._tables_used: dict[_TableKey, _TableRead] = {}

    def compile(
        self, spec: SplitSpec, endpoints: Mapping[str, tuple[Endpoint, ...]], generation: int, table: SlotTable | None
    ) -> CompiledSplit:
        key = (spec, tuple(endpoints.items()), generation, table)
        got = self._used.get(key) or self._last.get(key)
        if got is None:
            got = compile_split(spec, endpoints, generation, table)
        self._used[key] = got
        return got

    def stored_table(self, uid: str, raw: Any) -> _TableRead:
        """status.assignment of the object `uid`, verified (`SlotTable.from_status`) once per value: junk is refused by
        its bounds before any parsing, and a value already read this pass or the last is not read again."""
        fields = stored_fields(raw)
        if isinstance(fields, list):
            return None, tuple(fields)
        key = (uid, fields)
        got = self._tables_used.get(key) or self._tables_last.get(key)
        if got is None:
            try:
                got = SlotTable.from_status(raw, uid), ()
            except SpecError as exc:
                got = None, exc.problems
        self._tables_used[key] = got
        return got

    def end_pass(self) -> None:
        self._last, self._used = self._used, {}
        self._tables_last, self._tables_used = self._tables_used, {}


def _order(splits: Iterable[SplitObject]) -> list[SplitObject]:
    # The oldest split keeps a contested host (as Gateway API resolves conflicts); the key breaks ties.
    return sorted(splits, key=lambda s: (s.created, s.key))


def desired_state(
    splits: Iterable[SplitObject],
    services: Mapping[tuple[str, str], ServiceInfo],
    slices: Mapping[tuple[str, str], list[SliceInfo]],
    last_good: Mapping[str, CompiledSplit],
    *,
    static: bool = False,
    held_tables: Mapping[str, SlotTable] | None = None,
    memo: CompileMemo | None = None,
    capabilities: Mapping[str, Capabilities] | None = None,
) -> Desired:
    """Compile every split that can be compiled; fall back to the last good form for those that cannot.

    `static` (local mode): there are no Services; backends use the endpoints the spec lists. `held_tables`: the slot
    tables (spec.assignment: minimal) of the generation the dataplanes hold, the last source of a table's history.
    `memo`: the previous pass's compiled forms, reused where the inputs are equal (the result is the same).
    `capabilities`: replica name → what it reported it can serve; a split one of them cannot serve is not published."""
    candidates: list[tuple[SplitObject, Outcome]] = []
    held = held_tables or {}
    memo = memo or CompileMemo()
    for obj in _order(splits):
        prev = last_good.get(obj.key)
        candidates.append((obj, _outcome(obj, services, slices, prev, static, held.get(obj.key), memo)))
    memo.end_pass()
    for i, (obj, o) in enumerate(candidates):
        why = fleet_refusal(o.served, capabilities) if o.served is not None and capabilities else None
        if why is not None and capabilities:
            prev = last_good.get(obj.key)
            form = prev if prev is not None and fleet_refusal(prev, capabilities) is None else None
            unservable = Verdict(False, Reason.UNSERVABLE, why)
            candidates[i] = (obj, replace(o, unservable=unservable, served=form, kept=form is not None))
    by_key = {o.served.key: o.served for _, o in candidates if o.served is not None}
    content, rejected = assemble(by_key.values())
    outcomes = {o.key: o for _, o in candidates}
    for r in rejected:
        outcomes[r.split] = replace(outcomes[r.split], accepted=Verdict(False, r.reason, r.message), served=None)
    keep = {s.key: s for s in content.splits if outcomes[s.key].resolved.ok or outcomes[s.key].kept}
    # Not servable now and nothing kept here, yet a generation carried it (status.generation): a restart or take-over.
    unsure = tuple(
        o.key for obj, o in candidates if not o.resolved.ok and o.key not in last_good and obj.status.get("generation")
    )
    return Desired(content, outcomes, keep, unsure)


def _outcome(
    obj: SplitObject,
    services: Mapping[tuple[str, str], ServiceInfo],
    slices: Mapping[tuple[str, str], list[SliceInfo]],
    prev: CompiledSplit | None,
    static: bool,
    held_table: SlotTable | None,
    memo: CompileMemo,
) -> Outcome:
    """One split: compiled now, or its last good form `prev` (or a stand-in) with the reason it cannot be."""
    base = Outcome(key=obj.key, observed_generation=obj.generation, accepted=ACCEPTED, resolved=RESOLVED)
    spec = obj.parsed
    if spec is None:
        invalid = Verdict(False, Reason.INVALID, "; ".join(obj.problems))
        return replace(base, accepted=invalid, resolved=NOT_RESOLVED_INVALID, served=prev, kept=prev is not None)
    res = Resolution({}, ()) if static else resolve(spec, services, slices)
    # Without a last good form, the unresolved backends get no endpoints: the dataplane then fails their sessions
    # over to the resolved ones (docs/spec.md §6) rather than losing the whole host.
    empty: dict[str, tuple[Endpoint, ...]] = {b.name: () for b in spec.backends}
    # The slot table's history (spec.assignment: minimal): the form served here, else the one status stored if it
    # verifies (an operator that restarted or took over), else the one the dataplanes hold (status lost or refused),
    # so it survives all three. A hash split has no table to continue: its status is not read.
    table = prev.table if prev is not None else None
    table_refused: tuple[str, ...] = ()
    if table is None and spec.assignment is AssignmentMode.MINIMAL:
        raw = obj.status.get("assignment")
        if raw is not None:
            table, table_refused = memo.stored_table(obj.uid, raw)
        table = table or held_table
        if table is None and (table_refused or obj.status.get("generation")):
            base = replace(base, table_rebuilt=True)
        base = replace(base, table_refused=table_refused)
    try:
        endpoints = {**empty, **res.endpoints} if res.missing else res.endpoints
        compiled = memo.compile(spec, endpoints, obj.generation, table)
        if table_refused and table is not None and compiled.table is not None:
            base = replace(base, table_moved=moved_share(table, compiled.table))
    except SpecError as exc:  # what only the resolved endpoints can break (core/model/limits.py: MAX_ENDPOINTS)
        refused = Verdict(False, Reason.ENDPOINTS_REFUSED, "; ".join(exc.problems))
        return replace(base, resolved=refused, spec=spec, resolution=res, served=prev, kept=prev is not None)
    if res.missing:
        unresolved = Verdict(False, res.missing[0].reason, "; ".join(m.message for m in res.missing))
        served = prev or compiled
        return replace(base, resolved=unresolved, spec=spec, resolution=res, served=served, kept=prev is not None)
    return replace(base, spec=spec, resolution=res, served=compiled)


def seed_last_good(
    splits: Iterable[SplitObject], held: Mapping[str, CompiledSplit], keys: Collection[str]
) -> dict[str, CompiledSplit]:
    """The forms a held generation (the replicas') gives as last good for the splits `keys` names (the unsure ones).

    A held form stands for a split only when it can be that object's: the same namespace/name, a generation already
    carried the object (its status.generation is set, so a recreated object never takes its predecessor's form), and
    it was compiled from a metadata.generation no newer than the object's."""
    out: dict[str, CompiledSplit] = {}
    for obj in splits:
        form = held.get(obj.key)
        if (
            obj.key in keys
            and form is not None
            and obj.status.get("generation")
            and form.observed_generation <= obj.generation
        ):
            out[obj.key] = form
    return out
