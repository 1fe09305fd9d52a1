"""`trafficsplit demo`: the product on loopback (Envoy, the processor, the operator's file source, sample backends).

Thin: flags → `trafficsplit.demo.run`. Run it from a clone: it serves `./examples` (or `--examples DIR`); the YAML
there names the backends, their loopback ports and the hosts, and editing it while the demo runs moves traffic.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any, TextIO

from trafficsplit.core.model.weights import parse_int
from trafficsplit.demo.options import DemoOptions


def _port(text: str) -> int:
    port = parse_int(text)
    if port is None or not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1-65535)")
    return port


def _positive_int(text: str) -> int:
    value = parse_int(text)
    if value is None or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value > 0):  # a NaN deadline would never pass: the wait would never end
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value


def register(sub: Any) -> None:
    d = DemoOptions()
    p = sub.add_parser(
        "demo",
        help="run the product locally on loopback, serving ./examples",
        description="Starts Envoy, the processor, the operator's file source on the examples directory and the sample "
        "backends it names, prints the URL and curl lines, and stops everything on Ctrl-C. Backend ports come from "
        "the example's `endpoints`; edit the example while it runs to move traffic.",
    )
    p.add_argument("--examples", default=d.examples, metavar="DIR", help="directory of TrafficSplit YAML (./examples)")
    p.add_argument("--port", type=_port, default=d.port, help=f"the gateway's HTTP port (default {d.port})")
    p.add_argument("--address", default=d.address, help=f"the gateway's listen address (default {d.address})")
    p.add_argument(
        "--start-timeout", type=_positive, default=d.start_timeout, metavar="S", help="seconds to wait for a route"
    )
    p.add_argument(
        "--message-timeout-ms",
        type=_positive_int,
        default=d.message_timeout_ms,
        metavar="MS",
        help=f"Envoy's per-message ext_proc timeout (default {d.message_timeout_ms}; production 200: a laptop is "
        "busier than a gateway pod, and a timed-out request fails open without a cookie)",
    )
    p.add_argument("--keep-logs", action="store_true", help="keep the temp dir with the logs after a clean stop")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    opts = DemoOptions(
        examples=args.examples,
        address=args.address,
        port=args.port,
        start_timeout=args.start_timeout,
        message_timeout_ms=args.message_timeout_ms,
        keep_logs=args.keep_logs,
    )
    from trafficsplit.demo.run import run as run_demo  # lazily: it imports the operator's file source

    return run_demo(opts, out, sys.stderr)
