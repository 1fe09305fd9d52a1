"""HTTPRoutes on our Gateways → the split model TrafficSplits compile to, and the status that implies: the top-level
assembly. Pure.

Each valid rule of an accepted route becomes one `CompiledSplit` (`gatewayapi.actions`), built with the same
constructors a TrafficSplit goes through, so the same checks apply: its weighted backendRefs (`gatewayapi.backends`) are
the split's backends, picked by the FNV-1a hash of the session key when the rule has sessionPersistence
(`gatewayapi.sessions`: a Cookie is the split's sticky cookie; a Header its key header, the sealed session issued in a
response header) and of the request id when not. What a split cannot say (which requests reach it) sits beside it:
per listener (`gatewayapi.listeners`), per virtual host (a hostname the route and the listener share:
`gatewayapi.attachment`), the rules' matches in the spec's precedence order (`gatewayapi.precedence`), each naming the
split it selects (`RouteEntry`).

Status follows from the same pass (`gatewayapi.conditions`): per route and parent, `Accepted` (NotAllowedByListeners,
NoMatchingListenerHostname, NoMatchingParent, UnsupportedValue) and `ResolvedRefs` (RefNotPermitted, InvalidKind,
BackendNotFound), `PartiallyInvalid` when some rules were dropped; per listener, attachedRoutes, supportedKinds and
conflicts; per GatewayClass (`gatewayapi.classes`) and TrafficSplitPolicy (`gatewayapi.policy_rules`). What this
implementation cannot serve is reported there by name, never dropped silently. The operator writes it only after the
gateway replicas ACK the generation carrying it (`gatewayapi.status`).

Filters are carried on the rule's action and its targets (core/model/filters.py: header modifiers, a redirect, a
URL rewrite), and so are its timeouts and retry (core/model/timeouts.py) and its RequestMirror filters whose
backendRef resolves (a mirror's that does not is a ResolvedRefs problem, and that mirror is left out, as the spec
says). What the model lacks, and is therefore reported as UnsupportedValue: CORS, ExtensionRef and ExternalAuth
filters (and a redirect, rewrite or mirror on a backendRef), more retry attempts than the model's bound, and a session
lifetime enforced by the server (absoluteTimeout on a session cookie or a Header session). A route with no hostname
on a listener with none serves every host: the listener's catch-all virtual host (`*`), which a request takes when no
exact or `*.` host fits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from trafficsplit.core.control.resolve import ServiceInfo
from trafficsplit.core.gatewayapi.actions import ActionMemo
from trafficsplit.core.gatewayapi.attachment import Attachment, attach
from trafficsplit.core.gatewayapi.backend_tls import (
    BackendTlsResolution,
    Refused,
    backend_tls_statuses,
    resolve_backend_tls,
)
from trafficsplit.core.gatewayapi.backends import (
    Resolved,
    ResolvedMirrors,
    resolve_mirrors,
    resolve_refs,
    target_endpoints,
)
from trafficsplit.core.gatewayapi.classes import class_refusals, class_statuses, refused_by_class
from trafficsplit.core.gatewayapi.conditions import (
    ClassStatus,
    GatewayStatus,
    ListenerSetStatus,
    ListenerStatus,
    ParentStatus,
    PolicyStatus,
    RouteReason,
    RouteStatus,
    cond,
)
from trafficsplit.core.gatewayapi.httproute import HTTPRoute, ParentRef, RouteRule
from trafficsplit.core.gatewayapi.inputs import Inputs as Inputs
from trafficsplit.core.gatewayapi.inputs import gateway_inputs, our_gateways, parent_gateway
from trafficsplit.core.gatewayapi.listener_sets import SetViews, listener_set_views
from trafficsplit.core.gatewayapi.listeners import (
    ListenerView,
    backend_client_view,
    gateway_acceptance,
    listener_views,
)
from trafficsplit.core.gatewayapi.objects import LISTENER_SET_KIND, Gateway, ListenerSet
from trafficsplit.core.gatewayapi.policy import Resolution, resolve
from trafficsplit.core.gatewayapi.policy_rules import Build, policy_statuses, with_policies
from trafficsplit.core.gatewayapi.precedence import precedence, taken_matches
from trafficsplit.core.gatewayapi.reading import GATEWAY_GROUP
from trafficsplit.core.gatewayapi.route_memo import RouteDeps, RouteLocal, RouteMemo, RouteParent, Walked, walk_shape
from trafficsplit.core.model.condition import Condition
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.filters import RequestMirror
from trafficsplit.core.model.generation import GenerationContent
from trafficsplit.core.model.matches import RouteMatch
from trafficsplit.core.model.routes import (
    CATCH_ALL,
    BackendTarget,
    GatewayRoutes,
    ListenerRoutes,
    RouteEntry,
    RuleAction,
    RuleKey,
    VirtualHost,
)
from trafficsplit.core.model.rules import Endpoint
from trafficsplit.core.model.tls import Certificate
from trafficsplit.core.model.upstream_tls import UpstreamTls


@dataclass(frozen=True, slots=True, kw_only=True)
class Translation:
    listeners: tuple[ListenerRoutes, ...]
    actions: tuple[RuleAction, ...]
    routes: tuple[RouteStatus, ...]
    gateways: tuple[GatewayStatus, ...]
    classes: tuple[ClassStatus, ...]
    policies: tuple[PolicyStatus, ...] = ()
    backend_tls: tuple[PolicyStatus, ...] = ()  # BackendTLSPolicies' (core/gatewayapi/backend_tls.py)
    listener_sets: tuple[ListenerSetStatus, ...] = ()  # of the ListenerSets naming a Gateway of ours
    # Gateways whose route table breaks a bound of the model (`routes.VirtualHost`, `ListenerRoutes`): why, by
    # `namespace/name`. Only they are refused (`gateway_content` raises for them); every other Gateway is served.
    refused: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Gateway → the client certificate its data plane presents to TLS backends (its spec.tls.backend, resolved).
    backend_clients: Mapping[str, Certificate] = field(default_factory=dict)
    # Each Gateway's part (`namespace/name` → `_Part`), the one its listeners and actions came from: the same object
    # on the next translation when the Gateway was not translated again (`TranslationMemo`), which `ContentMemo` uses.
    parts: Mapping[str, _Part] = field(default_factory=dict, compare=False, repr=False)


@dataclass(slots=True, kw_only=True)
class _Pass:
    """One translation's working state: what every route reads, and what the routes add up to as they are walked
    in precedence order (local to one `translate` call)."""

    inputs: Inputs
    memo: ActionMemo
    routes: RouteMemo
    gateways: dict[str, Gateway]
    views: dict[str, list[ListenerView]]
    labels: dict[str, dict[str, str]]
    attachment: Resolution
    backend_tls: BackendTlsResolution
    # A Gateway's own listeners, and the listeners of each ListenerSet it took (by the set's key; `views` holds both)
    own_views: dict[str, list[ListenerView]]
    set_views: dict[str, SetViews]
    sets: dict[str, ListenerSet]  # the ListenerSets naming a Gateway of the pass, by key
    set_gateway: dict[str, str]  # the same sets' Gateways (`inputs.parent_gateway`)
    seen_endpoints: dict[tuple[str, str, int], tuple[Endpoint, ...]] = field(default_factory=dict)
    attached_count: dict[tuple[str, str], int] = field(default_factory=dict)
    # (gateway, listener) → hostname → entries with their routes, for the precedence sort.
    tables: dict[tuple[str, str], dict[str, list[tuple[HTTPRoute, RouteEntry]]]] = field(default_factory=dict)
    # The same entries indexed by match: each match's first holder (precedence.FirstHolders).
    holders: dict[tuple[str, str], dict[str, dict[RouteMatch, tuple[HTTPRoute, RouteEntry]]]] = field(
        default_factory=dict
    )
    actions: list[RuleAction] = field(default_factory=list)
    route_status: list[RouteStatus] = field(default_factory=list)
    invalid: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (policy, route) → why refused
    route_gateways: dict[str, tuple[ParentRef, ...]] = field(default_factory=dict)  # route → our Gateways
    # Gateway → the client certificate its data plane presents to TLS backends (spec.tls.backend)
    backend_clients: dict[str, Certificate] = field(default_factory=dict)


class TranslationMemo:
    """Each Gateway's part of the last translation by the inputs it read (`inputs.gateway_inputs`), with the route and
    rule memos of its own (`RouteMemo`, `ActionMemo`): a translation translates only the Gateways whose inputs
    changed, so a weight flip on one Gateway never translates another's routes, and within the Gateway only the
    changed routes are read and the changed rules built. The operator owns one; a Gateway gone is forgotten at the
    next translation (bounded by the Gateways there are). `translated` counts the translations of each Gateway, for
    the tests and the log."""

    __slots__ = ("_assembled", "_parts", "translated")

    def __init__(self) -> None:
        self._parts: dict[str, _Held] = {}
        self._assembled: _Assembled | None = None
        self.translated: Counter[str] = Counter()

    def assembled(self, inputs: Inputs, parts: Mapping[str, _Part]) -> Translation:
        """The parts as one translation (`_assemble`): the last one when every part is the one it was assembled
        from and what the assembly reads besides them is unchanged (the status passes after a publish, a change on
        no Gateway of ours). Besides the parts, it reads the classes and their parameters, the policies and the
        routes they name (a route that is on none of our Gateways is still found)."""
        named = {f"{p.meta.namespace}/{t.name}" for p in inputs.policies for t in p.targets}
        rest = (
            inputs.classes,
            inputs.parameters,
            inputs.policies,
            tuple(r for r in inputs.routes if r.meta.key in named) if named else (),
            inputs.backend_tls,
        )
        held = self._assembled
        if (
            held is not None
            and held.parts.keys() == parts.keys()
            and all(held.parts[k] is part for k, part in parts.items())
            and held.rest == rest
        ):
            return held.translation
        translation = _assemble(inputs, parts)
        self._assembled = _Assembled(dict(parts), rest, translation)
        return translation

    def parts(self, scoped: Mapping[str, Inputs]) -> dict[str, _Part]:
        """The part of each Gateway of `scoped` (its key → the inputs it reads), translated again only when those
        changed (the held part itself, not a copy, when they did not)."""
        for gone in [k for k in self._parts if k not in scoped]:
            del self._parts[gone]
        out: dict[str, _Part] = {}
        for key, inputs in scoped.items():
            held = self._parts.get(key)
            if held is None:
                held = self._parts[key] = _Held(inputs, None, ActionMemo(), RouteMemo())
            elif held.part is not None and held.inputs == inputs:
                # Keep the inputs just compared: the store replaces an object by an equal one at each watch event
                # (our own status writes among them), and the next comparison is then by identity, not field by field.
                held.inputs = inputs
                out[key] = held.part
                continue
            held.inputs, held.part = inputs, _translate_pass(inputs, held.actions, held.routes)
            self.translated[key] += 1
            out[key] = held.part
        return out


@dataclass(frozen=True, slots=True)
class _Assembled:
    """The last translation `TranslationMemo.assembled` gave, with the parts and the rest it was assembled from."""

    parts: Mapping[str, _Part]
    rest: tuple[object, ...]
    translation: Translation


@dataclass(slots=True)
class _Held:
    """One Gateway's in `TranslationMemo`: the inputs last translated, their part, and the Gateway's memos."""

    inputs: Inputs
    part: _Part | None
    actions: ActionMemo
    routes: RouteMemo


def translate(inputs: Inputs, memo: TranslationMemo | None = None) -> Translation:
    """The model and the status for everything attached to our Gateways (see the module docstring), one Gateway at
    a time: each Gateway's translation reads only its own inputs (`gateway_inputs`), and nothing one Gateway holds
    changes what another's routes get (a route's matches compete only with those of the listeners it attaches to,
    which are its Gateway's). `memo`: the operator's, so that Gateways, routes and rules whose inputs did not change
    are not translated again."""
    memo = memo if memo is not None else TranslationMemo()
    return memo.assembled(inputs, memo.parts(gateway_inputs(inputs)))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Part:
    """What one pass over some Gateways (`_translate_pass`) yields: their listeners' tables, the actions of the routes
    attached there, the routes' parents on them, the Gateways' statuses and those refused, and the policies a rule
    refuses (`policy_rules.with_policies`)."""

    listeners: tuple[ListenerRoutes, ...]
    actions: tuple[RuleAction, ...]
    routes: tuple[RouteStatus, ...]
    gateways: tuple[GatewayStatus, ...]
    refused: Mapping[str, tuple[str, ...]]
    invalid: Mapping[tuple[str, str], tuple[str, ...]]
    route_gateways: Mapping[str, tuple[ParentRef, ...]]  # route → our Gateways among its parents here
    backend_clients: Mapping[str, Certificate] = field(default_factory=dict)
    listener_sets: tuple[ListenerSetStatus, ...] = ()


def _translate_pass(inputs: Inputs, memo: ActionMemo, routes: RouteMemo | None = None) -> _Part:
    """One pass over every Gateway of `inputs`: the routes walked in precedence order (oldest first). `routes`: the
    route memo of the Gateway's last passes (none: every route is read)."""
    gateways = our_gateways(inputs)
    routes = routes if routes is not None else RouteMemo()
    # What every route's own part reads (`route_memo`): the Gateways (their listeners), the grants, the Namespaces'
    # labels, the listeners' Secrets, the ConfigMaps (CA bundles), the BackendTLSPolicies and the ListenerSets.
    routes.begin(
        (
            inputs.gateways,
            inputs.grants,
            inputs.namespaces,
            inputs.secrets,
            inputs.configmaps,
            inputs.backend_tls,
            inputs.listener_sets,
        )
    )
    labels = {n.name: dict(n.labels) for n in inputs.namespaces}
    own = {key: listener_views(g, inputs.grants, inputs.secrets, inputs.configmaps) for key, g in gateways.items()}
    set_views = {
        key: listener_set_views(
            g, own[key], inputs.listener_sets, labels, inputs.grants, inputs.secrets, inputs.configmaps
        )
        for key, g in gateways.items()
    }
    state = _Pass(
        inputs=inputs,
        memo=memo,
        routes=routes,
        gateways=gateways,
        views={key: [*own[key], *set_views[key].views] for key in gateways},
        own_views=own,
        set_views=set_views,
        sets={ls.meta.key: ls for ls in inputs.listener_sets if ls.gateway in gateways},
        set_gateway={ls.meta.key: ls.gateway for ls in inputs.listener_sets if ls.gateway in gateways},
        labels=labels,
        attachment=resolve(inputs.routes, inputs.policies),
        backend_tls=resolve_backend_tls(inputs.backend_tls, inputs.services or {}, inputs.configmaps or {}),
    )
    ordered = sorted(inputs.routes, key=lambda r: (r.meta.created, r.meta.key))
    walk = [
        (route, routes.local(route, _route_deps(state, route), partial(_route_local, state, route)))
        for route in ordered
    ]
    # What routes share is walked again only when a route's shape changed (`route_memo.walk_shape`).
    same = routes.same_walk(tuple(walk_shape(route, local) for route, local in walk))
    for route, local in walk:
        _translate_route(state, route, local, same)
    classes = class_statuses(inputs.classes, inputs.parameters or {})
    listeners, gateway_status, refused = _gateway_outputs(state, class_refusals(classes), same)
    memo.finish()
    routes.finish()
    return _Part(
        listeners=listeners,
        actions=tuple(state.actions),
        routes=tuple(state.route_status),
        gateways=gateway_status,
        refused=refused,
        invalid={k: tuple(v) for k, v in state.invalid.items()},
        route_gateways=dict(state.route_gateways),
        backend_clients=dict(state.backend_clients),
        listener_sets=_listener_set_statuses(state),
    )


def _assemble(inputs: Inputs, by_gateway: Mapping[str, _Part]) -> Translation:
    """The parts (each over its own Gateway) as one translation, in the order one pass over all of them gives:
    listeners and Gateways by Gateway, routes oldest first with their parents in the order of their parentRefs, each
    route's actions once (a route on two Gateways is built the same on both), and the class and policy statuses of
    the whole store."""
    parts = tuple(by_gateway.values())
    order = {r.meta.key: (r.meta.created, r.meta.key) for r in inputs.routes}
    refs = {r.meta.key: r.parent_refs for r in inputs.routes}
    # Each route's status from its one part as it is (most routes are on one Gateway: no new object, so the
    # status memo compares it by identity); gathered from the parts of a route on several.
    statuses: dict[str, RouteStatus] = {}
    parents: dict[str, list[ParentStatus]] = {}
    actions: dict[str, tuple[RuleAction, ...]] = {}
    invalid: dict[tuple[str, str], list[str]] = {}
    for part in parts:
        for rs in part.routes:
            if (first := statuses.setdefault(rs.route, rs)) is not rs:
                parents.setdefault(rs.route, list(first.parents)).extend(rs.parents)
        by_route: dict[str, list[RuleAction]] = {}
        for a in part.actions:
            by_route.setdefault(a.route, []).append(a)
        for route, got in by_route.items():
            actions.setdefault(route, tuple(got))
        for k, why in part.invalid.items():
            invalid.setdefault(k, list(why))
    routes = tuple(
        RouteStatus(key, _in_ref_order(parents[key], refs[key])) if key in parents else statuses[key]
        for key in sorted(statuses, key=order.__getitem__)
    )
    # Each route's Gateways of ours, for the policies' ancestors: a part's as it is, those of a route on several
    # parts again from its gathered parents (in the order of its parentRefs).
    route_gateways = {k: v for part in parts for k, v in part.route_gateways.items()}
    set_gateway = {ls.meta.key: ls.gateway for ls in inputs.listener_sets if ls.gateway}
    for rs in routes:
        if rs.route in parents:
            route_gateways[rs.route] = _gateways_of(rs.parents, set_gateway)
    # Policy standing reads only the routes the policies name.
    named = {f"{p.meta.namespace}/{t.name}" for p in inputs.policies for t in p.targets}
    attachment = resolve((r for r in inputs.routes if r.meta.key in named), inputs.policies)
    return Translation(
        listeners=tuple(lr for part in parts for lr in part.listeners),
        actions=tuple(a for key in sorted(actions, key=order.__getitem__) for a in actions[key]),
        routes=routes,
        gateways=tuple(g for part in parts for g in part.gateways),
        classes=class_statuses(inputs.classes, inputs.parameters or {}),
        policies=policy_statuses(inputs.policies, attachment, invalid, route_gateways),
        backend_tls=_backend_tls_statuses(inputs, route_gateways),
        refused={k: v for part in parts for k, v in part.refused.items()},
        backend_clients={k: v for part in parts for k, v in part.backend_clients.items()},
        listener_sets=tuple(st for part in parts for st in part.listener_sets),
        parts=dict(by_gateway),
    )


def _backend_tls_statuses(
    inputs: Inputs, route_gateways: Mapping[str, tuple[ParentRef, ...]]
) -> tuple[PolicyStatus, ...]:
    """Each BackendTLSPolicy's ancestors: the Gateways of ours whose routes send to a port it targets."""
    if not inputs.backend_tls:
        return ()
    services = inputs.services or {}
    resolution = resolve_backend_tls(inputs.backend_tls, services, inputs.configmaps or {})
    return backend_tls_statuses(inputs.backend_tls, resolution, inputs.routes, route_gateways, services)


def _gateways_of(parents: Sequence[ParentStatus], set_gateway: Mapping[str, str]) -> tuple[ParentRef, ...]:
    """Our Gateways among a route's parents, once each, in the parents' order (a parent names a Gateway, one of its
    listeners by sectionName or port, or one of its ListenerSets: `inputs.parent_gateway`)."""
    out: dict[ParentRef, None] = {}
    for p in parents:
        key = parent_gateway(p.parent, set_gateway)
        if key is not None:
            ns, _, name = key.partition("/")
            out[ParentRef(group=GATEWAY_GROUP, kind="Gateway", namespace=ns, name=name)] = None
    return tuple(out)


def _in_ref_order(parents: Sequence[ParentStatus], refs: Sequence[ParentRef]) -> tuple[ParentStatus, ...]:
    """A route's parents gathered from several parts, in the order of its parentRefs (one status per ref of ours;
    a ref written twice has its two statuses in turn)."""
    if len(parents) == 1:
        return (parents[0],)  # most routes: nothing to order
    slots: dict[ParentRef, list[int]] = {}
    for i, ref in enumerate(refs):
        slots.setdefault(ref, []).append(i)
    taken: dict[ParentRef, int] = {}
    placed: list[tuple[int, ParentStatus]] = []
    for ps in parents:
        n = taken.get(ps.parent, 0)
        taken[ps.parent] = n + 1
        placed.append((slots[ps.parent][n], ps))
    return tuple(ps for _, ps in sorted(placed, key=lambda x: x[0]))


def _translate_route(state: _Pass, route: HTTPRoute, local: RouteLocal, same_walk: bool) -> None:
    """One route, its own part read (`route_memo`): what it shares with the routes before it, its status per parent
    (a match an older route holds is a conflict) and its entries in the tables. `same_walk`: no route's shape changed
    since the last walk, so its conflicts are the ones that walk found and the tables are that walk's (not entered
    again); a route whose own part is the same object too keeps its status object."""
    key = route.meta.key
    held = state.routes.walked(key) if same_walk else None
    # The route memo hands back a held part only for an equal route with the same deps: the same part is the same
    # route (its generation too), and so the same status.
    if held is not None and held.local is local:
        walked = held
    else:
        statuses: list[ParentStatus] = []
        taken: list[str] = []
        # Two parentRefs can reach one listener (the Gateway, and the listener by sectionName): it takes the route
        # once, and counts it once.
        reached: set[tuple[str, str]] = set()
        for i, parent in enumerate(local.parents):
            known = held.taken[i] if held is not None else None
            conds, accepted, conflict = _parent_conditions(state, route, parent, local, known)
            statuses.append(ParentStatus(parent.ref, conds))
            taken.append(conflict)
            if accepted and not same_walk:
                _enter(state, route, local, parent.attachments, reached)
        gateways = _gateways_of(statuses, state.set_gateway)
        status = RouteStatus(key, tuple(statuses)) if statuses else None
        walked = Walked(route=route, local=local, status=status, gateways=gateways, taken=tuple(taken))
    state.routes.keep_walked(key, walked)
    state.actions.extend(local.actions)
    for k, why in local.invalid.items():
        state.invalid.setdefault(k, []).extend(why)
    if walked.status is not None:
        state.route_status.append(walked.status)
        state.route_gateways[key] = walked.gateways


def _route_deps(state: _Pass, route: HTTPRoute) -> RouteDeps:
    """What the route's own part reads besides the route and the pass's context (`route_memo.RouteDeps`)."""
    services, slices = state.inputs.services or {}, state.inputs.slices or {}
    refs = route.service_refs()
    tables = state.inputs.tables
    policies = state.attachment.rules
    return (
        tuple(services.get(k) for k in refs),
        tuple(slices.get(k) for k in refs),
        tuple(tables.get(RuleKey(route.meta.namespace, route.meta.name, r.index).text) for r in route.rules)
        if tables
        else (),
        tuple(policies.get((route.meta.key, r.index)) for r in route.rules) if policies else (),
    )


def _route_local(state: _Pass, route: HTTPRoute) -> RouteLocal:
    """The route's own part: its parents' attachment, its refs resolved, its rules' actions (`route_memo`)."""
    parents: list[RouteParent] = []
    for ref in route.parent_refs:
        if ref.group != GATEWAY_GROUP:
            continue
        key = f"{ref.namespace}/{ref.name}"
        if ref.kind == "Gateway" and (gw := state.gateways.get(key)) is not None:
            refused, atts = attach(route, ref, gw, state.own_views[key], state.labels)
        elif ref.kind == LISTENER_SET_KIND and (ls := state.sets.get(key)) is not None:
            gw = state.gateways[ls.gateway]
            refused, atts = _attach_to_set(route, ref, gw, ls, state)
        else:
            continue  # not one of our Gateways (or of their ListenerSets): its controller answers for it
        parents.append(RouteParent(ref, refused, tuple(atts)))
    # Backend resolution and the rules' own problems do not depend on the parent.
    services = state.inputs.services or {}
    grants, slices = state.inputs.grants, state.inputs.slices or {}
    resolved = {rule.index: resolve_refs(route, rule, grants, services) for rule in route.rules}
    mirrors = {
        rule.index: _mirrors_with_tls(
            state.backend_tls, resolve_mirrors(route, rule, grants, services, slices, state.seen_endpoints)
        )
        for rule in route.rules
    }
    # Per rule, its backendRefs' problems, then its mirrors'.
    ref_problems = [p for rule in route.rules for p in (*resolved[rule.index][1], *mirrors[rule.index].problems)]
    invalid: dict[tuple[str, str], list[str]] = {}
    actions, dropped = _rule_actions(
        state, route, resolved, mirrors, invalid, attached=any(p.refused is None for p in parents)
    )
    return RouteLocal(
        parents=tuple(parents),
        actions=tuple(actions),
        entries=tuple(
            RouteEntry(route.meta.key, a.rule, j, m) for a in actions for j, m in enumerate(route.rules[a.rule].matches)
        ),
        dropped=tuple(dropped),
        ref_problems=tuple(ref_problems),
        invalid={k: tuple(v) for k, v in invalid.items()},
    )


def _attach_to_set(
    route: HTTPRoute, ref: ParentRef, gw: Gateway, ls: ListenerSet, state: _Pass
) -> tuple[Condition | None, list[Attachment]]:
    """A parentRef naming a ListenerSet of one of our Gateways: attached to that set's listeners, if the Gateway took
    the set."""
    standing = state.set_views[gw.meta.key].standing[ls.meta.key]
    if not standing.attached:
        why = f"ListenerSet {ls.meta.key} is not accepted by Gateway {gw.meta.key}: {standing.conditions[0].message}"
        return cond("Accepted", False, RouteReason.NOT_ALLOWED_BY_LISTENERS, why, route.meta.generation), []
    views = [v for v in state.views[gw.meta.key] if v.owner.kind == LISTENER_SET_KIND and v.owner.key == ls.meta.key]
    return attach(route, ref, gw, views, state.labels, f"ListenerSet {ls.meta.key}")


def _rule_actions(
    state: _Pass,
    route: HTTPRoute,
    resolved: Mapping[int, Resolved],
    mirrors: Mapping[int, ResolvedMirrors],
    invalid: dict[tuple[str, str], list[str]],
    *,
    attached: bool,
) -> tuple[list[RuleAction], list[str]]:
    """The actions of the route's rules that can be served (none when no parent accepts the route), each under its
    policy, and the problems of those dropped."""
    dropped: list[str] = []
    builds: list[tuple[RouteRule, Build]] = []
    slot_tables = state.inputs.tables or {}
    slices = state.inputs.slices or {}
    for rule in route.rules:
        if rule.problems:
            dropped.extend(f"rules[{rule.index}].{q}" for q in rule.problems)
            continue
        if not attached:
            continue
        ok, _, error_weight = resolved[rule.index]
        prev = slot_tables.get(RuleKey(route.meta.namespace, route.meta.name, rule.index).text)
        tls, eps = _with_backend_tls(state.backend_tls, ok, target_endpoints(ok, slices, state.seen_endpoints))
        build = partial(
            state.memo.build,
            route,
            rule,
            ok,
            error_weight,
            eps,
            previous_table=prev,
            mirrors=mirrors[rule.index].mirrors,
            tls=tls,
        )
        builds.append((rule, build))
    actions: list[RuleAction] = []
    for action, problems in with_policies(route, builds, state.attachment, invalid):
        dropped.extend(problems)
        if action is not None:
            actions.append(action)
    return actions, dropped


def _mirrors_with_tls(resolution: BackendTlsResolution, resolved: ResolvedMirrors) -> ResolvedMirrors:
    """The mirrors with their Service ports' TLS (`_with_backend_tls`: a refused port's mirror gets no endpoint)."""
    if not resolution.ports or not resolved.mirrors:
        return resolved
    out: list[RequestMirror] = []
    for m in resolved.mirrors:
        got = resolution.for_port(m.namespace, m.service, m.port)
        if isinstance(got, UpstreamTls):
            m = replace(m, tls=got)
        elif isinstance(got, Refused):
            m = replace(m, endpoints=())
        out.append(m)
    return replace(resolved, mirrors=tuple(out))


def _with_backend_tls(
    resolution: BackendTlsResolution,
    resolved: Sequence[tuple[BackendTarget, ServiceInfo]],
    endpoints: tuple[tuple[Endpoint, ...], ...],
) -> tuple[tuple[UpstreamTls | None, ...], tuple[tuple[Endpoint, ...], ...]]:
    """Each target's TLS (its Service port's BackendTLSPolicy), and the endpoints with those of a port whose policy
    cannot be served taken away: a request to it fails rather than going in cleartext (`backend_tls.Refused`)."""
    if not resolution.ports:
        return (), endpoints
    tls: list[UpstreamTls | None] = []
    eps: list[tuple[Endpoint, ...]] = []
    for (t, _), e in zip(resolved, endpoints, strict=True):
        got = resolution.for_port(t.namespace, t.service, t.port)
        tls.append(got if isinstance(got, UpstreamTls) else None)
        eps.append(() if isinstance(got, Refused) else e)
    return tuple(tls), tuple(eps)


def _parent_conditions(
    state: _Pass, route: HTTPRoute, parent: RouteParent, local: RouteLocal, taken: str | None = None
) -> tuple[tuple[Condition, ...], bool, str]:
    """The route's conditions on one parent, whether that parent accepts it, and the conflict it is told ("":
    none). `taken`: that conflict as the last walk found it (the same walk again), else found in the tables."""
    g = route.meta.generation
    refused, actions, dropped, ref_problems = parent.refused, local.actions, local.dropped, local.ref_problems
    if refused is None and not actions:
        why = "no rule can be served: " + ("; ".join(dropped) or "the route has none")
        refused = cond("Accepted", False, RouteReason.UNSUPPORTED_VALUE, why, g)
    conds = [refused or cond("Accepted", True, RouteReason.ACCEPTED, "", g)]
    if ref_problems:
        why = "; ".join(p.message for p in ref_problems)
        conds.append(cond("ResolvedRefs", False, ref_problems[0].reason, why, g))
    else:
        conds.append(cond("ResolvedRefs", True, RouteReason.RESOLVED_REFS, "", g))
    if refused is None and dropped:
        why = "Dropped Rule(s): " + "; ".join(dropped)
        conds.append(cond("PartiallyInvalid", True, RouteReason.UNSUPPORTED_VALUE, why, g))
    if refused is not None:
        taken = ""
    elif taken is None:
        taken = taken_matches(route, actions, parent.attachments, state.holders)
    if taken:
        conds.append(cond("Conflicted", True, RouteReason.RULE_MATCH_CONFLICT, taken, g))
    return tuple(conds), refused is None, taken


def _enter(
    state: _Pass,
    route: HTTPRoute,
    local: RouteLocal,
    atts: Sequence[Attachment],
    reached: set[tuple[str, str]],
) -> None:
    """The route's matches into the tables of the listeners it is attached to (each listener once per route)."""
    for a in atts:
        if (a.gateway, a.listener) in reached:
            continue
        reached.add((a.gateway, a.listener))
        state.attached_count[(a.gateway, a.listener)] = state.attached_count.get((a.gateway, a.listener), 0) + 1
        table = state.tables.setdefault((a.gateway, a.listener), {})
        holders = state.holders.setdefault((a.gateway, a.listener), {})
        for entry in local.entries:
            # No hostname on either side: every host, the catch-all taken after exact and `*.` hosts.
            for h in a.hostnames or (CATCH_ALL,):
                held = (route, entry)
                table.setdefault(h, []).append(held)
                holders.setdefault(h, {}).setdefault(entry.match, held)


def _gateway_outputs(
    state: _Pass, refused_classes: Mapping[str, str], same_walk: bool = False
) -> tuple[tuple[ListenerRoutes, ...], tuple[GatewayStatus, ...], dict[str, tuple[str, ...]]]:
    """Every serving listener's route table, every Gateway's status with its listeners', and the Gateways whose
    tables break a bound of the model, with why (their tables are left out; the other Gateways' stand). A Gateway
    whose class is not accepted (`refused_classes`: why) is not Accepted nor Programmed (`refused_by_class`); its
    tables are still built, so a data plane provisioned before keeps getting its routes. `same_walk`: the tables
    and counts are the last walk's (`route_memo`), not built again."""
    memo = state.routes
    if same_walk:
        state.attached_count = dict(memo.counts)
    else:
        memo.counts = dict(state.attached_count)
    listeners: list[ListenerRoutes] = []
    gateway_status: list[GatewayStatus] = []
    refused: dict[str, tuple[str, ...]] = {}
    for key, gw in sorted(state.gateways.items()):
        listener_status: list[ListenerStatus] = []
        tables: list[ListenerRoutes] = []
        for v in state.views[key]:
            if v.owner.kind == "Gateway":
                n = state.attached_count.get((key, v.key), 0)
                listener_status.append(ListenerStatus(v.listener.name, v.supported_kinds, n, v.conditions))
            # Every listener that serves, routes or none: one without routes still takes its hosts from a less
            # specific listener of its port (and answers 404), so the port's table must know it.
            if v.usable and v.serves and key not in refused:
                at = (key, v.key)
                outcome = memo.outcomes.get(at) if same_walk else None
                if outcome is None:
                    try:
                        outcome = _listener_routes(key, v, state.tables.get(at, {}))
                    except SpecError as exc:
                        outcome = tuple(f"listener {v.key}: {p}" for p in exc.problems)
                    memo.outcomes[at] = outcome
                if isinstance(outcome, ListenerRoutes):
                    tables.append(outcome)
                else:
                    refused[key] = outcome
        if key not in refused:
            listeners.extend(tables)
        client = backend_client_view(gw, state.inputs.grants, state.inputs.secrets or {})
        if client is not None and client.certificate is not None:
            state.backend_clients[key] = client.certificate
        conditions = gateway_acceptance(gw, state.own_views[key], client)
        if (why := refused_classes.get(gw.class_name)) is not None:
            g, name = gw.meta.generation, gw.class_name
            conditions = refused_by_class(conditions, name, why, g, accepted=True)
            listener_status = [
                replace(ls, conditions=refused_by_class(ls.conditions, name, why, g, accepted=False))
                for ls in listener_status
            ]
        attached_sets = sum(1 for st in state.set_views[key].standing.values() if st.attached)
        gateway_status.append(GatewayStatus(key, conditions, tuple(listener_status), attached_sets))
    return tuple(listeners), tuple(gateway_status), refused


def _listener_set_statuses(state: _Pass) -> tuple[ListenerSetStatus, ...]:
    """Each ListenerSet naming a Gateway of the pass: its conditions, and its listeners' with their routes counted."""
    out: list[ListenerSetStatus] = []
    for key in sorted(state.gateways):
        for set_key, st in state.set_views[key].standing.items():
            listeners = tuple(
                ListenerStatus(
                    v.listener.name, v.supported_kinds, state.attached_count.get((key, v.key), 0), v.conditions
                )
                for v in st.listeners
            )
            out.append(ListenerSetStatus(set_key, key, st.conditions, listeners))
    return tuple(out)


def _listener_routes(
    gateway: str, v: ListenerView, by_host: Mapping[str, Sequence[tuple[HTTPRoute, RouteEntry]]]
) -> ListenerRoutes:
    """One listener's table: per virtual host, its entries in precedence order."""
    hosts = tuple(
        VirtualHost(h, tuple(e for _, e in sorted(entries, key=lambda x: precedence(*x))))
        for h, entries in sorted(by_host.items())
    )
    return ListenerRoutes(
        gateway,
        v.key,
        v.listener.port,
        hosts,
        hostname=v.listener.hostname,
        certificate=v.certificate,
        client_validation=v.client_validation,
    )


def gateway_content(translation: Translation, gateway: str, uid: str = "") -> GenerationContent:
    """What Gateway `gateway` (`namespace/name`)'s data plane serves: its listeners' route tables, and the split of
    every rule they refer to (host-less, selected by the table), stamped with the Gateway's metadata.uid `uid`, which
    its replicas compare (core/model/identity.py). TrafficSplits are not in it: the chart's shared
    gateway keeps serving those. A Gateway with no route attached has an empty table, not None, so its data plane
    serves the spec's 404 for every request rather than TrafficSplits. Raises `SpecError` for a Gateway whose table
    breaks a bound of the model (`Translation.refused`, or the bounds across its listeners): that Gateway alone
    cannot be served, and its data plane keeps what it holds."""
    if gateway in translation.refused:
        raise SpecError(list(translation.refused[gateway]))
    listeners = tuple(lr for lr in translation.listeners if lr.gateway == gateway)
    used = {e.rule_key for lr in listeners for vh in lr.hosts for e in vh.entries}
    actions = tuple(a for a in translation.actions if a.key in used)
    return GenerationContent(
        splits=tuple(a.split for a in actions if a.split is not None),
        routes=GatewayRoutes(
            gateway=gateway,
            gateway_uid=uid,
            listeners=listeners,
            actions=actions,
            backend_client_certificate=translation.backend_clients.get(gateway),
        ),
    )


class ContentMemo:
    """Each Gateway's content (`gateway_content`) by the part of the translation it came from and the Gateway's uid:
    a Gateway whose part is the one of the last translation (its inputs did not change, `TranslationMemo`) keeps its
    content, so a pass that another Gateway's change started costs it nothing. Without it every pass built the
    content of every Gateway with replicas, and a neighbour holding 6,100 matches cost each of them ~46 ms (issue 28's
    neighbour case). The content of a part is a function of the part: its listeners are the Gateway's alone, and the
    actions they name are built from the same inputs in any part that holds their route. A Gateway gone from the
    translation is forgotten; one whose table is refused is not kept (`gateway_content` raises every time)."""

    __slots__ = ("_held", "built")

    def __init__(self) -> None:
        self._held: dict[str, tuple[_Part, str, GenerationContent]] = {}
        self.built: Counter[str] = Counter()  # contents built per Gateway, for the tests

    def content(
        self,
        translation: Translation,
        gateway: str,
        uid: str = "",
        build: Callable[[Translation, str, str], GenerationContent] = gateway_content,
    ) -> GenerationContent:
        if len(self._held) > len(translation.parts):  # one more than there are Gateways at most
            for gone in [k for k in self._held if k not in translation.parts]:
                del self._held[gone]
        part = translation.parts.get(gateway)
        held = self._held.get(gateway)
        if part is not None and held is not None and held[0] is part and held[1] == uid:
            return held[2]
        self.built[gateway] += 1
        content = build(translation, gateway, uid)
        if part is not None:
            self._held[gateway] = (part, uid, content)
        return content
