"""Regenerate the translation goldens: `python -m tests.unit.regen_golden` (from the repository root).

Writes `<case>.generation.yaml` and `<case>.envoy.yaml` beside every `tests/unit/testdata/translate/<case>.in.yaml`;
review the diff before committing. (The older goldens in tests/unit/golden/ are regenerated with UPDATE_GOLDEN=1.)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    # The three source roots of this checkout first, as pytest's `pythonpath` has them, so the goldens come from the
    # code beside them even when an installed `trafficsplit` points elsewhere.
    sys.path[:0] = [str(ROOT / r) for r in ("src", "operator", "extproc")]
    from tests.unit.translate import regenerate

    for path in regenerate():
        print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()
