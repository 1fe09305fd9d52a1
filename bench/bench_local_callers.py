"""A hostile local caller against the processor's own ports, and a processor restart, measured N times each.

Runs the real pieces on this machine (a processor, Envoy, the loopback name backends, the local-mode operator):

  endless  one connection streams a header value that never ends into the http_service socket while 4 connections
           send requests through Envoy (200 ms message timeout): bytes written before the close, processor RSS
           before / peak / after, requests and how many failed open;
  watches  2,000 Health.Watch streams over 20 connections on the plaintext health port: how many were held, how
           many refused (and how), processor RSS before / peak / after they closed;
  restart  the processor SIGKILLed and started again, the operator republishing: seconds from the processor
           listening to it holding the generation again (Envoy's ADS reconnect + the operator's poll + the ACK).

Prints each and writes them as JSON (`--out`). Nothing is asserted (tests/integration/test_local_callers.py and
test_operator_filesource.py assert the bounds).

    python bench/bench_local_callers.py [--runs 10] [--out bench/results/DATE-local-callers.json]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for p in ("src", "operator", "extproc", "."):
    sys.path.insert(0, str(ROOT / p))

from tests.integration.test_operator_filesource import backends_seen, start_local, write  # noqa: E402
from tests.support.dataplane import PYTHONPATH, Dataplane, Load, NameBackends, Processor, split_doc  # noqa: E402
from tests.support.hostile import FAIL_OPEN, MiB, metric, open_watches, stream_endless_header  # noqa: E402
from tests.support.operator import start_gateway  # noqa: E402
from tests.support.waiting import poll  # noqa: E402

HOST = "shop.example"


def endless(work: Path, backends: NameBackends, pythonpath: str) -> dict[str, Any]:
    dp = Dataplane.start(work, backends, transport="http", message_timeout_ms=200, processor_pythonpath=pythonpath)
    try:
        dp.publish([split_doc(HOST, {"stable": 50, "canary": 50})])
        before = dp.processor.rss_bytes()
        with Load(dp.port, HOST, concurrency=4) as load:
            load.wait_for(50)
            sent, closed, peak = asyncio.run(stream_endless_header(dp))
            load.wait_for(50)
        return {
            "closed": closed,
            "written_kib": sent / 1024,
            "rss_mib": [before / MiB, peak / MiB, dp.processor.rss_bytes() / MiB],
            "requests": len(load.results),
            "errors": len(load.errors),
            "failed_open": dp.envoy.stat(FAIL_OPEN),
            "head_too_large": metric(dp, "trafficsplit_extproc_http_rejected_total", reason="head_too_large"),
        }
    finally:
        dp.stop()


def watches(work: Path, pythonpath: str) -> dict[str, Any]:
    proc = Processor(work, token="t" * 32, extra=["--health", "127.0.0.1:0"], pythonpath=pythonpath).start()
    try:
        target = f"127.0.0.1:{proc.ports['health']}"
        time.sleep(0.5)
        before = proc.rss_bytes()

        async def go() -> tuple[int, dict[str, int], int]:
            answered, refused, chans = await open_watches(target, 2000)
            peak = proc.rss_bytes()
            for c in chans:
                await c.close(None)
            return answered, refused, peak

        answered, refused, peak = asyncio.run(go())
        time.sleep(1)
        return {"held": answered, "refused": refused, "rss_mib": [before / MiB, peak / MiB, proc.rss_bytes() / MiB]}
    finally:
        proc.terminate()


def restarts(work: Path, backends: NameBackends, runs: int) -> list[float]:
    gw = start_gateway(work, backends)
    d = work / "splits"
    d.mkdir()
    write(d / "shop.yaml", gw, 100, 0)
    op = start_local(work, gw, d)
    took = []
    try:
        poll(lambda: backends_seen(gw, 5) == {"blue": 10}, 20, "blue everywhere")
        current = gw.held()[0]
        for _ in range(runs):
            gw.kill_processor(0)
            gw.start_processor(0)
            t0 = time.monotonic()
            poll(lambda: gw.held()[0] == current, 30, "held again", 0.02)
            took.append(time.monotonic() - t0)
    finally:
        op.stop()
        gw.stop()
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--processor-tree",
        type=Path,
        help="run the processor from this source tree (e.g. `git archive REV src extproc operator` unpacked), for a "
        "before/after comparison; the restart measurement is skipped (its cause is the bootstrap, built here)",
    )
    args = ap.parse_args()
    pythonpath = PYTHONPATH
    if args.processor_tree is not None:
        pythonpath = os.pathsep.join(str(args.processor_tree / d) for d in ("src", "operator", "extproc"))
    out: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip(),
        "runs": args.runs,
        "processor_tree": str(args.processor_tree) if args.processor_tree else None,
    }
    with tempfile.TemporaryDirectory(prefix="ts-bench-callers-") as t:

        def sub(name: str) -> Path:
            d = Path(t) / name
            d.mkdir()
            return d

        backends = NameBackends.start(sub("backends"))
        try:
            out["endless"] = [endless(sub(f"endless-{i}"), backends, pythonpath) for i in range(args.runs)]
            out["watches"] = [watches(sub(f"watches-{i}"), pythonpath) for i in range(args.runs)]
            took = restarts(sub("restart"), backends, args.runs) if args.processor_tree is None else []
        finally:
            backends.envoy.stop()
    if took:
        out["restart_seconds"] = {
            "all": [round(x, 3) for x in took],
            "min": min(took),
            "median": statistics.median(took),
            "max": max(took),
        }
    for e in out["endless"]:
        print(
            f"endless: closed={e['closed']} after {e['written_kib']:.0f} KiB; RSS "
            f"{' -> '.join(f'{x:.1f}' for x in e['rss_mib'])} MiB; {e['requests']} requests, {e['failed_open']} open"
        )
    for w in out["watches"]:
        print(f"watches: {w['held']} held, refused {w['refused']}; RSS {' -> '.join(f'{x:.1f}' for x in w['rss_mib'])}")
    if took:
        r = out["restart_seconds"]
        print(f"restart: min {r['min']:.2f} s, median {r['median']:.2f} s, max {r['max']:.2f} s; {r['all']}")
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
