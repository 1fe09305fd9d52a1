"""Disclosure (docs/spec.md, "Disclosure") through a real Envoy: every decision in the access log and the metrics,
none to clients.

One split covers every path the processor takes (weighted, match, a match passed over because its backend is not
ready, failover, minted and cookie keys) and a second, non-sticky one the request-id key; killing the processor shows
the fallback routes, with and without the affinity cookie. Debug headers are off: the decision header must not reach
clients, while the access log (JSON, fields from the processor's dynamic metadata and the route's metadata) says
everything. Expected values come from the core (`decide`, the rings), not from the log itself.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from tests.support.dataplane import Dataplane, Response, split_doc
from tests.support.waiting import poll
from trafficsplit.core.decide.request import Request
from trafficsplit.core.decide.split import Decision, decide
from trafficsplit.core.model.cookie import AffinityMinter

pytestmark = [pytest.mark.envoy]

HOST = "shop.example"
PLAIN = "plain.example"
PODS = {"stable": ["pod-a", "pod-b"], "canary": ["canary"]}
BACKEND_OF = {"pod-a": "stable", "pod-b": "stable", "canary": "canary", "blue": "blue"}


def _decide(dp: Dataplane, value: str) -> Decision:
    """The core's decision for a request to HOST carrying the affinity cookie `value` and no match header."""
    assert dp.held is not None
    split = dp.held.split_for(HOST)
    assert split is not None
    return decide(
        split, Request(authority="", cookie_lines=[f"ts={value}"], request_id="", headers={}), minter=AffinityMinter()
    )


def _cookie_for(dp: Dataplane, backend: str) -> str:
    """A cookie value whose weighted pick is `backend` (before failover), found with the core."""
    assert dp.held is not None
    split = dp.held.split_for(HOST)
    assert split is not None
    for i in range(1000):
        value = f"c{i}"
        if split.weights.pick(value) == backend:
            # And the whole decision (failover included) lands on stable, the only ready backend.
            assert _decide(dp, value).backend.name == "stable"
            return value
    raise AssertionError(f"no cookie picks {backend}")


def _decisions(text: str) -> dict[tuple[str, ...], float]:
    """`trafficsplit_decisions_total` by (split, backend, key_source, path, affinity)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("trafficsplit_decisions_total{"):
            labels_text, value = line[len("trafficsplit_decisions_total{") :].rsplit("} ", 1)
            labels = dict(pair.split("=", 1) for pair in labels_text.split(","))
            key = tuple(labels[k].strip('"') for k in ("split", "backend", "key_source", "path", "affinity"))
            out[key] = float(value)
    return out


def _log(dp: Dataplane, path: str) -> dict[str, Any]:
    """The access log line of the request to `path` (each test request has its own path)."""

    def find() -> dict[str, Any] | None:
        text = dp.envoy.access_log_path.read_text() if dp.envoy.access_log_path.exists() else ""
        for line in text.splitlines():
            entry: dict[str, Any] = json.loads(line)
            if entry.get("request_path") == path:
                return entry
        return None

    found: dict[str, Any] = poll(find, 10, f"access log line for {path}")
    return found


def _get(dp: Dataplane, host: str, path: str, headers: dict[str, str] | None = None) -> Response:
    r = dp.get(host, path=path, headers=headers)
    assert r.status == 200, r
    assert r.header("x-trafficsplit-decision") is None  # debug headers are opt-in, and off here
    return r


def test_every_path_is_in_the_access_log_and_the_metrics(dataplane: Dataplane) -> None:
    matches = [
        {"header": {"name": "x-beta", "value": "yes"}, "backend": "canary"},  # canary is not ready: passed over
        {"header": {"name": "x-alpha", "value": "yes"}, "backend": "stable"},
    ]
    sticky = split_doc(HOST, {"stable": 50, "canary": 50}, sticky=True, endpoint_affinity=True, debug=False)
    sticky["matches"] = matches
    plain = split_doc(PLAIN, {"blue": 100}, debug=False)
    gen, _ = dataplane.publish([sticky, plain], endpoints={**PODS}, ready={"canary": False})
    to_stable, to_canary = _cookie_for(dataplane, "stable"), _cookie_for(dataplane, "canary")

    cases = {
        "/weighted": (HOST, {"cookie": f"ts={to_stable}"}),
        "/failover": (HOST, {"cookie": f"ts={to_canary}"}),
        "/minted": (HOST, {}),
        "/match": (HOST, {"cookie": f"ts={to_stable}", "x-alpha": "yes"}),
        "/passed-over": (HOST, {"cookie": f"ts={to_stable}", "x-beta": "yes"}),
        "/request-id": (PLAIN, {}),
    }
    want: dict[str, tuple[str, str, bool, bool, str]] = {
        "/weighted": ("stable", "cookie", True, True, "weighted"),
        "/failover": ("stable", "cookie", True, True, "failover"),
        "/minted": ("stable", "minted", False, True, ""),  # the path is the core's for the minted cookie, below
        "/match": ("stable", "cookie", True, False, "match"),
        "/passed-over": ("stable", "cookie", True, True, "match-passed-over"),
        "/request-id": ("blue", "request-id", False, False, "weighted"),
    }
    counted: Counter[tuple[str, ...]] = Counter()
    for path, (host, headers) in cases.items():
        r = _get(dataplane, host, path, headers)
        entry = _log(dataplane, path)
        backend, source, session, affinity, decided = want[path]
        if path == "/minted":
            minted = r.cookie("ts")
            assert minted is not None, r.headers
            decided = _decide(dataplane, minted).path  # weighted or failover, as the minted key hashes
        assert entry["route"] == "decided", entry
        assert entry["generation"] == gen.number
        assert entry["key_source"] == source and entry["session_id_present"] is session, entry
        assert entry["affinity_applied"] is affinity, entry
        assert entry["backend"] == backend == BACKEND_OF[r.backend], entry
        assert entry["path"] == decided, entry
        split_key = f"default/{'split-0' if host == HOST else 'split-1'}"
        counted[(split_key, backend, source, decided, "true" if affinity else "false")] += 1
        assert entry["cluster"] == f"default/{'split-0' if host == HOST else 'split-1'}/{entry['backend']}"
        if host == HOST:
            # The pod the core's ring chose is the one Envoy used.
            assert entry["endpoint"] == entry["upstream_host"], entry
        else:
            assert entry["endpoint"] is None

    # The metrics count exactly these decisions, each under its labels (every decided path, every key source).
    assert _decisions(dataplane.processor.metrics_text()) == counted

    # The processor down: the fallback routes say who decided and whether the request carried the affinity cookie.
    dataplane.processor.kill()
    _get(dataplane, HOST, "/fallback-cookie", {"cookie": f"ts={to_stable}"})
    _get(dataplane, HOST, "/fallback", {})
    # An invalid affinity cookie counts as absent, as the processor would read it: no session id, no affinity.
    _get(dataplane, HOST, "/fallback-invalid", {"cookie": "ts=a b"})
    _get(dataplane, HOST, "/fallback-empty", {"cookie": "ts="})
    with_cookie, without = _log(dataplane, "/fallback-cookie"), _log(dataplane, "/fallback")
    assert with_cookie["route"] == "fallback-cookie" and with_cookie["fallback"] == {
        "path": "fallback",
        "key_source": "cookie",
        "session_id_present": True,
        "affinity_applied": True,
        "generation": gen.number,
    }
    assert without["route"] == "fallback" and without["fallback"] == {
        "path": "fallback",
        "key_source": "none",
        "session_id_present": False,
        "affinity_applied": False,
        "generation": gen.number,
    }
    for path in ("/fallback-invalid", "/fallback-empty"):
        entry = _log(dataplane, path)
        assert entry["route"] == "fallback" and entry["fallback"] == without["fallback"], entry
    assert with_cookie["key_source"] is None and with_cookie["endpoint"] is None  # nothing from the processor
    assert with_cookie["upstream_host"] and with_cookie["cluster"].startswith("default/split-0/")
    # The fallback path's metric is Envoy's: both fallback routes count under the route stat `fallback`.
    assert dataplane.envoy.stat("vhost.default/split-0.route.fallback.upstream_rq_total") == 4
