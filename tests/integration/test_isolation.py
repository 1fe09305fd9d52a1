"""Tenant isolation in publishing: one split a replica cannot serve never stops the others.

Two real gateway units (extproc + Envoy) and the operator in local mode (a directory of TrafficSplit YAML; its status
is its log). gw-0 has cookie keys, gw-1 has none, as with the chart's default `cookieKeysSecret: ""`:
- a `sticky.mode: persistent` split is reported (named, with the reason) and every other split keeps being published
  to both units, with no failed request;
- a unit fixed and restarted at the same address gets the current generation within the retry bound;
- a publish numbered 2^53 - 1 (a holder of the token) is refused and publishing continues.
"""

from __future__ import annotations

import asyncio
import collections
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.dataplane import Load, NameBackends, split_doc
from tests.support.operator import PYTHONPATH, Gateway, OperatorProcess, start_gateway
from tests.support.waiting import poll
from trafficsplit.v1alpha1 import publish_pb2 as pb

pytestmark = [pytest.mark.envoy, pytest.mark.slow]

# A fixed replica serves the current generation within this many seconds of its Envoy being connected again: the
# operator's NOT_READY backoff is capped at 5 s, then one publish (a margin for a loaded 2-core machine).
RETRY_BOUND = 6.0
MAX_GENERATION = 2**53 - 1

SHOP = """\
apiVersion: trafficsplit.dev/v1alpha1
kind: TrafficSplit
metadata: {{name: shop}}
spec:
  hosts: [shop.local]
  backends:
    - {{name: blue, weight: {blue}, endpoints: ["{blue_ep}"]}}
    - {{name: green, weight: {green}, endpoints: ["{green_ep}"]}}
"""
CART = """\
apiVersion: trafficsplit.dev/v1alpha1
kind: TrafficSplit
metadata: {{name: cart}}
spec:
  hosts: [cart.local]
  sticky: {{mode: persistent, cookie: {{name: ts}}}}
  backends:
    - {{name: stable, weight: 100, endpoints: ["{stable}"]}}
"""


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # atomic: the poller never reads half a file


def write_shop(d: Path, gw: Gateway, blue: int, green: int) -> None:
    ports = gw.units[0].backends.ports
    text = SHOP.format(
        blue=blue, green=green, blue_ep=f"127.0.0.1:{ports['blue']}", green_ep=f"127.0.0.1:{ports['green']}"
    )
    _write(d / "shop.yaml", text)


def write_cart(d: Path, gw: Gateway) -> None:
    port = gw.units[0].backends.ports["stable"]
    _write(d / "cart.yaml", CART.format(stable=f"127.0.0.1:{port}"))


def seen(gw: Gateway, unit: int, host: str, n: int = 10) -> collections.Counter[str]:
    async def go() -> collections.Counter[str]:
        c: collections.Counter[str] = collections.Counter()
        conn = gw.units[unit].connection()
        try:
            for _ in range(n):
                r = await conn.request(host)
                c[r.backend if r.status == 200 else f"HTTP {r.status}"] += 1
        finally:
            conn.close()
        return c

    return asyncio.run(go())


def sealed_cookie(gw: Gateway, unit: int) -> bool:
    r = gw.units[unit].get("cart.local")
    c = r.cookie("ts")
    return r.status == 200 and c is not None and c.count(".") == 2


def start_local(tmp_path: Path, gw: Gateway, directory: Path) -> OperatorProcess:
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "PYTHONUNBUFFERED": "1"}
    args = [f"--file-source={directory}", f"--token-file={gw.token_file}", "--poll-interval=0.25", *gw.dataplane_args()]
    return OperatorProcess(args, env, tmp_path / f"local-{len(list(tmp_path.glob('local-*')))}.log").start()


@pytest.fixture
def mixed(name_backends: NameBackends) -> Iterator[tuple[Gateway, Path]]:
    """gw-0 with cookie keys, gw-1 without (the chart's default)."""
    with tempfile.TemporaryDirectory(prefix="ts-isolation-") as d:
        keys = Path(d) / "cookie-keys"
        keys.write_text("k" * 32 + "\n")
        gw = start_gateway(Path(d), name_backends, unit_extra=[[f"--cookie-key-file={keys}"], []])
        try:
            yield gw, keys
        finally:
            gw.stop()


def test_a_persistent_split_one_replica_cannot_serve_stops_no_other_split(
    tmp_path: Path, mixed: tuple[Gateway, Path]
) -> None:
    gw, _ = mixed
    d = tmp_path / "splits"
    d.mkdir()
    write_shop(d, gw, 100, 0)
    write_cart(d, gw)
    op = start_local(tmp_path, gw, d)
    try:
        t0 = time.monotonic()
        poll(lambda: all(seen(gw, u, "shop.local", 5) == {"blue": 5} for u in (0, 1)), 20, "shop on both units")
        first = time.monotonic() - t0
        # The persistent split is named with the reason, in its status (local mode: the log).
        reason = r"default/cart .*not published: (Unservable|Refused): .*gw-1.*no cookie keys"
        poll(lambda: re.search(reason, op.log()), 10, "the persistent split's reason in its status")
        with (
            Load(gw.units[0].port, "shop.local", concurrency=4) as l0,
            Load(gw.units[1].port, "shop.local", concurrency=4) as l1,
        ):
            l0.wait_for(50)
            l1.wait_for(50)
            t1 = time.monotonic()
            write_shop(d, gw, 0, 100)
            poll(lambda: all(seen(gw, u, "shop.local", 5) == {"green": 5} for u in (0, 1)), 10, "green on both")
            flipped = time.monotonic() - t1
            l0.wait_for(50)
            l1.wait_for(50)
        results = l0.results + l1.results
        failed = len(l0.errors) + len(l1.errors) + sum(1 for _, status, _, _ in results if status != 200)
        print(
            f"isolation: shop on both units {first:.2f}s after start; weight change served by both in "
            f"{flipped:.2f}s; {len(results)} requests during it, {failed} failed"
        )
        assert failed == 0
        assert min(gw.held()) > 0
    finally:
        op.stop()
        print(op.log_tail(30))


def test_a_replica_that_refused_is_offered_the_current_generation_once_fixed_and_restarted(
    tmp_path: Path, mixed: tuple[Gateway, Path]
) -> None:
    gw, keys = mixed
    d = tmp_path / "splits"
    d.mkdir()
    write_shop(d, gw, 100, 0)
    write_cart(d, gw)
    op = start_local(tmp_path, gw, d)
    try:
        poll(lambda: gw.held()[0] > 0, 20, "gw-0 holding a generation")
        poll(lambda: re.search(r"gw-1.*no cookie keys", op.log()), 10, "gw-1's missing keys reported")
        # Fixed: keys given, restarted at the same publish address (a pod restarted with its Secret mounted).
        gw.kill_processor(1)
        gw.units[1].processor.extra.append(f"--cookie-key-file={keys}")
        gw.start_processor(1)
        t0 = time.monotonic()
        # Envoy's own ADS reconnect backoff (0.5 s doubling, jittered) is Envoy's: measured apart, then the bound is
        # the operator's (a reconnect forgets the refusal; NOT_READY retries are capped at 5 s).
        envoy = gw.units[1].envoy
        poll(lambda: envoy.stat("control_plane.connected_state") == 1, 60, "gw-1's Envoy reconnected", 0.01)
        t1 = time.monotonic()
        poll(
            lambda: gw.held()[1] == gw.held()[0] > 0 and sealed_cookie(gw, 1) and sealed_cookie(gw, 0),
            RETRY_BOUND * 3,
            "the fixed replica serving the current generation, the persistent split included",
        )
        took = time.monotonic() - t1
        print(
            f"refuse -> fix -> restart: gw-1's Envoy reconnected {t1 - t0:.2f}s after the restart; the current "
            f"generation {gw.held()} (the persistent split included) served {took:.2f}s after that"
        )
        assert took < RETRY_BOUND, took
        assert seen(gw, 1, "shop.local", 5) == {"blue": 5}
    finally:
        op.stop()
        print(op.log_tail(30))


def test_a_publish_at_the_generation_ceiling_is_refused_and_publishing_continues(
    tmp_path: Path, mixed: tuple[Gateway, Path]
) -> None:
    gw, _ = mixed
    d = tmp_path / "splits"
    d.mkdir()
    write_shop(d, gw, 100, 0)
    op = start_local(tmp_path, gw, d)
    try:
        poll(lambda: all(seen(gw, u, "shop.local", 5) == {"blue": 5} for u in (0, 1)), 20, "shop on both units")
        before = gw.held()
        # A holder of the publish token numbers a generation at the ceiling.
        _, msg = gw.units[0].generation([split_doc("evil.local", {"blue": 1})], number=MAX_GENERATION)
        reply = gw.units[0].processor.publish(msg, token=gw.token)
        print(f"publish at 2^53-1: {pb.PublishReply.Result.Name(reply.result)} {reply.message!r}; held {gw.held()}")
        assert reply.result != pb.PublishReply.ACCEPTED
        assert gw.held() == before
        t0 = time.monotonic()
        write_shop(d, gw, 0, 100)
        poll(lambda: all(seen(gw, u, "shop.local", 5) == {"green": 5} for u in (0, 1)), 10, "green on both")
        took = time.monotonic() - t0
        after = gw.held()
        print(f"the next edit served by both in {took:.2f}s; held {before} -> {after}")
        assert after[0] == after[1] == max(before) + 1
        assert "not published" not in op.log()
    finally:
        op.stop()
        print(op.log_tail(30))
