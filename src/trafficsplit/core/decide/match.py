"""Which HTTPRoute rule a request meets on a listener: the route table `gatewayapi.translate` builds, read. Pure.

The request side of the precedence order: a `RouteTable` compiles one listener's entries once (RE2 patterns, the
host index) and `select` walks the request's virtual host in that order, the first entry whose match fits winning.
The data plane does not run it: Envoy matches, by the routes wire/gateway_routes.py compiles in the same order; the
tests compare Envoy's choice with it (tests/integration/test_gateway_routes_envoy.py), and it fixes the semantics
those routes must have:

- the host is read as the rest of the project reads it (`normalize_host`: ASCII case folded, port dropped), then the
  exact virtual host, else the longest `*.` suffix with at least one character before it, else the catch-all `*`
  (routes without hostnames on a listener without one), as Envoy orders its domains;
- `PathPrefix` matches whole path segments (`/api` matches `/api`, `/api/` and `/api/v1`, not `/apis`), a trailing
  `/` in the prefix is ignored; `Exact` compares the whole path; `RegularExpression` must match the whole path;
- header names compare case-insensitively (the match stores them lowercase, `header` takes a lowercase name), query
  parameter names exactly; all conditions of a match must hold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from trafficsplit.core.model.host import normalize_host
from trafficsplit.core.model.matches import Method, PathType, ValueMatch, ValueMatchType
from trafficsplit.core.model.regex import Pattern
from trafficsplit.core.model.routes import CATCH_ALL, ListenerRoutes, RouteEntry, port_virtual_hosts
from trafficsplit.core.model.rules import compile_pattern


@dataclass(frozen=True, slots=True)
class _Condition:
    name: str
    exact: str | None
    pattern: Pattern | None

    @classmethod
    def of(cls, m: ValueMatch) -> _Condition:
        if m.type is ValueMatchType.REGULAR_EXPRESSION:
            return cls(m.name, None, compile_pattern(m.value))
        return cls(m.name, m.value, None)

    def holds(self, value: str | None) -> bool:
        if value is None:
            return False
        return value == self.exact if self.pattern is None else self.pattern.fullmatch(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class _CompiledEntry:
    entry: RouteEntry
    path_type: PathType
    path: str
    path_pattern: Pattern | None
    method: Method | None
    headers: tuple[_Condition, ...]
    query: tuple[_Condition, ...]

    def fits(self, path: str, method: str, header: Callable[[str], str | None], query: Mapping[str, str]) -> bool:
        if self.method is not None and method != self.method.value:
            return False
        if self.path_type is PathType.EXACT:
            ok = path == self.path
        elif self.path_type is PathType.PREFIX:
            prefix = self.path.rstrip("/")
            ok = path == prefix or path.startswith(prefix + "/") or not prefix
        else:
            ok = self.path_pattern is not None and self.path_pattern.fullmatch(path)
        return (
            ok
            and all(c.holds(header(c.name)) for c in self.headers)
            and all(c.holds(query.get(c.name)) for c in self.query)
        )


def _compile(e: RouteEntry) -> _CompiledEntry:
    m = e.match
    return _CompiledEntry(
        entry=e,
        path_type=m.path_type,
        path=m.path,
        path_pattern=compile_pattern(m.path) if m.path_type is PathType.REGULAR_EXPRESSION else None,
        method=m.method,
        headers=tuple(_Condition.of(h) for h in m.headers),
        query=tuple(_Condition.of(q) for q in m.query_params),
    )


class RouteTable:
    """One listener's virtual hosts, or those of the listeners sharing a port (`port_virtual_hosts`: a request meets
    the most specific listener that takes its host, and only its routes), compiled once; immutable after
    construction."""

    __slots__ = ("_hosts",)

    def __init__(self, listener: ListenerRoutes | Sequence[ListenerRoutes]) -> None:
        listeners = (listener,) if isinstance(listener, ListenerRoutes) else tuple(listener)
        if len({lr.port for lr in listeners}) > 1:
            raise ValueError("a route table serves the listeners of one port")
        self._hosts: Mapping[str, tuple[_CompiledEntry, ...]] = {
            vh.hostname: tuple(_compile(e) for e in vh.entries) for vh in port_virtual_hosts(listeners)
        }

    def _virtual_host(self, authority: str) -> tuple[_CompiledEntry, ...]:
        host = normalize_host(authority)
        found = self._hosts.get(host)
        if found is not None:
            return found
        dot = host.find(".", 1)  # `*.suffix` needs at least one character before `.suffix`, as in Envoy
        while dot != -1:
            found = self._hosts.get("*" + host[dot:])
            if found is not None:
                return found
            dot = host.find(".", dot + 1)
        return self._hosts.get(CATCH_ALL, ())

    def select(
        self,
        authority: str,
        path: str,
        method: str = "GET",
        header: Callable[[str], str | None] = lambda _: None,
        query: Mapping[str, str] | None = None,
    ) -> RouteEntry | None:
        """The entry serving the request, or None (the spec's 404). `path` without its query string."""
        q = query or {}
        for c in self._virtual_host(authority):
            if c.fits(path, method, header, q):
                return c.entry
        return None
