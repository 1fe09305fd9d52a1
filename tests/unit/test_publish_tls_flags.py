"""The publish API's TLS flags on both sides: what each combination means, and that a plaintext publish API beyond
loopback must be asked for by name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trafficsplit.extproc.__main__ import local_listens, parse_args, publish_tls
from trafficsplit.extproc.tls import ServerTlsFiles
from trafficsplit.operator.config import parse_config
from trafficsplit.operator.publisher import ClientTlsFiles
from trafficsplit.wire.bootstrap import Address

TOKEN = ["--token-file=/t"]
ROOT = Path(__file__).resolve().parents[2]


def test_server_tls_files_from_flags() -> None:
    args = parse_args([*TOKEN, "--tls-cert=/c", "--tls-key=/k", "--tls-client-ca=/ca"])
    assert publish_tls(args) == ServerTlsFiles(Path("/c"), Path("/k"), Path("/ca"))
    assert publish_tls(parse_args([*TOKEN, "--tls-cert=/c", "--tls-key=/k"])) == ServerTlsFiles(Path("/c"), Path("/k"))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tls-cert=/c"], "go together"),
        (["--tls-key=/k"], "go together"),
        (["--tls-client-ca=/ca", "--publish=127.0.0.1:1"], "needs --tls-cert"),
        (["--publish=0.0.0.0:9002"], "not loopback"),
        (["--publish=10.0.0.7:9002"], "not loopback"),
    ],
)
def test_server_tls_flags_refuse_incomplete_or_unsafe_combinations(flags: list[str], message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        publish_tls(parse_args([*TOKEN, *flags]))


@pytest.mark.parametrize("publish", ["127.0.0.1:0", "[::1]:9002", "localhost:9002"])
def test_plaintext_is_allowed_on_loopback(publish: str) -> None:
    assert publish_tls(parse_args([*TOKEN, f"--publish={publish}"])) is None


def test_plaintext_beyond_loopback_only_when_asked_for() -> None:
    assert publish_tls(parse_args([*TOKEN, "--publish=0.0.0.0:9002", "--insecure-publish"])) is None


def test_address_loopback() -> None:
    assert Address(path="/run/x.sock").loopback and Address("127.0.0.2", 1).loopback and Address("::1", 1).loopback
    assert not Address("0.0.0.0", 1).loopback and not Address("10.1.2.3", 1).loopback
    assert not Address("gateway.example", 1).loopback


def test_operator_tls_flags_and_environment() -> None:
    base = ["--dataplane=127.0.0.1:9002"]
    cfg = parse_config([*base, "--tls-ca=/ca", "--tls-cert=/c", "--tls-key=/k", "--tls-server-name=gw.svc"], {})
    assert cfg.tls == ClientTlsFiles("/ca", "/c", "/k", "gw.svc")
    env = {"TRAFFICSPLIT_TLS_CA": "/ca", "TRAFFICSPLIT_TLS_SERVER_NAME": "gw.svc"}
    assert parse_config(base, env).tls == ClientTlsFiles("/ca", None, None, "gw.svc")
    assert parse_config(base, {}).tls is None
    for bad in (["--tls-cert=/c", "--tls-key=/k"], ["--tls-ca=/ca", "--tls-cert=/c"], ["--tls-server-name=x"]):
        with pytest.raises(SystemExit):
            parse_config([*base, *bad], {})


@pytest.mark.parametrize(
    "flags",
    [
        ["--listen=0.0.0.0:0"],
        ["--listen=10.0.0.7:9001"],
        ["--listen=127.0.0.1:0", "--ext-proc-transport=http", "--ext-proc-http-listen=0.0.0.0:0"],
        ["--listen=[::]:0"],
    ],
    ids=["listen any", "listen pod address", "http listen any", "listen any v6"],
)
def test_ext_proc_and_ads_beyond_loopback_are_refused_at_start(tmp_path: Path, flags: list[str]) -> None:
    """ext_proc and ADS are unauthenticated (only the Envoy beside the processor may call them): a non-loopback
    address is refused before anything listens, as a plaintext --publish is."""
    token = tmp_path / "token"
    token.write_text("t\n")
    argv = [*flags, "--publish=127.0.0.1:0", "--metrics=127.0.0.1:0", f"--token-file={token}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / d) for d in ("src", "operator", "extproc"))}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "trafficsplit.extproc", *argv], capture_output=True, timeout=20, env=env
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"{flags}: started serving instead of refusing") from exc
    assert done.returncode != 0 and b"not loopback" in done.stderr, done.stderr[-500:]


def test_ext_proc_beyond_loopback_only_when_asked_for() -> None:
    args = parse_args([*TOKEN, "--listen=0.0.0.0:9001", "--insecure-listen"])
    local_listens(args)  # no SystemExit
    for listen in ("127.0.0.1:9001", "[::1]:9001", "localhost:9001", "unix:/run/x.sock"):
        local_listens(parse_args([*TOKEN, f"--listen={listen}", "--ext-proc-transport=http"]))


@pytest.mark.parametrize(
    ("given", "target"),
    [
        ("10.1.2.3:9004", "10.1.2.3:9004"),
        ("fd00::a:9004", "[fd00::a]:9004"),  # $(POD_IP):PORT on an IPv6 pod
        ("[fd00::a]:9004", "[fd00::a]:9004"),
        ("unix:/run/x.sock", "unix:/run/x.sock"),
    ],
)
def test_address_target_is_what_grpc_binds(given: str, target: str) -> None:
    assert Address.parse(given).target == target
