"""`-f FILE`: an HTTPRoute manifest read as kubectl reads one, for the offline `plan -f route.yaml`.

A file may hold several documents (`---`): the HTTPRoute is the only one there, or the one `httproute/NAME` names; the
TrafficSplitPolicies in the same file are the ones the plan resolves for the rule, as the operator would with those
objects in the namespace. A document without a namespace takes `-n`'s, else `default` (there is no kubeconfig to ask
offline); one naming another namespace than `-n` is refused, as `kubectl apply -n` refuses it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trafficsplit.cli.common import UsageError

MAX_FILE_BYTES = 1 << 20  # an HTTPRoute is a few KB (the API server stores at most 1.5 MB per object)
MAX_DOCUMENTS = 256
ROUTE_KIND, POLICY_KIND = "HTTPRoute", "TrafficSplitPolicy"


@dataclass(frozen=True, slots=True)
class RouteFile:
    route: dict[str, Any]  # the HTTPRoute body, its namespace filled in
    policies: tuple[dict[str, Any], ...]  # the file's TrafficSplitPolicies in the route's namespace


def read_text(path: str) -> str:
    """The file's text (`-` is stdin), at most MAX_FILE_BYTES, UTF-8."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
        else:
            with Path(path).open("rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"-f: cannot read {path}: {exc.strerror or exc}") from exc
    if len(data) > MAX_FILE_BYTES:
        raise UsageError(f"-f: {path} is larger than {MAX_FILE_BYTES} bytes (an HTTPRoute manifest is a few KB)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"-f: {path} is not UTF-8 text (byte {exc.start})") from exc


def documents(text: str, path: str) -> list[Mapping[str, Any]]:
    """The file's YAML documents that are objects (a `kind: List` is opened, as kubectl does)."""
    try:
        raw = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else path
        raise UsageError(f"-f: {where}: not YAML: {getattr(exc, 'problem', None) or exc}") from exc
    docs: list[Mapping[str, Any]] = []
    for doc in raw:
        items = doc.get("items") if isinstance(doc, Mapping) and doc.get("kind") == "List" else [doc]
        docs += [d for d in items or [] if isinstance(d, Mapping)]
        if len(docs) > MAX_DOCUMENTS:
            raise UsageError(f"-f: {path} holds more than {MAX_DOCUMENTS} objects")
    return docs


def _name(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def _in_namespace(doc: Mapping[str, Any], namespace: str | None, path: str) -> dict[str, Any]:
    """A copy of `doc` with its namespace: the document's, else -n's, else default; a clash with -n is refused."""
    meta = doc.get("metadata")
    meta = dict(meta) if isinstance(meta, Mapping) else {}
    written = meta.get("namespace")
    if written and namespace and written != namespace:
        raise UsageError(
            f"-f: {path}: {doc.get('kind')} {_name(doc)!r} is in namespace {written!r}, which does not match -n "
            f"{namespace!r}"
        )
    meta["namespace"] = written or namespace or "default"
    return {**doc, "metadata": meta}


def pick_route(docs: list[Mapping[str, Any]], name: str | None, namespace: str | None, path: str) -> RouteFile:
    """The HTTPRoute of the file (`name`: the one so named, required when there are several) and its policies."""
    routes = [d for d in docs if d.get("kind") == ROUTE_KIND]
    chosen = [d for d in routes if name is None or _name(d) == name]
    names = ", ".join(repr(_name(d)) for d in routes)
    if not chosen:
        have = f"its HTTPRoutes: {names}" if routes else "it holds no HTTPRoute"
        want = f"no HTTPRoute {name!r}" if name is not None else "no HTTPRoute"
        raise UsageError(f"-f: {path} has {want} ({have})")
    if len(chosen) > 1:
        more = "several HTTPRoutes" if name is None else f"{len(chosen)} HTTPRoutes named {name!r}"
        raise UsageError(f"-f: {path} holds {more} ({names}): name one, plan httproute/NAME -f {path}")
    route = _in_namespace(chosen[0], namespace, path)
    ns = route["metadata"]["namespace"]
    policies = tuple(
        p
        for p in (_in_namespace(d, namespace, path) for d in docs if d.get("kind") == POLICY_KIND)
        if p["metadata"]["namespace"] == ns  # a policy attaches to routes of its own namespace only
    )
    return RouteFile(route, policies)


def read_route_file(path: str, name: str | None, namespace: str | None) -> RouteFile:
    return pick_route(documents(read_text(path), path), name, namespace, path)
