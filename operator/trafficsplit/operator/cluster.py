"""Kubernetes bodies → the core's projections (`trafficsplit.core.control.resolve`), and the dataplane replicas the
fleet publishes to, found through the gateway's EndpointSlices or given on the command line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trafficsplit.core.control.resolve import ServiceInfo, ServicePort, SliceEndpoint, SliceInfo, SplitObject

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


def _meta(body: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = body.get("metadata") or {}
    return meta if isinstance(meta, Mapping) else {}


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
                app_protocol=str(p.get("appProtocol") or "")[:256],
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
            eps.append(SliceEndpoint(str(addr), ready and not terminating, str(ref.get("name") or addr)))
    return SliceInfo(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        service=str(service),
        ports=ports,
        endpoints=tuple(eps),
    )


@dataclass(frozen=True, slots=True)
class Replica:
    """A dataplane replica's publish address; `name` is the pod (or the address in local mode)."""

    name: str
    address: str  # host:port for grpc


def replicas_from_slices(slices: Iterable[SliceInfo], port_name: str) -> tuple[Replica, ...]:
    """The gateway's replicas, found through its Service's EndpointSlices: every endpoint, ready or not — a replica
    that has never held a generation is not ready, and it is exactly the one that needs one — terminating ones too:
    through its preStop pause a stopping replica still answers the clients endpoint removal has not reached yet, so
    it must hold what the others hold. It leaves the list when its pod is gone."""
    out: dict[str, Replica] = {}
    for s in slices:
        number = next((n for name, n in s.ports if name == port_name), None)
        if number is None:
            continue
        for ep in s.endpoints:
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
