"""Live sessions per backend, for the Drained signal (sticky.mode: persistent).

A session is live on a backend while a request of it was served there within the idle window. The processor records
each persistent split's decisions here (the key's hash, the backend, the time) and reports the counts with GetHeld;
the operator sums them over the replicas, writes them to status and sets `Drained=True` once a backend at weight 0
has none: the moment its old version is safe to delete.

Bounded memory: at most `max_tracked` sessions per split. Past that, new sessions are not tracked and the split's
counts say `saturated`, which never reads as drained (a count that could be low is never reported as zero).
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_IDLE_SECONDS = 1800.0
DEFAULT_MAX_TRACKED = 100_000


@dataclass(frozen=True, slots=True)
class BackendSessions:
    split: str
    backend: str
    live: int
    saturated: bool  # the split tracks its maximum: `live` may be low, so it is never read as drained


@dataclass(slots=True)
class _SplitSessions:
    seen: dict[int, tuple[str, float]] = field(default_factory=dict)  # key hash → (backend, last seen)
    saturated: bool = False


class LiveSessions:
    """Per split: each tracked session's backend and when it was last served. One instance per processor."""

    __slots__ = ("_idle", "_max", "_splits")

    def __init__(self, idle_seconds: float = DEFAULT_IDLE_SECONDS, max_tracked: int = DEFAULT_MAX_TRACKED) -> None:
        if idle_seconds <= 0 or max_tracked <= 0:
            raise ValueError("idle_seconds and max_tracked must be > 0")
        self._idle = idle_seconds
        self._max = max_tracked
        self._splits: dict[str, _SplitSessions] = {}

    def record(self, split: str, backend: str, key_hash: int, now: float) -> None:
        s = self._splits.get(split)
        if s is None:
            s = self._splits[split] = _SplitSessions()
        if key_hash not in s.seen and len(s.seen) >= self._max:
            self._prune(s, now)
            if len(s.seen) >= self._max:
                s.saturated = True
                return
        s.seen[key_hash] = (backend, now)

    def _prune(self, s: _SplitSessions, now: float) -> None:
        cutoff = now - self._idle
        for h in [h for h, (_, t) in s.seen.items() if t < cutoff]:
            del s.seen[h]
        if len(s.seen) < self._max:
            s.saturated = False

    def retain(self, splits: set[str]) -> None:
        """Forget splits no longer served."""
        for k in [k for k in self._splits if k not in splits]:
            del self._splits[k]

    def counts(self, backends: dict[str, tuple[str, ...]], now: float) -> list[BackendSessions]:
        """Live sessions for every backend of the given splits (split → backend names), zero included."""
        out: list[BackendSessions] = []
        for split, names in backends.items():
            s = self._splits.get(split)
            live = dict.fromkeys(names, 0)
            saturated = False
            if s is not None:
                self._prune(s, now)
                saturated = s.saturated
                for backend, _ in s.seen.values():
                    if backend in live:
                        live[backend] += 1
            out.extend(BackendSessions(split, n, live[n], saturated) for n in names)
        return out


def sum_replicas(reports: list[list[BackendSessions]]) -> dict[str, dict[str, BackendSessions]]:
    """Every replica's counts summed per split and backend (a session seen on two replicas counts twice: the sum can
    only overstate, so it reads zero only when no replica has a live session there); saturated if any replica is."""
    out: dict[str, dict[str, BackendSessions]] = {}
    for report in reports:
        for c in report:
            prev = out.setdefault(c.split, {}).get(c.backend)
            if prev is None:
                out[c.split][c.backend] = c
            else:
                out[c.split][c.backend] = BackendSessions(
                    c.split, c.backend, prev.live + c.live, prev.saturated or c.saturated
                )
    return out
