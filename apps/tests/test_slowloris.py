"""Slow requests are closed (PROTOCOL.md 15.5, `--request-timeout`)."""

import select
import threading
import time

import httpx

from relaytest import closed_within, metric, read_response, simple_request


def drip(sock, data: bytes, interval: float, opened_at: float, result: dict) -> None:
    """Send `data` one byte every `interval` s; record when the relay closes."""
    for byte in data:
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            result["closed"] = time.monotonic() - opened_at
            return
        deadline = time.monotonic() + interval
        while (remaining := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([sock], [], [], remaining)
            if not readable:
                break
            try:
                chunk = sock.recv(4096)
            except OSError:
                chunk = b""
            if not chunk:
                result["closed"] = time.monotonic() - opened_at
                return
            result.setdefault("received", b"")
            result["received"] += chunk
    result["completed"] = True


def test_a_request_head_sent_byte_by_byte_is_closed_after_the_request_timeout(relay):
    r = relay(request_timeout=2)
    head = simple_request("/health", extra="User-Agent: slow-and-steady/1.0\r\n")
    workers, results, sockets = [], [], []
    for _ in range(3):
        sock = r.connect_raw()
        sockets.append(sock)
        result = {}
        results.append(result)
        worker = threading.Thread(target=drip, args=(sock, head, 0.5, time.monotonic(), result), daemon=True)
        worker.start()
        workers.append(worker)
    try:
        # Meanwhile a normal request on another connection is served promptly.
        time.sleep(1.0)
        start = time.monotonic()
        with httpx.Client(base_url=r.url, timeout=5) as client:
            assert client.get("/health").status_code == 200
        assert time.monotonic() - start < 0.5

        for worker in workers:
            worker.join(6)
        for result in results:
            assert not result.get("completed"), "the whole slow request went through"
            assert "closed" in result, "the slow connection was not closed within 6 s"
            assert 1.5 <= result["closed"] <= 4.0, f"closed {result['closed']:.2f} s after opening"
            received = result.get("received", b"")
            assert not received.startswith(b"HTTP/1.1 200"), "the slow request was answered 200"
    finally:
        for sock in sockets:
            sock.close()
    r.assert_serving()
    assert metric(r.api().metrics(), "itsme_relay_rejections_total", reason="slow-request") >= 3


def test_a_silent_connection_is_closed_after_the_request_timeout(relay):
    r = relay(request_timeout=2)
    sock = r.connect_raw()
    try:
        start = time.monotonic()
        assert closed_within(sock, 5), "an idle connection stayed open"
        assert 1.5 <= time.monotonic() - start <= 4.0
    finally:
        sock.close()
    r.assert_serving()


def test_a_keep_alive_connection_is_closed_when_the_next_request_is_late(relay):
    r = relay(request_timeout=2)
    sock = r.connect_raw()
    try:
        sock.sendall(simple_request("/health"))
        response = read_response(sock, timeout=3)
        assert response is not None and response.status == 200
        answered = time.monotonic()
        # The next request must arrive within the timeout of this response.
        time.sleep(1.0)
        sock.sendall(simple_request("/health"))
        response = read_response(sock, timeout=3)
        assert response is not None and response.status == 200, "a request within the timeout was refused"
        answered = time.monotonic()
        sock.sendall(b"GET /hea")
        assert closed_within(sock, 5), "a connection with a late request stayed open"
        assert 1.5 <= time.monotonic() - answered <= 4.0
    finally:
        sock.close()
