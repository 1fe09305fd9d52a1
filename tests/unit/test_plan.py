"""docs/spec.md §2 displacement: the planner's exact figures, checked against a brute-force count and a sampled
estimate."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit import strategies
from trafficsplit.core.control.plan import estimate_plan, exact_moves, minimum_share, plan, union_names
from trafficsplit.core.model.weights import Weights, parse_weights, rebalance


def brute_force(before: Weights, after: Weights) -> dict[tuple[str, str], Fraction]:
    """Count every slot of the joint period one by one: the definition the closed form must equal."""
    length = math.lcm(before.total, after.total)
    counts: dict[tuple[str, str], int] = {}
    for s in range(length):
        src, dst = (
            before.names[before.owner_of_slot(s % before.total)],
            after.names[after.owner_of_slot(s % after.total)],
        )
        if src != dst:
            counts[(src, dst)] = counts.get((src, dst), 0) + 1
    return {k: Fraction(v, length) for k, v in counts.items()}


def test_ramp_keeping_the_total_moves_exactly_five_percent_all_to_canary() -> None:
    p = plan(parse_weights("stable=95,canary=5"), parse_weights("stable=90,canary=10"))
    assert p.moved_share == Fraction(5, 100)
    assert [(m.source, m.target, m.share) for m in p.moves] == [("stable", "canary", Fraction(5, 100))]
    assert not p.total_changed and p.exact and p.suggestion is None
    assert p.minimum_share == p.moved_share


def test_blue_green_flip_moves_everything() -> None:
    p = plan(parse_weights("stable=100,canary=0"), parse_weights("stable=0,canary=100"))
    assert p.moved_share == 1
    assert [(m.source, m.target) for m in p.moves] == [("stable", "canary")]


def test_changing_the_total_moves_285_of_2100_both_ways() -> None:
    p = plan(parse_weights("stable=95,canary=5"), parse_weights("stable=95,canary=10"))
    assert p.total_changed and p.period == 2100
    assert p.moved_share == Fraction(285, 2100)
    assert {(m.source, m.target) for m in p.moves} == {("stable", "canary"), ("canary", "stable")}
    # The least the new ratio needs: canary 5/100 → 10/105.
    assert p.minimum_share == Fraction(10, 105) - Fraction(5, 100)
    assert p.suggestion is not None
    assert p.suggestion.weights.format() == "stable=90,canary=10"
    assert p.suggestion.moved_share == Fraction(5, 100)


def test_adding_a_weight_one_backend_to_a_pair_moves_about_half() -> None:
    p = plan(parse_weights("a=50,b=50"), parse_weights("a=50,b=50,c=1"))
    assert p.moved_share == Fraction(51, 101)
    assert round(float(p.moved_share), 3) == 0.505


def test_a_backend_on_one_side_only_weighs_zero_on_the_other() -> None:
    p = plan(parse_weights("blue=100"), parse_weights("green=100"))
    assert union_names(p.before, p.after) == ("blue", "green")
    assert p.moved_share == 1 and p.minimum_share == 1


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("stable=95,canary=5", "stable=95,canary=10"),
        ("a=50,b=50", "a=50,b=50,c=1"),
        ("a=1,b=1", "a=2,b=2"),
        ("a=3,b=0,c=4", "c=5,a=2,d=1"),
        ("x=7", "x=3,y=11"),
    ],
)
def test_closed_form_equals_brute_force(before: str, after: str) -> None:
    b, a = parse_weights(before), parse_weights(after)
    assert exact_moves(b, a) == brute_force(b, a)


@settings(max_examples=200, deadline=None)
@given(strategies.weights(max_weight=40), strategies.weights(max_weight=40))
def test_closed_form_equals_brute_force_property(before: Weights, after: Weights) -> None:
    assert exact_moves(before, after) == brute_force(before, after)


@st.composite
def same_total_pair(draw: st.DrawFn, size: int | None = None) -> tuple[Weights, Weights]:
    names = strategies.NAMES[:size] if size else None
    before = draw(strategies.weights(names=names, max_weight=300))
    # Shuffle the same total over the same names: random cut points of [0, total].
    k = len(before.names) - 1
    cuts = sorted(draw(st.lists(st.integers(0, before.total), min_size=k, max_size=k)))
    bounds = [0, *cuts, before.total]
    after = Weights(before.names, tuple(bounds[i + 1] - bounds[i] for i in range(len(before.names))))
    return before, after


@given(same_total_pair(size=2))
def test_invariant_total_moves_exactly_the_positive_deltas_for_a_pair(pair: tuple[Weights, Weights]) -> None:
    before, after = pair
    p = plan(before, after)
    deltas = sum(max(0, a - b) for a, b in zip(after.weights, before.weights, strict=True))
    assert p.moved_share == Fraction(deltas, before.total)
    assert p.moved_share == p.minimum_share
    assert not p.total_changed and p.suggestion is None


@given(same_total_pair())
def test_invariant_total_moves_the_slots_whose_owner_changed(pair: tuple[Weights, Weights]) -> None:
    before, after = pair
    p = plan(before, after)
    changed = sum(before.owner_of_slot(s) != after.owner_of_slot(s) for s in range(before.total))
    assert p.moved_share == Fraction(changed, before.total)
    assert p.moved_share >= p.minimum_share


def test_with_three_backends_an_unchanged_middle_backend_still_moves() -> None:
    # The running-sum walk: shifting weight from a to c slides b's interval, so b's sessions move too even though
    # b's weight is unchanged. The positive-delta figure (10%) is only the minimum; the pick moves 20%.
    p = plan(parse_weights("a=50,b=30,c=20"), parse_weights("a=40,b=30,c=30"))
    assert p.minimum_share == Fraction(10, 100)
    assert p.moved_share == Fraction(20, 100)
    assert [(m.source, m.target, m.share) for m in p.moves] == [
        ("a", "b", Fraction(10, 100)),
        ("b", "c", Fraction(10, 100)),
    ]


@given(strategies.weights(), strategies.weights())
def test_matrix_sums_to_moved_share_and_never_below_the_minimum(before: Weights, after: Weights) -> None:
    p = plan(before, after)
    assert sum((m.share for m in p.moves), Fraction(0)) == p.moved_share
    assert all(m.share > 0 and m.source != m.target for m in p.moves)
    assert 0 <= p.minimum_share <= p.moved_share <= 1
    # Net flow into each backend is exactly its change of normalised share.
    for name in union_names(before, after):
        net = sum((m.share for m in p.moves if m.target == name), Fraction(0)) - sum(
            (m.share for m in p.moves if m.source == name), Fraction(0)
        )
        w_after = after.weight_of(name) if name in after.names else 0
        w_before = before.weight_of(name) if name in before.names else 0
        assert net == Fraction(w_after, after.total) - Fraction(w_before, before.total)


@given(strategies.weights(), st.integers(1, 1000))
def test_rebalance_keeps_the_total_and_rounds_by_largest_remainder(after: Weights, total: int) -> None:
    alt = rebalance(after, total)
    assert alt.names == after.names and alt.total == total
    for w, w2 in zip(after.weights, alt.weights, strict=True):
        assert abs(Fraction(w * total, after.total) - w2) < 1  # never a whole slot off its quota


def test_rebalance_ties_go_to_the_first_listed() -> None:
    assert rebalance(parse_weights("a=1,b=1,c=1"), 2).format() == "a=1,b=1,c=0"
    assert rebalance(parse_weights("a=50,b=50,c=1"), 100).format() == "a=50,b=49,c=1"


def test_minimum_share_is_the_sum_of_positive_ratio_deltas() -> None:
    assert minimum_share(parse_weights("a=1,b=1"), parse_weights("a=2,b=2")) == 0
    assert minimum_share(parse_weights("a=3,b=1"), parse_weights("a=1,b=1,c=2")) == Fraction(1, 2)  # only c gains


@settings(max_examples=10, deadline=None)
@given(strategies.weights(max_weight=20), strategies.weights(max_weight=20), st.integers(0, 2**32))
def test_sampled_estimate_agrees_with_the_exact_figure(before: Weights, after: Weights, seed: int) -> None:
    n = 20_000
    exact = plan(before, after)
    est = estimate_plan(before, after, samples=n, seed=seed)
    assert not est.exact and est.samples == n
    # Binomial standard error; 5 sigma plus one key of slack keeps false failures below 1e-6 per example.
    p = float(exact.moved_share)
    assert abs(float(est.moved_share) - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1 / n
