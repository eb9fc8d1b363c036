"""Request heads beyond the relay's limits (PROTOCOL.md 15.5): a header field
over 8 KiB, more than 32 KiB of header fields or more than 100 of them is
answered `431 too-large` and the connection closed; bytes that are not
HTTP/1.1 are answered `400 bad-request` and the connection closed. The relay
keeps serving."""

import json

import pytest

from relaytest import closed_within, new_id, read_response

HEAD = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def answer(r, data: bytes):
    """Sends `data` (the relay may stop reading early); returns the response
    and whether the connection was then closed."""
    sock = r.connect_raw(timeout=10)
    try:
        try:
            sock.sendall(data)
        except OSError:
            pass  # the relay answered and closed while this was still sending
        try:
            response = read_response(sock, timeout=5)
        except TimeoutError:
            pytest.fail("the relay neither answered nor closed within 5 s")
        assert response is not None, "the relay closed the connection without an HTTP answer"
        closed = response.status == 200 or closed_within(sock, 3)
        return response, closed
    finally:
        sock.close()


def assert_431(r, data: bytes):
    response, closed = answer(r, data)
    assert response.status == 431, f"expected 431, got {response.status}: {response.raw[:200]!r}"
    assert json.loads(response.body)["error"] == "too-large", response.body
    assert response.headers.get("connection", "").lower() == "close"
    assert closed, "the connection stayed open after the 431"
    r.assert_serving()


@pytest.mark.parametrize("size", [9 * 1024, 100 * 1024, 1024 * 1024], ids=["9k", "100k", "1m"])
def test_a_header_line_over_8k_gets_431(relay, size):
    assert_431(relay(), HEAD + b"X-Big: " + b"a" * size + b"\r\n\r\n")


def test_a_header_line_of_4k_is_served(relay):
    response, _ = answer(relay(), HEAD + b"X-Big: " + b"a" * 4096 + b"\r\n\r\n")
    assert response.status == 200


@pytest.mark.parametrize("count", [101, 2000, 5000])
def test_more_than_100_header_fields_get_431(relay, count):
    fields = b"".join(b"X-F%d: v\r\n" % i for i in range(count - 1))  # and Host
    assert_431(relay(), HEAD + fields + b"\r\n")


def test_100_header_fields_are_served(relay):
    fields = b"".join(b"X-F%d: v\r\n" % i for i in range(99))
    response, _ = answer(relay(), HEAD + fields + b"\r\n")
    assert response.status == 200


def test_more_than_32k_of_header_fields_get_431(relay):
    fields = b"".join(b"X-F%d: %s\r\n" % (i, b"v" * 4000) for i in range(9))
    assert_431(relay(), HEAD + fields + b"\r\n")


def test_a_huge_header_on_a_websocket_handshake_gets_431(relay):
    r = relay()
    assert_431(
        r,
        f"GET /v1/rooms/{new_id()} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n".encode()
        + b"X-Big: " + b"a" * (100 * 1024) + b"\r\n\r\n",
    )


def test_a_huge_header_on_a_kept_alive_connection_gets_431(relay):
    r = relay()
    sock = r.connect_raw(timeout=10)
    try:
        sock.sendall(HEAD + b"\r\n")
        assert read_response(sock).status == 200
        try:
            sock.sendall(HEAD + b"X-Big: " + b"a" * (100 * 1024) + b"\r\n\r\n")
        except OSError:
            pass
        response = read_response(sock)
        assert response is not None and response.status == 431, response
        assert closed_within(sock, 3)
    finally:
        sock.close()
    r.assert_serving()


@pytest.mark.parametrize(
    "garbage",
    [b"HELLO THERE\r\n\r\n", b"\x00" * 64 + b"\r\n\r\n", b"GET /health HTTP/1.1\r\nHost x\r\nNo-Colon\r\n\r\n"],
    ids=["words", "zeros", "bad-header"],
)
def test_bytes_that_are_not_http_get_400(relay, garbage):
    r = relay()
    response, closed = answer(r, garbage)
    assert response.status == 400, f"expected 400, got {response.status}: {response.raw[:200]!r}"
    assert json.loads(response.body)["error"] == "bad-request"
    assert closed
    r.assert_serving()
