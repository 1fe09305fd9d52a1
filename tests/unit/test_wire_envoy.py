"""Envoy resources and bootstrap from a generation, against golden files, plus the rules the goldens encode.

The goldens are tests/testdata/wire/ (tests/unit/wire_golden.py renders them); regenerate every golden after an
intended change with `python -m tests.gen_golden` and review the diff.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any, TypeVar

import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.route.v3 import route_pb2
from google.protobuf import any_pb2
from google.protobuf.message import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.wire_golden import CASES, render, sample_generation
from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.compiled import Endpoint
from trafficsplit.core.model.cookie import read_cookie
from trafficsplit.core.model.generation import Generation
from trafficsplit.wire import envoy, snapshot
from trafficsplit.wire.bootstrap import (
    EXTPROC_HTTP_PATH,
    EXTPROC_HTTP_URI,
    Address,
    BootstrapOptions,
    ExtProcTransport,
    bootstrap_json,
)
from trafficsplit.wire.reserved import ADS_CLUSTER, EXTPROC_CLUSTER

M = TypeVar("M", bound=Message)


def check_golden(name: str) -> None:
    path = CASES / name
    assert path.exists(), f"missing golden {path}: run python -m tests.gen_golden"
    assert render()[name] == path.read_text(encoding="utf-8"), (
        f"{name} differs from its golden file: if the change is intended, run python -m tests.gen_golden and review "
        "the diff"
    )


def test_resources_match_golden() -> None:
    check_golden("wire_envoy_resources.json")


def test_bootstrap_matches_golden() -> None:
    check_golden("wire_bootstrap.json")


def test_one_cluster_per_backend_with_ready_endpoints_only() -> None:
    gen = sample_generation()
    res = snapshot.resources(gen)
    assert set(res.clusters) == set(gen.clusters()) == set(res.endpoints)
    stable = res.endpoints["prod/shop/stable"]
    assert [e.endpoint.address.socket_address.address for e in stable.endpoints[0].lb_endpoints] == ["10.0.0.1"]
    assert not res.endpoints["prod/shop/canary"].endpoints[0].lb_endpoints
    # Endpoint affinity: override_host on the processor's metadata, Envoy's ring on the cookie only as its fallback.
    policy = res.clusters["prod/shop/stable"].load_balancing_policy.policies[0].typed_extension_config
    assert policy.name == envoy.OVERRIDE_HOST_POLICY
    assert res.clusters["prod/api/blue"].lb_policy == res.clusters["prod/api/blue"].ROUND_ROBIN


def test_fallback_uses_eligible_backends_and_skips_zero_weights() -> None:
    gen = sample_generation()
    shop, api = gen.split_for("shop.example"), gen.split_for("api.example")
    assert shop is not None and api is not None
    assert [(b.name, w) for b, w in envoy.fallback_weights(shop)] == [("stable", 90)]
    assert [(b.name, w) for b, w in envoy.fallback_weights(api)] == [("blue", 1)]


def test_routes_strip_client_routing_headers_and_404_unknown_hosts() -> None:
    rc = envoy.route_configuration(sample_generation())
    assert list(rc.internal_only_headers) == [envoy.ROUTING_HEADER]
    assert list(rc.request_headers_to_remove) == [envoy.ROUTING_HEADER]  # never forwarded to a backend
    default = rc.virtual_hosts[-1]
    assert list(default.domains) == ["*"] and default.routes[0].direct_response.status == 404
    vhost = rc.virtual_hosts[0]
    assert [r.name for r in vhost.routes] == ["decided", "fallback-cookie", "fallback"]  # the processor's pick first
    # Processor down: a request with the affinity cookie is hashed on it, for the backend and for the pod.
    sticky = vhost.routes[1]
    assert sticky.route.weighted_clusters.use_hash_policy.value and sticky.route.hash_policy[0].cookie.name == "ts"
    assert sticky.stat_prefix == vhost.routes[2].stat_prefix == "fallback"
    assert vhost.routes[0].route.cluster_header == envoy.ROUTING_HEADER
    assert vhost.routes[0].route.hash_policy[0].cookie.name == "ts"


def test_no_generation_gives_only_the_404_host() -> None:
    res = snapshot.resources(None)
    assert not res.clusters and not res.endpoints
    assert res.routes is not None
    assert [v.name for v in res.routes[envoy.ROUTE_CONFIG_NAME].virtual_hosts] == ["no-split"]


def test_transition_keeps_old_clusters_and_old_routes() -> None:
    old = sample_generation(7)
    new_split = compile_split(
        parse_split("prod", "api", {"hosts": ["api.example"], "backends": [{"name": "violet", "weight": 1}]}),
        {"violet": [Endpoint("10.2.0.1", 80)]},
    )
    new = Generation(8, (new_split,))
    t = snapshot.transition(old, new)
    assert set(t.clusters) == set(old.clusters()) | {"prod/api/violet"}
    assert t.routes == snapshot.resources(old).routes
    assert snapshot.transition(None, new).routes is None  # nothing held: routes wait for the swap


def _unpacked(res: snapshot.Packed) -> snapshot.Messages:
    """The builder's packed resources as messages, to compare with the golden-checked functions' output."""

    def unpack(items: dict[str, any_pb2.Any], cls: type[M]) -> dict[str, M]:
        out = {}
        for name, a in items.items():
            m = cls()
            assert a.Unpack(m), name
            out[name] = m
        return out

    routes = unpack(res.routes, route_pb2.RouteConfiguration) if res.routes is not None else None
    return snapshot.Messages(
        unpack(res.clusters, cluster_pb2.Cluster), unpack(res.endpoints, endpoint_pb2.ClusterLoadAssignment), routes
    )


def test_resource_builder_reuses_unchanged_splits_and_builds_what_fresh_builds_give() -> None:
    """The publisher's builder across publishes: every result, unpacked, equals a fresh build (the golden-checked
    functions; the route configuration is assembled from serialized virtual hosts), an unchanged split's clusters and
    endpoints are the same packed messages (not rebuilt), a changed split's are rebuilt, and a generation two calls
    back is no longer held (the cache is bounded)."""
    one = sample_generation(1)
    api = compile_split(
        parse_split("prod", "api", {"hosts": ["api.example"], "backends": [{"name": "blue", "weight": 1}]}),
        {"blue": [Endpoint("10.1.0.9", 80)]},  # new endpoint: api's cluster content changes
    )
    shop = one.split_for("shop.example")
    assert shop is not None
    two = Generation(2, (shop, api))
    b = snapshot.ResourceBuilder()
    assert _unpacked(b.transition(None, one)) == snapshot.transition(None, one)
    first = b.resources(one)
    assert _unpacked(first) == snapshot.resources(one)
    t = b.transition(one, two)
    assert _unpacked(t) == snapshot.transition(one, two)
    assert t.routes == first.routes  # the held routes until the swap
    assert _unpacked(b.serving(two, [one])) == snapshot.serving(two, [one])  # one's clusters drain
    assert _unpacked(b.transition(two, one, [one])) == snapshot.transition(two, one, [one])
    second = b.resources(two)
    assert _unpacked(second) == snapshot.resources(two)
    assert second.clusters["prod/shop/stable"] is first.clusters["prod/shop/stable"]
    assert second.endpoints["prod/shop/canary"] is first.endpoints["prod/shop/canary"]
    assert second.endpoints["prod/api/blue"] is not first.endpoints["prod/api/blue"]
    assert second.endpoints["prod/api/blue"] != first.endpoints["prod/api/blue"]
    b.resources(Generation(3, (api,)))  # shop is in neither of the last call's generations: dropped
    assert b.resources(one).clusters["prod/shop/stable"] is not first.clusters["prod/shop/stable"]
    assert _unpacked(b.resources(None)) == snapshot.resources(None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("unix:/a/b.sock", Address(path="/a/b.sock")),
        ("127.0.0.1:9001", Address("127.0.0.1", 9001)),
        ("[::1]:9001", Address("::1", 9001)),
    ],
)
def test_address_parse(text: str, expected: Address) -> None:
    assert Address.parse(text) == expected


def test_serving_keeps_draining_clusters_with_the_new_routes() -> None:
    old = sample_generation(7)
    new_split = compile_split(
        parse_split("prod", "api", {"hosts": ["api.example"], "backends": [{"name": "violet", "weight": 1}]}),
        {"violet": [Endpoint("10.2.0.1", 80)]},
    )
    new = Generation(8, (new_split,))
    s = snapshot.serving(new, [old])
    assert set(s.clusters) == set(s.endpoints) == set(old.clusters()) | {"prod/api/violet"}
    assert s.routes == snapshot.resources(new).routes
    assert snapshot.serving(new) == snapshot.resources(new)
    # The transition from `new` to a third generation keeps what is still draining.
    third = Generation(9, (old.splits[0],))
    assert set(snapshot.transition(new, third, [old]).clusters) == set(s.clusters)


def _fallback_cookie_regex() -> str:
    rc = envoy.route_configuration(sample_generation())
    return str(rc.virtual_hosts[0].routes[1].match.headers[0].string_match.safe_regex.regex)


@pytest.mark.parametrize(
    ("cookie", "present"),
    [
        ("ts=a", True),
        ("x=1; ts=a", True),
        ("x=1;ts=a", True),
        ("xts=a", False),
        ("x=ts=a", False),
        ("", False),
        # Invalid values count as absent, as the processor reads them (docs/spec.md, "The affinity cookie").
        ("ts=", False),
        ("ts=a b", False),
        ('ts=""', False),
        ("ts=a\\b", False),
        ('ts="ok"', True),
        ("ts = ok ", True),
        ("ts=a b; ts=ok", True),  # a later valid duplicate counts
        ("ts=ok; x=a b", True),
    ],
)
def test_the_cookie_fallback_matches_only_a_valid_affinity_cookie(cookie: str, present: bool) -> None:
    # The same regex Envoy runs (RE2 full match); Python's re agrees with RE2 on this subset.
    assert (re.fullmatch(_fallback_cookie_regex(), cookie) is not None) is present
    assert (read_cookie([cookie], "ts") is not None) is present  # the processor's reading agrees


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["ts", "x", " ts", "ts ", "tsx"]),
            st.text(alphabet=st.sampled_from(list('ab"; \t\\=é')), max_size=8),
        ),
        max_size=4,
    )
)
def test_the_cookie_fallback_agrees_with_the_processors_reading(pairs: list[tuple[str, str]]) -> None:
    line = "; ".join(f"{k}={v}" for k, v in pairs)
    assert (re.fullmatch(_fallback_cookie_regex(), line) is not None) is (read_cookie([line], "ts") is not None)


def test_fallback_routes_disclose_whether_affinity_decided() -> None:
    rc = envoy.route_configuration(sample_generation())
    cookie_route, plain = rc.virtual_hosts[0].routes[1:3]
    # Envoy hashes the cookie to pick the cluster on `fallback-cookie`: the session's key decided; on `fallback` not.
    assert cookie_route.metadata.filter_metadata["trafficsplit"]["affinity_applied"] is True
    assert plain.metadata.filter_metadata["trafficsplit"]["affinity_applied"] is False


def test_every_backend_cluster_ejects_dead_endpoints_and_every_route_retries_unsent_requests() -> None:
    res = snapshot.resources(sample_generation())
    for c in res.clusters.values():
        od = c.outlier_detection
        assert od.consecutive_gateway_failure.value == envoy.GATEWAY_FAILURES_TO_EJECT
        assert od.enforcing_consecutive_gateway_failure.value == 100
        # The application's own 5xx never eject a pod.
        assert od.enforcing_consecutive_5xx.value == 0 and od.enforcing_success_rate.value == 0
        assert c.per_connection_buffer_limit_bytes.value == envoy.BUFFER_LIMIT_BYTES
    assert res.routes is not None
    for vh in res.routes[envoy.ROUTE_CONFIG_NAME].virtual_hosts[:-1]:
        for route in vh.routes:
            # Only failures where no request byte reached the application: safe to retry for any method.
            assert set(route.route.retry_policy.retry_on.split(",")) == {
                "connect-failure",
                "refused-stream",
                "reset-before-request",
            }


def _hcm(opts: BootstrapOptions) -> dict[str, object]:
    doc = json.loads(bootstrap_json(opts))
    hcm: dict[str, object] = doc["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    return hcm


def test_trusted_hops_keep_the_clients_forwarded_for_and_none_drop_it() -> None:
    base = {"node_id": "n", "listen": Address(), "extproc": Address(), "ads": Address(), "admin": Address()}
    none = _hcm(BootstrapOptions(**base))  # type: ignore[arg-type]
    assert none["use_remote_address"] is True and "xff_num_trusted_hops" not in none
    assert "early_header_mutation_extensions" in none
    one = _hcm(BootstrapOptions(**base, xff_num_trusted_hops=1))  # type: ignore[arg-type]
    assert one["xff_num_trusted_hops"] == 1 and "early_header_mutation_extensions" not in one


@pytest.mark.parametrize(
    "bad",
    [{"xff_num_trusted_hops": -1}, {"xff_num_trusted_hops": 17}, {"max_heap_bytes": 1024}, {"max_connections": 0}],
)
def test_bootstrap_options_refuse_out_of_range_edge_settings(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        BootstrapOptions(node_id="n", listen=Address(), extproc=Address(), ads=Address(), admin=Address(), **bad)  # type: ignore[arg-type]


def test_a_split_carried_on_unchanged_keeps_its_virtual_host_and_discloses_its_first_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The processor's path: generations arrive with each split's first carrying number. The split that did not
    change keeps the virtual host it had (not rebuilt for the new number; its fallback routes still disclose the
    number that first carried it), the changed one gets a new one, and the result equals a fresh build."""
    from trafficsplit.wire.generation import generation_from_proto, generation_to_proto

    one = sample_generation(1)
    shop = one.split_for("shop.example")
    api = compile_split(
        parse_split("prod", "api", {"hosts": ["api.example"], "backends": [{"name": "blue", "weight": 1}]}),
        {"blue": [Endpoint("10.1.0.9", 80)]},
    )
    assert shop is not None
    held = generation_from_proto(generation_to_proto(one, first={s.key: 1 for s in one.splits}))
    new = generation_from_proto(generation_to_proto(Generation(2, (shop, api)), first={shop.key: 1, api.key: 2}))
    b = snapshot.ResourceBuilder()
    b.resources(held)
    built: list[str] = []
    real = envoy.virtual_host

    def counting(split: object, generation: int) -> object:
        built.append(f"{split.key}@{generation}")  # type: ignore[attr-defined]
        return real(split, generation)  # type: ignore[arg-type]

    monkeypatch.setattr(envoy, "virtual_host", counting)
    res = b.transition(held, new)
    res = b.serving(new, [held])
    assert built == ["prod/api@2"]  # shop's virtual host is the one generation 1 built
    routes = _unpacked(res).routes
    assert routes is not None
    assert routes == snapshot.resources(new).routes
    fallback = {
        vh.name: [
            r.metadata.filter_metadata["trafficsplit"]["generation"] for r in vh.routes if r.metadata.filter_metadata
        ]
        for vh in routes["trafficsplit"].virtual_hosts
        if vh.name != "no-split"
    }
    assert set(fallback["prod/shop"]) == {1} and set(fallback["prod/api"]) == {2}


def test_first_generation_crosses_the_publish_api_and_is_bounded_by_the_number() -> None:
    from trafficsplit.core.model.errors import SpecError
    from trafficsplit.wire.generation import generation_from_proto, generation_to_proto

    msg = generation_to_proto(sample_generation(5), first={"prod/shop": 3})
    got = {s.key: s.first_generation for s in generation_from_proto(msg).splits}
    assert got["prod/shop"] == 3 and set(got.values()) <= {0, 3}
    msg.splits[0].first_generation = 6
    with pytest.raises(SpecError, match=r"splits\[0\]\.first_generation: 6 is not in 0\.\.5"):
        generation_from_proto(msg)


def test_the_http_transport_changes_only_the_filters_service_and_the_processors_cluster() -> None:
    """Everything that makes ext_proc fail open and cost one message is the same for both transports; only how Envoy
    reaches the processor differs: http_service to an HTTP/1.1 cluster, with the message timeout as its own."""
    base = {"node_id": "n", "listen": Address(), "ads": Address(path="/s/extproc.sock"), "admin": Address()}
    grpc_doc = json.loads(bootstrap_json(BootstrapOptions(**base, extproc=Address(path="/s/extproc.sock"))))  # type: ignore[arg-type]
    http_opts = BootstrapOptions(
        **base,  # type: ignore[arg-type]
        extproc=Address(path="/s/extproc-http.sock"),
        extproc_transport=ExtProcTransport.HTTP,
        message_timeout_ms=250,
    )
    http_doc = json.loads(bootstrap_json(http_opts))

    def ext_proc(doc: dict[str, Any]) -> dict[str, Any]:
        hcm = doc["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
        f: dict[str, Any] = hcm["http_filters"][0]["typed_config"]
        return f

    g, h = ext_proc(grpc_doc), ext_proc(http_doc)
    assert g.pop("grpc_service") == {"envoy_grpc": {"cluster_name": EXTPROC_CLUSTER}}
    assert h.pop("http_service") == {
        "http_service": {"http_uri": {"uri": EXTPROC_HTTP_URI, "cluster": EXTPROC_CLUSTER, "timeout": "0.250s"}}
    }
    assert h.pop("message_timeout") == "0.250s" and g.pop("message_timeout") == "0.200s"
    assert g == h and h["failure_mode_allow"] is True
    clusters = {c["name"]: c for c in http_doc["static_resources"]["clusters"]}
    extproc = clusters[EXTPROC_CLUSTER]
    assert "typed_extension_protocol_options" not in extproc  # HTTP/1.1
    endpoint = extproc["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
    assert endpoint == {"pipe": {"path": "/s/extproc-http.sock"}}
    assert "http2_protocol_options" in json.dumps(clusters[ADS_CLUSTER])  # ADS stays gRPC
    grpc_clusters = {c["name"]: c for c in grpc_doc["static_resources"]["clusters"]}
    assert grpc_clusters[EXTPROC_CLUSTER]["circuit_breakers"] == extproc["circuit_breakers"]
    assert urllib.parse.urlsplit(EXTPROC_HTTP_URI).path == EXTPROC_HTTP_PATH


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], None),
        (["--ext-proc-transport", "http", "--listen", "unix:/run/ts/extproc.sock"], "unix:/run/ts/extproc-http.sock"),
        (["--ext-proc-transport", "http", "--listen", "unix:/run/ts/sock"], "unix:/run/ts/sock-http.sock"),
        (["--ext-proc-transport", "http", "--listen", "127.0.0.1:9001"], "127.0.0.1:9005"),
        (["--ext-proc-transport", "http", "--ext-proc-http-listen", "unix:/x"], "unix:/x"),
    ],
)
def test_the_http_socket_sits_beside_the_grpc_one_unless_given(argv: list[str], expected: str | None) -> None:
    from trafficsplit.extproc.__main__ import ext_proc_http_listen, parse_args

    assert ext_proc_http_listen(parse_args(argv)) == expected


def _stats_patterns(opts: BootstrapOptions) -> list[str] | None:
    doc = json.loads(bootstrap_json(opts))
    if "stats_config" not in doc:
        return None
    return [p["safe_regex"]["regex"] for p in doc["stats_config"]["stats_matcher"]["exclusion_list"]["patterns"]]


def test_backend_cluster_stats_are_kept_by_default_and_off_exclude_the_split_clusters_only() -> None:
    from trafficsplit.core.model.compiled import cluster_name
    from trafficsplit.core.model.filters import RequestMirror
    from trafficsplit.wire.envoy import mirror_cluster_name

    base = {"node_id": "n", "listen": Address(), "extproc": Address(), "ads": Address(), "admin": Address()}
    assert _stats_patterns(BootstrapOptions(**base)) is None  # type: ignore[arg-type]
    patterns = _stats_patterns(BootstrapOptions(**base, backend_cluster_stats=False))  # type: ignore[arg-type]
    assert patterns is not None and len(patterns) == 1
    # Envoy matches the whole stat name (RE2 full match; Python's fullmatch agrees for this pattern).
    excluded = re.compile(patterns[0])
    mirror = RequestMirror(namespace="flagger-demo", service="podinfo-canary", port=80)
    mirror_stat_name = mirror_cluster_name(mirror).replace(":", "_")
    split_clusters = [
        cluster_name("default", "shop", "blue"),
        cluster_name("a", "x.y-z", "canary-2"),
        cluster_name("team-1", "s", "b"),
        cluster_name("n" * 63, "s" * 253, "b" * 63),
    ]
    for cluster in split_clusters:
        for stat in ("upstream_rq_total", "outlier_detection.ejections_active", "circuit_breakers.default.rq_open"):
            assert excluded.fullmatch(f"cluster.{cluster}.{stat}"), cluster
    kept = [
        f"cluster.{EXTPROC_CLUSTER}.upstream_rq_total",
        f"cluster.{ADS_CLUSTER}.upstream_cx_active",
        "cluster_manager.cds.update_success",
        "cluster_manager.active_clusters",
        "http.trafficsplit.downstream_rq_total",
        "http.trafficsplit.ext_proc.trafficsplit.streams_started",
        "listener.0.0.0.0_8080.downstream_cx_total",
        "server.memory_allocated",
        # A RequestMirror's cluster is one per mirrored Service port, not per backend: docs/observability.md says its
        # series stay with the flag off (Envoy writes the name's ':' as '_' in stat names).
        f"cluster.{mirror_stat_name}.upstream_rq_2xx",
        f"cluster.{mirror_stat_name}.upstream_rq_time",
    ]
    assert [s for s in kept if excluded.fullmatch(s)] == []


@pytest.mark.parametrize(("argv", "off"), [([], False), (["--no-backend-cluster-stats"], True)])
def test_the_printed_bootstrap_drops_backend_cluster_stats_only_when_asked(
    capsys: pytest.CaptureFixture[str], argv: list[str], off: bool
) -> None:
    from trafficsplit.extproc.__main__ import main

    assert main(["--print-bootstrap", "--log-level", "WARNING", *argv]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert ("stats_config" in doc) is off
