"""What may reach an HTTP header value or a Set-Cookie attribute.

Envoy renders cookie attributes and routing values into headers verbatim: a CR or LF there becomes a header of the
client's choosing (response splitting), and a value Envoy's own checks refuse (a control byte) fails every request
that carries it. So every configured string that Envoy puts in a header is printable ASCII, checked here, at each
trust boundary (spec parser, publish receiver) and again by the values that render it.
"""

from __future__ import annotations

import re

# Printable ASCII, no leading or trailing space (RFC 9110 field-value without obs-text).
_HEADER_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)?")
# RFC 6265 §4.1.1 av-octet: any CHAR except CTLs or ";".
_COOKIE_ATTRIBUTE = re.compile(r"[\x20-\x3a\x3c-\x7e]*")


def is_header_value(value: str) -> bool:
    """True when `value` is safe as a whole HTTP header value: printable ASCII only, not padded with spaces."""
    return _HEADER_VALUE.fullmatch(value) is not None


def is_cookie_attribute(value: str) -> bool:
    """True when `value` is safe as a Set-Cookie attribute value: printable ASCII, no ';'."""
    return _COOKIE_ATTRIBUTE.fullmatch(value) is not None
