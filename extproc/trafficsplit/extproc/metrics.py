"""The processor's Prometheus metrics, one registry per process object (no module-level collectors).

The fail-open gap cannot be counted here: a request Envoy routes without us never reaches this process. Envoy counts
it (`http.trafficsplit.ext_proc.trafficsplit.failure_mode_allowed` and the fallback route's
`vhost.<split>.route.fallback.*`); docs/dataplane.md says how to read both side by side.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Processor work is microseconds; the top buckets catch event-loop stalls near Envoy's message_timeout.
_LATENCY_BUCKETS = (25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.decisions = Counter(
            "trafficsplit_decisions",
            "Requests decided by the processor, by split, backend, key source and decision path",
            ["split", "backend", "key_source", "path"],
            registry=r,
        )
        self.undecided = Counter(
            "trafficsplit_undecided",
            "Requests the processor did not route: no_split (answered 404), no_generation (left to Envoy's routes)",
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
        # Set to a callback by the server (it needs the running loop): a leak of tasks shows here (the soak reads it).
        self.asyncio_tasks = Gauge("trafficsplit_asyncio_tasks", "asyncio tasks alive in the processor", registry=r)
        self._decided: dict[tuple[str, str, str, str], Counter] = {}

    def count_decision(self, split: str, backend: str, key_source: str, path: str) -> None:
        """`decisions` for one request; each label set's child is looked up once (the request path: `labels()`
        validates and locks on every call, ~1 µs more per request)."""
        key = (split, backend, key_source, path)
        child = self._decided.get(key)
        if child is None:
            child = self._decided[key] = self.decisions.labels(*key)
        child.inc()
