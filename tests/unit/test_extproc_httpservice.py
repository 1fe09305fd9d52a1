"""The http_service server's HTTP/1.1 edge, on loopback without Envoy: the one POST it serves (the same reply as
`Processor.handle` over gRPC), keep-alive, and every bound — 404/405, 400 for a body that is not a ProcessingRequest,
413 and close for a body too large, close for malformed HTTP or an oversized head, 500 for a processor error — each
counted in the metrics."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from google.protobuf import json_format

from tests.unit.test_extproc_processor import generation
from trafficsplit.core.model.cookie import AffinityMinter
from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.httpcodec import encode_response
from trafficsplit.extproc.httpservice import MAX_HEAD_BYTES, HttpExtProcServer
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.extproc.processor import Decided, Processor
from trafficsplit.wire.bootstrap import EXTPROC_HTTP_PATH

MAX_BODY = 4096


def body_for(authority: str = "shop.example", cookie: str | None = None) -> bytes:
    req = ep.ProcessingRequest()
    req.request_headers.headers.headers.add(key=":authority", raw_value=authority.encode())
    if cookie is not None:
        req.request_headers.headers.headers.add(key="cookie", raw_value=cookie.encode())
    return json_format.MessageToJson(req, preserving_proto_field_name=True).encode()


def post(body: bytes, path: str = EXTPROC_HTTP_PATH, method: str = "POST", extra: str = "") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nhost: trafficsplit-extproc\r\ncontent-length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def response(self) -> tuple[int, dict[str, str], bytes]:
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 5)
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        headers = dict(line.split(": ", 1) for line in lines[1:] if line)
        body = await self.reader.readexactly(int(headers["content-length"]))
        return status, headers, body

    async def closed(self) -> bool:
        return await self.rest() == b""

    async def rest(self) -> bytes:
        """What the server sends until it closes the connection (a reset, when it closed with our bytes unread)."""
        try:
            return await asyncio.wait_for(self.reader.read(), 5)
        except ConnectionResetError:
            return b""


Scenario = Callable[[Client, Processor, Metrics], Awaitable[None]]


def run(scenario: Scenario) -> Metrics:
    async def main() -> Metrics:
        held = HeldGeneration()
        held.swap(generation(), "test")
        metrics = Metrics()
        processor = Processor(held, metrics, AffinityMinter(clock_ms=lambda: 1, start=0))
        server = HttpExtProcServer(processor, metrics, max_body_bytes=MAX_BODY)
        port = await server.start("127.0.0.1:0")
        assert isinstance(port, int)
        client = Client(*await asyncio.open_connection("127.0.0.1", port))
        try:
            await scenario(client, processor, metrics)
        finally:
            client.writer.close()
            await server.stop(1.0)
        assert not server.connections
        return metrics

    return asyncio.run(main())


def value(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_each_post_gets_the_processors_reply_on_one_kept_alive_connection() -> None:
    async def scenario(c: Client, processor: Processor, metrics: Metrics) -> None:
        request = json_format.Parse(body_for(cookie="ts=00000000000000000000000a"), ep.ProcessingRequest())
        for _ in range(3):
            await c.send(post(body_for(cookie="ts=00000000000000000000000a")))
            status, headers, body = await c.response()
            assert (status, headers["content-type"]) == (200, "application/json")
            assert json.loads(body) == json.loads(encode_response(processor.handle(request)))
        await c.send(post(body_for()))  # no cookie: one is minted, and reaches Envoy as metadata
        assert "set_cookie" in json.loads((await c.response())[2])["dynamic_metadata"]["trafficsplit"]
        assert value(metrics, "trafficsplit_extproc_http_connections") == 1
        # Two requests in one write (pipelined) are answered in order.
        await c.send(post(body_for("nowhere.example")) + post(body_for()))
        assert json.loads((await c.response())[2])["immediate_response"]["status"]["code"] == "NotFound"
        assert "request_headers" in json.loads((await c.response())[2])

    metrics = run(scenario)
    # Counted as over gRPC: 3 posts and the test's own 3 handle() calls, the minting post, the pipelined one.
    decided = sum(
        s.value
        for m in metrics.registry.collect()
        if m.name == "trafficsplit_decisions"
        for s in m.samples
        if s.name == "trafficsplit_decisions_total"
    )
    assert decided == 8
    assert value(metrics, "trafficsplit_undecided_total", reason="no_split") == 1


@pytest.mark.parametrize(
    ("request_bytes", "status", "reason"),
    [
        (post(b"{}", path="/other"), 404, "not_found"),
        (post(b"{}", path=EXTPROC_HTTP_PATH + "?x=1"), 404, "not_found"),
        (post(b"", method="GET"), 405, "method_not_allowed"),
        (post(b"{not json"), 400, "bad_request"),
        (post(b'{"request_headers": {"headers": {"headers": [{"key": "a", "raw_value": "!"}]}}}'), 400, "bad_request"),
    ],
)
def test_a_refused_request_is_answered_and_the_connection_kept(request_bytes: bytes, status: int, reason: str) -> None:
    async def scenario(c: Client, processor: Processor, metrics: Metrics) -> None:
        await c.send(request_bytes)
        got, headers, _ = await c.response()
        assert got == status
        if status == 405:
            assert headers["allow"] == "POST"
        await c.send(post(body_for()))  # the same connection still serves
        assert (await c.response())[0] == 200

    assert value(run(scenario), "trafficsplit_extproc_http_rejected_total", reason=reason) == 1


@pytest.mark.parametrize(
    "request_bytes",
    [
        post(b"x" * (MAX_BODY + 1)),  # declared too large: refused before the body is read
        (
            f"POST {EXTPROC_HTTP_PATH} HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n".encode()
            + b"%x\r\n%s\r\n" % (MAX_BODY // 2, b"x" * (MAX_BODY // 2)) * 3
        ),  # chunked past the bound: refused once it is crossed
    ],
    ids=["content-length", "chunked"],
)
def test_a_body_over_the_bound_is_a_413_and_the_connection_closes(request_bytes: bytes) -> None:
    async def scenario(c: Client, processor: Processor, metrics: Metrics) -> None:
        await c.send(request_bytes)
        status, headers, _ = await c.response()
        assert (status, headers["connection"]) == (413, "close")
        assert await c.closed()

    assert value(run(scenario), "trafficsplit_extproc_http_rejected_total", reason="too_large") == 1


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"NOT HTTP AT ALL\r\n\r\n",
        b"POST / HTTP/1.1\r\ncontent-length: -1\r\n\r\n",
    ],
    ids=["garbage", "bad content-length"],
)
def test_malformed_http_closes_the_connection_unanswered(request_bytes: bytes) -> None:
    async def scenario(c: Client, processor: Processor, metrics: Metrics) -> None:
        await c.send(request_bytes)
        assert await c.closed()

    assert value(run(scenario), "trafficsplit_extproc_http_rejected_total", reason="malformed_http") == 1


def test_an_upgrade_closes_the_connection() -> None:
    # The parser stops at an upgrade; nothing after it is read as HTTP (here the GET itself got its 405 first).
    upgrade = f"GET {EXTPROC_HTTP_PATH} HTTP/1.1\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n".encode()

    async def scenario(c: Client, processor: Processor, metrics: Metrics) -> None:
        await c.send(upgrade + post(body_for()))
        assert b" 200 OK" not in await c.rest()  # and EOF: closed

    assert value(run(scenario), "trafficsplit_extproc_http_rejected_total", reason="malformed_http") == 1


def test_a_processor_error_is_a_500_counted_as_over_grpc() -> None:
    async def scenario(c: Client, processor: Processor, metrics: Metrics) -> None:
        def broken(view: object, listener: int | None = None) -> Decided:
            raise RuntimeError("bug")

        processor._decide = broken  # type: ignore[method-assign]
        await c.send(post(body_for()))
        assert (await c.response())[0] == 500  # Envoy fails open on it (failure_mode_allow)
        await c.send(post(body_for()))
        assert (await c.response())[0] == 500

    assert value(run(scenario), "trafficsplit_processor_errors_total") == 2


def test_connection_close_is_honoured() -> None:
    async def scenario(c: Client, processor: Processor, metrics: Metrics) -> None:
        await c.send(post(body_for(), extra="connection: close\r\n"))
        status, headers, _ = await c.response()
        assert (status, headers["connection"]) == (200, "close")
        assert await c.closed()

    run(scenario)


def test_stop_closes_an_idle_connection_and_refuses_new_ones() -> None:
    async def main() -> None:
        held = HeldGeneration()
        metrics = Metrics()
        server = HttpExtProcServer(Processor(held, metrics), metrics)
        port = await server.start("127.0.0.1:0")
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(post(body_for()))
        await writer.drain()
        c = Client(reader, writer)
        assert (await c.response())[0] == 200  # no generation: a pass-through, still a 200
        await server.stop(1.0)
        assert await c.closed()
        assert value(metrics, "trafficsplit_extproc_http_connections") == 0
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)
        writer.close()

    asyncio.run(main())


def test_an_endless_header_value_closes_the_connection_at_the_head_bound() -> None:
    """httptools hands a header to `on_header` only once its value ends: the bound must hold while it streams, not
    after (before: the value was buffered without end, and concatenated quadratically)."""
    head = f"POST {EXTPROC_HTTP_PATH} HTTP/1.1\r\nx-endless: ".encode()
    chunk = b"a" * 4096

    async def scenario(c: Client, processor: Processor, metrics: Metrics) -> None:
        await c.send(head)
        sent = len(head)
        while sent <= 4 * MAX_HEAD_BYTES:
            try:
                await c.send(chunk)
            except ConnectionError:
                break
            sent += len(chunk)
            if c.reader.at_eof():
                break
            await asyncio.sleep(0)
        assert await c.closed()

    assert value(run(scenario), "trafficsplit_extproc_http_rejected_total", reason="head_too_large") == 1


@pytest.mark.parametrize(
    "request_bytes",
    [
        post(b"{}", extra="x-big: " + "a" * MAX_HEAD_BYTES + "\r\n"),
        post(b"{}", path="/" + "u" * MAX_HEAD_BYTES),
        post(b"{}", extra="x-h: 1\r\n" * (MAX_HEAD_BYTES // 8)),
    ],
    ids=["one large header", "long path", "many headers"],
)
def test_an_oversized_head_closes_the_connection(request_bytes: bytes) -> None:
    async def scenario(c: Client, processor: Processor, metrics: Metrics) -> None:
        await c.send(request_bytes)
        await c.rest()  # returns: closed

    assert value(run(scenario), "trafficsplit_extproc_http_rejected_total", reason="head_too_large") == 1


def test_a_head_pipelined_behind_a_request_is_bounded_from_the_next_read_on() -> None:
    """A head that begins in the read that ends the previous request is counted from the next read on (the parser
    does not say where in a read a request ended): it closes after at most the bound more."""

    async def scenario(c: Client, processor: Processor, metrics: Metrics) -> None:
        await c.send(post(body_for()) + b"POST / HTTP/1.1\r\nx-endless: " + b"a" * 1000)
        assert (await c.response())[0] == 200
        await c.send(b"a" * (MAX_HEAD_BYTES + 1))
        assert await c.closed()

    assert value(run(scenario), "trafficsplit_extproc_http_rejected_total", reason="head_too_large") == 1


def test_a_head_at_the_bound_is_served() -> None:
    """Exactly `MAX_HEAD_BYTES` of request line and headers (the final CRLF included) is still a request."""
    base = post(b"", extra="x-pad: \r\n")
    head_len = len(base)
    request = post(
        body_for(), extra="x-pad: " + "p" * (MAX_HEAD_BYTES - head_len - len(str(len(body_for()))) + 1) + "\r\n"
    )
    head = request[: request.index(b"\r\n\r\n") + 4]
    assert len(head) == MAX_HEAD_BYTES, len(head)

    async def scenario(c: Client, processor: Processor, metrics: Metrics) -> None:
        for i in range(0, len(request), 1000):  # in pieces, as a stream arrives
            await c.send(request[i : i + 1000])
        assert (await c.response())[0] == 200

    assert value(run(scenario), "trafficsplit_extproc_http_rejected_total", reason="head_too_large") == 0


def test_deeply_nested_json_is_a_counted_400_and_the_connection_kept(caplog: pytest.LogCaptureFixture) -> None:
    """json.loads raises RecursionError past ~1,000 levels: before, it escaped the parser callback and the connection
    closed unanswered and uncounted."""
    nested = b"[" * 2000 + b"]" * 2000

    async def scenario(c: Client, processor: Processor, metrics: Metrics) -> None:
        await c.send(post(nested))
        status, _, body = await c.response()
        assert status == 400 and b"nested" in body
        await c.send(post(body_for()))  # the same connection still serves
        assert (await c.response())[0] == 200

    with caplog.at_level("WARNING"):
        metrics = run(scenario)
    assert value(metrics, "trafficsplit_extproc_http_rejected_total", reason="bad_request") == 1
    assert any("nested" in r.getMessage() for r in caplog.records), caplog.records
