"""One dataplane processor process: wires the servicers to their servers and owns their lifecycle.

Two gRPC servers, because they face different callers: the local one (ext_proc + ADS + health) is for the Envoy next
to us, on a Unix socket or loopback; the publish one (Publisher + health) is for the operator, on the pod network,
and requires the token, over TLS (mTLS with a client CA) when certificates are given. A third, optional, serves only
gRPC health in plaintext, for the kubelet's probe, which cannot speak TLS. Every health endpoint is unauthenticated:
each server caps its concurrent Health.Watch streams (`health.BoundedHealth`), and the plaintext one the streams of
a connection. Metrics have their own HTTP port. Health
is NOT_SERVING until a generation is held, and again from SIGTERM on, while in-flight calls drain.

With `ext_proc_transport` http (experimental), ext_proc leaves the local gRPC server for an HTTP/1.1 server of its
own (`httpservice`), on its own socket; ADS, the publish API and health stay on gRPC. The ext_proc health service
then stands for that server: it is listening before SERVING is reported and drains after NOT_SERVING.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from envoy.service.discovery.v3 import ads_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio  # type: ignore[attr-defined,unused-ignore]
from prometheus_client import start_http_server

from trafficsplit.core.decide.sessions import DEFAULT_IDLE_SECONDS, LiveSessions
from trafficsplit.core.model.identity import GatewayIdentity
from trafficsplit.core.model.persistent import CookieSigner
from trafficsplit.extproc.ads import AdsServer
from trafficsplit.extproc.cookiekeys import CookieKeyFile
from trafficsplit.extproc.envoystats import EnvoyStatsCollector
from trafficsplit.extproc.health import MAX_HEALTH_WATCHES, BoundedHealth
from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.httpservice import HttpExtProcServer
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.extproc.processor import Processor, add_to_server
from trafficsplit.extproc.publisher import Publisher
from trafficsplit.extproc.tls import ReloadingServerCredentials, ServerTlsFiles
from trafficsplit.v1alpha1 import publish_pb2_grpc as pb_grpc
from trafficsplit.wire.bootstrap import Address, ExtProcTransport

log = logging.getLogger(__name__)
HEALTH_PORT_STREAMS = 2 * MAX_HEALTH_WATCHES  # per connection, on the plaintext health port
_SERVICES = ("", "trafficsplit.v1alpha1.Publisher", "envoy.service.ext_proc.v3.ExternalProcessor")


@dataclass(frozen=True, kw_only=True)
class Settings:
    listen: str  # ext_proc + ADS: unix:/path or HOST:PORT
    publish: str  # HOST:PORT
    metrics: str  # HOST:PORT
    token: bytes
    replica: str
    gateway: GatewayIdentity | None = None  # a Gateway's replica takes that Gateway's generations only
    ack_timeout: float = 5.0
    cluster_drain: float = 5.0  # seconds a replaced generation's clusters stay in Envoy after the swap
    drain_seconds: float = 5.0
    ports_file: Path | None = None
    tls: ServerTlsFiles | None = None  # None: the publish port is plaintext (loopback or an explicit opt-in)
    health: str | None = None  # HOST:PORT of the plaintext health-only server; None: none
    signer: CookieSigner | None = None  # the cookie keys of sticky.mode persistent; None: such splits are refused
    cookie_keys: CookieKeyFile | None = None  # where `signer` came from: re-read while serving (cookiekeys.py)
    session_idle_seconds: float = DEFAULT_IDLE_SECONDS  # a persistent session is live while served this recently
    ext_proc_transport: ExtProcTransport = ExtProcTransport.GRPC
    ext_proc_http_listen: str | None = None  # unix:/path or HOST:PORT of the http_service server (transport http)
    envoy_stats: str | None = None  # HOST:PORT of Envoy's admin: its fail-open counters join our metrics (envoystats)

    def __post_init__(self) -> None:
        if self.ext_proc_transport is ExtProcTransport.HTTP and self.ext_proc_http_listen is None:
            raise ValueError("the http ext_proc transport needs ext_proc_http_listen")


class DataplaneProcessor:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.metrics = Metrics()
        if settings.envoy_stats is not None:
            self.metrics.registry.register(EnvoyStatsCollector(Address.parse(settings.envoy_stats)))
        self.held = HeldGeneration()
        self.ads = AdsServer(self.metrics)
        self.health = health_aio.HealthServicer()
        self.sessions = LiveSessions(settings.session_idle_seconds)
        self.processor = Processor(self.held, self.metrics, signer=settings.signer, sessions=self.sessions)
        self.publisher = Publisher(
            self.held,
            self.ads,
            self.metrics,
            token=settings.token,
            can_seal=settings.signer is not None,
            sessions=self.sessions,
            replica=settings.replica,
            ack_timeout=settings.ack_timeout,
            cluster_drain=settings.cluster_drain,
            on_first_generation=self._serving,
            gateway=settings.gateway,
        )
        self._local = grpc.aio.server(options=[("grpc.max_concurrent_streams", 10_000)])
        self._public = grpc.aio.server()
        self._health: grpc.aio.Server | None = None
        if settings.health is not None:
            # Streams past this on one connection are refused by HTTP/2 itself (or queued by the client), before the
            # processor allocates anything for them; above the Watch cap, so capped Watches never block a Check.
            streams = [("grpc.max_concurrent_streams", HEALTH_PORT_STREAMS)]
            self._health = grpc.aio.server(options=streams)
        self._http: HttpExtProcServer | None = None
        if settings.ext_proc_transport is ExtProcTransport.HTTP:
            self._http = HttpExtProcServer(self.processor, self.metrics)
        self.metrics.extproc_transport.labels(settings.ext_proc_transport.value).set(1)
        self._tls = ReloadingServerCredentials(settings.tls) if settings.tls is not None else None
        self._metrics_server: Any = None
        self._keys_watch: asyncio.Task[None] | None = None
        self.ports: dict[str, int | str] = {}

    async def _serving(self) -> None:
        await self._set_health(health_pb2.HealthCheckResponse.SERVING)

    async def _set_health(self, status: int) -> None:
        for name in _SERVICES:
            await self.health.set(name, status)

    async def start(self) -> None:
        s = self.settings
        loop = asyncio.get_running_loop()
        # Read from the metrics thread: all_tasks copes with the set changing meanwhile (it retries).
        self.metrics.asyncio_tasks.set_function(lambda: len(asyncio.all_tasks(loop)))
        await self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        if s.cookie_keys is not None:
            self._keys_watch = asyncio.create_task(s.cookie_keys.watch(self.processor.set_signer), name="cookie-keys")
        if self._http is None:
            add_to_server(self.processor, self._local)
        ads_pb2_grpc.add_AggregatedDiscoveryServiceServicer_to_server(self.ads, self._local)
        health_pb2_grpc.add_HealthServicer_to_server(BoundedHealth(self.health, self.metrics, "local"), self._local)
        pb_grpc.add_PublisherServicer_to_server(self.publisher, self._public)
        health_pb2_grpc.add_HealthServicer_to_server(BoundedHealth(self.health, self.metrics, "publish"), self._public)
        local_port = self._local.add_insecure_port(s.listen)
        if self._tls is not None:
            public_port = self._public.add_secure_port(s.publish, self._tls.credentials)
        else:
            public_port = self._public.add_insecure_port(s.publish)
        await self._local.start()
        await self._public.start()
        if self._http is not None and s.ext_proc_http_listen is not None:
            self.ports["ext_proc_http"] = await self._http.start(s.ext_proc_http_listen)
        if self._health is not None and s.health is not None:
            health_pb2_grpc.add_HealthServicer_to_server(
                BoundedHealth(self.health, self.metrics, "health"), self._health
            )
            self.ports["health"] = self._health.add_insecure_port(Address.parse(s.health).target)
            await self._health.start()
        metrics = Address.parse(s.metrics)
        self._metrics_server, _ = start_http_server(metrics.port, metrics.host, registry=self.metrics.registry)
        self.ports.update(
            {
                "listen": s.listen if s.listen.startswith("unix:") else local_port,
                "publish": public_port,
                "metrics": self._metrics_server.server_port,
                "pid": os.getpid(),
            }
        )
        if s.ports_file is not None:
            tmp = s.ports_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.ports))
            tmp.replace(s.ports_file)  # atomic: a reader never sees half a file
        log.info("processor %s listening: %s", s.replica, self.ports)

    async def stop(self) -> None:
        """SIGTERM: report NOT_SERVING first so probes and load balancers move away, then drain and stop. For good: a
        first generation published during the drain must not report SERVING again."""
        await self.health.enter_graceful_shutdown()
        if self._keys_watch is not None:
            self._keys_watch.cancel()
        await asyncio.sleep(self.settings.drain_seconds)
        servers = [self._public, self._local, *([self._health] if self._health is not None else [])]
        http = [self._http.stop(1.0)] if self._http is not None else []
        await asyncio.gather(*(srv.stop(1.0) for srv in servers), *http)
        await self.publisher.close()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()

    async def wait(self) -> None:
        await self._local.wait_for_termination()
