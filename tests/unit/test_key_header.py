"""Header-keyed stickiness (sticky.header): the key comes from a request header when present, else the cookie, else a
minted one; same key_hash, same pick, no cookie for a request keyed by header; bounded at every boundary."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.decide.disclosure import affinity_applied, session_id_present
from trafficsplit.core.decide.request import Request
from trafficsplit.core.decide.split import Decision, DecisionPath, KeySource, decide
from trafficsplit.core.model.compiled import CompiledSplit
from trafficsplit.core.model.cookie import AffinityMinter
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.hashing import key_hash
from trafficsplit.core.model.limits import MAX_KEY_HEADER_VALUE
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto

OK = "0193f1c2a4b5000000000001"


def split(sticky: Mapping[str, Any]) -> CompiledSplit:
    spec = {
        "hosts": ["api.example.com"],
        "backends": [{"name": "stable", "weight": 70}, {"name": "canary", "weight": 30}],
        "sticky": dict(sticky),
    }
    return compile_split(parse_split("prod", "api", spec))


BOTH = {"header": {"name": "x-user-id"}, "cookie": {"name": "sid"}}


def run(s: CompiledSplit, headers: Mapping[str, str], cookies: tuple[str, ...] = ()) -> Decision:
    return decide(
        s,
        Request(authority="", cookie_lines=cookies, request_id="rid-1", headers=dict(headers)),
        minter=AffinityMinter(lambda: 1, 0),
    )


@given(st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=MAX_KEY_HEADER_VALUE))
def test_the_header_is_the_key_with_the_same_hash_and_pick_and_no_cookie(value: str) -> None:
    s = split(BOTH)
    d = run(s, {"x-user-id": value}, (f"sid={OK}",))
    assert (d.key, d.key_source, d.set_cookie) == (value, KeySource.HEADER, None)
    assert d.key_hash == key_hash(value)
    assert d.backend.name == s.weights.pick(value)  # the same pick as a cookie carrying that value
    assert affinity_applied(s, d) and not session_id_present(d)


def test_without_the_header_the_cookie_then_a_minted_key_decide() -> None:
    s = split(BOTH)
    d = run(s, {}, (f"sid={OK}",))
    assert (d.key, d.key_source, d.set_cookie) == (OK, KeySource.COOKIE, None)
    minted = run(s, {})
    assert minted.key_source is KeySource.MINTED and minted.set_cookie is not None


@pytest.mark.parametrize("value", ["", "x" * (MAX_KEY_HEADER_VALUE + 1)])
def test_an_empty_or_oversized_header_counts_as_absent(value: str) -> None:
    d = run(split(BOTH), {"x-user-id": value}, (f"sid={OK}",))
    assert d.key_source is KeySource.COOKIE


def test_a_header_without_a_cookie_falls_back_to_the_request_id_and_says_affinity_was_not_applied() -> None:
    s = split({"header": {"name": "x-user-id"}})
    assert s.sticky and s.cookie is None
    keyed = run(s, {"x-user-id": "u-1"})
    assert keyed.key_source is KeySource.HEADER and affinity_applied(s, keyed)
    loose = run(s, {})
    assert (loose.key, loose.key_source, loose.set_cookie) == ("rid-1", KeySource.REQUEST_ID, None)
    assert loose.path is DecisionPath.WEIGHTED and not affinity_applied(s, loose)


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("X-User", "lowercase"),
        ("x user", "not a valid header name"),
        ("cookie", "cannot carry a sticky key"),
        ("x-request-id", "cannot carry a sticky key"),
        ("x" * 257, "not a valid header name"),
        (":authority", "not a valid header name"),
    ],
)
def test_bad_header_names_are_refused_naming_the_field(name: str, problem: str) -> None:
    with pytest.raises(SpecError) as exc:
        split({"header": {"name": name}})
    assert any(p.startswith("spec.sticky.header.name:") and problem in p for p in exc.value.problems), exc.value


def test_a_header_without_a_name_is_refused() -> None:
    with pytest.raises(SpecError, match=r"spec\.sticky\.header\.name: required"):
        split({"header": {}})


def test_the_key_header_crosses_the_publish_api_and_the_receiver_checks_it() -> None:
    gen = Generation(3, (split(BOTH),))
    msg = generation_to_proto(gen)
    assert msg.splits[0].key_header == "x-user-id"
    assert generation_from_proto(msg) == gen
    msg.splits[0].key_header = "Cookie"
    with pytest.raises(SpecError, match=r"splits\[0\]\.sticky\.header\.name: 'Cookie' must be lowercase"):
        generation_from_proto(msg)
