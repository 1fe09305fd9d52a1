"""HTTPRoute filters the gateway carries, as values that check themselves, and what each does to a request. Pure.

RequestHeaderModifier and ResponseHeaderModifier (set, add, remove; on a rule or on one backendRef), RequestRedirect
(scheme, hostname, path, port, statusCode) and URLRewrite (hostname, path). The parser (gateway_httproute) builds them
from a route, the publish receiver (wire/generation.py) from a proto, both through these constructors, so the same
values are refused either way: the CRD's bounds, and beyond them what must never reach Envoy (a header name that is no
token, a value with a control byte or padding, the gateway's own `x-trafficsplit-` headers, the `host` header Envoy
refuses to modify).

What a filter does is here too, as functions the data plane applies and the tests read: `rewrite_path` (ReplaceFullPath
and ReplacePrefixMatch, by whole path segments as the spec's table gives), `HeaderModifier.apply`, and
`redirect_location` (the Location a RequestRedirect answers with, port rules included).

CORS (`CorsPolicy`, a rule's only) is Envoy's own CORS filter: the policy says which origins, methods and headers
a browser may use; Envoy answers the preflight itself and adds the response headers (`cors_origin_regex` turns an
origin pattern into the RE2 Envoy matches it with).

RequestMirror is here as what a rule carries once its backendRef resolved (`RequestMirror`: the Service port, its
endpoints and the share mirrored); the parser keeps the ref as written, the translation resolves it
(gatewayapi.backends) and a mirror that does not resolve is reported (ResolvedRefs) and not carried.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum

from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.headervalue import is_header_value
from trafficsplit.core.model.limits import MAX_ENDPOINTS, MAX_HOST
from trafficsplit.core.model.regex import Pattern, RegexError
from trafficsplit.core.model.rules import Endpoint, is_dns_label, is_host, is_token
from trafficsplit.core.model.upstream_tls import UpstreamTls

# The CRD's bounds (HTTPHeaderFilter, HTTPPathModifier).
MAX_HEADER_CHANGES = 16  # per list: set, add, remove
MAX_FILTER_HEADER_NAME = 256
MAX_FILTER_HEADER_VALUE = 4096
MAX_PATH_MODIFIER = 1024
# HTTPRequestMirrorFilter's `fraction` is int32 (denominator at least 1, numerator 0..denominator); `percent` 0..100.
MAX_MIRROR_DENOMINATOR = 2**31 - 1
MAX_MIRROR_PERCENT = 100
# Ours (the CRD allows the filter "multiple times" within its 16 filters): one rule's mirrors, each a cluster.
MAX_MIRRORS = 16
# The gateway's own headers (the routing and decision headers): no route may set, add or remove them.
RESERVED_HEADER_PREFIX = "x-trafficsplit-"


class PathModifierType(StrEnum):
    FULL = "ReplaceFullPath"
    PREFIX = "ReplacePrefixMatch"


class RedirectCode(IntEnum):
    MOVED_PERMANENTLY = 301
    FOUND = 302
    SEE_OTHER = 303
    TEMPORARY_REDIRECT = 307
    PERMANENT_REDIRECT = 308


class Scheme(StrEnum):
    HTTP = "http"
    HTTPS = "https"


_WELL_KNOWN_PORT = {Scheme.HTTP: 80, Scheme.HTTPS: 443}


def _name_problems(field: str, name: str, *, request: bool) -> list[str]:
    if not 1 <= len(name) <= MAX_FILTER_HEADER_NAME or not is_token(name):
        return [f"{field}: {name[:64]!r} must be an HTTP header name (a token of 1..{MAX_FILTER_HEADER_NAME})"]
    lower = name.lower()
    if lower.startswith(RESERVED_HEADER_PREFIX):
        return [f"{field}: {name[:64]!r}: {RESERVED_HEADER_PREFIX}* headers are the gateway's own"]
    if request and lower == "host":
        return [f"{field}: the host header is not modified by a header filter (use URLRewrite hostname)"]
    return []


@dataclass(frozen=True, slots=True, kw_only=True)
class HeaderModifier:
    """RequestHeaderModifier or ResponseHeaderModifier: `set` replaces a header's values, `add` appends one, `remove`
    drops every value. Names compare case-insensitively, as in HTTP; a name appears once per list."""

    set: tuple[tuple[str, str], ...] = ()
    add: tuple[tuple[str, str], ...] = ()
    remove: tuple[str, ...] = ()
    request: bool = True  # a request modifier (the host header is off limits) or a response one

    def __post_init__(self) -> None:
        problems: list[str] = []
        for field, items in (("set", self.set), ("add", self.add), ("remove", self.remove)):
            if len(items) > MAX_HEADER_CHANGES:
                problems.append(f"{field}: {len(items)} headers, at most {MAX_HEADER_CHANGES} are allowed")
                continue
            seen: set[str] = set()
            for i, item in enumerate(items):
                name = item if isinstance(item, str) else item[0]
                where = f"{field}[{i}]" if isinstance(item, str) else f"{field}[{i}].name"
                problems += _name_problems(where, name, request=self.request)
                if name.lower() in seen:
                    problems.append(f"{where}: {name[:64]!r} is listed twice")
                seen.add(name.lower())
                if not isinstance(item, str):
                    value = item[1]
                    if not 1 <= len(value) <= MAX_FILTER_HEADER_VALUE:
                        problems.append(f"{field}[{i}].value: {len(value)} characters, 1..{MAX_FILTER_HEADER_VALUE}")
                    elif not is_header_value(value):
                        problems.append(f"{field}[{i}].value: only printable ASCII, without leading or trailing spaces")
        if problems:
            raise SpecError(problems)

    def apply(self, headers: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """`headers` (name, value) as this modifier leaves them: removed names dropped, set names replaced by their
        one value, added values appended after any the header has."""
        gone = {n.lower() for n in self.remove} | {n.lower() for n, _ in self.set}
        out = [(n, v) for n, v in headers if n.lower() not in gone]
        out += list(self.set)
        out += list(self.add)
        return out


def _path_value_problems(field: str, value: str, *, empty_ok: bool) -> list[str]:
    if len(value) > MAX_PATH_MODIFIER:
        return [f"{field}: {len(value)} characters, at most {MAX_PATH_MODIFIER} are allowed"]
    if value == "" and empty_ok:
        return []
    if not value.startswith("/") or not is_header_value(value) or any(c in value for c in " ?#"):
        return [f"{field}: {value[:64]!r} must be an absolute path of printable ASCII (no space, '?' or '#')"]
    return []


@dataclass(frozen=True, slots=True)
class PathModifier:
    """ReplaceFullPath (the whole path becomes `value`) or ReplacePrefixMatch (the matched prefix does; empty: `/`)."""

    type: PathModifierType
    value: str

    def __post_init__(self) -> None:
        problems = _path_value_problems("value", self.value, empty_ok=self.type is PathModifierType.PREFIX)
        if problems:
            raise SpecError(problems)


def rewrite_path(match_prefix: str, path: str, modifier: PathModifier) -> str:
    """The request path after `modifier`, for a request whose path matched the PathPrefix `match_prefix` (by whole
    segments; `path` without its query). ReplacePrefixMatch replaces the matched segments and keeps the rest: prefix
    `/foo`, replacement `/xyz`: `/foo/bar` → `/xyz/bar`, `/foo/` → `/xyz/`, `/foo` → `/xyz`; an empty or `/`
    replacement leaves `/bar`, or `/` for the prefix itself (the spec's table, trailing slashes on either side
    ignored)."""
    if modifier.type is PathModifierType.FULL:
        return modifier.value
    prefix = match_prefix.rstrip("/")
    if not (path == prefix or path.startswith(prefix + "/")):
        raise ValueError(f"{path[:64]!r} does not match the prefix {match_prefix[:64]!r}")
    rest = path[len(prefix) :]
    replacement = modifier.value.rstrip("/")
    if not rest or (rest == "/" and not replacement):
        return replacement or "/"
    return replacement + rest


def _hostname_problems(hostname: str | None) -> list[str]:
    if hostname is None:
        return []
    if not is_host(hostname) or hostname.startswith("*") or len(hostname) > MAX_HOST:
        return [f"hostname: {hostname[:64]!r} must be a DNS name (lowercase, no wildcard, no port)"]
    return []


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestRedirect:
    """The rule answers a redirect (no backend): the request's URL with these parts replaced."""

    scheme: Scheme | None = None
    hostname: str | None = None
    path: PathModifier | None = None
    port: int | None = None
    status_code: RedirectCode = RedirectCode.FOUND

    def __post_init__(self) -> None:
        problems = _hostname_problems(self.hostname)
        if self.port is not None and not 1 <= self.port <= 65535:
            problems.append(f"port: {self.port} is not in 1..65535")
        if problems:
            raise SpecError(problems)


@dataclass(frozen=True, slots=True, kw_only=True)
class URLRewrite:
    """The request goes to the backend with its host and/or path rewritten."""

    hostname: str | None = None
    path: PathModifier | None = None

    def __post_init__(self) -> None:
        problems = _hostname_problems(self.hostname)
        if problems:
            raise SpecError(problems)


def redirect_location(
    redirect: RequestRedirect,
    *,
    scheme: str,
    host: str,
    listener_port: int,
    path: str,
    query: str = "",
    match_prefix: str = "/",
) -> str | None:
    """The Location header a RequestRedirect answers with, or None when the request's own parts (its host, path or
    query, which the client chose) would make it no valid header value; the data plane then answers 400.

    `scheme` is the request's (`http` on an HTTP listener), `host` its host without port (`normalize_host`), `path`
    and `query` its path and query string (without `?`). The port, per the spec: the filter's; else the scheme's
    well-known port when the filter sets a scheme; else the listener's. It is left out of the Location when it is
    the scheme's well-known port (http 80, https 443)."""
    out_scheme = redirect.scheme.value if redirect.scheme is not None else scheme
    if redirect.port is not None:
        port = redirect.port
    elif redirect.scheme is not None:
        port = _WELL_KNOWN_PORT[redirect.scheme]
    else:
        port = listener_port
    out_path = path if redirect.path is None else rewrite_path(match_prefix, path, redirect.path)
    authority = redirect.hostname or host
    if port != {"http": 80, "https": 443}.get(out_scheme):
        authority = f"{authority}:{port}"
    location = f"{out_scheme}://{authority}{out_path}" + (f"?{query}" if query else "")
    return location if is_header_value(location) and " " not in location else None


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestMirror:
    """A RequestMirror filter whose backendRef resolved: a copy of `numerator` of every `denominator` requests the
    rule serves goes to the Service port `namespace/service:port` (its `endpoints`), and its responses are dropped
    (the client sees only the rule's own backend's). `percent: p` is `p/100`; neither is every request (1/1)."""

    namespace: str
    service: str
    port: int
    numerator: int = 1
    denominator: int = 1
    endpoints: tuple[Endpoint, ...] = ()
    tls: UpstreamTls | None = None  # its Service port's BackendTLSPolicy: copies go over TLS, as the rule's requests

    def __post_init__(self) -> None:
        problems = [
            f"{f}: {v[:64]!r} must be a DNS label"
            for f, v in (("namespace", self.namespace), ("service", self.service))
            if not is_dns_label(v)
        ]
        if not 1 <= self.port <= 65535:
            problems.append(f"port: {self.port} is not in 1..65535")
        if not 1 <= self.denominator <= MAX_MIRROR_DENOMINATOR:
            problems.append(f"denominator: {self.denominator} is not in 1..{MAX_MIRROR_DENOMINATOR}")
        elif not 0 <= self.numerator <= self.denominator:
            problems.append(f"numerator: {self.numerator} is not in 0..{self.denominator} (the denominator)")
        if len(self.endpoints) > MAX_ENDPOINTS:  # a backend's bound
            problems.append(f"endpoints: {len(self.endpoints)} endpoints, at most {MAX_ENDPOINTS} are allowed")
        if problems:
            raise SpecError(problems)

    def to_dict(self) -> dict[str, object]:
        """As a golden shows it: the Service port, the fraction mirrored and its endpoints (not-ready ones marked)."""
        return {
            "service": f"{self.namespace}/{self.service}",
            "port": self.port,
            "fraction": {"numerator": self.numerator, "denominator": self.denominator},
            "endpoints": [f"{e.host}{'' if e.ready else ' (not ready)'}" for e in self.endpoints],
            **({"tls": {"sni": self.tls.sni}} if self.tls is not None else {}),
        }


# HTTPCORSFilter's bounds (the CRD's): origins and headers at most 64 each, methods at most 9 (every one or `*`).
MAX_CORS_ITEMS = 64
MAX_CORS_ORIGIN = 253
MAX_CORS_MAX_AGE = 2**31 - 1
CORS_DEFAULT_MAX_AGE = 5
CORS_WILDCARD = "*"
CORS_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "*"})
# The CRD's origin pattern: `*`, or scheme://host[:port] where the host may start with `*.` or be `*`.
_CORS_ORIGIN = re.compile(r"\*|https?://((\*\.)?([A-Za-z0-9-]+\.)*[A-Za-z0-9-]+|\*)(:[0-9]{1,5})?")


def _cors_list_problems(
    field: str, items: tuple[str, ...], valid: Callable[[str], bool], what: str, *, lone_wildcard: bool = True
) -> list[str]:
    problems = [f"{field}[{i}]: {v[:64]!r} must be {what}" for i, v in enumerate(items) if not valid(v)]
    if len(items) > MAX_CORS_ITEMS:
        problems.append(f"{field}: {len(items)} items, at most {MAX_CORS_ITEMS} are allowed")
    if len(set(items)) != len(items):
        problems.append(f"{field}: an item is listed twice")
    if lone_wildcard and CORS_WILDCARD in items and len(items) > 1:
        problems.append(f"{field}: '*' cannot be listed alongside others")
    return problems


@dataclass(frozen=True, slots=True, kw_only=True)
class CorsPolicy:
    """A CORS filter: requests from `allow_origins` (exact, `https://*.example.com`, or `*`) may use `allow_methods`
    and `allow_headers` (`*`: any), read `expose_headers`, send credentials when `allow_credentials`, and a browser
    caches the preflight answer `max_age` seconds. Every part reaches an Envoy header value: only tokens and the
    CRD's origin shapes pass."""

    allow_origins: tuple[str, ...] = ()
    allow_methods: tuple[str, ...] = ()
    allow_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    allow_credentials: bool = False
    max_age: int = CORS_DEFAULT_MAX_AGE

    def __post_init__(self) -> None:
        def origin(v: str) -> bool:
            return len(v) <= MAX_CORS_ORIGIN and _CORS_ORIGIN.fullmatch(v) is not None

        def header(v: str) -> bool:
            return 1 <= len(v) <= MAX_FILTER_HEADER_NAME and is_token(v)

        problems = [
            *_cors_list_problems("allowOrigins", self.allow_origins, origin, "*, or an origin scheme://host[:port]"),
            *_cors_list_problems("allowMethods", self.allow_methods, CORS_METHODS.__contains__, "an HTTP method or *"),
            *_cors_list_problems("allowHeaders", self.allow_headers, header, "an HTTP header name or *"),
            *_cors_list_problems(
                "exposeHeaders", self.expose_headers, header, "an HTTP header name", lone_wildcard=False
            ),
        ]
        for i, o in enumerate(self.allow_origins):
            regex = cors_origin_regex(o) if origin(o) else None
            if regex is None:
                continue
            try:  # over RE2's program-size bound Envoy would refuse the whole route configuration, every rule's
                Pattern(regex)
            except RegexError as exc:
                problems.append(f"allowOrigins[{i}]: {exc}")
        if not 1 <= self.max_age <= MAX_CORS_MAX_AGE:
            problems.append(f"maxAge: {self.max_age} is not in 1..{MAX_CORS_MAX_AGE}")
        if problems:
            raise SpecError(problems)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for key, items in (
            ("allowOrigins", self.allow_origins),
            ("allowMethods", self.allow_methods),
            ("allowHeaders", self.allow_headers),
            ("exposeHeaders", self.expose_headers),
        ):
            if items:
                out[key] = list(items)
        out["allowCredentials"] = self.allow_credentials
        out["maxAge"] = self.max_age
        return out


def cors_origin_regex(origin: str) -> str | None:
    """The RE2 an origin pattern matches with (`*` any run of characters, the rest literal), or None for an exact
    origin. `https://*.example.com` takes `https://a.b.example.com`; `*` takes every origin."""
    if CORS_WILDCARD not in origin:
        return None
    return re.escape(origin).replace(re.escape(CORS_WILDCARD), ".*")


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleFilters:
    """The filters of a rule, or of one backendRef (header modifiers only). The CRD allows each type once per list and
    a redirect or a rewrite, not both."""

    request_headers: HeaderModifier | None = None
    response_headers: HeaderModifier | None = None
    redirect: RequestRedirect | None = None
    rewrite: URLRewrite | None = None
    cors: CorsPolicy | None = None  # a rule's only

    def __post_init__(self) -> None:
        problems: list[str] = []
        if self.redirect is not None and self.rewrite is not None:
            problems.append("a rule has a RequestRedirect or a URLRewrite, not both")
        if self.request_headers is not None and not self.request_headers.request:
            problems.append("request_headers: a response header modifier")
        if self.response_headers is not None and self.response_headers.request:
            problems.append("response_headers: a request header modifier")
        if problems:
            raise SpecError(problems)

    def to_dict(self) -> list[dict[str, object]]:
        """As the HTTPRoute writes them (`filters`), for goldens and the CLI."""

        def headers(m: HeaderModifier) -> dict[str, object]:
            out: dict[str, object] = {}
            if m.set:
                out["set"] = [{"name": n, "value": v} for n, v in m.set]
            if m.add:
                out["add"] = [{"name": n, "value": v} for n, v in m.add]
            if m.remove:
                out["remove"] = list(m.remove)
            return out

        def path(m: PathModifier) -> dict[str, object]:
            key = "replaceFullPath" if m.type is PathModifierType.FULL else "replacePrefixMatch"
            return {"type": m.type.value, key: m.value}

        out: list[dict[str, object]] = []
        if self.request_headers is not None:
            out.append({"type": "RequestHeaderModifier", "requestHeaderModifier": headers(self.request_headers)})
        if self.response_headers is not None:
            out.append({"type": "ResponseHeaderModifier", "responseHeaderModifier": headers(self.response_headers)})
        if self.redirect is not None:
            r = self.redirect
            red: dict[str, object] = {"statusCode": int(r.status_code)}
            if r.scheme is not None:
                red["scheme"] = r.scheme.value
            if r.hostname is not None:
                red["hostname"] = r.hostname
            if r.path is not None:
                red["path"] = path(r.path)
            if r.port is not None:
                red["port"] = r.port
            out.append({"type": "RequestRedirect", "requestRedirect": red})
        if self.rewrite is not None:
            w = self.rewrite
            rew: dict[str, object] = {}
            if w.hostname is not None:
                rew["hostname"] = w.hostname
            if w.path is not None:
                rew["path"] = path(w.path)
            out.append({"type": "URLRewrite", "urlRewrite": rew})
        if self.cors is not None:
            out.append({"type": "CORS", "cors": self.cors.to_dict()})
        return out

    @property
    def replaces_prefix(self) -> bool:
        """A path modifier replaces the matched prefix: the rule's one match must be a PathPrefix."""
        paths = [f.path for f in (self.redirect, self.rewrite) if f is not None and f.path is not None]
        return any(p.type is PathModifierType.PREFIX for p in paths)

    @property
    def empty(self) -> bool:
        return self == NO_FILTERS


NO_FILTERS = RuleFilters()
