"""The pinned helm works against the test control plane: the operator's chart is installed this way later."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.k8s


def test_helm_reports_the_pinned_version(kube: ControlPlane) -> None:
    out = kube.helm("version", "--short").stdout.strip()
    assert out.startswith(kube.helm_version + "+") or out == kube.helm_version, out


def test_helm_install_of_a_trivial_chart(kube: ControlPlane, namespace: str, tmp_path: Path) -> None:
    chart = tmp_path / "hello"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: hello\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("greeting: hi\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\n"
        "data:\n  greeting: {{ .Values.greeting | quote }}\n"
    )

    kube.helm("install", "rel", str(chart), "-n", namespace, "--set", "greeting=hello-from-helm", "--wait")

    cm = json.loads(kube.kubectl("get", "configmap", "rel-cm", "-n", namespace, "-o", "json").stdout)
    assert cm["data"] == {"greeting": "hello-from-helm"}
    status = json.loads(kube.helm("status", "rel", "-n", namespace, "-o", "json").stdout)
    assert status["info"]["status"] == "deployed"
