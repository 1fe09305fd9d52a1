"""The few API server calls the operator makes itself (kopf does the watching): the start-up listing, status
patches, Events and the leader Lease. The `kubernetes` client is synchronous, so each call runs in a thread.

Every call here needs a verb in charts/trafficsplit/templates/operator-rbac.yaml, and nothing more is granted.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes import client, config

from trafficsplit.core.control.resolve import SplitObject
from trafficsplit.core.control.status import EventIntent, StatusResult

GROUP, VERSION, PLURAL = "trafficsplit.dev", "v1alpha1", "trafficsplits"
POLICY_PLURAL = "trafficsplitpolicies"
COMPONENT = "trafficsplit-operator"
FIELD_MANAGER = COMPONENT  # the status writes' field manager (managedFields name the operator)
GATEWAY_GROUP, GATEWAY_VERSION = "gateway.networking.k8s.io", "v1"
# kind → (plural, namespaced)
GATEWAY_RESOURCES = {
    "gatewayclass": ("gatewayclasses", False),
    "gateway": ("gateways", True),
    "httproute": ("httproutes", True),
    "referencegrant": ("referencegrants", True),
    "backendtlspolicy": ("backendtlspolicies", True),
    "listenerset": ("listenersets", True),
}
# Served by later Gateway API versions only (BackendTLSPolicy in v1 from v1.4, ListenerSet from v1.6): without one,
# none of its objects applies, and the rest is served.
OPTIONAL_GATEWAY_RESOURCES = frozenset({"backendtlspolicy", "listenerset"})


def make_api_client(kubeconfig: str | None) -> client.ApiClient:
    """In-cluster credentials when running in a pod, else the kubeconfig (KUBECONFIG or --kubeconfig)."""
    try:
        if kubeconfig:
            raise config.ConfigException("kubeconfig given")
        cfg = client.Configuration()
        config.load_incluster_config(client_configuration=cfg)
        return client.ApiClient(cfg)
    except config.ConfigException:
        return config.new_client_from_config(config_file=kubeconfig)


class KubeApi:
    def __init__(self, api: client.ApiClient, identity: str) -> None:
        self.api = api
        self.identity = identity
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.discovery = client.DiscoveryV1Api(api)

    # --- start-up listing (the full resync) --------------------------------------------------------------------------

    def _list_sync(self, kind: str, namespaces: Iterable[str]) -> list[dict[str, Any]]:
        nss: list[str | None] = [*namespaces] or [None]
        items: list[dict[str, Any]] = []
        for ns in nss:
            if kind == "namespace":
                if ns is not None and ns != nss[0]:
                    continue  # cluster-scoped: listed once
                resp = self.core.list_namespace(_preload_content=False)
            elif kind == "gatewayparameters":
                if ns is not None and ns != nss[0]:
                    continue
                try:
                    resp = self.custom.list_cluster_custom_object(
                        GROUP, VERSION, "gatewayparameters", _preload_content=False
                    )
                except client.ApiException as exc:
                    if exc.status != 404:
                        raise
                    continue  # its CRD is not installed: a class naming parameters is refused (InvalidParameters)
            elif kind == "trafficsplitpolicy":
                try:
                    resp = (
                        self.custom.list_namespaced_custom_object(
                            GROUP, VERSION, ns, POLICY_PLURAL, _preload_content=False
                        )
                        if ns
                        else self.custom.list_cluster_custom_object(
                            GROUP, VERSION, POLICY_PLURAL, _preload_content=False
                        )
                    )
                except client.ApiException as exc:
                    if exc.status != 404:
                        raise
                    continue  # its CRD is not installed: no policy applies
            elif kind in GATEWAY_RESOURCES:
                plural, namespaced = GATEWAY_RESOURCES[kind]
                if not namespaced and ns is not None and ns != nss[0]:
                    continue
                try:
                    resp = (
                        self.custom.list_namespaced_custom_object(
                            GATEWAY_GROUP, GATEWAY_VERSION, ns, plural, _preload_content=False
                        )
                        if ns and namespaced
                        else self.custom.list_cluster_custom_object(
                            GATEWAY_GROUP, GATEWAY_VERSION, plural, _preload_content=False
                        )
                    )
                except client.ApiException as exc:
                    if exc.status != 404 or kind not in OPTIONAL_GATEWAY_RESOURCES:
                        raise
                    continue  # an older Gateway API: no BackendTLSPolicy (or ListenerSet) applies
            elif kind == "trafficsplit":
                resp = (
                    self.custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, _preload_content=False)
                    if ns
                    else self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, _preload_content=False)
                )
            elif kind == "service":
                resp = (
                    self.core.list_namespaced_service(ns, _preload_content=False)
                    if ns
                    else self.core.list_service_for_all_namespaces(_preload_content=False)
                )
            else:
                resp = (
                    self.discovery.list_namespaced_endpoint_slice(ns, _preload_content=False)
                    if ns
                    else self.discovery.list_endpoint_slice_for_all_namespaces(_preload_content=False)
                )
            items.extend(json.loads(resp.data).get("items") or [])
        return items

    async def list_all(self, kind: str, namespaces: Iterable[str]) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self._list_sync, kind, tuple(namespaces))

    # --- Gateway API -------------------------------------------------------------------------------------------------

    def _read_by_name_sync(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        read = self.core.read_namespaced_secret if kind == "Secret" else self.core.read_namespaced_config_map
        try:
            resp = read(name, namespace, _preload_content=False)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        body = json.loads(resp.data)
        return body if isinstance(body, dict) else None

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A Secret an HTTPS listener names, by name (certificates.py: the operator lists and watches no Secret)."""
        return await asyncio.to_thread(self._read_by_name_sync, "Secret", namespace, name)

    async def read_configmap(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A ConfigMap a client certificate validation names (its CA bundle), by name, as Secrets are."""
        return await asyncio.to_thread(self._read_by_name_sync, "ConfigMap", namespace, name)

    def _gateway_api_missing_sync(self) -> str | None:
        try:
            resp = self.custom.get_api_resources(GATEWAY_GROUP, GATEWAY_VERSION, _preload_content=False)
        except client.ApiException as exc:
            if exc.status == 404:
                return f"the API server does not serve {GATEWAY_GROUP}/{GATEWAY_VERSION} (no Gateway API CRDs)"
            return f"discovery of {GATEWAY_GROUP}/{GATEWAY_VERSION} failed: HTTP {exc.status} {exc.reason}"
        served = {r.get("name") for r in json.loads(resp.data).get("resources") or []}
        missing = sorted(
            p for k, (p, _) in GATEWAY_RESOURCES.items() if p not in served and k not in OPTIONAL_GATEWAY_RESOURCES
        )
        if missing:
            return f"{GATEWAY_GROUP}/{GATEWAY_VERSION} lacks {', '.join(missing)} (Gateway API v1.5 or later is needed)"
        return None

    async def gateway_api_missing(self) -> str | None:
        """Why Gateway API cannot be served (None: every resource it needs is served)."""
        return await asyncio.to_thread(self._gateway_api_missing_sync)

    def _gateway_status_sync(
        self, kind: str, key: tuple[str, str], resource_version: str, status: Mapping[str, Any]
    ) -> None:
        if kind == "trafficsplitpolicy":  # ours: trafficsplit.dev, namespaced
            body = {"metadata": {"resourceVersion": resource_version}, "status": dict(status)}
            self.custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, key[0], POLICY_PLURAL, key[1], body, field_manager=FIELD_MANAGER
            )
            return
        plural, namespaced = GATEWAY_RESOURCES[kind]
        # The resourceVersion makes the merge patch conditional: status.parents is replaced whole, so a version
        # another controller changed meanwhile is refused (409) rather than overwritten; the next pass retries.
        body = {"metadata": {"resourceVersion": resource_version}, "status": dict(status)}
        if namespaced:
            self.custom.patch_namespaced_custom_object_status(
                GATEWAY_GROUP, GATEWAY_VERSION, key[0], plural, key[1], body, field_manager=FIELD_MANAGER
            )
        else:
            self.custom.patch_cluster_custom_object_status(
                GATEWAY_GROUP, GATEWAY_VERSION, plural, key[1], body, field_manager=FIELD_MANAGER
            )

    async def write_gateway_status(
        self, kind: str, key: tuple[str, str], resource_version: str, status: Mapping[str, Any]
    ) -> None:
        await asyncio.to_thread(self._gateway_status_sync, kind, key, resource_version, status)

    async def write_gateway_event(self, kind: str, key: tuple[str, str], uid: str, event: EventIntent) -> None:
        """An Event on a namespaced Gateway API object (an HTTPRoute's AssignmentRebuilt)."""
        api_kind = {"httproute": "HTTPRoute", "gateway": "Gateway"}[kind]
        api_version = f"{GATEWAY_GROUP}/{GATEWAY_VERSION}"
        await asyncio.to_thread(self._post_event, api_version, api_kind, key, uid, event)

    # --- status and events -------------------------------------------------------------------------------------------

    def _write_sync(self, obj: SplitObject, result: StatusResult) -> None:
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, obj.namespace, PLURAL, obj.name, {"status": result.status.to_dict()}
        )
        for e in result.events:
            self._event_sync(obj, e)

    def _event_sync(self, obj: SplitObject, e: EventIntent) -> None:
        self._post_event(f"{GROUP}/{VERSION}", "TrafficSplit", (obj.namespace, obj.name), obj.uid, e)

    def _post_event(self, api_version: str, kind: str, key: tuple[str, str], uid: str, e: EventIntent) -> None:
        namespace, name = key
        now = datetime.datetime.now(datetime.UTC)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": api_version,
                "kind": kind,
                "name": name,
                "namespace": namespace,
                "uid": uid,
            },
            "type": e.type,
            "reason": e.reason,
            "message": e.message[:1024],
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.identity,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        self.core.create_namespaced_event(namespace, body)

    async def write_status(self, obj: SplitObject, result: StatusResult) -> None:
        await asyncio.to_thread(self._write_sync, obj, result)
