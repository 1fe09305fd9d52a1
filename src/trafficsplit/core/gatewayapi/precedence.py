"""The spec's match precedence across every route of a listener, and the matches a route loses to an older route's
identical one (said on the loser, as `Conflicted: RuleMatchConflict`). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trafficsplit.core.gatewayapi.attachment import Attachment
from trafficsplit.core.gatewayapi.httproute import HTTPRoute
from trafficsplit.core.model.matches import PathType, RouteMatch
from trafficsplit.core.model.routes import CATCH_ALL, RouteEntry, RuleAction

MAX_TAKEN_LISTED = 8

# (gateway, listener) → hostname → each match → the first entry (in the walk's precedence order) that has it: the one
# every later identical match loses to. An index beside translate's tables, so finding a match's holder is one
# lookup, not a scan of every earlier match of the host (with many routes on one hostname that scan made the pass
# quadratic in the host's matches).
FirstHolders = Mapping[tuple[str, str], Mapping[str, Mapping[RouteMatch, tuple[HTTPRoute, RouteEntry]]]]


def precedence(route: HTTPRoute, entry: RouteEntry) -> tuple[int, int, int, int, int, str, str, int, int]:
    """The spec's match precedence: Exact path, then (our choice, the spec leaves it open) RegularExpression, then the
    longest PathPrefix; a method; more header matches; more query matches; the older route; `namespace/name`; rule
    order; match order."""
    m = entry.match
    rank = {PathType.EXACT: 0, PathType.REGULAR_EXPRESSION: 1, PathType.PREFIX: 2}[m.path_type]
    return (
        rank,
        -len(m.path),
        0 if m.method is not None else 1,
        -len(m.headers),
        -len(m.query_params),
        route.meta.created,
        route.meta.key,
        entry.rule,
        entry.match_index,
    )


def taken_matches(
    route: HTTPRoute, actions: Sequence[RuleAction], atts: Sequence[Attachment], holders: FirstHolders
) -> str:
    """The route's matches that an older route's identical match takes on a listener and host they share (the
    spec's precedence: the older route, then `namespace/name`), said on the route that loses them, since its
    requests silently go elsewhere; "" when none. `holders` holds only routes that precede this one (translate walks
    routes in precedence order)."""
    taken: list[str] = []
    for action in actions:
        for j, m in enumerate(route.rules[action.rule].matches):
            for a in atts:
                for h in a.hostnames or (CATCH_ALL,):
                    winner = holders.get((a.gateway, a.listener), {}).get(h, {}).get(m)
                    if winner is not None and winner[0].meta.key != route.meta.key:
                        r, e = winner
                        why = "older" if r.meta.created < route.meta.created else "as old, first by namespace/name"
                        taken.append(
                            f"rules[{action.rule}].matches[{j}] on {h} never matches: {r.meta.key} rules[{e.rule}] "
                            f"takes it ({why})"
                        )
    listed = list(dict.fromkeys(taken))  # two listeners may share a host
    more = f"; and {len(listed) - MAX_TAKEN_LISTED} more" if len(listed) > MAX_TAKEN_LISTED else ""
    return "; ".join(listed[:MAX_TAKEN_LISTED]) + more
