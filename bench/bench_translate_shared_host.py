"""`translate()` of one Gateway's store as its routes grow, all on one shared hostname against one hostname each.

Why: issue 28 measured a neighbour's weight flip waiting 46 s behind another tenant's Gateway holding 100 HTTPRoutes of
61 PathPrefix matches each on one hostname. On a shared hostname every match of a route was compared with every
earlier route's match of that host (the duplicate-match check, `gatewayapi.precedence.taken_matches`), so the pass
grew with the square of the matches. This measures the pure translation, per route, at growing N, the two shapes
side by side in one process (CPU seconds of this process, best of --rounds), so the growth is read as a ratio:
`per_route(N) / per_route(smallest N)` stays near 1 when the translation is linear.

The store: one GatewayClass, one Gateway (one HTTP listener on port 80, no hostname), N HTTPRoutes, each with
--matches PathPrefix matches (`/r<i>/p<j>`, distinct, so no match is taken) in one rule with one backendRef; `shared`:
every route names `shop.example`; `own`: route i names `app<i>.example`. One Service with one ready endpoint. At
1,000 routes the shared host holds 61,000 entries, over a virtual host's bound (MAX_HOST_ENTRIES, 8,192): that Gateway
is refused alone (`Translation.refused`) after the same work, which is what is timed.

Not a test: nothing asserted. Writes `bench/results/<date>-translate-shared-host.json`.

    PYTHONPATH=src:operator:extproc:. python bench/bench_translate_shared_host.py [--n 25,50,100,1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import platform
import time
from pathlib import Path
from typing import Any

from trafficsplit.core.control.resolve import ServiceInfo, ServicePort, SliceEndpoint, SliceInfo
from trafficsplit.core.gatewayapi.httproute import HTTPRoute, parse_httproute
from trafficsplit.core.gatewayapi.objects import parse_gateway, parse_gateway_class
from trafficsplit.core.gatewayapi.translate import Inputs, translate

NAMESPACE = "apps"
CREATED = "2026-01-01T00:00:00Z"
CLASS_BODY = {"metadata": {"name": "trafficsplit"}, "spec": {"controllerName": "trafficsplit.dev/gateway-controller"}}
GATEWAY_BODY = {
    "metadata": {"name": "gw", "namespace": NAMESPACE, "generation": 1},
    "spec": {"gatewayClassName": "trafficsplit", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
}


def route_body(i: int, matches: int, hostname: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"r{i}", "namespace": NAMESPACE, "generation": 1, "creationTimestamp": CREATED},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "hostnames": [hostname],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": f"/r{i}/p{j}"}} for j in range(matches)],
                    "backendRefs": [{"name": "app", "port": 80}],
                }
            ],
        },
    }


def inputs(routes: tuple[HTTPRoute, ...]) -> Inputs:
    services = {(NAMESPACE, "app"): ServiceInfo(NAMESPACE, "app", (ServicePort("http", 80, 8080),))}
    slices = {
        (NAMESPACE, "app"): [
            SliceInfo(
                namespace=NAMESPACE,
                name="app-abcde",
                service="app",
                ports=(("http", 8080),),
                endpoints=(SliceEndpoint("10.0.0.1", True, False, "app-pod"),),
            )
        ]
    }
    return Inputs(
        classes=(parse_gateway_class(CLASS_BODY),),
        gateways=(parse_gateway(GATEWAY_BODY),),
        routes=routes,
        services=services,
        slices=slices,
    )


def cpu_seconds(store: Inputs, rounds: int) -> tuple[float, bool]:
    """Best CPU seconds of `translate`, and whether the Gateway was refused (a shared host over MAX_HOST_ENTRIES:
    every rule is still built and sorted, then the table is refused, so the cost is measured all the same)."""
    best = float("inf")
    refused = False
    for _ in range(rounds):
        gc.collect()
        t0 = time.process_time()
        t = translate(store)
        best = min(best, time.process_time() - t0)
        assert len(t.actions) == len(store.routes), "every rule must be built"
        refused = bool(t.refused)
    return best, refused


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="25,50,100,1000", help="route counts, comma-separated")
    ap.add_argument("--matches", type=int, default=61, help="PathPrefix matches per route")
    ap.add_argument("--rounds", type=int, default=3)
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
        rows.append(row)
        print(json.dumps(row), flush=True)
    first = rows[0]
    for row in rows:
        for shape in ("shared", "own"):
            row[shape]["per_route_vs_first"] = round(row[shape]["per_route_ms"] / first[shape]["per_route_ms"], 2)
    doc = {
        "bench": "translate-shared-host",
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "matches_per_route": args.matches,
        "rounds": args.rounds,
        "rows": rows,
    }
    out = args.out or Path("bench/results") / f"{doc['date']}-translate-shared-host.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
