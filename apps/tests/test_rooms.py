"""Rooms (PROTOCOL.md 15.3): two peers, binary frames forwarded, relay events."""

import asyncio
import os
import random
import time

import pytest

from relaytest import (
    numbered_frame,
    HANDSHAKE_REFUSALS,
    OP_BINARY,
    OP_CONTINUATION,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    RawPeer,
    close_code,
    eventually_metric,
    metric,
    new_id,
    pair,
    recv_binary,
    recv_event,
    refusal_body,
    refusal_status,
    raw_pair,
    run,
    ws_close_frame,
    ws_connect,
    ws_frame,
)


async def close_all(*connections):
    for ws in connections:
        try:
            await ws.close()
        except Exception:
            pass


def test_first_peer_waits_and_both_learn_when_the_second_joins(relay):
    r = relay()

    async def scenario():
        room = new_id()
        first = await ws_connect(r.room_url(room))
        try:
            assert await recv_event(first) == {"type": "waiting"}
            second = await ws_connect(r.room_url(room))
            try:
                assert await recv_event(second) == {"type": "peer-joined"}
                assert await recv_event(first) == {"type": "peer-joined"}
            finally:
                await close_all(second)
        finally:
            await close_all(first)

    run(scenario())


def test_binary_frames_are_forwarded_unchanged_both_ways(relay):
    r = relay()

    async def scenario():
        _, a, b = await pair(r)
        try:
            for size in (1, 64, 65536):
                payload = os.urandom(size)
                await a.send(payload)
                assert await recv_binary(b) == payload
                payload = os.urandom(size)
                await b.send(payload)
                assert await recv_binary(a) == payload
            # Several frames in a row arrive as separate messages, in order.
            burst = [os.urandom(n) for n in (5, 500, 5000, 1, 2)]
            for frame in burst:
                await a.send(frame)
            assert [await recv_binary(b) for _ in burst] == burst
        finally:
            await close_all(a, b)

    run(scenario())


def test_a_third_peer_is_closed_at_once_with_4009_room_full(relay):
    r = relay()

    async def scenario():
        room, a, b = await pair(r)
        try:
            extra = await ws_connect(r.room_url(room))
            assert await close_code(extra) == 4009
            assert extra.close_reason == "room full"
            # The two peers are untouched.
            await a.send(b"still here")
            assert await recv_binary(b) == b"still here"
        finally:
            await close_all(a, b)

    run(scenario())
    r.assert_serving()


def test_a_binary_frame_while_alone_is_refused_and_the_connection_stays_open(relay):
    r = relay()

    async def scenario():
        room = new_id()
        a = await ws_connect(r.room_url(room))
        try:
            assert await recv_event(a) == {"type": "waiting"}
            await a.send(b"anyone?")
            assert await recv_event(a) == {"type": "refused", "reason": "no-peer"}
            b = await ws_connect(r.room_url(room))
            try:
                assert await recv_event(b) == {"type": "peer-joined"}
                assert await recv_event(a) == {"type": "peer-joined"}
                await a.send(b"there you are")
                # The refused frame was not stored: the first frame b sees is the new one.
                assert await recv_binary(b) == b"there you are"
            finally:
                await close_all(b)
        finally:
            await close_all(a)

    run(scenario())


def test_an_oversize_frame_closes_the_sender_with_1009(relay):
    r = relay(max_frame=1024)

    async def scenario():
        _, a, b = await pair(r)
        try:
            await a.send(b"\x01" * 1024)
            assert await recv_binary(b) == b"\x01" * 1024
            await a.send(b"\x02" * 1025)
            assert await close_code(a) == 1009
            # The oversize frame never reaches the other peer.
            event = await recv_event(b)
            assert event == {"type": "peer-left"}
        finally:
            await close_all(a, b)

    run(scenario())
    r.assert_serving()


def test_the_default_frame_limit_is_65536_bytes(relay):
    r = relay()

    async def scenario():
        _, a, b = await pair(r)
        try:
            await a.send(b"\x03" * 65536)
            assert await recv_binary(b) == b"\x03" * 65536
            await a.send(b"\x04" * 65537)
            assert await close_code(a) == 1009
        finally:
            await close_all(a, b)

    run(scenario())


def test_a_text_frame_from_a_peer_closes_it_with_1003(relay):
    r = relay()

    async def scenario():
        _, a, b = await pair(r)
        try:
            await a.send('{"type": "hello"}')
            assert await close_code(a) == 1003
            assert await recv_event(b) == {"type": "peer-left"}
            assert await close_code(b) == 1000
        finally:
            await close_all(a, b)

    run(scenario())
    r.assert_serving()


def test_an_idle_room_is_closed_with_4000(relay):
    r = relay(room_idle=2)

    async def scenario():
        _, a, b = await pair(r)
        try:
            # Traffic keeps the room open past the idle time...
            for _ in range(3):
                await asyncio.sleep(0.8)
                await a.send(b"tick")
                assert await recv_binary(b) == b"tick"
            # ...and silence closes it.
            start = time.monotonic()
            codes = await asyncio.gather(close_code(a, 5), close_code(b, 5))
            elapsed = time.monotonic() - start
            assert codes == [4000, 4000]
            assert 1.5 <= elapsed <= 4.0, f"closed {elapsed:.2f} s after the last frame"
        finally:
            await close_all(a, b)

    run(scenario())
    assert metric(r.api().metrics(), "itsme_relay_rejections_total", reason="idle") >= 1
    assert eventually_metric(r.api(), "itsme_relay_rooms_open", 0) == 0


def test_a_lone_peer_in_an_idle_room_is_closed_with_4000(relay):
    r = relay(room_idle=2)

    async def scenario():
        a = await ws_connect(r.room_url(new_id()))
        try:
            assert await recv_event(a) == {"type": "waiting"}
            start = time.monotonic()
            assert await close_code(a, 5) == 4000
            assert time.monotonic() - start <= 4.0
        finally:
            await close_all(a)

    run(scenario())


def test_when_a_peer_leaves_the_other_gets_peer_left_then_close_1000(relay):
    r = relay()

    async def scenario():
        room, a, b = await pair(r)
        try:
            await b.close()
            assert await recv_event(a) == {"type": "peer-left"}
            assert await close_code(a) == 1000
        finally:
            await close_all(a, b)
        return room

    room = run(scenario())

    async def reuse():
        # The room ended: its ID starts a new, empty room.
        _, c, d = await pair(r, room)
        try:
            await d.send(b"again")
            assert await recv_binary(c) == b"again"
        finally:
            await close_all(c, d)

    run(reuse())


def test_a_room_id_is_free_again_after_the_last_peer_leaves(relay):
    r = relay()

    async def scenario():
        room = new_id()
        a = await ws_connect(r.room_url(room))
        assert await recv_event(a) == {"type": "waiting"}
        await a.close()
        await asyncio.sleep(0.2)
        b = await ws_connect(r.room_url(room))
        try:
            assert await recv_event(b) == {"type": "waiting"}
        finally:
            await close_all(b)

    run(scenario())


def test_rooms_are_independent(relay):
    r = relay()

    async def scenario():
        _, a1, b1 = await pair(r)
        _, a2, b2 = await pair(r)
        try:
            await a1.send(b"room one")
            await a2.send(b"room two")
            assert await recv_binary(b1) == b"room one"
            assert await recv_binary(b2) == b"room two"
        finally:
            await close_all(a1, b1, a2, b2)

    run(scenario())


def test_a_plain_get_on_a_room_path_answers_426(relay):
    r = relay()
    response = r.api().request("GET", f"/v1/rooms/{new_id()}")
    assert response.status_code == 426, response.text
    assert "websocket" in response.headers.get("upgrade", "").lower()


@pytest.mark.parametrize("bad_id", ["ABCDEF0123456789ABCDEF0123456789", "0" * 31, "z" * 32])
def test_a_malformed_room_id_is_refused_with_400(relay, bad_id):
    r = relay()

    async def scenario():
        with pytest.raises(HANDSHAKE_REFUSALS) as refused:
            ws = await ws_connect(r.room_url(bad_id))
            await close_all(ws)
        assert refusal_status(refused.value) == 400

    run(scenario())
    r.assert_serving()


def test_a_fragmented_binary_message_is_forwarded_as_one_message(relay):
    r = relay()

    async def scenario():
        _, a, b = await pair(r)
        try:
            parts = [os.urandom(1000), os.urandom(1), os.urandom(3000)]
            await a.send(parts)  # one message in three frames
            assert await recv_binary(b) == b"".join(parts)
            await a.send(b"next")
            assert await recv_binary(b) == b"next"
        finally:
            await close_all(a, b)

    run(scenario())


def test_a_fragmented_message_over_max_frame_closes_with_1009(relay):
    r = relay(max_frame=1024)

    async def scenario():
        _, a, b = await pair(r)
        try:
            await a.send([b"\x05" * 600, b"\x06" * 600])  # 1,200 bytes in two frames of 600
            assert await close_code(a) == 1009
            assert await recv_event(b) == {"type": "peer-left"}
        finally:
            await close_all(a, b)

    run(scenario())
    r.assert_serving()


# -- keep-alive: a peer's ping is activity, answered, not forwarded ----------------------


async def abort_all(*peers):
    for peer in peers:
        await peer.aclose()


def test_pings_keep_a_room_open_past_the_idle_limit_and_are_not_forwarded(relay):
    r = relay(room_idle=2)
    keep_alive = 6.0  # three times the idle limit

    async def pinging_pair():
        # a pings every 0.5 s; b says nothing.
        _, a, b = await raw_pair(r)
        try:
            start, n = time.monotonic(), 0
            while time.monotonic() - start < keep_alive:
                payload = b"keep-alive %d" % n
                await a.ping(payload)
                # RFC 6455 5.5.3: a pong with the ping's payload.
                assert await a.recv() == (OP_PONG, payload)
                n += 1
                await asyncio.sleep(0.5)
            # b received nothing meanwhile (no ping, no pong, no close): the
            # first frame it gets is this one.
            await a.send_binary(b"still open")
            assert await b.recv() == (OP_BINARY, b"still open")
            # Then silence closes the room like any other.
            start = time.monotonic()
            codes = await asyncio.gather(a.close_code(5), b.close_code(5))
            assert codes == [4000, 4000]
            assert time.monotonic() - start <= 4.0
        finally:
            await abort_all(a, b)

    async def pinging_alone():
        # A peer waiting alone keeps its room by pinging too; the second
        # peer then joins it.
        room = new_id()
        a = await RawPeer.connect(r, room)
        try:
            assert await a.recv_event() == {"type": "waiting"}
            start = time.monotonic()
            while time.monotonic() - start < keep_alive:
                await a.ping(b"")
                assert await a.recv() == (OP_PONG, b"")
                await asyncio.sleep(0.5)
            b = await RawPeer.connect(r, room)
            try:
                assert await b.recv_event() == {"type": "peer-joined"}
                assert await a.recv_event() == {"type": "peer-joined"}
            finally:
                await abort_all(b)
        finally:
            await abort_all(a)

    async def silent_pair():
        # Neither peer pings (c sends unsolicited pongs, which are not
        # activity): closed with 4000 at the idle limit.
        _, c, d = await raw_pair(r)

        async def pongs():
            while True:
                await c.send(ws_frame(OP_PONG, b"not a ping"))
                await asyncio.sleep(0.5)

        sender = asyncio.create_task(pongs())
        try:
            start = time.monotonic()
            codes = await asyncio.gather(c.close_code(5), d.close_code(5))
            assert codes == [4000, 4000]
            assert 1.5 <= time.monotonic() - start <= 4.0
        finally:
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
            await abort_all(c, d)

    async def scenario():
        await asyncio.gather(pinging_pair(), pinging_alone(), silent_pair())

    run(scenario())
    samples = r.api().metrics()
    # Only the one binary message was forwarded; the pings were not.
    assert metric(samples, "itsme_relay_frames_forwarded_total") == 1
    assert metric(samples, "itsme_relay_rejections_total", reason="idle") >= 2
    r.assert_serving()


def test_the_relay_pings_each_connection_once_per_interval_spread_over_it(relay):
    # docs/PROTOCOL.md 15.3, Keep-alive: every connection is pinged once per
    # --ping-interval, from one interval after it opened, a slice of the
    # connections at a time (not all at once, which would stall a busy
    # relay); one that has not answered by the next ping is closed with 1001.
    interval = 1.0
    r = relay(ping_interval=interval, room_idle=60)

    async def answering(peer, pings, stop):
        # Answers every ping with its payload and records when each came,
        # until `stop`; returns the first other frame, if any.
        while time.monotonic() < stop:
            try:
                opcode, payload = await peer.recv(stop - time.monotonic())
            except asyncio.TimeoutError:
                return None
            if opcode != OP_PING:
                return opcode, payload
            pings.append(time.monotonic())
            await peer.send(ws_frame(OP_PONG, payload))
        return None

    async def scenario():
        peers = []
        for _ in range(15):
            _, a, b = await raw_pair(r)
            peers += [a, b]
        _, talker, silent = await raw_pair(r)
        try:
            opened = time.monotonic()
            stop = opened + 3.6 * interval
            pings = [[] for _ in peers]
            answered = asyncio.gather(*(answering(p, got, stop) for p, got in zip(peers, pings)))
            # The silent peer's partner answers, and sees it leave.
            left = asyncio.ensure_future(answering(talker, [], stop))
            # The silent peer answers nothing: pinged once, closed at its next ping.
            opcode, _ = await silent.recv(3 * interval)
            assert opcode == OP_PING
            first = time.monotonic()
            assert first - opened >= 0.8 * interval
            assert await silent.close_code(2 * interval) == 1001
            assert 0.6 * interval <= time.monotonic() - first <= 1.8 * interval
            assert await left == (OP_TEXT, b'{"type":"peer-left"}')
            ended = await answered
            assert ended == [None] * len(peers), ended
            for got in pings:
                # From an interval on, two or three pings in 3.6 intervals,
                # an interval apart.
                assert 2 <= len(got) <= 3, pings
                assert got[0] - opened >= 0.5 * interval, pings
                assert all(0.6 * interval <= b - a <= 1.4 * interval for a, b in zip(got, got[1:])), pings
            # Spread: the first pings of 30 connections come at many moments
            # of the interval, not in one burst.
            firsts = sorted(got[0] for got in pings)
            assert firsts[-1] - firsts[0] >= 0.5 * interval, firsts
        finally:
            for peer in peers + [talker, silent]:
                peer.abort()

    run(scenario())
    r.assert_serving()


def test_a_ping_is_answered_through_a_library_client_too(relay):
    # The same through the websockets package (whose own keep-alive pings
    # a room client may use): the pong arrives, the other peer sees nothing.
    r = relay(room_idle=2)

    async def scenario():
        _, a, b = await pair(r)
        try:
            for _ in range(6):
                await asyncio.wait_for(await a.ping(b"are you there"), 3)
                await asyncio.sleep(0.5)
            await a.send(b"after the pings")
            assert await recv_binary(b) == b"after the pings"
        finally:
            await close_all(a, b)

    run(scenario())


# -- order: a peer's last frames arrive before its peer-left -----------------------------


@pytest.mark.parametrize("leaving", ["close-and-wait", "close-and-drop", "eof"])
def test_frames_sent_just_before_leaving_arrive_in_order_before_peer_left(relay, leaving):
    # A side sends its decision and leaves at once; the other must get every
    # frame, in order, then peer-left. The frames and the leaving go out in
    # one write: a close frame whose answer is awaited, a close frame and the
    # socket closed at once, or no close frame and the TCP stream ended.
    r = relay()
    rng = random.Random(f"order-{leaving}")
    forwarded = 0

    async def scenario():
        nonlocal forwarded
        for round in range(60):
            _, a, b = await raw_pair(r)
            try:
                frames = [os.urandom(rng.choice((1, 2, 33, 200, 1500, 65536))) for _ in range(rng.randint(1, 24))]
                data = b"".join(ws_frame(OP_BINARY, frame) for frame in frames)
                if leaving != "eof":
                    data += ws_close_frame(1000)
                await a.send(data)
                if leaving == "close-and-wait":
                    assert await a.close_code() == 1000
                elif leaving == "close-and-drop":
                    a.abort()
                else:
                    a.writer.write_eof()
                # Every few rounds b reads late, so that the relay's writes to
                # it are held back by TCP while a is already gone.
                if round % 5 == 4:
                    await asyncio.sleep(0.2)
                for i, frame in enumerate(frames):
                    opcode, payload = await b.recv(5)
                    assert (opcode, len(payload)) == (OP_BINARY, len(frame)), f"round {round}, frame {i} of {len(frames)}"
                    assert payload == frame, f"round {round}, frame {i} of {len(frames)}"
                assert await b.recv_event() == {"type": "peer-left"}
                assert await b.close_code() == 1000
                forwarded += len(frames)
            finally:
                await abort_all(a, b)

    run(scenario())
    assert eventually_metric(r.api(), "itsme_relay_frames_forwarded_total", forwarded) == forwarded
    r.assert_serving()


# -- a zero-length binary message: forwarded like any other -------------------------------


def test_a_zero_length_binary_message_is_forwarded_as_one(relay):
    r = relay(room_idle=2)

    async def scenario():
        room = new_id()
        a = await RawPeer.connect(r, room)
        try:
            assert await a.recv_event() == {"type": "waiting"}
            # Alone: refused like any other frame.
            await a.send_binary(b"")
            assert await a.recv_event() == {"type": "refused", "reason": "no-peer"}
            b = await RawPeer.connect(r, room)
            try:
                assert await b.recv_event() == {"type": "peer-joined"}
                assert await a.recv_event() == {"type": "peer-joined"}
                # Both ways, as one empty message.
                await a.send_binary(b"")
                assert await b.recv() == (OP_BINARY, b"")
                await b.send_binary(b"")
                assert await a.recv() == (OP_BINARY, b"")
                # An empty message in two empty fragments is one empty message.
                await a.send(ws_frame(OP_BINARY, b"", fin=False) + ws_frame(OP_CONTINUATION, b""))
                assert await b.recv() == (OP_BINARY, b"")
                # Between others, in order, nothing merged or dropped.
                await a.send(b"".join(ws_frame(OP_BINARY, m) for m in (b"x", b"", b"", b"yz")))
                assert [await b.recv() for _ in range(4)] == [(OP_BINARY, m) for m in (b"x", b"", b"", b"yz")]
                # It is activity: empty messages every 0.5 s keep the room
                # past the 2 s idle limit.
                start = time.monotonic()
                while time.monotonic() - start < 3.5:
                    await a.send_binary(b"")
                    assert await b.recv() == (OP_BINARY, b"")
                    await asyncio.sleep(0.5)
                # The last message before leaving, empty, still comes before peer-left.
                await a.send(ws_frame(OP_BINARY, b"") + ws_close_frame(1000))
                assert await b.recv() == (OP_BINARY, b"")
                assert await b.recv_event() == {"type": "peer-left"}
                assert await b.close_code() == 1000
            finally:
                await abort_all(b)
        finally:
            await abort_all(a)

    run(scenario())
    samples = r.api().metrics()
    assert metric(samples, "itsme_relay_rejections_total", reason="no-peer") == 1
    r.assert_serving()


# -- back-pressure: a peer that does not read holds its sender back ----------------------


def resident_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/PID/status")


def test_a_peer_that_does_not_read_holds_its_sender_back_and_loses_nothing(relay):
    # b reads nothing while a sends up to 256 MiB of 64 KiB messages: once
    # b's connection is full the relay stops reading a, so a's writes stall
    # long before the end (kernel buffers on both sides hold a few dozen MiB
    # at most), and the relay's memory does not take the rest in. Then b
    # reads: every message a sent arrives, in order, none lost.
    r = relay()
    size, most = 65536, 4096

    async def scenario():
        _, a, b = await raw_pair(r)
        try:
            before = resident_kib(r.proc.pid)
            sent = 0
            stalled = None
            while sent < most:
                a.writer.write(numbered_frame(sent, size))
                sent += 1
                drained = asyncio.ensure_future(a.writer.drain())
                try:
                    await asyncio.wait_for(asyncio.shield(drained), 2)
                except asyncio.TimeoutError:
                    stalled = drained
                    break
            grown = resident_kib(r.proc.pid) - before
            assert stalled, f"all {most} messages ({most * size >> 20} MiB) went out to a peer that reads nothing"
            assert grown < 96 * 1024, f"the relay grew by {grown >> 10} MiB holding a peer's messages"
            for n in range(sent):
                opcode, payload = await b.recv(10)
                assert (opcode, len(payload)) == (OP_BINARY, size), f"message {n} of {sent}"
                assert int.from_bytes(payload[:4], "big") == n, f"message {n} of {sent} out of order"
            await stalled
            await a.send_binary(b"after the flood")
            assert await b.recv(5) == (OP_BINARY, b"after the flood")
            return sent
        finally:
            await abort_all(a, b)

    sent = run(scenario())
    assert eventually_metric(r.api(), "itsme_relay_frames_forwarded_total", sent + 1) == sent + 1
    r.assert_serving()
