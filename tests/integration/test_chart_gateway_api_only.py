"""A Gateway-API-only install (`gateway.enabled=false`) on the real API server: `helm install`, then the operator run
the way the chart's Deployment runs it, with the release's ServiceAccount, and what it must still do without the
chart's gateway: provision a Gateway's data plane, and say on a TrafficSplit that nothing serves it.

"The way the chart runs it": the Deployment's own arguments and environment read back from the API server, each
mounted Secret and ConfigMap written to a local directory in place of its mount path (there is no kubelet), and only
the two listening flags moved off fixed ports of a shared machine (`--liveness` dropped, `--metrics` on port 0).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.controlplane import ControlPlane
from tests.support.operator import (
    Operators,
    apply,
    get_object,
    install_gateway_api_crds,
    service_with_slice,
    ts_manifest,
    wait_condition,
)
from tests.support.waiting import poll
from trafficsplit.core.control.status import NO_GATEWAY_MESSAGE
from trafficsplit.operator.dataplane_names import GATEWAY_LABEL, dataplane_name

pytestmark = pytest.mark.k8s

CHART = Path(__file__).resolve().parents[2] / "charts" / "trafficsplit"


def _json(kube: ControlPlane, *args: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(kube.kubectl(*args, "-o", "json").stdout)
    return out


def _files(kube: ControlPlane, namespace: str, volume: Mapping[str, Any], into: Path) -> None:
    """What the kubelet would mount for one Secret or ConfigMap volume, as files in `into`."""
    into.mkdir()
    if "secret" in volume:
        data = _json(kube, "get", "secret", volume["secret"]["secretName"], "-n", namespace)["data"]
        for key, value in data.items():
            (into / key).write_bytes(base64.b64decode(value))
    else:
        for key, value in _json(kube, "get", "configmap", volume["configMap"]["name"], "-n", namespace)["data"].items():
            (into / key).write_text(value)


def chart_operator(kube: ControlPlane, namespace: str, release: str, workdir: Path) -> tuple[list[str], dict[str, str]]:
    """The installed operator Deployment's arguments and environment, its mounts replaced by local copies."""
    pod = _json(kube, "get", "deployment", f"{release}-operator", "-n", namespace)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts: dict[str, str] = {}
    for m in container["volumeMounts"]:
        volume = volumes[m["name"]]
        if "secret" in volume or "configMap" in volume:
            _files(kube, namespace, volume, workdir / m["name"])
            mounts[m["mountPath"]] = str(workdir / m["name"])
    fields = {"metadata.name": f"{release}-operator-0", "metadata.namespace": namespace}
    env = {e["name"]: fields[e["valueFrom"]["fieldRef"]["fieldPath"]] for e in container["env"]}
    args = []
    for arg in container["args"]:
        if arg.startswith("--liveness="):
            continue
        if arg.startswith("--metrics="):
            arg = "--metrics=127.0.0.1:0"
        for path, local in mounts.items():
            arg = arg.replace(path + "/", local + "/")
        args.append(arg.replace("$(POD_NAME)", env["POD_NAME"]))
    return args, env


def _provisioned(kube: ControlPlane, namespace: str, base: str) -> set[str]:
    """kind/name of the Deployments and Services of one Gateway's data plane."""
    found = _json(kube, "get", "deployments,services", "-n", namespace, "-l", f"{GATEWAY_LABEL}={base}")["items"]
    return {f"{o['kind']}/{o['metadata']['name']}" for o in found}


def _gateway(namespace: str, gateway_class: str) -> str:
    listeners = [{"name": "http", "port": 80, "protocol": "HTTP"}]
    return yaml.safe_dump(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {"gatewayClassName": gateway_class, "listeners": listeners},
        }
    )


def test_the_operator_of_a_gateway_api_only_install_provisions_gateways_and_marks_trafficsplits(
    kube: ControlPlane, namespace: str, operators: Operators, tmp_path: Path
) -> None:
    # Another test may have installed the Gateway API CRDs already (then they stay as they are).
    if kube.kubectl("get", "crd", "gatewayclasses.gateway.networking.k8s.io", check=False).returncode != 0:
        install_gateway_api_crds(kube)
    # Cluster-scoped names (the ClusterRole, the class) are the release's: unique per namespace.
    release = "g" + hashlib.sha256(namespace.encode()).hexdigest()[:8]
    sets = ["gateway.enabled=false", "gatewayAPI.enabled=true", f"gatewayAPI.gatewayClass.name={release}"]
    kube.helm("install", release, str(CHART), "-n", namespace, *[x for s in sets for x in ("--set", s)], timeout=300)
    try:
        # Nothing of the chart's gateway was installed.
        for kind, name in (("deployment", "gateway"), ("service", "gateway"), ("service", "gateway-publish")):
            assert kube.kubectl("get", kind, f"{release}-{name}", "-n", namespace, check=False).returncode != 0

        args, env = chart_operator(kube, namespace, release, tmp_path)
        assert "--no-gateway" in args and not [a for a in args if a.startswith("--gateway-service")]
        token = kube.token_for_service_account(namespace, f"{release}-operator", create=False)
        op = operators.start(kube.kubeconfig_for_token(token, name=release), args=args, env=env)

        apps = kube.create_namespace("apps")
        for color, ip in (("blue", "10.97.0.1"), ("green", "10.97.0.2")):
            service_with_slice(kube, apps, f"shop-{color}", [ip])
        apply(kube, _gateway(apps, release))
        backends = [
            {"name": c, "service": f"shop-{c}", "port": 80, "weight": w} for c, w in (("blue", 90), ("green", 10))
        ]
        # A host of its own: another test's TrafficSplit on shop.example, in a namespace still being deleted on this
        # shared API server, would be the older claim and ours Accepted False (HostConflict).
        host = f"shop.{release}.example"
        apply(kube, ts_manifest(apps, "shop", {"hosts": [host], "backends": backends}))

        # The Gateway's data plane, provisioned in the release namespace, and its address in the Gateway's status.
        base = dataplane_name(apps, "web")
        wanted = {f"Deployment/{base}", f"Service/{base}", f"Service/{base}-publish"}
        poll(
            lambda: _provisioned(kube, namespace, base) >= wanted, 60, f"{apps}/web's data plane: {op.log_tail()}", 0.2
        )
        ip = _json(kube, "get", "service", base, "-n", namespace)["spec"]["clusterIP"]
        addresses = poll(
            lambda: (get_object(kube, "gateway", "web", apps).get("status") or {}).get("addresses"),
            30,
            "the Gateway's addresses",
            0.2,
        )
        assert addresses == [{"type": "IPAddress", "value": ip}]

        # The TrafficSplit: checked as usual, published nowhere, and saying so. Waited for until its Services resolve:
        # Published says NoGateway from the first status on, which may be written before the operator's Service
        # watch has brought the backends (ResolvedRefs False then; a loaded run saw that first status).
        split = wait_condition(kube, apps, "shop", "ResolvedRefs", "True", timeout=60)
        conditions = {c["type"]: c for c in split["status"]["conditions"]}
        assert conditions["Published"]["status"] == "False" and conditions["Published"]["reason"] == "NoGateway"
        assert conditions["Published"]["message"] == NO_GATEWAY_MESSAGE
        assert conditions["Accepted"]["status"] == "True", conditions
        assert "generation" not in split["status"]
        assert op.running(), op.log_tail()
        assert "no gateway for TrafficSplits (--no-gateway)" in op.log()
    finally:
        for started in operators.started:  # before its RBAC goes (the fixture prints the logs)
            started.stop()
        kube.helm("uninstall", release, "-n", namespace)
