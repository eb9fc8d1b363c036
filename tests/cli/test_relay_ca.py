"""A relay whose certificate comes from a private CA (docs/CLI.md, docs/OPERATIONS.md):
refused without the CA in one line that says which relay and why, reached
with `--relay-ca FILE`, with `SSL_CERT_FILE`, and with the CA saved by
`itsme relay set --relay-ca`. Never a BoringSSL error stack."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from cli_errors import assert_error

# The relay's tests make the certificates (a private CA, the relay's certificate).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "apps" / "tests"))
from certificates import Authority  # noqa: E402

LISTENING = re.compile(r"itsme-relay listening on (https?://\S+)")


@pytest.fixture
def ca(tmp_path):
    authority = Authority("Private relay CA")
    return authority, authority.write(tmp_path / "private-ca.pem")


@pytest.fixture
def tls_relay(relay_bin, tmp_path):
    """Factory: `tls_relay(cert, key)` starts a relay serving HTTPS with
    them (`tls_relay()` serves plain HTTP); returns its URL."""
    started = []

    def start(cert=None, key=None) -> str:
        args = [str(relay_bin), "--host", "127.0.0.1", "--port", "0", "--database", ":memory:",
                "--max-connections-per-address", "4096", "--lookup-rate", "100000", "--create-rate", "100000"]
        if cert:
            args += ["--tls-cert", str(cert), "--tls-key", str(key)]
        log = open(tmp_path / f"relay{len(started)}.log", "wb")
        process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log)
        started.append((process, log))
        line = process.stdout.readline().decode()
        match = LISTENING.search(line)
        assert match, f"the relay printed {line!r}; log: {(tmp_path / 'relay0.log').read_text()[-2000:]}"
        return match.group(1)

    yield start
    for process, log in started:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def no_library_dump(result):
    everything = result.stdout + result.stderr
    for leak in ("BoringSSL", "OPENSSL_internal", ".cc:", ".swift", "NIOSSL", "Error: "):
        assert leak not in everything, everything


def created(alice, *args, env=None):
    if env:
        alice.env.update(env)
    result = alice.run("invite", "create", "--json", *args)
    assert result.returncode == 0, f"stdout: {result.stdout}\nstderr: {result.stderr}"
    alice.ok("invite", "cancel")
    return result


def test_a_private_ca_is_refused_in_one_line_without_the_ca(people, ca, tls_relay, tmp_path):
    authority, _ = ca
    cert, key, _ = authority.issue(tmp_path, "relay")
    url = tls_relay(cert, key)
    port = url.rsplit(":", 1)[1]
    alice = people("Alice", init=True)
    result = alice.run("invite", "create", "--relay", url)
    assert_error(result, 4, f"127.0.0.1:{port}", "unknown CA")
    no_library_dump(result)
    assert alice.json("sas", "show") == {"state": "none"}


def test_relay_ca_trusts_the_private_ca(people, ca, tls_relay, tmp_path):
    authority, ca_file = ca
    cert, key, _ = authority.issue(tmp_path, "relay")
    url = tls_relay(cert, key)
    alice = people("Alice", init=True)
    created(alice, "--relay", url, "--relay-ca", ca_file)


def test_ssl_cert_file_trusts_the_private_ca(people, ca, tls_relay, tmp_path):
    authority, ca_file = ca
    cert, key, _ = authority.issue(tmp_path, "relay")
    url = tls_relay(cert, key)
    alice = people("Alice", init=True)
    created(alice, "--relay", url, env={"SSL_CERT_FILE": str(ca_file)})


def test_relay_set_saves_the_ca(people, ca, tls_relay, tmp_path):
    authority, ca_file = ca
    cert, key, _ = authority.issue(tmp_path, "relay")
    url = tls_relay(cert, key)
    alice = people("Alice", init=True)
    alice.ok("relay", "set", url, "--relay-ca", ca_file)
    shown = alice.json("relay", "show")
    assert shown["relay"] == url and shown["relay_ca"] == str(ca_file), shown
    created(alice)
    # Setting the relay again without a CA forgets it.
    alice.ok("relay", "set", url)
    assert "relay_ca" not in alice.json("relay", "show")
    assert_error(alice.run("invite", "create"), 4, "unknown CA")


def test_a_new_profile_record_deletes_the_previous_one_through_the_private_ca(people, ca, tls_relay, tmp_path):
    authority, ca_file = ca
    cert, key, _ = authority.issue(tmp_path, "relay")
    url = tls_relay(cert, key)
    alice = people("Alice", init=True)
    first = alice.json("profile", "set", "--relay", url, "--relay-ca", ca_file)
    second = alice.json("profile", "set", "--relay", url, "--relay-ca", ca_file)
    assert second["record"] != first["record"]
    assert second.get("deletedRecord") == first["record"], second


def test_an_expired_certificate_is_named(people, ca, tls_relay, tmp_path):
    authority, ca_file = ca
    cert, key, _ = authority.issue(tmp_path, "relay", expired=True)
    url = tls_relay(cert, key)
    alice = people("Alice", init=True)
    result = alice.run("invite", "create", "--relay", url, "--relay-ca", ca_file)
    assert_error(result, 4, "127.0.0.1", "expired on")
    no_library_dump(result)


def test_a_certificate_for_another_name_is_named(people, ca, tls_relay, tmp_path):
    authority, ca_file = ca
    cert, key, _ = authority.issue(tmp_path, "relay", names=("relay.example",))
    url = tls_relay(cert, key)
    alice = people("Alice", init=True)
    result = alice.run("invite", "create", "--relay", url, "--relay-ca", ca_file)
    assert_error(result, 4, "127.0.0.1", "wrong name")
    no_library_dump(result)


def test_https_to_a_plain_http_relay_is_named(people, tls_relay):
    url = tls_relay().replace("http://", "https://")
    alice = people("Alice", init=True)
    result = alice.run("invite", "create", "--relay", url)
    assert_error(result, 4, "127.0.0.1", "does not speak TLS")
    no_library_dump(result)


@pytest.mark.parametrize("content", [None, b"not a certificate\n"], ids=["missing", "not-pem"])
def test_a_bad_relay_ca_file_is_named(people, tls_relay, tmp_path, content):
    url = tls_relay()
    bad = tmp_path / "bad-ca.pem"
    if content is not None:
        bad.write_bytes(content)
    alice = people("Alice", init=True)
    result = alice.run("invite", "create", "--relay", url.replace("http://", "https://"), "--relay-ca", bad)
    assert_error(result, 2, "--relay-ca", str(bad))
    no_library_dump(result)


def test_rooms_refuse_and_trust_the_private_ca_the_same_way(people, ca, tls_relay, tmp_path):
    """`itsme realtime` (a WebSocket room): refused in one line without the
    CA; with it the room opens and the command waits for the other person
    until its timeout (exit 4, and no TLS complaint)."""
    authority, ca_file = ca
    cert, key, _ = authority.issue(tmp_path, "relay")
    url = tls_relay(cert, key)
    alice = people("Alice", init=True)
    refused = alice.run("realtime", "--relay", url, "--timeout", "5")
    assert_error(refused, 4, "TLS with the relay at 127.0.0.1", "unknown CA")
    no_library_dump(refused)
    for extra, env in ((["--relay-ca", str(ca_file)], {}), ([], {"SSL_CERT_FILE": str(ca_file)})):
        alice.env.update(env)
        waited = alice.run("realtime", "--relay", url, "--timeout", "2", *extra)
        assert waited.returncode == 4, waited
        assert "TLS" not in waited.stderr and "Waiting" in waited.stdout, (waited.stdout, waited.stderr)
        alice.env.pop("SSL_CERT_FILE", None)
