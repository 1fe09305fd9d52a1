"""How a displacement plan is shown: the `--json` shape (docs/cli.md) and the text.

Its own module because both `plan --from/--to` (`plan.py`) and the live `plan NAME --set` / `set-weights` (`kplan.py`,
`set_weights.py`) print a plan, and `plan.py` dispatches to `kplan.py`: with the view here, neither imports the other
back.
"""

from __future__ import annotations

from typing import Any

from trafficsplit.cli.common import fraction_text, pct
from trafficsplit.core.control.plan import Plan
from trafficsplit.core.model.assignment import SLOTS, minimal_moved_share, rounding_bound
from trafficsplit.core.model.persistent import persistent_moved_share


def to_json(p: Plan, draining: frozenset[str] = frozenset()) -> dict[str, Any]:
    """`draining`: the backends the change sets to 0 with `drain: true` (persistent mode keeps their sessions)."""
    return {
        "from": p.before.format(),
        "to": p.after.format(),
        "total_from": p.before.total,
        "total_to": p.after.total,
        "moved_share": float(p.moved_share),
        "moved_fraction": fraction_text(p.moved_share),
        "total_changed": p.total_changed,
        "exact": p.exact,
        "period": p.period,
        "samples": p.samples,
        "moves": [{"from": m.source, "to": m.target, "share": float(m.share)} for m in p.moves],
        "minimum_share": float(p.minimum_share),
        # spec.assignment: minimal's figure for the same change (exact: it depends only on the two quotas)
        "minimal": {
            "moved_share": float(minimal_moved_share(p.before, p.after)),
            "slots": SLOTS,
            "bound": float(rounding_bound(p.before, p.after)),
        },
        # sticky.mode: persistent's figure: only sessions of backends set to 0 without drain (or removed) move
        "persistent": {
            "moved_share": float(persistent_moved_share(p.before, p.after, draining)),
            "draining": sorted(draining),
        },
        "suggestion": None
        if p.suggestion is None
        else {
            "weights": p.suggestion.weights.format(),
            "total": p.suggestion.weights.total,
            "moved_share": float(p.suggestion.moved_share),
        },
    }


def render(p: Plan, flag: str = "--to", draining: frozenset[str] = frozenset()) -> str:
    how = (
        f"exact over the joint period of {p.period} slots"
        if p.exact
        else f"estimated from {p.samples} fixed-seed random keys"
    )
    lines = [
        f"from {p.before.format()} (total {p.before.total}) to {p.after.format()} (total {p.after.total})",
        f"moves {pct(p.moved_share)} of sessions ({how})",
    ]
    lines += [f"  {m.source} -> {m.target}: {pct(m.share)}" for m in p.moves]
    if not p.moves:
        lines.append("  nothing moves")
    lines.append(
        f"side by side: assignment hash moves {pct(p.moved_share)}, assignment minimal moves "
        f"{pct(minimal_moved_share(p.before, p.after))} (the minimum is {pct(p.minimum_share)}; minimal stays within "
        f"{pct(rounding_bound(p.before, p.after))} of it over {SLOTS} slots)"
    )
    zeroed = [n for n, w in p.before.items() if w > 0 and (n not in p.after.names or p.after.weight_of(n) == 0)]
    leaving = [n for n in zeroed if n not in draining]
    kept = [n for n in zeroed if n in draining]
    lines.append(
        f"sticky.mode persistent moves {pct(persistent_moved_share(p.before, p.after, draining))} of existing "
        "sessions: "
        + (f"only those of {', '.join(leaving)} (set to 0)" if leaving else "none; new sessions follow the new weights")
        + (f"; {', '.join(kept)} drain (sessions stay until idle, then Drained=True)" if kept else "")
    )
    if p.total_changed:
        lines.append(
            f"warning: the total changes ({p.before.total} -> {p.after.total}): every session's slot is re-drawn, so "
            f"sessions move both ways; {pct(p.moved_share, 1)} move where {pct(p.minimum_share, 1)} would do"
        )
    elif p.moved_share > p.minimum_share:
        # Same total, but a backend between two changed ones slides along the running sums (docs/spec.md §2's walk).
        lines.append(
            f"warning: {pct(p.moved_share, 1)} move where {pct(p.minimum_share, 1)} would do: the running-sum walk "
            "slides the slot ranges of backends listed between the ones that change; only weight moved between "
            "neighbours in the list moves the minimum"
        )
    if p.suggestion is not None:
        alt = p.suggestion.weights
        lines.append(
            f"to reach this ratio keeping the total {alt.total}: {flag} {alt.format()} "
            f"(moves {pct(p.suggestion.moved_share)}; weights rounded by largest remainder)"
        )
    return "\n".join(lines) + "\n"
