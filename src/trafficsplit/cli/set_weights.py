"""`set-weights NAME stable=90,canary=10`: show the displacement plan, then change the live weights.

Why a command and not `kubectl edit`: the plan (how many sticky sessions move, and the re-balanced alternative when
the total changes) is shown before anything is written, and the write touches spec.backends only. It is a server-side
apply as field manager `kubectl-trafficsplit`, so `kubectl get -o yaml --show-managed-fields` says who set the weights,
and another manager's claim on the list (a GitOps tool's apply) is a conflict the user sees rather than a silent
overwrite: `--force-conflicts` takes the list over, as with `kubectl apply --server-side`. `--dry-run` sends the same
apply with dryRun=All, so the API server's schema and CEL rules judge it without storing anything.

The apply flow (`apply_change`) is shared with flip.py.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from trafficsplit.cli.common import EXIT_OK, UsageError
from trafficsplit.cli.kplan import (
    changes,
    draining_of,
    format_backends,
    merge,
    parse_assignments,
    plan_change,
    spec_backends,
)
from trafficsplit.cli.kube import FIELD_MANAGER, Cluster, Ref, add_kube_arguments, kube_errors
from trafficsplit.cli.planview import render
from trafficsplit.core.control.spec import DeclaredBackend
from trafficsplit.core.model.errors import SpecError

EXIT_DECLINED = 1


def register(sub: Any) -> None:
    p = sub.add_parser("set-weights", help="plan, then apply new weights to a live TrafficSplit (server-side apply)")
    p.add_argument("name", metavar="NAME", help="the TrafficSplit")
    p.add_argument(
        "assignments", metavar="NAME=W,...", help="the backends whose weight changes; the others keep theirs"
    )
    add_apply_arguments(p)
    p.add_argument("--yes", "-y", action="store_true", help="apply without asking (needed when stdin is no terminal)")
    add_kube_arguments(p)
    p.set_defaults(handler=run)


def add_apply_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="let the API server validate the change (dryRun=All) and print what would change; nothing is stored",
    )
    p.add_argument(
        "--force-conflicts",
        action="store_true",
        help="take spec.backends over from another field manager (like kubectl apply --server-side)",
    )


def plan_text(ref: Ref, current: Sequence[DeclaredBackend], proposed: Sequence[DeclaredBackend]) -> str:
    """The plan, or why the core cannot compute one (then the API server's validation has the last word)."""
    head = f"{ref}\n"
    try:
        return head + render(plan_change(current, proposed), flag="--set", draining=draining_of(proposed))
    except SpecError as exc:
        return head + (
            f"from {format_backends(current)} to {format_backends(proposed)}\n"
            f"no plan: {'; '.join(exc.problems)} (sending it anyway: the API server validates)\n"
        )


def confirm(stdin: TextIO, stderr: TextIO) -> bool:
    """Ask on the terminal; a script must say --yes instead (there is nobody to answer)."""
    if not stdin.isatty():
        raise UsageError("refusing to apply without confirmation: stdin is not a terminal; pass --yes (or --dry-run)")
    stderr.write("apply? [y/N] ")
    stderr.flush()
    return stdin.readline().strip().lower() in ("y", "yes")


def result_text(ref: Ref, current: Sequence[DeclaredBackend], stored: Mapping[str, Any], *, dry_run: bool) -> str:
    """What the server stored (or, for a dry run, would store), as field changes against what was read."""
    after = spec_backends(ref, stored)
    lines = changes(current, after) or ["no change"]
    meta = stored.get("metadata") or {}
    if dry_run:
        head = "dry run: the API server accepted the change; nothing was stored. It would change:"
    else:
        head = f"applied (field manager {FIELD_MANAGER}, metadata.generation {meta.get('generation', '-')}):"
    return "\n".join([head, *(f"  {line}" for line in lines)]) + "\n"


def apply_change(
    cluster: Cluster,
    ref: Ref,
    obj: Mapping[str, Any],
    proposed: Sequence[DeclaredBackend],
    args: argparse.Namespace,
    out: TextIO,
    *,
    ask: bool,
) -> int:
    """Print the plan, confirm when `ask`, apply (or dry-run) spec.backends, print what changed."""
    current = spec_backends(ref, obj)
    out.write(plan_text(ref, current, proposed))
    if [dict(b) for b in proposed] == current:
        out.write("nothing to change\n")
        return EXIT_OK
    if ask and not args.dry_run:
        out.flush()
        if not confirm(sys.stdin, sys.stderr):
            sys.stderr.write("not applied\n")
            return EXIT_DECLINED
    stored = cluster.apply_backends(
        ref.name,
        proposed,
        resource_version=str((obj.get("metadata") or {}).get("resourceVersion", "")),
        dry_run=args.dry_run,
        force=args.force_conflicts,
    )
    out.write(result_text(ref, current, stored, dry_run=args.dry_run))
    return EXIT_OK


@kube_errors
def run(args: argparse.Namespace, out: TextIO) -> int:
    assignments = parse_assignments(args.assignments, option="NAME=W")
    cluster = Cluster.connect(args)
    ref = cluster.ref(args.name)
    obj = cluster.get(args.name)
    proposed = merge(ref, spec_backends(ref, obj), assignments, option="NAME=W")
    return apply_change(cluster, ref, obj, proposed, args, out, ask=not args.yes)
