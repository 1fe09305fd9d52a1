"""`flip NAME`: the blue-green switch — two backends, one holding all the weight, trade places (100/0 → 0/100).

Why a command: the flip is the one weight change a blue-green user makes, usually under pressure; spelling it as
set-weights invites a typo that changes the total (and re-draws every session's slot, docs/spec.md §2). The rule is
strict on purpose: exactly two backends and one of them at weight 0, so a canary split such as 95/5 is refused rather
than swapped into a 5/95 nobody asked for. Swapping keeps the total, so the plan shows exactly the old side moving.
`--drain` (sticky.mode persistent) marks the old side `drain: true`: its sessions stay until they go idle instead
(docs/displacement.md).

`flip httproute/NAME --rule N` is the same switch on one HTTPRoute rule's two backendRefs, written as set-weights
writes a rule (a JSON patch testing the resourceVersion read). It takes no `--drain`: a rule drains under its
TrafficSplitPolicy's `sticky.drain` (persistent mode keeps a weight-0 backend's sessions by default).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, TextIO

from trafficsplit.cli.common import UsageError
from trafficsplit.cli.kplan import add_rule_argument, format_backends, spec_backends
from trafficsplit.cli.kube import Cluster, Ref, add_kube_arguments, kube_errors
from trafficsplit.cli.routes import flipped_rule, route_name
from trafficsplit.cli.set_weights import (
    add_apply_arguments,
    apply_change,
    apply_rule_change,
    check_route_flags,
    read_rule,
)
from trafficsplit.core.control.spec import DeclaredBackend


def register(sub: Any) -> None:
    p = sub.add_parser("flip", help="blue-green: swap the weights of a two-backend split where one side has 0")
    p.add_argument("name", metavar="NAME", help="the TrafficSplit, or httproute/NAME (with --rule)")
    add_rule_argument(p)
    p.add_argument(
        "--drain",
        action="store_true",
        help="a TrafficSplit in sticky.mode persistent: mark the side going to 0 `drain: true`, so its sessions "
        "stay until they go idle (then Drained=True) while new sessions go to the other side; without it the flip "
        "moves everyone",
    )
    add_apply_arguments(p)
    add_kube_arguments(p)
    p.set_defaults(handler=run)


def flipped(ref: Ref, backends: Sequence[DeclaredBackend], drain: bool = False) -> list[DeclaredBackend]:
    """The two backends with their weights swapped (order and every other field kept), the side going to 0 marked
    draining if `drain`, the side taking the weight never; UsageError otherwise."""
    weights = [b.weight for b in backends]
    if len(backends) != 2 or sorted(w == 0 for w in weights) != [False, True]:
        raise UsageError(
            f"{ref}: flip needs exactly two backends with one at weight 0; it has {format_backends(backends)}"
        )
    first, second = backends
    return [
        first.with_weight(second.weight, drain and second.weight == 0),
        second.with_weight(first.weight, drain and first.weight == 0),
    ]


@kube_errors
def run(args: argparse.Namespace, out: TextIO) -> int:
    name = route_name(args.name)
    if name is not None:
        check_route_flags(args)
        if args.drain:
            raise UsageError(
                "--drain goes with a TrafficSplit: a rule drains under its TrafficSplitPolicy's sticky.drain"
            )
        cluster = Cluster.connect(args)
        obj, ref, current = read_rule(cluster, name, args.rule)
        return apply_rule_change(cluster, obj, flipped_rule(ref, current.route, current.rule), args, out, ask=False)
    if args.rule is not None:
        raise UsageError("--rule goes with httproute/NAME")
    cluster = Cluster.connect(args)
    ref = cluster.ref(args.name)
    obj = cluster.get(args.name)
    return apply_change(cluster, ref, obj, flipped(ref, spec_backends(ref, obj), args.drain), args, out, ask=False)
