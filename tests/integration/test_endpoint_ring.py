"""docs/spec.md §5 through a real Envoy: the processor picks the pod on the core's ring, and Envoy routes to exactly
that pod.

Pods are the loopback name backends (each answers with its name), so a response says which endpoint served it. The
expectations come from the core ring (`trafficsplit.core.model.ring`) and the simulator's sticky-consistent rule, never
hard-coded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from tests.support.dataplane import Dataplane, decided_requests, split_doc
from trafficsplit.cli.main import main
from trafficsplit.core.control.simulate import bind_consistent, expand_clients, parse_client_rows
from trafficsplit.core.model.ring import DEFAULT_POINTS, Ring

pytestmark = [pytest.mark.envoy]

HOST = "shop.example"
OLD = ("pod-a", "pod-b", "pod-c")
NEW = "fresh"


def _serve(dp: Dataplane, pods: Sequence[str], cookies: Sequence[str]) -> list[str]:
    """Publish one sticky backend over `pods` with endpoint affinity; the pod that serves each cookie's request."""
    dp.publish(
        [split_doc(HOST, {"stable": 100}, sticky=True, endpoint_affinity=True)], endpoints={"stable": list(pods)}
    )
    result = decided_requests(dp.port, HOST, "ts", cookies)  # the processor decided each (a fail-open is resent)
    assert all(r.status == 200 for r in result)
    return [r.backend for r in result]


def _host(dp: Dataplane, pod: str) -> str:
    address, port = dp.backends.endpoint(pod)
    return f"{address}:{port}"


def test_adding_a_pod_moves_only_its_share_and_removing_it_moves_them_back(dataplane: Dataplane) -> None:
    cookies = [f"session-{i:04d}" for i in range(3000)]
    before = _serve(dataplane, OLD, cookies)
    grown = _serve(dataplane, (*OLD, NEW), cookies)
    after = _serve(dataplane, OLD, cookies)

    # Exactly the core ring's choice, session by session (members are the endpoints' host:port, as Envoy names them).
    by_host = {_host(dataplane, p): p for p in (*OLD, NEW)}
    ring3 = Ring([_host(dataplane, p) for p in OLD], DEFAULT_POINTS)
    ring4 = Ring([_host(dataplane, p) for p in (*OLD, NEW)], DEFAULT_POINTS)
    assert before == [by_host[ring3.owner(c)] for c in cookies]
    assert grown == [by_host[ring4.owner(c)] for c in cookies]

    between_old = sum(b != g and g != NEW for b, g in zip(before, grown, strict=True))
    to_new = sum(g == NEW for g in grown)
    assert between_old == 0
    assert all(g in (b, NEW) for b, g in zip(before, grown, strict=True))
    assert 0.15 < to_new / len(cookies) < 0.35, to_new  # about the new pod's ring share, 1/4
    assert after == before  # every session moved back to exactly its old pod


def test_the_reference_clients_rebind_as_simulate_predicts(
    dataplane: Dataplane, capsys: pytest.CaptureFixture[str]
) -> None:
    mix = "major:1:2000,medium:9:400,minor:90:50"
    names = [c for c, _ in expand_clients(parse_client_rows(mix))]
    before = _serve(dataplane, OLD, names)
    grown = _serve(dataplane, (*OLD, NEW), names)
    members3 = [_host(dataplane, p) for p in OLD]
    members4 = [*members3, _host(dataplane, NEW)]
    by_host = {_host(dataplane, p): p for p in (*OLD, NEW)}
    # The simulator's own sticky-consistent binding, client by client.
    assert before == [by_host[members3[i]] for i in bind_consistent(names, members3)]
    assert grown == [by_host[members4[i]] for i in bind_consistent(names, members4)]
    # And the CLI's rebinding figure for these replicas is the number of clients that moved.
    capsys.readouterr()
    code = main(["simulate", "--clients", mix, "--replica-names", ",".join(members3), "--add", members4[-1], "--json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    moved = sum(b != g for b, g in zip(before, grown, strict=True))
    assert doc["rebinding"]["sticky-consistent"]["clients"] == moved > 0
