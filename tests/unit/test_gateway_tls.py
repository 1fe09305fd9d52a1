"""An HTTPS listener's certificate: the Secret it comes from, the checks on its PEM, and the listener status the
translation gives for each way a certificateRef fails."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.certs import issue, make_ca
from trafficsplit.core.decide.request import Request
from trafficsplit.core.gatewayapi.objects import (
    ReferenceGrant,
    parse_gateway,
    parse_gateway_class,
    parse_reference_grant,
)
from trafficsplit.core.gatewayapi.translate import Inputs, translate
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import Generation, GenerationContent
from trafficsplit.core.model.routes import GatewayRoutes, ListenerRoutes
from trafficsplit.core.model.tls import MAX_PEM_BYTES, Certificate, TlsSecret, parse_tls_secret
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    d: Path = tmp_path_factory.mktemp("pki")
    leaf = issue(d, make_ca(d, "ca"), "a.example.com", server=True, dns=("a.example.com",), stem="a")
    return leaf.cert.read_bytes(), leaf.key.read_bytes()


def secret(chain: bytes, key: bytes, *, type_: str = "kubernetes.io/tls", ns: str = "infra") -> dict[str, Any]:
    return {
        "metadata": {"name": "cert", "namespace": ns},
        "type": type_,
        "data": {"tls.crt": base64.b64encode(chain).decode(), "tls.key": base64.b64encode(key).decode()},
    }


def test_a_tls_secret_gives_its_certificate(pem: tuple[bytes, bytes]) -> None:
    s = parse_tls_secret(secret(*pem))
    assert s.problem is None
    assert s.certificate == Certificate(*pem)


def test_the_key_never_shows_in_the_repr(pem: tuple[bytes, bytes]) -> None:
    text = repr(parse_tls_secret(secret(*pem)))
    assert b"PRIVATE" not in text.encode()
    assert pem[1].split(b"\n")[1].decode() not in text
    assert f"<{len(pem[1])} bytes>" in text


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda c, k: secret(c, k, type_="Opaque"), "type is not kubernetes.io/tls"),
        (
            lambda c, k: {**secret(c, k), "data": {"tls.crt": secret(c, k)["data"]["tls.crt"]}},
            "data[tls.key] is missing",
        ),
        (lambda c, k: {**secret(c, k), "data": {"tls.crt": "@@", "tls.key": "a2V5"}}, "data[tls.crt] is not base64"),
        (lambda c, k: secret(k, k), "tls.crt: every block must be a CERTIFICATE"),
        (lambda c, k: secret(c, c), "tls.key: must be one block of"),
        (lambda c, k: secret(b"junk" + c, k), "tls.crt: bytes outside a PEM block"),
        (lambda c, k: secret(c, k + k), "tls.key: must be one block of"),
        (lambda c, k: secret(c.replace(b"\n", b"!\n", 3), k), "tls.crt"),
    ],
)
def test_a_secret_that_cannot_serve_says_why_without_its_key(
    mutate: Any, problem: str, pem: tuple[bytes, bytes]
) -> None:
    s = parse_tls_secret(mutate(*pem))
    assert s.certificate is None
    assert s.problem is not None and problem in s.problem
    body = pem[1].split(b"\n")[1].decode()
    assert body not in s.problem


def test_each_part_is_bounded(pem: tuple[bytes, bytes]) -> None:
    big = pem[0] * (MAX_PEM_BYTES // len(pem[0]) + 1)
    with pytest.raises(SpecError, match=r"chain_pem: .* bytes, at most 65536"):
        Certificate(big, pem[1])
    assert "larger than 65536" in (parse_tls_secret(secret(big, pem[1])).problem or "")


GW: dict[str, Any] = {
    "metadata": {"name": "gw", "namespace": "infra", "generation": 1},
    "spec": {"gatewayClassName": "trafficsplit", "listeners": []},
}
CLASS = {"metadata": {"name": "trafficsplit"}, "spec": {"controllerName": "trafficsplit.dev/gateway-controller"}}


def listener_conditions(
    listener: dict[str, Any], secrets: list[TlsSecret], grants: Sequence[ReferenceGrant] = ()
) -> dict[str, str]:
    gw = parse_gateway({**GW, "spec": {**GW["spec"], "listeners": [{"name": "l", "port": 443, **listener}]}})
    t = translate(
        Inputs(
            classes=(parse_gateway_class(CLASS),),
            gateways=(gw,),
            grants=tuple(grants),
            secrets={s.key: s for s in secrets},
        )
    )
    (status,) = t.gateways[0].listeners
    out = {c.type: f"{c.status}/{c.reason}" for c in status.conditions}
    out["served"] = str(any(lr.listener == "l" for lr in t.listeners))
    return out


def test_listener_status_for_each_certificate_ref(pem: tuple[bytes, bytes]) -> None:
    ok = parse_tls_secret(secret(*pem))
    https = {"protocol": "HTTPS", "tls": {"certificateRefs": [{"name": "cert"}]}}
    assert listener_conditions(https, [ok]) == {
        "Accepted": "True/Accepted",
        "ResolvedRefs": "True/ResolvedRefs",
        "Conflicted": "False/NoConflicts",
        "Programmed": "Unknown/Pending",
        "served": "True",
    }
    missing = listener_conditions(https, [])
    assert (missing["Accepted"], missing["ResolvedRefs"]) == ("True/Accepted", "False/InvalidCertificateRef")
    assert (missing["Programmed"], missing["served"]) == ("False/Invalid", "False")
    no_refs = listener_conditions({"protocol": "HTTPS"}, [ok])
    assert no_refs["ResolvedRefs"] == "False/InvalidCertificateRef"
    kind = {"protocol": "HTTPS", "tls": {"certificateRefs": [{"group": "example.com", "kind": "Cert", "name": "cert"}]}}
    assert listener_conditions(kind, [ok])["ResolvedRefs"] == "False/InvalidCertificateRef"
    passthrough = {"protocol": "HTTPS", "tls": {"mode": "Passthrough", "certificateRefs": [{"name": "cert"}]}}
    assert listener_conditions(passthrough, [ok])["Accepted"] == "False/UnsupportedValue"
    assert (
        listener_conditions({"protocol": "HTTP", **{"tls": https["tls"]}}, [ok])["Accepted"] == "False/UnsupportedValue"
    )


def test_a_secret_in_another_namespace_needs_a_grant(pem: tuple[bytes, bytes]) -> None:
    other = parse_tls_secret(secret(*pem, ns="certs"))
    https = {"protocol": "HTTPS", "tls": {"certificateRefs": [{"name": "cert", "namespace": "certs"}]}}
    assert listener_conditions(https, [other])["ResolvedRefs"] == "False/RefNotPermitted"
    grant = parse_reference_grant(
        {
            "metadata": {"name": "g", "namespace": "certs"},
            "spec": {
                "from": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "infra"}],
                "to": [{"group": "", "kind": "Secret"}],
            },
        }
    )
    granted = listener_conditions(https, [other], [grant])
    assert (granted["ResolvedRefs"], granted["served"]) == ("True/ResolvedRefs", "True")


def https_generation(pem: tuple[bytes, bytes]) -> Generation:
    cert = Certificate(*pem)
    listener = ListenerRoutes("infra/gw", "secure", 443, (), hostname="a.example.com", certificate=cert)
    return GenerationContent(splits=(), routes=GatewayRoutes(gateway="infra/gw", listeners=(listener,))).stamp(7)


def test_the_certificate_comes_back_from_the_publish_proto(pem: tuple[bytes, bytes]) -> None:
    gen = https_generation(pem)
    msg = generation_to_proto(gen, origin="test")
    assert msg.routes.listeners[0].certificate.key_pem == pem[1]
    back = generation_from_proto(pb.Generation.FromString(msg.SerializeToString()))
    assert back == gen
    assert back.routes is not None and back.routes.listeners[0].certificate == Certificate(*pem)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda c, pem: setattr(c, "key_pem", pem[0]), "routes.listeners[0].certificate.key_pem: must be one block"),
        (lambda c, pem: setattr(c, "chain_pem", b""), "routes.listeners[0].certificate.chain_pem: no PEM block"),
        (
            lambda c, pem: setattr(c, "key_pem", pem[1] * 400),
            "routes.listeners[0].certificate.key_pem: ",
        ),
    ],
)
def test_the_receiver_refuses_a_bad_certificate_by_its_field_without_its_key(
    change: Any, fragment: str, pem: tuple[bytes, bytes]
) -> None:
    msg = generation_to_proto(https_generation(pem), origin="test")
    change(msg.routes.listeners[0].certificate, pem)
    with pytest.raises(SpecError) as refused:
        generation_from_proto(msg)
    assert fragment in str(refused.value)
    assert pem[1].split(b"\n")[1].decode() not in str(refused.value)


def test_a_redirect_on_an_https_listener_keeps_the_https_scheme(pem: tuple[bytes, bytes]) -> None:
    """A RequestRedirect without a scheme keeps the request's: on an HTTPS listener that is https (port 443 left
    out of the Location), never http."""
    from trafficsplit.core.decide.serve import Redirected, ServedRoutes
    from trafficsplit.core.gatewayapi.httproute import parse_httproute
    from trafficsplit.core.model.cookie import AffinityMinter

    https = {"name": "l", "port": 443, "protocol": "HTTPS", "tls": {"certificateRefs": [{"name": "cert"}]}}
    gw = parse_gateway({**GW, "spec": {**GW["spec"], "listeners": [https]}})
    route = parse_httproute(
        {
            "metadata": {"name": "r", "namespace": "infra", "generation": 1},
            "spec": {
                "parentRefs": [{"name": "gw"}],
                "rules": [
                    {
                        "filters": [
                            {"type": "RequestRedirect", "requestRedirect": {"hostname": "b.example.com"}},
                        ]
                    }
                ],
            },
        }
    )
    t = translate(
        Inputs(
            classes=(parse_gateway_class(CLASS),),
            gateways=(gw,),
            routes=(route,),
            secrets={("infra", "cert"): parse_tls_secret(secret(*pem))},
        )
    )
    s = ServedRoutes(t.listeners, t.actions)
    request = Request(authority="a.example.com", cookie_lines=(), request_id="rid", headers={":path": "/x?y=1"})
    out = s.route(443, request, minter=AffinityMinter())
    assert out == Redirected(302, "https://b.example.com/x?y=1")
