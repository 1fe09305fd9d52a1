"""A provisioned data plane knows its Gateway (`--gateway ns/gw` and `--gateway-uid`, as the provisioner passes them):
a real extproc refuses a generation for another Gateway, for its Gateway's name under another uid (deleted and created
again), or one without a route table, and keeps serving what it holds."""

from __future__ import annotations

import http.client
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
UID = "5d1c7e2a-0b9f-4c3e-9a51-7f00c0ffee01"


def _route(backend: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "shop", "namespace": NAMESPACE, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "parentRefs": [{"name": GATEWAY}],
            "hostnames": ["shop.example"],
            "rules": [{"backendRefs": [{"name": backend, "port": 80}]}],
        },
    }


def _served_by(plane: GatewayPlane) -> str:
    """The backend (its name is its body) that answers shop.example through the data plane's Envoy."""
    conn = http.client.HTTPConnection("127.0.0.1", plane.ports[80], timeout=10)
    try:
        conn.request("GET", "/", headers={"host": "shop.example"})
        r = conn.getresponse()
        body = r.read().decode()
        assert r.status == 200, (r.status, body)
        return body
    finally:
        conn.close()


@pytest.fixture
def plane(name_backends: NameBackends) -> Iterator[GatewayPlane]:  # noqa: F811
    with tempfile.TemporaryDirectory(prefix="ts-gwid-") as d:
        extra = (f"--gateway={NAMESPACE}/{GATEWAY}", f"--gateway-uid={UID}")
        gp = GatewayPlane.start(Path(d), name_backends, [80], extra=extra)
        gp.uid = UID
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


def test_its_gateways_name_under_another_uid_is_refused_and_its_own_backend_keeps_answering(
    plane: GatewayPlane,
) -> None:
    plane.publish(LISTENERS, [_route("stable")])
    assert _served_by(plane) == "stable"
    held = plane.processor.get_held()

    plane.uid = "0e6a9b11-2222-4c3e-9a51-7f00c0ffee02"  # the Gateway deleted and created again, a new publisher
    successor = generation_to_proto(plane.compile(LISTENERS, [_route("canary")]), origin="its-successors-publisher")
    reply = plane.processor.publish(successor)
    assert reply.result == pb.PublishReply.INVALID, reply
    assert f"this replica serves uid {UID!r} only" in reply.message, reply
    after = plane.processor.get_held()
    assert (after.held_number, after.origin) == (held.held_number, held.origin), after
    assert {_served_by(plane) for _ in range(20)} == {"stable"}
