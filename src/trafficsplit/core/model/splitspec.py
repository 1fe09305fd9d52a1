"""A split's spec as values that check themselves: what a TrafficSplit says, and what an HTTPRoute rule translates to.

Part of the core's model, with no YAML in it: `spec.parse_split` builds these from a TrafficSplit's `spec` (and owns
the YAML's shape: types, required fields, defaults), `gatewayapi.translate` from an HTTPRoute rule, and
`compiler.compile_split` reads them. The rules on each field's value live here and in `trafficsplit.core.model.rules`,
so every path refuses the same input; kept apart from the parser so that the model and the per-request path never import
it (.importlinter, "the core's plan").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from trafficsplit.core.model.assignment import AssignmentMode
from trafficsplit.core.model.cookie import CookieSettings
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.limits import MAX_ENDPOINTS, MAX_MATCHES
from trafficsplit.core.model.persistent import StickyMode, drain_mode_problems, drain_problems
from trafficsplit.core.model.ring import DEFAULT_POINTS, MAX_POINTS
from trafficsplit.core.model.rules import (
    Endpoint,
    backend_problems,
    compile_pattern,
    host_problems,
    key_header_problems,
    match_name_problems,
    match_value_problems,
    name_problems,
)
from trafficsplit.core.model.weights import weight_problems


# The split-level rules both split values check (this one and `compiled.CompiledSplit`, which the publish receiver
# builds), written once so the two say the same; field paths as a TrafficSplit's spec names them.
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


def match_count_problems(count: int) -> list[str]:
    if count > MAX_MATCHES:
        return [f"matches: {count} matches, at most {MAX_MATCHES} are allowed"]
    return []


class MatchKind(StrEnum):
    HEADER = "header"
    COOKIE = "cookie"


class MatchType(StrEnum):
    EXACT = "Exact"
    REGULAR_EXPRESSION = "RegularExpression"


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendSpec:
    name: str
    service: str  # the Service, defaulting to the backend's name (the parser applies the default)
    port: int
    weight: int  # checked with the others by SplitSpec (Weights: bounds, duplicates, total)
    endpoints: tuple[Endpoint, ...] = ()  # local mode only; in Kubernetes, endpoints come from EndpointSlices
    drain: bool = False  # sticky.mode persistent: at weight 0, keep its sessions until they go idle

    def __post_init__(self) -> None:
        problems = backend_problems(self.name, self.port, self.service) + drain_problems(self.weight, self.drain)
        if len(self.endpoints) > MAX_ENDPOINTS:
            problems.append(f"endpoints: {len(self.endpoints)} endpoints, at most {MAX_ENDPOINTS} are allowed")
        if problems:
            raise SpecError(problems)


@dataclass(frozen=True, slots=True, kw_only=True)
class MatchSpec:
    """A match rule; `name` and `value` are the condition's (`spec.matches[i].header.name`), header names lowercase."""

    kind: MatchKind
    name: str
    type: MatchType
    value: str
    backend: str

    def __post_init__(self) -> None:
        problems = match_name_problems(self.kind.value, self.name) + match_value_problems(self.value)
        if self.type is MatchType.REGULAR_EXPRESSION and not problems:
            try:
                compile_pattern(self.value)
            except SpecError as exc:
                problems += exc.problems
        if problems:
            raise SpecError(problems)


@dataclass(frozen=True, slots=True, kw_only=True)
class SplitSpec:
    namespace: str
    name: str
    hosts: tuple[str, ...]
    service: str | None
    backends: tuple[BackendSpec, ...]
    cookie: CookieSettings | None
    endpoint_affinity: bool
    matches: tuple[MatchSpec, ...]
    debug_headers: bool
    endpoint_points: int = DEFAULT_POINTS
    key_header: str | None = None  # sticky.header.name: the request header a sticky key is read from first
    assignment: AssignmentMode = AssignmentMode.HASH  # spec.assignment: how keys map to backends
    sticky_mode: StickyMode = StickyMode.REHASH  # sticky.mode: whether a session keeps its backend across changes

    def __post_init__(self) -> None:
        # No hosts: a route rule's split (parse_split requires hosts of a TrafficSplit; `Generation` of a split).
        problems = name_problems(self.namespace, self.name) + host_problems(self.hosts, required=False)
        if self.key_header is not None:
            issued = self.sticky_mode is StickyMode.PERSISTENT and self.cookie is None
            problems += [f"sticky.header.{q}" for q in key_header_problems(self.key_header, issued=issued)]
        problems += persistent_cookie_problems(self.sticky_mode, self.cookie is not None, self.key_header is not None)
        problems += endpoint_points_problems(self.endpoint_points)
        problems += match_count_problems(len(self.matches))
        problems += weight_problems([b.name for b in self.backends], [b.weight for b in self.backends])
        problems += drain_mode_problems([b.drain for b in self.backends], self.sticky_mode)
        names = {b.name for b in self.backends}
        for i, m in enumerate(self.matches):
            if m.backend not in names:
                problems.append(f"matches[{i}].backend: {m.backend!r} is not a backend")
        if problems:
            raise SpecError(problems)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def weights_text(self) -> str:
        return ",".join(f"{b.name}={b.weight}" for b in self.backends)
