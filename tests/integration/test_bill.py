"""The live stickiness bill through a real Envoy: a known skewed mix of sessions, and the processor's report of it.

The mix is the reference one scaled down (1 session of 200 requests, 9 of 40, 90 of 5: 1,010 requests); each
session's backend is the core's pick for its cookie, so the true per-backend shares are computed from the core, and
the true largest shares from the mix. The sketch has more counters than there are sessions, so its counts must be
exact; the session shares are HyperLogLog estimates, checked within its error.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from fractions import Fraction

import pytest

from tests.support.dataplane import Dataplane, run_sessions, split_doc
from trafficsplit.cli.bill import fetch_bills, render_bills
from trafficsplit.core.control.simulate import expand_clients, parse_client_rows
from trafficsplit.core.model.weights import Weights

pytestmark = [pytest.mark.envoy]

HOST = "shop.example"
MIX = "major:1:200,medium:9:40,minor:90:5"
WEIGHTS = {"stable": 80, "canary": 20}


def _gauges(text: str, name: str) -> dict[frozenset[tuple[str, str]], float]:
    """Samples of one metric family by label set (label values here never contain ',' or '=')."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels_text, value = line[len(name) + 1 :].rsplit("} ", 1)
            pairs = (p.split("=", 1) for p in labels_text.split(","))
            out[frozenset((k, v.strip('"')) for k, v in pairs)] = float(value)
    return out


def test_the_reported_bill_matches_the_known_mix(dataplane: Dataplane) -> None:
    dataplane.publish([split_doc(HOST, WEIGHTS, sticky=True, debug=False)])
    clients = expand_clients(parse_client_rows(MIX))
    total = sum(r for _, r in clients)
    # Each session sends its requests in order over one connection, as a browser would, 32 sessions at a time.
    per_session = {name: requests for name, requests in clients}
    by_count: dict[int, list[str]] = {}
    for name, requests in per_session.items():
        by_count.setdefault(requests, []).append(name)
    for requests, names in by_count.items():
        result = asyncio.run(run_sessions(dataplane.port, HOST, "ts", names, requests))
        assert all(r.status == 200 for responses in result for r in responses)

    pick = Weights.of(list(WEIGHTS.items())).pick
    true_requests: Counter[str] = Counter()
    true_sessions: Counter[str] = Counter()
    for name, requests in clients:
        true_requests[pick(name)] += requests
        true_sessions[pick(name)] += 1

    text = dataplane.processor.metrics_text()
    split = ("split", "default/split-0")
    assert _gauges(text, "trafficsplit_stickiness_requests") == {frozenset([split]): total}
    s = Fraction(200, total)
    assert _gauges(text, "trafficsplit_stickiness_serial_fraction")[frozenset([split])] == pytest.approx(float(s))
    assert _gauges(text, "trafficsplit_stickiness_speedup_bound")[frozenset([split])] == pytest.approx(float(1 / s))
    largest = _gauges(text, "trafficsplit_stickiness_largest_session_share")
    assert [largest[frozenset([split, ("rank", str(k))])] for k in range(1, 6)] == pytest.approx(
        [200 / total] + [40 / total] * 4
    )
    req_share = _gauges(text, "trafficsplit_stickiness_backend_request_share")
    ses_share = _gauges(text, "trafficsplit_stickiness_backend_session_share")
    for backend in WEIGHTS:
        key = frozenset([split, ("backend", backend)])
        assert req_share[key] == pytest.approx(true_requests[backend] / total)
        assert ses_share[key] == pytest.approx(true_sessions[backend] / len(clients), abs=0.03)
    # `kubectl trafficsplit status --gateway-metrics` reads the same figures.
    (bill,) = fetch_bills([dataplane.processor.metrics_url], "default/split-0")
    assert bill["requests"] == total and bill["serialFraction"] == pytest.approx(float(s))
    assert {b["name"]: b["requestShare"] for b in bill["backends"]} == pytest.approx(
        {b: true_requests[b] / total for b in WEIGHTS}
    )
    text = "\n".join(render_bills([bill]))
    assert "serial fraction s = 0.1980; speedup bound 1/s = 5.05" in text
    print(text)
