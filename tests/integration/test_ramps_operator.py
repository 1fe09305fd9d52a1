"""Issue 14 through the operator: real kube-apiserver + etcd, the operator process, two gateway units (extproc +
Envoy) sharing cookie keys, backends in network namespaces reached through EndpointSlices.

- spec.assignment: minimal survives an operator restart between two changes (the table comes back from status).
- sticky.mode: persistent drain: after blue goes to 0 marked `drain`, blue keeps its sessions (through either
  replica) while new ones go to green; once they go idle, `Drained=True` and a `Drained` Event appear, and
  `kubectl trafficsplit status` shows them.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane
from tests.support.dataplane import NameBackends, run_sessions
from tests.support.netns import Pod, TestPods
from tests.support.operator import (
    PYTHONPATH,
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
from trafficsplit.core.model.assignment import SlotTable, advance, moved_share
from trafficsplit.core.model.weights import Weights

pytestmark = [pytest.mark.k8s, pytest.mark.envoy, pytest.mark.netns, pytest.mark.slow]

HOST = "ramp.example"
IDLE = 10.0  # seconds a session stays live without a request (the extproc's --session-idle-seconds)


@pytest.fixture
def keyed_gateway(name_backends: NameBackends) -> Iterator[Gateway]:
    with tempfile.TemporaryDirectory(prefix="ts-ramps-") as d:
        keys = Path(d) / "cookie-keys"
        keys.write_text("k" * 32 + "\n")
        gw = start_gateway(
            Path(d), name_backends, extra=[f"--cookie-key-file={keys}", f"--session-idle-seconds={IDLE}"]
        )
        try:
            yield gw
        finally:
            gw.stop()


class Env:
    def __init__(self, kube: ControlPlane, ns: str, gw: Gateway, ops: Operators, pods: dict[str, Pod]) -> None:
        self.kube, self.ns, self.gateway, self.operators, self.pods = kube, ns, gw, ops, pods
        release = ns.split("-")[0] + ns.split("-")[1]
        self.kubeconfig = operator_kubeconfig(kube, ns, release)

    def start_operator(self, identity: str = "op-0") -> Any:
        return self.operators.start(
            self.kubeconfig,
            args=[f"--namespaces={self.ns}", f"--token-file={self.gateway.token_file}", *self.gateway.dataplane_args()],
            identity=identity,
            lease_namespace=self.ns,
        )

    def apply(self, spec: dict[str, Any]) -> int:
        apply(self.kube, ts_manifest(self.ns, "shop", spec))
        return int(get_ts(self.kube, self.ns, "shop")["metadata"]["generation"])


@pytest.fixture
def env(
    trafficsplit_crd: ControlPlane, namespace: str, keyed_gateway: Gateway, operators: Operators, testpods: TestPods
) -> Env:
    pods = {n: testpods.start(n) for n in ("blue", "green", "canary")}
    for n, p in pods.items():
        service_with_slice(trafficsplit_crd, namespace, f"shop-{n}", [p.ip], target_port=p.port)
    return Env(trafficsplit_crd, namespace, keyed_gateway, operators, pods)


def spec(weights: dict[str, int], **extra: Any) -> dict[str, Any]:
    return {
        "hosts": [HOST],
        "backends": [{"name": n, "service": f"shop-{n}", "port": 80, "weight": w} for n, w in weights.items()],
        "sticky": {"cookie": {"name": "ts"}},
        "debugHeaders": True,
        **extra,
    }


def table_of(env: Env) -> SlotTable:
    obj = get_ts(env.kube, env.ns, "shop")
    return SlotTable.from_status(obj["status"].get("assignment"), obj["metadata"]["uid"])


def test_an_operator_restart_between_two_changes_keeps_the_assignment(env: Env) -> None:
    op = env.start_operator()
    w1, w2, w3 = (
        {"blue": 50, "green": 30, "canary": 20},
        {"blue": 40, "green": 30, "canary": 30},
        {
            "blue": 40,
            "green": 25,
            "canary": 35,
        },
    )
    gen = env.apply(spec(w1, assignment="minimal"))
    wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=60, generation=gen)
    gen = env.apply(spec(w2, assignment="minimal"))
    wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=30, generation=gen)
    t2 = table_of(env)
    op.stop()
    env.start_operator("op-1")  # a new operator: no memory of the table but what status (and the replicas) hold
    gen = env.apply(spec(w3, assignment="minimal"))
    obj = wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=60, generation=gen)
    t3 = table_of(env)
    # Exactly the history's table: the change from w2 continued from t2, not rebuilt.
    assert t3 == advance(t2, Weights.of(w3.items()))
    assert moved_share(t2, t3) == pytest.approx(0.05)
    assert obj["status"]["displacement"]["repinnedShare"] == "5.00%"
    assert not [e for e in events(env.kube, env.ns, "shop") if e["reason"] == "AssignmentRebuilt"]


def test_a_tampered_status_table_is_refused_on_restart_and_the_replicas_table_continues(env: Env) -> None:
    """status.assignment through the real API server: the digest and the stored weights survive the round trip (the
    schema does not prune them), 90 KB of junk is refused by the schema itself, and a hand-edited table (runs
    reversed: valid counts) is refused by the restarted operator, which continues the replicas' table and says what
    moved."""
    op = env.start_operator()
    w1, w2 = {"blue": 40, "green": 40, "canary": 20}, {"blue": 30, "green": 40, "canary": 30}
    gen = env.apply(spec(w1, assignment="minimal"))
    wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=60, generation=gen)
    t1 = table_of(env)  # verifies: digest and weights came back from the API server as written
    op.stop()

    def patch_assignment(assignment: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        patch = json.dumps({"status": {"assignment": assignment}})
        args = ["patch", "trafficsplit", "shop", "-n", env.ns, "--subresource=status", "--type=merge", "-p", patch]
        return env.kube.kubectl(*args, check=False)

    stored = get_ts(env.kube, env.ns, "shop")["status"]["assignment"]
    junk = patch_assignment({**stored, "runs": "9x9," * 22_500})
    assert junk.returncode != 0 and "status.assignment.runs" in junk.stderr, junk.stderr
    edited = patch_assignment({**stored, "runs": ",".join(reversed(stored["runs"].split(",")))})
    assert edited.returncode == 0, edited.stderr
    gen = env.apply(spec(w2, assignment="minimal"))  # the weights change while no operator runs
    env.start_operator("op-1")
    obj = wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=60, generation=gen)
    t2 = table_of(env)
    assert t2 == advance(t1, Weights.of(w2.items()))  # the replicas' history, not the edited table
    assert moved_share(t1, t2) == pytest.approx(0.10)
    assert obj["status"]["displacement"]["repinnedShare"] == "10.00%"
    warnings = poll(
        lambda: [e for e in events(env.kube, env.ns, "shop") if e["reason"] == "AssignmentRebuilt"],
        15,
        "the AssignmentRebuilt Event",
    )
    (warning,) = warnings
    assert warning["type"] == "Warning" and "status.assignment was refused" in warning["message"]
    assert "digest" in warning["message"] and "10.00% of sessions moved" in warning["message"], warning["message"]


def test_a_drain_keeps_old_sessions_on_blue_until_they_go_idle_then_drained(env: Env) -> None:
    env.start_operator()
    persistent = {"sticky": {"cookie": {"name": "ts"}, "mode": "persistent"}}
    gen = env.apply(spec({"blue": 100, "green": 0}, **persistent))
    wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=60, generation=gen)
    units = env.gateway.units
    first = asyncio.run(run_sessions(units[0].port, HOST, "ts", [None] * 50, 1))
    cookies = [r[0].cookie("ts") for r in first]
    assert all(r[0].backend == "blue" for r in first)
    # The drain, as `kubectl trafficsplit flip --drain` writes it: blue to 0 marked drain, green to 100.
    draining = spec({"blue": 0, "green": 100}, **persistent)
    draining["backends"][0]["drain"] = True
    gen = env.apply(draining)
    wait_condition(env.kube, env.ns, "shop", "Published", "True", "2/2", timeout=30, generation=gen)
    # Old sessions stay on blue, through either replica; new sessions go to green.
    for unit in units:
        kept = asyncio.run(run_sessions(unit.port, HOST, "ts", list(cookies), 2))
        assert {r.backend for s in kept for r in s} == {"blue"}
        assert not [r for s in kept for r in s if r.cookie("ts")]  # nothing re-sealed: the pin holds
    new = asyncio.run(run_sessions(units[1].port, HOST, "ts", [None] * 50, 1))
    assert {r[0].backend for r in new} == {"green"}

    # While blue's sessions are live: Drained=False, counting them (summed over the two replicas that served them).
    def blue_live() -> dict[str, Any] | None:
        o = get_ts(env.kube, env.ns, "shop")
        c = condition(o, "Drained")
        return c if c is not None and c["message"] == "blue: 100 live sessions" else None

    live = poll(blue_live, IDLE * 0.7, "Drained=False with blue's 100 live sessions")
    assert live["status"] == "False" and live["reason"] == "SessionsLive", live

    def drained() -> dict[str, Any] | None:
        o = get_ts(env.kube, env.ns, "shop")
        c = condition(o, "Drained")
        return o if c is not None and c["status"] == "True" else None

    obj = poll(drained, IDLE + 20, "Drained=True for blue")
    backends = {b["name"]: b for b in obj["status"]["backends"]}
    assert backends["blue"]["liveSessions"] == 0 and isinstance(backends["green"]["liveSessions"], int)
    assert "blue: weight 0 and no live session on 2 dataplanes" in (condition(obj, "Drained") or {}).get("message", "")
    poll(lambda: [e for e in events(env.kube, env.ns, "shop") if e["reason"] == "Drained"], 15, "the Drained Event")
    # kubectl trafficsplit status shows it.
    out = subprocess.run(
        [sys.executable, "-m", "trafficsplit.cli", "status", "shop", "-n", env.ns],
        capture_output=True,
        text=True,
        env={**env.kube.env(), "PYTHONPATH": PYTHONPATH},
        timeout=60,
        check=True,
    )
    assert "Drained" in out.stdout and "LIVE SESSIONS" in out.stdout, out.stdout
