"""Leader election on a coordination.k8s.io Lease, so that of two operator replicas exactly one publishes.

Why not kopf peering: peering needs its own KopfPeering CRDs and RBAC on them, and it pauses every handler of the
non-leader, so the standby's store would be cold on take-over. With a Lease (what kube-controller-manager uses) the
standby keeps watching and compiling, and on take-over only has to probe the replicas and publish. See
docs/operator.md. The decisions (`lease_decision`) are a pure function of the Lease and the clock.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

log = logging.getLogger("trafficsplit.operator.leader")


def _parse_time(text: str | None) -> float | None:
    if not text:
        return None
    t = text.replace("Z", "+00:00")
    try:
        return datetime.datetime.fromisoformat(t).timestamp()
    except ValueError:
        return None


def micro_time(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class Decision:
    action: str  # "create" | "renew" | "take" | "wait"
    holder: str


def lease_decision(spec: Mapping[str, Any] | None, me: str, now: float) -> Decision:
    """What to do with the Lease's current spec (None: it does not exist)."""
    if spec is None:
        return Decision("create", "")
    holder = str(spec.get("holderIdentity") or "")
    if holder == me:
        return Decision("renew", holder)
    renewed = _parse_time(spec.get("renewTime")) or _parse_time(spec.get("acquireTime")) or 0.0
    duration = float(spec.get("leaseDurationSeconds") or 0)
    if not holder or renewed + duration < now:
        return Decision("take", holder)
    return Decision("wait", holder)


class LeaderElector:
    def __init__(
        self, api: client.ApiClient, namespace: str, name: str, identity: str, duration: float, renew: float
    ) -> None:
        self.coord = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.duration = duration
        self.renew = renew
        self.leading = False

    def _spec(self, now: float, prev: Mapping[str, Any] | None, taking: bool) -> dict[str, Any]:
        spec = dict(prev or {})
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=max(1, math.ceil(self.duration)),
            renewTime=micro_time(now),
        )
        if taking or prev is None:
            spec["acquireTime"] = micro_time(now)
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if prev is not None else 0)
        return spec

    def _read(self) -> dict[str, Any] | None:
        try:
            resp = self.coord.read_namespaced_lease(self.name, self.namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        data: dict[str, Any] = json.loads(resp.data)
        return data

    def try_acquire(self) -> bool:
        """One round: True when this process holds the Lease afterwards. Conflicts (409) mean someone else won."""
        now = time.time()
        lease = self._read()
        d = lease_decision(None if lease is None else lease.get("spec") or {}, self.identity, now)
        try:
            if d.action == "create":
                meta = {"name": self.name, "namespace": self.namespace}
                body = {"metadata": meta, "spec": self._spec(now, None, True)}
                self.coord.create_namespaced_lease(self.namespace, body)
                return True
            if d.action in ("renew", "take"):
                assert lease is not None
                lease["spec"] = self._spec(now, lease.get("spec"), d.action == "take")
                self.coord.replace_namespaced_lease(self.name, self.namespace, lease)
                if d.action == "take":
                    log.info("took the lease from %r", d.holder or "(nobody)")
                return True
        except ApiException as exc:
            if exc.status in (409, 422):
                return False
            raise
        return False

    def release(self) -> None:
        lease = self._read()
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        lease["spec"]["holderIdentity"] = ""
        lease["spec"]["leaseDurationSeconds"] = 1
        try:
            self.coord.replace_namespaced_lease(self.name, self.namespace, lease)
        except ApiException as exc:
            log.warning("lease not released: %s", exc.reason)

    async def run(self, on_start: Callable[[], Awaitable[None]], on_stop: Callable[[], Awaitable[None]]) -> None:
        last_ok = 0.0
        try:
            while True:
                try:
                    ok = await asyncio.to_thread(self.try_acquire)
                    if ok:
                        last_ok = time.monotonic()
                except Exception as exc:  # an API hiccup: lead on until the lease may lapse
                    log.warning("lease round failed: %s", exc)
                    ok = self.leading and time.monotonic() - last_ok < self.duration * 0.8
                if ok and not self.leading:
                    self.leading = True
                    log.info("%s is the leader", self.identity)
                    await on_start()
                elif not ok and self.leading:
                    self.leading = False
                    log.warning("%s lost the lease", self.identity)
                    await on_stop()
                await asyncio.sleep(self.renew)
        finally:
            if self.leading:
                await asyncio.shield(asyncio.to_thread(self.release))
