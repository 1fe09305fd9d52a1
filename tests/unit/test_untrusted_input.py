"""Hostile input at both trust boundaries: a TrafficSplit spec (tenants) and a publish proto (token holders).

Every value that ends up in an Envoy header value or a Set-Cookie attribute, every regular expression, every count
and length is refused by the same core rule on both paths, with the field named, before Envoy sees anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from trafficsplit.core.control.compiler import assemble_generation, compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.errors import SpecError
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto

CRLF_HEADER = "\r\nx-injected: 1"


def base(**over: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "hosts": ["shop.example"],
        "backends": [{"name": "stable", "weight": 90}, {"name": "canary", "weight": 10}],
        "sticky": {"cookie": {"name": "ts"}},
    }
    spec.update(over)
    return spec


def cookie(**attrs: Any) -> dict[str, Any]:
    return {"cookie": {"name": "ts", **attrs}}


def regex_rule(value: str) -> list[dict[str, Any]]:
    return [{"header": {"name": "x-user", "value": value, "type": "RegularExpression"}, "backend": "canary"}]


def refused(namespace: str, name: str, spec: dict[str, Any]) -> tuple[str, ...]:
    with pytest.raises(SpecError) as info:
        parse_split(namespace, name, spec)
    return info.value.problems


@pytest.mark.parametrize(
    ("namespace", "name", "spec", "path", "fragment"),
    [
        # Defect: CR/LF in a cookie attribute became a separate response header.
        ("prod", "shop", base(sticky=cookie(path="/" + CRLF_HEADER)), "spec.sticky.cookie.path", "control"),
        ("prod", "shop", base(sticky=cookie(path="/a\x00b")), "spec.sticky.cookie.path", "control"),
        ("prod", "shop", base(sticky=cookie(path="/caf\u00e9")), "spec.sticky.cookie.path", "control"),
        ("prod", "shop", base(sticky=cookie(path="/" + "a" * 1024)), "spec.sticky.cookie.path", "at most"),
        # `$` matches before a final newline: the domain check let "example.com\n" through.
        ("prod", "shop", base(sticky=cookie(domain="example.com\n")), "spec.sticky.cookie.domain", "domain"),
        ("prod", "shop", base(sticky=cookie(domain="example.com" + CRLF_HEADER)), "spec.sticky.cookie.domain", ""),
        ("prod", "shop", base(sticky=cookie(name="t" * 129)), "spec.sticky.cookie.name", "at most"),
        ("prod", "shop", base(hosts=["shop.example\n"]), "spec.hosts[0]", "not a DNS host name"),
        ("prod", "shop", base(hosts=["a" * 254]), "spec.hosts[0]", "not a DNS host name"),
        ("prod\r\nx-injected: 1", "shop", base(), "metadata.namespace", "DNS label"),
        ("prod", "shop\r\nx-injected: 1", base(), "metadata.name", "DNS subdomain"),
        ("prod", "s" * 254, base(), "metadata.name", "DNS subdomain"),
        # Regular expressions are RE2 (linear time): what RE2 cannot run is refused, and so is a big program.
        ("prod", "shop", base(matches=regex_rule(r"(a)\1")), "spec.matches[0].header.value", "RE2"),
        ("prod", "shop", base(matches=regex_rule("[a-z]{1,1000}")), "spec.matches[0].header.value", "program size"),
        ("prod", "shop", base(matches=regex_rule("a" * 4097)), "spec.matches[0].header.value", "at most"),
        (
            "prod",
            "shop",
            base(matches=[{"header": {"name": "x-user", "value": "v" * 4097}, "backend": "canary"}]),
            "spec.matches[0].header.value",
            "at most",
        ),
        (
            "prod",
            "shop",
            base(matches=[{"header": {"name": "x" * 257, "value": "1"}, "backend": "canary"}]),
            "spec.matches[0].header.name",
            "",
        ),
    ],
)
def test_a_spec_with_hostile_values_is_refused_naming_the_field(
    namespace: str, name: str, spec: dict[str, Any], path: str, fragment: str
) -> None:
    problems = refused(namespace, name, spec)
    assert any(p.startswith(f"{path}:") and fragment in p for p in problems), problems


def test_the_pathological_backtracking_rule_is_accepted_and_runs_on_re2() -> None:
    """`(a+)+$` is a valid RE2 program: it is kept (users may have it) but matched in linear time. Measured while
    fixing: Python's `re` took ~9 s for 29 bytes; RE2 takes ~15 µs (docs/crd.md)."""
    spec = parse_split("prod", "shop", base(matches=regex_rule("(a+)+$")))
    split = compile_split(spec)
    rule = split.matches[0]
    assert rule.pattern is not None and rule.pattern.engine == "re2"
    assert not rule.matches("a" * 28 + "!")
    assert rule.matches("aaaa")


def _proto() -> pb.Generation:
    spec = parse_split(
        "ns",
        "shop",
        base(
            matches=[
                {"header": {"name": "x-beta", "value": "1"}, "backend": "canary"},
                {"cookie": {"name": "grp", "value": "b.*", "type": "RegularExpression"}, "backend": "canary"},
            ]
        ),
    )
    gen, _ = assemble_generation(3, [compile_split(spec)])
    return generation_to_proto(gen, origin="test")


def _set(obj: object, field: str, value: object) -> None:
    setattr(obj, field, value)


def _many_endpoints(m: pb.Generation) -> None:
    m.splits[0].backends[0].endpoints.extend(pb.Endpoint(address="10.0.0.1", port=80) for _ in range(10_001))


def _many_splits(m: pb.Generation) -> None:
    for i in range(10_001):
        s = m.splits.add()
        s.CopyFrom(m.splits[0])
        s.name, s.hosts[:] = f"s{i}", [f"s{i}.example"]
        for b in s.backends:
            b.cluster = f"ns/s{i}/{b.name}"


def _many_backends(m: pb.Generation) -> None:
    for i in range(65):
        m.splits[0].backends.add(name=f"b{i}", weight=1, cluster=f"ns/shop/b{i}")


def _many_matches(m: pb.Generation) -> None:
    for _ in range(33):
        m.splits[0].matches.add(kind=pb.Match.HEADER, name="x", value="1", backend="stable")


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda m: _set(m.splits[0].cookie, "path", "/" + CRLF_HEADER), "splits[0].cookie.path"),
        (lambda m: _set(m.splits[0].cookie, "domain", "example.com" + CRLF_HEADER), "splits[0].cookie.domain"),
        (lambda m: _set(m.splits[0].cookie, "domain", "a" * 300), "splits[0].cookie.domain"),
        (lambda m: _set(m.splits[0], "namespace", "ns" + CRLF_HEADER), "splits[0].namespace"),
        (lambda m: _set(m.splits[0], "name", "shop" + CRLF_HEADER), "splits[0].name"),
        (lambda m: _set(m.splits[0].backends[0], "cluster", "ns/shop/" + CRLF_HEADER), "splits[0].backends[0].cluster"),
        (lambda m: _set(m.splits[0].backends[0], "cluster", "x" * 100_000), "splits[0].backends[0].cluster"),
        (lambda m: _set(m.splits[0].backends[0], "cluster", "trafficsplit_extproc"), "reserved"),
        (lambda m: _set(m.splits[0].backends[0], "cluster", "trafficsplit_ads"), "reserved"),
        (lambda m: _set(m.splits[0].backends[0], "name", "st\r\nable"), "splits[0].backends[0].name"),
        (lambda m: _set(m.splits[0].backends[0], "service", "s" * 100_000), "splits[0].backends[0].service"),
        (lambda m: _set(m.splits[0].backends[0], "port", 70_000), "splits[0].backends[0].port"),
        (lambda m: m.splits[0].hosts.append("h" * (1 << 20)), "splits[0].hosts"),
        (lambda m: m.splits[0].hosts.append("evil.example\r\nx-injected: 1"), "splits[0].hosts"),
        (lambda m: m.splits[0].hosts.extend(f"h{i}.example" for i in range(17)), "splits[0].hosts"),
        (lambda m: _set(m, "number", 2**64 - 1), "number"),
        (lambda m: _set(m, "number", 2**53), "number"),
        (lambda m: _set(m.splits[0].matches[1], "value", "[a-z]{1,1000}"), "program size"),
        (lambda m: _set(m.splits[0].matches[1], "value", r"(a)\1"), "RE2"),
        (lambda m: _set(m.splits[0].matches[0], "value", "v" * 100_000), "splits[0].matches[0].value"),
        (lambda m: _set(m.splits[0].matches[0], "name", "x" * 100_000), "splits[0].matches[0].name"),
        (lambda m: _set(m.splits[0].backends[0].endpoints.add(port=80), "address", "1" * 100_000), "address"),
        (_many_endpoints, "endpoints: 10001 endpoints, at most"),
        (_many_splits, "splits: 10002 splits, at most"),
        (_many_backends, "backends: 67 backends, at most"),
        (_many_matches, "matches: 35 matches, at most"),
        (lambda m: _set(m, "origin", "o" * 100_000), "origin"),
    ],
)
def test_a_publish_with_hostile_values_is_refused_before_envoy_sees_it(
    mutate: Callable[[pb.Generation], object], fragment: str
) -> None:
    msg = _proto()
    mutate(msg)
    with pytest.raises(SpecError) as err:
        generation_from_proto(msg)
    assert fragment in str(err.value)


def test_the_largest_generation_number_is_accepted() -> None:
    msg = _proto()
    msg.number = 2**53 - 1
    assert generation_from_proto(msg).number == 2**53 - 1
