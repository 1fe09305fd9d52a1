"""The operator's Prometheus metrics, one registry per process object (no module-level collectors).

Events (a pass's compile time, a Publish call, an error) are counted where they happen. What the operator holds
(the generation, which replicas serve it, each backend's weight and endpoints) is exported from an immutable
`OperatorState` the engine swaps in after every pass, read at scrape time: the scrape runs on the metrics server's
thread, so it must never iterate the engine's live dicts.

Every fleet the operator publishes to reports the same series under its own `gateway` label: the chart gateway's
(`OperatorMetrics.gateway`: its publish Service, `static` or `none`) and each provisioned Gateway's
(`gateway_label`: `Gateway/NAMESPACE/NAME`, which cannot equal the chart's `NAMESPACE/SERVICE`). Labels stay bounded:
one `gateway` per fleet this process holds (a deleted Gateway's series are removed with its fleet, `FleetMetrics.
remove`), `result` and `reason` from fixed sets, and `split`/`backend` from the TrafficSplits and HTTPRoute rules the
fleets serve; never a replica address or a session key.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from trafficsplit.core.control.status import ReplicaAck
from trafficsplit.core.model.compiled import CompiledSplit

# Why a pass failed, a generation was not published, or a status not written; all present from the start (at 0) so a
# rate over them is a series, not an absence.
ERROR_REASONS = ("pass_failed", "generation_invalid", "status_write", "replica_unreachable")
# One Publish call's outcome: the replica's answer, or `unreachable` (the call itself failed).
PUBLISH_RESULTS = ("accepted", "stale", "not_ready", "invalid", "unreachable")

# A compile is milliseconds for a few splits, seconds for thousands (docs/performance.md).
_COMPILE_BUCKETS = (1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# A Publish call, and numbering → acknowledged: Envoy's ACK is milliseconds, a NOT_READY replica's retry seconds.
_PUBLISH_BUCKETS = (1e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendState:
    split: str  # namespace/name, as the gateway's own metrics label it
    backend: str
    weight_share: float  # the backend's weight over the split's total (0 when the total is 0)
    endpoints: int  # ready endpoints the published form carries


def gateway_label(namespace: str, name: str) -> str:
    """A provisioned Gateway's `gateway` label. Three segments, so never the chart gateway's two
    (`NAMESPACE/SERVICE`): a Gateway named like the chart's publish Service still has series of its own."""
    return f"Gateway/{namespace}/{name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetState:
    """What one fleet holds after a pass: the number its replicas should hold, their acknowledgements, what they
    refused, and the backends of what was published."""

    generation: int = 0  # the number the fleet should hold (0: nothing published yet)
    acks: tuple[ReplicaAck, ...] = ()
    refused_splits: int = 0  # (split, replica) pairs a replica refused alone from the generation it holds
    held_back: int = 0  # splits held back from publishing (no replica reported a form of them)
    backends: tuple[BackendState, ...] = ()

    @property
    def serving(self) -> int:
        return sum(1 for a in self.acks if self.generation and a.acked >= self.generation)

    @property
    def behind(self) -> int:
        return len(self.acks) - self.serving


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorState(FleetState):
    """What the operator holds after a pass; replaced whole, never mutated. Its own fields are the chart gateway's
    fleet; `gateways` each provisioned Gateway's, by `gateway` label."""

    leader: bool = False
    gateways: tuple[tuple[str, FleetState], ...] = ()


def backend_states(splits: tuple[CompiledSplit, ...]) -> tuple[BackendState, ...]:
    out = []
    for s in splits:
        total = sum(b.weight for b in s.backends)
        for b in s.backends:
            out.append(
                BackendState(
                    split=s.key,
                    backend=b.name,
                    weight_share=b.weight / total if total else 0.0,
                    endpoints=sum(1 for e in b.endpoints if e.ready),
                )
            )
    return tuple(out)


class FleetMetrics:
    """What one fleet counts (Publish results and times, lag, refusals), under its `gateway` label; every `result`
    present at 0 from the start. `remove` drops the label's series: the fleet is closed for good (its Gateway
    deleted) or this process stopped leading, so the label set follows the Gateways that exist."""

    __slots__ = ("gateway", "operator")

    def __init__(self, operator: OperatorMetrics, gateway: str) -> None:
        self.operator = operator
        self.gateway = gateway
        for result in PUBLISH_RESULTS:
            operator.publish_seconds.labels(gateway, result)
        operator.publish_lag_seconds.labels(gateway)
        operator.refusals.labels(gateway)

    def observe_publish(self, result: str, seconds: float) -> None:
        self.operator.publish_seconds.labels(self.gateway, result).observe(seconds)
        if result == "invalid":
            self.operator.refusals.labels(self.gateway).inc()
        elif result == "unreachable":
            self.operator.errors.labels("replica_unreachable").inc()

    def observe_lag(self, seconds: float) -> None:
        self.operator.publish_lag_seconds.labels(self.gateway).observe(seconds)

    def error(self, reason: str) -> None:
        self.operator.error(reason)

    def remove(self) -> None:
        o = self.operator
        for result in PUBLISH_RESULTS:
            with contextlib.suppress(KeyError):
                o.publish_seconds.remove(self.gateway, result)
        for metric in (o.publish_lag_seconds, o.refusals):
            with contextlib.suppress(KeyError):
                metric.remove(self.gateway)


class OperatorMetrics:
    def __init__(self, gateway: str, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.gateway = gateway
        r = self.registry
        self.reconcile_seconds = Histogram(
            "trafficsplit_operator_reconcile_seconds",
            "One pass's compile: the TrafficSplits, Services and EndpointSlices seen → the next generation's content",
            buckets=_COMPILE_BUCKETS,
            registry=r,
        )
        self.publish_seconds = Histogram(
            "trafficsplit_operator_publish_seconds",
            "One Publish call to one gateway replica, by result (accepted, stale, not_ready, invalid, unreachable)",
            ["gateway", "result"],
            buckets=_PUBLISH_BUCKETS,
            registry=r,
        )
        self.publish_lag_seconds = Histogram(
            "trafficsplit_operator_publish_lag_seconds",
            "From numbering a generation to a gateway replica acknowledging it (once per replica and number)",
            ["gateway"],
            buckets=_PUBLISH_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "trafficsplit_operator_errors",
            "Errors by reason: pass_failed (a reconcile pass raised; retried), generation_invalid (a numbered "
            "generation failed its own validation; not published), status_write (a TrafficSplit status not written; "
            "retried), replica_unreachable (a call to a gateway replica failed)",
            ["reason"],
            registry=r,
        )
        self.refusals = Counter(
            "trafficsplit_operator_refusals",
            "Generations a gateway replica refused whole (INVALID: its Envoy rejected them); offered again later",
            ["gateway"],
            registry=r,
        )
        for reason in ERROR_REASONS:
            self.errors.labels(reason)
        self.chart = FleetMetrics(self, gateway)  # the chart gateway's fleet (or `static`, `none`)
        self._state = OperatorState()
        r.register(_StateCollector(self))

    def for_fleet(self, gateway: str) -> FleetMetrics:
        """A provisioned Gateway's fleet's counters, under `gateway` (`gateway_label`)."""
        if gateway == self.gateway:
            raise ValueError(f"gateway label {gateway!r} is the chart gateway's")
        return FleetMetrics(self, gateway)

    @property
    def state(self) -> OperatorState:
        return self._state

    def set_state(self, state: OperatorState) -> None:
        """One reference swap: a scrape reads either the old state or the new one, never a mix."""
        self._state = state

    def error(self, reason: str) -> None:
        if reason not in ERROR_REASONS:
            raise ValueError(f"unknown error reason {reason!r}")
        self.errors.labels(reason).inc()


class _StateCollector(Collector):
    def __init__(self, metrics: OperatorMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily]:
        m = self._metrics
        s = m.state
        p = "trafficsplit_operator_"
        leader = GaugeMetricFamily(p + "leader", "1 while this operator leads (publishes and writes status)")
        leader.add_metric([], 1.0 if s.leader else 0.0)
        generation = GaugeMetricFamily(
            p + "generation", "The generation number the gateway's replicas should hold", labels=["gateway"]
        )
        serving = GaugeMetricFamily(
            p + "replicas_serving", "Gateway replicas that acknowledged the current generation", labels=["gateway"]
        )
        behind = GaugeMetricFamily(
            p + "replicas_behind",
            "Gateway replicas that have not acknowledged the current generation (unreachable, not ready, refusing)",
            labels=["gateway"],
        )
        refused = GaugeMetricFamily(
            p + "refused_splits",
            "Splits a gateway replica refused alone from the generation it holds, counted once per replica",
            labels=["gateway"],
        )
        held_back = GaugeMetricFamily(
            p + "held_back_splits",
            "Splits not published because the operator cannot build them and no replica reported their form",
            labels=["gateway"],
        )
        weight = GaugeMetricFamily(
            p + "backend_weight_share",
            "The backend's weight over its split's total in the generation published to the gateway (0..1)",
            labels=["gateway", "split", "backend"],
        )
        endpoints = GaugeMetricFamily(
            p + "backend_endpoints",
            "Ready endpoints of the backend in the generation published to the gateway",
            labels=["gateway", "split", "backend"],
        )
        if s.leader:  # a standby publishes nothing: only the leader speaks for the fleets
            for label, f in ((m.gateway, s), *s.gateways):
                g = [label]
                generation.add_metric(g, f.generation)
                serving.add_metric(g, f.serving)
                behind.add_metric(g, f.behind)
                refused.add_metric(g, f.refused_splits)
                held_back.add_metric(g, f.held_back)
                for b in f.backends:
                    weight.add_metric([label, b.split, b.backend], b.weight_share)
                    endpoints.add_metric([label, b.split, b.backend], b.endpoints)
        yield from (leader, generation, serving, behind, refused, held_back, weight, endpoints)
