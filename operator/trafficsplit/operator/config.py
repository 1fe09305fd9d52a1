"""The operator's settings from flags and environment variables. Pure: parsing only, no I/O.

Every flag has an environment variable (`TRAFFICSPLIT_*`) so the chart can set them without rewriting `args`.
Two modes: Kubernetes (watch the API server) and local (`--file-source DIR`, no API server at all). Where
TrafficSplits are published is said explicitly: `--gateway-service` (discovery), `--dataplane` (static replicas), or
`--no-gateway` (Gateway API only: nothing serves TrafficSplits, and each one's status says so).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trafficsplit.operator.cluster import Replica, parse_static_replicas
from trafficsplit.operator.publisher import ClientTlsFiles


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    namespaces: tuple[str, ...]  # empty: all namespaces
    gateway_service: str | None
    no_gateway: bool = False  # no data plane for TrafficSplits: only the Gateways the operator serves carry traffic
    gateway_namespace: str
    publish_port_name: str
    static_dataplanes: tuple[Replica, ...]
    token_file: str | None
    tls: ClientTlsFiles | None  # None: plaintext publish API
    identity: str
    leader_election: bool
    lease_name: str
    lease_namespace: str
    lease_duration: float
    lease_renew: float
    file_source: str | None
    empty_grace: float
    debounce: float
    poll_interval: float
    publish_timeout: float
    kubeconfig: str | None
    liveness: str | None
    metrics: tuple[str, int] | None = None  # (host, port) of the Prometheus endpoint; None: not served
    gateway_api: bool  # answer our GatewayClass and provision a data plane per Gateway
    dataplane_settings: str | None  # the chart's settings file for provisioned data planes (provision.py)
    dataplane_namespace: str = "default"  # where each Gateway's data plane (and its publish Service) lives

    @property
    def local(self) -> bool:
        return self.file_source is not None

    @property
    def discovered_gateway(self) -> tuple[str, str] | None:
        """(namespace, Service) whose EndpointSlices list the TrafficSplit data plane; None: static or none."""
        if self.static_dataplanes or self.no_gateway:
            return None
        return self.gateway_namespace, self.gateway_service or ""

    @property
    def gateway_label(self) -> str:
        """The TrafficSplit data plane as the operator's metrics name it."""
        if self.static_dataplanes:
            return "static"
        return "none" if self.no_gateway else f"{self.gateway_namespace}/{self.gateway_service}"


def _env(env: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    v = env.get(f"TRAFFICSPLIT_{name}")
    return v if v not in (None, "") else default


def _split_list(text: str | None) -> list[str]:
    return [x.strip() for x in (text or "").replace(";", ",").split(",") if x.strip()]


def _host_port(text: str, flag: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise SystemExit(f"{flag}: HOST:PORT expected, got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m trafficsplit.operator",
        description="Compile TrafficSplits into generations and publish them to every dataplane replica. Kubernetes "
        "mode watches the API server; local mode (--file-source) reads a directory of TrafficSplit YAML. Every flag "
        "also reads TRAFFICSPLIT_<NAME> from the environment (shown in brackets).",
    )

    def e(name: str, default: str | None = None) -> str | None:
        return _env(env, name, default)

    p.add_argument("--namespaces", default=e("NAMESPACES", ""), help="comma list; empty = all [NAMESPACES]")
    p.add_argument("--gateway-service", default=e("GATEWAY_SERVICE"), help="the dataplane Service [GATEWAY_SERVICE]")
    p.add_argument(
        "--no-gateway",
        action="store_true",
        default=e("NO_GATEWAY", "false") == "true",
        help="no dataplane serves TrafficSplits (Gateway API only, with --gateway-api true): nothing is published for "
        "them and each one's status says Published=False, NoGateway [NO_GATEWAY=true]",
    )
    p.add_argument(
        "--gateway-namespace",
        default=e("GATEWAY_NAMESPACE", env.get("POD_NAMESPACE") or "default"),
        help="its namespace [GATEWAY_NAMESPACE, POD_NAMESPACE]",
    )
    p.add_argument("--publish-port-name", default=e("PUBLISH_PORT_NAME", "publish"), help="[PUBLISH_PORT_NAME]")
    p.add_argument(
        "--dataplane",
        action="append",
        default=_split_list(e("DATAPLANES")),
        help="static replica HOST:PORT or NAME=HOST:PORT, repeatable (instead of gateway discovery) [DATAPLANES]",
    )
    p.add_argument("--token-file", default=e("TOKEN_FILE"), help="bearer token for the publish API [TOKEN_FILE]")
    p.add_argument("--tls-ca", default=e("TLS_CA"), help="PEM CA of the replicas' publish certificates [TLS_CA]")
    p.add_argument("--tls-cert", default=e("TLS_CERT"), help="PEM client certificate for mTLS [TLS_CERT]")
    p.add_argument("--tls-key", default=e("TLS_KEY"), help="PEM key of --tls-cert [TLS_KEY]")
    p.add_argument(
        "--tls-server-name",
        default=e("TLS_SERVER_NAME"),
        help="name the replicas' certificate carries (they are dialled by pod IP) [TLS_SERVER_NAME]",
    )
    p.add_argument(
        "--identity", default=e("IDENTITY", env.get("POD_NAME") or os.uname().nodename), help="[IDENTITY, POD_NAME]"
    )
    p.add_argument(
        "--leader-election",
        default=e("LEADER_ELECTION", "true"),
        choices=["true", "false"],
        help="Lease-based leader election; only the leader publishes and writes status [LEADER_ELECTION]",
    )
    p.add_argument("--lease-name", default=e("LEASE_NAME", "trafficsplit-operator"))
    p.add_argument("--lease-namespace", default=e("LEASE_NAMESPACE", env.get("POD_NAMESPACE") or "default"))
    p.add_argument("--lease-duration", type=float, default=float(e("LEASE_DURATION", "15") or 15))
    p.add_argument("--lease-renew", type=float, default=float(e("LEASE_RENEW", "2") or 2))
    p.add_argument("--file-source", default=e("FILE_SOURCE"), help="local mode: a directory of TrafficSplit YAML")
    p.add_argument(
        "--empty-grace",
        type=float,
        default=float(e("EMPTY_GRACE", "60") or 60),
        help="local mode: seconds a split file may stay empty (or hold only comments) before its splits are "
        "withdrawn; until then its last good content keeps serving [EMPTY_GRACE]",
    )
    p.add_argument("--debounce", type=float, default=float(e("DEBOUNCE", "0.02") or 0.02), help="seconds")
    p.add_argument("--poll-interval", type=float, default=float(e("POLL_INTERVAL", "0.5") or 0.5), help="seconds")
    p.add_argument("--publish-timeout", type=float, default=float(e("PUBLISH_TIMEOUT", "5") or 5), help="seconds")
    p.add_argument("--kubeconfig", default=env.get("KUBECONFIG"))
    p.add_argument("--liveness", default=e("LIVENESS"), help="kopf liveness endpoint, e.g. http://0.0.0.0:8080/healthz")
    p.add_argument(
        "--metrics",
        default=e("METRICS"),
        help="serve Prometheus metrics on HOST:PORT (port 0: any free port, logged); unset: none [METRICS]",
    )
    p.add_argument(
        "--gateway-api",
        default=e("GATEWAY_API", "false"),
        choices=["true", "false"],
        help="answer GatewayClasses of controllerName trafficsplit.dev/gateway-controller and provision a data plane "
        "per Gateway [GATEWAY_API]",
    )
    p.add_argument(
        "--dataplane-settings",
        default=e("DATAPLANE_SETTINGS"),
        help="JSON settings of provisioned data planes, as the chart renders them [DATAPLANE_SETTINGS]",
    )
    p.add_argument(
        "--dataplane-namespace",
        default=e("DATAPLANE_NAMESPACE", env.get("POD_NAMESPACE") or "default"),
        help="the namespace of every Gateway's data plane and publish Service [DATAPLANE_NAMESPACE, POD_NAMESPACE]",
    )
    return p


def _check_no_gateway(a: argparse.Namespace, statics: Sequence[Replica]) -> None:
    """`--no-gateway` is the third answer to "where do TrafficSplits go", so it excludes the other two; and without
    Gateway API the operator would serve nothing at all."""
    if a.gateway_service or statics:
        raise SystemExit("--no-gateway excludes --gateway-service and --dataplane (it says there is no such gateway)")
    if a.file_source is not None:
        raise SystemExit("--no-gateway needs Kubernetes mode (local mode publishes to --dataplane only)")
    if a.gateway_api != "true":
        raise SystemExit("--no-gateway needs --gateway-api true: with neither, nothing would be served")


def parse_config(argv: Sequence[str], env: Mapping[str, str]) -> Config:
    a = build_parser(env).parse_args(list(argv))
    statics = parse_static_replicas(x for item in a.dataplane for x in _split_list(item))
    if a.no_gateway:
        _check_no_gateway(a, statics)
    elif a.file_source is None and not statics and not a.gateway_service:
        raise SystemExit(
            "give --gateway-service (discovery), --dataplane HOST:PORT (static replicas) or --no-gateway (Gateway API "
            "only)"
        )
    if a.file_source is not None and not statics:
        raise SystemExit("local mode (--file-source) needs --dataplane HOST:PORT")
    if a.empty_grace <= 0:
        raise SystemExit("--empty-grace must be > 0 seconds")
    if a.lease_renew <= 0 or a.lease_duration <= a.lease_renew:
        raise SystemExit("--lease-duration must exceed --lease-renew > 0")
    tls = None
    if a.tls_ca is not None:
        if (a.tls_cert is None) != (a.tls_key is None):
            raise SystemExit("--tls-cert and --tls-key go together")
        tls = ClientTlsFiles(a.tls_ca, a.tls_cert, a.tls_key, a.tls_server_name)
    elif a.tls_cert is not None or a.tls_key is not None or a.tls_server_name is not None:
        raise SystemExit("--tls-cert, --tls-key and --tls-server-name need --tls-ca")
    gateway_api = a.gateway_api == "true"
    # Without the settings file Gateways are served but not provisioned: their data planes (publish Services) are
    # made by someone else, as the tests do.
    if gateway_api and a.file_source is not None:
        raise SystemExit("--gateway-api needs Kubernetes mode")
    return Config(
        namespaces=tuple(_split_list(a.namespaces)),
        gateway_service=a.gateway_service,
        no_gateway=a.no_gateway,
        gateway_namespace=a.gateway_namespace,
        publish_port_name=a.publish_port_name,
        static_dataplanes=statics,
        token_file=a.token_file,
        tls=tls,
        identity=a.identity,
        leader_election=a.leader_election == "true" and a.file_source is None,
        lease_name=a.lease_name,
        lease_namespace=a.lease_namespace,
        lease_duration=a.lease_duration,
        lease_renew=a.lease_renew,
        file_source=a.file_source,
        empty_grace=a.empty_grace,
        debounce=a.debounce,
        poll_interval=a.poll_interval,
        publish_timeout=a.publish_timeout,
        kubeconfig=a.kubeconfig,
        liveness=a.liveness,
        metrics=_host_port(a.metrics, "--metrics") if a.metrics else None,
        gateway_api=gateway_api,
        dataplane_settings=a.dataplane_settings,
        dataplane_namespace=a.dataplane_namespace,
    )
