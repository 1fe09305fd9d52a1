"""A tiny HTTP backend for the end-to-end tier: answers every request with its text and names the pod it runs in.

It takes the arguments of the ``hashicorp/http-echo`` image that examples/kubernetes/backends.yaml uses
(``-listen=:8080 -text=blue``), so the example manifests run with only their image changed. ``-status=500`` makes it
answer every request but ``/healthz`` with that status (a failing canary that stays Ready: test_11_flagger.py).
Python's standard library only: it runs on the same Debian base as the project's images, built here without any
registry.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="echo", prefix_chars="-")
    p.add_argument("-listen", default=":5678")
    p.add_argument("-text", required=True)
    p.add_argument("-status", type=int, default=200, choices=range(200, 600), metavar="200..599")
    args = p.parse_args(argv)
    status = args.status
    host, _, port = args.listen.rpartition(":")
    body = (args.text + "\n").encode()
    # The pod's name (its hostname): lets a test see which pod of a backend served a request.
    pod = os.environ.get("HOSTNAME") or os.uname().nodename

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/healthz" else status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Echo-Pod", pod)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *a: object) -> None:
            pass  # one line per request would dominate the pod's log under load

    server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
