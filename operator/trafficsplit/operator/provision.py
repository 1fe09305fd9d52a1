"""The data plane of one Gateway, rendered: a Gateway, its class's parameters and the operator's settings → the
Kubernetes objects that run it. Pure: no I/O (the `Provisioner` in provisioner.py applies what this returns).

What a data-plane pod is stays the chart's: the operator reads the chart's own `gateway.*` values, the publish
port's Secrets and the security contexts from the settings file the chart renders (`--dataplane-settings`,
templates/operator-dataplane-configmap.yaml), and builds the same Envoy + extproc containers the chart's
gateway Deployment has. tests/integration/test_provision_chart.py renders both and compares the containers, so the
two cannot drift. A GatewayParameters object overrides the per-Gateway part (replicas, resources, Service type and
annotations, Envoy's settings); the rest is the installation's.

Every object lives in the operator's namespace and carries `dataplane_names.selector_labels` (owner references
cannot cross namespaces, so cleanup finds a deleted Gateway's objects by label).

Cookie keys: each Gateway's data plane seals Cookie sessionPersistence (sticky.mode persistent) with HMAC keys of its
own, in a Secret beside the rest of its data plane (`cookie_keys_secret_name`), which the extproc mounts as
`--cookie-key-file` and re-reads when the kubelet updates it. The keys are random and written once; the provisioner
reads them back on every pass, so a restarted operator keeps them. `cookie_keys_step` is the rotation, a pure
function of the time: every `KEY_ROTATION_SECONDS` a fresh key is first staged (verified by every replica, not yet
signing) and `KEY_STAGING_SECONDS` later it signs, the old current key staying accepted as the previous one for
another period. Staging first means no replica ever meets a cookie sealed with a key it has not loaded yet, whatever
order the kubelets update the pods' volumes in.

Listener ports: each distinct port of the Gateway's listeners is one Service port and one Envoy listener. Envoy runs
as a non-root user with every capability dropped, so it cannot bind a port below 1024: such a port is served on
`port + 10000` inside the pod (as Envoy Gateway does) and the Service maps it back. A port that would land on one of
the pod's own ports (the extproc's, Envoy's admin) or on another listener's is refused with `ProvisionError`.
"""

from __future__ import annotations

import base64
import binascii
import copy
import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from trafficsplit.core.gatewayapi.objects import Gateway
from trafficsplit.core.gatewayapi.parameters import GatewayParameters, Resources
from trafficsplit.core.model.persistent import MIN_KEY_BYTES
from trafficsplit.operator.dataplane_names import (
    COMPONENT,
    GATEWAY_NAME_ANNOTATION,
    GATEWAY_NAMESPACE_ANNOTATION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    PUBLISH_PORT_NAME,
    dataplane_name,
    publish_service_name,
    selector_labels,
)

# Pod-internal addresses, fixed as in the chart (templates/gateway-deployment.yaml) and the bootstrap it ships.
EXTPROC_LISTEN = 9001
EXTPROC_HTTP_LISTEN = 9005
ENVOY_ADMIN = 9901
PRIVILEGED_SHIFT = 10000
TOKEN_DIR = "/var/run/secrets/trafficsplit.dev/publish"
TLS_DIR = "/var/run/secrets/trafficsplit.dev/publish-tls"
COOKIE_KEYS_DIR = "/etc/trafficsplit/cookie-keys"
BOOTSTRAP_DIR = "/etc/trafficsplit/envoy"
HCM = "envoy.filters.network.http_connection_manager"
BACKEND_STATS_REGEX = r"cluster\.[a-z0-9-]+/.*"  # the chart's (and wire.bootstrap.BACKEND_CLUSTER_STATS_REGEX)
MAX_SETTINGS_BYTES = 1 << 20
# A Gateway data plane's Envoy listeners and how each names its port to the processor: wire.bootstrap's
# GATEWAY_LISTENER_PREFIX and wire.envoy's LISTENER_PORT_METADATA (the operator does not import Envoy's side; the
# bootstrap test compares the whole document with the generator's).
GATEWAY_LISTENER_PREFIX = "trafficsplit_http_"
LISTENER_PORT_HEADER = "x-trafficsplit-listener-port"
# An HTTPS port's certificates over SDS: wire.envoy's secret_name (`trafficsplit_tls_<port>_<hostname|*>`).
SECRET_PREFIX = "trafficsplit_tls_"


# The cookie keys Secret (see the module docstring). The keys are hex text: the key file is line-based, and a key is
# its line's bytes (core/model/persistent.py CookieSigner.from_text), so 32 random bytes make a 64-byte HMAC key.
COOKIE_KEYS_TYPE = "trafficsplit.dev/cookie-keys"  # not kubernetes.io/tls: the operator's TLS Secret watch drops it
COOKIE_KEYS_FILE = "keys"  # what the extproc reads: the signing key, then the other accepted one
COOKIE_KEYS_SINCE_ANNOTATION = "trafficsplit.dev/cookie-keys-since"  # unix seconds of the last rotation step
COOKIE_KEY_BYTES = 32
KEY_ROTATION_SECONDS = 7 * 24 * 3600  # a key signs for a week, then verifies for another
# Between staging a key and signing with it: the kubelet's Secret volume sync (about a minute by default), the
# extproc's re-read (KEY_FILE_POLL_SECONDS there) and the operator's own re-check period, with room to spare.
KEY_STAGING_SECONDS = 15 * 60
_HEX_KEY = re.compile(rf"[0-9a-f]{{{2 * MIN_KEY_BYTES},256}}")


class ProvisionError(ValueError):
    """A Gateway this renderer cannot give a data plane (a listener port that collides); the message says why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DataplaneSettings:
    """The installation's side of every data plane: the chart's values as the settings file carries them."""

    namespace: str
    gateway: Mapping[str, Any]  # the chart's .Values.gateway (images, extproc and envoy settings, pod placement)
    extproc_image: str
    envoy_image: str
    publish_port: int
    token_secret: str
    tls_secret: str | None  # None: plaintext publish (--insecure-publish)
    service_account: str
    pod_security_context: Mapping[str, Any]
    container_security_context: Mapping[str, Any]
    app_user: int
    envoy_user: int
    image_pull_secrets: tuple[Mapping[str, Any], ...]
    operator_labels: Mapping[str, str]  # the operator pods' selector: the only peers of the publish port
    bootstrap: Mapping[str, Any]  # the extproc's own bootstrap for the transport (files/envoy-bootstrap*.json)
    labels: Mapping[str, str] = field(default_factory=dict)  # extra labels on every object (the chart's part-of)

    @property
    def transport(self) -> str:
        return str(self.gateway["extproc"]["transport"])


def _need(doc: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = doc.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise ValueError(f"dataplane settings: {where}{key} is missing or not a {getattr(kind, '__name__', kind)}")
    return value


def parse_settings(text: str, bootstrap_text: str) -> DataplaneSettings:
    """The settings file the chart renders and the bootstrap file it ships → DataplaneSettings. Both are the
    installation's own (a ConfigMap only the release writes), still bounded and type-checked: a wrong file stops
    the operator at start with the field named, never half-provisions a Gateway."""
    if len(text) > MAX_SETTINGS_BYTES or len(bootstrap_text) > MAX_SETTINGS_BYTES:
        raise ValueError("dataplane settings: a file is over 1 MiB")
    doc = json.loads(text)
    bootstrap = json.loads(bootstrap_text)
    if not isinstance(doc, dict) or not isinstance(bootstrap, dict):
        raise ValueError("dataplane settings: expected JSON objects")
    gw = _need(doc, "gateway", dict, "")
    for key in ("extproc", "envoy", "service", "podDisruptionBudget", "networkPolicy"):
        _need(gw, key, dict, "gateway.")
    sc = _need(doc, "securityContext", dict, "")
    tls = doc.get("tlsSecret")
    settings = DataplaneSettings(
        namespace=_need(doc, "namespace", str, ""),
        gateway=gw,
        extproc_image=_need(doc, "extprocImage", str, ""),
        envoy_image=_need(doc, "envoyImage", str, ""),
        publish_port=_need(doc, "publishPort", int, ""),
        token_secret=_need(doc, "tokenSecret", str, ""),
        tls_secret=tls if isinstance(tls, str) and tls else None,
        service_account=_need(doc, "serviceAccount", str, ""),
        pod_security_context=_need(sc, "pod", dict, "securityContext."),
        container_security_context=_need(sc, "container", dict, "securityContext."),
        app_user=_need(sc, "appUser", int, "securityContext."),
        envoy_user=_need(sc, "envoyUser", int, "securityContext."),
        image_pull_secrets=tuple(doc.get("imagePullSecrets") or ()),
        operator_labels={str(k): str(v) for k, v in _need(doc, "operatorLabels", dict, "").items()},
        bootstrap=bootstrap,
        labels={str(k): str(v) for k, v in (doc.get("labels") or {}).items()},
    )
    _listener(bootstrap)  # the bootstrap has the shape edited below, or the operator refuses to start
    return settings


# --- cookie keys -----------------------------------------------------------------------------------------------------


def cookie_keys_secret_name(namespace: str, name: str) -> str:
    return f"{dataplane_name(namespace, name)}-cookie-keys"


@dataclass(frozen=True, slots=True, kw_only=True)
class CookieKeys:
    """A Gateway's cookie keys: `current` signs; `previous` (the key `current` replaced) is still accepted; `staged`,
    when set, is accepted and will sign once every replica has loaded it. At most one of `previous` and `staged`."""

    current: str
    previous: str | None = None
    staged: str | None = None
    since: int  # unix seconds of the step that made this state

    def __post_init__(self) -> None:
        problems = [
            f"{what}: not {2 * MIN_KEY_BYTES}..256 lowercase hex characters"
            for what, key in (("current", self.current), ("previous", self.previous), ("staged", self.staged))
            if key is not None and not _HEX_KEY.fullmatch(key)
        ]
        if self.previous is not None and self.staged is not None:
            problems.append("previous and staged: at most one (the key file holds two keys)")
        if problems:
            raise ValueError("cookie keys: " + "; ".join(problems))

    def file_text(self) -> str:
        """The extproc's `--cookie-key-file`: the signing key, then the other accepted one (staged, else previous)."""
        other = self.staged or self.previous
        return self.current + "\n" + (other + "\n" if other else "")


def cookie_keys_step(existing: CookieKeys | None, now: int, fresh: str) -> CookieKeys | None:
    """The rotation, as a function of the time: the next state of a Gateway's keys, or None when nothing is due.
    `fresh` is a new random key (the shell draws it; used only when a key is created or staged).

    - no keys yet: `fresh` signs;
    - a staged key KEY_STAGING_SECONDS old: it signs, the key it replaces is the previous one (accepted a period more);
    - the current key KEY_ROTATION_SECONDS old: `fresh` is staged (accepted, not signing), and the previous key, which
      has been accepted for a whole period since it stopped signing, is dropped.

    A `since` further in the future than a period (a clock that jumped back, an edited annotation) counts as due."""
    if existing is None:
        return CookieKeys(current=fresh, since=now)
    age = now - existing.since
    skewed = age < -KEY_ROTATION_SECONDS
    if existing.staged is not None:
        if age >= KEY_STAGING_SECONDS or skewed:
            return CookieKeys(current=existing.staged, previous=existing.current, since=now)
        return None
    if age >= KEY_ROTATION_SECONDS or skewed:
        return CookieKeys(current=existing.current, staged=fresh, since=now)
    return None


def parse_cookie_keys(secret: Mapping[str, Any] | None) -> CookieKeys | None:
    """The keys a Secret the provisioner wrote holds (as the API returns it: base64 `data`); None when there is no
    Secret or it does not hold valid keys (then new keys are made: sessions sealed with the lost ones re-session)."""
    if not secret:
        return None
    data = secret.get("data") or {}
    try:
        since = int((secret.get("metadata", {}).get("annotations") or {})[COOKIE_KEYS_SINCE_ANNOTATION])

        def key(name: str) -> str | None:
            raw = data.get(name)
            return base64.b64decode(raw, validate=True).decode("ascii") if raw else None

        current = key("current")
        if current is None:
            return None
        return CookieKeys(current=current, previous=key("previous"), staged=key("staged"), since=since)
    except (KeyError, ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        return None


def render_cookie_keys(gateway: Gateway, settings: DataplaneSettings, keys: CookieKeys) -> dict[str, Any]:
    meta = _meta(cookie_keys_secret_name(gateway.meta.namespace, gateway.meta.name), gateway, settings)
    meta["annotations"][COOKIE_KEYS_SINCE_ANNOTATION] = str(keys.since)
    fields = {"current": keys.current, "previous": keys.previous, "staged": keys.staged, COOKIE_KEYS_FILE: None}
    text = {k: v for k, v in fields.items() if v is not None}
    text[COOKIE_KEYS_FILE] = keys.file_text()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": COOKIE_KEYS_TYPE,
        # `data`, as the API returns it (not `stringData`, which it never returns): a re-apply is a no-op.
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in text.items()},
    }


# --- ports ------------------------------------------------------------------------------------------------------------


def tls_hosts(gateway: Gateway, port: int) -> tuple[str, ...]:
    """The hostnames (`*`: none) of the HTTPS listeners on `port`, in the Gateway's order, each once: the filter
    chains of its Envoy listener (`--listener PORT=HOST:PORT:https:NAME,...`). Empty unless every listener on the port
    is HTTPS (mixed protocols are a ProtocolConflict: none of them serves)."""
    on_port = [lis for lis in gateway.listeners if lis.port == port]
    if not on_port or any(lis.protocol != "HTTPS" for lis in on_port):
        return ()
    return tuple(dict.fromkeys(lis.hostname or "*" for lis in on_port))


def listener_ports(gateway: Gateway) -> tuple[int, ...]:
    """The distinct ports of the Gateway's listeners, ascending (listeners sharing a port share its Envoy listener;
    whether they may share it is the translation's conflict rule, not the data plane's)."""
    return tuple(sorted({lis.port for lis in gateway.listeners}))


def container_port(port: int) -> int:
    return port + PRIVILEGED_SHIFT if port < 1024 else port


def port_name(port: int) -> str:
    """The name of a listener port on the Service and the container (at most 15 characters, as IANA names are)."""
    return f"http-{port}"


def _container_ports(gateway: Gateway, settings: DataplaneSettings) -> dict[int, int]:
    ext = settings.gateway["extproc"]
    reserved = {
        EXTPROC_LISTEN: "the extproc's ext_proc and ADS port",
        EXTPROC_HTTP_LISTEN: "the extproc's HTTP ext_proc port",
        ENVOY_ADMIN: "Envoy's admin port",
        settings.publish_port: "the publish port",
        int(ext["healthPort"]): "the extproc's health port",
        int(ext["metricsPort"]): "the extproc's metrics port",
    }
    out: dict[int, int] = {}
    taken: dict[int, int] = {}
    for port in listener_ports(gateway):
        inner = container_port(port)
        if inner in reserved:
            raise ProvisionError(f"listener port {port} would be served on {inner}, {reserved[inner]} in the pod")
        if inner in taken:
            raise ProvisionError(f"listener ports {taken[inner]} and {port} would both be served on {inner} in the pod")
        taken[inner] = port
        out[port] = inner
    return out


# --- the bootstrap ----------------------------------------------------------------------------------------------------


def _listener(bootstrap: Mapping[str, Any]) -> Mapping[str, Any]:
    listeners = bootstrap.get("static_resources", {}).get("listeners", [])
    hcms = [
        f
        for lis in listeners
        for fc in lis.get("filter_chains", [])
        for f in fc.get("filters", [])
        if f.get("name") == HCM
    ]
    if len(listeners) != 1 or len(hcms) != 1 or "use_remote_address" not in hcms[0].get("typed_config", {}):
        raise ValueError("dataplane settings: the bootstrap does not have the shape the provisioner edits")
    return listeners[0]  # type: ignore[no-any-return]


def _timeout(ms: int) -> str:
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms // 1000}.{ms % 1000:03d}s"


def render_bootstrap(gateway: Gateway, params: GatewayParameters, settings: DataplaneSettings) -> dict[str, Any]:
    """The extproc's bootstrap with what the chart's bootstrap template sets (the same edits, in the same form), from
    the parameters or the chart's values, and one Gateway listener per listener port: the document the extproc's
    own generator writes for those options (tests/unit/test_provision.py compares them)."""
    b = copy.deepcopy(dict(settings.bootstrap))
    envoy = settings.gateway["envoy"]
    template = _listener(b)
    hcm = next(f for fc in template["filter_chains"] for f in fc["filters"] if f["name"] == HCM)["typed_config"]
    timeout = _timeout(_pick(params.message_timeout_ms, envoy["messageTimeoutMs"]))
    for f in hcm["http_filters"]:
        if f["name"] == "envoy.filters.http.ext_proc":
            f["typed_config"]["message_timeout"] = timeout
            uri = f["typed_config"].get("http_service", {}).get("http_service", {}).get("http_uri")
            if uri is not None:
                uri["timeout"] = timeout
    hops = _pick(params.xff_num_trusted_hops, envoy["xffNumTrustedHops"])
    if hops > 0:
        hcm["xff_num_trusted_hops"] = hops
        hcm.pop("early_header_mutation_extensions", None)
    overload = envoy["overload"]
    for m in b.get("overload_manager", {}).get("resource_monitors", []):
        if m["name"] == "envoy.resource_monitors.fixed_heap":
            m["typed_config"]["max_heap_size_bytes"] = str(
                _pick(params.max_heap_size_bytes, overload["maxHeapSizeBytes"])
            )
        elif m["name"] == "envoy.resource_monitors.global_downstream_max_connections":
            conns = _pick(params.max_connections, overload["maxConnections"])
            m["typed_config"]["max_active_downstream_connections"] = str(conns)
    stats = params.backend_cluster_stats
    if stats is None:
        stats = str(envoy.get("backendClusterStats")).lower() != "false"
    if not stats:
        b["stats_config"] = {
            "stats_matcher": {"exclusion_list": {"patterns": [{"safe_regex": {"regex": BACKEND_STATS_REGEX}}]}}
        }
    b["static_resources"]["listeners"] = [
        _gateway_listener(template, port, inner, tls_hosts(gateway, port))
        for port, inner in _container_ports(gateway, settings).items()
    ]
    return b


def _gateway_listener(template: Mapping[str, Any], port: int, inner: int, https: Sequence[str] = ()) -> dict[str, Any]:
    """The chart's listener as a Gateway data plane's listener for `port`, bound at `inner`: what the extproc's
    `--print-bootstrap --listener PORT=0.0.0.0:INNER` writes (a test compares them), its ext_proc filter naming the
    port to the processor (gRPC initial metadata, or a header of the http_service POST) and allowed to set routing
    headers (a URLRewrite's host)."""
    lis = copy.deepcopy(dict(template))
    lis["name"] = f"{GATEWAY_LISTENER_PREFIX}{port}"
    lis["address"]["socket_address"]["port_value"] = inner
    hcm = next(f for fc in lis["filter_chains"] for f in fc["filters"] if f["name"] == HCM)["typed_config"]
    for f in hcm["http_filters"]:
        if f["name"] != "envoy.filters.http.ext_proc":
            continue
        ext = f["typed_config"]
        ext["mutation_rules"] = {"allow_all_routing": True}
        if "http_service" in ext:
            header = {"key": LISTENER_PORT_HEADER, "value": str(port)}
            ext["http_service"]["http_service"]["request_headers_to_add"] = [
                {"header": header, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
            ]
        else:
            ext["grpc_service"]["initial_metadata"] = [{"key": LISTENER_PORT_HEADER, "value": str(port)}]
    if https:
        chain = lis["filter_chains"][0]
        lis["listener_filters"] = [
            {
                "name": "envoy.filters.listener.tls_inspector",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector"
                },
            }
        ]
        lis["filter_chains"] = [_tls_chain(chain, port, host) for host in https]
    return lis


def _tls_chain(chain: Mapping[str, Any], port: int, host: str) -> dict[str, Any]:
    """The listener's chain terminating TLS for SNI `host` (`*`: any) with the certificate SDS sends for it."""
    out = copy.deepcopy(dict(chain))
    if host != "*":
        out["filter_chain_match"] = {"server_names": [host]}
    sds = {"ads": {}, "initial_fetch_timeout": "1s", "resource_api_version": "V3"}
    out["transport_socket"] = {
        "name": "envoy.transport_sockets.tls",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
            "common_tls_context": {
                "alpn_protocols": ["h2", "http/1.1"],
                "tls_certificate_sds_secret_configs": [{"name": f"{SECRET_PREFIX}{port}_{host}", "sds_config": sds}],
            },
        },
    }
    return out


# --- the objects ------------------------------------------------------------------------------------------------------


_T = TypeVar("_T")


def _pick(override: _T | None, default: Any) -> _T:
    return default if override is None else override


def _resources(override: Resources, default: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy({k: dict(v) for k, v in default.items()})
    for side, key, value in (
        ("requests", "cpu", override.requests_cpu),
        ("requests", "memory", override.requests_memory),
        ("limits", "cpu", override.limits_cpu),
        ("limits", "memory", override.limits_memory),
    ):
        if value is not None:
            out.setdefault(side, {})[key] = value
    return out


def _container_sc(settings: DataplaneSettings, uid: int) -> dict[str, Any]:
    return {**copy.deepcopy(dict(settings.container_security_context)), "runAsUser": uid, "runAsGroup": uid,
            "runAsNonRoot": True}  # fmt: skip


def extproc_container(settings: DataplaneSettings, gateway: Gateway | None = None) -> dict[str, Any]:
    g = settings.gateway
    ext = g["extproc"]
    tls = settings.tls_secret is not None
    args = [f"--listen=127.0.0.1:{EXTPROC_LISTEN}"]
    if settings.transport == "http":
        args += ["--ext-proc-transport=http", f"--ext-proc-http-listen=127.0.0.1:{EXTPROC_HTTP_LISTEN}"]
    args += [
        f"--publish=0.0.0.0:{settings.publish_port}",
        f"--health=$(POD_IP):{ext['healthPort']}",
        f"--metrics=0.0.0.0:{ext['metricsPort']}",
        # Envoy's fail-open counters, read from its loopback admin at scrape time (as the chart's gateway does).
        f"--envoy-stats=127.0.0.1:{ENVOY_ADMIN}",
        f"--token-file={TOKEN_DIR}/token",
    ]
    if tls:
        args += [f"--tls-cert={TLS_DIR}/tls.crt", f"--tls-key={TLS_DIR}/tls.key", f"--tls-client-ca={TLS_DIR}/ca.crt"]
    else:
        args.append("--insecure-publish")
    args += [
        "--replica=$(POD_NAME)",
        f"--drain-seconds={ext['drainSeconds']}",
        f"--session-idle-seconds={ext['sessionIdleSeconds']}",
    ]
    if ext.get("cookieKeysSecret"):
        args.append(f"--cookie-key-file={COOKIE_KEYS_DIR}/keys")
    args.append(f"--log-level={ext['logLevel']}")
    if gateway is not None:  # its replicas refuse any other Gateway's generation
        args.append(f"--gateway={gateway.meta.namespace}/{gateway.meta.name}")
    args += [str(a) for a in ext.get("extraArgs") or ()]
    mounts: list[dict[str, Any]] = [{"name": "publish-token", "mountPath": TOKEN_DIR, "readOnly": True}]
    if tls:
        mounts.append({"name": "publish-tls", "mountPath": TLS_DIR, "readOnly": True})
    if ext.get("cookieKeysSecret"):
        mounts.append({"name": "cookie-keys", "mountPath": COOKIE_KEYS_DIR, "readOnly": True})
    mounts.append({"name": "tmp", "mountPath": "/tmp"})
    return {
        "name": "extproc",
        "image": settings.extproc_image,
        "imagePullPolicy": ext["image"]["pullPolicy"],
        "args": args,
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            *copy.deepcopy(list(ext.get("extraEnv") or ())),
        ],
        "ports": [
            {"name": PUBLISH_PORT_NAME, "containerPort": settings.publish_port, "protocol": "TCP"},
            {"name": "metrics", "containerPort": ext["metricsPort"], "protocol": "TCP"},
            {"name": "health", "containerPort": ext["healthPort"], "protocol": "TCP"},
        ],
        "readinessProbe": {"grpc": {"port": ext["healthPort"]}, "periodSeconds": 2, "failureThreshold": 2},
        "livenessProbe": {
            "tcpSocket": {"port": "health"},
            "initialDelaySeconds": 5,
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "resources": copy.deepcopy(dict(ext["resources"])),
        "securityContext": _container_sc(settings, settings.app_user),
        "volumeMounts": mounts,
    }


def envoy_container(settings: DataplaneSettings, ports: Mapping[int, int]) -> dict[str, Any]:
    """Envoy as the chart runs it; `ports` maps each listener port to the port Envoy binds in the pod."""
    envoy = settings.gateway["envoy"]
    first = min(ports) if ports else None
    c: dict[str, Any] = {
        "name": "envoy",
        "image": settings.envoy_image,
        "imagePullPolicy": envoy["image"]["pullPolicy"],
        "args": [
            "--config-path",
            f"{BOOTSTRAP_DIR}/envoy.json",
            "--service-node",
            "$(POD_NAME)",
            "--concurrency",
            str(envoy["concurrency"]),
            "--log-level",
            str(envoy["logLevel"]),
            "--disable-hot-restart",
        ],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "ports": [{"name": port_name(p), "containerPort": inner, "protocol": "TCP"} for p, inner in ports.items()],
        "readinessProbe": {
            "tcpSocket": {"port": port_name(first) if first is not None else "http"},
            "periodSeconds": 2,
            "failureThreshold": 2,
        },
    }
    if int(envoy["preStopSleepSeconds"]) > 0:
        c["lifecycle"] = {"preStop": {"sleep": {"seconds": envoy["preStopSleepSeconds"]}}}
    c["resources"] = copy.deepcopy(dict(envoy["resources"]))
    c["securityContext"] = _container_sc(settings, settings.envoy_user)
    c["volumeMounts"] = [
        {"name": "bootstrap", "mountPath": BOOTSTRAP_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    return c


def _with_params(settings: DataplaneSettings, params: GatewayParameters) -> DataplaneSettings:
    """The chart's gateway values with the class's parameters laid over them."""
    g = copy.deepcopy(dict(settings.gateway))
    envoy, ext = g["envoy"], g["extproc"]
    envoy["concurrency"] = _pick(params.envoy_concurrency, envoy["concurrency"])
    if params.envoy_log_level is not None:
        envoy["logLevel"] = params.envoy_log_level.value
    envoy["preStopSleepSeconds"] = _pick(params.pre_stop_sleep_seconds, envoy["preStopSleepSeconds"])
    envoy["resources"] = _resources(params.envoy_resources, envoy["resources"])
    ext["resources"] = _resources(params.extproc_resources, ext["resources"])
    return dataclasses.replace(settings, gateway=g)


@dataclass(frozen=True, slots=True)
class Rendered:
    """The objects of one Gateway's data plane, in apply order (the ConfigMap before the pods that mount it)."""

    name: str
    objects: tuple[dict[str, Any], ...]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]


def object_labels(gateway: Gateway, settings: DataplaneSettings) -> dict[str, str]:
    ns, name = gateway.meta.namespace, gateway.meta.name
    return {**settings.labels, **selector_labels(ns, name), MANAGED_BY_LABEL: MANAGED_BY}


def _meta(
    name: str, gateway: Gateway, settings: DataplaneSettings, annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    # The user's annotations first: the Gateway's identity cannot be overwritten by a Service annotation.
    annotations = {
        **(annotations or {}),
        GATEWAY_NAMESPACE_ANNOTATION: gateway.meta.namespace,
        GATEWAY_NAME_ANNOTATION: gateway.meta.name,
    }
    return {
        "name": name,
        "namespace": settings.namespace,
        "labels": object_labels(gateway, settings),
        "annotations": annotations,
    }


def render(
    gateway: Gateway, params: GatewayParameters, settings: DataplaneSettings, keys: CookieKeys | None = None
) -> Rendered:
    """Every object of the Gateway's data plane (see the module docstring). The pods always mount the Gateway's cookie
    keys Secret; `keys` is its content (None: the Secret is left out of the objects, for a caller that only looks).
    A class whose parameters name a `cookieKeysSecret` of the user's mounts that one instead, and renders none."""
    ns, gname = gateway.meta.namespace, gateway.meta.name
    name = dataplane_name(ns, gname)
    ports = _container_ports(gateway, settings)
    merged = _with_params(settings, params)
    # The Gateway's own keys, not the chart gateway's `cookieKeysSecret`: the pod template names the Secret, never
    # its content, so a rotation rolls no pod (the extproc re-reads the file).
    own = params.cookie_keys_secret is None
    merged.gateway["extproc"]["cookieKeysSecret"] = params.cookie_keys_secret or cookie_keys_secret_name(ns, gname)
    g = merged.gateway
    selector = selector_labels(ns, gname)
    bootstrap_name = f"{name}-bootstrap"
    bootstrap_json = json.dumps(render_bootstrap(gateway, params, settings), indent=2, sort_keys=True)
    replicas = _pick(params.replicas, g["replicas"])

    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(bootstrap_name, gateway, settings),
        "data": {"envoy.json": bootstrap_json},
    }

    pod_annotations = {
        # Envoy reads its bootstrap only at start: a changed bootstrap (a listener port, a parameter) rolls the pods.
        "checksum/bootstrap": hashlib.sha256(bootstrap_json.encode()).hexdigest(),
        **{str(k): str(v) for k, v in (g.get("podAnnotations") or {}).items()},
    }
    volumes: list[dict[str, Any]] = [
        {"name": "bootstrap", "configMap": {"name": bootstrap_name}},
        {"name": "publish-token", "secret": {"secretName": settings.token_secret, "defaultMode": 0o440}},
    ]
    if settings.tls_secret is not None:
        volumes.append({"name": "publish-tls", "secret": {"secretName": settings.tls_secret, "defaultMode": 0o440}})
    cookie_keys = g["extproc"].get("cookieKeysSecret")
    if cookie_keys:
        volumes.append({"name": "cookie-keys", "secret": {"secretName": cookie_keys, "defaultMode": 0o440}})
    volumes.append({"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}})
    pod: dict[str, Any] = {
        "serviceAccountName": settings.service_account,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": g["terminationGracePeriodSeconds"],
        "securityContext": {**copy.deepcopy(dict(settings.pod_security_context)), "fsGroup": settings.app_user},
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": dict(selector)},
                        },
                    }
                ]
            }
        },
        "containers": [extproc_container(merged, gateway), envoy_container(merged, ports)],
        "volumes": volumes,
    }
    if settings.image_pull_secrets:
        pod["imagePullSecrets"] = copy.deepcopy(list(settings.image_pull_secrets))
    for key in ("priorityClassName", "nodeSelector", "tolerations"):
        if g.get(key):
            pod[key] = copy.deepcopy(g[key])
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, gateway, settings),
        "spec": {
            "replicas": replicas,
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": dict(selector)},
            # A new pod must hold a generation (be ready) before an old one goes: capacity never drops in a rollout.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": object_labels(gateway, settings), "annotations": pod_annotations},
                "spec": pod,
            },
        },
    }

    svc = g["service"]
    service_type = params.service_type.value if params.service_type is not None else str(svc["type"])
    annotations = dict(params.service_annotations or (svc.get("annotations") or {}).items())
    policy = params.external_traffic_policy or svc.get("externalTrafficPolicy")
    service_spec: dict[str, Any] = {
        "type": service_type,
        "selector": dict(selector),
        "ports": [
            {"name": port_name(p), "port": p, "targetPort": port_name(p), "protocol": "TCP", "appProtocol": "http"}
            for p in ports
        ],
    }
    if service_type != "ClusterIP" and policy:
        service_spec["externalTrafficPolicy"] = policy
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(name, gateway, settings, annotations=annotations),
        "spec": service_spec,
    }
    publish = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(publish_service_name(ns, gname), gateway, settings),
        "spec": {
            # Headless, not-ready pods included: the operator publishes to every replica, and a replica is not
            # ready until it holds its first generation (the chart's gateway-publish-service.yaml says the same).
            "type": "ClusterIP",
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": dict(selector),
            "ports": [
                {
                    "name": PUBLISH_PORT_NAME,
                    "port": settings.publish_port,
                    "targetPort": PUBLISH_PORT_NAME,
                    "protocol": "TCP",
                    "appProtocol": "grpc",
                }
            ],
        },
    }
    objects: list[dict[str, Any]] = [configmap, deployment, service, publish]
    if keys is not None and own:
        objects.insert(0, render_cookie_keys(gateway, settings, keys))  # before the pods that mount it
    if g["podDisruptionBudget"].get("enabled", True):
        objects.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": _meta(name, gateway, settings),
                # maxUnavailable 1 whatever the replica count: n-1 pods through a drain, and a single replica
                # never blocks one (a minAvailable 1 would, and the replica count here changes per class).
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": dict(selector)}},
            }
        )
    np = g["networkPolicy"]
    if np.get("enabled", True):
        http_rule: dict[str, Any] = {"ports": [{"port": port_name(p), "protocol": "TCP"} for p in ports]}
        if np.get("httpFrom"):
            http_rule["from"] = copy.deepcopy(list(np["httpFrom"]))
        ingress = [
            http_rule,
            {
                "ports": [{"port": PUBLISH_PORT_NAME, "protocol": "TCP"}],
                "from": [{"podSelector": {"matchLabels": dict(settings.operator_labels)}}],
            },
        ]
        if np.get("metricsFrom"):
            ingress.append(
                {"ports": [{"port": "metrics", "protocol": "TCP"}], "from": copy.deepcopy(list(np["metricsFrom"]))}
            )
        objects.append(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": _meta(name, gateway, settings),
                "spec": {
                    "podSelector": {"matchLabels": dict(selector)},
                    "policyTypes": ["Ingress"],
                    "ingress": ingress,
                },
            }
        )
    return Rendered(name, tuple(objects))


@dataclass(frozen=True, slots=True)
class GatewayAddress:
    """One `status.addresses[]` entry of a Gateway."""

    type: str  # IPAddress | Hostname
    value: str


def service_addresses(service: Mapping[str, Any]) -> tuple[GatewayAddress, ...]:
    """A data plane's Service → the Gateway's addresses: the load balancer's ingress when it has one, else the
    ClusterIP(s), which the local node reaches through kube-proxy. Empty while neither exists (headless or new)."""
    ingress = (service.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
    out = [
        GatewayAddress("IPAddress", i["ip"]) if i.get("ip") else GatewayAddress("Hostname", i["hostname"])
        for i in ingress
        if i.get("ip") or i.get("hostname")
    ]
    if out:
        return tuple(out)
    spec = service.get("spec") or {}
    ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    return tuple(GatewayAddress("IPAddress", ip) for ip in ips if ip and ip != "None")


# The kinds a data plane may consist of, for cleanup by label (a kind the rendering may leave out, the PDB or the
# NetworkPolicy, is still swept).
KINDS: Sequence[tuple[str, str]] = (
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("policy/v1", "PodDisruptionBudget"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("v1", "Secret"),  # the cookie keys
)
COMPONENT_SELECTOR = f"app.kubernetes.io/component={COMPONENT},{MANAGED_BY_LABEL}={MANAGED_BY}"
