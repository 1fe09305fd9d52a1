"""Envoy's static bootstrap for one dataplane unit, as a plain function.

Static on purpose and minimal: the HTTP listener (HTTP connection manager → ext_proc → router, routes from RDS), the
processor cluster and the ADS cluster (both HTTP/2: gRPC; the processor's is HTTP/1.1 with the experimental
`http_service` transport, `ExtProcTransport.HTTP`), and admin on loopback. Everything a generation changes
(backend clusters, endpoints, routes) comes over ADS, so a new backend needs no Envoy restart.

Choices (docs/dataplane.md says why in full):
- ext_proc fails open (`failure_mode_allow`) with a short `message_timeout`: a dead or stalled processor costs at most
  that timeout and traffic falls through to the native weighted route (a Gateway listener's too: per rule, its
  fallback route). On a Gateway listener the filter runs only on the routes of rules that split or keep a session
  (disabled per route elsewhere: `gateway_routes`), and sends the matched route's name (`xds.route_name`).
- Request headers only; every other phase is skipped, so a request costs exactly one processor message. The cookie
  reaches the response through dynamic metadata in our namespace, which must be listed in `receiving_namespaces`.
- No `strip_any_host_port` on the chart gateway's listener: the route configuration ignores the port when it matches
  hosts and leaves the header as the client sent it, so the processor reads the same bytes the same way
  (trafficsplit.core.model.host). Nor on a Gateway listener: backends see the Host as it came (Gateway API
  conformance checks it), and a redirect names the spec's port explicitly (`gateway_routes`).
- An access log line per request (JSON, `ACCESS_LOG_FORMAT`): docs/spec.md §6's disclosure of every decision from the
  processor's dynamic metadata, or from the fallback route's metadata when Envoy decided alone.
- Edge hardening after Envoy's "Configuring Envoy as an edge proxy" (docs/security.md lists what is adopted and
  what not): the client's address is the connection's (`use_remote_address`, `xff_num_trusted_hops` for trusted
  proxies in front), paths normalised before routing, underscore headers refused, header/idle timeouts, HTTP/2 stream
  and window limits, 32 KiB connection buffers, and an overload manager with a heap ceiling and a global connection
  limit (without one Envoy warns at start and accepts connections until memory runs out).
- Per-backend cluster stats on by default (dashboards read them); `backend_cluster_stats=False` drops them with a
  stats matcher, for installations with very many splits, where they dominate Envoy's CDS time and memory.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import StrEnum

from envoy.config.accesslog.v3 import accesslog_pb2
from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.config.cluster.v3 import circuit_breaker_pb2, cluster_pb2
from envoy.config.common.mutation_rules.v3 import mutation_rules_pb2
from envoy.config.core.v3 import (
    address_pb2,
    backoff_pb2,
    base_pb2,
    config_source_pb2,
    grpc_service_pb2,
    http_service_pb2,
    http_uri_pb2,
    protocol_pb2,
    substitution_format_string_pb2,
)
from envoy.config.core.v3 import extension_pb2 as core_extension_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.metrics.v3 import stats_pb2
from envoy.config.overload.v3 import overload_pb2
from envoy.extensions.access_loggers.file.v3 import file_pb2
from envoy.extensions.filters.http.cors.v3 import cors_pb2
from envoy.extensions.filters.http.ext_proc.v3 import ext_proc_pb2, processing_mode_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.listener.tls_inspector.v3 import tls_inspector_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm_pb2
from envoy.extensions.http.early_header_mutation.header_mutation.v3 import header_mutation_pb2
from envoy.extensions.resource_monitors.downstream_connections.v3 import downstream_connections_pb2
from envoy.extensions.resource_monitors.fixed_heap.v3 import fixed_heap_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2 as tls_common_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2, tls_pb2
from envoy.type.matcher.v3 import regex_pb2, string_pb2
from google.protobuf import any_pb2, duration_pb2, json_format, struct_pb2, wrappers_pb2

from trafficsplit.core.decide import disclosure
from trafficsplit.core.model.rules import is_host
from trafficsplit.core.model.tls import ClientCertificates
from trafficsplit.wire.envoy import (
    BUFFER_LIMIT_BYTES,
    CORS_FILTER,
    EXTPROC_FILTER,
    LISTENER_PORT_METADATA,
    METADATA_NAMESPACE,
    ROUTE_CONFIG_NAME,
    ads_source,
    secret_name,
    speak_http2,
    validation_secret_name,
)
from trafficsplit.wire.gateway_routes import route_config_name
from trafficsplit.wire.reserved import ADS_CLUSTER, EXTPROC_CLUSTER

LISTENER_NAME = "trafficsplit_http"
# A Gateway data plane's listeners: `trafficsplit_http_<gateway listener port>`.
GATEWAY_LISTENER_PREFIX = "trafficsplit_http_"
MAX_LISTENERS = 64  # the Gateway CRD's bound on listeners
HCM_STAT_PREFIX = "trafficsplit"
EXTPROC_STAT_PREFIX = "trafficsplit"
DEFAULT_MESSAGE_TIMEOUT_MS = 200
# ext_proc over http_service: the path Envoy posts each message to, and the Host it names (never resolved: the
# cluster says where the processor is).
EXTPROC_HTTP_PATH = "/envoy.service.ext_proc.v3.ExternalProcessor/Process"
EXTPROC_HTTP_URI = f"http://trafficsplit-extproc{EXTPROC_HTTP_PATH}"
# The ext_proc attribute a Gateway listener's filter sends: the name of the route Envoy matched.
ROUTE_NAME_ATTRIBUTE = "xds.route_name"


class ExtProcTransport(StrEnum):
    """How Envoy calls the processor's ext_proc: gRPC (the default, Envoy's stable API), or one HTTP/1.1 POST per
    message (`http_service`: experimental, Envoy marks it work-in-progress; docs/dataplane.md)."""

    GRPC = "grpc"
    HTTP = "http"


DEFAULT_ACCESS_LOG = "/dev/stdout"
# Envoy's ADS reconnect backoff (ads_retry_policy): a loopback connection attempt is cheap, a late reconnect is a
# restarted processor serving no decisions.
ADS_RETRY_BASE_MS = 100
ADS_RETRY_MAX_MS = 500


def _dm(key: str) -> str:
    return f"%DYNAMIC_METADATA({METADATA_NAMESPACE}:{key})%"


# One JSON object per request (docs/dataplane.md, "Access log"). `route` says who decided: `decided` (the processor:
# the disclosure fields below) or `fallback-cookie` / `fallback` (Envoy alone: `fallback` holds the route's metadata).
ACCESS_LOG_FORMAT: dict[str, str] = {
    "start_time": "%START_TIME%",
    "authority": "%REQ(:AUTHORITY)%",
    "request_path": "%REQ(:PATH)%",
    "status": "%RESPONSE_CODE%",
    "duration_ms": "%DURATION%",
    "route": "%ROUTE_NAME%",
    "cluster": "%UPSTREAM_CLUSTER%",
    "upstream_host": "%UPSTREAM_HOST%",
    disclosure.BACKEND: _dm(disclosure.BACKEND),
    disclosure.ENDPOINT: _dm(disclosure.ENDPOINT),
    disclosure.GENERATION: _dm(disclosure.GENERATION),
    disclosure.KEY_SOURCE: _dm(disclosure.KEY_SOURCE),
    disclosure.SESSION_ID_PRESENT: _dm(disclosure.SESSION_ID_PRESENT),
    disclosure.AFFINITY_APPLIED: _dm(disclosure.AFFINITY_APPLIED),
    disclosure.PATH: _dm(disclosure.PATH),
    disclosure.FALLBACK: f"%METADATA(ROUTE:{METADATA_NAMESPACE})%",
}
# Heap ceiling of the overload manager: 192 MiB, three quarters of the chart's 256 Mi Envoy memory limit, so Envoy
# sheds load before the kernel kills it. The chart sets it from gateway.envoy.overload.maxHeapSizeBytes.
DEFAULT_MAX_HEAP_BYTES = 192 * 1024 * 1024
# Active downstream connections over all workers (Envoy's edge example uses 50,000).
DEFAULT_MAX_CONNECTIONS = 50_000
HEAP_MONITOR = "envoy.resource_monitors.fixed_heap"
CONNECTIONS_MONITOR = "envoy.resource_monitors.global_downstream_max_connections"
# Client-asserted addresses. With no trusted proxy in front, a client's own claims are dropped before Envoy appends
# the peer address, so X-Forwarded-For reaches a backend as exactly the connection's address.
CLIENT_ADDRESS_HEADERS = ("x-forwarded-for", "x-real-ip", "forwarded")
# The stats of every split's backend clusters, and nothing else. A split cluster is `NAMESPACE/SPLIT/BACKEND`
# (core.compiled.cluster_name) and a namespace is a DNS label (core.rules.name_problems), so its stats are
# `cluster.NAMESPACE/...`: `cluster.`, then letters, digits and '-', then '/'. Every stat starting `cluster.` belongs to
# a cluster (the cluster manager's are `cluster_manager.`, routes' `vhost.`), and the gateway's own clusters
# (trafficsplit_extproc, trafficsplit_ads) have '_' and no '/', so they and every listener, HTTP, ext_proc, route and
# server stat are kept. Only backend clusters come over CDS: a publish-API client that names one otherwise keeps its
# stats. Envoy matches the whole stat name (RE2 full match: without the trailing `.*` nothing matches, measured).
BACKEND_CLUSTER_STATS_REGEX = r"cluster\.[a-z0-9-]+/.*"


@dataclass(frozen=True)
class Address:
    """A loopback/pod TCP address, or a Unix socket path when `path` is set."""

    host: str = "127.0.0.1"
    port: int = 0
    path: str | None = None

    @classmethod
    def parse(cls, text: str) -> Address:
        """`unix:/path`, `HOST:PORT` or `[V6]:PORT`, the forms grpc servers are given."""
        if text.startswith("unix:"):
            return cls(path=text.removeprefix("unix:").removeprefix("//"))
        host, _, port = text.rpartition(":")
        return cls(host=host.strip("[]"), port=int(port))

    @property
    def target(self) -> str:
        """The form gRPC binds: `unix:/path`, `HOST:PORT`, or `[V6]:PORT` (also for a v6 host given bare, as
        `$(POD_IP):PORT` is on an IPv6 pod)."""
        if self.path is not None:
            return f"unix:{self.path}"
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def loopback(self) -> bool:
        """A Unix socket or a loopback address: reachable from this host (this pod) only."""
        if self.path is not None:
            return True
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def proto(self) -> address_pb2.Address:
        if self.path is not None:
            return address_pb2.Address(pipe=address_pb2.Pipe(path=self.path))
        return address_pb2.Address(socket_address=address_pb2.SocketAddress(address=self.host, port_value=self.port))


@dataclass(frozen=True, slots=True)
class GatewayListener:
    """One Envoy listener of a Gateway data plane: the Gateway listener `port` (what the route tables are keyed by,
    what the Service exposes) served by Envoy bound at `bind` (the container port: a non-root Envoy cannot bind
    below 1024). Given on the command line as `PORT=HOST:BINDPORT` (`--listener 80=0.0.0.0:8080`)."""

    port: int
    bind: Address
    # HTTPS (TLS terminated here): the hostnames of the Gateway's HTTPS listeners on this port, `*` for one without a
    # hostname. Each gets a filter chain matched by SNI (`*` matches any) whose certificate comes over SDS
    # (`envoy.secret_name`). Empty: plain HTTP. Given as `PORT=HOST:PORT:https` (one listener, no hostname) or
    # `PORT=HOST:PORT:https:NAME,NAME`.
    tls_hosts: tuple[str, ...] = ()
    # HTTPS with client certificate validation, given as a last `:mtls=require` or `:mtls=optional`: every chain of
    # the port validates against the port's CA bundle, an SDS validation context (`envoy.validation_secret_name`).
    client_certificates: ClientCertificates | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ValueError(f"listener port {self.port} is outside 1..65535")
        if len(self.tls_hosts) > MAX_LISTENERS:
            raise ValueError(
                f"listener port {self.port}: {len(self.tls_hosts)} HTTPS hostnames, at most {MAX_LISTENERS}"
            )
        bad = [h for h in self.tls_hosts if h != "*" and not is_host(h)]
        if bad:
            raise ValueError(f"listener port {self.port}: {bad[0][:64]!r} is not a host name or a *. wildcard")
        if len(set(self.tls_hosts)) != len(self.tls_hosts):
            raise ValueError(f"listener port {self.port}: an HTTPS hostname repeats")
        if self.client_certificates is not None and not self.tls_hosts:
            raise ValueError(f"listener port {self.port}: client certificates are for an HTTPS listener")

    @classmethod
    def parse(cls, text: str) -> GatewayListener:
        shape = f"listener {text!r} is not PORT=HOST:PORT[:https[:NAME,...][:mtls=require|optional]]"
        head, https, hosts = text.partition(":https")
        if https and hosts and not hosts.startswith(":"):
            raise ValueError(shape)
        client: ClientCertificates | None = None
        hosts, mtls, mode = hosts.partition(":mtls=")
        if mtls:
            try:
                client = ClientCertificates(mode)
            except ValueError:
                raise ValueError(shape) from None
        tls_hosts = tuple(hosts[1:].split(",")) if hosts else ("*",) if https else ()
        port, sep, bind = head.partition("=")
        if not sep or not port.isdigit() or not bind:
            raise ValueError(f"listener {text!r} is not PORT=HOST:PORT[:https[:NAME,...]]")
        try:
            address = Address.parse(bind)
        except ValueError as exc:
            raise ValueError(f"listener {text!r}: {exc}") from exc
        if address.path is None and not 0 <= address.port <= 65535:
            raise ValueError(f"listener {text!r}: bind port outside 0..65535")
        return cls(int(port), address, tls_hosts, client)

    @property
    def name(self) -> str:
        return f"{GATEWAY_LISTENER_PREFIX}{self.port}"


@dataclass(frozen=True, kw_only=True)
class BootstrapOptions:
    node_id: str
    listen: Address  # the HTTP listener clients reach
    extproc: Address  # the processor's ext_proc server
    ads: Address  # the processor's ADS server (the same server in our unit, its own connection)
    admin: Address
    message_timeout_ms: int = DEFAULT_MESSAGE_TIMEOUT_MS
    cluster: str = "trafficsplit-gateway"
    access_log: str = DEFAULT_ACCESS_LOG  # a file path; the container's stdout by default
    # Proxies in front of the gateway whose X-Forwarded-For entries are trusted (0: the peer is the client).
    xff_num_trusted_hops: int = 0
    max_heap_bytes: int = DEFAULT_MAX_HEAP_BYTES
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    extproc_transport: ExtProcTransport = ExtProcTransport.GRPC
    # Envoy's per-backend cluster stats (upstream_rq_*, outlier ejections, ...), on for dashboards. Off: at 10,000
    # splits Envoy spends 60 % less CPU on the first publish and 36 % less memory (docs/helm.md); the processor's own
    # per-backend decision metrics stay either way.
    backend_cluster_stats: bool = True
    # A Gateway data plane: one Envoy listener per Gateway listener port (`listen` is then unused), each telling the
    # processor its port. Empty: the single listener at `listen`, as the chart's gateway has.
    listeners: tuple[GatewayListener, ...] = ()

    def __post_init__(self) -> None:
        ports = [g.port for g in self.listeners]
        if len(set(ports)) != len(ports):
            raise ValueError(f"listener ports {ports} repeat a port")
        binds = [g.bind for g in self.listeners if g.bind.path is not None or g.bind.port != 0]  # 0: any free port
        if len(set(binds)) != len(binds):
            raise ValueError("two listeners bind the same address")
        if len(ports) > MAX_LISTENERS:
            raise ValueError(f"{len(ports)} listeners, at most {MAX_LISTENERS}")
        if not 0 <= self.xff_num_trusted_hops <= 16:
            raise ValueError(f"xff_num_trusted_hops {self.xff_num_trusted_hops} is outside 0..16")
        if self.max_heap_bytes < 16 * 1024 * 1024:
            raise ValueError(f"max_heap_bytes {self.max_heap_bytes} is below 16 MiB: Envoy could not start")
        if self.max_connections < 1:
            raise ValueError(f"max_connections {self.max_connections} must be positive")


def _pack(msg: object) -> any_pb2.Any:
    a = any_pb2.Any()
    a.Pack(msg)  # type: ignore[arg-type]
    return a


def grpc_cluster(name: str, addr: Address) -> cluster_pb2.Cluster:
    """A cluster for a gRPC server of ours: HTTP/2 is mandatory (without it every ext_proc call fails with 500)."""
    return _local_cluster(name, addr, http2=True)


def _local_cluster(name: str, addr: Address, *, http2: bool) -> cluster_pb2.Cluster:
    """A cluster for one server of ours in the pod; HTTP/1.1 (Envoy's default) unless `http2`."""
    c = cluster_pb2.Cluster(
        name=name,
        type=cluster_pb2.Cluster.STATIC,
        connect_timeout=duration_pb2.Duration(nanos=250_000_000),
        load_assignment=endpoint_pb2.ClusterLoadAssignment(
            cluster_name=name,
            endpoints=[
                endpoint_components_pb2.LocalityLbEndpoints(
                    lb_endpoints=[
                        endpoint_components_pb2.LbEndpoint(
                            endpoint=endpoint_components_pb2.Endpoint(address=addr.proto())
                        )
                    ]
                )
            ],
        ),
        # One ext_proc stream per HTTP request: the default 1024 concurrent requests would fail open under load.
        circuit_breakers=circuit_breaker_pb2.CircuitBreakers(
            thresholds=[
                circuit_breaker_pb2.CircuitBreakers.Thresholds(
                    max_requests=wrappers_pb2.UInt32Value(value=100_000),
                    max_pending_requests=wrappers_pb2.UInt32Value(value=100_000),
                )
            ]
        ),
    )
    if http2:
        speak_http2(c)
    return c


def extproc_cluster(addr: Address, transport: ExtProcTransport) -> cluster_pb2.Cluster:
    """The processor's ext_proc cluster: gRPC (HTTP/2), or HTTP/1.1 for http_service, whose client sends one request
    at a time per connection (the pool opens as many as requests in flight, bounded by the circuit breakers)."""
    return _local_cluster(EXTPROC_CLUSTER, addr, http2=transport is ExtProcTransport.GRPC)


def _duration_ms(ms: int) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def ext_proc_filter(
    message_timeout_ms: int, transport: ExtProcTransport = ExtProcTransport.GRPC, listener_port: int | None = None
) -> ext_proc_pb2.ExternalProcessor:
    """The filter; its failure mode, timeout and processing mode are the same for both transports. Over http_service
    the HTTP request's own timeout is the message timeout too, so a stalled processor costs the same either way.

    `listener_port`: a Gateway listener's filter names its port to the processor in every call, as gRPC initial
    metadata (or a header of the http_service POST): configuration, so no client byte can claim another listener."""
    pm = processing_mode_pb2.ProcessingMode
    f = ext_proc_pb2.ExternalProcessor(
        failure_mode_allow=True,
        processing_mode=pm(
            request_header_mode=pm.SEND,
            response_header_mode=pm.SKIP,
            request_body_mode=pm.NONE,
            response_body_mode=pm.NONE,
            request_trailer_mode=pm.SKIP,
            response_trailer_mode=pm.SKIP,
        ),
        message_timeout=_duration_ms(message_timeout_ms),
        stat_prefix=EXTPROC_STAT_PREFIX,
        metadata_options=ext_proc_pb2.MetadataOptions(
            receiving_namespaces=ext_proc_pb2.MetadataOptions.MetadataNamespaces(untyped=[METADATA_NAMESPACE])
        ),
    )
    if listener_port is not None:
        # The route Envoy matched names the rule whose backend the processor picks (`gateway_routes.rule_of`):
        # Envoy's own configuration, sent with the request headers, never a client byte.
        f.request_attributes.append(ROUTE_NAME_ATTRIBUTE)
    if transport is ExtProcTransport.HTTP:
        uri = http_uri_pb2.HttpUri(
            uri=EXTPROC_HTTP_URI, cluster=EXTPROC_CLUSTER, timeout=_duration_ms(message_timeout_ms)
        )
        f.http_service.http_service.CopyFrom(http_service_pb2.HttpService(http_uri=uri))
        if listener_port is not None:
            f.http_service.http_service.request_headers_to_add.append(
                base_pb2.HeaderValueOption(
                    header=base_pb2.HeaderValue(key=LISTENER_PORT_METADATA, value=str(listener_port)),
                    append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD,
                )
            )
    else:
        f.grpc_service.envoy_grpc.cluster_name = EXTPROC_CLUSTER
        if listener_port is not None:
            f.grpc_service.initial_metadata.append(
                base_pb2.HeaderValue(key=LISTENER_PORT_METADATA, value=str(listener_port))
            )
    return f


def access_log(path: str) -> accesslog_pb2.AccessLog:
    fmt = struct_pb2.Struct()
    fmt.update(ACCESS_LOG_FORMAT)
    return accesslog_pb2.AccessLog(
        name="envoy.access_loggers.file",
        typed_config=_pack(
            file_pb2.FileAccessLog(
                path=path, log_format=substitution_format_string_pb2.SubstitutionFormatString(json_format=fmt)
            )
        ),
    )


def _seconds(s: int) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=s)


def _drop_client_address_headers() -> core_extension_pb2.TypedExtensionConfig:
    """An early header mutation: runs before Envoy's own X-Forwarded-For handling, unlike any route or filter."""
    return core_extension_pb2.TypedExtensionConfig(
        name="trafficsplit.drop_client_address_headers",
        typed_config=_pack(
            header_mutation_pb2.HeaderMutation(
                mutations=[mutation_rules_pb2.HeaderMutation(remove=h) for h in CLIENT_ADDRESS_HEADERS]
            )
        ),
    )


def http_listener(opts: BootstrapOptions, gateway: GatewayListener | None = None) -> listener_pb2.Listener:
    """The chart gateway's listener at `opts.listen`, or a Gateway data plane's listener `gateway` (its port named to
    the processor)."""
    hcm_t = hcm_pb2.HttpConnectionManager
    hcm = hcm_t(
        access_log=[access_log(opts.access_log)],
        stat_prefix=HCM_STAT_PREFIX,
        codec_type=hcm_t.AUTO,
        rds=hcm_pb2.Rds(
            config_source=ads_source(),
            route_config_name=ROUTE_CONFIG_NAME if gateway is None else route_config_name(gateway.port),
        ),
        # The client is the TCP peer (or the address `xff_num_trusted_hops` trusted proxies name): Envoy sets
        # X-Forwarded-For / X-Envoy-External-Address from it and sanitises the x-envoy-* headers a client sent.
        use_remote_address=wrappers_pb2.BoolValue(value=True),
        xff_num_trusted_hops=opts.xff_num_trusted_hops,
        # One path for Envoy and the backend: RFC 3986 normalisation, `//` merged, and an escaped slash answered
        # with a redirect to the unescaped path (browsers follow it; a path that differs per party is the
        # path-confusion attack the edge guide warns about).
        normalize_path=wrappers_pb2.BoolValue(value=True),
        merge_slashes=True,
        path_with_escaped_slashes_action=hcm_t.UNESCAPE_AND_REDIRECT,
        common_http_protocol_options=protocol_pb2.HttpProtocolOptions(
            idle_timeout=_seconds(3600),
            # A backend that reads `x_user` as `x-user` would take a client's header for one Envoy never checked.
            headers_with_underscores_action=protocol_pb2.HttpProtocolOptions.REJECT_REQUEST,
        ),
        http2_protocol_options=protocol_pb2.Http2ProtocolOptions(
            max_concurrent_streams=wrappers_pb2.UInt32Value(value=100),
            initial_stream_window_size=wrappers_pb2.UInt32Value(value=64 * 1024),
            initial_connection_window_size=wrappers_pb2.UInt32Value(value=1024 * 1024),
        ),
        # Slow-loris: a client gets 10 s for its headers; an idle stream is closed after 5 minutes.
        request_headers_timeout=_seconds(10),
        stream_idle_timeout=_seconds(300),
        http_filters=[
            # A Gateway rule's CORS policy (its routes' per-filter config; a route without one is untouched):
            # first, so Envoy answers a preflight itself and the processor never sees it.
            *([] if gateway is None else [hcm_pb2.HttpFilter(name=CORS_FILTER, typed_config=_pack(cors_pb2.Cors()))]),
            hcm_pb2.HttpFilter(
                name=EXTPROC_FILTER,
                typed_config=_pack(
                    ext_proc_filter(
                        opts.message_timeout_ms,
                        opts.extproc_transport,
                        None if gateway is None else gateway.port,
                    )
                ),
            ),
            hcm_pb2.HttpFilter(name="envoy.filters.http.router", typed_config=_pack(router_pb2.Router())),
        ],
    )
    if gateway is not None:
        # The Host goes to the backend as the client sent it, port included (route matching ignores the port; a
        # redirect names the spec's port explicitly: gateway_routes). WebSocket upgrades are Envoy's, as in every
        # Gateway API implementation on Envoy.
        hcm.upgrade_configs.append(hcm_pb2.HttpConnectionManager.UpgradeConfig(upgrade_type="websocket"))
    if opts.xff_num_trusted_hops == 0:
        hcm.early_header_mutation_extensions.append(_drop_client_address_headers())
    hcm_filter = listener_components_pb2.Filter(
        name="envoy.filters.network.http_connection_manager", typed_config=_pack(hcm)
    )
    listener = listener_pb2.Listener(
        name=LISTENER_NAME if gateway is None else gateway.name,
        address=(opts.listen if gateway is None else gateway.bind).proto(),
        per_connection_buffer_limit_bytes=wrappers_pb2.UInt32Value(value=BUFFER_LIMIT_BYTES),
    )
    if gateway is None or not gateway.tls_hosts:
        listener.filter_chains.append(listener_components_pb2.FilterChain(filters=[hcm_filter]))
        return listener
    # HTTPS: SNI picks the chain (Envoy prefers an exact name, then the longest wildcard, then the chain without
    # server_names), so each hostname is served its own listener's certificate.
    listener.listener_filters.append(
        listener_components_pb2.ListenerFilter(
            name="envoy.filters.listener.tls_inspector", typed_config=_pack(tls_inspector_pb2.TlsInspector())
        )
    )
    for host in gateway.tls_hosts:
        chain = listener_components_pb2.FilterChain(filters=[hcm_filter], transport_socket=tls_socket(gateway, host))
        if host != "*":
            chain.filter_chain_match.server_names.append(host)
        listener.filter_chains.append(chain)
    return listener


def tls_socket(gateway: GatewayListener, host: str) -> base_pb2.TransportSocket:
    """TLS terminated with the certificate of the Gateway listener for (port, host), sent over SDS (ADS)."""
    ctx = tls_pb2.DownstreamTlsContext(
        common_tls_context=tls_pb2.CommonTlsContext(
            tls_certificate_sds_secret_configs=[
                secret_pb2.SdsSecretConfig(
                    name=secret_name(gateway.port, None if host == "*" else host), sds_config=ads_source()
                )
            ],
            alpn_protocols=["h2", "http/1.1"],
        )
    )
    if gateway.client_certificates is not None:
        # The mode is the listener's (require_client_certificate is no SDS field); the trust anchors come over SDS
        # with the generation, merged into this default. Every chain of the port validates alike, so a connection
        # coalesced across hostnames (HTTP/2) never skips a validation another hostname of the port has.
        optional = gateway.client_certificates is ClientCertificates.OPTIONAL
        verification = (
            tls_common_pb2.CertificateValidationContext.ACCEPT_UNTRUSTED
            if optional
            else tls_common_pb2.CertificateValidationContext.VERIFY_TRUST_CHAIN
        )
        ctx.require_client_certificate.value = not optional
        ctx.common_tls_context.combined_validation_context.CopyFrom(
            tls_pb2.CommonTlsContext.CombinedCertificateValidationContext(
                default_validation_context=tls_common_pb2.CertificateValidationContext(
                    trust_chain_verification=verification
                ),
                validation_context_sds_secret_config=secret_pb2.SdsSecretConfig(
                    name=validation_secret_name(gateway.port), sds_config=ads_source()
                ),
            )
        )
    return base_pb2.TransportSocket(name="envoy.transport_sockets.tls", typed_config=_pack(ctx))


def overload_manager(opts: BootstrapOptions) -> overload_pb2.OverloadManager:
    """Envoy's edge example: shrink the heap at 95 % of the ceiling, stop accepting requests at 98 %; and the global
    connection limit, enforced by the listener (new connections beyond it are closed at accept)."""

    def action(name: str, threshold: float) -> overload_pb2.OverloadAction:
        return overload_pb2.OverloadAction(
            name=name,
            triggers=[
                overload_pb2.Trigger(name=HEAP_MONITOR, threshold=overload_pb2.ThresholdTrigger(value=threshold))
            ],
        )

    return overload_pb2.OverloadManager(
        refresh_interval=duration_pb2.Duration(nanos=250_000_000),
        resource_monitors=[
            overload_pb2.ResourceMonitor(
                name=HEAP_MONITOR,
                typed_config=_pack(fixed_heap_pb2.FixedHeapConfig(max_heap_size_bytes=opts.max_heap_bytes)),
            ),
            overload_pb2.ResourceMonitor(
                name=CONNECTIONS_MONITOR,
                typed_config=_pack(
                    downstream_connections_pb2.DownstreamConnectionsConfig(
                        max_active_downstream_connections=opts.max_connections
                    )
                ),
            ),
        ],
        actions=[
            action("envoy.overload_actions.shrink_heap", 0.95),
            action("envoy.overload_actions.stop_accepting_requests", 0.98),
        ],
    )


def stats_config(opts: BootstrapOptions) -> stats_pb2.StatsConfig | None:
    """None keeps Envoy's default (every stat); without backend cluster stats, a matcher that never creates them."""
    if opts.backend_cluster_stats:
        return None
    backends = string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=BACKEND_CLUSTER_STATS_REGEX))
    return stats_pb2.StatsConfig(
        stats_matcher=stats_pb2.StatsMatcher(exclusion_list=string_pb2.ListStringMatcher(patterns=[backends]))
    )


def ads_retry_policy() -> base_pb2.RetryPolicy:
    """How soon Envoy reconnects its ADS stream after losing it (a processor restart): every 100 ms doubling, at most
    every `ADS_RETRY_MAX_MS`, jittered. Envoy's default (0.5 s doubling to 30 s) grows while the processor starts, and
    a restarted processor can take no publish until Envoy is back (docs/dataplane.md, "Failure behaviour", the
    processor-restarted row)."""
    return base_pb2.RetryPolicy(
        retry_back_off=backoff_pb2.BackoffStrategy(
            base_interval=_duration_ms(ADS_RETRY_BASE_MS), max_interval=_duration_ms(ADS_RETRY_MAX_MS)
        )
    )


def bootstrap(opts: BootstrapOptions) -> bootstrap_pb2.Bootstrap:
    b = bootstrap_pb2.Bootstrap(
        node=base_pb2.Node(id=opts.node_id, cluster=opts.cluster),
        overload_manager=overload_manager(opts),
        admin=bootstrap_pb2.Admin(address=opts.admin.proto()),
        static_resources=bootstrap_pb2.Bootstrap.StaticResources(
            listeners=[http_listener(opts, g) for g in opts.listeners] or [http_listener(opts)],
            clusters=[extproc_cluster(opts.extproc, opts.extproc_transport), grpc_cluster(ADS_CLUSTER, opts.ads)],
        ),
        dynamic_resources=bootstrap_pb2.Bootstrap.DynamicResources(
            ads_config=config_source_pb2.ApiConfigSource(
                api_type=config_source_pb2.ApiConfigSource.GRPC,
                transport_api_version=2,
                grpc_services=[
                    grpc_service_pb2.GrpcService(
                        envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(
                            cluster_name=ADS_CLUSTER, retry_policy=ads_retry_policy()
                        )
                    )
                ],
                set_node_on_first_message_only=True,
            ),
            cds_config=ads_source(),
        ),
    )
    stats = stats_config(opts)
    if stats is not None:
        b.stats_config.CopyFrom(stats)
    return b


def bootstrap_json(opts: BootstrapOptions) -> str:
    """The bootstrap as JSON (Envoy reads JSON as YAML), field names as in Envoy's docs, keys sorted for goldens."""
    return json_format.MessageToJson(bootstrap(opts), preserving_proto_field_name=True, sort_keys=True, indent=2) + "\n"
