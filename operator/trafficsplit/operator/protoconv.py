"""Served splits ↔ the publish API's `Generation` message, and the content fingerprint. Pure.

The per-split conversion is trafficsplit.wire's (one definition for both directions of the wire); this module only
adds what the operator needs on top: the TrafficSplit metadata.generation each split carries, a fingerprint of the
content without its number, so an unchanged state never takes a new number, and the way back (a generation a
replica holds → its served forms), from which a restarted or newly leading operator seeds its last good forms.
"""

from __future__ import annotations

from collections.abc import Iterable

from trafficsplit.operator.reconcile import Served

from trafficsplit.core.errors import SpecError
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.generation import generation_from_proto, split_to_proto


def generation_to_proto(number: int, served: Iterable[Served], origin: str) -> pb.Generation:
    return pb.Generation(
        number=number, origin=origin, splits=[split_to_proto(s.split, s.observed_generation) for s in served]
    )


def fingerprint(served: Iterable[Served]) -> bytes:
    """The content of a generation without its number and origin: equal bytes, nothing to publish."""
    return generation_to_proto(0, served, "").SerializeToString(deterministic=True)


def served_from_proto(msg: pb.Generation) -> dict[str, Served]:
    """Split key → the served form a held generation carries, with the metadata.generation it was compiled from.

    Read with the dataplane's own reader, so a form is exactly what the replica decides with; a generation that does
    not read back (a replica of another version, a corrupted reply) yields nothing rather than a guess."""
    try:
        gen = generation_from_proto(msg)
    except SpecError:
        return {}
    observed = {f"{s.namespace}/{s.name}": s.observed_generation for s in msg.splits}
    return {s.key: Served(s, observed[s.key]) for s in gen.splits}
