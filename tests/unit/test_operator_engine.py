"""The engine and fleet against in-process fake replicas (a grpc.aio Publisher on loopback): numbering, republish to
a restarted replica, refusal of older numbers, the token, and status written only on change."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest

from trafficsplit.core.control.resolve import SplitObject
from trafficsplit.core.control.status import StatusResult
from trafficsplit.operator.cluster import Replica
from trafficsplit.operator.engine import Engine, EngineSettings
from trafficsplit.operator.fleet import Fleet
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.v1alpha1 import publish_pb2_grpc as pb_grpc

TOKEN = "s3cret"


class FakeReplica(pb_grpc.PublisherServicer):  # type: ignore[misc]
    """Holds one generation; refuses older numbers; checks the bearer token, like the real extproc."""

    def __init__(self, name: str, held: int = 0) -> None:
        self.name = name
        self.held = held
        self.held_gen: pb.Generation | None = None
        self.published: list[int] = []
        self.bad_tokens = 0
        self.refuse = False  # answer INVALID, as a replica whose Envoy NACKs
        self.not_ready = 0  # answer NOT_READY this many more times, as a replica whose Envoy has not reconnected
        self.report_generation = True  # GetHeld carries the held generation (False: as a replica that predates it)
        self.asked_generation: list[bool] = []  # GetHeldRequest.with_generation of every GetHeld
        self.instance = "i-1"  # a new value: as a restarted process
        self.cookie_keys: bool | None = None  # reported capabilities (None: none, as a replica that predates them)
        self.refuse_splits: set[str] = set()  # split keys refused alone from an accepted generation
        self.refused: list[pb.SplitRefusal] = []
        self.server: grpc.aio.Server | None = None
        self.port = 0

    def _auth(self, context: Any) -> bool:
        md = dict(context.invocation_metadata())
        if md.get("authorization") != f"Bearer {TOKEN}":
            self.bad_tokens += 1
            return False
        return True

    def _reply(self, result: pb.PublishReply.Result, refused: list[pb.SplitRefusal] | None = None) -> pb.PublishReply:
        reply = pb.PublishReply(
            result=result, held_number=self.held, replica=self.name, instance=self.instance, refused=refused or []
        )
        if self.cookie_keys is not None:
            reply.capabilities.cookie_keys = self.cookie_keys
        return reply

    async def Publish(self, request: pb.PublishRequest, context: Any) -> pb.PublishReply:
        if not self._auth(context):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "bad token")
        n = request.generation.number
        self.published.append(n)
        if n <= self.held:
            return self._reply(pb.PublishReply.STALE)
        if self.refuse:
            return self._reply(pb.PublishReply.INVALID)
        if self.not_ready > 0:
            self.not_ready -= 1
            return self._reply(pb.PublishReply.NOT_READY)
        gen = pb.Generation()
        gen.CopyFrom(request.generation)
        keys = [f"{sp.namespace}/{sp.name}" for sp in gen.splits]
        self.refused = [
            pb.SplitRefusal(split=k, reason="Test", message="refused here") for k in keys if k in self.refuse_splits
        ]
        kept = [sp for sp, k in zip(gen.splits, keys, strict=True) if k not in self.refuse_splits]
        del gen.splits[:]
        gen.splits.extend(kept)
        self.held, self.held_gen = n, gen
        return self._reply(pb.PublishReply.ACCEPTED, self.refused)

    async def GetHeld(self, request: pb.GetHeldRequest, context: Any) -> pb.HeldReply:
        if not self._auth(context):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "bad token")
        reply = pb.HeldReply(held_number=self.held, replica=self.name, instance=self.instance, refused=self.refused)
        if self.cookie_keys is not None:
            reply.capabilities.cookie_keys = self.cookie_keys
        self.asked_generation.append(request.with_generation)
        if self.report_generation and request.with_generation and self.held_gen is not None:
            reply.generation.CopyFrom(self.held_gen)
        return reply

    async def start(self, port: int = 0) -> FakeReplica:
        self.server = grpc.aio.server()
        pb_grpc.add_PublisherServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        await self.server.start()
        return self

    async def stop(self) -> None:
        assert self.server is not None
        await self.server.stop(None)
        self.server = None  # stopped: `started` (and the gateway tests' shutdown) leave it alone

    @property
    def replica(self) -> Replica:
        return Replica(self.name, f"127.0.0.1:{self.port}")


async def until(pred: Callable[[], bool], timeout: float = 20.0) -> None:
    """Wait for `pred`; `timeout` only bounds a failure (a loaded CI machine is slow, never a reason to fail), so it is
    generous and nothing may rely on it as a measurement."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


def body(name: str, weights: tuple[int, int], generation: int = 1) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"u-{name}",
            "generation": generation,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "hosts": [f"{name}.example"],
            "backends": [
                {"name": "blue", "weight": weights[0], "endpoints": ["127.0.0.1:1"]},
                {"name": "green", "weight": weights[1], "endpoints": ["127.0.0.1:2"]},
            ],
        },
    }


def run(coro_fn: Callable[[], Awaitable[None]]) -> None:
    """A test's coroutine, bounded well above its `until` waits (a bound for a hang, not a measurement)."""
    asyncio.run(asyncio.wait_for(coro_fn(), 120))


@contextlib.asynccontextmanager
async def started(*replicas: FakeReplica, port: int = 0) -> AsyncIterator[tuple[FakeReplica, ...]]:
    """The replicas serving (on `port`: a restarted replica's address); each one still serving is stopped on the way
    out, whatever happened (a grpc server left running keeps the loop from closing)."""
    try:
        for r in replicas:
            await r.start(port)
        yield replicas
    finally:
        for r in replicas:
            if r.server is not None:
                await r.stop()


@contextlib.asynccontextmanager
async def running(engine: Engine, *, lead: bool = True, probe_timeout: float = 3.0) -> AsyncIterator[None]:
    """The engine leading (unless `lead` is False: the test takes the lead itself later), ready and running; on the
    way out its task cancelled and its fleet closed."""
    if lead:
        await engine.become_leader(probe_timeout=probe_timeout)
    engine.mark_ready()
    task = asyncio.create_task(engine.run(), name="engine")
    try:
        yield
    finally:
        task.cancel()
        await engine.fleet.close()


def make_engine(
    tmp_path: Any,
    replicas: list[FakeReplica],
    sink: Any = None,
    *,
    static: bool = True,
    gateway: tuple[str, str] | None = None,
) -> Engine:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    engine: Engine | None = None

    def changed() -> None:
        if engine is not None:
            engine.poke()

    fleet = Fleet(str(token), timeout=2, poll_interval=0.1, changed=changed)
    settings = EngineSettings(
        origin="test",
        debounce=0.0,
        static_replicas=tuple(r.replica for r in replicas),
        gateway=gateway,
        static=static,
    )
    engine = Engine(fleet, settings, sink)
    return engine


def test_numbers_continue_above_what_replicas_hold_and_only_grow(tmp_path: Any) -> None:
    async def main() -> None:
        async with started(FakeReplica("a", held=41), FakeReplica("b", held=7)) as (a, b):
            engine = make_engine(tmp_path, [a, b])
            engine.store.apply("trafficsplit", None, body("s", (100, 0)))
            async with running(engine):
                await until(lambda: a.held == 42 and b.held == 42)
                engine.apply("trafficsplit", "MODIFIED", body("s", (0, 100), generation=2))
                await until(lambda: a.held == 43 and b.held == 43)
                assert a.held_gen is not None and [x.weight for x in a.held_gen.splits[0].backends] == [0, 100]
                # A pass with unchanged content takes no new number.
                passes = engine.passes
                engine.apply("trafficsplit", "MODIFIED", body("s", (0, 100), generation=2))
                await until(lambda: engine.passes > passes)
                await asyncio.sleep(0.3)
                assert a.held == 43 and a.published.count(44) == 0
                assert a.bad_tokens == 0

    run(main)


def test_restarted_replica_is_republished_at_once(tmp_path: Any) -> None:
    async def main() -> None:
        async with started(FakeReplica("a")) as (a,):
            engine = make_engine(tmp_path, [a])
            engine.store.apply("trafficsplit", None, body("s", (1, 1)))
            async with running(engine):
                await until(lambda: a.held == 1)
                port = a.port
                await a.stop()
                # Same address, holds nothing, as a restarted container.
                async with started(FakeReplica("a"), port=port) as (fresh,):
                    # At once: on the fleet's next poll, not on the next change or the engine's 60-s resync (no
                    # change follows; the wait's bound is well inside the resync).
                    await until(lambda: fresh.held == 1, timeout=20)

    run(main)


def test_renumbers_above_a_higher_number_reported_stale(tmp_path: Any) -> None:
    async def main() -> None:
        async with started(FakeReplica("a")) as (a,):
            engine = make_engine(tmp_path, [a])
            engine.store.apply("trafficsplit", None, body("s", (1, 1)))
            async with running(engine):
                await until(lambda: a.held == 1)
                a.held = 100  # someone else (a previous leader) published 100 meanwhile
                engine.apply("trafficsplit", "MODIFIED", body("s", (2, 1), generation=2))
                await until(lambda: a.held == 101)

    run(main)


def published_condition(writes: list[tuple[str, StatusResult]], key: str | None = None) -> str | None:
    """The Published condition (`status message`) of the last status written (for `key`, when given)."""
    for k, r in reversed(writes):
        if key is None or k == key:
            c = next(c for c in r.status.to_dict()["conditions"] if c["type"] == "Published")
            return f"{c['status']} {c['message']}"
    return None


def test_status_written_on_change_only_with_published_count(tmp_path: Any) -> None:
    writes: list[tuple[str, StatusResult]] = []

    async def sink(obj: SplitObject, result: StatusResult) -> None:
        writes.append((obj.key, result))

    async def main() -> None:
        async with started(FakeReplica("a"), FakeReplica("b")) as (a, b):
            engine = make_engine(tmp_path, [a, b], sink)
            engine.store.apply("trafficsplit", None, body("s", (1, 1)))
            async with running(engine):
                await until(lambda: published_condition(writes) == "True 2/2 dataplanes")
                n = len(writes)
                engine.poke()
                await asyncio.sleep(0.3)
                assert len(writes) == n  # nothing changed, nothing written
                await b.stop()
                engine.apply("trafficsplit", "MODIFIED", body("s", (3, 1), generation=2))
                await until(lambda: published_condition(writes) == "False 1/2 dataplanes; behind: b")

    run(main)


def test_a_change_to_one_split_writes_only_its_status(tmp_path: Any) -> None:
    """With many splits, each flip used to rewrite every split's status (status.generation followed the newest number),
    and the writes of one pass delay the next pass: 1,000 writes per flip at 1,000 splits. status.generation is the
    first number carrying the split's current spec, so an unchanged split's status stays as it is."""
    writes: list[tuple[str, StatusResult]] = []

    async def sink(obj: SplitObject, result: StatusResult) -> None:
        writes.append((obj.key, result))

    def last(key: str) -> StatusResult | None:
        return next((r for k, r in reversed(writes) if k == key), None)

    # Published=True only: a "False"/"Unknown" condition is a non-empty string too, and passing on one (the publish
    # still on its way) read the replica's number before it held anything (flaky under load).
    def published(key: str, generation: int) -> bool:
        r = last(key)
        return r is not None and any(
            c.type == "Published" and c.ok and c.observed_generation == generation for c in r.status.conditions
        )

    async def main() -> None:
        async with started(FakeReplica("a")) as (a,):
            engine = make_engine(tmp_path, [a], sink)
            engine.store.apply("trafficsplit", None, body("s", (100, 0)))
            engine.store.apply("trafficsplit", None, body("t", (100, 0)))
            async with running(engine):
                await until(lambda: published("default/s", 1) and published("default/t", 1))
                t_writes = sum(k == "default/t" for k, _ in writes)
                first = a.held
                engine.apply("trafficsplit", "MODIFIED", body("s", (0, 100), generation=2))
                await until(lambda: published("default/s", 2))
                await asyncio.sleep(0.3)
                assert a.held > first
                s_status, t_status = last("default/s"), last("default/t")
                assert s_status is not None and s_status.status.generation == a.held  # the number carrying the change
                assert t_status is not None and t_status.status.generation == first  # still carried since `first`
                assert sum(k == "default/t" for k, _ in writes) == t_writes  # t's status was not rewritten
                # The publish carries each split's first number, so the dataplane keeps t's Envoy virtual host.
                assert a.held_gen is not None
                assert {x.name: x.first_generation for x in a.held_gen.splits} == {"s": a.held, "t": first}

    run(main)


@pytest.mark.parametrize("token", ["", "wrong"])
def test_wrong_token_never_counts_as_published(tmp_path: Any, token: str) -> None:
    async def main() -> None:
        async with started(FakeReplica("a")) as (a,):
            engine = make_engine(tmp_path, [a])
            (tmp_path / "token").write_text(token)
            engine.store.apply("trafficsplit", None, body("s", (1, 1)))
            async with running(engine, probe_timeout=0.5):
                await until(lambda: a.bad_tokens >= 2)
                assert a.held == 0 and engine.fleet.acks()[0].acked == 0

    run(main)


def test_unrelated_services_and_slices_trigger_no_pass(tmp_path: Any) -> None:
    engine = make_engine(tmp_path, [], gateway=("ts-system", "gw-publish"))
    split = body("s", (1, 1))
    split["spec"]["backends"][0]["service"] = "shop-blue"
    engine.apply("trafficsplit", None, split)

    def pokes(kind: str, ns: str, name: str, label: str | None = None) -> bool:
        engine._dirty.clear()
        meta: dict[str, Any] = {"namespace": ns, "name": name}
        if label is not None:
            meta["labels"] = {"kubernetes.io/service-name": label}
        engine.apply(kind, "MODIFIED", {"metadata": meta})
        return engine._dirty.is_set()

    assert pokes("service", "default", "shop-blue")
    assert pokes("service", "default", "green")  # a backend without `service` names its Service by its name
    assert pokes("endpointslice", "default", "shop-blue-x1", label="shop-blue")
    assert pokes("endpointslice", "ts-system", "gw-publish-x1", label="gw-publish")
    assert not pokes("service", "default", "unrelated")
    assert not pokes("service", "other", "shop-blue")
    assert not pokes("endpointslice", "default", "unrelated-x1", label="unrelated")
    assert ("default", "unrelated") in engine.store.services  # still stored for a split that names it later


# --- a restarted (or newly leading) operator never publishes a worse form than the replicas hold ---------------------


def svc_body(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
    }


def slice_body(service: str, address: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{service}-x", "namespace": "default", "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
    }


def k8s_split(status: dict[str, Any] | None = None, weight: int = 100) -> dict[str, Any]:
    b = body("s", (0, weight))
    for x in b["spec"]["backends"]:
        del x["endpoints"]
    b["status"] = status or {}
    return b


def k8s_engine(tmp_path: Any, replicas: list[FakeReplica], split: dict[str, Any], green: bool) -> Engine:
    engine = make_engine(tmp_path, replicas, static=False)
    engine.store.apply("trafficsplit", None, split)
    for name, addr in (("blue", "10.0.0.1"), ("green", "10.0.0.2")):
        if name == "green" and not green:
            continue
        engine.store.apply("service", None, svc_body(name))
        engine.store.apply("endpointslice", None, slice_body(name, addr))
    return engine


def green_endpoints(r: FakeReplica) -> list[str]:
    assert r.held_gen is not None
    (split,) = r.held_gen.splits
    return [e.address for b in split.backends if b.name == "green" for e in b.endpoints]


@pytest.mark.parametrize("leading_at_start", [True, False])
def test_without_a_held_form_to_seed_from_an_operator_keeps_what_the_replicas_hold(
    tmp_path: Any, leading_at_start: bool
) -> None:
    """The fallback. Blue-green at 0/100: the green Service goes missing while no operator runs (or while this one
    stands by), and the replica does not report the generation it holds (an older dataplane), so there is nothing to
    seed the last good form from. The replicas serve green's endpoints; a generation with green emptied would leave the
    host with no eligible backend. Nothing is published until green resolves again; then publishing resumes above the
    held number."""

    async def main() -> None:
        async with started(FakeReplica("a")) as (a,):
            async with running(k8s_engine(tmp_path, [a], k8s_split(), green=True)):
                await until(lambda: a.held == 1)
                assert green_endpoints(a) == ["10.0.0.2"]

            # The status the first operator wrote says the split is in generation 1.
            a.report_generation = False
            engine = k8s_engine(tmp_path, [a], k8s_split({"generation": 1}), green=False)
            async with running(engine, lead=leading_at_start):
                await until(lambda: engine.passes >= 1)
                if not leading_at_start:
                    await engine.become_leader()  # a take-over after the standby compiled with green missing
                passes = engine.passes
                engine.poke()
                await until(lambda: engine.passes > passes)
                await asyncio.sleep(0.3)
                assert a.held == 1 and green_endpoints(a) == ["10.0.0.2"]
                # green comes back: publishing resumes, above the held number.
                engine.apply("service", None, svc_body("green"))
                engine.apply("endpointslice", None, slice_body("green", "10.0.0.3"))
                await until(lambda: a.held == 2)
                assert green_endpoints(a) == ["10.0.0.3"]

    run(main)


def test_a_new_split_with_a_missing_service_is_published_and_follows_its_resolved_endpoints(tmp_path: Any) -> None:
    """A split that was never published (no status.generation) is not held back: its resolved backends serve, and
    their endpoint changes keep being published while the other backend stays unresolved."""

    async def main() -> None:
        async with started(FakeReplica("a")) as (a,):
            engine = k8s_engine(tmp_path, [a], k8s_split(weight=1), green=False)
            async with running(engine):
                await until(lambda: a.held == 1)
                assert green_endpoints(a) == []
                engine.apply("endpointslice", "MODIFIED", slice_body("blue", "10.0.0.9"))
                await until(lambda: a.held == 2)
                assert a.held_gen is not None
                assert [e.address for e in a.held_gen.splits[0].backends[0].endpoints] == ["10.0.0.9"]

    run(main)


def test_a_recreated_split_is_not_published_until_a_generation_carrying_it_is_acknowledged(tmp_path: Any) -> None:
    writes: list[tuple[str, StatusResult]] = []

    async def sink(obj: SplitObject, result: StatusResult) -> None:
        writes.append((obj.uid, result))

    async def main() -> None:
        async with started(FakeReplica("a")) as (a,):
            engine = make_engine(tmp_path, [a], sink)
            engine.store.apply("trafficsplit", None, body("s", (1, 1)))
            async with running(engine):
                await until(lambda: published_condition(writes, "u-s") == "True 1/1 dataplanes")
                engine.apply("trafficsplit", "DELETED", body("s", (1, 1)))
                a.refuse = True  # the next generations never reach the replica
                again = body("s", (3, 1))
                again["metadata"]["uid"] = "u-s2"  # the same name, a new object, metadata.generation 1 again
                engine.apply("trafficsplit", "ADDED", again)
                await until(lambda: published_condition(writes, "u-s2") is not None)
                await asyncio.sleep(0.3)
                assert published_condition(writes, "u-s2") == "False 0/1 dataplanes; behind: a"
                # A refused number is offered again only after a backoff (its Envoy would likely refuse it again).
                assert len(a.published) <= len(set(a.published)) + 1, a.published

    run(main)


def test_a_split_deleted_and_created_again_within_the_second_gets_its_status(tmp_path: Any, monkeypatch: Any) -> None:
    """The same name, the same spec, the same second: the new object's status is the very body last written for the
    old one, and skipping it as "already written" left the new object without status. What was written is
    remembered per object (uid)."""
    from trafficsplit.operator import engine as engine_module

    monkeypatch.setattr(engine_module, "now_rfc3339", lambda: "2026-12-02T04:00:00Z")
    writes: list[str] = []

    async def sink(obj: SplitObject, result: StatusResult) -> None:
        writes.append(obj.uid)

    async def main() -> None:
        async with started(FakeReplica("a")) as (a,):
            engine = make_engine(tmp_path, [a], sink)
            engine.store.apply("trafficsplit", None, body("s", (1, 1)))
            async with running(engine):
                await until(lambda: "u-s" in writes)
                await asyncio.sleep(0.3)
                # Deleted and created again between two passes (the watch events arrive together).
                engine.store.apply("trafficsplit", "DELETED", body("s", (1, 1)))
                again = body("s", (1, 1))
                again["metadata"]["uid"] = "u-s2"
                engine.apply("trafficsplit", "ADDED", again)
                await until(lambda: "u-s2" in writes)

    run(main)


def other_split(weights: tuple[int, int], generation: int = 1, status: dict[str, Any] | None = None) -> dict[str, Any]:
    """A second split whose backends both resolve through the blue Service."""
    b = body("b", weights, generation)
    b["metadata"]["creationTimestamp"] = "2026-01-02T00:00:00Z"
    for x in b["spec"]["backends"]:
        del x["endpoints"]
        x["service"] = "blue"
    b["status"] = status or {}
    return b


def held_split(r: FakeReplica, name: str) -> pb.Split:
    assert r.held_gen is not None
    return next(s for s in r.held_gen.splits if s.name == name)


@pytest.mark.parametrize("leading_at_start", [True, False])
def test_a_restarted_operator_seeds_from_the_replicas_and_keeps_publishing_other_changes(
    tmp_path: Any, leading_at_start: bool
) -> None:
    """Blue-green at 0/100: the green Service goes missing while no operator runs (or while this one stands by). The
    replica reports the generation it holds; the restarted operator takes split s's form from it as last good, so s
    keeps green's endpoints, and a change to split b made meanwhile is published (no hold-back)."""

    async def main() -> None:
        async with started(FakeReplica("a")) as (a,):
            first = k8s_engine(tmp_path, [a], k8s_split(), green=True)
            first.store.apply("trafficsplit", None, other_split((1, 1)))
            async with running(first):
                await until(lambda: a.held == 1)
                assert green_endpoints_of(a, "s") == ["10.0.0.2"]

            engine = k8s_engine(tmp_path, [a], k8s_split({"generation": 1}), green=False)
            engine.store.apply("trafficsplit", None, other_split((3, 1), generation=2, status={"generation": 1}))
            async with running(engine, lead=leading_at_start):
                await _seeded(engine, a, leading_at_start)

    run(main)


async def _seeded(engine: Engine, a: FakeReplica, leading_at_start: bool) -> None:
    await until(lambda: engine.passes >= 1)
    if not leading_at_start:
        await engine.become_leader()
        engine.poke()
    # b's change is published, and s keeps the replica's form (green's endpoints, not emptied).
    await until(lambda: a.held == 2)
    assert [x.weight for x in held_split(a, "b").backends] == [3, 1]
    assert green_endpoints_of(a, "s") == ["10.0.0.2"]
    assert [x.weight for x in held_split(a, "s").backends] == [0, 100]
    assert engine.view().held_back == frozenset()
    # Only the probe asks for the generation; the periodic poll needs only the number.
    await until(lambda: a.asked_generation.count(False) >= 2)
    assert a.asked_generation[0] and a.asked_generation.count(True) == 2  # once per engine
    # Later changes keep being published while green is still missing; s stays on its seeded form.
    engine.apply("trafficsplit", "MODIFIED", other_split((1, 3), generation=3, status={"generation": 2}))
    await until(lambda: a.held == 3)
    assert [x.weight for x in held_split(a, "b").backends] == [1, 3]
    assert green_endpoints_of(a, "s") == ["10.0.0.2"]


def green_endpoints_of(r: FakeReplica, name: str) -> list[str]:
    return [e.address for b in held_split(r, name).backends if b.name == "green" for e in b.endpoints]


def test_a_replica_not_ready_is_retried_with_the_same_generation_and_one_that_refuses_only_with_backoff(
    tmp_path: Any,
) -> None:
    async def main() -> None:
        ready_late, refusing = FakeReplica("a"), FakeReplica("b")
        ready_late.not_ready = 3
        refusing.refuse = True
        async with started(ready_late, refusing):
            engine = make_engine(tmp_path, [ready_late, refusing])
            engine.store.apply("trafficsplit", None, body("s", (1, 1)))
            async with running(engine):
                # Backoff 0.25 s doubling, jittered down to half: three retries within about 2 s.
                await until(lambda: ready_late.held == 1, timeout=10)
                assert ready_late.published == [1, 1, 1, 1]
                await asyncio.sleep(1.0)
                # INVALID is retried, slowly: 1 s doubling, jittered down to half (retries at >= 0.5 s, >= 1.5 s,
                # >= 3.5 s).
                assert set(refusing.published) == {1} and 2 <= len(refusing.published) <= 4, refusing.published

    run(main)


async def _cancelled_within(task: asyncio.Task[Any], seconds: float) -> bool:
    """Whether `task` ends cancelled within `seconds` of this call (it has been cancelled already)."""
    try:
        await asyncio.wait_for(asyncio.shield(task), seconds)
    except asyncio.CancelledError:
        return True
    except TimeoutError:
        task.cancel()  # once more, so the loop can close: the first one was lost
        return False
    return False


def test_a_cancel_that_arrives_with_a_wake_up_stops_the_loops(tmp_path: Any) -> None:
    """The engine's loop and a replica worker wait for a wake-up with a timeout. A cancel that lands in the loop
    iteration where the wake-up fires must still stop them: Python 3.11's asyncio.wait_for returns the inner result
    then and drops the cancel (CPython gh-86296), so the engine ran on and the operator's shutdown (and a test's
    cleanup, seen here under load) waited forever."""

    async def main() -> None:
        engine = make_engine(tmp_path, [])
        engine.mark_ready()
        task = asyncio.create_task(engine.run(resync=60.0), name="engine")
        await asyncio.sleep(0.05)  # the loop waits for a poke
        engine.poke()
        await asyncio.sleep(0)  # the poke wakes the wait, and the cancel arrives in that same iteration
        task.cancel()
        assert await _cancelled_within(task, 2.0), "the engine's loop swallowed its cancel"

        async with started(FakeReplica("a")) as (a,):
            engine = make_engine(tmp_path, [a])
            await engine.become_leader(probe_timeout=3.0)
            worker = next(iter(engine.fleet._workers.values()))
            await asyncio.sleep(0.3)  # idle between polls
            worker.wake.set()
            await asyncio.sleep(0)
            worker.task.cancel()
            assert await _cancelled_within(worker.task, 2.0), "the replica worker swallowed its cancel"
            await engine.fleet.close()

    run(main)
