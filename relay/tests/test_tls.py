"""HTTPS and WSS when the relay is given a certificate (PROTOCOL.md 15.1)."""

import datetime
import ipaddress
import ssl

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from relaytest import new_id, pair, recv_binary, run


@pytest.fixture
def certificate(tmp_path):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), False)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=False,
                encipher_only=False, decipher_only=False,
            ),
            True,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


def test_the_relay_serves_https_with_the_given_certificate(relay, certificate):
    cert, key = certificate
    r = relay(tls_cert=cert, tls_key=key)
    assert r.scheme == "https", "the listening line does not say https://"
    context = ssl.create_default_context(cafile=str(cert))
    with httpx.Client(base_url=r.url, verify=context, timeout=5) as client:
        response = client.get("/health")
        assert response.status_code == 200
        assert response.json() == {"status": "ok"}
        invite_id = new_id()
        created = client.post(f"/v1/invites/{invite_id}")
        assert created.status_code == 201
    # Plain HTTP on the TLS port gets no answer.
    with httpx.Client(base_url=f"http://127.0.0.1:{r.port}", timeout=3) as plain:
        try:
            answer = plain.get("/health")
        except httpx.HTTPError:
            pass
        else:
            assert answer.status_code != 200, "plain HTTP was served on the TLS port"


def test_rooms_work_over_wss(relay, certificate):
    cert, key = certificate
    r = relay(tls_cert=cert, tls_key=key)
    assert r.room_url("x").startswith("wss://")
    context = ssl.create_default_context(cafile=str(cert))

    async def scenario():
        _, a, b = await pair(r, ssl=context)
        await a.send(b"\x00secure\xff")
        assert await recv_binary(b) == b"\x00secure\xff"
        await a.close()
        await b.close()

    run(scenario())
