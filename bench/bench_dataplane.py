"""What the processor costs, side by side in one run: Envoy-native, Envoy + our processor, Envoy + a Go reference.

Why: every request through the gateway pays one ext_proc round trip to a Python process. Users compare the gateway
with what Envoy does alone, and the question "how much of the cost is Python" needs a compiled processor doing the
same work beside it. Not a test: nothing is asserted; the output is data (`bench/results/<date>-dataplane.json` and a
markdown table beside it).

Configurations (all one Envoy, `--concurrency 1`, the same route configuration `trafficsplit.wire.envoy` builds):

  native      Envoy alone: the routes and clusters inline, no ext_proc filter; requests take the weighted fallback
              route (Envoy's own `weighted_clusters`). The limit for this job on this machine.
  python      the product as shipped: `python -m trafficsplit.extproc` (ext_proc + ADS on a Unix socket, uvloop when
              installed) and Envoy bootstrapped by `trafficsplit.wire.bootstrap`, routes over ADS.
  go          the same Envoy filter and routes (static), ext_proc served by `bench/refproc` (Go, go-control-plane's
              types, the same FNV-1a pick, cookie read/mint and reply), built by this script into
              ~/.cache/trafficsplit/bench (`go` is needed; the module comes from the Go module proxy).
  python-http the product with `--ext-proc-transport http` (experimental): ext_proc over Envoy's http_service, one
              HTTP/1.1 POST per request to the same `Processor.handle` (extproc/httpservice.py); ADS as `python`.
  python-grpclib  lever: the same `Processor.handle` and ext_proc stream, served by grpclib (bench/grpclibproc.py)
              instead of grpc.aio; Envoy as for `go` (the same filter, static routes, a Unix socket).
  python-xN   lever: N processor processes, each published the generation, Envoy's ext_proc cluster with N endpoints
              (Envoy keeps one HTTP/2 connection per endpoint, so one socket alone would not share the load).

The load is wrk (`-t1`) with `bench/wrk_mix.lua`: a sticky split (90/10), 90 % of requests carry a valid affinity
cookie and every 10th carries none (the processor mints one and sets it). Each round runs every configuration at each
concurrency, alternating (A B C A B C ...), and the median over rounds is reported, so the ratios come from one run
on one machine state. CPU per request is the difference of utime+stime in /proc/<pid>/stat over a run, divided by
the requests wrk completed. Loopback only; every run is bounded by --duration.

    PYTHONPATH=src:extproc:operator:. python bench/bench_dataplane.py [--duration 5] [--rounds 3]
        [--concurrency 1,32,64] [--configs native,python,go] [--out bench/results/DATE-dataplane.json]

`--handle` prints instead the processor's own work per request, in process (no Envoy, no grpcio): parse the
ext_proc message, `Processor.handle` (split lookup, decide, metrics, the reply), serialize the reply.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import http.client
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from google.protobuf import json_format

from tests.support.dataplane import Dataplane, Envoy, NameBackends, envoy_binary, split_doc
from trafficsplit.core.control.compiler import assemble_generation, compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.compiled import Endpoint
from trafficsplit.core.model.generation import Generation
from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.extproc.processor import Processor
from trafficsplit.wire import envoy as wire
from trafficsplit.wire import snapshot
from trafficsplit.wire.bootstrap import HCM_STAT_PREFIX, Address, ext_proc_filter, grpc_cluster
from trafficsplit.wire.generation import generation_to_proto
from trafficsplit.wire.reserved import EXTPROC_CLUSTER

HERE = Path(__file__).resolve().parent
HOST = "shop.example"
COOKIE_NAME = "ts"
COOKIE = f"{COOKIE_NAME}=0193f1c2a4b5000000000001"
MINT_EVERY = 10  # every 10th request carries no cookie: 90 % sticky, 10 % mint
WEIGHTS = {"stable": 90, "canary": 10}
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "trafficsplit" / "bench"
FAIL_OPEN_STAT = f"http.{HCM_STAT_PREFIX}.ext_proc.trafficsplit.failure_mode_allowed"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the Envoys -----------------------------------------------------------------------------------------------------


def static_bootstrap(gen: Generation, extproc: Sequence[Address] = (), message_timeout_ms: int = 200) -> str:
    """An Envoy with the generation's routes and clusters inline (static clusters, the same endpoints). Without
    `extproc` it is plain Envoy (native weighted_clusters); with it, the product's ext_proc filter in front of the
    router and an ext_proc cluster with one endpoint per address."""
    res = snapshot.resources(gen)
    assert res.routes is not None
    clusters = []
    for name, c in res.clusters.items():
        d = json_format.MessageToDict(c, preserving_proto_field_name=True)
        d.pop("eds_cluster_config")
        d["type"] = "STATIC"
        d["load_assignment"] = json_format.MessageToDict(res.endpoints[name], preserving_proto_field_name=True)
        clusters.append(d)
    filters: list[dict[str, Any]] = []
    if extproc:
        cluster = grpc_cluster(EXTPROC_CLUSTER, extproc[0])
        for addr in extproc[1:]:
            cluster.load_assignment.endpoints[0].lb_endpoints.add().endpoint.address.CopyFrom(addr.proto())
        clusters.append(json_format.MessageToDict(cluster, preserving_proto_field_name=True))
        ext = json_format.MessageToDict(ext_proc_filter(message_timeout_ms), preserving_proto_field_name=True)
        ext["@type"] = "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"
        filters.append({"name": "envoy.filters.http.ext_proc", "typed_config": ext})
    filters.append(
        {
            "name": "envoy.filters.http.router",
            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
        }
    )
    route = json_format.MessageToDict(res.routes[wire.ROUTE_CONFIG_NAME], preserving_proto_field_name=True)
    hcm = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3"
        ".HttpConnectionManager",
        "stat_prefix": HCM_STAT_PREFIX,
        "strip_any_host_port": True,
        "route_config": route,
        "http_filters": filters,
    }
    return json.dumps(
        {
            "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
            "static_resources": {
                "listeners": [
                    {
                        "name": "bench",
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


# --- the Go reference processor ---------------------------------------------------------------------------------


def build_refproc() -> Path:
    """Build bench/refproc into the cache (outside the repo); rebuilt when its sources change."""
    src = HERE / "refproc"
    digest = "-".join(str(int(p.stat().st_mtime_ns)) for p in sorted(src.iterdir()) if p.suffix in (".go", ".mod"))
    binary = CACHE / "refproc"
    stamp = CACHE / "refproc.stamp"
    if binary.exists() and stamp.exists() and stamp.read_text() == digest:
        return binary
    if shutil.which("go") is None:
        raise SystemExit("the Go reference processor needs `go` (or leave `go` out of --configs)")
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(["go", "build", "-o", str(binary), "."], cwd=src, check=True)
    stamp.write_text(digest)
    return binary


# --- one configuration under load -------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    description: str
    port: int
    envoy: Envoy
    processor_pids: list[int]
    stop: Callable[[], object]

    @property
    def envoy_pid(self) -> int:
        assert self.envoy.proc is not None
        return self.envoy.proc.pid


@dataclass
class Run:
    rps: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    requests: int
    errors: int
    fail_open: int
    envoy_cpu_us: float
    processor_cpu_us: float
    processor_calls: int = 0  # ext_proc streams Envoy started (bench_gateway_routes counts them; 0 when not read)


def wrk(port: int, connections: int, duration: float, cookie: str = COOKIE) -> dict[str, Any]:
    """wrk -t1 with bench/wrk_mix.lua: every MINT_EVERY-th request without `cookie`, the rest with it."""
    out = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{duration:g}s",
            "-s",
            str(HERE / "wrk_mix.lua"),
            f"http://127.0.0.1:{port}/",
            "--",
            HOST,
            cookie,
            str(MINT_EVERY),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    m = re.search(r"^RESULT (\{.*\})$", out, re.M)
    assert m, out
    result: dict[str, Any] = json.loads(m.group(1))
    return result


class Measured(Protocol):
    """What a run is measured on: one Envoy on `port`, and the processors in front of which it runs (none: native)."""

    port: int
    envoy: Envoy
    processor_pids: list[int]

    @property
    def envoy_pid(self) -> int: ...


def measure(
    t: Measured, connections: int, duration: float, cookie: str = COOKIE, streams_stat: str | None = None
) -> Run:
    """One wrk run on `t`: rates and latencies, and CPU per request of Envoy and of the processors (utime+stime in
    /proc/<pid>/stat over the run); with `streams_stat`, the ext_proc streams Envoy started over it."""
    counted = bool(t.processor_pids)
    fail0 = t.envoy.stat(FAIL_OPEN_STAT) if counted else 0
    s0 = t.envoy.stat(streams_stat) if counted and streams_stat else 0
    e0 = cpu_seconds(t.envoy_pid)
    p0 = sum(cpu_seconds(p) for p in t.processor_pids)
    r = wrk(t.port, connections, duration, cookie)
    e1 = cpu_seconds(t.envoy_pid)
    p1 = sum(cpu_seconds(p) for p in t.processor_pids)
    fail1 = t.envoy.stat(FAIL_OPEN_STAT) if counted else 0
    s1 = t.envoy.stat(streams_stat) if counted and streams_stat else 0
    n = max(r["requests"], 1)
    return Run(
        rps=r["requests"] / (r["duration_us"] / 1e6),
        p50_ms=r["p50_us"] / 1e3,
        p99_ms=r["p99_us"] / 1e3,
        p999_ms=r["p999_us"] / 1e3,
        requests=r["requests"],
        errors=sum(r["errors"].values()),
        fail_open=fail1 - fail0,
        envoy_cpu_us=(e1 - e0) / n * 1e6,
        processor_cpu_us=(p1 - p0) / n * 1e6,
        processor_calls=s1 - s0,
    )


def check_routing(t: Target) -> None:
    """Before measuring: a request with the cookie is routed and a request without one gets a Set-Cookie (when a
    processor is in the path), so no configuration is measured doing less than the work."""
    for cookie in (COOKIE, None):
        conn = http.client.HTTPConnection("127.0.0.1", t.port, timeout=10)
        try:
            conn.request("GET", "/", headers={"Host": HOST, **({"Cookie": cookie} if cookie else {})})
            r = conn.getresponse()
            body = r.read()
            assert r.status == 200 and r.getheader("x-backend") in WEIGHTS, (t.name, r.status, body)
            if t.processor_pids and cookie is None:
                assert (r.getheader("set-cookie") or "").startswith(f"{COOKIE_NAME}="), (t.name, r.getheaders())
        finally:
            conn.close()


# --- setting the configurations up -------------------------------------------------------------------------------


@dataclass
class Bench:
    work: Path
    backends: NameBackends
    gen: Generation
    message_timeout_ms: int
    cleanups: list[Callable[[], object]] = field(default_factory=list)

    def envoy(self, name: str, config: str) -> Envoy:
        e = Envoy(self.work, config, name=name).start()
        self.cleanups.append(e.stop)
        return e

    def process(self, name: str, argv: list[str], ready: Callable[[], bool]) -> subprocess.Popen[bytes]:
        """A processor of our own (a lever or the reference) started from `argv`, logging to <name>.log, stopped at
        cleanup; returns once `ready()` (its socket or port file is there). Python ones see this tree's sources."""
        log_path = self.work / f"{name}.log"
        log = log_path.open("wb")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(HERE.parent / d) for d in ("src", "extproc", "."))}
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)

        def stop() -> None:
            proc.terminate()
            proc.wait(10)
            log.close()

        self.cleanups.append(stop)
        deadline = time.monotonic() + 30
        while not ready():
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        return proc

    def generation_file(self) -> Path:
        """The bench generation serialized, for the levers that are handed it instead of being published to."""
        path = self.work / "generation.pb"
        path.write_bytes(generation_to_proto(self.gen, origin="bench").SerializeToString())
        return path

    def native(self) -> Target:
        e = self.envoy("native", static_bootstrap(self.gen))
        return Target("native", "Envoy weighted_clusters, no ext_proc", e.listener_port("bench"), e, [], e.stop)

    def python(self, env: dict[str, str] | None = None, interpreter: str | None = None) -> Target:
        """As shipped; `env` (a lever such as a grpc setting) is set for the processor process only; `interpreter`
        runs it on another Python (one with the product's dependencies installed)."""
        name = "python" + "".join(f"+{k}={v}" for k, v in (env or {}).items())
        name += f"@{interpreter}" if interpreter else ""
        d = self.work / re.sub(r"[^\w.=+-]", "_", name)
        d.mkdir()
        saved_env, saved_exe = dict(os.environ), sys.executable
        os.environ.update(env or {})
        sys.executable = interpreter or sys.executable  # the test support starts the processor with sys.executable
        try:
            dp = Dataplane.start(d, self.backends, message_timeout_ms=self.message_timeout_ms)
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
            sys.executable = saved_exe
        self.cleanups.append(dp.stop)
        dp.publish([self._spec()])
        desc = "Envoy + trafficsplit processor as shipped (grpc.aio, ADS)" + (f", env {env}" if env else "")
        desc += f", on {interpreter}" if interpreter else ""
        return Target(name, desc, dp.port, dp.envoy, [dp.processor.pid], dp.stop)

    def python_processes(self, n: int) -> Target:
        # Each process is a whole unit as shipped (its own idle Envoy subscribes to its ADS, so a publish is ACKed
        # and the process holds the generation); the measured Envoy sends ext_proc to all of them.
        units = []
        for i in range(n):
            d = self.work / f"unit{i}"
            d.mkdir(exist_ok=True)
            dp = Dataplane.start(d, self.backends, message_timeout_ms=self.message_timeout_ms, replica=f"bench-{i}")
            self.cleanups.append(dp.stop)
            dp.publish([self._spec()])
            units.append(dp)
        addrs = [Address(path=str(u.processor.socket)) for u in units]
        e = self.envoy(f"x{n}", static_bootstrap(self.gen, addrs, self.message_timeout_ms))
        desc = f"lever: {n} processor processes, {n} ext_proc endpoints"
        return Target(f"python-x{n}", desc, e.listener_port("bench"), e, [u.processor.pid for u in units], e.stop)

    def python_google_grpc(self) -> Target:
        """Lever: Envoy's other gRPC client (google_grpc, the gRPC C++ library) instead of its own (envoy_grpc) for
        the ext_proc stream, to the same processor as shipped."""
        d = self.work / "google-grpc"
        d.mkdir()
        dp = Dataplane.start(d, self.backends, message_timeout_ms=self.message_timeout_ms)
        self.cleanups.append(dp.stop)
        dp.publish([self._spec()])
        cfg = json.loads(static_bootstrap(self.gen, [Address(path=str(dp.processor.socket))], self.message_timeout_ms))
        hcm = cfg["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
        ext = hcm["http_filters"][0]["typed_config"]
        ext["grpc_service"] = {
            "google_grpc": {"target_uri": f"unix:{dp.processor.socket}", "stat_prefix": "extproc_google"}
        }
        e = self.envoy("google-grpc", json.dumps(cfg))
        desc = "lever: the processor as shipped, Envoy's google_grpc client for ext_proc"
        return Target("python-google-grpc", desc, e.listener_port("bench"), e, [dp.processor.pid], e.stop)

    def go(self) -> Target:
        binary = build_refproc()
        sock = self.work / "refproc.sock"
        backends = ",".join(f"{b.cluster}={b.weight}" for b in self.gen.splits[0].backends)
        argv = [str(binary), "-listen", f"unix:{sock}", "-host", HOST, "-cookie", COOKIE_NAME, "-backends", backends]
        proc = self.process("refproc", argv, sock.exists)
        e = self.envoy("go", static_bootstrap(self.gen, [Address(path=str(sock))], self.message_timeout_ms))
        desc = "Envoy + Go reference processor (same pick, cookie, reply)"
        return Target("go", desc, e.listener_port("bench"), e, [proc.pid], e.stop)

    def python_http(self) -> Target:
        """The product with its experimental http_service transport: `python -m trafficsplit.extproc
        --ext-proc-transport http` (ext_proc over HTTP/1.1 + JSON on its own Unix socket, ADS on gRPC) and the
        bootstrap `trafficsplit.wire.bootstrap` builds for it, routes over ADS, as `python` otherwise."""
        d = self.work / "python-http"
        d.mkdir()
        dp = Dataplane.start(d, self.backends, message_timeout_ms=self.message_timeout_ms, transport="http")
        self.cleanups.append(dp.stop)
        dp.publish([self._spec()])
        desc = "Envoy + trafficsplit processor, --ext-proc-transport http (http_service, experimental)"
        return Target("python-http", desc, dp.port, dp.envoy, [dp.processor.pid], dp.stop)

    def python_grpclib(self) -> Target:
        """Lever: the same Processor.handle for the same ext_proc stream, served by grpclib instead of grpc.aio
        (bench/grpclibproc.py); Envoy as for `go`: the filter as shipped, static routes, a Unix socket."""
        sock = self.work / "grpclibproc.sock"
        ready = self.work / "grpclibproc.ready"
        argv = [sys.executable, str(HERE / "grpclibproc.py"), "--socket", str(sock)]
        argv += ["--generation", str(self.generation_file()), "--ready-file", str(ready)]
        proc = self.process("grpclibproc", argv, ready.exists)
        e = self.envoy("grpclib", static_bootstrap(self.gen, [Address(path=str(sock))], self.message_timeout_ms))
        desc = "lever: Processor.handle over the ext_proc gRPC stream served by grpclib (h2, uvloop, Unix socket)"
        return Target("python-grpclib", desc, e.listener_port("bench"), e, [proc.pid], e.stop)

    def _spec(self) -> dict[str, Any]:
        return split_doc(HOST, WEIGHTS, sticky=True, cookie=COOKIE_NAME, debug=False)

    def target(self, name: str) -> Target:
        if name == "native":
            return self.native()
        if name == "python":
            return self.python()
        if name.startswith("python@"):
            return self.python(interpreter=name.removeprefix("python@"))
        if name.startswith("python+"):
            return self.python(dict(item.split("=", 1) for item in name.split("+")[1:]))
        if name == "go":
            return self.go()
        if name == "python-http":
            return self.python_http()
        if name == "python-google-grpc":
            return self.python_google_grpc()
        if name == "python-grpclib":
            return self.python_grpclib()
        m = re.fullmatch(r"python-x(\d+)", name)
        if m:
            return self.python_processes(int(m.group(1)))
        raise SystemExit(f"unknown configuration {name!r}")


@contextlib.contextmanager
def bench_setup(message_timeout_ms: int) -> Iterator[Bench]:
    with tempfile.TemporaryDirectory(prefix="ts-bench-") as d:
        work = Path(d)
        backends = NameBackends.start(work / "", names=tuple(WEIGHTS))
        spec = parse_split("default", "split-0", split_doc(HOST, WEIGHTS, sticky=True, cookie=COOKIE_NAME, debug=False))
        gen, rejected = assemble_generation(
            1, [compile_split(spec, {n: [Endpoint(*backends.endpoint(n))] for n in WEIGHTS})]
        )
        assert not rejected
        b = Bench(work, backends, gen, message_timeout_ms)
        try:
            yield b
        finally:
            for stop in reversed(b.cleanups):
                with contextlib.suppress(Exception):
                    stop()
            backends.envoy.stop()


# --- results ------------------------------------------------------------------------------------------------------


def median_of(runs: Sequence[Run]) -> dict[str, float | int]:
    return {
        "rps": round(statistics.median(r.rps for r in runs), 1),
        "p50_ms": round(statistics.median(r.p50_ms for r in runs), 3),
        "p99_ms": round(statistics.median(r.p99_ms for r in runs), 3),
        "p999_ms": round(statistics.median(r.p999_ms for r in runs), 3),
        "envoy_cpu_us_per_request": round(statistics.median(r.envoy_cpu_us for r in runs), 1),
        "processor_cpu_us_per_request": round(statistics.median(r.processor_cpu_us for r in runs), 1),
        "processor_calls_per_request": round(
            sum(r.processor_calls for r in runs) / max(sum(r.requests for r in runs), 1), 3
        ),
        "requests": sum(r.requests for r in runs),
        "errors": sum(r.errors for r in runs),
        "failed_open": sum(r.fail_open for r in runs),
    }


def ratios(m: dict[str, float | int], base: dict[str, float | int]) -> dict[str, float]:
    return {
        "rps": round(m["rps"] / base["rps"], 3),
        "p50_added_ms": round(m["p50_ms"] - base["p50_ms"], 3),
        "p99_added_ms": round(m["p99_ms"] - base["p99_ms"], 3),
        "envoy_cpu": round(m["envoy_cpu_us_per_request"] / base["envoy_cpu_us_per_request"], 2),
    }


def machine(load_start: tuple[float, float, float]) -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        model = next(
            (
                ln.split(":", 1)[1].strip()
                for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if "model name" in ln
            ),
            "",
        )
    envoy_version = subprocess.run([envoy_binary(), "--version"], capture_output=True, text=True).stdout.strip()
    go_version = (
        subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip() if shutil.which("go") else ""
    )
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "loadavg_start": [round(x, 2) for x in load_start],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "envoy": envoy_version.split("version:")[-1].strip(),
        "go": go_version,
        "note": "Envoy --concurrency 1; wrk -t1; backends one Envoy with direct_response; all on the same cores",
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "| config | c | req/s | p50 ms | p99 ms | p99.9 ms | Envoy CPU µs/req | processor CPU µs/req | req/s vs native "
        "| p50 added ms | errors | failed open |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in result["concurrency"]:
        for name, cfg in result["configs"].items():
            m = cfg["by_concurrency"][str(c)]
            r = cfg.get("ratio_to_native", {}).get(str(c), {"rps": float("nan"), "p50_added_ms": float("nan")})
            proc = f"{m['processor_cpu_us_per_request']:.0f}" if name != "native" else "–"
            lines.append(
                f"| {name} | {c} | {m['rps']:,.0f} | {m['p50_ms']:.2f} | {m['p99_ms']:.2f} | {m['p999_ms']:.2f} "
                f"| {m['envoy_cpu_us_per_request']:.0f} | {proc} | {r['rps']:.2f} | {r['p50_added_ms']:+.2f} "
                f"| {m['errors']} | {m['failed_open']} |"
            )
    mach = result["machine"]
    lines.append("")
    lines.append(
        f"{result['rounds']} alternating rounds of {result['duration_s']:g} s, medians; {mach['cpus']} CPUs "
        f"({mach['cpu_model']}); loadavg at start {mach['loadavg_start']}, at end {mach['loadavg_end']}."
    )
    return "\n".join(lines) + "\n"


def run_bench(args: argparse.Namespace) -> dict[str, Any]:
    load_start = os.getloadavg()
    configs = args.configs.split(",")
    conc = [int(c) for c in args.concurrency.split(",")]
    runs: dict[tuple[str, int], list[Run]] = {}
    with bench_setup(args.message_timeout_ms) as b:
        targets = {name: b.target(name) for name in configs}
        for t in targets.values():
            check_routing(t)
            wrk(t.port, max(conc), 1.0)  # warm-up: connections, code paths, caches
        for rnd in range(args.rounds):
            for c in conc:
                for name in configs if rnd % 2 == 0 else list(reversed(configs)):
                    runs.setdefault((name, c), []).append(measure(targets[name], c, args.duration))
    result: dict[str, Any] = {
        "benchmark": "dataplane",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "rounds": args.rounds,
        "duration_s": args.duration,
        "concurrency": conc,
        "load": f"wrk -t1, sticky split {WEIGHTS}, every {MINT_EVERY}th request without a cookie (mint)",
        "configs": {},
    }
    for name in configs:
        by_c = {str(c): median_of(runs[(name, c)]) for c in conc}
        result["configs"][name] = {
            "description": targets[name].description,
            "by_concurrency": by_c,
            "runs": {str(c): [asdict(r) for r in runs[(name, c)]] for c in conc},
        }
    if "native" in configs:
        for name in configs:
            cfg = result["configs"][name]
            base = result["configs"]["native"]["by_concurrency"]
            cfg["ratio_to_native"] = {str(c): ratios(cfg["by_concurrency"][str(c)], base[str(c)]) for c in conc}
    if "go" in configs:
        go = result["configs"]["go"]["by_concurrency"]
        for name in configs:
            cfg = result["configs"][name]
            cfg["rps_ratio_to_go"] = {
                str(c): round(cfg["by_concurrency"][str(c)]["rps"] / go[str(c)]["rps"], 3) for c in conc
            }
    result["machine"] = machine(load_start)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", default="1,32,64")
    configs = "native, python, go, python-xN, python-http, python-grpclib, python-google-grpc, python+ENV=VALUE, "
    configs += "python@INTERPRETER"
    p.add_argument("--configs", default="native,python,go", help=configs)
    p.add_argument("--message-timeout-ms", type=int, default=200)
    p.add_argument("--out", type=Path, help="JSON path (default bench/results/<date>-dataplane.json)")
    p.add_argument("--handle", action="store_true", help="only the processor's own work per request, in process")
    args = p.parse_args()
    if args.handle:
        handle_costs(7)
        return
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is required (apt-get install -y wrk)")
    result = run_bench(args)
    out = args.out or HERE / "results" / f"{datetime.date.today().isoformat()}-dataplane.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    out.with_suffix(".md").write_text(table)
    print(table)
    print(f"wrote {out} and {out.with_suffix('.md')}")


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


if __name__ == "__main__":
    main()
