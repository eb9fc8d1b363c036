"""Connection limits (PROTOCOL.md 15.5): beyond them, `503 busy` with
Retry-After and a close; the relay keeps serving the others."""

import json
import select
import time
from contextlib import contextmanager

from relaytest import (
    closed_within,
    metric,
    new_id,
    read_response,
    recv_event,
    retry_after,
    run,
    simple_request,
    ws_connect,
)


@contextmanager
def holding(relay, count, source=None):
    """`count` connections, each with a request it never finishes, open
    for the `with` block (as a list) and closed after it."""
    held = []
    try:
        for _ in range(count):
            sock = relay.connect_raw(source=source)
            sock.sendall(b"GET /health HTTP/1.1\r\n")  # a request that is never finished
            held.append(sock)
        time.sleep(0.5)  # let the relay accept them all
        yield held
    finally:
        for sock in held:
            sock.close()


def refused_busy(relay, source=None) -> None:
    """A new connection sending a whole request gets 503 busy with
    Retry-After and is closed."""
    sock = relay.connect_raw(source=source)
    try:
        readable, _, _ = select.select([sock], [], [], 0.3)
        if not readable:  # the relay waits for the request before answering
            try:
                sock.sendall(simple_request("/health"))
            except OSError:
                pass
        response = read_response(sock, timeout=5)
        assert response is not None, "the connection was closed without a 503"
        assert response.status == 503, f"expected 503, got {response.status}: {response.raw[:300]!r}"
        assert retry_after(response.headers) >= 1
        body = json.loads(response.body)
        assert body.get("error") == "busy", body
        assert closed_within(sock, 3), "the refused connection was not closed"
    finally:
        sock.close()


def served(relay, source=None) -> None:
    sock = relay.connect_raw(source=source)
    try:
        sock.sendall(simple_request("/health"))
        response = read_response(sock, timeout=5)
        assert response is not None and response.status == 200, f"expected 200, got {response!r}"
    finally:
        sock.close()


def eventually_served(relay, timeout=3.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            served(relay)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def busy_while_held(relay, count) -> None:
    """With `count` connections held, a new one is refused busy; once they
    are closed, one is served again."""
    with holding(relay, count):
        refused_busy(relay)
    eventually_served(relay)


def test_connections_beyond_max_connections_get_503_busy(relay):
    r = relay(max_connections=50, max_connections_per_address=1000, request_timeout=30)
    with holding(r, 50) as held:
        refused_busy(r)
        refused_busy(r)
        # The held connections are still served when they finish their request.
        held[0].sendall(b"Host: 127.0.0.1\r\n\r\n")
        response = read_response(held[0], timeout=5)
        assert response is not None and response.status == 200
    eventually_served(r)
    r.assert_serving()


def test_connections_beyond_the_per_address_limit_get_503_busy(relay):
    r = relay(max_connections=1000, max_connections_per_address=5, request_timeout=30)
    with holding(r, 5):
        refused_busy(r)
        # Another client address is not affected.
        served(r, source="127.0.0.2")
    eventually_served(r)


def test_websocket_connections_count_against_the_limits(relay):
    r = relay(max_connections=1000, max_connections_per_address=3, request_timeout=30)

    async def scenario():
        peers = []
        try:
            for _ in range(3):
                ws = await ws_connect(r.room_url(new_id()))
                assert await recv_event(ws) == {"type": "waiting"}
                peers.append(ws)
            refused_busy(r)
        finally:
            for ws in peers:
                await ws.close()

    run(scenario())
    eventually_served(r)


def test_a_refused_connection_is_counted_in_metrics_as_busy(relay):
    r = relay(max_connections=1000, max_connections_per_address=2, request_timeout=30)
    with holding(r, 2):
        refused_busy(r)
    time.sleep(0.3)
    assert metric(r.api().metrics(), "itsme_relay_rejections_total", reason="busy") >= 1


def test_the_default_per_address_limit_is_64_connections(relay):
    r = relay(max_connections_per_address=None, request_timeout=30)
    busy_while_held(r, 64)


def test_a_trusted_proxy_is_not_held_to_the_per_address_limit(relay):
    """nginx carries every client on its own address: its connections count
    in the total only (it limits clients itself, limit_conn)."""
    r = relay(max_connections=1000, max_connections_per_address=2, request_timeout=30, trusted_proxy="127.0.0.0/8")
    with holding(r, 5):
        served(r)


def test_a_trusted_proxy_still_counts_in_the_total(relay):
    r = relay(max_connections=4, max_connections_per_address=2, request_timeout=30, trusted_proxy="127.0.0.1")
    busy_while_held(r, 4)


def test_an_address_outside_the_trusted_range_keeps_the_per_address_limit(relay):
    r = relay(max_connections=1000, max_connections_per_address=2, request_timeout=30, trusted_proxy="10.0.0.0/8")
    busy_while_held(r, 2)
