"""TLS for the publish API: the server certificate and key from files (a mounted Secret), and with a client CA the
operator must present a certificate it signed (mTLS).

Files are re-read when they change (a Secret volume update, a cert-manager renewal): gRPC asks `fetch` before each new
handshake, and a changed set is loaded for that handshake on; established connections keep theirs. A set that fails to
load (a half-written rotation) keeps the last good one and is logged.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import grpc

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerTlsFiles:
    cert: Path  # PEM certificate chain
    key: Path  # PEM private key
    client_ca: Path | None = None  # PEM CA bundle that signs client certificates; set: a client certificate is required

    def _paths(self) -> tuple[Path, ...]:
        return (self.cert, self.key) if self.client_ca is None else (self.cert, self.key, self.client_ca)

    def stamp(self) -> tuple[tuple[int, int], ...]:
        """What changes when a file is replaced (Secret volumes swap a symlink: stat follows it)."""
        return tuple((s.st_mtime_ns, s.st_ino) for s in (os.stat(p) for p in self._paths()))

    def configuration(self) -> grpc.ServerCertificateConfiguration:
        ca = self.client_ca.read_bytes() if self.client_ca is not None else None
        return grpc.ssl_server_certificate_configuration(
            [(self.key.read_bytes(), self.cert.read_bytes())], root_certificates=ca
        )


class ReloadingServerCredentials:
    """Server credentials over `files`, reloaded on change. Loading at construction fails loudly: a server must not
    start with a certificate it cannot read."""

    def __init__(self, files: ServerTlsFiles) -> None:
        self.files = files
        self._stamp = files.stamp()
        initial = files.configuration()
        # grpc documents None from the fetcher as "no change"; its type stubs leave that out.
        self.credentials = grpc.dynamic_ssl_server_credentials(
            initial,
            self._fetch,  # type: ignore[arg-type]
            require_client_authentication=files.client_ca is not None,
        )

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        try:
            stamp = self.files.stamp()
            if stamp == self._stamp:
                return None
            config = self.files.configuration()
        except OSError as exc:
            log.warning("publish TLS files unreadable, keeping the loaded ones: %s", exc)
            return None
        self._stamp = stamp
        log.info("publish TLS files changed: new handshakes use the new certificate")
        return config
