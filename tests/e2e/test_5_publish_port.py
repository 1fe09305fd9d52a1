"""The publish port: only the operator may reach it (the chart's NetworkPolicy, enforced by the cluster's policy
engine), and a caller that gets through the network without the token is refused by the API itself (mutual TLS
refuses one without the operator's client certificate even earlier)."""

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

# GetHeld over the publish port twice: with the operator's client certificate (so TLS lets it through) but no token,
# then with no client certificate at all. Prints one gRPC status code per attempt.
# GetHeld over the publish port twice: with the operator's client certificate (so TLS lets it through) but no token,
# then with no client certificate at all. Prints one gRPC status code per attempt. The first is retried while the
# connection is refused: the policy engine admits a new pod's address a moment after the pod starts.
PUBLISH_WITHOUT_TOKEN = """
import sys, time, grpc
from trafficsplit.v1alpha1 import publish_pb2, publish_pb2_grpc
ip, port, server_name = sys.argv[1:4]
read = lambda n: open("/tls/" + n, "rb").read()
options = [("grpc.ssl_target_name_override", server_name)]
for label, creds, patience in (
    ("cert-no-token", grpc.ssl_channel_credentials(read("ca.crt"), read("tls.key"), read("tls.crt")), 30),
    ("no-cert", grpc.ssl_channel_credentials(read("ca.crt")), 0),
):
    deadline = time.monotonic() + patience
    while True:
        stub = publish_pb2_grpc.PublisherStub(grpc.secure_channel(f"{ip}:{port}", creds, options))
        try:
            stub.GetHeld(publish_pb2.GetHeldRequest(), timeout=10)
            print(label, "OK")
            break
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNAVAILABLE and time.monotonic() < deadline:
                time.sleep(1)
                continue
            print(label, e.code().name, e.details())
            break
"""


RESTRICTED: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "runAsUser": 10001,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _run_pod(
    cluster: Cluster, namespace: str, image: str, argv: list[str], labels: dict[str, str], tls_secret: str = ""
) -> tuple[str, int]:
    """Run one container to completion (``tls_secret`` mounted at /tls); returns (its output, its exit code)."""
    name = f"probe-{secrets.token_hex(3)}"
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "containers": [{"name": "probe", "image": image, "command": argv, "securityContext": RESTRICTED}],
        },
    }
    if tls_secret:
        pod["spec"]["volumes"] = [{"name": "tls", "secret": {"secretName": tls_secret, "defaultMode": 0o444}}]
        pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "tls", "mountPath": "/tls", "readOnly": True}]
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
    server_name = f"{shop.release}-gateway-publish.{shop.release_namespace}.svc"
    argv = ["python", "-c", PUBLISH_WITHOUT_TOKEN, ip, str(port), server_name]
    # The operator's client certificate (the chart's Secret): TLS admits the caller, so only the token is missing.
    secret = f"{shop.release}-publish-tls-operator"
    out, code = _run_pod(shop, shop.release_namespace, f"{repo}:{tag}", argv, labels, tls_secret=secret)
    assert code == 0, out
    assert "cert-no-token UNAUTHENTICATED" in out, out
    assert "no-cert OK" not in out and "no-cert " in out, out  # without a client certificate: refused by TLS
