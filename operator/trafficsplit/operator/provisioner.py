"""The shell that applies a Gateway's rendered data plane (provision.py) to the API server and removes it again.

Server-side apply with the operator's field manager, so the operator owns exactly the fields it renders and a
re-apply is a no-op; after applying, objects of the same Gateway that the rendering no longer contains (a PDB
switched off) are deleted. Before anything is applied, every object the data plane needs is read by name, and if one
exists that is not this Gateway's (its uid label, ownership.py) nothing is applied or deleted: `ensure` raises
`NameConflict` naming it. Every object is in the operator's namespace and found by its labels, never by owner
references (they cannot cross namespaces): `remove` deletes one Gateway's objects (by uid), `remove_absent` every
labelled object whose uid is no live Gateway's, which is what makes a restarted operator clean up after Gateways
deleted while it was down. Only objects carrying both the data-plane component label and the operator's managed-by
label are ever deleted.

Every call here needs a verb in charts/trafficsplit/templates/operator-rbac.yaml (the `-dataplanes` Role).
The `kubernetes` client is synchronous, so each public call runs in a thread.

Cookie keys: `ensure` reads the Gateway's keys Secret back (with the ownership check) before rendering (never
regenerates what exists), takes the rotation step `provision.cookie_keys_step` gives for the time (a new random key
when one is due), and applies the Secret with the rest; the operator calls `ensure` again every few minutes, which
is what rotates.
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
from trafficsplit.operator.dataplane_names import GATEWAY_UID_LABEL
from trafficsplit.operator.ownership import NameConflict, foreign, orphaned, owner_text, owner_uid
from trafficsplit.operator.provision import (
    COMPONENT_SELECTOR,
    COOKIE_KEY_BYTES,
    MAX_SETTINGS_BYTES,
    CookieKeys,
    DataplaneSettings,
    GatewayAddress,
    ProvisionError,
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

    def _read(self, kind: str, name: str) -> dict[str, Any] | None:
        api, suffix = self._apis[kind]
        try:
            resp = getattr(api, f"read_{suffix}")(name, self.namespace, _preload_content=False)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return json.loads(resp.data)  # type: ignore[no-any-return]

    def _labelled(self, selector: str) -> list[tuple[str, dict[str, Any]]]:
        return [(kind, o) for kind in self._apis for o in self._list(kind, selector)]

    # --- the operations -------------------------------------------------------------------------------------------

    def _cookie_keys(self, gateway: Gateway, stored: dict[str, Any] | None) -> CookieKeys:
        """The Gateway's keys as they should be now: those `stored` holds, stepped when a rotation step is due."""
        name = cookie_keys_secret_name(gateway.meta.namespace, gateway.meta.name)
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
        uid = gateway.meta.uid
        if not uid:
            raise ProvisionError("metadata.uid: empty, and a data plane's objects are known by their Gateway's uid")
        # Rendered first without keys: a Gateway the renderer refuses is refused before anything is read, and this
        # names every object the data plane needs. The user's Secret (the class's parameters) wins: ours is then not
        # rendered, so the sweep below deletes it.
        own_keys = parameters.cookie_keys_secret is None
        needed = [(o["kind"], o["metadata"]["name"]) for o in render(gateway, parameters, self.settings).objects]
        keys_name = cookie_keys_secret_name(gateway.meta.namespace, gateway.meta.name)
        if own_keys:
            needed.append(("Secret", keys_name))
        # Read by name before anything is written: an object of one of these names that is not this Gateway's
        # (ownership.py) stops the whole data plane, so nothing of another Gateway's is ever applied over.
        existing = {(kind, name): obj for kind, name in needed if (obj := self._read(kind, name)) is not None}
        if taken := foreign(uid, ((kind, obj) for (kind, _), obj in existing.items())):
            raise NameConflict(self.namespace, taken)
        keys = self._cookie_keys(gateway, existing.get(("Secret", keys_name))) if own_keys else None
        rendered = render(gateway, parameters, self.settings, keys)
        addresses: tuple[GatewayAddress, ...] = ()
        for obj in rendered.objects:
            applied = self._apply(obj)
            if obj["kind"] == "Service" and obj["metadata"]["name"] == rendered.name:
                addresses = service_addresses(applied)
        wanted = {(o["kind"], o["metadata"]["name"]) for o in rendered.objects}
        for kind, obj in self._owned(uid):
            if (kind, obj["metadata"]["name"]) not in wanted:
                log.info(
                    "gateway %s: deleting %s/%s, no longer rendered", gateway.meta.key, kind, obj["metadata"]["name"]
                )
                self._delete(kind, obj["metadata"]["name"])
        return addresses

    def _owned(self, uid: str) -> list[tuple[str, dict[str, Any]]]:
        """The objects carrying the Gateway uid `uid` (and our component and managed-by labels)."""
        return [
            (k, o) for k, o in self._labelled(f"{COMPONENT_SELECTOR},{GATEWAY_UID_LABEL}={uid}") if owner_uid(o) == uid
        ]

    def remove_sync(self, uid: str) -> int:
        if not uid:
            return 0
        return sum(self._delete(kind, obj["metadata"]["name"]) for kind, obj in self._owned(uid))

    def remove_absent_sync(self, live: Iterable[str]) -> tuple[str, ...]:
        keep = frozenset(live)
        removed: set[str] = set()
        for kind, obj in self._labelled(COMPONENT_SELECTOR):
            if not orphaned(obj, keep):
                continue
            owner = owner_text(obj)
            if self._delete(kind, obj["metadata"]["name"]):
                log.info("gateway %s is gone: deleted %s/%s", owner, kind, obj["metadata"]["name"])
            removed.add(owner)
        return tuple(sorted(removed))

    async def ensure(self, gateway: Gateway, parameters: GatewayParameters) -> tuple[GatewayAddress, ...]:
        """Apply the Gateway's data plane; its addresses (the load balancer's, else the ClusterIP)."""
        return await asyncio.to_thread(self.ensure_sync, gateway, parameters)

    async def remove(self, uid: str) -> int:
        """Delete every object of the Gateway whose uid is `uid`; how many there were."""
        return await asyncio.to_thread(self.remove_sync, uid)

    async def remove_absent(self, live: Iterable[str]) -> tuple[str, ...]:
        """Delete the data plane of every Gateway whose uid is not in `live` (ownership.orphaned); who they were."""
        return await asyncio.to_thread(self.remove_absent_sync, tuple(live))
