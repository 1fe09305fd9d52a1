"""The demo's child processes: started in their own process groups, stopped in reverse order, nothing left behind.

Why process groups: Ctrl-C in a terminal signals the whole foreground group at once, so children sharing it would
all stop at the same moment, in no order, and a child's own children could outlive it. Each child here leads its own
session, so only the demo receives the terminal's signals and stops its children deliberately: newest first (the
operator before the dataplane it publishes to, Envoy before its processor), SIGTERM to the whole group, a grace
period, then SIGKILL for whatever is left of the group, then `wait` so no zombie remains. On Linux each child also
asks the kernel for SIGTERM if the demo itself dies without cleaning up (PR_SET_PDEATHSIG), e.g. on SIGKILL.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PR_SET_PDEATHSIG = 1


@dataclass(frozen=True, slots=True)
class ChildSpec:
    name: str
    argv: Sequence[str]
    log: Path
    env: Mapping[str, str] | None = None


@dataclass
class Child:
    spec: ChildSpec
    proc: subprocess.Popen[bytes]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, n: int = 15) -> str:
        try:
            lines = self.spec.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def parse_stat(text: str) -> tuple[str, int, int]:
    """(state, ppid, pgrp) from a /proc/<pid>/stat line; the command name may hold spaces and parentheses."""
    rest = text[text.rindex(")") + 2 :].split()
    return rest[0], int(rest[1]), int(rest[2])


def group_alive(pgid: int) -> bool:
    """True while a live (non-zombie) process is in group `pgid`. /proc when there is one, because a killed orphan
    stays a zombie until init reaps it and signal 0 cannot tell a zombie from a runner; else kill(-pgid, 0)."""
    proc = Path("/proc")
    if (proc / "self" / "stat").exists():
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                state, _, pgrp = parse_stat((entry / "stat").read_text())
            except (OSError, ValueError, IndexError):  # exited while we looked
                continue
            if pgrp == pgid and state != "Z":
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a group we cannot signal is not ours, but it exists
        return True
    return True


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@dataclass
class Supervisor:
    """Owns the children in start order. Not thread-safe; the demo drives it from its main thread."""

    children: list[Child] = field(default_factory=list)

    def start(self, spec: ChildSpec) -> Child:
        with spec.log.open("ab") as log:
            proc = subprocess.Popen(
                list(spec.argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(spec.env) if spec.env is not None else None,
                start_new_session=True,  # its own session and process group (pgid == pid)
                preexec_fn=_die_with_parent,  # fork-safe here: the demo starts children from its only thread
            )
        child = Child(spec, proc)
        self.children.append(child)
        return child

    def pids(self) -> dict[str, int]:
        return {c.name: c.pid for c in self.children}

    def first_exited(self) -> Child | None:
        return next((c for c in self.children if c.proc.poll() is not None), None)

    def stop(self, grace: float = 5.0, hurry: Callable[[], bool] = lambda: False) -> list[str]:
        """Stop every child, newest first; returns a note for each that had to be killed. `hurry()` turning true
        (a second Ctrl-C) ends the grace period early."""
        notes: list[str] = []
        for child in reversed(self.children):
            pgid = child.pid
            _signal_group(pgid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and not hurry():
                if child.proc.poll() is not None and not group_alive(pgid):
                    break
                time.sleep(0.02)
            if child.proc.poll() is None or group_alive(pgid):
                notes.append(f"{child.name} (pid {pgid}) did not stop within {grace:g}s: killed")
                _signal_group(pgid, signal.SIGKILL)
            child.proc.wait()  # reap: no zombie outlives the demo
            deadline = time.monotonic() + grace
            while group_alive(pgid) and time.monotonic() < deadline:  # members of the group other than the leader
                _signal_group(pgid, signal.SIGKILL)
                time.sleep(0.02)
        self.children.clear()
        return notes
