"""A Gateway's listeners as the translation sees them: accepted or why not, the route kinds they take, their TLS
certificate and client certificate validation, conflicts on a shared port; and the Gateway's own `Accepted` and
`Programmed` (and `InsecureFrontendValidationMode`). Pure.

Client certificate validation (`spec.tls.frontend`, Gateway API's GatewayFrontendClientCertificateValidation) is
per port: every HTTPS listener on a port takes the port's entry of `perPort`, else the default. Each CA ref must be a
core ConfigMap with a PEM `ca.crt` (another kind: InvalidCACertificateKind; absent or malformed:
InvalidCACertificateRef; another namespace without a ReferenceGrant: RefNotPermitted). Any bad ref makes the
listener `ResolvedRefs: False`; when none resolves it is also `Accepted: False, NoValidCACertificate` and is not
served: a port that asks for validation is never served without it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from trafficsplit.core.gatewayapi.conditions import PENDING_MESSAGE, GatewayReason, ListenerReason, Standing, cond
from trafficsplit.core.gatewayapi.objects import (
    HTTPROUTE_KIND,
    CertificateRef,
    FrontendValidation,
    Gateway,
    GrantFrom,
    Listener,
    ReferenceGrant,
    RouteKind,
    TLSMode,
    ValidationMode,
)
from trafficsplit.core.gatewayapi.reading import GATEWAY_GROUP
from trafficsplit.core.model.condition import Condition
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.tls import CaBundle, CaConfigMap, Certificate, ClientValidation, TlsSecret

Key = tuple[str, str]

SUPPORTED_PROTOCOLS = frozenset({"HTTP", "HTTPS"})


@dataclass(frozen=True, slots=True)
class ListenerOwner:
    """The object whose spec holds a listener: its Gateway, or a ListenerSet attached to it. The listener's refs are
    resolved as that object's (its namespace; ReferenceGrants from its kind), its `allowedRoutes: Same` means that
    namespace, and its conditions carry that object's generation."""

    kind: str  # "Gateway" or "ListenerSet"
    namespace: str
    name: str
    generation: int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def source(self) -> GrantFrom:
        return GrantFrom(GATEWAY_GROUP, self.kind, self.namespace)


def gateway_owner(gw: Gateway) -> ListenerOwner:
    return ListenerOwner("Gateway", gw.meta.namespace, gw.meta.name, gw.meta.generation)


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerView:
    listener: Listener
    supported_kinds: tuple[RouteKind, ...]
    conditions: tuple[Condition, ...]
    usable: bool  # accepted, not conflicted, takes HTTPRoutes
    owner: ListenerOwner
    # The listener's name in the Gateway's data plane (its tables, `ListenerRoutes.listener`): a Gateway listener's
    # own; a ListenerSet's is derived from the set's key too (`listener_sets.listener_key`), as names repeat across
    # a Gateway and its ListenerSets.
    key: str
    # HTTPS: the certificate it serves; a listener whose certificate did not resolve takes routes (they count as
    # attached) but is not served (Programmed: False) until it does.
    certificate: Certificate | None = None
    # HTTPS on a port with client certificate validation: the CAs that resolved and the mode.
    client_validation: ClientValidation | None = None
    serves: bool = True


@dataclass(frozen=True, slots=True)
class ValidationView:
    """A port's client certificate validation as resolved: what is served (None: no ref resolved), and the
    ResolvedRefs=False (reason, message) when a ref did not."""

    served: ClientValidation | None
    unresolved: tuple[str, str] | None


def listener_tls(
    lis: Listener,
    owner: ListenerOwner,
    grants: Sequence[ReferenceGrant],
    secrets: Mapping[tuple[str, str], TlsSecret],
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
    unusable = unusable_ref(ref, owner, grants)
    if unusable is not None:
        return None, None, (unusable[0], f"{where}: {unusable[1]}")
    secret = secrets.get((ref.namespace, ref.name))
    if secret is None:
        return None, None, (ListenerReason.INVALID_CERTIFICATE_REF, f"{where}: Secret not found")
    if secret.certificate is None:
        return None, None, (ListenerReason.INVALID_CERTIFICATE_REF, f"{where}: {secret.problem}")
    return None, secret.certificate, None


def unusable_ref(
    ref: CertificateRef, owner: ListenerOwner, grants: Sequence[ReferenceGrant], kind: str = "Secret"
) -> tuple[str, str] | None:
    """Why `owner` (a Gateway, or the ListenerSet of a listener) cannot use the object `ref` names whatever it holds
    (reason, message), else None: a certificate's Secret, or (`kind` ConfigMap) a client validation's CA bundle. A
    ReferenceGrant to a Gateway is not one to its ListenerSets, nor the other way round."""
    if (ref.group, ref.kind) != ("", kind):
        if kind == "ConfigMap":
            return (
                ListenerReason.INVALID_CA_CERTIFICATE_KIND,
                f"{ref.group or 'core'}/{ref.kind[:64]} is not a core ConfigMap",
            )
        return ListenerReason.INVALID_CERTIFICATE_REF, "must be a core Secret"
    if ref.namespace != owner.namespace:
        source = owner.source
        if not any(g.meta.namespace == ref.namespace and g.permits(source, "", kind, ref.name) for g in grants):
            return ListenerReason.REF_NOT_PERMITTED, "no ReferenceGrant permits it"
    return None


@dataclass(frozen=True, slots=True)
class BackendClientView:
    """The Gateway's `spec.tls.backend.clientCertificateRef` resolved: the certificate its data plane presents to
    TLS backends (None: the ref does not resolve) and the Gateway's `ResolvedRefs` condition."""

    certificate: Certificate | None
    resolved: Standing


def backend_client_view(
    gw: Gateway, grants: Sequence[ReferenceGrant], secrets: Mapping[Key, TlsSecret]
) -> BackendClientView | None:
    """None for a Gateway without one. A ref to another kind or group, a Secret that is missing or no
    `kubernetes.io/tls` pair is `InvalidClientCertificateRef`; another namespace's without a ReferenceGrant
    `RefNotPermitted`. The Gateway stays Accepted either way: its backends are then spoken to without a client
    certificate (a backend that requires one refuses the handshake: a 503, never another certificate)."""
    ref = gw.backend_client_certificate
    if ref is None:
        return None
    where = f"spec.tls.backend.clientCertificateRef {ref.namespace}/{ref.name}"
    unusable = unusable_ref(ref, gateway_owner(gw), grants)
    if unusable is not None:
        reason = (
            GatewayReason.REF_NOT_PERMITTED
            if unusable[0] == ListenerReason.REF_NOT_PERMITTED
            else (GatewayReason.INVALID_CLIENT_CERTIFICATE_REF)
        )
        return BackendClientView(None, Standing(False, reason, f"{where}: {unusable[1]}"))
    secret = secrets.get((ref.namespace, ref.name))
    if secret is None or secret.certificate is None:
        why = "does not exist" if secret is None else (secret.problem or "holds no certificate")
        return BackendClientView(None, Standing(False, GatewayReason.INVALID_CLIENT_CERTIFICATE_REF, f"{where}: {why}"))
    return BackendClientView(secret.certificate, Standing(True, GatewayReason.RESOLVED_REFS, ""))


def validation_view(
    validation: FrontendValidation, gw: Gateway, grants: Sequence[ReferenceGrant], configmaps: Mapping[Key, CaConfigMap]
) -> ValidationView:
    """One port's validation resolved against the ConfigMaps read: the bundles of the refs that resolved, joined, and
    the first bad ref's reason with every bad ref's message."""
    bundles: list[CaBundle] = []
    bad: list[tuple[str, str]] = []
    for i, ref in enumerate(validation.ca_refs):
        where = f"{validation.path}.caCertificateRefs[{i}] {ref.namespace}/{ref.name}"
        unusable = unusable_ref(ref, gateway_owner(gw), grants, "ConfigMap")
        cm = configmaps.get((ref.namespace, ref.name)) if unusable is None else None
        if unusable is not None:
            bad.append((unusable[0], f"{where}: {unusable[1]}"))
        elif cm is None:
            bad.append((ListenerReason.INVALID_CA_CERTIFICATE_REF, f"{where}: ConfigMap not found"))
        elif cm.bundle is None:
            bad.append((ListenerReason.INVALID_CA_CERTIFICATE_REF, f"{where}: {cm.problem}"))
        else:
            bundles.append(cm.bundle)
    served = None
    if bundles:
        try:
            ca = CaBundle.joined(bundles)
        except SpecError as exc:  # each bundle is within bounds, all of them together may not be
            bad.append((ListenerReason.INVALID_CA_CERTIFICATE_REF, f"{validation.path}: {'; '.join(exc.problems)}"))
        else:
            served = ClientValidation(ca, validation.mode is ValidationMode.ALLOW_INSECURE_FALLBACK)
    unresolved = (bad[0][0], "; ".join(m for _, m in bad)) if bad else None
    return ValidationView(served, unresolved)


def ca_configmaps(gateways: Iterable[Gateway], grants: Sequence[ReferenceGrant]) -> frozenset[Key]:
    """The ConfigMaps (namespace, name) the client validations of `gateways`' HTTPS ports may use: what the operator
    reads, and all it keeps (as `certificate_secrets`)."""
    keys: set[Key] = set()
    for gw in gateways:
        for port in {lis.port for lis in gw.listeners if lis.protocol == "HTTPS"}:
            validation = gw.client_validation(port)
            if validation is not None:
                keys.update(
                    (ref.namespace, ref.name)
                    for ref in validation.ca_refs
                    if unusable_ref(ref, gateway_owner(gw), grants, "ConfigMap") is None
                )
    return frozenset(keys)


def listener_secrets(listeners: Iterable[Listener], owner: ListenerOwner, grants: Sequence[ReferenceGrant]) -> set[Key]:
    """The Secrets the HTTPS listeners of one object (`owner`: a Gateway, or a ListenerSet) may use."""
    return {
        (ref.namespace, ref.name)
        for lis in listeners
        if lis.protocol == "HTTPS" and lis.tls is not None and lis.tls.mode is not TLSMode.PASSTHROUGH
        for ref in lis.tls.certificate_refs[:1]
        if unusable_ref(ref, owner, grants) is None
    }


def certificate_secrets(gateways: Iterable[Gateway], grants: Sequence[ReferenceGrant]) -> frozenset[tuple[str, str]]:
    """The Secrets (namespace, name) the HTTPS listeners of `gateways` may use: what the operator reads, and all it
    keeps (a Secret no listener names, or one it may not use, is never read; the count is bounded by the listeners')."""
    keys: set[tuple[str, str]] = set()
    for gw in gateways:
        keys.update(listener_secrets(gw.listeners, gateway_owner(gw), grants))
        client = gw.backend_client_certificate
        if client is not None and unusable_ref(client, gateway_owner(gw), grants) is None:
            keys.add((client.namespace, client.name))  # the one its data plane presents to TLS backends
    return frozenset(keys)


def listener_views(
    gw: Gateway,
    grants: Sequence[ReferenceGrant] = (),
    secrets: Mapping[Key, TlsSecret] | None = None,
    configmaps: Mapping[Key, CaConfigMap] | None = None,
) -> list[ListenerView]:
    """Every listener of `gw`'s own spec, in order, with its conditions and whether it takes and serves routes (those
    of its ListenerSets: `listener_sets.listener_set_views`)."""
    by_port: dict[int, list[Listener]] = {}
    for lis in gw.listeners:
        by_port.setdefault(lis.port, []).append(lis)
    validations = port_validations(gw, grants, configmaps or {}, by_port)
    owner = gateway_owner(gw)
    g = gw.meta.generation
    return [
        listener_view(
            lis,
            owner,
            lis.name,
            _conflict(lis, by_port[lis.port], g),
            bool(gw.problems),
            grants,
            secrets or {},
            validations.get(lis.port),
        )
        for lis in gw.listeners
    ]


def port_validations(
    gw: Gateway, grants: Sequence[ReferenceGrant], configmaps: Mapping[Key, CaConfigMap], ports: Iterable[int]
) -> dict[int, ValidationView]:
    """The client certificate validation of each of these ports of `gw` that has one, resolved."""
    out: dict[int, ValidationView] = {}
    for port in ports:
        validation = gw.client_validation(port)
        if validation is not None:
            out[port] = validation_view(validation, gw, grants, configmaps)
    return out


def listener_view(
    lis: Listener,
    owner: ListenerOwner,
    key: str,
    conflict: Condition,
    refused_gateway: bool,
    grants: Sequence[ReferenceGrant],
    secrets: Mapping[Key, TlsSecret],
    validation: ValidationView | None,
    refusal: Standing | None = None,
) -> ListenerView:
    """One listener with its conditions: `conflict` is its Conflicted condition as its owner's rules found it (a
    conflicted listener is not usable); `refused_gateway`: its Gateway is not accepted, so it takes no route;
    `refusal`: why a ListenerSet's listener is not taken (a conflict with an earlier listener, a port the Gateway
    does not have), its Accepted and Programmed."""
    g = owner.generation
    supported = lis.protocol in SUPPORTED_PROTOCOLS
    tls_problem, certificate, unresolved = listener_tls(lis, owner, grants, secrets)
    if lis.protocol != "HTTPS":
        validation = None  # a port's validation is for the TLS it terminates
    no_ca = validation is not None and validation.served is None
    accepted = _accepted(lis, supported, tls_problem, g)
    # Refs are reported on a listener accepted but for its CAs (the certificate's and the CAs'), not on one refused
    # for anything else (its refs are moot).
    candidates = (unresolved, validation.unresolved if validation is not None else None)
    unresolved_refs = [u for u in candidates if u is not None] if accepted.ok else []
    if accepted.ok and no_ca:
        why = f"no caCertificateRef of the client validation of port {lis.port} resolved"
        accepted = cond("Accepted", False, ListenerReason.NO_VALID_CA_CERTIFICATE, why, g)
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
    elif unresolved_refs:
        message = "; ".join(m for _, m in unresolved_refs)
        resolved = cond("ResolvedRefs", False, unresolved_refs[0][0], message, g)
    else:
        resolved = cond("ResolvedRefs", True, ListenerReason.RESOLVED_REFS, "", g)
    serves = unresolved is None and not no_ca
    if serves:
        programmed = cond("Programmed", None, ListenerReason.PENDING, PENDING_MESSAGE, g)
    elif unresolved is not None:
        programmed = cond("Programmed", False, ListenerReason.INVALID, "its certificate did not resolve", g)
    else:
        programmed = cond(
            "Programmed", False, ListenerReason.INVALID, "no CA certificate of its client validation resolved", g
        )
    if refusal is not None:
        accepted = refusal.condition("Accepted", g)
        programmed = refusal.condition("Programmed", g)
        serves = False
    # A Gateway we do not accept serves nothing, so none of its listeners takes a route.
    usable = not refused_gateway and accepted.ok and not conflict.ok and HTTPROUTE_KIND in kinds
    return ListenerView(
        listener=lis,
        supported_kinds=kinds,
        conditions=(accepted, resolved, conflict, programmed),
        usable=usable,
        owner=owner,
        key=key,
        certificate=certificate,
        client_validation=validation.served if validation is not None else None,
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


def gateway_acceptance(
    gw: Gateway, views: Sequence[ListenerView], backend_client: BackendClientView | None = None
) -> tuple[Condition, ...]:
    """The Gateway's `Accepted` (its own problems, else whether its listeners are valid), `Programmed` (pending
    until its replicas ACK), with a backend client certificate its `ResolvedRefs`, and with an AllowInsecureFallback
    validation `InsecureFrontendValidationMode`."""
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
    out = [accepted, cond("Programmed", None, GatewayReason.PENDING, PENDING_MESSAGE, g)]
    if backend_client is not None:
        out.append(backend_client.resolved.condition("ResolvedRefs", g))
    insecure = insecure_ports(gw)
    if insecure:
        ports = ", ".join(map(str, insecure))
        message = (
            f"client certificate validation is AllowInsecureFallback on port {ports}: "
            "connections without a valid client certificate are served"
        )
        out.append(cond("InsecureFrontendValidationMode", True, GatewayReason.CONFIGURATION_CHANGED, message, g))
    return tuple(out)


def insecure_ports(gw: Gateway) -> list[int]:
    """The HTTPS ports whose client certificate validation (as written) is AllowInsecureFallback, ascending."""
    ports = sorted({lis.port for lis in gw.listeners if lis.protocol == "HTTPS"})
    return [
        p
        for p in ports
        if (v := gw.client_validation(p)) is not None and v.mode is ValidationMode.ALLOW_INSECURE_FALLBACK
    ]
