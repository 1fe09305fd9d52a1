"""HTTPRoute timeouts, retry and RequestMirror: the values that check themselves (core/model/timeouts.py,
core/model/filters.py RequestMirror), the parser's CRD rules, and the translation carrying them on the rule's action
(a mirror whose backendRef does not resolve: ResolvedRefs False, not mirrored to, the rule still served)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.test_gateway_translate import CLASS, conditions, gateway, route, run, service
from trafficsplit.core.control.resolve import SliceEndpoint, SliceInfo
from trafficsplit.core.gatewayapi.httproute import parse_httproute
from trafficsplit.core.gatewayapi.objects import parse_gateway, parse_reference_grant
from trafficsplit.core.gatewayapi.translate import Inputs, TranslationMemo, gateway_content, translate
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.filters import MAX_MIRROR_DENOMINATOR, RequestMirror, RequestRedirect, RuleFilters
from trafficsplit.core.model.routes import RuleAction
from trafficsplit.core.model.rules import Endpoint
from trafficsplit.core.model.timeouts import (
    MAX_DURATION_MS,
    MAX_RETRY_ATTEMPTS,
    RuleRetry,
    RuleTimeouts,
    format_duration,
    parse_duration_ms,
)


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1h", 3_600_000),
        ("1h30m", 5_400_000),
        ("10s", 10_000),
        ("1500ms", 1500),
        ("0s", 0),
        ("0ms", 0),
        ("1h1m1s1ms", 3_661_001),
        ("1s1s", 2000),  # the pattern allows a unit twice; Go's time.ParseDuration adds them
        ("99999h99999h99999h99999h", MAX_DURATION_MS),
    ],
)
def test_gateway_api_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize(
    "text",
    ["", "1", "1d", "h", "ms", "123456s", "1h1m1s1ms1h", "-1s", "+1s", "1.5s", "1 s", " 1s", "1s ", "١s", "1S", "1us"],
)
def test_what_is_no_gateway_api_duration(text: str) -> None:
    assert parse_duration_ms(text) is None


@pytest.mark.parametrize("ms", [0, 1, 999, 1000, 1500, 60_000, 5_400_000, 3_661_001, 99_999 * 3_600_000])
def test_a_formatted_duration_parses_back(ms: int) -> None:
    text = format_duration(ms)
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda: RuleTimeouts(request=1000, backend_request=1001), "longer than the request timeout 1s"),
        (lambda: RuleTimeouts(request=-1), "request: -1 ms is not in"),
        (lambda: RuleTimeouts(backend_request=MAX_DURATION_MS + 1), "backendRequest:"),
        (lambda: RuleRetry(attempts=0), "attempts: 0 is not in 1.."),
        (lambda: RuleRetry(attempts=MAX_RETRY_ATTEMPTS + 1), "attempts:"),
        (lambda: RuleRetry(codes=(399,)), "codes[0]: 399"),
        (lambda: RuleRetry(codes=(503, 600)), "codes[1]: 600"),
        (lambda: RuleRetry(codes=(503, 503)), "each status code once"),
        (lambda: RuleRetry(backoff=-5), "backoff:"),
        (lambda: RequestMirror(namespace="ns", service="a", port=80, numerator=2, denominator=1), "numerator: 2"),
        (lambda: RequestMirror(namespace="ns", service="a", port=80, denominator=0), "denominator: 0"),
        (
            lambda: RequestMirror(namespace="ns", service="a", port=80, denominator=MAX_MIRROR_DENOMINATOR + 1),
            "denominator:",
        ),
        (lambda: RequestMirror(namespace="ns", service="A_b", port=80), "service: 'A_b' must be a DNS label"),
        (lambda: RequestMirror(namespace="ns", service="a", port=0), "port: 0"),
    ],
)
def test_the_values_refuse_what_the_spec_does_not_allow(make: Any, fragment: str) -> None:
    with pytest.raises(SpecError) as exc:
        make()
    assert any(fragment in p for p in exc.value.problems), exc.value.problems


def test_zero_is_no_timeout_on_either_side() -> None:
    # The CRD's rule: a request timeout of 0 bounds nothing, and a backendRequest of 0 has no bound of its own.
    assert RuleTimeouts(request=0, backend_request=10_000).backend_request == 10_000
    assert RuleTimeouts(request=10_000, backend_request=0).request == 10_000
    assert RuleTimeouts(request=10_000, backend_request=10_000).to_dict() == {"request": "10s", "backendRequest": "10s"}


def test_a_rule_that_redirects_mirrors_nothing() -> None:
    mirror = RequestMirror(namespace="ns", service="a", port=80)
    with pytest.raises(SpecError, match="no request to mirror"):
        RuleAction(
            route="ns/r",
            rule=0,
            split=None,
            targets=(),
            error_weight=0,
            filters=RuleFilters(redirect=RequestRedirect(hostname="b.example.com")),
            mirrors=(mirror,),
        )


NO_DURATION = " is not a duration such as 1h30m (GEP-2257)"


def _rule(**fields: Any) -> dict[str, Any]:
    fields.setdefault("backendRefs", [{"name": "a", "port": 80}])
    return route(rules=[fields])


def _mirror(**body: Any) -> dict[str, Any]:
    return {"type": "RequestMirror", "requestMirror": body}


@pytest.mark.parametrize(
    ("rule", "fragment"),
    [
        ({"timeouts": {"request": "10"}}, "spec.rules[0].timeouts.request: '10'" + NO_DURATION),
        ({"timeouts": {"request": "1.5s"}}, "spec.rules[0].timeouts.request: '1.5s'" + NO_DURATION),
        (
            {"timeouts": {"request": "1s", "backendRequest": "2s"}},
            "spec.rules[0].timeouts.backendRequest: 2s is longer than the request timeout 1s",
        ),
        ({"retry": {"attempts": 0}}, f"spec.rules[0].retry.attempts: must be 1..{2**63 - 1}, got 0"),
        ({"retry": {"codes": [399]}}, "spec.rules[0].retry.codes[0]: must be an HTTP status code in 400..599"),
        ({"retry": {"codes": [600]}}, "spec.rules[0].retry.codes[0]: must be an HTTP status code in 400..599"),
        ({"retry": {"codes": [503, 503]}}, "spec.rules[0].retry.codes[1]: 503 is listed twice"),
        ({"retry": {"backoff": "soon"}}, "spec.rules[0].retry.backoff: 'soon'" + NO_DURATION),
        (
            {"filters": [_mirror(backendRef={"name": "a", "port": 80}, percent=10, fraction={"numerator": 1})]},
            "spec.rules[0].filters[0].requestMirror: only one of percent or fraction may be specified",
        ),
        (
            {"filters": [_mirror(backendRef={"name": "a", "port": 80}, percent=101)]},
            "spec.rules[0].filters[0].requestMirror.percent: must be 0..100, got 101",
        ),
        (
            {"filters": [_mirror(backendRef={"name": "a", "port": 80}, fraction={"numerator": 3, "denominator": 2})]},
            "spec.rules[0].filters[0].requestMirror.fraction: numerator 3 must be less than or equal to denominator 2",
        ),
        (
            {"filters": [_mirror(backendRef={"name": "a", "port": 80}, fraction={"denominator": 2})]},
            "spec.rules[0].filters[0].requestMirror.fraction.numerator: required",
        ),
        (
            {"filters": [_mirror(backendRef={"name": "a"})]},
            "spec.rules[0].filters[0].requestMirror.backendRef.port: required for a Service",
        ),
        ({"filters": [_mirror()]}, "spec.rules[0].filters[0].requestMirror.backendRef: required (an object)"),
    ],
)
def test_what_the_crd_refuses_refuses_the_route(rule: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_httproute(_rule(**rule))
    assert fragment in exc.value.problems, exc.value.problems


def test_more_attempts_than_the_bound_drop_the_rule_with_why() -> None:
    (rule,) = parse_httproute(_rule(retry={"attempts": MAX_RETRY_ATTEMPTS + 1})).rules
    assert rule.retry is None
    assert rule.problems == (f"retry.attempts: 17 retries, this gateway retries at most {MAX_RETRY_ATTEMPTS}",)
    (ok,) = parse_httproute(_rule(retry={"attempts": MAX_RETRY_ATTEMPTS})).rules
    assert ok.problems == () and ok.retry == RuleRetry(attempts=MAX_RETRY_ATTEMPTS)


def test_a_translated_rule_carries_its_timeouts_retry_and_mirrors() -> None:
    t = run(
        _rule(
            timeouts={"request": "1s", "backendRequest": "250ms"},
            retry={"attempts": 2, "backoff": "50ms", "codes": [503, 500]},
            filters=[
                _mirror(backendRef={"name": "b", "port": 80}),
                _mirror(backendRef={"name": "b", "port": 80}, percent=5),
                _mirror(backendRef={"name": "b", "port": 80}, fraction={"numerator": 7, "denominator": 1000}),
            ],
        )
    )
    (action,) = t.actions
    assert action.timeouts == RuleTimeouts(request=1000, backend_request=250)
    assert action.retry == RuleRetry(attempts=2, backoff=50, codes=(503, 500))
    assert [(m.service, m.port, m.numerator, m.denominator) for m in action.mirrors] == [
        ("b", 80, 1, 1),
        ("b", 80, 5, 100),
        ("b", 80, 7, 1000),
    ]
    assert conditions(t) == {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}
    content = gateway_content(t, "ns/gw")
    assert content.routes is not None and content.routes.actions == (action,)


@pytest.mark.parametrize(
    ("ref", "reason", "fragment"),
    [
        ({"name": "gone", "port": 80}, "BackendNotFound", "Service ns/gone not found"),
        ({"name": "b", "port": 81}, "BackendNotFound", "Service ns/b has no port 81 (ports: 80)"),
        ({"name": "b", "namespace": "other", "port": 80}, "RefNotPermitted", "no ReferenceGrant there permits it"),
        (
            {"group": "example.com", "kind": "Bucket", "name": "b"},
            "InvalidKind",
            "example.com/Bucket is not a supported",
        ),
    ],
)
def test_a_mirror_that_does_not_resolve_is_reported_and_not_mirrored_to(
    ref: dict[str, Any], reason: str, fragment: str
) -> None:
    t = run(_rule(filters=[_mirror(backendRef=ref), _mirror(backendRef={"name": "b", "port": 80})]))
    (action,) = t.actions
    assert [m.service for m in action.mirrors] == ["b"]  # only the one that resolves
    assert action.split is not None and action.error_weight == 0  # the rule is served, its backend untouched
    assert conditions(t) == {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("False", reason)}
    (status,) = t.routes
    (resolved,) = [c for c in status.parents[0].conditions if c.type == "ResolvedRefs"]
    assert (
        resolved.message.startswith("rules[0].filters[0].requestMirror.backendRef: ") and fragment in resolved.message
    )


def _inputs(grant: bool, ready: bool) -> Inputs:
    body = _rule(filters=[_mirror(backendRef={"name": "audit", "namespace": "other", "port": 80})])
    grants = (
        parse_reference_grant(
            {
                "metadata": {"name": "g", "namespace": "other"},
                "spec": {
                    "from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "ns"}],
                    "to": [{"group": "", "kind": "Service"}],
                },
            }
        ),
    )
    return Inputs(
        classes=(CLASS,),
        gateways=(parse_gateway(gateway()),),
        routes=(parse_httproute(body),),
        grants=grants if grant else (),
        services={("ns", "a"): service("a"), ("other", "audit"): service("audit", "other")},
        slices={
            ("other", "audit"): (
                SliceInfo(
                    namespace="other",
                    name="audit-1",
                    service="audit",
                    ports=(("http", 8080),),
                    endpoints=(SliceEndpoint("10.9.0.1", ready, "audit-0"),),
                ),
            )
        },
    )


def test_a_granted_mirror_carries_its_endpoints_and_a_change_of_them_rebuilds_the_rule() -> None:
    memo = TranslationMemo()
    (ready,) = translate(_inputs(grant=True, ready=True), memo).actions
    assert ready.mirrors == (
        RequestMirror(namespace="other", service="audit", port=80, endpoints=(Endpoint("10.9.0.1", 8080, True),)),
    )
    (not_ready,) = translate(_inputs(grant=True, ready=False), memo).actions
    assert [e.ready for e in not_ready.mirrors[0].endpoints] == [False]  # the memo did not hand back the old action
    (refused,) = translate(_inputs(grant=False, ready=True), memo).actions
    assert refused.mirrors == ()
