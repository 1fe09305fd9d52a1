"""A Gateway's replica (`--gateway namespace/name`) holds that Gateway's generations only: one for another Gateway,
or a TrafficSplit generation with no route table, is refused INVALID and the held generation stays."""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.test_extproc_ads import Caller, RefusingEnvoy, _weighted_gateway_gen, gen
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.identity import GatewayIdentity
from trafficsplit.extproc.ads import AdsServer
from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.extproc.publisher import Publisher, gateway_refusal
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.envoy import CLUSTER_TYPE, ROUTE_CONFIG_NAME, ROUTE_TYPE
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto


def test_a_replica_of_a_gateway_refuses_another_gateways_generation_and_keeps_its_own() -> None:
    async def run() -> None:
        metrics = Metrics()
        ads = AdsServer(metrics)
        held = HeldGeneration()
        pub = Publisher(held, ads, metrics, token=b"t", replica="r", ack_timeout=5, gateway=GatewayIdentity("ns/gw"))
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
    assert gateway_refusal(GatewayIdentity("ns/gw"), msg) is None


def test_a_replica_refuses_its_gateways_name_under_another_uid_and_keeps_what_it_holds() -> None:
    """A Gateway deleted and created again under its name is another Gateway: a replica told its Gateway's uid
    (`--gateway-uid`, as the provisioner passes it) refuses a generation stamped with another uid, or with none, and
    keeps the one it holds."""

    async def run() -> None:
        metrics = Metrics()
        ads = AdsServer(metrics)
        held = HeldGeneration()
        me = GatewayIdentity("ns/gw", "0b1c-uid-one")
        pub = Publisher(held, ads, metrics, token=b"t", replica="r", ack_timeout=5, gateway=me)
        envoy = RefusingEnvoy(ads, refuse=set())
        envoy.ask(CLUSTER_TYPE)
        envoy.ask(ROUTE_TYPE, [ROUTE_CONFIG_NAME])
        own = pb.PublishRequest(
            generation=generation_to_proto(_weighted_gateway_gen(1, 90, "0b1c-uid-one"), origin="op")
        )
        reply = await pub.Publish(own, Caller(deadline=5))  # type: ignore[arg-type]
        assert (reply.result, reply.held_number) == (pb.PublishReply.ACCEPTED, 1), reply

        for uid in ("9f8e-uid-two", ""):
            other = pb.PublishRequest(generation=generation_to_proto(_weighted_gateway_gen(2, 10, uid), origin="op"))
            reply = await pub.Publish(other, Caller(deadline=5))  # type: ignore[arg-type]
            assert (reply.result, reply.held_number) == (pb.PublishReply.INVALID, 1), reply
            assert f"is for Gateway ns/gw uid {uid!r}; this replica serves uid '0b1c-uid-one' only" in reply.message
        assert held.number == 1 and held.message is not None and held.message.routes.gateway_uid == "0b1c-uid-one"
        envoy.close()

    asyncio.run(run())


def test_a_replica_told_only_its_gateways_name_takes_any_uid() -> None:
    """Data planes rendered before `--gateway-uid` existed compare the name only, as they did."""
    msg = generation_to_proto(_weighted_gateway_gen(1, 90, "9f8e-uid-two"), origin="op")
    assert gateway_refusal(GatewayIdentity("ns/gw"), msg) is None
    assert gateway_refusal(GatewayIdentity("ns/gw", "9f8e-uid-two"), msg) is None


@pytest.mark.parametrize(
    ("key", "uid", "problem"),
    [
        ("gw", "", "gateway: 'gw' must be namespace/name"),
        ("ns/gw", "-x", "gateway uid: '-x' must be letters, digits and dashes"),
        ("ns/gw", "u" * 64, "gateway uid: " + repr("u" * 64) + " must be letters, digits and dashes"),
        ("ns/gw", "a\r\nb", "gateway uid: 'a\\r\\nb' must be letters, digits and dashes"),
    ],
)
def test_a_gateway_identity_checks_itself(key: str, uid: str, problem: str) -> None:
    with pytest.raises(SpecError) as e:
        GatewayIdentity(key, uid)
    assert list(e.value.problems) == [problem]


def test_the_route_table_carries_the_gateways_uid_through_the_wire_and_checks_it() -> None:
    gen = _weighted_gateway_gen(1, 90, "0b1c-uid-one")
    assert gen.routes is not None and gen.routes.gateway_uid == "0b1c-uid-one"
    msg = generation_to_proto(gen, origin="op")
    assert msg.routes.gateway_uid == "0b1c-uid-one"
    back = generation_from_proto(msg)
    assert back.routes is not None and back.routes.gateway_uid == "0b1c-uid-one"
    msg.routes.gateway_uid = "bad uid"
    with pytest.raises(SpecError) as e:
        generation_from_proto(msg)
    assert "routes.gateway_uid: 'bad uid' must be letters, digits and dashes" in str(e.value)
