"""The publish port: only the operator may reach it (the chart's NetworkPolicy, enforced by the cluster's policy
engine), and a caller that gets through the network without the token is refused by the API itself."""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest

from tests.e2e.cluster import Cluster, wait_for

pytestmark = [pytest.mark.e2e]

CONNECT = """
import socket, sys
s = socket.socket()
s.settimeout(4)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
except OSError as e:
    print("refused:", type(e).__name__, e)
    sys.exit(3)
print("connected")
"""

PUBLISH_WITHOUT_TOKEN = """
import sys, grpc
from trafficsplit.v1alpha1 import publish_pb2, publish_pb2_grpc
channel = grpc.insecure_channel(f"{sys.argv[1]}:{sys.argv[2]}")
stub = publish_pb2_grpc.PublisherStub(channel)
try:
    stub.GetHeld(publish_pb2.GetHeldRequest(), timeout=10)
except grpc.RpcError as e:
    print("code:", e.code().name)
    sys.exit(0)
print("code: OK")
"""

RESTRICTED: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "runAsUser": 10001,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _run_pod(cluster: Cluster, namespace: str, image: str, argv: list[str], labels: dict[str, str]) -> tuple[str, int]:
    """Run one container to completion; returns (its output, its exit code)."""
    name = f"probe-{secrets.token_hex(3)}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "containers": [{"name": "probe", "image": image, "command": argv, "securityContext": RESTRICTED}],
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    try:

        def finished() -> dict[str, Any] | None:
            p = cluster.get("pod", name, "-n", namespace)
            return p if p["status"].get("phase") in ("Succeeded", "Failed") else None

        done = wait_for(f"pod {name} finished", finished, timeout=120)
        code = done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]
        return cluster.kubectl("logs", name, "-n", namespace).stdout, int(code)
    finally:
        cluster.kubectl("delete", "pod", name, "-n", namespace, "--wait=false", check=False)


def _gateway_pod_ip(cluster: Cluster) -> str:
    pods = cluster.get("pods", "-n", cluster.release_namespace, "-l", "app.kubernetes.io/component=gateway")
    ready = [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp") and p["status"].get("podIP")]
    return str(ready[0]["status"]["podIP"])


def _publish_port(cluster: Cluster) -> int:
    svc = cluster.get("service", f"{cluster.release}-gateway-publish", "-n", cluster.release_namespace)
    return int(svc["spec"]["ports"][0]["port"])


def test_a_pod_in_another_namespace_cannot_reach_the_publish_port(shop: Cluster) -> None:
    ip, port = _gateway_pod_ip(shop), _publish_port(shop)
    python = ["python", "-c", CONNECT]
    # The same pod reaches the gateway's HTTP port: the pod network works, the policy is what closes the other.
    out, code = _run_pod(shop, shop.namespace, shop.echo_image(), [*python, ip, "8080"], {"app": "probe"})
    assert code == 0 and "connected" in out, out
    out, code = _run_pod(shop, shop.namespace, shop.echo_image(), [*python, ip, str(port)], {"app": "probe"})
    assert code == 3 and "refused" in out, f"the publish port answered a pod of another namespace: {out}"


def test_a_pod_the_policy_lets_through_without_the_token_is_refused(shop: Cluster) -> None:
    ip, port = _gateway_pod_ip(shop), _publish_port(shop)
    # The operator's labels: the NetworkPolicy admits it; it has no token (none mounted, none sent).
    labels = {"app.kubernetes.io/name": "trafficsplit", "app.kubernetes.io/instance": shop.release,
              "app.kubernetes.io/component": "operator"}  # fmt: skip
    repo, tag = shop.images["extproc"]
    out, code = _run_pod(
        shop, shop.release_namespace, f"{repo}:{tag}", ["python", "-c", PUBLISH_WITHOUT_TOKEN, ip, str(port)], labels
    )
    assert code == 0 and "code: UNAUTHENTICATED" in out, out
