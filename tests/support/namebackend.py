"""A tiny HTTP backend that answers with its own name: the stand-in for an application pod in tests.

Traffic-splitting tests need to see *which* backend served a request, nothing more; a stdlib server keeps the test
pods free of dependencies and starts in well under a second inside a network namespace.

    python -m tests.support.namebackend --name blue --port 8080

Every request gets 200 with body = the name and header ``x-backend: <name>``. ``/echo`` answers JSON with the name,
method, path and the request headers it received (names lower-cased, as HTTP/2 carries them), so a test can check
what a proxy added or stripped.
"""

from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def make_handler(name: str) -> type[BaseHTTPRequestHandler]:
    """Build a handler class bound to ``name`` (http.server instantiates the class per request)."""

    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.1 keeps connections alive, the way Envoy talks to upstreams.
        protocol_version = "HTTP/1.1"
        server_version = "namebackend"
        # Envoy reuses upstream connections: a response in several small sends would wait on Nagle + delayed ACK
        # (~40 ms each). TCP_NODELAY, and a buffered writer (flushed once per request) so a response is one send.
        disable_nagle_algorithm = True
        wbufsize = -1

        def _answer(self) -> None:
            # Drain a request body so a keep-alive connection stays in sync.
            length = int(self.headers.get("content-length") or 0)
            if length:
                self.rfile.read(length)
            if self.path.split("?", 1)[0] == "/echo":
                body = json.dumps(
                    {
                        "name": name,
                        "method": self.command,
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                    }
                ).encode()
                ctype = "application/json"
            else:
                body = name.encode()
                ctype = "text/plain; charset=utf-8"
            self.send_response(200)
            self.send_header("x-backend", name)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _answer

        def log_message(self, format: str, *args: object) -> None:
            # Quiet: a load test would otherwise fill the pytest capture with one line per request.
            pass

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--name", required=True)
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--host", default="0.0.0.0")
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(args.name))
    server.daemon_threads = True
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
