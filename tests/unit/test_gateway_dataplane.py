"""A Gateway's generation served by the processor and rendered for Envoy, without Envoy: the listener the call names
selects the route table, the reply routes to the core's pick or is the gateway's own 404/500, the same over both
transports; Envoy gets the rule splits' clusters and the catch-all gateway host that fails closed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from google.protobuf import json_format

from trafficsplit.core.gatewayapi.translate import gateway_content
from trafficsplit.core.model.generation import Generation
from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.httpcodec import JsonReplies, decode_request_view, encode_response
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.extproc.processor import Processor
from trafficsplit.wire import envoy
from trafficsplit.wire.envoy import LISTENER_PORT_METADATA, ROUTING_HEADER
from trafficsplit.wire.processing import request_view

from .test_gateway_serve import FILTERED, ref, route, served


def gateway_generation(number: int = 5) -> Generation:
    _, t = served(
        route(
            "shop",
            parentRefs=[{"name": "gw", "sectionName": "http"}],
            hostnames=["a.example.com"],
            rules=[
                {"matches": [{"path": {"value": "/api"}}], "backendRefs": [ref("a", 70), ref("b", 30), ref("c", 0)]},
                {"matches": [{"path": {"value": "/broken"}}], "backendRefs": [ref("missing", 1)]},
            ],
        ),
        route(
            "alt",
            parentRefs=[{"name": "gw", "sectionName": "alt"}],
            hostnames=["a.example.com"],
            rules=[{"backendRefs": [ref("c", 1)]}],
        ),
    )
    return gateway_content(t, "ns/gw").stamp(number)


def request(**headers: str) -> ep.ProcessingRequest:
    req = ep.ProcessingRequest()
    for k, v in headers.items():
        req.request_headers.headers.headers.append(base_pb2.HeaderValue(key=k, raw_value=v.encode()))
    return req


def processor() -> Processor:
    held = HeldGeneration()
    held.swap(gateway_generation(), "test")
    return Processor(held, Metrics())


def routed_to(reply: ep.ProcessingResponse) -> str | None:
    for h in reply.request_headers.response.header_mutation.set_headers:
        if h.header.key == ROUTING_HEADER:
            return str(h.header.raw_value.decode())
    return None


def ask(
    p: Processor, port: int | None, path: str, rid: str = "r1", host: str = "a.example.com"
) -> ep.ProcessingResponse:
    return p.handle(request(**{":authority": host, ":path": path, ":method": "GET", "x-request-id": rid}), port)


def test_the_listener_named_in_the_call_selects_the_table_and_the_core_picks() -> None:
    p = processor()
    gen = gateway_generation()
    assert gen.routes is not None
    action = gen.routes.by_rule["ns/shop.rule-0"]
    assert action.split is not None
    for i in range(300):
        reply = ask(p, 80, "/api", rid=f"req-{i}")
        assert routed_to(reply) == f"ns/shop.rule-0/{action.split.weights.pick(f'req-{i}')}"
    # The other listener's table: the same host and path meet route `alt` there.
    assert routed_to(ask(p, 8081, "/api")) == "ns/alt.rule-0/c"


def test_refusals_are_the_gateways_own_answers() -> None:
    p = processor()
    nothing = ask(p, 80, "/nothing")
    assert nothing.immediate_response.status.code == 404
    assert nothing.immediate_response.details == "trafficsplit_no_route"
    broken = ask(p, 80, "/broken")
    assert broken.immediate_response.status.code == 500
    assert broken.immediate_response.details == "trafficsplit_no_backend"
    # No listener named (a filter without metadata): the TrafficSplit path, which has no split for the host.
    assert ask(p, None, "/api").immediate_response.status.code == 404
    assert ask(p, None, "/api").immediate_response.details == "trafficsplit_no_split"


def test_the_grpc_call_metadata_names_the_listener() -> None:
    p = processor()

    class Stream:
        def __init__(self, md: tuple[tuple[str, str], ...]) -> None:
            self.md, self.sent = md, False

        async def read(self) -> ep.ProcessingRequest:
            self.sent = True
            return request(**{":authority": "a.example.com", ":path": "/api", "x-request-id": "k"})

        def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
            return self.md

    on_alt = asyncio.run(p.Process(None, Stream(((LISTENER_PORT_METADATA, "8081"),))))  # type: ignore[arg-type]
    assert routed_to(on_alt) == "ns/alt.rule-0/c"
    # A client's request header of the same name is not the call's metadata: it selects nothing.
    spoofed = request(**{":authority": "a.example.com", ":path": "/api", LISTENER_PORT_METADATA: "8081"})
    assert p.handle(spoofed).immediate_response.details == "trafficsplit_no_split"


def test_the_http_transport_answers_as_grpc_does() -> None:
    grpc_path, json_path, rendered = processor(), processor(), JsonReplies()
    for path, rid in (("/api", "a"), ("/api", "b"), ("/nothing", "c"), ("/broken", "d")):
        for port in (80, 8081):
            req = request(**{":authority": "a.example.com", ":path": path, "x-request-id": rid})
            view = decode_request_view(json_format.MessageToJson(req).encode())
            assert not isinstance(view, str)
            got = json_path.respond(lambda v=view: v, rendered.render, port)  # type: ignore[misc]
            assert json.loads(got) == json.loads(encode_response(grpc_path.handle(req, port)))
    assert (
        request_view(request(**{":path": "/p?q=1", ":method": "POST"}).request_headers.headers.headers).path == "/p?q=1"
    )


def test_envoy_gets_the_rule_clusters_and_a_gateway_host_that_fails_closed() -> None:
    gen = gateway_generation()
    res = envoy.resources(gen)
    assert set(res.clusters) == {"ns/shop.rule-0/a", "ns/shop.rule-0/b", "ns/shop.rule-0/c", "ns/alt.rule-0/c"}
    assert res.routes is not None
    (vhost,) = res.routes[envoy.ROUTE_CONFIG_NAME].virtual_hosts
    assert vhost.name == envoy.GATEWAY_VHOST and list(vhost.domains) == ["*"]
    decided, undecided = vhost.routes
    assert decided.route.cluster_header == ROUTING_HEADER
    assert undecided.direct_response.status == 503
    # The packed builder gives the same configuration.
    packed = envoy.ResourceBuilder().resources(gen)
    assert packed.routes is not None
    assert envoy.route_configuration(gen).SerializeToString(deterministic=True) == _unpacked(packed.routes)


def _unpacked(routes: Any) -> bytes:
    rc = route_pb2.RouteConfiguration()
    routes[envoy.ROUTE_CONFIG_NAME].Unpack(rc)
    return bytes(rc.SerializeToString(deterministic=True))


def test_response_header_filters_are_envoy_routes_per_backend_cluster() -> None:
    _, t = served(FILTERED)
    gen = gateway_content(t, "ns/gw").stamp(2)
    (vhost,) = envoy.route_configuration(gen).virtual_hosts
    by_name = {r.name: r for r in vhost.routes}
    # One route per cluster with response filters, before the generic decided route; the rest as without filters.
    assert [r.name for r in vhost.routes] == [
        "decided:ns/f.rule-0/a",
        "decided:ns/f.rule-0/b",
        "decided",
        "no-decision",
    ]
    b = by_name["decided:ns/f.rule-0/b"]
    assert b.match.headers[0].name == ROUTING_HEADER and b.match.headers[0].string_match.exact == "ns/f.rule-0/b"
    assert b.route.cluster == "ns/f.rule-0/b"
    assert [(h.header.key, h.header.value, h.append_action) for h in b.response_headers_to_add] == [
        ("cache-control", "no-store", h_overwrite()),
        ("x-backend", "b", h_append()),
    ]
    assert list(b.response_headers_to_remove) == ["server"]


def h_overwrite() -> int:
    return int(base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD)


def h_append() -> int:
    return int(base_pb2.HeaderValueOption.APPEND_IF_EXISTS_OR_ADD)


def test_redirects_rewrites_and_header_filters_in_the_reply() -> None:
    _, t = served(FILTERED)
    held = HeldGeneration()
    held.swap(gateway_content(t, "ns/gw").stamp(2), "test")
    p = Processor(held, Metrics())
    moved = ask(p, 80, "/old/a?b=c")
    assert moved.immediate_response.status.code == 301
    assert [(h.header.key, h.header.raw_value) for h in moved.immediate_response.headers.set_headers] == [
        ("location", b"https://new.example.com/new/a?b=c")
    ]
    rewritten = ask(p, 80, "/prefix/one/x")
    sets = {h.header.key: h.header.raw_value for h in rewritten.request_headers.response.header_mutation.set_headers}
    assert sets[":path"] == b"/one/x" and sets[":authority"] == b"internal.example.com"
    assert rewritten.request_headers.response.clear_route_cache
    headers = ask(p, 80, "/headers", rid="k1")
    m = headers.request_headers.response.header_mutation
    assert "x-debug" in m.remove_headers
    added = [(h.header.key, h.append.value) for h in m.set_headers if h.header.key == "x-via"]
    assert added == [("x-via", True)]  # appended beside a client's value (ext_proc reads `append`)
    # Over http_service too: the JSON keeps the append flag (without it Envoy replaces the client's value).
    doc = json.loads(encode_response(headers))
    via = [
        h for h in doc["request_headers"]["response"]["header_mutation"]["set_headers"] if h["header"]["key"] == "x-via"
    ]
    assert via and via[0]["append"] is True
    # The http_service transport renders the same replies.
    rendered = JsonReplies()
    for path in ("/old/a?b=c", "/prefix/one/x", "/headers"):
        req = request(**{":authority": "a.example.com", ":path": path, "x-request-id": "k1"})
        view = decode_request_view(json_format.MessageToJson(req).encode())
        assert not isinstance(view, str)
        got = Processor(held, Metrics()).respond(lambda v=view: v, rendered.render, 80)  # type: ignore[misc]
        assert json.loads(got) == json.loads(encode_response(p.handle(req, 80)))
