"""Fixtures for the kind tier (helpers in tests/e2e/kind.py). Every fixture skips without a prepared cluster."""

from __future__ import annotations

import os
import secrets
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from tests.e2e.kind import KUBECONFIG_ENV, SKIP_REASON, Cluster, published, wait_for


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    kubeconfig = os.environ.get(KUBECONFIG_ENV)
    if not kubeconfig:
        pytest.skip(SKIP_REASON)
    return Cluster(
        kubeconfig=kubeconfig,
        gateway=urllib.parse.urlsplit(os.environ.get("TRAFFICSPLIT_E2E_GATEWAY_URL", "http://127.0.0.1:30080")),
        namespace=os.environ.get("TRAFFICSPLIT_E2E_NAMESPACE", "shop"),
        release=os.environ.get("TRAFFICSPLIT_E2E_RELEASE", "ts"),
        release_namespace=os.environ.get("TRAFFICSPLIT_E2E_RELEASE_NAMESPACE", "trafficsplit-system"),
    )


@pytest.fixture
def make_split(cluster: Cluster) -> Iterator[Callable[..., tuple[str, str]]]:
    """Create a TrafficSplit over the sample backends with a unique name and host; returns (name, host). Deleted at
    teardown."""
    created: list[str] = []

    def make(backends: list[tuple[str, int]], cookie: str | None = None, wait: bool = True) -> tuple[str, str]:
        name = f"e2e-{secrets.token_hex(3)}"
        host = f"{name}.e2e.test"
        spec: dict[str, Any] = {
            "hosts": [host],
            "backends": [{"name": b, "service": f"shop-{b}", "port": 80, "weight": w} for b, w in backends],
        }
        if cookie:
            spec["sticky"] = {"cookie": {"name": cookie}}
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
            # Published means every replica ACKed; Envoy's routes follow within the same publish call.
            wait_for(f"{host} routed", lambda: cluster.request(host).status == 200, timeout=30)
        return name, host

    yield make
    for name in created:
        cluster.kubectl("delete", "trafficsplit", name, "-n", cluster.namespace, "--ignore-not-found", check=False)
