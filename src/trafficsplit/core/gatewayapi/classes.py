"""GatewayClasses of our controller: the parameters their data planes run with, and their `Accepted` condition.
Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from trafficsplit.core.gatewayapi.conditions import ClassStatus, cond
from trafficsplit.core.gatewayapi.objects import GatewayClass
from trafficsplit.core.gatewayapi.parameters import (
    DEFAULT_PARAMETERS,
    PARAMETERS_GROUP,
    PARAMETERS_KIND,
    GatewayParameters,
)
from trafficsplit.core.model.condition import Condition


def class_parameters(
    cls: GatewayClass, available: Mapping[str, GatewayParameters | str]
) -> tuple[GatewayParameters | None, Condition]:
    """The parameters a class's data planes run with and its `Accepted` condition: no parametersRef is the
    operator's defaults; a ref that is not a trafficsplit.dev GatewayParameters, names a namespace (the kind is
    cluster-scoped), is missing or was refused gives `Accepted: False, InvalidParameters` and no parameters, so
    nothing is provisioned from a half-understood class."""
    g = cls.meta.generation
    ref = cls.parameters_ref
    if ref is None:
        return DEFAULT_PARAMETERS, cond("Accepted", True, "Accepted", "", g)

    def invalid(why: str) -> tuple[None, Condition]:
        return None, cond("Accepted", False, "InvalidParameters", f"spec.parametersRef: {why}", g)

    if (ref.group, ref.kind) != (PARAMETERS_GROUP, PARAMETERS_KIND):
        return invalid(f"must name a {PARAMETERS_GROUP} {PARAMETERS_KIND}, not {ref.group or 'core'} {ref.kind}")
    if ref.namespace:
        return invalid(f"{PARAMETERS_KIND} is cluster-scoped: namespace must be empty, not {ref.namespace!r}")
    found = available.get(ref.name)
    if found is None:
        return invalid(f"{PARAMETERS_KIND} {ref.name!r} not found")
    if isinstance(found, str):
        return invalid(f"{PARAMETERS_KIND} {ref.name!r} is invalid: {found}")
    return found, cond("Accepted", True, "Accepted", "", g)


def class_statuses(
    classes: Iterable[GatewayClass], available: Mapping[str, GatewayParameters | str]
) -> tuple[ClassStatus, ...]:
    """The status of every class of ours, by name."""
    return tuple(
        ClassStatus(c.meta.name, (accepted,), resolved)
        for c in sorted(classes, key=lambda c: c.meta.name)
        if c.ours
        for resolved, accepted in [class_parameters(c, available)]
    )
