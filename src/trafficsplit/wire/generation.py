"""Core generation ↔ publish proto: the two directions of the publish API's payload.

The operator compiles with the core and sends `trafficsplit.v1alpha1.Generation`; the dataplane turns it back into a
core `Generation` and decides with that. A proto is never trusted, and no rule is written here: the receiver builds the
same self-checking core values the compiler builds, through the same constructors (`compiled_backends`, `CompiledSplit`,
`CompiledMatch`, `Endpoint`, `CookieSettings`, `Generation`), so it refuses what the parser refuses in the same words
(tests/unit/test_split_rules.py), and reports every problem in one `SpecError` under the proto's field paths, so a bad
generation is refused whole, before Envoy sees any of it. What is left here is the proto's shape: enums, and the bounds
checked before anything is built (counts of core/model/limits.py, the gateway's own cluster names).

A Gateway's generation also carries its route table (`GatewayRoutes`: listeners, virtual hosts, match entries, rule
actions with their filters, timeouts, retry and mirrors), rebuilt through the same core values the translation builds
(`RouteEntry`, `VirtualHost`, `ListenerRoutes`, `RuleAction`, `BackendTarget`, `HeaderModifier`, `RequestRedirect`,
`URLRewrite`, `RuleTimeouts`, `RuleRetry`, `RequestMirror`, `GatewayRoutes`); a rule names its split by key, which
must be one of the generation's (tests/unit/test_routes_both_paths.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ParamSpec, TypeVar, cast

from google.protobuf.message import Message

from trafficsplit.core.model.assignment import SLOTS, Run, SlotTable
from trafficsplit.core.model.capabilities import Capabilities, SplitRefusal
from trafficsplit.core.model.compiled import (
    CompiledMatch,
    CompiledSplit,
    Endpoint,
    MatchKind,
    MatchType,
    endpoint_count_problems,
    match_count_problems,
)
from trafficsplit.core.model.cookie import CookieSettings, SameSite
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.filters import (
    MAX_HEADER_CHANGES,
    MAX_MIRRORS,
    NO_FILTERS,
    CorsPolicy,
    HeaderModifier,
    PathModifier,
    PathModifierType,
    RedirectCode,
    RequestMirror,
    RequestRedirect,
    RuleFilters,
    Scheme,
    URLRewrite,
)
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.limits import (
    MAX_BACKENDS,
    MAX_ENDPOINTS,
    MAX_HOSTS,
    MAX_NAME,
    MAX_NAMESPACE,
    MAX_ORIGIN,
    MAX_SPLITS,
)
from trafficsplit.core.model.matches import (
    MAX_BACKEND_REFS,
    MAX_LISTENERS,
    MAX_MATCH_HEADERS,
    MAX_MATCH_QUERY_PARAMS,
    Method,
    PathType,
    RouteMatch,
    ValueMatch,
    ValueMatchType,
)
from trafficsplit.core.model.ring import DEFAULT_POINTS
from trafficsplit.core.model.routes import (
    MAX_HOST_ENTRIES,
    MAX_TABLE_ENTRIES,
    MAX_VIRTUAL_HOSTS,
    BackendTarget,
    GatewayRoutes,
    ListenerRoutes,
    RouteEntry,
    RuleAction,
    VirtualHost,
)
from trafficsplit.core.model.splitspec import BackendSpec, compiled_backends
from trafficsplit.core.model.timeouts import MAX_RETRY_CODE, MIN_RETRY_CODE, RuleRetry, RuleTimeouts
from trafficsplit.core.model.tls import CaBundle, Certificate, ClientValidation
from trafficsplit.core.model.upstream_tls import MAX_SUBJECT_ALT_NAMES, SanKind, SubjectAltName, UpstreamTls
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.reserved import RESERVED_CLUSTERS

_KIND_TO_PB = MappingProxyType({MatchKind.HEADER: pb.Match.HEADER, MatchKind.COOKIE: pb.Match.COOKIE})
_KIND_FROM_PB = MappingProxyType({v: k for k, v in _KIND_TO_PB.items()})
_TYPE_TO_PB = MappingProxyType(
    {MatchType.EXACT: pb.Match.EXACT, MatchType.REGULAR_EXPRESSION: pb.Match.REGULAR_EXPRESSION}
)
_TYPE_FROM_PB = MappingProxyType({v: k for k, v in _TYPE_TO_PB.items()})
_PATH_TO_PB = MappingProxyType(
    {
        PathType.PREFIX: pb.RouteMatch.PATH_PREFIX,
        PathType.EXACT: pb.RouteMatch.EXACT,
        PathType.REGULAR_EXPRESSION: pb.RouteMatch.REGULAR_EXPRESSION,
    }
)
_PATH_FROM_PB = MappingProxyType({v: k for k, v in _PATH_TO_PB.items()})
_VALUE_TO_PB = MappingProxyType(
    {ValueMatchType.EXACT: pb.ValueMatch.EXACT, ValueMatchType.REGULAR_EXPRESSION: pb.ValueMatch.REGULAR_EXPRESSION}
)
_VALUE_FROM_PB = MappingProxyType({v: k for k, v in _VALUE_TO_PB.items()})
_MODIFIER_TO_PB = MappingProxyType(
    {
        PathModifierType.FULL: pb.PathModifier.REPLACE_FULL_PATH,
        PathModifierType.PREFIX: pb.PathModifier.REPLACE_PREFIX_MATCH,
    }
)
_MODIFIER_FROM_PB = MappingProxyType({v: k for k, v in _MODIFIER_TO_PB.items()})
_MAX_KEY = MAX_NAMESPACE + 1 + MAX_NAME  # namespace/name
_MAX_REASON = 64
T = TypeVar("T")
M = TypeVar("M", bound=Message)
P = ParamSpec("P")


def generation_to_proto(
    gen: Generation, origin: str = "", first: Mapping[str, int] | None = None, parts: ProtoParts | None = None
) -> pb.Generation:
    """The publish payload for a numbered generation (the operator's side); the one way a generation leaves the
    operator, and `generation_from_proto` the one way back (the dataplane's receiver, the operator's seeding).
    `first`: per split key, the first generation number that carried it as it is (else 0: the generation's own).
    `parts`: the publisher's memo of the messages its last payload was built from (`ProtoParts`)."""
    parts = parts if parts is not None else ProtoParts()
    msg = pb.Generation(number=gen.number, splits=[parts.split(s) for s in gen.splits], origin=origin)
    if gen.routes is not None:
        msg.routes.CopyFrom(routes_to_proto(gen.routes, parts))
    if first:
        for m, s in zip(msg.splits, gen.splits, strict=True):
            m.first_generation = first.get(s.key, 0)
    parts.finish()
    return msg


class ProtoParts:
    """The messages of a publisher's last payload by the model objects they were built from: a split and a rule
    action by the object itself (the operator's memos hand back the same objects for what did not change), a
    virtual host by its listener, its hostname and its value. A payload built through it converts only what changed
    (issue 28: converting 1,000 rules and hosts again took ~17 ms of a one-route flip); the messages are copied into
    the payload, never handed out, so none is changed after it is kept. Each payload keeps only what it used (bounded
    by what one generation holds). One per publisher (the chart gateway's, each Gateway's)."""

    __slots__ = ("_last", "_used")

    def __init__(self) -> None:
        # id of the object (or a host's listener and name) → (the object, kept alive so its id stays its own, and
        # its message)
        self._last: dict[object, tuple[object, Message]] = {}
        self._used: dict[object, tuple[object, Message]] = {}

    def _kept(self, key: object, obj: object, build: Callable[[], M], *, by_value: bool = False) -> M:
        held = self._used.get(key) or self._last.get(key)
        if held is None or not (held[0] is obj or (by_value and held[0] == obj)):
            held = (obj, build())
        self._used[key] = held
        return cast(M, held[1])  # built by `build` for this key's kind

    def split(self, s: CompiledSplit) -> pb.Split:
        return self._kept(id(s), s, lambda: split_to_proto(s))

    def action(self, a: RuleAction) -> pb.RuleAction:
        return self._kept(id(a), a, lambda: _action_to_proto(a))

    def host(self, listener: str, vh: VirtualHost) -> pb.VirtualHost:
        # A table's hosts are new objects at each translation, their entries mostly the same ones: by value.
        return self._kept((listener, vh.hostname), vh, lambda: _host_to_proto(vh), by_value=True)

    def finish(self) -> None:
        self._last, self._used = self._used, {}


_SAN_TO_PB = {SanKind.HOSTNAME: pb.SubjectAltName.HOSTNAME, SanKind.URI: pb.SubjectAltName.URI}
_SAN_FROM_PB = {v: k for k, v in _SAN_TO_PB.items()}


def _upstream_tls_to_proto(tls: UpstreamTls | None) -> pb.UpstreamTls | None:
    if tls is None:
        return None
    return pb.UpstreamTls(
        sni=tls.sni,
        ca_pem=tls.ca.pem if tls.ca is not None else b"",
        system_ca=tls.ca is None,
        subject_alt_names=[pb.SubjectAltName(kind=_SAN_TO_PB[n.kind], value=n.value) for n in tls.subject_alt_names],
    )


def _upstream_tls_from_proto(m: pb.UpstreamTls, path: str, problems: list[str]) -> UpstreamTls | None:
    """A backend's TLS as received: the bundle checked by `CaBundle`, the names by `SubjectAltName`, the whole by
    `UpstreamTls` (its bound on the names' count first, before any is built)."""
    if len(m.subject_alt_names) > MAX_SUBJECT_ALT_NAMES:
        problems.append(
            f"{path}.subject_alt_names: {len(m.subject_alt_names)} items, at most {MAX_SUBJECT_ALT_NAMES} are allowed"
        )
        return None
    if m.system_ca == bool(m.ca_pem):
        problems.append(f"{path}: exactly one of ca_pem and system_ca is required")
        return None
    before = len(problems)
    ca = None if m.system_ca else _build(problems, f"{path}.ca_pem", CaBundle, m.ca_pem)
    names: list[SubjectAltName] = []
    for k, n in enumerate(m.subject_alt_names):
        kind = _SAN_FROM_PB.get(n.kind)
        if kind is None:
            problems.append(f"{path}.subject_alt_names[{k}].kind: unknown kind {n.kind}")
            continue
        name = _build(problems, f"{path}.subject_alt_names[{k}]", SubjectAltName, kind, n.value)
        if name is not None:
            names.append(name)
    if len(problems) > before:
        return None
    return _build(problems, path, UpstreamTls, m.sni, ca, tuple(names))


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
                endpoints=_endpoints_to_proto(b.endpoints),
                drain=b.drain,
                h2c=b.h2c,
                tls=_upstream_tls_to_proto(b.tls),
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
                type=_TYPE_TO_PB[m.type],
                value=m.value,
                backend=m.backend,
            )
        )
    return out


def routes_to_proto(routes: GatewayRoutes, parts: ProtoParts | None = None) -> pb.GatewayRoutes:
    parts = parts if parts is not None else ProtoParts()
    return pb.GatewayRoutes(
        gateway=routes.gateway,
        gateway_uid=routes.gateway_uid,
        listeners=[
            pb.ListenerRoutes(
                listener=lr.listener,
                port=lr.port,
                hostname=lr.hostname or "",
                certificate=(
                    None
                    if lr.certificate is None
                    else pb.Certificate(chain_pem=lr.certificate.chain_pem, key_pem=lr.certificate.key_pem)
                ),
                client_validation=(
                    None
                    if lr.client_validation is None
                    else pb.ClientValidation(
                        ca_pem=lr.client_validation.ca.pem, insecure_fallback=lr.client_validation.insecure_fallback
                    )
                ),
                hosts=[parts.host(lr.listener, vh) for vh in lr.hosts],
            )
            for lr in routes.listeners
        ],
        actions=[parts.action(a) for a in routes.actions],
        backend_client_certificate=(
            None
            if routes.backend_client_certificate is None
            else pb.Certificate(
                chain_pem=routes.backend_client_certificate.chain_pem,
                key_pem=routes.backend_client_certificate.key_pem,
            )
        ),
    )


def _host_to_proto(vh: VirtualHost) -> pb.VirtualHost:
    return pb.VirtualHost(
        hostname=vh.hostname,
        entries=[
            pb.RouteEntry(route=e.route, rule=e.rule, match_index=e.match_index, match=_match_to_proto(e.match))
            for e in vh.entries
        ],
    )


def _action_to_proto(a: RuleAction) -> pb.RuleAction:
    return pb.RuleAction(
        route=a.route,
        rule=a.rule,
        split=a.split.key if a.split is not None else "",
        targets=[
            pb.BackendTarget(
                backend=t.backend,
                namespace=t.namespace,
                service=t.service,
                port=t.port,
                weight=t.weight,
                filters=_filters_to_proto(t.filters),
            )
            for t in a.targets
        ],
        error_weight=a.error_weight,
        filters=_filters_to_proto(a.filters),
        timeouts=(
            None
            if a.timeouts is None
            else pb.RuleTimeouts(request_ms=a.timeouts.request, backend_request_ms=a.timeouts.backend_request)
        ),
        retry=(
            None
            if a.retry is None
            else pb.RuleRetry(attempts=a.retry.attempts, backoff_ms=a.retry.backoff, codes=list(a.retry.codes))
        ),
        mirrors=[
            pb.RequestMirror(
                namespace=m.namespace,
                service=m.service,
                port=m.port,
                numerator=m.numerator,
                denominator=m.denominator,
                endpoints=_endpoints_to_proto(m.endpoints),
                tls=_upstream_tls_to_proto(m.tls),
            )
            for m in a.mirrors
        ],
    )


def _endpoints_to_proto(endpoints: Sequence[Endpoint]) -> list[pb.Endpoint]:
    return [pb.Endpoint(address=e.address, port=e.port, ready=e.ready) for e in endpoints]


def _match_to_proto(m: RouteMatch) -> pb.RouteMatch:
    def values(items: tuple[ValueMatch, ...]) -> list[pb.ValueMatch]:
        return [pb.ValueMatch(type=_VALUE_TO_PB[v.type], name=v.name, value=v.value) for v in items]

    return pb.RouteMatch(
        path_type=_PATH_TO_PB[m.path_type],
        path=m.path,
        headers=values(m.headers),
        query_params=values(m.query_params),
        method=m.method.value if m.method is not None else "",
    )


def _filters_to_proto(f: RuleFilters) -> pb.Filters:
    def headers(m: HeaderModifier) -> pb.HeaderModifier:
        return pb.HeaderModifier(
            set=[pb.Header(name=n, value=v) for n, v in m.set],
            add=[pb.Header(name=n, value=v) for n, v in m.add],
            remove=list(m.remove),
        )

    def path(m: PathModifier | None) -> pb.PathModifier | None:
        return None if m is None else pb.PathModifier(type=_MODIFIER_TO_PB[m.type], value=m.value)

    out = pb.Filters()
    if f.request_headers is not None:
        out.request_headers.CopyFrom(headers(f.request_headers))
    if f.response_headers is not None:
        out.response_headers.CopyFrom(headers(f.response_headers))
    if f.redirect is not None:
        r = f.redirect
        out.redirect.CopyFrom(
            pb.Redirect(
                scheme=r.scheme.value if r.scheme is not None else "",
                hostname=r.hostname or "",
                path=path(r.path),
                port=r.port or 0,
                status_code=int(r.status_code),
            )
        )
    if f.rewrite is not None:
        out.rewrite.CopyFrom(pb.Rewrite(hostname=f.rewrite.hostname or "", path=path(f.rewrite.path)))
    if f.cors is not None:
        c = f.cors
        out.cors.CopyFrom(
            pb.Cors(
                allow_origins=list(c.allow_origins),
                allow_methods=list(c.allow_methods),
                allow_headers=list(c.allow_headers),
                expose_headers=list(c.expose_headers),
                allow_credentials=c.allow_credentials,
                max_age=c.max_age,
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class HeldParts:
    """The parts of a held generation by their message's bytes, for `generation_from_proto(..., known=)`: the next
    publish mostly carries them unchanged. `splits` its splits; for a Gateway's, `actions` its rules' actions and
    `hosts` its listeners' virtual hosts."""

    splits: Mapping[bytes, CompiledSplit]
    actions: Mapping[bytes, RuleAction] = field(default_factory=dict)
    hosts: Mapping[bytes, VirtualHost] = field(default_factory=dict)


def held_parts(msg: pb.Generation, gen: Generation) -> HeldParts:
    """`gen`'s parts by bytes; `gen` must be `msg`'s own conversion (as the replica holds it: a rule whose split it
    refused without its split in both)."""
    splits = {_bytes(m): s for m, s in zip(msg.splits, gen.splits, strict=True)}
    routes = gen.routes
    if routes is None or not msg.HasField("routes"):
        return HeldParts(splits)
    actions = {_bytes(m): a for m, a in zip(msg.routes.actions, routes.actions, strict=True)}
    hosts = {
        _bytes(mh): vh
        for ml, lr in zip(msg.routes.listeners, routes.listeners, strict=True)
        for mh, vh in zip(ml.hosts, lr.hosts, strict=True)
    }
    return HeldParts(splits, actions, hosts)


def _bytes(m: Message) -> bytes:
    return m.SerializeToString(deterministic=True)


def generation_from_proto(msg: pb.Generation, known: HeldParts | None = None) -> Generation:
    """The core generation a publish carries; raises SpecError naming every problem (the dataplane's side).

    Counts are checked before items, so a hostile message costs time proportional to the limits, not to its size.
    `known` (`held_parts` of the held generation): a split, a rule's action (whose split is the same object) or a
    virtual host whose bytes are a held one's is that one, already checked and built, so a publish that changes one
    split or one route among 1,000 builds one (the generation-wide checks still run on the whole), and what stays
    the same object stays cheap to compare (the publisher's builder keys virtual hosts by them)."""
    if len(msg.splits) > MAX_SPLITS:
        raise SpecError([f"splits: {len(msg.splits)} splits, at most {MAX_SPLITS} are allowed"])
    problems: list[str] = []
    if len(msg.origin) > MAX_ORIGIN:
        problems.append(f"origin: {len(msg.origin)} characters, at most {MAX_ORIGIN} are allowed")
    splits: list[CompiledSplit] = []
    for i, s in enumerate(msg.splits):
        split = known.splits.get(_bytes(s)) if known else None
        if split is None:
            split = _split_from_proto(s, f"splits[{i}]", problems)
        if split is not None:
            splits.append(split)
    routes = None
    if msg.HasField("routes") and not problems:
        routes = _routes_from_proto(msg.routes, {s.key: s for s in splits}, "routes", problems, known)
    if problems:
        raise SpecError(problems)
    try:  # checks itself: the number's range, hosts served once, clusters used once, host-less splits are rules'
        return Generation(msg.number, tuple(splits), routes)
    except SpecError as exc:
        raise SpecError(problems + list(exc.problems)) from None


def _count_problems(s: pb.Split, path: str) -> list[str]:
    """Oversized lists, found before anything is built from them."""
    p = [
        f"{path}.{name}: {len(items)} {name}, at most {limit} are allowed"
        for name, items, limit in (
            ("hosts", s.hosts, MAX_HOSTS),
            ("backends", s.backends, MAX_BACKENDS),
        )
        if len(items) > limit
    ]
    p += SpecError(match_count_problems(len(s.matches))).within(path).problems
    for j, b in enumerate(s.backends[:MAX_BACKENDS]):
        p += SpecError(endpoint_count_problems(len(b.endpoints))).within(f"{path}.backends[{j}]").problems
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
    backends: list[BackendSpec] = []
    for j, b in enumerate(s.backends):
        endpoints = [
            _build(
                problems,
                f"{path}.backends[{j}].endpoints[{k}]",
                Endpoint,
                address=e.address,
                port=e.port,
                ready=e.ready,
            )
            for k, e in enumerate(b.endpoints)
        ]
        backends.append(
            BackendSpec(
                name=b.name,
                weight=b.weight,
                service=b.service,
                port=b.port,
                endpoints=tuple(e for e in endpoints if e is not None),
                drain=b.drain,
                h2c=b.h2c,
                tls=_upstream_tls_from_proto(b.tls, f"{path}.backends[{j}].tls", problems)
                if b.HasField("tls")
                else None,
            )
        )
    cookie = _cookie_from_proto(s.cookie, f"{path}.cookie", problems) if s.HasField("cookie") else None
    matches: list[CompiledMatch] = []
    for j, m in enumerate(s.matches):
        mpath = f"{path}.matches[{j}]"
        kind = _KIND_FROM_PB.get(m.kind)
        mtype = _TYPE_FROM_PB.get(m.type)
        if kind is None:
            problems.append(f"{mpath}.kind: unknown kind {m.kind}")
        elif mtype is None:
            problems.append(f"{mpath}.type: unknown type {m.type}")
        else:
            name = m.name.lower() if kind is MatchKind.HEADER else m.name
            match = _build(
                problems, mpath, CompiledMatch, kind=kind, name=name, type=mtype, value=m.value, backend=m.backend
            )
            if match is not None:
                matches.append(match)
    table = _table_from_proto(s, f"{path}.assignment", problems) if s.HasField("assignment") else None
    compiled = _build(problems, path, compiled_backends, backends, [b.cluster for b in s.backends])
    if len(problems) > before or compiled is None:
        return None
    return _build(
        problems,
        path,
        CompiledSplit,
        namespace=s.namespace,
        name=s.name,
        hosts=tuple(h.lower() for h in s.hosts),
        backends=compiled,
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


def _route_count_problems(r: pb.GatewayRoutes, path: str) -> list[str]:
    """The table's oversized lists, found before anything is built from them (as `_count_problems` for a split)."""
    p: list[str] = []
    if len(r.listeners) > MAX_LISTENERS:
        p.append(f"{path}.listeners: {len(r.listeners)} listeners, at most {MAX_LISTENERS} are allowed")
    if len(r.actions) > MAX_SPLITS:
        p.append(f"{path}.actions: {len(r.actions)} actions, at most {MAX_SPLITS} are allowed")
    if p:
        return p
    total = 0
    for i, lr in enumerate(r.listeners):
        if len(lr.hosts) > MAX_VIRTUAL_HOSTS:
            p.append(f"{path}.listeners[{i}].hosts: {len(lr.hosts)} hosts, at most {MAX_VIRTUAL_HOSTS} are allowed")
            continue
        for j, vh in enumerate(lr.hosts):
            total += len(vh.entries)
            if len(vh.entries) > MAX_HOST_ENTRIES:
                p.append(
                    f"{path}.listeners[{i}].hosts[{j}].entries: {len(vh.entries)} entries, at most {MAX_HOST_ENTRIES} "
                    "are allowed"
                )
                continue
            for k, e in enumerate(vh.entries):
                for name, items, limit in (
                    ("headers", e.match.headers, MAX_MATCH_HEADERS),
                    ("query_params", e.match.query_params, MAX_MATCH_QUERY_PARAMS),
                ):
                    if len(items) > limit:
                        p.append(
                            f"{path}.listeners[{i}].hosts[{j}].entries[{k}].match.{name}: {len(items)} {name}, at "
                            f"most {limit} are allowed"
                        )
    if total > MAX_TABLE_ENTRIES:
        p.append(f"{path}.listeners: {total} entries, at most {MAX_TABLE_ENTRIES} are allowed")
    for i, a in enumerate(r.actions):
        if len(a.targets) > MAX_BACKEND_REFS:
            p.append(f"{path}.actions[{i}].targets: {len(a.targets)} targets, at most {MAX_BACKEND_REFS} are allowed")
        # The rule's filters, then each target's (-1: the rule's); paths are built only for a problem.
        for j, f in enumerate((a.filters, *(t.filters for t in a.targets[:MAX_BACKEND_REFS])), start=-1):
            for name, m in (("request_headers", f.request_headers), ("response_headers", f.response_headers)):
                for lst, count in (("set", len(m.set)), ("add", len(m.add)), ("remove", len(m.remove))):
                    if count > MAX_HEADER_CHANGES:
                        where = f"{path}.actions[{i}]" + ("" if j < 0 else f".targets[{j}]")
                        p.append(
                            f"{where}.filters.{name}.{lst}: {count} headers, at most {MAX_HEADER_CHANGES} are allowed"
                        )
    return p


def _routes_from_proto(
    r: pb.GatewayRoutes, splits: Mapping[str, CompiledSplit], path: str, problems: list[str], known: HeldParts | None
) -> GatewayRoutes | None:
    refused = _route_count_problems(r, path)
    if refused:
        problems.extend(refused)
        return None
    before = len(problems)
    listeners: list[ListenerRoutes] = []
    for i, lr in enumerate(r.listeners):
        lpath = f"{path}.listeners[{i}]"
        hosts: list[VirtualHost] = []
        for j, vh in enumerate(lr.hosts):
            if known is not None and (host := known.hosts.get(_bytes(vh))) is not None:
                hosts.append(host)
                continue
            hpath = f"{lpath}.hosts[{j}]"
            entries = [_entry_from_proto(e, f"{hpath}.entries[{k}]", problems) for k, e in enumerate(vh.entries)]
            host = _build(problems, hpath, VirtualHost, vh.hostname, tuple(e for e in entries if e is not None))
            if host is not None:
                hosts.append(host)
        certificate = None
        if lr.HasField("certificate"):
            c = lr.certificate
            certificate = _build(problems, f"{lpath}.certificate", Certificate, c.chain_pem, c.key_pem)
            if certificate is None:
                continue
        validation = None
        if lr.HasField("client_validation"):
            cv = lr.client_validation
            ca = _build(problems, f"{lpath}.client_validation", CaBundle, cv.ca_pem)
            if ca is None:
                continue
            validation = ClientValidation(ca, cv.insecure_fallback)
        listener = _build(
            problems,
            lpath,
            ListenerRoutes,
            r.gateway,
            lr.listener,
            lr.port,
            tuple(hosts),
            hostname=lr.hostname or None,
            certificate=certificate,
            client_validation=validation,
        )
        if listener is not None:
            listeners.append(listener)
    actions: list[RuleAction] = []
    for i, a in enumerate(r.actions):
        apath = f"{path}.actions[{i}]"
        split = None
        if a.split:
            split = splits.get(a.split)
            if split is None:
                problems.append(f"{apath}.split: {a.split[:_MAX_KEY]!r} is not a split of this generation")
                continue
        if known is not None and (action := known.actions.get(_bytes(a))) is not None and action.split is split:
            actions.append(action)
            continue
        targets = [
            _build(
                problems,
                f"{apath}.targets[{j}]",
                BackendTarget,
                backend=t.backend,
                namespace=t.namespace,
                service=t.service,
                port=t.port,
                weight=t.weight,
                filters=_filters_from_proto(t.filters, f"{apath}.targets[{j}].filters", problems),
            )
            for j, t in enumerate(a.targets)
        ]
        action = _build(
            problems,
            apath,
            RuleAction,
            route=a.route,
            rule=a.rule,
            split=split,
            targets=tuple(t for t in targets if t is not None),
            error_weight=a.error_weight,
            filters=_filters_from_proto(a.filters, f"{apath}.filters", problems),
            timeouts=_timeouts_from_proto(a, f"{apath}.timeouts", problems),
            retry=_retry_from_proto(a, f"{apath}.retry", problems),
            mirrors=_mirrors_from_proto(a, f"{apath}.mirrors", problems),
        )
        if action is not None:
            actions.append(action)
    client = None
    if r.HasField("backend_client_certificate"):
        c = r.backend_client_certificate
        client = _build(problems, f"{path}.backend_client_certificate", Certificate, c.chain_pem, c.key_pem)
    if len(problems) > before:
        return None
    return _build(
        problems,
        path,
        GatewayRoutes,
        gateway=r.gateway,
        gateway_uid=r.gateway_uid,
        listeners=tuple(listeners),
        actions=tuple(actions),
        backend_client_certificate=client,
    )


def _timeouts_from_proto(a: pb.RuleAction, path: str, problems: list[str]) -> RuleTimeouts | None:
    if not a.HasField("timeouts"):
        return None
    t = a.timeouts
    request = t.request_ms if t.HasField("request_ms") else None
    backend = t.backend_request_ms if t.HasField("backend_request_ms") else None
    return _build(problems, path, RuleTimeouts, request=request, backend_request=backend)


def _retry_from_proto(a: pb.RuleAction, path: str, problems: list[str]) -> RuleRetry | None:
    if not a.HasField("retry"):
        return None
    r = a.retry
    if len(r.codes) > MAX_RETRY_CODE - MIN_RETRY_CODE + 1:  # more than distinct codes there are: refused unread
        problems.append(f"{path}.codes: {len(r.codes)} codes, at most {MAX_RETRY_CODE - MIN_RETRY_CODE + 1}")
        return None
    return _build(
        problems,
        path,
        RuleRetry,
        attempts=r.attempts if r.HasField("attempts") else None,
        backoff=r.backoff_ms if r.HasField("backoff_ms") else None,
        codes=tuple(r.codes),
    )


def _mirrors_from_proto(a: pb.RuleAction, path: str, problems: list[str]) -> tuple[RequestMirror, ...]:
    if len(a.mirrors) > MAX_MIRRORS:
        problems.append(f"{path}: {len(a.mirrors)} mirrors, at most {MAX_MIRRORS} are allowed")
        return ()
    out = []
    for i, m in enumerate(a.mirrors):
        if len(m.endpoints) > MAX_ENDPOINTS:
            problems.append(f"{path}[{i}].endpoints: {len(m.endpoints)} endpoints, at most {MAX_ENDPOINTS} are allowed")
            continue
        eps = [
            _build(problems, f"{path}[{i}].endpoints[{j}]", Endpoint, e.address, e.port, e.ready)
            for j, e in enumerate(m.endpoints)
        ]
        tls = _upstream_tls_from_proto(m.tls, f"{path}[{i}].tls", problems) if m.HasField("tls") else None
        if m.HasField("tls") and tls is None:
            continue
        mirror = _build(
            problems,
            f"{path}[{i}]",
            RequestMirror,
            namespace=m.namespace,
            service=m.service,
            port=m.port,
            numerator=m.numerator,
            denominator=m.denominator,
            endpoints=tuple(e for e in eps if e is not None),
            tls=tls,
        )
        if mirror is not None:
            out.append(mirror)
    return tuple(out)


def _entry_from_proto(e: pb.RouteEntry, path: str, problems: list[str]) -> RouteEntry | None:
    m = e.match
    path_type = _PATH_FROM_PB.get(m.path_type)
    if path_type is None:
        problems.append(f"{path}.match.path_type: unknown type {m.path_type}")
        return None
    method = None
    if m.method:
        try:
            method = Method(m.method)
        except ValueError:
            problems.append(f"{path}.match.method: {m.method[:16]!r} is not an HTTP method the API allows")
            return None
    values: dict[str, list[ValueMatch]] = {"headers": [], "query_params": []}
    for name, items in (("headers", m.headers), ("query_params", m.query_params)):
        for k, v in enumerate(items):
            type_ = _VALUE_FROM_PB.get(v.type)
            if type_ is None:
                problems.append(f"{path}.match.{name}[{k}].type: unknown type {v.type}")
                return None
            values[name].append(ValueMatch(type_, v.name, v.value))
    match = RouteMatch(
        path_type=path_type,
        path=m.path,
        headers=tuple(values["headers"]),
        query_params=tuple(values["query_params"]),
        method=method,
    )
    return _build(problems, path, RouteEntry, e.route, e.rule, e.match_index, match)


def _path_modifier_from_proto(m: pb.PathModifier, path: str, problems: list[str]) -> PathModifier | None:
    type_ = _MODIFIER_FROM_PB.get(m.type)
    if type_ is None:
        problems.append(f"{path}.type: unknown type {m.type}")
        return None
    return _build(problems, path, PathModifier, type_, m.value)


def _filters_from_proto(f: pb.Filters, path: str, problems: list[str]) -> RuleFilters:
    """The filters a proto carries; NO_FILTERS with the problems recorded when any part is refused (the caller's
    value is then refused too, as `problems` grew)."""
    before = len(problems)

    def headers(m: pb.HeaderModifier, name: str, request: bool) -> HeaderModifier | None:
        return _build(
            problems,
            f"{path}.{name}",
            HeaderModifier,
            set=tuple((h.name, h.value) for h in m.set),
            add=tuple((h.name, h.value) for h in m.add),
            remove=tuple(m.remove),
            request=request,
        )

    request = headers(f.request_headers, "request_headers", True) if f.HasField("request_headers") else None
    response = headers(f.response_headers, "response_headers", False) if f.HasField("response_headers") else None
    redirect = None
    if f.HasField("redirect"):
        r, rpath = f.redirect, f"{path}.redirect"
        scheme = None
        if r.scheme:
            try:
                scheme = Scheme(r.scheme)
            except ValueError:
                problems.append(f"{rpath}.scheme: {r.scheme[:16]!r} must be http or https")
        try:
            code = RedirectCode(r.status_code or RedirectCode.FOUND)
        except ValueError:
            problems.append(f"{rpath}.status_code: {r.status_code} must be one of 301, 302, 303, 307, 308")
            code = RedirectCode.FOUND
        redirect = _build(
            problems,
            rpath,
            RequestRedirect,
            scheme=scheme,
            hostname=r.hostname or None,
            path=_path_modifier_from_proto(r.path, f"{rpath}.path", problems) if r.HasField("path") else None,
            port=r.port or None,
            status_code=code,
        )
    rewrite = None
    if f.HasField("rewrite"):
        w, wpath = f.rewrite, f"{path}.rewrite"
        rewrite = _build(
            problems,
            wpath,
            URLRewrite,
            hostname=w.hostname or None,
            path=_path_modifier_from_proto(w.path, f"{wpath}.path", problems) if w.HasField("path") else None,
        )
    cors = None
    if f.HasField("cors"):
        c = f.cors
        cors = _build(
            problems,
            f"{path}.cors",
            CorsPolicy,
            allow_origins=tuple(c.allow_origins),
            allow_methods=tuple(c.allow_methods),
            allow_headers=tuple(c.allow_headers),
            expose_headers=tuple(c.expose_headers),
            allow_credentials=c.allow_credentials,
            max_age=c.max_age,
        )
    if len(problems) > before:
        return NO_FILTERS
    out = _build(
        problems,
        path,
        RuleFilters,
        request_headers=request,
        response_headers=response,
        redirect=redirect,
        rewrite=rewrite,
        cors=cors,
    )
    return NO_FILTERS if out is None else out


def capabilities_from_proto(c: pb.Capabilities) -> Capabilities:
    return Capabilities(cookie_keys=c.cookie_keys)


def refusals_from_proto(items: Sequence[pb.SplitRefusal]) -> tuple[SplitRefusal, ...]:
    """A replica's per-split refusals as the operator keeps them: bounded in count (a generation's splits) and in each
    field, so a misbehaving replica cannot grow the operator's memory or a status message."""
    return tuple(SplitRefusal(r.split[:_MAX_KEY], r.reason[:_MAX_REASON], r.message) for r in list(items)[:MAX_SPLITS])
