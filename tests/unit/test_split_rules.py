"""A split's rules live in the compiled values (core/model/compiled.py), and both ways a split reaches the core build
them: the parser (a TrafficSplit's YAML, through `compile_split`) and the dataplane's receiver (a publish proto). So a
broken rule reads the same from both, each under its own path: `spec.<field>` for the parser, `splits[0].<field>` for
the receiver. Each row breaks one rule on a valid split, once in the spec and once in the proto the valid spec
compiles to. Rules a proto cannot express (a YAML type, a required field) are the parser's alone (test_spec.py)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from trafficsplit.core.control.compiler import assemble_generation, compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.limits import MAX_ENDPOINTS, MAX_MATCHES
from trafficsplit.core.model.ring import MAX_POINTS
from trafficsplit.core.model.weights import MAX_WEIGHT
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto

VALID: dict[str, Any] = {
    "hosts": ["shop.example", "*.shop.example"],
    "backends": [
        {"name": "stable", "weight": 95, "port": 80, "endpoints": ["10.0.0.1:8080"]},
        {"name": "canary", "weight": 5, "port": 80, "endpoints": ["10.0.0.2:8080"]},
    ],
    "sticky": {"cookie": {"name": "ts", "path": "/", "maxAge": 60, "domain": "example.com", "sameSite": "Lax"}},
    "matches": [
        {"header": {"name": "x-beta", "value": "1"}, "backend": "canary"},
        {"cookie": {"name": "grp", "value": "b.*", "type": "RegularExpression"}, "backend": "canary"},
    ],
}


def valid_proto() -> pb.Generation:
    gen, rejected = assemble_generation(1, [compile_split(parse_split("ns", "shop", VALID))])
    assert not rejected
    return generation_to_proto(gen, origin="test")


def _assign(message: Any, **fields: Any) -> Any:
    for k, v in fields.items():
        setattr(message, k, v)
    return message


@dataclass(frozen=True)
class Bad:
    """One broken rule: how to break it in the spec and in the proto, and the one problem both report, at `field`
    (`spec_field` when the YAML nests it deeper than the proto)."""

    rule: str
    spec: Callable[[dict[str, Any]], object]
    proto: Callable[[pb.Split], object]
    field: str
    message: str
    spec_field: str | None = None


TABLE = [
    Bad(
        "key header is lowercase",
        lambda s: s["sticky"].update(header={"name": "X-User"}),
        lambda s: _assign(s, key_header="X-User"),
        "sticky.header.name",
        "'X-User' must be lowercase (HTTP/2 and Envoy carry header names lowercased)",
    ),
    Bad(
        "key header is not the cookie",
        lambda s: s["sticky"].update(header={"name": "cookie"}),
        lambda s: _assign(s, key_header="cookie"),
        "sticky.header.name",
        "'cookie' cannot carry a sticky key",
    ),
    Bad(
        "persistent needs the cookie",
        lambda s: s.update(sticky={"mode": "persistent"}),
        lambda s: _assign(s, persistent=True).ClearField("cookie"),
        "sticky.mode",
        "persistent needs sticky.cookie (the cookie carries the session's backend)",
    ),
    Bad(
        "endpoint ring points in range",
        lambda s: s["sticky"].update(endpointAffinity=True, endpointPoints=MAX_POINTS + 1),
        lambda s: _assign(s, endpoint_affinity=True, endpoint_points=MAX_POINTS + 1),
        "sticky.endpointPoints",
        f"must be 1..{MAX_POINTS}, got {MAX_POINTS + 1}",
    ),
    Bad(
        "drain is for persistent",
        lambda s: s["backends"][1].update(weight=0, drain=True),
        lambda s: _assign(s.backends[1], weight=0, drain=True),
        "backends[1].drain",
        "needs spec.sticky.mode: persistent (only a sealed cookie says which backend a session keeps)",
    ),
    Bad(
        "a draining backend has weight 0",
        lambda s: s["backends"][1].update(drain=True),
        lambda s: _assign(s.backends[1], drain=True),
        "backends[1].drain",
        "a draining backend needs weight 0, got 5 (a backend with weight keeps its sessions)",
    ),
    Bad(
        "at most MAX_MATCHES matches",
        lambda s: s.update(matches=s["matches"] * MAX_MATCHES),
        lambda s: s.matches.extend(list(s.matches) * (MAX_MATCHES - 1)),
        "matches",
        f"{2 * MAX_MATCHES} matches, at most {MAX_MATCHES} are allowed",
    ),
    Bad(
        "matches name a backend",
        lambda s: s["matches"][0].update(backend="nope"),
        lambda s: _assign(s.matches[0], backend="nope"),
        "matches[0].backend",
        "'nope' is not one of the backends",
    ),
    Bad(
        "at most MAX_ENDPOINTS endpoints",
        lambda s: s["backends"][0].update(
            endpoints=[f"10.1.{i // 250}.{i % 250}:80" for i in range(MAX_ENDPOINTS + 1)]
        ),
        lambda s: s.backends[0].endpoints.extend(
            pb.Endpoint(address="10.1.0.1", port=80) for _ in range(MAX_ENDPOINTS)
        ),
        "backends[0].endpoints",
        f"{MAX_ENDPOINTS + 1} endpoints, at most {MAX_ENDPOINTS} are allowed",
    ),
    Bad(
        "backend names are DNS labels",
        lambda s: s["backends"][1].update(name="Bad_Name"),
        lambda s: _assign(s.backends[1], name="Bad_Name"),
        "backends[1].name",
        "'Bad_Name' must be a DNS label (lowercase letters, digits, '-')",
    ),
    Bad(
        "backend port in range",
        lambda s: s["backends"][0].update(port=0),
        lambda s: _assign(s.backends[0], port=0),
        "backends[0].port",
        "must be 1..65535, got 0",
    ),
    Bad(
        "weight bound",
        lambda s: s["backends"][0].update(weight=MAX_WEIGHT + 1),
        lambda s: _assign(s.backends[0], weight=MAX_WEIGHT + 1),
        "backends[0].weight",
        f"must be <= {MAX_WEIGHT}, got {MAX_WEIGHT + 1}",
    ),
    Bad(
        "backend names unique",
        lambda s: s["backends"][0].update(name="canary"),
        lambda s: _assign(s.backends[0], name="canary"),
        "backends[1].name",
        "duplicate backend name 'canary'",
    ),
    Bad(
        "hosts are DNS names",
        lambda s: s.update(hosts=["http://x"]),
        lambda s: s.hosts.__setitem__(0, "http://x"),
        "hosts[0]",
        "'http://x' is not a DNS host name (no port, no scheme)",
    ),
    Bad(
        "match names are tokens",
        lambda s: s["matches"][0]["header"].update(name="bad name"),
        lambda s: _assign(s.matches[0], name="bad name"),
        "matches[0].name",
        "'bad name' is not a valid header name (a token of at most 256)",
        spec_field="matches[0].header.name",
    ),
    Bad(
        "match patterns are RE2",
        lambda s: s["matches"][1]["cookie"].update(value=r"(a)\1"),
        lambda s: _assign(s.matches[1], value=r"(a)\1"),
        "matches[1].value",
        "invalid regular expression",
        spec_field="matches[1].cookie.value",
    ),
    Bad(
        "match patterns have a bounded program",
        lambda s: s["matches"][1]["cookie"].update(value="[a-z]{1,1000}"),
        lambda s: _assign(s.matches[1], value="[a-z]{1,1000}"),
        "matches[1].value",
        "invalid regular expression: RE2 program size 2003 is over the limit of 100",
        spec_field="matches[1].cookie.value",
    ),
    Bad(
        "cookie path has no CR/LF",
        lambda s: s["sticky"]["cookie"].update(path="/\r\nx: 1"),
        lambda s: _assign(s.cookie, path="/\r\nx: 1"),
        "cookie.path",
        "'/\\r\\nx: 1' must start with '/' and be printable ASCII without ';' or control characters",
        spec_field="sticky.cookie.path",
    ),
    Bad(
        "SameSite=None needs Secure",
        lambda s: s["sticky"]["cookie"].update(sameSite="None"),
        lambda s: _assign(s.cookie, same_site="None"),
        "cookie.sameSite",
        "SameSite=None requires secure: true (browsers drop it otherwise)",
        spec_field="sticky.cookie.sameSite",
    ),
]


def test_the_valid_split_passes_both_paths() -> None:
    assert generation_from_proto(valid_proto()).splits[0].key == "ns/shop"


@pytest.mark.parametrize("bad", TABLE, ids=lambda b: b.rule)
def test_a_broken_rule_reads_the_same_from_the_parser_and_the_receiver(bad: Bad) -> None:
    spec = copy.deepcopy(VALID)
    bad.spec(spec)
    with pytest.raises(SpecError) as parsed:
        parse_split("ns", "shop", spec)
    msg = valid_proto()
    bad.proto(msg.splits[0])
    with pytest.raises(SpecError) as received:
        generation_from_proto(msg)
    want = f"{bad.spec_field or bad.field}: {bad.message}"
    assert any(q.startswith(f"spec.{want}") for q in parsed.value.problems), parsed.value.problems
    assert any(q.startswith(f"splits[0].{bad.field}: {bad.message}") for q in received.value.problems), received.value


def test_the_parser_puts_the_split_s_name_under_metadata() -> None:
    with pytest.raises(SpecError) as err:
        parse_split("Bad_NS", "shop", VALID)
    assert err.value.problems == ("metadata.namespace: 'Bad_NS' must be a DNS label",)


def test_a_field_the_parser_could_not_read_is_reported_once() -> None:
    # The missing name stands in as '' for the compiled split, whose problems with it are not the user's.
    spec = copy.deepcopy(VALID)
    del spec["backends"][1]["name"]
    with pytest.raises(SpecError) as err:
        parse_split("ns", "shop", spec)
    assert [q for q in err.value.problems if q.startswith("spec.backends[1].name")] == [
        "spec.backends[1].name: required"
    ]
