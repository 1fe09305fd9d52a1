"""`spec.assignment: minimal` (core/model/assignment.py): every change moves the minimum share within the stated bound,
and replaying from the stored state gives the identical table."""

from __future__ import annotations

import re
from fractions import Fraction
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trafficsplit.core.control.plan import minimum_share, plan
from trafficsplit.core.model.assignment import (
    MAX_RUNS_TEXT,
    SLOTS,
    SlotTable,
    advance,
    fresh_table,
    minimal_moved_share,
    moved_share,
    quotas,
    rounding_bound,
    status_digest,
)
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.weights import MAX_BACKENDS, Weights

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
        stored = SlotTable.from_status(nxt.to_status("uid-1", after), "uid-1")
        assert stored == nxt and stored.owners == nxt.owners
        replayed = advance(SlotTable.from_status(table.to_status("uid-1", before), "uid-1"), after)
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


GOOD = fresh_table(Weights(("a", "b"), (1, 1))).to_status("uid-1", Weights(("a", "b"), (1, 1)))


def signed(raw: dict[str, Any], uid: str = "uid-1") -> dict[str, Any]:
    """`raw` with the digest recomputed: what only the operator (or someone who read this code) writes."""
    return {**raw, "digest": status_digest(uid, tuple(raw["backends"]), tuple(raw["weights"]), raw["runs"])}


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (None, "not an object"),
        ({**GOOD, "slots": 100}, "slots: not 10000"),
        ({**GOOD, "backends": "a"}, "backends: 1..64 names"),
        ({**GOOD, "backends": ["a"] * 65}, "backends: 1..64 names"),
        ({**GOOD, "weights": [1]}, "weights: one weight"),
        ({**GOOD, "weights": [True, 1]}, "weights: one weight"),
        ({**GOOD, "runs": "0x5000," * 10_000}, f"runs: a string of 1..{MAX_RUNS_TEXT} characters"),
        ({**GOOD, "digest": "md5:00"}, "digest: sha256: and 64 lowercase hex digits"),
        ({**GOOD, "runs": "1x5000,0x5000"}, "digest: not the digest of this object's table"),
        ({**GOOD, "backends": ["b", "a"]}, "digest: not the digest"),
        ({**GOOD, "weights": [9, 1]}, "digest: not the digest"),
        ({**GOOD, "digest": GOOD["digest"][:-1] + "0"}, "digest: not the digest"),
        # Signed yet wrong: the runs, names and counts are checked as well (the digest is no key).
        (signed({**GOOD, "runs": "0x9999"}), "cover 9999 slots"),
        (signed({**GOOD, "runs": "2x10000"}), "owner among the backends"),
        (signed({**GOOD, "runs": "0x10000;"}), "runs[0]: not OWNERxLENGTH"),
        (signed({**GOOD, "weights": [9, 1]}), "a owns 5000 slots, its weight gives 9000"),
        (signed({**GOOD, "weights": [0, 0]}), "the total weight must be > 0"),
        (signed({**GOOD, "backends": ["a", "a"]}), "status.assignment"),
    ],
)
def test_a_stored_table_that_does_not_verify_is_refused_naming_why(raw: Any, problem: str) -> None:
    with pytest.raises(SpecError, match=re.escape(problem)):
        SlotTable.from_status(raw, "uid-1")


def test_a_stored_table_is_bound_to_its_object() -> None:
    assert SlotTable.from_status(GOOD, "uid-1") == fresh_table(Weights(("a", "b"), (1, 1)))
    with pytest.raises(SpecError, match="digest: not the digest"):
        SlotTable.from_status(GOOD, "uid-2")  # another object's (or a recreated one's) status


def test_the_longest_runs_text_fits_the_bound() -> None:
    """`SLOTS` one-slot runs alternating between the two highest owners: the longest text a valid table has."""
    names = tuple(f"b{i}" for i in range(MAX_BACKENDS))
    owners = bytes(MAX_BACKENDS - 1 - (s % 2) for s in range(SLOTS))
    table = SlotTable.from_owners(names, owners)
    weights = Weights(names, tuple(table.counts()[n] for n in names))
    stored = table.to_status("uid-1", weights)
    assert len(stored["runs"]) == MAX_RUNS_TEXT
    assert SlotTable.from_status(stored, "uid-1") == table


def test_a_table_that_contradicts_its_weights_is_named() -> None:
    t = fresh_table(Weights(("a", "b"), (1, 1)))
    assert t.check(Weights(("a", "b"), (1, 1))) == []
    assert "a owns 5000 slots, its weight gives 9000" in t.check(Weights(("a", "b"), (9, 1)))[0]
    with pytest.raises(SpecError, match="cover"):
        SlotTable(("a",), ())
