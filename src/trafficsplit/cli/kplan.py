"""`plan NAME --set canary=10`: the displacement plan from a LIVE TrafficSplit's weights, and the pure merge behind it.

Why: users change weights on a running split, so the "from" side should be what the API server holds, not what they
remember. The `plan` command (plan.py) owns the offline form and the rendering; it calls into this module when a NAME
is given, and for `plan -f route.yaml` (an HTTPRoute's rule planned from its manifest, no API server: manifest.py).
The merge rules here are shared by set-weights and flip:

* `--set` names only the backends that change; the others keep their weight, and the order never changes (the pick
  walks the list in order, so reordering would move sessions on its own).
* `--set` cannot add a backend: a new backend needs a Service and a port, which only the manifest can say. An unknown
  name exits 2 naming it (a typo like `canry=10` must not be read as "add a backend").
* The CLI checks syntax and names only. Bounds (0..1000000, a positive total) are the API server's to enforce: it is
  the authority, and its rejection names the field. The plan is shown when the core can compute it.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from trafficsplit.cli.common import EXIT_OK, UsageError, emit_json, pct, unknown_names
from trafficsplit.cli.kube import Cluster, Ref, add_kube_arguments, kube_errors
from trafficsplit.cli.manifest import read_route_file
from trafficsplit.cli.planview import render, to_json
from trafficsplit.cli.routes import RuleChange, choose_rule, parse_route, route_name, rule_change
from trafficsplit.core.control.plan import Plan, estimate_plan, plan
from trafficsplit.core.control.spec import DeclaredBackend, declared_backends
from trafficsplit.core.gatewayapi.httproute import RouteRule
from trafficsplit.core.gatewayapi.policy import (
    Outcome,
    Policy,
    PolicyReason,
    ServedChange,
    parse_policy,
    policy_for_rule,
    served_change,
)
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.weights import Weights, parse_pairs


def add_live_arguments(parser: argparse.ArgumentParser) -> None:
    """The live form's arguments, added to the `plan` parser (which keeps --from/--to for the offline form)."""
    parser.add_argument(
        "name",
        nargs="?",
        metavar="NAME",
        help="a TrafficSplit, or httproute/NAME: plan from its live weights (with -f: the HTTPRoute of the file)",
    )
    parser.add_argument(
        "-f",
        "--filename",
        metavar="FILE",
        help="plan offline from an HTTPRoute manifest (- for stdin; several documents: pick one with httproute/NAME; "
        "its TrafficSplitPolicies apply as the operator applies them)",
    )
    add_rule_argument(parser)
    parser.add_argument(
        "--set",
        dest="assignments",
        metavar="NAME=W,...",
        help="with NAME or -f: the backends whose weight changes; the others keep theirs",
    )
    add_kube_arguments(parser)


def add_rule_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rule",
        metavar="N",
        help="with httproute/NAME: the rule (its index, or its name) whose backendRefs' weights change (default: "
        "the only rule with two or more backends)",
    )


def is_live(args: argparse.Namespace) -> bool:
    return args.name is not None or args.assignments is not None or args.filename is not None


def parse_assignments(text: str, option: str = "--set") -> list[tuple[str, int]]:
    """`canary=10,stable=90` → [("canary", 10), ("stable", 90)]; syntax only (NAME=INTEGER, each name once)."""
    try:
        pairs = parse_pairs(text)
    except SpecError as exc:
        raise UsageError(f"{option}: " + "; ".join(exc.problems)) from exc
    names = [n for n, _ in pairs]
    problems = [f"{n}: given twice" for i, n in enumerate(names) if n in names[:i]]
    if not pairs:
        problems.append("expected NAME=WEIGHT,...")
    if problems:
        raise UsageError(f"{option}: " + "; ".join(problems))
    return pairs


def spec_backends(ref: Ref, obj: Mapping[str, Any]) -> list[DeclaredBackend]:
    """The live spec.backends as stored (every field kept, for the rewrite)."""
    backends = declared_backends(obj.get("spec") or {})
    if not backends:
        raise SpecError([f"{ref}: spec.backends is empty"])
    return backends


def weights_of(backends: Sequence[DeclaredBackend]) -> Weights:
    return Weights.of((b.name, b.weight) for b in backends)


def format_backends(backends: Sequence[DeclaredBackend]) -> str:
    """`stable=95,canary=5` without validating (the proposed list may be one the server will reject)."""
    return ",".join(f"{b.name}={b.weight}" for b in backends)


def merge(
    ref: Ref, backends: Sequence[DeclaredBackend], assignments: Sequence[tuple[str, int]], option: str = "--set"
) -> list[DeclaredBackend]:
    """The full new backends list: same order, same fields, the assigned weights replaced."""
    names = [b.name for b in backends]
    unknown = [n for n, _ in assignments if n not in names]
    if unknown:
        hint = "A new backend needs a service and port: add it to the manifest"
        raise unknown_names(option, f"{ref} has no backend", unknown, names, hint)
    new = dict(assignments)
    return [b.with_weight(new[b.name]) if b.name in new else DeclaredBackend(b) for b in backends]


def changes(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]) -> list[str]:
    """What differs between two backends lists, one line per changed field, by backend name."""
    old = {b.get("name"): b for b in before}
    lines: list[str] = []
    for b in after:
        prev = old.get(b.get("name"), {})
        for key in sorted(set(prev) | set(b), key=lambda k: (k != "weight", k)):
            if prev.get(key) != b.get(key):
                lines.append(f"spec.backends[name={b.get('name')}].{key}: {prev.get(key, '-')} -> {b.get(key, '-')}")
    gone = [n for n in old if n not in {b.get("name") for b in after}]
    lines += [f"spec.backends[name={n}]: removed" for n in gone]
    return lines


def draining_of(backends: Sequence[DeclaredBackend]) -> frozenset[str]:
    """The backends marked `drain: true` (persistent mode keeps their sessions at weight 0)."""
    return frozenset(b.name for b in backends if b.drain)


def plan_change(
    before: Sequence[DeclaredBackend], after: Sequence[DeclaredBackend], samples: int | None = None
) -> Plan:
    """The core planner over two backends lists (raises SpecError when a side is not a valid split)."""
    b, a = weights_of(before), weights_of(after)
    return plan(b, a) if samples is None else estimate_plan(b, a, samples=samples)


@kube_errors
def run_live(args: argparse.Namespace, out: TextIO) -> int:
    # The clash first: `plan shop --from a=1 --to a=2` gave a NAME, so "needs a NAME" would be wrong.
    if args.before is not None or args.after is not None:
        raise UsageError("give either --from/--to or NAME --set, not both")
    name = route_name(args.name)
    if args.filename is not None and args.name is not None and name is None:
        raise UsageError(f"with -f, NAME is httproute/NAME (the HTTPRoute of the file), not {args.name[:64]!r}")
    if args.name is None and args.filename is None:
        raise UsageError("--set needs a TrafficSplit NAME: plan NAME --set NAME=W,...")
    if args.assignments is None:
        what = args.name if args.filename is None else f"-f {args.filename}"
        raise UsageError(f"plan {what} needs --set NAME=W,... (the backends that change)")
    assignments = parse_assignments(args.assignments)
    if args.filename is not None:
        return _run_route_file(args, name, assignments, out)
    if name is not None:
        return _run_route(args, name, assignments, out)
    if args.rule is not None:
        raise UsageError("--rule goes with httproute/NAME")
    cluster = Cluster.connect(args)
    ref = cluster.ref(args.name)
    current = spec_backends(ref, cluster.get(args.name))
    proposed = merge(ref, current, assignments)
    try:
        result = plan_change(current, proposed, args.sample)
    except SpecError as exc:
        raise SpecError([f"{ref}: {p}" for p in exc.problems]) from exc
    if args.json:
        trafficsplit = {"namespace": ref.namespace, "name": ref.name}
        emit_json({"trafficsplit": trafficsplit, **to_json(result, draining_of(proposed))}, out)
    else:
        out.write(f"{ref}\n" + render(result, flag="--set", draining=draining_of(proposed)))
    return EXIT_OK


def route_plan(
    ref: Ref,
    obj: Mapping[str, Any],
    rule: str | None,
    assignments: Sequence[tuple[str, int]],
    samples: int | None = None,
    policies: Sequence[Mapping[str, Any]] = (),
) -> tuple[RouteRule, Plan, ServedChange]:
    """The plan for one rule of an HTTPRoute (`rule`: `--rule`, None for the only weighted one): the same core
    weights and planner as a TrafficSplit's, over the rule's backendRefs by their split names
    (`gatewayapi.backends.rule_weights`); and what the gateway moves under the TrafficSplitPolicy attached to the rule
    (`policies`: the namespace's bodies), resolved as the operator does."""
    route = parse_route(ref, obj)
    change = rule_change(ref, route, choose_rule(ref, route, rule), assignments)
    result, served = plan_rule(change, samples, policies)
    return change.rule, result, served


def plan_rule(
    change: RuleChange, samples: int | None = None, policies: Sequence[Mapping[str, Any]] = ()
) -> tuple[Plan, ServedChange]:
    """The core's plan of one rule's change and what its gateway serves; SpecError when a side is no split (a total
    of 0: the rule answers 500)."""
    try:
        before, after = Weights.of(change.before), Weights.of(change.after)
        result = plan(before, after) if samples is None else estimate_plan(before, after, samples=samples)
    except SpecError as exc:
        raise SpecError([f"{change.ref}: {p}" for p in exc.problems]) from exc
    chosen, standing = policy_for_rule(change.route, change.rule, _parsed(policies))
    refused = _refused(policies, chosen, change.route.meta.key)
    if refused is not None:  # the operator found the policy Invalid for this route: the rule keeps its defaults
        chosen, standing = None, refused
    return result, served_change(change.rule, chosen, result, standing)


def _parsed(bodies: Sequence[Mapping[str, Any]]) -> list[Policy]:
    """The policies as the operator keeps them: a body the parser refuses is left out there too."""
    out: list[Policy] = []
    for body in bodies:
        try:
            out.append(parse_policy(body))
        except SpecError:
            continue
    return out


def _refused(bodies: Sequence[Mapping[str, Any]], chosen: Policy | None, route: str) -> Outcome | None:
    """`Invalid` as the chosen policy's status says it for `route` (the rule's split refused its settings: only the
    translation knows, so the plan reads what the operator wrote)."""
    if chosen is None:
        return None
    for body in bodies:
        meta = body.get("metadata") or {}
        if (meta.get("namespace"), meta.get("name")) != (chosen.meta.namespace, chosen.meta.name):
            continue
        for a in (body.get("status") or {}).get("ancestors") or []:
            for c in a.get("conditions") or [] if isinstance(a, Mapping) else []:
                message = str(c.get("message") or "") if isinstance(c, Mapping) else ""
                if c.get("reason") == PolicyReason.INVALID and f"HTTPRoute {route}:" in message:
                    return Outcome(PolicyReason.INVALID, f"{chosen.key}: {message[:500]}")
    return None


def served_text(s: ServedChange) -> str:
    """One line: under which policy the gateway serves the rule, and what it moves."""
    how = f"assignment {s.assignment.value}, sticky.mode {s.mode.value}"
    if s.draining:
        how += f", draining {', '.join(sorted(s.draining))}"
    if s.policy is not None:
        where = f"under TrafficSplitPolicy {s.policy} ({how})"
        if s.standing is not None and s.standing.reason is not PolicyReason.ACCEPTED:
            where += f" [{s.standing.reason.value}: {s.standing.message[:200]}]"
    elif s.standing is not None:
        where = f"without a policy ({how}; not applied: {s.standing.message[:200]})"
    else:
        where = f"without a policy ({how})"
    exact = "" if s.exact else " (a fresh table's figure; the live table's is within the bound above)"
    return f"the gateway serves this rule {where}: the change moves {pct(s.moved_share)} of existing sessions{exact}\n"


def served_json(s: ServedChange) -> dict[str, Any]:
    return {
        "policy": s.policy,
        "standing": None if s.standing is None else {"reason": s.standing.reason.value, "message": s.standing.message},
        "assignment": s.assignment.value,
        "mode": s.mode.value,
        "draining": sorted(s.draining),
        "moved_share": float(s.moved_share),
        "exact": s.exact,
    }


def route_ref(obj: Mapping[str, Any]) -> Ref:
    meta = obj.get("metadata") or {}
    return Ref(str(meta.get("namespace") or ""), str(meta.get("name") or ""), "httproute")


def _run_route_file(
    args: argparse.Namespace, name: str | None, assignments: Sequence[tuple[str, int]], out: TextIO
) -> int:
    """Offline: the route and its policies from the file, no API server."""
    found = read_route_file(args.filename, name, args.namespace)
    ref = route_ref(found.route)
    rule, result, served = route_plan(ref, found.route, args.rule, assignments, args.sample, found.policies)
    return _print_route_plan(args, ref, rule, result, served, out)


def _run_route(args: argparse.Namespace, name: str, assignments: Sequence[tuple[str, int]], out: TextIO) -> int:
    cluster = Cluster.connect(args)
    ref = Ref(cluster.namespace, name, "httproute")
    obj = cluster.get_httproute(name)
    rule, result, served = route_plan(ref, obj, args.rule, assignments, args.sample, cluster.list_policies())
    return _print_route_plan(args, ref, rule, result, served, out)


def route_plan_text(ref: Ref, rule: RouteRule, result: Plan, served: ServedChange) -> str:
    return f"{ref} rule {rule.index}\n" + render(result, flag="--set", draining=served.draining) + served_text(served)


def _print_route_plan(
    args: argparse.Namespace, ref: Ref, rule: RouteRule, result: Plan, served: ServedChange, out: TextIO
) -> int:
    if args.json:
        route = {"namespace": ref.namespace, "name": ref.name, "rule": rule.index}
        emit_json({"httproute": route, **to_json(result, served.draining), "served": served_json(served)}, out)
    else:
        out.write(route_plan_text(ref, rule, result, served))
    return EXIT_OK
