"""The cluster as the core sees it (small frozen projections of Services, EndpointSlices and TrafficSplits) and
reference resolution over it: which endpoints serve each backend, or which references are missing. Pure.

Why: the operator's watch handlers store only these values (not whole bodies), so the store stays small in a big
cluster, and everything downstream (resolution, reconcile, status) is testable with plain values and no API server.
Turning API bodies into them is the operator's (Kubernetes I/O: `trafficsplit.operator.cluster`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.rules import Endpoint
from trafficsplit.core.model.splitspec import SplitSpec
from trafficsplit.core.model.vocabulary import Reason

# The standard appProtocol (KEP-3726) of a port that speaks HTTP/2 without TLS, with prior knowledge.
H2C_APP_PROTOCOL = "kubernetes.io/h2c"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServicePort:
    name: str
    port: int
    target_port: int | str | None
    protocol: str = "TCP"
    app_protocol: str = ""  # spec.ports[].appProtocol: kubernetes.io/h2c makes Envoy speak HTTP/2 to it (H2C)

    @property
    def h2c(self) -> bool:
        return self.app_protocol == H2C_APP_PROTOCOL


@dataclass(frozen=True, slots=True)
class ServiceInfo:
    namespace: str
    name: str
    ports: tuple[ServicePort, ...]

    def h2c(self, port: int) -> bool:
        """Whether Service port `port` is HTTP/2 over cleartext (appProtocol kubernetes.io/h2c)."""
        return any(p.port == port and p.h2c for p in self.ports)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class SliceEndpoint:
    address: str
    ready: bool  # ready and not terminating: a backend endpoint that takes new requests
    target: str  # targetRef name (a pod name), or the address when absent


@dataclass(frozen=True, slots=True, kw_only=True)
class SliceInfo:
    namespace: str
    name: str
    service: str
    ports: tuple[tuple[str, int], ...]  # (port name, port number)
    endpoints: tuple[SliceEndpoint, ...]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class SplitObject:
    """A TrafficSplit as stored: identity, spec, and what the operator needs from its current status."""

    namespace: str
    name: str
    uid: str
    generation: int
    created: str  # creationTimestamp: older splits keep a contested host
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    # The spec as the parser reads it, once per stored version (not once per pass): None with the problems when
    # invalid. Nothing else reads `spec`'s fields.
    parsed: SplitSpec | None = field(init=False, repr=False, compare=False)
    problems: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parsed: SplitSpec | None = None
        problems: tuple[str, ...] = ()
        try:
            parsed = parse_split(self.namespace, self.name, self.spec)
        except SpecError as exc:
            problems = exc.problems
        object.__setattr__(self, "parsed", parsed)
        object.__setattr__(self, "problems", problems)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def referenced_services(splits: Iterable[SplitObject]) -> set[tuple[str, str]]:
    """(namespace, Service) for every backend a valid split names. An invalid split's Services cannot change its
    outcome (it is not accepted); fixing it is a TrafficSplit event, which runs its own pass."""
    return {(s.namespace, b.service) for s in splits if s.parsed is not None for b in s.parsed.backends}


@dataclass(frozen=True, slots=True)
class MissingRef:
    """A backend reference that does not resolve: why (BackendNotFound / PortNotFound) and the message naming it."""

    reason: Reason
    message: str


@dataclass(frozen=True, slots=True)
class Resolution:
    """A split's backends resolved to endpoints, or the references that could not be resolved."""

    endpoints: Mapping[str, tuple[Endpoint, ...]]
    missing: tuple[MissingRef, ...]


def slices_by_service(slices: Iterable[SliceInfo]) -> dict[tuple[str, str], list[SliceInfo]]:
    out: dict[tuple[str, str], list[SliceInfo]] = {}
    for s in slices:
        out.setdefault((s.namespace, s.service), []).append(s)
    return out


def endpoints_for(service: ServiceInfo, port: ServicePort, slices: Iterable[SliceInfo]) -> tuple[Endpoint, ...]:
    """The endpoints serving one Service port: the slice port with the Service port's name gives the number (that is
    how the EndpointSlice controller names them); a slice without that name falls back to a numeric targetPort."""
    seen: dict[tuple[str, int], Endpoint] = {}
    for s in sorted(slices, key=lambda x: x.name):
        number = next((n for name, n in s.ports if name == port.name), None)
        if number is None:
            if isinstance(port.target_port, int) and port.target_port > 0 and not s.ports:
                number = port.target_port
            else:
                continue
        for ep in s.endpoints:
            k = (ep.address, number)
            prev = seen.get(k)
            if prev is None or (ep.ready and not prev.ready):
                seen[k] = Endpoint(ep.address, number, ep.ready)
    return tuple(sorted(seen.values(), key=lambda e: (e.address, e.port)))


def resolve(
    spec: SplitSpec,
    services: Mapping[tuple[str, str], ServiceInfo],
    slices: Mapping[tuple[str, str], list[SliceInfo]],
) -> Resolution:
    """Every backend's Service and port, and the endpoints behind them; missing references named one by one."""
    out: dict[str, tuple[Endpoint, ...]] = {}
    missing: list[MissingRef] = []
    for b in spec.backends:
        svc = services.get((spec.namespace, b.service))
        if svc is None:
            missing.append(
                MissingRef(
                    Reason.BACKEND_NOT_FOUND, f"backend {b.name}: Service {spec.namespace}/{b.service} not found"
                )
            )
            continue
        port = next((p for p in svc.ports if p.port == b.port), None)
        if port is None:
            have = ",".join(str(p.port) for p in svc.ports) or "none"
            missing.append(
                MissingRef(
                    Reason.PORT_NOT_FOUND, f"backend {b.name}: Service {svc.key} has no port {b.port} (ports: {have})"
                )
            )
            continue
        out[b.name] = endpoints_for(svc, port, slices.get((spec.namespace, b.service), []))
    return Resolution(endpoints=out, missing=tuple(missing))
