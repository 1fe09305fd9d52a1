"""The test control plane is a real API server: CRD schema + CEL validation and RBAC are enforced, not faked."""

from __future__ import annotations

import json

import pytest

from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.k8s

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.widgets.example.test
spec:
  group: widgets.example.test
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [size]
              properties:
                size: {type: integer, minimum: 1, maximum: 10}
                min: {type: integer}
                max: {type: integer}
              x-kubernetes-validations:
                - rule: "self.min <= self.max"
                  message: "min must not exceed max"
"""


def widget(name: str, namespace: str, **spec: int) -> str:
    return json.dumps(
        {
            "apiVersion": "widgets.example.test/v1",
            "kind": "Widget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
    )


def test_crd_schema_and_cel_rule_are_enforced(kube: ControlPlane, namespace: str) -> None:
    kube.kubectl("apply", "--server-side", "-f", "-", input=CRD)
    kube.kubectl("wait", "--for=condition=Established", "crd/widgets.widgets.example.test", "--timeout=30s")

    kube.kubectl("create", "-f", "-", input=widget("ok", namespace, size=3, min=1, max=2))
    got = json.loads(kube.kubectl("get", "widget", "ok", "-n", namespace, "-o", "json").stdout)
    assert got["spec"] == {"size": 3, "min": 1, "max": 2}

    cel = kube.kubectl("create", "-f", "-", input=widget("bad-cel", namespace, size=3, min=5, max=2), check=False)
    assert cel.returncode != 0
    assert "min must not exceed max" in cel.stderr

    schema = kube.kubectl("create", "-f", "-", input=widget("bad-size", namespace, size=11, min=1, max=2), check=False)
    assert schema.returncode != 0
    assert "spec.size" in schema.stderr and "10" in schema.stderr

    names = kube.kubectl("get", "widgets", "-n", namespace, "-o", "name").stdout.split()
    assert names == ["widget.widgets.example.test/ok"]


def test_rbac_is_enforced_for_a_service_account(kube: ControlPlane, namespace: str) -> None:
    token = kube.token_for_service_account(namespace, "reader")
    as_sa = kube.kubeconfig_for_token(token, f"{namespace}-reader")

    def can_list() -> str:
        proc = kube.kubectl("auth", "can-i", "list", "configmaps", "-n", namespace, kubeconfig=as_sa, check=False)
        return proc.stdout.strip()

    assert can_list() == "no"
    # Not just the self-review: the real request is refused too.
    denied = kube.kubectl("get", "configmaps", "-n", namespace, kubeconfig=as_sa, check=False)
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower()

    kube.kubectl("create", "role", "cm-reader", "--verb=get,list", "--resource=configmaps", "-n", namespace)
    kube.kubectl(
        "create",
        "rolebinding",
        "cm-reader",
        "--role=cm-reader",
        f"--serviceaccount={namespace}:reader",
        "-n",
        namespace,
    )
    assert can_list() == "yes"
    kube.kubectl("get", "configmaps", "-n", namespace, kubeconfig=as_sa)
    # The grant is namespaced: the same identity still may not list elsewhere.
    other = kube.kubectl("auth", "can-i", "list", "configmaps", "-n", "default", kubeconfig=as_sa, check=False)
    assert other.stdout.strip() == "no"


def test_python_client_accepts_the_kubeconfig(kube: ControlPlane, namespace: str) -> None:
    from kubernetes import client

    with kube.api_client() as api:
        names = [ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items]
        version = client.VersionApi(api).get_code()
    assert namespace in names
    assert version.git_version == kube.kube_version
