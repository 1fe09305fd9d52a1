"""The end-to-end tier's view of a cluster, the same whichever cluster it is: the local node this machine runs
(tests/support/localnode.py) or a kind cluster prepared by tests/e2e/run-kind.sh on a Docker host.

A :class:`Cluster` knows its kubeconfig, the image names to install with, any values that cluster needs on top of
them (kind reaches the gateway through a NodePort), and how the test process reaches the gateway Service: through its
ClusterIP (the local node routes the Service range to kube-proxy) or a fixed URL (kind's NodePort on 127.0.0.1).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KUBECONFIG_ENV = "TRAFFICSPLIT_E2E_KUBECONFIG"
REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "trafficsplit"
EXAMPLES = REPO_ROOT / "examples" / "kubernetes"


@dataclass(frozen=True)
class Response:
    status: int
    body: str
    headers: dict[str, str]

    @property
    def backend(self) -> str:
        # The sample backends (examples/kubernetes/backends.yaml) answer with their own name.
        return self.body.strip()

    @property
    def pod(self) -> str:
        """The backend pod that answered (the echo image names itself in X-Echo-Pod)."""
        return self.headers.get("x-echo-pod", "")

    @property
    def decision(self) -> dict[str, str]:
        """The debug header the gateway adds when the split has debugHeaders (backend, generation, key, path)."""
        raw = self.headers.get("x-trafficsplit-decision", "")
        parts = (p.strip().partition("=") for p in raw.split(";") if p.strip())
        return {k: v for k, _, v in parts}

    def cookie(self, name: str) -> str | None:
        raw = self.headers.get("set-cookie", "")
        first = raw.split(";", 1)[0]
        key, sep, value = first.partition("=")
        return value if sep and key.strip() == name else None


@dataclass(frozen=True)
class Cluster:
    """A cluster the tier runs against. ``images`` maps operator/extproc/envoy/echo to (repository, tag); a missing
    envoy entry keeps the chart's default (the official image, which kind pulls)."""

    name: str
    kubeconfig: Path
    helm_bin: str
    kubectl_bin: str
    images: dict[str, tuple[str, str]]
    helm_home: Path
    extra_values: tuple[str, ...] = ()
    gateway_url: tuple[str, int] | None = None
    release: str = "ts"
    release_namespace: str = "trafficsplit-system"
    namespace: str = "shop"
    timings: dict[str, float] = field(default_factory=dict)
    # The local node's containerd socket (images are imported there); None on kind.
    containerd_sock: Path | None = None

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "HELM_CACHE_HOME": str(self.helm_home / "cache"),
            "HELM_CONFIG_HOME": str(self.helm_home / "config"),
            "HELM_DATA_HOME": str(self.helm_home / "data"),
        }

    def _run(
        self, argv: Sequence[str], input: str | None, check: bool, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(list(argv), input=input, capture_output=True, text=True, timeout=timeout, env=self.env())
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return self._run([self.kubectl_bin, *args], input, check, timeout)

    def helm(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        return self._run([self.helm_bin, *args], input, check, timeout)

    def get(self, *args: str) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.kubectl("get", *args, "-o", "json").stdout)
        return out

    def image_values(self) -> list[str]:
        """``--set`` arguments that point the chart at this cluster's images (the only overrides the install uses)."""
        keys = {"operator": "operator.image", "extproc": "gateway.extproc.image", "envoy": "gateway.envoy.image"}
        out: list[str] = []
        for name, key in keys.items():
            if name in self.images:
                repo, tag = self.images[name]
                out += ["--set", f"{key}.repository={repo}", "--set", f"{key}.tag={tag}"]
        return out

    def echo_image(self) -> str:
        repo, tag = self.images["echo"]
        return f"{repo}:{tag}"

    def gateway(self) -> tuple[str, int]:
        """Where the test process sends HTTP to reach the gateway Service (and kube-proxy behind it)."""
        if self.gateway_url:
            return self.gateway_url
        svc = self.get("service", f"{self.release}-gateway", "-n", self.release_namespace)
        return svc["spec"]["clusterIP"], int(svc["spec"]["ports"][0]["port"])

    def client(self) -> Gateway:
        return Gateway(*self.gateway())


@dataclass(frozen=True)
class Gateway:
    """HTTP to the gateway Service (or one data-plane pod). A new connection per request, so kube-proxy spreads
    requests over every gateway replica (stickiness must hold across them). Nothing is retried: every rule fails open
    natively, so any answer but the expected one fails the test that sees it."""

    host: str
    port: int

    def request(
        self,
        host: str,
        path: str = "/",
        cookie: str | None = None,
        timeout: float = 10,
        headers: dict[str, str] | None = None,
    ) -> Response:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            headers = {**(headers or {}), "Host": host}
            if cookie:
                headers["Cookie"] = cookie
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
            return Response(
                resp.status, resp.read().decode(errors="replace"), {k.lower(): v for k, v in resp.getheaders()}
            )
        finally:
            conn.close()


def echo_backend(
    namespace: str, name: str, labels: dict[str, str], image: str, probe_period: int | None = None
) -> list[dict[str, Any]]:
    """One name-echoing backend (the echo image answers every request with `name`): a one-replica Deployment,
    unprivileged, and its Service on port 80. `probe_period`: the readiness probe's periodSeconds (Kubernetes'
    default when None); its timeout is 5 s, not 1, since the probe proves readiness, not speed, on a busy node."""
    probe: dict[str, Any] = {"httpGet": {"path": "/", "port": "http"}, "timeoutSeconds": 5}
    if probe_period is not None:
        probe["periodSeconds"] = probe_period
    container = {
        "name": "echo",
        "image": image,
        "args": ["-listen=:8080", f"-text={name}"],
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": probe,
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
    }
    pod = {
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534},
        "containers": [container],
    }
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"selector": labels, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
        },
    ]


def plugin_command() -> list[str]:
    """`kubectl trafficsplit` when the plugin is on PATH (pip install puts it there), else this tree's CLI."""
    if shutil.which("kubectl-trafficsplit"):
        return ["kubectl", "trafficsplit"]
    return [sys.executable, "-m", "trafficsplit.cli.main"]


def uninstall_every_release(cluster: Cluster) -> None:
    """A clean slate for a test that installs the chart with values of its own (one operator per cluster)."""
    out = cluster.helm("list", "-A", "-o", "json").stdout
    for rel in json.loads(out or "[]"):
        cluster.helm("uninstall", rel["name"], "-n", rel["namespace"], "--wait", "--timeout", "3m")


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 120.0, interval: float = 0.5) -> Any:
    """Poll until probe() returns something truthy; fail with the last value after the timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


def probe_failures(cluster: Cluster, namespace: str) -> Counter[str]:
    """Per pod of `namespace`, the probe failures the kubelet has reported so far (Events with reason Unhealthy, their
    counts). A readiness failure takes the pod's endpoint out: a split then fails over (docs/spec.md §6), which a
    ratio measured across it shows as bias; the ratio tests diff this around their run to say so."""
    out: Counter[str] = Counter()
    for ev in cluster.get("events", "-n", namespace)["items"]:
        if ev.get("reason") == "Unhealthy" and ev.get("involvedObject", {}).get("kind") == "Pod":
            count = (ev.get("series") or {}).get("count") or ev.get("count") or 1
            out[ev["involvedObject"]["name"]] += int(count)
    return out


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c.get("type") == type_), None)


def published(cluster: Cluster, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    """The split once the operator reports its current spec published on every replica, else None."""
    split = cluster.get("trafficsplit", name, "-n", namespace or cluster.namespace)
    cond = condition(split, "Published")
    ok = (
        cond is not None
        and cond.get("status") == "True"
        and split.get("status", {}).get("observedGeneration") == split["metadata"]["generation"]
    )
    return split if ok else None
