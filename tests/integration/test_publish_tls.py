"""The publish API over mutual TLS, with real processes: the extproc serving with the chart's kind of certificates
(server certificate from one CA, client certificates checked against another) and the operator's own client.

A publish with the right client certificate and token is applied; without a client certificate, with one from
another CA, in plaintext, or to a server the operator's CA did not sign, the handshake fails before any RPC; with
the right certificate but the wrong token the RPC is refused. The kubelet's plaintext health port answers without
TLS and serves nothing else. A renewed server certificate is used for new handshakes without a restart.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.certs import SERVER_NAME, Pki, issue, make_pki
from tests.support.dataplane import Dataplane, NameBackends, split_doc
from tests.support.operator import PYTHONPATH, OperatorProcess
from tests.support.waiting import poll
from trafficsplit.operator.publisher import ClientTlsFiles, PublisherClient
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.v1alpha1 import publish_pb2_grpc as pb_grpc

pytestmark = [pytest.mark.envoy]

HOST = "shop.example"


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture
def tls_dataplane(name_backends: NameBackends, pki: Pki) -> Iterator[Dataplane]:
    with tempfile.TemporaryDirectory(prefix="ts-tls-") as d:
        # A non-loopback-safe setup: TLS on, and the plaintext port serves health only.
        dp = Dataplane.start(Path(d), name_backends, extra_processor_args=[*pki.server_args(), "--health=127.0.0.1:0"])
        dp.processor.client_tls = ClientTlsFiles(
            str(pki.server_ca.path), str(pki.client.cert), str(pki.client.key), SERVER_NAME
        )
        try:
            yield dp
        finally:
            dp.stop()


def _client(dp: Dataplane, tls: ClientTlsFiles | None, token: str | None = None) -> PublisherClient:
    """The operator's client (call inside a running loop: grpc.aio channels belong to one)."""
    token_file = dp.workdir / f"token-{os.urandom(4).hex()}"
    token_file.write_text(dp.processor.token if token is None else token)
    return PublisherClient(dp.processor.publish_address, str(token_file), timeout=5, tls=tls)


def _get_held(dp: Dataplane, tls: ClientTlsFiles | None, token: str | None = None) -> pb.HeldReply | grpc.StatusCode:
    async def go() -> pb.HeldReply | grpc.StatusCode:
        client = _client(dp, tls, token)
        try:
            return await client.get_held()
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        finally:
            await client.close()

    return asyncio.run(go())


def test_the_operators_client_publishes_over_mtls(tls_dataplane: Dataplane, pki: Pki) -> None:
    dp = tls_dataplane
    _, msg = dp.generation([split_doc(HOST, {"stable": 100})])
    tls = ClientTlsFiles(str(pki.server_ca.path), str(pki.client.cert), str(pki.client.key), SERVER_NAME)

    async def go() -> pb.PublishReply:
        client = _client(dp, tls)
        try:
            return await client.publish(msg)
        finally:
            await client.close()

    reply = asyncio.run(go())
    assert reply.result == pb.PublishReply.ACCEPTED, (reply, dp.processor.log_tail())
    assert dp.get(HOST).backend == "stable"


@pytest.mark.parametrize(
    "case",
    [
        "no client certificate",
        "client certificate from another CA",
        "plaintext",
        "impostor server",
        "wrong server name",
    ],
)
def test_a_caller_without_the_right_certificates_is_refused_at_the_handshake(
    tls_dataplane: Dataplane, pki: Pki, case: str
) -> None:
    ca, cert, key, name = str(pki.server_ca.path), str(pki.client.cert), str(pki.client.key), SERVER_NAME
    tls: ClientTlsFiles | None = {
        "no client certificate": ClientTlsFiles(ca, server_name=name),
        "client certificate from another CA": ClientTlsFiles(
            ca, str(pki.rogue_client.cert), str(pki.rogue_client.key), name
        ),
        "plaintext": None,
        # The operator must not hand its token to a server its CA did not sign.
        "impostor server": ClientTlsFiles(str(pki.rogue_ca.path), cert, key, name),
        "wrong server name": ClientTlsFiles(ca, cert, key, "elsewhere.example"),
    }[case]
    assert _get_held(tls_dataplane, tls) == grpc.StatusCode.UNAVAILABLE
    # The right certificates still work: nothing above broke the server.
    assert isinstance(_get_held(tls_dataplane, ClientTlsFiles(ca, cert, key, name)), pb.HeldReply)


def test_the_token_is_still_checked_over_mtls(tls_dataplane: Dataplane, pki: Pki) -> None:
    tls = ClientTlsFiles(str(pki.server_ca.path), str(pki.client.cert), str(pki.client.key), SERVER_NAME)
    assert _get_held(tls_dataplane, tls, token="not-the-token") == grpc.StatusCode.UNAUTHENTICATED
    assert _get_held(tls_dataplane, tls, token="") == grpc.StatusCode.UNAUTHENTICATED


def test_the_plaintext_port_serves_health_only(tls_dataplane: Dataplane) -> None:
    dp = tls_dataplane
    address = f"127.0.0.1:{dp.processor.ports['health']}"
    with grpc.insecure_channel(address) as ch:
        check = health_pb2_grpc.HealthStub(ch).Check
        assert check(health_pb2.HealthCheckRequest(), timeout=5).status == health_pb2.HealthCheckResponse.NOT_SERVING
        dp.publish([split_doc(HOST, {"stable": 100})])
        assert check(health_pb2.HealthCheckRequest(), timeout=5).status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as err:
            pb_grpc.PublisherStub(ch).GetHeld(pb.GetHeldRequest(), timeout=5)
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


def _server_serial(dp: Dataplane, pki: Pki) -> int:
    ctx = ssl.create_default_context(cafile=str(pki.server_ca.path))
    ctx.load_cert_chain(str(pki.client.cert), str(pki.client.key))
    ctx.set_alpn_protocols(["h2"])
    with (
        socket.create_connection(("127.0.0.1", dp.processor.ports["publish"]), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname=SERVER_NAME) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


def test_a_renewed_server_certificate_is_served_without_a_restart(tls_dataplane: Dataplane, pki: Pki) -> None:
    pid = tls_dataplane.processor.pid
    assert _server_serial(tls_dataplane, pki) == pki.server.serial
    renewed = issue(pki.directory, pki.server_ca, SERVER_NAME, server=True, dns=(SERVER_NAME,), stem="server")
    assert renewed.serial != pki.server.serial
    poll(lambda: _server_serial(tls_dataplane, pki) == renewed.serial, 10, "the renewed certificate served")
    assert tls_dataplane.processor.pid == pid


@pytest.mark.slow
def test_the_operator_process_publishes_over_mtls(tls_dataplane: Dataplane, pki: Pki, tmp_path: Path) -> None:
    """The real operator (local mode) with the chart's TLS flags: its publish reaches Envoy."""
    port = tls_dataplane.backends.ports["green"]
    splits = tmp_path / "splits"
    splits.mkdir()
    (splits / "shop.yaml").write_text(
        "apiVersion: trafficsplit.dev/v1alpha1\nkind: TrafficSplit\nmetadata: {name: shop}\n"
        f"spec:\n  hosts: [{HOST}]\n  backends:\n    - {{name: green, weight: 1, endpoints: ['127.0.0.1:{port}']}}\n"
    )
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "PYTHONUNBUFFERED": "1"}
    args = [
        f"--file-source={splits}",
        f"--token-file={tls_dataplane.processor.token_file}",
        "--poll-interval=0.5",
        f"--dataplane=gw=127.0.0.1:{tls_dataplane.processor.ports['publish']}",
        *pki.operator_args(),
    ]
    op = OperatorProcess(args, env, tmp_path / "operator.log").start()
    try:
        poll(lambda: tls_dataplane.get(HOST).backend == "green", 20, "the operator's generation served")
    finally:
        op.stop()
