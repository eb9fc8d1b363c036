"""Section 20 of docs/PROTOCOL.md (roll call, message version 2), built from that document only.

One device's roll call (:class:`RollCall`), sans I/O: the host reports the relay's events
(``joined``, ``peer_joined``, ``peer_left``, 15.9), passes each binary message with the slot it
came from (``receive``), calls ``tick`` about once a second, relays its owner's decisions
(``confirm_roster``, ``confirm_said``, ``enter_heard``) and sends, in order, whatever
``next_outgoing`` gives.  Every call takes the device's time; the core decides every message
(20.6): the HELLO (20.2), the VIEWs (20.3), each made when it is taken from the queue, and the
SAIDs (20.5).  It keeps the participants (the HELLOs held, their latest VIEWs, who is present,
who agrees, the number each got when it first became present), the roster and its rounds (the
current one and the 8 before, 20.4), and the checks of 20.5 with what each screen shows.

What earlier sections define comes from :mod:`independent.protocol`: the encodings (1), section
1's strict Ed25519 verification (``protocol.ed25519_verify``, libsodium's rules), the
invite-code form (16.1: the meeting code), the voice-code text (9.6), the device-tag key ``T``
(10.1), and the per-contact device secrets with their matching rules (10.1, 10.3, 11.3:
``ContactSecrets``, ``ov_tag_heard``).  Every refusal raises the exception class of protocol.py
that carries the result code of 1.1 (``protocol.result_code`` names it); typing while locked
raises :class:`Locked`, whose code is ``locked``.  The signature check and the parsing of a
message are pure functions and memoised: the same message reaches a device from every peer, and
the tests run many devices in one process.

An earlier version of the document left 25 points open, which this module had to read into it;
the document now settles each of them, and the code follows its words, quoted at each place
(20.6's rules by their present numbers); none is left open: rule 4 is triggered "whenever
the set of HELLOs it lists differs from the set its latest VIEW listed (the one made, or the one
waiting in its queue)", a condition, not an event (a change that brings the set back to the
latest VIEW's sends nothing at once); its VIEW that waits for the HELLOs on their way "is then
due (rule 5) and waits, and goes out as soon as no such slot is left (the awaited HELLOs are
in, or their slots left) while the set still differs, or at the tick rule 5 gives, whichever
comes first", and "a slot that never sends a HELLO ... only holds VIEWs to rule 5's timing" (the
first tick at least 1 second after the previous VIEW).  Rule 5 makes the VIEW due when "a
present participant sent its HELLO again from the slot of its latest VIEW with no join to the
room (this device's `joined`, or a `peer-joined`) since that participant's HELLO last reached
this device, from any slot, a copy included (... a HELLO after a join answers the newcomer, rule
2, and says nothing of loss)": the device counts its joins (its own ``joined`` and each
``peer-joined``) and records the count on the participant each time its HELLO is taken here,
from any slot (a HELLO refused counts for nothing: "each refusal leaves its state as it was",
20.2).
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
from .protocol import (
    AuthenticationFailed,
    Expired,
    InvalidArgument,
    InvalidKey,
    InvalidState,
    MalformedMessage,
    hkdf,
    hmac_sha256,
    lv_cat,
    sha256,
    u8,
)


class Locked(P.Locked):
    """``locked`` (1.1): a participant's code was compared three times in this round (20.5)."""
    code = "locked"


def u16(n: int) -> bytes:
    return n.to_bytes(2, "big")


def u32(n: int) -> bytes:
    return n.to_bytes(4, "big")


# Section 1: strict Ed25519 verification (libsodium's crypto_sign_verify_detached), shared with
# every other section: protocol.ed25519_verify.
verify_strict = P.ed25519_verify


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
# "A time before 1970 or after 9999 is invalid_argument": from 10000-01-01T00:00:00Z on.
TIME_END = 253_402_300_800
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
MAX_PRESENT = 50
# 20.3: a VIEW that would "make present a participant never present before when 200 have been
# (this device included ...)" is refused; 20.8: "a device shows at most 200 participants over a
# roll call".
MAX_SHOWN = 200


def tag_count(contacts: int) -> int:
    """n: "the smallest power of two from 32 up that is at least the number of contacts it
    computed tags for (at most 2048: a store with more is invalid_argument)"."""
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
    another version (or type).  The sender's own have bit "is 0, and a receiver ignores it"."""
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
    # The roll call's count of joins to the room (``RollCall._joins``) when this HELLO last
    # reached the device: 20.6 rule 5 asks whether a join came since.
    joins_at_hello: int = 0


@dataclass
class _Round:
    """What a round (a roster) holds (20.4, 20.5): "its confirmation, code, SAID, and the SAIDs
    and heard codes of the others", with the comparisons made and their outcomes."""
    roster: bytes
    members: tuple[bytes, ...]  # the roster's names, ascending, this device's among them
    confirmed: bool = False
    code: int | None = None
    said: bytes | None = None  # this device's SAID of the round, once its owner said the code
    taken: dict = field(default_factory=dict)  # speaker name -> the SAID body taken
    entries: dict = field(default_factory=dict)  # speaker name -> the entry kept (contacts)
    heard: dict = field(default_factory=dict)  # name -> value typed, not compared yet
    compared: dict = field(default_factory=dict)  # name -> comparisons made
    outcome: dict = field(default_factory=dict)  # name -> WRONG or REFUSED in this round


@dataclass(frozen=True)
class RosterSummary:
    """What 20.4 shows before the owner confirms: "the names of its contacts present, how many
    participants are unknown, and how many are bound differently"."""
    roster: bytes
    contacts_present: tuple[str, ...]
    unknown: int
    bound_differently: int  # binding differs, or another call (20.5)
    size: int  # this device included


@dataclass(frozen=True)
class Row:
    """One participant that has been present, as a screen shows it (20.5)."""
    number: int  # "in the order they first became present on this device (this device 0)"
    name: bytes
    contact: str | None
    state: str
    present: bool
    agrees: bool


_HELLO, _VIEW, _SAID = "hello", "view", "said"
# 20.6 rule 6: "The start, a roster change and the owner's 'I said it' reset it: the next re-send
# time is then 3 seconds later"; "4 seconds later after the first re-send since the last reset,
# 8 seconds later after the others".
RESEND_FIRST, RESEND_SECOND, RESEND_EVERY = 3, 4, 8


class RollCall:
    """One device's roll call (20).

    ``contacts`` are looked up in their order ("the first one wins", 20.2).  ``rk_seed`` is the
    roll-call key's 32-byte RFC 8032 private key, ``padding_tags`` the HELLO's random tags (as
    many as n minus the distinct tags of the contacts taking part), ``codes`` the code values
    of successive confirmations; each is drawn from ``random_bytes`` (os.urandom) when not
    given.  The roll call starts at ``now``.  Every refusal raises the exception of its result
    code and leaves the state as it was, except a participant refused by 20.5's check, which
    is kept (and reported as ``authentication_failed``)."""

    def __init__(self, meeting_code_text: str, contacts: Sequence[Contact], pid: bytes,
                 now: float, *, binding: bytes | None = None, rk_seed: bytes | None = None,
                 padding_tags: Sequence[bytes] | None = None, codes: Iterable[int] | None = None,
                 random_bytes: Callable[[int], bytes] = os.urandom):
        _check_time(now)
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

        # 20.2: "n = the smallest power of two from 32 up that is at least the number of
        # contacts it computed tags for"; "two contacts' tags equal ... are carried once".
        self._taking_part = [i for i, c in enumerate(self.contacts)
                             if not c.awaiting_confirmation]
        n = tag_count(len(self._taking_part))
        real = list(dict.fromkeys(
            presence_tag(self.contacts[i].seed, self.sid, self.rk_public, self.pid,
                         self.contacts[i].pid) for i in self._taking_part))
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

        self.slot: int | None = None  # none before the first joined
        self._room: set = set()  # the other slots in the room (15.9's events)
        self._held: dict[bytes, Participant] = {}
        self._by_rk: dict[bytes, bytes] = {}
        self._slot_brought: dict = {}  # slot -> the name of the HELLO it brought
        self._present: dict[bytes, int] = {}  # name -> the slot of its latest VIEW
        self._listed: frozenset = frozenset([self.name])
        self._numbers: dict[bytes, int] = {self.name: 0}
        self._seen: dict[bytes, tuple[str, int | None]] = {}  # has been present: relation
        self._checked: dict[bytes, str] = {}
        self._rounds: OrderedDict[bytes, _Round] = OrderedDict()
        self._switch_round((self.name,))
        self.roster_changed_at = now

        self._queue: list = []  # (_HELLO, bytes), (_VIEW, None) or (_SAID, bytes)
        self._seq = 0
        self.last_view_at: float | None = None  # when the last VIEW was made
        self._view_due = False
        self._last_view_names: frozenset | None = None  # the set the last VIEW made listed
        # Rule 5's "join to the room (this device's joined, or a peer-joined)": counted here.
        self._joins = 0
        self._resend_at = now + RESEND_FIRST
        self._resends = 0  # re-sends since the last reset
        self.sent = {_HELLO: 0, _VIEW: 0, _SAID: 0}  # messages taken, by kind

    # -- time (20.1) -----------------------------------------------------------------------

    def _alive(self, now: float) -> None:
        """ "A time before 1970 or after 9999 is invalid_argument, checked first"; "any call
        more than 600 seconds later (or with a clock more than 30 seconds before that moment)
        is expired, and ends it: every later call is expired too, and nothing more is
        sent"."""
        _check_time(now)
        if self._ended:
            raise Expired("the roll call has ended")
        if now - self.started_at > LIFETIME_SECONDS or now < self.started_at - CLOCK_BACK_SECONDS:
            self._ended = True
            self._queue.clear()
            raise Expired("more than 600 seconds after the start, or a clock set back")
        self._now = now

    @property
    def ended(self) -> bool:
        return self._ended

    # -- the state derived -----------------------------------------------------------------

    def _lists_me(self, view: View | None) -> bool:
        return view is not None and self.name in view.names

    def _compute_listed(self) -> frozenset:
        """20.3: "its own, and every HELLO it holds whose bringer, or whose participant's VIEW
        slot, is present in the room"."""
        s = self._room
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
        """After every change (20.3): who is present ("the latest VIEW of X that D holds lists
        D's own h and that VIEW's slot is in the room"), the pending HELLOs forgotten "once
        every slot that brought it has left", the numbers of those newly present, the roster
        (a change is a new round, or an earlier one back; rule 5 makes the VIEW due and rule 6
        resets the next re-send time), then the list, and rule 4 (``_rule_4``: a list that
        differs from the latest VIEW's sends the VIEW, which comes after the change and so
        satisfies a due one, or makes it due and wait while a slot has brought no HELLO)."""
        s, held = self._room, self._held
        present = {n: p.view.slot for n, p in held.items()
                   if self._lists_me(p.view) and p.view.slot in s}
        for n in [n for n, p in held.items() if n not in present and s.isdisjoint(p.bringers)]:
            del self._by_rk[held.pop(n).hello.rk]
        # "several at once in ascending order of their names"
        for n in sorted(n for n in present if n not in self._numbers):
            self._numbers[n] = len(self._numbers)
        for n in present:
            self._seen[n] = (held[n].relation, held[n].contact)
        self._present = present
        members = tuple(sorted([*present, self.name]))
        if members != self._round.members:
            self._switch_round(members)
            self.roster_changed_at = now
            self._view_due = True
            self._resend_at, self._resends = now + RESEND_FIRST, 0
        self._listed = self._compute_listed()
        self._rule_4()

    def _awaiting_hello(self) -> bool:
        """Rule 4: "a slot in the room has brought no HELLO yet" (every device sends its HELLO
        on joined and on peer-joined, so one is on its way)."""
        return any(slot not in self._slot_brought for slot in self._room)

    def _differs(self) -> bool:
        """Rule 4: "the set of HELLOs it lists differs from the set its latest VIEW listed (the
        one made, or the one waiting in its queue)".  A VIEW waiting in the queue is made when
        it is taken, "from the state at that moment": it lists the set as it is then, so while
        one waits nothing differs.  Before any VIEW is made, any set differs (there is none to
        equal)."""
        if (_VIEW, None) in self._queue:
            return False
        return self._listed != self._last_view_names

    def _rule_4(self) -> None:
        """Rule 4, a condition checked after every change (of the list, of the room, of the
        slots that brought a HELLO): "whenever the set of HELLOs it lists differs from the set
        its latest VIEW listed (the one made, or the one waiting in its queue): sends its VIEW,
        unless a slot in the room has brought no HELLO yet ...: the VIEW is then due (rule 5)
        and waits, and goes out as soon as no such slot is left (the awaited HELLOs are in, or
        their slots left) while the set still differs, or at the tick rule 5 gives, whichever
        comes first."  So the trigger is the difference, not a change: a change that brings the
        set back to the latest VIEW's sends nothing at once (a VIEW already due still goes out
        at rule 5's tick), and a slot that leaves, or brings its HELLO, with the set still
        different and no slot left awaited sends the VIEW at once."""
        if self.slot is None or not self._differs():
            return
        if self._awaiting_hello():
            self._view_due = True
        else:
            self._queue_view()

    def _send_or_wait(self) -> None:
        """Rule 1's VIEW, "which waits as rule 4 says": queued at once unless a slot in the room
        has brought no HELLO yet; it is then due (rule 5) and waits, going out as soon as no
        such slot is left while the set differs from the latest VIEW's (``_rule_4``), or at the
        tick rule 5 gives.  One already queued (not yet taken, so made later from the state
        then) is left as it is."""
        if self.slot is None:
            return
        if self._awaiting_hello() and (_VIEW, None) not in self._queue:
            self._view_due = True
        else:
            self._queue_view()

    # -- the outgoing queue (20.6) -----------------------------------------------------------

    def _put(self, item) -> bool:
        """ "Sends" means "puts in its queue": a message equal to one already waiting is not
        queued again.  Nothing is sent before the first joined (20.2)."""
        if self.slot is None or item in self._queue:
            return False
        self._queue.append(item)
        return True

    def _queue_hello(self) -> None:
        self._put((_HELLO, self.hello))

    def _queue_view(self) -> None:
        """One VIEW waits in the queue at most; it is made when taken, from the state then.
        Rule 5: "a VIEW queued in between satisfies" a due one (the one already waiting is
        the VIEW that would be queued)."""
        if self.slot is None:
            return
        self._put((_VIEW, None))
        self._view_due = False

    def _queue_said(self) -> None:
        rnd = self._round
        if rnd.said is not None:
            self._put((_SAID, rnd.said))

    def next_outgoing(self) -> bytes | None:
        """The next message to send to the group room, or None.  A VIEW is made now, from the
        state at this moment."""
        if not self._queue:
            return None
        kind, message = self._queue.pop(0)
        self.sent[kind] += 1
        return self._make_view() if kind == _VIEW else message

    def outgoing(self) -> list[bytes]:
        """Everything queued, in order."""
        out = []
        while (m := self.next_outgoing()) is not None:
            out.append(m)
        return out

    def _make_view(self) -> bytes:
        """20.3: bit 0 of flags "says that its owner confirmed 'I said it' in that round (its
        SAID is made)"; bit j of have, that it holds the SAID of this round of h_(j+1)."""
        rnd = self._round
        names = sorted(self._listed)
        have = have_bits(names, lambda n: n != self.name and n in rnd.taken)
        self._seq += 1
        body = view_body(self.rk_public, self._seq, self.slot, rnd.roster, rnd.said is not None,
                         names, have)
        self.last_view_at = self._now
        self._last_view_names = self._listed
        return sign_body(self._rk, self.rcid, body)

    @property
    def seq(self) -> int:
        return self._seq

    # -- the relay's events (15.9, 20.6 rules 1 to 3) ----------------------------------------

    def joined(self, slot: int, peers: Iterable[int], now: float) -> None:
        """Rule 1, the relay's ``joined`` (a first join or a rejoin, 20.7): "takes the slots
        present from it, records its own slot, and sends its HELLO, then its VIEW (which waits
        as rule 4 says)": while a slot present has brought no HELLO, the VIEW waits for the
        HELLOs on their way (rule 2 makes each device present send one), so a newcomer sends
        one VIEW listing everyone.  "What waits when a connection drops goes out on the next
        one"."""
        self._alive(now)
        if not isinstance(slot, int) or not 1 <= slot <= 0xFFFF:
            raise InvalidArgument(f"a relay slot is 1 to 65535, not {slot!r}")
        self.slot = slot
        self._room = set(peers) - {slot}
        self._joins += 1  # a join to the room (rule 5)
        self._queue_hello()
        self._update(now)
        self._send_or_wait()

    def peer_joined(self, slot: int, now: float) -> None:
        """Rule 2: "sends its HELLO (the newcomer needs it), nothing else".  Before the first
        joined "no slot is in its room" (20.2): the event changes nothing."""
        self._alive(now)
        if self.slot is None:
            return
        self._room.add(slot)
        self._joins += 1  # a join to the room (rule 5)
        self._queue_hello()
        self._update(now)

    def peer_left(self, slot: int, now: float) -> None:
        """Rule 3: "forgets the slot" (nothing to forget before the first joined)."""
        self._alive(now)
        if self.slot is None:
            return
        self._room.discard(slot)
        self._update(now)

    # -- receiving ---------------------------------------------------------------------------

    def receive(self, message: bytes, slot: int, now: float) -> str:
        """A binary message from relay slot ``slot``.  Returns what was done ("hello",
        "hello repeat", "view", "view ignored", "said", "said ignored"); raises the refusal
        otherwise.  Before the first joined, 20.2: "a HELLO is then refused by step 4, and a
        VIEW or SAID as coming from a participant it does not hold or see"."""
        self._alive(now)
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
        if slot not in self._room:  # 4
            raise InvalidState("a HELLO carried by a slot that is not in the room")
        name = hello.name
        held = self._by_rk.get(hello.rk)
        if held is not None and held != name:  # 5
            raise MalformedMessage("a second HELLO for one roll-call key")
        brought = self._slot_brought.get(slot)
        if brought is not None and brought != name:  # 6
            raise MalformedMessage("a second HELLO from one relay slot")
        p = self._held.get(name)
        # 7: "a new HELLO when its VIEW would list more than 100 names with it (its own
        # included)"; from a slot in the room, a new HELLO is listed.
        if p is None and len(self._listed | {name}) > MAX_NAMES:
            raise InvalidArgument("its VIEW would list more than 100 names")
        self._slot_brought[slot] = name
        # Rule 5: "or a present participant sent its HELLO again from the slot of its latest
        # VIEW with no join to the room (this device's joined, or a peer-joined) since its
        # previous HELLO reached this device (it is unsettled: this device's latest VIEW may
        # not have reached it; a HELLO after a join answers the newcomer, rule 2, and says
        # nothing of loss)".  A present participant's HELLO is held (``p``), and its previous
        # arrival is the last one taken here (``joins_at_hello``; rule 5, as the module's docstring quotes it).
        if (p is not None and self._present.get(name) == slot
                and p.joins_at_hello == self._joins):
            self._view_due = True
        if p is not None:  # "a repeat, a copy ... that passes these checks": one more bringer
            p.joins_at_hello = self._joins
            if slot not in p.bringers:
                p.bringers.add(slot)
                self._update(now)
            return "hello repeat"
        relation, contact = self._identify(hello)
        self._held[name] = Participant(name, hello, relation, contact, {slot},
                                       joins_at_hello=self._joins)
        self._by_rk[hello.rk] = name
        self._update(now)
        return "hello"

    def _reads_the_same(self, view: View, latest: View) -> bool:
        """20.3: "reads the same as that one in all the receiver reads of a VIEW: its slot,
        roster and flags, whether it lists the receiver's h, and, if it does, the receiver's
        have bit"."""
        lists = self._lists_me(view)
        return (view.slot == latest.slot and view.roster == latest.roster
                and view.said == latest.said and lists == self._lists_me(latest)
                and (not lists or view.holds(self.name) == latest.holds(self.name)))

    def _receive_view(self, message: bytes, slot: int, now: float) -> str:
        view = parse_view(message)
        # "Then, when it holds a latest VIEW from that RK, it ignores, without checking the
        # signature or anything else, a VIEW whose seq is not above that one's (a repeat, or
        # older), and one that reads the same as that one ...  An ignored VIEW changes nothing
        # and triggers none of 20.6's rules."
        name = self._by_rk.get(view.rk)
        latest = None if name is None else self._held[name].view
        if latest is not None and (view.seq <= latest.seq or self._reads_the_same(view, latest)):
            return "view ignored"
        _verified(self.rcid, view.rk, view.body, view.signature)
        if view.rk == self.rk_public:
            raise InvalidKey("this device's own roll-call key")
        if name is None:
            raise InvalidState("a VIEW whose HELLO is not held (it may be on its way)")
        if name not in view.names:
            raise MalformedMessage("a VIEW that does not list its sender's own h")
        p = self._held[name]
        if view.slot != slot:
            raise InvalidState("a VIEW carried by another slot than its own")
        if view.slot not in self._room:
            raise InvalidState("a VIEW of a slot not present")
        for n, other_slot in self._present.items():
            if n != name and other_slot == view.slot:
                raise InvalidState("the slot of another present participant's latest VIEW")
        if self._lists_me(view) and name not in self._present:
            if 1 + len(self._present) + 1 > MAX_PRESENT:
                raise InvalidArgument("more than 50 participants present")
            # "or make present a participant never present before when 200 have been (this
            # device included; a relay admits at most 200 joins to a group room over its life,
            # 15.9, so only a relay that lies reaches it): invalid_argument".  Those that have
            # been present are those numbered, this device (0) included; one of them may come
            # back.
            if name not in self._numbers and len(self._numbers) >= MAX_SHOWN:
                raise InvalidArgument("a participant never present before when 200 have been")
        # X's new latest VIEW changes nothing but X's presence: X stays listed (its slot, or a
        # bringer, is in the room) and is forgotten only when not present.
        was_present, slot_before = name in self._present, self._present.get(name)
        p.view = view
        if self._lists_me(view) != was_present or (was_present and slot_before != view.slot):
            self._update(now)
        # 20.6: "Nothing else is sent: a message that shows something lost (a VIEW that does
        # not list this device, or lacks its have bit) is answered by rule 6, not at once".
        return "view"

    def _receive_said(self, message: bytes, now: float) -> str:
        said = parse_said(message)
        _verified(self.rcid, said.rk, said.body, said.signature)
        if said.rk == self.rk_public:
            raise InvalidKey("this device's own SAID, reflected")
        rnd = self._round
        speaker = self._by_rk.get(said.rk)
        if speaker is None or speaker not in self._present:
            raise InvalidState("a speaker that is not in the roster")
        if said.roster != rnd.roster:
            raise InvalidState("a SAID of another roster")
        taken = rnd.taken.get(speaker)
        if taken is not None:
            if taken == said.body:
                return "said ignored"
            raise MalformedMessage("a second, different SAID from one speaker in this round")
        if len(said.entries) != len(rnd.members) - 1:
            raise MalformedMessage("a SAID whose m is not the roster's size minus one")
        # "It keeps the SAID's body ...; from a speaker that is its contact it also keeps the
        # entry at its own position".
        rnd.taken[speaker] = said.body
        self._view_due = True  # rule 5: "it took another participant's SAID"
        if self._held[speaker].relation == CONTACT:
            others = [n for n in rnd.members if n != speaker]
            rnd.entries[speaker] = said.entries[others.index(self.name)]
            self._check_or_refuse(speaker)
        return "said"

    # -- ticks (20.6 rules 5 and 6) ------------------------------------------------------------

    def tick(self, now: float) -> None:
        """Rule 6: "queues a due VIEW; then, if it is unsettled and the time has reached its
        next re-send time, sends its HELLO, its VIEW and (once said) its SAID of this round
        again, and sets the next re-send time 4 seconds later after the first re-send since
        the last reset, 8 seconds later after the others"."""
        self._alive(now)
        if self.slot is None:
            return
        if self._view_due and (self.last_view_at is None or now - self.last_view_at >= 1):
            self._queue_view()
        if now >= self._resend_at and self.unsettled():
            self._queue_hello()
            self._queue_view()
            self._queue_said()
            self._resends += 1
            self._resend_at = now + (RESEND_SECOND if self._resends == 1 else RESEND_EVERY)

    def unsettled(self) -> bool:
        """Rule 6: "a participant it lists has no VIEW here, or a latest VIEW that does not list
        this device, or, once present, a latest VIEW whose roster is not its own, or (its
        roster being its own) said set with a SAID this device does not hold, or, once this
        device said, no have bit for it"."""
        rnd = self._round
        for n in self._listed:
            if n == self.name:
                continue
            v = self._held[n].view
            if not self._lists_me(v):
                return True
            if n in self._present and v.roster != rnd.roster:
                return True
            if v.roster == rnd.roster and v.said and n not in rnd.taken:
                return True
            if rnd.said is not None and not v.holds(self.name):
                return True
        return False

    # -- 20.4 confirming the roster -----------------------------------------------------------

    @property
    def roster(self) -> bytes:
        return self._round.roster

    @property
    def members(self) -> tuple[bytes, ...]:
        """The roster's names in ascending order (the order of a SAID's entries), this
        device's among them."""
        return self._round.members

    def summary(self, now: float) -> RosterSummary:
        """What the owner is shown before confirming."""
        self._alive(now)
        contacts, unknown, differs = [], 0, 0
        for n in self._round.members:
            if n == self.name:
                continue
            p = self._held[n]
            if p.relation == CONTACT:
                contacts.append(self.contacts[p.contact].name)
            elif p.relation == UNKNOWN:
                unknown += 1
            else:
                differs += 1
        return RosterSummary(self._round.roster, tuple(contacts), unknown, differs,
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
        """The owner said the code: make this round's SAID and queue it; the VIEW is due (rule
        7).  ``padding`` may give the 50-byte entry of a participant that is not this device's
        contact (by name); the others are drawn.  "I said it" before the roster of the round
        is confirmed or a second time in a round is ``invalid_state`` (20.4)."""
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
        self._view_due = True  # rule 5: "or its owner confirmed 'I said it'"
        self._resend_at, self._resends = now + RESEND_FIRST, 0  # rule 6: it resets re-sends
        self._queue_said()

    def own_said(self) -> bytes | None:
        """This round's SAID, once made."""
        return self._round.said

    # -- 20.5 heard codes and the check --------------------------------------------------------

    def number_of(self, name: bytes) -> int | None:
        """The participant's number: "numbered in the order they first became present on this
        device (this device 0; several at once in ascending order of their names), a number
        each keeps for the roll call"."""
        return self._numbers.get(bytes(name))

    def name_of_number(self, number: int) -> bytes | None:
        for n, k in self._numbers.items():
            if k == number:
                return n
        return None

    def enter_heard(self, who: int | bytes, text: str, now: float) -> str:
        """The owner typed the code that participant ``who`` (its number, or its name) said.
        Returns the participant's state afterwards.  Refused, 20.5, "in this order: a code that
        is not a NATO word and three digits, or a number that is 0 or names no participant
        (invalid_argument); before the roster of the round is confirmed, for a participant that
        is not a contact (or whose binding differs), not present, already checked, or refused
        in this round (invalid_state); after three comparisons in the round (locked)"; a
        comparison that makes the participant refused raises ``authentication_failed`` and
        keeps that outcome."""
        self._alive(now)
        try:
            value = P.parse_voice_code(text)
        except P.TypingError as exc:
            raise InvalidArgument(str(exc)) from exc
        number = who if isinstance(who, int) else self._numbers.get(bytes(who))
        name = None if number is None or number == 0 else self.name_of_number(number)
        if name is None:
            raise InvalidArgument("a number that is 0 or names no participant")
        rnd = self._round
        if not rnd.confirmed:
            raise InvalidState("typing before the roster is confirmed")
        if self._seen[name][0] != CONTACT:
            raise InvalidState("not a contact (or its binding differs)")
        if name not in self._present:
            raise InvalidState("not present")
        if name in self._checked:
            raise InvalidState("this participant is checked already")
        if rnd.outcome.get(name) == REFUSED:
            raise InvalidState("this participant was refused in this round")
        if rnd.compared.get(name, 0) >= ATTEMPTS_PER_ROUND:
            raise Locked("three comparisons in this round: wait for a new round")
        rnd.heard[name] = value  # replaces a code typed before its SAID came
        self._check_or_refuse(name)
        return self.state_of(name)

    def _check_or_refuse(self, name: bytes) -> None:
        """The check, once the round is confirmed and both the heard code and the entry are
        here; step 1's refusal is kept and reported (``authentication_failed``)."""
        rnd = self._round
        if not rnd.confirmed or name not in rnd.heard or name not in rnd.entries:
            return
        heard = rnd.heard.pop(name)
        c = self.contacts[self._held[name].contact]
        key = code_key(c.seed, self.sid, rnd.roster, name, self.name, c.pid, self.pid)
        try:
            value, dtag = open_entry(key, rnd.roster, rnd.entries[name])
        except AuthenticationFailed as exc:
            rnd.outcome[name] = REFUSED  # "unlike any other refusal, keeps this outcome"
            raise AuthenticationFailed(f"refused for this round: {exc}") from exc
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
        """20.3: a present participant agrees when its latest VIEW's roster is this device's."""
        p = self._held.get(name)
        return name in self._present and p.view.roster == self._round.roster

    def relation_of(self, name: bytes) -> str | None:
        p = self._held.get(name)
        if p is not None:
            return p.relation
        seen = self._seen.get(name)
        return None if seen is None else seen[0]

    def state_of(self, name: bytes) -> str:
        """20.5: "for a contact, verified, verified (tag unchecked) or device changed once
        checked (for the rest of the roll call), else wrong or refused (in the round they
        happened in; a new round shows not yet), else not yet"; else its relation."""
        relation = self.relation_of(name)
        if relation != CONTACT:
            return relation
        if name in self._checked:
            return self._checked[name]
        return self._round.outcome.get(name, NOT_YET)

    def locked(self, name: bytes) -> bool:
        return self._round.compared.get(name, 0) >= ATTEMPTS_PER_ROUND and \
            name not in self._checked

    def rows(self) -> list[Row]:
        """Every participant that has been present, by number (20.3: one that was present and
        is no longer keeps its place, shown as not present)."""
        out = []
        for n in sorted(self._seen, key=self._numbers.__getitem__):
            contact = self._seen[n][1]
            out.append(Row(self._numbers[n], n,
                           None if contact is None else self.contacts[contact].name,
                           self.state_of(n), n in self._present, self.agrees(n)))
        return out

    @property
    def head_count(self) -> int:
        """20.5: "the number of devices present, this one included (the roster's size)"."""
        return len(self._round.members)

    def split(self, now: float) -> bool:
        """20.3: "Once the roster has not changed for 5 seconds (the time now, on its own clock,
        minus the time of the last change is 5 or more) and a present participant does not
        agree"."""
        if now - self.roster_changed_at < 5:
            return False
        return any(not self.agrees(n) for n in self._present)

    def slot_of(self, name: bytes) -> int | None:
        """The slot of a participant's latest VIEW."""
        p = self._held.get(name)
        return None if p is None or p.view is None else p.view.slot


def _check_time(now: float) -> None:
    if not 0 <= now < TIME_END:
        raise InvalidArgument("a time before 1970 or after 9999")
