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

from trafficsplit.core.assignment import SLOTS
from trafficsplit.core.compiled import CompiledBackend, CompiledSplit
from trafficsplit.core.cookie import AffinityMinter, read_cookie, read_cookies, render_set_cookie
from trafficsplit.core.hashing import key_hash
from trafficsplit.core.limits import MAX_KEY_HEADER_VALUE
from trafficsplit.core.persistent import CookieSigner
from trafficsplit.core.splitspec import MatchKind


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


def decide(
    split: CompiledSplit,
    *,
    cookie_lines: Sequence[str],
    request_id: str,
    header: Callable[[str], str | None],
    minter: AffinityMinter,
    signer: CookieSigner | None = None,
) -> Decision:
    """Decide one request. `header(name)` returns a request header's value (lowercase name) or None. `signer`: the
    replica's cookie keys, required by persistent splits (the publish receiver refuses them without one)."""
    if split.persistent:
        if signer is None:
            raise ValueError(f"{split.key}: sticky.mode persistent needs the cookie keys (--cookie-key-file)")
        return _decide_persistent(split, cookie_lines, request_id, header, minter, signer)
    key, source = choose_key(split, cookie_lines, request_id, minter, header)
    set_cookie = render_set_cookie(split.cookie, key) if source is KeySource.MINTED and split.cookie else None
    h = key_hash(key)
    passed_over = False
    for m in split.matches:
        value = header(m.name) if m.kind is MatchKind.HEADER else read_cookie(cookie_lines, m.name)
        if m.matches(value):
            if split.backends[m.backend_index].eligible:
                i = m.backend_index
                endpoint = _endpoint(split, i, h)
                return Decision(
                    backend=split.backends[i],
                    key=key,
                    key_source=source,
                    path=DecisionPath.MATCH,
                    set_cookie=set_cookie,
                    endpoint=endpoint,
                    key_hash=h,
                )
            # A rule whose backend cannot serve is passed over (availability ranks above an A/B assignment), and
            # the decision says so (docs/spec.md §6), whatever the pick then does.
            passed_over = True
    i, path = pick_backend(split, h)
    if passed_over:
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
    """sticky.mode: persistent (core/persistent.py): a sealed cookie keeps its backend while that backend has weight
    (or drains) and is eligible; otherwise, and for new sessions, the weighted pick decides and the cookie is sealed
    to it. A cookie whose seal fails is re-sessioned. Match rules decide first, as in rehash mode, without
    re-pinning."""
    key, source = choose_key(split, cookie_lines, request_id, minter, header)
    pinned: str | None = None
    resign = False
    if source is KeySource.COOKIE and split.cookie is not None:
        # Every same-name value, not only the first: a stale one on a narrower Path must not shadow the valid seal.
        session = signer.open_any(split.key, read_cookies(cookie_lines, split.cookie.name))
        if session is None:  # tampered, or sealed with a key no longer accepted
            key, source = minter.mint(), KeySource.MINTED
        else:
            key, pinned, resign = session.key, session.backend, session.resign
    h = key_hash(key)
    passed_over = False
    i = -1
    path = DecisionPath.MATCH
    for m in split.matches:
        value = header(m.name) if m.kind is MatchKind.HEADER else read_cookie(cookie_lines, m.name)
        if m.matches(value):
            if split.backends[m.backend_index].eligible:
                i = m.backend_index
                break
            passed_over = True
    if i < 0:
        at = split.weights.names.index(pinned) if pinned in split.weights.names else -1
        if at >= 0 and (split.backends[at].weight > 0 or split.backends[at].drain) and split.backends[at].eligible:
            i, path = at, DecisionPath.PINNED
        else:
            i, path = pick_backend(split, h)
            if passed_over:
                path = DecisionPath.MATCH_PASSED_OVER
    set_cookie = None
    if split.cookie is not None and source is not KeySource.HEADER:
        # A match decides this request only: the session stays sealed to what the weights (or its pin) give it.
        seal_to = split.backends[i].name if path is not DecisionPath.MATCH else pinned
        if seal_to is None:
            seal_to = split.backends[pick_backend(split, h)[0]].name
        if source is KeySource.MINTED or resign or seal_to != pinned:
            set_cookie = render_set_cookie(split.cookie, signer.seal(split.key, key, seal_to))
    return Decision(split.backends[i], key, source, path, set_cookie, _endpoint(split, i, h), h)


def _endpoint(split: CompiledSplit, i: int, h: int) -> str | None:
    """docs/spec.md §5: the pod inside backend i, on its ring, for the same hash that picked the branch."""
    ring = split.rings[i]
    return ring.members[ring.lookup(h)] if ring is not None else None
