"""The README's "On a cluster" commands name what examples/kubernetes/ creates, and the CLI's own rules accept them.

This is the cheap half of the guard against drift (no cluster): tests/e2e/test_7_readme.py runs the same commands,
and the chart's NOTES, on a real node. tests/integration/test_chart.py checks the rendered NOTES the same way.
"""

from __future__ import annotations

import pytest

from tests.support.doccommands import (
    Examples,
    load_examples,
    notes_commands,
    readme_cluster_commands,
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
