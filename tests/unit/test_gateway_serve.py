"""A Gateway's route tables served per request (core/decide/serve.py): which rule by the spec's precedence, the
rule's split deciding as a TrafficSplit's does, 404 when nothing matches, 500 for a rule without backends and for the
share of backendRefs that do not resolve, tables kept by listener port."""

from __future__ import annotations

from typing import Any

from trafficsplit.core.control.resolve import ServiceInfo, ServicePort
from trafficsplit.core.decide.request import Request
from trafficsplit.core.decide.serve import (
    MAX_QUERY_PARAMS,
    HeaderEdits,
    Redirected,
    Refusal,
    Refused,
    Routed,
    ServedRoutes,
    in_error_share,
    merged_edits,
    response_modifiers,
    split_target,
)
from trafficsplit.core.decide.split import decide
from trafficsplit.core.gatewayapi.httproute import parse_httproute
from trafficsplit.core.gatewayapi.objects import parse_gateway, parse_gateway_class
from trafficsplit.core.gatewayapi.translate import Inputs, Translation, translate
from trafficsplit.core.model.cookie import AffinityMinter
from trafficsplit.core.model.hashing import key_hash

CLASS = parse_gateway_class(
    {"metadata": {"name": "ts"}, "spec": {"controllerName": "trafficsplit.dev/gateway-controller"}}
)
LISTENERS = [
    {"name": "http", "port": 80, "protocol": "HTTP", "hostname": "a.example.com"},
    {"name": "other", "port": 80, "protocol": "HTTP", "hostname": "b.example.com"},
    {"name": "alt", "port": 8081, "protocol": "HTTP"},
]


def route(name: str, created: str = "2026-01-01T00:00:00Z", **spec: Any) -> dict[str, Any]:
    spec.setdefault("parentRefs", [{"name": "gw"}])
    return {"metadata": {"name": name, "namespace": "ns", "creationTimestamp": created, "generation": 1}, "spec": spec}


def ref(name: str, weight: int) -> dict[str, Any]:
    return {"name": name, "port": 80, "weight": weight}


def served(*routes: dict[str, Any], services: tuple[str, ...] = ("a", "b", "c")) -> tuple[ServedRoutes, Translation]:
    gw = {"metadata": {"name": "gw", "namespace": "ns"}, "spec": {"gatewayClassName": "ts", "listeners": LISTENERS}}
    t = translate(
        Inputs(
            classes=(CLASS,),
            gateways=(parse_gateway(gw),),
            routes=tuple(parse_httproute(r) for r in routes),
            services={
                ("ns", s): ServiceInfo("ns", s, (ServicePort(name="http", port=80, target_port=8080),))
                for s in services
            },
        )
    )
    return ServedRoutes(t.listeners, t.actions), t


def ask(
    s: ServedRoutes,
    port: int,
    host: str,
    path: str = "/",
    method: str = "GET",
    headers: dict[str, str] | None = None,
    request_id: str = "rid",
) -> Routed | Refused | Redirected:
    h = {":path": path, ":method": method, **(headers or {})}
    return s.route(
        port, Request(authority=host, cookie_lines=(), request_id=request_id, headers=h), minter=AffinityMinter()
    )


def rule_of(out: Routed | Refused | Redirected) -> tuple[str, int]:
    assert isinstance(out, Routed), out
    return out.entry.route, out.entry.rule


def test_precedence_across_routes_of_a_listener() -> None:
    s, _ = served(
        route(
            "prefix",
            hostnames=["a.example.com"],
            rules=[
                {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}], "backendRefs": [ref("a", 1)]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}], "backendRefs": [ref("a", 1)]},
            ],
        ),
        route(
            "exact",
            created="2026-02-01T00:00:00Z",  # younger, but Exact outranks any prefix
            hostnames=["a.example.com"],
            rules=[
                {"matches": [{"path": {"type": "Exact", "value": "/api/v1"}}], "backendRefs": [ref("b", 1)]},
                {
                    "matches": [
                        {"path": {"type": "PathPrefix", "value": "/api"}, "headers": [{"name": "x-v", "value": "2"}]}
                    ],
                    "backendRefs": [ref("b", 1)],
                },
                {
                    "matches": [{"path": {"value": "/q"}, "queryParams": [{"name": "v", "value": "2"}]}],
                    "backendRefs": [ref("c", 1)],
                },
                {"matches": [{"path": {"value": "/m"}, "method": "POST"}], "backendRefs": [ref("c", 1)]},
            ],
        ),
    )
    assert rule_of(ask(s, 80, "a.example.com", "/api/v1")) == ("ns/exact", 0)
    assert rule_of(ask(s, 80, "a.example.com", "/api/v1?x=1")) == ("ns/exact", 0)  # the query is not the path
    assert rule_of(ask(s, 80, "a.example.com", "/api/v2")) == ("ns/prefix", 1)  # the longer prefix
    assert rule_of(ask(s, 80, "a.example.com", "/api/v2", headers={"x-v": "2"})) == ("ns/exact", 1)  # more headers
    assert rule_of(ask(s, 80, "a.example.com", "/apis")) == ("ns/prefix", 0)  # whole segments
    assert rule_of(ask(s, 80, "a.example.com", "/q?a=1&v=2")) == ("ns/exact", 2)
    assert rule_of(ask(s, 80, "a.example.com", "/q?v=3")) == ("ns/prefix", 0)
    assert rule_of(ask(s, 80, "a.example.com", "/m", method="POST")) == ("ns/exact", 3)
    assert rule_of(ask(s, 80, "a.example.com", "/m", method="GET")) == ("ns/prefix", 0)


def test_no_match_is_404_and_tables_are_per_port() -> None:
    s, _ = served(
        route(
            "r",
            parentRefs=[{"name": "gw", "sectionName": "http"}],
            hostnames=["a.example.com"],
            rules=[{"matches": [{"path": {"value": "/shop"}}], "backendRefs": [ref("a", 1)]}],
        ),
        route(
            "alt",
            parentRefs=[{"name": "gw", "sectionName": "alt"}],
            hostnames=["c.example.com"],
            rules=[{"backendRefs": [ref("b", 1)]}],
        ),
    )
    assert s.ports == (80, 8081)
    assert ask(s, 80, "a.example.com", "/other") == Refused(Refusal.NO_ROUTE)
    assert ask(s, 80, "a.example.com", "/other").status == 404  # type: ignore[union-attr]
    assert ask(s, 80, "unknown.example.com", "/shop") == Refused(Refusal.NO_ROUTE)
    # The same host on the other listener: its own table, never the other port's.
    assert ask(s, 8081, "a.example.com", "/shop") == Refused(Refusal.NO_ROUTE)
    assert rule_of(ask(s, 8081, "c.example.com", "/anything")) == ("ns/alt", 0)
    assert ask(s, 80, "c.example.com", "/anything") == Refused(Refusal.NO_ROUTE)
    assert ask(s, 9999, "a.example.com", "/shop") == Refused(Refusal.NO_ROUTE)  # a port with no table


def test_listeners_sharing_a_port_share_its_table() -> None:
    s, _ = served(
        route("ra", parentRefs=[{"name": "gw", "sectionName": "http"}], rules=[{"backendRefs": [ref("a", 1)]}]),
        route("rb", parentRefs=[{"name": "gw", "sectionName": "other"}], rules=[{"backendRefs": [ref("b", 1)]}]),
    )
    assert rule_of(ask(s, 80, "a.example.com")) == ("ns/ra", 0)
    assert rule_of(ask(s, 80, "b.example.com")) == ("ns/rb", 0)


def test_the_rule_split_decides_as_decide_does_for_every_request_id() -> None:
    s, t = served(
        route("r", hostnames=["a.example.com"], rules=[{"backendRefs": [ref("a", 70), ref("b", 30), ref("c", 0)]}])
    )
    (action,) = t.actions
    assert action.split is not None and action.error_weight == 0
    counts = {"a": 0, "b": 0, "c": 0}
    for i in range(4000):
        out = ask(s, 80, "a.example.com", request_id=f"req-{i}")
        assert isinstance(out, Routed)
        expected = decide(
            action.split,
            Request(authority="", cookie_lines=(), request_id=f"req-{i}", headers={}),
            minter=AffinityMinter(),
        )
        assert out.decision.backend.name == expected.backend.name == action.split.weights.pick(f"req-{i}")
        counts[out.decision.backend.name] += 1
    assert counts["c"] == 0
    assert 0.66 < counts["a"] / 4000 < 0.74


def test_a_rule_without_backends_is_500() -> None:
    s, t = served(
        route("r", hostnames=["a.example.com"], rules=[{"backendRefs": [ref("missing", 5)]}]), services=("a",)
    )
    assert t.actions[0].split is None
    assert ask(s, 80, "a.example.com") == Refused(Refusal.NO_BACKEND)
    assert Refused(Refusal.NO_BACKEND).status == 500


def test_the_unresolved_share_answers_500_for_its_keys_only() -> None:
    s, t = served(
        route("r", hostnames=["a.example.com"], rules=[{"backendRefs": [ref("a", 60), ref("missing", 40)]}]),
        services=("a",),
    )
    (action,) = t.actions
    assert action.split is not None and action.error_weight == 40
    refused = 0
    for i in range(4000):
        rid = f"req-{i}"
        out = ask(s, 80, "a.example.com", request_id=rid)
        h = key_hash(rid)
        # The top 40 of 100 slots are the 500 share; everything else is the TrafficSplit pick.
        assert isinstance(out, Refused) == (h % 100 >= 60) == in_error_share(action.split, 40, h)
        if isinstance(out, Refused):
            assert out == Refused(Refusal.ERROR_SHARE) and out.status == 500
            refused += 1
        else:
            assert isinstance(out, Routed) and out.decision.backend.name == "a"
    assert 0.36 < refused / 4000 < 0.44


def test_query_parsing_is_bounded() -> None:
    assert split_target("/p") == ("/p", {})
    assert split_target("/p?a=1&a=2&b&=x&c=") == ("/p", {"a": "1", "b": "", "c": ""})
    many = "&".join(f"k{i}=v" for i in range(MAX_QUERY_PARAMS * 3))
    path, params = split_target("/p?" + many)
    assert path == "/p" and len(params) == MAX_QUERY_PARAMS


FILTERED = route(
    "f",
    parentRefs=[{"name": "gw", "sectionName": "http"}],
    hostnames=["a.example.com"],
    rules=[
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/headers"}}],
            "filters": [
                {
                    "type": "RequestHeaderModifier",
                    "requestHeaderModifier": {
                        "set": [{"name": "X-Env", "value": "prod"}],
                        "add": [{"name": "X-Via", "value": "ts"}],
                        "remove": ["X-Debug"],
                    },
                },
                {
                    "type": "ResponseHeaderModifier",
                    "responseHeaderModifier": {
                        "set": [{"name": "Cache-Control", "value": "no-store"}],
                        "remove": ["Server"],
                    },
                },
            ],
            "backendRefs": [
                ref("a", 1),
                {
                    **ref("b", 1),
                    "filters": [
                        {
                            "type": "RequestHeaderModifier",
                            "requestHeaderModifier": {"set": [{"name": "X-Canary", "value": "1"}], "remove": ["X-Env"]},
                        },
                        {
                            "type": "ResponseHeaderModifier",
                            "responseHeaderModifier": {"add": [{"name": "X-Backend", "value": "b"}]},
                        },
                    ],
                },
            ],
        },
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/prefix/one"}}],
            "filters": [
                {
                    "type": "URLRewrite",
                    "urlRewrite": {
                        "hostname": "internal.example.com",
                        "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/one"},
                    },
                }
            ],
            "backendRefs": [ref("a", 1)],
        },
        {
            "matches": [{"path": {"type": "Exact", "value": "/full"}}],
            "filters": [
                {"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/x"}}}
            ],
            "backendRefs": [ref("a", 1)],
        },
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/old"}}],
            "filters": [
                {
                    "type": "RequestRedirect",
                    "requestRedirect": {
                        "scheme": "https",
                        "hostname": "new.example.com",
                        "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"},
                        "statusCode": 301,
                    },
                }
            ],
        },
        {
            "matches": [{"path": {"type": "Exact", "value": "/moved"}}],
            "filters": [
                {
                    "type": "RequestRedirect",
                    "requestRedirect": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/here"}},
                }
            ],
        },
    ],
)


def test_redirects_answer_the_cores_location() -> None:
    s, _ = served(FILTERED)
    assert ask(s, 80, "a.example.com", "/old/page?q=1") == Redirected(301, "https://new.example.com/new/page?q=1")
    assert ask(s, 80, "a.example.com:80", "/moved") == Redirected(302, "http://a.example.com/here")


def test_rewrites_set_path_and_authority_keeping_the_query() -> None:
    s, _ = served(FILTERED)
    out = ask(s, 80, "a.example.com", "/prefix/one/two?k=v")
    assert isinstance(out, Routed)
    assert dict(out.edits.set) == {":authority": "internal.example.com", ":path": "/one/two?k=v"}
    full = ask(s, 80, "a.example.com", "/full?z=1")
    assert isinstance(full, Routed) and full.edits == HeaderEdits(set=((":path", "/x?z=1"),))


def test_request_header_filters_apply_the_rules_then_the_picked_backends() -> None:
    s, t = served(FILTERED)
    seen = set()
    for i in range(64):
        out = ask(s, 80, "a.example.com", "/headers", request_id=f"k{i}")
        assert isinstance(out, Routed)
        backend = out.decision.backend.name
        seen.add(backend)
        if backend == "a":
            assert out.edits == HeaderEdits(set=(("x-env", "prod"),), add=(("x-via", "ts"),), remove=("x-debug",))
        else:  # b's own filter sets x-canary and removes the x-env the rule set
            assert out.edits == HeaderEdits(
                set=(("x-canary", "1"),), add=(("x-via", "ts"),), remove=("x-debug", "x-env")
            )
    assert seen == {"a", "b"}
    mods = response_modifiers(t.actions)
    assert set(mods) == {"ns/f.rule-0/a", "ns/f.rule-0/b"}
    assert merged_edits(mods["ns/f.rule-0/b"]) == HeaderEdits(
        set=(("cache-control", "no-store"),), add=(("x-backend", "b"),), remove=("server",)
    )
