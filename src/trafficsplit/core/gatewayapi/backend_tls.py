"""BackendTLSPolicy (Gateway API, `gateway.networking.k8s.io/v1`): TLS from a Gateway's data plane to the Services
its routes send to. Pure.

Read (`parse_backend_tls_policy`): `spec.targetRefs` (core Services, a whole Service or one port by its name as
`sectionName`; another kind is not ours and is ignored), `spec.validation` (`caCertificateRefs`, core ConfigMaps in
the policy's namespace, or `wellKnownCACertificates: System`; `hostname`, the SNI; `subjectAltNames`, Hostname or
URI) and `spec.options` (none is supported). What the validation or the options get wrong makes the policy
`Invalid`, and its ports are refused as below: the body is never left out, which would mean cleartext.

Resolved per Service port (`resolve_backend_tls`): a policy naming the port by `sectionName` beats one naming the
whole Service; two at the same level conflict, the oldest (creationTimestamp, then `namespace/name`) wins and the
other is `Accepted: False, Conflicted`. The winner's CA refs are read: a ref to another kind is `InvalidKind`, a
ConfigMap that is missing or whose `ca.crt` is no PEM bundle `InvalidCACertificateRef` (`ResolvedRefs: False`);
when none is usable the policy is also `Accepted: False, NoValidCACertificate`, and the port is `REFUSED`: its
backends get no endpoint, so a request to them fails (503) and never goes in cleartext to a port that asked for TLS.

Status (`backend_tls_statuses`): one ancestor per Gateway of ours with a route that sends to a port the policy
targets (upstream's conformance reads it there), both conditions on each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from trafficsplit.core.control.resolve import ServiceInfo
from trafficsplit.core.gatewayapi.conditions import AncestorStatus, PolicyStatus, Standing
from trafficsplit.core.gatewayapi.httproute import HTTPRoute, ParentRef
from trafficsplit.core.gatewayapi.reading import (
    MAX_GROUP,
    MAX_KIND,
    MAX_SECTION_NAME,
    Meta,
    Reader,
    read_hostname,
    read_meta,
)
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.tls import CaBundle, CaConfigMap
from trafficsplit.core.model.upstream_tls import MAX_SUBJECT_ALT_NAMES, SanKind, SubjectAltName, UpstreamTls

KIND = "BackendTLSPolicy"
MAX_TARGET_REFS = 16  # the CRD's bounds
MAX_CA_REFS = 8
MAX_ANCESTORS = 16
SYSTEM_CA = "System"


class BackendTlsReason(StrEnum):
    ACCEPTED = "Accepted"
    CONFLICTED = "Conflicted"
    INVALID = "Invalid"
    NO_VALID_CA = "NoValidCACertificate"
    RESOLVED_REFS = "ResolvedRefs"
    INVALID_CA_REF = "InvalidCACertificateRef"
    INVALID_KIND = "InvalidKind"


@dataclass(frozen=True, slots=True)
class TlsTarget:
    service: str
    section: str | None  # a Service port's name; None: every port


@dataclass(frozen=True, slots=True)
class CaRef:
    group: str
    kind: str
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendTlsPolicy:
    meta: Meta
    targets: tuple[TlsTarget, ...]
    ca_refs: tuple[CaRef, ...]
    well_known: str | None  # wellKnownCACertificates as written (only System is served)
    hostname: str
    subject_alt_names: tuple[SubjectAltName, ...]
    # What `spec.validation` or `spec.options` says that cannot be served: the policy is `Invalid` and its ports are
    # refused (fail closed), rather than the body left out, which would let their backends be spoken to in cleartext.
    invalid: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return self.meta.key

    @property
    def age(self) -> tuple[str, str]:
        return (self.meta.created, self.meta.key)

    def configmaps(self) -> list[tuple[str, str]]:
        """The ConfigMaps (namespace, name) its CA refs name: what the operator reads for it."""
        return [(self.meta.namespace, r.name) for r in self.ca_refs if (r.group, r.kind) == ("", "ConfigMap")]


def parse_backend_tls_policy(body: Mapping[str, Any]) -> BackendTlsPolicy:
    """The policy; raises SpecError (by field) only for its metadata and targets, which say where it applies. What
    `spec.validation` or `spec.options` gets wrong makes it `invalid` instead (see `BackendTlsPolicy.invalid`)."""
    r = Reader()
    meta = read_meta(body, r)
    spec = r.obj(body, "spec", "")
    targets: list[TlsTarget] = []
    for i, t in enumerate(r.items(spec, "targetRefs", "spec", MAX_TARGET_REFS)):
        p = f"spec.targetRefs[{i}]"
        if not isinstance(t, Mapping):
            r.add(p, "expected an object")
            continue
        group = r.text(t, "group", p, MAX_GROUP) or ""
        kind = r.text(t, "kind", p, MAX_KIND, required=True)
        name = r.text(t, "name", p, 253, required=True)
        section = r.text(t, "sectionName", p, MAX_SECTION_NAME)
        if (group, kind) == ("", "Service") and name is not None:
            targets.append(TlsTarget(name, section or None))
    r.done()
    r = Reader()  # from here, problems make the policy invalid
    v = r.obj(spec, "validation", "spec")
    refs: list[CaRef] = []
    for i, c in enumerate(r.items(v, "caCertificateRefs", "spec.validation", MAX_CA_REFS)):
        p = f"spec.validation.caCertificateRefs[{i}]"
        if not isinstance(c, Mapping):
            r.add(p, "expected an object")
            continue
        group = r.text(c, "group", p, MAX_GROUP) or ""
        kind = r.text(c, "kind", p, MAX_KIND, required=True)
        name = r.text(c, "name", p, 253, required=True)
        if kind is not None and name is not None:
            refs.append(CaRef(group, kind, name))
    well_known = r.text(v, "wellKnownCACertificates", "spec.validation", 64)
    if not refs and well_known is None:
        r.add("spec.validation", "caCertificateRefs or wellKnownCACertificates is required")
    hostname = read_hostname(
        r.text(v, "hostname", "spec.validation", 253, required=True), "spec.validation.hostname", r, wildcard=False
    )
    sans: list[SubjectAltName] = []
    for i, s in enumerate(r.items(v, "subjectAltNames", "spec.validation", MAX_SUBJECT_ALT_NAMES)):
        p = f"spec.validation.subjectAltNames[{i}]"
        if not isinstance(s, Mapping):
            r.add(p, "expected an object")
            continue
        kind_ = r.enum(s, "type", p, SanKind, SanKind.HOSTNAME)
        field_ = "hostname" if kind_ is SanKind.HOSTNAME else "uri"
        value = r.text(s, field_, p, 253, required=True)
        if value is None:
            continue
        try:
            sans.append(SubjectAltName(kind_, value))
        except SpecError as exc:
            r.problems += [q.replace("value:", f"{p}.{field_}:", 1) for q in exc.problems]
    options = r.obj(spec, "options", "spec")
    if options:
        r.add("spec.options", f"not supported ({', '.join(sorted(str(k)[:64] for k in options)[:8])})")
    if well_known is not None and well_known != SYSTEM_CA:
        r.add("spec.validation.wellKnownCACertificates", f"{well_known[:64]!r}: only {SYSTEM_CA!r} is supported")
    return BackendTlsPolicy(
        meta=meta,
        targets=tuple(targets),
        ca_refs=tuple(refs),
        well_known=well_known,
        hostname=hostname or "",
        subject_alt_names=tuple(sans),
        invalid=tuple(r.problems[:16]),
    )


@dataclass(frozen=True, slots=True)
class Refused:
    """A port whose policy cannot be served (no usable CA): its backends get no endpoint."""

    policy: str


PortKey = tuple[str, str, int]  # (namespace, Service, port number)


@dataclass(frozen=True, slots=True)
class TlsOutcome:
    """A policy's two conditions: Accepted's and ResolvedRefs'."""

    accepted: Standing
    resolved: Standing


@dataclass(frozen=True, slots=True)
class RefProblem:
    """One CA certificate ref that does not resolve: the ResolvedRefs reason it gives, and why."""

    reason: BackendTlsReason
    message: str


@dataclass(frozen=True, slots=True)
class Served:
    """What a policy would serve on its own (before conflicts): its TLS (None: no usable CA, or a validation we
    cannot serve) and its refs' problems."""

    tls: UpstreamTls | None
    problems: tuple[RefProblem, ...]


@dataclass(frozen=True, slots=True)
class BackendTlsResolution:
    ports: Mapping[PortKey, UpstreamTls | Refused]
    outcomes: Mapping[str, TlsOutcome]

    def for_port(self, namespace: str, service: str, port: int) -> UpstreamTls | Refused | None:
        return self.ports.get((namespace, service, port))


NO_BACKEND_TLS = BackendTlsResolution({}, {})


def resolve_backend_tls(
    policies: Iterable[BackendTlsPolicy],
    services: Mapping[tuple[str, str], ServiceInfo],
    configmaps: Mapping[tuple[str, str], CaConfigMap],
) -> BackendTlsResolution:
    """Per Service port, the TLS its backends are spoken to with (see the module docstring), and each policy's
    outcome."""
    ordered = sorted(policies, key=lambda p: p.age)
    if not ordered:
        return NO_BACKEND_TLS
    holders: dict[tuple[str, str, str | None], BackendTlsPolicy] = {}
    conflicted: dict[str, str] = {}
    for pol in ordered:
        for t in pol.targets:
            first = holders.setdefault((pol.meta.namespace, t.service, t.section), pol)
            if first is not pol:
                conflicted.setdefault(pol.key, f"{KIND} {first.key} targets {_target_text(t)} too and is older")
    served = {pol.key: _served(pol, configmaps) for pol in ordered}
    outcomes = {pol.key: _outcome(pol, served[pol.key], conflicted.get(pol.key)) for pol in ordered}
    ports: dict[PortKey, UpstreamTls | Refused] = {}
    for (ns, svc_name, section), pol in holders.items():
        svc = services.get((ns, svc_name))
        if svc is None:
            continue
        for sp in svc.ports:
            if section is not None and sp.name != section:
                continue
            key = (ns, svc_name, sp.port)
            if section is None and (ns, svc_name, sp.name) in holders and sp.name:
                continue  # a policy naming this port beats the whole Service's
            tls = served[pol.key].tls
            ports[key] = tls if tls is not None else Refused(pol.key)
    return BackendTlsResolution(ports, outcomes)


def _target_text(t: TlsTarget) -> str:
    return f"Service {t.service}" + (f" port {t.section}" if t.section else "")


def _served(pol: BackendTlsPolicy, configmaps: Mapping[tuple[str, str], CaConfigMap]) -> Served:
    problems: list[RefProblem] = []
    bundles: list[CaBundle] = []
    for i, ref in enumerate(pol.ca_refs):
        p = f"spec.validation.caCertificateRefs[{i}]"
        if (ref.group, ref.kind) != ("", "ConfigMap"):
            problems.append(
                RefProblem(BackendTlsReason.INVALID_KIND, f"{p}: {ref.group or 'core'}/{ref.kind} is not a ConfigMap")
            )
            continue
        cm = configmaps.get((pol.meta.namespace, ref.name))
        if cm is None or cm.bundle is None:
            why = "does not exist" if cm is None else (cm.problem or "has no CA bundle")
            problems.append(RefProblem(BackendTlsReason.INVALID_CA_REF, f"{p}: ConfigMap {ref.name} {why}"))
            continue
        bundles.append(cm.bundle)
    system = pol.well_known == SYSTEM_CA
    if pol.invalid or (not bundles and not system):
        return Served(None, tuple(problems))
    try:
        ca = CaBundle.joined(bundles) if bundles else None
        return Served(UpstreamTls(pol.hostname, ca, pol.subject_alt_names), tuple(problems))
    except SpecError as exc:  # the refs' bundles together exceed a bound
        return Served(None, (*problems, RefProblem(BackendTlsReason.INVALID_CA_REF, "; ".join(exc.problems))))


def _outcome(pol: BackendTlsPolicy, served: Served, conflict: str | None) -> TlsOutcome:
    problems = served.problems
    resolved = (
        Standing(False, problems[0].reason, "; ".join(p.message for p in problems))
        if problems
        else Standing(True, BackendTlsReason.RESOLVED_REFS, "every reference resolved")
    )
    if pol.invalid:
        accepted = Standing(False, BackendTlsReason.INVALID, "; ".join(pol.invalid))
    elif conflict is not None:
        accepted = Standing(False, BackendTlsReason.CONFLICTED, conflict)
    elif served.tls is None:
        accepted = Standing(
            False, BackendTlsReason.NO_VALID_CA, "no CA certificate reference is usable: " + resolved.message
        )
    else:
        accepted = Standing(True, BackendTlsReason.ACCEPTED, "the policy is applied")
    return TlsOutcome(accepted, resolved)


def backend_tls_statuses(
    policies: Sequence[BackendTlsPolicy],
    resolution: BackendTlsResolution,
    routes: Iterable[HTTPRoute],
    route_gateways: Mapping[str, Sequence[ParentRef]],
    services: Mapping[tuple[str, str], ServiceInfo],
) -> tuple[PolicyStatus, ...]:
    """Per policy, `status.ancestors`: one entry per Gateway of ours with a route sending to a port it targets."""
    if not policies:
        return ()
    # (namespace, Service) → port numbers → the Gateways whose routes send there
    sent: dict[tuple[str, str], dict[int, dict[ParentRef, None]]] = {}
    for route in routes:
        gateways = route_gateways.get(route.meta.key, ())
        if not gateways:
            continue
        for rule in route.rules:
            for ref in (*rule.backend_refs, *(m.ref for m in rule.mirrors)):
                if ref.port is not None:
                    at = sent.setdefault((ref.namespace, ref.name), {}).setdefault(ref.port, {})
                    at.update(dict.fromkeys(gateways))
    out: list[PolicyStatus] = []
    for pol in sorted(policies, key=lambda q: q.key):
        outcome = resolution.outcomes.get(pol.key)
        if outcome is None:
            continue
        ancestors: dict[ParentRef, None] = {}
        for t in pol.targets:
            ports = sent.get((pol.meta.namespace, t.service), {})
            svc = services.get((pol.meta.namespace, t.service))
            for number, gws in ports.items():
                if t.section is None or (
                    svc is not None and any(p.name == t.section and p.port == number for p in svc.ports)
                ):
                    ancestors.update(gws)
        g = pol.meta.generation
        conds = (
            outcome.accepted.condition("Accepted", g),
            outcome.resolved.condition("ResolvedRefs", g),
        )
        out.append(
            PolicyStatus(
                pol.key,
                tuple(
                    AncestorStatus(ref, conds, f"{ref.namespace}/{ref.name}")
                    for ref in sorted(ancestors, key=lambda a: (a.namespace, a.name))[:MAX_ANCESTORS]
                ),
            )
        )
    return tuple(out)
