"""status.assignment is verified, not trusted: a restarted (or newly leading) operator adopts a stored slot table only
when it is the one it wrote for this object (its digest binds the table to the split's uid, backends and weights) and
its counts are the quotas of the weights stored with it. Anything else (reversed runs, swapped names, a foreign
backend list, another object's table, junk) is refused: the table continues from the dataplanes' copy, or is rebuilt
from the weights, with an AssignmentRebuilt Warning that says what moved. A stored value is read once per change, not
once per pass, and junk is refused before it is parsed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.unit.test_operator_engine import FakeReplica, make_engine, run, until
from trafficsplit.core.control.reconcile import desired_state
from trafficsplit.core.control.resolve import SplitObject
from trafficsplit.core.control.status import EventIntent, PublishView, ReplicaAck, StatusResult, compute_status, percent
from trafficsplit.core.model.assignment import SlotTable, advance, fresh_table, minimal_moved_share, moved_share
from trafficsplit.core.model.compiled import CompiledSplit
from trafficsplit.core.model.hashing import key_hash
from trafficsplit.core.model.vocabulary import EventReason, EventType
from trafficsplit.core.model.weights import Weights
from trafficsplit.operator.cluster import split_from_body

NOW = "2026-12-01T00:00:00Z"
VIEW = PublishView(number=5, replicas=(ReplicaAck("gw-0", 5),))
W1 = {"a": 40, "b": 40, "c": 20}
W2 = {"a": 30, "b": 40, "c": 30}  # changed while no operator ran
JUNK = "9x9," * 22_500  # 90 KB of runs that never parse: the CRD let it through


def spec(weights: dict[str, int], assignment: str = "minimal") -> dict[str, Any]:
    return {
        "hosts": ["shop.example"],
        "assignment": assignment,
        "sticky": {"cookie": {"name": "sid"}},
        "backends": [
            {"name": n, "weight": w, "endpoints": [f"10.0.0.{i + 1}:80"]} for i, (n, w) in enumerate(weights.items())
        ],
    }


def obj(weights: dict[str, int], generation: int, status: dict[str, Any], uid: str = "uid-1") -> SplitObject:
    return SplitObject(
        namespace="shop",
        name="web",
        uid=uid,
        generation=generation,
        created="2026-01-01T00:00:00Z",
        spec=spec(weights),
        status=status,
    )


def one_pass(
    o: SplitObject, last_good: dict[str, CompiledSplit], held: dict[str, SlotTable] | None = None
) -> tuple[CompiledSplit, dict[str, Any], tuple[EventIntent, ...]]:
    d = desired_state([o], {}, {}, last_good, static=True, held_tables=held)
    outcome = d.outcomes[o.key]
    assert outcome.served is not None and outcome.served.table is not None
    result = compute_status(o, outcome, VIEW, NOW)
    return outcome.served, result.status.to_dict(), result.events


def reversed_runs(a: dict[str, Any]) -> dict[str, Any]:
    return {**a, "runs": ",".join(reversed(a["runs"].split(",")))}


def swapped_names(a: dict[str, Any]) -> dict[str, Any]:
    b = list(a["backends"])
    b[0], b[1] = b[1], b[0]
    return {**a, "backends": b}


def foreign_backends(a: dict[str, Any]) -> dict[str, Any]:
    return {**a, "backends": ["x", "y", "z"]}


def junk(a: dict[str, Any]) -> dict[str, Any]:
    return {**a, "runs": JUNK}


TAMPER: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "reversed runs": reversed_runs,
    "swapped names": swapped_names,
    "foreign backend list": foreign_backends,
    "90 KB junk": junk,
}


def written_status(weights: dict[str, int], uid: str = "uid-1") -> tuple[SlotTable, dict[str, Any]]:
    """The table and status an operator writes for a split first published with `weights`."""
    served, status, _ = one_pass(obj(weights, 1, {}, uid), {})
    assert served.table is not None
    return served.table, status


def rebuilt(events: tuple[EventIntent, ...]) -> list[EventIntent]:
    return [e for e in events if e.reason is EventReason.ASSIGNMENT_REBUILT and e.type is EventType.WARNING]


def sessions_moved(before: SlotTable, after: SlotTable, n: int = 20_000) -> float:
    """The share of `n` session keys whose backend differs between two tables, decided as the dataplane decides."""
    keys = (key_hash(f"session-{i}") for i in range(n))
    return sum(before.names[before.owner_index(h)] != after.names[after.owner_index(h)] for h in keys) / n


@pytest.mark.parametrize("kind", [*TAMPER, "another object's table"])
def test_a_tampered_table_is_refused_and_the_dataplanes_copy_continues_with_the_warning(kind: str) -> None:
    t1, status = written_status(W1)
    if kind == "another object's table":  # a valid table, digest and all, of another split (another history)
        _, other_status = written_status({"a": 10, "b": 10, "c": 80}, uid="uid-2")
        _, other_status, _ = one_pass(obj(W1, 2, other_status, uid="uid-2"), {})
        tampered = {**status, "assignment": other_status["assignment"]}
    else:
        tampered = {**status, "assignment": TAMPER[kind](status["assignment"])}
    # A new operator: nothing in memory; the dataplanes hold t1; the weights changed meanwhile.
    served, after, events = one_pass(obj(W2, 2, tampered), {}, {"shop/web": t1})
    assert served.table == advance(t1, Weights.of(W2.items())), "the stored table was adopted"
    moved = moved_share(t1, served.table)
    # What the rebuild says is what moved: the planner's minimal figure, slot for slot and session for session.
    assert moved == minimal_moved_share(Weights.of(W1.items()), Weights.of(W2.items()))
    assert sessions_moved(t1, served.table) == pytest.approx(float(moved), abs=0.01)
    (warning,) = rebuilt(events)
    assert "status.assignment" in warning.message and f"{percent(moved)} of sessions moved" in warning.message
    assert after["displacement"]["repinnedShare"] == percent(moved)
    # The status written back is the served table, and the next operator adopts it (no warning).
    again, _, events = one_pass(obj(W2, 2, after), {})
    assert again.table == served.table and not rebuilt(events)


@pytest.mark.parametrize("kind", TAMPER)
def test_with_no_other_copy_a_refused_table_is_rebuilt_from_the_weights_with_the_warning(kind: str) -> None:
    _, status = written_status(W1)
    tampered = {**status, "assignment": TAMPER[kind](status["assignment"])}
    served, _, events = one_pass(obj(W2, 2, tampered), {})
    assert served.table == fresh_table(Weights.of(W2.items()))
    (warning,) = rebuilt(events)
    assert "status.assignment" in warning.message and "up to 100% of sessions moved" in warning.message


def test_an_untampered_table_is_adopted_without_a_warning() -> None:
    t1, status = written_status(W1)
    served, _, events = one_pass(obj(W2, 2, status), {})
    assert served.table == advance(t1, Weights.of(W2.items())) and not rebuilt(events)


def test_a_table_stored_before_the_digest_is_refused_once_and_the_dataplanes_copy_moves_nothing() -> None:
    """An upgrade: the previous operator stored slots, backends and runs only. The new one refuses it (no digest),
    continues the dataplanes' copy, says 0.00% moved, and writes the table back with its digest."""
    t1, status = written_status(W1)
    legacy = {k: v for k, v in status["assignment"].items() if k in ("slots", "backends", "runs")}
    served, after, events = one_pass(obj(W1, 1, {**status, "assignment": legacy}), {}, {"shop/web": t1})
    assert served.table == t1
    (warning,) = rebuilt(events)
    assert "status.assignment.digest" in warning.message and "0.00% of sessions moved" in warning.message
    assert SlotTable.from_status(after["assignment"], "uid-1") == t1


# --- the engine: 200 tampered splits, each stored value read once ----------------------------------------------------


def split_body(i: int, status: dict[str, Any], assignment: str) -> dict[str, Any]:
    s = spec(W2, assignment)
    s["hosts"] = [f"s{i}.example"]
    return {
        "metadata": {
            "name": f"s{i}",
            "namespace": "default",
            "uid": f"u-{i}",
            "generation": 2,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": s,
        "status": status,
    }


def test_200_tampered_splits_are_each_read_once_however_many_passes(tmp_path: Any, monkeypatch: Any) -> None:
    """100 `minimal` splits with a tampered status.assignment (25 of each kind) and 100 `hash` splits carrying 90 KB
    of junk there. Three passes standing by, then two leading: each minimal split's stored value is read once, the
    hash splits' never (they have no table to continue), and every minimal split is rebuilt with its Warning."""
    bodies = []
    for i in range(200):
        if i < 100:
            body = split_body(i, {}, "minimal")
            body["metadata"]["generation"], body["spec"] = 1, {**spec(W1), "hosts": [f"s{i}.example"]}
            o = split_from_body(body)
            d = desired_state([o], {}, {}, {}, static=True)
            status = compute_status(o, d.outcomes[o.key], VIEW, NOW).status.to_dict()
            kind = list(TAMPER)[i % 4]
            bodies.append(split_body(i, {**status, "assignment": TAMPER[kind](status["assignment"])}, "minimal"))
        else:
            status = {"generation": 1, "assignment": {"slots": 10_000, "backends": ["a", "b", "c"], "runs": JUNK}}
            bodies.append(split_body(i, status, "hash"))

    reads = [0]
    original = SlotTable.from_status.__func__  # type: ignore[attr-defined]

    def counting(cls: type[SlotTable], *args: Any, **kwargs: Any) -> Any:
        reads[0] += 1
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(SlotTable, "from_status", classmethod(counting))
    written: list[tuple[SplitObject, StatusResult]] = []

    async def sink(o: SplitObject, result: StatusResult) -> None:
        written.append((o, result))

    async def main() -> None:
        replica = await FakeReplica("a").start()
        engine = make_engine(tmp_path, [replica], sink)
        for b in bodies:
            engine.store.apply("trafficsplit", None, b)
        for _ in range(3):
            await engine.run_pass()  # standing by
        await engine.become_leader()
        for _ in range(2):
            await engine.run_pass()
        await until(lambda: replica.held == engine.number)  # closing the fleet mid-publish would wait for it
        await engine.fleet.close()
        await replica.stop()

    run(main)
    # Once per stored value: the 75 edited tables are parsed once each; the 25 junk ones are refused by their length
    # before any parsing, and the 100 hash splits' status.assignment is never read.
    assert reads[0] == 75
    fresh = fresh_table(Weights.of(W2.items()))
    warned = {o.key for o, r in written if rebuilt(r.events)}
    assert warned == {f"default/s{i}" for i in range(100)}
    tables = {
        o.key: SlotTable.from_status(r.status.to_dict()["assignment"], o.uid) for o, r in written if o.key in warned
    }
    assert all(t == fresh for t in tables.values())


@pytest.mark.parametrize("leading_at_start", [True, False])
def test_a_restarted_or_new_leader_continues_the_dataplanes_table_not_a_tampered_status(
    tmp_path: Any, leading_at_start: bool
) -> None:
    """Through the engine and a replica: operator 1 publishes W1 (the replica holds t1) and writes status; the status's
    runs are reversed and the weights change to W2 while no operator runs. Operator 2, leading at once or standing by
    first (a take-over), publishes advance(t1, W2), the same table an operator that never stopped would, and says
    what moved."""
    written: list[tuple[SplitObject, StatusResult]] = []

    async def sink(o: SplitObject, result: StatusResult) -> None:
        written.append((o, result))

    async def main() -> None:
        replica = await FakeReplica("a").start()
        first = make_engine(tmp_path, [replica], sink)
        body = split_body(0, {}, "minimal")
        body["metadata"]["generation"], body["spec"] = 1, {**spec(W1), "hosts": ["s0.example"]}
        first.store.apply("trafficsplit", None, body)
        await first.become_leader()
        await first.run_pass()
        await until(lambda: replica.held == first.number)
        await first.fleet.close()
        (_, result), *_ = written
        status = result.status.to_dict()
        t1 = SlotTable.from_status(status["assignment"], "u-0")

        second = make_engine(tmp_path, [replica], sink)
        second.store.apply(
            "trafficsplit",
            None,
            split_body(0, {**status, "assignment": reversed_runs(status["assignment"])}, "minimal"),
        )
        if not leading_at_start:
            for _ in range(2):
                await second.run_pass()  # standing by: no dataplanes' copy to continue from
        await second.become_leader()
        await second.run_pass()
        await until(lambda: replica.held == second.number)
        await second.fleet.close()
        await replica.stop()
        assert replica.held_gen is not None
        (held,) = replica.held_gen.splits
        expected = advance(t1, Weights.of(W2.items()))
        assert [(r.owner, r.length) for r in expected.runs] == list(
            zip(held.assignment.owners, held.assignment.lengths, strict=True)
        )
        (_, last) = written[-1]
        (warning,) = rebuilt(last.events)
        assert f"{percent(moved_share(t1, expected))} of sessions moved" in warning.message
        assert SlotTable.from_status(last.status.to_dict()["assignment"], "u-0") == expected

    run(main)
