"""A Gateway's route table both ways it reaches the core: the parser (an HTTPRoute) and the dataplane's receiver (the
publish proto), as tests/unit/test_split_rules.py does for splits. The receiver refuses what the parser refuses
(the parser refusing the route, or dropping the rule as UnsupportedValue), because both build the same self-checking
values; and a valid table goes out and comes back equal."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.unit.test_gateway_translate import CLASS, gateway, service
from trafficsplit.core.gatewayapi.httproute import parse_httproute
from trafficsplit.core.gatewayapi.objects import parse_gateway
from trafficsplit.core.gatewayapi.translate import Inputs, gateway_content, translate
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.weights import MAX_WEIGHT
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto

_HEADERS = {"set": [{"name": "X-Env", "value": "prod"}], "add": [{"name": "X-Via", "value": "ts"}], "remove": ["X-D"]}
VALID: dict[str, Any] = {
    "metadata": {"name": "shop", "namespace": "ns", "generation": 4, "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {
        "parentRefs": [{"name": "gw"}],
        "hostnames": ["shop.example.com"],
        "rules": [
            {
                "matches": [
                    {
                        "path": {"type": "PathPrefix", "value": "/api"},
                        "headers": [{"name": "X-Beta", "value": "1"}],
                        "queryParams": [{"type": "RegularExpression", "name": "q", "value": "[a-z]+"}],
                        "method": "GET",
                    }
                ],
                "filters": [
                    {"type": "RequestHeaderModifier", "requestHeaderModifier": copy.deepcopy(_HEADERS)},
                    {"type": "ResponseHeaderModifier", "responseHeaderModifier": copy.deepcopy(_HEADERS)},
                    {
                        "type": "URLRewrite",
                        "urlRewrite": {
                            "hostname": "internal.example.com",
                            "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v1"},
                        },
                    },
                ],
                "backendRefs": [
                    {
                        "name": "a",
                        "port": 80,
                        "weight": 90,
                        "filters": [
                            {"type": "RequestHeaderModifier", "requestHeaderModifier": copy.deepcopy(_HEADERS)}
                        ],
                    },
                    {"name": "b", "port": 80, "weight": 10},
                ],
            },
            {
                "matches": [{"path": {"type": "RegularExpression", "value": "/items/[0-9]+"}}],
                "backendRefs": [{"name": "a", "port": 80}, {"name": "gone", "port": 80, "weight": 3}],
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
                            "port": 8443,
                            "statusCode": 301,
                        },
                    }
                ],
            },
        ],
    },
}


def compile_gateway(body: dict[str, Any]) -> Generation:
    t = translate(
        Inputs(
            classes=(CLASS,),
            gateways=(parse_gateway(gateway()),),
            routes=(parse_httproute(body),),
            services={("ns", s): service(s) for s in ("a", "b")},
        )
    )
    return gateway_content(t, "ns/gw").stamp(1)


def valid_proto() -> pb.Generation:
    return generation_to_proto(compile_gateway(VALID), origin="test")


def parser_problems(body: dict[str, Any]) -> str:
    """Why the parser refuses the route, or drops a rule of it."""
    try:
        route = parse_httproute(body)
    except SpecError as exc:
        return "; ".join(exc.problems)
    return "; ".join(q for r in route.rules for q in r.problems)


def test_the_valid_table_passes_both_paths_and_comes_back_equal() -> None:
    assert parser_problems(VALID) == ""
    gen = compile_gateway(VALID)
    assert gen.routes is not None
    assert [a.key for a in gen.routes.actions] == ["ns/shop.rule-0", "ns/shop.rule-1", "ns/shop.rule-2"]
    assert [a.error_weight for a in gen.routes.actions] == [0, 3, 0]
    msg = generation_to_proto(gen, origin="test")
    back = generation_from_proto(msg)
    assert back == gen and back.routes == gen.routes
    assert generation_to_proto(back, origin="test").SerializeToString(deterministic=True) == msg.SerializeToString(
        deterministic=True
    )
    assert msg.HasField("routes")


def test_a_generation_of_trafficsplits_has_no_table_either_way() -> None:
    from tests.unit.test_split_rules import valid_proto as trafficsplit_proto

    msg = trafficsplit_proto()
    assert not msg.HasField("routes") and generation_from_proto(msg).routes is None


def _entry(msg: pb.Generation, rule: int) -> pb.RouteEntry:
    (lr,) = msg.routes.listeners
    (vh,) = lr.hosts
    return next(e for e in vh.entries if e.rule == rule)


def _spec_rule(rule: int, change: Callable[[dict[str, Any]], object]) -> Callable[[dict[str, Any]], object]:
    return lambda body: change(body["spec"]["rules"][rule])


@dataclass(frozen=True)
class Bad:
    rule: str
    spec: Callable[[dict[str, Any]], object]  # changes the HTTPRoute body
    proto: Callable[[pb.Generation], object]  # changes the publish message
    fragment: str


def _set_header(value: str, name: str = "X-Env") -> Callable[[dict[str, Any]], object]:
    return _spec_rule(0, lambda r: r["filters"][0]["requestHeaderModifier"]["set"][0].update(name=name, value=value))


def _pb_set_header(value: str, name: str = "X-Env") -> Callable[[pb.Generation], object]:
    def change(m: pb.Generation) -> None:
        h = m.routes.actions[0].filters.request_headers.set[0]
        h.name, h.value = name, value

    return change


def _pb_redirect(m: pb.Generation) -> pb.Redirect:
    return m.routes.actions[2].filters.redirect


TABLE = [
    Bad(
        "header match values are printable",
        _spec_rule(0, lambda r: r["matches"][0]["headers"][0].update(value="a\x01")),
        lambda m: setattr(_entry(m, 0).match.headers[0], "value", "a\x01"),
        "only printable ASCII",
    ),
    Bad(
        "path patterns have a bounded program",
        _spec_rule(1, lambda r: r["matches"][0]["path"].update(value="[a-z]{1,1000}")),
        lambda m: setattr(_entry(m, 1).match, "path", "[a-z]{1,1000}"),
        "program size",
    ),
    Bad(
        "paths are absolute",
        _spec_rule(0, lambda r: r["matches"][0]["path"].update(value="api")),
        lambda m: setattr(_entry(m, 0).match, "path", "api"),
        "must be an absolute path",
    ),
    Bad(
        "methods are the API's",
        _spec_rule(0, lambda r: r["matches"][0].update(method="BREW")),
        lambda m: setattr(_entry(m, 0).match, "method", "BREW"),
        "is not an HTTP method the API allows",
    ),
    Bad(
        "the gateway's own headers stay its own",
        _set_header("x", "X-Trafficsplit-Cluster"),
        _pb_set_header("x", "X-Trafficsplit-Cluster"),
        "x-trafficsplit-* headers are the gateway's own",
    ),
    Bad("no CR LF in a header value", _set_header("a\r\nb: c"), _pb_set_header("a\r\nb: c"), "only printable ASCII"),
    Bad("no host header change", _set_header("x", "Host"), _pb_set_header("x", "Host"), "the host header is not"),
    Bad(
        "at most 16 headers set",
        _spec_rule(
            0,
            lambda r: r["filters"][0]["requestHeaderModifier"].update(
                set=[{"name": f"h{i}", "value": "v"} for i in range(17)]
            ),
        ),
        lambda m: m.routes.actions[0].filters.request_headers.set.extend(
            pb.Header(name=f"h{i}", value="v") for i in range(16)
        ),
        "at most 16",
    ),
    Bad(
        "a rewrite's hostname is a DNS name",
        _spec_rule(0, lambda r: r["filters"][2]["urlRewrite"].update(hostname="*.example.com")),
        lambda m: setattr(m.routes.actions[0].filters.rewrite, "hostname", "*.example.com"),
        "must be a DNS name",
    ),
    Bad(
        "a replacement path has no query",
        _spec_rule(0, lambda r: r["filters"][2]["urlRewrite"]["path"].update(replacePrefixMatch="/v1?a=b")),
        lambda m: setattr(m.routes.actions[0].filters.rewrite.path, "value", "/v1?a=b"),
        "must be an absolute path of printable ASCII",
    ),
    Bad(
        "redirect codes are the API's",
        _spec_rule(2, lambda r: r["filters"][0]["requestRedirect"].update(statusCode=304)),
        lambda m: setattr(_pb_redirect(m), "status_code", 304),
        "must be one of 301, 302, 303, 307, 308",
    ),
    Bad(
        "a redirect has no backend",
        _spec_rule(2, lambda r: r.update(backendRefs=[{"name": "a", "port": 80}])),
        lambda m: setattr(m.routes.actions[2], "error_weight", 1),
        "backendRefs",
    ),
    Bad(
        "a redirect or a rewrite",
        _spec_rule(0, lambda r: r["filters"].append({"type": "RequestRedirect", "requestRedirect": {}})),
        lambda m: m.routes.actions[0].filters.redirect.SetInParent(),
        "not both",
    ),
    Bad(
        "a prefix replacement needs a PathPrefix match",
        _spec_rule(0, lambda r: r["matches"][0]["path"].update(type="Exact")),
        lambda m: setattr(_entry(m, 0).match, "path_type", pb.RouteMatch.EXACT),
        "PathPrefix",
    ),
    Bad(
        "backend weights are bounded",
        _spec_rule(0, lambda r: r["backendRefs"][1].update(weight=MAX_WEIGHT + 1)),
        lambda m: setattr(m.routes.actions[0].targets[1], "weight", MAX_WEIGHT + 1),
        f"0..{MAX_WEIGHT}",
    ),
]


@pytest.mark.parametrize("bad", TABLE, ids=lambda b: b.rule)
def test_the_parser_and_the_receiver_refuse_the_same_table(bad: Bad) -> None:
    body = copy.deepcopy(VALID)
    bad.spec(body)
    assert bad.fragment in parser_problems(body)

    msg = valid_proto()
    bad.proto(msg)
    with pytest.raises(SpecError) as received:
        generation_from_proto(msg)
    assert bad.fragment in str(received.value)
    assert all(q.startswith("routes.") for q in received.value.problems), received.value.problems


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda m: setattr(m.routes.actions[0], "split", "ns/other.rule-0"), "is not a split of this generation"),
        (lambda m: setattr(m.routes.actions[0], "rule", 9), "is not this rule's split ('ns/shop.rule-9')"),
        (lambda m: m.routes.listeners.extend([m.routes.listeners[0]] * 64), "65 listeners, at most 64"),
        (lambda m: setattr(_entry(m, 0).match, "path_type", 7), "match.path_type: unknown type 7"),
        (lambda m: setattr(m.routes.listeners[0].hosts[0], "hostname", "a b"), "hosts[0].hostname: 'a b'"),
        (lambda m: setattr(m.routes, "gateway", "gw"), "routes.listeners[0].gateway: 'gw' must be namespace/name"),
        (lambda m: m.routes.ClearField("actions"), "rule ns/shop.rule-0 has no action"),
        (lambda m: setattr(_pb_redirect(m), "scheme", "ftp"), "redirect.scheme: 'ftp' must be http or https"),
        (lambda m: setattr(m.routes.listeners[0], "hostname", "x.example.net"), "is not within the listener's"),
    ],
)
def test_the_receiver_refuses_a_table_no_translation_builds(
    change: Callable[[pb.Generation], Any], fragment: str
) -> None:
    msg = valid_proto()
    change(msg)
    with pytest.raises(SpecError) as received:
        generation_from_proto(msg)
    assert fragment in str(received.value), received.value.problems


def test_a_rule_split_without_the_table_is_refused_whole() -> None:
    msg = valid_proto()
    msg.ClearField("routes")
    with pytest.raises(SpecError, match=r"splits\[0\]\.hosts: at least one host is required"):
        generation_from_proto(msg)
