"""ext_proc messages ↔ the proto-JSON bodies of Envoy's `http_service` transport, by hand.

Envoy's HTTP client posts each `ProcessingRequest` as proto-JSON (proto field names, header values base64 in
`raw_value`) and reads the reply body as a JSON `ProcessingResponse`. `google.protobuf.json_format` does both, but at
~60 µs a message, most of what this transport saves over gRPC, so the few shapes the processor reads and writes are
converted here directly. tests/unit/test_extproc_httpcodec.py checks both directions against json_format: every
reply kind the processor makes encodes as json_format writes it, `JsonReplies` answers exactly what encoding the gRPC
path's reply gives, and `decode_request_view` reads what `request_view` reads from the message json_format parses.

Trust: the request body comes from Envoy, but its header keys and values are the client's bytes. They only reach the
decision as the same header view the gRPC path builds (`request_view_of`); the reply's header values come from the
held generation, and `encode_response` refuses to write one Envoy would read as more than one header.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from envoy.type.v3 import http_status_pb2
from google.protobuf import struct_pb2

from trafficsplit.extproc.processor import Decided, Outcome, Undecided, protobuf_reply
from trafficsplit.wire.envoy import METADATA_NAMESPACE
from trafficsplit.wire.processing import (
    EXTPROC_ATTRIBUTES,
    ROUTE_NAME_ATTRIBUTE,
    DecisionReplies,
    RequestView,
    bounded_route_name,
    pass_through,
    request_view_of,
)

# Envoy sends at most `max_request_headers_count` (100 by default) headers; far above that is not Envoy.
MAX_HEADERS = 1024
# The phases a ProcessingRequest can carry, in both of proto-JSON's spellings (Envoy writes the proto names).
_PHASES = (
    ("request_headers", "requestHeaders"),
    ("response_headers", "responseHeaders"),
    ("request_body", "requestBody"),
    ("response_body", "responseBody"),
    ("request_trailers", "requestTrailers"),
    ("response_trailers", "responseTrailers"),
)
# RFC 9110 field-value characters (visible ASCII, space, tab, obs-text): no CR, LF or NUL, so a value stays one
# header. Names: RFC 9110 tokens, lowercase as HTTP/2 requires, or a pseudo-header.
_FIELD_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")
_FIELD_NAME = re.compile(r":?[a-z0-9!#$%&'*+.^_`|~-]+")
_APPEND_ACTIONS = base_pb2.HeaderValueOption.HeaderAppendAction
_STATUS_NAMES = http_status_pb2.StatusCode


class CodecError(ValueError):
    """A body that is not a ProcessingRequest this processor can read (the server answers 400)."""


class EncodeError(ValueError):
    """A reply this codec cannot write faithfully (the server answers 500, and Envoy fails open)."""


def _b64decode(text: object, where: str) -> bytes:
    if not isinstance(text, str):
        raise CodecError(f"{where}: not a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CodecError(f"{where}: invalid base64") from exc


def _get(doc: dict[str, Any], proto_name: str, json_name: str) -> Any:
    value = doc.get(proto_name)
    return doc.get(json_name) if value is None else value


@dataclass(frozen=True, slots=True)
class _Message:
    """A checked ProcessingRequest body: its phase and, for request headers, (name, value) per header, the value read
    as `request_view` reads a message's (`raw_value` as UTF-8, else `value`)."""

    phase: str
    headers: list[tuple[str, str]]
    route: str = ""  # the matched route's name (`processing.route_name`), "" when the body names none


def _read(body: bytes) -> _Message:
    """Every check of a request body, once."""
    try:
        doc = json.loads(body.decode("utf-8"))  # a str: json.loads skips guessing the encoding of bytes
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise CodecError(f"not JSON: {exc}") from exc
    except RecursionError as exc:  # json.loads recurses per level: ~1,000 levels of `[` in a body under the bound
        raise CodecError("not JSON this processor reads: nested too deeply") from exc
    if not isinstance(doc, dict):
        raise CodecError("not a JSON object")
    for proto_name, json_name in _PHASES:
        phase = _get(doc, proto_name, json_name)
        if phase is None:
            continue
        if not isinstance(phase, dict):
            raise CodecError(f"{proto_name}: not an object")
        if proto_name == "request_headers":
            return _read_headers(phase, _route(doc.get("attributes")))
        return _Message(proto_name, [])
    raise CodecError("no processing phase")


def _route(attributes: object) -> str:
    """`attributes["envoy.filters.http.ext_proc"]["xds.route_name"]`, read as over gRPC (`processing.route_name`)."""
    ours = attributes.get(EXTPROC_ATTRIBUTES) if isinstance(attributes, dict) else None
    return bounded_route_name(ours.get(ROUTE_NAME_ATTRIBUTE)) if isinstance(ours, dict) else ""


def _read_headers(phase: dict[str, Any], route: str = "") -> _Message:
    end = _get(phase, "end_of_stream", "endOfStream")
    if end is not None and not isinstance(end, bool):
        raise CodecError("end_of_stream: not a boolean")
    headers = phase.get("headers")
    if headers is None:
        return _Message("request_headers", [], route)
    if not isinstance(headers, dict):
        raise CodecError("request_headers.headers: not an object")
    entries = headers.get("headers", [])
    if not isinstance(entries, list):
        raise CodecError("request_headers.headers.headers: not a list")
    if len(entries) > MAX_HEADERS:
        raise CodecError(f"more than {MAX_HEADERS} headers")
    out: list[tuple[str, str]] = []
    for h in entries:
        if not isinstance(h, dict):
            raise CodecError("a header is not an object")
        key = h.get("key", "")
        value = h.get("value", "")
        if not isinstance(key, str) or not isinstance(value, str):
            raise CodecError("a header's key or value is not a string")
        raw = _get(h, "raw_value", "rawValue")
        data = b"" if raw is None else _b64decode(raw, key)
        out.append((key, data.decode("utf-8", "replace") if data else value))
    return _Message("request_headers", out, route)


def decode_request_view(body: bytes) -> RequestView | str:
    """The request headers of a ProcessingRequest's proto-JSON as the decision's view, exactly as `request_view` reads
    them from the message over gRPC, without building the protobuf message (the transport's hot path); or the name
    of the other phase the body carries (the processor answers those with a pass-through). Of the attributes only
    the matched route's name is read; every other field (protocol_config, ...) is skipped. Raises CodecError for a body
    that is not a ProcessingRequest this processor can read."""
    msg = _read(body)
    if msg.phase != "request_headers":
        return msg.phase
    return request_view_of(msg.headers, msg.route)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _value(v: struct_pb2.Value) -> Any:
    kind = v.WhichOneof("kind")
    if kind == "string_value":
        return v.string_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "number_value":
        return v.number_value
    if kind == "struct_value":
        return {k: _value(x) for k, x in v.struct_value.fields.items()}
    if kind == "null_value":
        return None
    if kind == "list_value":
        return [_value(x) for x in v.list_value.values]
    raise EncodeError("a metadata value with no kind")


def _set_header(o: base_pb2.HeaderValueOption) -> dict[str, Any]:
    h = o.header
    if not _FIELD_NAME.fullmatch(h.key):
        raise EncodeError(f"header name {h.key!r} is not a lowercase token")
    raw = h.raw_value or h.value.encode()
    if not _FIELD_VALUE.fullmatch(raw):
        raise EncodeError(f"header {h.key}: the value has a control character")
    out: dict[str, Any] = {"header": {"key": h.key, "raw_value": _b64(raw)}}
    if o.append_action:
        out["append_action"] = _APPEND_ACTIONS.Name(o.append_action)
    if o.HasField("append"):  # what ext_proc reads to append a request header (a Gateway filter's `add`)
        out["append"] = o.append.value
    return out


def _mutation(m: ep.HeaderMutation) -> dict[str, Any]:
    mutation: dict[str, Any] = {}
    if m.set_headers:
        mutation["set_headers"] = [_set_header(o) for o in m.set_headers]
    if m.remove_headers:
        for name in m.remove_headers:
            if not _FIELD_NAME.fullmatch(name):
                raise EncodeError(f"header name {name!r} is not a lowercase token")
        mutation["remove_headers"] = list(m.remove_headers)
    return mutation


def _common(common: ep.CommonResponse) -> dict[str, Any]:
    if common.status or common.HasField("body_mutation") or common.HasField("trailers"):
        raise EncodeError("the codec writes header mutations and clear_route_cache only")
    out: dict[str, Any] = {}
    if common.HasField("header_mutation"):
        out["header_mutation"] = _mutation(common.header_mutation)
    if common.clear_route_cache:
        out["clear_route_cache"] = True
    return out


def _immediate(ir: ep.ImmediateResponse) -> dict[str, Any]:
    if ir.HasField("grpc_status"):
        raise EncodeError("the codec writes an immediate response's status, headers, body and details only")
    out: dict[str, Any] = {}
    if ir.HasField("status"):
        out["status"] = {"code": _STATUS_NAMES.Name(ir.status.code)} if ir.status.code else {}
    if ir.HasField("headers"):  # a redirect's Location
        out["headers"] = _mutation(ir.headers)
    if ir.body:
        out["body"] = _b64(ir.body)
    if ir.details:
        out["details"] = ir.details
    return out


def encode_response(reply: ep.ProcessingResponse) -> bytes:
    """The reply as the proto-JSON json_format writes (proto field names, enums by name, bytes base64). Raises
    EncodeError for a field it does not write rather than dropping it."""
    out: dict[str, Any] = {}
    which = reply.WhichOneof("response")
    if which == "immediate_response":
        out[which] = _immediate(reply.immediate_response)
    elif which in ("request_headers", "response_headers"):
        headers: ep.HeadersResponse = getattr(reply, which)
        out[which] = {"response": _common(headers.response)} if headers.HasField("response") else {}
    elif which is not None:
        # A body or trailers phase: only ever the empty pass-through (bodies and trailers are never asked for).
        if getattr(reply, which).ByteSize():
            raise EncodeError(f"a non-empty {which} reply")
        out[which] = {}
    if reply.HasField("dynamic_metadata"):
        out["dynamic_metadata"] = {k: _value(v) for k, v in reply.dynamic_metadata.fields.items()}
    if reply.HasField("mode_override") or reply.request_drain or reply.HasField("override_message_timeout"):
        raise EncodeError("the codec does not write mode_override, request_drain or override_message_timeout")
    try:
        return json.dumps(out, separators=(",", ":"), allow_nan=False).encode()
    except ValueError as exc:  # a NaN or infinite metadata number: not JSON
        raise EncodeError(str(exc)) from exc


class JsonReplies:
    """This transport's rendering of a processing (`Processor.respond`), the JSON twin of `protobuf_reply`.

    Each reply's constant part is `encode_response` of the gRPC path's own constant part (`DecisionReplies.routed`),
    encoded once per (split, backend, key source, path) and generation, so every check `encode_response` makes is
    made and the two transports cannot answer differently; per request only the dynamic metadata the gRPC path adds
    (`DecisionReplies.per_request`: the pod, the cookie, the debug header) is appended, JSON-escaped. The pass-through
    and 404 replies are encoded once."""

    __slots__ = ("_fixed", "_for", "_routed")

    def __init__(self) -> None:
        self._for: DecisionReplies | None = None
        self._routed: dict[tuple[str, str, str, str], tuple[bytes, bytes]] = {}
        self._fixed: dict[str, bytes] = {}

    def pass_through(self, phase: str) -> bytes:
        got = self._fixed.get(phase)
        if got is None:
            got = self._fixed[phase] = encode_response(pass_through(phase))
        return got

    def render(self, out: Outcome) -> bytes:
        if not isinstance(out, Decided):
            fixed = out.value if isinstance(out, Undecided) else out.reason.value
            got = self._fixed.get(fixed)
            if got is None:
                got = self._fixed[fixed] = encode_response(protobuf_reply(out))
            return got
        replies, d, split = out.replies, out.decision, out.split
        if replies is not self._for:  # a new generation: its replies differ (the generation number is in them)
            self._for, self._routed = replies, {}
        key = replies.key(d, split)
        parts = self._routed.get(key)
        if parts is None:
            parts = self._routed[key] = _open_metadata(encode_response(replies.routed(d, split)))
        extra = replies.per_request(d, split)
        if not extra:
            return parts[0] + parts[1]
        fields = b"".join(b",%s:%s" % (json.dumps(k).encode(), json.dumps(v).encode()) for k, v in extra.items())
        return parts[0] + fields + parts[1]


def _open_metadata(encoded: bytes) -> tuple[bytes, bytes]:
    """A routed reply split where more fields of its metadata namespace go: `encode_response` writes
    `dynamic_metadata` last, with our one namespace, so the JSON ends with that object's `}` and two more."""
    doc = json.loads(encoded)
    keys = list(doc)
    if keys[-1:] != ["dynamic_metadata"] or list(doc["dynamic_metadata"]) != [METADATA_NAMESPACE]:
        raise EncodeError("a routed reply without its metadata namespace last")
    if not doc["dynamic_metadata"][METADATA_NAMESPACE] or not encoded.endswith(b"}}}"):
        raise EncodeError("a routed reply whose metadata namespace is empty")
    return encoded[:-3], b"}}}"
