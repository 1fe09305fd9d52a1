"""A Gateway's generation served by the processor, without Envoy: Envoy matched the request and names the route in the
call's attributes; the processor picks the backend of the rule that route names (the core's pick, or the rule's 500
share), leaves every other request to Envoy's route, and answers the same over both transports."""

from __future__ import annotations

import asyncio
import json

from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from google.protobuf import json_format

from trafficsplit.core.gatewayapi.translate import gateway_content
from trafficsplit.core.model.generation import Generation
from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.httpcodec import JsonReplies, decode_request_view, encode_response
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.extproc.processor import Processor
from trafficsplit.wire.envoy import LISTENER_PORT_METADATA, ROUTING_HEADER
from trafficsplit.wire.processing import EXTPROC_ATTRIBUTES, ROUTE_NAME_ATTRIBUTE, request_view

from .test_gateway_serve import ref, route, served


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


def request_on(route: str, **headers: str) -> ep.ProcessingRequest:
    """A request whose call names the Envoy route `route` (ext_proc's `xds.route_name` attribute)."""
    req = request(**headers)
    if route:
        req.attributes[EXTPROC_ATTRIBUTES].update({ROUTE_NAME_ATTRIBUTE: route})
    return req


def ask(p: Processor, port: int | None, route: str, rid: str = "r1", path: str = "/api") -> ep.ProcessingResponse:
    headers = {":authority": "a.example.com", ":path": path, ":method": "GET", "x-request-id": rid}
    return p.handle(request_on(route, **headers), port)


SHOP = "fallback:ns/shop.rule-0:0"
ALT = "fallback:ns/alt.rule-0:0"


def test_the_route_envoy_names_selects_the_rule_and_the_core_picks() -> None:
    p = processor()
    gen = gateway_generation()
    assert gen.routes is not None
    action = gen.routes.by_rule["ns/shop.rule-0"]
    assert action.split is not None
    for i in range(300):
        reply = ask(p, 80, SHOP, rid=f"req-{i}")
        assert routed_to(reply) == f"ns/shop.rule-0/{action.split.weights.pick(f'req-{i}')}"
        assert reply.request_headers.response.clear_route_cache
    # The rule the route names decides, whatever the path says (Envoy matched it), on any Gateway listener.
    assert routed_to(ask(p, 80, ALT, path="/nothing")) == "ns/alt.rule-0/c"
    assert routed_to(ask(p, 80, "fallback-cookie:ns/alt.rule-0:0")) == "ns/alt.rule-0/c"


def test_a_route_that_names_no_split_rule_is_left_to_envoy() -> None:
    p = processor()
    left = ep.ProcessingResponse()
    left.request_headers.SetInParent()
    for name in (
        "",  # no attribute
        "native:ns/alt.rule-0:0",  # a route that never asks (ext_proc is off there; a stale config)
        "fallback:ns/gone.rule-0:0",  # a rule the held generation does not have
        "fallback:ns/shop.rule-1:0",  # a rule without a backend
        "fallback:ns/shop.rule-0",  # no match index
        "decided:ns/shop.rule-0:0:a",
    ):
        assert ask(p, 80, name) == left, name
    # A client's header of the attribute's name is no attribute.
    spoofed = request(**{":authority": "a.example.com", ":path": "/api", ROUTE_NAME_ATTRIBUTE: SHOP})
    assert p.handle(spoofed, 80) == left
    # No listener named (a filter without metadata): the TrafficSplit path, which has no split for the host.
    assert ask(p, None, SHOP).immediate_response.details == "trafficsplit_no_split"


def test_the_500_share_of_unresolved_backend_refs_is_the_processors_answer() -> None:
    _, t = served(
        route(
            "half",
            parentRefs=[{"name": "gw", "sectionName": "http"}],
            hostnames=["a.example.com"],
            rules=[{"backendRefs": [ref("a", 1), ref("missing", 1)]}],
        )
    )
    held = HeldGeneration()
    held.swap(gateway_content(t, "ns/gw").stamp(2), "test")
    p = Processor(held, Metrics())
    replies = [ask(p, 80, "fallback:ns/half.rule-0:0", rid=f"r-{i}") for i in range(200)]
    refused = [r for r in replies if r.HasField("immediate_response")]
    assert {r.immediate_response.status.code for r in refused} == {500}
    assert {r.immediate_response.details for r in refused} == {"trafficsplit_error_share"}
    assert 60 < len(refused) < 140
    assert {routed_to(r) for r in replies if r not in refused} == {"ns/half.rule-0/a"}


def test_the_grpc_call_metadata_names_the_listener() -> None:
    p = processor()

    class Stream:
        def __init__(self, md: tuple[tuple[str, str], ...]) -> None:
            self.md, self.sent = md, False

        async def read(self) -> ep.ProcessingRequest:
            self.sent = True
            return request_on(ALT, **{":authority": "a.example.com", ":path": "/api", "x-request-id": "k"})

        def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
            return self.md

    on_alt = asyncio.run(p.Process(None, Stream(((LISTENER_PORT_METADATA, "8081"),))))  # type: ignore[arg-type]
    assert routed_to(on_alt) == "ns/alt.rule-0/c"
    # Without the listener's metadata the call is the chart gateway's: the TrafficSplit path.
    plain = asyncio.run(p.Process(None, Stream(())))  # type: ignore[arg-type]
    assert plain.immediate_response.details == "trafficsplit_no_split"


def test_the_http_transport_answers_as_grpc_does() -> None:
    grpc_path, json_path, rendered = processor(), processor(), JsonReplies()
    for name, rid in ((SHOP, "a"), (SHOP, "b"), (ALT, "c"), ("native:ns/alt.rule-0:0", "d"), ("", "e")):
        for port in (80, None):
            req = request_on(name, **{":authority": "a.example.com", ":path": "/api", "x-request-id": rid})
            view = decode_request_view(json_format.MessageToJson(req).encode())
            assert not isinstance(view, str) and view.route == name
            got = json_path.respond(lambda v=view: v, rendered.render, port)  # type: ignore[misc]
            assert json.loads(got) == json.loads(encode_response(grpc_path.handle(req, port)))
    assert (
        request_view(request(**{":path": "/p?q=1", ":method": "POST"}).request_headers.headers.headers).path == "/p?q=1"
    )
