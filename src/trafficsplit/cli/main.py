"""The entry point: builds the parser from a registry of subcommand modules and dispatches.

Each subcommand lives in its own module exposing `register(subparsers)`, which adds its parser and sets
`handler=` on it. A new subcommand (demo, set-weights, flip, status) is one new module plus one entry in
`SUBCOMMANDS`; nothing else here changes.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import TextIO

from trafficsplit.cli.common import EXIT_USAGE, OneLineParser, UsageError, fail
from trafficsplit.core.errors import SpecError

# Module names under trafficsplit.cli, in the order `--help` lists them.
SUBCOMMANDS: tuple[str, ...] = ("pick", "plan", "simulate", "set-weights", "flip", "status", "demo")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="trafficsplit", description="Sticky canary and blue-green traffic splitting: preview and plan."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    sub.required = True
    for name in SUBCOMMANDS:
        importlib.import_module(f"trafficsplit.cli.{name.replace('-', '_')}").register(sub)
    return parser


def is_text(arg: str) -> bool:
    """False for an argument that reached Python as lone surrogates (PEP 383: bytes that are not UTF-8), which every
    later step that encodes it (the hash, the output) would fail on. Checked once here, for every subcommand."""
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run one command; returns the exit code (0 ok, 2 bad arguments). `out` defaults to stdout."""
    parser = build_parser()
    raw = list(sys.argv[1:] if argv is None else argv)
    for index, arg in enumerate(raw, start=1):
        if not is_text(arg):
            return fail("trafficsplit", UsageError(f"argument {index} is not valid UTF-8 text"))
    try:
        args = parser.parse_args(raw)
    except SystemExit as exc:  # --help exits 0, a bad argument 2; both already printed
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return int(args.handler(args, out or sys.stdout))
    except (SpecError, UsageError) as exc:
        return fail(f"trafficsplit {args.command}", exc)


if __name__ == "__main__":
    sys.exit(main())
