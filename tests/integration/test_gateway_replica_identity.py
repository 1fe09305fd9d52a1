"""A provisioned data plane knows its Gateway (`--gateway ns/gw`, as the provisioner passes it): a real extproc
refuses a generation for another Gateway, or one without a route table, and keeps serving what it holds."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.dataplane import NameBackends, name_backends  # noqa: F401
from tests.support.gatewayplane import GATEWAY, NAMESPACE, GatewayPlane
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.generation import generation_to_proto

pytestmark = [pytest.mark.envoy]

LISTENERS = [{"name": "http", "port": 80, "protocol": "HTTP"}]


def _route(backend: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "shop", "namespace": NAMESPACE, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "parentRefs": [{"name": GATEWAY}],
            "hostnames": ["shop.example"],
            "rules": [{"backendRefs": [{"name": backend, "port": 80}]}],
        },
    }


@pytest.fixture
def plane(name_backends: NameBackends) -> Iterator[GatewayPlane]:  # noqa: F811
    with tempfile.TemporaryDirectory(prefix="ts-gwid-") as d:
        gp = GatewayPlane.start(Path(d), name_backends, [80], extra=(f"--gateway={NAMESPACE}/{GATEWAY}",))
        try:
            yield gp
        finally:
            gp.stop()


def test_a_generation_for_another_gateway_is_refused_and_the_held_one_kept(plane: GatewayPlane) -> None:
    plane.publish(LISTENERS, [_route("stable")])
    held = plane.processor.get_held()
    assert held.held_number == plane.number

    other = generation_to_proto(plane.compile(LISTENERS, [_route("canary")]), origin="another-gateways-publisher")
    other.routes.gateway = f"{NAMESPACE}/other"
    reply = plane.processor.publish(other)
    assert reply.result == pb.PublishReply.INVALID, reply
    assert f"this replica serves Gateway {NAMESPACE}/{GATEWAY} only" in reply.message, reply
    after = plane.processor.get_held()
    assert (after.held_number, after.origin) == (held.held_number, held.origin), after

    shared = pb.Generation(number=plane.number + 1, origin="the chart's operator")  # a TrafficSplit generation
    reply = plane.processor.publish(shared)
    assert reply.result == pb.PublishReply.INVALID and "carries no Gateway's routes" in reply.message, reply
    assert plane.processor.get_held().held_number == held.held_number
