"""Dataplane discovery through the gateway publish Service's EndpointSlices, as the chart deploys it.

The API server refuses loopback addresses in EndpointSlices, so the two dataplane units' publish APIs listen on the
host end of a test pod's veth (a real non-loopback address in the root namespace), and the test writes the
EndpointSlices a controller-manager would write for two gateway pods.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.support.controlplane import ControlPlane
from tests.support.dataplane import NameBackends
from tests.support.netns import TestPods
from tests.support.operator import (
    Gateway,
    Operators,
    apply,
    operator_kubeconfig,
    routable_gateway,
    service_with_slice,
    ts_manifest,
    wait_condition,
)

pytestmark = [pytest.mark.k8s, pytest.mark.envoy, pytest.mark.netns, pytest.mark.slow]


@pytest.fixture
def routed_gateway(name_backends: NameBackends, testpods: TestPods) -> Iterator[tuple[Gateway, TestPods]]:
    with routable_gateway(name_backends, testpods, n=2) as gw:
        yield gw, testpods


def publish_slices(namespace: str, gw: Gateway, units: list[int]) -> str:
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "gw-publish", "namespace": namespace},
            "spec": {"clusterIP": "None", "ports": [{"name": "publish", "port": 9100}]},
        }
    ]
    for i in units:
        docs.append(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"gw-publish-{i}",
                    "namespace": namespace,
                    "labels": {"kubernetes.io/service-name": "gw-publish"},
                },
                "addressType": "IPv4",
                # Each unit listens on its own port, so each gets its own slice (a slice has one port list).
                "ports": [{"name": "publish", "port": gw.units[i].processor.ports["publish"], "protocol": "TCP"}],
                "endpoints": [
                    {
                        "addresses": [gw.publish_host],
                        "conditions": {"ready": True},
                        "targetRef": {"kind": "Pod", "name": f"gateway-pod-{i}", "namespace": namespace},
                    }
                ],
            }
        )
    return yaml.safe_dump_all(docs)


def test_replicas_are_found_through_the_gateway_endpointslices(
    trafficsplit_crd: ControlPlane, namespace: str, routed_gateway: tuple[Gateway, TestPods], operators: Operators
) -> None:
    kube = trafficsplit_crd
    gw, testpods = routed_gateway
    blue = testpods.start("blue")
    service_with_slice(kube, namespace, "shop-blue", [blue.ip], target_port=blue.port)
    apply(kube, publish_slices(namespace, gw, [0, 1]))
    release = "d" + namespace.split("-")[0]
    kubeconfig = operator_kubeconfig(kube, namespace, release)
    operators.start(
        kubeconfig,
        # Cluster-wide (the chart's default, watchNamespaces empty): every namespace's splits, one generation.
        args=[
            f"--token-file={gw.token_file}",
            "--gateway-service=gw-publish",
            f"--gateway-namespace={namespace}",
            "--publish-port-name=publish",
        ],
        lease_namespace=namespace,
    )
    spec: dict[str, Any] = {
        "hosts": [f"{namespace}.example"],  # cluster-wide: other tests' splits hold shop.example
        "backends": [{"name": "blue", "service": "shop-blue", "weight": 1}],
    }
    apply(kube, ts_manifest(namespace, "shop", spec))
    obj = wait_condition(kube, namespace, "shop", "Published", "True", r"^2/2 dataplanes$", timeout=60)
    assert gw.held() == [obj["status"]["generation"]] * 2
    # A gateway pod goes away (its slice is deleted): the operator stops counting it.
    kube.kubectl("delete", "endpointslice", "gw-publish-1", "-n", namespace)
    spec["backends"][0]["weight"] = 2
    apply(kube, ts_manifest(namespace, "shop", spec))
    wait_condition(kube, namespace, "shop", "Published", "True", r"^1/1 dataplanes$", timeout=30, generation=2)
    # It comes back holding an older generation: it is republished and counted again.
    apply(kube, publish_slices(namespace, gw, [0, 1]))
    wait_condition(kube, namespace, "shop", "Published", "True", r"^2/2 dataplanes$", timeout=30)
    assert len(set(gw.held())) == 1
