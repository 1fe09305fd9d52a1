"""ListenerSets (core/gatewayapi/listener_sets.py): which Gateway takes which set (allowedListeners), the merged
precedence and its conflicts, refs resolved as the set's, routes attached by the set (and only by it), the data
plane's tables, and the ListenerSet's status written by the operator only after its Gateway's replicas ACK."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit import gatewayapi as golden
from trafficsplit.core.gatewayapi.listener_sets import listener_key
from trafficsplit.core.gatewayapi.objects import ListenersFrom, parse_gateway, parse_listener_set
from trafficsplit.core.gatewayapi.reading import CONTROLLER_NAME
from trafficsplit.core.gatewayapi.status import gateway_status_body, listener_set_status_body
from trafficsplit.core.gatewayapi.translate import Translation, translate
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.rules import is_dns_subdomain

GROUP = "gateway.networking.k8s.io"
NOW = "2026-12-08T00:00:00Z"


def meta(name: str, namespace: str | None = "infra", created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    m: dict[str, Any] = {"name": name, "generation": 1, "creationTimestamp": created, "uid": f"u-{name}"}
    if namespace is not None:
        m["namespace"] = namespace
    return m


def gateway(allowed: dict[str, Any] | None = None, listeners: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "gatewayClassName": "ts",
        "listeners": listeners
        or [{"name": "web", "port": 80, "protocol": "HTTP", "hostname": "gw.example", "allowedRoutes": ALL}],
    }
    if allowed is not None:
        spec["allowedListeners"] = {"namespaces": allowed}
    return {"kind": "Gateway", "metadata": meta("gw"), "spec": spec}


ALL = {"namespaces": {"from": "All"}}


def listener_set(
    name: str, namespace: str, *listeners: dict[str, Any], created: str = "2026-01-01T00:00:00Z"
) -> dict[str, Any]:
    return {
        "kind": "ListenerSet",
        "metadata": meta(name, namespace, created),
        "spec": {"parentRef": {"name": "gw", "namespace": "infra"}, "listeners": list(listeners)},
    }


def http(name: str, host: str | None, port: int = 80, protocol: str = "HTTP", **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "port": port, "protocol": protocol, **more}
    if host is not None:
        out["hostname"] = host
    return out


def route(name: str, namespace: str, *parents: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "HTTPRoute",
        "metadata": meta(name, namespace),
        "spec": {"parentRefs": list(parents), "rules": [{"backendRefs": [{"name": "svc", "port": 8080}]}]},
    }


def to_set(name: str, namespace: str | None = None, section: str | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"group": GROUP, "kind": "ListenerSet", "name": name}
    if namespace is not None:
        ref["namespace"] = namespace
    if section is not None:
        ref["sectionName"] = section
    return ref


def store(*bodies: dict[str, Any]) -> Translation:
    base: list[dict[str, Any]] = [
        {"kind": "GatewayClass", "metadata": meta("ts", None), "spec": {"controllerName": CONTROLLER_NAME}},
        {"kind": "Namespace", "metadata": {"name": "infra", "labels": {}}},
        {"kind": "Namespace", "metadata": {"name": "apps", "labels": {"listeners": "yes"}}},
        {"kind": "Namespace", "metadata": {"name": "other", "labels": {}}},
    ]
    for ns in ("infra", "apps", "other"):
        base.append(
            {"kind": "Service", "metadata": {"name": "svc", "namespace": ns}, "spec": {"ports": [{"port": 8080}]}}
        )
    inputs, invalid = golden.inputs_of([*base, *bodies])
    assert invalid == []
    return translate(inputs)


def set_status(t: Translation, key: str) -> tuple[dict[str, tuple[str, str]], dict[str, dict[str, tuple[str, str]]]]:
    """A set's conditions and its listeners' as type → (status, reason)."""
    (st,) = [s for s in t.listener_sets if s.key == key]
    return (
        {c.type: (c.status, c.reason) for c in st.conditions},
        {ls.name: {c.type: (c.status, c.reason) for c in ls.conditions} for ls in st.listeners},
    )


@pytest.mark.parametrize(
    ("allowed", "namespace", "taken"),
    [
        (None, "infra", False),  # allowedListeners unset: from None, the default
        ({"from": "None"}, "infra", False),
        ({"from": "Same"}, "infra", True),
        ({"from": "Same"}, "apps", False),
        ({"from": "All"}, "other", True),
        ({"from": "Selector", "selector": {"matchLabels": {"listeners": "yes"}}}, "apps", True),
        ({"from": "Selector", "selector": {"matchLabels": {"listeners": "yes"}}}, "other", False),
    ],
)
def test_a_gateway_takes_the_sets_its_allowed_listeners_name(
    allowed: dict[str, Any] | None, namespace: str, taken: bool
) -> None:
    t = store(gateway(allowed), listener_set("s", namespace, http("l", "s.example")))
    conds, _ = set_status(t, f"{namespace}/s")
    expected = ("Unknown", "Pending") if taken else ("False", "NotAllowed")
    assert conds["Accepted"] == (("True", "Accepted") if taken else ("False", "NotAllowed"))
    assert conds["Programmed"] == expected
    (gs,) = t.gateways
    assert gs.attached_listener_sets == int(taken)
    assert [ls.name for ls in gs.listeners] == ["web"]  # a set's listeners are in the set's status, not the Gateway's
    # Only a set the Gateway takes adds its listener to the data plane's tables.
    assert (listener_key(f"{namespace}/s", "l") in {lr.listener for lr in t.listeners}) == taken


def test_precedence_the_gateway_then_the_oldest_set_wins_a_conflict_and_the_loser_alone_is_refused() -> None:
    t = store(
        gateway({"from": "All"}),
        listener_set(
            "old",
            "apps",
            http("same-host", "gw.example"),  # the Gateway's hostname on its port
            http("tcp", None, protocol="TCP"),  # port 80 speaks HTTP (the Gateway's)
            http("mine", "old.example"),
        ),
        listener_set("young", "apps", http("mine", "old.example"), created="2026-01-02T00:00:00Z"),
        listener_set("alpha", "apps", http("a", "alpha.example"), created="2026-01-02T00:00:00Z"),
        listener_set("away", "apps", http("p", "away.example", port=9000)),
    )
    conds, listeners = set_status(t, "apps/old")
    assert conds["Accepted"] == ("True", "ListenersNotValid")  # one valid listener is enough
    assert listeners["same-host"]["Conflicted"] == ("True", "HostnameConflict")
    assert listeners["same-host"]["Accepted"] == ("False", "HostnameConflict")
    assert listeners["tcp"]["Conflicted"] == ("True", "ProtocolConflict")
    assert listeners["tcp"]["Programmed"] == ("False", "ProtocolConflict")
    assert listeners["mine"]["Accepted"] == ("True", "Accepted")
    # Same creation time: by namespace/name, so alpha (taken) before young; young's only listener loses to old's.
    conds, listeners = set_status(t, "apps/young")
    assert conds["Accepted"] == ("False", "ListenersNotValid")
    assert listeners["mine"]["Conflicted"] == ("True", "HostnameConflict")
    assert set_status(t, "apps/alpha")[0]["Accepted"] == ("True", "Accepted")
    # A port the Gateway does not listen on could never be reached through its data plane.
    conds, listeners = set_status(t, "apps/away")
    assert listeners["p"]["Accepted"] == ("False", "PortUnavailable")
    assert conds["Accepted"] == ("False", "ListenersNotValid")
    (gs,) = t.gateways
    assert gs.attached_listener_sets == 2  # old and alpha
    web = {c.type: c.status for c in gs.listeners[0].conditions}
    assert web["Accepted"] == "True" and web["Conflicted"] == "False"  # the Gateway's listener keeps its port


def test_a_route_reaches_a_sets_listeners_only_through_the_set_and_same_means_the_sets_namespace() -> None:
    t = store(
        gateway({"from": "All"}),
        listener_set("s", "apps", http("web", "s.example"), http("open", "open.example", allowedRoutes=ALL)),
        route("gw-only", "infra", {"name": "gw"}),
        route("by-set", "apps", to_set("s", section="web")),
        route("foreign", "infra", to_set("s", "apps", "web")),
        route("foreign-open", "infra", to_set("s", "apps", "open")),
        route("nowhere", "apps", to_set("s", section="nope")),
    )
    accepted = {
        rs.route: [(c.status, c.reason) for p in rs.parents for c in p.conditions if c.type == "Accepted"]
        for rs in t.routes
    }
    assert accepted["infra/gw-only"] == [("True", "Accepted")]
    assert accepted["apps/by-set"] == [("True", "Accepted")]
    assert accepted["infra/foreign"] == [("False", "NotAllowedByListeners")]  # Same: the set's namespace, apps
    assert accepted["infra/foreign-open"] == [("True", "Accepted")]
    assert accepted["apps/nowhere"] == [("False", "NoMatchingParent")]
    tables = {(lr.listener, vh.hostname): {e.route for e in vh.entries} for lr in t.listeners for vh in lr.hosts}
    assert tables[("web", "gw.example")] == {"infra/gw-only"}  # the Gateway's listener: its own routes only
    assert tables[(listener_key("apps/s", "web"), "s.example")] == {"apps/by-set"}
    assert tables[(listener_key("apps/s", "open"), "open.example")] == {"infra/foreign-open"}
    _, listeners = set_status(t, "apps/s")
    counts = {ls.name: ls.attached_routes for s in t.listener_sets for ls in s.listeners}
    assert counts == {"web": 1, "open": 1} and listeners["web"]["Accepted"] == ("True", "Accepted")
    (gs,) = t.gateways
    assert gs.listeners[0].attached_routes == 1


def test_a_route_on_a_set_the_gateway_does_not_take_is_not_attached() -> None:
    t = store(gateway(), listener_set("s", "apps", http("web", "s.example")), route("r", "apps", to_set("s")))
    (rs,) = t.routes
    assert [(c.status, c.reason) for c in rs.parents[0].conditions if c.type == "Accepted"] == [
        ("False", "NotAllowedByListeners")
    ]
    assert all(vh.hostname != "s.example" for lr in t.listeners for vh in lr.hosts)


def test_a_sets_listener_name_in_the_data_plane_is_unique_and_a_listener_name() -> None:
    names = {listener_key(f"ns/set-{i}", "web") for i in range(200)}
    assert len(names) == 200 and all(is_dns_subdomain(n) for n in names)
    long = listener_key("ns/" + "s" * 253, "l" * 63 + "." + "m" * 63 + "." + "n" * 63 + "." + "o" * 61)
    assert len(long) <= 253 and is_dns_subdomain(long)


def test_the_parent_ref_and_the_allowed_listeners_are_read_with_their_bounds() -> None:
    ls = parse_listener_set(listener_set("s", "apps", http("a", "a.example")))
    assert ls.gateway == "infra/gw"
    other = listener_set("s", "apps", http("a", "a.example"))
    other["spec"]["parentRef"] = {"group": "example.com", "kind": "Mesh", "name": "m"}
    assert parse_listener_set(other).gateway == ""  # not a Gateway: no Gateway of ours takes it
    dup = listener_set("s", "apps", http("a", "a.example"), http("a", "b.example"))
    with pytest.raises(SpecError) as exc:
        parse_listener_set(dup)
    assert list(exc.value.problems) == ["spec.listeners: listener name 'a' is used more than once"]
    gw = parse_gateway(gateway({"from": "Selector", "selector": {"matchLabels": {"a": "b"}}}))
    assert gw.listeners_from is ListenersFrom.SELECTOR and gw.listeners_selector is not None
    with pytest.raises(SpecError) as exc:
        parse_gateway(gateway({"from": "Selector"}))
    assert list(exc.value.problems) == ["spec.allowedListeners.namespaces.selector: required when from is Selector"]
    with pytest.raises(SpecError) as exc:
        parse_gateway(gateway({"from": "Some"}))
    assert exc.value.problems[0].startswith("spec.allowedListeners.namespaces.from:")


def test_the_status_bodies_programmed_once_acked_and_attached_sets_written_only_once_there_were_some() -> None:
    t = store(gateway({"from": "All"}), listener_set("s", "apps", http("web", "s.example")))
    (st,) = t.listener_sets
    pending = listener_set_status_body(st, ready=False, pending="waiting for 2 replicas", stored={}, now=NOW)
    assert {c["type"]: (c["status"], c["reason"]) for c in pending["conditions"]}["Programmed"] == (
        "Unknown",
        "Pending",
    )
    done = listener_set_status_body(st, ready=True, pending="", stored=pending, now=NOW)
    assert {c["type"]: (c["status"], c["reason"]) for c in done["conditions"]} == {
        "Accepted": ("True", "Accepted"),
        "Programmed": ("True", "Programmed"),
    }
    listener = {c["type"]: c["status"] for c in done["listeners"][0]["conditions"]}
    assert listener == {"Accepted": "True", "ResolvedRefs": "True", "Conflicted": "False", "Programmed": "True"}
    (gs,) = t.gateways
    body = gateway_status_body(gs, ready=True, pending="", addresses=None, stored={}, now=NOW)
    assert body["attachedListenerSets"] == 1
    none = store(gateway({"from": "All"}))
    (gs,) = none.gateways
    assert "attachedListenerSets" not in gateway_status_body(
        gs, ready=True, pending="", addresses=None, stored={}, now=NOW
    )
    reset = gateway_status_body(gs, ready=True, pending="", addresses=None, stored=body, now=NOW)
    assert reset["attachedListenerSets"] == 0  # the set went: the count written back to 0


def test_a_set_of_a_gateway_that_is_not_accepted_is_parent_not_accepted() -> None:
    gw = gateway({"from": "All"})
    gw["spec"]["addresses"] = [{"type": "Hostname", "value": "gw.example"}]  # a Gateway we do not accept
    t = store(gw, listener_set("s", "apps", http("l", "s.example")))
    conds, listeners = set_status(t, "apps/s")
    assert conds == {"Accepted": ("False", "ParentNotAccepted"), "Programmed": ("False", "ParentNotAccepted")}
    assert listeners == {}
    (gs,) = t.gateways
    assert gs.attached_listener_sets == 0
