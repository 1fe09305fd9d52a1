"""The TrafficSplit spec as the core sees it, parsed from the resource's `spec` mapping with field-named errors.

The API server's schema and CEL rules reject bad input first; this parser checks the same rules again because the file
source (local mode) has no API server in front of it, and because a compiled generation must never rest on trust.
Field paths in messages use the resource's own names (`spec.backends[1].weight`), as `kubectl` users see them.

The parser owns the YAML's shape (types, required fields, defaults); the rules on each field's value live in the
values that check themselves (`CookieSettings`, `Endpoint`, `CompiledMatch`, and the compiled split `compile_split`
builds from the parsed `SplitSpec`), which the publish receiver builds too, so both refuse the same input in the same
words. The parser puts their problems under the resource's paths, once (`Problems.checked`). Nothing outside this
module reads a raw spec field: tools that rewrite `spec.backends` go through `declared_backends`. Control-time only:
the per-request path and the model never import this module (.importlinter).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.model.assignment import AssignmentMode
from trafficsplit.core.model.compiled import CompiledMatch, MatchKind, MatchType, persistent_cookie_problems
from trafficsplit.core.model.cookie import CookieSettings, SameSite
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.fields import unknown_fields
from trafficsplit.core.model.persistent import StickyMode
from trafficsplit.core.model.ring import DEFAULT_POINTS
from trafficsplit.core.model.rules import Endpoint
from trafficsplit.core.model.splitspec import BackendSpec, SplitSpec
from trafficsplit.core.model.weights import parse_int

# Every field a spec may have: the CRD schema's properties (tests/unit/test_crd.py keeps the two equal) plus the file
# source's `backends[].endpoints`. The API server refuses (kubectl's strict field validation) or prunes any other
# field; the file source has no API server, so the parser refuses them too: a typo (`stickyy:`) is an error, not a
# silently ignored field. A nested mapping is an object's fields (for a list: its items' fields); None is a leaf.
_MATCH_CONDITION = MappingProxyType({"name": None, "type": None, "value": None})
SPEC_FIELDS: Mapping[str, Any] = MappingProxyType(
    {
        "hosts": None,
        "service": None,
        "backends": MappingProxyType(
            {"name": None, "service": None, "port": None, "weight": None, "drain": None, "endpoints": None}
        ),
        "sticky": MappingProxyType(
            {
                "cookie": MappingProxyType(
                    dict.fromkeys(("name", "maxAge", "path", "domain", "secure", "httpOnly", "sameSite", "partitioned"))
                ),
                "endpointAffinity": None,
                "endpointPoints": None,
                "header": MappingProxyType({"name": None}),
                "mode": None,
            }
        ),
        "matches": MappingProxyType({"header": _MATCH_CONDITION, "cookie": _MATCH_CONDITION, "backend": None}),
        "debugHeaders": None,
        "assignment": None,
    }
)


class DeclaredBackend(dict[str, Any]):
    """One `spec.backends` entry exactly as stored, for tools that rewrite the list (the CLI's set-weights and flip
    send the whole list back, so every field the user wrote is kept). Unvalidated on purpose: a proposed change may be
    one the API server refuses, and its refusal names the field. The parser's reading of the entry (`name`, `weight`)
    is here, so no tool reads the YAML's field names itself."""

    @property
    def name(self) -> str:
        return str(self.get("name"))

    @property
    def weight(self) -> Any:  # as stored: Weights reports a non-integer
        return self.get("weight", 0)

    @property
    def drain(self) -> bool:
        return self.get("drain") is True

    def with_weight(self, weight: int, drain: bool | None = None) -> DeclaredBackend:
        """The entry at `weight`. `drain`: True marks it draining, False drops the mark; None keeps the mark only at
        weight 0 (a backend given weight again is no longer draining: the API server refuses drain with weight)."""
        keep = self.drain and weight == 0 if drain is None else drain
        out = {k: v for k, v in self.items() if k != "drain"}
        return DeclaredBackend({**out, "weight": weight, **({"drain": True} if keep else {})})


def declared_backends(spec: Mapping[str, Any]) -> list[DeclaredBackend]:
    """`spec.backends` as stored, one `DeclaredBackend` per object entry, in order."""
    raw = spec.get("backends")
    return [DeclaredBackend(b) for b in raw if isinstance(b, Mapping)] if isinstance(raw, list) else []


def default_hosts(service: str, namespace: str) -> tuple[str, ...]:
    """The authorities in-cluster clients use for a Service, the default for `spec.hosts`."""
    return (service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local")


class Problems:
    """Collects every problem in one pass so the user fixes them all at once."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{path}: {message}")

    def extend(self, path: str, error: SpecError) -> None:
        """A value's own problems (`hosts[1]: ...`) under the resource path (`spec.hosts[1]: ...`)."""
        self.items.extend(error.within(path).problems)

    def checked(self, error: SpecError) -> None:
        """The compiled value's problems (already under the resource's paths), but none about a field whose problem
        is reported already: a field the parser could not read stands in with a placeholder (a missing name as
        ''), whose problems are not the user's."""
        reported = [q.partition(": ")[0] for q in self.items]
        for q in error.problems:
            path = q.partition(": ")[0]
            if not any(path == r or path.startswith((f"{r}.", f"{r}[")) for r in reported):
                self.items.append(q)


def get_field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], path: str, p: Problems) -> Any:
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
    p = Problems()
    if not isinstance(spec, Mapping):
        raise SpecError(["spec: expected an object"])
    p.items.extend(unknown_fields(spec, SPEC_FIELDS, "spec"))
    service = get_field(spec, "service", str, "spec", p)
    hosts_raw = get_field(spec, "hosts", list, "spec", p)
    sticky = get_field(spec, "sticky", Mapping, "spec", p)
    cookie, affinity = _parse_sticky(sticky, p)
    sticky_mode = parse_sticky_mode(sticky, p) or StickyMode.REHASH
    split = SplitSpec(
        namespace=namespace,
        name=name,
        hosts=_parse_hosts(hosts_raw, service, namespace, p),
        service=service,
        backends=_parse_backends(get_field(spec, "backends", list, "spec", p), p),
        cookie=cookie,
        endpoint_affinity=affinity,
        matches=_parse_matches(get_field(spec, "matches", list, "spec", p), p),
        debug_headers=get_field(spec, "debugHeaders", bool, "spec", p) or False,
        endpoint_points=parse_endpoint_points(sticky, p),
        key_header=parse_key_header(sticky, p),
        assignment=parse_assignment(spec, p) or AssignmentMode.HASH,
        sticky_mode=sticky_mode,
    )
    # The model also lets a key header carry the seal (an HTTPRoute's Header sessionPersistence); a TrafficSplit
    # offers only the cookie, as its CRD says: the same rule, asked without the header.
    p.extend("spec", SpecError(persistent_cookie_problems(sticky_mode, cookie is not None)))
    # The split's rules are the compiled split's: checked by compiling it. The file source (local mode) takes the name
    # and namespace from its files: their problems go under their resource path.
    try:
        compile_split(split)
    except SpecError as exc:
        p.checked(exc.within("spec", moved={"namespace": "metadata.namespace", "name": "metadata.name"}))
    if p.items:
        raise SpecError(p.items)
    return split


# The readers below are shared with the TrafficSplitPolicy (core/gatewayapi/policy.py), whose `spec.sticky` and
# `spec.assignment` are these fields under the same paths: one rule, one message, in one place. Each returns None when
# the field is absent, so the caller chooses the default.


def parse_sticky_mode(sticky: Mapping[str, Any] | None, p: Problems) -> StickyMode | None:
    raw = get_field(sticky, "mode", str, "spec.sticky", p) if sticky is not None else None
    if raw is None:
        return None
    try:
        return StickyMode(raw)
    except ValueError:
        p.add("spec.sticky.mode", f"{raw[:32]!r} must be one of rehash, persistent")
        return None


def parse_assignment(spec: Mapping[str, Any], p: Problems) -> AssignmentMode | None:
    raw = get_field(spec, "assignment", str, "spec", p)
    if raw is None:
        return None
    try:
        return AssignmentMode(raw)
    except ValueError:
        p.add("spec.assignment", f"{raw[:32]!r} must be one of hash, minimal")
        return None


def parse_endpoint_points(raw: Mapping[str, Any] | None, p: Problems) -> int:
    points = get_field(raw, "endpointPoints", int, "spec.sticky", p) if raw is not None else None
    return DEFAULT_POINTS if points is None else int(points)


def parse_key_header(raw: Mapping[str, Any] | None, p: Problems) -> str | None:
    h = get_field(raw, "header", Mapping, "spec.sticky", p) if raw is not None else None
    if h is None:
        return None
    name = get_field(h, "name", str, "spec.sticky.header", p)
    if name is None:
        p.add("spec.sticky.header.name", "required")
        return None
    return str(name)


def _parse_hosts(raw: list[Any] | None, service: str | None, namespace: str, p: Problems) -> tuple[str, ...]:
    if not raw:
        if service:
            return default_hosts(service, namespace)
        p.add("spec.hosts", "give at least one host, or spec.service to derive them from")
        return ()
    # A non-string stands in as a name no host can have, so the rule reports it at its index.
    return tuple(h.lower() if isinstance(h, str) else f"<{type(h).__name__}>" for h in raw)


def _parse_backends(raw: list[Any] | None, p: Problems) -> tuple[BackendSpec, ...]:
    if not raw:
        p.add("spec.backends", "at least one backend is required")
        return ()
    # One per entry, so the compiled split's problems name the entry's index; a missing or mistyped field stands in
    # as '' (80 for a port, 0 for a weight), its problem reported here.
    out: list[BackendSpec] = []
    for i, b in enumerate(raw):
        path = f"spec.backends[{i}]"
        if not isinstance(b, Mapping):
            p.add(path, "expected an object")
            out.append(BackendSpec(name="", service="", port=80, weight=0))
            continue
        name = get_field(b, "name", str, path, p)
        if name is None:
            p.add(f"{path}.name", "required")
        weight = get_field(b, "weight", int, path, p)
        if weight is None and "weight" not in b:
            p.add(f"{path}.weight", "required")
        port = get_field(b, "port", int, path, p)
        out.append(
            BackendSpec(
                name=name or "",
                service=get_field(b, "service", str, path, p) or name or "",
                port=80 if port is None else port,
                weight=weight or 0,
                endpoints=_parse_static_endpoints(b.get("endpoints"), f"{path}.endpoints", p),
                drain=get_field(b, "drain", bool, path, p) or False,
            )
        )
    return tuple(out)


def _parse_static_endpoints(raw: Any, path: str, p: Problems) -> tuple[Endpoint, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        p.add(path, "expected a list of HOST:PORT")
        return ()
    eps: list[Endpoint] = []
    for i, item in enumerate(raw):
        host, sep, port_text = str(item).rpartition(":")
        port = parse_int(port_text)
        if not sep or not host or port is None:
            p.add(f"{path}[{i}]", f"{item!r} is not HOST:PORT")
            continue
        try:
            eps.append(Endpoint(host.strip("[]"), port))
        except SpecError as exc:
            p.extend(f"{path}[{i}]", exc)
    return tuple(eps)


def _parse_sticky(raw: Mapping[str, Any] | None, p: Problems) -> tuple[CookieSettings | None, bool]:
    if raw is None:
        return None, False
    affinity = get_field(raw, "endpointAffinity", bool, "spec.sticky", p) or False
    c = get_field(raw, "cookie", Mapping, "spec.sticky", p)
    if c is None:
        return None, affinity
    path = "spec.sticky.cookie"
    name = get_field(c, "name", str, path, p)
    if name is None:
        p.add(f"{path}.name", "required")
    max_age = get_field(c, "maxAge", int, path, p)
    attributes = parse_cookie_attributes(c, path, p)
    if name is None:
        return None, affinity
    try:
        settings = CookieSettings(name=name, max_age=max_age, **attributes)
    except SpecError as exc:
        p.extend(path, exc)
        return None, affinity
    return settings, affinity


def parse_cookie_attributes(c: Mapping[str, Any], path: str, p: Problems) -> dict[str, Any]:
    """The cookie's attributes beside its name and Max-Age (`path`, `domain`, `secure`, `httpOnly`, `sameSite`,
    `partitioned`) as `CookieSettings` keywords, with §4's defaults; the combinations are `CookieSettings`' to check."""
    same_site_raw = get_field(c, "sameSite", str, path, p) or SameSite.LAX.value
    try:
        same_site = SameSite(same_site_raw)
    except ValueError:
        p.add(f"{path}.sameSite", f"{same_site_raw[:32]!r} must be one of Strict, Lax, None")
        same_site = SameSite.LAX
    http_only = get_field(c, "httpOnly", bool, path, p)
    return {
        "path": get_field(c, "path", str, path, p) or "/",
        "domain": get_field(c, "domain", str, path, p),
        "secure": get_field(c, "secure", bool, path, p) or False,
        "http_only": True if http_only is None else http_only,
        "same_site": same_site,
        "partitioned": get_field(c, "partitioned", bool, path, p) or False,
    }


def _parse_matches(raw: Sequence[Any] | None, p: Problems) -> tuple[CompiledMatch, ...]:
    """The match rules, each checking itself; none when one cannot be read (the split's rules on its matches, their
    count and backends, are then reported once these are sound, at the right indexes)."""
    if not raw:
        return ()
    out: list[CompiledMatch] = []
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
        cond = get_field(m, kind.value, Mapping, path, p)
        backend = get_field(m, "backend", str, path, p)
        if backend is None:
            p.add(f"{path}.backend", "required")
        if cond is None:
            continue
        cpath = f"{path}.{kind.value}"
        name = get_field(cond, "name", str, cpath, p)
        value = get_field(cond, "value", str, cpath, p)
        if value is None:
            p.add(f"{cpath}.value", "required")
        type_raw = get_field(cond, "type", str, cpath, p) or MatchType.EXACT.value
        try:
            mtype = MatchType(type_raw)
        except ValueError:
            p.add(f"{cpath}.type", f"{type_raw!r} must be Exact or RegularExpression")
            continue
        # Header names compare case-insensitively (HTTP); cookie names exactly (RFC 6265).
        folded = (name or "").lower() if kind is MatchKind.HEADER else (name or "")
        try:
            out.append(CompiledMatch(kind=kind, name=folded, type=mtype, value=value or "", backend=backend or ""))
        except SpecError as exc:
            p.extend(cpath, exc)
    return tuple(out) if len(out) == len(raw) else ()
