"""The kubectl plugin's only API-server I/O: find credentials the way kubectl does, read a TrafficSplit, apply weights.

Why one small module: the plugin's subcommands (plan NAME, set-weights, flip, status) are pure functions of the object
they read; keeping every call to the `kubernetes` client here lets those functions be unit-tested on plain dicts and
keeps error wording in one place. Every failure becomes a `KubeError` whose message names the resource (and, for a
validation rejection, the server's own message, which names the field); the subcommands exit 1 with it.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import urllib3
from kubernetes import client, config

from trafficsplit.cli.common import Handler

GROUP, VERSION, PLURAL = "trafficsplit.dev", "v1alpha1", "trafficsplits"
API_VERSION = f"{GROUP}/{VERSION}"
HTTPROUTE, HTTPROUTE_PLURAL = ("gateway.networking.k8s.io", "v1"), "httproutes"
GATEWAY_PLURAL = "gateways"
POLICY_PLURAL = "trafficsplitpolicies"
# What a 404 without the object's name says is not served, by Ref.kind.
SERVED = {
    "trafficsplit": f"{PLURAL}.{API_VERSION}",
    "trafficsplitpolicy": f"{POLICY_PLURAL}.{API_VERSION}",
    "httproute": f"{HTTPROUTE_PLURAL}.{'/'.join(HTTPROUTE)}",
    "gateway": f"{GATEWAY_PLURAL}.{'/'.join(HTTPROUTE)}",
}
FIELD_MANAGER = "kubectl-trafficsplit"
EXIT_KUBE = 1
# Where a pod's service-account namespace lives; kubectl uses it when running in a cluster without a kubeconfig.
INCLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class KubeError(Exception):
    """The API server refused, or could not be reached: exit 1 with one line (not a usage error)."""


@dataclass(frozen=True, slots=True)
class Ref:
    namespace: str
    name: str
    kind: str = "trafficsplit"

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def add_kube_arguments(parser: argparse.ArgumentParser) -> None:
    """kubectl's own flags, so `kubectl trafficsplit ... -n shop --context prod` reads like any kubectl command."""
    parser.add_argument("-n", "--namespace", help="the namespace (default: the context's namespace, else default)")
    parser.add_argument("--kubeconfig", help="the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    parser.add_argument("--context", help="the kubeconfig context to use (default: the current context)")


def kube_errors(handler: Handler) -> Handler:
    """Turn a KubeError from a subcommand into one stderr line and exit 1 (main.py handles only usage errors)."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace, out: TextIO) -> int:
        try:
            return handler(args, out)
        except KubeError as exc:
            sys.stderr.write(
                f"{getattr(args, 'prog', 'trafficsplit')} {args.command}: error: {' '.join(str(exc).split())}\n"
            )
            return EXIT_KUBE

    return run


def _kubeconfig_paths(explicit: str | None) -> str | None:
    """kubectl's order: --kubeconfig, then $KUBECONFIG (a path list), then ~/.kube/config; None means in-cluster."""
    if explicit:
        return explicit
    env = os.environ.get("KUBECONFIG", "")
    if any(p for p in env.split(os.pathsep)):
        return env
    home = Path("~/.kube/config").expanduser()
    return str(home) if home.exists() else None


def context_namespace(
    contexts: Sequence[Mapping[str, Any]], current: Mapping[str, Any] | None, chosen: str | None
) -> str:
    """The namespace the chosen (else current) context names, else "default" — kubectl's rule for an omitted -n."""
    name = chosen or (current or {}).get("name")
    for ctx in contexts:
        if ctx.get("name") == name:
            ns = (ctx.get("context") or {}).get("namespace")
            return str(ns) if ns else "default"
    return "default"


class Cluster:
    """One API server connection and the namespace the command works in."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.custom = client.CustomObjectsApi(api)

    @classmethod
    def connect(cls, args: argparse.Namespace) -> Cluster:
        paths = _kubeconfig_paths(args.kubeconfig)
        cfg = client.Configuration()
        try:
            if paths is None:
                config.load_incluster_config(client_configuration=cfg)
                ns = args.namespace or (
                    INCLUSTER_NAMESPACE.read_text().strip() if INCLUSTER_NAMESPACE.exists() else "default"
                )
            else:
                config.load_kube_config(config_file=paths, context=args.context, client_configuration=cfg)
                contexts, current = config.list_kube_config_contexts(config_file=paths)
                ns = args.namespace or context_namespace(contexts, current, args.context)
        except config.ConfigException as exc:
            where = paths or "no kubeconfig (--kubeconfig, KUBECONFIG, ~/.kube/config) and not in a cluster"
            raise KubeError(f"cannot load credentials from {where}: {exc}") from exc
        except OSError as exc:
            raise KubeError(f"cannot read the kubeconfig {paths}: {exc}") from exc
        # One attempt, as kubectl makes: urllib3's retries would also log every attempt on stderr.
        cfg.retries = False
        return cls(client.ApiClient(cfg), ns)

    def ref(self, name: str) -> Ref:
        return Ref(self.namespace, name)

    def get(self, name: str) -> dict[str, Any]:
        ref = self.ref(name)
        return self._call(
            ref,
            lambda: self.custom.get_namespaced_custom_object(
                GROUP, VERSION, ref.namespace, PLURAL, ref.name, _preload_content=False
            ),
        )

    def get_httproute(self, name: str) -> dict[str, Any]:
        ref = Ref(self.namespace, name, "httproute")
        return self._call(
            ref,
            lambda: self.custom.get_namespaced_custom_object(
                *HTTPROUTE, ref.namespace, HTTPROUTE_PLURAL, ref.name, _preload_content=False
            ),
        )

    def get_gateway(self, namespace: str, name: str) -> dict[str, Any]:
        ref = Ref(namespace, name, "gateway")
        return self._call(
            ref,
            lambda: self.custom.get_namespaced_custom_object(
                *HTTPROUTE, ref.namespace, GATEWAY_PLURAL, ref.name, _preload_content=False
            ),
        )

    def patch_httproute(self, name: str, ops: Sequence[Mapping[str, Any]], *, dry_run: bool) -> dict[str, Any]:
        """A JSON patch of an HTTPRoute as FIELD_MANAGER (routes.weight_patch: it tests the resourceVersion read)."""
        ref = Ref(self.namespace, name, "httproute")
        return self._call(
            ref,
            lambda: self.custom.patch_namespaced_custom_object(
                *HTTPROUTE,
                ref.namespace,
                HTTPROUTE_PLURAL,
                ref.name,
                [dict(op) for op in ops],
                field_manager=FIELD_MANAGER,
                dry_run="All" if dry_run else None,
                _content_type="application/json-patch+json",
                _preload_content=False,
            ),
            json_patch=True,
        )

    def list_policies(self) -> list[dict[str, Any]]:
        """The namespace's TrafficSplitPolicies; none when the API server does not serve them (no CRD)."""
        ref = Ref(self.namespace, "*", "trafficsplitpolicy")
        try:
            resp = self.custom.list_namespaced_custom_object(
                GROUP, VERSION, self.namespace, POLICY_PLURAL, _preload_content=False
            )
        except client.ApiException as exc:
            if exc.status == 404:
                return []
            raise KubeError(api_error_message(ref, exc.status, exc.body)) from exc
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            raise KubeError(f"{ref}: cannot reach the API server {self.api.configuration.host}: {exc}") from exc
        items = json.loads(resp.data).get("items") or []
        return [i for i in items if isinstance(i, dict)]

    def apply_backends(
        self, name: str, backends: Sequence[Mapping[str, Any]], *, resource_version: str, dry_run: bool, force: bool
    ) -> dict[str, Any]:
        """Server-side apply of spec.backends only (an atomic list: the whole list is sent), as FIELD_MANAGER.

        `resource_version` makes the apply conditional on the object the plan was computed from: a concurrent edit
        fails with 409 instead of being overwritten by weights planned against an older list.
        """
        ref = self.ref(name)
        body = apply_body(ref, backends, resource_version)
        return self._call(
            ref,
            lambda: self.custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                ref.namespace,
                PLURAL,
                ref.name,
                body,
                field_manager=FIELD_MANAGER,
                force=force,
                dry_run="All" if dry_run else None,
                _content_type="application/apply-patch+yaml",
                _preload_content=False,
            ),
        )

    def _call(self, ref: Ref, fn: Callable[[], Any], *, json_patch: bool = False) -> dict[str, Any]:
        try:
            resp = fn()
        except client.ApiException as exc:
            raise KubeError(api_error_message(ref, exc.status, exc.body, json_patch=json_patch)) from exc
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            raise KubeError(f"{ref}: cannot reach the API server {self.api.configuration.host}: {exc}") from exc
        obj: dict[str, Any] = json.loads(resp.data)
        return obj


def apply_body(ref: Ref, backends: Sequence[Mapping[str, Any]], resource_version: str) -> dict[str, Any]:
    """The apply configuration: identity, the precondition and spec.backends — no other field is claimed."""
    metadata = {"name": ref.name, "namespace": ref.namespace}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {
        "apiVersion": API_VERSION,
        "kind": "TrafficSplit",
        "metadata": metadata,
        "spec": {"backends": [dict(b) for b in backends]},
    }


PATCH_NOT_APPLIED = "the server rejected our request due to an error in our request"


def api_error_message(ref: Ref, status: int | None, body: str | bytes | None, *, json_patch: bool = False) -> str:
    """One line for an API error: the server's Status message (it names the field), with what to do for the
    cases a user can act on."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else (body or "")
    try:
        doc = json.loads(text or "{}")
    except ValueError:
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    message = str(doc.get("message") or text.strip() or f"HTTP {status}")
    reason = doc.get("reason")
    details = doc.get("details") or {}
    if status == 404:
        if details.get("name") == ref.name:
            return f"{ref} not found"
        return (
            f"{ref}: the API server does not serve {SERVED.get(ref.kind, ref.kind)} (is the CRD installed?): {message}"
        )
    if status == 409 and "conflict" in message.lower() and "apply failed" in message.lower():
        return (
            f"{ref}: {message}; another field manager also owns spec.backends: re-run with --force-conflicts to take "
            "it over (that manager's next apply will write its own weights back)"
        )
    if status == 409:
        return f"{ref}: {message} (it changed after it was read; run the command again to plan against the new list)"
    if status == 403:
        return f"{ref}: forbidden: {message}"
    if json_patch and status == 422 and not details and message.startswith(PATCH_NOT_APPLIED):
        # What the server says when a JSON patch does not apply (no field named): a `test` op failed or a path is
        # gone. Both mean the route changed since it was read (routes.weight_patch tests the resourceVersion).
        return (
            f"{ref}: it changed after it was read (the patch's test of its resourceVersion failed); run the command "
            "again to plan against the new weights"
        )
    if reason == "Invalid" or status == 422:
        return message  # "TrafficSplit.trafficsplit.dev "shop" is invalid: spec.backends[1].weight: ..."
    return f"{ref}: {message}"
