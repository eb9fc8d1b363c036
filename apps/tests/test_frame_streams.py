"""The room connection's frame decoder against generated streams (PROTOCOL.md
15.3, Framing and Flow), seeded so that a failure can be run again
(ITSME_FRAME_SEED=N):

- valid streams: binary messages, some fragmented, with pings and pongs
  between the fragments, of every length class (7-bit, 16-bit and 64-bit
  lengths), written in pieces cut at random bytes (inside headers, masks
  and payloads): the other peer gets exactly the messages, in order, and
  every ping its pong;
- corrupted streams: the same with one bit changed: every message whose
  frames all came before the changed byte reaches the other peer as sent,
  in order; whatever the relay makes of the rest (a message, or a close
  with a code of the framing rules and the end of the connection), it keeps
  serving other rooms.

The cases of a test run concurrently, each in a room of its own."""

import asyncio
import os
import random

from relaytest import OP_BINARY, OP_CLOSE, OP_CONTINUATION, OP_PING, OP_PONG, OP_TEXT, raw_pair, run
from test_websocket_frames import frame

SEED = int(os.environ.get("ITSME_FRAME_SEED", "20261126"))
LENGTHS = [0, 1, 7, 125, 126, 127, 300, 65535, 65536, 70000]


def valid_stream(rng: random.Random, max_frame: int):
    """(bytes to send, the messages the peer must get, where each message's
    last frame ends in the bytes, the pongs the sender must get)."""
    data, messages, ends, pongs = b"", [], [], []
    for _ in range(rng.randint(1, 6)):
        length = min(rng.choice(LENGTHS + [rng.randint(0, 2000)]), max_frame)
        message = rng.randbytes(length)
        messages.append(message)
        pieces = rng.randint(1, 4) if length >= 4 else 1
        cuts = sorted(rng.sample(range(1, length), pieces - 1)) if pieces > 1 else []
        parts = [message[a:b] for a, b in zip([0] + cuts, cuts + [length])]
        for i, part in enumerate(parts):
            data += frame(OP_BINARY if i == 0 else OP_CONTINUATION, part, fin=i == len(parts) - 1)
            if i == len(parts) - 1:
                ends.append(len(data))
            if rng.random() < 0.3:
                payload = rng.randbytes(rng.randint(0, 125))
                data += frame(OP_PING, payload)
                pongs.append(payload)
            if rng.random() < 0.2:
                data += frame(OP_PONG, rng.randbytes(rng.randint(0, 20)))
    return data, messages, ends, pongs


def pieces(rng: random.Random, data: bytes):
    """`data` cut at random bytes, some pieces a single byte."""
    out, i = [], 0
    while i < len(data):
        n = rng.choice([1, 1, 2, 3, 7, 64, 1000, 70000])
        out.append(data[i : i + n])
        i += n
    return out


async def send_in_pieces(peer, rng, data):
    for piece in pieces(rng, data):
        await peer.send(piece)
        if rng.random() < 0.1:
            await asyncio.sleep(0.002)


async def frames_until(peer, count: int, timeout: float = 5.0):
    got = []
    while len(got) < count:
        got.append(await peer.recv(timeout))
    return got


def test_valid_streams_cut_anywhere_are_forwarded_exactly(relay):
    r = relay(max_frame=70000)
    rng = random.Random(SEED)
    cases = [(case, valid_stream(rng, 70000), random.Random(rng.random())) for case in range(40)]

    async def one(case, stream, cut):
        data, messages, _, pongs = stream
        _, sender, receiver = await raw_pair(r)
        try:
            await send_in_pieces(sender, cut, data)
            got = await frames_until(receiver, len(messages))
            assert got == [(OP_BINARY, m) for m in messages], f"seed {SEED}, case {case}"
            answered = await frames_until(sender, len(pongs))
            assert answered == [(OP_PONG, p) for p in pongs], f"seed {SEED}, case {case}"
        finally:
            sender.abort()
            receiver.abort()

    async def main():
        await asyncio.gather(*(one(*c) for c in cases))

    run(main())
    r.assert_serving()


def test_corrupted_streams_forward_what_came_whole_before_the_change(relay):
    seed = SEED + 1
    r = relay(max_frame=70000)
    rng = random.Random(seed)
    cases = []
    for case in range(60):
        data, messages, ends, _ = valid_stream(rng, 70000)
        at = rng.randrange(len(data))
        corrupted = data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :]
        whole = sum(1 for end in ends if end <= at)
        cases.append((case, corrupted, messages[:whole], random.Random(rng.random())))

    async def one(case, corrupted, before, cut):
        _, sender, receiver = await raw_pair(r)
        try:
            await send_in_pieces(sender, cut, corrupted)
            forwarded = []
            while True:
                try:
                    opcode, payload = await receiver.recv(1.0)
                except asyncio.TimeoutError:
                    break
                if opcode is None or opcode == OP_CLOSE:
                    break
                if opcode == OP_TEXT:
                    assert payload == b'{"type":"peer-left"}', f"seed {seed}, case {case}: {payload[:80]!r}"
                    continue
                assert opcode == OP_BINARY, f"seed {seed}, case {case}: opcode {opcode}"
                forwarded.append(payload)
            assert forwarded[: len(before)] == before, f"seed {seed}, case {case}"
            # If the relay closed the sender, it was with a code of the rules.
            while True:
                try:
                    opcode, payload = await sender.recv(0.5)
                except asyncio.TimeoutError:
                    break
                if opcode is None:
                    break
                if opcode == OP_CLOSE:
                    code = int.from_bytes(payload[:2], "big")
                    assert code in (1000, 1002, 1003, 1007, 1009), f"seed {seed}, case {case}: close {code}"
                    break
        finally:
            sender.abort()
            receiver.abort()

    async def main():
        await asyncio.gather(*(one(*c) for c in cases))
        # Another room still works.
        _, a, b = await raw_pair(r)
        try:
            await a.send(frame(OP_BINARY, b"still here"))
            assert await b.recv(3) == (OP_BINARY, b"still here")
        finally:
            a.abort()
            b.abort()

    run(main())
    r.assert_serving()
