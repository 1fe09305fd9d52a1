"""HTTPRoutes on our Gateways → the split model TrafficSplits compile to, and the status that implies. Pure.

Each valid rule of an accepted route becomes one `CompiledSplit`, built with the same constructors a TrafficSplit
goes through (`SplitSpec`, `BackendSpec`, `CookieSettings`, `compile_split`), so the same checks apply: its weighted
backendRefs are the split's backends, picked by the FNV-1a hash of the session key when the rule has
sessionPersistence (a Cookie: the split's sticky cookie; a Header: its key header, the sealed session issued in a
response header) and of the request id when not. What a split cannot say
(which requests reach it) sits beside it: per listener, per virtual host (a hostname the route and the listener
share), the rules' matches in the spec's precedence order, each naming the split it selects (`RouteEntry`).

Status follows from the same pass: per route and parent, `Accepted` (NotAllowedByListeners,
NoMatchingListenerHostname, NoMatchingParent, UnsupportedValue) and `ResolvedRefs` (RefNotPermitted, InvalidKind,
BackendNotFound), `PartiallyInvalid` when some rules were dropped; per listener, attachedRoutes, supportedKinds and
conflicts. What this implementation cannot serve is reported there by name, never dropped silently. The shell (not
built yet) writes it only after the gateway replicas ACK the generation carrying it.

Filters are carried on the rule's action and its targets (core/gateway_filters.py: header modifiers, a redirect, a
URL rewrite). What the model lacks, and this module therefore reports as UnsupportedValue: RequestMirror, CORS,
ExtensionRef and ExternalAuth filters (and a redirect or rewrite on a backendRef), timeouts, retries, and a session
lifetime enforced by the server (absoluteTimeout on a session cookie or a Header session). A route with no
hostname on a listener with none serves every host: the listener's catch-all virtual host (`*`), which a request
takes when no exact or `*.` host fits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import partial

from trafficsplit.core.assignment import SlotTable
from trafficsplit.core.compiler import compile_split
from trafficsplit.core.cookie import CookieSettings
from trafficsplit.core.errors import SpecError
from trafficsplit.core.gateway_objects import (
    CONTROLLER_NAME,
    GATEWAY_GROUP,
    HTTPROUTE_KIND,
    BackendRef,
    CookieLifetime,
    FromNamespaces,
    Gateway,
    GatewayClass,
    GrantFrom,
    HTTPRoute,
    Listener,
    Meta,
    Namespace,
    ParentRef,
    ReferenceGrant,
    RouteKind,
    RouteRule,
    SessionType,
    TLSMode,
)
from trafficsplit.core.gateway_parameters import (
    DEFAULT_PARAMETERS,
    PARAMETERS_GROUP,
    PARAMETERS_KIND,
    GatewayParameters,
)
from trafficsplit.core.gateway_policy import (
    MAX_ANCESTORS,
    Outcome,
    Policy,
    PolicyReason,
    PolicySettings,
    Resolution,
    resolve,
    worst,
)
from trafficsplit.core.gateway_routes import CATCH_ALL, GatewayRoutes
from trafficsplit.core.gateway_routes import BackendTarget as BackendTarget  # re-exported: defined here first
from trafficsplit.core.gateway_routes import ListenerRoutes as ListenerRoutes
from trafficsplit.core.gateway_routes import RouteEntry as RouteEntry
from trafficsplit.core.gateway_routes import RuleAction as RuleAction
from trafficsplit.core.gateway_routes import VirtualHost as VirtualHost
from trafficsplit.core.gateway_tls import Certificate, TlsSecret
from trafficsplit.core.gateway_values import PathType
from trafficsplit.core.generation import GenerationContent
from trafficsplit.core.hashing import key_hash
from trafficsplit.core.persistent import StickyMode
from trafficsplit.core.resolve import ServiceInfo, SliceInfo, endpoints_for
from trafficsplit.core.rules import Endpoint, is_dns_label, key_header_problems
from trafficsplit.core.splitspec import BackendSpec, SplitSpec
from trafficsplit.core.status import MAX_CONDITION_MESSAGE, Condition
from trafficsplit.core.weights import Weights


class RouteReason(StrEnum):
    """The spec's route condition reasons this implementation sets."""

    ACCEPTED = "Accepted"
    NOT_ALLOWED_BY_LISTENERS = "NotAllowedByListeners"
    NO_MATCHING_LISTENER_HOSTNAME = "NoMatchingListenerHostname"
    NO_MATCHING_PARENT = "NoMatchingParent"
    UNSUPPORTED_VALUE = "UnsupportedValue"
    RESOLVED_REFS = "ResolvedRefs"
    REF_NOT_PERMITTED = "RefNotPermitted"
    INVALID_KIND = "InvalidKind"
    BACKEND_NOT_FOUND = "BackendNotFound"
    UNSUPPORTED_PROTOCOL = "UnsupportedProtocol"
    # Ours (the spec has none): a match of this route that an older route's identical match always takes.
    RULE_MATCH_CONFLICT = "RuleMatchConflict"


class ListenerReason(StrEnum):
    ACCEPTED = "Accepted"
    UNSUPPORTED_PROTOCOL = "UnsupportedProtocol"
    UNSUPPORTED_VALUE = "UnsupportedValue"
    RESOLVED_REFS = "ResolvedRefs"
    INVALID_CERTIFICATE_REF = "InvalidCertificateRef"
    REF_NOT_PERMITTED = "RefNotPermitted"
    INVALID = "Invalid"
    INVALID_ROUTE_KINDS = "InvalidRouteKinds"
    NO_CONFLICTS = "NoConflicts"
    HOSTNAME_CONFLICT = "HostnameConflict"
    PROTOCOL_CONFLICT = "ProtocolConflict"
    PENDING = "Pending"


class GatewayReason(StrEnum):
    ACCEPTED = "Accepted"
    LISTENERS_NOT_VALID = "ListenersNotValid"
    UNSUPPORTED_ADDRESS = "UnsupportedAddress"
    UNSUPPORTED_VALUE = "UnsupportedValue"
    PENDING = "Pending"


# Programmed is the data plane's to say, after its replicas ACK (the operator's gateways module): until then Unknown.
_PENDING_MESSAGE = "set once every replica of the gateway's data plane acknowledges the generation carrying it"
SUPPORTED_PROTOCOLS = frozenset({"HTTP", "HTTPS"})


def _cond(type_: str, ok: bool | None, reason: str, message: str, generation: int) -> Condition:
    status = "Unknown" if ok is None else "True" if ok else "False"
    return Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message[:MAX_CONDITION_MESSAGE],
        observed_generation=generation,
        last_transition_time=None,  # the shell's: it keeps the stored time when the status did not change
    )


# --- inputs and outputs -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Inputs:
    classes: tuple[GatewayClass, ...] = ()
    gateways: tuple[Gateway, ...] = ()
    routes: tuple[HTTPRoute, ...] = ()
    grants: tuple[ReferenceGrant, ...] = ()
    namespaces: tuple[Namespace, ...] = ()
    services: Mapping[tuple[str, str], ServiceInfo] | None = None
    slices: Mapping[tuple[str, str], Sequence[SliceInfo]] | None = None
    # GatewayParameters by name: the parsed value, or why its body was refused (SpecError's message).
    parameters: Mapping[str, GatewayParameters | str] | None = None
    # The Secrets HTTPS listeners name, by (namespace, name): read by the shell, parsed by parse_tls_secret.
    secrets: Mapping[tuple[str, str], TlsSecret] | None = None
    # TrafficSplitPolicies (core/gateway_policy.py) and, for rules under `assignment: minimal`, the slot table each
    # rule's split had (by split key), which the new weights advance; None builds one from the weights alone.
    policies: tuple[Policy, ...] = ()
    tables: Mapping[str, SlotTable] | None = None


@dataclass(frozen=True, slots=True)
class ParentStatus:
    parent: ParentRef
    conditions: tuple[Condition, ...]
    controller_name: str = CONTROLLER_NAME


@dataclass(frozen=True, slots=True)
class RouteStatus:
    route: str
    parents: tuple[ParentStatus, ...]


@dataclass(frozen=True, slots=True)
class ListenerStatus:
    name: str
    supported_kinds: tuple[RouteKind, ...]
    attached_routes: int
    conditions: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class GatewayStatus:
    gateway: str
    conditions: tuple[Condition, ...]
    listeners: tuple[ListenerStatus, ...]


@dataclass(frozen=True, slots=True)
class ClassStatus:
    name: str
    conditions: tuple[Condition, ...]
    parameters: GatewayParameters | None = None  # what its Gateways' data planes use; None when not Accepted


@dataclass(frozen=True, slots=True)
class AncestorStatus:
    """A policy's standing with respect to one ancestor: a Gateway its target route is attached to (`gateway` is its
    `namespace/name`), or, for a target route that does not exist, that route (`gateway` None)."""

    ref: ParentRef
    conditions: tuple[Condition, ...]
    gateway: str | None
    controller_name: str = CONTROLLER_NAME


@dataclass(frozen=True, slots=True)
class PolicyStatus:
    policy: str
    ancestors: tuple[AncestorStatus, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Translation:
    listeners: tuple[ListenerRoutes, ...]
    actions: tuple[RuleAction, ...]
    routes: tuple[RouteStatus, ...]
    gateways: tuple[GatewayStatus, ...]
    classes: tuple[ClassStatus, ...]
    policies: tuple[PolicyStatus, ...] = ()


# --- GatewayClass parameters -----------------------------------------------------------------------------------------


def class_parameters(
    cls: GatewayClass, available: Mapping[str, GatewayParameters | str]
) -> tuple[GatewayParameters | None, Condition]:
    """The parameters a class's data planes run with and its `Accepted` condition: no parametersRef is the
    operator's defaults; a ref that is not a trafficsplit.dev GatewayParameters, names a namespace (the kind is
    cluster-scoped), is missing or was refused gives `Accepted: False, InvalidParameters` and no parameters, so
    nothing is provisioned from a half-understood class."""
    g = cls.meta.generation
    ref = cls.parameters_ref
    if ref is None:
        return DEFAULT_PARAMETERS, _cond("Accepted", True, "Accepted", "", g)

    def invalid(why: str) -> tuple[None, Condition]:
        return None, _cond("Accepted", False, "InvalidParameters", f"spec.parametersRef: {why}", g)

    if (ref.group, ref.kind) != (PARAMETERS_GROUP, PARAMETERS_KIND):
        return invalid(f"must name a {PARAMETERS_GROUP} {PARAMETERS_KIND}, not {ref.group or 'core'} {ref.kind}")
    if ref.namespace:
        return invalid(f"{PARAMETERS_KIND} is cluster-scoped: namespace must be empty, not {ref.namespace!r}")
    found = available.get(ref.name)
    if found is None:
        return invalid(f"{PARAMETERS_KIND} {ref.name!r} not found")
    if isinstance(found, str):
        return invalid(f"{PARAMETERS_KIND} {ref.name!r} is invalid: {found}")
    return found, _cond("Accepted", True, "Accepted", "", g)


# --- hostnames --------------------------------------------------------------------------------------------------------


def _under(host: str, wildcard: str) -> bool:
    """`host` (a name or a `*.` name) lies strictly inside `wildcard`'s `*.suffix`."""
    return wildcard.startswith("*.") and host.endswith(wildcard[1:]) and len(host) > len(wildcard) - 1


def intersect_hostnames(listener: str | None, route: Sequence[str]) -> tuple[str, ...] | None:
    """The hostnames a route serves through a listener: () for every host (neither names one), None when they share
    none. The more specific of two overlapping names is the one served (a listener `*.example.com` and a route
    `foo.example.com`: `foo.example.com`), as the HTTPRoute hostnames field specifies."""
    if listener is None:
        return tuple(route)
    if not route:
        return (listener,)
    out: list[str] = []
    for h in route:
        served = h if h == listener or _under(h, listener) else listener if _under(listener, h) else None
        if served is not None and served not in out:
            out.append(served)
    return tuple(out) or None


# --- listeners --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _ListenerView:
    listener: Listener
    supported_kinds: tuple[RouteKind, ...]
    conditions: tuple[Condition, ...]
    usable: bool  # accepted, not conflicted, takes HTTPRoutes
    # HTTPS: the certificate it serves; a listener whose certificate did not resolve takes routes (they count as
    # attached) but is not served (Programmed: False) until it does.
    certificate: Certificate | None = None
    serves: bool = True


def _listener_tls(
    lis: Listener, gw: Gateway, grants: Sequence[ReferenceGrant], secrets: Mapping[tuple[str, str], TlsSecret]
) -> tuple[str | None, Certificate | None, tuple[str, str] | None]:
    """For one listener: why its tls cannot be accepted (UnsupportedValue), else its certificate or the
    ResolvedRefs=False (reason, message) that says why it has none."""
    if lis.protocol != "HTTPS":
        return ("tls is only valid on an HTTPS listener" if lis.tls is not None else None), None, None
    if lis.tls is None or not lis.tls.certificate_refs:
        return None, None, (ListenerReason.INVALID_CERTIFICATE_REF, "an HTTPS listener needs tls.certificateRefs")
    if lis.tls.mode is TLSMode.PASSTHROUGH:
        return "tls.mode Passthrough is not supported (it needs TLSRoute): only Terminate", None, None
    if len(lis.tls.certificate_refs) > 1:
        return "tls.certificateRefs: one certificate per listener is supported", None, None
    ref = lis.tls.certificate_refs[0]
    where = f"tls.certificateRefs[0] {ref.namespace}/{ref.name}"
    if (ref.group, ref.kind) != ("", "Secret"):
        return None, None, (ListenerReason.INVALID_CERTIFICATE_REF, f"{where}: must be a core Secret")
    if ref.namespace != gw.meta.namespace:
        source = GrantFrom(GATEWAY_GROUP, "Gateway", gw.meta.namespace)
        if not any(g.meta.namespace == ref.namespace and g.permits(source, "", "Secret", ref.name) for g in grants):
            return None, None, (ListenerReason.REF_NOT_PERMITTED, f"{where}: no ReferenceGrant permits it")
    secret = secrets.get((ref.namespace, ref.name))
    if secret is None:
        return None, None, (ListenerReason.INVALID_CERTIFICATE_REF, f"{where}: Secret not found")
    if secret.certificate is None:
        return None, None, (ListenerReason.INVALID_CERTIFICATE_REF, f"{where}: {secret.problem}")
    return None, secret.certificate, None


def _listener_views(
    gw: Gateway, grants: Sequence[ReferenceGrant] = (), secrets: Mapping[tuple[str, str], TlsSecret] | None = None
) -> list[_ListenerView]:
    g = gw.meta.generation
    by_port: dict[int, list[Listener]] = {}
    for lis in gw.listeners:
        by_port.setdefault(lis.port, []).append(lis)
    views: list[_ListenerView] = []
    for lis in gw.listeners:
        conds: list[Condition] = []
        supported = lis.protocol in SUPPORTED_PROTOCOLS
        tls_problem, certificate, unresolved = _listener_tls(lis, gw, grants, secrets or {})
        if not supported:
            accepted = _cond(
                "Accepted",
                False,
                ListenerReason.UNSUPPORTED_PROTOCOL,
                f"protocol {lis.protocol[:64]!r} is not supported: only HTTP and HTTPS",
                g,
            )
        elif lis.problems or tls_problem:
            why = "; ".join([*lis.problems, *([tls_problem] if tls_problem else [])])
            accepted = _cond("Accepted", False, ListenerReason.UNSUPPORTED_VALUE, why, g)
        else:
            accepted = _cond("Accepted", True, ListenerReason.ACCEPTED, "", g)
        conds.append(accepted)
        offered = (HTTPROUTE_KIND,) if supported else ()
        wanted = lis.kinds or offered
        kinds = tuple(k for k in wanted if k in offered)
        invalid = [f"{k.group}/{k.kind}" for k in wanted if k not in offered]
        if invalid:
            conds.append(
                _cond(
                    "ResolvedRefs",
                    False,
                    ListenerReason.INVALID_ROUTE_KINDS,
                    f"route kinds not supported on this listener: {', '.join(invalid)}",
                    g,
                )
            )
        elif unresolved is not None and accepted.ok:
            conds.append(_cond("ResolvedRefs", False, unresolved[0], unresolved[1], g))
        else:
            conds.append(_cond("ResolvedRefs", True, ListenerReason.RESOLVED_REFS, "", g))
        same_port = by_port[lis.port]
        if len({x.protocol for x in same_port}) > 1:
            conflict = _cond(
                "Conflicted",
                True,
                ListenerReason.PROTOCOL_CONFLICT,
                f"port {lis.port} has listeners of two protocols",
                g,
            )
        elif sum(1 for x in same_port if x.hostname == lis.hostname) > 1:
            conflict = _cond(
                "Conflicted",
                True,
                ListenerReason.HOSTNAME_CONFLICT,
                f"another listener on port {lis.port} has hostname {lis.hostname or '(any)'}",
                g,
            )
        else:
            conflict = _cond("Conflicted", False, ListenerReason.NO_CONFLICTS, "", g)
        conds.append(conflict)
        serves = unresolved is None
        if serves:
            conds.append(_cond("Programmed", None, ListenerReason.PENDING, _PENDING_MESSAGE, g))
        else:
            conds.append(_cond("Programmed", False, ListenerReason.INVALID, "its certificate did not resolve", g))
        # A Gateway we do not accept serves nothing, so none of its listeners takes a route.
        usable = not gw.problems and accepted.ok and not conflict.ok and HTTPROUTE_KIND in kinds
        views.append(
            _ListenerView(
                listener=lis,
                supported_kinds=kinds,
                conditions=tuple(conds),
                usable=usable,
                certificate=certificate,
                serves=serves,
            )
        )
    return views


def _allows(lis: Listener, gw: Gateway, route: HTTPRoute, labels: Mapping[str, Mapping[str, str]]) -> bool:
    if lis.namespaces is FromNamespaces.SAME:
        return route.meta.namespace == gw.meta.namespace
    if lis.namespaces is FromNamespaces.ALL:
        return True
    ns_labels = labels.get(route.meta.namespace)
    return ns_labels is not None and lis.selector is not None and lis.selector.matches(ns_labels)


# --- routes -----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Attachment:
    gateway: str
    listener: str
    hostnames: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _RefProblem:
    reason: RouteReason
    message: str


def _resolve_refs(
    route: HTTPRoute,
    rule: RouteRule,
    grants: Sequence[ReferenceGrant],
    services: Mapping[tuple[str, str], ServiceInfo],
) -> tuple[list[tuple[BackendTarget, ServiceInfo]], list[_RefProblem], int]:
    """The rule's backendRefs that resolve, with the problems of those that do not and their total weight."""
    ok: list[tuple[BackendTarget, ServiceInfo]] = []
    problems: list[_RefProblem] = []
    error_weight = 0
    names = split_backend_names(rule.backend_refs)
    source = GrantFrom(GATEWAY_GROUP, "HTTPRoute", route.meta.namespace)
    for j, ref in enumerate(rule.backend_refs):
        where = f"rules[{rule.index}].backendRefs[{j}]"
        problem: _RefProblem | None = None
        svc = services.get((ref.namespace, ref.name))
        if (ref.group, ref.kind) != ("", "Service"):
            problem = _RefProblem(
                RouteReason.INVALID_KIND, f"{where}: {ref.group or 'core'}/{ref.kind} is not a supported kind"
            )
        elif ref.namespace != route.meta.namespace and not any(
            g.meta.namespace == ref.namespace and g.permits(source, "", "Service", ref.name) for g in grants
        ):
            problem = _RefProblem(
                RouteReason.REF_NOT_PERMITTED,
                f"{where}: Service {ref.namespace}/{ref.name} is in another namespace and no ReferenceGrant there "
                "permits it",
            )
        elif svc is None:
            problem = _RefProblem(
                RouteReason.BACKEND_NOT_FOUND, f"{where}: Service {ref.namespace}/{ref.name} not found"
            )
        elif ref.port is None or all(p.port != ref.port for p in svc.ports):
            have = ",".join(str(p.port) for p in svc.ports) or "none"
            problem = _RefProblem(
                RouteReason.BACKEND_NOT_FOUND, f"{where}: Service {svc.key} has no port {ref.port} (ports: {have})"
            )
        elif not is_dns_label(ref.name):
            problem = _RefProblem(RouteReason.BACKEND_NOT_FOUND, f"{where}: {ref.name!r} is not a Service name")
        if problem is not None:
            problems.append(problem)
            error_weight += ref.weight
            continue
        assert svc is not None and ref.port is not None
        name = names[j]
        ok.append(
            (
                BackendTarget(
                    backend=name,
                    namespace=ref.namespace,
                    service=ref.name,
                    port=ref.port,
                    weight=ref.weight,
                    filters=ref.filters,
                ),
                svc,
            )
        )
    return ok, problems, error_weight


def split_backend_names(refs: Sequence[BackendRef]) -> list[str]:
    """Each backendRef's name in its rule's split: the Service's, made unique within the rule (`<name>-<index>`)
    when two refs name the same one."""
    names = [ref.name for ref in refs]
    return [n if names.count(n) == 1 else f"{n[:58]}-{j}" for j, n in enumerate(names)]


def find_rule(route: HTTPRoute, rule: str) -> RouteRule:
    """A rule by index (`0`) or by its `name`; SpecError naming the rules there are."""
    for r in route.rules:
        if rule == str(r.index) or (r.name is not None and rule == r.name):
            return r
    have = ", ".join(str(r.index) + (f" ({r.name})" if r.name else "") for r in route.rules)
    raise SpecError([f"{route.meta.key} has no rule {rule[:64]!r}; its rules: {have}"])


def rule_weights(rule: RouteRule) -> Weights:
    """The weights a rule's split picks with, by the split's backend names: its core Service backendRefs as written
    (whether each resolves is the cluster's to say: the weight of one that does not answers 500 instead)."""
    names = split_backend_names(rule.backend_refs)
    return Weights.of(
        (names[j], ref.weight) for j, ref in enumerate(rule.backend_refs) if (ref.group, ref.kind) == ("", "Service")
    )


@dataclass(frozen=True, slots=True)
class _Session:
    """How a rule's sessions persist: the split's cookie, or the request header that carries them (lowercase)."""

    cookie: CookieSettings | None = None
    header: str | None = None

    @property
    def persistent(self) -> bool:
        return self.cookie is not None or self.header is not None


def _session(route: HTTPRoute, rule: RouteRule) -> tuple[_Session, list[str]]:
    """The rule's sessionPersistence as the split says it, or why it cannot be served (the rule is then dropped)."""
    s = rule.session
    if s is None:
        return _Session(), []
    where = f"rules[{rule.index}].sessionPersistence"
    # The spec leaves the default name to the implementation: one per route rule, short and stable.
    name = s.session_name or f"ts-{key_hash(f'{route.meta.key}/{rule.index}'):08x}"
    if s.type is SessionType.HEADER:
        if s.absolute_timeout is not None:
            # A header session has no expiry a client enforces, and the gateway keeps no session state to expire.
            return _Session(), [
                f"{where}.absoluteTimeout: not supported with type Header (the gateway keeps no session state to "
                "expire a header session; use type Cookie with cookieConfig.lifetimeType Permanent)"
            ]
        # Header names are case-insensitive and Envoy carries them lowercased; the name reaches Envoy as a response
        # header's, so it is checked here by the rule every sticky key header obeys.
        header = name.lower()
        problems = key_header_problems(header)
        if problems:
            return _Session(), [f"{where}.sessionName: {q.removeprefix('name: ')}" for q in problems]
        return _Session(header=header), []
    if s.absolute_timeout is not None and s.lifetime is not CookieLifetime.PERMANENT:
        return _Session(), [
            f"{where}.absoluteTimeout: a session cookie with a server-enforced timeout is not supported (use "
            "cookieConfig.lifetimeType Permanent: the cookie's Max-Age)"
        ]
    try:
        return _Session(cookie=CookieSettings(name=name, max_age=s.absolute_timeout)), []
    except SpecError as exc:
        return _Session(), [f"{where}.{q.replace('name:', 'sessionName:', 1)}" for q in exc.problems]


# What a rule's action is built from: the route's metadata, the rule, its resolved targets, their error weight, each
# target's endpoints, the attached policy's settings and the rule's previous slot table (`assignment: minimal`).
_ActionKey = tuple[
    Meta,
    RouteRule,
    tuple[BackendTarget, ...],
    int,
    tuple[tuple[Endpoint, ...], ...],
    PolicySettings | None,
    SlotTable | None,
]


class ActionMemo:
    """Rule actions of the last translation by what they were built from (`_ActionKey`): a translation builds only
    the rules whose inputs changed, so one weight patched among 1,000 routes compiles one split, as
    `reconcile.CompileMemo` does for TrafficSplits. The operator owns one; each translation keeps only what it used
    (bounded by the rules there are)."""

    __slots__ = ("_last", "_used")

    def __init__(self) -> None:
        self._last: dict[_ActionKey, tuple[RuleAction | None, tuple[str, ...]]] = {}
        self._used: dict[_ActionKey, tuple[RuleAction | None, tuple[str, ...]]] = {}

    def build(
        self,
        route: HTTPRoute,
        rule: RouteRule,
        resolved: Sequence[tuple[BackendTarget, ServiceInfo]],
        error_weight: int,
        endpoints: tuple[tuple[Endpoint, ...], ...],
        *,
        policy: PolicySettings | None = None,
        previous_table: SlotTable | None = None,
    ) -> tuple[RuleAction | None, list[str]]:
        key = (route.meta, rule, tuple(t for t, _ in resolved), error_weight, endpoints, policy, previous_table)
        got = self._used.get(key) or self._last.get(key)
        if got is None:
            action, problems = _build_action(
                route, rule, resolved, error_weight, endpoints, policy=policy, previous_table=previous_table
            )
            got = (action, tuple(problems))
        self._used[key] = got
        return got[0], list(got[1])

    def finish(self) -> None:
        """The translation is done: what it did not use is forgotten."""
        self._last, self._used = self._used, {}


def _target_endpoints(
    resolved: Sequence[tuple[BackendTarget, ServiceInfo]],
    slices: Mapping[tuple[str, str], Sequence[SliceInfo]],
    seen: dict[tuple[str, str, int], tuple[Endpoint, ...]],
) -> tuple[tuple[Endpoint, ...], ...]:
    """Each resolved target's endpoints, in order; `seen` keeps them per Service port for the translation (1,000
    routes to the same two Services read their slices twice, not 2,000 times)."""
    out = []
    for t, svc in resolved:
        k = (t.namespace, t.service, t.port)
        if k not in seen:
            port = next(p for p in svc.ports if p.port == t.port)
            seen[k] = endpoints_for(svc, port, slices.get((t.namespace, t.service), ()))
        out.append(seen[k])
    return tuple(out)


def _build_action(
    route: HTTPRoute,
    rule: RouteRule,
    resolved: Sequence[tuple[BackendTarget, ServiceInfo]],
    error_weight: int,
    endpoints: tuple[tuple[Endpoint, ...], ...],
    *,
    policy: PolicySettings | None = None,
    previous_table: SlotTable | None = None,
) -> tuple[RuleAction | None, list[str]]:
    """The rule's split, built as a TrafficSplit's is; or the reasons it cannot be (the rule is then dropped).
    `endpoints`: each resolved target's, in order; `policy`: an attached TrafficSplitPolicy's settings, applied over
    the split's defaults."""
    session, problems = _session(route, rule)
    if problems:
        return None, problems
    key = route.meta.key
    if sum(t.weight for t, _ in resolved) == 0:  # no backendRef, none resolves, or all at weight 0
        return RuleAction(
            route=key,
            rule=rule.index,
            split=None,
            targets=tuple(t for t, _ in resolved),
            error_weight=error_weight,
            filters=rule.filters,
        ), []
    live = resolved
    # A session is the sealed persistent one (core/persistent.py): its cookie (or its header) carries the backend, so
    # a weight change moves no existing session. The Gateway's data plane holds the keys (provisioned per Gateway).
    persistent = session.persistent
    by_backend = {t.backend: eps for (t, _), eps in zip(live, endpoints, strict=True)}
    try:
        spec = SplitSpec(
            namespace=route.meta.namespace,
            name=f"{route.meta.name}.rule-{rule.index}",
            hosts=(),  # the route table selects the rule, by its listeners' virtual hosts
            service=None,
            backends=tuple(
                # GEP-1619: a session keeps its backend even at weight 0, so a weight-0 backend drains (only new
                # sessions follow the weights); a backendRef removed from the rule moves its sessions.
                BackendSpec(
                    name=t.backend, service=t.service, port=t.port, weight=t.weight, drain=persistent and t.weight == 0
                )
                for t, _ in live
            ),
            cookie=session.cookie,
            key_header=session.header,
            endpoint_affinity=False,
            matches=(),
            debug_headers=False,
            sticky_mode=StickyMode.PERSISTENT if persistent else StickyMode.REHASH,
        )
        if policy is not None:  # the policy hook: core/gateway_policy.py
            spec = policy.apply(spec)
        split = compile_split(
            spec, by_backend, observed_generation=route.meta.generation, previous_table=previous_table
        )
    except SpecError as exc:
        return None, [f"rules[{rule.index}]: {q}" for q in exc.problems]
    return RuleAction(
        route=key,
        rule=rule.index,
        split=split,
        targets=tuple(t for t, _ in live),
        error_weight=error_weight,
        filters=rule.filters,
    ), []


def _precedence(route: HTTPRoute, entry: RouteEntry) -> tuple[int, int, int, int, int, str, str, int, int]:
    """The spec's match precedence: Exact path, then (our choice, the spec leaves it open) RegularExpression, then the
    longest PathPrefix; a method; more header matches; more query matches; the older route; `namespace/name`; rule
    order; match order."""
    m = entry.match
    rank = {PathType.EXACT: 0, PathType.REGULAR_EXPRESSION: 1, PathType.PREFIX: 2}[m.path_type]
    return (
        rank,
        -len(m.path),
        0 if m.method is not None else 1,
        -len(m.headers),
        -len(m.query_params),
        route.meta.created,
        route.meta.key,
        entry.rule,
        entry.match_index,
    )


MAX_TAKEN_LISTED = 8


def _taken_matches(
    route: HTTPRoute,
    actions: Sequence[RuleAction],
    atts: Sequence[_Attachment],
    tables: Mapping[tuple[str, str], Mapping[str, Sequence[tuple[HTTPRoute, RouteEntry]]]],
) -> str:
    """The route's matches that an older route's identical match takes on a listener and host they share (the
    spec's precedence: the older route, then `namespace/name`), said on the route that loses them, since its
    requests silently go elsewhere; "" when none. `tables` holds only routes that precede this one (translate walks
    routes in precedence order)."""
    taken: list[str] = []
    for action in actions:
        for j, m in enumerate(route.rules[action.rule].matches):
            for a in atts:
                for h in a.hostnames or (CATCH_ALL,):
                    winner = next(
                        ((r, e) for r, e in tables.get((a.gateway, a.listener), {}).get(h, ()) if e.match == m), None
                    )
                    if winner is not None and winner[0].meta.key != route.meta.key:
                        r, e = winner
                        why = "older" if r.meta.created < route.meta.created else "as old, first by namespace/name"
                        taken.append(
                            f"rules[{action.rule}].matches[{j}] on {h} never matches: {r.meta.key} rules[{e.rule}] "
                            f"takes it ({why})"
                        )
    listed = list(dict.fromkeys(taken))  # two listeners may share a host
    more = f"; and {len(listed) - MAX_TAKEN_LISTED} more" if len(listed) > MAX_TAKEN_LISTED else ""
    return "; ".join(listed[:MAX_TAKEN_LISTED]) + more


def translate(inputs: Inputs, memo: ActionMemo | None = None) -> Translation:
    """The model and the status for everything attached to our Gateways (see the module docstring). `memo`: the
    operator's, so that rules whose inputs did not change are not built again."""
    memo = memo if memo is not None else ActionMemo()
    seen_endpoints: dict[tuple[str, str, int], tuple[Endpoint, ...]] = {}
    services = inputs.services or {}
    slices = inputs.slices or {}
    labels = {n.name: dict(n.labels) for n in inputs.namespaces}
    ours = {c.meta.name for c in inputs.classes if c.ours}
    params = inputs.parameters or {}
    class_status = tuple(
        ClassStatus(c.meta.name, (accepted,), resolved)
        for c in sorted(inputs.classes, key=lambda c: c.meta.name)
        if c.ours
        for resolved, accepted in [class_parameters(c, params)]
    )
    gateways = {g.meta.key: g for g in inputs.gateways if g.class_name in ours}
    views = {key: _listener_views(g, inputs.grants, inputs.secrets) for key, g in gateways.items()}
    attached_count: dict[tuple[str, str], int] = {}
    # (gateway, listener) → hostname → entries with their routes, for the precedence sort.
    tables: dict[tuple[str, str], dict[str, list[tuple[HTTPRoute, RouteEntry]]]] = {}
    actions: list[RuleAction] = []
    route_status: list[RouteStatus] = []
    slot_tables = inputs.tables or {}
    attachment = resolve(inputs.routes, inputs.policies)
    invalid: dict[tuple[str, str], list[str]] = {}  # (policy, route) → why the route's rules refuse the policy
    route_gateways: dict[str, tuple[ParentRef, ...]] = {}  # route → our Gateways it is attached to

    for route in sorted(inputs.routes, key=lambda r: (r.meta.created, r.meta.key)):
        g = route.meta.generation
        parents: list[tuple[ParentRef, Condition | None, list[_Attachment]]] = []
        for ref in route.parent_refs:
            gw = gateways.get(f"{ref.namespace}/{ref.name}")
            if (ref.group, ref.kind) != (GATEWAY_GROUP, "Gateway") or gw is None:
                continue  # not one of our Gateways: its controller answers for it
            parents.append((ref, *_attach(route, ref, gw, views[gw.meta.key], labels)))

        # Backend resolution and the rules' own problems do not depend on the parent.
        resolved: dict[int, tuple[list[tuple[BackendTarget, ServiceInfo]], list[_RefProblem], int]] = {
            rule.index: _resolve_refs(route, rule, inputs.grants, services) for rule in route.rules
        }
        ref_problems = [p for _, probs, _ in resolved.values() for p in probs]
        attached = any(c is None for _, c, _ in parents)
        dropped: list[str] = []
        route_actions: list[RuleAction] = []
        builds: list[tuple[RouteRule, _Build]] = []
        for rule in route.rules:
            if rule.problems:
                dropped.extend(f"rules[{rule.index}].{q}" for q in rule.problems)
                continue
            if not attached:
                continue
            ok, _, error_weight = resolved[rule.index]
            prev = slot_tables.get(f"{route.meta.namespace}/{route.meta.name}.rule-{rule.index}")
            eps = _target_endpoints(ok, slices, seen_endpoints)
            builds.append((rule, partial(memo.build, route, rule, ok, error_weight, eps, previous_table=prev)))
        for action, problems in _with_policies(route, builds, attachment, invalid):
            dropped.extend(problems)
            if action is not None:
                route_actions.append(action)

        statuses: list[ParentStatus] = []
        # Two parentRefs can reach one listener (the Gateway, and the listener by sectionName): it takes the route
        # once, and counts it once.
        reached: set[tuple[str, str]] = set()
        for ref, refused, atts in parents:
            if refused is None and not route_actions:
                refused = _cond(
                    "Accepted",
                    False,
                    RouteReason.UNSUPPORTED_VALUE,
                    "no rule can be served: " + ("; ".join(dropped) or "the route has none"),
                    g,
                )
            conds = [refused or _cond("Accepted", True, RouteReason.ACCEPTED, "", g)]
            if ref_problems:
                conds.append(
                    _cond("ResolvedRefs", False, ref_problems[0].reason, "; ".join(p.message for p in ref_problems), g)
                )
            else:
                conds.append(_cond("ResolvedRefs", True, RouteReason.RESOLVED_REFS, "", g))
            if refused is None and dropped:
                conds.append(
                    _cond(
                        "PartiallyInvalid",
                        True,
                        RouteReason.UNSUPPORTED_VALUE,
                        "Dropped Rule(s): " + "; ".join(dropped),
                        g,
                    )
                )
            if refused is None and (taken := _taken_matches(route, route_actions, atts, tables)):
                conds.append(_cond("Conflicted", True, RouteReason.RULE_MATCH_CONFLICT, taken, g))
            statuses.append(ParentStatus(ref, tuple(conds)))
            if refused is not None:
                continue
            for a in atts:
                if (a.gateway, a.listener) in reached:
                    continue
                reached.add((a.gateway, a.listener))
                attached_count[(a.gateway, a.listener)] = attached_count.get((a.gateway, a.listener), 0) + 1
                table = tables.setdefault((a.gateway, a.listener), {})
                for action in route_actions:
                    rule = route.rules[action.rule]
                    for j, m in enumerate(rule.matches):
                        # No hostname on either side: every host, the catch-all taken after exact and `*.` hosts.
                        for h in a.hostnames or (CATCH_ALL,):
                            table.setdefault(h, []).append((route, RouteEntry(route.meta.key, rule.index, j, m)))
        actions.extend(route_actions)
        if statuses:
            route_status.append(RouteStatus(route.meta.key, tuple(statuses)))
            route_gateways[route.meta.key] = tuple(
                dict.fromkeys(
                    ParentRef(group=GATEWAY_GROUP, kind="Gateway", namespace=s.parent.namespace, name=s.parent.name)
                    for s in statuses
                )
            )

    listeners: list[ListenerRoutes] = []
    gateway_status: list[GatewayStatus] = []
    for key, gw in sorted(gateways.items()):
        listener_status: list[ListenerStatus] = []
        for v in views[key]:
            n = attached_count.get((key, v.listener.name), 0)
            listener_status.append(ListenerStatus(v.listener.name, v.supported_kinds, n, v.conditions))
            # Every listener that serves, routes or none: one without routes still takes its hosts from a less
            # specific listener of its port (and answers 404), so the port's table must know it.
            by_host = tables.get((key, v.listener.name), {})
            if v.usable and v.serves:
                hosts_ = tuple(
                    VirtualHost(h, tuple(e for _, e in sorted(entries, key=lambda x: _precedence(*x))))
                    for h, entries in sorted(by_host.items())
                )
                listeners.append(
                    ListenerRoutes(
                        key,
                        v.listener.name,
                        v.listener.port,
                        hosts_,
                        hostname=v.listener.hostname,
                        certificate=v.certificate,
                    )
                )
        gateway_status.append(GatewayStatus(key, _gateway_conditions(gw, views[key]), tuple(listener_status)))
    memo.finish()
    return Translation(
        listeners=tuple(listeners),
        actions=tuple(actions),
        routes=tuple(route_status),
        gateways=tuple(gateway_status),
        classes=class_status,
        policies=policy_statuses(inputs.policies, attachment, invalid, route_gateways),
    )


# --- TrafficSplitPolicy: applied per rule, and its status -------------------------------------------------------------

# One rule's `_build_action` with everything but the policy bound.
_Build = Callable[..., tuple[RuleAction | None, list[str]]]


def _with_policies(
    route: HTTPRoute,
    builds: Sequence[tuple[RouteRule, _Build]],
    attachment: Resolution,
    invalid: dict[tuple[str, str], list[str]],
) -> list[tuple[RuleAction | None, list[str]]]:
    """Each rule built under the policy attached to it. A policy one of the route's rules refuses (a problem the rule
    does not have without it) is `Invalid` for the route and applies to none of its rules: they keep their defaults,
    and the route's own status stays what the route alone earns."""
    chosen = {rule.index: attachment.for_rule(route.meta.key, rule.index) for rule, _ in builds}
    out: dict[int, tuple[RuleAction | None, list[str]]] = {}
    for rule, build in builds:
        pol = chosen[rule.index]
        out[rule.index] = got = build(policy=pol.settings if pol else None)
        if got[1] and pol is not None and not build(policy=None)[1]:
            invalid.setdefault((pol.key, route.meta.key), []).extend(got[1])
    for rule, build in builds:
        pol = chosen[rule.index]
        if pol is not None and (pol.key, route.meta.key) in invalid:
            out[rule.index] = build(policy=None)
    return [out[rule.index] for rule, _ in builds]


def policy_statuses(
    policies: Sequence[Policy],
    attachment: Resolution,
    invalid: Mapping[tuple[str, str], Sequence[str]],
    route_gateways: Mapping[str, Sequence[ParentRef]],
) -> tuple[PolicyStatus, ...]:
    """Per policy, `status.ancestors`: one entry per Gateway of ours a target route is attached to (the worst outcome
    over its routes there), and one per target route that does not exist; at most MAX_ANCESTORS."""
    out: list[PolicyStatus] = []
    for pol in sorted(policies, key=lambda q: q.key):
        per: dict[ParentRef, list[Outcome]] = {}
        for route_key in dict.fromkeys(f"{pol.meta.namespace}/{t.name}" for t in pol.targets):
            outcome = attachment.outcomes.get((pol.key, route_key), Outcome(PolicyReason.ACCEPTED, ""))
            why = invalid.get((pol.key, route_key))
            if why:
                outcome = Outcome(PolicyReason.INVALID, f"HTTPRoute {route_key}: " + "; ".join(why))
            gateways = route_gateways.get(route_key, ())
            if not gateways and outcome.reason is PolicyReason.TARGET_NOT_FOUND and "/" in route_key:
                ns, name = route_key.split("/", 1)
                per.setdefault(ParentRef(group=GATEWAY_GROUP, kind="HTTPRoute", namespace=ns, name=name), []).append(
                    outcome
                )
            for gw in gateways:
                per.setdefault(gw, []).append(outcome)
        ancestors: list[AncestorStatus] = []
        for ref, outcomes in list(per.items())[:MAX_ANCESTORS]:
            o = worst(outcomes)
            ok = o.reason is PolicyReason.ACCEPTED
            cond = _cond("Accepted", ok, o.reason, o.message, pol.meta.generation)
            gateway = f"{ref.namespace}/{ref.name}" if ref.kind == "Gateway" else None
            ancestors.append(AncestorStatus(ref, (cond,), gateway))
        out.append(PolicyStatus(pol.key, tuple(ancestors)))
    return tuple(out)


def gateway_content(translation: Translation, gateway: str) -> GenerationContent:
    """What Gateway `gateway` (`namespace/name`)'s data plane serves: its listeners' route tables, and the split of
    every rule they refer to (host-less, selected by the table). TrafficSplits are not in it: the chart's shared
    gateway keeps serving those. A Gateway with no route attached has an empty table, not None, so its data plane
    serves the spec's 404 for every request rather than TrafficSplits."""
    listeners = tuple(lr for lr in translation.listeners if lr.gateway == gateway)
    used = {e.rule_key for lr in listeners for vh in lr.hosts for e in vh.entries}
    actions = tuple(a for a in translation.actions if a.key in used)
    return GenerationContent(
        splits=tuple(a.split for a in actions if a.split is not None),
        routes=GatewayRoutes(gateway=gateway, listeners=listeners, actions=actions),
    )


def _attach(
    route: HTTPRoute,
    ref: ParentRef,
    gw: Gateway,
    views: Iterable[_ListenerView],
    labels: Mapping[str, Mapping[str, str]],
) -> tuple[Condition | None, list[_Attachment]]:
    """The listeners `ref` attaches the route to with the hostnames served on each, or the Accepted=False condition
    of the first stage that leaves none (the spec's reasons, in the order it checks them)."""
    g = route.meta.generation
    candidates = [
        v
        for v in views
        if (ref.section_name is None or v.listener.name == ref.section_name)
        and (ref.port is None or v.listener.port == ref.port)
    ]
    if not candidates:
        want = f" sectionName {ref.section_name}" if ref.section_name else ""
        want += f" port {ref.port}" if ref.port else ""
        return _cond(
            "Accepted", False, RouteReason.NO_MATCHING_PARENT, f"Gateway {gw.meta.key} has no listener with{want}", g
        ), []
    allowed = [v for v in candidates if v.usable and _allows(v.listener, gw, route, labels)]
    if not allowed:
        why = "; ".join(_refusal(v, route, gw) for v in candidates)
        return _cond("Accepted", False, RouteReason.NOT_ALLOWED_BY_LISTENERS, f"Gateway {gw.meta.key}: {why}", g), []
    attachments: list[_Attachment] = []
    for v in allowed:
        hostnames = intersect_hostnames(v.listener.hostname, route.hostnames)
        if hostnames is not None:
            attachments.append(_Attachment(gw.meta.key, v.listener.name, hostnames))
    if not attachments:
        return _cond(
            "Accepted",
            False,
            RouteReason.NO_MATCHING_LISTENER_HOSTNAME,
            f"no hostname of the route matches a listener of Gateway {gw.meta.key}",
            g,
        ), []
    return None, attachments


def _refusal(v: _ListenerView, route: HTTPRoute, gw: Gateway) -> str:
    """Why one listener takes no route of this kind from this namespace."""
    name = f"listener {v.listener.name}"
    if gw.problems:
        return f"{name}: the Gateway is not accepted"
    if HTTPROUTE_KIND not in v.supported_kinds:
        return f"{name} does not take HTTPRoutes"
    if not v.usable:
        bad = [c for c in v.conditions if (c.type == "Conflicted") == c.ok and c.type != "Programmed"]
        return f"{name} is not usable ({', '.join(f'{c.type}: {c.reason}' for c in bad)})"
    if v.listener.namespaces is FromNamespaces.SAME:
        return f"{name} takes routes from its own namespace only, not {route.meta.namespace}"
    return f"{name}'s namespace selector does not select namespace {route.meta.namespace}"


def _gateway_conditions(gw: Gateway, views: Sequence[_ListenerView]) -> tuple[Condition, ...]:
    g = gw.meta.generation
    if gw.problems:
        reason = (
            GatewayReason.UNSUPPORTED_ADDRESS
            if any(p.startswith("spec.addresses") for p in gw.problems)
            else GatewayReason.UNSUPPORTED_VALUE
        )
        accepted = _cond("Accepted", False, reason, "; ".join(gw.problems), g)
    elif all(v.usable for v in views):
        accepted = _cond("Accepted", True, GatewayReason.ACCEPTED, "", g)
    else:
        bad = ", ".join(v.listener.name for v in views if not v.usable)
        some = any(v.usable for v in views)
        accepted = _cond("Accepted", some, GatewayReason.LISTENERS_NOT_VALID, f"listeners not valid: {bad}", g)
    return (accepted, _cond("Programmed", None, GatewayReason.PENDING, _PENDING_MESSAGE, g))
