"""The Gateway API binaries hack/build-gateway-api.sh builds are the real ones and run: the conformance test binary
holds the upstream suite, and echo-basic (the backend every conformance test deploys) echoes a request.

Skipped, saying so, until the script has built them (the conformance run itself is not wired in yet:
docs/gateway-api.md). echo-basic listens on every interface of its network namespace, so it runs in one of its own
with only a loopback, and is asked from inside it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _version() -> str:
    text = (ROOT / "hack" / "build-gateway-api.sh").read_text(encoding="utf-8")
    m = re.search(r"^GATEWAY_API_VERSION=(v[0-9.]+)$", text, re.M)
    assert m
    return m.group(1)


def _binary(name: str) -> Path:
    cache = Path(os.environ.get("TRAFFICSPLIT_CACHE", Path.home() / ".cache" / "trafficsplit"))
    path = cache / "bin" / f"{name}-{_version()}" / name
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not built: run hack/build-gateway-api.sh")
    return path


def test_the_conformance_binary_holds_the_upstream_suite() -> None:
    out = subprocess.run(
        [str(_binary("gateway-api-conformance")), "-test.list", "."], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "TestConformance" in out.stdout.split()


def test_the_conformance_binary_takes_the_gateway_http_profile_flags() -> None:
    """The flags CI will pass exist (an unknown flag makes a Go test binary exit 2 before running anything)."""
    out = subprocess.run(
        [str(_binary("gateway-api-conformance")), "-test.run", "^$", "-help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    for flag in ("-gateway-class", "-conformance-profiles", "-supported-features", "-report-output"):
        assert flag in out.stderr, f"{flag} missing from the suite's flags"


@pytest.mark.netns
@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0 or not shutil.which("ip"), reason="needs root + ip")
def test_echo_basic_echoes_a_request() -> None:
    echo = _binary("echo-basic")
    netns = f"tsgw-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", netns], check=True)
    proc: subprocess.Popen[bytes] | None = None
    try:
        subprocess.run(["ip", "-n", netns, "link", "set", "lo", "up"], check=True)
        env = {"HTTP_PORT": "3000", "H2C_PORT": "3001", "POD_NAME": "echo-1", "NAMESPACE": "conformance"}
        proc = subprocess.Popen(
            ["ip", "netns", "exec", netns, str(echo)],
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        ask = (
            "import json, urllib.request as u\n"
            "r = u.Request('http://127.0.0.1:3000/some/path?q=1', headers={'Host': 'app.example.com'})\n"
            "print(u.urlopen(r, timeout=2).read().decode())\n"
        )
        body = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            out = subprocess.run(
                ["ip", "netns", "exec", netns, sys.executable, "-c", ask], capture_output=True, text=True, timeout=10
            )
            if out.returncode == 0:
                body = json.loads(out.stdout)
                break
            time.sleep(0.2)
        assert body is not None, "echo-basic never answered"
        assert body["path"] == "/some/path?q=1"
        assert body["host"] == "app.example.com"
        assert body["pod"] == "echo-1" and body["namespace"] == "conformance"
    finally:
        if proc is not None:
            proc.kill()
            proc.wait(timeout=10)
        subprocess.run(["ip", "netns", "delete", netns], check=False)
