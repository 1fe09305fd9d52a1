"""The live stickiness bill's sketches: space-saving's guarantees and HyperLogLog's accuracy, against exact counts."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trafficsplit.core.decide.sketch import HyperLogLog, SpaceSaving, StickinessBill
from trafficsplit.core.model.hashing import key_hash


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 20), st.lists(st.integers(0, 40), max_size=400))
def test_space_saving_keeps_every_heavy_key_and_bounds_its_error(capacity: int, stream: list[int]) -> None:
    sketch = SpaceSaving(capacity)
    for k in stream:
        sketch.add(f"k{k}")
    true = Counter(f"k{k}" for k in stream)
    assert sketch.total == len(stream)
    held = sketch._counts
    assert len(held) <= capacity
    assert sum(held.values()) == len(stream)  # space-saving's invariant: counts sum to the stream length
    smallest = min(held.values(), default=0)
    for key, count in held.items():
        assert true[key] <= count <= true[key] + smallest
    for key, n in true.items():
        if n * capacity > len(stream):
            assert key in held, (key, n)
    if len(true) <= capacity:
        assert held == dict(true)  # exact while every key has its own counter
    assert sketch.largest(3) == sorted(held.values(), reverse=True)[:3]


def test_space_saving_is_bounded_under_a_flood_of_new_keys() -> None:
    sketch = SpaceSaving(64)
    for i in range(20_000):
        sketch.add("heavy" if i % 4 == 0 else f"once-{i}")
    assert len(sketch._counts) == 64
    assert 5000 <= sketch.largest(1)[0] <= 5000 + 20_000 // 64


@pytest.mark.parametrize("n", [10, 100, 1000, 20_000])
def test_hyperloglog_estimates_distinct_sessions(n: int) -> None:
    hll = HyperLogLog()
    for i in range(n):
        hll.add(key_hash(f"session-{i}"))
        hll.add(key_hash(f"session-{i}"))  # repeats do not count
    assert abs(hll.estimate() - n) <= max(1.0, 0.08 * n), hll.estimate()


def test_the_bill_of_a_known_mix() -> None:
    bill = StickinessBill(("stable", "canary"), capacity=256)
    # canary: 5 sessions of 40 requests; stable: 95 sessions of 2, plus one of 100.
    for i in range(5):
        for _ in range(40):
            bill.record(1, f"c{i}", key_hash(f"c{i}"))
    for i in range(95):
        for _ in range(2):
            bill.record(0, f"s{i}", key_hash(f"s{i}"))
    for _ in range(100):
        bill.record(0, "big", key_hash("big"))
    r = bill.report()
    assert r.requests == 490
    assert r.largest_shares == (Fraction(100, 490), Fraction(40, 490), *[Fraction(40, 490)] * 3)
    assert r.serial_fraction == Fraction(100, 490) and r.speedup_bound == Fraction(490, 100)
    stable, canary = r.backends
    assert (stable.request_share, canary.request_share) == (Fraction(290, 490), Fraction(200, 490))
    assert abs(canary.session_share - 5 / 101) < 0.01 and abs(stable.sessions - 96) < 0.05 * 96
