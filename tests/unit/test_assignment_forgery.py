"""What the `status.assignment` digest does not stop, stated in docs/security.md ("Status → operator"): it is keyed by
nothing secret (the uid is public), so a principal with status write who recomputes it gets a re-ordered table
adopted. What still holds: the counts must be the stored weights' quotas, so a forgery cannot change any backend's
share; and the weights must be the ones the split asks for, or the table is advanced from them."""

from __future__ import annotations

from typing import Any

import pytest

from trafficsplit.core.model.assignment import Run, SlotTable, fresh_table, moved_share, status_digest
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.weights import Weights

UID = "3f1c2a9e-0000-4000-8000-000000000001"  # public: anyone who can read the object knows it
WEIGHTS = Weights.of([("stable", 60), ("canary", 40)])


def _forged(stored: dict[str, Any], runs: list[Run]) -> dict[str, Any]:
    text = ",".join(f"{r.owner}x{r.length}" for r in runs)
    digest = status_digest(UID, tuple(stored["backends"]), tuple(stored["weights"]), text)
    return {**stored, "runs": text, "digest": digest}


def test_reversed_runs_with_a_recomputed_digest_are_adopted_and_move_sessions_not_shares() -> None:
    table = fresh_table(WEIGHTS)
    stored = table.to_status(UID, WEIGHTS)
    forged = SlotTable.from_status(_forged(stored, list(reversed(table.runs))), UID)
    assert forged.counts() == table.counts()  # every backend keeps its share
    moved = moved_share(table, forged)
    assert moved > 0  # sessions re-pinned among the split's own backends: the limit docs/security.md states
    print(f"\nreversed runs, digest recomputed: adopted, {float(moved):.0%} of sessions move, shares unchanged")


def test_a_forgery_that_changes_a_share_is_refused_even_with_a_recomputed_digest() -> None:
    table = fresh_table(WEIGHTS)
    stored = table.to_status(UID, WEIGHTS)
    with pytest.raises(SpecError, match=r"assignment\.runs"):
        SlotTable.from_status(_forged(stored, [Run(1, 10_000)]), UID)  # every slot to canary
