"""A Gateway data plane's route table as native Envoy routes: Envoy routes, the processor picks.

One RouteConfiguration per Gateway listener port (`route_config_name`: what that port's Envoy listener asks RDS for),
its virtual hosts the port's (`GatewayRoutes.ports`, the spec's listener precedence already applied): an exact name,
Envoy's `*.` suffix wildcard, or `*`. Each virtual host holds its entries' routes in the model's precedence order
(first match wins in Envoy as in `decide.match.RouteTable`), then a 404 for a request no rule matches. Matches are
Envoy's own: Exact `path`, PathPrefix as `path_separated_prefix` (whole segments: `/foo` takes `/foo` and `/foo/bar`,
never `/foobar`), RegularExpression as `safe_regex`, headers, query parameters, and the method as `:method`.

What each rule's entry becomes (`RuleAction`):
- a RequestRedirect: Envoy's `redirect` (the spec's port rule resolved here from the listener port);
- no backend (`split` None): a 500 direct response;
- one backend that can be picked and no session, no 500 share (`needs_processor` false): a plain `cluster` route with
  ext_proc disabled on it, so the request never reaches Python;
- otherwise the processor picks: first one `decided` route per backend cluster of the rule (the same match and the
  routing header naming that cluster, with that backend's filters), reached after the processor set the header and
  cleared the route cache; then the rule's fallback routes, where the processor is called (ext_proc stays on, and
  the route's name tells it which rule: `rule_of`) and where Envoy stays when nothing decided (processor down, late
  or without a generation): `weighted_clusters` with the rule's weights and, with a session cookie, a hash policy on
  it (as a TrafficSplit's fallback: `envoy.fallback_routes`). The fallback cannot answer 500 for the share of
  backendRefs that do not resolve: it serves that share from the rule's backends in their ratio (docs/gateway-api.md).

Route names carry the entry (`<kind>:<namespace>/<route>.rule-<i>:<match index>`, a decided one `:<backend>` too), so
the access log's `route` says which rule Envoy chose and which path decided. Filters are native: Request/Response
HeaderModifier at the rule (route level) and the backendRef (the weighted cluster's, or merged on the route of one
cluster, rule first: the most specific wins, as the processor applied them), URLRewrite as Envoy Gateway does it
(`host_rewrite_literal`; ReplaceFullPath a `regex_rewrite` of the whole path; ReplacePrefixMatch a `prefix_rewrite`,
or a `regex_rewrite` where the replacement or the prefix is `/`, which `prefix_rewrite` would double).

A rule's timeouts, retry and mirrors are native on every route of it that reaches a backend (`rule_policies`):
`timeouts.request` the route's `timeout` (0: none, as the spec says and Envoy reads it), `backendRequest` the retry
policy's `per_try_timeout`; `retry.attempts` its `num_retries`, `codes` its `retriable_status_codes`, `backoff` its
back-off's base interval (on top of the connect-failure retry every backend route has); each RequestMirror a
`request_mirror_policies` entry to the mirror's cluster (`envoy.mirror_clusters`) with its fraction. A rule's CORS
filter is Envoy's CORS policy on each of its routes (`cors_policy`), read by the listener's CORS filter, which runs
before ext_proc: a preflight is answered without the processor.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.http.cors.v3 import cors_pb2
from envoy.type.matcher.v3 import regex_pb2, string_pb2
from envoy.type.v3 import percent_pb2
from google.protobuf import any_pb2, wrappers_pb2
from google.protobuf.internal.containers import RepeatedCompositeFieldContainer, RepeatedScalarFieldContainer

from trafficsplit.core.decide import disclosure
from trafficsplit.core.decide.serve import HeaderEdits, merged_edits
from trafficsplit.core.model.compiled import CompiledBackend, CompiledSplit
from trafficsplit.core.model.cookie import cookie_present_regex
from trafficsplit.core.model.filters import (
    CORS_WILDCARD,
    CorsPolicy,
    HeaderModifier,
    PathModifier,
    PathModifierType,
    RedirectCode,
    RequestRedirect,
    RuleFilters,
    Scheme,
    cors_origin_regex,
)
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.matches import PathType, RouteMatch, ValueMatch, ValueMatchType
from trafficsplit.core.model.routes import CATCH_ALL, GatewayRoutes, RouteEntry, RuleAction, RuleKey, VirtualHost
from trafficsplit.wire import envoy

ROUTE_CONFIG_PREFIX = "trafficsplit_"
NO_ROUTE_BODY = "no route matches this request\n"
NO_BACKEND_BODY = "no backend can serve this route\n"

# Route kinds, the first part of a route's name.
NATIVE = "native"  # one backend, Envoy alone
REDIRECT = "redirect"
NO_BACKEND = "no-backend"
DECIDED = "decided"  # the processor's pick, by the routing header
FALLBACK = "fallback"  # where the processor is called; Envoy's weights when it did not decide
FALLBACK_COOKIE = "fallback-cookie"
NO_ROUTE = "no-route"
_PROCESSOR_KINDS = frozenset({FALLBACK, FALLBACK_COOKIE})

_REDIRECT_CODES = {
    RedirectCode.MOVED_PERMANENTLY: rc.RedirectAction.MOVED_PERMANENTLY,
    RedirectCode.FOUND: rc.RedirectAction.FOUND,
    RedirectCode.SEE_OTHER: rc.RedirectAction.SEE_OTHER,
    RedirectCode.TEMPORARY_REDIRECT: rc.RedirectAction.TEMPORARY_REDIRECT,
    RedirectCode.PERMANENT_REDIRECT: rc.RedirectAction.PERMANENT_REDIRECT,
}
_WELL_KNOWN_PORT = {Scheme.HTTP: 80, Scheme.HTTPS: 443}

_HV = base_pb2.HeaderValue
_HVO = base_pb2.HeaderValueOption


# What a rule's retry stanza adds to every backend route's retry conditions (rule_policies).
RETRY_ON_WITH_STANZA = "reset"


def route_config_name(port: int) -> str:
    """The RDS name of the routes of Gateway listener port `port`."""
    return f"{ROUTE_CONFIG_PREFIX}{port}"


def route_name(kind: str, entry: RouteEntry, backend: str | None = None) -> str:
    name = f"{kind}:{entry.rule_key}:{entry.match_index}"
    return name if backend is None else f"{name}:{backend}"


def rule_of(name: str) -> RuleKey | None:
    """The rule whose pick the route named `name` asks the processor for (Envoy sends the route's name: ext_proc's
    `xds.route_name` attribute, configuration, never a client byte); None for a route that asks for none."""
    kind, _, rest = name.partition(":")
    if kind not in _PROCESSOR_KINDS:
        return None
    key, sep, index = rest.rpartition(":")
    if not sep or not index.isdigit():
        return None
    return RuleKey.parse(key)


def needs_processor(action: RuleAction) -> bool:
    """Whether the rule's requests need the processor's pick: several backends it can pick, a 500 share, or a session
    (a cookie or key header, persistent sessions, a pod on the ring)."""
    s = action.split
    if s is None:
        return False
    pickable = [b for b in s.backends if b.weight > 0]
    return len(pickable) > 1 or action.error_weight > 0 or s.sticky or s.persistent or s.endpoint_affinity


def _extproc_off() -> dict[str, any_pb2.Any]:
    """ext_proc off on a route by the generic `FilterConfig.disabled`, not `ExtProcPerRoute.disabled`: with the
    generic flag Envoy does not create the filter for the request at all (route-based filter chain), where the
    filter's own flag creates it and has it pass each request on (bench_gateway_routes.py measured that filter as the
    biggest cost of a one-backend route)."""
    off = any_pb2.Any()
    off.Pack(rc.FilterConfig(disabled=True))
    return {envoy.EXTPROC_FILTER: off}


def _string(m: ValueMatch) -> string_pb2.StringMatcher:
    if m.type is ValueMatchType.REGULAR_EXPRESSION:
        return string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=m.value))
    return string_pb2.StringMatcher(exact=m.value)


def route_match(m: RouteMatch) -> rc.RouteMatch:
    """A Gateway API match as Envoy's (docs: the module docstring)."""
    out = rc.RouteMatch()
    if m.path_type is PathType.EXACT:
        out.path = m.path
    elif m.path_type is PathType.PREFIX:
        prefix = m.path.rstrip("/")
        if prefix:
            out.path_separated_prefix = prefix
        else:
            out.prefix = "/"
    else:
        out.safe_regex.regex = m.path
    out.headers.extend(rc.HeaderMatcher(name=h.name, string_match=_string(h)) for h in m.headers)
    out.query_parameters.extend(rc.QueryParameterMatcher(name=q.name, string_match=_string(q)) for q in m.query_params)
    if m.method is not None:
        out.headers.append(
            rc.HeaderMatcher(name=":method", string_match=string_pb2.StringMatcher(exact=m.method.value))
        )
    return out


def _routing_header_is(match: rc.RouteMatch, cluster: str) -> rc.RouteMatch:
    out = rc.RouteMatch()
    out.CopyFrom(match)
    out.headers.append(
        rc.HeaderMatcher(name=envoy.ROUTING_HEADER, string_match=string_pb2.StringMatcher(exact=cluster))
    )
    return out


def _prefix_of(m: RouteMatch) -> str:
    return m.path.rstrip("/") if m.path_type is PathType.PREFIX else ""


def _prefix_rewrite(modifier: PathModifier, m: RouteMatch) -> str | regex_pb2.RegexMatchAndSubstitute:
    """A ReplacePrefixMatch of a rule whose entry is `m` (a PathPrefix) as Envoy applies it: a `prefix_rewrite`, or a
    `regex_rewrite` where a `prefix_rewrite` would double or drop a slash (`model.filters.rewrite_path` says what it
    must give)."""
    prefix = _prefix_of(m)
    replacement = modifier.value.rstrip("/")
    if not replacement:  # `/` or empty: the matched segments and the slashes after them become one `/`
        return regex_pb2.RegexMatchAndSubstitute(
            pattern=regex_pb2.RegexMatcher(regex="^" + re.escape(prefix) + r"/*"), substitution="/"
        )
    if not prefix:  # PathPrefix `/`: every path keeps its own, after the replacement
        return regex_pb2.RegexMatchAndSubstitute(
            pattern=regex_pb2.RegexMatcher(regex="^/"), substitution=replacement + "/"
        )
    return replacement


def _redirect(r: RequestRedirect, m: RouteMatch, listener_port: int, https: bool) -> rc.RedirectAction:
    """Envoy's redirect with the spec's port rule (`model.filters.redirect_location`): the filter's port, else the
    well-known port of the scheme it sets, else the listener's. Named in `port_redirect` unless it is the well-known
    port of the Location's scheme and the filter sets the hostname (`host_redirect` replaces the whole authority):
    otherwise Envoy would keep the port of the client's Host, which a Gateway listener forwards as it came
    (conformance checks backends see it), so a well-known port is then named too (`http://h:80/`, which the spec and
    the suite accept)."""
    out = rc.RedirectAction(response_code=_REDIRECT_CODES[r.status_code])
    scheme = r.scheme if r.scheme is not None else Scheme.HTTPS if https else Scheme.HTTP
    if r.scheme is not None:
        out.scheme_redirect = r.scheme.value
    if r.hostname is not None:
        out.host_redirect = r.hostname
    port = r.port if r.port is not None else _WELL_KNOWN_PORT[r.scheme] if r.scheme is not None else listener_port
    if port != _WELL_KNOWN_PORT[scheme] or r.hostname is None:
        out.port_redirect = port
    if r.path is not None and r.path.type is PathModifierType.FULL:
        out.path_redirect = r.path.value
    elif r.path is not None:
        rewrite = _prefix_rewrite(r.path, m)
        if isinstance(rewrite, str):
            out.prefix_rewrite = rewrite
        else:
            out.regex_rewrite.CopyFrom(rewrite)
    return out


def _rewrite(action: rc.RouteAction, filters: RuleFilters, m: RouteMatch) -> None:
    w = filters.rewrite
    if w is None:
        return
    if w.hostname is not None:
        action.host_rewrite_literal = w.hostname
    if w.path is not None and w.path.type is PathModifierType.FULL:
        action.regex_rewrite.CopyFrom(
            regex_pb2.RegexMatchAndSubstitute(pattern=regex_pb2.RegexMatcher(regex="^/.*$"), substitution=w.path.value)
        )
    elif w.path is not None:
        rewrite = _prefix_rewrite(w.path, m)
        if isinstance(rewrite, str):
            action.prefix_rewrite = rewrite
        else:
            action.regex_rewrite.CopyFrom(rewrite)


def _edits(mods: Sequence[HeaderModifier | None]) -> HeaderEdits:
    return merged_edits([m for m in mods if m is not None])


def _add_edits(
    edits: HeaderEdits,
    to_add: RepeatedCompositeFieldContainer[base_pb2.HeaderValueOption],
    to_remove: RepeatedScalarFieldContainer[str],
) -> None:
    """`edits` into a route's (or weighted cluster's) headers to add and remove: set overwrites, add appends."""
    to_add.extend(_HVO(header=_HV(key=n, value=v), append_action=_HVO.OVERWRITE_IF_EXISTS_OR_ADD) for n, v in edits.set)
    to_add.extend(_HVO(header=_HV(key=n, value=v), append_action=_HVO.APPEND_IF_EXISTS_OR_ADD) for n, v in edits.add)
    to_remove.extend(edits.remove)


def _with_edits(route: rc.Route, request: HeaderEdits, response: HeaderEdits) -> rc.Route:
    _add_edits(request, route.request_headers_to_add, route.request_headers_to_remove)
    _add_edits(response, route.response_headers_to_add, route.response_headers_to_remove)
    return route


def _backend_filters(action: RuleAction, b: CompiledBackend) -> RuleFilters:
    return next(t.filters for t in action.targets if t.backend == b.name)


_MILLION = 1_000_000


def _fraction(numerator: int, denominator: int) -> percent_pb2.FractionalPercent:
    """n/d as Envoy's fractional percent: exact per hundred or per million when d divides them, else the nearest
    millionth (at least one when n > 0: a small mirror never becomes none)."""
    fp = percent_pb2.FractionalPercent
    if 100 % denominator == 0:
        return fp(numerator=numerator * (100 // denominator), denominator=fp.HUNDRED)
    millionths = (numerator * _MILLION + denominator // 2) // denominator
    return fp(numerator=max(millionths, 1 if numerator else 0), denominator=fp.MILLION)


def rule_policies(act: rc.RouteAction, action: RuleAction) -> None:
    """The rule's timeouts, retry and mirrors on `act`, which has `envoy.retry_policy()` (the module docstring)."""
    t, r = action.timeouts, action.retry
    if t is not None and t.request is not None:
        act.timeout.FromMilliseconds(t.request)
    if t is not None and t.backend_request:  # 0: no bound of its own per try
        act.retry_policy.per_try_timeout.FromMilliseconds(t.backend_request)
    if r is not None:
        # GEP-1731: with a retry stanza, connection errors are retried too: `reset` is a backend that took the request
        # and then reset or closed without answering, or an attempt that outlived `per_try_timeout`
        # (HTTPRouteRetryConnectionError, HTTPRouteRetryBackendTimeout). Without one, only what never reached the
        # application is retried (envoy.RETRY_ON).
        act.retry_policy.retry_on = ",".join([*act.retry_policy.retry_on.split(","), RETRY_ON_WITH_STANZA])
        if r.attempts is not None:
            act.retry_policy.num_retries.value = r.attempts
        if r.codes:
            act.retry_policy.retry_on = ",".join([*act.retry_policy.retry_on.split(","), "retriable-status-codes"])
            act.retry_policy.retriable_status_codes.extend(r.codes)
        if r.backoff:
            act.retry_policy.retry_back_off.base_interval.FromMilliseconds(r.backoff)
    for m in action.mirrors:
        policy = rc.RouteAction.RequestMirrorPolicy(cluster=envoy.mirror_cluster_name(m))
        if m.numerator != m.denominator:
            policy.runtime_fraction.default_value.CopyFrom(_fraction(m.numerator, m.denominator))
        act.request_mirror_policies.append(policy)


def _one_cluster(action: RuleAction, b: CompiledBackend, m: RouteMatch) -> rc.RouteAction:
    out = rc.RouteAction(cluster=b.cluster, retry_policy=envoy.retry_policy())
    _rewrite(out, action.filters, m)
    rule_policies(out, action)
    return out


def _cluster_route(name: str, match: rc.RouteMatch, action: RuleAction, b: CompiledBackend, m: RouteMatch) -> rc.Route:
    """A route to backend `b` alone, with the rule's filters then the backend's merged (the backend's win)."""
    f, bf = action.filters, _backend_filters(action, b)
    route = rc.Route(name=name, match=match, route=_one_cluster(action, b, m))
    return _with_edits(
        route,
        _edits([f.request_headers, bf.request_headers]),
        _edits([f.response_headers, bf.response_headers]),
    )


def _decided_routes(
    entry: RouteEntry, action: RuleAction, split: CompiledSplit, match: rc.RouteMatch
) -> list[rc.Route]:
    """One route per backend of the rule, taken once the processor named its cluster in the routing header."""
    out = []
    for b in split.backends:
        route = _cluster_route(
            route_name(DECIDED, entry, b.name), _routing_header_is(match, b.cluster), action, b, entry.match
        )
        if split.endpoint_affinity and split.cookie is not None:
            # override_host's own fallback (the chosen pod just left): Envoy's ring on the cookie.
            route.route.hash_policy.append(envoy.cookie_hash(split.cookie.name))
        out.append(route)
    return out


def _fallback_routes(
    entry: RouteEntry, action: RuleAction, split: CompiledSplit, match: rc.RouteMatch, generation: int
) -> list[rc.Route]:
    """The rule's own routes: the processor is called here; without its decision Envoy's weights (with the session
    cookie hashed, so a session keeps one backend through the outage)."""
    f = action.filters
    out = []
    cookie = split.cookie
    for kind in (FALLBACK_COOKIE, FALLBACK) if cookie is not None else (FALLBACK,):
        with_cookie = kind == FALLBACK_COOKIE
        m = rc.RouteMatch()
        m.CopyFrom(match)
        act = rc.RouteAction(
            weighted_clusters=envoy.fallback_clusters(split, generation, "cookie" if with_cookie else "none"),
            retry_policy=envoy.retry_policy(),
        )
        if with_cookie:
            assert cookie is not None
            m.headers.append(
                rc.HeaderMatcher(
                    name="cookie",
                    string_match=string_pb2.StringMatcher(
                        safe_regex=regex_pb2.RegexMatcher(regex=cookie_present_regex(cookie.name))
                    ),
                )
            )
            act.hash_policy.append(envoy.cookie_hash(cookie.name))
            act.weighted_clusters.use_hash_policy.value = True
        by_cluster = {b.cluster: b for b in split.backends}
        for cw in act.weighted_clusters.clusters:
            bf = _backend_filters(action, by_cluster[cw.name])
            _add_edits(_edits([bf.request_headers]), cw.request_headers_to_add, cw.request_headers_to_remove)
            _add_edits(_edits([bf.response_headers]), cw.response_headers_to_add, cw.response_headers_to_remove)
        _rewrite(act, f, entry.match)
        rule_policies(act, action)
        route = rc.Route(
            name=route_name(kind, entry),
            stat_prefix=envoy.FALLBACK_STAT_PREFIX,
            match=m,
            route=act,
            metadata=envoy.disclosed(disclosure.fallback_fields(generation, cookie_present=with_cookie)),
        )
        out.append(_with_edits(route, _edits([f.request_headers]), _edits([f.response_headers])))
    return out


def _direct(name: str, match: rc.RouteMatch, status: int, body: str) -> rc.Route:
    return rc.Route(
        name=name,
        match=match,
        direct_response=rc.DirectResponseAction(status=status, body=base_pb2.DataSource(inline_string=body)),
        typed_per_filter_config=_extproc_off(),
    )


def cors_policy(c: CorsPolicy) -> cors_pb2.CorsPolicy:
    """A rule's CORS filter as Envoy's per-route CORS policy, as Envoy Gateway writes it: an origin with `*` a regex,
    a `*` method or header list a lone `*` (Envoy then echoes what the preflight asked for), and a preflight from an
    origin the policy does not allow answered by Envoy, not forwarded to the backend."""
    origins = [
        string_pb2.StringMatcher(exact=o)
        if (regex := cors_origin_regex(o)) is None
        else string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=regex))
        for o in c.allow_origins
    ]
    return cors_pb2.CorsPolicy(
        allow_origin_string_match=origins,
        allow_methods=CORS_WILDCARD if CORS_WILDCARD in c.allow_methods else ", ".join(c.allow_methods),
        allow_headers=CORS_WILDCARD if CORS_WILDCARD in c.allow_headers else ", ".join(c.allow_headers),
        expose_headers=", ".join(c.expose_headers),
        max_age=str(c.max_age),
        allow_credentials=wrappers_pb2.BoolValue(value=c.allow_credentials),
        forward_not_matching_preflights=wrappers_pb2.BoolValue(value=False),
    )


def entry_routes(entry: RouteEntry, action: RuleAction, *, port: int, https: bool, generation: int) -> list[rc.Route]:
    """The Envoy routes of one entry, in order (see the module docstring); a rule's CORS policy on each of them."""
    routes = _entry_routes(entry, action, port=port, https=https, generation=generation)
    if action.filters.cors is not None:
        policy = any_pb2.Any()
        policy.Pack(cors_policy(action.filters.cors))
        for route in routes:
            route.typed_per_filter_config[envoy.CORS_FILTER].CopyFrom(policy)
    return routes


def _entry_routes(entry: RouteEntry, action: RuleAction, *, port: int, https: bool, generation: int) -> list[rc.Route]:
    match = route_match(entry.match)
    f = action.filters
    if f.redirect is not None:
        return [
            rc.Route(
                name=route_name(REDIRECT, entry),
                match=match,
                redirect=_redirect(f.redirect, entry.match, port, https),
                typed_per_filter_config=_extproc_off(),
            )
        ]
    split = action.split
    if split is None:
        return [_direct(route_name(NO_BACKEND, entry), match, 500, NO_BACKEND_BODY)]
    if not needs_processor(action):
        (b,) = [b for b in split.backends if b.weight > 0]
        route = _cluster_route(route_name(NATIVE, entry), match, action, b, entry.match)
        route.metadata.CopyFrom(envoy.disclosed(disclosure.native_fields(generation)))
        if split.debug_headers:
            route.response_headers_to_add.append(
                envoy.add_response_header(
                    envoy.DECISION_HEADER, f"backend={b.name}; generation={generation}; key=none; path=native"
                )
            )
        for k, v in _extproc_off().items():
            route.typed_per_filter_config[k].CopyFrom(v)
        return [route]
    return [*_decided_routes(entry, action, split, match), *_fallback_routes(entry, action, split, match, generation)]


def disclosed_generation(action: RuleAction, number: int) -> int:
    """The generation a rule's routes disclose: the first that carried the rule as it is (its split's
    `first_generation`, as a TrafficSplit's fallback routes disclose), else the generation's own `number`. So a rule
    carried on unchanged keeps its routes' bytes, and a publish that changes one rule changes one virtual host."""
    first = action.split.first_generation if action.split is not None else 0
    return first or number


@dataclass(frozen=True, slots=True)
class RulePart:
    """One rule as its routes are built: its action and the generation they disclose (`disclosed_generation`)."""

    action: RuleAction
    generation: int


@dataclass(frozen=True, slots=True)
class HostPart:
    """Everything one virtual host of a port's route configuration is built from (`virtual_host`): the model's host,
    the listener port and whether it serves HTTPS (a redirect's scheme and port), and each of its rules' action with
    the generation its routes disclose, in the order the entries first name them. Equal parts build equal virtual
    hosts, so a builder keeps the serialized host by its part (`snapshot.ResourceBuilder`)."""

    host: VirtualHost
    port: int
    https: bool
    rules: tuple[RulePart, ...]


def host_parts(gen: Generation) -> dict[str, tuple[HostPart, ...]]:
    """Per Gateway listener port of `gen`'s route table, by RDS name, the parts of its virtual hosts in order (the
    port's own, then a `*` host ending in the 404 when no listener of the port takes every host)."""
    routes = gen.routes
    assert routes is not None
    https = {lr.port for lr in routes.listeners if lr.certificate is not None}
    out: dict[str, tuple[HostPart, ...]] = {}
    for port, vhosts in routes.ports().items():
        parts = [HostPart(vh, port, port in https, _rules_of(vh, routes, gen.number)) for vh in vhosts]
        if not any(vh.hostname == CATCH_ALL for vh in vhosts):
            parts.append(HostPart(VirtualHost(CATCH_ALL, ()), port, False, ()))
        out[route_config_name(port)] = tuple(parts)
    return out


def _rules_of(vh: VirtualHost, routes: GatewayRoutes, number: int) -> tuple[RulePart, ...]:
    seen: dict[str, RulePart] = {}
    for e in vh.entries:
        key = e.rule_key
        if key not in seen:
            action = routes.by_rule[key]
            seen[key] = RulePart(action, disclosed_generation(action, number))
    return tuple(seen.values())


def virtual_host(part: HostPart) -> rc.VirtualHost:
    """The Envoy virtual host of one part: its entries' routes in order, then the 404."""
    vh = part.host
    out = rc.VirtualHost(name=vh.hostname, domains=[vh.hostname])
    rules = {r.action.key: r for r in part.rules}
    # The processor's cookie and disclosure (from its dynamic metadata) only where a rule of the host reaches it: on
    # a host of native routes Envoy would format them for every response and add nothing.
    decided = {r.action.split for r in part.rules if needs_processor(r.action) and r.action.split is not None}
    if decided:
        out.response_headers_to_add.extend(envoy.decision_response_headers(decided))
    for e in vh.entries:
        r = rules[e.rule_key]
        out.routes.extend(entry_routes(e, r.action, port=part.port, https=part.https, generation=r.generation))
    out.routes.append(_direct(NO_ROUTE, rc.RouteMatch(prefix="/"), 404, NO_ROUTE_BODY))
    return out


def route_configuration(name: str, hosts: Sequence[rc.VirtualHost] = ()) -> route_pb2.RouteConfiguration:
    """A port's route configuration with these virtual hosts (none: its other fields, which `snapshot` appends to
    the hosts' serialized bytes instead of building the message whole)."""
    return route_pb2.RouteConfiguration(
        name=name,
        virtual_hosts=hosts,
        internal_only_headers=[envoy.ROUTING_HEADER],
        ignore_port_in_host_matching=True,
        request_headers_to_remove=[envoy.ROUTING_HEADER],
        # A backendRef's header filters (on its weighted cluster) apply after its rule's (on the route).
        most_specific_header_mutations_wins=True,
    )


def route_configurations(gen: Generation) -> dict[str, route_pb2.RouteConfiguration]:
    """Per Gateway listener port of `gen`'s route table, its route configuration by RDS name."""
    return {
        name: route_configuration(name, [virtual_host(p) for p in parts]) for name, parts in host_parts(gen).items()
    }
