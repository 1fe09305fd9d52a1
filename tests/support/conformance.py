"""The upstream Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance, built by
hack/build-gateway-api.sh) run against trafficsplit on the local node.

``python -m tests.support.conformance`` (what ``make conformance`` / hack/conformance.sh call) boots the local node
(tests/support/localnode.py), runs :func:`run_suite`, prints the results and tears the node down. The e2e tier's
``tests/e2e/test_8_conformance.py`` calls :func:`run_suite` on its own node with the quick list.

What :func:`run_suite` does on a running cluster, each step bounded:

1. imports the images the suite's manifests name (``registry.k8s.io/gateway-api/echo-basic:*``, built here from the
   cached echo-basic binary; ``registry.k8s.io/coredns/coredns`` stood in by the pause binary, see
   :data:`STAND_INS`): the node pulls nothing;
2. applies the Gateway API CRDs (the experimental channel: ``sessionPersistence`` lives there) from the chart's copy;
3. installs the chart with ``gatewayAPI.enabled=true`` (when the chart has that value) and the node's images;
4. waits for a GatewayClass of our controller to be ``Accepted`` (creates one named ``trafficsplit`` when the chart
   made none, as a user would);
5. (done right after the images, before the chart) checks that a ClusterIP Service answers from the host (the suite
   dials each Gateway's address from here);
6. runs the conformance binary with the GATEWAY-HTTP profile, :data:`SUPPORTED_FEATURES` and :data:`SKIP_TESTS`,
   and reads every test's result from its ``-test.v`` output and the ``ConformanceReport`` it writes.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import ipaddress
import json
import os
import platform
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.cluster import CHART, REPO_ROOT, Cluster
from tests.support.localnode import SERVICE_CIDR

SUITE_VERSION = "v1.6.3"
PROFILE = "GATEWAY-HTTP"
CONTROLLER_NAME = "trafficsplit.dev/gateway-controller"
GATEWAY_CLASS = "trafficsplit"
CRD_DIR = CHART / "gateway-api-crds" / "experimental"
REPORT_DIR = REPO_ROOT / "conformance" / "reports" / SUITE_VERSION / "trafficsplit"
# The extended features trafficsplit claims (issue 20): tests that need any other feature are skipped by the suite
# itself and listed in the report as not supported. Gateway, HTTPRoute and ReferenceGrant are the profile's core.
SUPPORTED_FEATURES = (
    "Gateway",
    "HTTPRoute",
    "ReferenceGrant",
    "HTTPRouteResponseHeaderModification",
    "HTTPRouteQueryParamMatching",
    "HTTPRouteMethodMatching",
    "HTTPRouteHostRewrite",
    "HTTPRoutePathRewrite",
    "HTTPRoutePathRedirect",
    "HTTPRoutePortRedirect",
    "HTTPRouteSchemeRedirect",
    "HTTPRouteBackendRequestHeaderModification",
    "HTTPRoute303RedirectStatusCode",
    "HTTPRoute307RedirectStatusCode",
    "HTTPRoute308RedirectStatusCode",
    "HTTPRouteParentRefPort",
    "HTTPRouteNamedRouteRule",
    "HTTPRouteDestinationPortMatching",
    "GatewayPort8080",
    "GatewayHTTPListenerIsolation",
    "HTTPRouteBackendProtocolWebSocket",
    "HTTPRouteBackendProtocolH2C",
    "HTTPRouteRequestTimeout",
    "HTTPRouteBackendTimeout",
    "HTTPRouteRequestMirror",
    "HTTPRouteRequestMultipleMirrors",
    "HTTPRouteRequestPercentageMirror",
    "HTTPRouteRetry",
    "HTTPRouteRetryConnectionError",  # v1.6.3 has no test of its own: tests/integration/test_gateway_timeouts_envoy.py
    "HTTPRouteRetryBackendTimeout",  # likewise
    "HTTPRouteCORS",
    "GatewayFrontendClientCertificateValidation",  # spec.tls.frontend: a port's CA bundle from a ConfigMap
    "GatewayFrontendClientCertificateValidationInsecureFallback",  # its AllowInsecureFallback mode
    "BackendTLSPolicy",  # TLS to a route's Service port: SNI, a CA bundle from a ConfigMap or the system store
    "BackendTLSPolicySANValidation",  # its subjectAltNames (Hostname, URI) instead of the hostname
    "GatewayBackendClientCertificate",  # spec.tls.backend: the client certificate shown to TLS backends
    "GatewayAddressEmpty",  # spec.addresses without a value: the data plane's Service assigns it
    "GatewayStaticAddresses",  # with a value: the Service's ClusterIP; one the API server refuses, AddressNotUsable
    "ListenerSet",  # listeners another object adds to a Gateway that allows it (core/gatewayapi/listener_sets.py)
)
# GatewayStaticAddresses' two addresses: one the node's API server gives a Service (in its service range, at the low
# end, which the allocator leaves to static addresses) and one it refuses (outside it: TEST-NET-1, RFC 5737).
USABLE_ADDRESS = str(ipaddress.ip_network(SERVICE_CIDR)[250])
UNUSABLE_ADDRESS = "192.0.2.10"
# Tests skipped although their features are claimed, each with its reason (docs/gateway-api.md lists them too).
# Empty: nothing is skipped by hand; a test that fails is reported as failed.
SKIP_TESTS: dict[str, str] = {}
# The quick mode (`make test`'s budget): HTTPRouteWeight and one test of every group of the profile.
QUICK_TESTS = (
    "GatewayClassObservedGenerationBump",  # GatewayClass status
    "GatewayWithAttachedRoutes",  # Gateway and listener status, attachedRoutes
    "HTTPRouteListenerHostnameMatching",  # attaching by listener hostname
    "HTTPRouteMatching",  # path and header matches
    "HTTPRouteWeight",  # the weighted split, cookie-less
    "HTTPRouteInvalidNonExistentBackendRef",  # ResolvedRefs and the 500 share
    "HTTPRouteReferenceGrant",  # cross-namespace backends
    "HTTPRouteRequestHeaderModifier",  # core filter
    "HTTPRouteResponseHeaderModifier",  # extended filter
    "HTTPRouteRedirectPath",  # redirects
    "HTTPRouteRewritePath",  # rewrites
    "HTTPRouteBackendRequestHeaderModifier",  # backendRef-level filters
    "HTTPRouteHTTPSListener",  # TLS termination
)
ECHO_BASIC_TAGS = (
    # Every tag of echo-basic the suite's manifests name (conformance/base/manifests.yaml, conformance/tests/*.yaml).
    "registry.k8s.io/gateway-api/echo-basic:v1.5.1",
    "registry.k8s.io/gateway-api/echo-basic:v1.6.0-dev.2",
    "registry.k8s.io/gateway-api/echo-basic:v1.6.0-dev.3",
)
# Images of the base manifests that back no test of the GATEWAY-HTTP profile but must be Ready before any test runs
# (the suite waits for every pod in its namespaces): an image that only stays up, under the name the manifests use.
STAND_INS = {
    # The UDPRoute tests' DNS server (GATEWAY-UDP profile). The pause binary ignores coredns's `-conf` argument.
    "registry.k8s.io/coredns/coredns:v1.12.2": "pause",
}
RESULT_LINE = re.compile(r"^\s*--- (PASS|FAIL|SKIP): TestConformance/([^/\s]+) \(([\d.]+)s\)")
# The suite keeps five or more Gateways at once (four in its base manifests), each with a provisioned data plane of
# two replicas taking the chart's gateway.* values: at the chart's 250m + 250m CPU requests only one fits this
# 2-core node beside the chart's own gateway (the rest stay Pending: "Insufficient cpu"). Requests reserve, they do
# not limit: the pods get the same CPU either way.
SMALL_REQUESTS = (
    "--set", "gateway.extproc.resources.requests.cpu=10m",
    "--set", "gateway.envoy.resources.requests.cpu=10m",
)  # fmt: skip
INSTALL_TIMEOUT_S = 360
CLASS_TIMEOUT_S = 120
FULL_TIMEOUT_S = 3600
QUICK_TIMEOUT_S = 1200
TIER_TIMEOUT_S = 1200  # the whole profile in the e2e tier (164 s here on an idle node): a hang costs CI at most this


@dataclass(frozen=True, kw_only=True)
class Binaries:
    conformance: Path
    echo_basic: Path


def ensure_binaries() -> Binaries:
    """The conformance binary and echo-basic, built (or found cached) by hack/build-gateway-api.sh."""
    out = subprocess.run(
        ["bash", str(REPO_ROOT / "hack" / "build-gateway-api.sh")],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        timeout=1800,
    ).stdout
    bin_dir = Path(out.strip().splitlines()[-1])
    return Binaries(
        conformance=bin_dir / f"gateway-api-conformance-{SUITE_VERSION}" / "gateway-api-conformance",
        echo_basic=bin_dir / f"echo-basic-{SUITE_VERSION}" / "echo-basic",
    )


# --- images ----------------------------------------------------------------------------------------------------------


def _go_arch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def image_archive(binary: Path, entrypoint: str, user: str, repo_tags: Sequence[str], dest: Path) -> Path:
    """A docker-archive of a one-file image (``binary`` at ``/<entrypoint>``, nothing else: both binaries are static),
    named by every one of ``repo_tags``: what upstream's distroless echo-basic image holds, without a builder."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        info = tarfile.TarInfo(entrypoint)
        info.size = binary.stat().st_size
        info.mode = 0o755
        with binary.open("rb") as f:
            tar.addfile(info, f)
    layer_bytes = layer.getvalue()
    diff_id = hashlib.sha256(layer_bytes).hexdigest()
    config = {
        "architecture": _go_arch(),
        "os": "linux",
        "config": {"Entrypoint": [f"/{entrypoint}"], "User": user, "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_name = f"{hashlib.sha256(config_bytes).hexdigest()}.json"
    manifest = [{"Config": config_name, "RepoTags": list(repo_tags), "Layers": [f"{diff_id}/layer.tar"]}]
    with tarfile.open(dest, mode="w") as tar:
        for name, data in (
            (f"{diff_id}/layer.tar", layer_bytes),
            (config_name, config_bytes),
            ("manifest.json", json.dumps(manifest).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return dest


def import_images(containerd_sock: Path, bins: Binaries, pause: Path, work: Path) -> None:
    """echo-basic under every tag the suite names, and the stand-ins, into the node's containerd (k8s.io)."""
    archives = [image_archive(bins.echo_basic, "echo-basic", "65532:65532", ECHO_BASIC_TAGS, work / "echo-basic.tar")]
    for i, (ref, what) in enumerate(sorted(STAND_INS.items())):
        assert what == "pause", what
        archives.append(image_archive(pause, "pause", "65535:65535", [ref], work / f"stand-in-{i}.tar"))
    for archive in archives:
        proc = subprocess.run(
            ["ctr", "--address", str(containerd_sock), "-n", "k8s.io", "images", "import", str(archive)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"importing {archive.name} failed: {proc.stderr.strip()}")


# --- install ---------------------------------------------------------------------------------------------------------


def chart_has_gateway_api() -> bool:
    values = yaml.safe_load((CHART / "values.yaml").read_text()) or {}
    return "gatewayAPI" in values


def install(cluster: Cluster) -> list[str]:
    """The CRDs, then the chart with Gateway API on. Returns what it noticed that the run's reader should know."""
    notes: list[str] = []
    cluster.kubectl("apply", "--server-side", "-f", str(CRD_DIR), timeout=120)
    cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s", timeout=90)
    gw_values: list[str] = []
    if chart_has_gateway_api():
        gw_values = ["--set", "gatewayAPI.enabled=true", *SMALL_REQUESTS]
    else:
        notes.append("the chart has no gatewayAPI values: installed without them (nothing provisions Gateways)")
    ns = cluster.release_namespace
    if cluster.kubectl("get", "namespace", ns, check=False).returncode != 0:
        cluster.kubectl("create", "namespace", ns)
    cluster.helm(
        "upgrade", "--install", cluster.release, str(CHART), "-n", ns,
        *cluster.image_values(), *cluster.extra_values, *gw_values,
        "--wait", "--timeout", f"{INSTALL_TIMEOUT_S}s",
        timeout=INSTALL_TIMEOUT_S + 60,
    )  # fmt: skip
    return notes


def _our_classes(cluster: Cluster) -> list[dict[str, Any]]:
    items = cluster.get("gatewayclasses")["items"]
    return [c for c in items if c.get("spec", {}).get("controllerName") == CONTROLLER_NAME]


def _accepted(gc: dict[str, Any]) -> bool:
    gen = gc["metadata"].get("generation")
    return any(
        c.get("type") == "Accepted" and c.get("status") == "True" and c.get("observedGeneration") == gen
        for c in gc.get("status", {}).get("conditions", [])
    )


def ensure_gateway_class(cluster: Cluster, timeout: float = CLASS_TIMEOUT_S) -> tuple[str, bool]:
    """(name, accepted): the GatewayClass of our controller (created when none exists), once Accepted or after
    ``timeout`` seconds."""
    classes = _our_classes(cluster)
    if not classes:
        doc = {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": GATEWAY_CLASS},
            "spec": {"controllerName": CONTROLLER_NAME},
        }
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))
    name = classes[0]["metadata"]["name"] if classes else GATEWAY_CLASS
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _accepted(cluster.get("gatewayclass", name)):
            return name, True
        time.sleep(1)
    return name, False


PREFLIGHT_NS = "conformance-preflight"


def clusterip_preflight(cluster: Cluster, timeout: float = 120) -> str:
    """One echo-basic pod behind a ClusterIP Service, answered from the host through kube-proxy (the path the suite
    takes to each Gateway's address). Returns the pod name that answered; raises when nothing does."""
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PREFLIGHT_NS}},
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "echo", "namespace": PREFLIGHT_NS, "labels": {"app": "echo"}},
            "spec": {
                "containers": [
                    {
                        "name": "echo",
                        "image": ECHO_BASIC_TAGS[0],
                        "env": [
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                        ],
                    }
                ]
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "echo", "namespace": PREFLIGHT_NS},
            "spec": {"type": "ClusterIP", "selector": {"app": "echo"}, "ports": [{"port": 8080, "targetPort": 3000}]},
        },
    ]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    try:
        cluster.kubectl(
            "-n", PREFLIGHT_NS, "wait", "--for=condition=Ready", "pod/echo", f"--timeout={int(timeout)}s",
            timeout=timeout + 10,
        )  # fmt: skip
        ip = cluster.get("service", "echo", "-n", PREFLIGHT_NS)["spec"]["clusterIP"]
        deadline = time.monotonic() + 30
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://{ip}:8080/preflight", timeout=3) as resp:
                    body = json.loads(resp.read())
                return str(body.get("pod", ""))
            except Exception as e:  # kube-proxy's rules may lag the endpoints by a sync period
                last = e
                time.sleep(0.5)
        raise RuntimeError(f"ClusterIP {ip}:8080 did not answer from the host: {last!r}")
    finally:
        cluster.kubectl("delete", "namespace", PREFLIGHT_NS, "--wait=false", check=False)


# --- the suite -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SuiteResult:
    """Per test (top-level subtests of TestConformance) PASS / FAIL / SKIP and seconds, from the -test.v output;
    the ConformanceReport as written; the binary's exit code and the log's path."""

    tests: dict[str, tuple[str, float]]
    report: dict[str, Any] | None
    exit_code: int
    timed_out: bool
    log: Path
    seconds: float

    def names(self, outcome: str) -> list[str]:
        return sorted(n for n, (o, _) in self.tests.items() if o == outcome)


def parse_results(output: str) -> dict[str, tuple[str, float]]:
    results: dict[str, tuple[str, float]] = {}
    for line in output.splitlines():
        m = RESULT_LINE.match(line)
        if m:
            results[m.group(2)] = (m.group(1), float(m.group(3)))
    return results


def implementation_version() -> str:
    """The project's version (pyproject.toml): the report's implementation.version and its file name."""
    text = (REPO_ROOT / "pyproject.toml").read_text()
    m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
    if not m:
        raise RuntimeError("no version in pyproject.toml")
    return m.group(1)


def suite_argv(
    binary: Path, *, gateway_class: str, report: Path, tests: Sequence[str] | None, timeout_s: float
) -> list[str]:
    argv = [
        str(binary),
        "-test.v",
        f"-test.timeout={int(timeout_s)}s",
        f"-gateway-class={gateway_class}",
        f"-conformance-profiles={PROFILE}",
        f"-supported-features={','.join(SUPPORTED_FEATURES)}",
        f"-report-output={report}",
        "-organization=trafficsplit",
        "-project=trafficsplit",
        "-url=https://github.com/trafficsplit/trafficsplit",
        f"-version={implementation_version()}",
        "-contact=https://github.com/trafficsplit/trafficsplit/issues/new",
        "-mode=default",
        f"-usable-address={USABLE_ADDRESS}",
        f"-unusable-address={UNUSABLE_ADDRESS}",
    ]
    if SKIP_TESTS:
        argv.append(f"-skip-tests={','.join(sorted(SKIP_TESTS))}")
    if tests:
        # Only these subtests run (one Setup for all); the report then counts only them.
        argv.append(f"-test.run=^TestConformance$/^({'|'.join(tests)})$")
    else:
        # The binary also holds the suite package's own unit tests (TestConformanceOptions_*), which read data files
        # beside its source and fail here: only the suite itself runs.
        argv.append("-test.run=^TestConformance$")
    return argv


def run_conformance(
    cluster: Cluster,
    binary: Path,
    *,
    gateway_class: str,
    report: Path,
    log: Path,
    tests: Sequence[str] | None,
    timeout_s: float,
) -> SuiteResult:
    argv = suite_argv(binary, gateway_class=gateway_class, report=report, tests=tests, timeout_s=timeout_s)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.unlink(missing_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    timed_out = False
    with log.open("w") as out:
        out.write("$ " + " ".join(argv) + "\n")
        out.flush()
        # The binary reads KUBECONFIG (controller-runtime); its own -test.timeout ends it first, the outer bound
        # catches a hang in its cleanup.
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=cluster.env(), cwd=log.parent)
        try:
            code = proc.wait(timeout=timeout_s + 120)
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.kill()
            code = proc.wait()
        finally:
            # Interrupted (SIGTERM, Ctrl-C): the suite must not outlive the node it talks to.
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    output = log.read_text(errors="replace")
    return SuiteResult(
        tests=parse_results(output),
        report=yaml.safe_load(report.read_text()) if report.exists() else None,
        exit_code=code,
        timed_out=timed_out or "panic: test timed out" in output,
        log=log,
        seconds=time.monotonic() - t0,
    )


@dataclass(kw_only=True)
class Run:
    """One harness run: what it measured and found."""

    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    gateway_class: str = ""
    class_accepted: bool = False
    result: SuiteResult | None = None


def run_suite(
    cluster: Cluster,
    *,
    containerd_sock: Path,
    pause: Path,
    work: Path,
    report: Path,
    tests: Sequence[str] | None = None,
    timeout_s: float = FULL_TIMEOUT_S,
    run: Run | None = None,
) -> Run:
    """Images, the ClusterIP check, CRDs, chart, GatewayClass, then the suite (see the module's docstring). Fills
    ``run`` as it goes, so a step that raises leaves the timings of the steps before it."""
    run = run if run is not None else Run()
    bins = ensure_binaries()
    t = time.monotonic()
    print("conformance: importing echo-basic and the stand-ins", flush=True)
    import_images(containerd_sock, bins, pause, work)
    run.timings["images_s"] = time.monotonic() - t
    # Before the chart: the node's own path to a ClusterIP is checked even when the install fails.
    t = time.monotonic()
    pod = clusterip_preflight(cluster)
    run.timings["clusterip_check_s"] = time.monotonic() - t
    run.notes.append(f"a ClusterIP Service answered from the host through kube-proxy (pod {pod})")
    t = time.monotonic()
    print("conformance: installing the Gateway API CRDs and the chart", flush=True)
    run.notes += install(cluster)
    run.timings["install_s"] = time.monotonic() - t
    t = time.monotonic()
    run.gateway_class, run.class_accepted = ensure_gateway_class(cluster)
    run.timings["gateway_class_s"] = time.monotonic() - t
    if not run.class_accepted:
        run.notes.append(f"GatewayClass {run.gateway_class} not Accepted after {CLASS_TIMEOUT_S}s (run anyway)")
    print(f"conformance: running the suite (log: {work / 'conformance.log'})", flush=True)
    run.result = run_conformance(
        cluster,
        bins.conformance,
        gateway_class=run.gateway_class,
        report=report,
        log=work / "conformance.log",
        tests=tests,
        timeout_s=timeout_s,
    )
    run.timings["suite_s"] = run.result.seconds
    return run


SUITE_ERROR = re.compile(r"^\s*Messages:\s*(.+)$")


def suite_errors(log: Path, limit: int = 5) -> list[str]:
    """The first ``limit`` failure messages (testify's ``Messages:`` lines) of the suite's log."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return []
    return [m.group(1).strip() for m in map(SUITE_ERROR.match, text.splitlines()) if m][:limit]


def report_name(channel: str) -> str:
    """`<API channel>-<implementation version>-<mode>-report.yaml`, the upstream reports/ README's pattern."""
    return f"{channel}-{implementation_version()}-default-report.yaml"


def summary(run: Run) -> str:
    lines = [f"GatewayClass {run.gateway_class}: {'Accepted' if run.class_accepted else 'NOT Accepted'}"]
    lines += [f"note: {n}" for n in run.notes]
    res = run.result
    if res is not None:
        for name, (outcome, secs) in sorted(res.tests.items()):
            reason = f"  ({SKIP_TESTS[name]})" if name in SKIP_TESTS else ""
            lines.append(f"  {outcome:4} {name} {secs:.1f}s{reason}")
        lines.append(
            f"passed {len(res.names('PASS'))}, failed {len(res.names('FAIL'))}, skipped {len(res.names('SKIP'))}"
            f" (exit {res.exit_code}{', TIMED OUT' if res.timed_out else ''}; log {res.log})"
        )
        # `profiles: null` when the suite's setup failed before any test: its error messages say why.
        lines += [f"suite error: {m}" for m in suite_errors(res.log)]
        for profile in (res.report or {}).get("profiles") or []:
            for part in ("core", "extended"):
                p = profile.get(part) or {}
                lines.append(
                    f"report {profile.get('name')} {part}: {p.get('result')} {p.get('statistics')}"
                    + (f" failed={p['failedTests']}" if p.get("failedTests") else "")
                )
        if res.report is None:
            lines.append("no ConformanceReport written (see the log)")
    lines.append("timings: " + ", ".join(f"{k} {v:.1f}" for k, v in run.timings.items()))
    return "\n".join(lines)


def failed(run: Run) -> bool:
    res = run.result
    return res is None or res.report is None or res.exit_code != 0 or bool(res.names("FAIL"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.conformance", description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="HTTPRouteWeight and one test of every group")
    mode.add_argument("--tests", help="comma-separated test names (ShortName) to run instead of the whole profile")
    parser.add_argument(
        "--keep-logs", action="store_true", help="copy the node's and the suite's logs to e2e-artifacts"
    )
    args = parser.parse_args(argv)
    # Progress lines reach a CI log as they happen, not when the buffer fills.
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    tests: Sequence[str] | None = QUICK_TESTS if args.quick else (args.tests.split(",") if args.tests else None)

    from tests.support.localnode import local_node

    t0 = time.monotonic()
    run = Run()
    artifacts = Path(os.environ.get("E2E_ARTIFACTS") or REPO_ROOT / "e2e-artifacts") / "conformance"
    with tempfile.TemporaryDirectory(prefix="trafficsplit-conformance-") as tmp:
        work = Path(tmp)
        report = work / "report.yaml"
        with local_node(keep_logs=lambda: args.keep_logs or failed(run)) as node:
            cluster = Cluster(
                name="local node",
                kubeconfig=node.kubeconfig,
                helm_bin=str(node.cp.helm_bin),
                kubectl_bin=str(node.cp.kubectl_bin),
                images={n: (node.images.repository(n), node.images.tag) for n in ("operator", "extproc", "envoy")},
                helm_home=node.work / "helm",
            )
            booted = time.monotonic() - t0
            print(f"conformance: local node Ready in {node.started_seconds:.1f}s ({booted:.1f}s with builds)")
            run.timings.update(node_boot_s=node.started_seconds, node_with_builds_s=booted)
            try:
                run_suite(
                    cluster,
                    containerd_sock=node.containerd_sock,
                    pause=pause_binary(),
                    work=work,
                    report=report,
                    tests=tests,
                    timeout_s=QUICK_TIMEOUT_S if tests else FULL_TIMEOUT_S,
                    run=run,
                )
            except (AssertionError, RuntimeError, subprocess.SubprocessError) as e:
                # A step before the suite failed (install, GatewayClass, ClusterIP): say which, keep the logs.
                run.notes.append(f"harness step failed: {str(e).strip()[:2000]}")
        artifacts.mkdir(parents=True, exist_ok=True)
        if run.result is not None:
            (artifacts / "conformance.log").write_text(run.result.log.read_text(errors="replace"))
        if report.exists():
            raw = report.read_text()
            (artifacts / "report.yaml").write_text(raw)
            channel = (yaml.safe_load(raw) or {}).get("gatewayAPIChannel", "experimental")
            if tests is None:
                # Only a whole-profile run is a report to submit; a partial one stays in the artifacts.
                REPORT_DIR.mkdir(parents=True, exist_ok=True)
                dest = REPORT_DIR / report_name(channel)
                dest.write_text(raw)
                print(f"conformance: report written to {dest.relative_to(REPO_ROOT)}")
    if run.result is not None:
        run.result = dataclasses.replace(run.result, log=artifacts / "conformance.log")
    run.timings["total_s"] = time.monotonic() - t0
    (artifacts / "timings.json").write_text(json.dumps(run.timings, indent=1) + "\n")
    print(summary(run))
    print(f"conformance: total {run.timings['total_s']:.1f}s (timings in {artifacts / 'timings.json'})")
    return 1 if failed(run) else 0


def pause_binary() -> Path:
    """The pause binary hack/build-node.sh built (cached): the stand-ins' only file."""
    from tests.support.localnode import ensure_node_binaries

    return ensure_node_binaries().pause


def log_tail(path: Path, lines: int = 80) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


if __name__ == "__main__":
    sys.exit(main())
