"""Benchmark-only lever: the product's ext_proc decision served over Envoy's ext_proc `http_service` (HTTP/1.1 + JSON)
instead of the gRPC stream, on uvloop with httptools' parser.

Why: most of the Python processor's CPU per request is grpc.aio's per-stream work (a stream per HTTP request), not
our decision. Envoy 1.40 can call an ext_proc server with one plain HTTP POST per message (proto-JSON body, header
values base64 in `raw_value`); this measures what that transport would cost with the same `Processor.handle`. Envoy
marks `http_service` work-in-progress (not covered by its threat model, subject to breaking changes), so this is a
measurement, not a shipped transport.

    python bench/httpproc.py --listen 127.0.0.1:0 --generation gen.pb --port-file port.txt
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import httptools
import uvloop
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep

from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.extproc.processor import Processor
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.generation import generation_from_proto

_B64 = base64.b64encode


def to_request(body: bytes) -> ep.ProcessingRequest:
    """proto-JSON → ProcessingRequest for the request-headers phase (the only phase the filter sends)."""
    doc = json.loads(body)
    req = ep.ProcessingRequest()
    headers = req.request_headers.headers.headers
    for h in doc.get("request_headers", {}).get("headers", {}).get("headers", ()):
        headers.add(key=h["key"], raw_value=base64.b64decode(h.get("raw_value", "")))
    return req


def to_json(reply: ep.ProcessingResponse) -> bytes:
    """The replies the processor makes (routed + metadata, immediate 404, pass-through) as proto-JSON, by hand:
    json_format costs ~60 µs a message."""
    out: dict[str, Any] = {}
    if reply.HasField("immediate_response"):
        ir = reply.immediate_response
        out["immediate_response"] = {"status": {"code": ir.status.code}, "body": _B64(ir.body).decode()}
    else:
        common = reply.request_headers.response
        resp: dict[str, Any] = {}
        sets = [
            {"header": {"key": o.header.key, "raw_value": _B64(o.header.raw_value).decode()}, "append_action": 2}
            for o in common.header_mutation.set_headers
        ]
        if sets:
            resp["header_mutation"] = {"set_headers": sets}
        if common.clear_route_cache:
            resp["clear_route_cache"] = True
        out["request_headers"] = {"response": resp}
    if reply.HasField("dynamic_metadata"):
        out["dynamic_metadata"] = {
            ns: {k: v.string_value for k, v in s.struct_value.fields.items()}
            for ns, s in reply.dynamic_metadata.fields.items()
        }
    return json.dumps(out, separators=(",", ":")).encode()


class ExtProcHttp(asyncio.Protocol):
    def __init__(self, processor: Processor) -> None:
        self._processor = processor
        self._parser = httptools.HttpRequestParser(self)
        self._body: list[bytes] = []
        self._transport: Any = None  # uvloop's transports are not asyncio.Transport subclasses

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self._transport.close()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        body = b"".join(self._body)
        self._body.clear()
        out = to_json(self._processor.handle(to_request(body)))
        self._transport.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(out), out)
        )


async def serve(listen: str, generation: Path, port_file: Path) -> None:
    held = HeldGeneration()
    msg = pb.Generation.FromString(generation.read_bytes())
    held.swap(generation_from_proto(msg), "bench", msg)
    processor = Processor(held, Metrics())
    host, _, port = listen.rpartition(":")
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: ExtProcHttp(processor), host, int(port))
    port_file.write_text(str(server.sockets[0].getsockname()[1]))
    await server.serve_forever()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--generation", type=Path, required=True, help="a serialized trafficsplit.v1alpha1.Generation")
    p.add_argument("--port-file", type=Path, required=True)
    args = p.parse_args()
    uvloop.run(serve(args.listen, args.generation, args.port_file))


if __name__ == "__main__":
    main()
