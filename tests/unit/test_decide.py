"""docs/spec.md §3 and §6: key choice, match rules before the pick, failover that moves only the failed branch,
disclosure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.decide.request import Request
from trafficsplit.core.decide.split import Decision, DecisionPath, KeySource, decide
from trafficsplit.core.model.compiled import CompiledSplit, Endpoint
from trafficsplit.core.model.cookie import AffinityMinter, read_cookie
from trafficsplit.core.model.weights import Weights

OK = "0193f1c2a4b5000000000001"
NOW = 1_700_000_000_000


def split(
    weights: Sequence[tuple[str, int]] = (("stable", 95), ("canary", 5)),
    down: set[str] | None = None,
    **extra: Any,
) -> CompiledSplit:
    spec = {"hosts": ["shop.example.com"], "backends": [{"name": n, "weight": w} for n, w in weights], **extra}
    eps: Mapping[str, Sequence[Endpoint]] = {
        n: [Endpoint("10.0.0.1", 80, ready=n not in (down or set()))] for n, _ in weights
    }
    return compile_split(parse_split("prod", "shop", spec), eps)


STICKY: dict[str, Any] = {"sticky": {"cookie": {"name": "sid"}}}


def run(
    s: CompiledSplit, cookies: Sequence[str] = (), rid: str = "rid-1", headers: Mapping[str, str] | None = None
) -> Decision:
    h = dict(headers or {})
    return decide(
        s,
        Request(authority="", cookie_lines=cookies, request_id=rid, headers=h),
        minter=AffinityMinter(clock_ms=lambda: NOW, start=0),
    )


def test_without_cookie_config_the_key_is_the_request_id() -> None:
    d = run(split(), cookies=[f"sid={OK}"], rid="user-42")
    assert (d.key, d.key_source, d.path, d.set_cookie) == ("user-42", KeySource.REQUEST_ID, DecisionPath.WEIGHTED, None)
    assert d.backend.name == split().weights.pick("user-42")


def test_a_valid_cookie_is_the_key() -> None:
    d = run(split(**STICKY), cookies=[f"a=1; sid={OK}"])
    assert (d.key, d.key_source, d.set_cookie) == (OK, KeySource.COOKIE, None)
    assert d.backend.name == "stable"  # docs/spec.md §1 vector: slot 38 of 100


def test_no_or_malformed_cookie_mints_and_the_minted_value_is_the_key() -> None:
    for cookies in ([], ["sid=" + "x" * 300], ["sid=é"]):
        d = run(split(**STICKY), cookies=cookies)
        assert d.key_source is KeySource.MINTED
        assert d.key == f"{NOW:012x}{1:012x}"
        assert d.set_cookie is not None and d.set_cookie.startswith(f"sid={d.key}; Path=/")
        # The next request of the session carries the cookie and lands on the same backend.
        again = run(split(**STICKY), cookies=[d.set_cookie.split(";")[0]])
        assert again.key_source is KeySource.COOKIE and again.backend == d.backend


MATCHES: dict[str, Any] = {
    "matches": [
        {"header": {"name": "x-canary", "value": "1"}, "backend": "canary"},
        {"cookie": {"name": "beta", "value": "y.*", "type": "RegularExpression"}, "backend": "canary"},
    ]
}


@settings(deadline=None)  # a correctness property: a shared, loaded machine must not fail it on time
@given(st.text(max_size=30))
def test_match_rules_decide_before_the_pick(key: str) -> None:
    s = split((("stable", 100), ("canary", 0)), **STICKY, **MATCHES)
    assert run(s, cookies=[f"sid={OK}"], rid=key, headers={"x-canary": "1"}).path is DecisionPath.MATCH
    d = run(s, cookies=[f"sid={OK}; beta=yes"], rid=key)
    assert (d.backend.name, d.path, d.key_source) == ("canary", DecisionPath.MATCH, KeySource.COOKIE)
    assert run(s, cookies=["beta=no"], rid=key).backend.name == "stable"


def test_a_match_whose_backend_is_down_is_passed_over() -> None:
    s = split(down={"canary"}, **MATCHES)
    d = run(s, headers={"x-canary": "1"})
    assert d.backend.name == "stable" and d.path is DecisionPath.MATCH_PASSED_OVER
    # A later rule whose backend is ready still decides: the path is then a plain match.
    s = split(
        down={"canary"},
        matches=[*MATCHES["matches"], {"header": {"name": "x-canary", "value": "1"}, "backend": "stable"}],
    )
    assert run(s, headers={"x-canary": "1"}).path is DecisionPath.MATCH


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(0, 50), min_size=2, max_size=5).filter(lambda ws: sum(ws) > 0),
    st.data(),
)
def test_failover_moves_only_the_failed_backends_keys_and_they_return(ws: list[int], data: st.DataObject) -> None:
    names = [f"b{i}" for i in range(len(ws))]
    weights = list(zip(names, ws, strict=True))
    live = [n for n, w in weights if w > 0]
    down = data.draw(st.sampled_from(live))
    healthy, failed = split(weights), split(weights, down={down})
    keys = [f"k{i}" for i in range(300)]
    for key in keys:
        before, during, after = run(healthy, rid=key), run(failed, rid=key), run(split(weights), rid=key)
        if before.backend.name != down:
            assert during.backend.name == before.backend.name and during.path is DecisionPath.WEIGHTED
        elif len(live) > 1:
            assert during.backend.name != down and during.path is DecisionPath.FAILOVER
            # Re-picked over the eligible backends with the same hash, their weights, their order: the plain pick
            # over the list without the failed backend (an oracle independent of the precomputed failover weights).
            assert during.backend.name == Weights.of((n, w) for n, w in weights if n != down).pick(key)
        assert after.backend.name == before.backend.name  # recovered: everyone is back


def test_all_backends_down_keeps_the_weighted_pick() -> None:
    s = split(down={"stable", "canary"})
    assert s.failover is None
    assert run(s).path is DecisionPath.WEIGHTED


def test_disclosure_fields() -> None:
    s = split(**STICKY, debugHeaders=True)
    assert s.debug_headers and s.sticky and s.key == "prod/shop"
    d = run(s, cookies=[f"sid={OK}"])
    assert (d.key_source.value, d.path.value) == ("cookie", "weighted")
    assert d.backend.cluster == "prod/shop/stable"
    assert {k.value for k in KeySource} == {"header", "cookie", "minted", "request-id"}
    assert {p.value for p in DecisionPath} == {"weighted", "match", "match-passed-over", "failover", "pinned"}


def test_match_cookie_reading_uses_the_same_reader() -> None:
    # docs/spec.md §4's reading rules apply to a match cookie too: any Cookie line, whitespace trimmed, quotes removed,
    # an invalid value skipped in favour of a later valid duplicate.
    s = split((("stable", 100), ("canary", 0)), **MATCHES)
    for cookies in (["a=1", ' beta = "yes" '], ["beta=é; beta=yes"]):
        assert read_cookie(cookies, "beta") == "yes"
        d = run(s, cookies=cookies)
        assert (d.backend.name, d.path) == ("canary", DecisionPath.MATCH), cookies
    assert run(s, cookies=["beta=é"]).path is DecisionPath.WEIGHTED
