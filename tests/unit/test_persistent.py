"""sticky.mode: persistent (core/model/persistent.py): a sealed cookie keeps its backend while it has weight and is
eligible; new sessions follow the weights; a tampered seal re-sessions; a rotated key keeps sessions in its grace."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.decide.request import Request
from trafficsplit.core.decide.split import Decision, DecisionPath, KeySource, decide
from trafficsplit.core.model.compiled import CompiledSplit, Endpoint
from trafficsplit.core.model.cookie import AffinityMinter, is_cookie_value
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.persistent import MAX_SAME_NAME_COOKIES, CookieSigner, persistent_moved_share
from trafficsplit.core.model.weights import Weights
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto

K1, K2, K3 = b"k" * 32, b"q" * 32, b"z" * 32


def split(weights: Mapping[str, int], down: Sequence[str] = (), **extra: Any) -> CompiledSplit:
    spec = {
        "hosts": ["app.example"],
        "backends": [{"name": n, "weight": w} for n, w in weights.items()],
        "sticky": {"cookie": {"name": "sid"}, "mode": "persistent"},
        **extra,
    }
    eps = {n: [Endpoint("10.0.0.1", 80, ready=n not in down)] for n in weights}
    return compile_split(parse_split("prod", "app", spec), eps)


def run(
    s: CompiledSplit, signer: CookieSigner, cookie: str | None = None, minter: AffinityMinter | None = None
) -> Decision:
    return decide(
        s,
        Request(authority="", cookie_lines=[f"sid={cookie}"] if cookie else [], request_id="rid", headers={}),
        minter=minter or AffinityMinter(lambda: 1),
        signer=signer,
    )


def cookie_of(d: Decision) -> str:
    assert d.set_cookie is not None
    value = d.set_cookie.split(";", 1)[0].split("=", 1)[1]
    assert is_cookie_value(value)
    return value


def sessions(s: CompiledSplit, signer: CookieSigner, n: int) -> list[str]:
    minter = AffinityMinter(lambda: 1, 0)
    return [cookie_of(run(s, signer, minter=minter)) for _ in range(n)]


def test_a_ramp_moves_no_existing_session_while_new_ones_follow_the_weights() -> None:
    signer = CookieSigner(K1)
    before = split({"blue": 95, "green": 5})
    cookies = sessions(before, signer, 2000)
    given_ = [run(before, signer, c).backend.name for c in cookies]
    after = split({"blue": 50, "green": 50})
    kept = [run(after, signer, c) for c in cookies]
    assert [d.backend.name for d in kept] == given_  # nobody moved
    assert all(d.path is DecisionPath.PINNED and d.set_cookie is None for d in kept)
    fresh = [run(after, signer, minter=AffinityMinter(lambda: 2, 10**6 + i)) for i in range(2000)]
    assert all(d.path is DecisionPath.WEIGHTED and d.key_source is KeySource.MINTED for d in fresh)
    green = sum(d.backend.name == "green" for d in fresh)
    assert 900 < green < 1100  # the weights decide new sessions (the Envoy test checks it by chi-square)


def test_a_flip_moves_every_session_and_reseals_it() -> None:
    signer = CookieSigner(K1)
    cookies = sessions(split({"blue": 100, "green": 0}), signer, 200)
    flipped = [run(split({"blue": 0, "green": 100}), signer, c) for c in cookies]
    assert all(d.backend.name == "green" and d.path is DecisionPath.WEIGHTED for d in flipped)
    assert all(".green." in cookie_of(d) for d in flipped)


def test_a_pinned_backend_without_ready_endpoints_fails_over_and_the_session_stays_with_its_new_backend() -> None:
    signer = CookieSigner(K1)
    s = split({"blue": 50, "green": 50})
    cookie = next(c for c in sessions(s, signer, 50) if ".blue." in c)
    d = run(split({"blue": 50, "green": 50}, down=["blue"]), signer, cookie)
    assert d.backend.name == "green"


@given(st.integers(0, 200), st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-_."))
def test_any_edit_of_a_sealed_cookie_re_sessions(pos: int, ch: str) -> None:
    signer = CookieSigner(K1)
    s = split({"blue": 50, "green": 50})
    cookie = sessions(s, signer, 1)[0]
    pos %= len(cookie)
    edited = cookie[:pos] + ch + cookie[pos + 1 :]
    d = run(s, signer, edited)
    if edited == cookie:
        assert d.key_source is KeySource.COOKIE
    else:
        assert d.key_source is KeySource.MINTED and d.set_cookie is not None  # a fresh session, a fresh seal


def test_choosing_the_backend_by_editing_the_cookie_does_not_work() -> None:
    signer = CookieSigner(K1)
    s = split({"blue": 99, "green": 1})
    cookie = next(c for c in sessions(s, signer, 50) if ".blue." in c)
    forged = cookie.replace(".blue.", ".green.")
    d = run(s, signer, forged)
    assert d.key_source is KeySource.MINTED and d.key != cookie.split(".")[0]


def test_rotation_keeps_sessions_in_the_grace_period_then_they_re_session() -> None:
    s = split({"blue": 50, "green": 50})
    old = sessions(s, CookieSigner(K1), 100)
    given_ = [run(s, CookieSigner(K1), c).backend.name for c in old]
    rotating = CookieSigner(K2, previous=K1)
    kept = [run(split({"blue": 10, "green": 90}), rotating, c) for c in old]
    assert [d.backend.name for d in kept] == given_ and all(d.path is DecisionPath.PINNED for d in kept)
    resealed = [cookie_of(d) for d in kept]  # re-sealed with the current key
    after_grace = CookieSigner(K3, previous=K2)
    assert [run(s, after_grace, c).key_source for c in resealed] == [KeySource.COOKIE] * 100
    assert {run(s, after_grace, c).key_source for c in old} == {KeySource.MINTED}


def test_a_plain_rehash_cookie_is_kept_as_the_key_and_sealed_to_its_pick() -> None:
    signer = CookieSigner(K1)
    s = split({"blue": 50, "green": 50})
    d = run(s, signer, "0193f1c2a4b5000000000001")
    assert d.key == "0193f1c2a4b5000000000001" and d.key_source is KeySource.COOKIE
    assert cookie_of(d).startswith(f"0193f1c2a4b5000000000001.{d.backend.name}.")


def test_persistent_needs_a_cookie_a_signer_and_keys_of_128_bits() -> None:
    with pytest.raises(SpecError, match=r"spec\.sticky\.mode: persistent needs sticky\.cookie"):
        parse_split(
            "prod",
            "app",
            {
                "hosts": ["a.example"],
                "backends": [{"name": "a", "weight": 1}],
                "sticky": {"mode": "persistent", "header": {"name": "x-user"}},
            },
        )
    with pytest.raises(SpecError, match="must be one of rehash, persistent"):
        split({"a": 1}, sticky={"cookie": {"name": "sid"}, "mode": "forever"})
    with pytest.raises(ValueError, match="needs the cookie keys"):
        decide(
            split({"a": 1}), Request(authority="", cookie_lines=[], request_id="r", headers={}), minter=AffinityMinter()
        )
    with pytest.raises(SpecError, match="at least 16"):
        CookieSigner(b"short")
    assert CookieSigner.from_text(b"a" * 16 + b"\n" + b"b" * 16 + b"\n") is not None
    with pytest.raises(SpecError, match="1 or 2"):
        CookieSigner.from_text(b"")


def test_the_mode_crosses_the_publish_api() -> None:
    gen = Generation(1, (split({"blue": 1, "green": 1}),))
    msg = generation_to_proto(gen)
    assert msg.splits[0].persistent
    assert generation_from_proto(msg).splits[0].persistent
    msg.splits[0].ClearField("cookie")
    with pytest.raises(SpecError, match=r"persistent needs sticky\.cookie"):
        generation_from_proto(msg)


def test_plan_shows_every_mode_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    from trafficsplit.cli.main import main

    assert main(["plan", "--from", "a=50,b=30,c=20", "--to", "a=40,b=30,c=30"]) == 0
    out = capsys.readouterr().out
    assert "assignment hash moves 20.00%, assignment minimal moves 10.00%" in out
    assert "sticky.mode persistent moves 0.00% of existing sessions: none" in out
    assert main(["plan", "--from", "blue=100,green=0", "--to", "blue=0,green=100", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["persistent"]["moved_share"] == 1.0 and doc["minimal"]["moved_share"] == 1.0
    assert persistent_moved_share(Weights.of([("a", 3), ("b", 1)]), Weights.of([("a", 3), ("c", 1)])) == Fraction(1, 4)


def drained(weights: Mapping[str, int], drain: Sequence[str], down: Sequence[str] = ()) -> CompiledSplit:
    """The split with the named weight-0 backends marked `drain: true`."""
    spec = {
        "hosts": ["app.example"],
        "backends": [{"name": n, "weight": w, **({"drain": True} if n in drain else {})} for n, w in weights.items()],
        "sticky": {"cookie": {"name": "sid"}, "mode": "persistent"},
    }
    eps = {n: [Endpoint("10.0.0.1", 80, ready=n not in down)] for n in weights}
    return compile_split(parse_split("prod", "app", spec), eps)


def test_a_drain_keeps_every_session_on_the_draining_backend_while_new_ones_follow_the_weights() -> None:
    signer = CookieSigner(K1)
    cookies = sessions(split({"blue": 100, "green": 0}), signer, 200)
    draining = drained({"blue": 0, "green": 100}, drain=["blue"])
    kept = [run(draining, signer, c) for c in cookies]
    assert all(d.backend.name == "blue" and d.path is DecisionPath.PINNED and d.set_cookie is None for d in kept)
    fresh = [run(draining, signer, minter=AffinityMinter(lambda: 2, i)) for i in range(200)]
    assert {d.backend.name for d in fresh} == {"green"}  # weight 0: no new session goes to blue
    # A draining backend that loses its endpoints fails its sessions over, as any pinned backend does.
    gone = [run(drained({"blue": 0, "green": 100}, drain=["blue"], down=["blue"]), signer, c) for c in cookies]
    assert {d.backend.name for d in gone} == {"green"} and all(".green." in cookie_of(d) for d in gone)


def test_drain_needs_weight_0_and_persistent_mode_naming_the_field() -> None:
    with pytest.raises(SpecError, match=r"spec\.backends\[0\]\.drain: a draining backend needs weight 0, got 10"):
        drained({"blue": 10, "green": 90}, drain=["blue"])
    with pytest.raises(SpecError, match=r"spec\.backends\[0\]\.drain: needs spec\.sticky\.mode: persistent"):
        parse_split(
            "prod",
            "app",
            {
                "hosts": ["a.example"],
                "backends": [{"name": "blue", "weight": 0, "drain": True}, {"name": "green", "weight": 1}],
                "sticky": {"cookie": {"name": "sid"}},
            },
        )


def test_drain_crosses_the_publish_api_and_the_receiver_checks_it() -> None:
    gen = Generation(1, (drained({"blue": 0, "green": 100}, drain=["blue"]),))
    msg = generation_to_proto(gen)
    assert [b.drain for b in msg.splits[0].backends] == [True, False]
    assert [b.drain for b in generation_from_proto(msg).splits[0].backends] == [True, False]
    msg.splits[0].backends[0].weight = 5
    with pytest.raises(SpecError, match="a draining backend needs weight 0"):
        generation_from_proto(msg)
    msg.splits[0].backends[0].weight = 0
    msg.splits[0].persistent = False
    with pytest.raises(SpecError, match=r"needs spec\.sticky\.mode: persistent"):
        generation_from_proto(msg)


def test_plan_counts_a_draining_backends_sessions_as_staying(capsys: pytest.CaptureFixture[str]) -> None:
    from trafficsplit.cli.main import main

    assert main(["plan", "--from", "blue=100,green=0", "--to", "blue=0,green=100", "--drain", "blue"]) == 0
    out = capsys.readouterr().out
    assert "sticky.mode persistent moves 0.00% of existing sessions: none" in out
    assert "blue drain (sessions stay until idle, then Drained=True)" in out
    assert main(["plan", "--from", "blue=100,green=0", "--to", "blue=0,green=100", "--drain", "green"]) == 2
    assert "--drain: green must be in --to at weight 0" in capsys.readouterr().err
    before = Weights.of([("blue", 100), ("green", 0)])
    after = Weights.of([("blue", 0), ("green", 100)])
    assert persistent_moved_share(before, after) == 1
    assert persistent_moved_share(before, after, draining=frozenset({"blue"})) == 0


@pytest.mark.parametrize(
    "stale",
    [
        "not.a.seal",  # sealed by another key, or edited
        "000000000001.blue.AAAAAAAAAAAAAAAAAAAAAA",  # a forged seal
        "garbage",
    ],
)
def test_a_stale_same_name_cookie_before_a_valid_sealed_one_does_not_re_session(stale: str) -> None:
    """A browser lists a cookie set on a narrower Path first (RFC 6265 5.4): a stale `sid` there must not shadow the
    session's valid sealed `sid` (before: the first value was the only one read, so the session was re-sessioned on
    every request, the stale cookie never replaced)."""
    signer = CookieSigner(K1)
    s = split({"blue": 50, "green": 50})
    cookie = sessions(s, signer, 1)[0]
    pinned = run(s, signer, cookie).backend.name
    for lines in ([f"sid={stale}; sid={cookie}"], [f"sid={stale}", f"other=1; sid={cookie}"]):
        d = decide(
            s,
            Request(authority="", cookie_lines=lines, request_id="rid", headers={}),
            minter=AffinityMinter(lambda: 1),
            signer=signer,
        )
        assert (d.key_source, d.path, d.backend.name, d.set_cookie) == (
            KeySource.COOKIE,
            DecisionPath.PINNED,
            pinned,
            None,
        ), lines
    # A valid seal is preferred to a bare (rehash-mode) key before it, too; with no valid one the session re-sessions.
    bare = "00000000000a00000000000b"
    d = decide(
        s,
        Request(authority="", cookie_lines=[f"sid={bare}; sid={cookie}"], request_id="r", headers={}),
        minter=AffinityMinter(lambda: 1),
        signer=signer,
    )
    assert (d.key_source, d.path, d.set_cookie) == (KeySource.COOKIE, DecisionPath.PINNED, None)
    d = decide(
        s,
        Request(authority="", cookie_lines=[f"sid={stale}; sid={stale}"], request_id="r", headers={}),
        minter=AffinityMinter(lambda: 1),
        signer=signer,
    )
    assert d.key_source is KeySource.MINTED and d.set_cookie is not None


def test_same_name_cookies_past_the_bound_are_not_tried() -> None:
    """Each candidate costs an HMAC: a Cookie header of thousands of duplicates must not multiply the work."""
    signer = CookieSigner(K1)
    s = split({"blue": 50, "green": 50})
    cookie = sessions(s, signer, 1)[0]
    lines = ["; ".join([*(f"sid=stale{i}" for i in range(MAX_SAME_NAME_COOKIES)), f"sid={cookie}"])]
    d = decide(
        s,
        Request(authority="", cookie_lines=lines, request_id="r", headers={}),
        minter=AffinityMinter(lambda: 1),
        signer=signer,
    )
    assert d.key_source is KeySource.MINTED
    d = decide(
        s,
        Request(authority="", cookie_lines=lines[0].split("; ", 1)[1:], request_id="r", headers={}),
        minter=AffinityMinter(lambda: 1),
        signer=signer,
    )
    assert (d.key_source, d.path) == (KeySource.COOKIE, DecisionPath.PINNED)
