"""Served splits → the publish API's `Generation` message, and the content fingerprint. Pure.

The per-split conversion is trafficsplit.wire's (one definition for both directions of the wire); this module only
adds what the operator needs on top: the TrafficSplit metadata.generation each split carries, and a fingerprint of
the content without its number, so an unchanged state never takes a new number.
"""

from __future__ import annotations

from collections.abc import Iterable

from trafficsplit.operator.reconcile import Served

from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.generation import split_to_proto


def generation_to_proto(number: int, served: Iterable[Served], origin: str) -> pb.Generation:
    return pb.Generation(
        number=number, origin=origin, splits=[split_to_proto(s.split, s.observed_generation) for s in served]
    )


def fingerprint(served: Iterable[Served]) -> bytes:
    """The content of a generation without its number and origin: equal bytes, nothing to publish."""
    return generation_to_proto(0, served, "").SerializeToString(deterministic=True)
