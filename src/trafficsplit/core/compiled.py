"""Compiled splits and generations: the immutable values the dataplane decides with.

A generation is built once (compile, check) and then only read, so the processor can swap it atomically and a
request in flight keeps the one it started with. Everything a per-request decision needs is precomputed here: the
running sums, the eligible-only failover weights, compiled match patterns, the host index.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from trafficsplit.core.cookie import CookieSettings
from trafficsplit.core.errors import SpecError
from trafficsplit.core.headervalue import is_header_value
from trafficsplit.core.host import is_dns_label, is_dns_subdomain, is_host, normalize_host
from trafficsplit.core.limits import (
    MAX_ADDRESS,
    MAX_BACKEND_NAME,
    MAX_CLUSTER,
    MAX_ENDPOINTS,
    MAX_GENERATION,
    MAX_HOSTS,
    MAX_MATCH_NAME,
    MAX_MATCH_VALUE,
    MAX_MATCHES,
    MAX_NAME,
    MAX_NAMESPACE,
    MAX_SERVICE,
    MAX_SPLITS,
)
from trafficsplit.core.regex import Pattern
from trafficsplit.core.spec import MatchKind, MatchType, SplitSpec
from trafficsplit.core.weights import Weights


@dataclass(frozen=True, slots=True)
class Endpoint:
    address: str
    port: int
    ready: bool = True


@dataclass(frozen=True, slots=True)
class CompiledBackend:
    name: str
    weight: int
    cluster: str
    service: str
    port: int
    endpoints: tuple[Endpoint, ...] = ()
    # SPEC §6: a backend with no ready endpoint is not eligible. Derived once here, not per request: decide() reads it
    # for every failover check and every matching rule.
    eligible: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "eligible", any(e.ready for e in self.endpoints))

    @property
    def ready_endpoints(self) -> tuple[Endpoint, ...]:
        return tuple(e for e in self.endpoints if e.ready)


@dataclass(frozen=True, slots=True)
class CompiledMatch:
    kind: MatchKind
    name: str
    exact: str | None
    pattern: Pattern | None  # RE2 (core/regex.py): linear time, bounded program
    backend_index: int

    def matches(self, value: str | None) -> bool:
        if value is None:
            return False
        if self.pattern is not None:
            return self.pattern.fullmatch(value)
        return value == self.exact


def cluster_name(namespace: str, split: str, backend: str) -> str:
    """One Envoy cluster per (split, backend). '/' never occurs in Kubernetes names, so the name is unambiguous."""
    return f"{namespace}/{split}/{backend}"


@dataclass(frozen=True, slots=True)
class CompiledSplit:
    namespace: str
    name: str
    hosts: tuple[str, ...]
    backends: tuple[CompiledBackend, ...]
    cookie: CookieSettings | None = None
    endpoint_affinity: bool = False
    matches: tuple[CompiledMatch, ...] = ()
    debug_headers: bool = False
    weights: Weights = field(init=False)
    # Failover (SPEC §6): the eligible backends' own weights and order, and their indexes in `backends`.
    # None when every backend is eligible (nothing to fail over) or when no eligible backend carries weight.
    failover: tuple[Weights, tuple[int, ...]] | None = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", Weights.of((b.name, b.weight) for b in self.backends))
        problems = split_problems(self)
        if problems:
            raise SpecError(problems)
        object.__setattr__(self, "failover", _failover_weights(self.backends))

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def sticky(self) -> bool:
        return self.cookie is not None


def split_problems(split: CompiledSplit) -> list[str]:
    """What a compiled split may not carry, whoever built it: names and hosts end up in Envoy's configuration and
    clusters, backend names and namespaces in header values (core/headervalue.py), so each is bounded and checked.
    Counts are checked before the items, so an oversized list costs one comparison."""
    p: list[str] = []
    if not is_dns_label(split.namespace, MAX_NAMESPACE):
        p.append(f"namespace: {split.namespace[:MAX_NAMESPACE]!r} must be a DNS label of at most {MAX_NAMESPACE}")
    if not is_dns_subdomain(split.name, MAX_NAME):
        p.append(f"name: {split.name[:MAX_NAME]!r} must be a DNS subdomain of at most {MAX_NAME}")
    if not 1 <= len(split.hosts) <= MAX_HOSTS:
        p.append(f"hosts: {len(split.hosts)} hosts, 1 to {MAX_HOSTS} are allowed")
    else:
        p.extend(f"hosts[{i}]: {h[:64]!r} is not a DNS host name" for i, h in enumerate(split.hosts) if not is_host(h))
    if len(split.matches) > MAX_MATCHES:
        p.append(f"matches: {len(split.matches)} rules, at most {MAX_MATCHES} are allowed")
    else:
        for i, m in enumerate(split.matches):
            if len(m.name) > MAX_MATCH_NAME or not is_header_value(m.name):
                p.append(f"matches[{i}].name: not a valid name of at most {MAX_MATCH_NAME}")
            if m.exact is not None and len(m.exact) > MAX_MATCH_VALUE:
                p.append(f"matches[{i}].value: {len(m.exact)} characters, at most {MAX_MATCH_VALUE} are allowed")
    for i, b in enumerate(split.backends):
        p.extend(f"backends[{i}].{problem}" for problem in backend_problems(b))
    return p


def backend_problems(b: CompiledBackend) -> list[str]:
    p: list[str] = []
    if not is_dns_label(b.name, MAX_BACKEND_NAME):
        p.append(f"name: {b.name[:MAX_BACKEND_NAME]!r} must be a DNS label of at most {MAX_BACKEND_NAME}")
    # The cluster name is the routing header's value: a control byte there would fail every request Envoy routes.
    if len(b.cluster) > MAX_CLUSTER or not is_header_value(b.cluster):
        p.append(f"cluster: {b.cluster[:64]!r} must be printable ASCII of at most {MAX_CLUSTER} characters")
    if not is_dns_label(b.service, MAX_SERVICE):
        p.append(f"service: {b.service[:MAX_SERVICE]!r} must be a DNS label of at most {MAX_SERVICE}")
    if not 1 <= b.port <= 65535:
        p.append(f"port: must be 1..65535, got {b.port}")
    if len(b.endpoints) > MAX_ENDPOINTS:
        p.append(f"endpoints: {len(b.endpoints)} endpoints, at most {MAX_ENDPOINTS} are allowed")
    else:
        p.extend(
            f"endpoints[{k}]: {e.address[:64]!r}:{e.port} is not an address and port"
            for k, e in enumerate(b.endpoints)
            if not e.address or len(e.address) > MAX_ADDRESS or not 1 <= e.port <= 65535
        )
    return p


def _failover_weights(backends: Sequence[CompiledBackend]) -> tuple[Weights, tuple[int, ...]] | None:
    if all(b.eligible or b.weight == 0 for b in backends):
        return None
    idx = tuple(i for i, b in enumerate(backends) if b.eligible and b.weight > 0)
    if not idx:
        return None
    return Weights.of((backends[i].name, backends[i].weight) for i in idx), idx


def compile_split(spec: SplitSpec, endpoints: Mapping[str, Sequence[Endpoint]] | None = None) -> CompiledSplit:
    """Compile a parsed spec. `endpoints` maps backend name → its endpoints with readiness; a backend missing from it
    uses the spec's static endpoints (local mode), which count as ready."""
    endpoints = endpoints or {}
    index = {b.name: i for i, b in enumerate(spec.backends)}
    backends = tuple(
        CompiledBackend(
            name=b.name,
            weight=b.weight,
            cluster=cluster_name(spec.namespace, spec.name, b.name),
            service=b.service,
            port=b.port,
            endpoints=tuple(endpoints[b.name])
            if b.name in endpoints
            else tuple(Endpoint(e.address, e.port) for e in b.endpoints),
        )
        for b in spec.backends
    )
    matches = tuple(
        CompiledMatch(
            kind=m.kind,
            name=m.name,
            exact=m.value if m.type is MatchType.EXACT else None,
            pattern=Pattern(m.value) if m.type is MatchType.REGULAR_EXPRESSION else None,
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
    )


@dataclass(frozen=True, slots=True)
class Rejection:
    split: str
    reason: str
    message: str


@dataclass(frozen=True)
class Generation:
    """One versioned, whole set of compiled splits. Held whole or not at all; numbers only grow."""

    number: int
    splits: tuple[CompiledSplit, ...]
    by_host: Mapping[str, CompiledSplit] = field(init=False, repr=False, compare=False)
    _has_wildcards: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, CompiledSplit] = {}
        problems: list[str] = []
        for s in self.splits:
            for h in s.hosts:
                if h in index:
                    problems.append(f"host {h!r} is served by both {index[h].key} and {s.key}")
                index[h] = s
        if not 1 <= self.number <= MAX_GENERATION:
            problems.append(f"generation number must be 1..{MAX_GENERATION} (2^53 - 1), got {self.number}")
        if len(self.splits) > MAX_SPLITS:
            problems.append(f"splits: {len(self.splits)} splits, at most {MAX_SPLITS} are allowed")
        if problems:
            raise SpecError(problems)
        object.__setattr__(self, "by_host", MappingProxyType(index))
        object.__setattr__(self, "_has_wildcards", any(h.startswith("*.") for h in index))

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


def assemble_generation(number: int, splits: Iterable[CompiledSplit]) -> tuple[Generation, tuple[Rejection, ...]]:
    """Build a generation, dropping any split that claims a host an earlier split (in the given order) holds.

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
                Rejection(s.key, "HostConflict", f"host {clash[0]!r} is already served by {owner[clash[0]]}")
            )
            continue
        for h in s.hosts:
            owner[h] = s.key
        kept.append(s)
    return Generation(number, tuple(kept)), tuple(rejected)
