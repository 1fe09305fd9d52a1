"""One request as the decisions read it: its authority, Cookie lines, request id and the rest of its headers by
name. The wire reads it once from what Envoy sends (wire/processing.py `request_view`); it then travels whole."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """What a decision needs from the request headers: authority, Cookie lines, request id, the rest by name
    (lowercase; `cookie` holds every Cookie line, `; `-joined)."""

    authority: str
    cookie_lines: Sequence[str]
    request_id: str
    headers: Mapping[str, str]
    # The name of the Envoy route the request met when the processor was called (a Gateway listener sends it: Envoy's
    # configuration, never a client byte); empty when none was sent.
    route: str = ""

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    @property
    def path(self) -> str:
        """`:path` with its query string, as Envoy normalised it before any filter ran."""
        return self.headers.get(":path", "/")

    @property
    def method(self) -> str:
        return self.headers.get(":method", "GET")
