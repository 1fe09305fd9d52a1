"""The operator's pure layers: object projections, backend resolution, the desired generation, status and Events."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import pytest

from trafficsplit.core.control.reconcile import Verdict, desired_state, seed_last_good
from trafficsplit.core.control.resolve import ServiceInfo, SliceInfo, SplitObject, resolve, slices_by_service
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.control.status import (
    PublishView,
    ReplicaAck,
    StatusResult,
    compute_status,
    displacement,
    published_condition,
)
from trafficsplit.core.model.limits import MAX_ENDPOINTS
from trafficsplit.core.model.vocabulary import Reason
from trafficsplit.core.model.weights import parse_weights
from trafficsplit.operator.cluster import (
    parse_static_replicas,
    replicas_from_slices,
    service_from_body,
    slice_from_body,
    split_from_body,
)
from trafficsplit.operator.engine import StatusWriter, held_forms
from trafficsplit.wire.generation import generation_to_proto

NS = "shop"


def svc(name: str, port: int = 80, target: int | str = 8080, port_name: str = "http") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {"ports": [{"name": port_name, "port": port, "targetPort": target, "protocol": "TCP"}]},
    }


def eps(service: str, addrs: dict[str, bool], port: int = 8080, port_name: str = "http", n: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{service}-{n}", "namespace": NS, "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [a], "conditions": {"ready": r}} for a, r in addrs.items()],
    }


def ts(
    name: str,
    spec: Mapping[str, Any],
    generation: int = 1,
    status: dict[str, Any] | None = None,
    created: str = "2026-01-01T00:00:00Z",
) -> SplitObject:
    return split_from_body(
        {
            "metadata": {
                "name": name,
                "namespace": NS,
                "uid": f"uid-{name}",
                "generation": generation,
                "creationTimestamp": created,
            },
            "spec": dict(spec),
            "status": status or {},
        }
    )


def spec(weights: str = "stable=95,canary=5", sticky: bool = True, hosts: list[str] | None = None) -> dict[str, Any]:
    w = parse_weights(weights)
    s: dict[str, Any] = {
        "hosts": hosts or ["shop.example"],
        "backends": [{"name": n, "service": f"shop-{n}", "port": 80, "weight": v} for n, v in w.items()],
    }
    if sticky:
        s["sticky"] = {"cookie": {"name": "ts-shop"}}
    return s


def world(*bodies: dict[str, Any]) -> tuple[dict[tuple[str, str], ServiceInfo], dict[tuple[str, str], list[SliceInfo]]]:
    services: dict[tuple[str, str], ServiceInfo] = {}
    slices: list[SliceInfo] = []
    for b in bodies:
        if "addressType" in b:
            s = slice_from_body(b)
            assert s is not None
            slices.append(s)
        else:
            info = service_from_body(b)
            services[(info.namespace, info.name)] = info
    return services, slices_by_service(slices)


def full_world() -> tuple[dict[tuple[str, str], ServiceInfo], dict[tuple[str, str], list[SliceInfo]]]:
    return world(
        svc("shop-stable"),
        svc("shop-canary"),
        eps("shop-stable", {"10.0.0.1": True, "10.0.0.2": False}),
        eps("shop-canary", {"10.0.1.1": True}),
    )


# --- projections and resolution ------------------------------------------------------------------------------------


def test_slice_projection_reads_readiness_and_skips_fqdn() -> None:
    body = eps("a", {"10.0.0.1": True, "10.0.0.2": False})
    body["endpoints"].append({"addresses": ["10.0.0.3"], "conditions": {}})  # nil ready means ready
    body["endpoints"].append({"addresses": ["10.0.0.4"], "conditions": {"ready": True, "terminating": True}})
    s = slice_from_body(body)
    assert s is not None
    assert [(e.address, e.ready) for e in s.endpoints] == [
        ("10.0.0.1", True),
        ("10.0.0.2", False),
        ("10.0.0.3", True),
        ("10.0.0.4", False),
    ]
    assert slice_from_body({**body, "addressType": "FQDN"}) is None
    assert slice_from_body({**body, "metadata": {"name": "x", "namespace": NS}}) is None


def test_resolve_maps_service_port_to_slice_port_by_name() -> None:
    services, slices = world(
        svc("shop-stable", port=80, target="web", port_name="web"),
        eps("shop-stable", {"10.0.0.1": True}, port=9000, port_name="web"),
    )
    parsed = parse_split(
        NS, "x", {"hosts": ["h"], "backends": [{"name": "stable", "service": "shop-stable", "port": 80, "weight": 1}]}
    )
    r = resolve(parsed, services, slices)
    assert r.missing == ()
    assert [(e.address, e.port) for e in r.endpoints["stable"]] == [("10.0.0.1", 9000)]


def test_resolve_names_the_missing_service_and_port() -> None:
    services, slices = world(svc("shop-stable", port=81))
    parsed = parse_split(NS, "x", spec())
    r = resolve(parsed, services, slices)
    reasons = {m.message.split(":")[0]: m.reason for m in r.missing}
    assert reasons == {"backend stable": "PortNotFound", "backend canary": "BackendNotFound"}
    assert "Service shop/shop-canary not found" in " ".join(m.message for m in r.missing)
    assert "has no port 80" in " ".join(m.message for m in r.missing)


def test_replicas_from_gateway_slices_use_the_publish_port_and_keep_terminating_ones() -> None:
    # A terminating replica still answers through its preStop pause (while endpoint removal reaches every kube-proxy),
    # so it must hold what the others hold: left out, it 404s a TrafficSplit created during a gateway rollout.
    body = eps("gw", {"10.1.0.1": True, "10.1.0.2": False}, port=9100, port_name="publish")
    body["endpoints"][0]["targetRef"] = {"kind": "Pod", "name": "gw-a"}
    body["endpoints"].append({"addresses": ["10.1.0.3"], "conditions": {"terminating": True, "serving": False}})
    s = slice_from_body(body)
    assert s is not None
    reps = replicas_from_slices([s], "publish")
    assert [(r.name, r.address) for r in reps] == [
        ("gw-a", "10.1.0.1:9100"),
        ("10.1.0.2", "10.1.0.2:9100"),
        ("10.1.0.3", "10.1.0.3:9100"),
    ]
    assert replicas_from_slices([s], "other") == ()


def test_static_replicas_parse() -> None:
    reps = parse_static_replicas(["127.0.0.1:9100", "b=127.0.0.2:9101"])
    assert [(r.name, r.address) for r in reps] == [("127.0.0.1:9100", "127.0.0.1:9100"), ("b", "127.0.0.2:9101")]
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_static_replicas(["nope"])


# --- the desired generation ----------------------------------------------------------------------------------------


def test_desired_state_compiles_with_slice_readiness() -> None:
    services, slices = full_world()
    d = desired_state([ts("a", spec())], services, slices, {})
    o = d.outcomes["shop/a"]
    assert o.accepted.ok and o.resolved.ok and o.serves_current_spec
    (served,) = d.content.splits
    stable = served.backends[0]
    assert [(e.address, e.ready) for e in stable.endpoints] == [("10.0.0.1", True), ("10.0.0.2", False)]


def test_missing_service_keeps_the_last_good_form() -> None:
    services, slices = full_world()
    good = desired_state([ts("a", spec())], services, slices, {})
    last_good = {s.key: s for s in good.content.splits}
    del services[(NS, "shop-canary")]
    d = desired_state([ts("a", spec())], services, slices, last_good)
    o = d.outcomes["shop/a"]
    assert not o.resolved.ok and o.resolved.reason == "BackendNotFound" and "shop-canary" in o.resolved.message
    assert d.content == good.content  # the dataplane keeps serving the last good generation's split
    # Without a last good form (a fresh operator), the missing backend has no endpoints: its sessions fail over.
    cold = desired_state([ts("a", spec())], services, slices, {})
    (fresh,) = cold.content.splits
    assert [len(b.endpoints) for b in fresh.backends] == [2, 0]
    assert fresh.failover is not None and fresh.failover[0].names == ("stable",)
    # That stand-in is never remembered as last good, and the status says what it does.
    assert cold.last_good == {} and cold.unsure == ()
    assert published_condition(cold.outcomes["shop/a"], PublishView(1, ())).message.endswith(
        "its unresolved backends have no endpoints (their sessions fail over)"
    )
    # A split a generation already carried (status.generation) may be held better by the replicas than the stand-in.
    restarted = desired_state([ts("a", spec(), status={"generation": 7})], services, slices, {})
    assert restarted.unsure == ("shop/a",)
    held = PublishView(7, (), held_back=frozenset({"shop/a"}))
    message = published_condition(restarted.outcomes["shop/a"], held).message
    assert "no dataplane reported a form of it, so nothing is published until it is fixed" in message
    assert desired_state([ts("a", spec(), status={"generation": 7})], services, slices, last_good).unsure == ()
    # Meanwhile nothing is published, so no other split's current spec counts as published either.
    other = desired_state([ts("b", spec(hosts=["b.example"]))], *full_world(), {}).outcomes["shop/b"]
    acked = (ReplicaAck("r0", 7),)
    held_verdict = published_condition(other, PublishView(7, acked, held_back=frozenset({"shop/a"})))
    assert (held_verdict.ok, held_verdict.reason) == (False, Reason.HELD)
    assert published_condition(other, PublishView(7, acked, {"shop/b": 7}, frozenset({"shop/a"}))).ok


def test_invalid_spec_is_not_accepted_and_names_the_field() -> None:
    services, slices = full_world()
    bad = spec()
    bad["backends"][0]["weight"] = -1
    d = desired_state([ts("a", bad)], services, slices, {})
    o = d.outcomes["shop/a"]
    assert not o.accepted.ok and o.accepted.reason == "Invalid" and "spec.backends[0].weight" in o.accepted.message
    assert d.content.splits == ()


def test_a_backend_over_the_endpoint_limit_is_refused_alone() -> None:
    """Only resolved endpoints can break a valid spec's compile (core/model/limits.py MAX_ENDPOINTS): that split keeps
    its last good form or is left out, named in its status, and every other split is still published."""
    services, slices = world(
        svc("shop-stable"),
        svc("shop-canary"),
        eps("shop-stable", {"10.0.0.1": True}),
        eps("shop-canary", {f"10.1.{i // 250}.{i % 250}": True for i in range(MAX_ENDPOINTS + 1)}),
    )
    d = desired_state([ts("a", spec()), ts("b", spec("stable=1", hosts=["b.example"]))], services, slices, {})
    o = d.outcomes["shop/a"]
    assert o.accepted.ok and not o.resolved.ok and o.resolved.reason == Reason.ENDPOINTS_REFUSED
    assert f"at most {MAX_ENDPOINTS}" in o.resolved.message
    assert [s.name for s in d.content.splits] == ["b"]


def test_host_conflict_rejects_the_newer_split() -> None:
    services, slices = full_world()
    old = ts("old", spec(), created="2026-01-01T00:00:00Z")
    new = ts("new", spec(), created="2026-01-02T00:00:00Z")
    d = desired_state([new, old], services, slices, {})
    assert [s.name for s in d.content.splits] == ["old"]
    assert d.outcomes["shop/new"].accepted.reason == "HostConflict"
    assert "shop/old" in d.outcomes["shop/new"].accepted.message


def test_content_has_no_number_and_equal_content_compares_equal() -> None:
    services, slices = full_world()
    a = desired_state([ts("a", spec())], services, slices, {})
    b = desired_state([ts("a", spec("stable=90,canary=10"))], services, slices, {})
    assert a.content == desired_state([ts("a", spec())], services, slices, {}).content
    assert a.content != b.content
    assert a.content.stamp(7).content == a.content
    msg = generation_to_proto(a.content.stamp(7), "op-0")
    assert msg.number == 7 and msg.origin == "op-0" and msg.splits[0].observed_generation == 1
    assert [b.weight for b in msg.splits[0].backends] == [95, 5]


# --- status --------------------------------------------------------------------------------------------------------


def _outcome(
    weights: str = "stable=95,canary=5", sticky: bool = True, status: dict[str, Any] | None = None, generation: int = 1
) -> tuple[SplitObject, Any]:
    services, slices = full_world()
    obj = ts("a", spec(weights, sticky), generation=generation, status=status)
    return obj, desired_state([obj], services, slices, {}).outcomes["shop/a"]


def test_published_counts_replicas_and_names_the_one_behind() -> None:
    _, o = _outcome()
    both = PublishView(5, (ReplicaAck("gw-a", 5), ReplicaAck("gw-b", 6)), {"shop/a": 5})
    assert published_condition(o, both) == Verdict(True, Reason.PUBLISHED, "2/2 dataplanes")
    behind = PublishView(5, (ReplicaAck("gw-a", 5), ReplicaAck("gw-b", 4)), {"shop/a": 5})
    assert published_condition(o, behind) == Verdict(False, Reason.BEHIND, "1/2 dataplanes; behind: gw-b")
    # A replica that acked an older generation still carrying this spec counts as published.
    assert published_condition(o, PublishView(9, (ReplicaAck("gw-a", 5),), {"shop/a": 5})).ok
    assert published_condition(o, PublishView(5, (), {})).reason == "NoDataplanes"


def test_without_a_gateway_every_split_says_so_and_keeps_its_checks() -> None:
    """Gateway API only (no TrafficSplit data plane): Published is False with NoGateway for every split, valid or
    not, and never a Published Event; Accepted and ResolvedRefs still say what is wrong with a spec."""
    none = PublishView(0, (), {}, no_gateway=True)
    obj, o = _outcome()
    r = compute_status(obj, o, none, "t")
    conditions = {c["type"]: c for c in r.status.to_dict()["conditions"]}
    assert (conditions["Published"]["status"], conditions["Published"]["reason"]) == ("False", "NoGateway")
    assert "no gateway for TrafficSplits" in conditions["Published"]["message"]
    assert "HTTPRoute" in conditions["Published"]["message"]
    assert conditions["Accepted"]["status"] == conditions["ResolvedRefs"]["status"] == "True"
    assert "generation" not in r.status.to_dict() and not [e for e in r.events if e.reason == "Published"]
    services, slices = full_world()
    del services[(NS, "shop-canary")]
    missing = ts("b", spec())
    r = compute_status(missing, desired_state([missing], services, slices, {}).outcomes["shop/b"], none, "t")
    conditions = {c["type"]: c for c in r.status.to_dict()["conditions"]}
    assert conditions["ResolvedRefs"]["reason"] == "BackendNotFound"
    assert conditions["Published"]["reason"] == "NoGateway"
    # The same split with a gateway is published as usual.
    assert published_condition(o, PublishView(3, (ReplicaAck("gw-a", 3),), {"shop/a": 3})).ok


def test_status_conditions_and_printer_fields() -> None:
    obj, o = _outcome()
    r = compute_status(obj, o, PublishView(3, (ReplicaAck("gw-a", 3),), {"shop/a": 3}), "2026-01-01T00:00:00Z")
    st = r.status.to_dict()
    assert {c["type"]: c["status"] for c in st["conditions"]} == {
        "Accepted": "True",
        "ResolvedRefs": "True",
        "Published": "True",
    }
    assert all(c["observedGeneration"] == 1 for c in st["conditions"])
    assert st["weights"] == "stable=95,canary=5" and st["generation"] == 3 and st["observedGeneration"] == 1
    assert st["backends"][0] == {
        "name": "stable",
        "service": "shop-stable",
        "port": 80,
        "weight": 95,
        "share": "95.00%",
        "readyEndpoints": 1,
        "endpoints": 2,
    }
    assert [(e.reason, e.type) for e in r.events] == [("Published", "Normal")]
    # Written back, the same state yields the same status (timestamps kept) and no new Event.
    again = compute_status(
        ts("a", obj.spec, status=st), o, PublishView(3, (ReplicaAck("gw-a", 3),), {"shop/a": 3}), "2026-01-02T00:00:00Z"
    )
    assert again.status.to_dict() == st and again.events == ()


def test_total_change_on_a_sticky_split_warns_with_the_repin_share() -> None:
    obj, o = _outcome("stable=95,canary=10", status={"weights": "stable=95,canary=5"})
    r = compute_status(obj, o, PublishView(2, (), {}), "t")
    d = r.status.to_dict()["displacement"]
    assert d["totalChanged"] is True and d["repinnedShare"] == "13.57%"  # 285/2100, docs/spec.md §2
    assert d["rebalanced"] == "stable=90,canary=10" and d["rebalancedRepinnedShare"] == "5.00%"
    (warn,) = [e for e in r.events if e.reason == "TotalWeightChanged"]
    assert warn.type == "Warning" and "13.57%" in warn.message and "stable=90,canary=10" in warn.message


def test_same_total_change_or_non_sticky_does_not_warn() -> None:
    obj, o = _outcome("stable=90,canary=10", status={"weights": "stable=95,canary=5"})
    r = compute_status(obj, o, PublishView(2, (), {}), "t")
    moved = r.status.displacement
    assert moved is not None and moved.repinned_share == "5.00%" and not moved.total_changed
    assert not [e for e in r.events if e.reason == "TotalWeightChanged"]
    obj, o = _outcome("stable=95,canary=10", sticky=False, status={"weights": "stable=95,canary=5"})
    assert not [e for e in compute_status(obj, o, PublishView(2, (), {}), "t").events if e.type == "Warning"]


def test_displacement_matches_the_planner() -> None:
    d, warning = displacement(parse_weights("a=50,b=50"), parse_weights("a=50,b=50,c=1"))
    assert warning is not None and d.total_changed and d.repinned_share is not None
    assert abs(float(d.repinned_share.rstrip("%")) / 100 - float(Fraction(51, 101) * 1)) < 0.02


def test_backend_not_found_condition_and_event_once() -> None:
    services, slices = full_world()
    del services[(NS, "shop-canary")]
    obj = ts("a", spec())
    o = desired_state([obj], services, slices, {}).outcomes["shop/a"]
    r = compute_status(obj, o, PublishView(0, (), {}), "t")
    res = next(c for c in r.status.to_dict()["conditions"] if c["type"] == "ResolvedRefs")
    assert res["status"] == "False" and res["reason"] == "BackendNotFound" and "shop-canary" in res["message"]
    pub = next(c for c in r.status.to_dict()["conditions"] if c["type"] == "Published")
    assert pub["status"] == "False" and pub["reason"] == "UnresolvedRefs"
    assert [(e.reason, e.message) for e in r.events] == [
        ("BackendNotFound", f"backend canary: Service {NS}/shop-canary not found")
    ]
    again = compute_status(ts("a", obj.spec, status=r.status.to_dict()), o, PublishView(0, (), {}), "t2")
    assert again.events == ()


def test_a_held_generation_seeds_last_good_forms_only_for_the_same_split() -> None:
    """The forms a replica's held generation carries read back exactly, and stand as last good only for the split
    they can be: same namespace/name, already carried by a generation (status.generation), observed_generation not
    newer than the object's metadata.generation, and only for the keys asked (the unsure ones)."""
    services, slices = full_world()
    good = desired_state([ts("a", spec(), generation=3), ts("b", spec(hosts=["b.example"]))], services, slices, {})
    forms = held_forms(generation_to_proto(good.content.stamp(5), "op-0"))
    assert forms == {s.key: s for s in good.content.splits}
    carried = {"generation": 5}
    both = {"shop/a", "shop/b"}
    seeds = seed_last_good([ts("a", spec(), 4, carried), ts("b", spec(), 1, carried)], forms, both)
    assert seeds == {"shop/a": forms["shop/a"], "shop/b": forms["shop/b"]}
    assert seed_last_good([ts("a", spec(), 4, carried)], forms, {"shop/b"}) == {}  # not asked
    assert seed_last_good([ts("a", spec(), 2, carried)], forms, both) == {}  # compiled from a newer spec than this
    assert seed_last_good([ts("a", spec(), 4)], forms, both) == {}  # no generation carried it: a recreated object
    assert seed_last_good([ts("c", spec(), 9, carried)], forms, {"shop/c"}) == {}  # another split
    # A generation that does not read back seeds nothing.
    broken = generation_to_proto(good.content.stamp(5), "op-0")
    broken.splits[0].backends[0].weight = 0
    broken.splits[0].backends[1].weight = 0
    assert held_forms(broken) == {}
    # Seeded, the restarted operator keeps the replicas' form of an unresolved split: nothing unsure any more.
    del services[(NS, "shop-canary")]
    restarted = desired_state([ts("a", spec(), 3, carried)], services, slices, {})
    assert restarted.unsure == ("shop/a",)
    seeded = seed_last_good([ts("a", spec(), 3, carried)], forms, restarted.unsure)
    d = desired_state([ts("a", spec(), 3, carried)], services, slices, seeded)
    assert d.unsure == () and d.content.splits == (forms["shop/a"],) and d.outcomes["shop/a"].kept
    assert d.last_good == {"shop/a": forms["shop/a"]}


def test_a_pass_recompiles_only_the_splits_whose_inputs_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the engine's memo, a flip of one split among several compiles that one (and an endpoint change compiles
    the splits that use it), and the result equals a pass without the memo."""
    from trafficsplit.core.control import reconcile
    from trafficsplit.core.control.compiler import compile_split as real

    compiled: list[str] = []

    def counting(spec: Any, *args: Any) -> Any:
        compiled.append(spec.name)
        return real(spec, *args)

    monkeypatch.setattr(reconcile, "compile_split", counting)
    services, slices = full_world()
    hosts = {n: [f"{n}.example"] for n in ("a", "b", "c")}
    objs = [ts(n, spec(hosts=hosts[n])) for n in ("a", "b", "c")]
    memo = reconcile.CompileMemo()
    first = desired_state(objs, services, slices, {}, memo=memo)
    assert sorted(compiled) == ["a", "b", "c"]
    compiled.clear()
    objs[1] = ts("b", spec("stable=0,canary=100", hosts=hosts["b"]), generation=2)
    second = desired_state(objs, services, slices, first.last_good, memo=memo)
    assert compiled == ["b"]
    assert second.content == desired_state(objs, services, slices, first.last_good).content
    compiled.clear()
    services, slices = world(
        svc("shop-stable"),
        svc("shop-canary"),
        eps("shop-stable", {"10.0.0.1": True, "10.0.0.2": True}),  # 10.0.0.2 became ready: every split uses it
        eps("shop-canary", {"10.0.1.1": True}),
    )
    desired_state(objs, services, slices, second.last_good, memo=memo)
    assert sorted(compiled) == ["a", "b", "c"]


def test_a_pass_before_the_watch_echoes_our_write_writes_nothing_and_keeps_the_transition_time() -> None:
    """Status is written, and the next pass runs before the watch brings the object back with it (the object still
    holds the old status): the writer compares with what it wrote, not only with the stale object, so a pass a
    second later writes nothing, and no condition's lastTransitionTime moves to that second. (Before, it wrote the
    status again with every transition restamped: tests/unit/test_operator_engine.py's write-on-change test failed
    under load when its poke's pass fell into the next second.)"""
    services, slices = full_world()
    obj = ts("a", spec("stable=95,canary=5", True))
    desired = desired_state([obj], services, slices, {})
    view = PublishView(3, (ReplicaAck("gw-a", 3),), {"shop/a": 3})
    written: list[StatusResult] = []

    async def sink(_: SplitObject, result: StatusResult) -> None:
        written.append(result)  # the object in the store keeps its old (empty) status, as before the echo

    async def passes() -> None:
        writer = StatusWriter(sink)
        await writer.write([obj], desired, view, "2026-01-01T00:00:00Z")
        await writer.write([obj], desired, view, "2026-01-01T00:00:01Z")

    asyncio.run(passes())
    assert len(written) == 1, [w.status.to_dict()["conditions"] for w in written]
    times = {c["lastTransitionTime"] for c in written[0].status.to_dict()["conditions"]}
    assert times == {"2026-01-01T00:00:00Z"}
