"""Real Envoy against the model: the rule Envoy's native routes choose is the rule `RouteTable.select` chooses.

The model's route table (trafficsplit.core.decide.match) is the reference of the Gateway API precedence order; Envoy
serves what trafficsplit.wire.gateway_routes compiles from the same route set. Hypothesis draws batches of route sets
(tests/support/routesets.py: overlapping hostnames and wildcards on routes and on listeners sharing a port,
precedence ties, whole-segment prefixes, regular expressions, header, query and method conditions) with a hundred
requests each. One Envoy per batch serves every set of the batch on a listener of its own (the set's port-80 route
configuration, as compiled, plus a response header naming the route Envoy chose), in front of one backend that
answers 200. Each request's chosen route (or the 404 of no rule) is compared with the model's entry.

The counts (route sets, requests, rules hit, 404s, disagreements) are printed and written to
`$DIFFERENTIAL_REPORT` when set.
"""

from __future__ import annotations

import http.client
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.support.dataplane import Envoy, NameBackends
from tests.support.routesets import PORT, RouteSet, route_sets
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.routes import RouteEntry
from trafficsplit.wire import gateway_routes

BATCHES = 25
SETS_PER_BATCH = 8
PROBES_PER_SET = 100
ROUTE_HEADER = "x-test-route"


@dataclass
class Tally:
    sets: int = 0
    requests: int = 0
    hits: int = 0
    not_found: int = 0
    disagreements: list[str] = field(default_factory=list)


def _entry_id(entry: RouteEntry) -> str:
    return f"{entry.rule_key}:{entry.match_index}"


def _chosen(route_name: str | None) -> str | None:
    """The entry a native route serves, from its name (`kind:rule:match[:backend]`); None for the no-route 404."""
    if route_name is None or route_name == gateway_routes.NO_ROUTE:
        return None
    kind, _, rest = route_name.partition(":")
    return rest.rsplit(":", 1)[0] if kind == gateway_routes.DECIDED else rest


def _listener(name: str, route_config: dict[str, Any]) -> dict[str, Any]:
    for vh in route_config.get("virtual_hosts", []):
        vh.setdefault("response_headers_to_add", []).append(
            {"header": {"key": ROUTE_HEADER, "value": "%ROUTE_NAME%"}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
        )
    hcm = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3"
        ".HttpConnectionManager",
        "stat_prefix": name,
        "route_config": route_config,
        "http_filters": [
            {
                "name": "envoy.filters.http.router",
                "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
            }
        ],
    }
    return {
        "name": name,
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
        "filter_chains": [
            {"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]}
        ],
    }


def _clusters(names: set[str], backend: tuple[str, int]) -> list[dict[str, Any]]:
    host, port = backend
    return [
        {
            "name": n,
            "type": "STATIC",
            "connect_timeout": "1s",
            "load_assignment": {
                "cluster_name": n,
                "endpoints": [
                    {
                        "lb_endpoints": [
                            {"endpoint": {"address": {"socket_address": {"address": host, "port_value": port}}}}
                        ]
                    }
                ],
            },
        }
        for n in sorted(names)
    ]


def _referenced_clusters(route_config: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    for vh in route_config.get("virtual_hosts", []):
        for r in vh.get("routes", []):
            action = r.get("route") or {}
            if "cluster" in action:
                out.add(action["cluster"])
            for c in (action.get("weighted_clusters") or {}).get("clusters", []):
                out.add(c["name"])
    return out


def _port_route_config(generation: Generation) -> dict[str, Any]:
    config = gateway_routes.route_configurations(generation)[gateway_routes.route_config_name(PORT)]
    return json_format.MessageToDict(config, preserving_proto_field_name=True)


def _ask(conn: http.client.HTTPConnection, probe: Any) -> tuple[int, str | None]:
    headers = {"Host": probe.host, **probe.headers}
    conn.request(probe.method, probe.target, headers=headers)
    resp = conn.getresponse()
    resp.read()
    return resp.status, resp.getheader(ROUTE_HEADER)


def _run_batch(workdir: Path, sets: Sequence[RouteSet], backend: tuple[str, int], tally: Tally) -> None:
    listeners, clusters, expected = [], set(), []
    for i, rs in enumerate(sets):
        generation = rs.content().stamp(1)
        assert generation.routes is not None
        config = _port_route_config(generation)
        clusters |= _referenced_clusters(config)
        listeners.append(_listener(f"set{i}", config))
        expected.append(rs.expected(generation.routes))
    bootstrap = {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
        "static_resources": {"listeners": listeners, "clusters": _clusters(clusters, backend)},
    }
    envoy = Envoy(workdir, json.dumps(bootstrap), name="differential").start()
    try:
        for i, rs in enumerate(sets):
            conn = http.client.HTTPConnection("127.0.0.1", envoy.listener_port(f"set{i}"), timeout=10)
            try:
                for probe, entry in zip(rs.probes, expected[i], strict=True):
                    status, route = _ask(conn, probe)
                    chosen, want = _chosen(route), None if entry is None else _entry_id(entry)
                    tally.requests += 1
                    if entry is None:
                        tally.not_found += 1
                    else:
                        tally.hits += 1
                    if chosen == want and (status == 404) == (entry is None):
                        continue
                    tally.disagreements.append(
                        f"set {tally.sets + i}: {probe} → Envoy {status} {route!r}, model {want!r}"
                    )
            finally:
                conn.close()
    finally:
        envoy.stop()
    tally.sets += len(sets)


def test_envoy_chooses_the_rule_the_model_selects(tmp_path_factory: Any) -> None:
    tally = Tally()
    backends = NameBackends.start(tmp_path_factory.mktemp("backend"), names=("ok",))

    # No shrinking: each example is a batch of Envoy runs, and a disagreement names its probe and both answers.
    @settings(
        phases=(Phase.explicit, Phase.generate),
        max_examples=BATCHES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(route_sets(PROBES_PER_SET), min_size=SETS_PER_BATCH, max_size=SETS_PER_BATCH))
    def batch(sets: list[RouteSet]) -> None:
        before = len(tally.disagreements)
        _run_batch(tmp_path_factory.mktemp("batch"), sets, backends.endpoint("ok"), tally)
        assert len(tally.disagreements) == before, "\n".join(tally.disagreements[before:][:20])

    try:
        batch()
    finally:
        backends.envoy.stop()
    report = {
        "route_sets": tally.sets,
        "requests": tally.requests,
        "rules_hit": tally.hits,
        "no_rule_404": tally.not_found,
        "disagreements": len(tally.disagreements),
    }
    print(f"\ndifferential: {report}")
    if os.environ.get("DIFFERENTIAL_REPORT"):
        Path(os.environ["DIFFERENTIAL_REPORT"]).write_text(json.dumps(report, indent=2) + "\n")
    assert tally.sets >= BATCHES * SETS_PER_BATCH and tally.requests >= tally.sets * PROBES_PER_SET
    assert tally.disagreements == []
