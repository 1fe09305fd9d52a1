"""Our Argo Rollouts traffic-router plugin (plugins/argo-rollouts), the built binary, called over Argo's plugin RPC
against a real API server: started by a tiny Go harness exactly as the Argo Rollouts controller starts it (go-plugin
with Argo's handshake and plugin map, Argo's own net/rpc client types, InitPlugin then Ping).

* On a TrafficSplit, with the real operator publishing to two real gateway replicas: SetWeight writes the weights
  (assignment: minimal and the sticky settings untouched); with one replica down VerifyWeight answers NotVerified
  (the operator's Published is False, Behind); once the replica is back and has acknowledged, Verified, and at that
  moment both replicas hold the generation the status names.
* On an HTTPRoute: SetWeight and SetHeaderRoute edit the rules, VerifyWeight is NotVerified until the parent status of
  our controller (trafficsplit.dev/gateway-controller) says Accepted at the route's generation. Nothing on this
  branch writes HTTPRoute status yet, so the test writes it as that controller will, through the status subresource.

The plugin and the harness are built (cached) by hack/build-argo-rollouts.sh --plugin and `go build`; the test skips,
saying so, when Go is not installed.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane
from tests.support.netns import TestPods
from tests.support.operator import (
    Gateway,
    Operators,
    apply,
    condition,
    get_ts,
    operator_kubeconfig,
    service_with_slice,
    ts_manifest,
    wait_condition,
)
from tests.support.waiting import poll

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_DIR = ROOT / "plugins" / "argo-rollouts"
GATEWAY_CRDS = ROOT / "charts" / "trafficsplit" / "gateway-api-crds" / "standard"
PLUGIN_NAME = "trafficsplit/trafficsplit"
CONTROLLER = "trafficsplit.dev/gateway-controller"
HOST = "shop.example"

pytestmark = [pytest.mark.k8s, pytest.mark.slow]


def _go() -> str:
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if go is None:
        pytest.skip("Go is not installed: the plugin and its harness are Go programs")
    return go


@pytest.fixture(scope="module")
def binaries(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(plugin, harness): the plugin from the build script's cache, the harness built next to the test."""
    go = _go()
    env = {**os.environ, "TRAFFICSPLIT_BUILD_JOBS": os.environ.get("TRAFFICSPLIT_BUILD_JOBS", "1")}
    out = subprocess.run(
        ["nice", "-n", "19", str(ROOT / "hack" / "build-argo-rollouts.sh"), "--plugin"],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=True,
    )
    plugin = Path(out.stdout.strip().splitlines()[-1])
    harness = tmp_path_factory.mktemp("harness") / "harness"
    # The build script's Go settings, so the harness reuses the packages the plugin's build compiled.
    go_env = {**env, "CGO_ENABLED": "0", "GOFLAGS": "-trimpath -buildvcs=false"}
    subprocess.run(
        ["nice", "-n", "19", go, "build", "-p", "1", "-o", str(harness), "./harness"],
        cwd=PLUGIN_DIR,
        env=go_env,
        check=True,
        timeout=1800,
        capture_output=True,
    )
    return plugin, harness


class Harness:
    """The harness process: one JSON request per line in, one answer per line out, each bounded in time."""

    def __init__(self, binaries: tuple[Path, Path], kube: ControlPlane, rollout: dict[str, Any], work: Path) -> None:
        path = work / "rollout.json"
        path.write_text(json.dumps(rollout))
        self.stderr = (work / "harness.log").open("w")
        self.proc = subprocess.Popen(
            [str(binaries[1]), f"-plugin={binaries[0]}", f"-rollout={path}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env=kube.env(),
        )

    def call(self, method: str, timeout: float = 60, **args: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"method": method, **args}) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"{method}: no answer within {timeout}s"
        line = self.proc.stdout.readline()
        assert line, f"{method}: the harness exited ({self.proc.poll()})"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.stderr.close()


def rollout(namespace: str, config: dict[str, str]) -> dict[str, Any]:
    """The Rollout as the controller passes it to the plugin (only the fields the plugin reads matter)."""
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "shop", "namespace": namespace},
        "spec": {
            "strategy": {
                "canary": {
                    "stableService": "shop-stable",
                    "canaryService": "shop-canary",
                    "trafficRouting": {"plugins": {PLUGIN_NAME: config}, "managedRoutes": [{"name": "beta"}]},
                }
            }
        },
    }


@pytest.fixture
def harness_for(binaries: tuple[Path, Path], kube: ControlPlane, tmp_path: Path) -> Iterator[Any]:
    started: list[Harness] = []

    def start(ro: dict[str, Any]) -> Harness:
        h = Harness(binaries, kube, ro, tmp_path)
        started.append(h)
        return h

    yield start
    for h in started:
        h.close()
        print("--- harness.log ---\n" + (tmp_path / "harness.log").read_text(errors="replace")[-4000:])


@pytest.mark.envoy
@pytest.mark.netns
def test_trafficsplit_verify_weight_waits_for_every_replica(
    trafficsplit_crd: ControlPlane,
    namespace: str,
    gateway: Gateway,
    operators: Operators,
    testpods: TestPods,
    harness_for: Any,
) -> None:
    kube = trafficsplit_crd
    for n in ("stable", "canary"):
        pod = testpods.start(n)
        service_with_slice(kube, namespace, f"shop-{n}", [pod.ip], target_port=pod.port)
    release = namespace.split("-")[0] + namespace.split("-")[1]
    operators.start(
        operator_kubeconfig(kube, namespace, release),
        args=[f"--namespaces={namespace}", f"--token-file={gateway.token_file}", *gateway.dataplane_args()],
        lease_namespace=namespace,
    )
    spec = {
        "hosts": [HOST],
        "assignment": "minimal",
        "sticky": {"cookie": {"name": "ts-shop"}},
        "backends": [
            {"name": "stable", "service": "shop-stable", "port": 80, "weight": 100},
            {"name": "canary", "service": "shop-canary", "port": 80, "weight": 0},
        ],
    }
    apply(kube, ts_manifest(namespace, "shop", spec))
    wait_condition(kube, namespace, "shop", "Published", "True", "^2/2 dataplanes$", timeout=60)
    before = get_ts(kube, namespace, "shop")

    h = harness_for(rollout(namespace, {"trafficSplit": "shop"}))
    assert h.call("Type") == {"error": "", "type": PLUGIN_NAME}
    assert h.call("VerifyWeight", weight=0) == {"error": "", "verified": "Verified"}  # 100/0 is served

    gateway.kill_processor(1)  # one replica cannot acknowledge
    assert h.call("SetWeight", weight=10) == {"error": ""}
    obj = get_ts(kube, namespace, "shop")
    assert [b["weight"] for b in obj["spec"]["backends"]] == [90, 10]
    # Only the weights changed: assignment, sticky and the backends' other fields are as they were.
    for b in obj["spec"]["backends"]:
        b.pop("weight")
    for b in before["spec"]["backends"]:
        b.pop("weight")
    assert obj["spec"] == before["spec"]
    gen = obj["metadata"]["generation"]
    wait_condition(kube, namespace, "shop", "Published", "False", "behind: gw-1", timeout=30, generation=gen)
    for _ in range(3):  # Argo asks again every 10 s; the answer stays NotVerified while the replica is behind
        assert h.call("VerifyWeight", weight=10) == {"error": "", "verified": "NotVerified"}

    gateway.start_processor(1)
    t0 = time.monotonic()
    poll(lambda: h.call("VerifyWeight", weight=10)["verified"] == "Verified", 30, "VerifyWeight Verified", 0.1)
    took = time.monotonic() - t0
    obj = get_ts(kube, namespace, "shop")
    # Verified means served: both replicas hold the generation that carries canary 10.
    assert gateway.held() == [obj["status"]["generation"]] * 2, (gateway.held(), obj["status"])
    assert (condition(obj, "Published") or {}).get("observedGeneration") == gen
    print(f"VerifyWeight flipped to Verified {took:.2f}s after the replica restarted")

    # The next step's weight is not verified by the served 10, and a header route is a first match to the canary.
    assert h.call("VerifyWeight", weight=50) == {"error": "", "verified": "NotVerified"}
    route = {"name": "beta", "match": [{"headerName": "x-canary", "headerValue": {"exact": "yes"}}]}
    assert h.call("SetHeaderRoute", headerRoute=route) == {"error": ""}
    matches = get_ts(kube, namespace, "shop")["spec"]["matches"]
    assert matches == [{"header": {"name": "x-canary", "type": "Exact", "value": "yes"}, "backend": "canary"}]
    assert h.call("RemoveManagedRoutes") == {"error": ""}
    assert "matches" not in get_ts(kube, namespace, "shop")["spec"]


def _route(kube: ControlPlane, namespace: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(kube.kubectl("get", "httproute", "shop", "-n", namespace, "-o", "json").stdout)
    return out


def _write_parent_status(kube: ControlPlane, namespace: str, generation: int) -> None:
    """The parent status our controller writes once every replica acknowledged the route's generation."""
    status = {
        "parents": [
            {
                "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"},
                "controllerName": CONTROLLER,
                "conditions": [
                    {
                        "type": t,
                        "status": "True",
                        "reason": t,
                        "message": "",
                        "observedGeneration": generation,
                        "lastTransitionTime": "2026-12-02T00:00:00Z",
                    }
                    for t in ("Accepted", "ResolvedRefs")
                ],
            }
        ]
    }
    kube.kubectl(
        "patch",
        "httproute",
        "shop",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


def test_httproute_set_weight_and_verify_against_the_parent_status(
    kube: ControlPlane, namespace: str, harness_for: Any
) -> None:
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(GATEWAY_CRDS))
    kube.kubectl("wait", "--for=condition=Established", "crd/httproutes.gateway.networking.k8s.io", "--timeout=30s")
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "shop", "namespace": namespace},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "hostnames": [HOST],
            "rules": [
                {
                    "name": "main",
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [
                        {"name": "shop-stable", "port": 80, "weight": 100},
                        {"name": "shop-canary", "port": 80, "weight": 0},
                    ],
                }
            ],
        },
    }
    apply(kube, json.dumps(route))
    _write_parent_status(kube, namespace, _route(kube, namespace)["metadata"]["generation"])

    h = harness_for(rollout(namespace, {"httpRoute": "shop"}))
    assert h.call("VerifyWeight", weight=0) == {"error": "", "verified": "Verified"}
    assert h.call("SetWeight", weight=30) == {"error": ""}
    obj = _route(kube, namespace)
    assert [(r["name"], r["weight"]) for r in obj["spec"]["rules"][0]["backendRefs"]] == [
        ("shop-stable", 70),
        ("shop-canary", 30),
    ]
    gen = obj["metadata"]["generation"]
    # The parent status still describes the generation before the step: not served yet.
    assert h.call("VerifyWeight", weight=30) == {"error": "", "verified": "NotVerified"}
    _write_parent_status(kube, namespace, gen)
    assert h.call("VerifyWeight", weight=30) == {"error": "", "verified": "Verified"}

    header = {"name": "beta", "match": [{"headerName": "x-canary", "headerValue": {"prefix": "qa"}}]}
    assert h.call("SetHeaderRoute", headerRoute=header) == {"error": ""}
    rules = _route(kube, namespace)["spec"]["rules"]
    # Appended: the weighted rule keeps its index, which names its sticky sessions.
    assert [r["name"] for r in rules] == ["main", "argo-beta"]
    assert rules[1]["matches"][0]["headers"] == [{"type": "RegularExpression", "name": "x-canary", "value": "^qa.*"}]
    assert [b["name"] for b in rules[1]["backendRefs"]] == ["shop-canary"]
    # A new spec generation: the served 30 no longer counts until our controller accepts the new generation.
    assert h.call("VerifyWeight", weight=30) == {"error": "", "verified": "NotVerified"}
    assert h.call("RemoveManagedRoutes") == {"error": ""}
    assert [r["name"] for r in _route(kube, namespace)["spec"]["rules"]] == ["main"]
    assert "mirror" in h.call("SetMirrorRoute")["error"]
