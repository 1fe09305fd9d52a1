"""Hostile input through a real Envoy: header injection via configured values, hostile Host headers, bad publishes.

The publishes here are built by the core and then altered on the wire, as a token holder (or a bug in an operator)
could send them; the processor must refuse them before Envoy sees anything, and what Envoy answers clients must
never carry a header a configured value smuggled in.
"""

from __future__ import annotations

import time

import pytest

from tests.support.dataplane import Dataplane, Response, split_doc
from trafficsplit.v1alpha1 import publish_pb2 as pb

pytestmark = [pytest.mark.envoy]

HOST = "shop.example"
INJECTED = "x-injected"


def _served(r: Response) -> tuple[int, str]:
    return (r.status, r.backend if r.status == 200 else "")


def _no_injected_header(r: Response) -> None:
    assert r.header(INJECTED) is None, r.headers
    for name, value in r.headers:
        assert INJECTED not in name and INJECTED not in value, r.headers


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("cookie.path", "/\r\nx-injected: 1"),
        ("cookie.domain", "example\r\nx-injected: 1"),
        ("namespace", "default\r\nx-injected: 1"),
        ("name", "split-0\r\nx-injected: 1"),
    ],
)
def test_a_crlf_in_a_configured_value_never_reaches_a_response(dataplane: Dataplane, field: str, value: str) -> None:
    doc = split_doc(HOST, {"stable": 50, "canary": 50}, sticky=True)
    dataplane.publish([doc])
    _, msg = dataplane.generation([doc])
    target: object = msg.splits[0]
    *parents, leaf = field.split(".")
    for part in parents:
        target = getattr(target, part)
    setattr(target, leaf, value)
    split = msg.splits[0]
    for b in split.backends:  # as the operator names clusters: a bad namespace or name reaches the routing header
        b.cluster = f"{split.namespace}/{split.name}/{b.name}"
    reply = dataplane.processor.publish(msg)
    assert (reply.result, reply.held_number) == (pb.PublishReply.INVALID, dataplane.number), reply
    for _ in range(5):
        r = dataplane.get(HOST)
        assert r.status == 200 and r.backend in ("stable", "canary"), r
        assert r.cookie("ts") is not None
        _no_injected_header(r)


def test_reserved_and_oversized_clusters_are_refused_at_once(dataplane: Dataplane) -> None:
    doc = split_doc(HOST, {"stable": 100, "canary": 0})
    dataplane.publish([doc])
    for cluster in ("trafficsplit_extproc", "trafficsplit_ads", "c" * 100_000):
        _, msg = dataplane.generation([doc])
        msg.splits[0].backends[0].cluster = cluster
        started = time.monotonic()
        reply = dataplane.processor.publish(msg)
        elapsed = time.monotonic() - started
        assert reply.result == pb.PublishReply.INVALID, reply
        assert "not applied to Envoy" not in reply.message  # refused by the receiver, not by an ACK timeout
        assert elapsed < 2, elapsed  # the ACK timeout (5 s) was never waited for
    assert {dataplane.get(HOST).backend for _ in range(5)} == {"stable"}


# (authority, what serves it): exact host "shop.localhost" → stable, wildcard "*.wild.test" → canary.
AUTHORITIES = [
    ("shop.localhost", "stable"),
    ("SHOP.Localhost:8080", "stable"),
    ("shop.localhost:x.wild.test", None),  # the defect: the processor read "shop.localhost", Envoy the wildcard
    ("shop.localhost:80:80", None),
    ("shop.localhost:", None),
    ("shop.localhost:+80", None),
    ("shop.localhost:99999999999", None),
    ("shop.localhost.", None),
    ("a.wild.test", "canary"),
    ("a.b.wild.test:443", "canary"),
    (".wild.test", None),
    ("a.wild.test.", None),
    ("[::1]:80", None),
    ("nobody.example", None),
]


def test_the_host_is_read_the_same_with_the_processor_up_and_down(dataplane: Dataplane) -> None:
    dataplane.publish(
        [
            split_doc("shop.localhost", {"stable": 100}, sticky=True),
            split_doc("*.wild.test", {"canary": 100}, sticky=True),
        ]
    )
    up = {a: dataplane.get(a) for a, _ in AUTHORITIES}
    dataplane.processor.kill()
    down = {a: dataplane.get(a) for a, _ in AUTHORITIES}
    for authority, expected in AUTHORITIES:
        assert _served(up[authority]) == _served(down[authority]), (authority, up[authority], down[authority])
        if expected is not None:
            assert _served(up[authority]) == (200, expected), authority
        if up[authority].status == 404:
            assert up[authority].all("set-cookie") == [], (authority, up[authority].headers)
            assert down[authority].all("set-cookie") == [], authority
