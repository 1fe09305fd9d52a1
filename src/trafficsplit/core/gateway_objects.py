"""Gateway API objects as the core sees them: GatewayClass, Gateway (its listeners), HTTPRoute, ReferenceGrant and
Namespace, parsed once from the raw API bodies into frozen, bounded values. Pure.

Why parse here and not trust the API server's schema: the same reason `spec.parse_split` re-checks a TrafficSplit.
Local mode and tests have no API server in front, a compiled generation must never rest on trust, and every list and
string is bounded before anything iterates over it. The bounds are the upstream CRD's (sigs.k8s.io/gateway-api
v1.6.3; tests/unit/test_gateway_objects.py compares them with the committed CRD copies).

Two kinds of problem, kept apart because the spec answers them differently:
- a body whose shape is wrong (a missing name, a list over its bound, a hostname that is no hostname) raises
  `SpecError`: the API server would have refused it, there is nothing to translate;
- a well-formed rule that uses what this implementation does not support (a RequestMirror or CORS filter, timeouts,
  a regex over the RE2 bound, a header value with a control byte) is kept, with its `problems`: the translation
  drops that rule and says so in the route's status (`UnsupportedValue`, `PartiallyInvalid`), as the spec asks,
  instead of silently ignoring the field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from trafficsplit.core.errors import SpecError
from trafficsplit.core.gateway_filters import (
    MAX_FILTER_HEADER_NAME,
    MAX_FILTER_HEADER_VALUE,
    MAX_HEADER_CHANGES,
    MAX_PATH_MODIFIER,
    NO_FILTERS,
    HeaderModifier,
    PathModifier,
    PathModifierType,
    RedirectCode,
    RequestRedirect,
    RuleFilters,
    Scheme,
    URLRewrite,
)
from trafficsplit.core.gateway_values import (
    MAX_BACKEND_REFS,
    MAX_HEADER_NAME,
    MAX_HEADER_VALUE,
    MAX_LISTENERS,
    MAX_MATCH_HEADERS,
    MAX_MATCH_QUERY_PARAMS,
    MAX_PATH,
    MAX_QUERY_VALUE,
    MAX_RULE_MATCHES,
    MAX_RULES,
    Method,
    PathType,
    RouteMatch,
    ValueMatch,
    ValueMatchType,
    route_match_problems,
)
from trafficsplit.core.rules import (
    is_dns_label,
    is_dns_subdomain,
    is_host,
    is_token,
    match_name_problems,
)
from trafficsplit.core.weights import MAX_WEIGHT

GATEWAY_GROUP = "gateway.networking.k8s.io"
# The GatewayClass controllerName this implementation answers to.
CONTROLLER_NAME = "trafficsplit.dev/gateway-controller"

# The upstream CRD's bounds (v1.6.3 standard and experimental channels agree on these); those a route table obeys
# too (rules, matches, backendRefs, listeners, match values) are in gateway_values.
MAX_PARENT_REFS = 32
MAX_ROUTE_HOSTNAMES = 16
MAX_ROUTE_MATCHES = 128  # across all rules of a route (the CRD's CEL rule)
MAX_FILTERS = 16
MAX_ALLOWED_KINDS = 8
MAX_CERTIFICATE_REFS = 64  # the CRD's bound
MAX_GRANT_ENTRIES = 16
MAX_SECTION_NAME = 253
MAX_SESSION_NAME = 128
MAX_LABELS = 64  # ours: labels a namespace selector compares (Kubernetes has no count limit; we keep the work small)
MAX_LABEL_TEXT = 317  # a label key (253 prefix + '/' + 63) or value (63); generous, bounds the comparison
MAX_GROUP = 253
MAX_KIND = 63
MAX_DURATION_TEXT = 32


_E = TypeVar("_E", bound=StrEnum)


class TLSMode(StrEnum):
    TERMINATE = "Terminate"
    PASSTHROUGH = "Passthrough"


class FromNamespaces(StrEnum):
    SAME = "Same"
    ALL = "All"
    SELECTOR = "Selector"


class SessionType(StrEnum):
    COOKIE = "Cookie"
    HEADER = "Header"


class CookieLifetime(StrEnum):
    SESSION = "Session"
    PERMANENT = "Permanent"


# Every field of the objects this module reads (a nested mapping: an object's fields, for a list its items'; None:
# a leaf). A field in a body that is not here is reported, never ignored: inside a rule it makes the rule
# unsupported (UnsupportedValue), elsewhere it is a problem of the listener or route that holds it. The guard test
# checks that each of these appears in a golden case and is a real field of the upstream CRD.
_REF = {"group": None, "kind": None, "namespace": None, "name": None}
_HEADER_MOD = {"set": {"name": None, "value": None}, "add": {"name": None, "value": None}, "remove": None}
_PATH_MOD = {"type": None, "replaceFullPath": None, "replacePrefixMatch": None}
_BACKEND_FILTER: Mapping[str, Any] = {
    "type": None,
    "requestHeaderModifier": _HEADER_MOD,
    "responseHeaderModifier": _HEADER_MOD,
}
_RULE_FILTER: Mapping[str, Any] = {
    **_BACKEND_FILTER,
    "requestRedirect": {"scheme": None, "hostname": None, "path": _PATH_MOD, "port": None, "statusCode": None},
    "urlRewrite": {"hostname": None, "path": _PATH_MOD},
}
SUPPORTED_ROUTE_FIELDS: Mapping[str, Any] = {
    "parentRefs": {**_REF, "sectionName": None, "port": None},
    "hostnames": None,
    "rules": {
        "name": None,
        "matches": {
            "path": {"type": None, "value": None},
            "headers": {"type": None, "name": None, "value": None},
            "queryParams": {"type": None, "name": None, "value": None},
            "method": None,
        },
        "filters": _RULE_FILTER,
        "backendRefs": {**_REF, "port": None, "weight": None, "filters": _BACKEND_FILTER},
        "sessionPersistence": {
            "sessionName": None,
            "absoluteTimeout": None,
            "type": None,
            "cookieConfig": {"lifetimeType": None},
        },
    },
}
_SELECTOR = {"matchLabels": None, "matchExpressions": {"key": None, "operator": None, "values": None}}
SUPPORTED_GATEWAY_FIELDS: Mapping[str, Any] = {
    "gatewayClassName": None,
    "listeners": {
        "name": None,
        "hostname": None,
        "port": None,
        "protocol": None,
        "allowedRoutes": {"namespaces": {"from": None, "selector": _SELECTOR}, "kinds": {"group": None, "kind": None}},
        "tls": {"mode": None, "certificateRefs": _REF},
    },
}


def unknown_fields(value: Any, fields: Mapping[str, Any], path: str) -> list[str]:
    """`path.field: not supported` for every field of `value` (an object or a list of objects) not in `fields`."""
    out: list[str] = []
    items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
    for i, obj in items:
        if not isinstance(obj, Mapping):
            continue
        where = path if i is None else f"{path}[{i}]"
        for key, sub in obj.items():
            if key not in fields:
                out.append(f"{where}.{key}: not supported by this implementation")
            elif fields[key] is not None:
                out.extend(unknown_fields(sub, fields[key], f"{where}.{key}"))
    return out


# --- small readers: each returns the value or records a problem under its path ----------------------------------------


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class _Reader:
    """Collects every shape problem of one body, so a user fixes them all at once."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def obj(self, raw: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
        value = raw.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.add(_at(path, key), "expected an object")
            return {}
        return value

    def items(self, raw: Mapping[str, Any], key: str, path: str, bound: int) -> list[Any]:
        value = raw.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(_at(path, key), "expected a list")
            return []
        if len(value) > bound:
            self.add(_at(path, key), f"{len(value)} items, at most {bound} are allowed")
            return []
        return value

    def text(self, raw: Mapping[str, Any], key: str, path: str, bound: int, required: bool = False) -> str | None:
        value = raw.get(key)
        if value is None:
            if required:
                self.add(_at(path, key), "required")
            return None
        if not isinstance(value, str):
            self.add(_at(path, key), f"expected a string, got {type(value).__name__}")
            return None
        if len(value) > bound:
            self.add(_at(path, key), f"{len(value)} characters, at most {bound} are allowed")
            return None
        return value

    def integer(self, raw: Mapping[str, Any], key: str, path: str, low: int, high: int) -> int | None:
        value = raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.add(_at(path, key), f"expected an integer, got {type(value).__name__}")
            return None
        if not low <= value <= high:
            self.add(_at(path, key), f"must be {low}..{high}, got {value}")
            return None
        return value

    def enum(self, raw: Mapping[str, Any], key: str, path: str, kind: type[_E], default: _E) -> _E:
        value = self.text(raw, key, path, 64)
        if value is None:
            return default
        try:
            return kind(value)
        except ValueError:
            self.add(_at(path, key), f"{value!r} must be one of {', '.join(k.value for k in kind)}")
            return default

    def done(self) -> None:
        if self.problems:
            raise SpecError(self.problems)


@dataclass(frozen=True, slots=True)
class Meta:
    namespace: str
    name: str
    generation: int
    created: str  # creationTimestamp (RFC 3339, so text order is time order): older routes win precedence ties

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def _meta(body: Mapping[str, Any], r: _Reader, namespaced: bool = True) -> Meta:
    if not isinstance(body, Mapping):
        raise SpecError(["expected an object"])
    m = r.obj(body, "metadata", "")
    name = r.text(m, "name", "metadata", 253, required=True) or ""
    if name and not is_dns_subdomain(name):
        r.add("metadata.name", f"{name[:64]!r} must be a DNS subdomain")
    ns = (r.text(m, "namespace", "metadata", 63, required=True) or "") if namespaced else ""
    if ns and not is_dns_label(ns):
        r.add("metadata.namespace", f"{ns[:64]!r} must be a DNS label")
    generation = r.integer(m, "generation", "metadata", 0, 2**63 - 1) or 0
    created = r.text(m, "creationTimestamp", "metadata", 64) or ""
    return Meta(ns, name, generation, created)


def _hostname(value: str | None, path: str, r: _Reader, wildcard: bool = True) -> str | None:
    """A Gateway API Hostname: a lowercase DNS name, `*.`-prefixed only where allowed, never an IP address."""
    if value is None:
        return None
    host = value.lower()
    if not is_host(host) or (not wildcard and host.startswith("*.")) or _is_ip(host):
        r.add(path, f"{value[:64]!r} is not a hostname" + ("" if wildcard else " (no wildcard here)"))
        return None
    return host


def _is_ip(host: str) -> bool:
    parts = host.split(".")
    return len(parts) == 4 and all(p.isdigit() for p in parts)


# --- GatewayClass, Namespace, ReferenceGrant --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ParametersRef:
    """A GatewayClass's `spec.parametersRef` as written; whether it names something usable is the translation's
    call (`gateway_classes.class_parameters`), since a wrong one is a status, not a malformed body."""

    group: str
    kind: str
    name: str
    namespace: str | None  # set only for a namespaced kind


@dataclass(frozen=True, slots=True)
class GatewayClass:
    meta: Meta
    controller_name: str
    parameters_ref: ParametersRef | None = None

    @property
    def ours(self) -> bool:
        return self.controller_name == CONTROLLER_NAME


def parse_gateway_class(body: Mapping[str, Any]) -> GatewayClass:
    r = _Reader()
    meta = _meta(body, r, namespaced=False)
    spec = r.obj(body, "spec", "")
    controller = r.text(spec, "controllerName", "spec", 253, required=True) or ""
    ref: ParametersRef | None = None
    if "parametersRef" in spec:
        raw = r.obj(spec, "parametersRef", "spec")
        p = "spec.parametersRef"
        group = r.text(raw, "group", p, MAX_GROUP, required=True)
        kind = r.text(raw, "kind", p, MAX_KIND, required=True)
        name = r.text(raw, "name", p, 253, required=True)
        namespace = r.text(raw, "namespace", p, 63)
        if group is not None and kind is not None and name is not None:
            ref = ParametersRef(group, kind, name, namespace)
    r.done()
    return GatewayClass(meta, controller, ref)


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    labels: tuple[tuple[str, str], ...]


def parse_namespace(body: Mapping[str, Any]) -> Namespace:
    r = _Reader()
    meta = _meta(body, r, namespaced=False)
    labels = _labels(r.obj(r.obj(body, "metadata", ""), "labels", "metadata"), "metadata.labels", r)
    r.done()
    return Namespace(meta.name, labels)


def _labels(raw: Mapping[str, Any], path: str, r: _Reader) -> tuple[tuple[str, str], ...]:
    if len(raw) > MAX_LABELS:
        r.add(path, f"{len(raw)} labels, at most {MAX_LABELS} are compared")
        return ()
    out: list[tuple[str, str]] = []
    for k, v in raw.items():
        if not isinstance(k, str) or not isinstance(v, str) or len(k) > MAX_LABEL_TEXT or len(v) > MAX_LABEL_TEXT:
            r.add(f"{path}.{str(k)[:64]}", "a label is a string key and a string value")
            continue
        out.append((k, v))
    return tuple(sorted(out))


@dataclass(frozen=True, slots=True)
class GrantFrom:
    group: str
    kind: str
    namespace: str


@dataclass(frozen=True, slots=True)
class GrantTo:
    group: str
    kind: str
    name: str | None  # None: every object of the kind in the grant's namespace


@dataclass(frozen=True, slots=True)
class ReferenceGrant:
    meta: Meta
    sources: tuple[GrantFrom, ...]
    targets: tuple[GrantTo, ...]

    def permits(self, source: GrantFrom, target_group: str, target_kind: str, target_name: str) -> bool:
        return source in self.sources and any(
            t.group == target_group and t.kind == target_kind and t.name in (None, target_name) for t in self.targets
        )


def parse_reference_grant(body: Mapping[str, Any]) -> ReferenceGrant:
    r = _Reader()
    meta = _meta(body, r)
    spec = r.obj(body, "spec", "")
    sources: list[GrantFrom] = []
    for i, f in enumerate(r.items(spec, "from", "spec", MAX_GRANT_ENTRIES)):
        p = f"spec.from[{i}]"
        if not isinstance(f, Mapping):
            r.add(p, "expected an object")
            continue
        group = r.text(f, "group", p, MAX_GROUP, required=True)
        kind = r.text(f, "kind", p, MAX_KIND, required=True)
        ns = r.text(f, "namespace", p, 63, required=True)
        if group is not None and kind is not None and ns is not None:
            sources.append(GrantFrom(group, kind, ns))
    targets: list[GrantTo] = []
    for i, t in enumerate(r.items(spec, "to", "spec", MAX_GRANT_ENTRIES)):
        p = f"spec.to[{i}]"
        if not isinstance(t, Mapping):
            r.add(p, "expected an object")
            continue
        group = r.text(t, "group", p, MAX_GROUP, required=True)
        kind = r.text(t, "kind", p, MAX_KIND, required=True)
        name = r.text(t, "name", p, 253)
        if group is not None and kind is not None:
            targets.append(GrantTo(group, kind, name))
    if not sources:
        r.add("spec.from", "at least one entry is required")
    if not targets:
        r.add("spec.to", "at least one entry is required")
    r.done()
    return ReferenceGrant(meta, tuple(sources), tuple(targets))


# --- Gateway ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector: every matchLabels pair and every expression must hold (an empty one selects all)."""

    labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (key, In|NotIn|Exists|DoesNotExist, values)

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.labels):
            return False
        for key, op, values in self.expressions:
            present = key in labels
            ok = {
                "In": present and labels.get(key) in values,
                "NotIn": not present or labels.get(key) not in values,
                "Exists": present,
                "DoesNotExist": not present,
            }[op]
            if not ok:
                return False
        return True


_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _selector(raw: Mapping[str, Any], path: str, r: _Reader) -> LabelSelector:
    labels = _labels(r.obj(raw, "matchLabels", path), f"{path}.matchLabels", r)
    expressions: list[tuple[str, str, tuple[str, ...]]] = []
    for i, e in enumerate(r.items(raw, "matchExpressions", path, MAX_LABELS)):
        p = f"{path}.matchExpressions[{i}]"
        if not isinstance(e, Mapping):
            r.add(p, "expected an object")
            continue
        key = r.text(e, "key", p, MAX_LABEL_TEXT, required=True)
        op = r.text(e, "operator", p, 16, required=True)
        values = r.items(e, "values", p, MAX_LABELS)
        if op is not None and op not in _SELECTOR_OPERATORS:
            r.add(f"{p}.operator", f"{op!r} must be one of {', '.join(_SELECTOR_OPERATORS)}")
            continue
        if not all(isinstance(v, str) and len(v) <= MAX_LABEL_TEXT for v in values):
            r.add(f"{p}.values", "expected a list of strings")
            continue
        if op in ("In", "NotIn") and not values:
            r.add(f"{p}.values", f"{op} needs at least one value")
            continue
        if key is not None and op is not None:
            expressions.append((key, op, tuple(values)))
    return LabelSelector(labels, tuple(expressions))


@dataclass(frozen=True, slots=True)
class RouteKind:
    group: str
    kind: str


HTTPROUTE_KIND = RouteKind(GATEWAY_GROUP, "HTTPRoute")


@dataclass(frozen=True, slots=True, kw_only=True)
class Listener:
    name: str
    hostname: str | None  # None: any host
    port: int
    protocol: str  # as written: HTTP is supported, the others are reported (UnsupportedProtocol)
    namespaces: FromNamespaces = FromNamespaces.SAME
    selector: LabelSelector | None = None
    kinds: tuple[RouteKind, ...] = ()  # empty: the kinds the protocol supports
    problems: tuple[str, ...] = ()  # fields this implementation does not support (tls.options, ...)
    tls: ListenerTLS | None = None  # as written: the translation checks it against the protocol


@dataclass(frozen=True, slots=True)
class CertificateRef:
    group: str  # "" is core
    kind: str
    name: str
    namespace: str  # defaulted to the Gateway's


@dataclass(frozen=True, slots=True)
class ListenerTLS:
    mode: TLSMode
    certificate_refs: tuple[CertificateRef, ...]


@dataclass(frozen=True, slots=True)
class Gateway:
    meta: Meta
    class_name: str
    listeners: tuple[Listener, ...]
    problems: tuple[str, ...] = ()  # gateway-level fields this implementation does not support


def parse_gateway(body: Mapping[str, Any]) -> Gateway:
    r = _Reader()
    meta = _meta(body, r)
    spec = r.obj(body, "spec", "")
    class_name = r.text(spec, "gatewayClassName", "spec", 253, required=True) or ""
    listeners: list[Listener] = []
    raw_listeners = r.items(spec, "listeners", "spec", MAX_LISTENERS)
    if not raw_listeners:
        r.add("spec.listeners", "at least one listener is required")
    for i, raw in enumerate(raw_listeners):
        p = f"spec.listeners[{i}]"
        if not isinstance(raw, Mapping):
            r.add(p, "expected an object")
            continue
        name = r.text(raw, "name", p, MAX_SECTION_NAME, required=True)
        if name is not None and not is_dns_subdomain(name):
            r.add(f"{p}.name", f"{name[:64]!r} must be a section name (lowercase letters, digits, '-', '.')")
            name = None
        hostname = _hostname(r.text(raw, "hostname", p, 253), f"{p}.hostname", r)
        port = r.integer(raw, "port", p, 1, 65535)
        if port is None and "port" not in raw:
            r.add(f"{p}.port", "required")
        protocol = r.text(raw, "protocol", p, 255, required=True)
        allowed = r.obj(raw, "allowedRoutes", p)
        ns = r.obj(allowed, "namespaces", f"{p}.allowedRoutes")
        from_ = r.enum(ns, "from", f"{p}.allowedRoutes.namespaces", FromNamespaces, FromNamespaces.SAME)
        selector = _selector(r.obj(ns, "selector", f"{p}.allowedRoutes.namespaces"), f"{p}.allowedRoutes", r)
        if from_ is FromNamespaces.SELECTOR and "selector" not in ns:
            r.add(f"{p}.allowedRoutes.namespaces.selector", "required when from is Selector")
        kinds: list[RouteKind] = []
        for j, k in enumerate(r.items(allowed, "kinds", f"{p}.allowedRoutes", MAX_ALLOWED_KINDS)):
            kp = f"{p}.allowedRoutes.kinds[{j}]"
            if not isinstance(k, Mapping):
                r.add(kp, "expected an object")
                continue
            group = r.text(k, "group", kp, MAX_GROUP)
            kind = r.text(k, "kind", kp, MAX_KIND, required=True)
            if kind is not None:
                kinds.append(RouteKind(GATEWAY_GROUP if group is None else group, kind))
        tls = _listener_tls(raw, p, meta.namespace, r) if "tls" in raw else None
        if name is not None and port is not None and protocol is not None:
            listeners.append(
                Listener(
                    name=name,
                    hostname=hostname,
                    port=port,
                    protocol=protocol,
                    namespaces=from_,
                    selector=selector if from_ is FromNamespaces.SELECTOR else None,
                    kinds=tuple(kinds),
                    problems=tuple(unknown_fields(raw, SUPPORTED_GATEWAY_FIELDS["listeners"], p)),
                    tls=tls,
                )
            )
    names = [lis.name for lis in listeners]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        r.add("spec.listeners", f"listener name {dup!r} is used more than once")
    r.done()
    gw_fields = {k: v for k, v in SUPPORTED_GATEWAY_FIELDS.items() if k != "listeners"}
    problems = unknown_fields({k: v for k, v in spec.items() if k != "listeners"}, gw_fields, "spec")
    return Gateway(meta, class_name, tuple(listeners), tuple(problems))


def _listener_tls(raw: Mapping[str, Any], p: str, namespace: str, r: _Reader) -> ListenerTLS:
    tls = r.obj(raw, "tls", p)
    mode = r.enum(tls, "mode", f"{p}.tls", TLSMode, TLSMode.TERMINATE)
    refs: list[CertificateRef] = []
    for i, c in enumerate(r.items(tls, "certificateRefs", f"{p}.tls", MAX_CERTIFICATE_REFS)):
        cp = f"{p}.tls.certificateRefs[{i}]"
        if not isinstance(c, Mapping):
            r.add(cp, "expected an object")
            continue
        group = r.text(c, "group", cp, MAX_GROUP)
        kind = r.text(c, "kind", cp, MAX_KIND)
        name = r.text(c, "name", cp, 253, required=True)
        ns = r.text(c, "namespace", cp, 63)
        if name is not None:
            refs.append(CertificateRef("" if group is None else group, kind or "Secret", name, ns or namespace))
    return ListenerTLS(mode, tuple(refs))


# --- HTTPRoute --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ParentRef:
    group: str
    kind: str
    namespace: str  # defaulted to the route's
    name: str
    section_name: str | None = None
    port: int | None = None
    namespace_written: bool = True  # whether the spec names the namespace (the status echoes the ref as written)

    def to_dict(self) -> dict[str, Any]:
        """As the route's status echoes it (`status.parents[].parentRef`): as written, with the group and kind the
        API server defaults."""
        out: dict[str, Any] = {"group": self.group, "kind": self.kind}
        if self.namespace_written:
            out["namespace"] = self.namespace
        out["name"] = self.name
        if self.section_name is not None:
            out["sectionName"] = self.section_name
        if self.port is not None:
            out["port"] = self.port
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendRef:
    group: str
    kind: str
    namespace: str  # defaulted to the route's
    name: str
    port: int | None
    weight: int
    filters: RuleFilters = NO_FILTERS  # header modifiers applied to the requests this backend serves


@dataclass(frozen=True, slots=True)
class SessionPersistence:
    type: SessionType
    session_name: str | None
    absolute_timeout: int | None  # seconds
    lifetime: CookieLifetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteRule:
    index: int
    name: str | None
    matches: tuple[RouteMatch, ...]
    backend_refs: tuple[BackendRef, ...]
    session: SessionPersistence | None
    filters: RuleFilters = NO_FILTERS
    # Why this rule cannot be served as written (unsupported fields, a regex over the bound); empty when it can.
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HTTPRoute:
    meta: Meta
    parent_refs: tuple[ParentRef, ...]
    hostnames: tuple[str, ...]
    rules: tuple[RouteRule, ...]


def parse_httproute(body: Mapping[str, Any]) -> HTTPRoute:
    r = _Reader()
    meta = _meta(body, r)
    spec = r.obj(body, "spec", "")
    parents: list[ParentRef] = []
    for i, raw in enumerate(r.items(spec, "parentRefs", "spec", MAX_PARENT_REFS)):
        p = f"spec.parentRefs[{i}]"
        if not isinstance(raw, Mapping):
            r.add(p, "expected an object")
            continue
        name = r.text(raw, "name", p, 253, required=True)
        written_ns = r.text(raw, "namespace", p, 63)
        ref = ParentRef(
            group=r.text(raw, "group", p, MAX_GROUP) or GATEWAY_GROUP,
            kind=r.text(raw, "kind", p, MAX_KIND) or "Gateway",
            namespace=written_ns or meta.namespace,
            name=name or "",
            section_name=r.text(raw, "sectionName", p, MAX_SECTION_NAME),
            port=r.integer(raw, "port", p, 1, 65535),
            namespace_written=written_ns is not None,
        )
        if name is not None:
            parents.append(ref)
    hostnames: list[str] = []
    for i, h in enumerate(r.items(spec, "hostnames", "spec", MAX_ROUTE_HOSTNAMES)):
        host = _hostname(h if isinstance(h, str) else f"<{type(h).__name__}>", f"spec.hostnames[{i}]", r)
        if host is not None and host not in hostnames:
            hostnames.append(host)
    raw_rules = r.items(spec, "rules", "spec", MAX_RULES)
    if not raw_rules and "rules" not in spec:
        raw_rules = [{}]  # the CRD's default: one rule matching every request, with no backend
    # The CRD's route-wide bound; a rule whose matches are no list is reported where the rule is read.
    total = sum(len(m) for x in raw_rules if isinstance(x, Mapping) and isinstance(m := x.get("matches"), list))
    if total > MAX_ROUTE_MATCHES:
        r.add("spec.rules", f"{total} matches across the rules, at most {MAX_ROUTE_MATCHES} are allowed")
        raw_rules = []
    rules = [_rule(i, raw, meta.namespace, r) for i, raw in enumerate(raw_rules)]
    names = [x.name for x in rules if x.name is not None]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        r.add("spec.rules", f"rule name {dup!r} is used more than once")
    route_fields = {k: v for k, v in SUPPORTED_ROUTE_FIELDS.items() if k != "rules"}
    for problem in unknown_fields({k: v for k, v in spec.items() if k != "rules"}, route_fields, "spec"):
        r.problems.append(problem)
    r.done()
    return HTTPRoute(meta, tuple(parents), tuple(hostnames), tuple(rules))


def _rule(index: int, raw: Any, namespace: str, r: _Reader) -> RouteRule:
    p = f"spec.rules[{index}]"
    if not isinstance(raw, Mapping):
        r.add(p, "expected an object")
        return RouteRule(
            index=index, name=None, matches=(), backend_refs=(), session=None, problems=("expected an object",)
        )
    # The rule's own problems are unsupported values, not shape errors: kept with the rule, which is then dropped.
    unsupported = [
        q.removeprefix(f"{p}.")
        for q in unknown_fields({k: v for k, v in raw.items() if k != "filters"}, SUPPORTED_ROUTE_FIELDS["rules"], p)
        if ".filters:" not in q and ".filters[" not in q  # _filters reports those
    ]
    filters = _filters(raw.get("filters"), "filters", r, p, unsupported, backend=False)
    name = r.text(raw, "name", p, MAX_SECTION_NAME)
    raw_matches = r.items(raw, "matches", p, MAX_RULE_MATCHES) or [{}]
    matches = tuple(_match(f"{p}.matches[{j}]", m, r, unsupported) for j, m in enumerate(raw_matches))
    # The CRD's rules across a rule's fields (its CEL): the API server refuses such a route.
    if filters.redirect is not None and raw.get("backendRefs"):
        r.add(f"{p}.filters", "a RequestRedirect filter must not be used together with backendRefs")
    if filters.replaces_prefix and (len(matches) != 1 or matches[0].path_type is not PathType.PREFIX):
        r.add(f"{p}.matches", "a path modifier of type ReplacePrefixMatch needs exactly one PathPrefix match")
    refs: list[BackendRef] = []
    for j, b in enumerate(r.items(raw, "backendRefs", p, MAX_BACKEND_REFS)):
        bp = f"{p}.backendRefs[{j}]"
        if not isinstance(b, Mapping):
            r.add(bp, "expected an object")
            continue
        ref_filters = _filters(b.get("filters"), f"backendRefs[{j}].filters", r, p, unsupported, backend=True)
        ref_name = r.text(b, "name", bp, 253, required=True)
        group = r.text(b, "group", bp, MAX_GROUP)
        kind = r.text(b, "kind", bp, MAX_KIND)
        port = r.integer(b, "port", bp, 1, 65535)
        weight = r.integer(b, "weight", bp, 0, MAX_WEIGHT)
        ref = BackendRef(
            group="" if group is None else group,
            kind=kind or "Service",
            namespace=r.text(b, "namespace", bp, 63) or namespace,
            name=ref_name or "",
            port=port,
            weight=1 if weight is None else weight,
            filters=ref_filters,
        )
        if ref.group == "" and ref.kind == "Service" and port is None:
            r.add(f"{bp}.port", "required for a Service")
        if ref_name is not None:
            refs.append(ref)
    # Present, even `{}`, is persistence (every field is optional; `type` defaults to Cookie); absent is none.
    session = (
        _session(r.obj(raw, "sessionPersistence", p), f"{p}.sessionPersistence", r, unsupported)
        if raw.get("sessionPersistence") is not None
        else None
    )
    return RouteRule(
        index=index,
        name=name,
        matches=matches,
        backend_refs=tuple(refs),
        session=session,
        filters=filters,
        problems=tuple(unsupported),
    )


# Filter type → its field. The ones this gateway does not serve are reported (the rule is dropped), never ignored.
_FILTER_FIELD = {
    "RequestHeaderModifier": "requestHeaderModifier",
    "ResponseHeaderModifier": "responseHeaderModifier",
    "RequestRedirect": "requestRedirect",
    "URLRewrite": "urlRewrite",
    "RequestMirror": "requestMirror",
    "CORS": "cors",
    "ExtensionRef": "extensionRef",
    "ExternalAuth": "externalAuth",
}
_FILTER_GAPS = {
    "RequestMirror": "mirrored requests",
    "CORS": "CORS responses",
    "ExtensionRef": "extension filters",
    "ExternalAuth": "external authorization",
}


def _filters(raw: Any, rel: str, r: _Reader, p: str, unsupported: list[str], *, backend: bool) -> RuleFilters:
    """A rule's (or a backendRef's) filters. The CRD's shape rules are the body's problems; what this gateway does
    not serve (a filter type, a field, a value it cannot put in a header) the rule's, in `unsupported`."""
    if raw is None:
        return NO_FILTERS
    if not isinstance(raw, list) or len(raw) > MAX_FILTERS:
        r.add(f"{p}.{rel}", f"expected a list of at most {MAX_FILTERS} filters")
        return NO_FILTERS
    found: dict[str, Any] = {}
    seen: set[str] = set()
    supported = _BACKEND_FILTER if backend else _RULE_FILTER
    for i, f in enumerate(raw):
        fp, frel = f"{p}.{rel}[{i}]", f"{rel}[{i}]"
        type_ = f.get("type") if isinstance(f, Mapping) else None
        if not isinstance(type_, str) or type_ not in _FILTER_FIELD:
            r.add(f"{fp}.type", f"must be one of {', '.join(_FILTER_FIELD)}")
            continue
        assert isinstance(f, Mapping)
        if type_ in seen and type_ not in ("RequestMirror", "ExtensionRef"):
            r.add(fp, f"{type_} filter cannot be repeated")
            continue
        seen.add(type_)
        key = _FILTER_FIELD[type_]
        for other_type, other in _FILTER_FIELD.items():
            if other != key and other in f:
                r.add(f"{fp}.{other}", f"must be nil if the filter type is not {other_type}")
        body = f.get(key)
        if not isinstance(body, Mapping):
            r.add(f"{fp}.{key}", f"must be specified for filter type {type_}")
            continue
        if type_ in _FILTER_GAPS:
            unsupported.append(f"{frel}: {type_} is not supported (this gateway has no {_FILTER_GAPS[type_]})")
            continue
        if key not in supported:
            unsupported.append(f"{frel}: {type_} on a backendRef is not supported (header modifiers are)")
            continue
        unsupported += [q.removeprefix(f"{p}.") for q in unknown_fields(body, supported[key], f"{fp}.{key}")]
        try:
            found[key] = _FILTER_READERS[key](body, f"{fp}.{key}", r)
        except SpecError as exc:
            unsupported.extend(exc.within(f"{frel}.{key}").problems)
    if "RequestRedirect" in seen and "URLRewrite" in seen:
        r.add(f"{p}.{rel}", "may specify either a RequestRedirect or a URLRewrite filter, but not both")
    try:
        return RuleFilters(
            request_headers=found.get("requestHeaderModifier"),
            response_headers=found.get("responseHeaderModifier"),
            redirect=found.get("requestRedirect"),
            rewrite=found.get("urlRewrite"),
        )
    except SpecError:
        return NO_FILTERS  # both a redirect and a rewrite: reported above


def _header_pairs(raw: Mapping[str, Any], key: str, p: str, r: _Reader) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for i, item in enumerate(r.items(raw, key, p, MAX_HEADER_CHANGES)):
        ip = f"{p}.{key}[{i}]"
        if not isinstance(item, Mapping):
            r.add(ip, "expected an object")
            continue
        name = r.text(item, "name", ip, MAX_FILTER_HEADER_NAME, required=True)
        value = r.text(item, "value", ip, MAX_FILTER_HEADER_VALUE, required=True)
        if name is not None and value is not None:
            out.append((name, value))
    return tuple(out)


def _header_modifier(request: bool) -> Callable[[Mapping[str, Any], str, _Reader], HeaderModifier]:
    def read(raw: Mapping[str, Any], p: str, r: _Reader) -> HeaderModifier:
        remove: list[str] = []
        for i, x in enumerate(r.items(raw, "remove", p, MAX_HEADER_CHANGES)):
            if isinstance(x, str):
                remove.append(x)
            else:
                r.add(f"{p}.remove[{i}]", "expected a string")
        return HeaderModifier(
            set=_header_pairs(raw, "set", p, r),
            add=_header_pairs(raw, "add", p, r),
            remove=tuple(remove),
            request=request,
        )

    return read


def _path_modifier(raw: Mapping[str, Any], p: str, r: _Reader) -> PathModifier | None:
    path = r.obj(raw, "path", p)
    if not path:
        return None
    pp = f"{p}.path"
    if "type" not in path:
        r.add(f"{pp}.type", "required")
        return None
    type_ = r.enum(path, "type", pp, PathModifierType, PathModifierType.FULL)
    own, other = ("replaceFullPath", "replacePrefixMatch")[:: 1 if type_ is PathModifierType.FULL else -1]
    value = r.text(path, own, pp, MAX_PATH_MODIFIER)
    if other in path:
        r.add(f"{pp}.{other}", f"must not be set when type is {type_.value}")
    if value is None:
        r.add(f"{pp}.{own}", f"must be specified when type is {type_.value}")
        return None
    try:
        return PathModifier(type_, value)
    except SpecError as exc:
        raise exc.within("path") from None


def _redirect(raw: Mapping[str, Any], p: str, r: _Reader) -> RequestRedirect:
    scheme = r.enum(raw, "scheme", p, Scheme, Scheme.HTTP) if "scheme" in raw else None
    code = r.integer(raw, "statusCode", p, 100, 599)
    status = RedirectCode.FOUND
    if code is not None:
        try:
            status = RedirectCode(code)
        except ValueError:
            r.add(f"{p}.statusCode", f"must be one of {', '.join(str(int(c)) for c in RedirectCode)}")
    return RequestRedirect(
        scheme=scheme,
        hostname=r.text(raw, "hostname", p, 253),
        path=_path_modifier(raw, p, r),
        port=r.integer(raw, "port", p, 1, 65535),
        status_code=status,
    )


def _rewrite(raw: Mapping[str, Any], p: str, r: _Reader) -> URLRewrite:
    return URLRewrite(hostname=r.text(raw, "hostname", p, 253), path=_path_modifier(raw, p, r))


_FILTER_READERS: Mapping[str, Callable[[Mapping[str, Any], str, _Reader], object]] = {
    "requestHeaderModifier": _header_modifier(request=True),
    "responseHeaderModifier": _header_modifier(request=False),
    "requestRedirect": _redirect,
    "urlRewrite": _rewrite,
}


def _match(p: str, raw: Any, r: _Reader, unsupported: list[str]) -> RouteMatch:
    if not isinstance(raw, Mapping):
        r.add(p, "expected an object")
        return RouteMatch()
    path = r.obj(raw, "path", p)
    path_type = r.enum(path, "type", f"{p}.path", PathType, PathType.PREFIX)
    value = r.text(path, "value", f"{p}.path", MAX_PATH)
    value = "/" if value is None else value
    rel = p.split(".", 2)[-1]  # matches[j], relative to the rule
    if path_type is not PathType.REGULAR_EXPRESSION and not value.startswith("/"):
        r.add(f"{p}.path.value", "must be an absolute path (start with '/')")
    headers = _value_matches(raw, "headers", p, MAX_MATCH_HEADERS, MAX_HEADER_VALUE, r, fold=True)
    query = _value_matches(raw, "queryParams", p, MAX_MATCH_QUERY_PARAMS, MAX_QUERY_VALUE, r, fold=False)
    method_raw = r.text(raw, "method", p, 16)
    method: Method | None = None
    if method_raw is not None:
        try:
            method = Method(method_raw)
        except ValueError:
            r.add(f"{p}.method", f"{method_raw!r} is not an HTTP method the API allows")
    match = RouteMatch(path_type=path_type, path=value, headers=headers, query_params=query, method=method)
    # What a data plane cannot serve (a regex over the RE2 bound, a control byte): the rule's, not the body's.
    unsupported.extend(f"{rel}.{q}" for q in route_match_problems(match))
    return match


def _value_matches(
    raw: Mapping[str, Any],
    key: str,
    p: str,
    bound: int,
    value_bound: int,
    r: _Reader,
    *,
    fold: bool,
) -> tuple[ValueMatch, ...]:
    out: list[ValueMatch] = []
    for i, h in enumerate(r.items(raw, key, p, bound)):
        hp = f"{p}.{key}[{i}]"
        if not isinstance(h, Mapping):
            r.add(hp, "expected an object")
            continue
        type_ = r.enum(h, "type", hp, ValueMatchType, ValueMatchType.EXACT)
        name = r.text(h, "name", hp, MAX_HEADER_NAME, required=True)
        value = r.text(h, "value", hp, value_bound, required=True)
        if name is not None and not is_token(name):
            r.problems.extend(f"{hp}.{q}" for q in match_name_problems(key.removesuffix("s"), name))
            continue
        if name is not None and value is not None:
            out.append(ValueMatch(type_, name.lower() if fold else name, value))
    return tuple(out)


def _session(raw: Mapping[str, Any], p: str, r: _Reader, unsupported: list[str]) -> SessionPersistence:
    type_ = r.enum(raw, "type", p, SessionType, SessionType.COOKIE)
    name = r.text(raw, "sessionName", p, MAX_SESSION_NAME)
    timeout_raw = r.text(raw, "absoluteTimeout", p, MAX_DURATION_TEXT)
    timeout = None
    if timeout_raw is not None:
        timeout = parse_duration(timeout_raw)
        if timeout is None:
            r.add(f"{p}.absoluteTimeout", f"{timeout_raw!r} is not a duration such as 1h30m (GEP-2257)")
    cookie = r.obj(raw, "cookieConfig", p)
    lifetime = None
    if "lifetimeType" in cookie:
        lifetime = r.enum(cookie, "lifetimeType", f"{p}.cookieConfig", CookieLifetime, CookieLifetime.SESSION)
    if cookie and type_ is not SessionType.COOKIE:
        r.add(f"{p}.cookieConfig", "can only be set with type Cookie")
    if lifetime is CookieLifetime.PERMANENT and timeout_raw is None:
        r.add(f"{p}.absoluteTimeout", "required when cookieConfig.lifetimeType is Permanent")
    return SessionPersistence(type_, name, timeout, lifetime)


_UNITS = {"h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}


def parse_duration(text: str) -> int | None:
    """A GEP-2257 duration (`^([0-9]{1,5}(h|m|s|ms)){1,4}$`) in whole seconds, rounded up; None when invalid."""
    total_ms = 0
    parts = 0
    i = 0
    while i < len(text):
        j = i
        while j < len(text) and text[j].isascii() and text[j].isdigit():
            j += 1
        if not 1 <= j - i <= 5:
            return None
        unit = "ms" if text.startswith("ms", j) else text[j : j + 1]
        if unit not in _UNITS:
            return None
        total_ms += int(text[i:j]) * _UNITS[unit]
        parts += 1
        i = j + len(unit)
    if not 1 <= parts <= 4:
        return None
    return -(-total_ms // 1000)
