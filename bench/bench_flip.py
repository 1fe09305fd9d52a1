"""Blue-green flip latency: `kubectl patch` → every dataplane replica serving the new generation, for TrafficSplits
and (`--routes N`) for HTTPRoutes on one Gateway, side by side in one run.

Runs the real pieces on this machine: kube-apiserver + etcd (tests/support/controlplane.py), the operator process,
two dataplane units (extproc + Envoy), two backends in network namespaces with Services + EndpointSlices. Then it
flips a TrafficSplit 100/0 ↔ 0/100 N times (merge patch through the API, as kubectl does) and records, per flip:

  held     both replicas answer GetHeld with a number above the previous one (the operator's publish reached both);
  traffic  a request through each replica's Envoy lands on the new side;
  status   the TrafficSplit's Published condition is True for the new metadata.generation (what `kubectl wait` sees).

`--routes N` adds the Gateway API side: the upstream CRDs in the same API server, a GatewayClass of ours, a Gateway
(one HTTP listener on port 80) whose two replicas (extproc + Envoy with that listener) are found, as the provisioned
ones would be, through the EndpointSlices of its publish Service (made here: no provisioner, no controller-manager),
N HTTPRoutes attached to it (each its own hostname, one rule with two weighted backendRefs to the same two Services),
and a second operator process (`--gateway-api true`) of its own namespace. The flipped route's weights are merged
100/0 ↔ 0/100 and the same three figures recorded: held (the Gateway's replicas), traffic (a request through each
replica's Envoy listener for Gateway port 80), status (the route's parent of ours `Accepted` at the new
`observedGeneration`). Flips alternate between the two sides so both see the same load; each side has an operator of
its own, so neither figure pays for the other side's objects.

`--neighbour-routes N` (with `--routes`) is issue 28's neighbour case: a second Gateway of the same class in the same
namespace holding N HTTPRoutes of `--neighbour-matches` PathPrefix matches each (61), all on one hostname; its publish
Service lists no replica, so it costs the operator its translation and its status, nothing else. The flip on the first
Gateway is then timed beside that neighbour. `--operator-tree DIR` runs the Gateway side's operator from another
source tree (a `git archive` of an older commit: DIR/src, DIR/operator, DIR/extproc), so one bench times the
operator before and after a change on the same machine; the JSON names the tree.

Prints p50 / p90 / p99 / max of each (and with routes the HTTPRoute/TrafficSplit ratio of p50 and p99) and writes
them as JSON (`--out`). `--splits N` first applies N-1 other TrafficSplits (their own hosts, the same two Services), so
the flip is measured with N splits held by every replica (each publish carries the whole generation). Needs root
(network namespaces). Nothing is asserted.

    python bench/bench_flip.py [--flips 50] [--splits 1000] [--routes 1000] [--out bench/results/DATE-flip-1000.json]
        [--neighbour-routes 100 [--neighbour-matches 61]] [--operator-tree DIR] [--keep-logs DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import ipaddress
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
for p in ("src", "operator", "extproc", "."):
    sys.path.insert(0, str(ROOT / p))

from kubernetes import client  # noqa: E402

from tests.support.controlplane import ControlPlane, control_plane  # noqa: E402
from tests.support.dataplane import NameBackends  # noqa: E402
from tests.support.netns import Pod, TestPods  # noqa: E402
from tests.support.operator import (  # noqa: E402
    Gateway,
    Operators,
    install_crd,
    install_gateway_api_crds,
    service_with_slice,
    start_gateway,
    ts_manifest,
    wait_condition,
)
from tests.support.waiting import poll  # noqa: E402
from trafficsplit.core.gatewayapi.reading import CONTROLLER_NAME  # noqa: E402
from trafficsplit.operator.dataplane_names import publish_service_name  # noqa: E402

HOST = "flip.example"
GATEWAY_PORT = 80  # the Gateway's one listener
GROUP = "gateway.networking.k8s.io"
COLOURS = ("blue", "green")
BATCH = 200  # kubectl apply in batches: one huge stdin is slow to diff


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def summary(xs: list[float]) -> dict[str, float]:
    ms = [x * 1000 for x in xs]
    return {q: round(pct(ms, v), 1) for q, v in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))} | {
        "max": round(max(ms), 1)
    }


@dataclass
class Side:
    """One kind of object flipped: how to patch it to weights, whose replicas serve it, and when its status says so."""

    kind: str
    objects: int
    units: Gateway
    patch: Callable[[tuple[int, int]], int]  # weights (blue, green) → the object's new metadata.generation
    served: Callable[[int], bool]  # its status reports that generation served
    gateway_port: int | None = None  # None: the chart gateway's one listener
    colour: str = "blue"
    series: dict[str, list[float]] = field(default_factory=lambda: {"held": [], "traffic": [], "status": []})
    patched_at: list[float] = field(default_factory=list)  # wall clock of each patch, to read beside the kept logs

    def flip(self) -> None:
        self.colour = "green" if self.colour == "blue" else "blue"
        weights = (100, 0) if self.colour == "blue" else (0, 100)
        before = min(self.units.held())
        t0 = time.perf_counter()
        self.patched_at.append(time.time())
        generation = self.patch(weights)
        while min(self.units.held()) <= before:
            time.sleep(0.002)
        self.series["held"].append(time.perf_counter() - t0)
        asyncio.run(self._first_new_colour())
        self.series["traffic"].append(time.perf_counter() - t0)
        while not self.served(generation):
            time.sleep(0.005)
        self.series["status"].append(time.perf_counter() - t0)

    async def _first_new_colour(self) -> None:
        for u in self.units.units:
            conn = u.connection(self.gateway_port)
            try:
                while (await conn.request(HOST)).backend != self.colour:
                    await asyncio.sleep(0.001)
            finally:
                conn.close()


def apply_batched(kube: ControlPlane, manifests: list[str]) -> None:
    """Applied before the side's operator starts: 200 objects applied while an operator wrote statuses pushed one
    `kubectl apply` past 60 s on this loaded 2-core machine (setup only; the flips are measured after)."""
    for i in range(0, len(manifests), BATCH):
        kube.kubectl("apply", "-f", "-", input="---\n".join(manifests[i : i + BATCH]), timeout=300)


def backend_refs(weights: tuple[int, int]) -> list[dict[str, Any]]:
    return [{"name": f"svc-{c}", "port": 80, "weight": w} for c, w in zip(COLOURS, weights, strict=True)]


def route_manifest(namespace: str, name: str, host: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "parentRefs": [{"name": "gw"}],
                "hostnames": [host],
                "rules": [{"backendRefs": backend_refs((100, 0))}],
            },
        }
    )


def gateway_manifest(namespace: str, name: str) -> dict[str, Any]:
    """A Gateway of the trafficsplit class with one HTTP listener on GATEWAY_PORT."""
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "gatewayClassName": "trafficsplit",
            "listeners": [{"name": "http", "port": GATEWAY_PORT, "protocol": "HTTP"}],
        },
    }


def neighbour_manifests(namespace: str, n: int, matches: int) -> list[str]:
    """The neighbour Gateway and its `n` routes, every one on one hostname with `matches` distinct PathPrefix matches
    (issue 28: 100 x 61 made a flip on another Gateway wait 46 s)."""
    gateway = gateway_manifest(namespace, "neighbour")
    routes = [
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": f"neighbour-{i}", "namespace": namespace},
            "spec": {
                "parentRefs": [{"name": "neighbour"}],
                "hostnames": ["shop.example"],
                "rules": [
                    {
                        "matches": [{"path": {"type": "PathPrefix", "value": f"/r{i}/p{j}"}} for j in range(matches)],
                        "backendRefs": [{"name": "svc-blue", "port": 80}],
                    }
                ],
            },
        }
        for i in range(n)
    ]
    return [yaml.safe_dump(o) for o in (gateway, *routes)]


def neighbour_attached(custom: client.CustomObjectsApi, namespace: str, n: int) -> bool:
    """The neighbour Gateway's listener counts all `n` routes: the operator has translated them."""
    o = custom.get_namespaced_custom_object(GROUP, "v1", namespace, "gateways", "neighbour")
    listeners = (o.get("status") or {}).get("listeners") or []
    return bool(listeners) and listeners[0].get("attachedRoutes") == n


def route_accepted(custom: client.CustomObjectsApi, namespace: str, name: str, generation: int) -> bool:
    """The route's parent entry of ours says Accepted=True at `generation` (written once every replica ACKed it)."""
    o = custom.get_namespaced_custom_object(GROUP, "v1", namespace, "httproutes", name)
    parents = (o.get("status") or {}).get("parents") or []
    ours: dict[str, Any] = next((p for p in parents if p.get("controllerName") == CONTROLLER_NAME), {})
    c = next((c for c in ours.get("conditions") or [] if c["type"] == "Accepted"), None)
    return bool(c and c["status"] == "True" and c.get("observedGeneration") == generation)


def services(kube: ControlPlane, namespace: str, pods: dict[str, Pod]) -> None:
    """svc-blue and svc-green in `namespace`, each with its pod's endpoint."""
    for c in COLOURS:
        service_with_slice(kube, namespace, f"svc-{c}", [pods[c].ip], target_port=pods[c].port)


def trafficsplit_side(
    kube: ControlPlane,
    ops: Operators,
    stack: contextlib.ExitStack,
    pods: dict[str, Pod],
    work: Path,
    backends: NameBackends,
    n: int,
    debounce: float,
) -> Side:
    ns = kube.create_namespace("bench")
    services(kube, ns, pods)
    (work / "trafficsplit").mkdir()
    gw = start_gateway(work / "trafficsplit", backends)
    stack.callback(gw.stop)
    spec: dict[str, Any] = {
        "hosts": [HOST],
        "backends": [
            {"name": c, "service": f"svc-{c}", "port": 80, "weight": w} for c, w in zip(COLOURS, (100, 0), strict=True)
        ],
    }
    apply_batched(kube, [ts_manifest(ns, f"other-{i}", dict(spec, hosts=[f"other-{i}.example"])) for i in range(n - 1)])
    kube.kubectl("apply", "-f", "-", input=ts_manifest(ns, "flip", spec))
    ops.start(
        kube.kubeconfig,
        identity="op-ts",
        args=[f"--namespaces={ns}", f"--token-file={gw.token_file}", f"--debounce={debounce}", *gw.dataplane_args()],
        lease_namespace=ns,
    )
    wait_condition(kube, ns, "flip", "Published", "True", "2/2", timeout=600)
    if n > 1:
        wait_condition(kube, ns, f"other-{n - 2}", "Published", "True", "2/2", timeout=600)
    custom = client.CustomObjectsApi(kube.api_client())

    def patch(weights: tuple[int, int]) -> int:
        body = {"spec": {"backends": [dict(b, weight=w) for b, w in zip(spec["backends"], weights, strict=True)]}}
        obj = custom.patch_namespaced_custom_object("trafficsplit.dev", "v1alpha1", ns, "trafficsplits", "flip", body)
        return int(obj["metadata"]["generation"])

    def served(generation: int) -> bool:
        o = custom.get_namespaced_custom_object("trafficsplit.dev", "v1alpha1", ns, "trafficsplits", "flip")
        c = next((c for c in o.get("status", {}).get("conditions", []) if c["type"] == "Published"), None)
        return bool(c and c["status"] == "True" and c.get("observedGeneration") == generation)

    return Side("TrafficSplit", n, gw, patch, served)


def httproute_side(
    kube: ControlPlane,
    ops: Operators,
    stack: contextlib.ExitStack,
    pods: dict[str, Pod],
    anchor: Pod,
    work: Path,
    backends: NameBackends,
    n: int,
    debounce: float,
    neighbour: tuple[int, int] = (0, 0),
    operator_tree: Path | None = None,
) -> Side:
    install_gateway_api_crds(kube)
    ns = kube.create_namespace("bench-gw")
    services(kube, ns, pods)
    # The API server refuses loopback addresses in EndpointSlices: the replicas' publish APIs listen on the host end
    # of a test pod's veth, each its own port, so each replica is one slice of the publish Service.
    host = str(ipaddress.ip_address(anchor.ip) - 1)
    (work / "gateway-api").mkdir()
    gw = start_gateway(work / "gateway-api", backends, publish_host=host, gateway_ports=(GATEWAY_PORT,))
    stack.callback(gw.stop)
    for i, u in enumerate(gw.units):
        service_with_slice(
            kube,
            ns,
            publish_service_name(ns, "gw"),
            [host],
            port=9443,
            target_port=u.processor.ports["publish"],
            port_name="publish",
            slice_suffix=f"r{i}",
        )
    kube.kubectl(
        "apply",
        "-f",
        "-",
        input=yaml.safe_dump_all(
            [
                {
                    "apiVersion": f"{GROUP}/v1",
                    "kind": "GatewayClass",
                    "metadata": {"name": "trafficsplit"},
                    "spec": {"controllerName": CONTROLLER_NAME},
                },
                gateway_manifest(ns, "gw"),
            ]
        ),
    )
    apply_batched(kube, [route_manifest(ns, f"other-{i}", f"other-{i}.example") for i in range(n - 1)])
    kube.kubectl("apply", "-f", "-", input=route_manifest(ns, "flip", HOST))
    if neighbour[0]:
        apply_batched(kube, neighbour_manifests(ns, *neighbour))
    tree = None
    if operator_tree is not None:
        tree = {"PYTHONPATH": os.pathsep.join(str(operator_tree / p) for p in ("src", "operator", "extproc"))}
    ops.start(
        kube.kubeconfig,
        env=tree,
        identity="op-gw",
        args=[
            "--leader-election=false",
            "--gateway-api=true",
            # The chart's gateway: a Service with no endpoints here, so only the Gateway's replicas are published to.
            "--gateway-service=no-chart-gateway",
            f"--gateway-namespace={ns}",
            f"--dataplane-namespace={ns}",
            f"--namespaces={ns}",
            f"--token-file={gw.token_file}",
            f"--debounce={debounce}",
        ],
        lease_namespace=ns,
    )
    custom = client.CustomObjectsApi(kube.api_client())
    poll(lambda: route_accepted(custom, ns, "flip", 1), 600, "route flip Accepted", 0.1)
    if n > 1:
        poll(lambda: route_accepted(custom, ns, f"other-{n - 2}", 1), 600, "the last other route Accepted", 0.1)
    if neighbour[0]:
        poll(lambda: neighbour_attached(custom, ns, neighbour[0]), 900, "the neighbour's routes attached", 0.5)

    def patch(weights: tuple[int, int]) -> int:
        body = {"spec": {"rules": [{"backendRefs": backend_refs(weights)}]}}
        obj = custom.patch_namespaced_custom_object(GROUP, "v1", ns, "httproutes", "flip", body)
        return int(obj["metadata"]["generation"])

    return Side("HTTPRoute", n, gw, patch, lambda g: route_accepted(custom, ns, "flip", g), gateway_port=GATEWAY_PORT)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flips", type=int, default=50, help="patches per side")
    ap.add_argument("--debounce", type=float, default=0.02, help="the operators' --debounce (seconds)")
    ap.add_argument("--splits", type=int, default=1, help="TrafficSplits held in all, the flipped one included")
    ap.add_argument(
        "--routes", type=int, default=0, help="HTTPRoutes on the Gateway, the flipped one included (0: none)"
    )
    ap.add_argument("--neighbour-routes", type=int, default=0, help="routes on a neighbour Gateway (with --routes)")
    ap.add_argument("--neighbour-matches", type=int, default=61, help="PathPrefix matches per neighbour route")
    ap.add_argument("--operator-tree", type=Path, help="run the Gateway side's operator from this source tree")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    ap.add_argument(
        "--keep-logs", type=Path, help="copy the operators' and replicas' logs here (with the patch times in the JSON)"
    )
    args = ap.parse_args()
    load_start = os.getloadavg()
    sides: list[Side] = []
    with tempfile.TemporaryDirectory(prefix="bench-flip-") as tmp, control_plane() as kube, TestPods(Path(tmp)) as tp:
        work = Path(tmp)
        install_crd(kube)
        pods = {c: tp.start(c) for c in COLOURS}
        backends = NameBackends.start(work, names=("blue",))
        ops = Operators(kube, work)
        with contextlib.ExitStack() as stack:
            stack.callback(backends.envoy.stop)
            stack.callback(ops.stop_all)  # LIFO: the units (registered by each side), the operators, the backends
            sides.append(trafficsplit_side(kube, ops, stack, pods, work, backends, args.splits, args.debounce))
            if args.routes:
                anchor = tp.start("anchor")
                sides.append(
                    httproute_side(
                        kube,
                        ops,
                        stack,
                        pods,
                        anchor,
                        work,
                        backends,
                        args.routes,
                        args.debounce,
                        neighbour=(args.neighbour_routes, args.neighbour_matches),
                        operator_tree=args.operator_tree,
                    )
                )
            for _ in range(args.flips):
                for side in sides:
                    side.flip()
            if args.keep_logs is not None:
                args.keep_logs.mkdir(parents=True, exist_ok=True)
                for log in work.rglob("*.log"):
                    shutil.copy(log, args.keep_logs / "-".join(log.relative_to(work).parts))
    ts = sides[0]
    doc: dict[str, Any] = {
        "benchmark": "flip",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "splits": args.splits,
        "flips": args.flips,
        "debounce_s": args.debounce,
        "replicas": 2,
        "ms": {k: summary(xs) for k, xs in ts.series.items()},
        "patched_at": {side.kind: [round(t, 3) for t in side.patched_at] for side in sides},
    }
    if args.routes:
        hr = sides[1]
        doc["httproutes"] = args.routes
        doc["neighbour"] = {"routes": args.neighbour_routes, "matches_per_route": args.neighbour_matches}
        doc["operator_tree"] = str(args.operator_tree) if args.operator_tree is not None else "this tree"
        doc["httproute_ms"] = {k: summary(xs) for k, xs in hr.series.items()}
        doc["ratio_httproute_over_trafficsplit"] = {
            k: {q: round(doc["httproute_ms"][k][q] / doc["ms"][k][q], 2) for q in ("p50", "p99")} for k in doc["ms"]
        }
    doc["machine"] = {
        "cpus": os.cpu_count(),
        "loadavg_start": [round(x, 2) for x in load_start],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
    }
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nflips: {args.flips} per kind, operator debounce {args.debounce * 1000:.0f} ms; patch → ..., ms")
    print(f"{'':<60}{'p50':>8}{'p90':>8}{'p99':>8}{'max':>8}{'mean':>8}")
    labels = {
        "held": "every replica holds the new generation",
        "traffic": "every Envoy routes to the new side",
        "status": "status at the new generation",
    }
    for side in sides:
        for key, label in labels.items():
            ms = [x * 1000 for x in side.series[key]]
            row = f"{side.kind} ({side.objects}): {label}"
            print(
                f"{row:<60}{pct(ms, 0.5):>8.1f}{pct(ms, 0.9):>8.1f}{pct(ms, 0.99):>8.1f}{max(ms):>8.1f}"
                f"{statistics.mean(ms):>8.1f}"
            )
    for key, r in doc.get("ratio_httproute_over_trafficsplit", {}).items():
        print(f"HTTPRoute / TrafficSplit, {key}: p50 {r['p50']:.2f}x, p99 {r['p99']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
