"""Gateway API objects as the core sees them: GatewayClass, Namespace, ReferenceGrant and Gateway (its listeners,
their TLS and namespace selectors), parsed once from the raw API bodies into frozen, bounded values. Pure.

The readers, the bounds and the two kinds of problem (a malformed body raises `SpecError`; a field this implementation
does not support is kept in `problems`) are gatewayapi.reading's; HTTPRoute is gatewayapi.httproute's.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from trafficsplit.core.gatewayapi.reading import (
    CONTROLLER_NAME,
    GATEWAY_GROUP,
    MAX_GROUP,
    MAX_KIND,
    MAX_SECTION_NAME,
    REF_FIELDS,
    Meta,
    Reader,
    read_hostname,
    read_meta,
    unsupported_fields,
)
from trafficsplit.core.model.matches import MAX_LISTENERS
from trafficsplit.core.model.rules import is_dns_subdomain

# The upstream CRD's bounds (v1.6.3 standard and experimental channels agree on these); the listeners' count, which
# a route table obeys too, is in model.matches.
MAX_ALLOWED_KINDS = 8
MAX_CERTIFICATE_REFS = 64  # the CRD's bound
MAX_CA_CERTIFICATE_REFS = 16  # the CRD's bound on a frontend validation's caCertificateRefs
MAX_PER_PORT_TLS = 64  # the CRD's bound on spec.tls.frontend.perPort
MAX_GRANT_ENTRIES = 16
MAX_LABELS = 64  # ours: labels a namespace selector compares (Kubernetes has no count limit; we keep the work small)
MAX_LABEL_TEXT = 317  # a label key (253 prefix + '/' + 63) or value (63); generous, bounds the comparison


class TLSMode(StrEnum):
    TERMINATE = "Terminate"
    PASSTHROUGH = "Passthrough"


class ValidationMode(StrEnum):
    ALLOW_VALID_ONLY = "AllowValidOnly"
    ALLOW_INSECURE_FALLBACK = "AllowInsecureFallback"


class FromNamespaces(StrEnum):
    SAME = "Same"
    ALL = "All"
    SELECTOR = "Selector"


class ListenersFrom(StrEnum):
    """A Gateway's `spec.allowedListeners.namespaces.from`: the namespaces whose ListenerSets may attach to it. None,
    the default, admits none."""

    NONE = "None"
    SAME = "Same"
    ALL = "All"
    SELECTOR = "Selector"


# Every field of a Gateway this module reads (a nested mapping: an object's fields, for a list its items'; None: a
# leaf). A field in a body that is not here is reported, never ignored: a problem of the listener or the Gateway
# that holds it. The guard test checks that each of these appears in a golden case and is a real field of the
# upstream CRD.
_SELECTOR = {"matchLabels": None, "matchExpressions": {"key": None, "operator": None, "values": None}}
_VALIDATION = {"caCertificateRefs": REF_FIELDS, "mode": None}
_LISTENER_FIELDS = {
    "name": None,
    "hostname": None,
    "port": None,
    "protocol": None,
    "allowedRoutes": {"namespaces": {"from": None, "selector": _SELECTOR}, "kinds": {"group": None, "kind": None}},
    "tls": {"mode": None, "certificateRefs": REF_FIELDS},
}
SUPPORTED_GATEWAY_FIELDS: Mapping[str, Any] = {
    "gatewayClassName": None,
    "addresses": {"type": None, "value": None},  # read by `read_addresses`
    "listeners": _LISTENER_FIELDS,
    "allowedListeners": {"namespaces": {"from": None, "selector": _SELECTOR}},
    "tls": {
        "frontend": {
            "default": {"validation": _VALIDATION},
            "perPort": {"port": None, "tls": {"validation": _VALIDATION}},
        },
        "backend": {"clientCertificateRef": REF_FIELDS},
    },
}


# --- GatewayClass, Namespace, ReferenceGrant --------------------------------------------------------------------------

# The fields of a GatewayClass's and a ReferenceGrant's spec this module reads (as SUPPORTED_GATEWAY_FIELDS is for a
# Gateway): the guard test checks each appears in a golden case and is a field of the upstream CRD. `description`
# is read only for its bound; it changes nothing.
GATEWAY_CLASS_FIELDS: Mapping[str, Any] = {"controllerName": None, "description": None, "parametersRef": REF_FIELDS}
REFERENCE_GRANT_FIELDS: Mapping[str, Any] = {
    "from": {"group": None, "kind": None, "namespace": None},
    "to": {"group": None, "kind": None, "name": None},
}
MAX_CLASS_DESCRIPTION = 64  # the CRD's maxLength
MAX_ADDRESSES = 16  # the CRD's bound on spec.addresses
MAX_ADDRESS_TEXT = 253  # the CRD's maxLength of an address's type and value
IP_ADDRESS = "IPAddress"  # the CRD's default address type


@dataclass(frozen=True, slots=True)
class ParametersRef:
    """A GatewayClass's `spec.parametersRef` as written; whether it names something usable is the translation's
    call (`gatewayapi.classes.class_parameters`), since a wrong one is a status, not a malformed body."""

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
    r = Reader()
    meta = read_meta(body, r, namespaced=False)
    spec = r.obj(body, "spec", "")
    controller = r.text(spec, "controllerName", "spec", 253, required=True) or ""
    r.text(spec, "description", "spec", MAX_CLASS_DESCRIPTION)
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
    r = Reader()
    meta = read_meta(body, r, namespaced=False)
    labels = _labels(r.obj(r.obj(body, "metadata", ""), "labels", "metadata"), "metadata.labels", r)
    r.done()
    return Namespace(meta.name, labels)


def _labels(raw: Mapping[str, Any], path: str, r: Reader) -> tuple[tuple[str, str], ...]:
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
    r = Reader()
    meta = read_meta(body, r)
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


def _selector(raw: Mapping[str, Any], path: str, r: Reader) -> LabelSelector:
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
class FrontendValidation:
    """One `validation` of `spec.tls.frontend` (the default's or a port's): the CA refs as written and the mode.
    `path` is the field it was read from, which a listener's condition names."""

    ca_refs: tuple[CertificateRef, ...]
    mode: ValidationMode
    path: str


@dataclass(frozen=True, slots=True)
class FrontendTLS:
    """`spec.tls.frontend`: the default validation and the per-port ones (a port's replaces the default for every
    HTTPS listener on it; a port entry without `validation` turns validation off there)."""

    default: FrontendValidation | None
    per_port: tuple[tuple[int, FrontendValidation | None], ...] = ()

    def for_port(self, port: int) -> FrontendValidation | None:
        for p, validation in self.per_port:
            if p == port:
                return validation
        return self.default


@dataclass(frozen=True, slots=True, kw_only=True)
class Gateway:
    meta: Meta
    class_name: str
    listeners: tuple[Listener, ...]
    problems: tuple[str, ...] = ()  # gateway-level fields this implementation does not support
    # The static IPAddress values of spec.addresses (canonical form), which the data plane's Service is given
    static_addresses: tuple[str, ...] = ()
    frontend: FrontendTLS | None = None  # spec.tls.frontend: client certificate validation of HTTPS listeners
    # spec.tls.backend.clientCertificateRef: the certificate the data plane presents to TLS backends (BackendTLSPolicy)
    backend_client_certificate: CertificateRef | None = None
    # spec.allowedListeners: the namespaces whose ListenerSets may add listeners to it (gatewayapi.listener_sets)
    listeners_from: ListenersFrom = ListenersFrom.NONE
    listeners_selector: LabelSelector | None = None

    def client_validation(self, port: int) -> FrontendValidation | None:
        """The client certificate validation of the HTTPS listeners on `port`, as written (None: none)."""
        return None if self.frontend is None else self.frontend.for_port(port)


def parse_gateway(body: Mapping[str, Any]) -> Gateway:
    r = Reader()
    meta = read_meta(body, r)
    spec = r.obj(body, "spec", "")
    class_name = r.text(spec, "gatewayClassName", "spec", 253, required=True) or ""
    raw_listeners = r.items(spec, "listeners", "spec", MAX_LISTENERS)
    if not raw_listeners:
        r.add("spec.listeners", "at least one listener is required")
    listeners = _read_listeners(raw_listeners, "spec.listeners", meta.namespace, r)
    allowed = r.obj(r.obj(spec, "allowedListeners", "spec"), "namespaces", "spec.allowedListeners")
    ap = "spec.allowedListeners.namespaces"
    listeners_from = r.enum(allowed, "from", ap, ListenersFrom, ListenersFrom.NONE)
    listeners_selector = _selector(r.obj(allowed, "selector", ap), "spec.allowedListeners.namespaces", r)
    if listeners_from is ListenersFrom.SELECTOR and "selector" not in allowed:
        r.add(f"{ap}.selector", "required when from is Selector")
    problems, static = read_addresses(r.items(spec, "addresses", "spec", MAX_ADDRESSES), r)
    spec_tls = r.obj(spec, "tls", "spec")
    frontend = _frontend_tls(r.obj(spec_tls, "frontend", "spec.tls"), meta.namespace, r)
    client = r.obj(r.obj(spec_tls, "backend", "spec.tls"), "clientCertificateRef", "spec.tls.backend")
    backend_client = (
        _object_ref(client, "spec.tls.backend.clientCertificateRef", meta.namespace, r, default_kind="Secret")
        if client
        else None
    )
    r.done()
    gw_fields = {k: v for k, v in SUPPORTED_GATEWAY_FIELDS.items() if k != "listeners"}
    problems += unsupported_fields({k: v for k, v in spec.items() if k != "listeners"}, gw_fields, "spec")
    return Gateway(
        meta=meta,
        class_name=class_name,
        listeners=tuple(listeners),
        problems=tuple(problems),
        static_addresses=static,
        frontend=frontend,
        backend_client_certificate=backend_client,
        listeners_from=listeners_from,
        listeners_selector=listeners_selector if listeners_from is ListenersFrom.SELECTOR else None,
    )


def _read_listeners(raw_listeners: list[Any], path: str, namespace: str, r: Reader) -> tuple[Listener, ...]:
    """A Gateway's `spec.listeners` or a ListenerSet's: each listener read (a certificate ref's namespace defaults to
    the owner's), its names unique."""
    listeners: list[Listener] = []
    for i, raw in enumerate(raw_listeners):
        p = f"{path}[{i}]"
        if not isinstance(raw, Mapping):
            r.add(p, "expected an object")
            continue
        name = r.text(raw, "name", p, MAX_SECTION_NAME, required=True)
        if name is not None and not is_dns_subdomain(name):
            r.add(f"{p}.name", f"{name[:64]!r} must be a section name (lowercase letters, digits, '-', '.')")
            name = None
        hostname = read_hostname(r.text(raw, "hostname", p, 253), f"{p}.hostname", r)
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
        tls = _listener_tls(raw, p, namespace, r) if "tls" in raw else None
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
                    problems=tuple(unsupported_fields(raw, _LISTENER_FIELDS, p)),
                    tls=tls,
                )
            )
    names = [lis.name for lis in listeners]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        r.add(path, f"listener name {dup!r} is used more than once")
    return tuple(listeners)


# --- ListenerSet ------------------------------------------------------------------------------------------------------

LISTENER_SET_KIND = "ListenerSet"
# The fields of a ListenerSet's spec this module reads (as SUPPORTED_GATEWAY_FIELDS is for a Gateway).
LISTENER_SET_FIELDS: Mapping[str, Any] = {
    "parentRef": {"group": None, "kind": None, "name": None, "namespace": None},
    "listeners": _LISTENER_FIELDS,
}


@dataclass(frozen=True, slots=True)
class ListenerSet:
    """A ListenerSet: listeners added to the Gateway its `spec.parentRef` names (`gateway`, namespace/name; "" when
    the ref is not to a Gateway), if that Gateway's `allowedListeners` admits its namespace."""

    meta: Meta
    gateway: str
    listeners: tuple[Listener, ...]
    problems: tuple[str, ...] = ()  # fields this implementation does not support

    @property
    def age(self) -> tuple[str, str]:
        """The spec's precedence among a Gateway's ListenerSets: oldest first, then by namespace/name."""
        return (self.meta.created, self.meta.key)


def parse_listener_set(body: Mapping[str, Any]) -> ListenerSet:
    r = Reader()
    meta = read_meta(body, r)
    spec = r.obj(body, "spec", "")
    parent = r.obj(spec, "parentRef", "spec")
    pp = "spec.parentRef"
    group = r.text(parent, "group", pp, MAX_GROUP)
    kind = r.text(parent, "kind", pp, MAX_KIND) or "Gateway"
    name = r.text(parent, "name", pp, 253, required=True)
    namespace = r.text(parent, "namespace", pp, 63) or meta.namespace
    raw_listeners = r.items(spec, "listeners", "spec", MAX_LISTENERS)
    if not raw_listeners:
        r.add("spec.listeners", "at least one listener is required")
    listeners = _read_listeners(raw_listeners, "spec.listeners", meta.namespace, r)
    r.done()
    ours = (GATEWAY_GROUP if group is None else group, kind) == (GATEWAY_GROUP, "Gateway") and name
    problems = unsupported_fields(
        {k: v for k, v in spec.items() if k != "listeners"},
        {k: v for k, v in LISTENER_SET_FIELDS.items() if k != "listeners"},
        "spec",
    )
    return ListenerSet(
        meta=meta, gateway=f"{namespace}/{name}" if ours else "", listeners=listeners, problems=tuple(problems)
    )


def read_addresses(addresses: list[Any], r: Reader) -> tuple[list[str], tuple[str, ...]]:
    """`spec.addresses` → what of it this implementation cannot honour, each by its index (the Gateway's `Accepted:
    False, UnsupportedAddress`), and the static IP addresses it asks for, in canonical form. An IPAddress with no
    value asks for an address, which the data plane's Service assigns; one with a value is given to that Service
    (its ClusterIP, or an external IP beside a load balancer's), and an address the Service cannot hold is the
    Gateway's `Programmed: False, AddressNotUsable` (operator provisioner.py). Anything else is refused rather than
    ignored: a Gateway that silently answered on another address than the one asked for would mislead."""
    out: list[str] = []
    static: list[str] = []
    for i, raw in enumerate(addresses):
        p = f"spec.addresses[{i}]"
        if not isinstance(raw, Mapping):
            r.add(p, "expected an object")
            continue
        kind = r.text(raw, "type", p, MAX_ADDRESS_TEXT) or IP_ADDRESS
        value = r.text(raw, "value", p, MAX_ADDRESS_TEXT)
        if kind != IP_ADDRESS:
            out.append(f"{p}.type: {kind[:64]!r} is not supported (only {IP_ADDRESS})")
        elif value:
            try:
                ip = str(ipaddress.ip_address(value))
            except ValueError:
                out.append(f"{p}.value: {value[:64]!r} is not an IP address")
                continue
            if ip not in static:
                static.append(ip)
    return out, tuple(static)


def _frontend_tls(raw: Mapping[str, Any], namespace: str, r: Reader) -> FrontendTLS | None:
    """`spec.tls.frontend` (None when absent). The CRD requires `default` and unique ports; both are checked here too,
    since a body may come from a server without the CRD's validation."""
    if not raw:
        return None
    p = "spec.tls.frontend"
    if "default" not in raw:
        r.add(f"{p}.default", "required")
    default = _validation(r.obj(r.obj(raw, "default", p), "validation", f"{p}.default"), f"{p}.default", namespace, r)
    per_port: list[tuple[int, FrontendValidation | None]] = []
    for i, item in enumerate(r.items(raw, "perPort", p, MAX_PER_PORT_TLS)):
        ip = f"{p}.perPort[{i}]"
        if not isinstance(item, Mapping):
            r.add(ip, "expected an object")
            continue
        port = r.integer(item, "port", ip, 1, 65535)
        if port is None:
            if "port" not in item:
                r.add(f"{ip}.port", "required")
            continue
        if any(q == port for q, _ in per_port):
            r.add(f"{ip}.port", f"port {port} has a TLS configuration already")
            continue
        tls = r.obj(item, "tls", ip)
        per_port.append((port, _validation(r.obj(tls, "validation", f"{ip}.tls"), f"{ip}.tls", namespace, r)))
    return FrontendTLS(default, tuple(per_port))


def _validation(raw: Mapping[str, Any], parent: str, namespace: str, r: Reader) -> FrontendValidation | None:
    if not raw:
        return None
    p = f"{parent}.validation"
    mode = r.enum(raw, "mode", p, ValidationMode, ValidationMode.ALLOW_VALID_ONLY)
    items = r.items(raw, "caCertificateRefs", p, MAX_CA_CERTIFICATE_REFS)
    if not items:
        r.add(f"{p}.caCertificateRefs", "at least one reference is required")
    refs = _object_refs(items, f"{p}.caCertificateRefs", namespace, r, default_kind=None)
    return FrontendValidation(tuple(refs), mode, p)


def _listener_tls(raw: Mapping[str, Any], p: str, namespace: str, r: Reader) -> ListenerTLS:
    tls = r.obj(raw, "tls", p)
    mode = r.enum(tls, "mode", f"{p}.tls", TLSMode, TLSMode.TERMINATE)
    items = r.items(tls, "certificateRefs", f"{p}.tls", MAX_CERTIFICATE_REFS)
    refs = _object_refs(items, f"{p}.tls.certificateRefs", namespace, r, default_kind="Secret")
    return ListenerTLS(mode, tuple(refs))


def _object_refs(
    items: list[Any], path: str, namespace: str, r: Reader, *, default_kind: str | None
) -> list[CertificateRef]:
    """References to objects holding certificates (a listener's Secrets, a validation's CA ConfigMaps): the group
    defaults to core, the namespace to the Gateway's, the kind to `default_kind` (None: required)."""
    refs: list[CertificateRef] = []
    for i, c in enumerate(items):
        ref = _object_ref(c, f"{path}[{i}]", namespace, r, default_kind=default_kind)
        if ref is not None:
            refs.append(ref)
    return refs


def _object_ref(c: Any, path: str, namespace: str, r: Reader, *, default_kind: str | None) -> CertificateRef | None:
    """One such reference (None, with the problem recorded, when it cannot be read)."""
    if not isinstance(c, Mapping):
        r.add(path, "expected an object")
        return None
    group = r.text(c, "group", path, MAX_GROUP)
    kind = r.text(c, "kind", path, MAX_KIND, required=default_kind is None) or default_kind
    name = r.text(c, "name", path, 253, required=True)
    ns = r.text(c, "namespace", path, 63)
    if name is None or kind is None:
        return None
    return CertificateRef("" if group is None else group, kind, name, ns or namespace)
