"""Envoy's fail-open counters, re-exported with the processor's metrics (`--envoy-stats HOST:PORT`).

A request Envoy routes without the processor (ext_proc failed open onto the split's native fallback route) never
reaches this process, so only Envoy counts it. Envoy's admin interface stays on the pod's loopback (it can also stop
Envoy), so Prometheus cannot scrape it; instead this collector asks it, at scrape time and on the metrics server's
thread, for exactly the counters of that gap, and exports them beside the processor's own:

* `trafficsplit_envoy_failed_open_total`: ext_proc's `failure_mode_allowed` (every request that failed open);
* `trafficsplit_envoy_fallback_requests_total{split}`: the split's fallback routes' `upstream_rq_total`;
* `trafficsplit_envoy_backend_responses_total{split, backend, code_class}`: responses of each split backend's cluster
  by status class (`2xx` … `5xx`; Envoy's `cluster.NS/SPLIT/BACKEND.upstream_rq_Nxx`): a backend's success rate,
  which a progressive-delivery analysis reads (docs/flagger.md); the processor only sees requests, never answers;
* `trafficsplit_envoy_backend_request_seconds{split, backend}`: the same clusters' `upstream_rq_time` histogram, its
  cumulative buckets (Envoy's milliseconds as seconds; buckets only, Envoy's text gives no sum): a backend's latency;
* `trafficsplit_envoy_mirror_responses_total{service, port, code_class}` and `trafficsplit_envoy_mirror_request_seconds
  {service, port}`: the same of a RequestMirror's cluster (`mirror:NS/SERVICE:PORT`, one per mirrored Service port, in
  Envoy's stat names `mirror_NS/SERVICE_PORT`): how a mirrored backend answers the copies it gets, which no client
  sees (a blue/green analysis with mirroring reads it; docs/flagger.md);
* `trafficsplit_envoy_stats_up`: 1 when Envoy answered (0: the others are missing from this scrape).
"""

from __future__ import annotations

import re
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from trafficsplit.wire.bootstrap import EXTPROC_STAT_PREFIX, HCM_STAT_PREFIX, Address
from trafficsplit.wire.envoy import FALLBACK_STAT_PREFIX

FAILED_OPEN_STAT = f"http.{HCM_STAT_PREFIX}.ext_proc.{EXTPROC_STAT_PREFIX}.failure_mode_allowed"
_FALLBACK = re.compile(rf"^vhost\.(?P<split>[^ :]+)\.route\.{FALLBACK_STAT_PREFIX}\.upstream_rq_total$")
# A backend cluster is `NAMESPACE/SPLIT/BACKEND` (core.compiled.cluster_name); namespace and backend are DNS labels, a
# split's name may hold dots (an HTTPRoute rule's is `ROUTE.rule-N`) but no '/'.
_RESPONSES = re.compile(
    r"^cluster\.(?P<split>[a-z0-9-]+/[^/ :]+)/(?P<backend>[a-z0-9-]+)\.upstream_rq_(?P<cls>[1-5])xx$"
)
_LATENCY = re.compile(r"^cluster\.(?P<split>[a-z0-9-]+/[^/ :]+)/(?P<backend>[a-z0-9-]+)\.upstream_rq_time$")
# A mirror's cluster `mirror:NS/SERVICE:PORT` (wire.envoy.mirror_cluster_name): Envoy's stat names turn ':' into '_'.
# `mirror_` cannot start a split's cluster (a namespace holds no '_').
_MIRROR = r"^cluster\.mirror_(?P<service>[a-z0-9-]+/[a-z0-9-]+)_(?P<port>[0-9]{1,5})\.upstream_rq_"
_MIRROR_RESPONSES = re.compile(_MIRROR + r"(?P<cls>[1-5])xx$")
_MIRROR_LATENCY = re.compile(_MIRROR + r"time$")
# One cumulative bucket as `histogram_buckets=cumulative` prints it: B<upper bound, ms>(<interval>,<cumulative>).
_BUCKET = re.compile(r"B([0-9.e+]+)\(([0-9.]+),([0-9.]+)\)")
MAX_BUCKETS = 64  # Envoy's default histogram has 19; more on one line is not a histogram we asked for
# What the admin is asked for: those stats only (a gateway with thousands of splits has millions of stats).
STATS_FILTER = (
    rf"^({re.escape(FAILED_OPEN_STAT)}|vhost\..+\.route\.{FALLBACK_STAT_PREFIX}\.upstream_rq_total"
    r"|cluster\.[a-z0-9-]+/[^/ :]+/[a-z0-9-]+\.upstream_rq_([1-5]xx|time)"
    r"|cluster\.mirror_[a-z0-9-]+/[a-z0-9-]+_[0-9]{1,5}\.upstream_rq_([1-5]xx|time))$"
)
# 4 MiB: ~8,000 split backends (a histogram line is ~350 bytes); a larger answer is cut, not read whole.
MAX_BODY = 4 << 20
TIMEOUT = 1.0  # seconds; a scrape must not hang on a stuck Envoy


@dataclass(frozen=True, slots=True, kw_only=True)
class FailOpenStats:
    failed_open: int | None = None  # None: Envoy has no ext_proc filter stat (not our bootstrap)
    fallback: dict[str, int] = field(default_factory=dict)  # split key → fallback requests
    # (split key, backend, "2xx"…) → responses; a class Envoy has not seen yet has no stat, hence no entry
    responses: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # (split key, backend) → ((upper bound in seconds, cumulative count), ...), ascending
    latency: dict[tuple[str, str], tuple[tuple[float, float], ...]] = field(default_factory=dict)
    # ("NS/SERVICE", "PORT", "2xx"…) → responses of that mirror's cluster; ("NS/SERVICE", "PORT") → its buckets
    mirror_responses: dict[tuple[str, str, str], int] = field(default_factory=dict)
    mirror_latency: dict[tuple[str, str], tuple[tuple[float, float], ...]] = field(default_factory=dict)


def parse_buckets(raw: str) -> tuple[tuple[float, float], ...]:
    """`B0.5(3,3) B1(4,5) …` (milliseconds; interval, cumulative) → ((0.0005, 3), (0.001, 5), …); () when the line
    is not that (`No recorded values`, or percentiles)."""
    out = []
    for le, _interval, cumulative in _BUCKET.findall(raw)[:MAX_BUCKETS]:
        try:
            out.append((float(le) / 1000, float(cumulative)))
        except ValueError:
            return ()
    return tuple(out)


def parse_stats(text: str) -> FailOpenStats:
    """Envoy admin `/stats` text (`name: value` lines) → the fail-open counters; other lines are ignored."""
    failed_open: int | None = None
    fallback: dict[str, int] = {}
    responses: dict[tuple[str, str, str], int] = {}
    latency: dict[tuple[str, str], tuple[tuple[float, float], ...]] = {}
    mirror_responses: dict[tuple[str, str, str], int] = {}
    mirror_latency: dict[tuple[str, str], tuple[tuple[float, float], ...]] = {}
    for line in text.splitlines():
        name, sep, raw = line.partition(": ")
        if sep and (m := _LATENCY.match(name)):
            if buckets := parse_buckets(raw):
                latency[(m["split"], m["backend"])] = buckets
            continue
        if sep and (m := _MIRROR_LATENCY.match(name)):
            if buckets := parse_buckets(raw):
                mirror_latency[(m["service"], m["port"])] = buckets
            continue
        if not sep or not raw.strip().isdigit():
            continue
        value = int(raw.strip())
        if name == FAILED_OPEN_STAT:
            failed_open = value
        elif m := _FALLBACK.match(name):
            fallback[m["split"]] = fallback.get(m["split"], 0) + value
        elif m := _RESPONSES.match(name):
            responses[(m["split"], m["backend"], f"{m['cls']}xx")] = value
        elif m := _MIRROR_RESPONSES.match(name):
            mirror_responses[(m["service"], m["port"], f"{m['cls']}xx")] = value
    return FailOpenStats(
        failed_open=failed_open,
        fallback=fallback,
        responses=responses,
        latency=latency,
        mirror_responses=mirror_responses,
        mirror_latency=mirror_latency,
    )


class EnvoyStatsCollector(Collector):
    def __init__(self, admin: Address) -> None:
        query = urllib.parse.urlencode({"filter": STATS_FILTER, "histogram_buckets": "cumulative"})
        self._url = f"http://{admin.host}:{admin.port}/stats?{query}"

    def fetch(self) -> FailOpenStats | None:
        try:
            with urllib.request.urlopen(self._url, timeout=TIMEOUT) as r:
                return parse_stats(r.read(MAX_BODY).decode("utf-8", "replace"))
        except OSError:
            return None

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily]:
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
        responses = CounterMetricFamily(
            "trafficsplit_envoy_backend_responses",
            "Responses of the split backend's cluster by status class (Envoy's upstream_rq_Nxx)",
            labels=["split", "backend", "code_class"],
        )
        for key, n in sorted(stats.responses.items()):
            responses.add_metric(list(key), n)
        latency = HistogramMetricFamily(
            "trafficsplit_envoy_backend_request_seconds",
            "Upstream request time of the split backend's cluster (Envoy's upstream_rq_time; buckets only)",
            labels=["split", "backend"],
        )
        for (split, backend), buckets in sorted(stats.latency.items()):
            latency.add_metric([split, backend], _bounds(buckets), None)
        mirror_responses = CounterMetricFamily(
            "trafficsplit_envoy_mirror_responses",
            "Responses of a RequestMirror's cluster (the copies a mirrored Service port answered) by status class",
            labels=["service", "port", "code_class"],
        )
        for key, n in sorted(stats.mirror_responses.items()):
            mirror_responses.add_metric(list(key), n)
        mirror_latency = HistogramMetricFamily(
            "trafficsplit_envoy_mirror_request_seconds",
            "Upstream request time of a RequestMirror's cluster (Envoy's upstream_rq_time; buckets only)",
            labels=["service", "port"],
        )
        for (service, port), buckets in sorted(stats.mirror_latency.items()):
            mirror_latency.add_metric([service, port], _bounds(buckets), None)
        yield failed
        yield fallback
        yield responses
        yield latency
        yield mirror_responses
        yield mirror_latency


def _bounds(buckets: tuple[tuple[float, float], ...]) -> list[tuple[str, float]]:
    """Envoy's cumulative buckets as Prometheus's: its last bound is an hour, the +Inf bucket everything it counted."""
    return [(_le(b), n) for b, n in buckets] + [("+Inf", buckets[-1][1])]


def _le(seconds: float) -> str:
    return repr(seconds)
