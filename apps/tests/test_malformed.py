"""Malformed requests: wrong methods, unknown routes, huge bodies, garbage
(PROTOCOL.md 15.1, 15.5). Each gets a clear refusal and the relay keeps serving."""

import time

import pytest

from relaytest import assert_error, new_id, read_response, simple_request

ID = "0123456789abcdef0123456789abcdef"


def allowed(response) -> set:
    value = response.headers.get("allow")
    assert value is not None, f"405 without an Allow header: {dict(response.headers)!r}"
    return {m.strip().upper() for m in value.split(",") if m.strip()}


@pytest.mark.parametrize(
    "method, path, must_allow",
    [
        ("PUT", f"/v1/invites/{ID}", {"POST", "DELETE"}),
        ("GET", f"/v1/invites/{ID}", {"POST", "DELETE"}),
        ("PATCH", f"/v1/invites/{ID}", {"POST", "DELETE"}),
        ("GET", f"/v1/invites/{ID}/accept", {"POST"}),
        ("DELETE", f"/v1/invites/{ID}/accept", {"POST"}),
        ("PUT", f"/v1/invites/{ID}/messages", {"GET", "POST"}),
        ("DELETE", f"/v1/invites/{ID}/messages", {"GET", "POST"}),
        ("POST", f"/v1/records/{ID}", {"GET", "PUT", "DELETE"}),
        ("PATCH", f"/v1/records/{ID}", {"GET", "PUT", "DELETE"}),
        ("POST", f"/v1/rooms/{ID}", {"GET"}),
        ("POST", "/health", {"GET"}),
        ("DELETE", "/metrics", {"GET"}),
    ],
)
def test_a_wrong_method_answers_405_with_allow(relay, method, path, must_allow):
    r = relay()
    response = r.api().request(method, path)
    assert_error(response, 405, "method-not-allowed")
    methods = allowed(response)
    assert must_allow <= methods, f"Allow {methods} lacks {must_allow - methods}"
    assert method not in methods
    r.assert_serving()


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/"),
        ("GET", "/v1"),
        ("GET", "/v1/"),
        ("POST", "/v1/invites"),
        ("GET", "/v1/nothing"),
        ("POST", f"/v2/invites/{ID}"),
        ("POST", f"/v1/invites/{ID}/other"),
        ("GET", f"/v1/records/{ID}/more"),
        ("GET", "/healthz"),
    ],
)
def test_an_unknown_route_answers_404_json(relay, method, path):
    r = relay()
    assert_error(r.api().request(method, path), 404, "not-found")


def invite_head(path, token, length, extra="") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/octet-stream\r\n{extra}"
    ).encode() + (f"Content-Length: {length}\r\n" if length is not None else "").encode() + b"\r\n"


def test_a_huge_declared_body_is_refused_with_413_without_being_read(relay):
    r = relay()
    api = r.api()
    invite = api.open_invite()
    sock = r.connect_raw()
    try:
        start = time.monotonic()
        sock.sendall(invite_head(f"/v1/invites/{invite.id}/messages", invite.inviter, 10 * 1024 * 1024))
        sock.sendall(b"\x00" * 65536)  # a small part of the 10 MB; the rest never comes
        response = read_response(sock, timeout=5)
        assert response is not None and response.status == 413, f"expected 413, got {response!r}"
        assert time.monotonic() - start < 2.0
    finally:
        sock.close()
    assert api.messages(invite.id, invite.invitee) == []
    r.assert_serving()
    assert api.post(invite.id, invite.inviter, b"normal").status_code == 201


def test_a_huge_declared_record_is_refused_with_413_without_being_read(relay):
    r = relay()
    sock = r.connect_raw()
    try:
        sock.sendall(
            f"PUT /v1/records/{new_id()} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/octet-stream\r\nContent-Length: {10 * 1024 * 1024}\r\n\r\n".encode()
        )
        sock.sendall(b"\x00" * 1000)
        response = read_response(sock, timeout=5)
        assert response is not None and response.status == 413, f"expected 413, got {response!r}"
    finally:
        sock.close()
    r.assert_serving()


def test_a_chunked_body_beyond_the_limit_is_refused_with_413(relay):
    r = relay()
    api = r.api()
    invite = api.open_invite()
    sock = r.connect_raw()
    try:
        sock.sendall(invite_head(f"/v1/invites/{invite.id}/messages", invite.inviter, None,
                                 "Transfer-Encoding: chunked\r\n"))
        chunk = b"\x01" * 40000
        for _ in range(3):  # 120,000 bytes > 65,536, and no final chunk
            sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        response = read_response(sock, timeout=5)
        assert response is not None and response.status == 413, f"expected 413, got {response!r}"
    finally:
        sock.close()
    assert api.messages(invite.id, invite.invitee) == []
    r.assert_serving()


def test_a_huge_body_through_httpx_gets_413_and_the_relay_keeps_serving(relay):
    r = relay()
    api = r.api()
    invite = api.open_invite()
    try:
        response = api.post(invite.id, invite.inviter, b"\x07" * (10 * 1024 * 1024))
        assert_error(response, 413, "too-large")
    except Exception as exc:  # the relay may close while the client is still sending
        import httpx

        assert isinstance(exc, httpx.TransportError), repr(exc)
    r.assert_serving()
    assert api.post(invite.id, invite.inviter, b"fine").json() == {"seq": 1}


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(256)) * 4 + b"\r\n\r\n",
        b"\x00" * 4096 + b"\r\n\r\n",
        b"HELLO THERE\r\n\r\n",
        b"GET /health HTTP/9.9\r\nHost: x\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost x\r\nNo-Colon\r\n\r\n",
        b"POST /v1/invites/" + ID.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
    ],
    ids=["tls-hello", "zeros", "words", "version", "bad-header", "negative-length"],
)
def test_garbage_instead_of_http_is_closed_or_refused(relay, garbage):
    r = relay()
    sock = r.connect_raw()
    try:
        sock.sendall(garbage)
        start = time.monotonic()
        try:
            response = read_response(sock, timeout=3)
        except TimeoutError:
            pytest.fail("the relay neither answered nor closed within 3 s")
        if response is not None and response.status is not None:
            assert 400 <= response.status < 500 or response.status == 505, f"garbage answered {response.status}"
        else:
            assert time.monotonic() - start < 3.5
    finally:
        sock.close()
    r.assert_serving()


def test_an_enormous_header_is_refused_and_the_relay_keeps_serving(relay):
    r = relay()
    sock = r.connect_raw()
    try:
        try:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1024 * 1024) + b"\r\n\r\n")
        except OSError:
            pass  # closed while we were sending: a refusal
        try:
            response = read_response(sock, timeout=5)
        except TimeoutError:
            pytest.fail("the relay neither answered nor closed within 5 s")
        if response is not None and response.status is not None:
            assert 400 <= response.status < 500, f"a 1 MB header answered {response.status}"
    finally:
        sock.close()
    r.assert_serving()


def test_invalid_query_parameters_are_bad_requests(relay):
    r = relay()
    api = r.api()
    invite = api.open_invite()
    for params in ({"after": "abc"}, {"wait": "abc"}, {"after": "1.5"}, {"wait": "99"}):
        assert_error(api.fetch(invite.id, invite.invitee, **params), 400, "bad-request")
    r.assert_serving()


def test_several_requests_on_one_connection_are_answered(relay):
    r = relay()
    sock = r.connect_raw()
    try:
        for _ in range(3):
            sock.sendall(simple_request("/health"))
            response = read_response(sock, timeout=3)
            assert response is not None and response.status == 200
    finally:
        sock.close()
