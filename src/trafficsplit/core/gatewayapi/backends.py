"""A rule's backendRefs: which resolve to a Service port (kind, ReferenceGrant, existence, port) and the
`ResolvedRefs` problems of those that do not, whose weight is the rule's 500 share; the names they have in the rule's
split, the weights it picks with, and their endpoints. Its RequestMirror backendRefs resolve by the same rules: one
that does not is a `ResolvedRefs` problem too, and is not mirrored to (the spec: "not configure this backend"). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trafficsplit.core.control.resolve import ServiceInfo, SliceInfo, endpoints_for
from trafficsplit.core.gatewayapi.conditions import RouteReason
from trafficsplit.core.gatewayapi.httproute import BackendRef, HTTPRoute, RouteRule
from trafficsplit.core.gatewayapi.objects import GrantFrom, ReferenceGrant
from trafficsplit.core.gatewayapi.reading import GATEWAY_GROUP
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.filters import RequestMirror
from trafficsplit.core.model.routes import BackendTarget
from trafficsplit.core.model.rules import Endpoint, is_dns_label
from trafficsplit.core.model.weights import Weights


@dataclass(frozen=True, slots=True)
class RefProblem:
    reason: RouteReason
    message: str


# A rule's backendRefs that resolve (each with its Service), the problems of those that do not, and their weight.
Resolved = tuple[list[tuple[BackendTarget, ServiceInfo]], list[RefProblem], int]


def resolve_refs(
    route: HTTPRoute,
    rule: RouteRule,
    grants: Sequence[ReferenceGrant],
    services: Mapping[tuple[str, str], ServiceInfo],
) -> Resolved:
    """The rule's backendRefs that resolve, with the problems of those that do not and their total weight."""
    ok: list[tuple[BackendTarget, ServiceInfo]] = []
    problems: list[RefProblem] = []
    error_weight = 0
    names = split_backend_names(rule.backend_refs)
    for j, ref in enumerate(rule.backend_refs):
        svc = services.get((ref.namespace, ref.name))
        problem = _ref_problem(route, f"rules[{rule.index}].backendRefs[{j}]", ref, svc, grants)
        if problem is not None:
            problems.append(problem)
            error_weight += ref.weight
            continue
        assert svc is not None and ref.port is not None
        target = BackendTarget(
            backend=names[j],
            namespace=ref.namespace,
            service=ref.name,
            port=ref.port,
            weight=ref.weight,
            filters=ref.filters,
        )
        ok.append((target, svc))
    return ok, problems, error_weight


@dataclass(frozen=True, slots=True)
class ResolvedMirrors:
    """A rule's RequestMirror filters whose backendRef resolves (with their endpoints), and the problems of the rest."""

    mirrors: tuple[RequestMirror, ...] = ()
    problems: tuple[RefProblem, ...] = ()


def resolve_mirrors(
    route: HTTPRoute,
    rule: RouteRule,
    grants: Sequence[ReferenceGrant],
    services: Mapping[tuple[str, str], ServiceInfo],
    slices: Mapping[tuple[str, str], Sequence[SliceInfo]],
    seen: dict[tuple[str, str, int], tuple[Endpoint, ...]],
) -> ResolvedMirrors:
    """The rule's mirrors that resolve, in order, each with its Service port's endpoints; `seen` as in
    `target_endpoints`."""
    if not rule.mirrors:
        return ResolvedMirrors()
    ok: list[RequestMirror] = []
    problems: list[RefProblem] = []
    for m in rule.mirrors:
        svc = services.get((m.ref.namespace, m.ref.name))
        where = f"rules[{rule.index}].filters[{m.filter_index}].requestMirror.backendRef"
        problem = _ref_problem(route, where, m.ref, svc, grants)
        if problem is not None:
            problems.append(problem)
            continue
        assert svc is not None and m.ref.port is not None
        ok.append(
            RequestMirror(
                namespace=m.ref.namespace,
                service=m.ref.name,
                port=m.ref.port,
                numerator=m.numerator,
                denominator=m.denominator,
                endpoints=_port_endpoints(svc, m.ref.port, slices, seen),
            )
        )
    return ResolvedMirrors(tuple(ok), tuple(problems))


def _ref_problem(
    route: HTTPRoute, where: str, ref: BackendRef, svc: ServiceInfo | None, grants: Sequence[ReferenceGrant]
) -> RefProblem | None:
    """Why one backendRef does not resolve (the spec's reasons, in the order checked), or None."""
    source = GrantFrom(GATEWAY_GROUP, "HTTPRoute", route.meta.namespace)
    if (ref.group, ref.kind) != ("", "Service"):
        return RefProblem(
            RouteReason.INVALID_KIND, f"{where}: {ref.group or 'core'}/{ref.kind} is not a supported kind"
        )
    if ref.namespace != route.meta.namespace and not any(
        g.meta.namespace == ref.namespace and g.permits(source, "", "Service", ref.name) for g in grants
    ):
        return RefProblem(
            RouteReason.REF_NOT_PERMITTED,
            f"{where}: Service {ref.namespace}/{ref.name} is in another namespace and no ReferenceGrant there "
            "permits it",
        )
    if svc is None:
        return RefProblem(RouteReason.BACKEND_NOT_FOUND, f"{where}: Service {ref.namespace}/{ref.name} not found")
    if ref.port is None or all(p.port != ref.port for p in svc.ports):
        have = ",".join(str(p.port) for p in svc.ports) or "none"
        return RefProblem(
            RouteReason.BACKEND_NOT_FOUND, f"{where}: Service {svc.key} has no port {ref.port} (ports: {have})"
        )
    if not is_dns_label(ref.name):
        return RefProblem(RouteReason.BACKEND_NOT_FOUND, f"{where}: {ref.name!r} is not a Service name")
    return None


def split_backend_names(refs: Sequence[BackendRef]) -> list[str]:
    """Each backendRef's name in its rule's split: the Service's, made unique within the rule (`<name>-<index>`)
    when two refs name the same one."""
    names = [ref.name for ref in refs]
    return [n if names.count(n) == 1 else f"{n[:58]}-{j}" for j, n in enumerate(names)]


def find_rule(route: HTTPRoute, rule: str) -> RouteRule:
    """A rule by index (`0`) or by its `name`; SpecError naming the rules there are."""
    for r in route.rules:
        if rule == str(r.index) or (r.name is not None and rule == r.name):
            return r
    have = ", ".join(str(r.index) + (f" ({r.name})" if r.name else "") for r in route.rules)
    raise SpecError([f"{route.meta.key} has no rule {rule[:64]!r}; its rules: {have}"])


def rule_backends(rule: RouteRule) -> list[tuple[str, int]]:
    """A rule's split backends as written, (split name, weight), unvalidated (all weights may be 0, or none be a
    Service): its core Service backendRefs (whether each resolves is the cluster's to say: the weight of one that
    does not answers 500 instead)."""
    names = split_backend_names(rule.backend_refs)
    return [
        (names[j], ref.weight) for j, ref in enumerate(rule.backend_refs) if (ref.group, ref.kind) == ("", "Service")
    ]


def rule_weights(rule: RouteRule) -> Weights:
    """The weights a rule's split picks with, by the split's backend names (`rule_backends`); SpecError when they
    are no split (no Service backendRef, or a total of 0)."""
    return Weights.of(rule_backends(rule))


def target_endpoints(
    resolved: Sequence[tuple[BackendTarget, ServiceInfo]],
    slices: Mapping[tuple[str, str], Sequence[SliceInfo]],
    seen: dict[tuple[str, str, int], tuple[Endpoint, ...]],
) -> tuple[tuple[Endpoint, ...], ...]:
    """Each resolved target's endpoints, in order; `seen` keeps them per Service port for the translation (1,000
    routes to the same two Services read their slices twice, not 2,000 times)."""
    return tuple(_port_endpoints(svc, t.port, slices, seen) for t, svc in resolved)


def _port_endpoints(
    svc: ServiceInfo,
    port: int,
    slices: Mapping[tuple[str, str], Sequence[SliceInfo]],
    seen: dict[tuple[str, str, int], tuple[Endpoint, ...]],
) -> tuple[Endpoint, ...]:
    """The endpoints of one port of a Service (which has it), read once per translation."""
    k = (svc.namespace, svc.name, port)
    if k not in seen:
        seen[k] = endpoints_for(
            svc, next(p for p in svc.ports if p.port == port), slices.get((svc.namespace, svc.name), ())
        )
    return seen[k]
