"""Hypothesis strategies shared by the unit tests: weight vectors the core accepts."""

from __future__ import annotations

from hypothesis import strategies as st

from trafficsplit.core.model.weights import Weights

NAMES = ("stable", "canary", "blue", "green", "a", "b", "c", "d")


@st.composite
def weights(draw: st.DrawFn, names: tuple[str, ...] | None = None, max_weight: int = 200) -> Weights:
    """An ordered weight list with total > 0 over a subset of NAMES (or exactly `names`)."""
    chosen = names or tuple(draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True)))
    ws = draw(st.lists(st.integers(0, max_weight), min_size=len(chosen), max_size=len(chosen)))
    if sum(ws) == 0:
        ws[draw(st.integers(0, len(ws) - 1))] = draw(st.integers(1, max_weight))
    return Weights(chosen, tuple(ws))
