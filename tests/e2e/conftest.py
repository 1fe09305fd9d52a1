"""Fixtures of the end-to-end tier. One session cluster: kind when tests/e2e/run-kind.sh prepared one
(TRAFFICSPLIT_E2E_KUBECONFIG is set), otherwise the local node this machine runs (tests/support/localnode.py), which
needs Linux and root; anywhere else the tier is skipped with that reason. On a root Linux machine a node that fails to
start is an error, never a skip.

The chart is installed the way docs/helm.md says, once per session (``release``), and the example backends and split
are applied from examples/kubernetes/ (``shop``); the tests then work against that installation, in file order
(test_1_install … test_6_upgrade_uninstall: the last one uninstalls).
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.cluster import CHART, EXAMPLES, KUBECONFIG_ENV, Cluster, published, wait_for

PSA_LABEL = "pod-security.kubernetes.io/enforce"
BACKEND_REPLICAS = 3


def _file_number(item: pytest.Item) -> int:
    m = re.match(r"test_(\d+)_", item.path.name)
    return int(m.group(1)) if m else 0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tier's files run in their number's order, test_10 after test_9 (pytest collects by name: test_10 before
    test_2). test_1 installs the chart as docs/helm.md says; a file that ran first would have installed it with values
    of its own. The hook sees the whole session's items: only this tier's are reordered, in the places they hold."""
    here = Path(__file__).parent
    at = [i for i, item in enumerate(items) if here in item.path.parents]
    for i, item in zip(at, sorted((items[i] for i in at), key=_file_number), strict=True):
        items[i] = item  # sorted() is stable: within a file, definition order


def _kind_cluster(kubeconfig: str) -> Cluster:
    tag = os.environ.get("TRAFFICSPLIT_E2E_IMAGE_TAG", "e2e")
    gateway = os.environ.get("TRAFFICSPLIT_E2E_GATEWAY", "127.0.0.1:30080")
    host, _, port = gateway.rpartition(":")
    return Cluster(
        name="kind",
        kubeconfig=Path(kubeconfig),
        helm_bin=os.environ.get("HELM", "helm"),
        kubectl_bin=os.environ.get("KUBECTL", "kubectl"),
        images={n: (f"localhost/trafficsplit/{n}", tag) for n in ("operator", "extproc", "echo")},
        helm_home=Path(tempfile.mkdtemp(prefix="trafficsplit-e2e-helm-")),
        # kind maps the node's port 30080 to the host (tests/e2e/kind-config.yaml).
        extra_values=("--set", "gateway.service.type=NodePort", "--set", f"gateway.service.nodePort={port}"),
        gateway_url=(host, int(port)),
    )


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    kubeconfig = os.environ.get(KUBECONFIG_ENV)
    if kubeconfig:
        yield _kind_cluster(kubeconfig)
        return
    from tests.support.localnode import local_node, unavailable_reason

    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    session = request.session

    def failed() -> bool:
        return bool(session.testsfailed)

    t0 = time.monotonic()
    with local_node(keep_logs=failed) as node:
        cl = Cluster(
            name="local node",
            kubeconfig=node.kubeconfig,
            helm_bin=str(node.cp.helm_bin),
            kubectl_bin=str(node.cp.kubectl_bin),
            images={
                n: (node.images.repository(n), node.images.tag)
                for n in ("operator", "extproc", "envoy", "echo", "flagger", "argo-rollouts", "prometheus")
            },
            helm_home=node.work / "helm",
            containerd_sock=node.containerd_sock,
        )
        cl.timings["node_ready_s"] = node.started_seconds
        cl.timings["build_and_ready_s"] = time.monotonic() - t0
        print(f"\nlocal node Ready in {node.started_seconds:.1f}s ({time.monotonic() - t0:.1f}s with builds)")
        yield cl


@pytest.fixture(scope="session")
def release(cluster: Cluster) -> Cluster:
    """The chart, installed as docs/helm.md says, into a namespace that enforces the restricted Pod Security
    Standard; only image overrides (plus, on kind, the NodePort that kind maps to the host)."""
    ns = cluster.release_namespace
    if cluster.kubectl("get", "namespace", ns, check=False).returncode != 0:
        cluster.kubectl("create", "namespace", ns)
    cluster.kubectl("label", "namespace", ns, f"{PSA_LABEL}=restricted", "--overwrite")
    if cluster.helm("status", cluster.release, "-n", ns, check=False).returncode != 0:
        t0 = time.monotonic()
        cluster.helm(
            "install", cluster.release, str(CHART), "-n", ns,
            *cluster.image_values(), *cluster.extra_values,
            "--wait", "--timeout", "6m",
        )  # fmt: skip
        cluster.timings["helm_install_s"] = time.monotonic() - t0
    return cluster


def example_manifests(cluster: Cluster) -> str:
    """examples/kubernetes/*.yaml as kubectl would apply them, with the backends' image pointed at the cluster's echo
    image (the examples name hashicorp/http-echo, which no registry here can serve) and 3 pods per backend."""
    docs: list[dict[str, Any]] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            if doc.get("kind") == "Deployment":
                doc["spec"]["replicas"] = BACKEND_REPLICAS
                for c in doc["spec"]["template"]["spec"]["containers"]:
                    c["image"] = cluster.echo_image()
            docs.append(doc)
    return yaml.safe_dump_all(docs)


@pytest.fixture(scope="session")
def shop(release: Cluster) -> Cluster:
    """`kubectl apply -f examples/kubernetes/` (images swapped, see example_manifests), backends available."""
    cluster = release
    cluster.kubectl("apply", "-f", "-", input=example_manifests(cluster))
    cluster.kubectl(
        "-n", cluster.namespace, "wait", "--for=condition=Available", "deployment", "--all", "--timeout=300s",
        timeout=320,
    )  # fmt: skip
    wait_for("shop Published", lambda: published(cluster, "shop"), timeout=180)
    return cluster


@pytest.fixture
def make_split(shop: Cluster) -> Iterator[Callable[..., tuple[str, str]]]:
    """Create a TrafficSplit over the sample backends with a unique name and host; returns (name, host). Deleted at
    teardown."""
    cluster = shop
    created: list[str] = []

    def make(
        backends: list[tuple[str, int]],
        cookie: str | None = None,
        wait: bool = True,
        endpoint_affinity: bool = False,
    ) -> tuple[str, str]:
        name = f"e2e-{secrets.token_hex(3)}"
        host = f"{name}.e2e.test"
        spec: dict[str, Any] = {
            "hosts": [host],
            "backends": [{"name": b, "service": f"shop-{b}", "port": 80, "weight": w} for b, w in backends],
            "debugHeaders": True,
        }
        if cookie:
            spec["sticky"] = {"cookie": {"name": cookie}, "endpointAffinity": endpoint_affinity}
        doc = {
            "apiVersion": "trafficsplit.dev/v1alpha1",
            "kind": "TrafficSplit",
            "metadata": {"name": name, "namespace": cluster.namespace},
            "spec": spec,
        }
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))
        created.append(name)
        if wait:
            wait_for(f"{name} Published", lambda: published(cluster, name))
            gw = cluster.client()
            # Published means every replica ACKed; Envoy's routes follow within the same publish call.
            wait_for(f"{host} routed", lambda: gw.request(host).status == 200, timeout=30)
        return name, host

    yield make
    for name in created:
        cluster.kubectl("delete", "trafficsplit", name, "-n", cluster.namespace, "--ignore-not-found", check=False)
