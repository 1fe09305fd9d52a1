"""`python -m trafficsplit.operator`: the operator's process entry point."""

from trafficsplit.operator.main import main

if __name__ == "__main__":
    raise SystemExit(main())
