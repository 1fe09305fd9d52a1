"""docs/spec.md §5: the endpoint ring inside a backend, built at compile time from the ready endpoints, the same
everywhere."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.control.simulate import bind_consistent
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.decide.request import Request
from trafficsplit.core.decide.split import decide
from trafficsplit.core.model.compiled import CompiledSplit, Endpoint
from trafficsplit.core.model.cookie import AffinityMinter
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.hashing import key_hash
from trafficsplit.core.model.ring import Ring, endpoint_ring
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto


def _split(endpoints: list[Endpoint], points: int | None = None, affinity: bool = True) -> CompiledSplit:
    sticky: dict[str, object] = {"cookie": {"name": "ts"}, "endpointAffinity": affinity}
    if points is not None:
        sticky["endpointPoints"] = points
    spec = parse_split(
        "ns", "shop", {"hosts": ["shop.example"], "backends": [{"name": "a", "weight": 1}], "sticky": sticky}
    )
    return compile_split(spec, {"a": endpoints})


def _decide(split: CompiledSplit, key: str) -> str | None:
    d = decide(
        split, Request(authority="", cookie_lines=[f"ts={key}"], request_id="", headers={}), minter=AffinityMinter()
    )
    return d.endpoint


EPS = [Endpoint("10.0.0.3", 80), Endpoint("10.0.0.1", 80), Endpoint("10.0.0.2", 80, ready=False)]


def test_the_pod_is_the_rings_owner_of_the_key_over_ready_endpoints() -> None:
    split = _split(EPS)
    ring = Ring(["10.0.0.1:80", "10.0.0.3:80"], 200)
    for key in ("abc", "user-42", "0193f1c2a4b5000000000001"):
        assert _decide(split, key) == ring.owner(key)


def test_the_ring_does_not_depend_on_endpoint_order_and_uses_the_simulators_binding() -> None:
    a, b = _split(EPS), _split(list(reversed(EPS)))
    names = [f"c-{i}" for i in range(200)]
    members = ["10.0.0.1:80", "10.0.0.3:80"]
    assert [_decide(a, n) for n in names] == [_decide(b, n) for n in names]
    assert [_decide(a, n) for n in names] == [members[i] for i in bind_consistent(names, members)]


def test_points_are_configurable_and_bounded() -> None:
    split = _split(EPS, points=7)
    ring = split.rings[0]
    assert ring is not None and len(ring) == 14
    with pytest.raises(SpecError, match=r"spec\.sticky\.endpointPoints: must be 1\.\.1000"):
        _split(EPS, points=0)
    assert _split(EPS, affinity=False).rings == (None,)


def test_ipv6_hosts_are_named_as_envoy_names_them() -> None:
    assert Endpoint("fd00::1", 8080).host == "[fd00::1]:8080"
    assert endpoint_ring([], 200) is None


def test_points_survive_the_publish_proto() -> None:
    gen = Generation(3, (_split(EPS, points=9),))
    back = generation_from_proto(generation_to_proto(gen))
    assert back.splits[0].endpoint_points == 9
    ring, held = back.splits[0].rings[0], gen.splits[0].rings[0]
    assert ring is not None and held is not None and ring.members == held.members


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(1, 60), st.lists(st.text(min_size=1, max_size=10), min_size=1, max_size=50))
def test_adding_an_endpoint_moves_keys_only_onto_it_and_removing_it_moves_them_back(
    n: int, points: int, keys: list[str]
) -> None:
    old = [f"10.0.0.{i}:80" for i in range(1, n + 1)]
    new = "10.0.1.1:80"
    before, grown = Ring(old, points), Ring([*old, new], points)
    for k in keys:
        h = key_hash(k)
        assert grown.members[grown.lookup(h)] in (before.members[before.lookup(h)], new)
