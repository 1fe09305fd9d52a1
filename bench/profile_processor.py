"""Where a request's CPU goes in the processor: py-spy under wrk load, summarised by where each sample was.

Why: the processor spends ~400 µs of CPU per request and our own handling is a small part of it; this shows the
rest by category, so a lever is aimed at what costs. Starts one configuration of bench_dataplane.py (default: the
processor as shipped), drives it with wrk at the given concurrency, records the processor with
`py-spy record --native --threads` (py-spy from PyPI; root or ptrace rights needed) and prints the share of the
main thread's busy samples per category. Nothing is asserted.

    PYTHONPATH=src:extproc:operator:. python bench/profile_processor.py [--config python] [--seconds 10] [-c 32]
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench_dataplane import bench_setup, wrk  # type: ignore[import-not-found]

_FRAME_FILE = re.compile(r" \((?!.*\().*\)$")  # "name (file:line)" -> "name"


def category(frames: list[str]) -> str:
    leaf = frames[-1]
    if leaf in ("epoll_pwait", "epoll_wait"):
        return "idle"
    if "eventfd_write" in frames:
        return "eventfd_write: waking grpc's poller thread"
    if leaf == "sendmsg":
        return "sendmsg: HTTP/2 frames to Envoy"
    if "Processor.handle" in frames or "Processor._decide" in frames:
        return "our handling (Processor.handle)"
    if "gc_collect_main" in frames:
        return "garbage collector"
    if "Processor.Process" in frames:
        return "servicer loop: context.read()/write()"
    return "grpc.aio per-call work outside the servicer"


def summarise(raw: Path) -> list[tuple[str, str, int]]:
    """(thread, category, samples) from py-spy's raw (collapsed) output."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        parts = stack.split(";")
        thread, frames = parts[0], [_FRAME_FILE.sub("", f) for f in parts[1:]]
        if "MainThread" in thread:
            counts[("main", category(frames))] += int(n)
        else:
            name = re.sub(r"^thread \(\d+\): ", "", thread)
            idle = frames and frames[-1] in ("epoll_wait", "poll", "epoll_pwait")
            counts[(name, "idle" if idle else "busy")] += int(n)
    return [(t, c, n) for (t, c), n in counts.most_common()]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--config", default="python")
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("-c", "--connections", type=int, default=32)
    p.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    args = p.parse_args()
    with bench_setup(200) as b, tempfile.TemporaryDirectory(prefix="ts-profile-") as d:
        t = b.target(args.config)
        wrk(t.port, args.connections, 1.0)  # warm-up
        load = threading.Thread(target=wrk, args=(t.port, args.connections, args.seconds + 3.0))
        load.start()
        time.sleep(1.0)
        raw = Path(d) / "raw.txt"
        cmd = ["py-spy", "record", "--pid", str(t.processor_pids[0]), "--duration", str(args.seconds)]
        cmd += ["--rate", str(args.rate), "--format", "raw", "--output", str(raw), "--threads", "--native"]
        subprocess.run(cmd, check=True, capture_output=True)
        load.join()
        rows = summarise(raw)
    busy = sum(n for t, c, n in rows if t == "main" and c != "idle")
    print(f"{args.config}, wrk -c{args.connections}, {args.seconds} s at {args.rate} Hz")
    for thread, cat, n in rows:
        share = f"{n / busy * 100:5.1f} % of main-thread busy" if thread == "main" and cat != "idle" else ""
        print(f"{n:7d}  {thread:28.28s} {cat:48s} {share}")


if __name__ == "__main__":
    main()
