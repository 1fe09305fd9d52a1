"""TrafficSplitPolicy: parsing (bad fields refused by name, with the TrafficSplit's own words), the CRD and the parser
agreeing on fields, attachment and conflicts (table tests), how its settings compose with a rule's defaults, and the
plan-equals-gateway property: under a rehash policy the sessions the gateway's decisions move on a weight change are
exactly the ones `plan httproute/...` predicts."""

from __future__ import annotations

import copy
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.control.resolve import ServiceInfo, ServicePort
from trafficsplit.core.decide.request import Request
from trafficsplit.core.decide.split import decide
from trafficsplit.core.gatewayapi.httproute import parse_httproute
from trafficsplit.core.gatewayapi.objects import parse_gateway, parse_gateway_class
from trafficsplit.core.gatewayapi.policy import (
    POLICY_FIELDS,
    CookieAttributes,
    PolicyReason,
    PolicySettings,
    parse_policy,
    policy_for_rule,
    resolve,
)
from trafficsplit.core.gatewayapi.translate import Inputs, Translation, translate
from trafficsplit.core.model.assignment import AssignmentMode
from trafficsplit.core.model.cookie import AffinityMinter, CookieSettings, SameSite
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.persistent import StickyMode
from trafficsplit.core.model.splitspec import BackendSpec, SplitSpec

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "trafficsplit.dev_trafficsplitpolicies.yaml"
GROUP = "gateway.networking.k8s.io"


def policy(name: str = "p", created: str = "2026-01-01T00:00:00Z", targets: Any = None, **spec: Any) -> dict[str, Any]:
    refs = targets if targets is not None else [{"group": GROUP, "kind": "HTTPRoute", "name": "r"}]
    return {
        "apiVersion": "trafficsplit.dev/v1alpha1",
        "kind": "TrafficSplitPolicy",
        "metadata": {"name": name, "namespace": "ns", "generation": 1, "creationTimestamp": created},
        "spec": {"targetRefs": refs, **spec},
    }


def target(name: str = "r", section: str | None = None) -> dict[str, Any]:
    return {"group": GROUP, "kind": "HTTPRoute", "name": name, **({"sectionName": section} if section else {})}


# --- parsing ---------------------------------------------------------------------------------------------------------


def test_every_field_is_read() -> None:
    p = parse_policy(
        policy(
            targets=[target("r"), target("r", "cart")],
            assignment="minimal",
            debugHeaders=True,
            sticky={
                "mode": "persistent",
                "drain": False,
                "header": {"name": "x-user-id"},
                "endpointAffinity": True,
                "endpointPoints": 64,
                "cookie": {
                    "path": "/a",
                    "domain": "example.com",
                    "secure": True,
                    "httpOnly": False,
                    "sameSite": "None",
                    "partitioned": True,
                },
            },
        )
    )
    assert [(t.name, t.section_name) for t in p.targets] == [("r", None), ("r", "cart")]
    s = p.settings
    assert (s.assignment, s.sticky_mode, s.drain, s.key_header) == (
        AssignmentMode.MINIMAL,
        StickyMode.PERSISTENT,
        False,
        "x-user-id",
    )
    assert (s.endpoint_affinity, s.endpoint_points, s.debug_headers) == (True, 64, True)
    assert s.cookie == CookieAttributes(
        path="/a", domain="example.com", secure=True, http_only=False, same_site=SameSite.NONE, partitioned=True
    )


def test_absent_fields_leave_the_rule_its_defaults() -> None:
    assert parse_policy(policy()).settings == PolicySettings()


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"assignment": "fast"}, "spec.assignment: 'fast' must be one of hash, minimal"),
        ({"sticky": {"mode": "sticky"}}, "spec.sticky.mode: 'sticky' must be one of rehash, persistent"),
        ({"sticky": {"mdoe": "rehash"}}, "spec.sticky.mdoe: unknown field (did you mean 'mode'?)"),
        ({"sticky": {"header": {"name": "X-User"}}}, "spec.sticky.header.name"),
        ({"sticky": {"header": {"name": "cookie"}}}, "spec.sticky.header.name"),
        ({"sticky": {"header": {}}}, "spec.sticky.header.name: required"),
        ({"sticky": {"endpointPoints": 0}}, "spec.sticky.endpointPoints: must be 1..1000"),
        ({"sticky": {"endpointPoints": 1001}}, "spec.sticky.endpointPoints: must be 1..1000"),
        ({"sticky": {"cookie": {"sameSite": "None"}}}, "spec.sticky.cookie.sameSite: SameSite=None requires secure"),
        ({"sticky": {"cookie": {"partitioned": True}}}, "spec.sticky.cookie.partitioned: Partitioned requires"),
        ({"sticky": {"cookie": {"path": "a\r\nSet-Cookie: x"}}}, "spec.sticky.cookie.path"),
        ({"sticky": {"cookie": {"name": "x"}}}, "spec.sticky.cookie.name: unknown field"),
        ({"sticky": {"drain": True, "mode": "rehash"}}, "spec.sticky.drain: needs spec.sticky.mode: persistent"),
        ({"sticky": {"drain": "yes"}}, "spec.sticky.drain: expected boolean"),
        ({"debugHeaders": 1}, "spec.debugHeaders: expected boolean"),
        ({"targetRefs": []}, "spec.targetRefs: at least one target is required"),
        ({"targetRefs": [target()] * 2}, "spec.targetRefs[1]: the same target is named twice"),
        ({"targetRefs": [target(f"r{i}") for i in range(17)]}, "spec.targetRefs: 17 items, at most 16"),
        ({"targetRefs": [{"group": GROUP, "kind": "Gateway", "name": "gw"}]}, "spec.targetRefs[0]: must name a"),
        ({"targetRefs": [{"group": GROUP, "kind": "HTTPRoute", "name": "A_b"}]}, "spec.targetRefs[0].name"),
        ({"targetRefs": [target("r", "x" * 254)]}, "spec.targetRefs[0].sectionName"),
        ({"weights": {}}, "spec.weights: unknown field"),
    ],
)
def test_a_bad_field_is_refused_naming_it(spec: dict[str, Any], field: str) -> None:
    body = policy()
    body["spec"].update(spec)
    with pytest.raises(SpecError) as err:
        parse_policy(body)
    assert any(q.startswith(field) for q in err.value.problems), err.value.problems


def test_the_cookie_rules_are_the_trafficsplits_own() -> None:
    """One rule in one place: the policy's cookie attributes are refused with CookieSettings' words."""
    with pytest.raises(SpecError) as ours:
        CookieAttributes(same_site=SameSite.NONE)
    with pytest.raises(SpecError) as theirs:
        CookieSettings(name="c", same_site=SameSite.NONE)
    assert ours.value.problems == theirs.value.problems


def schema_fields(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties") or (schema.get("items") or {}).get("properties") or {}
    return {k: (schema_fields(v) or None) for k, v in props.items()}


def plain(fields: Any) -> Any:
    return {k: plain(v) for k, v in fields.items()} if fields is not None else None


def test_the_parser_knows_exactly_the_crds_fields() -> None:
    crd = yaml.safe_load(CRD.read_text(encoding="utf-8"))
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert schema_fields(spec) == plain(POLICY_FIELDS)


def test_the_crd_bounds_every_list_and_string() -> None:
    crd = yaml.safe_load(CRD.read_text(encoding="utf-8"))
    unbounded: list[str] = []

    def walk(node: dict[str, Any], path: str) -> None:
        if node.get("type") == "array" and "maxItems" not in node:
            unbounded.append(path)
        if node.get("type") == "string" and not ({"maxLength", "enum", "format"} & set(node)):
            unbounded.append(path)
        for k, v in (node.get("properties") or {}).items():
            walk(v, f"{path}.{k}")
        if "items" in node:
            walk(node["items"], f"{path}[]")

    walk(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"], "")
    assert unbounded == [".apiVersion", ".kind"]  # the API server's own


# --- attachment ------------------------------------------------------------------------------------------------------


def route(name: str = "r", rules: Any = None, generation: int = 1) -> dict[str, Any]:
    rules = rules or [
        {
            "name": "cart",
            "backendRefs": [{"name": "a", "port": 80, "weight": 90}, {"name": "b", "port": 80, "weight": 10}],
            "sessionPersistence": {"sessionName": "s"},
        },
        {"name": "web", "backendRefs": [{"name": "a", "port": 80, "weight": 1}, {"name": "b", "port": 80}]},
        {"backendRefs": [{"name": "a", "port": 80}]},
    ]
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "generation": generation,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [f"{name}.example.com"], "rules": rules},
    }


T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"


@pytest.mark.parametrize(
    ("policies", "rules", "outcomes"),
    [
        # one whole-route policy: every rule
        ([("p", T0, [target()])], {0: "p", 1: "p", 2: "p"}, {"p": PolicyReason.ACCEPTED}),
        # two whole-route policies: the oldest wins, the other is Conflicted
        (
            [("new", T1, [target()]), ("old", T0, [target()])],
            {0: "old", 1: "old", 2: "old"},
            {"old": PolicyReason.ACCEPTED, "new": PolicyReason.CONFLICTED},
        ),
        # same creationTimestamp: by name
        (
            [("b", T0, [target()]), ("a", T0, [target()])],
            {0: "a", 1: "a", 2: "a"},
            {"a": PolicyReason.ACCEPTED, "b": PolicyReason.CONFLICTED},
        ),
        # a policy naming a rule beats the whole-route one there, even when newer; both Accepted
        (
            [("whole", T0, [target()]), ("cart", T1, [target("r", "cart")])],
            {0: "cart", 1: "whole", 2: "whole"},
            {"whole": PolicyReason.ACCEPTED, "cart": PolicyReason.ACCEPTED},
        ),
        # two naming the same rule: oldest wins
        (
            [("c2", T2, [target("r", "cart")]), ("c1", T1, [target("r", "cart")])],
            {0: "c1"},
            {"c1": PolicyReason.ACCEPTED, "c2": PolicyReason.CONFLICTED},
        ),
        # different rules: no conflict
        (
            [("c", T1, [target("r", "cart")]), ("w", T2, [target("r", "web")])],
            {0: "c", 1: "w"},
            {"c": PolicyReason.ACCEPTED, "w": PolicyReason.ACCEPTED},
        ),
        # a rule that does not exist, a route that does not exist
        ([("p", T0, [target("r", "nope")])], {}, {"p": PolicyReason.TARGET_NOT_FOUND}),
        ([("p", T0, [target("gone")])], {}, {"p": PolicyReason.TARGET_NOT_FOUND}),
        # losing on one rule, winning on another: Conflicted is reported, the won rule still applies
        (
            [("a", T0, [target("r", "cart")]), ("b", T1, [target("r", "cart"), target("r", "web")])],
            {0: "a", 1: "b"},
            {"a": PolicyReason.ACCEPTED, "b": PolicyReason.CONFLICTED},
        ),
    ],
)
def test_attachment_and_conflicts(
    policies: list[tuple[str, str, Any]], rules: dict[int, str], outcomes: dict[str, PolicyReason]
) -> None:
    parsed = [parse_policy(policy(name, created, refs)) for name, created, refs in policies]
    res = resolve([parse_httproute(route())], parsed)
    got = {i: p.meta.name for i in range(3) if (p := res.for_rule("ns/r", i)) is not None}
    assert got == rules
    missing = "ns/gone" if any(t.name == "gone" for p in parsed for t in p.targets) else "ns/r"
    assert {name: res.outcomes[(f"ns/{name}", missing)].reason for name in outcomes} == outcomes


def test_policy_for_rule_is_the_resolution() -> None:
    r = parse_httproute(route())
    older = parse_policy(policy("old", T0, [target("r", "cart")], sticky={"mode": "rehash"}))
    newer = parse_policy(policy("new", T1, [target("r", "cart")]))
    chosen, outcome = policy_for_rule(r, r.rules[0], [newer, older])
    assert chosen is older and outcome is not None and outcome.reason is PolicyReason.ACCEPTED
    assert policy_for_rule(r, r.rules[2], [newer, older]) == (None, None)


# --- applying settings to a rule's split -----------------------------------------------------------------------------


def rule_spec(*, persistent: bool, weights: tuple[int, int] = (90, 0)) -> SplitSpec:
    """A rule's split as the translation builds it; `persistent` as a Cookie sessionPersistence rule is when its
    default is the sealed cookie (weight 0 draining, GEP-1619)."""
    mode = StickyMode.PERSISTENT if persistent else StickyMode.REHASH
    return SplitSpec(
        namespace="ns",
        name="r.rule-0",
        hosts=(),
        service=None,
        backends=tuple(
            BackendSpec(name=n, service=n, port=80, weight=w, drain=persistent and w == 0)
            for n, w in zip(("a", "b"), weights, strict=True)
        ),
        cookie=CookieSettings(name="s", max_age=60),
        endpoint_affinity=False,
        matches=(),
        debug_headers=False,
        sticky_mode=mode,
    )


def test_rehash_replaces_the_persistent_default_and_its_drains() -> None:
    out = PolicySettings(sticky_mode=StickyMode.REHASH).apply(rule_spec(persistent=True))
    assert out.sticky_mode is StickyMode.REHASH and not any(b.drain for b in out.backends)


def test_drain_false_moves_weight_zero_sessions_under_persistent() -> None:
    out = PolicySettings(drain=False).apply(rule_spec(persistent=True))
    assert out.sticky_mode is StickyMode.PERSISTENT and not any(b.drain for b in out.backends)
    kept = PolicySettings(sticky_mode=StickyMode.PERSISTENT).apply(rule_spec(persistent=True))
    assert [b.drain for b in kept.backends] == [False, True]


def test_drain_on_a_rehash_rule_is_the_trafficsplits_refusal() -> None:
    with pytest.raises(SpecError, match=r"drain: needs spec.sticky.mode: persistent"):
        compile_split(PolicySettings(drain=True).apply(rule_spec(persistent=False)))


def test_cookie_attributes_keep_the_rules_name_and_max_age() -> None:
    attrs = CookieAttributes(path="/cart", secure=True, same_site=SameSite.STRICT)
    out = PolicySettings(cookie=attrs).apply(rule_spec(persistent=False))
    assert out.cookie == CookieSettings(name="s", max_age=60, path="/cart", secure=True, same_site=SameSite.STRICT)
    no_cookie = replace(rule_spec(persistent=False), cookie=None)
    with pytest.raises(SpecError, match="no Cookie sessionPersistence"):
        PolicySettings(cookie=attrs).apply(no_cookie)


def test_settings_left_out_keep_the_rules() -> None:
    spec = rule_spec(persistent=True)
    assert PolicySettings().apply(spec) == spec


# --- through the translation -----------------------------------------------------------------------------------------

CLASS = parse_gateway_class(
    {"metadata": {"name": "ts"}, "spec": {"controllerName": "trafficsplit.dev/gateway-controller"}}
)
GATEWAY = parse_gateway(
    {
        "metadata": {"name": "gw", "namespace": "ns", "generation": 1},
        "spec": {"gatewayClassName": "ts", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
    }
)
SERVICES = {
    ("ns", s): ServiceInfo("ns", s, (ServicePort(name="http", port=80, target_port=8080),)) for s in ("a", "b", "c")
}


def run(routes: list[dict[str, Any]], policies: list[dict[str, Any]], tables: Any = None) -> Translation:
    return translate(
        Inputs(
            classes=(CLASS,),
            gateways=(GATEWAY,),
            routes=tuple(parse_httproute(r) for r in routes),
            services=SERVICES,
            policies=tuple(parse_policy(p) for p in policies),
            tables=tables,
        )
    )


def split_of(t: Translation, rule: int, route_key: str = "ns/r") -> Any:
    return next(a.split for a in t.actions if a.route == route_key and a.rule == rule)


def test_an_invalid_policy_leaves_the_route_its_defaults_and_says_why() -> None:
    bad = policy("bad", targets=[target()], sticky={"mode": "persistent", "endpointAffinity": True})
    t = run([route()], [bad])  # rules 1 and 2 have no session cookie, so no persistent mode
    plain = run([route()], [])
    assert [split_of(t, i) for i in range(3)] == [split_of(plain, i) for i in range(3)]  # rule 0 neither
    assert not split_of(t, 0).endpoint_affinity
    (status,) = t.policies
    (ancestor,) = status.ancestors
    assert (ancestor.ref.kind, ancestor.ref.name, ancestor.gateway) == ("Gateway", "gw", "ns/gw")
    (cond,) = ancestor.conditions
    assert (cond.status, cond.reason) == ("False", "Invalid")
    assert "rules[1]: sticky.mode: persistent needs sticky.cookie" in cond.message
    (r,) = t.routes
    assert {c.type: c.status for c in r.parents[0].conditions} == {"Accepted": "True", "ResolvedRefs": "True"}


def test_a_policy_naming_one_rule_changes_only_that_rule() -> None:
    t0 = run([route()], [])
    t = run([route()], [policy("k", targets=[target("r", "web")], sticky={"header": {"name": "x-user"}})])
    assert split_of(t, 1).key_header == "x-user"
    assert split_of(t, 0) == split_of(t0, 0) and split_of(t, 2) == split_of(t0, 2)


def test_minimal_advances_the_previous_table() -> None:
    """assignment: minimal on a rule: the new weights edit the table the rule had, so a change moves the minimum
    (where the hash walk would slide b's range and move twice as much)."""

    def three(a: int, b: int, c: int, generation: int) -> dict[str, Any]:
        refs = [{"name": n, "port": 80, "weight": w} for n, w in (("a", a), ("b", b), ("c", c))]
        return route(rules=[{"backendRefs": refs}], generation=generation)

    pol = [policy("m", assignment="minimal")]
    before = split_of(run([three(50, 30, 20, 1)], pol), 0)
    assert before.table is not None
    after = split_of(run([three(40, 30, 30, 2)], pol, tables={before.key: before.table}), 0)
    fresh = split_of(run([three(40, 30, 30, 2)], pol), 0)
    assert after.table != fresh.table  # advanced from the old table, not rebuilt

    def moved(x: Any, y: Any) -> int:
        return sum(1 for s in range(10_000) if x.table.owner_index(s) != y.table.owner_index(s))

    assert moved(before, after) == 1_000  # exactly the 10 % that must move, a → c
    assert moved(before, fresh) == 2_000  # a rebuilt table would move what the hash walk does


def test_the_status_names_the_ancestor_per_gateway_and_the_route_when_it_is_missing() -> None:
    t = run([route()], [policy("p", targets=[target(), target("gone")])])
    (status,) = t.policies
    refs = [(a.ref.kind, a.ref.name, a.conditions[0].reason) for a in status.ancestors]
    assert refs == [("Gateway", "gw", "Accepted"), ("HTTPRoute", "gone", "TargetNotFound")]


# --- the plan equals the gateway -------------------------------------------------------------------------------------

KEYS = 10_000


def backends_by_session(split: Any) -> list[str]:
    minter = AffinityMinter(start=0)
    out = []
    for k in range(KEYS):
        cookie = f"{split.cookie.name}=session-{k}"
        d = decide(split, Request(authority="", cookie_lines=[cookie], request_id=f"r{k}", headers={}), minter=minter)
        out.append(d.backend.name)
    return out


def test_under_a_rehash_policy_the_gateway_moves_exactly_what_the_plan_predicts() -> None:
    from trafficsplit.cli.kplan import route_plan
    from trafficsplit.cli.kube import Ref

    pol = policy("rehash", targets=[target("r", "cart")], sticky={"mode": "rehash"})
    before_route = route()
    after_route = copy.deepcopy(before_route)
    after_route["metadata"]["generation"] = 2
    refs = after_route["spec"]["rules"][0]["backendRefs"]
    refs[0]["weight"], refs[1]["weight"] = 50, 50

    before = backends_by_session(split_of(run([before_route], [pol]), 0))
    after = backends_by_session(split_of(run([after_route], [pol]), 0))
    moved = {k for k in range(KEYS) if before[k] != after[k]}

    _, plan, applied = route_plan(  # the CLI's own function, on the route and the policy bodies
        Ref("ns", "r", "httproute"), before_route, "cart", [("a", 50), ("b", 50)], policies=[pol]
    )
    assert applied is not None and applied.policy == "ns/rehash" and applied.mode is StickyMode.REHASH
    predicted = {k for k in range(KEYS) if plan.before.pick(f"session-{k}") != plan.after.pick(f"session-{k}")}
    assert moved == predicted
    # and the plan's exact share is what the sample shows (binomial, 4 sigma): 40 % of sessions, a → b
    share = float(applied.moved_share)
    assert share == pytest.approx(0.4)
    assert abs(len(moved) / KEYS - share) < 4 * (share * (1 - share) / KEYS) ** 0.5
    assert {(before[k], after[k]) for k in moved} == {("a", "b")}
    # Without the policy the rule keeps its default, the sealed persistent cookie: the same change moves nobody.
    _, _, default = route_plan(Ref("ns", "r", "httproute"), before_route, "cart", [("a", 50), ("b", 50)])
    assert (default.policy, default.mode, default.moved_share) == (None, StickyMode.PERSISTENT, Fraction(0))
    assert split_of(run([after_route], []), 0).persistent


def test_the_plans_default_mode_is_the_translations() -> None:
    """Without a policy the plan assumes `rule_default_mode`; the split the translation builds must agree, rule by
    rule (with and without a session cookie), or the plan would predict another gateway."""
    from trafficsplit.core.gatewayapi.policy import rule_default_mode

    r = parse_httproute(route())
    t = run([route()], [])
    for rule in r.rules:
        assert split_of(t, rule.index).persistent == (rule_default_mode(rule) is StickyMode.PERSISTENT)


def test_a_policys_settings_reach_the_data_plane_through_the_publish_api() -> None:
    """What a policy sets rides in the rule's split, which the publish API carries there and back unchanged."""
    from trafficsplit.core.gatewayapi.translate import gateway_content
    from trafficsplit.wire.generation import generation_from_proto, generation_to_proto

    pol = policy(
        "all",
        targets=[target("r", "cart")],  # cookie attributes: the rule with a session cookie (elsewhere: Invalid)
        assignment="minimal",
        debugHeaders=True,
        sticky={"header": {"name": "x-user"}, "endpointAffinity": True, "endpointPoints": 7,
                "cookie": {"path": "/shop", "secure": True, "sameSite": "Strict", "httpOnly": False}},
    )  # fmt: skip
    gen = gateway_content(run([route()], [pol]), "ns/gw").stamp(3)
    cart = next(s for s in gen.splits if s.name == "r.rule-0")
    assert (cart.key_header, cart.endpoint_affinity, cart.endpoint_points, cart.debug_headers) == (
        "x-user",
        True,
        7,
        True,
    )
    assert cart.table is not None and cart.cookie is not None and cart.cookie.path == "/shop"
    assert generation_from_proto(generation_to_proto(gen)) == gen
