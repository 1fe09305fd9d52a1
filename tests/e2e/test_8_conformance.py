"""The upstream Gateway API conformance suite's whole GATEWAY-HTTP profile on the tier's node, run by the suite's own
binary against the chart installed with Gateway API on (tests/support/conformance.py; `make conformance` is the same
run outside the tier and writes the committed report; this one keeps its report in the test's temporary directory).

Runs last: every release left by the earlier tests (test_7 keeps the README's) is uninstalled first, so one operator
answers our GatewayClass; then it installs its own, with ``gatewayAPI.enabled``. A conformance test that fails, a core
test that does not pass (or is skipped), an extended test that fails, or a claimed feature the report does not list
as supported fails this test, naming them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.cluster import Cluster, uninstall_every_release
from tests.support import conformance

pytestmark = pytest.mark.e2e


def test_conformance_whole_profile(cluster: Cluster, tmp_path: Path) -> None:
    if cluster.containerd_sock is None:
        pytest.skip(f"{cluster.name}: the conformance images are imported into the local node's containerd only")
    uninstall_every_release(cluster)
    run = conformance.run_suite(
        cluster,
        containerd_sock=cluster.containerd_sock,
        pause=conformance.pause_binary(),
        work=tmp_path,
        report=tmp_path / "report.yaml",
        timeout_s=conformance.TIER_TIMEOUT_S,
    )
    print("\n" + conformance.summary(run))
    cluster.timings.update({f"conformance_{k}": v for k, v in run.timings.items()})
    res = run.result
    assert res is not None
    assert res.report is not None, f"the suite wrote no report; log: {res.log}\n{conformance.log_tail(res.log)}"
    failed = res.names("FAIL")
    (profile,) = [p for p in res.report["profiles"] if p["name"] == "GATEWAY-HTTP"]
    core, extended = profile["core"], profile["extended"]
    assert not failed and core["result"] == "success" and extended["result"] == "success", (
        f"failed: {failed}\n{conformance.summary(run)}\n{conformance.log_tail(res.log)}"
    )
    assert core["statistics"]["Failed"] == core["statistics"]["Skipped"] == 0, core["statistics"]
    claimed = set(conformance.SUPPORTED_FEATURES) - {"Gateway", "HTTPRoute", "ReferenceGrant"}
    assert claimed <= set(extended.get("supportedFeatures") or ()), extended.get("supportedFeatures")
    assert extended["statistics"]["Failed"] == 0, extended["statistics"]
    assert res.exit_code == 0 and not res.timed_out, conformance.log_tail(res.log)
