"""Group rooms (PROTOCOL.md 15.9): up to --max-group peers, each with a slot;
every binary message goes to every other peer behind its sender's slot."""

import asyncio
import base64
import json
import os
import random
import signal
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
    refusal_status,
    retry_after,
    run,
    ws_close_frame,
    ws_connect,
    ws_frame,
)

GROUPS_OPEN = "itsme_relay_group_rooms_open"
FORWARDED = "itsme_relay_frames_forwarded_total"
REJECTIONS = "itsme_relay_rejections_total"


def group_url(relay, group_id: str) -> str:
    return f"{relay.ws_base}/v1/groups/{group_id}"


def slotted(slot: int, payload: bytes) -> bytes:
    """A forwarded message: the sender's slot, 2 bytes big-endian, then the payload."""
    return slot.to_bytes(2, "big") + payload


async def close_all(*connections):
    for ws in connections:
        try:
            await ws.close()
        except Exception:
            pass


async def join(relay, group_id: str, slot: int, present: list, **connect_options):
    """A peer that joins `group_id`, checks its `joined` event, and the
    `peer-joined` that each peer of `present` gets; returns it."""
    ws = await ws_connect(group_url(relay, group_id), **connect_options)
    assert await recv_event(ws) == {"type": "joined", "slot": slot, "peers": sorted(present_slots(present))}
    for _, other in present:
        assert await recv_event(other) == {"type": "peer-joined", "slot": slot}
    return ws


def present_slots(present: list) -> list:
    return [slot for slot, _ in present]


async def group(relay, size: int, group_id: str = None):
    """`size` peers in one group room, past their join events: [(slot, ws)]."""
    group_id = group_id or new_id()
    peers = []
    for slot in range(1, size + 1):
        peers.append((slot, await join(relay, group_id, slot, peers)))
    return group_id, peers


async def nothing_arrives(ws, timeout: float = 0.3) -> None:
    try:
        message = await asyncio.wait_for(ws.recv(), timeout)
    except asyncio.TimeoutError:
        return
    pytest.fail(f"expected nothing, got {message!r:.200}")


class RawGroupPeer(RawPeer):
    """A group room connection on a bare TCP socket (see RawPeer)."""

    @classmethod
    async def connect(cls, relay, group_id: str) -> "RawGroupPeer":
        reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET /v1/groups/{group_id} HTTP/1.1\r\nHost: 127.0.0.1:{relay.port}\r\n"
                f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                f"Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 101"), head
        return cls(reader, writer)


async def raw_group(relay, size: int, group_id: str = None):
    """`size` raw peers in one group room, past their join events: [(slot, peer)]."""
    group_id = group_id or new_id()
    peers = []
    for slot in range(1, size + 1):
        peer = await RawGroupPeer.connect(relay, group_id)
        assert await peer.recv_event() == {"type": "joined", "slot": slot, "peers": present_slots(peers)}
        for _, other in peers:
            assert await other.recv_event() == {"type": "peer-joined", "slot": slot}
        peers.append((slot, peer))
    return group_id, peers


async def abort_all(*peers):
    for peer in peers:
        await peer.aclose()


# -- slots and events --------------------------------------------------------------------


def test_five_peers_get_increasing_slots_and_every_join_and_leave_is_told(relay):
    r = relay()

    async def scenario():
        group_id, peers = await group(r, 5)
        try:
            # Slot 3 leaves: each other peer is told, and only that.
            await peers[2][1].close()
            rest = peers[:2] + peers[3:]
            for _, ws in rest:
                assert await recv_event(ws) == {"type": "peer-left", "slot": 3}
            # A slot is never given again while the room exists: the next is 6,
            # and it is told who is there.
            sixth = await join(r, group_id, 6, rest)
            rest.append((6, sixth))
            # The first leaves by ending its TCP stream without a close.
            peers[0][1].transport.abort()
            for _, ws in rest[1:]:
                assert await recv_event(ws) == {"type": "peer-left", "slot": 1}
            for _, ws in rest[1:]:
                await nothing_arrives(ws, 0.2)
            for _, ws in rest[1:]:
                await ws.close()
            await asyncio.sleep(0.2)
            # The room ended with its last peer: the ID starts a new one, at slot 1.
            again = await join(r, group_id, 1, [])
            await again.close()
        finally:
            await close_all(*(ws for _, ws in peers))

    run(scenario())
    r.assert_serving()


def test_a_message_reaches_every_other_peer_once_behind_the_senders_slot(relay):
    r = relay(max_frame=4096)
    api = r.api()

    async def scenario():
        _, peers = await group(r, 4)
        try:
            before = metric(api.metrics(), FORWARDED)
            for sender_slot, sender in peers:
                for payload in (b"", b"x", os.urandom(100), os.urandom(4096)):
                    await sender.send(payload)
                    for slot, ws in peers:
                        if slot != sender_slot:
                            assert await recv_binary(ws) == slotted(sender_slot, payload)
            # Nobody got a copy twice, nor its own.
            for _, ws in peers:
                await nothing_arrives(ws, 0.2)
            # A fragmented message goes as one, behind the slot.
            parts = [os.urandom(1000), os.urandom(1), os.urandom(3000)]
            await peers[1][1].send(parts)
            for slot, ws in peers:
                if slot != 2:
                    assert await recv_binary(ws) == slotted(2, b"".join(parts))
            # One forwarded message per recipient.
            assert eventually_metric(api, FORWARDED, before + 4 * 4 * 3 + 3) == before + 4 * 4 * 3 + 3
        finally:
            await close_all(*(ws for _, ws in peers))

    run(scenario())


def test_two_senders_at_once_reach_every_other_peer_in_order(relay):
    r = relay()
    count = 200

    async def scenario():
        _, peers = await group(r, 4)
        senders = peers[:2]
        try:

            async def send_all(slot, ws):
                rng = random.Random(slot)
                for n in range(count):
                    await ws.send(n.to_bytes(4, "big") + os.urandom(rng.choice((0, 10, 1000, 20000))))
                    if rng.random() < 0.2:
                        await asyncio.sleep(0)

            async def receive_all(slot, ws):
                # Each of the other senders' messages, in their order.
                expected = {s: 0 for s, _ in senders if s != slot}
                while any(n < count for n in expected.values()):
                    message = await recv_binary(ws, 10)
                    sender = int.from_bytes(message[:2], "big")
                    assert sender in expected, f"peer {slot} got a message from slot {sender}"
                    n = int.from_bytes(message[2:6], "big")
                    assert n == expected[sender], f"peer {slot}: message {n} of slot {sender} came when {expected[sender]} was due"
                    expected[sender] += 1
                return expected

            received = await asyncio.gather(
                *(send_all(slot, ws) for slot, ws in senders), *(receive_all(slot, ws) for slot, ws in peers)
            )
            assert received[2:] == [{2: count}, {1: count}, {1: count, 2: count}, {1: count, 2: count}]
            for _, ws in peers:
                await nothing_arrives(ws, 0.2)
        finally:
            await close_all(*(ws for _, ws in peers))

    run(scenario())
    assert metric(r.api().metrics(), FORWARDED) == 2 * count * 3


@pytest.mark.parametrize("leaving", ["close-and-wait", "close-and-drop", "eof"])
def test_a_peers_last_messages_arrive_before_its_peer_left(relay, leaving):
    # As in a two-party room: the messages and the leaving go out in one write.
    r = relay()
    rng = random.Random(f"group-order-{leaving}")

    async def scenario():
        for round in range(20):
            _, peers = await raw_group(r, 3)
            (_, a), (_, b), (_, c) = peers
            try:
                frames = [os.urandom(rng.choice((0, 1, 33, 1500, 65536))) for _ in range(rng.randint(1, 16))]
                data = b"".join(ws_frame(OP_BINARY, frame) for frame in frames)
                if leaving != "eof":
                    data += ws_close_frame(1000)
                await b.send(data)
                if leaving == "close-and-wait":
                    assert await b.close_code() == 1000
                elif leaving == "close-and-drop":
                    b.abort()
                else:
                    b.writer.write_eof()
                if round % 5 == 4:
                    await asyncio.sleep(0.2)
                for receiver in (a, c):
                    for i, frame in enumerate(frames):
                        assert await receiver.recv(5) == (OP_BINARY, slotted(2, frame)), f"round {round}, frame {i}"
                    assert await receiver.recv_event() == {"type": "peer-left", "slot": 2}
                # The others stay, and still meet.
                await a.send_binary(b"still here")
                assert await c.recv() == (OP_BINARY, slotted(1, b"still here"))
            finally:
                await abort_all(a, b, c)

    run(scenario())
    r.assert_serving()


# -- limits ------------------------------------------------------------------------------


def test_a_peer_beyond_max_group_or_max_group_joins_is_closed_with_4009(relay):
    r = relay(max_group=3, max_group_joins=5)
    api = r.api()

    async def turned_away(group_id, present):
        extra = await ws_connect(group_url(r, group_id))
        assert await close_code(extra) == 4009
        assert extra.close_reason == "room full"
        # The others heard nothing of it.
        for _, ws in present:
            await nothing_arrives(ws, 0.2)

    async def scenario():
        group_id, peers = await group(r, 3)
        try:
            full = metric(api.metrics(), REJECTIONS, reason="room-full")
            # A fourth at once: beyond --max-group.
            await turned_away(group_id, peers)
            # Room again after a peer leaves: slots 4 and 5 are the last.
            for leaving, slot in ((0, 4), (0, 5)):
                _, gone = peers.pop(leaving)
                await gone.close()
                for _, ws in peers:
                    assert (await recv_event(ws))["type"] == "peer-left"
                peers.append((slot, await join(r, group_id, slot, peers)))
            # Five joins: a sixth is refused although a place is free.
            _, gone = peers.pop(0)
            await gone.close()
            for _, ws in peers:
                assert (await recv_event(ws))["type"] == "peer-left"
            await turned_away(group_id, peers)
            assert metric(api.metrics(), REJECTIONS, reason="room-full") == full + 2
            # The peers in it are untouched.
            await peers[0][1].send(b"still on")
            assert await recv_binary(peers[1][1]) == slotted(peers[0][0], b"still on")
            # Once all have left, the ID is a new room with joins to give.
            for _, ws in peers:
                await ws.close()
            peers.clear()
            await asyncio.sleep(0.2)
            _, fresh = await group(r, 3, group_id)
            peers.extend(fresh)
        finally:
            await close_all(*(ws for _, ws in peers))

    run(scenario())
    r.assert_serving()


def test_the_51st_peer_is_closed_with_4009_by_default(relay):
    r = relay()

    async def scenario():
        group_id = new_id()
        peers = []
        try:
            for slot in range(1, 51):
                # Unbounded queues: a client that stops reading once its queue
                # holds 16 messages would not see the relay answer its close
                # while the others' peer-left events wait in it.
                ws = await ws_connect(group_url(r, group_id), max_queue=None)
                assert await recv_event(ws) == {"type": "joined", "slot": slot, "peers": list(range(1, slot))}
                peers.append(ws)
            # Each peer was told of every later one.
            for slot, ws in enumerate(peers, start=1):
                told = [await recv_event(ws) for _ in range(50 - slot)]
                assert told == [{"type": "peer-joined", "slot": s} for s in range(slot + 1, 51)]
            extra = await ws_connect(group_url(r, group_id))
            assert await close_code(extra) == 4009
            await asyncio.gather(*(nothing_arrives(ws, 0.2) for ws in peers))
        finally:
            await close_all(*peers)

    run(scenario())
    r.assert_serving()


# -- the join rate -----------------------------------------------------------------------


async def refused_join(relay, group_id: str, **connect_options):
    """A join refused before the upgrade: the relay's HTTP response."""
    with pytest.raises(HANDSHAKE_REFUSALS) as refused:
        ws = await ws_connect(group_url(relay, group_id), **connect_options)
        await close_all(ws)
    return refused.value.response


def assert_rate_limited(response, most: int) -> int:
    """`response` is `429 rate-limited` (15.1) with a Retry-After of 1 to
    `most` seconds, as the HTTP routes answer it; returns the Retry-After."""
    assert response.status_code == 429, f"expected 429, got {response.status_code}: {response.body[:300]!r}"
    assert response.headers.get("content-type") == "application/json"
    body = json.loads(response.body)
    assert body.get("error") == "rate-limited", body
    message = body.get("message")
    assert isinstance(message, str) and message and "\n" not in message, body
    wait = retry_after(response.headers)
    assert 1 <= wait <= most, f"Retry-After {wait} s, expected 1 to {most}"
    return wait


def test_a_join_beyond_the_group_join_rate_is_refused_with_429_and_takes_no_slot(relay):
    # Four joins in the room's life: the refused one must not be one of them.
    r = relay(group_join_rate=3, max_group_joins=4)
    api = r.api()

    async def scenario():
        group_id, peers = await group(r, 3)
        try:
            samples = api.metrics()
            limited = metric(samples, REJECTIONS, reason="rate-limited")
            full = metric(samples, REJECTIONS, reason="room-full")
            # The fourth join of the minute from this address; one comes back
            # every 20 s.
            assert_rate_limited(await refused_join(r, group_id), 20)
            await asyncio.gather(*(nothing_arrives(ws, 0.2) for _, ws in peers))
            samples = api.metrics()
            assert metric(samples, REJECTIONS, reason="rate-limited") == limited + 1
            assert metric(samples, REJECTIONS, reason="room-full") == full
            # Another address has a budget of its own: its join gets slot 4,
            # the room's last join, so the refused one took neither a slot
            # nor a join.
            peers.append((4, await join(r, group_id, 4, peers, local_addr=("127.0.0.2", 0))))
            # This address is still refused (before the room's own limits).
            assert_rate_limited(await refused_join(r, group_id), 20)
            await asyncio.gather(*(nothing_arrives(ws, 0.2) for _, ws in peers))
        finally:
            await close_all(*(ws for _, ws in peers))

    run(scenario())
    r.assert_serving()


def test_the_default_group_join_rate_is_60_a_minute_refilled_continuously(relay):
    r = relay(group_join_rate=None)

    async def scenario():
        group_id, peers = await group(r, 2)
        try:
            # 58 joins more, at once, each to a room of its own: 60 this minute.
            others = await asyncio.gather(*(RawGroupPeer.connect(r, new_id()) for _ in range(58)))
            await abort_all(*others)
            wait = assert_rate_limited(await refused_join(r, group_id), 2)
            await asyncio.gather(*(nothing_arrives(ws, 0.1) for _, ws in peers))
            # One join comes back each second: one, not a burst.
            await asyncio.sleep(wait + 0.05)
            peers.append((3, await join(r, group_id, 3, peers)))
            assert_rate_limited(await refused_join(r, group_id), 2)
        finally:
            await close_all(*(ws for _, ws in peers))

    run(scenario())


def test_two_party_rooms_are_not_limited_by_the_group_join_rate(relay):
    r = relay(group_join_rate=1)

    async def scenario():
        alone = await ws_connect(group_url(r, new_id()))
        connections = [alone]
        try:
            assert await recv_event(alone) == {"type": "joined", "slot": 1, "peers": []}
            assert_rate_limited(await refused_join(r, new_id()), 60)
            for _ in range(3):
                _, first, second = await pair(r)
                connections += [first, second]
                await first.send(b"hello")
                assert await recv_binary(second) == b"hello"
        finally:
            await close_all(*connections)

    run(scenario())


def test_the_group_join_rate_counts_the_forwarded_address_only_behind_a_trusted_proxy(relay):
    def forwarded(address: str) -> dict:
        return {"additional_headers": {"X-Forwarded-For": address}}

    async def scenario(r, trusted: bool):
        first = await ws_connect(group_url(r, new_id()), **forwarded("10.0.0.1"))
        connections = [first]
        try:
            assert (await recv_event(first))["slot"] == 1
            assert_rate_limited(await refused_join(r, new_id(), **forwarded("10.0.0.1")), 60)
            if trusted:
                # Another client behind the proxy: a budget of its own.
                other = await ws_connect(group_url(r, new_id()), **forwarded("10.0.0.2"))
                connections.append(other)
                assert (await recv_event(other))["slot"] == 1
            else:
                # Not a proxy: its X-Forwarded-For is not believed.
                assert_rate_limited(await refused_join(r, new_id(), **forwarded("10.0.0.2")), 60)
        finally:
            await close_all(*connections)

    run(scenario(relay(group_join_rate=1, trusted_proxy="127.0.0.1"), True))
    run(scenario(relay(group_join_rate=1), False))


@pytest.mark.parametrize("value", ["0", "1000001", "-1", "many", "2.5"])
def test_the_group_join_rate_is_a_whole_number_from_1_to_1000000(value):
    from operatortest import run_relay

    number = value.lstrip("-").isdigit()
    for args, env, said in (
        ([f"--group-join-rate={value}"], {},
         "--group-join-rate must be 1 to 1000000" if number else f"'{value}' is invalid for '--group-join-rate"),
        ([], {"ITSME_RELAY_GROUP_JOIN_RATE": value},
         "--group-join-rate must be 1 to 1000000" if number else f"ITSME_RELAY_GROUP_JOIN_RATE={value} is not a valid value"),
    ):
        result = run_relay(["--port", "0", "--database", ":memory:"] + args, env)
        assert result.code != 0, f"{value!r} was accepted"
        assert "listening" not in result.stdout
        assert said in result.stderr, result.stderr
        assert "Fatal" not in result.stderr and "Stack" not in result.stderr


def test_a_binary_message_while_alone_is_refused_and_not_kept(relay):
    r = relay()

    async def scenario():
        group_id = new_id()
        a = await ws_connect(group_url(r, group_id))
        try:
            assert await recv_event(a) == {"type": "joined", "slot": 1, "peers": []}
            await a.send(b"anyone?")
            assert await recv_event(a) == {"type": "refused", "reason": "no-peer"}
            b = await join(r, group_id, 2, [(1, a)])
            try:
                await a.send(b"there you are")
                # The refused message was not kept: the first b gets is the new one.
                assert await recv_binary(b) == slotted(1, b"there you are")
                # Alone again once b leaves.
                await b.close()
                assert await recv_event(a) == {"type": "peer-left", "slot": 2}
                await a.send(b"gone?")
                assert await recv_event(a) == {"type": "refused", "reason": "no-peer"}
            finally:
                await close_all(b)
        finally:
            await close_all(a)

    run(scenario())
    assert metric(r.api().metrics(), REJECTIONS, reason="no-peer") == 2


def test_an_oversize_message_closes_the_sender_with_1009(relay):
    r = relay(max_frame=1024)

    async def scenario():
        _, peers = await group(r, 3)
        (_, a), (_, b), (_, c) = peers
        try:
            await a.send(b"\x01" * 1024)
            assert await recv_binary(b) == slotted(1, b"\x01" * 1024)
            assert await recv_binary(c) == slotted(1, b"\x01" * 1024)
            await a.send(b"\x02" * 1025)
            assert await close_code(a) == 1009
            # Never forwarded: the others see a leave.
            assert await recv_event(b) == {"type": "peer-left", "slot": 1}
            assert await recv_event(c) == {"type": "peer-left", "slot": 1}
            # A fragmented one over the limit too.
            await b.send([b"\x05" * 600, b"\x06" * 600])
            assert await close_code(b) == 1009
            assert await recv_event(c) == {"type": "peer-left", "slot": 2}
        finally:
            await close_all(a, b, c)

    run(scenario())
    r.assert_serving()


def test_a_text_frame_from_a_peer_closes_it_with_1003(relay):
    r = relay()

    async def scenario():
        _, peers = await group(r, 3)
        (_, a), (_, b), (_, c) = peers
        try:
            await b.send('{"type": "hello"}')
            assert await close_code(b) == 1003
            assert await recv_event(a) == {"type": "peer-left", "slot": 2}
            assert await recv_event(c) == {"type": "peer-left", "slot": 2}
            # The room goes on without it.
            await c.send(b"go on")
            assert await recv_binary(a) == slotted(3, b"go on")
        finally:
            await close_all(a, b, c)

    run(scenario())
    r.assert_serving()


def test_a_frame_that_breaks_the_rules_fails_the_connection_with_1002(relay):
    r = relay()

    async def scenario():
        _, peers = await raw_group(r, 2)
        (_, a), (_, b) = peers
        try:
            # A continuation with no message to continue.
            await a.send(ws_frame(OP_BINARY, b"whole") + ws_frame(OP_CONTINUATION, b"of nothing"))
            assert await b.recv() == (OP_BINARY, slotted(1, b"whole"))
            assert await a.close_code() == 1002
            assert await b.recv_event() == {"type": "peer-left", "slot": 1}
        finally:
            await abort_all(a, b)

    run(scenario())
    r.assert_serving()


# -- keep-alive and idle -----------------------------------------------------------------


def test_an_idle_group_room_is_closed_with_4000(relay):
    r = relay(room_idle=2)

    async def scenario():
        _, peers = await group(r, 3)
        sockets = [ws for _, ws in peers]
        try:
            # Traffic keeps the room open past the idle time...
            for _ in range(3):
                await asyncio.sleep(0.8)
                await sockets[2].send(b"tick")
                for ws in sockets[:2]:
                    assert await recv_binary(ws) == slotted(3, b"tick")
            # ...and silence closes it, every connection with 4000.
            start = time.monotonic()
            codes = await asyncio.gather(*(close_code(ws, 5) for ws in sockets))
            assert codes == [4000, 4000, 4000]
            assert 1.5 <= time.monotonic() - start <= 4.0
        finally:
            await close_all(*sockets)

    run(scenario())
    samples = r.api().metrics()
    assert metric(samples, REJECTIONS, reason="idle") >= 1
    assert eventually_metric(r.api(), GROUPS_OPEN, 0) == 0


def test_pings_keep_a_group_room_open_are_answered_and_not_forwarded(relay):
    r = relay(room_idle=2)
    keep_alive = 5.0

    async def scenario():
        _, peers = await raw_group(r, 3)
        (_, a), (_, b), (_, c) = peers
        try:
            # a pings every 0.5 s; b and c say nothing.
            start, n = time.monotonic(), 0
            while time.monotonic() - start < keep_alive:
                payload = b"keep-alive %d" % n
                await a.ping(payload)
                assert await a.recv() == (OP_PONG, payload)
                n += 1
                await asyncio.sleep(0.5)
            # b and c received nothing meanwhile: the first frame each gets is this.
            await a.send_binary(b"still open")
            assert await b.recv() == (OP_BINARY, slotted(1, b"still open"))
            assert await c.recv() == (OP_BINARY, slotted(1, b"still open"))
            start = time.monotonic()
            codes = await asyncio.gather(a.close_code(5), b.close_code(5), c.close_code(5))
            assert codes == [4000, 4000, 4000]
            assert time.monotonic() - start <= 4.0
        finally:
            await abort_all(a, b, c)

    async def alone():
        # A lone peer keeps its group room by pinging too.
        group_id = new_id()
        a = await RawGroupPeer.connect(r, group_id)
        try:
            assert await a.recv_event() == {"type": "joined", "slot": 1, "peers": []}
            start = time.monotonic()
            while time.monotonic() - start < keep_alive:
                await a.ping(b"")
                assert await a.recv() == (OP_PONG, b"")
                await asyncio.sleep(0.5)
            b = await RawGroupPeer.connect(r, group_id)
            try:
                assert await b.recv_event() == {"type": "joined", "slot": 2, "peers": [1]}
                assert await a.recv_event() == {"type": "peer-joined", "slot": 2}
            finally:
                await abort_all(b)
        finally:
            await abort_all(a)

    async def both():
        await asyncio.gather(scenario(), alone())

    run(both())
    assert metric(r.api().metrics(), FORWARDED) == 2


def test_the_relay_pings_group_connections(relay):
    r = relay(ping_interval=1, room_idle=60)

    async def scenario():
        _, peers = await raw_group(r, 2)
        (_, a), (_, b) = peers
        try:
            # a answers, b does not: b is closed with 1001 at its next ping.
            opcode, payload = await a.recv(3)
            assert opcode == OP_PING
            await a.send(ws_frame(OP_PONG, payload))
            assert (await b.recv(3))[0] == OP_PING
            assert await b.close_code(3) == 1001
            # a, answering its pings meanwhile, is told b left.
            while True:
                opcode, payload = await a.recv(3)
                if opcode != OP_PING:
                    break
                await a.send(ws_frame(OP_PONG, payload))
            assert (opcode, payload) == (OP_TEXT, b'{"type":"peer-left","slot":2}')
        finally:
            await abort_all(a, b)

    run(scenario())


# -- flow --------------------------------------------------------------------------------


def test_a_peer_that_does_not_read_holds_the_sender_back_and_loses_nothing(relay):
    # c reads nothing while a sends up to 256 MiB of 64 KiB messages and b
    # reads all it gets: once c's connection is full the relay stops reading
    # a, so a's writes stall long before the end. Then c reads: every
    # message arrives, in order, none lost.
    r = relay()
    size, most = 65536, 4096

    async def scenario():
        _, peers = await raw_group(r, 3)
        (_, a), (_, b), (_, c) = peers
        got_b = []

        async def read_b():
            while True:
                opcode, payload = await b.recv(30)
                assert opcode == OP_BINARY
                got_b.append(int.from_bytes(payload[2:6], "big"))

        reader = asyncio.ensure_future(read_b())
        try:
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
            assert stalled, f"all {most} messages went out to a group with a peer that reads nothing"
            # b was held back with a: it got at most what was sent.
            assert len(got_b) < sent
            for n in range(sent):
                opcode, payload = await c.recv(10)
                assert (opcode, len(payload)) == (OP_BINARY, size + 2), f"message {n} of {sent}"
                assert payload[:2] == b"\x00\x01" and int.from_bytes(payload[2:6], "big") == n, f"message {n} of {sent}"
            await stalled
            deadline = time.monotonic() + 10
            while len(got_b) < sent and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert got_b == list(range(sent))
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            await abort_all(a, b, c)

    run(scenario())
    r.assert_serving()


# -- namespaces, paths, metrics, shutdown ------------------------------------------------


def test_a_group_room_and_a_room_with_the_same_id_do_not_meet(relay):
    r = relay()

    async def scenario():
        shared = new_id()
        room_first = await ws_connect(r.room_url(shared))
        assert await recv_event(room_first) == {"type": "waiting"}
        group_first = await ws_connect(group_url(r, shared))
        # The group room is new (slot 1, alone); the room peer still waits.
        assert await recv_event(group_first) == {"type": "joined", "slot": 1, "peers": []}
        await nothing_arrives(room_first, 0.2)
        await group_first.send(b"group?")
        assert await recv_event(group_first) == {"type": "refused", "reason": "no-peer"}
        room_second = await ws_connect(r.room_url(shared))
        assert await recv_event(room_second) == {"type": "peer-joined"}
        assert await recv_event(room_first) == {"type": "peer-joined"}
        group_second = await join(r, shared, 2, [(1, group_first)])
        try:
            await room_first.send(b"room")
            await group_first.send(b"group")
            assert await recv_binary(room_second) == b"room"
            assert await recv_binary(group_second) == slotted(1, b"group")
            for ws in (room_first, group_first):
                await nothing_arrives(ws, 0.2)
            # A room ending leaves the group room alone, and the other way round.
            await room_first.close()
            assert await recv_event(room_second) == {"type": "peer-left"}
            await nothing_arrives(group_first, 0.2)
            await nothing_arrives(group_second, 0.2)
        finally:
            await close_all(room_first, room_second, group_first, group_second)

    run(scenario())


def test_a_plain_get_on_a_group_path_answers_426(relay):
    r = relay()
    response = r.api().request("GET", f"/v1/groups/{new_id()}")
    assert response.status_code == 426, response.text
    assert "websocket" in response.headers.get("upgrade", "").lower()
    response = r.api().request("POST", f"/v1/groups/{new_id()}")
    assert response.status_code == 405


@pytest.mark.parametrize("bad_id", ["ABCDEF0123456789ABCDEF0123456789", "0" * 31, "z" * 32, "0" * 33])
def test_a_malformed_group_id_is_refused_with_400(relay, bad_id):
    r = relay()

    async def scenario():
        with pytest.raises(HANDSHAKE_REFUSALS) as refused:
            ws = await ws_connect(group_url(r, bad_id))
            await close_all(ws)
        assert refusal_status(refused.value) == 400

    run(scenario())
    assert metric(r.api().metrics(), REJECTIONS, reason="bad-id") == 1
    r.assert_serving()


def test_the_group_rooms_gauge_rises_and_falls(relay):
    r = relay()
    api = r.api()

    async def scenario():
        _, first = await group(r, 3)
        _, second = await group(r, 2)
        samples = api.metrics()
        assert metric(samples, GROUPS_OPEN) == 2
        assert metric(samples, "itsme_relay_rooms_open") == 0
        assert metric(samples, "itsme_relay_connections_open") >= 5
        # A room with peers left is still open.
        await first[0][1].close()
        await recv_event(first[1][1])
        assert eventually_metric(api, GROUPS_OPEN, 2) == 2
        await close_all(*(ws for _, ws in second))
        assert eventually_metric(api, GROUPS_OPEN, 1) == 1
        await close_all(*(ws for _, ws in first))

    run(scenario())
    assert eventually_metric(api, GROUPS_OPEN, 0) == 0


def test_shutdown_closes_group_connections_with_1001(relay):
    r = relay(shutdown_timeout=3)

    async def scenario():
        _, peers = await group(r, 3)
        r.signal(signal.SIGTERM)
        codes = await asyncio.gather(*(close_code(ws, 4) for _, ws in peers))
        await close_all(*(ws for _, ws in peers))
        return codes

    assert run(scenario()) == [1001, 1001, 1001]
    assert r.wait(5) == 0
