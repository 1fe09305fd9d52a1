"""docs/spec.md §2: the weighted pick, its determinism, and that realised ratios follow the weights (chi-square)."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import chisquare

from tests.unit import strategies
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.hashing import key_hash
from trafficsplit.core.model.weights import Weights, modulo_bias, parse_weights

W95 = parse_weights("stable=95,canary=5")


@pytest.mark.parametrize(
    ("key", "backend"),
    [
        ("", "stable"),  # slot 89 of 100
        ("a", "stable"),  # slot 21
        ("user-42", "stable"),  # 31
        ("0193f1c2a4b5000000000001", "stable"),  # 38
        ("é-ünïcode", "stable"),  # 0
    ],
)
def test_pick_on_spec_vectors(key: str, backend: str) -> None:
    assert W95.pick(key) == backend


def test_pick_spec_vectors_on_a_wider_canary() -> None:
    w = parse_weights("stable=80,canary=20")  # slots 80..99 are canary
    assert [w.pick(k) for k in ("", "a", "user-42", "é-ünïcode")] == ["canary", "stable", "stable", "stable"]


@pytest.mark.parametrize(
    ("weights", "slot", "expected"),
    [
        ("stable=95,canary=5", 94, "stable"),
        ("stable=95,canary=5", 95, "canary"),
        ("stable=95,canary=5", 99, "canary"),
        ("blue=0,green=100", 0, "green"),
        ("a=1,b=0,c=1", 1, "c"),
    ],
)
def test_running_sum_boundaries(weights: str, slot: int, expected: str) -> None:
    w = parse_weights(weights)
    assert w.names[w.owner_of_slot(slot)] == expected
    assert w.names[w.pick_index(slot)] == expected  # slot < total, so h % total == slot


@given(strategies.weights(), st.text())
def test_zero_weight_never_picked_and_pick_is_stable(w: Weights, key: str) -> None:
    first = w.pick(key)
    assert w.weight_of(first) > 0
    assert all(w.pick(key) == first for _ in range(3))
    assert Weights(w.names, w.weights).pick(key) == first  # a fresh value (another replica) agrees


@given(strategies.weights(max_weight=50))
def test_each_slot_belongs_to_the_backend_whose_interval_holds_it(w: Weights) -> None:
    owners = [w.names[w.owner_of_slot(s)] for s in range(w.total)]
    assert owners == [n for n, k in w.items() for _ in range(k)]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a=-1", "backends[0].weight: must be >= 0"),
        ("a=1.5", "not an integer"),
        ("a=x", "not an integer"),
        ("a=²", "not an integer"),
        ("a=" + "1" * 5000, "not an integer"),
        ("a=0,b=0", "total weight must be > 0"),
        ("a=1,a=2", "duplicate backend name 'a'"),
        ("a", "expected NAME=WEIGHT"),
        ("=3", "expected NAME=WEIGHT"),
        ("", "at least one backend"),
        ("a=1000001", "must be <= 1000000"),
    ],
)
def test_parse_weights_rejects(text: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_weights(text)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_format_round_trips() -> None:
    assert parse_weights(" stable = 95 , canary=5 ").format() == "stable=95,canary=5"


def _request_ids(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return [
        f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}-{rng.getrandbits(16):04x}-{rng.getrandbits(48):012x}"
        for _ in range(n)
    ]


@pytest.mark.parametrize(
    ("weights", "seed"),
    [("stable=95,canary=5", 1), ("a=1,b=1,c=1", 2), ("a=70,b=20,c=10", 3), ("blue=0,green=3,red=1", 4)],
)
def test_realised_ratios_fit_the_weights(weights: str, seed: int) -> None:
    w = parse_weights(weights)
    n = 100_000
    counts = dict.fromkeys(w.names, 0)
    for rid in _request_ids(seed, n):
        counts[w.names[w.pick_index(key_hash(rid))]] += 1
    live = [name for name, k in w.items() if k > 0]
    assert all(counts[name] == 0 for name, k in w.items() if k == 0)  # weight 0: excluded from the test, never hit
    observed = [counts[name] for name in live]
    expected = [n * w.weight_of(name) / w.total for name in live]
    assert chisquare(observed, expected).pvalue > 0.001


@pytest.mark.parametrize("space", [2**8, 3**5])
def test_modulo_bias_is_the_largest_share_error_of_any_split_counted_by_brute_force(space: int) -> None:
    # A small hash space, so every hash value can be counted: for each total, every backend [a, a+w) a split with
    # that total can hold.
    for total in [*range(1, 60), 100, 128, space - 1, space]:
        per_slot = [0] * total
        for h in range(space):
            per_slot[h % total] += 1
        prefix = [0]
        for c in per_slot:
            prefix.append(prefix[-1] + c)
        worst = max(
            abs(Fraction(prefix[b] - prefix[a], space) / Fraction(b - a, total) - 1)
            for a in range(total)
            for b in range(a + 1, total + 1)
        )
        assert modulo_bias(total, space) == worst, (space, total)


def test_modulo_bias_figures() -> None:
    # The figures docs/spec.md quotes, from the formula max(r, T − r) / 2**32, r = 2**32 mod T.
    assert modulo_bias(100) == Fraction(96, 2**32)  # 2.2e-8: nothing at percent totals
    assert modulo_bias(10_000) == Fraction(7296, 2**32)  # the minimal assignment's table
    assert modulo_bias(2**20) == 0  # a power of two divides the space
    assert round(float(modulo_bias(64_000_000)) * 100, 2) == 1.33
    assert modulo_bias(1_000_000) == Fraction(967_296, 2**32)  # 0.0225 %
    with pytest.raises(ValueError):
        modulo_bias(0)
