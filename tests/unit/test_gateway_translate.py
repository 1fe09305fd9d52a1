"""The Gateway API translation's rules one at a time (the golden files in tests/testdata/gatewayapi show them together):
hostname intersection, bounds at parse time, durations, precedence, the split is a TrafficSplit's split, status."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.control.resolve import ServiceInfo, ServicePort, SliceEndpoint, SliceInfo
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.decide.request import Request
from trafficsplit.core.decide.split import decide
from trafficsplit.core.gatewayapi import actions as gateway_actions
from trafficsplit.core.gatewayapi.attachment import intersect_hostnames
from trafficsplit.core.gatewayapi.httproute import MAX_ROUTE_HOSTNAMES, parse_duration, parse_httproute
from trafficsplit.core.gatewayapi.objects import parse_gateway, parse_gateway_class
from trafficsplit.core.gatewayapi.translate import Inputs, Translation, TranslationMemo, gateway_content, translate
from trafficsplit.core.model.compiled import CompiledSplit
from trafficsplit.core.model.cookie import AffinityMinter
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.matches import MAX_RULE_MATCHES
from trafficsplit.core.model.persistent import MAC_CHARS, MIN_KEY_BYTES, CookieSigner
from trafficsplit.core.model.routes import MAX_HOST_ENTRIES
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto

CLASS = parse_gateway_class(
    {"metadata": {"name": "ts"}, "spec": {"controllerName": "trafficsplit.dev/gateway-controller"}}
)


def gateway(*listeners: dict[str, Any]) -> dict[str, Any]:
    items = list(listeners) or [{"name": "http", "port": 80, "protocol": "HTTP"}]
    return {"metadata": {"name": "gw", "namespace": "ns"}, "spec": {"gatewayClassName": "ts", "listeners": items}}


def route(name: str = "r", created: str = "2026-01-01T00:00:00Z", **spec: Any) -> dict[str, Any]:
    spec.setdefault("parentRefs", [{"name": "gw"}])
    spec.setdefault("hostnames", ["a.example.com"])
    return {"metadata": {"name": name, "namespace": "ns", "creationTimestamp": created, "generation": 2}, "spec": spec}


def service(name: str, namespace: str = "ns") -> ServiceInfo:
    return ServiceInfo(namespace, name, (ServicePort(name="http", port=80, target_port=8080),))


def run(
    *routes: dict[str, Any], gw: dict[str, Any] | None = None, services: tuple[str, ...] = ("a", "b")
) -> Translation:
    return translate(
        Inputs(
            classes=(CLASS,),
            gateways=(parse_gateway(gw or gateway()),),
            routes=tuple(parse_httproute(r) for r in routes),
            services={("ns", s): service(s) for s in services},
        )
    )


def conditions(t: Translation, route_key: str = "ns/r") -> dict[str, tuple[str, str]]:
    (r,) = [x for x in t.routes if x.route == route_key]
    return {c.type: (c.status, c.reason) for c in r.parents[0].conditions}


@pytest.mark.parametrize(
    ("listener", "route_hosts", "served"),
    [
        (None, [], ()),
        (None, ["a.example.com"], ("a.example.com",)),
        ("a.example.com", [], ("a.example.com",)),
        ("a.example.com", ["a.example.com", "b.example.com"], ("a.example.com",)),
        ("*.example.com", ["a.example.com", "x.example.net"], ("a.example.com",)),
        ("*.example.com", ["a.b.example.com"], ("a.b.example.com",)),
        ("*.example.com", ["example.com"], None),
        ("a.example.com", ["*.example.com"], ("a.example.com",)),
        ("*.example.com", ["*.example.com"], ("*.example.com",)),
        ("*.example.com", ["*.b.example.com"], ("*.b.example.com",)),
        ("*.b.example.com", ["*.example.com"], ("*.b.example.com",)),
        ("*.example.com", ["*.example.net"], None),
        ("*.example.com", ["*.xexample.com", "a.xexample.com"], None),  # a suffix of labels, not of characters
    ],
)
def test_hostname_intersection(listener: str | None, route_hosts: list[str], served: tuple[str, ...] | None) -> None:
    assert intersect_hostnames(listener, route_hosts) == served


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1h", 3600), ("1h30m", 5400), ("10s", 10), ("1500ms", 2), ("1ms", 1), ("0s", 0), ("1h1m1s1ms", 3662)],
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1", "1d", "h", "123456s", "1h1m1s1ms1h", "-1s", "1.5s", "١s"])
def test_bad_durations(text: str) -> None:
    assert parse_duration(text) is None


def test_lists_over_the_crd_bounds_are_refused_while_parsing() -> None:
    hosts = [f"h{i}.example.com" for i in range(MAX_ROUTE_HOSTNAMES + 1)]
    with pytest.raises(SpecError, match=r"spec\.hostnames: 17 items, at most 16"):
        parse_httproute(route(hostnames=hosts))
    matches = [{"path": {"value": f"/{i}"}} for i in range(MAX_RULE_MATCHES + 1)]
    with pytest.raises(SpecError, match=r"spec\.rules\[0\]\.matches: 65 items, at most 64"):
        parse_httproute(route(rules=[{"matches": matches}]))
    with pytest.raises(SpecError, match=r"value: 4097 characters"):
        parse_httproute(route(rules=[{"matches": [{"headers": [{"name": "x", "value": "v" * 4097}]}]}]))


def test_a_rule_is_the_split_a_trafficsplit_with_the_same_backends_compiles_to() -> None:
    """Same backends, same weights, same cookie → the same backend for every new session key (the FNV-1a pick): the
    rule's split is the TrafficSplit's in sticky.mode persistent, whose first pick is the rehash pick of the key."""
    t = run(
        route(
            rules=[
                {
                    "backendRefs": [{"name": "a", "port": 80, "weight": 70}, {"name": "b", "port": 80, "weight": 30}],
                    "sessionPersistence": {"sessionName": "sid"},
                }
            ]
        )
    )
    (action,) = t.actions
    assert action.split is not None and action.split.persistent
    ts = compile_split(
        parse_split(
            "ns",
            "ts",
            {
                "hosts": ["a.example.com"],
                "backends": [{"name": "a", "port": 80, "weight": 70}, {"name": "b", "port": 80, "weight": 30}],
                "sticky": {"cookie": {"name": "sid"}, "mode": "persistent"},
            },
        )
    )
    minter = AffinityMinter()
    picks = {"a": 0, "b": 0}
    for k in range(2000):
        lines = [f"sid={k:024x}"]  # a minted key not sealed yet: its first pick is the weighted pick of the key
        mine = decide(
            action.split,
            Request(authority="", cookie_lines=lines, request_id="", headers={}),
            minter=minter,
            signer=SIGNER,
        )
        theirs = decide(
            ts, Request(authority="", cookie_lines=lines, request_id="", headers={}), minter=minter, signer=SIGNER
        )
        assert mine.backend.name == theirs.backend.name
        picks[mine.backend.name] += 1
    assert 1300 < picks["a"] < 1500  # 70 % of 2000, give or take the hash's spread


SIGNER = CookieSigner(b"k" * MIN_KEY_BYTES)


def one_rule_route(backends: Sequence[tuple[str, int]], session: dict[str, Any]) -> Translation:
    """The translation of a one-rule route with this sessionPersistence at these weights (the same route each time)."""
    refs = [{"name": n, "port": 80, "weight": w} for n, w in backends]
    # Ready endpoints: a pinned session stays only on a backend that can serve it (else it fails over).
    slices = {
        ("ns", n): (
            SliceInfo(
                namespace="ns",
                name=f"{n}-1",
                service=n,
                ports=(("http", 8080),),
                endpoints=(SliceEndpoint(f"10.0.0.{i}", True, f"{n}-pod"),),
            ),
        )
        for i, n in enumerate(("a", "b"), 1)
    }
    rule = {"backendRefs": refs, "sessionPersistence": session}
    return translate(
        Inputs(
            classes=(CLASS,),
            gateways=(parse_gateway(gateway()),),
            routes=(parse_httproute(route(rules=[rule])),),
            services={("ns", s): service(s) for s in ("a", "b")},
            slices=slices,
        )
    )


def sticky_split(*backends: tuple[str, int]) -> CompiledSplit:
    """The split of a one-rule route with Cookie sessionPersistence at these weights (the same route each time)."""
    (action,) = one_rule_route(backends, {"sessionName": "sid"}).actions
    assert action.split is not None
    return action.split


def visit(split: CompiledSplit, cookie: str | None, minter: AffinityMinter) -> tuple[str, str | None]:
    """One request through the data plane's decide: the backend, and the cookie the client holds afterwards."""
    d = decide(
        split,
        Request(authority="", cookie_lines=[cookie] if cookie else [], request_id="rid", headers={}),
        minter=minter,
        signer=SIGNER,
    )
    if d.set_cookie is not None:
        cookie = d.set_cookie.split(";", 1)[0]
    return d.backend.name, cookie


def sessions(split: CompiledSplit, n: int) -> list[tuple[str, str]]:
    minter = AffinityMinter()
    out = []
    for _ in range(n):
        backend, cookie = visit(split, None, minter)
        assert cookie is not None and cookie.startswith("sid=")
        out.append((backend, cookie))
    return out


def test_session_persistence_is_the_sealed_persistent_cookie() -> None:
    split = sticky_split(("a", 90), ("b", 0))
    assert split.persistent and split.cookie is not None and split.cookie.name == "sid"
    assert [(b.name, b.drain) for b in split.backends] == [("a", False), ("b", True)]  # weight 0 keeps its sessions
    plain = run(route(rules=[{"backendRefs": [{"name": "a", "port": 80, "weight": 0}, {"name": "b", "port": 80}]}]))
    (action,) = plain.actions
    assert action.split is not None and not action.split.persistent
    assert [b.drain for b in action.split.backends] == [False, False]  # no cookie: nothing to keep


def test_a_weight_change_moves_no_sealed_session_and_new_sessions_follow_the_new_weights() -> None:
    before = sessions(sticky_split(("a", 90), ("b", 10)), 1000)
    counts = Counter(b for b, _ in before)
    assert 850 < counts["a"] < 950 and counts["b"] > 50
    after = sticky_split(("a", 50), ("b", 50))
    minter = AffinityMinter()
    moved = [(b, visit(after, c, minter)[0]) for b, c in before if visit(after, c, minter)[0] != b]
    assert moved == []
    fresh = Counter(b for b, _ in sessions(after, 1000))
    assert 430 < fresh["a"] < 570


def test_weight_0_keeps_its_sessions_and_takes_no_new_one() -> None:
    before = sessions(sticky_split(("a", 50), ("b", 50)), 400)
    on_b = [c for b, c in before if b == "b"]
    assert len(on_b) > 100
    zero = sticky_split(("a", 50), ("b", 0))
    minter = AffinityMinter()
    assert {visit(zero, c, minter)[0] for c in on_b} == {"b"}
    assert Counter(b for b, _ in sessions(zero, 300)) == {"a": 300}


def test_removing_the_backendref_moves_its_sessions_and_only_those() -> None:
    before = sessions(sticky_split(("a", 50), ("b", 50)), 400)
    removed = sticky_split(("a", 50))
    minter = AffinityMinter()
    landed = [(b, visit(removed, c, minter)[0]) for b, c in before]
    assert all(now == "a" for _, now in landed)
    assert sum(b == "b" for b, _ in landed) > 100  # b's sessions moved to a; a's stayed


def test_a_tampered_or_foreign_seal_is_a_new_session() -> None:
    (backend, cookie), *_ = sessions(sticky_split(("a", 50), ("b", 50)), 1)
    assert cookie is not None
    other = "b" if backend == "a" else "a"
    key = cookie.removeprefix("sid=").split(".")[0]
    forged = f"sid={key}.{other}.{'A' * MAC_CHARS}"
    minter = AffinityMinter()
    _, new_cookie = visit(sticky_split(("a", 50), ("b", 50)), forged, minter)
    assert new_cookie != forged and new_cookie is not None and not new_cookie.startswith(f"sid={key}.")


def test_without_session_persistence_the_key_is_the_request_id() -> None:
    t = run(route(rules=[{"backendRefs": [{"name": "a", "port": 80}]}]))
    (action,) = t.actions
    assert action.split is not None and action.split.cookie is None and not action.split.sticky


def test_the_split_checks_apply_a_session_name_that_is_no_cookie_name_drops_the_rule() -> None:
    t = run(
        route(
            rules=[
                {"backendRefs": [{"name": "a", "port": 80}], "sessionPersistence": {"sessionName": "a b"}},
                {"matches": [{"path": {"value": "/ok"}}], "backendRefs": [{"name": "a", "port": 80}]},
            ]
        )
    )
    assert [a.rule for a in t.actions] == [1]
    (parent,) = t.routes[0].parents
    partly = next(c for c in parent.conditions if c.type == "PartiallyInvalid")
    assert partly.message.startswith("Dropped Rule")
    assert "sessionName: 'a b' is not an RFC 6265 cookie name" in partly.message


def test_precedence_across_routes() -> None:
    older = route(
        "older",
        "2026-01-01T00:00:00Z",
        rules=[
            {
                "matches": [
                    {"path": {"type": "PathPrefix", "value": "/"}},
                    {"path": {"type": "PathPrefix", "value": "/api"}},
                    {"path": {"type": "PathPrefix", "value": "/api"}, "headers": [{"name": "X", "value": "1"}]},
                ],
                "backendRefs": [{"name": "a", "port": 80}],
            }
        ],
    )
    newer = route(
        "newer",
        "2026-02-01T00:00:00Z",
        rules=[
            {
                "matches": [
                    {"path": {"type": "Exact", "value": "/api/x"}},
                    {"path": {"type": "PathPrefix", "value": "/api"}},
                    {"path": {"type": "PathPrefix", "value": "/api"}, "method": "GET"},
                    {"path": {"type": "PathPrefix", "value": "/api"}, "queryParams": [{"name": "q", "value": "1"}]},
                ],
                "backendRefs": [{"name": "b", "port": 80}],
            }
        ],
    )
    for order in ((older, newer), (newer, older)):  # the input order does not matter
        t = run(*order)
        (lr,) = t.listeners
        (vh,) = lr.hosts
        assert [(e.route, e.match_index) for e in vh.entries] == [
            ("ns/newer", 0),  # Exact
            ("ns/newer", 2),  # the longest prefix, with a method
            ("ns/older", 2),  # then more headers
            ("ns/newer", 3),  # then more query params
            ("ns/older", 1),  # then the older route
            ("ns/newer", 1),
            ("ns/older", 0),  # the shortest prefix last
        ]


def test_a_match_an_older_route_takes_is_named_on_the_newer_route() -> None:
    """Two routes with the same match on the same listener and host: the older one wins (the spec's precedence) and
    the newer one's requests never reach it. The newer route stays Accepted (its other matches serve) and its parent
    says which match is taken by whom (`Conflicted`, reason RuleMatchConflict); the older route says nothing."""
    older = route(
        "older", "2026-01-01T00:00:00Z", rules=[{"matches": [{"path": {"type": "PathPrefix", "value": "/shop"}}],
                                                  "backendRefs": [{"name": "a", "port": 80}]}]
    )  # fmt: skip
    newer = route(
        "newer",
        "2026-02-01T00:00:00Z",
        rules=[
            {
                "matches": [
                    {"path": {"type": "PathPrefix", "value": "/shop"}},
                    {"path": {"type": "PathPrefix", "value": "/shop"}, "method": "GET"},
                ],
                "backendRefs": [{"name": "b", "port": 80}],
            }
        ],
    )
    elsewhere = route("elsewhere", "2026-03-01T00:00:00Z", hostnames=["b.example.com"], rules=[
        {"matches": [{"path": {"type": "PathPrefix", "value": "/shop"}}], "backendRefs": [{"name": "b", "port": 80}]}
    ])  # fmt: skip
    for order in ((older, newer, elsewhere), (elsewhere, newer, older)):
        t = run(*order)
        assert conditions(t, "ns/newer")["Accepted"] == ("True", "Accepted")
        assert conditions(t, "ns/newer")["Conflicted"] == ("True", "RuleMatchConflict")
        (parent,) = next(r for r in t.routes if r.route == "ns/newer").parents
        message = next(c.message for c in parent.conditions if c.type == "Conflicted")
        assert message == "rules[0].matches[0] on a.example.com never matches: ns/older rules[0] takes it (older)"
        assert "Conflicted" not in conditions(t, "ns/older")
        assert "Conflicted" not in conditions(t, "ns/elsewhere")  # another host: no conflict


def test_a_taken_match_names_its_first_holder_among_many() -> None:
    """Three routes with one identical match on one host: the two newer ones each name the oldest, which precedes
    both, never the middle one (the holder index keeps each match's first entry in precedence order)."""

    def same(name: str, created: str) -> Any:
        return route(name, created, rules=[{"matches": [{"path": {"type": "Exact", "value": "/x"}}],
                                            "backendRefs": [{"name": "a", "port": 80}]}])  # fmt: skip

    routes = [same("first", "2026-01-01T00:00:00Z"), same("second", "2026-02-01T00:00:00Z"),
              same("third", "2026-03-01T00:00:00Z")]  # fmt: skip
    for order in (routes, routes[::-1]):
        t = run(*order)
        for loser in ("second", "third"):
            (parent,) = next(r for r in t.routes if r.route == f"ns/{loser}").parents
            message = next(c.message for c in parent.conditions if c.type == "Conflicted")
            assert message == "rules[0].matches[0] on a.example.com never matches: ns/first rules[0] takes it (older)"
        assert "Conflicted" not in conditions(t, "ns/first")


def test_unresolved_refs_keep_their_share_as_errors() -> None:
    t = run(
        route(rules=[{"backendRefs": [{"name": "a", "port": 80, "weight": 3}, {"name": "gone", "port": 80}]}]),
        services=("a",),
    )
    (action,) = t.actions
    assert action.error_weight == 1 and action.split is not None
    assert [b.name for b in action.split.backends] == ["a"]
    assert conditions(t)["ResolvedRefs"] == ("False", "BackendNotFound")
    assert conditions(t)["Accepted"] == ("True", "Accepted")


def test_listeners_on_one_port_with_two_protocols_conflict() -> None:
    t = run(
        route(),
        gw=gateway(
            {"name": "a", "port": 80, "protocol": "HTTP", "hostname": "a.example.com"},
            {"name": "b", "port": 80, "protocol": "TCP"},
        ),
    )
    (gs,) = t.gateways
    for ls in gs.listeners:
        conflicted = next(c for c in ls.conditions if c.type == "Conflicted")
        assert (conflicted.status, conflicted.reason) == ("True", "ProtocolConflict")
        assert ls.attached_routes == 0
    assert conditions(t)["Accepted"] == ("False", "NotAllowedByListeners")


def test_attached_routes_count_accepted_routes_only() -> None:
    t = run(
        route("r"),
        route("s", hostnames=["b.example.com"]),
        route(
            "u",
            hostnames=["c.example.com"],
            rules=[
                {
                    "filters": [
                        {"type": "ExtensionRef", "extensionRef": {"group": "example.com", "kind": "Authz", "name": "x"}}
                    ]
                }
            ],
        ),
    )
    (gs,) = t.gateways
    assert gs.listeners[0].attached_routes == 2
    assert conditions(t, "ns/u")["Accepted"] == ("False", "UnsupportedValue")


def test_routes_of_other_controllers_get_no_status_from_us() -> None:
    other = parse_gateway_class({"metadata": {"name": "other"}, "spec": {"controllerName": "example.com/x"}})
    gw = gateway()
    gw["spec"]["gatewayClassName"] = "other"
    t = translate(Inputs(classes=(CLASS, other), gateways=(parse_gateway(gw),), routes=(parse_httproute(route()),)))
    assert t.routes == () and t.gateways == () and t.listeners == ()
    assert [c.name for c in t.classes] == ["ts"]


def test_two_parent_refs_to_one_listener_attach_the_route_once() -> None:
    """attachedRoutes counts routes, and a request must meet each of a route's matches once, however many of its
    parentRefs reach the same listener (here: the whole Gateway, and the listener by its sectionName)."""
    t = run(route(parentRefs=[{"name": "gw"}, {"name": "gw", "sectionName": "http"}]))
    (gs,) = t.gateways
    assert gs.listeners[0].attached_routes == 1
    (lr,) = t.listeners
    (vh,) = lr.hosts
    assert [(e.route, e.rule, e.match_index) for e in vh.entries] == [("ns/r", 0, 0)]
    assert conditions(t)["Accepted"] == ("True", "Accepted")


def test_requests_meet_the_rules_in_precedence_order() -> None:
    """The precedence golden case read by requests: each request reaches the match the spec gives it."""
    from tests.unit.gatewayapi import inputs_of, load
    from trafficsplit.core.decide.match import RouteTable

    inputs, _ = inputs_of(load("precedence"))
    (listener,) = translate(inputs).listeners
    table = RouteTable(listener)

    def hit(path: str, method: str = "GET", headers: dict[str, str] | None = None, **query: str) -> str | None:
        h = headers or {}
        e = table.select("WWW.example.com:80", path, method, lambda n: h.get(n), query)
        return None if e is None else f"{e.route}#{e.match_index}"

    assert hit("/api/health") == "web/older#1"  # Exact beats every prefix
    assert hit("/api/v2/items") == "web/older#3"  # the regex, ranked before prefixes
    assert hit("/api", "POST") == "web/newer#1"  # a method beats headers at the same prefix
    assert hit("/api/x", headers={"x-version": "2", "x-tier": "gold"}) == "web/newer#2"  # more headers
    assert hit("/api/x", headers={"x-version": "2", "x-tier": "bronze"}) == "other/a-same-age#0"  # regex fails
    assert hit("/api/x", debug="1", beta="yes") == "web/older#2"  # query params
    # /api prefix, equal matches: the older routes first, and of two as old, other/… before web/…
    assert hit("/api/x") == "other/a-same-age#0"
    assert hit("/apis") == "web/older#4"  # /api matches whole segments only: falls to "/"
    assert hit("/") == "web/older#4"
    assert table.select("other.example.com", "/") is None  # no virtual host: the spec's 404


def test_wildcard_virtual_hosts_take_the_longest_suffix() -> None:
    from tests.unit.gatewayapi import inputs_of, load
    from trafficsplit.core.decide.match import RouteTable

    inputs, _ = inputs_of(load("hostnames"))
    wild = next(lr for lr in translate(inputs).listeners if lr.listener == "wild")
    table = RouteTable(wild)

    def route_of(host: str) -> str | None:
        e = table.select(host, "/")
        return None if e is None else e.route

    assert route_of("foo.example.com") == "web/exact-and-foreign"
    assert route_of("x.deep.example.com") == "web/wildcards"
    assert route_of("bar.example.com") == "web/wildcards"
    assert route_of("example.com") is None
    assert route_of(".example.com") is None


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.text(max_size=12)
    | st.sampled_from(
        [
            *("Exact", "PathPrefix", "RegularExpression", "/", "gw", "a", "Cookie", "Header", "Permanent", "1h"),
            *("HTTP", "RequestHeaderModifier", "ResponseHeaderModifier", "RequestRedirect", "URLRewrite"),
            *("ReplacePrefixMatch", "ReplaceFullPath", "https", "X-A", "host", "a.example.com", 301),
        ]
    ),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(max_size=8)
            | st.sampled_from(
                [
                    "requestHeaderModifier",
                    "responseHeaderModifier",
                    "requestRedirect",
                    "urlRewrite",
                    "set",
                    "add",
                    "remove",
                    "replacePrefixMatch",
                    "replaceFullPath",
                    "hostname",
                    "statusCode",
                    "scheme",
                    "path",
                    "type",
                    "value",
                    "name",
                    "port",
                    "weight",
                    "matches",
                    "backendRefs",
                    "headers",
                    "sessionPersistence",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)
_PLACES = ("spec", "rules", "rule", "match", "backendRef", "parentRef", "session", "hostnames", "filter", "refFilter")


@settings(max_examples=200, deadline=None)
@given(place=st.sampled_from(_PLACES), value=_JSON)
def test_hostile_route_bodies_are_refused_by_name_or_translated(place: str, value: Any) -> None:
    """Whatever a body holds where, parsing raises SpecError or gives a value that translates; nothing else."""
    rule: dict[str, Any] = {"matches": [{"path": {"value": "/"}}], "backendRefs": [{"name": "a", "port": 80}]}
    body = route(rules=[rule])
    if place == "spec":
        body["spec"] = value
    elif place == "rules":
        body["spec"]["rules"] = value
    elif place == "rule":
        body["spec"]["rules"] = [value]
    elif place == "match":
        rule["matches"] = [value]
    elif place == "backendRef":
        rule["backendRefs"] = [value]
    elif place == "parentRef":
        body["spec"]["parentRefs"] = [value]
    elif place == "session":
        rule["sessionPersistence"] = value
    elif place == "filter":
        rule["filters"] = [value]
    elif place == "refFilter":
        rule["backendRefs"][0]["filters"] = [value]
    else:
        body["spec"]["hostnames"] = value
    try:
        parsed = parse_httproute(body)
    except SpecError as exc:
        assert exc.problems and all(isinstance(p, str) and ":" in p for p in exc.problems)
        return
    t = translate(Inputs(classes=(CLASS,), gateways=(parse_gateway(gateway()),), routes=(parsed,)))
    # What translates is a valid generation, and the publish API carries it there and back unchanged.
    gen = gateway_content(t, "ns/gw").stamp(1)
    assert generation_from_proto(generation_to_proto(gen)) == gen


@settings(max_examples=150, deadline=None)
@given(place=st.sampled_from(("spec", "listeners", "listener", "allowedRoutes")), value=_JSON)
def test_hostile_gateway_bodies_are_refused_by_name_or_translated(place: str, value: Any) -> None:
    body = gateway()
    if place == "spec":
        body["spec"] = value
    elif place == "listeners":
        body["spec"]["listeners"] = value
    elif place == "listener":
        body["spec"]["listeners"] = [value]
    else:
        body["spec"]["listeners"][0]["allowedRoutes"] = value
    try:
        parsed = parse_gateway(body)
    except SpecError as exc:
        assert exc.problems and all(isinstance(p, str) and ":" in p for p in exc.problems)
        return
    translate(Inputs(classes=(CLASS,), gateways=(parsed,), routes=(parse_httproute(route()),)))


def test_a_gateway_that_is_not_accepted_takes_no_route() -> None:
    gw = gateway()
    gw["spec"]["addresses"] = [{"type": "Hostname", "value": "gw.example"}]
    t = run(route(), gw=gw)
    (gs,) = t.gateways
    accepted = gs.conditions[0]
    assert (accepted.type, accepted.status, accepted.reason) == ("Accepted", "False", "UnsupportedAddress")
    assert gs.listeners[0].attached_routes == 0
    assert t.listeners == () and t.actions == ()
    assert conditions(t)["Accepted"] == ("False", "NotAllowedByListeners")


@pytest.mark.parametrize(
    ("addresses", "refused", "static"),
    [
        # An address of a type with no value asks the implementation for one (GEP-3616; GatewayAddressEmpty): the
        # data plane's Service gives it, so the Gateway is accepted.
        ([{"type": "IPAddress"}], None, ()),
        ([{}], None, ()),  # the CRD defaults the type to IPAddress; a body read before defaulting means the same
        # A static IP address is accepted and handed to the data plane's Service (GatewayStaticAddresses), in the
        # canonical form the Service and the status will carry.
        ([{"type": "IPAddress", "value": "192.0.2.1"}], None, ("192.0.2.1",)),
        ([{"value": "2001:DB8:0:0::7"}], None, ("2001:db8::7",)),
        ([{"type": "IPAddress"}, {"type": "IPAddress", "value": "10.96.0.250"}], None, ("10.96.0.250",)),
        # Anything else is refused with its index: an address must be an IP.
        # Several: accepted here, each kept once; whether the Service can hold them is the provisioner's to say
        # (Programmed: False, AddressNotUsable), as the conformance suite's GatewayStaticAddresses expects.
        (
            [{"value": "192.0.2.1"}, {"value": "192.0.2.2"}, {"value": "192.0.2.1"}],
            None,
            ("192.0.2.1", "192.0.2.2"),
        ),
        ([{"type": "IPAddress", "value": "gw.example"}], "spec.addresses[0].value: 'gw.example' is not an IP", ()),
        (
            [{"type": "IPAddress"}, {"type": "Hostname", "value": "gw.example"}],
            "spec.addresses[1].type: 'Hostname'",
            (),
        ),
        ([{"type": "example.com/pool"}], "spec.addresses[0].type: 'example.com/pool' is not supported (only IP", ()),
        (
            [{"type": "IPAddress", "colour": "red"}],
            "spec.addresses[0].colour: not supported by this implementation",
            (),
        ),
    ],
)
def test_an_address_without_a_value_is_assigned_a_static_ip_kept_and_others_refused_by_index(
    addresses: list[dict[str, str]], refused: str | None, static: tuple[str, ...]
) -> None:
    gw = gateway()
    gw["spec"]["addresses"] = addresses
    assert parse_gateway(gw).static_addresses == static
    (gs,) = run(route(), gw=gw).gateways
    accepted = gs.conditions[0]
    if refused is None:
        assert (accepted.type, accepted.status, accepted.reason) == ("Accepted", "True", "Accepted"), accepted
    else:
        assert (accepted.status, accepted.reason) == ("False", "UnsupportedAddress"), accepted
        assert refused in accepted.message, accepted.message


def test_more_addresses_than_the_crd_allows_are_refused_by_the_parser() -> None:
    gw = gateway()
    gw["spec"]["addresses"] = [{"type": "IPAddress"}] * 17
    with pytest.raises(SpecError, match=r"spec.addresses: 17 items, at most 16 are allowed"):
        parse_gateway(gw)


def test_status_echoes_the_parent_ref_as_written() -> None:
    """A status entry names its parentRef as the spec holds it (the API server defaults group and kind, not the
    namespace): the conformance suite compares them field by field, and a namespace we add is a mismatch."""
    t = run(route(parentRefs=[{"name": "gw"}, {"name": "gw", "namespace": "ns", "sectionName": "http"}]))
    (r,) = t.routes
    assert [p.parent.to_dict() for p in r.parents] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"},
        {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "namespace": "ns",
            "name": "gw",
            "sectionName": "http",
        },
    ]


@pytest.mark.parametrize(
    "rule",
    [
        {"matches": 5},  # counted against the route-wide bound before the rule is read
        {"backendRefs": "abc"},  # read for filters before the rule is read
        {"backendRefs": [{"name": "a", "port": 80, "filters": 7}]},
    ],
)
def test_mistyped_rule_fields_are_named_problems(rule: dict[str, Any]) -> None:
    with pytest.raises(SpecError, match=r"spec\.rules\[0\]\."):
        parse_httproute(route(rules=[rule]))


def test_an_oversized_backend_ref_list_is_refused_before_it_is_walked() -> None:
    refs = [{"name": "a", "port": 80, "filters": [{"type": "CORS"}]}] * 10_000
    with pytest.raises(SpecError) as info:
        parse_httproute(route(rules=[{"backendRefs": refs}]))
    assert info.value.problems == ("spec.rules[0].backendRefs: 10000 items, at most 16 are allowed",)


def test_top_level_problems_name_the_field_from_the_root() -> None:
    with pytest.raises(SpecError) as info:
        parse_httproute({"metadata": 5, "spec": []})
    assert info.value.problems[0] == "metadata: expected an object"
    assert "spec: expected an object" in info.value.problems


def test_routes_without_hostnames_serve_every_host_after_the_named_ones() -> None:
    """A route with no hostname on a listener with none is the listener's catch-all virtual host (`*`): exact names
    first, then the longest `*.` suffix, then `*`, as Envoy orders its domains."""
    from tests.unit.gatewayapi import inputs_of, load
    from trafficsplit.core.decide.match import RouteTable

    inputs, _ = inputs_of(load("hostless"))
    t = translate(inputs)
    (lr,) = t.listeners
    assert sorted(vh.hostname for vh in lr.hosts) == ["*", "*.example.com", "app.example.com"]
    table = RouteTable(lr)

    def hit(host: str, path: str = "/") -> str | None:
        e = table.select(host, path)
        return None if e is None else f"{e.route}#{e.rule}"

    assert hit("app.example.com") == "web/app#0"
    assert hit("x.example.com") == "web/wild#0"
    assert hit("example.com") == "web/everything#0"  # `*.example.com` does not cover the apex
    assert hit("example.net:8080") == "web/everything#0"
    assert hit("10.0.0.1", "/healthz") == "web/everything#1"  # Exact before the `/` prefix
    assert hit("app.example.com", "/healthz") == "web/app#0"  # a named host does not fall through to `*`
    assert all(c.ok for r in t.routes for p in r.parents for c in p.conditions if c.type == "Accepted")


def test_an_empty_session_persistence_is_a_cookie_with_the_default_name() -> None:
    """`sessionPersistence: {}` is valid (every field is optional; `type` defaults to Cookie): the rule is sticky, with
    the per-rule default cookie name, as an absent sessionName is."""
    t = run(route(rules=[{"backendRefs": [{"name": "a", "port": 80}], "sessionPersistence": {}}]))
    (action,) = t.actions
    assert action.split is not None and action.split.persistent and action.split.cookie is not None
    assert action.split.cookie.name.startswith("ts-")
    absent = run(route(rules=[{"backendRefs": [{"name": "a", "port": 80}]}]))
    (plain,) = absent.actions
    assert plain.split is not None and plain.split.cookie is None


def test_the_memo_builds_only_the_rules_whose_inputs_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """One weight patched among three routes compiles one split (the operator's pass at 1,000 routes, bench_flip);
    new endpoints rebuild every rule that names the Service; the result equals a translation without the memo."""
    compiled: list[str] = []
    real = compile_split

    def counting(spec: Any, *args: Any, **kw: Any) -> Any:
        compiled.append(spec.name)
        return real(spec, *args, **kw)

    monkeypatch.setattr(gateway_actions, "compile_split", counting)

    def weighted(name: str, a: int, generation: int = 2) -> dict[str, Any]:
        r = route(
            name,
            hostnames=[f"{name}.example.com"],
            rules=[
                {"backendRefs": [{"name": "a", "port": 80, "weight": a}, {"name": "b", "port": 80, "weight": 100 - a}]}
            ],
        )
        r["metadata"]["generation"] = generation
        return r

    def slices(*ready_a: str) -> dict[tuple[str, str], tuple[SliceInfo, ...]]:
        def one(svc: str, ips: tuple[str, ...]) -> tuple[SliceInfo, ...]:
            eps = tuple(SliceEndpoint(ip, True, f"{svc}-{i}") for i, ip in enumerate(ips))
            return (SliceInfo(namespace="ns", name=f"{svc}-x", service=svc, ports=(("http", 8080),), endpoints=eps),)

        return {("ns", "a"): one("a", ready_a), ("ns", "b"): one("b", ("10.0.1.1",))}

    def inputs(routes: list[dict[str, Any]], sl: dict[tuple[str, str], tuple[SliceInfo, ...]]) -> Inputs:
        return Inputs(
            classes=(CLASS,),
            gateways=(parse_gateway(gateway()),),
            routes=tuple(parse_httproute(r) for r in routes),
            services={("ns", s): service(s) for s in ("a", "b")},
            slices=sl,
        )

    memo = TranslationMemo()
    routes = [weighted(n, 100) for n in ("x", "y", "z")]
    first = translate(inputs(routes, slices("10.0.0.1")), memo)
    assert sorted(compiled) == ["x.rule-0", "y.rule-0", "z.rule-0"]
    compiled.clear()
    routes[1] = weighted("y", 0, generation=3)
    second = translate(inputs(routes, slices("10.0.0.1")), memo)
    assert compiled == ["y.rule-0"]
    assert second == translate(inputs(routes, slices("10.0.0.1")))
    assert [a.split for a in second.actions if a.route != "ns/y"] == [
        a.split for a in first.actions if a.route != "ns/y"
    ]
    compiled.clear()
    third = translate(inputs(routes, slices("10.0.0.1", "10.0.0.2")), memo)  # a new endpoint of Service a
    assert sorted(compiled) == ["x.rule-0", "y.rule-0", "z.rule-0"]
    assert third == translate(inputs(routes, slices("10.0.0.1", "10.0.0.2")))
    assert third != second


def test_a_gateway_over_the_virtual_host_bound_is_refused_alone() -> None:
    """One tenant's Gateway whose host holds more match entries than a virtual host may (MAX_HOST_ENTRIES) cannot be
    served, and only it: the translation still gives every other Gateway its content (before, the bound raised out
    of `translate` and the operator's pass published no Gateway at all), and asking for the refused Gateway's content
    raises with the bound named, so the operator keeps its last good generation and says why in its status."""
    per_route = MAX_RULE_MATCHES
    count = MAX_HOST_ENTRIES // per_route + 1

    def crowding(i: int) -> dict[str, Any]:
        matches = [{"path": {"type": "PathPrefix", "value": f"/r{i}/{j}"}} for j in range(per_route)]
        return route(f"r{i}", rules=[{"matches": matches, "backendRefs": [{"name": "a", "port": 80}]}])

    crowded = [crowding(i) for i in range(count)]
    other_gw = gateway()
    other_gw["metadata"] = {"name": "other", "namespace": "ns"}
    neighbour = route("n", parentRefs=[{"name": "other"}], rules=[{"backendRefs": [{"name": "b", "port": 80}]}])
    t = translate(
        Inputs(
            classes=(CLASS,),
            gateways=(parse_gateway(gateway()), parse_gateway(other_gw)),
            routes=tuple(parse_httproute(r) for r in [*crowded, neighbour]),
            services={("ns", s): service(s) for s in ("a", "b")},
        )
    )
    served = gateway_content(t, "ns/other").routes
    assert served is not None and [str(a.key) for a in served.actions] == ["ns/n.rule-0"]
    with pytest.raises(SpecError) as refused:
        gateway_content(t, "ns/gw")
    assert any(f"at most {MAX_HOST_ENTRIES} are allowed" in p for p in refused.value.problems)
