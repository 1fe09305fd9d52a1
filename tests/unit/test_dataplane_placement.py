"""Placement (GatewayParameters `spec.placement`, the installation's default): where a Gateway's data plane objects
live, their names there (unique by construction in the Gateway's namespace), what the pods mount there, and the
installation's consent to that placement. Pure: provision.render and dataplane_names."""

from __future__ import annotations

import base64
import hashlib
import itertools
import re
from typing import Any

import pytest

from tests.support.provision import OPERATOR_LABELS, gateway, params, settings, settings_doc
from trafficsplit.core.gatewayapi.parameters import DEFAULT_PARAMETERS, Placement
from trafficsplit.operator.dataplane_names import (
    GATEWAY_LABEL,
    GATEWAY_UID_LABEL,
    dataplane_name,
    gateway_namespace_name,
    names_for,
)
from trafficsplit.operator.provision import (
    PUBLISH_TOKEN_DIGEST_ANNOTATION,
    CookieKeys,
    ProvisionError,
    Rendered,
    parse_publish_token,
    parse_settings,
    render,
)

RFC1035 = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
KEYS = CookieKeys(current="ab" * 32, since=1)
TOKEN = "cd" * 32
TLS = {k: base64.b64encode(k.encode()).decode() for k in ("tls.crt", "tls.key", "ca.crt")}
HERE = params({"placement": "GatewayNamespace"})


def allowed(**changes: Any) -> Any:
    import json

    doc = {**settings_doc(), "gatewayNamespace": True, **changes}
    return parse_settings(json.dumps(doc))


def names(r: Rendered) -> set[tuple[str, str, str]]:
    return {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in r.objects}


def test_the_default_is_the_operators_namespace_and_its_names() -> None:
    r = render(gateway(80), DEFAULT_PARAMETERS, settings(), KEYS)
    assert {ns for _, ns, _ in names(r)} == {"ts-system"}
    assert r.name == dataplane_name("shop", "web")
    assert all("ownerReferences" not in o["metadata"] for o in r.objects)


def test_gateway_namespace_puts_every_object_beside_the_gateway_owned_by_it() -> None:
    gw = gateway(80)
    r = render(gw, HERE, allowed(), KEYS, token=TOKEN, tls=TLS)
    assert names(r) == {
        ("Secret", "shop", "ts-web-cookie-keys"),
        ("Secret", "shop", "ts-web-publish-token"),
        ("Secret", "shop", "ts-web-publish-tls"),
        ("Deployment", "shop", "ts-web"),
        ("Service", "shop", "ts-web"),
        ("Service", "shop", "tsp-web"),
        ("PodDisruptionBudget", "shop", "ts-web"),
        ("NetworkPolicy", "shop", "ts-web"),
    }
    for o in r.objects:
        meta = o["metadata"]
        assert meta["labels"][GATEWAY_UID_LABEL] == gw.meta.uid and meta["labels"][GATEWAY_LABEL] == "ts-web"
        assert meta["ownerReferences"] == [
            {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": "web", "uid": gw.meta.uid}
        ]


def test_the_pods_mount_the_gateways_own_token_and_certificate_copy_and_need_no_account_of_the_operators() -> None:
    r = render(gateway(80), HERE, allowed(), KEYS, token=TOKEN, tls=TLS)
    pod = r.of_kind("Deployment")[0]["spec"]["template"]["spec"]
    vols = {v["name"]: v.get("secret", {}).get("secretName") for v in pod["volumes"]}
    assert vols["publish-token"] == "ts-web-publish-token"
    assert vols["publish-tls"] == "ts-web-publish-tls"
    assert vols["cookie-keys"] == "ts-web-cookie-keys"
    assert pod["serviceAccountName"] == "default" and pod["automountServiceAccountToken"] is False
    token = next(o for o in r.of_kind("Secret") if o["metadata"]["name"] == "ts-web-publish-token")
    assert base64.b64decode(token["data"]["token"]).decode() == TOKEN and parse_publish_token(token) == TOKEN
    tls = next(o for o in r.of_kind("Secret") if o["metadata"]["name"] == "ts-web-publish-tls")
    assert tls["data"] == TLS


@pytest.mark.parametrize("place", ["ControllerNamespace", "GatewayNamespace"])
def test_in_either_place_the_pods_mount_their_gateways_own_token_never_the_shared_one(place: str) -> None:
    """Before, ControllerNamespace pods mounted the installation's token Secret: every Gateway's replicas accepted
    the token every Gateway's fleet sent."""
    here = place == "GatewayNamespace"
    r = render(gateway(80), HERE if here else DEFAULT_PARAMETERS, allowed() if here else settings(), KEYS, token=TOKEN)
    pod = r.of_kind("Deployment")[0]["spec"]["template"]["spec"]
    vols = {v["name"]: v.get("secret", {}).get("secretName") for v in pod["volumes"]}
    token = next(o for o in r.of_kind("Secret") if o["metadata"]["name"] == vols["publish-token"])
    assert token["metadata"]["namespace"] == ("shop" if here else "ts-system")
    assert token["metadata"]["labels"][GATEWAY_UID_LABEL] == gateway(80).meta.uid
    assert parse_publish_token(token) == TOKEN
    assert vols["publish-token"] == (
        "ts-web-publish-token" if here else f"{dataplane_name('shop', 'web')}-publish-token"
    )


def test_a_new_publish_token_rolls_the_pods_the_same_one_does_not() -> None:
    """The extproc reads its token file once: a token Secret lost or rewritten gets a new token, which the pods only
    accept once they restart, so its digest is on the pod template."""

    def template(token: str) -> dict[str, Any]:
        r = render(gateway(80), DEFAULT_PARAMETERS, settings(), KEYS, token=token)
        out: dict[str, Any] = r.of_kind("Deployment")[0]["spec"]["template"]
        return out

    assert template(TOKEN) == template(TOKEN)
    other = template("f" * 64)
    assert other != template(TOKEN)
    assert (
        other["metadata"]["annotations"][PUBLISH_TOKEN_DIGEST_ANNOTATION] == hashlib.sha256(b"f" * 64).hexdigest()[:16]
    )


def test_the_publish_port_admits_the_operators_pods_by_their_namespace_too() -> None:
    r = render(gateway(80), HERE, allowed(), KEYS, token=TOKEN, tls=TLS)
    [np] = r.of_kind("NetworkPolicy")
    publish = next(rule for rule in np["spec"]["ingress"] if rule["ports"][0]["port"] == "publish")
    assert publish["from"] == [
        {
            "podSelector": {"matchLabels": OPERATOR_LABELS},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ts-system"}},
        }
    ]


def test_an_installation_that_did_not_grant_gateway_namespaces_refuses_the_placement_naming_the_field() -> None:
    with pytest.raises(ProvisionError, match=r"spec.placement: GatewayNamespace.*allowGatewayNamespace"):
        render(gateway(80), HERE, settings(), KEYS)


def test_the_installations_default_placement_applies_when_the_class_does_not_say() -> None:
    s = allowed(placement="GatewayNamespace")
    assert s.placement is Placement.GATEWAY_NAMESPACE and s.gateway_namespace_allowed
    r = render(gateway(80), DEFAULT_PARAMETERS, s, KEYS, token=TOKEN, tls=TLS)
    assert {ns for _, ns, _ in names(r)} == {"shop"}
    # and a class may still keep its data planes with the operator
    r = render(gateway(80), params({"placement": "ControllerNamespace"}), s, KEYS)
    assert {ns for _, ns, _ in names(r)} == {"ts-system"}


def test_a_bad_default_placement_stops_the_operator() -> None:
    with pytest.raises(ValueError, match="placement 'Elsewhere'"):
        allowed(placement="Elsewhere")


NAMES = ["web", "a", "web-publish", "p-web", "h-web", "a.b", "a-b", "x" * 59, "x" * 60, "y" * 253, "y" * 252,
         "tsp-web", "sh-web", "0web", "web0"]  # fmt: skip


def test_names_in_the_gateways_namespace_are_valid_and_unique_by_construction() -> None:
    got = {n: gateway_namespace_name(n) for n in NAMES}
    for base, publish in got.values():
        assert RFC1035.match(base) and RFC1035.match(publish), (base, publish)
        assert len(f"{base}-publish-token") <= 253
    assert got["web"] == ("ts-web", "tsp-web") and got["x" * 59] == ("ts-" + "x" * 59, "tsp-" + "x" * 59)
    assert got["a.b"][0].startswith("tsh-a-b-") and got["0web"][0].startswith("tsh-")  # not a plain RFC 1035 label
    # No two Gateways share a name of one kind (bases: Deployment/Service/PDB/NetworkPolicy; publish: Service;
    # and a base never equals another's publish, both being Services).
    services = [s for pair in got.values() for s in pair]
    assert len(set(services)) == len(services)
    for a, b in itertools.combinations(NAMES, 2):
        assert (
            names_for("t", a, Placement.GATEWAY_NAMESPACE, "ops").cookie_keys
            != names_for("t", b, Placement.GATEWAY_NAMESPACE, "ops").cookie_keys
        )


def test_the_controller_namespaces_names_are_unchanged() -> None:
    n = names_for("shop", "web", Placement.CONTROLLER_NAMESPACE, "ops")
    assert (n.namespace, n.base) == ("ops", dataplane_name("shop", "web"))
    assert n.cookie_keys == f"{dataplane_name('shop', 'web')}-cookie-keys"


@pytest.mark.parametrize("data", [{}, {"token": "bm90IGhleA=="}, {"token": "!!"}])
def test_a_token_secret_without_a_valid_token_reads_as_none(data: dict[str, str]) -> None:
    assert parse_publish_token({"data": data}) is None


def test_a_tls_copy_needs_every_key() -> None:
    with pytest.raises(ProvisionError, match=r"no ca\.crt"):
        render(gateway(80), HERE, allowed(), KEYS, token=TOKEN, tls={k: v for k, v in TLS.items() if k != "ca.crt"})


OBJ = {"kind": "Deployment", "metadata": {"name": "ts-web", "namespace": "quota"}}


def test_a_quota_refusal_is_no_resources_with_the_servers_message() -> None:
    from trafficsplit.operator.provisioner import QuotaExceeded, apply_refusal

    body = '{"message": "deployments.apps \\"ts-web\\" is forbidden: exceeded quota: dp, requested: x=1"}'
    refused = apply_refusal(403, body, OBJ)
    assert isinstance(refused, QuotaExceeded) and refused.reason == "NoResources"
    assert (
        str(refused)
        == 'Deployment quota/ts-web: deployments.apps "ts-web" is forbidden: exceeded quota: dp, requested: x=1'
    )


def test_another_refusal_names_the_object_and_the_message_and_an_outage_is_not_one() -> None:
    from trafficsplit.operator.provisioner import apply_refusal

    limit = apply_refusal(403, '{"message": "maximum memory usage per Container is 64Mi"}', OBJ)
    assert limit is not None and limit.reason == "ProvisioningFailed"
    assert str(limit) == "Deployment quota/ts-web: maximum memory usage per Container is 64Mi"
    assert str(apply_refusal(422, "not json", OBJ)) == "Deployment quota/ts-web: HTTP 422"
    assert [apply_refusal(s, "{}", OBJ) for s in (404, 409, 429, 500, 503)] == [None] * 5
