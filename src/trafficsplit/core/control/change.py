"""What a change of one split does to its sessions, in words: local mode's log and the demo's console print it.

Why here: the figure must be the one `trafficsplit plan` prints for the same change, so it comes from the same
planner (`core.plan.plan`), or from the slot table's (`assignment: minimal`) or persistent mode's figure when the
split uses those, exactly as the dataplane will decide. Pure: specs in, text out.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from trafficsplit.core.control.plan import plan
from trafficsplit.core.model.assignment import AssignmentMode, minimal_moved_share
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.persistent import StickyMode, persistent_moved_share
from trafficsplit.core.model.splitspec import SplitSpec
from trafficsplit.core.model.weights import Weights


@dataclass(frozen=True, slots=True)
class ChangeNote:
    """One line saying what changed and what it moves, and the warnings a user should read before the next edit."""

    summary: str
    warnings: tuple[str, ...] = ()


def pct(share: Fraction) -> str:
    return f"{float(share) * 100:.2f}%"


def _weights(spec: SplitSpec) -> Weights | None:
    try:
        return Weights.of((b.name, b.weight) for b in spec.backends)
    except SpecError:  # every weight 0: no ratio to plan against
        return None


def _arrows(before: SplitSpec, after: SplitSpec) -> str:
    old = {b.name: b.weight for b in before.backends}
    new = {b.name: b.weight for b in after.backends}
    parts = []
    for name in [*old, *(n for n in new if n not in old)]:
        a, b = old.get(name), new.get(name)
        if a is None:
            parts.append(f"{name} (new) {b}")
        elif b is None:
            parts.append(f"{name} {a} → removed")
        else:
            parts.append(f"{name} {a} → {b}" if a != b else f"{name} {b}")
    return ", ".join(parts)


def describe_change(before: SplitSpec | None, after: SplitSpec | None) -> ChangeNote | None:
    """None when nothing changed. Which figure applies follows `after`: persistent mode moves only the sessions of
    a backend set to 0 without `drain`; `assignment: minimal` moves the least the new ratio needs; the default
    (hash) moves what the running-sum walk moves, which is more when the total changes."""
    if before == after:  # both None, or the same spec
        return None
    if after is None:
        assert before is not None
        return ChangeNote(f"{before.key}: withdrawn")
    if before is None:
        weights = ", ".join(f"{b.name} {b.weight}" for b in after.backends)
        return ChangeNote(f"{after.key}: added, weights {weights}")
    arrows = _arrows(before, after)
    bw, aw = _weights(before), _weights(after)
    if bw is None or aw is None:
        return ChangeNote(f"{after.key}: {arrows}")
    if bw.items() == aw.items():
        return ChangeNote(f"{after.key}: weights unchanged ({arrows}); another field changed")
    if after.sticky_mode is StickyMode.PERSISTENT:
        draining = frozenset(b.name for b in after.backends if b.drain)
        share = persistent_moved_share(bw, aw, draining)
        note = f"; {', '.join(sorted(draining))} draining: sessions stay until idle" if draining else ""
        return ChangeNote(f"{after.key}: {arrows}; moves {pct(share)} of existing sessions (persistent){note}")
    if after.assignment is AssignmentMode.MINIMAL:
        share = minimal_moved_share(bw, aw)
        return ChangeNote(f"{after.key}: {arrows}; moves {pct(share)} of sessions (assignment minimal)")
    p = plan(bw, aw)
    moves = ", ".join(f"{m.source} → {m.target} {pct(m.share)}" for m in p.moves)
    summary = f"{after.key}: {arrows}; moves {pct(p.moved_share)} of sessions" + (f" ({moves})" if moves else "")
    warnings: list[str] = []
    if p.total_changed:
        keep = (
            f"; {p.suggestion.weights.format()} keeps the total and moves {pct(p.suggestion.moved_share)}"
            if p.suggestion is not None
            else ""
        )
        warnings.append(
            f"{after.key}: the total changed ({bw.total} → {aw.total}): {pct(p.moved_share)} moved where "
            f"{pct(p.minimum_share)} would do{keep}"
        )
    elif p.moved_share > p.minimum_share:
        warnings.append(
            f"{after.key}: {pct(p.moved_share)} moved where {pct(p.minimum_share)} would do: the backends listed "
            "between the ones that changed slid along; moving weight between neighbours in the list moves the minimum"
        )
    return ChangeNote(summary, tuple(warnings))
