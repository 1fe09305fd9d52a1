"""The README's "On a cluster" commands name what examples/kubernetes/ creates, and the CLI's own rules accept them.

This is the cheap half of the guard against drift (no cluster): tests/e2e/test_7_readme.py runs the same commands,
and the chart's NOTES, on a real node. tests/integration/test_chart.py checks the rendered NOTES the same way.
"""

from __future__ import annotations

import pytest

from tests.support.doccommands import (
    README,
    Examples,
    demo_flip,
    load_examples,
    markdown_section,
    notes_commands,
    readme_cluster_commands,
    readme_demo_lines,
    split_problems,
    words,
)


@pytest.fixture(scope="module")
def examples() -> Examples:
    return load_examples()


def test_the_checker_finds_the_mistakes_the_readme_once_had(examples: Examples) -> None:
    # The README's first cluster block: no namespace, backends the example does not have, flip on three backends.
    assert list(split_problems("kubectl trafficsplit set-weights shop stable=90,canary=10", examples))
    assert list(split_problems("kubectl trafficsplit plan shop -n shop --set stable=90,canary=10", examples))
    flip = list(split_problems("kubectl trafficsplit flip shop -n shop", examples))
    assert flip and "flip needs exactly two backends" in flip[0]
    assert list(split_problems("kubectl trafficsplit set-weights shop -n shop blue=90", examples)) == [
        "'kubectl trafficsplit set-weights shop -n shop blue=90': changes the total weight 100 -> 95"
    ]
    # And accepts correct ones, including a JSON patch that keeps the total.
    assert not list(split_problems("kubectl trafficsplit set-weights shop -n shop blue=90,canary=10", examples))
    ramp = (
        "kubectl -n shop patch trafficsplit shop --type=json -p "
        """'[{"op":"test","path":"/spec/backends/0/name","value":"blue"},"""
        """{"op":"replace","path":"/spec/backends/0/weight","value":90},"""
        """{"op":"replace","path":"/spec/backends/2/weight","value":10}]'"""
    )
    assert not list(split_problems(ramp, examples))
    assert list(split_problems(ramp.replace('"value":"blue"', '"value":"stable"'), examples))


def test_readme_cluster_commands_name_what_the_examples_create(examples: Examples) -> None:
    commands = readme_cluster_commands()
    plugin = [c for c in commands if words(c)[:2] == ["kubectl", "trafficsplit"]]
    assert {words(c)[2] for c in plugin} >= {"plan", "set-weights", "flip", "status"}, commands
    problems = [p for c in commands for p in split_problems(c, examples)]
    assert problems == []
    # status names a split that exists, in its namespace.
    for c in plugin:
        argv = words(c)
        assert "-n" in argv and (argv[argv.index("-n") + 1], argv[3]) in examples.splits, c


def test_readme_cluster_block_installs_the_chart_and_applies_the_examples() -> None:
    commands = [words(c) for c in readme_cluster_commands()]
    helm = [c for c in commands if c[:2] == ["helm", "install"]]
    assert len(helm) == 1 and helm[0][3] == "charts/trafficsplit", helm
    assert ["kubectl", "apply", "-f", "examples/kubernetes/"] in commands


def test_examples_name_only_services_they_create(examples: Examples) -> None:
    for (ns, name), doc in examples.splits.items():
        assert ns in examples.namespaces, name
        for b in doc["spec"]["backends"]:
            assert (ns, b["service"]) in examples.services, f"{ns}/{name}: {b['service']}"


def test_notes_commands_are_the_indented_command_lines() -> None:
    notes = "Intro kubectl prose\n\n  kubectl -n x get pods\n  The first response sets a cookie\n  curl -si http://x/\n"
    assert notes_commands(notes) == ["kubectl -n x get pods", "curl -si http://x/"]


def test_readme_demo_lines_match_the_example_and_run_from_a_clone() -> None:
    """What hack/ci-demo.sh runs verbatim on a fresh clone: the flip comment names the example's backends and keeps
    its total, the plan line's --to is that flip, and it names the CLI where `make demo` puts it (not on PATH)."""
    import yaml

    from trafficsplit.cli.main import build_parser

    lines = readme_demo_lines()
    assert [c for c in lines if c.startswith("curl ")], lines
    flip = demo_flip(lines)
    split = next(d for d in yaml.safe_load_all((README.parent / flip.file).read_text()) if d)
    before = {b["name"]: b["weight"] for b in split["spec"]["backends"]}
    after = {**before, **flip.weights}
    assert set(flip.weights) <= set(before) and sum(after.values()) == sum(before.values()), (before, after)
    assert before[flip.source] > 0 and after[flip.source] == 0 and after[flip.lands_on] > 0, (before, after)
    (plan,) = [c for c in lines if not c.startswith(("curl ", "#"))]
    argv = words(plan)
    assert argv[0] == ".venv/bin/trafficsplit", plan
    parsed = build_parser().parse_args(argv[1:])
    assert parsed.command == "plan"
    assert ",".join(f"{k}={v}" for k, v in after.items()) in plan, (plan, after)


def test_a_shell_comment_in_a_fenced_block_does_not_end_a_section() -> None:
    text = "## A\n```sh\n# flip: not a heading\necho hi\n```\nmore\n## B\nb\n"
    assert markdown_section(text, "A") == "\n```sh\n# flip: not a heading\necho hi\n```\nmore\n"
