"""Tenant isolation through the real operator and API server: a `sticky.mode: persistent` split that one of two
gateway units cannot serve (no cookie keys, the chart's default) says so in its own status and Events, and another
split's weight change reaches both units with no failed request (tests/integration/test_isolation.py does the same
in local mode, with its status in the log)."""

from __future__ import annotations

import asyncio
import collections
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane
from tests.support.dataplane import Load, NameBackends
from tests.support.netns import Pod, TestPods
from tests.support.operator import (
    Gateway,
    Operators,
    apply,
    condition,
    events,
    get_ts,
    operator_kubeconfig,
    service_with_slice,
    start_gateway,
    ts_manifest,
    wait_condition,
)
from tests.support.waiting import poll

pytestmark = [pytest.mark.k8s, pytest.mark.envoy, pytest.mark.netns, pytest.mark.slow]


@pytest.fixture
def mixed_gateway(name_backends: NameBackends) -> Iterator[Gateway]:
    with tempfile.TemporaryDirectory(prefix="ts-isolation-op-") as d:
        keys = Path(d) / "cookie-keys"
        keys.write_text("k" * 32 + "\n")
        gw = start_gateway(Path(d), name_backends, unit_extra=[[f"--cookie-key-file={keys}"], []])
        try:
            yield gw
        finally:
            gw.stop()


def _spec(host: str, weights: dict[str, int], **extra: Any) -> dict[str, Any]:
    return {
        "hosts": [host],
        "backends": [{"name": n, "service": f"shop-{n}", "port": 80, "weight": w} for n, w in weights.items()],
        "debugHeaders": True,
        **extra,
    }


def _seen(gw: Gateway, unit: int, host: str, n: int = 10) -> collections.Counter[str]:
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


def test_a_split_one_replica_cannot_serve_is_named_in_its_own_status_and_the_others_are_published(
    trafficsplit_crd: ControlPlane,
    namespace: str,
    mixed_gateway: Gateway,
    operators: Operators,
    testpods: TestPods,
) -> None:
    kube, ns, gw = trafficsplit_crd, namespace, mixed_gateway
    pods: dict[str, Pod] = {n: testpods.start(n) for n in ("blue", "green")}
    for n, p in pods.items():
        service_with_slice(kube, ns, f"shop-{n}", [p.ip], target_port=p.port)
    release = ns.split("-")[0] + ns.split("-")[1]
    kubeconfig = operator_kubeconfig(kube, ns, release)
    operators.start(
        kubeconfig,
        args=[f"--namespaces={ns}", f"--token-file={gw.token_file}", *gw.dataplane_args()],
        lease_namespace=ns,
    )
    apply(kube, ts_manifest(ns, "shop", _spec("shop.example", {"blue": 100, "green": 0})))
    persistent = {"sticky": {"mode": "persistent", "cookie": {"name": "ts"}}}
    apply(kube, ts_manifest(ns, "cart", _spec("cart.example", {"blue": 100}, **persistent)))
    wait_condition(kube, ns, "shop", "Published", "True", "^2/2 dataplanes$", timeout=60)
    cart = wait_condition(kube, ns, "cart", "Published", "False", "gw-1: no cookie keys", timeout=30)
    reason = (condition(cart, "Published") or {}).get("reason")
    message = (condition(cart, "Published") or {}).get("message")
    assert reason == "Unservable", cart["status"]
    poll(
        lambda: any(e["reason"] == "Unservable" and e["type"] == "Warning" for e in events(kube, ns, "cart")),
        15,
        "the Unservable Warning Event on cart",
    )
    assert not any(e["reason"] in ("Unservable", "Refused") for e in events(kube, ns, "shop"))
    # The other split's weight change, under load on both units.
    with (
        Load(gw.units[0].port, "shop.example", concurrency=2) as l0,
        Load(gw.units[1].port, "shop.example", concurrency=2) as l1,
    ):
        l0.wait_for(50)
        l1.wait_for(50)
        obj = get_ts(kube, ns, "shop")
        obj["spec"]["backends"][0]["weight"], obj["spec"]["backends"][1]["weight"] = 0, 100
        t0 = time.monotonic()
        apply(kube, ts_manifest(ns, "shop", obj["spec"]))
        t1 = time.monotonic()  # kubectl (a process start on a loaded machine) is not the operator's time
        poll(lambda: all(_seen(gw, u, "shop.example", 5) == {"green": 5} for u in (0, 1)), 30, "green on both")
        flipped = time.monotonic() - t1
        generation = int(get_ts(kube, ns, "shop")["metadata"]["generation"])
        wait_condition(kube, ns, "shop", "Published", "True", "^2/2 dataplanes$", timeout=20, generation=generation)
        l0.wait_for(50)
        l1.wait_for(50)
    results = l0.results + l1.results
    failed = len(l0.errors) + len(l1.errors) + sum(1 for _, status, _, _ in results if status != 200)
    print(
        f"isolation through the API server: cart Published=False/{reason}: {message!r}; shop's weight change served "
        f"by both units {flipped:.2f}s after kubectl apply returned ({t1 - t0:.2f}s), {len(results)} requests during "
        f"it, {failed} failed"
    )
    assert failed == 0
