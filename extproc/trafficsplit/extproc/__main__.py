"""Entry point: `python -m trafficsplit.extproc --token-file /var/run/secrets/trafficsplit/token ...`.

Runs one dataplane processor (ext_proc + ADS for the Envoy beside it, the publish API, health, metrics) until SIGTERM
or SIGINT. `--print-bootstrap` writes the matching Envoy bootstrap instead and exits, so the pair is configured from
one place (a provisioned Gateway pod runs it as an init container, `--bootstrap-out` naming the file Envoy reads).
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

from trafficsplit.core.decide.sessions import DEFAULT_IDLE_SECONDS
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.identity import GatewayIdentity
from trafficsplit.extproc.cookiekeys import CookieKeyFile
from trafficsplit.extproc.httpservice import require_httptools
from trafficsplit.extproc.server import DataplaneProcessor, Settings
from trafficsplit.extproc.tls import ServerTlsFiles
from trafficsplit.wire.bootstrap import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEAP_BYTES,
    DEFAULT_MESSAGE_TIMEOUT_MS,
    Address,
    BootstrapOptions,
    ExtProcTransport,
    GatewayListener,
    bootstrap_json,
)

# The http_service server's address when --listen is TCP (the chart's): beside 9001-9004, loopback only.
DEFAULT_EXT_PROC_HTTP_TCP = "127.0.0.1:9005"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m trafficsplit.extproc", description=__doc__.splitlines()[0])
    p.add_argument("--listen", default="127.0.0.1:9001", help="ext_proc + ADS for Envoy: unix:/path or HOST:PORT")
    p.add_argument(
        "--ext-proc-transport",
        choices=[t.value for t in ExtProcTransport],
        default=ExtProcTransport.GRPC.value,
        help="how Envoy calls ext_proc: grpc (default), or http: Envoy's http_service, one HTTP/1.1 POST per message "
        "(experimental: Envoy marks it work-in-progress; docs/dataplane.md); ADS and publish stay on gRPC",
    )
    p.add_argument(
        "--ext-proc-http-listen",
        help="the http_service server (with --ext-proc-transport http): unix:/path or HOST:PORT; default: the "
        f"socket beside --listen's (NAME-http.sock) for a Unix --listen, else {DEFAULT_EXT_PROC_HTTP_TCP}",
    )
    p.add_argument(
        "--insecure-listen",
        action="store_true",
        help="allow --listen / --ext-proc-http-listen on a non-loopback address (ext_proc and ADS are unauthenticated: "
        "any caller that reaches them decides nothing but is served, and can hold the processor's resources)",
    )
    p.add_argument("--publish", default="0.0.0.0:9002", help="publish API + health (HOST:PORT, 0 = any free port)")
    p.add_argument("--metrics", default="127.0.0.1:9003", help="Prometheus metrics (HOST:PORT)")
    p.add_argument(
        "--envoy-stats",
        help="Envoy's admin HOST:PORT: its fail-open counters are read at scrape time and exported with the "
        "processor's metrics (trafficsplit_envoy_*); default: none",
    )
    p.add_argument("--health", help="plaintext gRPC health only, for the kubelet's probe (HOST:PORT); default: none")
    p.add_argument("--token-file", type=Path, help="file holding the publish bearer token (required to serve)")
    p.add_argument(
        "--cookie-key-file",
        type=Path,
        help="HMAC keys of sticky.mode persistent cookies, shared by every replica: the current key on the first line, "
        "the previous one (accepted during a rotation's grace period) on the second; re-read every few seconds "
        "while serving (a mounted Secret updated in place); without it, such splits are refused",
    )
    p.add_argument(
        "--session-idle-seconds",
        type=float,
        default=DEFAULT_IDLE_SECONDS,
        help="a persistent split's session counts as live on a backend while served there this recently (Drained)",
    )
    t = p.add_argument_group("publish TLS", "the publish API over TLS; with --tls-client-ca, mutual TLS")
    t.add_argument("--tls-cert", type=Path, help="PEM certificate (chain) of the publish server")
    t.add_argument("--tls-key", type=Path, help="PEM private key of --tls-cert")
    t.add_argument("--tls-client-ca", type=Path, help="PEM CA bundle; callers must present a certificate it signed")
    t.add_argument(
        "--insecure-publish",
        action="store_true",
        help="allow a plaintext publish API on a non-loopback address (the token crosses the network in clear)",
    )
    p.add_argument("--replica", default=os.environ.get("POD_NAME") or socket.gethostname())
    p.add_argument(
        "--gateway",
        help="namespace/name of the Gateway this data plane serves: a generation for any other is refused "
        "(the operator passes it to the data planes it provisions; the chart's gateway has none)",
    )
    p.add_argument(
        "--gateway-uid",
        default="",
        help="with --gateway: that Gateway's metadata.uid; a generation stamped with another uid is refused (the same "
        "name deleted and created again is another Gateway). Without it, the name alone is compared",
    )
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
    b.add_argument(
        "--bootstrap-out",
        type=Path,
        help="write the bootstrap to this file (readable by all: Envoy runs as another user) instead of stdout",
    )
    b.add_argument("--envoy-listen", default="0.0.0.0:8080", help="the gateway's HTTP listener")
    b.add_argument(
        "--listener",
        dest="listeners",
        action="append",
        type=GatewayListener.parse,
        default=[],
        metavar="PORT=HOST:PORT[:https[:NAME,...][:mtls=require|optional]]",
        help="a Gateway data plane: one Envoy listener per Gateway listener port PORT, bound at HOST:PORT (repeat per "
        "port; replaces --envoy-listen). Each names its PORT to the processor, which serves that port's route table. "
        ":https terminates TLS, one SNI filter chain per HTTPS listener hostname NAME (* or none: any), its "
        "certificate over SDS; :mtls validates client certificates against the port's CA bundle over SDS (require: "
        "none or an unsigned one is refused; optional: asked for, any or none served)",
    )
    b.add_argument("--envoy-admin", default="127.0.0.1:9901")
    b.add_argument("--message-timeout-ms", type=int, default=DEFAULT_MESSAGE_TIMEOUT_MS)
    b.add_argument("--xff-num-trusted-hops", type=int, default=0, help="trusted proxies in front of the gateway")
    b.add_argument("--max-heap-bytes", type=int, default=DEFAULT_MAX_HEAP_BYTES, help="overload manager heap ceiling")
    b.add_argument("--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS, help="downstream connection limit")
    b.add_argument(
        "--no-backend-cluster-stats",
        dest="backend_cluster_stats",
        action="store_false",
        help="no Envoy stats for the splits' backend clusters (many splits: less Envoy CPU and memory per publish)",
    )
    return p.parse_args(argv)


def ext_proc_http_listen(args: argparse.Namespace) -> str | None:
    """Where the http_service server listens (None with the gRPC transport): given, or beside the gRPC socket."""
    if args.ext_proc_transport != ExtProcTransport.HTTP.value:
        return None
    if args.ext_proc_http_listen:
        return str(args.ext_proc_http_listen)
    grpc_listen = Address.parse(args.listen)
    if grpc_listen.path is None:
        return DEFAULT_EXT_PROC_HTTP_TCP
    sock = Path(grpc_listen.path)
    suffix = sock.suffix or ".sock"
    return f"unix:{sock.with_name(f'{sock.stem}-http{suffix}')}"


def local_listens(args: argparse.Namespace) -> None:
    """ext_proc and ADS serve whoever connects (they are for the Envoy in this pod): loopback or a Unix socket only,
    unless --insecure-listen says otherwise, as --insecure-publish does for the publish API."""
    if args.insecure_listen:
        return
    for flag, listen in (("--listen", args.listen), ("--ext-proc-http-listen", ext_proc_http_listen(args))):
        if listen is not None and not Address.parse(listen).loopback:
            raise SystemExit(
                f"{flag} {listen} is not loopback: ext_proc and ADS are unauthenticated; give a loopback address or "
                "a unix: socket, or --insecure-listen"
            )


def publish_tls(args: argparse.Namespace) -> ServerTlsFiles | None:
    """The publish API's TLS files, or None for plaintext; a plaintext API beyond loopback only when asked for."""
    if (args.tls_cert is None) != (args.tls_key is None):
        raise SystemExit("--tls-cert and --tls-key go together")
    if args.tls_cert is None:
        if args.tls_client_ca is not None:
            raise SystemExit("--tls-client-ca needs --tls-cert and --tls-key")
        if not Address.parse(args.publish).loopback and not args.insecure_publish:
            raise SystemExit(
                f"--publish {args.publish} is not loopback: give --tls-cert/--tls-key (and --tls-client-ca), or "
                "--insecure-publish to send the token in clear"
            )
        return None
    return ServerTlsFiles(args.tls_cert, args.tls_key, args.tls_client_ca)


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
    transport = ExtProcTransport(args.ext_proc_transport)
    http_listen = ext_proc_http_listen(args)
    if args.print_bootstrap:
        local = Address.parse(args.listen)
        text = bootstrap_json(
            BootstrapOptions(
                node_id=args.replica,
                listen=Address.parse(args.envoy_listen),
                extproc=local if http_listen is None else Address.parse(http_listen),
                ads=local,
                admin=Address.parse(args.envoy_admin),
                message_timeout_ms=args.message_timeout_ms,
                xff_num_trusted_hops=args.xff_num_trusted_hops,
                max_heap_bytes=args.max_heap_bytes,
                max_connections=args.max_connections,
                extproc_transport=transport,
                backend_cluster_stats=args.backend_cluster_stats,
                listeners=tuple(args.listeners),
            )
        )
        if args.bootstrap_out is None:
            sys.stdout.write(text)
        else:
            args.bootstrap_out.write_text(text, encoding="utf-8")
            args.bootstrap_out.chmod(0o644)
        return 0
    if transport is ExtProcTransport.HTTP:
        require_httptools()
    local_listens(args)
    tls = publish_tls(args)
    if args.token_file is None:
        print("--token-file is required: the publish API refuses unauthenticated callers", file=sys.stderr)
        return 2
    gateway = None
    if args.gateway is not None:
        try:
            gateway = GatewayIdentity(args.gateway, args.gateway_uid)
        except SpecError as exc:
            print(f"--gateway/--gateway-uid: {exc}", file=sys.stderr)
            return 2
    elif args.gateway_uid:
        print("--gateway-uid goes with --gateway", file=sys.stderr)
        return 2
    token = args.token_file.read_bytes().strip()
    if not token:
        print(f"{args.token_file} is empty", file=sys.stderr)
        return 2
    keys = None
    if args.cookie_key_file is not None:
        try:
            keys = CookieKeyFile(args.cookie_key_file)
        except (SpecError, OSError) as exc:
            print(f"{args.cookie_key_file}: {exc}", file=sys.stderr)
            return 2
    settings = Settings(
        listen=args.listen,
        publish=args.publish,
        metrics=args.metrics,
        token=token,
        replica=args.replica,
        gateway=gateway,
        ack_timeout=args.ack_timeout,
        cluster_drain=args.cluster_drain_seconds,
        drain_seconds=args.drain_seconds,
        ports_file=args.ports_file,
        tls=tls,
        health=args.health,
        signer=keys.signer if keys is not None else None,
        cookie_keys=keys,
        session_idle_seconds=args.session_idle_seconds,
        ext_proc_transport=transport,
        ext_proc_http_listen=http_listen,
        envoy_stats=args.envoy_stats,
    )
    runner = _runner()
    with contextlib.suppress(KeyboardInterrupt):
        runner(_serve(settings))
    return 0


def _runner() -> Callable[[Coroutine[Any, Any, None]], None]:
    """uvloop's runner when installed (lower per-stream cost: docs/dataplane.md), else asyncio's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return asyncio.run
    return uvloop.run


if __name__ == "__main__":
    sys.exit(main())
