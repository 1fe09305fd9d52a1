"""Envoy's per-backend cluster stats through a real Envoy: on by default, and with `backend_cluster_stats=False` (the
chart's gateway.envoy.backendClusterStats, the extproc's --no-backend-cluster-stats) no split cluster has a stat while
its traffic still flows and the gateway's own clusters keep theirs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.dataplane import Dataplane, NameBackends, split_doc
from trafficsplit.core.model.compiled import cluster_name
from trafficsplit.wire.reserved import EXTPROC_CLUSTER

pytestmark = [pytest.mark.envoy]

HOST = "shop.example"
REQUESTS = 20


@pytest.mark.parametrize("stats", [True, False])
def test_backend_cluster_stats_are_on_by_default_and_off_drop_only_the_split_clusters(
    name_backends: NameBackends, tmp_path: Path, stats: bool
) -> None:
    dp = Dataplane.start(tmp_path, name_backends, bootstrap={"backend_cluster_stats": stats})
    try:
        gen, _ = dp.publish([split_doc(HOST, {"stable": 50, "canary": 50})])
        split = gen.split_for(HOST)
        assert split is not None
        clusters = [cluster_name(split.namespace, split.name, b.name) for b in split.backends]
        assert [b.cluster for b in split.backends] == clusters
        extproc_before = dp.envoy.stat(f"cluster.{EXTPROC_CLUSTER}.upstream_rq_total")
        responses = [dp.get(HOST) for _ in range(REQUESTS)]
        assert [r.status for r in responses] == [200] * REQUESTS
        assert {r.backend for r in responses} <= {"stable", "canary"}
        # The split clusters exist either way (2 static + 2 split); only their stats differ.
        assert dp.envoy.stat("cluster_manager.active_clusters") == 2 + len(clusters)
        cluster_stats = dp.envoy.stats("^cluster[.]")
        if stats:
            assert sum(cluster_stats[f"cluster.{c}.upstream_rq_total"] for c in clusters) == REQUESTS
        else:
            assert [k for k in cluster_stats if "/" in k] == []
        # The gateway's own clusters keep theirs: one ext_proc stream per request.
        extproc_rq = dp.envoy.stat(f"cluster.{EXTPROC_CLUSTER}.upstream_rq_total") - extproc_before
        assert extproc_rq >= REQUESTS
    finally:
        dp.stop()
