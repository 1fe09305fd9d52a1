"""A Prometheus inside the cluster, as a user without the Prometheus Operator runs one: v2.54.1 with Kubernetes
discovery (hack/build-prometheus.sh; Debian's has none) in an image (hack/build-images.sh), in namespace
``monitoring`` behind the Service ``prometheus:9090`` (the address examples/flagger/ names), allowed to list and
watch pods, scraping with the job docs/flagger.md gives users (read from there, so the docs' job is the one tested)
and the chart's alerting rules loaded. The test process reads its API through the Service's ClusterIP (the local node
routes the Service range on the host, as it does for the gateway)."""

from __future__ import annotations

from typing import Any

import yaml

from tests.e2e.cluster import Cluster, wait_for
from tests.support.prometheus import RULES, PrometheusApi, documented_scrape_configs

NAMESPACE = "monitoring"
NAME = "prometheus"
PORT = 9090
HOSTNAME = f"{NAME}.{NAMESPACE}"  # what examples/flagger/ name: http://prometheus.monitoring:9090
# Every second, so a test reads rates a few seconds after its traffic (a user's would be 15-30 s).
INTERVAL = "1s"


def manifests(image: str) -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/name": NAME}
    meta = {"name": NAME, "namespace": NAMESPACE, "labels": labels}
    config = {
        "global": {"scrape_interval": INTERVAL, "evaluation_interval": INTERVAL},
        "rule_files": ["/etc/prometheus/trafficsplit-rules.yaml"],
        "scrape_configs": documented_scrape_configs(),
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"{NAMESPACE}-{NAME}", "labels": labels},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{NAMESPACE}-{NAME}", "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{NAMESPACE}-{NAME}"},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta,
            "data": {"prometheus.yml": yaml.safe_dump(config), "trafficsplit-rules.yaml": RULES.read_text()},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": NAME,
                        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "fsGroup": 65534},
                        "containers": [
                            {
                                "name": NAME,
                                "image": image,
                                "imagePullPolicy": "Never",
                                "args": [
                                    "--config.file=/etc/prometheus/prometheus.yml",
                                    "--storage.tsdb.path=/prometheus",
                                    f"--web.listen-address=:{PORT}",
                                    "--log.level=warn",
                                ],
                                "ports": [{"name": "http", "containerPort": PORT}],
                                "readinessProbe": {"httpGet": {"path": "/-/ready", "port": "http"}, "periodSeconds": 2},
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": [
                                    {"name": "config", "mountPath": "/etc/prometheus"},
                                    {"name": "data", "mountPath": "/prometheus"},
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "config", "configMap": {"name": NAME}},
                            {"name": "data", "emptyDir": {}},
                        ],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {"selector": labels, "ports": [{"name": "http", "port": PORT, "targetPort": "http"}]},
        },
    ]


def deploy(cluster: Cluster) -> tuple[PrometheusApi, str]:
    """Applies the manifests, waits for the pod to be Ready; returns its API and the Service's ClusterIP."""
    docs = manifests("{}:{}".format(*cluster.images["prometheus"]))
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    cluster.kubectl("-n", NAMESPACE, "rollout", "status", f"deployment/{NAME}", "--timeout=120s", timeout=140)
    ip = cluster.get("service", NAME, "-n", NAMESPACE)["spec"]["clusterIP"]
    api = PrometheusApi(f"http://{ip}:{PORT}")
    wait_for("Prometheus's API through its Service", lambda: _answers(api), timeout=30)
    return api, ip


def _answers(api: PrometheusApi) -> bool:
    try:
        api.api("status/buildinfo")
    except OSError:
        return False
    return True


def remove(cluster: Cluster) -> None:
    cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", "--ignore-not-found", check=False)
    for kind in ("clusterrolebinding", "clusterrole"):
        cluster.kubectl("delete", kind, f"{NAMESPACE}-{NAME}", "--ignore-not-found", check=False)
