"""A Gateway's route tables served by real Envoy and the processor on loopback, with real backends.

HTTPRoutes are compiled by the core (`translate` → `gateway_content`), served by an Envoy bootstrapped with one
listener per Gateway listener port, each naming its port to the processor; the processor picks each rule's backend by
the core's FNV-1a pick of the request id (without sessionPersistence; with it, of the session's key, then sealed in
its cookie), Envoy answers 404 when no rule matches and 500 for a rule without a backend, the processor 500 for the
share of backendRefs that do not resolve; and each rule fails open when the processor cannot decide: Envoy's routes
serve a one-backend rule and a redirect without it, and a split rule by its native weights.
"""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import chisquare

from tests.support import flagger_route as flagger
from tests.support.dataplane import TRANSPORTS, Connection, NameBackends, Response, name_backends  # noqa: F401
from tests.support.gatewayplane import GatewayPlane
from trafficsplit.core.decide.serve import in_error_share
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.hashing import key_hash

pytestmark = [pytest.mark.envoy]

HOST = "shop.example"
P_MIN = 0.001
LISTENERS = [
    {"name": "http", "port": 80, "protocol": "HTTP"},
    {"name": "admin", "port": 8081, "protocol": "HTTP"},
]


def ref(name: str, weight: int) -> dict[str, Any]:
    return {"name": name, "port": 80, "weight": weight}


def route(name: str, section: str, rules: list[dict[str, Any]], hostnames: tuple[str, ...] = (HOST,)) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 3},
        "spec": {
            "parentRefs": [{"name": "gw", "sectionName": section}],
            "hostnames": list(hostnames),
            "rules": rules,
        },
    }


ROUTES = [
    route(
        "shop",
        "http",
        [
            {
                "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                "backendRefs": [ref("stable", 70), ref("canary", 30), ref("blue", 0)],
            },
            {"matches": [{"path": {"type": "Exact", "value": "/broken"}}], "backendRefs": [ref("missing", 1)]},
            {
                "matches": [{"path": {"type": "PathPrefix", "value": "/half"}}],
                "backendRefs": [ref("green", 1), ref("gone", 1)],
            },
            {
                "matches": [
                    {"path": {"type": "PathPrefix", "value": "/"}, "headers": [{"name": "x-version", "value": "blue"}]}
                ],
                "backendRefs": [ref("blue", 1)],
            },
        ],
    ),
    route("admin", "admin", [{"backendRefs": [ref("fresh", 1)]}]),
]


@pytest.fixture
def transport() -> str:
    return "grpc"


@pytest.fixture
def plane(name_backends: NameBackends, transport: str) -> Iterator[GatewayPlane]:  # noqa: F811
    with tempfile.TemporaryDirectory(prefix="ts-gwplane-") as d:
        gp = GatewayPlane.start(Path(d), name_backends, [80, 8081], transport)
        try:
            yield gp
        finally:
            gp.stop()


async def _fetch(
    port: int, jobs: list[tuple[str, str, list[tuple[str, str]]]], concurrency: int = 16
) -> list[Response]:
    results: list[Response | None] = [None] * len(jobs)
    todo = iter(range(len(jobs)))

    async def worker() -> None:
        conn = Connection(port)
        try:
            for i in todo:
                host, path, headers = jobs[i]
                results[i] = await conn.request(host, path, headers)
        finally:
            conn.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return [r for r in results if r is not None]


def fetch(port: int, jobs: list[tuple[str, str, list[tuple[str, str]]]]) -> list[Response]:
    """Every job answered, a 503 (a backend's, or a connection lost on a loaded machine) sent again, at most 5
    rounds; what is left fails the test."""
    out = asyncio.run(_fetch(port, jobs))
    for _ in range(4):
        again = [i for i, r in enumerate(out) if r.status == 503]
        if not again:
            break
        for i, r in zip(again, asyncio.run(_fetch(port, [jobs[i] for i in again])), strict=True):
            out[i] = r
    assert not [r for r in out if r.status == 503], "requests never decided by the processor"
    return out


def rule_split(gen: Generation, key: str) -> Any:
    assert gen.routes is not None
    split = gen.routes.by_rule[key].split
    assert split is not None
    return split


@pytest.mark.slow
def test_a_70_30_0_rule_spreads_cookieless_requests_by_the_cores_pick_of_the_request_id(plane: GatewayPlane) -> None:
    gen = plane.publish(LISTENERS, ROUTES)
    split = rule_split(gen, "ns/shop.rule-0")
    n = 5_000
    jobs = [(HOST, "/shop", [("x-request-id", f"req-{i:05d}")]) for i in range(n)]
    responses = fetch(plane.ports[80], jobs)
    assert [r.status for r in responses] == [200] * n
    counts = {"stable": 0, "canary": 0, "blue": 0}
    mismatched = kept_ids = 0
    for (_, _, sent), r in zip(jobs, responses, strict=True):
        counts[r.backend] += 1
        # The id the decision was made for is the one the backend received (Envoy generates an edge request's id
        # unless it keeps the client's).
        rid = r.header("x-seen-request-id")
        assert rid
        kept_ids += rid == sent[0][1]
        mismatched += r.backend != split.weights.pick(rid)
    result = chisquare([counts["stable"], counts["canary"]], [0.7 * n, 0.3 * n])
    print(
        f"\n70/30/0 over {n} cookie-less requests: {counts}, chi2={result.statistic:.3f}, p={result.pvalue:.3f}, "
        f"{n - mismatched} decisions equal to the core's pick, client's request id kept in {kept_ids}"
    )
    assert counts["blue"] == 0
    assert mismatched == 0
    assert result.pvalue > P_MIN, counts


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_404_500_and_the_500_share_and_per_listener_tables(plane: GatewayPlane) -> None:
    gen = plane.publish(LISTENERS, ROUTES)
    port, admin = plane.ports[80], plane.ports[8081]
    (nowhere, unmatched_host, broken) = fetch(
        port, [("nowhere.example", "/", []), ("admin.example", "/", []), (HOST, "/broken", [])]
    )
    assert nowhere.status == 404 and nowhere.body == b"no route matches this request\n"
    assert unmatched_host.status == 404
    assert broken.status == 500 and broken.body == b"no backend can serve this route\n"
    # A header match outranks the bare prefix: the precedence across the rules of one listener.
    (blue,) = fetch(port, [(HOST, "/anything", [("x-version", "blue")])])
    assert (blue.status, blue.backend) == (200, "blue")
    # The other listener serves its own table: every host and path there goes to `fresh`; its routes are not port 80's.
    (on_admin,) = fetch(admin, [(HOST, "/broken", [])])
    assert (on_admin.status, on_admin.backend) == (200, "fresh")
    # The 500 share: `gone` does not resolve, so its weight answers 500 for exactly the keys the core puts there.
    split = rule_split(gen, "ns/shop.rule-2")
    assert gen.routes is not None and gen.routes.by_rule["ns/shop.rule-2"].error_weight == 1
    half = fetch(port, [(HOST, "/half", [("x-request-id", f"h-{i}")]) for i in range(400)])
    errors = 0
    for r in half:
        rid = r.header("x-seen-request-id")
        if r.status == 500:
            errors += 1
        else:
            assert rid is not None and r.backend == "green"
            assert not in_error_share(split, 1, key_hash(rid))
    print(f"\n500 share of a 1/1 rule with one unresolved backendRef: {errors} of 400")
    assert 140 < errors < 260


OUTAGE_HOST = "outage.example"
OUTAGE_ROUTES = [
    route(
        "one",
        "http",
        [{"matches": [{"path": {"type": "PathPrefix", "value": "/one"}}], "backendRefs": [ref("blue", 1)]}],
        (OUTAGE_HOST,),
    ),
    route(
        "split",
        "http",
        [
            {
                "matches": [{"path": {"type": "PathPrefix", "value": "/split"}}],
                "backendRefs": [ref("stable", 90), ref("canary", 10)],
                "sessionPersistence": {"sessionName": "ts-outage", "type": "Cookie"},
            }
        ],
        (OUTAGE_HOST,),
    ),
    route(
        "moved",
        "http",
        [
            {
                "matches": [{"path": {"type": "PathPrefix", "value": "/moved"}}],
                "filters": [
                    {"type": "RequestRedirect", "requestRedirect": {"hostname": "new.example", "statusCode": 308}}
                ],
            }
        ],
        (OUTAGE_HOST,),
    ),
]


@pytest.mark.parametrize("outage", ["sigstop", "killed"])
def test_each_rule_fails_open_without_its_processor(plane: GatewayPlane, outage: str) -> None:
    """Processor stopped or dead: the one-backend and redirect rules never reach it (0 failures), the 90/10 rule
    keeps its ratio on Envoy's own weights and a session keeps its backend by Envoy's hash of its cookie."""
    plane.publish(LISTENERS, OUTAGE_ROUTES)
    port = plane.ports[80]
    # With the processor up, the one-backend and redirect rules never call it: Envoy starts no ext_proc stream.
    streams = "http.trafficsplit.ext_proc.trafficsplit.streams_started"
    before = plane.envoy.stat(streams)
    asyncio.run(_fetch(port, [(OUTAGE_HOST, p, []) for p in ("/one", "/moved/x") for _ in range(100)]))
    assert plane.envoy.stat(streams) == before
    asyncio.run(_fetch(port, [(OUTAGE_HOST, "/split", []) for _ in range(10)]))
    assert plane.envoy.stat(streams) == before + 10
    # A session minted by the processor while it was up: its cookie is what Envoy hashes during the outage.
    (minted,) = asyncio.run(_fetch(port, [(OUTAGE_HOST, "/split", [])], concurrency=1))
    cookie = minted.cookie("ts-outage")
    assert minted.status == 200 and cookie is not None
    if outage == "sigstop":
        os.kill(plane.processor.pid, signal.SIGSTOP)
    else:
        plane.processor.kill()
    try:
        n = 400
        jobs: list[tuple[str, str, list[tuple[str, str]]]] = [(OUTAGE_HOST, "/one", []) for _ in range(n)]
        jobs += [(OUTAGE_HOST, "/moved/x", []) for _ in range(n)]
        jobs += [(OUTAGE_HOST, "/split", []) for _ in range(n)]
        jobs += [(OUTAGE_HOST, "/split", [("cookie", f"ts-outage={cookie}")]) for _ in range(50)]
        out = asyncio.run(_fetch(port, jobs, concurrency=32))
    finally:
        if outage == "sigstop":
            os.kill(plane.processor.pid, signal.SIGCONT)
    one, moved, split, sticky = out[:n], out[n : 2 * n], out[2 * n : 3 * n], out[3 * n :]
    assert [r.status for r in one] == [200] * n and {r.backend for r in one} == {"blue"}
    assert [r.status for r in moved] == [308] * n
    assert {r.header("location") for r in moved} == {"http://new.example/moved/x"}
    assert [r.status for r in split] == [200] * n
    counts = [sum(r.backend == b for r in split) for b in ("stable", "canary")]
    p = chisquare(counts, [0.9 * n, 0.1 * n]).pvalue
    print(
        f"\n{outage}: 90/10 on Envoy's weights: {counts}, p={p:.3f}; one session's backends: "
        f"{sorted({r.backend for r in sticky})} (the processor chose {minted.backend})"
    )
    assert p > P_MIN, counts
    # Stickiness degrades to Envoy's hash of the cookie: one backend for the session (not necessarily the pick's).
    assert [r.status for r in sticky] == [200] * 50 and len({r.backend for r in sticky}) == 1


FILTERS = route(
    "filters",
    "http",
    [
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/headers"}}],
            "filters": [
                {
                    "type": "RequestHeaderModifier",
                    "requestHeaderModifier": {
                        "set": [{"name": "X-Env", "value": "prod"}],
                        "add": [{"name": "X-Via", "value": "ts"}],
                        "remove": ["X-Debug"],
                    },
                },
                {
                    "type": "ResponseHeaderModifier",
                    "responseHeaderModifier": {
                        "set": [{"name": "Cache-Control", "value": "no-store"}],
                        "remove": ["X-Seen-Path"],
                    },
                },
            ],
            "backendRefs": [
                {
                    **ref("stable", 1),
                    "filters": [
                        {
                            "type": "ResponseHeaderModifier",
                            "responseHeaderModifier": {"add": [{"name": "X-Served", "value": "stable"}]},
                        }
                    ],
                }
            ],
        },
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/prefix/one"}}],
            "filters": [
                {
                    "type": "URLRewrite",
                    "urlRewrite": {
                        "hostname": "internal.example",
                        "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/one"},
                    },
                }
            ],
            "backendRefs": [ref("canary", 1)],
        },
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/old"}}],
            "filters": [
                {
                    "type": "RequestRedirect",
                    "requestRedirect": {
                        "scheme": "https",
                        "hostname": "new.example",
                        "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"},
                        "statusCode": 301,
                    },
                }
            ],
        },
    ],
    hostnames=("filters.example",),
)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_header_filters_rewrite_and_redirect(plane: GatewayPlane) -> None:
    plane.publish(LISTENERS, [FILTERS])
    port = plane.ports[80]
    headers, kept, rewritten, redirected = fetch(
        port,
        [
            ("filters.example", "/headers/x", [("x-debug", "1"), ("x-env", "client")]),
            ("filters.example", "/headers/x", [("x-via", "client")]),
            ("filters.example", "/prefix/one/two?k=v", []),
            ("filters.example", "/old/page?q=1", []),
        ],
    )
    # RequestHeaderModifier, as the backend received it: set replaces the client's value, add adds, remove removes;
    # add keeps a value the client sent (the backend echoes a header's first value).
    assert (headers.status, headers.backend) == (200, "stable")
    assert headers.header("x-seen-env") == "prod"
    assert headers.header("x-seen-via") == "ts"
    assert headers.header("x-seen-debug") is None
    assert kept.header("x-seen-via") == "client"
    # ResponseHeaderModifier, the rule's (set, remove) and the backendRef's (add), on the response.
    assert headers.header("cache-control") == "no-store"
    assert headers.header("x-seen-path") is None
    assert headers.header("x-served") == "stable"
    # URLRewrite: the backend got the rewritten host and path, the query kept.
    assert (rewritten.status, rewritten.backend) == (200, "canary")
    assert rewritten.header("x-seen-path") == "/one/two?k=v"
    assert rewritten.header("x-seen-authority") == "internal.example"
    # RequestRedirect: answered by the gateway with the core's Location.
    assert redirected.status == 301
    assert redirected.header("location") == "https://new.example/new/page?q=1"
    print(
        f"\nheader filters: x-seen-env={headers.header('x-seen-env')} x-seen-via={headers.header('x-seen-via')} "
        f"cache-control={headers.header('cache-control')} x-served={headers.header('x-served')}; "
        f"rewrite: {rewritten.header('x-seen-authority')}{rewritten.header('x-seen-path')}; "
        f"redirect: {redirected.status} {redirected.header('location')}"
    )


def test_session_persistence_keeps_a_session_on_the_cores_pick_of_its_cookie(plane: GatewayPlane) -> None:
    """A new session gets the core's pick of its minted key, sealed into the cookie with the backend."""
    sticky = route(
        "sticky",
        "http",
        [
            {
                "backendRefs": [ref("stable", 50), ref("canary", 50)],
                "sessionPersistence": {"sessionName": "gw-session"},
            }
        ],
    )
    gen = plane.publish(LISTENERS, [sticky])
    split = rule_split(gen, "ns/sticky.rule-0")
    firsts = fetch(plane.ports[80], [(HOST, "/", []) for _ in range(40)])
    cookies = [r.cookie("gw-session") for r in firsts]
    assert all(cookies), "every first response mints the session cookie"
    again = fetch(plane.ports[80], [(HOST, "/", [("cookie", f"gw-session={c}")]) for c in cookies])
    for first, second, c in zip(firsts, again, cookies, strict=True):
        assert c is not None
        key, backend, _ = c.split(".")  # sealed: KEY.BACKEND.MAC (core/model/persistent.py)
        assert first.backend == second.backend == backend == split.weights.pick(key)
        assert second.cookie("gw-session") is None  # kept, not minted again
    assert {r.backend for r in firsts} == {"stable", "canary"}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_header_session_persistence_keeps_a_session_on_its_backend_across_a_weight_change(plane: GatewayPlane) -> None:
    """GEP-1619 `type: Header`: the first response issues the sealed session (KEY.BACKEND.MAC, the core's pick of its
    minted key) in the `sessionName` header; a request sending it back stays on that backend after 50/50 → 10/90,
    while new sessions follow the new weights."""

    def sticky(weights: tuple[int, int]) -> dict[str, Any]:
        return route(
            "hdr",
            "http",
            [
                {
                    "backendRefs": [ref("stable", weights[0]), ref("canary", weights[1])],
                    "sessionPersistence": {"type": "Header", "sessionName": "X-Gw-Session"},
                }
            ],
        )

    gen = plane.publish(LISTENERS, [sticky((50, 50))])
    split = rule_split(gen, "ns/hdr.rule-0")
    firsts = fetch(plane.ports[80], [(HOST, "/", []) for _ in range(60)])
    tokens = [r.header("x-gw-session") for r in firsts]
    assert all(tokens), "every first response issues the session header"
    for r, t in zip(firsts, tokens, strict=True):
        assert t is not None and r.cookie("x-gw-session") is None
        key, backend, _ = t.split(".")
        assert r.backend == backend == split.weights.pick(key)
    before = [r.backend for r in firsts]
    assert set(before) == {"stable", "canary"}

    plane.publish(LISTENERS, [sticky((10, 90))])
    again = fetch(plane.ports[80], [(HOST, "/", [("x-gw-session", t or "")]) for t in tokens])
    moved = sum(a.backend != b for a, b in zip(again, before, strict=True))
    assert moved == 0
    assert all(a.header("x-gw-session") is None for a in again)  # the token holds: nothing issued again
    fresh = [r.backend for r in fetch(plane.ports[80], [(HOST, "/", []) for _ in range(200)])]
    on_stable = sum(b == "stable" for b in before)
    print(
        f"\nheader sessions: {on_stable}/{len(before) - on_stable} stable/canary at 50/50, moved by 50/50 -> 10/90: "
        f"{moved}; new sessions at 10/90: {fresh.count('stable')}/{fresh.count('canary')}"
    )
    assert chisquare([fresh.count("stable"), fresh.count("canary")], [20, 180]).pvalue > P_MIN


@pytest.fixture
def flagger_plane() -> Iterator[GatewayPlane]:
    """A Gateway data plane whose backends are Flagger's two Services (`podinfo-primary`, `podinfo-canary`, port 9898),
    so its HTTPRoute is published with its backendRefs unchanged."""
    with tempfile.TemporaryDirectory(prefix="ts-flagger-") as d:
        (Path(d) / "backends").mkdir()
        (Path(d) / "gateway").mkdir()
        backends = NameBackends.start(Path(d) / "backends", (flagger.PRIMARY, flagger.CANARY))
        try:
            gp = GatewayPlane.start(Path(d) / "gateway", backends, [80])
            gp.service_port = flagger.SERVICE_PORT
            try:
                yield gp
            finally:
                gp.stop()
        finally:
            backends.envoy.stop()


def flagger_route(bodies: list[dict[str, Any]]) -> dict[str, Any]:
    """Flagger's HTTPRoute on the plane's Gateway: only its namespace and parentRefs are the plane's (`ns/gw`); its
    hostnames, rules, matches, weights and filters are Flagger's."""
    route = dict(flagger.route_of(bodies))
    route["metadata"] = {**route["metadata"], "namespace": "ns"}
    route["spec"] = {**route["spec"], "parentRefs": [{"name": "gw"}]}
    return route


def test_flaggers_sticky_canary_route_served_unchanged(flagger_plane: GatewayPlane) -> None:
    """Cookie-less requests split by the weighted rule (the core's pick of each request id), every canary response
    carries Flagger's Set-Cookie, and the cookie sent back pins the canary through Flagger's steps; at weight 0 it
    returns to the primary and is expired."""
    plane, port = flagger_plane, flagger_plane.ports[80]
    base = flagger.fixture()
    gen = plane.publish(LISTENERS[:1], [flagger_route(base)])
    split = rule_split(gen, "ns/podinfo.rule-1")
    n = 2_000
    jobs = [(flagger.HOST, "/", [("x-request-id", f"flagger-{i:05d}")]) for i in range(n)]
    responses = fetch(port, jobs)
    counts = {flagger.PRIMARY: 0, flagger.CANARY: 0}
    mismatched = wrong_cookie = 0
    for r in responses:
        assert r.status == 200
        counts[r.backend] += 1
        rid = r.header("x-seen-request-id")
        assert rid
        mismatched += r.backend != split.weights.pick(rid)
        want = [flagger.SET_COOKIE] if r.backend == flagger.CANARY else []
        wrong_cookie += r.all("set-cookie") != want
    result = chisquare([counts[flagger.PRIMARY], counts[flagger.CANARY]], [0.9 * n, 0.1 * n])
    assert mismatched == 0 and wrong_cookie == 0
    assert result.pvalue > P_MIN, counts
    # The browser sends back what the canary's Set-Cookie set, beside its other cookies.
    canary_response = next(r for r in responses if r.backend == flagger.CANARY)
    name = flagger.COOKIE.partition("=")[0]
    sent = [("cookie", f"session=abc; {name}={canary_response.cookie(name)}; theme=dark")]
    pinned = 0
    for weight in (10, 30, 50):
        if weight != 10:
            plane.publish(LISTENERS[:1], [flagger_route(flagger.flagger_step(base, weight))])
        back = fetch(port, [(flagger.HOST, "/", [*sent, ("x-request-id", f"w{weight}-{i}")]) for i in range(200)])
        assert [(r.status, r.backend, r.all("set-cookie")) for r in back] == [(200, flagger.CANARY, [])] * 200, weight
        pinned += len(back)
    plane.publish(LISTENERS[:1], [flagger_route(flagger.flagger_weight_zero(base))])
    (after,) = fetch(port, [(flagger.HOST, "/", sent)])
    assert (after.status, after.backend, after.all("set-cookie")) == (200, flagger.PRIMARY, [flagger.EXPIRE_COOKIE])
    print(
        f"\nFlagger's route at 90/10 through Envoy, {n} cookie-less requests: {counts}, chi2={result.statistic:.3f}, "
        f"p={result.pvalue:.3f}, every decision the core's pick, Set-Cookie on each of the {counts[flagger.CANARY]} "
        f"canary responses only; the cookie sent back: {pinned} of {pinned} requests on the canary at 10, 30 and 50; "
        f"at weight 0 on the primary with the cookie expired"
    )
