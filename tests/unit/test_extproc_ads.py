"""The ADS state machine without Envoy: what is sent when, and how ACKs and NACKs are read from requests.

A fake stream stands in for Envoy: requests go in through a queue, responses come out of the servicer's generator.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.route.v3 import route_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.rpc import status_pb2

from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.compiled import Endpoint
from trafficsplit.core.model.generation import Generation
from trafficsplit.extproc.ads import AdsServer, Nacked, NotAcked
from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.extproc.publisher import Publisher
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.envoy import CLUSTER_TYPE, ENDPOINT_TYPE, ROUTE_CONFIG_NAME, ROUTE_TYPE
from trafficsplit.wire.generation import generation_to_proto
from trafficsplit.wire.snapshot import resources, transition


def gen(number: int, backends: dict[str, int]) -> Generation:
    spec = parse_split("ns", "s", {"hosts": ["h"], "backends": [{"name": n, "weight": w} for n, w in backends.items()]})
    return Generation(number, (compile_split(spec, {n: [Endpoint("10.0.0.1", 80)] for n in backends}),))


class FakeEnvoy:
    def __init__(self, ads: AdsServer) -> None:
        self.requests: asyncio.Queue[discovery_pb2.DiscoveryRequest | None] = asyncio.Queue()
        self.stream = ads.StreamAggregatedResources(self._iter(), self)  # type: ignore[arg-type]

    def peer(self) -> str:
        return "fake"

    async def _iter(self) -> AsyncIterator[discovery_pb2.DiscoveryRequest]:
        while (req := await self.requests.get()) is not None:
            yield req

    def ask(self, type_url: str, names: Sequence[str] = (), reply_to: Any = None, error: str | None = None) -> None:
        req = discovery_pb2.DiscoveryRequest(type_url=type_url, resource_names=list(names))
        if reply_to is not None:
            req.version_info, req.response_nonce = reply_to.version_info, reply_to.nonce
        if error is not None:
            req.error_detail.CopyFrom(status_pb2.Status(code=3, message=error))
        self.requests.put_nowait(req)

    async def next(self) -> discovery_pb2.DiscoveryResponse:
        return await asyncio.wait_for(self.stream.__anext__(), 2)

    async def nothing(self) -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(asyncio.ensure_future(self.stream.__anext__())), 0.1)


_TYPES: dict[str, tuple[type[Message], str]] = {
    CLUSTER_TYPE: (cluster_pb2.Cluster, "name"),
    ENDPOINT_TYPE: (endpoint_pb2.ClusterLoadAssignment, "cluster_name"),
    ROUTE_TYPE: (route_pb2.RouteConfiguration, "name"),
}


def names(resp: discovery_pb2.DiscoveryResponse) -> set[str]:
    cls, field = _TYPES[resp.type_url]
    out = set()
    for a in resp.resources:
        m = cls()
        a.Unpack(m)
        out.add(getattr(m, field))
    return out


def test_nothing_is_sent_before_a_snapshot_then_acks_unblock_the_publisher() -> None:
    async def run() -> None:
        ads = AdsServer(Metrics())
        envoy = FakeEnvoy(ads)
        envoy.ask(CLUSTER_TYPE)
        envoy.ask(ROUTE_TYPE, ["trafficsplit"])
        first = asyncio.ensure_future(envoy.next())
        await asyncio.sleep(0.05)
        assert not first.done()  # a processor without a generation must not wipe Envoy's clusters
        g = gen(1, {"a": 1, "b": 1})
        versions = ads.set_resources(transition(None, g), generation=g.number)
        # Versions are the generation's number (see test_versions_are_generation_numbers for the suffix).
        assert versions == {CLUSTER_TYPE: "1", ENDPOINT_TYPE: "1"}
        cds = await first
        assert cds.type_url == CLUSTER_TYPE and names(cds) == {"ns/s/a", "ns/s/b"}
        waiter = asyncio.ensure_future(ads.wait_acked(versions, 2))
        envoy.ask(CLUSTER_TYPE, reply_to=cds)
        envoy.ask(ENDPOINT_TYPE, ["ns/s/a", "ns/s/b"])
        eds = await envoy.next()
        assert eds.type_url == ENDPOINT_TYPE and names(eds) == {"ns/s/a", "ns/s/b"}
        await asyncio.sleep(0.05)
        assert not waiter.done()  # EDS not acknowledged yet
        envoy.ask(ENDPOINT_TYPE, ["ns/s/a", "ns/s/b"], reply_to=eds)
        await waiter
        # The swap's snapshot adds the routes; an unchanged type is not resent.
        versions = ads.set_resources(resources(g), generation=g.number)
        assert versions == {ROUTE_TYPE: "1"}
        rds = await envoy.next()
        assert rds.type_url == ROUTE_TYPE and names(rds) == {"trafficsplit"}
        envoy.ask(ROUTE_TYPE, ["trafficsplit"], reply_to=rds)
        await ads.wait_acked(versions, 2)
        envoy.requests.put_nowait(None)

    asyncio.run(run())


def test_a_nack_fails_the_wait_and_is_not_resent() -> None:
    async def run() -> None:
        metrics = Metrics()
        ads = AdsServer(metrics)
        envoy = FakeEnvoy(ads)
        envoy.ask(CLUSTER_TYPE)
        versions = ads.set_resources(resources(gen(1, {"a": 1})), generation=1)
        cds = await envoy.next()
        waiter = asyncio.ensure_future(ads.wait_acked({CLUSTER_TYPE: versions[CLUSTER_TYPE]}, 2))
        envoy.ask(CLUSTER_TYPE, reply_to=cds, error="bad cluster")
        with pytest.raises(Nacked, match="bad cluster"):
            await waiter
        assert metrics.xds_nacks.labels("cds")._value.get() == 1
        await envoy.nothing()
        envoy.requests.put_nowait(None)

    asyncio.run(run())


def test_eds_waits_for_newly_requested_names() -> None:
    async def run() -> None:
        ads = AdsServer(Metrics())
        envoy = FakeEnvoy(ads)
        envoy.ask(CLUSTER_TYPE)
        ads.set_resources(resources(gen(1, {"a": 1})), generation=1)
        cds = await envoy.next()
        envoy.ask(CLUSTER_TYPE, reply_to=cds)
        envoy.ask(ENDPOINT_TYPE, ["ns/s/a"])
        eds = await envoy.next()
        envoy.ask(ENDPOINT_TYPE, ["ns/s/a"], reply_to=eds)
        versions = ads.set_resources(transition(gen(1, {"a": 1}), gen(2, {"a": 1, "b": 1})), generation=2)
        waiter = asyncio.ensure_future(ads.wait_acked(versions, 2))
        cds = await envoy.next()
        eds = await envoy.next()  # the new version, for the names Envoy asked so far
        assert names(eds) == {"ns/s/a"}
        envoy.ask(CLUSTER_TYPE, reply_to=cds)
        envoy.ask(ENDPOINT_TYPE, ["ns/s/a"], reply_to=eds)
        await asyncio.sleep(0.05)
        assert not waiter.done()  # b's assignment not yet acknowledged: b is not warm
        envoy.ask(ENDPOINT_TYPE, ["ns/s/a", "ns/s/b"], reply_to=eds)
        eds2 = await envoy.next()
        assert names(eds2) == {"ns/s/a", "ns/s/b"}
        envoy.ask(ENDPOINT_TYPE, ["ns/s/a", "ns/s/b"], reply_to=eds2)
        await waiter
        envoy.requests.put_nowait(None)

    asyncio.run(run())


def test_versions_are_generation_numbers() -> None:
    """A type changed by generation N gets version "N"; a second install of that type under N (the snapshot after
    the transition, or N offered again after a refusal) or under a lower number gets "N.k", never a version already
    sent; a type N leaves unchanged keeps its version."""
    ads = AdsServer(Metrics())
    one, two = gen(1, {"a": 1}), gen(2, {"b": 1})
    every = (CLUSTER_TYPE, ENDPOINT_TYPE, ROUTE_TYPE)
    assert ads.set_resources(resources(one), generation=1) == dict.fromkeys(every, "1")
    before = ads.snapshot()
    assert ads.set_resources(transition(one, two), generation=2) == {CLUSTER_TYPE: "2", ENDPOINT_TYPE: "2"}
    final = ads.set_resources(resources(two), generation=2)
    assert final[ROUTE_TYPE] == "2"
    assert final[CLUSTER_TYPE].startswith("2.") and final[ENDPOINT_TYPE].startswith("2.")
    ads.restore(before)  # refused: generation 2 is offered again
    again = ads.set_resources(resources(two), generation=2)
    assert all(v.startswith("2.") for v in again.values()) and set(again.values()).isdisjoint(final.values())
    lower = ads.set_resources(resources(one), generation=1)
    assert all(v.startswith("1.") for v in lower.values())


def test_wait_times_out_without_envoy() -> None:
    async def run() -> None:
        ads = AdsServer(Metrics())
        versions = ads.set_resources(resources(gen(1, {"a": 1})), generation=1)
        with pytest.raises(NotAcked, match="no Envoy connected"):
            await ads.wait_acked(versions, 0.1)

    asyncio.run(run())


class RefusingEnvoy(FakeEnvoy):
    """Answers every response at once, as Envoy does: ACK, or NACK a CDS response carrying a cluster in `refuse`;
    after a CDS ACK it asks EDS for every cluster it was sent."""

    def __init__(self, ads: AdsServer, refuse: set[str]) -> None:
        super().__init__(ads)
        self.refuse = refuse
        self.sent: list[discovery_pb2.DiscoveryResponse] = []
        self._task = asyncio.ensure_future(self._answer())

    async def _answer(self) -> None:
        while True:
            resp = await self.stream.__anext__()
            self.sent.append(resp)
            if resp.type_url == CLUSTER_TYPE and names(resp) & self.refuse:
                self.ask(CLUSTER_TYPE, reply_to=resp, error="malformed IP address")
                continue
            asked = sorted(names(resp)) if resp.type_url != CLUSTER_TYPE else []
            self.ask(resp.type_url, asked or ([ROUTE_CONFIG_NAME] if resp.type_url == ROUTE_TYPE else []), resp)
            if resp.type_url == CLUSTER_TYPE:
                self.ask(ENDPOINT_TYPE, sorted(names(resp)))

    def close(self) -> None:
        self._task.cancel()
        self.requests.put_nowait(None)


class Caller:
    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return [("authorization", "Bearer t")]

    def time_remaining(self) -> float | None:
        return self.deadline


def test_a_generation_envoy_refused_with_nothing_held_is_refused_again_and_never_served() -> None:
    async def run() -> None:
        metrics = Metrics()
        ads = AdsServer(metrics)
        held = HeldGeneration()
        pub = Publisher(held, ads, metrics, token=b"t", replica="r", ack_timeout=1)
        envoy = RefusingEnvoy(ads, refuse={"ns/s/bad"})
        envoy.ask(CLUSTER_TYPE)
        envoy.ask(ROUTE_TYPE, [ROUTE_CONFIG_NAME])
        msg = pb.PublishRequest(generation=generation_to_proto(gen(1, {"bad": 1}), origin="op"))
        for _ in range(2):  # the operator retries what it was refused
            reply = await pub.Publish(msg, Caller())  # type: ignore[arg-type]
            assert (reply.result, reply.held_number) == (pb.PublishReply.INVALID, 0), reply
            assert held.current is None
        # A rejected snapshot is not served to an Envoy that connects later either.
        late = FakeEnvoy(ads)
        late.ask(CLUSTER_TYPE)
        await late.nothing()
        late.requests.put_nowait(None)
        await asyncio.sleep(0.05)
        assert ads.streams == 1
        # And a good generation is still taken.
        reply = await pub.Publish(
            pb.PublishRequest(generation=generation_to_proto(gen(1, {"a": 1}), origin="op")),
            Caller(),  # type: ignore[arg-type]
        )
        assert reply.result == pb.PublishReply.ACCEPTED, reply
        envoy.close()

    asyncio.run(run())


def test_no_envoy_yet_is_not_ready_before_the_callers_deadline_and_a_retry_is_taken() -> None:
    """A restarted processor whose Envoy has not reconnected yet: transient, NOT_READY (the caller retries), not
    INVALID (retried only after a backoff), and answered within the caller's deadline rather than after it."""

    async def run() -> None:
        metrics = Metrics()
        ads = AdsServer(metrics)
        held = HeldGeneration()
        pub = Publisher(held, ads, metrics, token=b"t", replica="r", ack_timeout=30)
        msg = pb.PublishRequest(generation=generation_to_proto(gen(1, {"a": 1}), origin="op"))
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        reply = await pub.Publish(msg, Caller(deadline=1.5))  # type: ignore[arg-type]
        assert (reply.result, reply.held_number) == (pb.PublishReply.NOT_READY, 0), reply
        assert "no Envoy connected" in reply.message
        assert loop.time() - t0 < 1.5
        envoy = RefusingEnvoy(ads, refuse=set())
        envoy.ask(CLUSTER_TYPE)
        envoy.ask(ROUTE_TYPE, [ROUTE_CONFIG_NAME])
        reply = await pub.Publish(msg, Caller(deadline=5))  # type: ignore[arg-type]
        assert (reply.result, reply.held_number) == (pb.PublishReply.ACCEPTED, 1), reply
        envoy.close()
        await pub.close()

    asyncio.run(run())


def https_gen(number: int, key_pem: bytes) -> Generation:
    """A Gateway generation with one HTTPS listener on 443 (hostname a.example.com) whose key is `key_pem`."""
    from trafficsplit.core.model.generation import GenerationContent
    from trafficsplit.core.model.routes import GatewayRoutes, ListenerRoutes
    from trafficsplit.core.model.tls import Certificate

    chain = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    cert = Certificate(chain, b"-----BEGIN PRIVATE KEY-----\n" + key_pem + b"\n-----END PRIVATE KEY-----\n")
    lr = ListenerRoutes("ns/gw", "a", 443, (), hostname="a.example.com", certificate=cert)
    return GenerationContent(splits=(), routes=GatewayRoutes(gateway="ns/gw", listeners=(lr,))).stamp(number)


def test_sds_serves_a_listeners_certificate_when_asked_and_waits_only_for_an_envoy_that_asks() -> None:
    from envoy.extensions.transport_sockets.tls.v3 import secret_pb2

    from trafficsplit.wire.envoy import SECRET_TYPE, secret_name

    async def run() -> None:
        ads = AdsServer(Metrics())
        envoy = FakeEnvoy(ads)
        envoy.ask(CLUSTER_TYPE)
        g1 = https_gen(1, b"AAAA")
        versions = ads.set_resources(resources(g1), generation=1)
        assert versions[SECRET_TYPE] == "1"
        cds = await envoy.next()
        envoy.ask(CLUSTER_TYPE, reply_to=cds)
        # An Envoy without an HTTPS listener never asks for a secret: the wait does not hang on SDS.
        await ads.wait_acked({CLUSTER_TYPE: versions[CLUSTER_TYPE], SECRET_TYPE: "1"}, 2)
        name = secret_name(443, "a.example.com")
        assert name == "trafficsplit_tls_443_a.example.com"
        envoy.ask(SECRET_TYPE, [name])
        sds = await envoy.next()
        assert sds.type_url == SECRET_TYPE and sds.version_info == "1"
        secret = secret_pb2.Secret()
        sds.resources[0].Unpack(secret)
        assert secret.name == name and b"AAAA" in secret.tls_certificate.private_key.inline_bytes
        waiter = asyncio.ensure_future(ads.wait_acked({SECRET_TYPE: "1"}, 2))
        await asyncio.sleep(0.05)
        assert not waiter.done()  # asked for, so its ACK is awaited
        envoy.ask(SECRET_TYPE, [name], reply_to=sds)
        await waiter
        # A rotated certificate is a new version of the same secret; a NACK of it fails the publish's wait.
        versions = ads.set_resources(resources(https_gen(2, b"BBBB")), generation=2)
        assert versions == {SECRET_TYPE: "2"}
        sds2 = await envoy.next()
        sds2.resources[0].Unpack(secret)
        assert b"BBBB" in secret.tls_certificate.private_key.inline_bytes
        envoy.ask(SECRET_TYPE, [name], reply_to=sds2, error="Failed to load private key")
        with pytest.raises(Nacked, match="sds version 2"):
            await ads.wait_acked(versions, 2)
        envoy.requests.put_nowait(None)

    asyncio.run(run())


def test_a_trafficsplit_generation_leaves_sds_alone() -> None:
    from trafficsplit.wire.envoy import SECRET_TYPE
    from trafficsplit.wire.snapshot import ResourceBuilder

    assert SECRET_TYPE not in resources(gen(1, {"a": 1})).by_type()
    assert SECRET_TYPE not in ResourceBuilder().resources(gen(1, {"a": 1})).by_type()
    plain = resources(https_gen(1, b"AAAA")).by_type()[SECRET_TYPE]
    packed = ResourceBuilder().resources(https_gen(1, b"AAAA")).by_type()[SECRET_TYPE]
    assert plain and {n: m.SerializeToString() for n, m in plain.items()} == {
        n: cast(any_pb2.Any, m).value for n, m in packed.items()
    }


def _weighted_gateway_gen(number: int, a: int, uid: str = "") -> Generation:
    """A Gateway's generation with one HTTPRoute rule over Services a and b at a/100-a: a weight lives in the
    processor's split only, so two such generations install the same Envoy resources. `uid`: the Gateway's."""
    from tests.unit.test_gateway_translate import route, run
    from trafficsplit.core.gatewayapi.translate import gateway_content

    refs = [{"name": "a", "port": 80, "weight": a}, {"name": "b", "port": 80, "weight": 100 - a}]
    return gateway_content(run(route(rules=[{"backendRefs": refs}])), "ns/gw", uid).stamp(number)


def test_a_generation_that_changes_nothing_in_envoy_still_waits_for_envoys_ack_of_its_number() -> None:
    """A Gateway weight patch changes no Envoy resource (the processor decides). It used to be ACCEPTED at once, so a
    replica whose Envoy was stopped (SIGSTOP on the node) counted as serving it and the route's status advanced. The
    route configuration is sent again under the generation's number: Envoy's ACK of it is the replica's proof that its
    proxy is alive and at this generation, and Envoy's config dump shows the number (one identity end to end)."""

    async def run() -> None:
        metrics = Metrics()
        ads = AdsServer(metrics)
        pub = Publisher(HeldGeneration(), ads, metrics, token=b"t", replica="r", ack_timeout=30)
        envoy = RefusingEnvoy(ads, refuse=set())
        envoy.ask(CLUSTER_TYPE)
        envoy.ask(ROUTE_TYPE, [ROUTE_CONFIG_NAME])
        first = pb.PublishRequest(generation=generation_to_proto(_weighted_gateway_gen(1, 90), origin="op"))
        reply = await pub.Publish(first, Caller(deadline=5))  # type: ignore[arg-type]
        assert reply.result == pb.PublishReply.ACCEPTED, reply
        envoy.close()  # the proxy stops answering (SIGSTOP): its stream stays open, nothing comes back
        silent = FakeEnvoy(ads)  # (a stream must exist for a wait: the stopped one holds its connection)
        silent.ask(CLUSTER_TYPE)
        second = pb.PublishRequest(generation=generation_to_proto(_weighted_gateway_gen(2, 50), origin="op"))
        reply = await pub.Publish(second, Caller(deadline=1.5))  # type: ignore[arg-type]
        assert reply.result == pb.PublishReply.NOT_READY, reply
        silent.requests.put_nowait(None)
        await asyncio.sleep(0.05)
        resumed = RefusingEnvoy(ads, refuse=set())
        resumed.ask(CLUSTER_TYPE)
        resumed.ask(ROUTE_TYPE, [ROUTE_CONFIG_NAME])
        reply = await pub.Publish(second, Caller(deadline=5))  # type: ignore[arg-type]
        assert (reply.result, reply.held_number) == (pb.PublishReply.ACCEPTED, 2), reply
        rds = [r for r in resumed.sent if r.type_url == ROUTE_TYPE]
        assert rds and rds[-1].version_info.split(".")[0] == "2", [r.version_info for r in rds]
        resumed.close()
        await pub.close()

    asyncio.run(run())
