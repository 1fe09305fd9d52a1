"""The live stickiness bill (docs/spec.md §8, measured instead of simulated): how heavy the heaviest sessions are, in
fixed memory whatever the traffic.

Per sticky split the processor records every decided request here:

- a space-saving heavy-hitter sketch (Metwally et al.) of requests per session key, `capacity` counters: every key
  whose true count exceeds total/capacity is held, and a held key's count overestimates the truth by at most the
  smallest held count (exact while there are no more distinct keys than counters). Its largest counts give the
  largest sessions' shares, the serial fraction s (the largest session's share of requests) and Amdahl's limit 1/s;
- per backend, an exact request count and a HyperLogLog estimate of distinct sessions (2**HLL_BITS registers,
  ~1.04/sqrt(2**HLL_BITS) relative error, exact-ish below ~2.5 × registers by linear counting), so a team ramping a
  canary sees "5 % of sessions but 19 % of requests".

The HyperLogLog takes the key's `key_hash` (the project's one hash) through a fixed 32-bit mixing step, so that its
register bits are not the low bits the weighted pick used (`h % total`): otherwise the sessions of one backend
would crowd a few registers.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import log

DEFAULT_CAPACITY = 1024
MAX_CAPACITY = 65_536
HLL_BITS = 12
TOP = 5
_MASK = 0xFFFFFFFF
# 2**-rank for every rank a register can hold: the estimate runs at scrape time over every backend's registers.
_INVERSE_POWERS = tuple(2.0**-r for r in range(34 - HLL_BITS))


class SpaceSaving:
    """Space-saving with the stream-summary layout: counts bucketed by value, so an increment and an eviction are
    O(1) (no scan for the minimum)."""

    __slots__ = ("_buckets", "_counts", "_min", "capacity", "total")

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if not 1 <= capacity <= MAX_CAPACITY:
            raise ValueError(f"sketch capacity must be 1..{MAX_CAPACITY}, got {capacity}")
        self.capacity = capacity
        self.total = 0
        self._counts: dict[str, int] = {}
        self._buckets: dict[int, dict[str, None]] = {}  # count → keys (an insertion-ordered set)
        self._min = 0

    def add(self, key: str) -> None:
        self.total += 1
        count = self._counts.get(key)
        if count is None:
            if len(self._counts) < self.capacity:
                self._place(key, 1)
                return
            # Full: the new key takes over a key with the smallest count, and inherits that count (its error bound).
            # popitem (the newest of the smallest), not next(iter(...)): iterating a dict from the front after many
            # deletions there walks over their dummy slots, which made a flood of new keys O(n) per key.
            smallest = self._min
            bucket = self._buckets[smallest]
            victim, _ = bucket.popitem()
            del self._counts[victim]
            if not bucket:
                del self._buckets[smallest]
                self._min = smallest + 1
            self._place(key, smallest + 1)
            return
        self._remove(key, count)
        self._place(key, count + 1)

    def _remove(self, key: str, count: int) -> None:
        bucket = self._buckets[count]
        del bucket[key]
        del self._counts[key]
        if not bucket:
            del self._buckets[count]
            if count == self._min:
                self._min = count + 1  # every caller puts a key back at count + 1 at once

    def _place(self, key: str, count: int) -> None:
        self._counts[key] = count
        self._buckets.setdefault(count, {})[key] = None
        if count < self._min or len(self._counts) == 1:
            self._min = count

    def largest(self, n: int = TOP) -> list[int]:
        """The n largest counts, largest first (upper bounds of the true counts)."""
        out: list[int] = []
        for count in sorted(self._buckets, reverse=True):
            out.extend([count] * min(len(self._buckets[count]), n - len(out)))
            if len(out) >= n:
                break
        return out


class HyperLogLog:
    __slots__ = ("_registers",)

    def __init__(self) -> None:
        self._registers = bytearray(1 << HLL_BITS)

    def add(self, h: int) -> None:
        # murmur3's 32-bit finaliser (inline: this runs per request): a bijection spreading every bit of h.
        x = h ^ (h >> 16)
        x = (x * 0x85EBCA6B) & _MASK
        x ^= x >> 13
        x = (x * 0xC2B2AE35) & _MASK
        x ^= x >> 16
        index = x >> (32 - HLL_BITS)
        rest = x & ((1 << (32 - HLL_BITS)) - 1)
        rank = (32 - HLL_BITS) - rest.bit_length() + 1
        if rank > self._registers[index]:
            self._registers[index] = rank

    def estimate(self) -> float:
        m = len(self._registers)
        raw = (0.7213 / (1 + 1.079 / m)) * m * m / sum(map(_INVERSE_POWERS.__getitem__, self._registers))
        zeros = self._registers.count(0)
        if raw <= 2.5 * m and zeros:
            return m * log(m / zeros)  # linear counting: exact-ish for few sessions
        return raw


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendBill:
    name: str
    requests: int
    sessions: float  # estimated distinct sessions
    request_share: Fraction
    session_share: float


@dataclass(frozen=True, slots=True, kw_only=True)
class BillReport:
    requests: int
    largest_shares: tuple[Fraction, ...]  # the largest sessions' shares of requests, largest first
    serial_fraction: Fraction  # s: the largest session's share
    speedup_bound: Fraction | None  # 1/s; None before any request
    backends: tuple[BackendBill, ...]


class StickinessBill:
    """The bill of one split's sticky traffic. Backends by index, as the split lists them; fixed memory:
    capacity counters plus one HyperLogLog per backend."""

    __slots__ = ("_hll", "_requests", "_sketch", "names")

    def __init__(self, backends: tuple[str, ...], capacity: int = DEFAULT_CAPACITY) -> None:
        self.names = backends
        self._sketch = SpaceSaving(capacity)
        self._requests = [0] * len(backends)
        self._hll = [HyperLogLog() for _ in backends]

    def record(self, backend: int, key: str, h: int) -> None:
        """One request of session `key` (whose key_hash is `h`) decided to backend index `backend`."""
        self._sketch.add(key)
        self._requests[backend] += 1
        self._hll[backend].add(h)

    def report(self) -> BillReport:
        total = self._sketch.total
        largest = tuple(Fraction(c, total) for c in self._sketch.largest()) if total else ()
        s = largest[0] if largest else Fraction(0)
        sessions = [hll.estimate() for hll in self._hll]
        all_sessions = sum(sessions)
        backends = tuple(
            BackendBill(
                name=name,
                requests=r,
                sessions=n,
                request_share=Fraction(r, total) if total else Fraction(0),
                session_share=n / all_sessions if all_sessions else 0.0,
            )
            for name, r, n in zip(self.names, self._requests, sessions, strict=True)
        )
        return BillReport(
            requests=total,
            largest_shares=largest,
            serial_fraction=s,
            speedup_bound=1 / s if s else None,
            backends=backends,
        )


class SplitBills:
    """The bills of the sticky splits one processor serves, by split key. A split's bill starts over when its backend
    list changes (shares of a different set of backends do not add up); `retain` drops splits no longer served, so
    memory follows the held generation."""

    __slots__ = ("_bills", "capacity")

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._bills: dict[str, tuple[dict[str, int], StickinessBill]] = {}

    def record(self, split: str, backends: tuple[str, ...], backend: str, key: str, h: int) -> None:
        entry = self._bills.get(split)
        if entry is None or entry[1].names != backends:
            entry = self._bills[split] = (
                {n: i for i, n in enumerate(backends)},
                StickinessBill(backends, self.capacity),
            )
        index, bill = entry
        bill.record(index[backend], key, h)

    def retain(self, splits: set[str]) -> None:
        for gone in [k for k in self._bills if k not in splits]:
            del self._bills[gone]

    def reports(self) -> list[tuple[str, BillReport]]:
        return [(split, bill.report()) for split, (_, bill) in sorted(self._bills.items())]
