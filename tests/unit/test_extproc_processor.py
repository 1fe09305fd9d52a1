"""The ext_proc servicer's one decision per request, and the publish servicer's refusals, without Envoy.

The processor must add nothing to the core: its routing header is the core's pick, its cookie the core's mint, its
404 is for hosts no split serves.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any, cast

import grpc
import pytest
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep

from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.compiled import Endpoint
from trafficsplit.core.model.cookie import AffinityMinter
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.weights import Weights
from trafficsplit.extproc.ads import AdsServer, Nacked
from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.extproc.processor import Processor
from trafficsplit.extproc.publisher import Publisher
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.envoy import (
    CLUSTER_TYPE,
    META_DECISION,
    META_ENDPOINT,
    META_SET_COOKIE,
    METADATA_NAMESPACE,
    ROUTE_TYPE,
    ROUTING_HEADER,
)
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto


def generation(number: int = 4, affinity: bool = True) -> Generation:
    spec = parse_split(
        "ns",
        "shop",
        {
            "hosts": ["shop.example"],
            "backends": [{"name": "stable", "weight": 90}, {"name": "canary", "weight": 10}],
            "sticky": {"cookie": {"name": "ts"}, "endpointAffinity": affinity},
            "matches": [{"header": {"name": "x-beta", "value": "yes"}, "backend": "canary"}],
            "debugHeaders": True,
        },
    )
    eps = {"stable": [Endpoint("10.0.0.1", 80)], "canary": [Endpoint("10.0.0.2", 80)]}
    return Generation(number, (compile_split(spec, eps),))


def request(**headers: str) -> ep.ProcessingRequest:
    req = ep.ProcessingRequest()
    for k, v in headers.items():
        # Envoy 1.40 sends raw_value bytes with value empty.
        req.request_headers.headers.headers.append(base_pb2.HeaderValue(key=k.replace("_", "-"), raw_value=v.encode()))
    return req


def mutation(reply: ep.ProcessingResponse) -> dict[str, str]:
    return {
        h.header.key: h.header.raw_value.decode() for h in reply.request_headers.response.header_mutation.set_headers
    }


def meta(reply: ep.ProcessingResponse) -> dict[str, str]:
    ns = reply.dynamic_metadata.fields[METADATA_NAMESPACE].struct_value
    return {k: v.string_value for k, v in ns.fields.items()}


@pytest.fixture
def processor() -> Processor:
    held = HeldGeneration()
    held.swap(generation(), "test")
    return Processor(held, Metrics(), AffinityMinter(clock_ms=lambda: 1, start=0))


def test_a_valid_cookie_routes_to_the_core_pick(processor: Processor) -> None:
    for value in ("abc", "0193f1c2a4b5000000000001", "zzz"):
        reply = processor.handle(request(**{":authority": "shop.example:8080", "cookie": f"x=1; ts={value}"}))
        want = Weights.of([("stable", 90), ("canary", 10)]).pick(value)
        assert mutation(reply) == {ROUTING_HEADER: f"ns/shop/{want}"}
        # The pod on the backend's ring, for Envoy's override_host policy (each backend here has one pod).
        assert meta(reply)[META_ENDPOINT] == ("10.0.0.1:80" if want == "stable" else "10.0.0.2:80")
        assert reply.request_headers.response.clear_route_cache
        assert META_SET_COOKIE not in meta(reply)
        assert meta(reply)[META_DECISION] == f"backend={want}; generation=4; key=cookie; path=weighted"


def test_no_cookie_mints_one_and_routes_by_it(processor: Processor) -> None:
    reply = processor.handle(request(**{":authority": "shop.example"}))
    minted = "000000000001000000000001"
    assert meta(reply)[META_SET_COOKIE] == f"ts={minted}; Path=/; HttpOnly; SameSite=Lax"
    want = Weights.of([("stable", 90), ("canary", 10)]).pick(minted)
    assert mutation(reply)[ROUTING_HEADER] == f"ns/shop/{want}"


def test_match_rule_decides_first(processor: Processor) -> None:
    reply = processor.handle(request(**{":authority": "shop.example", "x-beta": "yes", "cookie": "ts=abc"}))
    assert mutation(reply)[ROUTING_HEADER] == "ns/shop/canary"
    assert meta(reply)[META_DECISION].endswith("key=cookie; path=match")


def test_a_swap_is_decided_by_the_new_generation_and_every_decision_is_counted() -> None:
    held = HeldGeneration()
    held.swap(generation(4), "test")
    metrics = Metrics()
    p = Processor(held, metrics)
    req = request(**{":authority": "shop.example", "cookie": "ts=abc"})
    want = Weights.of([("stable", 90), ("canary", 10)]).pick("abc")
    assert mutation(p.handle(req))[ROUTING_HEADER] == f"ns/shop/{want}"
    flipped = generation_to_proto(generation(5), origin="test")
    flipped.splits[0].backends[0].cluster = "ns/shop/stable-v2"
    flipped.splits[0].backends[0].weight, flipped.splits[0].backends[1].weight = 0, 100
    held.swap(generation_from_proto(flipped), "test")
    reply = p.handle(req)
    assert mutation(reply) == {ROUTING_HEADER: "ns/shop/canary"}
    assert meta(reply)[META_DECISION] == "backend=canary; generation=5; key=cookie; path=weighted"
    flipped.number, flipped.splits[0].backends[0].weight, flipped.splits[0].backends[1].weight = 6, 100, 0
    held.swap(generation_from_proto(flipped), "test")
    assert mutation(p.handle(req))[ROUTING_HEADER] == "ns/shop/stable-v2"
    counted = {
        tuple(s.labels.values()): s.value
        for fam in metrics.registry.collect()
        if fam.name == "trafficsplit_decisions"
        for s in fam.samples
        if s.name == "trafficsplit_decisions_total"
    }
    backends = collections.Counter([want, "canary", "stable"])  # the three decisions above
    assert counted == {("ns/shop", b, "cookie", "weighted", "true"): float(n) for b, n in backends.items()}


def test_unknown_host_is_a_404_and_no_generation_passes_through() -> None:
    held = HeldGeneration()
    p = Processor(held, Metrics())
    reply = p.handle(request(**{":authority": "shop.example"}))
    assert reply.WhichOneof("response") == "request_headers"  # Envoy's own routes decide (native weights)
    assert not reply.request_headers.response.header_mutation.set_headers
    held.swap(generation(), "test")
    reply = p.handle(request(**{":authority": "nobody.example"}))
    assert reply.immediate_response.status.code == 404


def test_no_hash_header_without_endpoint_affinity() -> None:
    held = HeldGeneration()
    held.swap(generation(affinity=False), "test")
    reply = Processor(held, Metrics()).handle(request(**{":authority": "shop.example", "cookie": "ts=abc"}))
    assert set(mutation(reply)) == {ROUTING_HEADER}


class FakeContext:
    def __init__(self, token: str | None) -> None:
        self.md = [("authorization", f"Bearer {token}")] if token is not None else []

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return self.md

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise PermissionError(code, details)

    def time_remaining(self) -> float | None:
        return None


class AckingAds(AdsServer):
    """Envoy acknowledges everything at once."""

    async def wait_acked(self, versions: Any, timeout: float) -> None:
        return None


def test_publisher_auth_stale_invalid_accept() -> None:
    async def run() -> None:
        held = HeldGeneration()
        metrics = Metrics()
        firsts: list[int] = []

        async def first() -> None:
            firsts.append(held.number)

        pub = Publisher(
            held, AckingAds(metrics), metrics, token=b"s3cret", replica="r0", ack_timeout=1, on_first_generation=first
        )
        msg = pb.PublishRequest(generation=generation_to_proto(generation(4), origin="op"))
        for token in (None, "", "wrong", "s3cret "):
            with pytest.raises(PermissionError) as err:
                await pub.Publish(msg, cast(Any, FakeContext(token)))
            assert err.value.args[0] == grpc.StatusCode.UNAUTHENTICATED
        ok = cast(Any, FakeContext("s3cret"))
        nothing = await pub.GetHeld(pb.GetHeldRequest(with_generation=True), ok)
        assert (nothing.held_number, nothing.HasField("generation")) == (0, False)
        reply = await pub.Publish(msg, ok)
        assert (reply.result, reply.held_number, reply.replica) == (pb.PublishReply.ACCEPTED, 4, "r0")
        assert firsts == [4]
        reply = await pub.Publish(msg, ok)
        assert (reply.result, reply.held_number) == (pb.PublishReply.STALE, 4)
        bad = pb.PublishRequest(generation=generation_to_proto(generation(5), origin="op"))
        bad.generation.splits[0].backends[0].weight = 0
        bad.generation.splits[0].backends[1].weight = 0
        reply = await pub.Publish(bad, ok)
        assert (reply.result, reply.held_number) == (pb.PublishReply.INVALID, 4)
        held_reply = await pub.GetHeld(pb.GetHeldRequest(), ok)
        assert (held_reply.held_number, held_reply.origin) == (4, "op")
        # The held generation exactly as accepted (a restarted operator seeds its last good forms from it), not the
        # refused one.
        assert not held_reply.HasField("generation")  # only when asked: a poll needs the number
        with_generation = await pub.GetHeld(pb.GetHeldRequest(with_generation=True), ok)
        assert with_generation.generation == msg.generation
        assert firsts == [4]

    asyncio.run(run())


class RoutesNackingAds(AdsServer):
    """Envoy acknowledges the transition snapshot but refuses the new generation's own snapshot once `nack` is set."""

    nack = False
    waits = 0

    async def wait_acked(self, versions: Any, timeout: float) -> None:
        self.waits += 1
        if self.nack and self.waits % 2 == 0:
            raise Nacked("routes refused")


def test_a_roll_back_also_rolls_back_the_generation_get_held_returns() -> None:
    async def run() -> None:
        held = HeldGeneration()
        metrics = Metrics()
        ads = RoutesNackingAds(metrics)
        pub = Publisher(held, ads, metrics, token=b"t", replica="r0", ack_timeout=1)
        ok = cast(Any, FakeContext("t"))
        first = pb.PublishRequest(generation=generation_to_proto(generation(4), origin="op"))
        assert (await pub.Publish(first, ok)).result == pb.PublishReply.ACCEPTED
        ads.nack = True
        second = pb.PublishRequest(generation=generation_to_proto(generation(5, affinity=False), origin="op2"))
        reply = await pub.Publish(second, ok)
        assert (reply.result, reply.held_number) == (pb.PublishReply.INVALID, 4), reply
        held_reply = await pub.GetHeld(pb.GetHeldRequest(with_generation=True), ok)
        assert (held_reply.held_number, held_reply.origin) == (4, "op")
        assert held_reply.generation == first.generation
        assert held.current is not None and held.current.number == 4

    asyncio.run(run())


def test_a_replaced_generations_clusters_stay_for_the_drain_then_are_withdrawn() -> None:
    """A decision the old generation made just before the swap may reach Envoy's router just after it: its clusters
    outlive the swap by `cluster_drain`, and leave in a later xDS version (with the new routes already in place)."""

    async def run() -> None:
        held = HeldGeneration()
        metrics = Metrics()
        ads = AckingAds(metrics)
        pub = Publisher(held, ads, metrics, token=b"t", replica="r0", ack_timeout=1, cluster_drain=0.2)
        ok = cast(Any, FakeContext("t"))
        first = await pub.Publish(pb.PublishRequest(generation=generation_to_proto(generation(4))), ok)
        assert first.result == pb.PublishReply.ACCEPTED
        msg5 = generation_to_proto(generation(5))  # the canary leaves
        del msg5.splits[0].backends[1:]
        msg5.splits[0].backends[0].weight = 1
        del msg5.splits[0].matches[:]
        reply = await pub.Publish(pb.PublishRequest(generation=msg5), ok)
        assert reply.result == pb.PublishReply.ACCEPTED, reply
        cds = ads.snapshot()[CLUSTER_TYPE]
        rds_version = ads.snapshot()[ROUTE_TYPE].version
        assert set(cds.resources) == {"ns/shop/stable", "ns/shop/canary"}  # still draining
        await asyncio.sleep(0.5)
        after = ads.snapshot()
        assert set(after[CLUSTER_TYPE].resources) == {"ns/shop/stable"}
        # Withdrawn by a later push than the swap's (a new CDS version under generation 5), after the routes moved.
        assert cds.version == "4" and after[CLUSTER_TYPE].version == "5"
        assert after[ROUTE_TYPE].version == rds_version == "5"
        await pub.close()

    asyncio.run(run())


class SlowRoutesAds(AdsServer):
    """Acknowledges the transition at once and the routes only after `delay`."""

    delay = 0.3
    waits = 0

    async def wait_acked(self, versions: Any, timeout: float) -> None:
        self.waits += 1
        if self.waits % 2 == 0:
            await asyncio.sleep(self.delay)


def test_a_publish_whose_caller_goes_away_still_completes() -> None:
    """An operator killed mid-publish cancels the call; the publish must still finish (or roll back) whole: cancelled
    after the swap it left the generation held with health NOT_SERVING for good and the log silent."""

    async def run() -> None:
        held = HeldGeneration()
        metrics = Metrics()
        firsts: list[int] = []

        async def first() -> None:
            firsts.append(held.number)

        pub = Publisher(
            held, SlowRoutesAds(metrics), metrics, token=b"t", replica="r0", ack_timeout=1, on_first_generation=first
        )
        msg = pb.PublishRequest(generation=generation_to_proto(generation(4), origin="op"))
        call = asyncio.ensure_future(pub.Publish(msg, cast(Any, FakeContext("t"))))
        await asyncio.sleep(0.1)  # in the routes' ACK wait
        call.cancel()
        await asyncio.sleep(0.5)
        assert held.number == 4 and firsts == [4]
        await pub.close()

    asyncio.run(run())


def test_every_reply_discloses_the_decision_to_the_access_log(processor: Processor) -> None:
    # Whatever the debug setting: these fields go to Envoy's dynamic metadata (the access log), never to the client.
    reply = processor.handle(request(**{":authority": "shop.example", "cookie": "ts=abc", "x-beta": "yes"}))
    fields = reply.dynamic_metadata.fields[METADATA_NAMESPACE].struct_value.fields
    assert fields["backend"].string_value == "canary" and fields["path"].string_value == "match"
    assert fields["generation"].number_value == 4 and fields["key_source"].string_value == "cookie"
    assert fields["session_id_present"].bool_value is True and fields["affinity_applied"].bool_value is False
    assert fields["endpoint"].string_value == "10.0.0.2:80"
    minted = processor.handle(request(**{":authority": "shop.example"}))
    fields = minted.dynamic_metadata.fields[METADATA_NAMESPACE].struct_value.fields
    assert fields["session_id_present"].bool_value is False and fields["affinity_applied"].bool_value is True


class EnvoyStream:
    """The ext_proc stream as Envoy drives it: the request headers, then nothing until the request is over, when Envoy
    resets the stream (it never half-closes: docs/dataplane.md, `upstream_rq_tx_reset` counts every request)."""

    def __init__(self, *messages: ep.ProcessingRequest, metadata: tuple[tuple[str, str], ...] = ()) -> None:
        self.pending = collections.deque(messages)
        self.reads = 0
        self.metadata = metadata

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        """The call's initial metadata: a Gateway listener's filter names its port here (none from the chart's)."""
        return self.metadata

    async def read(self) -> ep.ProcessingRequest:
        self.reads += 1
        if self.pending:
            return self.pending.popleft()
        await asyncio.Event().wait()  # Envoy's reset would cancel this read
        raise AssertionError("unreachable")


def _process(processor: Processor, stream: EnvoyStream) -> ep.ProcessingResponse:
    async def run() -> ep.ProcessingResponse:
        return await asyncio.wait_for(processor.Process(None, stream), 2)  # type: ignore[arg-type]

    return asyncio.run(run())


def test_the_stream_ends_once_the_request_headers_are_answered(processor: Processor) -> None:
    """No read may be pending when Envoy resets the stream: grpc.aio leaks the op array (80 bytes) of a receive batch
    whose awaiting task is cancelled (grpc/grpc#43360), which was ~100 bytes of native heap per request (the soak's
    RSS growth). The processor asks for the request headers only, so it answers them and ends the stream (OK)."""
    stream = EnvoyStream(request(**{":authority": "shop.example"}))
    reply = _process(processor, stream)
    assert stream.reads == 1
    assert mutation(reply)[ROUTING_HEADER].startswith("ns/shop/")


def test_a_phase_not_asked_for_gets_a_valid_answer(processor: Processor) -> None:
    """A misconfigured Envoy that sends another phase gets a pass-through answer (not a stalled stream), and the
    stream ends: Envoy processes nothing more for that request."""
    other = ep.ProcessingRequest()
    other.response_headers.SetInParent()
    stream = EnvoyStream(other, request(**{":authority": "shop.example"}))
    reply = _process(processor, stream)
    assert stream.reads == 1
    assert reply.HasField("response_headers")
