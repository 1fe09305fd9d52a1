"""The integration tier's scenarios on a real cluster: real pods, the real images, the chart, kube-proxy in front of
two gateway replicas. Skipped unless tests/e2e/run-kind.sh prepared a kind cluster (see conftest.py)."""

from __future__ import annotations

import json
import os
import secrets
from collections import Counter
from collections.abc import Callable

import pytest
from scipy.stats import chisquare

from tests.e2e.kind import SKIP_REASON, Cluster, condition, published, wait_for

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.environ.get("TRAFFICSPLIT_E2E_KUBECONFIG"), reason=SKIP_REASON),
]
MakeSplit = Callable[..., tuple[str, str]]


def test_the_example_shop_split_is_published_and_serves(cluster: Cluster) -> None:
    split = wait_for("shop Published", lambda: published(cluster, "shop"))
    assert split["status"]["weights"] == "blue=95,green=0,canary=5"
    resp = cluster.request("shop.example.com")
    assert resp.status == 200 and resp.backend in {"blue", "canary"}
    assert resp.cookie("shop-affinity") is not None


def test_split_ratio_follows_the_weights(cluster: Cluster, make_split: MakeSplit) -> None:
    # Not sticky: the key is the request id, so realised shares converge on the weights (SPEC §3).
    _, host = make_split([("blue", 70), ("canary", 30)])
    n = 600
    counts = Counter(cluster.request(host).backend for _ in range(n))
    assert set(counts) <= {"blue", "canary"}, counts
    result = chisquare([counts["blue"], counts["canary"]], [n * 0.7, n * 0.3])
    assert result.pvalue > 0.001, (counts, result)


def test_sessions_stick_across_gateway_replicas(cluster: Cluster, make_split: MakeSplit) -> None:
    _, host = make_split([("blue", 50), ("canary", 50)], cookie="e2e-affinity")
    firsts: Counter[str] = Counter()
    for _ in range(30):
        first = cluster.request(host)
        value = first.cookie("e2e-affinity")
        assert first.status == 200 and value, first
        firsts[first.backend] += 1
        # New connections each time: kube-proxy spreads them over both replicas, which must agree.
        later = {cluster.request(host, cookie=f"e2e-affinity={value}").backend for _ in range(8)}
        assert later == {first.backend}, (value, first.backend, later)
    assert set(firsts) == {"blue", "canary"}, firsts  # 30 sessions at 50/50 land on both (p of not: 2^-29)


def test_blue_green_flip_by_kubectl_patch_moves_every_session(cluster: Cluster, make_split: MakeSplit) -> None:
    name, host = make_split([("blue", 100), ("green", 0)], cookie="e2e-affinity")
    sessions = []
    for _ in range(10):
        resp = cluster.request(host)
        assert resp.backend == "blue"
        sessions.append(f"e2e-affinity={resp.cookie('e2e-affinity')}")
    patch = [
        {"op": "replace", "path": "/spec/backends/0/weight", "value": 0},
        {"op": "replace", "path": "/spec/backends/1/weight", "value": 100},
    ]
    cluster.kubectl("patch", "trafficsplit", name, "-n", cluster.namespace, "--type=json", "-p", json.dumps(patch))
    split = wait_for("flip published", lambda: published(cluster, name))
    assert split["status"]["weights"] == "blue=0,green=100"
    # Published = every replica holds the new generation: the very next request of every session is green.
    assert [cluster.request(host, cookie=c).backend for c in sessions] == ["green"] * len(sessions)


def test_status_conditions_report_acceptance_resolution_and_publication(
    cluster: Cluster, make_split: MakeSplit
) -> None:
    name, _ = make_split([("blue", 1), ("canary", 1)])
    split = cluster.get("trafficsplit", name, "-n", cluster.namespace)
    for type_ in ("Accepted", "ResolvedRefs", "Published"):
        cond = condition(split, type_)
        assert cond is not None and cond["status"] == "True", (type_, split["status"])
    assert split["status"]["generation"] > 0

    missing, _ = make_split([("blue", 1), ("nosuch", 1)], wait=False)

    def unresolved() -> dict[str, object] | None:
        cond = condition(cluster.get("trafficsplit", missing, "-n", cluster.namespace), "ResolvedRefs")
        return cond if cond and cond["status"] == "False" else None

    cond = wait_for("ResolvedRefs=False", unresolved)
    assert "nosuch" in str(cond.get("message")), cond


def test_only_the_operator_reaches_the_publish_port(cluster: Cluster) -> None:
    """The NetworkPolicy: a pod in the backends' namespace cannot open the gateway's publish port (kind's kindnet
    enforces NetworkPolicy since kind v0.24), while the HTTP port stays open."""
    pods = cluster.get("pods", "-n", cluster.release_namespace, "-l", "app.kubernetes.io/component=gateway")
    ip = pods["items"][0]["status"]["podIP"]
    svc = cluster.get("service", f"{cluster.release}-gateway-publish", "-n", cluster.release_namespace)
    port = svc["spec"]["ports"][0]["port"]

    def probe(target_port: int) -> int:
        """Exit code of `nc -z` from a throw-away pod (kubectl returns it with --attach --restart=Never)."""
        proc = cluster.kubectl(
            "run",
            f"probe-{target_port}-{secrets.token_hex(3)}",
            "-n",
            cluster.namespace,
            "--rm",
            "--attach",
            "--restart=Never",
            "--image=busybox:1.36",
            "--",
            "nc",
            "-z",
            "-w",
            "3",
            ip,
            str(target_port),
            input="",
            check=False,
        )
        return proc.returncode

    assert probe(8080) == 0, "the HTTP port should be reachable from any pod"
    assert probe(port) != 0, "the publish port answered a pod that is not the operator"
