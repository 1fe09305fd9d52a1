from typing import Any

import pytest

from tests.support.provision import gateway, settings
from trafficsplit.core.gatewayapi.parameters import DEFAULT_PARAMETERS
from trafficsplit.core.model.errors import SpecError
from trafficsplit.operator.dataplane_names import GATEWAY_UID_LABEL
from trafficsplit.operator.ownership import Foreign, NameConflict, foreign, orphaned, owner_uid
from trafficsplit.operator.provision import render


def body(name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}}}


def test_every_rendered_object_carries_its_gateways_uid() -> None:
    gw = gateway(80, name="web", uid="1b4e28ba-2fa1-11d2-883f-0016d3cca427")
    rendered = render(gw, DEFAULT_PARAMETERS, settings())
    assert rendered.objects and all(owner_uid(o) == gw.meta.uid for o in rendered.objects)
    deployment = rendered.of_kind("Deployment")[0]
    assert deployment["spec"]["template"]["metadata"]["labels"][GATEWAY_UID_LABEL] == gw.meta.uid
    assert GATEWAY_UID_LABEL not in deployment["spec"]["selector"]["matchLabels"]  # a selector cannot change


def test_only_objects_carrying_the_gateways_own_uid_are_its_own() -> None:
    mine = body("a", {GATEWAY_UID_LABEL: "u1"})
    other = body("b", {GATEWAY_UID_LABEL: "u2"}, {"trafficsplit.dev/gateway-namespace": "shop-storefront",
                                                  "trafficsplit.dev/gateway-name": "x"})  # fmt: skip
    nobody = body("c")
    assert foreign("u1", [("Service", mine)]) == ()
    assert foreign("u1", [("Service", mine), ("Deployment", other), ("Secret", nobody)]) == (
        Foreign("Deployment", "b", "Gateway shop-storefront/x (uid u2)"),
        Foreign("Secret", "c", "no Gateway uid label"),
    )
    # A Gateway without a uid owns nothing, not even an object without the label.
    assert foreign("", [("Service", nobody)]) == (Foreign("Service", "c", "no Gateway uid label"),)


def test_a_name_conflict_names_the_objects_and_says_nothing_was_touched() -> None:
    many = [Foreign("Service", f"s{i}", "uid u2") for i in range(7)]
    message = str(NameConflict("ts-system", many))
    assert "Service ts-system/s0 belongs to uid u2" in message and "(and 2 more)" in message
    assert "nothing of the data plane applied or deleted" in message
    assert NameConflict("ts-system", many).reason == "NameConflict"


def test_cleanup_deletes_only_what_no_live_gateway_owns() -> None:
    live = frozenset({"u1"})
    assert not orphaned(body("a", {GATEWAY_UID_LABEL: "u1"}), live)
    assert orphaned(body("b", {GATEWAY_UID_LABEL: "u2"}), live)  # its Gateway is gone
    assert orphaned(body("c"), live)  # made before uids were labelled: its name is no current Gateway's


def test_a_gateways_uid_is_read_and_one_that_cannot_be_a_label_value_is_refused() -> None:
    assert gateway(80, uid="1b4e28ba-2fa1").meta.uid == "1b4e28ba-2fa1"
    with pytest.raises(SpecError, match=r"metadata\.uid"):
        gateway(80, uid="a b/c")
    with pytest.raises(SpecError, match=r"metadata\.uid"):
        gateway(80, uid="u" * 64)
