"""The TrafficSplit spec as the core sees it, parsed from the resource's `spec` mapping with field-named errors.

The API server's schema and CEL rules reject bad input first; this parser checks the same rules again because the file
source (local mode) has no API server in front of it, and because a compiled generation must never rest on trust.
Field paths in messages use the resource's own names (`spec.backends[1].weight`), as `kubectl` users see them.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from trafficsplit.core.cookie import CookieSettings, SameSite, is_token
from trafficsplit.core.errors import SpecError
from trafficsplit.core.weights import MAX_BACKENDS, MAX_WEIGHT, parse_int

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_HOST = re.compile(r"^(\*\.)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MAX_MATCHES = 32
MAX_HOSTS = 16

# Every field a spec may have: the CRD schema's properties (tests/unit/test_crd.py keeps the two equal) plus the file
# source's `backends[].endpoints`. The API server refuses (kubectl's strict field validation) or prunes any other
# field; the file source has no API server, so the parser refuses them too: a typo (`stickyy:`) is an error, not a
# silently ignored field. A nested mapping is an object's fields (for a list: its items' fields); None is a leaf.
_MATCH_CONDITION = MappingProxyType({"name": None, "type": None, "value": None})
SPEC_FIELDS: Mapping[str, Any] = MappingProxyType(
    {
        "hosts": None,
        "service": None,
        "backends": MappingProxyType({"name": None, "service": None, "port": None, "weight": None, "endpoints": None}),
        "sticky": MappingProxyType(
            {
                "cookie": MappingProxyType(
                    dict.fromkeys(("name", "maxAge", "path", "domain", "secure", "httpOnly", "sameSite"))
                ),
                "endpointAffinity": None,
            }
        ),
        "matches": MappingProxyType({"header": _MATCH_CONDITION, "cookie": _MATCH_CONDITION, "backend": None}),
        "debugHeaders": None,
    }
)


class MatchKind(StrEnum):
    HEADER = "header"
    COOKIE = "cookie"


class MatchType(StrEnum):
    EXACT = "Exact"
    REGULAR_EXPRESSION = "RegularExpression"


@dataclass(frozen=True, slots=True)
class StaticEndpoint:
    """An address given in a file-source spec (local mode); in Kubernetes, endpoints come from EndpointSlices."""

    address: str
    port: int


@dataclass(frozen=True, slots=True)
class BackendSpec:
    name: str
    service: str
    port: int
    weight: int
    endpoints: tuple[StaticEndpoint, ...] = ()


@dataclass(frozen=True, slots=True)
class MatchSpec:
    kind: MatchKind
    name: str
    type: MatchType
    value: str
    backend: str


@dataclass(frozen=True, slots=True)
class SplitSpec:
    namespace: str
    name: str
    hosts: tuple[str, ...]
    service: str | None
    backends: tuple[BackendSpec, ...]
    cookie: CookieSettings | None
    endpoint_affinity: bool
    matches: tuple[MatchSpec, ...]
    debug_headers: bool

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def weights_text(self) -> str:
        return ",".join(f"{b.name}={b.weight}" for b in self.backends)


def default_hosts(service: str, namespace: str) -> tuple[str, ...]:
    """The authorities in-cluster clients use for a Service, the default for `spec.hosts`."""
    return (service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local")


class _Problems:
    """Collects every problem in one pass so the user fixes them all at once."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{path}: {message}")


def _unknown_fields(value: Any, fields: Mapping[str, Any], path: str, p: _Problems) -> None:
    items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
    for i, obj in items:
        if not isinstance(obj, Mapping):
            continue  # a wrong type is reported where the field is read
        where = path if i is None else f"{path}[{i}]"
        for key, sub in obj.items():
            if key not in fields:
                near = difflib.get_close_matches(str(key), list(fields), n=1)
                p.add(f"{where}.{key}", "unknown field" + (f" (did you mean {near[0]!r}?)" if near else ""))
            elif fields[key] is not None:
                _unknown_fields(sub, fields[key], f"{where}.{key}", p)


def object_name_problems(namespace: str, name: str) -> list[str]:
    """The API server's rules for a namespaced object's identity (namespace: a DNS label; name: a DNS subdomain), for
    sources without one. They also keep `namespace/name` (and the cluster names built from it) unambiguous."""
    problems = []
    if len(namespace) > 63 or not _DNS_LABEL.match(namespace):
        problems.append(f"metadata.namespace: {namespace!r} is not a DNS label (lowercase, digits, '-', at most 63)")
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        problems.append(f"metadata.name: {name!r} is not a DNS subdomain (lowercase, digits, '-', '.', at most 253)")
    return problems


def _get(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], path: str, p: _Problems) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    # bool is an int in Python; a weight of `true` is not a weight.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, (int,))):
        p.add(f"{path}.{key}", f"expected {_kind_name(kind)}, got {type(value).__name__}")
        return None
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return {"str": "string", "int": "integer", "bool": "boolean", "list": "list", "Mapping": "object"}.get(
        kind.__name__, kind.__name__
    )


def parse_split(namespace: str, name: str, spec: Mapping[str, Any]) -> SplitSpec:
    """Validate and convert a TrafficSplit `spec`; raises SpecError listing every bad field."""
    p = _Problems()
    if not isinstance(spec, Mapping):
        raise SpecError(["spec: expected an object"])
    _unknown_fields(spec, SPEC_FIELDS, "spec", p)
    service = _get(spec, "service", str, "spec", p)
    hosts_raw = _get(spec, "hosts", list, "spec", p)
    hosts = _parse_hosts(hosts_raw, service, namespace, p)
    backends = _parse_backends(_get(spec, "backends", list, "spec", p), p)
    cookie, affinity = _parse_sticky(_get(spec, "sticky", Mapping, "spec", p), p)
    matches = _parse_matches(_get(spec, "matches", list, "spec", p), {b.name for b in backends}, p)
    debug = _get(spec, "debugHeaders", bool, "spec", p) or False
    if p.items:
        raise SpecError(p.items)
    return SplitSpec(
        namespace=namespace,
        name=name,
        hosts=hosts,
        service=service,
        backends=backends,
        cookie=cookie,
        endpoint_affinity=affinity,
        matches=matches,
        debug_headers=debug,
    )


def _parse_hosts(raw: list[Any] | None, service: str | None, namespace: str, p: _Problems) -> tuple[str, ...]:
    if not raw:
        if service:
            return default_hosts(service, namespace)
        p.add("spec.hosts", "give at least one host, or spec.service to derive them from")
        return ()
    if len(raw) > MAX_HOSTS:
        p.add("spec.hosts", f"{len(raw)} hosts, at most {MAX_HOSTS} are allowed")
    hosts: list[str] = []
    for i, h in enumerate(raw):
        if not isinstance(h, str) or not _HOST.match(h.lower()) or len(h) > 253:
            p.add(f"spec.hosts[{i}]", f"{h!r} is not a DNS host name (no port, no scheme)")
            continue
        if h.lower() in hosts:
            p.add(f"spec.hosts[{i}]", f"duplicate host {h!r}")
            continue
        hosts.append(h.lower())
    return tuple(hosts)


def _parse_backends(raw: list[Any] | None, p: _Problems) -> tuple[BackendSpec, ...]:
    if not raw:
        p.add("spec.backends", "at least one backend is required")
        return ()
    if len(raw) > MAX_BACKENDS:
        p.add("spec.backends", f"{len(raw)} backends, at most {MAX_BACKENDS} are allowed")
    out: list[BackendSpec] = []
    seen: set[str] = set()
    for i, b in enumerate(raw):
        path = f"spec.backends[{i}]"
        if not isinstance(b, Mapping):
            p.add(path, "expected an object")
            continue
        name = _get(b, "name", str, path, p)
        if name is None:
            p.add(f"{path}.name", "required")
        elif not _DNS_LABEL.match(name) or len(name) > 63:
            p.add(f"{path}.name", f"{name!r} must be a DNS label (lowercase letters, digits, '-')")
        elif name in seen:
            p.add(f"{path}.name", f"duplicate backend name {name!r}")
        else:
            seen.add(name)
        service = _get(b, "service", str, path, p) or name
        port = _get(b, "port", int, path, p)
        if port is None:
            port = 80
        elif not 1 <= port <= 65535:
            p.add(f"{path}.port", f"must be 1..65535, got {port}")
        weight = _get(b, "weight", int, path, p)
        if weight is None:
            if "weight" not in b:
                p.add(f"{path}.weight", "required")
            weight = 0
        elif weight < 0:
            p.add(f"{path}.weight", f"must be >= 0, got {weight}")
        elif weight > MAX_WEIGHT:
            p.add(f"{path}.weight", f"must be <= {MAX_WEIGHT}, got {weight}")
        endpoints = _parse_static_endpoints(b.get("endpoints"), f"{path}.endpoints", p)
        out.append(BackendSpec(name or "", service, port, weight, endpoints))
    if out and sum(max(b.weight, 0) for b in out) <= 0:
        p.add("spec.backends", "the total weight must be > 0")
    return tuple(out)


def _parse_static_endpoints(raw: Any, path: str, p: _Problems) -> tuple[StaticEndpoint, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        p.add(path, "expected a list of HOST:PORT")
        return ()
    eps: list[StaticEndpoint] = []
    for i, item in enumerate(raw):
        host, sep, port_text = str(item).rpartition(":")
        port = parse_int(port_text)
        if not sep or not host or port is None or not 1 <= port <= 65535:
            p.add(f"{path}[{i}]", f"{item!r} is not HOST:PORT")
            continue
        eps.append(StaticEndpoint(host.strip("[]"), port))
    return tuple(eps)


def _parse_sticky(raw: Mapping[str, Any] | None, p: _Problems) -> tuple[CookieSettings | None, bool]:
    if raw is None:
        return None, False
    affinity = _get(raw, "endpointAffinity", bool, "spec.sticky", p) or False
    c = _get(raw, "cookie", Mapping, "spec.sticky", p)
    if c is None:
        return None, affinity
    path = "spec.sticky.cookie"
    name = _get(c, "name", str, path, p)
    if name is None:
        p.add(f"{path}.name", "required")
        name = ""
    elif not is_token(name):
        p.add(f"{path}.name", f"{name!r} is not an RFC 6265 cookie name (token characters only)")
    max_age = _get(c, "maxAge", int, path, p)
    if max_age is not None and max_age < 0:
        p.add(f"{path}.maxAge", f"must be >= 0, got {max_age}")
    cookie_path = _get(c, "path", str, path, p) or "/"
    if not cookie_path.startswith("/") or ";" in cookie_path:
        p.add(f"{path}.path", f"{cookie_path!r} must start with '/' and contain no ';'")
    domain = _get(c, "domain", str, path, p)
    if domain is not None and (not _HOST.match(domain.lstrip(".").lower()) or ";" in domain):
        p.add(f"{path}.domain", f"{domain!r} is not a domain name")
    secure = _get(c, "secure", bool, path, p) or False
    http_only = _get(c, "httpOnly", bool, path, p)
    same_site_raw = _get(c, "sameSite", str, path, p) or SameSite.LAX.value
    try:
        same_site = SameSite(same_site_raw)
    except ValueError:
        p.add(f"{path}.sameSite", f"{same_site_raw!r} must be one of Strict, Lax, None")
        same_site = SameSite.LAX
    if same_site is SameSite.NONE and not secure:
        p.add(f"{path}.sameSite", "SameSite=None requires secure: true (browsers drop it otherwise)")
    settings = CookieSettings(
        name=name,
        path=cookie_path,
        max_age=max_age,
        domain=domain,
        secure=secure,
        http_only=True if http_only is None else http_only,
        same_site=same_site,
    )
    return settings, affinity


def _parse_matches(raw: Sequence[Any] | None, backend_names: set[str], p: _Problems) -> tuple[MatchSpec, ...]:
    if not raw:
        return ()
    if len(raw) > MAX_MATCHES:
        p.add("spec.matches", f"{len(raw)} rules, at most {MAX_MATCHES} are allowed")
    out: list[MatchSpec] = []
    for i, m in enumerate(raw):
        path = f"spec.matches[{i}]"
        if not isinstance(m, Mapping):
            p.add(path, "expected an object")
            continue
        kinds = [k for k in MatchKind if k.value in m]
        if len(kinds) != 1:
            p.add(path, "give exactly one of header or cookie")
            continue
        kind = kinds[0]
        cond = _get(m, kind.value, Mapping, path, p)
        backend = _get(m, "backend", str, path, p)
        if backend is None:
            p.add(f"{path}.backend", "required")
        elif backend not in backend_names:
            p.add(f"{path}.backend", f"{backend!r} is not one of spec.backends")
        if cond is None:
            continue
        cpath = f"{path}.{kind.value}"
        name = _get(cond, "name", str, cpath, p)
        if not name or not is_token(name):
            p.add(f"{cpath}.name", f"{name!r} is not a valid {kind.value} name")
        value = _get(cond, "value", str, cpath, p)
        if value is None:
            p.add(f"{cpath}.value", "required")
        type_raw = _get(cond, "type", str, cpath, p) or MatchType.EXACT.value
        try:
            mtype = MatchType(type_raw)
        except ValueError:
            p.add(f"{cpath}.type", f"{type_raw!r} must be Exact or RegularExpression")
            continue
        if mtype is MatchType.REGULAR_EXPRESSION and value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                p.add(f"{cpath}.value", f"invalid regular expression: {exc}")
        if name and value is not None and backend:
            # Header names compare case-insensitively (HTTP); cookie names exactly (RFC 6265).
            out.append(MatchSpec(kind, name.lower() if kind is MatchKind.HEADER else name, mtype, value, backend))
    return tuple(out)
