"""`trafficsplit simulate`: the three stickiness bills (SPEC §8) for a client mix, before choosing a rule."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from trafficsplit.cli.common import EXIT_OK, add_json_flag, emit_json, pct
from trafficsplit.core.simulate import RULES, Simulation, parse_client_rows, simulate


def register(sub: Any) -> None:
    p = sub.add_parser("simulate", help="show load, rebinding and loss of sticky vs non-sticky routing")
    p.add_argument(
        "--clients",
        required=True,
        metavar="PREFIX:COUNT:REQS,...",
        help="client mix rows, e.g. major:1:2000,medium:9:400,minor:90:50",
    )
    p.add_argument("--replicas", type=int, required=True, metavar="N", help="replicas k1..kN")
    add_json_flag(p)
    p.set_defaults(handler=run)


def to_json(sim: Simulation) -> dict[str, Any]:
    return {
        "clients": sim.clients,
        "requests": sim.requests,
        "replicas": list(sim.replicas),
        "rules": {
            name: {
                "load": list(r.load),
                "imbalance": float(r.imbalance),
                "load_after_add": list(r.load_after_add),
                "imbalance_after_add": float(r.imbalance_after_add),
                "busiest": sim.replicas[r.busiest],
                "busiest_drop": float(r.busiest_drop),
            }
            for name, r in sim.rules.items()
        },
        "rebinding": {
            name: {"clients": b.clients, "request_share": float(b.request_share)} for name, b in sim.rebinding.items()
        },
        "loss": {
            name: {"sessions": b.clients, "request_share": float(b.request_share)} for name, b in sim.loss.items()
        },
        "serial_fraction": float(sim.serial_fraction),
        "amdahl": [{"replicas": n, "speedup": float(s)} for n, s in sim.amdahl],
    }


def render(sim: Simulation) -> str:
    n = len(sim.replicas)
    lines = [f"{sim.clients} clients, {sim.requests} requests, replicas {','.join(sim.replicas)}", ""]
    lines.append(f"1. load (imbalance = busiest share x {n}; 1.00 is even)")
    for rule in RULES:
        r = sim.rules[rule]
        lines.append(f"  {rule:<18} {' '.join(f'{x:>6}' for x in r.load)}   imbalance {float(r.imbalance):.2f}")
    lines.append(f"2. adding k{n + 1}: bindings that change, and the busiest replica's drop")
    for rule in RULES:
        r, b = sim.rules[rule], sim.rebinding[rule]
        lines.append(
            f"  {rule:<18} {b.clients:>6} clients ({pct(b.request_share, 1)} of requests) rebound; "
            f"{sim.replicas[r.busiest]} drops {pct(r.busiest_drop, 1)}; imbalance {float(r.imbalance_after_add):.2f}"
        )
    lines.append("3. losing k1: sessions lost")
    for rule in RULES:
        b = sim.loss[rule]
        lines.append(f"  {rule:<18} {b.clients:>6} sessions ({pct(b.request_share, 1)} of requests)")
    lines.append(f"serial fraction s = {float(sim.serial_fraction):.4f} (the largest client's share of requests)")
    bounds = ", ".join(f"S({k if k is not None else 'inf'}) = {float(v):.2f}" for k, v in sim.amdahl)
    lines.append(f"Amdahl bound: {bounds}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace, out: TextIO) -> int:
    sim = simulate(parse_client_rows(args.clients), args.replicas)
    if args.json:
        emit_json(to_json(sim), out)
    else:
        out.write(render(sim))
    return EXIT_OK
