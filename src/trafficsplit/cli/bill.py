"""The live stickiness bill of a split, read from the gateway replicas' metrics for `status --gateway-metrics`.

Why metrics and not the publish API: the bill is already exported for dashboards (`trafficsplit_stickiness_*`), so
the CLI shows exactly what a team's Prometheus shows, needs no new authenticated query on the publish port (which
only the operator may reach), and works with `kubectl port-forward` to any gateway pod. Each replica reports the
traffic it decided, so the view is per replica: with several replicas behind a Service a session's requests can be
spread over them, and their largest sessions cannot be summed.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Sequence
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from trafficsplit.cli.common import UsageError, pct

PREFIX = "trafficsplit_stickiness_"
MAX_METRICS_BYTES = 16 * 1024 * 1024
TIMEOUT_SECONDS = 10


def bill_from_text(text: str, split: str) -> dict[str, Any]:
    """One replica's bill of `split` (namespace/name) from its Prometheus text; `requests` is 0 when it has none."""
    view: dict[str, Any] = {
        "requests": 0,
        "largestSessionShares": [],
        "serialFraction": None,
        "speedupBound": None,
        "backends": [],
    }
    largest: dict[int, float] = {}
    backends: dict[str, dict[str, Any]] = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith(PREFIX):
            continue
        field = family.name.removeprefix(PREFIX)
        for sample in family.samples:
            if sample.labels.get("split") != split:
                continue
            if field == "requests":
                view["requests"] = int(sample.value)
            elif field == "serial_fraction":
                view["serialFraction"] = sample.value
            elif field == "speedup_bound":
                view["speedupBound"] = sample.value
            elif field == "largest_session_share":
                largest[int(sample.labels["rank"])] = sample.value
            elif field.startswith("backend_"):
                b = backends.setdefault(sample.labels["backend"], {"name": sample.labels["backend"]})
                key = {"request_share": "requestShare", "session_share": "sessionShare", "sessions": "sessions"}
                if field.removeprefix("backend_") in key:
                    b[key[field.removeprefix("backend_")]] = sample.value
    view["largestSessionShares"] = [largest[k] for k in sorted(largest)]
    view["backends"] = list(backends.values())
    return view


def fetch_bills(urls: Sequence[str], split: str) -> list[dict[str, Any]]:
    out = []
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"--gateway-metrics: {url!r} must be an http(s) URL of a gateway's /metrics")
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as r:
                text = r.read(MAX_METRICS_BYTES).decode("utf-8", "replace")
        except OSError as exc:
            raise UsageError(f"--gateway-metrics: {url}: {exc}") from exc
        out.append({"source": url, **bill_from_text(text, split)})
    return out


def render_bills(bills: Sequence[dict[str, Any]]) -> list[str]:
    lines = ["", "stickiness bill (live, per gateway replica):"]
    for b in bills:
        if not b["requests"]:
            lines.append(f"  {b['source']}: no sticky requests recorded for this split")
            continue
        s, bound = b["serialFraction"], b["speedupBound"]
        top = ", ".join(pct(x, 1) for x in b["largestSessionShares"])
        lines.append(f"  {b['source']}: {b['requests']} requests")
        lines.append(f"    largest sessions' shares: {top}")
        lines.append(f"    serial fraction s = {s:.4f}; speedup bound 1/s = {bound:.2f}")
        for backend in b["backends"]:
            lines.append(
                f"    {backend['name']:<20} {pct(backend.get('sessionShare', 0), 1)} of sessions, "
                f"{pct(backend.get('requestShare', 0), 1)} of requests"
            )
    return lines
