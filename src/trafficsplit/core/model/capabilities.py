"""What a dataplane replica can serve beyond a generation's own checks, and the one rule saying which splits it
cannot. Pure.

Tenant isolation: a split one replica cannot serve is that split's problem alone. The replica refuses that split and
serves the rest of the generation; the operator, which knows every replica's capabilities from their replies, leaves
the split out of what it publishes and says why in that split's status. Both sides ask `refusal`, so they agree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Set
from dataclasses import dataclass

from trafficsplit.core.model.compiled import CompiledSplit
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.limits import MAX_GENERATION, MAX_GENERATION_STEP, MAX_REFUSAL_MESSAGE


@dataclass(frozen=True, slots=True)
class Capabilities:
    cookie_keys: bool = False  # --cookie-key-file given: sticky.mode persistent can be sealed


@dataclass(frozen=True, slots=True)
class SplitRefusal:
    """One split a replica does not serve, with a reason word and a message for people (bounded)."""

    split: str  # namespace/name
    reason: str
    message: str

    def __post_init__(self) -> None:
        if len(self.message) > MAX_REFUSAL_MESSAGE:
            object.__setattr__(self, "message", self.message[:MAX_REFUSAL_MESSAGE])


NO_COOKIE_KEYS = "NoCookieKeys"


def refusal(split: CompiledSplit, caps: Capabilities) -> SplitRefusal | None:
    """Why a replica with `caps` cannot serve `split`, or None when it can."""
    if split.persistent and not caps.cookie_keys:
        return SplitRefusal(
            split.key,
            NO_COOKIE_KEYS,
            "no cookie keys (--cookie-key-file; the chart's cookieKeysSecret), which sticky.mode persistent seals its "
            "cookie with",
        )
    return None


def fleet_refusal(split: CompiledSplit, fleet: Mapping[str, Capabilities]) -> str | None:
    """Why the replicas named in `fleet` (name → what it reported) cannot all serve `split`: the message names those
    that cannot, or None when every one can. A split is published only when every replica can serve it, so no
    session's behaviour depends on the replica it lands on."""
    lacking: dict[str, list[str]] = {}
    for name, caps in sorted(fleet.items()):
        r = refusal(split, caps)
        if r is not None:
            lacking.setdefault(r.message, []).append(name)
    if not lacking:
        return None
    return "; ".join(
        f"dataplane{'s' if len(names) > 1 else ''} {', '.join(names)}: {msg}" for msg, names in lacking.items()
    )


def number_refusal(number: int, held: int) -> str | None:
    """Why a replica holding `held` (0: nothing) refuses a publish numbered `number` for being too far above it, or
    None. Numbers advance by one from what the fleet holds, so a jump is someone else's doing, and adopting it could
    bring the numbers to their ceiling in one publish (after which nothing could be published)."""
    if number > held + MAX_GENERATION_STEP:
        return (
            f"generation {number} is more than {MAX_GENERATION_STEP} above the held {held}: numbers advance by one "
            f"(at most {MAX_GENERATION})"
        )
    return None


def without_splits(gen: Generation, refused: Set[str]) -> Generation:
    """`gen` less the splits keyed `refused`, as this replica serves it. A route table rule whose split is refused keeps
    its place with no split (its requests answer 500, as a rule with no backend does): leaving the rule out would hand
    its requests to a less specific rule, a backend the route never chose for them."""
    routes = gen.routes
    if routes is not None and any(a.split is not None and a.key in refused for a in routes.actions):
        routes = dataclasses.replace(
            routes,
            actions=tuple(
                dataclasses.replace(a, split=None) if a.split is not None and a.key in refused else a
                for a in routes.actions
            ),
        )
    return Generation(gen.number, tuple(s for s in gen.splits if s.key not in refused), routes)
