"""A Gateway's replica (`--gateway namespace/name`) holds that Gateway's generations only: one for another Gateway,
or a TrafficSplit generation with no route table, is refused INVALID and the held generation stays."""

from __future__ import annotations

import asyncio

from tests.unit.test_extproc_ads import Caller, RefusingEnvoy, _weighted_gateway_gen, gen
from trafficsplit.extproc.ads import AdsServer
from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.extproc.publisher import Publisher, gateway_refusal
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.envoy import CLUSTER_TYPE, ROUTE_CONFIG_NAME, ROUTE_TYPE
from trafficsplit.wire.generation import generation_to_proto


def test_a_replica_of_a_gateway_refuses_another_gateways_generation_and_keeps_its_own() -> None:
    async def run() -> None:
        metrics = Metrics()
        ads = AdsServer(metrics)
        held = HeldGeneration()
        pub = Publisher(held, ads, metrics, token=b"t", replica="r", ack_timeout=5, gateway="ns/gw")
        envoy = RefusingEnvoy(ads, refuse=set())
        envoy.ask(CLUSTER_TYPE)
        envoy.ask(ROUTE_TYPE, [ROUTE_CONFIG_NAME])
        own = pb.PublishRequest(generation=generation_to_proto(_weighted_gateway_gen(1, 90), origin="op"))
        reply = await pub.Publish(own, Caller(deadline=5))  # type: ignore[arg-type]
        assert (reply.result, reply.held_number) == (pb.PublishReply.ACCEPTED, 1), reply

        other = pb.PublishRequest(generation=generation_to_proto(_weighted_gateway_gen(2, 10), origin="op"))
        other.generation.routes.gateway = "ns/other"
        reply = await pub.Publish(other, Caller(deadline=5))  # type: ignore[arg-type]
        assert (reply.result, reply.held_number) == (pb.PublishReply.INVALID, 1), reply
        assert "is for Gateway 'ns/other'; this replica serves Gateway ns/gw only" in reply.message
        assert held.number == 1 and held.message is not None and held.message.routes.gateway == "ns/gw"

        shared = pb.PublishRequest(generation=generation_to_proto(gen(3, {"a": 1}), origin="op"))
        reply = await pub.Publish(shared, Caller(deadline=5))  # type: ignore[arg-type]
        assert (reply.result, reply.held_number) == (pb.PublishReply.INVALID, 1), reply
        assert "carries no Gateway's routes" in reply.message
        envoy.close()

    asyncio.run(run())


def test_the_chart_gateway_takes_any_generation() -> None:
    msg = generation_to_proto(_weighted_gateway_gen(1, 90), origin="op")
    assert gateway_refusal(None, msg) is None
    assert gateway_refusal(None, generation_to_proto(gen(1, {"a": 1}), origin="op")) is None
    assert gateway_refusal("ns/gw", msg) is None
