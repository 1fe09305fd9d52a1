"""The publish API client: one grpc.aio channel per dataplane replica, bearer-token metadata on every call.

Thin on purpose: retries, backoff and bookkeeping live in `fleet`, so this module is only the wire.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.v1alpha1 import publish_pb2_grpc as pb_grpc


def read_token(path: str | None) -> str | None:
    """The token, re-read on every call so a rotated (projected) token is picked up without a restart."""
    if not path:
        return None
    return Path(path).read_text().strip() or None


class PublisherClient:
    """Publish and GetHeld against one replica."""

    def __init__(self, target: str, token_file: str | None, timeout: float) -> None:
        self.target = target
        self._token_file = token_file
        self._timeout = timeout
        # Reconnect quickly after a replica restarts: the default backoff can reach minutes.
        self._channel = grpc.aio.insecure_channel(
            target,
            options=[
                ("grpc.initial_reconnect_backoff_ms", 100),
                ("grpc.min_reconnect_backoff_ms", 100),
                ("grpc.max_reconnect_backoff_ms", 1000),
                ("grpc.enable_retries", 0),
            ],
        )
        self._stub = pb_grpc.PublisherStub(self._channel)

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        token = read_token(self._token_file)
        return (("authorization", f"Bearer {token}"),) if token else ()

    async def publish(self, generation: pb.Generation) -> pb.PublishReply:
        reply: pb.PublishReply = await self._stub.Publish(
            pb.PublishRequest(generation=generation), timeout=self._timeout, metadata=self._metadata()
        )
        return reply

    async def get_held(self, with_generation: bool = False) -> pb.HeldReply:
        reply: pb.HeldReply = await self._stub.GetHeld(
            pb.GetHeldRequest(with_generation=with_generation), timeout=self._timeout, metadata=self._metadata()
        )
        return reply

    async def close(self) -> None:
        await self._channel.close(None)
