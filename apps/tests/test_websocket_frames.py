"""RFC 6455 framing on room connections (PROTOCOL.md 15.3, "Framing"): the
cases of RFC 6455 sections 5.1 to 5.5 and 7.4 that apply to a server that
relays binary messages, on raw sockets so that every bit of a frame is the
test's.

A frame that breaks a rule fails the connection: the relay sends a close
frame with the code of the rule (1002 protocol error, 1007 invalid UTF-8),
ends the TCP connection, and nothing of the frame, nor of anything after it,
reaches the other peer, who is told `peer-left` and closed with 1000 as when
any peer leaves."""

import asyncio
import os

import pytest

from relaytest import (
    OP_BINARY,
    OP_CLOSE,
    OP_CONTINUATION,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    metric,
    raw_pair,
    run,
)

RSV1, RSV2, RSV3 = 0x40, 0x20, 0x10
PROTOCOL_ERROR = 1002
REJECTIONS = "itsme_relay_rejections_total"


def frame(opcode: int, payload: bytes = b"", *, fin: bool = True, rsv: int = 0, masked: bool = True) -> bytes:
    """One client frame with every header bit chosen: FIN, RSV1-3 (`rsv`,
    ORed into the first byte), the opcode and the mask bit."""
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    mask_bit = 0x80 if masked else 0
    n = len(payload)
    if n < 126:
        head += bytes([mask_bit | n])
    elif n < 65536:
        head += bytes([mask_bit | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([mask_bit | 127]) + n.to_bytes(8, "big")
    if not masked:
        return head + payload
    mask = os.urandom(4)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def close_payload(code: int, reason: bytes = b"") -> bytes:
    return code.to_bytes(2, "big") + reason


async def ended(peer, timeout: float = 3.0) -> bool:
    """True when the relay ends the TCP connection within `timeout` (EOF or
    reset), whatever arrives before."""
    deadline = asyncio.get_running_loop().time() + timeout
    try:
        while True:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return False
            opcode, _ = await peer.recv(left)
            if opcode is None:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except asyncio.TimeoutError:
        return False


async def assert_failed(first, second, code: int) -> None:
    """`first`'s next frame is a close with `code`, then its connection ends;
    `second` gets nothing of it: its next frames are `peer-left` and a 1000
    close."""
    opcode, payload = await first.recv(3)
    assert opcode == OP_CLOSE, f"expected a close frame with {code}, got opcode {opcode} {payload[:40]!r}"
    assert int.from_bytes(payload[:2], "big") == code, f"close code {int.from_bytes(payload[:2], 'big')}, not {code}"
    assert await ended(first), "the relay did not end the connection after failing it"
    opcode, payload = await second.recv(3)
    assert opcode == OP_TEXT, f"the other peer got opcode {opcode} {payload[:40]!r} instead of peer-left"
    assert payload == b'{"type":"peer-left"}'
    assert await second.close_code() == 1000


def fails_with(r, code: int, *frames: bytes) -> None:
    async def main():
        _, first, second = await raw_pair(r)
        try:
            await first.send(b"".join(frames))
            await assert_failed(first, second, code)
        finally:
            await first.aclose()
            await second.aclose()

    run(main())


# -- 5.1 Masking ------------------------------------------------------------


@pytest.mark.parametrize(
    "opcode, payload",
    [(OP_BINARY, b"unmasked binary"), (OP_TEXT, b"unmasked text"), (OP_PING, b"unmasked ping"),
     (OP_PONG, b"unmasked pong"), (OP_CLOSE, close_payload(1000)), (OP_CONTINUATION, b"unmasked continuation")],
    ids=["binary", "text", "ping", "pong", "close", "continuation"],
)
def test_an_unmasked_frame_fails_the_connection_with_1002(relay, opcode, payload):
    fails_with(relay(), PROTOCOL_ERROR, frame(opcode, payload, masked=False))


def test_nothing_after_an_unmasked_frame_is_forwarded(relay):
    r = relay()

    async def main():
        _, first, second = await raw_pair(r)
        try:
            await first.send(frame(OP_BINARY, b"masked, before"))
            assert await second.recv(3) == (OP_BINARY, b"masked, before")
            await first.send(frame(OP_BINARY, b"unmasked", masked=False) + frame(OP_BINARY, b"masked, after"))
            await assert_failed(first, second, PROTOCOL_ERROR)
        finally:
            await first.aclose()
            await second.aclose()

    run(main())
    api = r.api()
    assert metric(api.metrics(), REJECTIONS, reason="protocol-error") >= 1


# -- 5.2 Reserved bits and opcodes -------------------------------------------


@pytest.mark.parametrize("rsv", [RSV1, RSV2, RSV3, RSV1 | RSV2 | RSV3], ids=["rsv1", "rsv2", "rsv3", "all"])
@pytest.mark.parametrize("opcode", [OP_BINARY, OP_PING, OP_CLOSE], ids=["binary", "ping", "close"])
def test_a_reserved_bit_fails_the_connection_with_1002(relay, rsv, opcode):
    payload = close_payload(1000) if opcode == OP_CLOSE else b"reserved"
    fails_with(relay(), PROTOCOL_ERROR, frame(opcode, payload, rsv=rsv))


@pytest.mark.parametrize("opcode", [3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF], ids=lambda o: f"opcode-{o:x}")
def test_a_reserved_opcode_fails_the_connection_with_1002(relay, opcode):
    fails_with(relay(), PROTOCOL_ERROR, frame(opcode, b"reserved opcode"))


# -- 5.4 Fragmentation -------------------------------------------------------


def test_a_continuation_without_a_start_fails_the_connection_with_1002(relay):
    fails_with(relay(), PROTOCOL_ERROR, frame(OP_CONTINUATION, b"no start", fin=True))


def test_an_unfinished_continuation_without_a_start_fails_the_connection_with_1002(relay):
    fails_with(relay(), PROTOCOL_ERROR, frame(OP_CONTINUATION, b"no start", fin=False))


@pytest.mark.parametrize("second_opcode", [OP_BINARY, OP_TEXT], ids=["binary", "text"])
def test_a_new_message_inside_a_fragmented_one_fails_the_connection_with_1002(relay, second_opcode):
    fails_with(relay(), PROTOCOL_ERROR, frame(OP_BINARY, b"first part", fin=False), frame(second_opcode, b"intruder"))


def test_fragments_with_a_ping_between_them_are_forwarded_as_one_message(relay):
    r = relay()

    async def main():
        _, first, second = await raw_pair(r)
        try:
            await first.send(
                frame(OP_BINARY, b"one-", fin=False) + frame(OP_PING, b"between")
                + frame(OP_CONTINUATION, b"two-", fin=False) + frame(OP_CONTINUATION, b"three")
            )
            assert await first.recv(3) == (OP_PONG, b"between")
            assert await second.recv(3) == (OP_BINARY, b"one-two-three")
        finally:
            await first.aclose()
            await second.aclose()

    run(main())


# -- 5.5 Control frames ------------------------------------------------------


@pytest.mark.parametrize("opcode", [OP_PING, OP_PONG, OP_CLOSE], ids=["ping", "pong", "close"])
def test_a_control_frame_over_125_bytes_fails_the_connection_with_1002(relay, opcode):
    payload = close_payload(1000, b"x" * 124) if opcode == OP_CLOSE else b"x" * 126
    fails_with(relay(), PROTOCOL_ERROR, frame(opcode, payload))


@pytest.mark.parametrize("opcode", [OP_PING, OP_PONG, OP_CLOSE], ids=["ping", "pong", "close"])
def test_a_fragmented_control_frame_fails_the_connection_with_1002(relay, opcode):
    payload = close_payload(1000) if opcode == OP_CLOSE else b"fragment"
    fails_with(relay(), PROTOCOL_ERROR, frame(opcode, payload, fin=False), frame(OP_CONTINUATION, b"rest"))


@pytest.mark.parametrize("payload", [b"", b"p", os.urandom(125)], ids=["empty", "one-byte", "125-bytes"])
def test_a_ping_is_answered_by_a_pong_with_its_payload(relay, payload):
    r = relay()

    async def main():
        _, first, second = await raw_pair(r)
        try:
            await first.ping(payload)
            assert await first.recv(3) == (OP_PONG, payload)
            # The ping is not forwarded: the other peer's next frame is this.
            await first.send_binary(b"after the ping")
            assert await second.recv(3) == (OP_BINARY, b"after the ping")
        finally:
            await first.aclose()
            await second.aclose()

    run(main())


def test_an_unsolicited_pong_is_ignored(relay):
    r = relay()

    async def main():
        _, first, second = await raw_pair(r)
        try:
            await first.send(frame(OP_PONG, b"nobody asked"))
            await first.send_binary(b"after the pong")
            assert await second.recv(3) == (OP_BINARY, b"after the pong")
            await second.send_binary(b"and back")
            # Nothing answered the pong: the first frame the sender gets is this.
            assert await first.recv(3) == (OP_BINARY, b"and back")
        finally:
            await first.aclose()
            await second.aclose()

    run(main())


# -- 5.5.1 and 7.4 Close -----------------------------------------------------


async def answered_close(payload: bytes, r, trailing: bytes = b""):
    """Sends a close with `payload` (then `trailing`); returns the code of the
    relay's close, after checking that the connection ends and that the
    other peer gets only `peer-left`."""
    _, first, second = await raw_pair(r)
    try:
        await first.send(frame(OP_CLOSE, payload) + trailing)
        opcode, answer = await first.recv(3)
        assert opcode == OP_CLOSE, f"the close was answered with opcode {opcode} {answer[:40]!r}"
        assert await ended(first), "the relay did not end the connection after the close"
        assert await second.recv(3) == (OP_TEXT, b'{"type":"peer-left"}')
        assert await second.close_code() == 1000
        return int.from_bytes(answer[:2], "big") if len(answer) >= 2 else None
    finally:
        await first.aclose()
        await second.aclose()


@pytest.mark.parametrize(
    "payload",
    [b"", close_payload(1000), close_payload(1001, b"going"), close_payload(1000, "fin \u2713".encode()),
     close_payload(1003), close_payload(1007), close_payload(1011), close_payload(3000), close_payload(3999),
     close_payload(4000), close_payload(4999)],
    ids=["empty", "1000", "1001-reason", "1000-utf8-reason", "1003", "1007", "1011", "3000", "3999", "4000", "4999"],
)
def test_a_close_is_answered_with_a_close(relay, payload):
    code = run(answered_close(payload, relay()))
    assert code == 1000, f"a valid close was answered with {code}"


def test_frames_after_a_close_are_not_forwarded(relay):
    code = run(answered_close(close_payload(1000), relay(), trailing=frame(OP_BINARY, b"after the close")))
    assert code == 1000


@pytest.mark.parametrize(
    "code", [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535],
)
def test_a_close_with_an_invalid_code_fails_the_connection_with_1002(relay, code):
    fails_with(relay(), PROTOCOL_ERROR, frame(OP_CLOSE, close_payload(code)))


def test_a_close_with_a_one_byte_payload_fails_the_connection_with_1002(relay):
    fails_with(relay(), PROTOCOL_ERROR, frame(OP_CLOSE, b"\x03"))


@pytest.mark.parametrize(
    "reason", [b"\xff", b"\xc3", b"\xed\xa0\x80", b"ok \xf4\x90\x80\x80"],
    ids=["ff", "truncated", "surrogate", "above-10ffff"],
)
def test_a_close_reason_that_is_not_utf8_fails_the_connection_with_1007(relay, reason):
    fails_with(relay(), 1007, frame(OP_CLOSE, close_payload(1000, reason)))


# -- Text: peers speak binary only -------------------------------------------


@pytest.mark.parametrize(
    "frames",
    [
        [frame(OP_TEXT, b"hello")],
        [frame(OP_TEXT, b"\xff\xfe not utf-8")],
        [frame(OP_TEXT, b"hel", fin=False), frame(OP_CONTINUATION, b"lo")],
        [frame(OP_TEXT, b"\xce", fin=False), frame(OP_CONTINUATION, b"\xba")],
    ],
    ids=["text", "invalid-utf8", "fragmented", "fragmented-split-character"],
)
def test_a_text_message_closes_the_connection_with_1003_and_is_not_forwarded(relay, frames):
    r = relay()

    async def main():
        _, first, second = await raw_pair(r)
        try:
            await first.send(b"".join(frames))
            assert await first.close_code() == 1003
            assert await second.recv(3) == (OP_TEXT, b'{"type":"peer-left"}')
            assert await second.close_code() == 1000
        finally:
            await first.aclose()
            await second.aclose()

    run(main())
