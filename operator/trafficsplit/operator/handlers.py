"""The kopf handlers: each watch event goes into the engine's store and marks it dirty. Nothing else.

Why `on.event` into a store rather than kopf indexes: the engine's loop runs outside any handler (debounced, one pass
for a burst), and kopf hands indexes only to handlers as arguments. `on.event` handlers write nothing to the watched
objects (no finalizers, no progress annotations), so the operator needs only list/watch on them.
"""

from __future__ import annotations

from typing import Any

import kopf

from trafficsplit.operator.engine import Engine

WATCHED = (
    ("trafficsplit", "trafficsplit.dev", "v1alpha1", "trafficsplits"),
    ("service", "", "v1", "services"),
    ("endpointslice", "discovery.k8s.io", "v1", "endpointslices"),
)
# Watched when the API server serves Gateway API (kubeapi.gateway_api_missing); Namespaces for their labels, which
# listeners' `allowedRoutes.namespaces.selector` selects on.
GATEWAY_WATCHED = (
    ("gatewayclass", "gateway.networking.k8s.io", "v1", "gatewayclasses"),
    ("gateway", "gateway.networking.k8s.io", "v1", "gateways"),
    ("httproute", "gateway.networking.k8s.io", "v1", "httproutes"),
    ("referencegrant", "gateway.networking.k8s.io", "v1", "referencegrants"),
    ("namespace", "", "v1", "namespaces"),
    ("gatewayparameters", "trafficsplit.dev", "v1alpha1", "gatewayparameters"),
    ("trafficsplitpolicy", "trafficsplit.dev", "v1alpha1", "trafficsplitpolicies"),  # attached to HTTPRoutes
    ("backendtlspolicy", "gateway.networking.k8s.io", "v1", "backendtlspolicies"),  # TLS to routes' Services
    ("listenerset", "gateway.networking.k8s.io", "v1", "listenersets"),  # listeners added to our Gateways
)


def build_registry(engine: Engine) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    def login(**kwargs: Any) -> Any:
        return kopf.login_via_client(**kwargs)

    kopf.on.login(registry=registry)(login)

    watched = WATCHED + (GATEWAY_WATCHED if engine.gateways is not None else ())
    for kind, group, version, plural in watched:

        def on_event(event: kopf.RawEvent, _kind: str = kind, **_: Any) -> None:
            engine.apply(_kind, event.get("type"), event["object"])

        kopf.on.event(group, version, plural, id=f"watch-{kind}", registry=registry)(on_event)
    return registry


def operator_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    # Our own Events carry the user-facing reasons; kopf's would need the same RBAC and only repeat the logs.
    settings.posting.enabled = False
    # No CRD or Namespace observation: the watched resources are fixed and namespaces are given by name, so the
    # operator needs no list/watch on customresourcedefinitions or namespaces (least privilege).
    settings.scanning.disabled = True
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    return settings
