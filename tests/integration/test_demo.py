"""`trafficsplit demo` as a user runs it: a real subprocess, curled through, flipped by editing its example, stopped.

Why here: what the README promises for its first command — it starts, answers with a sticky cookie, a saved edit of
the example moves traffic, and Ctrl-C leaves nothing running and every port free — is behaviour of the whole process
tree, so only the real command shows it. The examples are a temp copy of examples/ with the backends moved to free
ports, so a demo a developer is running on the default ports does not collide with the test.

Also here: the supervisor's stop path with real processes (a child that ignores SIGTERM, a grandchild left behind),
and the one-line, exit-2 refusals (busy ports, no examples) that must come before anything starts.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import http.client
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from tests.support.waiting import poll
from trafficsplit.demo.run import port_free
from trafficsplit.demo.supervisor import ChildSpec, Supervisor, parse_stat
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.v1alpha1 import publish_pb2_grpc as pb_grpc

REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHONPATH = os.pathsep.join(str(REPO_ROOT / p) for p in ("src", "operator", "extproc", "."))
READY_TIMEOUT = 90.0
STOP_TIMEOUT = 40.0
FLIP_TIMEOUT = 10.0
COOKIE_RE = re.compile(r"^([^=;\s]+)=([0-9a-f]{24})(;|$)")


def free_ports(n: int) -> list[int]:
    """n distinct free loopback ports (all held at once while choosing, so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def processes() -> dict[int, tuple[str, int, int]]:
    """pid → (state, ppid, pgrp) for every process visible in /proc."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                out[int(entry.name)] = parse_stat((entry / "stat").read_text())
    return out


def descendants(root: int) -> set[int]:
    procs = processes()
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in found:
                found.add(c)
                todo.append(c)
    return found


def alive(pid: int) -> bool:
    """A process exists and is not a zombie waiting for init."""
    try:
        state, _, _ = parse_stat(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, ValueError, IndexError):
        return False
    return state != "Z"


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    except OSError:  # gone meanwhile
        return ""


# --- the example copy -------------------------------------------------------------------------------------------


@dataclass
class ExampleCopy:
    directory: Path
    file: Path
    docs: list[Any]
    split: dict[str, Any]  # the first TrafficSplit document (shared with `docs`)
    backend_ports: list[int]

    @property
    def host(self) -> str:
        hosts = [str(h) for h in self.split["spec"]["hosts"] if "*" not in h]
        return next((h for h in hosts if h != "localhost"), hosts[0])

    @property
    def cookie(self) -> str:
        return str(self.split["spec"]["sticky"]["cookie"]["name"])

    def weights(self) -> dict[str, int]:
        return {b["name"]: int(b["weight"]) for b in self.split["spec"]["backends"]}

    def write(self) -> None:
        self.file.write_text(yaml.safe_dump_all(self.docs, sort_keys=False))


def copy_examples(dest: Path) -> ExampleCopy:
    """examples/ copied, every static endpoint moved to a free loopback port (one endpoint → one new port)."""
    shutil.copytree(REPO_ROOT / "examples", dest)
    files = {
        p: list(yaml.safe_load_all(p.read_text())) for p in sorted(dest.iterdir()) if p.suffix in (".yaml", ".yml")
    }
    splits = [
        (p, d) for p, docs in files.items() for d in docs if isinstance(d, dict) and d.get("kind") == "TrafficSplit"
    ]
    assert splits, "examples/ has no TrafficSplit"
    endpoints = sorted({ep for _, d in splits for b in d["spec"]["backends"] for ep in b.get("endpoints") or []})
    ports = free_ports(len(endpoints))
    moved = dict(zip(endpoints, ports, strict=True))
    for _, d in splits:
        for b in d["spec"]["backends"]:
            if b.get("endpoints"):
                b["endpoints"] = [f"127.0.0.1:{moved[ep]}" for ep in b["endpoints"]]
                b["port"] = int(b["endpoints"][0].rpartition(":")[2])
    for p, docs in files.items():
        p.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    path, split = splits[0]
    return ExampleCopy(dest, path, files[path], split, ports)


# --- the demo process -------------------------------------------------------------------------------------------


@dataclass
class Demo:
    proc: subprocess.Popen[str]
    port: int
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    seen: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, examples: Path, port: int, *extra: str) -> Demo:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "trafficsplit.cli",
                "demo",
                "--examples",
                str(examples),
                "--port",
                str(port),
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": PYTHONPATH},
            start_new_session=True,  # its own process group, as a shell gives a foreground job
        )
        demo = cls(proc, port)
        threading.Thread(target=demo._read, daemon=True).start()
        return demo

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for_line(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    break
                continue
            self.seen.append(line)
            if line.strip().startswith(prefix):
                return line
        err = self.proc.stderr.read() if self.proc.poll() is not None and self.proc.stderr else ""
        raise AssertionError(f"no line starting {prefix!r} within {timeout}s; stdout: {self.seen}; stderr: {err}")

    def info(self, prefix: str) -> str:
        return next(line for line in self.seen if line.strip().startswith(prefix))

    def pids(self) -> dict[str, int]:
        text = self.info("pids:").strip().removeprefix("pids:")
        return {k: int(v) for k, v in (item.split("=") for item in text.split())}

    def workdir(self) -> Path:
        m = re.search(r"logs in (\S+)\)", self.info("trafficsplit demo: starting"))
        assert m is not None
        return Path(m.group(1))

    def internal_ports(self) -> list[int]:
        return [int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)/", self.info("envoy admin:"))]

    def get(self, host: str, cookie: str | None = None) -> tuple[int, dict[str, str], str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", "/", headers={"Host": host, **({"Cookie": cookie} if cookie else {})})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
        finally:
            conn.close()

    def stop(self, sig: int) -> int:
        os.killpg(self.proc.pid, sig)  # a terminal's Ctrl-C signals the foreground group
        return self.proc.wait(STOP_TIMEOUT)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


@pytest.fixture
def examples_copy(tmp_path: Path) -> ExampleCopy:
    return copy_examples(tmp_path / "examples")


def cleanup(demo: Demo) -> None:
    """A failed test must not leak the demo's tree: stop it, then kill whatever it left."""
    if demo.proc.poll() is None:
        pids = descendants(demo.proc.pid)
        with contextlib.suppress(Exception):
            demo.stop(signal.SIGTERM)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if demo.proc.poll() is None:
            demo.kill()


def start_ready(tmp_path: Path, attempts: int = 3) -> tuple[Demo, ExampleCopy]:
    """A demo on free ports, ready. The ports are free when picked but the machine is shared: a port taken in the
    meantime makes the demo refuse to start (exit 2, "already in use"), and then fresh ports are picked."""
    for attempt in range(attempts):
        ex = copy_examples(tmp_path / f"examples-{attempt}")
        demo = Demo.start(ex.directory, free_ports(1)[0])
        try:
            demo.wait_for_line("trafficsplit demo: ready", READY_TIMEOUT)
            demo.wait_for_line("stop:", 5)
            return demo, ex
        except AssertionError as exc:
            if demo.proc.poll() != 2 or "already in use" not in str(exc) or attempt == attempts - 1:
                cleanup(demo)
                raise
    raise AssertionError("unreachable")


@pytest.fixture
def running_demo(tmp_path: Path) -> Iterator[tuple[Demo, ExampleCopy]]:
    demo, ex = start_ready(tmp_path)
    try:
        yield demo, ex
    finally:
        cleanup(demo)


def assert_all_gone(demo: Demo, tree: set[int], ports: list[int]) -> None:
    left = sorted(pid for pid in tree if alive(pid))
    assert left == [], f"still running after the demo exited: {left}"
    busy = [p for p in ports if not port_free("127.0.0.1", p)]
    assert busy == [], f"ports still bound: {busy}"


# --- the demo, end to end ---------------------------------------------------------------------------------------


@pytest.mark.envoy
@pytest.mark.slow
def test_demo_serves_sticky_flips_on_edit_and_stops_clean_on_ctrl_c(running_demo: tuple[Demo, ExampleCopy]) -> None:
    demo, ex = running_demo
    weights = ex.weights()
    src = max(weights, key=lambda n: weights[n])
    dst = next(n for n in weights if weights[n] == 0) if 0 in weights.values() else next(n for n in weights if n != src)

    # The ready block shows the curl line for the example's host.
    assert f"curl -i -H 'Host: {ex.host}' http://127.0.0.1:{demo.port}/" in "\n".join(demo.seen)

    # First answer mints the sticky cookie; mint until a session lands on the side the flip moves.
    def minted_on_src() -> tuple[str, str] | None:
        status, headers, body = demo.get(ex.host)
        assert status == 200, (status, headers, body)
        m = COOKIE_RE.match(headers.get("set-cookie", ""))
        assert m is not None and m.group(1) == ex.cookie, headers
        assert body == headers["x-backend"] + "\n"
        return (f"{m.group(1)}={m.group(2)}", headers["x-backend"]) if headers["x-backend"] == src else None

    cookie, backend = poll(minted_on_src, 30, f"a session on {src}", interval=0)
    for _ in range(5):
        status, headers, _ = demo.get(ex.host, cookie)
        assert (status, headers["x-backend"]) == (200, backend)
        assert "set-cookie" not in headers  # a valid cookie is kept, not re-minted

    # Flip by editing the file, as the ready block tells a user to.
    for b in ex.split["spec"]["backends"]:
        if b["name"] == src:
            moved, b["weight"] = b["weight"], 0
    for b in ex.split["spec"]["backends"]:
        if b["name"] == dst:
            b["weight"] += moved
    ex.write()
    poll(lambda: demo.get(ex.host, cookie)[1]["x-backend"] == dst, FLIP_TIMEOUT, f"the session to move to {dst}")
    for _ in range(3):
        assert demo.get(ex.host, cookie)[1]["x-backend"] == dst
    # The console tells the user the edit reached the gateway (the operator's acknowledgement, echoed).
    demo.wait_for_line("trafficsplit demo: operator: dataplane demo-gateway holds generation 2", 5)

    pids = demo.pids()
    tree = descendants(demo.proc.pid)
    assert set(pids.values()) == tree, (pids, tree)
    assert set(pids) == {"backends", "extproc", "envoy", "operator"}
    workdir = demo.workdir()
    assert workdir.is_dir() and not workdir.is_relative_to(REPO_ROOT)

    assert demo.stop(signal.SIGINT) == 0
    assert_all_gone(demo, tree, [demo.port, *ex.backend_ports, *demo.internal_ports()])
    assert not workdir.exists()
    assert demo.proc.stderr is not None and demo.proc.stderr.read() == ""


@pytest.mark.envoy
@pytest.mark.slow
def test_demo_stops_clean_on_sigterm(running_demo: tuple[Demo, ExampleCopy]) -> None:
    demo, ex = running_demo
    tree = descendants(demo.proc.pid)
    assert len(tree) == 4
    assert demo.stop(signal.SIGTERM) == 0
    assert_all_gone(demo, tree, [demo.port, *ex.backend_ports, *demo.internal_ports()])


@pytest.mark.envoy
@pytest.mark.slow
def test_a_dead_child_stops_the_demo_with_its_log(running_demo: tuple[Demo, ExampleCopy]) -> None:
    demo, ex = running_demo
    tree = descendants(demo.proc.pid)
    os.kill(demo.pids()["envoy"], signal.SIGKILL)
    assert demo.proc.wait(STOP_TIMEOUT) == 1
    assert demo.proc.stderr is not None
    err = demo.proc.stderr.read()
    assert "envoy exited with code -9" in err
    assert_all_gone(demo, tree, [demo.port, *ex.backend_ports, *demo.internal_ports()])
    workdir = demo.workdir()
    assert (workdir / "envoy.log").exists()  # kept for the post-mortem
    shutil.rmtree(workdir)


# --- refusals before anything starts ----------------------------------------------------------------------------


def run_demo(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trafficsplit.cli", "demo", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": PYTHONPATH},
    )


def test_a_busy_gateway_port_is_one_line_and_exit_2_before_anything_starts(examples_copy: ExampleCopy) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_demo("--examples", str(examples_copy.directory), "--port", str(port))
    assert r.returncode == 2
    assert r.stdout == ""  # not even "starting", which comes before the first process
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert f"127.0.0.1:{port} (the gateway) is already in use; change --port" in lines[0]
    assert lines[0].startswith("trafficsplit demo: error: ")


def test_a_busy_backend_port_names_the_backend_and_its_file(examples_copy: ExampleCopy) -> None:
    b = next(b for b in examples_copy.split["spec"]["backends"] if b.get("endpoints"))
    port = int(b["endpoints"][0].rpartition(":")[2])
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        r = run_demo("--examples", str(examples_copy.directory), "--port", str(free_ports(1)[0]))
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1
    assert f"127.0.0.1:{port} (backend {b['name']}) is already in use" in r.stderr
    assert examples_copy.file.name in r.stderr


def test_no_examples_directory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    r = run_demo(cwd=tmp_path)  # the default ./examples does not exist here
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        "trafficsplit demo: error: examples directory 'examples' not found: run from a clone of the repository "
        "(the demo serves ./examples) or give --examples DIR"
    ]


# --- the supervisor with real processes --------------------------------------------------------------------------

IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
)
LEAVES_GRANDCHILD = (
    "import subprocess, sys, time, signal\n"
    "c = subprocess.Popen([sys.executable, '-c', " + repr(IGNORES_TERM) + "])\n"
    "open(sys.argv[1], 'w').write(str(c.pid))\n"
    "time.sleep(60)\n"
)


def test_supervisor_stops_newest_first_and_kills_what_ignores_sigterm(tmp_path: Path) -> None:
    sup = Supervisor()
    order = tmp_path / "order"
    trap = f"trap 'echo $0 >> {order}; exit 0' TERM; while :; do sleep 0.05; done"
    first = sup.start(ChildSpec("first", ["sh", "-c", trap, "first"], tmp_path / "first.log"))
    second = sup.start(ChildSpec("second", ["sh", "-c", trap, "second"], tmp_path / "second.log"))
    stubborn = sup.start(ChildSpec("stubborn", [sys.executable, "-c", IGNORES_TERM], tmp_path / "stubborn.log"))
    poll(lambda: (tmp_path / "stubborn.log").read_text() == "up\n", 10, "the stubborn child's handler")
    pids = [first.pid, second.pid, stubborn.pid]
    try:
        assert all(alive(p) for p in pids)
        t0 = time.monotonic()
        notes = sup.stop(grace=0.5)
        assert time.monotonic() - t0 < 5
        assert notes == [f"stubborn (pid {stubborn.pid}) did not stop within 0.5s: killed"]
        assert order.read_text().split() == ["second", "first"]
        assert not any(alive(p) for p in pids)
        assert sup.children == []
    finally:
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)


def test_supervisor_kills_a_grandchild_left_in_the_group(tmp_path: Path) -> None:
    sup = Supervisor()
    pidfile = tmp_path / "grandchild"
    parent = sup.start(ChildSpec("parent", [sys.executable, "-c", LEAVES_GRANDCHILD, str(pidfile)], tmp_path / "p.log"))
    grandchild = int(poll(lambda: pidfile.read_text(), 10, "the grandchild's pid"))
    try:
        poll(lambda: alive(grandchild) and "up" in (tmp_path / "p.log").read_text(), 10, "the grandchild")
        notes = sup.stop(grace=0.5)
        assert notes == [f"parent (pid {parent.pid}) did not stop within 0.5s: killed"]  # its group outlived SIGTERM
        assert not alive(grandchild)  # stop() returns only once the whole group is gone
        assert not alive(parent.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(grandchild, signal.SIGKILL)  # never leak it, even when the test fails


@pytest.mark.envoy
@pytest.mark.slow
def test_ctrl_c_while_starting_stops_what_already_started(examples_copy: ExampleCopy) -> None:
    demo = Demo.start(examples_copy.directory, free_ports(1)[0])
    try:
        demo.wait_for_line("trafficsplit demo: starting", READY_TIMEOUT)
        workdir = demo.workdir()
        poll(lambda: (workdir / "extproc.log").exists(), 20, "the processor to be started")
        tree = descendants(demo.proc.pid)
        assert tree
        assert demo.stop(signal.SIGINT) == 0
        assert_all_gone(demo, tree, [demo.port, *examples_copy.backend_ports])
        leftovers = [pid for pid in processes() if alive(pid) and str(workdir) in cmdline(pid)]
        assert leftovers == []
        assert not workdir.exists()
    finally:
        cleanup(demo)


# --- the file source under rewrites: a read it cannot trust never withdraws the split -----------------------------

RATE = 200  # requests per second through the gateway, over LOAD_THREADS keep-alive connections
LOAD_THREADS = 12


def leading_comments() -> str:
    """The shipped example's leading comment lines: what a slow `gen > shop.yaml` leaves in the file for a while."""
    lines = (REPO_ROOT / "examples" / "shop.yaml").read_text().splitlines(keepends=True)
    head = "".join(line for line in lines[: next(i for i, x in enumerate(lines) if not x.startswith("#"))])
    assert head.count("\n") >= 3, head
    return head


class Traffic:
    """A bounded request loop (RATE req/s, at most `limit` seconds) through the demo's gateway, counting statuses."""

    def __init__(self, port: int, host: str, limit: float) -> None:
        self.port, self.host = port, host
        self.deadline = time.monotonic() + limit
        self.halt = threading.Event()
        self.counts: list[collections.Counter[str]] = [collections.Counter() for _ in range(LOAD_THREADS)]
        self.threads = [threading.Thread(target=self._run, args=(c,), daemon=True) for c in self.counts]
        self.started = self.ended = 0.0

    def __enter__(self) -> Traffic:
        self.started = time.monotonic()
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.halt.set()
        for t in self.threads:
            t.join(15)
        self.ended = time.monotonic()

    def _run(self, counts: collections.Counter[str]) -> None:
        interval = LOAD_THREADS / RATE
        due = time.monotonic()
        conn: http.client.HTTPConnection | None = None
        while not self.halt.is_set() and time.monotonic() < self.deadline:
            try:
                conn = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/", headers={"Host": self.host})
                r = conn.getresponse()
                r.read()
                counts[str(r.status)] += 1
            except (OSError, http.client.HTTPException) as exc:
                counts[type(exc).__name__] += 1
                if conn is not None:
                    conn.close()
                conn = None
            due = max(due + interval, time.monotonic() - interval)  # paced; a late request does not start a burst
            time.sleep(max(0.0, due - time.monotonic()))
        if conn is not None:
            conn.close()

    def total(self) -> collections.Counter[str]:
        return sum(self.counts, collections.Counter())

    def rate(self) -> float:
        return sum(self.total().values()) / max(self.ended - self.started, 1e-9)


class HeldWatch:
    """Polls the demo processor's held generation (GetHeld, with the generation) every 50 ms and records, per number,
    the splits it carries: a generation published without the split shows up here even if no request hit it."""

    def __init__(self, workdir: Path) -> None:
        self.token = (workdir / "token").read_text().strip()
        self.port = int(json.loads((workdir / "extproc.ports.json").read_text())["publish"])
        self.seen: dict[int, tuple[str, ...]] = {}
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HeldWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.halt.set()
        self.thread.join(15)

    def _run(self) -> None:
        with grpc.insecure_channel(f"127.0.0.1:{self.port}") as ch:
            stub = pb_grpc.PublisherStub(ch)
            while not self.halt.wait(0.05):
                with contextlib.suppress(grpc.RpcError):
                    reply = stub.GetHeld(
                        pb.GetHeldRequest(with_generation=True),
                        metadata=[("authorization", f"Bearer {self.token}")],
                        timeout=2,
                    )
                    keys = tuple(sorted(f"{s.namespace}/{s.name}" for s in reply.generation.splits))
                    self.seen[int(reply.held_number)] = keys


def report(what: str, traffic: Traffic, held: HeldWatch) -> None:
    print(
        f"{what}: {dict(traffic.total())} in {traffic.ended - traffic.started:.1f} s ({traffic.rate():.0f} req/s); "
        f"generations held: {held.seen}"
    )


@pytest.mark.envoy
@pytest.mark.slow
def test_rewrites_through_empty_and_comment_only_states_never_withdraw_the_split(
    running_demo: tuple[Demo, ExampleCopy],
) -> None:
    """20 rewrites as a slow generator does them (`gen > shop.yaml`): truncated, then empty (even rewrites) or holding
    only the leading comments (odd ones) for longer than the 1 s settle window, then the rest written."""
    demo, ex = running_demo
    head = leading_comments()
    body = yaml.safe_dump_all(ex.docs, sort_keys=False)
    split = f"{ex.split['metadata'].get('namespace', 'default')}/{ex.split['metadata']['name']}"
    with HeldWatch(demo.workdir()) as held, Traffic(demo.port, ex.host, limit=150) as traffic:
        poll(lambda: held.seen, 10, "the processor's held generation")
        for i in range(20):  # 10 of each state; each one holds the file broken for longer than the settle window
            with ex.file.open("w") as f:  # O_TRUNC: the file is empty from here
                if i % 2:
                    f.write(head)
                    f.flush()
                time.sleep(1.3)
                f.write(body if i % 2 else head + body)
            time.sleep(0.2)
    report("20 rewrites through empty and comment-only states", traffic, held)
    counts = traffic.total()
    assert counts["404"] == 0, counts
    assert set(counts) == {"200"}, counts
    assert traffic.rate() > RATE / 2, f"the loop did not run at a useful rate: {traffic.rate():.0f} req/s"
    assert held.seen and all(split in keys for keys in held.seen.values()), held.seen


@pytest.mark.envoy
@pytest.mark.slow
def test_in_place_rewrites_with_cp_never_publish_a_generation_without_the_split(
    running_demo: tuple[Demo, ExampleCopy], tmp_path: Path
) -> None:
    """20 `cp` onto the split file (in place: truncate, then write), alternating two weightings with the same total,
    so every rewrite is a real change the operator publishes."""
    demo, ex = running_demo
    head = leading_comments()
    split = f"{ex.split['metadata'].get('namespace', 'default')}/{ex.split['metadata']['name']}"
    variants = []
    for n, shift in enumerate((0, 5)):
        backends = ex.split["spec"]["backends"]
        top = max(range(len(backends)), key=lambda i: backends[i]["weight"])
        low = min(range(len(backends)), key=lambda i: (backends[i]["weight"] == 0, backends[i]["weight"]))
        docs = copy.deepcopy(ex.docs)
        target = next(d for d in docs if d is not None and d.get("kind") == "TrafficSplit")
        target["spec"]["backends"][top]["weight"] -= shift
        target["spec"]["backends"][low]["weight"] += shift
        v = tmp_path / f"variant-{n}.yaml"
        v.write_text(head + yaml.safe_dump_all(docs, sort_keys=False))
        variants.append(v)
    with HeldWatch(demo.workdir()) as held, Traffic(demo.port, ex.host, limit=90) as traffic:
        first = max(poll(lambda: held.seen, 10, "the processor's held generation"))
        for i in range(20):
            subprocess.run(["cp", str(variants[(i + 1) % 2]), str(ex.file)], check=True, timeout=10)
            time.sleep(1.5)
    report("20 in-place rewrites with cp", traffic, held)
    counts = traffic.total()
    assert counts["404"] == 0, counts
    assert set(counts) == {"200"}, counts
    assert traffic.rate() > RATE / 2, f"the loop did not run at a useful rate: {traffic.rate():.0f} req/s"
    assert len([n for n in held.seen if n > first]) >= 5, held.seen  # the rewrites were published
    assert all(split in keys for keys in held.seen.values()), held.seen


@pytest.mark.envoy
@pytest.mark.slow
def test_persistent_sessions_stay_on_the_drained_side_and_the_console_says_what_moved(
    running_demo: tuple[Demo, ExampleCopy],
) -> None:
    """The demo's cookie key makes the persistent example work: the drain edit (what `flip --drain` writes) keeps the
    old sessions on blue while new ones go to green, and the console names the change with persistent mode's figure."""
    demo, ex = running_demo
    path = ex.directory / "tickets.yaml"
    docs = list(yaml.safe_load_all(path.read_text()))
    split = next(d for d in docs if d and d.get("kind") == "TrafficSplit")
    host, cookie_name = split["spec"]["hosts"][0], split["spec"]["sticky"]["cookie"]["name"]
    assert [(b["name"], b["weight"]) for b in split["spec"]["backends"]] == [("blue", 100), ("green", 0)]

    status, headers, _ = demo.get(host)
    assert (status, headers["x-backend"]) == (200, "blue"), headers
    m = re.match(rf"^{cookie_name}=([0-9a-f]{{24}}\.blue\.[\w-]+);", headers["set-cookie"])
    assert m is not None, headers["set-cookie"]  # sealed with the demo's key: KEY.BACKEND.MAC
    cookie = f"{cookie_name}={m.group(1)}"

    blue, green = split["spec"]["backends"]
    blue["weight"], blue["drain"], green["weight"] = 0, True, 100
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    demo.wait_for_line(
        "trafficsplit demo:   tickets.yaml default/tickets: blue 100 → 0, green 0 → 100; moves 0.00% of existing "
        "sessions (persistent); blue draining",
        FLIP_TIMEOUT,
    )
    poll(lambda: demo.get(host)[1]["x-backend"] == "green", FLIP_TIMEOUT, "new sessions on green")
    for _ in range(5):
        assert demo.get(host)[1]["x-backend"] == "green"  # every new session
        status, headers, _ = demo.get(host, cookie)
        assert (status, headers["x-backend"]) == (200, "blue"), headers  # the old one stays while blue drains
        assert "set-cookie" not in headers
    # The demo's idle window is 30 s: once blue's session has been idle that long, the console says it drained.
    demo.wait_for_line("trafficsplit demo: operator: default/tickets (tickets.yaml[0]): Drained: blue:", 60)
