"""Core generation ↔ publish proto: the two directions of the publish API's payload.

The operator compiles with the core and sends `trafficsplit.v1alpha1.Generation`; the dataplane turns it back into a
core `Generation` and decides with that. A proto is never trusted: every rule the core relies on (weights, names,
unique clusters, unique hosts, compilable matches, cookie attributes) is checked here again and reported as one
`SpecError` listing every problem, so a bad generation is refused whole.
"""

from __future__ import annotations

import re
from types import MappingProxyType

from trafficsplit.core.compiled import CompiledBackend, CompiledMatch, CompiledSplit, Endpoint, Generation
from trafficsplit.core.cookie import CookieSettings, SameSite, is_token
from trafficsplit.core.errors import SpecError
from trafficsplit.core.spec import MatchKind
from trafficsplit.v1alpha1 import publish_pb2 as pb

_KIND_TO_PB = MappingProxyType({MatchKind.HEADER: pb.Match.HEADER, MatchKind.COOKIE: pb.Match.COOKIE})
_KIND_FROM_PB = MappingProxyType({v: k for k, v in _KIND_TO_PB.items()})


def generation_to_proto(gen: Generation, origin: str = "") -> pb.Generation:
    """The publish payload for a numbered generation (the operator's side); the one way a generation leaves the
    operator, and `generation_from_proto` the one way back (the dataplane's receiver, the operator's seeding)."""
    return pb.Generation(number=gen.number, splits=[split_to_proto(s) for s in gen.splits], origin=origin)


def split_to_proto(split: CompiledSplit) -> pb.Split:
    out = pb.Split(
        namespace=split.namespace,
        name=split.name,
        hosts=list(split.hosts),
        backends=[
            pb.Backend(
                name=b.name,
                weight=b.weight,
                cluster=b.cluster,
                service=b.service,
                port=b.port,
                endpoints=[pb.Endpoint(address=e.address, port=e.port, ready=e.ready) for e in b.endpoints],
            )
            for b in split.backends
        ],
        endpoint_affinity=split.endpoint_affinity,
        debug_headers=split.debug_headers,
        observed_generation=split.observed_generation,
    )
    if split.cookie is not None:
        c = split.cookie
        out.cookie.CopyFrom(
            pb.Cookie(
                name=c.name,
                path=c.path,
                domain=c.domain or "",
                secure=c.secure,
                http_only=c.http_only,
                same_site=c.same_site.value,
            )
        )
        if c.max_age is not None:
            out.cookie.max_age = c.max_age
    for m in split.matches:
        out.matches.append(
            pb.Match(
                kind=_KIND_TO_PB[m.kind],
                name=m.name,
                type=pb.Match.EXACT if m.pattern is None else pb.Match.REGULAR_EXPRESSION,
                value=m.exact if m.pattern is None else m.pattern.pattern,
                backend=split.backends[m.backend_index].name,
            )
        )
    return out


def generation_from_proto(msg: pb.Generation) -> Generation:
    """The core generation a publish carries; raises SpecError naming every problem (the dataplane's side)."""
    problems: list[str] = []
    splits: list[CompiledSplit] = []
    for i, s in enumerate(msg.splits):
        split = _split_from_proto(s, f"splits[{i}]", problems)
        if split is not None:
            splits.append(split)
    if msg.number < 1:
        problems.append(f"number: must be >= 1, got {msg.number}")
    if problems:
        raise SpecError(problems)
    return Generation(msg.number, tuple(splits))  # checks itself: hosts served once, clusters used once


def _split_from_proto(s: pb.Split, path: str, problems: list[str]) -> CompiledSplit | None:
    before = len(problems)
    if not s.namespace or not s.name:
        problems.append(f"{path}: namespace and name are required")
    hosts = tuple(h.lower() for h in s.hosts)
    if not hosts:
        problems.append(f"{path}.hosts: at least one host is required")
    if any(not h or ":" in h or "/" in h for h in hosts):
        problems.append(f"{path}.hosts: hosts are names without port or scheme, got {list(hosts)!r}")
    backends: list[CompiledBackend] = []
    for j, b in enumerate(s.backends):
        bpath = f"{path}.backends[{j}]"
        if not b.cluster:
            problems.append(f"{bpath}.cluster: required")
        for k, e in enumerate(b.endpoints):
            if not e.address or not 1 <= e.port <= 65535:
                problems.append(f"{bpath}.endpoints[{k}]: {e.address!r}:{e.port} is not an address and port")
        backends.append(
            CompiledBackend(
                name=b.name,
                weight=b.weight,
                cluster=b.cluster,
                service=b.service,
                port=b.port,
                endpoints=tuple(Endpoint(e.address, e.port, e.ready) for e in b.endpoints),
            )
        )
    cookie = _cookie_from_proto(s.cookie, f"{path}.cookie", problems) if s.HasField("cookie") else None
    index = {b.name: j for j, b in enumerate(backends)}
    matches: list[CompiledMatch] = []
    for j, m in enumerate(s.matches):
        mpath = f"{path}.matches[{j}]"
        if m.backend not in index:
            problems.append(f"{mpath}.backend: {m.backend!r} is not a backend of this split")
            continue
        if not is_token(m.name):
            problems.append(f"{mpath}.name: {m.name!r} is not a valid name")
        kind = _KIND_FROM_PB.get(m.kind)
        if kind is None:
            problems.append(f"{mpath}.kind: unknown kind {m.kind}")
            continue
        pattern: re.Pattern[str] | None = None
        if m.type == pb.Match.REGULAR_EXPRESSION:
            try:
                pattern = re.compile(m.value)
            except re.error as exc:
                problems.append(f"{mpath}.value: invalid regular expression: {exc}")
                continue
        elif m.type != pb.Match.EXACT:
            problems.append(f"{mpath}.type: unknown type {m.type}")
            continue
        name = m.name.lower() if kind is MatchKind.HEADER else m.name
        matches.append(CompiledMatch(kind, name, None if pattern else m.value, pattern, index[m.backend]))
    if len(problems) > before:
        return None
    try:
        return CompiledSplit(
            namespace=s.namespace,
            name=s.name,
            hosts=hosts,
            backends=tuple(backends),
            cookie=cookie,
            endpoint_affinity=s.endpoint_affinity,
            matches=tuple(matches),
            debug_headers=s.debug_headers,
            observed_generation=s.observed_generation,
        )
    except SpecError as exc:  # weights: names, duplicates, ranges, total
        problems.extend(f"{path}: {p}" for p in exc.problems)
        return None


def _cookie_from_proto(c: pb.Cookie, path: str, problems: list[str]) -> CookieSettings | None:
    if not is_token(c.name):
        problems.append(f"{path}.name: {c.name!r} is not an RFC 6265 cookie name")
    cookie_path = c.path or "/"
    if not cookie_path.startswith("/") or ";" in cookie_path:
        problems.append(f"{path}.path: {cookie_path!r} must start with '/' and contain no ';'")
    if ";" in c.domain:
        problems.append(f"{path}.domain: {c.domain!r} is not a domain name")
    if c.HasField("max_age") and c.max_age < 0:
        problems.append(f"{path}.max_age: must be >= 0, got {c.max_age}")
    try:
        same_site = SameSite(c.same_site or SameSite.LAX.value)
    except ValueError:
        problems.append(f"{path}.same_site: {c.same_site!r} must be one of Strict, Lax, None")
        return None
    return CookieSettings(
        name=c.name,
        path=cookie_path,
        max_age=c.max_age if c.HasField("max_age") else None,
        domain=c.domain or None,
        secure=c.secure,
        http_only=c.http_only,
        same_site=same_site,
    )
