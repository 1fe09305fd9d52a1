"""HTTPRoute `sessionPersistence.type: Header` (GEP-1619): the translation, and the data plane's decisions through
`decide` and the ext_proc reply. The session is carried in the request header `sessionName`; the gateway issues the
sealed session (`KEY.BACKEND.MAC`) in a response header of that name."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.unit.test_gateway_translate import conditions, one_rule_route, route, run
from trafficsplit.core.decide.request import Request
from trafficsplit.core.decide.split import Decision, DecisionPath, KeySource, decide
from trafficsplit.core.gatewayapi.translate import gateway_content
from trafficsplit.core.model.compiled import CompiledSplit
from trafficsplit.core.model.cookie import AffinityMinter
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.persistent import MAC_CHARS, MIN_KEY_BYTES, CookieSigner
from trafficsplit.wire.envoy import session_meta_key
from trafficsplit.wire.gateway_routes import route_configurations
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto
from trafficsplit.wire.processing import DecisionReplies

SIGNER = CookieSigner(b"k" * MIN_KEY_BYTES)
HEADER = "x-session"


def header_generation(*backends: tuple[str, int], session: dict[str, Any] | None = None) -> Generation:
    """The generation of a one-rule route with Header sessionPersistence at these weights (the same route each
    time), as the Gateway's data plane holds it."""
    t = one_rule_route(backends, session or {"type": "Header", "sessionName": "X-Session"})
    content = gateway_content(t, "ns/gw")
    return Generation(1, content.splits, content.routes)


def header_split(*backends: tuple[str, int], session: dict[str, Any] | None = None) -> CompiledSplit:
    (split,) = header_generation(*backends, session=session).splits
    return split


def ask(split: CompiledSplit, value: str | None, minter: AffinityMinter) -> Decision:
    headers = {HEADER: value} if value is not None else {}
    return decide(
        split, Request(authority="", cookie_lines=[], request_id="rid", headers=headers), minter=minter, signer=SIGNER
    )


def visit(split: CompiledSplit, token: str | None, minter: AffinityMinter) -> tuple[str, str | None]:
    """One request: the backend, and the token the client holds afterwards (the issued one, else its own)."""
    d = ask(split, token, minter)
    return d.backend.name, d.session_token or token


def sessions(split: CompiledSplit, n: int) -> list[tuple[str, str]]:
    minter = AffinityMinter()
    out = []
    for _ in range(n):
        backend, token = visit(split, None, minter)
        assert token is not None
        out.append((backend, token))
    return out


def test_header_persistence_is_a_persistent_split_keyed_by_the_lowercased_session_name() -> None:
    split = header_split(("a", 90), ("b", 0))
    assert split.persistent and split.cookie is None and split.key_header == HEADER
    assert [(b.name, b.drain) for b in split.backends] == [("a", False), ("b", True)]  # weight 0 keeps its sessions
    default = header_split(("a", 1), session={"type": "Header"})
    assert default.key_header is not None and default.key_header.startswith("ts-")


def test_a_new_session_gets_a_sealed_token_and_sending_it_back_keeps_the_backend() -> None:
    split = header_split(("a", 50), ("b", 50))
    minter = AffinityMinter()
    first = ask(split, None, minter)
    assert first.key_source is KeySource.MINTED and first.session_token is not None and first.set_cookie is None
    key, backend, mac = first.session_token.split(".")
    assert (key, backend, len(mac)) == (first.key, first.backend.name, MAC_CHARS)
    again = ask(split, first.session_token, minter)
    assert again.backend.name == backend and again.path is DecisionPath.PINNED and again.key_source is KeySource.HEADER
    assert again.session_token is None  # the client's token still holds: nothing to send again


def test_a_weight_change_moves_no_header_session_and_new_sessions_follow_the_new_weights() -> None:
    before = sessions(header_split(("a", 90), ("b", 10)), 1000)
    counts = Counter(b for b, _ in before)
    assert 850 < counts["a"] < 950 and counts["b"] > 50
    after = header_split(("a", 10), ("b", 90))
    minter = AffinityMinter()
    moved = [b for b, t in before if visit(after, t, minter)[0] != b]
    assert moved == []
    fresh = Counter(b for b, _ in sessions(after, 1000))
    assert 50 < fresh["a"] < 150


def test_weight_0_keeps_its_header_sessions_and_takes_no_new_one_removal_moves_them() -> None:
    before = sessions(header_split(("a", 50), ("b", 50)), 400)
    on_b = [t for b, t in before if b == "b"]
    assert len(on_b) > 100
    minter = AffinityMinter()
    assert {visit(header_split(("a", 50), ("b", 0)), t, minter)[0] for t in on_b} == {"b"}
    assert Counter(b for b, _ in sessions(header_split(("a", 50), ("b", 0)), 300)) == {"a": 300}
    removed = header_split(("a", 50))
    assert {visit(removed, t, minter)[0] for t in on_b} == {"a"}


def test_a_key_of_the_clients_own_is_picked_by_its_hash_then_sealed() -> None:
    split = header_split(("a", 50), ("b", 50))
    minter = AffinityMinter()
    d = ask(split, "user-42", minter)
    assert d.key == "user-42" and d.key_source is KeySource.HEADER and d.path is DecisionPath.WEIGHTED
    assert d.session_token is not None and d.session_token.startswith(f"user-42.{d.backend.name}.")
    # A key that cannot travel in a token (a `.` would split it) is still the pick's key, and no token is issued.
    dotted = ask(split, "user.42", minter)
    assert dotted.key == "user.42" and dotted.session_token is None


def test_a_forged_token_gets_a_weighted_pick_never_the_backend_it_names() -> None:
    split = header_split(("a", 50), ("b", 50))
    minter = AffinityMinter()
    for k in range(200):
        forged = f"{k:024x}.b.{'A' * MAC_CHARS}"
        d = ask(split, forged, minter)
        assert d.path is DecisionPath.WEIGHTED and d.key == forged  # its hash decides, as any key's
    picks = Counter(ask(split, f"{k:024x}.b.{'A' * MAC_CHARS}", minter).backend.name for k in range(400))
    assert 140 < picks["a"] < 260  # about half go to a: the forged backend is not honoured


@pytest.mark.parametrize(
    ("session", "why"),
    [
        ({"type": "Header", "sessionName": "x-timed", "absoluteTimeout": "10m"}, "not supported with type Header"),
        ({"type": "Header", "sessionName": "Content-Length"}, "'content-length' cannot carry a session the gateway"),
        ({"type": "Header", "sessionName": "x-trafficsplit-cluster"}, "cannot carry a session the gateway issues"),
        ({"type": "Header", "sessionName": "cookie"}, "cannot carry a sticky key"),
        ({"type": "Header", "sessionName": "x session"}, "is not a valid header name"),
        ({"type": "Header", "sessionName": "x\r\nset-cookie"}, "is not a valid header name"),
    ],
)
def test_what_header_persistence_refuses_drops_that_rule_alone(session: dict[str, Any], why: str) -> None:
    t = run(
        route(
            rules=[
                {"backendRefs": [{"name": "a", "port": 80}], "sessionPersistence": session},
                {"matches": [{"path": {"value": "/ok"}}], "backendRefs": [{"name": "a", "port": 80}]},
            ]
        )
    )
    assert [a.rule for a in t.actions] == [1]
    assert conditions(t)["Accepted"] == ("True", "Accepted")
    (parent,) = t.routes[0].parents
    partly = next(c for c in parent.conditions if c.type == "PartiallyInvalid")
    assert "rules[0].sessionPersistence." in partly.message and why in partly.message


def test_the_receiver_rebuilds_the_header_session_and_refuses_a_name_that_frames_the_message() -> None:
    gen = header_generation(("a", 90), ("b", 10))
    (split,) = gen.splits
    (back,) = generation_from_proto(generation_to_proto(gen)).splits
    assert back == split and back.persistent and back.key_header == HEADER and back.cookie is None

    def compiled(persistent: bool) -> CompiledSplit:
        return CompiledSplit(
            namespace="ns",
            name="r",
            hosts=(),
            backends=split.backends,
            key_header="transfer-encoding",
            persistent=persistent,
        )

    with pytest.raises(SpecError, match="cannot carry a session the gateway issues"):
        compiled(persistent=True)
    # A key header that only keys the pick (never sent back) keeps the TrafficSplit rule: a token, not the cookie.
    assert compiled(persistent=False).key_header == "transfer-encoding"


def test_the_token_reaches_envoy_as_the_response_header_of_that_name() -> None:
    gen = header_generation(("a", 50), ("b", 50))
    (split,) = gen.splits
    replies = DecisionReplies(gen)
    d = ask(split, None, AffinityMinter())
    assert d.session_token is not None
    assert replies.per_request(d, split)[session_meta_key(HEADER)] == d.session_token
    pinned = ask(split, d.session_token, AffinityMinter())
    assert session_meta_key(HEADER) not in replies.per_request(pinned, split)
    (config,) = route_configurations(gen).values()
    added = {h.header.key: h.header.value for h in config.virtual_hosts[0].response_headers_to_add}
    assert added[HEADER] == f"%DYNAMIC_METADATA(trafficsplit:{session_meta_key(HEADER)})%"
