"""Blue-green flip latency: `kubectl patch` → every dataplane replica serving the new generation.

Runs the real pieces on this machine: kube-apiserver + etcd (tests/support/controlplane.py), the operator process,
two dataplane units (extproc + Envoy), two backends in network namespaces with Services + EndpointSlices. Then it
flips a TrafficSplit 100/0 ↔ 0/100 N times (merge patch through the API, as kubectl does) and records, per flip:

  held     both replicas answer GetHeld with a number above the previous one (the operator's publish reached both);
  traffic  a request through each replica's Envoy lands on the new side;
  status   the TrafficSplit's Published condition is True for the new metadata.generation (what `kubectl wait` sees).

Prints p50 / p90 / p99 / max of each, side by side, and writes them as JSON (`--out`). `--splits N` first applies N-1
other TrafficSplits (their own hosts, the same two Services), so the flip is measured with N splits held by every
replica (each publish carries the whole generation). Needs root (network namespaces). Nothing is asserted.

    python bench/bench_flip.py [--flips 50] [--splits 1000] [--out bench/results/DATE-flip-1000.json]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for p in ("src", "operator", "extproc", "."):
    sys.path.insert(0, str(ROOT / p))

from kubernetes import client  # noqa: E402

from tests.support.controlplane import control_plane  # noqa: E402
from tests.support.dataplane import NameBackends  # noqa: E402
from tests.support.netns import TestPods  # noqa: E402
from tests.support.operator import (  # noqa: E402
    Operators,
    install_crd,
    service_with_slice,
    start_gateway,
    ts_manifest,
    wait_condition,
)

HOST = "flip.example"


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flips", type=int, default=50)
    ap.add_argument("--debounce", type=float, default=0.02, help="the operator's --debounce (seconds)")
    ap.add_argument("--splits", type=int, default=1, help="TrafficSplits held in all, the flipped one included")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = ap.parse_args()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-flip-") as tmp, control_plane() as kube, TestPods(Path(tmp)) as tp:
        work = Path(tmp)
        install_crd(kube)
        ns = kube.create_namespace("bench")
        pods = {n: tp.start(n) for n in ("blue", "green")}
        for n, p in pods.items():
            service_with_slice(kube, ns, f"svc-{n}", [p.ip], target_port=p.port)
        backends = NameBackends.start(work, names=("blue",))
        gw = start_gateway(work, backends)
        ops = Operators(kube, work)
        try:
            ops.start(
                kube.kubeconfig,
                args=[
                    f"--namespaces={ns}",
                    f"--token-file={gw.token_file}",
                    f"--debounce={args.debounce}",
                    *gw.dataplane_args(),
                ],
                lease_namespace=ns,
            )
            spec: dict[str, Any] = {
                "hosts": [HOST],
                "backends": [
                    {"name": "blue", "service": "svc-blue", "port": 80, "weight": 100},
                    {"name": "green", "service": "svc-green", "port": 80, "weight": 0},
                ],
            }
            others = [
                ts_manifest(ns, f"other-{i}", dict(spec, hosts=[f"other-{i}.example"])) for i in range(args.splits - 1)
            ]
            for i in range(0, len(others), 200):  # kubectl apply in batches: one huge stdin is slow to diff
                kube.kubectl("apply", "-f", "-", input="---\n".join(others[i : i + 200]))
            kube.kubectl("apply", "-f", "-", input=ts_manifest(ns, "flip", spec))
            wait_condition(kube, ns, "flip", "Published", "True", "2/2", timeout=60 + args.splits * 0.2)
            if others:
                wait_condition(kube, ns, f"other-{args.splits - 2}", "Published", "True", "2/2", timeout=600)
            api = kube.api_client()
            custom = client.CustomObjectsApi(api)
            held_t: list[float] = []
            traffic_t: list[float] = []
            status_t: list[float] = []
            side = "blue"
            for _ in range(args.flips):
                side = "green" if side == "blue" else "blue"
                weights = (100, 0) if side == "blue" else (0, 100)
                before = min(gw.held())
                body = {
                    "spec": {"backends": [dict(b, weight=w) for b, w in zip(spec["backends"], weights, strict=True)]}
                }
                t0 = time.perf_counter()
                obj = custom.patch_namespaced_custom_object(
                    "trafficsplit.dev", "v1alpha1", ns, "trafficsplits", "flip", body
                )
                gen = obj["metadata"]["generation"]
                while min(gw.held()) <= before:
                    time.sleep(0.002)
                held_t.append(time.perf_counter() - t0)

                async def first_new_side(side: str) -> None:
                    for u in gw.units:
                        conn = u.connection()
                        try:
                            while (await conn.request(HOST)).backend != side:
                                await asyncio.sleep(0.001)
                        finally:
                            conn.close()

                asyncio.run(first_new_side(side))
                traffic_t.append(time.perf_counter() - t0)
                while True:
                    o = custom.get_namespaced_custom_object("trafficsplit.dev", "v1alpha1", ns, "trafficsplits", "flip")
                    c = next((c for c in o.get("status", {}).get("conditions", []) if c["type"] == "Published"), None)
                    if c and c["status"] == "True" and c.get("observedGeneration") == gen:
                        break
                    time.sleep(0.005)
                status_t.append(time.perf_counter() - t0)
            api.close()
        finally:
            ops.stop_all()
            gw.stop()
            backends.envoy.stop()
    series = {"held": held_t, "traffic": traffic_t, "status": status_t}
    if args.out is not None:
        doc = {
            "benchmark": "flip",
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "splits": args.splits,
            "flips": args.flips,
            "debounce_s": args.debounce,
            "replicas": 2,
            "ms": {
                k: {q: round(pct([x * 1000 for x in xs], v), 1) for q, v in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))}
                | {"max": round(max(xs) * 1000, 1)}
                for k, xs in series.items()
            },
            "machine": {
                "cpus": os.cpu_count(),
                "loadavg_start": [round(x, 2) for x in load_start],
                "loadavg_end": [round(x, 2) for x in os.getloadavg()],
            },
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    debounce_ms = args.debounce * 1000
    print(f"\nflips: {args.flips}, splits {args.splits}, operator debounce {debounce_ms:.0f} ms; patch → ..., ms")
    print(f"{'':<40}{'p50':>8}{'p90':>8}{'p99':>8}{'max':>8}{'mean':>8}")
    for label, xs in (
        ("both replicas hold the new generation", held_t),
        ("both Envoys route to the new side", traffic_t),
        ("status Published=True (new gen)", status_t),
    ):
        ms = [x * 1000 for x in xs]
        print(
            f"{label:<40}{pct(ms, 0.5):>8.1f}{pct(ms, 0.9):>8.1f}{pct(ms, 0.99):>8.1f}{max(ms):>8.1f}"
            f"{statistics.mean(ms):>8.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
