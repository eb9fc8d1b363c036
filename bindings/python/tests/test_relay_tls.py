"""itsme.relay against a relay serving TLS with a certificate no public CA
signed: refused in one line naming the relay and why (kind "connection"), reached
with an ``ssl_context`` that trusts it or with SSL_CERT_FILE.

The relay binary is $ITSME_RELAY_BIN, by default apps/.build/debug/itsme-relay;
without it these tests are skipped."""

import datetime
import ipaddress
import json
import os
import pathlib
import re
import secrets
import ssl
import subprocess

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from itsme.relay import InviteMailbox, RelayError, Room

REPO = pathlib.Path(__file__).resolve().parents[3]
RELAY_BIN = pathlib.Path(os.environ.get("ITSME_RELAY_BIN") or REPO / "apps" / ".build" / "debug" / "itsme-relay")
LISTENING = re.compile(r"itsme-relay listening on (https://\S+)")


def _certificate(directory: pathlib.Path, expired: bool = False):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = (now - datetime.timedelta(days=9), now - datetime.timedelta(days=1)) if expired else (
        now - datetime.timedelta(hours=1), now + datetime.timedelta(days=1))
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture
def tls_relay(tmp_path):
    if not RELAY_BIN.exists():
        pytest.skip(f"no relay binary at {RELAY_BIN}: build it with `swift build --package-path apps`")
    started = []

    def start(expired: bool = False):
        directory = tmp_path / f"relay{len(started)}"
        directory.mkdir()
        cert, key = _certificate(directory, expired)
        process = subprocess.Popen(
            [str(RELAY_BIN), "--host", "127.0.0.1", "--port", "0", "--database", ":memory:",
             "--tls-cert", str(cert), "--tls-key", str(key)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        started.append(process)
        match = LISTENING.search(process.stdout.readline().decode())
        assert match, "the relay did not print its https:// listening line"
        return match.group(1), cert

    yield start
    for process in started:
        process.terminate()
        process.wait(15)
        process.stdout.close()


def test_an_untrusted_certificate_is_one_clear_error(tls_relay, monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    url, _ = tls_relay()
    port = url.rsplit(":", 1)[1]
    with InviteMailbox(url, timeout=10) as mailbox, pytest.raises(RelayError) as caught:
        mailbox.create(secrets.token_hex(16))
    error = caught.value
    assert error.kind == "connection"
    assert f"TLS with the relay at 127.0.0.1:{port} failed: " in error.message, error.message
    assert "self-signed" in error.message or "issuer" in error.message, error.message
    assert "\n" not in str(error)


def test_an_expired_certificate_says_so(tls_relay):
    url, cert = tls_relay(expired=True)
    context = ssl.create_default_context(cafile=str(cert))
    with InviteMailbox(url, timeout=10, ssl_context=context) as mailbox, pytest.raises(RelayError) as caught:
        mailbox.create(secrets.token_hex(16))
    assert caught.value.kind == "connection" and "expired" in caught.value.message, caught.value.message


def test_an_ssl_context_or_ssl_cert_file_trusts_the_relay(tls_relay, monkeypatch):
    url, cert = tls_relay()
    with InviteMailbox(url, timeout=10, ssl_context=ssl.create_default_context(cafile=str(cert))) as mailbox:
        assert mailbox.create(secrets.token_hex(16))
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with InviteMailbox(url, timeout=10) as mailbox:
        assert mailbox.create(secrets.token_hex(16))


def test_a_room_refuses_an_untrusted_certificate_the_same_way(tls_relay, monkeypatch):
    pytest.importorskip("websockets")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    url, cert = tls_relay()
    port = url.rsplit(":", 1)[1]
    with pytest.raises(RelayError) as caught:
        Room(url, secrets.token_hex(16), open_timeout=10)
    assert caught.value.kind == "connection"
    assert f"TLS with the relay at 127.0.0.1:{port} failed: " in caught.value.message, caught.value.message
    assert "_ssl.c" not in caught.value.message
    with Room(url, secrets.token_hex(16), open_timeout=10, ssl_context=ssl.create_default_context(cafile=str(cert))) as room:
        kind, text = room.next_input(5)
        assert (kind, json.loads(text)) == ("text", {"type": "waiting"})
