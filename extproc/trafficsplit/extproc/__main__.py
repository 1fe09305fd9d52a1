"""Entry point: `python -m trafficsplit.extproc --token-file /var/run/secrets/trafficsplit/token ...`.

Runs one dataplane processor (ext_proc + ADS for the Envoy beside it, the publish API, health, metrics) until SIGTERM
or SIGINT. `--print-bootstrap` writes the matching Envoy bootstrap instead and exits, so the pair is configured from
one place.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from trafficsplit.extproc.server import DataplaneProcessor, Settings

from trafficsplit.wire.bootstrap import DEFAULT_MESSAGE_TIMEOUT_MS, Address, BootstrapOptions, bootstrap_json


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m trafficsplit.extproc", description=__doc__.splitlines()[0])
    p.add_argument("--listen", default="127.0.0.1:9001", help="ext_proc + ADS for Envoy: unix:/path or HOST:PORT")
    p.add_argument("--publish", default="0.0.0.0:9002", help="publish API + health (HOST:PORT, 0 = any free port)")
    p.add_argument("--metrics", default="0.0.0.0:9003", help="Prometheus metrics (HOST:PORT)")
    p.add_argument("--token-file", type=Path, help="file holding the publish bearer token (required to serve)")
    p.add_argument("--replica", default=os.environ.get("POD_NAME") or socket.gethostname())
    p.add_argument("--ack-timeout", type=float, default=5.0, help="seconds to wait for Envoy's ACK on publish")
    p.add_argument(
        "--cluster-drain-seconds",
        type=float,
        default=5.0,
        help="keep a replaced generation's clusters in Envoy this long after the swap (in-flight decisions)",
    )
    p.add_argument("--drain-seconds", type=float, default=5.0, help="NOT_SERVING before stopping, on SIGTERM")
    p.add_argument("--ports-file", type=Path, help="write the bound ports here as JSON once listening")
    p.add_argument("--log-level", default="INFO")
    b = p.add_argument_group("bootstrap", "print the matching Envoy bootstrap and exit")
    b.add_argument("--print-bootstrap", action="store_true")
    b.add_argument("--envoy-listen", default="0.0.0.0:8080", help="the gateway's HTTP listener")
    b.add_argument("--envoy-admin", default="127.0.0.1:9901")
    b.add_argument("--message-timeout-ms", type=int, default=DEFAULT_MESSAGE_TIMEOUT_MS)
    return p.parse_args(argv)


async def _serve(settings: Settings) -> None:
    proc = DataplaneProcessor(settings)
    await proc.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await proc.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.print_bootstrap:
        local = Address.parse(args.listen)
        sys.stdout.write(
            bootstrap_json(
                BootstrapOptions(
                    node_id=args.replica,
                    listen=Address.parse(args.envoy_listen),
                    extproc=local,
                    ads=local,
                    admin=Address.parse(args.envoy_admin),
                    message_timeout_ms=args.message_timeout_ms,
                )
            )
        )
        return 0
    if args.token_file is None:
        print("--token-file is required: the publish API refuses unauthenticated callers", file=sys.stderr)
        return 2
    token = args.token_file.read_bytes().strip()
    if not token:
        print(f"{args.token_file} is empty", file=sys.stderr)
        return 2
    settings = Settings(
        listen=args.listen,
        publish=args.publish,
        metrics=args.metrics,
        token=token,
        replica=args.replica,
        ack_timeout=args.ack_timeout,
        cluster_drain=args.cluster_drain_seconds,
        drain_seconds=args.drain_seconds,
        ports_file=args.ports_file,
    )
    runner = _runner()
    with contextlib.suppress(KeyboardInterrupt):
        runner(_serve(settings))
    return 0


def _runner() -> Callable[[Coroutine[Any, Any, None]], None]:
    """uvloop's runner when installed (lower per-stream cost, ENVOY-NOTES), else asyncio's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return asyncio.run
    return uvloop.run


if __name__ == "__main__":
    sys.exit(main())
