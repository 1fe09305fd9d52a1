"""`GatewayParameters` (trafficsplit.dev/v1alpha1, cluster-scoped): what a GatewayClass's `parametersRef` may set
for the data plane of each of its Gateways, parsed once into a frozen, bounded value. Pure.

Every field is optional: an absent field keeps the operator's default, which is the chart's `gateway.*` value
(the provisioner merges the two). The bounds are the CRD's (crds/trafficsplit.dev_gatewayparameters.yaml;
tests/unit/test_gateway_parameters.py compares them), re-checked here for the same reason `spec.parse_split`
re-checks a TrafficSplit: a data plane must never rest on the API server having validated what it reads.

Cluster-scoped, as the GatewayClass that names it: only whoever may write cluster-scoped objects chooses how a
class's data planes run, and a `parametersRef` needs no namespace.

`placement` says where each Gateway's data plane lives: in the Gateway's own namespace (its ResourceQuota,
LimitRange and RBAC apply to it) or in the operator's (absent: the installation's default, the chart's
`gatewayAPI.dataplanes.placement`). `limits` caps what the Gateways of one namespace may run (Gateways, replicas):
the quota of a data plane that lives in the operator's namespace is not the tenant's, so the class's caps are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Any, TypeVar

from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.fields import unknown_fields

PARAMETERS_GROUP = "trafficsplit.dev"
PARAMETERS_KIND = "GatewayParameters"
PARAMETERS_VERSION = "v1alpha1"

MAX_REPLICAS = 100
MAX_ANNOTATIONS = 32
MAX_ANNOTATION_KEY = 317  # a 253-character prefix, '/', a 63-character name
MAX_ANNOTATION_VALUE = 4096
MAX_CONCURRENCY = 64
MAX_MESSAGE_TIMEOUT_MS = 60_000
MAX_XFF_HOPS = 16
MIN_HEAP_BYTES = 16 * 1024 * 1024  # below it Envoy cannot start (wire.bootstrap refuses it too)
MAX_HEAP_BYTES = 2**40
MAX_CONNECTIONS = 10_000_000
MAX_PRESTOP_SECONDS = 300
MAX_QUANTITY = 32
MAX_GATEWAYS_PER_NAMESPACE = 10_000
MAX_REPLICAS_PER_NAMESPACE = 100_000

# The chart's quantity pattern (values.schema.json): a plain decimal with an optional SI or binary suffix.
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$"
_QUANTITY = re.compile(QUANTITY_PATTERN)
_SUFFIX: Mapping[str, int | Fraction] = {"": 1, "m": Fraction(1, 1000), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}  # fmt: skip
# A Kubernetes annotation key: an optional DNS-subdomain prefix and '/', then a name.
_ANNOTATION_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")
# A DNS subdomain (an object name such as a Secret's); the CRD's `cookieKeysSecret` pattern is this text.
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
MAX_OBJECT_NAME = 253
_DNS_SUBDOMAIN = re.compile(DNS_SUBDOMAIN_PATTERN)


_E = TypeVar("_E", bound=StrEnum)


class ServiceType(StrEnum):
    CLUSTER_IP = "ClusterIP"
    NODE_PORT = "NodePort"
    LOAD_BALANCER = "LoadBalancer"


class TrafficPolicy(StrEnum):
    CLUSTER = "Cluster"
    LOCAL = "Local"


class Placement(StrEnum):
    """Where a Gateway's data plane objects live (the names are Envoy Gateway's for the same choice)."""

    GATEWAY_NAMESPACE = "GatewayNamespace"  # the Gateway's own: its quota, LimitRange and RBAC count them
    CONTROLLER_NAMESPACE = "ControllerNamespace"  # the operator's (the default: every data plane in one place)


class EnvoyLogLevel(StrEnum):
    TRACE = "trace"
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"
    OFF = "off"


@dataclass(frozen=True, slots=True)
class Resources:
    """A container's requests and limits, each quantity as written (None: the operator's default for it)."""

    requests_cpu: str | None = None
    requests_memory: str | None = None
    limits_cpu: str | None = None
    limits_memory: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayParameters:
    """None everywhere: the operator's defaults (a class without parametersRef gets exactly this)."""

    name: str = ""
    replicas: int | None = None
    service_type: ServiceType | None = None
    service_annotations: tuple[tuple[str, str], ...] = ()
    external_traffic_policy: TrafficPolicy | None = None
    envoy_concurrency: int | None = None
    envoy_log_level: EnvoyLogLevel | None = None
    message_timeout_ms: int | None = None
    xff_num_trusted_hops: int | None = None
    backend_cluster_stats: bool | None = None
    max_heap_size_bytes: int | None = None
    max_connections: int | None = None
    pre_stop_sleep_seconds: int | None = None
    envoy_resources: Resources = Resources()
    extproc_resources: Resources = Resources()
    # A Secret of the user's (key `keys`, in the data planes' namespace) instead of the keys the operator makes and
    # rotates per Gateway: the HMAC keys of Cookie sessionPersistence.
    cookie_keys_secret: str | None = None
    placement: Placement | None = None  # None: the installation's default
    # Caps per namespace on the Gateways of the class and on the replicas their data planes run (None: no cap).
    gateways_per_namespace: int | None = None
    replicas_per_namespace: int | None = None


DEFAULT_PARAMETERS = GatewayParameters()


class _Reader:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def obj(self, raw: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
        value = raw.get(key)
        if value is None:
            return {}
        where = f"{path}.{key}" if path else key
        if not isinstance(value, Mapping):
            self.problems.append(f"{where}: expected an object")
            return {}
        return value

    def integer(self, raw: Mapping[str, Any], key: str, path: str, low: int, high: int) -> int | None:
        value = raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.problems.append(f"{path}.{key}: expected an integer, got {type(value).__name__}")
            return None
        if not low <= value <= high:
            self.problems.append(f"{path}.{key}: must be {low}..{high}, got {value}")
            return None
        return value

    def boolean(self, raw: Mapping[str, Any], key: str, path: str) -> bool | None:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            self.problems.append(f"{path}.{key}: expected true or false")
            return None
        return value

    def enum(self, raw: Mapping[str, Any], key: str, path: str, kind: type[_E]) -> _E | None:
        value = raw.get(key)
        if value is None:
            return None
        try:
            return kind(value) if isinstance(value, str) else kind("\0")
        except ValueError:
            self.problems.append(f"{path}.{key}: {str(value)[:64]!r} must be one of {', '.join(k.value for k in kind)}")
            return None

    def quantity(self, raw: Mapping[str, Any], key: str, path: str) -> str | None:
        value = raw.get(key)
        if value is None:
            return None
        text = str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
        if not isinstance(text, str) or len(text) > MAX_QUANTITY or not _QUANTITY.match(text):
            self.problems.append(f"{path}.{key}: {str(value)[:64]!r} is not a quantity such as 250m or 128Mi")
            return None
        return text

    def resources(self, raw: Mapping[str, Any], path: str) -> Resources:
        requests = self.obj(raw, "requests", path)
        limits = self.obj(raw, "limits", path)
        out = Resources(
            self.quantity(requests, "cpu", f"{path}.requests"),
            self.quantity(requests, "memory", f"{path}.requests"),
            self.quantity(limits, "cpu", f"{path}.limits"),
            self.quantity(limits, "memory", f"{path}.limits"),
        )
        # The CRD's CEL rule, the same message: Kubernetes refuses such a pod, so refuse the parameters instead.
        for what, req, lim in (
            ("cpu", out.requests_cpu, out.limits_cpu),
            ("memory", out.requests_memory, out.limits_memory),
        ):
            if req is not None and lim is not None and quantity_value(req) > quantity_value(lim):
                self.problems.append(f"{path}: requests.{what} must not exceed limits.{what}")
        return out

    def name(self, raw: Mapping[str, Any], key: str, path: str) -> str | None:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or len(value) > MAX_OBJECT_NAME or not _DNS_SUBDOMAIN.match(value):
            self.problems.append(f"{path}.{key}: {str(value)[:64]!r} is not an object name (a DNS subdomain)")
            return None
        return value

    def annotations(self, raw: Mapping[str, Any], key: str, path: str) -> tuple[tuple[str, str], ...]:
        value = raw.get(key)
        if value is None:
            return ()
        if not isinstance(value, Mapping):
            self.problems.append(f"{path}.{key}: expected an object")
            return ()
        if len(value) > MAX_ANNOTATIONS:
            self.problems.append(f"{path}.{key}: {len(value)} annotations, at most {MAX_ANNOTATIONS} are allowed")
            return ()
        out: list[tuple[str, str]] = []
        for k, v in value.items():
            p = f"{path}.{key}[{str(k)[:64]!r}]"
            if not isinstance(k, str) or not annotation_key_ok(k):
                self.problems.append(f"{p}: not an annotation key (an optional DNS prefix and '/', then a name)")
            elif not isinstance(v, str) or len(v) > MAX_ANNOTATION_VALUE:
                self.problems.append(f"{p}: expected a string of at most {MAX_ANNOTATION_VALUE} characters")
            else:
                out.append((k, v))
        return tuple(sorted(out))


# Every field a spec may have (the CRD schema's): a nested mapping is an object's fields, None a leaf.
_RESOURCES = {"requests": {"cpu": None, "memory": None}, "limits": {"cpu": None, "memory": None}}
# How much of a refused body's problems a class's status repeats.
MAX_REFUSAL = 1000
PARAMETERS_FIELDS: Mapping[str, Any] = {
    "replicas": None,
    "service": {"type": None, "annotations": None, "externalTrafficPolicy": None},
    "envoy": {
        "concurrency": None,
        "logLevel": None,
        "messageTimeoutMs": None,
        "xffNumTrustedHops": None,
        "backendClusterStats": None,
        "overload": {"maxHeapSizeBytes": None, "maxConnections": None},
        "preStopSleepSeconds": None,
        "resources": _RESOURCES,
    },
    "extproc": {"resources": _RESOURCES, "cookieKeysSecret": None},
    "placement": None,
    "limits": {"gatewaysPerNamespace": None, "replicasPerNamespace": None},
}


_OVERLOAD = "spec.envoy.overload"


def quantity_value(text: str) -> Fraction:
    """A quantity of QUANTITY_PATTERN as an exact number (`250m` → 1/4, `1Gi` → 2**30), for comparing two."""
    m = _QUANTITY.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a quantity")
    return Fraction(text[: len(text) - len(m.group(2) or "")]) * _SUFFIX[m.group(2) or ""]


def annotation_key_ok(key: str) -> bool:
    if len(key) > MAX_ANNOTATION_KEY:
        return False
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return bool(_ANNOTATION_NAME.match(name))


def parse_gateway_parameters(body: Mapping[str, Any]) -> GatewayParameters:
    """A GatewayParameters object's body → its value, or SpecError naming every bad field."""
    if not isinstance(body, Mapping):
        raise SpecError(["expected an object"])
    r = _Reader()
    meta = body.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name or len(name) > MAX_OBJECT_NAME or not _DNS_SUBDOMAIN.match(name):
        r.problems.append("metadata.name: required, a DNS subdomain")
        name = ""
    spec = r.obj(body, "spec", "")
    r.problems += unknown_fields(spec, PARAMETERS_FIELDS, "spec")
    service = r.obj(spec, "service", "spec")
    envoy = r.obj(spec, "envoy", "spec")
    overload = r.obj(envoy, "overload", "spec.envoy")
    extproc = r.obj(spec, "extproc", "spec")
    limits = r.obj(spec, "limits", "spec")
    service_type = r.enum(service, "type", "spec.service", ServiceType)
    policy = r.enum(service, "externalTrafficPolicy", "spec.service", TrafficPolicy)
    if policy is TrafficPolicy.LOCAL and service_type in (None, ServiceType.CLUSTER_IP):
        # The API server refuses externalTrafficPolicy on a ClusterIP Service; say so here rather than at apply time.
        r.problems.append("spec.service.externalTrafficPolicy: Local needs service.type NodePort or LoadBalancer")
    params = GatewayParameters(
        name=name,
        replicas=r.integer(spec, "replicas", "spec", 1, MAX_REPLICAS),
        service_type=service_type,
        service_annotations=r.annotations(service, "annotations", "spec.service"),
        external_traffic_policy=policy,
        envoy_concurrency=r.integer(envoy, "concurrency", "spec.envoy", 1, MAX_CONCURRENCY),
        envoy_log_level=r.enum(envoy, "logLevel", "spec.envoy", EnvoyLogLevel),
        message_timeout_ms=r.integer(envoy, "messageTimeoutMs", "spec.envoy", 1, MAX_MESSAGE_TIMEOUT_MS),
        xff_num_trusted_hops=r.integer(envoy, "xffNumTrustedHops", "spec.envoy", 0, MAX_XFF_HOPS),
        backend_cluster_stats=r.boolean(envoy, "backendClusterStats", "spec.envoy"),
        max_heap_size_bytes=r.integer(overload, "maxHeapSizeBytes", _OVERLOAD, MIN_HEAP_BYTES, MAX_HEAP_BYTES),
        max_connections=r.integer(overload, "maxConnections", _OVERLOAD, 1, MAX_CONNECTIONS),
        pre_stop_sleep_seconds=r.integer(envoy, "preStopSleepSeconds", "spec.envoy", 0, MAX_PRESTOP_SECONDS),
        envoy_resources=r.resources(r.obj(envoy, "resources", "spec.envoy"), "spec.envoy.resources"),
        extproc_resources=r.resources(r.obj(extproc, "resources", "spec.extproc"), "spec.extproc.resources"),
        cookie_keys_secret=r.name(extproc, "cookieKeysSecret", "spec.extproc"),
        placement=r.enum(spec, "placement", "spec", Placement),
        gateways_per_namespace=r.integer(limits, "gatewaysPerNamespace", "spec.limits", 1, MAX_GATEWAYS_PER_NAMESPACE),
        replicas_per_namespace=r.integer(limits, "replicasPerNamespace", "spec.limits", 1, MAX_REPLICAS_PER_NAMESPACE),
    )
    if params.replicas is not None and (cap := params.replicas_per_namespace) is not None and cap < params.replicas:
        # The CRD's CEL rule, the same message: no Gateway of the class could ever be given a data plane.
        r.problems.append("spec.limits.replicasPerNamespace: must be at least spec.replicas (one Gateway's data plane)")
    if r.problems:
        raise SpecError(r.problems)
    return params


def parameters_or_refusal(body: Mapping[str, Any]) -> GatewayParameters | str:
    """GatewayParameters, or why its body was refused, bounded (a GatewayClass naming it says so in its status)."""
    try:
        return parse_gateway_parameters(body)
    except SpecError as exc:
        return "; ".join(exc.problems)[:MAX_REFUSAL]
