"""Argo Rollouts v1.9.1 drives an HTTPRoute on our Gateway through our own traffic-router plugin (issue 21's "Argo"
must-shows), on the real node, the plugin loaded into a stock controller the way a user adds it (issue 30).

The controller runs from the stock argo-rollouts image (hack/build-images.sh: upstream's controller built from source,
unmodified, in the image upstream's Dockerfile ships; no plugin inside) as examples/argo-rollouts/install.yaml deploys
it. The plugin is the release's file (hack/release.sh --only plugin), served over HTTP by a pod inside the cluster
(standing in for the release's download URL); argo-rollouts-config holds the release notes' entry for the node's
platform with only the URL's host changed: the controller downloads it at start and checks its sha256. The Rollout,
its Services, the Gateway and the HTTPRoute are examples/argo-rollouts/rollout.yaml with only the image swapped for the
echo image (which answers with its ``-text``: v1, v2, v3 tell the versions apart). Then:

- v1 → v2 through setWeight 10 → pause → setHeaderRoute → pause → setWeight 50 → pause → setWeight 100: at each pause
  the served share over 2,000 cookie-less requests to the Gateway's address passes χ²; the header goes to the canary;
  sessions minted at 10 % keep their version at 50 %; with one data-plane replica's Envoy SIGSTOPped while the
  Rollout enters setWeight 50, the Rollout holds at that step with ``status.canary.weights.verified: false`` until the
  replica resumes, then advances; after the promotion the stable Service selects the v2 pods; a bounded background load
  sees no failed request during the whole ramp. It is sent to the replica that is never stopped: a request to a
  stopped Envoy hangs until the kernel's readiness path notices, which is the SIGSTOP, not the ramp.
- v2 → v3, aborted at 10 %: the time until every new request is served by stable again.
- The same Rollout on a TrafficSplit with ``assignment: minimal`` (examples/argo-rollouts/rollout-trafficsplit.yaml,
  served by the chart's gateway): 1,000 sessions minted before the canary starts, revisited at every step, each change
  of version counted. The whole ramp moves each session once, from v1 to v2: the minimum.
- A wrong sha256 in argo-rollouts-config: the restarted controller downloads the file, refuses it and exits before it
  manages anything (a template change of the TrafficSplit Rollout is left untouched), and with the right sum again it
  starts and the Rollout proceeds.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import platform
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml
from scipy.stats import binomtest, chisquare

from tests.e2e.cluster import REPO_ROOT, Cluster, Gateway, published, wait_for
from tests.e2e.gatewayapi import (
    CONTROLLER,
    LISTENER_PORT,
    POD_PORT,
    container_pid,
    dataplane_pod_ips,
    envoy_pid,
    install_gateway_api,
    programmed,
)
from tests.e2e.load import parallel, steady_load
from tests.support.scripts import load_script

pytestmark = [pytest.mark.e2e]

release = load_script(REPO_ROOT / "hack" / "release.py", "release")

INSTALL = REPO_ROOT / "examples" / "argo-rollouts" / "install.yaml"
EXAMPLE = REPO_ROOT / "examples" / "argo-rollouts" / "rollout.yaml"
# The same Rollout on a TrafficSplit with `assignment: minimal`: its namespace, split and Rollout are all "store".
STORE_EXAMPLE = REPO_ROOT / "examples" / "argo-rollouts" / "rollout-trafficsplit.yaml"
STORE = "store"
STORE_HOST = "store.example"
STORE_COOKIE = "ts-store"
ARGO_CRDS = REPO_ROOT / "third_party" / "argo-rollouts" / "crds"
ARGO_NS = "argo-rollouts"
CONTROLLER_PODS = "app.kubernetes.io/name=argo-rollouts"
# Where the controller's process writes the downloaded plugin: ./plugin-bin/<namespace>/<name> of the plugin's name.
PLUGIN_BIN = "home/argo-rollouts/plugin-bin/trafficsplit/trafficsplit"
# The release's file for the node's platform, and the namespace of the pod that serves it.
PLUGIN_FILE = release.PLUGIN_PREFIX + "linux-" + {"x86_64": "amd64", "aarch64": "arm64"}[platform.machine()]
FILES_NS = FILES = "plugin-files"
FILES_PORT = 8080
NS = NAME = "demo"  # the example's namespace, Gateway, HTTPRoute and Rollout
HOST = "demo.example"
COOKIE = "demo-session"
STABLE, CANARY = "demo-stable", "demo-canary"
REQUESTS = 2000
SESSIONS = 1000
P_MIN = 0.001
REPLICAS = 2  # the Gateway's data-plane pods: one is SIGSTOPped while the other serves the load
# Argo asks a NotVerified step again after this long (defaults.GetRolloutVerifyRetryInterval).
VERIFY_RETRY_S = 10.0
# Step indexes of the example's steps.
PAUSE_10, PAUSE_HEADER, SET_50, PAUSE_50 = 1, 3, 4, 5


@dataclass(frozen=True, kw_only=True)
class Argo:
    cluster: Cluster
    address: str  # the Gateway's address
    pods: tuple[str, ...]  # its data-plane pods' IPs
    plugin: dict[str, str]  # the argo-rollouts-config entry the controller runs with (name, location, sha256)


def _released_plugin(out: Path) -> tuple[Path, dict[str, str]]:
    """The plugin as `make release` builds it (its plugin part, for the node's platform only) and the
    argo-rollouts-config entry the release notes print for that file."""
    env = {**os.environ, "RELEASE_PYTHON": sys.executable, "PLUGIN_PLATFORMS": "linux/" + PLUGIN_FILE.rsplit("-", 1)[1]}
    argv = ["bash", str(REPO_ROOT / "hack/release.sh"), "--dist", str(out), "--only", "plugin"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, env=env, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    notes = (out / release.NOTES).read_text()
    blocks = [yaml.safe_load(b.split("```", 1)[0]) for b in notes.split("```yaml\n")[1:]]
    entries = [e for b in blocks for e in yaml.safe_load(b["trafficRouterPlugins"])]
    entry = next(e for e in entries if e["location"].endswith("/" + PLUGIN_FILE))
    assert entry["sha256"] == release.sha256_file(out / PLUGIN_FILE), entry
    return out / PLUGIN_FILE, entry


def _serve(cluster: Cluster, path: Path) -> str:
    """A pod inside the cluster serving `path` over HTTP (Python's http.server in the echo image), as an artifact
    server or the release's download host would; returns the file's URL at the pod's Service."""
    labels = {"app": FILES}
    restricted = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FILES_NS}},
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": FILES, "namespace": FILES_NS, "labels": labels},
            "spec": {
                "automountServiceAccountToken": False,
                "containers": [{
                    "name": "http",
                    "image": cluster.echo_image(),
                    "command": ["python", "-m", "http.server", str(FILES_PORT), "--directory", "/srv"],
                    "ports": [{"containerPort": FILES_PORT}],
                    "readinessProbe": {"tcpSocket": {"port": FILES_PORT}, "periodSeconds": 1},
                    "securityContext": restricted,
                    "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                    "volumeMounts": [{"name": "srv", "mountPath": "/srv"}],
                }],
                "volumes": [{"name": "srv", "emptyDir": {}}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": FILES, "namespace": FILES_NS},
            "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": FILES_PORT}]},
        },
    ]  # fmt: skip
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    cluster.kubectl("-n", FILES_NS, "wait", "--for=condition=Ready", f"pod/{FILES}", "--timeout=120s", timeout=150)
    cluster.kubectl("cp", str(path), f"{FILES_NS}/{FILES}:/srv/{path.name}", timeout=300)
    ip = cluster.get("service", FILES, "-n", FILES_NS)["spec"]["clusterIP"]

    def fetched() -> tuple[int, str] | None:
        """The status and sha256 of what the Service serves, or None while the address refuses connections: a
        new Service's ClusterIP rejects until the node's proxy has programmed its Ready endpoint (CI saw the
        refusal right after the pod's Ready)."""
        conn = http.client.HTTPConnection(ip, 80, timeout=60)
        try:
            conn.request("GET", f"/{path.name}")
            resp = conn.getresponse()
            return resp.status, hashlib.sha256(resp.read()).hexdigest()
        except ConnectionRefusedError:
            return None
        finally:
            conn.close()

    # What the controller will download: the release's bytes.
    status, served = wait_for("the file server's Service to answer", fetched, timeout=60, interval=0.5)
    assert status == 200 and served == release.sha256_file(path), (status, served)
    return f"http://{ip}/{path.name}"


def _install(cluster: Cluster, plugin: dict[str, str]) -> list[dict[str, Any]]:
    """examples/argo-rollouts/install.yaml with the image swapped for the stock one built here and the config's one
    entry replaced by `plugin` (the release notes' entry, or one with a wrong sum); nothing else changed."""
    docs = [d for d in yaml.safe_load_all(INSTALL.read_text()) if d]
    for d in docs:
        if d["kind"] == "Deployment":
            repo, tag = cluster.images["argo-rollouts"]
            d["spec"]["template"]["spec"]["containers"][0]["image"] = f"{repo}:{tag}"
        if d["kind"] == "ConfigMap":
            (shipped,) = yaml.safe_load(d["data"]["trafficRouterPlugins"])
            assert shipped.keys() == plugin.keys() and shipped["name"] == plugin["name"], (shipped, plugin)
            d["data"]["trafficRouterPlugins"] = yaml.safe_dump([plugin], sort_keys=False)
    return docs


def _config(cluster: Cluster, plugin: dict[str, str]) -> None:
    """argo-rollouts-config with `plugin` as its entry (the controller reads it at start only)."""
    (cm,) = [d for d in _install(cluster, plugin) if d["kind"] == "ConfigMap"]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(cm))


def _example(cluster: Cluster, path: Path = EXAMPLE) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for d in docs:
        if d["kind"] == "Rollout":
            d["spec"]["template"]["spec"]["containers"][0]["image"] = cluster.echo_image()
    return docs


def _rollout(cluster: Cluster, name: str = NAME) -> dict[str, Any]:
    """A Rollout of this file's examples: each has a namespace of its name."""
    return cluster.get("rollout", name, "-n", name)


def _healthy(cluster: Cluster, name: str = NAME) -> dict[str, Any] | None:
    ro = _rollout(cluster, name)
    st = ro.get("status", {})
    ok = st.get("phase") == "Healthy" and st.get("stableRS") and st.get("stableRS") == st.get("currentPodHash")
    return ro if ok else None


def _step(ro: dict[str, Any]) -> tuple[int | None, bool | None]:
    """The Rollout's current step index and ``status.canary.weights.verified`` (None before any VerifyWeight)."""
    st = ro.get("status", {})
    return st.get("currentStepIndex"), (st.get("canary", {}).get("weights") or {}).get("verified")


def _paused_at(cluster: Cluster, index: int, name: str = NAME) -> dict[str, Any] | None:
    """The Rollout once it pauses at step ``index``. Argo passes a setWeight step only once VerifyWeight answered
    Verified; ``weights.verified`` itself is not a signal to wait for: v1.9.1 writes it when the weights change and can
    leave a stale ``false`` once they are verified (its status patch skips a change made to the weights it already
    holds)."""
    ro = _rollout(cluster, name)
    ok = _step(ro)[0] == index and ro["status"].get("pauseConditions")
    return ro if ok else None


def _promote(cluster: Cluster, name: str = NAME) -> None:
    """What `kubectl argo rollouts promote` patches at a pause step."""
    cluster.kubectl(
        "patch", "rollout", name, "-n", name, "--subresource=status", "--type=merge",
        "-p", '{"status":{"pauseConditions":null}}',
    )  # fmt: skip


def _route_weights(cluster: Cluster) -> tuple[dict[str, int], int, int | None]:
    """The weighted rule's weights by Service, the route's generation, and the generation our parent is Accepted at."""
    route = cluster.get("httproute", NAME, "-n", NS)
    rule = next(r for r in route["spec"]["rules"] if len(r["backendRefs"]) == 2)
    weights = {b["name"]: int(b.get("weight", 1)) for b in rule["backendRefs"]}
    parent = next(
        (p for p in route.get("status", {}).get("parents", []) if p.get("controllerName") == CONTROLLER), None
    )
    acc = next((c for c in (parent or {}).get("conditions", []) if c.get("type") == "Accepted"), None)
    accepted = int(acc["observedGeneration"]) if acc and acc["status"] == "True" else None
    return weights, int(route["metadata"]["generation"]), accepted


def _controller_logs(cluster: Cluster, *extra: str, pod: str = "deployment/argo-rollouts") -> str:
    return cluster.kubectl("logs", "-n", ARGO_NS, pod, "--tail=-1", *extra, check=False).stdout


def _plugin_downloaded(cluster: Cluster, pod: str = "deployment/argo-rollouts") -> list[str]:
    """The controller's log lines of the plugin's download (upstream's utils/plugin/downloader.go), once complete."""
    lines = [line for line in _controller_logs(cluster, pod=pod).splitlines() if "ownload" in line]
    return lines if any("Download complete" in line for line in lines) else []


def _controller_pods(cluster: Cluster) -> list[dict[str, Any]]:
    pods = cluster.get("pods", "-n", ARGO_NS, "-l", CONTROLLER_PODS)["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def _restart_controller(cluster: Cluster) -> str:
    """The controller's pod deleted (gone before this returns) and the name of the one its ReplicaSet starts instead:
    a fresh start, which reads argo-rollouts-config and downloads the plugin again."""
    old = {p["metadata"]["name"] for p in _controller_pods(cluster)}
    cluster.kubectl("-n", ARGO_NS, "delete", "pod", "-l", CONTROLLER_PODS, "--wait=true", "--timeout=120s", timeout=150)
    pod = wait_for(
        "the controller's new pod",
        lambda: next((p for p in _controller_pods(cluster) if p["metadata"]["name"] not in old), None),
        timeout=60,
    )
    return str(pod["metadata"]["name"])


def _diagnose(cluster: Cluster) -> None:
    """What a failed setup or step needs to be understood: the controller's log (its previous run's too) and the
    Rollout's and the route's state."""
    print("controller log:", _controller_logs(cluster)[-4000:], sep="\n")
    print("controller's previous run:", _controller_logs(cluster, "--previous")[-2000:], sep="\n")
    for kind in ("rollout", "httproute"):
        print(cluster.kubectl("get", kind, NAME, "-n", NS, "-o", "yaml", check=False).stdout[-5000:])


def _served(cluster: Cluster) -> bool:
    """The route's current generation is Accepted by our controller (written once every replica serves it)."""
    _, generation, accepted = _route_weights(cluster)
    return accepted == generation


@pytest.fixture(scope="module")
def argo(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Argo]:
    t0 = time.monotonic()
    try:
        path, entry = _released_plugin(tmp_path_factory.mktemp("release") / "dist")
        released_s = time.monotonic() - t0
        url = _serve(cluster, path)
        # The notes' entry with only the host changed (no download host outside the cluster here).
        prefix = f"{release.DOWNLOAD}/v{release.version()}/"
        assert entry["location"] == prefix + PLUGIN_FILE, entry
        plugin = {**entry, "location": url}
        served_s = time.monotonic() - t0 - released_s
        install_gateway_api(cluster, REPLICAS)
        cluster.kubectl("apply", "--server-side", "-f", str(ARGO_CRDS), timeout=120)
        cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s", timeout=90)
        t1 = time.monotonic()
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(_install(cluster, plugin)))
        cluster.kubectl(
            "-n", ARGO_NS, "wait", "--for=condition=Available", "deployment/argo-rollouts", "--timeout=180s",
            timeout=200,
        )  # fmt: skip
        # Available is only "started" (upstream's Deployment has no readiness probe): wait for the download, the
        # controller's first step at start, so a refused config fails here with the controller's own words.
        wait_for("the controller downloaded our plugin", lambda: _plugin_downloaded(cluster), timeout=120, interval=1)
        controller_s = time.monotonic() - t1
        print(
            f"\nthe release's plugin built in {released_s:.1f}s, served by {url} {served_s:.1f}s later; the stock "
            f"controller downloaded it {controller_s:.1f}s after install.yaml was applied"
        )
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(_example(cluster)))
        gw = wait_for("Gateway demo Programmed", lambda: programmed(cluster, NS, NAME), timeout=240, interval=1)
        pods = wait_for(
            f"{REPLICAS} data-plane pods Ready", lambda: dataplane_pod_ips(cluster, NS, NAME, REPLICAS), timeout=120
        )
        wait_for("Rollout demo Healthy", lambda: _healthy(cluster), timeout=240, interval=1)
        wait_for("HTTPRoute demo Accepted", lambda: _served(cluster), timeout=120)
        print(
            f"example Healthy {time.monotonic() - t1 - controller_s:.1f}s later; Gateway at "
            f"{gw['status']['addresses'][0]['value']}, data-plane pods {pods}"
        )
        address = gw["status"]["addresses"][0]["value"]
        yield Argo(cluster=cluster, address=address, pods=pods, plugin=plugin)
    except Exception:
        _diagnose(cluster)
        raise
    finally:
        # Every deletion at once, not waited for: no later module uses these namespaces or CRDs, their pods stop in
        # the background (a wait measured 53 s of grace periods), and the node goes at the end of the tier.
        cluster.kubectl("delete", "namespace", NS, FILES_NS, "--wait=false", check=False)
        cluster.kubectl("delete", "-f", str(INSTALL), "--wait=false", check=False)
        cluster.kubectl("delete", "-f", str(ARGO_CRDS), "--wait=false", check=False)


@pytest.fixture(autouse=True)
def _diagnose_a_failure(request: pytest.FixtureRequest, argo: Argo) -> Iterator[None]:
    failed = request.session.testsfailed
    yield
    if request.session.testsfailed > failed:
        _diagnose(argo.cluster)


def _count(client: Gateway, n: int = REQUESTS, headers: dict[str, str] | None = None) -> Counter[str]:
    responses = parallel(lambda _: client.request(HOST, headers=headers), range(n))
    statuses = Counter(r.status for r in responses)
    assert statuses == {200: n}, statuses
    return Counter(r.backend for r in responses)


def _share(what: str, counts: Counter[str], canary: str, weight: int) -> None:
    """χ² of the canary's share against its weight, printed."""
    n = sum(counts.values())
    observed = [counts[canary], n - counts[canary]]
    result = chisquare(observed, [n * weight / 100, n * (100 - weight) / 100])
    print(f"{what}: {n} requests {dict(counts)}, expected {canary} {weight}%, chi2={result.statistic:.2f}, "
          f"p={result.pvalue:.3f}")  # fmt: skip
    assert result.pvalue > P_MIN, (counts, result)


@dataclass(frozen=True, kw_only=True)
class Session:
    cookie: str
    version: str


def _new_session(client: Gateway, host: str = HOST, cookie: str = COOKIE) -> Session:
    first = client.request(host)
    value = first.cookie(cookie)
    assert first.status == 200 and value, first
    return Session(cookie=f"{cookie}={value}", version=first.backend)


def _set_text(cluster: Cluster, text: str, name: str = NAME) -> None:
    patch = [{"op": "replace", "path": "/spec/template/spec/containers/0/args/1", "value": f"-text={text}"}]
    cluster.kubectl("patch", "rollout", name, "-n", name, "--type=json", "-p", yaml.safe_dump(patch))


def _wait_paused(cluster: Cluster, index: int, what: str, name: str = NAME) -> float:
    t = time.monotonic()
    wait_for(what, lambda: _paused_at(cluster, index, name), timeout=240, interval=1)
    return time.monotonic() - t


def test_the_stock_controller_downloaded_our_plugin_and_checked_its_sha256(argo: Argo) -> None:
    cluster = argo.cluster
    lines = _plugin_downloaded(cluster)
    print("\n" + "\n".join(lines))
    assert sum(f"Downloading plugin trafficsplit/trafficsplit from: {argo.plugin['location']}" in x for x in lines) == 1
    assert sum("Download complete" in line for line in lines) == 1, lines
    (pod,) = _controller_pods(cluster)
    repo, tag = cluster.images["argo-rollouts"]
    assert pod["spec"]["containers"][0]["image"] == f"{repo}:{tag}"
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0, _controller_logs(cluster, "--previous")[-2000:]
    # The file the controller's process runs: the release's bytes, executable by its user only (downloader.go's 0700).
    written = Path(f"/proc/{container_pid(cluster, pod, 'argo-rollouts')}/root") / PLUGIN_BIN
    mode = written.stat().st_mode & 0o777
    print(f"{written}: sha256 {release.sha256_file(written)}, mode {mode:o}; config's sha256 {argo.plugin['sha256']}")
    assert release.sha256_file(written) == argo.plugin["sha256"] and mode == 0o700
    # The docs' line for a cluster that already runs Argo Rollouts applies exactly the plugin's RBAC.
    rbac = cluster.kubectl("apply", "-f", str(INSTALL), "-l", "trafficsplit.dev/argo-rollouts-plugin=rbac").stdout
    assert sorted(rbac.split()) == sorted([
        "clusterrole.rbac.authorization.k8s.io/argo-rollouts-trafficsplit", "unchanged",
        "clusterrolebinding.rbac.authorization.k8s.io/argo-rollouts-trafficsplit", "unchanged",
    ]), rbac  # fmt: skip


def test_a_rollout_ramps_10_50_100_verified_at_every_replica(argo: Argo) -> None:
    cluster = argo.cluster
    client = Gateway(argo.address, LISTENER_PORT)
    assert _count(client, 200) == {"v1": 200}
    never_stopped = Gateway(argo.pods[1], POD_PORT)
    with steady_load(never_stopped, HOST, workers=1, interval=0.05, max_seconds=900, max_requests=20_000) as load:
        # setWeight 10, pause.
        _set_text(cluster, "v2")
        took = _wait_paused(cluster, PAUSE_10, "paused at 10 % and verified")
        print(f"\nv1 -> v2: paused at setWeight 10, verified, {took:.1f}s after the template change; "
              f"route {_route_weights(cluster)}")  # fmt: skip
        _share("at 10 %", _count(client), "v2", 10)
        sessions = parallel(lambda _: _new_session(client), range(SESSIONS))
        at_10 = Counter(s.version for s in sessions)
        print(f"{SESSIONS} sessions minted at 10 %: {dict(at_10)}")

        # setHeaderRoute, pause: the header reaches the canary, the rest is still at 10 %.
        _promote(cluster)
        took = _wait_paused(cluster, PAUSE_HEADER, "paused after setHeaderRoute")
        # Argo verifies weights, not header routes: wait until every replica serves the route's new rule.
        wait_for("the header route served", lambda: _served(cluster), timeout=60, interval=0.5)
        header = _count(client, 500, {"x-canary": "yes"})
        print(f"setHeaderRoute beta (x-canary: yes) in {took:.1f}s: 500 requests with the header {dict(header)}")
        assert header == {"v2": 500}, header
        _share("at 10 % with the header route in place (no header)", _count(client), "v2", 10)

        # setWeight 50 while one replica's Envoy is stopped: NotVerified holds the step until it resumes.
        stopped = argo.pods[0]
        pid = envoy_pid(cluster, stopped)
        os.kill(pid, signal.SIGSTOP)
        try:
            _promote(cluster)
            t = time.monotonic()
            held = wait_for(
                "setWeight 50 NotVerified",
                lambda: _step(ro := _rollout(cluster)) == (SET_50, False) and ro,
                timeout=60,
            )
            # Two retries' worth: Argo asks again and the step still must not advance while the replica cannot
            # acknowledge.
            samples = []
            while time.monotonic() - t < 2 * VERIFY_RETRY_S:
                samples.append(_step(_rollout(cluster)))
                time.sleep(1)
            hold = time.monotonic() - t
            weights, generation, accepted = _route_weights(cluster)
            print(f"Envoy of {stopped} stopped, promoted: Rollout at step {SET_50} with weights "
                  f"{held['status']['canary']['weights']} for {hold:.1f}s ({len(samples)} samples: "
                  f"{dict(Counter(samples))}); route {weights} at generation {generation}, "
                  f"Accepted at {accepted}")  # fmt: skip
            assert set(samples) == {(SET_50, False)}, Counter(samples)
            assert weights == {STABLE: 50, CANARY: 50} and accepted is not None and accepted < generation
        finally:
            os.kill(pid, signal.SIGCONT)
        t = time.monotonic()
        wait_for("the step advances", lambda: _paused_at(cluster, PAUSE_50), timeout=120, interval=0.5)
        advanced = time.monotonic() - t
        print(f"SIGCONT: paused at 50 %, verified, {advanced:.1f}s later (Argo's retry interval {VERIFY_RETRY_S:.0f}s)")
        # Within one retry: the replica's ACK and the status write, then Argo's next ask (≤ the interval).
        assert advanced < 2 * VERIFY_RETRY_S + 5, advanced
        wait_for(
            f"{REPLICAS} data-plane pods Ready again",
            lambda: dataplane_pod_ips(cluster, NS, NAME, REPLICAS),
            timeout=120,
        )

        _share("at 50 %", _count(client), "v2", 50)
        revisits = parallel(lambda s: client.request(HOST, cookie=s.cookie), sessions)
        pairs = zip(sessions, revisits, strict=True)
        moved = Counter((s.version, r.backend) for s, r in pairs if s.version != r.backend)
        print(f"10 % -> 50 %: {sum(moved.values())} of {SESSIONS} sessions changed version {dict(moved)}")
        assert all(r.status == 200 for r in revisits)
        assert not moved

        # setWeight 100, then the promotion: stable is the new pods.
        _promote(cluster)
        t = time.monotonic()
        ro = wait_for("Rollout Healthy on v2", lambda: _healthy(cluster), timeout=240, interval=1)
        print(f"promoted: Healthy {time.monotonic() - t:.1f}s later, stableRS {ro['status']['stableRS']}, "
              f"route {_route_weights(cluster)}")  # fmt: skip
        # The promotion moves demo-stable's selector to the new pods; the gateway learns the new endpoints from
        # their EndpointSlices, which no route status covers: wait for 50 answers in a row from v2 first.
        t = time.monotonic()
        wait_for("50 answers in a row from v2", lambda: _count(client, 50) == {"v2": 50}, timeout=60, interval=0.5)
        print(f"v2 answered 50 in a row {time.monotonic() - t:.1f}s after Healthy")
        final = _count(client)
        print(f"after the promotion: {dict(final)}")
        assert final == {"v2": REQUESTS}, final
        stable = cluster.get("service", STABLE, "-n", NS)
        assert stable["spec"]["selector"].get("rollouts-pod-template-hash") == ro["status"]["stableRS"]
    print(f"background load through {argo.pods[1]} during the whole ramp: {load.summary()}, versions "
          f"{dict(load.backends)}")  # fmt: skip
    assert load.sent > 100 and load.failed == 0, load.summary()
    assert set(load.backends) == {"v1", "v2"}, load.backends


def test_an_abort_returns_new_traffic_to_stable(argo: Argo) -> None:
    cluster = argo.cluster
    client = Gateway(argo.address, LISTENER_PORT)
    _set_text(cluster, "v3")
    _wait_paused(cluster, PAUSE_10, "v2 -> v3 paused at 10 %")
    _share("v2 -> v3 at 10 %", _count(client), "v3", 10)
    t = time.monotonic()
    cluster.kubectl(
        "patch", "rollout", NAME, "-n", NS, "--subresource=status", "--type=merge", "-p", '{"status":{"abort":true}}'
    )
    wait_for("the route back at 100/0", lambda: _route_weights(cluster)[0] == {STABLE: 100, CANARY: 0}, timeout=60)
    written = time.monotonic() - t

    wait_for("the route served at 100/0", lambda: _served(cluster), timeout=60, interval=0.2)
    took = time.monotonic() - t
    after = _count(client)
    print(f"\nabort: the plugin wrote 100/0 {written:.2f}s after the abort, every replica served it after "
          f"{took:.2f}s; then {dict(after)}")  # fmt: skip
    assert after == {"v2": REQUESTS}, after
    ro = _rollout(cluster)
    print(f"Rollout phase {ro['status'].get('phase')}: {ro['status'].get('message')}")
    assert ro["status"].get("abort") is True


@pytest.fixture(scope="module")
def store(argo: Argo) -> Iterator[Cluster]:
    """The example Rollout on a TrafficSplit (examples/argo-rollouts/rollout-trafficsplit.yaml), Healthy, its split
    published on every replica of the chart's gateway."""
    cluster = argo.cluster
    try:
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(_example(cluster, STORE_EXAMPLE)))
        wait_for("Rollout store Healthy", lambda: _healthy(cluster, STORE), timeout=240, interval=1)
        wait_for("TrafficSplit store published", lambda: published(cluster, STORE, STORE), timeout=120)
        yield cluster
    except Exception:
        print(cluster.kubectl("get", "rollout,trafficsplit", "-n", STORE, "-o", "yaml", check=False).stdout[-6000:])
        raise
    finally:
        cluster.kubectl("delete", "namespace", STORE, "--timeout=180s", check=False, timeout=200)


def test_a_rollout_on_a_minimal_trafficsplit_moves_each_session_once(argo: Argo, store: Cluster) -> None:
    """Sessions minted before the canary starts, revisited at every step of the ramp. The fewest moves a ramp from
    v1 to v2 allows is one per session (each starts on v1 and ends on v2); with `assignment: minimal` that is what
    happens: a step from weight a to b moves (b - a) % of them, from v1 to v2, and the header step moves none."""
    cluster = store
    client = cluster.client()
    sessions = parallel(lambda _: _new_session(client, STORE_HOST, STORE_COOKIE), range(SESSIONS))
    assert Counter(s.version for s in sessions) == {"v1": SESSIONS}

    def revisit() -> list[str]:
        answers = parallel(lambda s: client.request(STORE_HOST, cookie=s.cookie), sessions)
        assert all(r.status == 200 for r in answers), Counter(r.status for r in answers)
        return [r.backend for r in answers]

    steps: dict[str, list[str]] = {"minted at 100/0": [s.version for s in sessions]}
    _set_text(cluster, "v2", STORE)
    _wait_paused(cluster, PAUSE_10, "store paused at 10 % and verified", STORE)
    steps["setWeight 10"] = revisit()
    _promote(cluster, STORE)
    _wait_paused(cluster, PAUSE_HEADER, "store paused after setHeaderRoute", STORE)
    wait_for("the header route served", lambda: published(cluster, STORE, STORE), timeout=60)
    header = Counter(
        r.backend for r in parallel(lambda _: client.request(STORE_HOST, headers={"x-canary": "yes"}), range(200))
    )
    assert header == {"v2": 200}, header
    steps["setHeaderRoute"] = revisit()
    _promote(cluster, STORE)
    _wait_paused(cluster, PAUSE_50, "store paused at 50 % and verified", STORE)
    steps["setWeight 50"] = revisit()
    _promote(cluster, STORE)
    wait_for("Rollout store Healthy on v2", lambda: _healthy(cluster, STORE), timeout=240, interval=1)
    wait_for(
        "50 answers in a row from v2",
        lambda: Counter(client.request(STORE_HOST).backend for _ in range(50)) == {"v2": 50},
        timeout=60,
        interval=0.5,
    )
    steps["promoted"] = revisit()

    names = list(steps)
    moves = Counter[tuple[str, str]]()
    for before, after in pairwise(names):
        moved = Counter((a, b) for a, b in zip(steps[before], steps[after], strict=True) if a != b)
        print(f"{before} -> {after}: {sum(moved.values())} of {SESSIONS} sessions changed version {dict(moved)}")
        moves.update(moved)
    per_session = Counter(sum(a != b for a, b in pairwise(path)) for path in zip(*steps.values(), strict=True))
    print(f"moves per session over the whole ramp: {dict(per_session)} (the minimum: 1 each)")
    assert per_session == {1: SESSIONS}, per_session  # the minimum, and never back to v1
    assert set(moves) == {("v1", "v2")}, moves
    assert steps["setHeaderRoute"] == steps["setWeight 10"]
    for step, weight in (("setWeight 10", 10), ("setWeight 50", 50)):
        on_canary = steps[step].count("v2")
        p = binomtest(on_canary, SESSIONS, weight / 100).pvalue
        print(f"{step}: {on_canary} of {SESSIONS} sessions on v2, expected {weight} %, binomial p={p:.3f}")
        assert p > P_MIN, (step, on_canary)


def test_a_wrong_sha256_is_refused_and_nothing_is_routed(argo: Argo, store: Cluster) -> None:
    """The config's sum for other bytes: the restarted controller downloads the file, refuses it and exits (it never
    runs the file or any controller loop), so a template change of the store Rollout is not acted on: no new
    ReplicaSet, the Rollout's status and the TrafficSplit as they were, all traffic on v2. With the right sum again the
    controller starts and the Rollout proceeds to its first pause (what the hold above would have been without the
    refusal)."""
    cluster = store
    wrong = hashlib.sha256(b"not the released plugin").hexdigest()
    _config(cluster, {**argo.plugin, "sha256": wrong})
    pod = _restart_controller(cluster)
    t = time.monotonic()

    def refused() -> tuple[dict[str, Any], str] | None:
        """The ended run's exit and the log of a run that ended (the current container's, or the previous one's
        while the kubelet restarts it)."""
        st = (cluster.get("pod", pod, "-n", ARGO_NS)["status"].get("containerStatuses") or [{}])[0]
        ended: dict[str, Any] | None = (st.get("state") or {}).get("terminated")
        ended = ended or (st.get("lastState") or {}).get("terminated")
        logs = (_controller_logs(cluster, pod=pod), _controller_logs(cluster, "--previous", pod=pod))
        log = next((x for x in logs if "level=fatal" in x), None)
        return (ended, log) if ended and log else None

    ended, log = wait_for("the controller's refusal", refused, timeout=120, interval=1)
    lines = [line for line in log.splitlines() if "sha256" in line]
    print(f"\nwrong sha256 {wrong}: the container exited {ended['exitCode']} after {time.monotonic() - t:.1f}s; "
          f"its log:\n" + "\n".join(lines))  # fmt: skip
    assert ended["exitCode"] == 1, ended
    assert f"expected sha256: {wrong}, actual sha256: {argo.plugin['sha256']}" in log, log[-3000:]
    assert (
        f"Failed to download plugins: sha256 hash of downloaded plugin ({argo.plugin['location']}) does not match"
        in log
    )
    assert "Download complete" in log, log[-3000:]

    def state() -> tuple[Any, ...]:
        ro = _rollout(cluster, STORE)
        split = cluster.get("trafficsplit", STORE, "-n", STORE)
        sets = cluster.get("replicasets", "-n", STORE)["items"]
        weights = {b["name"]: b["weight"] for b in split["spec"]["backends"]}
        return ro["status"], split["metadata"]["generation"], weights, len(sets)

    before = state()
    _set_text(cluster, "v3", STORE)
    changed = time.monotonic()
    client = cluster.client()
    samples = []
    while time.monotonic() - changed < 20:  # a working controller paused at setWeight 10 about 2 s after the change
        samples.append(state() == before)
        time.sleep(1)
    answers = Counter(client.request(STORE_HOST).backend for _ in range(200))
    restarts = cluster.get("pod", pod, "-n", ARGO_NS)["status"]["containerStatuses"][0]["restartCount"]
    print(f"template changed to v3 with the controller refusing: {samples.count(True)} of {len(samples)} samples "
          f"unchanged (Rollout status, TrafficSplit generation {before[1]} and weights {before[2]}, {before[3]} "
          f"ReplicaSets); 200 requests {dict(answers)}; the container restarted {restarts} times")  # fmt: skip
    assert all(samples) and answers == {"v2": 200}, (samples, answers)

    _config(cluster, argo.plugin)
    pod = _restart_controller(cluster)
    t = time.monotonic()
    wait_for("the download with the right sum", lambda: _plugin_downloaded(cluster, pod=pod), timeout=120, interval=1)
    _wait_paused(cluster, PAUSE_10, "store paused at 10 % with the right sum", STORE)
    weights = state()[2]
    print(f"the right sum again: the controller downloaded the plugin and the Rollout paused at 10 % "
          f"{time.monotonic() - t:.1f}s after the restart, TrafficSplit {weights}")  # fmt: skip
    assert weights == {"stable": 90, "canary": 10}, weights
