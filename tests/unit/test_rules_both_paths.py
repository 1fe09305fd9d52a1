"""One table of bad inputs, run through both ways a split reaches the core: the parser (a TrafficSplit's YAML spec)
and the dataplane's receiver (a publish proto). The receiver must refuse everything the parser refuses, because both
build the same values and the values check themselves (trafficsplit.core.model.rules, CookieSettings, ...).

Each row breaks one rule on a valid split, once in the spec and once in the proto the valid spec compiles to; both
must raise SpecError with the row's fragment. Rules a proto cannot express (a negative weight in a uint32, a YAML type)
are the parser's alone and live in tests/unit/test_spec.py.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from trafficsplit.core.control.compiler import assemble_generation, compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.ring import MAX_POINTS
from trafficsplit.core.model.weights import MAX_BACKENDS, MAX_WEIGHT
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


@dataclass(frozen=True)
class Bad:
    """One broken rule: how to break it in the spec, how in the proto, and a fragment both errors contain."""

    rule: str
    spec: Callable[[dict[str, Any]], object]
    proto: Callable[[pb.Split], Any]
    fragment: str


def _cookie(**fields: Any) -> Callable[[dict[str, Any]], object]:
    return lambda s: s["sticky"]["cookie"].update(fields)


def _assign(message: Any, fields: dict[str, Any]) -> Any:
    for k, v in fields.items():
        setattr(message, k, v)
    return message


def _pb_cookie(**fields: Any) -> Callable[[pb.Split], Any]:
    return lambda s: _assign(s.cookie, fields)


def _backend(i: int, **fields: Any) -> Callable[[dict[str, Any]], object]:
    return lambda s: s["backends"][i].update(fields)


def _pb_backend(i: int, **fields: Any) -> Callable[[pb.Split], Any]:
    return lambda s: _assign(s.backends[i], fields)


def _many_backends(s: dict[str, Any]) -> None:
    s["backends"] = [{"name": f"b{i}", "weight": 1} for i in range(MAX_BACKENDS + 1)]
    del s["matches"]


def _pb_many_backends(s: pb.Split) -> None:
    del s.matches[:]
    del s.backends[:]
    s.backends.extend(pb.Backend(name=f"b{i}", weight=1, cluster=f"ns/shop/b{i}", port=80) for i in range(65))


TABLE = [
    Bad("cookie name is a token", _cookie(name="bad name"), _pb_cookie(name="bad name"), "RFC 6265 cookie name"),
    Bad("cookie path starts with /", _cookie(path="x"), _pb_cookie(path="x"), "must start with '/'"),
    Bad("cookie path has no ;", _cookie(path="/a;b"), _pb_cookie(path="/a;b"), "without ';'"),
    Bad("cookie path has no CR/LF", _cookie(path="/\r\nx: 1"), _pb_cookie(path="/\r\nx: 1"), "control characters"),
    Bad("cookie domain has no LF", _cookie(domain="example.com\n"), _pb_cookie(domain="example.com\n"), "domain name"),
    Bad("cookie domain is a name", _cookie(domain="exa mple.com"), _pb_cookie(domain="exa mple.com"), "domain name"),
    Bad("cookie maxAge >= 0", _cookie(maxAge=-1), _pb_cookie(max_age=-1), "must be >= 0"),
    Bad("SameSite=None needs Secure", _cookie(sameSite="None"), _pb_cookie(same_site="None"), "requires secure"),
    Bad("Partitioned needs Secure", _cookie(partitioned=True), _pb_cookie(partitioned=True), "requires secure"),
    Bad(
        "endpoint ring points in range",
        lambda s: s["sticky"].update(endpointAffinity=True, endpointPoints=MAX_POINTS + 1),
        lambda s: _assign(s, {"endpoint_affinity": True, "endpoint_points": MAX_POINTS + 1}),
        f"must be 1..{MAX_POINTS}",
    ),
    Bad(
        "hosts are DNS names",
        lambda s: s.update(hosts=["http://x"]),
        lambda s: s.hosts.__setitem__(0, "http://x"),
        "not a DNS host name",
    ),
    Bad(
        "hosts are unique",
        lambda s: s.update(hosts=["a.example", "A.example"]),
        lambda s: s.hosts.extend(["shop.example"]),
        "duplicate host",
    ),
    Bad(
        "at most 16 hosts",
        lambda s: s.update(hosts=[f"h{i}.example" for i in range(17)]),
        lambda s: s.hosts.extend(f"h{i}.example" for i in range(15)),
        "at most 16",
    ),
    Bad("at least one host", lambda s: s.update(hosts=[]), lambda s: s.ClearField("hosts"), "at least one host"),
    Bad("backend names are DNS labels", _backend(1, name="Bad_Name"), _pb_backend(1, name="Bad_Name"), "DNS label"),
    Bad("backend port in range", _backend(0, port=0), _pb_backend(0, port=0), "1..65535"),
    Bad("weight bound", _backend(0, weight=MAX_WEIGHT + 1), _pb_backend(0, weight=MAX_WEIGHT + 1), f"<= {MAX_WEIGHT}"),
    Bad(
        "total weight > 0",
        lambda s: [b.update(weight=0) for b in s["backends"]],
        lambda s: [_assign(b, {"weight": 0}) for b in s.backends],
        "total weight must be > 0",
    ),
    Bad("backend names unique", _backend(0, name="canary"), _pb_backend(0, name="canary"), "duplicate backend name"),
    Bad("at most 64 backends", _many_backends, _pb_many_backends, f"at most {MAX_BACKENDS}"),
    Bad(
        "endpoint port in range",
        _backend(0, endpoints=["10.0.0.1:0"]),
        lambda s: setattr(s.backends[0].endpoints[0], "port", 0),
        "1..65535",
    ),
    Bad(
        "match names are tokens",
        lambda s: s["matches"][0]["header"].update(name="bad name"),
        lambda s: setattr(s.matches[0], "name", "bad name"),
        "is not a valid header name",
    ),
    Bad(
        "match patterns compile",
        lambda s: s["matches"][1]["cookie"].update(value="("),
        lambda s: setattr(s.matches[1], "value", "("),
        "invalid regular expression",
    ),
    Bad(
        "match patterns are RE2",
        lambda s: s["matches"][1]["cookie"].update(value=r"(a)\1"),
        lambda s: setattr(s.matches[1], "value", r"(a)\1"),
        "not an RE2 regular expression",
    ),
    Bad(
        "match patterns have a bounded program",
        lambda s: s["matches"][1]["cookie"].update(value="[a-z]{1,1000}"),
        lambda s: setattr(s.matches[1], "value", "[a-z]{1,1000}"),
        "program size",
    ),
    Bad(
        "match values are bounded",
        lambda s: s["matches"][0]["header"].update(value="v" * 4097),
        lambda s: setattr(s.matches[0], "value", "v" * 4097),
        "at most 4096",
    ),
    Bad(
        "matches name a backend",
        lambda s: s["matches"][0].update(backend="nope"),
        lambda s: setattr(s.matches[0], "backend", "nope"),
        "'nope' is not",
    ),
]


def test_the_valid_split_passes_both_paths() -> None:
    assert generation_from_proto(valid_proto()).splits[0].key == "ns/shop"


@pytest.mark.parametrize("bad", TABLE, ids=lambda b: b.rule)
def test_the_parser_and_the_receiver_refuse_the_same_input(bad: Bad) -> None:
    spec = copy.deepcopy(VALID)
    bad.spec(spec)
    with pytest.raises(SpecError) as parsed:
        parse_split("ns", "shop", spec)
    assert bad.fragment in str(parsed.value)

    msg = valid_proto()
    bad.proto(msg.splits[0])
    with pytest.raises(SpecError) as received:
        generation_from_proto(msg)
    assert bad.fragment in str(received.value)
