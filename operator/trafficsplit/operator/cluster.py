"""Pure projections of the Kubernetes objects the operator reads, and backend resolution over them.

Why: the watch handlers store only these small frozen values (not whole bodies), so the store stays small in a big
cluster, and everything downstream (resolution, compile, status) is testable with plain values and no API server.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trafficsplit.core.compiled import Endpoint
from trafficsplit.core.errors import SpecError
from trafficsplit.core.spec import SplitSpec, parse_split

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


@dataclass(frozen=True, slots=True)
class ServicePort:
    name: str
    port: int
    target_port: int | str | None
    protocol: str = "TCP"


@dataclass(frozen=True, slots=True)
class ServiceInfo:
    namespace: str
    name: str
    ports: tuple[ServicePort, ...]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class SliceEndpoint:
    address: str
    ready: bool
    terminating: bool
    target: str  # targetRef name (a pod name), or the address when absent


@dataclass(frozen=True, slots=True)
class SliceInfo:
    namespace: str
    name: str
    service: str
    ports: tuple[tuple[str, int], ...]  # (port name, port number)
    endpoints: tuple[SliceEndpoint, ...]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
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


def _meta(body: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = body.get("metadata") or {}
    return meta if isinstance(meta, Mapping) else {}


def referenced_services(splits: Iterable[SplitObject]) -> set[tuple[str, str]]:
    """(namespace, Service) for every backend a valid split names. An invalid split's Services cannot change its
    outcome (it is not accepted); fixing it is a TrafficSplit event, which runs its own pass."""
    return {(s.namespace, b.service) for s in splits if s.parsed is not None for b in s.parsed.backends}


def split_from_body(body: Mapping[str, Any]) -> SplitObject:
    meta = _meta(body)
    return SplitObject(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        generation=int(meta.get("generation") or 0),
        created=str(meta.get("creationTimestamp") or ""),
        spec=dict(body.get("spec") or {}),
        status=dict(body.get("status") or {}),
    )


def service_from_body(body: Mapping[str, Any]) -> ServiceInfo:
    meta = _meta(body)
    ports = []
    for p in (body.get("spec") or {}).get("ports") or []:
        target = p.get("targetPort")
        ports.append(
            ServicePort(
                name=str(p.get("name") or ""),
                port=int(p.get("port") or 0),
                target_port=target if isinstance(target, int | str) else None,
                protocol=str(p.get("protocol") or "TCP"),
            )
        )
    return ServiceInfo(str(meta.get("namespace") or ""), str(meta.get("name") or ""), tuple(ports))


def slice_from_body(body: Mapping[str, Any]) -> SliceInfo | None:
    """None for a slice we cannot route to (FQDN address type, or no owning Service label)."""
    meta = _meta(body)
    labels = meta.get("labels") or {}
    service = labels.get(SERVICE_NAME_LABEL)
    if not service or body.get("addressType", "IPv4") not in ("IPv4", "IPv6"):
        return None
    ports = tuple(
        (str(p.get("name") or ""), int(p["port"])) for p in body.get("ports") or [] if p.get("port") is not None
    )
    eps: list[SliceEndpoint] = []
    for ep in body.get("endpoints") or []:
        cond = ep.get("conditions") or {}
        # The API says a nil `ready` means unknown, which consumers should treat as ready.
        ready = cond.get("ready") is not False
        terminating = cond.get("terminating") is True
        ref = ep.get("targetRef") or {}
        for addr in ep.get("addresses") or []:
            eps.append(SliceEndpoint(str(addr), ready and not terminating, terminating, str(ref.get("name") or addr)))
    return SliceInfo(str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(service), ports, tuple(eps))


@dataclass(frozen=True, slots=True)
class Resolution:
    """A split's backends resolved to endpoints, or the references that could not be resolved."""

    endpoints: Mapping[str, tuple[Endpoint, ...]]
    missing: tuple[tuple[str, str], ...]  # (reason, message): BackendNotFound / PortNotFound


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
    missing: list[tuple[str, str]] = []
    for b in spec.backends:
        svc = services.get((spec.namespace, b.service))
        if svc is None:
            missing.append(("BackendNotFound", f"backend {b.name}: Service {spec.namespace}/{b.service} not found"))
            continue
        port = next((p for p in svc.ports if p.port == b.port), None)
        if port is None:
            have = ",".join(str(p.port) for p in svc.ports) or "none"
            missing.append(
                ("PortNotFound", f"backend {b.name}: Service {svc.key} has no port {b.port} (ports: {have})")
            )
            continue
        out[b.name] = endpoints_for(svc, port, slices.get((spec.namespace, b.service), []))
    return Resolution(out, tuple(missing))


@dataclass(frozen=True, slots=True)
class Replica:
    """A dataplane replica's publish address; `name` is the pod (or the address in local mode)."""

    name: str
    address: str  # host:port for grpc


def replicas_from_slices(slices: Iterable[SliceInfo], port_name: str) -> tuple[Replica, ...]:
    """The gateway's replicas, found through its Service's EndpointSlices: every non-terminating endpoint, ready or
    not — a replica that has never held a generation is not ready, and it is exactly the one that needs one."""
    out: dict[str, Replica] = {}
    for s in slices:
        number = next((n for name, n in s.ports if name == port_name), None)
        if number is None:
            continue
        for ep in s.endpoints:
            if ep.terminating:
                continue
            host = f"[{ep.address}]" if ":" in ep.address else ep.address
            addr = f"{host}:{number}"
            out[addr] = Replica(ep.target, addr)
    return tuple(sorted(out.values(), key=lambda r: r.address))


def parse_static_replicas(items: Iterable[str]) -> tuple[Replica, ...]:
    """`host:port` or `name=host:port` entries (local mode and tests)."""
    out: list[Replica] = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        name, sep, addr = item.partition("=")
        if not sep:
            name, addr = item, item
        host, colon, port = addr.rpartition(":")
        if not colon or not host or not port.isdigit():
            raise ValueError(f"dataplane {item!r}: expected HOST:PORT or NAME=HOST:PORT")
        out.append(Replica(name, addr))
    return tuple(out)
