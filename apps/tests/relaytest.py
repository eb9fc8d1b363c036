"""Helpers for the black-box tests of itsme-relay (fixtures: conftest.py).

Every test starts a real relay process on 127.0.0.1 with a fresh database
(`relay(**flags)`), talks to it over HTTP, WebSocket or raw TCP, and stops it.
The contract is docs/PROTOCOL.md section 15.
"""

import asyncio
import base64
import json
import os
import re
import secrets
import select
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BINARY = REPO / "apps" / ".build" / "debug" / "itsme-relay"

# Generous limits so that tests do not trip each other; the tests of a limit
# pass their own small value.
GENEROUS = {
    "max_connections": 4096,
    "max_connections_per_address": 4096,
    "lookup_rate": 100000,
    "create_rate": 100000,
    "group_join_rate": 100000,
    "request_timeout": 10,
    "shutdown_timeout": 5,
}

LISTENING = re.compile(r"itsme-relay listening on (https?)://127\.0\.0\.1:(\d+)")
TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")


def is_postgres_url(database) -> bool:
    return isinstance(database, str) and database.startswith(("postgres://", "postgresql://"))


def relay_binary() -> Path:
    env = os.environ.get("ITSME_RELAY_BIN")
    return Path(env) if env else DEFAULT_BINARY


# ---------------------------------------------------------------------------
# Encodings


def new_id() -> str:
    """A fresh, well-formed ID: 16 random bytes as 32 lower-case hex."""
    return secrets.token_hex(16)


def random_token() -> str:
    """A well-formed token (43 canonical base64url characters) that the relay never issued."""
    return b64url(secrets.token_bytes(32))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    assert "=" not in text, f"base64url must be unpadded: {text!r}"
    assert re.fullmatch(r"[A-Za-z0-9_-]*", text), f"not base64url: {text!r}"
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def assert_token(token) -> None:
    assert isinstance(token, str) and TOKEN.fullmatch(token), f"not a 43-char base64url token: {token!r}"
    assert len(unb64url(token)) == 32


def assert_error(response: httpx.Response, status: int, kind: str) -> dict:
    """The response is the JSON error `kind` with `status` (15.1)."""
    assert response.status_code == status, (
        f"expected {status} {kind}, got {response.status_code}: {response.text[:300]!r}"
    )
    try:
        body = response.json()
    except ValueError:
        pytest.fail(f"error body is not JSON: {response.text[:300]!r}")
    assert body.get("error") == kind, f"expected error kind {kind!r}, got {body!r}"
    message = body.get("message")
    assert isinstance(message, str) and message and "\n" not in message, f"bad message in {body!r}"
    return body


def retry_after(headers) -> int:
    value = headers.get("retry-after")
    assert value is not None, f"no Retry-After header in {dict(headers)!r}"
    assert re.fullmatch(r"\d+", value.strip()), f"Retry-After is not integer seconds: {value!r}"
    return int(value)


# ---------------------------------------------------------------------------
# The relay process


class Relay:
    def __init__(self, binary: Path, workdir: Path, flags: dict):
        self.dir = workdir
        flags = dict(flags)
        given = flags.pop("database", None)
        if is_postgres_url(given):
            # PostgreSQL (conftest.py: ITSME_RELAY_TEST_DATABASE): a URL, no file.
            self.database = given
            self.backend = "postgres"
        else:
            self.database = Path(given or workdir / "relay.sqlite")
            self.backend = "sqlite"
        self.stderr_path = workdir / "stderr.log"
        port = flags.pop("port", 0)
        args = [str(binary), "--host", "127.0.0.1", "--port", str(port), "--database", str(self.database)]
        for name, value in flags.items():
            if value is None or value is False:
                continue
            flag = "--" + name.replace("_", "-")
            if value is True:
                args.append(flag)
            else:
                args += [flag, str(value)]
        self.args = args
        self.flags = flags
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr
        )
        self.stdout_lines: list = []
        first: list = []
        reader = threading.Thread(target=self._read_stdout, args=(first,), daemon=True)
        reader.start()
        deadline = time.monotonic() + 30
        while not first and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.01)
        if not first:
            code = self.proc.poll()
            self.kill()
            pytest.fail(
                f"relay did not print its listening line within 30 s (exit code {code}); "
                f"args {args[1:]}; stderr:\n{self.stderr_text()[-3000:]}"
            )
        match = LISTENING.fullmatch(first[0].strip())
        if not match:
            self.kill()
            pytest.fail(f"unexpected first stdout line {first[0]!r}; stderr:\n{self.stderr_text()[-3000:]}")
        self.scheme = match.group(1)
        self.port = int(match.group(2))
        self.url = f"{self.scheme}://127.0.0.1:{self.port}"
        self.ws_base = f"{'wss' if self.scheme == 'https' else 'ws'}://127.0.0.1:{self.port}"
        self._clients: list = []

    def _read_stdout(self, first: list) -> None:
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace")
            if not first:
                first.append(line)
            else:
                self.stdout_lines.append(line)

    # -- helpers

    def api(self, **kwargs) -> "Api":
        client = Api(self, **kwargs)
        self._clients.append(client)
        return client

    def room_url(self, room_id: str) -> str:
        return f"{self.ws_base}/v1/rooms/{room_id}"

    def stderr_text(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_bytes().decode("utf-8", "replace")

    def stderr_bytes(self) -> bytes:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_bytes()

    def connect_raw(self, source: str = None, timeout: float = 5.0) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        if source:
            sock.bind((source, 0))
        sock.connect(("127.0.0.1", self.port))
        return sock

    def alive(self) -> bool:
        return self.proc.poll() is None

    def assert_serving(self) -> None:
        """The relay still answers a fresh request on a fresh connection."""
        assert self.alive(), f"relay exited with {self.proc.returncode}; stderr:\n{self.stderr_text()[-3000:]}"
        with httpx.Client(base_url=self.url, timeout=5, verify=False) as client:
            response = client.get("/health")
        assert response.status_code == 200, f"/health answered {response.status_code}: {response.text!r}"

    # -- stopping

    def signal(self, sig=signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout: float):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def close(self) -> None:
        for client in self._clients:
            client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            if self.wait(15) is None:
                self.kill()
        self._stderr.close()


# ---------------------------------------------------------------------------
# HTTP client


class Api:
    """A thin wrapper around httpx with the relay's routes."""

    def __init__(self, relay: Relay, timeout: float = 15, **kwargs):
        self.relay = relay
        kwargs.setdefault("verify", False)
        self.http = httpx.Client(base_url=relay.url, timeout=timeout, **kwargs)

    def close(self) -> None:
        self.http.close()

    @staticmethod
    def _auth(token, headers=None) -> dict:
        headers = dict(headers or {})
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def request(self, method, path, **kwargs) -> httpx.Response:
        return self.http.request(method, path, **kwargs)

    # invites
    def create(self, invite_id, headers=None) -> httpx.Response:
        return self.http.post(f"/v1/invites/{invite_id}", headers=headers)

    def accept(self, invite_id, headers=None) -> httpx.Response:
        return self.http.post(f"/v1/invites/{invite_id}/accept", headers=headers)

    def post(self, invite_id, token, body: bytes, headers=None) -> httpx.Response:
        headers = self._auth(token, headers)
        headers.setdefault("Content-Type", "application/octet-stream")
        return self.http.post(f"/v1/invites/{invite_id}/messages", content=body, headers=headers)

    def fetch(self, invite_id, token, after=None, wait=None, headers=None, timeout=None) -> httpx.Response:
        params = {}
        if after is not None:
            params["after"] = after
        if wait is not None:
            params["wait"] = wait
        extra = {} if timeout is None else {"timeout": timeout}
        return self.http.get(
            f"/v1/invites/{invite_id}/messages", params=params, headers=self._auth(token, headers), **extra
        )

    def delete(self, invite_id, token, headers=None) -> httpx.Response:
        return self.http.delete(f"/v1/invites/{invite_id}", headers=self._auth(token, headers))

    # records
    def put_record(self, record_id, body: bytes) -> httpx.Response:
        return self.http.put(
            f"/v1/records/{record_id}", content=body, headers={"Content-Type": "application/octet-stream"}
        )

    def get_record(self, record_id) -> httpx.Response:
        return self.http.get(f"/v1/records/{record_id}")

    def delete_record(self, record_id, token, headers=None) -> httpx.Response:
        return self.http.delete(f"/v1/records/{record_id}", headers=self._auth(token, headers))

    # health
    def health(self) -> httpx.Response:
        return self.http.get("/health")

    def metrics(self) -> dict:
        response = self.http.get("/metrics")
        assert response.status_code == 200, response.text
        return parse_metrics(response.text)

    # composite helpers
    def open_invite(self, accept=True) -> SimpleNamespace:
        invite_id = new_id()
        created = self.create(invite_id)
        assert created.status_code == 201, created.text
        invite = SimpleNamespace(id=invite_id, inviter=created.json()["token"], invitee=None,
                                 expires=created.json()["expires"])
        if accept:
            accepted = self.accept(invite_id)
            assert accepted.status_code == 200, accepted.text
            invite.invitee = accepted.json()["token"]
        return invite

    def messages(self, invite_id, token, after=None) -> list:
        response = self.fetch(invite_id, token, after=after)
        assert response.status_code == 200, response.text
        return [(m["seq"], unb64url(m["body"])) for m in response.json()["messages"]]


# ---------------------------------------------------------------------------
# Metrics


def parse_metrics(text: str) -> dict:
    """Prometheus text to {(name, ((label, value), ...)): float}."""
    samples = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)", line)
        assert match, f"not a Prometheus sample line: {line!r}"
        name, labels, value = match.groups()
        pairs = tuple(sorted(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', labels or "")))
        samples[(name, pairs)] = float(value)
    return samples


def metric(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def eventually_metric(api, name: str, expected: float, timeout: float = 2.0, **labels) -> float:
    """The metric's value once it equals `expected`, or its last value after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = metric(api.metrics(), name, **labels)
        if value == expected or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


# ---------------------------------------------------------------------------
# Raw HTTP over a socket


def read_response(sock: socket.socket, timeout: float = 5.0):
    """Read one HTTP response. Returns SimpleNamespace(status, headers, body,
    raw) or None when the connection closed (or reset) before a full head."""
    sock.settimeout(timeout)
    data = b""
    deadline = time.monotonic() + timeout
    while b"\r\n\r\n" not in data:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no complete response head within {timeout} s; got {data[:200]!r}")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        except socket.timeout:
            raise TimeoutError(f"no complete response head within {timeout} s; got {data[:200]!r}")
        if not chunk:
            return None if not data else SimpleNamespace(status=None, headers={}, body=b"", raw=data)
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status_match = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
    assert status_match, f"bad status line {lines[0]!r}"
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    while len(rest) < length and time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (OSError, socket.timeout):
            break
        if not chunk:
            break
        rest += chunk
    return SimpleNamespace(status=int(status_match.group(1)), headers=headers, body=rest[:length], raw=data)


def closed_within(sock: socket.socket, timeout: float) -> bool:
    """True when the peer closes (EOF or reset) within `timeout`, reading and
    discarding whatever arrives before."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        readable, _, _ = select.select([sock], [], [], remaining)
        if not readable:
            return False
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError, OSError):
            return True
        if not chunk:
            return True


def simple_request(path: str = "/health", method: str = "GET", extra: str = "") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n".encode()


# ---------------------------------------------------------------------------
# WebSocket helpers


def run(coroutine):
    return asyncio.run(coroutine)


try:  # websockets >= 13
    from websockets.asyncio.client import connect as ws_connect_impl
except ImportError:  # pragma: no cover - older websockets
    from websockets import connect as ws_connect_impl  # type: ignore

from websockets.exceptions import ConnectionClosed  # noqa: E402

try:  # websockets >= 14
    from websockets.exceptions import InvalidStatus as HandshakeRefused
except ImportError:  # pragma: no cover - older websockets
    from websockets.exceptions import InvalidStatusCode as HandshakeRefused  # type: ignore

HANDSHAKE_REFUSALS = (HandshakeRefused,)


def refusal_status(exc) -> int:
    response = getattr(exc, "response", None)
    if response is not None:
        return response.status_code
    return exc.status_code


def refusal_body(exc) -> bytes:
    response = getattr(exc, "response", None)
    return (getattr(response, "body", None) or b"") if response is not None else b""


def ws_connect(url: str, **kwargs):
    kwargs.setdefault("max_size", None)
    kwargs.setdefault("ping_interval", None)
    kwargs.setdefault("open_timeout", 5)
    kwargs.setdefault("close_timeout", 2)
    return ws_connect_impl(url, **kwargs)



def numbered_frame(n: int, size: int) -> bytes:
    """A binary frame of `size` bytes starting with `n`, masked with the
    all-zero key (a valid key: the payload goes as it is)."""
    payload = n.to_bytes(4, "big") + bytes(size - 4)
    return bytes([0x80 | OP_BINARY, 0x80 | 127]) + size.to_bytes(8, "big") + bytes(4) + payload

async def recv_event(ws, timeout: float = 3.0) -> dict:
    """The next message, which must be a relay text frame carrying JSON."""
    message = await asyncio.wait_for(ws.recv(), timeout)
    assert isinstance(message, str), f"expected a text frame from the relay, got binary {message[:40]!r}"
    event = json.loads(message)
    assert isinstance(event, dict) and "type" in event, f"not a relay event: {message!r}"
    return event


async def recv_binary(ws, timeout: float = 3.0) -> bytes:
    message = await asyncio.wait_for(ws.recv(), timeout)
    assert isinstance(message, bytes), f"expected a binary frame, got text {message!r}"
    return message


async def close_code(ws, timeout: float = 3.0):
    """Wait for the relay to close `ws`; returns the close code it sent
    (None when the connection ended without a close frame). Fails when
    anything other than the close arrives, or nothing within `timeout`."""
    try:
        message = await asyncio.wait_for(ws.recv(), timeout)
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd is not None else None
    except asyncio.TimeoutError:
        pytest.fail(f"connection not closed within {timeout} s")
    pytest.fail(f"expected the connection to close, got a message {message!r:.200}")


async def pair(relay: Relay, room_id: str = None, **connect_options):
    """Two peers in one room, past the `waiting` / `peer-joined` events."""
    room_id = room_id or new_id()
    first = await ws_connect(relay.room_url(room_id), **connect_options)
    assert await recv_event(first) == {"type": "waiting"}
    second = await ws_connect(relay.room_url(room_id), **connect_options)
    assert await recv_event(second) == {"type": "peer-joined"}
    assert await recv_event(first) == {"type": "peer-joined"}
    return room_id, first, second


# ---------------------------------------------------------------------------
# A raw WebSocket peer: every frame as it is on the wire (pings and pongs
# included, which a WebSocket library answers and hides), and control over
# what is written in one go.

OP_CONTINUATION, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def ws_frame(opcode: int, payload: bytes = b"", fin: bool = True) -> bytes:
    """One masked client frame."""
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
    mask = os.urandom(4)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def ws_close_frame(code: int = 1000) -> bytes:
    return ws_frame(OP_CLOSE, code.to_bytes(2, "big"))


class RawPeer:
    """A room connection on a bare TCP socket (asyncio). `recv()` returns
    each frame the relay sends as (opcode, payload), control frames included;
    nothing is answered unless the test does it."""

    def __init__(self, reader, writer):
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, relay: "Relay", room_id: str) -> "RawPeer":
        reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET /v1/rooms/{room_id} HTTP/1.1\r\nHost: 127.0.0.1:{relay.port}\r\n"
                f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                f"Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 101"), head
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        """Bytes as they are: frames from ws_frame(), several at once if wanted."""
        self.writer.write(data)
        await self.writer.drain()

    async def send_binary(self, payload: bytes) -> None:
        await self.send(ws_frame(OP_BINARY, payload))

    async def ping(self, payload: bytes) -> None:
        await self.send(ws_frame(OP_PING, payload))

    async def recv(self, timeout: float = 3.0):
        """The next frame: (opcode, payload); (None, b"") at the end of the stream."""

        async def read():
            try:
                b0, b1 = await self.reader.readexactly(2)
            except asyncio.IncompleteReadError:
                return None, b""
            assert b1 & 0x80 == 0, "the relay masked a frame"
            assert b0 & 0x80, "the relay fragmented a frame"
            n = b1 & 0x7F
            if n == 126:
                n = int.from_bytes(await self.reader.readexactly(2), "big")
            elif n == 127:
                n = int.from_bytes(await self.reader.readexactly(8), "big")
            return b0 & 0x0F, await self.reader.readexactly(n)

        return await asyncio.wait_for(read(), timeout)

    async def recv_event(self, timeout: float = 3.0) -> dict:
        opcode, payload = await self.recv(timeout)
        assert opcode == OP_TEXT, f"expected a relay event, got opcode {opcode} {payload[:40]!r}"
        return json.loads(payload)

    async def close_code(self, timeout: float = 3.0):
        """Waits for the relay's close frame; returns its code."""
        opcode, payload = await self.recv(timeout)
        assert opcode == OP_CLOSE, f"expected a close frame, got opcode {opcode} {payload[:40]!r}"
        return int.from_bytes(payload[:2], "big")

    async def until_end(self, timeout: float = 5.0) -> None:
        """Reads and drops everything until the relay ends the connection."""
        deadline = time.monotonic() + timeout
        while (await self.recv(max(0.01, deadline - time.monotonic())))[0] is not None:
            pass

    def abort(self) -> None:
        self.writer.close()

    async def aclose(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except OSError:
            pass


async def raw_pair(relay: Relay, room_id: str = None):
    """Two raw peers in one room, past the `waiting` / `peer-joined` events."""
    room_id = room_id or new_id()
    first = await RawPeer.connect(relay, room_id)
    assert await first.recv_event() == {"type": "waiting"}
    second = await RawPeer.connect(relay, room_id)
    assert await second.recv_event() == {"type": "peer-joined"}
    assert await first.recv_event() == {"type": "peer-joined"}
    return room_id, first, second
