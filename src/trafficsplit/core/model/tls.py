"""A listener's TLS certificate: the PEM chain and key of a `kubernetes.io/tls` Secret, as a value that checks itself.
Pure.

An HTTPS listener (`tls.mode: Terminate`) names its certificate by `certificateRefs`; the translation resolves the
reference to a `TlsSecret` (the operator reads the Secret) and carries the `Certificate` on the listener's route
table, so the data plane receives it with the generation (over ADS as an SDS secret). Checked here, once, for every
path it takes (the translation, the publish receiver): each part bounded (`MAX_PEM_BYTES`) and made of PEM blocks of
the right kind whose bodies are base64. Not checked: that the key matches the chain, or the certificate's dates; Envoy
refuses a mismatched pair when it loads the secret (the generation is then NACKed).

The key never leaves this value as text: the repr names its size only, and every problem message names the field and
what is wrong with it, never its bytes.

Client certificate validation (a Gateway's `spec.tls.frontend`): `CaBundle` is the PEM bundle of trust anchors a
port validates client certificates against, `ClientValidation` that bundle with the mode, and `CaConfigMap` a
ConfigMap a validation names (its `ca.crt`), parsed by `parse_ca_configmap`. The mode also reaches the data plane's
bootstrap (`require_client_certificate` is a listener setting, not an SDS one); the bundle travels with the
generation as an SDS validation context.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from trafficsplit.core.model.errors import SpecError

MAX_PEM_BYTES = 64 * 1024  # each of the chain and the key: a chain of a few certificates fits many times over
MAX_CHAIN_CERTIFICATES = 16
SECRET_TYPE_TLS = "kubernetes.io/tls"
MAX_CA_CERTIFICATES = 64  # ours: trust anchors of one port's validation (every ref's bundle together)
CA_KEY = "ca.crt"  # the ConfigMap key Gateway API names for a CA bundle
KEY_LABELS = frozenset({"PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"})
_BLOCK = re.compile(rb"-----BEGIN ([A-Z ]{1,40})-----\r?\n([A-Za-z0-9+/=\r\n]*?)-----END ([A-Z ]{1,40})-----")
_OUTSIDE = re.compile(rb"\s*")


def pem_labels(data: bytes) -> list[str] | str:
    """The labels of the PEM blocks `data` holds, in order, or why it is not a sequence of PEM blocks (whitespace
    between blocks only, each body base64, BEGIN and END labels equal)."""
    labels: list[str] = []
    pos = 0
    for m in _BLOCK.finditer(data):
        if not _OUTSIDE.fullmatch(data, pos, m.start()):
            return f"bytes outside a PEM block before block {len(labels)}"
        begin, body, end = m.group(1), m.group(2), m.group(3)
        if begin != end:
            return f"block {len(labels)} begins as {begin.decode()} and ends as {end.decode()}"
        try:
            if not base64.b64decode(b"".join(body.split()), validate=True):
                return f"block {len(labels)} is empty"
        except ValueError:  # binascii.Error
            return f"block {len(labels)} is not base64"
        labels.append(begin.decode())
        pos = m.end()
    if not _OUTSIDE.fullmatch(data, pos):
        return "bytes outside a PEM block" if labels else "no PEM block"
    return labels


def certificate_problems(chain_pem: bytes, key_pem: bytes) -> list[str]:
    problems: list[str] = []
    for name, data in (("chain_pem", chain_pem), ("key_pem", key_pem)):
        if len(data) > MAX_PEM_BYTES:
            problems.append(f"{name}: {len(data)} bytes, at most {MAX_PEM_BYTES} are allowed")
    if problems:
        return problems
    chain = pem_labels(chain_pem)
    if isinstance(chain, str):
        problems.append(f"chain_pem: {chain}")
    elif not chain:
        problems.append("chain_pem: no PEM block")
    elif any(label != "CERTIFICATE" for label in chain):
        problems.append("chain_pem: every block must be a CERTIFICATE")
    elif len(chain) > MAX_CHAIN_CERTIFICATES:
        problems.append(f"chain_pem: {len(chain)} certificates, at most {MAX_CHAIN_CERTIFICATES} are allowed")
    key = pem_labels(key_pem)
    if isinstance(key, str):
        problems.append(f"key_pem: {key}")
    elif len(key) != 1 or key[0] not in KEY_LABELS:
        problems.append(f"key_pem: must be one block of {', '.join(sorted(KEY_LABELS))}")
    return problems


@dataclass(frozen=True, slots=True)
class Certificate:
    """A server certificate chain (leaf first) and its private key, both PEM."""

    chain_pem: bytes
    key_pem: bytes

    def __post_init__(self) -> None:
        problems = certificate_problems(self.chain_pem, self.key_pem)
        if problems:
            raise SpecError(problems)

    def __repr__(self) -> str:  # the key stays out of logs and tracebacks
        return f"Certificate(chain_pem=<{len(self.chain_pem)} bytes>, key_pem=<{len(self.key_pem)} bytes>)"


@dataclass(frozen=True, slots=True)
class TlsSecret:
    """A Secret a listener may name: its certificate, or why it cannot serve as one (no key bytes in `problem`)."""

    namespace: str
    name: str
    certificate: Certificate | None = None
    problem: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


def parse_tls_secret(body: Mapping[str, Any]) -> TlsSecret:
    """A core/v1 Secret as the API server returns it (`data` base64). Never raises for a bad Secret: a listener that
    names it reports the problem (InvalidCertificateRef)."""
    meta = body.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    ns, name = str(meta.get("namespace", ""))[:63], str(meta.get("name", ""))[:253]
    if body.get("type") != SECRET_TYPE_TLS:
        return TlsSecret(ns, name, problem=f"type is not {SECRET_TYPE_TLS}")
    data = body.get("data")
    data = data if isinstance(data, Mapping) else {}
    parts: dict[str, bytes] = {}
    for field in ("tls.crt", "tls.key"):
        raw = data.get(field)
        if not isinstance(raw, str) or not raw:
            return TlsSecret(ns, name, problem=f"data[{field}] is missing")
        if len(raw) > MAX_PEM_BYTES * 4 // 3 + 4:
            return TlsSecret(ns, name, problem=f"data[{field}] is larger than {MAX_PEM_BYTES} bytes")
        try:
            parts[field] = base64.b64decode(raw, validate=True)
        except ValueError:  # binascii.Error
            return TlsSecret(ns, name, problem=f"data[{field}] is not base64")
    try:
        cert = Certificate(parts["tls.crt"], parts["tls.key"])
    except SpecError as exc:
        why = "; ".join(exc.problems).replace("chain_pem", "tls.crt").replace("key_pem", "tls.key")
        return TlsSecret(ns, name, problem=why)
    return TlsSecret(ns, name, certificate=cert)


def ca_bundle_problems(pem: bytes) -> list[str]:
    if len(pem) > MAX_PEM_BYTES:
        return [f"{len(pem)} bytes, at most {MAX_PEM_BYTES} are allowed"]
    labels = pem_labels(pem)
    if isinstance(labels, str):
        return [labels]
    if not labels:
        return ["no PEM block"]
    if any(label != "CERTIFICATE" for label in labels):
        return ["every block must be a CERTIFICATE"]
    if len(labels) > MAX_CA_CERTIFICATES:
        return [f"{len(labels)} certificates, at most {MAX_CA_CERTIFICATES} are allowed"]
    return []


@dataclass(frozen=True, slots=True)
class CaBundle:
    """PEM CERTIFICATE blocks (at most MAX_CA_CERTIFICATES, MAX_PEM_BYTES in all): the trust anchors client
    certificates are validated against. Public material; its repr gives its size only, to keep logs short."""

    pem: bytes

    def __post_init__(self) -> None:
        problems = ca_bundle_problems(self.pem)
        if problems:
            raise SpecError([f"ca_pem: {p}" for p in problems])

    def __repr__(self) -> str:
        return f"CaBundle(<{len(self.pem)} bytes>)"

    @classmethod
    def joined(cls, bundles: Sequence[CaBundle]) -> CaBundle:
        """Several refs' bundles as one (each ends in a newline so the blocks stay apart); checked again as a whole."""
        return cls(b"".join(b.pem if b.pem.endswith(b"\n") else b.pem + b"\n" for b in bundles))


class ClientCertificates(StrEnum):
    """How an HTTPS port asks for client certificates (a Gateway's `spec.tls.frontend` validation mode): `require`
    (AllowValidOnly: no handshake without a certificate the port's CAs sign) or `optional` (AllowInsecureFallback:
    asked for, and any or none is accepted)."""

    REQUIRE = "require"
    OPTIONAL = "optional"


@dataclass(frozen=True, slots=True)
class ClientValidation:
    """How an HTTPS port validates client certificates: against `ca`, and with `insecure_fallback` (Gateway API's
    AllowInsecureFallback) a connection without a certificate, or with one that fails, is still served."""

    ca: CaBundle
    insecure_fallback: bool = False


@dataclass(frozen=True, slots=True)
class CaConfigMap:
    """A ConfigMap a client validation may name: its `ca.crt` bundle, or why it cannot serve as one."""

    namespace: str
    name: str
    bundle: CaBundle | None = None
    problem: str | None = None


def parse_ca_configmap(body: Mapping[str, Any]) -> CaConfigMap:
    """A core/v1 ConfigMap as the API server returns it (`data` plain text). Never raises for a bad ConfigMap: a
    listener whose validation names it reports the problem (InvalidCACertificateRef)."""
    meta = body.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    ns, name = str(meta.get("namespace", ""))[:63], str(meta.get("name", ""))[:253]
    data = body.get("data")
    raw = data.get(CA_KEY) if isinstance(data, Mapping) else None
    if not isinstance(raw, str) or not raw:
        return CaConfigMap(ns, name, problem=f"data[{CA_KEY}] is missing")
    if len(raw) > MAX_PEM_BYTES:
        return CaConfigMap(ns, name, problem=f"data[{CA_KEY}] is larger than {MAX_PEM_BYTES} bytes")
    problems = ca_bundle_problems(raw.encode())
    if problems:
        return CaConfigMap(ns, name, problem=f"data[{CA_KEY}]: {problems[0]}")
    return CaConfigMap(ns, name, bundle=CaBundle(raw.encode()))
