"""`trafficsplit plan`: the share of sessions a weight change moves, before anyone applies it (SPEC §2).

A change of total re-draws every key's slot, which users do not expect; this command makes that visible, with the
least the new ratio needs and the re-balanced weights that keep the total.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from trafficsplit.cli import kplan
from trafficsplit.cli.common import EXIT_OK, UsageError, add_json_flag, emit_json, fraction_text, pct
from trafficsplit.core.assignment import SLOTS, minimal_moved_share, rounding_bound
from trafficsplit.core.errors import SpecError
from trafficsplit.core.persistent import persistent_moved_share
from trafficsplit.core.plan import Plan, estimate_plan, plan
from trafficsplit.core.weights import Weights, parse_int, parse_weights


def _sample_size(text: str) -> int:
    """--sample's type, so both forms (offline and NAME --set) are checked once, by the parser."""
    value = parse_int(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def register(sub: Any) -> None:
    p = sub.add_parser("plan", help="show what share of sessions a weight change moves")
    p.add_argument("--from", dest="before", metavar="NAME=W,...", help="the current weights")
    p.add_argument(
        "--to",
        dest="after",
        metavar="NAME=W,...",
        help="the new weights; every --from backend must be listed (NAME=0 removes it), new names add a backend",
    )
    p.add_argument(
        "--sample",
        type=_sample_size,
        metavar="N",
        help="estimate from N fixed-seed random keys instead of the exact count (a cross-check)",
    )
    add_json_flag(p)
    kplan.add_live_arguments(p)  # or NAME --set: plan against the live TrafficSplit
    p.set_defaults(handler=run)


def _weights(option: str, text: str) -> Weights:
    try:
        return parse_weights(text)
    except SpecError as exc:
        raise SpecError([f"{option}: {p}" for p in exc.problems]) from exc


def parse_pair(before_text: str, after_text: str) -> tuple[Weights, Weights]:
    """Both sides, with the CLI's one extra rule: a --from backend missing from --to is an error, not a removal.

    Adding a backend (a new canary) is a normal step, so new names in --to are accepted. Removing one silently is
    what a typo (`stabel=90`) looks like, so a removal must be spelled NAME=0.
    """
    before = _weights("--from", before_text)
    after = _weights("--to", after_text)
    missing = [n for n in before.names if n not in after.names]
    if missing:
        raise UsageError(
            f"--to: backend {missing[0]!r} of --from is missing (give {missing[0]}=0 to remove it)"
            + (f"; also missing: {', '.join(missing[1:])}" if missing[1:] else "")
        )
    return before, after


def to_json(p: Plan) -> dict[str, Any]:
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
        # sticky.mode: persistent's figure: only sessions of backends set to 0 move
        "persistent": {"moved_share": float(persistent_moved_share(p.before, p.after))},
        "suggestion": None
        if p.suggestion is None
        else {
            "weights": p.suggestion.weights.format(),
            "total": p.suggestion.weights.total,
            "moved_share": float(p.suggestion.moved_share),
        },
    }


def render(p: Plan, flag: str = "--to") -> str:
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
    leaving = [n for n, w in p.before.items() if w > 0 and (n not in p.after.names or p.after.weight_of(n) == 0)]
    lines.append(
        f"sticky.mode persistent moves {pct(persistent_moved_share(p.before, p.after))} of existing sessions: "
        + (f"only those of {', '.join(leaving)} (set to 0)" if leaving else "none; new sessions follow the new weights")
    )
    if p.total_changed:
        lines.append(
            f"warning: the total changes ({p.before.total} -> {p.after.total}): every session's slot is re-drawn, so "
            f"sessions move both ways; {pct(p.moved_share, 1)} move where {pct(p.minimum_share, 1)} would do"
        )
    elif p.moved_share > p.minimum_share:
        # Same total, but a backend between two changed ones slides along the running sums (SPEC §2's walk).
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


def run(args: argparse.Namespace, out: TextIO) -> int:
    if kplan.is_live(args):
        return kplan.run_live(args, out)
    if args.before is None or args.after is None:
        raise UsageError("give --from and --to, or a TrafficSplit NAME and --set")
    before, after = parse_pair(args.before, args.after)
    result = plan(before, after) if args.sample is None else estimate_plan(before, after, samples=args.sample)
    if args.json:
        emit_json(to_json(result), out)
    else:
        out.write(render(result))
    return EXIT_OK
