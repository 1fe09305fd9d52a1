"""The CLI: figures and JSON shapes (docs/cli.md) from main() in-process, plus one real `python -m` run."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from trafficsplit.cli import main as main_module
from trafficsplit.cli.main import SUBCOMMANDS, build_parser, main, package_version, program_name
from trafficsplit.core.model.ring import Ring


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue(), capsys.readouterr().err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0 and err == ""
    return json.loads(out)


def test_pick_json(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "pick", "--weights", "stable=95,canary=5", "0193f1c2a4b5000000000001", "")
    assert doc == {
        "picks": [
            {"key": "0193f1c2a4b5000000000001", "backend": "stable", "slot": 38, "total": 100},
            {"key": "", "backend": "stable", "slot": 89, "total": 100},
        ]
    }


def test_pick_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "pick", "--weights", "stable=80,canary=20", "a", "")
    assert code == 0
    assert out.splitlines()[0].split() == ["a", "stable", "(slot", "21", "of", "100)"]
    assert "canary" in out.splitlines()[1]


def test_plan_json_keeping_the_total(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "plan", "--from", "stable=95,canary=5", "--to", "stable=90,canary=10")
    assert doc["moved_share"] == 0.05 and doc["total_changed"] is False and doc["exact"] is True
    assert doc["moves"] == [{"from": "stable", "to": "canary", "share": 0.05}]
    assert doc["suggestion"] is None


def test_plan_json_changing_the_total(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "plan", "--from", "stable=95,canary=5", "--to", "stable=95,canary=10")
    assert doc["moved_fraction"] == "19/140" and doc["total_changed"] is True and doc["period"] == 2100
    assert {(m["from"], m["to"]) for m in doc["moves"]} == {("stable", "canary"), ("canary", "stable")}
    assert sum(m["share"] for m in doc["moves"]) == pytest.approx(doc["moved_share"])
    assert doc["suggestion"] == {"weights": "stable=90,canary=10", "total": 100, "moved_share": 0.05}


def test_plan_text_warns_when_the_total_changes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--from", "stable=95,canary=5", "--to", "stable=95,canary=10")
    assert code == 0
    assert "warning: the total changes (100 -> 105)" in out and "13.6% move where 4.5% would do" in out
    assert "--to stable=90,canary=10" in out
    _, quiet, _ = run(capsys, "plan", "--from", "stable=95,canary=5", "--to", "stable=90,canary=10")
    assert "warning" not in quiet


def test_plan_adding_a_backend_is_allowed(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "plan", "--from", "a=50,b=50", "--to", "a=50,b=50,c=1")
    assert doc["moved_fraction"] == "51/101"


def test_plan_sample_is_an_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "plan", "--from", "stable=95,canary=5", "--to", "stable=90,canary=10", "--sample", "2000")
    assert doc["exact"] is False and doc["samples"] == 2000
    assert doc["moved_share"] == pytest.approx(0.05, abs=0.03)


def test_simulate_json(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "simulate", "--clients", "major:1:2000,medium:9:400,minor:90:50", "--replicas", "3")
    assert doc["clients"] == 100 and doc["requests"] == 10100
    assert set(doc["rules"]) == {"non-sticky", "sticky-modulo", "sticky-consistent"}
    for rule in doc["rules"].values():
        assert set(rule) >= {"load", "imbalance", "load_after_add", "imbalance_after_add", "busiest_drop"}
        assert len(rule["load"]) == 3 and len(rule["load_after_add"]) == 4
    assert doc["rules"]["non-sticky"]["load"] == [3367, 3367, 3366]
    assert set(doc["rebinding"]) == set(doc["loss"]) == set(doc["rules"])
    assert doc["loss"]["non-sticky"] == {"sessions": 0, "request_share": 0.0}
    assert doc["serial_fraction"] == pytest.approx(2000 / 10100)
    assert [a["replicas"] for a in doc["amdahl"]] == [3, 4, 8, 16, 64, None]
    assert doc["amdahl"][-1]["speedup"] == pytest.approx(10100 / 2000)


def test_simulate_json_names_the_peak_drop_and_the_capacity_model(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--clients", "major:1:2000,medium:9:400,minor:90:50", "--replicas", "3"]
    doc = run_json(capsys, *argv, "--peak-rps", "1000", "--safe-rps", "300", "--target-utilization", "0.7")
    modulo = doc["rules"]["sticky-modulo"]
    assert (modulo["peak_before"], modulo["peak_after_add"]) == (5150, 4450)
    assert round(modulo["peak_drop"] * 100, 2) == 13.59
    assert doc["points"] == 200 and doc["added"] == ["k4"] and doc["lost"] == ["k1"]
    cap = doc["capacity"]
    assert cap["even_replicas"] == 5 and cap["rules"]["sticky-modulo"]["busiest_rps"] == pytest.approx(509.90099)
    assert cap["largest_session"]["max_share_within_target"] == pytest.approx(0.21)
    # Both definitions of replicas needed, named; the per-count table (peak / S(n), its utilization, speedups).
    needed = {r: (v["replicas_needed_by_search"], v["replicas_needed_by_imbalance"]) for r, v in cap["rules"].items()}
    assert needed == {"non-sticky": (5, 5), "sticky-modulo": (23, 8), "sticky-consistent": (25, 7)}
    assert all(v["replicas_needed"] == v["replicas_needed_by_search"] for v in cap["rules"].values())
    rows = cap["by_replicas"]
    assert [r["replicas"] for r in rows] == [3, 4, 8, 16, 64, None]
    s = 2000 / 10100
    for row, sp in zip(rows, doc["speedups"], strict=True):
        bound = 1 / s if row["replicas"] is None else 1 / (s + (1 - s) / row["replicas"])
        assert sp["sticky"] == pytest.approx(bound) and sp["non_sticky"] == row["replicas"]
        assert row["busiest_lower_bound_rps"] == pytest.approx(1000 / bound, abs=1e-6)
        assert row["busiest_lower_bound_utilization"] == pytest.approx(1000 / bound / 300, abs=1e-6)
    doc = run_json(capsys, *argv, "--points", "50", "--add", "x,y", "--lose", "k2,k3", "--amdahl", "2,5")
    assert doc["added"] == ["x", "y"] and len(doc["rules"]["sticky-consistent"]["load_after_loss"]) == 1
    assert [a["replicas"] for a in doc["amdahl"]] == [2, 5, None]
    assert doc["moved_on_loss"]["sticky-consistent"]["sessions"] == 0


def test_simulate_named_replicas_use_the_same_ring(capsys: pytest.CaptureFixture[str]) -> None:
    pods = ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"]
    argv = ["simulate", "--clients", "a:50:2", "--replica-names", ",".join(pods)]
    doc = run_json(capsys, *argv, "--add", "10.0.0.4:80")
    assert doc["replicas"] == pods and doc["added"] == ["10.0.0.4:80"] and doc["lost"] == ["10.0.0.1:80"]
    names = [f"a-{i}" for i in range(50)]
    moved = sum(Ring(pods).owner(n) != Ring([*pods, "10.0.0.4:80"]).owner(n) for n in names)
    assert doc["rebinding"]["sticky-consistent"]["clients"] == moved
    code, _, err = run(capsys, *argv)
    assert code == 2 and "add: at least one replica must be added" in err


def test_simulate_text_says_peak_drop(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", "--clients", "major:1:2000,medium:9:400,minor:90:50", "--replicas", "3")
    assert code == 0 and "peak 5150 -> 4450 requests, peak drop 13.59%" in out


def test_simulate_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", "--clients", "a:10:5", "--replicas", "2")
    assert code == 0 and "sticky-consistent" in out and "Amdahl" in out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (
            ["plan", "--from", "stable=95,canary=5", "--to", "stabel=90,canary=10"],
            "backend 'stable' of --from is missing",
        ),
        (["plan", "--from", "a=-1,b=1", "--to", "a=1"], "--from: backends[0].weight: must be >= 0"),
        (["plan", "--from", "a=1", "--to", "a=1.5"], "--to: a: weight '1.5' is not an integer"),
        (["plan", "--from", "a=1", "--to", "a=0"], "--to: backends: the total weight must be > 0"),
        (["plan", "--from", "a=1,a=2", "--to", "a=1"], "duplicate backend name 'a'"),
        (["plan", "--from", "a=1", "--to", "a=1", "--sample", "0"], "--sample: must be >= 1"),
        (["plan", "--from", "a=1"], "--to"),
        (["pick", "--weights", "a=0,b=0", "k"], "the total weight must be > 0"),
        (["pick", "--weights", "a=1"], "required: KEY"),
        (["simulate", "--clients", "a:1", "--replicas", "3"], "PREFIX:COUNT:REQUESTS_PER_CLIENT"),
        (["simulate", "--clients", "a:²:1", "--replicas", "3"], "PREFIX:COUNT:REQUESTS_PER_CLIENT"),
        (["pick", "--weights", "a=²", "k"], "--weights: a: weight '²' is not an integer"),
        (["demo", "--port", "²"], "is not a port"),
        # Refused by the parser, before the examples are read or anything starts (Envoy would refuse it later).
        (["demo", "--examples", "/nonexistent", "--message-timeout-ms", "0"], "'0' is not a positive integer"),
        (["demo", "--examples", "/nonexistent", "--start-timeout", "nan"], "'nan' is not a positive number"),
        (["simulate", "--clients", "a:1:1", "--replicas", "0"], "replicas: must be"),
        (["simulate", "--clients", "a:1:1", "--replicas", "x"], "invalid int value"),
        (["simulate", "--clients", "a:1:1", "--replicas", "2", "--points", "2x"], "--points: '2x' must be an integer"),
        (["simulate", "--clients", "a:1:1", "--replicas", "2", "--peak-rps", "10"], "needs both --peak-rps and"),
        (["simulate", "--clients", "a:1:1", "--replicas", "2", "--peak-rps", "1e3", "--safe-rps", "1"], "decimal"),
        (["simulate", "--clients", "a:1:1", "--replicas", "2", "--lose", "k1,,k2"], "--lose: 'k1,,k2' must be"),
        (["simulate", "--clients", "a:1:1", "--replicas", "2", "--amdahl", "2,x"], "--amdahl: '2,x' must be"),
        (["nope"], "invalid choice"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert fragment in err and "error:" in err and "Traceback" not in err


def test_every_registered_subcommand_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for name in SUBCOMMANDS:
        assert main([name, "--help"]) == 0
        assert f"usage: trafficsplit {name}" in capsys.readouterr().out


def test_python_dash_m(tmp_path: object) -> None:
    env = {"PYTHONPATH": ":".join(p for p in sys.path if p)}
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "trafficsplit.cli",
            "plan",
            "--from",
            "stable=95,canary=5",
            "--to",
            "stable=95,canary=10",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["total_changed"] is True
    bad = subprocess.run(
        [sys.executable, "-m", "trafficsplit.cli", "pick", "--weights", "a=-3", "k"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.splitlines() == ["trafficsplit pick: error: --weights: backends[0].weight: must be >= 0, got -3"]


# Arguments that are not valid UTF-8 reach Python as lone surrogates (PEP 383); before the check they ended in a
# UnicodeEncodeError traceback deep in key_hash (issue 13 item 6).
@pytest.mark.parametrize(
    "argv",
    [
        ["pick", "--weights", "a=1,b=1", "\udcff\udcfe"],
        ["simulate", "--clients", "\udcffx:1:10", "--replicas", "2"],
        ["plan", "--from", "a\udcff=1", "--to", "a=1"],
    ],
)
def test_arguments_that_are_not_text_exit_2_with_one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "is not valid UTF-8 text" in err and "Traceback" not in err, err


def test_arguments_that_are_not_text_exit_2_from_a_real_argv() -> None:
    env = {"PYTHONPATH": ":".join(p for p in sys.path if p), "LC_ALL": "C.UTF-8"}
    done = subprocess.run(
        [sys.executable, "-m", "trafficsplit.cli", "pick", "--weights", "a=1,b=1", b"\xff\xfe"],
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count(b"\n") == 1 and b"Traceback" not in done.stderr, done.stderr


# Issue 18, item 7: the CLI's rough edges.
def test_simulate_one_replica_is_computed_and_the_loss_is_not_applicable(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "simulate", "--clients", "major:1:2000,medium:9:400,minor:90:50", "--replicas", "1")
    assert code == 0, err
    assert f"  {'non-sticky':<18} {10100:>6}   imbalance 1.00" in out
    assert "3. losing a replica: n/a (one replica: none can be lost and leave a survivor)" in out
    doc = run_json(capsys, "simulate", "--clients", "major:1:2000,medium:9:400,minor:90:50", "--replicas", "1")
    assert doc["lost"] == [] and doc["loss"] is None and doc["moved_on_loss"] is None
    assert all(r["load_after_loss"] is None for r in doc["rules"].values())
    assert doc["rebinding"]["non-sticky"]["clients"] == 0


def test_plan_with_a_name_and_from_to_says_which_forms_clash(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "plan", "shop", "--from", "a=1", "--to", "a=2")
    assert code == 2 and out == ""
    assert err == "trafficsplit plan: error: give either --from/--to or NAME --set, not both\n"
    code, _, err = run(capsys, "plan", "shop")
    assert (
        code == 2 and err == "trafficsplit plan: error: plan shop needs --set NAME=W,... (the backends that change)\n"
    )


@pytest.mark.parametrize("option", ["--from", "--to"])
def test_plan_refuses_a_backend_name_the_crd_refuses(capsys: pytest.CaptureFixture[str], option: str) -> None:
    good, bad = "a=1", "a b=1"
    argv = ["plan", "--from", bad if option == "--from" else good, "--to", bad if option == "--to" else good]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert f"{option}: backends[0].name: 'a b' must be a DNS label" in err, err


def test_pick_refuses_a_backend_name_the_crd_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "pick", "--weights", "Stable=1", "k")
    assert code == 2 and "backends[0].name: 'Stable' must be a DNS label" in err, err


def test_the_kubectl_plugin_names_itself_kubectl_trafficsplit(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # kubectl runs the plugin as `kubectl-trafficsplit`; its help and errors must say what the user typed.
    monkeypatch.setattr(sys, "argv", ["/usr/local/bin/kubectl-trafficsplit", "plan", "--help"])
    assert main() == 0
    assert "usage: kubectl trafficsplit plan" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["/usr/local/bin/kubectl-trafficsplit", "pick", "--weights", "a=-1", "k"])
    assert main() == 2
    assert capsys.readouterr().err.startswith("kubectl trafficsplit pick: error: ")
    monkeypatch.setattr(sys, "argv", ["/usr/local/bin/trafficsplit", "plan", "--help"])
    assert main() == 0
    assert "usage: trafficsplit plan" in capsys.readouterr().out


def test_bare_prints_the_help_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    # As `kubectl` and cobra-based plugins do: asking what the tool does is not an error.
    code, out, err = run(capsys)
    assert code == 0 and err == ""
    assert out.startswith("usage: trafficsplit [-h] [--version] COMMAND ...")
    assert all(name in out for name in SUBCOMMANDS)


def test_version_is_the_package_version(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"trafficsplit {metadata.version('trafficsplit')}\n"

    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    # From a source tree that was never installed: pyproject's version, marked.
    monkeypatch.setattr(metadata, "version", not_installed)
    pyproject = Path(main_module.__file__).resolve().parents[3] / "pyproject.toml"
    declared = tomllib.loads(pyproject.read_text())["project"]["version"]
    assert package_version() == f"{declared} (source tree, not installed)"


@pytest.mark.parametrize(
    ("argv0", "prog"),
    [
        ("/usr/local/bin/kubectl-trafficsplit", "kubectl trafficsplit"),
        ("kubectl-trafficsplit", "kubectl trafficsplit"),
        ("/usr/local/bin/trafficsplit", "trafficsplit"),
        ("/x/trafficsplit/cli/__main__.py", "trafficsplit"),
        ("", "trafficsplit"),
    ],
)
def test_program_name_from_argv0(argv0: str, prog: str) -> None:
    assert program_name(argv0) == prog
