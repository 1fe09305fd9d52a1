"""HTTPRoutes in the CLI: `plan -f route.yaml` offline, the rule choice, `set-weights`/`flip`/`status` on
`httproute/NAME`, their argument errors and the JSON patch they send. The API server is a fake here; the integration
tier (tests/integration/test_kubectl_plugin.py) runs them against a real one."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from trafficsplit.cli import manifest
from trafficsplit.cli.common import UsageError
from trafficsplit.cli.kube import Cluster, KubeError, Ref, api_error_message
from trafficsplit.cli.main import main
from trafficsplit.cli.routes import choose_rule, flipped_rule, parse_route, rule_change, weight_patch
from trafficsplit.cli.routestatus import render_route_status, route_status_view
from trafficsplit.core.control.plan import plan
from trafficsplit.core.gatewayapi.backends import find_rule, rule_weights
from trafficsplit.core.gatewayapi.httproute import parse_httproute
from trafficsplit.core.gatewayapi.policy import parse_policy, policy_for_rule, served_change
from trafficsplit.core.model.weights import Weights

REF = Ref("web", "shop", "httproute")


def route(namespace: str | None = "web", name: str = "shop") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": "41", "generation": 3}
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": meta,
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "rules": [
                {"matches": [{"path": {"value": "/static"}}], "backendRefs": [{"name": "cdn", "port": 80}]},
                {
                    "name": "cart",
                    "sessionPersistence": {"sessionName": "s"},
                    "backendRefs": [
                        {"name": "cart-v1", "port": 80, "weight": 90},
                        {"name": "cart-v2", "port": 80, "weight": 10},
                    ],
                },
            ],
        },
    }


def policy(spec: dict[str, Any], namespace: str | None = "web") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"}
    if namespace is not None:
        meta["namespace"] = namespace
    target = {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "shop", "sectionName": "cart"}
    return {
        "apiVersion": "trafficsplit.dev/v1alpha1",
        "kind": "TrafficSplitPolicy",
        "metadata": meta,
        "spec": {"targetRefs": [target], **spec},
    }


def write(tmp_path: Path, *docs: Any) -> str:
    path = tmp_path / "route.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    return main(argv, out=out), out.getvalue()


# --- plan -f: offline, the core's numbers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pol", "to"),
    [
        (None, {"cart-v1": 80, "cart-v2": 20}),
        ({"assignment": "minimal", "sticky": {"mode": "rehash"}}, {"cart-v1": 80, "cart-v2": 20}),
        ({"sticky": {"mode": "persistent"}}, {"cart-v1": 0, "cart-v2": 100}),
        ({"sticky": {"mode": "persistent", "drain": False}}, {"cart-v1": 0, "cart-v2": 100}),
    ],
)
def test_plan_from_a_file_is_what_the_core_computes_for_the_rule(
    tmp_path: Path, pol: dict[str, Any] | None, to: dict[str, int]
) -> None:
    gateway = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "gw"}}
    docs = [gateway, route()] + ([policy(pol)] if pol else [])
    path = write(tmp_path, *docs)
    setting = ",".join(f"{n}={w}" for n, w in to.items())
    code, text = run(["plan", "-f", path, "--set", setting, "--json"])
    assert code == 0
    doc = json.loads(text)

    # The same figures straight from the core, for the same rule and policy.
    core_route = parse_httproute(route())
    rule = find_rule(core_route, "cart")
    expected = plan(rule_weights(rule), Weights.of(to.items()))
    chosen, standing = policy_for_rule(core_route, rule, [parse_policy(policy(pol))] if pol else [])
    served = served_change(rule, chosen, expected, standing)
    assert doc["httproute"] == {"namespace": "web", "name": "shop", "rule": 1}
    assert doc["from"] == "cart-v1=90,cart-v2=10" and doc["to"] == expected.after.format()
    assert doc["moved_fraction"] == f"{expected.moved_share.numerator}/{expected.moved_share.denominator}"
    assert doc["served"]["moved_share"] == float(served.moved_share)
    assert doc["served"]["mode"] == served.mode.value and doc["served"]["assignment"] == served.assignment.value
    assert doc["served"]["draining"] == sorted(served.draining)
    assert doc["served"]["policy"] == (None if pol is None else "web/p")

    code, text = run(["plan", "-f", path, "--rule", "1", "--set", setting])
    assert code == 0 and text.startswith("httproute web/shop rule 1\nfrom cart-v1=90,cart-v2=10 (total 100)")
    assert "the gateway serves this rule" in text


def test_persistent_without_drain_moves_what_the_core_says(tmp_path: Path) -> None:
    # A figure that depends on the policy: persistent with drain keeps cart-v1's sessions, without drain moves them.
    path = write(tmp_path, route(), policy({"sticky": {"mode": "persistent"}}))
    drained = json.loads(run(["plan", "-f", path, "--set", "cart-v1=0,cart-v2=100", "--json"])[1])["served"]
    assert drained["moved_share"] == 0.0 and drained["draining"] == ["cart-v1"]
    path = write(tmp_path, route(), policy({"sticky": {"mode": "persistent", "drain": False}}))
    moved = json.loads(run(["plan", "-f", path, "--set", "cart-v1=0,cart-v2=100", "--json"])[1])["served"]
    assert moved["moved_share"] == 0.9 and moved["draining"] == []


def test_a_file_with_several_routes_takes_httproute_name(tmp_path: Path) -> None:
    other = route(name="other")
    other["spec"]["rules"][1]["backendRefs"][0]["weight"] = 50
    path = write(tmp_path, route(), other)
    code, text = run(["plan", "httproute/other", "-f", path, "--set", "cart-v2=50", "--json"])
    assert code == 0 and json.loads(text)["from"] == "cart-v1=50,cart-v2=10"


def test_a_document_without_namespace_takes_n_else_default(tmp_path: Path) -> None:
    path = write(tmp_path, route(namespace=None), policy({"assignment": "minimal"}, namespace=None))
    doc = json.loads(run(["plan", "-f", path, "-n", "shop", "--set", "cart-v2=20,cart-v1=80", "--json"])[1])
    assert doc["httproute"]["namespace"] == "shop" and doc["served"]["policy"] == "shop/p"
    doc = json.loads(run(["plan", "-f", path, "--set", "cart-v2=20,cart-v1=80", "--json"])[1])
    assert doc["httproute"]["namespace"] == "default"
    # A policy of another namespace does not attach to the route.
    path = write(tmp_path, route(), policy({"assignment": "minimal"}, namespace="other"))
    assert (
        json.loads(run(["plan", "-f", path, "--set", "cart-v2=20,cart-v1=80", "--json"])[1])["served"]["policy"] is None
    )


def test_plan_reads_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    class Stdin:
        buffer = io.BytesIO(yaml.safe_dump(route()).encode())

    monkeypatch.setattr("sys.stdin", Stdin())
    code, text = run(["plan", "-f", "-", "--set", "cart-v2=20,cart-v1=80"])
    assert code == 0 and "moves 10.00% of sessions" in text


def _two_weighted() -> dict[str, Any]:
    body = route()
    body["spec"]["rules"].append(
        {"name": "api", "backendRefs": [{"name": "a", "port": 80}, {"name": "a", "port": 81, "weight": 3}]}
    )
    return body


@pytest.mark.parametrize(
    ("docs", "argv", "expect"),
    [
        ([], [], "has no HTTPRoute (it holds no HTTPRoute)"),
        (["route", "other"], [], "holds several HTTPRoutes ('shop', 'other'): name one, plan httproute/NAME -f"),
        (["route"], ["httproute/nope"], "has no HTTPRoute 'nope' (its HTTPRoutes: 'shop')"),
        (["route"], ["shop"], "with -f, NAME is httproute/NAME (the HTTPRoute of the file), not 'shop'"),
        (["route"], ["-n", "other"], "HTTPRoute 'shop' is in namespace 'web', which does not match -n 'other'"),
        (["route"], ["--rule", "9"], "web/shop has no rule '9'; its rules: 0, 1 (cart)"),
        (["route"], ["--rule", "1" * 300], "--rule: at most 253 characters"),
        (["two"], [], "httproute web/shop: 2 rules are weighted: give --rule N (its rules: 0: cdn=1; "
                      "1 (cart): cart-v1=90,cart-v2=10; 2 (api): a-0=1,a-1=3)"),
        (["route"], ["--set", "cart-v3=1"], "--set: httproute web/shop rule 1 has no backendRef 'cart-v3'; its "
                                            "backends are cart-v1, cart-v2"),
        (["route"], ["--set", "cart-v1=1000001"], "--set: cart-v1: weight must be 0..1000000, got 1000001"),
        (["route"], ["--set", "cart-v1=-1"], "--set: cart-v1: weight must be 0..1000000, got -1"),
        (["route"], ["--set", "cart-v1=0,cart-v2=0"], "httproute web/shop: "),
        (["route"], [], "plan -f "),  # no --set
    ],
)  # fmt: skip
def test_plan_file_errors_exit_2_naming_what_there_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], docs: list[str], argv: list[str], expect: str
) -> None:
    bodies = {"route": route(), "other": route(name="other"), "two": _two_weighted()}
    path = write(tmp_path, *[bodies[d] for d in docs]) if docs else write(tmp_path, {"kind": "Service"})
    if "--set" not in argv and expect != "plan -f ":
        argv = [*argv, "--set", "cart-v1=1"]
    code, text = run(["plan", "-f", path, *argv])
    err = capsys.readouterr().err
    assert code == 2 and text == "" and len(err.splitlines()) == 1 and expect in err, err


def test_the_file_is_bounded_and_must_be_yaml_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (manifest.MAX_FILE_BYTES + 1))
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: HTTPRoute\nspec: [\n")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"kind: \xe9\n")
    many = tmp_path / "many.yaml"
    many.write_text("---\n".join(["kind: Service\n"] * (manifest.MAX_DOCUMENTS + 1)))
    for path, expect in [
        (big, f"is larger than {manifest.MAX_FILE_BYTES} bytes"),
        (bad, f"{bad}:3:1: not YAML"),
        (latin, "is not UTF-8 text (byte 6)"),
        (many, f"holds more than {manifest.MAX_DOCUMENTS} objects"),
        (tmp_path / "missing.yaml", "-f: cannot read"),
    ]:
        assert run(["plan", "-f", str(path), "--set", "a=1"])[0] == 2
        assert expect in capsys.readouterr().err


def test_a_list_document_is_opened(tmp_path: Path) -> None:
    path = write(tmp_path, {"apiVersion": "v1", "kind": "List", "items": [route()]})
    assert run(["plan", "-f", path, "--set", "cart-v2=20,cart-v1=80"])[0] == 0


# --- the rule choice, the merge, the flip and the patch ------------------------------------------------------------


def test_the_only_weighted_rule_is_the_default_and_a_route_without_one_lists_its_rules() -> None:
    assert choose_rule(REF, parse_route(REF, route()), None).index == 1
    body = route()
    del body["spec"]["rules"][1]
    with pytest.raises(UsageError, match=r"no rule splits between two or more backends: give --rule N \(its rules: 0"):
        choose_rule(REF, parse_route(REF, body), None)
    assert choose_rule(REF, parse_route(REF, body), "0").index == 0  # any rule by --rule


def test_the_patch_tests_the_version_read_and_writes_only_the_changed_weights() -> None:
    body = _two_weighted()
    parsed = parse_route(REF, body)
    change = rule_change(REF, parsed, choose_rule(REF, parsed, "api"), [("a-0", 5), ("a-1", 3)])
    # a-0 had no weight written (the default 1): `add` creates it; a-1 keeps 3, so it is not in the patch.
    assert weight_patch(body, change) == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "41"},
        {"op": "test", "path": "/spec/rules/2/backendRefs/0/name", "value": "a"},
        {"op": "add", "path": "/spec/rules/2/backendRefs/0/weight", "value": 5},
    ]
    change = rule_change(REF, parsed, choose_rule(REF, parsed, "cart"), [("cart-v2", 20), ("cart-v1", 80)])
    assert weight_patch(body, change)[1:] == [
        {"op": "test", "path": "/spec/rules/1/backendRefs/0/name", "value": "cart-v1"},
        {"op": "replace", "path": "/spec/rules/1/backendRefs/0/weight", "value": 80},
        {"op": "test", "path": "/spec/rules/1/backendRefs/1/name", "value": "cart-v2"},
        {"op": "replace", "path": "/spec/rules/1/backendRefs/1/weight", "value": 20},
    ]


def test_flip_swaps_a_two_backend_rule_with_one_at_zero_only() -> None:
    body = route()
    body["spec"]["rules"][1]["backendRefs"][0]["weight"] = 100
    body["spec"]["rules"][1]["backendRefs"][1]["weight"] = 0
    parsed = parse_route(REF, body)
    change = flipped_rule(REF, parsed, parsed.rules[1])
    assert change.after == (("cart-v1", 0), ("cart-v2", 100))
    with pytest.raises(UsageError) as exc:
        flipped_rule(REF, parse_route(REF, route()), parse_route(REF, route()).rules[1])
    assert str(exc.value) == (
        "httproute web/shop rule 1: flip needs exactly two backends with one at weight 0; it has cart-v1=90,cart-v2=10"
    )


# --- set-weights and flip on a (fake) API server -------------------------------------------------------------------


class FakeCluster:
    namespace = "web"

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.patches: list[tuple[list[dict[str, Any]], bool]] = []

    def get_httproute(self, name: str) -> dict[str, Any]:
        assert name == "shop"
        return copy.deepcopy(self.body)

    def list_policies(self) -> list[dict[str, Any]]:
        return []

    def patch_httproute(self, name: str, ops: list[dict[str, Any]], *, dry_run: bool) -> dict[str, Any]:
        self.patches.append((ops, dry_run))
        stored = copy.deepcopy(self.body)
        for op in ops:
            if op["op"] != "test":
                *parents, key = op["path"].strip("/").split("/")
                target: Any = stored
                for part in parents:
                    target = target[int(part)] if isinstance(target, list) else target[part]
                target[key] = op["value"]
        stored["metadata"]["generation"] = 4
        return stored


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    body = route()
    cluster = FakeCluster(body)
    monkeypatch.setattr(Cluster, "connect", classmethod(lambda cls, args: cluster))
    return cluster


def test_set_weights_prints_the_plan_then_patches_the_rule(fake: FakeCluster) -> None:
    code, text = run(["set-weights", "httproute/shop", "--set", "cart-v2=20,cart-v1=80", "--yes"])
    assert code == 0
    assert text.startswith("httproute web/shop rule 1\nfrom cart-v1=90,cart-v2=10 (total 100) to cart-v1=80,cart-v2=20")
    assert "the gateway serves this rule without a policy (assignment hash, sticky.mode persistent" in text
    assert text.endswith(
        "applied (field manager kubectl-trafficsplit, metadata.generation 4):\n"
        "  spec.rules[1].backendRefs[name=cart-v1].weight: 90 -> 80\n"
        "  spec.rules[1].backendRefs[name=cart-v2].weight: 10 -> 20\n"
    )
    ((ops, dry_run),) = fake.patches
    assert ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "41"} and not dry_run
    # The positional NAME=W,... works as for a TrafficSplit, and --dry-run says nothing was stored.
    code, text = run(["set-weights", "httproute/shop", "cart-v2=20", "--rule", "cart", "--dry-run"])
    assert code == 0 and "dry run: the API server accepted the change; nothing was stored" in text
    assert fake.patches[-1][1] is True


def test_set_weights_to_the_current_weights_sends_nothing(fake: FakeCluster) -> None:
    code, text = run(["set-weights", "httproute/shop", "--set", "cart-v1=90", "--yes"])
    assert code == 0 and text.endswith("nothing to change\n") and fake.patches == []


def test_a_zero_total_has_no_plan_and_is_sent_for_the_server_to_judge(fake: FakeCluster) -> None:
    code, text = run(["set-weights", "httproute/shop", "--set", "cart-v1=0,cart-v2=0", "--yes"])
    assert code == 0 and "from cart-v1=90,cart-v2=10 to cart-v1=0,cart-v2=0\nno plan: " in text
    assert len(fake.patches) == 1


def test_flip_patches_the_rule(fake: FakeCluster) -> None:
    fake.body["spec"]["rules"][1]["backendRefs"][0]["weight"] = 100
    fake.body["spec"]["rules"][1]["backendRefs"][1]["weight"] = 0
    code, text = run(["flip", "httproute/shop"])
    assert code == 0 and "cart-v1 -> cart-v2: 100.00%" in text
    assert "spec.rules[1].backendRefs[name=cart-v2].weight: 0 -> 100" in text


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["set-weights", "httproute/shop", "a=1", "--set", "a=1"], "give the weights once"),
        (["set-weights", "httproute/shop"], "set-weights httproute/shop needs the weights: NAME=W,..."),
        (["set-weights", "httproute/shop", "--set", "a=1", "--force-conflicts"], "--force-conflicts goes with a "),
        (["set-weights", "shop", "a=1", "--rule", "1"], "--rule goes with httproute/NAME"),
        (["set-weights", "httproute/shop", "--set", "a=x"], "--set: a: weight 'x' is not an integer"),
        (["flip", "httproute/shop", "--drain"], "--drain goes with a TrafficSplit"),
        (["flip", "shop", "--rule", "1"], "--rule goes with httproute/NAME"),
        (["status", "httproute/shop", "--gateway-metrics", "http://x"], "--gateway-metrics goes with a TrafficSplit"),
    ],
)
def test_route_arguments_exit_2_before_any_api_call(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], expect: str
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")  # were it read, the exit would be 1, not 2
    code, text = run(argv)
    err = capsys.readouterr().err
    assert code == 2 and text == "" and len(err.splitlines()) == 1 and expect in err, err


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["set-weights", "httproute/shop", "--set", "cart-v3=1", "--yes"], "has no backendRef 'cart-v3'; its back"),
        (["set-weights", "httproute/shop", "--rule", "0", "--set", "cdn=1000001"], "weight must be 0..1000000"),
        (["flip", "httproute/shop"], "flip needs exactly two backends with one at weight 0; it has cart-v1=90"),
    ],
)
def test_route_errors_after_the_read_exit_2_and_send_nothing(
    fake: FakeCluster, capsys: pytest.CaptureFixture[str], argv: list[str], expect: str
) -> None:
    assert run(argv)[0] == 2 and expect in capsys.readouterr().err and fake.patches == []


# --- status ---------------------------------------------------------------------------------------------------------


def _cond(type_: str, status: str, generation: int, message: str = "") -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": type_ if status == "True" else "Pending",
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": "2026-12-01T00:00:00Z",
    }


def test_route_status_shows_each_parents_conditions_and_each_rules_weights() -> None:
    body = route()
    body["spec"]["parentRefs"].append({"name": "edge", "namespace": "infra", "sectionName": "https"})
    body["spec"]["rules"][1]["backendRefs"].append({"group": "example.com", "kind": "Bucket", "name": "b"})
    body["status"] = {
        "parents": [
            {
                "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"},
                "controllerName": "trafficsplit.dev/gateway-controller",
                "conditions": [_cond("Accepted", "True", 3), _cond("ResolvedRefs", "True", 2, "all\nresolved")],
            }
        ]
    }
    gateway = {"metadata": {"generation": 7}, "status": {"conditions": [_cond("Programmed", "True", 7)]}}
    parsed = parse_route(REF, body)
    view = route_status_view(
        REF, body, parsed, {("web", "gw"): gateway, ("infra", "edge"): "gateway infra/edge not found"}
    )
    gw, edge = view["parents"]
    (ctl,) = gw["controllers"]
    assert [(c["type"], c["stale"]) for c in ctl["conditions"]] == [("Accepted", False), ("ResolvedRefs", True)]
    assert gw["gateway"]["programmed"]["status"] == "True" and not gw["gateway"]["programmed"]["stale"]
    assert edge["controllers"] == [] and edge["gateway"]["error"] == "gateway infra/edge not found"
    cart = view["rules"][1]
    assert [(b["name"], b["weight"], b["share"], b["inSplit"]) for b in cart["backends"]] == [
        ("cart-v1", 90, "89.11%", True),
        ("cart-v2", 10, "9.90%", True),
        ("b", 1, "0.99%", False),
    ]
    lines = render_route_status(view).splitlines()
    assert lines[:2] == ["httproute web/shop", "metadata.generation:  3"]
    assert "  gateway gw (status by trafficsplit.dev/gateway-controller)" in lines
    assert "  gateway infra/edge sectionName https" in lines
    resolved = next(line for line in lines if "ResolvedRefs" in line)
    assert resolved.split()[:5] == ["route", "ResolvedRefs", "True", "ResolvedRefs", "2"]
    assert resolved.endswith("all resolved")  # a newline in a message stays on its row
    assert "(stale)" in resolved
    programmed = next(line for line in lines if "Programmed" in line)
    assert programmed.split()[:5] == ["gateway", "Programmed", "True", "Programmed", "7"]
    assert "    - (no status for this parent: no controller has taken it yet)" in lines
    assert "    gateway: gateway infra/edge not found" in lines
    assert "  rule 1 (cart)" in lines
    bucket = next(line for line in lines if "Bucket" in line)
    assert bucket.split()[:3] == ["b", "(not", "a"] and "example.com/Bucket b" in bucket


def test_route_status_command_reads_the_parent_gateways(monkeypatch: pytest.MonkeyPatch) -> None:
    class Fake(FakeCluster):
        def get_gateway(self, namespace: str, name: str) -> dict[str, Any]:
            raise KubeError(f"gateway {namespace}/{name} not found")

    monkeypatch.setattr(Cluster, "connect", classmethod(lambda cls, args: Fake(route())))
    code, text = run(["status", "httproute/shop", "--json"])
    doc = json.loads(text)
    assert code == 0 and doc["httproute"] == {"namespace": "web", "name": "shop"}
    assert doc["parents"][0]["gateway"]["error"] == "gateway web/gw not found"
    assert [b["name"] for b in doc["rules"][1]["backends"]] == ["cart-v1", "cart-v2"]


def test_api_errors_of_a_route_patch_say_what_to_do() -> None:
    # What the API server answers when a JSON patch's test op fails: 422, no field named (seen from kube-apiserver
    # v1.33 in tests/integration/test_kubectl_plugin.py).
    failed = (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server rejected our '
        b'request due to an error in our request","reason":"Invalid","details":{},"code":422}'
    )
    assert api_error_message(REF, 422, failed, json_patch=True) == (
        "httproute web/shop: it changed after it was read (the patch's test of its resourceVersion failed); run the "
        "command again to plan against the new weights"
    )
    assert api_error_message(REF, 422, failed) == "the server rejected our request due to an error in our request"
    invalid = (
        b'{"reason":"Invalid","code":422,"message":"HTTPRoute.gateway.networking.k8s.io \\"shop\\" is invalid: x",'
    )
    invalid += b'"details":{"causes":[{"field":"spec.rules[1]"}]}}'
    assert api_error_message(REF, 422, invalid, json_patch=True).endswith("is invalid: x")
    no_crd = b'{"reason":"NotFound","message":"the server could not find the requested resource"}'
    assert "does not serve httproutes.gateway.networking.k8s.io/v1 (is the CRD installed?)" in api_error_message(
        REF, 404, no_crd
    )


def test_the_weights_argument_may_follow_options(fake: FakeCluster) -> None:
    # NAME=W,... is optional beside --set: it still parses after -n (plain argparse would refuse it as unrecognized).
    code, text = run(["set-weights", "httproute/shop", "-n", "web", "--yes", "cart-v2=20,cart-v1=80"])
    assert code == 0 and "spec.rules[1].backendRefs[name=cart-v2].weight: 10 -> 20" in text
