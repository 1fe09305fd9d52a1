"""The rules on the fields a split carries (names, hosts, ports, endpoints, match patterns), each written once.

Why one module: the same field reaches the core two ways, from YAML through the parser (`spec.parse_split`) and from a
publish proto through the dataplane's receiver (`trafficsplit.wire.generation`). Both build the same self-checking
values (`CompiledSplit`, `CompiledBackend`, `CompiledMatch`, `CookieSettings`, `Endpoint`, ...), and those check
themselves with the functions here, so the receiver refuses exactly what the parser refuses. A new rule on a field is a
line here.

Problems are `field: message` strings, the field relative to the value (`hosts[1]`, `port`); whoever builds the value
puts its own path in front (`SpecError.within`), `spec.hosts[1]` for the parser, `splits[0].hosts[1]` for the receiver.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.headervalue import is_header_value
from trafficsplit.core.model.limits import (
    MAX_ADDRESS,
    MAX_BACKEND_NAME,
    MAX_CLUSTER,
    MAX_HOST,
    MAX_HOSTS,
    MAX_MATCH_NAME,
    MAX_MATCH_VALUE,
    MAX_NAME,
)
from trafficsplit.core.model.regex import Pattern, RegexError

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_HOST = re.compile(r"(\*\.)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
# A Kubernetes metadata.uid as a label value carries it (provisioned objects do): at most 63 of [A-Za-z0-9-].
_UID = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
# RFC 7230 token characters, which RFC 6265 uses for cookie names (and HTTP for header names).
_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def is_token(name: str) -> bool:
    """True for a valid RFC 6265 cookie name or HTTP header name (an RFC 7230 token)."""
    return bool(name) and all(c in _TOKEN_CHARS for c in name)


def is_dns_label(name: str) -> bool:
    """A Kubernetes-style DNS label: lowercase letters, digits and '-', at most 63 characters."""
    return len(name) <= MAX_BACKEND_NAME and _DNS_LABEL.fullmatch(name) is not None


def is_dns_subdomain(name: str) -> bool:
    """A Kubernetes object name: a DNS subdomain of lowercase letters, digits, '-' and '.', at most 253."""
    return len(name) <= MAX_NAME and _DNS_SUBDOMAIN.fullmatch(name) is not None


def is_host(host: str) -> bool:
    """A lowercase DNS host name, optionally `*.`-prefixed; no port, no scheme."""
    return len(host) <= MAX_HOST and _HOST.fullmatch(host) is not None


def name_problems(namespace: str, name: str) -> list[str]:
    """A split's identity: a namespace (DNS label) and a name (DNS subdomain), as Kubernetes requires of its objects.
    The file source (local mode) takes them from files; they end up in cluster names, i.e. in a header value."""
    problems = [] if is_dns_label(namespace) else [f"namespace: {namespace[:64]!r} must be a DNS label"]
    if not is_dns_subdomain(name):
        problems.append(f"name: {name[:64]!r} must be a DNS subdomain (lowercase letters, digits, '-', '.')")
    return problems


def uid_problems(field_: str, uid: str) -> list[str]:
    """An object's metadata.uid, empty when not known. It reaches a label value and the extproc's `--gateway-uid`."""
    if uid and not _UID.fullmatch(uid):
        return [f"{field_}: {uid[:64]!r} must be letters, digits and dashes"]
    return []


def cluster_problems(cluster: str) -> list[str]:
    """The routing header's value (core/model/headervalue.py): a control byte there would fail every request it
    routes."""
    if not cluster:
        return ["cluster: required"]
    if len(cluster) > MAX_CLUSTER or not is_header_value(cluster):
        return [f"cluster: {cluster[:64]!r} must be printable ASCII of at most {MAX_CLUSTER} characters"]
    return []


def is_domain(domain: str) -> bool:
    """A cookie Domain attribute: a host name, optionally with a leading dot."""
    return ";" not in domain and is_host(domain.lstrip(".").lower())


def port_problems(port: int, field: str = "port") -> list[str]:
    return [] if 1 <= port <= 65535 else [f"{field}: must be 1..65535, got {port}"]


def host_problems(hosts: Sequence[str], *, required: bool = True) -> list[str]:
    """Every reason `hosts` (already lowercased) is not a split's host list. `required=False`: none is allowed (a
    route rule's split, which a Gateway's route table selects; `Generation` checks that a table refers to it)."""
    problems: list[str] = []
    if not hosts and required:
        problems.append("hosts: at least one host is required")
    if len(hosts) > MAX_HOSTS:
        problems.append(f"hosts: {len(hosts)} hosts, at most {MAX_HOSTS} are allowed")
    seen: set[str] = set()
    for i, h in enumerate(hosts):
        if not is_host(h):
            problems.append(f"hosts[{i}]: {h!r} is not a DNS host name (no port, no scheme)")
        elif h in seen:
            problems.append(f"hosts[{i}]: duplicate host {h!r}")
        seen.add(h)
    return problems


def backend_name_problems(name: str) -> list[str]:
    """The CRD's rule on a backend name, for every place a name enters (the parser, the receiver, the CLI's NAME=W)."""
    return [] if is_dns_label(name) else [f"name: {name[:64]!r} must be a DNS label (lowercase letters, digits, '-')"]


def backend_problems(name: str, port: int, service: str) -> list[str]:
    """A backend's own fields (its weight is the `Weights` value's to check)."""
    problems = backend_name_problems(name)
    if not is_dns_label(service):
        problems.append(f"service: {service[:64]!r} must be a DNS label (a Service name)")
    return problems + port_problems(port)


def match_name_problems(kind: str, name: str) -> list[str]:
    if len(name) <= MAX_MATCH_NAME and is_token(name):
        return []
    return [f"name: {name[:64]!r} is not a valid {kind} name (a token of at most {MAX_MATCH_NAME})"]


# Headers a sticky key must not come from: the cookie (sticky.cookie's job) and the request id Envoy sets per request
# (every request would be a new session).
_NOT_KEY_HEADERS = frozenset({"cookie", "x-request-id"})
# A header-carried session (an HTTPRoute's `type: Header`) is also sent back in a response header of its name: not one
# that frames or routes a message, and not the gateway's own `x-trafficsplit-*`.
_NOT_ISSUED_HEADERS = frozenset(
    {
        "set-cookie",
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        "location",
    }
)
_GATEWAY_HEADER_PREFIX = "x-trafficsplit-"


def key_header_problems(name: str, *, issued: bool = False) -> list[str]:
    """sticky.header.name: a lowercase header token the client sends (the processor sees names lowercased). `issued`:
    the header carries a persistent session, so the gateway also sends it in responses."""
    problems = match_name_problems("header", name)
    if not problems and name != name.lower():
        problems.append(f"name: {name!r} must be lowercase (HTTP/2 and Envoy carry header names lowercased)")
    elif not problems and name in _NOT_KEY_HEADERS:
        problems.append(f"name: {name!r} cannot carry a sticky key")
    elif not problems and issued and (name in _NOT_ISSUED_HEADERS or name.startswith(_GATEWAY_HEADER_PREFIX)):
        problems.append(
            f"name: {name!r} cannot carry a session the gateway issues in responses (it frames or routes a message, "
            "or is the gateway's own)"
        )
    return problems


def match_value_problems(value: str) -> list[str]:
    if len(value) > MAX_MATCH_VALUE:
        return [f"value: {len(value)} characters, at most {MAX_MATCH_VALUE} are allowed"]
    return []


def compile_pattern(value: str) -> Pattern:
    """A match rule's regular expression, compiled with RE2 (core/model/regex.py); raises SpecError naming `value`."""
    try:
        return Pattern(value)
    except RegexError as exc:
        raise SpecError([f"value: invalid regular expression: {exc}"]) from None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An address a backend's traffic goes to: from an EndpointSlice, a local-mode spec, or a publish proto."""

    address: str
    port: int
    ready: bool = True

    def __post_init__(self) -> None:
        problems = [] if self.address else ["address: required"]
        if len(self.address) > MAX_ADDRESS:
            problems.append(f"address: {len(self.address)} characters, at most {MAX_ADDRESS} are allowed")
        problems += port_problems(self.port)
        if problems:
            raise SpecError(problems)

    @property
    def host(self) -> str:
        """`address:port` as Envoy names an upstream host (IPv6 in brackets): the endpoint ring's member name and
        the processor's endpoint choice, which Envoy's override_host policy looks up verbatim."""
        return f"[{self.address}]:{self.port}" if ":" in self.address else f"{self.address}:{self.port}"
