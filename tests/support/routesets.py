"""Generated Gateway API route sets and requests, and the rule the model says each request meets.

The differential test (tests/integration/test_route_differential.py) compiles each route set to Envoy's routes and
compares the rule real Envoy chose with `RouteTable.select`, the model's reference. The generator aims at the places
where two matchers disagree: overlapping hostnames and wildcards (on the routes and on listeners sharing a port),
precedence ties (equal creation times, so the order falls to namespace/name, then rule and match order), path
prefixes that are and are not whole segments, regular expressions, header and query conditions, methods.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from tests.unit.gatewayapi import inputs_of
from trafficsplit.core.decide.match import RouteTable
from trafficsplit.core.gatewayapi.translate import gateway_content, translate
from trafficsplit.core.model.generation import GenerationContent
from trafficsplit.core.model.routes import GatewayRoutes, RouteEntry

NAMESPACE = "app"
GATEWAY = f"{NAMESPACE}/gw"
PORT = 80
SERVICES = ("one", "two")

LISTENER_HOSTNAMES = (None, "*.example.com", "a.example.com")
ROUTE_HOSTNAMES = ("a.example.com", "b.example.com", "*.example.com", "x.a.example.com", "*.a.example.com")
REQUEST_HOSTS = (
    "a.example.com",
    "A.Example.COM:80",
    "b.example.com",
    "x.a.example.com",
    "y.x.a.example.com",
    "c.example.com",
    "example.com",
    "other.test",
)
EXACT_PATHS = ("/", "/a", "/a/b", "/ab")
PREFIX_PATHS = ("/", "/a", "/a/", "/a/b", "/ab")
REGEX_PATHS = ("/a/[0-9]+", "/.*b", "/a.*")
REQUEST_PATHS = ("/", "/a", "/a/", "/a/b", "/a/b/c", "/ab", "/a/12", "/xb", "/b", "/A")
HEADER_NAMES = ("x-env", "x-user")
HEADER_VALUES = ("1", "2", "canary")
HEADER_REGEXES = ("[0-9]", "can.*")
QUERY_NAMES = ("v", "debug")
QUERY_VALUES = ("1", "2")
METHODS = ("GET", "POST")
# Two creation times for five route names: ties are common, so names decide often.
CREATED = ("2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z")
ROUTE_NAMES = ("a", "b", "c", "d", "e")


@dataclass(frozen=True, slots=True)
class Probe:
    """One request: what a client sends."""

    host: str
    path: str
    method: str
    headers: Mapping[str, str]
    query: Mapping[str, str]

    @property
    def target(self) -> str:
        return self.path + ("?" + "&".join(f"{k}={v}" for k, v in self.query.items()) if self.query else "")


@dataclass(frozen=True, slots=True)
class RouteSet:
    bodies: tuple[dict[str, Any], ...]
    probes: tuple[Probe, ...] = field(repr=False)  # a failure names the probe it concerns

    def content(self) -> GenerationContent:
        """What the Gateway's data plane serves, as the operator translates it."""
        inputs, invalid = inputs_of(self.bodies)
        assert not invalid, invalid
        return gateway_content(translate(inputs), GATEWAY)

    def expected(self, routes: GatewayRoutes) -> list[RouteEntry | None]:
        """The entry the model selects for each probe (None: no rule, the spec's 404)."""
        table = RouteTable([lr for lr in routes.listeners if lr.port == PORT])
        return [
            table.select(p.host, p.path, p.method, {k.lower(): v for k, v in p.headers.items()}.get, p.query)
            for p in self.probes
        ]


def _value_match(
    draw: st.DrawFn, names: Sequence[str], values: Sequence[str], regexes: Sequence[str]
) -> dict[str, Any]:
    name = draw(st.sampled_from(names))
    regex: bool = draw(st.booleans())
    if regexes and regex:
        return {"type": "RegularExpression", "name": name, "value": draw(st.sampled_from(regexes))}
    return {"name": name, "value": draw(st.sampled_from(values))}


@st.composite
def _match(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(("Exact", "PathPrefix", "PathPrefix", "RegularExpression")))
    pool = {"Exact": EXACT_PATHS, "PathPrefix": PREFIX_PATHS, "RegularExpression": REGEX_PATHS}[kind]
    match: dict[str, Any] = {"path": {"type": kind, "value": draw(st.sampled_from(pool))}}
    headers = draw(st.lists(st.sampled_from(HEADER_NAMES), max_size=2, unique=True))
    if headers:
        match["headers"] = [_value_match(draw, (h,), HEADER_VALUES, HEADER_REGEXES) for h in headers]
    query = draw(st.lists(st.sampled_from(QUERY_NAMES), max_size=1, unique=True))
    if query:
        match["queryParams"] = [_value_match(draw, (q,), QUERY_VALUES, ()) for q in query]
    if draw(st.integers(0, 3)) == 0:
        match["method"] = draw(st.sampled_from(METHODS))
    return match


@st.composite
def _rule(draw: st.DrawFn) -> dict[str, Any]:
    rule: dict[str, Any] = {}
    matches = draw(st.lists(_match(), max_size=3))
    if matches:
        rule["matches"] = matches
    services = draw(st.lists(st.sampled_from(SERVICES), min_size=1, max_size=2, unique=True))
    rule["backendRefs"] = [{"name": s, "port": 80, "weight": draw(st.integers(1, 3))} for s in services]
    return rule


def _probe(rnd: random.Random) -> Probe:
    # Probes come from a drawn seed rather than one draw each: a hundred per route set, cheaply; the route set is what
    # hypothesis shrinks.
    return Probe(
        host=rnd.choice(REQUEST_HOSTS),
        path=rnd.choice(REQUEST_PATHS),
        method=rnd.choice(METHODS),
        headers={h: rnd.choice(HEADER_VALUES) for h in HEADER_NAMES if rnd.random() < 0.4},
        query={q: rnd.choice(QUERY_VALUES) for q in QUERY_NAMES if rnd.random() < 0.4},
    )


def _fixed() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "trafficsplit", "generation": 1},
            "spec": {"controllerName": "trafficsplit.dev/gateway-controller"},
        }
    ]
    for s in SERVICES:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": s, "namespace": NAMESPACE},
                "spec": {"ports": [{"name": "http", "port": 80}]},
            }
        )
        out.append(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{s}-1",
                    "namespace": NAMESPACE,
                    "labels": {"kubernetes.io/service-name": s},
                },
                "ports": [{"name": "http", "port": 80}],
                "endpoints": [{"addresses": ["10.1.0.7"], "conditions": {"ready": True}}],
            }
        )
    return out


@st.composite
def route_sets(draw: st.DrawFn, probes: int = 100) -> RouteSet:
    """One Gateway (one or two listeners sharing port 80, distinct hostnames), one to five HTTPRoutes of one to three
    rules, and `probes` requests."""
    listener_hosts = draw(st.lists(st.sampled_from(LISTENER_HOSTNAMES), min_size=1, max_size=2, unique=True))
    listeners = []
    for i, h in enumerate(listener_hosts):
        listener: dict[str, Any] = {"name": f"l{i}", "port": PORT, "protocol": "HTTP"}
        if h is not None:
            listener["hostname"] = h
        listeners.append(listener)
    bodies = _fixed()
    bodies.append(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": NAMESPACE, "generation": 1},
            "spec": {"gatewayClassName": "trafficsplit", "listeners": listeners},
        }
    )
    names = draw(st.permutations(ROUTE_NAMES))[: draw(st.integers(1, len(ROUTE_NAMES)))]
    for name in names:
        spec: dict[str, Any] = {
            "parentRefs": [{"name": "gw"}],
            "rules": draw(st.lists(_rule(), min_size=1, max_size=3)),
        }
        hostnames = draw(st.lists(st.sampled_from(ROUTE_HOSTNAMES), max_size=2, unique=True))
        if hostnames:
            spec["hostnames"] = hostnames
        bodies.append(
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "HTTPRoute",
                "metadata": {
                    "name": name,
                    "namespace": NAMESPACE,
                    "generation": 1,
                    "creationTimestamp": draw(st.sampled_from(CREATED)),
                },
                "spec": spec,
            }
        )
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    return RouteSet(bodies=tuple(bodies), probes=tuple(_probe(rnd) for _ in range(probes)))
