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
from google.protobuf import wrappers_pb2

from trafficsplit.core.decide import disclosure as disclosure_fields
from trafficsplit.core.decide.request import Request
from trafficsplit.core.decide.serve import HeaderEdits, Redirected, Refusal, Refused, ServedRoutes
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


def served_routes(gen: Generation) -> ServedRoutes | None:
    """The generation's route tables compiled for serving, or None when it carries none (TrafficSplits only)."""
    if gen.routes is None:
        return None
    return ServedRoutes(gen.routes.listeners, gen.routes.actions)


def request_view(headers: Iterable[base_pb2.HeaderValue]) -> RequestView:
    """Collect the headers once; Cookie may come as several lines, every other header keeps its first value."""
    return request_view_of((h.key, h.raw_value.decode("utf-8", "replace") if h.raw_value else h.value) for h in headers)


def request_view_of(pairs: Iterable[tuple[str, str]]) -> RequestView:
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


REFUSED_BODY = {
    Refusal.NO_ROUTE: "no route matches this request\n",
    Refusal.NO_BACKEND: "no backend can serve this route\n",
    Refusal.ERROR_SHARE: "no backend can serve this route\n",
}


def refused_response(out: Refused) -> ep.ProcessingResponse:
    """A route table's own answer: 404 when no rule matches, 500 for a rule (or the share of one) whose backendRefs
    do not resolve, as the Gateway API spec requires."""
    return ep.ProcessingResponse(
        immediate_response=ep.ImmediateResponse(
            status=http_status_pb2.HttpStatus(code=out.status),
            body=REFUSED_BODY[out.reason].encode(),
            details=f"trafficsplit_{out.reason.value}",
        )
    )


def redirect_response(out: Redirected) -> ep.ProcessingResponse:
    """A rule's RequestRedirect: its status and the core's Location (`model.filters.redirect_location`, which only
    gives a valid header value)."""
    return ep.ProcessingResponse(
        immediate_response=ep.ImmediateResponse(
            status=http_status_pb2.HttpStatus(code=out.status),
            headers=ep.HeaderMutation(set_headers=[_set_header("location", out.location)]),
            details="trafficsplit_redirect",
        )
    )


def edited(reply: ep.ProcessingResponse, edits: HeaderEdits) -> ep.ProcessingResponse:
    """`reply` (a routed request's, already a copy) with a Gateway rule's request edits: set overwrites (`:path` and
    `:authority` too: the route cache is cleared anyway), add appends, remove drops. The values are the filters'
    (checked when the route was translated) or the request's own path rewritten."""
    mutation = reply.request_headers.response.header_mutation
    mutation.set_headers.extend(_set_header(n, v) for n, v in edits.set)
    mutation.set_headers.extend(
        # ext_proc reads the (deprecated) `append` flag here, not append_action (measured: append_action alone
        # replaced the client's value).
        base_pb2.HeaderValueOption(
            header=base_pb2.HeaderValue(key=n, raw_value=v.encode()), append=wrappers_pb2.BoolValue(value=True)
        )
        for n, v in edits.add
    )
    mutation.remove_headers.extend(edits.remove)
    return reply


def pass_through(phase: str) -> ep.ProcessingResponse:
    """An empty reply for a phase we did not ask for (the processing mode skips them; kept so a misconfigured Envoy
    gets a valid answer rather than a stalled stream)."""
    reply = ep.ProcessingResponse()
    getattr(reply, phase).SetInParent()
    return reply
