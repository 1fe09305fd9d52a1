"""1,000 HTTPRoutes against 1,000 TrafficSplits: the same traffic intent expressed both ways, measured in one run.

Why: Gateway API users express a canary as an HTTPRoute; TrafficSplit users as a TrafficSplit. Both compile into the
same core model, but through different code (the Gateway API translation computes listeners, hostnames, precedence
and status; the TrafficSplit path resolves and compiles one split per object), and a Gateway's data plane picks through
a route table where the shared gateway looks a split up by host. This measures what the second way of saying the same
thing costs, as ratios HTTPRoute / TrafficSplit from one process and one run (the machine's load hits both alike).

The intent: N apps, each with its own hostname and two Services (`app<i>-stable`, `app<i>-canary`, port 80, one
EndpointSlice with one ready endpoint each), split 90/10, no stickiness (each request picked by its request id).
- TrafficSplit: N objects `{hosts: [app<i>.example], backends: [stable 90, canary 10]}`.
- HTTPRoute: one GatewayClass, one Gateway (one HTTP listener on port 80), N HTTPRoutes, each one rule with two
  weighted backendRefs and its own hostname.

Stages, each the operator's or the data plane's own code, in CPU seconds of this process (`time.process_time`: the
other jobs of a shared machine do not count), best of --rounds (per stage, the two ways back to back in alternating
order):
- `parse`: object bodies → the parsed values the operator's store keeps (`SplitObject`, which parses its spec;
  `parse_httproute`).
- `compile`: parsed values + Services + EndpointSlices → a `Generation`, cold: `desired_state` (resolve, compile,
  assemble, the outcomes status is written from) and `stamp`; `translate` (listeners, attachment, precedence, every
  rule's split, status) and `gateway_content` and `stamp`.
- `recompile_one_changed`: the pass after one object's weights changed, as the operator runs it: `desired_state` with
  the previous pass's `CompileMemo` (only the changed split compiles); `translate` of all routes (the operator's
  Gateway pass has no memo).
- `encode` / `decode`: what the publish does with the generation: `generation_to_proto` + `SerializeToString`; on the
  receiving replica `Generation.FromString` + `generation_from_proto` (no held generation to reuse).
- `serving_tables`: the core's reference route tables of a generation (`served_routes`: one RouteTable per port, RE2
  compiled; Envoy's routes serve a Gateway data plane since issue 28, this is the model's `select`); TrafficSplits
  need none beyond the generation's host index (built by `stamp`), so this has no ratio.
- `peak_memory`: tracemalloc's peak over parse + compile (cold), and what the generation keeps (traced memory held
  after, with the parsed inputs dropped), per way, in separate passes (tracemalloc slows everything it traces).
- `per_request`: the decision for one request on a table of N: `ServedRoutes.route` (port table, host, matches, the
  rule's split's pick, request edits) against `Generation.split_for` + `decide`; CPU ns per request over requests spread
  across every host.

Not a test: nothing asserted. Writes `bench/results/<date>-routes-vs-splits.json`.

    PYTHONPATH=src:operator:extproc:. python bench/bench_routes_vs_splits.py [--n 1000] [--rounds 7] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import time
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from trafficsplit.core.control.reconcile import CompileMemo, desired_state
from trafficsplit.core.control.resolve import ServiceInfo, ServicePort, SliceEndpoint, SliceInfo, SplitObject
from trafficsplit.core.decide.request import Request
from trafficsplit.core.decide.serve import Routed, ServedRoutes
from trafficsplit.core.decide.split import decide
from trafficsplit.core.gatewayapi.httproute import HTTPRoute, parse_httproute
from trafficsplit.core.gatewayapi.objects import parse_gateway, parse_gateway_class
from trafficsplit.core.gatewayapi.translate import Inputs, gateway_content, translate
from trafficsplit.core.model.cookie import AffinityMinter
from trafficsplit.core.model.generation import Generation
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto

NAMESPACE = "apps"
GATEWAY = f"{NAMESPACE}/gw"
CREATED = "2026-01-01T00:00:00Z"
T = TypeVar("T")
REQUESTS = 20_000  # per-request timing: requests per timed pass, spread over every host


def host(i: int) -> str:
    return f"app{i}.example"


def cluster_objects(n: int) -> tuple[dict[tuple[str, str], ServiceInfo], dict[tuple[str, str], list[SliceInfo]]]:
    """Two Services per app, port 80 named http (targetPort 8080), each with one EndpointSlice of one ready pod."""
    services: dict[tuple[str, str], ServiceInfo] = {}
    slices: dict[tuple[str, str], list[SliceInfo]] = {}
    for i in range(n):
        for j, role in enumerate(("stable", "canary")):
            name = f"app{i}-{role}"
            services[(NAMESPACE, name)] = ServiceInfo(
                NAMESPACE, name, (ServicePort(name="http", port=80, target_port=8080),)
            )
            address = f"10.{(i >> 8) & 255}.{i & 255}.{j + 1}"
            slices[(NAMESPACE, name)] = [
                SliceInfo(
                    namespace=NAMESPACE,
                    name=f"{name}-abcde",
                    service=name,
                    ports=(("http", 8080),),
                    endpoints=(SliceEndpoint(address, True, f"{name}-pod"),),
                )
            ]
    return services, slices


def split_body(i: int, canary: int = 10) -> dict[str, Any]:
    return {
        "hosts": [host(i)],
        "backends": [
            {"name": "stable", "service": f"app{i}-stable", "port": 80, "weight": 100 - canary},
            {"name": "canary", "service": f"app{i}-canary", "port": 80, "weight": canary},
        ],
    }


def route_body(i: int, canary: int = 10, generation: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": f"app{i}", "namespace": NAMESPACE, "generation": generation, "creationTimestamp": CREATED},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "hostnames": [host(i)],
            "rules": [
                {
                    "backendRefs": [
                        {"name": f"app{i}-stable", "port": 80, "weight": 100 - canary},
                        {"name": f"app{i}-canary", "port": 80, "weight": canary},
                    ]
                }
            ],
        },
    }


def split_object(i: int, canary: int = 10, generation: int = 1) -> SplitObject:
    return SplitObject(
        namespace=NAMESPACE,
        name=f"app{i}",
        uid=f"uid-{i}",
        generation=generation,
        created=CREATED,
        spec=split_body(i, canary),
        status={},
    )


CLASS_BODY = {"metadata": {"name": "trafficsplit"}, "spec": {"controllerName": "trafficsplit.dev/gateway-controller"}}
GATEWAY_BODY = {
    "metadata": {"name": "gw", "namespace": NAMESPACE, "generation": 1},
    "spec": {"gatewayClassName": "trafficsplit", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
}


@dataclass
class Cluster:
    n: int
    services: dict[tuple[str, str], ServiceInfo]
    slices: dict[tuple[str, str], list[SliceInfo]]


# --- the two ways ----------------------------------------------------------------------------------------------------


def parse_splits(c: Cluster) -> list[SplitObject]:
    return [split_object(i) for i in range(c.n)]


def parse_routes(c: Cluster) -> list[HTTPRoute]:
    return [parse_httproute(route_body(i)) for i in range(c.n)]


def compile_splits(c: Cluster, objs: Sequence[SplitObject], memo: CompileMemo | None = None) -> Generation:
    d = desired_state(objs, c.services, c.slices, {}, memo=memo)
    assert all(o.accepted.ok and o.resolved.ok for o in d.outcomes.values())
    return d.content.stamp(1)


def route_inputs(c: Cluster, routes: Sequence[HTTPRoute]) -> Inputs:
    return Inputs(
        classes=(parse_gateway_class(CLASS_BODY),),
        gateways=(parse_gateway(GATEWAY_BODY),),
        routes=tuple(routes),
        services=c.services,
        slices=c.slices,
    )


def compile_routes(c: Cluster, routes: Sequence[HTTPRoute]) -> Generation:
    t = translate(route_inputs(c, routes))
    assert len(t.actions) == c.n and all(a.split is not None for a in t.actions)
    return gateway_content(t, GATEWAY).stamp(1)


def encode(gen: Generation) -> bytes:
    return generation_to_proto(gen, origin="bench").SerializeToString()


def decode(data: bytes) -> Generation:
    return generation_from_proto(pb.Generation.FromString(data))


# --- measuring -------------------------------------------------------------------------------------------------------


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """CPU seconds of this process for one call, and its result. CPU time, not wall time: on a shared machine the
    other jobs' load would otherwise land on whichever stage it happens to hit (wall-time ratios of the same code
    swung by 2x between runs here). The collector's pauses are kept out (collected before, disabled during)."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        out = fn()
        return time.process_time() - t0, out
    finally:
        gc.enable()


def memory(fn: Callable[[], object]) -> tuple[float, float]:
    """(peak MB while `fn` runs, MB still traced after it returns while its result is kept), tracemalloc."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        kept = fn()
        current, peak = tracemalloc.get_traced_memory()
        del kept
        return (peak - base) / 1e6, (current - base) / 1e6
    finally:
        tracemalloc.stop()


def per_request_ns(n: int, decide_one: Callable[[str, str], object]) -> float:
    hosts = [host((k * 7919) % n) for k in range(REQUESTS)]  # every host, in a scattered order
    ids = [f"req-{k:06d}" for k in range(REQUESTS)]

    def run() -> None:
        for h, rid in zip(hosts, ids, strict=True):
            decide_one(h, rid)

    return timed(run)[0] / REQUESTS * 1e9


def no_header(_name: str) -> str | None:
    return None


def split_decider(gen: Generation) -> Callable[[str, str], object]:
    minter = AffinityMinter()

    def one(authority: str, request_id: str) -> object:
        split = gen.split_for(authority)
        assert split is not None
        return decide(split, Request(authority="", cookie_lines=(), request_id=request_id, headers={}), minter=minter)

    return one


def served_routes(gen: Generation) -> ServedRoutes | None:
    """The generation's reference route tables, or None without a route table."""
    return None if gen.routes is None else ServedRoutes(gen.routes.listeners, gen.routes.actions)


def route_decider(gen: Generation) -> Callable[[str, str], object]:
    served = served_routes(gen)
    assert served is not None
    minter = AffinityMinter()
    routes: ServedRoutes = served

    def one(authority: str, request_id: str) -> object:
        request = Request(authority=authority, cookie_lines=(), request_id=request_id, headers={})
        out = routes.route(80, request, minter=minter)
        assert isinstance(out, Routed)
        return out

    return one


def same_picks(splits: Generation, routes: Generation, n: int, samples: int) -> int:
    """How many of `samples` requests the two ways send to the same role (stable / canary): the intent is the same,
    so all of them."""
    s, r = split_decider(splits), route_decider(routes)
    same = 0
    for k in range(samples):
        h, rid = host(k % n), f"check-{k}"
        a, b = s(h, rid), r(h, rid)
        assert isinstance(b, Routed)
        role_a = a.backend.name  # type: ignore[attr-defined]
        role_b = b.decision.backend.name.rsplit("-", 1)[1]  # the backendRef is the Service `app<i>-<role>`
        same += role_a == role_b
    return same


@dataclass
class Way:
    """One way of saying the intent, prepared once: what each stage starts from."""

    name: str
    gen: Generation
    data: bytes
    stages: Mapping[str, Callable[[], object]]


def split_way(c: Cluster) -> Way:
    objs = parse_splits(c)
    gen = compile_splits(c, objs)
    data = encode(gen)
    memo = CompileMemo()
    compile_splits(c, objs, memo)
    changed = [*objs[:-1], split_object(c.n - 1, canary=20, generation=2)]
    stages: dict[str, Callable[[], object]] = {
        "parse_s": lambda: parse_splits(c),
        "compile_s": lambda: compile_splits(c, objs),
        # The operator's pass after one change: its memo holds the previous pass's compiled forms.
        "recompile_one_changed_s": lambda: compile_splits(c, changed, memo),
        "encode_s": lambda: encode(gen),
        "decode_s": lambda: decode(data),
    }
    return Way("splits", gen, data, stages)


def route_way(c: Cluster) -> Way:
    routes = parse_routes(c)
    gen = compile_routes(c, routes)
    data = encode(gen)
    changed = [*routes[:-1], parse_httproute(route_body(c.n - 1, canary=20, generation=2))]
    stages: dict[str, Callable[[], object]] = {
        "parse_s": lambda: parse_routes(c),
        "compile_s": lambda: compile_routes(c, routes),
        # The operator's Gateway pass translates every route again (it keeps no memo).
        "recompile_one_changed_s": lambda: compile_routes(c, changed),
        "encode_s": lambda: encode(gen),
        "decode_s": lambda: decode(data),
        "serving_tables_s": lambda: served_routes(gen),
    }
    return Way("routes", gen, data, stages)


def measure(n: int, rounds: int) -> dict[str, Any]:
    """Every stage `rounds` times, the two ways back to back in alternating order, the best of each kept: a burst of
    load on this shared machine then hits one attempt, not one way's whole stage."""
    services, slices = cluster_objects(n)
    c = Cluster(n, services, slices)
    ways = [split_way(c), route_way(c)]
    deciders = {"splits": split_decider(ways[0].gen), "routes": route_decider(ways[1].gen)}
    best: dict[str, dict[str, float]] = {"splits": {}, "routes": {}}
    stages = [*dict.fromkeys(k for w in ways for k in w.stages), "per_request_ns"]
    for stage in stages:
        print(stage, flush=True)
        for r in range(rounds):
            for w in ways if r % 2 == 0 else ways[::-1]:
                if stage == "per_request_ns":
                    value = per_request_ns(n, deciders[w.name])
                elif stage in w.stages:
                    value = timed(w.stages[stage])[0]
                else:
                    continue
                best[w.name][stage] = min(value, best[w.name].get(stage, float("inf")))
    for w in ways:
        best[w.name]["message_bytes"] = len(w.data)
    agree = same_picks(ways[0].gen, ways[1].gen, n, 2_000)
    del ways, deciders
    mem = {
        "splits": memory(lambda: compile_splits(c, parse_splits(c))),
        "routes": memory(lambda: compile_routes(c, parse_routes(c))),
    }
    for way, (peak, kept) in mem.items():
        best[way]["peak_mb"] = peak
        best[way]["generation_kept_mb"] = kept
    ratios = {
        k: best["routes"][k] / best["splits"][k] for k in best["splits"] if k in best["routes"] and best["splits"][k]
    }
    return {"n": n, "splits": best["splits"], "routes": best["routes"], "ratios": ratios, "same_role_of_2000": agree}


def _rounded(d: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 6) if v < 10 else round(v, 1) for k, v in d.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description="N HTTPRoutes against N TrafficSplits, side by side")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--out", type=Path, help="write the figures as JSON (default bench/results/DATE-routes-vs-splits.json)"
    )
    args = parser.parse_args()
    load_start = os.getloadavg()
    result = measure(args.n, args.rounds)
    print(f"\n{args.n} HTTPRoutes vs {args.n} TrafficSplits, best of {args.rounds} rounds")
    print(f"{'stage':<26}{'TrafficSplit':>16}{'HTTPRoute':>16}{'ratio':>10}")
    for k in result["routes"]:
        s = result["splits"].get(k)
        r = result["routes"][k]
        ratio = result["ratios"].get(k)
        print(f"{k:<26}{'' if s is None else f'{s:.4g}':>16}{r:>16.4g}{'' if ratio is None else f'{ratio:.2f}x':>10}")
    print(f"same role (stable/canary) for {result['same_role_of_2000']} of 2000 sampled requests")
    doc = {
        "benchmark": "routes-vs-splits",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "n": args.n,
        "rounds": args.rounds,
        "unit": "CPU s per stage (best of rounds), CPU ns per request, MB (tracemalloc), bytes; ratios routes/splits",
        "splits": _rounded(result["splits"]),
        "routes": _rounded(result["routes"]),
        "ratios": {k: round(v, 2) for k, v in result["ratios"].items()},
        "same_role_of_2000": result["same_role_of_2000"],
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_start": [round(x, 2) for x in load_start],
            "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        },
    }
    out = args.out or Path(__file__).resolve().parent / "results" / f"{datetime.date.today()}-routes-vs-splits.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
