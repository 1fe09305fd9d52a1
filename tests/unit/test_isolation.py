"""Tenant isolation in publishing: a split one replica cannot serve is that split's problem alone; refusals are
forgotten when the replica reconnects or restarts; a number far above the held one is refused.

The engine and fleet against in-process fake replicas (tests/unit/test_operator_engine.py's FakeReplica), and the
pure rules (core/model/capabilities.py, core/control/status.py) as values. Real processes:
tests/integration/test_isolation.py.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.unit.test_operator_engine import FakeReplica, body, make_engine, run, until
from trafficsplit.core.control.resolve import SplitObject
from trafficsplit.core.control.status import StatusResult
from trafficsplit.core.model.capabilities import Capabilities, fleet_refusal, number_refusal, refusal
from trafficsplit.core.model.limits import MAX_GENERATION, MAX_GENERATION_STEP
from trafficsplit.core.model.vocabulary import EventReason, Reason
from trafficsplit.v1alpha1 import publish_pb2 as pb


def persistent_body(name: str) -> dict[str, Any]:
    b = body(name, (1, 1))
    b["spec"]["hosts"] = [f"{name}.example"]
    b["spec"]["backends"][0]["endpoints"] = ["127.0.0.1:11"]
    b["spec"]["backends"][1]["endpoints"] = ["127.0.0.1:12"]
    b["spec"]["sticky"] = {"mode": "persistent", "cookie": {"name": "ts"}}
    return b


class Statuses:
    def __init__(self) -> None:
        self.writes: list[tuple[str, StatusResult]] = []

    async def sink(self, obj: SplitObject, result: StatusResult) -> None:
        self.writes.append((obj.key, result))

    def last(self, key: str) -> StatusResult | None:
        return next((r for k, r in reversed(self.writes) if k == key), None)

    def published(self, key: str) -> tuple[str, str, str] | None:
        r = self.last(key)
        if r is None:
            return None
        c = next(c for c in r.status.to_dict()["conditions"] if c["type"] == "Published")
        return c["status"], c["reason"], c["message"]

    def events(self, key: str) -> list[str]:
        return [e.reason for k, r in self.writes if k == key for e in r.events]


def held_keys(r: FakeReplica) -> set[str]:
    assert r.held_gen is not None
    return {f"{s.namespace}/{s.name}" for s in r.held_gen.splits}


# --- the pure rules ------------------------------------------------------------------------------------------------


def test_a_number_far_above_the_held_one_is_refused_and_one_step_is_not() -> None:
    assert number_refusal(MAX_GENERATION, 0) is not None
    assert number_refusal(MAX_GENERATION, 5) is not None
    assert number_refusal(6, 5) is None
    assert number_refusal(MAX_GENERATION_STEP, 0) is None  # a restarted replica takes any number the fleet reaches
    assert number_refusal(MAX_GENERATION_STEP + 6, 5) is not None
    # Walking to the ceiling takes this many publishes, not one.
    assert MAX_GENERATION // MAX_GENERATION_STEP >= 2**20


def test_the_fleet_refusal_names_every_replica_that_cannot_serve_and_only_for_what_it_lacks() -> None:
    from trafficsplit.core.control.compiler import compile_split
    from trafficsplit.core.control.spec import parse_split
    from trafficsplit.core.model.rules import Endpoint

    spec = {"hosts": ["p.example"], "backends": [{"name": "a", "weight": 1, "endpoints": ["127.0.0.1:1"]}]}
    plain = compile_split(parse_split("ns", "p", spec), {"a": (Endpoint("127.0.0.1", 1),)})
    sealed = compile_split(
        parse_split("ns", "p", {**spec, "sticky": {"mode": "persistent", "cookie": {"name": "ts"}}}),
        {"a": (Endpoint("127.0.0.1", 1),)},
    )
    keyed, keyless = Capabilities(cookie_keys=True), Capabilities(cookie_keys=False)
    assert refusal(plain, keyless) is None and refusal(sealed, keyed) is None
    r = refusal(sealed, keyless)
    assert r is not None and r.split == "ns/p" and "no cookie keys" in r.message
    assert fleet_refusal(sealed, {"gw-0": keyed, "gw-1": keyed}) is None
    assert fleet_refusal(plain, {"gw-0": keyless}) is None
    why = fleet_refusal(sealed, {"gw-0": keyed, "gw-2": keyless, "gw-1": keyless})
    assert why is not None and why.startswith("dataplanes gw-1, gw-2: no cookie keys"), why


# --- the engine and fleet ------------------------------------------------------------------------------------------


def test_a_split_a_replica_refuses_alone_lands_on_its_status_only_and_the_rest_is_published(tmp_path: Any) -> None:
    statuses = Statuses()

    async def main() -> None:
        a, b = await FakeReplica("a").start(), await FakeReplica("b").start()
        b.refuse_splits = {"default/s"}
        engine = make_engine(tmp_path, [a, b], statuses.sink)
        engine.store.apply("trafficsplit", None, body("s", (1, 1)))
        engine.store.apply("trafficsplit", None, body("t", (1, 1)))
        await engine.become_leader()
        engine.mark_ready()
        task = asyncio.create_task(engine.run())
        await until(lambda: (statuses.published("default/s") or ("",))[0] == "False" and a.held > 0)
        await until(lambda: statuses.published("default/t") == ("True", "Published", "2/2 dataplanes"))
        assert statuses.published("default/s") == ("False", "Refused", "1/2 dataplanes; refused by b: refused here")
        assert EventReason.REFUSED in statuses.events("default/s")
        assert EventReason.REFUSED not in statuses.events("default/t")
        # The other split's next change reaches both replicas.
        engine.apply("trafficsplit", "MODIFIED", body("t", (0, 1), generation=2))
        await until(lambda: a.held == b.held == 2 and "default/t" in held_keys(b))
        assert held_keys(a) == {"default/s", "default/t"} and held_keys(b) == {"default/t"}
        task.cancel()
        await engine.fleet.close()
        await a.stop()
        await b.stop()

    run(main)


def test_a_split_some_replica_cannot_serve_is_left_out_and_named_before_publishing(tmp_path: Any) -> None:
    statuses = Statuses()

    async def main() -> None:
        a, b = await FakeReplica("a").start(), await FakeReplica("b").start()
        a.cookie_keys, b.cookie_keys = True, False
        engine = make_engine(tmp_path, [a, b], statuses.sink)
        engine.store.apply("trafficsplit", None, persistent_body("p"))
        engine.store.apply("trafficsplit", None, body("t", (1, 1)))
        await engine.become_leader()
        engine.mark_ready()
        task = asyncio.create_task(engine.run())
        await until(lambda: statuses.published("default/t") == ("True", "Published", "2/2 dataplanes"))
        await until(lambda: (statuses.published("default/p") or ("",))[0] == "False")
        _, reason, message = statuses.published("default/p") or ("", "", "")
        assert reason == Reason.UNSERVABLE and message.startswith("not published: dataplane b: no cookie keys"), message
        assert EventReason.UNSERVABLE in statuses.events("default/p")
        assert held_keys(a) == held_keys(b) == {"default/t"}  # never offered: both serve the same splits
        assert a.published == b.published == [1]
        # b fixed (restarted with keys): the split is published to both.
        b.cookie_keys, b.instance = True, "i-2"
        await until(lambda: held_keys(a) == held_keys(b) == {"default/p", "default/t"})
        await until(lambda: statuses.published("default/p") == ("True", "Published", "2/2 dataplanes"))
        task.cancel()
        await engine.fleet.close()
        await a.stop()
        await b.stop()

    run(main)


def test_a_refusal_is_forgotten_when_the_replica_reconnects(tmp_path: Any) -> None:
    async def main() -> None:
        b = await FakeReplica("b").start()
        b.refuse = True
        engine = make_engine(tmp_path, [b])
        engine.store.apply("trafficsplit", None, body("s", (1, 1)))
        await engine.become_leader()
        engine.mark_ready()
        task = asyncio.create_task(engine.run())
        await until(lambda: len(b.published) >= 2)  # refused twice: the next offer is 1 to 2 s away
        # Fixed and back at the same address (a restart: the connection drops).
        await b.stop()
        b.refuse = False
        b.instance = "i-2"
        await b.start(b.port)
        t0 = time.monotonic()
        await until(lambda: b.held == 1, timeout=5)
        took = time.monotonic() - t0
        print(f"reconnected replica offered the current generation after {took:.2f}s")
        assert took < 0.9, took  # at once, not after the refusal's backoff
        task.cancel()
        await engine.fleet.close()
        await b.stop()

    run(main)


def test_a_refusal_is_forgotten_when_the_replica_restarted_between_two_polls(tmp_path: Any) -> None:
    async def main() -> None:
        b = await FakeReplica("b").start()
        b.refuse = True
        engine = make_engine(tmp_path, [b])
        engine.store.apply("trafficsplit", None, body("s", (1, 1)))
        await engine.become_leader()
        engine.mark_ready()
        task = asyncio.create_task(engine.run())
        await until(lambda: len(b.published) >= 2)
        # No connection error seen: only the reported instance tells the restart.
        b.refuse, b.instance = False, "i-2"
        t0 = time.monotonic()
        await until(lambda: b.held == 1, timeout=5)
        took = time.monotonic() - t0
        assert took < 0.9, took
        task.cancel()
        await engine.fleet.close()
        await b.stop()

    run(main)


# --- the replica's publisher (no Envoy: every snapshot acknowledged at once) ---------------------------------------


def _two_splits(number: int) -> pb.Generation:
    from trafficsplit.core.control.compiler import compile_split
    from trafficsplit.core.control.spec import parse_split
    from trafficsplit.core.model.compiled import Endpoint
    from trafficsplit.core.model.generation import Generation
    from trafficsplit.wire.generation import generation_to_proto

    def one(name: str, extra: dict[str, Any]) -> Any:
        spec = parse_split(
            "ns", name, {"hosts": [f"{name}.example"], "backends": [{"name": "a", "weight": 1}], **extra}
        )
        return compile_split(spec, {"a": [Endpoint("10.0.0.1", 80)]})

    sealed = one("cart", {"sticky": {"mode": "persistent", "cookie": {"name": "ts"}}})
    return generation_to_proto(Generation(number, (sealed, one("shop", {}))), origin="op")


def test_a_replica_without_keys_refuses_the_persistent_split_alone_and_a_far_number_whole() -> None:
    from tests.unit.test_extproc_processor import AckingAds, FakeContext
    from trafficsplit.extproc.held import HeldGeneration
    from trafficsplit.extproc.metrics import Metrics
    from trafficsplit.extproc.publisher import Publisher

    async def main() -> None:
        held, metrics = HeldGeneration(), Metrics()
        pub = Publisher(held, AckingAds(metrics), metrics, token=b"t", replica="r0", ack_timeout=1)
        ok: Any = FakeContext("t")
        reply = await pub.Publish(pb.PublishRequest(generation=_two_splits(3)), ok)
        assert (reply.result, reply.held_number) == (pb.PublishReply.ACCEPTED, 3), reply
        assert [(r.split, r.reason) for r in reply.refused] == [("ns/cart", "NoCookieKeys")]
        assert reply.HasField("capabilities") and not reply.capabilities.cookie_keys and reply.instance
        assert held.current is not None and [s.key for s in held.current.splits] == ["ns/shop"]
        got = await pub.GetHeld(pb.GetHeldRequest(with_generation=True), ok)
        assert [f"{s.namespace}/{s.name}" for s in got.generation.splits] == ["ns/shop"]
        assert [r.split for r in got.refused] == ["ns/cart"] and got.instance == reply.instance
        # The next generation, carrying the held split unchanged, is taken as usual.
        assert (await pub.Publish(pb.PublishRequest(generation=_two_splits(4)), ok)).held_number == 4
        # A number at the ceiling: refused whole, not adopted; the next one in step is taken.
        far = await pub.Publish(pb.PublishRequest(generation=_two_splits(MAX_GENERATION)), ok)
        assert (far.result, far.held_number) == (pb.PublishReply.INVALID, 4), far
        assert "more than 4294967296 above the held 4" in far.message
        assert (await pub.Publish(pb.PublishRequest(generation=_two_splits(5)), ok)).held_number == 5
        keyed = Publisher(
            HeldGeneration(), AckingAds(metrics), metrics, token=b"t", replica="r1", ack_timeout=1, can_seal=True
        )
        both = await keyed.Publish(pb.PublishRequest(generation=_two_splits(3)), ok)
        assert (both.result, list(both.refused), both.capabilities.cookie_keys) == (pb.PublishReply.ACCEPTED, [], True)

    asyncio.run(main())


# --- reconcile: what is left out, what is kept ---------------------------------------------------------------------


def test_an_unservable_split_keeps_a_last_good_form_every_replica_can_serve_else_is_left_out() -> None:
    from trafficsplit.core.control.reconcile import desired_state
    from trafficsplit.operator.cluster import split_from_body

    def obj(name: str, generation: int, persistent: bool) -> SplitObject:
        b = body(name, (1, 1), generation=generation)
        if persistent:
            b["spec"]["sticky"] = {"mode": "persistent", "cookie": {"name": "ts"}}
        return split_from_body(b)

    fleet = {"gw-0": Capabilities(cookie_keys=True), "gw-1": Capabilities(cookie_keys=False)}
    before = desired_state([obj("p", 1, False), obj("t", 1, False)], {}, {}, {}, static=True, capabilities=fleet)
    # p switches to sticky.mode persistent: gw-1 cannot serve it, so the cookie form it had stays, named.
    after = desired_state(
        [obj("p", 2, True), obj("t", 1, False)], {}, {}, before.last_good, static=True, capabilities=fleet
    )
    p = after.outcomes["default/p"]
    assert p.unservable is not None and p.unservable.reason == Reason.UNSERVABLE
    assert p.unservable.message.startswith("dataplane gw-1: no cookie keys"), p.unservable.message
    assert p.kept and p.served is not None and p.served.observed_generation == 1 and not p.served.persistent
    assert after.outcomes["default/t"].unservable is None
    assert [s.key for s in after.content.splits] == ["default/p", "default/t"]
    # A new persistent split has no servable form: left out, and nothing else changes.
    fresh = desired_state([obj("q", 1, True), obj("t", 1, False)], {}, {}, {}, static=True, capabilities=fleet)
    assert fresh.outcomes["default/q"].served is None and [s.key for s in fresh.content.splits] == ["default/t"]
    # Every replica with keys (or none reported yet): published as usual.
    keyed = {"gw-0": Capabilities(cookie_keys=True)}
    for caps in (keyed, {}):
        ok = desired_state([obj("q", 1, True)], {}, {}, {}, static=True, capabilities=caps)
        assert ok.outcomes["default/q"].unservable is None and [s.key for s in ok.content.splits] == ["default/q"]


def _gateway_generation(number: int) -> pb.Generation:
    """A Gateway's generation: rule 0 with Cookie sessionPersistence (a persistent split), rule 1 without."""
    from trafficsplit.core.control.resolve import ServiceInfo, ServicePort
    from trafficsplit.core.gatewayapi.httproute import parse_httproute
    from trafficsplit.core.gatewayapi.objects import parse_gateway, parse_gateway_class
    from trafficsplit.core.gatewayapi.translate import Inputs, gateway_content, translate
    from trafficsplit.wire.generation import generation_to_proto

    cls = parse_gateway_class(
        {"metadata": {"name": "ts"}, "spec": {"controllerName": "trafficsplit.dev/gateway-controller"}}
    )
    listener = {"name": "http", "port": 80, "protocol": "HTTP"}
    gw = parse_gateway(
        {"metadata": {"name": "gw", "namespace": "ns"}, "spec": {"gatewayClassName": "ts", "listeners": [listener]}}
    )
    route = parse_httproute(
        {
            "metadata": {"name": "r", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1},
            "spec": {
                "parentRefs": [{"name": "gw"}],
                "rules": [
                    {"matches": [{"path": {"value": "/cart"}}], "backendRefs": [{"name": "a", "port": 80}],
                     "sessionPersistence": {"sessionName": "sid"}},
                    {"backendRefs": [{"name": "a", "port": 80}]},
                ],
            },
        }
    )  # fmt: skip
    svc = ServiceInfo("ns", "a", (ServicePort(name="http", port=80, target_port=8080),))
    t = translate(Inputs(classes=(cls,), gateways=(gw,), routes=(route,), services={("ns", "a"): svc}))
    return generation_to_proto(gateway_content(t, "ns/gw").stamp(number), origin="op")


def test_a_gateway_replica_without_keys_refuses_the_sticky_rule_alone_and_serves_the_others() -> None:
    """A Cookie sessionPersistence rule is a persistent split: a replica without cookie keys refuses that rule alone
    (the route's status names it), keeps its table whole, and answers that rule 500 while the other rules serve."""
    from tests.unit.test_extproc_processor import AckingAds, FakeContext
    from trafficsplit.extproc.held import HeldGeneration
    from trafficsplit.extproc.metrics import Metrics
    from trafficsplit.extproc.publisher import Publisher
    from trafficsplit.wire.generation import generation_from_proto

    async def main() -> None:
        held, metrics = HeldGeneration(), Metrics()
        pub = Publisher(held, AckingAds(metrics), metrics, token=b"t", replica="r0", ack_timeout=1)
        ok: Any = FakeContext("t")
        reply = await pub.Publish(pb.PublishRequest(generation=_gateway_generation(3)), ok)
        assert (reply.result, reply.held_number) == (pb.PublishReply.ACCEPTED, 3), reply
        assert [(r.split, r.reason) for r in reply.refused] == [("ns/r.rule-0", "NoCookieKeys")]
        gen = held.current
        assert gen is not None and gen.routes is not None
        assert [s.key for s in gen.splits] == ["ns/r.rule-1"]
        actions = {a.key: a for a in gen.routes.actions}
        assert actions["ns/r.rule-0"].split is None  # answers 500 here, never falls through to another rule
        assert actions["ns/r.rule-1"].split is not None
        got = await pub.GetHeld(pb.GetHeldRequest(with_generation=True), ok)
        assert generation_from_proto(got.generation).content == gen.content  # what is held parses as served
        assert (await pub.Publish(pb.PublishRequest(generation=_gateway_generation(4)), ok)).held_number == 4

    asyncio.run(main())
