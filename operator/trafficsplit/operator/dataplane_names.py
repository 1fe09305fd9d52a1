"""The names and labels of a Gateway's provisioned data plane, in one place: the provisioner creates the objects
under these names, the engine finds the replicas to publish to through them, and cleanup finds what a deleted
Gateway left behind.

Every object lives in the operator's namespace (as Envoy Gateway's provisioner does), so the publish port's TLS
secret and token are shared, and owner references, which cannot cross namespaces, are replaced by the labels below.
A Gateway's name can be 253 characters and a namespace 63, while an object name that is also a Service name is at
most 63 (an RFC 1035 label) and a label value at most 63: the name is a short readable prefix plus 128 bits of a
SHA-256 of the `namespace` and `name` (as a JSON pair, so no two pairs encode alike), and the full identity is kept
in annotations. 128 bits, because every tenant picks its Gateway's name: with 32 bits a tenant of `shop-storefront`
found a name whose objects were `shop`'s by a 2^32 search; no search finds a 128-bit collision.

The name is not what makes an object a Gateway's: every object carries its Gateway's uid (`GATEWAY_UID_LABEL`), and
the provisioner applies or deletes an object only when that uid is the Gateway's (`ownership.py`).
"""

from __future__ import annotations

import hashlib
import json
import re

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


def selector_labels(namespace: str, name: str) -> dict[str, str]:
    """The labels every provisioned object carries, and the pods' selector."""
    return {GATEWAY_LABEL: dataplane_name(namespace, name), COMPONENT_LABEL: COMPONENT}
