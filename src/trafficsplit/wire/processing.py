"""ext_proc messages ↔ core decisions, as plain functions: read the request headers Envoy sends, and turn a core
`Decision` into the one reply Envoy applies.

Envoy 1.40 sends header values in `raw_value` (bytes) with `value` empty, so both are read. The reply sets the routing
header (and the hash header for endpoint affinity), asks Envoy to clear its route cache (the route was chosen before
this filter ran), and carries Set-Cookie and the disclosure as dynamic metadata that the route configuration renders
into response headers: one processor round trip per request, no response-phase message. The replies' constant parts
are built once per generation (`DecisionReplies`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from envoy.type.v3 import http_status_pb2

from trafficsplit.core.compiled import CompiledSplit, Generation
from trafficsplit.core.decide import Decision, KeySource
from trafficsplit.core.hashing import key_hash
from trafficsplit.wire.envoy import (
    HASH_HEADER,
    META_DECISION,
    META_SET_COOKIE,
    METADATA_NAMESPACE,
    NO_SPLIT_BODY,
    ROUTING_HEADER,
)

_OVERWRITE = base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD


@dataclass(frozen=True, slots=True)
class RequestView:
    """What a decision needs from the request headers: authority, Cookie lines, request id, the rest by name."""

    authority: str
    cookie_lines: tuple[str, ...]
    request_id: str
    headers: dict[str, str]

    def header(self, name: str) -> str | None:
        return self.headers.get(name)


def request_view(headers: Iterable[base_pb2.HeaderValue]) -> RequestView:
    """Collect the headers once; Cookie may come as several lines, every other header keeps its first value."""
    by_name: dict[str, str] = {}
    cookies: list[str] = []
    for h in headers:
        value = h.raw_value.decode("utf-8", "replace") if h.raw_value else h.value
        if h.key == "cookie":
            cookies.append(value)
        else:
            by_name.setdefault(h.key, value)
    return RequestView(
        authority=by_name.get(":authority") or by_name.get("host", ""),
        cookie_lines=tuple(cookies),
        request_id=by_name.get("x-request-id", ""),
        headers=by_name,
    )


def disclosure(decision: Decision, generation: int) -> str:
    """SPEC §6: which backend, which generation, where the key came from, which path decided."""
    return (
        f"backend={decision.backend.name}; generation={generation}; "
        f"key={decision.key_source.value}; path={decision.path.value}"
    )


def hash_header_value(decision: Decision) -> str:
    """The endpoint-affinity hash key Envoy's ring hashes. A cookie handle (validated cookie-octets) or a minted one
    goes as is; a request id is the client's own bytes, so only its hash goes out: no client byte reaches a header
    value unvalidated (tests/unit/test_extproc_fuzz.py)."""
    if decision.key_source is KeySource.REQUEST_ID:
        return f"{key_hash(decision.key):016x}"
    return decision.key


def _set_header(name: str, value: str) -> base_pb2.HeaderValueOption:
    return base_pb2.HeaderValueOption(
        header=base_pb2.HeaderValue(key=name, raw_value=value.encode()), append_action=_OVERWRITE
    )


def _routed(cluster: str) -> ep.ProcessingResponse:
    """The part of a decision's reply that depends on its backend only: the routing header, clear_route_cache."""
    mutation = ep.HeaderMutation(set_headers=[_set_header(ROUTING_HEADER, cluster)])
    return ep.ProcessingResponse(
        request_headers=ep.HeadersResponse(response=ep.CommonResponse(header_mutation=mutation, clear_route_cache=True))
    )


class DecisionReplies:
    """The ext_proc replies of one generation. Each backend's constant part is built the first time a request picks
    it (not all at the swap: a large generation would stall the event loop for milliseconds) and copied per request
    after that (cheaper than building it: ~5 µs less per request, docs/dataplane.md "Cost"); the sticky key and the
    metadata are added per request."""

    def __init__(self, gen: Generation) -> None:
        self.generation = gen
        self._routed: dict[str, ep.ProcessingResponse] = {}

    def reply(self, decision: Decision, split: CompiledSplit) -> ep.ProcessingResponse:
        cluster = decision.backend.cluster
        routed = self._routed.get(cluster)
        if routed is None:
            routed = self._routed[cluster] = _routed(cluster)
        reply = ep.ProcessingResponse()
        reply.CopyFrom(routed)
        if split.endpoint_affinity:
            reply.request_headers.response.header_mutation.set_headers.append(
                _set_header(HASH_HEADER, hash_header_value(decision))
            )
        if decision.set_cookie is not None or split.debug_headers:
            ns = reply.dynamic_metadata.fields[METADATA_NAMESPACE].struct_value
            if decision.set_cookie is not None:
                ns.fields[META_SET_COOKIE].string_value = decision.set_cookie
            if split.debug_headers:
                ns.fields[META_DECISION].string_value = disclosure(decision, self.generation.number)
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


def pass_through(phase: str) -> ep.ProcessingResponse:
    """An empty reply for a phase we did not ask for (the processing mode skips them; kept so a misconfigured Envoy
    gets a valid answer rather than a stalled stream)."""
    reply = ep.ProcessingResponse()
    getattr(reply, phase).SetInParent()
    return reply
