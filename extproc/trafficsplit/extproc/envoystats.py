"""Envoy's fail-open counters, re-exported with the processor's metrics (`--envoy-stats HOST:PORT`).

A request Envoy routes without the processor (ext_proc failed open onto the split's native fallback route) never
reaches this process, so only Envoy counts it. Envoy's admin interface stays on the pod's loopback (it can also stop
Envoy), so Prometheus cannot scrape it; instead this collector asks it, at scrape time and on the metrics server's
thread, for exactly the counters of that gap, and exports them beside the processor's own:

* `trafficsplit_envoy_failed_open_total`: ext_proc's `failure_mode_allowed` (every request that failed open);
* `trafficsplit_envoy_fallback_requests_total{split}`: the split's fallback routes' `upstream_rq_total`;
* `trafficsplit_envoy_stats_up`: 1 when Envoy answered (0: the two above are missing from this scrape).
"""

from __future__ import annotations

import re
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from trafficsplit.wire.bootstrap import EXTPROC_STAT_PREFIX, HCM_STAT_PREFIX, Address
from trafficsplit.wire.envoy import FALLBACK_STAT_PREFIX

FAILED_OPEN_STAT = f"http.{HCM_STAT_PREFIX}.ext_proc.{EXTPROC_STAT_PREFIX}.failure_mode_allowed"
_FALLBACK = re.compile(rf"^vhost\.(?P<split>[^ :]+)\.route\.{FALLBACK_STAT_PREFIX}\.upstream_rq_total$")
# What the admin is asked for: those counters only (a gateway with thousands of splits has millions of stats).
STATS_FILTER = rf"^({re.escape(FAILED_OPEN_STAT)}|vhost\..+\.route\.{FALLBACK_STAT_PREFIX}\.upstream_rq_total)$"
MAX_BODY = 4 << 20  # 4 MiB: ~50,000 splits' fallback lines; a larger answer is cut, not read whole
TIMEOUT = 1.0  # seconds; a scrape must not hang on a stuck Envoy


@dataclass(frozen=True, slots=True)
class FailOpenStats:
    failed_open: int | None = None  # None: Envoy has no ext_proc filter stat (not our bootstrap)
    fallback: dict[str, int] = field(default_factory=dict)  # split key → fallback requests


def parse_stats(text: str) -> FailOpenStats:
    """Envoy admin `/stats` text (`name: value` lines) → the fail-open counters; other lines are ignored."""
    failed_open: int | None = None
    fallback: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, raw = line.partition(": ")
        if not sep or not raw.strip().isdigit():
            continue
        value = int(raw.strip())
        if name == FAILED_OPEN_STAT:
            failed_open = value
        elif m := _FALLBACK.match(name):
            fallback[m["split"]] = fallback.get(m["split"], 0) + value
    return FailOpenStats(failed_open, fallback)


class EnvoyStatsCollector(Collector):
    def __init__(self, admin: Address) -> None:
        query = urllib.parse.urlencode({"filter": STATS_FILTER})
        self._url = f"http://{admin.host}:{admin.port}/stats?{query}"

    def fetch(self) -> FailOpenStats | None:
        try:
            with urllib.request.urlopen(self._url, timeout=TIMEOUT) as r:
                return parse_stats(r.read(MAX_BODY).decode("utf-8", "replace"))
        except OSError:
            return None

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        stats = self.fetch()
        up = GaugeMetricFamily("trafficsplit_envoy_stats_up", "1 when Envoy's admin answered this scrape")
        up.add_metric([], 0.0 if stats is None else 1.0)
        yield up
        if stats is None:
            return
        failed = CounterMetricFamily(
            "trafficsplit_envoy_failed_open",
            "Requests Envoy routed without the processor (ext_proc failed open: down, timed out, or erred)",
        )
        if stats.failed_open is not None:
            failed.add_metric([], stats.failed_open)
        fallback = CounterMetricFamily(
            "trafficsplit_envoy_fallback_requests",
            "Requests routed by the split's native fallback route (Envoy alone, by the weights)",
            labels=["split"],
        )
        for split, n in sorted(stats.fallback.items()):
            fallback.add_metric([split], n)
        yield failed
        yield fallback
