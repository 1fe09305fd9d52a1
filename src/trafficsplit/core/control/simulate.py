"""The stickiness bills (docs/spec.md §8): what pinning clients to replicas costs, for a given client mix.

Stickiness trades three things: load balance (a heavy client pins its whole load on one replica), rebinding (adding a
replica moves bound clients) and loss (a replica that drops takes its sessions with it). The simulator reports all
three for three rules so that users can see the trade before they choose; it uses the project's one hash, so its
figures agree with the dataplane to the bit.

Request order (non-sticky): clients in row order, `prefix-0`, `prefix-1`, …, each client's requests consecutively;
the j-th request of that global order goes to replica j % n. Non-sticky has no binding, so its rebinding and loss are
0 by definition.

The sticky-consistent rule is `trafficsplit.core.model.ring`, the ring the dataplane pins pods with: same points, same
hash. The capacity model (`Capacity`) turns the shares into requests/s against a replica's safe rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import ceil

from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.hashing import key_hash
from trafficsplit.core.model.ring import DEFAULT_POINTS, MAX_POINTS, Ring
from trafficsplit.core.model.weights import parse_int

RULES = ("non-sticky", "sticky-modulo", "sticky-consistent")
VIRTUAL_NODES = DEFAULT_POINTS
AMDAHL_REPLICAS = (3, 4, 8, 16, 64)
MAX_CLIENTS = 1_000_000
MAX_REPLICAS = 1_000
MAX_AMDAHL_COUNTS = 32
# "Replicas needed" is searched up to this count; a mix that needs more is reported as not reachable by this search.
MAX_NEEDED_SEARCH = 256


@dataclass(frozen=True, slots=True)
class ClientRow:
    """`count` clients named `prefix-0 … prefix-(count-1)`, each sending `requests` requests."""

    prefix: str
    count: int
    requests: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleLoad:
    load: tuple[int, ...]  # requests per replica, in `Simulation.replicas` order
    imbalance: Fraction  # busiest share × n; 1 is perfectly even
    load_after_add: tuple[int, ...]  # requests per replica, in `Simulation.grown` order
    imbalance_after_add: Fraction
    busiest: int  # index of the busiest replica before (first on ties)
    busiest_drop: Fraction  # (ITS load before − ITS load after the add) / its load before: not the peak drop
    peak_before: int  # the busiest replica's load before the add
    peak_after: int  # the busiest replica's load after the add, whichever replica that is
    peak_drop: Fraction  # docs/spec.md §8: 1 − peak_after / peak_before
    # Requests per surviving replica, in `Simulation.survivors` order; None when no replica is lost (one replica).
    load_after_loss: tuple[int, ...] | None


@dataclass(frozen=True, slots=True)
class Bill:
    """Sessions (clients) and their share of requests: what rebinding or a lost replica costs."""

    clients: int
    request_share: Fraction


@dataclass(frozen=True, slots=True)
class Capacity:
    """The user's figures: the mix's peak requests/s, one replica's safe requests/s, the target utilization."""

    peak_rps: Fraction
    safe_rps: Fraction
    target: Fraction

    def problems(self) -> list[str]:
        out: list[str] = []
        if self.peak_rps <= 0:
            out.append(f"peak-rps: must be > 0, got {self.peak_rps}")
        if self.safe_rps <= 0:
            out.append(f"safe-rps: must be > 0, got {self.safe_rps}")
        if not 0 < self.target <= 1:
            out.append(f"target-utilization: must be in (0, 1], got {self.target}")
        return out

    @property
    def budget_rps(self) -> Fraction:
        """What one replica may carry at the target utilization."""
        return self.safe_rps * self.target


@dataclass(frozen=True, slots=True)
class RuleCapacity:
    busiest_rps: Fraction  # the busiest replica's share of the peak, at the given replicas
    utilization: Fraction  # busiest_rps / safe_rps
    replicas_needed: int | None  # by search: the fewest k1..kN whose busiest replica stays within the budget
    # By imbalance: ceil(imbalance × peak / (safe × target)), the imbalance at the given replicas (the usual rule of
    # thumb: scale the even count by how uneven the rule is). It ignores that the imbalance changes with the count.
    replicas_needed_by_imbalance: int


@dataclass(frozen=True, slots=True)
class Speedup:
    """One replica count's speedup under each rule: sticky is Amdahl's bound S(n) (the largest client cannot be split),
    non-sticky has no serial part (any request may go anywhere), so S(n) with s = 0, which is n. (The round robin over
    the mix's whole requests is within one request per replica of that; the capacity model works in rates.)"""

    replicas: int | None  # None: the limit n → ∞
    sticky: Fraction  # S(n), or 1/s at the limit
    non_sticky: Fraction | None  # None at the limit: unbounded


@dataclass(frozen=True, slots=True)
class CountCapacity:
    """At one replica count: the busiest replica carries at least PEAK / S(n) (the bound, whatever the placement)."""

    replicas: int | None
    busiest_lower_bound_rps: Fraction  # peak / S(n)
    utilization: Fraction  # busiest_lower_bound_rps / safe_rps


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityReport:
    capacity: Capacity
    rules: dict[str, RuleCapacity]
    even_replicas: int  # ceil(peak / budget): the count a perfectly even split would need
    largest_rps: Fraction  # the largest session's requests/s: a sticky rule puts all of it on one replica
    largest_utilization: Fraction  # largest_rps / safe_rps
    max_largest_share: Fraction  # the largest session share one replica can carry within the budget (budget / peak)
    by_count: tuple[CountCapacity, ...]  # per Amdahl count, and the limit


@dataclass(frozen=True, slots=True, kw_only=True)
class Simulation:
    clients: int
    requests: int
    replicas: tuple[str, ...]
    added: tuple[str, ...]
    lost: tuple[str, ...]
    points: int
    rules: dict[str, RuleLoad]
    rebinding: dict[str, Bill]  # when `added` join
    loss: dict[str, Bill] | None  # sessions bound to `lost`; None when none is lost (one replica: n/a)
    moved_on_loss: dict[str, Bill] | None  # sessions whose replica stayed but that moved anyway when `lost` left
    serial_fraction: Fraction  # the largest client's share of requests
    amdahl: tuple[tuple[int | None, Fraction], ...]  # (replicas, bound); None is the limit 1/s
    speedups: tuple[Speedup, ...]  # per Amdahl count and the limit: sticky S(n) beside the non-sticky speedup
    capacity: CapacityReport | None = None

    @property
    def grown(self) -> tuple[str, ...]:
        return self.replicas + self.added

    @property
    def survivors(self) -> tuple[str, ...]:
        return tuple(r for r in self.replicas if r not in self.lost)


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


def _check_scenario(
    replicas: Sequence[str], added: Sequence[str], lost: Sequence[str], points: int, amdahl_at: Sequence[int]
) -> list[str]:
    problems: list[str] = []
    if not 1 <= points <= MAX_POINTS:
        problems.append(f"points: must be 1..{MAX_POINTS}, got {points}")
    if not added:
        problems.append("add: at least one replica must be added")
    if len(set(added)) != len(added) or set(added) & set(replicas):
        problems.append(f"add: {', '.join(added)} must be new, distinct names (the replicas are {replicas[0]}..)")
    if any(not a or len(a) > 253 for a in added):
        problems.append("add: names must be 1..253 characters")
    if len(replicas) + len(added) > MAX_REPLICAS:
        problems.append(f"add: more than {MAX_REPLICAS} replicas in all")
    if not lost and len(replicas) > 1:  # one replica: nothing can be lost and leave a survivor, so nothing is
        problems.append("lose: at least one replica must be lost")
    if len(set(lost)) != len(lost) or not set(lost) <= set(replicas):
        problems.append(f"lose: {', '.join(lost)} must be distinct replicas of {replicas[0]}..{replicas[-1]}")
    elif len(lost) >= len(replicas):
        problems.append("lose: at least one replica must survive")
    if not 1 <= len(amdahl_at) <= MAX_AMDAHL_COUNTS or any(not 1 <= k <= MAX_REPLICAS for k in amdahl_at):
        problems.append(f"amdahl: 1..{MAX_AMDAHL_COUNTS} replica counts, each 1..{MAX_REPLICAS}")
    return problems


def expand_clients(rows: Sequence[ClientRow]) -> list[tuple[str, int]]:
    """(name, requests) for every client, in the documented global order."""
    return [(f"{r.prefix}-{i}", r.requests) for r in rows for i in range(r.count)]


def bind_modulo(names: Sequence[str], n: int) -> list[int]:
    return [key_hash(name) % n for name in names]


def bind_consistent(names: Sequence[str], replicas: Sequence[str], points: int = DEFAULT_POINTS) -> list[int]:
    ring = Ring(replicas, points)
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


def _rule_load(before: tuple[int, ...], after: tuple[int, ...], after_loss: tuple[int, ...] | None) -> RuleLoad:
    busiest = before.index(max(before))
    drop = Fraction(before[busiest] - after[busiest], before[busiest])
    peak_before, peak_after = max(before), max(after)
    return RuleLoad(
        load=before,
        imbalance=_imbalance(before),
        load_after_add=after,
        imbalance_after_add=_imbalance(after),
        busiest=busiest,
        busiest_drop=drop,
        peak_before=peak_before,
        peak_after=peak_after,
        peak_drop=1 - Fraction(peak_after, peak_before),
        load_after_loss=after_loss,
    )


def _bill(flags: Sequence[bool], requests: Sequence[int], total: int) -> Bill:
    return Bill(sum(flags), Fraction(sum(r for f, r in zip(flags, requests, strict=True) if f), total))


def amdahl(s: Fraction, n: int) -> Fraction:
    """Amdahl's bound S(n) = 1 / (s + (1 - s) / n): the serial part is the one client no replica count can split."""
    return 1 / (s + (1 - s) / n)


def _by_name(binding: Sequence[int], members: Sequence[str]) -> list[str]:
    return [members[b] for b in binding]


def simulate(
    rows: Sequence[ClientRow],
    n: int | Sequence[str],
    *,
    points: int = DEFAULT_POINTS,
    add: Sequence[str] | None = None,
    lose: Sequence[str] | None = None,
    amdahl_at: Sequence[int] = AMDAHL_REPLICAS,
    capacity: Capacity | None = None,
) -> Simulation:
    """All docs/spec.md §8 figures for the client mix over replicas k1..kn: `add` (default k(n+1)) joining, `lose`
    (default k1; with one replica none, and the loss figures are None) leaving, a ring of `points` nodes per replica,
    Amdahl's bound at `amdahl_at`, and the capacity model.

    `n` may name the replicas instead (e.g. the pods' `host:port`, as the dataplane's ring names them); then `add`
    must be given, and `lose` defaults to the first."""
    named = not isinstance(n, int)
    if isinstance(n, int):
        replicas = replica_names(n) if 1 <= n <= MAX_REPLICAS else ()
        problems = _check(rows, n)
    else:
        replicas = tuple(n)
        problems = _check(rows, len(replicas))
    if named and (len(set(replicas)) != len(replicas) or any(not r or len(r) > 253 for r in replicas)):
        problems.append("replicas: names must be distinct, 1..253 characters")
    if problems:
        raise SpecError(problems)
    added = tuple(add) if add is not None else () if named else (f"k{len(replicas) + 1}",)
    lost = tuple(lose) if lose is not None else replicas[:1] if len(replicas) > 1 else ()
    problems = _check_scenario(replicas, added, lost, points, amdahl_at)
    if capacity is not None:
        problems += capacity.problems()
    if problems:
        raise SpecError(problems)
    clients = expand_clients(rows)
    names = [c for c, _ in clients]
    requests = [r for _, r in clients]
    total = sum(requests)
    grown = replicas + added
    survivors = tuple(r for r in replicas if r not in lost)

    modulo = bind_modulo(names, len(replicas))
    modulo_add, modulo_loss = bind_modulo(names, len(grown)), bind_modulo(names, len(survivors))
    ring = bind_consistent(names, replicas, points)
    ring_add, ring_loss = bind_consistent(names, grown, points), bind_consistent(names, survivors, points)
    survivors_n = len(survivors) if lost else None

    rules = {
        "non-sticky": _rule_load(
            _round_robin(total, len(replicas)),
            _round_robin(total, len(grown)),
            _round_robin(total, survivors_n) if survivors_n else None,
        ),
        "sticky-modulo": _rule_load(
            _loads(modulo, requests, len(replicas)),
            _loads(modulo_add, requests, len(grown)),
            _loads(modulo_loss, requests, survivors_n) if survivors_n else None,
        ),
        "sticky-consistent": _rule_load(
            _loads(ring, requests, len(replicas)),
            _loads(ring_add, requests, len(grown)),
            _loads(ring_loss, requests, survivors_n) if survivors_n else None,
        ),
    }
    none = [False] * len(clients)
    # Bindings compared by replica NAME: after a loss the survivors' indexes shift, their names do not.
    sticky = {
        "sticky-modulo": (modulo, modulo_add, modulo_loss),
        "sticky-consistent": (ring, ring_add, ring_loss),
    }
    rebinding = {"non-sticky": _bill(none, requests, total)}
    loss = {"non-sticky": _bill(none, requests, total)}
    moved = {"non-sticky": _bill(none, requests, total)}
    for rule, (before, after_add, after_loss) in sticky.items():
        b = _by_name(before, replicas)
        a = _by_name(after_add, grown)
        lo = _by_name(after_loss, survivors)
        rebinding[rule] = _bill([x != y for x, y in zip(b, a, strict=True)], requests, total)
        loss[rule] = _bill([x in lost for x in b], requests, total)
        moved[rule] = _bill([x not in lost and x != y for x, y in zip(b, lo, strict=True)], requests, total)
    s = Fraction(max(requests), total)
    bounds: list[tuple[int | None, Fraction]] = [(k, amdahl(s, k)) for k in amdahl_at]
    bounds.append((None, 1 / s))
    speedups = tuple(Speedup(k, bound, None if k is None else amdahl(Fraction(0), k)) for k, bound in bounds)
    report = _capacity_report(capacity, rules, names, requests, s, points, bounds) if capacity is not None else None
    return Simulation(
        clients=len(clients),
        requests=total,
        replicas=replicas,
        added=added,
        lost=lost,
        points=points,
        rules=rules,
        rebinding=rebinding,
        loss=loss if lost else None,
        moved_on_loss=moved if lost else None,
        serial_fraction=s,
        amdahl=tuple(bounds),
        speedups=speedups,
        capacity=report,
    )


def _capacity_report(
    cap: Capacity,
    rules: dict[str, RuleLoad],
    names: Sequence[str],
    requests: Sequence[int],
    s: Fraction,
    points: int,
    bounds: Sequence[tuple[int | None, Fraction]],
) -> CapacityReport:
    total = sum(requests)
    per_rule: dict[str, RuleCapacity] = {}
    even = max(1, ceil(cap.peak_rps / cap.budget_rps))
    needed = _replicas_needed(cap, names, requests, s, points, even)
    for rule, r in rules.items():
        rps = cap.peak_rps * Fraction(max(r.load), total)
        by_imbalance = max(1, ceil(r.imbalance * cap.peak_rps / cap.budget_rps))
        per_rule[rule] = RuleCapacity(rps, rps / cap.safe_rps, needed[rule], by_imbalance)
    largest = cap.peak_rps * s
    by_count = tuple(CountCapacity(k, cap.peak_rps / b, cap.peak_rps / b / cap.safe_rps) for k, b in bounds)
    return CapacityReport(
        capacity=cap,
        rules=per_rule,
        even_replicas=even,
        largest_rps=largest,
        largest_utilization=largest / cap.safe_rps,
        max_largest_share=min(Fraction(1), cap.budget_rps / cap.peak_rps),
        by_count=by_count,
    )


def _replicas_needed(
    cap: Capacity, names: Sequence[str], requests: Sequence[int], s: Fraction, points: int, even: int
) -> dict[str, int | None]:
    """The fewest replicas k1..kN (N from the even count up to MAX_NEEDED_SEARCH) whose busiest replica stays within
    the budget, per rule. A sticky rule pins the largest session on one replica, so if that session alone exceeds the
    budget no count helps (None). Loads are not monotone in N for the sticky rules, so every N is tried in order."""
    total = sum(requests)
    limit = cap.budget_rps / cap.peak_rps * total  # the most requests (of the mix) one replica may carry
    out: dict[str, int | None] = {"non-sticky": None, "sticky-modulo": None, "sticky-consistent": None}
    hashes = [key_hash(name) for name in names]
    sticky_possible = max(requests) <= limit
    ring = Ring((), points)  # k1..kN, grown one replica at a time (a linear merge per step)
    for k in range(1, MAX_NEEDED_SEARCH + 1):
        ring = ring.with_member(f"k{k}")
        if k < even:
            continue
        if out["non-sticky"] is None and max(_round_robin(total, k)) <= limit:
            out["non-sticky"] = k
        if not sticky_possible:
            break
        if out["sticky-modulo"] is None and max(_loads([h % k for h in hashes], requests, k)) <= limit:
            out["sticky-modulo"] = k
        if out["sticky-consistent"] is None:
            binding = [ring.lookup(h) for h in hashes]
            if max(_loads(binding, requests, k)) <= limit:
                out["sticky-consistent"] = k
        if all(v is not None for v in out.values()):
            break
    return out
