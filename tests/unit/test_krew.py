"""The krew manifest: krew's Plugin schema, its sha256 held to the reproducible archive, and the launcher it installs
run for real (with the package importable, and without)."""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path
from typing import Any

import yaml

from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
KREW = ROOT / "plugins" / "krew"


build = load_script(KREW / "build.py", "krew_build")

SEMVER = re.compile(r"v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?")


def manifest() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((KREW / "trafficsplit.yaml").read_text())
    return doc


def test_the_manifest_follows_krews_plugin_schema() -> None:
    doc = manifest()
    assert doc["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2" and doc["kind"] == "Plugin"
    assert set(doc) == {"apiVersion", "kind", "metadata", "spec"}
    assert doc["metadata"]["name"] == "trafficsplit" == (KREW / "trafficsplit.yaml").stem  # krew: name = file name
    spec = doc["spec"]
    assert set(spec) <= {"version", "homepage", "shortDescription", "description", "caveats", "platforms"}
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert SEMVER.fullmatch(spec["version"]) and spec["version"] == f"v{version}"
    assert spec["shortDescription"] and len(spec["shortDescription"]) <= 80 and "\n" not in spec["shortDescription"]
    assert spec["homepage"].startswith("https://")
    assert spec["platforms"]
    # The caveats name the wheel of this very release (the package is not on PyPI).
    assert (
        f"/releases/tag/v{version}" in spec["caveats"] and f"trafficsplit-{version}-py3-none-any.whl" in spec["caveats"]
    )
    for platform in spec["platforms"]:
        assert set(platform) == {"selector", "uri", "sha256", "files", "bin"}
        for expr in platform["selector"]["matchExpressions"]:
            assert expr["key"] == "os" and expr["operator"] == "In" and set(expr["values"]) <= {"linux", "darwin"}
        assert platform["uri"].startswith("https://") and platform["uri"].endswith(
            f"/v{version}/{build.archive_name()}"
        )
        assert re.fullmatch(r"[0-9a-f]{64}", platform["sha256"])
        assert platform["bin"] in {Path(f["from"]).name for f in platform["files"]}


def test_the_sha256_is_the_reproducible_archives() -> None:
    data = build.archive()
    assert data == build.archive()  # reproducible: the same bytes every time
    digest = hashlib.sha256(data).hexdigest()
    assert [p["sha256"] for p in manifest()["spec"]["platforms"]] == [digest]
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    platform = manifest()["spec"]["platforms"][0]
    assert {f["from"] for f in platform["files"]} == set(members)
    assert members[platform["bin"]].mode == 0o755
    assert build.main(["--check"]) == 0


def _unpacked(tmp_path: Path) -> Path:
    with tarfile.open(fileobj=io.BytesIO(build.archive())) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / str(manifest()["spec"]["platforms"][0]["bin"])


def test_the_launcher_runs_the_installed_package_as_kubectl_trafficsplit(tmp_path: Path) -> None:
    launcher = _unpacked(tmp_path)
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "PYTHONPATH": ":".join(p for p in sys.path if p),
    }
    done = subprocess.run([str(launcher), "plan", "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: kubectl trafficsplit plan")
    picked = subprocess.run([str(launcher), "pick", "--weights", "a=1", "k"], capture_output=True, env=env, timeout=60)
    assert picked.returncode == 0 and picked.stdout.split()[:2] == [b"k", b"a"], picked


def test_the_launcher_says_what_to_install_when_the_package_is_missing(tmp_path: Path) -> None:
    launcher = _unpacked(tmp_path)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = {"PATH": str(empty), "HOME": os.environ.get("HOME", "/")}
    done = subprocess.run(["/bin/sh", str(launcher), "status"], capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 1 and done.stdout == ""
    assert (
        done.stderr
        == "kubectl trafficsplit: error: the trafficsplit Python package is not installed (pip install the wheel of a"
        " release: https://github.com/trafficsplit/trafficsplit/releases)\n"
    )
