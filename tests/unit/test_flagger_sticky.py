"""Flagger's sticky canary served unchanged: the HTTPRoute Flagger v1.44.0 writes for `analysis.sessionAffinity`
(tests/testdata/gatewayapi/flagger-sticky.in.yaml, derived from pkg/router/gateway_api.go) through the translation
and the decision code the data plane runs: the request headers read as both ext_proc transports read them
(`wire.processing.request_view_of`), the route table and the rule's split (`core.decide.serve.ServedRoutes`), and
the response edits Envoy applies per backend cluster (`response_modifiers`).

Flagger's design: a cookie-less request is split by the weighted rule's weights; a response from the canary carries
`Set-Cookie: flagger-cookie=<value>; Max-Age=<maxAge>` (a backendRef-level ResponseHeaderModifier); a request that
sends the cookie back meets the earlier rule (a `Cookie` RegularExpression header match, which outranks the bare
prefix) whose split is primary 0 / canary 100. Each step changes only the weighted rule's weights; at weight 0
(promotion or rollback) the cookie rule sends to the primary and expires the cookie.
"""

from __future__ import annotations

from collections.abc import Sequence
from http.cookies import SimpleCookie
from typing import Any

import pytest
from scipy.stats import chisquare

from tests.support.flagger_route import (
    CANARY,
    COOKIE,
    EXPIRE_COOKIE,
    HOST,
    PRIMARY,
    PRIMARY_COOKIE,
    PRIMARY_SET_COOKIE,
    SET_COOKIE,
    fixture,
    flagger_step,
    flagger_weight_zero,
    flagger_with_primary_cookie,
)
from tests.unit.gatewayapi import inputs_of, status_doc
from trafficsplit.core.decide.request import Request
from trafficsplit.core.decide.serve import (
    Refused,
    Routed,
    ServedRoutes,
    merged_edits,
    response_modifiers,
)
from trafficsplit.core.gatewayapi.translate import Translation, translate
from trafficsplit.core.model.cookie import AffinityMinter
from trafficsplit.wire.processing import request_view_of

P_MIN = 0.001


def translated(bodies: Sequence[dict[str, Any]]) -> Translation:
    inputs, invalid = inputs_of(bodies)
    assert invalid == []
    return translate(inputs)


class Gateway:
    """One generation of the fixture's Gateway as its data plane decides: the listener port's route table, then the
    response edits Envoy adds for the picked backend's cluster."""

    def __init__(self, bodies: Sequence[dict[str, Any]]) -> None:
        self.t = translated(bodies)
        self.served = ServedRoutes(self.t.listeners, self.t.actions)
        self.responses = response_modifiers(self.t.actions)

    def request(self, request_id: str, headers: Sequence[tuple[str, str]] = ()) -> tuple[Routed, list[str]]:
        """The decision for one request, and the Set-Cookie values its response gets."""
        view = request_view_of(
            [(":authority", HOST), (":path", "/"), (":method", "GET"), ("x-request-id", request_id), *headers]
        )
        out = self.served.route(80, view, minter=AffinityMinter())
        assert isinstance(out, Routed), out
        edits = merged_edits(self.responses.get(out.decision.backend.cluster, ()))
        set_cookies = [v for n, v in (*edits.set, *edits.add) if n == "set-cookie"]
        # Our own cookie (a split's sessionPersistence) is never minted here: Flagger's rules have none.
        assert out.decision.set_cookie is None
        return out, set_cookies


def browser_cookie(set_cookie: str) -> str:
    """What a browser sends back for one Set-Cookie value: `name=value`."""
    jar: SimpleCookie = SimpleCookie()
    jar.load(set_cookie)
    ((name, morsel),) = jar.items()
    return f"{name}={morsel.value}"


def test_the_translation_accepts_every_rule_of_flaggers_route() -> None:
    bodies = fixture()
    inputs, invalid = inputs_of(bodies)
    assert invalid == []
    t = translate(inputs)
    status = status_doc(t, invalid)["httpRoutes"]["test/podinfo"]["parents"]
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in status[0]["conditions"]] == [
        ("Accepted", "True", "Accepted", ""),
        ("ResolvedRefs", "True", "ResolvedRefs", ""),
    ]
    assert sorted(a.rule for a in t.actions if a.split is not None) == [0, 1]  # no rule dropped


def test_a_cookieless_request_is_split_by_the_weights_and_the_canary_sets_flaggers_cookie() -> None:
    gw = Gateway(fixture())
    n = 5_000
    counts = {PRIMARY: 0, CANARY: 0}
    for i in range(n):
        rid = f"req-{i:05d}"
        out, set_cookies = gw.request(rid)
        backend = out.decision.backend.name
        counts[backend] += 1
        assert (out.entry.rule, backend) == (1, out.split.weights.pick(rid))  # the weighted rule, the core's pick
        assert set_cookies == ([SET_COOKIE] if backend == CANARY else [])
    result = chisquare([counts[PRIMARY], counts[CANARY]], [0.9 * n, 0.1 * n])
    print(f"\nFlagger step 10, {n} cookie-less requests: {counts}, chi2={result.statistic:.3f}, p={result.pvalue:.3f}")
    assert result.pvalue > P_MIN, counts


@pytest.mark.parametrize(
    "cookie_lines",
    [
        [COOKIE],
        [f"session=abc; {COOKIE}; theme=dark"],
        ["session=abc", COOKIE],  # two Cookie lines (HTTP/1.1 clients, HTTP/2 crumbs): read as one, `; `-joined
    ],
)
def test_the_cookie_pins_the_canary_across_every_weight_change(cookie_lines: list[str]) -> None:
    base = fixture()
    # A session the weighted rule sent to the canary gets Flagger's cookie; its browser sends it back.
    first = Gateway(base)
    rid = next(f"first-{i}" for i in range(1000) if first.request(f"first-{i}")[0].decision.backend.name == CANARY)
    _, (set_cookie,) = first.request(rid)
    assert browser_cookie(set_cookie) == COOKIE
    headers = [("cookie", line) for line in cookie_lines]
    for weight in (10, 20, 30, 40, 50):  # stepWeight 10 up to maxWeight 50: Flagger's steps
        gw = Gateway(base if weight == 10 else flagger_step(base, weight))
        for i in range(200):  # every request, whatever its request id
            out, set_cookies = gw.request(f"w{weight}-{i}", headers)
            assert (out.entry.rule, out.decision.backend.name) == (0, CANARY), (weight, i)
            assert set_cookies == []  # the cookie rule's backendRefs carry no filter: the cookie is not re-set


def test_without_the_cookie_or_with_another_value_the_weights_decide() -> None:
    gw = Gateway(flagger_step(fixture(), 50))
    for headers in ([], [("cookie", "flagger-cookie=SomeOther1")], [("cookie", "JzFTmHpLqR=flagger-cookie")]):
        rules = {gw.request(f"r-{i}", headers)[0].entry.rule for i in range(50)}
        assert rules == {1}, headers


def test_at_weight_zero_the_cookie_returns_to_the_primary_and_is_expired() -> None:
    gw = Gateway(flagger_weight_zero(fixture()))
    out, set_cookies = gw.request("after", [("cookie", COOKIE)])
    assert (out.entry.rule, out.decision.backend.name) == (0, PRIMARY)
    assert set_cookies == [EXPIRE_COOKIE]
    cookieless, set_cookies = gw.request("new")
    assert (cookieless.entry.rule, cookieless.decision.backend.name, set_cookies) == (1, PRIMARY, [])


def test_a_request_on_another_host_is_not_flaggers() -> None:
    gw = Gateway(fixture())
    request = Request(authority="other.example.com", cookie_lines=(COOKIE,), request_id="x", headers={})
    out = gw.served.route(80, request, minter=AffinityMinter())
    assert isinstance(out, Refused) and out.status == 404


def test_a_header_match_on_cookie_reads_every_cookie_line_joined() -> None:
    """A route's `Cookie` header match sees the request's Cookie lines as one value, `; `-joined as RFC 9113 §8.2.3
    rejoins HTTP/2 crumbs; the cookie lines stay as they came for the split's own cookie."""
    view = request_view_of([("cookie", "a=1"), ("x-other", "y"), ("cookie", "b=2")])
    assert view.header("cookie") == "a=1; b=2"
    assert view.cookie_lines == ("a=1", "b=2")
    assert request_view_of([("x-other", "y")]).header("cookie") is None


def test_with_a_primary_cookie_each_side_keeps_its_users_across_the_steps() -> None:
    """`primaryCookieName` set: the primary's responses set Flagger's primary cookie, and its holders stay on the
    primary while the canary's weight grows, as the canary cookie's holders stay on the canary."""
    base = fixture()
    gw = Gateway(flagger_with_primary_cookie(base, 10))
    firsts = [gw.request(f"p-{i}") for i in range(400)]
    for out, set_cookies in firsts:
        want = SET_COOKIE if out.decision.backend.name == CANARY else PRIMARY_SET_COOKIE
        assert (out.entry.rule, set_cookies) == (2, [want])
    for weight in (10, 30, 50):
        gw = Gateway(flagger_with_primary_cookie(base, weight))
        for i in range(100):
            on_primary, _ = gw.request(f"pp-{weight}-{i}", [("cookie", f"a=b; {PRIMARY_COOKIE}")])
            on_canary, _ = gw.request(f"pc-{weight}-{i}", [("cookie", COOKIE)])
            assert (on_primary.entry.rule, on_primary.decision.backend.name) == (1, PRIMARY)
            assert (on_canary.entry.rule, on_canary.decision.backend.name) == (0, CANARY)
