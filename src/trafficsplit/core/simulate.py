"""The stickiness bills (SPEC §8): what pinning clients to replicas costs, for a given client mix.

Stickiness trades three things: load balance (a heavy client pins its whole load on one replica), rebinding (adding a
replica moves bound clients) and loss (a replica that drops takes its sessions with it). The simulator reports all
three for three rules so that users can see the trade before they choose; it uses the project's one hash, so its
figures agree with the dataplane to the bit.

Request order (non-sticky): clients in row order, `prefix-0`, `prefix-1`, …, each client's requests consecutively;
the j-th request of that global order goes to replica j % n. Non-sticky has no binding, so its rebinding and loss are
0 by definition.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from trafficsplit.core.errors import SpecError
from trafficsplit.core.hashing import key_hash
from trafficsplit.core.weights import parse_int

RULES = ("non-sticky", "sticky-modulo", "sticky-consistent")
VIRTUAL_NODES = 200
AMDAHL_REPLICAS = (3, 4, 8, 16, 64)
MAX_CLIENTS = 1_000_000
MAX_REPLICAS = 1_000


@dataclass(frozen=True, slots=True)
class ClientRow:
    """`count` clients named `prefix-0 … prefix-(count-1)`, each sending `requests` requests."""

    prefix: str
    count: int
    requests: int


@dataclass(frozen=True, slots=True)
class RuleLoad:
    load: tuple[int, ...]  # requests per replica k1..kn
    imbalance: Fraction  # busiest share × n; 1 is perfectly even
    load_after_add: tuple[int, ...]  # requests per replica k1..k(n+1)
    imbalance_after_add: Fraction
    busiest: int  # index of the busiest replica before (first on ties)
    busiest_drop: Fraction  # (its load before − its load after adding a replica) / its load before


@dataclass(frozen=True, slots=True)
class Bill:
    """Sessions (clients) and their share of requests: what rebinding or a lost replica costs."""

    clients: int
    request_share: Fraction


@dataclass(frozen=True, slots=True)
class Simulation:
    clients: int
    requests: int
    replicas: tuple[str, ...]
    rules: dict[str, RuleLoad]
    rebinding: dict[str, Bill]  # when replica k(n+1) is added
    loss: dict[str, Bill]  # when replica k1 drops
    serial_fraction: Fraction  # the largest client's share of requests
    amdahl: tuple[tuple[int | None, Fraction], ...]  # (replicas, bound); None is the limit 1/s


def parse_client_rows(text: str) -> tuple[ClientRow, ...]:
    """`major:1:2000,medium:9:400` → rows; raises SpecError naming the bad row."""
    rows: list[ClientRow] = []
    problems: list[str] = []
    for i, part in enumerate(p.strip() for p in text.split(",")):
        fields = part.split(":")
        numbers = [parse_int(f) for f in fields[1:]]
        count, requests = numbers if len(numbers) == 2 else (None, None)
        if count is None or requests is None or count < 0 or requests < 0:
            problems.append(f"clients[{i}]: {part!r} must be PREFIX:COUNT:REQUESTS_PER_CLIENT")
            continue
        rows.append(ClientRow(fields[0], count, requests))
    if problems:
        raise SpecError(problems)
    return tuple(rows)


def replica_names(n: int) -> tuple[str, ...]:
    return tuple(f"k{i}" for i in range(1, n + 1))


def _check(rows: Sequence[ClientRow], n: int) -> list[str]:
    problems: list[str] = []
    if not rows:
        problems.append("clients: at least one row is required")
    seen: set[str] = set()
    for i, r in enumerate(rows):
        if not r.prefix:
            problems.append(f"clients[{i}].prefix: must not be empty")
        if r.prefix in seen:
            problems.append(f"clients[{i}].prefix: duplicate prefix {r.prefix!r}")
        seen.add(r.prefix)
        if r.count < 0 or r.requests < 0:
            problems.append(f"clients[{i}]: count and requests must be >= 0")
    if sum(max(r.count, 0) for r in rows) > MAX_CLIENTS:
        problems.append(f"clients: more than {MAX_CLIENTS} clients")
    if not problems and sum(r.count * r.requests for r in rows) <= 0:
        problems.append("clients: the mix sends no requests")
    if not 1 <= n <= MAX_REPLICAS:
        problems.append(f"replicas: must be 1..{MAX_REPLICAS}, got {n}")
    return problems


def expand_clients(rows: Sequence[ClientRow]) -> list[tuple[str, int]]:
    """(name, requests) for every client, in the documented global order."""
    return [(f"{r.prefix}-{i}", r.requests) for r in rows for i in range(r.count)]


class Ring:
    """SPEC §8 consistent-hash ring: 200 virtual nodes per replica at key_hash(f"{replica}#{v}")."""

    __slots__ = ("_hashes", "_owners")

    def __init__(self, replicas: Sequence[str], vnodes: int = VIRTUAL_NODES) -> None:
        # Equal node hashes (a 32-bit collision) are ordered by replica position, so the ring is deterministic.
        nodes = sorted((key_hash(f"{r}#{v}"), i) for i, r in enumerate(replicas) for v in range(vnodes))
        self._hashes = [h for h, _ in nodes]
        self._owners = [i for _, i in nodes]

    def lookup(self, h: int) -> int:
        """The replica index of the first node whose hash is >= h, wrapping to the first node."""
        pos = bisect_left(self._hashes, h)
        return self._owners[pos if pos < len(self._hashes) else 0]


def bind_modulo(names: Sequence[str], n: int) -> list[int]:
    return [key_hash(name) % n for name in names]


def bind_consistent(names: Sequence[str], replicas: Sequence[str]) -> list[int]:
    ring = Ring(replicas)
    return [ring.lookup(key_hash(name)) for name in names]


def _loads(binding: Sequence[int], requests: Sequence[int], n: int) -> tuple[int, ...]:
    load = [0] * n
    for b, r in zip(binding, requests, strict=True):
        load[b] += r
    return tuple(load)


def _round_robin(total: int, n: int) -> tuple[int, ...]:
    # Request j goes to j % n, so replica i serves the j < total with j ≡ i (mod n).
    return tuple(total // n + (1 if i < total % n else 0) for i in range(n))


def _imbalance(load: Sequence[int]) -> Fraction:
    return Fraction(max(load) * len(load), sum(load))


def _rule_load(before: tuple[int, ...], after: tuple[int, ...]) -> RuleLoad:
    busiest = before.index(max(before))
    drop = Fraction(before[busiest] - after[busiest], before[busiest])
    return RuleLoad(before, _imbalance(before), after, _imbalance(after), busiest, drop)


def _bill(flags: Sequence[bool], requests: Sequence[int], total: int) -> Bill:
    return Bill(sum(flags), Fraction(sum(r for f, r in zip(flags, requests, strict=True) if f), total))


def amdahl(s: Fraction, n: int) -> Fraction:
    """Amdahl's bound S(n) = 1 / (s + (1 - s) / n): the serial part is the one client no replica count can split."""
    return 1 / (s + (1 - s) / n)


def simulate(rows: Sequence[ClientRow], n: int) -> Simulation:
    """All SPEC §8 figures for the client mix over replicas k1..kn (and k1..k(n+1) for the add)."""
    problems = _check(rows, n)
    if problems:
        raise SpecError(problems)
    clients = expand_clients(rows)
    names = [c for c, _ in clients]
    requests = [r for _, r in clients]
    total = sum(requests)
    replicas = replica_names(n)
    grown = replica_names(n + 1)

    modulo, modulo_add = bind_modulo(names, n), bind_modulo(names, n + 1)
    ring, ring_add = bind_consistent(names, replicas), bind_consistent(names, grown)

    rules = {
        "non-sticky": _rule_load(_round_robin(total, n), _round_robin(total, n + 1)),
        "sticky-modulo": _rule_load(_loads(modulo, requests, n), _loads(modulo_add, requests, n + 1)),
        "sticky-consistent": _rule_load(_loads(ring, requests, n), _loads(ring_add, requests, n + 1)),
    }
    none = [False] * len(clients)
    rebinding = {
        "non-sticky": _bill(none, requests, total),
        "sticky-modulo": _bill([a != b for a, b in zip(modulo, modulo_add, strict=True)], requests, total),
        "sticky-consistent": _bill([a != b for a, b in zip(ring, ring_add, strict=True)], requests, total),
    }
    loss = {
        "non-sticky": _bill(none, requests, total),
        "sticky-modulo": _bill([b == 0 for b in modulo], requests, total),
        "sticky-consistent": _bill([b == 0 for b in ring], requests, total),
    }
    s = Fraction(max(requests), total)
    bounds: list[tuple[int | None, Fraction]] = [(k, amdahl(s, k)) for k in AMDAHL_REPLICAS]
    bounds.append((None, 1 / s))
    return Simulation(len(clients), total, replicas, rules, rebinding, loss, s, tuple(bounds))
