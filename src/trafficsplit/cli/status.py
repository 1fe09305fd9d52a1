"""`status NAME`: what the operator says about a TrafficSplit, laid out for a person (or as JSON for a script).

Why: `kubectl get ts` shows one line and `-o yaml` shows everything unordered; during a rollout the questions are
"did the operator see my change?" (observedGeneration against metadata.generation, per condition), "do all
dataplanes serve it?" (Published and the acknowledged dataplane generation), "where does traffic go?" (per-backend
weight, share and ready endpoints) and "what did my last change do to sticky sessions?" (status.displacement). The
status shape is `trafficsplit.core.control.status.SplitStatus`, the value the operator writes; any field it has not
written shows as "-". `status httproute/NAME` is routestatus.py's view of an HTTPRoute.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any, TextIO

from trafficsplit.cli.bill import fetch_bills, render_bills
from trafficsplit.cli.common import EXIT_OK, UsageError, add_json_flag, emit_json
from trafficsplit.cli.kplan import format_backends
from trafficsplit.cli.kube import Cluster, KubeError, Ref, add_kube_arguments, kube_errors
from trafficsplit.cli.routes import parse_route, route_name
from trafficsplit.cli.routestatus import GatewayRead, gateway_keys, render_route_status, route_status_view
from trafficsplit.cli.table import MISSING, as_int, cell, table
from trafficsplit.core.control.spec import declared_backends
from trafficsplit.core.control.status import SplitStatus
from trafficsplit.core.model.vocabulary import ConditionType


def register(sub: Any) -> None:
    p = sub.add_parser(
        "status",
        help="conditions, served weights, endpoints and last displacement of a TrafficSplit; an HTTPRoute's parents' "
        "conditions and its rules' weights",
    )
    p.add_argument(
        "name",
        metavar="NAME",
        help="the TrafficSplit, or httproute/NAME (per parent Gateway: Accepted, ResolvedRefs, Programmed; per "
        "rule: backends and weights)",
    )
    p.add_argument(
        "--gateway-metrics",
        action="append",
        default=[],
        metavar="URL",
        help="also show the live stickiness bill from a gateway replica's /metrics (repeatable), e.g. "
        "http://127.0.0.1:9003/metrics after kubectl port-forward",
    )
    add_json_flag(p)
    add_kube_arguments(p)
    p.set_defaults(handler=run)


def status_view(ref: Ref, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON shape of `status --json`: the fields the operator writes, plus the staleness it implies; None for a
    field the operator has not written."""
    meta = obj.get("metadata") or {}
    raw_status = obj.get("status")
    status = SplitStatus.from_dict(raw_status if isinstance(raw_status, Mapping) else {})
    generation = as_int(meta.get("generation"))
    observed = status.observed_generation
    conditions = [{**c.to_dict(), "stale": c.observed_generation != generation} for c in status.conditions]
    spec_backends = declared_backends(obj.get("spec") or {})
    published = next((c for c in conditions if c["type"] == ConditionType.PUBLISHED), None)
    return {
        "trafficsplit": {"namespace": ref.namespace, "name": ref.name},
        "generation": generation,
        "observedGeneration": observed,
        "stale": observed != generation,
        "weights": {"spec": format_backends(spec_backends) or None, "served": status.weights},
        "dataplaneGeneration": status.generation,
        # Published=True for the current metadata.generation is the operator's word that every dataplane acked it.
        "dataplaneGenerationAcked": None
        if published is None
        else published["status"] == "True" and not published["stale"],
        "conditions": conditions,
        "backends": None if status.backends is None else [b.to_dict() for b in status.backends],
        "displacement": None if status.displacement is None else status.displacement.to_dict(),
    }


def _ready(b: Mapping[str, Any]) -> str:
    ready, total = as_int(b.get("readyEndpoints")), as_int(b.get("endpoints"))
    if ready is None and total is None:
        return MISSING
    return f"{cell(ready)}/{cell(total)}"


def _acked_text(view: Mapping[str, Any]) -> str:
    acked = view["dataplaneGenerationAcked"]
    if acked is None:
        return ""
    if acked:
        return " (acknowledged by every dataplane: Published)"
    pub = next(c for c in view["conditions"] if c["type"] == ConditionType.PUBLISHED)
    why = "the condition is stale" if pub["stale"] else f"Published={cell(pub['status'])} {cell(pub['reason'])}"
    return f" (not known to be acknowledged by every dataplane: {why})"


def render_status(view: Mapping[str, Any]) -> str:
    ref = view["trafficsplit"]
    gen, observed = view["generation"], view["observedGeneration"]
    weights = view["weights"]
    lines = [f"trafficsplit {ref['namespace']}/{ref['name']}"]
    observed_text = cell(observed)
    if view["stale"]:
        observed_text += f" (stale: the operator has not reported on metadata.generation {cell(gen)} yet)"
    served_text = cell(weights["served"])
    if weights["served"] and weights["served"] != weights["spec"]:
        served_text += " (differs from spec: not served yet, or not accepted)"
    lines += [
        f"metadata.generation:   {cell(gen)}",
        f"observedGeneration:    {observed_text}",
        f"spec weights:          {cell(weights['spec'])}",
        f"served weights:        {served_text}",
        f"dataplane generation:  {cell(view['dataplaneGeneration'])}{_acked_text(view)}",
        "",
        "conditions:",
    ]
    conditions = view["conditions"]
    if conditions:
        rows = [
            [
                c["type"],
                c["status"],
                c["reason"],
                f"{cell(c['observedGeneration'])}{' (stale)' if c['stale'] else ''}",
                c["lastTransitionTime"],
                c["message"],
            ]
            for c in conditions
        ]
        lines += table(["TYPE", "STATUS", "REASON", "OBSERVED", "SINCE", "MESSAGE"], rows)
    else:
        lines.append(f"  {MISSING} (none written: is the operator running?)")
    lines += ["", "backends (served):"]
    backends = view["backends"]
    if backends:
        rows = [
            [b.get("name"), b.get("service"), b.get("port"), b.get("weight"), b.get("share"), _ready(b)]
            for b in backends
        ]
        headers = ["NAME", "SERVICE", "PORT", "WEIGHT", "SHARE", "READY"]
        if any("liveSessions" in b for b in backends):  # sticky.mode persistent: the Drained signal's counts
            rows = [[*row, b.get("liveSessions")] for row, b in zip(rows, backends, strict=True)]
            headers.append("LIVE SESSIONS")
        lines += table(headers, rows)
    else:
        lines.append(f"  {MISSING}")
    lines += ["", "last displacement:"]
    d = view["displacement"]
    if d:
        moved = f"{cell(d.get('repinnedShare'))} of sticky sessions re-pinned"
        lines += [
            f"  {cell(d.get('from'))} -> {cell(d.get('to'))}: {moved}",
            f"  total changed: {cell(d.get('totalChanged'))}",
        ]
        if d.get("totalChanged") or d.get("rebalanced"):
            lines.append(
                f"  keeping the total: {cell(d.get('rebalanced'))} would have re-pinned "
                f"{cell(d.get('rebalancedRepinnedShare'))}"
            )
    else:
        lines.append(f"  {MISSING}")
    return "\n".join(lines) + "\n"


def _route_status(args: argparse.Namespace, name: str, out: TextIO) -> int:
    if args.gateway_metrics:
        raise UsageError("--gateway-metrics goes with a TrafficSplit (the bill is per split)")
    cluster = Cluster.connect(args)
    ref = Ref(cluster.namespace, name, "httproute")
    obj = cluster.get_httproute(name)
    route = parse_route(ref, obj)
    gateways: dict[tuple[str, str], GatewayRead] = {}
    for ns, gw in gateway_keys(route):
        try:
            gateways[(ns, gw)] = cluster.get_gateway(ns, gw)
        except KubeError as exc:  # the route's status still says what its controllers found
            gateways[(ns, gw)] = str(exc)
    view = route_status_view(ref, obj, route, gateways)
    if args.json:
        emit_json(view, out)
    else:
        out.write(render_route_status(view))
    return EXIT_OK


@kube_errors
def run(args: argparse.Namespace, out: TextIO) -> int:
    name = route_name(args.name)
    if name is not None:
        return _route_status(args, name, out)
    cluster = Cluster.connect(args)
    ref = cluster.ref(args.name)
    view = status_view(ref, cluster.get(args.name))
    if args.gateway_metrics:
        view["stickiness"] = fetch_bills(args.gateway_metrics, f"{ref.namespace}/{ref.name}")
    if args.json:
        emit_json(view, out)
    else:
        out.write(render_status(view))
        if args.gateway_metrics:
            out.write("\n".join(render_bills(view["stickiness"])) + "\n")
    return EXIT_OK
