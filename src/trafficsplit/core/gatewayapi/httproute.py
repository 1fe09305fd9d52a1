"""An HTTPRoute as the core sees it: its parentRefs, hostnames and rules (matches, filters, backendRefs,
sessionPersistence, timeouts, retry), parsed once from the raw API body into frozen, bounded values, and
`parse_duration` for its GEP-2257 durations. Pure.

A body whose shape is wrong raises `SpecError` (gatewayapi.reading says why the core re-checks it): so does what the
CRD refuses (a duration that is no GEP-2257 one, a backendRequest timeout longer than the request timeout, a retry
code outside 400-599, a RequestMirror with both percent and fraction). A well-formed rule that uses what this
implementation does not support (an ExtensionRef or ExternalAuth filter, more retry attempts than
MAX_RETRY_ATTEMPTS, a regex over the RE2 bound, a header value with a control byte) is kept, with its `problems`:
the translation drops that rule and says so in the route's status (`UnsupportedValue`, `PartiallyInvalid`), as the
spec asks, instead of silently ignoring the field. A RequestMirror's backendRef is kept as written (`MirrorRef`):
the translation resolves it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from trafficsplit.core.gatewayapi.reading import (
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
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.filters import (
    CORS_DEFAULT_MAX_AGE,
    MAX_CORS_ITEMS,
    MAX_CORS_MAX_AGE,
    MAX_CORS_ORIGIN,
    MAX_FILTER_HEADER_NAME,
    MAX_FILTER_HEADER_VALUE,
    MAX_HEADER_CHANGES,
    MAX_MIRROR_DENOMINATOR,
    MAX_MIRROR_PERCENT,
    MAX_PATH_MODIFIER,
    NO_FILTERS,
    CorsPolicy,
    HeaderModifier,
    PathModifier,
    PathModifierType,
    RedirectCode,
    RequestRedirect,
    RuleFilters,
    Scheme,
    URLRewrite,
)
from trafficsplit.core.model.matches import (
    MAX_BACKEND_REFS,
    MAX_HEADER_NAME,
    MAX_HEADER_VALUE,
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
from trafficsplit.core.model.rules import is_token, match_name_problems
from trafficsplit.core.model.timeouts import (
    MAX_DURATION_TEXT,
    MAX_RETRY_ATTEMPTS,
    MAX_RETRY_CODE,
    MIN_RETRY_CODE,
    RuleRetry,
    RuleTimeouts,
    parse_duration_ms,
)
from trafficsplit.core.model.weights import MAX_WEIGHT

# The upstream CRD's bounds (v1.6.3 standard and experimental channels agree on these); those a route table obeys
# too (rules, matches, backendRefs, match values) are in model.matches.
MAX_PARENT_REFS = 32
MAX_ROUTE_HOSTNAMES = 16
MAX_ROUTE_MATCHES = 128  # across all rules of a route (the CRD's CEL rule)
MAX_FILTERS = 16
MAX_SESSION_NAME = 128
_MAX_INT64 = 2**63 - 1  # an integer field the CRD gives no maximum (retry attempts)


class SessionType(StrEnum):
    COOKIE = "Cookie"
    HEADER = "Header"


class CookieLifetime(StrEnum):
    SESSION = "Session"
    PERMANENT = "Permanent"


# Every field of an HTTPRoute this module reads (a nested mapping: an object's fields, for a list its items'; None:
# a leaf). A field in a body that is not here is reported, never ignored: inside a rule it makes the rule
# unsupported (UnsupportedValue), elsewhere it is a problem of the route that holds it. The guard test checks that
# each of these appears in a golden case and is a real field of the upstream CRD.
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
    "cors": {
        "allowOrigins": None,
        "allowCredentials": None,
        "allowMethods": None,
        "allowHeaders": None,
        "exposeHeaders": None,
        "maxAge": None,
    },
    "requestMirror": {
        "backendRef": {**REF_FIELDS, "port": None},
        "percent": None,
        "fraction": {"numerator": None, "denominator": None},
    },
}
SUPPORTED_ROUTE_FIELDS: Mapping[str, Any] = {
    "parentRefs": {**REF_FIELDS, "sectionName": None, "port": None},
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
        "backendRefs": {**REF_FIELDS, "port": None, "weight": None, "filters": _BACKEND_FILTER},
        "sessionPersistence": {
            "sessionName": None,
            "absoluteTimeout": None,
            "type": None,
            "cookieConfig": {"lifetimeType": None},
        },
        "timeouts": {"request": None, "backendRequest": None},
        "retry": {"attempts": None, "backoff": None, "codes": None},
    },
}


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


@dataclass(frozen=True, slots=True, kw_only=True)
class MirrorRef:
    """A RequestMirror filter as written: its backendRef (`weight` unused: a mirror gets copies, not a share) and the
    fraction of requests mirrored (`percent: p` is p/100; neither is all)."""

    ref: BackendRef
    filter_index: int  # its place in the rule's filters, which the route's status names
    numerator: int = 1
    denominator: int = 1


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
    mirrors: tuple[MirrorRef, ...] = ()  # its RequestMirror filters, in order
    timeouts: RuleTimeouts | None = None
    retry: RuleRetry | None = None
    # Why this rule cannot be served as written (unsupported fields, a regex over the bound); empty when it can.
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HTTPRoute:
    meta: Meta
    parent_refs: tuple[ParentRef, ...]
    hostnames: tuple[str, ...]
    rules: tuple[RouteRule, ...]

    def service_refs(self) -> list[tuple[str, str]]:
        """The (namespace, name) of every Service its rules name, backendRefs and RequestMirrors alike, in order
        (repeats kept): what its translation reads of the Services and EndpointSlices."""
        return [
            (r.namespace, r.name) for rule in self.rules for r in (*rule.backend_refs, *(m.ref for m in rule.mirrors))
        ]


def parse_httproute(body: Mapping[str, Any]) -> HTTPRoute:
    r = Reader()
    meta = read_meta(body, r)
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
        host = read_hostname(h if isinstance(h, str) else f"<{type(h).__name__}>", f"spec.hostnames[{i}]", r)
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
    for problem in unsupported_fields({k: v for k, v in spec.items() if k != "rules"}, route_fields, "spec"):
        r.problems.append(problem)
    r.done()
    return HTTPRoute(meta, tuple(parents), tuple(hostnames), tuple(rules))


def _rule(index: int, raw: Any, namespace: str, r: Reader) -> RouteRule:
    p = f"spec.rules[{index}]"
    if not isinstance(raw, Mapping):
        r.add(p, "expected an object")
        return RouteRule(
            index=index, name=None, matches=(), backend_refs=(), session=None, problems=("expected an object",)
        )
    # The rule's own problems are unsupported values, not shape errors: kept with the rule, which is then dropped.
    unsupported = [
        q.removeprefix(f"{p}.")
        for q in unsupported_fields(
            {k: v for k, v in raw.items() if k != "filters"}, SUPPORTED_ROUTE_FIELDS["rules"], p
        )
        if ".filters:" not in q and ".filters[" not in q  # _filters reports those
    ]
    mirrors: list[MirrorRef] = []
    filters = _filters(
        raw.get("filters"), "filters", r, p, unsupported, backend=False, namespace=namespace, mirrors=mirrors
    )
    if mirrors and filters.redirect is not None:
        unsupported.append(
            "filters: a RequestMirror with a RequestRedirect (the rule answers itself: nothing to mirror)"
        )
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
        weight = r.integer(b, "weight", bp, 0, MAX_WEIGHT)
        ref = _backend_ref(b, bp, namespace, r, weight=1 if weight is None else weight, filters=ref_filters)
        if ref is not None:
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
        mirrors=tuple(mirrors),
        timeouts=_timeouts(r.obj(raw, "timeouts", p), f"{p}.timeouts", r) if "timeouts" in raw else None,
        retry=_retry(r.obj(raw, "retry", p), f"{p}.retry", r, unsupported) if "retry" in raw else None,
        problems=tuple(unsupported),
    )


def _backend_ref(
    b: Mapping[str, Any], bp: str, namespace: str, r: Reader, *, weight: int, filters: RuleFilters = NO_FILTERS
) -> BackendRef | None:
    """A backendRef (a rule's, or a RequestMirror's) with the API server's defaults; None without a name."""
    ref_name = r.text(b, "name", bp, 253, required=True)
    group = r.text(b, "group", bp, MAX_GROUP)
    kind = r.text(b, "kind", bp, MAX_KIND)
    port = r.integer(b, "port", bp, 1, 65535)
    ref = BackendRef(
        group="" if group is None else group,
        kind=kind or "Service",
        namespace=r.text(b, "namespace", bp, 63) or namespace,
        name=ref_name or "",
        port=port,
        weight=weight,
        filters=filters,
    )
    if ref.group == "" and ref.kind == "Service" and port is None:
        r.add(f"{bp}.port", "required for a Service")
    return ref if ref_name is not None else None


def _duration(raw: Mapping[str, Any], key: str, p: str, r: Reader) -> int | None:
    """A GEP-2257 duration field in milliseconds; None when unset (or not one: the body's problem, as the CRD's
    pattern refuses it)."""
    text = r.text(raw, key, p, MAX_DURATION_TEXT)
    if text is None:
        return None
    ms = parse_duration_ms(text)
    if ms is None:
        r.add(f"{p}.{key}", f"{text!r} is not a duration such as 1h30m (GEP-2257)")
    return ms


def _timeouts(raw: Mapping[str, Any], p: str, r: Reader) -> RuleTimeouts | None:
    try:
        return RuleTimeouts(
            request=_duration(raw, "request", p, r), backend_request=_duration(raw, "backendRequest", p, r)
        )
    except SpecError as exc:  # the CRD's rule (backendRequest within request): the API server refuses it too
        r.problems.extend(exc.within(p).problems)
        return None


def _retry(raw: Mapping[str, Any], p: str, r: Reader, unsupported: list[str]) -> RuleRetry | None:
    attempts = r.integer(raw, "attempts", p, 1, _MAX_INT64)
    if attempts is not None and attempts > MAX_RETRY_ATTEMPTS:
        unsupported.append(f"retry.attempts: {attempts} retries, this gateway retries at most {MAX_RETRY_ATTEMPTS}")
        return None
    codes: list[int] = []
    for i, c in enumerate(r.items(raw, "codes", p, MAX_RETRY_CODE - MIN_RETRY_CODE + 1)):
        if isinstance(c, bool) or not isinstance(c, int) or not MIN_RETRY_CODE <= c <= MAX_RETRY_CODE:
            r.add(f"{p}.codes[{i}]", f"must be an HTTP status code in {MIN_RETRY_CODE}..{MAX_RETRY_CODE}")
        elif c in codes:
            r.add(f"{p}.codes[{i}]", f"{c} is listed twice")
        else:
            codes.append(c)
    return RuleRetry(attempts=attempts, backoff=_duration(raw, "backoff", p, r), codes=tuple(codes))


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
    "ExtensionRef": "extension filters",
    "ExternalAuth": "external authorization",
}


def _filters(
    raw: Any,
    rel: str,
    r: Reader,
    p: str,
    unsupported: list[str],
    *,
    backend: bool,
    namespace: str = "",
    mirrors: list[MirrorRef] | None = None,
) -> RuleFilters:
    """A rule's (or a backendRef's) filters; a rule's RequestMirror filters into `mirrors`, in order. The CRD's shape
    rules are the body's problems; what this gateway does not serve (a filter type, a field, a value it cannot put in
    a header) the rule's, in `unsupported`."""
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
        unsupported += [q.removeprefix(f"{p}.") for q in unsupported_fields(body, supported[key], f"{fp}.{key}")]
        if key == "requestMirror":
            mirror = _mirror(body, f"{fp}.{key}", r, namespace, i)
            if mirror is not None and mirrors is not None:
                mirrors.append(mirror)
            continue
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
            cors=found.get("cors"),
        )
    except SpecError:
        return NO_FILTERS  # both a redirect and a rewrite: reported above


def _header_pairs(raw: Mapping[str, Any], key: str, p: str, r: Reader) -> tuple[tuple[str, str], ...]:
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


def _header_modifier(request: bool) -> Callable[[Mapping[str, Any], str, Reader], HeaderModifier]:
    def read(raw: Mapping[str, Any], p: str, r: Reader) -> HeaderModifier:
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


def _path_modifier(raw: Mapping[str, Any], p: str, r: Reader) -> PathModifier | None:
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


def _redirect(raw: Mapping[str, Any], p: str, r: Reader) -> RequestRedirect:
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


def _mirror(raw: Mapping[str, Any], p: str, r: Reader, namespace: str, index: int) -> MirrorRef | None:
    """A RequestMirror filter: its backendRef (defaulted as a rule's is) and its share, `percent` or `fraction`."""
    ref_raw = raw.get("backendRef")
    if not isinstance(ref_raw, Mapping):
        r.add(f"{p}.backendRef", "required (an object)")
        return None
    ref = _backend_ref(ref_raw, f"{p}.backendRef", namespace, r, weight=0)
    percent = r.integer(raw, "percent", p, 0, MAX_MIRROR_PERCENT)
    numerator, denominator = (1, 1) if percent is None else (percent, 100)
    if "fraction" in raw:
        if "percent" in raw:
            r.add(p, "only one of percent or fraction may be specified")
        fraction = r.obj(raw, "fraction", p)
        fp = f"{p}.fraction"
        num = r.integer(fraction, "numerator", fp, 0, MAX_MIRROR_DENOMINATOR)
        den = r.integer(fraction, "denominator", fp, 1, MAX_MIRROR_DENOMINATOR)
        den = 100 if den is None else den  # the CRD's default
        if num is None:
            r.add(f"{fp}.numerator", "required")
        elif num > den:
            r.add(fp, f"numerator {num} must be less than or equal to denominator {den}")
        else:
            numerator, denominator = num, den
    return None if ref is None else MirrorRef(ref=ref, filter_index=index, numerator=numerator, denominator=denominator)


def _rewrite(raw: Mapping[str, Any], p: str, r: Reader) -> URLRewrite:
    return URLRewrite(hostname=r.text(raw, "hostname", p, 253), path=_path_modifier(raw, p, r))


def _cors(raw: Mapping[str, Any], p: str, r: Reader) -> CorsPolicy:
    """A CORS filter; its values are checked by CorsPolicy (the CRD's patterns and bounds)."""

    def strings(key: str) -> tuple[str, ...]:
        out: list[str] = []
        for i, x in enumerate(r.items(raw, key, p, MAX_CORS_ITEMS)):
            if isinstance(x, str) and len(x) <= MAX_CORS_ORIGIN:
                out.append(x)
            else:
                r.add(f"{p}.{key}[{i}]", f"expected a string of at most {MAX_CORS_ORIGIN} characters")
        return tuple(out)

    credentials = raw.get("allowCredentials", False)
    if not isinstance(credentials, bool):
        r.add(f"{p}.allowCredentials", f"expected a boolean, got {type(credentials).__name__}")
        credentials = False
    max_age = r.integer(raw, "maxAge", p, 1, MAX_CORS_MAX_AGE)
    return CorsPolicy(
        allow_origins=strings("allowOrigins"),
        allow_methods=strings("allowMethods"),
        allow_headers=strings("allowHeaders"),
        expose_headers=strings("exposeHeaders"),
        allow_credentials=credentials,
        max_age=CORS_DEFAULT_MAX_AGE if max_age is None else max_age,
    )


_FILTER_READERS: Mapping[str, Callable[[Mapping[str, Any], str, Reader], object]] = {
    "cors": _cors,
    "requestHeaderModifier": _header_modifier(request=True),
    "responseHeaderModifier": _header_modifier(request=False),
    "requestRedirect": _redirect,
    "urlRewrite": _rewrite,
}


def _match(p: str, raw: Any, r: Reader, unsupported: list[str]) -> RouteMatch:
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
    r: Reader,
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


def _session(raw: Mapping[str, Any], p: str, r: Reader, unsupported: list[str]) -> SessionPersistence:
    type_ = r.enum(raw, "type", p, SessionType, SessionType.COOKIE)
    name = r.text(raw, "sessionName", p, MAX_SESSION_NAME)
    timeout_ms = _duration(raw, "absoluteTimeout", p, r)
    timeout = None if timeout_ms is None else -(-timeout_ms // 1000)  # whole seconds, rounded up
    cookie = r.obj(raw, "cookieConfig", p)
    lifetime = None
    if "lifetimeType" in cookie:
        lifetime = r.enum(cookie, "lifetimeType", f"{p}.cookieConfig", CookieLifetime, CookieLifetime.SESSION)
    if cookie and type_ is not SessionType.COOKIE:
        r.add(f"{p}.cookieConfig", "can only be set with type Cookie")
    if lifetime is CookieLifetime.PERMANENT and raw.get("absoluteTimeout") is None:
        r.add(f"{p}.absoluteTimeout", "required when cookieConfig.lifetimeType is Permanent")
    return SessionPersistence(type_, name, timeout, lifetime)


def parse_duration(text: str) -> int | None:
    """A GEP-2257 duration (`^([0-9]{1,5}(h|m|s|ms)){1,4}$`) in whole seconds, rounded up; None when invalid."""
    ms = parse_duration_ms(text)
    return None if ms is None else -(-ms // 1000)
