"""TrafficSplitPolicy: what a TrafficSplit can say beyond weights, attached to HTTPRoutes (Gateway API policy
attachment, GEP-713 style). Pure.

HTTPRoute weights stay the interface for the split; the policy carries the rest: `assignment` (hash, minimal),
`sticky.mode` (rehash, persistent), `sticky.drain`, the key header, `endpointAffinity`/`endpointPoints`, the cookie's
attributes (its name and Max-Age stay `sessionPersistence`'s) and `debugHeaders`. Each field is parsed by the
TrafficSplit's own readers (`core.spec`) under the same path, and checked by the same values (`CookieSettings`,
the compiled split), so a policy and a TrafficSplit refuse the same settings with the same words.

Attachment (`resolve`): `spec.targetRefs` name HTTPRoutes in the policy's namespace, a whole route or one rule by its
`name` (`sectionName`). Per rule, a policy naming the rule beats one naming the whole route (the more specific
wins, and both stay Accepted); two policies at the same level conflict: the oldest (creationTimestamp, then name)
wins and the other is `Accepted: False, Conflicted` for that route. A route or rule that does not exist is
`TargetNotFound`. A policy whose settings the rule's split refuses (`sticky.mode: persistent` on a rule without a
session cookie, say) is `Invalid` for that route and applies to none of its rules (the route keeps its defaults).

The status (`status.ancestors`) is per Gateway the target route is attached to (the translation knows which are ours,
`gatewayapi.policy_rules.policy_statuses`); a target route that does not exist has its own entry, the route as ancestor.

A rule's `assignment: minimal` table across operator restarts is `gatewayapi.tables`'.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.control.plan import Plan
from trafficsplit.core.control.spec import (
    Problems,
    get_field,
    parse_assignment,
    parse_cookie_attributes,
    parse_endpoint_points,
    parse_key_header,
    parse_sticky_mode,
)
from trafficsplit.core.gatewayapi.httproute import HTTPRoute, RouteRule, SessionType
from trafficsplit.core.gatewayapi.reading import GATEWAY_GROUP, Meta
from trafficsplit.core.model.assignment import AssignmentMode, minimal_moved_share
from trafficsplit.core.model.compiled import endpoint_points_problems
from trafficsplit.core.model.cookie import CookieSettings, SameSite
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.fields import unknown_fields
from trafficsplit.core.model.persistent import StickyMode, drain_mode_problems, persistent_moved_share
from trafficsplit.core.model.rules import is_dns_subdomain, key_header_problems
from trafficsplit.core.model.splitspec import BackendSpec, SplitSpec

POLICY_GROUP = "trafficsplit.dev"
POLICY_KIND = "TrafficSplitPolicy"
MAX_TARGET_REFS = 16  # the CRD's bound
MAX_ANCESTORS = 16  # the PolicyStatus bound (upstream's)
MAX_NAME = 253
MAX_SECTION_NAME = 253

_COOKIE_ATTRIBUTES = MappingProxyType(
    dict.fromkeys(("path", "domain", "secure", "httpOnly", "sameSite", "partitioned"))
)
# Every field a policy's spec may have (tests/unit/test_gateway_policy.py keeps it equal to the CRD's schema).
POLICY_FIELDS: Mapping[str, Any] = MappingProxyType(
    {
        "targetRefs": MappingProxyType(dict.fromkeys(("group", "kind", "name", "sectionName"))),
        "assignment": None,
        "sticky": MappingProxyType(
            {
                "mode": None,
                "drain": None,
                "cookie": _COOKIE_ATTRIBUTES,
                "header": MappingProxyType({"name": None}),
                "endpointAffinity": None,
                "endpointPoints": None,
            }
        ),
        "debugHeaders": None,
    }
)


class PolicyReason(StrEnum):
    """GEP-713's reasons for a policy's `Accepted` condition."""

    ACCEPTED = "Accepted"
    CONFLICTED = "Conflicted"
    INVALID = "Invalid"
    TARGET_NOT_FOUND = "TargetNotFound"


@dataclass(frozen=True, slots=True)
class PolicyTarget:
    name: str  # an HTTPRoute in the policy's namespace (group and kind are checked by the parser)
    section_name: str | None = None  # a rule's `name`; None: the whole route


@dataclass(frozen=True, slots=True, kw_only=True)
class CookieAttributes:
    """The cookie attributes a policy sets; the rule's `sessionPersistence` gives the name and Max-Age."""

    path: str = "/"
    domain: str | None = None
    secure: bool = False
    http_only: bool = True
    same_site: SameSite = SameSite.LAX
    partitioned: bool = False

    def __post_init__(self) -> None:
        self.settings("probe")  # CookieSettings checks the attributes (the name is the rule's, checked there)

    def settings(self, name: str, max_age: int | None = None) -> CookieSettings:
        return CookieSettings(
            name=name,
            max_age=max_age,
            path=self.path,
            domain=self.domain,
            secure=self.secure,
            http_only=self.http_only,
            same_site=self.same_site,
            partitioned=self.partitioned,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySettings:
    """What a policy sets on a rule's split; None leaves the rule's own default."""

    assignment: AssignmentMode | None = None
    sticky_mode: StickyMode | None = None
    drain: bool | None = None  # persistent: a backendRef at weight 0 keeps its sessions until idle (the default)
    key_header: str | None = None
    cookie: CookieAttributes | None = None
    endpoint_affinity: bool | None = None
    endpoint_points: int | None = None
    debug_headers: bool | None = None

    def __post_init__(self) -> None:
        # The compiled split's rules on the fields a policy sets alone, checked here so a bad policy is refused
        # whole; the rest (a key header's use in responses, a cookie for persistent) are the rule's split's to check.
        problems = [] if self.endpoint_points is None else endpoint_points_problems(self.endpoint_points)
        if self.key_header is not None:
            problems += SpecError(key_header_problems(self.key_header)).within("sticky.header").problems
        if self.drain and self.sticky_mode is StickyMode.REHASH:
            # The TrafficSplit's rule, said of the policy's one flag rather than of a backend index.
            problems += ["sticky.drain: " + q.split(": ", 1)[1] for q in drain_mode_problems([True], StickyMode.REHASH)]
        if problems:
            raise SpecError(problems)

    def apply(self, spec: SplitSpec) -> SplitSpec:
        """The rule's split `spec` (as the translation builds it, with its own defaults) with these settings; the
        result is a new `SplitSpec`, which `compile_split` checks as a whole (SpecError: the policy cannot apply)."""
        problems: list[str] = []
        mode = self.sticky_mode or spec.sticky_mode
        cookie = spec.cookie
        if self.cookie is not None:
            if spec.cookie is None:
                problems.append("sticky.cookie: the rule has no Cookie sessionPersistence to set attributes of")
            else:
                cookie = self.cookie.settings(spec.cookie.name, spec.cookie.max_age)
        if problems:
            raise SpecError(problems)
        # drain: the policy's choice for every backend at weight 0; without one, the split's own (which a rehash
        # split cannot have: a rehash cookie names no backend to keep).
        backends = tuple(
            replace(
                b,
                drain=(self.drain if self.drain is not None else b.drain and mode is StickyMode.PERSISTENT)
                and b.weight == 0,
            )
            for b in spec.backends
        )
        return replace(
            spec,
            backends=backends,
            cookie=cookie,
            assignment=self.assignment or spec.assignment,
            sticky_mode=mode,
            key_header=self.key_header if self.key_header is not None else spec.key_header,
            endpoint_affinity=spec.endpoint_affinity if self.endpoint_affinity is None else self.endpoint_affinity,
            endpoint_points=spec.endpoint_points if self.endpoint_points is None else self.endpoint_points,
            debug_headers=spec.debug_headers if self.debug_headers is None else self.debug_headers,
        )


@dataclass(frozen=True, slots=True)
class Policy:
    meta: Meta
    targets: tuple[PolicyTarget, ...]
    settings: PolicySettings

    @property
    def key(self) -> str:
        return self.meta.key

    @property
    def age(self) -> tuple[str, str]:
        """GEP-713's order: the oldest (creationTimestamp) first, then by name."""
        return (self.meta.created, self.meta.name)


def parse_policy(body: Mapping[str, Any]) -> Policy:
    """A TrafficSplitPolicy body → `Policy`; SpecError listing every bad field by its path (`spec.sticky.mode`)."""
    if not isinstance(body, Mapping):
        raise SpecError(["expected an object"])
    p = Problems()
    meta = _meta(body, p)
    spec = body.get("spec")
    if not isinstance(spec, Mapping):
        raise SpecError([*p.items, "spec: expected an object"])
    p.items.extend(unknown_fields(spec, POLICY_FIELDS, "spec"))
    targets = _targets(get_field(spec, "targetRefs", list, "spec", p), p)
    sticky = get_field(spec, "sticky", Mapping, "spec", p)
    settings: dict[str, Any] = {
        "assignment": parse_assignment(spec, p),
        "debug_headers": get_field(spec, "debugHeaders", bool, "spec", p),
    }
    if sticky is not None:
        settings["sticky_mode"] = parse_sticky_mode(sticky, p)
        settings["drain"] = get_field(sticky, "drain", bool, "spec.sticky", p)
        settings["key_header"] = parse_key_header(sticky, p)
        settings["endpoint_affinity"] = get_field(sticky, "endpointAffinity", bool, "spec.sticky", p)
        if sticky.get("endpointPoints") is not None:
            settings["endpoint_points"] = parse_endpoint_points(sticky, p)
        c = get_field(sticky, "cookie", Mapping, "spec.sticky", p)
        if c is not None:
            try:
                settings["cookie"] = CookieAttributes(**parse_cookie_attributes(c, "spec.sticky.cookie", p))
            except SpecError as exc:
                p.extend("spec.sticky.cookie", exc)
    if p.items:
        raise SpecError(p.items)
    try:
        return Policy(meta, targets, PolicySettings(**settings))
    except SpecError as exc:
        raise exc.within("spec") from None


def _meta(body: Mapping[str, Any], p: Problems) -> Meta:
    m = body.get("metadata")
    m = m if isinstance(m, Mapping) else {}
    name = get_field(m, "name", str, "metadata", p) or ""
    namespace = get_field(m, "namespace", str, "metadata", p) or ""
    if not name or len(name) > MAX_NAME or not is_dns_subdomain(name):
        p.add("metadata.name", f"{name[:64]!r} must be a DNS subdomain")
    if not namespace or len(namespace) > 63:
        p.add("metadata.namespace", "required: a policy is namespaced")
    generation = get_field(m, "generation", int, "metadata", p) or 0
    created = get_field(m, "creationTimestamp", str, "metadata", p) or ""
    return Meta(namespace=namespace, name=name, generation=generation, created=created[:64])


def _targets(raw: list[Any] | None, p: Problems) -> tuple[PolicyTarget, ...]:
    if not raw:
        p.add("spec.targetRefs", "at least one target is required")
        return ()
    if len(raw) > MAX_TARGET_REFS:
        p.add("spec.targetRefs", f"{len(raw)} items, at most {MAX_TARGET_REFS} are allowed")
        return ()
    out: list[PolicyTarget] = []
    for i, t in enumerate(raw):
        path = f"spec.targetRefs[{i}]"
        if not isinstance(t, Mapping):
            p.add(path, "expected an object")
            continue
        group = get_field(t, "group", str, path, p)
        kind = get_field(t, "kind", str, path, p)
        name = get_field(t, "name", str, path, p)
        section = get_field(t, "sectionName", str, path, p)
        if (group, kind) != (GATEWAY_GROUP, "HTTPRoute"):
            p.add(path, f"must name a {GATEWAY_GROUP} HTTPRoute, not {str(group)[:64]!r} {str(kind)[:64]!r}")
        if name is None or not name or len(name) > MAX_NAME or not is_dns_subdomain(name):
            p.add(f"{path}.name", f"{str(name)[:64]!r} must be an HTTPRoute name (a DNS subdomain)")
            continue
        if section is not None and (not section or len(section) > MAX_SECTION_NAME or not is_dns_subdomain(section)):
            p.add(f"{path}.sectionName", f"{section[:64]!r} must be a rule name (a DNS subdomain)")
            continue
        target = PolicyTarget(name, section)
        if target in out:
            p.add(path, "the same target is named twice")
            continue
        out.append(target)
    return tuple(out)


# --- attachment --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """A policy's standing on one target route (before the translation adds `Invalid`)."""

    reason: PolicyReason
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolution:
    """Which policy applies to which rule, and how each policy stands on each route it names."""

    rules: Mapping[tuple[str, int], Policy] = field(default_factory=dict)  # (route key, rule index) → the winner
    outcomes: Mapping[tuple[str, str], Outcome] = field(default_factory=dict)  # (policy key, route key) → standing

    def for_rule(self, route: str, rule: int) -> Policy | None:
        return self.rules.get((route, rule))


def resolve(routes: Iterable[HTTPRoute], policies: Iterable[Policy]) -> Resolution:
    """Attach `policies` to the rules of `routes` (see the module docstring for the order)."""
    by_key = {r.meta.key: r for r in routes}
    ordered = sorted(policies, key=lambda q: q.age)
    rules: dict[tuple[str, int], Policy] = {}
    notes: dict[tuple[str, str], list[tuple[PolicyReason, str]]] = {}
    whole: dict[str, Policy] = {}  # route → the oldest policy naming all of it
    section: dict[tuple[str, str], Policy] = {}  # (route, rule name) → the oldest policy naming that rule
    for pol in ordered:
        for t in pol.targets:
            route_key = f"{pol.meta.namespace}/{t.name}"
            note = notes.setdefault((pol.key, route_key), [])
            route = by_key.get(route_key)
            if route is None:
                note.append((PolicyReason.TARGET_NOT_FOUND, f"HTTPRoute {route_key} not found"))
                continue
            if t.section_name is None:
                winner = whole.setdefault(route_key, pol)
                if winner is not pol:
                    note.append((PolicyReason.CONFLICTED, f"HTTPRoute {route_key}: {winner.key} is older"))
                continue
            if not any(r.name == t.section_name for r in route.rules):
                named = ", ".join(r.name for r in route.rules if r.name) or "none"
                note.append(
                    (
                        PolicyReason.TARGET_NOT_FOUND,
                        f"HTTPRoute {route_key} has no rule named {t.section_name!r} (its named rules: {named})",
                    )
                )
                continue
            winner = section.setdefault((route_key, t.section_name), pol)
            if winner is not pol:
                note.append(
                    (PolicyReason.CONFLICTED, f"HTTPRoute {route_key} rule {t.section_name}: {winner.key} is older")
                )
    for route_key, route in by_key.items():
        for rule in route.rules:
            chosen = section.get((route_key, rule.name)) if rule.name else None
            chosen = chosen or whole.get(route_key)
            if chosen is not None:
                rules[(route_key, rule.index)] = chosen
    # A whole-route policy another one overrides on some rules is still accepted: say where it does not apply.
    for route_key, pol in whole.items():
        over = [
            f"{r.name} ({rules[(route_key, r.index)].key})"
            for r in by_key[route_key].rules
            if rules.get((route_key, r.index)) is not pol
        ]
        if over:
            notes[(pol.key, route_key)].append(
                (PolicyReason.ACCEPTED, f"HTTPRoute {route_key}: rules {', '.join(over)} take a policy naming them")
            )
    outcomes = {k: _outcome(v) for k, v in notes.items()}
    return Resolution(rules=rules, outcomes=outcomes)


_RANK = {
    PolicyReason.INVALID: 0,
    PolicyReason.CONFLICTED: 1,
    PolicyReason.TARGET_NOT_FOUND: 2,
    PolicyReason.ACCEPTED: 3,
}


def _outcome(notes: Sequence[tuple[PolicyReason, str]]) -> Outcome:
    """The worst reason among a policy's notes on one route, every note in the message."""
    if not notes:
        return Outcome(PolicyReason.ACCEPTED, "")
    reason = min((r for r, _ in notes), key=_RANK.__getitem__)
    return Outcome(reason, "; ".join(m for _, m in notes))


def worst(outcomes: Iterable[Outcome]) -> Outcome:
    """One ancestor's outcome over the target routes attached to it."""
    items = list(outcomes)
    reason = min((o.reason for o in items), key=_RANK.__getitem__, default=PolicyReason.ACCEPTED)
    return Outcome(reason, "; ".join(o.message for o in items if o.message))


def policy_for_rule(
    route: HTTPRoute, rule: RouteRule, policies: Iterable[Policy]
) -> tuple[Policy | None, Outcome | None]:
    """The policy the gateway applies to one rule (the CLI's plan reads it), with its standing on the route."""
    res = resolve([route], policies)
    pol = res.for_rule(route.meta.key, rule.index)
    return pol, res.outcomes.get((pol.key, route.meta.key)) if pol is not None else None


# --- what the gateway does with a weight change under the rule's policy (the CLI's plan) ----------------------------


def rule_default_mode(rule: RouteRule) -> StickyMode:
    """The sticky mode a rule's split has without a policy: what `gatewayapi.actions.build_action` builds
    (tests/unit/test_gateway_policy.py holds the two together). A sessionPersistence rule's session (its cookie, or
    its header) is the sealed persistent one (GEP-1619: a session keeps its backend across weight changes); others
    re-draw by key."""
    return StickyMode.PERSISTENT if rule.session is not None else StickyMode.REHASH


@dataclass(frozen=True, slots=True, kw_only=True)
class ServedChange:
    """A rule's weight change as its gateway serves it: under which policy, which assignment and sticky mode, and the
    share of existing sessions that moves."""

    policy: str | None  # namespace/name of the policy that applies, None without one
    standing: Outcome | None  # its standing on the route (a loser of a conflict does not apply: None policy)
    assignment: AssignmentMode
    mode: StickyMode
    draining: frozenset[str]  # persistent: the backends the change sets to 0 whose sessions stay
    moved_share: Fraction
    exact: bool  # False for minimal: a fresh table's figure, the live table's within `Plan`'s rounding bound


def served_change(
    rule: RouteRule, chosen: Policy | None, change: Plan, standing: Outcome | None = None
) -> ServedChange:
    """What `change` (the hash planner's `Plan` of the rule's weights) moves under `chosen`'s settings, else under
    the rule's defaults: the same figure the gateway's decisions realise (hash: the plan's; minimal: the slot
    table's; persistent: only sessions of backends set to 0 without drain, or removed)."""
    if chosen is not None and (refusal := _refusal(rule, chosen, change)) is not None:
        chosen, standing = None, refusal  # the gateway keeps the rule's defaults (the policy is Invalid there)
    s = chosen.settings if chosen is not None else PolicySettings()
    mode = s.sticky_mode or rule_default_mode(rule)
    assignment = s.assignment or AssignmentMode.HASH
    drain = s.drain if s.drain is not None else True  # GEP-1619: a session keeps its backend even at weight 0
    zeroed = frozenset(
        n for n, _ in change.before.items() if n in change.after.names and change.after.weight_of(n) == 0
    )
    draining = zeroed if mode is StickyMode.PERSISTENT and drain else frozenset()
    if mode is StickyMode.PERSISTENT:
        moved, exact = persistent_moved_share(change.before, change.after, draining), True
    elif assignment is AssignmentMode.MINIMAL:
        moved, exact = minimal_moved_share(change.before, change.after), False
    else:
        moved, exact = change.moved_share, change.exact
    return ServedChange(
        policy=chosen.key if chosen is not None else None,
        standing=standing,
        assignment=assignment,
        mode=mode,
        draining=draining,
        moved_share=moved,
        exact=exact,
    )


def _refusal(rule: RouteRule, chosen: Policy, change: Plan) -> Outcome | None:
    """Whether the rule's split refuses the policy's settings, checked by the values the translation builds: a
    stand-in of the rule's split (its backends at the new weights, its session cookie) with the settings applied."""
    cookie = (
        CookieSettings(name="session") if rule.session is not None and rule.session.type is SessionType.COOKIE else None
    )
    header = "x-session" if rule.session is not None and rule.session.type is SessionType.HEADER else None
    mode = rule_default_mode(rule)
    try:
        spec = SplitSpec(
            namespace="probe",
            name="rule",
            hosts=(),
            service=None,
            backends=tuple(
                BackendSpec(name=n, service="probe", port=80, weight=w, drain=mode is StickyMode.PERSISTENT and w == 0)
                for n, w in change.after.items()
            ),
            cookie=cookie,
            key_header=header,
            endpoint_affinity=False,
            matches=(),
            debug_headers=False,
            sticky_mode=mode,
        )
        compile_split(chosen.settings.apply(spec))
    except SpecError as exc:
        return Outcome(PolicyReason.INVALID, f"{chosen.key}: rules[{rule.index}]: " + "; ".join(exc.problems))
    return None
