"""Weighted backend lists and the stateless weighted pick (docs/spec.md §2).

A `Weights` value is the ordered (name, weight) list a TrafficSplit declares. The pick walks the running sums; it keeps
no counters, so two replicas holding the same weights answer the same for the same key.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.hashing import key_hash
from trafficsplit.core.model.limits import MAX_BACKENDS as MAX_BACKENDS  # re-exported: its home before core.limits
from trafficsplit.core.model.rules import backend_name_problems

MAX_WEIGHT = 1_000_000
HASH_SPACE = 1 << 32  # key_hash's values, 0 .. 2**32 - 1
# ASCII digits only: str.isdigit() also accepts '²' and other digits that int() refuses with a ValueError.
_INTEGER = re.compile(r"-?[0-9]+")


def parse_int(text: str) -> int | None:
    """`text` as a decimal integer (ASCII digits, an optional leading '-'), else None. The one integer reader of the
    core and the CLI, so that bad input is always a named problem and never a ValueError from int()."""
    if _INTEGER.fullmatch(text) is None:
        return None
    try:
        return int(text)
    except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits)
        return None


@dataclass(frozen=True, slots=True)
class Weights:
    """An ordered, validated list of (backend name, weight) with total > 0."""

    names: tuple[str, ...]
    weights: tuple[int, ...]
    # Running sums, precomputed once so a pick is one bisect.
    _bounds: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        problems = weight_problems(self.names, self.weights)
        # The names obey the CRD's rule too, so a list typed on the command line (`plan --from`, `pick --weights`)
        # is refused as the API server would refuse it. (The spec parser checks names with the backend's own fields.)
        problems += [f"backends[{i}].{p}" for i, n in enumerate(self.names) if n for p in backend_name_problems(n)]
        if problems:
            raise SpecError(problems)
        bounds: list[int] = []
        running = 0
        for w in self.weights:
            running += w
            bounds.append(running)
        object.__setattr__(self, "_bounds", tuple(bounds))

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, int]]) -> Weights:
        items = list(pairs)
        return cls(tuple(n for n, _ in items), tuple(w for _, w in items))

    @property
    def total(self) -> int:
        return self._bounds[-1]

    def items(self) -> list[tuple[str, int]]:
        return list(zip(self.names, self.weights, strict=True))

    def weight_of(self, name: str) -> int:
        return self.weights[self.names.index(name)]

    def owner_of_slot(self, slot: int) -> int:
        """Index of the backend whose running sum first exceeds `slot` (0 <= slot < total)."""
        return bisect_right(self._bounds, slot)

    def pick_index(self, h: int) -> int:
        """The backend index for a key hash: slot = h % total, then the running-sum walk."""
        return bisect_right(self._bounds, h % self._bounds[-1])

    def pick(self, key: str) -> str:
        return self.names[self.pick_index(key_hash(key))]

    def format(self) -> str:
        """`stable=95,canary=5`, the form the CLI takes and the printer column shows."""
        return ",".join(f"{n}={w}" for n, w in self.items())


def rebalance(after: Weights, total: int) -> Weights:
    """`after`'s ratio on `total` slots by the largest-remainder rule (the planner's suggestion keeping a total, the
    slot table's quotas).

    Each backend gets floor(w * total / T); the slots left over go one each to the largest remainders, ties to the
    backend listed first. Deterministic, sums to `total` exactly, and never moves a quota by a whole slot.
    """
    quotas = [(w * total, after.total) for w in after.weights]
    floors = [num // den for num, den in quotas]
    left = total - sum(floors)
    order = sorted(range(len(quotas)), key=lambda i: (-(quotas[i][0] % quotas[i][1]), i))
    for i in order[:left]:
        floors[i] += 1
    return Weights(after.names, tuple(floors))


def weight_problems(names: Sequence[str], weights: Sequence[int], field_path: str = "backends") -> list[str]:
    """Every reason a weight list is not a valid split, each naming the field; empty when valid."""
    problems: list[str] = []
    if len(names) != len(weights):
        problems.append(f"{field_path}: {len(names)} names but {len(weights)} weights")
        return problems
    if not names:
        problems.append(f"{field_path}: at least one backend is required")
        return problems
    if len(names) > MAX_BACKENDS:
        problems.append(f"{field_path}: {len(names)} backends, at most {MAX_BACKENDS} are allowed")
    seen: set[str] = set()
    for i, (name, w) in enumerate(zip(names, weights, strict=True)):
        if not name:
            problems.append(f"{field_path}[{i}].name: must not be empty")
        if name in seen:
            problems.append(f"{field_path}[{i}].name: duplicate backend name {name!r}")
        seen.add(name)
        if isinstance(w, bool) or not isinstance(w, int):
            problems.append(f"{field_path}[{i}].weight: must be an integer, got {w!r}")
        elif w < 0:
            problems.append(f"{field_path}[{i}].weight: must be >= 0, got {w}")
        elif w > MAX_WEIGHT:
            problems.append(f"{field_path}[{i}].weight: must be <= {MAX_WEIGHT}, got {w}")
    if not problems and sum(weights) <= 0:
        problems.append(f"{field_path}: the total weight must be > 0")
    return problems


def parse_pairs(text: str) -> list[tuple[str, int]]:
    """`stable=95,canary=5` → [("stable", 95), ("canary", 5)], syntax only (no bounds, duplicates allowed); raises
    SpecError naming every bad part. Empty parts (a trailing comma) are skipped."""
    pairs: list[tuple[str, int]] = []
    problems: list[str] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, raw = (s.strip() for s in part.partition("="))
        weight = parse_int(raw)
        if not sep or not name:
            problems.append(f"{part!r}: expected NAME=WEIGHT")
        elif weight is None:
            problems.append(f"{name}: weight {raw!r} is not an integer")
        else:
            pairs.append((name, weight))
    if problems:
        raise SpecError(problems)
    return pairs


def parse_weights(text: str) -> Weights:
    """Parse `stable=95,canary=5` into a valid split; raises SpecError naming the bad part."""
    return Weights.of(parse_pairs(text))


def modulo_bias(total: int, space: int = HASH_SPACE) -> Fraction:
    """The largest relative error of a backend's share under `slot = h % total`, h uniform over `space` values, over
    every split with this total (docs/spec.md, "Modulo bias").

    With space = q·total + r (0 <= r < total), slots 0..r-1 receive q+1 hash values and the others q. A backend that
    owns w slots, k of them below r, receives (w·q + k) / space of the keys where w / total is meant: a relative error
    of (k/w · total − r) / space, which lies between −r / space (k = 0) and (total − r) / space (k = w), both reached by
    a backend of weight 1. So the bound is max(r, total − r) / space, and 0 when total divides the space."""
    if total < 1 or space < 1:
        raise ValueError(f"total and space must be >= 1, got {total} and {space}")
    r = space % total
    return Fraction(0) if r == 0 else Fraction(max(r, total - r), space)
