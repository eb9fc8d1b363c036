"""Certificates made on the spot for the relay's tests, and for the CLI's
(tests/cli puts this folder on its path): a private CA and the server
certificates it signs, or self-signed ones. Nothing here but `cryptography`,
so that services.py, run as a program, needs no test framework."""

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


class Authority:
    """A private certificate authority, made for one test."""

    def __init__(self, name: str = "ItsMe test CA"):
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False, content_commitment=False, key_encipherment=False,
                    data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                    encipher_only=False, decipher_only=False,
                ),
                True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), False)
            .sign(self.key, hashes.SHA256())
        )

    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def write(self, path: Path) -> Path:
        path.write_bytes(self.pem())
        return path

    def issue(self, directory: Path, stem: str, names=("127.0.0.1", "localhost"), days: float = 30,
              expired: bool = False):
        """A server certificate for `names` (IP addresses and DNS names), and
        its key: (cert path, key path, certificate)."""
        return _server_certificate(directory, stem, names, days, expired, self.key, self.cert.subject, self.cert)


def self_signed(directory: Path, stem: str, names=("127.0.0.1", "localhost"), days: float = 30):
    """A self-signed server certificate (its own trust root): (cert path, key path, certificate)."""
    return _server_certificate(directory, stem, names, days, False, None, None, None)


def _server_certificate(directory, stem, names, days, expired, issuer_key, issuer_name, issuer_cert):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    if expired:
        start, end = now - datetime.timedelta(days=10), now - datetime.timedelta(days=1)
    else:
        start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=days)
    alt = []
    for name in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt.append(x509.DNSName(name))
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(stem))
        .issuer_name(issuer_name or _name(stem))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(alt), False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
    )
    if issuer_cert is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), True).add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            True,
        )
    else:
        builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), True).add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), False
        )
    cert = builder.sign(issuer_key or key, hashes.SHA256())
    cert_path, key_path = directory / f"{stem}.pem", directory / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(_pem_key(key))
    return cert_path, key_path, cert


def der(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)
