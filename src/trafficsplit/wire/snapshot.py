"""What one ADS snapshot holds for a generation: every Envoy resource of it, by xDS type, and the make-before-break
steps the publisher pushes (`resources`, `serving`, `transition`), as messages or packed (`ResourceBuilder`).

It assembles what the two route modules build: the splits' clusters, endpoints and route configuration
(`trafficsplit.wire.envoy`), and for a Gateway data plane (a generation with a route table) also one route
configuration per listener port (`trafficsplit.wire.gateway_routes`, which builds on `envoy`'s route parts) and the
SDS secrets of its HTTPS listeners. Above both, so the three are a stack without a cycle: `envoy` imports neither,
`gateway_routes` imports `envoy` only (.importlinter, `wire-layers`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2 as tls_common_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from google.protobuf import any_pb2
from google.protobuf.message import Message

from trafficsplit.core.model.compiled import CompiledSplit
from trafficsplit.core.model.generation import Generation
from trafficsplit.wire import envoy, gateway_routes

_S = TypeVar("_S")


def route_configurations(gen: Generation | None) -> dict[str, route_pb2.RouteConfiguration]:
    """Every route configuration of `gen` by RDS name: the splits' (`route_configuration`), and for a Gateway data
    plane one per listener port (`gateway_routes`)."""
    rc = envoy.route_configuration(gen)
    out = {rc.name: rc}
    if gen is not None and gen.routes is not None:
        out.update(gateway_routes.route_configurations(gen))
    return out


_C = TypeVar("_C", bound=Message)
_E = TypeVar("_E", bound=Message)
_R = TypeVar("_R", bound=Message)
_T = TypeVar("_T", bound=Message)


# Not slots: a slotted frozen dataclass cannot be built through its subscripted alias (`Messages(...)`).
@dataclass(frozen=True)
class Resources(Generic[_C, _E, _R, _T]):
    """Everything Envoy needs for one state, by xDS type URL then resource name (the content of one snapshot).
    A type given as None is left as Envoy has it. As messages (`Messages`: what `resources`, `serving` and
    `transition` give) or each already packed, deterministic, as ADS sends it (`Packed`: what `ResourceBuilder`
    gives); the ADS snapshot takes either."""

    clusters: dict[str, _C]
    endpoints: dict[str, _E]
    routes: dict[str, _R] | None
    # None: not a Gateway data plane's (no route table), SDS untouched; else every certificate it serves.
    secrets: dict[str, _T] | None = None

    def by_type(self) -> dict[str, Mapping[str, Message]]:
        out: dict[str, Mapping[str, Message]] = {envoy.CLUSTER_TYPE: self.clusters, envoy.ENDPOINT_TYPE: self.endpoints}
        if self.routes is not None:
            out[envoy.ROUTE_TYPE] = self.routes
        if self.secrets is not None:
            out[envoy.SECRET_TYPE] = self.secrets
        return out


Messages = Resources[
    cluster_pb2.Cluster, endpoint_pb2.ClusterLoadAssignment, route_pb2.RouteConfiguration, secret_pb2.Secret
]
Packed = Resources[any_pb2.Any, any_pb2.Any, any_pb2.Any, any_pb2.Any]


def secrets(gen: Generation | None) -> dict[str, secret_pb2.Secret] | None:
    """The certificates of the generation's HTTPS listeners as SDS secrets (inline: they travel in the ADS stream to
    this pod's Envoy only, never to a file), and each validating port's client CA bundle as an SDS validation
    context; None for a generation without a route table (TrafficSplits). A port whose validation did not resolve
    gets none: its filter chains (which name one) then fail every handshake, and never serve unvalidated."""
    if gen is None or gen.routes is None:
        return None
    out: dict[str, secret_pb2.Secret] = {}
    if (client := gen.routes.backend_client_certificate) is not None:
        out[envoy.BACKEND_CLIENT_SECRET] = secret_pb2.Secret(
            name=envoy.BACKEND_CLIENT_SECRET,
            tls_certificate=tls_common_pb2.TlsCertificate(
                certificate_chain=base_pb2.DataSource(inline_bytes=client.chain_pem),
                private_key=base_pb2.DataSource(inline_bytes=client.key_pem),
            ),
        )
    for lr in gen.routes.listeners:
        if lr.client_validation is not None:
            ca_name = envoy.validation_secret_name(lr.port)
            out[ca_name] = secret_pb2.Secret(
                name=ca_name,
                validation_context=tls_common_pb2.CertificateValidationContext(
                    trusted_ca=base_pb2.DataSource(inline_bytes=lr.client_validation.ca.pem)
                ),
            )
        if lr.certificate is None:
            continue
        name = envoy.secret_name(lr.port, lr.hostname)
        out[name] = secret_pb2.Secret(
            name=name,
            tls_certificate=tls_common_pb2.TlsCertificate(
                certificate_chain=base_pb2.DataSource(inline_bytes=lr.certificate.chain_pem),
                private_key=base_pb2.DataSource(inline_bytes=lr.certificate.key_pem),
            ),
        )
    return out


def resources(gen: Generation | None) -> Messages:
    clusters: dict[str, cluster_pb2.Cluster] = {}
    endpoints: dict[str, endpoint_pb2.ClusterLoadAssignment] = {}
    client = envoy.presents_client_certificate(gen)
    for s in gen.splits if gen is not None else ():
        for b in s.backends:
            clusters[b.cluster] = envoy.backend_cluster(b, s.endpoint_affinity, client)
            endpoints[b.cluster] = envoy.load_assignment(b)
    for name, (c, e) in envoy.mirror_clusters(gen).items():
        clusters[name], endpoints[name] = c, e
    return Messages(clusters, endpoints, route_configurations(gen), secrets(gen))


def serving(gen: Generation, draining: Sequence[Generation] = ()) -> Messages:
    """Make-before-break, step two: the held generation's own snapshot (its routes), plus the clusters and endpoints
    of recently replaced generations it no longer uses. Those are withdrawn in a later version, once every decision
    they made has reached Envoy's router: a decision made just before the swap is applied by Envoy just after it
    (seen as 503s under CPU contention when the clusters went in the same push as the swap)."""
    own = resources(gen)
    clusters: dict[str, cluster_pb2.Cluster] = {}
    endpoints: dict[str, endpoint_pb2.ClusterLoadAssignment] = {}
    for old in draining:
        res = resources(old)
        clusters.update(res.clusters)
        endpoints.update(res.endpoints)
    return Messages({**clusters, **own.clusters}, {**endpoints, **own.endpoints}, own.routes, own.secrets)


def transition(held: Generation | None, new: Generation, draining: Sequence[Generation] = ()) -> Messages:
    """Make-before-break, step one: the new generation's clusters and endpoints PLUS the held one's (and the still
    draining ones') clusters that the new one drops, with the held routes. Pushed and acknowledged before the swap, so
    no pick can name a cluster Envoy lacks; the removal is pushed only after the swap and the drain (`serving`). With
    nothing held (first publish, or a restarted processor facing an Envoy that kept its config) the routes are left
    alone until the swap."""
    old = serving(held, draining) if held is not None else resources(None)
    nxt = resources(new)
    clusters = {**old.clusters, **nxt.clusters}
    endpoints = {**old.endpoints, **nxt.endpoints}
    # Certificates are the new generation's from the first step: a rotated one is served as soon as Envoy takes it.
    return Messages(clusters, endpoints, old.routes if held is not None else None, _merged(old.secrets, nxt.secrets))


def _merged(old: dict[str, _S] | None, new: dict[str, _S] | None) -> dict[str, _S] | None:
    return new if old is None else old if new is None else {**old, **new}


def _packed(m: Message) -> any_pb2.Any:
    a = any_pb2.Any()
    a.Pack(m, deterministic=True)
    return a


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# The tag of one `RouteConfiguration.virtual_hosts` element on the wire (length-delimited), for `_packed_routes`.
_VHOST_TAG = _varint(route_pb2.RouteConfiguration.DESCRIPTOR.fields_by_name["virtual_hosts"].number << 3 | 2)


def _packed_routes(vhosts: list[bytes], rest: bytes | None = None) -> any_pb2.Any:
    """A route configuration of these serialized virtual hosts, packed, without building or serialising it whole:
    protobuf's wire format parses concatenated encodings as one message and appends repeated elements in the order
    they come, so the tagged virtual hosts followed by the configuration's other fields (`rest`, serialized without
    hosts: by default `route_configuration(None)`, the splits' 404 host and the rest) parse as exactly the
    configuration holding those hosts first."""
    if rest is None:
        rest = envoy.route_configuration(None).SerializeToString(deterministic=True)
    a = any_pb2.Any(type_url=envoy.ROUTE_TYPE)
    a.value = b"".join(_VHOST_TAG + _varint(len(v)) + v for v in vhosts) + rest
    return a


def _gateway_rest(name: str) -> bytes:
    """A Gateway port's route configuration without its virtual hosts, serialized (what `_packed_routes` appends)."""
    rest: bytes = gateway_routes.route_configuration(name).SerializeToString(deterministic=True)
    return rest


@dataclass(frozen=True, slots=True)
class _SplitClusters:
    """One split's clusters and endpoint assignments, packed: they depend on the split's compiled form only."""

    clusters: tuple[any_pb2.Any, ...]
    endpoints: tuple[any_pb2.Any, ...]


def _split_clusters(split: CompiledSplit, client_certificate: bool) -> _SplitClusters:
    return _SplitClusters(
        tuple(_packed(envoy.backend_cluster(b, split.endpoint_affinity, client_certificate)) for b in split.backends),
        tuple(_packed(envoy.load_assignment(b)) for b in split.backends),
    )


@dataclass(frozen=True, slots=True)
class _Table:
    """One Gateway generation's route configurations, packed, and the serialized virtual hosts they hold by part."""

    generation: Generation
    routes: dict[str, any_pb2.Any]
    hosts: dict[gateway_routes.HostPart, bytes]


@dataclass
class _Used:
    """What one builder call used, kept for the next call (the rest is dropped)."""

    # by split and whether its TLS backends are shown the Gateway's client certificate
    clusters: dict[tuple[CompiledSplit, bool], _SplitClusters] = field(default_factory=dict)
    vhosts: dict[tuple[CompiledSplit, int], bytes] = field(default_factory=dict)
    hosts: dict[gateway_routes.HostPart, bytes] = field(default_factory=dict)  # a Gateway port's virtual hosts
    # Each Gateway generation's route configurations, by the generation object (a publish asks for the held and the
    # new one's three times between its two steps; equal content under another object is found through `hosts`).
    tables: list[_Table] = field(default_factory=list)


class ResourceBuilder:
    """`resources`, `serving` and `transition` for the publisher, packed, reusing what it built for an equal compiled
    split (content-addressed: the key is the `CompiledSplit` value, so a split whose compiled form did not change
    costs a dictionary lookup). A split's clusters and endpoints depend on its form only; its virtual host also on
    the generation number the fallback routes disclose (the split's first carrying generation, else the
    generation's own), so a split carried on unchanged keeps its virtual host across publishes. A Gateway's route
    configurations likewise: each virtual host is kept by its `gateway_routes.HostPart` (its rules disclose their
    first carrying generation), and a generation's whole table by the generation object, so a flip of one rule among
    1,000 builds one virtual host once per publish. Each call keeps only what it used (the held, new and draining
    generations), and it keeps packed bytes, the same objects the ADS snapshot holds. The packed messages are shared
    between results and must not be mutated. Unpacked, a result equals the plain function's."""

    def __init__(self) -> None:
        self._last = _Used()

    def resources(self, gen: Generation | None) -> Packed:
        used = _Used()
        res = self._own(gen, used)
        self._last = used
        return res

    def serving(self, gen: Generation, draining: Sequence[Generation] = ()) -> Packed:
        used = _Used()
        res = self._serving(gen, draining, used)
        self._last = used
        return res

    def transition(self, held: Generation | None, new: Generation, draining: Sequence[Generation] = ()) -> Packed:
        used = _Used()
        old = self._serving(held, draining, used) if held is not None else self._own(None, used)
        nxt = self._own(new, used)
        self._last = used
        return Packed(
            {**old.clusters, **nxt.clusters},
            {**old.endpoints, **nxt.endpoints},
            old.routes if held is not None else None,
            _merged(old.secrets, nxt.secrets),
        )

    def _serving(self, gen: Generation, draining: Sequence[Generation], used: _Used) -> Packed:
        own = self._own(gen, used)
        clusters: dict[str, any_pb2.Any] = {}
        endpoints: dict[str, any_pb2.Any] = {}
        for old in draining:
            self._add_clusters(old, used, clusters, endpoints)
        return Packed({**clusters, **own.clusters}, {**endpoints, **own.endpoints}, own.routes, own.secrets)

    def _own(self, gen: Generation | None, used: _Used) -> Packed:
        clusters: dict[str, any_pb2.Any] = {}
        endpoints: dict[str, any_pb2.Any] = {}
        hosts: list[bytes] = []
        if gen is not None:
            self._add_clusters(gen, used, clusters, endpoints)
            for s in gen.splits:
                if not s.hosts:  # a Gateway rule's split: reached through the gateway host only
                    continue
                key = (s, s.first_generation or gen.number)
                vh = used.vhosts.get(key) or self._last.vhosts.get(key)
                if vh is None:
                    vh = envoy.virtual_host(s, key[1]).SerializeToString(deterministic=True)
                used.vhosts[key] = vh
                hosts.append(vh)
        routes = {envoy.ROUTE_CONFIG_NAME: _packed_routes(hosts)}
        if gen is not None and gen.routes is not None:
            routes.update(self._table(gen, used))
        return Packed(
            clusters,
            endpoints,
            routes,
            None if (sec := secrets(gen)) is None else {name: _packed(v) for name, v in sec.items()},
        )

    def _table(self, gen: Generation, used: _Used) -> dict[str, any_pb2.Any]:
        table = next((t for t in (*used.tables, *self._last.tables) if t.generation is gen), None)
        if table is None:
            hosts: dict[gateway_routes.HostPart, bytes] = {}
            routes = {
                name: _packed_routes([self._host(p, used, hosts) for p in parts], _gateway_rest(name))
                for name, parts in gateway_routes.host_parts(gen).items()
            }
            table = _Table(gen, routes, hosts)
        if all(t.generation is not gen for t in used.tables):
            used.tables.append(table)
            used.hosts.update(table.hosts)  # a dict's own hashes: kept for a later generation's equal hosts
        return table.routes

    def _host(self, part: gateway_routes.HostPart, used: _Used, hosts: dict[gateway_routes.HostPart, bytes]) -> bytes:
        vh = used.hosts.get(part) or self._last.hosts.get(part)
        if vh is None:
            vh = gateway_routes.virtual_host(part).SerializeToString(deterministic=True)
        hosts[part] = vh
        return vh

    def _add_clusters(
        self, gen: Generation, used: _Used, clusters: dict[str, any_pb2.Any], endpoints: dict[str, any_pb2.Any]
    ) -> None:
        client = envoy.presents_client_certificate(gen)
        for s in gen.splits:
            key = (s, client)
            built = used.clusters.get(key) or self._last.clusters.get(key) or _split_clusters(s, client)
            used.clusters[key] = built
            for b, c, e in zip(s.backends, built.clusters, built.endpoints, strict=True):
                clusters[b.cluster] = c
                endpoints[b.cluster] = e
        # A Gateway's mirrors: few, built each call (their endpoints are the generation's).
        for name, (mc, me) in envoy.mirror_clusters(gen).items():
            clusters[name], endpoints[name] = _packed(mc), _packed(me)
