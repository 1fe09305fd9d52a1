"""Core generation ↔ publish proto: the two directions of the publish API's payload.

The operator compiles with the core and sends `trafficsplit.v1alpha1.Generation`; the dataplane turns it back into a
core `Generation` and decides with that. A proto is never trusted: every rule the core relies on (weights, names,
unique clusters, unique hosts, RE2 matches, cookie attributes, every bound of core/limits.py) is checked here again and
reported as one `SpecError` listing every problem, so a bad generation is refused whole, before Envoy sees any of it.
"""

from __future__ import annotations

from types import MappingProxyType

from trafficsplit.core.compiled import CompiledBackend, CompiledMatch, CompiledSplit, Endpoint, Generation
from trafficsplit.core.cookie import CookieSettings, SameSite, cookie_problems, is_token
from trafficsplit.core.errors import SpecError
from trafficsplit.core.limits import (
    MAX_BACKENDS,
    MAX_ENDPOINTS,
    MAX_GENERATION,
    MAX_HOSTS,
    MAX_MATCH_NAME,
    MAX_MATCH_VALUE,
    MAX_MATCHES,
    MAX_ORIGIN,
    MAX_SPLITS,
)
from trafficsplit.core.regex import Pattern, RegexError
from trafficsplit.core.spec import MatchKind
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.bootstrap import ADS_CLUSTER, EXTPROC_CLUSTER

_KIND_TO_PB = MappingProxyType({MatchKind.HEADER: pb.Match.HEADER, MatchKind.COOKIE: pb.Match.COOKIE})
_KIND_FROM_PB = MappingProxyType({v: k for k, v in _KIND_TO_PB.items()})
# The gateway's own clusters (wire/bootstrap.py): a backend named like one would be refused by Envoy only after the
# ACK timeout, or worse, route client traffic to the processor.
RESERVED_CLUSTERS = frozenset({EXTPROC_CLUSTER, ADS_CLUSTER})


def generation_to_proto(gen: Generation, origin: str = "") -> pb.Generation:
    """The publish payload for a compiled generation (the operator's side)."""
    return pb.Generation(number=gen.number, splits=[split_to_proto(s) for s in gen.splits], origin=origin)


def split_to_proto(split: CompiledSplit, observed_generation: int = 0) -> pb.Split:
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
        observed_generation=observed_generation,
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
    """The core generation a publish carries; raises SpecError naming every problem (the dataplane's side).

    Every bound of core/limits.py is checked here, counts before items, so a hostile message is refused in time
    proportional to the limits, and nothing it carries reaches Envoy (the values check themselves again)."""
    if len(msg.splits) > MAX_SPLITS:
        raise SpecError([f"splits: {len(msg.splits)} splits, at most {MAX_SPLITS} are allowed"])
    problems: list[str] = []
    if not 1 <= msg.number <= MAX_GENERATION:
        problems.append(f"number: must be 1..{MAX_GENERATION} (2^53 - 1), got {msg.number}")
    if len(msg.origin) > MAX_ORIGIN:
        problems.append(f"origin: {len(msg.origin)} characters, at most {MAX_ORIGIN} are allowed")
    splits: list[CompiledSplit] = []
    clusters: dict[str, str] = {}
    for i, s in enumerate(msg.splits):
        path = f"splits[{i}]"
        split = _split_from_proto(s, path, problems)
        if split is None:
            continue
        for b in split.backends:
            if b.cluster in clusters:
                problems.append(f"{path}: cluster {b.cluster!r} is also used by {clusters[b.cluster]}")
            clusters[b.cluster] = split.key
        splits.append(split)
    if problems:
        raise SpecError(problems)
    return Generation(msg.number, tuple(splits))  # checks hosts served twice


def _count_problems(s: pb.Split, path: str) -> list[str]:
    """Oversized lists, found before anything is built from them."""
    p = [
        f"{path}.{name}: {len(items)} {name}, at most {limit} are allowed"
        for name, items, limit in (
            ("hosts", s.hosts, MAX_HOSTS),
            ("backends", s.backends, MAX_BACKENDS),
            ("matches", s.matches, MAX_MATCHES),
        )
        if len(items) > limit
    ]
    p.extend(
        f"{path}.backends[{j}].endpoints: {len(b.endpoints)} endpoints, at most {MAX_ENDPOINTS} are allowed"
        for j, b in enumerate(s.backends[:MAX_BACKENDS])
        if len(b.endpoints) > MAX_ENDPOINTS
    )
    return p


def _split_from_proto(s: pb.Split, path: str, problems: list[str]) -> CompiledSplit | None:
    oversized = _count_problems(s, path)
    if oversized:
        problems.extend(oversized)
        return None
    before = len(problems)
    hosts = tuple(h.lower() for h in s.hosts)
    if not hosts:
        problems.append(f"{path}.hosts: at least one host is required")
    backends: list[CompiledBackend] = []
    for j, b in enumerate(s.backends):
        bpath = f"{path}.backends[{j}]"
        if not b.cluster:
            problems.append(f"{bpath}.cluster: required")
        elif b.cluster in RESERVED_CLUSTERS:
            problems.append(f"{bpath}.cluster: {b.cluster!r} is reserved for the gateway's own clusters")
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
            problems.append(f"{mpath}.backend: {m.backend[:64]!r} is not a backend of this split")
            continue
        if len(m.name) > MAX_MATCH_NAME or not is_token(m.name):
            problems.append(f"{mpath}.name: {m.name[:64]!r} is not a valid name (a token, at most {MAX_MATCH_NAME})")
        if len(m.value) > MAX_MATCH_VALUE:
            problems.append(f"{mpath}.value: {len(m.value)} characters, at most {MAX_MATCH_VALUE} are allowed")
            continue
        kind = _KIND_FROM_PB.get(m.kind)
        if kind is None:
            problems.append(f"{mpath}.kind: unknown kind {m.kind}")
            continue
        pattern: Pattern | None = None
        if m.type == pb.Match.REGULAR_EXPRESSION:
            try:
                pattern = Pattern(m.value)
            except RegexError as exc:
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
        )
    except SpecError as exc:  # the split's own rules: names, hosts, clusters, weights, endpoints
        problems.extend(f"{path}.{p}" for p in exc.problems)
        return None


def _cookie_from_proto(c: pb.Cookie, path: str, problems: list[str]) -> CookieSettings | None:
    cookie_path = c.path or "/"
    bad = cookie_problems(c.name, cookie_path, c.domain or None)
    problems.extend(f"{path}.{field}: {message}" for field, message in bad.items())
    if c.HasField("max_age") and c.max_age < 0:
        problems.append(f"{path}.max_age: must be >= 0, got {c.max_age}")
    try:
        same_site = SameSite(c.same_site or SameSite.LAX.value)
    except ValueError:
        problems.append(f"{path}.same_site: {c.same_site[:64]!r} must be one of Strict, Lax, None")
        return None
    if bad:
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
