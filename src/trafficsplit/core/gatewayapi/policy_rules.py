"""TrafficSplitPolicies on HTTPRoute rules: each rule built under the policy attached to it (a policy one rule refuses
applies to none of the route's rules), and each policy's `status.ancestors`. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from trafficsplit.core.gatewayapi.conditions import AncestorStatus, PolicyStatus, cond
from trafficsplit.core.gatewayapi.httproute import HTTPRoute, ParentRef, RouteRule
from trafficsplit.core.gatewayapi.policy import MAX_ANCESTORS, Outcome, Policy, PolicyReason, Resolution, worst
from trafficsplit.core.gatewayapi.reading import GATEWAY_GROUP
from trafficsplit.core.model.routes import RuleAction

# One rule's `build_action` with everything but the policy bound.
Build = Callable[..., tuple[RuleAction | None, list[str]]]


def with_policies(
    route: HTTPRoute,
    builds: Sequence[tuple[RouteRule, Build]],
    attachment: Resolution,
    invalid: dict[tuple[str, str], list[str]],
) -> list[tuple[RuleAction | None, list[str]]]:
    """Each rule built under the policy attached to it. A policy one of the route's rules refuses (a problem the rule
    does not have without it) is `Invalid` for the route and applies to none of its rules: they keep their defaults,
    and the route's own status stays what the route alone earns."""
    chosen = {rule.index: attachment.for_rule(route.meta.key, rule.index) for rule, _ in builds}
    out: dict[int, tuple[RuleAction | None, list[str]]] = {}
    for rule, build in builds:
        pol = chosen[rule.index]
        out[rule.index] = got = build(policy=pol.settings if pol else None)
        if got[1] and pol is not None and not build(policy=None)[1]:
            invalid.setdefault((pol.key, route.meta.key), []).extend(got[1])
    for rule, build in builds:
        pol = chosen[rule.index]
        if pol is not None and (pol.key, route.meta.key) in invalid:
            out[rule.index] = build(policy=None)
    return [out[rule.index] for rule, _ in builds]


def policy_statuses(
    policies: Sequence[Policy],
    attachment: Resolution,
    invalid: Mapping[tuple[str, str], Sequence[str]],
    route_gateways: Mapping[str, Sequence[ParentRef]],
) -> tuple[PolicyStatus, ...]:
    """Per policy, `status.ancestors`: one entry per Gateway of ours a target route is attached to (the worst outcome
    over its routes there), and one per target route that does not exist; at most MAX_ANCESTORS."""
    out: list[PolicyStatus] = []
    for pol in sorted(policies, key=lambda q: q.key):
        per = _outcomes_by_ancestor(pol, attachment, invalid, route_gateways)
        ancestors: list[AncestorStatus] = []
        for ref, outcomes in list(per.items())[:MAX_ANCESTORS]:
            o = worst(outcomes)
            ok = o.reason is PolicyReason.ACCEPTED
            c = cond("Accepted", ok, o.reason, o.message, pol.meta.generation)
            gateway = f"{ref.namespace}/{ref.name}" if ref.kind == "Gateway" else None
            ancestors.append(AncestorStatus(ref, (c,), gateway))
        out.append(PolicyStatus(pol.key, tuple(ancestors)))
    return tuple(out)


def _outcomes_by_ancestor(
    pol: Policy,
    attachment: Resolution,
    invalid: Mapping[tuple[str, str], Sequence[str]],
    route_gateways: Mapping[str, Sequence[ParentRef]],
) -> dict[ParentRef, list[Outcome]]:
    """The policy's outcome on each target route, by ancestor: the Gateways the route is attached to, or the route
    itself when it does not exist."""
    per: dict[ParentRef, list[Outcome]] = {}
    for route_key in dict.fromkeys(f"{pol.meta.namespace}/{t.name}" for t in pol.targets):
        outcome = attachment.outcomes.get((pol.key, route_key), Outcome(PolicyReason.ACCEPTED, ""))
        why = invalid.get((pol.key, route_key))
        if why:
            outcome = Outcome(PolicyReason.INVALID, f"HTTPRoute {route_key}: " + "; ".join(why))
        gateways = route_gateways.get(route_key, ())
        if not gateways and outcome.reason is PolicyReason.TARGET_NOT_FOUND and "/" in route_key:
            ns, name = route_key.split("/", 1)
            per.setdefault(ParentRef(group=GATEWAY_GROUP, kind="HTTPRoute", namespace=ns, name=name), []).append(
                outcome
            )
        for gw in gateways:
            per.setdefault(gw, []).append(outcome)
    return per
