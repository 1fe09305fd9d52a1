"""`status httproute/NAME`: what the gateway controllers say about an HTTPRoute, per parent, and where each rule
sends traffic.

Per parent (`status.parents[]`, one per parentRef and controller): the route's conditions there (Accepted,
ResolvedRefs, and any other the controller writes), each marked stale when written for an older metadata.generation,
beside the parent Gateway's own `Programmed` (whether its data plane serves its current configuration; read from the
Gateway, stale against the Gateway's generation). A parentRef with no status entry is listed as such: no controller
has taken it (yet). Per rule: its backendRefs in order, with the name each has in the rule's split (the one `--set`
takes), its weight and its share of the rule's total (a ref that is no Service is not in the split: its share answers
500).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from trafficsplit.cli.common import pct
from trafficsplit.cli.kube import Ref
from trafficsplit.cli.table import MISSING, as_int, cell, table
from trafficsplit.core.gatewayapi.backends import split_backend_names
from trafficsplit.core.gatewayapi.httproute import HTTPRoute, ParentRef

# A parent Gateway as read: its body, or why it could not be read (not found, forbidden).
GatewayRead = Mapping[str, Any] | str


def _conditions(raw: Any, generation: int | None) -> list[dict[str, Any]]:
    out = []
    for c in raw if isinstance(raw, list) else []:
        if not isinstance(c, Mapping):
            continue
        observed = as_int(c.get("observedGeneration"))
        out.append(
            {
                "type": c.get("type"),
                "status": c.get("status"),
                "reason": c.get("reason"),
                "message": str(c.get("message") or "")[:1000],
                "observedGeneration": observed,
                "lastTransitionTime": c.get("lastTransitionTime"),
                "stale": observed != generation,
            }
        )
    return out


def _same_parent(written: Mapping[str, Any], ref: ParentRef, route_namespace: str) -> bool:
    """Whether a status entry's parentRef is `ref` (the status echoes the ref, group and kind defaulted)."""
    return (
        written.get("name") == ref.name
        and (written.get("namespace") or route_namespace) == ref.namespace
        and written.get("sectionName") == ref.section_name
        and written.get("port") == ref.port
        and (written.get("kind") or "Gateway") == ref.kind
    )


def gateway_keys(route: HTTPRoute) -> list[tuple[str, str]]:
    """The (namespace, name) of each parent Gateway, once each, in parentRef order."""
    keys: list[tuple[str, str]] = []
    for p in route.parent_refs:
        key = (p.namespace, p.name)
        if p.kind == "Gateway" and key not in keys:
            keys.append(key)
    return keys


def _gateway_view(key: tuple[str, str], read: GatewayRead | None) -> dict[str, Any] | None:
    if read is None:
        return None
    view: dict[str, Any] = {"namespace": key[0], "name": key[1]}
    if isinstance(read, str):
        return {**view, "error": read, "generation": None, "programmed": None}
    generation = as_int((read.get("metadata") or {}).get("generation"))
    conds = _conditions((read.get("status") or {}).get("conditions"), generation)
    programmed = next((c for c in conds if c["type"] == "Programmed"), None)
    return {**view, "error": None, "generation": generation, "programmed": programmed}


def route_status_view(
    ref: Ref, obj: Mapping[str, Any], route: HTTPRoute, gateways: Mapping[tuple[str, str], GatewayRead]
) -> dict[str, Any]:
    """The JSON shape of `status httproute/NAME --json` (docs/cli.md)."""
    generation = as_int((obj.get("metadata") or {}).get("generation"))
    raw_parents = (obj.get("status") or {}).get("parents")
    entries = [e for e in raw_parents if isinstance(e, Mapping)] if isinstance(raw_parents, list) else []
    parents = []
    for p in route.parent_refs:
        mine = [e for e in entries if _same_parent(e.get("parentRef") or {}, p, route.meta.namespace)]
        gateway = (
            _gateway_view((p.namespace, p.name), gateways.get((p.namespace, p.name))) if p.kind == "Gateway" else None
        )
        parents.append(
            {
                "parentRef": p.to_dict(),
                "gateway": gateway,
                "controllers": [
                    {
                        "controllerName": e.get("controllerName"),
                        "conditions": _conditions(e.get("conditions"), generation),
                    }
                    for e in mine
                ],
            }
        )
    rules = []
    for rule in route.rules:
        names = split_backend_names(rule.backend_refs)
        total = sum(b.weight for b in rule.backend_refs)
        backends = [
            {
                "name": names[j],
                "inSplit": (b.group, b.kind) == ("", "Service"),
                "group": b.group,
                "kind": b.kind,
                "namespace": b.namespace,
                "backend": b.name,
                "port": b.port,
                "weight": b.weight,
                "share": pct(Fraction(b.weight, total)) if total else None,
            }
            for j, b in enumerate(rule.backend_refs)
        ]
        rules.append({"index": rule.index, "name": rule.name, "backends": backends})
    return {
        "httproute": {"namespace": ref.namespace, "name": ref.name},
        "generation": generation,
        "parents": parents,
        "rules": rules,
    }


def _parent_text(ref: Mapping[str, Any]) -> str:
    kind = ref.get("kind") or "Gateway"
    where = f"{ref.get('namespace')}/{ref['name']}" if ref.get("namespace") else ref["name"]
    extra = "".join(f" {k} {ref[k]}" for k in ("sectionName", "port") if ref.get(k) is not None)
    return f"{kind.lower()} {where}{extra}"


def _condition_rows(source: str, conds: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    return [
        [
            source,
            c["type"],
            c["status"],
            c["reason"],
            f"{cell(c['observedGeneration'])}{' (stale)' if c['stale'] else ''}",
            c["lastTransitionTime"],
            c["message"],
        ]
        for c in conds
    ]


def render_route_status(view: Mapping[str, Any]) -> str:
    ref = view["httproute"]
    lines = [f"httproute {ref['namespace']}/{ref['name']}", f"metadata.generation:  {cell(view['generation'])}", ""]
    lines.append("parents:")
    if not view["parents"]:
        lines.append(f"  {MISSING} (no parentRefs: the route is attached to no Gateway)")
    for parent in view["parents"]:
        controllers = parent["controllers"]
        by = f" (status by {', '.join(cell(c['controllerName']) for c in controllers)})" if controllers else ""
        lines.append(f"  {_parent_text(parent['parentRef'])}{by}")
        rows: list[list[Any]] = []
        for c in controllers:  # two controllers on one parent: each row says whose
            source = "route" if len(controllers) == 1 else f"route ({c['controllerName']})"
            rows += _condition_rows(source, c["conditions"])
        gw = parent["gateway"]
        if gw is not None and gw["programmed"] is not None:
            rows += _condition_rows("gateway", [gw["programmed"]])
        if rows:
            lines += table(["FROM", "TYPE", "STATUS", "REASON", "OBSERVED", "SINCE", "MESSAGE"], rows, indent="    ")
        if not parent["controllers"]:
            lines.append(f"    {MISSING} (no status for this parent: no controller has taken it yet)")
        if gw is not None and gw["error"]:
            lines.append(f"    gateway: {gw['error']}")
        elif gw is not None and gw["programmed"] is None:
            lines.append(f"    gateway: no Programmed condition written (generation {cell(gw['generation'])})")
    lines += ["", "rules:"]
    for rule in view["rules"]:
        lines.append(f"  rule {rule['index']}" + (f" ({rule['name']})" if rule["name"] else ""))
        if not rule["backends"]:
            lines.append(f"    {MISSING} (no backendRefs)")
            continue
        rows = [
            [
                b["name"] if b["inSplit"] else f"{b['name']} (not a Service: answers 500)",
                (b["backend"] if b["namespace"] == ref["namespace"] else f"{b['namespace']}/{b['backend']}")
                if b["inSplit"]
                else f"{b['group']}/{b['kind']} {b['backend']}",
                b["port"],
                b["weight"],
                b["share"],
            ]
            for b in rule["backends"]
        ]
        lines += table(["NAME", "SERVICE", "PORT", "WEIGHT", "SHARE"], rows, indent="    ")
    return "\n".join(lines) + "\n"
