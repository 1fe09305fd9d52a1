"""Compiling: parsed split specs into compiled splits, and compiled splits into a generation's content. Pure.

Control-time work: the operator (`reconcile`), the Gateway API translation and local mode run it once per change.
The dataplane never does; it rebuilds the same values from the publish message through their own constructors
(wire/generation.py), which check themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from trafficsplit.core.model.assignment import AssignmentMode, SlotTable, advance
from trafficsplit.core.model.compiled import CompiledSplit, cluster_name
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import Generation, GenerationContent
from trafficsplit.core.model.persistent import StickyMode
from trafficsplit.core.model.rules import Endpoint, name_problems
from trafficsplit.core.model.splitspec import SplitSpec, compiled_backends
from trafficsplit.core.model.vocabulary import Reason
from trafficsplit.core.model.weights import Weights


def compile_split(
    spec: SplitSpec,
    endpoints: Mapping[str, Sequence[Endpoint]] | None = None,
    observed_generation: int = 0,
    previous_table: SlotTable | None = None,
) -> CompiledSplit:
    """Compile a parsed spec. `endpoints` maps backend name → its endpoints with readiness; a backend missing from it
    uses the spec's static endpoints (local mode), which count as ready. `previous_table`: the slot table the split
    had before (spec.assignment: minimal), which the new weights advance; None builds one from the weights alone."""
    identity = name_problems(spec.namespace, spec.name)
    if identity:  # the clusters are named after the split: refused for what the user wrote, not for what it made
        raise SpecError(identity)
    endpoints = endpoints or {}
    backends = compiled_backends(
        [replace(b, endpoints=tuple(endpoints[b.name])) if b.name in endpoints else b for b in spec.backends],
        [cluster_name(spec.namespace, spec.name, b.name) for b in spec.backends],
    )
    return CompiledSplit(
        namespace=spec.namespace,
        name=spec.name,
        hosts=spec.hosts,
        backends=backends,
        cookie=spec.cookie,
        endpoint_affinity=spec.endpoint_affinity,
        matches=spec.matches,
        debug_headers=spec.debug_headers,
        endpoint_points=spec.endpoint_points,
        observed_generation=observed_generation,
        key_header=spec.key_header,
        table=advance(previous_table, Weights.of((b.name, b.weight) for b in spec.backends))
        if spec.assignment is AssignmentMode.MINIMAL
        else None,
        persistent=spec.sticky_mode is StickyMode.PERSISTENT,
    )


@dataclass(frozen=True, slots=True)
class Rejection:
    split: str
    reason: Reason
    message: str


def assemble(splits: Iterable[CompiledSplit]) -> tuple[GenerationContent, tuple[Rejection, ...]]:
    """A generation's content, dropping any split that claims a host an earlier split (in the given order) holds.

    Callers order splits oldest first, so the split that held a host keeps it and the newcomer is rejected, as
    Gateway API resolves listener conflicts.
    """
    kept: list[CompiledSplit] = []
    owner: dict[str, str] = {}
    rejected: list[Rejection] = []
    for s in splits:
        clash = [h for h in s.hosts if h in owner]
        if clash:
            rejected.append(
                Rejection(s.key, Reason.HOST_CONFLICT, f"host {clash[0]!r} is already served by {owner[clash[0]]}")
            )
            continue
        for h in s.hosts:
            owner[h] = s.key
        kept.append(s)
    return GenerationContent(tuple(kept)), tuple(rejected)


def assemble_generation(number: int, splits: Iterable[CompiledSplit]) -> tuple[Generation, tuple[Rejection, ...]]:
    """`assemble`, stamped with `number` (tests and tools that build a numbered generation in one step)."""
    content, rejected = assemble(splits)
    return content.stamp(number), rejected
