"""HTTPRoute's CORS filter (HTTPRouteCORS): the policy value refusing what the CRD refuses (every part of it reaches
an Envoy header value), origin patterns as RE2, the parser's defaults and bounds, the trip through the publish wire,
and the Envoy policy every route of the rule carries."""

from __future__ import annotations

import re
from typing import Any

import pytest
from envoy.extensions.filters.http.cors.v3 import cors_pb2

from tests.unit.test_gateway_translate import conditions, route, run
from trafficsplit.core.gatewayapi.httproute import parse_httproute
from trafficsplit.core.gatewayapi.translate import gateway_content
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.filters import CorsPolicy, cors_origin_regex
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire import envoy
from trafficsplit.wire.gateway_routes import route_configurations
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto

FULL = {
    "allowOrigins": ["https://www.example.com", "https://*.example.org"],
    "allowMethods": ["GET", "POST"],
    "allowHeaders": ["x-request-id"],
    "exposeHeaders": ["x-trace"],
    "allowCredentials": True,
    "maxAge": 600,
}


def _cors_rule(cors: dict[str, Any], **rule: Any) -> dict[str, Any]:
    return {"filters": [{"type": "CORS", "cors": cors}], "backendRefs": [{"name": "a", "port": 80}], **rule}


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda: CorsPolicy(allow_origins=("ftp://example.com",)), "allowOrigins[0]: 'ftp://example.com' must be"),
        (lambda: CorsPolicy(allow_origins=("https://example.com/path",)), "allowOrigins[0]:"),
        (lambda: CorsPolicy(allow_origins=("https://a b.com",)), "allowOrigins[0]:"),
        (lambda: CorsPolicy(allow_origins=("https://a.com\r\nx: y",)), "allowOrigins[0]:"),
        (lambda: CorsPolicy(allow_origins=("https://a.*.com",)), "allowOrigins[0]:"),
        (lambda: CorsPolicy(allow_origins=("*", "https://a.com")), "allowOrigins: '*' cannot be listed alongside"),
        (lambda: CorsPolicy(allow_origins=("https://a.com",) * 2), "allowOrigins: an item is listed twice"),
        (
            lambda: CorsPolicy(allow_origins=tuple(f"https://h{i}.com" for i in range(65))),
            "allowOrigins: 65 items, at most 64",
        ),
        # Envoy would NACK the whole route configuration for a regex over its program-size bound: refused here.
        (lambda: CorsPolicy(allow_origins=(f"https://*.{'a' * 200}.com",)), "allowOrigins[0]: RE2 program size"),
        (lambda: CorsPolicy(allow_methods=("FETCH",)), "allowMethods[0]: 'FETCH' must be an HTTP method or *"),
        (lambda: CorsPolicy(allow_methods=("get",)), "allowMethods[0]: 'get' must be"),
        (lambda: CorsPolicy(allow_methods=("*", "GET")), "allowMethods: '*' cannot be listed alongside"),
        (lambda: CorsPolicy(allow_headers=("x a",)), "allowHeaders[0]: 'x a' must be an HTTP header name"),
        (lambda: CorsPolicy(allow_headers=("x\n",)), "allowHeaders[0]:"),
        (lambda: CorsPolicy(allow_headers=("*", "x")), "allowHeaders: '*' cannot be listed alongside"),
        (lambda: CorsPolicy(expose_headers=("x,y",)), "exposeHeaders[0]: 'x,y' must be an HTTP header name"),
        (lambda: CorsPolicy(expose_headers=("h" * 257,)), "exposeHeaders[0]:"),
        (lambda: CorsPolicy(max_age=0), "maxAge: 0 is not in 1..2147483647"),
        (lambda: CorsPolicy(max_age=2**31), "maxAge: 2147483648 is not in 1..2147483647"),
    ],
)
def test_a_cors_policy_refuses_what_must_not_reach_envoy(make: Any, fragment: str) -> None:
    with pytest.raises(SpecError) as exc:
        make()
    assert any(fragment in q for q in exc.value.problems), exc.value.problems


def test_what_the_crd_allows_is_a_policy() -> None:
    p = CorsPolicy(
        allow_origins=("http://localhost:3000", "https://*.example.com", "https://*"),
        allow_methods=tuple(sorted({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"})),
        allow_headers=("*",),
        expose_headers=("*", "x-trace"),  # the CRD lets `*` stand beside others here
    )
    assert p.max_age == 5 and not p.allow_credentials


@pytest.mark.parametrize(
    ("origin", "matches", "misses"),
    [
        ("https://*.example.com", ["https://a.example.com", "https://a.b.example.com"], ["https://example.com"]),
        ("https://*.example.com", [], ["https://aexample.com", "http://a.example.com", "https://a.example.com.evil"]),
        ("https://*", ["https://x.org", "https://x.org:8443"], ["http://x.org"]),
        ("*", ["https://a.example.com", "null"], []),
    ],
)
def test_an_origin_pattern_is_re2_that_takes_only_its_origins(
    origin: str, matches: list[str], misses: list[str]
) -> None:
    regex = cors_origin_regex(origin)
    assert regex is not None
    assert all(re.fullmatch(regex, m) for m in matches)
    assert not any(re.fullmatch(regex, m) for m in misses)


def test_an_exact_origin_has_no_regex() -> None:
    assert cors_origin_regex("https://www.example.com:8443") is None


def test_the_parser_reads_every_field_and_defaults_max_age_to_5() -> None:
    (rule,) = parse_httproute(route(rules=[_cors_rule(FULL)])).rules
    assert rule.filters.cors == CorsPolicy(
        allow_origins=("https://www.example.com", "https://*.example.org"),
        allow_methods=("GET", "POST"),
        allow_headers=("x-request-id",),
        expose_headers=("x-trace",),
        allow_credentials=True,
        max_age=600,
    )
    (rule,) = parse_httproute(route(rules=[_cors_rule({"allowOrigins": ["*"]})])).rules
    assert rule.filters.cors == CorsPolicy(allow_origins=("*",), max_age=5)


@pytest.mark.parametrize(
    ("cors", "fragment"),
    [
        ({"allowCredentials": "yes"}, "spec.rules[0].filters[0].cors.allowCredentials: expected a boolean, got str"),
        ({"maxAge": 0}, "spec.rules[0].filters[0].cors.maxAge"),
        ({"allowOrigins": "https://a.com"}, "spec.rules[0].filters[0].cors.allowOrigins"),
        ({"allowMethods": [7]}, "spec.rules[0].filters[0].cors.allowMethods[0]: expected a string"),
    ],
)
def test_a_mistyped_cors_field_is_named(cors: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_httproute(route(rules=[_cors_rule(cors)]))
    assert any(fragment in q for q in exc.value.problems), exc.value.problems


def test_a_value_the_policy_refuses_drops_that_rule_alone_with_why() -> None:
    t = run(
        route(
            rules=[
                _cors_rule({"allowMethods": ["FETCH"]}, matches=[{"path": {"value": "/bad"}}]),
                {"backendRefs": [{"name": "a", "port": 80}]},
            ]
        )
    )
    accepted = conditions(t, "ns/r")["Accepted"]
    assert accepted[0] == "True", accepted
    assert len(t.actions) == 1 and t.actions[0].filters.cors is None


def test_cors_on_a_backend_ref_is_unsupported() -> None:
    rule = {"backendRefs": [{"name": "a", "port": 80, "filters": [{"type": "CORS", "cors": {}}]}]}
    t = run(route(rules=[rule]))
    assert conditions(t, "ns/r")["Accepted"] == ("False", "UnsupportedValue")


def _generation(*rules: dict[str, Any]) -> Any:
    return gateway_content(run(route(rules=list(rules))), "ns/gw").stamp(1)


def test_the_policy_goes_through_the_publish_wire() -> None:
    gen = _generation(_cors_rule(FULL))
    msg = generation_to_proto(gen, origin="test")
    (action,) = msg.routes.actions
    assert list(action.filters.cors.allow_origins) == FULL["allowOrigins"] and action.filters.cors.max_age == 600
    back = generation_from_proto(pb.Generation.FromString(msg.SerializeToString()))
    assert back == gen


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("allow_origins", ["https://a.com\r\nx: y"], "routes.actions[0].filters.cors.allowOrigins[0]"),
        ("allow_methods", ["*", "GET"], "routes.actions[0].filters.cors.allowMethods"),
        ("max_age", 0, "routes.actions[0].filters.cors.maxAge: 0"),
    ],
)
def test_the_receiver_refuses_a_bad_policy_by_its_field(field: str, value: Any, fragment: str) -> None:
    msg = generation_to_proto(_generation(_cors_rule(FULL)), origin="test")
    cors = msg.routes.actions[0].filters.cors
    if isinstance(value, list):
        del getattr(cors, field)[:]
        getattr(cors, field).extend(value)
    else:
        setattr(cors, field, value)
    with pytest.raises(SpecError) as exc:
        generation_from_proto(msg)
    assert any(q.startswith(fragment) for q in exc.value.problems), exc.value.problems


def test_every_route_of_the_rule_carries_the_envoy_policy_and_other_rules_none() -> None:
    split = _cors_rule(FULL, matches=[{"path": {"value": "/api"}}])
    split["backendRefs"] = [{"name": "a", "port": 80, "weight": 9}, {"name": "b", "port": 80, "weight": 1}]
    gen = _generation(split, {"backendRefs": [{"name": "a", "port": 80}]})
    (config,) = route_configurations(gen).values()
    vhost = next(v for v in config.virtual_hosts if v.name == "a.example.com")
    with_policy = {r.name: r.typed_per_filter_config.get(envoy.CORS_FILTER) for r in vhost.routes}
    api = [n for n in with_policy if ".rule-0:" in n]
    assert len(api) == 3  # two decided routes and the fallback
    assert [n for n, c in with_policy.items() if c is not None] == api
    policy = cors_pb2.CorsPolicy()
    assert with_policy[api[0]] is not None and with_policy[api[0]].Unpack(policy)
    assert [(m.exact, m.safe_regex.regex) for m in policy.allow_origin_string_match] == [
        ("https://www.example.com", ""),
        ("", r"https://.*\.example\.org"),
    ]
    assert (policy.allow_methods, policy.allow_headers, policy.expose_headers) == (
        "GET, POST",
        "x-request-id",
        "x-trace",
    )
    assert policy.max_age == "600" and policy.allow_credentials.value
    assert policy.HasField("forward_not_matching_preflights") and not policy.forward_not_matching_preflights.value
