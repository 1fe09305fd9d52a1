"""Envoy's command line, built in one place: the demo and the tests run Envoy with it, and the chart's gateway
container spells out the same arguments (a chart cannot import Python; tests/unit/test_chart_files.py checks the
template's args equal `envoy_args` for the chart's settings).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvoyCommand:
    """How one Envoy runs. Strings, not ints, where the chart passes a template expression through."""

    config_path: str
    concurrency: str = "1"
    log_level: str = "warning"
    service_node: str | None = None  # the pod name in a cluster; local runs set node.id in the bootstrap
    admin_address_path: str | None = None  # local runs: admin binds port 0 and Envoy writes the address here
    log_path: str | None = None
    # Local runs share a machine with other Envoys: a dynamic base id keeps their shared memory apart. A pod is never
    # hot-restarted in place (Kubernetes replaces it), so the chart disables hot restart and its shared memory.
    dynamic_base_id: bool = False
    hot_restart: bool = True
    # How often Envoy writes buffered access log lines (its default is 10 s); local runs read their log at once.
    file_flush_interval_msec: str | None = None


def envoy_args(cmd: EnvoyCommand) -> list[str]:
    """The arguments after the binary's name."""
    args = ["--config-path", cmd.config_path]
    if cmd.service_node is not None:
        args += ["--service-node", cmd.service_node]
    args += ["--concurrency", cmd.concurrency, "--log-level", cmd.log_level]
    if cmd.dynamic_base_id:
        args.append("--use-dynamic-base-id")
    if cmd.admin_address_path is not None:
        args += ["--admin-address-path", cmd.admin_address_path]
    if cmd.log_path is not None:
        args += ["--log-path", cmd.log_path]
    if not cmd.hot_restart:
        args.append("--disable-hot-restart")
    if cmd.file_flush_interval_msec is not None:
        args += ["--file-flush-interval-msec", cmd.file_flush_interval_msec]
    return args


def local_envoy(
    config_path: str, admin_address_path: str, *, concurrency: int = 1, log_path: str | None = None
) -> EnvoyCommand:
    """An Envoy on a shared machine (the demo, the tests): admin address written to a file, its own base id."""
    return EnvoyCommand(
        config_path=config_path,
        concurrency=str(concurrency),
        admin_address_path=admin_address_path,
        log_path=log_path,
        dynamic_base_id=True,
        file_flush_interval_msec="100",
    )
