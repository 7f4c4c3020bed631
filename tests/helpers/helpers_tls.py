"""Throwaway certificates for the TLS tests: a CA, a server certificate for 127.0.0.1 and localhost that it
signs, and client certificates (a role in their common name) it signs, made with `cryptography` (the test
extra) in a temporary directory."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import pytest

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: E402


@dataclass(frozen=True)
class CertificateAuthority:
    path: Path  # its certificate: what the other side trusts
    key: ec.EllipticCurvePrivateKey
    name: x509.Name


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA's certificate: what clients trust
    cert: Path  # the server's certificate, signed by the CA
    key: Path  # the server's private key
    authority: CertificateAuthority  # signs client certificates too (make_client_certificate)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))


def make_ca(directory: Path, name: str = "seglog test CA") -> CertificateAuthority:
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    subject = _name(name)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    path = directory / f"{name.replace(' ', '-')}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return CertificateAuthority(path, key, subject)


def _issue(authority: CertificateAuthority, subject: x509.Name, usage: x509.ObjectIdentifier, cert_path: Path,
           key_path: Path, *extensions: x509.ExtensionType) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(authority.name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(authority.key.public_key()),
                              critical=False))
    for extension in extensions:
        builder = builder.add_extension(extension, critical=False)
    cert_path.write_bytes(builder.sign(authority.key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
    _write_key(key, key_path)
    return cert_path, key_path


def make_certificates(directory: Path) -> Certificates:
    """A CA, and a server certificate it signs for 127.0.0.1 and localhost, valid for a day."""
    authority = make_ca(directory)
    cert, key = _issue(authority, _name("127.0.0.1"), ExtendedKeyUsageOID.SERVER_AUTH, directory / "server.pem",
                       directory / "server.key",
                       x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                    x509.DNSName("localhost")]))
    return Certificates(authority.path, cert, key, authority)


def make_client_certificate(authority: CertificateAuthority, directory: Path, *common_names: str) -> tuple[Path, Path]:
    """A client certificate `authority` signs, whose subject has `common_names` (the role: the last one), and its
    key: (certificate, key) in `directory`, named after the names."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = "-".join(common_names) or "no-cn"
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "seglog tests")]
                        + [x509.NameAttribute(NameOID.COMMON_NAME, name) for name in common_names])
    return _issue(authority, subject, ExtendedKeyUsageOID.CLIENT_AUTH, directory / f"client-{stem}.pem",
                  directory / f"client-{stem}.key")
