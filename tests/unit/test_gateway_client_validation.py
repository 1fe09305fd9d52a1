"""Client certificate validation (a Gateway's `spec.tls.frontend`): the spec as read, the CA ConfigMap's checks, the
listener conditions for each way a caCertificateRef fails (the suite's GatewayInvalidFrontendClientCertificateValidation
cases, as a table), the Gateway's InsecureFrontendValidationMode, what the operator reads, and what reaches the data
plane: the generation (and its proto), the SDS validation context, the bootstrap's `:mtls` listener flag."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, tls_pb2

from tests.support.certs import issue, make_ca
from tests.support.provision import bootstrap_container, settings
from tests.unit.test_gateway_tls import secret
from trafficsplit.core.gatewayapi.inputs import gateway_inputs
from trafficsplit.core.gatewayapi.listeners import ca_configmaps, listener_views
from trafficsplit.core.gatewayapi.objects import (
    ValidationMode,
    parse_gateway,
    parse_gateway_class,
    parse_reference_grant,
)
from trafficsplit.core.gatewayapi.parameters import DEFAULT_PARAMETERS
from trafficsplit.core.gatewayapi.translate import Inputs, gateway_content, translate
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.tls import (
    MAX_CA_CERTIFICATES,
    MAX_PEM_BYTES,
    CaBundle,
    ClientCertificates,
    TlsSecret,
    parse_ca_configmap,
    parse_tls_secret,
)
from trafficsplit.operator.provision import render
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.bootstrap import Address, GatewayListener, tls_socket
from trafficsplit.wire.envoy import validation_secret_name
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto
from trafficsplit.wire.snapshot import secrets as sds_secrets

CLASS = parse_gateway_class(
    {"metadata": {"name": "ts"}, "spec": {"controllerName": "trafficsplit.dev/gateway-controller"}}
)
TLS = {"certificateRefs": [{"name": "cert"}]}


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> TlsSecret:
    """The listeners' server certificate (Secret infra/cert), so that only the client validation can fail."""
    d: Path = tmp_path_factory.mktemp("servercert")
    leaf = issue(d, make_ca(d, "server-ca"), "a.example.com", server=True, dns=("a.example.com",), stem="a")
    return parse_tls_secret(secret(leaf.cert.read_bytes(), leaf.key.read_bytes()))


@pytest.fixture(scope="module")
def ca_pem(tmp_path_factory: pytest.TempPathFactory) -> str:
    d: Path = tmp_path_factory.mktemp("clientca")
    return make_ca(d, "client-ca").path.read_text()


def gateway(frontend: Mapping[str, Any] | None, listeners: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "gatewayClassName": "ts",
        "listeners": list(
            listeners
            or [
                {"name": "https", "port": 443, "protocol": "HTTPS", "tls": TLS},
                {"name": "http", "port": 80, "protocol": "HTTP"},
            ]
        ),
    }
    if frontend is not None:
        spec["tls"] = {"frontend": dict(frontend)}
    return {"metadata": {"name": "gw", "namespace": "infra", "generation": 2}, "spec": spec}


def validation(*refs: Mapping[str, Any], mode: str | None = None) -> dict[str, Any]:
    v: dict[str, Any] = {"caCertificateRefs": list(refs)}
    if mode is not None:
        v["mode"] = mode
    return {"validation": v}


def cm_ref(name: str, **extra: str) -> dict[str, str]:
    return {"group": "", "kind": "ConfigMap", "name": name, **extra}


def configmap(name: str, data: Mapping[str, str], ns: str = "infra") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns}, "data": dict(data)}


# --- the spec as read -------------------------------------------------------------------------------------------------


def test_the_frontend_spec_reads_a_default_and_per_port_validations() -> None:
    gw = parse_gateway(
        gateway(
            {
                "default": validation(cm_ref("ca")),
                "perPort": [
                    {"port": 8443, "tls": validation(cm_ref("ca2", namespace="certs"), mode="AllowInsecureFallback")},
                    {"port": 9443, "tls": {}},
                ],
            }
        )
    )
    default, fallback = gw.client_validation(443), gw.client_validation(8443)
    assert default is not None and default.mode is ValidationMode.ALLOW_VALID_ONLY
    assert [(r.namespace, r.name) for r in default.ca_refs] == [("infra", "ca")]
    assert default.path == "spec.tls.frontend.default.validation"
    assert fallback is not None and fallback.mode is ValidationMode.ALLOW_INSECURE_FALLBACK
    assert [(r.namespace, r.name) for r in fallback.ca_refs] == [("certs", "ca2")]
    assert fallback.path == "spec.tls.frontend.perPort[0].tls.validation"
    assert gw.client_validation(9443) is None  # a port entry without validation turns it off there
    assert parse_gateway(gateway(None)).client_validation(443) is None
    assert gw.problems == ()


@pytest.mark.parametrize(
    ("frontend", "problem"),
    [
        ({"perPort": []}, "spec.tls.frontend.default: required"),
        ({"default": {"validation": {"caCertificateRefs": []}}}, "caCertificateRefs: at least one reference"),
        ({"default": validation(cm_ref("ca"), mode="Sometimes")}, "spec.tls.frontend.default.validation.mode"),
        (
            {"default": {}, "perPort": [{"port": 8443, "tls": {}}, {"port": 8443, "tls": {}}]},
            "perPort[1].port: port 8443 has a TLS configuration already",
        ),
        ({"default": validation({"group": "", "name": "ca"})}, "caCertificateRefs[0].kind: required"),
    ],
)
def test_a_malformed_frontend_spec_is_refused_naming_the_field(frontend: dict[str, Any], problem: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_gateway(gateway(frontend))
    assert any(problem in p for p in exc.value.problems), exc.value.problems


def test_backend_tls_is_read_as_the_client_certificate_toward_backends() -> None:
    """spec.tls.backend (refused as unsupported before BackendTLSPolicy): its ref as written, namespace defaulted."""
    body = gateway(None)
    body["spec"]["tls"] = {"backend": {"clientCertificateRef": {"name": "c"}}}
    gw = parse_gateway(body)
    assert gw.problems == ()
    assert gw.backend_client_certificate is not None
    ref = gw.backend_client_certificate
    assert (ref.group, ref.kind, ref.namespace, ref.name) == ("", "Secret", "infra", "c")


# --- the CA ConfigMap ------------------------------------------------------------------------------------------------


def test_a_configmap_gives_its_bundle(ca_pem: str) -> None:
    cm = parse_ca_configmap(configmap("ca", {"ca.crt": ca_pem}))
    assert cm.problem is None and cm.bundle == CaBundle(ca_pem.encode())
    assert (cm.namespace, cm.name) == ("infra", "ca")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({}, "data[ca.crt] is missing"),
        ({"ca.crt": "hello"}, "data[ca.crt]: no PEM block"),
        ({"ca.crt": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}, "every block must be a CERT"),
        ({"ca.crt": "x" * (MAX_PEM_BYTES + 1)}, f"larger than {MAX_PEM_BYTES} bytes"),
    ],
)
def test_a_configmap_that_is_no_ca_bundle_says_why(data: dict[str, str], problem: str) -> None:
    cm = parse_ca_configmap(configmap("ca", data))
    assert cm.bundle is None and cm.problem is not None and problem in cm.problem


def test_a_bundle_is_bounded_in_certificates(ca_pem: str) -> None:
    with pytest.raises(SpecError, match=f"at most {MAX_CA_CERTIFICATES}"):
        CaBundle(
            ("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n" * (MAX_CA_CERTIFICATES + 1)).encode()
        )
    assert (
        CaBundle.joined([CaBundle(ca_pem.encode()), CaBundle(ca_pem.rstrip("\n").encode())]).pem.count(
            b"BEGIN CERTIFICATE"
        )
        == 2
    )


# --- the listeners' conditions ---------------------------------------------------------------------------------------


def views(
    cert: TlsSecret, frontend: Mapping[str, Any], configmaps: Sequence[Mapping[str, Any]], grants: Sequence[Any] = ()
) -> dict[str, dict[str, tuple[str, str]]]:
    gw = parse_gateway(
        gateway(
            frontend,
            [
                {"name": "https", "port": 443, "protocol": "HTTPS", "tls": TLS},
                {"name": "https-other", "port": 8443, "protocol": "HTTPS", "hostname": "b.example.com", "tls": TLS},
                {"name": "http", "port": 80, "protocol": "HTTP"},
            ],
        )
    )
    cms = {(c.namespace, c.name): c for c in map(parse_ca_configmap, configmaps)}
    out = {}
    for v in listener_views(gw, tuple(map(parse_reference_grant, grants)), {cert.key: cert}, cms):
        out[v.listener.name] = {c.type: (c.status, c.reason) for c in v.conditions}
    return out


GRANT = {
    "metadata": {"name": "g", "namespace": "certs"},
    "spec": {
        "from": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "infra"}],
        "to": [{"group": "", "kind": "ConfigMap"}],
    },
}


@pytest.mark.parametrize(
    ("ref", "grants", "resolved", "accepted"),
    [
        # the suite's four cases (GatewayInvalidFrontendClientCertificateValidation), and a granted one
        (cm_ref("ca"), (), ("True", "ResolvedRefs"), ("True", "Accepted")),
        (cm_ref("nope"), (), ("False", "InvalidCACertificateRef"), ("False", "NoValidCACertificate")),
        (
            {"group": "", "kind": "Service", "name": "ca"},
            (),
            ("False", "InvalidCACertificateKind"),
            ("False", "NoValidCACertificate"),
        ),
        (cm_ref("ca", namespace="certs"), (), ("False", "RefNotPermitted"), ("False", "NoValidCACertificate")),
        (cm_ref("ca", namespace="certs"), (GRANT,), ("True", "ResolvedRefs"), ("True", "Accepted")),
        (cm_ref("bad"), (), ("False", "InvalidCACertificateRef"), ("False", "NoValidCACertificate")),
    ],
)
def test_each_way_a_ca_ref_fails_is_its_listeners_condition(
    cert: TlsSecret,
    ca_pem: str,
    ref: dict[str, str],
    grants: tuple[dict[str, Any], ...],
    resolved: tuple[str, str],
    accepted: tuple[str, str],
) -> None:
    cms = [configmap("ca", {"ca.crt": ca_pem}), configmap("ca", {"ca.crt": ca_pem}, "certs"), configmap("bad", {})]
    got = views(
        cert, {"default": validation(cm_ref("ca")), "perPort": [{"port": 8443, "tls": validation(ref)}]}, cms, grants
    )
    assert (got["https-other"]["ResolvedRefs"], got["https-other"]["Accepted"]) == (resolved, accepted)
    programmed = "Unknown" if accepted[0] == "True" else "False"  # Unknown: pending the replicas' ACK
    assert got["https-other"]["Programmed"][0] == programmed
    # the other ports are untouched: the default's port serves, the HTTP listener ignores validation
    assert got["https"]["Accepted"] == ("True", "Accepted") and got["https"]["ResolvedRefs"][0] == "True"
    assert got["http"]["Accepted"] == ("True", "Accepted") and got["http"]["ResolvedRefs"][0] == "True"


def test_one_bad_ref_beside_a_good_one_is_reported_and_the_good_one_served(cert: TlsSecret, ca_pem: str) -> None:
    cms = [configmap("ca", {"ca.crt": ca_pem})]
    got = views(cert, {"default": validation(cm_ref("ca"), cm_ref("nope"))}, cms)
    assert got["https"]["ResolvedRefs"] == ("False", "InvalidCACertificateRef")
    assert got["https"]["Accepted"] == ("True", "Accepted")


def test_insecure_fallback_is_the_gateways_condition_while_it_lasts() -> None:
    def conditions(frontend: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
        gw = parse_gateway(gateway(frontend))
        t = translate(Inputs(classes=(CLASS,), gateways=(gw,)))
        (status,) = (g for g in t.gateways if g.gateway == "infra/gw")
        return {c.type: (c.status, c.reason) for c in status.conditions}

    fallback = {"default": validation(cm_ref("ca"), mode="AllowInsecureFallback")}
    assert conditions(fallback)["InsecureFrontendValidationMode"] == ("True", "ConfigurationChanged")
    assert "InsecureFrontendValidationMode" not in conditions({"default": validation(cm_ref("ca"))})
    # an HTTP port's entry says nothing about TLS
    http_only = {
        "default": validation(cm_ref("ca")),
        "perPort": [{"port": 80, "tls": validation(cm_ref("ca"), mode="AllowInsecureFallback")}],
    }
    assert "InsecureFrontendValidationMode" not in conditions(http_only)


# --- what the operator reads -----------------------------------------------------------------------------------------


def test_the_operator_reads_the_configmaps_a_validation_may_use() -> None:
    gw = parse_gateway(
        gateway(
            {
                "default": validation(cm_ref("ca")),
                "perPort": [
                    {"port": 8443, "tls": validation(cm_ref("other", namespace="certs"))},
                    {"port": 80, "tls": validation(cm_ref("for-http"))},
                ],
            },
            [
                {"name": "https", "port": 443, "protocol": "HTTPS", "tls": TLS},
                {"name": "https-other", "port": 8443, "protocol": "HTTPS", "tls": TLS},
                {"name": "http", "port": 80, "protocol": "HTTP"},
            ],
        )
    )
    grant = parse_reference_grant(GRANT)
    assert ca_configmaps([gw], [grant]) == {("infra", "ca"), ("certs", "other")}
    assert ca_configmaps([gw], []) == {("infra", "ca")}  # another namespace's only with a grant


def test_a_gateways_cut_of_the_inputs_holds_its_configmaps_and_their_grants(ca_pem: str) -> None:
    gw = parse_gateway(gateway({"default": validation(cm_ref("ca", namespace="certs"))}))
    cms = {(c.namespace, c.name): c for c in map(parse_ca_configmap, [configmap("ca", {"ca.crt": ca_pem}, "certs")])}
    unrelated = parse_ca_configmap(configmap("else", {"ca.crt": ca_pem}))
    inputs = Inputs(
        classes=(CLASS,),
        gateways=(gw,),
        grants=(parse_reference_grant(GRANT),),
        configmaps={**cms, ("infra", "else"): unrelated},
    )
    cut = gateway_inputs(inputs)["infra/gw"]
    assert set(cut.configmaps or {}) == {("certs", "ca")}
    assert [g.meta.namespace for g in cut.grants] == ["certs"]


# --- what reaches the data plane --------------------------------------------------------------------------------------


def test_the_generation_carries_the_bundle_to_sds_and_through_the_proto(cert: TlsSecret, ca_pem: str) -> None:
    s = cert
    gw = parse_gateway(gateway({"default": validation(cm_ref("ca"), mode="AllowInsecureFallback")}))
    t = translate(
        Inputs(
            classes=(CLASS,),
            gateways=(gw,),
            secrets={s.key: s},
            configmaps={("infra", "ca"): parse_ca_configmap(configmap("ca", {"ca.crt": ca_pem}))},
        )
    )
    gen = gateway_content(t, "infra/gw").stamp(1)
    assert gen.routes is not None
    by_port = {lr.port: lr.client_validation for lr in gen.routes.listeners}
    assert by_port[80] is None
    v = by_port[443]
    assert v is not None and v.insecure_fallback and v.ca.pem == ca_pem.encode()
    sds = sds_secrets(gen) or {}
    assert sds[validation_secret_name(443)].validation_context.trusted_ca.inline_bytes == ca_pem.encode()
    assert validation_secret_name(80) not in sds
    back = generation_from_proto(generation_to_proto(gen, origin="test"))
    assert back.routes is not None and back.routes.listeners == gen.routes.listeners


def test_a_proto_with_a_bad_bundle_is_refused_by_its_path(cert: TlsSecret) -> None:
    msg = pb.Generation()
    msg.number = 1
    routes = msg.routes
    routes.gateway = "infra/gw"
    lr = routes.listeners.add(listener="https", port=443)
    assert cert.certificate is not None
    lr.certificate.chain_pem, lr.certificate.key_pem = cert.certificate.chain_pem, cert.certificate.key_pem
    lr.client_validation.ca_pem = b"not pem"
    with pytest.raises(SpecError) as exc:
        generation_from_proto(msg)
    assert any("listeners[0].client_validation" in p for p in exc.value.problems), exc.value.problems


@pytest.mark.parametrize(
    ("flag", "mode"),
    [
        ("443=0.0.0.0:10443:https:a.example.com,*:mtls=require", ClientCertificates.REQUIRE),
        ("443=0.0.0.0:10443:https:mtls=optional", ClientCertificates.OPTIONAL),
        ("443=0.0.0.0:10443:https", None),
    ],
)
def test_the_listener_flag_carries_the_mode(flag: str, mode: ClientCertificates | None) -> None:
    assert GatewayListener.parse(flag).client_certificates is mode


@pytest.mark.parametrize("flag", ["443=0.0.0.0:10443:https:mtls=maybe", "80=0.0.0.0:10080:mtls=require"])
def test_a_bad_mtls_flag_is_refused(flag: str) -> None:
    with pytest.raises(ValueError):
        GatewayListener.parse(flag)


@pytest.mark.parametrize(
    ("mode", "required", "verification"),
    [
        (ClientCertificates.REQUIRE, True, common_pb2.CertificateValidationContext.VERIFY_TRUST_CHAIN),
        (ClientCertificates.OPTIONAL, False, common_pb2.CertificateValidationContext.ACCEPT_UNTRUSTED),
    ],
)
def test_a_validating_chain_asks_for_certificates_and_names_its_ports_ca(
    mode: ClientCertificates, required: bool, verification: int
) -> None:
    socket = tls_socket(GatewayListener(443, Address("0.0.0.0", 10443), ("*",), mode), "*")
    ctx = tls_pb2.DownstreamTlsContext()
    socket.typed_config.Unpack(ctx)
    assert ctx.require_client_certificate.value is required
    combined = ctx.common_tls_context.combined_validation_context
    assert combined.default_validation_context.trust_chain_verification == verification
    assert combined.validation_context_sds_secret_config.name == validation_secret_name(443)
    plain = tls_pb2.DownstreamTlsContext()
    tls_socket(GatewayListener(443, Address("0.0.0.0", 10443), ("*",)), "*").typed_config.Unpack(plain)
    assert not plain.HasField("require_client_certificate")
    assert not plain.common_tls_context.HasField("combined_validation_context")


def test_the_provisioner_renders_each_ports_mode() -> None:
    gw = parse_gateway(
        gateway(
            {
                "default": validation(cm_ref("ca")),
                "perPort": [
                    {"port": 8443, "tls": validation(cm_ref("ca"), mode="AllowInsecureFallback")},
                    {"port": 9443, "tls": {}},
                    {"port": 80, "tls": validation(cm_ref("ca"))},
                ],
            },
            [
                {"name": "a", "port": 443, "protocol": "HTTPS", "tls": TLS},
                {"name": "b", "port": 8443, "protocol": "HTTPS", "tls": TLS},
                {"name": "c", "port": 9443, "protocol": "HTTPS", "tls": TLS},
                {"name": "http", "port": 80, "protocol": "HTTP"},
            ],
        )
    )
    flags = [a for a in bootstrap_container(render(gw, DEFAULT_PARAMETERS, settings()))["args"] if "--listener=" in a]
    assert flags == [
        "--listener=80=0.0.0.0:10080",
        "--listener=443=0.0.0.0:10443:https:*:mtls=require",
        "--listener=8443=0.0.0.0:8443:https:*:mtls=optional",
        "--listener=9443=0.0.0.0:9443:https:*",
    ]
