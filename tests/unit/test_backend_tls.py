"""BackendTLSPolicy: the policy as read (a validation we cannot serve makes it Invalid, never absent), its resolution
per Service port (the suite's cases as a table: a missing or malformed CA ConfigMap, another kind, conflicts by age,
a port's policy beating the whole Service's), what a rule's backends and mirrors get (TLS, or no endpoint when the
policy cannot be served), the status per ancestor Gateway, the Gateway's input cut, and what reaches the data plane:
the generation and its proto (refused by path when bad) and the cluster's UpstreamTlsContext."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from tests.support.certs import issue, make_ca
from tests.unit.test_gateway_tls import secret
from trafficsplit.core.control.resolve import ServiceInfo, ServicePort, SliceEndpoint, SliceInfo
from trafficsplit.core.gatewayapi.backend_tls import (
    BackendTlsReason,
    Refused,
    parse_backend_tls_policy,
    resolve_backend_tls,
)
from trafficsplit.core.gatewayapi.httproute import parse_httproute
from trafficsplit.core.gatewayapi.inputs import gateway_inputs
from trafficsplit.core.gatewayapi.listeners import certificate_secrets
from trafficsplit.core.gatewayapi.objects import parse_gateway, parse_gateway_class
from trafficsplit.core.gatewayapi.translate import Inputs, Translation, gateway_content, translate
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.tls import CaBundle, CaConfigMap, TlsSecret, parse_ca_configmap, parse_tls_secret
from trafficsplit.core.model.upstream_tls import SanKind, SubjectAltName, UpstreamTls
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.envoy import backend_cluster, mirror_clusters
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto
from trafficsplit.wire.snapshot import ResourceBuilder, resources
from trafficsplit.wire.snapshot import secrets as sds_secrets

NS = "infra"
CLASS = parse_gateway_class(
    {"metadata": {"name": "ts"}, "spec": {"controllerName": "trafficsplit.dev/gateway-controller"}}
)
GATEWAY = parse_gateway(
    {
        "metadata": {"name": "gw", "namespace": NS},
        "spec": {"gatewayClassName": "ts", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
    }
)


@pytest.fixture(scope="module")
def ca_pem(tmp_path_factory: pytest.TempPathFactory) -> str:
    d: Path = tmp_path_factory.mktemp("backendca")
    return make_ca(d, "backend-ca").path.read_text()


def policy(
    name: str,
    service: str,
    *,
    section: str | None = None,
    cm: str = "ca",
    kind: str = "ConfigMap",
    group: str = "",
    hostname: str = "abc.example.com",
    created: str = "2026-01-01T00:00:00Z",
    sans: list[dict[str, str]] | None = None,
    **validation: Any,
) -> dict[str, Any]:
    target: dict[str, Any] = {"group": "", "kind": "Service", "name": service}
    if section is not None:
        target["sectionName"] = section
    v: dict[str, Any] = {"hostname": hostname, **validation}
    if "wellKnownCACertificates" not in validation:
        v["caCertificateRefs"] = [{"group": group, "kind": kind, "name": cm}]
    if sans is not None:
        v["subjectAltNames"] = sans
    return {
        "metadata": {"name": name, "namespace": NS, "generation": 3, "creationTimestamp": created},
        "spec": {"targetRefs": [target], "validation": v},
    }


def service(name: str, *ports: tuple[str, int]) -> ServiceInfo:
    return ServiceInfo(
        NS, name, tuple(ServicePort(name=n, port=p, target_port=8443) for n, p in (ports or (("https", 443),)))
    )


def configmap(name: str, pem: str | None) -> CaConfigMap:
    return parse_ca_configmap(
        {"metadata": {"name": name, "namespace": NS}, "data": {} if pem is None else {"ca.crt": pem}}
    )


def route(*backends: tuple[str, int], mirror: tuple[str, int] | None = None) -> dict[str, Any]:
    rules: list[dict[str, Any]] = []
    for i, (svc, port) in enumerate(backends):
        rule: dict[str, Any] = {
            "matches": [{"path": {"type": "Exact", "value": f"/{i}"}}],
            "backendRefs": [{"name": svc, "port": port}],
        }
        if mirror is not None:
            rule["filters"] = [
                {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": mirror[0], "port": mirror[1]}}}
            ]
        rules.append(rule)
    return {
        "metadata": {"name": "r", "namespace": NS, "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["abc.example.com"], "rules": rules},
    }


def ready_slice(svc: str) -> SliceInfo:
    return SliceInfo(
        namespace=NS,
        name=f"{svc}-x",
        service=svc,
        ports=(("https", 8443),),
        endpoints=(SliceEndpoint("10.0.0.7", True, "pod-a"),),
    )


def run(
    policies: list[dict[str, Any]],
    services: list[ServiceInfo],
    configmaps: list[CaConfigMap],
    r: dict[str, Any],
) -> Translation:
    return translate(
        Inputs(
            classes=(CLASS,),
            gateways=(GATEWAY,),
            routes=(parse_httproute(r),),
            services={(s.namespace, s.name): s for s in services},
            slices={(NS, s.name): (ready_slice(s.name),) for s in services},
            configmaps={(c.namespace, c.name): c for c in configmaps},
            backend_tls=tuple(parse_backend_tls_policy(p) for p in policies),
        )
    )


def conditions(t: Translation, name: str) -> dict[str, tuple[str, str]]:
    (ps,) = [p for p in t.backend_tls if p.policy == f"{NS}/{name}"]
    (anc,) = ps.ancestors
    assert (anc.ref.namespace, anc.ref.name, anc.ref.kind) == (NS, "gw", "Gateway")
    assert all(c.observed_generation == 3 for c in anc.conditions)
    return {c.type: (c.status, c.reason) for c in anc.conditions}


# --- reading ---------------------------------------------------------------------------------------------------------


def test_a_policy_is_read_with_its_targets_refs_and_names() -> None:
    p = parse_backend_tls_policy(
        policy("p", "svc", section="https", sans=[{"type": "URI", "uri": "spiffe://abc.example.com/id"}])
    )
    assert [(t.service, t.section) for t in p.targets] == [("svc", "https")]
    assert p.configmaps() == [(NS, "ca")]
    assert p.subject_alt_names == (SubjectAltName(SanKind.URI, "spiffe://abc.example.com/id"),)
    assert p.invalid == ()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"hostname": "*.example.com"}, "spec.validation.hostname"),
        ({"sans": [{"type": "URI", "uri": "no scheme"}]}, "spec.validation.subjectAltNames[0].uri"),
        ({"sans": [{"type": "Hostname", "hostname": "*.wild.example"}]}, "spec.validation.subjectAltNames[0].hostname"),
        ({"wellKnownCACertificates": "Mozilla"}, "spec.validation.wellKnownCACertificates"),
    ],
)
def test_a_validation_we_cannot_serve_makes_the_policy_invalid_and_its_port_refused(
    change: dict[str, Any], field: str, ca_pem: str
) -> None:
    """Fail closed: the body is kept as an Invalid policy (a body left out would mean cleartext to that port)."""
    p = parse_backend_tls_policy(policy("p", "svc", **change))
    assert p.invalid and p.invalid[0].startswith(field), p.invalid
    res = resolve_backend_tls([p], {(NS, "svc"): service("svc")}, {(NS, "ca"): configmap("ca", ca_pem)})
    assert res.for_port(NS, "svc", 443) == Refused(f"{NS}/p")
    accepted = res.outcomes[f"{NS}/p"].accepted
    assert not accepted.ok and accepted.reason == BackendTlsReason.INVALID


def test_options_are_not_supported_and_say_so() -> None:
    body = policy("p", "svc")
    body["spec"]["options"] = {"example.com/cipher": "x"}
    assert parse_backend_tls_policy(body).invalid == ("spec.options: not supported (example.com/cipher)",)


def test_a_body_whose_targets_cannot_be_read_is_refused_by_field() -> None:
    body = policy("p", "svc")
    body["spec"]["targetRefs"] = [{"group": "", "kind": "Service", "name": "x" * 300}]
    with pytest.raises(SpecError) as exc:
        parse_backend_tls_policy(body)
    assert exc.value.problems[0].startswith("spec.targetRefs[0].name:")


def test_targets_of_other_kinds_are_not_ours() -> None:
    body = policy("p", "svc")
    body["spec"]["targetRefs"].append({"group": "example.com", "kind": "Backend", "name": "b"})
    assert [t.service for t in parse_backend_tls_policy(body).targets] == ["svc"]


# --- resolution: the suite's cases -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cm", "kind", "group", "resolved_reason"),
    [
        ("missing", "ConfigMap", "", "InvalidCACertificateRef"),  # BackendTLSPolicyInvalidCACertificateRef
        ("empty", "ConfigMap", "", "InvalidCACertificateRef"),  # its malformed-ca-certificate-ref: `data: {}`
        ("bad", "ConfigMap", "", "InvalidCACertificateRef"),  # a ca.crt that is no PEM bundle
        ("ca", "InvalidKind", "invalid.io", "InvalidKind"),  # BackendTLSPolicyInvalidKind
    ],
)
def test_a_policy_without_a_usable_ca_is_not_accepted_and_its_backend_gets_no_endpoint(
    cm: str, kind: str, group: str, resolved_reason: str, ca_pem: str
) -> None:
    t = run(
        [policy("p", "svc", cm=cm, kind=kind, group=group)],
        [service("svc")],
        [configmap("ca", ca_pem), configmap("empty", None), configmap("bad", "not a certificate")],
        route(("svc", 443)),
    )
    assert conditions(t, "p") == {
        "Accepted": ("False", "NoValidCACertificate"),
        "ResolvedRefs": ("False", resolved_reason),
    }
    (action,) = t.actions
    assert action.split is not None
    (b,) = action.split.backends
    assert b.tls is None and b.endpoints == ()  # never cleartext: no endpoint, so Envoy answers 503
    # the route itself is served (the suite asks for Accepted and a 5xx)
    (rs,) = t.routes
    assert {c.type: c.status for c in rs.parents[0].conditions}["Accepted"] == "True"


def test_a_usable_policy_puts_tls_on_the_backend(ca_pem: str) -> None:
    t = run([policy("p", "svc", section="https")], [service("svc")], [configmap("ca", ca_pem)], route(("svc", 443)))
    assert conditions(t, "p") == {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}
    (action,) = t.actions
    assert action.split is not None
    (b,) = action.split.backends
    assert b.tls == UpstreamTls("abc.example.com", CaBundle(ca_pem.encode()))
    assert [e.address for e in b.endpoints] == ["10.0.0.7"]


def test_one_usable_ref_of_two_is_accepted_with_resolved_refs_false(ca_pem: str) -> None:
    body = policy("p", "svc")
    body["spec"]["validation"]["caCertificateRefs"].append({"group": "", "kind": "ConfigMap", "name": "missing"})
    t = run([body], [service("svc")], [configmap("ca", ca_pem)], route(("svc", 443)))
    assert conditions(t, "p") == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("False", "InvalidCACertificateRef"),
    }
    assert t.actions[0].split is not None and t.actions[0].split.backends[0].tls is not None


def test_conflicts_go_to_the_oldest_and_a_ports_policy_beats_the_whole_services(ca_pem: str) -> None:
    """The suite's BackendTLSPolicyConflictResolution: same target and level → the oldest (then the name) wins;
    a policy naming the port and one naming the whole Service both stay Accepted, each where it applies."""
    svcs = [
        service("whole"),
        service("sectioned", ("https-1", 443), ("https-2", 8443)),
        service("mixed", ("https-1", 443), ("https-2", 8443)),
    ]
    same_time = "2026-01-01T00:00:00Z"
    policies = [
        policy("whole-2", "whole", hostname="abc.example.com", created=same_time),
        policy("whole-1", "whole", hostname="other.example.com", created=same_time),
        policy(
            "sect-old", "sectioned", section="https-1", hostname="other.example.com", created="2025-01-01T00:00:00Z"
        ),
        policy("sect-new", "sectioned", section="https-1", hostname="abc.example.com"),
        policy("mixed-port", "mixed", section="https-1", hostname="other.example.com"),
        policy("mixed-all", "mixed", hostname="abc.example.com"),
    ]
    t = run(
        policies,
        svcs,
        [configmap("ca", ca_pem)],
        route(("whole", 443), ("sectioned", 443), ("mixed", 443), ("mixed", 8443)),
    )
    accepted = {ps.policy.split("/")[1]: ps.ancestors[0].conditions[0] for ps in t.backend_tls}
    assert {k: (c.status, c.reason) for k, c in accepted.items()} == {
        "whole-1": ("True", "Accepted"),
        "whole-2": ("False", "Conflicted"),
        "sect-old": ("True", "Accepted"),
        "sect-new": ("False", "Conflicted"),
        "mixed-port": ("True", "Accepted"),
        "mixed-all": ("True", "Accepted"),
    }
    assert "whole-1" in accepted["whole-2"].message
    snis = [a.split.backends[0].tls.sni for a in t.actions if a.split and a.split.backends[0].tls]
    assert snis == ["other.example.com", "other.example.com", "other.example.com", "abc.example.com"]


def test_the_system_trust_store_and_subject_alt_names(ca_pem: str) -> None:
    sans = [{"type": "URI", "uri": "spiffe://abc.example.com/id"}, {"type": "Hostname", "hostname": "abc.example.com"}]
    body = policy("p", "svc", sans=sans, wellKnownCACertificates="System")
    t = run([body], [service("svc")], [], route(("svc", 443)))
    assert conditions(t, "p")["Accepted"] == ("True", "Accepted")
    tls = t.actions[0].split.backends[0].tls  # type: ignore[union-attr]
    assert tls is not None and tls.ca is None
    assert [(n.kind, n.value) for n in tls.names] == [
        (SanKind.URI, "spiffe://abc.example.com/id"),
        (SanKind.HOSTNAME, "abc.example.com"),
    ]


def test_a_mirror_to_a_policys_port_goes_over_tls_or_nowhere(ca_pem: str) -> None:
    svcs = [service("main", ("http", 80)), service("shadow"), service("closed")]
    ok = run([policy("p", "shadow")], svcs, [configmap("ca", ca_pem)], route(("main", 80), mirror=("shadow", 443)))
    (m,) = ok.actions[0].mirrors
    assert m.tls is not None and m.tls.sni == "abc.example.com" and m.endpoints
    ((cluster, _),) = mirror_clusters(_generation(ok)).values()
    assert cluster.transport_socket.name == "envoy.transport_sockets.tls"
    refused = run([policy("p", "closed", cm="missing")], svcs, [], route(("main", 80), mirror=("closed", 443)))
    (m,) = refused.actions[0].mirrors
    assert m.tls is None and m.endpoints == ()


# --- the Gateway's cut and the status --------------------------------------------------------------------------------


def test_a_gateways_inputs_hold_the_policies_of_its_services_and_their_configmaps(ca_pem: str) -> None:
    inputs = Inputs(
        classes=(CLASS,),
        gateways=(GATEWAY,),
        routes=(parse_httproute(route(("svc", 443))),),
        services={(NS, "svc"): service("svc"), (NS, "other"): service("other")},
        configmaps={(NS, "ca"): configmap("ca", ca_pem), (NS, "ca2"): configmap("ca2", ca_pem)},
        backend_tls=(
            parse_backend_tls_policy(policy("p", "svc")),
            parse_backend_tls_policy(policy("q", "other", cm="ca2")),
        ),
    )
    (cut,) = gateway_inputs(inputs).values()
    assert [p.meta.name for p in cut.backend_tls] == ["p"]
    assert set(cut.configmaps or {}) == {(NS, "ca")}


def test_no_ancestor_without_a_route_of_ours_sending_to_the_port(ca_pem: str) -> None:
    t = run(
        [policy("p", "svc", section="other-port")],
        [service("svc", ("https", 443), ("other-port", 8443))],
        [configmap("ca", ca_pem)],
        route(("svc", 443)),
    )
    (ps,) = t.backend_tls
    assert ps.ancestors == ()


def test_a_fixed_configmap_changes_the_status_and_the_served_tls(ca_pem: str) -> None:
    """The suite's reconcile case: missing → created → emptied → restored, each a new translation."""
    args = ([policy("p", "svc")], [service("svc")])
    states = [[], [configmap("ca", ca_pem)], [configmap("ca", None)], [configmap("ca", ca_pem)]]
    got = [conditions(run(*args, cms, route(("svc", 443))), "p")["Accepted"] for cms in states]
    assert got == [
        ("False", "NoValidCACertificate"),
        ("True", "Accepted"),
        ("False", "NoValidCACertificate"),
        ("True", "Accepted"),
    ]


# --- the data plane --------------------------------------------------------------------------------------------------


def _generation(t: Translation) -> Generation:
    return gateway_content(t, f"{NS}/gw").stamp(1)


def test_the_generation_carries_the_tls_through_its_proto_and_the_cluster_speaks_it(ca_pem: str) -> None:
    sans = [{"type": "URI", "uri": "spiffe://abc.example.com/id"}]
    t = run([policy("p", "svc", sans=sans)], [service("svc")], [configmap("ca", ca_pem)], route(("svc", 443)))
    gen = _generation(t)
    back = generation_from_proto(generation_to_proto(gen, "test"))
    (split,) = back.splits
    (b,) = split.backends
    assert b.tls == UpstreamTls(
        "abc.example.com", CaBundle(ca_pem.encode()), (SubjectAltName(SanKind.URI, "spiffe://abc.example.com/id"),)
    )
    cluster = backend_cluster(b, endpoint_affinity=False)
    assert cluster.transport_socket.name == "envoy.transport_sockets.tls"
    ctx = tls_pb2.UpstreamTlsContext()
    cluster.transport_socket.typed_config.Unpack(ctx)
    assert ctx.sni == "abc.example.com"
    v = ctx.common_tls_context.validation_context
    assert v.trusted_ca.inline_bytes == ca_pem.encode()
    ((san,),) = [list(v.match_typed_subject_alt_names)]
    assert (san.san_type, san.matcher.exact) == (san.URI, "spiffe://abc.example.com/id")


def test_a_cluster_without_sans_checks_the_hostname_and_without_a_policy_stays_cleartext(ca_pem: str) -> None:
    t = run(
        [policy("p", "svc")],
        [service("svc"), service("plain")],
        [configmap("ca", ca_pem)],
        route(("svc", 443), ("plain", 443)),
    )
    (with_tls,) = t.actions[0].split.backends  # type: ignore[union-attr]
    (plain,) = t.actions[1].split.backends  # type: ignore[union-attr]
    ctx = tls_pb2.UpstreamTlsContext()
    backend_cluster(with_tls, endpoint_affinity=False).transport_socket.typed_config.Unpack(ctx)
    ((san,),) = [list(ctx.common_tls_context.validation_context.match_typed_subject_alt_names)]
    assert (san.san_type, san.matcher.exact) == (san.DNS, "abc.example.com")
    assert not backend_cluster(plain, endpoint_affinity=False).HasField("transport_socket")


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda m: setattr(m, "sni", "*.example.com"), "tls.sni:"),
        (
            lambda m: m.subject_alt_names.add(kind=pb.SubjectAltName.URI, value="no scheme"),
            "tls.subject_alt_names[0].value:",
        ),
        (lambda m: m.subject_alt_names.add(kind=7, value="x"), "tls.subject_alt_names[0].kind: unknown kind 7"),
        (lambda m: setattr(m, "system_ca", True), "tls: exactly one of ca_pem and system_ca is required"),
        (lambda m: setattr(m, "ca_pem", b"not pem"), "tls.ca_pem.ca_pem:"),
        (
            lambda m: [m.subject_alt_names.add(kind=pb.SubjectAltName.HOSTNAME, value="a.example") for _ in range(6)],
            "tls.subject_alt_names: 6 items, at most 5 are allowed",
        ),
    ],
)
def test_the_receiver_refuses_a_bad_backend_tls_by_its_path(mutate: Any, problem: str, ca_pem: str) -> None:
    t = run([policy("p", "svc")], [service("svc")], [configmap("ca", ca_pem)], route(("svc", 443)))
    msg = generation_to_proto(_generation(t), "test")
    mutate(msg.splits[0].backends[0].tls)
    with pytest.raises(SpecError) as exc:
        generation_from_proto(msg)
    assert any(problem in q for q in exc.value.problems), exc.value.problems


# --- the Gateway's client certificate toward backends (spec.tls.backend) ---------------------------------------------


@pytest.fixture(scope="module")
def client_secret(tmp_path_factory: pytest.TempPathFactory) -> TlsSecret:
    d: Path = tmp_path_factory.mktemp("backendclient")
    leaf = issue(d, make_ca(d, "gateway-client-ca"), "gateway.example", server=False, stem="client")
    body = secret(leaf.cert.read_bytes(), leaf.key.read_bytes())
    body["metadata"]["name"] = "client"
    return parse_tls_secret(body)


def gateway_with_client(ref: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "gw", "namespace": NS, "generation": 2},
        "spec": {
            "gatewayClassName": "ts",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
            "tls": {"backend": {"clientCertificateRef": ref}},
        },
    }


def run_with_client(ref: dict[str, Any], secrets: dict[tuple[str, str], TlsSecret], ca_pem: str) -> Translation:
    return translate(
        Inputs(
            classes=(CLASS,),
            gateways=(parse_gateway(gateway_with_client(ref)),),
            routes=(parse_httproute(route(("svc", 443), ("plain", 443))),),
            services={(NS, "svc"): service("svc"), (NS, "plain"): service("plain")},
            slices={(NS, s): (ready_slice(s),) for s in ("svc", "plain")},
            configmaps={(NS, "ca"): configmap("ca", ca_pem)},
            secrets=secrets,
            backend_tls=(parse_backend_tls_policy(policy("p", "svc")),),
        )
    )


@pytest.mark.parametrize(
    ("ref", "reason"),
    [  # the suite's GatewayInvalidTLSBackendConfiguration cases
        ({"name": "nonexistent-certificate"}, "InvalidClientCertificateRef"),
        ({"group": "wrong.group.company.io", "kind": "Secret", "name": "client"}, "InvalidClientCertificateRef"),
        ({"group": "", "kind": "WrongKind", "name": "client"}, "InvalidClientCertificateRef"),
        ({"name": "malformed"}, "InvalidClientCertificateRef"),
        ({"name": "client", "namespace": "elsewhere"}, "RefNotPermitted"),
    ],
)
def test_a_client_certificate_ref_that_does_not_resolve_keeps_the_gateway_accepted(
    ref: dict[str, Any], reason: str, client_secret: TlsSecret, ca_pem: str
) -> None:
    malformed = parse_tls_secret({"metadata": {"name": "malformed", "namespace": NS}, "type": "Opaque", "data": {}})
    elsewhere = TlsSecret("elsewhere", "client", certificate=client_secret.certificate)
    secrets = {(NS, "client"): client_secret, (NS, "malformed"): malformed, ("elsewhere", "client"): elsewhere}
    t = run_with_client(ref, secrets, ca_pem)
    (gs,) = t.gateways
    conds = {c.type: (c.status, c.reason) for c in gs.conditions}
    assert conds["Accepted"] == ("True", "Accepted")
    assert conds["ResolvedRefs"] == ("False", reason)
    assert all(c.observed_generation == 2 for c in gs.conditions)
    gen = _generation_of(t)
    assert gen.routes is not None and gen.routes.backend_client_certificate is None
    assert "trafficsplit_backend_client" not in (sds_secrets(gen) or {})


def test_a_resolved_client_certificate_is_presented_to_tls_backends_only(client_secret: TlsSecret, ca_pem: str) -> None:
    t = run_with_client({"group": "", "kind": "Secret", "name": "client"}, {(NS, "client"): client_secret}, ca_pem)
    (gs,) = t.gateways
    assert {c.type: (c.status, c.reason) for c in gs.conditions}["ResolvedRefs"] == ("True", "ResolvedRefs")
    gen = generation_from_proto(generation_to_proto(_generation_of(t), "test"))  # through the proto, as received
    assert gen.routes is not None and gen.routes.backend_client_certificate == client_secret.certificate
    sds = sds_secrets(gen) or {}
    assert sds["trafficsplit_backend_client"].tls_certificate.certificate_chain.inline_bytes == (
        client_secret.certificate.chain_pem if client_secret.certificate else b""
    )
    clusters = resources(gen).clusters
    by_service = {b.service: b.cluster for s in gen.splits for b in s.backends}
    ctx = tls_pb2.UpstreamTlsContext()
    clusters[by_service["svc"]].transport_socket.typed_config.Unpack(ctx)
    (sds_config,) = ctx.common_tls_context.tls_certificate_sds_secret_configs
    assert sds_config.name == "trafficsplit_backend_client" and sds_config.sds_config.HasField("ads")
    assert not clusters[by_service["plain"]].HasField("transport_socket")  # cleartext backends are shown nothing


def test_the_packed_builder_follows_the_client_certificate(client_secret: TlsSecret, ca_pem: str) -> None:
    """The ADS builder keeps a split's packed clusters: the same split with and without the Gateway's client
    certificate must not share them."""
    without = _generation_of(
        run([policy("p", "svc")], [service("svc")], [configmap("ca", ca_pem)], route(("svc", 443)))
    )
    with_client = _generation_of(
        run_with_client({"group": "", "kind": "Secret", "name": "client"}, {(NS, "client"): client_secret}, ca_pem)
    )
    builder = ResourceBuilder()
    for gen, expected in ((without, 0), (with_client, 1), (without, 0)):
        packed = builder.resources(gen)
        (name,) = [b.cluster for s in gen.splits for b in s.backends if b.service == "svc"]
        cluster = cluster_pb2.Cluster()
        packed.clusters[name].Unpack(cluster)
        ctx = tls_pb2.UpstreamTlsContext()
        cluster.transport_socket.typed_config.Unpack(ctx)
        assert len(ctx.common_tls_context.tls_certificate_sds_secret_configs) == expected


def _generation_of(t: Translation) -> Generation:
    return gateway_content(t, f"{NS}/gw").stamp(1)


def test_the_operator_reads_the_client_certificates_secret_and_only_a_permitted_one() -> None:
    ours = parse_gateway(gateway_with_client({"name": "client"}))
    far = parse_gateway(gateway_with_client({"name": "client", "namespace": "elsewhere"}))
    assert certificate_secrets([ours], ()) == {(NS, "client")}
    assert certificate_secrets([far], ()) == frozenset()  # no ReferenceGrant: never read
