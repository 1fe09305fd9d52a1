"""Envoy's ext_proc over `http_service`: one HTTP/1.1 POST per ext_proc message, answered by `Processor.respond`.

Experimental and opt-in (`--ext-proc-transport http`; gRPC stays the default): Envoy marks `http_service`
work-in-progress, outside its threat model (docs/dataplane.md, "The http_service transport"). Why offer it: over gRPC
most of the processor's CPU is grpc.aio's per-stream work, not the decision; a plain POST on a kept-alive connection,
parsed by httptools in an asyncio.Protocol, costs a fraction of that (docs/performance.md).

The server trusts nothing it is sent, though only Envoy reaches it (a Unix socket or loopback): the request line
and headers are bounded while they arrive (`MAX_HEAD_BYTES`, else the connection closes), the body too
(`max_body_bytes`: 413 and close), only `POST PATH` is served (404, 405), malformed HTTP closes the connection, a
body that is not a ProcessingRequest is a 400. A processor error is a 500, on which Envoy fails open as it does on
a gRPC error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from trafficsplit.extproc.httpcodec import CodecError, JsonReplies, decode_request_view
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.extproc.processor import Processor
from trafficsplit.wire.bootstrap import EXTPROC_HTTP_PATH, Address
from trafficsplit.wire.envoy import LISTENER_PORT_METADATA
from trafficsplit.wire.processing import listener_port

try:
    import httptools

    HAVE_HTTPTOOLS = True
except ImportError:  # pragma: no cover - the image and the test environment install it (the `fast` extra)
    HAVE_HTTPTOOLS = False

log = logging.getLogger(__name__)

# A request-headers message is the client's headers base64-encoded in JSON: Envoy's own header limit (60 KiB by
# default) grows by 4/3 and the JSON around each header; 1 MiB leaves room for a raised Envoy limit and no more.
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
# Request line and headers of the POST itself: Envoy sends a handful of short ones.
MAX_HEAD_BYTES = 16 * 1024
_REASONS = {
    200: b"OK",
    400: b"Bad Request",
    404: b"Not Found",
    405: b"Method Not Allowed",
    413: b"Content Too Large",
    500: b"Internal Server Error",
}
_REJECTED = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 413: "too_large"}
HEAD_TOO_LARGE = "head_too_large"
_LISTENER_HEADER = LISTENER_PORT_METADATA.encode()


def require_httptools() -> None:
    """Fail at start, with what to install, rather than on the first request."""
    if not HAVE_HTTPTOOLS:
        raise SystemExit(
            "--ext-proc-transport http needs httptools: install the `fast` extra (pip install 'trafficsplit[fast]')"
        )


class _Abort(Exception):
    """Raised from a parser callback to stop parsing: the connection is answered (or not) and closed."""


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection from Envoy: requests are answered in order, synchronously, as each completes."""

    def __init__(self, server: HttpExtProcServer) -> None:
        self._server = server
        self._processor = server.processor
        self._metrics = server.metrics
        self._max_body = server.max_body_bytes
        self._parser = httptools.HttpRequestParser(self)
        self._transport: Any = None  # uvloop's transports are not asyncio.Transport subclasses
        self._url = b""
        self._listener: int | None = None  # the Gateway listener port the POST names (the bootstrap's header)
        # Bytes fed to the parser since the last request's headers ended: the next request line and headers. They are
        # counted here, at the feed, because httptools buffers a header value whole before `on_header` sees it.
        self._head = 0
        self._in_head = True  # between requests or inside one's request line and headers
        self._heads = 0  # heads ended on this connection
        self._body: list[bytes] = []
        self._size = 0
        self._status = 200  # what this request will be answered, decided at the end of its headers
        self._in_message = False
        self._draining = False

    # --- asyncio.Protocol ---------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._server.connections.add(self)
        self._metrics.extproc_http_connections.inc()

    def connection_lost(self, exc: Exception | None) -> None:
        self._server.connections.discard(self)
        self._metrics.extproc_http_connections.dec()

    def data_received(self, data: bytes) -> None:
        try:
            self._feed(memoryview(data))
        except httptools.HttpParserCallbackError as exc:
            if not isinstance(exc.__context__, _Abort):  # not ours: a bug, never a silent close
                log.error("http_service: closing the connection on an unexpected error", exc_info=exc.__context__)
                self._metrics.extproc_http_rejected.labels("internal_error").inc()
            self._transport.close()  # an _Abort: already answered or counted
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):  # malformed, or an upgrade: no answer
            self._metrics.extproc_http_rejected.labels("malformed_http").inc()
            self._transport.close()

    def _feed(self, data: memoryview) -> None:
        """Feed the parser, a head at most `MAX_HEAD_BYTES` at a time: what it buffers of a head never passes the
        bound, and the connection closes the moment a head would. A head that begins in the same read as the previous
        request's body is counted from the next read on (it can pass the bound by at most that read's rest)."""
        while data and not self._transport.is_closing():
            if not self._in_head:
                self._parser.feed_data(data)
                return
            room = MAX_HEAD_BYTES - self._head
            if room <= 0:
                self._metrics.extproc_http_rejected.labels(HEAD_TOO_LARGE).inc()
                self._transport.close()
                return
            piece, data = data[:room], data[room:]
            heads = self._heads
            self._parser.feed_data(piece)
            if self._heads == heads:  # no head ended in it: all of it was head
                self._head += len(piece)

    def pause_writing(self) -> None:
        # A peer that sends requests without reading the answers is not read from until it does: bounded buffers.
        self._transport.pause_reading()

    def resume_writing(self) -> None:
        self._transport.resume_reading()

    # --- httptools callbacks ------------------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._in_message = True
        self._url, self._size, self._status, self._listener = b"", 0, 200, None
        self._body.clear()

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == _LISTENER_HEADER:
            self._listener = listener_port(((LISTENER_PORT_METADATA, value),))
        if name.lower() == b"content-length" and value.strip().isdigit() and int(value) > self._max_body:
            self._reject(413, close=True)

    def on_headers_complete(self) -> None:
        self._in_head, self._head, self._heads = False, 0, self._heads + 1
        if self._url != self._server.path:
            self._status = 404
        elif self._parser.get_method() != b"POST":
            self._status = 405

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > self._max_body:
            self._reject(413, close=True)
        if self._status == 200:
            self._body.append(body)

    def on_message_complete(self) -> None:
        self._in_message, self._in_head = False, True
        keep_alive = self._parser.should_keep_alive() and not self._draining
        if self._status != 200:
            self._reject(self._status, close=not keep_alive)
            return
        body = b"".join(self._body)
        self._body.clear()
        self._respond(*self._answer(body), close=not keep_alive)

    # --- answering ----------------------------------------------------------------------------------------------

    def _answer(self, body: bytes) -> tuple[int, bytes]:
        try:
            view = decode_request_view(body)
        except CodecError as exc:
            # Envoy never sends one: a 400 is a caller that is not Envoy (or a codec bug), worth a line.
            log.warning("http_service: 400: %s", exc)
            self._metrics.extproc_http_rejected.labels("bad_request").inc()
            return 400, str(exc).encode()[:200]
        replies = self._server.replies
        if isinstance(view, str):  # a phase the processing mode never asks for: the empty pass-through
            return 200, replies.pass_through(view)
        try:
            # The same decision as over gRPC, rendered as JSON. Processor.respond counts and logs any error (an
            # EncodeError included); Envoy fails open on the 500.
            return 200, self._processor.respond(lambda: view, replies.render, self._listener)
        except Exception:
            return 500, b""

    def _reject(self, status: int, *, close: bool) -> None:
        self._metrics.extproc_http_rejected.labels(_REJECTED[status]).inc()
        self._respond(status, b"", close=close, allow=status == 405)
        if close:
            raise _Abort  # stop parsing what follows: the connection is closing

    def _respond(self, status: int, body: bytes, *, close: bool, allow: bool = False) -> None:
        content_type = b"application/json" if status == 200 else b"text/plain"
        head = b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n" % (
            status,
            _REASONS[status],
            content_type,
            len(body),
        )
        if allow:
            head += b"allow: POST\r\n"
        if close:
            head += b"connection: close\r\n"
        self._transport.write(head + b"\r\n" + body)
        if close:
            self._transport.close()

    def drain(self) -> None:
        """Stop after the request in progress (answered with `connection: close`), or now if there is none."""
        self._draining = True
        if not self._in_message:
            self._transport.close()

    def abort(self) -> None:
        self._transport.abort()


class HttpExtProcServer:
    """The listening side: `start(listen)` binds `unix:/path` or `HOST:PORT`, `stop(grace)` drains."""

    def __init__(
        self,
        processor: Processor,
        metrics: Metrics,
        *,
        path: str = EXTPROC_HTTP_PATH,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        require_httptools()
        self.processor = processor
        self.metrics = metrics
        self.path = path.encode()
        self.max_body_bytes = max_body_bytes
        self.connections: set[_Connection] = set()
        self.replies = JsonReplies()  # the encoded replies' constant parts, shared by the connections
        self._server: asyncio.AbstractServer | None = None

    async def start(self, listen: str) -> int | str:
        """Listen; returns the bound port (TCP) or the socket's `unix:` address."""
        loop = asyncio.get_running_loop()
        addr = Address.parse(listen)
        if addr.path is not None:
            self._server = await loop.create_unix_server(lambda: _Connection(self), addr.path)
            return listen
        self._server = await loop.create_server(lambda: _Connection(self), addr.host, addr.port)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def stop(self, grace: float) -> None:
        """Refuse new connections, let each open one finish the request it is in, then close what is left."""
        if self._server is None:
            return
        self._server.close()
        for conn in list(self.connections):
            conn.drain()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                while self.connections:
                    await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.abort()
        await self._server.wait_closed()
