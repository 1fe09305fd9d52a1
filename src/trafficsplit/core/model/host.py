"""The host of a request, read one way by the routes and the processor.

`normalize_host` is exactly what Envoy does to `:authority` to pick a virtual host, given the route configuration's
`ignore_port_in_host_matching` (wire/envoy.py): fold ASCII case, and cut at the last ':' that is not inside an IPv6
literal's brackets (Envoy's HeaderUtility::getPortStart, whatever follows it). Nothing else: a trailing dot stays, so
`shop.example.` is not `shop.example` to either. Envoy leaves the header itself unchanged (the HCM's
`strip_any_host_port` would rewrite it, and the processor would then strip a second port), so both apply this one
function to the same bytes and a request is served by the same split whether the processor is up or down
(docs/dataplane.md "The Host"; tests/integration/test_dataplane_untrusted.py).
"""

from __future__ import annotations

# Envoy folds ASCII only; str.lower() would also fold e.g. the Kelvin sign (U+212A) into 'k'.
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def normalize_host(authority: str) -> str:
    """The host Envoy matches virtual hosts with (see the module docstring)."""
    host = authority.lower() if authority.isascii() else authority.translate(_ASCII_LOWER)
    colon = host.rfind(":")
    if colon == -1 or host.rfind("]") > colon:
        return host
    return host[:colon]
