"""The route table of one Gateway: what its data plane serves for HTTPRoutes, as values that check themselves. Pure.

`gatewayapi.translate.translate` builds these from the Gateway API objects; a `Generation` carries one Gateway's
(`Generation.routes`) beside its splits; the publish receiver (wire/generation.py) rebuilds them from a proto through
these same constructors, so a table the translation could not have built is refused whole, with every problem named.

The shape: per listener (`ListenerRoutes`: a port), virtual hosts (`VirtualHost`: an exact name, a `*.` suffix, or
`*` for every host), each with its match entries in precedence order (`RouteEntry`, first fit wins, read by
`decide.match.RouteTable`); each entry names a rule (`route`, `rule`), whose `RuleAction` says what serving it does:
its split (host-less: the table, not a host, selects it), the share that answers 500, and its filters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from trafficsplit.core.model.compiled import CompiledSplit
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.filters import MAX_MIRRORS, NO_FILTERS, RequestMirror, RuleFilters
from trafficsplit.core.model.limits import MAX_SPLITS
from trafficsplit.core.model.matches import (
    MAX_BACKEND_REFS,
    MAX_LISTENERS,
    MAX_RULE_MATCHES,
    MAX_RULES,
    PathType,
    RouteMatch,
    route_match_problems,
)
from trafficsplit.core.model.rules import is_dns_label, is_dns_subdomain, is_host, name_problems, uid_problems
from trafficsplit.core.model.timeouts import RuleRetry, RuleTimeouts
from trafficsplit.core.model.tls import Certificate, ClientValidation
from trafficsplit.core.model.weights import MAX_WEIGHT

# The virtual host that serves every host: a route with no hostname on a listener with no hostname. Envoy's `*`
# domain; a request takes it only when no exact or `*.` suffix host fits.
CATCH_ALL = "*"

# Ours (the CRDs do not bound how many routes attach to a listener): a table larger than these is refused whole.
MAX_VIRTUAL_HOSTS = 4096  # per listener
MAX_HOST_ENTRIES = 8192  # match entries per virtual host
MAX_TABLE_ENTRIES = 65_536  # match entries across one Gateway's listeners
MAX_ERROR_WEIGHT = MAX_WEIGHT * MAX_BACKEND_REFS  # every backendRef of a rule unresolved, each at the most weight


def key_problems(field_: str, key: str) -> list[str]:
    """`namespace/name` of a namespaced object (a route, a Gateway)."""
    ns, sep, name = key.partition("/")
    if not sep:
        return [f"{field_}: {key[:64]!r} must be namespace/name"]
    return [f"{field_}: {q}" for q in name_problems(ns, name)]


@dataclass(frozen=True, slots=True)
class RouteEntry:
    """One match of one rule, as a virtual host orders it: the request that fits `match` is served by the rule."""

    route: str  # namespace/name
    rule: int
    match_index: int
    match: RouteMatch

    def __post_init__(self) -> None:
        problems = key_problems("route", self.route)
        if not 0 <= self.rule < MAX_RULES:
            problems.append(f"rule: {self.rule} is not in 0..{MAX_RULES - 1}")
        if not 0 <= self.match_index < MAX_RULE_MATCHES:
            problems.append(f"match_index: {self.match_index} is not in 0..{MAX_RULE_MATCHES - 1}")
        problems += [f"match.{q}" for q in route_match_problems(self.match)]
        if problems:
            raise SpecError(problems)

    @property
    def rule_key(self) -> str:
        """The rule's key, which is its split's key: `namespace/route.rule-<index>`."""
        return RuleKey.of(self.route, self.rule).text


_RULE_SEP = ".rule-"


@dataclass(frozen=True, slots=True)
class RuleKey:
    """One rule of an HTTPRoute, which names its split: the split's key is `text`, `namespace/route.rule-<index>`
    (the wire form the generation and the replicas' reports carry). The only place that renders or parses it."""

    namespace: str
    name: str  # the route's
    rule: int

    @classmethod
    def of(cls, route: str, rule: int) -> RuleKey:
        """The key of rule `rule` of `route` (`namespace/name`)."""
        ns, _, name = route.partition("/")
        return cls(ns, name, rule)

    @classmethod
    def parse(cls, text: str) -> RuleKey | None:
        """The rule a split key names; None when it is no rule's (a TrafficSplit's, or malformed)."""
        route, sep, index = text.rpartition(_RULE_SEP)
        ns, slash, name = route.partition("/")
        # A key from a replica's report is not ours to trust: a digit run longer than any rule index is no rule's
        # (and int() refuses one over 4,300 digits).
        if not sep or not slash or not index.isdigit() or not index.isascii() or len(index) > len(str(MAX_RULES)):
            return None
        return cls(ns, name, int(index))

    @property
    def route(self) -> str:
        """`namespace/name` of the route."""
        return f"{self.namespace}/{self.name}"

    @property
    def split_name(self) -> str:
        """The name of the rule's split (in the route's namespace): `route.rule-<index>`."""
        return f"{self.name}{_RULE_SEP}{self.rule}"

    @property
    def text(self) -> str:
        return f"{self.namespace}/{self.split_name}"


@dataclass(frozen=True, slots=True)
class VirtualHost:
    """A hostname of a listener and every match that serves it, in precedence order (first match wins).
    `hostname` is an exact name, a `*.` suffix, or `*` (CATCH_ALL: every host no other virtual host takes)."""

    hostname: str
    entries: tuple[RouteEntry, ...]

    def __post_init__(self) -> None:
        problems: list[str] = []
        if self.hostname != CATCH_ALL and not is_host(self.hostname):
            problems.append(f"hostname: {self.hostname[:64]!r} is not a host name, a *. wildcard or *")
        if len(self.entries) > MAX_HOST_ENTRIES:
            problems.append(f"entries: {len(self.entries)} entries, at most {MAX_HOST_ENTRIES} are allowed")
        seen: set[tuple[str, int, int]] = set()
        for i, e in enumerate(self.entries):
            k = (e.route, e.rule, e.match_index)
            if k in seen:
                problems.append(f"entries[{i}]: {e.rule_key} match {e.match_index} is listed twice")
            seen.add(k)
        if problems:
            raise SpecError(problems)


def covers(listener_hostname: str | None, name: str) -> bool:
    """Whether a listener with `listener_hostname` (None: every host) takes requests for `name` (a host, a `*.`
    suffix, or CATCH_ALL): the same name, or strictly under the listener's `*.` suffix."""
    if listener_hostname is None:
        return True
    if name == listener_hostname:
        return True
    suffix = listener_hostname[1:]  # ".example.com" of "*.example.com"
    return listener_hostname.startswith("*.") and name.endswith(suffix) and len(name) > len(suffix)


@dataclass(frozen=True, slots=True)
class ListenerRoutes:
    """One listener of a Gateway: its port, its hostname (None: every host) and virtual hosts, each within it, and for
    HTTPS its certificate."""

    gateway: str  # namespace/name
    listener: str
    port: int
    hosts: tuple[VirtualHost, ...]
    # Keyword-only, after the positional four: callers built ListenerRoutes positionally before it was carried.
    hostname: str | None = field(default=None, kw_only=True)
    # HTTPS: the certificate the listener terminates TLS with (it checks itself); None: plain HTTP.
    certificate: Certificate | None = field(default=None, kw_only=True)
    # HTTPS: the client certificate validation of the listener's port (every HTTPS listener on it has the same);
    # None: client certificates are not asked for.
    client_validation: ClientValidation | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        problems = key_problems("gateway", self.gateway)
        if self.client_validation is not None and self.certificate is None:
            problems.append("client_validation: only an HTTPS listener (one with a certificate) validates clients")
        if not is_dns_subdomain(self.listener):
            problems.append(f"listener: {self.listener[:64]!r} must be a DNS subdomain (a listener's name)")
        if self.hostname is not None and not is_host(self.hostname):
            problems.append(f"hostname: {self.hostname[:64]!r} is not a host name or a *. wildcard")
        else:
            problems += [
                f"hosts[{i}].hostname: {vh.hostname!r} is not within the listener's hostname {self.hostname!r}"
                for i, vh in enumerate(self.hosts)
                if not covers(self.hostname, vh.hostname)
            ]
        if not 1 <= self.port <= 65535:
            problems.append(f"port: {self.port} is not in 1..65535")
        if len(self.hosts) > MAX_VIRTUAL_HOSTS:
            problems.append(f"hosts: {len(self.hosts)} virtual hosts, at most {MAX_VIRTUAL_HOSTS} are allowed")
        seen: set[str] = set()  # a set, not the list so far: 1,000 routes with a hostname each are 1,000 hosts
        for i, vh in enumerate(self.hosts):
            if vh.hostname in seen:
                problems.append(f"hosts[{i}]: {vh.hostname!r} is listed twice")
            seen.add(vh.hostname)
        if problems:
            raise SpecError(problems)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendTarget:
    """Where a split backend's traffic goes. The split model names a Service in the split's own namespace; a
    backendRef granted into another namespace keeps its namespace here (its endpoints are resolved there)."""

    backend: str  # the backend's name in the split
    namespace: str
    service: str
    port: int
    weight: int
    # Applied to the requests this backend serves (backendRef filters): header modifiers only.
    filters: RuleFilters = NO_FILTERS

    def __post_init__(self) -> None:
        problems = [
            f"{f}: {v[:64]!r} must be a DNS label"
            for f, v in (("backend", self.backend), ("namespace", self.namespace), ("service", self.service))
            if not is_dns_label(v)
        ]
        if not 1 <= self.port <= 65535:
            problems.append(f"port: {self.port} is not in 1..65535")
        if not 0 <= self.weight <= MAX_WEIGHT:
            problems.append(f"weight: {self.weight} is not in 0..{MAX_WEIGHT}")
        if self.filters.redirect is not None or self.filters.rewrite is not None or self.filters.cors is not None:
            problems.append("filters: a backend's filters are header modifiers only")
        if problems:
            raise SpecError(problems)


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleAction:
    """What one rule of an accepted route does: its split (None: no backend can serve, every request answers 500,
    unless the rule redirects), the weight of backendRefs that do not resolve, whose share of requests answers 500
    per the spec, and its filters (header modifiers, a URL rewrite, or a redirect answered instead of a backend).

    The split is host-less (the route table selects it, not a host) and keyed `namespace/route.rule-<index>`;
    `targets` are its backends in order, with the namespace each Service is in and their own filters.

    Serving it: of every `sum(weights) + error_weight` requests, `error_weight` answer 500 (backendRefs that do not
    resolve, as the spec requires); the rest are the split's pick. A picked backend with no ready endpoint fails over
    to the rule's backends that have one, as a TrafficSplit does (the spec says SHOULD answer 503; we keep one pick
    and one failover for both APIs, so a canary scaled to zero does not fail its share of sessions). When no backend
    of the rule has a ready endpoint, the request answers 503.

    `timeouts` and `retry` (None: the data plane's defaults) bound and repeat the requests to the picked backend;
    `mirrors` are the RequestMirror filters whose backendRef resolved, each sent a copy of its share of the requests
    (their answers dropped)."""

    route: str  # namespace/name
    rule: int
    split: CompiledSplit | None
    targets: tuple[BackendTarget, ...]
    error_weight: int
    filters: RuleFilters = NO_FILTERS
    timeouts: RuleTimeouts | None = None
    retry: RuleRetry | None = None
    mirrors: tuple[RequestMirror, ...] = ()

    def __post_init__(self) -> None:
        problems = key_problems("route", self.route)
        if self.filters.redirect is not None and (self.split is not None or self.targets or self.error_weight):
            problems.append("filters: a rule that redirects has no backend (the CRD refuses backendRefs with it)")
        if self.filters.redirect is not None and self.mirrors:
            problems.append("mirrors: a rule that redirects answers itself, it has no request to mirror")
        if len(self.mirrors) > MAX_MIRRORS:
            problems.append(f"mirrors: {len(self.mirrors)} mirrors, at most {MAX_MIRRORS} are allowed")
        if not 0 <= self.rule < MAX_RULES:
            problems.append(f"rule: {self.rule} is not in 0..{MAX_RULES - 1}")
        if not 0 <= self.error_weight <= MAX_ERROR_WEIGHT:
            problems.append(f"error_weight: {self.error_weight} is not in 0..{MAX_ERROR_WEIGHT}")
        if len(self.targets) > MAX_BACKEND_REFS:
            problems.append(f"targets: {len(self.targets)} targets, at most {MAX_BACKEND_REFS} are allowed")
        s = self.split
        if s is not None:
            if s.key != self.key:
                problems.append(f"split: {s.key!r} is not this rule's split ({self.key!r})")
            if s.hosts:
                problems.append("split: a rule's split has no hosts (the route table selects it)")
            if [t.backend for t in self.targets] != [b.name for b in s.backends]:
                problems.append("targets: one per backend of the split, in its order")
            else:
                problems += [
                    f"targets[{i}]: {t.service}:{t.port} weight {t.weight} is not backend {b.name}'s "
                    f"({b.service}:{b.port} weight {b.weight})"
                    for i, (t, b) in enumerate(zip(self.targets, s.backends, strict=True))
                    if (t.service, t.port, t.weight) != (b.service, b.port, b.weight)
                ]
        if problems:
            raise SpecError(problems)

    @property
    def key(self) -> str:
        return RuleKey.of(self.route, self.rule).text


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayRoutes:
    """One Gateway's route table: its listeners and the actions of every rule they refer to. Checks itself: bounded
    counts, every listener of this Gateway, each rule once, every entry's rule present."""

    gateway: str  # namespace/name
    listeners: tuple[ListenerRoutes, ...] = ()
    actions: tuple[RuleAction, ...] = ()
    gateway_uid: str = ""  # the Gateway's metadata.uid (core/model/identity.py); empty: not known
    # What the data plane presents to backends it speaks TLS to (the Gateway's spec.tls.backend.clientCertificateRef)
    backend_client_certificate: Certificate | None = None
    by_rule: Mapping[str, RuleAction] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        problems = key_problems("gateway", self.gateway) + uid_problems("gateway_uid", self.gateway_uid)
        if len(self.listeners) > MAX_LISTENERS:
            problems.append(f"listeners: {len(self.listeners)} listeners, at most {MAX_LISTENERS} are allowed")
        if len(self.actions) > MAX_SPLITS:
            problems.append(f"actions: {len(self.actions)} rules, at most {MAX_SPLITS} are allowed")
        if problems:
            raise SpecError(problems)
        index: dict[str, RuleAction] = {}
        for i, a in enumerate(self.actions):
            if a.key in index:
                problems.append(f"actions[{i}]: rule {a.key} is listed twice")
            index[a.key] = a
        names: set[str] = set()
        total = 0
        for i, lr in enumerate(self.listeners):
            if lr.gateway != self.gateway:
                problems.append(f"listeners[{i}].gateway: {lr.gateway!r} is not {self.gateway!r}")
            if lr.listener in names:
                problems.append(f"listeners[{i}].listener: {lr.listener!r} is listed twice")
            names.add(lr.listener)
            for j, vh in enumerate(lr.hosts):
                total += len(vh.entries)
                for k, e in enumerate(vh.entries):
                    where = f"listeners[{i}].hosts[{j}].entries[{k}]"
                    action = index.get(e.rule_key)
                    if action is None:
                        problems.append(f"{where}: rule {e.rule_key} has no action")
                    elif action.filters.replaces_prefix and e.match.path_type is not PathType.PREFIX:
                        problems.append(f"{where}: rule {e.rule_key} replaces a prefix match, this is no PathPrefix")
        if total > MAX_TABLE_ENTRIES:
            problems.append(f"listeners: {total} match entries, at most {MAX_TABLE_ENTRIES} are allowed")
        if problems:
            raise SpecError(problems)
        object.__setattr__(self, "by_rule", MappingProxyType(index))

    def action_for(self, entry: RouteEntry) -> RuleAction:
        """The action of the rule `entry` selects (always present: the table checks it)."""
        return self.by_rule[entry.rule_key]

    def ports(self) -> dict[int, tuple[VirtualHost, ...]]:
        """Per port, the virtual hosts that serve it (`port_virtual_hosts` of its listeners): what one Envoy listener's
        route configuration holds."""
        by_port: dict[int, list[ListenerRoutes]] = {}
        for lr in self.listeners:
            by_port.setdefault(lr.port, []).append(lr)
        return {port: port_virtual_hosts(lrs) for port, lrs in sorted(by_port.items())}


def _specificity(name: str | None) -> tuple[int, int]:
    """Exact names before `*.` suffixes (longer first) before every host: the spec's listener order, Envoy's domains."""
    if name is None or name == CATCH_ALL:
        return (2, 0)
    if name.startswith("*."):
        return (1, -len(name))
    return (0, 0)


def port_virtual_hosts(listeners: Sequence[ListenerRoutes]) -> tuple[VirtualHost, ...]:
    """The listeners sharing one port, as one set of virtual hosts Envoy can match (exact, then longest `*.` suffix,
    then `*`) with the spec's result: a request goes to the most specific listener whose hostname takes its host, and
    only that listener's routes serve it (a route's `foo.example.com` on a catch-all listener does not take a host a
    `*.example.com` listener of the port covers).

    One virtual host per name that is a listener's hostname or one of their virtual hosts. Every host Envoy sends to a
    name has the same most specific listener (a longer name would have caught it), so each name takes the entries of
    that listener's virtual host for it (its own name, else its longest `*.` suffix, else its `*`), or none: the
    spec's 404, where falling through to a less specific listener would be wrong."""
    names: set[str] = set()
    for lr in listeners:
        names.add(CATCH_ALL if lr.hostname is None else lr.hostname)
        names.update(vh.hostname for vh in lr.hosts)
    # Each listener's virtual hosts by name, and its `*.` ones, read once (not once per name: a listener can have
    # 1,000 hosts, one per route).
    own = [{vh.hostname: vh for vh in lr.hosts} for lr in listeners]
    wild = [[vh for vh in lr.hosts if vh.hostname.startswith("*.")] for lr in listeners]
    out: list[VirtualHost] = []
    for name in sorted(names, key=lambda n: (_specificity(n), n)):
        owners = [i for i, lr in enumerate(listeners) if covers(lr.hostname, name)]
        if not owners:
            continue  # no listener takes it (only a listener's own name or virtual hosts are names)
        owner = min(owners, key=lambda i: _specificity(listeners[i].hostname))
        best = own[owner].get(name)
        if best is None:
            under = [vh for vh in wild[owner] if covers(vh.hostname, name)]
            best = min(under, key=lambda vh: _specificity(vh.hostname)) if under else own[owner].get(CATCH_ALL)
        out.append(VirtualHost(name, best.entries if best is not None else ()))
    return tuple(out)
