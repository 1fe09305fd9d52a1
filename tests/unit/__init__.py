"""Unit tests: pure, fast, no processes except the few that check process boundaries (minting, `python -m`)."""
