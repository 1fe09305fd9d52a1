"""Test PKI for the publish API's TLS: CAs and leaf certificates written as PEM files, made with `cryptography`.

Two CAs as the chart makes them: one signs the gateways' server certificates (the operator trusts it), the other
signs the operator's client certificate (the gateways trust it), so neither side's certificate can stand in for the
other's. A third, unrelated CA plays the attacker.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVER_NAME = "rel-gateway-publish.ts-system.svc"


@dataclass(frozen=True)
class Ca:
    name: str
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    path: Path  # the CA certificate as PEM


@dataclass(frozen=True)
class Leaf:
    cert: Path
    key: Path
    serial: int


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def make_ca(directory: Path, name: str) -> Ca:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - datetime.timedelta(minutes=5))
        .not_valid_after(_now() + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(key, hashes.SHA256())
    )
    path = directory / f"{name}.crt"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return Ca(name, key, cert, path)


def issue(
    directory: Path,
    ca: Ca,
    cn: str,
    *,
    server: bool,
    dns: tuple[str, ...] = (),
    stem: str = "",
    uris: tuple[str, ...] = (),
) -> Leaf:
    """A leaf signed by `ca`: a server certificate (serverAuth, the given DNS names and URIs plus 127.0.0.1) or a
    client one (clientAuth). Written as <stem>.crt / <stem>.key (stem defaults to the CN), replacing earlier files."""
    key = ec.generate_private_key(ec.SECP256R1())
    serial = x509.random_serial_number()
    b = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(serial)
        .not_valid_before(_now() - datetime.timedelta(minutes=5))
        .not_valid_after(_now() + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
    )
    if server:
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        sans.extend(x509.UniformResourceIdentifier(u) for u in uris)
        sans.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = b.sign(ca.key, hashes.SHA256())
    stem = stem or cn
    cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
    # Replace atomically, as a Secret volume update does: a reader never sees half a file.
    for path, data in (
        (cert_path, cert.public_bytes(serialization.Encoding.PEM)),
        (
            key_path,
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
        ),
    ):
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return Leaf(cert_path, key_path, serial)


@dataclass(frozen=True)
class Pki:
    server_ca: Ca
    client_ca: Ca
    rogue_ca: Ca
    server: Leaf  # the gateway's, for SERVER_NAME
    client: Leaf  # the operator's
    rogue_client: Leaf  # a client certificate the gateways must refuse
    directory: Path

    def server_args(self) -> list[str]:
        return [
            f"--tls-cert={self.server.cert}",
            f"--tls-key={self.server.key}",
            f"--tls-client-ca={self.client_ca.path}",
        ]

    def operator_args(self) -> list[str]:
        return [
            f"--tls-ca={self.server_ca.path}",
            f"--tls-cert={self.client.cert}",
            f"--tls-key={self.client.key}",
            f"--tls-server-name={SERVER_NAME}",
        ]


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    server_ca = make_ca(directory, "publish-server-ca")
    client_ca = make_ca(directory, "publish-client-ca")
    rogue_ca = make_ca(directory, "rogue-ca")
    return Pki(
        server_ca=server_ca,
        client_ca=client_ca,
        rogue_ca=rogue_ca,
        server=issue(directory, server_ca, SERVER_NAME, server=True, dns=(SERVER_NAME,), stem="server"),
        client=issue(directory, client_ca, "trafficsplit-operator", server=False, stem="client"),
        rogue_client=issue(directory, rogue_ca, "trafficsplit-operator", server=False, stem="rogue-client"),
        directory=directory,
    )
