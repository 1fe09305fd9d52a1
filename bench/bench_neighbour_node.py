"""Issue 28's neighbour case on the local node: a weight flip on tenant B's Gateway, timed while tenant A's Gateway
holds nothing and while it holds 100 HTTPRoutes × 61 PathPrefix matches on one hostname, side by side in one run.

Everything is the product as installed: the local node (tests/support/localnode.py: kubelet, kube-proxy, containerd,
real pods), the chart with the Gateway API on (the operator in its pod), our GatewayClass asking for two data-plane
pods per Gateway, so A and B each get their own provisioned data plane (extproc + Envoy). A lives in namespace
`tenant-a`; B in `tenant-b` with two name-echoing backends (`blue`, `green`) and one HTTPRoute `flip` whose one rule
weights them 100/0. Each flip merge-patches that rule to the other side and records, from the patch:

  served    a request straight to each of B's data-plane pods (Host `flip.bench`) answers from the new side;
  accepted  the route's parent entry of ours is `Accepted` at the new `observedGeneration` (written after every one of
            B's replicas ACKed it: what Flagger and Argo Rollouts wait for).

The phases alternate, `--flips` / 2 flips each: alone (A's Gateway without routes), loaded (A's routes applied, and
counted on A's listener, so the operator has translated them), alone again (A's routes deleted), loaded again. The
ratio loaded / alone of p50 and p99 is issue 28's target (within 1.2×). Needs Linux and root; prints the figures and
writes them as JSON (`--out`). Nothing is asserted.

    python bench/bench_neighbour_node.py [--flips 20] [--routes 100] [--matches 61] [--settle 15] \
        [--out bench/results/DATE-neighbour-node-100x61.json]
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
for p in ("src", "operator", "extproc", "."):
    sys.path.insert(0, str(ROOT / p))

from kubernetes import client, config  # noqa: E402

from bench.bench_flip import GROUP, neighbour_attached, neighbour_manifests, route_accepted, summary  # noqa: E402
from tests.e2e.cluster import Cluster, echo_backend, wait_for  # noqa: E402
from tests.e2e.gatewayapi import POD_PORT, dataplane_pod_ips, gateway_doc, install_gateway_api, programmed  # noqa: E402

NS_A = "tenant-a"
NS_B = "tenant-b"
GATEWAY_A = "neighbour"  # the name bench_flip's neighbour manifests attach to
GATEWAY_B = "edge"
HOST = "flip.bench"
COLOURS = ("blue", "green")
REPLICAS = 2
FLIP_TIMEOUT_S = 300.0


def backend_docs(cluster: Cluster) -> list[dict[str, Any]]:
    """B's two echo Deployments and Services, and in A's namespace the Service A's routes name (`svc-blue`, with no
    pods: A costs the operator its translation and its status, and its own data plane its configuration)."""
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in (NS_A, NS_B)
    ]
    for colour in COLOURS:
        docs += echo_backend(NS_B, colour, {"app": "neighbour-bench", "version": colour}, cluster.echo_image())
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "svc-blue", "namespace": NS_A},
            "spec": {"ports": [{"name": "http", "port": 80}]},
        }
    )
    return docs


def flip_route(weights: tuple[int, int]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "flip", "namespace": NS_B},
        "spec": {
            "parentRefs": [{"name": GATEWAY_B}],
            "hostnames": [HOST],
            "rules": [{"backendRefs": rule_refs(weights)}],
        },
    }


def rule_refs(weights: tuple[int, int]) -> list[dict[str, Any]]:
    return [{"name": c, "port": 80, "weight": w} for c, w in zip(COLOURS, weights, strict=True)]


def answer(pod_ip: str) -> str:
    """The backend a request straight to one of B's data-plane pods lands on ('' for anything but a 200)."""
    conn = http.client.HTTPConnection(pod_ip, POD_PORT, timeout=5)
    try:
        conn.request("GET", "/", headers={"Host": HOST})
        resp = conn.getresponse()
        body = resp.read().decode(errors="replace").strip()
        return body if resp.status == 200 else ""
    except OSError:
        return ""
    finally:
        conn.close()


@dataclass
class Flipper:
    custom: client.CustomObjectsApi
    pods: tuple[str, ...]
    colour: str = "blue"
    series: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def flip(self, phase: str) -> None:
        self.colour = "green" if self.colour == "blue" else "blue"
        weights = (100, 0) if self.colour == "blue" else (0, 100)
        body = {"spec": {"rules": [{"backendRefs": rule_refs(weights)}]}}
        t0 = time.perf_counter()
        obj = self.custom.patch_namespaced_custom_object(GROUP, "v1", NS_B, "httproutes", "flip", body)
        generation = int(obj["metadata"]["generation"])
        waiting = set(self.pods)
        served = accepted = None
        while served is None or accepted is None:
            if time.perf_counter() - t0 > FLIP_TIMEOUT_S:
                raise RuntimeError(f"flip to {self.colour} not served/accepted within {FLIP_TIMEOUT_S} s")
            waiting = {ip for ip in waiting if answer(ip) != self.colour}
            if served is None and not waiting:
                served = time.perf_counter() - t0
            if accepted is None and route_accepted(self.custom, NS_B, "flip", generation):
                accepted = time.perf_counter() - t0
            time.sleep(0.005)
        s = self.series.setdefault(phase, {"served": [], "accepted": []})
        s["served"].append(served)
        s["accepted"].append(accepted)


def wait(what: str, probe: Callable[[], Any], timeout: float) -> float:
    t0 = time.monotonic()
    wait_for(what, probe, timeout=timeout)
    return round(time.monotonic() - t0, 1)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from tests.support.localnode import local_node

    timings: dict[str, float] = {}
    with local_node() as node:
        cluster = Cluster(
            name="local node",
            kubeconfig=node.kubeconfig,
            helm_bin=str(node.cp.helm_bin),
            kubectl_bin=str(node.cp.kubectl_bin),
            images={n: (node.images.repository(n), node.images.tag) for n in ("operator", "extproc", "envoy", "echo")},
            helm_home=node.work / "helm",
            containerd_sock=node.containerd_sock,
        )
        timings["node_ready_s"] = round(node.started_seconds, 1)
        timings["install_s"] = round(install_gateway_api(cluster, REPLICAS), 1)
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(backend_docs(cluster)))
        cluster.kubectl("-n", NS_B, "wait", "--for=condition=Available", "deployment", "--all", "--timeout=300s")
        gateways = [gateway_doc(NS_A, GATEWAY_A), gateway_doc(NS_B, GATEWAY_B), flip_route((100, 0))]
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(gateways))
        timings["gateways_programmed_s"] = wait(
            "both Gateways Programmed",
            lambda: programmed(cluster, NS_A, GATEWAY_A) and programmed(cluster, NS_B, GATEWAY_B),
            300,
        )
        pods = wait_for("B's data-plane pods Ready", lambda: dataplane_pod_ips(cluster, NS_B, GATEWAY_B, REPLICAS), 300)
        custom = client.CustomObjectsApi(config.new_client_from_config(config_file=str(node.kubeconfig)))
        wait("flip Accepted and served blue", lambda: all(answer(ip) == "blue" for ip in pods), 120)
        flipper = Flipper(custom, pods)
        neighbour = neighbour_manifests(NS_A, args.routes, args.matches)
        half = max(1, args.flips // 2)
        last = f"neighbour-{args.routes - 1}"
        for i, phase in enumerate(("alone", "loaded", "alone", "loaded")):
            if phase == "loaded":
                for at in range(0, len(neighbour), 50):
                    cluster.kubectl("apply", "-f", "-", input="---\n".join(neighbour[at : at + 50]), timeout=300)
                # Attached: the operator translated them; the last one Accepted: their statuses are written too.
                timings[f"load_{i}_s"] = wait(
                    "A's routes attached and Accepted",
                    lambda: neighbour_attached(custom, NS_A, args.routes) and route_accepted(custom, NS_A, last, 1),
                    900,
                )
            elif i:
                cluster.kubectl("delete", "httproute", "--all", "-n", NS_A, timeout=300)
                timings[f"unload_{i}_s"] = wait("A's routes gone", lambda: neighbour_attached(custom, NS_A, 0), 900)
            # The same pause before every phase: what A's change set going (A's replicas taking its table, the
            # routes' status writes, the node's own work) settles, so a phase times the steady state it names.
            time.sleep(args.settle)
            for _ in range(half):
                flipper.flip(phase)
            print(f"{phase}: {half} flips, served p50 {summary(flipper.series[phase]['served'][-half:])['p50']} ms")
    alone, loaded = flipper.series["alone"], flipper.series["loaded"]
    figures = {phase: {k: summary(v) for k, v in s.items()} for phase, s in flipper.series.items()}
    ratio = {
        k: {q: round(figures["loaded"][k][q] / figures["alone"][k][q], 2) for q in ("p50", "p99")}
        for k in ("served", "accepted")
    }
    return {
        "benchmark": "bench_neighbour_node",
        "date": datetime.date.today().isoformat(),
        "flips": {"alone": len(alone["served"]), "loaded": len(loaded["served"])},
        "neighbour": {"routes": args.routes, "matches_per_route": args.matches, "hostnames": 1},
        "replicas_per_gateway": REPLICAS,
        "ms": figures,
        "ratio_loaded_over_alone": ratio,
        "settle_s": args.settle,
        "timings_s": timings,
        # every flip, ms, in the order run (phase by phase): where a tail sits, early in a phase or anywhere
        "samples_ms": {
            ph: {k: [round(x * 1000, 1) for x in v] for k, v in ser.items()} for ph, ser in flipper.series.items()
        },
        "machine": {"cpus": os.cpu_count(), "loadavg_end": [round(x, 2) for x in os.getloadavg()]},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flips", type=int, default=20, help="flips per condition, split over its two phases")
    ap.add_argument("--routes", type=int, default=100, help="A's HTTPRoutes, all on one hostname")
    ap.add_argument("--matches", type=int, default=61, help="PathPrefix matches per route of A")
    ap.add_argument("--settle", type=float, default=15.0, help="seconds before each phase's first flip")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    load_start = [round(x, 2) for x in os.getloadavg()]
    doc = run(args)
    doc["machine"]["loadavg_start"] = load_start
    print(json.dumps({k: doc[k] for k in ("ms", "ratio_loaded_over_alone", "timings_s")}, indent=1))
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
