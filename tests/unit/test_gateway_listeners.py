"""A Gateway data plane's listeners: `--listener PORT=HOST:PORT` renders one Envoy listener per Gateway listener port,
each of whose ext_proc filter names its port to the processor (configuration, not a client byte); the chart's single
listener is unchanged; the processor reads the port only from that metadata, bounded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trafficsplit.extproc.__main__ import main, parse_args
from trafficsplit.wire.bootstrap import (
    LISTENER_NAME,
    Address,
    BootstrapOptions,
    ExtProcTransport,
    GatewayListener,
    bootstrap,
    bootstrap_json,
)
from trafficsplit.wire.envoy import EXTPROC_FILTER, LISTENER_PORT_METADATA
from trafficsplit.wire.processing import listener_port


def options(*listeners: GatewayListener, transport: ExtProcTransport = ExtProcTransport.GRPC) -> BootstrapOptions:
    return BootstrapOptions(
        node_id="gw-0",
        listen=Address("0.0.0.0", 8080),
        extproc=Address(path="/run/x.sock"),
        ads=Address(path="/run/x.sock"),
        admin=Address("127.0.0.1", 9901),
        extproc_transport=transport,
        listeners=listeners,
    )


def ext_proc_of(listener: Any) -> Any:
    from envoy.extensions.filters.http.ext_proc.v3 import ext_proc_pb2
    from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm_pb2

    hcm = hcm_pb2.HttpConnectionManager()
    listener.filter_chains[0].filters[0].typed_config.Unpack(hcm)
    f = ext_proc_pb2.ExternalProcessor()
    next(x for x in hcm.http_filters if x.name == EXTPROC_FILTER).typed_config.Unpack(f)
    return f


def test_one_envoy_listener_per_gateway_port_each_naming_its_port() -> None:
    b = bootstrap(options(GatewayListener.parse("80=0.0.0.0:8080"), GatewayListener.parse("8081=[::]:9081")))
    names = [
        (x.name, x.address.socket_address.address, x.address.socket_address.port_value)
        for x in b.static_resources.listeners
    ]
    assert names == [("trafficsplit_http_80", "0.0.0.0", 8080), ("trafficsplit_http_8081", "::", 9081)]
    for listener, port in zip(b.static_resources.listeners, (80, 8081), strict=True):
        md = [(h.key, h.value) for h in ext_proc_of(listener).grpc_service.initial_metadata]
        assert md == [(LISTENER_PORT_METADATA, str(port))]


def test_over_http_service_the_port_is_a_header_of_the_post() -> None:
    b = bootstrap(options(GatewayListener.parse("80=0.0.0.0:8080"), transport=ExtProcTransport.HTTP))
    (listener,) = b.static_resources.listeners
    added = ext_proc_of(listener).http_service.http_service.request_headers_to_add
    assert [(h.header.key, h.header.value) for h in added] == [(LISTENER_PORT_METADATA, "80")]


def test_without_listeners_the_chart_gateways_single_listener_names_no_port() -> None:
    b = bootstrap(options())
    (listener,) = b.static_resources.listeners
    assert listener.name == LISTENER_NAME and listener.address.socket_address.port_value == 8080
    f = ext_proc_of(listener)
    assert not f.grpc_service.initial_metadata


@pytest.mark.parametrize(
    "text",
    ["80", "80=", "=0.0.0.0:80", "x=0.0.0.0:80", "0=0.0.0.0:80", "70000=0.0.0.0:80", "80=0.0.0.0:99999", "80=host"],
)
def test_bad_listener_flags_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        GatewayListener.parse(text)


def test_repeated_ports_or_binds_are_refused() -> None:
    with pytest.raises(ValueError, match="repeat"):
        options(GatewayListener.parse("80=0.0.0.0:8080"), GatewayListener.parse("80=0.0.0.0:8081"))
    with pytest.raises(ValueError, match="same address"):
        options(GatewayListener.parse("80=0.0.0.0:8080"), GatewayListener.parse("81=0.0.0.0:8080"))


def test_the_printed_bootstrap_takes_repeated_listener_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--print-bootstrap", "--listener", "80=0.0.0.0:8080", "--listener=443=0.0.0.0:8443"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [x["name"] for x in doc["static_resources"]["listeners"]] == [
        "trafficsplit_http_80",
        "trafficsplit_http_443",
    ]
    assert parse_args([]).listeners == []
    # Without the flag: byte for byte the bootstrap the chart's gateway prints today.
    assert main(["--print-bootstrap", "--replica=gw-0"]) == 0
    plain = capsys.readouterr().out
    assert plain == bootstrap_json(
        BootstrapOptions(
            node_id="gw-0",
            listen=Address("0.0.0.0", 8080),
            extproc=Address("127.0.0.1", 9001),
            ads=Address("127.0.0.1", 9001),
            admin=Address("127.0.0.1", 9901),
        )
    )


def test_bootstrap_out_writes_what_would_be_printed_readable_by_envoys_user(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A provisioned pod's init container writes the file Envoy (another user) reads from the shared emptyDir.
    flags = ["--print-bootstrap", "--listener=80=0.0.0.0:10080", "--listener=443=0.0.0.0:10443:https:a.example.com"]
    assert main(flags) == 0
    printed = capsys.readouterr().out
    out = tmp_path / "envoy.json"
    assert main([*flags, f"--bootstrap-out={out}"]) == 0
    assert capsys.readouterr().out == ""
    assert out.read_text() == printed
    assert out.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ((), None),
        (((LISTENER_PORT_METADATA, "80"),), 80),
        (((LISTENER_PORT_METADATA, b"8443"),), 8443),
        ((("other", "1"), (LISTENER_PORT_METADATA, "65535")), 65535),
        (((LISTENER_PORT_METADATA, "0"),), None),
        (((LISTENER_PORT_METADATA, "65536"),), None),
        (((LISTENER_PORT_METADATA, "٨٠"),), None),  # Unicode digits are not a port
        (((LISTENER_PORT_METADATA, "8" * 1000),), None),
        (((LISTENER_PORT_METADATA, " 80"),), None),
    ],
)
def test_the_processor_reads_the_port_from_the_metadata_only(
    metadata: tuple[tuple[str, str | bytes], ...], expected: int | None
) -> None:
    assert listener_port(metadata) == expected
