"""The images a user can pull agree with the chart that pulls them: the release workflow pushes to the chart's default
repositories with the chart's appVersion as the tag, `make images` / `make kind` build the Dockerfiles that exist and
install with value keys the chart has, and docs/helm.md's private-registry lines name real values.

No Docker here: the scripts run with DRY_RUN=1 (they print the commands they would run), the workflow is read as
YAML (actionlint checks its syntax in hack/lint-chart.sh).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts/trafficsplit"
WORKFLOW = ROOT / ".github/workflows/release.yml"
# Image name -> the chart value holding it.
IMAGE_VALUES = {"operator": "operator.image", "extproc": "gateway.extproc.image", "envoy": "gateway.envoy.image"}


def values() -> dict[str, Any]:
    out: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    return out


def lookup(tree: Mapping[str, Any], dotted: str) -> Any:
    node: Any = tree
    for part in re.split(r"(?<!\\)\.", dotted):
        part = part.replace("\\.", ".")
        assert isinstance(node, Mapping) and part in node, f"{dotted}: no {part!r} in the chart's values"
        node = node[part]
    return node


def workflow() -> dict[Any, Any]:
    doc: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text())
    return doc


def test_release_runs_on_version_tags_only() -> None:
    # PyYAML reads the key `on` as True (YAML 1.1).
    trigger = workflow()[True]
    assert set(trigger) == {"push"} and set(trigger["push"]) == {"tags"}
    assert trigger["push"]["tags"] == ["v[0-9]+.[0-9]+.[0-9]+"]


def test_release_pushes_each_image_multi_arch_to_the_charts_default_repository() -> None:
    wf = workflow()
    registry = wf["env"]["REGISTRY"]
    job = wf["jobs"]["images"]
    matrix = {m["name"]: m["dockerfile"] for m in job["strategy"]["matrix"]["include"]}
    assert set(matrix) == set(IMAGE_VALUES)
    for dockerfile in matrix.values():
        assert (ROOT / dockerfile).is_file(), dockerfile
    build = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("docker/build-push-action"))
    assert set(build["with"]["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert build["with"]["tags"] == "${{ env.REGISTRY }}/${{ matrix.name }}:${{ needs.version.outputs.version }}"
    assert build["with"]["push"] is True
    # The chart pulls $REGISTRY/<name>:<appVersion> with no value set: operator and extproc default there.
    for name in ("operator", "extproc"):
        image = lookup(values(), IMAGE_VALUES[name])
        assert image["repository"] == f"{registry}/{name}" and image["tag"] == "", name
    # The chart is published only after every image, from `make release`'s dist; the GitHub release comes last.
    assert set(wf["jobs"]["chart"]["needs"]) == {"version", "images", "dist"}
    assert set(wf["jobs"]["github-release"]["needs"]) == {"version", "images", "dist", "chart"}
    assert wf["env"]["CHART_REPOSITORY"] == f"oci://{registry}/charts"


def test_release_builds_its_assets_with_make_release() -> None:
    wf = workflow()
    runs = [str(step.get("run", "")) for step in wf["jobs"]["dist"]["steps"]]
    assert any(r.startswith("make release") for r in runs), runs
    upload = next(
        s for s in wf["jobs"]["dist"]["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact")
    )
    assert upload["with"]["path"] == "dist/"
    # The GitHub release is what the krew manifest's uri names: every asset of the tag, checked before upload.
    publish = " ".join(str(s.get("run", "")) for s in wf["jobs"]["github-release"]["steps"])
    assert "sha256sum --strict -c SHA256SUMS" in publish and "gh release create" in publish and "dist/*" in publish


def test_the_published_envoy_is_the_one_the_chart_defaults_to() -> None:
    text = (ROOT / "images/envoy/Dockerfile").read_text()
    default = re.search(r"^ARG ENVOY_IMAGE=(\S+)$", text, flags=re.MULTILINE)
    assert default is not None
    envoy = lookup(values(), "gateway.envoy.image")
    assert default.group(1) == f"{envoy['repository']}:{envoy['tag']}"
    # The chart's Envoy container runs as this user (securityContext.envoyUser).
    uid = values()["securityContext"]["envoyUser"]
    assert f"USER {uid}:{uid}" in text


def dry_run(script: str, **env: str) -> list[list[str]]:
    proc = subprocess.run(
        ["bash", str(ROOT / "hack" / script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DRY_RUN": "1", **env},
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    return [shlex.split(line) for line in proc.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("builder", ["docker", "podman"])
def test_make_images_builds_every_dockerfile_with_the_builder(builder: str) -> None:
    commands = dry_run("images.sh", BUILDER=builder, REGISTRY="registry.example.com/ts", TAG="1.2.3")
    builds = [c for c in commands if c[:2] == [builder, "build"]]
    built = {c[c.index("-t") + 1]: c[c.index("-f") + 1] for c in builds}
    assert built == {
        "registry.example.com/ts/operator:1.2.3": "operator/Dockerfile",
        "registry.example.com/ts/extproc:1.2.3": "extproc/Dockerfile",
        "registry.example.com/ts/envoy:1.2.3": "images/envoy/Dockerfile",
    }
    assert all(c[-1] == "." for c in builds)  # the repository root is the context the Dockerfiles COPY from


def test_make_images_with_buildah_is_the_tests_offline_path() -> None:
    (command,) = dry_run("images.sh", BUILDER="buildah")
    assert "hack/build-images.sh" in command[-2:]


def test_make_kind_loads_the_built_images_and_installs_with_them() -> None:
    commands = dry_run("kind.sh", BUILDER="docker", TAG="dev")
    loaded = [c for c in commands if c[:3] == ["kind", "load", "image-archive"]]
    saved = [c[-1] for c in commands if c[:2] == ["docker", "save"]]
    assert len(loaded) == 3 and sorted(saved) == [f"localhost/trafficsplit/{n}:dev" for n in sorted(IMAGE_VALUES)]
    (helm,) = [c for c in commands if c[:1] == ["helm"]]
    sets = dict(helm[i + 1].split("=", 1) for i, a in enumerate(helm) if a == "--set")
    for name, key in IMAGE_VALUES.items():
        lookup(values(), key)
        assert sets[f"{key}.repository"] == f"localhost/trafficsplit/{name}" and sets[f"{key}.tag"] == "dev"


def test_docs_private_registry_lines_set_real_values_for_all_three_images() -> None:
    text = (ROOT / "docs/helm.md").read_text()
    section = text[text.index("**A private registry.**") :]
    block = section[section.index("```sh") : section.index("```", section.index("```sh") + 5)]
    sets = re.findall(r"--set '?([^'\s]+)'?", block)
    keys = {s.split("=", 1)[0] for s in sets}
    for key in keys:
        lookup(values(), key.split("[", 1)[0])  # a list item's fields are the schema's (helm lint checks them)
    for key in IMAGE_VALUES.values():
        assert {f"{key}.repository", f"{key}.tag"} <= keys, key
    assert "imagePullSecrets[0].name" in keys
