"""`assignment: minimal` slot tables of HTTPRoute rules across operator restarts. Pure.

A rule's slot table is a function of its history (core/model/assignment.py), kept in the operator's memory while it
leads. A restarted or newly leading operator continues it from the generation its Gateway's replicas hold (their
`GetHeld`
replies: `HeldSplits`), as a TrafficSplit continues from the dataplanes' copy; an HTTPRoute has no status field of ours
to keep it in. `held_tables` gathers the held tables, `held_fit` says whether one may stand for the rule as the route
is now (a `TableSeed`: the table, or why not), `continued_why` whether the advanced table still continues it. Without a
copy that fits, the table is rebuilt from the current weights and the operator says so (`rebuilt_rule_message`, the
AssignmentRebuilt Warning); the operator's shell does the reading and the posting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trafficsplit.core.gatewayapi.reading import CONTROLLER_NAME
from trafficsplit.core.model.assignment import SlotTable
from trafficsplit.core.model.compiled import CompiledSplit
from trafficsplit.core.model.weights import Weights


@dataclass(frozen=True, slots=True)
class HeldSplits:
    """The splits of the generation a Gateway's replicas hold, and its number (0, nothing: none read yet)."""

    number: int = 0
    splits: tuple[CompiledSplit, ...] = ()


@dataclass(frozen=True, slots=True)
class TableSeed:
    """`held_fit`'s answer for one rule: the held table to continue, or None and why not ("" when nothing was lost: a
    rule never served)."""

    table: SlotTable | None
    why: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldTable:
    """A rule's slot table as a generation its Gateway's replicas hold carries it."""

    table: SlotTable
    observed_generation: int  # the route's metadata.generation the held form was compiled from
    number: int  # the held generation's number


def held_tables(generations: Iterable[HeldSplits]) -> dict[str, HeldTable]:
    """Split key → the table the held generations carry; a rule two Gateways hold takes the higher-numbered
    generation's (the later one this operator's counter gave)."""
    out: dict[str, HeldTable] = {}
    for held in generations:
        for s in held.splits:
            if s.table is not None and (s.key not in out or out[s.key].number < held.number):
                out[s.key] = HeldTable(table=s.table, observed_generation=s.observed_generation, number=held.number)
    return out


def held_fit(held: HeldTable | None, *, route_generation: int, served_before: bool) -> TableSeed:
    """Whether a held table may be continued for a rule of the route as it is now: the table, or why not ("" when
    there is nothing to continue and nothing was lost: a rule never served).

    A held table stands for the rule only when it can be this route's: the route was served before (its status has a
    parent entry of ours, written after a generation carrying it was acknowledged, so a route created again under
    its name, whose status is empty, never takes its predecessor's table) and the held form was compiled from a
    metadata.generation no newer than the route's. Its backends are checked against the rule's once the table is
    advanced (`continued_why`)."""
    if held is None:
        return TableSeed(None, "no replica of its Gateway holds a slot table for it" if served_before else "")
    if held.observed_generation > route_generation:
        return TableSeed(
            None,
            f"the table the replicas hold (generation {held.number}) was built for metadata.generation "
            f"{held.observed_generation}, newer than the route's {route_generation} (another route of the same name)",
        )
    if not served_before:
        return TableSeed(
            None,
            f"the table the replicas hold (generation {held.number}) may be another route's of the same name: this "
            "route has no status from this controller",
        )
    return TableSeed(held.table)


def continued_why(seed: SlotTable, advanced: SlotTable) -> str:
    """ "" when `advanced` (the rule's table, advanced from the held `seed`) continues it; else why it is a rebuild:
    the held table shares no backend with the rule (rules reordered, every backendRef replaced), so every slot moved."""
    if set(seed.names) & set(advanced.names):
        return ""
    return (
        f"the table the replicas hold is of the backends {', '.join(seed.names)}, none of which is among the rule's "
        f"({', '.join(advanced.names)})"
    )


def rebuilt_rule_message(rule: int, why: str, weights: Weights) -> str:
    """The AssignmentRebuilt Warning on an HTTPRoute: rule `rule`'s `assignment: minimal` table had no history."""
    return (
        f"rule {rule}: assignment is minimal (TrafficSplitPolicy) but {why}: the slot table was rebuilt from the "
        f"current weights {weights.format()}; the old assignment is unknown, so up to 100% of its sessions moved"
    )


def route_served_before(status: Mapping[str, Any]) -> bool:
    """A route's stored status has a parent entry of ours: a generation carrying it was acknowledged (the entry is
    written only then), so a table of its rules existed and losing it moves sessions."""
    parents = status.get("parents")
    return isinstance(parents, list) and any(
        isinstance(p, Mapping) and p.get("controllerName") == CONTROLLER_NAME for p in parents
    )
