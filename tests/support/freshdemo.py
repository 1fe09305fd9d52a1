"""The README's first command on a fresh clone, as a new user runs it (hack/ci-demo.sh, run by .ci/run before
`make test`): `git clone` of the current commit into a temp dir, `make demo` there with its own empty `.venv` (only
the `demo` extra, so a dependency the demo needs and no extra of it declares fails here: `make test`'s venv has the
test extras and hides it), then the README's demo lines verbatim (tests/support/doccommands.py extracts them): the
curl lines, the flip comment applied as the edit it describes, the `plan` line, then Ctrl-C (SIGINT to the
foreground process group, as a terminal sends it) and a clean stop.

`--drop NAME` removes NAME from every extra of the clone's pyproject.toml first: a test of this check itself (it
must then fail, saying why). Prints the timings: clone, to ready, flip seen, stop.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Mapping
from pathlib import Path

import yaml

from tests.support.doccommands import ROOT, Ran, demo_flip, readme_demo_lines
from trafficsplit.demo.run import port_free

# A first install of the demo extra into an empty venv: 1-2 minutes with pip's cache; bounded well above that.
READY_TIMEOUT_S = 900.0
FLIP_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 60.0
COMMAND_TIMEOUT_S = 60.0
# The jar line mints a new session when its jar is empty; a session on the flip's source is needed (blue: 95%).
MINT_ATTEMPTS = 20


class Failed(Exception):
    pass


def say(text: str) -> None:
    print(f"ci-demo: {text}", flush=True)


def user_env(environ: Mapping[str, str]) -> dict[str, str]:
    """A new user's shell: no venv active, no venv's bin on PATH (so a bare `trafficsplit` in the README fails as
    it would for them), the project's venv at its default place (the clone's .venv)."""
    drop = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    env = {k: v for k, v in environ.items() if k not in drop and not k.startswith("TRAFFICSPLIT_")}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p and not (Path(p) / "activate").is_file()
    )
    return env


def drop_requirement(pyproject: Path, name: str) -> None:
    """NAME's entries removed from every extra (a test of the check: the demo must then fail)."""
    text = pyproject.read_text(encoding="utf-8")
    entry = rf'"{re.escape(name)}(?:[<>=!~\[; ][^"]*)?"'
    text, n = re.subn(rf"\s*{entry},[ \t]*(#[^\n]*)?(?=\n)|,\s*{entry}", "", text)
    extras = tomllib.loads(text)["project"]["optional-dependencies"]
    left = [r for reqs in extras.values() for r in reqs if re.match(rf"{re.escape(name)}\b", r)]
    if n == 0 or left:
        raise Failed(f"--drop {name}: removed {n} entries, left {left}")
    pyproject.write_text(text, encoding="utf-8")
    say(f"--drop {name}: removed {n} entr{'y' if n == 1 else 'ies'} from the clone's pyproject.toml")


class Demo:
    """`make demo` in the clone, its own process group; every output line echoed with its time since the start."""

    def __init__(self, clone: Path, env: Mapping[str, str]) -> None:
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            ["make", "demo"],
            cwd=clone,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[tuple[float, str]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, prefix: str, timeout: float) -> float:
        """Seconds since `make demo` started when a line starting with `prefix` appeared."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if line is None:
                self.proc.wait()
                raise Failed(f"`make demo` exited ({self.proc.returncode}) before printing {prefix!r}")
            at = time.monotonic() - self.t0
            self.seen.append((at, line))
            print(f"  [{at:6.1f}s] {line}", flush=True)
            if line.strip().startswith(prefix):
                return at
        raise Failed(f"no line starting {prefix!r} within {timeout:.0f} s")

    def line(self, prefix: str) -> str:
        return next(line.strip() for _, line in self.seen if line.strip().startswith(prefix))

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def sh(command: str, clone: Path, env: Mapping[str, str]) -> Ran:
    """One README line verbatim, in bash from the clone's root."""
    p = subprocess.run(
        ["bash", "-c", command], cwd=clone, env=dict(env), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S
    )
    return Ran(command, p.returncode, p.stdout, p.stderr)


def response(ran: Ran) -> tuple[int, dict[str, str]]:
    """Status and headers (lower-cased) of a `curl -i` line."""
    if ran.returncode != 0:
        raise Failed(str(ran))
    head = ran.stdout.replace("\r\n", "\n").split("\n\n", 1)[0].splitlines()
    status = int(head[0].split()[1])
    headers = {}
    for h in head[1:]:
        k, _, v = h.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def run(clone: Path) -> dict[str, float]:
    env = user_env(os.environ)
    lines = readme_demo_lines(clone / "README.md")
    curls = [c for c in lines if c.startswith("curl ")]
    jar_line = next(c for c in curls if " -c " in c and " -b " in c)
    plan_line = next(c for c in lines if not c.startswith(("curl ", "#")))
    flip = demo_flip(lines)
    example = clone / flip.file
    split = next(d for d in yaml.safe_load_all(example.read_text()) if d and d.get("kind") == "TrafficSplit")
    ports = sorted(
        {int(p) for c in curls for p in re.findall(r"127\.0\.0\.1:(\d+)", c)}
        | {int(ep.rpartition(":")[2]) for b in split["spec"]["backends"] for ep in b.get("endpoints") or []}
    )
    busy = [p for p in ports if not port_free("127.0.0.1", p)]
    if busy:
        raise Failed(f"the README's ports {busy} are taken (another demo running here?): the lines cannot run verbatim")
    jar = Path(next(w for w in jar_line.split() if w.startswith("/")))

    demo = Demo(clone, env)
    try:
        ready = demo.wait_for("trafficsplit demo: ready", READY_TIMEOUT_S)
        starting = next(at for at, line in demo.seen if line.startswith("trafficsplit demo: starting"))
        demo.wait_for("stop:", 10)
        cli = demo.line("cli:")
        if ".venv/bin/trafficsplit" not in cli:
            raise Failed(f"the ready block does not say where the CLI is: {cli!r}")

        status, headers = response(sh(curls[0], clone, env))
        cookie = split["spec"]["sticky"]["cookie"]["name"]
        if status != 200 or "x-backend" not in headers or not headers.get("set-cookie", "").startswith(cookie + "="):
            raise Failed(f"{curls[0]}: {status} {headers}")
        say(f"curl: {status}, x-backend {headers['x-backend']}, set-cookie {headers['set-cookie']}")

        backend = None
        for _ in range(MINT_ATTEMPTS):  # a new session (empty jar) until one is on the side the flip moves
            jar.unlink(missing_ok=True)
            backend = response(sh(jar_line, clone, env))[1].get("x-backend")
            if backend == flip.source:
                break
        if backend != flip.source:
            raise Failed(f"no session on {flip.source} in {MINT_ATTEMPTS} new sessions")
        again = [response(sh(jar_line, clone, env))[1].get("x-backend") for _ in range(5)]
        if set(again) != {flip.source}:
            raise Failed(f"the jar's session moved without a change: {backend}, then {again}")
        say(f"jar: a session on {flip.source}, the same backend 5 times more")

        docs = list(yaml.safe_load_all(example.read_text()))
        target = next(d for d in docs if d and d.get("kind") == "TrafficSplit")
        for b in target["spec"]["backends"]:
            b["weight"] = flip.weights.get(b["name"], b["weight"])
        example.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        saved = time.monotonic()
        deadline = saved + FLIP_TIMEOUT_S
        while (now_on := response(sh(jar_line, clone, env))[1].get("x-backend")) != flip.lands_on:
            if time.monotonic() > deadline:
                raise Failed(f"after the flip edit the session is on {now_on}, not {flip.lands_on}")
            time.sleep(0.1)
        flip_s = time.monotonic() - saved
        say(f"flip: {flip.file} {flip.weights} saved; the same session on {flip.lands_on} {flip_s:.1f} s later")

        planned = sh(plan_line, clone, env)
        if planned.returncode != 0 or not planned.stdout.strip():
            raise Failed(f"the README's plan line failed:\n{planned}")
        say(f"plan line: exit 0, {planned.stdout.strip().splitlines()[0]!r}")

        pids = [int(v) for v in re.findall(r"=(\d+)", demo.line("pids:"))]
        interrupted = time.monotonic()
        os.killpg(demo.proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the foreground process group
        demo.wait_for("trafficsplit demo: stopped", STOP_TIMEOUT_S)
        demo.proc.wait(STOP_TIMEOUT_S)
        stop_s = time.monotonic() - interrupted
        # make itself gets the SIGINT too, waits for the demo, and dies of it (GNU make re-raises), as in a terminal.
        if demo.proc.returncode not in (0, -signal.SIGINT):
            raise Failed(f"`make demo` exited {demo.proc.returncode} on Ctrl-C")
        left = [p for p in pids if alive(p)]
        taken = [p for p in ports if not port_free("127.0.0.1", p)]
        if left or taken:
            raise Failed(f"after Ctrl-C: still running {left}, ports still bound {taken}")
        errors = [line for _, line in demo.seen if "demo: error" in line or "Traceback" in line]
        if errors:
            raise Failed(f"errors in the demo's output: {errors}")
        jar.unlink(missing_ok=True)
        return {"ready": ready, "demo_start_to_ready": ready - starting, "flip_seen": flip_s, "stop": stop_s}
    finally:
        if demo.proc.poll() is None:
            demo.kill()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hack/ci-demo.sh", description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--drop", metavar="NAME", help="remove NAME from every extra of the clone (the check must fail)")
    ap.add_argument("--keep", action="store_true", help="keep the temp clone")
    args = ap.parse_args(argv)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, check=True, capture_output=True, text=True)
    sha = commit.stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    if dirty.strip():
        say("note: the working tree has uncommitted changes; the clone is of the commit only")
    tmp = Path(tempfile.mkdtemp(prefix="trafficsplit-ci-demo-"))
    t0 = time.monotonic()
    try:
        clone = tmp / "trafficsplit"
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "-q", "--detach", sha], check=True)
        say(f"cloned {sha[:12]} into {clone} in {time.monotonic() - t0:.1f} s; `make demo` with an empty .venv")
        if args.drop:
            drop_requirement(clone / "pyproject.toml", args.drop)
        t = run(clone)
    except (Failed, subprocess.CalledProcessError, subprocess.TimeoutExpired, ValueError, StopIteration) as exc:
        say(f"FAILED: {exc or type(exc).__name__}")
        return 1
    finally:
        if args.keep:
            say(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    say(
        f"ok: ready {t['ready']:.1f} s after `make demo` (install included; the demo itself "
        f"{t['demo_start_to_ready']:.1f} s), flip seen {t['flip_seen']:.1f} s after the save, stopped "
        f"{t['stop']:.1f} s after Ctrl-C; {time.monotonic() - t0:.0f} s in all"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
