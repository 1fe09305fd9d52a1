"""The one hash of the project (docs/spec.md §1): FNV-1a 32 with an avalanche finaliser.

Python's built-in hash() is salted per process, so two replicas would disagree; this one is the same everywhere.
"""

from __future__ import annotations

_FNV_OFFSET = 2166136261
_FNV_PRIME = 16777619
_MASK = 0xFFFFFFFF


def key_hash(key: str) -> int:
    """32-bit FNV-1a over the key's UTF-8 bytes, then an avalanche step so near keys land far apart."""
    h = _FNV_OFFSET
    for byte in key.encode("utf-8"):
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    h ^= h >> 15
    h = (h * 2246822507) & _MASK
    h ^= h >> 13
    return h
