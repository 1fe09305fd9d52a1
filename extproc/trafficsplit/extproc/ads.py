"""Envoy's ADS (state of the world) served from immutable, versioned snapshots, with per-type ACK/NACK tracking.

Go-control-plane style: `set_resources` installs a new snapshot (each type's version bumps only when its content
changes) and wakes every stream; a stream sends a type when its snapshot version differs from what it last sent, or
when Envoy asks for names it has not been sent (EDS after new clusters). Envoy's next DiscoveryRequest for a type
answers our last response: same nonce without `error_detail` is an ACK, with it a NACK. `wait_acked` is what the
publish path blocks on, so a generation is swapped in only after Envoy holds the clusters it needs, and refused when
Envoy rejects them. After a NACK the same version is not resent; the publisher restores the snapshot it replaced.

Versions are generation numbers, so one generation can be followed from a TrafficSplit's `status.generation` to
the `version_info` in Envoy's config dump: a type whose content generation N changes gets version "N". A generation
installs up to two snapshots (the make-before-break transition, then its own), and a refused generation may be
offered again, so a type that already got a version under N (or a later number) gets "N.k" instead, k counting every
such install in this process: each version names one content, so an ACK or a NACK never answers another one. A type
whose content N does not change keeps the version of the generation that last changed it, except that a generation
changing no type at all has its route configuration sent again as "N" (`restamp`): every generation is acknowledged
by Envoy under its own number.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import grpc
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from google.protobuf import any_pb2
from google.protobuf.message import Message

from trafficsplit.extproc.metrics import Metrics
from trafficsplit.wire.envoy import CLUSTER_TYPE, ENDPOINT_TYPE, ROUTE_TYPE, SECRET_TYPE
from trafficsplit.wire.snapshot import Messages, Packed

log = logging.getLogger(__name__)

# Types whose SotW responses carry every resource regardless of the names asked (wildcard), and the order sent.
_WILDCARD = frozenset({CLUSTER_TYPE})
# Secrets first: a listener's certificate is in place before the routes that use it.
_ORDER = (SECRET_TYPE, CLUSTER_TYPE, ENDPOINT_TYPE, ROUTE_TYPE)
_SHORT = MappingProxyType({SECRET_TYPE: "sds", CLUSTER_TYPE: "cds", ENDPOINT_TYPE: "eds", ROUTE_TYPE: "rds"})


@dataclass(frozen=True, slots=True)
class _Stamp:
    """The last generation number a type's version was taken from."""

    generation: int


@dataclass(frozen=True)
class TypeSnapshot:
    version: str
    resources: Mapping[str, any_pb2.Any]
    content: bytes  # deterministic serialization of every resource, to tell a real change from a re-push


@dataclass(kw_only=True)
class _Watch:
    """One stream's view of one type."""

    names: frozenset[str] = frozenset()
    sent_version: str | None = None
    sent_names: frozenset[str] = frozenset()
    nonce: str | None = None
    acked_version: str | None = None
    acked_names: frozenset[str] = frozenset()
    nacked_version: str | None = None
    nack_message: str = ""


@dataclass(eq=False)  # identity: kept in a set while connected
class _Stream:
    peer: str
    watches: dict[str, _Watch] = field(default_factory=dict)
    wake: asyncio.Event = field(default_factory=asyncio.Event)


class AckError(Exception):
    """Envoy did not take a snapshot: `Nacked` or `NotAcked`."""


class Nacked(AckError):
    """Envoy rejected the snapshot: the same content is refused again, never retry it."""


class NotAcked(AckError):
    """No acknowledgement in time (no Envoy connected yet, or Envoy stalled): transient, worth retrying."""


def _snapshot_type(version: int, resources: Mapping[str, Message]) -> TypeSnapshot:
    packed: dict[str, any_pb2.Any] = {}
    content = bytearray()
    for name in sorted(resources):
        a = resources[name]
        if not isinstance(a, any_pb2.Any):  # else packed already (ResourceBuilder), shared and never mutated
            a = any_pb2.Any()
            a.Pack(resources[name], deterministic=True)
        packed[name] = a
        content += name.encode() + b"\0" + a.value + b"\0"
    return TypeSnapshot(str(version), packed, bytes(content))


class AdsServer(ads_pb2_grpc.AggregatedDiscoveryServiceServicer):  # type: ignore[misc]
    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._stamps: dict[str, _Stamp] = {}  # type URL → the number its last version was taken from
        self._repeats = itertools.count(1)  # the `k` of "N.k" versions
        self._nonces = itertools.count(1)
        # Empty until the first publish: a restarted processor must not answer an Envoy that kept its config with
        # an empty snapshot (that would withdraw every cluster); Envoy waits, then keeps serving what it has.
        self._snapshot: dict[str, TypeSnapshot] = {}
        self._streams: set[_Stream] = set()
        self._changed = asyncio.Condition()  # notified on every request from Envoy and every stream that ends

    # --- the publish side -----------------------------------------------------------------------------------------

    def set_resources(self, res: Messages | Packed, *, generation: int) -> dict[str, str]:
        """Install a new snapshot for generation number `generation`; returns {type: new version} for the types whose
        content changed (versions: see the module docstring)."""
        changed: dict[str, str] = {}
        for type_url, items in res.by_type().items():
            current = self._snapshot.get(type_url)
            candidate = _snapshot_type(0, items)
            if current is not None and current.content == candidate.content:
                continue
            snap = TypeSnapshot(self._version(type_url, generation), candidate.resources, candidate.content)
            self._snapshot[type_url] = snap
            changed[type_url] = snap.version
        self._wake_streams()
        return changed

    def restamp(self, type_url: str, *, generation: int) -> dict[str, str]:
        """Send `type_url` again, unchanged, under a version of `generation`, and return it for `wait_acked`: a
        generation that changes nothing in Envoy (a Gateway's weight lives in the processor) still gets Envoy's ACK of
        its number, so a replica whose proxy is stopped is not counted as serving it."""
        current = self._snapshot.get(type_url)
        if current is None:
            return {}
        snap = TypeSnapshot(self._version(type_url, generation), current.resources, current.content)
        self._snapshot[type_url] = snap
        self._wake_streams()
        return {type_url: snap.version}

    def _version(self, type_url: str, generation: int) -> str:
        stamp = self._stamps.get(type_url)
        self._stamps[type_url] = _Stamp(max(generation, stamp.generation if stamp else 0))
        if stamp is None or generation > stamp.generation:
            return str(generation)
        return f"{generation}.{next(self._repeats)}"

    def snapshot(self) -> Mapping[str, TypeSnapshot]:
        """The installed snapshot, for `restore` when a publish fails."""
        return MappingProxyType(dict(self._snapshot))

    def restore(self, snapshot: Mapping[str, TypeSnapshot]) -> None:
        """Put back what `snapshot()` returned: each stream is sent again what differs from what it was last sent
        (its old version); a type the old snapshot lacked is sent no more, so a refused generation is never served,
        not even to an Envoy that connects later, and Envoy keeps what it holds."""
        self._snapshot = dict(snapshot)
        self._wake_streams()

    def _wake_streams(self) -> None:
        for s in self._streams:
            s.wake.set()

    def _acked(self, versions: Mapping[str, str]) -> bool:
        """True when every connected Envoy acknowledged every given version (EDS: with every cluster's assignment);
        raises AckError on a NACK of one of them."""
        if not self._streams:
            return False
        for s in self._streams:
            for type_url, version in versions.items():
                if type_url == ENDPOINT_TYPE and not self._snapshot[type_url].resources:
                    continue  # no clusters: Envoy has nothing to ask for
                w = s.watches.get(type_url)
                if type_url == SECRET_TYPE and (w is None or not w.names & set(self._snapshot[type_url].resources)):
                    continue  # SDS: only the certificates this Envoy's HTTPS listeners ask for (none without one)
                if w is None:
                    return False
                if w.nacked_version == version:
                    raise Nacked(f"Envoy ({s.peer}) rejected {_SHORT[type_url]} version {version}: {w.nack_message}")
                if w.acked_version != version:
                    return False
                if type_url == ENDPOINT_TYPE and not set(self._snapshot[type_url].resources) <= w.acked_names:
                    return False
        return True

    async def wait_acked(self, versions: Mapping[str, str], timeout: float) -> None:
        """Block until Envoy acknowledged `versions`; Nacked on a NACK, NotAcked after `timeout` seconds."""
        if not versions:
            return
        async with self._changed:
            try:
                async with asyncio.timeout(timeout):  # not wait_for, whose 3.11 form can drop a cancel
                    await self._changed.wait_for(lambda: self._acked(versions))
            except TimeoutError:
                what = ", ".join(f"{_SHORT[t]} {v}" for t, v in versions.items())
                state = "no Envoy connected" if not self._streams else "no acknowledgement"
                raise NotAcked(f"{state} for {what} within {timeout:g}s") from None

    @property
    def streams(self) -> int:
        return len(self._streams)

    # --- the Envoy side -------------------------------------------------------------------------------------------

    async def StreamAggregatedResources(
        self,
        request_iterator: AsyncIterator[discovery_pb2.DiscoveryRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[discovery_pb2.DiscoveryResponse]:
        stream = _Stream(peer=context.peer())
        self._streams.add(stream)
        self._metrics.ads_streams.set(len(self._streams))
        reader = asyncio.create_task(self._read(stream, request_iterator))
        try:
            while not reader.done():
                waker = asyncio.ensure_future(stream.wake.wait())
                await asyncio.wait({waker, reader}, return_when=asyncio.FIRST_COMPLETED)
                waker.cancel()
                stream.wake.clear()
                for type_url in _ORDER:
                    resp = self._next_response(stream, type_url)
                    if resp is not None:
                        yield resp
            reader.result()  # surface a read error
        finally:
            reader.cancel()
            self._streams.discard(stream)
            self._metrics.ads_streams.set(len(self._streams))
            async with self._changed:
                self._changed.notify_all()

    async def _read(self, stream: _Stream, requests: AsyncIterator[discovery_pb2.DiscoveryRequest]) -> None:
        async for req in requests:
            await self._on_request(stream, req)

    async def _on_request(self, stream: _Stream, req: discovery_pb2.DiscoveryRequest) -> None:
        type_url = req.type_url
        if type_url not in _SHORT:
            log.warning("ignoring a discovery request for unserved type %s", type_url)
            return
        w = stream.watches.setdefault(type_url, _Watch())
        if req.response_nonce:
            if req.response_nonce != w.nonce:
                return  # answers an older response of ours: superseded, ignore (xDS protocol)
            if req.HasField("error_detail"):
                w.nacked_version, w.nack_message = w.sent_version, req.error_detail.message
                self._metrics.xds_nacks.labels(_SHORT[type_url]).inc()
                log.warning("Envoy NACKed %s version %s: %s", _SHORT[type_url], w.sent_version, w.nack_message)
            else:
                w.acked_version, w.acked_names = w.sent_version, w.sent_names
                self._metrics.xds_acks.labels(_SHORT[type_url]).inc()
        w.names = frozenset(req.resource_names)
        stream.wake.set()
        async with self._changed:
            self._changed.notify_all()

    def _next_response(self, stream: _Stream, type_url: str) -> discovery_pb2.DiscoveryResponse | None:
        w = stream.watches.get(type_url)
        snap = self._snapshot.get(type_url)
        if w is None or snap is None:
            return None  # Envoy has not subscribed to this type yet
        wildcard = type_url in _WILDCARD
        if not wildcard and not w.names:
            return None  # a non-wildcard type with nothing asked for
        names = frozenset(snap.resources) if wildcard else frozenset(n for n in w.names if n in snap.resources)
        if w.sent_version == snap.version and (wildcard or names <= w.sent_names):
            return None
        w.sent_version, w.sent_names, w.nonce = snap.version, names, str(next(self._nonces))
        return discovery_pb2.DiscoveryResponse(
            version_info=snap.version,
            type_url=type_url,
            nonce=w.nonce,
            resources=[snap.resources[n] for n in sorted(names)],
        )
