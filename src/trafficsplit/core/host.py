"""DNS names, and the host of a request read one way by the routes and the processor.

`normalize_host` is exactly what Envoy does to `:authority` to pick a virtual host, given the route configuration's
`ignore_port_in_host_matching` (wire/envoy.py): fold ASCII case, and cut at the last ':' that is not inside an IPv6
literal's brackets (Envoy's HeaderUtility::getPortStart, whatever follows it). Nothing else: a trailing dot stays, so
`shop.example.` is not `shop.example` to either. Envoy leaves the header itself unchanged (the HCM's
`strip_any_host_port` would rewrite it, and the processor would then strip a second port), so both apply this one
function to the same bytes and a request is served by the same split whether the processor is up or down
(docs/dataplane.md "The Host"; tests/integration/test_dataplane_untrusted.py).
"""

from __future__ import annotations

import re

from trafficsplit.core.limits import MAX_HOST, MAX_NAME, MAX_NAMESPACE

_DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?")
_HOST = re.compile(r"(?:\*\.)?[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?")
# Envoy folds ASCII only; str.lower() would also fold e.g. the Kelvin sign (U+212A) into 'k'.
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def is_dns_label(name: str, max_length: int = MAX_NAMESPACE) -> bool:
    return len(name) <= max_length and _DNS_LABEL.fullmatch(name) is not None


def is_dns_subdomain(name: str, max_length: int = MAX_NAME) -> bool:
    return len(name) <= max_length and _DNS_SUBDOMAIN.fullmatch(name) is not None


def is_host(host: str) -> bool:
    """A split's host: a lowercase DNS name, optionally `*.` + suffix; no port, no scheme, no trailing dot."""
    return len(host) <= MAX_HOST and _HOST.fullmatch(host) is not None


def normalize_host(authority: str) -> str:
    """The host Envoy matches virtual hosts with (see the module docstring)."""
    host = authority.lower() if authority.isascii() else authority.translate(_ASCII_LOWER)
    colon = host.rfind(":")
    if colon == -1 or host.rfind("]") > colon:
        return host
    return host[:colon]
