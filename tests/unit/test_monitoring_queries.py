"""The dashboard's queries and the alerts' expressions cover every data plane, the chart's gateway and each Gateway
the operator provisions, whichever way Prometheus found them: a PodMonitor (`job` is the PodMonitor, one for every
provisioned data plane), the documented annotation job (`job` is that job, one for every pod) or static targets. So
no query selects series by a label the scrape adds rather than the metric, and a query that groups by such a label
keeps each scraped pod apart (`instance`), never one job's pods summed into one series."""

from __future__ import annotations

import re

import pytest

from tests.support.prometheus import alert_rules, dashboard_queries

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
