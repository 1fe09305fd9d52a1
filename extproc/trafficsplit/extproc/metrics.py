"""The processor's Prometheus metrics, one registry per process object (no module-level collectors).

The fail-open gap cannot be counted here: a request Envoy routes without us never reaches this process. Envoy counts
it (`http.trafficsplit.ext_proc.trafficsplit.failure_mode_allowed` and the fallback route's
`vhost.<split>.route.fallback.*`); with --envoy-stats, envoystats.py re-exports those counters beside these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from trafficsplit.core.decide.sketch import BillReport

BillSource = Callable[[], list[tuple[str, BillReport]]]

# Processor work is microseconds; the top buckets catch event-loop stalls near Envoy's message_timeout.
_LATENCY_BUCKETS = (25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.decisions = Counter(
            "trafficsplit_decisions",
            "Requests decided by the processor, by split, backend, key source, decision path and whether the sticky "
            "key decided the backend",
            ["split", "backend", "key_source", "path", "affinity"],
            registry=r,
        )
        self.undecided = Counter(
            "trafficsplit_undecided",
            "Requests the processor did not route: no_split (answered 404), no_generation (left to Envoy's routes); "
            "on a Gateway's route no_rule (left to Envoy's weights) and error_share (500)",
            ["reason"],
            registry=r,
        )
        self.processor_seconds = Histogram(
            "trafficsplit_processor_seconds",
            "Time from receiving request headers to the reply, inside the processor",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.held_generation = Gauge("trafficsplit_held_generation", "The generation this replica serves", registry=r)
        self.publish = Counter("trafficsplit_publish", "Publish calls by result", ["result"], registry=r)
        self.xds_acks = Counter("trafficsplit_xds_acks", "Discovery responses Envoy acknowledged", ["type"], registry=r)
        self.xds_nacks = Counter("trafficsplit_xds_nacks", "Discovery responses Envoy rejected", ["type"], registry=r)
        self.ads_streams = Gauge("trafficsplit_ads_streams", "Envoy ADS streams connected", registry=r)
        self.processor_errors = Counter(
            "trafficsplit_processor_errors", "ext_proc messages the processor could not answer", registry=r
        )
        # ext_proc over http_service (--ext-proc-transport http): what the server refused before or instead of
        # `Processor.respond` (decisions, undecided, processor_seconds and processor_errors count as over gRPC).
        self.extproc_transport = Gauge(
            "trafficsplit_extproc_transport", "1 for the transport ext_proc is served over", ["transport"], registry=r
        )
        self.extproc_http_rejected = Counter(
            "trafficsplit_extproc_http_rejected",
            "ext_proc http_service requests refused: bad_request (400), not_found (404), method_not_allowed (405), "
            "too_large (413), malformed_http and head_too_large (request line and headers over 16 KiB): connection "
            "closed; internal_error: closed on an unexpected error (logged)",
            ["reason"],
            registry=r,
        )
        self.extproc_http_connections = Gauge(
            "trafficsplit_extproc_http_connections", "Open ext_proc http_service connections from Envoy", registry=r
        )
        # Health.Watch streams per server (local, publish, health): capped, the excess refused (extproc.health).
        self.health_watches = Gauge(
            "trafficsplit_health_watches", "Health.Watch streams open, by server", ["server"], registry=r
        )
        self.health_watches_refused = Counter(
            "trafficsplit_health_watches_refused",
            "Health.Watch streams refused past the per-server cap (RESOURCE_EXHAUSTED), by server",
            ["server"],
            registry=r,
        )
        # Set to a callback by the server (it needs the running loop): a leak of tasks shows here (the soak reads it).
        self.asyncio_tasks = Gauge("trafficsplit_asyncio_tasks", "asyncio tasks alive in the processor", registry=r)
        self._decided: dict[tuple[str, str, str, str, str], Counter] = {}

    def watch_bills(self, source: BillSource) -> None:
        """Export the live stickiness bills (computed at scrape time, not per request)."""
        self.registry.register(_BillCollector(source))

    def count_decision(self, split: str, backend: str, key_source: str, path: str, affinity: bool = False) -> None:
        """`decisions` for one request; each label set's child is looked up once (the request path: `labels()`
        validates and locks on every call, ~1 µs more per request)."""
        key = (split, backend, key_source, path, "true" if affinity else "false")
        child = self._decided.get(key)
        if child is None:
            child = self._decided[key] = self.decisions.labels(*key)
        child.inc()


class _BillCollector(Collector):
    """`trafficsplit_stickiness_*` gauges (docs/dataplane.md, "The live stickiness bill"). Labels are bounded: split,
    backend, and rank 1..5; never a session key."""

    def __init__(self, source: BillSource) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        p = "trafficsplit_stickiness_"
        requests = GaugeMetricFamily(p + "requests", "Sticky requests recorded in the bill", labels=["split"])
        largest = GaugeMetricFamily(
            p + "largest_session_share", "Share of requests of the n-th largest session", labels=["split", "rank"]
        )
        serial = GaugeMetricFamily(
            p + "serial_fraction", "s: the largest session's share of requests", labels=["split"]
        )
        bound = GaugeMetricFamily(p + "speedup_bound", "Amdahl's limit 1/s for this split", labels=["split"])
        req_share = GaugeMetricFamily(
            p + "backend_request_share", "The backend's share of the split's requests", labels=["split", "backend"]
        )
        ses_share = GaugeMetricFamily(
            p + "backend_session_share",
            "The backend's share of the split's distinct sessions (HyperLogLog estimate)",
            labels=["split", "backend"],
        )
        sessions = GaugeMetricFamily(
            p + "backend_sessions", "Distinct sessions seen on the backend (estimate)", labels=["split", "backend"]
        )
        for split, r in self._source():
            requests.add_metric([split], r.requests)
            for rank, share in enumerate(r.largest_shares, start=1):
                largest.add_metric([split, str(rank)], float(share))
            serial.add_metric([split], float(r.serial_fraction))
            if r.speedup_bound is not None:
                bound.add_metric([split], float(r.speedup_bound))
            for b in r.backends:
                req_share.add_metric([split, b.name], float(b.request_share))
                ses_share.add_metric([split, b.name], b.session_share)
                sessions.add_metric([split, b.name], b.sessions)
        yield from (requests, largest, serial, bound, req_share, ses_share, sessions)
