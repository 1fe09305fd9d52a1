"""Flagger drives trafficsplit on the local node, analysing the gateway's own metrics in a real Prometheus inside the
cluster (issues 21 and 30).

Flagger v1.44.0 (hack/build-flagger.sh, its image from hack/build-images.sh) runs in the node with
``-mesh-provider=gatewayapi:v1``, its CRDs and RBAC the module's own files (third_party/flagger/). Prometheus runs in
the cluster as ``prometheus.monitoring:9090`` (tests/e2e/incluster_prometheus.py: upstream's v2.54.1 built from source,
the chart's rules loaded) with the scrape job docs/flagger.md gives users without the Prometheus Operator: it finds the
operator, the chart's gateway and the Gateway's data-plane pods by the chart's scrape annotations, and nothing else of
ours (its active targets are exactly the annotated pods). The Gateway, the workload, the MetricTemplate and the Canary
are examples/flagger/, applied with only the images changed (and, as the local node runs no cluster DNS, a
``hostAliases`` entry in Flagger's pod that resolves ``prometheus.monitoring`` to the Service). Then, with bounded
cookie-less traffic counted at the client:

- a healthy change is promoted step by step (25 %, 50 %, promotion) on the analysis of the canary's success rate from
  ``trafficsplit_envoy_backend_responses_total``, which only the Gateway's data-plane pods export for Flagger's route;
  each step's weight and served share are printed and checked; users who landed on the canary keep Flagger's
  ``sessionAffinity`` cookie and stay on the canary's pods for the whole analysis;
- a canary answering 500s is rolled back by Flagger alone: how many requests reached it and how long it took;
- every dashboard query and every alert expression returns series from this Prometheus (tests/support/prometheus.py,
  the list tests/integration/test_observability.py runs on loopback), and those of the Gateway's data plane are
  printed.

- blue/green with ``analysis.mirror: true`` (examples/flagger/bluegreen-mirror.yaml) and A/B testing on a header with
  ``service.timeout`` (examples/flagger/ab-testing.yaml), applied with podinfo and run side by side on the same
  Gateway while podinfo's failing revision is rolled back (the rollback above): each promoted by its
  analysis (the blue/green one on the copies' success rate, ``trafficsplit_envoy_mirror_responses_total``); no client
  answered by the canary while it got copies, the copies counted; the header's requests on the canary, the others on
  the primary; the timeouts in both rules of Flagger's A/B route.

Only on the local node: Flagger's image and the Prometheus image are built there.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml
from scipy.stats import chisquare

from tests.e2e import incluster_prometheus
from tests.e2e.cluster import REPO_ROOT, Cluster, Gateway, Response, published, wait_for
from tests.e2e.gatewayapi import LISTENER_PORT, accepted_now, dataplane_pod_ips, install_gateway_api, programmed
from tests.e2e.load import parallel
from tests.support.prometheus import PrometheusApi, alert_rules, dashboard_queries, with_bool

pytestmark = [pytest.mark.e2e]

EXAMPLES = REPO_ROOT / "examples" / "flagger"
CRDS = REPO_ROOT / "third_party" / "flagger" / "crds" / "crd.yaml"
RBAC = REPO_ROOT / "third_party" / "flagger" / "rbac" / "account.yaml"
NS = "flagger-demo"
GATEWAY = "edge"
TARGET = "podinfo"
HOST = "podinfo.example.com"
COOKIE = "flagger-cookie"
REPLICAS = 2
STEPS = (25, 50)  # stepWeight 25 up to maxWeight 50, then promotion
SETTLE = 1.0  # seconds after a step is observed before its requests count (the write reaches Envoy meanwhile)
P_MIN = 0.001
BLUE_GREEN, AB = "shadow", "insiders"  # examples/flagger/bluegreen-mirror.yaml and ab-testing.yaml
BG_HOST, AB_HOST = "shadow.example.com", "insiders.example.com"
INSIDER = {"x-canary": "insider"}


@dataclass(frozen=True, kw_only=True)
class Flagged:
    cluster: Cluster
    client: Gateway  # the Gateway's address
    prom: PrometheusApi
    dataplane_pods: tuple[str, ...]  # the Gateway's data-plane pods' names


# The chart's gateway NetworkPolicies (its own gateway's and every provisioned data plane's) admit the namespace
# `monitoring` to the metrics port, as docs/observability.md's install line does.
METRICS_FROM = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": incluster_prometheus.NAMESPACE}}}]


def _annotated_pods(cluster: Cluster) -> dict[str, tuple[str, str]]:
    """The scrape URL → namespace/name of every running pod in the cluster with ``prometheus.io/scrape: "true"``, at
    its annotated port and path: what the documented job must scrape, no more, no less."""
    out = {}
    for p in cluster.get("pods", "-A")["items"]:
        meta, status = p["metadata"], p["status"]
        a = meta.get("annotations", {})
        if a.get("prometheus.io/scrape") == "true" and status.get("phase") == "Running" and status.get("podIP"):
            url = f"http://{status['podIP']}:{a['prometheus.io/port']}{a.get('prometheus.io/path', '/metrics')}"
            out[url] = (meta["namespace"], meta["name"])
    return out


def _scraped(prom: PrometheusApi, cluster: Cluster) -> dict[str, tuple[str, str]] | None:
    """The annotated pods, once Prometheus's active targets are exactly them (by scrape URL, with their namespace and
    pod labels), each up."""
    want = _annotated_pods(cluster)
    active = prom.active_targets()
    got = {t["scrapeUrl"]: (t["labels"].get("namespace"), t["labels"].get("pod")) for t in active}
    return want if got == want and all(t["health"] == "up" for t in active) else None


def _dataplane_pods(cluster: Cluster) -> tuple[str, ...]:
    from trafficsplit.operator.dataplane_names import selector_labels

    selector = ",".join(f"{k}={v}" for k, v in selector_labels(NS, GATEWAY).items())
    pods = cluster.get("pods", "-n", cluster.release_namespace, "-l", selector)["items"]
    return tuple(sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")))


def _example(name: str, cluster: Cluster, prometheus_ip: str = "") -> list[dict[str, Any]]:
    """examples/flagger/NAME as kubectl would apply it, with this cluster's images; Flagger's pod resolves the
    examples' Prometheus host name to ``prometheus_ip`` (the local node has no cluster DNS)."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]
    for d in docs:
        if d["kind"] != "Deployment":
            continue
        if d["metadata"]["name"] == "flagger":
            aliases = [{"ip": prometheus_ip, "hostnames": [incluster_prometheus.HOSTNAME]}]
            d["spec"]["template"]["spec"]["hostAliases"] = aliases
        for c in d["spec"]["template"]["spec"]["containers"]:
            c["image"] = cluster.echo_image() if c["name"] == "echo" else "{}:{}".format(*cluster.images["flagger"])
            c["imagePullPolicy"] = "Never"
    return docs


@pytest.fixture(scope="module")
def flagged(cluster: Cluster) -> Iterator[Flagged]:
    if cluster.containerd_sock is None or "flagger" not in cluster.images:
        pytest.skip(f"{cluster.name}: Flagger's and Prometheus's images are built on the local node only")
    install_s = install_gateway_api(
        cluster, REPLICAS, "--set-json", f"gateway.networkPolicy.metricsFrom={json.dumps(METRICS_FROM)}"
    )
    t0 = time.monotonic()
    cluster.kubectl("apply", "--server-side", "-f", str(CRDS), timeout=120)
    cluster.kubectl("wait", "--for=condition=Established", "crd", "canaries.flagger.app", "metrictemplates.flagger.app")
    podinfo = _example("podinfo.yaml", cluster)
    gateway_docs = [d for d in podinfo if d["kind"] in ("Namespace", "Gateway")]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(gateway_docs))
    try:
        gw = wait_for("Gateway Programmed", lambda: programmed(cluster, NS, GATEWAY), timeout=240, interval=1)
        wait_for("data-plane pods Ready", lambda: dataplane_pod_ips(cluster, NS, GATEWAY, REPLICAS), timeout=120)
        pods = _dataplane_pods(cluster)
        prom, prom_ip = incluster_prometheus.deploy(cluster)
        scraped = wait_for("Prometheus scrapes exactly the annotated pods", lambda: _scraped(prom, cluster), timeout=90)
        assert {(cluster.release_namespace, p) for p in pods} <= set(scraped.values()), (pods, scraped)
        rbac = RBAC.read_text()
        cluster.kubectl("apply", "-f", "-", input=rbac)
        flagger = _example("flagger.yaml", cluster, prom_ip)
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(flagger))
        cluster.kubectl("-n", "default", "rollout", "status", "deployment/flagger", "--timeout=180s", timeout=200)
        # The blue/green and A/B examples with podinfo: Flagger initialises the three Canaries side by side, and the
        # last test finds its two ready.
        others = _example("bluegreen-mirror.yaml", cluster) + _example("ab-testing.yaml", cluster)
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(podinfo + others))
        for name in (TARGET, BLUE_GREEN, AB):
            initialized = functools.partial(lambda n: _canary(cluster, n).get("phase") == "Initialized", name)
            wait_for(f"Canary {name} Initialized", initialized, timeout=240, interval=1)
            accepted = functools.partial(accepted_now, cluster, NS, name, GATEWAY)
            wait_for(f"{name}'s route Accepted", accepted, timeout=60)
        address = gw["status"]["addresses"][0]["value"]
        targets = sorted(f"{ns}/{n}" for ns, n in scraped.values())
        print(
            f"\nchart with gatewayAPI in {install_s:.1f}s; Gateway {NS}/{GATEWAY} at {address}, data plane {pods}; "
            f"Prometheus {incluster_prometheus.HOSTNAME}:{incluster_prometheus.PORT} ({prom.url}), its active "
            f"targets exactly the {len(scraped)} annotated pods, each up: {targets}; Flagger up and its three "
            f"Canaries Initialized {time.monotonic() - t0:.1f}s after the chart"
        )
        client = Gateway(address, LISTENER_PORT)
        yield Flagged(cluster=cluster, client=client, prom=prom, dataplane_pods=pods)
    finally:
        cluster.kubectl("delete", "namespace", NS, "--wait=false", check=False)
        cluster.kubectl("delete", "-f", str(EXAMPLES / "flagger.yaml"), "--ignore-not-found", check=False)
        cluster.kubectl("delete", "-f", str(RBAC), "--ignore-not-found", check=False)
        cluster.kubectl("delete", "-f", str(CRDS), "--ignore-not-found", "--wait=false", check=False)
        incluster_prometheus.remove(cluster)


def _analysis_queries() -> dict[str, str]:
    """The example's MetricTemplates' queries as Flagger renders them for this Canary (metric name → PromQL)."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "podinfo.yaml").read_text()) if d]
    templates = {d["metadata"]["name"]: d["spec"]["query"] for d in docs if d["kind"] == "MetricTemplate"}
    canary = next(d for d in docs if d["kind"] == "Canary")
    out = {}
    for m in canary["spec"]["analysis"]["metrics"]:
        q = templates[m["templateRef"]["name"]]
        for var, value in (("namespace", NS), ("target", TARGET), ("interval", m["interval"])):
            q = q.replace(f"{{{{ {var} }}}}", value)
        out[m["name"]] = q
    return out


def _service_timeout() -> str:
    """The example Canary's `service.timeout` (Flagger copies it into each rule's `timeouts.request`)."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "podinfo.yaml").read_text()) if d]
    timeout: str = next(d for d in docs if d["kind"] == "Canary")["spec"]["service"]["timeout"]
    return timeout


def _iterations(example: str) -> int:
    """The `analysis.iterations` of the Canary in examples/flagger/EXAMPLE."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / example).read_text()) if d]
    n: int = next(d for d in docs if d["kind"] == "Canary")["spec"]["analysis"]["iterations"]
    return n


def _canary(cluster: Cluster, target: str = TARGET) -> dict[str, Any]:
    status: dict[str, Any] = cluster.get("canary", target, "-n", NS).get("status", {})
    return status


def _set_args(cluster: Cluster, *args: str, target: str = TARGET) -> None:
    """A new pod template for the target: Flagger sees a revision and starts an analysis."""
    patch = [{"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": ["-listen=:8080", *args]}]
    cluster.kubectl("-n", NS, "patch", "deployment", target, "--type=json", "-p", json.dumps(patch))


def _on_canary(r: Response, target: str = TARGET) -> bool:
    """Served by the canary's pods (the target Deployment's), not the primary's (`TARGET-primary`)."""
    return r.pod.startswith(f"{target}-") and not r.pod.startswith(f"{target}-primary-")


@dataclass(frozen=True)
class Hit:
    sent: float  # monotonic time the request was sent
    status: int
    canary: bool
    text: str
    phase: str  # the Canary's phase last seen when the request was sent


@dataclass
class Watched:
    """The Canary's (time, phase, canaryWeight) every second, and cookie-less requests from two threads, until
    stopped or ``max_seconds``."""

    cluster: Cluster
    client: Gateway
    max_seconds: float
    states: list[tuple[float, str, int]] = field(default_factory=list)
    most_failed_checks: int = 0
    hits: list[Hit] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._deadline = time.monotonic() + self.max_seconds
        self._threads = [threading.Thread(target=self._watch, daemon=True)] + [
            threading.Thread(target=self._load, daemon=True) for _ in range(2)
        ]
        for t in self._threads:
            t.start()

    def _running(self) -> bool:
        return not self._stop.is_set() and time.monotonic() < self._deadline

    def _watch(self) -> None:
        while self._running():
            try:
                s = _canary(self.cluster)
                self.states.append((time.monotonic(), s.get("phase", ""), int(s.get("canaryWeight", 0))))
                self.most_failed_checks = max(self.most_failed_checks, int(s.get("failedChecks", 0)))
            except AssertionError:
                pass  # a kubectl hiccup: the next second's read counts
            time.sleep(1.0)

    def _load(self) -> None:
        while self._running():
            t = time.monotonic()
            try:
                phase = self.state()[0]
                r = self.client.request(HOST)
                self.hits.append(Hit(t, r.status, _on_canary(r), r.backend, phase))
            except OSError as e:
                self.errors[type(e).__name__] += 1
            time.sleep(0.03)

    def state(self) -> tuple[str, int]:
        return self.states[-1][1:] if self.states else ("", 0)

    def within(self, hit: Hit, phase: str) -> bool:
        """Whether `hit` was sent while the Canary was certainly in `phase`: the reads just before and just after it
        both say so. The phase a hit carries is the last one read, up to a second (and a kubectl call) old, so a
        request sent as a promotion begins would otherwise be counted as Progressing."""
        before = [s for s in self.states if s[0] <= hit.sent]
        after = [s for s in self.states if s[0] > hit.sent]
        return bool(before and after) and before[-1][1] == phase and after[0][1] == phase

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(15)

    def steps(self) -> list[tuple[int, float, float]]:
        """(canaryWeight, first seen, next change) for each weight the Canary went through while Progressing."""
        out: list[tuple[int, float, float]] = []
        for t, phase, w in self.states:
            if out and out[-1][0] == w and out[-1][2] == float("inf"):
                continue
            if out and out[-1][2] == float("inf"):
                out[-1] = (out[-1][0], out[-1][1], t)
            if phase == "Progressing" and w > 0:
                out.append((w, t, float("inf")))
        return out


def test_a_healthy_canary_is_promoted_step_by_step_and_its_users_stay_on_it(flagged: Flagged) -> None:
    cluster, client = flagged.cluster, flagged.client
    assert Counter(client.request(HOST).backend for _ in range(10)) == {"v1": 10}
    watched = Watched(cluster=cluster, client=client, max_seconds=300)
    sticky: dict[str, str] = {}  # user → Flagger's cookie, for users the canary answered first
    analysed: dict[int, dict[str, float | None]] = {}  # weight → the analysis queries' values at that step
    revisits = Counter[str]()  # "canary" / "moved": a sticky user's requests while the analysis runs
    rules: list[dict[str, Any]] = []  # Flagger's route's rules, read at the first step
    t0 = time.monotonic()
    try:
        _set_args(cluster, "-text=v2")
        user = 0
        while time.monotonic() - t0 < 280:
            phase, weight = watched.state()
            if phase in ("Succeeded", "Failed"):
                break
            if phase == "Progressing" and weight > 0:
                if not rules:
                    rules = cluster.get("httproute", TARGET, "-n", NS)["spec"]["rules"]
                # The last read at each step: what the analysis that advanced it saw, give or take a second.
                analysed[weight] = {
                    name: (float(res[0]["value"][1]) if (res := flagged.prom.query(q)) else None)
                    for name, q in _analysis_queries().items()
                }
                # New users arrive; those the canary answers keep its cookie.
                for r in parallel(lambda _: client.request(HOST), range(10)):
                    user += 1
                    value = r.cookie(COOKIE)
                    if _on_canary(r) and value:
                        sticky[f"u{user}"] = f"{COOKIE}={value}"
                for r in parallel(lambda c: client.request(HOST, cookie=c), list(sticky.values())):
                    if watched.state()[0] == "Progressing":  # counted only while the analysis still runs
                        revisits["canary" if _on_canary(r) else "moved"] += 1
            time.sleep(0.5)
    finally:
        watched.stop()
    took = time.monotonic() - t0
    final = _canary(cluster)
    print(f"\nphase {final.get('phase')} {took:.1f}s after the change; states seen: "
          f"{sorted({(p, w) for _, p, w in watched.states})}; most failedChecks {watched.most_failed_checks}; the "
          f"analysis queries read from Prometheus at each step: {analysed}")  # fmt: skip
    assert final.get("phase") == "Succeeded", final
    # `service.timeout`: Flagger wrote it into every rule of its route, and the route was served (Accepted) with it.
    timeouts = [r.get("timeouts") for r in rules]
    print(f"Flagger's route during the analysis: {len(rules)} rules, their timeouts {timeouts}")
    assert rules and timeouts == [{"request": _service_timeout()}] * len(rules), rules
    # The analysis's series: only the Gateway's data-plane pods serve Flagger's route, found by their annotations.
    route = f'split=~"{NS}/{TARGET}[.]rule-[0-9]+"'
    served_by = {
        r["metric"].get("pod")
        for r in flagged.prom.query(f"count by (pod) (trafficsplit_envoy_backend_responses_total{{{route}}})")
    }
    print(
        f"the analysis's series (trafficsplit_envoy_backend_responses_total on Flagger's route) from pods {served_by}"
    )
    assert served_by and served_by <= set(flagged.dataplane_pods), (served_by, flagged.dataplane_pods)
    for values in analysed.values():
        assert values["success-rate"] is None or values["success-rate"] >= 99, analysed
    steps = watched.steps()
    assert [w for w, _, _ in steps] == list(STEPS), steps
    for w, start, end in steps:
        hits = [h for h in watched.hits if start + SETTLE <= h.sent < end - SETTLE and h.status == 200]
        canary = sum(h.canary for h in hits)
        p = chisquare([canary, len(hits) - canary], [len(hits) * w / 100, len(hits) * (100 - w) / 100]).pvalue
        print(f"step canaryWeight {w}: {len(hits)} requests in {end - start:.1f}s, served by the canary "
              f"{canary} ({canary / max(len(hits), 1):.1%}), chi-square p={p:.3f}")  # fmt: skip
        assert len(hits) >= 20, (w, len(hits))
        assert p > P_MIN, (w, canary, len(hits))
    statuses = Counter(h.status for h in watched.hits)
    failed = Counter(
        (h.status, h.text[:60], h.phase if watched.within(h, h.phase) else "between phases")
        for h in watched.hits
        if h.status != 200
    )
    print(f"cookie-less load: {dict(statuses)}, not 200: {dict(failed)}, connection errors {dict(watched.errors)}")
    print(f"sessionAffinity: {len(sticky)} of {user} new users landed on the canary and got {COOKIE}; their "
          f"{sum(revisits.values())} requests during the analysis: {dict(revisits)}")  # fmt: skip
    after = Counter((r.backend, _on_canary(r)) for r in (client.request(HOST) for _ in range(20)))
    print(f"after promotion: {dict(after)} (text, served by the canary's pods)")
    assert not watched.errors, watched.errors
    # While Progressing every request is answered 200; the primary's own rolling update during promotion (the echo
    # backend exits on SIGTERM with no drain) may reset a request in flight: bounded, printed.
    assert not [k for k in failed if k[2] == "Progressing"], failed
    assert sum(failed.values()) <= len(watched.hits) // 200, failed
    assert sticky and revisits["canary"] >= len(sticky), revisits
    assert revisits["moved"] == 0, revisits
    assert after == {("v2", False): 20}, "the primary serves the promoted version"


def test_every_dashboard_query_and_alert_expression_returns_series(flagged: Flagged) -> None:
    """The dashboard's `$split` is a sticky TrafficSplit served by the chart's gateway (its stickiness panels need
    sticky traffic; Flagger's route has none of its own), over the Services Flagger made; 200 cookie sessions of 3
    requests make decisions. Every panel's query and every alert expression (with `bool`, so it keeps every series it
    compares) must return series; the panels Flagger's own route fills are printed."""
    cluster, prom = flagged.cluster, flagged.prom
    name, host = "dash", "dash.example.com"
    split = {
        "apiVersion": "trafficsplit.dev/v1alpha1",
        "kind": "TrafficSplit",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "hosts": [host],
            "backends": [
                {"name": "blue", "service": f"{TARGET}-primary", "port": 80, "weight": 70},
                {"name": "green", "service": TARGET, "port": 80, "weight": 30},
            ],
            "sticky": {"cookie": {"name": "dash-session"}},
        },
    }
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(split))
    wait_for(f"{name} Published", lambda: published(cluster, name, NS), timeout=120)
    gw = cluster.client()
    wait_for(f"{host} routed", lambda: gw.request(host).status == 200, timeout=30)

    def session(_: int) -> int:
        first = gw.request(host)
        value = first.cookie("dash-session")
        rest = [gw.request(host, cookie=f"dash-session={value}") for _ in range(2)] if value else []
        return sum(r.status == 200 for r in [first, *rest])

    ok = sum(parallel(session, range(200)))
    assert ok == 600, ok
    time.sleep(3)  # two scrapes after the traffic: every rate has samples on both sides
    key = f"{NS}/{name}"
    wait_for("decisions scraped", lambda: prom.query(f'sum(trafficsplit_decisions_total{{split="{key}"}})'), timeout=15)
    empty = [(panel, expr) for panel, expr in dashboard_queries(key) if not prom.query(expr)]
    flagger_route = f"{NS}/{TARGET}.rule-0"
    filled = [panel for panel, expr in dashboard_queries(flagger_route) if prom.query(expr)]
    firing = []
    on_dataplane = {}  # alert → its series that watch the Gateway's data plane (a pod of it, or the Gateway by name)
    for rule in alert_rules():
        watched = prom.query(with_bool(rule["expr"]))
        assert watched, f"{rule['alert']} watches no series: {with_bool(rule['expr'])}"
        on_dataplane[rule["alert"]] = [
            r["metric"] for r in watched
            if r["metric"].get("pod") in flagged.dataplane_pods or GATEWAY in r["metric"].get("gateway", "")
        ]  # fmt: skip
        if prom.query(rule["expr"]):
            firing.append(rule["alert"])
    print(f"\nalert series on the Gateway {NS}/{GATEWAY}'s data plane: {on_dataplane}")
    # The operator's fleet alerts watch the Gateway's fleet under its own `gateway` label (operator metrics.py).
    fleet_alerts = ("TrafficsplitPublishLag", "TrafficsplitReplicasBehind", "TrafficsplitNotReadyLoop",
                    "TrafficsplitGenerationRefused")  # fmt: skip
    label = f"Gateway/{NS}/{GATEWAY}"
    unwatched = [a for a in fleet_alerts if not any(m.get("gateway") == label for m in on_dataplane[a])]
    assert not unwatched, (unwatched, on_dataplane)
    # The per-pod fail-open ratio watches each of the Gateway's data-plane pods on its own.
    fail_open_pods = {m["pod"] for m in on_dataplane["TrafficsplitFailOpen"]}
    assert fail_open_pods == set(flagged.dataplane_pods), on_dataplane["TrafficsplitFailOpen"]
    evaluated = [r for g in prom.api("rules")["groups"] for r in g["rules"]]
    print(f"\n{len(dashboard_queries(key))} dashboard queries on {key}: {len(empty)} empty; "
          f"{len(alert_rules())} alert expressions returned series, firing now: {firing}; "
          f"on Flagger's route {flagger_route}: {len(filled)} panels filled")  # fmt: skip
    assert not empty, empty
    assert all(r["health"] == "ok" for r in evaluated), [(r["name"], r.get("lastError")) for r in evaluated]
    cluster.kubectl("delete", "trafficsplit", name, "-n", NS, check=False)


@dataclass(frozen=True)
class Sample:
    sent: float  # monotonic time its batch was sent
    kind: str  # "bg" (the blue/green host), "insider" (the A/B host with the header), "other" (without it)
    status: int
    text: str
    canary: bool  # served by the target's own pods, not its primary's
    phase: str  # the Canary's phase read just before and just after the request, "" when the two differ
    iterations: int  # its status.iterations read just before and just after, -1 when the two differ


def _ask(client: Gateway, kind: str) -> tuple[str, Response]:
    if kind == "bg":
        return kind, client.request(BG_HOST)
    return kind, client.request(AB_HOST, headers=INSIDER if kind == "insider" else None)


def _rolls_back_a_canary_answering_500s(flagged: Flagged) -> None:
    """podinfo's next revision answers 500s: Flagger alone rolls it back. How many requests reached it, how long it
    took; none reaches it after the rollback."""
    cluster, client, prom = flagged.cluster, flagged.client, flagged.prom
    assert _canary(cluster).get("phase") == "Succeeded"
    watched = Watched(cluster=cluster, client=client, max_seconds=240)
    t0 = time.monotonic()
    try:
        _set_args(cluster, "-text=v3", "-status=500")
        wait_for("Canary Failed", lambda: _canary(cluster).get("phase") == "Failed", timeout=220, interval=1)
        failed_at = time.monotonic()
        time.sleep(3)  # requests after the rollback: none may reach the canary
    finally:
        watched.stop()
    to_canary = [h for h in watched.hits if h.canary]
    assert to_canary, "no request reached the failing canary"
    first, last = to_canary[0].sent, to_canary[-1].sent
    statuses = Counter(h.status for h in to_canary)
    weights = sorted({w for _, p, w in watched.states if p == "Progressing"})
    final = _canary(cluster)
    rate = prom.query(f'sum by (code_class) (trafficsplit_envoy_backend_responses_total{{backend="{TARGET}-canary"}})')
    print(f"\n{len(to_canary)} of {len(watched.hits)} requests reached the canary ({dict(statuses)}), at weights "
          f"{weights}; rolled back (phase Failed, failedChecks {final.get('failedChecks')}) "
          f"{failed_at - first:.1f}s after the first request it answered, {failed_at - t0:.1f}s after the change; "
          f"the last request it answered {last - first:.1f}s after the first; Prometheus: "
          f"{ {r['metric']['code_class']: r['value'][1] for r in rate} }")  # fmt: skip
    assert set(statuses) == {500}, statuses
    assert last <= failed_at + SETTLE, "the canary still answered after the rollback"
    assert final.get("canaryWeight", 0) == 0
    after = Counter((r.backend, r.status, _on_canary(r)) for r in (client.request(HOST) for _ in range(20)))
    assert after == {("v2", 200, False): 20}, after


def _promotes_blue_green_with_mirroring_and_ab_testing_with_a_timeout(flagged: Flagged) -> None:
    """Two more of Flagger's strategies on the same Gateway, side by side, unchanged: blue/green with
    `analysis.mirror: true` (every request answered by the primary, a copy to the canary, analysed on the copies'
    success rate: trafficsplit_envoy_mirror_responses_total) and A/B testing with `analysis.match` on a header and
    `service.timeout` (the header's requests reach the canary, the others the primary). Each is promoted by its
    analysis; no client sees a mirrored answer."""
    cluster, client, prom = flagged.cluster, flagged.client, flagged.prom
    # Both Canaries were Initialized by the fixture (applied with podinfo) and have stayed so since.
    assert {n: _canary(cluster, n).get("phase") for n in (BLUE_GREEN, AB)} == {
        BLUE_GREEN: "Initialized",
        AB: "Initialized",
    }
    assert {_ask(client, k)[1].backend for k in ("bg", "insider", "other") for _ in range(3)} == {"v1"}
    for name in (BLUE_GREEN, AB):
        _set_args(cluster, "-text=v2", target=name)
    samples: list[Sample] = []
    routes: dict[str, list[dict[str, Any]]] = {}  # target → its route's rules, read while Progressing
    kinds = ["bg", "insider", "other"] * 4
    t1 = time.monotonic()

    def read() -> dict[str, tuple[str, int]]:
        statuses = {n: _canary(cluster, n) for n in (BLUE_GREEN, AB)}
        return {n: (c.get("phase", ""), int(c.get("iterations", 0))) for n, c in statuses.items()}

    phases = read()
    while time.monotonic() - t1 < 240 and not all(p in ("Succeeded", "Failed") for p, _ in phases.values()):
        for name in (BLUE_GREEN, AB):
            if phases[name][0] == "Progressing" and name not in routes:
                rules = cluster.get("httproute", name, "-n", NS)["spec"]["rules"]
                if name == AB or any(f.get("type") == "RequestMirror" for r in rules for f in r.get("filters", [])):
                    routes[name] = rules
        sent = time.monotonic()
        answers = parallel(lambda k: _ask(client, k), kinds)
        after = read()
        for kind, r in answers:
            target = BLUE_GREEN if kind == "bg" else AB
            (phase, iterations), same = phases[target], phases[target] == after[target]
            samples.append(
                Sample(sent, kind, r.status, r.backend, _on_canary(r, target), phase if same else "",
                       iterations if same else -1)
            )  # fmt: skip
        phases = after
        time.sleep(0.3)
    took = time.monotonic() - t1
    finals = {n: _canary(cluster, n) for n in (BLUE_GREEN, AB)}
    service = f"{NS}/{BLUE_GREEN}-canary"
    mirrored_q = f'sum(max_over_time(trafficsplit_envoy_mirror_responses_total{{service="{service}"}}[10m]))'
    mirrored = int(float(res[0]["value"][1])) if (res := prom.query(mirrored_q)) else 0
    by = Counter((s.kind, s.phase, s.text, s.canary) for s in samples)
    print(f"\nblue/green and A/B: { {n: f.get('phase') for n, f in finals.items()} } {took:.1f}s after the "
          f"change; requests by (host, "
          f"phase, answer, served by the canary's pods): {dict(sorted(by.items()))}; copies the blue/green canary "
          f"answered (Envoy's mirror cluster, from Prometheus): {mirrored}; the routes during the analysis: "
          f"{routes}")  # fmt: skip
    assert {n: f.get("phase") for n, f in finals.items()} == {BLUE_GREEN: "Succeeded", AB: "Succeeded"}, finals
    progressing = [s for s in samples if s.phase == "Progressing"]
    assert not [s for s in progressing if s.status != 200], [s for s in progressing if s.status != 200][:5]
    # Blue/green: Flagger mirrors from its first iteration through its last, then sends all traffic to the canary
    # (still Progressing) and promotes it. While the copies certainly went to the canary (iterations 1 to N - 1 read
    # before and after the request; at N the switch may come at any moment), every answer came from the primary (v1):
    # no client saw a mirrored answer.
    bg = [s for s in progressing if s.kind == "bg" and 1 <= s.iterations < _iterations("bluegreen-mirror.yaml")]
    assert len(bg) >= 20 and all(s.text == "v1" and not s.canary for s in bg), Counter((s.text, s.canary) for s in bg)
    mirror = [f["requestMirror"] for r in routes[BLUE_GREEN] for f in r.get("filters", [])
              if f.get("type") == "RequestMirror"]  # fmt: skip
    assert [m["backendRef"]["name"] for m in mirror] == [f"{BLUE_GREEN}-canary"], routes[BLUE_GREEN]
    to_bg = sum(1 for s in samples if s.kind == "bg")
    print(f"blue/green: {len(bg)} requests certainly while mirrored, answered {dict(Counter(s.text for s in bg))} by "
          f"the primary; {mirrored} copies answered by the canary; {to_bg} requests to its host in all")  # fmt: skip
    # A copy for each request while the filter was on (Envoy counts the canary's answers to them), never more
    # copies than requests.
    assert len(bg) // 2 <= mirrored <= to_bg, (mirrored, len(bg), to_bg)
    # A/B: the header's requests reach the canary (v2) from the first iteration on (once every replica holds that
    # route: SETTLE after the first one did), the others never do.
    insider = [s for s in progressing if s.kind == "insider"]
    first = next((s.sent for s in insider if s.canary), None)
    assert first is not None, Counter((s.text, s.canary) for s in insider)
    settled = [s for s in insider if s.sent >= first + SETTLE]
    assert len(settled) >= 8 and all(s.canary and s.text == "v2" for s in settled), Counter(
        (s.text, s.canary) for s in settled
    )
    assert not [s for s in progressing if s.kind == "other" and (s.canary or s.text != "v1")]
    timeouts = [r.get("timeouts") for r in routes[AB]]
    assert len(timeouts) == 2 and timeouts == [{"request": "5s"}] * 2, routes[AB]
    promoted = Counter((k, r.backend, _on_canary(r, BLUE_GREEN if k == "bg" else AB))
                       for k, r in parallel(lambda k: _ask(client, k), ["bg", "insider", "other"] * 10))  # fmt: skip
    assert promoted == {("bg", "v2", False): 10, ("insider", "v2", False): 10, ("other", "v2", False): 10}, promoted


def test_a_failing_canary_is_rolled_back_while_blue_green_and_ab_canaries_on_its_gateway_are_promoted(
    flagged: Flagged,
) -> None:
    """Three analyses on one Gateway at once, each Flagger's own: podinfo's revision answering 500s is rolled back
    while the blue/green Canary with mirroring and the A/B Canary with a timeout are promoted. Side by side because
    that is how a shared Gateway lives (one team's failing release must not disturb another's), and because each
    analysis is mostly Flagger's interval waits: run one after the other they cost their sum."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        rollback = pool.submit(_rolls_back_a_canary_answering_500s, flagged)
        _promotes_blue_green_with_mirroring_and_ab_testing_with_a_timeout(flagged)
        rollback.result(timeout=300)
