"""A Gateway's data plane for tests: real Envoy with one listener per Gateway listener port (the bootstrap's
`listeners`), the extproc's `DataplaneProcessor` in a thread of the test process, and HTTPRoutes compiled by the core
(`translate` → `gateway_content`) onto the loopback name backends.

The processor runs in-process and takes each generation through `Publisher.adopt` (every step of a publish after the
message is parsed: refusals, make before break, Envoy's ACKs), because a test holds the core `Generation` it wants
served. Envoy, its bootstrap, ADS and ext_proc are the real ones, over the real Unix socket.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tests.support.dataplane import TEST_MESSAGE_TIMEOUT_MS, Envoy, NameBackends
from trafficsplit.core.compiled import Generation
from trafficsplit.core.gateway_objects import parse_gateway, parse_gateway_class, parse_httproute
from trafficsplit.core.gateway_translate import Inputs, Translation, gateway_content, translate
from trafficsplit.core.resolve import ServiceInfo, ServicePort, SliceEndpoint, SliceInfo
from trafficsplit.extproc.server import DataplaneProcessor, Settings
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.bootstrap import Address, BootstrapOptions, ExtProcTransport, GatewayListener, bootstrap_json

T = TypeVar("T")
NAMESPACE = "ns"
GATEWAY = "gw"
CLASS = parse_gateway_class(
    {"metadata": {"name": "ts"}, "spec": {"controllerName": "trafficsplit.dev/gateway-controller"}}
)


class InProcessProcessor:
    """`DataplaneProcessor` on its own event loop in a daemon thread; `call` runs a coroutine there."""

    def __init__(self, workdir: Path, transport: ExtProcTransport = ExtProcTransport.GRPC) -> None:
        self.socket = workdir / "extproc.sock"
        self.http_socket = workdir / "extproc-http.sock"
        self.transport = transport
        self.settings = Settings(
            listen=f"unix:{self.socket}",
            publish="127.0.0.1:0",
            metrics="127.0.0.1:0",
            token=b"test-token",
            replica="gw-0",
            drain_seconds=0,
            cluster_drain=1.0,
            ext_proc_transport=transport,
            ext_proc_http_listen=f"unix:{self.http_socket}" if transport is ExtProcTransport.HTTP else None,
        )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="in-process-extproc", daemon=True)
        self.dp: DataplaneProcessor | None = None

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> InProcessProcessor:
        self.thread.start()

        async def start() -> DataplaneProcessor:
            dp = DataplaneProcessor(self.settings)  # grpc.aio servers bind to the loop they are made on
            await dp.start()
            return dp

        self.dp = self.call(start())
        return self

    @property
    def extproc_address(self) -> Address:
        return Address(path=str(self.http_socket if self.transport is ExtProcTransport.HTTP else self.socket))

    def adopt(self, gen: Generation) -> pb.PublishReply:
        assert self.dp is not None
        return self.call(self.dp.publisher.adopt(gen, "test"))

    def stop(self) -> None:
        """Stop serving (ext_proc and ADS go away, as when the container dies); a second call does nothing."""
        if self.dp is None:
            return
        dp, self.dp = self.dp, None
        self.call(dp.stop())

        async def cancel_the_rest() -> None:  # Envoy's ADS streams, still open: ended, not destroyed pending
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in rest:
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        self.call(cancel_the_rest())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def services(backends: NameBackends, names: Sequence[str]) -> tuple[dict[Any, ServiceInfo], dict[Any, list[SliceInfo]]]:
    """A Service per name backend (port 80 named http) and an EndpointSlice with that backend's loopback port."""
    svcs: dict[Any, ServiceInfo] = {}
    slices: dict[Any, list[SliceInfo]] = {}
    for n in names:
        host, port = backends.endpoint(n)
        svcs[(NAMESPACE, n)] = ServiceInfo(NAMESPACE, n, (ServicePort("http", 80, "http"),))
        slices[(NAMESPACE, n)] = [
            SliceInfo(
                namespace=NAMESPACE,
                name=f"{n}-abcde",
                service=n,
                ports=(("http", port),),
                endpoints=(SliceEndpoint(host, True, False, f"{n}-pod"),),
            )
        ]
    return svcs, slices


@dataclass
class GatewayPlane:
    workdir: Path
    backends: NameBackends
    processor: InProcessProcessor
    envoy: Envoy
    ports: dict[int, int]  # Gateway listener port → Envoy's bound loopback port
    number: int = 0
    translation: Translation | None = field(default=None)

    def compile(
        self, listeners: Sequence[Mapping[str, Any]], routes: Sequence[Mapping[str, Any]], number: int | None = None
    ) -> Generation:
        """Gateway `ns/gw` with these listeners and HTTPRoutes, translated by the core: its data plane's generation."""
        gw = {
            "metadata": {"name": GATEWAY, "namespace": NAMESPACE},
            "spec": {"gatewayClassName": "ts", "listeners": list(listeners)},
        }
        svcs, slices = services(self.backends, list(self.backends.ports))
        self.translation = translate(
            Inputs(
                classes=(CLASS,),
                gateways=(parse_gateway(gw),),
                routes=tuple(parse_httproute(dict(r)) for r in routes),
                services=svcs,
                slices=slices,
            )
        )
        return gateway_content(self.translation, f"{NAMESPACE}/{GATEWAY}").stamp(number or self.number + 1)

    def publish(self, listeners: Sequence[Mapping[str, Any]], routes: Sequence[Mapping[str, Any]]) -> Generation:
        gen = self.compile(listeners, routes)
        reply = self.processor.adopt(gen)
        assert reply.result == pb.PublishReply.ACCEPTED, reply
        self.number = gen.number
        return gen

    def stop(self) -> None:
        self.envoy.stop()
        self.processor.stop()

    @classmethod
    def start(
        cls,
        workdir: Path,
        backends: NameBackends,
        gateway_ports: Sequence[int],
        transport: ExtProcTransport = ExtProcTransport.GRPC,
    ) -> GatewayPlane:
        processor = InProcessProcessor(workdir, transport).start()
        local = Address(path=str(processor.socket))
        listeners = tuple(GatewayListener(p, Address("127.0.0.1", 0)) for p in gateway_ports)
        config = bootstrap_json(
            BootstrapOptions(
                node_id="gw-0",
                listen=Address("127.0.0.1", 0),
                extproc=processor.extproc_address,
                ads=local,
                admin=Address("127.0.0.1", 0),
                message_timeout_ms=TEST_MESSAGE_TIMEOUT_MS,
                access_log=str(workdir / "gateway.access.log"),
                extproc_transport=transport,
                listeners=listeners,
            )
        )
        envoy = Envoy(workdir, config, name="gateway")
        try:
            envoy.start()
        except BaseException:
            processor.stop()
            raise
        return cls(workdir, backends, processor, envoy, {g.port: envoy.listener_port(g.name) for g in listeners})
