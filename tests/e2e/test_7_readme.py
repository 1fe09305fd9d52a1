"""A new user's first hour on a cluster, as written: the README's "On a cluster" block, then the commands the chart's
NOTES.txt prints after that `helm install`, run verbatim in a shell against a real node, so neither can drift from
what works again (tests/unit/test_doc_commands.py checks the same commands against the examples without a cluster).

The only additions are the ones this machine needs and a user's cluster does not: the chart's image overrides on the
`helm install` line (cluster.image_values()), and after each `kubectl apply -f examples/kubernetes/` the sample
backends' image swapped for the echo image (the examples name hashicorp/http-echo, which no registry here serves).
`set-weights` asks before it applies; it runs on a pseudo-terminal and is answered "y", as a user would.

Runs after test_6 (which uninstalls the session's release), or alone; any release of the same name is removed first.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.e2e.cluster import REPO_ROOT, Cluster
from tests.support.doccommands import (
    Ran,
    example_deployments,
    notes_commands,
    readme_cluster_commands,
    run_line,
    user_env,
    words,
)

pytestmark = [pytest.mark.e2e]

EXAMPLES_APPLY = "kubectl apply -f examples/kubernetes/"
# Bounds on one command and on the whole NOTES script (its waits carry their own, shorter timeouts).
COMMAND_TIMEOUT_S = 420
NOTES_TIMEOUT_S = 900


def shell_env(cluster: Cluster) -> dict[str, str]:
    return user_env(cluster.env(), cluster.kubectl_bin, cluster.helm_bin)


def image_swap_commands(cluster: Cluster) -> list[str]:
    return [
        f"kubectl -n {ns} set image deployment/{name} {container}={cluster.echo_image()}"
        for ns, name, container in example_deployments()
    ]


def run(command: str, env: dict[str, str], answer: str | None = None) -> Ran:
    return run_line(command, env, COMMAND_TIMEOUT_S, answer)


def weights(cluster: Cluster, name: str) -> dict[str, int]:
    split = cluster.get("trafficsplit", name, "-n", cluster.namespace)
    return {b["name"]: b["weight"] for b in split["spec"]["backends"]}


@pytest.fixture(scope="module")
def fresh(cluster: Cluster) -> Iterator[Cluster]:
    """The cluster without a release of the README's name (test_6 uninstalls the session's; alone, there is none)."""
    ns = cluster.release_namespace
    if cluster.helm("status", cluster.release, "-n", ns, check=False).returncode == 0:
        cluster.helm("uninstall", cluster.release, "-n", ns, "--wait", "--timeout", "3m")
    yield cluster


@pytest.fixture(scope="module")
def readme_run(fresh: Cluster) -> list[Ran]:
    cluster = fresh
    env = shell_env(cluster)
    commands = readme_cluster_commands()
    assert commands, "the README's 'On a cluster' block has no commands"
    ran: list[Ran] = []
    for command in commands:
        argv = words(command)
        verb = argv[2] if argv[:2] == ["kubectl", "trafficsplit"] else None
        actual = command
        if argv[:2] == ["helm", "install"]:
            # The only change to a README line: where this cluster's images are.
            actual = shlex.join([*argv, *cluster.image_values(), *cluster.extra_values])
        before = weights(cluster, argv[3]) if verb == "flip" else None
        t0 = time.monotonic()
        result = run(actual, env, answer="y\n" if verb == "set-weights" else None)
        print(f"\n$ {command}   ({time.monotonic() - t0:.1f}s, exit {result.returncode})\n{result.stdout[-1500:]}")
        assert result.returncode == 0, str(result)
        ran.append(Ran(command, result.returncode, result.stdout, result.stderr))
        if command == EXAMPLES_APPLY:
            for swap in image_swap_commands(cluster):
                assert (r := run(swap, env)).returncode == 0, str(r)
        if before is not None:
            # flip swaps the two weights, whichever side held them.
            after = weights(cluster, argv[3])
            assert list(after.values()) == list(reversed(list(before.values()))), (before, after)
    return ran


def test_readme_cluster_block_runs_as_written(readme_run: list[Ran], fresh: Cluster) -> None:
    cluster = fresh
    by_verb = {words(r.command)[2]: r for r in readme_run if words(r.command)[:2] == ["kubectl", "trafficsplit"]}
    assert {"plan", "set-weights", "flip", "status"} <= set(by_verb), [r.command for r in readme_run]
    plan = by_verb["plan"].stdout
    assert "blue" in plan and "canary" in plan, plan
    # set-weights printed its plan, was answered y, and the API server holds the new weights.
    assert "applied" in by_verb["set-weights"].stdout, str(by_verb["set-weights"])
    set_argv = words(by_verb["set-weights"].command)
    assignments = next(a for a in set_argv[4:] if "=" in a and not a.startswith("-"))
    wanted = dict(pair.split("=") for pair in assignments.split(","))
    live = weights(cluster, set_argv[3])
    assert {k: live[k] for k in wanted} == {k: int(v) for k, v in wanted.items()}, live
    assert sum(live.values()) == 100, live
    assert set_argv[3] in by_verb["status"].stdout, str(by_verb["status"])
    helm = next(r for r in readme_run if r.command.startswith("helm install"))
    assert "NOTES:" in helm.stdout, helm.stdout


def test_notes_commands_run_as_written(readme_run: list[Ran], fresh: Cluster) -> None:
    """NOTES.txt as the README's `helm install` printed it: every command line, in order, in one shell (the
    port-forward runs in the background while curl uses it), stopping at the first failure."""
    cluster = fresh
    helm = next(r for r in readme_run if r.command.startswith("helm install"))
    notes = helm.stdout.split("NOTES:", 1)[1]
    commands = notes_commands(notes)
    assert len(commands) >= 7, notes
    lines = ["set -euo pipefail", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"]
    for command in commands:
        lines += [f"echo {shlex.quote('$ ' + command)}", command]
        if command == EXAMPLES_APPLY:
            lines += image_swap_commands(cluster)
    t0 = time.monotonic()
    proc = subprocess.run(
        ["bash", "-c", "\n".join(lines)],
        capture_output=True,
        text=True,
        env=shell_env(cluster),
        cwd=REPO_ROOT,
        timeout=NOTES_TIMEOUT_S,
    )
    print(f"\nNOTES commands ({time.monotonic() - t0:.1f}s, exit {proc.returncode}):\n{proc.stdout[-4000:]}")
    assert proc.returncode == 0, proc.stdout[-4000:] + "\n" + proc.stderr[-4000:]
    # Every command ran (the script echoes each before running it).
    assert proc.stdout.count("\n$ ") + proc.stdout.startswith("$ ") == len(commands), proc.stdout
    # The curl through the gateway answered from a backend and set the affinity cookie.
    assert re.search(r"^HTTP/1\.1 200", proc.stdout, flags=re.MULTILINE), proc.stdout
    assert re.search(r"^set-cookie: shop-affinity=", proc.stdout, flags=re.MULTILINE | re.IGNORECASE), proc.stdout
    # The ramp and the flip reached the API server.
    assert weights(cluster, "shop") == {"blue": 90, "green": 0, "canary": 10}
    assert weights(cluster, "shop-bluegreen") == {"blue": 0, "green": 100}
