"""CRD YAML → compiled generation → Envoy resources, against the files beside each input (tests/unit/translate.py).
After an intended change, regenerate every golden with `python -m tests.gen_golden` and review the diff."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.translate import CASES, cases, translate

CRD = Path(__file__).resolve().parents[2] / "crds" / "trafficsplit.dev_trafficsplits.yaml"

FEATURES = {
    "weights",
    "sticky-cookie",
    "matches",
    "hosts",
    "endpoints",
    "failover",
    "multiple-splits",
    "local-mode",
    "cookie-partitioned",
}


def test_every_spec_feature_has_a_case() -> None:
    assert set(cases()) >= FEATURES


def _schema_fields(schema: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for name, sub in (schema.get("properties") or {}).items():
        yield prefix + name
        yield from _schema_fields(sub, f"{prefix}{name}.")
    if "items" in schema:
        yield from _schema_fields(schema["items"], prefix)


def _set_fields(value: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(value, dict):
        for name, sub in value.items():
            yield prefix + name
            yield from _set_fields(sub, f"{prefix}{name}.")
    elif isinstance(value, list):
        for item in value:
            yield from _set_fields(item, prefix)


def test_the_cases_set_every_field_of_the_crd() -> None:
    """Every field the CRD accepts appears in some case's input, so a change to any of them shows in a golden diff."""
    (version,) = yaml.safe_load(CRD.read_text(encoding="utf-8"))["spec"]["versions"]
    crd_fields = set(_schema_fields(version["schema"]["openAPIV3Schema"]["properties"]["spec"]))
    used: set[str] = set()
    for case in cases():
        for doc in yaml.safe_load_all((CASES / f"{case}.in.yaml").read_text(encoding="utf-8")):
            if doc["kind"] == "TrafficSplit":
                used.update(_set_fields(doc["spec"]))
    assert crd_fields - used == set()


@pytest.mark.parametrize("case", cases())
def test_translation_matches_its_golden_files(case: str) -> None:
    for suffix, text in translate(case).items():
        path = CASES / f"{case}.{suffix}"
        assert path.exists(), f"missing {path.name}: run python -m tests.gen_golden"
        assert text == path.read_text(encoding="utf-8"), (
            f"{path.name} differs: if the change is intended, run python -m tests.gen_golden and review the diff"
        )
