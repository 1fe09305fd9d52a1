"""Within one Gateway's translation, a route whose own inputs did not change is not resolved again: its parents'
attachment, its backendRefs and mirrors, its rules' actions and its policies' refusals are kept by what they read
(`gatewayapi.route_memo`). Only what routes share is walked again for every route: the precedence of their matches,
the duplicate-match check and each listener's table. Over generated stores and changes of every input a route reads,
a translation through the memo equals a fresh one."""

from __future__ import annotations

import copy
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit import gatewayapi as golden
from tests.unit.test_translate_per_gateway import CONTROLLER, meta, stores
from trafficsplit.core.gatewayapi import backends as backends_module
from trafficsplit.core.gatewayapi import precedence as precedence_module
from trafficsplit.core.gatewayapi import translate as translate_module
from trafficsplit.core.gatewayapi.translate import TranslationMemo, translate


def gateway_of(n: int, weight: int = 1) -> list[dict[str, Any]]:
    """One Gateway, one listener for every host, `n` one-rule routes each on a host of its own (the 1,000-route
    bench's shape); route-0's weights are `weight`/1."""
    bodies: list[dict[str, Any]] = [
        {"kind": "GatewayClass", "metadata": meta("ts", None), "spec": {"controllerName": CONTROLLER}},
        {"kind": "Namespace", "metadata": {"name": "ns", "labels": {}}},
        {
            "kind": "Gateway",
            "metadata": meta("gw"),
            "spec": {"gatewayClassName": "ts", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
        },
    ]
    for colour in ("blue", "green"):
        bodies.append(
            {
                "kind": "Service",
                "metadata": {"name": colour, "namespace": "ns"},
                "spec": {"ports": [{"name": "http", "port": 80}]},
            }
        )
    for i in range(n):
        refs = [
            {"name": "blue", "port": 80, "weight": weight if i == 0 else 1},
            {"name": "green", "port": 80, "weight": 1},
        ]
        bodies.append(
            {
                "kind": "HTTPRoute",
                "metadata": meta(f"route-{i}"),
                "spec": {
                    "parentRefs": [{"name": "gw"}],
                    "hostnames": [f"h{i}.example"],
                    "rules": [{"backendRefs": refs}],
                },
            }
        )
    return bodies


def test_a_flip_of_one_route_resolves_that_routes_refs_alone() -> None:
    """Issue 28's 1,000-route flip: the operator translated every route of the Gateway again for each change of
    one (about 60-100 ms of the flip's 234 ms before its publish, at 1,000 routes)."""
    memo = TranslationMemo()
    translate(golden.inputs_of(gateway_of(3))[0], memo)
    flipped = golden.inputs_of(gateway_of(3, weight=4))[0]
    with mock.patch.object(translate_module, "resolve_refs", wraps=backends_module.resolve_refs) as resolve_refs:
        got = translate(flipped, memo)
    assert [c.args[0].meta.name for c in resolve_refs.call_args_list] == ["route-0"]
    assert got == translate(flipped)


def test_a_flip_walks_no_route_again_and_keeps_the_other_routes_statuses() -> None:
    """The rest of the 1,000-route flip: after the route memo, every route was still walked for the conflicts and
    the tables (a `taken_matches` per route and parent, the tables sorted again). A weight changes no route's shape:
    no conflict is looked for again, the tables are the last ones, and the routes not flipped keep their status
    objects (which the operator's status memo compares by identity)."""
    memo = TranslationMemo()
    before = translate(golden.inputs_of(gateway_of(3))[0], memo)
    flipped = golden.inputs_of(gateway_of(3, weight=4))[0]
    with mock.patch.object(translate_module, "taken_matches", wraps=precedence_module.taken_matches) as taken:
        got = translate(flipped, memo)
    assert taken.call_count == 0
    assert got == translate(flipped)
    kept = {rs.route for rs in got.routes if any(rs is old for old in before.routes)}
    assert kept == {"ns/route-1", "ns/route-2"}
    assert got.listeners == before.listeners and all(
        a is b for a, b in zip(got.listeners, before.listeners, strict=True)
    )


# What a change can touch of what a route reads: its own spec, a backend's Service, the namespace's labels (a
# listener's selector reads them), the Gateway's listeners, a grant, a policy.
def _change(bodies: list[dict[str, Any]], data: st.DataObject) -> None:
    kinds = sorted({b["kind"] for b in bodies})
    kind = data.draw(st.sampled_from(kinds))
    of_kind = [b for b in bodies if b["kind"] == kind]
    body = data.draw(st.sampled_from(of_kind))
    if kind == "HTTPRoute":
        # A weight or a generation leaves the walk's shape alone (`route_memo.walk_shape`); a match, a hostname or
        # the route's age changes it.
        what = data.draw(st.sampled_from(["weight", "generation", "match", "hostnames", "created"]))
        refs = body["spec"]["rules"][0].get("backendRefs") or []
        if what == "weight" and refs:
            refs[0]["weight"] = refs[0].get("weight", 1) + 1
        elif what == "generation":
            body["metadata"]["generation"] = body["metadata"].get("generation", 1) + 1
        elif what == "match":
            body["spec"]["rules"][0]["matches"] = [{"path": {"type": "PathPrefix", "value": "/changed"}}]
        elif what == "created":
            body["metadata"]["creationTimestamp"] = "2025-06-01T00:00:00Z"
        else:
            body["spec"]["hostnames"] = ["changed.example"]
    elif kind == "Service":
        body["spec"]["ports"] = [] if body["spec"].get("ports") else [{"name": "http", "port": 80}]
    elif kind == "Namespace":
        labels = body["metadata"].setdefault("labels", {})
        if labels.get("team") == "b":
            del labels["team"]
        else:
            labels["team"] = "b"
    elif kind == "Gateway":
        listeners = body["spec"]["listeners"]
        if len(listeners) > 1:
            listeners.pop()
    else:
        bodies.remove(body)  # a grant, a policy or a class gone


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stores(), st.data())
def test_a_translation_through_the_route_memo_is_a_fresh_translation(
    bodies: list[dict[str, Any]], data: st.DataObject
) -> None:
    memo = TranslationMemo()
    translate(golden.inputs_of(bodies)[0], memo)
    for _ in range(data.draw(st.integers(1, 3))):
        bodies = copy.deepcopy(bodies)
        _change(bodies, data)
        inputs = golden.inputs_of(bodies)[0]
        assert translate(inputs, memo) == translate(inputs)
