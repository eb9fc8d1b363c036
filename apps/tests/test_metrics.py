"""Health and metrics (PROTOCOL.md 15.6)."""

import asyncio
import os

from relaytest import (
    HANDSHAKE_REFUSALS,
    eventually_metric,
    metric,
    new_id,
    pair,
    random_token,
    recv_binary,
    recv_event,
    run,
    ws_connect,
)

GAUGES = ["itsme_relay_invites_live", "itsme_relay_rooms_open", "itsme_relay_connections_open"]
COUNTER = "itsme_relay_frames_forwarded_total"
REJECTIONS = "itsme_relay_rejections_total"


def test_health_answers_ok(relay):
    response = relay().api().health()
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_metrics_is_prometheus_text_with_the_documented_names(relay):
    r = relay()
    api = r.api()
    response = api.request("GET", "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    names = {name for name, _ in api.metrics()}
    for name in GAUGES + [COUNTER]:
        assert name in names, f"{name} missing from /metrics:\n{response.text}"
    api.accept(new_id())  # one rejection, so that the labelled counter has a sample
    assert metric(api.metrics(), REJECTIONS, reason="not-found") >= 1


def test_rejection_reasons_are_the_documented_ones(relay):
    api = relay().api()
    api.accept(new_id())
    for (name, labels), _ in api.metrics().items():
        if name == REJECTIONS:
            assert dict(labels).get("reason") in {
                "bad-id", "bad-request", "unauthorized", "forbidden", "not-found", "method-not-allowed", "conflict", "limit",
                "too-large", "rate-limited", "busy", "room-full", "no-peer", "idle", "slow-request", "protocol-error",
                "unavailable",
            }, f"undocumented rejection reason {labels}"


def test_live_invites_are_counted(relay):
    api = relay().api()
    before = metric(api.metrics(), "itsme_relay_invites_live")
    invite = api.open_invite()
    api.open_invite(accept=False)
    assert metric(api.metrics(), "itsme_relay_invites_live") == before + 2
    assert api.delete(invite.id, invite.inviter).status_code == 204
    assert metric(api.metrics(), "itsme_relay_invites_live") == before + 1


def test_forwarded_frames_are_counted_exactly(relay):
    r = relay()
    api = r.api()
    before = metric(api.metrics(), COUNTER)

    async def scenario():
        room = new_id()
        a = await ws_connect(r.room_url(room))
        assert await recv_event(a) == {"type": "waiting"}
        await a.send(b"nobody here")  # refused, not forwarded
        assert await recv_event(a) == {"type": "refused", "reason": "no-peer"}
        b = await ws_connect(r.room_url(room))
        assert await recv_event(b) == {"type": "peer-joined"}
        assert await recv_event(a) == {"type": "peer-joined"}
        samples = api.metrics()
        assert metric(samples, "itsme_relay_rooms_open") >= 1
        assert metric(samples, "itsme_relay_connections_open") >= 2
        for _ in range(3):
            await a.send(os.urandom(100))
            await recv_binary(b)
        for _ in range(2):
            await b.send(os.urandom(10))
            await recv_binary(a)
        await a.close()
        await b.close()

    run(scenario())
    samples = api.metrics()
    assert metric(samples, COUNTER) == before + 5
    assert metric(samples, REJECTIONS, reason="no-peer") >= 1


def test_rejections_are_counted_by_reason(relay):
    r = relay(max_messages=1, max_message=10)
    api = r.api()
    invite = api.open_invite()
    record_id = new_id()
    assert api.put_record(record_id, b"record").status_code == 201
    assert api.post(invite.id, invite.inviter, b"one").status_code == 201
    provoke = {
        "not-found": lambda: api.accept(new_id()),
        "bad-id": lambda: api.create("NOT-AN-ID"),
        "bad-request": lambda: api.fetch(invite.id, invite.invitee, wait="x"),
        "unauthorized": lambda: api.fetch(invite.id, None),
        "forbidden": lambda: api.delete_record(record_id, random_token()),
        "conflict": lambda: api.create(invite.id),
        "limit": lambda: api.post(invite.id, invite.inviter, b"two"),
        "too-large": lambda: api.post(invite.id, invite.invitee, b"x" * 11),
    }
    for reason, action in provoke.items():
        before = metric(api.metrics(), REJECTIONS, reason=reason)
        response = action()
        assert 400 <= response.status_code < 500, response.text
        after = metric(api.metrics(), REJECTIONS, reason=reason)
        assert after == before + 1, f"{reason}: {before} -> {after}"

    async def room_full():
        room, a, b = await pair(r)
        before = metric(api.metrics(), REJECTIONS, reason="room-full")
        try:
            extra = await ws_connect(r.room_url(room))
            await extra.close()
        except HANDSHAKE_REFUSALS:
            pass
        await asyncio.sleep(0.2)
        after = metric(api.metrics(), REJECTIONS, reason="room-full")
        await a.close()
        await b.close()
        return before, after

    before, after = run(room_full())
    assert after == before + 1, f"room-full: {before} -> {after}"


def test_rooms_open_falls_back_when_a_room_ends(relay):
    r = relay()
    api = r.api()

    async def scenario():
        _, a, b = await pair(r)
        assert metric(api.metrics(), "itsme_relay_rooms_open") == 1
        await a.close()
        await b.close()

    run(scenario())
    assert eventually_metric(api, "itsme_relay_rooms_open", 0) == 0
