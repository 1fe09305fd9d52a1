"""The http_service codec against protobuf's own JSON mapping: every reply kind `Processor.handle` makes encodes to
what json_format writes, and every ProcessingRequest json_format writes decodes to the same headers.

The replies come from the real processor (sticky and not, minted and kept cookies, match rules, endpoint affinity,
debug headers, persistent sealed cookies, a host without a split, no generation, every phase not asked for), so a
field the processor starts to set shows here before it can be dropped on the wire.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from google.protobuf import json_format

from tests.unit.test_extproc_processor import generation
from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.compiled import Endpoint
from trafficsplit.core.model.cookie import AffinityMinter
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.persistent import CookieSigner
from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.httpcodec import (
    MAX_HEADERS,
    CodecError,
    EncodeError,
    JsonReplies,
    decode_request_view,
    encode_response,
)
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.extproc.processor import Processor
from trafficsplit.wire.envoy import METADATA_NAMESPACE
from trafficsplit.wire.processing import RequestView, request_view

KEY = b"k" * 32
PHASES = (
    "request_headers",
    "response_headers",
    "request_body",
    "response_body",
    "request_trailers",
    "response_trailers",
)


def headers_request(*pairs: tuple[str, bytes]) -> ep.ProcessingRequest:
    req = ep.ProcessingRequest()
    for k, v in pairs:
        req.request_headers.headers.headers.add(key=k, raw_value=v)
    req.request_headers.end_of_stream = True
    return req


def plain_generation() -> Generation:
    spec = parse_split(
        "ns",
        "plain",
        {"hosts": ["plain.example"], "backends": [{"name": "stable", "weight": 50}, {"name": "canary", "weight": 50}]},
    )
    persistent = parse_split(
        "ns",
        "kept",
        {
            "hosts": ["kept.example"],
            "backends": [{"name": "blue", "weight": 50}, {"name": "green", "weight": 50}],
            "sticky": {"cookie": {"name": "sid"}, "mode": "persistent"},
        },
    )
    sticky = generation(7).splits[0]
    eps = {n: [Endpoint("10.0.1.1", 80)] for n in ("stable", "canary", "blue", "green")}
    return Generation(7, (sticky, compile_split(spec, eps), compile_split(persistent, eps)))


def replies() -> Iterator[tuple[str, ep.ProcessingResponse]]:
    """(what, reply) for every kind of reply the processor makes, through `Processor.handle` itself."""
    held = HeldGeneration()
    processor = Processor(held, Metrics(), AffinityMinter(clock_ms=lambda: 1, start=0), signer=CookieSigner(KEY))
    yield "no generation: pass through", processor.handle(headers_request((":authority", b"shop.example")))
    held.swap(plain_generation(), "test")
    minted = processor.handle(headers_request((":authority", b"shop.example")))
    yield "sticky, cookie minted, endpoint affinity, debug header", minted
    cookie = minted.dynamic_metadata.fields[METADATA_NAMESPACE].struct_value.fields["set_cookie"].string_value
    kept = headers_request((":authority", b"shop.example"), ("cookie", cookie.split(";")[0].encode()))
    yield "sticky, cookie kept", processor.handle(kept)
    beta = headers_request((":authority", b"shop.example"), ("x-beta", b"yes"))
    yield "match rule", processor.handle(beta)
    yield "not sticky, no debug header", processor.handle(headers_request((":authority", b"plain.example")))
    sealed = processor.handle(headers_request((":authority", b"kept.example")))
    yield "persistent, sealed cookie minted", sealed
    yield "no split: 404", processor.handle(headers_request((":authority", b"nowhere.example")))
    for phase in PHASES[1:]:
        req = ep.ProcessingRequest()
        getattr(req, phase).SetInParent()
        yield f"{phase}: pass through", processor.handle(req)


REPLIES = list(replies())


def reference(reply: ep.ProcessingResponse) -> Any:
    return json.loads(json_format.MessageToJson(reply, preserving_proto_field_name=True))


@pytest.mark.parametrize(("what", "reply"), REPLIES, ids=[w for w, _ in REPLIES])
def test_every_reply_kind_encodes_as_json_format_does(what: str, reply: ep.ProcessingResponse) -> None:
    encoded = encode_response(reply)
    assert json.loads(encoded) == reference(reply)
    # And Envoy's direction: the proto parsed back from our JSON is the reply.
    assert json_format.Parse(encoded, ep.ProcessingResponse()) == reply


def test_the_replies_cover_every_kind() -> None:
    # No kind goes missing from REPLIES unnoticed: immediate, headers with a mutation, every pass-through phase,
    # metadata with strings, numbers and booleans, a Set-Cookie.
    kinds = {r.WhichOneof("response") for _, r in REPLIES}
    assert kinds == {"immediate_response", *PHASES}
    values = {
        v.WhichOneof("kind")
        for _, r in REPLIES
        for ns in r.dynamic_metadata.fields.values()
        for v in ns.struct_value.fields.values()
    }
    assert values == {"string_value", "number_value", "bool_value"}
    assert (
        sum(
            "set_cookie" in json.loads(encode_response(r)).get("dynamic_metadata", {}).get(METADATA_NAMESPACE, {})
            for _, r in REPLIES
        )
        >= 2
    )


@pytest.mark.parametrize("preserving", [True, False], ids=["proto names (Envoy)", "json names"])
def test_requests_decode_as_json_format_writes_them(preserving: bool) -> None:
    """The view is what `request_view` (the gRPC path) reads from the message json_format wrote the body from."""
    req = headers_request(
        (":authority", b"shop.example"),
        (":path", b"/a?b=c"),
        ("cookie", b"ts=1; other=\xff\x00"),  # not UTF-8, a NUL: bytes, as the client sent them
        ("cookie", b"second-line"),
        ("x-request-id", b"r-1"),
        ("x-empty", b""),
    )
    req.request_headers.headers.headers.add(key="x-value-only", value="v")
    req.request_headers.attributes["envoy.filters.http.ext_proc"].SetInParent()  # skipped: not read by the processor
    req.protocol_config.request_body_mode = 1
    got = decode_request_view(json_format.MessageToJson(req, preserving_proto_field_name=preserving).encode())
    assert got == request_view(req.request_headers.headers.headers)
    assert isinstance(got, RequestView) and got.cookie_lines == ("ts=1; other=\ufffd\x00", "second-line")
    assert got.header("x-value-only") == "v" and got.header("x-empty") == ""
    for phase in PHASES[1:]:
        other = ep.ProcessingRequest()
        getattr(other, phase).SetInParent()
        assert decode_request_view(
            json_format.MessageToJson(other, preserving_proto_field_name=preserving).encode()
        ) == (phase)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "not JSON"),
        (b"\xff", "not JSON"),
        (b"[1]", "not a JSON object"),
        (b"{}", "no processing phase"),
        (b'{"request_headers": 1}', "not an object"),
        (b'{"request_headers": {"headers": {"headers": {}}}}', "not a list"),
        (b'{"request_headers": {"headers": {"headers": [1]}}}', "not an object"),
        (b'{"request_headers": {"headers": {"headers": [{"key": 1}]}}}', "not a string"),
        (b'{"request_headers": {"headers": {"headers": [{"key": "a", "raw_value": "%%%"}]}}}', "invalid base64"),
        (b'{"request_headers": {"headers": {"headers": [{"key": "a", "raw_value": 5}]}}}', "not a base64 string"),
        (b'{"request_headers": {"end_of_stream": "yes"}}', "not a boolean"),
    ],
)
def test_a_body_that_is_not_a_processing_request_is_refused(body: bytes, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        decode_request_view(body)


def test_the_header_count_is_bounded() -> None:
    entries = [{"key": f"h{i}", "raw_value": base64.b64encode(b"b").decode()} for i in range(MAX_HEADERS + 1)]
    ok = json.dumps({"request_headers": {"headers": {"headers": entries[:MAX_HEADERS]}}}).encode()
    view = decode_request_view(ok)
    assert isinstance(view, RequestView) and len(view.headers) == MAX_HEADERS
    with pytest.raises(CodecError, match="more than"):
        decode_request_view(json.dumps({"request_headers": {"headers": {"headers": entries}}}).encode())


@pytest.mark.parametrize(
    ("key", "value"),
    [("x-a", b"one\r\nset-cookie: evil=1"), ("x-a", b"nul\x00"), ("x-a", b"lf\n"), ("X-Upper", b"v"), ("a b", b"v")],
)
def test_a_header_envoy_would_split_or_misread_is_never_written(key: str, value: bytes) -> None:
    reply = ep.ProcessingResponse()
    reply.request_headers.response.header_mutation.set_headers.append(
        base_pb2.HeaderValueOption(header=base_pb2.HeaderValue(key=key, raw_value=value))
    )
    with pytest.raises(EncodeError):
        encode_response(reply)


def test_a_field_the_codec_does_not_write_is_refused_not_dropped() -> None:
    for reply in (
        ep.ProcessingResponse(request_drain=True),
        ep.ProcessingResponse(immediate_response=ep.ImmediateResponse(grpc_status=ep.GrpcStatus(status=1))),
        # Headers of an immediate response are written (a redirect's Location), and checked as a mutation's are.
        ep.ProcessingResponse(immediate_response=ep.ImmediateResponse(headers=ep.HeaderMutation(remove_headers=["A"]))),
        ep.ProcessingResponse(request_body=ep.BodyResponse(response=ep.CommonResponse(clear_route_cache=True))),
    ):
        with pytest.raises(EncodeError):
            encode_response(reply)
    nan = ep.ProcessingResponse()
    nan.dynamic_metadata.fields["ns"].number_value = float("nan")
    with pytest.raises(EncodeError):
        encode_response(nan)


def test_the_json_path_answers_exactly_what_the_grpc_path_answers() -> None:
    """`JsonReplies` (the constant part encoded once, per-request metadata appended) against `encode_response` of the
    gRPC reply, for the same requests through two processors with the same deterministic minter: the same JSON."""

    def processor(held: HeldGeneration) -> Processor:
        return Processor(held, Metrics(), AffinityMinter(clock_ms=lambda: 1, start=0), signer=CookieSigner(KEY))

    held_a, held_b = HeldGeneration(), HeldGeneration()
    grpc_path, json_path, rendered = processor(held_a), processor(held_b), JsonReplies()

    def both(req: ep.ProcessingRequest) -> tuple[Any, Any]:
        body = json_format.MessageToJson(req, preserving_proto_field_name=True).encode()
        view = decode_request_view(body)
        got = rendered.pass_through(view) if isinstance(view, str) else json_path.respond(lambda: view, rendered.render)
        return json.loads(got), json.loads(encode_response(grpc_path.handle(req)))

    pairs = [both(headers_request((":authority", b"shop.example")))]  # no generation yet
    for h in (held_a, held_b):
        h.swap(plain_generation(), "test")
    minted = headers_request((":authority", b"shop.example"))
    got, want = both(minted)
    pairs.append((got, want))
    cookie = want["dynamic_metadata"][METADATA_NAMESPACE]["set_cookie"].split(";")[0].encode()
    for req in (
        headers_request((":authority", b"shop.example"), ("cookie", cookie)),
        headers_request((":authority", b"shop.example"), ("x-beta", b"yes")),
        headers_request((":authority", b"plain.example")),
        headers_request((":authority", b"kept.example")),
        headers_request((":authority", b"nowhere.example")),
        headers_request((":authority", b"shop.example"), ("cookie", b"ts=\x01bad")),
    ):
        pairs.append(both(req))
    for phase in PHASES[1:]:
        req = ep.ProcessingRequest()
        getattr(req, phase).SetInParent()
        pairs.append(both(req))
    for got, want in pairs:
        assert got == want
    # Covered: a minted Set-Cookie, an endpoint, the debug header, the 404 and a pass-through, on the JSON path.
    fields = {k for got, _ in pairs for k in got.get("dynamic_metadata", {}).get(METADATA_NAMESPACE, {})}
    assert {"set_cookie", "endpoint", "decision"} <= fields
    assert any("immediate_response" in got for got, _ in pairs)
