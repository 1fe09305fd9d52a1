"""A TrafficSplitPolicy's `assignment: minimal` slot table survives an operator restart: the restarted operator
continues the table its Gateway's replica holds (read with GetHeld, as the TrafficSplit path reads it), so the next
weight change moves the minimum, as if it had never restarted; with no held copy it rebuilds and says so.

A real API server with the Gateway API CRDs, the operator as a process, and a real extproc + Envoy unit as the
Gateway's one replica (found through the endpoints of the Gateway's publish Service, created by hand as in
tests/integration/test_gateway_operator.py), its Envoy listening for the Gateway's listener. Two views of the same
thing: the slot tables the replica holds (GetHeld), and 1,000 sessions (keyed by a header the policy names) sent
through its Envoy to the backends' test pods before the restart, after it and after the next change: a session moved
when the pod that answered it changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

import grpc
import pytest
import yaml

from tests.support.controlplane import ControlPlane
from tests.support.dataplane import Connection, NameBackends, Response
from tests.support.decided import by_processor
from tests.support.netns import TestPods
from tests.support.operator import (
    Gateway,
    OperatorProcess,
    Operators,
    apply,
    events,
    gateway_api_control_plane,
    get_object,
    routable_gateway,
    service_with_slice,
)
from tests.support.waiting import poll
from trafficsplit.core.model.assignment import SlotTable, advance, fresh_table, minimal_moved_share, moved_share
from trafficsplit.core.model.hashing import key_hash
from trafficsplit.core.model.weights import Weights
from trafficsplit.operator.dataplane_names import publish_service_name
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.v1alpha1 import publish_pb2_grpc as pb_grpc
from trafficsplit.wire.generation import generation_from_proto

pytestmark = [pytest.mark.k8s, pytest.mark.envoy, pytest.mark.netns, pytest.mark.slow]

CONTROLLER = "trafficsplit.dev/gateway-controller"
HOST = "shop.example.com"
BACKENDS = ("a", "b", "c")
NAMES = tuple(f"shop-{n}" for n in BACKENDS)  # the split's backends: the backendRefs' Service names
# Three changes advance the table away from the one the third weights alone give (a restart that rebuilt it would
# move 60 % of sessions with no weight change), then a fourth: 20 % continued, 40 % from a rebuilt table.
RAMP = ((80, 10, 10), (40, 30, 30), (70, 20, 10))
NEXT = (50, 30, 20)
KEY_HEADER = "x-user"
SESSIONS = [f"user-{i}" for i in range(1000)]


@pytest.fixture(scope="module")
def gwkube() -> Iterator[ControlPlane]:
    with gateway_api_control_plane() as cp:
        yield cp


@pytest.fixture
def unit(name_backends: NameBackends, testpods: TestPods) -> Iterator[Gateway]:
    """One replica, a Gateway's data plane with one listener on port 80."""
    with routable_gateway(name_backends, testpods, gateway_ports=(80,)) as gw:
        yield gw


def _route(namespace: str, weights: Sequence[int]) -> str:
    refs = [{"name": f"shop-{n}", "port": 80, "weight": w} for n, w in zip(BACKENDS, weights, strict=True)]
    return yaml.safe_dump(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [HOST], "rules": [{"backendRefs": refs}]},
        }
    )


def _accepted_at(kube: ControlPlane, namespace: str, generation: int) -> bool:
    parents = (get_object(kube, "httproute", "web", namespace).get("status") or {}).get("parents") or []
    mine = next((p for p in parents if p.get("controllerName") == CONTROLLER), None)
    conds = (mine or {}).get("conditions") or []
    return any(
        c["type"] == "Accepted" and c["status"] == "True" and c["observedGeneration"] == generation for c in conds
    )


def _held(unit: Gateway, key: str) -> tuple[int, SlotTable | None]:
    """The replica's held number and the slot table of split `key` in the generation it holds (GetHeld)."""
    with grpc.insecure_channel(unit.address(0)) as ch:
        reply = pb_grpc.PublisherStub(ch).GetHeld(
            pb.GetHeldRequest(with_generation=True), metadata=[("authorization", f"Bearer {unit.token}")], timeout=5
        )
    if not reply.HasField("generation"):
        return int(reply.held_number), None
    split = next((s for s in generation_from_proto(reply.generation).splits if s.key == key), None)
    return int(reply.held_number), split.table if split is not None else None


async def _requests(port: int, keys: Sequence[str], concurrency: int = 8) -> list[Response]:
    out: list[Response | None] = [None] * len(keys)
    conns = [Connection(port) for _ in range(concurrency)]

    async def worker(c: Connection, first: int) -> None:
        for i in range(first, len(keys), concurrency):
            out[i] = await c.request(HOST, headers=[(KEY_HEADER, keys[i])])

    try:
        await asyncio.wait_for(asyncio.gather(*(worker(c, j) for j, c in enumerate(conns))), 120)
    finally:
        for c in conns:
            c.close()
    return [r for r in out if r is not None]


def _served(unit: Gateway) -> list[str]:
    """The backend (its test pod's name → the split's backend) that answered each session, asking again (bounded)
    for a request the processor did not decide (Envoy failing open on a loaded machine)."""
    port = unit.units[0].listener_ports[80]
    got: dict[int, str] = {}
    todo = list(range(len(SESSIONS)))
    for _ in range(5):
        rs = asyncio.run(_requests(port, [SESSIONS[i] for i in todo]))
        for i, r in zip(todo, rs, strict=True):
            if by_processor(r):
                got[i] = "shop-" + r.backend.removeprefix("tbl-")
        todo = [i for i in todo if i not in got]
        if not todo:
            break
    assert not todo, f"{len(todo)} sessions never decided by the processor"
    return [got[i] for i in range(len(SESSIONS))]


def _picks(table: SlotTable) -> list[str]:
    return [table.names[table.owner_index(key_hash(k))] for k in SESSIONS]


def _start(operators: Operators, kube: ControlPlane, unit: Gateway, namespace: str) -> OperatorProcess:
    return operators.start(
        kube.kubeconfig,
        args=[
            "--leader-election=false",
            "--gateway-api=true",
            "--gateway-service=no-chart-gateway",
            f"--gateway-namespace={namespace}",
            f"--dataplane-namespace={namespace}",
            f"--token-file={unit.token_file}",
            "--publish-timeout=2",
        ],
    )


def _set_weights(kube: ControlPlane, unit: Gateway, ns: str, weights: Sequence[int], generation: int) -> SlotTable:
    """Patch the rule's weights; once the replica serves them (the route Accepted at that generation: written after
    its ACK), the table it holds."""
    apply(kube, _route(ns, weights))
    poll(lambda: _accepted_at(kube, ns, generation), 30, f"route Accepted at generation {generation}", 0.05)
    _, table = _held(unit, f"{ns}/web.rule-0")
    assert table is not None, "the replica holds no slot table for the rule"
    assert table.check(Weights(NAMES, tuple(weights))) == []
    return table


def test_a_restarted_operator_continues_the_slot_table_its_gateways_replica_holds(
    gwkube: ControlPlane, unit: Gateway, operators: Operators, testpods: TestPods
) -> None:
    kube = gwkube
    ns = kube.create_namespace("gwtables")
    key = f"{ns}/web.rule-0"
    for name in BACKENDS:
        pod = testpods.start(f"tbl-{name}")
        service_with_slice(kube, ns, f"shop-{name}", [pod.ip], target_port=pod.port)
    apply(
        kube,
        yaml.safe_dump(
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "GatewayClass",
                "metadata": {"name": "trafficsplit"},
                "spec": {"controllerName": CONTROLLER},
            }
        ),
    )
    apply(
        kube,
        yaml.safe_dump(
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "metadata": {"name": "gw", "namespace": ns},
                "spec": {
                    "gatewayClassName": "trafficsplit",
                    "listeners": [{"name": "http", "port": 80, "protocol": "HTTP", "hostname": HOST}],
                },
            }
        ),
    )
    apply(
        kube,
        yaml.safe_dump(
            {
                "apiVersion": "trafficsplit.dev/v1alpha1",
                "kind": "TrafficSplitPolicy",
                "metadata": {"name": "minimal", "namespace": ns},
                "spec": {
                    "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "web"}],
                    "assignment": "minimal",
                    "sticky": {"header": {"name": KEY_HEADER}},
                    "debugHeaders": True,  # the processor's decision disclosed: a fail-open answer is asked again
                },
            }
        ),
    )
    apply(kube, _route(ns, RAMP[0]))
    service_with_slice(
        kube,
        ns,
        publish_service_name(ns, "gw"),
        [unit.publish_host],
        port=9443,
        target_port=unit.units[0].processor.ports["publish"],
        port_name="publish",
    )
    op = _start(operators, kube, unit, ns)
    poll(lambda: _accepted_at(kube, ns, 1), 30, "route Accepted at generation 1", 0.05)
    table: SlotTable | None = None
    for generation, weights in enumerate(RAMP, start=1):
        table = _set_weights(kube, unit, ns, weights, generation)
    assert table is not None
    advanced = table
    w3, w4 = Weights(NAMES, RAMP[-1]), Weights(NAMES, NEXT)
    # The premise: the replica's table is not the one the weights alone give.
    assert advanced == advance(advance(fresh_table(Weights(NAMES, RAMP[0])), Weights(NAMES, RAMP[1])), w3)
    assert advanced != fresh_table(w3)
    served_before = _served(unit)
    assert served_before == _picks(advanced), "the replica's decisions are not its table's"

    # The operator restarts; the replica keeps serving the advanced table.
    op.stop()
    held_before, _ = _held(unit, key)
    op = _start(operators, kube, unit, ns)
    # The restarted operator publishes (its first generation, numbered above the replica's) before any change.
    poll(lambda: _held(unit, key)[0] > held_before, 30, "the restarted operator's first generation held", 0.05)
    _, after_restart = _held(unit, key)
    restart_moved = moved_share(advanced, after_restart) if after_restart is not None else None
    served_restarted = _served(unit)
    after = _set_weights(kube, unit, ns, NEXT, len(RAMP) + 1)
    served_after = _served(unit)
    assert served_after == _picks(after)
    moved_by_restart = sum(a != b for a, b in zip(served_before, served_restarted, strict=True))
    moved_by_change = sum(a != b for a, b in zip(served_restarted, served_after, strict=True))
    moved_overall = sum(a != b for a, b in zip(served_before, served_after, strict=True))
    # What the change would have moved of these sessions from a rebuilt table, and from the table continued.
    rebuilt_sessions = sum(a != b for a, b in zip(served_before, _picks(advance(fresh_table(w3), w4)), strict=True))
    minimal_sessions = sum(a != b for a, b in zip(_picks(advanced), _picks(advance(advanced, w4)), strict=True))
    print(
        f"{len(SESSIONS)} sessions through the replica's Envoy: the restart moved {moved_by_restart}, the change "
        f"{RAMP[-1]} → {NEXT} moved {moved_by_change} (the continued table's {minimal_sessions}; from a rebuilt "
        f"table {rebuilt_sessions}); {moved_overall} from before the restart to after the change"
    )
    moved = moved_share(advanced, after)
    rebuilt_moved = moved_share(advanced, advance(fresh_table(w3), w4))
    print(
        f"restart alone moved {float(restart_moved or 0):.2%} of sessions; {RAMP[-1]} → {NEXT} moved {float(moved):.2%}"
        f" (minimum {float(minimal_moved_share(w3, w4)):.2%}; from a rebuilt table {float(rebuilt_moved):.2%})"
    )
    assert restart_moved == 0, "the restart alone moved sessions: the table was rebuilt from the weights"
    assert after == advance(advanced, w4)
    assert moved == minimal_moved_share(w3, w4) < rebuilt_moved
    assert moved_by_restart == 0 and moved_by_change == moved_overall == minimal_sessions < rebuilt_sessions
    log = op.log()
    assert "AssignmentRebuilt" not in log, log

    # No copy to continue: the operator restarts while the replica restarted too (holding nothing): it rebuilds,
    # and says so on the HTTPRoute (a Warning Event) and in its log.
    op.stop()
    unit.restart_processor(0)
    poll(lambda: _held(unit, key)[0] == 0, 15, "the restarted replica holding nothing", 0.05)
    op = _start(operators, kube, unit, ns)
    rebuilt = poll(
        lambda: [
            e for e in events(kube, ns, "web") if e.get("reason") == "AssignmentRebuilt" and e.get("type") == "Warning"
        ],
        30,
        "an AssignmentRebuilt Warning on the HTTPRoute",
        0.1,
    )
    assert rebuilt[0]["involvedObject"]["kind"] == "HTTPRoute", rebuilt
    assert "rule 0" in rebuilt[0]["message"] and "shop-a=50,shop-b=30,shop-c=20" in rebuilt[0]["message"], rebuilt
    poll(lambda: "AssignmentRebuilt" in op.log(), 10, "the rebuild in the operator's log", 0.1)
    print(f"rebuilt without a held copy: {rebuilt[0]['message']}")
