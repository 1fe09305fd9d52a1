"""What each HTTPRoute's status last followed from, so a status pass skips a route for which nothing changed.

A route's `status.parents` (`gatewayapi.status.route_parents`) follows from its object as stored (uid and
resourceVersion: a new metadata.generation or status is a new version too), the refusal of its body, our parent
statuses for it (the translation's, with the rules its Gateways' replicas refused alone named) and, per parent,
whether that Gateway's replicas serve the route's generation. Computing it costs ~0.1 ms a route; comparing what it
follows from costs a few lookups and one tuple comparison (by identity where the route was not translated again). So
another tenant's 100 routes cost a Gateway's pass nothing (issue 28's neighbour case), and neither do the 999 other
routes of a Gateway whose one route flipped (its part is translated again, their parent statuses equal as before).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from trafficsplit.core.gatewayapi.conditions import ParentStatus
from trafficsplit.operator.store import Key, Refused


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteSeen:
    """What one route's status followed from when it was last found in place or written."""

    uid: str
    resource_version: str
    refusal: Refused | None
    parents: tuple[ParentStatus, ...]  # ours, as `route_parents` takes them
    served: tuple[bool, ...]  # per parent, whether its Gateway serves the route's generation


@dataclass
class RouteStatusMemo:
    """Per route, what its status was last found in place or written for."""

    _routes: dict[Key, RouteSeen] = field(default_factory=dict)

    def unchanged(self, route: Key, seen: RouteSeen) -> bool:
        """Whether the route's status was last found in place or written for exactly this."""
        return self._routes.get(route) == seen

    def record(self, route: Key, seen: RouteSeen) -> None:
        self._routes[route] = seen

    def keep_only(self, routes: Collection[Key]) -> None:
        """Forget the routes not among `routes` (deleted ones), when there are more here (a deleted route's record
        left while another was created stays until then: harmless, a route created again under its name has
        another uid)."""
        if len(self._routes) > len(routes):
            for gone in [k for k in self._routes if k not in routes]:
                del self._routes[gone]
