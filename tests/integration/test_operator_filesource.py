"""Local mode: the operator fed from a directory of TrafficSplit YAML, publishing to a real dataplane unit.

No API server: edits to files reach Envoy's routing within the poll interval, an invalid edit is reported with the
field and skipped while the last good generation keeps serving, and numbers continue across operator restarts.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import time
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2

from tests.support.operator import PYTHONPATH, Gateway, OperatorProcess
from tests.support.waiting import poll

pytestmark = [pytest.mark.envoy, pytest.mark.slow]

TEMPLATE = """\
apiVersion: trafficsplit.dev/v1alpha1
kind: TrafficSplit
metadata: {{name: shop}}
spec:
  hosts: [shop.local]
  backends:
    - {{name: blue, weight: {blue}, endpoints: ["{blue_ep}"]}}
    - {{name: green, weight: {green}, endpoints: ["{green_ep}"]}}
"""


def write(path: Path, gw: Gateway, blue: int | str, green: int) -> None:
    b = gw.units[0].backends
    text = TEMPLATE.format(
        blue=blue, green=green, blue_ep=f"127.0.0.1:{b.ports['blue']}", green_ep=f"127.0.0.1:{b.ports['green']}"
    )
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # atomic: the poller never reads half a file


def backends_seen(gw: Gateway, n: int = 20) -> collections.Counter[str]:
    async def go() -> collections.Counter[str]:
        c: collections.Counter[str] = collections.Counter()
        for u in gw.units:
            conn = u.connection()
            try:
                for _ in range(n):
                    r = await conn.request("shop.local")
                    c[r.backend if r.status == 200 else f"HTTP {r.status}"] += 1
            finally:
                conn.close()
        return c

    return asyncio.run(go())


def start_local(tmp_path: Path, gw: Gateway, directory: Path) -> OperatorProcess:
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "PYTHONUNBUFFERED": "1"}
    args = [f"--file-source={directory}", f"--token-file={gw.token_file}", "--poll-interval=0.5", *gw.dataplane_args()]
    return OperatorProcess(args, env, tmp_path / f"local-{len(list(tmp_path.glob('local-*')))}.log").start()


def test_file_source_publishes_reloads_and_keeps_the_last_good(tmp_path: Path, gateway: Gateway) -> None:
    d = tmp_path / "splits"
    d.mkdir()
    f = d / "shop.yaml"
    write(f, gateway, 100, 0)
    op = start_local(tmp_path, gateway, d)
    try:
        poll(lambda: backends_seen(gateway, 5) == {"blue": 10}, 20, "blue everywhere")
        first = gateway.held()
        write(f, gateway, 0, 100)
        poll(lambda: backends_seen(gateway, 5) == {"green": 10}, 5, "green everywhere after the edit")
        second = gateway.held()
        assert min(second) > max(first)
        # Invalid edit: reported with the field, skipped; green keeps serving and nothing is published.
        write(f, gateway, -5, 100)
        poll(lambda: "spec.backends[0].weight" in op.log(), 5, "the field message in the log")
        assert backends_seen(gateway) == {"green": 40}
        assert gateway.held() == second
        # Restart: numbers continue above what the replicas hold.
        op.stop()
        write(f, gateway, 100, 0)
        op = start_local(tmp_path, gateway, d)
        poll(lambda: backends_seen(gateway, 5) == {"blue": 10}, 20, "blue again after the restart")
        assert min(gateway.held()) > max(second)
    finally:
        op.stop()
        print(op.log_tail(40))


def test_a_restarted_processor_whose_envoy_is_late_is_published_once_envoy_is_back(
    tmp_path: Path, gateway: Gateway
) -> None:
    """A publish that times out waiting for Envoy is "not ready yet", not "refused": the operator retries it (with
    backoff) instead of leaving the replica empty (seen: NOT_SERVING for good, held 0, until an unrelated edit)."""
    d = tmp_path / "splits"
    d.mkdir()
    write(d / "shop.yaml", gateway, 100, 0)
    op = start_local(tmp_path, gateway, d)
    try:
        poll(lambda: backends_seen(gateway, 5) == {"blue": 10}, 20, "blue everywhere")
        current = gateway.held()[1]
        envoy = gateway.units[0].envoy.proc
        assert envoy is not None
        gateway.kill_processor(0)
        # An ACK wait shorter than the operator's publish timeout, so the replica answers rather than the call
        # timing out (with both at 5 s, either can happen first).
        gateway.units[0].processor.extra.append("--ack-timeout=2")
        envoy.send_signal(signal.SIGSTOP)  # Envoy cannot reconnect its ADS stream for 7 s
        try:
            gateway.start_processor(0)
            time.sleep(7)
        finally:
            envoy.send_signal(signal.SIGCONT)
        resumed = time.monotonic()
        poll(lambda: gateway.held()[0] == current, 10, "the restarted replica holding the current generation")
        assert gateway.units[0].processor.health() == health_pb2.HealthCheckResponse.SERVING
        assert time.monotonic() - resumed < 10
        assert backends_seen(gateway, 5) == {"blue": 10}
    finally:
        op.stop()
        print(op.log_tail(40))


def test_a_restarted_processor_holds_the_generation_again_within_2s_every_time(
    tmp_path: Path, gateway: Gateway
) -> None:
    """After a processor restart its Envoy must reconnect ADS before a publish is taken; Envoy's default reconnect
    backoff (0.5 s base, up to 30 s, jittered) made that 4-15 s. The bootstrap's retry policy bounds it: held again
    within the 2 s docs/operator.md promises, on each of 10 restarts, while requests keep being served."""
    d = tmp_path / "splits"
    d.mkdir()
    write(d / "shop.yaml", gateway, 100, 0)
    op = start_local(tmp_path, gateway, d)
    took: list[float] = []
    try:
        poll(lambda: backends_seen(gateway, 5) == {"blue": 10}, 20, "blue everywhere")
        current = gateway.held()[0]
        for _ in range(10):
            gateway.kill_processor(0)
            gateway.start_processor(0)  # returns once it listens, holding nothing
            t0 = time.monotonic()
            poll(lambda: gateway.held()[0] == current, 30, "the restarted replica holding the generation", 0.02)
            took.append(time.monotonic() - t0)
        assert backends_seen(gateway, 5) == {"blue": 10}
    finally:
        op.stop()
        print(op.log_tail(10))
    took.sort()
    print(
        f"held again after a restart, 10 runs: min {took[0]:.2f} s, median {took[5]:.2f} s, max {took[-1]:.2f} s; "
        f"all: {', '.join(f'{t:.2f}' for t in took)}"
    )
    assert took[-1] < 2.0, took
