"""Section 20 of docs/PROTOCOL.md (roll call, message version 2), built from that document only.

One device's roll call (:class:`RollCall`), sans I/O: the host reports the relay's events
(``joined``, ``peer_joined``, ``peer_left``, 15.9), passes each binary message with the slot it
came from (``receive``), calls ``tick`` about once a second, relays its owner's decisions
(``confirm_roster``, ``confirm_said``, ``enter_heard``) and sends, in order, whatever
``next_outgoing`` gives.  Every call takes the device's time; the core decides every message
(20.6): the HELLO (20.2), the VIEWs (20.3), each made when it is taken from the queue, and the
SAIDs (20.5).  It keeps the participants (the HELLOs held, their latest VIEWs, who is live and
present, who agrees), the roster and its rounds (the current one and the 8 before, 20.4), and
the checks of 20.5 with what each screen shows.

What earlier sections define comes from :mod:`independent.protocol`: the encodings (1), the
invite-code form (16.1: the meeting code), the voice-code text (9.6), the device-tag key ``T``
(10.1), and the per-contact device secrets with their matching rules (10.1, 10.3, 11.3:
``ContactSecrets``, ``ov_tag_heard``).  Every refusal raises the exception class of protocol.py
that carries the result code of 1.1 (``protocol.result_code`` names it); typing while locked
raises :class:`Locked`, whose code is ``locked``.  Ed25519 verification is libsodium's strict
one (1, 20.1): ``verify_strict`` adds to the ``cryptography`` package's check the refusals of
a non-canonical or small-order public key and a small-order ``R``.  The signature check and
the parsing of a message are pure functions and memoised: the same message reaches a device
from every peer, and the tests run many devices in one process.

Where the document leaves something open, the code says "Reading:" and what was assumed.  The
points, with the sentence of the document each concerns:

1. 20.2, "the smallest power of two from 32 up that is at least the number of contacts (at
   most 2048: a store with more contacts is invalid_argument)": whether contacts awaiting the
   peer's confirmation (8.1), which are left out of the tags, count.  Read: they do not; ``n``
   and the 2048 limit count the contacts whose tags are computed.
2. 20.2, "(one equal to a tag already there is drawn again)" covers a random tag; two
   contacts' tags that are equal (2^-128) would break "strictly ascending": not said.  Read:
   impossible in practice; the HELLO cannot be built (ValueError).
3. 20.2, step 7, "a HELLO that would make more than 100 HELLOs held whose bringers are
   present": the VIEW lists at most 100 names, its own among them, and also lists HELLOs whose
   participant's VIEW slot (not a bringer) is present.  Read: the count is of the HELLOs that
   would be listed, this device's own included, so that a VIEW can always be made.
4. 20.2, steps 5 and 6 against "A HELLO with the body of one already held (a repeat, a copy) is
   not refused": a copy of a held HELLO brought by a slot that already brought another one.
   Read: the steps come first, so it is refused (``malformed_message``, "a slot brings one
   HELLO"); the repeat rule applies to HELLOs that pass all seven steps.
5. 20.2 step 4 and 20.3 refuse a HELLO or a VIEW from a slot not in the room; a SAID from one
   (20.5: "Whoever carried it does not matter") is taken.  Not said: messages and peer events
   before the first ``joined`` (no room yet).  Read: ``invalid_state``.
6. 20.3, "a flag or have bit that must be 0 and is not" is listed with the shape checks, but
   the sender's own bit is known only once its HELLO is found (which of the names is its own).
   Read: the flag bits 1 to 7 and the bits past ``k`` are checked with the shape; the own bit
   right after "a list without the sender's own h" (``malformed_message``).
7. 20.3, "X is live once D holds a VIEW of X that lists D's own h": read as lasting, i.e. a
   later VIEW of X that does not list D does not make X not live (freshness was proven once).
8. 20.3, "a VIEW whose seq is not above the latest one held from that RK is ignored" and 20.6
   rules 5 and 6 ("on a VIEW that ..."): read as applying to VIEWs taken as the latest; an
   ignored repeat triggers nothing.
9. 20.3, bit 0 of flags, "its SAID of that roster went out": read as "its SAID of the current
   round was taken from the outgoing queue" (the same for rule 6's "once it sent its SAID").
10. 20.3, "Once the roster has not changed for 5 seconds": read as ``now - changed >= 5``; the
    time of the change is the device's time of the call that changed it (the start, for the
    first roster).
11. 20.4, "how many participants are unknown": participants whose binding differs, or of
    another call, are neither contacts nor unknown.  Read: they are counted apart in
    :class:`RosterSummary` (``binding_differs``, ``other_call``).
12. 20.4, confirming: "a device makes one per round" (20.5) for the SAID, but what ``I said
    it`` before the roster is confirmed, or twice in a round, is: not said.  Read:
    ``invalid_state`` both.
13. 20.5, "From a speaker that is its contact, it keeps the entry ...; from another it keeps
    nothing": the SAID's digest must still be kept to ignore a repeat, refuse a second
    different one and set the VIEW's ``have`` bit.  Read: the digest of every SAID taken is
    kept; the entry only from a contact.
14. 20.5, step 1: "makes the participant refused for this round (authentication_failed)".  The
    check runs when the second of code and SAID arrives; 1.1 says a refusal stores nothing,
    while this outcome is shown.  Read: "refused" is an outcome (state ``refused``, whose code
    is ``authentication_failed``, :data:`OUTCOME_RESULT`), not an exception; typing again for
    a participant refused in this round is "already checked" (``invalid_state``).
15. 20.5, the order of the typing refusals: read as ``invalid_state`` (not confirmed; not a
    contact or not in the roster; already checked), then the code's form
    (``invalid_argument``), then ``locked`` (as 10.2: "A typing error is refused without
    counting, even while the limiter is locked").  A host's index outside the roster's rows
    is ``invalid_argument`` (1.1: "an index"); the rows are the roster's names in ascending
    order, this device's among them.
16. 20.5, "What each screen shows": "verified, device changed, wrong or refused (in the round
    they happened in; a new round shows not yet)" against "A participant checked so stays
    checked for the rest of the roll call" and 20.4's "The checks of 20.5 outlive their
    round".  Read: the parenthesis is for wrong and refused only; verified, device changed
    and "verified, tag unchecked" (missing from that list) stay.
17. 20.5, "The head count is the number of present participants": whether this device is
    one.  Read: it is (the roster's size), since the host compares the head count with the
    number of people on the call, its owner among them.
18. 20.6 rule 2 (and the re-sends): whether a HELLO (or a SAID) already waiting in the queue
    is queued again.  Read: no, as for the VIEW ("one VIEW waits in the queue at most"): a
    waiting message goes out after the event anyway.
19. 20.6 rule 7, "its VIEW is due, and goes out at the next tick at least 1 second after its
    previous VIEW": read as satisfied by any VIEW made after the change (a VIEW is made when it
    is taken, from the state at that moment), so "due" is cleared whenever a VIEW is made.
20. 20.6 rule 7, "or it took a SAID": read as a SAID of another participant taken (20.5's
    word), not a repeat ignored, and not this device's own SAID going out.
21. 20.6 rule 8, "3 seconds after its roster last changed, then 4 seconds later, then every 8
    seconds": read as a fixed schedule from the change (change + 3, + 7, + 15, + 23, ...;
    each at the first tick at or after it; "later" than the point before, not than the tick
    that came after it), at each point of which the device re-sends if it is unsettled then:
    a device that becomes unsettled between two points waits for the next one (rule 6
    answers a missing SAID sooner).  The first roster's change is the start.  "in the last
    second" (rule 5) and "in the last 2 seconds" (rule 6) are read as ``now - sent < 1`` and
    ``< 2``; "at least 1 second after" (rule 7) as ``>= 1``.
22. 20.6 rule 8's "unsettled": "said set with a SAID this device does not hold" and "once this
    device said, a have without its bit" are read for a latest VIEW whose roster is this
    device's (another roster's flag and bits are of another round, and a present
    participant with another roster already makes the device unsettled).  A VIEW that does
    not list this device lacks its have bit (rule 6 and here).
23. 20.6 rule 1 on a rejoin: what was queued for the connection that dropped is dropped; the
    HELLO and the VIEW are queued anew.
24. 20.1, "any call more than 600 seconds later ... is expired, and ends it": read as: every
    later call is ``expired`` too and nothing more is sent; a time before 1970 is
    ``invalid_argument`` (1.1) first.
"""

from __future__ import annotations

import functools
import hmac
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from . import protocol as P
from . import ristretto255 as E
from .protocol import (
    AuthenticationFailed,
    Expired,
    InvalidArgument,
    InvalidKey,
    InvalidState,
    MalformedMessage,
    hkdf,
    hmac_sha256,
    sha256,
    u8,
)


class Locked(P.Locked):
    """``locked`` (1.1): a participant's code was compared three times in this round (20.5)."""
    code = "locked"


def lv_cat(*parts: bytes) -> bytes:
    """lv_cat of section 1, as protocol.lv_cat, with the one-byte LEB128 length of a part
    under 128 bytes written directly (every part here but a message body is that short)."""
    return b"".join(bytes((len(p),)) + p if len(p) < 0x80 else P.leb128(len(p)) + p
                    for p in parts)


def u16(n: int) -> bytes:
    return n.to_bytes(2, "big")


def u32(n: int) -> bytes:
    return n.to_bytes(4, "big")


# --------------------------------------------------------------------------------------------
# Section 1: strict Ed25519 verification (libsodium's crypto_sign_verify_detached)
# --------------------------------------------------------------------------------------------

_L = E.L
_P = E.P
_Y_MASK = (1 << 255) - 1


def _point_canonical(enc: bytes) -> bool:
    """The encoding's y (sign bit left out) is below p."""
    return int.from_bytes(enc, "little") & _Y_MASK < _P


def _decode_lenient(y: int, sign: int) -> E.Point | None:
    """The edwards25519 point of y (reduced modulo p) and the sign of x (RFC 8032 5.1.3,
    without the canonical checks), or None when there is none."""
    y %= _P
    u, v = (y * y - 1) % _P, (E.D * y * y + 1) % _P
    x = u * pow(v, 3, _P) % _P * pow(u * pow(v, 7, _P) % _P, (_P - 5) // 8, _P) % _P
    if v * x * x % _P != u:
        if v * x * x % _P != (-u) % _P:
            return None
        x = x * E.SQRT_M1 % _P
    if (x & 1) != sign:
        x = (_P - x) % _P
    return E.Point(x, y, 1, x * y % _P)


def _small_order_ys() -> frozenset:
    """The y of every point of order 1, 2, 4 or 8, and each y + p below 2^255 (a non-canonical
    encoding of the same point): L times a point of the curve is in the torsion group, which
    is cyclic of order 8, and an element of order 8 gives all of it (5 values of y: 1, -1, 0
    and the two of the points of order 8)."""
    y = 2
    while True:
        q = _decode_lenient(y, 0)
        y += 1
        if q is None:
            continue
        t = acc = E.scalar_mult(_L, q)
        ys = {1}
        for _ in range(7):
            ys.add(acc.y * pow(acc.z, _P - 2, _P) % _P)
            acc = E.add(acc, t)
        if len(ys) == 5:
            return frozenset(ys | {v + _P for v in ys if v + _P <= _Y_MASK})


_SMALL_ORDER_Y = _small_order_ys()


def _small_order(enc: bytes) -> bool:
    """The encoding stands for a point of small order, whatever its sign bit and whether its y
    is reduced (libsodium's list of such encodings compares them so)."""
    return int.from_bytes(enc, "little") & _Y_MASK in _SMALL_ORDER_Y


def verify_strict(public: bytes, signature: bytes, message: bytes) -> bool:
    """Ed25519 (RFC 8032, pure) with libsodium's strictness (section 1): S below the group
    order, the public key canonical and not of small order, R not of small order; then the
    signature itself (a non-canonical R cannot equal the recomputed one, which the
    ``cryptography`` package compares as bytes)."""
    if len(public) != 32 or len(signature) != 64:
        return False
    if int.from_bytes(signature[32:], "little") >= _L:
        return False
    if not _point_canonical(public) or _small_order(public) or _small_order(signature[:32]):
        return False
    return P.ed25519_verify(public, signature, message)


# --------------------------------------------------------------------------------------------
# 20.1 The meeting code, the roll call, its room and the call binding
# --------------------------------------------------------------------------------------------

VERSION = 2
HELLO_TYPE, SAID_TYPE, VIEW_TYPE = 1, 2, 3
RCID_LABEL = b"itsme-rollcall-v2"
ROOM_LABEL = b"itsme-rollcall-room-v1"
SESSION_LABEL = b"itsme-rc-session-v2"
BINDING_LABEL = b"itsme-rc-binding-v2"
SIGN_LABEL = b"itsme-rc-sign-v2"
ROOM_BYTES = 16
LIFETIME_SECONDS = 600
CLOCK_BACK_SECONDS = 30
BINDING_MIN, BINDING_MAX = 16, 64
KEY_BYTES = 32
SIGNATURE_BYTES = 64


def meeting_code(text: str) -> str:
    """A typed meeting code in its canonical form (the form of an invite code, 16.1);
    ``invalid_argument`` if it is not one."""
    return P.parse_code(text)


def draw_meeting_code(random1: Callable[[], int] | Iterable[int]) -> str:
    """Drawn as 16.1 draws an invite code."""
    return P.draw_code(random1)


def _canonical(code: str) -> bytes:
    if meeting_code(code) != code:
        raise ValueError("derivations take the meeting code's canonical form")
    return code.encode("ascii")


def rcid(code: str) -> bytes:
    """rcid = SHA-256(lv_cat('itsme-rollcall-v2', meeting_code))."""
    return sha256(lv_cat(RCID_LABEL, _canonical(code)))


def room_id(code: str) -> bytes:
    """room_id = first 16 bytes of SHA-256(lv_cat('itsme-rollcall-room-v1', meeting_code))."""
    return sha256(lv_cat(ROOM_LABEL, _canonical(code)))[:ROOM_BYTES]


def room_name(code: str) -> str:
    """The group room's name on the relay (15.9): room_id in lowercase hex."""
    return room_id(code).hex()


def check_binding(cb: bytes | None) -> bytes | None:
    """A call binding is 16 to 64 bytes (``invalid_argument`` otherwise); None: no binding."""
    if cb is None:
        return None
    cb = bytes(cb)
    if not BINDING_MIN <= len(cb) <= BINDING_MAX:
        raise InvalidArgument(f"a call binding is 16 to 64 bytes, not {len(cb)}")
    return cb


def session_id(rc: bytes, cb: bytes | None) -> bytes:
    """sid = SHA-256(lv_cat('itsme-rc-session-v2', rcid, u8(b), cb)), cb empty when b = 0."""
    b = 0 if cb is None else 1
    return sha256(lv_cat(SESSION_LABEL, rc, u8(b), cb or b""))


def binding_hash(rc: bytes, cb: bytes | None) -> bytes:
    """bind = SHA-256(lv_cat('itsme-rc-binding-v2', rcid, cb)) if b = 1; 32 zero bytes if b = 0."""
    if cb is None:
        return bytes(32)
    return sha256(lv_cat(BINDING_LABEL, rc, cb))


def signed_input(rc: bytes, body: bytes) -> bytes:
    """What the roll-call key signs: lv_cat('itsme-rc-sign-v2', rcid, body)."""
    return lv_cat(SIGN_LABEL, rc, body)


def roll_call_public(rk_seed: bytes) -> bytes:
    """RK of the 32-byte RFC 8032 private key rk."""
    return P.ed25519_public(rk_seed)


def sign_body(rk: Ed25519PrivateKey | bytes, rc: bytes, body: bytes) -> bytes:
    """message = body || Ed25519-Sign(rk, lv_cat('itsme-rc-sign-v2', rcid, body))."""
    if isinstance(rk, (bytes, bytearray)):
        rk = Ed25519PrivateKey.from_private_bytes(bytes(rk))
    return body + rk.sign(signed_input(rc, body))


@functools.lru_cache(maxsize=1 << 16)
def _signature_ok(rc: bytes, public: bytes, body: bytes, signature: bytes) -> bool:
    """Memoised (a pure function): the same message reaches a device from every peer."""
    return verify_strict(public, signature, signed_input(rc, body))


def _verified(rc: bytes, public: bytes, body: bytes, signature: bytes) -> None:
    if not _signature_ok(rc, public, body, signature):
        raise AuthenticationFailed("the signature does not verify with the RK the body carries")


# --------------------------------------------------------------------------------------------
# 20.2 HELLO
# --------------------------------------------------------------------------------------------

TAG_BYTES = 16
HASH_BYTES = 32
HELLO_FIXED = 1 + 1 + 1 + KEY_BYTES + HASH_BYTES + 2  # 69: the body before the tags
HELLO_OVERHEAD = HELLO_FIXED + SIGNATURE_BYTES  # 133
MIN_TAGS, MAX_TAGS = 32, 2048
PRESENCE_LABEL = b"itsme-rc-presence-v2"
MAX_HELLOS = 100
MAX_PRESENT = 50


def tag_count(contacts: int) -> int:
    """n: the smallest power of two from 32 up that is at least the number of contacts; more
    than 2048 contacts is ``invalid_argument``."""
    if contacts < 0:
        raise ValueError("a count of contacts is not negative")
    if contacts > MAX_TAGS:
        raise InvalidArgument(f"{contacts} contacts: a roll call takes at most {MAX_TAGS}")
    n = MIN_TAGS
    while n < contacts:
        n *= 2
    return n


def presence_tag(seed: bytes, sid: bytes, rk_from: bytes, pid_from: bytes,
                 pid_to: bytes) -> bytes:
    """tag(D->C) = first 16 bytes of HMAC(seed_C, lv_cat('itsme-rc-presence-v2', sid, RK_D,
    pid_D, pid_C))."""
    return hmac_sha256(seed, lv_cat(PRESENCE_LABEL, sid, rk_from, pid_from, pid_to))[:TAG_BYTES]


def hello_body(b: int, rk_public: bytes, bind: bytes, tags: Iterable[bytes]) -> bytes:
    """u8(2) || u8(1) || u8(b) || RK || bind || u16(n) || the n tags in ascending order."""
    tags = sorted(bytes(t) for t in tags)
    if b not in (0, 1) or len(rk_public) != KEY_BYTES or len(bind) != HASH_BYTES:
        raise ValueError("b is 0 or 1, RK and bind are 32 bytes")
    if b == 0 and any(bind):
        raise ValueError("bind is 32 zero bytes without a binding")
    if any(len(t) != TAG_BYTES for t in tags) or len(set(tags)) != len(tags):
        raise ValueError("the tags are 16 bytes each and distinct (strictly ascending)")
    n = len(tags)
    if n < MIN_TAGS or n > MAX_TAGS or n & (n - 1):
        raise ValueError("a HELLO has a power of two from 32 to 2048 tags")
    return u8(VERSION) + u8(HELLO_TYPE) + u8(b) + rk_public + bind + u16(n) + b"".join(tags)


def name_of(hello_body_bytes: bytes) -> bytes:
    """h = SHA-256(HELLO body), the body without the signature."""
    return sha256(hello_body_bytes)


@dataclass(frozen=True)
class Hello:
    body: bytes
    signature: bytes
    b: int
    rk: bytes
    bind: bytes
    tags: tuple[bytes, ...]

    @property
    def name(self) -> bytes:
        return name_of(self.body)


@functools.lru_cache(maxsize=1 << 14)
def parse_hello(message: bytes) -> Hello:
    """20.2 step 1, ``malformed_message``: a length other than 133 + 16n, n not a power of two
    from 32 to 2048, tags not strictly ascending, b not 0 or 1, b = 0 with bind not zero,
    another version (or type)."""
    message = bytes(message)
    if len(message) < HELLO_OVERHEAD:
        raise MalformedMessage("a HELLO is at least 133 bytes")
    n = int.from_bytes(message[HELLO_FIXED - 2:HELLO_FIXED], "big")
    if len(message) != HELLO_OVERHEAD + TAG_BYTES * n:
        raise MalformedMessage("a HELLO is 133 + 16n bytes")
    if n < MIN_TAGS or n > MAX_TAGS or n & (n - 1):
        raise MalformedMessage(f"a HELLO of {n} tags")
    end = HELLO_FIXED + TAG_BYTES * n
    tags = tuple(message[i:i + TAG_BYTES] for i in range(HELLO_FIXED, end, TAG_BYTES))
    if any(a >= b for a, b in zip(tags, tags[1:])):
        raise MalformedMessage("a HELLO's tags are in strictly ascending order")
    b = message[2]
    bind = message[35:67]
    if b not in (0, 1):
        raise MalformedMessage(f"a binding flag of {b}")
    if b == 0 and any(bind):
        raise MalformedMessage("b = 0 with a bind that is not all zero")
    if message[0] != VERSION or message[1] != HELLO_TYPE:
        raise MalformedMessage("not a HELLO of version 2")
    return Hello(message[:end], message[end:], b, message[3:35], bind, tags)


# --------------------------------------------------------------------------------------------
# 20.3 VIEW and the roster
# --------------------------------------------------------------------------------------------

VIEW_FIXED = 1 + 1 + KEY_BYTES + 4 + 2 + HASH_BYTES + 1 + 1  # 74: the body before the names
VIEW_OVERHEAD = VIEW_FIXED + SIGNATURE_BYTES  # 138
MAX_NAMES = 100
SAID_FLAG = 0x01
ROSTER_LABEL = b"itsme-rc-roster-v2"


def roster_hash(rc: bytes, names: Iterable[bytes]) -> bytes:
    """roster = SHA-256(lv_cat('itsme-rc-roster-v2', rcid, h_1, ..., h_m)), names ascending."""
    return sha256(lv_cat(ROSTER_LABEL, rc, *sorted(names)))


def have_bits(names: Sequence[bytes], held: Callable[[bytes], bool]) -> bytes:
    """Bit j (byte j div 8, bit 7 - j mod 8) set when ``held(h_(j+1))``."""
    out = bytearray((len(names) + 7) // 8)
    for j, name in enumerate(names):
        if held(name):
            out[j // 8] |= 0x80 >> (j % 8)
    return bytes(out)


def bit_of(have: bytes, j: int) -> bool:
    return bool(have[j // 8] & (0x80 >> (j % 8)))


def view_body(rk_public: bytes, seq: int, slot: int, roster: bytes, said: bool,
              names: Sequence[bytes], have: bytes) -> bytes:
    """u8(2) || u8(3) || RK || u32(seq) || u16(slot) || roster || u8(flags) || u8(k) ||
    h_1 || ... || h_k || have."""
    names = list(names)
    if names != sorted(set(names)) or not 1 <= len(names) <= MAX_NAMES:
        raise ValueError("1 to 100 names, strictly ascending")
    if len(have) != (len(names) + 7) // 8:
        raise ValueError("have is ceil(k/8) bytes")
    return (u8(VERSION) + u8(VIEW_TYPE) + rk_public + u32(seq) + u16(slot) + roster
            + u8(SAID_FLAG if said else 0) + u8(len(names)) + b"".join(names) + have)


@dataclass(frozen=True)
class View:
    body: bytes
    signature: bytes
    rk: bytes
    seq: int
    slot: int
    roster: bytes
    said: bool
    names: tuple[bytes, ...]
    have: bytes

    def holds(self, name: bytes) -> bool:
        """The have bit of ``name`` (False for a name the VIEW does not list)."""
        try:
            j = self.names.index(name)
        except ValueError:
            return False
        return bit_of(self.have, j)


@functools.lru_cache(maxsize=1 << 14)
def parse_view(message: bytes) -> View:
    """20.3's form, ``malformed_message``: a length other than 138 + 32k + ceil(k/8), k not 1 to
    100, the names not strictly ascending, a flag bit other than bit 0 or a have bit past k set,
    another version (or type).  The sender's own have bit is checked once its name is known
    (see RollCall._receive_view)."""
    message = bytes(message)
    if len(message) < VIEW_OVERHEAD:
        raise MalformedMessage("a VIEW is at least 138 bytes")
    k = message[VIEW_FIXED - 1]
    if len(message) != VIEW_OVERHEAD + HASH_BYTES * k + (k + 7) // 8:
        raise MalformedMessage("a VIEW is 138 + 32k + ceil(k/8) bytes")
    if not 1 <= k <= MAX_NAMES:
        raise MalformedMessage(f"a VIEW of {k} names")
    end_names = VIEW_FIXED + HASH_BYTES * k
    names = tuple(message[i:i + HASH_BYTES] for i in range(VIEW_FIXED, end_names, HASH_BYTES))
    if any(a >= b for a, b in zip(names, names[1:])):
        raise MalformedMessage("a VIEW's names are strictly ascending")
    flags = message[VIEW_FIXED - 2]
    if flags & ~SAID_FLAG:
        raise MalformedMessage("a VIEW flag bit other than bit 0 is set")
    end = end_names + (k + 7) // 8
    have = message[end_names:end]
    if any(bit_of(have, j) for j in range(k, 8 * len(have))):
        raise MalformedMessage("a have bit past k is set")
    if message[0] != VERSION or message[1] != VIEW_TYPE:
        raise MalformedMessage("not a VIEW of version 2")
    return View(message[:end], message[end:], message[2:34],
                int.from_bytes(message[34:38], "big"), int.from_bytes(message[38:40], "big"),
                message[40:72], bool(flags & SAID_FLAG), names, have)


# --------------------------------------------------------------------------------------------
# 20.4 The code
# --------------------------------------------------------------------------------------------

CODE_VALUES = P.VOICE_CODE_VALUES  # 26000
ROUNDS_KEPT = 9  # the current round and the 8 before it


def draw_code_value(random2: Callable[[], bytes] | Iterable[bytes]) -> int:
    """Two random bytes, v their big-endian value with the top bit cleared, drawn again while
    v >= 26000."""
    if not callable(random2):
        it = iter(random2)
        random2 = lambda: next(it)  # noqa: E731
    while True:
        pair = random2()
        if len(pair) != 2:
            raise ValueError("the code is drawn two bytes at a time")
        v = int.from_bytes(pair, "big") & 0x7FFF
        if v < CODE_VALUES:
            return v


def code_text(value: int) -> str:
    """A NATO word and three digits, as 9.6 ('ECHO 042')."""
    return P.format_voice_code(value)


# --------------------------------------------------------------------------------------------
# 20.5 SAID
# --------------------------------------------------------------------------------------------

CODE_KEY_LABEL = b"itsme-rc-code-v2"
DEVICE_LABEL = b"itsme-rc-device-v2"
SAID_FIXED = 1 + 1 + KEY_BYTES + HASH_BYTES + 1  # 67: the body before the entries
SAID_OVERHEAD = SAID_FIXED + SIGNATURE_BYTES  # 131
PLAINTEXT_BYTES = 2 + 32
ENTRY_BYTES = PLAINTEXT_BYTES + 16  # 50
MAX_ENTRIES = MAX_PRESENT - 1  # 49
ENTRY_NONCE = bytes(12)
ATTEMPTS_PER_ROUND = 3


def code_key(seed: bytes, sid: bytes, roster: bytes, name_s: bytes, name_p: bytes,
             pid_s: bytes, pid_c: bytes) -> bytes:
    """k(S->P) = HKDF(ikm = seed_C, salt = roster, info = lv_cat('itsme-rc-code-v2', sid, h_S,
    h_P, pid_S, pid_C), L = 32)."""
    return hkdf(seed, roster, lv_cat(CODE_KEY_LABEL, sid, name_s, name_p, pid_s, pid_c), 32)


def device_tag(seed: bytes, pid_s: bytes, roster: bytes, device_secret: bytes | None) -> bytes:
    """dtag(S) = HMAC(T, lv_cat('itsme-rc-device-v2', pid_S, roster, device_secret(S))), T of
    10.1; the empty string on a device that holds no secret."""
    return hmac_sha256(P.tag_key(seed), lv_cat(DEVICE_LABEL, pid_s, roster, device_secret or b""))


def entry_aad(roster: bytes) -> bytes:
    """u8(2) || u8(2) || roster, a plain concatenation."""
    return u8(VERSION) + u8(SAID_TYPE) + roster


def entry_plaintext(value: int, dtag: bytes) -> bytes:
    """u16(v) || dtag(S)."""
    if not 0 <= value < CODE_VALUES or len(dtag) != 32:
        raise ValueError("a code below 26000 and a 32-byte device tag")
    return u16(value) + dtag


def seal_entry(key: bytes, roster: bytes, value: int, dtag: bytes) -> bytes:
    return ChaCha20Poly1305(key).encrypt(ENTRY_NONCE, entry_plaintext(value, dtag),
                                         entry_aad(roster))


def open_entry(key: bytes, roster: bytes, entry: bytes) -> tuple[int, bytes]:
    """20.5 step 1: (v, dtag), or ``authentication_failed`` for an entry that does not open,
    whose plaintext is not 34 bytes or whose v is not below 26000."""
    try:
        plain = ChaCha20Poly1305(key).decrypt(ENTRY_NONCE, entry, entry_aad(roster))
    except InvalidTag as exc:
        raise AuthenticationFailed("the entry does not open") from exc
    if len(plain) != PLAINTEXT_BYTES:
        raise AuthenticationFailed("the entry's plaintext is not 34 bytes")
    value = int.from_bytes(plain[:2], "big")
    if value >= CODE_VALUES:
        raise AuthenticationFailed("the entry's code is not below 26000")
    return value, plain[2:]


def said_body(rk_public: bytes, roster: bytes, entries: Sequence[bytes]) -> bytes:
    """u8(2) || u8(2) || RK_S || roster || u8(m) || the m entries."""
    if not 1 <= len(entries) <= MAX_ENTRIES or any(len(e) != ENTRY_BYTES for e in entries):
        raise ValueError("a SAID has 1 to 49 entries of 50 bytes")
    return (u8(VERSION) + u8(SAID_TYPE) + rk_public + roster + u8(len(entries))
            + b"".join(entries))


@dataclass(frozen=True)
class Said:
    body: bytes
    signature: bytes
    rk: bytes
    roster: bytes
    entries: tuple[bytes, ...]


@functools.lru_cache(maxsize=1 << 14)
def parse_said(message: bytes) -> Said:
    """20.5's form, ``malformed_message``: a length other than 131 + 50m, m not 1 to 49,
    another version (or type)."""
    message = bytes(message)
    if len(message) < SAID_OVERHEAD:
        raise MalformedMessage("a SAID is at least 131 bytes")
    m = message[SAID_FIXED - 1]
    if len(message) != SAID_OVERHEAD + ENTRY_BYTES * m:
        raise MalformedMessage("a SAID is 131 + 50m bytes")
    if not 1 <= m <= MAX_ENTRIES:
        raise MalformedMessage(f"a SAID of {m} entries")
    if message[0] != VERSION or message[1] != SAID_TYPE:
        raise MalformedMessage("not a SAID of version 2")
    end = SAID_FIXED + ENTRY_BYTES * m
    entries = tuple(message[i:i + ENTRY_BYTES] for i in range(SAID_FIXED, end, ENTRY_BYTES))
    return Said(message[:end], message[end:], message[2:34], message[34:66], entries)


# --------------------------------------------------------------------------------------------
# What a screen shows (20.5)
# --------------------------------------------------------------------------------------------

NOT_YET = "not_yet"
VERIFIED = "verified"
DEVICE_CHANGED = "device_changed"
TAG_UNCHECKED = "verified_tag_unchecked"
WRONG = "wrong"
REFUSED = "refused"  # 20.5 step 1: neither verified nor wrong
UNKNOWN = "unknown"
BINDING_DIFFERS = "binding_differs"
OTHER_CALL = "other_call"  # "another call"
CONTACT = "contact"  # the relation of a participant that is a contact (its state is above)

# The result code each outcome stands for (REFUSED is the authentication_failed of step 1).
OUTCOME_RESULT = {REFUSED: AuthenticationFailed.code}
_OUTCOME = {P.VERIFIED: VERIFIED, P.VERIFIED_DEVICE_CHANGED: DEVICE_CHANGED,
            P.VERIFIED_TAG_UNCHECKED: TAG_UNCHECKED}


# --------------------------------------------------------------------------------------------
# One device's roll call
# --------------------------------------------------------------------------------------------

@dataclass
class Contact:
    """A contact as this device holds it: a name to show, its pid (9: the identity public key,
    or the 8 fingerprint bytes of a source-format contact), the seed (3) and the device secrets
    with their Security PIN Update state (10.1, 10.3).  A contact awaiting the peer's
    confirmation (8.1) takes no part."""
    name: str
    pid: bytes
    seed: bytes
    secrets: P.ContactSecrets = field(default_factory=lambda: P.ContactSecrets(None, None))
    awaiting_confirmation: bool = False


@dataclass
class Participant:
    """A HELLO held (20.2), with what this device knows of its participant."""
    name: bytes
    hello: Hello
    relation: str  # CONTACT, UNKNOWN, BINDING_DIFFERS or OTHER_CALL
    contact: int | None  # index into the roll call's contacts
    bringers: set = field(default_factory=set)
    view: View | None = None  # the latest VIEW taken
    live: bool = False
    shown: bool = False  # has been present


@dataclass
class _Round:
    """What a round (a roster) holds (20.4, 20.5)."""
    roster: bytes
    members: tuple[bytes, ...]  # the roster's names, ascending, this device's among them
    confirmed: bool = False
    code: int | None = None
    said: bytes | None = None  # this device's SAID of the round
    said_out: bool = False
    said_sent_at: float | None = None
    taken: dict = field(default_factory=dict)  # speaker name -> digest of the SAID body taken
    entries: dict = field(default_factory=dict)  # speaker name -> the entry kept (contacts)
    heard: dict = field(default_factory=dict)  # name -> value typed, not compared yet
    compared: dict = field(default_factory=dict)  # name -> comparisons made
    outcome: dict = field(default_factory=dict)  # name -> WRONG or REFUSED in this round


@dataclass(frozen=True)
class RosterSummary:
    """What 20.4 shows before the owner confirms."""
    roster: bytes
    contacts_present: tuple[str, ...]
    unknown: int
    binding_differs: int
    other_call: int
    size: int  # this device included


@dataclass(frozen=True)
class Row:
    """One participant that has been present, as a screen shows it (20.5)."""
    name: bytes
    contact: str | None
    state: str
    present: bool
    agrees: bool


_HELLO, _VIEW, _SAID = "hello", "view", "said"
# 20.6 rule 8: "3 seconds after its roster last changed, then 4 seconds later, then every 8".
RESEND_FIRST, RESEND_SECOND, RESEND_EVERY = 3, 4, 8


class RollCall:
    """One device's roll call (20).

    ``contacts`` are looked up in their order ("the first one wins", 20.2).  ``rk_seed`` is the
    roll-call key's 32-byte RFC 8032 private key, ``padding_tags`` the HELLO's random tags (as
    many as n minus the contacts taking part), ``codes`` the code values of successive
    confirmations; each is drawn from ``random_bytes`` (os.urandom) when not given.  The roll
    call starts at ``now``.  Every refusal raises the exception of its result code and leaves
    the state as it was."""

    def __init__(self, meeting_code_text: str, contacts: Sequence[Contact], pid: bytes,
                 now: float, *, binding: bytes | None = None, rk_seed: bytes | None = None,
                 padding_tags: Sequence[bytes] | None = None, codes: Iterable[int] | None = None,
                 random_bytes: Callable[[int], bytes] = os.urandom):
        if now < 0:
            raise InvalidArgument("a time before 1970")
        self.meeting_code = meeting_code(meeting_code_text)
        self.rcid = rcid(self.meeting_code)
        self.room_id = room_id(self.meeting_code)
        self.binding = check_binding(binding)
        self.b = 0 if self.binding is None else 1
        self.sid = session_id(self.rcid, self.binding)
        self.bind = binding_hash(self.rcid, self.binding)
        self.pid = bytes(pid)
        self.contacts = list(contacts)
        self._random = random_bytes
        self._codes = iter(codes) if codes is not None else None
        self.started_at = now
        self._now = now
        self._ended = False

        rk_seed = bytes(rk_seed) if rk_seed is not None else random_bytes(KEY_BYTES)
        if len(rk_seed) != KEY_BYTES:
            raise ValueError("the roll-call key is a 32-byte private key")
        self._rk = Ed25519PrivateKey.from_private_bytes(rk_seed)
        self.rk_public = self._rk.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

        # Reading: (1) n and its limit count the contacts whose tags are computed.
        self._taking_part = [i for i, c in enumerate(self.contacts)
                             if not c.awaiting_confirmation]
        n = tag_count(len(self._taking_part))
        real = [presence_tag(self.contacts[i].seed, self.sid, self.rk_public, self.pid,
                             self.contacts[i].pid) for i in self._taking_part]
        if len(set(real)) != len(real):  # Reading: (2)
            raise ValueError("two contacts' presence tags are equal")
        if padding_tags is not None:
            padding = [bytes(t) for t in padding_tags]
            if len(padding) != n - len(real):
                raise ValueError(f"{n - len(real)} padding tags, not {len(padding)}")
        else:
            padding, seen = [], set(real)
            while len(padding) < n - len(real):
                t = random_bytes(TAG_BYTES)
                if t not in seen:  # "one equal to a tag already there is drawn again"
                    seen.add(t)
                    padding.append(t)
        self.contact_tags = real
        self.padding_tags = padding
        self.hello_body = hello_body(self.b, self.rk_public, self.bind, real + padding)
        self.hello = sign_body(self._rk, self.rcid, self.hello_body)  # signed once
        self.name = name_of(self.hello_body)

        self.slot: int | None = None
        self._present_slots: set = set()
        self._held: dict[bytes, Participant] = {}
        self._by_rk: dict[bytes, bytes] = {}
        self._slot_brought: dict = {}
        self._checked: dict[bytes, str] = {}
        self._listed: frozenset = frozenset([self.name])
        self._present: dict[bytes, int] = {}
        self._rounds: OrderedDict[bytes, _Round] = OrderedDict()
        self._switch_round((self.name,))
        self.roster_changed_at = now

        self._queue: list = []
        self._seq = 0
        self.last_view_at: float | None = None
        self.last_hello_at: float | None = None
        self._view_due = False
        self._resend_at = now + RESEND_FIRST
        self._resend_step = 0
        self.sent = {_HELLO: 0, _VIEW: 0, _SAID: 0}  # messages taken, by kind

    # -- time ------------------------------------------------------------------------------

    def _alive(self, now: float) -> None:
        if now < 0:
            raise InvalidArgument("a time before 1970")
        if self._ended:
            raise Expired("the roll call has ended")  # Reading: (24)
        if now - self.started_at > LIFETIME_SECONDS or now < self.started_at - CLOCK_BACK_SECONDS:
            self._ended = True
            self._queue.clear()
            raise Expired("more than 600 seconds after the start, or a clock set back")
        self._now = now

    @property
    def ended(self) -> bool:
        return self._ended

    # -- the state derived -----------------------------------------------------------------

    def _compute_listed(self) -> frozenset:
        """Its own, and every HELLO it holds whose bringer, or whose participant's VIEW slot,
        is present in the room."""
        s = self._present_slots
        return frozenset([self.name, *(
            n for n, p in self._held.items()
            if not s.isdisjoint(p.bringers) or (p.view is not None and p.view.slot in s))])

    def _switch_round(self, members: tuple) -> None:
        roster = roster_hash(self.rcid, members)
        rnd = self._rounds.get(roster)
        if rnd is None:
            rnd = self._rounds[roster] = _Round(roster, members)
        self._rounds.move_to_end(roster)
        while len(self._rounds) > ROUNDS_KEPT:
            self._rounds.popitem(last=False)
        self._round = rnd

    def _update(self, now: float) -> None:
        """After every change: forget pending HELLOs no present slot brought (20.3), then who
        is present, the list (rule 4: a change sends the VIEW) and the roster (a change is a
        new round, or an earlier one back, and makes the VIEW due, rule 7)."""
        s, held = self._present_slots, self._held
        for n in [n for n, p in held.items() if not p.live and s.isdisjoint(p.bringers)]:
            del self._by_rk[held.pop(n).hello.rk]
        present = {}  # name -> the slot of its latest VIEW
        for n, p in held.items():
            if p.live and p.view.slot in s:  # live: a VIEW is held
                present[n] = p.view.slot
                p.shown = True
        self._present = present
        if len(present) + 1 != len(self._round.members) or any(
                n not in present for n in self._round.members if n != self.name):
            self._switch_round(tuple(sorted([*present, self.name])))
            self.roster_changed_at = now
            self._view_due = True
            self._resend_at, self._resend_step = now + RESEND_FIRST, 0
        listed = self._compute_listed()
        if listed != self._listed:
            self._listed = listed
            self._queue_view()

    # -- the outgoing queue (20.6) -----------------------------------------------------------

    def _queue_hello(self) -> None:
        if self.slot is not None and _HELLO not in self._queue:  # Reading: (18)
            self._queue.append(_HELLO)

    def _queue_view(self) -> None:
        if self.slot is not None and _VIEW not in self._queue:  # one VIEW waits at most
            self._queue.append(_VIEW)

    def _queue_said(self) -> None:
        item = (_SAID, self._round.roster)
        if self._round.said is not None and item not in self._queue:  # Reading: (18)
            self._queue.append(item)

    def next_outgoing(self) -> bytes | None:
        """The next message to send to the group room, or None.  A VIEW is made now, from the
        state at this moment."""
        while self._queue:
            item = self._queue.pop(0)
            if item == _HELLO:
                self.last_hello_at = self._now
                self.sent[_HELLO] += 1
                return self.hello
            if item == _VIEW:
                self.sent[_VIEW] += 1
                return self._make_view()
            rnd = self._rounds.get(item[1])
            if rnd is None or rnd.said is None:
                continue  # a round no longer kept
            rnd.said_out = True  # Reading: (9) its SAID "went out" when it is taken
            rnd.said_sent_at = self._now
            self.sent[_SAID] += 1
            return rnd.said
        return None

    def outgoing(self) -> list[bytes]:
        """Everything queued, in order."""
        out = []
        while (m := self.next_outgoing()) is not None:
            out.append(m)
        return out

    def _make_view(self) -> bytes:
        rnd = self._round
        names = sorted(self._listed)
        have = have_bits(names, lambda n: n != self.name and n in rnd.taken)
        self._seq += 1
        body = view_body(self.rk_public, self._seq, self.slot, rnd.roster, rnd.said_out, names,
                         have)
        self.last_view_at = self._now
        self._view_due = False  # Reading: (19)
        return sign_body(self._rk, self.rcid, body)

    @property
    def seq(self) -> int:
        return self._seq

    # -- the relay's events (15.9, 20.6 rules 1 to 3) ----------------------------------------

    def joined(self, slot: int, peers: Iterable[int], now: float) -> None:
        """Rule 1: the relay's ``joined`` (a first join or a rejoin, 20.7)."""
        self._alive(now)
        if not isinstance(slot, int) or not 1 <= slot <= 0xFFFF:
            raise InvalidArgument(f"a relay slot is 1 to 65535, not {slot!r}")
        self.slot = slot
        self._present_slots = set(peers) - {slot}
        self._queue.clear()  # Reading: (23)
        self._queue_hello()
        self._queue_view()
        self._update(now)

    def peer_joined(self, slot: int, now: float) -> None:
        """Rule 2: send the HELLO (the newcomer needs it), nothing else."""
        self._alive(now)
        if self.slot is None:
            raise InvalidState("a peer event before joined")  # Reading: (5)
        self._present_slots.add(slot)
        self._queue_hello()
        self._update(now)

    def peer_left(self, slot: int, now: float) -> None:
        """Rule 3: forget the slot."""
        self._alive(now)
        if self.slot is None:
            raise InvalidState("a peer event before joined")  # Reading: (5)
        self._present_slots.discard(slot)
        self._update(now)

    # -- receiving ---------------------------------------------------------------------------

    def receive(self, message: bytes, slot: int, now: float) -> str:
        """A binary message from relay slot ``slot``.  Returns what was done ("hello",
        "hello repeat", "view", "view ignored", "said", "said ignored"); raises the refusal
        otherwise."""
        self._alive(now)
        if self.slot is None:
            raise InvalidState("a message before joined")  # Reading: (5)
        message = bytes(message)
        kind = message[1] if len(message) >= 2 else None
        if kind == HELLO_TYPE:
            return self._receive_hello(message, slot, now)
        if kind == VIEW_TYPE:
            return self._receive_view(message, slot, now)
        if kind == SAID_TYPE:
            return self._receive_said(message, now)
        raise MalformedMessage("not a roll-call message of a known type")

    def receive_forwarded(self, forwarded: bytes, now: float) -> str:
        """A binary message as a group room forwards it (15.9): u16(slot) || payload."""
        if len(forwarded) < 2:
            self._alive(now)
            raise MalformedMessage("a forwarded message starts with its sender's slot")
        return self.receive(forwarded[2:], int.from_bytes(forwarded[:2], "big"), now)

    def _identify(self, hello: Hello) -> tuple[str, int | None]:
        if hello.b != self.b:
            return BINDING_DIFFERS, None
        if hello.bind != self.bind:
            return OTHER_CALL, None
        tags = set(hello.tags)
        for i in self._taking_part:
            c = self.contacts[i]
            if presence_tag(c.seed, self.sid, hello.rk, c.pid, self.pid) in tags:
                return CONTACT, i
        return UNKNOWN, None

    def _receive_hello(self, message: bytes, slot: int, now: float) -> str:
        hello = parse_hello(message)  # 1
        _verified(self.rcid, hello.rk, hello.body, hello.signature)  # 2
        if hello.rk == self.rk_public:  # 3
            raise InvalidKey("this device's own roll-call key")
        if slot not in self._present_slots:  # 4
            raise InvalidState("a HELLO carried by a slot that is not in the room")
        name = hello.name
        held = self._by_rk.get(hello.rk)
        if held is not None and held != name:  # 5
            raise MalformedMessage("a second HELLO for one roll-call key")
        brought = self._slot_brought.get(slot)
        if brought is not None and brought != name:  # 6; Reading: (4)
            raise MalformedMessage("a second HELLO from one relay slot")
        if len(self._listed | {name}) > MAX_HELLOS:  # 7; Reading: (3)
            raise InvalidArgument("more than 100 HELLOs held whose bringers are present")
        self._slot_brought[slot] = name
        p = self._held.get(name)
        if p is not None:  # a repeat or a copy: one more bringer
            if slot not in p.bringers:
                p.bringers.add(slot)
                self._update(now)
            return "hello repeat"
        relation, contact = self._identify(hello)
        self._held[name] = Participant(name, hello, relation, contact, {slot})
        self._by_rk[hello.rk] = name
        self._update(now)
        return "hello"

    def _receive_view(self, message: bytes, slot: int, now: float) -> str:
        view = parse_view(message)
        _verified(self.rcid, view.rk, view.body, view.signature)
        if view.rk == self.rk_public:
            raise InvalidKey("this device's own roll-call key")
        name = self._by_rk.get(view.rk)
        if name is None:
            raise InvalidState("a VIEW whose HELLO is not held (it may be on its way)")
        if name not in view.names:
            raise MalformedMessage("a VIEW that does not list its sender's own h")
        if view.holds(name):  # Reading: (6)
            raise MalformedMessage("a VIEW whose sender's own have bit is set")
        p = self._held[name]
        if p.view is not None and view.seq <= p.view.seq:
            return "view ignored"  # a repeat, or older
        if view.slot != slot:
            raise InvalidState("a VIEW carried by another slot than its own")
        if view.slot not in self._present_slots:
            raise InvalidState("a VIEW of a slot not present")
        for n, other_slot in self._present.items():
            if n != name and other_slot == view.slot:
                raise InvalidState("the slot of another present participant's latest VIEW")
        live = p.live or self.name in view.names  # Reading: (7)
        if live and name not in self._present:
            if 1 + len(self._present) + 1 > MAX_PRESENT:
                raise InvalidArgument("more than 50 participants present")
        unchanged = self._present.get(name) == view.slot  # present before, and so after
        p.view, p.live = view, live
        if not unchanged:
            self._update(now)
        # Reading: (8) rules 5 and 6 on a VIEW taken.
        if self.name not in view.names:  # rule 5
            if self.last_hello_at is None or not now - self.last_hello_at < 1:
                self._queue_hello()
        rnd = self._round
        if (view.roster == rnd.roster and rnd.said_out and not view.holds(self.name)
                and not (rnd.said_sent_at is not None and now - rnd.said_sent_at < 2)):
            self._queue_said()  # rule 6
        return "view"

    def _receive_said(self, message: bytes, now: float) -> str:
        said = parse_said(message)
        _verified(self.rcid, said.rk, said.body, said.signature)
        if said.rk == self.rk_public:
            raise InvalidKey("this device's own SAID, reflected")
        rnd = self._round
        speaker = self._by_rk.get(said.rk)
        if speaker is None or speaker not in rnd.members:
            raise InvalidState("a speaker that is not in the roster")
        if said.roster != rnd.roster:
            raise InvalidState("a SAID of another roster")
        digest = sha256(said.body)
        taken = rnd.taken.get(speaker)
        if taken is not None:
            if taken == digest:
                return "said ignored"
            raise MalformedMessage("a second, different SAID from one speaker in this round")
        if len(said.entries) != len(rnd.members) - 1:
            raise MalformedMessage("a SAID whose m is not the roster's size minus one")
        rnd.taken[speaker] = digest  # Reading: (13)
        if self._held[speaker].relation == CONTACT:
            others = [n for n in rnd.members if n != speaker]
            rnd.entries[speaker] = said.entries[others.index(self.name)]
            self._check(speaker)
        self._view_due = True  # rule 7; Reading: (20)
        return "said"

    # -- ticks (20.6 rules 7 and 8) ------------------------------------------------------------

    def tick(self, now: float) -> None:
        self._alive(now)
        if self.slot is None:
            return
        if self._view_due and (self.last_view_at is None or now - self.last_view_at >= 1):
            self._queue_view()
        if now >= self._resend_at:  # Reading: (21) at change + 3, + 7, + 15, + 23, ...
            if self.unsettled():
                self._queue_hello()
                self._queue_view()
                self._queue_said()
            while self._resend_at <= now:
                self._resend_step += 1
                self._resend_at += RESEND_SECOND if self._resend_step == 1 else RESEND_EVERY

    def unsettled(self) -> bool:
        """Rule 8: a participant it lists has no VIEW here, or a latest VIEW that does not list
        this device, or, once present, a roster other than its own, or said set with a SAID
        this device does not hold, or, once this device said, a have without its bit."""
        rnd = self._round
        for n in self._listed:
            if n == self.name:
                continue
            p = self._held[n]
            v = p.view
            if v is None or self.name not in v.names:
                return True
            if v.roster != rnd.roster:
                if n in self._present:
                    return True
                continue
            # Reading: (22) the last two for a VIEW of this device's roster.
            if v.said and n not in rnd.taken:
                return True
            if rnd.said_out and not v.holds(self.name):
                return True
        return False

    # -- 20.4 confirming the roster -----------------------------------------------------------

    @property
    def roster(self) -> bytes:
        return self._round.roster

    @property
    def members(self) -> tuple[bytes, ...]:
        """The roster's names in ascending order (its rows), this device's among them."""
        return self._round.members

    def summary(self, now: float) -> RosterSummary:
        """What the owner is shown before confirming (Reading: (11))."""
        self._alive(now)
        contacts, counts = [], {UNKNOWN: 0, BINDING_DIFFERS: 0, OTHER_CALL: 0}
        for n in self._round.members:
            if n == self.name:
                continue
            p = self._held[n]
            if p.relation == CONTACT:
                contacts.append(self.contacts[p.contact].name)
            else:
                counts[p.relation] += 1
        return RosterSummary(self._round.roster, tuple(contacts), counts[UNKNOWN],
                             counts[BINDING_DIFFERS], counts[OTHER_CALL],
                             len(self._round.members))

    def confirm_roster(self, roster: bytes, now: float) -> str:
        """The owner confirms the roster ``roster``; draws this round's code and returns its
        text.  Another roster, a second confirmation, or a roster of this device alone is
        ``invalid_state``."""
        self._alive(now)
        rnd = self._round
        if not hmac.compare_digest(bytes(roster), rnd.roster):
            raise InvalidState("the roster changed while shown: show it again")
        if rnd.confirmed:
            raise InvalidState("this round's roster is confirmed already")
        if len(rnd.members) < 2:
            raise InvalidState("a roster of this device alone")
        if self._codes is not None:
            code = next(self._codes)
            if not 0 <= code < CODE_VALUES:
                raise ValueError("a code is below 26000")
        else:
            code = draw_code_value(lambda: self._random(2))
        rnd.confirmed, rnd.code = True, code
        for n in list(rnd.entries):
            self._check(n)
        return code_text(code)

    @property
    def confirmed(self) -> bool:
        return self._round.confirmed

    @property
    def code(self) -> int | None:
        """This round's code, once the roster is confirmed."""
        return self._round.code

    # -- 20.5 the SAID -------------------------------------------------------------------------

    def confirm_said(self, now: float, *, padding: dict | None = None) -> None:
        """The owner said the code: make this round's SAID and queue it.  ``padding`` may give
        the 50-byte entry of a participant that is not this device's contact (by name); the
        others are drawn.  Reading: (12) before the confirmation, or a second time in a round,
        ``invalid_state``."""
        self._alive(now)
        rnd = self._round
        if not rnd.confirmed:
            raise InvalidState("the roster is not confirmed: there is no code to say")
        if rnd.said is not None:
            raise InvalidState("this round's SAID is made already")
        entries = []
        for n in rnd.members:
            if n == self.name:
                continue
            p = self._held[n]
            if p.relation == CONTACT:
                c = self.contacts[p.contact]
                key = code_key(c.seed, self.sid, rnd.roster, self.name, n, self.pid, c.pid)
                dtag = device_tag(c.seed, self.pid, rnd.roster, c.secrets.says())
                entries.append(seal_entry(key, rnd.roster, rnd.code, dtag))
            else:
                e = padding[n] if padding is not None and n in padding else \
                    self._random(ENTRY_BYTES)
                if len(e) != ENTRY_BYTES:
                    raise ValueError("a random entry is 50 bytes")
                entries.append(bytes(e))
        rnd.said = sign_body(self._rk, self.rcid, said_body(self.rk_public, rnd.roster, entries))
        self._queue_said()

    def own_said(self) -> bytes | None:
        """This round's SAID, once made."""
        return self._round.said

    # -- 20.5 heard codes and the check --------------------------------------------------------

    def _resolve(self, who: int | bytes) -> bytes:
        rnd = self._round
        if isinstance(who, int):
            if not 0 <= who < len(rnd.members):
                raise InvalidArgument("a row outside the roster")  # Reading: (15)
            return rnd.members[who]
        return bytes(who)

    def enter_heard(self, who: int | bytes, text: str, now: float) -> str:
        """The owner typed the code ``who`` (a row of the roster, or a participant's name)
        said.  Returns the participant's state afterwards.  Reading: (15) for the order."""
        self._alive(now)
        rnd = self._round
        if not rnd.confirmed:
            raise InvalidState("typing before the roster is confirmed")
        name = self._resolve(who)
        p = self._held.get(name)
        if name not in rnd.members or p is None or p.relation != CONTACT:
            raise InvalidState("not a contact in the roster")
        if name in self._checked or rnd.outcome.get(name) == REFUSED:  # Reading: (14)
            raise InvalidState("this participant is checked already")
        try:
            value = P.parse_voice_code(text)
        except P.TypingError as exc:
            raise InvalidArgument(str(exc)) from exc
        if rnd.compared.get(name, 0) >= ATTEMPTS_PER_ROUND:
            raise Locked("three comparisons in this round: wait for a new round")
        rnd.heard[name] = value  # replaces a code typed before its SAID came
        self._check(name)
        return self.state_of(name)

    def _check(self, name: bytes) -> None:
        rnd = self._round
        if not rnd.confirmed or name not in rnd.heard or name not in rnd.entries:
            return
        heard = rnd.heard.pop(name)
        c = self.contacts[self._held[name].contact]
        key = code_key(c.seed, self.sid, rnd.roster, name, self.name, c.pid, self.pid)
        try:
            value, dtag = open_entry(key, rnd.roster, rnd.entries[name])
        except AuthenticationFailed:
            rnd.outcome[name] = REFUSED  # Reading: (14)
            return
        rnd.compared[name] = rnd.compared.get(name, 0) + 1
        if not hmac.compare_digest(u16(value), u16(heard)):
            rnd.outcome[name] = WRONG
            return
        current, pending, previous = c.secrets.accepts()

        def expected(secret: bytes | None) -> bytes | None:
            return None if secret is None else device_tag(c.seed, c.pid, rnd.roster, secret)

        heard_class = P.ov_tag_heard(dtag, expected(current), expected(pending),
                                     expected(previous))
        outcome = c.secrets.record(True, heard_class)  # as Online Verify records its own
        rnd.outcome.pop(name, None)
        self._checked[name] = _OUTCOME[outcome]

    # -- what the screen shows (20.3, 20.5) ----------------------------------------------------

    def participant(self, name: bytes) -> Participant:
        return self._held[name]

    def name_of_rk(self, rk: bytes) -> bytes | None:
        return self._by_rk.get(rk)

    def held(self) -> dict[bytes, Participant]:
        """Every HELLO held, pending ones included (never shown)."""
        return dict(self._held)

    def is_present(self, name: bytes) -> bool:
        return name in self._present

    def agrees(self, name: bytes) -> bool:
        p = self._held.get(name)
        return p is not None and p.view is not None and p.view.roster == self._round.roster

    def state_of(self, name: bytes) -> str:
        """Reading: (16) checks stay; wrong and refused are of their round."""
        p = self._held[name]
        if p.relation != CONTACT:
            return p.relation
        if name in self._checked:
            return self._checked[name]
        return self._round.outcome.get(name, NOT_YET)

    def locked(self, name: bytes) -> bool:
        return self._round.compared.get(name, 0) >= ATTEMPTS_PER_ROUND and \
            name not in self._checked

    def rows(self) -> list[Row]:
        """Every participant that has been present, in ascending order of names."""
        return [Row(n, None if p.contact is None else self.contacts[p.contact].name,
                    self.state_of(n), n in self._present, self.agrees(n))
                for n, p in sorted(self._held.items()) if p.shown]

    @property
    def head_count(self) -> int:
        """Reading: (17) the present participants, this device included."""
        return len(self._round.members)

    def split(self, now: float) -> bool:
        """20.3: the roster has not changed for 5 seconds and a present participant does not
        agree (Reading: (10))."""
        if now - self.roster_changed_at < 5:
            return False
        return any(self._held[n].view.roster != self._round.roster for n in self._present)

    def slot_of(self, name: bytes) -> int | None:
        """The slot of a participant's latest VIEW."""
        p = self._held.get(name)
        return None if p is None or p.view is None else p.view.slot
