"""ext_proc messages ↔ core decisions, as plain functions: read the request headers Envoy sends, and turn a core
`Decision` into the one reply Envoy applies.

Envoy 1.40 sends header values in `raw_value` (bytes) with `value` empty, so both are read. The reply sets the routing
header, asks Envoy to clear its route cache (the route was chosen before this filter ran), names the pod in dynamic
metadata for endpoint affinity (Envoy's override_host policy reads it), and carries Set-Cookie and the disclosure as
dynamic metadata that the route configuration renders into response headers: one processor round trip per request,
no response-phase message. The replies' constant parts are built once per generation (`DecisionReplies`).
"""

from __future__ import annotations

from collections.abc import Iterable

from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from envoy.type.v3 import http_status_pb2

from trafficsplit.core.decide import disclosure as disclosure_fields
from trafficsplit.core.decide.request import Request
from trafficsplit.core.decide.serve import Refused
from trafficsplit.core.decide.split import Decision
from trafficsplit.core.model.compiled import CompiledSplit
from trafficsplit.core.model.generation import Generation
from trafficsplit.wire.envoy import (
    LISTENER_PORT_METADATA,
    META_DECISION,
    META_ENDPOINT,
    META_SET_COOKIE,
    METADATA_NAMESPACE,
    NO_SPLIT_BODY,
    ROUTING_HEADER,
    session_meta_key,
)
from trafficsplit.wire.gateway_routes import NO_BACKEND_BODY

_OVERWRITE = base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD


# The request as the wire read it is the core's request value: it travels whole down to the decision.
RequestView = Request


def listener_port(metadata: Iterable[tuple[str, str | bytes]]) -> int | None:
    """The Gateway listener port a call's metadata names (`LISTENER_PORT_METADATA`, set by the bootstrap's filter of
    that listener), or None: the chart gateway's listener names none, and a value that is not a port counts as none."""
    for key, value in metadata:
        if key == LISTENER_PORT_METADATA:
            text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
            if len(text) <= 5 and text.isascii() and text.isdigit() and 1 <= int(text) <= 65535:
                return int(text)
            return None
    return None


# ext_proc's own attributes in a ProcessingRequest, and the one a Gateway listener asks for (bootstrap
# `ROUTE_NAME_ATTRIBUTE`): the matched route's name, which is configuration. Longer than any name we build: none.
EXTPROC_ATTRIBUTES = "envoy.filters.http.ext_proc"
ROUTE_NAME_ATTRIBUTE = "xds.route_name"
MAX_ROUTE_NAME = 1024


def bounded_route_name(value: object) -> str:
    """A route name as the processor reads it: a string within `MAX_ROUTE_NAME`, else none."""
    return value if isinstance(value, str) and len(value) <= MAX_ROUTE_NAME else ""


def route_name(req: ep.ProcessingRequest) -> str:
    """The matched route's name the request carries in its attributes, or "" (the chart gateway sends none)."""
    if EXTPROC_ATTRIBUTES not in req.attributes:
        return ""
    value = req.attributes[EXTPROC_ATTRIBUTES].fields.get(ROUTE_NAME_ATTRIBUTE)
    return "" if value is None else bounded_route_name(value.string_value)


def request_view(headers: Iterable[base_pb2.HeaderValue], route: str = "") -> RequestView:
    """Collect the headers once; Cookie may come as several lines, every other header keeps its first value."""
    return request_view_of(
        ((h.key, h.raw_value.decode("utf-8", "replace") if h.raw_value else h.value) for h in headers), route
    )


def request_view_of(pairs: Iterable[tuple[str, str]], route: str = "") -> RequestView:
    """`request_view` over (name, value) pairs: the one reading of the headers, whichever transport carried them.
    A route's header match on `cookie` (Flagger's sticky canary matches its cookie by RegularExpression) sees every
    Cookie line, `; `-joined as HTTP/2 rejoins cookie crumbs (RFC 9113 §8.2.3); the split's own cookie is read from
    the lines."""
    by_name: dict[str, str] = {}
    cookies: list[str] = []
    for key, value in pairs:
        if key == "cookie":
            cookies.append(value)
        else:
            by_name.setdefault(key, value)
    if cookies:
        by_name["cookie"] = "; ".join(cookies)
    return RequestView(
        authority=by_name.get(":authority") or by_name.get("host", ""),
        cookie_lines=tuple(cookies),
        request_id=by_name.get("x-request-id", ""),
        headers=by_name,
        route=route,
    )


def disclosure(decision: Decision, generation: int) -> str:
    """docs/spec.md §6: which backend, which generation, where the key came from, which path decided."""
    return (
        f"backend={decision.backend.name}; generation={generation}; "
        f"key={decision.key_source.value}; path={decision.path.value}"
    )


def _set_header(name: str, value: str) -> base_pb2.HeaderValueOption:
    return base_pb2.HeaderValueOption(
        header=base_pb2.HeaderValue(key=name, raw_value=value.encode()), append_action=_OVERWRITE
    )


def _routed(decision: Decision, split: CompiledSplit, generation: int) -> ep.ProcessingResponse:
    """The part of a reply that is the same for every request with this backend, key source and path: the routing
    header, clear_route_cache, and the disclosure fields (docs/spec.md §6) the access log prints."""
    mutation = ep.HeaderMutation(set_headers=[_set_header(ROUTING_HEADER, decision.backend.cluster)])
    reply = ep.ProcessingResponse(
        request_headers=ep.HeadersResponse(response=ep.CommonResponse(header_mutation=mutation, clear_route_cache=True))
    )
    ns = reply.dynamic_metadata.fields[METADATA_NAMESPACE].struct_value.fields
    ns[disclosure_fields.BACKEND].string_value = decision.backend.name
    ns[disclosure_fields.GENERATION].number_value = generation
    ns[disclosure_fields.KEY_SOURCE].string_value = decision.key_source.value
    ns[disclosure_fields.SESSION_ID_PRESENT].bool_value = disclosure_fields.session_id_present(decision)
    ns[disclosure_fields.AFFINITY_APPLIED].bool_value = disclosure_fields.affinity_applied(split, decision)
    ns[disclosure_fields.PATH].string_value = decision.path.value
    return reply


class DecisionReplies:
    """The ext_proc replies of one generation. Each (backend, key source, path)'s constant part is built the first time
    a request needs it (not all at the swap: a large generation would stall the event loop for milliseconds) and
    copied per request after that (cheaper than building it: docs/dataplane.md "Cost"); the pod, the cookie and the
    debug header are added per request."""

    def __init__(self, gen: Generation) -> None:
        self.generation = gen
        self._routed: dict[tuple[str, str, str, str], ep.ProcessingResponse] = {}

    @staticmethod
    def key(decision: Decision, split: CompiledSplit) -> tuple[str, str, str, str]:
        """What the constant part of a reply depends on."""
        return (split.key, decision.backend.cluster, decision.key_source.value, decision.path.value)

    def routed(self, decision: Decision, split: CompiledSplit) -> ep.ProcessingResponse:
        """The reply's constant part, shared: copy it before changing it."""
        key = self.key(decision, split)
        routed = self._routed.get(key)
        if routed is None:
            routed = self._routed[key] = _routed(decision, split, self.generation.number)
        return routed

    def per_request(self, decision: Decision, split: CompiledSplit) -> dict[str, str]:
        """The dynamic metadata this request adds to the constant part: the pod, the cookie, the debug header."""
        out: dict[str, str] = {}
        if decision.endpoint is not None:
            out[META_ENDPOINT] = decision.endpoint
        if decision.set_cookie is not None:
            out[META_SET_COOKIE] = decision.set_cookie
        if decision.session_token is not None and split.key_header is not None:
            out[session_meta_key(split.key_header)] = decision.session_token
        if split.debug_headers:
            out[META_DECISION] = disclosure(decision, self.generation.number)
        return out

    def reply(self, decision: Decision, split: CompiledSplit) -> ep.ProcessingResponse:
        reply = ep.ProcessingResponse()
        reply.CopyFrom(self.routed(decision, split))
        extra = self.per_request(decision, split)
        if extra:
            ns = reply.dynamic_metadata.fields[METADATA_NAMESPACE].struct_value
            for name, value in extra.items():
                ns.fields[name].string_value = value
        return reply


def no_split_response() -> ep.ProcessingResponse:
    """A host no split serves: a clear 404 from the gateway, never a random backend (the same body as the route
    configuration's default host, which answers when the processor is down)."""
    return ep.ProcessingResponse(
        immediate_response=ep.ImmediateResponse(
            status=http_status_pb2.HttpStatus(code=http_status_pb2.NotFound),
            body=NO_SPLIT_BODY.encode(),
            details="trafficsplit_no_split",
        )
    )


def refused_response(out: Refused) -> ep.ProcessingResponse:
    """A split rule's 500 for its share of backendRefs that do not resolve, as the Gateway API spec requires (the
    rest of a route table's own answers, 404 and a rule's 500, are Envoy's: `gateway_routes`)."""
    return ep.ProcessingResponse(
        immediate_response=ep.ImmediateResponse(
            status=http_status_pb2.HttpStatus(code=out.status),
            body=NO_BACKEND_BODY.encode(),
            details=f"trafficsplit_{out.reason.value}",
        )
    )


def pass_through(phase: str) -> ep.ProcessingResponse:
    """An empty reply for a phase we did not ask for (the processing mode skips them; kept so a misconfigured Envoy
    gets a valid answer rather than a stalled stream)."""
    reply = ep.ProcessingResponse()
    getattr(reply, phase).SetInParent()
    return reply
