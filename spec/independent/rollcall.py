"""Section 20 of docs/PROTOCOL.md (roll call), built from that document only.

One device's roll call (:class:`RollCall`): its HELLO (20.2), the HELLOs and SAIDs it takes from
the relay's slots, the roster and its confirmation (20.3), its own SAID (20.4), the codes its
owner heard and the check of 20.5, and a new round whenever a new participant arrives.  It does
no I/O: the caller passes each message with the relay slot it came from and the time of the
call, and sends what it is given.

What earlier sections define comes from :mod:`independent.protocol`: the encodings (1), the
invite-code form (16.1: the meeting code), windows (9.1), the voice-code text (9.6), the device
tag key ``T`` (10.1), and the per-contact device secrets with their matching rules (10.1, 10.3,
11.3: ``ContactSecrets``, ``ov_tag_heard``).  Every refusal raises the exception class of
protocol.py that carries the result code of 1.1 (``protocol.result_code`` names it); typing
while locked raises :class:`Locked`, whose code is ``locked``.

Readings of the document that its text leaves open are marked "Reading:" below.
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

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
    u64,
)


class Locked(P.Locked):
    """``locked`` (1.1): a participant's code was wrong three times in this round (20.5)."""
    code = "locked"


# --------------------------------------------------------------------------------------------
# 20.1 The meeting code, the roll call and its room
# --------------------------------------------------------------------------------------------

RCID_LABEL = b"itsme-rollcall-v1"
ROOM_LABEL = b"itsme-rollcall-room-v1"
ROOM_BYTES = 16
LIFETIME_SECONDS = 600


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
    """rcid = SHA-256(lv_cat('itsme-rollcall-v1', meeting_code))."""
    return sha256(lv_cat(RCID_LABEL, _canonical(code)))


def room_id(code: str) -> bytes:
    """room_id = first 16 bytes of SHA-256(lv_cat('itsme-rollcall-room-v1', meeting_code))."""
    return sha256(lv_cat(ROOM_LABEL, _canonical(code)))[:ROOM_BYTES]


def room_name(code: str) -> str:
    """The group room's name on the relay: room_id in lowercase hex."""
    return room_id(code).hex()


# --------------------------------------------------------------------------------------------
# 20.2 HELLO
# --------------------------------------------------------------------------------------------

VERSION = 1
HELLO_TYPE, SAID_TYPE = 1, 2
NONCE_BYTES = 16
TAG_BYTES = 16
HELLO_FIXED = 1 + 1 + 8 + NONCE_BYTES + 2  # 28
MIN_TAGS, MAX_TAGS = 32, 2048
PRESENCE_LABEL = b"itsme-rc-presence-v1"
WINDOWS_BEFORE = 20  # "more than 20 windows before the receiver's current window"
WINDOWS_AFTER = 1  # "or more than 1 after it"
MAX_PARTICIPANTS = 50


def tag_count(contacts: int) -> int:
    """n: the smallest power of two from 32 up that is at least the number of contacts; a
    store with more than 2048 contacts is ``invalid_argument``."""
    if contacts < 0:
        raise ValueError("a count of contacts is not negative")
    if contacts > MAX_TAGS:
        raise InvalidArgument(f"{contacts} contacts: a roll call takes at most {MAX_TAGS}")
    n = MIN_TAGS
    while n < contacts:
        n *= 2
    return n


def presence_tag(seed: bytes, rc: bytes, window: int, nonce: bytes, pid_from: bytes,
                 pid_to: bytes) -> bytes:
    """tag(D->C) = first 16 bytes of HMAC(seed_C, lv_cat('itsme-rc-presence-v1', rcid, u64(W),
    nonce, pid_D, pid_C))."""
    return hmac_sha256(seed, lv_cat(PRESENCE_LABEL, rc, u64(window), nonce, pid_from,
                                    pid_to))[:TAG_BYTES]


def hello_message(window: int, nonce: bytes, tags: Iterable[bytes]) -> bytes:
    """HELLO = u8(1) || u8(1) || u64(W) || nonce || u16(n) || the n tags in ascending order."""
    tags = sorted(tags)
    if len(nonce) != NONCE_BYTES or any(len(t) != TAG_BYTES for t in tags):
        raise ValueError("a nonce and each tag are 16 bytes")
    if len(set(tags)) != len(tags):
        raise ValueError("the tags of a HELLO are distinct (strictly ascending)")
    n = len(tags)
    if n < MIN_TAGS or n > MAX_TAGS or n & (n - 1):
        raise ValueError("a HELLO has a power of two from 32 to 2048 tags")
    return (u8(VERSION) + u8(HELLO_TYPE) + u64(window) + nonce + n.to_bytes(2, "big")
            + b"".join(tags))


@dataclass(frozen=True)
class Hello:
    window: int
    nonce: bytes
    tags: tuple[bytes, ...]


def parse_hello(message: bytes) -> Hello:
    """20.2's form: ``malformed_message`` for anything else (size, then layout, then
    version and type, as 1.1 orders them; every one of them gives the same code here)."""
    if len(message) < HELLO_FIXED:
        raise MalformedMessage("a HELLO is at least 28 bytes")
    n = int.from_bytes(message[26:28], "big")
    if n < MIN_TAGS or n > MAX_TAGS or n & (n - 1):
        raise MalformedMessage(f"a HELLO of {n} tags")
    if len(message) != HELLO_FIXED + TAG_BYTES * n:
        raise MalformedMessage("a HELLO is 28 + 16n bytes")
    if message[0] != VERSION or message[1] != HELLO_TYPE:
        raise MalformedMessage("not a HELLO of version 1")
    tags = tuple(message[HELLO_FIXED + TAG_BYTES * i:HELLO_FIXED + TAG_BYTES * (i + 1)]
                 for i in range(n))
    if any(a >= b for a, b in zip(tags, tags[1:])):
        raise MalformedMessage("a HELLO's tags are in strictly ascending order")
    return Hello(P.be64(message[2:10]), message[10:26], tags)


ROSTER_LABEL = b"itsme-rc-roster-v1"


def roster_hash(rc: bytes, hello_hashes: Iterable[bytes]) -> bytes:
    """roster = SHA-256(lv_cat('itsme-rc-roster-v1', rcid, h_1, ..., h_k)), the hello_hashes in
    ascending order."""
    return sha256(lv_cat(ROSTER_LABEL, rc, *sorted(hello_hashes)))


# --------------------------------------------------------------------------------------------
# 20.3 The code
# --------------------------------------------------------------------------------------------

CODE_VALUES = P.VOICE_CODE_VALUES  # 26000


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
# 20.4 SAID
# --------------------------------------------------------------------------------------------

CODE_KEY_LABEL = b"itsme-rc-code-v1"
DEVICE_LABEL = b"itsme-rc-device-v1"
HASH_BYTES = 32
SAID_FIXED = 1 + 1 + HASH_BYTES + HASH_BYTES + 1  # 67
PLAINTEXT_BYTES = 2 + 32
ENTRY_BYTES = PLAINTEXT_BYTES + 16  # 50
MAX_ENTRIES = MAX_PARTICIPANTS - 1  # 49
ENTRY_NONCE = bytes(12)


def code_key(seed: bytes, rc: bytes, roster: bytes, hello_hash_s: bytes, hello_hash_p: bytes,
             pid_s: bytes, pid_c: bytes) -> bytes:
    """k(S->P) = HKDF(ikm = seed_C, salt = roster, info = lv_cat('itsme-rc-code-v1', rcid,
    hello_hash_S, hello_hash_P, pid_S, pid_C), L = 32)."""
    return hkdf(seed, roster, lv_cat(CODE_KEY_LABEL, rc, hello_hash_s, hello_hash_p, pid_s,
                                     pid_c), 32)


def device_tag(seed: bytes, pid_s: bytes, roster: bytes, device_secret: bytes | None) -> bytes:
    """dtag(S) = HMAC(T, lv_cat('itsme-rc-device-v1', pid_S, roster, device_secret(S))), T of
    10.1; an empty device secret on a device that holds none."""
    secret = b"" if device_secret is None else device_secret
    return hmac_sha256(P.tag_key(seed), lv_cat(DEVICE_LABEL, pid_s, roster, secret))


def entry_aad(roster: bytes) -> bytes:
    """u8(1) || u8(2) || roster: plain concatenation, as the vectors confirm."""
    return u8(VERSION) + u8(SAID_TYPE) + roster


def entry_plaintext(value: int, dtag: bytes) -> bytes:
    """u16(v) || dtag(S)."""
    if not 0 <= value < CODE_VALUES or len(dtag) != 32:
        raise ValueError("a code below 26000 and a 32-byte device tag")
    return value.to_bytes(2, "big") + dtag


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


def said_message(speaker: bytes, roster: bytes, entries: Sequence[bytes]) -> bytes:
    """SAID = u8(1) || u8(2) || hello_hash_S || roster || u8(k) || the k entries."""
    if len(speaker) != HASH_BYTES or len(roster) != HASH_BYTES:
        raise ValueError("hashes are 32 bytes")
    if not 1 <= len(entries) <= MAX_ENTRIES or any(len(e) != ENTRY_BYTES for e in entries):
        raise ValueError("a SAID has 1 to 49 entries of 50 bytes")
    return (u8(VERSION) + u8(SAID_TYPE) + speaker + roster + u8(len(entries))
            + b"".join(entries))


@dataclass(frozen=True)
class Said:
    speaker: bytes
    roster: bytes
    entries: tuple[bytes, ...]


def parse_said(message: bytes) -> Said:
    """20.4's form, ``malformed_message`` for anything else: k not 1 to 49, the length not
    67 + 50k, another version or type."""
    if len(message) < SAID_FIXED:
        raise MalformedMessage("a SAID is at least 67 bytes")
    k = message[66]
    if not 1 <= k <= MAX_ENTRIES:
        raise MalformedMessage(f"a SAID of {k} entries")
    if len(message) != SAID_FIXED + ENTRY_BYTES * k:
        raise MalformedMessage("a SAID is 67 + 50k bytes")
    if message[0] != VERSION or message[1] != SAID_TYPE:
        raise MalformedMessage("not a SAID of version 1")
    entries = tuple(message[SAID_FIXED + ENTRY_BYTES * i:SAID_FIXED + ENTRY_BYTES * (i + 1)]
                    for i in range(k))
    return Said(message[2:34], message[34:66], entries)


# --------------------------------------------------------------------------------------------
# 20.5 Outcomes
# --------------------------------------------------------------------------------------------

NOT_YET = "not yet"
VERIFIED = P.VERIFIED
DEVICE_CHANGED = P.VERIFIED_DEVICE_CHANGED
TAG_UNCHECKED = P.VERIFIED_TAG_UNCHECKED
WRONG = "wrong"
REFUSED = "refused"  # authentication_failed: neither verified nor wrong
UNKNOWN = "unknown"
ATTEMPTS_PER_ROUND = 3

# The result code each outcome stands for (REFUSED is the authentication_failed of 20.5 step 1).
OUTCOME_RESULT = {REFUSED: AuthenticationFailed.code}


# --------------------------------------------------------------------------------------------
# One device's roll call
# --------------------------------------------------------------------------------------------

@dataclass
class RollCallContact:
    """A contact as this device holds it: a name to show, its pid (9: the identity public key,
    or the 8 fingerprint bytes of a source-format contact), the seed (3) and the device
    secrets with their Security PIN Update state (10.1, 10.3).  A contact awaiting the peer's
    confirmation (8.1) takes no part."""
    name: str
    pid: bytes
    seed: bytes
    secrets: P.ContactSecrets
    awaiting_confirmation: bool = False


@dataclass
class Participant:
    """A HELLO held (20.2): the slot it came from (None for this device's own), its hello_hash,
    and the contact it is (an index into the roll call's contacts) or None (unknown, or this
    device)."""
    hello: bytes
    hello_hash: bytes
    slot: object
    window: int
    nonce: bytes
    contact: int | None
    own: bool = False


@dataclass
class _Round:
    """What a round holds; a new participant starts a new one (20.2)."""
    roster: bytes
    confirmed: bool = False
    code: int | None = None
    said: bytes | None = None
    saids: dict[bytes, bytes] = field(default_factory=dict)  # speaker hash -> SAID taken
    entries: dict[bytes, bytes] = field(default_factory=dict)  # speaker hash -> my entry
    heard: dict[bytes, int] = field(default_factory=dict)  # typed, waiting for the SAID
    wrong: dict[bytes, int] = field(default_factory=dict)  # wrong codes this round
    checked: dict[bytes, str] = field(default_factory=dict)  # participants checked this round


@dataclass(frozen=True)
class RosterView:
    """What 20.3 shows before the owner confirms: the roster hash it confirms, the names of
    the contacts present, and how many participants are unknown."""
    roster: bytes
    contacts_present: tuple[str, ...]
    unknown: int
    participants: int


class RollCall:
    """One device's roll call (20).

    ``contacts`` are the device's contacts in the fixed order in which a HELLO's tags are
    looked up ("the first one wins").  The device joins at ``now``: its window ``W`` is
    window(now) and its nonce is drawn then (or given); the HELLO's padding tags are drawn (or
    given, as many as ``n`` minus the contacts that take part).  ``random_bytes(k)`` gives k
    random bytes (os.urandom by default).

    Every method takes the time of the call: more than 600 seconds after joining, every call
    is ``expired``.  Every refusal raises the protocol.py exception of its result code and
    leaves the state as it was."""

    def __init__(self, meeting_code_text: str, identity_public: bytes,
                 contacts: Sequence[RollCallContact], now: int, *,
                 nonce: bytes | None = None, padding_tags: Sequence[bytes] | None = None,
                 random_bytes: Callable[[int], bytes] = os.urandom):
        if now < 0:
            raise InvalidArgument("a time before 1970")
        self.meeting_code = meeting_code(meeting_code_text)
        self.rcid = rcid(self.meeting_code)
        self.room_id = room_id(self.meeting_code)
        self.pid = bytes(identity_public)
        self.contacts = list(contacts)
        self.joined_at = now
        self.window = P.window_of(now)
        self._random = random_bytes
        taking_part = [c for c in self.contacts if not c.awaiting_confirmation]
        n = tag_count(len(taking_part))
        self.nonce = bytes(nonce) if nonce is not None else random_bytes(NONCE_BYTES)
        if len(self.nonce) != NONCE_BYTES:
            raise ValueError("a nonce is 16 bytes")
        real = [presence_tag(c.seed, self.rcid, self.window, self.nonce, self.pid, c.pid)
                for c in taking_part]
        self.contact_tags = real
        if padding_tags is not None:
            padding = [bytes(t) for t in padding_tags]
            if len(padding) != n - len(real):
                raise ValueError(f"{n - len(real)} padding tags, not {len(padding)}")
        else:
            # Reading: the document does not say what to do when a drawn tag equals another
            # (1 in 2^128 per pair); tags must be strictly ascending, so it is drawn again.
            padding, seen = [], set(real)
            while len(padding) < n - len(real):
                t = random_bytes(TAG_BYTES)
                if t not in seen:
                    seen.add(t)
                    padding.append(t)
        self.padding_tags = padding
        self._hello = hello_message(self.window, self.nonce, real + padding)
        own = Participant(self._hello, sha256(self._hello), None, self.window, self.nonce,
                          None, own=True)
        self.hello_hash = own.hello_hash
        self.participants: dict[bytes, Participant] = {own.hello_hash: own}
        self._by_slot: dict[object, bytes] = {}
        self.states: dict[bytes, str] = {}  # shown beside each contact: checks stay (20.2)
        self.round_number = 1
        self._round = _Round(self._roster())

    # -- time ------------------------------------------------------------------------------

    def _alive(self, now: int) -> None:
        if now < 0:
            raise InvalidArgument("a time before 1970")
        # "A roll call lasts 600 seconds on a device from the moment it joined: after that
        # every call is expired."  Reading: at joined + 600 it still runs, one second later
        # it has expired (as 11.3's "more than 600 seconds after").
        if now - self.joined_at > LIFETIME_SECONDS:
            raise Expired("the roll call ended 600 seconds after joining")

    # -- 20.2 ------------------------------------------------------------------------------

    def hello(self, now: int) -> bytes:
        """The HELLO to send on joining and on every ``peer-joined``: the same bytes each
        time."""
        self._alive(now)
        return self._hello

    def _roster(self) -> bytes:
        return roster_hash(self.rcid, self.participants)

    @property
    def roster(self) -> bytes:
        return self._round.roster

    def _identify(self, hello: Hello) -> int | None:
        for i, c in enumerate(self.contacts):
            if c.awaiting_confirmation:  # Reading: left out when receiving as when sending
                continue
            if presence_tag(c.seed, self.rcid, hello.window, hello.nonce, c.pid,
                            self.pid) in hello.tags:
                return i
        return None

    def receive(self, slot: object, message: bytes, now: int) -> str | None:
        """A binary message from relay slot ``slot``: a HELLO or a SAID.  Returns ``"hello"``
        for a new participant (a new round has started), ``"said"`` for a SAID taken, None for
        a repeat ignored; raises the refusal otherwise."""
        self._alive(now)
        message = bytes(message)
        if len(message) >= 2 and message[1] == HELLO_TYPE:
            return self._receive_hello(slot, message, now)
        if len(message) >= 2 and message[1] == SAID_TYPE:
            return self._receive_said(slot, message)
        raise MalformedMessage("neither a HELLO nor a SAID")

    def peer_joined(self, now: int) -> bytes:
        """The relay announced a new peer (15.9 ``peer-joined``): the HELLO to send again, "so
        that the newcomer has it"."""
        return self.hello(now)

    def receive_forwarded(self, forwarded: bytes, now: int) -> str | None:
        """A binary message as a group room forwards it (15.9): ``u16(slot) || payload``."""
        self._alive(now)
        if len(forwarded) < 2:
            raise MalformedMessage("a forwarded message starts with its sender's slot")
        return self.receive(int.from_bytes(forwarded[:2], "big"), forwarded[2:], now)

    def _receive_hello(self, slot: object, message: bytes, now: int) -> str | None:
        hello = parse_hello(message)
        hh = sha256(message)
        if hh in self.participants:
            return None  # "A HELLO equal to one already held [...] is ignored."
        if slot in self._by_slot:
            raise MalformedMessage("a second, different HELLO from one relay slot")
        current = P.window_of(now)
        if hello.window < current - WINDOWS_BEFORE or hello.window > current + WINDOWS_AFTER:
            raise InvalidArgument("a HELLO of another roll call's window")
        if len(self.participants) + 1 > MAX_PARTICIPANTS:
            raise InvalidArgument("more than 50 participants")
        self.participants[hh] = Participant(message, hh, slot, hello.window, hello.nonce,
                                            self._identify(hello))
        self._by_slot[slot] = hh
        self._new_round()
        return "hello"

    def _new_round(self) -> None:
        """A new participant: "the device forgets the codes heard and received in the round
        before, and its owner must confirm the new roster and read a new code. Checks already
        made (20.5) stay.\""""
        self.round_number += 1
        self._round = _Round(self._roster())

    def participant(self, hello_hash: bytes) -> Participant:
        return self.participants[hello_hash]

    def contact_of(self, hello_hash: bytes) -> RollCallContact | None:
        p = self.participants.get(hello_hash)
        return None if p is None or p.contact is None else self.contacts[p.contact]

    def others(self) -> list[bytes]:
        """The other participants' hello_hashes in ascending order: the order of a SAID's
        entries."""
        return sorted(h for h in self.participants if h != self.hello_hash)

    # -- 20.3 ------------------------------------------------------------------------------

    def view(self, now: int) -> RosterView:
        """What the owner is shown before confirming."""
        self._alive(now)
        present, unknown = [], 0
        for hh in self.others():
            p = self.participants[hh]
            if p.contact is None:
                unknown += 1
            else:
                present.append(self.contacts[p.contact].name)
        return RosterView(self.roster, tuple(present), unknown, len(self.participants))

    def confirm(self, roster: bytes, now: int, *, code: int | None = None,
                draws: Callable[[], bytes] | Iterable[bytes] | None = None) -> str:
        """The owner confirms the roster ``roster`` (the hash it was shown); this draws the
        round's code (or takes ``code``, or draws it from the 2-byte ``draws``) and returns its
        text.  Another roster hash, or a second confirmation in the round, is
        ``invalid_state``."""
        self._alive(now)
        rnd = self._round
        if not hmac.compare_digest(bytes(roster), rnd.roster):
            raise InvalidState("the roster changed while shown: show it again")
        if rnd.confirmed:
            raise InvalidState("this round's roster is confirmed already")
        if len(self.participants) < 2:
            # Reading: the document does not say; with nobody else there is no SAID to make
            # (k would be 0, which 20.4 refuses), so there is nothing to confirm.
            raise InvalidState("no other participant")
        if code is None:
            code = draw_code_value(draws if draws is not None else (lambda: self._random(2)))
        elif not 0 <= code < CODE_VALUES:
            raise ValueError("a code is below 26000")
        rnd.confirmed, rnd.code = True, code
        return code_text(code)

    @property
    def confirmed(self) -> bool:
        return self._round.confirmed

    @property
    def code(self) -> int | None:
        """This round's code, once the roster is confirmed."""
        return self._round.code

    # -- 20.4 ------------------------------------------------------------------------------

    def said(self, now: int, *, padding: dict[bytes, bytes] | None = None) -> bytes:
        """The owner confirmed "I said it": the SAID of this round, once.  ``padding`` may give
        the 50-byte entry of each participant that is not this device's contact (by
        hello_hash); the others are drawn."""
        self._alive(now)
        rnd = self._round
        if not rnd.confirmed:
            raise InvalidState("the roster is not confirmed: there is no code to say")
        if rnd.said is not None:
            raise InvalidState("this round's SAID was sent: a new one needs a new round")
        entries = []
        for hh in self.others():
            c = self.contact_of(hh)
            if c is None:
                e = padding[hh] if padding is not None and hh in padding else \
                    self._random(ENTRY_BYTES)
                if len(e) != ENTRY_BYTES:
                    raise ValueError("a padding entry is 50 bytes")
                entries.append(bytes(e))
            else:
                entries.append(self.entry_for(hh))
        rnd.said = said_message(self.hello_hash, rnd.roster, entries)
        return rnd.said

    def key_for(self, hello_hash: bytes) -> bytes:
        """k(self -> P) for a participant P that is a contact."""
        c = self._contact_or_refuse(hello_hash)
        return code_key(c.seed, self.rcid, self.roster, self.hello_hash, hello_hash, self.pid,
                        c.pid)

    def device_tag_for(self, hello_hash: bytes) -> bytes:
        """dtag(self) as sent to the contact P: over the device secret this device gave it (the
        new one once committed to a Security PIN Update, 10.3), or empty."""
        c = self._contact_or_refuse(hello_hash)
        return device_tag(c.seed, self.pid, self.roster, c.secrets.says())

    def entry_for(self, hello_hash: bytes) -> bytes:
        rnd = self._round
        if rnd.code is None:
            raise InvalidState("no code before the roster is confirmed")
        return seal_entry(self.key_for(hello_hash), rnd.roster, rnd.code,
                          self.device_tag_for(hello_hash))

    def _contact_or_refuse(self, hello_hash: bytes) -> RollCallContact:
        c = self.contact_of(hello_hash)
        if c is None:
            raise InvalidState("not a participant that is a contact")
        return c

    def _receive_said(self, slot: object, message: bytes) -> str | None:
        said = parse_said(message)
        rnd = self._round
        # The order of the checks after the form: the vectors refuse a SAID from a speaker
        # whose HELLO is not held as invalid_state although its k does not fit the roster
        # either, so the k check, which 20.4 lists with the form, is made against the roster
        # only once the speaker and the roster are known to be this device's.
        if said.speaker not in self.participants:
            raise InvalidState("a SAID from a participant whose HELLO is not held")
        if said.speaker == self.hello_hash:
            raise InvalidKey("a SAID naming this device as its speaker")
        # "a SAID that came from another relay slot than its speaker's HELLO: invalid_state"
        # (the relay assigns slots: another participant can neither speak for one nor block
        # one by sending a SAID in its name first; nothing is kept from the refused SAID).
        if slot != self.participants[said.speaker].slot:
            raise InvalidState("a SAID from another relay slot than its speaker's HELLO")
        if not hmac.compare_digest(said.roster, rnd.roster):
            raise InvalidState("a SAID of another roster")
        if len(said.entries) != len(self.participants) - 1:
            raise MalformedMessage("a SAID whose k is not the roster's size minus one")
        held = rnd.saids.get(said.speaker)
        if held is not None:
            if held == message:
                return None  # "A SAID equal to one already taken is ignored."
            raise MalformedMessage("a second, different SAID from one speaker")
        rnd.saids[said.speaker] = message
        if self.participants[said.speaker].contact is not None:
            position = sorted(h for h in self.participants if h != said.speaker).index(
                self.hello_hash)
            rnd.entries[said.speaker] = said.entries[position]
            self._check(said.speaker)
        return "said"

    # -- 20.5 ------------------------------------------------------------------------------

    def hear(self, hello_hash: bytes, text: str, now: int) -> str:
        """The owner typed the code the participant ``hello_hash`` (a contact) said.  Returns
        the participant's state afterwards: NOT_YET while its SAID is not in, else the outcome
        of the check (VERIFIED, DEVICE_CHANGED, TAG_UNCHECKED, WRONG or REFUSED)."""
        self._alive(now)
        rnd = self._round
        if not rnd.confirmed:
            raise InvalidState("typing before the roster is confirmed")
        # Reading: a hello_hash that names no participant is refused as a participant that
        # is not a contact.
        self._contact_or_refuse(hello_hash)
        if hello_hash in rnd.checked:
            raise InvalidState("this participant was checked in this round")
        if rnd.wrong.get(hello_hash, 0) >= ATTEMPTS_PER_ROUND:
            raise Locked("three wrong codes in this round: wait for a new round")
        try:
            value = P.parse_voice_code(text)
        except P.TypingError as exc:
            raise InvalidArgument(str(exc)) from exc
        # Reading: a code typed again before the SAID arrives replaces the one typed before;
        # nothing was compared, so nothing is counted.
        rnd.heard[hello_hash] = value
        self._check(hello_hash)
        return self.state_of(hello_hash)

    def state_of(self, hello_hash: bytes) -> str:
        """What the screen shows beside a participant: UNKNOWN for a device that holds no
        seed with this one, else the last check's outcome (checks stay across rounds) or
        NOT_YET.  A participant locked in this round shows WRONG (and ``locked`` says so)."""
        p = self.participants[hello_hash]
        if p.own:
            raise ValueError("this device's own row")
        if p.contact is None:
            return UNKNOWN
        return self.states.get(hello_hash, NOT_YET)

    def locked(self, hello_hash: bytes) -> bool:
        return self._round.wrong.get(hello_hash, 0) >= ATTEMPTS_PER_ROUND

    def _check(self, hello_hash: bytes) -> None:
        """Compare once the heard code and the entry are both in, and the roster of this round
        is confirmed."""
        rnd = self._round
        if not rnd.confirmed or hello_hash not in rnd.heard or hello_hash not in rnd.entries:
            return
        heard = rnd.heard.pop(hello_hash)
        c = self.contacts[self.participants[hello_hash].contact]
        key = code_key(c.seed, self.rcid, rnd.roster, hello_hash, self.hello_hash, c.pid,
                       self.pid)
        try:
            value, dtag = open_entry(key, rnd.roster, rnd.entries[hello_hash])
        except AuthenticationFailed:
            rnd.checked[hello_hash] = self.states[hello_hash] = REFUSED
            return
        if not hmac.compare_digest(value.to_bytes(2, "big"), heard.to_bytes(2, "big")):
            rnd.wrong[hello_hash] = rnd.wrong.get(hello_hash, 0) + 1
            self.states[hello_hash] = WRONG
            return
        current, pending, previous = c.secrets.accepts()

        def expected(secret: bytes | None) -> bytes | None:
            return None if secret is None else device_tag(c.seed, c.pid, rnd.roster, secret)

        heard_class = P.ov_tag_heard(dtag, expected(current), expected(pending),
                                     expected(previous))
        # "The outcome is recorded on the contact as 10.1 says", with the device secrets of
        # 10.3 read "as Online Verify does (11.3)": a 32-byte tag of the peer's pending or
        # previous new secret completes or adopts it, as an Online Verify device tag does.
        outcome = c.secrets.record(True, heard_class)
        rnd.checked[hello_hash] = self.states[hello_hash] = outcome
