"""`make release`'s fast parts, run for real into a temp dir (hack/release.sh --only python,krew,chart): the wheel
installs offline into a fresh venv and answers `kubectl trafficsplit --version`, the krew launcher runs it, every
checksum SHA256SUMS and the krew manifest quote holds, and the packaged chart lints.

The images and the Argo Rollouts plugin are the slow parts (a Go cross-build, buildah): tests/e2e/test_13_release.py
installs the packaged chart on the local node from the OCI archives. The fresh venv's dependencies come from a
wheelhouse that `pip download` fills, pinned to the versions this venv runs (so pip's cache serves them); the install
itself is `--no-index`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import venv
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


release = load_script(ROOT / "hack" / "release.py", "release")
VERSION = release.version()


def _run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kw)  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("release") / "dist"
    env = {**os.environ, "RELEASE_PYTHON": sys.executable}
    _run(["bash", str(ROOT / "hack/release.sh"), "--dist", str(out), "--only", "python,krew,chart"], env=env, cwd=ROOT)
    return out


@pytest.fixture(scope="module")
def fresh_venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with the release's wheel installed from files alone (`--no-index`)."""
    base = tmp_path_factory.mktemp("fresh")
    # The wheel's dependencies at the versions this venv runs: pip's cache has them, the resolver needs no choice.
    constraints = base / "constraints.txt"
    constraints.write_text(
        "".join(f"{d.metadata['Name']}=={d.version}\n" for d in metadata.distributions() if d.metadata["Name"]).replace(
            f"trafficsplit=={VERSION}\n", ""
        )
    )
    wheel = dist / f"trafficsplit-{VERSION}-py3-none-any.whl"
    wheelhouse = base / "wheelhouse"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run([*pip, "download", "-q", "--only-binary", ":all:", "-d", str(wheelhouse), "-c", str(constraints), str(wheel)])
    (wheelhouse / wheel.name).unlink(missing_ok=True)  # the install below must take the release's file itself
    env_dir = base / "venv"
    # No pip of its own (ensurepip is the slow half of a venv): this venv's pip installs into it (--python).
    venv.create(env_dir, with_pip=False)
    into = [*pip, "--python", str(env_dir / "bin/python"), "install", "-q", "--no-compile"]
    _run([*into, "--no-index", "--find-links", str(wheelhouse), str(wheel)], env={**os.environ, "PIP_FIND_LINKS": ""})
    return env_dir


def test_the_release_holds_the_python_krew_and_chart_artifacts(dist: Path) -> None:
    names = {p.name for p in dist.iterdir()}
    assert names == {
        f"trafficsplit-{VERSION}-py3-none-any.whl",
        f"trafficsplit-{VERSION}.tar.gz",
        f"trafficsplit-{VERSION}.tgz",
        f"kubectl-trafficsplit-v{VERSION}.tar.gz",
        "trafficsplit.yaml",
        "SHA256SUMS",
        "release-notes.md",
    }
    with tarfile.open(dist / f"trafficsplit-{VERSION}.tar.gz") as sdist:
        pkg_info = sdist.extractfile(f"trafficsplit-{VERSION}/PKG-INFO")
        assert pkg_info is not None and f"Version: {VERSION}\n" in pkg_info.read().decode()


def test_every_checksum_holds(dist: Path) -> None:
    # The user's check, with the user's tool, and the release's own (krew manifest, notes).
    out = _run(["sha256sum", "--strict", "-c", "SHA256SUMS"], cwd=dist).stdout
    assert out.count(": OK\n") == len(release.artifacts(dist)) == 5, out
    assert release.verify(dist) == []
    krew = yaml.safe_load((dist / "trafficsplit.yaml").read_text())
    [platform] = krew["spec"]["platforms"]
    assert platform["sha256"] == release.sha256_file(dist / f"kubectl-trafficsplit-v{VERSION}.tar.gz")
    assert platform["uri"].endswith(f"/v{VERSION}/kubectl-trafficsplit-v{VERSION}.tar.gz")


def test_the_notes_say_how_to_install_what_was_built(dist: Path) -> None:
    notes = (dist / "release-notes.md").read_text()
    assert notes.startswith(f"# trafficsplit {VERSION}\n")
    assert f"pip install ./trafficsplit-{VERSION}-py3-none-any.whl" in notes
    assert f"helm install ts ./trafficsplit-{VERSION}.tgz" in notes
    for name, digest in release.read_sums(dist).items():
        assert f"| {name} | " in notes and digest in notes


def test_the_wheel_installs_offline_and_answers_version(fresh_venv: Path, tmp_path: Path) -> None:
    # Outside the repository and without PYTHONPATH, so only the installed copy can answer.
    env = {"PATH": f"{fresh_venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)}
    assert _run(["trafficsplit", "--version"], env=env, cwd=tmp_path).stdout == f"trafficsplit {VERSION}\n"
    kubectl = shutil.which("kubectl")
    if kubectl:  # kubectl finds the plugin on PATH
        out = _run([kubectl, "trafficsplit", "--version"], env=env, cwd=tmp_path).stdout
    else:
        out = _run(["kubectl-trafficsplit", "--version"], env=env, cwd=tmp_path).stdout
    assert out == f"kubectl trafficsplit {VERSION}\n"
    where = _run(["python", "-c", "import trafficsplit.cli, sys; print(trafficsplit.cli.__path__[0])"], env=env)
    assert where.stdout.startswith(str(fresh_venv)), where.stdout


def test_the_krew_launcher_runs_the_installed_wheel(dist: Path, fresh_venv: Path, tmp_path: Path) -> None:
    with tarfile.open(dist / f"kubectl-trafficsplit-v{VERSION}.tar.gz") as tar:
        tar.extractall(tmp_path / "krew", filter="data")
    env = {"PATH": f"{fresh_venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    out = _run([str(tmp_path / "krew/kubectl-trafficsplit"), "--version"], env=env, cwd=tmp_path).stdout
    assert out == f"kubectl trafficsplit {VERSION}\n"


def test_the_packaged_chart_lints(dist: Path, tmp_path: Path) -> None:
    helm = _run(["bash", str(ROOT / "hack/build-controlplane.sh"), "--helm"]).stdout.strip()
    env = {**os.environ, "HELM_CACHE_HOME": str(tmp_path / "c"), "HELM_CONFIG_HOME": str(tmp_path / "g")}
    chart = dist / f"trafficsplit-{VERSION}.tgz"
    _run([helm, "lint", "--strict", str(chart)], env=env)
    shown = yaml.safe_load(_run([helm, "show", "chart", str(chart)], env=env).stdout)
    assert (shown["name"], shown["version"], shown["appVersion"]) == ("trafficsplit", VERSION, VERSION)
