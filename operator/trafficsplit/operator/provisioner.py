"""The shell that applies a Gateway's rendered data plane (provision.py) to the API server and removes it again.

Server-side apply with the operator's field manager, so the operator owns exactly the fields it renders and a
re-apply is a no-op; after applying, objects of the same Gateway that the rendering no longer contains (a PDB
switched off) are deleted. Every object is in the operator's namespace and found by its labels, never by owner
references (they cannot cross namespaces): `remove` deletes one Gateway's objects, `remove_absent` every labelled
object of a Gateway that is not in the list given, which is what makes a restarted operator clean up after Gateways
deleted while it was down. Only objects carrying both the data-plane component label and the operator's managed-by
label are ever deleted.

Every call here needs a verb in charts/trafficsplit/templates/operator-rbac.yaml (the `-dataplanes` Role).
The `kubernetes` client is synchronous, so each public call runs in a thread.

Cookie keys: `ensure` reads the Gateway's keys Secret back before rendering (never regenerates what exists), takes
the rotation step `provision.cookie_keys_step` gives for the time (a new random key when one is due), and applies
the Secret with the rest; the operator calls `ensure` again every few minutes, which is what rotates.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from trafficsplit.core.gatewayapi.objects import Gateway
from trafficsplit.core.gatewayapi.parameters import GatewayParameters
from trafficsplit.operator.dataplane_names import (
    GATEWAY_LABEL,
    GATEWAY_NAME_ANNOTATION,
    GATEWAY_NAMESPACE_ANNOTATION,
    dataplane_name,
)
from trafficsplit.operator.provision import (
    COMPONENT_SELECTOR,
    COOKIE_KEY_BYTES,
    MAX_SETTINGS_BYTES,
    CookieKeys,
    DataplaneSettings,
    GatewayAddress,
    cookie_keys_secret_name,
    cookie_keys_step,
    parse_cookie_keys,
    parse_settings,
    render,
    service_addresses,
)

log = logging.getLogger(__name__)

FIELD_MANAGER = "trafficsplit-operator"
APPLY = "application/apply-patch+yaml"


def load_settings(settings_file: str) -> DataplaneSettings:
    """The file `--dataplane-settings` names (the chart mounts it from its ConfigMap), read once at start: a bad file
    stops the operator with the field named."""
    path = Path(settings_file)
    if path.stat().st_size > MAX_SETTINGS_BYTES:
        raise ValueError(f"{path}: over {MAX_SETTINGS_BYTES} bytes")
    return parse_settings(path.read_text(encoding="utf-8"))


class Provisioner:
    def __init__(
        self,
        api: client.ApiClient,
        settings: DataplaneSettings,
        field_manager: str = FIELD_MANAGER,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.namespace = settings.namespace
        self.field_manager = field_manager
        self._clock = clock  # wall-clock seconds: the keys' rotation stamps outlive the process
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        self._core = core
        # kind → (typed API, the method suffix): the kinds a data plane consists of (provision.KINDS).
        self._apis: dict[str, tuple[Any, str]] = {
            "Secret": (core, "namespaced_secret"),
            "ConfigMap": (core, "namespaced_config_map"),
            "Deployment": (apps, "namespaced_deployment"),
            "Service": (core, "namespaced_service"),
            "PodDisruptionBudget": (client.PolicyV1Api(api), "namespaced_pod_disruption_budget"),
            "NetworkPolicy": (client.NetworkingV1Api(api), "namespaced_network_policy"),
        }

    # --- the API calls --------------------------------------------------------------------------------------------

    def _apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        api, suffix = self._apis[obj["kind"]]
        resp = getattr(api, f"patch_{suffix}")(
            obj["metadata"]["name"],
            self.namespace,
            obj,
            field_manager=self.field_manager,
            force=True,  # the operator is the only writer of these objects; take over fields from a manual edit
            _content_type=APPLY,
            _preload_content=False,
        )
        return json.loads(resp.data)  # type: ignore[no-any-return]

    def _list(self, kind: str, selector: str) -> list[dict[str, Any]]:
        api, suffix = self._apis[kind]
        resp = getattr(api, f"list_{suffix}")(self.namespace, label_selector=selector, _preload_content=False)
        return json.loads(resp.data).get("items") or []

    def _delete(self, kind: str, name: str) -> bool:
        api, suffix = self._apis[kind]
        try:
            getattr(api, f"delete_{suffix}")(name, self.namespace, propagation_policy="Background")
        except ApiException as e:
            if e.status == 404:  # already gone: what we wanted
                return False
            raise
        return True

    def _labelled(self, selector: str) -> list[tuple[str, dict[str, Any]]]:
        return [(kind, o) for kind in self._apis for o in self._list(kind, selector)]

    # --- the operations -------------------------------------------------------------------------------------------

    def cookie_keys_sync(self, gateway: Gateway) -> CookieKeys:
        """The Gateway's keys as they should be now: read back, stepped when a rotation step is due."""
        name = cookie_keys_secret_name(gateway.meta.namespace, gateway.meta.name)
        try:
            resp = self._core.read_namespaced_secret(name, self.namespace, _preload_content=False)
            stored = json.loads(resp.data)
        except ApiException as e:
            if e.status != 404:
                raise
            stored = None
        existing = parse_cookie_keys(stored)
        if stored is not None and existing is None:
            log.warning("gateway %s: Secret %s holds no valid cookie keys: new keys", gateway.meta.key, name)
        step = cookie_keys_step(existing, int(self._clock()), secrets.token_hex(COOKIE_KEY_BYTES))
        if step is None:
            assert existing is not None
            return existing
        what = "created" if existing is None else "staged a new key" if step.staged else "new key signing"
        log.info("gateway %s: cookie keys %s (Secret %s)", gateway.meta.key, what, name)
        return step

    def ensure_sync(self, gateway: Gateway, parameters: GatewayParameters) -> tuple[GatewayAddress, ...]:
        # The user's Secret (the class's parameters) wins: ours is then not rendered, so the sweep below deletes it.
        keys = self.cookie_keys_sync(gateway) if parameters.cookie_keys_secret is None else None
        rendered = render(gateway, parameters, self.settings, keys)
        addresses: tuple[GatewayAddress, ...] = ()
        for obj in rendered.objects:
            applied = self._apply(obj)
            if obj["kind"] == "Service" and obj["metadata"]["name"] == rendered.name:
                addresses = service_addresses(applied)
        wanted = {(o["kind"], o["metadata"]["name"]) for o in rendered.objects}
        for kind, obj in self._labelled(f"{COMPONENT_SELECTOR},{GATEWAY_LABEL}={rendered.name}"):
            if (kind, obj["metadata"]["name"]) not in wanted:
                log.info(
                    "gateway %s: deleting %s/%s, no longer rendered", gateway.meta.key, kind, obj["metadata"]["name"]
                )
                self._delete(kind, obj["metadata"]["name"])
        return addresses

    def remove_sync(self, key: str) -> int:
        namespace, _, name = key.partition("/")
        deleted = 0
        for kind, obj in self._labelled(f"{COMPONENT_SELECTOR},{GATEWAY_LABEL}={dataplane_name(namespace, name)}"):
            deleted += self._delete(kind, obj["metadata"]["name"])
        return deleted

    def remove_absent_sync(self, keep: Iterable[str]) -> tuple[str, ...]:
        wanted = {dataplane_name(*k.split("/", 1)) for k in keep}
        removed: set[str] = set()
        for kind, obj in self._labelled(COMPONENT_SELECTOR):
            meta = obj["metadata"]
            if (meta.get("labels") or {}).get(GATEWAY_LABEL) in wanted:
                continue
            annotations = meta.get("annotations") or {}
            owner = (
                f"{annotations.get(GATEWAY_NAMESPACE_ANNOTATION, '?')}/{annotations.get(GATEWAY_NAME_ANNOTATION, '?')}"
            )
            if self._delete(kind, meta["name"]):
                log.info("gateway %s is gone: deleted %s/%s", owner, kind, meta["name"])
            removed.add(owner)
        return tuple(sorted(removed))

    async def ensure(self, gateway: Gateway, parameters: GatewayParameters) -> tuple[GatewayAddress, ...]:
        """Apply the Gateway's data plane; its addresses (the load balancer's, else the ClusterIP)."""
        return await asyncio.to_thread(self.ensure_sync, gateway, parameters)

    async def remove(self, key: str) -> int:
        """Delete every object of the Gateway `namespace/name`; how many there were."""
        return await asyncio.to_thread(self.remove_sync, key)

    async def remove_absent(self, keep: Iterable[str]) -> tuple[str, ...]:
        """Delete the data plane of every Gateway not in `keep` (`namespace/name` keys); the Gateways removed."""
        return await asyncio.to_thread(self.remove_absent_sync, tuple(keep))
