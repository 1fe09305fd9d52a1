"""`translate()` of one Gateway's store as its routes grow, all on one shared hostname against one hostname each.

Why: issue 28 measured a neighbour's weight flip waiting 46 s behind another tenant's Gateway holding 100 HTTPRoutes of
61 PathPrefix matches each on one hostname. On a shared hostname every match of a route was compared with every
earlier route's match of that host (the duplicate-match check, `gatewayapi.precedence.taken_matches`), so the pass
grew with the square of the matches. This measures the pure translation, per route, at growing N, the two shapes
side by side in one process (CPU seconds of this process, best of --rounds), so the growth is read as a ratio:
`per_route(N) / per_route(smallest N)` stays near 1 when the translation is linear.

`shared_before`, in the same run: the same shared-host translation with the check it replaced, the pairwise scan of
every earlier entry of the host (tests/unit/precedence_reference.py, patched in for the timing only), up to
--before-max routes (it is quadratic: 1,000 routes would take minutes); `before_over_after` is the ratio.

`flip_on_b`: the operator's pass for a weight flip on another Gateway B (one route) while this Gateway A holds the
N routes, translated as the operator did before (`whole`: every Gateway's routes, the rule memo warm; `whole_pairwise`
with the old check too, which is the store the issue measured 46 s / 62 s on) and as it does now (`per_gateway`: the
operator's `TranslationMemo` warm, so only B is translated).

The store: one GatewayClass, one Gateway (one HTTP listener on port 80, no hostname), N HTTPRoutes, each with
--matches PathPrefix matches (`/r<i>/p<j>`, distinct, so no match is taken) in one rule with one backendRef; `shared`:
every route names `shop.example`; `own`: route i names `app<i>.example`. One Service with one ready endpoint. At
1,000 routes the shared host holds 61,000 entries, over a virtual host's bound (MAX_HOST_ENTRIES, 8,192): that Gateway
is refused alone (`Translation.refused`) after the same work, which is what is timed.

Not a test: nothing asserted. Writes `bench/results/<date>-translate-shared-host.json`.

    PYTHONPATH=src:operator:extproc:. python bench/bench_translate_shared_host.py [--n 25,50,100,1000] [--rounds 3]
        [--before-max 100]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import platform
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from tests.unit.precedence_reference import pairwise_taken_matches
from trafficsplit.core.control.resolve import ServiceInfo, ServicePort, SliceEndpoint, SliceInfo
from trafficsplit.core.gatewayapi import translate as translate_module
from trafficsplit.core.gatewayapi.actions import ActionMemo
from trafficsplit.core.gatewayapi.httproute import HTTPRoute, parse_httproute
from trafficsplit.core.gatewayapi.objects import Gateway, parse_gateway, parse_gateway_class
from trafficsplit.core.gatewayapi.translate import Inputs, Translation, TranslationMemo, translate

NAMESPACE = "apps"
CREATED = "2026-01-01T00:00:00Z"
CLASS_BODY = {"metadata": {"name": "trafficsplit"}, "spec": {"controllerName": "trafficsplit.dev/gateway-controller"}}
GATEWAY_BODY = {
    "metadata": {"name": "gw", "namespace": NAMESPACE, "generation": 1},
    "spec": {"gatewayClassName": "trafficsplit", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
}


def route_body(i: int, matches: int, hostname: str, gateway: str = "gw", weight: int = 1) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{gateway}-r{i}",
            "namespace": NAMESPACE,
            "generation": weight,
            "creationTimestamp": CREATED,
        },
        "spec": {
            "parentRefs": [{"name": gateway}],
            "hostnames": [hostname],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": f"/r{i}/p{j}"}} for j in range(matches)],
                    "backendRefs": [{"name": "app", "port": 80, "weight": weight}],
                }
            ],
        },
    }


def gateway(name: str) -> Gateway:
    return parse_gateway({**GATEWAY_BODY, "metadata": {"name": name, "namespace": NAMESPACE, "generation": 1}})


@contextmanager
def pairwise_check() -> Iterator[None]:
    """While inside, translate finds a match's holder as it did before the index: by scanning every earlier entry of
    the host (the reference kept in tests/unit/precedence_reference.py)."""
    original = translate_module._parent_conditions
    current: dict[str, Any] = {}

    def recording(state: Any, *rest: Any) -> Any:
        current["tables"] = state.tables
        return original(state, *rest)

    def scanning(route: Any, actions: Any, atts: Any, holders: Any) -> str:
        return pairwise_taken_matches(route, actions, atts, current["tables"])

    with (
        mock.patch.object(translate_module, "_parent_conditions", recording),
        mock.patch.object(translate_module, "taken_matches", scanning),
    ):
        yield


def whole(memo: ActionMemo) -> Callable[[Inputs], Translation]:
    """The operator's translation before it was cut per Gateway: one pass over every Gateway's routes."""
    return lambda store: translate_module._assemble(store, {"*": translate_module._translate_pass(store, memo)})


def inputs(routes: tuple[HTTPRoute, ...], gateways: tuple[Gateway, ...] = ()) -> Inputs:
    services = {
        (NAMESPACE, "app"): ServiceInfo(NAMESPACE, "app", (ServicePort(name="http", port=80, target_port=8080),))
    }
    slices = {
        (NAMESPACE, "app"): [
            SliceInfo(
                namespace=NAMESPACE,
                name="app-abcde",
                service="app",
                ports=(("http", 8080),),
                endpoints=(SliceEndpoint("10.0.0.1", True, "app-pod"),),
            )
        ]
    }
    return Inputs(
        classes=(parse_gateway_class(CLASS_BODY),),
        gateways=gateways or (parse_gateway(GATEWAY_BODY),),
        routes=routes,
        services=services,
        slices=slices,
    )


def cpu_seconds(store: Inputs, rounds: int, run: Callable[[Inputs], Translation] = translate) -> tuple[float, bool]:
    """Best CPU seconds of `run` (`translate`), and whether the Gateway was refused (a shared host over
    MAX_HOST_ENTRIES: every rule is still built and sorted, then the table is refused, so the cost is measured all
    the same)."""
    best = float("inf")
    refused = False
    for _ in range(rounds):
        gc.collect()
        t0 = time.process_time()
        t = run(store)
        best = min(best, time.process_time() - t0)
        assert len(t.actions) == len(store.routes), "every rule must be built"
        refused = bool(t.refused)
    return best, refused


def flip_on_b(routes_a: tuple[HTTPRoute, ...], rounds: int, pairwise: bool) -> dict[str, float]:
    """CPU seconds of the translation after a weight flip on Gateway B while Gateway A holds `routes_a`, each memo
    warm with the store before the flip (best of `rounds` flips, alternating B's weight so each is a change)."""
    gws = (gateway("gw"), gateway("b"))
    b = [parse_httproute(route_body(0, 1, "b.example", gateway="b", weight=w)) for w in (1, 2)]
    stores = [inputs((*routes_a, b[w]), gws) for w in (0, 1)]
    out: dict[str, float] = {}
    shapes: dict[str, Callable[[Inputs], Translation]] = {"whole": whole(ActionMemo())}
    if pairwise:
        shapes["whole_pairwise"] = whole(ActionMemo())
    memo = TranslationMemo()
    shapes["per_gateway"] = lambda store: translate(store, memo)
    for shape, run in shapes.items():
        with pairwise_check() if shape == "whole_pairwise" else contextlib.nullcontext():
            run(stores[0])  # warm
            best = float("inf")
            for k in range(rounds):
                gc.collect()
                t0 = time.process_time()
                t = run(stores[(k + 1) % 2])
                best = min(best, time.process_time() - t0)
                assert len(t.actions) == len(routes_a) + 1, "every rule must be built"
        out[shape] = round(best, 4)
    out["whole_over_per_gateway"] = round(out["whole"] / max(out["per_gateway"], 1e-6), 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="25,50,100,1000", help="route counts, comma-separated")
    ap.add_argument("--matches", type=int, default=61, help="PathPrefix matches per route")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before-max", type=int, default=100, help="largest N timed with the pairwise check too")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    counts = [int(x) for x in args.n.split(",")]
    rows: list[dict[str, Any]] = []
    for n in counts:
        row: dict[str, Any] = {"routes": n, "matches": n * args.matches}
        for shape in ("shared", "own"):
            routes = tuple(
                parse_httproute(route_body(i, args.matches, "shop.example" if shape == "shared" else f"app{i}.example"))
                for i in range(n)
            )
            s, refused = cpu_seconds(inputs(routes), args.rounds)
            row[shape] = {"seconds": round(s, 4), "per_route_ms": round(1000 * s / n, 3), "refused": refused}
            if shape == "shared":
                shared_routes = routes
                if n <= args.before_max:
                    with pairwise_check():
                        b, _ = cpu_seconds(inputs(routes), args.rounds)
                    row["shared_before"] = {"seconds": round(b, 4), "per_route_ms": round(1000 * b / n, 3)}
                    row["before_over_after"] = round(b / s, 1)
        row["flip_on_b"] = flip_on_b(shared_routes, args.rounds, pairwise=n <= args.before_max)
        rows.append(row)
        print(json.dumps(row), flush=True)
    first = rows[0]
    for row in rows:
        for shape in ("shared", "own", "shared_before"):
            if shape not in row or shape not in first:
                continue
            row[shape]["per_route_vs_first"] = round(row[shape]["per_route_ms"] / first[shape]["per_route_ms"], 2)
    doc = {
        "bench": "translate-shared-host",
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "matches_per_route": args.matches,
        "rounds": args.rounds,
        "before_max": args.before_max,
        "rows": rows,
    }
    out = args.out or Path("bench/results") / f"{doc['date']}-translate-shared-host-before-after.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
