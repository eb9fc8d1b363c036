"""Shutdown on SIGTERM / SIGINT (PROTOCOL.md 15.3, 15.5)."""

import asyncio
import signal
import threading
import time

import pytest

from relaytest import close_code, pair, run


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_shutdown_closes_room_connections_with_1001_and_exits_0(relay, sig):
    r = relay(shutdown_timeout=3)

    async def scenario():
        _, a, b = await pair(r)
        signalled = time.monotonic()
        r.signal(sig)
        codes = await asyncio.gather(close_code(a, 4), close_code(b, 4))
        await a.close()
        await b.close()
        return signalled, codes

    signalled, codes = run(scenario())
    assert codes == [1001, 1001]
    code = r.wait(max(0.1, signalled + 4 - time.monotonic()))
    assert code is not None, "the relay did not exit within --shutdown-timeout + 1 s"
    assert code == 0, f"the relay exited with {code}"


def test_shutdown_answers_a_held_fetch_at_once(relay):
    r = relay(shutdown_timeout=3)
    api = r.api()
    invite = api.open_invite()
    result = {}

    def held():
        try:
            result["response"] = r.api().fetch(invite.id, invite.invitee, wait=30, timeout=40)
        except Exception as exc:
            result["error"] = exc
        result["at"] = time.monotonic()

    worker = threading.Thread(target=held, daemon=True)
    worker.start()
    time.sleep(0.5)
    signalled = time.monotonic()
    r.signal(signal.SIGTERM)
    worker.join(5)
    assert not worker.is_alive(), "the held fetch was not answered"
    assert "error" not in result, f"the held fetch failed instead of being answered: {result.get('error')!r}"
    assert result["at"] - signalled < 1.5
    response = result["response"]
    assert response.status_code == 200, response.text
    assert response.json()["messages"] == []
    assert r.wait(4) == 0


def test_an_idle_relay_exits_promptly_on_sigterm(relay):
    r = relay(shutdown_timeout=3)
    assert r.api().health().status_code == 200
    start = time.monotonic()
    r.signal(signal.SIGTERM)
    assert r.wait(4) == 0
    assert time.monotonic() - start < 4


def test_shutdown_does_not_wait_past_the_timeout_for_a_slow_upload(relay):
    r = relay(shutdown_timeout=2, request_timeout=30)
    api = r.api()
    invite = api.open_invite()
    sock = r.connect_raw()
    try:
        sock.sendall(
            f"POST /v1/invites/{invite.id}/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {invite.inviter}\r\nContent-Type: application/octet-stream\r\n"
            f"Content-Length: 1000\r\n\r\n".encode() + b"\x00" * 10
        )
        time.sleep(0.3)
        start = time.monotonic()
        r.signal(signal.SIGTERM)
        code = r.wait(3.5)
        assert code is not None, "the relay waited past --shutdown-timeout for an unfinished request"
        assert code == 0
        assert time.monotonic() - start <= 3.5
    finally:
        sock.close()
