"""A TrafficSplit's status and the Events worth posting, computed from one reconcile outcome. Pure.

Why pure: conditions are the operator's user interface (`kubectl get ts`, `kubectl wait --for=condition=Published`);
their reasons and messages are tested as values. Comparing with the stored status keeps `lastTransitionTime` stable
and makes the shell write only what changed, so a status write never triggers another write.

The status shape is `SplitStatus`, a typed value: the operator writes `to_dict()`, and the CLI reads what the API
server holds back with `SplitStatus.from_dict`, so both sides agree on one definition (docs/crd.md lists the fields).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from fractions import Fraction
from typing import Any

from trafficsplit.core.control.plan import plan
from trafficsplit.core.control.reconcile import Outcome, Verdict
from trafficsplit.core.control.resolve import SplitObject
from trafficsplit.core.decide.sessions import BackendSessions
from trafficsplit.core.model.assignment import minimal_moved_share
from trafficsplit.core.model.condition import MAX_CONDITION_MESSAGE, Condition
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.vocabulary import ConditionType, EventReason, EventType, Reason
from trafficsplit.core.model.weights import Weights, parse_weights


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendStatus:
    """One `status.backends[]` entry: a backend as served."""

    name: str | None
    service: str | None
    port: int | None
    weight: int | None
    share: str | None  # "95.00%"
    ready_endpoints: int | None
    endpoints: int | None
    live_sessions: int | None = None  # sticky.mode persistent: sessions served here within the idle window

    def to_dict(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "service": self.service,
            "port": self.port,
            "weight": self.weight,
            "share": self.share,
            "readyEndpoints": self.ready_endpoints,
            "endpoints": self.endpoints,
        }
        if self.live_sessions is not None:
            out["liveSessions"] = self.live_sessions
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> BackendStatus:
        return cls(
            name=_str(raw.get("name")),
            service=_str(raw.get("service")),
            port=_int(raw.get("port")),
            weight=_int(raw.get("weight")),
            share=_str(raw.get("share")),
            ready_endpoints=_int(raw.get("readyEndpoints")),
            endpoints=_int(raw.get("endpoints")),
            live_sessions=_int(raw.get("liveSessions")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Displacement:
    """`status.displacement`: what the last weight change did to sticky sessions (trafficsplit.core.control.plan)."""

    before: str | None  # "from"
    after: str | None  # "to"
    total_changed: bool | None
    repinned_share: str | None
    rebalanced: str | None = None  # only when the total changed
    rebalanced_repinned_share: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "from": self.before,
            "to": self.after,
            "totalChanged": self.total_changed,
            "repinnedShare": self.repinned_share,
        }
        if self.rebalanced is not None:
            out["rebalanced"] = self.rebalanced
            out["rebalancedRepinnedShare"] = self.rebalanced_repinned_share
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Displacement:
        changed = raw.get("totalChanged")
        return cls(
            before=_str(raw.get("from")),
            after=_str(raw.get("to")),
            total_changed=changed if isinstance(changed, bool) else None,
            repinned_share=_str(raw.get("repinnedShare")),
            rebalanced=_str(raw.get("rebalanced")),
            rebalanced_repinned_share=_str(raw.get("rebalancedRepinnedShare")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SplitStatus:
    """A TrafficSplit's `status`, as the operator writes it and the CLI reads it."""

    observed_generation: int | None = None
    conditions: tuple[Condition, ...] = ()
    weights: str | None = None  # the served weights, "stable=95,canary=5"
    generation: int | None = None  # the dataplane generation that carries the current spec
    backends: tuple[BackendStatus, ...] | None = None
    displacement: Displacement | None = None
    # spec.assignment: minimal: the slot table served (core/model/assignment.py's stored form), read back after a
    # restart
    assignment: Mapping[str, Any] | None = None

    def condition(self, type_: ConditionType) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "observedGeneration": self.observed_generation,
            "conditions": [c.to_dict() for c in self.conditions],
        }
        if self.weights is not None:
            out["weights"] = self.weights
        if self.backends is not None:
            out["backends"] = [b.to_dict() for b in self.backends]
        if self.displacement is not None:
            out["displacement"] = self.displacement.to_dict()
        if self.generation is not None:
            out["generation"] = self.generation
        if self.assignment is not None:
            out["assignment"] = dict(self.assignment)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SplitStatus:
        """Leniently: a field of the wrong type reads as absent (None), an entry that is no object is skipped."""
        conditions = raw.get("conditions")
        backends = raw.get("backends")
        displacement = raw.get("displacement")
        return cls(
            observed_generation=_int(raw.get("observedGeneration")),
            conditions=tuple(Condition.from_dict(c) for c in conditions if isinstance(c, Mapping))
            if isinstance(conditions, list)
            else (),
            weights=_str(raw.get("weights")) or None,
            generation=_int(raw.get("generation")),
            backends=tuple(BackendStatus.from_dict(b) for b in backends if isinstance(b, Mapping))
            if isinstance(backends, list)
            else None,
            displacement=Displacement.from_dict(displacement) if isinstance(displacement, Mapping) else None,
            assignment=assignment if isinstance(assignment := raw.get("assignment"), Mapping) else None,
        )


@dataclass(frozen=True, slots=True)
class ReplicaAck:
    name: str
    acked: int  # the highest generation number this replica acknowledged; 0 when unknown


@dataclass(frozen=True, slots=True)
class PublishView:
    """What the publisher knows when status is computed."""

    number: int  # the generation number the desired content has (0: nothing compiled/published yet)
    replicas: tuple[ReplicaAck, ...]
    since: Mapping[str, int] = field(default_factory=dict)  # split key → first number carrying its served form
    held_back: frozenset[str] = frozenset()  # splits that stop publishing until they resolve (engine._publish)
    _: KW_ONLY
    # split key → backend → live sessions summed over the replicas (persistent splits; core/decide/sessions.py)
    sessions: Mapping[str, Mapping[str, BackendSessions]] = field(default_factory=dict)
    # split key → (replica, message) for each replica that refused that split alone (it serves the rest)
    refused: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    # No data plane serves TrafficSplits at all (a Gateway-API-only installation): nothing is published to, and every
    # split says so rather than waiting for dataplanes that will never come.
    no_gateway: bool = False


@dataclass(frozen=True, slots=True)
class EventIntent:
    type: EventType
    reason: EventReason
    message: str


@dataclass(frozen=True, slots=True)
class StatusResult:
    status: SplitStatus
    events: tuple[EventIntent, ...]


def percent(share: Fraction | float) -> str:
    return f"{float(share) * 100:.2f}%"


def _condition(type_: ConditionType, verdict: Verdict, generation: int, previous: SplitStatus, now: str) -> Condition:
    status = "True" if verdict.ok else "False"
    prev = previous.condition(type_)
    since = prev.last_transition_time if prev is not None and prev.status == status else None
    return Condition(
        type=type_,
        status=status,
        reason=verdict.reason,
        message=verdict.message[:MAX_CONDITION_MESSAGE],
        observed_generation=generation,
        last_transition_time=since or now,
    )


NO_GATEWAY_MESSAGE = (
    "not published: this installation runs no gateway for TrafficSplits (Gateway API only: the chart's "
    "gateway.enabled is false); route to these backends with an HTTPRoute on a Gateway instead"
)


def published_condition(outcome: Outcome, view: PublishView) -> Verdict:
    """`Published`: every replica acknowledged a generation carrying the current spec."""
    if view.no_gateway:  # before the spec's own problems: those still show in Accepted and ResolvedRefs
        return Verdict(False, Reason.NO_GATEWAY, NO_GATEWAY_MESSAGE)
    held = (
        "; no dataplane reported a form of it, so nothing is published until it is fixed: the dataplanes keep the "
        "generation they hold"
    )
    if not outcome.accepted.ok:
        keep = held if outcome.key in view.held_back else ""
        return Verdict(False, Reason.NOT_ACCEPTED, f"not published: {outcome.accepted.message}{keep}")
    if not outcome.resolved.ok:
        served = outcome.served
        keep = ""
        if outcome.key in view.held_back:
            keep = held
        elif served is not None and not outcome.kept:
            keep = "; its unresolved backends have no endpoints (their sessions fail over)"
        elif served is not None and served.observed_generation != outcome.observed_generation:
            keep = f"; the dataplanes keep serving metadata.generation {served.observed_generation}"
        elif served is not None:
            keep = "; the dataplanes keep serving its last resolved endpoints"
        return Verdict(False, Reason.UNRESOLVED_REFS, f"not published: {outcome.resolved.message}{keep}")
    if outcome.unservable is not None:
        served = outcome.served
        keep = f"; the dataplanes keep serving metadata.generation {served.observed_generation}" if served else ""
        return Verdict(False, Reason.UNSERVABLE, f"not published: {outcome.unservable.message}{keep}")
    if not outcome.serves_current_spec:
        return Verdict(False, Reason.NOT_SERVED, "not published")
    if view.number <= 0:
        return Verdict(False, Reason.PENDING, "no generation compiled yet")
    if view.held_back and outcome.key not in view.since:
        held_back = ", ".join(sorted(view.held_back))
        return Verdict(False, Reason.HELD, f"not published: nothing is published until {held_back} is fixed")
    if not view.replicas:
        return Verdict(False, Reason.NO_DATAPLANES, "0 dataplanes found")
    refused = view.refused.get(outcome.key, ())
    if refused:
        who = "; ".join(f"{name}: {message}" for name, message in refused)
        n = len(view.replicas)
        return Verdict(False, Reason.REFUSED, f"{max(0, n - len(refused))}/{n} dataplanes; refused by {who}")
    since = view.since.get(outcome.key, view.number)
    behind = [r.name for r in view.replicas if r.acked < since]
    done = len(view.replicas) - len(behind)
    msg = f"{done}/{len(view.replicas)} dataplanes"
    if behind:
        return Verdict(False, Reason.BEHIND, f"{msg}; behind: {', '.join(sorted(behind))}")
    return Verdict(True, Reason.PUBLISHED, msg)


def _backends_status(outcome: Outcome, view: PublishView) -> tuple[BackendStatus, ...]:
    if outcome.served is None:
        return ()
    split = outcome.served
    total = split.weights.total
    live = view.sessions.get(split.key, {}) if split.persistent else {}
    return tuple(
        BackendStatus(
            name=b.name,
            service=b.service,
            port=b.port,
            weight=b.weight,
            share=percent(Fraction(b.weight, total)),
            ready_endpoints=len(b.ready_endpoints),
            endpoints=len(b.endpoints),
            live_sessions=live[b.name].live if b.name in live else None,
        )
        for b in split.backends
    )


def drained_condition(outcome: Outcome, view: PublishView) -> Verdict | None:
    """`Drained` (sticky.mode persistent with a backend at weight 0): True once no replica has a live session on any
    weight-0 backend, the moment its old version is safe to delete. None when the condition does not apply."""
    split = outcome.served
    if split is None or not split.persistent or not outcome.serves_current_spec:
        return None
    zero = [b.name for b in split.backends if b.weight == 0]
    if not zero:
        return None
    live = view.sessions.get(split.key, {})
    if not view.replicas or any(n not in live for n in zero):
        return Verdict(False, Reason.SESSIONS_UNKNOWN, f"{', '.join(zero)}: no dataplane reported its sessions yet")
    busy = [f"{n}: {live[n].live}{'+' if live[n].saturated else ''} live sessions" for n in zero]
    if any(live[n].live > 0 or live[n].saturated for n in zero):
        return Verdict(False, Reason.SESSIONS_LIVE, "; ".join(busy))
    return Verdict(
        True, Reason.DRAINED, f"{', '.join(zero)}: weight 0 and no live session on {len(view.replicas)} dataplanes"
    )


def displacement(before: Weights, after: Weights) -> tuple[Displacement, str | None]:
    """The status.displacement value for a weight change, and the Warning text when the total changed."""
    p = plan(before, after)
    d = Displacement(
        before=before.format(),
        after=after.format(),
        total_changed=p.total_changed,
        repinned_share=percent(p.moved_share),
    )
    warning = None
    if p.total_changed and p.suggestion is not None:
        d = replace(
            d,
            rebalanced=p.suggestion.weights.format(),
            rebalanced_repinned_share=percent(p.suggestion.moved_share),
        )
        warning = (
            f"total weight changed {before.total} → {after.total} ({before.format()} → {after.format()}): "
            f"{percent(p.moved_share)} of sticky sessions re-pinned, in both directions, where the new ratio needs "
            f"{percent(p.minimum_share)}; keeping the total, {p.suggestion.weights.format()} would have re-pinned "
            f"{percent(p.suggestion.moved_share)}"
        )
    return d, warning


def rebuilt_message(after: Weights) -> str:
    """The AssignmentRebuilt Warning: no table to continue (the split just switched from hash, or its status and every
    dataplane's copy were lost), so the sessions' old assignment is unknown and any of them may have moved."""
    return (
        "spec.assignment is minimal but no slot table was found (in the operator, status.assignment or the "
        f"generation the dataplanes hold): rebuilt from the current weights {after.format()}; the old assignment is "
        "unknown, so up to 100% of sessions moved (a switch from hash moves about as much as a change of total)"
    )


MAX_REFUSAL = 512  # how much of the reader's problems an AssignmentRebuilt message quotes


def refused_message(problems: tuple[str, ...], moved: Fraction | None, after: Weights) -> str:
    """The AssignmentRebuilt Warning when status.assignment was refused (edited, copied from another object, junk): what
    the table was taken from instead and what that moved, exactly when the dataplanes' copy was known."""
    why = "; ".join(problems)
    why = why if len(why) <= MAX_REFUSAL else why[: MAX_REFUSAL - 1] + "…"
    if moved is not None:
        return (
            f"status.assignment was refused ({why}): the slot table continues from the generation the dataplanes "
            f"hold, advanced to the weights {after.format()}: {percent(moved)} of sessions moved"
        )
    return (
        f"status.assignment was refused ({why}) and the dataplanes hold no copy: rebuilt from the current weights "
        f"{after.format()}; the old assignment is unknown, so up to 100% of sessions moved"
    )


def _previous_weights(status: SplitStatus) -> Weights | None:
    text = status.weights
    if not text:
        return None
    try:
        return parse_weights(text)
    except SpecError:
        return None


def compute_status(
    obj: SplitObject, outcome: Outcome, view: PublishView, now: str, prev: SplitStatus | None = None
) -> StatusResult:
    """The full status for one split, and the Events this pass should post (each only on a change). `prev`: the
    status the object holds, when newer than `obj.status` (the writer's own last write, not yet echoed back)."""
    if prev is None:
        prev = SplitStatus.from_dict(obj.status or {})
    gen = obj.generation
    published = published_condition(outcome, view)
    conditions: tuple[Condition, ...] = (
        _condition(ConditionType.ACCEPTED, outcome.accepted, gen, prev, now),
        _condition(ConditionType.RESOLVED_REFS, outcome.resolved, gen, prev, now),
        _condition(ConditionType.PUBLISHED, published, gen, prev, now),
    )
    events: list[EventIntent] = []
    drained = drained_condition(outcome, view)
    if drained is not None:
        conditions += (_condition(ConditionType.DRAINED, drained, gen, prev, now),)
        prev_drained = prev.condition(ConditionType.DRAINED)
        if drained.ok and not (prev_drained and prev_drained.ok):
            events.append(EventIntent(EventType.NORMAL, EventReason.DRAINED, drained.message))

    served = outcome.served
    # Without a served form, what the status said about the served weights stays.
    weights, backends, moved, table = prev.weights, prev.backends, prev.displacement, prev.assignment
    if served is not None:
        after = served.weights
        weights, backends = after.format(), _backends_status(outcome, view)
        table = served.table.to_status(obj.uid, after) if served.table is not None else None
        before = _previous_weights(prev)
        if before is not None and before.items() != after.items():
            if served.table is not None:  # a slot table moves the minimum whatever the total: no warning due
                moved = Displacement(
                    before=before.format(),
                    after=after.format(),
                    total_changed=before.total != after.total,
                    # What the table served moved against the dataplanes' copy, when status.assignment was refused.
                    repinned_share=percent(
                        outcome.table_moved if outcome.table_moved is not None else minimal_moved_share(before, after)
                    ),
                )
            else:
                moved, warning = displacement(before, after)
                if warning is not None and served.sticky:
                    events.append(EventIntent(EventType.WARNING, EventReason.TOTAL_WEIGHT_CHANGED, warning))
        if outcome.table_refused and served.table is not None:
            message = refused_message(outcome.table_refused, outcome.table_moved, after)
            events.append(EventIntent(EventType.WARNING, EventReason.ASSIGNMENT_REBUILT, message))
        elif outcome.table_rebuilt and served.table is not None:
            events.append(EventIntent(EventType.WARNING, EventReason.ASSIGNMENT_REBUILT, rebuilt_message(after)))
    carried = outcome.serves_current_spec and view.number > 0 and outcome.key not in view.held_back
    # The first number that carried this split's served form (spec and endpoints), not the newest: a later
    # generation that carries it unchanged (another split's change) leaves this status as it is, so a change to one
    # split among 1,000 writes one status, not 1,000.
    since = view.since.get(outcome.key, view.number)
    status = SplitStatus(
        observed_generation=gen,
        conditions=conditions,
        weights=weights,
        generation=since if carried else prev.generation,
        backends=backends,
        displacement=moved,
        assignment=table,
    )

    prev_pub = prev.condition(ConditionType.PUBLISHED)
    if published.ok and not (prev_pub and prev_pub.ok and prev_pub.observed_generation == gen):
        message = f"generation {since} serves this spec on {published.message}"
        events.append(EventIntent(EventType.NORMAL, EventReason.PUBLISHED, message))
    # Not served because of a replica (this split's problem alone): a Warning on this split, once per message.
    if published.reason in (Reason.UNSERVABLE, Reason.REFUSED) and not (
        prev_pub and prev_pub.reason == published.reason and prev_pub.message == published.message
    ):
        events.append(EventIntent(EventType.WARNING, EventReason(published.reason.value), published.message))
    prev_res = prev.condition(ConditionType.RESOLVED_REFS)
    if outcome.missing and not (prev_res and prev_res.message == outcome.resolved.message):
        for ref in outcome.missing:
            events.append(EventIntent(EventType.WARNING, EventReason(ref.reason), ref.message))
    return StatusResult(status, tuple(events))
