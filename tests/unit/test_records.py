"""Wide records are built by keyword: a dataclass with five or more fields in the shipped code is `kw_only`, so
mypy and the runtime refuse `Record(a, b, c, d, e)`, where a swapped pair of same-typed fields would pass unseen."""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "src", ROOT / "operator", ROOT / "extproc"]
WIDE = 5


def _dataclasses() -> list[tuple[str, str]]:
    """(module, class) of every class decorated with `dataclass` in the shipped sources (generated protos aside)."""
    out = []
    for base in SOURCES:
        for path in sorted(base.rglob("*.py")):
            if "v1alpha1" in path.parts:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            module = ".".join(path.relative_to(base).with_suffix("").parts)
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and any(
                    ast.unparse(d).startswith("dataclass") for d in node.decorator_list
                ):
                    out.append((module, node.name))
    return out


RECORDS = _dataclasses()


def test_the_records_are_found() -> None:
    assert ("trafficsplit.core.control.resolve", "SplitObject") in RECORDS and len(RECORDS) > 40


@pytest.mark.parametrize(("module", "name"), RECORDS, ids=[f"{m}.{n}" for m, n in RECORDS])
def test_a_wide_record_is_keyword_only(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    positional = [f.name for f in dataclasses.fields(cls) if f.init and not f.kw_only]
    assert len(positional) < WIDE, f"{module}.{name}: make it @dataclass(kw_only=True); positional: {positional}"
