"""The TrafficSplit spec parser: valid examples, and every invalid class reported with its field path."""

from __future__ import annotations

from typing import Any

import pytest

from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.compiled import MatchKind, MatchType
from trafficsplit.core.model.cookie import SameSite
from trafficsplit.core.model.errors import SpecError


def base(**over: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "service": "shop",
        "backends": [
            {"name": "stable", "service": "shop-v1", "port": 8080, "weight": 95},
            {"name": "canary", "service": "shop-v2", "port": 8080, "weight": 5},
        ],
    }
    spec.update(over)
    return spec


def test_minimal_spec_defaults() -> None:
    s = parse_split("prod", "shop", base())
    assert s.key == "prod/shop"
    assert s.hosts == ("shop", "shop.prod", "shop.prod.svc", "shop.prod.svc.cluster.local")
    assert s.weights_text() == "stable=95,canary=5"
    assert s.cookie is None and not s.endpoint_affinity and s.matches == () and not s.debug_headers


def test_full_spec() -> None:
    s = parse_split(
        "prod",
        "shop",
        base(
            hosts=["Shop.Example.com", "*.shop.example.com"],
            sticky={
                "cookie": {
                    "name": "ts-shop",
                    "maxAge": 3600,
                    "secure": True,
                    "sameSite": "None",
                    "domain": "example.com",
                },
                "endpointAffinity": True,
            },
            matches=[
                {"header": {"name": "X-Canary", "value": "1"}, "backend": "canary"},
                {"cookie": {"name": "beta", "value": "yes|true", "type": "RegularExpression"}, "backend": "canary"},
            ],
            debugHeaders=True,
        ),
    )
    assert s.hosts == ("shop.example.com", "*.shop.example.com")
    assert s.cookie is not None and s.cookie.name == "ts-shop" and s.cookie.max_age == 3600
    assert s.cookie.same_site is SameSite.NONE and s.cookie.http_only and s.cookie.path == "/"
    assert s.endpoint_affinity and s.debug_headers
    assert s.matches[0].kind is MatchKind.HEADER and s.matches[0].name == "x-canary"  # header names fold case
    assert s.matches[1].kind is MatchKind.COOKIE and s.matches[1].type is MatchType.REGULAR_EXPRESSION


@pytest.mark.parametrize(
    ("spec", "path", "fragment"),
    [
        (base(service=None), "spec.hosts", "give at least one host"),
        (base(hosts=["http://x"]), "spec.hosts[0]", "not a DNS host name"),
        (base(hosts=["a.com", "A.com"]), "spec.hosts[1]", "duplicate host"),
        (base(backends=[]), "spec.backends", "at least one backend"),
        (base(backends=[{"name": "Bad_Name", "weight": 1}]), "spec.backends[0].name", "DNS label"),
        (base(backends=[{"name": "a", "weight": 1}, {"name": "a", "weight": 1}]), "spec.backends[1].name", "duplicate"),
        (base(backends=[{"name": "a"}]), "spec.backends[0].weight", "required"),
        (base(backends=[{"name": "a", "weight": -1}]), "spec.backends[0].weight", ">= 0"),
        (base(backends=[{"name": "a", "weight": 1.5}]), "spec.backends[0].weight", "expected integer"),
        (base(backends=[{"name": "a", "weight": True}]), "spec.backends[0].weight", "expected integer"),
        (base(backends=[{"name": "a", "weight": 0}]), "spec.backends", "total weight must be > 0"),
        (base(backends=[{"name": "a", "weight": 1, "port": 0}]), "spec.backends[0].port", "1..65535"),
        (base(backends=[{"name": "a", "weight": 1, "endpoints": ["x"]}]), "spec.backends[0].endpoints[0]", "HOST:PORT"),
        # str.isdigit() accepts '²', which int() refuses: a problem to report, not a ValueError out of the parser.
        (
            base(backends=[{"name": "a", "weight": 1, "endpoints": ["10.0.0.1:²"]}]),
            "spec.backends[0].endpoints[0]",
            "HOST:PORT",
        ),
        (base(sticky={"cookie": {}}), "spec.sticky.cookie.name", "required"),
        (base(sticky={"cookie": {"name": "a b"}}), "spec.sticky.cookie.name", "RFC 6265"),
        (base(sticky={"cookie": {"name": "s", "maxAge": -1}}), "spec.sticky.cookie.maxAge", ">= 0"),
        (base(sticky={"cookie": {"name": "s", "path": "x"}}), "spec.sticky.cookie.path", "start with '/'"),
        (base(sticky={"cookie": {"name": "s", "sameSite": "Loose"}}), "spec.sticky.cookie.sameSite", "one of"),
        (base(sticky={"cookie": {"name": "s", "sameSite": "None"}}), "spec.sticky.cookie.sameSite", "requires secure"),
        (
            base(sticky={"cookie": {"name": "s", "partitioned": True}}),
            "spec.sticky.cookie.partitioned",
            "requires secure",
        ),
        (base(sticky={"cookie": {"name": "s", "partitioned": "yes"}}), "spec.sticky.cookie.partitioned", "boolean"),
        (base(matches=[{"backend": "canary"}]), "spec.matches[0]", "exactly one of header or cookie"),
        (
            base(matches=[{"header": {"name": "x", "value": "1"}, "backend": "nope"}]),
            "spec.matches[0].backend",
            "not one",
        ),
        (base(matches=[{"header": {"name": "x"}, "backend": "canary"}]), "spec.matches[0].header.value", "required"),
        (
            base(matches=[{"header": {"name": "x", "value": "(", "type": "RegularExpression"}, "backend": "canary"}]),
            "spec.matches[0].header.value",
            "invalid regular expression",
        ),
        (base(debugHeaders="yes"), "spec.debugHeaders", "expected boolean"),
        (base(sticky="yes"), "spec.sticky", "expected object, got str"),  # the resource's word, not Python's Mapping
    ],
)
def test_invalid_specs_name_the_field(spec: dict[str, Any], path: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_split("prod", "shop", spec)
    assert any(p.startswith(f"{path}:") and fragment in p for p in info.value.problems), info.value.problems


def test_every_problem_is_reported_at_once() -> None:
    spec = base(backends=[{"name": "A", "weight": -1}], debugHeaders=1)
    with pytest.raises(SpecError) as info:
        parse_split("prod", "shop", spec)
    assert len(info.value.problems) >= 3
    assert "\n" not in str(info.value)
