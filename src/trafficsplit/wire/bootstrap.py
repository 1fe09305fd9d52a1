"""Envoy's static bootstrap for one dataplane unit, as a plain function.

Static on purpose and minimal: the HTTP listener (HTTP connection manager → ext_proc → router, routes from RDS), the
processor cluster and the ADS cluster (both HTTP/2: gRPC), and admin on loopback. Everything a generation changes
(backend clusters, endpoints, routes) comes over ADS, so a new backend needs no Envoy restart.

Choices (docs/dataplane.md says why in full):
- ext_proc fails open (`failure_mode_allow`) with a short `message_timeout`: a dead or stalled processor costs at most
  that timeout and traffic falls through to the native weighted route.
- Request headers only; every other phase is skipped, so a request costs exactly one processor message. The cookie
  reaches the response through dynamic metadata in our namespace, which must be listed in `receiving_namespaces`.
- No `strip_any_host_port`: the route configuration ignores the port when it matches hosts and leaves the header
  as the client sent it, so the processor reads the same bytes the same way (trafficsplit.core.host).
"""

from __future__ import annotations

from dataclasses import dataclass

from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.config.cluster.v3 import circuit_breaker_pb2, cluster_pb2
from envoy.config.core.v3 import address_pb2, base_pb2, config_source_pb2, grpc_service_pb2, protocol_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.extensions.filters.http.ext_proc.v3 import ext_proc_pb2, processing_mode_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2
from google.protobuf import any_pb2, duration_pb2, json_format, wrappers_pb2

from trafficsplit.wire.envoy import METADATA_NAMESPACE, ROUTE_CONFIG_NAME, ads_source

EXTPROC_CLUSTER = "trafficsplit_extproc"
ADS_CLUSTER = "trafficsplit_ads"
LISTENER_NAME = "trafficsplit_http"
HCM_STAT_PREFIX = "trafficsplit"
EXTPROC_STAT_PREFIX = "trafficsplit"
DEFAULT_MESSAGE_TIMEOUT_MS = 200


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

    def proto(self) -> address_pb2.Address:
        if self.path is not None:
            return address_pb2.Address(pipe=address_pb2.Pipe(path=self.path))
        return address_pb2.Address(socket_address=address_pb2.SocketAddress(address=self.host, port_value=self.port))


@dataclass(frozen=True)
class BootstrapOptions:
    node_id: str
    listen: Address  # the HTTP listener clients reach
    extproc: Address  # the processor's ext_proc server
    ads: Address  # the processor's ADS server (the same server in our unit, its own connection)
    admin: Address
    message_timeout_ms: int = DEFAULT_MESSAGE_TIMEOUT_MS
    cluster: str = "trafficsplit-gateway"


def _pack(msg: object) -> any_pb2.Any:
    a = any_pb2.Any()
    a.Pack(msg)  # type: ignore[arg-type]
    return a


def grpc_cluster(name: str, addr: Address) -> cluster_pb2.Cluster:
    """A cluster for a gRPC server of ours: HTTP/2 is mandatory (without it every ext_proc call fails with 500)."""
    opts = http_protocol_options_pb2.HttpProtocolOptions(
        explicit_http_config=http_protocol_options_pb2.HttpProtocolOptions.ExplicitHttpConfig(
            http2_protocol_options=protocol_pb2.Http2ProtocolOptions()
        )
    )
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
    c.typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].Pack(opts)
    return c


def ext_proc_filter(message_timeout_ms: int) -> ext_proc_pb2.ExternalProcessor:
    pm = processing_mode_pb2.ProcessingMode
    return ext_proc_pb2.ExternalProcessor(
        grpc_service=grpc_service_pb2.GrpcService(
            envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(cluster_name=EXTPROC_CLUSTER)
        ),
        failure_mode_allow=True,
        processing_mode=pm(
            request_header_mode=pm.SEND,
            response_header_mode=pm.SKIP,
            request_body_mode=pm.NONE,
            response_body_mode=pm.NONE,
            request_trailer_mode=pm.SKIP,
            response_trailer_mode=pm.SKIP,
        ),
        message_timeout=duration_pb2.Duration(
            seconds=message_timeout_ms // 1000, nanos=(message_timeout_ms % 1000) * 1_000_000
        ),
        stat_prefix=EXTPROC_STAT_PREFIX,
        metadata_options=ext_proc_pb2.MetadataOptions(
            receiving_namespaces=ext_proc_pb2.MetadataOptions.MetadataNamespaces(untyped=[METADATA_NAMESPACE])
        ),
    )


def http_listener(opts: BootstrapOptions) -> listener_pb2.Listener:
    hcm = hcm_pb2.HttpConnectionManager(
        stat_prefix=HCM_STAT_PREFIX,
        codec_type=hcm_pb2.HttpConnectionManager.AUTO,
        rds=hcm_pb2.Rds(config_source=ads_source(), route_config_name=ROUTE_CONFIG_NAME),
        http_filters=[
            hcm_pb2.HttpFilter(
                name="envoy.filters.http.ext_proc", typed_config=_pack(ext_proc_filter(opts.message_timeout_ms))
            ),
            hcm_pb2.HttpFilter(name="envoy.filters.http.router", typed_config=_pack(router_pb2.Router())),
        ],
    )
    return listener_pb2.Listener(
        name=LISTENER_NAME,
        address=opts.listen.proto(),
        filter_chains=[
            listener_components_pb2.FilterChain(
                filters=[
                    listener_components_pb2.Filter(
                        name="envoy.filters.network.http_connection_manager", typed_config=_pack(hcm)
                    )
                ]
            )
        ],
    )


def bootstrap(opts: BootstrapOptions) -> bootstrap_pb2.Bootstrap:
    b = bootstrap_pb2.Bootstrap(
        node=base_pb2.Node(id=opts.node_id, cluster=opts.cluster),
        admin=bootstrap_pb2.Admin(address=opts.admin.proto()),
        static_resources=bootstrap_pb2.Bootstrap.StaticResources(
            listeners=[http_listener(opts)],
            clusters=[grpc_cluster(EXTPROC_CLUSTER, opts.extproc), grpc_cluster(ADS_CLUSTER, opts.ads)],
        ),
        dynamic_resources=bootstrap_pb2.Bootstrap.DynamicResources(
            ads_config=config_source_pb2.ApiConfigSource(
                api_type=config_source_pb2.ApiConfigSource.GRPC,
                transport_api_version=2,
                grpc_services=[
                    grpc_service_pb2.GrpcService(
                        envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(cluster_name=ADS_CLUSTER)
                    )
                ],
                set_node_on_first_message_only=True,
            ),
            cds_config=ads_source(),
        ),
    )
    return b


def bootstrap_json(opts: BootstrapOptions) -> str:
    """The bootstrap as JSON (Envoy reads JSON as YAML), field names as in Envoy's docs, keys sorted for goldens."""
    return json_format.MessageToJson(bootstrap(opts), preserving_proto_field_name=True, sort_keys=True, indent=2) + "\n"
