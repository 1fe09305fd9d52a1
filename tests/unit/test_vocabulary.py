"""Condition types, reasons and Event reasons are one vocabulary (trafficsplit.core.model.vocabulary), and docs/crd.md,
the reference users read, names every word of it."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import pytest

from trafficsplit.core.model.vocabulary import ConditionType, EventReason, EventType, Reason

CRD_DOC = Path(__file__).resolve().parents[2] / "docs" / "crd.md"
WORDS: list[StrEnum] = [*ConditionType, *Reason, *EventType, *EventReason]


@pytest.mark.parametrize("word", WORDS, ids=lambda w: f"{type(w).__name__}.{w.name}")
def test_docs_name_every_word(word: StrEnum) -> None:
    text = CRD_DOC.read_text(encoding="utf-8")
    assert f"`{word.value}`" in text or f"({word.value})" in text
