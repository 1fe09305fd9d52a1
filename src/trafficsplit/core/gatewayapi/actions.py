"""One HTTPRoute rule → its `RuleAction`: the rule's split, built as a TrafficSplit's is (a `SplitSpec`, compiled by
`compile_split`, whose values check themselves) so the same checks apply, its 500 share, its filters, timeouts, retry
and resolved mirrors; and the memo that builds only the rules whose inputs changed. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.control.resolve import ServiceInfo
from trafficsplit.core.gatewayapi.httproute import HTTPRoute, RouteRule
from trafficsplit.core.gatewayapi.policy import PolicySettings
from trafficsplit.core.gatewayapi.reading import Meta
from trafficsplit.core.gatewayapi.sessions import RuleSession, rule_session
from trafficsplit.core.model.assignment import SlotTable
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.filters import RequestMirror
from trafficsplit.core.model.persistent import StickyMode
from trafficsplit.core.model.routes import BackendTarget, RuleAction, RuleKey
from trafficsplit.core.model.rules import Endpoint
from trafficsplit.core.model.splitspec import BackendSpec, SplitSpec
from trafficsplit.core.model.upstream_tls import UpstreamTls

# What a rule's action is built from: the route's metadata, the rule, its resolved targets and whether each one's
# Service port is H2C, their error weight, each target's endpoints, the attached policy's settings, the rule's previous
# slot table (`assignment: minimal`), its resolved mirrors (with their endpoints) and each target's TLS (a
# BackendTLSPolicy's).
_ActionKey = tuple[
    Meta,
    RouteRule,
    tuple[BackendTarget, ...],
    tuple[bool, ...],
    int,
    tuple[tuple[Endpoint, ...], ...],
    PolicySettings | None,
    SlotTable | None,
    tuple[RequestMirror, ...],
    tuple[UpstreamTls | None, ...],
]


class ActionMemo:
    """Rule actions of the last translation by what they were built from (`_ActionKey`): a translation builds only
    the rules whose inputs changed, so one weight patched among 1,000 routes compiles one split, as
    `reconcile.CompileMemo` does for TrafficSplits. The operator owns one; each translation keeps only what it used
    (bounded by the rules there are)."""

    __slots__ = ("_last", "_used")

    def __init__(self) -> None:
        self._last: dict[_ActionKey, tuple[RuleAction | None, tuple[str, ...]]] = {}
        self._used: dict[_ActionKey, tuple[RuleAction | None, tuple[str, ...]]] = {}

    def build(
        self,
        route: HTTPRoute,
        rule: RouteRule,
        resolved: Sequence[tuple[BackendTarget, ServiceInfo]],
        error_weight: int,
        endpoints: tuple[tuple[Endpoint, ...], ...],
        *,
        policy: PolicySettings | None = None,
        previous_table: SlotTable | None = None,
        mirrors: tuple[RequestMirror, ...] = (),
        tls: tuple[UpstreamTls | None, ...] = (),
    ) -> tuple[RuleAction | None, list[str]]:
        targets = tuple(t for t, _ in resolved)
        h2c = tuple(svc.h2c(t.port) for t, svc in resolved)  # the Service ports' appProtocol, which the split reads
        key = (route.meta, rule, targets, h2c, error_weight, endpoints, policy, previous_table, mirrors, tls)
        got = self._used.get(key) or self._last.get(key)
        if got is None:
            action, problems = build_action(
                route,
                rule,
                resolved,
                error_weight,
                endpoints,
                policy=policy,
                previous_table=previous_table,
                mirrors=mirrors,
                tls=tls,
            )
            got = (action, tuple(problems))
        self._used[key] = got
        return got[0], list(got[1])

    def finish(self) -> None:
        """The translation is done: what it did not use is forgotten."""
        self._last, self._used = self._used, {}


def build_action(
    route: HTTPRoute,
    rule: RouteRule,
    resolved: Sequence[tuple[BackendTarget, ServiceInfo]],
    error_weight: int,
    endpoints: tuple[tuple[Endpoint, ...], ...],
    *,
    policy: PolicySettings | None = None,
    previous_table: SlotTable | None = None,
    mirrors: tuple[RequestMirror, ...] = (),
    tls: tuple[UpstreamTls | None, ...] = (),
) -> tuple[RuleAction | None, list[str]]:
    """The rule's split, built as a TrafficSplit's is; or the reasons it cannot be (the rule is then dropped).
    `endpoints`: each resolved target's, in order; `policy`: an attached TrafficSplitPolicy's settings, applied over
    the split's defaults; `mirrors`: its RequestMirror filters that resolved (gatewayapi.backends); `tls`: each
    target's TLS, in order (none: cleartext to all)."""
    session, problems = rule_session(route, rule)
    if problems:
        return None, problems
    targets = tuple(t for t, _ in resolved)
    if sum(t.weight for t in targets) == 0:  # no backendRef, none resolves, or all at weight 0
        return RuleAction(
            route=route.meta.key,
            rule=rule.index,
            split=None,
            targets=targets,
            error_weight=error_weight,
            filters=rule.filters,
            timeouts=rule.timeouts,
            retry=rule.retry,
            mirrors=mirrors,
        ), []
    by_backend = {t.backend: eps for t, eps in zip(targets, endpoints, strict=True)}
    try:
        spec = rule_spec(
            route,
            rule,
            targets,
            session,
            h2c=frozenset(t.backend for t, svc in resolved if svc.h2c(t.port)),
            tls={t.backend: x for t, x in zip(targets, tls, strict=True) if x is not None} if tls else None,
        )
        if policy is not None:  # the policy hook: core/gatewayapi/policy.py
            spec = policy.apply(spec)
        split = compile_split(
            spec, by_backend, observed_generation=route.meta.generation, previous_table=previous_table
        )
    except SpecError as exc:
        return None, [f"rules[{rule.index}]: {q}" for q in exc.problems]
    return RuleAction(
        route=route.meta.key,
        rule=rule.index,
        split=split,
        targets=targets,
        error_weight=error_weight,
        filters=rule.filters,
        timeouts=rule.timeouts,
        retry=rule.retry,
        mirrors=mirrors,
    ), []


def rule_spec(
    route: HTTPRoute,
    rule: RouteRule,
    targets: Sequence[BackendTarget],
    session: RuleSession,
    *,
    h2c: frozenset[str] = frozenset(),
    tls: Mapping[str, UpstreamTls] | None = None,
) -> SplitSpec:
    """The rule's split as a TrafficSplit would say it (host-less: the route table selects the rule). A session is
    the sealed persistent one (core/model/persistent.py): its cookie (or its header) carries the backend, so a weight
    change moves no existing session; the Gateway's data plane holds the keys (provisioned per Gateway)."""
    persistent = session.persistent
    return SplitSpec(
        namespace=route.meta.namespace,
        name=RuleKey(route.meta.namespace, route.meta.name, rule.index).split_name,
        hosts=(),  # the route table selects the rule, by its listeners' virtual hosts
        service=None,
        backends=tuple(
            # GEP-1619: a session keeps its backend even at weight 0, so a weight-0 backend drains (only new
            # sessions follow the weights); a backendRef removed from the rule moves its sessions.
            BackendSpec(
                name=t.backend,
                service=t.service,
                port=t.port,
                weight=t.weight,
                drain=persistent and t.weight == 0,
                h2c=t.backend in h2c,  # `h2c`: the backends whose Service port is kubernetes.io/h2c
                tls=(tls or {}).get(t.backend),  # `tls`: the backends' BackendTLSPolicy TLS, by name
            )
            for t in targets
        ),
        cookie=session.cookie,
        key_header=session.header,
        endpoint_affinity=False,
        matches=(),
        debug_headers=False,
        sticky_mode=StickyMode.PERSISTENT if persistent else StickyMode.REHASH,
    )
