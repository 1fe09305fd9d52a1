"""The in-process work for one weight flip among N HTTPRoutes on one Gateway. The operator's: translate (through the
operator's memos), the Gateway's content, the numbered generation and its publish payload, per flip; the translation of
a pass in which nothing changed (the status passes after a publish), both with the collector off; and a full cyclic
collection of the heap that leaves, as is and after `gc.freeze` (what operator/heap.py does after the first pass).
A replica's, on the same payloads: the read (`generation_from_proto`) and the builder's transition and serving
snapshots (`snapshot.ResourceBuilder`), each both ways in one run: reusing what the held generation had (the read
with `held_parts`, one builder kept across publishes, as the publisher does) and with nothing reused (no held parts, a
new builder per publish, which builds the held table and the new one: a flip among N rules builds 2N virtual hosts
instead of one). No API server, no Envoy.

Side by side: with `--tree DIR` (e.g. a `git archive` of the commit before a change) the same measurement runs in a
process of that tree's code, then in one of this tree's. Prints and writes (`--out`) the medians. Nothing is asserted.

    python bench/bench_gateway_publish.py [--routes 1000] [--flips 30] [--tree DIR] \
        [--out bench/results/DATE-gateway-publish.json]
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def measure(routes: int, flips: int) -> dict[str, float]:
    """One tree's figures, in this process (the tree is whatever `sys.path` holds)."""
    from tests.unit import gatewayapi as golden
    from tests.unit.test_translate_per_route import gateway_of
    from trafficsplit.core.gatewayapi.translate import ContentMemo, TranslationMemo, translate
    from trafficsplit.wire import generation as wire

    memo, contents = TranslationMemo(), ContentMemo()
    parts = wire.ProtoParts() if hasattr(wire, "ProtoParts") else None  # the trees before it had none
    stores = [golden.inputs_of(gateway_of(routes, weight=w))[0] for w in range(1, flips + 2)]

    try:  # what the operator carries from one publish to the next (the trees before it had none)
        from trafficsplit.core.model.carried import CarriedRules

        carried: Any = CarriedRules()
    except ImportError:
        carried = None

    def publish(number: int) -> Any:
        nonlocal carried
        t = translate(stores[number - 1], memo)
        gen = contents.content(t, "ns/gw", "uid").stamp(number)
        first = carried.numbers() if carried is not None else {}
        msg = wire.generation_to_proto(gen, "bench", first, parts) if parts is not None else None
        if msg is None:
            msg = wire.generation_to_proto(gen, "bench", first)
        if carried is not None:
            carried = carried.carry(gen)
        return msg

    msgs = [publish(1)]
    per_flip, quiet = [], []
    # The work itself, without the collector's pauses (a pass pays one when its allocations cross the threshold:
    # measured apart below); it collects between flips.
    gc.disable()
    for n in range(2, flips + 2):
        t0 = time.perf_counter()
        msgs.append(publish(n))
        per_flip.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        translate(stores[n - 1], memo)
        quiet.append((time.perf_counter() - t0) * 1000)
        gc.collect()
    gc.enable()
    replica = _replica(msgs) if hasattr(wire, "held_parts") else {}  # the trees before it had no reuse to compare
    tracked = len(gc.get_objects())
    collect = _full_collections_ms()
    gc.freeze()
    frozen = _full_collections_ms()
    gc.unfreeze()
    return {
        "publish_per_flip_ms_p50": round(statistics.median(per_flip), 2),
        "quiet_pass_translate_ms_p50": round(statistics.median(quiet), 2),
        "tracked_objects": tracked,
        "full_collection_ms_p50": round(collect, 2),
        "full_collection_after_freeze_ms_p50": round(frozen, 4),
        **replica,
    }


def _replica(msgs: list[Any]) -> dict[str, float]:
    """A replica's read and builder per publish of `msgs` (the first is held before any is timed), reusing the
    held generation's parts and with nothing reused, alternating per publish so both see the same machine."""
    from trafficsplit.wire import generation as wire
    from trafficsplit.wire.snapshot import ResourceBuilder

    kept = ResourceBuilder()
    held_msg = msgs[0]
    held = wire.generation_from_proto(held_msg)
    kept.serving(held)
    took: dict[str, list[float]] = {k: [] for k in ("read_reused", "read_fresh", "build_reused", "build_fresh")}
    gc.disable()
    for msg in msgs[1:]:
        t0 = time.perf_counter()
        wire.generation_from_proto(msg)
        took["read_fresh"].append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        gen = wire.generation_from_proto(msg, wire.held_parts(held_msg, held))
        took["read_reused"].append((time.perf_counter() - t0) * 1000)
        fresh = ResourceBuilder()  # keeps nothing from the last publish: builds the held table and the new one
        t0 = time.perf_counter()
        fresh.transition(held, gen)
        fresh.serving(gen)
        took["build_fresh"].append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        kept.transition(held, gen)
        kept.serving(gen)
        took["build_reused"].append((time.perf_counter() - t0) * 1000)
        held_msg, held = msg, gen
        gc.collect()
    gc.enable()
    return {f"replica_{k}_ms_p50": round(statistics.median(v), 2) for k, v in took.items()}


def _full_collections_ms(times: int = 5) -> float:
    """The median time of `times` full collections, in ms."""
    took = []
    for _ in range(times):
        t0 = time.perf_counter()
        gc.collect()
        took.append((time.perf_counter() - t0) * 1000)
    return statistics.median(took)


def in_process(tree: Path, routes: int, flips: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(tree / p) for p in ("src", "operator", "extproc", "."))}
    # This file's `measure`, loaded by path: with ROOT on sys.path, ROOT's tests (the store builders) would shadow the
    # tree's, whose parsers may differ.
    code = "import importlib.util, json; "
    code += (
        f"spec = importlib.util.spec_from_file_location('bench_gateway_publish', {str(Path(__file__).resolve())!r}); "
    )
    code += "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
    code += f"print(json.dumps(m.measure({routes}, {flips})))"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tree, check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--routes", type=int, default=1000)
    ap.add_argument("--flips", type=int, default=30)
    ap.add_argument("--tree", type=Path, help="another source tree, measured first")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    doc: dict[str, Any] = {
        "benchmark": "gateway_publish",
        "date": datetime.date.today().isoformat(),
        "routes": args.routes,
        "flips": args.flips,
    }
    if args.tree is not None:
        doc["tree"] = str(args.tree)
        doc["before"] = in_process(args.tree, args.routes, args.flips)
    doc["this_tree"] = in_process(ROOT, args.routes, args.flips)
    print(json.dumps(doc, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
