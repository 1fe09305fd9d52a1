"""`spec.assignment: minimal`: a fixed slot space whose ownership moves only as much as a weight change needs.

The default pick (`hash`, core/model/weights.py) maps `key_hash % total` onto running sums: a change of the total
redraws every slot, and weight moved past a backend slides that backend's range. Here the slot space is fixed (`SLOTS`),
a
key's slot is `key_hash % SLOTS`, and a `SlotTable` says which backend owns each slot. A weight change computes each
backend's new quota (largest remainder over `SLOTS`, core/model/weights.py's `rebalance`) and moves slots only from
backends over their new quota to backends under it, so it moves exactly Σ max(0, new quota − old quota) slots.

Rounding bound: a quota differs from `SLOTS × share` by less than one slot, so a backend's realised share is within
1/SLOTS (0.01 %) of its weight share, and a change moves the minimum Σ max(0, new share − old share) within
n/SLOTS, n being the number of backends on either side (0.03 % for three backends, 0.64 % for 64).

The table is a function of the split's history (the previous table and the new weights), so it is stored: in the
TrafficSplit's status (`status.assignment`, run-length encoded, at most `SLOTS` runs whatever the number of changes)
and in every generation the dataplanes hold. A table checks itself against its weights, so a receiver never serves
a table whose shares contradict the weights it came with.

The status copy is written by the operator and read back by the next one, but anyone with status write can edit it in
between, and a table with valid counts (runs reversed, names swapped) would move most sessions with no weight change.
So the stored form carries the weights the table was built for and a SHA-256 digest binding the object's uid, the
backends, those weights and the runs: the reader refuses a table whose digest, counts or bounds do not hold, checking
the bounds before it parses anything (docs/security.md says why a digest and not an HMAC).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Any, NamedTuple, cast

from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.limits import MAX_BACKEND_NAME, MAX_BACKENDS
from trafficsplit.core.model.weights import MAX_WEIGHT, Weights, rebalance

SLOTS = 10_000
_RUN = re.compile(r"([0-9]{1,2})x([0-9]{1,5})")
# The longest `runs` text a valid table has: `SLOTS` runs of one slot each, two-digit owners ("63x1,"). The CRD's
# status schema bounds the field to it, and the reader refuses a longer one before parsing it.
MAX_RUNS_TEXT = SLOTS * len(f"{MAX_BACKENDS - 1}x1,") - 1
_DIGEST_PREFIX = "sha256:"
DIGEST_LENGTH = len(_DIGEST_PREFIX) + 64
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class AssignmentMode(StrEnum):
    HASH = "hash"  # the seed's pick: slot = key_hash % total over running sums (docs/spec.md §2)
    MINIMAL = "minimal"  # this module's slot table


class Run(NamedTuple):
    """`length` consecutive slots owned by backend `owner` (an index into the table's names)."""

    owner: int
    length: int


def quotas(weights: Weights) -> tuple[int, ...]:
    """Each backend's slot count: its share of `SLOTS` by the largest-remainder rule (ties to the first listed)."""
    return rebalance(weights, SLOTS).weights


@dataclass(frozen=True, slots=True)
class SlotTable:
    """Who owns each of the `SLOTS` slots, as runs over `names` (a split's backends, in spec order).

    Checks itself: runs cover exactly `SLOTS` slots, owners are backends, at most `SLOTS` runs."""

    names: tuple[str, ...]
    runs: tuple[Run, ...]
    owners: bytes = field(init=False, repr=False, compare=False)  # one byte per slot: the pick is one index

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not self.names or len(self.names) > 255:
            problems.append(f"names: 1..255 backends, got {len(self.names)}")
        if len(self.runs) > SLOTS:
            problems.append(f"runs: {len(self.runs)} runs, at most {SLOTS}")
        elif any(r.length <= 0 or not 0 <= r.owner < len(self.names) for r in self.runs):
            problems.append("runs: every run needs a length > 0 and an owner among the backends")
        elif sum(r.length for r in self.runs) != SLOTS:
            problems.append(f"runs: cover {sum(r.length for r in self.runs)} slots, not {SLOTS}")
        if problems:
            raise SpecError([f"assignment.{p}" for p in problems])
        object.__setattr__(self, "owners", b"".join(bytes([r.owner]) * r.length for r in self.runs))

    @classmethod
    def from_owners(cls, names: tuple[str, ...], owners: bytes | bytearray) -> SlotTable:
        runs: list[Run] = []
        for o in owners:
            if runs and runs[-1].owner == o:
                runs[-1] = Run(o, runs[-1].length + 1)
            else:
                runs.append(Run(o, 1))
        return cls(names, tuple(runs))

    def owner_index(self, h: int) -> int:
        return self.owners[h % SLOTS]

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(self.names, 0)
        for r in self.runs:
            out[self.names[r.owner]] += r.length
        return out

    def check(self, weights: Weights) -> list[str]:
        """Problems when this table is not the one for `weights`: other backends, or counts other than the quotas."""
        if self.names != weights.names:
            return [f"assignment.names: {list(self.names)} are not the backends {list(weights.names)}"]
        counts = self.counts()
        wrong = [
            f"{n} owns {counts[n]} slots, its weight gives {q}"
            for n, q in zip(weights.names, quotas(weights), strict=True)
            if counts[n] != q
        ]
        return [f"assignment.runs: {'; '.join(wrong)}"] if wrong else []

    # --- status.assignment ---

    def to_status(self, uid: str, weights: Weights) -> dict[str, Any]:
        """The stored form for the object `uid`: the table, the weights it was built for (the table is the one for them:
        a served form checked that), and the digest binding them."""
        runs = ",".join(f"{r.owner}x{r.length}" for r in self.runs)
        return {
            "slots": SLOTS,
            "backends": list(self.names),
            "weights": list(weights.weights),
            "runs": runs,
            "digest": status_digest(uid, self.names, weights.weights, runs),
        }

    @classmethod
    def from_status(cls, raw: Any, uid: str) -> SlotTable:
        """The table the operator stored for the object `uid`; raises SpecError naming why it is not (bounds and types,
        then the digest, then the runs and the counts against the stored weights: the caller rebuilds)."""
        fields = stored_fields(raw)
        if isinstance(fields, list):
            raise SpecError(fields)
        names, weights, text, digest = fields
        if not hmac.compare_digest(digest, status_digest(uid, names, weights, text)):
            raise SpecError(["status.assignment.digest: not the digest of this object's table (edited, or copied)"])
        runs: list[Run] = []
        for i, part in enumerate(text.split(",")):
            m = _RUN.fullmatch(part)
            if m is None:
                raise SpecError([f"status.assignment.runs[{i}]: not OWNERxLENGTH"])
            runs.append(Run(int(m.group(1)), int(m.group(2))))
        try:
            stored = Weights(names, weights)
        except SpecError as exc:  # its paths name the backends list: "backends[1].name"
            raise SpecError([f"status.assignment.{p}" for p in exc.problems]) from None
        try:
            table = cls(names, tuple(runs))
        except SpecError as exc:  # its paths start at "assignment."
            raise SpecError([f"status.{p}" for p in exc.problems]) from None
        problems = table.check(stored)
        if problems:
            raise SpecError([f"status.{p}" for p in problems])
        return table


StoredFields = tuple[tuple[str, ...], tuple[int, ...], str, str]  # backends, weights, runs, digest


def stored_fields(raw: Any) -> StoredFields | list[str]:
    """A stored table's fields when their types and bounds hold, else the problems: cheap (no parsing, no hashing),
    so a reader can refuse junk, or key a memo by the value, before any work that grows with it."""
    if not isinstance(raw, Mapping):
        return ["status.assignment: not an object"]
    names, weights, text, digest = (raw.get(k) for k in ("backends", "weights", "runs", "digest"))
    problems: list[str] = []
    if raw.get("slots") != SLOTS:
        problems.append(f"status.assignment.slots: not {SLOTS}")
    if (
        not isinstance(names, list)
        or not 0 < len(names) <= MAX_BACKENDS
        or not all(isinstance(n, str) and 0 < len(n) <= MAX_BACKEND_NAME for n in names)
    ):
        problems.append(f"status.assignment.backends: 1..{MAX_BACKENDS} names of 1..{MAX_BACKEND_NAME} characters")
    if (
        not isinstance(weights, list)
        or not isinstance(names, list)
        or len(weights) != len(names)
        or not all(isinstance(w, int) and not isinstance(w, bool) and 0 <= w <= MAX_WEIGHT for w in weights)
    ):
        problems.append(f"status.assignment.weights: one weight 0..{MAX_WEIGHT} per backend")
    if not isinstance(text, str) or not 0 < len(text) <= MAX_RUNS_TEXT:
        problems.append(f"status.assignment.runs: a string of 1..{MAX_RUNS_TEXT} characters")
    if not isinstance(digest, str) or _DIGEST.fullmatch(digest) is None:
        problems.append(f"status.assignment.digest: {_DIGEST_PREFIX} and 64 lowercase hex digits")
    if problems:
        return problems
    return tuple(cast(list[str], names)), tuple(cast(list[int], weights)), cast(str, text), cast(str, digest)


def status_digest(uid: str, names: tuple[str, ...], weights: tuple[int, ...], runs: str) -> str:
    """SHA-256 over the object's uid, the backends, the weights and the runs (JSON, so no field can run into the next):
    a table edited by hand, or copied from another object, does not match."""
    text = json.dumps(["trafficsplit.dev/assignment/v1", uid, SLOTS, list(names), list(weights), runs])
    return _DIGEST_PREFIX + hashlib.sha256(text.encode()).hexdigest()


def fresh_table(weights: Weights) -> SlotTable:
    """A table without history: each backend's quota as one range, in spec order."""
    runs = tuple(Run(i, q) for i, q in enumerate(quotas(weights)) if q > 0)
    return SlotTable(weights.names, runs)


def advance(previous: SlotTable | None, weights: Weights) -> SlotTable:
    """The table after changing to `weights`: slots move only from backends over their new quota (or gone) to
    backends under it. Over-quota backends give up their highest slots; under-quota ones, in spec order, take the
    freed slots lowest first (deterministic, and it keeps runs few). Idempotent: the table for the same weights is
    the same table."""
    if previous is None:
        return fresh_table(weights)
    index = {n: i for i, n in enumerate(weights.names)}
    target = quotas(weights)
    # The previous owners re-indexed onto the new names; a backend that left owns nothing (-1: to be freed).
    remap = [index.get(n, -1) for n in previous.names]
    owners = [remap[o] for o in previous.owners]
    have = [0] * len(weights.names)
    for o in owners:
        if o >= 0:
            have[o] += 1
    excess = [max(0, h - t) for h, t in zip(have, target, strict=True)]
    freed: list[int] = []
    for slot in range(SLOTS - 1, -1, -1):
        o = owners[slot]
        if o < 0:
            freed.append(slot)
        elif excess[o] > 0:
            excess[o] -= 1
            freed.append(slot)
    freed.sort()
    pos = 0
    for i, (h, t) in enumerate(zip(have, target, strict=True)):
        for slot in freed[pos : pos + max(0, t - h)]:
            owners[slot] = i
        pos += max(0, t - h)
    return SlotTable.from_owners(weights.names, bytes(owners))


def moved_share(before: SlotTable, after: SlotTable) -> Fraction:
    """The share of slots whose owner (by name) differs between two tables."""
    index = {n: i for i, n in enumerate(after.names)}
    # before's owner indexes translated to after's (255, never an index of after's: a backend that left).
    remap = bytearray(range(256))
    for i, n in enumerate(before.names):
        remap[i] = index.get(n, 255)
    translated = before.owners.translate(remap)
    return Fraction(sum(x != y for x, y in zip(translated, after.owners, strict=True)), SLOTS)


def rounding_bound(before: Weights, after: Weights) -> Fraction:
    """How far a minimal change's moved share may be from the exact minimum: n/SLOTS over the union of backends."""
    return Fraction(len(set(before.names) | set(after.names)), SLOTS)


def minimal_moved_share(before: Weights, after: Weights) -> Fraction:
    """What `advance` moves for a change from `before` to `after` when the table held `before`'s quotas: exactly
    Σ max(0, new quota − old quota) slots (history does not change it: only counts matter)."""
    old = dict(zip(before.names, quotas(before), strict=True))
    new = dict(zip(after.names, quotas(after), strict=True))
    return Fraction(sum(max(0, q - old.get(n, 0)) for n, q in new.items()), SLOTS)
