"""The Argo Rollouts and Flagger CRDs in third_party/ are the pinned modules' own files (never retyped), and the
plugin's module pins the same Argo Rollouts version as the controller build.

hack/build-argo-rollouts.sh and hack/build-flagger.sh copy them from the modules (`go mod download`); the byte
comparison runs when the module is in the Go module cache (the scripts put it there) and is skipped, saying so, when
it is not. The other checks read only the committed files.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.unit.test_gateway_api_crds import module_cache

ROOT = Path(__file__).resolve().parents[2]

# name → (script, its version variable, module path, the CRDs' folder in the module, the committed copy)
PINS = {
    "argo-rollouts": (
        "build-argo-rollouts.sh",
        "ARGO_ROLLOUTS_VERSION",
        "github.com/argoproj/argo-rollouts",
        "manifests/crds",
        ROOT / "third_party" / "argo-rollouts" / "crds",
    ),
    "flagger": (
        "build-flagger.sh",
        "FLAGGER_VERSION",
        "github.com/fluxcd/flagger",
        "artifacts/flagger",
        ROOT / "third_party" / "flagger" / "crds",
    ),
}
KINDS = {
    "argo-rollouts": {"Rollout", "AnalysisRun", "AnalysisTemplate", "ClusterAnalysisTemplate", "Experiment"},
    "flagger": {"Canary", "MetricTemplate", "AlertProvider"},
}


def pinned(name: str) -> str:
    script, var, *_ = PINS[name]
    m = re.search(rf"^{var}=(v[0-9.]+)$", (ROOT / "hack" / script).read_text(encoding="utf-8"), re.M)
    assert m, f"hack/{script} has no {var} pin"
    return m.group(1)


def crd_files(name: str) -> list[Path]:
    return sorted(PINS[name][4].glob("*.yaml"))


@pytest.mark.parametrize("name", sorted(PINS))
def test_the_copies_are_of_the_pinned_version_and_hold_the_kinds(name: str) -> None:
    assert (PINS[name][4] / "VERSION").read_text(encoding="utf-8").strip() == pinned(name)
    kinds = {
        doc["spec"]["names"]["kind"]
        for f in crd_files(name)
        for doc in yaml.safe_load_all(f.read_text(encoding="utf-8"))
        if doc and doc.get("kind") == "CustomResourceDefinition"
    }
    assert kinds == KINDS[name]


@pytest.mark.parametrize("name", sorted(PINS))
def test_the_copies_are_byte_identical_to_the_module(name: str) -> None:
    _, _, module, folder, _ = PINS[name]
    cache = module_cache()
    src = None if cache is None else cache / f"{module}@{pinned(name)}" / folder
    if src is None or not src.is_dir():
        pytest.skip(f"{module}@{pinned(name)} is not in the Go module cache (hack/{PINS[name][0]})")
    for f in crd_files(name):
        assert f.read_bytes() == (src / f.name).read_bytes(), f"{f.relative_to(ROOT)} differs from the module's"
    upstream = {p.name for p in src.glob("*.yaml") if p.name != "kustomization.yaml" and "crd" in p.name}
    assert {f.name for f in crd_files(name)} == upstream


def test_the_plugin_module_builds_against_the_pinned_argo_rollouts_with_its_replaces() -> None:
    gomod = (ROOT / "plugins" / "argo-rollouts" / "go.mod").read_text(encoding="utf-8")
    assert re.search(rf"^\s*github\.com/argoproj/argo-rollouts {re.escape(pinned('argo-rollouts'))}$", gomod, re.M)
    cache = module_cache()
    upstream = None if cache is None else cache / f"github.com/argoproj/argo-rollouts@{pinned('argo-rollouts')}/go.mod"
    if upstream is None or not upstream.is_file():
        pytest.skip("github.com/argoproj/argo-rollouts is not in the Go module cache (hack/build-argo-rollouts.sh)")

    def replaces(text: str) -> set[str]:
        return {" ".join(m.split()) for m in re.findall(r"^\s*(?:replace\s+)?(\S+ => \S+ \S+)\s*$", text, re.M)}

    assert replaces(upstream.read_text(encoding="utf-8")) <= replaces(gomod)


def test_flaggers_rbac_is_the_modules_byte_for_byte() -> None:
    """third_party/flagger/rbac/account.yaml (what tests/e2e/test_11_flagger.py and docs/flagger.md apply) is the
    module's artifacts/flagger/account.yaml, and grants Flagger the HTTPRoutes it writes."""
    copy = ROOT / "third_party" / "flagger" / "rbac" / "account.yaml"
    docs = [d for d in yaml.safe_load_all(copy.read_text(encoding="utf-8")) if d]
    assert [d["kind"] for d in docs] == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    assert any("gateway.networking.k8s.io" in r.get("apiGroups", []) and "httproutes" in r["resources"]
               for r in role["rules"])  # fmt: skip
    cache = module_cache()
    src = None if cache is None else cache / f"github.com/fluxcd/flagger@{pinned('flagger')}/artifacts/flagger"
    if src is None or not src.is_dir():
        pytest.skip(
            f"github.com/fluxcd/flagger@{pinned('flagger')} is not in the Go module cache (hack/build-flagger.sh)"
        )
    assert copy.read_bytes() == (src / "account.yaml").read_bytes()
