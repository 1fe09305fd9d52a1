"""Test pods: HTTP backends in their own Linux network namespaces, each with a real non-loopback address.

Why: the dataplane routes to pod IPs, and a test that only uses 127.0.0.1 with different ports cannot show that
traffic reached the right *host*. A network namespace + veth pair gives every backend its own address (10.244.x.y,
existing only on links this plugin creates), the way a pod gets one in a cluster, without Docker.

Usage (needs root and iproute2's ``ip``; mark the test ``@pytest.mark.netns``)::

    def test_x(testpods):
        blue = testpods.start("blue")      # Pod(name, ip, port, url, netns, host_if)
        urllib.request.urlopen(blue.url)   # body == b"blue"

Each pod is a /30: the host end of the veth holds .1 (+4k), the pod's ``eth0`` holds .2, so the root namespace
reaches the pod over the connected route and no forwarding or NAT is set up. Everything is removed when the test
ends, passed or failed; a session finalizer sweeps any namespace left with this run's prefix, and namespaces left by
earlier runs whose process is gone are removed at session start.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import random
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

# The range the pod /30s are carved from. Pods are only reached from this machine's root namespace.
POD_RANGE = ipaddress.IPv4Network("10.244.0.0/16")

# netns names are free-form, but interface names are capped at 15 chars (IFNAMSIZ), so links use a short run token.
NETNS_PREFIX = "tsp-"
_NETNS_RE = re.compile(rf"^{NETNS_PREFIX}(\d+)-([0-9a-f]+)-\d+$")
# Process-wide, so two factories sharing a run token never reuse a name.
_COUNTER = itertools.count(1)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def list_netns() -> list[str]:
    """Names of the network namespaces that ``ip netns`` knows."""
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def link_exists(ifname: str) -> bool:
    return _ip("link", "show", "dev", ifname, check=False).returncode == 0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(prefix: str | None = None) -> list[str]:
    """Delete namespaces named with ``prefix``, or (prefix None) those from runs whose process is gone."""
    removed = []
    for ns in list_netns():
        m = _NETNS_RE.match(ns)
        if not m:
            continue
        if prefix is not None:
            if not ns.startswith(prefix):
                continue
        elif _pid_alive(int(m.group(1))):
            continue
        _ip("netns", "delete", ns, check=False)
        removed.append(ns)
    return removed


def _used_networks() -> list[ipaddress.IPv4Network]:
    out = _ip("-4", "-o", "addr", "show", check=False).stdout
    nets = []
    for m in re.finditer(r"inet (\S+)", out):
        nets.append(ipaddress.IPv4Interface(m.group(1)).network)
    return nets


@dataclass(frozen=True)
class Pod:
    """A running test backend. ``url`` ends with '/'; its body answers ``name``."""

    name: str
    ip: str
    port: int
    netns: str
    host_if: str

    @property
    def url(self) -> str:
        return f"http://{self.ip}:{self.port}/"


@dataclass
class _Running:
    pod: Pod
    proc: subprocess.Popen[bytes]
    log: Path


@dataclass
class TestPods:
    """Factory for test pods; a context manager that removes every pod it started on exit."""

    __test__ = False  # not a test class, despite the name

    log_dir: Path
    port: int = 8080
    run_token: str = field(default_factory=lambda: secrets.token_hex(2))
    _pods: list[_Running] = field(default_factory=list)

    @property
    def netns_prefix(self) -> str:
        """Every namespace of this factory starts with this; it embeds the pid for the stale sweep."""
        return f"{NETNS_PREFIX}{os.getpid()}-{self.run_token}-"

    def __enter__(self) -> TestPods:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def pods(self) -> list[Pod]:
        return [r.pod for r in self._pods]

    def start(self, name: str, *, timeout: float = 15.0) -> Pod:
        """Create a namespace + veth + /30, start the name backend in it and wait until it answers."""
        n = next(_COUNTER)
        netns = f"{self.netns_prefix}{n}"
        # "tv" + 4 hex + "-" + n: unique per run and within IFNAMSIZ for up to 99999 pods.
        host_if = f"tv{self.run_token}-{n}"
        peer_if = f"tp{self.run_token}-{n}"
        _ip("netns", "add", netns)
        try:
            _ip("link", "add", host_if, "type", "veth", "peer", "name", peer_if)
            _ip("link", "set", peer_if, "netns", netns)
            _ip("-n", netns, "link", "set", peer_if, "name", "eth0")
            _ip("-n", netns, "link", "set", "lo", "up")
            pod_addr = self._assign(host_if, netns)
            _ip("link", "set", host_if, "up")
            _ip("-n", netns, "link", "set", "eth0", "up")
            pod = Pod(name=name, ip=pod_addr, port=self.port, netns=netns, host_if=host_if)
            log = self.log_dir / f"{netns}.log"
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    [
                        *("ip", "netns", "exec", netns, sys.executable, "-m", "tests.support.namebackend"),
                        *("--name", name, "--port", str(self.port)),
                    ],
                    cwd=REPO_ROOT,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            running = _Running(pod, proc, log)
            self._pods.append(running)
        except BaseException:
            _ip("link", "delete", host_if, check=False)
            _ip("netns", "delete", netns, check=False)
            raise
        self._wait_ready(running, timeout)
        return pod

    def _assign(self, host_if: str, netns: str) -> str:
        """Give the veth a /30 no interface on this machine uses yet; return the pod's address.

        Concurrent runs share the root namespace, and the kernel would accept the same subnet on two links (making
        routing ambiguous), so look at what is in use and start at a random /30 to make a race very unlikely.
        """
        subnets = list(POD_RANGE.subnets(new_prefix=30))
        used = _used_networks()
        start = random.randrange(len(subnets))
        for i in range(len(subnets)):
            subnet = subnets[(start + i) % len(subnets)]
            if any(subnet.overlaps(u) for u in used):
                continue
            host, pod = (str(h) for h in subnet.hosts())
            _ip("addr", "add", f"{host}/30", "dev", host_if)
            _ip("-n", netns, "addr", "add", f"{pod}/30", "dev", "eth0")
            return pod
        raise RuntimeError(f"no free /30 left in {POD_RANGE}")

    def _wait_ready(self, running: _Running, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if running.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(running.pod.url, timeout=1) as resp:
                    if resp.status == 200:
                        return
            except (OSError, urllib.error.URLError) as e:
                last = e
            time.sleep(0.05)
        log = running.log.read_text(errors="replace")[-2000:] if running.log.exists() else ""
        self.stop(running.pod)
        raise RuntimeError(f"test pod {running.pod.name} at {running.pod.url} never answered ({last!r}); log:\n{log}")

    def stop(self, pod: Pod) -> None:
        """Kill the pod's process and delete its links and namespace. Safe to call twice."""
        for r in [r for r in self._pods if r.pod == pod]:
            self._pods.remove(r)
            if r.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(r.proc.pid, signal.SIGTERM)
                try:
                    r.proc.wait(5)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(r.proc.pid, signal.SIGKILL)
                    r.proc.wait(5)
        # Deleting one end of a veth deletes both, at once; a namespace's own cleanup of its links is asynchronous.
        _ip("link", "delete", pod.host_if, check=False)
        _ip("netns", "delete", pod.netns, check=False)

    def close(self) -> None:
        for r in list(self._pods):
            self.stop(r.pod)


@pytest.fixture(scope="session")
def _testpods_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Once per session: sweep leftovers of dead runs now, and anything of this run at the end."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    remove_stale()
    token = secrets.token_hex(2)
    yield token
    remove_stale(f"{NETNS_PREFIX}{os.getpid()}-{token}-")


@pytest.fixture
def testpods(_testpods_session: str, tmp_path: Path) -> Iterator[TestPods]:
    """Factory: ``testpods.start(name) -> Pod``; every pod is torn down after the test, passed or failed."""
    with TestPods(log_dir=tmp_path, run_token=_testpods_session) as pods:
        yield pods
