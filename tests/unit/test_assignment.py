"""`spec.assignment: minimal` (core/assignment.py): every change moves the minimum share within the stated bound, and
replaying from the stored state gives the identical table."""

from __future__ import annotations

from fractions import Fraction
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trafficsplit.core.assignment import (
    SLOTS,
    SlotTable,
    advance,
    fresh_table,
    minimal_moved_share,
    moved_share,
    quotas,
    rounding_bound,
)
from trafficsplit.core.errors import SpecError
from trafficsplit.core.plan import minimum_share, plan
from trafficsplit.core.weights import MAX_BACKENDS, Weights

NAMES = [f"b{i}" for i in range(MAX_BACKENDS)]


@st.composite
def weight_vectors(draw: st.DrawFn) -> Weights:
    """Up to 64 backends drawn from a shared pool (so backends come and go between steps), totals changing."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=MAX_BACKENDS, unique=True))
    ws = draw(st.lists(st.integers(0, 1000), min_size=len(names), max_size=len(names)))
    if sum(ws) == 0:
        ws[0] = 1
    return Weights(tuple(names), tuple(ws))


@settings(max_examples=60, deadline=None)
@given(st.lists(weight_vectors(), min_size=2, max_size=8))
def test_each_change_moves_the_minimum_within_the_bound_and_replays_identically(history: list[Weights]) -> None:
    table = advance(None, history[0])
    assert table.check(history[0]) == []
    for before, after in pairwise(history):
        nxt = advance(table, after)
        assert nxt.check(after) == []  # every backend owns exactly its quota
        moved = moved_share(table, nxt)
        assert moved == minimal_moved_share(before, after)  # what plan predicts, exactly
        assert abs(moved - minimum_share(before, after)) <= rounding_bound(before, after)
        # The stored form (status.assignment) gives back the identical table, and replaying the change from it too.
        stored = SlotTable.from_status(nxt.to_status())
        assert stored == nxt and stored is not None and stored.owners == nxt.owners
        replayed = advance(SlotTable.from_status(table.to_status()), after)
        assert replayed.owners == nxt.owners
        assert advance(nxt, after) == nxt  # idempotent: a level-triggered pass changes nothing
        assert len(nxt.runs) <= SLOTS
        table = nxt


def test_the_issue_ramps_move_the_minimum() -> None:
    a = Weights(("a", "b", "c"), (50, 30, 20))
    b = Weights(("a", "b", "c"), (40, 30, 30))
    t = advance(advance(None, a), b)
    assert moved_share(advance(None, a), t) == Fraction(1, 10)
    assert plan(a, b).moved_share == Fraction(1, 5)  # the hash pick's figure, for comparison
    s1, s2 = Weights(("stable", "canary"), (95, 5)), Weights(("stable", "canary"), (95, 10))
    assert minimal_moved_share(s1, s2) == Fraction(452, SLOTS)  # the minimum, 4.52 %, within 2/SLOTS
    assert float(plan(s1, s2).moved_share) == pytest.approx(0.136, abs=0.001)


def test_quotas_are_within_one_slot_of_the_share() -> None:
    w = Weights(("a", "b", "c"), (1, 1, 1))
    assert quotas(w) == (3334, 3333, 3333)
    assert fresh_table(w).counts() == {"a": 3334, "b": 3333, "c": 3333}


@pytest.mark.parametrize(
    "raw",
    [
        None,
        {"slots": 100, "backends": ["a"], "runs": "0x100"},
        {"slots": SLOTS, "backends": ["a"], "runs": "0x9999"},
        {"slots": SLOTS, "backends": ["a"], "runs": "1x10000"},
        {"slots": SLOTS, "backends": ["a"], "runs": "0x10000;"},
        {"slots": SLOTS, "backends": "a", "runs": "0x10000"},
    ],
)
def test_an_unreadable_stored_table_reads_as_absent(raw: object) -> None:
    assert SlotTable.from_status(raw) is None


def test_a_table_that_contradicts_its_weights_is_named() -> None:
    t = fresh_table(Weights(("a", "b"), (1, 1)))
    assert t.check(Weights(("a", "b"), (1, 1))) == []
    assert "a owns 5000 slots, its weight gives 9000" in t.check(Weights(("a", "b"), (9, 1)))[0]
    with pytest.raises(SpecError, match="cover"):
        SlotTable(("a",), ())
