"""ListenerSets: listeners another object adds to a Gateway (Gateway API's ListenerSet). Pure.

A ListenerSet's `spec.parentRef` names the Gateway; the Gateway's `spec.allowedListeners.namespaces` says whose sets
it takes (`from: None`, the default, takes none; `Same`; `All`; `Selector` over the Namespaces' labels). A set it does
not take is `Accepted: False, NotAllowed` and adds nothing.

The Gateway's listeners are then its own followed by those of the sets it takes, in the spec's precedence: oldest set
first, then by namespace/name. A set's listener conflicts with an earlier listener on its port that speaks another
protocol (`ProtocolConflict`) or has its hostname (`HostnameConflict`): the earlier one wins, the set's is
`Accepted: False`, `Programmed: False` and `Conflicted: True` and takes no route. A set with no valid listener left
(one taking routes whose refs resolved) is `Accepted: False, ListenersNotValid`, one with some `Accepted: True,
ListenersNotValid`. (A Gateway's own listeners that conflict among themselves keep the rule they
always had: both say Conflicted.) A set's listener resolves its certificate refs as the set's (its namespace; a
ReferenceGrant from ListenerSets, not from Gateways) and `allowedRoutes: Same` means the set's namespace.

Decision: a set's listener must use a port the Gateway itself listens on. The data plane (its Service, pod ports and
Envoy listeners) is provisioned from the Gateway's own listeners, so a listener on another port would be accepted but
never reachable; it is `Accepted: False, PortUnavailable` instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from trafficsplit.core.gatewayapi.conditions import PENDING_MESSAGE, ListenerReason, Standing, cond
from trafficsplit.core.gatewayapi.listeners import (
    Key,
    ListenerOwner,
    ListenerView,
    listener_secrets,
    listener_view,
    port_validations,
)
from trafficsplit.core.gatewayapi.objects import (
    Gateway,
    Listener,
    ListenerSet,
    ListenersFrom,
    ReferenceGrant,
)
from trafficsplit.core.model.condition import Condition
from trafficsplit.core.model.tls import CaConfigMap, TlsSecret

LISTENER_SET_OWNER_KIND = "ListenerSet"
PORT_UNAVAILABLE = "PortUnavailable"


class ListenerSetReason(StrEnum):
    """The spec's ListenerSet condition reasons this implementation sets."""

    ACCEPTED = "Accepted"
    NOT_ALLOWED = "NotAllowed"
    PARENT_NOT_ACCEPTED = "ParentNotAccepted"
    LISTENERS_NOT_VALID = "ListenersNotValid"
    INVALID = "Invalid"
    PENDING = "Pending"
    PROGRAMMED = "Programmed"


@dataclass(frozen=True, slots=True, kw_only=True)
class SetStanding:
    """One ListenerSet as its Gateway takes it: its own conditions (Accepted; Programmed pending until the Gateway's
    replicas ACK, or False with Accepted's reason) and whether it is attached (counted in the Gateway's
    `status.attachedListenerSets`)."""

    key: str
    gateway: str
    generation: int
    conditions: tuple[Condition, ...]
    attached: bool
    # Its listeners with their conditions (those of a set the Gateway does not take: none), for its status; only an
    # attached set's are the Gateway's (`SetViews.views`).
    listeners: tuple[ListenerView, ...] = ()


@dataclass(frozen=True, slots=True)
class SetViews:
    """A Gateway's ListenerSets translated: the views of the listeners of the sets it takes, in precedence order,
    and every set's standing, by key."""

    views: tuple[ListenerView, ...]
    standing: Mapping[str, SetStanding]


def listener_key(set_key: str, name: str) -> str:
    """A set's listener's name in the Gateway's data plane: unique across the Gateway and its sets (a set's listener
    may share a name with the Gateway's or another set's), a DNS subdomain as a listener name is."""
    digest = hashlib.blake2b(f"{set_key}/{name}".encode(), digest_size=6).hexdigest()
    return f"ls-{digest}.{name}"[:253].rstrip(".-")


def set_certificate_secrets(sets: Iterable[ListenerSet], grants: Sequence[ReferenceGrant]) -> frozenset[Key]:
    """The Secrets (namespace, name) the HTTPS listeners of `sets` may use (as `listeners.certificate_secrets` for
    Gateways': a cross-namespace one only with a ReferenceGrant from ListenerSets): what the operator reads."""
    return frozenset(k for ls in sets for k in listener_secrets(ls.listeners, set_owner(ls), grants))


def set_owner(ls: ListenerSet) -> ListenerOwner:
    return ListenerOwner(LISTENER_SET_OWNER_KIND, ls.meta.namespace, ls.meta.name, ls.meta.generation)


def admits(gw: Gateway, ls: ListenerSet, labels: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether `gw`'s `allowedListeners` takes a ListenerSet of `ls`'s namespace."""
    match gw.listeners_from:
        case ListenersFrom.ALL:
            return True
        case ListenersFrom.SAME:
            return ls.meta.namespace == gw.meta.namespace
        case ListenersFrom.SELECTOR:
            ns = labels.get(ls.meta.namespace)
            return ns is not None and gw.listeners_selector is not None and gw.listeners_selector.matches(ns)
    return False


def listener_set_views(
    gw: Gateway,
    own: Sequence[ListenerView],
    sets: Sequence[ListenerSet],
    labels: Mapping[str, Mapping[str, str]],
    grants: Sequence[ReferenceGrant] = (),
    secrets: Mapping[Key, TlsSecret] | None = None,
    configmaps: Mapping[Key, CaConfigMap] | None = None,
) -> SetViews:
    """The ListenerSets naming `gw` (see the module docstring), after its own listeners `own`."""
    ports = {lis.port for lis in gw.listeners}
    validations = port_validations(gw, grants, configmaps or {}, ports)
    # Per port, the listeners that hold it so far (the Gateway's unconflicted ones, then each accepted set listener).
    taken: dict[int, list[tuple[Listener, str]]] = {}
    for v in own:
        if not _conflicted(v):
            taken.setdefault(v.listener.port, []).append((v.listener, f"Gateway listener {v.listener.name}"))
    views: list[ListenerView] = []
    standing: dict[str, SetStanding] = {}
    for ls in sorted((s for s in sets if s.gateway == gw.meta.key), key=lambda s: s.age):
        g = ls.meta.generation
        if not admits(gw, ls, labels):
            why = f"Gateway {gw.meta.key} does not allow ListenerSets from namespace {ls.meta.namespace}"
            standing[ls.meta.key] = _standing(ls, gw, Standing(False, ListenerSetReason.NOT_ALLOWED, why))
            continue
        if gw.problems:
            why = f"Gateway {gw.meta.key} is not accepted"
            standing[ls.meta.key] = _standing(ls, gw, Standing(False, ListenerSetReason.PARENT_NOT_ACCEPTED, why))
            continue
        owner = set_owner(ls)
        mine: list[ListenerView] = []
        for lis in ls.listeners:
            refusal, conflict = _refusal(lis, ports, taken.get(lis.port, ()), g)
            v = listener_view(
                lis,
                owner,
                listener_key(ls.meta.key, lis.name),
                conflict,
                False,
                grants,
                secrets or {},
                validations.get(lis.port),
                refusal,
            )
            if v.conditions[0].ok:
                taken.setdefault(lis.port, []).append((lis, f"ListenerSet {ls.meta.key} listener {lis.name}"))
            mine.append(v)
        if ls.problems:
            accepted = Standing(False, ListenerSetReason.INVALID, "; ".join(ls.problems))
        elif all(_valid(v) for v in mine):
            accepted = Standing(True, ListenerSetReason.ACCEPTED, "")
        else:
            bad = ", ".join(v.listener.name for v in mine if not _valid(v))
            some = any(_valid(v) for v in mine)
            accepted = Standing(some, ListenerSetReason.LISTENERS_NOT_VALID, f"listeners not valid: {bad}")
        standing[ls.meta.key] = _standing(ls, gw, accepted, tuple(mine))
        if accepted.ok:
            views.extend(mine)
    return SetViews(tuple(views), standing)


def _valid(v: ListenerView) -> bool:
    """A set's listener that counts for the set: it takes routes and is served (its refs resolved)."""
    return v.usable and v.serves


def _conflicted(v: ListenerView) -> bool:
    return any(c.type == "Conflicted" and c.ok for c in v.conditions)


def _refusal(
    lis: Listener, ports: set[int], held: Sequence[tuple[Listener, str]], g: int
) -> tuple[Standing | None, Condition]:
    """Why a set's listener cannot be taken (its Accepted and Programmed), and its Conflicted condition."""
    if lis.port not in ports:
        why = f"port {lis.port}: the Gateway does not listen on it (a ListenerSet's listener uses the Gateway's ports)"
        return Standing(False, PORT_UNAVAILABLE, why), cond("Conflicted", False, ListenerReason.NO_CONFLICTS, "", g)
    other = next((who for x, who in held if x.protocol != lis.protocol), None)
    if other is not None:
        why = f"port {lis.port} is taken by {other}, of another protocol"
        return Standing(False, ListenerReason.PROTOCOL_CONFLICT, why), cond(
            "Conflicted", True, ListenerReason.PROTOCOL_CONFLICT, why, g
        )
    same = next((who for x, who in held if x.hostname == lis.hostname), None)
    if same is not None:
        why = f"{same} on port {lis.port} has hostname {lis.hostname or '(any)'}"
        return Standing(False, ListenerReason.HOSTNAME_CONFLICT, why), cond(
            "Conflicted", True, ListenerReason.HOSTNAME_CONFLICT, why, g
        )
    return None, cond("Conflicted", False, ListenerReason.NO_CONFLICTS, "", g)


def _standing(
    ls: ListenerSet, gw: Gateway, accepted: Standing, listeners: tuple[ListenerView, ...] = ()
) -> SetStanding:
    g = ls.meta.generation
    if accepted.ok:
        programmed = cond("Programmed", None, ListenerSetReason.PENDING, PENDING_MESSAGE, g)
    else:
        programmed = cond("Programmed", False, accepted.reason, accepted.message, g)
    return SetStanding(
        key=ls.meta.key,
        gateway=gw.meta.key,
        generation=g,
        conditions=(accepted.condition("Accepted", g), programmed),
        attached=accepted.ok,
        listeners=listeners,
    )
