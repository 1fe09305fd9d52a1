"""What every Gateway API parser shares: the readers that bound and check a raw API body field by field, an
object's `Meta`, a hostname, the report of fields this implementation does not read, and the names and bounds more than
one kind uses. Pure.

Why parse here and not trust the API server's schema: the same reason `spec.parse_split` re-checks a TrafficSplit.
Local mode and tests have no API server in front, a compiled generation must never rest on trust, and every list and
string is bounded before anything iterates over it. The bounds are the upstream CRD's (sigs.k8s.io/gateway-api
v1.6.3; tests/unit/test_gateway_api_crds.py compares them with the committed CRD copies).

Two kinds of problem, kept apart because the spec answers them differently:
- a body whose shape is wrong (a missing name, a list over its bound, a hostname that is no hostname) raises
  `SpecError`: the API server would have refused it, there is nothing to translate;
- a well-formed object that uses what this implementation does not support (a listener's field, a route rule's filter
  or timeout) is kept, with its `problems`: the translation reports it in the status instead of silently ignoring the
  field (gatewayapi.httproute says how a rule's are answered).

The kinds themselves: GatewayClass, Namespace, ReferenceGrant and Gateway in gateway_objects, HTTPRoute in
gatewayapi.httproute.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.fields import unknown_fields
from trafficsplit.core.model.rules import is_dns_label, is_dns_subdomain, is_host, uid_problems

GATEWAY_GROUP = "gateway.networking.k8s.io"
# The GatewayClass controllerName this implementation answers to.
CONTROLLER_NAME = "trafficsplit.dev/gateway-controller"

# The upstream CRD's bounds more than one kind reads; each kind's own are in its module.
MAX_SECTION_NAME = 253  # a listener's name, a parentRef's sectionName, a route rule's name
MAX_GROUP = 253
MAX_KIND = 63


# An object reference's fields (a parentRef, a backendRef, a listener's certificateRef), for the maps of supported
# fields in gatewayapi.objects and gatewayapi.httproute.
REF_FIELDS = {"group": None, "kind": None, "namespace": None, "name": None}


def unsupported_fields(value: Any, fields: Mapping[str, Any], path: str) -> list[str]:
    """`path.field: not supported by this implementation` for every field of `value` not in `fields`."""
    return unknown_fields(value, fields, path, word="not supported by this implementation")


# --- small readers: each returns the value or records a problem under its path ----------------------------------------


_E = TypeVar("_E", bound=StrEnum)


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class Reader:
    """Collects every shape problem of one body, so a user fixes them all at once."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def obj(self, raw: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
        value = raw.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.add(_at(path, key), "expected an object")
            return {}
        return value

    def items(self, raw: Mapping[str, Any], key: str, path: str, bound: int) -> list[Any]:
        value = raw.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(_at(path, key), "expected a list")
            return []
        if len(value) > bound:
            self.add(_at(path, key), f"{len(value)} items, at most {bound} are allowed")
            return []
        return value

    def text(self, raw: Mapping[str, Any], key: str, path: str, bound: int, required: bool = False) -> str | None:
        value = raw.get(key)
        if value is None:
            if required:
                self.add(_at(path, key), "required")
            return None
        if not isinstance(value, str):
            self.add(_at(path, key), f"expected a string, got {type(value).__name__}")
            return None
        if len(value) > bound:
            self.add(_at(path, key), f"{len(value)} characters, at most {bound} are allowed")
            return None
        return value

    def integer(self, raw: Mapping[str, Any], key: str, path: str, low: int, high: int) -> int | None:
        value = raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.add(_at(path, key), f"expected an integer, got {type(value).__name__}")
            return None
        if not low <= value <= high:
            self.add(_at(path, key), f"must be {low}..{high}, got {value}")
            return None
        return value

    def enum(self, raw: Mapping[str, Any], key: str, path: str, kind: type[_E], default: _E) -> _E:
        value = self.text(raw, key, path, 64)
        if value is None:
            return default
        try:
            return kind(value)
        except ValueError:
            self.add(_at(path, key), f"{value!r} must be one of {', '.join(k.value for k in kind)}")
            return default

    def done(self) -> None:
        if self.problems:
            raise SpecError(self.problems)


@dataclass(frozen=True, slots=True, kw_only=True)
class Meta:
    namespace: str
    name: str
    generation: int
    created: str  # creationTimestamp (RFC 3339, so text order is time order): older routes win precedence ties
    # metadata.uid: which object this is (a name deleted and created again is another); a provisioned data plane's
    # objects carry their Gateway's, as a label value (so at most 63 characters of [A-Za-z0-9-])
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def read_meta(body: Mapping[str, Any], r: Reader, namespaced: bool = True) -> Meta:
    """An object's metadata: its name (a DNS subdomain), its namespace (a DNS label) when the kind is namespaced."""
    if not isinstance(body, Mapping):
        raise SpecError(["expected an object"])
    m = r.obj(body, "metadata", "")
    name = r.text(m, "name", "metadata", 253, required=True) or ""
    if name and not is_dns_subdomain(name):
        r.add("metadata.name", f"{name[:64]!r} must be a DNS subdomain")
    ns = (r.text(m, "namespace", "metadata", 63, required=True) or "") if namespaced else ""
    if ns and not is_dns_label(ns):
        r.add("metadata.namespace", f"{ns[:64]!r} must be a DNS label")
    generation = r.integer(m, "generation", "metadata", 0, 2**63 - 1) or 0
    created = r.text(m, "creationTimestamp", "metadata", 64) or ""
    uid = r.text(m, "uid", "metadata", 63) or ""
    r.problems += uid_problems("metadata.uid", uid)
    return Meta(namespace=ns, name=name, generation=generation, created=created, uid=uid)


def read_hostname(value: str | None, path: str, r: Reader, wildcard: bool = True) -> str | None:
    """A Gateway API Hostname: a lowercase DNS name, `*.`-prefixed only where allowed, never an IP address."""
    if value is None:
        return None
    host = value.lower()
    if not is_host(host) or (not wildcard and host.startswith("*.")) or _is_ip(host):
        r.add(path, f"{value[:64]!r} is not a hostname" + ("" if wildcard else " (no wildcard here)"))
        return None
    return host


def _is_ip(host: str) -> bool:
    parts = host.split(".")
    return len(parts) == 4 and all(p.isdigit() for p in parts)
