"""What a Gateway route costs beside Envoy-native, side by side in one run, now that routes compile to native Envoy.

Why: HTTPRoutes used to be served by a router in Python behind one catch-all Envoy route, and every request paid an
ext_proc round trip (one run: a one-backend HTTPRoute at 0.23 of Envoy-native req/s with 728 µs of processor CPU
per request, a 90/10 rule with a sealed session cookie at 0.15). Gateway routes now compile to native Envoy routes
(wire/gateway_routes.py, wire/snapshot.py) and ext_proc is disabled per route except where a rule splits or keeps a
session; this measures what that leaves. Not a test: nothing is asserted; the output is data
(`bench/results/<date>-gateway-routes.json` and a markdown table beside it).

Configurations (each one Envoy, `--concurrency 1`, in front of the same loopback backends, the test support's name
backends: one Envoy answering each name with a direct response):

  native         Envoy alone: one virtual host for the host, a prefix `/` route to a static cluster of the backend, no
                 ext_proc filter, no access log. The limit for this job on this machine.
  native-log     as native, plus the access log the product's bootstrap writes (the same JSON format, to a file): how
                 much of any gap is the access log rather than the route.
  single         the product: Gateway `ns/gw` with one HTTPRoute with one backendRef, translated by the core
                 (`translate` → `gateway_content`), published to `python -m trafficsplit.extproc`, which serves it to
                 the Envoy `trafficsplit.wire.bootstrap` builds over ADS (tests/support/gatewayplane.py, as the
                 Gateway integration tests start it). ext_proc is disabled on this route.
  split          the product, one rule with backendRefs stable 90 / canary 10 and no sessionPersistence: the processor
                 picks by the request id.
  split-cookie   the product, the same rule with `sessionPersistence: {type: Cookie}`: the processor reads and checks
                 the sealed cookie, or mints and seals one.

Levers (with --configs; the product's single-backend data plane as Envoy received it, read from its admin
/config_dump and made static: the same listener, connection manager, route configuration and clusters, with the
backend's cluster STATIC on the same endpoint), to say where a gap to native is:

  single-static             all of it: should measure as `single`.
  single-static-no-extproc  without the ext_proc HTTP filter (and the routes' per-route ExtProcPerRoute).
  single-static-no-log      without the access log.
  single-static-bare        without either.
  single-static-filter-off  the ext_proc filter `disabled: true` in the chain (created only for routes whose
                            typed_per_filter_config enables it), the rest as shipped.

Every configuration gets the same requests: wrk (`-t1`) with `bench/wrk_mix.lua`, 90 % carrying a valid sealed
session cookie (minted by the split-cookie plane before measuring) and every 10th none, so split-cookie mints for
10 % as in bench_dataplane.py; the other configurations ignore the cookie. Each round runs every configuration,
alternating (A B C ... then reversed), and the median over rounds is reported. CPU per request is the difference of
utime+stime in /proc/<pid>/stat over a run divided by the requests wrk completed; `processor calls/req` is Envoy's own
count of ext_proc streams started over the run, divided likewise (0 where the route never reaches Python). Loopback
only; every run is bounded by --duration.

    PYTHONPATH=src:extproc:operator:. python bench/bench_gateway_routes.py [--duration 5] [--rounds 3]
        [--concurrency 32] [--configs native,native-log,single,split,split-cookie] [--out PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import http.client
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from tests.support.dataplane import Envoy, NameBackends
from tests.support.gatewayplane import GatewayPlane
from trafficsplit.wire.bootstrap import HCM_STAT_PREFIX, access_log
from trafficsplit.wire.reserved import EXTPROC_CLUSTER

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_dataplane import Run, machine, measure, median_of, wrk  # type: ignore[import-not-found]

HERE = Path(__file__).resolve().parent
HOST = "shop.example"
SESSION = "ts-session"
MINT_EVERY = 10  # every 10th request carries no cookie: the split-cookie rule mints for 10 %
BACKENDS = ("stable", "canary")
LISTENERS = [{"name": "http", "port": 80, "protocol": "HTTP"}]
STREAMS_STAT = f"http.{HCM_STAT_PREFIX}.ext_proc.trafficsplit.streams_started"
# The figures before the native compile (same shape: Envoy --concurrency 1, wrk c=32, alternating).
BEFORE = {"single": {"rps_ratio": 0.23, "processor_cpu_us": 728.0}, "split-cookie": {"rps_ratio": 0.15}}


def ref(name: str, weight: int) -> dict[str, Any]:
    return {"name": name, "port": 80, "weight": weight}


def httproute(rule: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "shop", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [HOST], "rules": [dict(rule)]},
    }


RULES: dict[str, dict[str, Any]] = {
    "single": {"backendRefs": [ref("stable", 1)]},
    "split": {"backendRefs": [ref("stable", 90), ref("canary", 10)]},
    "split-cookie": {
        "backendRefs": [ref("stable", 90), ref("canary", 10)],
        "sessionPersistence": {"sessionName": SESSION, "type": "Cookie"},
    },
}
DESCRIPTIONS = {
    "native": "Envoy alone: static route to the backend, no ext_proc filter, no access log",
    "native-log": "Envoy alone as native, plus the product's access log (JSON, to a file)",
    "single": "product: HTTPRoute, one backendRef (ext_proc disabled on the route), over ADS",
    "split": "product: HTTPRoute, 90/10, no sessionPersistence (processor picks by request id)",
    "split-cookie": "product: HTTPRoute, 90/10, sessionPersistence Cookie (sealed; 10 % minted)",
}
LEVERS: dict[str, tuple[str, ...]] = {
    "single-static": (),
    "single-static-no-extproc": ("extproc",),
    "single-static-no-log": ("log",),
    "single-static-bare": ("extproc", "log"),
    "single-static-filter-off": ("filter-off",),
}
DESCRIPTIONS.update(
    {
        "single-static": "lever: single's Envoy config from its config_dump, made static",
        "single-static-no-extproc": "lever: single-static without the ext_proc filter",
        "single-static-no-log": "lever: single-static without the access log",
        "single-static-bare": "lever: single-static without the ext_proc filter and the access log",
        "single-static-filter-off": "lever: single-static with the ext_proc filter disabled: true in the chain",
    }
)


# --- Envoy alone --------------------------------------------------------------------------------------------------


def native_bootstrap(backend: tuple[str, int], log_path: str | None) -> str:
    """Plain Envoy: the host's virtual host, one prefix route to a static cluster of `backend`; with `log_path`,
    the product's access log (the bootstrap's own AccessLog message) on the connection manager."""
    hcm: dict[str, Any] = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3"
        ".HttpConnectionManager",
        "stat_prefix": HCM_STAT_PREFIX,
        "strip_any_host_port": True,
        "route_config": {
            "name": "native",
            "virtual_hosts": [
                {"name": HOST, "domains": [HOST], "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "b"}}]}
            ],
        },
        "http_filters": [
            {
                "name": "envoy.filters.http.router",
                "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
            }
        ],
    }
    if log_path:
        hcm["access_log"] = [json_format.MessageToDict(access_log(log_path), preserving_proto_field_name=True)]
    address, port = backend
    cluster = {
        "name": "b",
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {
            "cluster_name": "b",
            "endpoints": [
                {
                    "lb_endpoints": [
                        {"endpoint": {"address": {"socket_address": {"address": address, "port_value": port}}}}
                    ]
                }
            ],
        },
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
                "clusters": [cluster],
            },
        }
    )


def dumped(envoy: Envoy) -> tuple[dict[str, Any], dict[str, Any], dict[str, dict[str, Any]], dict[str, Any]]:
    """The connection manager, route configuration, clusters (by name) and overload manager Envoy holds."""
    by = {c["@type"].rsplit(".", 1)[-1]: c for c in json.loads(envoy.admin_get("/config_dump")[1])["configs"]}
    (listener,) = by["ListenersConfigDump"]["static_listeners"]
    hcm = listener["listener"]["filter_chains"][0]["filters"][0]["typed_config"]
    (route,) = by["RoutesConfigDump"]["dynamic_route_configs"]
    dump = by["ClustersConfigDump"]
    clusters = {c["cluster"]["name"]: c["cluster"] for c in dump["dynamic_active_clusters"] + dump["static_clusters"]}
    return hcm, route["route_config"], clusters, by["BootstrapConfigDump"]["bootstrap"]["overload_manager"]


def static_product_bootstrap(envoy: Envoy, backend: tuple[str, int], work: Path, drop: tuple[str, ...]) -> str:
    """The product's single-backend data plane as `envoy` holds it, made static (routes inline, the backend's
    cluster STATIC on `backend`, ext_proc's cluster a socket nobody serves: the route never calls it), less `drop`."""
    hcm, route, clusters, overload = copy.deepcopy(dumped(envoy))
    hcm.pop("rds")
    route.pop("@type", None)
    hcm["route_config"] = route
    hcm["access_log"][0]["typed_config"]["path"] = str(work / "static.access.log")
    if "log" in drop:
        hcm.pop("access_log")
    for f in hcm["http_filters"]:
        if "ext_proc" in f["name"] and "filter-off" in drop:
            f["disabled"] = True
    if "extproc" in drop:
        hcm["http_filters"] = [f for f in hcm["http_filters"] if "ext_proc" not in f["name"]]
        for vh in route["virtual_hosts"]:
            for r in vh["routes"]:
                r.pop("typed_per_filter_config", None)
    out = []
    for c in clusters.values():
        c.pop("@type")
        if c["name"] == EXTPROC_CLUSTER:
            c["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"] = {
                "pipe": {"path": str(work / "nobody.sock")}
            }
        elif c.pop("eds_cluster_config", None) is not None:
            c["type"] = "STATIC"
            address = {"socket_address": {"address": backend[0], "port_value": backend[1]}}
            c["load_assignment"] = {
                "cluster_name": c["name"],
                "endpoints": [{"lb_endpoints": [{"endpoint": {"address": address}}]}],
            }
        else:
            continue  # ADS: nothing to subscribe to
        out.append(c)
    listener = {
        "name": "bench",
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
        "filter_chains": [
            {"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]}
        ],
    }
    admin = {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}}
    return json.dumps(
        {"admin": admin, "overload_manager": overload, "static_resources": {"listeners": [listener], "clusters": out}}
    )


# --- one configuration under load ---------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    port: int
    envoy: Envoy
    processor_pids: list[int]

    @property
    def envoy_pid(self) -> int:
        assert self.envoy.proc is not None
        return self.envoy.proc.pid


def get(port: int, cookie: str | None) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/", headers={"Host": HOST, **({"Cookie": cookie} if cookie else {})})
        r = conn.getresponse()
        r.read()
        return r
    finally:
        conn.close()


def check_routing(t: Target, cookie: str) -> None:
    """Before measuring, each configuration does the work it is measured for: the single-backend and native routes
    answer from stable without an ext_proc stream; the split rules reach the processor; the cookie rule keeps a
    request with the sealed cookie on its sealed backend and mints a cookie for one without."""
    before = t.envoy.stat(STREAMS_STAT)
    sealed_backend = cookie.split("=", 1)[1].split(".")[1]
    for c in (cookie, None):
        r = get(t.port, c)
        backend = r.getheader("x-backend")
        assert r.status == 200 and backend in BACKENDS, (t.name, r.status, r.getheaders())
        if t.name in ("native", "native-log", "single", *LEVERS):
            assert backend == "stable", (t.name, backend)
        if t.name == "split-cookie":
            minted = (r.getheader("set-cookie") or "").startswith(f"{SESSION}=")
            assert minted == (c is None), (t.name, c, r.getheaders())
            if c is not None:
                assert backend == sealed_backend, (t.name, backend, sealed_backend)
    calls = t.envoy.stat(STREAMS_STAT) - before
    assert calls == (2 if t.name.startswith("split") else 0), (t.name, "ext_proc streams", calls)


# --- setting the configurations up -------------------------------------------------------------------------------


@dataclass
class Bench:
    work: Path
    backends: NameBackends
    cleanups: list[Callable[[], object]] = field(default_factory=list)
    planes: dict[str, Target] = field(default_factory=dict)

    def native(self, name: str) -> Target:
        d = self.work / name
        d.mkdir()
        log = str(d / "native.access.log") if name == "native-log" else None
        e = Envoy(d, native_bootstrap(self.backends.endpoint("stable"), log), name=name).start()
        self.cleanups.append(e.stop)
        return Target(name, e.listener_port("bench"), e, [])

    def product(self, name: str) -> Target:
        d = self.work / name
        d.mkdir()
        gp = GatewayPlane.start(d, self.backends, [80])
        self.cleanups.append(gp.stop)
        gp.publish(LISTENERS, [httproute(RULES[name])])
        self.planes[name] = Target(name, gp.ports[80], gp.envoy, [gp.processor.pid])
        return self.planes[name]

    def lever(self, name: str) -> Target:
        single = self.planes.get("single") or self.product("single")
        d = self.work / name
        d.mkdir()
        config = static_product_bootstrap(single.envoy, self.backends.endpoint("stable"), d, LEVERS[name])
        e = Envoy(d, config, name=name).start()
        self.cleanups.append(e.stop)
        return Target(name, e.listener_port("bench"), e, [])

    def target(self, name: str) -> Target:
        if name in ("native", "native-log"):
            return self.native(name)
        if name in RULES:
            return self.product(name)
        if name in LEVERS:
            return self.lever(name)
        raise SystemExit(f"unknown configuration {name!r}")


@contextlib.contextmanager
def bench_setup() -> Iterator[Bench]:
    with tempfile.TemporaryDirectory(prefix="ts-gwbench-") as d:
        work = Path(d)
        backends = NameBackends.start(work, names=BACKENDS)
        b = Bench(work, backends)
        try:
            yield b
        finally:
            for stop in reversed(b.cleanups):
                with contextlib.suppress(Exception):
                    stop()
            backends.envoy.stop()


def sealed_cookie(t: Target) -> str:
    """A session the cookie rule minted and sealed (KEY.BACKEND.MAC), as `name=value` for the Cookie header."""
    r = get(t.port, None)
    set_cookie = r.getheader("set-cookie") or ""
    assert set_cookie.startswith(f"{SESSION}="), r.getheaders()
    return set_cookie.split(";", 1)[0]


def fallback_cookie(b: Bench) -> str:
    """Without the cookie plane in the run: a plane of its own mints one, so every run sends the same bytes."""
    t = b.product("split-cookie")
    return sealed_cookie(t)


# --- results ------------------------------------------------------------------------------------------------------


def markdown(result: dict[str, Any]) -> str:
    c = result["concurrency"]
    lines = [
        f"| config (c={c}) | req/s | vs native | p50 ms | p99 ms | p99.9 ms | Envoy CPU µs/req | processor CPU µs/req "
        "| processor calls/req | errors | failed open | before (issue 28) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, cfg in result["configs"].items():
        m = cfg["median"]
        ratio = cfg.get("rps_ratio_to_native", float("nan"))
        proc = f"{m['processor_cpu_us_per_request']:.0f}" if cfg["processor"] else "–"
        before = BEFORE.get(name, {})
        was = f"{before['rps_ratio']:.2f} of native" if before else "–"
        if "processor_cpu_us" in before:
            was += f", {before['processor_cpu_us']:.0f} µs"
        lines.append(
            f"| {name} | {m['rps']:,.0f} | {ratio:.2f} | {m['p50_ms']:.2f} | {m['p99_ms']:.2f} | {m['p999_ms']:.2f} "
            f"| {m['envoy_cpu_us_per_request']:.0f} | {proc} | {m['processor_calls_per_request']:.2f} "
            f"| {m['errors']} | {m['failed_open']} | {was} |"
        )
    mach = result["machine"]
    lines.append("")
    lines.append(
        f"{result['rounds']} alternating rounds of {result['duration_s']:g} s, medians; {mach['cpus']} CPUs "
        f"({mach['cpu_model']}); loadavg at start {mach['loadavg_start']}, at end {mach['loadavg_end']}; "
        f"Envoy {mach['envoy']}."
    )
    return "\n".join(lines) + "\n"


def run_bench(args: argparse.Namespace) -> dict[str, Any]:
    load_start = os.getloadavg()
    configs = args.configs.split(",")
    runs: dict[str, list[Run]] = {}
    with bench_setup() as b:
        targets = {name: b.target(name) for name in configs}
        cookie = sealed_cookie(targets["split-cookie"]) if "split-cookie" in targets else fallback_cookie(b)
        for t in targets.values():
            check_routing(t, cookie)
            wrk(t.port, args.concurrency, 1.0, cookie)  # warm-up: connections, code paths, caches
        for rnd in range(args.rounds):
            for name in configs if rnd % 2 == 0 else list(reversed(configs)):
                runs.setdefault(name, []).append(
                    measure(targets[name], args.concurrency, args.duration, cookie, STREAMS_STAT)
                )
    result: dict[str, Any] = {
        "benchmark": "gateway-routes",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "rounds": args.rounds,
        "duration_s": args.duration,
        "concurrency": args.concurrency,
        "load": f"wrk -t1, one host, every {MINT_EVERY}th request without the sealed session cookie",
        "before": BEFORE,
        "configs": {},
    }
    for name in configs:
        result["configs"][name] = {
            "description": DESCRIPTIONS[name],
            "rule": RULES.get(name),
            "processor": bool(targets[name].processor_pids),
            "median": median_of(runs[name]),
            "runs": [asdict(r) for r in runs[name]],
        }
    if "native" in configs:
        base = result["configs"]["native"]["median"]
        for name in configs:
            cfg = result["configs"][name]
            m = cfg["median"]
            cfg["rps_ratio_to_native"] = round(m["rps"] / base["rps"], 3)
            cfg["p99_added_ms"] = round(m["p99_ms"] - base["p99_ms"], 3)
            cfg["rps_ratio_per_round"] = [
                round(r.rps / n.rps, 3) for r, n in zip(runs[name], runs["native"], strict=True)
            ]
    result["machine"] = machine(load_start)
    result["machine"]["note"] = (
        "Envoy --concurrency 1 for every configuration and for the backends; wrk -t1; all on the same cores, "
        "which other work was using at the same time (loadavg above): the ratios, measured side by side, are the "
        "figure, not the absolute req/s"
    )
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--configs", default="native,native-log,single,split,split-cookie")
    p.add_argument("--out", type=Path, help="JSON path (default bench/results/<date>-gateway-routes.json)")
    args = p.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is required (apt-get install -y wrk)")
    result = run_bench(args)
    out = args.out or HERE / "results" / f"{datetime.date.today().isoformat()}-gateway-routes.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    out.with_suffix(".md").write_text(table)
    print(table)
    print(f"wrote {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
