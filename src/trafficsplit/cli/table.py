"""What the status views share: kubectl-like columns, and a missing field shown as "-"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MISSING = "-"


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def cell(value: Any) -> str:
    if value is None or value == "":
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    return " ".join(str(value).split())  # a multi-line message stays on its row


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> list[str]:
    """Left-aligned columns two spaces apart, like kubectl's; the last column is not padded."""
    cells = [list(header)] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return [
        indent
        + "  ".join(c.ljust(w) if i < len(row) - 1 else c for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        for row in cells
    ]
