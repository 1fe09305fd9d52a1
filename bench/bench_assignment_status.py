"""The cost of reading status.assignment back: 200 tampered TrafficSplits through the operator's pure reconcile pass.

100 `minimal` splits whose stored table was edited (25 each: runs reversed, backend names swapped, a foreign backend
list, 90 KB of junk runs) and 100 `hash` splits carrying the same junk in status.assignment, all published before
(status.generation set). Each pass is `desired_state` with the engine's long-lived `CompileMemo` and no last good
forms, as a standby (or a leader whose publish is held back) computes it: nothing keeps the splits' tables between
passes but the memo. Prints and writes (`--out`) the first pass and the median of the following ones, plus the cost
of refusing one 90 KB junk value. Nothing is asserted (tests/unit/test_assignment_status.py counts the parses).

It uses only APIs that predate the status.assignment check, so the same script measures the tree before it:

    python bench/bench_assignment_status.py [--passes 10] [--out bench/results/DATE-assignment-status.json]
    PYTHONPATH=<older tree>/src python bench/bench_assignment_status.py --label before
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "src"))  # appended: a PYTHONPATH given on the command line (an older tree) comes first

from trafficsplit.core.control.reconcile import CompileMemo, desired_state  # noqa: E402
from trafficsplit.core.control.resolve import SplitObject  # noqa: E402
from trafficsplit.core.control.status import PublishView, ReplicaAck, compute_status  # noqa: E402
from trafficsplit.core.model.assignment import SlotTable  # noqa: E402

W1 = {"a": 40, "b": 40, "c": 20}
W2 = {"a": 30, "b": 40, "c": 30}
JUNK = "9x9," * 22_500  # 90,000 characters: what the CRD's old maxLength let through
VIEW = PublishView(number=1, replicas=(ReplicaAck("gw-0", 1),))


def split(i: int, weights: dict[str, int], assignment: str, generation: int, status: dict[str, Any]) -> SplitObject:
    spec = {
        "hosts": [f"s{i}.example"],
        "assignment": assignment,
        "sticky": {"cookie": {"name": "sid"}},
        "backends": [
            {"name": n, "weight": w, "endpoints": [f"10.0.0.{k + 1}:80"]} for k, (n, w) in enumerate(weights.items())
        ],
    }
    return SplitObject(
        namespace="default",
        name=f"s{i}",
        uid=f"u-{i}",
        generation=generation,
        created="2026-01-01T00:00:00Z",
        spec=spec,
        status=status,
    )


def tamper(kind: int, a: dict[str, Any]) -> dict[str, Any]:
    if kind == 0:
        return {**a, "runs": ",".join(reversed(a["runs"].split(",")))}
    if kind == 1:
        b = list(a["backends"])
        b[0], b[1] = b[1], b[0]
        return {**a, "backends": b}
    if kind == 2:
        return {**a, "backends": ["x", "y", "z"]}
    return {**a, "runs": JUNK}


def splits() -> list[SplitObject]:
    out = []
    for i in range(200):
        if i < 100:
            first = split(i, W1, "minimal", 1, {})
            d = desired_state([first], {}, {}, {}, static=True)
            status = compute_status(first, d.outcomes[first.key], VIEW, "2026-12-01T00:00:00Z").status.to_dict()
            out.append(split(i, W2, "minimal", 2, {**status, "assignment": tamper(i % 4, status["assignment"])}))
        else:
            status = {"generation": 1, "assignment": {"slots": 10_000, "backends": ["a", "b", "c"], "runs": JUNK}}
            out.append(split(i, W2, "hash", 2, status))
    return out


def refuse_junk_ns(repeat: int) -> float:
    """One 90 KB junk value refused by the reader, best of `repeat` (the reader's signature changed: try both)."""
    raw = {"slots": 10_000, "backends": ["a", "b", "c"], "weights": [1, 1, 1], "runs": JUNK, "digest": ""}
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter_ns()
        try:
            SlotTable.from_status(raw, "u-0")  # type: ignore[call-arg,unused-ignore]
        except TypeError:  # the older reader: from_status(raw) -> SlotTable | None
            SlotTable.from_status(raw)  # type: ignore[call-arg,unused-ignore]
        except Exception:  # refused: the path measured
            pass
        best = min(best, time.perf_counter_ns() - t)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passes", type=int, default=10)
    ap.add_argument("--label", default="after")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    objs = splits()
    memo = CompileMemo()
    load_start = os.getloadavg()
    times = []
    for _ in range(args.passes):
        t = time.perf_counter()
        desired_state(objs, {}, {}, {}, static=True, memo=memo)
        times.append(time.perf_counter() - t)
    result = {
        "benchmark": "assignment-status",
        "label": args.label,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "splits": {"minimal_tampered": 100, "hash_with_junk": 100},
        "passes": args.passes,
        "first_pass_ms": round(times[0] * 1000, 1),
        "later_pass_median_ms": round(statistics.median(times[1:]) * 1000, 1) if len(times) > 1 else None,
        "refuse_90kb_junk_us": round(refuse_junk_ns(5) / 1000, 1),
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "loadavg_start": [round(x, 2) for x in load_start],
            "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        },
    }
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
