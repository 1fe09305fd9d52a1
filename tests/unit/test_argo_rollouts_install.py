"""examples/argo-rollouts/install.yaml: upstream's released image and ClusterRole (the pinned module's
manifests/role/) unchanged, our plugin's rules in a ClusterRole of their own (labelled, so that an existing install can
apply them alone), and the argo-rollouts-config ConfigMap naming the plugin by the release's download URL, with a sum
to fill in (tests/e2e/test_10_argo_rollouts.py runs it with the release notes' sum)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.scripts import load_script
from tests.unit.test_gateway_api_crds import module_cache

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "examples" / "argo-rollouts" / "install.yaml"
release = load_script(ROOT / "hack" / "release.py", "release")
RBAC_LABEL = ("trafficsplit.dev/argo-rollouts-plugin", "rbac")


def _docs() -> dict[tuple[str, str], dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(INSTALL.read_text(encoding="utf-8")) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def _pinned() -> str:
    script = (ROOT / "hack" / "build-argo-rollouts.sh").read_text(encoding="utf-8")
    m = re.search(r"^ARGO_ROLLOUTS_VERSION=(v\S+)$", script, re.M)
    assert m
    return m.group(1)


def test_the_clusterrole_is_upstreams() -> None:
    cache = module_cache()
    role = None if cache is None else cache / f"github.com/argoproj/argo-rollouts@{_pinned()}/manifests/role"
    if role is None or not role.is_dir():
        pytest.skip(f"github.com/argoproj/argo-rollouts@{_pinned()} is not in the Go module cache")
    upstream = yaml.safe_load((role / "argo-rollouts-clusterrole.yaml").read_text(encoding="utf-8"))
    assert _docs()[("ClusterRole", "argo-rollouts")] == upstream


def test_the_plugins_rules_are_get_and_update_on_what_it_edits() -> None:
    role = _docs()[("ClusterRole", "argo-rollouts-trafficsplit")]
    got = {(r["apiGroups"][0], r["resources"][0]): sorted(r["verbs"]) for r in role["rules"]}
    assert got == {
        ("gateway.networking.k8s.io", "httproutes"): ["get", "update"],
        ("trafficsplit.dev", "trafficsplits"): ["get", "update"],
    }
    binding = _docs()[("ClusterRoleBinding", "argo-rollouts-trafficsplit")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "argo-rollouts", "namespace": "argo-rollouts"}]


def test_only_the_plugins_rbac_carries_its_label() -> None:
    """The docs' `kubectl apply -f install.yaml -l trafficsplit.dev/argo-rollouts-plugin=rbac` applies these two."""
    key, value = RBAC_LABEL
    labelled = {k for k, d in _docs().items() if d["metadata"].get("labels", {}).get(key) == value}
    assert labelled == {
        ("ClusterRole", "argo-rollouts-trafficsplit"),
        ("ClusterRoleBinding", "argo-rollouts-trafficsplit"),
    }


def test_the_config_names_the_released_plugin_and_the_image_is_upstreams() -> None:
    cm = _docs()[("ConfigMap", "argo-rollouts-config")]
    (plugin,) = yaml.safe_load(cm["data"]["trafficRouterPlugins"])
    # The location the release notes print (hack/release.py) for this version's linux-amd64 file.
    location = f"{release.DOWNLOAD}/v{release.version()}/{release.PLUGIN_PREFIX}linux-amd64"
    assert plugin["location"] == location
    # No release is published yet: the sum is a sentence to replace, which the controller refuses (not 64 hex digits).
    assert plugin.keys() == {"name", "location", "sha256"} and not re.fullmatch(r"[0-9a-f]{64}", plugin["sha256"])
    container = _docs()[("Deployment", "argo-rollouts")]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"quay.io/argoproj/argo-rollouts:{_pinned()}"


def test_the_plugin_name_is_one_the_controller_accepts() -> None:
    """The controller exits at start ("Failed to init config") when a trafficRouterPlugins name does not match its
    own <namespace>/<name> pattern (utils/config/config.go of the pinned module, read from the module cache)."""
    cache = module_cache()
    src = None if cache is None else cache / f"github.com/argoproj/argo-rollouts@{_pinned()}/utils/config/config.go"
    if src is None or not src.is_file():
        pytest.skip(f"github.com/argoproj/argo-rollouts@{_pinned()} is not in the Go module cache")
    m = re.search(r"^var re = regexp\.MustCompile\(`([^`]+)`\)", src.read_text(encoding="utf-8"), re.M)
    assert m, "the pattern moved in the module; update this test"
    pattern = re.compile(m.group(1))
    go = (ROOT / "plugins" / "argo-rollouts" / "edit.go").read_text(encoding="utf-8")
    name = re.search(r'^\s*PluginName = "([^"]+)"', go, re.M)
    assert name
    cm = _docs()[("ConfigMap", "argo-rollouts-config")]
    names = [p["name"] for p in yaml.safe_load(cm["data"]["trafficRouterPlugins"])]
    assert names == [name.group(1)]
    assert pattern.fullmatch(name.group(1)), (name.group(1), pattern.pattern)
