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

Placement (provision.py): a data plane lives in the operator's namespace or in its Gateway's. In the Gateway's
namespace, Secrets are never listed (a list returns every Secret's bytes, and the chart grants no cluster-wide
`list` on Secrets): the provisioner knows their names (`DataplaneNames`), reads each by name and checks its uid
before deleting it; the other kinds are listed by label. When a class moves its data planes, `ensure` deletes this
Gateway's objects (by uid) from the place it no longer uses. A quota refusal (403, exceeded quota) is a
`ProvisionError` with reason NoResources naming the object and the quota's message.

Every call here needs a verb in charts/trafficsplit/templates/operator-rbac.yaml (the `-dataplanes` Role, and with
gatewayAPI.dataplanes.allowGatewayNamespace the `-dataplanes-gateway-namespaces` ClusterRole).
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

from trafficsplit.core.gatewayapi.conditions import GatewayReason
from trafficsplit.core.gatewayapi.objects import Gateway
from trafficsplit.core.gatewayapi.parameters import GatewayParameters, Placement
from trafficsplit.operator.dataplane_names import (
    GATEWAY_NAME_ANNOTATION,
    GATEWAY_UID_LABEL,
    DataplaneNames,
    names_for,
)
from trafficsplit.operator.ownership import NameConflict, foreign, orphaned, owner_text, owner_uid
from trafficsplit.operator.provision import (
    COMPONENT_SELECTOR,
    COOKIE_KEY_BYTES,
    MAX_SETTINGS_BYTES,
    PUBLISH_TOKEN_BYTES,
    CookieKeys,
    DataplaneSettings,
    GatewayAddress,
    ProvisionError,
    cluster_ips,
    cookie_keys_step,
    names_of,
    parse_cookie_keys,
    parse_publish_token,
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


class QuotaExceeded(ProvisionError):
    """A ResourceQuota of the data plane's namespace refused one of its objects (the API server's 403)."""

    reason: str = GatewayReason.NO_RESOURCES


class ApplyRefused(ProvisionError):
    """The API server refused one of the data plane's objects for another reason it names (a LimitRange, an
    admission policy, RBAC): the status says which object and the server's message, not the HTTP exchange."""

    reason: str = GatewayReason.PROVISIONING_FAILED


class AddressNotUsable(ProvisionError):
    """The API server refused the data plane's Service the static address its Gateway asks for (outside the
    cluster's service range, taken by another Service, or external IPs denied by an admission policy)."""

    reason: str = GatewayReason.ADDRESS_NOT_USABLE


def apply_refusal(status: int, body: str | None, obj: dict[str, Any]) -> ProvisionError | None:
    """What an API server's answer refusing `obj` means for the Gateway's status; None for an answer that is no
    refusal of this object (a conflict, an outage: raised as it is, and retried)."""
    if not 400 <= status < 500 or status in (404, 409, 429):
        return None
    try:
        message = str(json.loads(body or "{}").get("message") or "")
    except (ValueError, AttributeError):
        message = ""
    meta = obj["metadata"]
    what = f"{obj['kind']} {meta['namespace']}/{meta['name']}: {message[:600] or f'HTTP {status}'}"
    return QuotaExceeded(what) if status == 403 and "exceeded quota" in message else ApplyRefused(what)


class Provisioner:
    def __init__(
        self,
        api: client.ApiClient,
        settings: DataplaneSettings,
        field_manager: str = FIELD_MANAGER,
        clock: Callable[[], float] = time.time,
        namespaces: Iterable[str] = (),
    ) -> None:
        self.settings = settings
        self.namespace = settings.namespace
        self.field_manager = field_manager
        self._clock = clock  # wall-clock seconds: the keys' rotation stamps outlive the process
        # The namespaces Gateways are watched in (empty: every namespace): where GatewayNamespace data planes may be.
        self._namespaces = tuple(namespaces)
        self._tokens: dict[str, str] = {}  # Gateway uid → its own publish token, as last applied
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
        try:
            resp = getattr(api, f"patch_{suffix}")(
                obj["metadata"]["name"],
                obj["metadata"]["namespace"],
                obj,
                field_manager=self.field_manager,
                force=True,  # the operator is the only writer of these objects; take over fields from a manual edit
                _content_type=APPLY,
                _preload_content=False,
            )
        except ApiException as e:
            if (refused := apply_refusal(e.status, e.body, obj)) is not None:
                raise refused from None
            raise
        return json.loads(resp.data)  # type: ignore[no-any-return]

    def _would_create(self, obj: dict[str, Any]) -> None:
        """Raise `ApplyRefused` if the API server would refuse to create `obj` (a dry run: nothing is written). An
        object of its name may exist: the server checks the new object's fields, its addresses included, before its
        name, so AlreadyExists means it would have been created."""
        api, suffix = self._apis[obj["kind"]]
        try:
            getattr(api, f"create_{suffix}")(
                obj["metadata"]["namespace"], obj, dry_run="All", field_manager=self.field_manager
            )
        except ApiException as e:
            if e.status == 409:
                return
            if (refused := apply_refusal(e.status, e.body, obj)) is not None:
                raise refused from None
            raise

    def _list(self, kind: str, selector: str, namespace: str | None) -> list[dict[str, Any]]:
        """`namespace` None: every namespace (GatewayNamespace data planes, watched cluster-wide)."""
        api, suffix = self._apis[kind]
        if namespace is None:
            resp = getattr(api, f"list_{suffix}_for_all_namespaces".replace("_namespaced", ""))(
                label_selector=selector, _preload_content=False
            )
        else:
            resp = getattr(api, f"list_{suffix}")(namespace, label_selector=selector, _preload_content=False)
        return json.loads(resp.data).get("items") or []

    def _delete(self, kind: str, name: str, namespace: str) -> bool:
        api, suffix = self._apis[kind]
        try:
            getattr(api, f"delete_{suffix}")(name, namespace, propagation_policy="Background")
        except ApiException as e:
            if e.status == 404:  # already gone: what we wanted
                return False
            raise
        return True

    def _read(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        api, suffix = self._apis[kind]
        try:
            resp = getattr(api, f"read_{suffix}")(name, namespace, _preload_content=False)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return json.loads(resp.data)  # type: ignore[no-any-return]

    def _labelled(self, selector: str, namespace: str) -> list[tuple[str, dict[str, Any]]]:
        return [(kind, o) for kind in self._apis for o in self._list(kind, selector, namespace)]

    def _labelled_elsewhere(self, selector: str, namespace: str | None) -> list[tuple[str, dict[str, Any]]]:
        """Outside the operator's namespace (one Gateway's, or None: every one the Gateways may be in), every kind
        but Secrets, which are never listed there, and ConfigMaps, which are never made there (the chart grants
        neither: templates/operator-rbac.yaml)."""
        spaces: tuple[str | None, ...] = (namespace,) if namespace is not None else (self._namespaces or (None,))
        return [
            (kind, o)
            for kind in self._apis
            if kind not in ("Secret", "ConfigMap")
            for ns in spaces
            for o in self._list(kind, selector, ns)
            # cluster-wide, the operator's own namespace is left to the callers' own listing of it
            if namespace is not None or (o.get("metadata") or {}).get("namespace") != self.namespace
        ]

    def _secrets_of(self, names: DataplaneNames) -> tuple[str, ...]:
        return (names.cookie_keys, names.publish_token, names.publish_tls)

    # --- the operations -------------------------------------------------------------------------------------------

    def _cookie_keys(self, gateway: Gateway, stored: dict[str, Any] | None, name: str) -> CookieKeys:
        """The Gateway's keys as they should be now: those `stored` holds, stepped when a rotation step is due."""
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
        # Rendered first without Secrets' contents: a Gateway the renderer refuses is refused before anything is read,
        # and this names every object the data plane needs. The user's keys Secret (the class's parameters) wins:
        # ours is then not rendered, so the sweep below deletes it.
        names = names_of(gateway, parameters, self.settings)
        ns = names.namespace
        elsewhere = names.placement is Placement.GATEWAY_NAMESPACE
        own_keys = parameters.cookie_keys_secret is None
        needed = [(o["kind"], o["metadata"]["name"]) for o in render(gateway, parameters, self.settings).objects]
        if own_keys:
            needed.append(("Secret", names.cookie_keys))
        needed.append(("Secret", names.publish_token))
        if elsewhere and self.settings.tls_secret is not None:
            needed.append(("Secret", names.publish_tls))
        # Read by name before anything is written: an object of one of these names that is not this Gateway's
        # (ownership.py) stops the whole data plane, so nothing of another Gateway's is ever applied over.
        existing = {(kind, name): obj for kind, name in needed if (obj := self._read(kind, name, ns)) is not None}
        if taken := foreign(uid, ((kind, obj) for (kind, _), obj in existing.items())):
            raise NameConflict(ns, taken)
        keys = self._cookie_keys(gateway, existing.get(("Secret", names.cookie_keys)), names.cookie_keys)
        token = parse_publish_token(existing.get(("Secret", names.publish_token)))
        token = token or secrets.token_hex(PUBLISH_TOKEN_BYTES)
        tls: dict[str, str] | None = None
        if elsewhere and self.settings.tls_secret is not None:
            source = self._read("Secret", self.settings.tls_secret, self.namespace)
            if source is None:
                raise ProvisionError(f"publish TLS Secret {self.namespace}/{self.settings.tls_secret}: not found")
            tls = dict(source.get("data") or {})
        rendered = render(gateway, parameters, self.settings, keys if own_keys else None, token=token, tls=tls)
        addresses: tuple[GatewayAddress, ...] = ()
        static = gateway.static_addresses
        service = next(o for o in rendered.objects if o["kind"] == "Service" and o["metadata"]["name"] == rendered.name)
        if service["spec"]["type"] == "ClusterIP" and (extra := cluster_ips(static)[1]):
            # Before anything is applied: the data plane that exists keeps serving as it is.
            raise AddressNotUsable(
                f"spec.addresses {', '.join(static)}: a Service holds one ClusterIP per IP family, so "
                f"{', '.join(extra)} cannot be given beside {', '.join(cluster_ips(static)[0])}"
            )
        for obj in rendered.objects:
            if not (obj["kind"] == "Service" and obj["metadata"]["name"] == rendered.name):
                self._apply(obj)
                continue
            pinned = obj["spec"].get("clusterIP")
            held = existing.get(("Service", rendered.name))
            try:
                if pinned and held is not None and (held.get("spec") or {}).get("clusterIP") != pinned:
                    # A ClusterIP cannot change in place: the Service is made again with the address asked for,
                    # once the server says it would give it (the Service serving now stays until then).
                    self._would_create(obj)
                    log.info("gateway %s: Service %s/%s made again for %s", gateway.meta.key, ns, rendered.name, pinned)
                    self._delete("Service", rendered.name, ns)
                applied = self._apply(obj)
            except ApplyRefused as refused:
                # The server names the address it refuses, or the family a single-stack cluster does not serve.
                if static and any(word in str(refused) for word in (*static, "ipFamil", "dual-stack")):
                    raise AddressNotUsable(f"spec.addresses {', '.join(static)}: {refused}") from None
                raise
            addresses = service_addresses(applied, static)
        self._tokens[uid] = token
        wanted = {(o["kind"], o["metadata"]["name"]) for o in rendered.objects}
        for kind, obj in self._owned(uid, names):
            name = obj["metadata"]["name"]
            if obj["metadata"].get("namespace") == ns and (kind, name) not in wanted:
                log.info("gateway %s: deleting %s %s/%s, no longer rendered", gateway.meta.key, kind, ns, name)
                self._delete(kind, name, ns)
        # The place this class does not use (any more): this Gateway's objects there go.
        other = self._other_place(gateway, names)
        for kind, obj in self._owned(uid, other) if other is not None else ():
            name, where = obj["metadata"]["name"], obj["metadata"]["namespace"]
            if where == ns and (kind, name) in wanted:
                continue  # a Gateway in the operator's own namespace: both places are one
            log.info(
                "gateway %s: deleting %s %s/%s, its data plane moved to %s", gateway.meta.key, kind, where, name, ns
            )
            self._delete(kind, name, where)
        return addresses

    def _other_place(self, gateway: Gateway, names: DataplaneNames) -> DataplaneNames | None:
        """The names the Gateway's data plane would have in the place it is not in; None when the operator may not
        touch that place (GatewayNamespace not granted)."""
        if names.placement is Placement.GATEWAY_NAMESPACE:
            placement = Placement.CONTROLLER_NAMESPACE
        elif self.settings.gateway_namespace_allowed:
            placement = Placement.GATEWAY_NAMESPACE
        else:
            return None
        return names_for(gateway.meta.namespace, gateway.meta.name, placement, self.namespace)

    def publish_token(self, uid: str) -> str | None:
        """The Gateway `uid`'s own publish token, the only one its replicas accept, as last applied; None until an
        ensure has applied it (after a restart: then its fleet sends none)."""
        return self._tokens.get(uid)

    def _owned(self, uid: str, names: DataplaneNames | None = None) -> list[tuple[str, dict[str, Any]]]:
        """The objects carrying the Gateway uid `uid` (and our component and managed-by labels), in the place
        `names` says (None: the operator's namespace). In a Gateway's namespace, its Secrets are read by name."""
        selector = f"{COMPONENT_SELECTOR},{GATEWAY_UID_LABEL}={uid}"
        if names is None or names.placement is Placement.CONTROLLER_NAMESPACE:
            found = self._labelled(selector, self.namespace)
        else:
            found = self._labelled_elsewhere(selector, names.namespace) + [
                ("Secret", o)
                for name in self._secrets_of(names)
                if (o := self._read("Secret", name, names.namespace)) is not None
            ]
        return [(k, o) for k, o in found if owner_uid(o) == uid]

    def remove_sync(self, uid: str) -> int:
        if not uid:
            return 0
        return sum(
            self._delete(kind, obj["metadata"]["name"], obj["metadata"]["namespace"]) for kind, obj in self._owned(uid)
        )

    def remove_gateway_sync(self, gateway: Gateway) -> int:
        """Every object of this Gateway's data plane, in both places (a Gateway over its class's caps)."""
        uid = gateway.meta.uid
        if not uid:
            return 0
        found = self._owned(uid)
        if self.settings.gateway_namespace_allowed:
            ns, name = gateway.meta.namespace, gateway.meta.name
            found += self._owned(uid, names_for(ns, name, Placement.GATEWAY_NAMESPACE, self.namespace))
        self._tokens.pop(uid, None)
        return sum(self._delete(kind, o["metadata"]["name"], o["metadata"]["namespace"]) for kind, o in found)

    def remove_absent_sync(self, live: Iterable[str]) -> tuple[str, ...]:
        keep = frozenset(live)
        removed: set[str] = set()
        found = self._labelled(COMPONENT_SELECTOR, self.namespace)
        if self.settings.gateway_namespace_allowed:
            # In the Gateways' namespaces: listed by label but Secrets, which are read by the names their Gateway's
            # data plane has (the Gateway's name is on every object's annotations). The garbage collector removes
            # them too (owner references); this is for a cluster whose collector has not yet, or a moved class.
            others = self._labelled_elsewhere(COMPONENT_SELECTOR, None)
            gone = {
                (o["metadata"]["namespace"], (o["metadata"].get("annotations") or {}).get(GATEWAY_NAME_ANNOTATION))
                for _, o in others
                if orphaned(o, keep)
            }
            found += others
            for ns, name in gone:
                if not isinstance(name, str) or not name:
                    continue
                names = names_for(ns, name, Placement.GATEWAY_NAMESPACE, self.namespace)
                found += [
                    ("Secret", o) for n in self._secrets_of(names) if (o := self._read("Secret", n, ns)) is not None
                ]
        for kind, obj in found:
            if not orphaned(obj, keep):
                continue
            if not owner_uid(obj) and obj["metadata"].get("namespace") != self.namespace:
                continue  # objects without a uid label are swept in the operator's namespace only (ownership.py)
            owner = owner_text(obj)
            meta = obj["metadata"]
            if self._delete(kind, meta["name"], meta["namespace"]):
                log.info("gateway %s is gone: deleted %s %s/%s", owner, kind, meta["namespace"], meta["name"])
            removed.add(owner)
        return tuple(sorted(removed))

    async def ensure(self, gateway: Gateway, parameters: GatewayParameters) -> tuple[GatewayAddress, ...]:
        """Apply the Gateway's data plane; its addresses (the load balancer's, else the ClusterIP)."""
        return await asyncio.to_thread(self.ensure_sync, gateway, parameters)

    async def remove(self, uid: str) -> int:
        """Delete every object of the Gateway whose uid is `uid` in the operator's namespace; how many there were."""
        return await asyncio.to_thread(self.remove_sync, uid)

    async def remove_gateway(self, gateway: Gateway) -> int:
        """Delete this Gateway's data plane wherever it is (its uid's objects); how many objects there were."""
        return await asyncio.to_thread(self.remove_gateway_sync, gateway)

    async def remove_absent(self, live: Iterable[str]) -> tuple[str, ...]:
        """Delete the data plane of every Gateway whose uid is not in `live` (ownership.orphaned); who they were."""
        return await asyncio.to_thread(self.remove_absent_sync, tuple(live))
