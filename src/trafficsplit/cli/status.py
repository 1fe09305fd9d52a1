"""`status NAME`: what the operator says about a TrafficSplit, laid out for a person (or as JSON for a script).

Why: `kubectl get ts` shows one line and `-o yaml` shows everything unordered; during a rollout the questions are
"did the operator see my change?" (observedGeneration against metadata.generation, per condition), "do all
dataplanes serve it?" (Published and the acknowledged dataplane generation), "where does traffic go?" (per-backend
weight, share and ready endpoints) and "what did my last change do to sticky sessions?" (status.displacement). The
status shape is `trafficsplit.core.control.status.SplitStatus`, the value the operator writes; any field it has not
written shows as "-".
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from trafficsplit.cli.bill import fetch_bills, render_bills
from trafficsplit.cli.common import EXIT_OK, add_json_flag, emit_json
from trafficsplit.cli.kplan import format_backends
from trafficsplit.cli.kube import Cluster, Ref, add_kube_arguments, kube_errors
from trafficsplit.core.control.spec import declared_backends
from trafficsplit.core.control.status import SplitStatus
from trafficsplit.core.model.vocabulary import ConditionType

MISSING = "-"


def register(sub: Any) -> None:
    p = sub.add_parser("status", help="conditions, served weights, endpoints and last displacement of a TrafficSplit")
    p.add_argument("name", metavar="NAME", help="the TrafficSplit")
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


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def status_view(ref: Ref, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON shape of `status --json`: the fields the operator writes, plus the staleness it implies; None for a
    field the operator has not written."""
    meta = obj.get("metadata") or {}
    raw_status = obj.get("status")
    status = SplitStatus.from_dict(raw_status if isinstance(raw_status, Mapping) else {})
    generation = _int(meta.get("generation"))
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


def _cell(value: Any) -> str:
    if value is None or value == "":
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    return " ".join(str(value).split())  # a multi-line message stays on its row


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> list[str]:
    """Left-aligned columns two spaces apart, like kubectl's; the last column is not padded."""
    cells = [list(header)] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return [
        indent
        + "  ".join(c.ljust(w) if i < len(row) - 1 else c for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        for row in cells
    ]


def _ready(b: Mapping[str, Any]) -> str:
    ready, total = _int(b.get("readyEndpoints")), _int(b.get("endpoints"))
    if ready is None and total is None:
        return MISSING
    return f"{_cell(ready)}/{_cell(total)}"


def _acked_text(view: Mapping[str, Any]) -> str:
    acked = view["dataplaneGenerationAcked"]
    if acked is None:
        return ""
    if acked:
        return " (acknowledged by every dataplane: Published)"
    pub = next(c for c in view["conditions"] if c["type"] == ConditionType.PUBLISHED)
    why = "the condition is stale" if pub["stale"] else f"Published={_cell(pub['status'])} {_cell(pub['reason'])}"
    return f" (not known to be acknowledged by every dataplane: {why})"


def render_status(view: Mapping[str, Any]) -> str:
    ref = view["trafficsplit"]
    gen, observed = view["generation"], view["observedGeneration"]
    weights = view["weights"]
    lines = [f"trafficsplit {ref['namespace']}/{ref['name']}"]
    observed_text = _cell(observed)
    if view["stale"]:
        observed_text += f" (stale: the operator has not reported on metadata.generation {_cell(gen)} yet)"
    served_text = _cell(weights["served"])
    if weights["served"] and weights["served"] != weights["spec"]:
        served_text += " (differs from spec: not served yet, or not accepted)"
    lines += [
        f"metadata.generation:   {_cell(gen)}",
        f"observedGeneration:    {observed_text}",
        f"spec weights:          {_cell(weights['spec'])}",
        f"served weights:        {served_text}",
        f"dataplane generation:  {_cell(view['dataplaneGeneration'])}{_acked_text(view)}",
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
                f"{_cell(c['observedGeneration'])}{' (stale)' if c['stale'] else ''}",
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
        moved = f"{_cell(d.get('repinnedShare'))} of sticky sessions re-pinned"
        lines += [
            f"  {_cell(d.get('from'))} -> {_cell(d.get('to'))}: {moved}",
            f"  total changed: {_cell(d.get('totalChanged'))}",
        ]
        if d.get("totalChanged") or d.get("rebalanced"):
            lines.append(
                f"  keeping the total: {_cell(d.get('rebalanced'))} would have re-pinned "
                f"{_cell(d.get('rebalancedRepinnedShare'))}"
            )
    else:
        lines.append(f"  {MISSING}")
    return "\n".join(lines) + "\n"


@kube_errors
def run(args: argparse.Namespace, out: TextIO) -> int:
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
