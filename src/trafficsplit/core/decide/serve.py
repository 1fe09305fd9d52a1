"""One Gateway's route tables, read per request: which rule, then which backend (or which refusal). Pure.

The request-time half of the Gateway API model (`gatewayapi.translate` builds the tables, `decide.match.RouteTable`
reads one listener's precedence order). A data plane serves the tables as native Envoy routes (wire/gateway_routes.py,
compiled in the same order) and asks the processor only for a splitting rule's pick, `decide_rule`, the one decision
of a rule; `ServedRoutes` is the model's reference answer for a whole request, which the tests compare Envoy's with.
The tables are kept by port: the Gateway listeners that share a port share one Envoy listener and one table, in which
a request meets the most specific listener that takes its host.

Per request, `ServedRoutes.route`:
- no entry of the port's table fits → 404 (the spec's answer for a request no rule matches);
- the rule has no split (no backendRef resolves, or all weigh 0) → 500 (the spec's answer for an invalid backend);
- the rule's split decides exactly as a TrafficSplit's does (`decide_rule`, then `decide`: FNV-1a of the session
  cookie with sessionPersistence, of the request id without), with the rule's 500 share (`RuleAction.error_weight`,
  the weight of backendRefs that do not resolve) on top: a key whose hash lands in the top `error_weight` slots of
  `split weights + error_weight` answers 500. A key that does not land there is decided by `decide` unchanged, so a
  rule without a 500 share picks exactly what the TrafficSplit with the same backends picks, for every key;
- a rule with a RequestRedirect answers the redirect (`Redirected`: its status and the core's Location), or 400 when
  the client's own host, path or query would make the Location no valid header value;
- a routed request carries its request edits (`HeaderEdits`): the rule's then the picked backend's
  RequestHeaderModifier, and the rule's URLRewrite (`:authority`, `:path` with the query kept). The response side
  (ResponseHeaderModifier, rule then backend) does not depend on the request: `response_modifiers` gives it per
  backend cluster. Envoy applies both natively (`merged_edits` merges a rule's and a backend's in this order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from trafficsplit.core.decide.match import RouteTable
from trafficsplit.core.decide.request import Request
from trafficsplit.core.decide.split import Decision, decide
from trafficsplit.core.model.compiled import CompiledSplit
from trafficsplit.core.model.cookie import AffinityMinter
from trafficsplit.core.model.filters import HeaderModifier, RuleFilters, redirect_location, rewrite_path
from trafficsplit.core.model.host import normalize_host
from trafficsplit.core.model.matches import PathType
from trafficsplit.core.model.persistent import CookieSigner
from trafficsplit.core.model.routes import ListenerRoutes, RouteEntry, RuleAction

# Query parameters read from one request (the rest are ignored): the matches name at most 16 (the CRD's bound), and
# a client must not make the processor split an unbounded query string.
MAX_QUERY_PARAMS = 64


class Refusal(StrEnum):
    """Why a request on a route table is answered by the gateway itself."""

    NO_ROUTE = "no_route"  # no rule matches: 404
    NO_BACKEND = "no_backend"  # the rule has no backend that can serve: 500
    ERROR_SHARE = "error_share"  # the pick landed on the share of backendRefs that do not resolve: 500
    BAD_REDIRECT = "bad_redirect"  # the client's host, path or query make the redirect's Location invalid: 400


REFUSAL_STATUS: Mapping[Refusal, int] = {
    Refusal.NO_ROUTE: 404,
    Refusal.NO_BACKEND: 500,
    Refusal.ERROR_SHARE: 500,
    Refusal.BAD_REDIRECT: 400,
}


@dataclass(frozen=True, slots=True)
class Refused:
    reason: Refusal

    @property
    def status(self) -> int:
        return REFUSAL_STATUS[self.reason]


@dataclass(frozen=True, slots=True)
class Redirected:
    """A rule's RequestRedirect: the status (301, 302, ...) and the Location, answered by the gateway."""

    status: int
    location: str


@dataclass(frozen=True, slots=True)
class HeaderEdits:
    """What the gateway changes in a request before it leaves for the backend (or in a response): headers set
    (replacing any value; `:authority` and `:path` for a URLRewrite), added (beside existing values), removed. Names
    lowercase."""

    set: tuple[tuple[str, str], ...] = ()
    add: tuple[tuple[str, str], ...] = ()
    remove: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.set or self.add or self.remove)


NO_EDITS = HeaderEdits()


@dataclass(frozen=True, slots=True, kw_only=True)
class Routed:
    """The rule a request met, the decision of its split, and the edits the request gets."""

    entry: RouteEntry
    action: RuleAction
    split: CompiledSplit
    decision: Decision
    edits: HeaderEdits = NO_EDITS


def _header_edits(mods: Sequence[HeaderModifier]) -> tuple[dict[str, str], dict[str, list[str]], list[str]]:
    """Modifiers applied in order (the rule's, then the backend's): a later set or remove overrides an earlier one."""
    set_: dict[str, str] = {}
    add: dict[str, list[str]] = {}
    remove: list[str] = []
    for m in mods:
        for name in m.remove:
            n = name.lower()
            set_.pop(n, None)
            add.pop(n, None)
            if n not in remove:
                remove.append(n)
        for name, value in m.set:
            n = name.lower()
            add.pop(n, None)
            set_[n] = value
        for name, value in m.add:
            add.setdefault(name.lower(), []).append(value)
    return set_, add, remove


def request_edits(action: RuleAction, backend: str, entry: RouteEntry, raw_path: str) -> HeaderEdits:
    """The edits of a request `entry` selected and the pick sent to `backend` (a name in the rule's split)."""
    mods = [action.filters.request_headers]
    mods += [t.filters.request_headers for t in action.targets if t.backend == backend]
    set_, add, remove = _header_edits([m for m in mods if m is not None])
    rewrite = action.filters.rewrite
    if rewrite is not None:
        if rewrite.hostname is not None:
            set_[":authority"] = rewrite.hostname
        if rewrite.path is not None:
            path, sep, query = raw_path.partition("?")
            set_[":path"] = rewrite_path(entry.match.path, path, rewrite.path) + sep + query
    if not (set_ or add or remove):
        return NO_EDITS
    return HeaderEdits(
        set=tuple(set_.items()),
        add=tuple((n, v) for n, values in add.items() for v in values),
        remove=tuple(n for n in remove if n not in set_),
    )


def response_modifiers(actions: Sequence[RuleAction]) -> dict[str, tuple[HeaderModifier, ...]]:
    """Per backend cluster, the ResponseHeaderModifiers of the responses it serves (the rule's, then its
    backendRef's), for clusters that have any. Fixed per generation: Envoy applies them by the cluster."""
    out: dict[str, tuple[HeaderModifier, ...]] = {}
    for a in actions:
        if a.split is None:
            continue
        for b, t in zip(a.split.backends, a.targets, strict=True):
            mods = tuple(m for m in (a.filters.response_headers, t.filters.response_headers) if m is not None)
            if mods:
                out[b.cluster] = mods
    return out


def merged_edits(mods: Sequence[HeaderModifier]) -> HeaderEdits:
    """Header modifiers in order (the rule's, then the backend's), merged: set replaces, add appends, remove drops."""
    set_, add, remove = _header_edits(mods)
    return HeaderEdits(
        set=tuple(set_.items()),
        add=tuple((n, v) for n, values in add.items() for v in values),
        remove=tuple(n for n in remove if n not in set_),
    )


def _redirect(
    filters: RuleFilters, entry: RouteEntry, port: int, authority: str, raw_path: str, scheme: str = "http"
) -> Redirected | Refused:
    redirect = filters.redirect
    assert redirect is not None
    path, _, query = raw_path.partition("?")
    prefix = entry.match.path if entry.match.path_type is PathType.PREFIX else "/"
    location = redirect_location(
        redirect,
        scheme=scheme,
        host=normalize_host(authority),
        listener_port=port,
        path=path,
        query=query,
        match_prefix=prefix,
    )
    if location is None:
        return Refused(Refusal.BAD_REDIRECT)
    return Redirected(int(redirect.status_code), location)


def split_target(raw_path: str) -> tuple[str, dict[str, str]]:
    """`:path` as the matches read it: the path without its query string, and the query's first value per name
    (at most `MAX_QUERY_PARAMS` parameters read; names and values compared as sent, without percent-decoding)."""
    path, _, query = raw_path.partition("?")
    params: dict[str, str] = {}
    if query:
        for pair in query.split("&", MAX_QUERY_PARAMS)[:MAX_QUERY_PARAMS]:
            name, _, value = pair.partition("=")
            if name:
                params.setdefault(name, value)
    return path, params


def in_error_share(split: CompiledSplit, error_weight: int, h: int) -> bool:
    """Whether hash `h` lands on a rule's 500 share: the top `error_weight` slots above the split's own weights."""
    if error_weight <= 0:
        return False
    total = split.weights.total
    return h % (total + error_weight) >= total


def _tables(listeners: Sequence[ListenerRoutes]) -> dict[int, RouteTable]:
    """One table per port: the listeners sharing it, in which a request meets the most specific listener that takes
    its host (`model.routes.port_virtual_hosts`)."""
    by_port: dict[int, list[ListenerRoutes]] = {}
    for lr in listeners:
        by_port.setdefault(lr.port, []).append(lr)
    return {port: RouteTable(group) for port, group in by_port.items()}


class ServedRoutes:
    """One Gateway's route tables by listener port and its rules' actions, compiled once per generation."""

    __slots__ = ("_actions", "_https", "_tables")

    def __init__(self, listeners: Sequence[ListenerRoutes], actions: Sequence[RuleAction]) -> None:
        self._tables = _tables(listeners)
        # The request's scheme is the port's, from configuration (TLS ends in Envoy: a port whose listeners carry a
        # certificate is HTTPS), never from a header the client could send.
        self._https = frozenset(lr.port for lr in listeners if lr.certificate is not None)
        self._actions: Mapping[tuple[str, int], RuleAction] = {(a.route, a.rule): a for a in actions}

    @property
    def ports(self) -> tuple[int, ...]:
        return tuple(sorted(self._tables))

    def select(self, port: int, request: Request) -> tuple[RouteEntry, RuleAction] | None:
        """The entry and action a request meets on the listener at `port`, or None (404)."""
        table = self._tables.get(port)
        if table is None:
            return None
        path, query = split_target(request.path)
        entry = table.select(request.authority, path, request.method, request.header, query)
        if entry is None:
            return None
        action = self._actions.get((entry.route, entry.rule))
        return None if action is None else (entry, action)

    def route(
        self,
        port: int,
        request: Request,
        *,
        minter: AffinityMinter,
        signer: CookieSigner | None = None,
    ) -> Routed | Refused | Redirected:
        """The whole per-request answer (see the module docstring)."""
        met = self.select(port, request)
        if met is None:
            return Refused(Refusal.NO_ROUTE)
        entry, action = met
        if action.filters.redirect is not None:
            scheme = "https" if port in self._https else "http"
            return _redirect(action.filters, entry, port, request.authority, request.path, scheme)
        split = action.split
        if split is None:
            return Refused(Refusal.NO_BACKEND)
        d = decide_rule(action, split, request, minter=minter, signer=signer)
        if isinstance(d, Refused):
            return d
        edits = request_edits(action, d.backend.name, entry, request.path)
        return Routed(entry=entry, action=action, split=split, decision=d, edits=edits)


def decide_rule(
    action: RuleAction,
    split: CompiledSplit,
    request: Request,
    *,
    minter: AffinityMinter,
    signer: CookieSigner | None = None,
) -> Decision | Refused:
    """The pick of a rule that splits (`split` is its split): its split's decision, or the 500 of its error share.
    The one decision of a rule, whoever selected the rule (Envoy's route over the wire, or `ServedRoutes.select`)."""
    d = decide(split, request, minter=minter, signer=signer)
    if in_error_share(split, action.error_weight, d.key_hash):
        return Refused(Refusal.ERROR_SHARE)
    return d
