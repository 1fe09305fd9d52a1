"""GatewayClasses of our controller: the parameters their data planes run with, and their `Accepted` condition.
Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from trafficsplit.core.gatewayapi.conditions import ClassStatus, GatewayReason, cond
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


def class_refusals(classes: Iterable[ClassStatus]) -> dict[str, str]:
    """Class name → why it is not accepted (its `Accepted` message), for every class of ours without parameters."""
    return {
        c.name: next((x.message for x in c.conditions if x.type == "Accepted"), "")
        for c in classes
        if c.parameters is None
    }


def refused_by_class(
    conditions: Sequence[Condition], class_name: str, why: str, generation: int, *, accepted: bool
) -> tuple[Condition, ...]:
    """A Gateway's (`accepted`: its own `Accepted` too) or a listener's conditions when its class is not accepted:
    no data plane is provisioned from a class the operator refuses, so the Gateway as it is now is not what runs.
    `Accepted: False, InvalidParameters` (the Gateway API's reason for parameters that are missing, of an
    unsupported kind or malformed) and `Programmed: False, Invalid`, each naming the class and its refusal, at the
    Gateway's `generation`; every other condition as it is."""
    message = f"GatewayClass {class_name} is not accepted, no data plane is provisioned from it: {why}"
    out: list[Condition] = []
    for c in conditions:
        if c.type == "Accepted" and accepted:
            c = cond("Accepted", False, GatewayReason.INVALID_PARAMETERS, message, generation)
        elif c.type == "Programmed":
            c = cond("Programmed", False, GatewayReason.INVALID, message, generation)
        out.append(c)
    return tuple(out)
