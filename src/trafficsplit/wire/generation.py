"""Core generation ↔ publish proto: the two directions of the publish API's payload.

The operator compiles with the core and sends `trafficsplit.v1alpha1.Generation`; the dataplane turns it back into a
core `Generation` and decides with that. A proto is never trusted, and no rule is written here: the receiver builds the
same self-checking core values the parser builds (`CompiledSplit`, `CompiledBackend`, `CompiledMatch`, `Endpoint`,
`CookieSettings`, `Generation`), so it refuses what the parser refuses (tests/unit/test_rules_both_paths.py), and
reports every problem in one `SpecError` under the proto's field paths, so a bad generation is refused whole, before
Envoy sees any of it. What is left here is the proto's shape: enums, the match → backend reference, and the bounds
checked before anything is built (counts of core/limits.py, the gateway's own cluster names).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import ParamSpec, TypeVar

from trafficsplit.core.assignment import SLOTS, Run, SlotTable
from trafficsplit.core.capabilities import Capabilities, SplitRefusal
from trafficsplit.core.compiled import CompiledBackend, CompiledMatch, CompiledSplit, Endpoint, Generation
from trafficsplit.core.cookie import CookieSettings, SameSite
from trafficsplit.core.errors import SpecError
from trafficsplit.core.limits import (
    MAX_BACKENDS,
    MAX_ENDPOINTS,
    MAX_HOSTS,
    MAX_MATCHES,
    MAX_NAME,
    MAX_NAMESPACE,
    MAX_ORIGIN,
    MAX_SPLITS,
)
from trafficsplit.core.ring import DEFAULT_POINTS
from trafficsplit.core.rules import compile_pattern
from trafficsplit.core.spec import MatchKind
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.reserved import RESERVED_CLUSTERS

_KIND_TO_PB = MappingProxyType({MatchKind.HEADER: pb.Match.HEADER, MatchKind.COOKIE: pb.Match.COOKIE})
_KIND_FROM_PB = MappingProxyType({v: k for k, v in _KIND_TO_PB.items()})
_MAX_KEY = MAX_NAMESPACE + 1 + MAX_NAME  # namespace/name
_MAX_REASON = 64
T = TypeVar("T")
P = ParamSpec("P")


def generation_to_proto(gen: Generation, origin: str = "", first: Mapping[str, int] | None = None) -> pb.Generation:
    """The publish payload for a numbered generation (the operator's side); the one way a generation leaves the
    operator, and `generation_from_proto` the one way back (the dataplane's receiver, the operator's seeding).
    `first`: per split key, the first generation number that carried it as it is (else 0: the generation's own)."""
    msg = pb.Generation(number=gen.number, splits=[split_to_proto(s) for s in gen.splits], origin=origin)
    if first:
        for m, s in zip(msg.splits, gen.splits, strict=True):
            m.first_generation = first.get(s.key, 0)
    return msg


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
                drain=b.drain,
            )
            for b in split.backends
        ],
        endpoint_affinity=split.endpoint_affinity,
        endpoint_points=split.endpoint_points,
        debug_headers=split.debug_headers,
        observed_generation=split.observed_generation,
        key_header=split.key_header or "",
        persistent=split.persistent,
        first_generation=split.first_generation,
    )
    if split.table is not None:
        out.assignment.CopyFrom(
            pb.Assignment(
                slots=SLOTS, owners=[r.owner for r in split.table.runs], lengths=[r.length for r in split.table.runs]
            )
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
                partitioned=c.partitioned,
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


def split_index(msg: pb.Generation, gen: Generation) -> dict[bytes, CompiledSplit]:
    """Each split of a generation by its message's bytes, for `generation_from_proto(..., known=)`: the held
    generation's splits, which the next publish mostly carries unchanged. `gen` must be `msg`'s own conversion."""
    return {m.SerializeToString(deterministic=True): s for m, s in zip(msg.splits, gen.splits, strict=True)}


def generation_from_proto(msg: pb.Generation, known: Mapping[bytes, CompiledSplit] | None = None) -> Generation:
    """The core generation a publish carries; raises SpecError naming every problem (the dataplane's side).

    Counts are checked before items, so a hostile message costs time proportional to the limits, not to its size.
    `known` (`split_index` of the held generation): a split whose bytes are a held split's is that split, already
    checked and compiled, so a publish that changes one split among 1,000 compiles one (the generation-wide checks
    still run on the whole)."""
    if len(msg.splits) > MAX_SPLITS:
        raise SpecError([f"splits: {len(msg.splits)} splits, at most {MAX_SPLITS} are allowed"])
    problems: list[str] = []
    if len(msg.origin) > MAX_ORIGIN:
        problems.append(f"origin: {len(msg.origin)} characters, at most {MAX_ORIGIN} are allowed")
    splits: list[CompiledSplit] = []
    for i, s in enumerate(msg.splits):
        split = known.get(s.SerializeToString(deterministic=True)) if known else None
        if split is None:
            split = _split_from_proto(s, f"splits[{i}]", problems)
        if split is not None:
            splits.append(split)
    if problems:
        raise SpecError(problems)
    try:  # checks itself: the number's range, hosts served once, clusters used once
        return Generation(msg.number, tuple(splits))
    except SpecError as exc:
        raise SpecError(problems + list(exc.problems)) from None


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
    p.extend(
        f"{path}.backends[{j}].cluster: {b.cluster!r} is reserved for the gateway's own clusters"
        for j, b in enumerate(s.backends[:MAX_BACKENDS])
        if b.cluster in RESERVED_CLUSTERS
    )
    return p


def _build(problems: list[str], at: str, make: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T | None:
    """`make(*args, **kwargs)`, a value that checks itself, or None with its problems recorded under path `at`
    (typed by `make`'s own signature, so a construction here is checked like any other)."""
    try:
        return make(*args, **kwargs)
    except SpecError as exc:
        problems.extend(exc.within(at).problems)
        return None


def _split_from_proto(s: pb.Split, path: str, problems: list[str]) -> CompiledSplit | None:
    refused = _count_problems(s, path)
    if refused:
        problems.extend(refused)
        return None
    before = len(problems)
    backends: list[CompiledBackend] = []
    for j, b in enumerate(s.backends):
        bpath = f"{path}.backends[{j}]"
        endpoints = [
            _build(problems, f"{bpath}.endpoints[{k}]", Endpoint, address=e.address, port=e.port, ready=e.ready)
            for k, e in enumerate(b.endpoints)
        ]
        backend = _build(
            problems,
            bpath,
            CompiledBackend,
            name=b.name,
            weight=b.weight,
            cluster=b.cluster,
            service=b.service,
            port=b.port,
            endpoints=tuple(e for e in endpoints if e is not None),
            drain=b.drain,
        )
        if backend is not None:
            backends.append(backend)
    cookie = _cookie_from_proto(s.cookie, f"{path}.cookie", problems) if s.HasField("cookie") else None
    index = {b.name: j for j, b in enumerate(s.backends)}
    matches: list[CompiledMatch] = []
    for j, m in enumerate(s.matches):
        mpath = f"{path}.matches[{j}]"
        kind = _KIND_FROM_PB.get(m.kind)
        if m.backend not in index:
            problems.append(f"{mpath}.backend: {m.backend!r} is not a backend of this split")
        elif kind is None:
            problems.append(f"{mpath}.kind: unknown kind {m.kind}")
        elif m.type not in (pb.Match.EXACT, pb.Match.REGULAR_EXPRESSION):
            problems.append(f"{mpath}.type: unknown type {m.type}")
        else:
            regex = m.type == pb.Match.REGULAR_EXPRESSION
            pattern = _build(problems, mpath, compile_pattern, m.value) if regex else None
            if regex and pattern is None:
                continue  # the pattern's problem is recorded
            match = _build(
                problems,
                mpath,
                CompiledMatch,
                kind=kind,
                name=m.name.lower() if kind is MatchKind.HEADER else m.name,
                exact=None if regex else m.value,
                pattern=pattern,
                backend_index=index[m.backend],
            )
            if match is not None:
                matches.append(match)
    table = _table_from_proto(s, f"{path}.assignment", problems) if s.HasField("assignment") else None
    if len(problems) > before:
        return None
    return _build(
        problems,
        path,
        CompiledSplit,
        namespace=s.namespace,
        name=s.name,
        hosts=tuple(h.lower() for h in s.hosts),
        backends=tuple(backends),
        cookie=cookie,
        endpoint_affinity=s.endpoint_affinity,
        matches=tuple(matches),
        debug_headers=s.debug_headers,
        observed_generation=s.observed_generation,
        endpoint_points=s.endpoint_points or DEFAULT_POINTS,
        key_header=s.key_header or None,
        table=table,
        persistent=s.persistent,
        first_generation=s.first_generation,
    )


def _table_from_proto(s: pb.Split, path: str, problems: list[str]) -> SlotTable | None:
    a = s.assignment
    if a.slots != SLOTS:
        problems.append(f"{path}.slots: {a.slots} slots, this dataplane uses {SLOTS}")
        return None
    if len(a.owners) != len(a.lengths) or len(a.owners) > SLOTS:
        problems.append(f"{path}: {len(a.owners)} owners and {len(a.lengths)} lengths (at most {SLOTS} runs)")
        return None
    names = tuple(b.name for b in s.backends)
    runs = tuple(Run(o, n) for o, n in zip(a.owners, a.lengths, strict=True))
    return _build(problems, path, SlotTable, names, runs)


def _cookie_from_proto(c: pb.Cookie, path: str, problems: list[str]) -> CookieSettings | None:
    try:
        same_site = SameSite(c.same_site or SameSite.LAX.value)
    except ValueError:
        problems.append(f"{path}.same_site: {c.same_site!r} must be one of Strict, Lax, None")
        return None
    return _build(
        problems,
        path,
        CookieSettings,
        name=c.name,
        path=c.path or "/",
        max_age=c.max_age if c.HasField("max_age") else None,
        domain=c.domain or None,
        secure=c.secure,
        http_only=c.http_only,
        same_site=same_site,
        partitioned=c.partitioned,
    )


def capabilities_from_proto(c: pb.Capabilities) -> Capabilities:
    return Capabilities(cookie_keys=c.cookie_keys)


def refusals_from_proto(items: Sequence[pb.SplitRefusal]) -> tuple[SplitRefusal, ...]:
    """A replica's per-split refusals as the operator keeps them: bounded in count (a generation's splits) and in each
    field, so a misbehaving replica cannot grow the operator's memory or a status message."""
    return tuple(SplitRefusal(r.split[:_MAX_KEY], r.reason[:_MAX_REASON], r.message) for r in list(items)[:MAX_SPLITS])
