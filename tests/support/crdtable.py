"""The CRD table tests' shared steps (tests/integration/test_crd_validation.py, test_gatewayparameters_crd.py,
test_trafficsplitpolicy_crd.py): a CRD file of ours applied and Established; a manifest the real API server must
refuse, naming each expected text; one it must store, read back as stored."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.support.controlplane import ControlPlane

CRDS = Path(__file__).resolve().parents[2] / "crds"
API_VERSION = "trafficsplit.dev/v1alpha1"


def install(kube: ControlPlane, file: str, crd: str) -> ControlPlane:
    """`crds/<file>` applied server-side and `crd/<crd>` Established."""
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS / file))
    kube.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=30s")
    return kube


def body(kind: str, name: str, spec: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
    """One of our resources (`trafficsplit.dev/v1alpha1`), as a dict."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": meta, "spec": dict(spec)}


def _where(namespace: str | None) -> tuple[str, ...]:
    return ("-n", namespace) if namespace is not None else ()


def assert_refused(kube: ControlPlane, case: str, manifest: str, expect: Sequence[str], *, strict: bool = True) -> None:
    """The API server refuses `manifest` (applied with `--validate=strict` unless `strict` is False) and its message
    holds every text of `expect` (the field path, the reason)."""
    flags = ("--validate=strict",) if strict else ()
    proc = kube.kubectl("apply", *flags, "-f", "-", input=manifest, check=False)
    assert proc.returncode != 0, f"{case} was accepted: {proc.stdout}"
    for text in expect:
        assert text in proc.stderr, f"{case}: {text!r} not in:\n{proc.stderr}"


def assert_absent(kube: ControlPlane, resource: str, name: str, namespace: str | None = None) -> None:
    """Nothing was stored under that name."""
    assert kube.kubectl("get", resource, name, *_where(namespace), check=False).returncode != 0


def stored(kube: ControlPlane, manifest: Mapping[str, Any], resource: str) -> dict[str, Any]:
    """`manifest` applied with `--validate=strict` (it must be taken) and read back as the API server stores it."""
    meta = manifest["metadata"]
    kube.kubectl("apply", "--validate=strict", "-f", "-", input=yaml.safe_dump(dict(manifest)))
    got = kube.kubectl("get", resource, meta["name"], *_where(meta.get("namespace")), "-o", "json")
    out: dict[str, Any] = json.loads(got.stdout)
    return out
