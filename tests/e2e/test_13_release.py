"""The release as a user installs it: `make release`'s chart package and image archives (hack/release.sh --only
chart,images), every checksum checked, the OCI archives imported into the node's containerd as they are, and the
packaged chart installed with no image value but Envoy's, so the operator and extproc run from the names the archives
carry (the chart's defaults, ghcr.io/trafficsplit/<name>:<appVersion>). Local node only (kind has no containerd
socket here). Runs after the others: it uninstalls every release first."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cluster import REPO_ROOT, Cluster, uninstall_every_release
from tests.e2e.conftest import PSA_LABEL
from tests.support.scripts import load_script

pytestmark = [pytest.mark.e2e]

release = load_script(REPO_ROOT / "hack" / "release.py", "release")
VERSION = release.version()
NAME, NAMESPACE = "rel", "trafficsplit-release"


@pytest.fixture(scope="module")
def dist(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if cluster.containerd_sock is None:
        pytest.skip(f"{cluster.name}: the archives are imported into the local node's containerd only")
    out = tmp_path_factory.mktemp("release") / "dist"
    # The images part finds the node fixture's images cached (the same sources) and only rewrites them as OCI.
    env = {**os.environ, "RELEASE_PYTHON": sys.executable, "HELM": cluster.helm_bin}
    argv = ["bash", str(REPO_ROOT / "hack/release.sh"), "--dist", str(out), "--only", "chart,images"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, env=env, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    return out


def _ctr(cluster: Cluster, *args: str) -> str:
    assert cluster.containerd_sock is not None
    argv = ["ctr", "--address", str(cluster.containerd_sock), "-n", "k8s.io", *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def installed(cluster: Cluster, dist: Path) -> Iterator[Cluster]:
    for name in ("operator", "extproc", "envoy"):
        archive = dist / f"trafficsplit-{name}-{VERSION}.oci.tar"
        # --base-name: ctr names an OCI archive's image by its index's ref.name only under that prefix.
        _ctr(cluster, "images", "import", "--base-name", f"ghcr.io/trafficsplit/{name}", str(archive))
    uninstall_every_release(cluster)
    if cluster.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0:
        cluster.kubectl("create", "namespace", NAMESPACE)
    cluster.kubectl("label", "namespace", NAMESPACE, f"{PSA_LABEL}=restricted", "--overwrite")
    cluster.helm(
        "install", NAME, str(dist / f"trafficsplit-{VERSION}.tgz"), "-n", NAMESPACE,
        "--set", "gateway.envoy.image.repository=ghcr.io/trafficsplit/envoy",
        "--set", f"gateway.envoy.image.tag={VERSION}",
        "--wait", "--timeout", "6m",
    )  # fmt: skip
    yield cluster
    cluster.helm("uninstall", NAME, "-n", NAMESPACE, "--wait", "--timeout", "3m", check=False)


def test_every_checksum_of_the_release_holds(dist: Path) -> None:
    names = {p.name for p in release.artifacts(dist)}
    assert {f"trafficsplit-{n}-{VERSION}.oci.tar" for n in ("operator", "extproc", "envoy")} <= names
    assert release.verify(dist) == []  # SHA256SUMS, every OCI blob against its index and manifest, the notes
    refs = {img.ref for p in dist.glob("*.oci.tar") for img in release.oci_images(p)}
    assert refs == {f"ghcr.io/trafficsplit/{n}:{VERSION}" for n in ("operator", "extproc", "envoy")}


def test_the_packaged_chart_runs_the_archived_images(installed: Cluster, dist: Path) -> None:
    cluster = installed
    digests = {img.ref: img.digest for p in dist.glob("*.oci.tar") for img in release.oci_images(p)}
    # containerd holds each image under the manifest digest the release quotes (REF TYPE DIGEST … columns).
    listed = dict(line.split()[0:3:2] for line in _ctr(cluster, "images", "ls").splitlines()[1:])
    assert {ref: listed.get(ref) for ref in digests} == digests
    for component in ("operator", "gateway"):
        dep = cluster.get("deployment", f"{NAME}-{component}", "-n", NAMESPACE)
        assert dep["status"].get("readyReplicas") == dep["spec"]["replicas"], (component, dep["status"])
    pods = cluster.get("pods", "-n", NAMESPACE, "-l", f"app.kubernetes.io/instance={NAME}")["items"]
    running = {c["image"] for p in pods if p["status"].get("phase") == "Running" for c in p["spec"]["containers"]}
    assert running == set(digests), running
    status = cluster.helm("status", NAME, "-n", NAMESPACE).stdout
    assert "STATUS: deployed" in status, status
