"""`status --gateway-metrics`: the bill read back from the processor's own metrics exposition."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from trafficsplit.cli.bill import bill_from_text, fetch_bills, render_bills
from trafficsplit.cli.common import UsageError
from trafficsplit.core.decide.sketch import SplitBills
from trafficsplit.core.model.hashing import key_hash
from trafficsplit.extproc.metrics import Metrics


def test_the_bill_survives_the_metrics_round_trip() -> None:
    bills = SplitBills(capacity=16)
    metrics = Metrics()
    metrics.watch_bills(bills.reports)
    for i, (backend, n) in enumerate([("stable", 30), ("canary", 10), ("stable", 60)]):
        for _ in range(n):
            bills.record("ns/shop", ("stable", "canary"), backend, f"s{i}", key_hash(f"s{i}"))
    bills.record("ns/other", ("a",), "a", "x", key_hash("x"))
    view = bill_from_text(generate_latest(metrics.registry).decode(), "ns/shop")
    assert view["requests"] == 100 and view["serialFraction"] == 0.6 and view["speedupBound"] == pytest.approx(1 / 0.6)
    assert view["largestSessionShares"] == [0.6, 0.3, 0.1]
    shares = {b["name"]: (b["requestShare"], round(b["sessionShare"], 2)) for b in view["backends"]}
    assert shares == {"stable": (0.9, 0.67), "canary": (0.1, 0.33)}
    text = "\n".join(render_bills([{"source": "replica-1", **view}]))
    assert "stable               66.7% of sessions, 90.0% of requests" in text
    assert bill_from_text("", "ns/shop")["requests"] == 0


@pytest.mark.parametrize("url", ["file:///etc/passwd", "http://127.0.0.1:1/metrics"])
def test_a_bad_or_unreachable_url_is_a_usage_error(url: str) -> None:
    with pytest.raises(UsageError, match="--gateway-metrics"):
        fetch_bills([url], "ns/shop")
