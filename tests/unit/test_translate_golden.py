"""CRD YAML → compiled generation → Envoy resources, against the files beside each input (tests/unit/translate.py).
After an intended change, regenerate with `python -m tests.unit.regen_golden` and review the diff."""

from __future__ import annotations

import pytest

from tests.unit.translate import CASES, cases, translate

FEATURES = {
    "weights",
    "sticky-cookie",
    "matches",
    "hosts",
    "endpoints",
    "failover",
    "multiple-splits",
    "local-mode",
}


def test_every_spec_feature_has_a_case() -> None:
    assert set(cases()) >= FEATURES


@pytest.mark.parametrize("case", cases())
def test_translation_matches_its_golden_files(case: str) -> None:
    for suffix, text in translate(case).items():
        path = CASES / f"{case}.{suffix}"
        assert path.exists(), f"missing {path.name}: run python -m tests.unit.regen_golden"
        assert text == path.read_text(encoding="utf-8"), (
            f"{path.name} differs: if the change is intended, run python -m tests.unit.regen_golden and review the diff"
        )
