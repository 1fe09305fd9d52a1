"""TLS from the data plane to a backend (Gateway API's BackendTLSPolicy): the name Envoy sends as SNI and checks the
backend's certificate against, the trust anchors, and the subject alternative names a certificate must carry instead.
Pure; the values check themselves, so the translation and the publish receiver refuse the same things.

Without `subject_alt_names`, the backend's certificate must name `sni` (a DNS SAN); with them, it must carry one of
them (Gateway API: "the hostname is then used for SNI only"). `ca` None means the data plane's system trust store
(`wellKnownCACertificates: System`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.rules import is_host
from trafficsplit.core.model.tls import CaBundle

MAX_SUBJECT_ALT_NAMES = 5  # the CRD's bound
MAX_URI = 253
_URI_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


class SanKind(StrEnum):
    HOSTNAME = "Hostname"
    URI = "URI"


def san_problems(kind: SanKind, value: str) -> list[str]:
    """Why `value` cannot be a subject alternative name of `kind` (a precise hostname; an absolute URI of printable
    ASCII without spaces, as Envoy compares it byte for byte)."""
    if kind is SanKind.HOSTNAME:
        if not is_host(value) or value.startswith("*."):
            return [f"{value[:64]!r} is not a hostname (no wildcard)"]
        return []
    scheme, colon, _ = value.partition(":")
    if len(value) > MAX_URI:
        return [f"{len(value)} characters, at most {MAX_URI} are allowed"]
    if not colon or not scheme or not set(scheme) <= _URI_SCHEME_CHARS or not scheme[0].isalpha():
        return [f"{value[:64]!r} is not an absolute URI"]
    if any(not 0x21 <= ord(c) <= 0x7E for c in value):
        return [f"{value[:64]!r} has a space or a character that is not printable ASCII"]
    return []


@dataclass(frozen=True, slots=True)
class SubjectAltName:
    kind: SanKind
    value: str

    def __post_init__(self) -> None:
        problems = san_problems(self.kind, self.value)
        if problems:
            raise SpecError([f"value: {p}" for p in problems])


@dataclass(frozen=True, slots=True)
class UpstreamTls:
    """How the data plane speaks TLS to one backend: SNI `sni`, the certificate checked against `ca` (None: the
    system trust store) and against `subject_alt_names` (none: it must name `sni`)."""

    sni: str
    ca: CaBundle | None = None
    subject_alt_names: tuple[SubjectAltName, ...] = ()

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not is_host(self.sni) or self.sni.startswith("*."):
            problems.append(f"sni: {self.sni[:64]!r} is not a hostname (no wildcard)")
        if len(self.subject_alt_names) > MAX_SUBJECT_ALT_NAMES:
            problems.append(
                f"subject_alt_names: {len(self.subject_alt_names)} items, at most {MAX_SUBJECT_ALT_NAMES} are allowed"
            )
        if problems:
            raise SpecError(problems)

    @property
    def names(self) -> tuple[SubjectAltName, ...]:
        """The names a backend's certificate is checked against: the given SANs, else `sni` as a DNS name."""
        return self.subject_alt_names or (SubjectAltName(SanKind.HOSTNAME, self.sni),)
