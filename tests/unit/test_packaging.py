"""Every portion of the `trafficsplit` namespace must be mapped in pyproject, or a plain `pip install .` (the images,
`make demo`) silently ships without it: setuptools maps a namespace spread over several roots to one root only."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_subpackage_is_mapped_to_its_source_root() -> None:
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    found = {
        f"trafficsplit.{init.parent.name}": init.parent.relative_to(ROOT).as_posix()
        for source_root in ("src", "operator", "extproc")
        for init in (ROOT / source_root / "trafficsplit").glob("*/__init__.py")
    }
    assert found, "no subpackages found: the layout changed"
    assert {name: mapping.get(name) for name in found} == found
    assert not (ROOT / "operator" / "__init__.py").exists(), "a top-level `operator` package shadows the stdlib"
