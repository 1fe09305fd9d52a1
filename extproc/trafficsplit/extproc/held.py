"""The generation this replica serves: one reference, swapped whole.

Requests read `current` once at the start of a decision, so a swap never mixes two generations in one decision, and
asyncio's single thread makes the swap atomic without a lock (the publisher's own lock serialises publishers only).
"""

from __future__ import annotations

from trafficsplit.core.compiled import Generation


class HeldGeneration:
    def __init__(self) -> None:
        self.current: Generation | None = None
        self.origin = ""

    @property
    def number(self) -> int:
        return self.current.number if self.current is not None else 0

    def swap(self, gen: Generation | None, origin: str) -> None:
        self.current, self.origin = gen, origin
