"""The release's life after install: `helm upgrade` with a changed value rolls the pods without failing a request,
and `helm uninstall` removes every pod, Service and Secret of the release while the CRD stays (Helm never deletes
what it installed from crds/). Runs last: it uninstalls the session's release."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.e2e.cluster import CHART, Cluster, wait_for
from tests.e2e.load import steady_load

pytestmark = [pytest.mark.e2e]
MakeSplit = Callable[..., tuple[str, str]]


def test_helm_upgrade_with_a_changed_value_rolls_the_pods_without_a_failed_request(
    make_split: MakeSplit, shop: Cluster
) -> None:
    _, host = make_split([("blue", 50), ("canary", 50)])
    selector = f"app.kubernetes.io/instance={shop.release}"
    before = {p["metadata"]["name"] for p in shop.get("pods", "-n", shop.release_namespace, "-l", selector)["items"]}
    with steady_load(shop.client(), host) as load:
        shop.helm(
            "upgrade", shop.release, str(CHART), "-n", shop.release_namespace, "--reuse-values",
            "--set", "gateway.podAnnotations.e2e/upgraded=yes", "--set", "operator.podAnnotations.e2e/upgraded=yes",
            "--wait", "--timeout", "6m",
        )  # fmt: skip
        for component in ("operator", "gateway"):
            shop.kubectl(
                "-n", shop.release_namespace, "rollout", "status", f"deployment/{shop.release}-{component}",
                "--timeout=300s", timeout=320,
            )  # fmt: skip
    after = shop.get("pods", "-n", shop.release_namespace, "-l", selector)["items"]
    running = [p for p in after if not p["metadata"].get("deletionTimestamp")]
    print(f"\nhelm upgrade: {load.summary()}")
    assert not before & {p["metadata"]["name"] for p in running}, "some pods were not replaced"
    assert all(p["metadata"]["annotations"].get("e2e/upgraded") == "yes" for p in running)
    assert load.sent > 100 and load.failed == 0, load.summary()


def test_helm_uninstall_leaves_no_pod_service_or_secret_and_keeps_the_crd(shop: Cluster) -> None:
    shop.helm("uninstall", shop.release, "-n", shop.release_namespace, "--wait", "--timeout", "3m")
    selector = f"app.kubernetes.io/instance={shop.release}"

    def gone() -> bool:
        left = shop.get("pods,services,secrets", "-n", shop.release_namespace, "-l", selector)["items"]
        return not left

    wait_for("the release's pods, Services and Secrets gone", gone, timeout=120)
    # Helm's own release records are Secrets too (owner=helm, name=<release>); none may remain.
    records = shop.get("secrets", "-n", shop.release_namespace, "-l", f"owner=helm,name={shop.release}")["items"]
    assert not records, [s["metadata"]["name"] for s in records]
    shop.kubectl("get", "crd", "trafficsplits.trafficsplit.dev")
    shop.kubectl("get", "trafficsplits", "-n", shop.namespace)
