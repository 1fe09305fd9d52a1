"""What the operator writes into Gateway API status (core/gatewayapi/status.py): other controllers' route parents kept,
ours written only once served and removed with their parentRef, lastTransitionTime kept while a status holds, and
Programmed True only when the Gateway's replicas ACKed."""

from __future__ import annotations

from trafficsplit.core.gatewayapi.conditions import GatewayStatus, ListenerStatus, ParentStatus
from trafficsplit.core.gatewayapi.httproute import ParentRef
from trafficsplit.core.gatewayapi.objects import RouteKind
from trafficsplit.core.gatewayapi.reading import CONTROLLER_NAME, GATEWAY_GROUP
from trafficsplit.core.gatewayapi.status import NotProvisioned, gateway_status_body, route_parents, stamped
from trafficsplit.core.model.condition import Condition

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"


def cond(type_: str, status: str, generation: int, reason: str = "Accepted") -> Condition:
    return Condition(
        type=type_, status=status, reason=reason, message="", observed_generation=generation, last_transition_time=None
    )


def ref(name: str) -> ParentRef:
    return ParentRef(group=GATEWAY_GROUP, kind="Gateway", namespace="shop", name=name, namespace_written=False)


OTHER = {
    "parentRef": {"group": GATEWAY_GROUP, "kind": "Gateway", "name": "theirs"},
    "controllerName": "example.com/other",
    "conditions": [{"type": "Accepted", "status": "True", "observedGeneration": 1, "lastTransitionTime": T0}],
}


def test_other_controllers_parents_are_kept_and_ours_follow_what_is_served() -> None:
    stale = {
        "parentRef": {"group": GATEWAY_GROUP, "kind": "Gateway", "name": "a"},
        "controllerName": CONTROLLER_NAME,
        "conditions": [{"type": "Accepted", "status": "True", "observedGeneration": 1, "lastTransitionTime": T0}],
    }
    gone = {**stale, "parentRef": {"group": GATEWAY_GROUP, "kind": "Gateway", "name": "removed"}}
    ours = [
        ParentStatus(ref("a"), (cond("Accepted", "True", 2),)),
        ParentStatus(ref("b"), (cond("Accepted", "True", 2),)),
    ]

    # Nothing served yet: the stored entry of "a" stays as it is (generation 1), "b" is not written, the entry for a
    # parentRef the route no longer names is dropped, the other controller's is untouched.
    out = route_parents(stored=[OTHER, stale, gone], ours=ours, route_namespace="shop", served=lambda r: False, now=T1)
    assert out == [OTHER, stale]

    # "a" served: its entry is rewritten at generation 2; lastTransitionTime kept (Accepted stayed True).
    out = route_parents(
        stored=[OTHER, stale], ours=ours, route_namespace="shop", served=lambda r: r.name == "a", now=T1
    )
    assert out[0] == OTHER
    assert out[1]["conditions"] == [
        {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "observedGeneration": 2,
         "lastTransitionTime": T0}
    ]  # fmt: skip
    assert len(out) == 2  # "b" still not served


def test_last_transition_time_changes_only_with_the_status() -> None:
    stored = [{"type": "Accepted", "status": "True", "lastTransitionTime": T0}]
    assert stamped([cond("Accepted", "True", 3)], stored, T1)[0]["lastTransitionTime"] == T0
    assert stamped([cond("Accepted", "False", 3)], stored, T1)[0]["lastTransitionTime"] == T1
    assert stamped([cond("Programmed", "True", 3)], stored, T1)[0]["lastTransitionTime"] == T1


def test_programmed_is_true_only_when_ready() -> None:
    pending = cond("Programmed", "Unknown", 4, reason="Pending")
    gs = GatewayStatus(
        "shop/gw",
        (cond("Accepted", "True", 4), pending),
        (ListenerStatus("http", (RouteKind(GATEWAY_GROUP, "HTTPRoute"),), 1, (cond("Accepted", "True", 4), pending)),),
    )
    waiting = gateway_status_body(gs, ready=False, pending="waiting for 1 of 2", addresses=None, stored={}, now=T1)
    prog = next(c for c in waiting["conditions"] if c["type"] == "Programmed")
    assert (prog["status"], prog["reason"], prog["message"]) == ("Unknown", "Pending", "waiting for 1 of 2")
    assert "addresses" not in waiting
    ready = gateway_status_body(
        gs, ready=True, pending="", addresses=[{"type": "IPAddress", "value": "10.0.0.9"}], stored=waiting, now=T1
    )
    for conds in (ready["conditions"], ready["listeners"][0]["conditions"]):
        p = next(c for c in conds if c["type"] == "Programmed")
        assert (p["status"], p["reason"], p["observedGeneration"]) == ("True", "Programmed", 4)
    assert ready["addresses"] == [{"type": "IPAddress", "value": "10.0.0.9"}]
    assert ready["listeners"][0]["attachedRoutes"] == 1


def test_a_gateway_whose_data_plane_is_not_provisioned_is_not_programmed_even_when_its_replicas_ack() -> None:
    """Replicas of an older data plane may ACK the generation: the Gateway as it is now still does not run, so its
    and its listeners' `Programmed` are False with the provisioning failure's reason and message."""
    pending = cond("Programmed", "Unknown", 4, reason="Pending")
    kinds = (RouteKind(GATEWAY_GROUP, "HTTPRoute"),)
    gs = GatewayStatus(
        "shop/gw", (cond("Accepted", "True", 4), pending), (ListenerStatus("http", kinds, 0, (pending,)),)
    )
    why = NotProvisioned("Invalid", "spec.listeners[0].port: listener port 9001 would be served on 9001")
    body = gateway_status_body(gs, ready=True, pending="", addresses=None, stored={}, now=T1, unprovisioned=why)
    for conds in (body["conditions"], body["listeners"][0]["conditions"]):
        p = next(c for c in conds if c["type"] == "Programmed")
        assert (p["status"], p["reason"], p["observedGeneration"]) == ("False", "Invalid", 4)
        assert p["message"].endswith(why.message)
    accepted = next(c for c in body["conditions"] if c["type"] == "Accepted")
    assert accepted["status"] == "True"  # the translation's to say; only Programmed speaks of the data plane


def test_a_listener_the_translation_says_is_not_programmed_stays_so_when_the_replicas_ack() -> None:
    """An HTTPS listener whose certificate did not resolve is `Programmed: False, Invalid` (it is not served): an ACK
    of the generation must not turn it True."""
    invalid = cond("Programmed", "False", 4, reason="Invalid")
    pending = cond("Programmed", "Unknown", 4, reason="Pending")
    kinds = (RouteKind(GATEWAY_GROUP, "HTTPRoute"),)
    gs = GatewayStatus(
        "shop/gw",
        (cond("Accepted", "True", 4), pending),
        (
            ListenerStatus("https", kinds, 1, (cond("ResolvedRefs", "False", 4, "InvalidCertificateRef"), invalid)),
            ListenerStatus("http", kinds, 1, (cond("Accepted", "True", 4), pending)),
        ),
    )
    body = gateway_status_body(gs, ready=True, pending="", addresses=None, stored={}, now=T1)
    https, http = ({c["type"]: c for c in x["conditions"]}["Programmed"] for x in body["listeners"])
    assert (https["status"], https["reason"]) == ("False", "Invalid")
    assert (http["status"], http["reason"]) == ("True", "Programmed")


def test_policy_ancestors_follow_what_is_served_and_keep_other_controllers() -> None:
    from trafficsplit.core.gatewayapi.conditions import AncestorStatus
    from trafficsplit.core.gatewayapi.status import policy_ancestors

    def gw(name: str) -> ParentRef:
        return ParentRef(group=GATEWAY_GROUP, kind="Gateway", namespace="shop", name=name)

    def entry(name: str, controller: str = CONTROLLER_NAME) -> dict[str, object]:
        return {
            "ancestorRef": gw(name).to_dict(),
            "controllerName": controller,
            "conditions": [{"type": "Accepted", "status": "True", "observedGeneration": 1, "lastTransitionTime": T0}],
        }

    stored = [entry("theirs", "example.com/other"), entry("a"), entry("waiting"), entry("removed")]
    ours = [
        AncestorStatus(gw("a"), (cond("Accepted", "True", 2),), "shop/a"),
        AncestorStatus(gw("waiting"), (cond("Accepted", "False", 2, "Conflicted"),), "shop/waiting"),
        AncestorStatus(gw("new"), (cond("Accepted", "True", 2),), "shop/new"),
    ]
    out = policy_ancestors(stored=stored, ours=ours, served=lambda a: a.gateway != "shop/waiting", now=T1)
    by_name = {str(e["ancestorRef"]["name"]): e for e in out}
    assert list(by_name) == ["theirs", "a", "waiting", "new"]  # "removed": ours, no longer an ancestor
    assert by_name["theirs"] == entry("theirs", "example.com/other")
    assert by_name["waiting"] == entry("waiting")  # not served yet: as stored
    (a,) = by_name["a"]["conditions"]
    assert (a["observedGeneration"], a["lastTransitionTime"]) == (2, T0)  # status unchanged: its time kept
    (n,) = by_name["new"]["conditions"]
    assert (n["observedGeneration"], n["lastTransitionTime"]) == (2, T1)
