"""`trafficsplit plan`: the share of sessions a weight change moves, before anyone applies it (docs/spec.md §2).

A change of total re-draws every key's slot, which users do not expect; this command makes that visible, with the
least the new ratio needs and the re-balanced weights that keep the total.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from trafficsplit.cli import kplan
from trafficsplit.cli.common import EXIT_OK, UsageError, add_json_flag, emit_json
from trafficsplit.cli.planview import render, to_json
from trafficsplit.core.control.plan import estimate_plan, plan
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.weights import Weights, parse_int, parse_weights


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
    p.add_argument(
        "--drain",
        metavar="NAME,...",
        default="",
        help="backends --to sets to 0 with drain: true (sticky.mode persistent keeps their sessions until idle)",
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


def run(args: argparse.Namespace, out: TextIO) -> int:
    if kplan.is_live(args):
        return kplan.run_live(args, out)
    if args.before is None or args.after is None:
        raise UsageError("give --from and --to, or a TrafficSplit NAME and --set")
    before, after = parse_pair(args.before, args.after)
    result = plan(before, after) if args.sample is None else estimate_plan(before, after, samples=args.sample)
    draining = frozenset(n for n in args.drain.split(",") if n)
    not_zero = sorted(n for n in draining if n not in after.names or after.weight_of(n) != 0)
    if not_zero:
        raise UsageError(f"--drain: {', '.join(not_zero)} must be in --to at weight 0 (only a weight-0 backend drains)")
    if args.json:
        emit_json(to_json(result, draining), out)
    else:
        out.write(render(result, draining=draining))
    return EXIT_OK
