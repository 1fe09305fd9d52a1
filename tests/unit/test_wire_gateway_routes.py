"""A Gateway's route table compiled to native Envoy routes (wire/gateway_routes.py), read as Envoy would: one route
configuration per listener port, virtual hosts by hostname, the entries' routes in the model's precedence order with
Envoy's own matches and filters, ext_proc off wherever no pick is needed, and the decided and fallback routes of a rule
that splits."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.http.ext_proc.v3 import ext_proc_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm_pb2
from google.protobuf import any_pb2

from trafficsplit.core.gatewayapi.translate import gateway_content
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.filters import PathModifier, PathModifierType, rewrite_path
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.matches import PathType, RouteMatch
from trafficsplit.core.model.routes import RuleKey
from trafficsplit.core.model.rules import Endpoint
from trafficsplit.core.model.timeouts import RuleTimeouts
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire import envoy, gateway_routes, snapshot
from trafficsplit.wire.bootstrap import Address, BootstrapOptions, GatewayListener, bootstrap
from trafficsplit.wire.gateway_routes import (
    _prefix_rewrite,
    needs_processor,
    route_config_name,
    route_configurations,
    route_match,
    rule_of,
)
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto, held_parts

from .test_gateway_serve import FILTERED, ref, route, served


def generation(*routes: dict[str, Any], number: int = 3) -> Generation:
    _, t = served(*routes)
    return gateway_content(t, "ns/gw").stamp(number)


def on_http(name: str, **spec: Any) -> dict[str, Any]:
    return route(name, parentRefs=[{"name": "gw", "sectionName": "http"}], hostnames=["a.example.com"], **spec)


def vhost(gen: Generation, port: int, hostname: str) -> rc.VirtualHost:
    config = route_configurations(gen)[route_config_name(port)]
    (found,) = [vh for vh in config.virtual_hosts if vh.name == hostname]
    assert list(found.domains) == [hostname]
    return found


def extproc_off(r: rc.Route) -> bool:
    if envoy.EXTPROC_FILTER not in r.typed_per_filter_config:
        return False
    # The generic FilterConfig (Envoy then creates no ext_proc filter for the request), not ExtProcPerRoute.
    per = rc.FilterConfig()
    assert r.typed_per_filter_config[envoy.EXTPROC_FILTER].Unpack(per)
    return bool(per.disabled)


def test_one_route_configuration_per_port_with_its_hosts_and_a_404_everywhere_else() -> None:
    gen = generation(on_http("one", rules=[{"backendRefs": [ref("a", 1)]}]))
    configs = route_configurations(gen)
    assert sorted(configs) == ["trafficsplit_80", "trafficsplit_8081"]
    c80 = configs["trafficsplit_80"]
    assert c80.name == "trafficsplit_80" and c80.ignore_port_in_host_matching
    assert list(c80.internal_only_headers) == [envoy.ROUTING_HEADER]
    assert list(c80.request_headers_to_remove) == [envoy.ROUTING_HEADER]
    # The listeners' own names (exact before `*`), each ending in the 404; a host no listener takes: the 404 host.
    assert [vh.name for vh in c80.virtual_hosts] == ["a.example.com", "b.example.com", "*"]
    for vh in c80.virtual_hosts:
        last = vh.routes[-1]
        assert last.name == "no-route" and last.direct_response.status == 404 and extproc_off(last)
        assert last.match.prefix == "/"
    assert [r.name for r in vhost(gen, 80, "b.example.com").routes] == ["no-route"]
    # Every route configuration routes through Envoy's RDS: the resources carry them beside the splits' one.
    res = snapshot.resources(gen)
    assert res.routes is not None and set(res.routes) == {envoy.ROUTE_CONFIG_NAME, *configs}


def test_entries_keep_the_models_precedence_order_and_envoys_matches() -> None:
    rules = [
        {"matches": [{"path": {"type": "PathPrefix", "value": "/api/"}}], "backendRefs": [ref("a", 1)]},
        {"matches": [{"path": {"type": "Exact", "value": "/api/exact"}}], "backendRefs": [ref("b", 1)]},
        {
            "matches": [
                {
                    "path": {"type": "RegularExpression", "value": "/v[0-9]+/.*"},
                    "method": "POST",
                    "headers": [
                        {"name": "X-Env", "value": "prod"},
                        {"type": "RegularExpression", "name": "x-v", "value": "b.*"},
                    ],
                    "queryParams": [{"name": "q", "value": "1"}],
                },
                {"path": {"type": "PathPrefix", "value": "/"}},
            ],
            "backendRefs": [ref("c", 1)],
        },
    ]
    gen = generation(on_http("r", rules=rules))
    assert gen.routes is not None
    names = [r.name for r in vhost(gen, 80, "a.example.com").routes]
    (lr,) = [lr for lr in gen.routes.listeners if lr.listener == "http"]
    (model,) = lr.hosts
    # Envoy's order is the model's (Exact before the longer prefix, the header match before the bare prefix, ...).
    assert names == [f"native:{e.rule_key}:{e.match_index}" for e in model.entries] + ["no-route"]
    by_name = {r.name: r for r in vhost(gen, 80, "a.example.com").routes}
    assert by_name["native:ns/r.rule-1:0"].match.path == "/api/exact"
    assert by_name["native:ns/r.rule-0:0"].match.path_separated_prefix == "/api"
    assert by_name["native:ns/r.rule-2:1"].match.prefix == "/"
    m = by_name["native:ns/r.rule-2:0"].match
    assert m.safe_regex.regex == "/v[0-9]+/.*"
    assert [(h.name, h.string_match.exact, h.string_match.safe_regex.regex) for h in m.headers] == [
        ("x-env", "prod", ""),
        ("x-v", "", "b.*"),
        (":method", "POST", ""),
    ]
    assert [(q.name, q.string_match.exact) for q in m.query_parameters] == [("q", "1")]


def test_wildcard_hostnames_are_envoys_suffix_domains() -> None:
    wild = route("w", parentRefs=[{"name": "gw", "sectionName": "alt"}], hostnames=["*.example.org", "x.example.org"])
    gen = generation({**wild, "spec": {**wild["spec"], "rules": [{"backendRefs": [ref("a", 1)]}]}})
    config = route_configurations(gen)["trafficsplit_8081"]
    # Exact first, then the suffix, then the catch-all 404 (no route of the listener serves every host).
    assert [list(vh.domains) for vh in config.virtual_hosts] == [["x.example.org"], ["*.example.org"], ["*"]]
    assert [r.name for r in config.virtual_hosts[1].routes] == ["native:ns/w.rule-0:0", "no-route"]


def test_a_one_backend_rule_never_calls_the_processor_and_a_split_does() -> None:
    gen = generation(
        on_http(
            "r",
            rules=[
                {"matches": [{"path": {"value": "/one"}}], "backendRefs": [ref("a", 1), ref("b", 0)]},
                {"matches": [{"path": {"value": "/split"}}], "backendRefs": [ref("a", 90), ref("b", 10)]},
                {"matches": [{"path": {"value": "/broken"}}], "backendRefs": [ref("missing", 1)]},
                {"matches": [{"path": {"value": "/half"}}], "backendRefs": [ref("a", 1), ref("missing", 1)]},
            ],
        )
    )
    assert gen.routes is not None
    need = {k: needs_processor(a) for k, a in gen.routes.by_rule.items()}
    assert need == {"ns/r.rule-0": False, "ns/r.rule-1": True, "ns/r.rule-2": False, "ns/r.rule-3": True}
    by_name = {r.name: r for r in vhost(gen, 80, "a.example.com").routes}
    one = by_name["native:ns/r.rule-0:0"]
    assert one.route.cluster == "ns/r.rule-0/a" and extproc_off(one)
    assert one.metadata.filter_metadata[envoy.METADATA_NAMESPACE]["path"] == "native"
    broken = by_name["no-backend:ns/r.rule-2:0"]
    assert broken.direct_response.status == 500 and extproc_off(broken)
    # The split: a decided route per backend (the routing header naming its cluster), then the fallback, where the
    # processor is called (no per-route config: ext_proc on) and Envoy's weights stand without its decision.
    split_names = [n for n in by_name if ":ns/r.rule-1:" in n]
    assert split_names == ["decided:ns/r.rule-1:0:a", "decided:ns/r.rule-1:0:b", "fallback:ns/r.rule-1:0"]
    for backend in ("a", "b"):
        d = by_name[f"decided:ns/r.rule-1:0:{backend}"]
        assert d.route.cluster == f"ns/r.rule-1/{backend}" and not extproc_off(d)
        assert d.match.path_separated_prefix == "/split"
        assert (d.match.headers[-1].name, d.match.headers[-1].string_match.exact) == (
            envoy.ROUTING_HEADER,
            f"ns/r.rule-1/{backend}",
        )
    fallback = by_name["fallback:ns/r.rule-1:0"]
    assert not extproc_off(fallback) and rule_of(fallback.name) == RuleKey("ns", "r", 1)
    assert [(c.name, c.weight.value) for c in fallback.route.weighted_clusters.clusters] == [
        ("ns/r.rule-1/a", 90),
        ("ns/r.rule-1/b", 10),
    ]
    # The 500 share: the processor answers it; the fallback serves the resolved backend.
    half = by_name["fallback:ns/r.rule-3:0"]
    assert [(c.name, c.weight.value) for c in half.route.weighted_clusters.clusters] == [("ns/r.rule-3/a", 1)]


def test_a_session_rule_hashes_its_cookie_in_the_fallback() -> None:
    gen = generation(
        on_http(
            "s",
            rules=[
                {
                    "backendRefs": [ref("a", 1)],
                    "sessionPersistence": {"sessionName": "sid", "type": "Cookie"},
                }
            ],
        )
    )
    assert gen.routes is not None and needs_processor(gen.routes.by_rule["ns/s.rule-0"])  # one backend, a session
    routes = vhost(gen, 80, "a.example.com").routes
    assert [r.name for r in routes] == [
        "decided:ns/s.rule-0:0:a",
        "fallback-cookie:ns/s.rule-0:0",
        "fallback:ns/s.rule-0:0",
        "no-route",
    ]
    cookie = routes[1]
    assert cookie.route.weighted_clusters.use_hash_policy.value
    assert [h.cookie.name for h in cookie.route.hash_policy] == ["sid"]
    assert cookie.match.headers[-1].name == "cookie" and cookie.match.headers[-1].string_match.safe_regex.regex
    assert cookie.metadata.filter_metadata[envoy.METADATA_NAMESPACE]["key_source"] == "cookie"
    assert routes[2].metadata.filter_metadata[envoy.METADATA_NAMESPACE]["key_source"] == "none"
    # The session's response headers (the minted cookie, the disclosure) come from the processor's metadata.
    added = {h.header.key for h in vhost(gen, 80, "a.example.com").response_headers_to_add}
    assert {"set-cookie", envoy.DECISION_HEADER} <= added


def test_header_filters_rule_on_the_route_backend_on_its_cluster_or_merged_for_one_cluster() -> None:
    gen = generation(FILTERED)
    by_name = {r.name: r for r in vhost(gen, 80, "a.example.com").routes}

    def adds(hs: Any) -> list[tuple[str, str, int]]:
        return [(h.header.key, h.header.value, h.append_action) for h in hs]

    over, app = (
        base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD,
        base_pb2.HeaderValueOption.APPEND_IF_EXISTS_OR_ADD,
    )
    b = by_name["decided:ns/f.rule-0:0:b"]
    # The rule's set X-Env then the backend's remove of it: removed; the backend's own set added.
    assert adds(b.request_headers_to_add) == [("x-canary", "1", over), ("x-via", "ts", app)]
    assert sorted(b.request_headers_to_remove) == ["x-debug", "x-env"]
    assert adds(b.response_headers_to_add) == [("cache-control", "no-store", over), ("x-backend", "b", app)]
    assert list(b.response_headers_to_remove) == ["server"]
    fallback = by_name["fallback:ns/f.rule-0:0"]
    assert adds(fallback.request_headers_to_add) == [("x-env", "prod", over), ("x-via", "ts", app)]
    (_, cb) = fallback.route.weighted_clusters.clusters
    assert adds(cb.request_headers_to_add) == [("x-canary", "1", over)] and list(cb.request_headers_to_remove) == [
        "x-env"
    ]
    assert adds(cb.response_headers_to_add) == [("x-backend", "b", app)]
    # The backend's mutations (on its weighted cluster) apply after the rule's (on the route).
    assert route_configurations(gen)["trafficsplit_80"].most_specific_header_mutations_wins
    rewritten = by_name["native:ns/f.rule-1:0"]
    assert rewritten.route.host_rewrite_literal == "internal.example.com"
    assert rewritten.route.prefix_rewrite == "/one"
    full = by_name["native:ns/f.rule-2:0"].route.regex_rewrite
    assert (full.pattern.regex, full.substitution) == ("^/.*$", "/x")


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_every_redirect_code_the_spec_allows(code: int) -> None:
    rule = {
        "matches": [{"path": {"value": "/old"}}],
        "filters": [{"type": "RequestRedirect", "requestRedirect": {"statusCode": code}}],
    }
    gen = generation(on_http("m", rules=[rule]))
    (r, _) = vhost(gen, 80, "a.example.com").routes
    assert r.name == "redirect:ns/m.rule-0:0" and extproc_off(r)
    assert (
        rc.RedirectAction.RedirectResponseCode.Name(r.redirect.response_code)
        == {
            301: "MOVED_PERMANENTLY",
            302: "FOUND",
            303: "SEE_OTHER",
            307: "TEMPORARY_REDIRECT",
            308: "PERMANENT_REDIRECT",
        }[code]
    )


@pytest.mark.parametrize(
    ("redirect", "listener", "port", "scheme"),
    [
        # Named, well-known ports too, unless the filter sets the hostname: Envoy otherwise keeps the port of the
        # client's Host, which the spec's port rule replaces (a Gateway listener forwards the Host as it came).
        ({}, "http", 80, ""),  # the listener's port
        ({}, "alt", 8081, ""),
        ({"scheme": "https"}, "alt", 443, "https"),  # the scheme's well-known port
        ({"scheme": "https", "port": 8443}, "http", 8443, "https"),
        ({"port": 80}, "alt", 80, ""),
        ({"hostname": "new.example.com", "port": 9000}, "http", 9000, ""),
        ({"hostname": "new.example.com"}, "http", 0, ""),  # the whole authority replaced: port 80 not named
        ({"hostname": "new.example.com", "scheme": "https"}, "alt", 0, "https"),
    ],
)
def test_a_redirects_port_is_the_specs(redirect: dict[str, Any], listener: str, port: int, scheme: str) -> None:
    rule = {"filters": [{"type": "RequestRedirect", "requestRedirect": redirect}]}
    spec: dict[str, Any] = {"parentRefs": [{"name": "gw", "sectionName": listener}], "rules": [rule]}
    if listener == "http":
        spec["hostnames"] = ["a.example.com"]
    gen = generation(route("m", **spec))
    host = "a.example.com" if listener == "http" else "*"
    (r, _) = vhost(gen, 80 if listener == "http" else 8081, host).routes
    assert (r.redirect.port_redirect, r.redirect.scheme_redirect) == (port, scheme)
    assert r.redirect.host_redirect == redirect.get("hostname", "")


@pytest.mark.parametrize(
    ("prefix", "replacement", "paths"),
    [
        ("/foo", "/xyz", ["/foo", "/foo/", "/foo/bar", "/foo/bar/"]),
        ("/foo/", "/xyz/", ["/foo", "/foo/bar"]),
        ("/foo", "/", ["/foo", "/foo/", "/foo/bar", "/foo//bar"]),
        ("/foo", "", ["/foo", "/foo/bar"]),
        ("/", "/xyz", ["/", "/bar", "/bar/baz"]),
        ("/", "/", ["/", "/bar"]),
        ("/a.b", "/c", ["/a.b", "/a.b/x"]),
    ],
)
def test_a_prefix_rewrite_as_envoy_applies_it_is_the_models(prefix: str, replacement: str, paths: list[str]) -> None:
    match = RouteMatch(path_type=PathType.PREFIX, path=prefix)
    modifier = PathModifier(PathModifierType.PREFIX, replacement)
    value = _prefix_rewrite(modifier, match)
    for path in paths:
        if path.startswith("/foo//"):
            continue  # Envoy merges slashes before routing (the bootstrap's merge_slashes): never seen
        if isinstance(value, str):
            got = value + path[len(prefix.rstrip("/")) :]
        else:
            # Envoy's regex_rewrite replaces the first match (RE2 semantics agree with Python's for these).
            got = re.sub(value.pattern.regex, value.substitution.replace("\\", "\\\\"), path, count=1)
        assert got == rewrite_path(prefix, path, modifier), (prefix, replacement, path)


def test_route_names_name_the_rule_for_the_processor_only_where_it_is_called() -> None:
    assert rule_of("fallback:ns/r.rule-3:0") == RuleKey("ns", "r", 3)
    assert rule_of("fallback-cookie:ns/r.rule-0:12") == RuleKey("ns", "r", 0)
    for name in ("native:ns/r.rule-0:0", "decided:ns/r.rule-0:0:a", "no-route", "fallback", "fallback:ns/r:0", ""):
        assert rule_of(name) is None, name


def test_route_match_prefix_semantics_are_segment_wise() -> None:
    assert route_match(RouteMatch(path_type=PathType.PREFIX, path="/foo/")).path_separated_prefix == "/foo"
    assert route_match(RouteMatch(path_type=PathType.PREFIX, path="/")).prefix == "/"


def test_the_packed_builder_gives_the_plain_configurations() -> None:
    gen = generation(FILTERED)
    packed = snapshot.ResourceBuilder().resources(gen)
    plain = snapshot.resources(gen)
    assert packed.routes is not None and plain.routes is not None and set(packed.routes) == set(plain.routes)
    for name, msg in plain.routes.items():
        got = route_pb2.RouteConfiguration()
        assert packed.routes[name].Unpack(got)
        assert got == msg, name


def test_a_gateway_listener_asks_rds_for_its_ports_routes_and_sends_the_route_name() -> None:
    opts = BootstrapOptions(
        node_id="n",
        listen=Address(port=1),
        extproc=Address(port=2),
        ads=Address(port=3),
        admin=Address(port=4),
        listeners=(GatewayListener(80, Address(port=8080)),),
    )
    (listener,) = bootstrap(opts).static_resources.listeners
    hcm = hcm_pb2.HttpConnectionManager()
    assert listener.filter_chains[0].filters[0].typed_config.Unpack(hcm)
    # The Host is forwarded as the client sent it, port included (Gateway API's HostnameIntersection and
    # ListenerPortMatching check the backend sees it); WebSocket upgrades are Envoy's.
    assert hcm.rds.route_config_name == "trafficsplit_80" and not hcm.strip_any_host_port
    assert [u.upgrade_type for u in hcm.upgrade_configs] == ["websocket"]
    ext = ext_proc_pb2.ExternalProcessor()
    # CORS first: Envoy answers a preflight before the processor would be called.
    (cors, f, _) = hcm.http_filters
    assert cors.name == envoy.CORS_FILTER
    assert f.name == envoy.EXTPROC_FILTER and f.typed_config.Unpack(ext)
    assert list(ext.request_attributes) == ["xds.route_name"] and ext.failure_mode_allow


TIMED = on_http(
    "t",
    rules=[
        {
            "matches": [{"path": {"value": "/one"}}],
            "timeouts": {"request": "1s", "backendRequest": "250ms"},
            "retry": {"attempts": 3, "backoff": "100ms", "codes": [503, 429]},
            "filters": [
                {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "c", "port": 80}}},
                {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "b", "port": 80}, "percent": 25}},
                {
                    "type": "RequestMirror",
                    "requestMirror": {
                        "backendRef": {"name": "b", "port": 80},
                        "fraction": {"numerator": 1, "denominator": 3},
                    },
                },
            ],
            "backendRefs": [ref("a", 1)],
        },
        {
            "matches": [{"path": {"value": "/split"}}],
            "timeouts": {"request": "0s"},
            "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "c", "port": 80}}}],
            "backendRefs": [ref("a", 90), ref("b", 10)],
        },
        {"matches": [{"path": {"value": "/plain"}}], "backendRefs": [ref("a", 1)]},
    ],
)


def test_timeouts_retry_and_mirrors_are_native_on_every_route_of_the_rule() -> None:
    gen = generation(TIMED)
    by_name = {r.name: r for r in vhost(gen, 80, "a.example.com").routes}
    one = by_name["native:ns/t.rule-0:0"].route
    assert one.timeout.ToMilliseconds() == 1000
    assert one.retry_policy.per_try_timeout.ToMilliseconds() == 250
    assert one.retry_policy.num_retries.value == 3
    assert one.retry_policy.retry_on == f"{envoy.RETRY_ON},reset,retriable-status-codes"  # connection errors too
    assert list(one.retry_policy.retriable_status_codes) == [503, 429]
    assert one.retry_policy.retry_back_off.base_interval.ToMilliseconds() == 100
    mirrors = [(p.cluster, p.HasField("runtime_fraction")) for p in one.request_mirror_policies]
    assert mirrors == [("mirror:ns/c:80", False), ("mirror:ns/b:80", True), ("mirror:ns/b:80", True)]
    quarter, third = (p.runtime_fraction.default_value for p in one.request_mirror_policies[1:])
    hundred, million = quarter.HUNDRED, quarter.MILLION
    assert (quarter.numerator, quarter.denominator) == (25, hundred)
    assert (third.numerator, third.denominator) == (333_333, million)
    # A split: the decided routes and the fallback alike (a request ends on one of them, mirrored once).
    split = [r for n, r in by_name.items() if ":ns/t.rule-1:" in n]
    assert [r.name.split(":")[0] for r in split] == ["decided", "decided", "fallback"]
    for r in split:
        assert r.route.HasField("timeout") and r.route.timeout.ToMilliseconds() == 0  # 0s: no timeout, in Envoy too
        assert [p.cluster for p in r.route.request_mirror_policies] == ["mirror:ns/c:80"]
        assert r.route.retry_policy.retry_on == envoy.RETRY_ON  # no retry: only the connect-failure one
    plain = by_name["native:ns/t.rule-2:0"].route
    assert not plain.HasField("timeout") and not plain.request_mirror_policies
    assert plain.retry_policy == envoy.retry_policy()


def test_a_mirrors_cluster_is_in_the_generations_resources_once_as_an_eds_cluster() -> None:
    gen = generation(TIMED)
    plain = snapshot.resources(gen)
    assert {"mirror:ns/b:80", "mirror:ns/c:80"} <= set(plain.clusters)
    assert plain.clusters["mirror:ns/c:80"].type == plain.clusters["ns/t.rule-0/a"].type  # EDS, as a backend's
    packed = snapshot.ResourceBuilder().resources(gen)
    for name in ("mirror:ns/b:80", "mirror:ns/c:80"):
        assert packed.clusters[name] == _packed(plain.clusters[name])
        assert packed.endpoints[name] == _packed(plain.endpoints[name])


def _packed(m: Any) -> Any:
    a = any_pb2.Any()
    a.Pack(m, deterministic=True)
    return a


def test_the_publish_proto_carries_timeouts_retry_and_mirrors_and_refuses_what_the_values_refuse() -> None:
    gen = generation(TIMED)
    assert gen.routes is not None
    mirror = gen.routes.actions[0].mirrors[0]
    with_endpoints = replace(
        gen.routes.actions[0],
        mirrors=(replace(mirror, endpoints=(Endpoint("10.0.0.1", 8080), Endpoint("10.0.0.2", 8080, False))),),
    )
    gen = replace(gen, routes=replace(gen.routes, actions=(with_endpoints, *gen.routes.actions[1:])))
    back = generation_from_proto(generation_to_proto(gen))
    assert back == gen and back.routes is not None
    assert back.routes.actions[0].timeouts == RuleTimeouts(request=1000, backend_request=250)
    assert back.routes.actions[1].timeouts == RuleTimeouts(request=0)  # 0 kept apart from unset
    assert back.routes.actions[2].timeouts is None and back.routes.actions[2].retry is None
    msg = generation_to_proto(gen)
    msg.routes.actions[0].timeouts.backend_request_ms = 5000  # longer than the request timeout
    msg.routes.actions[0].retry.codes.append(200)
    msg.routes.actions[0].mirrors[0].numerator = 7  # more than its denominator (1)
    with pytest.raises(SpecError) as exc:
        generation_from_proto(msg)
    text = "; ".join(exc.value.problems)
    assert "actions[0].timeouts.backendRequest" in text and "actions[0].retry.codes[2]: 200" in text
    assert "actions[0].mirrors[0].numerator: 7" in text


def _flipped(weight: int, first: dict[str, int] | None, number: int) -> Generation:
    routes = [
        route(
            f"r{i}",
            parentRefs=[{"name": "gw", "sectionName": "alt"}],
            hostnames=[f"h{i}.example.com"],
            rules=[{"backendRefs": [ref("a", weight if i == 0 else 90), ref("b", 100 - (weight if i == 0 else 90))]}],
        )
        for i in range(3)
    ]
    return generation_from_proto(generation_to_proto(generation(*routes, number=number), first=first))


def test_a_publish_that_changes_one_rule_builds_that_rules_virtual_host_alone(monkeypatch: Any) -> None:
    """bench_flip at 1,000 HTTPRoutes: a weight flip was served 4.7x later than a TrafficSplit's flip, and the
    publisher's builder made every virtual host of the Gateway's table three times per publish (held and new in the
    transition, new again in serving), each disclosing the generation's own number, so none could be kept. A rule's
    routes now disclose the first generation carrying the rule as it is (as a TrafficSplit's fallback routes do) and
    the builder keeps a virtual host by what it is built from: a flip of one rule builds that rule's host, once."""
    held = _flipped(90, None, 3)
    keys = [a.key for a in held.routes.actions] if held.routes is not None else []
    new = _flipped(10, {k: 3 for k in keys if k != "ns/r0.rule-0"}, 4)
    b = snapshot.ResourceBuilder()
    b.serving(held)
    built: list[str] = []
    real = gateway_routes.entry_routes

    def counting(entry: Any, *args: Any, **kwargs: Any) -> Any:
        built.append(entry.route)
        return real(entry, *args, **kwargs)

    monkeypatch.setattr(gateway_routes, "entry_routes", counting)
    b.transition(held, new)
    res = b.serving(new, [held])
    assert built == ["ns/r0"]
    assert unpacked_routes(res) == snapshot.resources(new).routes
    # Each rule's native fallback discloses the first generation that carried it: 3 for the two kept, 4 for r0's.
    config = snapshot.resources(new).routes
    assert config is not None
    disclosed = {
        vh.name: {
            int(r.metadata.filter_metadata["trafficsplit"]["generation"])
            for r in vh.routes
            if r.metadata.filter_metadata
        }
        for vh in config["trafficsplit_8081"].virtual_hosts
        if vh.name != "*"
    }
    assert disclosed == {"h0.example.com": {4}, "h1.example.com": {3}, "h2.example.com": {3}}


def unpacked_routes(res: snapshot.Packed) -> dict[str, route_pb2.RouteConfiguration]:
    assert res.routes is not None
    out = {}
    for name, a in res.routes.items():
        msg = route_pb2.RouteConfiguration()
        assert a.Unpack(msg)
        out[name] = msg
    return out


def test_a_publish_read_beside_the_held_generation_keeps_its_unchanged_rules_and_hosts() -> None:
    """The replica's receiver built every rule and virtual host of a Gateway's publish afresh (about 50 ms at 1,000
    routes per replica, per flip); a rule or host whose bytes are the held one's is now the held object (as splits
    were), and the result equals a fresh read."""
    keys = ["ns/r0.rule-0", "ns/r1.rule-0", "ns/r2.rule-0"]
    held_msg = generation_to_proto(_flipped(90, None, 3), first=dict.fromkeys(keys, 3))
    held = generation_from_proto(held_msg)
    new_msg = generation_to_proto(_flipped(10, None, 4), first={k: 3 for k in keys if k != "ns/r0.rule-0"})
    got = generation_from_proto(new_msg, held_parts(held_msg, held))
    assert got == generation_from_proto(new_msg)
    assert got.routes is not None and held.routes is not None
    same = [a.key for a, b in zip(got.routes.actions, held.routes.actions, strict=True) if a is b]
    assert same == ["ns/r1.rule-0", "ns/r2.rule-0"]
    kept = [
        vh.hostname
        for lr, hlr in zip(got.routes.listeners, held.routes.listeners, strict=True)
        for vh, hvh in zip(lr.hosts, hlr.hosts, strict=True)
        if vh is hvh
    ]
    assert kept == ["h0.example.com", "h1.example.com", "h2.example.com"]  # a weight is not in the host's entries


def test_a_rule_whose_split_alone_changed_is_read_with_the_new_split() -> None:
    """The same action bytes (its targets, filters, policies) with another split (a backend's endpoints moved): the
    held action would name the old split, so it is built again."""
    held_msg = generation_to_proto(_flipped(90, None, 3))
    held = generation_from_proto(held_msg)
    new_msg = pb.Generation()
    new_msg.CopyFrom(held_msg)
    new_msg.number = 4
    new_msg.splits[0].backends[0].endpoints.add(address="10.9.0.1", port=8080, ready=True)
    got = generation_from_proto(new_msg, held_parts(held_msg, held))
    assert got == generation_from_proto(new_msg)
    assert got.routes is not None and held.routes is not None
    assert got.routes.actions[0] is not held.routes.actions[0] and got.routes.actions[0].split is got.splits[0]
    assert got.routes.actions[1] is held.routes.actions[1]
