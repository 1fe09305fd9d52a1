"""The duplicate-match check as it was before `precedence.FirstHolders`: each match of a route compared with every
earlier entry of each host it shares (quadratic in a host's matches). Kept only as the reference the indexed check is
tested against (test_translate_per_gateway.py) and timed beside it (bench/bench_translate_shared_host.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trafficsplit.core.gatewayapi.attachment import Attachment
from trafficsplit.core.gatewayapi.httproute import HTTPRoute
from trafficsplit.core.gatewayapi.precedence import MAX_TAKEN_LISTED
from trafficsplit.core.model.routes import CATCH_ALL, RouteEntry, RuleAction

# (gateway, listener) → hostname → the entries of the routes attached there, each with its route, in walk order.
Tables = Mapping[tuple[str, str], Mapping[str, Sequence[tuple[HTTPRoute, RouteEntry]]]]


def pairwise_taken_matches(
    route: HTTPRoute, actions: Sequence[RuleAction], atts: Sequence[Attachment], tables: Tables
) -> str:
    taken: list[str] = []
    for action in actions:
        for j, m in enumerate(route.rules[action.rule].matches):
            for a in atts:
                for h in a.hostnames or (CATCH_ALL,):
                    winner = next(
                        ((r, e) for r, e in tables.get((a.gateway, a.listener), {}).get(h, ()) if e.match == m), None
                    )
                    if winner is not None and winner[0].meta.key != route.meta.key:
                        r, e = winner
                        why = "older" if r.meta.created < route.meta.created else "as old, first by namespace/name"
                        taken.append(
                            f"rules[{action.rule}].matches[{j}] on {h} never matches: {r.meta.key} rules[{e.rule}] "
                            f"takes it ({why})"
                        )
    listed = list(dict.fromkeys(taken))
    more = f"; and {len(listed) - MAX_TAKEN_LISTED} more" if len(listed) > MAX_TAKEN_LISTED else ""
    return "; ".join(listed[:MAX_TAKEN_LISTED]) + more
