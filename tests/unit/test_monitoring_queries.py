"""The dashboard's queries and the alerts' expressions cover every data plane, the chart's gateway and each Gateway
the operator provisions, whichever way Prometheus found them: a PodMonitor (`job` is the PodMonitor, one for every
provisioned data plane), the documented annotation job (`job` is that job, one for every pod) or static targets. So
no query selects series by a label the scrape adds rather than the metric, and a query that groups by such a label
keeps each scraped pod apart (`instance`), never one job's pods summed into one series; and the scrape job the docs
give users without the Prometheus Operator is the same in each doc and keeps only the annotated pods."""

from __future__ import annotations

import re

import pytest

from tests.support.prometheus import SCRAPE_JOB_DOCS, alert_rules, dashboard_queries, documented_scrape_configs

# Labels a scrape attaches (PodMonitor, the documented job, static targets), not the metrics themselves.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "container", "endpoint", "service"}
_MATCHERS = re.compile(r"\{([^}]*)\}")
_MATCHER_NAME = re.compile(r"(\w+)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")


def _expressions() -> list[tuple[str, str]]:
    alerts = [(r["alert"], str(r["expr"])) for r in alert_rules()]
    return dashboard_queries("ns/split") + alerts


def selected_target_labels(expr: str) -> set[str]:
    names = {n for m in _MATCHERS.findall(expr) for n in _MATCHER_NAME.findall(m)}
    return names & TARGET_LABELS


def groupings_summing_pods(expr: str) -> list[set[str]]:
    """Each grouping that names a scrape's label but not `instance`: the pods of one job summed together."""
    groups = [{g.strip() for g in m.split(",") if g.strip()} for m in _GROUPING.findall(expr)]
    return [g for g in groups if g & TARGET_LABELS and "instance" not in g]


def test_the_checks_see_what_they_look_for() -> None:
    assert selected_target_labels('sum(rate(x{job="gw", split="a"}[1m]))') == {"job"}
    assert groupings_summing_pods("sum by (job) (x) / sum by (job, instance) (y)") == [{"job"}]
    assert groupings_summing_pods("sum by (split, backend) (x)") == []


@pytest.mark.parametrize(("name", "expr"), _expressions(), ids=[n for n, _ in _expressions()])
def test_no_query_selects_or_sums_data_planes_by_how_they_were_scraped(name: str, expr: str) -> None:
    assert not selected_target_labels(expr), expr
    assert not groupings_summing_pods(expr), expr


def test_the_docs_give_one_scrape_job_that_keeps_only_the_annotated_pods() -> None:
    jobs = [documented_scrape_configs(doc) for doc in SCRAPE_JOB_DOCS]
    assert all(j == jobs[0] for j in jobs), [str(d) for d in SCRAPE_JOB_DOCS]
    (job,) = jobs[0]
    assert job["kubernetes_sd_configs"] == [{"role": "pod"}]
    relabel = job["relabel_configs"]
    keep = relabel[0]
    assert keep["action"] == "keep" and keep["regex"] == "true", keep
    assert keep["source_labels"] == ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"]
    port = next(r for r in relabel if r.get("target_label") == "__address__")
    assert port["source_labels"][1] == "__meta_kubernetes_pod_annotation_prometheus_io_port"
    assert re.fullmatch(port["regex"], "10.244.0.7:8080;9003")
    assert re.sub(port["regex"], port["replacement"].replace("$", "\\"), "10.244.0.7:8080;9003") == "10.244.0.7:9003"
    path = next(r for r in relabel if r.get("target_label") == "__metrics_path__")
    assert path["source_labels"] == ["__meta_kubernetes_pod_annotation_prometheus_io_path"]
    assert {r.get("target_label") for r in relabel} >= {"namespace", "pod"}
