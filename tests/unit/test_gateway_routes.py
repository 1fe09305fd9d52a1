"""One Gateway's route table in a generation: `gateway_content` (what a Gateway's data plane serves), the host-less
rule splits a `Generation` accepts only through its table, and the table's values refusing what no translation
builds (the publish receiver rebuilds tables through them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from tests.unit.test_gateway_translate import CLASS, gateway, route, service
from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.decide.match import RouteTable
from trafficsplit.core.gatewayapi.httproute import parse_httproute
from trafficsplit.core.gatewayapi.objects import parse_gateway
from trafficsplit.core.gatewayapi.translate import Inputs, Translation, gateway_content, translate
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import Generation, GenerationContent
from trafficsplit.core.model.matches import PathType, RouteMatch, ValueMatch, ValueMatchType
from trafficsplit.core.model.routes import (
    BackendTarget,
    GatewayRoutes,
    ListenerRoutes,
    RouteEntry,
    RuleAction,
    RuleKey,
    VirtualHost,
    port_virtual_hosts,
)


def two_gateways() -> Translation:
    gw1 = gateway()
    gw2 = gateway({"name": "web", "port": 8080, "protocol": "HTTP"})
    gw2["metadata"]["name"] = "gw2"
    return translate(
        Inputs(
            classes=(CLASS,),
            gateways=(parse_gateway(gw1), parse_gateway(gw2)),
            routes=(
                parse_httproute(route("r", rules=[{"backendRefs": [{"name": "a", "port": 80}]}])),
                parse_httproute(
                    route(
                        "s",
                        parentRefs=[{"name": "gw2"}],
                        hostnames=["b.example.com"],
                        rules=[
                            {"matches": [{"path": {"value": "/x"}}], "backendRefs": [{"name": "b", "port": 80}]},
                            {"matches": [{"path": {"value": "/y"}}], "backendRefs": [{"name": "a", "port": 80}]},
                        ],
                    )
                ),
            ),
            services={("ns", s): service(s) for s in ("a", "b")},
        )
    )


def test_gateway_content_is_that_gateways_listeners_and_the_splits_of_their_rules() -> None:
    t = two_gateways()
    one = gateway_content(t, "ns/gw")
    two = gateway_content(t, "ns/gw2")
    assert one.routes is not None and two.routes is not None
    assert [(lr.gateway, lr.listener, lr.port) for lr in one.routes.listeners] == [("ns/gw", "http", 80)]
    assert [(lr.gateway, lr.listener, lr.port) for lr in two.routes.listeners] == [("ns/gw2", "web", 8080)]
    assert [s.key for s in one.splits] == ["ns/r.rule-0"]
    assert [s.key for s in two.splits] == ["ns/s.rule-0", "ns/s.rule-1"]
    assert [a.key for a in two.routes.actions] == ["ns/s.rule-0", "ns/s.rule-1"]
    for content in (one, two):
        assert all(s.hosts == () for s in content.splits)  # rule splits are host-less
        gen = content.stamp(7)
        assert gen.routes == content.routes and gen.content == content
        assert dict(gen.by_host) == {}  # no split serves a host: the table selects them
        assert gen.split_for("a.example.com") is None


def test_a_request_reaches_its_rules_split_through_the_table() -> None:
    gen = gateway_content(two_gateways(), "ns/gw2").stamp(1)
    assert gen.routes is not None
    (lr,) = gen.routes.listeners
    table = RouteTable(lr)
    picked = {}
    for path in ("/x/1", "/y"):
        entry = table.select("b.example.com", path)
        assert entry is not None
        split = gen.routes.action_for(entry).split
        assert split is not None and split in gen.splits
        picked[path] = [b.service for b in split.backends]
    assert picked == {"/x/1": ["b"], "/y": ["a"]}
    assert table.select("b.example.com", "/z") is None


def test_a_gateway_with_no_route_has_an_empty_table_not_none() -> None:
    content = gateway_content(two_gateways(), "ns/other")
    assert content.splits == () and content.routes == GatewayRoutes(gateway="ns/other")
    assert content.stamp(1).routes is not None


def test_trafficsplits_are_not_in_a_gateways_content_and_keep_their_host_checks() -> None:
    ts = compile_split(
        parse_split("ns", "ts", {"hosts": ["shop.example"], "backends": [{"name": "x", "port": 80, "weight": 1}]})
    )
    gen = GenerationContent(splits=(ts,)).stamp(1)
    assert gen.routes is None and gen.split_for("shop.example") == ts
    hostless = dataclasses.replace(ts, hosts=())
    with pytest.raises(SpecError, match=r"splits\[0\]\.hosts: at least one host is required"):
        Generation(1, (hostless,))


def test_a_hostless_split_needs_a_rule_of_the_table_that_is_that_split() -> None:
    content = gateway_content(two_gateways(), "ns/gw")
    assert content.routes is not None
    (split,) = content.splits
    with pytest.raises(SpecError, match=r"splits\[0\]\.hosts: at least one host is required"):
        Generation(1, (split,), GatewayRoutes(gateway="ns/gw"))  # no rule names it
    other = dataclasses.replace(split, observed_generation=9)
    with pytest.raises(SpecError, match=r"at least one host is required"):
        Generation(1, (other,), content.routes)  # a rule names the key, with another split
    with pytest.raises(SpecError, match=r"routes: rule ns/r\.rule-0's split is not among the splits"):
        Generation(1, (), content.routes)
    with pytest.raises(SpecError, match=r"split ns/r\.rule-0 is listed twice"):
        Generation(1, (split, split), content.routes)


def _action(**changes: Any) -> RuleAction:
    (a,) = gateway_content(two_gateways(), "ns/gw").routes.actions  # type: ignore[union-attr]
    return dataclasses.replace(a, **changes)


def test_a_rule_action_checks_its_split_and_targets() -> None:
    a = _action()
    assert a.split is not None
    with_hosts = dataclasses.replace(a.split, hosts=("a.example.com",))
    with pytest.raises(SpecError, match="a rule's split has no hosts"):
        _action(split=with_hosts)
    with pytest.raises(SpecError, match=r"is not this rule's split \('ns/r\.rule-1'\)"):
        _action(rule=1)
    with pytest.raises(SpecError, match="targets: one per backend of the split"):
        _action(targets=())
    (t,) = a.targets
    with pytest.raises(SpecError, match=r"targets\[0\]: a:80 weight 5 is not backend a's"):
        _action(targets=(dataclasses.replace(t, weight=5),))
    with pytest.raises(SpecError, match="error_weight: -1"):
        _action(error_weight=-1)
    with pytest.raises(SpecError, match="route: namespace: 'Ns' must be a DNS label"):
        _action(route="Ns/r", split=None, targets=())
    with pytest.raises(SpecError, match="must be namespace/name"):
        _action(route="r", split=None, targets=())
    with pytest.raises(SpecError, match=r"service: 'A_b' must be a DNS label.*port: 0"):
        BackendTarget(backend="a", namespace="ns", service="A_b", port=0, weight=1)


def _entry(**match: Any) -> RouteEntry:
    return RouteEntry("ns/r", 0, 0, RouteMatch(**match))


@pytest.mark.parametrize(
    ("match", "fragment"),
    [
        ({"path": "api"}, "path.value: 'api' must be an absolute path"),
        ({"path": "/a\r\nx: y"}, "must be an absolute path of printable ASCII"),
        ({"path": "/" * 1025}, "path.value: 1025 characters"),
        ({"path_type": PathType.REGULAR_EXPRESSION, "path": "(a"}, "path.value: invalid regular expression"),
        ({"path_type": PathType.REGULAR_EXPRESSION, "path": "a{1000}"}, "path.value: invalid regular expression"),
        ({"headers": (ValueMatch(ValueMatchType.EXACT, "X-Up", "1"),)}, "headers[0].name: 'X-Up' must be lowercase"),
        ({"headers": (ValueMatch(ValueMatchType.EXACT, "a b", "1"),)}, "headers[0].name: 'a b' must be an HTTP token"),
        ({"headers": (ValueMatch(ValueMatchType.EXACT, "x", "1\n"),)}, "headers[0].value: only printable ASCII"),
        ({"query_params": (ValueMatch(ValueMatchType.EXACT, "q", "v" * 1025),)}, "queryParams[0].value: 1025"),
        ({"headers": tuple(ValueMatch(ValueMatchType.EXACT, f"h{i}", "1") for i in range(17))}, "headers: 17 items"),
    ],
)
def test_a_route_entry_refuses_a_match_no_data_plane_serves(match: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SpecError) as exc:
        _entry(**match)
    assert any(q.startswith("match.") and fragment in q for q in exc.value.problems), exc.value.problems


def test_the_parser_drops_a_rule_whose_match_a_route_entry_would_refuse() -> None:
    """One rule in one place: the translation never builds an entry its own values refuse (here: a control byte in
    a header value, which YAML and the API server both let through)."""
    body = route(rules=[{"matches": [{"headers": [{"name": "x", "value": "a\tb"}]}], "backendRefs": []}])
    (rule,) = parse_httproute(body).rules
    assert rule.problems == ("matches[0].headers[0].value: only printable ASCII is supported",)


def test_a_table_refuses_entries_without_their_rule_and_foreign_or_repeated_listeners() -> None:
    a = _action()
    vh = VirtualHost("a.example.com", (_entry(path="/"),))
    lr = ListenerRoutes("ns/gw", "http", 80, (vh,))
    assert GatewayRoutes(gateway="ns/gw", listeners=(lr,), actions=(a,)).action_for(vh.entries[0]) == a
    with pytest.raises(SpecError, match=r"listeners\[0\]\.hosts\[0\]\.entries\[0\]: rule ns/r\.rule-0 has no action"):
        GatewayRoutes(gateway="ns/gw", listeners=(lr,))
    with pytest.raises(SpecError, match=r"listeners\[0\]\.gateway: 'ns/gw' is not 'ns/gw2'"):
        GatewayRoutes(gateway="ns/gw2", listeners=(lr,), actions=(a,))
    with pytest.raises(SpecError, match=r"listeners\[1\]\.listener: 'http' is listed twice"):
        GatewayRoutes(gateway="ns/gw", listeners=(lr, lr), actions=(a,))
    with pytest.raises(SpecError, match=r"actions\[1\]: rule ns/r\.rule-0 is listed twice"):
        GatewayRoutes(gateway="ns/gw", listeners=(lr,), actions=(a, a))
    with pytest.raises(SpecError, match=r"hosts\[1\]: 'a\.example\.com' is listed twice"):
        ListenerRoutes("ns/gw", "http", 80, (vh, vh))
    with pytest.raises(SpecError, match=r"entries\[1\]: ns/r\.rule-0 match 0 is listed twice"):
        VirtualHost("a.example.com", vh.entries * 2)
    with pytest.raises(SpecError, match=r"hostname: 'a\.example\.com:80' is not a host name"):
        VirtualHost("a.example.com:80", ())
    with pytest.raises(SpecError, match=r"port: 0 is not in 1\.\.65535"):
        ListenerRoutes("ns/gw", "http", 0, ())


def _port_80(*routes: dict[str, Any]) -> Translation:
    gw = gateway(
        {"name": "any", "port": 80, "protocol": "HTTP"},
        {"name": "wild", "port": 80, "protocol": "HTTP", "hostname": "*.example.com"},
        {"name": "exact", "port": 80, "protocol": "HTTP", "hostname": "foo.example.com"},
    )
    return translate(
        Inputs(
            classes=(CLASS,),
            gateways=(parse_gateway(gw),),
            routes=tuple(parse_httproute(r) for r in routes),
            services={("ns", "a"): service("a")},
        )
    )


def _on(name: str, listener: str, hostnames: list[str]) -> dict[str, Any]:
    return route(name, parentRefs=[{"name": "gw", "sectionName": listener}], hostnames=hostnames)


def test_listeners_sharing_a_port_take_a_request_by_the_most_specific_hostname() -> None:
    """The spec picks the listener first (exact, longest `*.`, none), then that listener's routes: a route for
    bar.example.com on the catch-all listener does not serve bar.example.com while a `*.example.com` listener takes
    it, even when that listener has no route for it (404)."""
    both = (_on("r-any", "any", ["bar.example.com", "other.net"]), _on("r-all", "any", []))
    for with_wild in (True, False):
        extra = (_on("r-wild", "wild", []), _on("r-exact", "exact", [])) if with_wild else ()
        t = _port_80(*both, *extra)
        table = RouteTable(t.listeners)

        def hit(host: str, table: RouteTable = table) -> str | None:
            e = table.select(host, "/")
            return None if e is None else e.route

        assert hit("bar.example.com") == ("ns/r-wild" if with_wild else None)
        assert hit("foo.example.com") == ("ns/r-exact" if with_wild else None)
        assert hit("other.net") == "ns/r-any"
        assert hit("x.y.net") == "ns/r-all"
        assert hit("example.com") == "ns/r-all"  # `*.example.com` does not take the apex
        content = gateway_content(t, "ns/gw")
        assert content.routes is not None
        (port,) = content.routes.ports()
        assert port == 80
    # Listeners without routes are in the table too (here, the second pass): they take their hosts, and answer 404.
    assert {lr.listener: (lr.hostname, len(lr.hosts)) for lr in t.listeners} == {
        "any": (None, 3),
        "wild": ("*.example.com", 0),
        "exact": ("foo.example.com", 0),
    }


def test_a_listeners_virtual_hosts_lie_within_its_hostname() -> None:
    vh = VirtualHost("a.example.net", ())
    with pytest.raises(SpecError, match=r"hosts\[0\]\.hostname: 'a\.example\.net' is not within"):
        ListenerRoutes("ns/gw", "http", 80, (vh,), hostname="*.example.com")
    with pytest.raises(SpecError, match="is not within"):
        ListenerRoutes("ns/gw", "http", 80, (VirtualHost("*", ()),), hostname="a.example.net")
    assert ListenerRoutes("ns/gw", "http", 80, (vh,), hostname="a.example.net").hostname == "a.example.net"
    with pytest.raises(ValueError, match="one port"):
        RouteTable([ListenerRoutes("ns/gw", "a", 80, ()), ListenerRoutes("ns/gw", "b", 81, ())])


def test_a_listener_name_that_is_no_section_name_is_refused_while_parsing() -> None:
    """The CRD's SectionName pattern: such a Gateway never reaches the translation, whose ListenerRoutes would refuse
    the name (an exception there would stop the translation of every other Gateway)."""
    with pytest.raises(SpecError, match=r"spec\.listeners\[0\]\.name: 'Web_1' must be"):
        parse_gateway(gateway({"name": "Web_1", "port": 80, "protocol": "HTTP"}))


class _CountedHosts(tuple[VirtualHost, ...]):
    """A listener's virtual hosts that count how often they are walked."""

    walks: int

    def __iter__(self) -> Iterator[VirtualHost]:
        self.walks = getattr(self, "walks", 0) + 1
        return super().__iter__()


class _CountedName(str):
    """A hostname that counts the equality tests made on it (a set's lookups hash, and test equality only on a
    collision)."""

    __hash__ = str.__hash__
    compared: list[int]

    def __eq__(self, other: object) -> bool:
        self.compared[0] += 1
        return str.__eq__(self, other)


def test_a_listeners_hosts_are_read_in_proportion_to_their_number() -> None:
    """1,000 routes with a hostname each are 1,000 virtual hosts on one listener: checking them and building the
    port's table read each host a bounded number of times, not once per other host (that was 1,000 x 1,000 at the
    receiving replica and on every route table build: the 1,000-HTTPRoute benchmark, docs/performance.md)."""
    n = 1000
    compared = [0]
    hosts = _CountedHosts(VirtualHost(_CountedName(f"app{i}.example.com"), ()) for i in range(n))
    for vh in hosts:
        vh.hostname.compared = compared  # type: ignore[attr-defined]
    lr = ListenerRoutes("ns/gw", "http", 80, hosts)
    assert compared[0] <= n, f"{compared[0]} hostname comparisons checking {n} virtual hosts"
    hosts.walks = 0
    table = port_virtual_hosts([lr])
    walks = hosts.walks
    by_name = {vh.hostname: vh for vh in table}
    # Every host, and the catch-all of a listener without a hostname (no route serves it here: 404).
    assert set(by_name) == {vh.hostname for vh in lr.hosts} | {"*"}
    assert all(by_name[vh.hostname].entries == vh.entries for vh in lr.hosts) and by_name["*"].entries == ()
    assert walks <= 4, f"{walks} walks over a listener's {n} virtual hosts"


def test_rule_key_renders_the_split_key_and_parses_it_back() -> None:
    key = RuleKey.of("shop/web.v2", 3)
    assert (key.namespace, key.name, key.rule) == ("shop", "web.v2", 3)
    assert (key.route, key.split_name, key.text) == ("shop/web.v2", "web.v2.rule-3", "shop/web.v2.rule-3")
    assert RuleKey.parse(key.text) == key
    # a route whose name holds `.rule-` itself: the last one is the rule's
    assert RuleKey.parse("shop/a.rule-1.rule-2") == RuleKey("shop", "a.rule-1", 2)


@pytest.mark.parametrize(
    "text",
    [
        "shop/web",
        "web.rule-1",
        "shop/web.rule-",
        "shop/web.rule-x",
        "shop/web.rule-\u0663",
        "shop/web.rule-" + "9" * 5000,
    ],
)
def test_rule_key_parse_refuses_a_key_no_rule_has(text: str) -> None:
    assert RuleKey.parse(text) is None
