"""The affinity cookie (docs/spec.md §4): mint a handle, read it back from Cookie lines, render Set-Cookie.

The value is an opaque affinity handle, never a credential: a forged one can only choose among backends the operator
already configured. Reading is strict about what counts (cookie-octets, at most 256 bytes) and lenient about
everything else (bad pairs are skipped), so a malformed cookie re-sessions instead of mis-routing or failing.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.headervalue import is_cookie_attribute
from trafficsplit.core.model.limits import MAX_COOKIE_NAME, MAX_COOKIE_PATH
from trafficsplit.core.model.rules import is_domain, is_token

MAX_COOKIE_VALUE_BYTES = 256
_COUNTER_BITS = 48
_COUNTER_MASK = (1 << _COUNTER_BITS) - 1

# RFC 6265 §4.1.1 cookie-octet (%x21 / %x23-2B / %x2D-3A / %x3C-5B / %x5D-7E), 1..256 of them, as one compiled
# pattern: the per-request check runs in C, not per character.
_COOKIE_OCTET = r"[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]"
_COOKIE_VALUE = re.compile(rf"{_COOKIE_OCTET}{{1,{MAX_COOKIE_VALUE_BYTES}}}")
# RFC 6265 OWS: only SP and HTAB are trimmed; str.strip() would also eat controls and Unicode spaces.
_OWS = " \t"


def is_cookie_value(value: str) -> bool:
    """True for a usable affinity value: cookie-octets only, 1..256 bytes."""
    return _COOKIE_VALUE.fullmatch(value) is not None


def read_cookie(lines: Iterable[str], name: str) -> str | None:
    """The value of cookie `name`: the first valid match across all Cookie header lines, else None.

    Each line is a `;`-separated list of `name=value` pairs. Names compare exactly; whitespace around pairs and values
    is trimmed; a value in double quotes is unquoted. Pairs without `=`, with an invalid name, or with a value that is
    not 1..256 cookie-octets are skipped, so such a cookie counts as absent unless a later valid duplicate follows.
    """
    # The per-request path: the same walk as read_cookies, without a generator's cost (~1 us a request).
    for line in lines:
        if name not in line:  # cheap reject: most Cookie lines carry other cookies only
            continue
        for pair in line.split(";"):
            key, sep, value = pair.partition("=")
            if sep and key.strip(_OWS) == name and (valid := _valid_value(value)) is not None:
                return valid
    return None


def read_cookies(lines: Iterable[str], name: str) -> Iterator[str]:
    """Every valid value of cookie `name`, in order, read as `read_cookie` reads the first (a browser sends same-name
    cookies set on longer Paths first, RFC 6265 5.4)."""
    for line in lines:
        if name not in line:
            continue
        for pair in line.split(";"):
            key, sep, value = pair.partition("=")
            if sep and key.strip(_OWS) == name and (valid := _valid_value(value)) is not None:
                yield valid


def _valid_value(raw: str) -> str | None:
    """A cookie pair's value trimmed and unquoted, if it is 1..256 cookie-octets."""
    value = raw.strip(_OWS)
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        value = value[1:-1]
    return value if _COOKIE_VALUE.fullmatch(value) is not None else None


def cookie_present_regex(name: str) -> str:
    """An RE2 pattern (full match over a Cookie header) true exactly when `read_cookie` finds a value for `name`, for
    Envoy's fallback route, which must tell a valid affinity cookie from none without the processor. Two known
    differences, both only for values no minter produces: the 256-byte bound is not checked (`{1,256}` would exceed
    RE2's default program size in Envoy, 100), and a `,` before the pair also separates (Envoy joins repeated headers
    with `,` when it matches them; the processor splits on `;` only)."""
    value = f"{_COOKIE_OCTET}+"
    pair = f'[ \\t]*{re.escape(name)}[ \\t]*=[ \\t]*(?:{value}|"{value}")[ \\t]*'
    return f"(?:.*[;,])?{pair}(?:;.*)?"


def mint_affinity_id(now_ms: int, counter: int) -> str:
    """24 lowercase hex: 12 of Unix time in ms, 12 of a per-process counter."""
    return f"{now_ms & _COUNTER_MASK:012x}{counter & _COUNTER_MASK:012x}"


class AffinityMinter:
    """Mints affinity ids for one process.

    The counter starts at a random 48-bit offset so that two replicas started in the same millisecond do not mint the
    same sequence. One instance per process, owned by whoever serves requests (no module-level state).
    """

    __slots__ = ("_clock_ms", "_counter")

    def __init__(self, clock_ms: Callable[[], int] | None = None, start: int | None = None) -> None:
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._counter = secrets.randbits(_COUNTER_BITS) if start is None else start & _COUNTER_MASK

    def mint(self) -> str:
        self._counter = (self._counter + 1) & _COUNTER_MASK
        return mint_affinity_id(self._clock_ms(), self._counter)


class SameSite(StrEnum):
    STRICT = "Strict"
    LAX = "Lax"
    NONE = "None"


@dataclass(frozen=True, slots=True, kw_only=True)
class CookieSettings:
    """What a TrafficSplit says about its sticky cookie; defaults are docs/spec.md §4's.

    Checks itself (every attribute reaches a Set-Cookie header): the parser and the publish receiver build it, so
    both refuse the same cookies. Problems name the resource's fields (`sameSite`, `maxAge`)."""

    name: str
    path: str = "/"
    max_age: int | None = None
    domain: str | None = None
    secure: bool = False
    http_only: bool = True
    same_site: SameSite = SameSite.LAX
    partitioned: bool = False  # CHIPS: the browser keys the cookie by the top-level site too

    def __post_init__(self) -> None:
        problems: list[str] = []
        # Rendered verbatim into Set-Cookie: nothing that could end the header or add an attribute may get here.
        if len(self.name) > MAX_COOKIE_NAME:
            problems.append(f"name: {len(self.name)} characters, at most {MAX_COOKIE_NAME} are allowed")
        elif not is_token(self.name):
            problems.append(f"name: {self.name!r} is not an RFC 6265 cookie name (token characters only)")
        if len(self.path) > MAX_COOKIE_PATH:
            problems.append(f"path: {len(self.path)} characters, at most {MAX_COOKIE_PATH} are allowed")
        elif not self.path.startswith("/") or not is_cookie_attribute(self.path):
            problems.append(
                f"path: {self.path!r} must start with '/' and be printable ASCII without ';' or control characters"
            )
        if self.domain is not None and not is_domain(self.domain):
            problems.append(f"domain: {self.domain[:64]!r} is not a domain name")
        if self.max_age is not None and self.max_age < 0:
            problems.append(f"maxAge: must be >= 0, got {self.max_age}")
        if self.same_site is SameSite.NONE and not self.secure:
            problems.append("sameSite: SameSite=None requires secure: true (browsers drop it otherwise)")
        if self.partitioned and not self.secure:
            problems.append("partitioned: Partitioned requires secure: true (browsers drop it otherwise)")
        if problems:
            raise SpecError(problems)


def render_set_cookie(settings: CookieSettings, value: str) -> str:
    """The Set-Cookie header value carrying `value` with the configured attributes."""
    parts = [f"{settings.name}={value}", f"Path={settings.path}"]
    if settings.max_age is not None:
        parts.append(f"Max-Age={settings.max_age}")
    if settings.domain:
        parts.append(f"Domain={settings.domain}")
    if settings.secure:
        parts.append("Secure")
    if settings.http_only:
        parts.append("HttpOnly")
    parts.append(f"SameSite={settings.same_site.value}")
    if settings.partitioned:
        parts.append("Partitioned")
    return "; ".join(parts)
