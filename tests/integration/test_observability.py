"""Every Grafana dashboard query and every alert expression the chart ships, executed against a real Prometheus.

Debian's `prometheus` binary (hack/test.sh installs it) runs on loopback with a temporary config that scrapes, every
second, two real gateway units (Envoy + extproc, the extproc reading Envoy's fail-open counters with --envoy-stats)
and a real operator in local mode (--file-source, --metrics), and loads the chart's rules file. Bounded traffic
(sticky sessions through both units' Envoy) makes decisions happen; then:

* each dashboard target, with Grafana's `$split` set to the split and `$__rate_interval` to 1m, returns at least one
  series, and the request share, the weight share and the session share agree with the split's 70/30;
* each alert expression returns at least one series when its threshold comparisons get the `bool` modifier (the
  same expression, every series it watches, 0 or 1 instead of filtered out), and returns none as written: nothing
  fires on a healthy gateway;
* Prometheus evaluated every rule without error;
* provoked: the processor of one unit killed while requests flow, Envoy fails open, and the fail-open alert's
  expression as written (the threshold, without its `for`) returns that unit's job.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.dataplane import run_sessions
from tests.support.operator import PYTHONPATH, Gateway, OperatorProcess
from tests.support.prometheus import Prometheus, alert_rules, dashboard_queries, with_bool
from tests.support.waiting import poll

pytestmark = [pytest.mark.envoy, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SPLIT = "default/shop"
HOST = "shop.local"
COOKIE = "shop-affinity"
SESSIONS = 200  # per unit: the session share's sampling error stays far below the 0.2 alert threshold
WARMUP_SESSIONS = 20  # per unit: creates the decision series before the counted traffic (see the dashboard test)
SPLIT_YAML = """\
apiVersion: trafficsplit.dev/v1alpha1
kind: TrafficSplit
metadata: {{name: shop}}
spec:
  hosts: [{host}]
  backends:
    - {{name: blue, weight: 70, endpoints: ["{blue}"]}}
    - {{name: green, weight: 30, endpoints: ["{green}"]}}
  sticky:
    cookie: {{name: {cookie}}}
  debugHeaders: {debug}
"""


def test_with_bool_rewrites_only_threshold_comparisons() -> None:
    assert with_bool('sum(x{result="a"}) > 5') == 'sum(x{result="a"}) > bool 5'
    assert with_bool('a{le=~"1"} == 0 and on (s) b > 0') == 'a{le=~"1"} == bool 0 and on (s) b > bool 0'
    assert with_bool("abs(a - b)\n> 0.2") == "abs(a - b)\n> bool 0.2"


def send_sessions(gw: Gateway, sessions: int, requests: int) -> int:
    """`sessions` cookie sessions of `requests` requests through every unit's Envoy; returns the 200s."""
    ok = 0
    for u in gw.units:
        out = asyncio.run(run_sessions(u.port, HOST, COOKIE, [None] * sessions, requests, concurrency=16))
        ok += sum(1 for s in out for r in s if r.status == 200)
    return ok


def write_split(path: Path, gw: Gateway, debug: bool) -> None:
    b = gw.units[0].backends
    text = SPLIT_YAML.format(
        host=HOST,
        cookie=COOKIE,
        blue=f"127.0.0.1:{b.ports['blue']}",
        green=f"127.0.0.1:{b.ports['green']}",
        debug="true" if debug else "false",
    )
    path.with_suffix(".tmp").write_text(text)
    os.replace(path.with_suffix(".tmp"), path)  # atomic: the operator never reads half a file


@pytest.fixture
def observed(tmp_path: Path, gateway: Gateway) -> Iterator[tuple[Gateway, Path, Prometheus]]:
    # Each extproc reads its own Envoy's fail-open counters: restarted with --envoy-stats once Envoy's admin is known.
    # Its metrics port is kept from then on (the last --metrics wins): Prometheus scrapes a restarted one there.
    for i, u in enumerate(gateway.units):
        u.processor.extra.append(f"--envoy-stats={u.envoy.admin}")
        gateway.restart_processor(i)
        u.processor.extra.append(f"--metrics=127.0.0.1:{u.processor.ports['metrics']}")
    splits = tmp_path / "splits"
    splits.mkdir()
    write_split(splits / "shop.yaml", gateway, debug=False)
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "PYTHONUNBUFFERED": "1"}
    args = [
        f"--file-source={splits}",
        f"--token-file={gateway.token_file}",
        "--poll-interval=0.5",
        "--metrics=127.0.0.1:0",
        *gateway.dataplane_args(),
    ]
    op = OperatorProcess(args, env, tmp_path / "operator.log").start()
    prom: Prometheus | None = None
    try:
        op_port = poll(op.metrics_port, 20, "the operator's metrics port in its log")
        poll(lambda: gateway.held() == [1, 1], 20, "both units hold generation 1")
        prom = Prometheus(
            tmp_path / "prometheus",
            {
                "operator": [f"127.0.0.1:{op_port}"],
                **{f"gateway-{i}": [f"127.0.0.1:{u.processor.ports['metrics']}"] for i, u in enumerate(gateway.units)},
            },
        )
        yield gateway, splits / "shop.yaml", prom
    finally:
        if prom is not None:
            prom.stop()
        op.stop()
        print(f"--- operator log ---\n{op.log_tail(40)}")


def decisions_scraped(prom: Prometheus) -> int:
    """The split's decisions as Prometheus last scraped them, summed over both units."""
    found = prom.query(f'sum(trafficsplit_decisions_total{{split="{SPLIT}"}})')
    return round(float(found[0]["value"][1])) if found else 0


def targets_up(prom: Prometheus) -> bool:
    return prom.targets_up(3)


def test_every_dashboard_query_and_alert_expression_returns_series(
    observed: tuple[Gateway, Path, Prometheus],
) -> None:
    gw, split_file, prom = observed
    t0 = time.monotonic()
    poll(lambda: targets_up(prom), 30, "every target scraped and up")
    # A change while Prometheus watches: a compile, a publish and its acknowledgements inside every rate window.
    write_split(split_file, gw, debug=True)
    poll(lambda: gw.held() == [2, 2], 20, "both units hold generation 2")
    # rate() ignores a series' first sample, and a decision counter appears only with its first request: traffic
    # that all falls between two scrapes leaves every rate 0 and the request share 0/0 (NaN; CI saw it on a loaded
    # machine). A warm-up creates the series and is scraped first; the counted traffic then lands inside the rates.
    warm = send_sessions(gw, WARMUP_SESSIONS, 3)
    poll(lambda: decisions_scraped(prom) == warm, 15, f"the warm-up's {warm} decisions scraped")
    ok = send_sessions(gw, SESSIONS, 3)
    assert ok == len(gw.units) * SESSIONS * 3
    poll(lambda: decisions_scraped(prom) == warm + ok, 15, f"all {warm + ok} decisions scraped")

    results: dict[str, list[dict[str, Any]]] = {}
    for name, expr in dashboard_queries(SPLIT):
        results[name] = prom.query(expr)
        assert results[name], f"dashboard panel {name!r} returned no series: {expr}"
    # On a loaded machine a processor reply can miss Envoy's message_timeout and fail open: then that alert is right.
    failed_open = prom.query("sum(trafficsplit_envoy_failed_open_total) > 0")
    for rule in alert_rules():
        assert prom.query(with_bool(rule["expr"])), f"{rule['alert']} watches no series: {with_bool(rule['expr'])}"
        if rule["alert"] == "TrafficsplitFailOpen" and failed_open:
            continue
        # A healthy gateway fires nothing.
        assert not prom.query(rule["expr"]), f"{rule['alert']} fires on a healthy gateway"

    def values(name: str) -> dict[str, float]:
        return {r["metric"].get("backend", ""): float(r["value"][1]) for r in results[name]}

    weight = values("Request share per backend against its weight / B")
    assert weight == {"blue": pytest.approx(0.7), "green": pytest.approx(0.3)}
    requests = values("Request share per backend against its weight / A")
    sessions = values("Session share per backend against its weight / A")
    print(f"request share {requests}, session share {sessions}, weight {weight}")
    assert sum(requests.values()) == pytest.approx(1.0)
    for backend in ("blue", "green"):
        # 400 sessions: the sampling error's standard deviation is 0.023 (and each replica's estimate ~1 %).
        assert abs(requests[backend] - weight[backend]) < 0.15
        assert abs(sessions[backend] - weight[backend]) < 0.15
    # And every panel draws a line: no query is NaN only (a quantile with no event in its window would be).
    nan = sorted(n for n, rs in results.items() if all(math.isnan(float(r["value"][1])) for r in rs))
    assert not nan, f"dashboard queries with no value: {nan}"
    lag = values("Publish lag (numbered → acknowledged by a replica) / B")[""]
    print(
        f"{len(results)} dashboard queries and {len(alert_rules())} alerts returned series; p99 publish lag {lag:.3f} s"
    )

    rules = prom.api("rules")["groups"]
    evaluated = [r for g in rules for r in g["rules"]]
    assert len(evaluated) == len(alert_rules())
    assert all(r["health"] == "ok" for r in evaluated), [(r["name"], r.get("lastError")) for r in evaluated]
    print(f"took {time.monotonic() - t0:.1f} s")


def test_the_fail_open_alert_fires_when_a_processor_is_down(
    observed: tuple[Gateway, Path, Prometheus],
) -> None:
    gw, _split_file, prom = observed
    poll(lambda: targets_up(prom), 30, "every target scraped and up")
    send_sessions(gw, 20, 2)
    time.sleep(2)
    gw.kill_processor(0)
    try:
        # Envoy waits for the dead processor's connection, fails open and routes by its native weights.
        out = asyncio.run(run_sessions(gw.units[0].port, HOST, COOKIE, [None] * 20, 2, concurrency=8))
        assert all(r.status == 200 for s in out for r in s)
    finally:
        gw.start_processor(0)
    fail_open = next(r for r in alert_rules() if r["alert"] == "TrafficsplitFailOpen")

    def unit_0_fires() -> list[dict[str, Any]]:
        return [r for r in prom.query(fail_open["expr"]) if r["metric"]["job"] == "gateway-0"]

    # (gateway-1 may fire too: on a loaded machine its processor can miss the 200 ms message_timeout.)
    firing = poll(unit_0_fires, 20, "the fail-open expression above its threshold for gateway-0")
    failed = prom.query('trafficsplit_envoy_failed_open_total{job="gateway-0"}')
    assert float(failed[0]["value"][1]) >= 40  # and any a loaded machine failed open before
    print(f"failed open: {failed[0]['value'][1]}, fail-open share {firing[0]['value'][1]}")
