"""Envoy resources built from a generation, as plain functions (IR → xDS, the Envoy Gateway way).

What Envoy gets per generation, all over ADS:
- CDS: one EDS cluster per backend, named by `CompiledBackend.cluster`. When the split asks for endpoint affinity
  (docs/spec.md §5) the cluster's policy is `override_host`: Envoy sends the request to the exact endpoint the processor
  chose on the core's ring (dynamic metadata `trafficsplit:endpoint`, which clients cannot set), and only when that host
  has just left (or the processor did not decide) falls back to its own RING_HASH over the request's hash policy.
- EDS: each cluster's READY endpoints (readiness is the generation's, so Envoy and the pick agree on eligibility).
- RDS: one route configuration. Per split a virtual host for its hosts with two routes: the routing header present
  → `cluster_header` (the processor decided); otherwise Envoy-native `weighted_clusters` with the split's weights over
  its eligible backends (the processor is down or slow: traffic keeps its ratios, not its stickiness). A default
  virtual host answers 404 so an unknown host never reaches a random backend (and never gets a cookie: Set-Cookie
  and the disclosure are added by the splits' virtual hosts only). Hosts match without their port
  (`ignore_port_in_host_matching`), read as the processor reads them (trafficsplit.core.model.host).
  `internal_only_headers` strips the routing header from every client request before any filter runs, so a client
  cannot name a cluster (the endpoint choice travels in dynamic metadata, which a client cannot set at all);
  `request_headers_to_remove` strips the processor's routing header before the request goes upstream, so a backend
  never learns the internal cluster names.
- A Gateway data plane (a generation with a route table): the rule splits' backend clusters as above (the splits
  carry no host, so no virtual host in the splits' configuration), and per Gateway listener port its own route
  configuration of native Envoy routes (`trafficsplit.wire.gateway_routes`): Envoy matches, redirects, rewrites and
  edits headers; the processor is called only on the routes of rules that split or keep a session, and without its
  decision those routes keep their weights natively (fail open per rule).
- Edge hardening of the backend side (docs/security.md says what was adopted from Envoy's edge best practices and
  why): a 32 KiB per-connection buffer limit; outlier detection that ejects an endpoint after consecutive gateway
  failures (connect refused, reset, 502/503/504: a dead pod, never the application's own 5xx); and a retry on
  another endpoint for failures where the request never reached the application (connect failure, refused stream,
  reset before a request byte was sent), so a pod that died before its endpoint left costs no client a failure.

These are the parts; `trafficsplit.wire.snapshot` assembles them, with the Gateway routes, into what one ADS snapshot
holds (`resources`, `serving`, `transition`, `ResourceBuilder`). This module imports neither of those two, which
build on it (.importlinter, `wire-layers`).

The names here (headers, metadata namespace, cluster names) are the contract between these routes, the bootstrap
(`trafficsplit.wire.bootstrap`) and the processor; they live in one place so the three cannot drift.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from envoy.config.cluster.v3 import circuit_breaker_pb2, cluster_pb2, outlier_detection_pb2
from envoy.config.core.v3 import address_pb2, base_pb2, config_source_pb2, extension_pb2, protocol_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.load_balancing_policies.override_host.v3 import override_host_pb2
from envoy.extensions.load_balancing_policies.ring_hash.v3 import ring_hash_pb2
from envoy.extensions.retry.host.previous_hosts.v3 import previous_hosts_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2 as tls_common_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2
from envoy.type.matcher.v3 import regex_pb2, string_pb2
from envoy.type.metadata.v3 import metadata_pb2
from google.protobuf import any_pb2, duration_pb2, wrappers_pb2
from google.protobuf.message import Message

from trafficsplit.core.decide import disclosure
from trafficsplit.core.model.compiled import CompiledBackend, CompiledSplit, Endpoint
from trafficsplit.core.model.cookie import cookie_present_regex
from trafficsplit.core.model.filters import RequestMirror
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.hashing import key_hash
from trafficsplit.core.model.upstream_tls import SanKind, UpstreamTls

ROUTING_HEADER = "x-trafficsplit-cluster"
# The gRPC initial metadata (or http_service request header) by which a Gateway listener's ext_proc filter names its
# Gateway listener port to the processor: set by the bootstrap, never by a client.
LISTENER_PORT_METADATA = "x-trafficsplit-listener-port"
DECISION_HEADER = "x-trafficsplit-decision"
METADATA_NAMESPACE = "trafficsplit"
META_SET_COOKIE = "set_cookie"
META_DECISION = "decision"
META_ENDPOINT = disclosure.ENDPOINT
OVERRIDE_HOST_POLICY = "envoy.load_balancing_policies.override_host"
RING_HASH_POLICY = "envoy.load_balancing_policies.ring_hash"
ROUTE_CONFIG_NAME = "trafficsplit"
# The bootstrap's ext_proc filter: the name a route's per-filter config (ext_proc off) is keyed by.
EXTPROC_FILTER = "envoy.filters.http.ext_proc"
# A Gateway listener's CORS filter, ahead of ext_proc: a rule's policy is its routes' per-filter config under this name.
CORS_FILTER = "envoy.filters.http.cors"
FALLBACK_STAT_PREFIX = "fallback"
NO_SPLIT_BODY = "no TrafficSplit serves this host\n"

CLUSTER_TYPE = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
ENDPOINT_TYPE = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
ROUTE_TYPE = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
SECRET_TYPE = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
# An HTTPS listener's certificate over SDS: one secret per listener port and hostname (`*`: the listener without
# one), the name the bootstrap's filter chain for that hostname asks for.
SECRET_PREFIX = "trafficsplit_tls_"
CA_SECRET_PREFIX = "trafficsplit_client_ca_"
# The Gateway's client certificate toward TLS backends (spec.tls.backend), over SDS: one per data plane.
BACKEND_CLIENT_SECRET = "trafficsplit_backend_client"


TLS_TRANSPORT_SOCKET = "envoy.transport_sockets.tls"
HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"  # a cluster's upstream HTTP options


def secret_name(port: int, hostname: str | None) -> str:
    return f"{SECRET_PREFIX}{port}_{hostname or '*'}"


def validation_secret_name(port: int) -> str:
    """The SDS validation context (client CA bundle) of an HTTPS port: one per port, as validation is per port."""
    return f"{CA_SECRET_PREFIX}{port}"


_HV = base_pb2.HeaderValue
_HVO = base_pb2.HeaderValueOption

# Envoy's edge recommendation for per-connection buffers (listener and cluster alike).
BUFFER_LIMIT_BYTES = 32 * 1024
# Outlier detection: this many consecutive gateway failures (local-origin connect/reset failures count as 503) eject
# an endpoint for EJECTION_SECONDS × the times it was ejected, at most half a backend's endpoints at once.
GATEWAY_FAILURES_TO_EJECT = 3
EJECTION_SECONDS = 15
MAX_EJECTION_PERCENT = 50
# Retry only what never reached the application: safe for any method, POST included.
RETRY_ON = "connect-failure,refused-stream,reset-before-request"
RETRIES = 2
# Concurrent retries per backend cluster (Envoy's default, 3, overflows as soon as a pod dies under load).
MAX_RETRIES = 1024
HOST_SELECTION_ATTEMPTS = 64


def ads_source() -> config_source_pb2.ConfigSource:
    """Resources from ADS. A short initial fetch timeout: a processor that holds no generation yet sends nothing (it
    must not wipe the config of an Envoy that outlived it), and a fresh Envoy should start serving 404s, not hang."""
    return config_source_pb2.ConfigSource(
        ads=config_source_pb2.AggregatedConfigSource(),
        resource_api_version=2,
        initial_fetch_timeout=duration_pb2.Duration(seconds=1),
    )


def _policy(name: str, config: Message) -> cluster_pb2.LoadBalancingPolicy:
    typed = any_pb2.Any()
    typed.Pack(config)
    return cluster_pb2.LoadBalancingPolicy(
        policies=[
            cluster_pb2.LoadBalancingPolicy.Policy(
                typed_extension_config=extension_pb2.TypedExtensionConfig(name=name, typed_config=typed)
            )
        ]
    )


def endpoint_override_policy() -> cluster_pb2.LoadBalancingPolicy:
    """The processor's endpoint first (metadata `trafficsplit:endpoint`, `host:port` as Envoy names hosts); Envoy's
    RING_HASH over the route's hash policy (the affinity cookie) only when that host is gone or nothing was chosen."""
    source = override_host_pb2.OverrideHost.OverrideHostSource(
        metadata=metadata_pb2.MetadataKey(
            key=METADATA_NAMESPACE, path=[metadata_pb2.MetadataKey.PathSegment(key=META_ENDPOINT)]
        )
    )
    return _policy(
        OVERRIDE_HOST_POLICY,
        override_host_pb2.OverrideHost(
            override_host_sources=[source], fallback_policy=_policy(RING_HASH_POLICY, ring_hash_pb2.RingHash())
        ),
    )


def backend_cluster(
    backend: CompiledBackend, endpoint_affinity: bool, client_certificate: bool = False
) -> cluster_pb2.Cluster:
    """`client_certificate`: the generation has the Gateway's client certificate (`presents_client_certificate`),
    which a TLS backend is then shown."""
    c = _eds_cluster(backend.cluster, endpoint_affinity)
    if backend.h2c:
        speak_http2(c)
    if backend.tls is not None:
        c.transport_socket.CopyFrom(upstream_tls_socket(backend.tls, client_certificate))
    return c


def presents_client_certificate(gen: Generation | None) -> bool:
    """Whether the generation's data plane presents a client certificate to its TLS backends (the Gateway's
    spec.tls.backend, resolved): then `secrets` carries it as BACKEND_CLIENT_SECRET."""
    return gen is not None and gen.routes is not None and gen.routes.backend_client_certificate is not None


_SAN_TYPES = {
    SanKind.HOSTNAME: tls_common_pb2.SubjectAltNameMatcher.DNS,
    SanKind.URI: tls_common_pb2.SubjectAltNameMatcher.URI,
}


def upstream_tls_socket(tls: UpstreamTls, client_certificate: bool = False) -> base_pb2.TransportSocket:
    """TLS to a backend's endpoints (a BackendTLSPolicy): SNI `tls.sni`; the certificate must chain to the bundle
    (inline: it travels with the cluster, so a rotated bundle is a new cluster version) or to the system store, and
    carry one of `tls.names` exactly. Envoy refuses the connection otherwise (the client sees a 503), never falls
    back to cleartext. `client_certificate`: the handshake presents the Gateway's (SDS BACKEND_CLIENT_SECRET)."""
    validation = tls_common_pb2.CertificateValidationContext(
        match_typed_subject_alt_names=[
            tls_common_pb2.SubjectAltNameMatcher(
                san_type=_SAN_TYPES[n.kind], matcher=string_pb2.StringMatcher(exact=n.value)
            )
            for n in tls.names
        ]
    )
    if tls.ca is None:
        validation.system_root_certs.SetInParent()
    else:
        validation.trusted_ca.inline_bytes = tls.ca.pem
    common = tls_pb2.CommonTlsContext(validation_context=validation)
    if client_certificate:
        common.tls_certificate_sds_secret_configs.add(name=BACKEND_CLIENT_SECRET).sds_config.CopyFrom(ads_source())
    ctx = tls_pb2.UpstreamTlsContext(sni=tls.sni, common_tls_context=common)
    socket = base_pb2.TransportSocket(name=TLS_TRANSPORT_SOCKET)
    socket.typed_config.Pack(ctx)
    return socket


def speak_http2(c: cluster_pb2.Cluster) -> None:
    """Envoy speaks HTTP/2 to the cluster's endpoints (prior knowledge, no TLS: h2c); HTTP/1.1 is its default."""
    opts = http_protocol_options_pb2.HttpProtocolOptions(
        explicit_http_config=http_protocol_options_pb2.HttpProtocolOptions.ExplicitHttpConfig(
            http2_protocol_options=protocol_pb2.Http2ProtocolOptions()
        )
    )
    c.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS].Pack(opts)


def _eds_cluster(name: str, endpoint_affinity: bool) -> cluster_pb2.Cluster:
    c = cluster_pb2.Cluster(
        name=name,
        type=cluster_pb2.Cluster.EDS,
        connect_timeout=duration_pb2.Duration(seconds=1),
        per_connection_buffer_limit_bytes=wrappers_pb2.UInt32Value(value=BUFFER_LIMIT_BYTES),
        outlier_detection=outlier_detection(),
        # Envoy allows 3 concurrent retries per cluster by default: when a pod dies under load more requests than
        # that wait to be retried before the ejection, and the rest fail (measured: 4 and 42 of 400 with
        # `upstream_rq_retry_overflow` equal to the failures). Our retries are only for requests no application saw.
        circuit_breakers=circuit_breaker_pb2.CircuitBreakers(
            thresholds=[
                circuit_breaker_pb2.CircuitBreakers.Thresholds(max_retries=wrappers_pb2.UInt32Value(value=MAX_RETRIES))
            ]
        ),
    )
    if endpoint_affinity:
        c.load_balancing_policy.CopyFrom(endpoint_override_policy())
    else:
        c.lb_policy = cluster_pb2.Cluster.ROUND_ROBIN
    c.eds_cluster_config.eds_config.CopyFrom(ads_source())
    return c


def outlier_detection() -> outlier_detection_pb2.OutlierDetection:
    """Eject on gateway failures only: the application's own 5xx and success rate are its business, not a sign the
    pod is gone (enforcing those would let one bad request pattern eject healthy pods)."""
    u32 = wrappers_pb2.UInt32Value
    return outlier_detection_pb2.OutlierDetection(
        consecutive_gateway_failure=u32(value=GATEWAY_FAILURES_TO_EJECT),
        enforcing_consecutive_gateway_failure=u32(value=100),
        enforcing_consecutive_5xx=u32(value=0),
        enforcing_success_rate=u32(value=0),
        enforcing_failure_percentage=u32(value=0),
        interval=duration_pb2.Duration(seconds=5),
        base_ejection_time=duration_pb2.Duration(seconds=EJECTION_SECONDS),
        max_ejection_percent=u32(value=MAX_EJECTION_PERCENT),
    )


def retry_policy() -> route_components_pb2.RetryPolicy:
    """Another endpoint of the same cluster (the decision, so stickiness, is kept) when the first never got the
    request."""
    predicate = route_components_pb2.RetryPolicy.RetryHostPredicate(name="envoy.retry_host_predicates.previous_hosts")
    predicate.typed_config.Pack(previous_hosts_pb2.PreviousHostsPredicate())
    return route_components_pb2.RetryPolicy(
        retry_on=RETRY_ON,
        num_retries=wrappers_pb2.UInt32Value(value=RETRIES),
        retry_host_predicate=[predicate],
        # The ring hash answers a rejected host by stepping along the ring, where one host's entries come in runs:
        # with 3 steps a retry of a key next to a long run of the dead host's entries picked it again (measured: 1 of
        # 400 requests failed, `upstream_rq_retry_limit_exceeded`). Steps cost nothing unless a retry happens.
        host_selection_retry_max_attempts=HOST_SELECTION_ATTEMPTS,
    )


def load_assignment(backend: CompiledBackend) -> endpoint_pb2.ClusterLoadAssignment:
    """Ready endpoints only: a not-ready pod gets no traffic, and a backend without any is one core fails over from."""
    return _assignment(backend.cluster, backend.ready_endpoints)


def _assignment(name: str, ready: Sequence[Endpoint]) -> endpoint_pb2.ClusterLoadAssignment:
    return endpoint_pb2.ClusterLoadAssignment(
        cluster_name=name,
        endpoints=[
            endpoint_components_pb2.LocalityLbEndpoints(
                lb_endpoints=[
                    endpoint_components_pb2.LbEndpoint(
                        endpoint=endpoint_components_pb2.Endpoint(
                            address=address_pb2.Address(
                                socket_address=address_pb2.SocketAddress(address=e.address, port_value=e.port)
                            )
                        )
                    )
                    for e in ready
                ]
            )
        ],
    )


def mirror_cluster_name(m: RequestMirror) -> str:
    """A RequestMirror's cluster: one per Service port (rules mirroring to the same one share it). `mirror:` starts
    no backend cluster's name (those start with a namespace, a DNS label)."""
    return f"mirror:{m.namespace}/{m.service}:{m.port}"


def mirror_clusters(
    gen: Generation | None,
) -> dict[str, tuple[cluster_pb2.Cluster, endpoint_pb2.ClusterLoadAssignment]]:
    """The clusters a Gateway generation's RequestMirror filters send copies to, with their ready endpoints."""
    out: dict[str, tuple[cluster_pb2.Cluster, endpoint_pb2.ClusterLoadAssignment]] = {}
    client = presents_client_certificate(gen)
    for a in gen.routes.actions if gen is not None and gen.routes is not None else ():
        for m in a.mirrors:
            name = mirror_cluster_name(m)
            if name not in out:
                cluster = _eds_cluster(name, endpoint_affinity=False)
                if m.tls is not None:
                    cluster.transport_socket.CopyFrom(upstream_tls_socket(m.tls, client))
                out[name] = (cluster, _assignment(name, [e for e in m.endpoints if e.ready]))
    return out


def _meta(key: str) -> str:
    return f"%DYNAMIC_METADATA({METADATA_NAMESPACE}:{key})%"


def add_response_header(name: str, value: str) -> base_pb2.HeaderValueOption:
    # keep_empty_value false: when the processor set no metadata (no cookie minted, processor down), no header at all.
    return _HVO(header=_HV(key=name, value=value), append_action=_HVO.APPEND_IF_EXISTS_OR_ADD, keep_empty_value=False)


def cookie_hash(name: str) -> route_components_pb2.RouteAction.HashPolicy:
    return route_components_pb2.RouteAction.HashPolicy(
        cookie=route_components_pb2.RouteAction.HashPolicy.Cookie(name=name)
    )


def fallback_weights(split: CompiledSplit) -> list[tuple[CompiledBackend, int]]:
    """The native fallback's clusters and weights: the core's failover weights when a backend is ineligible (an
    Envoy cluster without endpoints would answer 503), else the split's own; zero weights left out."""
    if split.failover is not None:
        weights, index = split.failover
        return [(split.backends[i], w) for i, w in zip(index, weights.weights, strict=True) if w > 0]
    return [(b, b.weight) for b in split.backends if b.weight > 0]


def virtual_host(split: CompiledSplit, generation: int) -> route_components_pb2.VirtualHost:
    decided = route_components_pb2.RouteAction(cluster_header=ROUTING_HEADER, retry_policy=retry_policy())
    if split.endpoint_affinity and split.cookie is not None:
        # Only for override_host's fallback (the chosen pod just left, or a retry after it failed): Envoy's ring on the
        # cookie keeps the session on one pod until the processor's next choice.
        decided.hash_policy.append(cookie_hash(split.cookie.name))
    return route_components_pb2.VirtualHost(
        name=split.key,
        domains=list(split.hosts),
        # Per split, not for the whole configuration: the 404 host never carries a cookie or a decision.
        response_headers_to_add=decision_response_headers((split,)),
        routes=[_decided_route(decided), *fallback_routes(split, generation)],
    )


def session_meta_key(header: str) -> str:
    """The dynamic metadata key of the session token a header-carried split issues in response header `header`: a
    hash, not the name, since a header name may hold `%`, which would end Envoy's format string."""
    return f"session_{key_hash(header):08x}"


def session_headers(splits: Iterable[CompiledSplit]) -> list[str]:
    """The response headers header-carried persistent splits issue their sealed sessions in (GEP-1619 `type: Header`),
    each name once, in order."""
    return sorted({s.key_header for s in splits if s.persistent and s.cookie is None and s.key_header is not None})


def decision_response_headers(splits: Iterable[CompiledSplit] = ()) -> list[base_pb2.HeaderValueOption]:
    """The cookie the processor minted, the session tokens it issued and its disclosure, all from the request's dynamic
    metadata (a header the processor set no value for is not added)."""
    return [
        add_response_header("set-cookie", _meta(META_SET_COOKIE)),
        *(add_response_header(h, _meta(session_meta_key(h))) for h in session_headers(splits)),
        add_response_header(DECISION_HEADER, _meta(META_DECISION)),
    ]


def _decided_route(action: route_components_pb2.RouteAction) -> route_components_pb2.Route:
    """The processor decided: the request carries the routing header naming the cluster."""
    return route_components_pb2.Route(
        name="decided",
        match=route_components_pb2.RouteMatch(
            prefix="/",
            headers=[route_components_pb2.HeaderMatcher(name=ROUTING_HEADER, present_match=True)],
        ),
        route=action,
    )


def fallback_routes(split: CompiledSplit, generation: int) -> list[route_components_pb2.Route]:
    """The processor is down or slow: Envoy-native `weighted_clusters` over the eligible backends. A request that
    carries the split's affinity cookie takes `fallback-cookie`, where the cluster choice hashes that cookie
    (`use_hash_policy`) and the backend cluster's ring hashes it too, so the session stays on one backend and one pod
    for the whole outage (Envoy's hash is not key_hash: the outage's choice can differ from the processor's). Both
    routes count under the stat prefix `fallback`; the disclosure says which key decided."""
    routes = []
    if split.cookie is not None:
        name = split.cookie.name
        # Only a VALID affinity cookie takes this route, as only a valid one is a session id to the processor.
        present = route_components_pb2.HeaderMatcher(
            name="cookie",
            string_match=string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=cookie_present_regex(name))),
        )
        action = route_components_pb2.RouteAction(
            weighted_clusters=fallback_clusters(split, generation, "cookie"),
            hash_policy=[cookie_hash(name)],
            retry_policy=retry_policy(),
        )
        action.weighted_clusters.use_hash_policy.value = True
        routes.append(
            route_components_pb2.Route(
                name=f"{FALLBACK_STAT_PREFIX}-cookie",
                stat_prefix=FALLBACK_STAT_PREFIX,
                match=route_components_pb2.RouteMatch(prefix="/", headers=[present]),
                route=action,
                metadata=disclosed(disclosure.fallback_fields(generation, cookie_present=True)),
            )
        )
    routes.append(
        route_components_pb2.Route(
            name=FALLBACK_STAT_PREFIX,
            stat_prefix=FALLBACK_STAT_PREFIX,
            match=route_components_pb2.RouteMatch(prefix="/"),
            route=route_components_pb2.RouteAction(
                weighted_clusters=fallback_clusters(split, generation, "none"), retry_policy=retry_policy()
            ),
            metadata=disclosed(disclosure.fallback_fields(generation, cookie_present=False)),
        )
    )
    return routes


def disclosed(fields: Mapping[str, str | bool | int]) -> base_pb2.Metadata:
    """Route metadata in our namespace: the access log's `%METADATA(ROUTE:trafficsplit)%` for fallback requests."""
    md = base_pb2.Metadata()
    md.filter_metadata[METADATA_NAMESPACE].update(dict(fields))
    return md


def fallback_clusters(split: CompiledSplit, generation: int, key: str) -> route_components_pb2.WeightedCluster:
    fallback = route_components_pb2.WeightedCluster()
    for b, w in fallback_weights(split):
        cw = fallback.clusters.add(name=b.cluster, weight=wrappers_pb2.UInt32Value(value=w))
        if split.debug_headers:
            cw.response_headers_to_add.append(
                add_response_header(
                    DECISION_HEADER, f"backend={b.name}; generation={generation}; key={key}; path=fallback"
                )
            )
    return fallback


def route_configuration(gen: Generation | None) -> route_pb2.RouteConfiguration:
    """The one route configuration; `None` (no generation held yet) gives only the 404 default host."""
    if gen is None:
        return _route_configuration([])
    return _route_configuration([virtual_host(s, s.first_generation or gen.number) for s in gen.splits if s.hosts])


def _route_configuration(vhosts: list[route_components_pb2.VirtualHost]) -> route_pb2.RouteConfiguration:
    """The splits' virtual hosts, in order, then the 404 default host."""
    vhosts = [
        *vhosts,
        route_components_pb2.VirtualHost(
            name="no-split",
            domains=["*"],
            routes=[
                route_components_pb2.Route(
                    name="no-split",
                    match=route_components_pb2.RouteMatch(prefix="/"),
                    direct_response=route_components_pb2.DirectResponseAction(
                        status=404, body=base_pb2.DataSource(inline_string=NO_SPLIT_BODY)
                    ),
                )
            ],
        ),
    ]
    return route_pb2.RouteConfiguration(
        name=ROUTE_CONFIG_NAME,
        virtual_hosts=vhosts,
        internal_only_headers=[ROUTING_HEADER],
        # The processor reads the Host with the same rule (trafficsplit.core.model.host.normalize_host).
        ignore_port_in_host_matching=True,
        # Applied as the request leaves for the backend, after the route has read it.
        request_headers_to_remove=[ROUTING_HEADER],
    )
