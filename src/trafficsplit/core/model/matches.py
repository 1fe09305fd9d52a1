"""An HTTPRoute rule's matches as values that check themselves, and the upstream CRD bounds a route table obeys. Pure.

Part of the core's model: the parser (`gatewayapi.httproute.parse_httproute`) builds these from a route, the route table
(`model.routes`) carries them, the publish receiver (wire/generation.py) rebuilds them from a proto and the
request-time matcher (`decide.match`) reads them. Kept apart from the parser so that none of the others stands on it
(.importlinter, "the core's plan").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.rules import compile_pattern, is_token

# The upstream CRD's bounds (v1.6.3 standard and experimental channels agree on these) that a route table and its
# matches obey; the parser's other bounds are in gateway_reading, gatewayapi.objects and gatewayapi.httproute.
# tests/unit/test_gateway_api_crds.py compares both.
MAX_RULES = 16
MAX_RULE_MATCHES = 64
MAX_MATCH_HEADERS = 16
MAX_MATCH_QUERY_PARAMS = 16
MAX_BACKEND_REFS = 16
MAX_LISTENERS = 64
MAX_PATH = 1024
MAX_HEADER_VALUE = 4096
MAX_QUERY_VALUE = 1024
MAX_HEADER_NAME = 256


class PathType(StrEnum):
    EXACT = "Exact"
    PREFIX = "PathPrefix"
    REGULAR_EXPRESSION = "RegularExpression"


class ValueMatchType(StrEnum):
    EXACT = "Exact"
    REGULAR_EXPRESSION = "RegularExpression"


class Method(StrEnum):
    GET = "GET"
    HEAD = "HEAD"
    POST = "POST"
    PUT = "PUT"
    DELETE = "DELETE"
    CONNECT = "CONNECT"
    OPTIONS = "OPTIONS"
    TRACE = "TRACE"
    PATCH = "PATCH"


@dataclass(frozen=True, slots=True)
class ValueMatch:
    """A header or query parameter condition. Header names compare case-insensitively (stored lowercase)."""

    type: ValueMatchType
    name: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteMatch:
    path_type: PathType = PathType.PREFIX
    path: str = "/"
    headers: tuple[ValueMatch, ...] = ()
    query_params: tuple[ValueMatch, ...] = ()
    method: Method | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": {"type": self.path_type.value, "value": self.path}}
        if self.headers:
            out["headers"] = [{"type": h.type.value, "name": h.name, "value": h.value} for h in self.headers]
        if self.query_params:
            out["queryParams"] = [{"type": q.type.value, "name": q.name, "value": q.value} for q in self.query_params]
        if self.method is not None:
            out["method"] = self.method.value
        return out


def _printable(text: str) -> bool:
    """Printable ASCII (spaces included): no control byte, nothing a header or a log line could be split by."""
    return all(" " <= c <= "~" for c in text)


def _pattern_problems(value: str) -> list[str]:
    """RE2 with the core's program-size bound (core/model/regex.py)."""
    try:
        compile_pattern(value)
    except SpecError as exc:
        return [q.removeprefix("value: ") for q in exc.problems]
    return []


def _value_match_problems(m: ValueMatch, *, header: bool) -> list[str]:
    bound = MAX_HEADER_VALUE if header else MAX_QUERY_VALUE
    problems: list[str] = []
    if not 1 <= len(m.name) <= MAX_HEADER_NAME or not is_token(m.name):
        problems.append(f"name: {m.name[:64]!r} must be an HTTP token of at most {MAX_HEADER_NAME} characters")
    elif header and m.name != m.name.lower():
        problems.append(f"name: {m.name[:64]!r} must be lowercase (header names compare case-insensitively)")
    if len(m.value) > bound:
        problems.append(f"value: {len(m.value)} characters, at most {bound} are allowed")
    elif m.type is ValueMatchType.REGULAR_EXPRESSION:
        problems += [f"value: {q}" for q in _pattern_problems(m.value)]
    elif not _printable(m.value):
        problems.append("value: only printable ASCII is supported")
    return problems


def route_match_problems(m: RouteMatch) -> list[str]:
    """Every reason `m` is not a match a data plane can serve: the CRD's bounds, absolute paths, RE2 patterns within
    the program bound, header names that are lowercase tokens, no control byte anywhere. The parser reports these
    for a rule (the rule is dropped: UnsupportedValue); `RouteEntry` checks them again for a table from the wire."""
    problems: list[str] = []
    if len(m.path) > MAX_PATH:
        problems.append(f"path.value: {len(m.path)} characters, at most {MAX_PATH} are allowed")
    elif m.path_type is PathType.REGULAR_EXPRESSION:
        problems += [f"path.value: {q}" for q in _pattern_problems(m.path)]
    elif not m.path.startswith("/") or not _printable(m.path) or " " in m.path:
        problems.append(f"path.value: {m.path[:64]!r} must be an absolute path of printable ASCII")
    for name, items, bound in (
        ("headers", m.headers, MAX_MATCH_HEADERS),
        ("queryParams", m.query_params, MAX_MATCH_QUERY_PARAMS),
    ):
        if len(items) > bound:
            problems.append(f"{name}: {len(items)} items, at most {bound} are allowed")
            continue
        for i, v in enumerate(items):
            problems += [f"{name}[{i}].{q}" for q in _value_match_problems(v, header=name == "headers")]
    return problems
