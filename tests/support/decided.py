"""Sessions whose every response the processor decided.

On a loaded machine Envoy may time out waiting for the processor and fail open onto the native fallback route (by
design: docs/dataplane.md). A test that compares the processor's decisions with the core must not read such a
response as the processor's answer: it asks again (bounded), and fails if the processor never answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tests.support.dataplane import Response, run_sessions

DECISION = "x-trafficsplit-decision"
ROUNDS = 5


def by_processor(r: Response) -> bool:
    """Decided by the processor: a 200 with its disclosure (debug headers on), not the fallback route's."""
    decision = r.header(DECISION) or ""
    return r.status == 200 and decision.startswith("backend=") and "path=fallback" not in decision


def decided_sessions(port: int, authority: str, cookie: str, cookies: Sequence[str | None]) -> list[Response]:
    """One request per entry of `cookies`, each repeated (up to ROUNDS times) until the processor decided it."""
    out: list[Response | None] = [None] * len(cookies)
    todo = list(range(len(cookies)))
    for _ in range(ROUNDS):
        rs = asyncio.run(run_sessions(port, authority, cookie, [cookies[i] for i in todo], 1))
        for i, session in zip(todo, rs, strict=True):
            out[i] = session[0]
        todo = [i for i in todo if (got := out[i]) is None or not by_processor(got)]
        if not todo:
            break
    assert not todo, f"{len(todo)} requests never decided by the processor in {ROUNDS} rounds"
    return [r for r in out if r is not None]
