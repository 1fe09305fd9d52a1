"""The entry point: builds the parser from a registry of subcommand modules and dispatches.

Each subcommand lives in its own module exposing `register(subparsers)`, which adds its parser and sets
`handler=` on it. A new subcommand (demo, set-weights, flip, status) is one new module plus one entry in
`SUBCOMMANDS`; nothing else here changes.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tomllib
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path, PurePath
from typing import TextIO

from trafficsplit.cli.common import EXIT_OK, EXIT_USAGE, OneLineParser, UsageError, fail
from trafficsplit.core.model.errors import SpecError

# Module names under trafficsplit.cli, in the order `--help` lists them.
SUBCOMMANDS: tuple[str, ...] = ("pick", "plan", "simulate", "set-weights", "flip", "status", "demo")


PROG = "trafficsplit"
KUBECTL_PROG = "kubectl trafficsplit"


def program_name(argv0: str) -> str:
    """What the user typed: kubectl runs the plugin as `kubectl-trafficsplit`, which the user typed as `kubectl
    trafficsplit`; everything else (the console script, `python -m trafficsplit.cli`) is `trafficsplit`."""
    return KUBECTL_PROG if PurePath(argv0).name.startswith("kubectl-") else PROG


def package_version() -> str:
    """The installed distribution's version; from a source tree that was never installed, pyproject's version marked
    as such, so a bug report still says which code ran."""
    try:
        return metadata.version("trafficsplit")
    except metadata.PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    try:
        with pyproject.open("rb") as f:
            return f"{tomllib.load(f)['project']['version']} (source tree, not installed)"
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError):
        return "unknown (not installed)"


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = OneLineParser(prog=prog, description="Sticky canary and blue-green traffic splitting: preview and plan.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    sub.required = True
    for name in SUBCOMMANDS:
        importlib.import_module(f"trafficsplit.cli.{name.replace('-', '_')}").register(sub)
    parser.set_defaults(prog=prog)  # for the handlers' own error lines (kube.kube_errors)
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
    """Run one command; returns the exit code (0 ok, 2 bad arguments). `out` defaults to stdout.

    Run bare, it prints the help and exits 0, as `kubectl` and the cobra-based plugins do: asking what a tool can do
    is not an error, and a usage error alone (`the following arguments are required`) does not say."""
    prog = program_name(sys.argv[0] if sys.argv else PROG)
    parser = build_parser(prog)
    raw = list(sys.argv[1:] if argv is None else argv)
    if not raw:
        (out or sys.stdout).write(parser.format_help())
        return EXIT_OK
    for index, arg in enumerate(raw, start=1):
        if not is_text(arg):
            return fail(prog, UsageError(f"argument {index} is not valid UTF-8 text"))
    try:
        args = parser.parse_args(raw)
    except SystemExit as exc:  # --help and --version exit 0, a bad argument 2; all already printed
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return int(args.handler(args, out or sys.stdout))
    except (SpecError, UsageError) as exc:
        return fail(f"{prog} {args.command}", exc)


if __name__ == "__main__":
    sys.exit(main())
