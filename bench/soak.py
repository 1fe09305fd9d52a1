"""Soak: steady load through two gateway units for `--duration` seconds (default 10 minutes), a weight change every
`--flip-every` seconds (10) published to both, and unit 0's processor SIGKILLed and restarted every `--restart-every`
seconds (60), then republished the way the operator does (retrying NOT_READY).

Why: leaks and slow failures (a task per stream never collected, a file descriptor per ADS stream, memory per
publish) only show over many changes and restarts. It reports, as JSON in bench/results/:

* requests and failed requests (non-200 or a connection error) at the client, split into inside the documented restart
  window (from the kill until 2 s after the republish was accepted; requests there fail open to Envoy's native routes,
  so the expected count is 0 too) and outside it;
* the processor that is never restarted (unit 1): RSS, open file descriptors and asyncio tasks
  (`trafficsplit_asyncio_tasks`) after warm-up and at the end; unit 0's at the end of each lifetime.

Not a test: nothing is asserted, the exit status says only whether it ran. Loopback only; bounded by --duration.

    PYTHONPATH=src:operator:extproc:. python bench/soak.py [--duration 600] [--out bench/results/soak.json]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.support.dataplane import Dataplane, Load, NameBackends, Processor, split_doc
from trafficsplit.v1alpha1 import publish_pb2 as pb

HOST = "shop.example"
WEIGHTS = ({"stable": 90, "canary": 10}, {"stable": 50, "canary": 50})
RESTART_GRACE = 2.0  # seconds after the republish that still count as the restart window


def process_sample(proc: Processor) -> dict[str, Any]:
    """RSS (KiB), open fds and asyncio tasks of a running processor."""
    pid = proc.pid
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    tasks = -1
    with urllib.request.urlopen(proc.metrics_url, timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("trafficsplit_asyncio_tasks "):
                tasks = int(float(line.split()[1]))
    return {"rss_kib": rss, "fds": fds, "asyncio_tasks": tasks}


@dataclass
class Soak:
    units: list[Dataplane]
    number: int = 0
    current: pb.Generation | None = None
    windows: list[tuple[float, float]] = field(default_factory=list)
    publishes: dict[str, int] = field(default_factory=dict)

    def publish_all(self, weights: dict[str, int]) -> None:
        self.number += 1
        _, msg = self.units[0].generation([split_doc(HOST, weights, sticky=True)], number=self.number)
        self.current = msg
        for u in self.units:
            self.publish_until_taken(u, msg)

    def publish_until_taken(self, unit: Dataplane, msg: pb.Generation, timeout: float = 30) -> None:
        """As the operator's fleet does: NOT_READY is retried, anything else is final."""
        deadline = time.monotonic() + timeout
        while True:
            reply = unit.processor.publish(msg)
            name = pb.PublishReply.Result.Name(reply.result)
            self.publishes[name] = self.publishes.get(name, 0) + 1
            if reply.result != pb.PublishReply.NOT_READY or time.monotonic() > deadline:
                return
            time.sleep(0.25)

    def restart(self, i: int) -> None:
        unit = self.units[i]
        t0 = time.monotonic()
        unit.processor.kill()
        unit.processor.start()
        assert self.current is not None
        self.publish_until_taken(unit, self.current)
        self.windows.append((t0, time.monotonic() + RESTART_GRACE))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=600)
    p.add_argument("--flip-every", type=float, default=10)
    p.add_argument("--restart-every", type=float, default=60)
    p.add_argument("--concurrency", type=int, default=4, help="connections per unit")
    p.add_argument("--warm-up", type=float, default=10)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    p.add_argument("--out", type=Path, default=Path("bench/results") / f"soak-{stamp}.json")
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="ts-soak-") as d:
        root = Path(d)
        (root / "backends").mkdir()
        backends = NameBackends.start(root / "backends")
        token = secrets.token_hex(16)
        units: list[Dataplane] = []
        try:
            for i in range(2):
                (root / f"gw-{i}").mkdir()
                units.append(
                    Dataplane.start(root / f"gw-{i}", backends, message_timeout_ms=200, token=token, replica=f"gw-{i}")
                )
            soak = Soak(units)
            soak.publish_all(WEIGHTS[0])
            loads = [Load(u.port, HOST, concurrency=args.concurrency) for u in units]
            for load in loads:
                load.__enter__()
            try:
                time.sleep(args.warm_up)
                start_sample = process_sample(units[1].processor)
                unit0_lifetimes = []
                t_start = time.monotonic()
                next_flip = t_start + args.flip_every
                next_restart = t_start + args.restart_every
                flips = restarts = 0
                while (now := time.monotonic()) < t_start + args.duration:
                    if now >= next_restart:
                        unit0_lifetimes.append(process_sample(units[0].processor))
                        soak.restart(0)
                        restarts += 1
                        next_restart += args.restart_every
                    elif now >= next_flip:
                        flips += 1
                        soak.publish_all(WEIGHTS[flips % 2])
                        next_flip += args.flip_every
                    time.sleep(0.05)
                end_sample = process_sample(units[1].processor)
                unit0_lifetimes.append(process_sample(units[0].processor))
            finally:
                for load in loads:
                    load.stop()
        finally:
            for u in units:
                u.stop()
            backends.envoy.stop()

    def in_window(t: float) -> bool:
        return any(a <= t <= b for a, b in soak.windows)

    failed_times = [t for load in loads for t, s, _, _ in load.results if s != 200]
    failed_times += [t for load in loads for t in load.error_times]
    measured = [r for load in loads for r in load.results if r[0] >= t_start]
    result = {
        "when": stamp,
        "duration_s": args.duration,
        "flips": flips,
        "restarts": restarts,
        "connections_per_unit": args.concurrency,
        "requests": len(measured),
        "failed_outside_restart_window": sum(1 for t in failed_times if t >= t_start and not in_window(t)),
        "failed_inside_restart_window": sum(1 for t in failed_times if t >= t_start and in_window(t)),
        "fallback_responses": sum(1 for r in measured if r[3] is not None and r[3].endswith("path=fallback")),
        "publish_replies": soak.publishes,
        "steady_processor": {"start": start_sample, "end": end_sample},
        "restarted_processor_lifetimes": unit0_lifetimes,
        "load_average": os.getloadavg(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
