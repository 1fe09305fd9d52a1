"""The data plane of one Gateway, rendered: a Gateway, its class's parameters and the operator's settings → the
Kubernetes objects that run it. Pure: no I/O (the `Provisioner` in provisioner.py applies what this returns).

What a data-plane pod is stays the chart's: the operator reads the chart's own `gateway.*` values, the publish
port's Secrets and the security contexts from the settings file the chart renders (`--dataplane-settings`,
templates/operator-dataplane-configmap.yaml), and builds the same Envoy + extproc containers the chart's
gateway Deployment has. tests/integration/test_chart.py renders both and compares the containers, so the two
cannot drift. A GatewayParameters object overrides the per-Gateway part (replicas, resources, Service type and
annotations, Envoy's settings; `merge`); the rest is the installation's.

Envoy's bootstrap is made in the pod, by the one maker the chart's gateway bootstrap also comes from
(trafficsplit.wire.bootstrap): an init container of the extproc image runs `python -m trafficsplit.extproc
--print-bootstrap` with flags (`bootstrap_args`: the listeners, the processor's addresses, the Envoy values) into an
emptyDir Envoy reads. The operator writes flags, never Envoy configuration (.importlinter, operator-no-envoy), and the
bootstrap is always the one of the extproc version it runs beside. An HTTPS port's flag names its hostnames only: the
certificates reach Envoy over SDS from the processor.

Placement (the class's `spec.placement`, else the installation's `placement`): every object lives in the operator's
namespace (ControllerNamespace) or in the Gateway's own (GatewayNamespace), named by `dataplane_names.names_for`,
and carries the selector labels and the Gateway's uid (`GATEWAY_UID_LABEL`): cleanup finds a deleted Gateway's
objects by label, and the provisioner touches an object only when its uid is the Gateway's (ownership.py). In the
Gateway's namespace the objects also name the Gateway as their owner (the garbage collector removes them with it).
In either place each data plane has a publish token made for its Gateway alone (`render_publish_token`), the only
one its replicas accept: the installation's shared token is never mounted into a provisioned pod, so no Gateway's
fleet (or tenant who reads its own token) can publish to another Gateway's replicas. In the Gateway's namespace the
pods cannot mount the operator's namespace's Secrets, so with TLS they get a copy of the gateways' publish
certificate there (`render_publish_tls`), and the NetworkPolicy admits the publish port from the operator's pods by
their namespace too. An installation that did not grant the RBAC GatewayNamespace
needs (`gateway_namespace_allowed`, the chart's `gatewayAPI.dataplanes.allowGatewayNamespace`) refuses that placement
with `ProvisionError` naming `spec.placement`, rather than meeting a Forbidden per object.

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
import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from trafficsplit.core.gatewayapi.conditions import GatewayReason
from trafficsplit.core.gatewayapi.objects import Gateway, ValidationMode
from trafficsplit.core.gatewayapi.parameters import GatewayParameters, Placement, Resources
from trafficsplit.core.model.persistent import MIN_KEY_BYTES
from trafficsplit.core.model.tls import ClientCertificates
from trafficsplit.operator.dataplane_names import (
    COMPONENT,
    GATEWAY_NAME_ANNOTATION,
    GATEWAY_NAMESPACE_ANNOTATION,
    GATEWAY_UID_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    PUBLISH_PORT_NAME,
    DataplaneNames,
    dataplane_name,
    names_for,
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
MAX_SETTINGS_BYTES = 1 << 20


# The cookie keys Secret (see the module docstring). The keys are hex text: the key file is line-based, and a key is
# its line's bytes (core/model/persistent.py CookieSigner.from_text), so 32 random bytes make a 64-byte HMAC key.
COOKIE_KEYS_TYPE = "trafficsplit.dev/cookie-keys"  # not kubernetes.io/tls: the operator's TLS Secret watch drops it
COOKIE_KEYS_FILE = "keys"  # what the extproc reads: the signing key, then the other accepted one
COOKIE_KEYS_SINCE_ANNOTATION = "trafficsplit.dev/cookie-keys-since"  # unix seconds of the last rotation step
# On the pod template: the first 16 hex digits of the SHA-256 of the Gateway's publish token. The extproc reads its
# token file once, at start; a new token (its Secret lost or rewritten) so rolls the pods, which then accept it.
PUBLISH_TOKEN_DIGEST_ANNOTATION = "trafficsplit.dev/publish-token-sha256"
COOKIE_KEY_BYTES = 32
KEY_ROTATION_SECONDS = 7 * 24 * 3600  # a key signs for a week, then verifies for another
# Between staging a key and signing with it: the kubelet's Secret volume sync (about a minute by default), the
# extproc's re-read (KEY_FILE_POLL_SECONDS there) and the operator's own re-check period, with room to spare.
KEY_STAGING_SECONDS = 15 * 60
_HEX_KEY = re.compile(rf"[0-9a-f]{{{2 * MIN_KEY_BYTES},256}}")


class ProvisionError(ValueError):
    """A Gateway this renderer cannot give a data plane (a listener port that collides); the message names the field.
    `reason`: the Gateway's `Programmed` False reason while it stands."""

    reason: str = GatewayReason.INVALID


@dataclass(frozen=True, slots=True, kw_only=True)
class DataplaneSettings:
    """The installation's side of every data plane: the chart's values as the settings file carries them."""

    namespace: str
    gateway: Mapping[str, Any]  # the chart's .Values.gateway (images, extproc and envoy settings, pod placement)
    extproc_image: str
    envoy_image: str
    publish_port: int
    tls_secret: str | None  # None: plaintext publish (--insecure-publish)
    service_account: str
    pod_security_context: Mapping[str, Any]
    container_security_context: Mapping[str, Any]
    app_user: int
    envoy_user: int
    image_pull_secrets: tuple[Mapping[str, Any], ...]
    operator_labels: Mapping[str, str]  # the operator pods' selector: the only peers of the publish port
    labels: Mapping[str, str] = field(default_factory=dict)  # extra labels on every object (the chart's part-of)
    # monitoring.scrapeAnnotations: the prometheus.io/* annotations on the pods, as the chart's gateway pods have them
    scrape_annotations: bool = False
    # Where a Gateway's data plane lives when its class's parameters do not say, and whether the operator was granted
    # what the Gateways' own namespaces need (the chart's gatewayAPI.dataplanes values).
    placement: Placement = Placement.CONTROLLER_NAMESPACE
    gateway_namespace_allowed: bool = False
    # Set by `merge` for one Gateway: where its objects live and their names (None: the ControllerNamespace names).
    names: DataplaneNames | None = None

    @property
    def transport(self) -> str:
        return str(self.gateway["extproc"]["transport"])


def _need(doc: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = doc.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise ValueError(f"dataplane settings: {where}{key} is missing or not a {getattr(kind, '__name__', kind)}")
    return value


def parse_settings(text: str) -> DataplaneSettings:
    """The settings file the chart renders → DataplaneSettings. The installation's own (a ConfigMap only the release
    writes), still bounded and type-checked: a wrong file stops the operator at start with the field named, never
    half-provisions a Gateway."""
    if len(text) > MAX_SETTINGS_BYTES:
        raise ValueError("dataplane settings: the file is over 1 MiB")
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("dataplane settings: expected a JSON object")
    gw = _need(doc, "gateway", dict, "")
    for key in ("extproc", "envoy", "service", "podDisruptionBudget", "networkPolicy"):
        _need(gw, key, dict, "gateway.")
    sc = _need(doc, "securityContext", dict, "")
    tls = doc.get("tlsSecret")
    placement = doc.get("placement", Placement.CONTROLLER_NAMESPACE.value)
    if placement not in tuple(Placement):
        raise ValueError(f"dataplane settings: placement {str(placement)[:64]!r} is not one of {', '.join(Placement)}")
    allowed = doc.get("gatewayNamespace") is True or placement == Placement.GATEWAY_NAMESPACE
    settings = DataplaneSettings(
        namespace=_need(doc, "namespace", str, ""),
        gateway=gw,
        extproc_image=_need(doc, "extprocImage", str, ""),
        envoy_image=_need(doc, "envoyImage", str, ""),
        publish_port=_need(doc, "publishPort", int, ""),
        tls_secret=tls if isinstance(tls, str) and tls else None,
        service_account=_need(doc, "serviceAccount", str, ""),
        pod_security_context=_need(sc, "pod", dict, "securityContext."),
        container_security_context=_need(sc, "container", dict, "securityContext."),
        app_user=_need(sc, "appUser", int, "securityContext."),
        envoy_user=_need(sc, "envoyUser", int, "securityContext."),
        image_pull_secrets=tuple(doc.get("imagePullSecrets") or ()),
        operator_labels={str(k): str(v) for k, v in _need(doc, "operatorLabels", dict, "").items()},
        labels={str(k): str(v) for k, v in (doc.get("labels") or {}).items()},
        scrape_annotations=doc.get("scrapeAnnotations") is True,
        placement=Placement(placement),
        gateway_namespace_allowed=allowed,
    )
    return settings


# --- cookie keys -----------------------------------------------------------------------------------------------------


def cookie_keys_secret_name(namespace: str, name: str) -> str:
    """The keys Secret of a data plane in the operator's namespace (`DataplaneNames.cookie_keys` for either)."""
    return f"{dataplane_name(namespace, name)}-cookie-keys"


def placement_of(params: GatewayParameters, settings: DataplaneSettings) -> Placement:
    return params.placement or settings.placement


def names_of(gateway: Gateway, params: GatewayParameters, settings: DataplaneSettings) -> DataplaneNames:
    """Where the Gateway's data plane lives under its class's parameters, and its objects' names."""
    return names_for(gateway.meta.namespace, gateway.meta.name, placement_of(params, settings), settings.namespace)


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
    meta = _meta(_names(gateway, settings).cookie_keys, gateway, settings)
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


PUBLISH_TOKEN_TYPE = "trafficsplit.dev/publish-token"
PUBLISH_TOKEN_BYTES = 32
_HEX_TOKEN = re.compile(r"[0-9a-f]{64}")
PUBLISH_TLS_KEYS = ("tls.crt", "tls.key", "ca.crt")  # the gateways' publish Secret: its certificate, key, client CA


def parse_publish_token(secret: Mapping[str, Any] | None) -> str | None:
    """The token a publish-token Secret the provisioner wrote holds; None when absent or not one of ours (a new one
    is made: its digest on the pod template rolls the replicas onto it, the operator publishes with it)."""
    if not secret:
        return None
    try:
        token = base64.b64decode((secret.get("data") or {}).get("token") or "", validate=True).decode("ascii")
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        return None
    return token if _HEX_TOKEN.fullmatch(token) else None


def render_publish_token(gateway: Gateway, settings: DataplaneSettings, token: str) -> dict[str, Any]:
    """This Gateway's own publish token (in either placement), the one its replicas accept and its fleet sends."""
    if not _HEX_TOKEN.fullmatch(token):
        raise ValueError("publish token: not 64 lowercase hex characters")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(_names(gateway, settings).publish_token, gateway, settings),
        "type": PUBLISH_TOKEN_TYPE,
        "data": {"token": base64.b64encode(token.encode()).decode()},
    }


def render_publish_tls(gateway: Gateway, settings: DataplaneSettings, data: Mapping[str, str]) -> dict[str, Any]:
    """GatewayNamespace with TLS: the gateways' publish certificate, key and client CA, copied from the operator's
    namespace (`data` as the API returns it, base64), so this Gateway's pods can mount them."""
    missing = [k for k in PUBLISH_TLS_KEYS if not data.get(k)]
    if missing:
        raise ProvisionError(f"publish TLS Secret {settings.tls_secret}: no {', '.join(missing)}")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(_names(gateway, settings).publish_tls, gateway, settings),
        "type": "kubernetes.io/tls",
        "data": {k: data[k] for k in PUBLISH_TLS_KEYS},
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
        # The status names the field: the first listener on the port (the others on it share its Envoy listener).
        where = next(f"spec.listeners[{i}].port" for i, lis in enumerate(gateway.listeners) if lis.port == port)
        if inner in reserved:
            raise ProvisionError(
                f"{where}: listener port {port} would be served on {inner}, {reserved[inner]} in the pod"
            )
        if inner in taken:
            raise ProvisionError(
                f"{where}: listener ports {taken[inner]} and {port} would both be served on {inner} in the pod"
            )
        taken[inner] = port
        out[port] = inner
    return out


# --- the bootstrap: the flags of the maker in the pod -----------------------------------------------------------------

# Envoy's node id in the bootstrap, as in the chart's files/envoy-bootstrap.json: Envoy's `--service-node $(POD_NAME)`
# replaces it, so every replica's pod template is the same.
BOOTSTRAP_NODE_ID = "gateway"
BOOTSTRAP_FILE = f"{BOOTSTRAP_DIR}/envoy.json"
# The emptyDir the bootstrap is written to: 64 listeners' filter chains take well under 1 MiB.
BOOTSTRAP_SIZE_LIMIT = "4Mi"


def processor_args(settings: DataplaneSettings) -> list[str]:
    """Where the processor serves its Envoy (ext_proc and ADS, and the http_service server with that transport): the
    same flags for the extproc and for the bootstrap it prints, so Envoy's clusters point where the processor is."""
    args = [f"--listen=127.0.0.1:{EXTPROC_LISTEN}"]
    if settings.transport == "http":
        args += ["--ext-proc-transport=http", f"--ext-proc-http-listen=127.0.0.1:{EXTPROC_HTTP_LISTEN}"]
    return args


def listener_flag(port: int, inner: int, https: Sequence[str] = (), client: ClientCertificates | None = None) -> str:
    """The extproc's `--listener` for a Gateway listener port served on `inner` in the pod: `PORT=0.0.0.0:INNER`,
    with `:https:NAME,...` for an HTTPS port (one SNI filter chain per hostname, its certificate over SDS) and
    `:mtls=MODE` when it validates client certificates (its CA bundle over SDS)."""
    flag = f"{port}=0.0.0.0:{inner}"
    if not https:
        return flag
    flag = f"{flag}:https:{','.join(https)}"
    return f"{flag}:mtls={client.value}" if client is not None else flag


def client_certificates(gateway: Gateway, port: int) -> ClientCertificates | None:
    """How the HTTPS port `port` asks for client certificates, from the Gateway's spec (`spec.tls.frontend`) as
    written: a port whose CAs do not resolve still asks (and serves nothing: the translation sends it no CA), so a
    port that is to validate never serves unvalidated."""
    if not tls_hosts(gateway, port):
        return None
    validation = gateway.client_validation(port)
    if validation is None:
        return None
    if validation.mode is ValidationMode.ALLOW_INSECURE_FALLBACK:
        return ClientCertificates.OPTIONAL
    return ClientCertificates.REQUIRE


def bootstrap_args(gateway: Gateway, settings: DataplaneSettings, ports: Mapping[int, int]) -> list[str]:
    """The init container's arguments: `python -m trafficsplit.extproc --print-bootstrap` with the merged settings'
    Envoy values (the chart's, under the class's parameters) and one `--listener` per listener port, written where
    Envoy reads its bootstrap."""
    envoy = settings.gateway["envoy"]
    args = [
        "--print-bootstrap",
        f"--bootstrap-out={BOOTSTRAP_FILE}",
        f"--replica={BOOTSTRAP_NODE_ID}",
        *processor_args(settings),
        f"--envoy-admin=127.0.0.1:{ENVOY_ADMIN}",
        f"--message-timeout-ms={int(envoy['messageTimeoutMs'])}",
        f"--xff-num-trusted-hops={int(envoy['xffNumTrustedHops'])}",
        f"--max-heap-bytes={int(envoy['overload']['maxHeapSizeBytes'])}",
        f"--max-connections={int(envoy['overload']['maxConnections'])}",
    ]
    if not envoy["backendClusterStats"]:
        args.append("--no-backend-cluster-stats")
    args += [
        f"--listener={listener_flag(p, inner, tls_hosts(gateway, p), client_certificates(gateway, p))}"
        for p, inner in ports.items()
    ]
    return args


# --- merging: the class's parameters over the chart's values ----------------------------------------------------------


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


def merge(gateway: Gateway, params: GatewayParameters, settings: DataplaneSettings) -> DataplaneSettings:
    """The chart's gateway values with the class's parameters laid over them, field by field, and the cookie keys
    Secret the pods mount: the user's (the parameters' `cookieKeysSecret`) or the Gateway's own, never the chart
    gateway's (the pod template names the Secret, never its content, so a rotation rolls no pod)."""
    g = copy.deepcopy(dict(settings.gateway))
    envoy, ext, svc = g["envoy"], g["extproc"], g["service"]
    g["replicas"] = _pick(params.replicas, g["replicas"])
    svc["type"] = params.service_type.value if params.service_type is not None else str(svc["type"])
    svc["annotations"] = dict(params.service_annotations or (svc.get("annotations") or {}).items())
    svc["externalTrafficPolicy"] = params.external_traffic_policy or svc.get("externalTrafficPolicy")
    envoy["concurrency"] = _pick(params.envoy_concurrency, envoy["concurrency"])
    if params.envoy_log_level is not None:
        envoy["logLevel"] = params.envoy_log_level.value
    envoy["preStopSleepSeconds"] = _pick(params.pre_stop_sleep_seconds, envoy["preStopSleepSeconds"])
    envoy["messageTimeoutMs"] = _pick(params.message_timeout_ms, envoy["messageTimeoutMs"])
    envoy["xffNumTrustedHops"] = _pick(params.xff_num_trusted_hops, envoy["xffNumTrustedHops"])
    # Only an explicit false turns the stats off (as in the chart's bootstrap template).
    stats = str(envoy.get("backendClusterStats")).lower() != "false"
    envoy["backendClusterStats"] = _pick(params.backend_cluster_stats, stats)
    overload = envoy["overload"]
    overload["maxHeapSizeBytes"] = _pick(params.max_heap_size_bytes, overload["maxHeapSizeBytes"])
    overload["maxConnections"] = _pick(params.max_connections, overload["maxConnections"])
    envoy["resources"] = _resources(params.envoy_resources, envoy["resources"])
    ext["resources"] = _resources(params.extproc_resources, ext["resources"])
    names = names_of(gateway, params, settings)
    ext["cookieKeysSecret"] = params.cookie_keys_secret or names.cookie_keys
    return dataclasses.replace(settings, gateway=g, names=names)


# --- naming and labels ------------------------------------------------------------------------------------------------


def object_labels(gateway: Gateway, settings: DataplaneSettings) -> dict[str, str]:
    # The uid says whose the object is (ownership.py): never the selector, a Deployment's selector cannot change.
    owner = {GATEWAY_UID_LABEL: gateway.meta.uid}
    return {**settings.labels, **_names(gateway, settings).selector, MANAGED_BY_LABEL: MANAGED_BY, **owner}


def _meta(
    name: str, gateway: Gateway, settings: DataplaneSettings, annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    # The user's annotations first: the Gateway's identity cannot be overwritten by a Service annotation.
    annotations = {
        **(annotations or {}),
        GATEWAY_NAMESPACE_ANNOTATION: gateway.meta.namespace,
        GATEWAY_NAME_ANNOTATION: gateway.meta.name,
    }
    names = _names(gateway, settings)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": names.namespace,
        "labels": object_labels(gateway, settings),
        "annotations": annotations,
    }
    if names.placement is Placement.GATEWAY_NAMESPACE and gateway.meta.uid:
        # Same namespace as the Gateway: the garbage collector removes the data plane with it, even while no operator
        # runs. Not a controller reference, no blockOwnerDeletion (that would need the Gateways' finalizers).
        meta["ownerReferences"] = [
            {"apiVersion": GATEWAY_API_VERSION, "kind": "Gateway", "name": gateway.meta.name, "uid": gateway.meta.uid}
        ]
    return meta


GATEWAY_API_VERSION = "gateway.networking.k8s.io/v1"


def _names(gateway: Gateway, settings: DataplaneSettings) -> DataplaneNames:
    """The names `merge` chose, else the ControllerNamespace ones (a caller rendering one object with the chart's
    settings as they are)."""
    if settings.names is not None:
        return settings.names
    return names_for(gateway.meta.namespace, gateway.meta.name, Placement.CONTROLLER_NAMESPACE, settings.namespace)


def _name(gateway: Gateway, settings: DataplaneSettings) -> str:
    return _names(gateway, settings).base


def _selector(gateway: Gateway, settings: DataplaneSettings) -> dict[str, str]:
    return _names(gateway, settings).selector


# --- the containers ---------------------------------------------------------------------------------------------------


def _container_sc(settings: DataplaneSettings, uid: int) -> dict[str, Any]:
    return {**copy.deepcopy(dict(settings.container_security_context)), "runAsUser": uid, "runAsGroup": uid,
            "runAsNonRoot": True}  # fmt: skip


def bootstrap_container(settings: DataplaneSettings, args: Sequence[str]) -> dict[str, Any]:
    """The init container that writes Envoy's bootstrap: the extproc's image (the maker is the processor's own, of the
    same version), as the extproc runs (user, security context, resources: never more than the pod's containers)."""
    ext = settings.gateway["extproc"]
    return {
        "name": "bootstrap",
        "image": settings.extproc_image,
        "imagePullPolicy": ext["image"]["pullPolicy"],
        "args": list(args),
        "resources": copy.deepcopy(dict(ext["resources"])),
        "securityContext": _container_sc(settings, settings.app_user),
        # A refused flag shows in the pod's status, not only in the log of a container that is gone.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [{"name": "bootstrap", "mountPath": BOOTSTRAP_DIR}, {"name": "tmp", "mountPath": "/tmp"}],
    }


def extproc_container(settings: DataplaneSettings, gateway: Gateway | None = None) -> dict[str, Any]:
    g = settings.gateway
    ext = g["extproc"]
    tls = settings.tls_secret is not None
    args = processor_args(settings)
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
    if gateway is not None:  # its replicas refuse any other Gateway's generation (core/model/identity.py)
        args.append(f"--gateway={gateway.meta.namespace}/{gateway.meta.name}")
        if gateway.meta.uid:
            args.append(f"--gateway-uid={gateway.meta.uid}")
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


# --- the objects, one function per kind -------------------------------------------------------------------------------


def pod_spec(gateway: Gateway, settings: DataplaneSettings, ports: Mapping[int, int]) -> dict[str, Any]:
    """The data-plane pod: the bootstrap init container, then the chart gateway's extproc and Envoy containers."""
    g = settings.gateway
    volumes: list[dict[str, Any]] = [
        # Written by the init container, read by Envoy (mounted read-only there).
        {"name": "bootstrap", "emptyDir": {"sizeLimit": BOOTSTRAP_SIZE_LIMIT}},
        {
            "name": "publish-token",
            "secret": {"secretName": _names(gateway, settings).publish_token, "defaultMode": 0o440},
        },
    ]
    if (tls_secret := _tls_secret(gateway, settings)) is not None:
        volumes.append({"name": "publish-tls", "secret": {"secretName": tls_secret, "defaultMode": 0o440}})
    cookie_keys = g["extproc"].get("cookieKeysSecret")
    if cookie_keys:
        volumes.append({"name": "cookie-keys", "secret": {"secretName": cookie_keys, "defaultMode": 0o440}})
    volumes.append({"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}})
    pod: dict[str, Any] = {
        "serviceAccountName": _service_account(gateway, settings),
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
                            "labelSelector": {"matchLabels": _selector(gateway, settings)},
                        },
                    }
                ]
            }
        },
        "initContainers": [bootstrap_container(settings, bootstrap_args(gateway, settings, ports))],
        "containers": [extproc_container(settings, gateway), envoy_container(settings, ports)],
        "volumes": volumes,
    }
    if settings.image_pull_secrets:
        pod["imagePullSecrets"] = copy.deepcopy(list(settings.image_pull_secrets))
    for key in ("priorityClassName", "nodeSelector", "tolerations"):
        if g.get(key):
            pod[key] = copy.deepcopy(g[key])
    return pod


def _in_gateway_namespace(gateway: Gateway, settings: DataplaneSettings) -> bool:
    return _names(gateway, settings).placement is Placement.GATEWAY_NAMESPACE


def _tls_secret(gateway: Gateway, settings: DataplaneSettings) -> str | None:
    if settings.tls_secret is None:
        return None
    return _names(gateway, settings).publish_tls if _in_gateway_namespace(gateway, settings) else settings.tls_secret


def _service_account(gateway: Gateway, settings: DataplaneSettings) -> str:
    # The chart's gateway ServiceAccount is in the operator's namespace; in the Gateway's, the namespace's own
    # `default` (no token is mounted either way: the pods need no API access).
    return "default" if _in_gateway_namespace(gateway, settings) else settings.service_account


def pod_annotations(settings: DataplaneSettings) -> dict[str, str]:
    """The chart's gateway pods' annotations: the scrape annotations (when the chart puts them on its own gateway, so
    a Prometheus that discovers pods by annotation finds every data plane), then the user's `podAnnotations`."""
    g = settings.gateway
    out: dict[str, str] = {}
    if settings.scrape_annotations:
        out = {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(g["extproc"]["metricsPort"]),
            "prometheus.io/path": "/metrics",
        }
    out.update({str(k): str(v) for k, v in (g.get("podAnnotations") or {}).items()})
    return out


def render_deployment(
    gateway: Gateway, settings: DataplaneSettings, ports: Mapping[int, int], token: str | None = None
) -> dict[str, Any]:
    # The bootstrap's flags are in the pod template: a changed bootstrap (a listener port, a parameter) rolls the pods;
    # so does a new publish token (`token`, None: a caller that only looks), by its digest.
    g = settings.gateway
    annotations = pod_annotations(settings)
    if token is not None:
        annotations[PUBLISH_TOKEN_DIGEST_ANNOTATION] = hashlib.sha256(token.encode()).hexdigest()[:16]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(_name(gateway, settings), gateway, settings),
        "spec": {
            "replicas": g["replicas"],
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": _selector(gateway, settings)},
            # A new pod must hold a generation (be ready) before an old one goes: capacity never drops in a rollout.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {
                    "labels": object_labels(gateway, settings),
                    "annotations": annotations,
                },
                "spec": pod_spec(gateway, settings, ports),
            },
        },
    }


def render_service(gateway: Gateway, settings: DataplaneSettings, ports: Mapping[int, int]) -> dict[str, Any]:
    """The Gateway's Service: one port per listener port, onto the port Envoy serves it on."""
    svc = settings.gateway["service"]
    spec: dict[str, Any] = {
        "type": svc["type"],
        "selector": _selector(gateway, settings),
        "ports": [
            {"name": port_name(p), "port": p, "targetPort": port_name(p), "protocol": "TCP", "appProtocol": "http"}
            for p in ports
        ],
    }
    if svc["type"] != "ClusterIP" and svc["externalTrafficPolicy"]:
        spec["externalTrafficPolicy"] = svc["externalTrafficPolicy"]
    if gateway.static_addresses:
        # The address the Gateway asks for: its ClusterIP, or beside a load balancer's (or node ports) an external
        # IP, which kube-proxy answers on every node. The API server refuses one it cannot give (outside the
        # service range, taken): that is the Gateway's `Programmed: False, AddressNotUsable` (provisioner.py).
        if svc["type"] == "ClusterIP":
            pinned, _ = cluster_ips(gateway.static_addresses)
            spec["clusterIP"], spec["clusterIPs"] = pinned[0], list(pinned)
            if len(pinned) > 1:
                spec["ipFamilyPolicy"] = "RequireDualStack"  # one of each family, the first asked for first
        else:
            spec["externalIPs"] = list(gateway.static_addresses)
    name = _name(gateway, settings)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(name, gateway, settings, annotations=svc["annotations"]),
        "spec": spec,
    }


def render_publish_service(gateway: Gateway, settings: DataplaneSettings) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(_names(gateway, settings).publish, gateway, settings),
        "spec": {
            # Headless, not-ready pods included: the operator publishes to every replica, and a replica is not
            # ready until it holds its first generation (the chart's gateway-publish-service.yaml says the same).
            "type": "ClusterIP",
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": _selector(gateway, settings),
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


def render_pod_disruption_budget(gateway: Gateway, settings: DataplaneSettings) -> dict[str, Any] | None:
    if not settings.gateway["podDisruptionBudget"].get("enabled", True):
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(_name(gateway, settings), gateway, settings),
        # maxUnavailable 1 whatever the replica count: n-1 pods through a drain, and a single replica never blocks
        # one (a minAvailable 1 would, and the replica count here changes per class).
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": _selector(gateway, settings)}},
    }


def render_network_policy(
    gateway: Gateway, settings: DataplaneSettings, ports: Mapping[int, int]
) -> dict[str, Any] | None:
    """The pods' ingress: the listener ports (from `httpFrom`, else anyone), the publish port from the operator pods
    only, and the metrics port from `metricsFrom` when set."""
    np = settings.gateway["networkPolicy"]
    if not np.get("enabled", True):
        return None
    http_rule: dict[str, Any] = {"ports": [{"port": port_name(p), "protocol": "TCP"} for p in ports]}
    if np.get("httpFrom"):
        http_rule["from"] = copy.deepcopy(list(np["httpFrom"]))
    ingress = [
        http_rule,
        {"ports": [{"port": PUBLISH_PORT_NAME, "protocol": "TCP"}], "from": [_operator_peer(gateway, settings)]},
    ]
    if np.get("metricsFrom"):
        ingress.append(
            {"ports": [{"port": "metrics", "protocol": "TCP"}], "from": copy.deepcopy(list(np["metricsFrom"]))}
        )
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(_name(gateway, settings), gateway, settings),
        "spec": {
            "podSelector": {"matchLabels": _selector(gateway, settings)},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }


def _operator_peer(gateway: Gateway, settings: DataplaneSettings) -> dict[str, Any]:
    """The operator's pods as a NetworkPolicy peer: a bare podSelector is the policy's own namespace, so in the
    Gateway's namespace the operator's namespace is named too."""
    peer: dict[str, Any] = {"podSelector": {"matchLabels": dict(settings.operator_labels)}}
    if _in_gateway_namespace(gateway, settings):
        peer["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": settings.namespace}}
    return peer


@dataclass(frozen=True, slots=True)
class Rendered:
    """The objects of one Gateway's data plane, in apply order (the cookie keys Secret before the pods mounting it)."""

    name: str
    objects: tuple[dict[str, Any], ...]
    names: DataplaneNames | None = None

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]


def render(
    gateway: Gateway,
    params: GatewayParameters,
    settings: DataplaneSettings,
    keys: CookieKeys | None = None,
    *,
    token: str | None = None,
    tls: Mapping[str, str] | None = None,
) -> Rendered:
    """Every object of the Gateway's data plane (see the module docstring). The pods always mount the Gateway's cookie
    keys Secret; `keys` is its content (None: the Secret is left out of the objects, for a caller that only looks).
    A class whose parameters name a `cookieKeysSecret` of the user's mounts that one instead, and renders none.
    `token` is the Gateway's own publish token and, in the Gateway's namespace, `tls` the operator's namespace's
    publish certificate Secret's data: the contents of its publish Secrets, left out likewise while None."""
    if placement_of(params, settings) is Placement.GATEWAY_NAMESPACE and not settings.gateway_namespace_allowed:
        raise ProvisionError(
            "spec.placement: GatewayNamespace, but this installation did not grant the operator the Gateways' "
            "namespaces (the chart's gatewayAPI.dataplanes.allowGatewayNamespace)"
        )
    ports = _container_ports(gateway, settings)
    merged = merge(gateway, params, settings)
    own_keys = (
        [render_cookie_keys(gateway, merged, keys)] if keys is not None and params.cookie_keys_secret is None else []
    )
    if token is not None:
        own_keys.append(render_publish_token(gateway, merged, token))
    if _in_gateway_namespace(gateway, merged) and tls is not None and settings.tls_secret is not None:
        own_keys.append(render_publish_tls(gateway, merged, tls))
    optional = (render_pod_disruption_budget(gateway, merged), render_network_policy(gateway, merged, ports))
    objects = [
        *own_keys,
        render_deployment(gateway, merged, ports, token),
        render_service(gateway, merged, ports),
        render_publish_service(gateway, merged),
        *(o for o in optional if o is not None),
    ]
    return Rendered(_name(gateway, merged), tuple(objects), merged.names)


@dataclass(frozen=True, slots=True)
class GatewayAddress:
    """One `status.addresses[]` entry of a Gateway."""

    type: str  # IPAddress | Hostname
    value: str


def cluster_ips(static: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A Gateway's static addresses → the ClusterIPs its Service is given (the first asked for of each IP family: a
    Service holds one per family) and the rest, which it cannot hold."""
    pinned: dict[int, str] = {}
    for ip in static:
        pinned.setdefault(ipaddress.ip_address(ip).version, ip)
    kept = tuple(pinned.values())
    return kept, tuple(ip for ip in static if ip not in kept)


def service_addresses(service: Mapping[str, Any], static: Sequence[str] = ()) -> tuple[GatewayAddress, ...]:
    """A data plane's Service → the Gateway's addresses: the static ones it asked for that the Service holds (only
    those: the Gateway asked for them), else the load balancer's ingress when it has one, else the ClusterIP(s),
    which the local node reaches through kube-proxy. Empty while none exists (headless or new)."""
    spec = service.get("spec") or {}
    if static:
        held = {*(spec.get("clusterIPs") or [spec.get("clusterIP")]), *(spec.get("externalIPs") or [])}
        return tuple(GatewayAddress("IPAddress", ip) for ip in static if ip in held)
    ingress = (service.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
    out = [
        GatewayAddress("IPAddress", i["ip"]) if i.get("ip") else GatewayAddress("Hostname", i["hostname"])
        for i in ingress
        if i.get("ip") or i.get("hostname")
    ]
    if out:
        return tuple(out)
    ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    return tuple(GatewayAddress("IPAddress", ip) for ip in ips if ip and ip != "None")


# The kinds a data plane may consist of, for cleanup by label (a kind the rendering may leave out, the PDB or the
# NetworkPolicy, is still swept; so is the bootstrap ConfigMap data planes had before their pods printed their own).
KINDS: Sequence[tuple[str, str]] = (
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("policy/v1", "PodDisruptionBudget"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("v1", "Secret"),  # the cookie keys
)
COMPONENT_SELECTOR = f"app.kubernetes.io/component={COMPONENT},{MANAGED_BY_LABEL}={MANAGED_BY}"
