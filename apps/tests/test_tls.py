"""HTTPS and WSS when the relay is given a certificate (PROTOCOL.md 15.1)."""

import shutil
import signal
import socket
import ssl
import time

import httpx
import pytest
from cryptography.hazmat.primitives import serialization

from certificates import Authority, der, self_signed
from operatortest import Launched, run_relay
from relaytest import new_id, pair, recv_binary, run


@pytest.fixture
def certificate(tmp_path):
    """A self-signed certificate for 127.0.0.1 and its key."""
    cert, key, _ = self_signed(tmp_path, "127.0.0.1")
    return cert, key


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


# ---------------------------------------------------------------------------
# Bad files at start, and SIGHUP reloading the certificate


def _one_clear_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got {stderr!r}"
    assert "BoringSSL" not in stderr and ".swift" not in stderr and ".cc:" not in stderr, stderr
    return lines[0]


def test_a_missing_certificate_file_is_named(tmp_path):
    cert, key, _ = self_signed(tmp_path, "a")
    result = run_relay(["--port", "0", "--database", ":memory:", "--tls-cert", tmp_path / "nope.pem", "--tls-key", key])
    assert result.code != 0
    line = _one_clear_line(result.stderr)
    assert "nope.pem" in line and "No such file" in line, line


def test_a_key_of_another_certificate_is_named(tmp_path):
    cert, _, _ = self_signed(tmp_path, "a")
    _, other_key, _ = self_signed(tmp_path, "b")
    result = run_relay(["--port", "0", "--database", ":memory:", "--tls-cert", cert, "--tls-key", other_key])
    assert result.code != 0
    line = _one_clear_line(result.stderr)
    assert str(other_key) in line and "not the private key" in line, line


def test_a_file_that_is_not_pem_is_named(tmp_path):
    _, key, _ = self_signed(tmp_path, "a")
    garbage = tmp_path / "garbage.pem"
    garbage.write_bytes(b"not a certificate\n")
    result = run_relay(["--port", "0", "--database", ":memory:", "--tls-cert", garbage, "--tls-key", key])
    assert result.code != 0
    line = _one_clear_line(result.stderr)
    assert "garbage.pem" in line and "certificate" in line, line


def _peer_certificate(port: int, context: ssl.SSLContext) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return tls.getpeercert(binary_form=True)


def _trusting(*certs) -> ssl.SSLContext:
    context = ssl.create_default_context()
    for cert in certs:
        context.load_verify_locations(cadata=cert.public_bytes(serialization.Encoding.PEM).decode())
    return context


def _install(source_cert, source_key, cert_path, key_path):
    """Replaces the served files the way a renewal does: a new file moved over the old."""
    for source, target in ((source_cert, cert_path), (source_key, key_path)):
        temporary = target.with_name(target.name + ".new")
        shutil.copyfile(source, temporary)
        temporary.replace(target)


@pytest.fixture
def two_certificates(tmp_path):
    a_cert, a_key, a = self_signed(tmp_path, "cert-a")
    b_cert, b_key, b = self_signed(tmp_path, "cert-b")
    served_cert, served_key = tmp_path / "served.pem", tmp_path / "served.key"
    _install(a_cert, a_key, served_cert, served_key)
    return dict(a=(a_cert, a_key, a), b=(b_cert, b_key, b), served=(served_cert, served_key))


@pytest.fixture
def reloading_relay(tmp_path, two_certificates):
    """A relay serving the `served` files (certificate a until they are
    replaced), and a client context that trusts a and b."""
    served_cert, served_key = two_certificates["served"]
    relay = Launched(tmp_path, ["--port", "0", "--database", ":memory:", "--tls-cert", served_cert,
                                "--tls-key", served_key])
    try:
        relay.wait_listening()
        yield relay, _trusting(two_certificates["a"][2], two_certificates["b"][2])
    finally:
        relay.stop()


def test_sighup_serves_the_new_certificate_and_keeps_open_connections(two_certificates, reloading_relay):
    relay, context = reloading_relay
    served_cert, served_key = two_certificates["served"]
    _, _, a = two_certificates["a"]
    b_cert, b_key, b = two_certificates["b"]
    assert _peer_certificate(relay.port, context) == der(a)

    async def scenario():
        _, first, second = await pair(_RelayView(relay), ssl=context)
        keep_alive = httpx.Client(base_url=relay.url, verify=context, timeout=5)
        assert keep_alive.get("/health").status_code == 200

        _install(b_cert, b_key, served_cert, served_key)
        relay.signal(signal.SIGHUP)
        assert relay.eventually_in_stderr("reloaded"), relay.stderr()

        assert _peer_certificate(relay.port, context) == der(b), "a new connection still gets the old certificate"
        # The connections opened before the reload carry on.
        await first.send(b"\x00after reload")
        assert await recv_binary(second) == b"\x00after reload"
        assert keep_alive.get("/health").status_code == 200
        keep_alive.close()
        await first.close()
        await second.close()

    run(scenario())
    assert "expires" in relay.stderr()


def test_a_bad_file_on_sighup_keeps_the_old_certificate(two_certificates, reloading_relay):
    relay, context = reloading_relay
    served_cert, served_key = two_certificates["served"]
    _, _, a = two_certificates["a"]
    _, b_key, _ = two_certificates["b"]
    # The key of another certificate, then a truncated certificate.
    shutil.copyfile(b_key, served_key)
    relay.signal(signal.SIGHUP)
    assert relay.eventually_in_stderr("reload failed"), relay.stderr()
    assert relay.alive()
    assert _peer_certificate(relay.port, context) == der(a)
    served_cert.write_bytes(served_cert.read_bytes()[:100])
    relay.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while relay.stderr().count("reload failed") < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert relay.stderr().count("reload failed") >= 2, relay.stderr()
    assert _peer_certificate(relay.port, context) == der(a)
    with httpx.Client(base_url=relay.url, verify=context, timeout=5) as client:
        assert client.get("/health").status_code == 200


class _RelayView:
    """What relaytest.pair needs of a relay: its rooms' URL."""

    def __init__(self, launched):
        self.launched = launched

    def room_url(self, room_id: str) -> str:
        return f"wss://127.0.0.1:{self.launched.port}/v1/rooms/{room_id}"


def test_an_expired_certificate_is_served_and_warned_about_once(tmp_path):
    """A relay whose certificate has expired still starts (clients will
    refuse it, and say why); its log says so, once."""
    cert, key, _ = Authority().issue(tmp_path, "late", expired=True)
    relay = Launched(tmp_path, ["--port", "0", "--database", ":memory:", "--tls-cert", cert, "--tls-key", key])
    try:
        relay.wait_listening()
        warnings = [line for line in relay.stderr().splitlines() if "expired" in line]
        assert len(warnings) == 1, relay.stderr()
    finally:
        relay.stop()
