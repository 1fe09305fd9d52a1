"""Many TrafficSplits: compile + publish time and memory at 1,000 and 10,000 splits, and one split changed among them.

Why: a gateway serves every split of its cluster, so the cost of a publish and the processor's memory grow with the
number of splits; a one-split change should cost in proportion to the change. Runs the real pieces on loopback: the
core compiles the splits (two backends each, one loopback endpoint per backend), the real publish API carries the
generation to `python -m trafficsplit.extproc`, which waits for Envoy's ACK of the clusters and routes (as the
product does). Not a test: nothing is asserted; the output is `bench/results/<date>-scale.json`.

    PYTHONPATH=src:extproc:operator:. python bench/bench_scale.py [--splits 1000,10000] [--out PATH]
        [--processor LABEL=TREE ...] [--rounds N] [--no-backend-cluster-stats]

`--processor LABEL=TREE` runs the processor from another source tree (e.g. `git archive main | tar -x -C /tmp/base`)
beside this one (`this`), alternating per size and round, so a change is measured before/after under the same load.
`--no-backend-cluster-stats` bootstraps Envoy without the split clusters' stats (gateway.envoy.backendClusterStats).

Figures per size: `compile_s` (parse + compile + assemble, the core), `to_proto_s`, `publish_s` (the Publish call:
processor translation, ADS to Envoy, both ACKs), the processor's and Envoy's RSS after it (VmRSS), and the same times
for a generation where one split's weights changed; where the publish time goes: the CPU seconds the processor and
Envoy spent in it (/proc) and Envoy's own `cluster_manager.cds.update_duration` / RDS update counters.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.dataplane import PYTHONPATH, Dataplane, NameBackends, split_doc
from trafficsplit.core.control.compiler import assemble_generation, compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.compiled import Endpoint
from trafficsplit.core.model.generation import Generation
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.generation import generation_to_proto

HERE = Path(__file__).resolve().parent
NAMES = ("stable", "canary")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cds_update_ms(dp: Dataplane) -> float | None:
    """The longest CDS update so far in ms by Envoy's own histogram (cumulative P100; one Envoy per size and
    configuration, so after the first publish it is that publish's), None before any."""
    try:
        text = dp.envoy.admin_get("/stats?filter=cluster_manager.cds.update_duration")[1]
    except TimeoutError:  # admin walks every stat; with 20,000 clusters on a loaded machine it can take > 5 s
        return None
    for line in text.splitlines():
        if "P100(" in line:
            value = float(line.rsplit("P100(", 1)[1].split(",")[1].rstrip(")"))
            return None if math.isnan(value) else value
    return None


def compile_all(number: int, n: int, backends: NameBackends, changed: int | None = None) -> Generation:
    eps = {name: [Endpoint(*backends.endpoint(name))] for name in NAMES}
    compiled = []
    for i in range(n):
        weights = {"stable": 80, "canary": 20} if i == changed else {"stable": 90, "canary": 10}
        spec = split_doc(f"app{i}.example", weights, sticky=True, debug=False)
        compiled.append(compile_split(parse_split("default", f"split-{i}", spec), eps))
    gen, rejected = assemble_generation(number, compiled)
    assert not rejected, rejected
    return gen


def one_publish(dp: Dataplane, number: int, n: int, changed: int | None, timeout: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    gen = compile_all(number, n, dp.backends, changed)
    t1 = time.perf_counter()
    # As the operator sends it: each split's first carrying number (the changed one's is this number).
    first = {s.key: number if i == changed else 1 for i, s in enumerate(gen.splits)}
    msg = generation_to_proto(gen, origin="bench", first=first)
    assert dp.envoy.proc is not None
    cpu0 = (cpu_s(dp.processor.pid), cpu_s(dp.envoy.proc.pid))
    t2 = time.perf_counter()
    reply = dp.processor.publish(msg, timeout=timeout)
    t3 = time.perf_counter()
    assert reply.result == pb.PublishReply.ACCEPTED, (reply, dp.processor.log_tail())
    return {
        "compile_s": round(t1 - t0, 3),
        "to_proto_s": round(t2 - t1, 3),
        "publish_s": round(t3 - t2, 3),
        "message_bytes": msg.ByteSize(),
        "processor_rss_mb": rss_mb(dp.processor.pid),
        "envoy_rss_mb": rss_mb(dp.envoy.proc.pid),
        "publish_cpu_s": {
            "processor": round(cpu_s(dp.processor.pid) - cpu0[0], 2),
            "envoy": round(cpu_s(dp.envoy.proc.pid) - cpu0[1], 2),
        },
        "envoy_cds_update_ms_max": cds_update_ms(dp),
    }


def measure(n: int, timeout: float, pythonpath: str, backend_cluster_stats: bool = True) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ts-scale-") as d:
        work = Path(d)
        backends = NameBackends.start(work / "", names=NAMES)
        dp = Dataplane.start(
            work,
            backends,
            extra_processor_args=["--ack-timeout", str(timeout)],
            processor_pythonpath=pythonpath,
            bootstrap={"backend_cluster_stats": backend_cluster_stats},
        )
        try:
            idle = rss_mb(dp.processor.pid)
            first = one_publish(dp, 1, n, None, timeout)
            changed = one_publish(dp, 2, n, n // 2, timeout)
            return {
                "splits": n,
                "backend_cluster_stats": backend_cluster_stats,
                "processor_rss_idle_mb": idle,
                "first": first,
                "one_changed": changed,
            }
        finally:
            dp.stop()
            backends.envoy.stop()


def write(out: Path, results: list[dict[str, Any]], machine: dict[str, Any]) -> None:
    doc = {
        "benchmark": "scale",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "method": "one Envoy (--concurrency 1) + one processor; each split two backends, sticky; publish waits for "
        "Envoy's CDS/EDS/RDS ACKs; one_changed: split n/2's weights 90/10 -> 80/20, the whole generation recompiled "
        "and published (state-of-the-world xDS); configurations (processor source trees) alternate per size and round",
        "results": results,
        "machine": {
            "cpus": os.cpu_count(),
            **machine,
            "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        },
    }
    out.write_text(json.dumps(doc, indent=2) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--splits", default="1000,10000")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds for one publish (Envoy's ACK included)")
    p.add_argument("--out", type=Path)
    p.add_argument("--processor", action="append", default=[], metavar="LABEL=TREE", help="another source tree")
    p.add_argument("--rounds", type=int, default=1, help="alternating rounds per size")
    p.add_argument(
        "--no-backend-cluster-stats",
        dest="backend_cluster_stats",
        action="store_false",
        help="Envoy without the split clusters' stats",
    )
    args = p.parse_args()
    trees = {"this": PYTHONPATH}
    for item in args.processor:
        label, _, tree = item.partition("=")
        trees[label] = os.pathsep.join(str(Path(tree) / d) for d in ("src", "operator", "extproc", "."))
    load_start = os.getloadavg()
    out = args.out or HERE / "results" / f"{datetime.date.today().isoformat()}-scale.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    for n in (int(x) for x in args.splits.split(",")):
        for rnd in range(args.rounds):
            for label, pythonpath in trees.items():
                r = {
                    "processor": label,
                    "round": rnd,
                    **measure(n, args.timeout, pythonpath, args.backend_cluster_stats),
                }
                print(json.dumps(r), flush=True)
                results.append(r)
                write(out, results, {"loadavg_start": [round(x, 2) for x in load_start]})  # each row as it comes
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
