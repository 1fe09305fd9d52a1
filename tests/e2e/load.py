"""Steady, bounded load through the gateway Service with failures counted at the client, and parallel request
batches. Every loop is bounded in count and time."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from tests.e2e.cluster import Response

T = TypeVar("T")
R = TypeVar("R")


def parallel(fn: Callable[[T], R], items: Sequence[T], workers: int = 4) -> list[R]:
    """fn over items on a few threads (each request opens its own connection), results in input order."""
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(fn, items))


class Requester(Protocol):
    """A Gateway, or a client in front of one (tests/e2e/gatewayapi.py's)."""

    def request(self, host: str, *, timeout: float) -> Response: ...


@dataclass
class LoadResult:
    sent: int = 0
    failed: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    backends: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        return f"{self.sent} requests, {self.failed} failed {dict(self.errors.most_common(5))}"


@contextmanager
def steady_load(
    gateway: Requester,
    host: str,
    *,
    workers: int = 2,
    interval: float = 0.01,
    max_seconds: float = 300,
    max_requests: int = 60_000,
) -> Iterator[LoadResult]:
    """Requests from ``workers`` threads, one new connection each, ``interval`` apart per thread, until the block
    ends (or the time/count bound is hit). A request fails on a connection error, a timeout or any status but 200."""
    result = LoadResult()
    stop = threading.Event()
    lock = threading.Lock()
    deadline = time.monotonic() + max_seconds

    def run() -> None:
        while not stop.is_set() and time.monotonic() < deadline:
            with lock:
                if result.sent >= max_requests:
                    return
                result.sent += 1
            resp: Response | None = None
            try:
                resp = gateway.request(host, timeout=5)
                err = None if resp.status == 200 else f"HTTP {resp.status}"
            except OSError as e:
                err = type(e).__name__
            with lock:
                if err:
                    result.failed += 1
                    result.errors[err] += 1
                elif resp is not None:
                    result.backends[resp.backend] += 1
            time.sleep(interval)

    threads = [threading.Thread(target=run, daemon=True) for _ in range(workers)]
    for t in threads:
        t.start()
    try:
        yield result
    finally:
        stop.set()
        for t in threads:
            t.join(15)
