"""The alerting rules under the real promtool (Debian's `prometheus` package, installed by hack/test.sh) and the
chart's monitoring objects as helm renders them: `promtool check rules`, `promtool test rules` with a firing and a quiet
case for every alert (tests/prometheus/alerts_test.yaml), a weakened rule caught by those tests, and the chart
shipping the rules file and the dashboard as they are, pointed at the pods and ports that serve the metrics."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.controlplane import ensure_binaries

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts/trafficsplit"
RULES = CHART / "files/prometheus-rules.yaml"
DASHBOARD = CHART / "files/grafana-dashboard.json"
RULE_TESTS = ROOT / "tests/prometheus/alerts_test.yaml"


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool not installed (Debian's prometheus package; hack/test.sh installs it)")
    return path


def alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [r for g in groups for r in g["rules"] if "alert" in r]


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=120)


def test_promtool_checks_the_rules() -> None:
    r = run_promtool("check", "rules", str(RULES))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in r.stdout


def test_promtool_unit_tests_pass_and_cover_every_alert_firing() -> None:
    r = run_promtool("test", "rules", str(RULE_TESTS))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout
    fired = {
        t["alertname"]
        for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for t in case.get("alert_rule_test", [])
        if t.get("exp_alerts")
    }
    assert fired == {a["alert"] for a in alerts()}


def test_a_weakened_threshold_fails_the_unit_tests(tmp_path: Path) -> None:
    """The unit tests can fail: the fail-open alert at 50 % instead of 1 % no longer fires on 9 %."""
    text = RULES.read_text()
    assert text.count("> 0.01\n") == 1
    (tmp_path / "rules.yaml").write_text(text.replace("> 0.01\n", "> 0.5\n"))
    tests = yaml.safe_load(RULE_TESTS.read_text())
    tests["rule_files"] = ["rules.yaml"]
    (tmp_path / "alerts_test.yaml").write_text(yaml.safe_dump(tests))
    r = run_promtool("test", "rules", str(tmp_path / "alerts_test.yaml"))
    assert r.returncode != 0
    assert "TrafficsplitFailOpen" in r.stdout + r.stderr


def test_every_alert_has_the_form_the_end_to_end_test_evaluates() -> None:
    """Each alert compares against a number (the e2e test evaluates it with `bool`), is documented, and says so."""
    doc = (ROOT / "docs/observability.md").read_text()
    for a in alerts():
        assert any(op in a["expr"] for op in (" > ", " == ", " < ")), a["alert"]
        assert f"### {a['alert']}" in doc, f"docs/observability.md has no section for {a['alert']}"
        assert a["labels"]["severity"] in ("info", "warning", "critical")


def render(*values: str) -> list[dict[str, Any]]:
    args = [str(ensure_binaries().helm), "template", "ts", str(CHART), "--kube-version", "1.33.0", "-n", "mon"]
    for v in values:
        args += ["--set", v]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


@pytest.mark.k8s
def test_off_by_default_except_the_scrape_annotations() -> None:
    docs = render()
    assert not by_kind(docs, "PodMonitor") and not by_kind(docs, "PrometheusRule")
    assert not [d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-dashboard")]
    dash = by_kind(render("monitoring.dashboard.enabled=true"), "ConfigMap")
    assert [d["metadata"]["labels"]["grafana_dashboard"] for d in dash if d["metadata"]["name"] == "ts-dashboard"] == [
        "1"
    ]
    for dep in by_kind(docs, "Deployment"):
        pod = dep["spec"]["template"]
        ann = pod["metadata"]["annotations"]
        assert ann["prometheus.io/scrape"] == "true", dep["metadata"]["name"]
        ports = {p["name"]: p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
        assert int(ann["prometheus.io/port"]) == ports["metrics"]
    off = render("monitoring.scrapeAnnotations=false")
    for dep in by_kind(off, "Deployment"):
        assert "prometheus.io/scrape" not in (dep["spec"]["template"]["metadata"].get("annotations") or {})


@pytest.mark.k8s
def test_the_monitoring_objects_ship_the_files_and_select_the_metrics_ports() -> None:
    docs = render(
        "monitoring.podMonitor.enabled=true",
        "monitoring.prometheusRule.enabled=true",
        "monitoring.dashboard.enabled=true",
        "monitoring.prometheusRule.labels.release=kps",
        "monitoring.dashboard.sidecarLabel=dashboards",
        "monitoring.operatorMetricsPort=9200",
    )
    rule = by_kind(docs, "PrometheusRule")[0]
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]
    assert rule["metadata"]["labels"]["release"] == "kps"
    dash = next(d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"] == "ts-dashboard")
    assert dash["metadata"]["labels"]["dashboards"] == "1"
    assert json.loads(dash["data"]["trafficsplit.json"]) == json.loads(DASHBOARD.read_text())
    deployments = {d["metadata"]["labels"]["app.kubernetes.io/component"]: d for d in by_kind(docs, "Deployment")}
    monitors = by_kind(docs, "PodMonitor")
    assert len(monitors) == 2
    for pm in monitors:
        dep = deployments[pm["metadata"]["labels"]["app.kubernetes.io/component"]]
        pod = dep["spec"]["template"]
        assert pm["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        assert pm["spec"]["namespaceSelector"]["matchNames"] == ["mon"]
        names = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
        assert [e["port"] for e in pm["spec"]["podMetricsEndpoints"]] == ["metrics"]
        assert "metrics" in names
    op = deployments["operator"]["spec"]["template"]["spec"]["containers"][0]
    assert "--metrics=0.0.0.0:9200" in op["args"]
    assert {"name": "metrics", "containerPort": 9200, "protocol": "TCP"} in op["ports"]
    ext = next(c for c in deployments["gateway"]["spec"]["template"]["spec"]["containers"] if c["name"] == "extproc")
    assert "--envoy-stats=127.0.0.1:9901" in ext["args"]
