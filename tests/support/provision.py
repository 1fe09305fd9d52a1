"""Data-plane settings as the chart renders them (templates/operator-dataplane-configmap.yaml), built from the chart's
default values, Gateway bodies, and the bootstrap a rendered data plane's init container writes: shared by the
renderer's unit tests and the provisioner's and chart's integration tests."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

import yaml

from trafficsplit.core.gatewayapi.objects import Gateway, parse_gateway
from trafficsplit.core.gatewayapi.parameters import GatewayParameters, parse_gateway_parameters
from trafficsplit.operator.provision import DataplaneSettings, Rendered, parse_settings

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "trafficsplit"
OPERATOR_LABELS = {"app.kubernetes.io/name": "trafficsplit", "app.kubernetes.io/instance": "rel",
                   "app.kubernetes.io/component": "operator"}  # fmt: skip


def settings_doc(namespace: str = "ts-system", **gateway_changes: Any) -> dict[str, Any]:
    """The settings the chart renders (templates/operator-dataplane-configmap.yaml) from its default values."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    gw = copy.deepcopy(values["gateway"])
    for path, value in gateway_changes.items():
        node = gw
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    return {
        "namespace": namespace,
        "gateway": gw,
        "extprocImage": "ghcr.io/trafficsplit/extproc:0.1.0",
        "envoyImage": "envoyproxy/envoy:distroless-v1.40.0",
        "publishPort": values["publish"]["port"],
        "tlsSecret": "rel-publish-tls-gateway",
        "serviceAccount": "rel-gateway",
        "securityContext": values["securityContext"],
        "imagePullSecrets": [],
        "operatorLabels": OPERATOR_LABELS,
        "labels": {"app.kubernetes.io/part-of": "trafficsplit"},
    }


def settings(doc: dict[str, Any] | None = None) -> DataplaneSettings:
    return parse_settings(json.dumps(doc or settings_doc()))


def bootstrap_container(rendered: Rendered) -> dict[str, Any]:
    [init] = rendered.of_kind("Deployment")[0]["spec"]["template"]["spec"]["initContainers"]
    assert init["name"] == "bootstrap"
    return init  # type: ignore[no-any-return]


def printed_bootstrap(rendered: Rendered, out: Path) -> dict[str, Any]:
    """The bootstrap a provisioned pod's Envoy reads: its init container's arguments run by the extproc's entry point
    (in this process), the file written to `out` instead of the pod's emptyDir."""
    from trafficsplit.extproc.__main__ import main

    args = [
        f"--bootstrap-out={out}" if a.startswith("--bootstrap-out=") else a
        for a in bootstrap_container(rendered)["args"]
    ]
    assert main(args) == 0
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def gateway(*ports: int, name: str = "web", namespace: str = "shop", uid: str | None = None) -> Gateway:
    """A Gateway body as the API server returns it; its uid, unless given, is one per namespace/name."""
    listeners = [{"name": f"l{i}", "port": p, "protocol": "HTTP"} for i, p in enumerate(ports or (80,))]
    uid = uid or str(uuid.uuid5(uuid.NAMESPACE_URL, f"gateway/{namespace}/{name}"))
    body = {"metadata": {"name": name, "namespace": namespace, "uid": uid}, "spec": {"gatewayClassName": "trafficsplit",
            "listeners": listeners}}  # fmt: skip
    return parse_gateway(body)


def params(spec: dict[str, Any]) -> GatewayParameters:
    return parse_gateway_parameters({"metadata": {"name": "p"}, "spec": spec})
