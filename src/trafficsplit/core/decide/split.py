"""The per-request decision (docs/spec.md §3, §6): which key, which backend, and why.

Order: the key is chosen first (the key header, else the cookie, else minted, else the request id); then an explicit
match rule decides, else the weighted pick over the key's hash; a pick that lands on an ineligible backend is
re-picked over the eligible ones with the same hash. Every decision carries its path so the dataplane can count and
disclose it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import NamedTuple

from trafficsplit.core.decide.request import Request
from trafficsplit.core.model.assignment import SLOTS
from trafficsplit.core.model.compiled import CompiledBackend, CompiledSplit, MatchKind
from trafficsplit.core.model.cookie import AffinityMinter, read_cookie, read_cookies, render_set_cookie
from trafficsplit.core.model.hashing import key_hash
from trafficsplit.core.model.headervalue import is_header_value
from trafficsplit.core.model.limits import MAX_KEY_HEADER_VALUE
from trafficsplit.core.model.persistent import CookieSigner


class KeySource(StrEnum):
    HEADER = "header"  # sticky.header: the client names its own key (a user id, an API key hash)
    COOKIE = "cookie"
    MINTED = "minted"
    REQUEST_ID = "request-id"


class DecisionPath(StrEnum):
    WEIGHTED = "weighted"
    MATCH = "match"
    MATCH_PASSED_OVER = "match-passed-over"  # a rule matched but its backend was not ready; the pick decided
    FAILOVER = "failover"
    PINNED = "pinned"  # sticky.mode: persistent: the backend the session's sealed cookie names


class Decision(NamedTuple):
    """Immutable; a NamedTuple rather than a frozen dataclass because one is built per request, and a frozen
    dataclass's __init__ (object.__setattr__ per field) costs about twice as much (bench/bench_core.py)."""

    backend: CompiledBackend
    key: str
    key_source: KeySource
    path: DecisionPath
    set_cookie: str | None = None  # the Set-Cookie value when the key was minted
    endpoint: str | None = None  # the pod (`host:port`) on the backend ring when the split pins pods (docs/spec.md §5)
    key_hash: int = 0  # key_hash(key), for whoever records the decision (the live stickiness bill)
    # A header-carried persistent session (GEP-1619 `type: Header`): the sealed session the response carries in the
    # split's key header, for the client to send back; None when the request's own token still holds.
    session_token: str | None = None


def choose_key(
    split: CompiledSplit,
    cookie_lines: Sequence[str],
    request_id: str,
    minter: AffinityMinter,
    header: Callable[[str], str | None] = lambda _: None,
) -> tuple[str, KeySource]:
    if split.key_header is not None:
        # An empty or oversized value counts as absent: the request falls back to the cookie (bounded hashing work).
        value = header(split.key_header)
        if value and len(value) <= MAX_KEY_HEADER_VALUE:
            return value, KeySource.HEADER
    if split.cookie is None:
        return request_id, KeySource.REQUEST_ID
    value = read_cookie(cookie_lines, split.cookie.name)
    if value is not None:
        return value, KeySource.COOKIE
    return minter.mint(), KeySource.MINTED


def pick_backend(split: CompiledSplit, h: int) -> tuple[int, DecisionPath]:
    """The weighted pick for hash `h` (the slot table under spec.assignment: minimal), with docs/spec.md §6 failover:
    only keys whose backend is ineligible move."""
    i = split.weights.pick_index(h) if split.table is None else split.table.owners[h % SLOTS]
    if split.failover is None or split.backends[i].eligible:
        return i, DecisionPath.WEIGHTED
    weights, index = split.failover
    return index[weights.pick_index(h)], DecisionPath.FAILOVER


class _Matched(NamedTuple):
    """What a split's match rules decide for one request (docs/spec.md §6)."""

    # The backend index of the first rule that matched and whose backend is eligible; None: the pick decides.
    backend: int | None
    passed_over: bool  # a rule matched whose backend was not eligible


_NO_MATCH = _Matched(None, passed_over=False)


def _first_match(split: CompiledSplit, cookie_lines: Sequence[str], header: Callable[[str], str | None]) -> _Matched:
    """The first match rule that decides the request, in both sticky modes. A rule whose backend cannot serve is passed
    over (availability ranks above an A/B assignment), and the decision says so, whatever the pick then does."""
    passed_over = False
    for m, backend in zip(split.matches, split.match_backends, strict=True):
        value = header(m.name) if m.kind is MatchKind.HEADER else read_cookie(cookie_lines, m.name)
        if m.matches(value):
            if split.backends[backend].eligible:
                return _Matched(backend, passed_over)
            passed_over = True
    return _Matched(None, passed_over) if passed_over else _NO_MATCH


def decide(
    split: CompiledSplit, request: Request, *, minter: AffinityMinter, signer: CookieSigner | None = None
) -> Decision:
    """Decide one request. `signer`: the replica's cookie keys, required by persistent splits (the publish receiver
    refuses them without one)."""
    cookie_lines, request_id, header = request.cookie_lines, request.request_id, request.header
    if split.persistent:
        if signer is None:
            raise ValueError(f"{split.key}: sticky.mode persistent needs the cookie keys (--cookie-key-file)")
        return _decide_persistent(split, cookie_lines, request_id, header, minter, signer)
    key, source = choose_key(split, cookie_lines, request_id, minter, header)
    set_cookie = render_set_cookie(split.cookie, key) if source is KeySource.MINTED and split.cookie else None
    h = key_hash(key)
    matched = _first_match(split, cookie_lines, header) if split.matches else _NO_MATCH
    if matched.backend is not None:
        i, path = matched.backend, DecisionPath.MATCH
    else:
        i, path = pick_backend(split, h)
        if matched.passed_over:
            path = DecisionPath.MATCH_PASSED_OVER
    return Decision(
        backend=split.backends[i],
        key=key,
        key_source=source,
        path=path,
        set_cookie=set_cookie,
        endpoint=_endpoint(split, i, h),
        key_hash=h,
    )


def _decide_persistent(
    split: CompiledSplit,
    cookie_lines: Sequence[str],
    request_id: str,
    header: Callable[[str], str | None],
    minter: AffinityMinter,
    signer: CookieSigner,
) -> Decision:
    """sticky.mode: persistent (core/model/persistent.py): a sealed session keeps its backend while that backend has
    weight (or drains) and is eligible; otherwise, and for new sessions, the weighted pick decides and the session is
    sealed
    to it. The seal travels in the cookie, or, for a split without one, in its key header (GEP-1619 `type: Header`).
    A seal that fails is a new session. Match rules decide first, as in rehash mode, without re-pinning."""
    if split.cookie is None:
        key, source, pinned, resign = _header_session(split, header, minter, signer)
    else:
        key, source, pinned, resign = _cookie_session(split, cookie_lines, request_id, header, minter, signer)
    h = key_hash(key)
    matched = _first_match(split, cookie_lines, header) if split.matches else _NO_MATCH
    if matched.backend is not None:
        i, path = matched.backend, DecisionPath.MATCH
    else:
        at = split.weights.names.index(pinned) if pinned in split.weights.names else -1
        if at >= 0 and (split.backends[at].weight > 0 or split.backends[at].drain) and split.backends[at].eligible:
            i, path = at, DecisionPath.PINNED
        else:
            i, path = pick_backend(split, h)
            if matched.passed_over:
                path = DecisionPath.MATCH_PASSED_OVER
    # A match decides this request only: the session stays sealed to what the weights (or its pin) give it.
    seal_to = split.backends[i].name if path is not DecisionPath.MATCH else pinned
    if seal_to is None:
        seal_to = split.backends[pick_backend(split, h)[0]].name
    reseal = source is KeySource.MINTED or resign or seal_to != pinned
    set_cookie = token = None
    if split.cookie is not None and source is not KeySource.HEADER and reseal:
        set_cookie = render_set_cookie(split.cookie, signer.seal(split.key, key, seal_to))
    elif split.cookie is None and reseal and _sealable(key):
        token = signer.seal(split.key, key, seal_to)
    return Decision(split.backends[i], key, source, path, set_cookie, _endpoint(split, i, h), h, token)


class _Session(NamedTuple):
    """A persistent split's session as the request presents it."""

    key: str
    source: KeySource
    pinned: str | None  # the backend its seal names (None: no valid seal)
    resign: bool  # whether the response re-seals it (new, or sealed with an older key)


def _cookie_session(
    split: CompiledSplit,
    cookie_lines: Sequence[str],
    request_id: str,
    header: Callable[[str], str | None],
    minter: AffinityMinter,
    signer: CookieSigner,
) -> _Session:
    key, source = choose_key(split, cookie_lines, request_id, minter, header)
    if source is KeySource.COOKIE and split.cookie is not None:
        # Every same-name value, not only the first: a stale one on a narrower Path must not shadow the valid seal.
        session = signer.open_any(split.key, read_cookies(cookie_lines, split.cookie.name))
        if session is None:  # tampered, or sealed with a key no longer accepted
            return _Session(minter.mint(), KeySource.MINTED, None, False)
        return _Session(session.key, source, session.backend, session.resign)
    return _Session(key, source, None, False)


def _header_session(
    split: CompiledSplit, header: Callable[[str], str | None], minter: AffinityMinter, signer: CookieSigner
) -> _Session:
    """A header-carried session: the key header holds the token the gateway issued (`KEY.BACKEND.MAC`), pinned to
    its backend; or a key of the client's own (sticky.header: its pick is the key's, then sealed in the response);
    or nothing, a new session with a minted key. An empty or oversized value counts as absent, as in `choose_key`."""
    assert split.key_header is not None  # persistent needs a cookie or a key header (compiled)
    value = header(split.key_header)
    if not value or len(value) > MAX_KEY_HEADER_VALUE:
        return _Session(minter.mint(), KeySource.MINTED, None, True)
    session = signer.open(split.key, value)
    if session is not None and session.backend is not None:
        return _Session(session.key, KeySource.HEADER, session.backend, session.resign)
    # Not a seal that verifies (an edited token is one): the value is a key, so it gets a weighted pick, never a
    # backend of its choosing.
    return _Session(value, KeySource.HEADER, None, True)


def _sealable(key: str) -> bool:
    """Whether a key can travel in an issued token: a header value (the client chose it) without the token's `.`."""
    return "." not in key and is_header_value(key)


def _endpoint(split: CompiledSplit, i: int, h: int) -> str | None:
    """docs/spec.md §5: the pod inside backend i, on its ring, for the same hash that picked the branch."""
    ring = split.rings[i]
    return ring.members[ring.lookup(h)] if ring is not None else None
