"""A real Prometheus (Debian's `prometheus` binary, which hack/test.sh installs) for the tests, its HTTP API, the
chart's dashboard queries and alert expressions as the tests run them against it, and the documented scrape job for
a Prometheus without the Prometheus Operator.

Run on loopback by tests/integration/test_observability.py (real gateway units and an operator on this machine); in
the local node by tests/e2e/test_11_flagger.py (tests/e2e/incluster_prometheus.py: the same binary in an image, the
documented job finding the pods by their scrape annotations), which reads it through :class:`PrometheusApi`.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.waiting import poll

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "charts/trafficsplit/files/prometheus-rules.yaml"
# The docs that give users without the Prometheus Operator the annotation-driven scrape job: the same job in each.
SCRAPE_JOB_DOCS = tuple(ROOT / "docs" / n for n in ("flagger.md", "helm.md", "observability.md"))
_YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.M | re.S)
DASHBOARD = ROOT / "charts/trafficsplit/files/grafana-dashboard.json"
# A comparison with a number literal (not `=~` or a label matcher's `=`): gets `bool`.
_COMPARISON = re.compile(r"(?<![=!<>~])(==|!=|>=|<=|>|<)(?![=~])\s*(?=-?[0-9])")


def with_bool(expr: str) -> str:
    """`a > 0.01` → `a > bool 0.01`: the alert's expression, keeping every series it compares."""
    out, n = _COMPARISON.subn(lambda m: f"{m.group(1)} bool ", expr)
    assert n >= 1, f"no threshold comparison in {expr!r}"
    return out


def dashboard_queries(split: str) -> list[tuple[str, str]]:
    """(panel / refId, expression) of every dashboard target, with Grafana's `$split` set to ``split`` (NS/NAME, an
    HTTPRoute rule's is NS/ROUTE.rule-N) and `$__rate_interval` to 1m."""
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for panel in dash["panels"]:
        for t in panel["targets"]:
            expr = t["expr"].replace("$split", split).replace("$__rate_interval", "1m")
            assert "$" not in expr, f"an unsubstituted variable in {t['expr']}"
            out.append((f"{panel['title']} / {t['refId']}", expr))
    return out


def alert_rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r]


def documented_scrape_configs(doc: Path = SCRAPE_JOB_DOCS[0]) -> list[dict[str, Any]]:
    """The `scrape_configs` of the one YAML block in ``doc`` that has a `kubernetes_sd_configs` job."""
    blocks = [b for b in _YAML_BLOCK.findall(doc.read_text()) if "kubernetes_sd_configs" in b]
    assert len(blocks) == 1, f"{doc}: {len(blocks)} YAML blocks with kubernetes_sd_configs"
    configs: list[dict[str, Any]] = yaml.safe_load(blocks[0])["scrape_configs"]
    return configs


class PrometheusApi:
    """Prometheus's HTTP API at ``url``."""

    def __init__(self, url: str) -> None:
        self.url = url

    def api(self, path: str, **params: str) -> Any:
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}", timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", (expr, data)
        return list(data["result"])

    def active_targets(self) -> list[dict[str, Any]]:
        return list(self.api("targets", state="active")["activeTargets"])

    def targets_up(self, count: int) -> bool:
        active = self.active_targets()
        return len(active) == count and all(t["health"] == "up" for t in active)


class Prometheus(PrometheusApi):
    """`prometheus` with the chart's rules file, scraping ``targets`` (job → addresses) every second, its API on
    ``host`` at a free port."""

    def __init__(self, workdir: Path, targets: dict[str, list[str]], host: str = "127.0.0.1") -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.skip("prometheus not installed (Debian's prometheus package; hack/test.sh installs it)")
        self.workdir = workdir
        self.host = host
        workdir.mkdir(parents=True, exist_ok=True)
        with socket.socket() as s:  # a free port, handed to prometheus (it does not report one it picked itself)
            s.bind((host, 0))
            self.port = s.getsockname()[1]
        super().__init__(f"http://{host}:{self.port}")
        shutil.copy(RULES, workdir / "rules.yaml")
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": ["rules.yaml"],
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": addrs}]} for job, addrs in targets.items()
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log_path = workdir / "prometheus.log"
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={workdir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address={host}:{self.port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=workdir,
            )
        poll(self._ready, 30, "prometheus ready")

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"prometheus exited {self.proc.returncode}: {self.log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
