"""docs/spec.md §1: the one hash, its published vectors, and that it is not Python's salted hash()."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trafficsplit.core.model.hashing import key_hash

VECTORS = [
    ("", 535972289, 89),
    ("a", 71043421, 21),
    ("user-42", 1388822931, 31),
    ("0193f1c2a4b5000000000001", 3589626538, 38),
    ("é-ünïcode", 3394238400, 0),
]


@pytest.mark.parametrize(("key", "expected", "mod100"), VECTORS)
def test_spec_vectors(key: str, expected: int, mod100: int) -> None:
    assert key_hash(key) == expected
    assert key_hash(key) % 100 == mod100


@given(st.text())
def test_range_is_32_bits(key: str) -> None:
    assert 0 <= key_hash(key) < 2**32


def test_same_in_another_process() -> None:
    # Python's hash() is salted per process; key_hash must not be.
    code = "from trafficsplit.core.model.hashing import key_hash; print(key_hash('user-42'))"
    env = {"PYTHONPATH": ":".join(p for p in sys.path if p), "PYTHONHASHSEED": "random"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, timeout=30)
    assert int(out.stdout) == key_hash("user-42")


def test_neighbouring_keys_land_far_apart() -> None:
    # The avalanche step: sequential cookie values must not cluster in slots.
    slots = {key_hash(f"0193f1c2a4b5{i:012x}") % 100 for i in range(200)}
    assert len(slots) > 70
