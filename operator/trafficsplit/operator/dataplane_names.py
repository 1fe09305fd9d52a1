"""The names and labels of a Gateway's provisioned data plane, in one place: the provisioner creates the objects
under these names, the engine finds the replicas to publish to through them, and cleanup finds what a deleted
Gateway left behind.

Where the objects live is the class's choice (`Placement`, `names_for`):

- ControllerNamespace (the default): the operator's namespace, as Envoy Gateway's default does; owner references,
  which cannot cross namespaces, are replaced by the labels below. Many Gateways' objects share that namespace, so
  the name is derived from the Gateway's namespace and name, as follows.
- GatewayNamespace: the Gateway's own namespace, where its name is already unique. A name that is an RFC 1035 label
  of at most `_MAX_PLAIN` characters gives `ts-<name>` (the publish Service `tsp-<name>`): unique by construction,
  no digest. A longer name or one with dots gives `tsh-<readable>-<32 hex of sha256(name)>`. The three prefixes
  differ in their third character and a digest name ends in a hex digit, so no two Gateways' names of one kind meet.

In the operator's namespace: a Gateway's name can be 253 characters and a namespace 63, while an object name that
is also a Service name is at most 63 (an RFC 1035 label) and a label value at most 63: the name is a short readable
prefix plus 128 bits of a SHA-256 of the `namespace` and `name` (as a JSON pair, so no two pairs encode alike), and
the full identity is kept in annotations. 128 bits, because every tenant picks its Gateway's name: with 32 bits a
tenant of `shop-storefront` found a name whose objects were `shop`'s by a 2^32 search; no search finds a 128-bit
collision.

The name is not what makes an object a Gateway's: every object carries its Gateway's uid (`GATEWAY_UID_LABEL`), and
the provisioner applies or deletes an object only when that uid is the Gateway's (`ownership.py`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from trafficsplit.core.gatewayapi.parameters import Placement

GATEWAY_LABEL = "trafficsplit.dev/gateway"  # value: dataplane_name(...), the selector of everything provisioned
COMPONENT_LABEL = "app.kubernetes.io/component"
COMPONENT = "gateway-dataplane"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "trafficsplit-operator"
GATEWAY_NAMESPACE_ANNOTATION = "trafficsplit.dev/gateway-namespace"
GATEWAY_NAME_ANNOTATION = "trafficsplit.dev/gateway-name"
GATEWAY_UID_LABEL = "trafficsplit.dev/gateway-uid"  # value: the owning Gateway's metadata.uid
PUBLISH_PORT_NAME = "publish"

_MAX_BASE = 63 - len("-publish")  # the longest suffix any provisioned object adds
_HASH = 32  # hex digits: 128 bits, too many to search for a collision
_NOT_DNS = re.compile(r"[^a-z0-9-]+")


def dataplane_name(namespace: str, name: str) -> str:
    """`ts-<namespace>-<name>` cut to fit, then `-<32 hex of sha256(["namespace","name"])>`: unique per Gateway, at
    most 55 characters, a valid RFC 1035 label (Gateway names may hold dots, which become dashes)."""
    identity = json.dumps([namespace, name], separators=(",", ":"))
    digest = hashlib.sha256(identity.encode()).hexdigest()[:_HASH]
    readable = _NOT_DNS.sub("-", f"ts-{namespace}-{name}".lower()).strip("-")
    readable = readable[: _MAX_BASE - _HASH - 1].rstrip("-")
    return f"{readable}-{digest}"


def publish_service_name(namespace: str, name: str) -> str:
    """The headless Service whose EndpointSlices list every replica of the Gateway's data plane (ready or not)."""
    return f"{dataplane_name(namespace, name)}-publish"


# GatewayNamespace: `tsp-<name>` is the longest plain name (the publish Service, an RFC 1035 label).
_MAX_PLAIN = 63 - len("tsp-")
_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def gateway_namespace_name(name: str) -> tuple[str, str]:
    """A Gateway's data plane in its own namespace: (the base name, the publish Service's name); see the module
    docstring."""
    if len(name) <= _MAX_PLAIN and _LABEL.fullmatch(name):
        return f"ts-{name}", f"tsp-{name}"
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH]
    readable = _NOT_DNS.sub("-", f"tsh-{name}".lower()).strip("-")[: _MAX_BASE - _HASH - 1].rstrip("-")
    base = f"{readable}-{digest}"
    return base, f"{base}-publish"


@dataclass(frozen=True, slots=True)
class DataplaneNames:
    """Where one Gateway's data plane objects live and what they are called."""

    namespace: str
    base: str  # the Deployment, the Service, the PDB and the NetworkPolicy; the selector label's value
    publish: str  # the headless publish Service
    placement: Placement

    @property
    def cookie_keys(self) -> str:
        return f"{self.base}-cookie-keys"

    @property
    def publish_token(self) -> str:
        """GatewayNamespace only: the Gateway's own publish token (the operator's shared one is never copied out)."""
        return f"{self.base}-publish-token"

    @property
    def publish_tls(self) -> str:
        """GatewayNamespace only: the copy of the gateways' publish certificate the pods mount."""
        return f"{self.base}-publish-tls"

    @property
    def selector(self) -> dict[str, str]:
        """The labels every provisioned object carries, and the pods' selector."""
        return {GATEWAY_LABEL: self.base, COMPONENT_LABEL: COMPONENT}


def names_for(namespace: str, name: str, placement: Placement, operator_namespace: str) -> DataplaneNames:
    """The Gateway `namespace`/`name`'s data plane, placed by its class."""
    if placement is Placement.GATEWAY_NAMESPACE:
        base, publish = gateway_namespace_name(name)
        return DataplaneNames(namespace, base, publish, placement)
    return DataplaneNames(
        operator_namespace, dataplane_name(namespace, name), publish_service_name(namespace, name), placement
    )


def selector_labels(namespace: str, name: str) -> dict[str, str]:
    """The labels every provisioned object carries in the operator's namespace, and the pods' selector."""
    return {GATEWAY_LABEL: dataplane_name(namespace, name), COMPONENT_LABEL: COMPONENT}
