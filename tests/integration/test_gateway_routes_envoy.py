"""The rule real Envoy chose against the model's `select`, request by request (the Envoy routes compiled by
wire/gateway_routes.py, the reference table of core/decide/serve.py).

One route set with what the precedence order has to get right: listeners sharing a port (an exact hostname and a
`*.` one), overlapping exact and wildcard route hostnames, hostless routes, Exact before PathPrefix, whole-segment
prefixes, RE2 paths, header (exact and RE2), query and method matches, creation-time ties, a redirect and a rule with
no backend; every combination of a set of hosts, paths, methods, headers and queries is sent on both ports, and the
access log's `route` (the name of the route Envoy took, which carries the rule and match index) must be the entry
`ServedRoutes.select` gives, or `no-route` where it gives none.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.dataplane import Connection, NameBackends, name_backends  # noqa: F401
from tests.support.gatewayplane import GatewayPlane
from trafficsplit.core.decide.request import Request
from trafficsplit.core.decide.serve import ServedRoutes

pytestmark = [pytest.mark.envoy]

LISTENERS = [
    {"name": "exact", "port": 80, "protocol": "HTTP", "hostname": "a.example.com"},
    {"name": "wild", "port": 80, "protocol": "HTTP", "hostname": "*.example.com"},
    {"name": "any", "port": 8081, "protocol": "HTTP"},
]


def ref(name: str, weight: int = 1) -> dict[str, Any]:
    return {"name": name, "port": 80, "weight": weight}


def route(
    name: str, section: str, rules: list[dict[str, Any]], hostnames: tuple[str, ...] = (), created: str = "1"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"parentRefs": [{"name": "gw", "sectionName": section}], "rules": rules}
    if hostnames:
        spec["hostnames"] = list(hostnames)
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "creationTimestamp": f"2026-01-0{created}T00:00:00Z",
            "generation": 1,
        },
        "spec": spec,
    }


def prefix(value: str, **more: Any) -> dict[str, Any]:
    return {"path": {"type": "PathPrefix", "value": value}, **more}


ROUTES = [
    route(
        "exact",
        "exact",
        [
            {"matches": [{"path": {"type": "Exact", "value": "/x"}}], "backendRefs": [ref("stable")]},
            {"matches": [prefix("/api")], "backendRefs": [ref("stable", 90), ref("canary", 10)]},
            {
                "matches": [{"path": {"type": "RegularExpression", "value": "/v[0-9]+/.*"}, "method": "POST"}],
                "backendRefs": [ref("blue")],
            },
            {"matches": [prefix("/", headers=[{"name": "x-env", "value": "prod"}])], "backendRefs": [ref("green")]},
            {"matches": [prefix("/q", queryParams=[{"name": "q", "value": "1"}])], "backendRefs": [ref("fresh")]},
            {
                "matches": [prefix("/old")],
                "filters": [{"type": "RequestRedirect", "requestRedirect": {"hostname": "new.example.com"}}],
            },
            {"matches": [prefix("/broken")], "backendRefs": [{"name": "missing", "port": 80}]},
        ],
        ("a.example.com",),
    ),
    route(
        "wild",
        "wild",
        [
            {"matches": [prefix("/")], "backendRefs": [ref("canary")]},
            {
                "matches": [prefix("/api", headers=[{"type": "RegularExpression", "name": "x-v", "value": "b.*"}])],
                "backendRefs": [ref("blue")],
            },
        ],
    ),
    route("deep", "wild", [{"matches": [prefix("/api/")], "backendRefs": [ref("fresh")]}], ("*.b.example.com",)),
    route(
        "any-wild",
        "any",
        [{"matches": [prefix("/w")], "backendRefs": [ref("stable")]}],
        ("*.wild.test", "exact.wild.test"),
    ),
    route(
        "any-old",
        "any",
        [{"matches": [prefix("/"), {"path": {"type": "Exact", "value": "/"}}], "backendRefs": [ref("blue")]}],
        created="1",
    ),
    route("any-new", "any", [{"matches": [prefix("/other")], "backendRefs": [ref("green")]}], created="2"),
]

HOSTS = [
    "a.example.com",
    "A.Example.com:80",
    "b.example.com",
    "x.b.example.com",
    "exact.wild.test",
    "q.wild.test",
    "wild.test",
    "none.test",
]
PATHS = [
    "/",
    "/x",
    "/x/",
    "/api",
    "/api/v1",
    "/apix",
    "/v1/a",
    "/q",
    "/q/z",
    "/old/p",
    "/broken",
    "/other/1",
    "/w",
    "/wx",
]
METHODS = ["GET", "POST"]
HEADERS: list[list[tuple[str, str]]] = [[], [("x-env", "prod")], [("x-v", "beta")]]
QUERIES = ["", "?q=1", "?q=2"]
NAME = re.compile(r"^[a-z-]+:(?P<rule>[a-z0-9-]+/[a-z0-9.-]+\.rule-\d+):(?P<match>\d+)(?::.*)?$")


@pytest.fixture
def plane(name_backends: NameBackends) -> Iterator[GatewayPlane]:  # noqa: F811
    with tempfile.TemporaryDirectory(prefix="ts-gwroutes-") as d:
        gp = GatewayPlane.start(Path(d), name_backends, [80, 8081])
        try:
            yield gp
        finally:
            gp.stop()


def chosen(name: str) -> str:
    """`<rule key>:<match index>` of a route name, or the name (no-route)."""
    m = NAME.match(name)
    return name if m is None else f"{m['rule']}:{m['match']}"


async def _send(port: int, jobs: list[tuple[str, str, str, list[tuple[str, str]]]]) -> None:
    todo = iter(jobs)

    async def worker() -> None:
        conn = Connection(port)
        try:
            for host, path, method, headers in todo:
                await conn.request(host, path, headers, method=method)
        finally:
            conn.close()

    await asyncio.gather(*(worker() for _ in range(16)))


def test_envoy_chooses_the_rule_the_model_selects(plane: GatewayPlane) -> None:
    gen = plane.publish(LISTENERS, ROUTES)
    assert gen.routes is not None
    model = ServedRoutes(gen.routes.listeners, gen.routes.actions)
    expected: dict[str, str] = {}
    jobs: dict[int, list[tuple[str, str, str, list[tuple[str, str]]]]] = {80: [], 8081: []}
    for n, (port, host, path, method, headers, query) in enumerate(
        itertools.product((80, 8081), HOSTS, PATHS, METHODS, HEADERS, QUERIES)
    ):
        target = f"{path}{query}{'&' if query else '?'}n={n}"  # `n`: which request an access log line is
        hs = {":authority": host, ":path": target, ":method": method, **dict(headers)}
        met = model.select(port, Request(authority=host, cookie_lines=(), request_id="", headers=hs))
        expected[f"n={n}"] = "no-route" if met is None else f"{met[0].rule_key}:{met[0].match_index}"
        jobs[port].append((host, target, method, headers))
    for port, js in jobs.items():
        asyncio.run(_send(plane.ports[port], js))
    got: dict[str, str] = {}
    deadline = time.monotonic() + 20
    while len(got) < len(expected) and time.monotonic() < deadline:
        text = plane.envoy.access_log_path.read_text()
        for line in text.splitlines():
            entry = json.loads(line)
            n = entry["request_path"].rsplit("n=", 1)[-1]
            got[f"n={n}"] = chosen(entry["route"])
        time.sleep(0.2)
    assert set(got) == set(expected)
    disagree = {k: (expected[k], got[k]) for k in expected if expected[k] != got[k]}
    served = sum(v != "no-route" for v in expected.values())
    distinct = len(set(expected.values()))
    print(f"\n{len(expected)} requests ({served} to a rule, {distinct} answers): {len(disagree)} disagreements")
    assert not disagree, sorted(disagree.items())[:20]
