"""Helpers for the kind tier: the cluster tests/e2e/run-kind.sh prepared, reached through its kubeconfig and the
gateway's NodePort. Without TRAFFICSPLIT_E2E_KUBECONFIG every test here is skipped (never reported as passed).

Environment (set by run-kind.sh): TRAFFICSPLIT_E2E_KUBECONFIG, TRAFFICSPLIT_E2E_GATEWAY_URL (http://127.0.0.1:30080),
TRAFFICSPLIT_E2E_NAMESPACE (where the sample backends run), TRAFFICSPLIT_E2E_RELEASE and
TRAFFICSPLIT_E2E_RELEASE_NAMESPACE (the chart's release).
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

KUBECONFIG_ENV = "TRAFFICSPLIT_E2E_KUBECONFIG"
SKIP_REASON = f"kind tier: needs a cluster from tests/e2e/run-kind.sh ({KUBECONFIG_ENV} is not set)"


@dataclass(frozen=True)
class Response:
    status: int
    body: str
    headers: dict[str, str]

    @property
    def backend(self) -> str:
        # The sample backends (examples/kubernetes/backends.yaml) answer with their own name.
        return self.body.strip()

    def cookie(self, name: str) -> str | None:
        raw = self.headers.get("set-cookie", "")
        first = raw.split(";", 1)[0]
        key, sep, value = first.partition("=")
        return value if sep and key.strip() == name else None


@dataclass(frozen=True)
class Cluster:
    kubeconfig: str
    gateway: urllib.parse.SplitResult
    namespace: str
    release: str
    release_namespace: str

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            ["kubectl", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "KUBECONFIG": self.kubeconfig},
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def get(self, *args: str) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.kubectl("get", *args, "-o", "json").stdout)
        return out

    def request(self, host: str, path: str = "/", cookie: str | None = None) -> Response:
        """One request through the gateway Service; a new connection each time, so kube-proxy spreads requests over
        every gateway replica (stickiness must hold across them)."""
        conn = http.client.HTTPConnection(self.gateway.hostname or "127.0.0.1", self.gateway.port or 80, timeout=10)
        try:
            headers = {"Host": host}
            if cookie:
                headers["Cookie"] = cookie
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
            return Response(
                resp.status, resp.read().decode(errors="replace"), {k.lower(): v for k, v in resp.getheaders()}
            )
        finally:
            conn.close()


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 90.0, interval: float = 0.5) -> Any:
    """Poll until probe() returns something truthy; fail with the last value after the timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


def condition(split: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in split.get("status", {}).get("conditions", []) if c.get("type") == type_), None)


def published(cluster: Cluster, name: str) -> dict[str, Any] | None:
    """The split once the operator reports its current spec published on every replica, else None."""
    split = cluster.get("trafficsplit", name, "-n", cluster.namespace)
    cond = condition(split, "Published")
    ok = (
        cond is not None
        and cond.get("status") == "True"
        and split.get("status", {}).get("observedGeneration") == split["metadata"]["generation"]
    )
    return split if ok else None
