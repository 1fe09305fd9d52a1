"""The kubectl plugin as a user runs it: `kubectl trafficsplit …` against the real API server.

kubectl finds `kubectl-trafficsplit` on PATH (the console script `pip install -e .` puts next to the interpreter), so
these tests exercise kubectl's plugin lookup, the kubeconfig resolution from $KUBECONFIG, server-side apply with its
field manager and conflicts, dryRun=All, and the server's schema/CEL rejections naming the field. There is no
operator here: the status test writes /status itself, the way the operator's status.py shapes it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane
from tests.support.operator import PYTHONPATH, apply, get_ts, ts_manifest

pytestmark = [pytest.mark.k8s]

Plugin = Callable[..., subprocess.CompletedProcess[str]]


def canary_spec(stable: int = 95, canary: int = 5) -> dict[str, Any]:
    return {
        "hosts": ["shop.example"],
        "backends": [
            {"name": "stable", "service": "shop-v1", "port": 8080, "weight": stable},
            {"name": "canary", "service": "shop-v2", "weight": canary},  # port defaulted by the server
        ],
        "sticky": {"cookie": {"name": "ts-shop"}},
    }


def blue_green_spec(blue: int, green: int) -> dict[str, Any]:
    return {
        "service": "web",
        "backends": [
            {"name": "blue", "service": "web-blue", "weight": blue},
            {"name": "green", "service": "web-green", "weight": green},
        ],
    }


def plugin_dir(tmp_path: Path) -> Path:
    """The directory holding `kubectl-trafficsplit`: the real console script when installed (beside this interpreter
    or on PATH), else a shim that runs the same entry point from the source tree."""
    beside = Path(sys.executable).parent / "kubectl-trafficsplit"
    if beside.exists():
        return beside.parent
    found = shutil.which("kubectl-trafficsplit")
    if found:
        return Path(found).parent
    shim = tmp_path / "bin" / "kubectl-trafficsplit"
    shim.parent.mkdir()
    # Named as kubectl runs it, so the CLI calls itself `kubectl trafficsplit` as the installed script does.
    run = "import sys; sys.argv[0] = 'kubectl-trafficsplit'; from trafficsplit.cli.main import main; sys.exit(main())"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{PYTHONPATH}" exec "{sys.executable}" -c "{run}" "$@"\n')
    shim.chmod(0o755)
    return shim.parent


@pytest.fixture
def plugin(trafficsplit_crd: ControlPlane, tmp_path: Path) -> Plugin:
    """Run `kubectl trafficsplit ARGS` with the control plane's kubeconfig in $KUBECONFIG and the plugin on PATH,
    stdin not a terminal (as in a script)."""
    env = {
        **trafficsplit_crd.env(),
        "PATH": f"{plugin_dir(tmp_path)}{os.pathsep}{os.environ.get('PATH', '')}",
        # The source roots first: an editable install maps only the subpackages that existed when it ran.
        "PYTHONPATH": PYTHONPATH,
    }

    def run(*args: str, check: int | None = 0) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(trafficsplit_crd.kubectl_bin), "trafficsplit", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        if check is not None:
            assert proc.returncode == check, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        return proc

    return run


def weights(kube: ControlPlane, namespace: str, name: str) -> list[tuple[str, int]]:
    return [(b["name"], b["weight"]) for b in get_ts(kube, namespace, name)["spec"]["backends"]]


def managers(kube: ControlPlane, namespace: str, name: str) -> dict[str, list[str]]:
    """manager → the top-level spec fields it owns (kubectl hides managedFields unless asked)."""
    obj = json.loads(kube.kubectl("get", "ts", name, "-n", namespace, "-o", "json", "--show-managed-fields").stdout)
    return {
        f"{m['manager']}/{m['operation']}": sorted((m.get("fieldsV1") or {}).get("f:spec", {}))
        for m in obj["metadata"].get("managedFields") or []
    }


def test_plan_reads_the_live_weights(trafficsplit_crd: ControlPlane, namespace: str, plugin: Plugin) -> None:
    apply(trafficsplit_crd, ts_manifest(namespace, "shop", canary_spec()))

    # Only canary named: stable keeps 95, so the total changes to 105 and sessions move both ways (docs/spec.md §2).
    out = plugin("plan", "shop", "-n", namespace, "--set", "canary=10").stdout
    assert out.splitlines()[0] == f"trafficsplit {namespace}/shop"
    assert "from stable=95,canary=5 (total 100) to stable=95,canary=10 (total 105)" in out
    assert "moves 13.57% of sessions" in out
    assert "warning: the total changes (100 -> 105)" in out
    assert "--set stable=90,canary=10 (moves 5.00%" in out

    # Re-balanced: exactly the 5% that changes owner, no warning.
    out = plugin("plan", "shop", "-n", namespace, "--set", "canary=10,stable=90").stdout
    assert "moves 5.00% of sessions" in out and "stable -> canary: 5.00%" in out and "warning" not in out

    doc = json.loads(plugin("plan", "shop", "-n", namespace, "--set", "canary=10", "--json").stdout)
    assert doc["trafficsplit"] == {"namespace": namespace, "name": "shop"}
    assert doc["from"] == "stable=95,canary=5" and doc["moved_fraction"] == "19/140" and doc["total_changed"]

    assert weights(trafficsplit_crd, namespace, "shop") == [("stable", 95), ("canary", 5)]  # plan writes nothing


def test_plan_errors_name_the_resource(trafficsplit_crd: ControlPlane, namespace: str, plugin: Plugin) -> None:
    apply(trafficsplit_crd, ts_manifest(namespace, "shop", canary_spec()))
    proc = plugin("plan", "shop", "-n", namespace, "--set", "canry=10", check=2)
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1
    assert f"trafficsplit {namespace}/shop has no backend 'canry'" in proc.stderr
    assert "needs a service and port" in proc.stderr

    proc = plugin("plan", "nope", "-n", namespace, "--set", "canary=10", check=1)
    assert proc.stderr == f"kubectl trafficsplit plan: error: trafficsplit {namespace}/nope not found\n"

    proc = plugin("plan", "shop", "-n", namespace, "--set", "canary=ten", check=2)
    assert "--set: canary: weight 'ten' is not an integer" in proc.stderr


def test_set_weights_dry_run_conflict_then_apply(
    trafficsplit_crd: ControlPlane, namespace: str, plugin: Plugin
) -> None:
    apply(trafficsplit_crd, ts_manifest(namespace, "shop", canary_spec()))
    before = get_ts(trafficsplit_crd, namespace, "shop")

    # dryRun=All: the server runs the apply (and would reject it) but stores nothing.
    out = plugin("set-weights", "shop", "canary=10,stable=90", "-n", namespace, "--dry-run", "--force-conflicts").stdout
    assert "moves 5.00% of sessions" in out
    assert "dry run: the API server accepted the change; nothing was stored" in out
    assert "spec.backends[name=stable].weight: 95 -> 90" in out and "spec.backends[name=canary].weight: 5 -> 10" in out
    after_dry = get_ts(trafficsplit_crd, namespace, "shop")
    assert after_dry["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

    # A script without --yes is refused before anything is sent.
    proc = plugin("set-weights", "shop", "canary=10,stable=90", "-n", namespace, check=2)
    assert "pass --yes" in proc.stderr

    # `kubectl apply` (client-side) owns spec.backends: server-side apply reports the conflict, as kubectl would.
    proc = plugin("set-weights", "shop", "canary=10,stable=90", "-n", namespace, "--yes", check=1)
    assert "conflict" in proc.stderr.lower() and "kubectl-client-side-apply" in proc.stderr
    assert "--force-conflicts" in proc.stderr
    assert weights(trafficsplit_crd, namespace, "shop") == [("stable", 95), ("canary", 5)]

    out = plugin("set-weights", "shop", "canary=10,stable=90", "-n", namespace, "--yes", "--force-conflicts").stdout
    assert "applied (field manager kubectl-trafficsplit" in out
    obj = get_ts(trafficsplit_crd, namespace, "shop")
    assert [(b["name"], b["weight"]) for b in obj["spec"]["backends"]] == [("stable", 90), ("canary", 10)]
    # Only the weights changed: services, ports (the defaulted one too) and the rest of the spec are as they were.
    assert [(b["service"], b["port"]) for b in obj["spec"]["backends"]] == [("shop-v1", 8080), ("shop-v2", 80)]
    assert obj["spec"]["sticky"] == before["spec"]["sticky"] and obj["spec"]["hosts"] == ["shop.example"]
    assert managers(trafficsplit_crd, namespace, "shop")["kubectl-trafficsplit/Apply"] == ["f:backends"]

    # Now the plugin owns the list: the next change needs no force.
    plugin("set-weights", "shop", "canary=20,stable=80", "-n", namespace, "--yes")
    assert weights(trafficsplit_crd, namespace, "shop") == [("stable", 80), ("canary", 20)]
    out = plugin("set-weights", "shop", "canary=20", "-n", namespace, "--yes").stdout
    assert "nothing to change" in out


def test_set_weights_invalid_weight_is_rejected_by_the_server(
    trafficsplit_crd: ControlPlane, namespace: str, plugin: Plugin
) -> None:
    apply(trafficsplit_crd, ts_manifest(namespace, "shop", canary_spec()))
    for extra in (["--dry-run"], ["--yes"]):
        proc = plugin("set-weights", "shop", "canary=2000000", "-n", namespace, "--force-conflicts", *extra, check=1)
        assert len(proc.stderr.splitlines()) == 1, proc.stderr
        assert "spec.backends[1].weight" in proc.stderr and "less than or equal to 1000000" in proc.stderr
        assert "no plan:" in proc.stdout  # the core cannot plan it; the server had the last word
    # The CEL rule (not the schema) rejects a zero total, also on a dry run.
    proc = plugin(
        "set-weights", "shop", "canary=0,stable=0", "-n", namespace, "--dry-run", "--force-conflicts", check=1
    )
    assert "spec.backends" in proc.stderr and "the total weight must be > 0" in proc.stderr
    assert weights(trafficsplit_crd, namespace, "shop") == [("stable", 95), ("canary", 5)]


def test_flip_swaps_blue_green_and_refuses_a_canary(
    trafficsplit_crd: ControlPlane, namespace: str, plugin: Plugin
) -> None:
    apply(trafficsplit_crd, ts_manifest(namespace, "web", blue_green_spec(100, 0)))

    out = plugin("flip", "web", "-n", namespace, "--dry-run", "--force-conflicts").stdout
    assert "blue -> green: 100.00%" in out and "spec.backends[name=green].weight: 0 -> 100" in out
    assert weights(trafficsplit_crd, namespace, "web") == [("blue", 100), ("green", 0)]

    out = plugin("flip", "web", "-n", namespace, "--force-conflicts").stdout
    assert "moves 100.00% of sessions" in out and "warning" not in out  # the total is kept
    obj = get_ts(trafficsplit_crd, namespace, "web")
    assert [(b["name"], b["service"], b["weight"]) for b in obj["spec"]["backends"]] == [
        ("blue", "web-blue", 0),
        ("green", "web-green", 100),
    ]
    plugin("flip", "web", "-n", namespace)  # back; the plugin owns the list now
    assert weights(trafficsplit_crd, namespace, "web") == [("blue", 100), ("green", 0)]

    apply(trafficsplit_crd, ts_manifest(namespace, "shop", canary_spec()))
    proc = plugin("flip", "shop", "-n", namespace, check=2)
    assert proc.stderr == (
        f"kubectl trafficsplit flip: error: trafficsplit {namespace}/shop: flip needs exactly two backends with one at "
        "weight 0; it has stable=95,canary=5\n"
    )
    assert weights(trafficsplit_crd, namespace, "shop") == [("stable", 95), ("canary", 5)]


def test_apply_is_conditional_on_the_version_it_planned_from(trafficsplit_crd: ControlPlane, namespace: str) -> None:
    """A change between the read and the apply is refused (409), never overwritten by a plan of the old list."""
    import argparse

    from trafficsplit.cli.kube import Cluster, KubeError

    apply(trafficsplit_crd, ts_manifest(namespace, "shop", canary_spec()))
    args = argparse.Namespace(kubeconfig=str(trafficsplit_crd.kubeconfig), context=None, namespace=namespace)
    cluster = Cluster.connect(args)
    try:
        old = cluster.get("shop")
        trafficsplit_crd.kubectl(
            "patch",
            "ts",
            "shop",
            "-n",
            namespace,
            "--type=json",
            "-p",
            '[{"op": "replace", "path": "/spec/backends/1/weight", "value": 7}]',
        )
        stale = [{**b, "weight": 50} for b in old["spec"]["backends"]]
        with pytest.raises(KubeError, match="has been modified"):
            cluster.apply_backends(
                "shop", stale, resource_version=old["metadata"]["resourceVersion"], dry_run=False, force=True
            )
        assert weights(trafficsplit_crd, namespace, "shop") == [("stable", 95), ("canary", 7)]
    finally:
        cluster.api.close()


def operator_status(generation: int) -> dict[str, Any]:
    """A status as the operator writes it (trafficsplit.core.control.status.SplitStatus) after 95/5 → 90/10 was
    published."""
    t = "2026-11-30T12:00:00Z"
    return {
        "observedGeneration": generation,
        "weights": "stable=90,canary=10",
        "generation": 7,
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "Accepted",
                "message": "ok",
                "observedGeneration": generation,
                "lastTransitionTime": t,
            },
            {
                "type": "ResolvedRefs",
                "status": "True",
                "reason": "ResolvedRefs",
                "message": "2 backends resolved",
                "observedGeneration": generation,
                "lastTransitionTime": t,
            },
            {
                "type": "Published",
                "status": "True",
                "reason": "Published",
                "message": "2/2 dataplanes",
                "observedGeneration": generation,
                "lastTransitionTime": t,
            },
        ],
        "backends": [
            {
                "name": "stable",
                "service": "shop-v1",
                "port": 8080,
                "weight": 90,
                "share": "90.00%",
                "readyEndpoints": 3,
                "endpoints": 3,
            },
            {
                "name": "canary",
                "service": "shop-v2",
                "port": 80,
                "weight": 10,
                "share": "10.00%",
                "readyEndpoints": 1,
                "endpoints": 2,
            },
        ],
        "displacement": {
            "from": "stable=95,canary=5",
            "to": "stable=90,canary=10",
            "totalChanged": False,
            "repinnedShare": "5.00%",
        },
    }


def test_status_renders_what_the_operator_wrote(trafficsplit_crd: ControlPlane, namespace: str, plugin: Plugin) -> None:
    apply(trafficsplit_crd, ts_manifest(namespace, "shop", canary_spec(90, 10)))
    out = plugin("status", "shop", "-n", namespace).stdout
    assert "observedGeneration:    - (stale" in out and "served weights:        -" in out
    assert "(none written: is the operator running?)" in out

    generation = get_ts(trafficsplit_crd, namespace, "shop")["metadata"]["generation"]
    trafficsplit_crd.kubectl(
        "patch",
        "ts",
        "shop",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": operator_status(generation)}),
    )
    out = plugin("status", "shop", "-n", namespace).stdout
    lines = out.splitlines()
    assert f"observedGeneration:    {generation}" in lines
    assert "dataplane generation:  7" in out
    published = next(line for line in lines if line.split()[:3] == ["Published", "True", "Published"])
    assert published.split()[3] == str(generation) and published.endswith("2/2 dataplanes")
    canary = next(line for line in lines if line.split()[:1] == ["canary"])
    assert canary.split() == ["canary", "shop-v2", "80", "10", "10.00%", "1/2"]
    assert "stable=95,canary=5 -> stable=90,canary=10: 5.00% of sticky sessions re-pinned" in out

    # A spec change the operator has not seen: every condition is flagged stale.
    plugin("set-weights", "shop", "canary=20,stable=80", "-n", namespace, "--yes", "--force-conflicts")
    doc = json.loads(plugin("status", "shop", "-n", namespace, "--json").stdout)
    assert doc["generation"] == generation + 1 and doc["observedGeneration"] == generation and doc["stale"]
    assert all(c["stale"] for c in doc["conditions"])
    assert doc["weights"] == {"spec": "stable=80,canary=20", "served": "stable=90,canary=10"}
    assert doc["dataplaneGeneration"] == 7 and doc["displacement"]["repinnedShare"] == "5.00%"
    out = plugin("status", "shop", "-n", namespace).stdout
    assert f"{generation} (stale)" in out and "(differs from spec" in out

    proc = plugin("status", "nope", "-n", namespace, check=1)
    assert proc.stderr == f"kubectl trafficsplit status: error: trafficsplit {namespace}/nope not found\n"
