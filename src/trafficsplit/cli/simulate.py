"""`trafficsplit simulate`: the three stickiness bills (docs/spec.md §8) for a client mix, before choosing a rule."""

from __future__ import annotations

import argparse
import re
from fractions import Fraction
from typing import Any, TextIO

from trafficsplit.cli.common import EXIT_OK, UsageError, add_json_flag, emit_json, pct
from trafficsplit.core.control.simulate import (
    AMDAHL_REPLICAS,
    RULES,
    Bill,
    Capacity,
    Simulation,
    parse_client_rows,
    simulate,
)
from trafficsplit.core.model.ring import DEFAULT_POINTS
from trafficsplit.core.model.weights import parse_int

DEFAULT_TARGET = Fraction(7, 10)
_DECIMAL = re.compile(r"[0-9]{1,12}(\.[0-9]{1,6})?")


def register(sub: Any) -> None:
    p = sub.add_parser("simulate", help="show load, rebinding, loss and capacity of sticky vs non-sticky routing")
    p.add_argument(
        "--clients",
        required=True,
        metavar="PREFIX:COUNT:REQS,...",
        help="client mix rows, e.g. major:1:2000,medium:9:400,minor:90:50",
    )
    replicas = p.add_mutually_exclusive_group(required=True)
    replicas.add_argument("--replicas", type=int, metavar="N", help="replicas k1..kN")
    replicas.add_argument(
        "--replica-names",
        metavar="NAME,...",
        help="name the replicas instead, e.g. pods' HOST:PORT as the gateway's endpoint ring names them (needs --add)",
    )
    p.add_argument(
        "--points", default=str(DEFAULT_POINTS), metavar="P", help="ring points per replica (default %(default)s)"
    )
    p.add_argument("--add", metavar="NAME,...", help="replicas that join (default kN+1)")
    p.add_argument("--lose", metavar="NAME,...", help="replicas that leave, of k1..kN (default k1)")
    p.add_argument(
        "--amdahl",
        metavar="N,...",
        help=f"replica counts for Amdahl's bound (default {','.join(map(str, AMDAHL_REPLICAS))})",
    )
    p.add_argument("--peak-rps", metavar="R", help="capacity model: the mix's peak requests/s")
    p.add_argument("--safe-rps", metavar="R", help="capacity model: requests/s one replica serves safely")
    p.add_argument(
        "--target-utilization",
        metavar="U",
        help=f"capacity model: the share of the safe rate to plan for (default {float(DEFAULT_TARGET)})",
    )
    add_json_flag(p)
    p.set_defaults(handler=run)


def _names(flag: str, text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    names = tuple(n.strip() for n in text.split(","))
    if any(not n for n in names):
        raise UsageError(f"{flag}: {text!r} must be comma-separated replica names")
    return names


def _counts(text: str | None) -> tuple[int, ...]:
    if text is None:
        return AMDAHL_REPLICAS
    counts = [parse_int(t.strip()) for t in text.split(",")]
    if any(c is None for c in counts):
        raise UsageError(f"--amdahl: {text!r} must be comma-separated replica counts")
    return tuple(c for c in counts if c is not None)


def _decimal(flag: str, text: str) -> Fraction:
    if _DECIMAL.fullmatch(text) is None:
        raise UsageError(f"{flag}: {text!r} must be a decimal number like 1200 or 0.75")
    return Fraction(text)


def _capacity(args: argparse.Namespace) -> Capacity | None:
    if args.peak_rps is None and args.safe_rps is None:
        if args.target_utilization is not None:
            raise UsageError("--target-utilization needs --peak-rps and --safe-rps")
        return None
    if args.peak_rps is None or args.safe_rps is None:
        raise UsageError("the capacity model needs both --peak-rps and --safe-rps")
    target = DEFAULT_TARGET
    if args.target_utilization is not None:
        target = _decimal("--target-utilization", args.target_utilization)
    return Capacity(_decimal("--peak-rps", args.peak_rps), _decimal("--safe-rps", args.safe_rps), target)


def _num(x: Fraction) -> float:
    return round(float(x), 6)


def to_json(sim: Simulation) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "clients": sim.clients,
        "requests": sim.requests,
        "replicas": list(sim.replicas),
        "points": sim.points,
        "added": list(sim.added),
        "lost": list(sim.lost),
        "rules": {
            name: {
                "load": list(r.load),
                "imbalance": float(r.imbalance),
                "load_after_add": list(r.load_after_add),
                "imbalance_after_add": float(r.imbalance_after_add),
                "peak_before": r.peak_before,
                "peak_after_add": r.peak_after,
                "peak_drop": float(r.peak_drop),
                "busiest": sim.replicas[r.busiest],
                "busiest_drop": float(r.busiest_drop),
                "load_after_loss": None if r.load_after_loss is None else list(r.load_after_loss),
            }
            for name, r in sim.rules.items()
        },
        "rebinding": {
            name: {"clients": b.clients, "request_share": float(b.request_share)} for name, b in sim.rebinding.items()
        },
        "loss": _bills(sim.loss),
        "moved_on_loss": _bills(sim.moved_on_loss),
        "serial_fraction": float(sim.serial_fraction),
        "amdahl": [{"replicas": n, "speedup": float(s)} for n, s in sim.amdahl],
        "speedups": [
            {
                "replicas": sp.replicas,
                "sticky": float(sp.sticky),
                "non_sticky": None if sp.non_sticky is None else float(sp.non_sticky),
            }
            for sp in sim.speedups
        ],
    }
    c = sim.capacity
    if c is not None:
        doc["capacity"] = {
            "peak_rps": _num(c.capacity.peak_rps),
            "safe_rps": _num(c.capacity.safe_rps),
            "target_utilization": _num(c.capacity.target),
            "even_replicas": c.even_replicas,
            "rules": {
                name: {
                    "busiest_rps": _num(r.busiest_rps),
                    "busiest_utilization": _num(r.utilization),
                    "replicas_needed": r.replicas_needed,
                    "replicas_needed_by_search": r.replicas_needed,
                    "replicas_needed_by_imbalance": r.replicas_needed_by_imbalance,
                }
                for name, r in c.rules.items()
            },
            "by_replicas": [
                {
                    "replicas": row.replicas,
                    "busiest_lower_bound_rps": _num(row.busiest_lower_bound_rps),
                    "busiest_lower_bound_utilization": _num(row.utilization),
                }
                for row in c.by_count
            ],
            "largest_session": {
                "share": float(sim.serial_fraction),
                "rps": _num(c.largest_rps),
                "utilization": _num(c.largest_utilization),
                "max_share_within_target": _num(c.max_largest_share),
            },
        }
    return doc


def _count(k: int | None) -> str:
    return "inf" if k is None else str(k)


def _bills(bills: dict[str, Bill] | None) -> dict[str, Any] | None:
    if bills is None:
        return None  # one replica: losing it leaves no survivor, so the figures do not apply
    return {name: {"sessions": b.clients, "request_share": float(b.request_share)} for name, b in bills.items()}


def render(sim: Simulation) -> str:
    n = len(sim.replicas)
    added, lost = ",".join(sim.added), ",".join(sim.lost)
    lines = [
        f"{sim.clients} clients, {sim.requests} requests, replicas {','.join(sim.replicas)}, "
        f"{sim.points} ring points per replica",
        "",
    ]
    lines.append(f"1. load (imbalance = busiest share x {n}; 1.00 is even)")
    for rule in RULES:
        r = sim.rules[rule]
        lines.append(f"  {rule:<18} {' '.join(f'{x:>6}' for x in r.load)}   imbalance {float(r.imbalance):.2f}")
    lines.append(f"2. adding {added}: bindings that change, and the peak load before vs after (any replica)")
    for rule in RULES:
        r, b = sim.rules[rule], sim.rebinding[rule]
        lines.append(
            f"  {rule:<18} {b.clients:>6} clients ({pct(b.request_share, 1)} of requests) rebound; "
            f"peak {r.peak_before} -> {r.peak_after} requests, peak drop {pct(r.peak_drop, 2)}; "
            f"imbalance {float(r.imbalance_after_add):.2f}"
        )
    if sim.loss is None or sim.moved_on_loss is None:
        lines.append("3. losing a replica: n/a (one replica: none can be lost and leave a survivor)")
    else:
        lines.append(f"3. losing {lost}: sessions lost, and sessions on surviving replicas that move anyway")
        for rule in RULES:
            b, m = sim.loss[rule], sim.moved_on_loss[rule]
            lines.append(
                f"  {rule:<18} {b.clients:>6} sessions ({pct(b.request_share, 1)} of requests) lost; "
                f"{m.clients} moved between survivors"
            )
    lines.append(f"serial fraction s = {float(sim.serial_fraction):.4f} (the largest client's share of requests)")
    bounds = ", ".join(f"S({_count(k)}) = {float(v):.2f}" for k, v in sim.amdahl)
    lines.append(f"Amdahl bound: {bounds}")
    speedups = ", ".join(
        f"{_count(sp.replicas)}: {'inf' if sp.non_sticky is None else f'{float(sp.non_sticky):g}'}"
        for sp in sim.speedups
    )
    lines.append(f"non-sticky speedup (no serial part: n): {speedups}")
    c = sim.capacity
    if c is not None:
        cap = c.capacity
        lines.append(
            f"4. capacity: peak {float(cap.peak_rps):g} req/s, safe {float(cap.safe_rps):g} req/s per replica, "
            f"target {pct(cap.target, 0)}; an even split needs {c.even_replicas}"
        )
        for rule in RULES:
            rc = c.rules[rule]
            needed = str(rc.replicas_needed) if rc.replicas_needed is not None else "none (see largest session)"
            lines.append(
                f"  {rule:<18} busiest replica {float(rc.busiest_rps):.1f} req/s = {pct(rc.utilization, 1)} of safe; "
                f"replicas needed {needed} by search, {rc.replicas_needed_by_imbalance} by imbalance"
            )
        lines.append(
            f"  largest session {float(c.largest_rps):.1f} req/s = {pct(c.largest_utilization, 1)} of one replica; "
            f"sticky rules fit the target only while it is <= {pct(c.max_largest_share, 1)} of requests"
        )
        lines.append("  sticky, per replica count: the busiest replica carries at least peak / S(n)")
        for row, sp in zip(c.by_count, sim.speedups, strict=True):
            lines.append(
                f"  {_count(row.replicas):>6} replicas: S = {float(sp.sticky):.2f} (non-sticky "
                f"{'inf' if sp.non_sticky is None else f'{float(sp.non_sticky):g}'}), busiest >= "
                f"{float(row.busiest_lower_bound_rps):.1f} req/s = {pct(row.utilization, 1)} of safe"
            )
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace, out: TextIO) -> int:
    points = parse_int(args.points)
    if points is None:
        raise UsageError(f"--points: {args.points!r} must be an integer")
    sim = simulate(
        parse_client_rows(args.clients),
        args.replicas if args.replicas is not None else _names("--replica-names", args.replica_names) or (),
        points=points,
        add=_names("--add", args.add),
        lose=_names("--lose", args.lose),
        amdahl_at=_counts(args.amdahl),
        capacity=_capacity(args),
    )
    if args.json:
        emit_json(to_json(sim), out)
    else:
        out.write(render(sim))
    return EXIT_OK
