"""Helpers of the roll-call tests through a real relay's group room
(docs/PROTOCOL.md 20, version 2, over 15.9): test_rollcall_relay.py,
test_rollcall_tampering.py, test_rollcall_v2_attacks.py and
test_rollcall_v2_relay.py.

- People (`Person`): an identity and a contact store each, contacts made by a
  QR exchange (`befriend`).
- The host loop of each device (`Device`, driven by `Room`): it reports the
  relay's events (`joined`, `peer-joined`, `peer-left`) to its
  `itsme.RollCall`, feeds it every message of the room with the slot that
  carried it (all it has, then it sends what the roll call queued, as 20.6
  says a host may), and ticks it once every virtual second. Time is virtual
  (`Room.now`, each device's clock `offset` seconds off it): a test advances
  it with `Room.run`, so a minute of roll call takes a fraction of a second.
  `Room.settle` returns once every message sent has reached every device it
  was for and each device has fed them all and sent nothing more; it counts
  what each connection sent and received (and what a proxy forwarded and
  delivered), so it adds no message of its own to the room.
- A bare connection (`Device` without a roll call): someone who knows only the
  meeting code, and sends what the test gives it.
- The connections are WebSocket clients on bare TCP sockets (`Connection`),
  and `FrameProxy` is a WebSocket-frame-aware TCP proxy, in the test's own
  event loop, between the devices and the relay: it passes each connection's
  bytes up as they are and parses each frame the relay sends down, so that a
  test's rules can drop, hold, repeat, delay, reorder, re-label and inject
  the messages, and hide the events of one slot from one device.
- The messages' formats (20.1 to 20.5), to read what the devices send and to
  build what an attacker would (`Hello`, `View`, `Said`, `sign`), with the
  `cryptography` package's Ed25519.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import random as random_module
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

import remotetest  # noqa: F401  (puts the binding on the path, and chooses the library)

from itsme import (  # noqa: E402
    ContactStore,
    DeterministicRandom,
    Exchange,
    Identity,
    ItsMeError,
    RollCall,
    RollCallPhase,
    RollCallState,
    SecretStore,
)

NOW = 1_800_000_000

# ---------------------------------------------------------------------------
# The messages (docs/PROTOCOL.md 20.1 to 20.5)

VERSION = 2
HELLO, SAID, VIEW = 1, 2, 3
SIGNATURE = 64
KEY = 32
NAME = 32
TAG = 16
ENTRY = 50
# The states that say "the code matched".
MATCHED = {RollCallState.VERIFIED, RollCallState.VERIFIED_TAG_UNCHECKED, RollCallState.DEVICE_CHANGED}
# The refusals by name.
AUTHENTICATION_FAILED, INVALID_STATE, MALFORMED, INVALID_KEY = (
    "AuthenticationFailedError", "InvalidStateError", "MalformedMessageError", "InvalidKeyError")


def kind(payload: bytes) -> Optional[int]:
    """HELLO, SAID or VIEW for a roll-call message of version 2, None for anything else."""
    if len(payload) > 1 and payload[0] == VERSION and payload[1] in (HELLO, SAID, VIEW):
        return payload[1]
    return None


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def lv_cat(*parts: bytes) -> bytes:
    """Each part prefixed with its length in LEB128 (docs/PROTOCOL.md 1)."""
    out = bytearray()
    for part in parts:
        n = len(part)
        while True:
            group, n = n & 0x7F, n >> 7
            out.append(group | (0x80 if n else 0))
            if not n:
                break
        out += part
    return bytes(out)


def canonical(meeting_code: str) -> bytes:
    """A meeting code as shown (`ABCD-EFGH`) in its canonical form (16.1)."""
    return meeting_code.replace("-", "").replace(" ", "").upper().encode("ascii")


def rcid(meeting_code: str) -> bytes:
    return sha256(lv_cat(b"itsme-rollcall-v2", canonical(meeting_code)))


def room_name(meeting_code: str) -> str:
    """The group room's name on the relay (20.1)."""
    return sha256(lv_cat(b"itsme-rollcall-room-v1", canonical(meeting_code)))[:16].hex()


def roster_hash(rc: bytes, names: Iterable[bytes]) -> bytes:
    return sha256(lv_cat(b"itsme-rc-roster-v2", rc, *sorted(names)))


def name_of(hello: bytes) -> bytes:
    """h: the SHA-256 of a HELLO's body (20.2)."""
    return sha256(hello[:-SIGNATURE])


def key_of(message: bytes) -> bytes:
    """The roll-call key a message names as its sender (its speaker's, for a SAID)."""
    return message[3:3 + KEY] if message[1] == HELLO else message[2:2 + KEY]


def signing_input(rc: bytes, body: bytes) -> bytes:
    return lv_cat(b"itsme-rc-sign-v2", rc, body)


def sign(private: Ed25519PrivateKey, rc: bytes, body: bytes) -> bytes:
    """`body` and its signature (20.1) under `private`."""
    return body + private.sign(signing_input(rc, body))


def public_key(private: Ed25519PrivateKey) -> bytes:
    return private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def signed_by_its_key(message: bytes, rc: bytes) -> bool:
    """Whether the signature of `message` verifies under the key it names."""
    try:
        public = Ed25519PublicKey.from_public_bytes(key_of(message))
        public.verify(message[-SIGNATURE:], signing_input(rc, message[:-SIGNATURE]))
        return True
    except InvalidSignature:
        return False


def u16(n: int) -> bytes:
    return n.to_bytes(2, "big")


@dataclass
class Hello:
    """HELLO body = 2 || 1 || b || RK || bind || u16(n) || tags (20.2)."""

    bound: int
    key: bytes
    bind: bytes
    tags: List[bytes]

    @classmethod
    def parse(cls, message: bytes) -> "Hello":
        assert kind(message) == HELLO, message[:2]
        n = int.from_bytes(message[67:69], "big")
        assert len(message) == 133 + TAG * n, (len(message), n)
        tags = [message[69 + TAG * i:69 + TAG * (i + 1)] for i in range(n)]
        return cls(message[2], message[3:35], message[35:67], tags)

    def body(self) -> bytes:
        return bytes([VERSION, HELLO, self.bound]) + self.key + self.bind + u16(len(self.tags)) + b"".join(self.tags)


@dataclass
class View:
    """VIEW body = 2 || 3 || RK || u32(seq) || u16(slot) || roster || flags || k || names || have (20.3)."""

    key: bytes
    seq: int
    slot: int
    roster: bytes
    flags: int
    names: List[bytes]
    have: bytes

    @classmethod
    def parse(cls, message: bytes) -> "View":
        assert kind(message) == VIEW, message[:2]
        k = message[73]
        names = [message[74 + NAME * i:74 + NAME * (i + 1)] for i in range(k)]
        have = message[74 + NAME * k:74 + NAME * k + (k + 7) // 8]
        assert len(message) == 138 + NAME * k + (k + 7) // 8, (len(message), k)
        return cls(message[2:34], int.from_bytes(message[34:38], "big"), int.from_bytes(message[38:40], "big"),
                   message[40:72], message[72], names, have)

    def body(self) -> bytes:
        return (bytes([VERSION, VIEW]) + self.key + self.seq.to_bytes(4, "big") + u16(self.slot) + self.roster
                + bytes([self.flags, len(self.names)]) + b"".join(self.names) + self.have)

    def lists(self, name: bytes) -> bool:
        return name in self.names


@dataclass
class Said:
    """SAID body = 2 || 2 || RK_S || roster || m || entries (20.5)."""

    speaker: bytes
    roster: bytes
    entries: List[bytes]

    @classmethod
    def parse(cls, message: bytes) -> "Said":
        assert kind(message) == SAID, message[:2]
        m = message[66]
        assert len(message) == 131 + ENTRY * m, (len(message), m)
        return cls(message[2:34], message[34:66], [message[67 + ENTRY * i:67 + ENTRY * (i + 1)] for i in range(m)])

    def body(self) -> bytes:
        return bytes([VERSION, SAID]) + self.speaker + self.roster + bytes([len(self.entries)]) + b"".join(self.entries)


class Stranger:
    """Someone with a roll-call key of their own (drawn from `seed`) and
    nothing else: what they sign verifies under their own key only."""

    def __init__(self, seed: bytes, meeting_code: str):
        self.private = Ed25519PrivateKey.from_private_bytes(sha256(seed))
        self.key = public_key(self.private)
        self.rc = rcid(meeting_code)

    def sign(self, body: bytes) -> bytes:
        return sign(self.private, self.rc, body)


# ---------------------------------------------------------------------------
# People


class Person:
    """An identity and its contact store (`directory`/`name`.db)."""

    def __init__(self, name: str, directory):
        self.name = name
        self.identity = Identity.create(SecretStore.memory(), name)
        self.contacts = ContactStore.open(self.identity, directory / f"{name}.db")
        self.contact_ids: Dict[str, int] = {}

    def contact_id(self, other: "Person") -> Optional[int]:
        """The contact `other` is here, if it is one."""
        return self.contact_ids.get(other.name)

    def __repr__(self) -> str:
        return f"<Person {self.name}>"


def befriend(a: Person, b: Person) -> None:
    """`a` and `b` add each other by QR code (both confirm)."""
    with Exchange.qr(a.identity, a.contacts, NOW) as xa, Exchange.qr(b.identity, b.contacts, NOW) as xb:
        xa.receive(xb.next_outgoing(), NOW)
        xb.receive(xa.next_outgoing(), NOW)
        xa.confirm(NOW)
        xb.confirm(NOW)
    a.contact_ids[b.name] = a.contacts.find_fingerprint(b.identity.fingerprint)[0].id
    b.contact_ids[a.name] = b.contacts.find_fingerprint(a.identity.fingerprint)[0].id


def make_people(directory, names: Iterable[str], friends: Optional[Iterable[Tuple[str, str]]] = None) -> List[Person]:
    """People named `names`, each the contact of every other, or only of the pairs in `friends`."""
    names = list(names)
    made = [Person(name, directory) for name in names]
    by_name = {p.name: p for p in made}
    pairs = friends if friends is not None else [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    for a, b in pairs:
        befriend(by_name[a], by_name[b])
    return made


def seeded(label: str) -> DeterministicRandom:
    """A deterministic random source named by `label` (the same label, the same bytes)."""
    return DeterministicRandom(sha256(label.encode()))


class HarnessError(Exception):
    """The test's own machinery failed (the room did not settle, a proxy rule
    raised): not an assertion about the roll call."""


# ---------------------------------------------------------------------------
# WebSocket frames (RFC 6455) on bare TCP

OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x1, 0x2, 0x8, 0x9, 0xA


def frame_head(opcode: int, n: int, masked: bool) -> bytes:
    mask_bit = 0x80 if masked else 0
    if n < 126:
        return bytes([0x80 | opcode, mask_bit | n])
    if n < 65536:
        return bytes([0x80 | opcode, mask_bit | 126]) + n.to_bytes(2, "big")
    return bytes([0x80 | opcode, mask_bit | 127]) + n.to_bytes(8, "big")


def client_frame(opcode: int, payload: bytes) -> bytes:
    """A client frame masked with the all-zero key (a valid key: the payload goes as it is)."""
    return frame_head(opcode, len(payload), True) + bytes(4) + payload


def server_frame(opcode: int, payload: bytes) -> bytes:
    return frame_head(opcode, len(payload), False) + payload


def parse_frames(buffer: bytearray) -> List[Tuple[int, bytes]]:
    """Takes every whole frame off the front of `buffer`: [(opcode, payload)]
    (unmasked; the relay never fragments)."""
    frames = []
    while len(buffer) >= 2:
        b0, b1 = buffer[0], buffer[1]
        n, at = b1 & 0x7F, 2
        if n == 126:
            if len(buffer) < 4:
                break
            n, at = int.from_bytes(buffer[2:4], "big"), 4
        elif n == 127:
            if len(buffer) < 10:
                break
            n, at = int.from_bytes(buffer[2:10], "big"), 10
        mask = None
        if b1 & 0x80:
            mask, at = buffer[at:at + 4], at + 4
        if len(buffer) < at + n:
            break
        payload = bytes(buffer[at:at + n])
        del buffer[:at + n]
        if mask is not None and any(mask):
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        frames.append((b0 & 0x0F, payload))
    return frames


class Connection(asyncio.Protocol):
    """A WebSocket client connection to `/v1/groups/{room}` on a bare TCP
    socket: binary frames go out as they are (a zero mask), each frame that
    comes in goes to `on_frame(connection, opcode, payload)`; pings are
    answered. The counts `Room.settle` reads are kept here."""

    def __init__(self, device: "Device", path: str, on_frame, on_lost):
        self.device = device
        self.path = path
        self.on_frame = on_frame
        self.on_lost = on_lost
        self.transport: Optional[asyncio.Transport] = None
        self.buffer = bytearray()
        self.upgraded: Optional[asyncio.Future] = None
        self.lost = False
        self.slot: Optional[int] = None
        # Binary messages sent; of those, sent while alone in the room (the
        # relay answers each with `refused`); `refused` events received.
        self.sent = 0
        self.sent_alone = 0
        self.refused = 0
        # Binary messages received, by the slot that carried them, and what
        # each other connection had sent before this one joined.
        self.received: Counter = Counter()
        self.base: Dict[int, int] = {}
        # Its link through a FrameProxy, if any.
        self.link: Optional["ProxyLink"] = None
        self.port: Optional[int] = None
        # Left the room (the test closed it): what still comes is ignored.
        self.left = False
        self.out: List[bytes] = []

    @classmethod
    async def open(cls, device: "Device", port: int, path: str, on_frame, on_lost) -> "Connection":
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(lambda: cls(device, path, on_frame, on_lost), "127.0.0.1", port)
        key = base64.b64encode(os.urandom(16)).decode()
        connection.transport.write(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
        await asyncio.wait_for(asyncio.shield(connection.upgraded), 5)
        return connection

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.port = transport.get_extra_info("sockname")[1]
        self.upgraded = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.upgraded.done():
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end])
            del self.buffer[:end + 4]
            if not head.startswith(b"HTTP/1.1 101"):
                self.upgraded.set_exception(HarnessError(f"the upgrade was refused: {head[:200]!r}"))
                return
            self.upgraded.set_result(None)
        for opcode, payload in parse_frames(self.buffer):
            if opcode == OP_PING:
                self.transport.write(client_frame(OP_PONG, payload))
            elif opcode in (OP_TEXT, OP_BINARY):
                self.on_frame(self, opcode, payload)
            elif opcode == OP_CLOSE:
                self.transport.close()

    def connection_lost(self, exc) -> None:
        self.lost = True
        if self.upgraded is not None and not self.upgraded.done():
            self.upgraded.set_exception(ConnectionError("closed before the upgrade"))
        self.on_lost(self)

    def send(self, payload: bytes) -> None:
        """Sends a binary message (written with the others of this turn of the event loop, in order)."""
        if not self.out:
            asyncio.get_running_loop().call_soon(self._write)
        self.out.append(client_frame(OP_BINARY, payload))

    def _write(self) -> None:
        out, self.out = self.out, []
        if not self.lost:
            self.transport.write(b"".join(out))

    def close(self) -> None:
        """A clean close (1000); the relay tells the others `peer-left`, and
        closes the connection (`lost`)."""
        if not self.lost:
            self._write()
            self.transport.write(client_frame(OP_CLOSE, (1000).to_bytes(2, "big")))

    def abort(self) -> None:
        """The TCP stream ends without a close frame (a dropped connection);
        what was sent before still goes."""
        if not self.lost:
            self._write()
            self.transport.close()


# ---------------------------------------------------------------------------
# A WebSocket-frame-aware proxy in front of the relay


class ProxyLink:
    """One client's connection through a FrameProxy: its `path`, its relay
    `slot` (from the relay's `joined`), and the binary messages the relay
    `forwarded` to it and the proxy `written` to it, by sender slot."""

    def __init__(self, proxy: "FrameProxy", client: asyncio.Transport):
        self.proxy = proxy
        self.client = client
        self.client_port = client.get_extra_info("peername")[1]
        self.upstream: Optional[asyncio.Transport] = None
        self.path: Optional[str] = None
        self.slot: Optional[int] = None
        self.forwarded: Counter = Counter()
        self.written: Counter = Counter()
        self.pending: List[Tuple[int, bytes]] = []
        self.closed = False
        self.out: List[bytes] = []

    def deliver(self, slot: int, payload: bytes) -> None:
        """Gives the client `payload` as if slot `slot` had sent it."""
        if self.closed:
            return
        self.written[slot] += 1
        self.write(server_frame(OP_BINARY, u16(slot) + payload))

    def write(self, frame: bytes) -> None:
        """Writes a frame to the client (with the others of this turn of the event loop, in order)."""
        if not self.out:
            asyncio.get_running_loop().call_soon(self._write)
        self.out.append(frame)

    def _write(self) -> None:
        out, self.out = self.out, []
        if not self.closed:
            self.client.write(b"".join(out))

    def __repr__(self) -> str:
        return f"<ProxyLink {self.path} slot {self.slot}>"


class _ClientSide(asyncio.Protocol):
    def __init__(self, proxy: "FrameProxy"):
        self.proxy = proxy
        self.link: Optional[ProxyLink] = None
        self.early = bytearray()

    def connection_made(self, transport) -> None:
        self.link = ProxyLink(self.proxy, transport)
        self.proxy.links.append(self.link)
        self.proxy.by_port[self.link.client_port] = self.link
        asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, _ = await loop.create_connection(
                lambda: _RelaySide(self.link), "127.0.0.1", self.proxy.upstream_port)
        except OSError:
            self.link.client.close()
            return
        self.link.upstream = transport
        if self.early:
            transport.write(bytes(self.early))
            self.early.clear()
        if self.link.closed:
            transport.close()

    def data_received(self, data: bytes) -> None:
        if self.link.path is None:
            line = (bytes(self.early) + data).split(b"\r\n", 1)[0].split(b" ")
            if len(line) >= 2:
                self.link.path = line[1].decode("latin-1")
        if self.link.upstream is None:
            self.early += data
        else:
            self.link.upstream.write(data)

    def connection_lost(self, exc) -> None:
        self.link.closed = True
        if self.link.upstream is not None:
            self.link.upstream.close()


class _RelaySide(asyncio.Protocol):
    def __init__(self, link: ProxyLink):
        self.link = link
        self.buffer = bytearray()
        self.upgraded = False

    def data_received(self, data: bytes) -> None:
        link = self.link
        if link.closed:
            return
        self.buffer += data
        if not self.upgraded:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            link.write(bytes(self.buffer[:end + 4]))
            del self.buffer[:end + 4]
            self.upgraded = True
        for opcode, payload in parse_frames(self.buffer):
            if opcode == OP_BINARY and len(payload) >= 2:
                link.proxy._forward(link, int.from_bytes(payload[:2], "big"), payload[2:])
            elif opcode == OP_TEXT:
                text = link.proxy._event(link, payload)
                if text is not None:
                    link.write(server_frame(OP_TEXT, text))
            else:
                link.write(server_frame(opcode, payload))

    def connection_lost(self, exc) -> None:
        self.link._write()
        self.link.closed = True
        self.link.client.close()


Rule = Callable[[ProxyLink, int, bytes], Optional[List[Tuple[int, bytes]]]]


class FrameProxy:
    """A WebSocket-frame-aware TCP proxy in front of a relay, in the test's
    event loop (`await FrameProxy.start(relay)`; `close()`). Each client's
    bytes go up to the relay as they are; each frame the relay sends down
    is parsed. Every message the relay forwards (`u16(slot) || payload`) is
    recorded in `forwarded` as (link, slot, payload), then goes through
    `rules` in order: `rule(link, slot, payload)` returns None to leave it
    to the next, or the [(slot, payload)] the client gets now instead ([]:
    none, for now). A rule may also keep it back and give it later:
    `defer` (the next time the room is otherwise quiet, in a random order:
    reordered) or `later` (at a virtual time, `advance`). `hide(receiver,
    slot)` hides a slot from one client: its messages, and the events that
    name it. The relay's events otherwise pass as they are (a link learns
    its slot from `joined`)."""

    def __init__(self, relay, seed: int = 0):
        self.upstream_port = relay.port
        self.links: List[ProxyLink] = []
        self.by_port: Dict[int, ProxyLink] = {}
        self.rules: List[Rule] = []
        self.forwarded: List[Tuple[ProxyLink, int, bytes]] = []
        self.record = True
        self.hidden: set = set()  # (receiving link, hidden slot)
        self.timed: List[Tuple[int, int, ProxyLink, int, bytes]] = []
        self.now = 0
        self.rng = random_module.Random(seed)
        self.server = None
        self.port = 0
        # What a rule raised (Room.settle raises it again).
        self.errors: List[BaseException] = []
        # Set whenever the relay sends something down (the Room waits on it).
        self.activity: Optional[asyncio.Event] = None

    @classmethod
    async def start(cls, relay, seed: int = 0) -> "FrameProxy":
        proxy = cls(relay, seed)
        loop = asyncio.get_running_loop()
        proxy.server = await loop.create_server(lambda: _ClientSide(proxy), "127.0.0.1", 0)
        proxy.port = proxy.server.sockets[0].getsockname()[1]
        return proxy

    async def close(self) -> None:
        for link in self.links:
            link.client.close()
            if link.upstream is not None:
                link.upstream.close()
        self.server.close()
        await self.server.wait_closed()

    # -- what the relay sends down

    def _forward(self, link: ProxyLink, slot: int, payload: bytes) -> None:
        if self.activity is not None:
            self.activity.set()
        link.forwarded[slot] += 1
        if self.record:
            self.forwarded.append((link, slot, payload))
        if (link, slot) in self.hidden:
            return
        try:
            for rule in self.rules:
                instead = rule(link, slot, payload)
                if instead is not None:
                    for s, p in instead:
                        link.deliver(s, p)
                    return
        except Exception as error:  # noqa: BLE001  (reported by Room.settle)
            self.errors.append(error)
            return
        link.deliver(slot, payload)

    def _event(self, link: ProxyLink, text: bytes) -> Optional[bytes]:
        event = json.loads(text)
        kind_ = event.get("type")
        if kind_ == "joined":
            link.slot = event["slot"]
            peers = [s for s in event["peers"] if (link, s) not in self.hidden]
            if peers != event["peers"]:
                return json.dumps({**event, "peers": peers}).encode()
        elif kind_ in ("peer-joined", "peer-left") and (link, event["slot"]) in self.hidden:
            return None
        return text

    # -- lies

    def link(self, device: "Device") -> ProxyLink:
        """`device`'s connection through the proxy."""
        return device.conn.link

    def hide(self, receiver: "Device", slot: int) -> None:
        """`receiver`'s device is never told of slot `slot`, and gets nothing it sends."""
        self.hidden.add((self.link(receiver), slot))

    def add_rule(self, rule: Rule) -> Rule:
        self.rules.append(rule)
        return rule

    def remove_rule(self, rule: Rule) -> None:
        self.rules.remove(rule)

    def withhold(self, when, into: list) -> Rule:
        """Gives no one a message for which `when(link, slot, payload)`
        holds, and appends each such (link, slot, payload) to `into`."""

        def rule(link, slot, payload):
            if when(link, slot, payload):
                into.append((link, slot, payload))
                return []
            return None

        return self.add_rule(rule)

    def drop(self, when) -> list:
        """Drops every message for which `when(link, slot, payload)` holds;
        returns the list where each is recorded."""
        dropped: list = []
        self.withhold(when, dropped)
        return dropped

    def hold(self, when) -> "Held":
        """Keeps back every message for which `when(link, slot, payload)` holds, until `Held.release`."""
        return Held(self, when)

    def inject(self, link: ProxyLink, slot: int, payload: bytes) -> None:
        """Gives `link` the message `payload` as if slot `slot` had sent it."""
        link.deliver(slot, payload)

    def defer(self, link: ProxyLink, slot: int, payload: bytes) -> None:
        """Delivers it the next time the room is otherwise quiet, in a random
        order among the messages deferred for `link`."""
        link.pending.append((slot, payload))

    def later(self, link: ProxyLink, seconds: int, slot: int, payload: bytes) -> None:
        """Delivers it once `seconds` virtual seconds have passed."""
        self.timed.append((self.now + seconds, len(self.timed), link, slot, payload))

    def has_pending(self) -> bool:
        return any(link.pending for link in self.links if not link.closed)

    def flush_pending(self) -> None:
        for link in self.links:
            if link.pending:
                pending, link.pending = link.pending, []
                self.rng.shuffle(pending)
                for slot, payload in pending:
                    link.deliver(slot, payload)

    def advance(self, now: int) -> bool:
        """The virtual time is `now`: delivers what `later` kept until then.
        Whether anything was delivered."""
        self.now = now
        due = [t for t in self.timed if t[0] <= now]
        if not due:
            return False
        self.timed = [t for t in self.timed if t[0] > now]
        for _, _, link, slot, payload in sorted(due, key=lambda t: (t[0], t[1])):
            link.deliver(slot, payload)
        return True


class Held:
    """Messages a FrameProxy keeps back: `messages` lists them as (link,
    slot, payload); `release` gives them to their links, in the order they
    came, and stops holding."""

    def __init__(self, proxy: FrameProxy, when):
        self.proxy = proxy
        self.messages: list = []
        self._rule = proxy.withhold(when, self.messages)

    def release(self) -> None:
        self.proxy.remove_rule(self._rule)
        for link, slot, payload in self.messages:
            link.deliver(slot, payload)


# ---------------------------------------------------------------------------
# Devices and the room


KIND_NAMES = {HELLO: "HELLO", VIEW: "VIEW", SAID: "SAID"}


@dataclass
class Refusal:
    error: str  # the exception's class name
    slot: int
    kind: Optional[int]
    detail: str

    def __repr__(self) -> str:
        return f"{self.error}({KIND_NAMES.get(self.kind, self.kind)} from {self.slot}: {self.detail})"


@dataclass(eq=False)
class Device:
    """One device in the room: `person`'s `call` (None for a bare
    connection), its connection, and what its host saw. Its clock is the
    room's plus `offset` seconds."""

    room: "Room"
    name: str
    person: Optional[Person] = None
    call: Optional[RollCall] = None
    offset: int = 0
    code_random: Optional[Callable[[], DeterministicRandom]] = None
    path: str = ""
    conn: Optional[Connection] = None
    slot: Optional[int] = None
    # Every slot it had, in order.
    slots: list = field(default_factory=list)
    # Slots present, as the relay's events (as delivered) said.
    peers: set = field(default_factory=set)
    inbox: deque = field(default_factory=deque)
    events: list = field(default_factory=list)
    # Every message the relay gave it: (slot, payload).
    received: list = field(default_factory=list)
    # Every message it sent, as sent.
    sent: list = field(default_factory=list)
    refusals: List[Refusal] = field(default_factory=list)
    # A paused host leaves what comes in unfed (it still arrives).
    paused: bool = False
    # `withhold(message)` true: the host keeps the message back (in `withheld`).
    withhold: Optional[Callable[[bytes], bool]] = None
    withheld: list = field(default_factory=list)
    # The rosters its owner confirmed (Room.confirm), in order.
    confirmed: list = field(default_factory=list)

    @property
    def time(self) -> int:
        return self.room.now + self.offset

    @property
    def connected(self) -> bool:
        return self.conn is not None and self.slot is not None

    def refusal_kinds(self) -> List[str]:
        return sorted(r.error for r in self.refusals)

    def sent_of(self, message_kind: int) -> List[bytes]:
        return [m for m in self.sent if kind(m) == message_kind]

    def got(self, message_kind: int, slot: Optional[int] = None) -> List[bytes]:
        return [m for s, m in self.received if kind(m) == message_kind and (slot is None or s == slot)]

    @property
    def hello(self) -> bytes:
        """Its HELLO, as it sends it."""
        return self.sent_of(HELLO)[0]

    @property
    def key(self) -> bytes:
        return key_of(self.hello)

    @property
    def h(self) -> bytes:
        return name_of(self.hello)

    def send(self, payload: bytes) -> None:
        """Sends `payload` to the room (a bare connection's, or anyone's own bytes)."""
        self.room._send(self, payload)

    def __repr__(self) -> str:
        return f"<Device {self.name} slot {self.slot}>"


class Room:
    """The relay's group rooms as a test drives them: devices connect to the
    relay (or to `proxy` in front of it), the host loop of each runs here,
    and time is virtual (`now`). Not for use by two tasks at once."""

    def __init__(self, relay, proxy: Optional[FrameProxy] = None, now: int = NOW):
        self.relay = relay
        self.proxy = proxy
        self.port = proxy.port if proxy is not None else relay.port
        self.now = now
        if proxy is not None:
            proxy.now = now
        self.devices: List[Device] = []
        self.connections: List[Connection] = []  # open, joined, not left
        self.activity = asyncio.Event()
        if proxy is not None:
            proxy.activity = self.activity

    # -- devices

    def device(self, person: Optional[Person], meeting_code: str, *, name: Optional[str] = None, offset: int = 0,
               binding: Optional[bytes] = None, random: Optional[DeterministicRandom] = None,
               code_random: Optional[Callable[[], DeterministicRandom]] = None) -> Device:
        """`person`'s device starting a roll call of `meeting_code` now (its
        clock `offset` seconds off); None: a bare connection."""
        device = Device(self, name or (person.name if person else "bare"), person, offset=offset,
                        code_random=code_random)
        if person is not None:
            device.call = RollCall(person.contacts, meeting_code, device.time, binding=binding, random=random)
            device.path = f"/v1/groups/{device.call.room}"
        else:
            device.path = f"/v1/groups/{room_name(meeting_code)}"
        self.devices.append(device)
        return device

    async def join(self, *devices: Device) -> None:
        """Each of `devices` joins its group room (again, with a new slot, if
        it was in it before), in turn, and the room settles."""
        await self.settle()
        for device in devices:
            await self._connect(device)
        await self.settle()

    async def _connect(self, device: Device) -> None:
        assert device.conn is None, f"{device} is connected"
        device.slot = None
        conn = await Connection.open(device, self.port, device.path, self._on_frame, self._on_lost)
        device.conn = conn
        if self.proxy is not None:
            conn.link = self.proxy.by_port[conn.port]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while conn.slot is None:
            self.activity.clear()
            if conn.lost:
                raise HarnessError(f"{device.name}'s connection closed before `joined`: {device.events}")
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise HarnessError(f"no `joined` for {device.name}")
            try:
                await asyncio.wait_for(self.activity.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    async def leave(self, device: Device, abort: bool = False) -> None:
        """`device`'s connection closes (`abort`: its TCP stream just ends);
        returns once every other device was told (`peer-left`), fed it all."""
        conn = device.conn
        slot = device.slot
        assert conn is not None and slot is not None
        if not device.paused:
            self._feed(device)
        self._forget(conn)
        conn.left = True
        device.conn = None
        if abort:
            conn.abort()
        else:
            conn.close()
        others = [c for c in self.connections if c.path == conn.path and not self._hidden(c, slot)]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while any(slot in c.device.peers for c in others):
            self.activity.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise HarnessError(f"the others were not told that {device.name} left")
            try:
                await asyncio.wait_for(self.activity.wait(), remaining)
            except asyncio.TimeoutError:
                pass
        await self.settle()

    async def close(self) -> None:
        """Every device leaves; returns once the relay closed each connection
        (so a room left empty has ended, and its ID starts a new room)."""
        closing = []
        for device in self.devices:
            if device.conn is not None:
                self._forget(device.conn)
                device.conn.left = True
                device.conn.close()
                closing.append(device.conn)
                device.conn = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while any(not c.lost for c in closing) and loop.time() < deadline:
            self.activity.clear()
            try:
                await asyncio.wait_for(self.activity.wait(), deadline - loop.time())
            except asyncio.TimeoutError:
                pass
        for conn in closing:
            conn.abort()

    def _forget(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.remove(conn)

    def _hidden(self, receiver: Connection, slot: int) -> bool:
        return self.proxy is not None and (receiver.link, slot) in self.proxy.hidden

    # -- what comes in

    def _on_frame(self, conn: Connection, opcode: int, payload: bytes) -> None:
        device = conn.device
        self.activity.set()
        if conn.left:
            return  # a connection this device left
        if opcode == OP_TEXT:
            event = json.loads(payload)
            device.events.append(event)
            kind_ = event["type"]
            if kind_ == "joined":
                conn.slot = device.slot = event["slot"]
                device.slots.append(conn.slot)
                device.peers = set(event["peers"])
                for other in self.connections:
                    if other.path == conn.path:
                        conn.base[other.slot] = other.sent
                        other.base[conn.slot] = 0
                self.connections.append(conn)
            elif kind_ == "peer-joined":
                device.peers.add(event["slot"])
            elif kind_ == "peer-left":
                device.peers.discard(event["slot"])
            elif kind_ == "refused":
                conn.refused += 1
            device.inbox.append(event)
        else:
            slot = int.from_bytes(payload[:2], "big")
            conn.received[slot] += 1
            device.inbox.append((slot, payload[2:]))

    def _on_lost(self, conn: Connection) -> None:
        self.activity.set()

    # -- the host loop

    def process(self) -> None:
        """Each host that is not paused feeds its roll call everything it
        has, then sends what it queued."""
        for device in self.devices:
            if not device.paused and device.inbox:
                self._feed(device)

    def _feed(self, device: Device) -> None:
        call = device.call
        while device.inbox:
            item = device.inbox.popleft()
            if isinstance(item, dict):
                if call is None:
                    continue
                kind_ = item["type"]
                if kind_ == "joined":
                    call.joined(item["slot"], item["peers"], device.time)
                elif kind_ == "peer-joined":
                    call.peer_joined(item["slot"], device.time)
                elif kind_ == "peer-left":
                    call.peer_left(item["slot"], device.time)
                continue
            slot, payload = item
            device.received.append((slot, payload))
            if call is None:
                continue
            try:
                call.receive(payload, slot, device.time)
            except ItsMeError as error:
                device.refusals.append(Refusal(type(error).__name__, slot, kind(payload), str(error)))
        self.flush(device)

    def flush(self, device: Device) -> None:
        """Sends what `device`'s roll call queued (kept in the queue while it is not connected)."""
        if device.call is None or not device.connected or device.paused:
            return
        while True:
            message = device.call.next_outgoing()
            if not message:
                return
            if device.withhold is not None and device.withhold(message):
                device.withheld.append(message)
                continue
            self._send(device, message)

    def _send(self, device: Device, payload: bytes) -> None:
        conn = device.conn
        assert conn is not None and conn.slot is not None, f"{device.name} is not in the room"
        alone = not any(c is not conn and c.path == conn.path for c in self.connections)
        conn.sent += 1
        if alone:
            conn.sent_alone += 1
        device.sent.append(payload)
        conn.send(payload)

    def release(self, device: Device) -> None:
        """Sends what `device`'s host kept back, and stops keeping anything back."""
        device.withhold = None
        withheld, device.withheld = device.withheld, []
        for message in withheld:
            self._send(device, message)

    # -- settling and time

    def _settled(self) -> bool:
        for conn in self.connections:
            if conn.refused != conn.sent_alone:
                return False
            link = conn.link
            for other in self.connections:
                if other is conn or other.path != conn.path:
                    continue
                expected = other.sent - conn.base.get(other.slot, 0)
                came = link.forwarded[other.slot] if link is not None else conn.received[other.slot]
                if came > expected:
                    raise HarnessError(f"{conn.device.name} got {came} messages of {other.device.name}'s {expected}")
                if came < expected:
                    return False
            if link is not None:
                for slot, written in link.written.items():
                    if conn.received[slot] < written:
                        return False
        return True

    async def settle(self, timeout: float = 10.0) -> None:
        """Returns once every message sent reached every device it was for
        (but those a proxy keeps for later), each host fed them all to its
        roll call (but paused ones) and had nothing more to send."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            self.activity.clear()
            if self.proxy is not None and self.proxy.errors:
                raise HarnessError("a proxy rule failed") from self.proxy.errors[0]
            self.process()
            if self._settled():
                if self.proxy is not None and self.proxy.has_pending():
                    self.proxy.flush_pending()
                    continue
                if not any(d.inbox for d in self.devices if not d.paused):
                    return
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise HarnessError("the room did not settle: " + self._counts())
            try:
                await asyncio.wait_for(self.activity.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    def _counts(self) -> str:
        lines = []
        for conn in self.connections:
            line = (f"{conn.device.name} slot {conn.slot}: sent {conn.sent} (alone {conn.sent_alone}, "
                    f"refused {conn.refused}), received {dict(conn.received)} base {conn.base}")
            if conn.link is not None:
                line += f" forwarded {dict(conn.link.forwarded)} written {dict(conn.link.written)}"
            lines.append(line)
        return "; ".join(lines)

    async def run(self, seconds: int = 1, each: Optional[Callable[[], None]] = None) -> None:
        """`seconds` virtual seconds pass: each second, what a proxy kept
        until then is delivered, every device that is in the room ticks, and
        the room settles; then `each()`."""
        for _ in range(seconds):
            self.now += 1
            if self.proxy is not None:
                self.proxy.advance(self.now)
            for device in self.devices:
                if device.call is not None and device.connected and not device.paused:
                    device.call.tick(device.time)
                    self.flush(device)
            await self.settle()
            if each is not None:
                each()

    async def run_until(self, condition: Callable[[], bool], limit: int, what: str = "the condition") -> int:
        """Runs second by second until `condition()` holds; the seconds it took
        (AssertionError after `limit`)."""
        for second in range(limit + 1):
            if condition():
                return second
            await self.run(1)
        raise AssertionError(f"{what} did not hold within {limit} virtual seconds")

    # -- what the owners do

    async def say(self, *devices: Device) -> None:
        """Each owner confirms the roster shown (unless confirmed already),
        reads the code aloud and confirms "I said it" (unless said already):
        the SAID goes out; the room settles."""
        for device in devices:
            if device.call.phase == RollCallPhase.GATHERING:
                self.confirm(device)
        for device in devices:
            if device.call.phase == RollCallPhase.CONFIRMED:
                device.call.confirm_said(device.time)
                self.flush(device)
        await self.settle()

    def confirm(self, device: Device) -> None:
        random = device.code_random() if device.code_random else None
        roster = device.call.roster
        device.call.confirm_roster(roster, device.time, random=random)
        device.confirmed.append(roster)

    def hear(self, listener: Device, speaker: Device, code: Optional[str] = None) -> RollCallState:
        """`listener`'s owner types the code `speaker` said (`code`: another one)."""
        target = participant(listener, speaker)
        assert target is not None, f"{speaker.name} is not listed on {listener.name}'s screen"
        state = listener.call.enter_heard(target.index, code or speaker.call.code, listener.time)
        self.flush(listener)
        return state


def participant(listener: Device, speaker: Device):
    """`speaker`'s device among `listener`'s participants: the contact it is,
    else the one that speaks from its slot; None if not listed."""
    contact = listener.person.contact_id(speaker.person) if speaker.person else None
    for p in listener.call.participants[1:]:
        if contact is not None and p.contact_id == contact:
            return p
    if contact is None:
        for p in listener.call.participants[1:]:
            if p.slot is not None and p.slot == speaker.slot:
                return p
    return None


def state_of(listener: Device, speaker: Device) -> Optional[RollCallState]:
    p = participant(listener, speaker)
    return p.state if p is not None else None


def states(devices: Iterable[Device]) -> Dict[Tuple[str, str], RollCallState]:
    """{(listener, speaker): the state shown} for every contact listed."""
    devices = list(devices)
    shown = {}
    for listener in devices:
        for speaker in devices:
            if speaker is listener or speaker.person is None or listener.person.contact_id(speaker.person) is None:
                continue
            state = state_of(listener, speaker)
            if state is not None:
                shown[(listener.name, speaker.name)] = state
    return shown


def all_pairs(devices: Iterable[Device], state: RollCallState) -> dict:
    devices = list(devices)
    return {(a.name, b.name): state for a in devices for b in devices
            if a is not b and a.person.contact_id(b.person) is not None}


def same_roster(devices: Iterable[Device]) -> bool:
    return len({d.call.roster for d in devices}) == 1


def assert_none_wrongly_verified(devices: Iterable[Device]) -> None:
    """On every device: each contact listed at most once; each participant
    shown as a contact is that contact's device (the slot it speaks from is
    one that device had); each one shown verified (or device changed, or
    tag unchecked) is a contact whose device really sent a SAID, in its own
    name, for a roster this listener's owner confirmed; every participant
    that is no contact is unknown, binding differs or another call."""
    devices = list(devices)
    for listener in devices:
        if listener.call is None:
            continue
        participants = listener.call.participants
        by_contact = Counter(p.contact_id for p in participants[1:] if p.contact_id)
        assert all(n == 1 for n in by_contact.values()), (listener.name, participants)
        for p in participants[1:]:
            if p.contact_id is None:
                assert p.state in (RollCallState.UNKNOWN, RollCallState.BINDING_DIFFERS,
                                   RollCallState.OTHER_CALL), (listener.name, p)
                continue
            speaker = next((d for d in devices if d.path == listener.path and p.slot in d.slots), None)
            assert speaker is not None and speaker.person is not None, (listener.name, p)
            assert listener.person.contact_id(speaker.person) == p.contact_id, (
                f"{listener.name} shows contact {p.contact_id} for {speaker.name}'s device")
            if p.state in MATCHED:
                saids = [Said.parse(m) for m in speaker.sent_of(SAID)]
                assert any(s.speaker == speaker.key and s.roster in listener.confirmed for s in saids), (
                    f"{listener.name} shows {speaker.name} {p.state.name} without a SAID of {speaker.name}'s "
                    f"for a roster {listener.name} confirmed")
