"""A `bench_flip` run split into its two legs, from the JSON it wrote and the logs it kept (`--keep-logs DIR`): per
flip, patch → the operator's publish (its `generation N` log line, the first after the patch) and that publish → the
last replica's `ACCEPTED` for N (their publisher log lines). Prints p50 and p90 of each leg per side. Nothing is
asserted; clocks are the one host's.

    python bench/flip_legs.py bench/results/DATE-flip.json DIR
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_flip import pct  # noqa: E402  (the benches' one percentile)

# side → (its operator's log, the prefix of its replicas' processor logs)
SIDES = {
    "TrafficSplit": ("operator-op-ts-0.log", "trafficsplit"),
    "HTTPRoute": ("operator-op-gw-1.log", "gateway-api"),
}


def _stamped(path: Path, pattern: str) -> list[tuple[float, int]]:
    """(wall clock, generation) of each line of a log matching `pattern` (its group 1: the number)."""
    out = []
    for line in path.read_text().splitlines():
        m = re.search(pattern, line)
        if m is not None:
            at = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=datetime.UTC)
            out.append((at.timestamp(), int(m.group(1))))
    return out


def legs(result: dict[str, object], logs: Path) -> dict[str, dict[str, dict[str, float]]]:
    patched = result["patched_at"]
    assert isinstance(patched, dict)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for side, (operator_log, prefix) in SIDES.items():
        published = _stamped(logs / operator_log, r"generation (\d+): ")
        accepted = [
            {g: t for t, g in _stamped(p, r"publish generation (\d+) from .*ACCEPTED")}
            for p in sorted(logs.glob(f"{prefix}-gw-*-extproc.log"))
        ]
        to_publish, to_accepted = [], []
        for at in patched[side]:
            # the log's clock has millisecond resolution: a publish in the patch's own millisecond counts
            first = next(((t, g) for t, g in published if t >= at - 0.001), None)
            if first is None or not accepted or not all(first[1] in a for a in accepted):
                continue
            to_publish.append((first[0] - at) * 1000)
            to_accepted.append((max(a[first[1]] for a in accepted) - first[0]) * 1000)
        out[side] = {
            name: {"n": len(xs), "p50": round(pct(xs, 0.5), 1), "p90": round(pct(xs, 0.9), 1)}
            for name, xs in (("patch_to_publish", to_publish), ("publish_to_all_accepted", to_accepted))
            if xs
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result", type=Path)
    ap.add_argument("logs", type=Path)
    args = ap.parse_args()
    print(json.dumps(legs(json.loads(args.result.read_text()), args.logs), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
