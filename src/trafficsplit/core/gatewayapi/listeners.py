"""A Gateway's listeners as the translation sees them: accepted or why not, the route kinds they take, their TLS
certificate, conflicts on a shared port; and the Gateway's own `Accepted` and `Programmed`. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from trafficsplit.core.gatewayapi.conditions import PENDING_MESSAGE, GatewayReason, ListenerReason, cond
from trafficsplit.core.gatewayapi.objects import (
    HTTPROUTE_KIND,
    CertificateRef,
    Gateway,
    GrantFrom,
    Listener,
    ReferenceGrant,
    RouteKind,
    TLSMode,
)
from trafficsplit.core.gatewayapi.reading import GATEWAY_GROUP
from trafficsplit.core.model.condition import Condition
from trafficsplit.core.model.tls import Certificate, TlsSecret

SUPPORTED_PROTOCOLS = frozenset({"HTTP", "HTTPS"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerView:
    listener: Listener
    supported_kinds: tuple[RouteKind, ...]
    conditions: tuple[Condition, ...]
    usable: bool  # accepted, not conflicted, takes HTTPRoutes
    # HTTPS: the certificate it serves; a listener whose certificate did not resolve takes routes (they count as
    # attached) but is not served (Programmed: False) until it does.
    certificate: Certificate | None = None
    serves: bool = True


def listener_tls(
    lis: Listener, gw: Gateway, grants: Sequence[ReferenceGrant], secrets: Mapping[tuple[str, str], TlsSecret]
) -> tuple[str | None, Certificate | None, tuple[str, str] | None]:
    """For one listener: why its tls cannot be accepted (UnsupportedValue), else its certificate or the
    ResolvedRefs=False (reason, message) that says why it has none."""
    if lis.protocol != "HTTPS":
        return ("tls is only valid on an HTTPS listener" if lis.tls is not None else None), None, None
    if lis.tls is None or not lis.tls.certificate_refs:
        return None, None, (ListenerReason.INVALID_CERTIFICATE_REF, "an HTTPS listener needs tls.certificateRefs")
    if lis.tls.mode is TLSMode.PASSTHROUGH:
        return "tls.mode Passthrough is not supported (it needs TLSRoute): only Terminate", None, None
    if len(lis.tls.certificate_refs) > 1:
        return "tls.certificateRefs: one certificate per listener is supported", None, None
    ref = lis.tls.certificate_refs[0]
    where = f"tls.certificateRefs[0] {ref.namespace}/{ref.name}"
    unusable = _unusable_ref(ref, gw, grants)
    if unusable is not None:
        return None, None, (unusable[0], f"{where}: {unusable[1]}")
    secret = secrets.get((ref.namespace, ref.name))
    if secret is None:
        return None, None, (ListenerReason.INVALID_CERTIFICATE_REF, f"{where}: Secret not found")
    if secret.certificate is None:
        return None, None, (ListenerReason.INVALID_CERTIFICATE_REF, f"{where}: {secret.problem}")
    return None, secret.certificate, None


def _unusable_ref(ref: CertificateRef, gw: Gateway, grants: Sequence[ReferenceGrant]) -> tuple[str, str] | None:
    """Why a listener of `gw` cannot use the Secret `ref` names whatever it holds (reason, message), else None."""
    if (ref.group, ref.kind) != ("", "Secret"):
        return ListenerReason.INVALID_CERTIFICATE_REF, "must be a core Secret"
    if ref.namespace != gw.meta.namespace:
        source = GrantFrom(GATEWAY_GROUP, "Gateway", gw.meta.namespace)
        if not any(g.meta.namespace == ref.namespace and g.permits(source, "", "Secret", ref.name) for g in grants):
            return ListenerReason.REF_NOT_PERMITTED, "no ReferenceGrant permits it"
    return None


def certificate_secrets(gateways: Iterable[Gateway], grants: Sequence[ReferenceGrant]) -> frozenset[tuple[str, str]]:
    """The Secrets (namespace, name) the HTTPS listeners of `gateways` may use: what the operator reads, and all it
    keeps (a Secret no listener names, or one it may not use, is never read; the count is bounded by the listeners')."""
    keys: set[tuple[str, str]] = set()
    for gw in gateways:
        for lis in gw.listeners:
            if lis.protocol != "HTTPS" or lis.tls is None or lis.tls.mode is TLSMode.PASSTHROUGH:
                continue
            keys.update(
                (ref.namespace, ref.name)
                for ref in lis.tls.certificate_refs[:1]
                if _unusable_ref(ref, gw, grants) is None
            )
    return frozenset(keys)


def listener_views(
    gw: Gateway, grants: Sequence[ReferenceGrant] = (), secrets: Mapping[tuple[str, str], TlsSecret] | None = None
) -> list[ListenerView]:
    """Every listener of `gw`, in order, with its conditions and whether it takes and serves routes."""
    by_port: dict[int, list[Listener]] = {}
    for lis in gw.listeners:
        by_port.setdefault(lis.port, []).append(lis)
    return [_listener_view(lis, gw, by_port[lis.port], grants, secrets or {}) for lis in gw.listeners]


def _listener_view(
    lis: Listener,
    gw: Gateway,
    same_port: Sequence[Listener],
    grants: Sequence[ReferenceGrant],
    secrets: Mapping[tuple[str, str], TlsSecret],
) -> ListenerView:
    g = gw.meta.generation
    supported = lis.protocol in SUPPORTED_PROTOCOLS
    tls_problem, certificate, unresolved = listener_tls(lis, gw, grants, secrets)
    accepted = _accepted(lis, supported, tls_problem, g)
    offered = (HTTPROUTE_KIND,) if supported else ()
    wanted = lis.kinds or offered
    kinds = tuple(k for k in wanted if k in offered)
    invalid = [f"{k.group}/{k.kind}" for k in wanted if k not in offered]
    if invalid:
        resolved = cond(
            "ResolvedRefs",
            False,
            ListenerReason.INVALID_ROUTE_KINDS,
            f"route kinds not supported on this listener: {', '.join(invalid)}",
            g,
        )
    elif unresolved is not None and accepted.ok:
        resolved = cond("ResolvedRefs", False, unresolved[0], unresolved[1], g)
    else:
        resolved = cond("ResolvedRefs", True, ListenerReason.RESOLVED_REFS, "", g)
    conflict = _conflict(lis, same_port, g)
    serves = unresolved is None
    if serves:
        programmed = cond("Programmed", None, ListenerReason.PENDING, PENDING_MESSAGE, g)
    else:
        programmed = cond("Programmed", False, ListenerReason.INVALID, "its certificate did not resolve", g)
    # A Gateway we do not accept serves nothing, so none of its listeners takes a route.
    usable = not gw.problems and accepted.ok and not conflict.ok and HTTPROUTE_KIND in kinds
    return ListenerView(
        listener=lis,
        supported_kinds=kinds,
        conditions=(accepted, resolved, conflict, programmed),
        usable=usable,
        certificate=certificate,
        serves=serves,
    )


def _accepted(lis: Listener, supported: bool, tls_problem: str | None, g: int) -> Condition:
    if not supported:
        return cond(
            "Accepted",
            False,
            ListenerReason.UNSUPPORTED_PROTOCOL,
            f"protocol {lis.protocol[:64]!r} is not supported: only HTTP and HTTPS",
            g,
        )
    if lis.problems or tls_problem:
        why = "; ".join([*lis.problems, *([tls_problem] if tls_problem else [])])
        return cond("Accepted", False, ListenerReason.UNSUPPORTED_VALUE, why, g)
    return cond("Accepted", True, ListenerReason.ACCEPTED, "", g)


def _conflict(lis: Listener, same_port: Sequence[Listener], g: int) -> Condition:
    """Listeners on one port with two protocols, or with the same hostname, conflict."""
    if len({x.protocol for x in same_port}) > 1:
        return cond(
            "Conflicted", True, ListenerReason.PROTOCOL_CONFLICT, f"port {lis.port} has listeners of two protocols", g
        )
    if sum(1 for x in same_port if x.hostname == lis.hostname) > 1:
        return cond(
            "Conflicted",
            True,
            ListenerReason.HOSTNAME_CONFLICT,
            f"another listener on port {lis.port} has hostname {lis.hostname or '(any)'}",
            g,
        )
    return cond("Conflicted", False, ListenerReason.NO_CONFLICTS, "", g)


def gateway_acceptance(gw: Gateway, views: Sequence[ListenerView]) -> tuple[Condition, ...]:
    """The Gateway's `Accepted` (its own problems, else whether its listeners are valid) and `Programmed` (pending
    until its replicas ACK)."""
    g = gw.meta.generation
    if gw.problems:
        reason = (
            GatewayReason.UNSUPPORTED_ADDRESS
            if any(p.startswith("spec.addresses") for p in gw.problems)
            else GatewayReason.UNSUPPORTED_VALUE
        )
        accepted = cond("Accepted", False, reason, "; ".join(gw.problems), g)
    elif all(v.usable for v in views):
        accepted = cond("Accepted", True, GatewayReason.ACCEPTED, "", g)
    else:
        bad = ", ".join(v.listener.name for v in views if not v.usable)
        some = any(v.usable for v in views)
        accepted = cond("Accepted", some, GatewayReason.LISTENERS_NOT_VALID, f"listeners not valid: {bad}", g)
    return (accepted, cond("Programmed", None, GatewayReason.PENDING, PENDING_MESSAGE, g))
