"""The sample backends (the demo's and the tests') answer a keep-alive request without waiting on Nagle.

Why: Envoy reuses its upstream HTTP/1.1 connections. A response written in several small sends on a socket without
TCP_NODELAY holds its second send until the first is ACKed, and the peer delays that ACK (~40 ms on Linux): every
request after a connection's first took ~45 ms in the demo. Checked without a clock: the handler runs on a recording
connection, which shows the socket options it sets and the sends it makes.
"""

from __future__ import annotations

import io
import socket
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.support.namebackend import make_handler
from trafficsplit.demo.backends import handler_for


class RecordingConnection:
    """Just enough of a socket for socketserver.StreamRequestHandler: reads from a buffer, records what is set and
    sent."""

    def __init__(self, request: bytes) -> None:
        self._request = request
        self.options: dict[tuple[int, int], int] = {}
        self.sends: list[bytes] = []

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self.options[(level, option)] = value

    def makefile(self, mode: str, buffering: int = -1, **kwargs: Any) -> io.BufferedIOBase:
        if "r" in mode:
            return io.BytesIO(self._request)
        raw = _RawSends(self.sends)  # a raw write is one send(2)
        return io.BufferedWriter(raw) if buffering != 0 else raw  # type: ignore[return-value]

    def sendall(self, data: bytes) -> None:
        self.sends.append(bytes(data))

    def settimeout(self, value: float | None) -> None:
        pass


class _RawSends(io.RawIOBase):
    def __init__(self, sends: list[bytes]) -> None:
        self._sends = sends

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._sends.append(bytes(data))
        return len(data)


class FakeServer:
    server_name = "test"
    server_port = 0


REQUESTS = [
    b"GET / HTTP/1.1\r\nHost: shop.example\r\n\r\n",
    b"POST /x HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 3\r\n\r\nabc",
    b"HEAD / HTTP/1.1\r\nHost: shop.example\r\n\r\n",
    b"GET /echo HTTP/1.1\r\nHost: shop.example\r\n\r\n",
]


def run(handler: type[BaseHTTPRequestHandler], request: bytes) -> RecordingConnection:
    # Two requests on one connection: the second is the keep-alive case that stalled.
    conn = RecordingConnection(request + request.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1))
    handler(conn, ("127.0.0.1", 40000), FakeServer())  # type: ignore[arg-type]
    return conn


HANDLERS = [pytest.param(handler_for("blue"), id="demo"), pytest.param(make_handler("blue"), id="tests")]


@pytest.mark.parametrize("handler", HANDLERS)
@pytest.mark.parametrize("request_bytes", REQUESTS, ids=["get", "post-body", "head", "echo"])
def test_each_response_is_one_send_on_a_nodelay_socket(
    handler: type[BaseHTTPRequestHandler], request_bytes: bytes
) -> None:
    conn = run(handler, request_bytes)
    assert conn.options.get((socket.IPPROTO_TCP, socket.TCP_NODELAY)) == 1
    assert len(conn.sends) == 2, conn.sends  # one send per response, two responses
    for sent in conn.sends:
        head, _, body = sent.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ")
        assert b"x-backend: blue" in head.lower()
        length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")).split(b":")[1])
        assert len(body) == (0 if request_bytes.startswith(b"HEAD") else length)
