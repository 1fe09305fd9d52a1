"""The demo's pure decisions: what the examples ask it to start, what it refuses, and what it tells the user.

The argv it builds for the processor and the operator are parsed by THEIR OWN flag parsers here, so a renamed flag
fails this fast test instead of the demo at start-up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trafficsplit.demo.backends import Serve, handler_for, parse_serve, response_for
from trafficsplit.demo.plan import (
    OperatorNews,
    PortClaim,
    SampleEndpoint,
    backends_argv,
    busy_message,
    duplicate_claims,
    envoy_argv,
    envoy_bootstrap,
    extproc_argv,
    first_host,
    flip_recipe,
    load_examples,
    operator_argv,
    port_claims,
    ready_text,
)
from trafficsplit.demo.run import LogFollower, child_env, cli_command
from trafficsplit.demo.supervisor import parse_stat
from trafficsplit.extproc.__main__ import parse_args as extproc_parse_args
from trafficsplit.operator.config import parse_config

REPO_ROOT = Path(__file__).resolve().parents[2]


def split_yaml(backends: str, name: str = "shop", hosts: str = "[shop.local]", sticky: bool = True) -> str:
    cookie = "\n  sticky: {cookie: {name: shop-affinity}}" if sticky else ""
    return (
        f"apiVersion: trafficsplit.dev/v1alpha1\nkind: TrafficSplit\nmetadata: {{name: {name}}}\n"
        f"spec:\n  hosts: {hosts}\n  backends:\n{backends}{cookie}\n"
    )


BG_BACKENDS = (
    '    - {name: blue, weight: 100, endpoints: ["127.0.0.1:9001"]}\n'
    '    - {name: green, weight: 0, endpoints: ["127.0.0.1:9002"]}\n'
)
BLUE_GREEN = split_yaml(BG_BACKENDS)


def test_the_shipped_example_names_three_loopback_backends() -> None:
    files = {p.name: p.read_text() for p in (REPO_ROOT / "examples").iterdir() if p.suffix in (".yaml", ".yml")}
    ex = load_examples(files)
    assert ex.problems == ()
    assert {e.name for e in ex.endpoints} == {"blue", "green", "canary"}
    assert all(e.host == "127.0.0.1" for e in ex.endpoints)
    assert len({e.port for e in ex.endpoints}) == 3
    # The default gateway port must not collide with the example's backends.
    assert duplicate_claims(port_claims("127.0.0.1", 18080, ex, "examples")) == []


def test_endpoints_are_deduplicated_across_splits_and_files() -> None:
    other = split_yaml(
        '    - {name: blue, weight: 1, endpoints: ["127.0.0.1:9001"]}\n', name="other", hosts="[o.local]"
    )
    ex = load_examples({"a.yaml": BLUE_GREEN, "b.yaml": other})
    assert ex.problems == ()
    assert [(e.name, e.port, e.source) for e in ex.endpoints] == [("blue", 9001, "a.yaml"), ("green", 9002, "a.yaml")]
    assert [s.source for s in ex.splits] == ["a.yaml", "b.yaml"]


@pytest.mark.parametrize(
    ("backends", "problem"),
    [
        ("    - {name: blue, weight: 1}\n", "backend blue has no `endpoints`"),
        ('    - {name: blue, weight: 1, endpoints: ["10.0.0.1:80"]}\n', "10.0.0.1:80 is not loopback"),
        (
            '    - {name: blue, weight: 1, endpoints: ["127.0.0.1:9001"]}\n'
            '    - {name: green, weight: 1, endpoints: ["127.0.0.1:9001"]}\n',
            "127.0.0.1:9001 is both blue and green",
        ),
        ('    - {name: blue, weight: 0, endpoints: ["127.0.0.1:9001"]}\n', "total weight must be > 0"),
    ],
)
def test_what_the_demo_cannot_serve_is_named(backends: str, problem: str) -> None:
    ex = load_examples({"x.yaml": split_yaml(backends)})
    assert any(problem in p for p in ex.problems), ex.problems
    assert all(p.startswith("x.yaml") for p in ex.problems)


def test_an_empty_directory_is_a_problem_not_an_idle_demo() -> None:
    assert "no TrafficSplit found" in load_examples({}).problems[0]
    assert (
        load_examples({"cm.yaml": "kind: ConfigMap\nmetadata: {name: x}\n"}).problems[0].startswith("no TrafficSplit")
    )


def test_port_claims_and_their_messages() -> None:
    ex = load_examples({"shop.yaml": BLUE_GREEN})
    claims = port_claims("127.0.0.1", 9001, ex, "examples")
    assert claims[0] == PortClaim("127.0.0.1", 9001, "the gateway", "--port")
    assert duplicate_claims(claims) == ["port 9001 is claimed by both the gateway and backend blue"]
    msg = busy_message(claims[:2])
    assert "\n" not in msg
    assert msg == (
        "127.0.0.1:9001 (the gateway) is already in use; change --port; "
        "127.0.0.1:9001 (backend blue) is already in use; change its endpoint in examples/shop.yaml"
    )


def test_flip_recipe_moves_the_largest_weight_onto_the_idle_backend_keeping_the_total() -> None:
    ex = load_examples({"shop.yaml": BLUE_GREEN})
    lines = flip_recipe(ex.splits[0], "examples")
    assert lines[0].startswith("flip: edit examples/shop.yaml: blue weight 100 → 0, green weight 0 → 100")
    assert lines[1] == "preview who moves: trafficsplit plan --from blue=100,green=0 --to blue=0,green=100"


def test_without_an_idle_backend_the_recipe_is_a_ramp_of_five() -> None:
    canary = split_yaml(
        '    - {name: stable, weight: 90, endpoints: ["127.0.0.1:9001"]}\n'
        '    - {name: canary, weight: 10, endpoints: ["127.0.0.1:9002"]}\n'
    )
    lines = flip_recipe(load_examples({"c.yaml": canary}).splits[0], "ex")
    assert lines[0].startswith("ramp: edit ex/c.yaml: stable weight 90 → 85, canary weight 10 → 15")
    assert lines[1].endswith("--from stable=90,canary=10 --to stable=85,canary=15")


def test_first_host_prefers_a_concrete_name_over_localhost() -> None:
    def host(hosts: str) -> str:
        return first_host(load_examples({"s.yaml": split_yaml(BG_BACKENDS, hosts=hosts)}).splits[0].spec)

    assert host("[localhost, shop.localhost]") == "shop.localhost"
    assert host("[localhost]") == "localhost"
    assert host("['*.shop.local', shop.local]") == "shop.local"


def test_ready_text_shows_the_url_the_curl_line_the_cookie_and_the_pids() -> None:
    ex = load_examples({"shop.yaml": BLUE_GREEN})
    text = ready_text(
        listen_host="127.0.0.1",
        port=18080,
        examples=ex,
        examples_arg="examples",
        workdir="/tmp/d",
        admin="127.0.0.1:9901",
        metrics_port=9003,
        pids={"backends": 1, "envoy": 2},
    )
    lines = text.splitlines()
    assert lines[0] == "trafficsplit demo: ready at http://127.0.0.1:18080/"
    assert "  try:    curl -i -H 'Host: shop.local' http://127.0.0.1:18080/" in lines
    assert any("shop-affinity=<24 hex>" in line for line in lines)
    assert "  pids: backends=1 envoy=2" in lines
    assert "  logs: /tmp/d/*.log" in lines


def test_ready_text_names_the_cli_by_its_path_when_it_is_not_on_path() -> None:
    ex = load_examples({"shop.yaml": BLUE_GREEN})
    kw: dict[str, Any] = dict(
        listen_host="127.0.0.1", port=1, examples=ex, examples_arg="e", workdir="/w", admin="a", metrics_port=2, pids={}
    )
    lines = ready_text(**kw, cli=".venv/bin/trafficsplit").splitlines()
    assert any(line.startswith("  preview who moves: .venv/bin/trafficsplit plan --from ") for line in lines), lines
    hint = 'to type just trafficsplit: export PATH="$PWD/.venv/bin:$PATH")'
    assert f"  cli: .venv/bin/trafficsplit (not on your PATH; {hint}" in lines
    plain = ready_text(**kw)
    assert "  cli:" not in plain and "preview who moves: trafficsplit plan " in plain


def test_cli_command_is_the_bare_name_only_when_path_finds_this_very_script(tmp_path: Path) -> None:
    bindir = tmp_path / "clone" / ".venv" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "trafficsplit").write_text("#!/bin/sh\n")
    (bindir / "trafficsplit").chmod(0o755)
    python = str(bindir / "python")
    assert cli_command(python, tmp_path / "clone", "/usr/bin:/bin") == ".venv/bin/trafficsplit"
    assert cli_command(python, tmp_path / "elsewhere", "/usr/bin") == str(bindir / "trafficsplit")
    assert cli_command(python, tmp_path / "clone", f"{bindir}:/usr/bin") == "trafficsplit"
    assert cli_command(str(tmp_path / "python"), tmp_path, None) == "trafficsplit"  # no script beside it


def test_a_split_without_cookie_gets_no_cookie_lines() -> None:
    ex = load_examples({"s.yaml": split_yaml(BG_BACKENDS, sticky=False)})
    text = ready_text(
        listen_host="127.0.0.1", port=1, examples=ex, examples_arg="e", workdir="/w", admin="a", metrics_port=2, pids={}
    )
    assert "cookie" not in text


def test_the_processor_and_operator_accept_the_flags_the_demo_gives_them() -> None:
    a = extproc_parse_args(extproc_argv("python", "/w")[3:])
    assert a.listen == "unix:/w/extproc.sock" and a.publish == "127.0.0.1:0" and a.metrics == "127.0.0.1:0"
    assert str(a.token_file) == "/w/token" and str(a.ports_file) == "/w/extproc.ports.json"
    assert str(a.cookie_key_file) == "/w/cookie-keys"  # persistent mode works in the demo
    assert a.drain_seconds == 0
    cfg = parse_config(operator_argv("python", "/w", "/repo/examples", 4242, 0.5)[3:], {})
    assert cfg.local and cfg.file_source == "/repo/examples" and cfg.token_file == "/w/token"
    assert [r.address for r in cfg.static_dataplanes] == ["127.0.0.1:4242"]
    assert cfg.poll_interval == 0.5


def test_envoy_gets_the_gateway_bootstrap_on_the_demo_port_and_socket() -> None:
    boot = json.loads(envoy_bootstrap("/w", "127.0.0.1", 18080, 1000))
    listener = boot["static_resources"]["listeners"][0]
    assert listener["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 18080}
    pipes = {
        c["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["pipe"]["path"]
        for c in boot["static_resources"]["clusters"]
    }
    assert pipes == {"/w/extproc.sock"}
    argv = envoy_argv("/bin/envoy", "/w")
    assert argv[:3] == ["/bin/envoy", "--config-path", "/w/envoy.json"] and "--use-dynamic-base-id" in argv


def test_backends_argv_round_trips_through_the_backends_parser() -> None:
    eps = [SampleEndpoint("blue", "127.0.0.1", 9001, "s.yaml"), SampleEndpoint("green", "127.0.0.1", 9002, "s.yaml")]
    argv = backends_argv("python", eps)
    assert argv[:3] == ["python", "-m", "trafficsplit.demo.backends"]
    assert [parse_serve(a) for a in argv[3:]] == [Serve("blue", "127.0.0.1", 9001), Serve("green", "127.0.0.1", 9002)]


@pytest.mark.parametrize(
    "bad", ["blue", "blue=127.0.0.1", "=127.0.0.1:1", "blue=127.0.0.1:x", "blue=:1", "b=h:70000", "b=h:²"]
)
def test_backends_parser_refuses_malformed_items(bad: str) -> None:
    with pytest.raises(ValueError, match="NAME=HOST:PORT"):
        parse_serve(bad)


def test_a_backend_answers_with_its_name() -> None:
    body, headers = response_for("green")
    assert body == b"green\n"
    assert ("x-backend", "green") in headers and ("Content-Length", "6") in headers
    assert handler_for("green").protocol_version == "HTTP/1.1"


def test_child_env_drops_operator_settings_but_keeps_the_log_level() -> None:
    env = child_env({"PATH": "/bin", "TRAFFICSPLIT_GATEWAY_SERVICE": "gw", "TRAFFICSPLIT_LOG_LEVEL": "DEBUG"})
    assert env == {"PATH": "/bin", "TRAFFICSPLIT_LOG_LEVEL": "DEBUG", "PYTHONUNBUFFERED": "1"}


def test_parse_stat_survives_spaces_and_parentheses_in_the_command_name() -> None:
    assert parse_stat("42 (a (b) c) S 7 42 42 0 -1") == ("S", 7, 42)


def test_operator_news_keeps_problems_file_news_and_each_generation_with_what_changed_in_it() -> None:
    news = OperatorNews()
    log = [
        "2026-11-30 11:52:47,900 INFO trafficsplit.operator.filesource.changes: shop.yaml default/shop: blue 95 → 90, "
        "green 0, canary 5 → 10; moves 5.00% of sessions (blue → canary 5.00%)",
        "2026-11-30 11:52:48,034 INFO trafficsplit.operator.engine: generation 2: 1 splits",
    ]
    assert news.feed(log) == []  # the change waits for the generation that carries it
    log = [
        "2026-11-30 11:52:48,043 INFO trafficsplit.operator.fleet: dataplane demo-gateway holds generation 2",
        "2026-11-30 11:52:51,029 ERROR trafficsplit.operator.filesource: skipped shop.yaml:3:9: not YAML: mapping "
        "values are not allowed here",
        "2026-11-30 11:52:52,001 INFO trafficsplit.operator.filesource: shop.yaml: valid again: serving default/shop",
        "2026-11-30 11:52:52,002 WARNING trafficsplit.operator.filesource.changes: shop.yaml default/shop: the total "
        "changed (100 → 110): 13.64% moved where 9.09% would do",
        "Traceback (most recent call last):",
        "2026-11-30 11:52:52,043 INFO trafficsplit.operator.fleet: dataplane demo-gateway holds generation 3",
        "2026-11-30 11:52:55,043 INFO trafficsplit.operator.fleet: dataplane demo-gateway holds generation 4",
    ]
    assert news.feed(log) == [
        "operator: dataplane demo-gateway holds generation 2",
        "  shop.yaml default/shop: blue 95 → 90, green 0, canary 5 → 10; moves 5.00% of sessions (blue → canary 5.00%)",
        "operator: skipped shop.yaml:3:9: not YAML: mapping values are not allowed here",
        "operator: shop.yaml: valid again: serving default/shop",
        "operator: dataplane demo-gateway holds generation 3",
        "  warning: shop.yaml default/shop: the total changed (100 → 110): 13.64% moved where 9.09% would do",
        "operator: dataplane demo-gateway holds generation 4",
    ]


def test_a_persistent_two_backend_split_gets_the_drain_recipe_too() -> None:
    persistent = BLUE_GREEN.replace(
        "sticky: {cookie: {name: shop-affinity}}", "sticky: {mode: persistent, cookie: {name: s}}"
    )
    lines = flip_recipe(load_examples({"t.yaml": persistent}).splits[0], "examples")
    assert lines[0].startswith("flip: edit examples/t.yaml: blue weight 100 → 0, green weight 0 → 100")
    assert "`drain: true` on blue" in lines[2]
    assert lines[3] == "preview: trafficsplit plan --from blue=100,green=0 --to blue=0,green=100 --drain blue"
    assert len(flip_recipe(load_examples({"s.yaml": BLUE_GREEN}).splits[0], "examples")) == 2  # rehash: no drain
    text = ready_text(
        listen_host="127.0.0.1",
        port=1,
        examples=load_examples({"t.yaml": persistent}),
        examples_arg="e",
        workdir="/w",
        admin="a",
        metrics_port=2,
        pids={},
    )
    assert "the cookie s=<24 hex>.<backend>.<seal> (sealed with /w/cookie-keys)" in text


def test_the_shipped_examples_include_a_persistent_two_backend_split_to_flip_and_drain() -> None:
    files = {p.name: p.read_text() for p in (REPO_ROOT / "examples").iterdir() if p.suffix in (".yaml", ".yml")}
    ex = load_examples(files)
    assert any(len(s.spec.backends) == 2 and s.spec.sticky_mode.value == "persistent" for s in ex.splits)
    assert ex.splits[0].source == "shop.yaml"  # the demo waits for, and the tests flip, the first split


def test_log_follower_returns_only_complete_new_lines(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    follower = LogFollower(path)
    assert follower.new_lines() == []  # not there yet
    path.write_text("one\ntw")
    assert follower.new_lines() == ["one"]
    with path.open("a") as f:
        f.write("o\nthree\n")
    assert follower.new_lines() == ["two", "three"]
    assert follower.new_lines() == []
