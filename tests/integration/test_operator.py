"""The operator end to end: real kube-apiserver + etcd, the operator process under the chart's ServiceAccount, two
real dataplane units (extproc + Envoy), backends in network namespaces reached through EndpointSlices."""

from __future__ import annotations

import asyncio
import collections
import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from scipy.stats import chisquare

from tests.support.controlplane import ControlPlane
from tests.support.netns import Pod, TestPods
from tests.support.operator import (
    Gateway,
    OperatorProcess,
    Operators,
    apply,
    condition,
    events,
    get_ts,
    operator_kubeconfig,
    service_with_slice,
    ts_manifest,
    wait_condition,
)
from tests.support.waiting import poll

pytestmark = [pytest.mark.k8s, pytest.mark.envoy, pytest.mark.netns, pytest.mark.slow]

HOST = "shop.example"


@dataclass
class Env:
    kube: ControlPlane
    ns: str
    gateway: Gateway
    operators: Operators
    kubeconfig: Any
    pods: dict[str, Pod]
    release: str

    def start_operator(self, identity: str = "op-0", kubeconfig: Any = None) -> OperatorProcess:
        return self.operators.start(
            kubeconfig or self.kubeconfig,
            args=[
                f"--namespaces={self.ns}",
                f"--token-file={self.gateway.token_file}",
                "--metrics=127.0.0.1:0",
                *self.gateway.dataplane_args(),
            ],
            identity=identity,
            lease_namespace=self.ns,
        )

    def apply_split(self, name: str, spec: dict[str, Any]) -> None:
        apply(self.kube, ts_manifest(self.ns, name, spec))

    def patch_weights(self, name: str, weights: list[int]) -> int:
        obj = get_ts(self.kube, self.ns, name)
        backends = obj["spec"]["backends"]
        for b, w in zip(backends, weights, strict=True):
            b["weight"] = w
        import json

        out = self.kube.kubectl(
            "patch",
            "ts",
            name,
            "-n",
            self.ns,
            "--type=merge",
            "-p",
            json.dumps({"spec": {"backends": backends}}),
            "-o",
            "jsonpath={.metadata.generation}",
        )
        return int(out.stdout)


@pytest.fixture
def env(
    trafficsplit_crd: ControlPlane, namespace: str, gateway: Gateway, operators: Operators, testpods: TestPods
) -> Iterator[Env]:
    kube = trafficsplit_crd
    pods = {n: testpods.start(n) for n in ("blue", "green")}
    for n, p in pods.items():
        service_with_slice(kube, namespace, f"shop-{n}", [p.ip], target_port=p.port)
    release = namespace.split("-")[0] + namespace.split("-")[1]  # unique per test: the ClusterRole is cluster-wide
    kubeconfig = operator_kubeconfig(kube, namespace, release)
    yield Env(kube, namespace, gateway, operators, kubeconfig, pods, release)


def spec(weights: tuple[int, int], sticky: bool = False) -> dict[str, Any]:
    s: dict[str, Any] = {
        "hosts": [HOST],
        "backends": [
            {"name": "blue", "service": "shop-blue", "port": 80, "weight": weights[0]},
            {"name": "green", "service": "shop-green", "port": 80, "weight": weights[1]},
        ],
        "debugHeaders": True,
    }
    if sticky:
        s["sticky"] = {"cookie": {"name": "ts-shop"}}
    return s


def sample(env: Env, unit: int, n: int, host: str = HOST) -> collections.Counter[str]:
    async def go() -> collections.Counter[str]:
        conn = env.gateway.units[unit].connection()
        c: collections.Counter[str] = collections.Counter()
        try:
            for _ in range(n):
                r = await conn.request(host)
                c[r.backend if r.status == 200 else f"HTTP {r.status}"] += 1
        finally:
            conn.close()
        return c

    return asyncio.run(go())


def test_apply_publishes_to_both_dataplanes_and_traffic_follows_the_weights(env: Env) -> None:
    op = env.start_operator()
    env.apply_split("shop", spec((70, 30)))
    obj = wait_condition(env.kube, env.ns, "shop", "Published", "True", r"^2/2 dataplanes$", timeout=60)
    st = obj["status"]
    assert st["weights"] == "blue=70,green=30" and st["observedGeneration"] == 1
    assert [(condition(obj, t) or {}).get("status") for t in ("Accepted", "ResolvedRefs")] == ["True", "True"]
    assert st["generation"] >= 1 and env.gateway.held() == [st["generation"]] * 2
    # The same number is Envoy's xDS version: status.generation can be followed into each unit's config dump.
    assert [u.envoy.xds_versions()["rds"] for u in env.gateway.units] == [str(st["generation"])] * 2
    assert [b["readyEndpoints"] for b in st["backends"]] == [1, 1]
    for unit in (0, 1):
        counts = sample(env, unit, 400)
        assert set(counts) == {"blue", "green"}, counts
        # Non-sticky: key = request id; the realised split must be consistent with 70/30 (chi-square, not a band).
        p = chisquare([counts["blue"], counts["green"]], [0.7 * 400, 0.3 * 400]).pvalue
        assert p > 0.001, (counts, p)
    assert any(e["reason"] == "Published" for e in events(env.kube, env.ns, "shop"))
    printed = env.kube.kubectl("get", "ts", "-n", env.ns).stdout
    assert "blue=70,green=30" in printed and "True" in printed
    assert op.running(), op.log_tail()
    assert "forbidden" not in op.log().lower(), op.log_tail()  # the chart's role covers everything it does


def test_blue_green_flip_next_request_after_published_goes_to_the_new_side(env: Env) -> None:
    env.start_operator()
    env.apply_split("shop", spec((100, 0)))
    wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=60)
    assert sample(env, 0, 20) == {"blue": 20}
    for weights, side in (((0, 100), "green"), ((100, 0), "blue"), ((0, 100), "green")):
        gen = env.patch_weights("shop", list(weights))
        obj = wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=30, generation=gen)
        number = obj["status"]["generation"]
        for unit in (0, 1):
            r = asyncio.run(env.gateway.units[unit].connection().request(HOST))
            assert r.status == 200 and r.backend == side, (weights, unit, r.backend)
            # The decision discloses the generation the status names (debugHeaders: true).
            assert f"generation={number};" in (r.header("x-trafficsplit-decision") or ""), r.headers


def test_sticky_total_change_warns_with_the_repin_share(env: Env) -> None:
    env.start_operator()
    env.apply_split("shop", spec((95, 5), sticky=True))
    wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=60)
    gen = env.patch_weights("shop", [95, 10])
    obj = wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=30, generation=gen)
    d = obj["status"]["displacement"]
    assert d == {
        "from": "blue=95,green=5",
        "to": "blue=95,green=10",
        "totalChanged": True,
        "repinnedShare": "13.57%",
        "rebalanced": "blue=90,green=10",
        "rebalancedRepinnedShare": "5.00%",
    }

    def warning() -> dict[str, Any] | None:
        return next((e for e in events(env.kube, env.ns, "shop") if e["reason"] == "TotalWeightChanged"), None)

    ev = poll(warning, 15, "the TotalWeightChanged event")
    assert ev["type"] == "Warning" and "13.57%" in ev["message"] and "blue=90,green=10" in ev["message"]
    # A change that keeps the total does not warn again.
    gen = env.patch_weights("shop", [90, 15])
    wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=30, generation=gen)
    assert sum(e["reason"] == "TotalWeightChanged" for e in events(env.kube, env.ns, "shop")) == 1


def test_deleted_backend_service_is_named_and_the_last_good_generation_keeps_serving(env: Env) -> None:
    env.start_operator()
    env.apply_split("shop", spec((50, 50)))
    obj = wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=60)
    held = env.gateway.held()
    env.kube.kubectl("delete", "service", "shop-green", "-n", env.ns)
    obj = wait_condition(env.kube, env.ns, "shop", "ResolvedRefs", "False", "shop-green", timeout=30)
    c = condition(obj, "ResolvedRefs")
    assert (
        c is not None and c["reason"] == "BackendNotFound" and f"Service {env.ns}/shop-green not found" in c["message"]
    )
    assert poll(lambda: any(e["reason"] == "BackendNotFound" for e in events(env.kube, env.ns, "shop")), 15, "event")
    counts = sample(env, 0, 100)
    assert set(counts) == {"blue", "green"}, counts  # the last good generation, both sides, no errors
    assert env.gateway.held() == held  # nothing new was published
    # The Service comes back: resolved again, published again.
    service_with_slice(env.kube, env.ns, "shop-green", [env.pods["green"].ip], target_port=env.pods["green"].port)
    wait_condition(env.kube, env.ns, "shop", "ResolvedRefs", "True", "", timeout=30)


def test_restarted_operator_with_a_missing_backend_keeps_what_the_replicas_hold(env: Env) -> None:
    """Blue-green at 0/100; green's Service goes missing while the operator is down. The new operator has no last
    good form in memory, and green without endpoints would leave no eligible backend: it takes shop's form from the
    generation the replicas hold (GetHeld), so shop keeps routing to green, and another split's change made while
    green is missing is published and served."""
    other_host = "other.example"
    service_with_slice(env.kube, env.ns, "other-green", [env.pods["green"].ip], target_port=env.pods["green"].port)
    other = {
        "hosts": [other_host],
        "backends": [
            {"name": "blue", "service": "shop-blue", "port": 80, "weight": 100},
            {"name": "green", "service": "other-green", "port": 80, "weight": 0},
        ],
    }
    op = env.start_operator()
    env.apply_split("shop", spec((0, 100)))
    env.apply_split("other", other)
    wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=60)
    wait_condition(env.kube, env.ns, "other", "Published", "True", "2/2", timeout=60)
    assert sample(env, 0, 10, other_host) == {"blue": 10}
    held = env.gateway.held()
    op.stop()
    env.kube.kubectl("delete", "service", "shop-green", "-n", env.ns)
    op2 = env.start_operator(identity="op-1")
    wait_condition(
        env.kube, env.ns, "shop", "Published", "False", "the dataplanes keep serving its last resolved endpoints", 30
    )
    generation = env.patch_weights("other", [0, 100])
    obj = wait_condition(env.kube, env.ns, "other", "Published", "True", "^2/2 dataplanes$", 30, generation)
    assert obj["status"]["generation"] > held[0], op2.log_tail()
    assert "nothing published" not in op2.log(), op2.log_tail()
    for unit in (0, 1):
        assert sample(env, unit, 20, other_host) == {"green": 20}  # the change is served through Envoy
        assert sample(env, unit, 20) == {"green": 20}  # shop keeps its last good form: green's endpoints
    resolved = condition(get_ts(env.kube, env.ns, "shop"), "ResolvedRefs")
    assert resolved is not None and resolved["status"] == "False"
    service_with_slice(env.kube, env.ns, "shop-green", [env.pods["green"].ip], target_port=env.pods["green"].port)
    obj = wait_condition(env.kube, env.ns, "shop", "Published", "True", "^2/2 dataplanes$", timeout=30)
    # status.generation is the first generation carrying shop as served now: the form seeded from the replicas, which
    # the resolved Service compiles to again; both replicas hold that generation or the later one of other's change.
    held_now = env.gateway.held()
    assert held_now[0] == held_now[1] >= obj["status"]["generation"] > held[0], (held_now, obj["status"])
    assert sample(env, 1, 20) == {"green": 20}


def test_operator_restart_mid_traffic_fails_no_request_and_numbers_grow(env: Env) -> None:
    op = env.start_operator()
    env.apply_split("shop", spec((50, 50), sticky=True))
    obj = wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=60)
    first = obj["status"]["generation"]

    async def traffic(stop: asyncio.Event) -> collections.Counter[str]:
        conns = [u.connection() for u in env.gateway.units]
        c: collections.Counter[str] = collections.Counter()
        try:
            while not stop.is_set():
                for conn in conns:
                    r = await conn.request(HOST)
                    c["ok" if r.status == 200 and r.backend in ("blue", "green") else f"HTTP {r.status}"] += 1
        finally:
            for conn in conns:
                conn.close()
        return c

    async def scenario() -> collections.Counter[str]:
        stop = asyncio.Event()
        task = asyncio.create_task(traffic(stop))
        await asyncio.to_thread(op.stop)
        op2 = env.start_operator(identity="op-1")
        await asyncio.to_thread(wait_condition, env.kube, env.ns, "shop", "Published", "True", "2/2", 60)
        gen = await asyncio.to_thread(env.patch_weights, "shop", [40, 60])
        obj2 = await asyncio.to_thread(wait_condition, env.kube, env.ns, "shop", "Published", "True", "2/2", 30, gen)
        assert obj2["status"]["generation"] > first
        await asyncio.to_thread(op2.kill)  # the crash case too
        env.start_operator(identity="op-2")
        await asyncio.sleep(0)
        gen = await asyncio.to_thread(env.patch_weights, "shop", [30, 70])
        obj3 = await asyncio.to_thread(wait_condition, env.kube, env.ns, "shop", "Published", "True", "2/2", 60, gen)
        assert obj3["status"]["generation"] > obj2["status"]["generation"]
        stop.set()
        return await task

    counts = asyncio.run(scenario())
    assert set(counts) == {"ok"} and counts["ok"] > 50, counts


def test_restarted_dataplane_replica_is_republished_within_2s(env: Env) -> None:
    env.start_operator()
    env.apply_split("shop", spec((50, 50)))
    obj = wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=60)
    number = obj["status"]["generation"]
    env.gateway.restart_processor(1)
    t0 = time.monotonic()
    poll(lambda: env.gateway.held()[1] == number, 5, "the restarted replica holding the generation again", 0.02)
    took = time.monotonic() - t0
    assert took < 2.0, took


def test_replica_that_stays_behind_is_named_in_published(env: Env) -> None:
    env.start_operator()
    env.apply_split("shop", spec((50, 50)))
    wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=60)
    env.gateway.kill_processor(1)
    gen = env.patch_weights("shop", [10, 90])
    obj = wait_condition(
        env.kube, env.ns, "shop", "Published", "False", r"^1/2 dataplanes; behind: gw-1$", timeout=30, generation=gen
    )
    assert (condition(obj, "Published") or {}).get("reason") == "Behind"
    env.gateway.start_processor(1)  # back, holding nothing: it gets the current generation and is counted again
    obj = wait_condition(env.kube, env.ns, "shop", "Published", "True", "^2/2 dataplanes$", timeout=30, generation=gen)
    assert env.gateway.held() == [obj["status"]["generation"]] * 2


def test_two_operator_replicas_only_the_leader_publishes(env: Env) -> None:
    a = env.start_operator(identity="op-a")
    env.apply_split("shop", spec((50, 50)))
    wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=60)
    b = env.start_operator(identity="op-b")
    lease = poll(
        lambda: (
            env.kube.kubectl(
                "get", "lease", "trafficsplit-operator", "-n", env.ns, "-o", "jsonpath={.spec.holderIdentity}"
            ).stdout
        ),
        10,
        "the lease",
    )
    assert lease == "op-a"
    time.sleep(1.0)  # give a wrongly active standby the chance to publish (not a synchronisation)
    assert not re.search(r"generation \d+: ", b.log()), b.log_tail()  # the standby never published
    # Their metrics say the same: only the leader speaks for the fleet.
    published = get_ts(env.kube, env.ns, "shop")["status"]["generation"]
    ma, mb = a.metrics(), b.metrics()
    leader: tuple[str, frozenset[tuple[str, str]]] = ("trafficsplit_operator_leader", frozenset())
    assert (ma[leader], mb[leader]) == (1, 0)
    fleet = frozenset({("gateway", "static")})
    assert ma[("trafficsplit_operator_generation", fleet)] == published
    assert ma[("trafficsplit_operator_replicas_serving", fleet)] == 2
    assert ("trafficsplit_operator_generation", fleet) not in mb
    a.stop()  # releases the lease: b takes over and publishes under a higher number
    held = env.gateway.held()[0]
    gen = env.patch_weights("shop", [20, 80])
    obj = wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=30, generation=gen)
    assert obj["status"]["generation"] > held
    assert re.search(r"generation \d+: ", b.log()), b.log_tail()
    mb = b.metrics()
    assert mb[leader] == 1
    assert mb[("trafficsplit_operator_generation", fleet)] == obj["status"]["generation"]


@pytest.mark.parametrize(("resource", "verb"), [("trafficsplits/status", "patch"), ("events", "create")])
def test_role_is_exercised_each_write_is_refused_without_its_verb(env: Env, resource: str, verb: str) -> None:
    """The same chart RBAC minus one write verb: publishing still works, and exactly that write never lands (without
    the status patch no status appears; without events create the status is written but no Event)."""
    from tests.support.operator import render_operator_rbac, strip_verb

    release = env.release + "x"
    manifest = strip_verb(render_operator_rbac(env.kube, env.ns, release), resource, verb)
    kubeconfig = operator_kubeconfig(env.kube, env.ns, release, manifest)
    op = env.start_operator(kubeconfig=kubeconfig)
    env.apply_split("shop", spec((50, 50)))
    poll(lambda: min(env.gateway.held()) >= 1, 30, "the generation on both replicas")
    poll(lambda: "forbidden" in op.log().lower(), 15, f"a forbidden {resource} {verb} in the log")
    if resource == "events":
        wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=30)
        time.sleep(0.5)  # lets a wrong Event land
        assert events(env.kube, env.ns, "shop") == []
    else:
        time.sleep(0.5)  # the status write would have been immediate; this only lets a wrong one land
        assert "status" not in get_ts(env.kube, env.ns, "shop")


def test_operator_killed_mid_publish_leaves_no_replica_refused_and_the_next_leader_numbers_upward(env: Env) -> None:
    """The leader dies while one replica has taken generation N and the other is still in its publish (its Envoy is
    stalled, so the ACK wait hangs): the next leader numbers above N, both replicas end on its generation, and no
    replica ever refused one."""
    op = env.start_operator()
    env.apply_split("shop", spec((50, 50)))
    first = wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=60)["status"]["generation"]
    stalled = env.gateway.units[1].envoy.proc
    assert stalled is not None
    stalled.send_signal(signal.SIGSTOP)
    try:
        env.patch_weights("shop", [10, 90])
        poll(lambda: env.gateway.held()[0] > first, 30, "gw-0 holding the new generation")
        mid = env.gateway.held()
        # gw-1's publish is in flight: waiting for its Envoy's ACK (a weight change swaps first and waits for the
        # routes' ACK, so GetHeld may already show the new number there; it rolls back if the ACK never comes).
        op.kill()
    finally:
        stalled.send_signal(signal.SIGCONT)
    op2 = env.start_operator(identity="op-1")
    gen = env.patch_weights("shop", [30, 70])
    obj = wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", 60, gen)
    final = env.gateway.held()
    assert final[0] == final[1] == obj["status"]["generation"] > mid[0], (final, mid)
    assert "refused generation" not in op.log() + op2.log()
    assert f"publish generation {mid[0]} " in env.gateway.units[1].processor.log_tail(200)  # it was offered to gw-1
    for unit in (0, 1):
        seen = sample(env, unit, 40)
        assert set(seen) <= {"blue", "green"} and sum(seen.values()) == 40, seen


def test_kube_apiserver_restarted_the_operator_reconnects_and_publishes_each_change_once(env: Env) -> None:
    """The API server is killed and started again (same etcd): the operator's watches reconnect, the next change is
    published exactly once (one new generation), and nothing published before is lost."""
    op = env.start_operator()
    env.apply_split("shop", spec((50, 50)))
    first = wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=60)["status"]["generation"]
    env.kube.restart_apiserver()
    assert env.gateway.held() == [first, first]  # the dataplane never depended on the API server
    gen = env.patch_weights("shop", [20, 80])
    obj = wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", 60, gen)
    assert obj["status"]["generation"] == first + 1, (obj["status"], first)  # one change, one generation
    assert env.gateway.held() == [first + 1, first + 1]
    assert op.running()
    seen = sample(env, 0, 200)
    assert set(seen) <= {"blue", "green"} and seen["green"] > seen["blue"], seen
