"""Displacement planning (docs/spec.md §2): how much of the hash space changes backend when the weights change.

The pick is `slot = key_hash(key) % total`, so a change that keeps the total moves only the slots whose owner changed,
while a change of total re-draws every key's slot and moves sessions both ways. Users need that figure before they
apply a change, with the cheapest alternative that keeps the total; the CLI prints a `Plan` and the operator's
Warning Event renders the same value, so the two can never disagree.

Exactness: over the joint period L = lcm(T1, T2) a slot s has owner `before(s % T1)` and `after(s % T2)`. By the
Chinese remainder theorem the residue pairs (a, b) reached by s in 0..L-1 are exactly those with a ≡ b (mod gcd), each
once, so the count for a pair of owner intervals has a closed form (`_pairs_below`). The figure is therefore exact for
every pair of totals, in O(n1·n2) arithmetic, with no limit on L. `estimate_plan` keeps the sampled estimate
(key_hash over random keys) as an independent cross-check; the planner never needs it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction
from math import gcd

from trafficsplit.core.model.hashing import key_hash
from trafficsplit.core.model.weights import Weights, rebalance

DEFAULT_SAMPLES = 1_000_000
DEFAULT_SEED = 20261130


@dataclass(frozen=True, slots=True)
class Move:
    """The share of the hash space that goes from one backend to another."""

    source: str
    target: str
    share: Fraction


@dataclass(frozen=True, slots=True)
class Suggestion:
    """The requested ratio re-balanced onto the old total, and what applying it instead would move."""

    weights: Weights
    moved_share: Fraction


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    before: Weights
    after: Weights
    moved_share: Fraction  # sum of `moves`
    moves: tuple[Move, ...]  # from→to pairs with a positive share, in (before order, after order)
    total_changed: bool
    exact: bool  # False only for `estimate_plan`
    period: int  # lcm(T1, T2): the slots the exact count runs over
    minimum_share: Fraction  # the least any change reaching the new ratio must move
    suggestion: Suggestion | None  # only when the total changes
    samples: int | None = None  # the sample size of an estimate

    @property
    def excess_share(self) -> Fraction:
        """What this change moves beyond the minimum its ratio needs."""
        return self.moved_share - self.minimum_share


def union_names(before: Weights, after: Weights) -> tuple[str, ...]:
    """Every backend of either side: the before order, then names that only `after` lists, in its order."""
    return before.names + tuple(n for n in after.names if n not in before.names)


def _weight(w: Weights, name: str) -> int:
    return w.weight_of(name) if name in w.names else 0


def _intervals(w: Weights) -> list[tuple[str, int, int]]:
    """Each positive-weight backend's slot interval [lo, hi) in one period."""
    out: list[tuple[str, int, int]] = []
    lo = 0
    for name, weight in w.items():
        if weight > 0:
            out.append((name, lo, lo + weight))
        lo += weight
    return out


def _pairs_below(x: int, y: int, g: int) -> int:
    """#{(a, b): 0 <= a < x, 0 <= b < y, a ≡ b (mod g)}: residue r is hit x//g times plus once if r < x % g."""
    qx, rx = divmod(x, g)
    qy, ry = divmod(y, g)
    return qx * qy * g + qx * ry + qy * rx + min(rx, ry)


def _pairs(a_lo: int, a_hi: int, b_lo: int, b_hi: int, g: int) -> int:
    return (
        _pairs_below(a_hi, b_hi, g)
        - _pairs_below(a_lo, b_hi, g)
        - _pairs_below(a_hi, b_lo, g)
        + _pairs_below(a_lo, b_lo, g)
    )


def period(before: Weights, after: Weights) -> int:
    t1, t2 = before.total, after.total
    return t1 * t2 // gcd(t1, t2)


def exact_moves(before: Weights, after: Weights) -> dict[tuple[str, str], Fraction]:
    """The exact share of the joint period for every from→to pair of different backends with a positive share."""
    g = gcd(before.total, after.total)
    length = before.total * after.total // g
    out: dict[tuple[str, str], Fraction] = {}
    for src, a_lo, a_hi in _intervals(before):
        for dst, b_lo, b_hi in _intervals(after):
            if src == dst:
                continue
            n = _pairs(a_lo, a_hi, b_lo, b_hi, g)
            if n:
                out[(src, dst)] = Fraction(n, length)
    return out


def sampled_moves(
    before: Weights, after: Weights, samples: int = DEFAULT_SAMPLES, seed: int = DEFAULT_SEED
) -> dict[tuple[str, str], Fraction]:
    """The same matrix estimated from `samples` uuid-like keys of a fixed-seed generator, hashed with key_hash."""
    rng = random.Random(seed)
    counts: dict[tuple[str, str], int] = {}
    for _ in range(samples):
        h = key_hash(f"{rng.getrandbits(128):032x}")
        src = before.names[before.pick_index(h)]
        dst = after.names[after.pick_index(h)]
        if src != dst:
            counts[(src, dst)] = counts.get((src, dst), 0) + 1
    return {k: Fraction(v, samples) for k, v in counts.items()}


def minimum_share(before: Weights, after: Weights) -> Fraction:
    """Sum of the positive differences between the normalised ratios: the least any change to `after`'s ratio moves."""
    return sum(
        (
            max(Fraction(0), Fraction(_weight(after, n), after.total) - Fraction(_weight(before, n), before.total))
            for n in union_names(before, after)
        ),
        Fraction(0),
    )


def _build(
    before: Weights, after: Weights, moves: dict[tuple[str, str], Fraction], *, exact: bool, samples: int | None
) -> Plan:
    names = union_names(before, after)
    rank = {n: i for i, n in enumerate(names)}
    ordered = tuple(
        Move(s, t, share) for (s, t), share in sorted(moves.items(), key=lambda kv: (rank[kv[0][0]], rank[kv[0][1]]))
    )
    total_changed = before.total != after.total
    suggestion = None
    if total_changed:
        alt = rebalance(after, before.total)
        suggestion = Suggestion(alt, sum(exact_moves(before, alt).values(), Fraction(0)))
    return Plan(
        before=before,
        after=after,
        moved_share=sum((m.share for m in ordered), Fraction(0)),
        moves=ordered,
        total_changed=total_changed,
        exact=exact,
        period=period(before, after),
        minimum_share=minimum_share(before, after),
        suggestion=suggestion,
        samples=samples,
    )


def plan(before: Weights, after: Weights) -> Plan:
    """The exact displacement plan for changing `before` into `after` (a backend missing on one side weighs 0)."""
    return _build(before, after, exact_moves(before, after), exact=True, samples=None)


def estimate_plan(before: Weights, after: Weights, samples: int = DEFAULT_SAMPLES, seed: int = DEFAULT_SEED) -> Plan:
    """The same plan with the moves estimated from a fixed-seed key sample (a cross-check of `plan`)."""
    return _build(before, after, sampled_moves(before, after, samples, seed), exact=False, samples=samples)
