"""A split's spec: what a TrafficSplit says, and what an HTTPRoute rule translates to, as plain values.

Part of the core's model, with no YAML in it: `spec.parse_split` builds these from a TrafficSplit's `spec` (and owns
the YAML's shape: types, required fields, defaults), `gatewayapi.actions` from an HTTPRoute rule, and
`compiler.compile_split` compiles them. They carry what was said and check nothing themselves: a split's rules are the
compiled values' (`trafficsplit.core.model.compiled`), which every path builds, so every path refuses the same input
in the same words. Kept apart from the parser so that the model and the per-request path never import it
(.importlinter, "the core's plan").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trafficsplit.core.model.assignment import AssignmentMode
from trafficsplit.core.model.compiled import CompiledBackend, CompiledMatch
from trafficsplit.core.model.cookie import CookieSettings
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.persistent import StickyMode
from trafficsplit.core.model.ring import DEFAULT_POINTS
from trafficsplit.core.model.rules import Endpoint
from trafficsplit.core.model.upstream_tls import UpstreamTls
from trafficsplit.core.model.weights import Weights


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendSpec:
    name: str
    service: str  # the Service, defaulting to the backend's name (the parser applies the default)
    port: int
    weight: int
    endpoints: tuple[Endpoint, ...] = ()  # local mode only; in Kubernetes, endpoints come from EndpointSlices
    drain: bool = False  # sticky.mode persistent: at weight 0, keep its sessions until they go idle
    h2c: bool = False  # its Service port's appProtocol is kubernetes.io/h2c (a Gateway API backendRef's)
    tls: UpstreamTls | None = None  # TLS to its endpoints: a BackendTLSPolicy on its Service port (a backendRef's)


@dataclass(frozen=True, slots=True, kw_only=True)
class SplitSpec:
    namespace: str
    name: str
    hosts: tuple[str, ...]
    service: str | None
    backends: tuple[BackendSpec, ...]
    cookie: CookieSettings | None
    endpoint_affinity: bool
    matches: tuple[CompiledMatch, ...]  # a match checks itself where it is read (the parser, the receiver)
    debug_headers: bool
    endpoint_points: int = DEFAULT_POINTS
    key_header: str | None = None  # sticky.header.name: the request header a sticky key is read from first
    assignment: AssignmentMode = AssignmentMode.HASH  # spec.assignment: how keys map to backends
    sticky_mode: StickyMode = StickyMode.REHASH  # sticky.mode: whether a session keeps its backend across changes

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def weights_text(self) -> str:
        return ",".join(f"{b.name}={b.weight}" for b in self.backends)


def compiled_backends(backends: Sequence[BackendSpec], clusters: Sequence[str]) -> tuple[CompiledBackend, ...]:
    """What a spec says of its backends, compiled (`backends[i]` with its Envoy cluster `clusters[i]`): the one way
    the compiler and the publish receiver build a split's backends. Raises SpecError naming every backend's problems
    (under `backends[i]`) and the list's (the weights': bounds, duplicates, total), the split's own being
    `CompiledSplit`'s to report once these are sound."""
    problems: list[str] = []
    built: list[CompiledBackend] = []
    for i, (b, cluster) in enumerate(zip(backends, clusters, strict=True)):
        try:
            built.append(
                CompiledBackend(
                    name=b.name,
                    weight=b.weight,
                    cluster=cluster,
                    service=b.service,
                    port=b.port,
                    endpoints=b.endpoints,
                    drain=b.drain,
                    h2c=b.h2c,
                    tls=b.tls,
                )
            )
        except SpecError as exc:
            problems += exc.within(f"backends[{i}]").problems
    try:
        Weights.of((b.name, b.weight) for b in backends)
    except SpecError as exc:
        problems += exc.problems
    if problems:
        raise SpecError(list(dict.fromkeys(problems)))  # a bad name is both its backend's and the weights' problem
    return tuple(built)
