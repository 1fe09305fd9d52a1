"""The rules on the fields a split carries (names, hosts, ports, endpoints, match patterns), each written once.

Why one module: the same field reaches the core two ways, from YAML through the parser (`spec.parse_split`) and from
a publish proto through the dataplane's receiver (`trafficsplit.wire.generation`). Both build the same self-checking
values (`SplitSpec`, `CompiledSplit`, `CookieSettings`, `Endpoint`, ...), and those values check themselves with the
functions here, so the receiver refuses exactly what the parser refuses. A new rule on a field is a line here.

Problems are `field: message` strings, the field relative to the value (`hosts[1]`, `port`); whoever builds the value
puts its own path in front (`SpecError.within`), `spec.hosts[1]` for the parser, `splits[0].hosts[1]` for the receiver.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from trafficsplit.core.errors import SpecError

MAX_HOSTS = 16
MAX_HOST_LENGTH = 253
MAX_LABEL_LENGTH = 63
MAX_MATCHES = 32

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_HOST = re.compile(r"(\*\.)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
# RFC 7230 token characters, which RFC 6265 uses for cookie names (and HTTP for header names).
_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def is_token(name: str) -> bool:
    """True for a valid RFC 6265 cookie name or HTTP header name (an RFC 7230 token)."""
    return bool(name) and all(c in _TOKEN_CHARS for c in name)


def is_dns_label(name: str) -> bool:
    """A Kubernetes-style DNS label: lowercase letters, digits and '-', at most 63 characters."""
    return len(name) <= MAX_LABEL_LENGTH and _DNS_LABEL.fullmatch(name) is not None


def is_host(host: str) -> bool:
    """A lowercase DNS host name, optionally `*.`-prefixed; no port, no scheme."""
    return len(host) <= MAX_HOST_LENGTH and _HOST.fullmatch(host) is not None


def is_domain(domain: str) -> bool:
    """A cookie Domain attribute: a host name, optionally with a leading dot."""
    return ";" not in domain and is_host(domain.lstrip(".").lower())


def port_problems(port: int, field: str = "port") -> list[str]:
    return [] if 1 <= port <= 65535 else [f"{field}: must be 1..65535, got {port}"]


def host_problems(hosts: Sequence[str]) -> list[str]:
    """Every reason `hosts` (already lowercased) is not a split's host list."""
    problems: list[str] = []
    if not hosts:
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


def backend_problems(name: str, port: int) -> list[str]:
    """A backend's own fields (its weight is the `Weights` value's to check)."""
    problems = [] if is_dns_label(name) else [f"name: {name!r} must be a DNS label (lowercase letters, digits, '-')"]
    return problems + port_problems(port)


def match_name_problems(kind: str, name: str) -> list[str]:
    return [] if is_token(name) else [f"name: {name!r} is not a valid {kind} name"]


def compile_pattern(value: str) -> re.Pattern[str]:
    """A match rule's regular expression, compiled; raises SpecError naming the field `value`."""
    try:
        return re.compile(value)
    except re.error as exc:
        raise SpecError([f"value: invalid regular expression: {exc}"]) from None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An address a backend's traffic goes to: from an EndpointSlice, a local-mode spec, or a publish proto."""

    address: str
    port: int
    ready: bool = True

    def __post_init__(self) -> None:
        problems = [] if self.address else ["address: required"]
        problems += port_problems(self.port)
        if problems:
            raise SpecError(problems)

    @property
    def host(self) -> str:
        """`address:port` as Envoy names an upstream host (IPv6 in brackets): the endpoint ring's member name and
        the processor's endpoint choice, which Envoy's override_host policy looks up verbatim."""
        return f"[{self.address}]:{self.port}" if ":" in self.address else f"{self.address}:{self.port}"
