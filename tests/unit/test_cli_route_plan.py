"""`plan httproute/NAME --rule N --set a=90,b=10`: the displacement of one HTTPRoute rule's weight change, with the
same core weights and planner a TrafficSplit's `plan NAME --set` uses."""

from __future__ import annotations

import copy
import io
import json
from typing import Any

import pytest

from trafficsplit.cli import kplan
from trafficsplit.cli.common import UsageError
from trafficsplit.cli.kube import Cluster, Ref
from trafficsplit.cli.main import main
from trafficsplit.core.control.plan import plan
from trafficsplit.core.gatewayapi.backends import rule_weights
from trafficsplit.core.gatewayapi.httproute import parse_httproute
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.weights import Weights

ROUTE: dict[str, Any] = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "HTTPRoute",
    "metadata": {"name": "shop", "namespace": "web", "generation": 2, "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {
        "parentRefs": [{"name": "gw"}],
        "rules": [
            {"matches": [{"path": {"value": "/static"}}], "backendRefs": [{"name": "cdn", "port": 80}]},
            {
                "name": "canary",
                "backendRefs": [
                    {"name": "stable", "port": 80, "weight": 95},
                    {"name": "canary", "port": 80, "weight": 5},
                    {"group": "example.com", "kind": "Bucket", "name": "bucket", "weight": 1},
                ],
            },
        ],
    },
    "status": {"parents": []},
}
REF = Ref("web", "shop", "httproute")


def test_the_rule_plan_is_the_core_planner_over_the_rules_split_weights() -> None:
    rule, result, _ = kplan.route_plan(REF, ROUTE, "1", [("canary", 10), ("stable", 90)])
    assert rule.index == 1
    # The Bucket ref is no Service: it is not in the split (its share answers 500), so not in the plan.
    assert result == plan(Weights(("stable", "canary"), (95, 5)), Weights(("stable", "canary"), (90, 10)))
    assert str(result.moved_share) == "1/20"  # 5 % of sessions move stable -> canary, the minimum
    by_name, _, _ = kplan.route_plan(REF, ROUTE, "canary", [("canary", 10), ("stable", 90)])
    assert by_name == rule


def test_two_refs_to_one_service_are_named_as_the_split_names_them() -> None:
    body = {
        "metadata": {"name": "r", "namespace": "web"},
        "spec": {"rules": [{"backendRefs": [{"name": "a", "port": 80}, {"name": "a", "port": 81, "weight": 3}]}]},
    }
    (rule,) = parse_httproute(body).rules
    assert rule_weights(rule) == Weights(("a-0", "a-1"), (1, 3))


@pytest.mark.parametrize(
    ("rule", "assignments", "error", "fragment"),
    [
        ("2", [("a", 1)], SpecError, "web/shop has no rule '2'; its rules: 0, 1 (canary)"),
        ("1", [("canry", 10)], UsageError, "has no backendRef 'canry'; its backends are stable, canary"),
        ("1", [("stable", 0), ("canary", 0)], SpecError, "httproute web/shop: "),
    ],
)
def test_bad_rules_and_names_are_refused_naming_what_there_is(
    rule: str, assignments: list[tuple[str, int]], error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error) as exc:
        kplan.route_plan(REF, ROUTE, rule, assignments)
    assert fragment in str(exc.value)


class _FakeCluster:
    namespace = "web"

    def get_httproute(self, name: str) -> dict[str, Any]:
        assert name == "shop"
        return ROUTE

    def list_policies(self) -> list[dict[str, Any]]:
        return []


def test_the_command_reads_the_live_route(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Cluster, "connect", classmethod(lambda cls, args: _FakeCluster()))
    out = io.StringIO()
    assert main(["plan", "httproute/shop", "--rule", "canary", "--set", "canary=10,stable=90"], out=out) == 0
    text = out.getvalue()
    assert text.startswith("httproute web/shop rule 1\nfrom stable=95,canary=5 (total 100) to stable=90,canary=10")
    assert "moves 5.00% of sessions" in text
    out = io.StringIO()
    assert main(["plan", "httproutes/shop", "--rule", "1", "--set", "canary=10,stable=90", "--json"], out=out) == 0
    doc = json.loads(out.getvalue())
    assert doc["httproute"] == {"namespace": "web", "name": "shop", "rule": 1}


def test_without_rule_the_plan_takes_the_only_weighted_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Cluster, "connect", classmethod(lambda cls, args: _FakeCluster()))
    out = io.StringIO()
    assert main(["plan", "httproute/shop", "--set", "canary=10,stable=90"], out=out) == 0
    assert out.getvalue().startswith("httproute web/shop rule 1\n")


def test_rule_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "shop", "--rule", "1", "--set", "canary=10"], out=io.StringIO()) == 2
    assert "--rule goes with httproute/NAME" in capsys.readouterr().err


def _policy(name: str, spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    target = {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "shop", "sectionName": "canary"}
    return {
        "metadata": {"name": name, "namespace": "web", "creationTimestamp": "2026-01-02T00:00:00Z"},
        "spec": {"targetRefs": [target], **spec},
        **({"status": status} if status else {}),
    }


@pytest.mark.parametrize(
    ("spec", "status", "line"),
    [
        (None, None, "without a policy (assignment hash, sticky.mode rehash): the change moves 5.00%"),
        ({"sticky": {"mode": "rehash"}}, None,
         "under TrafficSplitPolicy web/p (assignment hash, sticky.mode rehash): the change moves 5.00%"),
        ({"assignment": "minimal"}, None,
         "under TrafficSplitPolicy web/p (assignment minimal, sticky.mode rehash): the change moves 5.00%"),
        ({"sticky": {"mode": "persistent"}},
         {"ancestors": [{"ancestorRef": {"name": "gw"}, "controllerName": "trafficsplit.dev/gateway-controller",
                         "conditions": [{"type": "Accepted", "status": "False", "reason": "Invalid",
                                         "message": "HTTPRoute web/shop: rules[1]: sticky.mode: persistent needs"}]}]},
         "without a policy (assignment hash, sticky.mode rehash; not applied: web/p: HTTPRoute web/shop: rules[1]"),
        # the same refusal before the operator wrote any status: the plan checks the settings with the same values
        ({"sticky": {"mode": "persistent"}}, None,
         "without a policy (assignment hash, sticky.mode rehash; not applied: web/p: rules[1]: sticky.mode: persistent "
         "needs sticky.cookie"),
    ],
)  # fmt: skip
def test_the_plan_says_under_which_policy_the_gateway_serves_the_rule(
    monkeypatch: pytest.MonkeyPatch, spec: dict[str, Any] | None, status: dict[str, Any] | None, line: str
) -> None:
    policies = [] if spec is None else [_policy("p", spec, status)]

    class Fake(_FakeCluster):
        def list_policies(self) -> list[dict[str, Any]]:
            return policies

    monkeypatch.setattr(Cluster, "connect", classmethod(lambda cls, args: Fake()))
    out = io.StringIO()
    assert main(["plan", "httproute/shop", "--rule", "canary", "--set", "canary=10,stable=90"], out=out) == 0
    assert line in out.getvalue(), out.getvalue()
    out = io.StringIO()
    assert main(["plan", "httproute/shop", "--rule", "1", "--set", "canary=10,stable=90", "--json"], out=out) == 0
    served = json.loads(out.getvalue())["served"]
    assert served["policy"] == (None if spec is None or "persistent" in str(spec) else "web/p")


def test_a_persistent_policy_drains_a_backend_set_to_zero() -> None:
    route = copy.deepcopy(ROUTE)
    route["spec"]["rules"][1]["sessionPersistence"] = {"sessionName": "s"}
    pol = _policy("p", {"sticky": {"mode": "persistent"}})
    _, _, served = kplan.route_plan(REF, route, "1", [("canary", 100), ("stable", 0)], policies=[pol])
    assert served.draining == frozenset({"stable"}) and served.moved_share == 0
    pol = _policy("p", {"sticky": {"mode": "persistent", "drain": False}})
    _, _, served = kplan.route_plan(REF, route, "1", [("canary", 100), ("stable", 0)], policies=[pol])
    assert served.draining == frozenset() and str(served.moved_share) == "19/20"  # stable's sessions move
