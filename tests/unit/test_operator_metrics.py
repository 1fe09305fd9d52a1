"""The operator's metrics, read from its registry while the engine publishes to in-process fake replicas: the
generation and who serves it, Publish results and lag, refusals, errors by reason, each backend's weight and
endpoints; a standby exports no fleet state."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client import generate_latest

from tests.unit.test_operator_engine import FakeReplica, body, make_engine, run, until
from trafficsplit.core.control.resolve import SplitObject
from trafficsplit.core.control.status import ReplicaAck, StatusResult
from trafficsplit.operator.config import parse_config
from trafficsplit.operator.engine import Engine
from trafficsplit.operator.metrics import OperatorMetrics, OperatorState


def value(engine: Engine, name: str, **labels: str) -> float:
    v = engine.metrics.registry.get_sample_value(name, labels)
    assert v is not None, f"{name}{labels} not exported:\n{generate_latest(engine.metrics.registry).decode()}"
    return v


def sample(engine: Engine, name: str, **labels: str) -> float:
    """0 while not exported yet (for polling)."""
    return engine.metrics.registry.get_sample_value(name, labels) or 0.0


async def lead(engine: Engine) -> asyncio.Task[None]:
    await engine.become_leader()
    engine.mark_ready()
    return asyncio.create_task(engine.run())


def test_the_generation_its_replicas_publish_results_lag_and_backends(tmp_path: Any) -> None:
    async def main() -> None:
        a, b = await FakeReplica("a").start(), await FakeReplica("b").start()
        engine = make_engine(tmp_path, [a, b])
        engine.store.apply("trafficsplit", None, body("s", (80, 20)))
        task = await lead(engine)
        await until(lambda: a.held == 1 and b.held == 1)
        await until(lambda: engine.metrics.state.serving == 2)
        gw = engine.metrics.gateway
        assert value(engine, "trafficsplit_operator_leader") == 1
        assert value(engine, "trafficsplit_operator_generation", gateway=gw) == 1
        assert value(engine, "trafficsplit_operator_replicas_serving", gateway=gw) == 2
        assert value(engine, "trafficsplit_operator_replicas_behind", gateway=gw) == 0
        assert value(engine, "trafficsplit_operator_publish_seconds_count", gateway=gw, result="accepted") == 2
        assert value(engine, "trafficsplit_operator_publish_lag_seconds_count", gateway=gw) == 2
        assert value(engine, "trafficsplit_operator_reconcile_seconds_count") >= 1
        share = "trafficsplit_operator_backend_weight_share"
        assert value(engine, share, gateway=gw, split="default/s", backend="blue") == pytest.approx(0.8)
        assert value(engine, share, gateway=gw, split="default/s", backend="green") == pytest.approx(0.2)
        assert (
            value(engine, "trafficsplit_operator_backend_endpoints", gateway=gw, split="default/s", backend="blue") == 1
        )
        # Every result and reason is a series from the start (a rate over them is 0, not absent).
        assert value(engine, "trafficsplit_operator_publish_seconds_count", gateway=gw, result="not_ready") == 0
        assert value(engine, "trafficsplit_operator_errors_total", reason="pass_failed") == 0

        # A replica that answers NOT_READY twice, then takes it: counted per answer; lag measured once it holds it.
        b.not_ready = 2
        engine.apply("trafficsplit", "MODIFIED", body("s", (0, 100), generation=2))
        await until(lambda: a.held == 2 and b.held == 2, timeout=10)
        await until(lambda: engine.metrics.state.serving == 2)
        assert value(engine, "trafficsplit_operator_publish_seconds_count", gateway=gw, result="not_ready") == 2
        assert value(engine, "trafficsplit_operator_publish_lag_seconds_count", gateway=gw) == 4
        # b's lag includes its NOT_READY pause (0.25 s jittered down to half at least).
        assert value(engine, "trafficsplit_operator_publish_lag_seconds_sum", gateway=gw) >= 0.125
        assert value(engine, share, gateway=gw, split="default/s", backend="blue") == 0
        task.cancel()
        await engine.fleet.close()
        await a.stop()
        await b.stop()

    run(main)


def test_a_refusing_replica_and_an_unreachable_one_are_behind_and_counted(tmp_path: Any) -> None:
    async def main() -> None:
        a, b, c = await FakeReplica("a").start(), await FakeReplica("b").start(), await FakeReplica("c").start()
        engine = make_engine(tmp_path, [a, b, c])
        engine.store.apply("trafficsplit", None, body("s", (100, 0)))
        task = await lead(engine)
        await until(lambda: a.held == b.held == c.held == 1)
        gw = engine.metrics.gateway
        b.refuse = True
        await c.stop()
        engine.apply("trafficsplit", "MODIFIED", body("s", (0, 100), generation=2))
        await until(lambda: a.held == 2)
        await until(lambda: engine.metrics.state.behind == 2 and engine.metrics.state.serving == 1)
        assert value(engine, "trafficsplit_operator_replicas_behind", gateway=gw) == 2
        await until(lambda: sample(engine, "trafficsplit_operator_refusals_total", gateway=gw) >= 1)
        assert value(engine, "trafficsplit_operator_publish_seconds_count", gateway=gw, result="invalid") >= 1
        await until(lambda: sample(engine, "trafficsplit_operator_errors_total", reason="replica_unreachable") >= 1)
        task.cancel()
        await engine.fleet.close()
        await a.stop()
        await b.stop()

    run(main)


def test_a_status_write_that_fails_is_counted(tmp_path: Any) -> None:
    async def failing(obj: SplitObject, result: StatusResult) -> None:
        raise RuntimeError("the API server said no")

    async def main() -> None:
        a = await FakeReplica("a").start()
        engine = make_engine(tmp_path, [a], failing)
        engine.store.apply("trafficsplit", None, body("s", (100, 0)))
        task = await lead(engine)
        await until(lambda: a.held == 1)
        await until(lambda: sample(engine, "trafficsplit_operator_errors_total", reason="status_write") >= 1)
        task.cancel()
        await engine.fleet.close()
        await a.stop()

    run(main)


def test_a_standby_exports_no_fleet_state(tmp_path: Any) -> None:
    async def main() -> None:
        a = await FakeReplica("a").start()
        engine = make_engine(tmp_path, [a])
        engine.store.apply("trafficsplit", None, body("s", (100, 0)))
        engine.mark_ready()
        task = asyncio.create_task(engine.run())  # never leads
        await until(lambda: engine.passes >= 1)
        reg = engine.metrics.registry
        assert reg.get_sample_value("trafficsplit_operator_leader") == 0
        assert reg.get_sample_value("trafficsplit_operator_generation", {"gateway": ""}) is None
        assert (
            reg.get_sample_value(
                "trafficsplit_operator_backend_weight_share", {"gateway": "", "split": "default/s", "backend": "blue"}
            )
            is None
        )
        assert value(engine, "trafficsplit_operator_reconcile_seconds_count") >= 1
        task.cancel()
        await engine.fleet.close()
        await a.stop()

    run(main)


def test_state_counts_replicas_serving_the_current_number() -> None:
    s = OperatorState(leader=True, generation=5, acks=(ReplicaAck("a", 5), ReplicaAck("b", 6), ReplicaAck("c", 4)))
    assert (s.serving, s.behind) == (2, 1)
    # Nothing published yet: nobody serves it, everyone is behind.
    assert OperatorState(acks=(ReplicaAck("a", 0),)).behind == 1


def test_an_unknown_error_reason_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown error reason"):
        OperatorMetrics("gw").error("whatever")


def test_two_operators_in_one_process_have_their_own_registries() -> None:
    one, two = OperatorMetrics("a"), OperatorMetrics("b")
    one.error("pass_failed")
    assert one.registry.get_sample_value("trafficsplit_operator_errors_total", {"reason": "pass_failed"}) == 1
    assert two.registry.get_sample_value("trafficsplit_operator_errors_total", {"reason": "pass_failed"}) == 0


def test_the_metrics_address_comes_from_the_flag_or_the_environment() -> None:
    base = ["--dataplane=127.0.0.1:1"]
    assert parse_config(base, {}).metrics is None
    assert parse_config([*base, "--metrics=0.0.0.0:9102"], {}).metrics == ("0.0.0.0", 9102)
    assert parse_config([*base, "--metrics=:9102"], {}).metrics == ("0.0.0.0", 9102)
    assert parse_config(base, {"TRAFFICSPLIT_METRICS": "127.0.0.1:0"}).metrics == ("127.0.0.1", 0)
    for bad in ("9102", "host:port", "127.0.0.1:70000"):
        with pytest.raises(SystemExit, match="HOST:PORT"):
            parse_config([*base, f"--metrics={bad}"], {})
