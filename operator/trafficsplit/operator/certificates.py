"""The Secrets HTTPS listeners name, and the ConfigMaps their ports' client certificate validations name (their CA
bundles), read by name when a listener names them and re-read on a timer; never listed or watched.

Why not a watch: a watch on Secrets sees every Secret of the cluster, and each `kubernetes.io/tls` one a tenant makes
(names and bytes of its choosing, referenced by nothing) reached the operator's memory: 300 of them pushed it past
its memory limit and publishing stopped for every tenant. Read by name, the operator holds the Secrets of its own
Gateways' listeners only (`core.gatewayapi.listeners.certificate_secrets`: a cross-namespace one only with a
ReferenceGrant), so what it keeps is bounded by the listeners, and it needs `get` on Secrets, not `list`/`watch`.
ConfigMaps likewise (`core.gatewayapi.listeners.ca_configmaps`, `get` only): a cluster holds many, none of them ours.

The price: a renewed certificate (or CA bundle) is served within `refresh_seconds` (not at once), and an object
created after the listener that names it within `retry_seconds`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

log = logging.getLogger("trafficsplit.operator.certificates")

Key = tuple[str, str]


T = TypeVar("T")


class ObjectGetter(Protocol):
    """One object's body (a Secret, a ConfigMap) as the API server returns it, or None when it does not exist (any
    other failure raises)."""

    async def __call__(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class CertificateTiming:
    refresh_seconds: float = 30.0  # an object read: read again this often (a renewed certificate)
    retry_seconds: float = 2.0  # an object absent or unreadable: tried again this often


class NamedReader(Generic[T]):
    """Keeps `kept` (the store's) equal to the objects of `kind` that `wanted` names, as last read and `parse`d."""

    def __init__(
        self,
        get: ObjectGetter,
        kept: dict[Key, T],
        parse: Callable[[Mapping[str, Any]], T],
        poke: Callable[[], None],
        timing: CertificateTiming,
        *,
        kind: str,
    ) -> None:
        self._get = get
        self.kept = kept
        self._parse = parse
        self._poke = poke
        self._timing = timing
        self._kind = kind
        self._wanted: frozenset[Key] = frozenset()
        self._due: dict[Key, float] = {}  # event-loop time each wanted object is read next
        self._failed: dict[Key, str] = {}  # why the last read failed, said once
        self._refresher: asyncio.Task[None] | None = None

    async def read(self, wanted: Collection[Key]) -> None:
        """Before a translation: what is no longer named is dropped, what is newly named is read now (the first
        translation of a listener sees its object), and the rest is left to the refresher."""
        self._wanted = frozenset(wanted)
        for gone in [k for k in self.kept if k not in self._wanted]:
            del self.kept[gone]
        for gone in [k for k in self._due if k not in self._wanted]:
            del self._due[gone]
            self._failed.pop(gone, None)
        await self._read_keys([k for k in self._wanted if k not in self._due])
        if self._refresher is None and self._wanted:
            self._refresher = asyncio.create_task(self._refresh(), name=f"named-{self._kind.lower()}s")

    async def close(self) -> None:
        """Leadership lost: nothing more is read, and nothing is kept (a standby translates nothing)."""
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
            self._refresher = None
        self.kept.clear()
        self._due.clear()
        self._failed.clear()
        self._wanted = frozenset()

    async def _refresh(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            due = [k for k in self._wanted if self._due.get(k, now) <= now]
            if due and await self._read_keys(due):
                self._poke()  # a pass translates what changed
            nxt = min(self._due.values(), default=now + self._timing.refresh_seconds)
            await asyncio.sleep(max(0.05, nxt - loop.time()))

    async def _read_keys(self, keys: Collection[Key]) -> bool:
        """Read `keys`; whether any changed what the translation sees."""
        loop = asyncio.get_running_loop()
        changed = False
        results = await asyncio.gather(*(self._get(*k) for k in keys), return_exceptions=True)
        for key, result in zip(keys, results, strict=True):
            if key not in self._wanted:
                continue  # no longer named while it was read
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result
                why = str(result)[:300]
                if self._failed.get(key) != why:
                    log.warning("%s %s/%s not read (what was read before is kept): %s", self._kind, *key, why)
                self._failed[key] = why
                self._due[key] = loop.time() + self._timing.retry_seconds
                continue
            self._failed.pop(key, None)
            value = self._parse(result) if result is not None else None
            if value is None:
                changed |= self.kept.pop(key, None) is not None
                self._due[key] = loop.time() + self._timing.retry_seconds
                continue
            changed |= self.kept.get(key) != value
            self.kept[key] = value
            self._due[key] = loop.time() + self._timing.refresh_seconds
        return changed
