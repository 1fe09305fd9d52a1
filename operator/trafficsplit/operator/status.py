"""A TrafficSplit's status and the Events worth posting, computed from one reconcile outcome. Pure.

Why pure: conditions are the operator's user interface (`kubectl get ts`, `kubectl wait --for=condition=Published`);
their reasons and messages are tested as values. Comparing with the stored status keeps `lastTransitionTime` stable
and makes the shell write only what changed, so a status write never triggers another write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from trafficsplit.operator.cluster import SplitObject
from trafficsplit.operator.reconcile import Outcome

from trafficsplit.core.errors import SpecError
from trafficsplit.core.plan import plan
from trafficsplit.core.weights import Weights, parse_weights


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


@dataclass(frozen=True, slots=True)
class EventIntent:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class StatusResult:
    status: dict[str, Any]
    events: tuple[EventIntent, ...]


def percent(share: Fraction | float) -> str:
    return f"{float(share) * 100:.2f}%"


def _condition(
    type_: str, ok: bool, reason: str, message: str, generation: int, previous: Sequence[Mapping[str, Any]], now: str
) -> dict[str, Any]:
    status = "True" if ok else "False"
    prev = next((c for c in previous if c.get("type") == type_), None)
    since = prev.get("lastTransitionTime") if prev and prev.get("status") == status else None
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message[:32768],
        "observedGeneration": generation,
        "lastTransitionTime": since or now,
    }


def published_condition(outcome: Outcome, view: PublishView) -> tuple[bool, str, str]:
    """(ok, reason, message) for `Published`: every replica acknowledged a generation carrying the current spec."""
    held = (
        "; no dataplane reported a form of it, so nothing is published until it is fixed: the dataplanes keep the "
        "generation they hold"
    )
    if not outcome.accepted:
        keep = held if outcome.key in view.held_back else ""
        return False, "NotAccepted", f"not published: {outcome.accepted_message}{keep}"
    if not outcome.resolved:
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
        return False, "UnresolvedRefs", f"not published: {outcome.resolved_message}{keep}"
    if not outcome.serves_current_spec:
        return False, "NotServed", "not published"
    if view.number <= 0:
        return False, "Pending", "no generation compiled yet"
    if view.held_back and outcome.key not in view.since:
        held_back = ", ".join(sorted(view.held_back))
        return False, "Held", f"not published: nothing is published until {held_back} is fixed"
    if not view.replicas:
        return False, "NoDataplanes", "0 dataplanes found"
    since = view.since.get(outcome.key, view.number)
    behind = [r.name for r in view.replicas if r.acked < since]
    done = len(view.replicas) - len(behind)
    msg = f"{done}/{len(view.replicas)} dataplanes"
    if behind:
        return False, "Behind", f"{msg}; behind: {', '.join(sorted(behind))}"
    return True, "Published", msg


def _backends_status(outcome: Outcome) -> list[dict[str, Any]]:
    if outcome.served is None:
        return []
    split = outcome.served
    total = split.weights.total
    return [
        {
            "name": b.name,
            "service": b.service,
            "port": b.port,
            "weight": b.weight,
            "share": percent(Fraction(b.weight, total)),
            "readyEndpoints": len(b.ready_endpoints),
            "endpoints": len(b.endpoints),
        }
        for b in split.backends
    ]


def displacement(before: Weights, after: Weights) -> tuple[dict[str, Any], str | None]:
    """The status.displacement value for a weight change, and the Warning text when the total changed."""
    p = plan(before, after)
    d: dict[str, Any] = {
        "from": before.format(),
        "to": after.format(),
        "totalChanged": p.total_changed,
        "repinnedShare": percent(p.moved_share),
    }
    warning = None
    if p.total_changed and p.suggestion is not None:
        d["rebalanced"] = p.suggestion.weights.format()
        d["rebalancedRepinnedShare"] = percent(p.suggestion.moved_share)
        warning = (
            f"total weight changed {before.total} → {after.total} ({before.format()} → {after.format()}): "
            f"{percent(p.moved_share)} of sticky sessions re-pinned, in both directions, where the new ratio needs "
            f"{percent(p.minimum_share)}; keeping the total, {p.suggestion.weights.format()} would have re-pinned "
            f"{percent(p.suggestion.moved_share)}"
        )
    return d, warning


def _previous_weights(status: Mapping[str, Any]) -> Weights | None:
    text = status.get("weights")
    if not isinstance(text, str) or not text:
        return None
    try:
        return parse_weights(text)
    except SpecError:
        return None


def compute_status(obj: SplitObject, outcome: Outcome, view: PublishView, now: str) -> StatusResult:
    """The full status for one split, and the Events this pass should post (each only on a change)."""
    prev_status = obj.status or {}
    prev_conditions: Sequence[Mapping[str, Any]] = prev_status.get("conditions") or []
    gen = obj.generation
    pub_ok, pub_reason, pub_msg = published_condition(outcome, view)
    conditions = [
        _condition("Accepted", outcome.accepted, outcome.accepted_reason, outcome.accepted_message, gen,
                   prev_conditions, now),
        _condition("ResolvedRefs", outcome.resolved, outcome.resolved_reason, outcome.resolved_message, gen,
                   prev_conditions, now),
        _condition("Published", pub_ok, pub_reason, pub_msg, gen, prev_conditions, now),
    ]  # fmt: skip
    status: dict[str, Any] = {"observedGeneration": gen, "conditions": conditions}
    events: list[EventIntent] = []

    served = outcome.served
    if served is not None:
        after = served.weights
        status["weights"] = after.format()
        status["backends"] = _backends_status(outcome)
        before = _previous_weights(prev_status)
        if before is not None and before.items() != after.items():
            disp, warning = displacement(before, after)
            status["displacement"] = disp
            if warning is not None and served.sticky:
                events.append(EventIntent("Warning", "TotalWeightChanged", warning))
        elif "displacement" in prev_status:
            status["displacement"] = prev_status["displacement"]
    else:
        for k in ("weights", "backends", "displacement"):
            if k in prev_status:
                status[k] = prev_status[k]
    if outcome.serves_current_spec and view.number > 0 and outcome.key not in view.held_back:
        status["generation"] = view.number
    elif "generation" in prev_status:
        status["generation"] = prev_status["generation"]

    prev_pub = next((c for c in prev_conditions if c.get("type") == "Published"), None)
    if pub_ok and not (prev_pub and prev_pub.get("status") == "True" and prev_pub.get("observedGeneration") == gen):
        events.append(EventIntent("Normal", "Published", f"generation {view.number} serves this spec on {pub_msg}"))
    prev_res = next((c for c in prev_conditions if c.get("type") == "ResolvedRefs"), None)
    if outcome.missing and not (prev_res and prev_res.get("message") == outcome.resolved_message):
        for reason, message in outcome.missing:
            events.append(EventIntent("Warning", reason, message))
    return StatusResult(status, tuple(events))
