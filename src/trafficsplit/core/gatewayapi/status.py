"""The Gateway API status bodies the operator writes, from the translation's conditions and what the replicas ACKed.
Pure.

The translation (`gatewayapi.translate`) says what each condition is; this module decides what is written and when:

- `lastTransitionTime` is kept from the stored condition when its status did not change (the metav1.Condition
  contract), and is `now` otherwise;
- `Programmed` on a Gateway and its listeners is True only when every replica of that Gateway's data plane ACKed a
  generation carrying the Gateway's current `metadata.generation`; until then it stays `Unknown, Pending`;
- an HTTPRoute's `status.parents` entry for one of our Gateways is replaced only once that Gateway's replicas ACKed
  the generation carrying the route's current `metadata.generation` (before that the stored entry, possibly of an
  older generation, stays as it is: Flagger reads `observedGeneration` as "served"); entries of other controllers
  are never touched, and ours for parentRefs the route no longer has are removed;
- a ListenerSet's `Programmed` (and its listeners') likewise, once its Gateway's replicas ACKed the generation
  carrying the set's current `metadata.generation`;
- a TrafficSplitPolicy's `status.ancestors` entry for one of our Gateways likewise, once that Gateway's replicas
  ACKed the generation carrying the policy and its target routes as they are now (`policy_ancestors`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from trafficsplit.core.gatewayapi.conditions import (
    AncestorStatus,
    ClassStatus,
    GatewayReason,
    GatewayStatus,
    ListenerSetStatus,
    ListenerStatus,
    ParentStatus,
)
from trafficsplit.core.gatewayapi.httproute import ParentRef
from trafficsplit.core.gatewayapi.policy import MAX_ANCESTORS
from trafficsplit.core.gatewayapi.reading import CONTROLLER_NAME
from trafficsplit.core.model.condition import MAX_CONDITION_MESSAGE, Condition

MAX_STATUS_ADDRESSES = 16  # the upstream CRD's bound on Gateway status.addresses


def _conditions(raw: Any) -> list[Mapping[str, Any]]:
    return [c for c in raw if isinstance(c, Mapping)] if isinstance(raw, list) else []


def stamped(conditions: Iterable[Condition], stored: Any, now: str) -> list[dict[str, Any]]:
    """The conditions as written: each keeps the stored `lastTransitionTime` when its status did not change."""
    old = {str(c.get("type")): c for c in _conditions(stored)}
    out: list[dict[str, Any]] = []
    for c in conditions:
        prev = old.get(str(c.type))
        kept = prev is not None and prev.get("status") == c.status and isinstance(prev.get("lastTransitionTime"), str)
        when = str(prev["lastTransitionTime"]) if kept and prev is not None else now
        out.append(replace(c, last_transition_time=when).to_dict())
    return out


@dataclass(frozen=True, slots=True)
class NotProvisioned:
    """Why a Gateway's data plane could not be provisioned (its `Programmed` False reason, and the message naming the
    field or the object); the operator retries it with backoff."""

    reason: str
    message: str


def programmed(
    condition: Condition,
    ready: bool,
    pending: str,
    refused: str | None = None,
    unprovisioned: NotProvisioned | None = None,
) -> Condition:
    """The translation's `Programmed` (Unknown, Pending) made True when the replicas ACKed, else its message is
    `pending` (what is being waited for); False, `Invalid`, when the Gateway's current content was `refused` (it breaks
    a bound: the data plane keeps serving what it holds, and no ACK will change that); False with its reason when its
    data plane could not be provisioned (`unprovisioned`: whatever the replicas ACK, the Gateway as it is now is not
    what runs). A condition the translation already decided (False: a listener that is not served, e.g. HTTPS without
    a certificate) is kept as it is."""
    if condition.status != "Unknown":
        return condition
    if unprovisioned is not None:
        why = f"data plane not provisioned (retried with backoff): {unprovisioned.message}"
        return replace(condition, status="False", reason=unprovisioned.reason, message=why[:MAX_CONDITION_MESSAGE])
    if refused is not None:
        why = f"not published, the data plane keeps its last generation: {refused}"
        return replace(condition, status="False", reason=GatewayReason.INVALID, message=why[:MAX_CONDITION_MESSAGE])
    if ready:
        return replace(condition, status="True", reason="Programmed", message="")
    return replace(condition, message=pending[:MAX_CONDITION_MESSAGE])


def _with_programmed(
    conditions: Sequence[Condition],
    ready: bool,
    pending: str,
    refused: str | None,
    unprovisioned: NotProvisioned | None,
) -> list[Condition]:
    return [programmed(c, ready, pending, refused, unprovisioned) if c.type == "Programmed" else c for c in conditions]


def gateway_status_body(
    status: GatewayStatus,
    *,
    ready: bool,
    pending: str,
    addresses: Sequence[Mapping[str, str]] | None,
    stored: Mapping[str, Any],
    now: str,
    refused: str | None = None,
    unprovisioned: NotProvisioned | None = None,
) -> dict[str, Any]:
    """A Gateway's whole `status` (conditions, listeners, and addresses when the provisioner gave some); `refused`:
    why its current content could not be published, `unprovisioned`: why its data plane could not be (`programmed`)."""
    stored_listeners = {
        str(x.get("name")): x for x in stored.get("listeners") or [] if isinstance(x, Mapping) and x.get("name")
    }
    listeners: list[dict[str, Any]] = []
    for lis in status.listeners:
        listeners.append(
            _listener_body(lis, ready, pending, refused, unprovisioned, stored_listeners.get(lis.name, {}), now)
        )
    body: dict[str, Any] = {
        "conditions": stamped(
            _with_programmed(status.conditions, ready, pending, refused, unprovisioned), stored.get("conditions"), now
        ),
        "listeners": listeners,
    }
    if addresses is not None:
        body["addresses"] = [dict(a) for a in addresses[:MAX_STATUS_ADDRESSES]]
    # Written once a ListenerSet attached (and kept at 0 after): a Gateway API without the field (older CRDs prune
    # it) never sees it, so a write never differs from what the API server stores.
    if status.attached_listener_sets or "attachedListenerSets" in stored:
        body["attachedListenerSets"] = status.attached_listener_sets
    return body


def listener_set_status_body(
    status: ListenerSetStatus,
    *,
    ready: bool,
    pending: str,
    stored: Mapping[str, Any],
    now: str,
    refused: str | None = None,
    unprovisioned: NotProvisioned | None = None,
) -> dict[str, Any]:
    """A ListenerSet's whole `status`: its conditions and its listeners', `Programmed` as its Gateway's
    (`programmed`: True once the Gateway's replicas ACKed the set's current generation)."""
    stored_listeners = {
        str(x.get("name")): x for x in stored.get("listeners") or [] if isinstance(x, Mapping) and x.get("name")
    }
    return {
        "conditions": stamped(
            _with_programmed(status.conditions, ready, pending, refused, unprovisioned), stored.get("conditions"), now
        ),
        "listeners": [
            _listener_body(lis, ready, pending, refused, unprovisioned, stored_listeners.get(lis.name, {}), now)
            for lis in status.listeners
        ],
    }


def _listener_body(
    lis: ListenerStatus,
    ready: bool,
    pending: str,
    refused: str | None,
    unprovisioned: NotProvisioned | None,
    stored: Mapping[str, Any],
    now: str,
) -> dict[str, Any]:
    conditions = _with_programmed(lis.conditions, ready, pending, refused, unprovisioned)
    return {
        "name": lis.name,
        "supportedKinds": [{"group": k.group, "kind": k.kind} for k in lis.supported_kinds],
        "attachedRoutes": lis.attached_routes,
        "conditions": stamped(conditions, stored.get("conditions"), now),
    }


def refused_accepted(
    conditions: Sequence[Mapping[str, Any]],
    *,
    stored: Any,
    generation: int,
    problems: str,
    reason: str,
    now: str,
) -> list[dict[str, Any]]:
    """`conditions` (an object's, or a route parent's, as about to be written) with `Accepted` False at `generation`:
    the operator's bounds refuse that body, and the object's last accepted form is what is served meanwhile (every
    other condition stays at the generation it speaks of). `stored`: the conditions as last written, so an unchanged
    refusal keeps its lastTransitionTime and the write is the same as the last one (no write loop)."""
    before = next((c for c in _conditions(stored) if c.get("type") == "Accepted"), None)
    kept = before is not None and before.get("status") == "False" and before.get("reason") == reason
    message = f"generation {generation} is not accepted, the last accepted one is still served: {problems}"
    out: list[dict[str, Any]] = []
    for c in conditions:
        if c.get("type") == "Accepted":
            since = str(before.get("lastTransitionTime")) if kept and before is not None else now
            c = {
                **c,
                "status": "False",
                "reason": reason,
                "message": message[:MAX_CONDITION_MESSAGE],
                "observedGeneration": generation,
                "lastTransitionTime": since,
            }
        out.append(dict(c))
    return out


def class_status_body(status: ClassStatus, stored: Mapping[str, Any], now: str) -> dict[str, Any]:
    return {"conditions": stamped(status.conditions, stored.get("conditions"), now)}


def with_refusals(
    parent: ParentStatus, rules: Mapping[int, Sequence[tuple[str, str]]], generation: int
) -> ParentStatus:
    """A parent whose Gateway's replicas refused some of the route's rules alone (they serve the rest): those rules
    are named in `PartiallyInvalid` (with the translation's dropped rules, if any), the route stays Accepted."""
    if not rules:
        return parent
    named = "; ".join(
        f"rules[{i}] refused by {', '.join(f'{r}: {m}' for r, m in sorted(by))}" for i, by in sorted(rules.items())
    )
    old = next((c for c in parent.conditions if c.type == "PartiallyInvalid"), None)
    message = f"{old.message}; {named}" if old is not None else f"Dropped Rule(s): {named}"
    partial = Condition(
        type="PartiallyInvalid",
        status="True",
        reason="UnsupportedValue",
        message=message[:MAX_CONDITION_MESSAGE],
        observed_generation=generation,
        last_transition_time=None,
    )
    kept = tuple(c for c in parent.conditions if c.type != "PartiallyInvalid")
    return replace(parent, conditions=(*kept, partial))


def _ref_key(raw: Mapping[str, Any], route_namespace: str) -> tuple[str, str, str, str, str, int | None]:
    """A parentRef's identity as the status echoes it, with the API's defaults filled in."""
    port = raw.get("port")
    return (
        str(raw.get("group", "gateway.networking.k8s.io")),
        str(raw.get("kind", "Gateway")),
        str(raw.get("namespace") or route_namespace),
        str(raw.get("name") or ""),
        str(raw.get("sectionName") or ""),
        port if isinstance(port, int) else None,
    )


def parent_key(ref: ParentRef) -> tuple[str, str, str, str, str, int | None]:
    return (ref.group, ref.kind, ref.namespace, ref.name, ref.section_name or "", ref.port)


def route_parents(
    *,
    stored: Any,
    ours: Sequence[ParentStatus],
    route_namespace: str,
    served: Callable[[ParentRef], bool],
    now: str,
) -> list[dict[str, Any]]:
    """A route's new `status.parents`: every other controller's entry as stored; ours for each parent `served`
    (its Gateway's replicas ACKed this route generation) freshly written, for the others as stored (or absent when
    never written); ours for parentRefs the route no longer names dropped."""
    entries = [p for p in stored if isinstance(p, Mapping)] if isinstance(stored, list) else []
    mine: dict[tuple[str, str, str, str, str, int | None], Mapping[str, Any]] = {}
    out: list[dict[str, Any]] = []
    for p in entries:
        ref = p.get("parentRef")
        if p.get("controllerName") == CONTROLLER_NAME and isinstance(ref, Mapping):
            mine[_ref_key(ref, route_namespace)] = p
        else:
            out.append(dict(p))
    for ps in ours:
        key = parent_key(ps.parent)
        prev = mine.get(key)
        if served(ps.parent):
            out.append(
                {
                    "parentRef": ps.parent.to_dict(),
                    "controllerName": ps.controller_name,
                    "conditions": stamped(ps.conditions, (prev or {}).get("conditions"), now),
                }
            )
        elif prev is not None:
            out.append(dict(prev))
    return out


def _ancestor_key(raw: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (
        str(raw.get("group", "gateway.networking.k8s.io")),
        str(raw.get("kind", "Gateway")),
        str(raw.get("namespace") or ""),
        str(raw.get("name") or ""),
    )


def policy_ancestors(
    *,
    stored: Any,
    ours: Sequence[AncestorStatus],
    served: Callable[[AncestorStatus], bool],
    now: str,
) -> list[dict[str, Any]]:
    """A TrafficSplitPolicy's new `status.ancestors`, as `route_parents` does a route's parents: every other
    controller's entry as stored; ours freshly written for each ancestor `served` (that Gateway's replicas ACKed the
    generation carrying the policy and its target routes as they are; an ancestor that is no Gateway, a missing
    target route, has nothing to wait for), as stored for the others; ours for ancestors gone dropped. At most
    MAX_ANCESTORS entries (the CRD's bound)."""
    entries = [a for a in stored if isinstance(a, Mapping)] if isinstance(stored, list) else []
    mine: dict[tuple[str, str, str, str], Mapping[str, Any]] = {}
    out: list[dict[str, Any]] = []
    for a in entries:
        ref = a.get("ancestorRef")
        if a.get("controllerName") == CONTROLLER_NAME and isinstance(ref, Mapping):
            mine[_ancestor_key(ref)] = a
        else:
            out.append(dict(a))
    for anc in ours:
        prev = mine.get(_ancestor_key(anc.ref.to_dict()))
        if served(anc):
            out.append(
                {
                    "ancestorRef": anc.ref.to_dict(),
                    "controllerName": anc.controller_name,
                    "conditions": stamped(anc.conditions, (prev or {}).get("conditions"), now),
                }
            )
        elif prev is not None:
            out.append(dict(prev))
    return out[:MAX_ANCESTORS]
