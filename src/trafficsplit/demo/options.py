"""The demo's settings, in a module with no imports of its own so `trafficsplit --help` stays fast."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoOptions:
    examples: str = "examples"  # relative to the working directory: the demo runs from a clone
    address: str = "127.0.0.1"
    port: int = 18080  # next to the example's backends (18081-18083)
    start_timeout: float = 60.0
    message_timeout_ms: int = 1000
    poll_interval: float = 0.5  # the operator's file-source rescan
    grace: float = 5.0  # per child, SIGTERM → SIGKILL
    keep_logs: bool = False
