"""`trafficsplit pick`: which backend each key lands on, by the very pick the dataplane runs (docs/spec.md §2)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from trafficsplit.cli.common import EXIT_OK, add_json_flag, emit_json
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.hashing import key_hash
from trafficsplit.core.model.weights import parse_weights


def register(sub: Any) -> None:
    p = sub.add_parser("pick", help="show the backend each key lands on")
    p.add_argument("--weights", required=True, metavar="NAME=W,...", help="e.g. stable=95,canary=5")
    p.add_argument("keys", nargs="+", metavar="KEY", help="cookie values or request ids")
    add_json_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    try:
        weights = parse_weights(args.weights)
    except SpecError as exc:
        raise SpecError([f"--weights: {p}" for p in exc.problems]) from exc
    picks = []
    for key in args.keys:
        h = key_hash(key)
        picks.append(
            {
                "key": key,
                "backend": weights.names[weights.pick_index(h)],
                "slot": h % weights.total,
                "total": weights.total,
            }
        )
    if args.json:
        emit_json({"picks": picks}, out)
    else:
        width = max(len(p["key"]) for p in picks)
        for p in picks:
            out.write(f"{p['key']:<{width}}  {p['backend']}  (slot {p['slot']} of {p['total']})\n")
    return EXIT_OK
