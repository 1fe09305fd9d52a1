"""Benchmark-only lever: the product's ext_proc `Process` stream served by grpclib (pure-asyncio HTTP/2 over h2, on
uvloop, one thread) instead of grpc.aio, with the same `Processor.handle`.

Why: profiles of the shipped processor put most of its ~400 µs CPU per request in grpc.aio's per-call work, its
cross-thread eventfd wake-ups and sendmsg, and only 4-6 % in `Processor.handle`. grpclib keeps the whole HTTP/2 stack
on the event loop's thread; this measures what that would cost for the one hot RPC. The Envoy side is unchanged
(envoy_grpc, the same filter settings), so only the server stack differs. A measurement, not a shipped transport.

    python bench/grpclibproc.py --socket /tmp/p.sock --generation gen.pb --ready-file ready
"""

from __future__ import annotations

import argparse
from pathlib import Path

import uvloop
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from grpclib.const import Cardinality, Handler, Status
from grpclib.server import Server, Stream

from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.extproc.processor import Processor
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.generation import generation_from_proto

PROCESS = "/envoy.service.ext_proc.v3.ExternalProcessor/Process"


class GrpclibExtProc:
    """`ExternalProcessor/Process` for grpclib's `Server`, which only needs `__mapping__` (no protoc plugin)."""

    def __init__(self, processor: Processor) -> None:
        self._processor = processor

    async def process(self, stream: Stream[ep.ProcessingRequest, ep.ProcessingResponse]) -> None:
        """As the shipped servicer (`Processor.Process`): one message in (the request headers, the only phase Envoy
        is asked for), one reply, then the stream ends with OK (grpclib sends the trailers when this returns). No
        second read: Envoy resets the finished stream rather than half-closing it."""
        req = await stream.recv_message()
        if req is None:
            await stream.send_trailing_metadata(
                status=Status.INVALID_ARGUMENT, status_message="the stream ended before any request headers"
            )
            return
        await stream.send_message(self._processor.handle(req))

    def __mapping__(self) -> dict[str, Handler]:
        return {PROCESS: Handler(self.process, Cardinality.STREAM_STREAM, ep.ProcessingRequest, ep.ProcessingResponse)}


async def serve(socket: Path, generation: Path, ready_file: Path) -> None:
    held = HeldGeneration()
    msg = pb.Generation.FromString(generation.read_bytes())
    held.swap(generation_from_proto(msg), "bench", msg)
    # Server() binds the running loop, so it is built inside it (uvloop's).
    server = Server([GrpclibExtProc(Processor(held, Metrics()))])
    await server.start(path=str(socket))
    ready_file.write_text("ready")  # after listen(): Envoy never meets a bound socket that refuses connections
    await server.wait_closed()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--socket", type=Path, required=True, help="the Unix socket to listen on")
    p.add_argument("--generation", type=Path, required=True, help="a serialized trafficsplit.v1alpha1.Generation")
    p.add_argument("--ready-file", type=Path, required=True, help="written once the server listens")
    args = p.parse_args()
    uvloop.run(serve(args.socket, args.generation, args.ready_file))


if __name__ == "__main__":
    main()
