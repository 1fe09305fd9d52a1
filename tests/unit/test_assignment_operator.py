"""spec.assignment: minimal through the operator's pure layers: the table survives a restart through status, a lost
table is rebuilt and said so, and the publish proto carries the table the receiver checks."""

from __future__ import annotations

from typing import Any

import pytest

from trafficsplit.core.control.reconcile import desired_state
from trafficsplit.core.control.resolve import SplitObject
from trafficsplit.core.control.status import PublishView, ReplicaAck, compute_status
from trafficsplit.core.model.assignment import SlotTable, advance, moved_share
from trafficsplit.core.model.compiled import CompiledSplit
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.vocabulary import EventReason, EventType
from trafficsplit.core.model.weights import Weights
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto

NOW = "2026-12-01T00:00:00Z"
VIEW = PublishView(number=5, replicas=(ReplicaAck("gw-0", 5),))


def obj(weights: dict[str, int], generation: int, status: dict[str, Any]) -> SplitObject:
    spec = {
        "hosts": ["shop.example"],
        "assignment": "minimal",
        "sticky": {"cookie": {"name": "sid"}},
        "backends": [
            {"name": n, "weight": w, "endpoints": [f"10.0.0.{i + 1}:80"]} for i, (n, w) in enumerate(weights.items())
        ],
    }
    return SplitObject(
        namespace="shop",
        name="web",
        uid="uid-1",
        generation=generation,
        created="2026-01-01T00:00:00Z",
        spec=spec,
        status=status,
    )


def one_pass(
    o: SplitObject, last_good: dict[str, CompiledSplit], held: dict[str, SlotTable] | None = None
) -> tuple[CompiledSplit, dict[str, Any], Any]:
    d = desired_state([o], {}, {}, last_good, static=True, held_tables=held)
    outcome = d.outcomes[o.key]
    assert outcome.served is not None and outcome.served.table is not None
    result = compute_status(o, outcome, VIEW, NOW)
    return outcome.served, result.status.to_dict(), result.events


def test_a_restart_between_two_changes_keeps_the_assignment() -> None:
    first, status, _ = one_pass(obj({"a": 50, "b": 30, "c": 20}, 1, {}), {})
    # One operator keeps going (its last good form); another starts fresh and has only the status it wrote.
    kept, _, _ = one_pass(obj({"a": 40, "b": 30, "c": 30}, 2, status), {first.key: first})
    restarted, status2, events = one_pass(obj({"a": 40, "b": 30, "c": 30}, 2, status), {})
    assert kept.table is not None and restarted.table is not None and first.table is not None
    assert restarted.table.owners == kept.table.owners
    assert float(moved_share(first.table, restarted.table)) == pytest.approx(0.10)
    assert not [e for e in events if e.reason is EventReason.ASSIGNMENT_REBUILT]
    assert status2["displacement"]["repinnedShare"] == "10.00%"  # minimal's figure, not the hash pick's 20 %
    assert SlotTable.from_status(status2["assignment"], "uid-1") == restarted.table


def test_a_lost_status_table_comes_back_from_the_dataplanes_else_is_rebuilt_with_a_warning() -> None:
    first, status, _ = one_pass(obj({"a": 50, "b": 30, "c": 20}, 1, {}), {})
    second, status, _ = one_pass(obj({"a": 40, "b": 30, "c": 30}, 2, status), {first.key: first})
    assert second.table is not None
    lost = {k: v for k, v in status.items() if k != "assignment"}
    restored, _, events = one_pass(obj({"a": 40, "b": 30, "c": 30}, 2, lost), {}, {second.key: second.table})
    assert restored.table == second.table and not events
    rebuilt, _, events = one_pass(obj({"a": 40, "b": 30, "c": 30}, 2, lost), {})
    warnings = [e for e in events if e.reason is EventReason.ASSIGNMENT_REBUILT]
    assert len(warnings) == 1 and warnings[0].type is EventType.WARNING
    assert "rebuilt from the current weights a=40,b=30,c=30" in warnings[0].message
    assert rebuilt.table is not None and moved_share(second.table, rebuilt.table) > 0  # why it warns


def test_the_publish_proto_carries_the_table_and_the_receiver_checks_it_against_the_weights() -> None:
    served, _, _ = one_pass(obj({"a": 50, "b": 30, "c": 20}, 1, {}), {})
    table = advance(served.table, Weights(("a", "b", "c"), (40, 30, 30)))
    gen = Generation(1, (served,))
    msg = generation_to_proto(gen)
    assert generation_from_proto(msg) == gen
    assert generation_from_proto(msg).splits[0].table == served.table
    # A table whose counts are another weight vector's is refused, naming the field.
    del msg.splits[0].assignment.owners[:]
    del msg.splits[0].assignment.lengths[:]
    msg.splits[0].assignment.owners.extend(r.owner for r in table.runs)
    msg.splits[0].assignment.lengths.extend(r.length for r in table.runs)
    with pytest.raises(SpecError, match=r"a owns 4000 slots, its weight gives 5000"):
        generation_from_proto(msg)
    msg.splits[0].assignment.slots = 100
    with pytest.raises(SpecError, match=r"splits\[0\]\.assignment\.slots: 100 slots"):
        generation_from_proto(msg)
