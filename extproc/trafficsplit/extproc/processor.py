"""The ext_proc servicer: one message per HTTP request (its headers), one reply (route it, or 404).

Thin on purpose: it reads the held generation, asks the core to decide, and converts with `trafficsplit.wire`. No
split logic lives here. A request that came on a Gateway listener (its ext_proc filter names the listener's port in
the call's metadata, and the route Envoy matched in its attributes: `trafficsplit.wire.bootstrap`) is decided for the
rule that route names (`gateway_routes.rule_of`): Envoy matched the request, the processor only picks the rule's
backend (`decide.serve.decide_rule`). Every other request by the split serving its host, as always.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ep_grpc

from trafficsplit.core.decide.disclosure import affinity_applied
from trafficsplit.core.decide.serve import Refused, decide_rule
from trafficsplit.core.decide.sessions import LiveSessions
from trafficsplit.core.decide.sketch import SplitBills
from trafficsplit.core.decide.split import Decision, decide
from trafficsplit.core.model.compiled import CompiledSplit
from trafficsplit.core.model.cookie import AffinityMinter
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.persistent import CookieSigner
from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.wire.gateway_routes import rule_of
from trafficsplit.wire.processing import (
    DecisionReplies,
    RequestView,
    listener_port,
    no_split_response,
    pass_through,
    refused_response,
    request_view,
    route_name,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


class Processor(ep_grpc.ExternalProcessorServicer):  # type: ignore[misc]
    def __init__(
        self,
        held: HeldGeneration,
        metrics: Metrics,
        minter: AffinityMinter | None = None,
        signer: CookieSigner | None = None,
        sessions: LiveSessions | None = None,
    ) -> None:
        self._held = held
        self._signer = signer
        self._sessions = sessions or LiveSessions()  # persistent splits' live sessions per backend (Drained)
        self._metrics = metrics
        self._minter = minter or AffinityMinter()
        self._replies: DecisionReplies | None = None  # for the held generation; replaced when that changes
        self._bills = SplitBills()  # the live stickiness bill of every sticky split (fixed memory per split)
        metrics.watch_bills(self._bills.reports)

    def set_signer(self, signer: CookieSigner) -> None:
        """New cookie keys (the key file changed): every decision from now on seals and verifies with them."""
        self._signer = signer

    async def Process(
        self, request_iterator: object, context: grpc.aio.ServicerContext[ep.ProcessingRequest, ep.ProcessingResponse]
    ) -> ep.ProcessingResponse:
        """One message in (the request headers: the only phase Envoy is asked for), one reply, then the stream ends.

        Served as stream-unary (`add_to_server`), not as the proto's bidi stream: the reply and the OK status leave in
        one batch, and no read is pending afterwards. Envoy resets every finished ext_proc stream, and grpc.aio leaks
        the op array of a batch that fails on a reset call or whose awaiting read is cancelled (grpc/grpc#43360):
        parked in a second read(), that was ~100 bytes of native heap per request (the soak's steady RSS growth)."""
        req = await context.read()
        if req is grpc.aio.EOF:  # type: ignore[attr-defined]
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the stream ended before any request headers")
        return self.handle(req, listener_port(context.invocation_metadata() or ()))

    def handle(self, req: ep.ProcessingRequest, listener: int | None = None) -> ep.ProcessingResponse:
        """The gRPC transport's answer to one message; `listener`: the Gateway listener port the call named."""
        phase = req.WhichOneof("request")
        if phase != "request_headers":
            return pass_through(phase or "request_headers")
        return self.respond(
            lambda: request_view(req.request_headers.headers.headers, route_name(req)), protobuf_reply, listener
        )

    def respond(
        self, read: Callable[[], RequestView], render: Callable[[Outcome], T], listener: int | None = None
    ) -> T:
        """Decide the request whose headers `read` gives, and answer with `render`, the transport's encoding (the
        same decision whichever transport asked), timed and counted as one processing."""
        started = time.perf_counter()
        try:
            out = render(self._decide(read(), listener))
        except Exception:
            # The stream ends with the error (over http_service: a 500) and Envoy fails open onto the native weighted
            # route: a processor bug never fails the request.
            self._metrics.processor_errors.inc()
            log.exception("processor error")
            raise
        self._metrics.processor_seconds.observe(time.perf_counter() - started)
        return out

    def _decide(self, view: RequestView, listener: int | None = None) -> Outcome:
        gen = self._held.holding.current  # one read per decision: a swap never mixes two generations
        if gen is None:
            # A restarted processor before its first publish: Envoy keeps its last routes, so leaving the request
            # undecided routes it by native weights (not sticky) instead of failing it.
            self._metrics.undecided.labels("no_generation").inc()
            return Undecided.NO_GENERATION
        replies = self._replies_for(gen)
        if listener is not None and gen.routes is not None:
            rule = rule_of(view.route)
            action = None if rule is None else gen.routes.by_rule.get(rule.text)
            split = None if action is None else action.split
            if action is None or split is None:
                # A route that asks for no pick (Envoy's configuration and the generation disagree for an instant
                # around a swap): Envoy's own route stands, its weights decide.
                self._metrics.undecided.labels("no_rule").inc()
                return Undecided.NO_RULE
            out = decide_rule(action, split, view, minter=self._minter, signer=self._signer)
            if isinstance(out, Refused):
                self._metrics.undecided.labels(out.reason.value).inc()
                return out
            d = out
        else:
            found = gen.split_for(view.authority)
            if found is None:
                self._metrics.undecided.labels("no_split").inc()
                return Undecided.NO_SPLIT
            split = found
            d = decide(split, view, minter=self._minter, signer=self._signer)
        self._metrics.count_decision(
            split.key, d.backend.name, d.key_source.value, d.path.value, affinity_applied(split, d)
        )
        if split.sticky:
            self._bills.record(split.key, split.weights.names, d.backend.name, d.key, d.key_hash)
        if split.persistent:
            self._sessions.record(split.key, d.backend.name, d.key_hash, time.monotonic())
        return Decided(d, split, replies)

    def _replies_for(self, gen: Generation) -> DecisionReplies:
        """The held generation's replies and route tables, built at its first request; the per-split state of splits
        it no longer carries is dropped then."""
        if self._replies is None or self._replies.generation is not gen:
            self._replies = DecisionReplies(gen)
            self._bills.retain({s.key for s in gen.splits})
            self._sessions.retain({s.key for s in gen.splits if s.persistent})
        return self._replies


class Undecided(StrEnum):
    """A request the processor leaves to Envoy: no generation held yet, or a Gateway route naming no rule of the held
    generation (native weights either way), or no split for its host (404)."""

    NO_GENERATION = "no_generation"
    NO_RULE = "no_rule"
    NO_SPLIT = "no_split"


@dataclass(frozen=True, slots=True)
class Decided:
    """A decision, with the split and the generation's replies a transport renders it from."""

    decision: Decision
    split: CompiledSplit
    replies: DecisionReplies


# A processing's result, which each transport renders.
Outcome = Decided | Undecided | Refused


def protobuf_reply(out: Outcome) -> ep.ProcessingResponse:
    """The gRPC transport's rendering of a processing."""
    if isinstance(out, Decided):
        return out.replies.reply(out.decision, out.split)
    if isinstance(out, Refused):
        return refused_response(out)
    return no_split_response() if out is Undecided.NO_SPLIT else pass_through("request_headers")


def add_to_server(processor: Processor, server: grpc.aio.Server) -> None:
    """Register `processor` for Envoy's `ExternalProcessor/Process` as stream-unary (the wire is the same HTTP/2
    stream: Envoy sends its messages, we answer one and end it): see `Processor.Process`."""
    handler = grpc.stream_unary_rpc_method_handler(
        processor.Process,
        request_deserializer=ep.ProcessingRequest.FromString,
        response_serializer=ep.ProcessingResponse.SerializeToString,
    )
    service = "envoy.service.ext_proc.v3.ExternalProcessor"
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {"Process": handler}),))
