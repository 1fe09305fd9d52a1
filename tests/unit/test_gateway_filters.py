"""HTTPRoute filters: what each does to a request (the path rewrite by the spec's table, the redirect's Location,
header changes), the values refusing what must never reach Envoy, and the parser applying the CRD's rules across a
rule's fields."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.test_gateway_translate import route, run
from trafficsplit.core.gatewayapi.httproute import parse_httproute
from trafficsplit.core.gatewayapi.translate import gateway_content
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.filters import (
    HeaderModifier,
    PathModifier,
    PathModifierType,
    RedirectCode,
    RequestRedirect,
    RuleFilters,
    Scheme,
    URLRewrite,
    redirect_location,
    rewrite_path,
)
from trafficsplit.core.model.routes import GatewayRoutes, ListenerRoutes, RouteEntry, RuleAction, VirtualHost

PREFIX = PathModifierType.PREFIX
FULL = PathModifierType.FULL


@pytest.mark.parametrize(
    ("matched", "path", "replacement", "modified"),
    [  # the spec's table (HTTPPathModifier, ReplacePrefixMatch), row by row
        ("/foo", "/foo/bar", "/xyz", "/xyz/bar"),
        ("/foo", "/foo/bar", "/xyz/", "/xyz/bar"),
        ("/foo/", "/foo/bar", "/xyz", "/xyz/bar"),
        ("/foo/", "/foo/bar", "/xyz/", "/xyz/bar"),
        ("/foo", "/foo", "/xyz", "/xyz"),
        ("/foo/", "/foo", "/xyz", "/xyz"),
        ("/foo", "/foo/", "/xyz", "/xyz/"),
        ("/foo/", "/foo/", "/xyz", "/xyz/"),
        ("/foo", "/foo/", "/xyz/", "/xyz/"),
        ("/foo/", "/foo/", "/xyz/", "/xyz/"),
        ("/foo", "/foo", "", "/"),
        ("/foo/", "/foo", "", "/"),
        ("/foo", "/foo/", "", "/"),
        ("/foo/", "/foo/", "", "/"),
        ("/foo", "/foo", "/", "/"),
        ("/foo/", "/foo", "/", "/"),
        ("/foo", "/foo/", "/", "/"),
        ("/foo/", "/foo/", "/", "/"),
        # and the conformance suite's
        ("/prefix/one", "/prefix/one/two", "/one", "/one/two"),
        ("/strip-prefix", "/strip-prefix/three", "/", "/three"),
        ("/strip-prefix", "/strip-prefix", "/", "/"),
        ("/", "/a/b", "/api", "/api/a/b"),
    ],
)
def test_replace_prefix_match_follows_the_spec_table(matched: str, path: str, replacement: str, modified: str) -> None:
    assert rewrite_path(matched, path, PathModifier(PREFIX, replacement)) == modified


def test_replace_full_path_and_a_path_outside_the_prefix() -> None:
    assert rewrite_path("/full", "/full/one/two", PathModifier(FULL, "/one")) == "/one"
    with pytest.raises(ValueError, match="does not match the prefix"):
        rewrite_path("/foo", "/foobar", PathModifier(PREFIX, "/x"))  # whole segments only


@pytest.mark.parametrize(
    ("redirect", "request_", "location"),
    [
        (RequestRedirect(scheme=Scheme.HTTPS), {}, "https://a.example.com/p/q"),  # https: 443, left out
        (RequestRedirect(hostname="b.example.com"), {}, "http://b.example.com/p/q"),  # the listener's 80, left out
        (RequestRedirect(hostname="b.example.com"), {"listener_port": 8080}, "http://b.example.com:8080/p/q"),
        (RequestRedirect(port=8443), {}, "http://a.example.com:8443/p/q"),
        (RequestRedirect(scheme=Scheme.HTTPS, port=443), {"listener_port": 8080}, "https://a.example.com/p/q"),
        (RequestRedirect(scheme=Scheme.HTTP), {"listener_port": 8080}, "http://a.example.com/p/q"),  # scheme's port
        (RequestRedirect(path=PathModifier(FULL, "/x")), {"query": "a=1"}, "http://a.example.com/x?a=1"),
        (RequestRedirect(path=PathModifier(PREFIX, "/new")), {"match_prefix": "/p"}, "http://a.example.com/new/q"),
    ],
)
def test_the_redirect_location(redirect: RequestRedirect, request_: dict[str, Any], location: str) -> None:
    args: dict[str, Any] = {"scheme": "http", "host": "a.example.com", "listener_port": 80, "path": "/p/q"}
    assert redirect_location(redirect, **(args | request_)) == location


def test_a_location_the_client_would_split_is_none() -> None:
    r = RequestRedirect(scheme=Scheme.HTTPS)
    assert redirect_location(r, scheme="http", host="a", listener_port=80, path="/x\r\nSet-Cookie: a=1") is None
    assert redirect_location(r, scheme="http", host="a", listener_port=80, path="/", query="a b") is None


def test_header_modifier_apply() -> None:
    m = HeaderModifier(set=(("X-Env", "prod"),), add=(("X-Via", "gw"),), remove=("x-debug",))
    before = [("x-env", "dev"), ("X-Debug", "1"), ("x-via", "client"), ("accept", "*/*")]
    assert m.apply(before) == [("x-via", "client"), ("accept", "*/*"), ("X-Env", "prod"), ("X-Via", "gw")]


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda: HeaderModifier(set=(("a b", "1"),)), "set[0].name: 'a b' must be an HTTP header name"),
        (lambda: HeaderModifier(add=(("x", "1\r\nx: y"),)), "add[0].value: only printable ASCII"),
        (lambda: HeaderModifier(add=(("x", " padded"),)), "add[0].value: only printable ASCII"),
        (lambda: HeaderModifier(set=(("x", ""),)), "set[0].value: 0 characters"),
        (lambda: HeaderModifier(set=(("x", "v" * 4097),)), "set[0].value: 4097 characters"),
        (lambda: HeaderModifier(remove=("X-Trafficsplit-Cluster",)), "x-trafficsplit-* headers are the gateway's"),
        (lambda: HeaderModifier(set=(("host", "x"),)), "set[0].name: the host header is not modified"),
        (lambda: HeaderModifier(set=(("X-A", "1"), ("x-a", "2"))), "set[1].name: 'x-a' is listed twice"),
        (lambda: HeaderModifier(remove=tuple(f"h{i}" for i in range(17))), "remove: 17 headers, at most 16"),
        (lambda: PathModifier(FULL, ""), "value: '' must be an absolute path"),
        (lambda: PathModifier(FULL, "/a?b"), "must be an absolute path of printable ASCII"),
        (lambda: PathModifier(PREFIX, "/" * 1025), "value: 1025 characters"),
        (lambda: URLRewrite(hostname="*.example.com"), "hostname: '*.example.com' must be a DNS name"),
        (lambda: RequestRedirect(hostname="a.example.com:80"), "hostname: 'a.example.com:80' must be a DNS name"),
        (lambda: RequestRedirect(port=0), "port: 0 is not in 1..65535"),
        (lambda: RuleFilters(redirect=RequestRedirect(), rewrite=URLRewrite()), "a RequestRedirect or a URLRewrite"),
        (lambda: RuleFilters(response_headers=HeaderModifier()), "response_headers: a request header modifier"),
    ],
)
def test_filter_values_refuse_what_must_not_reach_envoy(make: Any, fragment: str) -> None:
    with pytest.raises(SpecError) as exc:
        make()
    assert any(fragment in q for q in exc.value.problems), exc.value.problems


def test_a_response_modifier_may_set_a_host_header_a_request_one_may_not() -> None:
    assert HeaderModifier(set=(("host", "x"),), request=False).set == (("host", "x"),)


def _rule(**fields: Any) -> dict[str, Any]:
    return route(rules=[fields])


@pytest.mark.parametrize(
    ("rule", "fragment"),
    [
        (
            {
                "filters": [
                    {"type": "RequestRedirect", "requestRedirect": {"hostname": "a.example.com"}},
                    {"type": "URLRewrite", "urlRewrite": {"hostname": "b.example.com"}},
                ]
            },
            "spec.rules[0].filters: may specify either a RequestRedirect or a URLRewrite filter, but not both",
        ),
        (
            {
                "filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}],
                "backendRefs": [{"name": "a", "port": 80}],
            },
            "spec.rules[0].filters: a RequestRedirect filter must not be used together with backendRefs",
        ),
        (
            {
                "matches": [{"path": {"type": "Exact", "value": "/a"}}],
                "filters": [
                    {
                        "type": "URLRewrite",
                        "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/b"}},
                    }
                ],
            },
            "spec.rules[0].matches: a path modifier of type ReplacePrefixMatch needs exactly one PathPrefix match",
        ),
        (
            {"filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"remove": ["a"]}}] * 2},
            "spec.rules[0].filters[1]: RequestHeaderModifier filter cannot be repeated",
        ),
        (
            {"filters": [{"type": "RequestRedirect", "requestRedirect": {}, "urlRewrite": {}}]},
            "spec.rules[0].filters[0].urlRewrite: must be nil if the filter type is not URLRewrite",
        ),
        (
            {"filters": [{"type": "URLRewrite"}]},
            "spec.rules[0].filters[0].urlRewrite: must be specified for filter type URLRewrite",
        ),
        (
            {"filters": [{"type": "URLRewrite", "urlRewrite": {}, "requestRedirect": {}}]},
            "spec.rules[0].filters[0].requestRedirect: must be nil if the filter type is not RequestRedirect",
        ),
        (
            {"filters": [{"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplaceFullPath"}}}]},
            "spec.rules[0].filters[0].urlRewrite.path.replaceFullPath: must be specified when type is ReplaceFullPath",
        ),
        (
            {"filters": [{"type": "RequestRedirect", "requestRedirect": {"statusCode": 304}}]},
            "spec.rules[0].filters[0].requestRedirect.statusCode: must be one of 301, 302, 303, 307, 308",
        ),
    ],
)
def test_the_crds_rules_across_a_rules_filters_refuse_the_route(rule: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_httproute(_rule(**rule))
    assert fragment in exc.value.problems, exc.value.problems


def test_a_translated_rule_carries_its_filters_and_a_redirect_has_no_backend() -> None:
    redirect = {"requestRedirect": {"scheme": "https", "statusCode": 308}, "type": "RequestRedirect"}
    headers = {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "X-A", "value": "1"}]}}
    t = run(
        route(
            rules=[
                {"matches": [{"path": {"value": "/r"}}], "filters": [redirect]},
                {
                    "filters": [headers],
                    "backendRefs": [{"name": "a", "port": 80, "filters": [headers]}, {"name": "b", "port": 80}],
                },
            ]
        )
    )
    r0, r1 = t.actions
    assert r0.split is None and r0.filters.redirect == RequestRedirect(
        scheme=Scheme.HTTPS, status_code=RedirectCode.PERMANENT_REDIRECT
    )
    assert r1.split is not None and r1.filters.request_headers == HeaderModifier(set=(("X-A", "1"),))
    assert [t.filters.request_headers is not None for t in r1.targets] == [True, False]
    content = gateway_content(t, "ns/gw")
    assert content.routes is not None and content.routes.actions == (r0, r1)


def test_a_rule_that_redirects_has_no_backend_and_a_prefix_replacement_needs_a_prefix_match() -> None:
    t = run(route(rules=[{"backendRefs": [{"name": "a", "port": 80}]}]))
    (a,) = t.actions
    with pytest.raises(SpecError, match="a rule that redirects has no backend"):
        RuleAction(
            route=a.route,
            rule=a.rule,
            split=a.split,
            targets=a.targets,
            error_weight=0,
            filters=RuleFilters(redirect=RequestRedirect()),
        )
    rewrite = RuleFilters(rewrite=URLRewrite(path=PathModifier(PREFIX, "/x")))
    action = RuleAction(route=a.route, rule=a.rule, split=a.split, targets=a.targets, error_weight=0, filters=rewrite)
    from trafficsplit.core.model.matches import PathType, RouteMatch

    for path_type, ok in ((PathType.PREFIX, True), (PathType.EXACT, False)):
        entry = RouteEntry("ns/r", 0, 0, RouteMatch(path_type=path_type, path="/a"))
        listener = ListenerRoutes("ns/gw", "http", 80, (VirtualHost("a.example.com", (entry,)),))
        if ok:
            GatewayRoutes(gateway="ns/gw", listeners=(listener,), actions=(action,))
        else:
            with pytest.raises(SpecError, match="replaces a prefix match, this is no PathPrefix"):
                GatewayRoutes(gateway="ns/gw", listeners=(listener,), actions=(action,))
