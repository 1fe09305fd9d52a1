"""examples/argo-rollouts/install.yaml: upstream's ClusterRole (the pinned module's manifests/role/) unchanged, our
plugin's rules in a ClusterRole of their own, and the argo-rollouts-config ConfigMap naming the plugin at the path the
argo-rollouts image puts it (hack/build-images.sh)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.test_gateway_api_crds import module_cache

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "examples" / "argo-rollouts" / "install.yaml"
PLUGIN_PATH = "/plugins/trafficsplit-argo-rollouts-plugin"


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


def test_the_config_names_the_plugin_in_the_image() -> None:
    cm = _docs()[("ConfigMap", "argo-rollouts-config")]
    plugins = yaml.safe_load(cm["data"]["trafficRouterPlugins"])
    assert plugins == [{"name": "trafficsplit/trafficsplit", "location": f"file://{PLUGIN_PATH}"}]
    assert PLUGIN_PATH in (ROOT / "hack" / "build-images.sh").read_text(encoding="utf-8")


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
