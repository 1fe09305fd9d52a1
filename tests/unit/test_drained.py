"""The Drained signal (sticky.mode persistent): live sessions per backend in bounded memory, summed over replicas,
and the `Drained` condition and Event once a weight-0 backend has none."""

from __future__ import annotations

from typing import Any

from trafficsplit.cli.kube import Ref
from trafficsplit.cli.status import render_status, status_view
from trafficsplit.core.control.reconcile import desired_state
from trafficsplit.core.control.resolve import SplitObject
from trafficsplit.core.control.status import PublishView, ReplicaAck, compute_status
from trafficsplit.core.decide.sessions import BackendSessions, LiveSessions, sum_replicas
from trafficsplit.core.model.vocabulary import ConditionType, EventReason, Reason

S = "shop/web"


def test_sessions_are_live_within_the_idle_window_and_counted_once_each() -> None:
    live = LiveSessions(idle_seconds=10, max_tracked=100)
    for h in range(5):
        live.record(S, "blue", h, now=0)
    live.record(S, "green", 1, now=5)  # session 1 moved to green: counted there only
    assert [(c.backend, c.live) for c in live.counts({S: ("blue", "green")}, now=6)] == [("blue", 4), ("green", 1)]
    assert [c.live for c in live.counts({S: ("blue", "green")}, now=11)] == [0, 1]  # blue's went idle
    assert [c.live for c in live.counts({S: ("blue", "green")}, now=16)] == [0, 0]


def test_memory_is_bounded_and_a_full_tracker_never_reads_as_drained() -> None:
    live = LiveSessions(idle_seconds=10, max_tracked=3)
    for h in range(10):
        live.record(S, "blue", h, now=0)
    (c,) = live.counts({S: ("blue",)}, now=1)
    assert (c.live, c.saturated) == (3, True)
    (c,) = live.counts({S: ("blue",)}, now=20)  # all idle: room again
    assert (c.live, c.saturated) == (0, False)
    live.retain(set())
    assert live.counts({S: ("blue",)}, now=20) == [BackendSessions(S, "blue", 0, False)]


def test_replicas_are_summed() -> None:
    a = [BackendSessions(S, "blue", 2, False), BackendSessions(S, "green", 0, False)]
    b = [BackendSessions(S, "blue", 1, True), BackendSessions(S, "green", 4, False)]
    total = sum_replicas([a, b])
    assert total[S]["blue"] == BackendSessions(S, "blue", 3, True) and total[S]["green"].live == 4


def obj(weights: tuple[int, int], status: dict[str, Any]) -> SplitObject:
    spec = {
        "hosts": ["shop.example"],
        "sticky": {"cookie": {"name": "sid"}, "mode": "persistent"},
        "backends": [
            {"name": "blue", "weight": weights[0], "endpoints": ["10.0.0.1:80"]},
            {"name": "green", "weight": weights[1], "endpoints": ["10.0.0.2:80"]},
        ],
    }
    return SplitObject(
        namespace="shop", name="web", uid="uid", generation=2, created="2026-01-01T00:00:00Z", spec=spec, status=status
    )


def step(o: SplitObject, blue_live: int | None) -> tuple[dict[str, Any], list[Any]]:
    outcome = desired_state([o], {}, {}, {}, static=True).outcomes[o.key]
    sessions = (
        {}
        if blue_live is None
        else {S: {"blue": BackendSessions(S, "blue", blue_live, False), "green": BackendSessions(S, "green", 9, False)}}
    )
    view = PublishView(4, (ReplicaAck("gw-0", 4), ReplicaAck("gw-1", 4)), sessions=sessions)
    r = compute_status(o, outcome, view, "2026-12-01T00:00:00Z")
    return r.status.to_dict(), list(r.events)


def maybe_drained(status: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in status["conditions"] if c["type"] == ConditionType.DRAINED), None)


def drained(status: dict[str, Any]) -> dict[str, Any]:
    c = maybe_drained(status)
    assert c is not None, status["conditions"]
    return c


def test_drained_appears_once_the_weight_0_backend_has_no_live_session() -> None:
    status, _ = step(obj((100, 0), {}), 3)
    assert drained(status)["status"] == "False"  # green at weight 0 still has 9 live sessions
    status, _ = step(obj((0, 100), {}), None)
    assert drained(status)["reason"] == Reason.SESSIONS_UNKNOWN
    status, events = step(obj((0, 100), status), 3)
    c = drained(status)
    assert (c["status"], c["reason"], c["message"]) == ("False", Reason.SESSIONS_LIVE, "blue: 3 live sessions")
    assert not [e for e in events if e.reason is EventReason.DRAINED]
    assert [b["liveSessions"] for b in status["backends"]] == [3, 9]
    status, events = step(obj((0, 100), status), 0)
    c = drained(status)
    assert (c["status"], c["reason"]) == ("True", Reason.DRAINED)
    assert [e.reason for e in events if e.reason is EventReason.DRAINED] == [EventReason.DRAINED]
    _, events = step(obj((0, 100), status), 0)
    assert not [e for e in events if e.reason is EventReason.DRAINED]  # once, on the transition
    # kubectl trafficsplit status shows the condition and the counts.
    resource = {"metadata": {"namespace": "shop", "name": "web", "generation": 2}, "spec": obj((0, 100), {}).spec}
    text = render_status(status_view(Ref("shop", "web"), {**resource, "status": status}))
    assert "Drained" in text and "LIVE SESSIONS" in text


def test_no_drained_condition_without_persistent_mode_or_a_weight_0_backend() -> None:
    status, _ = step(obj((50, 50), {}), 0)
    assert maybe_drained(status) is None
