"""`python -m trafficsplit.cli …`, the same entry point as the `trafficsplit` console script."""

from __future__ import annotations

import sys

from trafficsplit.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
