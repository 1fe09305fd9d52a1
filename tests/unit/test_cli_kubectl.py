"""The kubectl plugin's pure parts: --set parsing and merging, the flip rule, the status view and its rendering, the
API error wording and the kubeconfig namespace rule. No API server: the integration tier runs the real thing."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from trafficsplit.cli.common import UsageError
from trafficsplit.cli.flip import flipped
from trafficsplit.cli.kplan import changes, merge, parse_assignments, plan_change, spec_backends
from trafficsplit.cli.kube import Cluster, Ref, api_error_message, apply_body, context_namespace
from trafficsplit.cli.main import main
from trafficsplit.cli.set_weights import confirm, plan_text, result_text
from trafficsplit.cli.status import render_status, status_view
from trafficsplit.cli.table import table
from trafficsplit.core.control.spec import DeclaredBackend
from trafficsplit.core.model.errors import SpecError

REF = Ref("shop", "web")


def live(*pairs: tuple[str, int]) -> list[DeclaredBackend]:
    return [
        DeclaredBackend({"name": n, "service": f"svc-{n}", "port": 80 + i, "weight": w})
        for i, (n, w) in enumerate(pairs)
    ]


# --- --set --------------------------------------------------------------------------------------------------------


def test_parse_assignments_keeps_order_and_trims() -> None:
    assert parse_assignments(" canary = 10 , stable=90,") == [("canary", 10), ("stable", 90)]


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("canary", "'canary': expected NAME=WEIGHT"),
        ("=5", "'=5': expected NAME=WEIGHT"),
        ("canary=ten", "canary: weight 'ten' is not an integer"),
        ("canary=1.5", "canary: weight '1.5' is not an integer"),
        ("canary=²", "canary: weight '²' is not an integer"),  # isdigit() but not int()
        ("canary=" + "9" * 5000, "canary: weight '9999"),  # more digits than int() converts
        ("canary=1,canary=2", "canary: given twice"),
        ("", "expected NAME=WEIGHT,..."),
    ],
)
def test_parse_assignments_rejects_bad_syntax_in_one_line(text: str, expect: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_assignments(text)
    assert str(exc.value).startswith("--set: ") and expect in str(exc.value) and "\n" not in str(exc.value)


def test_parse_assignments_leaves_bounds_to_the_server() -> None:
    # Out of range but well-formed: the API server's schema is the authority on the bounds.
    assert parse_assignments("canary=2000000,stable=-1") == [("canary", 2_000_000), ("stable", -1)]


def test_merge_changes_only_the_named_weights_in_place() -> None:
    current = live(("stable", 95), ("canary", 5), ("dark", 0))
    out = merge(REF, current, [("canary", 10)])
    assert out == [current[0], {**current[1], "weight": 10}, current[2]]
    assert current[1]["weight"] == 5  # the input is not mutated


def test_merge_refuses_a_new_backend_naming_it_and_the_existing_ones() -> None:
    with pytest.raises(UsageError) as exc:
        merge(REF, live(("stable", 95), ("canary", 5)), [("canry", 10), ("extra", 1)])
    msg = str(exc.value)
    assert "trafficsplit shop/web has no backend 'canry' (nor 'extra')" in msg
    assert "its backends are stable, canary" in msg and "needs a service and port" in msg


def test_changes_lists_each_changed_field_by_backend_name() -> None:
    before = live(("stable", 95), ("canary", 5))
    after = [before[0].with_weight(90), DeclaredBackend({**before[1], "weight": 10, "port": 8080})]
    assert changes(before, after) == [
        "spec.backends[name=stable].weight: 95 -> 90",
        "spec.backends[name=canary].weight: 5 -> 10",
        "spec.backends[name=canary].port: 81 -> 8080",
    ]
    assert changes(before, before) == []
    assert changes(before, before[:1]) == ["spec.backends[name=canary]: removed"]


def test_spec_backends_names_the_resource_when_empty() -> None:
    with pytest.raises(SpecError, match=r"trafficsplit shop/web: spec\.backends is empty"):
        spec_backends(REF, {"spec": {}})


# --- the plan before an apply ---------------------------------------------------------------------------------------


def test_plan_text_reuses_the_plan_rendering_with_the_set_flag() -> None:
    text = plan_text(REF, live(("stable", 95), ("canary", 5)), live(("stable", 95), ("canary", 10)))
    assert text.startswith("trafficsplit shop/web\nfrom stable=95,canary=5 (total 100) to stable=95,canary=10")
    assert "moves 13.57% of sessions" in text and "--set stable=90,canary=10 (moves 5.00%" in text
    assert "--to" not in text


def test_plan_text_for_weights_the_core_rejects_says_why_and_defers_to_the_server() -> None:
    text = plan_text(REF, live(("stable", 95), ("canary", 5)), live(("stable", 95), ("canary", 2_000_000)))
    assert "from stable=95,canary=5 to stable=95,canary=2000000" in text
    assert "no plan: backends[1].weight: must be <= 1000000, got 2000000" in text


def test_plan_change_is_the_core_planner() -> None:
    p = plan_change(live(("blue", 100), ("green", 0)), live(("blue", 0), ("green", 100)))
    assert float(p.moved_share) == 1.0 and not p.total_changed


def test_result_text_for_a_dry_run_and_an_apply() -> None:
    current = live(("stable", 95), ("canary", 5))
    stored = {"metadata": {"generation": 4}, "spec": {"backends": merge(REF, current, [("canary", 10)])}}
    dry = result_text(REF, current, stored, dry_run=True).splitlines()
    assert dry == [
        "dry run: the API server accepted the change; nothing was stored. It would change:",
        "  spec.backends[name=canary].weight: 5 -> 10",
    ]
    applied = result_text(REF, current, stored, dry_run=False)
    assert applied.startswith("applied (field manager kubectl-trafficsplit, metadata.generation 4):")


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "expect"), [("y\n", True), ("YES\n", True), ("n\n", False), ("\n", False)])
def test_confirm_asks_on_a_terminal(answer: str, expect: bool) -> None:
    err = io.StringIO()
    assert confirm(Tty(answer), err) is expect
    assert err.getvalue() == "apply? [y/N] "


def test_confirm_refuses_without_a_terminal() -> None:
    with pytest.raises(UsageError, match="pass --yes"):
        confirm(io.StringIO("y\n"), io.StringIO())


def test_apply_body_claims_only_backends_with_the_version_precondition() -> None:
    body = apply_body(REF, live(("stable", 1)), "123")
    assert body == {
        "apiVersion": "trafficsplit.dev/v1alpha1",
        "kind": "TrafficSplit",
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "123"},
        "spec": {"backends": live(("stable", 1))},
    }
    assert "resourceVersion" not in apply_body(REF, live(("stable", 1)), "")["metadata"]


# --- flip ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("weights", "expect"), [((100, 0), (0, 100)), ((0, 7), (7, 0)), ((1, 0), (0, 1))])
def test_flip_swaps_the_weights_and_keeps_everything_else(weights: tuple[int, int], expect: tuple[int, int]) -> None:
    current = live(("blue", weights[0]), ("green", weights[1]))
    out = flipped(REF, current)
    assert [b["weight"] for b in out] == list(expect)
    assert [{k: v for k, v in b.items() if k != "weight"} for b in out] == [
        {k: v for k, v in b.items() if k != "weight"} for b in current
    ]


def test_flip_drain_marks_the_side_going_to_0_and_a_flip_back_drops_the_mark() -> None:
    out = flipped(REF, live(("blue", 100), ("green", 0)), drain=True)
    assert [(b.name, b.weight, b.drain) for b in out] == [("blue", 0, True), ("green", 100, False)]
    back = flipped(REF, out)
    assert [(b.name, b.weight, b.drain) for b in back] == [("blue", 100, False), ("green", 0, False)]
    assert all("drain" not in b for b in back)  # the API server refuses drain with weight: the mark is gone
    # set-weights keeps a mark only where the weight stays 0.
    assert out[0].with_weight(0).drain and not out[0].with_weight(5).drain


@pytest.mark.parametrize(
    "pairs",
    [
        (("stable", 95), ("canary", 5)),
        (("blue", 0), ("green", 0)),
        (("only", 100),),
        (("a", 100), ("b", 0), ("c", 0)),
    ],
)
def test_flip_refuses_anything_but_two_backends_one_at_zero(pairs: tuple[tuple[str, int], ...]) -> None:
    with pytest.raises(UsageError) as exc:
        flipped(REF, live(*pairs))
    shown = ",".join(f"{n}={w}" for n, w in pairs)
    assert str(exc.value) == (
        f"trafficsplit shop/web: flip needs exactly two backends with one at weight 0; it has {shown}"
    )


# --- status -------------------------------------------------------------------------------------------------------


def operator_object(generation: int, observed: int, published: str = "True") -> dict[str, Any]:
    cond = {"status": "True", "observedGeneration": observed, "lastTransitionTime": "2026-11-30T12:00:00Z"}
    return {
        "metadata": {"name": "web", "namespace": "shop", "generation": generation},
        "spec": {"backends": live(("stable", 80), ("canary", 20))},
        "status": {
            "observedGeneration": observed,
            "weights": "stable=90,canary=10",
            "generation": 12,
            "conditions": [
                {**cond, "type": "Accepted", "reason": "Accepted", "message": "ok"},
                {
                    **cond,
                    "type": "Published",
                    "status": published,
                    "reason": "Behind",
                    "message": "1/2 dataplanes;\nbehind: gw-1",
                },
            ],
            "backends": [
                {
                    "name": "stable",
                    "service": "svc-stable",
                    "port": 80,
                    "weight": 90,
                    "share": "90.00%",
                    "readyEndpoints": 2,
                    "endpoints": 3,
                },
                {"name": "canary", "service": "svc-canary", "port": 81, "weight": 10, "share": "10.00%"},
            ],
            "displacement": {
                "from": "stable=95,canary=5",
                "to": "stable=95,canary=10",
                "totalChanged": True,
                "repinnedShare": "13.57%",
                "rebalanced": "stable=90,canary=10",
                "rebalancedRepinnedShare": "5.00%",
            },
        },
    }


def test_status_view_flags_stale_conditions_and_unacked_generations() -> None:
    view = status_view(REF, operator_object(generation=5, observed=4))
    assert view["generation"] == 5 and view["observedGeneration"] == 4 and view["stale"] is True
    assert [c["stale"] for c in view["conditions"]] == [True, True]
    assert view["weights"] == {"spec": "stable=80,canary=20", "served": "stable=90,canary=10"}
    assert view["dataplaneGeneration"] == 12 and view["dataplaneGenerationAcked"] is False

    fresh = status_view(REF, operator_object(generation=4, observed=4))
    assert fresh["stale"] is False and not any(c["stale"] for c in fresh["conditions"])
    assert fresh["dataplaneGenerationAcked"] is True
    assert status_view(REF, operator_object(4, 4, published="False"))["dataplaneGenerationAcked"] is False


def test_status_view_of_an_object_without_status_is_all_missing() -> None:
    view = status_view(REF, {"metadata": {"generation": 1}, "spec": {"backends": live(("a", 1))}})
    assert view["observedGeneration"] is None and view["stale"] is True and view["conditions"] == []
    assert view["backends"] is None and view["displacement"] is None and view["dataplaneGenerationAcked"] is None
    text = render_status(view)
    assert "observedGeneration:    - (stale" in text and "served weights:        -\n" in text
    assert "dataplane generation:  -\n" in text and "(none written: is the operator running?)" in text
    assert text.count("\n  -\n") == 2  # backends and last displacement


def test_render_status_tables_and_displacement() -> None:
    lines = render_status(status_view(REF, operator_object(generation=5, observed=4))).splitlines()
    assert lines[0] == "trafficsplit shop/web"
    assert "observedGeneration:    4 (stale: the operator has not reported on metadata.generation 5 yet)" in lines
    assert "served weights:        stable=90,canary=10 (differs from spec: not served yet, or not accepted)" in lines
    assert (
        "dataplane generation:  12 (not known to be acknowledged by every dataplane: the condition is stale)" in lines
    )
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["TYPE", "STATUS"])
    assert lines[header + 2].split()[:5] == ["Published", "True", "Behind", "4", "(stale)"]
    assert lines[header + 2].endswith("1/2 dataplanes; behind: gw-1")  # a newline in a message stays on its row
    canary = next(line for line in lines if line.split()[:1] == ["canary"])
    assert canary.split() == ["canary", "svc-canary", "81", "10", "10.00%", "-"]  # no endpoint counts written
    assert next(line for line in lines if line.split()[:1] == ["stable"]).split()[-1] == "2/3"
    assert "  stable=95,canary=5 -> stable=95,canary=10: 13.57% of sticky sessions re-pinned" in lines
    assert "  total changed: yes" in lines
    assert "  keeping the total: stable=90,canary=10 would have re-pinned 5.00%" in lines


def test_table_aligns_columns_and_shows_missing_as_dash() -> None:
    assert table(["A", "BB", "C"], [["xxx", None, "last"], ["y", 7, ""]]) == [
        "  A    BB  C",
        "  xxx  -   last",
        "  y    7   -",
    ]


# --- kube: errors and namespace -------------------------------------------------------------------------------------


def test_api_error_messages_name_the_resource() -> None:
    nf = b'{"kind":"Status","reason":"NotFound","details":{"name":"web","kind":"trafficsplits"}}'
    assert api_error_message(REF, 404, nf) == "trafficsplit shop/web not found"
    no_crd = b'{"reason":"NotFound","message":"the server could not find the requested resource"}'
    assert "is the CRD installed?" in api_error_message(REF, 404, no_crd)
    invalid = (
        b'{"reason":"Invalid","code":422,"message":"TrafficSplit.trafficsplit.dev \\"web\\" is invalid: '
        b'spec.backends[1].weight: Invalid value: 2000000"}'
    )
    assert api_error_message(REF, 422, invalid) == (
        'TrafficSplit.trafficsplit.dev "web" is invalid: spec.backends[1].weight: Invalid value: 2000000'
    )
    conflict = (
        b'{"reason":"Conflict","message":"Apply failed with 1 conflict: conflict with \\"argocd\\": .spec.backends"}'
    )
    msg = api_error_message(REF, 409, conflict)
    assert msg.startswith('trafficsplit shop/web: Apply failed with 1 conflict: conflict with "argocd"')
    assert "--force-conflicts" in msg
    modified = b'{"reason":"Conflict","message":"Operation cannot be fulfilled: the object has been modified"}'
    assert "run the command again" in api_error_message(REF, 409, modified)
    assert api_error_message(REF, 500, b"not json") == "trafficsplit shop/web: not json"


def test_context_namespace_follows_kubectl() -> None:
    contexts = [{"name": "a", "context": {"namespace": "team-a"}}, {"name": "b", "context": {}}]
    assert context_namespace(contexts, {"name": "a"}, None) == "team-a"
    assert context_namespace(contexts, {"name": "a"}, "b") == "default"
    assert context_namespace(contexts, None, "missing") == "default"


def test_connect_takes_the_namespace_from_the_chosen_context(tmp_path: Path) -> None:
    import argparse

    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [
                    {"name": "one", "context": {"cluster": "c", "user": "u", "namespace": "ns-one"}},
                    {"name": "two", "context": {"cluster": "c", "user": "u", "namespace": "ns-two"}},
                ],
                "current-context": "one",
            }
        )
    )

    def ns(**kw: Any) -> str:
        args = argparse.Namespace(**{"kubeconfig": str(path), "context": None, "namespace": None, **kw})
        cluster = Cluster.connect(args)
        cluster.api.close()
        return cluster.namespace

    assert ns() == "ns-one"
    assert ns(context="two") == "ns-two"
    assert ns(context="two", namespace="explicit") == "explicit"


# --- argument errors exit 2 before any API call ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["plan"], "give --from and --to, or a TrafficSplit NAME and --set"),
        (["plan", "web"], "plan web needs --set NAME=W,..."),
        (["plan", "--set", "canary=1"], "--set needs a TrafficSplit NAME"),
        (["plan", "web", "--set", "c=1", "--from", "a=1", "--to", "a=1"], "either --from/--to or NAME --set"),
        (["plan", "web", "--set", "canary=x"], "--set: canary: weight 'x' is not an integer"),
        (["plan", "web", "--set", "canary=1", "--sample", "0"], "--sample: must be >= 1, got 0"),
        (["set-weights", "web", "canary"], "NAME=W: 'canary': expected NAME=WEIGHT"),
        (["set-weights", "web", "canary=²"], "NAME=W: canary: weight '²' is not an integer"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], expect: str
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")  # were it read, the exit would be 1, not 2
    out = io.StringIO()
    assert main(argv, out=out) == 2
    err = capsys.readouterr().err
    assert out.getvalue() == "" and len(err.splitlines()) == 1 and expect in err


def test_kube_errors_exit_1_with_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    assert main(["status", "web"], out=io.StringIO()) == 1
    err = capsys.readouterr().err
    assert err.startswith("trafficsplit status: error: cannot load credentials from /nonexistent/kubeconfig")
    assert len(err.splitlines()) == 1


def test_an_unreachable_server_is_one_line_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Port 1 on loopback: nothing listens there, so the connection is refused at once.
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(path))
    assert main(["status", "web"], out=io.StringIO()) == 1
    err = capsys.readouterr().err
    assert err.startswith("trafficsplit status: error: trafficsplit default/web: cannot reach the API server")
    assert len(err.splitlines()) == 1
