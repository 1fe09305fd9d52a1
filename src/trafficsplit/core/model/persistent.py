"""`sticky.mode: persistent`: a session keeps the backend it was first given, carried in its cookie.

The cookie value is `KEY.BACKEND.MAC`: the affinity key, the backend the session is pinned to, and an HMAC-SHA256
(truncated to 128 bits, base64url) over the split, the key and the backend, with a key every gateway replica shares
(a Secret, passed to the processor like the publish token). No server-side session store: any replica verifies any
replica's cookie. A client that edits the backend (or anything else) fails the MAC and is re-sessioned, so it can
only get what a fresh session gets: a weighted pick.

Rotation: the signer holds the current key and, for a grace period, the previous one. A cookie signed with the
previous key is honoured and re-signed with the current key (a Set-Cookie), so live sessions migrate during the grace
period; once the previous key is removed, the cookies it signed re-session.

Weight 0 moves a backend's sessions (a blue-green flip moves everyone), unless the backend is marked `drain: true`:
then its sessions stay while it has ready endpoints and only new sessions follow the weights, until they go idle and
the Drained condition says the old version is safe to delete (GEP-1619's "even if the weight is set to 0", opt-in
per change so the flip keeps its meaning).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import re
from collections.abc import Iterable
from enum import StrEnum
from fractions import Fraction
from typing import NamedTuple

from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.weights import Weights

MIN_KEY_BYTES = 16  # 128 bits: an HMAC key shorter than the tag it protects would be the weak point
MAC_CHARS = 22  # 16 bytes of the SHA-256 tag, base64url without padding
_MINTED = re.compile(r"[0-9a-f]{24}")  # core/model/cookie.py's minted affinity id
# Same-name cookies whose seal is tried per request: a stale one or two beside the session's own, not a flood.
MAX_SAME_NAME_COOKIES = 8


class StickyMode(StrEnum):
    REHASH = "rehash"  # the seed's: a session's backend is re-drawn from its key on every weight change
    PERSISTENT = "persistent"  # a session keeps its backend while it has weight (or drains) and ready endpoints


def drain_problems(weight: int, drain: bool) -> list[str]:
    """A backend's own `drain` rule (the split-level one, persistent mode, is `drain_mode_problems`)."""
    if drain and weight != 0:
        return [f"drain: a draining backend needs weight 0, got {weight} (a backend with weight keeps its sessions)"]
    return []


def drain_mode_problems(drains: list[bool], mode: StickyMode) -> list[str]:
    """Per backend index: `drain: true` is for sticky.mode persistent only (a rehash cookie names no backend)."""
    if mode is StickyMode.PERSISTENT:
        return []
    return [
        f"backends[{i}].drain: needs spec.sticky.mode: persistent (only a sealed cookie says which backend a "
        "session keeps)"
        for i, d in enumerate(drains)
        if d
    ]


def persistent_moved_share(before: Weights, after: Weights, draining: frozenset[str] = frozenset()) -> Fraction:
    """What a change moves under sticky.mode persistent: only the sessions of backends the change sets to 0 without
    `drain` (or removes), given here by their share under `before` (the sessions' real spread follows their history;
    a split that has run at these weights for a while converges to it)."""
    return sum(
        (
            Fraction(w, before.total)
            for n, w in before.items()
            if n not in after.names or (after.weight_of(n) == 0 and n not in draining)
        ),
        Fraction(0),
    )


class CookieSigner:
    """The HMAC keys of one processor: sign with `current`, verify with `current` or `previous` (rotation grace)."""

    __slots__ = ("_current", "_previous")

    def __init__(self, current: bytes, previous: bytes | None = None) -> None:
        problems = [
            f"{name}: {len(k)} bytes, at least {MIN_KEY_BYTES} are required"
            for name, k in (("current key", current), ("previous key", previous))
            if k is not None and len(k) < MIN_KEY_BYTES
        ]
        if problems:
            raise SpecError(problems)
        self._current = current
        self._previous = previous

    @classmethod
    def from_text(cls, text: bytes) -> CookieSigner:
        """A key file: the current key on the first line, optionally the previous one on the second."""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if not 1 <= len(lines) <= 2:
            raise SpecError([f"cookie key file: 1 or 2 non-empty lines (current, previous), got {len(lines)}"])
        return cls(lines[0], lines[1] if len(lines) == 2 else None)

    @staticmethod
    def _mac(secret: bytes, split: str, key: str, backend: str) -> str:
        tag = hmac.new(secret, f"{split}\n{key}\n{backend}".encode(), hashlib.sha256).digest()[:16]
        return base64.urlsafe_b64encode(tag).decode().rstrip("=")

    def seal(self, split: str, key: str, backend: str) -> str:
        """The cookie value pinning `key` to `backend` in `split`."""
        return f"{key}.{backend}.{self._mac(self._current, split, key, backend)}"

    def open(self, split: str, value: str) -> Session | None:
        """The session a cookie value carries; None when the seal does not verify (tampered, or signed with a key no
        longer accepted) or the value is neither sealed nor a minted key. A minted key alone is a rehash-mode
        cookie from before the split turned persistent: kept as the key, and sealed to its pick."""
        if _MINTED.fullmatch(value):
            return Session(value, None, resign=True)
        key, sep1, rest = value.partition(".")
        backend, sep2, mac = rest.partition(".")
        if not (sep1 and sep2) or len(mac) != MAC_CHARS or not key or not backend:
            return None
        if hmac.compare_digest(mac, self._mac(self._current, split, key, backend)):
            return Session(key, backend, resign=False)
        if self._previous is not None and hmac.compare_digest(mac, self._mac(self._previous, split, key, backend)):
            return Session(key, backend, resign=True)
        return None

    def open_any(self, split: str, values: Iterable[str]) -> Session | None:
        """The session of same-name cookie values (a stale one on a narrower Path comes first): the first whose seal
        verifies, else the first bare minted key, else None. At most `MAX_SAME_NAME_COOKIES` values are tried, so a
        Cookie header of thousands of duplicates costs a bounded number of MACs."""
        bare: Session | None = None
        for value in itertools.islice(values, MAX_SAME_NAME_COOKIES):
            session = self.open(split, value)
            if session is not None and session.backend is not None:
                return session
            bare = bare or session
        return bare


class Session(NamedTuple):
    """What a persistent cookie carries once verified: the key, the pinned backend (None: not pinned yet), and
    whether the cookie must be sent again (not pinned, or signed with the previous key)."""

    key: str
    backend: str | None
    resign: bool
