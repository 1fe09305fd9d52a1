"""What the processor costs: Envoy-native weighted_clusters vs the same Envoy through the trafficsplit processor.

Why: every request through the gateway pays one ext_proc round trip to a Python process; this prints how much, on
this machine, in one run, side by side: requests/s and p50/p99 latency at a fixed concurrency and at concurrency 1,
and CPU seconds per request of Envoy and of the processor (from /proc/<pid>/stat). Not a test: nothing is asserted.

Both sides use the same route configuration (`trafficsplit.wire.envoy.route_configuration`): the native Envoy has it
inline with no ext_proc filter (its requests take the weighted fallback route); the processor's Envoy gets it over
ADS and routes by the processor's header. Backends are one Envoy answering with direct_response, so they cost little.
Runs alternate (native, processor, native, ...) and the median of `--repeat` runs is printed, to spread out the
noise of a shared machine. Loopback only; bounded by --duration per run.

    PYTHONPATH=src:extproc:. python bench/bench_dataplane.py [--duration 5] [--repeat 3] [--connections 32]

`--handle` prints instead the processor's own work per request, in process (no Envoy, no grpcio): parse the
ext_proc message, `Processor.handle` (split lookup, decide, metrics, the reply), serialize the reply.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import timeit
from dataclasses import dataclass
from pathlib import Path

from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from google.protobuf import json_format

from tests.support.dataplane import Dataplane, Envoy, NameBackends, split_doc
from trafficsplit.core.compiled import Endpoint, Generation, compile_split
from trafficsplit.core.spec import parse_split
from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.extproc.processor import Processor
from trafficsplit.wire import envoy as wire

HOST = "shop.example"
COOKIE = "ts=0193f1c2a4b5000000000001"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def native_bootstrap(gen: Generation) -> str:
    """A plain Envoy with the same routes, static clusters with the same endpoints, and no ext_proc filter."""
    res = wire.resources(gen)
    assert res.routes is not None
    clusters = []
    for name, c in res.clusters.items():
        d = json_format.MessageToDict(c, preserving_proto_field_name=True)
        d.pop("eds_cluster_config")
        d["type"] = "STATIC"
        d["load_assignment"] = json_format.MessageToDict(res.endpoints[name], preserving_proto_field_name=True)
        clusters.append(d)
    route = json_format.MessageToDict(res.routes[wire.ROUTE_CONFIG_NAME], preserving_proto_field_name=True)
    hcm = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3"
        ".HttpConnectionManager",
        "stat_prefix": "native",
        "strip_any_host_port": True,
        "route_config": route,
        "http_filters": [
            {
                "name": "envoy.filters.http.router",
                "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
            }
        ],
    }
    return json.dumps(
        {
            "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
            "static_resources": {
                "listeners": [
                    {
                        "name": "native",
                        "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
                        "filter_chains": [
                            {
                                "filters": [
                                    {"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}
                                ]
                            }
                        ],
                    }
                ],
                "clusters": clusters,
            },
        }
    )


@dataclass
class Run:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int
    envoy_cpu: float
    processor_cpu: float


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    assert m, text
    return float(m.group(1)) * _UNITS[m.group(2)]


def wrk(port: int, connections: int, duration: float) -> tuple[float, float, float, int, int]:
    out = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{duration:g}s",
            "--latency",
            "-H",
            f"Host: {HOST}",
            "-H",
            f"Cookie: {COOKIE}",
            f"http://127.0.0.1:{port}/",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    pct = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", out, re.M))
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = (int(non2xx.group(1)) if non2xx else 0) + (sum(map(int, sock.groups())) if sock else 0)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    return rps, _ms(pct["50"]), _ms(pct["99"]), requests, errors


def measure(port: int, envoy_pid: int, processor_pid: int | None, connections: int, duration: float) -> Run:
    e0 = cpu_seconds(envoy_pid)
    p0 = cpu_seconds(processor_pid) if processor_pid else 0.0
    rps, p50, p99, n, errors = wrk(port, connections, duration)
    e1 = cpu_seconds(envoy_pid)
    p1 = cpu_seconds(processor_pid) if processor_pid else 0.0
    return Run(rps, p50, p99, n, errors, (e1 - e0) / max(n, 1), (p1 - p0) / max(n, 1))


def median_run(runs: list[Run]) -> Run:
    return Run(
        statistics.median(r.rps for r in runs),
        statistics.median(r.p50_ms for r in runs),
        statistics.median(r.p99_ms for r in runs),
        sum(r.requests for r in runs),
        sum(r.errors for r in runs),
        statistics.median(r.envoy_cpu for r in runs),
        statistics.median(r.processor_cpu for r in runs),
    )


def handle_costs(repeat: int) -> None:
    """µs per request of the processor's own work, best of `repeat`, for the request shapes that differ in work."""
    headers = [(":authority", HOST), (":path", "/"), (":method", "GET"), ("user-agent", "wrk"), ("accept", "*/*")]
    headers.append(("x-request-id", "5f2b6a1e-8c1d-4c8e-9a57-0d3c2b1a4f6e"))
    cookie = [("cookie", f"_ga=GA1.2.1234567890.1700000000; theme=dark; {COOKIE}; lang=en-GB")]
    cases = [  # (label, sticky, endpoint affinity, debug headers, extra headers)
        ("sticky, cookie present", True, False, False, cookie),
        ("sticky, cookie present, endpoint affinity, debug", True, True, True, cookie),
        ("sticky, no cookie: mint", True, False, False, []),
        ("not sticky: request id", False, False, False, []),
    ]
    print(f"processor work per request, in process, best of {repeat} (parse + handle + serialize)")
    for label, sticky, affinity, debug, extra in cases:
        doc = split_doc(HOST, {"stable": 90, "canary": 10}, sticky=sticky, endpoint_affinity=affinity, debug=debug)
        split = compile_split(
            parse_split("default", "shop", doc), {n: [Endpoint("10.0.0.1", 80)] for n in ("stable", "canary")}
        )
        held = HeldGeneration()
        held.swap(Generation(1, (split,)), "bench")
        processor = Processor(held, Metrics())
        req = ep.ProcessingRequest()
        for k, v in headers + extra:
            req.request_headers.headers.headers.append(base_pb2.HeaderValue(key=k, raw_value=v.encode()))
        raw = req.SerializeToString()

        def one(raw: bytes = raw, processor: Processor = processor) -> object:
            return processor.handle(ep.ProcessingRequest.FromString(raw)).SerializeToString()

        timer = timeit.Timer(one)
        number, _ = timer.autorange()
        best = min(timer.repeat(repeat=repeat, number=number)) / number
        print(f"  {best * 1e6:6.1f} µs  {label}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--connections", type=int, default=32, help="the fixed concurrency (the other is 1)")
    p.add_argument("--handle", action="store_true", help="only the processor's own work per request, in process")
    args = p.parse_args()
    if args.handle:
        handle_costs(max(args.repeat, 5))
        return
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is required (apt-get install -y wrk)")
    with tempfile.TemporaryDirectory(prefix="ts-bench-") as d:
        work = Path(d)
        backends = NameBackends.start(work / "", names=("stable", "canary"))
        dp = Dataplane.start(work, backends, message_timeout_ms=200)
        native: Envoy | None = None
        try:
            gen, _ = dp.publish([split_doc(HOST, {"stable": 90, "canary": 10}, sticky=True, debug=False)])
            native = Envoy(work, native_bootstrap(gen), name="native").start()
            native_port = native.listener_port("native")
            assert native.proc is not None and dp.envoy.proc is not None
            results: dict[tuple[str, int], list[Run]] = {}
            for conns in (args.connections, 1):
                for _ in range(args.repeat):
                    results.setdefault(("native", conns), []).append(
                        measure(native_port, native.proc.pid, None, conns, args.duration)
                    )
                    results.setdefault(("processor", conns), []).append(
                        measure(dp.port, dp.envoy.proc.pid, dp.processor.pid, conns, args.duration)
                    )
            gap = dp.envoy.stat("http.trafficsplit.ext_proc.trafficsplit.failure_mode_allowed")
        finally:
            if native is not None:
                native.stop()
            dp.stop()
            backends.envoy.stop()
    print(f"median of {args.repeat} alternating runs of {args.duration:g}s; wrk -t1; Envoy --concurrency 1; 2 cores")
    head = f"{'config':<10} {'conns':>5} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6}"
    print(head + f" {'envoy µs/req':>13} {'proc µs/req':>12} {'rps vs native':>14} {'p50 vs native':>14}")
    for conns in (args.connections, 1):
        base = median_run(results[("native", conns)])
        for config in ("native", "processor"):
            r = median_run(results[(config, conns)])
            proc = f"{r.processor_cpu * 1e6:12.0f}" if config == "processor" else f"{'-':>12}"
            print(
                f"{config:<10} {conns:>5} {r.rps:>9.0f} {r.p50_ms:>8.2f} {r.p99_ms:>8.2f} {r.errors:>6}"
                f" {r.envoy_cpu * 1e6:>13.0f} {proc} {r.rps / base.rps:>14.2f} {r.p50_ms / base.p50_ms:>14.2f}"
            )
    print(f"requests that failed open during the processor runs (Envoy failure_mode_allowed): {gap}")


if __name__ == "__main__":
    main()
