"""Envoy's fail-open counters, the split backends' and the mirrors' responses by status class, read from its admin
`/stats` text and re-exported (extproc/envoystats.py): parsing, the filter sent, a stub admin on loopback, and an
admin that does not answer."""

from __future__ import annotations

import re
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client import CollectorRegistry

from trafficsplit.extproc.envoystats import FAILED_OPEN_STAT, STATS_FILTER, EnvoyStatsCollector, parse_stats
from trafficsplit.wire.bootstrap import Address

TEXT = f"""\
{FAILED_OPEN_STAT}: 7
http.trafficsplit.ext_proc.trafficsplit.streams_started: 100
vhost.shop/web.route.fallback.upstream_rq_total: 5
vhost.shop/api.route.fallback.upstream_rq_total: 0
vhost.shop/web.route.fallback.upstream_rq_time: P0(nan,0)
cluster.shop/web/blue.upstream_rq_total: 90
cluster.shop/web/blue.upstream_rq_2xx: 87
cluster.shop/web/blue.upstream_rq_5xx: 3
cluster.shop/web/blue.upstream_rq_time: B0.5(3,3) B1(0,5) B5(1,9) B10(0,9) B3.6e+06(0,9)
cluster.shop/web/green.upstream_rq_time: No recorded values
cluster.shop/web/blue.external.upstream_rq_time: B0.5(3,3) B1(0,5)
cluster.gw/podinfo.rule-0/podinfo-canary.upstream_rq_5xx: 12
cluster.trafficsplit_ads.upstream_rq_2xx: 4
cluster.mirror_flagger-demo/podinfo-canary_80.upstream_rq_2xx: 41
cluster.mirror_flagger-demo/podinfo-canary_80.internal.upstream_rq_2xx: 41
cluster.mirror_flagger-demo/podinfo-canary_80.upstream_rq_5xx: 2
cluster.mirror_flagger-demo/podinfo-canary_80.upstream_rq_time: B0.5(3,3) B1(0,5) B5(1,9) B3.6e+06(0,9)
"""
# Those mirror lines are as Envoy 1.40 prints them for cluster `mirror:flagger-demo/podinfo-canary:80` (':' → '_').


def test_parse_keeps_the_fail_open_counters_only() -> None:
    s = parse_stats(TEXT)
    assert s.failed_open == 7
    assert s.fallback == {"shop/web": 5, "shop/api": 0}
    assert s.responses == {
        ("shop/web", "blue", "2xx"): 87,
        ("shop/web", "blue", "5xx"): 3,
        (
            "gw/podinfo.rule-0",
            "podinfo-canary",
            "5xx",
        ): 12,  # an HTTPRoute rule's split; the gateway's own cluster is not
    }
    assert s.mirror_responses == {
        ("flagger-demo/podinfo-canary", "80", "2xx"): 41,
        ("flagger-demo/podinfo-canary", "80", "5xx"): 2,
    }
    assert s.mirror_latency == {("flagger-demo/podinfo-canary", "80"): ((0.0005, 3), (0.001, 5), (0.005, 9), (3600, 9))}
    assert parse_stats("garbage\n: 3\nname: -1\n").failed_open is None


def test_the_filter_asks_for_exactly_those_counters() -> None:
    f = re.compile(STATS_FILTER)
    names = [line.partition(": ")[0] for line in TEXT.splitlines()]
    assert [n for n in names if f.search(n)] == [
        FAILED_OPEN_STAT,
        "vhost.shop/web.route.fallback.upstream_rq_total",
        "vhost.shop/api.route.fallback.upstream_rq_total",
        "cluster.shop/web/blue.upstream_rq_2xx",
        "cluster.shop/web/blue.upstream_rq_5xx",
        "cluster.shop/web/blue.upstream_rq_time",
        "cluster.shop/web/green.upstream_rq_time",
        "cluster.gw/podinfo.rule-0/podinfo-canary.upstream_rq_5xx",
        "cluster.mirror_flagger-demo/podinfo-canary_80.upstream_rq_2xx",
        "cluster.mirror_flagger-demo/podinfo-canary_80.upstream_rq_5xx",
        "cluster.mirror_flagger-demo/podinfo-canary_80.upstream_rq_time",
    ]


@pytest.fixture
def admin() -> Iterator[tuple[Address, list[str]]]:
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            body = TEXT.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield Address(host="127.0.0.1", port=server.server_address[1]), asked
    finally:
        server.shutdown()
        server.server_close()


def test_a_scrape_reads_envoy_and_exports_counters(admin: tuple[Address, list[str]]) -> None:
    address, asked = admin
    reg = CollectorRegistry()
    reg.register(EnvoyStatsCollector(address))
    assert reg.get_sample_value("trafficsplit_envoy_stats_up") == 1
    assert reg.get_sample_value("trafficsplit_envoy_failed_open_total") == 7
    assert reg.get_sample_value("trafficsplit_envoy_fallback_requests_total", {"split": "shop/web"}) == 5
    labels = {"split": "shop/web", "backend": "blue", "code_class": "5xx"}
    assert reg.get_sample_value("trafficsplit_envoy_backend_responses_total", labels) == 3
    blue = {"split": "shop/web", "backend": "blue"}
    assert reg.get_sample_value("trafficsplit_envoy_backend_request_seconds_bucket", blue | {"le": "0.005"}) == 9
    assert reg.get_sample_value("trafficsplit_envoy_backend_request_seconds_bucket", blue | {"le": "+Inf"}) == 9
    mirror = {"service": "flagger-demo/podinfo-canary", "port": "80"}
    assert reg.get_sample_value("trafficsplit_envoy_mirror_responses_total", mirror | {"code_class": "2xx"}) == 41
    assert reg.get_sample_value("trafficsplit_envoy_mirror_request_seconds_bucket", mirror | {"le": "+Inf"}) == 9
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(asked[-1]).query)
    assert query["filter"] == [STATS_FILTER]
    assert query["histogram_buckets"] == ["cumulative"]


def test_an_envoy_that_does_not_answer_is_up_0_without_counters() -> None:
    reg = CollectorRegistry()
    reg.register(EnvoyStatsCollector(Address(host="127.0.0.1", port=1)))  # nothing listens on port 1
    assert reg.get_sample_value("trafficsplit_envoy_stats_up") == 0
    assert reg.get_sample_value("trafficsplit_envoy_failed_open_total") is None
