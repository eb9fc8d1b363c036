"""Helpers for the tests of itsme-relay as an operator runs it: a relay
started with exactly the arguments and environment a test gives (no
--database or --port added), and certificates made on the spot (a private
CA and the server certificates it signs, or self-signed ones)."""

import datetime
import ipaddress
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from relaytest import relay_binary

LISTENING = re.compile(r"itsme-relay listening on (https?)://(\[[^\]]+\]|[^:/\s]+):(\d+)")


class Launched:
    """itsme-relay with `args` and `env` as given. `url` is set once it
    prints its listening line; `wait_listening()` fails the test (with its
    standard error) if it does not."""

    def __init__(self, workdir: Path, args: list, env: dict = None, preexec_fn=None, cwd: Path = None):
        self.stderr_path = workdir / f"stderr-{time.monotonic_ns()}.log"
        self._stderr = open(self.stderr_path, "wb")
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("ITSME_RELAY_") and k != "STATE_DIRECTORY"}
        full_env.update(env or {})
        self.args = [str(relay_binary())] + [str(a) for a in args]
        self.proc = subprocess.Popen(
            self.args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr, env=full_env,
            preexec_fn=preexec_fn, cwd=cwd or workdir,
        )
        self.lines: list = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = None

    def _read(self) -> None:
        for raw in self.proc.stdout:
            self.lines.append(raw.decode("utf-8", "replace"))

    def wait_listening(self, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while not self.lines and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self.lines:
            code = self.proc.poll()
            self.stop()
            raise AssertionError(
                f"the relay did not print its listening line (exit code {code}); args {self.args[1:]}; "
                f"stderr:\n{self.stderr()[-3000:]}"
            )
        match = LISTENING.fullmatch(self.lines[0].strip())
        assert match, f"unexpected first line {self.lines[0]!r}"
        self.scheme, self.host, self.port = match.group(1), match.group(2), int(match.group(3))
        self.url = match.group(0).split(" on ", 1)[1]
        return self.url

    def exit_code(self, timeout: float = 30):
        """The exit code once the relay has ended (it must end by itself)."""
        try:
            return self.proc.wait(timeout)
        finally:
            self._stderr.close()

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_bytes().decode("utf-8", "replace")

    def eventually_in_stderr(self, text: str, timeout: float = 10) -> bool:
        deadline = time.monotonic() + timeout
        while text not in self.stderr():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def signal(self, sig) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if not self._stderr.closed:
            self._stderr.close()


def run_relay(args: list, env: dict = None, timeout: float = 30) -> SimpleNamespace:
    """itsme-relay run to its end (a refusal, or --help): exit code, stdout, stderr."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ITSME_RELAY_") and k != "STATE_DIRECTORY"}
    full_env.update(env or {})
    done = subprocess.run(
        [str(relay_binary())] + [str(a) for a in args], stdin=subprocess.DEVNULL, capture_output=True,
        env=full_env, timeout=timeout,
    )
    return SimpleNamespace(code=done.returncode, stdout=done.stdout.decode("utf-8", "replace"),
                           stderr=done.stderr.decode("utf-8", "replace"))


# ---------------------------------------------------------------------------
# Certificates


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
