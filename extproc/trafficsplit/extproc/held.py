"""The generation this replica serves: one reference, swapped whole.

Requests read `current` once at the start of a decision, so a swap never mixes two generations in one decision, and
asyncio's single thread makes the swap atomic without a lock (the publisher's own lock serialises publishers only).
The accepted publish message (minus the splits refused here) is kept with it (swapped together): `GetHeld` returns
it, so a restarted operator can seed its last good forms from exactly what this replica serves.
"""

from __future__ import annotations

from trafficsplit.core.capabilities import SplitRefusal
from trafficsplit.core.compiled import Generation
from trafficsplit.v1alpha1 import publish_pb2 as pb


class HeldGeneration:
    def __init__(self) -> None:
        self.current: Generation | None = None
        self.origin = ""
        self.message: pb.Generation | None = None  # `current` as accepted on the wire
        self.refused: tuple[SplitRefusal, ...] = ()  # the published splits left out of `current` (not servable here)

    @property
    def number(self) -> int:
        return self.current.number if self.current is not None else 0

    def swap(
        self,
        gen: Generation | None,
        origin: str,
        message: pb.Generation | None = None,
        refused: tuple[SplitRefusal, ...] = (),
    ) -> None:
        self.current, self.origin, self.message, self.refused = gen, origin, message, refused
