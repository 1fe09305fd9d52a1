"""What a neighbour's table costs the operator's passes: the engine with Gateway API on and stand-in replicas (the unit
tier's harness, `tests/unit/test_operator_gateways.py`: real fleets over gRPC to in-process replicas that ACK at
once, a stand-in API server for status), Gateway `two` with one route flipped, Gateway `one` holding N HTTPRoutes of
`--matches` PathPrefix matches each on one hostname, with a replica of its own (so its generation content counts,
as on the node). Per flip: the time from the route's watch event to its parent `Accepted` at the new generation,
and the time of every engine pass in between.

Side by side in one run: the conditions (N neighbour routes, and with `--tree DIR` another source tree's operator,
e.g. a `git archive` of the commit before a change) alternate round by round, each in its own process, so each sees
the same machine. Prints and writes (`--out`) p50/p90 per condition and the ratio of each to N = 0 of its tree.
Nothing is asserted.

    python bench/bench_neighbour_pass.py [--routes 0,25,100] [--rounds 3] [--flips 10] [--tree DIR] \
        [--out bench/results/DATE-neighbour-pass.json]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_flip import pct  # noqa: E402  (the benches' one percentile)


def summary(xs: list[float]) -> dict[str, float]:
    return {"p50": round(pct(xs, 0.5), 2), "p90": round(pct(xs, 0.9), 2)}


async def measure(routes: int, matches: int, flips: int) -> dict[str, list[float]]:
    """One condition, in this process (the tree is whatever `sys.path` holds)."""
    from tests.unit.test_operator_engine import until
    from tests.unit.test_operator_gateways import gateways, route_body

    def neighbour(i: int) -> dict[str, Any]:
        body = route_body(f"nb-{i}", "one", (100, 0))
        rule = body["spec"]["rules"][0]
        rule["matches"] = [{"path": {"type": "PathPrefix", "value": f"/n{i}/{j}"}} for j in range(matches)]
        rule["backendRefs"] = [{"name": "blue", "port": 80}]
        return body

    async with gateways(Path(tempfile.mkdtemp()), "one", "two") as p:
        api = p.api
        await p.start()
        await until(lambda: api.accepted_at("two-route") == 1, timeout=120)
        for i in range(routes):
            api.put("httproute", neighbour(i))
        if routes:
            await until(lambda: api.accepted_at(f"nb-{routes - 1}") == 1, timeout=600)
        await asyncio.sleep(0.5)
        passes: list[float] = []
        run_pass = p.engine.run_pass

        async def timed() -> None:
            t0 = time.perf_counter()
            await run_pass()
            passes.append((time.perf_counter() - t0) * 1000)

        p.engine.run_pass = timed  # type: ignore[method-assign]
        accepted: list[float] = []
        for g in range(2, 2 + flips):
            weights = (10, 90) if g % 2 else (90, 10)
            t0 = time.perf_counter()
            api.put("httproute", route_body("two-route", "two", weights, generation=g))
            await until(lambda g=g: api.accepted_at("two-route") == g, timeout=120)  # type: ignore[misc]
            accepted.append((time.perf_counter() - t0) * 1000)
        return {"pass_ms": passes, "accepted_ms": accepted, "passes": [float(len(passes))]}


def worker(args: argparse.Namespace) -> int:
    tree = Path(args.tree).resolve()
    for part in (".", "extproc", "operator", "src"):
        sys.path.insert(0, str(tree / part))
    got = asyncio.run(measure(args.worker, args.matches, args.flips))
    print(json.dumps(got))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--routes", default="0,25,100", help="the neighbour's route counts, comma-separated")
    ap.add_argument("--matches", type=int, default=61)
    ap.add_argument("--flips", type=int, default=10, help="flips per condition and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tree", action="append", default=[], help="another source tree to time beside this one")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        args.tree = args.tree[0] if args.tree else str(ROOT)
        return worker(args)
    trees = [str(ROOT), *(str(Path(t).resolve()) for t in args.tree)]
    counts = [int(x) for x in args.routes.split(",")]
    series: dict[str, dict[str, list[float]]] = {}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for r in range(args.rounds):
        for tree in trees:
            for n in counts:
                cmd = [sys.executable, __file__, "--worker", str(n), "--matches", str(args.matches)]
                cmd += ["--flips", str(args.flips), "--tree", tree]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=tree).stdout
                got = json.loads(out.strip().splitlines()[-1])
                s = series.setdefault(f"{tree}|{n}", {"pass_ms": [], "accepted_ms": []})
                s["pass_ms"] += got["pass_ms"]
                s["accepted_ms"] += got["accepted_ms"]
                print(f"round {r + 1}: {Path(tree).name} N={n}: accepted p50 {summary(got['accepted_ms'])['p50']} ms")
    figures: dict[str, Any] = {}
    for key, s in series.items():
        tree, count = key.rsplit("|", 1)
        base = series[f"{tree}|{counts[0]}"]
        f: dict[str, Any] = {k: summary(v) for k, v in s.items()}
        f["ratio_p50"] = {k: round(f[k]["p50"] / max(summary(base[k])["p50"], 1e-9), 2) for k in s}
        figures.setdefault(tree if tree != str(ROOT) else "this tree", {})[count] = f
    doc = {
        "benchmark": "bench_neighbour_pass",
        "date": datetime.date.today().isoformat(),
        "matches_per_route": args.matches,
        "flips_per_condition": args.flips * args.rounds,
        "figures": figures,
        "machine": {"cpus": os.cpu_count(), "loadavg_end": [round(x, 2) for x in os.getloadavg()]},
    }
    print(json.dumps(figures, indent=1))
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
