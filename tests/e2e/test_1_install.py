"""The install, as a user does it: a namespace enforcing the restricted Pod Security Standard, `helm install` of
charts/trafficsplit with only image overrides, and every pod the chart declares running on a real node."""

from __future__ import annotations

import pytest

from tests.e2e.cluster import CHART, Cluster
from tests.e2e.conftest import PSA_LABEL

pytestmark = [pytest.mark.e2e]


def test_helm_install_runs_every_pod_in_a_restricted_namespace(release: Cluster) -> None:
    cluster = release
    ns = cluster.get("namespace", cluster.release_namespace)
    assert ns["metadata"]["labels"].get(PSA_LABEL) == "restricted"
    status = cluster.helm("status", cluster.release, "-n", cluster.release_namespace).stdout
    assert "STATUS: deployed" in status, status

    for component in ("operator", "gateway"):
        dep = cluster.get("deployment", f"{cluster.release}-{component}", "-n", cluster.release_namespace)
        assert dep["status"].get("readyReplicas") == 2, (component, dep["status"])
        pods = cluster.get("pods", "-n", cluster.release_namespace, "-l", f"app.kubernetes.io/component={component}")[
            "items"
        ]
        running = [p for p in pods if p["status"].get("phase") == "Running"]
        assert len(running) == 2, [(p["metadata"]["name"], p["status"].get("phase")) for p in pods]
        for pod in running:
            ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
            assert ready.get("Ready") == "True", (pod["metadata"]["name"], pod["status"])
            # The images are the ones built from this repository, not a registry's.
            images = {c["name"]: c["image"] for c in pod["spec"]["containers"]}
            assert all("trafficsplit" in i or "envoy" in i for i in images.values()), images

    # The CRD from the chart's crds/ is served: the API answers for the kind.
    resources = cluster.kubectl("api-resources", "--api-group=trafficsplit.dev", "-o", "name").stdout.split()
    assert "trafficsplits.trafficsplit.dev" in resources, resources
    cluster.kubectl("get", "trafficsplits", "-A")


def test_the_chart_declares_no_helm_tests() -> None:
    """`helm test` would run the chart's test hooks; the chart has none (templates/tests is absent), so there is
    nothing for it to run. This fails when some are added, so that this tier starts running them."""
    assert not (CHART / "templates" / "tests").exists()
