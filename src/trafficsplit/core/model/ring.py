"""The one consistent-hash ring (docs/spec.md §5, §8): `points` nodes per member at key_hash(f"{member}#{v}"), v from 0;
a key goes to the first node whose hash is >= key_hash(key), wrapping to the first node.

The same code places a client on a replica in the simulator and a session on a pod in the dataplane, so the
simulator's sticky-consistent figures are what the gateway does. A member's nodes depend only on its own name, so
adding a member takes keys only onto it and removing one gives up only its keys: no key moves between members that
stay.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from trafficsplit.core.model.hashing import key_hash

DEFAULT_POINTS = 200
MAX_POINTS = 1_000


def member_nodes(member: str, points: int) -> list[int]:
    """The node hashes of one member, in v order."""
    return [key_hash(f"{member}#{v}") for v in range(points)]


def _nodes(members: Sequence[str], points: int) -> list[tuple[int, str, int]]:
    return [(h, m, i) for i, m in enumerate(members) for h in member_nodes(m, points)]


class Ring:
    """Immutable once built; `lookup` is one bisect."""

    __slots__ = ("_hashes", "_nodes", "_owners", "members", "points")

    def __init__(self, members: Sequence[str], points: int = DEFAULT_POINTS) -> None:
        if not 1 <= points <= MAX_POINTS:
            raise ValueError(f"ring points must be 1..{MAX_POINTS}, got {points}")
        # Equal node hashes (a 32-bit collision) are ordered by member name, not position: the ring is the same
        # whatever order the members come in, and a member joining or leaving never reorders a tie between others.
        self._set(tuple(members), points, sorted(_nodes(members, points)))

    def _set(self, members: tuple[str, ...], points: int, nodes: list[tuple[int, str, int]]) -> None:
        self.members = members
        self.points = points
        self._nodes = nodes
        self._hashes = [h for h, _, _ in nodes]
        self._owners = [i for _, _, i in nodes]

    def with_member(self, member: str) -> Ring:
        """This ring plus one member (index len(members)), for callers that grow a ring step by step: sorting two
        sorted runs is a linear merge in Python's sort, so each step costs O(nodes), not O(nodes log nodes)."""
        grown = Ring.__new__(Ring)
        new = sorted((h, member, len(self.members)) for h in member_nodes(member, self.points))
        grown._set((*self.members, member), self.points, sorted(self._nodes + new))
        return grown

    def lookup(self, h: int) -> int:
        """The member index of the first node whose hash is >= h, wrapping to the first node."""
        pos = bisect_left(self._hashes, h)
        return self._owners[pos if pos < len(self._hashes) else 0]

    def owner(self, key: str) -> str:
        return self.members[self.lookup(key_hash(key))]

    def __len__(self) -> int:
        return len(self._hashes)


def endpoint_ring(hosts: Sequence[str], points: int) -> Ring | None:
    """docs/spec.md §5: the ring of a backend's READY endpoints (`host:port`, as Envoy names hosts), members in sorted
    order so every replica builds the same ring whatever order the endpoints were listed in. None when there is no
    endpoint."""
    return Ring(sorted(set(hosts)), points) if hosts else None
