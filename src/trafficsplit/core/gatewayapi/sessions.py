"""A rule's `sessionPersistence` (GEP-1619) as its split says it: the sealed persistent session carried in a cookie
(`type: Cookie`) or in a request header the gateway also issues it in (`type: Header`); or why it cannot be served.
Pure."""

from __future__ import annotations

from dataclasses import dataclass

from trafficsplit.core.gatewayapi.httproute import CookieLifetime, HTTPRoute, RouteRule, SessionType
from trafficsplit.core.model.cookie import CookieSettings
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.hashing import key_hash
from trafficsplit.core.model.rules import key_header_problems


@dataclass(frozen=True, slots=True)
class RuleSession:
    """How a rule's sessions persist: the split's cookie, or the request header that carries them (lowercase)."""

    cookie: CookieSettings | None = None
    header: str | None = None

    @property
    def persistent(self) -> bool:
        return self.cookie is not None or self.header is not None


def rule_session(route: HTTPRoute, rule: RouteRule) -> tuple[RuleSession, list[str]]:
    """The rule's sessionPersistence as the split says it, or why it cannot be served (the rule is then dropped)."""
    s = rule.session
    if s is None:
        return RuleSession(), []
    where = f"rules[{rule.index}].sessionPersistence"
    # The spec leaves the default name to the implementation: one per route rule, short and stable.
    name = s.session_name or f"ts-{key_hash(f'{route.meta.key}/{rule.index}'):08x}"
    if s.type is SessionType.HEADER:
        if s.absolute_timeout is not None:
            # A header session has no expiry a client enforces, and the gateway keeps no session state to expire.
            return RuleSession(), [
                f"{where}.absoluteTimeout: not supported with type Header (the gateway keeps no session state to "
                "expire a header session; use type Cookie with cookieConfig.lifetimeType Permanent)"
            ]
        # Header names are case-insensitive and Envoy carries them lowercased; the name reaches Envoy as a response
        # header's, so it is checked here by the rule every sticky key header obeys.
        header = name.lower()
        problems = key_header_problems(header, issued=True)
        if problems:
            return RuleSession(), [f"{where}.sessionName: {q.removeprefix('name: ')}" for q in problems]
        return RuleSession(header=header), []
    if s.absolute_timeout is not None and s.lifetime is not CookieLifetime.PERMANENT:
        return RuleSession(), [
            f"{where}.absoluteTimeout: a session cookie with a server-enforced timeout is not supported (use "
            "cookieConfig.lifetimeType Permanent: the cookie's Max-Age)"
        ]
    try:
        return RuleSession(cookie=CookieSettings(name=name, max_age=s.absolute_timeout)), []
    except SpecError as exc:
        return RuleSession(), [f"{where}.{q.replace('name:', 'sessionName:', 1)}" for q in exc.problems]
