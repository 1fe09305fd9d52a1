"""Header-keyed stickiness (sticky.header) through two real gateway replicas: a request carrying the key header lands
on the backend and pod the core predicts for that value, the same on both replicas, and gets no cookie."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.dataplane import Connection, Dataplane, NameBackends, split_doc
from tests.support.decided import ROUNDS, by_processor

pytestmark = [pytest.mark.envoy]

HOST = "api.example"
PODS = {"stable": ["pod-a", "pod-b"], "canary": ["pod-c", "fresh"]}


@pytest.fixture
def two_replicas(name_backends: NameBackends) -> Iterator[tuple[Dataplane, Dataplane]]:
    token = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="ts-a-") as a, tempfile.TemporaryDirectory(prefix="ts-b-") as b:
        first = Dataplane.start(Path(a), name_backends, token=token, replica="gateway-a")
        try:
            second = Dataplane.start(Path(b), name_backends, token=token, replica="gateway-b")
            try:
                yield first, second
            finally:
                with contextlib.suppress(Exception):
                    second.stop()
        finally:
            with contextlib.suppress(Exception):
                first.stop()


async def _ask(port: int, users: list[str]) -> list[tuple[str, str | None, str | None]]:
    """Per user: (pod that answered, Set-Cookie, decision header), one request each on one keep-alive connection."""
    conn = Connection(port)
    try:
        out = []
        for u in users:
            for _ in range(ROUNDS):  # a request Envoy failed open (a loaded machine) is asked again
                r = await conn.request(HOST, headers=[("x-user-id", u)])
                if by_processor(r):
                    break
            assert by_processor(r), r
            out.append((r.backend, r.header("set-cookie"), r.header("x-trafficsplit-decision")))
        return out
    finally:
        conn.close()


def test_header_keyed_requests_land_on_one_backend_and_pod_across_replicas_without_a_cookie(
    two_replicas: tuple[Dataplane, Dataplane],
) -> None:
    spec = split_doc(HOST, {"stable": 60, "canary": 40}, sticky=True, endpoint_affinity=True)
    spec["sticky"]["header"] = {"name": "x-user-id"}
    a, b = two_replicas
    gen, _ = a.publish([spec], endpoints=PODS)
    b.publish([spec], endpoints=PODS, number=gen.number)
    users = [f"user-{i}" for i in range(400)]
    seen_a = asyncio.run(_ask(a.port, users))
    seen_b = asyncio.run(_ask(b.port, users))

    split = gen.splits[0]
    by_host = {f"{h}:{p}": n for n in ("pod-a", "pod-b", "pod-c", "fresh") for h, p in [a.backends.endpoint(n)]}
    for u, (pod_a, cookie_a, decision_a), (pod_b, cookie_b, _) in zip(users, seen_a, seen_b, strict=True):
        backend = split.weights.pick(u)
        i = split.weights.names.index(backend)
        ring = split.rings[i]
        assert ring is not None
        assert pod_a == pod_b, u  # the same pod on both replicas
        assert pod_a == by_host[ring.owner(u)], (u, pod_a, backend)  # the core's branch and pod for that value
        assert cookie_a is None and cookie_b is None  # keyed by header: no cookie minted
        assert decision_a is not None and "key=header" in decision_a, decision_a
    # Both branches and all four pods are used (the test can tell a pinned pod from a fixed one).
    assert {p for p, _, _ in seen_a} == {"pod-a", "pod-b", "pod-c", "fresh"}

    # Without the header the cookie keys the request, as before: minted once, then kept.
    r = a.get(HOST)
    assert r.cookie("ts") is not None and "key=minted" in (r.header("x-trafficsplit-decision") or "")
