"""A Gateway's data plane for tests: real Envoy with one listener per Gateway listener port (the bootstrap's
`listeners`), the real processor (`python -m trafficsplit.extproc`, as `tests/support/dataplane.py` starts it), and
HTTPRoutes compiled by the core (`translate` → `gateway_content`) onto the loopback name backends, published through
the real publish API (the route table in `Generation.routes`).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.dataplane import TEST_MESSAGE_TIMEOUT_MS, Envoy, NameBackends, Processor
from trafficsplit.core.control.resolve import ServiceInfo, ServicePort, SliceEndpoint, SliceInfo
from trafficsplit.core.gatewayapi.backend_tls import parse_backend_tls_policy
from trafficsplit.core.gatewayapi.httproute import parse_httproute
from trafficsplit.core.gatewayapi.objects import parse_gateway, parse_gateway_class
from trafficsplit.core.gatewayapi.translate import Inputs, Translation, gateway_content, translate
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.tls import ClientCertificates, parse_ca_configmap, parse_tls_secret
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.bootstrap import Address, BootstrapOptions, GatewayListener, bootstrap_json
from trafficsplit.wire.generation import generation_to_proto

NAMESPACE = "ns"
GATEWAY = "gw"
CLASS = parse_gateway_class(
    {"metadata": {"name": "ts"}, "spec": {"controllerName": "trafficsplit.dev/gateway-controller"}}
)


def services(
    backends: NameBackends, names: Sequence[str], port: int = 80
) -> tuple[dict[Any, ServiceInfo], dict[Any, list[SliceInfo]]]:
    """A Service per name backend (`port`, named http) and an EndpointSlice with that backend's loopback port."""
    svcs: dict[Any, ServiceInfo] = {}
    slices: dict[Any, list[SliceInfo]] = {}
    for n in names:
        host, loopback = backends.endpoint(n)
        svcs[(NAMESPACE, n)] = ServiceInfo(NAMESPACE, n, (ServicePort(name="http", port=port, target_port="http"),))
        slices[(NAMESPACE, n)] = [
            SliceInfo(
                namespace=NAMESPACE,
                name=f"{n}-abcde",
                service=n,
                ports=(("http", loopback),),
                endpoints=(SliceEndpoint(host, True, f"{n}-pod"),),
            )
        ]
    return svcs, slices


@dataclass
class GatewayPlane:
    workdir: Path
    backends: NameBackends
    processor: Processor
    envoy: Envoy
    ports: dict[int, int]  # Gateway listener port → Envoy's bound loopback port
    number: int = 0
    translation: Translation | None = field(default=None)
    service_port: int = 80  # the port of every backend's Service (the backendRefs name it)
    uid: str = ""  # the Gateway's metadata.uid, stamped on its generations (a replica told `--gateway-uid` compares it)

    def compile(
        self,
        listeners: Sequence[Mapping[str, Any]],
        routes: Sequence[Mapping[str, Any]],
        number: int | None = None,
        secrets: Sequence[Mapping[str, Any]] = (),
        frontend: Mapping[str, Any] | None = None,
        configmaps: Sequence[Mapping[str, Any]] = (),
        backend_tls: Sequence[Mapping[str, Any]] = (),
        *,
        backend: Mapping[str, Any] | None = None,
    ) -> Generation:
        """Gateway `ns/gw` with these listeners and HTTPRoutes, translated by the core: its data plane's generation.
        `frontend`: the Gateway's `spec.tls.frontend` (client certificate validation), `configmaps` the CA bundles
        it names; `backend_tls`: BackendTLSPolicy bodies (their CA ConfigMaps in `configmaps` too); `backend`: the
        Gateway's `spec.tls.backend` (its `clientCertificateRef` Secret in `secrets`)."""
        gw: dict[str, Any] = {
            "metadata": {"name": GATEWAY, "namespace": NAMESPACE, "uid": self.uid},
            "spec": {"gatewayClassName": "ts", "listeners": list(listeners)},
        }
        tls: dict[str, Any] = {}
        if frontend is not None:
            tls["frontend"] = dict(frontend)
        if backend is not None:
            tls["backend"] = dict(backend)
        if tls:
            gw["spec"]["tls"] = tls
        svcs, slices = services(self.backends, list(self.backends.ports), self.service_port)
        self.translation = translate(
            Inputs(
                classes=(CLASS,),
                gateways=(parse_gateway(gw),),
                routes=tuple(parse_httproute(dict(r)) for r in routes),
                services=svcs,
                slices=slices,
                secrets={t.key: t for t in map(parse_tls_secret, secrets)},
                configmaps={(c.namespace, c.name): c for c in map(parse_ca_configmap, configmaps)},
                backend_tls=tuple(map(parse_backend_tls_policy, backend_tls)),
            )
        )
        return gateway_content(self.translation, f"{NAMESPACE}/{GATEWAY}", self.uid).stamp(number or self.number + 1)

    def publish(
        self,
        listeners: Sequence[Mapping[str, Any]],
        routes: Sequence[Mapping[str, Any]],
        secrets: Sequence[Mapping[str, Any]] = (),
        frontend: Mapping[str, Any] | None = None,
        configmaps: Sequence[Mapping[str, Any]] = (),
        backend_tls: Sequence[Mapping[str, Any]] = (),
        *,
        backend: Mapping[str, Any] | None = None,
    ) -> Generation:
        """Compile and publish through the publish API; asserts ACCEPTED; returns the core generation served.
        `secrets`: kubernetes.io/tls Secret bodies the HTTPS listeners (and `backend`'s clientCertificateRef) name;
        `frontend`, `configmaps`, `backend_tls`, `backend`: as `compile`."""
        gen = self.compile(
            listeners,
            routes,
            secrets=secrets,
            frontend=frontend,
            configmaps=configmaps,
            backend_tls=backend_tls,
            backend=backend,
        )
        reply = self.processor.publish_until_taken(generation_to_proto(gen, origin="test"))
        assert reply.result == pb.PublishReply.ACCEPTED, (reply, self.processor.log_tail())
        self.number = gen.number
        return gen

    def stop(self) -> None:
        self.envoy.stop()
        self.processor.terminate()

    @classmethod
    def start(
        cls,
        workdir: Path,
        backends: NameBackends,
        gateway_ports: Sequence[int],
        transport: str = "grpc",
        tls_hosts: Mapping[int, Sequence[str]] | None = None,
        extra: Sequence[str] = (),
        client_certificates: Mapping[int, ClientCertificates] | None = None,
    ) -> GatewayPlane:
        """The processor, then Envoy with one listener per Gateway port (each bound to a free loopback port);
        `transport`: how Envoy calls ext_proc (grpc, or http: the experimental http_service); `tls_hosts`: the
        HTTPS ports and their listeners' hostnames (`*`: none), as the provisioner's `:https` flags give them;
        `extra`: more extproc flags; `client_certificates`: the HTTPS ports that validate clients, and how (`:mtls`)."""
        # The cookie keys a provisioned data plane mounts (its Gateway's Secret): Cookie sessionPersistence seals.
        keys = workdir / "cookie-keys"
        keys.write_text(secrets.token_hex(32) + "\n")
        processor = Processor(
            workdir,
            token=secrets.token_hex(16),
            replica="gw-0",
            transport=transport,
            extra=(f"--cookie-key-file={keys}", *extra),
        ).start()
        local = Address(path=str(processor.socket))
        https = tls_hosts or {}
        mtls = client_certificates or {}
        listeners = tuple(
            GatewayListener(p, Address("127.0.0.1", 0), tuple(https.get(p, ())), mtls.get(p)) for p in gateway_ports
        )
        config = bootstrap_json(
            BootstrapOptions(
                node_id="gw-0",
                listen=Address("127.0.0.1", 0),
                extproc=processor.extproc_address,
                ads=local,
                admin=Address("127.0.0.1", 0),
                message_timeout_ms=TEST_MESSAGE_TIMEOUT_MS,
                access_log=str(workdir / "gateway.access.log"),
                extproc_transport=processor.transport,
                listeners=listeners,
            )
        )
        envoy = Envoy(workdir, config, name="gateway")
        try:
            envoy.start()
        except BaseException:
            processor.kill()
            raise
        return cls(workdir, backends, processor, envoy, {g.port: envoy.listener_port(g.name) for g in listeners})
