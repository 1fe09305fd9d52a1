"""Regenerate the Gateway API goldens: `python -m tests.gen_golden` (from the repository root).

Writes `<case>.model.yaml`, `<case>.status.yaml` and `<case>.envoy.yaml` beside every
`tests/testdata/gatewayapi/<case>.in.yaml`; review the diff before committing. (The TrafficSplit translation goldens
are regenerated with `python -m tests.unit.regen_golden`.)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    # This checkout's source roots first, as pytest's `pythonpath` has them, so the goldens come from the code beside
    # them even when an installed `trafficsplit` points elsewhere.
    sys.path[:0] = [str(ROOT / r) for r in ("src", "operator", "extproc")]
    from tests.unit.gatewayapi import regenerate

    for path in regenerate():
        print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()
