"""The demo's sample backends: tiny HTTP servers on loopback that answer with their own name.

Why in the product and not in tests/support: `trafficsplit demo` starts them, and the product never imports tests.
One process serves every endpoint (a thread each) so the demo costs one Python interpreter, not three:
`python -m trafficsplit.demo.backends blue=127.0.0.1:18081 green=127.0.0.1:18082`. Each answers any request with
200, body `<name>\\n` and header `x-backend: <name>`, so a curl shows which side of the split served it.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType

from trafficsplit.core.model.weights import parse_int


@dataclass(frozen=True, slots=True)
class Serve:
    name: str
    host: str
    port: int

    def arg(self) -> str:
        return f"{self.name}={self.host}:{self.port}"


def parse_serve(text: str) -> Serve:
    """`NAME=HOST:PORT` → Serve; ValueError with the offending text otherwise."""
    name, eq, addr = text.partition("=")
    host, colon, port_text = addr.rpartition(":")
    port = parse_int(port_text)
    if not eq or not name or not colon or not host or port is None or not 0 < port < 65536:
        raise ValueError(f"{text!r} is not NAME=HOST:PORT")
    return Serve(name, host.strip("[]"), port)


def response_for(name: str) -> tuple[bytes, list[tuple[str, str]]]:
    body = f"{name}\n".encode()
    return body, [
        ("x-backend", name),
        ("Content-Type", "text/plain; charset=utf-8"),
        ("Content-Length", str(len(body))),
    ]


def handler_for(name: str) -> type[BaseHTTPRequestHandler]:
    body, headers = response_for(name)

    class NameHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: Envoy reuses upstream connections
        server_version = "trafficsplit-demo-backend"
        # A reused connection's response in several small sends waits on Nagle + the peer's delayed ACK (~40 ms):
        # TCP_NODELAY, and a buffered writer (flushed once per request by http.server) so a response is one send.
        disable_nagle_algorithm = True
        wbufsize = -1

        def _answer(self, with_body: bool) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)  # drain a request body so the connection stays usable
            self.send_response(200)
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer(True)

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_GET

        def do_HEAD(self) -> None:
            self._answer(False)

        def log_message(self, format: str, *args: object) -> None:  # quiet: the demo's logs are for failures
            pass

    return NameHandler


def serve(items: Sequence[Serve]) -> int:
    """Bind every endpoint first (a busy port fails before anything serves), then serve until SIGTERM/SIGINT."""
    servers = []
    try:
        for s in items:
            servers.append(ThreadingHTTPServer((s.host, s.port), handler_for(s.name)))
    except OSError as exc:
        for srv in servers:
            srv.server_close()
        print(f"backends: cannot listen: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    threads = [
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True) for srv in servers
    ]
    for t in threads:
        t.start()
    print("backends: serving " + ", ".join(s.arg() for s in items), flush=True)
    stop.wait()
    for srv in servers:
        srv.shutdown()
        srv.server_close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m trafficsplit.demo.backends NAME=HOST:PORT ...", file=sys.stderr)
        return 2
    try:
        items = [parse_serve(a) for a in args]
    except ValueError as exc:
        print(f"backends: {exc}", file=sys.stderr)
        return 2
    return serve(items)


if __name__ == "__main__":
    sys.exit(main())
