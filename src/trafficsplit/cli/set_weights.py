"""`set-weights NAME stable=90,canary=10`: show the displacement plan, then change the live weights (of a
TrafficSplit, or of one rule of an HTTPRoute: `set-weights httproute/NAME --rule N --set a=90,b=10`).

Why a command and not `kubectl edit`: the plan (how many sticky sessions move, and the re-balanced alternative when
the total changes) is shown before anything is written, and the write touches spec.backends only. It is a server-side
apply as field manager `kubectl-trafficsplit`, so `kubectl get -o yaml --show-managed-fields` says who set the weights,
and another manager's claim on the list (a GitOps tool's apply) is a conflict the user sees rather than a silent
overwrite: `--force-conflicts` takes the list over, as with `kubectl apply --server-side`. `--dry-run` sends the same
apply with dryRun=All, so the API server's schema and CEL rules judge it without storing anything.

An HTTPRoute is not ours to own field by field (a GitOps tool or the route's author owns `spec.rules`, an atomic
list), so its weights are written by a JSON patch of `rules[N].backendRefs[J].weight` only, as field manager
`kubectl-trafficsplit`, whose first op tests the resourceVersion the plan was computed from: a concurrent edit fails
the patch (run again) rather than being overwritten. `--dry-run` sends it with dryRun=All.

The apply flows (`apply_change`, `apply_rule_change`) are shared with flip.py.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from trafficsplit.cli.common import EXIT_OK, UsageError
from trafficsplit.cli.kplan import (
    add_rule_argument,
    changes,
    draining_of,
    format_backends,
    merge,
    parse_assignments,
    plan_change,
    plan_rule,
    route_plan_text,
    spec_backends,
)
from trafficsplit.cli.kube import FIELD_MANAGER, Cluster, Ref, add_kube_arguments, kube_errors
from trafficsplit.cli.planview import render
from trafficsplit.cli.routes import (
    RuleChange,
    choose_rule,
    pairs_text,
    parse_route,
    route_name,
    rule_change,
    weight_changes,
    weight_patch,
)
from trafficsplit.core.control.spec import DeclaredBackend
from trafficsplit.core.model.errors import SpecError

EXIT_DECLINED = 1


def register(sub: Any) -> None:
    p = sub.add_parser("set-weights", help="plan, then apply new weights to a live TrafficSplit or an HTTPRoute rule")
    p.add_argument("name", metavar="NAME", help="the TrafficSplit, or httproute/NAME (with --rule)")
    p.add_argument(
        "assignments",
        nargs="?",
        metavar="NAME=W,...",
        help="the backends whose weight changes; the others keep theirs (or --set NAME=W,..., as plan takes them)",
    )
    p.add_argument("--set", dest="set_assignments", metavar="NAME=W,...", help="the same as the NAME=W,... argument")
    add_rule_argument(p)
    add_apply_arguments(p)
    p.intermixed = True  # NAME=W,... may follow -n (it is optional beside --set)
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
        help="a TrafficSplit: take spec.backends over from another field manager (like kubectl apply --server-side)",
    )


def check_route_flags(args: argparse.Namespace) -> None:
    if args.force_conflicts:
        raise UsageError(
            "--force-conflicts goes with a TrafficSplit: an HTTPRoute's weights are a JSON patch, which takes no "
            "field ownership"
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


def go_ahead(args: argparse.Namespace, out: TextIO, *, ask: bool) -> bool:
    """True to go on: no question to ask (a dry run, --yes, flip), or the answer is yes; False (said) otherwise."""
    if not ask or args.dry_run:
        return True
    out.flush()
    if confirm(sys.stdin, sys.stderr):
        return True
    sys.stderr.write("not applied\n")
    return False


def result_text(ref: Ref, current: Sequence[DeclaredBackend], stored: Mapping[str, Any], *, dry_run: bool) -> str:
    """What the server stored (or, for a dry run, would store), as field changes against what was read."""
    return stored_text(changes(current, spec_backends(ref, stored)), stored, dry_run=dry_run)


def stored_text(lines: Sequence[str], stored: Mapping[str, Any], *, dry_run: bool) -> str:
    meta = stored.get("metadata") or {}
    if dry_run:
        head = "dry run: the API server accepted the change; nothing was stored. It would change:"
    else:
        head = f"applied (field manager {FIELD_MANAGER}, metadata.generation {meta.get('generation', '-')}):"
    return "\n".join([head, *(f"  {line}" for line in lines or ["no change"])]) + "\n"


def rule_plan_text(change: RuleChange, policies: Sequence[Mapping[str, Any]]) -> str:
    """The rule's plan, or why the core cannot compute one (a total of 0: the API server has the last word)."""
    try:
        result, served = plan_rule(change, policies=policies)
    except SpecError as exc:
        return (
            f"{change.ref} rule {change.rule.index}\nfrom {pairs_text(change.before)} to {pairs_text(change.after)}\n"
            f"no plan: {'; '.join(exc.problems)} (sending it anyway: the API server validates)\n"
        )
    return route_plan_text(change.ref, change.rule, result, served)


def apply_rule_change(
    cluster: Cluster, obj: Mapping[str, Any], change: RuleChange, args: argparse.Namespace, out: TextIO, *, ask: bool
) -> int:
    """Print the rule's plan, confirm when `ask`, patch (or dry-run) its weights, print what changed."""
    out.write(rule_plan_text(change, cluster.list_policies()))
    if not change.changed:
        out.write("nothing to change\n")
        return EXIT_OK
    if not go_ahead(args, out, ask=ask):
        return EXIT_DECLINED
    stored = cluster.patch_httproute(change.ref.name, weight_patch(obj, change), dry_run=args.dry_run)
    out.write(stored_text(weight_changes(change.rule.index, obj, stored), stored, dry_run=args.dry_run))
    return EXIT_OK


def read_rule(cluster: Cluster, name: str, rule: str | None) -> tuple[dict[str, Any], Ref, RuleChange]:
    """The live route, and its chosen rule as a change that changes nothing yet."""
    ref = Ref(cluster.namespace, name, "httproute")
    obj = cluster.get_httproute(name)
    route = parse_route(ref, obj)
    return obj, ref, rule_change(ref, route, choose_rule(ref, route, rule), [])


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
    if not go_ahead(args, out, ask=ask):
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


def assignments_of(args: argparse.Namespace) -> tuple[list[tuple[str, int]], str]:
    """The weights, from the NAME=W,... argument or --set (one of them), and the option to name in errors."""
    if args.assignments is not None and args.set_assignments is not None:
        raise UsageError("give the weights once: NAME=W,... or --set NAME=W,..., not both")
    if args.assignments is None and args.set_assignments is None:
        raise UsageError(f"set-weights {args.name} needs the weights: NAME=W,... (or --set NAME=W,...)")
    if args.set_assignments is not None:
        return parse_assignments(args.set_assignments), "--set"
    return parse_assignments(args.assignments, option="NAME=W"), "NAME=W"


@kube_errors
def run(args: argparse.Namespace, out: TextIO) -> int:
    assignments, option = assignments_of(args)
    name = route_name(args.name)
    if name is not None:
        check_route_flags(args)
        cluster = Cluster.connect(args)
        obj, ref, current = read_rule(cluster, name, args.rule)
        change = rule_change(ref, current.route, current.rule, assignments, option)
        return apply_rule_change(cluster, obj, change, args, out, ask=not args.yes)
    if args.rule is not None:
        raise UsageError("--rule goes with httproute/NAME")
    cluster = Cluster.connect(args)
    ref = cluster.ref(args.name)
    obj = cluster.get(args.name)
    proposed = merge(ref, spec_backends(ref, obj), assignments, option=option)
    return apply_change(cluster, ref, obj, proposed, args, out, ask=not args.yes)
