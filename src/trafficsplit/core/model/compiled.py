"""Compiled splits: the immutable values the dataplane decides with, and the one place a split's rules are checked.

Built once, through these constructors and `splitspec.compiled_backends` (by `compiler.compile_split` from a parsed
spec, by the publish receiver from a proto), and then only read. The values check themselves; their problems name fields
as a TrafficSplit's spec does (`backends[1].port`, `sticky.header.name`), and each caller puts its own path in front
(`SpecError.within`): `spec` for the parser, `splits[0]` for the receiver, `rules[2]` for an HTTPRoute rule. Everything
a per-request decision needs is precomputed here: the running sums, the eligible-only failover weights, compiled match
patterns, the rings. A generation (`generation.Generation`) carries them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum

from trafficsplit.core.model.assignment import SlotTable
from trafficsplit.core.model.cookie import CookieSettings
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.limits import MAX_ENDPOINTS, MAX_MATCHES
from trafficsplit.core.model.persistent import StickyMode, drain_mode_problems, drain_problems
from trafficsplit.core.model.regex import Pattern
from trafficsplit.core.model.ring import DEFAULT_POINTS, MAX_POINTS, Ring, endpoint_ring
from trafficsplit.core.model.rules import Endpoint as Endpoint  # re-exported: where compiled values are, callers look
from trafficsplit.core.model.rules import (
    backend_problems,
    cluster_problems,
    compile_pattern,
    host_problems,
    key_header_problems,
    match_name_problems,
    match_value_problems,
    name_problems,
)
from trafficsplit.core.model.upstream_tls import UpstreamTls
from trafficsplit.core.model.weights import Weights


# Rules a caller also asks before it has the values: the receiver bounds a message's lists before building anything
# from them, a TrafficSplitPolicy checks its endpointPoints alone, and a TrafficSplit's parser asks for the cookie.
def endpoint_count_problems(count: int) -> list[str]:
    if count > MAX_ENDPOINTS:
        return [f"endpoints: {count} endpoints, at most {MAX_ENDPOINTS} are allowed"]
    return []


def match_count_problems(count: int) -> list[str]:
    if count > MAX_MATCHES:
        return [f"matches: {count} matches, at most {MAX_MATCHES} are allowed"]
    return []


def endpoint_points_problems(points: int) -> list[str]:
    if not 1 <= points <= MAX_POINTS:
        return [f"sticky.endpointPoints: must be 1..{MAX_POINTS}, got {points}"]
    return []


def persistent_cookie_problems(mode: StickyMode, has_cookie: bool, has_key_header: bool = False) -> list[str]:
    """What carries a persistent session's seal: the cookie, or, without one, the key header (the gateway issues the
    sealed session in a response header of that name: an HTTPRoute's `type: Header` session). A TrafficSplit offers
    only the cookie (its parser asks without the header), so the message names the cookie."""
    if mode is StickyMode.PERSISTENT and not (has_cookie or has_key_header):
        return ["sticky.mode: persistent needs sticky.cookie (the cookie carries the session's backend)"]
    return []


class MatchKind(StrEnum):
    HEADER = "header"
    COOKIE = "cookie"


class MatchType(StrEnum):
    EXACT = "Exact"
    REGULAR_EXPRESSION = "RegularExpression"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompiledBackend:
    name: str
    weight: int
    cluster: str
    service: str
    port: int
    endpoints: tuple[Endpoint, ...] = ()
    drain: bool = False  # sticky.mode persistent, weight 0: its sessions stay while it has ready endpoints
    h2c: bool = False  # Envoy speaks HTTP/2 over cleartext to it (its Service port's appProtocol kubernetes.io/h2c)
    tls: UpstreamTls | None = None  # Envoy speaks TLS to it (core/model/upstream_tls.py: a BackendTLSPolicy's)
    # docs/spec.md §6: a backend with no ready endpoint is not eligible. Derived once here, not per request: decide()
    # reads it for every failover check and every matching rule.
    eligible: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        problems = (
            backend_problems(self.name, self.port, self.service)
            + cluster_problems(self.cluster)
            + drain_problems(self.weight, self.drain)
            + endpoint_count_problems(len(self.endpoints))
        )
        if problems:
            raise SpecError(problems)
        object.__setattr__(self, "eligible", any(e.ready for e in self.endpoints))

    @property
    def ready_endpoints(self) -> tuple[Endpoint, ...]:
        return tuple(e for e in self.endpoints if e.ready)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompiledMatch:
    """A match rule; `name` and `value` are the condition's (`spec.matches[i].header.name`), header names lowercase."""

    kind: MatchKind
    name: str
    type: MatchType
    value: str
    backend: str  # the backend's name; `CompiledSplit.match_backends` holds its index
    # RE2 (core/model/regex.py): linear time, bounded program; None for an exact match. Derived from `value`.
    pattern: Pattern | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        problems = match_name_problems(self.kind.value, self.name) + match_value_problems(self.value)
        pattern = None
        if self.type is MatchType.REGULAR_EXPRESSION and not problems:
            try:
                pattern = compile_pattern(self.value)
            except SpecError as exc:
                problems += exc.problems
        if problems:
            raise SpecError(problems)
        object.__setattr__(self, "pattern", pattern)

    def matches(self, value: str | None) -> bool:
        if value is None:
            return False
        if self.pattern is not None:
            return self.pattern.fullmatch(value)
        return value == self.value


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
    # spec.assignment: minimal: the slot table the pick reads (core/model/assignment.py); None: the hash pick
    # (docs/spec.md §2).
    table: SlotTable | None = None
    # sticky.mode: persistent (core/model/persistent.py): sessions keep the backend their sealed cookie names.
    persistent: bool = False
    # The first generation number that carried this split as it is (status.generation), as the publish message gives
    # it; 0: unknown (the generation's number stands in). Not content: the same form carried on by later
    # generations is the same split, and its Envoy resources (the fallback routes disclose this number) are reused.
    first_generation: int = field(default=0, compare=False)
    weights: Weights = field(init=False)
    # Per match, the index of its backend in `backends` (what a decision reads).
    match_backends: tuple[int, ...] = field(init=False, repr=False, compare=False)
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
        # No hosts: a route rule's split, which `Generation` accepts only when its route table refers to it.
        problems = name_problems(self.namespace, self.name) + host_problems(self.hosts, required=False)
        if self.key_header is not None:
            issued = self.persistent and self.cookie is None  # the header carries the session: sent in responses
            problems += SpecError(key_header_problems(self.key_header, issued=issued)).within("sticky.header").problems
        mode = StickyMode.PERSISTENT if self.persistent else StickyMode.REHASH
        problems += persistent_cookie_problems(mode, self.cookie is not None, self.key_header is not None)
        problems += endpoint_points_problems(self.endpoint_points)
        problems += drain_mode_problems([b.drain for b in self.backends], mode)
        problems += match_count_problems(len(self.matches))
        index = {b.name: i for i, b in enumerate(self.backends)}
        problems += [
            f"matches[{i}].backend: {m.backend!r} is not one of the backends"
            for i, m in enumerate(self.matches)
            if m.backend not in index
        ]
        if problems:
            raise SpecError(problems)
        object.__setattr__(self, "match_backends", tuple(index[m.backend] for m in self.matches))
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
