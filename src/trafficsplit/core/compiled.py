"""Compiled splits and generations: the immutable values the dataplane decides with.

A generation is built once (compile, check) and then only read, so the processor can swap it atomically and a
request in flight keeps the one it started with. Everything a per-request decision needs is precomputed here: the
running sums, the eligible-only failover weights, compiled match patterns, the host index.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING

from trafficsplit.core.assignment import AssignmentMode, SlotTable, advance
from trafficsplit.core.cookie import CookieSettings
from trafficsplit.core.errors import SpecError
from trafficsplit.core.host import normalize_host
from trafficsplit.core.limits import MAX_ENDPOINTS, MAX_GENERATION, MAX_MATCHES, MAX_SPLITS
from trafficsplit.core.persistent import StickyMode, drain_mode_problems, drain_problems
from trafficsplit.core.regex import Pattern
from trafficsplit.core.ring import DEFAULT_POINTS, MAX_POINTS, Ring, endpoint_ring
from trafficsplit.core.rules import Endpoint as Endpoint  # re-exported: where compiled values are, callers look
from trafficsplit.core.rules import (
    backend_problems,
    cluster_problems,
    compile_pattern,
    host_problems,
    key_header_problems,
    match_name_problems,
    match_value_problems,
    name_problems,
)
from trafficsplit.core.spec import MatchKind, MatchType, SplitSpec
from trafficsplit.core.vocabulary import Reason
from trafficsplit.core.weights import Weights

if TYPE_CHECKING:  # gateway_routes builds on this module; a generation only reads the table it is given
    from trafficsplit.core.gateway_routes import GatewayRoutes


@dataclass(frozen=True, slots=True, kw_only=True)
class CompiledBackend:
    name: str
    weight: int
    cluster: str
    service: str
    port: int
    endpoints: tuple[Endpoint, ...] = ()
    drain: bool = False  # sticky.mode persistent, weight 0: its sessions stay while it has ready endpoints
    # docs/spec.md §6: a backend with no ready endpoint is not eligible. Derived once here, not per request: decide()
    # reads it for every failover check and every matching rule.
    eligible: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        problems = (
            backend_problems(self.name, self.port, self.service)
            + cluster_problems(self.cluster)
            + drain_problems(self.weight, self.drain)
        )
        if len(self.endpoints) > MAX_ENDPOINTS:
            problems.append(f"endpoints: {len(self.endpoints)} endpoints, at most {MAX_ENDPOINTS} are allowed")
        if problems:
            raise SpecError(problems)
        object.__setattr__(self, "eligible", any(e.ready for e in self.endpoints))

    @property
    def ready_endpoints(self) -> tuple[Endpoint, ...]:
        return tuple(e for e in self.endpoints if e.ready)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompiledMatch:
    kind: MatchKind
    name: str
    exact: str | None
    pattern: Pattern | None  # RE2 (core/regex.py): linear time, bounded program
    backend_index: int

    def __post_init__(self) -> None:
        problems = match_name_problems(self.kind.value, self.name) + match_value_problems(self.exact or "")
        if (self.exact is None) == (self.pattern is None):
            problems.append("value: give exactly one of an exact value or a pattern")
        if problems:
            raise SpecError(problems)

    def matches(self, value: str | None) -> bool:
        if value is None:
            return False
        if self.pattern is not None:
            return self.pattern.fullmatch(value)
        return value == self.exact


def cluster_name(namespace: str, split: str, backend: str) -> str:
    """One Envoy cluster per (split, backend). '/' never occurs in Kubernetes names, so the name is unambiguous."""
    return f"{namespace}/{split}/{backend}"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompiledSplit:
    namespace: str
    name: str
    hosts: tuple[str, ...]
    backends: tuple[CompiledBackend, ...]
    cookie: CookieSettings | None = None
    endpoint_affinity: bool = False
    matches: tuple[CompiledMatch, ...] = ()
    debug_headers: bool = False
    endpoint_points: int = DEFAULT_POINTS  # ring points per endpoint (docs/spec.md §5), used with endpoint_affinity
    # The TrafficSplit metadata.generation this form was compiled from (0: not from a resource, e.g. a test). It is
    # content: status reports a split published only when a generation carries the form of its current spec.
    observed_generation: int = 0
    # sticky.header.name: the key comes from this request header when present, before the cookie (lowercase).
    key_header: str | None = None
    # spec.assignment: minimal: the slot table the pick reads (core/assignment.py); None: the hash pick (docs/spec.md
    # §2).
    table: SlotTable | None = None
    # sticky.mode: persistent (core/persistent.py): sessions keep the backend their sealed cookie names.
    persistent: bool = False
    # The first generation number that carried this split as it is (status.generation), as the publish message gives
    # it; 0: unknown (the generation's number stands in). Not content: the same form carried on by later
    # generations is the same split, and its Envoy resources (the fallback routes disclose this number) are reused.
    first_generation: int = field(default=0, compare=False)
    weights: Weights = field(init=False)
    # Failover (docs/spec.md §6): the eligible backends' own weights and order, and their indexes in `backends`.
    # None when every backend is eligible (nothing to fail over) or when no eligible backend carries weight.
    failover: tuple[Weights, tuple[int, ...]] | None = field(init=False)
    # Per backend, the ring of its ready endpoints when the split pins pods (docs/spec.md §5), else None. Built here,
    # once per generation, so every replica holding the generation pins the same pod for the same key.
    rings: tuple[Ring | None, ...] = field(init=False, repr=False, compare=False)
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        # Computed once: the publisher's resource cache looks splits up by value on every publish, and hashing a
        # split walks all of it (backends, endpoints, matches, the slot table).
        h = self._hash
        if h is None:
            h = hash(tuple(getattr(self, f.name) for f in fields(self) if f.compare))
            object.__setattr__(self, "_hash", h)
        return h

    def __post_init__(self) -> None:
        if not 1 <= self.endpoint_points <= MAX_POINTS:
            raise SpecError([f"endpoint points must be 1..{MAX_POINTS}, got {self.endpoint_points}"])
        # No hosts: a route rule's split, which `Generation` accepts only when its route table refers to it.
        problems = name_problems(self.namespace, self.name) + host_problems(self.hosts, required=False)
        if self.key_header is not None:
            problems += [f"key_header: {q.removeprefix('name: ')}" for q in key_header_problems(self.key_header)]
        if self.persistent and self.cookie is None:
            problems.append("persistent: sticky.mode persistent needs sticky.cookie (the cookie carries the backend)")
        mode = StickyMode.PERSISTENT if self.persistent else StickyMode.REHASH
        problems += drain_mode_problems([b.drain for b in self.backends], mode)
        if len(self.matches) > MAX_MATCHES:
            problems.append(f"matches: {len(self.matches)} matches, at most {MAX_MATCHES} are allowed")
        for i, m in enumerate(self.matches):
            if not 0 <= m.backend_index < len(self.backends):
                problems.append(f"matches[{i}].backend: no backend {m.backend_index}")
        if problems:
            raise SpecError(problems)
        object.__setattr__(self, "weights", Weights.of((b.name, b.weight) for b in self.backends))
        if self.table is not None:
            table_problems = self.table.check(self.weights)
            if table_problems:
                raise SpecError(table_problems)
        object.__setattr__(self, "failover", _failover_weights(self.backends))
        rings = (
            tuple(endpoint_ring([e.host for e in b.ready_endpoints], self.endpoint_points) for b in self.backends)
            if self.endpoint_affinity
            else (None,) * len(self.backends)
        )
        object.__setattr__(self, "rings", rings)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def sticky(self) -> bool:
        """Whether requests carry a sticky key (a cookie, a key header, or both)."""
        return self.cookie is not None or self.key_header is not None


def _failover_weights(backends: Sequence[CompiledBackend]) -> tuple[Weights, tuple[int, ...]] | None:
    if all(b.eligible or b.weight == 0 for b in backends):
        return None
    idx = tuple(i for i, b in enumerate(backends) if b.eligible and b.weight > 0)
    if not idx:
        return None
    return Weights.of((backends[i].name, backends[i].weight) for i in idx), idx


def compile_split(
    spec: SplitSpec,
    endpoints: Mapping[str, Sequence[Endpoint]] | None = None,
    observed_generation: int = 0,
    previous_table: SlotTable | None = None,
) -> CompiledSplit:
    """Compile a parsed spec. `endpoints` maps backend name → its endpoints with readiness; a backend missing from it
    uses the spec's static endpoints (local mode), which count as ready. `previous_table`: the slot table the split
    had before (spec.assignment: minimal), which the new weights advance; None builds one from the weights alone."""
    endpoints = endpoints or {}
    index = {b.name: i for i, b in enumerate(spec.backends)}
    backends = tuple(
        CompiledBackend(
            name=b.name,
            weight=b.weight,
            cluster=cluster_name(spec.namespace, spec.name, b.name),
            service=b.service,
            port=b.port,
            endpoints=tuple(endpoints[b.name]) if b.name in endpoints else b.endpoints,
            drain=b.drain,
        )
        for b in spec.backends
    )
    matches = tuple(
        CompiledMatch(
            kind=m.kind,
            name=m.name,
            exact=m.value if m.type is MatchType.EXACT else None,
            pattern=compile_pattern(m.value) if m.type is MatchType.REGULAR_EXPRESSION else None,
            backend_index=index[m.backend],
        )
        for m in spec.matches
    )
    return CompiledSplit(
        namespace=spec.namespace,
        name=spec.name,
        hosts=spec.hosts,
        backends=backends,
        cookie=spec.cookie,
        endpoint_affinity=spec.endpoint_affinity,
        matches=matches,
        debug_headers=spec.debug_headers,
        endpoint_points=spec.endpoint_points,
        observed_generation=observed_generation,
        key_header=spec.key_header,
        table=advance(previous_table, Weights.of((b.name, b.weight) for b in spec.backends))
        if spec.assignment is AssignmentMode.MINIMAL
        else None,
        persistent=spec.sticky_mode is StickyMode.PERSISTENT,
    )


@dataclass(frozen=True, slots=True)
class Rejection:
    split: str
    reason: Reason
    message: str


@dataclass(frozen=True, slots=True)
class GenerationContent:
    """What a generation carries, before it has a number: compilation's result.

    The operator compiles content on every pass and takes a number only when the content differs from what it
    published last (equal content, nothing to publish), then stamps it once: `stamp(number)` is the `Generation`
    that is validated, published and held, so what was checked is exactly what goes out.

    `routes`: a Gateway's route table (`gateway_translate.gateway_content`), whose rules' splits are in `splits`
    without hosts; None for the shared gateway, which serves TrafficSplits by host only.
    """

    splits: tuple[CompiledSplit, ...] = ()
    routes: GatewayRoutes | None = None

    def stamp(self, number: int) -> Generation:
        """This content as generation `number`; raises SpecError when it is not a valid generation."""
        return Generation(number, self.splits, self.routes)


@dataclass(frozen=True)
class Generation:
    """One versioned, whole set of compiled splits. Held whole or not at all; numbers only grow.

    Checks itself (number, hosts served once, clusters used once, a split without hosts only as a rule of the route
    table, each rule's split the one in `splits`), so the operator's stamping and the dataplane's receiver refuse the
    same generations."""

    number: int
    splits: tuple[CompiledSplit, ...]
    # One Gateway's route table (HTTPRoutes), or None: a generation of TrafficSplits only.
    routes: GatewayRoutes | None = None
    by_host: Mapping[str, CompiledSplit] = field(init=False, repr=False, compare=False)
    _has_wildcards: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, CompiledSplit] = {}
        clusters: dict[str, str] = {}
        problems: list[str] = []
        rule_splits = (
            {a.key: a.split for a in self.routes.actions if a.split is not None} if self.routes is not None else {}
        )
        keys: set[str] = set()
        for i, s in enumerate(self.splits):
            if not s.hosts and rule_splits.get(s.key) != s:
                problems.append(
                    f"splits[{i}].hosts: at least one host is required (a split without hosts is a rule of the "
                    "generation's route table, and none has this split)"
                )
            if s.key in keys:
                problems.append(f"splits[{i}]: split {s.key} is listed twice")
            keys.add(s.key)
            for h in s.hosts:
                if h in index:
                    problems.append(f"host {h!r} is served by both {index[h].key} and {s.key}")
                index[h] = s
            for b in s.backends:
                if b.cluster in clusters:
                    problems.append(f"splits[{i}]: cluster {b.cluster!r} is also used by {clusters[b.cluster]}")
                clusters[b.cluster] = s.key
            if not 0 <= s.first_generation <= self.number:
                problems.append(f"splits[{i}].first_generation: {s.first_generation} is not in 0..{self.number}")
        problems += [f"routes: rule {k}'s split is not among the splits" for k in rule_splits if k not in keys]
        if not 1 <= self.number <= MAX_GENERATION:
            problems.append(f"generation number must be 1..{MAX_GENERATION} (2^53 - 1), got {self.number}")
        if len(self.splits) > MAX_SPLITS:
            problems.append(f"splits: {len(self.splits)} splits, at most {MAX_SPLITS} are allowed")
        if problems:
            raise SpecError(problems)
        object.__setattr__(self, "by_host", MappingProxyType(index))
        object.__setattr__(self, "_has_wildcards", any(h.startswith("*.") for h in index))

    @property
    def content(self) -> GenerationContent:
        return GenerationContent(self.splits, self.routes)

    def split_for(self, authority: str) -> CompiledSplit | None:
        """The split serving `authority`: an exact host first, else the longest `*.suffix` host, as Envoy's virtual
        host matching does (so a request Envoy routed to a split's virtual host finds that split here)."""
        host = normalize_host(authority)
        split = self.by_host.get(host)
        if split is not None or not self._has_wildcards:
            return split
        # From the second character: as in Envoy, `*.suffix` needs at least one character before `.suffix`.
        dot = host.find(".", 1)
        while dot != -1:
            split = self.by_host.get("*" + host[dot:])
            if split is not None:
                return split
            dot = host.find(".", dot + 1)
        return None

    def clusters(self) -> dict[str, CompiledBackend]:
        return {b.cluster: b for s in self.splits for b in s.backends}


def assemble(splits: Iterable[CompiledSplit]) -> tuple[GenerationContent, tuple[Rejection, ...]]:
    """A generation's content, dropping any split that claims a host an earlier split (in the given order) holds.

    Callers order splits oldest first, so the split that held a host keeps it and the newcomer is rejected, as
    Gateway API resolves listener conflicts.
    """
    kept: list[CompiledSplit] = []
    owner: dict[str, str] = {}
    rejected: list[Rejection] = []
    for s in splits:
        clash = [h for h in s.hosts if h in owner]
        if clash:
            rejected.append(
                Rejection(s.key, Reason.HOST_CONFLICT, f"host {clash[0]!r} is already served by {owner[clash[0]]}")
            )
            continue
        for h in s.hosts:
            owner[h] = s.key
        kept.append(s)
    return GenerationContent(tuple(kept)), tuple(rejected)


def assemble_generation(number: int, splits: Iterable[CompiledSplit]) -> tuple[Generation, tuple[Rejection, ...]]:
    """`assemble`, stamped with `number` (tests and tools that build a numbered generation in one step)."""
    content, rejected = assemble(splits)
    return content.stamp(number), rejected
