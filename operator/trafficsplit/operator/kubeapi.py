"""The few API server calls the operator makes itself (kopf does the watching): the start-up listing, status
patches, Events and the leader Lease. The `kubernetes` client is synchronous, so each call runs in a thread.

Every call here needs a verb in charts/trafficsplit/templates/operator-rbac.yaml, and nothing more is granted.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Iterable
from typing import Any

from kubernetes import client, config

from trafficsplit.core.resolve import SplitObject
from trafficsplit.core.status import EventIntent, StatusResult

GROUP, VERSION, PLURAL = "trafficsplit.dev", "v1alpha1", "trafficsplits"
COMPONENT = "trafficsplit-operator"


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
            if kind == "trafficsplit":
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

    # --- status and events -------------------------------------------------------------------------------------------

    def _write_sync(self, obj: SplitObject, result: StatusResult) -> None:
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, obj.namespace, PLURAL, obj.name, {"status": result.status.to_dict()}
        )
        for e in result.events:
            self._event_sync(obj, e)

    def _event_sync(self, obj: SplitObject, e: EventIntent) -> None:
        now = datetime.datetime.now(datetime.UTC)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{obj.name}.", "namespace": obj.namespace},
            "involvedObject": {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "TrafficSplit",
                "name": obj.name,
                "namespace": obj.namespace,
                "uid": obj.uid,
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
        self.core.create_namespaced_event(obj.namespace, body)

    async def write_status(self, obj: SplitObject, result: StatusResult) -> None:
        await asyncio.to_thread(self._write_sync, obj, result)
