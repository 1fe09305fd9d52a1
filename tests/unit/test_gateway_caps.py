"""A class's caps (core/gatewayapi/caps.py): per namespace, Gateways and data-plane replicas, the oldest first."""

from __future__ import annotations

from typing import Any

from trafficsplit.core.gatewayapi.caps import over_caps
from trafficsplit.core.gatewayapi.objects import Gateway, parse_gateway
from trafficsplit.core.gatewayapi.parameters import DEFAULT_PARAMETERS, GatewayParameters, parse_gateway_parameters


def gw(name: str, created: str, namespace: str = "team", cls: str = "ts") -> Gateway:
    return parse_gateway(
        {
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created, "uid": f"u-{name}"},
            "spec": {"gatewayClassName": cls, "listeners": [{"name": "h", "port": 80, "protocol": "HTTP"}]},
        }
    )


def caps(**spec: Any) -> GatewayParameters:
    return parse_gateway_parameters({"metadata": {"name": "capped"}, "spec": spec})


T = [f"2026-01-01T00:00:{i:02d}Z" for i in range(10)]


def test_no_caps_refuse_nothing() -> None:
    assert over_caps([gw(f"g{i}", T[i]) for i in range(5)], {"ts": DEFAULT_PARAMETERS}, 2) == {}


def test_the_n_plus_first_gateway_of_a_namespace_is_refused_and_only_it() -> None:
    p = caps(limits={"gatewaysPerNamespace": 3})
    # given in any order: the youngest is refused
    members = [gw("d", T[3]), gw("a", T[0]), gw("c", T[2]), gw("b", T[1])]
    out = over_caps(members, {"ts": p}, 2)
    assert list(out) == [("team", "d")]
    assert "at most 3 Gateways per namespace" in out[("team", "d")].message
    assert "limits.gatewaysPerNamespace" in out[("team", "d")].message


def test_the_caps_are_per_namespace_and_per_class() -> None:
    p = caps(limits={"gatewaysPerNamespace": 1})
    members = [gw("a", T[0]), gw("b", T[1], namespace="other"), gw("c", T[2], cls="free"), gw("d", T[3])]
    assert set(over_caps(members, {"ts": p, "free": DEFAULT_PARAMETERS}, 2)) == {("team", "d")}


def test_the_replica_cap_counts_each_data_planes_replicas() -> None:
    p = caps(replicas=3, limits={"replicasPerNamespace": 7})
    out = over_caps([gw("a", T[0]), gw("b", T[1]), gw("c", T[2])], {"ts": p}, 2)
    assert list(out) == [("team", "c")]  # 3 + 3 fit in 7, a third would make 9
    assert "may run 7 data-plane replicas" in out[("team", "c")].message and "run 6" in out[("team", "c")].message


def test_the_replica_cap_uses_the_installations_replicas_when_the_class_sets_none() -> None:
    p = caps(limits={"replicasPerNamespace": 4})
    assert list(over_caps([gw("a", T[0]), gw("b", T[1]), gw("c", T[2])], {"ts": p}, 2)) == [("team", "c")]
    assert list(over_caps([gw("a", T[0]), gw("b", T[1])], {"ts": p}, 5)) == [("team", "a"), ("team", "b")]


def test_a_deleted_gateway_admits_the_oldest_refused_one() -> None:
    p = caps(limits={"gatewaysPerNamespace": 2})
    assert set(over_caps([gw("a", T[0]), gw("b", T[1]), gw("c", T[2]), gw("d", T[3])], {"ts": p}, 2)) == {
        ("team", "c"),
        ("team", "d"),
    }
    assert set(over_caps([gw("b", T[1]), gw("c", T[2]), gw("d", T[3])], {"ts": p}, 2)) == {("team", "d")}


def test_ties_in_creation_time_are_broken_by_name() -> None:
    p = caps(limits={"gatewaysPerNamespace": 1})
    assert list(over_caps([gw("b", T[0]), gw("a", T[0])], {"ts": p}, 2)) == [("team", "b")]
