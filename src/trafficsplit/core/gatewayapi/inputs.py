"""What a translation reads (`Inputs`), and the part of it one Gateway's translation reads (`gateway_inputs`). Pure.

A Gateway's translation depends on its own objects only: the Gateway, its class and the GatewayParameters the class
names (a class refused for them refuses its Gateways), the HTTPRoutes with a parentRef naming it, and what those
name: the Services (and their EndpointSlices) of their backendRefs and mirrors, the ReferenceGrants of the
namespaces those refs, the listeners' certificateRefs, the backend client certificate (`spec.tls.backend`) and the
client validations' caCertificateRefs point into (a grant lives beside what it grants), those Secrets, the
validations' ConfigMaps, the Namespaces of the routes (a listener's `allowedRoutes` selector reads their labels), the
TrafficSplitPolicies naming the routes, the BackendTLSPolicies naming their Services (and those policies' CA
ConfigMaps), the ListenerSets naming the Gateway (their namespaces for its `allowedListeners` selector, their
listeners' Secrets and grants, and the routes naming them) and the rules' previous slot tables. `gateway_inputs`
cuts the store down to exactly that, so a translation of the cut reads nothing else: the operator keeps each
Gateway's translation by its cut (`translate.TranslationMemo`), and a change on one Gateway never translates
another's routes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trafficsplit.core.control.resolve import ServiceInfo, SliceInfo
from trafficsplit.core.gatewayapi.backend_tls import BackendTlsPolicy
from trafficsplit.core.gatewayapi.httproute import HTTPRoute, ParentRef
from trafficsplit.core.gatewayapi.objects import (
    LISTENER_SET_KIND,
    Gateway,
    GatewayClass,
    ListenerSet,
    Namespace,
    ReferenceGrant,
)
from trafficsplit.core.gatewayapi.parameters import GatewayParameters
from trafficsplit.core.gatewayapi.policy import Policy
from trafficsplit.core.gatewayapi.reading import GATEWAY_GROUP
from trafficsplit.core.model.assignment import SlotTable
from trafficsplit.core.model.routes import RuleKey
from trafficsplit.core.model.tls import CaConfigMap, TlsSecret


@dataclass(frozen=True, slots=True, kw_only=True)
class Inputs:
    classes: tuple[GatewayClass, ...] = ()
    gateways: tuple[Gateway, ...] = ()
    routes: tuple[HTTPRoute, ...] = ()
    grants: tuple[ReferenceGrant, ...] = ()
    namespaces: tuple[Namespace, ...] = ()
    services: Mapping[tuple[str, str], ServiceInfo] | None = None
    slices: Mapping[tuple[str, str], Sequence[SliceInfo]] | None = None
    # GatewayParameters by name: the parsed value, or why its body was refused (SpecError's message).
    parameters: Mapping[str, GatewayParameters | str] | None = None
    # The Secrets HTTPS listeners name, by (namespace, name): read by the shell, parsed by parse_tls_secret.
    secrets: Mapping[tuple[str, str], TlsSecret] | None = None
    # The ConfigMaps client validations (spec.tls.frontend) name, likewise: parse_ca_configmap of each body.
    configmaps: Mapping[tuple[str, str], CaConfigMap] | None = None
    # TrafficSplitPolicies (core/gatewayapi/policy.py) and, for rules under `assignment: minimal`, the slot table each
    # rule's split had (by split key), which the new weights advance; None builds one from the weights alone.
    policies: tuple[Policy, ...] = ()
    tables: Mapping[str, SlotTable] | None = None
    # BackendTLSPolicies (core/gatewayapi/backend_tls.py): TLS to the Services routes send to. Their CA ConfigMaps
    # are in `configmaps` too.
    backend_tls: tuple[BackendTlsPolicy, ...] = ()
    # ListenerSets (core/gatewayapi/listener_sets.py): listeners added to the Gateways their parentRef names.
    listener_sets: tuple[ListenerSet, ...] = ()


def our_gateways(inputs: Inputs) -> dict[str, Gateway]:
    """The Gateways of our classes by `namespace/name` (a later object under one name replaces an earlier one)."""
    ours = {c.meta.name for c in inputs.classes if c.ours}
    return {g.meta.key: g for g in inputs.gateways if g.class_name in ours}


def gateway_inputs(inputs: Inputs) -> dict[str, Inputs]:
    """Per Gateway of ours (`namespace/name`, sorted), the inputs its translation reads (see the module docstring).
    Of the parameters, only what its class's parametersRef names: a class refused for them refuses its Gateways."""
    sets_of: dict[str, list[ListenerSet]] = {}
    for ls in inputs.listener_sets:
        if ls.gateway:
            sets_of.setdefault(ls.gateway, []).append(ls)
    set_gateway = {ls.meta.key: ls.gateway for ls in inputs.listener_sets if ls.gateway}
    routes_of: dict[str, list[HTTPRoute]] = {}
    for route in inputs.routes:
        parents = (parent_gateway(r, set_gateway) for r in route.parent_refs)
        for key in dict.fromkeys(k for k in parents if k is not None):
            routes_of.setdefault(key, []).append(route)
    policies_of: dict[str, list[Policy]] = {}
    for pol in inputs.policies:
        for route_key in dict.fromkeys(f"{pol.meta.namespace}/{t.name}" for t in pol.targets):
            policies_of.setdefault(route_key, []).append(pol)
    tls_of: dict[tuple[str, str], list[BackendTlsPolicy]] = {}
    for btp in inputs.backend_tls:
        for svc_key in dict.fromkeys((btp.meta.namespace, t.service) for t in btp.targets):
            tls_of.setdefault(svc_key, []).append(btp)
    services, slices = inputs.services or {}, inputs.slices or {}
    secrets, tables, configmaps = inputs.secrets or {}, inputs.tables or {}, inputs.configmaps or {}
    out: dict[str, Inputs] = {}
    parameters = inputs.parameters or {}
    for key, gw in sorted(our_gateways(inputs).items()):
        classes = tuple(c for c in inputs.classes if c.meta.name == gw.class_name)
        named = {c.parameters_ref.name for c in classes if c.parameters_ref is not None}
        routes = tuple(routes_of.get(key, ()))
        sets = tuple(sets_of.get(key, ()))
        refs = dict.fromkeys(k for route in routes for k in route.service_refs())
        client = gw.backend_client_certificate  # spec.tls.backend: the certificate shown to TLS backends
        listeners = (*gw.listeners, *(lis for ls in sets for lis in ls.listeners))
        certificates = dict.fromkeys(
            [
                *((c.namespace, c.name) for lis in listeners if lis.tls is not None for c in lis.tls.certificate_refs),
                *([(client.namespace, client.name)] if client is not None else []),
            ]
        )
        validations = (gw.frontend.default, *(v for _, v in gw.frontend.per_port)) if gw.frontend else ()
        backend_tls = tuple(dict.fromkeys(btp for k in refs for btp in tls_of.get(k, ())))
        cas = dict.fromkeys(
            [
                *((c.namespace, c.name) for v in validations if v is not None for c in v.ca_refs),
                *(k for btp in backend_tls for k in btp.configmaps()),
            ]
        )
        granting = {ns for ns, _ in refs} | {ns for ns, _ in certificates} | {ns for ns, _ in cas}
        # Route namespaces for the listeners' selectors; ListenerSet namespaces for the Gateway's allowedListeners.
        route_namespaces = {r.meta.namespace for r in routes} | {ls.meta.namespace for ls in sets}
        route_keys = {r.meta.key for r in routes}
        policies = {p.key for k in route_keys for p in policies_of.get(k, ())}
        # only `assignment: minimal` rules have tables: none held, no key to build
        split_keys = (
            (RuleKey(r.meta.namespace, r.meta.name, rule.index).text for r in routes for rule in r.rules)
            if tables
            else ()
        )
        out[key] = Inputs(
            classes=classes,
            gateways=(gw,),
            routes=routes,
            grants=tuple(g for g in inputs.grants if g.meta.namespace in granting),
            namespaces=tuple(n for n in inputs.namespaces if n.name in route_namespaces),
            services={k: services[k] for k in refs if k in services},
            slices={k: slices[k] for k in refs if k in slices},
            secrets={k: secrets[k] for k in certificates if k in secrets},
            configmaps={k: configmaps[k] for k in cas if k in configmaps},
            policies=tuple(p for p in inputs.policies if p.key in policies),
            tables={k: tables[k] for k in split_keys if k in tables},
            parameters={k: parameters[k] for k in named if k in parameters},
            backend_tls=backend_tls,
            listener_sets=sets,
        )
    return out


def parent_gateway(ref: ParentRef, set_gateway: Mapping[str, str]) -> str | None:
    """The Gateway (namespace/name) a route's parentRef reaches: the Gateway it names, or the one of the ListenerSet
    it names (`set_gateway`: a set's key → its Gateway's; None: neither)."""
    if ref.group != GATEWAY_GROUP:
        return None
    if ref.kind == "Gateway":
        return f"{ref.namespace}/{ref.name}"
    if ref.kind == LISTENER_SET_KIND:
        return set_gateway.get(f"{ref.namespace}/{ref.name}")
    return None
