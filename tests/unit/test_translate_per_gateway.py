"""A translation is one Gateway at a time, each reading only its own inputs (`inputs.gateway_inputs`): over generated
stores (several Gateways, routes on one or two of them, shared and wildcard hosts, identical matches across routes,
cross-namespace refs with and without a grant, policies) and every golden case, the per-Gateway translation equals one
pass over the whole store, and the duplicate-match check by index (`precedence.taken_matches`) says exactly what the
pairwise scan it replaced says (`precedence_reference`). The memo translates a Gateway again only when what it reads
changed."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit import gatewayapi as golden
from tests.unit.precedence_reference import pairwise_taken_matches
from trafficsplit.core.gatewayapi import translate as translate_module
from trafficsplit.core.gatewayapi.actions import ActionMemo
from trafficsplit.core.gatewayapi.httproute import HTTPRoute
from trafficsplit.core.gatewayapi.inputs import Inputs, gateway_inputs
from trafficsplit.core.gatewayapi.precedence import taken_matches
from trafficsplit.core.gatewayapi.translate import ContentMemo, TranslationMemo, gateway_content, translate
from trafficsplit.core.model.errors import SpecError

GROUP = "gateway.networking.k8s.io"
CONTROLLER = "trafficsplit.dev/gateway-controller"
LISTENERS = (
    {"name": "any", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}},
    {"name": "a", "port": 80, "protocol": "HTTP", "hostname": "a.example"},
    {"name": "wild", "port": 80, "protocol": "HTTP", "hostname": "*.example"},
    {"name": "other", "port": 81, "protocol": "HTTP"},
    {
        "name": "team-b",
        "port": 82,
        "protocol": "HTTP",
        "allowedRoutes": {"namespaces": {"from": "Selector", "selector": {"matchLabels": {"team": "b"}}}},
    },
)
HOSTS = ("a.example", "b.example", "x.a.example", "*.example")
PATHS = ("/", "/a", "/a/b")
BACKENDS = (("a", "ns"), ("b", "ns"), ("c", "other"))
CREATED = ("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z")


def whole_pass(inputs: Inputs) -> translate_module.Translation:
    """What one pass over every Gateway at once gives (the translation before it was cut per Gateway)."""
    return translate_module._assemble(inputs, {"*": translate_module._translate_pass(inputs, ActionMemo())})


def meta(name: str, namespace: str | None = "ns", created: str = CREATED[0]) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name, "generation": 1, "creationTimestamp": created, "uid": f"u-{name}"}
    if namespace is not None:
        m["namespace"] = namespace
    return m


@st.composite
def match(draw: st.DrawFn) -> dict[str, Any]:
    m: dict[str, Any] = {
        "path": {"type": draw(st.sampled_from(("PathPrefix", "Exact"))), "value": draw(st.sampled_from(PATHS))}
    }
    if draw(st.integers(0, 2)) == 0:
        m["method"] = "GET"
    if draw(st.integers(0, 3)) == 0:
        m["headers"] = [{"name": "x-v", "value": draw(st.sampled_from(("1", "2")))}]
    return m


@st.composite
def stores(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Kubernetes bodies: a class, two or three Gateways with listeners drawn from LISTENERS, and routes whose
    matches collide often (few paths, two creation times, names tie-broken)."""
    bodies: list[dict[str, Any]] = [
        {"kind": "GatewayClass", "metadata": meta("ts", None), "spec": {"controllerName": CONTROLLER}},
        {"kind": "Namespace", "metadata": {"name": "ns", "labels": {"team": "a"}}},
        {"kind": "Namespace", "metadata": {"name": "other", "labels": {"team": "b"}}},
    ]
    gateways = [f"g{i}" for i in range(draw(st.integers(2, 3)))]
    for g in gateways:
        listeners = draw(st.lists(st.sampled_from(LISTENERS), min_size=1, max_size=4, unique_by=lambda x: x["name"]))
        bodies.append(
            {"kind": "Gateway", "metadata": meta(g), "spec": {"gatewayClassName": "ts", "listeners": listeners}}
        )
    for svc, ns in (("a", "ns"), ("b", "ns"), ("c", "other")):
        bodies.append(
            {
                "kind": "Service",
                "metadata": {"name": svc, "namespace": ns},
                "spec": {"ports": [{"name": "http", "port": 80}]},
            }
        )
        bodies.append(
            {
                "kind": "EndpointSlice",
                "metadata": {"name": f"{svc}-x", "namespace": ns, "labels": {"kubernetes.io/service-name": svc}},
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080}],
                "endpoints": [{"addresses": [f"10.0.0.{ord(svc)}"], "conditions": {"ready": True}}],
            }
        )
    if draw(st.booleans()):
        bodies.append(
            {
                "kind": "ReferenceGrant",
                "metadata": meta("allow", "other"),
                "spec": {
                    "from": [{"group": GROUP, "kind": "HTTPRoute", "namespace": "ns"}],
                    "to": [{"group": "", "kind": "Service"}],
                },
            }
        )
    names = []
    for i in range(draw(st.integers(1, 8))):
        namespace = draw(st.sampled_from(("ns", "ns", "other")))
        parents = draw(st.lists(st.sampled_from(gateways), min_size=1, max_size=2, unique=True))
        refs: list[dict[str, Any]] = []
        for g in parents:
            ref: dict[str, Any] = {"name": g, "namespace": "ns"}
            if draw(st.integers(0, 3)) == 0:
                ref["sectionName"] = draw(st.sampled_from([x["name"] for x in LISTENERS]))
            refs.append(ref)
        rules = []
        for _ in range(draw(st.integers(1, 2))):
            backends = draw(st.lists(st.sampled_from(BACKENDS), min_size=1, max_size=2, unique=True))
            rules.append(
                {
                    "matches": draw(st.lists(match(), min_size=1, max_size=3)),
                    "backendRefs": [
                        {"name": b, "namespace": ns, "port": 80, "weight": draw(st.integers(0, 3))}
                        for b, ns in backends
                    ],
                }
            )
        name = f"r{i}"
        names.append((namespace, name))
        bodies.append(
            {
                "kind": "HTTPRoute",
                "metadata": meta(name, namespace, draw(st.sampled_from(CREATED))),
                "spec": {
                    "parentRefs": refs,
                    "hostnames": draw(st.lists(st.sampled_from(HOSTS), max_size=2, unique=True)),
                    "rules": rules,
                },
            }
        )
    for j in range(draw(st.integers(0, 3))):
        namespace, name = draw(st.sampled_from(names))
        bodies.append(
            {
                "kind": "TrafficSplitPolicy",
                "metadata": meta(f"p{j}", namespace, draw(st.sampled_from(CREATED))),
                "spec": {"targetRefs": [{"group": GROUP, "kind": "HTTPRoute", "name": name}], "assignment": "minimal"},
            }
        )
    return bodies


@contextmanager
def both_checks() -> Iterator[list[tuple[str, str]]]:
    """While inside: every route's duplicate-match check on every parent, by index (what translate uses) and by the
    pairwise scan of the same tables, side by side."""
    pairs: list[tuple[str, str]] = []
    original = translate_module._parent_conditions

    def checked(state: Any, route: Any, parent: Any, local: Any, taken: str | None = None) -> Any:
        if parent.refused is None and taken is None:  # found in the tables (not handed back by the walk memo)
            atts, actions = parent.attachments, local.actions
            pairs.append(
                (
                    taken_matches(route, actions, atts, state.holders),
                    pairwise_taken_matches(route, actions, atts, state.tables),
                )
            )
        return original(state, route, parent, local, taken)

    with mock.patch.object(translate_module, "_parent_conditions", checked):
        yield pairs


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stores())
def test_per_gateway_translation_is_one_pass_over_the_store_and_the_indexed_check_is_the_pairwise_one(
    bodies: list[dict[str, Any]],
) -> None:
    inputs, invalid = golden.inputs_of(bodies)
    assert not invalid
    with both_checks() as pairs:
        per_gateway = translate(inputs)
        whole = whole_pass(inputs)
    assert per_gateway == whole
    assert all(new == old for new, old in pairs), [p for p in pairs if p[0] != p[1]]
    # A weight change, as the operator translates it: `assignment: minimal` rules advance the slot tables last
    # published (those of other weights, so an advanced table differs from one built from the weights alone).
    before = copy.deepcopy(bodies)
    for body in before:
        for rule in body["spec"].get("rules", []) if body["kind"] == "HTTPRoute" else ():
            rule["backendRefs"][-1]["weight"] += 3
    published = whole_pass(golden.inputs_of(before)[0]).actions
    tables = {a.split.key: a.split.table for a in published if a.split is not None and a.split.table is not None}
    advanced = dataclasses.replace(inputs, tables=tables)
    assert translate(advanced) == whole_pass(advanced)


def _content(t: translate_module.Translation, gateway: str, memo: ContentMemo | None = None) -> Any:
    """The Gateway's content (from `memo` when given), or the problems it is refused for."""
    try:
        return memo.content(t, gateway, "uid") if memo is not None else gateway_content(t, gateway, "uid")
    except SpecError as exc:
        return ("refused", tuple(exc.problems))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stores(), st.data())
def test_a_content_kept_by_its_part_is_the_content_built_afresh(
    bodies: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Over generated stores (routes on one or two Gateways, shared hosts): one route's weights changed, translated
    with the operator's memos, each Gateway's kept content equals the one built from a fresh translation, and a
    Gateway the changed route is not on keeps the very object it had."""
    memo, contents = TranslationMemo(), ContentMemo()
    first = translate(golden.inputs_of(bodies)[0], memo)
    keys = sorted(first.parts)
    before = {g: _content(first, g, contents) for g in keys}
    routes = [b for b in bodies if b["kind"] == "HTTPRoute"]
    changed = data.draw(st.sampled_from(routes))
    changed["spec"]["rules"][0]["backendRefs"][0]["weight"] += 1
    inputs = golden.inputs_of(bodies)[0]
    kept, fresh = translate(inputs, memo), translate(inputs)
    on = {f"{r.get('namespace', 'ns')}/{r['name']}" for r in changed["spec"]["parentRefs"]}
    for g in keys:
        got = _content(kept, g, contents)
        assert got == _content(fresh, g), g
        if g not in on:
            assert got is before[g], f"{g} was built again for a route not on it"


def test_a_gateway_not_translated_again_keeps_its_content() -> None:
    memo, contents = TranslationMemo(), ContentMemo()
    first = translate(_store(), memo)
    a, b = contents.content(first, "ns/a", "ua"), contents.content(first, "ns/b", "ub")
    flipped = translate(_store(weight_b=0), memo)
    assert contents.content(flipped, "ns/a", "ua") is a
    b2 = contents.content(flipped, "ns/b", "ub")
    assert b2 != b and b2 == gateway_content(translate(_store(weight_b=0)), "ns/b", "ub")
    assert contents.built == {"ns/a": 1, "ns/b": 2}
    # Another uid (the Gateway deleted and created again under its name) is another content.
    assert contents.content(flipped, "ns/a", "ua2") == gateway_content(flipped, "ns/a", "ua2")
    assert contents.built["ns/a"] == 2


def test_the_memo_compares_a_store_parsed_again_once() -> None:
    """The store replaces an object by an equal one at every watch event (our own status writes among them). The
    memo kept the inputs it first translated, so every later pass compared each route field by field with that first
    object (4 ms a pass for 100 routes of 61 matches); it keeps the inputs last compared, and a pass over the same
    objects compares them by identity."""
    memo = TranslationMemo()
    translate(_store(), memo)
    again = _store()  # equal objects, not the same ones
    compared = 0
    original = HTTPRoute.__eq__

    def counting(self: HTTPRoute, other: object) -> bool:
        nonlocal compared
        compared += 1
        return original(self, other)

    with mock.patch.object(HTTPRoute, "__eq__", counting):
        translate(again, memo)
        assert compared > 0
        compared = 0
        translate(again, memo)
        assert compared == 0, "the same objects were compared field by field again"
    assert memo.translated == {"ns/a": 1, "ns/b": 1}


def test_the_generated_stores_do_produce_conflicts() -> None:
    """The property above is not vacuous: identical matches of two routes on one host are found by both checks."""
    seen = 0

    @settings(max_examples=200, deadline=None, database=None)
    @given(stores())
    def count(bodies: list[dict[str, Any]]) -> None:
        nonlocal seen
        inputs, _ = golden.inputs_of(bodies)
        with both_checks() as pairs:
            translate(inputs)
        seen += sum(1 for new, _ in pairs if new)

    count()
    assert seen > 20


@pytest.mark.parametrize("case", golden.cases())
def test_every_golden_case_translates_per_gateway_as_in_one_pass(case: str) -> None:
    inputs, _ = golden.inputs_of(golden.load(case))
    assert translate(inputs) == whole_pass(inputs)


def _store(**changes: Any) -> Inputs:
    bodies = [
        {"kind": "GatewayClass", "metadata": meta("ts", None), "spec": {"controllerName": CONTROLLER}},
        {"kind": "Namespace", "metadata": {"name": "ns", "labels": {}}},
    ]
    for g in ("a", "b"):
        bodies.append(
            {"kind": "Gateway", "metadata": meta(g), "spec": {"gatewayClassName": "ts", "listeners": [LISTENERS[0]]}}
        )
        bodies.append(
            {
                "kind": "Service",
                "metadata": {"name": f"svc-{g}", "namespace": "ns"},
                "spec": {"ports": [{"name": "http", "port": 80}]},
            }
        )
        weight = changes.get(f"weight_{g}", 1)
        bodies.append(
            {
                "kind": "HTTPRoute",
                "metadata": meta(f"route-{g}"),
                "spec": {
                    "parentRefs": [{"name": g}],
                    "hostnames": [f"{g}.example"],
                    "rules": [{"backendRefs": [{"name": f"svc-{g}", "port": 80, "weight": weight}]}],
                },
            }
        )
    inputs, _ = golden.inputs_of(bodies)
    return inputs


def test_a_change_on_one_gateway_translates_that_gateway_alone() -> None:
    memo = TranslationMemo()
    first = translate(_store(), memo)
    assert memo.translated == {"ns/a": 1, "ns/b": 1}
    assert translate(_store(), memo) == first  # the same store, parsed again: nothing translated
    assert memo.translated == {"ns/a": 1, "ns/b": 1}
    flipped = translate(_store(weight_b=0), memo)
    assert memo.translated == {"ns/a": 1, "ns/b": 2}
    assert flipped == translate(_store(weight_b=0))
    assert [a for a in flipped.actions if a.route == "ns/route-a"] == [
        a for a in first.actions if a.route == "ns/route-a"
    ]
    # A Service only Gateway a's route names: Gateway a alone again.
    store = _store(weight_b=0)
    services = dict(store.services or {})
    services[("ns", "svc-a")] = dataclasses.replace(services[("ns", "svc-a")], ports=())
    translate(dataclasses.replace(store, services=services), memo)
    assert memo.translated == {"ns/a": 2, "ns/b": 2}


def test_what_a_gateway_reads_leaves_out_what_only_another_names() -> None:
    scoped = gateway_inputs(_store())
    assert sorted(scoped) == ["ns/a", "ns/b"]
    a = scoped["ns/a"]
    assert [g.meta.name for g in a.gateways] == ["a"]
    assert [r.meta.name for r in a.routes] == ["route-a"]
    assert sorted(a.services or {}) == [("ns", "svc-a")]
