"""What every subcommand shares: one-line errors with exit code 2, JSON output, share formatting.

Bad input is a user's typo, not a crash: it exits 2 with ONE line on stderr naming the problem, never a usage dump or a
traceback, so scripts can match on it and people can read it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, NoReturn, TextIO

from trafficsplit.core.model.errors import SpecError

EXIT_OK = 0
EXIT_USAGE = 2

Handler = Callable[[argparse.Namespace, TextIO], int]


class UsageError(Exception):
    """A bad argument the core did not see (e.g. a rule only the CLI enforces); exits 2 like a SpecError."""


def unknown_names(option: str, subject: str, unknown: Sequence[str], names: Sequence[str], hint: str) -> UsageError:
    """The error for weights assigned to names `subject` does not have: the first one, the rest, the names it has."""
    rest = f" (nor {', '.join(repr(u) for u in unknown[1:])})" if unknown[1:] else ""
    return UsageError(
        f"{option}: {subject} {unknown[0]!r}{rest}; its backends are {', '.join(names) or 'none'}. {hint}"
    )


class OneLineParser(argparse.ArgumentParser):
    """argparse, but an error is one line on stderr and exit 2 (argparse's own code), without the usage block.

    `intermixed = True` on a subcommand's parser lets an optional positional follow options (`set-weights shop -n
    shop blue=90` with NAME=W,... optional): plain argparse (before 3.13) matches `nargs="?"` to nothing at the first
    positional and then refuses the later one as unrecognized."""

    intermixed = False
    _parsing = False

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if not self.intermixed or self._parsing:
            return super().parse_known_args(args, namespace)
        self._parsing = True  # parse_known_intermixed_args calls back into parse_known_args
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._parsing = False

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object (shapes in docs/cli.md)")


def emit_json(obj: Any, out: TextIO) -> None:
    out.write(json.dumps(obj, indent=2, sort_keys=False) + "\n")


def fail(prog: str, exc: SpecError | UsageError) -> int:
    # SpecError joins its problems with "; " so the message stays on one line; newlines are flattened to be sure.
    message = " ".join(str(exc).split())
    sys.stderr.write(f"{prog}: error: {message}\n")
    return EXIT_USAGE


def pct(share: Fraction | float, digits: int = 2) -> str:
    return f"{float(share) * 100:.{digits}f}%"


def fraction_text(share: Fraction) -> str:
    return f"{share.numerator}/{share.denominator}"
