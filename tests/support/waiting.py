"""One way for tests to wait: poll a predicate until it is truthy, bounded, and say what was awaited when it is not.

Tests synchronise on observable state (a port answering, a status condition, a held generation), never on sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def poll(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> Any:
    """Call `predicate` until it returns something truthy (returned) or `timeout` seconds pass (AssertionError naming
    `what` and the last value or error seen). Exceptions count as "not yet"."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as exc:  # not there yet
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")
