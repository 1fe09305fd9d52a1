"""HTTPRoute's CORS filter served by real Envoy (wire/gateway_routes.py `cors_policy`, the listener's CORS filter
ahead of ext_proc): a preflight from an allowed origin (exact or `https://*.` pattern) is answered by Envoy with the
policy and never reaches a backend, one from another origin gets no allow-origin and is not forwarded either; an
actual request from an allowed origin gets allow-origin, credentials and the exposed headers on the backend's answer,
on a rule the processor splits as on a native one; with `*` methods and headers Envoy echoes what a credentialed
preflight asked for (the Fetch spec allows no `*` with credentials); a rule without the filter passes a preflight
to its backend untouched."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.dataplane import Connection, NameBackends, Response, name_backends  # noqa: F401
from tests.support.gatewayplane import GatewayPlane

pytestmark = [pytest.mark.envoy]

HOST = "shop.example"
LISTENERS = [{"name": "http", "port": 80, "protocol": "HTTP"}]
SITE = "https://www.shop.example"
LONG_ORIGIN = f"https://*.{'a' * 200}.example"
ROUTES = [
    {
        "metadata": {"name": "shop", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1},
        "spec": {
            "parentRefs": [{"name": "gw", "sectionName": "http"}],
            "hostnames": [HOST],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                    "filters": [
                        {
                            "type": "CORS",
                            "cors": {
                                "allowOrigins": [SITE, "https://*.partner.example"],
                                "allowMethods": ["GET", "POST"],
                                "allowHeaders": ["x-request-id", "content-type"],
                                "exposeHeaders": ["x-backend"],
                                "allowCredentials": True,
                                "maxAge": 600,
                            },
                        }
                    ],
                    # A split: the processor picks, yet a preflight never reaches it (CORS runs first).
                    "backendRefs": [{"name": "stable", "port": 80, "weight": 1}, {"name": "canary", "port": 80}],
                },
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/open"}}],
                    "filters": [
                        {
                            "type": "CORS",
                            "cors": {
                                "allowOrigins": ["*"],
                                "allowMethods": ["*"],
                                "allowHeaders": ["*"],
                                "allowCredentials": True,
                            },
                        }
                    ],
                    "backendRefs": [{"name": "blue", "port": 80}],
                },
                {
                    # An origin pattern whose RE2 is over Envoy's program-size bound: this rule is dropped (with
                    # why), the others served; published, Envoy would refuse the port's whole route configuration.
                    "matches": [{"path": {"type": "PathPrefix", "value": "/long"}}],
                    "filters": [{"type": "CORS", "cors": {"allowOrigins": [LONG_ORIGIN]}}],
                    "backendRefs": [{"name": "blue", "port": 80}],
                },
                {"backendRefs": [{"name": "green", "port": 80}]},
            ],
        },
    }
]


@pytest.fixture(scope="module")
def plane(name_backends: NameBackends) -> Iterator[GatewayPlane]:  # noqa: F811
    with tempfile.TemporaryDirectory(prefix="ts-gwcors-") as d:
        gp = GatewayPlane.start(Path(d), name_backends, [80])
        try:
            gen = gp.publish(LISTENERS, ROUTES)
            assert gen.routes is not None and len(gen.routes.actions) == 3  # the /long rule dropped
            yield gp
        finally:
            gp.stop()


def _ask(plane: GatewayPlane, path: str, headers: Sequence[tuple[str, str]], method: str = "GET") -> Response:
    async def go() -> Response:
        conn = Connection(plane.ports[80])
        try:
            return await conn.request(HOST, path, headers, method=method)
        finally:
            conn.close()

    return asyncio.run(go())


def _preflight(plane: GatewayPlane, path: str, origin: str, method: str = "POST", headers: str = "") -> Response:
    asked = [("origin", origin), ("access-control-request-method", method)]
    if headers:
        asked.append(("access-control-request-headers", headers))
    return _ask(plane, path, asked, method="OPTIONS")


def _cors(r: Response) -> dict[str, Any]:
    return {k: v for k, v in r.headers if k.startswith("access-control-")}


@pytest.mark.parametrize("origin", [SITE, "https://shop.partner.example", "https://a.b.partner.example"])
def test_a_preflight_from_an_allowed_origin_is_answered_by_envoy(plane: GatewayPlane, origin: str) -> None:
    r = _preflight(plane, "/api/cart", origin, headers="content-type")
    print(f"\npreflight from {origin}: {r.status} {_cors(r)}")
    assert r.status == 200 and r.header("x-backend") is None  # no backend (and no processor) saw it
    assert _cors(r) == {
        "access-control-allow-origin": origin,
        "access-control-allow-methods": "GET, POST",
        "access-control-allow-headers": "x-request-id, content-type",
        "access-control-max-age": "600",
        "access-control-allow-credentials": "true",
        "access-control-expose-headers": "x-backend",
    }


@pytest.mark.parametrize("origin", ["https://evil.example", "https://partner.example", "http://www.shop.example"])
def test_a_preflight_from_another_origin_gets_no_allow_origin_and_is_not_forwarded(
    plane: GatewayPlane, origin: str
) -> None:
    r = _preflight(plane, "/api/cart", origin)
    print(f"\npreflight from {origin}: {r.status} {_cors(r)} x-backend={r.header('x-backend')}")
    # Without Access-Control-Allow-Origin the browser refuses the request (Envoy still lists the policy's methods).
    assert "access-control-allow-origin" not in _cors(r) and r.header("x-backend") is None


def test_a_request_from_an_allowed_origin_gets_the_headers_on_the_backends_answer(plane: GatewayPlane) -> None:
    seen = set()
    for i in range(20):  # a 1:1 split: both backends answer, each with the policy's headers
        r = _ask(plane, f"/api/{i}", [("origin", SITE)])
        assert r.status == 200, r
        seen.add(r.header("x-backend"))
        assert _cors(r) == {
            "access-control-allow-origin": SITE,
            "access-control-allow-credentials": "true",
            "access-control-expose-headers": "x-backend",
        }
    assert seen == {"stable", "canary"}
    other = _ask(plane, "/api/x", [("origin", "https://evil.example")])
    assert other.status == 200 and _cors(other) == {}  # served, but a browser will not let the page read it


def test_with_wildcards_a_credentialed_preflight_gets_what_it_asked_echoed(plane: GatewayPlane) -> None:
    r = _preflight(plane, "/open/x", "https://anyone.example", method="PATCH", headers="x-custom, x-other")
    print(f"\nwildcard preflight: {r.status} {_cors(r)}")
    assert r.status == 200 and r.header("x-backend") is None
    got = _cors(r)
    assert got["access-control-allow-origin"] == "https://anyone.example"
    assert got["access-control-allow-credentials"] == "true"
    assert got["access-control-allow-methods"] in ("PATCH", "*") and "x-custom" in got["access-control-allow-headers"]
    assert got["access-control-max-age"] == "5"  # the CRD's default


def test_a_rule_without_cors_passes_the_preflight_to_its_backend(plane: GatewayPlane) -> None:
    r = _preflight(plane, "/other", SITE)
    assert r.status == 200 and r.header("x-backend") == "green" and _cors(r) == {}


def test_a_policy_envoy_would_refuse_drops_its_rule_alone_and_says_why(plane: GatewayPlane) -> None:
    assert plane.translation is not None
    (status,) = [r for r in plane.translation.routes if r.route == "ns/shop"]
    message = " ".join(c.message for p in status.parents for c in p.conditions)
    assert "rules[2].filters[0].cors.allowOrigins[0]: RE2 program size" in message, message
    # /long is the catch-all rule's now, with no policy; the other rules' policies are served (the tests above).
    r = _preflight(plane, "/long/x", "https://x." + "a" * 200 + ".example")
    assert r.header("x-backend") == "green" and _cors(r) == {}
