"""What a plane's watches have seen: one table per kind, keyed (namespace, name), and the one way a watch event
changes it (`WatchStore.apply`). The TrafficSplit plane (engine.py `Store`) and the Gateway API plane (gateways.py
`GatewayStore`) differ only in their kinds, their parsers and what they keep for status writes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

Key = tuple[str, str]  # (namespace, name); a cluster-scoped object (a GatewayClass, a Namespace) has namespace ""

# A body's projection for the plane, or None: the object is absent for it (an EndpointSlice of no Service, a Secret
# not of type kubernetes.io/tls, a body the plane refuses).
Parse = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class Refused:
    """What a parser answers for a body the plane's bounds refuse when the object must keep its last accepted value
    (a Gateway whose data plane serves, an HTTPRoute that is served): `generation` is the refused body's, `problems`
    why. An object with no accepted value yet stays absent."""

    generation: int
    problems: str


def object_key(body: Mapping[str, Any]) -> Key:
    meta = body.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


class WatchStore:
    """A plane's tables and their one `apply`. A subclass names its tables (`table`) and its parsers, and may keep
    more of each event (`seen`)."""

    parsers: ClassVar[Mapping[str, Parse]]

    def table(self, kind: str) -> dict[Key, Any]:
        raise NotImplementedError

    def apply(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        k = object_key(body)
        table = self.table(kind)
        deleted = event_type == "DELETED"
        value = None if deleted else self.parsers[kind](body)
        if isinstance(value, Refused):
            self.refusal(kind, k, value)  # the last accepted value, if any, stays
        else:
            self.refusal(kind, k, None)
            if value is None:
                table.pop(k, None)
            else:
                table[k] = value
        self.seen(kind, k, None if deleted else body)

    def refusal(self, kind: str, key: Key, refused: Refused | None) -> None:
        """After every event: the object's current body refused (its last accepted value kept), or not (None)."""

    def seen(self, kind: str, key: Key, body: Mapping[str, Any] | None) -> None:
        """After every event: `body` is the object as last seen, None once it is deleted."""
