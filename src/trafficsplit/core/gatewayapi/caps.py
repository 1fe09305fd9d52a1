"""A class's caps (GatewayParameters `limits`): which Gateways of one namespace get a data plane. Pure.

A data plane in the operator's namespace is counted by no quota of the tenant's, so a tenant could otherwise make
any number of Gateways, each a Deployment, Services and Secrets in a namespace that is not theirs. The caps are per
class and per namespace: `gatewaysPerNamespace` Gateways, and `replicasPerNamespace` data-plane pods all together.

Who is served first is decided by age: the Gateways of a class in a namespace in the order they were created (then
by name), each admitted while it fits. A Gateway made later never takes an older one's place, so making the N+1th
refuses that one and nothing else; deleting one admits the oldest refused one. Lowering a cap refuses the youngest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from trafficsplit.core.gatewayapi.objects import Gateway
from trafficsplit.core.gatewayapi.parameters import GatewayParameters

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class OverCap:
    """Why a Gateway gets no data plane: the cap it would break, as its `Programmed` False message says it."""

    message: str


def over_caps(
    gateways: Iterable[Gateway], parameters: Mapping[str, GatewayParameters], default_replicas: int
) -> dict[Key, OverCap]:
    """Of `gateways` (those of our classes, accepted), those their class's caps refuse. `parameters`: each class's
    (by class name); `default_replicas`: a data plane's replicas when the class does not set them."""
    groups: dict[tuple[str, str], list[Gateway]] = {}
    for gw in gateways:
        if gw.class_name in parameters:
            groups.setdefault((gw.meta.namespace, gw.class_name), []).append(gw)
    out: dict[Key, OverCap] = {}
    for (namespace, class_name), members in groups.items():
        params = parameters[class_name]
        max_gateways, max_replicas = params.gateways_per_namespace, params.replicas_per_namespace
        if max_gateways is None and max_replicas is None:
            continue
        replicas = params.replicas if params.replicas is not None else default_replicas
        admitted = 0
        for gw in sorted(members, key=lambda g: (g.meta.created, g.meta.name)):
            if max_gateways is not None and admitted + 1 > max_gateways:
                out[(namespace, gw.meta.name)] = OverCap(
                    f"GatewayClass {class_name}: at most {max_gateways} Gateways per namespace get a data plane "
                    f"(its GatewayParameters {params.name} limits.gatewaysPerNamespace), and {namespace} has "
                    f"{max_gateways} older ones"
                )
            elif max_replicas is not None and (admitted + 1) * replicas > max_replicas:
                out[(namespace, gw.meta.name)] = OverCap(
                    f"GatewayClass {class_name}: its Gateways in {namespace} may run {max_replicas} data-plane "
                    f"replicas together (its GatewayParameters {params.name} limits.replicasPerNamespace); "
                    f"{admitted} older Gateways run {admitted * replicas} and this one would add {replicas}"
                )
            else:
                admitted += 1
    return out
