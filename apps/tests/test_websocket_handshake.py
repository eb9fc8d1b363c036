"""The WebSocket opening handshake (RFC 6455 4.2.1, 4.2.2, 4.4; PROTOCOL.md
15.3): a request that asks for a WebSocket upgrade but is not a valid
handshake gets an HTTP answer, never a bare close: `400 bad-request` for a
missing or malformed Sec-WebSocket-Key, a Connection header without
`Upgrade`, a method other than GET or a version below HTTP/1.1; `426` with
`Sec-WebSocket-Version: 13` for any other WebSocket version. The connection
is closed after the answer."""

import base64
import json
import os

import pytest

from relaytest import assert_error, closed_within, new_id, read_response

GOOD_KEY = base64.b64encode(os.urandom(16)).decode()


def handshake(r, *, path=None, method="GET", http="HTTP/1.1", upgrade="websocket", connection="Upgrade",
              key=GOOD_KEY, version="13", extra=()):
    """Sends one handshake request (None drops a header; a list repeats it);
    returns (response, socket)."""
    path = path or f"/v1/rooms/{new_id()}"
    lines = [f"{method} {path} {http}", f"Host: 127.0.0.1:{r.port}"]
    for name, value in (("Upgrade", upgrade), ("Connection", connection), ("Sec-WebSocket-Key", key),
                        ("Sec-WebSocket-Version", version)):
        for one in value if isinstance(value, list) else [value]:
            if one is not None:
                lines.append(f"{name}: {one}")
    lines += list(extra)
    sock = r.connect_raw()
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    try:
        response = read_response(sock, timeout=5)
    except TimeoutError:
        sock.close()
        pytest.fail("the relay neither answered nor closed within 5 s")
    assert response is not None, "the relay closed the connection without an HTTP answer"
    return response, sock


class Answer:
    """A raw response as assert_error wants it."""

    def __init__(self, response):
        self.status_code = response.status
        self.body = response.body
        self.text = response.body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.body)


def assert_refused(r, status, **request):
    response, sock = handshake(r, **request)
    try:
        assert_error(Answer(response), status, "bad-request")
        assert "upgrade" not in response.headers.get("connection", "").lower()
        assert closed_within(sock, 3), "the connection stayed open after the refusal"
    finally:
        sock.close()
    r.assert_serving()
    return response


@pytest.mark.parametrize(
    "request_",
    [
        {"key": None},
        {"key": ""},
        {"key": "abc"},
        {"key": base64.b64encode(os.urandom(15)).decode()},
        {"key": base64.b64encode(os.urandom(17)).decode()},
        {"key": "!" * 24},
        {"key": [GOOD_KEY, base64.b64encode(os.urandom(16)).decode()]},
        {"connection": None},
        {"connection": "keep-alive"},
        {"method": "POST"},
        {"method": "PUT"},
        {"http": "HTTP/1.0"},
    ],
    ids=["no-key", "empty-key", "short-key", "15-byte-key", "17-byte-key", "not-base64-key", "two-keys",
         "no-connection", "connection-keep-alive", "post", "put", "http-1.0"],
)
def test_a_malformed_handshake_gets_400(relay, request_):
    assert_refused(relay(), 400, **request_)


@pytest.mark.parametrize(
    "version", ["8", "7", "12", "14", "0", "13, 8", None, ["13", "8"]],
    ids=["8", "7", "12", "14", "0", "list", "none", "two-headers"],
)
def test_another_websocket_version_gets_426_naming_version_13(relay, version):
    response = assert_refused(relay(), 426, version=version)
    assert response.headers.get("sec-websocket-version") == "13", response.headers


def test_a_malformed_handshake_to_another_path_gets_400(relay):
    assert_refused(relay(), 400, path="/health", key=None)


@pytest.mark.parametrize(
    "request_",
    [
        {},
        {"connection": "keep-alive, Upgrade"},
        {"connection": "upgrade"},
        {"upgrade": "WebSocket"},
        {"key": " " + GOOD_KEY + " "},
    ],
    ids=["plain", "connection-list", "lower-case", "upgrade-case", "key-with-spaces"],
)
def test_a_valid_handshake_is_upgraded(relay, request_):
    r = relay()
    response, sock = handshake(r, **request_)
    try:
        assert response.status == 101, f"expected 101, got {response.status}: {response.raw[:300]!r}"
        assert response.headers.get("upgrade", "").lower() == "websocket"
    finally:
        sock.close()


def test_a_malformed_handshake_on_a_kept_alive_connection_gets_400(relay):
    r = relay()
    sock = r.connect_raw()
    try:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(sock).status == 200
        sock.sendall(
            f"GET /v1/rooms/{new_id()} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        response = read_response(sock)
        assert response is not None and response.status == 400, response
        assert closed_within(sock, 3)
    finally:
        sock.close()


def test_a_client_cannot_forge_a_refusal(relay):
    """Whatever header a request carries, a plain request is answered as usual."""
    r = relay()
    for name in ("ItsMe-Relay-Refused-Handshake", "itsme-relay-refused-handshake"):
        response = r.api().request("GET", "/health", headers={name: "version"})
        assert response.status_code == 200, response.text
