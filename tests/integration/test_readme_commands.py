"""The README's "On a cluster" block and the commands the chart's NOTES print, run as written against the real API
server, in every `make test`: what a user types reaches the API server and is accepted (the namespace, the split,
the backend names, who owns the weights). tests/e2e/test_7_readme.py runs the same on a node, with pods and traffic.

No kubelet here, so pods never run: the README's `helm install` runs without `--wait` (nothing would ever be ready),
and the NOTES lines that wait for pods or send traffic (rollout status, wait, port-forward, curl) are left to the
e2e tier. Everything else runs verbatim; `set-weights` is answered "y" on a pseudo-terminal, as a user would.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane
from tests.support.doccommands import Ran, notes_commands, readme_cluster_commands, run_line, user_env, words

pytestmark = pytest.mark.k8s

TIMEOUT_S = 120
# NOTES lines that need running pods or a path to them.
NEEDS_PODS = ("rollout status", " wait ", "port-forward", "curl ", "export ")


def weights(kube: ControlPlane, name: str) -> dict[str, int]:
    split = json.loads(kube.kubectl("get", "trafficsplit", name, "-n", "shop", "-o", "json").stdout)
    return {b["name"]: b["weight"] for b in split["spec"]["backends"]}


def test_readme_and_notes_commands_are_accepted_as_written(kube: ControlPlane, tmp_path: Path) -> None:
    env = user_env(kube.env(), kube.kubectl_bin, kube.helm_bin)
    ran: list[Ran] = []
    notes = ""
    for command in readme_cluster_commands():
        argv = words(command)
        line = command
        if argv[:2] == ["helm", "install"]:
            line = shlex.join([a for a in argv if a != "--wait"])
        answer = "y\n" if argv[:3] == ["kubectl", "trafficsplit", "set-weights"] else None
        before = weights(kube, argv[3]) if argv[:3] == ["kubectl", "trafficsplit", "flip"] else None
        result = run_line(line, env, TIMEOUT_S, answer)
        assert result.returncode == 0, str(result)
        ran.append(result)
        if argv[:2] == ["helm", "install"]:
            notes = result.stdout.split("NOTES:", 1)[1]
        if before is not None:
            after = weights(kube, argv[3])
            assert list(after.values()) == list(reversed(list(before.values()))), (before, after)
    assert weights(kube, "shop") == {"blue": 90, "green": 0, "canary": 10}

    commands = [c for c in notes_commands(notes) if not any(n in f" {c} " for n in NEEDS_PODS)]
    assert any(" patch trafficsplit " in c for c in commands), commands
    for command in commands:
        result = run_line(command, env, TIMEOUT_S)
        assert result.returncode == 0, str(result)
    assert weights(kube, "shop") == {"blue": 90, "green": 0, "canary": 10}
    assert weights(kube, "shop-bluegreen") == {"blue": 0, "green": 100}
