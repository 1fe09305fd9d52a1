"""Attaching an HTTPRoute to a Gateway, per parentRef: the listeners it reaches (sectionName, port), those that take
routes from its namespace, and the hostnames served on each (the route's and the listener's intersected); or the
`Accepted: False` reason of the first stage that leaves none, in the order the spec checks them. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from trafficsplit.core.gatewayapi.conditions import RouteReason, cond
from trafficsplit.core.gatewayapi.httproute import HTTPRoute, ParentRef
from trafficsplit.core.gatewayapi.listeners import ListenerView
from trafficsplit.core.gatewayapi.objects import HTTPROUTE_KIND, FromNamespaces, Gateway
from trafficsplit.core.model.condition import Condition


@dataclass(frozen=True, slots=True)
class Attachment:
    gateway: str
    listener: str
    hostnames: tuple[str, ...]


def _under(host: str, wildcard: str) -> bool:
    """`host` (a name or a `*.` name) lies strictly inside `wildcard`'s `*.suffix`."""
    return wildcard.startswith("*.") and host.endswith(wildcard[1:]) and len(host) > len(wildcard) - 1


def intersect_hostnames(listener: str | None, route: Sequence[str]) -> tuple[str, ...] | None:
    """The hostnames a route serves through a listener: () for every host (neither names one), None when they share
    none. The more specific of two overlapping names is the one served (a listener `*.example.com` and a route
    `foo.example.com`: `foo.example.com`), as the HTTPRoute hostnames field specifies."""
    if listener is None:
        return tuple(route)
    if not route:
        return (listener,)
    out: list[str] = []
    for h in route:
        served = h if h == listener or _under(h, listener) else listener if _under(listener, h) else None
        if served is not None and served not in out:
            out.append(served)
    return tuple(out) or None


def allows(v: ListenerView, route: HTTPRoute, labels: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether the listener takes routes from the route's namespace (`allowedRoutes.namespaces`; Same is the
    namespace of the object that holds the listener: its Gateway, or its ListenerSet)."""
    lis = v.listener
    if lis.namespaces is FromNamespaces.SAME:
        return route.meta.namespace == v.owner.namespace
    if lis.namespaces is FromNamespaces.ALL:
        return True
    ns_labels = labels.get(route.meta.namespace)
    return ns_labels is not None and lis.selector is not None and lis.selector.matches(ns_labels)


def attach(
    route: HTTPRoute,
    ref: ParentRef,
    gw: Gateway,
    views: Iterable[ListenerView],
    labels: Mapping[str, Mapping[str, str]],
    parent: str = "",
) -> tuple[Condition | None, list[Attachment]]:
    """The listeners `ref` attaches the route to with the hostnames served on each, or the Accepted=False condition
    of the first stage that leaves none (the spec's reasons, in the order it checks them). `views`: the listeners of
    the object `ref` names (`parent`, as the messages name it: the Gateway by default, or one of its ListenerSets)."""
    parent = parent or f"Gateway {gw.meta.key}"
    g = route.meta.generation
    candidates = [
        v
        for v in views
        if (ref.section_name is None or v.listener.name == ref.section_name)
        and (ref.port is None or v.listener.port == ref.port)
    ]
    if not candidates:
        want = f" sectionName {ref.section_name}" if ref.section_name else ""
        want += f" port {ref.port}" if ref.port else ""
        return cond("Accepted", False, RouteReason.NO_MATCHING_PARENT, f"{parent} has no listener with{want}", g), []
    allowed = [v for v in candidates if v.usable and allows(v, route, labels)]
    if not allowed:
        why = "; ".join(_refusal(v, route, gw) for v in candidates)
        return cond("Accepted", False, RouteReason.NOT_ALLOWED_BY_LISTENERS, f"{parent}: {why}", g), []
    attachments: list[Attachment] = []
    for v in allowed:
        hostnames = intersect_hostnames(v.listener.hostname, route.hostnames)
        if hostnames is not None:
            attachments.append(Attachment(gw.meta.key, v.key, hostnames))
    if not attachments:
        return cond(
            "Accepted",
            False,
            RouteReason.NO_MATCHING_LISTENER_HOSTNAME,
            f"no hostname of the route matches a listener of {parent}",
            g,
        ), []
    return None, attachments


def _refusal(v: ListenerView, route: HTTPRoute, gw: Gateway) -> str:
    """Why one listener takes no route of this kind from this namespace."""
    name = f"listener {v.listener.name}"
    if gw.problems:
        return f"{name}: the Gateway is not accepted"
    if HTTPROUTE_KIND not in v.supported_kinds:
        return f"{name} does not take HTTPRoutes"
    if not v.usable:
        bad = [c for c in v.conditions if (c.type == "Conflicted") == c.ok and c.type != "Programmed"]
        return f"{name} is not usable ({', '.join(f'{c.type}: {c.reason}' for c in bad)})"
    if v.listener.namespaces is FromNamespaces.SAME:
        return f"{name} takes routes from its own namespace only, not {route.meta.namespace}"
    return f"{name}'s namespace selector does not select namespace {route.meta.namespace}"
