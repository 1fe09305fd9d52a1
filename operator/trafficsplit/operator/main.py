"""Process wiring: flags → engine + fleet + (kopf watches and leader election | file source). No logic here."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import start_http_server

from trafficsplit.core.gatewayapi.parameters import Placement
from trafficsplit.operator.certificates import ObjectGetter
from trafficsplit.operator.config import Config, parse_config
from trafficsplit.operator.engine import Engine, EngineSettings, StatusSink
from trafficsplit.operator.fleet import Fleet
from trafficsplit.operator.gateways import (
    GATEWAY_KINDS,
    GatewayEventSink,
    GatewayPlane,
    GatewaySettings,
    GatewayStatusSink,
    Provisioner,
)
from trafficsplit.operator.metrics import OperatorMetrics

if TYPE_CHECKING:
    from trafficsplit.operator.kubeapi import KubeApi

log = logging.getLogger("trafficsplit.operator")
# How often an operator started without the Gateway API CRDs looks for them again (one discovery request).
GATEWAY_API_RECHECK_S = 10.0


def _engine(
    cfg: Config,
    origin: str,
    *,
    static: bool = False,
    status_sink: StatusSink | None = None,
    gateway_sink: GatewayStatusSink | None = None,
    gateway_events: GatewayEventSink | None = None,
    provisioner: Provisioner | None = None,
    dataplane_namespace: str = "default",
    secret_getter: ObjectGetter | None = None,
    configmap_getter: ObjectGetter | None = None,
    placement: Placement = Placement.CONTROLLER_NAMESPACE,
    default_replicas: int = 2,
) -> Engine:
    """`gateway_sink` given: Gateway API is on (one fleet per Gateway, numbered from the engine's counter)."""
    engine: Engine | None = None

    def changed() -> None:
        if engine is not None:
            engine.poke()

    metrics = OperatorMetrics(cfg.gateway_label)
    fleet = Fleet(cfg.token_file, cfg.publish_timeout, cfg.poll_interval, changed, tls=cfg.tls, metrics=metrics.chart)

    def make_fleet(label: str) -> Fleet:
        # A Gateway's fleet: the same series as the chart gateway's, under the Gateway's own `gateway` label.
        m = metrics.for_fleet(label)
        return Fleet(cfg.token_file, cfg.publish_timeout, cfg.poll_interval, changed, tls=cfg.tls, metrics=m)

    gateways = (
        GatewayPlane(
            GatewaySettings(
                origin=origin, namespace=dataplane_namespace, placement=placement, default_replicas=default_replicas
            ),
            make_fleet,
            changed,
            status_sink=gateway_sink,
            event_sink=gateway_events,
            provisioner=provisioner,
            secret_getter=secret_getter,
            configmap_getter=configmap_getter,
        )
        if gateway_sink is not None
        else None
    )
    settings = EngineSettings(
        origin=origin,
        debounce=cfg.debounce,
        static_replicas=cfg.static_dataplanes,
        gateway=cfg.discovered_gateway,
        publish_port_name=cfg.publish_port_name,
        static=static,
        no_gateway=cfg.no_gateway,
        freeze_heap=True,
    )
    engine = Engine(fleet, settings, status_sink, gateways)
    return engine


@contextlib.contextmanager
def _metrics_server(cfg: Config, metrics: OperatorMetrics) -> Iterator[None]:
    """The Prometheus endpoint on its own thread (prometheus-client's server), for the process's lifetime."""
    if cfg.metrics is None:
        yield
        return
    host, port = cfg.metrics
    server, thread = start_http_server(port, host, registry=metrics.registry)
    log.info("metrics on http://%s:%d/metrics", host, server.server_port)
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def _cancel(*tasks: asyncio.Task[None]) -> None:
    for t in tasks:
        t.cancel()
    for t in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t


async def run_file_source(cfg: Config) -> None:
    from trafficsplit.operator.filesource import log_status

    assert cfg.file_source is not None
    directory = Path(cfg.file_source).resolve()
    engine = _engine(cfg, f"file:{directory}", static=True, status_sink=log_status)
    with _metrics_server(cfg, engine.metrics):
        await _run_file_source(cfg, engine, directory)


async def _run_file_source(cfg: Config, engine: Engine, directory: Path) -> None:
    from trafficsplit.operator.filesource import FileSource

    source = FileSource(directory, interval=cfg.poll_interval, empty_grace=cfg.empty_grace)
    await source.settled(timeout=10 * source.settle)
    engine.replace_splits(source.splits())

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await engine.become_leader()
    engine.mark_ready()
    tasks = [asyncio.create_task(engine.run()), asyncio.create_task(source.watch(engine.replace_splits))]
    log.info("local mode: %s → %s", directory, ", ".join(r.address for r in cfg.static_dataplanes))
    await stop.wait()
    await _cancel(*tasks)
    await engine.fleet.close()


async def run_kubernetes(cfg: Config) -> bool:
    """Run until stopped. True: start over (the Gateway API CRDs appeared after the start; main re-executes)."""
    from trafficsplit.operator.kubeapi import KubeApi, make_api_client

    if cfg.kubeconfig:
        os.environ["KUBECONFIG"] = cfg.kubeconfig  # kopf's login reads it
    api = make_api_client(cfg.kubeconfig)
    kube = KubeApi(api, cfg.identity)
    gateway_api = cfg.gateway_api
    await_crds = False
    if gateway_api:
        missing = await kube.gateway_api_missing()
        if missing is not None:
            gateway_api = False
            await_crds = True
            log.warning(
                "Gateway API off: %s; serving %s (the operator starts over by itself once they are installed)",
                missing,
                "nothing (--no-gateway)" if cfg.no_gateway else "TrafficSplits only",
            )
    else:
        log.info("Gateway API off: --gateway-api=false; serving TrafficSplits only")
    if cfg.no_gateway:
        log.info("no gateway for TrafficSplits (--no-gateway): none is published, each says Published=False, NoGateway")
    provisioner: Provisioner | None = None
    dataplane_namespace = cfg.dataplane_namespace
    placement, default_replicas = Placement.CONTROLLER_NAMESPACE, 2
    if gateway_api and cfg.dataplane_settings:
        from trafficsplit.operator.provisioner import Provisioner as ApiProvisioner
        from trafficsplit.operator.provisioner import load_settings

        settings = load_settings(cfg.dataplane_settings)
        provisioner = ApiProvisioner(api, settings, namespaces=cfg.namespaces)
        dataplane_namespace = settings.namespace
        placement, default_replicas = settings.placement, int(settings.gateway["replicas"])
    elif gateway_api:
        log.warning("Gateways' data planes are not provisioned (no --dataplane-settings): their publish Services "
                    "in %s must be made otherwise", dataplane_namespace)  # fmt: skip
    engine = _engine(
        cfg,
        cfg.identity,
        status_sink=kube.write_status,
        gateway_sink=kube.write_gateway_status if gateway_api else None,
        gateway_events=kube.write_gateway_event if gateway_api else None,
        provisioner=provisioner,
        dataplane_namespace=dataplane_namespace,
        secret_getter=kube.read_secret if gateway_api else None,
        configmap_getter=kube.read_configmap if gateway_api else None,
        placement=placement,
        default_replicas=default_replicas,
    )
    try:
        with _metrics_server(cfg, engine.metrics):
            return await _run_kubernetes(cfg, engine, api, kube, await_crds)
    finally:
        api.close()


async def _await_gateway_api(kube: KubeApi, stop: asyncio.Event, appeared: asyncio.Event, interval: float) -> None:
    """Gateway API was asked for but not served at the start: re-check discovery (no extra permission) until it is,
    then stop, so that main starts the operator over in place with those resources watched (kopf's watches are fixed
    when it starts). A user who installs the CRDs after the chart needs no restart of their own."""
    while not stop.is_set():
        await asyncio.sleep(interval)
        try:
            missing = await kube.gateway_api_missing()
        except Exception as exc:  # an API outage: checked again next time
            log.debug("Gateway API re-check failed: %s", exc)
            continue
        if missing is None:
            log.warning("Gateway API CRDs are now served: starting over to watch them")
            appeared.set()
            stop.set()
            return


async def _run_kubernetes(cfg: Config, engine: Engine, api: Any, kube: KubeApi, await_crds: bool) -> bool:
    import kopf

    from trafficsplit.operator.handlers import build_registry, operator_settings
    from trafficsplit.operator.leader import LeaderElector

    namespaces = list(cfg.namespaces)
    if namespaces and cfg.gateway_service and cfg.gateway_namespace not in namespaces:
        namespaces.append(cfg.gateway_namespace)  # its EndpointSlices name the dataplane replicas
    gateway_api = engine.gateways is not None
    if engine.gateways is not None and engine.gateways.settings.namespace not in namespaces and namespaces:
        namespaces.append(engine.gateways.settings.namespace)  # the Gateways' publish Services

    # The full resync: list everything once so the first pass sees the whole state (a pass on a partial store would
    # publish a generation missing splits). kopf's own initial listing and watch events then keep the store current.
    kinds = ("trafficsplit", "service", "endpointslice", *(GATEWAY_KINDS if gateway_api else ()))
    for kind in kinds:
        for body in await kube.list_all(kind, namespaces):
            engine.load(kind, body)
    engine.mark_ready()

    stop = asyncio.Event()
    tasks = [asyncio.create_task(engine.run())]
    appeared = asyncio.Event()
    if await_crds:
        tasks.append(asyncio.create_task(_await_gateway_api(kube, stop, appeared, GATEWAY_API_RECHECK_S)))
    if cfg.leader_election:
        elector = LeaderElector(
            api, cfg.lease_namespace, cfg.lease_name, cfg.identity, cfg.lease_duration, cfg.lease_renew
        )
        tasks.append(asyncio.create_task(elector.run(engine.become_leader, engine.stop_leading)))
    else:
        await engine.become_leader()
    try:
        await kopf.operator(
            registry=build_registry(engine),
            settings=operator_settings(),
            standalone=True,
            clusterwide=not namespaces,
            namespaces=namespaces,
            liveness_endpoint=cfg.liveness,
            stop_flag=stop,
            # Without it kopf derives one from getpass.getuser(), which raises in the image: uid 10001 has no
            # /etc/passwd entry (the restricted PSS wants a numeric uid, not a name).
            identity=cfg.identity,
        )
    finally:
        await _cancel(*reversed(tasks))
        await engine.fleet.close()
        if engine.gateways is not None:
            await engine.gateways.close()
    return appeared.is_set()


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_config(sys.argv[1:] if argv is None else argv, os.environ)
    logging.basicConfig(
        level=os.environ.get("TRAFFICSPLIT_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("kopf").setLevel(logging.WARNING)
    with contextlib.suppress(KeyboardInterrupt):
        if cfg.local:
            asyncio.run(run_file_source(cfg))
        elif asyncio.run(run_kubernetes(cfg)):
            # The same process (pid, pod, identity, log stream) with the same arguments: everything above has been
            # closed (watches, publish channels, the metrics port), and the lease is renewed under the same identity.
            logging.shutdown()
            os.execv(sys.executable, sys.orig_argv)
    return 0
