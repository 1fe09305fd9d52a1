"""What the e2e files that serve HTTPRoutes share (test_9_gateway_api, test_10_argo_rollouts, test_11_flagger): the
chart upgraded with the Gateway API enabled, a Gateway of our class waited for until Programmed with its data-plane
pods Ready, an HTTPRoute's status read back, and the host PID of a data-plane pod's Envoy (to SIGSTOP it). Requests
go through tests/e2e/cluster.py's `Gateway`, which retries nothing."""

from __future__ import annotations

import subprocess
import time
from typing import Any

from tests.e2e.cluster import CHART, Cluster, condition

CONTROLLER = "trafficsplit.dev/gateway-controller"
CLASS = "trafficsplit"
CRDS = CHART / "gateway-api-crds" / "experimental"
LISTENER_PORT = 80
# The provisioned pod serves a privileged listener port shifted above 1024 (a non-root Envoy cannot bind 80):
# operator/trafficsplit/operator/provision.py, container_port.
POD_PORT = LISTENER_PORT + 10000
# Requests reserve CPU, they do not limit it: at the chart's 250m + 250m per gateway pod, the chart's two gateway
# pods and a Gateway's two data-plane pods do not all fit a 2-core node.
SMALL_REQUESTS = (
    "--set", "gateway.extproc.resources.requests.cpu=10m",
    "--set", "gateway.envoy.resources.requests.cpu=10m",
)  # fmt: skip


def install_gateway_api(cluster: Cluster, replicas: int, *values: str) -> float:
    """The experimental-channel CRDs applied, the chart upgraded (or installed) with ``gatewayAPI.enabled``, our class
    asking for ``replicas`` data-plane pods; ``values``: more helm arguments. Returns the seconds it took."""
    t0 = time.monotonic()
    cluster.kubectl("apply", "--server-side", "-f", str(CRDS), timeout=120)
    cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s", timeout=90)
    ns = cluster.release_namespace
    if cluster.kubectl("get", "namespace", ns, check=False).returncode != 0:
        cluster.kubectl("create", "namespace", ns)
    cluster.helm(
        "upgrade", "--install", cluster.release, str(CHART), "-n", ns,
        *cluster.image_values(), *cluster.extra_values, *SMALL_REQUESTS,
        "--set", "gatewayAPI.enabled=true",
        "--set", f"gatewayAPI.gatewayClass.name={CLASS}",
        "--set", f"gatewayAPI.gatewayClass.parameters.replicas={replicas}",
        *values,
        "--wait", "--timeout", "6m",
        timeout=420,
    )  # fmt: skip
    return time.monotonic() - t0


def gateway_doc(namespace: str, name: str) -> dict[str, Any]:
    """A Gateway of our class with one HTTP listener on LISTENER_PORT."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "gatewayClassName": CLASS,
            "listeners": [{"name": "http", "protocol": "HTTP", "port": LISTENER_PORT}],
        },
    }


def programmed(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    """The Gateway once Programmed at its generation with an address, else None."""
    gw = cluster.get("gateway", name, "-n", namespace)
    cond = condition(gw, "Programmed")
    ok = (
        cond is not None
        and cond.get("status") == "True"
        and cond.get("observedGeneration") == gw["metadata"]["generation"]
        and gw.get("status", {}).get("addresses")
    )
    return gw if ok else None


def dataplane_pod_ips(cluster: Cluster, namespace: str, gateway: str, replicas: int) -> tuple[str, ...] | None:
    """The IPs of the Gateway's Ready data-plane pods, once there are exactly ``replicas``."""
    from trafficsplit.operator.dataplane_names import selector_labels

    selector = ",".join(f"{k}={v}" for k, v in selector_labels(namespace, gateway).items())
    pods = cluster.get("pods", "-n", cluster.release_namespace, "-l", selector)
    ready = [
        p["status"]["podIP"]
        for p in pods["items"]
        if not p["metadata"].get("deletionTimestamp")
        and any(c.get("type") == "Ready" and c.get("status") == "True" for c in p["status"].get("conditions", []))
    ]
    return tuple(sorted(ready)) if len(ready) == replicas else None


def our_parent(route: dict[str, Any], gateway: str) -> dict[str, Any] | None:
    """The route's status entry our controller wrote for ``gateway``."""
    return next(
        (
            p
            for p in route.get("status", {}).get("parents", [])
            if p.get("controllerName") == CONTROLLER and p.get("parentRef", {}).get("name") == gateway
        ),
        None,
    )


def accepted_now(cluster: Cluster, namespace: str, name: str, gateway: str) -> dict[str, Any] | None:
    """Our parent entry once it says Accepted at the route's current generation (written after every replica ACKed),
    with the generation under ``_generation``."""
    route = cluster.get("httproute", name, "-n", namespace)
    parent = our_parent(route, gateway)
    if parent is None:
        return None
    acc = next((c for c in parent.get("conditions", []) if c.get("type") == "Accepted"), None)
    gen = route["metadata"]["generation"]
    return (
        parent | {"_generation": gen} if acc and acc["status"] == "True" and acc["observedGeneration"] == gen else None
    )


def envoy_pid(cluster: Cluster, pod_ip: str) -> int:
    """The host PID of the Envoy container of the data-plane pod at `pod_ip` (the local node's containerd)."""
    pods = cluster.get("pods", "-n", cluster.release_namespace, "-l", "app.kubernetes.io/component=gateway-dataplane")
    pod = next(p for p in pods["items"] if p["status"].get("podIP") == pod_ip)
    return container_pid(cluster, pod, "envoy")


def container_pid(cluster: Cluster, pod: dict[str, Any], container: str) -> int:
    """The host PID of a running container of `pod` (a Pod object as read; the local node's containerd)."""
    assert cluster.containerd_sock is not None
    cid = next(c["containerID"] for c in pod["status"]["containerStatuses"] if c["name"] == container)
    out = subprocess.run(
        ["ctr", "--address", str(cluster.containerd_sock), "-n", "k8s.io", "tasks", "ls"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    for line in out.splitlines()[1:]:
        task, pid, *_ = line.split()
        if task == cid.removeprefix("containerd://"):
            return int(pid)
    raise AssertionError(f"no containerd task for {cid}: {out}")
