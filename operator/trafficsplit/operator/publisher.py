"""The publish API client: one grpc.aio channel per dataplane replica, bearer-token metadata on every call, over TLS
(mTLS with a client certificate) when CA files are given.

Thin on purpose: retries, backoff and bookkeeping live in `fleet`, so this module is only the wire.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.v1alpha1 import publish_pb2_grpc as pb_grpc

# Reconnect quickly after a replica restarts: the default backoff can reach minutes.
_CHANNEL_OPTIONS: list[tuple[str, int | str]] = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.enable_retries", 0),
]


def read_token(path: str | None) -> str | None:
    """The token, re-read on every call so a rotated (projected) token is picked up without a restart."""
    if not path:
        return None
    return Path(path).read_text().strip() or None


@dataclass(frozen=True, slots=True)
class ClientTlsFiles:
    """PEM files: the CA that signs the replicas' server certificates, and this client's certificate and key (mTLS).
    `server_name` is the name the server certificate must carry: replicas are reached by pod IP, which no certificate
    names, so the chart gives them one shared DNS name."""

    ca: str
    cert: str | None = None
    key: str | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise ValueError("a client certificate and its key go together")

    def _paths(self) -> tuple[str, ...]:
        return tuple(p for p in (self.ca, self.cert, self.key) if p is not None)

    def stamp(self) -> tuple[tuple[int, int], ...]:
        return tuple((s.st_mtime_ns, s.st_ino) for s in (os.stat(p) for p in self._paths()))

    def credentials(self) -> grpc.ChannelCredentials:
        def read(path: str | None) -> bytes | None:
            return Path(path).read_bytes() if path is not None else None

        return grpc.ssl_channel_credentials(read(self.ca), read(self.key), read(self.cert))


class PublisherClient:
    """Publish and GetHeld against one replica. With TLS, a changed certificate file (a renewed Secret) opens a new
    channel on the next call, so rotation needs no restart."""

    def __init__(
        self,
        target: str,
        token_file: str | None,
        timeout: float,
        tls: ClientTlsFiles | None = None,
        token: Callable[[], str | None] | None = None,
    ) -> None:
        self.target = target
        self._token_file = token_file
        self._token = token  # where the token comes from, when not (only) the file: read on every call as the file is
        self._timeout = timeout
        self._tls = tls
        self._stamp = tls.stamp() if tls is not None else ()
        self._channel = self._open()
        self._stub = pb_grpc.PublisherStub(self._channel)

    def _open(self) -> grpc.aio.Channel:
        if self._tls is None:
            return grpc.aio.insecure_channel(self.target, options=_CHANNEL_OPTIONS)
        options = list(_CHANNEL_OPTIONS)
        if self._tls.server_name:
            options.append(("grpc.ssl_target_name_override", self._tls.server_name))
        return grpc.aio.secure_channel(self.target, self._tls.credentials(), options=options)

    async def _fresh_stub(self) -> pb_grpc.PublisherStub:
        if self._tls is not None:
            stamp = self._tls.stamp()
            if stamp != self._stamp:
                old, self._stamp = self._channel, stamp
                self._channel = self._open()
                self._stub = pb_grpc.PublisherStub(self._channel)
                await old.close(None)
        return self._stub

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        token = self._token() if self._token is not None else read_token(self._token_file)
        return (("authorization", f"Bearer {token}"),) if token else ()

    async def publish(self, generation: pb.Generation) -> pb.PublishReply:
        stub = await self._fresh_stub()
        reply: pb.PublishReply = await stub.Publish(
            pb.PublishRequest(generation=generation), timeout=self._timeout, metadata=self._metadata()
        )
        return reply

    async def get_held(self, with_generation: bool = False) -> pb.HeldReply:
        stub = await self._fresh_stub()
        reply: pb.HeldReply = await stub.GetHeld(
            pb.GetHeldRequest(with_generation=with_generation), timeout=self._timeout, metadata=self._metadata()
        )
        return reply

    async def close(self) -> None:
        await self._channel.close(None)
