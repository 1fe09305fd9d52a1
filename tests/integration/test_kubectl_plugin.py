"""The kubectl plugin as a user runs it: `kubectl trafficsplit …` against the real API server.

kubectl finds `kubectl-trafficsplit` on PATH (the console script `pip install -e .` puts next to the interpreter), so
these tests exercise kubectl's plugin lookup, the kubeconfig resolution from $KUBECONFIG, server-side apply with its
field manager and conflicts, dryRun=All, and the server's schema/CEL rejections naming the field. There is no
operator here: the status tests write /status themselves, the way the operator shapes it. The HTTPRoute tests add the
Gateway API CRDs: set-weights and flip patch a rule's weights (a JSON patch testing the resourceVersion), status reads
the route's parents and the parent Gateway's Programmed.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.controlplane import ControlPlane
from tests.support.operator import (
    PYTHONPATH,
    apply,
    get_ts,
    install_gateway_api_crds,
    install_policy_crd,
    ts_manifest,
)
from tests.support.waiting import poll
from trafficsplit.cli.kube import Ref

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


# --- HTTPRoutes ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gateway_crds(trafficsplit_crd: ControlPlane) -> ControlPlane:
    """The session's control plane with the Gateway API and TrafficSplitPolicy CRDs too (other modules install them
    into it as well; server-side apply makes a second install a no-op)."""
    install_gateway_api_crds(trafficsplit_crd)
    install_policy_crd(trafficsplit_crd)

    # Established is not served yet: a list right after it can answer "storage is (re)initializing".
    def served(resource: str) -> bool:
        return trafficsplit_crd.kubectl("get", resource, "-A", check=False).returncode == 0

    for resource in ("trafficsplitpolicies", "httproutes", "gateways"):
        poll(functools.partial(served, resource), timeout=30, what=f"{resource} served")
    return trafficsplit_crd


def route_manifest(namespace: str, blue: int = 100, green: int = 0) -> str:
    gateway = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": namespace},
        "spec": {"gatewayClassName": "trafficsplit", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
    }
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "shop", "namespace": namespace},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "rules": [
                {"matches": [{"path": {"type": "PathPrefix", "value": "/static"}}],
                 "backendRefs": [{"name": "cdn", "port": 80}]},
                {"name": "cart", "backendRefs": [{"name": "blue", "port": 80, "weight": blue},
                                                 {"name": "green", "port": 80, "weight": green}]},
            ],
        },
    }  # fmt: skip
    return yaml.safe_dump_all([gateway, route])


def route_weights(kube: ControlPlane, namespace: str, rule: int = 1) -> list[tuple[str, int]]:
    obj = json.loads(kube.kubectl("get", "httproute", "shop", "-n", namespace, "-o", "json").stdout)
    return [(b["name"], b.get("weight", 1)) for b in obj["spec"]["rules"][rule]["backendRefs"]]


def test_set_weights_and_flip_patch_an_httproute_rule(
    gateway_crds: ControlPlane, namespace: str, plugin: Plugin
) -> None:
    apply(gateway_crds, route_manifest(namespace))
    before = json.loads(gateway_crds.kubectl("get", "httproute", "shop", "-n", namespace, "-o", "json").stdout)

    # --rule defaults to the only weighted rule; a dry run is judged by the server and stores nothing.
    out = plugin("set-weights", "httproute/shop", "-n", namespace, "--set", "blue=90,green=10", "--dry-run").stdout
    assert out.startswith(f"httproute {namespace}/shop rule 1\nfrom blue=100,green=0 (total 100) to blue=90,green=10")
    assert "dry run: the API server accepted the change" in out
    assert "spec.rules[1].backendRefs[name=green].weight: 0 -> 10" in out
    assert route_weights(gateway_crds, namespace) == [("blue", 100), ("green", 0)]

    proc = plugin("set-weights", "httproute/shop", "-n", namespace, "--set", "blue=90,green=10", check=2)
    assert "pass --yes" in proc.stderr  # no terminal, no --yes: nothing sent

    out = plugin("set-weights", "httproute/shop", "-n", namespace, "--rule", "cart", "--set", "green=10,blue=90",
                 "--yes").stdout  # fmt: skip
    assert "moves 10.00% of sessions" in out and "applied (field manager kubectl-trafficsplit" in out
    assert route_weights(gateway_crds, namespace) == [("blue", 90), ("green", 10)]
    after = json.loads(
        gateway_crds.kubectl("get", "httproute", "shop", "-n", namespace, "-o", "json", "--show-managed-fields").stdout
    )
    # Only the weights changed, and the patch is recorded under the plugin's field manager.
    assert after["spec"]["rules"][0] == before["spec"]["rules"][0]
    assert after["spec"]["parentRefs"] == before["spec"]["parentRefs"]
    assert "kubectl-trafficsplit" in {m["manager"] for m in after["metadata"]["managedFields"]}

    # The server's bounds: the CLI refuses a weight over the CRD's maximum before sending it.
    proc = plugin("set-weights", "httproute/shop", "-n", namespace, "--set", "green=1000001", "--yes", check=2)
    assert "--set: green: weight must be 0..1000000, got 1000001" in proc.stderr

    # flip needs one side at 0: 90/10 is refused; back to 100/0 it swaps.
    proc = plugin("flip", "httproute/shop", "-n", namespace, check=2)
    assert "flip needs exactly two backends with one at weight 0; it has blue=90,green=10" in proc.stderr
    plugin("set-weights", "httproute/shop", "-n", namespace, "--set", "blue=100,green=0", "--yes")
    out = plugin("flip", "httproute/shop", "-n", namespace, "--rule", "1").stdout
    assert "blue -> green: 100.00%" in out and "spec.rules[1].backendRefs[name=green].weight: 0 -> 100" in out
    assert route_weights(gateway_crds, namespace) == [("blue", 0), ("green", 100)]
    assert route_weights(gateway_crds, namespace, rule=0) == [("cdn", 1)]  # the other rule untouched, no weight added

    proc = plugin("set-weights", "httproute/nope", "-n", namespace, "--set", "a=1", "--yes", check=1)
    assert proc.stderr == f"kubectl trafficsplit set-weights: error: httproute {namespace}/nope not found\n"


def test_a_route_patch_is_conditional_on_the_version_it_planned_from(
    gateway_crds: ControlPlane, namespace: str
) -> None:
    import argparse

    from trafficsplit.cli.kube import Cluster, KubeError
    from trafficsplit.cli.routes import choose_rule, parse_route, rule_change, weight_patch

    apply(gateway_crds, route_manifest(namespace, 95, 5))
    args = argparse.Namespace(kubeconfig=str(gateway_crds.kubeconfig), context=None, namespace=namespace)
    cluster = Cluster.connect(args)
    try:
        old = cluster.get_httproute("shop")
        ref = Ref(namespace, "shop", "httproute")
        route = parse_route(ref, old)
        change = rule_change(ref, route, choose_rule(ref, route, None), [("blue", 50), ("green", 50)])
        gateway_crds.kubectl(
            "patch", "httproute", "shop", "-n", namespace, "--type=json",
            "-p", '[{"op": "replace", "path": "/spec/rules/1/backendRefs/1/weight", "value": 7}]',
        )  # fmt: skip
        with pytest.raises(KubeError, match=r"it changed after it was read .*; run the command again"):
            cluster.patch_httproute("shop", weight_patch(old, change), dry_run=False)
        assert route_weights(gateway_crds, namespace) == [("blue", 95), ("green", 7)]
    finally:
        cluster.api.close()


def test_status_of_an_httproute(gateway_crds: ControlPlane, namespace: str, plugin: Plugin) -> None:
    apply(gateway_crds, route_manifest(namespace, 90, 10))
    out = plugin("status", "httproute/shop", "-n", namespace).stdout
    assert "- (no status for this parent: no controller has taken it yet)" in out
    # The Gateway CRD defaults its status: Programmed Unknown (Pending) until a controller writes it.
    pending = next(line for line in out.splitlines() if line.split()[:2] == ["gateway", "Programmed"])
    assert pending.split()[2:4] == ["Unknown", "Pending"]

    route = json.loads(gateway_crds.kubectl("get", "httproute", "shop", "-n", namespace, "-o", "json").stdout)
    generation = route["metadata"]["generation"]
    t = "2026-12-01T00:00:00Z"

    def cond(type_: str, gen: int, message: str) -> dict[str, Any]:
        return {"type": type_, "status": "True", "reason": type_, "message": message, "observedGeneration": gen,
                "lastTransitionTime": t}  # fmt: skip

    parents = [
        {
            "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"},
            "controllerName": "trafficsplit.dev/gateway-controller",
            "conditions": [cond("Accepted", generation, "accepted"), cond("ResolvedRefs", generation, "resolved")],
        }
    ]
    gateway_crds.kubectl(
        "patch", "httproute", "shop", "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"parents": parents}}),
    )  # fmt: skip
    gw = json.loads(gateway_crds.kubectl("get", "gateway", "gw", "-n", namespace, "-o", "json").stdout)
    gw_status = {"conditions": [cond("Accepted", gw["metadata"]["generation"], "ok"),
                                cond("Programmed", gw["metadata"]["generation"], "2/2 replicas")]}  # fmt: skip
    gateway_crds.kubectl(
        "patch", "gateway", "gw", "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": gw_status}),
    )  # fmt: skip

    lines = plugin("status", "httproute/shop", "-n", namespace).stdout.splitlines()
    assert lines[0] == f"httproute {namespace}/shop"
    assert "  gateway gw (status by trafficsplit.dev/gateway-controller)" in lines
    accepted = next(line for line in lines if line.split()[:2] == ["route", "Accepted"])
    assert accepted.split()[:5] == ["route", "Accepted", "True", "Accepted", str(generation)]
    programmed = next(line for line in lines if line.split()[:2] == ["gateway", "Programmed"])
    assert programmed.endswith("2/2 replicas")
    assert next(line for line in lines if line.split()[:1] == ["green"]).split() == ["green", "green", "80", "10",
                                                                                     "10.00%"]  # fmt: skip

    # The route changes: its conditions are stale until the controller reports on the new generation.
    plugin("set-weights", "httproute/shop", "-n", namespace, "--set", "green=20,blue=80", "--yes")
    doc = json.loads(plugin("status", "httproute/shop", "-n", namespace, "--json").stdout)
    assert doc["generation"] == generation + 1
    (parent,) = doc["parents"]
    assert all(c["stale"] for c in parent["controllers"][0]["conditions"])
    assert parent["gateway"]["programmed"]["stale"] is False
    assert [(b["name"], b["weight"]) for b in doc["rules"][1]["backends"]] == [("blue", 80), ("green", 20)]

    proc = plugin("status", "httproute/nope", "-n", namespace, check=1)
    assert proc.stderr == f"kubectl trafficsplit status: error: httproute {namespace}/nope not found\n"


def test_plan_from_a_file_needs_no_cluster(tmp_path: Path, plugin: Plugin, namespace: str) -> None:
    path = tmp_path / "route.yaml"
    path.write_text(route_manifest(namespace, 95, 5))
    out = plugin("plan", "-f", str(path), "--set", "blue=90,green=10", "--kubeconfig", "/nonexistent").stdout
    assert out.startswith(f"httproute {namespace}/shop rule 1\nfrom blue=95,green=5 (total 100) to blue=90,green=10")
