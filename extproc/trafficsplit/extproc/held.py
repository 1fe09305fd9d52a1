"""The generation this replica serves: one reference, swapped whole.

Requests read `current` once at the start of a decision, so a swap never mixes two generations in one decision, and
asyncio's single thread makes the swap atomic without a lock (the publisher's own lock serialises publishers only).
The accepted publish message (minus the splits refused here) is kept with it (swapped together): `GetHeld` returns
it, so a restarted operator can seed its last good forms from exactly what this replica serves.
"""

from __future__ import annotations

from dataclasses import dataclass

from trafficsplit.core.model.capabilities import SplitRefusal
from trafficsplit.core.model.generation import Generation
from trafficsplit.v1alpha1 import publish_pb2 as pb


@dataclass(frozen=True, slots=True, kw_only=True)
class Holding:
    """What a replica holds, as one value: a failed publish restores the one it replaced, whole."""

    current: Generation | None = None
    origin: str = ""
    message: pb.Generation | None = None  # `current` as accepted on the wire
    refused: tuple[SplitRefusal, ...] = ()  # the published splits left out of `current` (not servable here)


class HeldGeneration:
    def __init__(self) -> None:
        self.holding = Holding()

    @property
    def current(self) -> Generation | None:
        return self.holding.current

    @property
    def origin(self) -> str:
        return self.holding.origin

    @property
    def message(self) -> pb.Generation | None:
        return self.holding.message

    @property
    def refused(self) -> tuple[SplitRefusal, ...]:
        return self.holding.refused

    @property
    def number(self) -> int:
        current = self.holding.current
        return current.number if current is not None else 0

    def swap(
        self,
        gen: Generation | None,
        origin: str,
        message: pb.Generation | None = None,
        refused: tuple[SplitRefusal, ...] = (),
    ) -> None:
        self.holding = Holding(current=gen, origin=origin, message=message, refused=refused)

    def restore(self, holding: Holding) -> None:
        self.holding = holding
