"""One route's share of a Gateway's translation that no other route changes (`RouteLocal`: its parents' attachment,
its backendRefs' and mirrors' resolution, its rules' actions and the policies a rule refuses), kept by what it reads
(`RouteMemo`), so that a flip of one route among 1,000 on a Gateway resolves and builds that route alone. Pure.

What it reads: the route itself; the Gateway's listeners, the grants, the Namespaces' labels and the listeners'
Secrets (the memo's context: any change there and every route is read again); and, per route, the Services and
EndpointSlices its refs name, its rules' previous slot tables and the policy attached to each rule (`RouteDeps`).
What routes share (the precedence of their matches, the duplicate-match check, each listener's table and count)
depends on every route's `WalkShape`: its key and age, its parents' attachments and whether they accept it, and its
table entries. When no route's shape changed (a weight flip, a backend's endpoints, a route's generation), the walk
would give what it gave last time: the memo then hands back each route's conflicts, the listeners' tables and counts
(`same_walk`), and a route that is itself the same object with the same `RouteLocal` keeps its `RouteStatus` object
too (the operator's status memo compares those by identity). A changed shape walks every route again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from trafficsplit.core.gatewayapi.attachment import Attachment
from trafficsplit.core.gatewayapi.backends import RefProblem
from trafficsplit.core.gatewayapi.conditions import RouteStatus
from trafficsplit.core.gatewayapi.httproute import HTTPRoute, ParentRef
from trafficsplit.core.model.condition import Condition
from trafficsplit.core.model.routes import ListenerRoutes, RouteEntry, RuleAction


@dataclass(frozen=True, slots=True)
class RouteParent:
    """A parentRef of the route to one of our Gateways: the Accepted=False condition that refuses it (None when
    accepted), and the listeners it attaches the route to."""

    ref: ParentRef
    refused: Condition | None
    attachments: tuple[Attachment, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteLocal:
    parents: tuple[RouteParent, ...]
    actions: tuple[RuleAction, ...]  # its rules that can be served (none when no parent accepts the route)
    entries: tuple[RouteEntry, ...]  # their matches, as each listener's table holds them (for every host)
    dropped: tuple[str, ...]  # why the other rules cannot be
    ref_problems: tuple[RefProblem, ...]  # per rule, its backendRefs' problems, then its mirrors'
    invalid: Mapping[tuple[str, str], tuple[str, ...]]  # (policy, this route) → why the policy is refused


# Per route, what it reads besides itself and the context: its refs' Services and slices, in order, its rules'
# previous slot tables and attached policies (each compared by value; the store's objects are mostly the same ones).
RouteDeps = tuple[tuple[object, ...], tuple[object, ...], tuple[object, ...], tuple[object, ...]]


# What of a route the shared walk reads: its key and creation time (precedence, and the names a conflict gives), per
# parent its ref, whether it is accepted there and the listeners and hostnames it reaches, its table entries, and
# whether any rule can be served (a route with none is refused on every parent).
WalkShape = tuple[str, str, tuple[tuple[ParentRef, bool, tuple[Attachment, ...]], ...], tuple[RouteEntry, ...], bool]


def walk_shape(route: HTTPRoute, local: RouteLocal) -> WalkShape:
    parents = tuple((p.ref, p.refused is None, p.attachments) for p in local.parents)
    return (route.meta.key, route.meta.created, parents, local.entries, bool(local.actions))


@dataclass(frozen=True, slots=True, kw_only=True)
class Walked:
    """A route as the last walk left it: the route and the part its status was made from, the status (None: no
    parent of ours), our Gateways among its parents, and per parent the conflict it was told ("": none)."""

    route: HTTPRoute
    local: RouteLocal
    status: RouteStatus | None
    gateways: tuple[ParentRef, ...]
    taken: tuple[str, ...]


# A listener's table as the last full walk built it, or the problems that refused its Gateway.
ListenerOutcome = ListenerRoutes | tuple[str, ...]


class RouteMemo:
    """Each route's `RouteLocal` of the last translation of its Gateway, by the route and its `RouteDeps`, under one
    context (a change of the context forgets them all), and what the last walk over the routes gave (`same_walk`).
    The Gateway's translation memo owns one; a translation keeps only the routes it read (bounded by the routes
    there are)."""

    __slots__ = ("_context", "_last", "_shapes", "_used", "_walked", "_walking", "counts", "outcomes")

    def __init__(self) -> None:
        self._context: object = None
        self._last: dict[str, tuple[HTTPRoute, RouteDeps, RouteLocal]] = {}
        self._used: dict[str, tuple[HTTPRoute, RouteDeps, RouteLocal]] = {}
        self._shapes: tuple[WalkShape, ...] | None = None
        self._walked: dict[str, Walked] = {}
        self._walking: dict[str, Walked] = {}
        # Of the last full walk: each listener's attached routes and its table (or why its Gateway was refused).
        self.counts: dict[tuple[str, str], int] = {}
        self.outcomes: dict[tuple[str, str], ListenerOutcome] = {}

    def begin(self, context: object) -> None:
        """A translation starts: what it reads that every route reads, compared with the last one's."""
        if context != self._context:
            self._last = {}
            self._shapes, self._walked, self.counts, self.outcomes = None, {}, {}, {}
        self._context = context  # the objects just compared: the next comparison is by identity where they stay

    def same_walk(self, shapes: tuple[WalkShape, ...]) -> bool:
        """Whether the walk over routes of these shapes (in walk order) gives what the last one gave. A different
        walk forgets what the last one left: the counts and tables are rebuilt by this one."""
        if shapes == self._shapes:
            return True
        self._shapes, self._walked, self.counts, self.outcomes = shapes, {}, {}, {}
        return False

    def walked(self, key: str) -> Walked | None:
        return self._walked.get(key)

    def keep_walked(self, key: str, walked: Walked) -> None:
        self._walking[key] = walked

    def local(self, route: HTTPRoute, deps: RouteDeps, read: Callable[[], RouteLocal]) -> RouteLocal:
        """The route's part: the one held when the route and what it reads are unchanged, else `read()`."""
        key = route.meta.key
        held = self._last.get(key)
        got = held[2] if held is not None and (held[0] is route or held[0] == route) and held[1] == deps else read()
        self._used[key] = (route, deps, got)
        return got

    def finish(self) -> None:
        """The translation is done: the routes it did not read are forgotten."""
        self._last, self._used = self._used, {}
        self._walked, self._walking = self._walking, {}
