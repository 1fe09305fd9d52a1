"""`assignment: minimal` slot tables of HTTPRoute rules across operator restarts: the core's checks of a held table
(`gatewayapi.tables.held_fit`, `continued_why`), and the operator's Gateway engine restarted against in-process fake
replicas (tests/unit/test_operator_engine.py's, over the real publish/GetHeld path): it continues the table the
replica holds, and without one rebuilds it with a Warning Event on the route.
(tests/integration/test_gateway_tables.py shows the same with a real API server, extproc and Envoy.)"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.unit.test_operator_engine import TOKEN, FakeReplica, run, until
from tests.unit.test_operator_gateways import service_body, slice_body
from trafficsplit.core.control.status import EventIntent
from trafficsplit.core.gatewayapi.tables import (
    HeldSplits,
    HeldTable,
    TableSeed,
    continued_why,
    held_fit,
    held_tables,
    rebuilt_rule_message,
    route_served_before,
)
from trafficsplit.core.model.assignment import SlotTable, advance, fresh_table, minimal_moved_share, moved_share
from trafficsplit.core.model.compiled import CompiledBackend, CompiledSplit
from trafficsplit.core.model.weights import Weights
from trafficsplit.operator.dataplane_names import publish_service_name
from trafficsplit.operator.engine import Engine, EngineSettings
from trafficsplit.operator.fleet import Fleet
from trafficsplit.operator.gateways import GatewayPlane, GatewaySettings
from trafficsplit.wire.generation import generation_from_proto

NS = "shop"
OPNS = "ts-system"
CONTROLLER = "trafficsplit.dev/gateway-controller"
NAMES = ("a", "b", "c")
RAMP = ((80, 10, 10), (40, 30, 30), (70, 20, 10))
NEXT = (50, 30, 20)
KEY = f"{NS}/web.rule-0"


def _advanced() -> SlotTable:
    t: SlotTable | None = None
    for w in RAMP:
        t = advance(t, Weights(NAMES, w))
    assert t is not None
    return t


def _held(observed: int = 3, number: int = 7, names: tuple[str, ...] = NAMES) -> HeldTable:
    table = _advanced() if names == NAMES else fresh_table(Weights(names, (1,) * len(names)))
    return HeldTable(table=table, observed_generation=observed, number=number)


# --- the core -------------------------------------------------------------------------------------------------------


def test_a_held_table_of_a_route_served_before_is_continued() -> None:
    seed = held_fit(_held(), route_generation=4, served_before=True)
    assert seed == TableSeed(_advanced(), "")
    table = seed.table
    # The premise of every test here: continuing moves the minimum, a rebuild twice as much.
    w3, w4 = Weights(NAMES, RAMP[-1]), Weights(NAMES, NEXT)
    assert table is not None
    continued = moved_share(_advanced(), advance(table, w4))
    assert continued == minimal_moved_share(w3, w4) < moved_share(_advanced(), advance(fresh_table(w3), w4))


def test_a_held_table_that_cannot_be_this_routes_is_not_continued_and_says_why() -> None:
    newer = held_fit(_held(observed=5), route_generation=1, served_before=True)
    assert newer.table is None and "metadata.generation 5, newer than the route's 1" in newer.why
    unserved = held_fit(_held(), route_generation=4, served_before=False)
    assert unserved.table is None and "no status from this controller" in unserved.why
    none = held_fit(None, route_generation=4, served_before=True)
    assert none == TableSeed(None, "no replica of its Gateway holds a slot table for it")
    # A rule never served, nothing held: its first table, nothing lost, nothing to say.
    assert held_fit(None, route_generation=1, served_before=False) == TableSeed(None, "")


def test_a_held_table_sharing_no_backend_with_the_rule_is_a_rebuild() -> None:
    after = advance(_held(names=("x", "y")).table, Weights(NAMES, NEXT))
    assert after == fresh_table(Weights(NAMES, NEXT))  # continuing it moves every slot: the same as a rebuild
    assert "none of which is among the rule's" in continued_why(_held(names=("x", "y")).table, after)
    assert continued_why(_advanced(), advance(_advanced(), Weights(NAMES, NEXT))) == ""


def test_held_tables_take_the_higher_numbered_generation_for_a_rule_two_gateways_hold() -> None:
    def split(table: SlotTable, generation: int) -> CompiledSplit:
        w = Weights(NAMES, RAMP[-1])
        backends = tuple(CompiledBackend(name=n, weight=x, cluster=n, service=n, port=80) for n, x in w.items())
        return CompiledSplit(
            namespace=NS, name="web.rule-0", hosts=(), backends=backends, observed_generation=generation, table=table
        )

    old, new = split(advance(None, Weights(NAMES, RAMP[-1])), 2), split(_advanced(), 3)
    got = held_tables([HeldSplits(9, (new,)), HeldSplits(4, (old,))])
    assert got == {KEY: HeldTable(table=_advanced(), observed_generation=3, number=9)}


def test_served_before_is_a_parent_entry_of_ours_and_the_message_names_rule_and_weights() -> None:
    assert route_served_before({"parents": [{"controllerName": CONTROLLER}]})
    assert not route_served_before({"parents": [{"controllerName": "example.com/other"}]})
    assert not route_served_before({})
    m = rebuilt_rule_message(0, "no replica of its Gateway holds a slot table for it", Weights(NAMES, NEXT))
    assert m.startswith("rule 0: assignment is minimal") and "a=50,b=30,c=20" in m and "up to 100%" in m


# --- the operator's Gateway engine, restarted -------------------------------------------------------------------------


def _meta(name: str, namespace: str | None = NS, generation: int = 1) -> dict[str, Any]:
    m: dict[str, Any] = {
        "name": name,
        "generation": generation,
        "resourceVersion": "1",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "uid": f"uid-{name}",
    }
    if namespace is not None:
        m["namespace"] = namespace
    return m


def _route(weights: Sequence[int], generation: int) -> dict[str, Any]:
    refs = [{"name": n, "port": 80, "weight": w} for n, w in zip(NAMES, weights, strict=True)]
    return {
        "metadata": _meta("web", generation=generation),
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["gw.example"], "rules": [{"backendRefs": refs}]},
    }


@dataclass
class Cluster:
    """The API server as the engines see it: the objects (status writes stored, the watch event sent back to the
    engine that leads) and the Events posted."""

    engine: Engine | None = None
    objects: dict[tuple[str, tuple[str, str]], dict[str, Any]] = field(default_factory=dict)
    events: list[tuple[str, tuple[str, str], str, EventIntent]] = field(default_factory=list)

    def put(self, kind: str, body: dict[str, Any]) -> None:
        m = body["metadata"]
        key = (m.get("namespace", ""), m["name"])
        old = self.objects.get((kind, key))
        body = copy.deepcopy(body)
        if old is not None:
            body["metadata"]["resourceVersion"] = str(int(old["metadata"].get("resourceVersion", "0")) + 1)
            body["status"] = old.get("status", {})
        self.objects[(kind, key)] = body
        if self.engine is not None:
            self.engine.apply(kind, "MODIFIED", copy.deepcopy(body))

    def load(self, engine: Engine) -> None:
        """A new operator's start-up listing."""
        self.engine = engine
        for (kind, _), body in self.objects.items():
            engine.load(kind, copy.deepcopy(body))

    async def status(self, kind: str, key: tuple[str, str], resource_version: str, status: Mapping[str, Any]) -> None:
        obj = self.objects[(kind, key)]
        if obj["metadata"]["resourceVersion"] != resource_version:
            raise RuntimeError("409 Conflict")
        obj["status"] = copy.deepcopy(dict(status))
        obj["metadata"]["resourceVersion"] = str(int(resource_version) + 1)
        if self.engine is not None:
            self.engine.apply(kind, "MODIFIED", copy.deepcopy(obj))

    async def event(self, kind: str, key: tuple[str, str], uid: str, event: EventIntent) -> None:
        self.events.append((kind, key, uid, event))

    def accepted_at(self) -> int | None:
        parents = self.objects[("httproute", (NS, "web"))].get("status", {}).get("parents") or []
        mine = [p for p in parents if p["controllerName"] == CONTROLLER]
        conds = [c for p in mine for c in p["conditions"] if c["type"] == "Accepted" and c["status"] == "True"]
        return int(conds[0]["observedGeneration"]) if conds else None


def _engine(tmp_path: Any, cluster: Cluster, chart: FakeReplica) -> Engine:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    engine: Engine | None = None

    def changed() -> None:
        if engine is not None:
            engine.poke()

    def make_fleet(label: str = "") -> Fleet:
        return Fleet(str(token), timeout=1, poll_interval=0.1, changed=changed)

    plane = GatewayPlane(
        GatewaySettings(origin="test", namespace=OPNS, probe_timeout=0.5),
        make_fleet,
        changed,
        status_sink=cluster.status,
        event_sink=cluster.event,
    )
    settings = EngineSettings(origin="test", debounce=0.0, static_replicas=(chart.replica,), static=True)
    engine = Engine(make_fleet(), settings, None, plane)
    return engine


def _objects(cluster: Cluster, replica: FakeReplica) -> None:
    cluster.put("gatewayclass", {"metadata": _meta("ts", None), "spec": {"controllerName": CONTROLLER}})
    cluster.put(
        "gateway",
        {
            "metadata": _meta("gw"),
            "spec": {
                "gatewayClassName": "ts",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP", "hostname": "gw.example"}],
            },
        },
    )
    cluster.put(
        "trafficsplitpolicy",
        {
            "metadata": _meta("minimal"),
            "spec": {
                "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "web"}],
                "assignment": "minimal",
            },
        },
    )
    cluster.put("httproute", _route(RAMP[0], 1))
    for i, n in enumerate(NAMES):
        cluster.put("service", service_body(NS, n, "http", 80))
        cluster.put("endpointslice", slice_body(NS, n, "http", 8080, f"10.0.0.{i + 1}"))
    svc = publish_service_name(NS, "gw")
    cluster.put("service", service_body(OPNS, svc, "publish", 9443))
    cluster.put("endpointslice", slice_body(OPNS, svc, "publish", replica.port, "127.0.0.1"))


def _table(replica: FakeReplica) -> SlotTable | None:
    if replica.held_gen is None:
        return None
    split = next((s for s in generation_from_proto(replica.held_gen).splits if s.key == KEY), None)
    return split.table if split is not None else None


async def _lead(engine: Engine) -> asyncio.Task[None]:
    await engine.become_leader()
    engine.mark_ready()
    return asyncio.create_task(engine.run(), name="engine")


async def _stop(engine: Engine, task: asyncio.Task[None]) -> None:
    while not task.done():  # a cancel racing wait_for's own wake-up can be swallowed (Python 3.11): again
        task.cancel()
        await asyncio.wait([task], timeout=0.1)
    await engine.fleet.close()
    if engine.gateways is not None:
        await engine.gateways.close()


async def _change(cluster: Cluster, replica: FakeReplica, weights: Sequence[int], generation: int) -> SlotTable:
    cluster.put("httproute", _route(weights, generation))
    await until(lambda: cluster.accepted_at() == generation)
    table = _table(replica)
    assert table is not None and table.check(Weights(NAMES, tuple(weights))) == []
    return table


def test_a_restarted_gateway_engine_continues_the_held_table_and_rebuilds_with_an_event_without_one(
    tmp_path: Any,
) -> None:
    async def main() -> None:
        chart = await FakeReplica("chart").start()
        one = await FakeReplica("one").start()
        fresh = await FakeReplica("fresh").start()
        try:
            await _restarts(tmp_path, chart, one, fresh)
        finally:
            for r in (chart, one, fresh):
                if r.server is not None:
                    await r.stop()

    run(main)


async def _restarts(tmp_path: Any, chart: FakeReplica, one: FakeReplica, fresh: FakeReplica) -> None:
    cluster = Cluster()
    _objects(cluster, one)
    first = _engine(tmp_path, cluster, chart)
    cluster.load(first)
    task = await _lead(first)
    for generation, weights in enumerate(RAMP, start=1):
        advanced = await _change(cluster, one, weights, generation)
    assert advanced == _advanced() != fresh_table(Weights(NAMES, RAMP[-1]))
    await _stop(first, task)

    # A new operator: the replica keeps the advanced table, and the next change moves the minimum.
    second = _engine(tmp_path, cluster, chart)
    cluster.load(second)
    task = await _lead(second)
    held = one.held
    await until(lambda: one.held > held)  # its first generation, before any change
    assert _table(one) == advanced, "the restart alone moved sessions"
    after = await _change(cluster, one, NEXT, len(RAMP) + 1)
    assert after == advance(advanced, Weights(NAMES, NEXT))
    assert moved_share(advanced, after) == minimal_moved_share(Weights(NAMES, RAMP[-1]), Weights(NAMES, NEXT))
    assert cluster.events == []
    await _stop(second, task)

    # Another one, whose Gateway's replica was replaced by one holding nothing: rebuilt, and said on the route.
    svc = publish_service_name(NS, "gw")
    cluster.put("endpointslice", slice_body(OPNS, svc, "publish", fresh.port, "127.0.0.1"))
    third = _engine(tmp_path, cluster, chart)
    cluster.load(third)
    task = await _lead(third)
    await until(lambda: fresh.held > 0 and bool(cluster.events))
    assert _table(fresh) == fresh_table(Weights(NAMES, NEXT))
    [(kind, key, uid, event)] = cluster.events
    assert (kind, key, uid, event.type, event.reason) == (
        "httproute", (NS, "web"), "uid-web", "Warning", "AssignmentRebuilt"
    )  # fmt: skip
    assert event.message.startswith("rule 0: assignment is minimal (TrafficSplitPolicy) but no replica")
    await asyncio.sleep(0.5)  # more passes: the Event is posted once
    assert len(cluster.events) == 1
    await _stop(third, task)
