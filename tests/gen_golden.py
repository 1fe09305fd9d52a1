"""Regenerate every golden file: `python -m tests.gen_golden` (from the repository root).

The goldens are one tree, tests/testdata/, a folder per family, each rendered by its module in tests/unit/:
- `gatewayapi/` (tests/unit/gatewayapi.py): `<case>.model.yaml`, `<case>.status.yaml` and `<case>.envoy.yaml` beside
  every `<case>.in.yaml` of Gateway API objects;
- `translate/` (tests/unit/translate.py): `<case>.generation.yaml` and `<case>.envoy.yaml` beside every
  `<case>.in.yaml` of TrafficSplits;
- `wire/` (tests/unit/wire_golden.py): the sample generation's Envoy resources and a data-plane bootstrap.

Every file is written whole from the code, so on an unchanged tree the command leaves `git status` clean; after an
intended change, review the diff before committing.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    # This checkout's source roots first, as pytest's `pythonpath` has them, so the goldens come from the code beside
    # them even when an installed `trafficsplit` points elsewhere.
    sys.path[:0] = [str(ROOT / r) for r in ("src", "operator", "extproc")]
    from tests.unit import gatewayapi, translate, wire_golden

    for family in (gatewayapi, translate, wire_golden):
        for path in family.regenerate():
            print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()
