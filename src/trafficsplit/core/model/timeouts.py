"""A rule's timeouts and retry policy (HTTPRoute `rules[].timeouts`, `rules[].retry`), as values that check
themselves, and the Gateway API duration they are written in (GEP-2257). Pure.

Durations are whole milliseconds (the finest unit GEP-2257 has), 0 meaning "no timeout" where the spec says so. The
parser (gatewayapi.httproute) builds these from a route; a compile reads them as they are (Envoy's route `timeout`,
`retry_policy.per_try_timeout`, `num_retries`, `retriable_status_codes`, `retry_back_off`).
"""

from __future__ import annotations

from dataclasses import dataclass

from trafficsplit.core.model.errors import SpecError

# GEP-2257: `^([0-9]{1,5}(h|m|s|ms)){1,4}$`. The format bounds a duration: four parts of at most 99,999 hours.
MAX_DURATION_TEXT = 32  # the longest such text is 4 × "99999ms" = 28 characters
_MAX_DIGITS = 5
_MAX_PARTS = 4
_UNIT_MS = {"h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}
MAX_DURATION_MS = _MAX_PARTS * (10**_MAX_DIGITS - 1) * _UNIT_MS["h"]

# Ours (the CRD sets only `minimum: 1`): more attempts multiply one request into that many on a backend that is
# already failing. Envoy Gateway and others accept such values; 16 is beyond any retry budget we know in use.
MAX_RETRY_ATTEMPTS = 16
# The CRD's bounds of a retriable status code (HTTPRouteRetryStatusCode): 4xx and 5xx; the spec requires 500, 502,
# 503 and 504 to be supported and allows the rest of 400-599.
MIN_RETRY_CODE = 400
MAX_RETRY_CODE = 599


def parse_duration_ms(text: str) -> int | None:
    """A GEP-2257 duration (`1h30m`, `500ms`, `0s`) in milliseconds; None when `text` is not one. Strict: ASCII
    digits only (1..5 per part), units h, m, s, ms, 1..4 parts, nothing else (no sign, no space, no fraction)."""
    if len(text) > MAX_DURATION_TEXT:
        return None
    total = 0
    parts = 0
    i = 0
    while i < len(text):
        j = i
        while j < len(text) and text[j].isascii() and text[j].isdigit():
            j += 1
        if not 1 <= j - i <= _MAX_DIGITS:
            return None
        unit = "ms" if text.startswith("ms", j) else text[j : j + 1]
        if unit not in _UNIT_MS:
            return None
        total += int(text[i:j]) * _UNIT_MS[unit]
        parts += 1
        i = j + len(unit)
    if not 1 <= parts <= _MAX_PARTS:
        return None
    return total


def format_duration(ms: int) -> str:
    """`ms` in GEP-2257's units, largest first (`1h30m`, `1s500ms`, `0s`): for goldens and the CLI. It parses back
    while the hours fit five digits (99,999 h, 11 years); beyond, it says so with more digits than the format has."""
    if ms == 0:
        return "0s"
    out = []
    for unit in ("h", "m", "s", "ms"):
        n, ms = divmod(ms, _UNIT_MS[unit])
        if n:
            out.append(f"{n}{unit}")
    return "".join(out)


def _duration_problems(field: str, ms: int | None) -> list[str]:
    if ms is not None and not 0 <= ms <= MAX_DURATION_MS:
        return [f"{field}: {ms} ms is not in 0..{MAX_DURATION_MS} (a GEP-2257 duration)"]
    return []


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleTimeouts:
    """`timeouts` of a rule, in milliseconds. `request`: the whole request, retries included, until the response
    starts (the gateway answers a timeout error, 504, past it); `backend_request`: each request to a backend (each
    retry attempt). None: unset (the data plane's default); 0: no timeout (the spec's SHOULD). `backend_request` is no
    longer than a nonzero `request` (the CRD's rule: the request timeout encompasses it)."""

    request: int | None = None
    backend_request: int | None = None

    def __post_init__(self) -> None:
        problems = _duration_problems("request", self.request) + _duration_problems(
            "backendRequest", self.backend_request
        )
        r, b = self.request, self.backend_request
        # The CRD's rule, as it says it: a backendRequest of 0 (none of its own) under a request timeout is allowed.
        if not problems and r is not None and b is not None and r != 0 and b > r:
            problems.append(
                f"backendRequest: {format_duration(b)} is longer than the request timeout {format_duration(r)}"
            )
        if problems:
            raise SpecError(problems)

    def to_dict(self) -> dict[str, str]:
        """As the HTTPRoute writes them (`timeouts`), for goldens and the CLI."""
        out = {}
        if self.request is not None:
            out["request"] = format_duration(self.request)
        if self.backend_request is not None:
            out["backendRequest"] = format_duration(self.backend_request)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleRetry:
    """`retry` of a rule: at most `attempts` retries of a backend request (None: the data plane's default) that
    answered one of `codes` (400-599, each once; empty: none by status, the data plane's default conditions), at
    least `backoff` milliseconds apart (None: the data plane's default)."""

    attempts: int | None = None
    backoff: int | None = None
    codes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        problems = _duration_problems("backoff", self.backoff)
        if self.attempts is not None and not 1 <= self.attempts <= MAX_RETRY_ATTEMPTS:
            problems.append(f"attempts: {self.attempts} is not in 1..{MAX_RETRY_ATTEMPTS}")
        problems += [
            f"codes[{i}]: {c} is not an HTTP status in {MIN_RETRY_CODE}..{MAX_RETRY_CODE}"
            for i, c in enumerate(self.codes)
            if not MIN_RETRY_CODE <= c <= MAX_RETRY_CODE
        ]
        if len(set(self.codes)) != len(self.codes):
            problems.append("codes: each status code once (the CRD's list is a set)")
        if problems:
            raise SpecError(problems)

    def to_dict(self) -> dict[str, object]:
        """As the HTTPRoute writes it (`retry`), for goldens and the CLI."""
        out: dict[str, object] = {}
        if self.attempts is not None:
            out["attempts"] = self.attempts
        if self.backoff is not None:
            out["backoff"] = format_duration(self.backoff)
        if self.codes:
            out["codes"] = list(self.codes)
        return out
