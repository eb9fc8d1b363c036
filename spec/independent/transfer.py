"""Section 17 of docs/PROTOCOL.md (device transfer), built from that document only.

The contents carried (17), the password export (17.1) and opening it (17.2), and the live
transfer (17.3).  Section 4.1 (SAS), the encodings of section 1, the alphabet of 16.1 and the
attempt limiter of 10.2 come from :mod:`independent.protocol`.  Argon2id, AES-256-GCM and X25519
are the ``cryptography`` package's.

Every refusal raises a subclass of :class:`protocol.ProtocolError`, one per reason class:
:class:`Malformed` (a foreign or truncated export, a malformed, out-of-order or repeated
message), :class:`InvalidInput` (a typed or chosen password of the wrong form; its subclass
:class:`UnsupportedExport`, an export of another version, key derivation or password kind, with
parameters outside the window, or of the source's format), :class:`AuthenticationFailed` (an
AES-GCM tag that fails: a wrong password, an altered export or identity message),
:class:`CorruptContents` (contents that opened but do not parse, or whose fingerprint does not
match the key), :class:`InvalidKey` (a peer key refused: an all-zero X25519 result, S = R) and
:class:`InvalidState` (a call out of turn, or any call once the transfer has ended).
"""

from __future__ import annotations

import hmac
import struct
from dataclasses import dataclass
from typing import Callable, Iterable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

from .protocol import (
    CODE_ALPHABET,
    CODE_BASE,
    CODE_DRAW_BELOW,
    AttemptLimiter,
    ProtocolError,
    _byte_source,
    b64_decode,
    b64url_decode,
    b64url_encode,
    ed25519_public,
    fingerprint,
    format_short_code,
    hkdf,
    lv_cat,
    sas_value,
    sha256,
    typed_chars,
    u8,
    validate_name,
    x25519_public,
    x25519_shared,
)


class Malformed(ProtocolError):
    """An export or a message of the wrong form: foreign, truncated, of the wrong length or
    type, out of order or repeated."""


class InvalidInput(ProtocolError):
    """A typed password that is not of its kind's form, or a chosen password that is too
    short."""


class UnsupportedExport(InvalidInput):
    """An export this version does not read: another version (also in the text's prefix), key
    derivation or password kind, or parameters outside the window, refused before any key is
    derived."""


class SourceFormatExport(UnsupportedExport):
    """17.1, refused formats: the source's export (base64 QR text, or JSON naming version 3),
    never accepted; the person should make a new export on the old device."""


class AuthenticationFailed(ProtocolError):
    """The AES-GCM tag fails: a wrong password or an altered export (17.2), an identity message
    that does not open (17.3)."""


class CorruptContents(ProtocolError):
    """Contents that opened but are not of the form of section 17, or whose fingerprint differs
    from the one recomputed from the key."""


class InvalidKey(ProtocolError):
    """17.3: the peer's X25519 key is refused: an all-zero shared secret, or S = R."""


class InvalidState(ProtocolError):
    """17.3: a step out of turn (a confirmation before the key message, a second one), or any
    step once the transfer has ended."""


class TransferExpired(ProtocolError):
    """17.3: a transfer lasts at most 10 minutes."""


def _be16(n: int) -> bytes:
    return struct.pack(">H", n)


def _be32(n: int) -> bytes:
    return struct.pack(">I", n)


GCM_TAG_BYTES = 16
KEY_BYTES = 32


def _aes_gcm_open(key: bytes, nonce: bytes, sealed: bytes, aad: bytes) -> bytes:
    try:
        return AESGCM(key).decrypt(nonce, sealed, aad)
    except InvalidTag as exc:
        raise AuthenticationFailed("the AES-GCM tag does not verify") from exc


# --------------------------------------------------------------------------------------------
# 17: the contents
# --------------------------------------------------------------------------------------------

SEED_BYTES = 32
CONTACTS_KEY_BYTES = 32
FINGERPRINT_CHARS = 16
NAME_MAX = 128
CONTENTS_FIXED = SEED_BYTES + CONTACTS_KEY_BYTES + 2 + FINGERPRINT_CHARS  # 82: all but the name
CONTENTS_MIN = CONTENTS_FIXED + 1
CONTENTS_MAX = CONTENTS_FIXED + NAME_MAX


@dataclass(frozen=True)
class Contents:
    """What both ways of 17 carry: the identity's Ed25519 private key (RFC 8032 seed), its
    contacts key and name, and the fingerprint as carried (checked against the key)."""
    identity_seed: bytes
    contacts_key: bytes
    name: bytes
    fingerprint_text: str
    encoded: bytes

    @property
    def identity_pk(self) -> bytes:
        return ed25519_public(self.identity_seed)


def build_contents(identity_seed: bytes, contacts_key: bytes, name: bytes) -> bytes:
    """seed (32) | contacts key (32) | be16(len(name)) | name | fingerprint (16 ASCII)."""
    if len(identity_seed) != SEED_BYTES or len(contacts_key) != CONTACTS_KEY_BYTES:
        raise ValueError("the seed and the contacts key are 32 bytes each")
    validate_name(name)
    fp = fingerprint(ed25519_public(identity_seed)).encode("ascii")
    return identity_seed + contacts_key + _be16(len(name)) + name + fp


def parse_contents(data: bytes) -> Contents:
    """17: parsed strictly (exact lengths, a valid name), the fingerprint recomputed from the
    key and compared."""
    if not CONTENTS_MIN <= len(data) <= CONTENTS_MAX:
        raise CorruptContents(f"contents of {len(data)} bytes")
    seed, contacts_key = data[:32], data[32:64]
    (n,) = struct.unpack(">H", data[64:66])
    if len(data) != CONTENTS_FIXED + n:
        raise CorruptContents("the name length does not match the contents' length")
    name = data[66:66 + n]
    carried = data[66 + n:]
    try:
        validate_name(name)
    except ProtocolError as exc:
        raise CorruptContents(f"invalid name: {exc}") from exc
    expected = fingerprint(ed25519_public(seed)).encode("ascii")
    if not hmac.compare_digest(carried, expected):
        raise CorruptContents("the fingerprint does not match the key")
    return Contents(seed, contacts_key, name, carried.decode("ascii"), bytes(data))


# --------------------------------------------------------------------------------------------
# 17.1: passwords
# --------------------------------------------------------------------------------------------

KIND_GENERATED = 1
KIND_CHOSEN = 2
PASSWORD_KINDS = (KIND_GENERATED, KIND_CHOSEN)
GENERATED_CHARS = 13
GENERATED_GROUPS = (4, 4, 5)  # shown ABCD-EFGH-JKMNP
CHOSEN_MIN_CHARS = 8


def draw_password(random1: Callable[[], int] | Iterable[int]) -> str:
    """13 characters of the alphabet of 16.1, each from one random byte taken while it is
    248 or more is redrawn, the index being the byte mod 31.  Returns the canonical form."""
    next_byte = _byte_source(random1)
    chars = []
    while len(chars) < GENERATED_CHARS:
        r = next_byte()
        if not 0 <= r <= 0xFF:
            raise ValueError("passwords are drawn one byte at a time")
        if r < CODE_DRAW_BELOW:
            chars.append(CODE_ALPHABET[r % CODE_BASE])
    return "".join(chars)


def format_password(canonical: str) -> str:
    """How a generated password is shown: ABCD-EFGH-JKMNP."""
    if canonical_password(canonical) != canonical:
        raise ValueError("not a canonical generated password")
    out, at = [], 0
    for n in GENERATED_GROUPS:
        out.append(canonical[at:at + n])
        at += n
    return "-".join(out)


def canonical_password(typed: str) -> str:
    """A typed generated password: any case (ASCII), spaces and '-' ignored; any other
    character outside the alphabet, or a count other than 13, is refused."""
    return "".join(typed_chars(typed, GENERATED_CHARS, "a generated password", InvalidInput))


def password_bytes(kind: int, typed: str) -> bytes:
    """What Argon2id hashes: kind 1, the canonical form (13 upper-case ASCII characters);
    kind 2, the password exactly as typed, in UTF-8, at least 8 characters."""
    if kind == KIND_GENERATED:
        return canonical_password(typed).encode("ascii")
    if kind == KIND_CHOSEN:
        if not isinstance(typed, str):
            raise InvalidInput("a password is text")
        if len(typed) < CHOSEN_MIN_CHARS:
            raise InvalidInput("a chosen password has at least 8 characters")
        try:
            return typed.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate
            raise InvalidInput("the password is not valid text") from exc
    raise InvalidInput(f"unknown password kind {kind}")


# --------------------------------------------------------------------------------------------
# 17.1: the export
# --------------------------------------------------------------------------------------------

EXPORT_MAGIC = b"ITSMEXP"
EXPORT_VERSION = 1
KDF_ARGON2ID13 = 1
EXPORT_TEXT_PREFIX = "ITSMEXP1:"
SALT_BYTES = 16
NONCE_BYTES = 12
PASSES_WRITTEN = 3  # libsodium's moderate level
MEMORY_KIB_WRITTEN = 256 * 1024
PASSES_MIN, PASSES_MAX = 3, 10
MEMORY_KIB_MIN, MEMORY_KIB_MAX = 256 * 1024, 1024 * 1024
ARGON2_LANES = 1

# magic | version | kdf | be32 passes | be32 memory | kind | salt | nonce: the fields 17.1 lists,
# 46 bytes.
_HEADER = struct.Struct(">7sBBIIB16s12s")
HEADER_BYTES = _HEADER.size  # 46
EXPORT_MIN = HEADER_BYTES + CONTENTS_MIN + GCM_TAG_BYTES
EXPORT_MAX = HEADER_BYTES + CONTENTS_MAX + GCM_TAG_BYTES


def argon2id(password: bytes, salt: bytes, passes: int, memory_kib: int) -> bytes:
    """Argon2id 1.3 (RFC 9106), parallelism 1, 32 bytes, no secret and no associated data."""
    return Argon2id(salt=salt, length=KEY_BYTES, iterations=passes, lanes=ARGON2_LANES,
                    memory_cost=memory_kib).derive(password)


Kdf = Callable[[bytes, bytes, int, int], bytes]


@dataclass(frozen=True)
class ExportHeader:
    version: int
    kdf: int
    passes: int
    memory_kib: int
    kind: int
    salt: bytes
    nonce: bytes

    def encode(self) -> bytes:
        return _HEADER.pack(EXPORT_MAGIC, self.version, self.kdf, self.passes, self.memory_kib,
                            self.kind, self.salt, self.nonce)


def export_header(kind: int, salt: bytes, nonce: bytes, passes: int = PASSES_WRITTEN,
                  memory_kib: int = MEMORY_KIB_WRITTEN) -> bytes:
    if kind not in PASSWORD_KINDS:
        raise ValueError("password kind is 1 (generated) or 2 (chosen)")
    if len(salt) != SALT_BYTES or len(nonce) != NONCE_BYTES:
        raise ValueError("the salt is 16 bytes and the nonce 12")
    return ExportHeader(EXPORT_VERSION, KDF_ARGON2ID13, passes, memory_kib, kind, salt,
                        nonce).encode()


def parse_export_header(export: bytes) -> ExportHeader:
    """17.2: the export's length and its header, checked before any key is derived, in the
    order of 1.1: the size first (outside 145 to 272 bytes: malformed_message, whatever the
    header says), then the shape (the 'ITSMEXP' magic: malformed_message), then the version,
    key derivation, password kind and parameters (3 to 10 passes over 256 MiB to 1 GiB), each
    refused as unsupported (invalid_argument, the code 17.1 names for them)."""
    if not EXPORT_MIN <= len(export) <= EXPORT_MAX:
        raise Malformed(f"an export of {len(export)} bytes, not 145 to 272")
    if export[:len(EXPORT_MAGIC)] != EXPORT_MAGIC:
        raise Malformed("not an ItsMe export")
    magic, version, kdf, passes, memory_kib, kind, salt, nonce = _HEADER.unpack_from(export)
    if version != EXPORT_VERSION:
        raise UnsupportedExport(f"unknown export version {version}")
    if kdf != KDF_ARGON2ID13:
        raise UnsupportedExport(f"unknown key derivation {kdf}")
    if kind not in PASSWORD_KINDS:
        raise UnsupportedExport(f"unknown password kind {kind}")
    if not PASSES_MIN <= passes <= PASSES_MAX:
        raise UnsupportedExport(f"{passes} passes, outside 3 to 10")
    if not MEMORY_KIB_MIN <= memory_kib <= MEMORY_KIB_MAX:
        raise UnsupportedExport(f"{memory_kib} KiB, outside 256 MiB to 1 GiB")
    return ExportHeader(version, kdf, passes, memory_kib, kind, salt, nonce)


def export_text(export: bytes) -> str:
    return EXPORT_TEXT_PREFIX + b64url_encode(export)


EXPORT_TEXT_MAGIC = "ITSMEXP"

# 17.1 and 17.3: the characters dropped around an export or offer text (U+0009, U+000A,
# U+000D, U+0020), and no others: not U+000B, U+000C, U+0085, U+00A0, U+2028, U+3000, U+FEFF...
TEXT_AROUND = "\t\n\r "

_SOURCE_QR_MIN_BYTES = 64


def strip_text(text: str) -> str:
    """17.1: "A text is read with its surrounding tabs, line feeds, carriage returns and
    spaces (U+0009, U+000A, U+000D, U+0020) dropped, and no other character [...]; nothing
    inside it is dropped."  (str.strip with these four characters, unlike str.strip(), which
    drops every Unicode white space.)"""
    return text.strip(TEXT_AROUND)


def _source_format(text: str) -> bool:
    """17.1, refused formats, for a text (its surrounding characters already dropped) that does
    not start with 'ITSMEXP': whole, strict padded base64 or strict base64url (section 1) of at
    least 64 bytes (the source's QR text); or, textually (no JSON parser), the text with every
    tab, line feed, carriage return and space removed starts with '{' and contains
    '"version":3' (so '"version":30' too) or '"privateKey"'."""
    compact = "".join(c for c in text if c not in TEXT_AROUND)
    if compact.startswith("{") and ('"version":3' in compact or '"privateKey"' in compact):
        return True
    for decode in (b64_decode, b64url_decode):
        try:
            if len(decode(text)) >= _SOURCE_QR_MIN_BYTES:
                return True
        except ProtocolError:
            pass
    return False


def decode_export_text(text: str) -> bytes:
    """The export a text holds (17.1).  Its surrounding tabs, line feeds, carriage returns and
    spaces are dropped, nothing else.  Then: a text starting 'ITSMEXP1:' is followed by strict
    unpadded base64url (damaged: malformed_message); one starting 'ITSMEXP' but not
    'ITSMEXP1:' is another version (invalid_argument); one that does not start with 'ITSMEXP'
    but is the source's format is refused with that explanation (invalid_argument); anything
    else is malformed_message."""
    if not isinstance(text, str):
        raise Malformed("an export text is text")
    text = strip_text(text)
    if text.startswith(EXPORT_TEXT_PREFIX):
        try:
            return b64url_decode(text[len(EXPORT_TEXT_PREFIX):])
        except ProtocolError as exc:
            raise Malformed(f"export text: {exc}") from exc
    if text.startswith(EXPORT_TEXT_MAGIC):
        raise UnsupportedExport(
            f"an export text of another version ({text[:len(EXPORT_TEXT_PREFIX)]!r})")
    if _source_format(text):
        raise SourceFormatExport(
            "an export of the older app, which is not accepted: make a new export on the "
            "old device")
    raise Malformed("not an ItsMe export text")


@dataclass(frozen=True)
class Export:
    """One password export and every value of 17.1 that makes it."""
    kind: int
    password_bytes: bytes
    passes: int
    memory_kib: int
    salt: bytes
    nonce: bytes
    header: bytes
    key: bytes
    contents: bytes
    export: bytes
    text: str


def make_export(identity_seed: bytes, contacts_key: bytes, name: bytes, password: str,
                kind: int, salt: bytes, nonce: bytes, passes: int = PASSES_WRITTEN,
                memory_kib: int = MEMORY_KIB_WRITTEN, kdf: Kdf = argon2id) -> Export:
    """17.1.  ``password`` is the generated password (any typed form of it) for kind 1, or the
    chosen one for kind 2."""
    secret = password_bytes(kind, password)
    contents = build_contents(identity_seed, contacts_key, name)
    header = export_header(kind, salt, nonce, passes, memory_kib)
    parse_export_header(header + bytes(len(contents) + GCM_TAG_BYTES))  # in the window
    key = kdf(secret, salt, passes, memory_kib)
    export = header + AESGCM(key).encrypt(nonce, contents, header)
    return Export(kind, secret, passes, memory_kib, salt, nonce, header, key, contents, export,
                  export_text(export))


@dataclass(frozen=True)
class Opened:
    header: ExportHeader
    key: bytes
    contents: Contents


def open_export(export: bytes | str, typed: str, limiter: AttemptLimiter | None = None,
                now: int = 0, kdf: Kdf = argon2id) -> Opened:
    """17.2: the header first (refused without counting), the typed password read in the
    header's kind (refused without counting), then one counted attempt under the limiter of
    10.2: a tag that fails counts a failure; contents that opened are parsed strictly and the
    fingerprint checked (corrupt contents leave the count as it was); only an identity that
    opens and parses resets it.  The blob or its text is accepted."""
    data = decode_export_text(export) if isinstance(export, str) else bytes(export)
    header = parse_export_header(data)
    secret = password_bytes(header.kind, typed)
    if limiter is not None:
        limiter.check(now)
    key = kdf(secret, header.salt, header.passes, header.memory_kib)
    try:
        contents = _aes_gcm_open(key, header.nonce, data[HEADER_BYTES:], data[:HEADER_BYTES])
    except AuthenticationFailed:
        if limiter is not None:
            limiter.failure(now)
        raise
    parsed = parse_contents(contents)
    if limiter is not None:
        limiter.success(now)
    return Opened(header, key, parsed)


# --------------------------------------------------------------------------------------------
# 17.3: the live transfer
# --------------------------------------------------------------------------------------------

TRANSFER_VERSION = 1
TRANSFER_ID_BYTES = 16
OFFER_BYTES = 1 + TRANSFER_ID_BYTES + 32  # 49
OFFER_TEXT_PREFIX = "ITSMETR1:"
MSG_KEY = 1
MSG_IDENTITY = 2
KEY_MESSAGE_BYTES = 2 + 32
IDENTITY_MESSAGE_MIN = 2 + CONTENTS_MIN + GCM_TAG_BYTES  # 101
IDENTITY_MESSAGE_MAX = 2 + CONTENTS_MAX + GCM_TAG_BYTES  # 228
TRANSFER_TH_LABEL = b"itsme-transfer-v1"
TRANSFER_SEED_LABEL = b"itsme-transfer-seed-v1"
TRANSFER_KEY_LABEL = b"itsme-transfer-key-v1"
TRANSFER_ROOM_LABEL = b"itsme-transfer-room-v1"
TRANSFER_NONCE = bytes(12)
TRANSFER_SECONDS = 10 * 60


def offer(transfer_id: bytes, receiver_public: bytes) -> bytes:
    """u8(1) version | transfer_id (16) | R (32)."""
    if len(transfer_id) != TRANSFER_ID_BYTES or len(receiver_public) != 32:
        raise ValueError("the transfer id is 16 bytes and R 32")
    return u8(TRANSFER_VERSION) + transfer_id + receiver_public


def offer_text(offer_bytes: bytes) -> str:
    return OFFER_TEXT_PREFIX + b64url_encode(offer_bytes)


def parse_offer(data: bytes | str) -> tuple[bytes, bytes]:
    """An offer, or its text as scanned: (transfer_id, R).  17.3: "The sender reads the offer
    text as 17.1 reads an export text (tabs, line feeds, carriage returns and spaces around it
    dropped, nothing else)"; one that is not 'ITSMETR1:' and strict base64url of 49 bytes with
    version 1 is malformed_message."""
    if isinstance(data, str):
        data = strip_text(data)
        if not data.startswith(OFFER_TEXT_PREFIX):
            raise Malformed("not a transfer offer")
        try:
            data = b64url_decode(data[len(OFFER_TEXT_PREFIX):])
        except ProtocolError as exc:
            raise Malformed(f"offer text: {exc}") from exc
    if len(data) != OFFER_BYTES:
        raise Malformed(f"an offer of {len(data)} bytes")
    if data[0] != TRANSFER_VERSION:
        raise Malformed(f"unknown offer version {data[0]}")
    return bytes(data[1:17]), bytes(data[17:])


def transfer_room(transfer_id: bytes) -> str:
    """Lowercase hex of the first 16 bytes of SHA-256(lv_cat('itsme-transfer-room-v1', id))."""
    return sha256(lv_cat(TRANSFER_ROOM_LABEL, transfer_id))[:16].hex()


def key_message(sender_public: bytes) -> bytes:
    """u8(1) | u8(1) type | S (32)."""
    if len(sender_public) != 32:
        raise ValueError("S is 32 bytes")
    return u8(TRANSFER_VERSION) + u8(MSG_KEY) + sender_public


def _message_body(message: bytes, expected_type: int) -> bytes:
    if len(message) < 2:
        raise Malformed("a message of fewer than 2 bytes")
    if message[0] != TRANSFER_VERSION:
        raise Malformed(f"unknown message version {message[0]}")
    if message[1] != expected_type:
        raise Malformed(f"message of type {message[1]} where {expected_type} was expected")
    lo, hi = ((KEY_MESSAGE_BYTES, KEY_MESSAGE_BYTES) if expected_type == MSG_KEY
              else (IDENTITY_MESSAGE_MIN, IDENTITY_MESSAGE_MAX))
    if not lo <= len(message) <= hi:
        raise Malformed(f"a message of type {expected_type} of {len(message)} bytes")
    return bytes(message[2:])


def parse_key_message(message: bytes) -> bytes:
    return _message_body(message, MSG_KEY)


def transfer_th_input(transfer_id: bytes, receiver_public: bytes, sender_public: bytes) -> bytes:
    return lv_cat(TRANSFER_TH_LABEL, transfer_id, receiver_public, sender_public)


def transfer_th(transfer_id: bytes, receiver_public: bytes, sender_public: bytes) -> bytes:
    return sha256(transfer_th_input(transfer_id, receiver_public, sender_public))


def transfer_shared(my_secret: bytes, my_public: bytes, their_public: bytes) -> bytes:
    """X25519, refused when all zero or when the peer's key equals one's own (S = R)."""
    if hmac.compare_digest(my_public, their_public):
        raise InvalidKey("the peer's key equals one's own (S = R)")
    try:
        return x25519_shared(my_secret, their_public)
    except ProtocolError as exc:
        raise InvalidKey(str(exc)) from exc


def transfer_seed(shared: bytes, transfer_id: bytes) -> bytes:
    return hkdf(shared, transfer_id, TRANSFER_SEED_LABEL, 32)


def transfer_key(seed: bytes, th: bytes) -> bytes:
    return hkdf(seed, b"", lv_cat(TRANSFER_KEY_LABEL, th), 32)


def identity_message_aad(th: bytes) -> bytes:
    """u8(1) | u8(2) | th, concatenated."""
    return u8(TRANSFER_VERSION) + u8(MSG_IDENTITY) + th


def identity_message(key: bytes, th: bytes, contents: bytes) -> bytes:
    """u8(1) | u8(2) | AES-256-GCM(key, 12 zero bytes, contents, u8(1) | u8(2) | th)."""
    return (u8(TRANSFER_VERSION) + u8(MSG_IDENTITY)
            + AESGCM(key).encrypt(TRANSFER_NONCE, contents, identity_message_aad(th)))


def open_identity_message(message: bytes, key: bytes, th: bytes) -> Contents:
    sealed = _message_body(message, MSG_IDENTITY)
    return parse_contents(_aes_gcm_open(key, TRANSFER_NONCE, sealed, identity_message_aad(th)))


@dataclass(frozen=True)
class TransferKeys:
    """What both sides derive once they hold R and S."""
    transfer_id: bytes
    receiver_public: bytes
    sender_public: bytes
    shared: bytes
    transcript_input: bytes
    transcript_hash: bytes
    seed: bytes
    sas_value: int
    sas_text: str
    key: bytes


def transfer_keys(my_secret: bytes, my_public: bytes, their_public: bytes, transfer_id: bytes,
                  receiver_public: bytes, sender_public: bytes) -> TransferKeys:
    shared = transfer_shared(my_secret, my_public, their_public)
    t_in = transfer_th_input(transfer_id, receiver_public, sender_public)
    th = sha256(t_in)
    seed = transfer_seed(shared, transfer_id)
    value = sas_value(seed, th)
    return TransferKeys(transfer_id, receiver_public, sender_public, shared, t_in, th, seed,
                        value, format_short_code(value), transfer_key(seed, th))


class _Timed:
    def __init__(self, created_at: int | None):
        self.created_at = created_at
        self.failed = False

    def _check_time(self, now: int | None) -> None:
        if self.created_at is not None and now is not None and \
                now - self.created_at > TRANSFER_SECONDS:
            raise TransferExpired("a transfer lasts at most 10 minutes")

    def _guard(self, now: int | None, step: Callable[[], object]):
        if self.failed:
            raise InvalidState("the transfer has ended")
        try:
            self._check_time(now)
            return step()
        except ProtocolError:
            self.failed = True
            raise


class TransferReceiver(_Timed):
    """The new device: shows the offer, takes the key message (then shows the SAS), and opens
    the identity message only after its own confirmation.  Any failed step ends the transfer:
    every later call raises."""

    def __init__(self, ephemeral_secret: bytes, transfer_id: bytes,
                 created_at: int | None = None):
        super().__init__(created_at)
        if len(ephemeral_secret) != 32 or len(transfer_id) != TRANSFER_ID_BYTES:
            raise ValueError("r is 32 bytes and the transfer id 16")
        self.ephemeral_secret = ephemeral_secret
        self.public = x25519_public(ephemeral_secret)
        self.transfer_id = transfer_id
        self.offer = offer(transfer_id, self.public)
        self.offer_text = offer_text(self.offer)
        self.room = transfer_room(transfer_id)
        self.keys: TransferKeys | None = None
        self.confirmed = False
        self.held: bytes | None = None
        self.contents: Contents | None = None

    @property
    def done(self) -> bool:
        return self.contents is not None

    def receive(self, message: bytes, now: int | None = None) -> None:
        self._guard(now, lambda: self._receive(bytes(message)))

    def confirm(self, now: int | None = None) -> Contents | None:
        """The person confirmed the SAS on this device: the identity, if it arrived."""
        return self._guard(now, self._confirm)

    def _receive(self, message: bytes) -> None:
        if self.done:
            raise InvalidState("the transfer is done")
        if self.keys is None:
            s = parse_key_message(message)
            self.keys = transfer_keys(self.ephemeral_secret, self.public, s, self.transfer_id,
                                      self.public, s)
            return
        if self.held is not None:
            raise Malformed("a second identity message")
        _message_body(message, MSG_IDENTITY)  # a key message again is refused here
        self.held = message
        if self.confirmed:
            self._open()

    def _confirm(self) -> Contents | None:
        if self.keys is None:
            raise InvalidState("nothing to confirm: no key message yet")
        if self.confirmed:
            raise InvalidState("already confirmed")
        self.confirmed = True
        if self.held is not None:
            self._open()
        return self.contents

    def _open(self) -> None:
        self.contents = open_identity_message(self.held, self.keys.key,
                                              self.keys.transcript_hash)


class TransferSender(_Timed):
    """The old device: scans the offer, sends the key message, shows the SAS, and seals the
    identity message only when the person confirms."""

    def __init__(self, scanned_offer: bytes | str, ephemeral_secret: bytes,
                 identity_seed: bytes, contacts_key: bytes, name: bytes,
                 created_at: int | None = None):
        super().__init__(created_at)
        self.transfer_id, self.receiver_public = parse_offer(scanned_offer)
        self.ephemeral_secret = ephemeral_secret
        self.public = x25519_public(ephemeral_secret)
        self.contents = build_contents(identity_seed, contacts_key, name)  # the bytes sealed
        self.keys = transfer_keys(ephemeral_secret, self.public, self.receiver_public,
                                  self.transfer_id, self.receiver_public, self.public)
        self.key_message = key_message(self.public)
        self.sent_identity = False

    def confirm(self, now: int | None = None) -> bytes:
        def step() -> bytes:
            if self.sent_identity:
                raise InvalidState("the identity was already sent")
            self.sent_identity = True
            return identity_message(self.keys.key, self.keys.transcript_hash, self.contents)
        return self._guard(now, step)

    def cancel(self) -> None:
        """A SAS mismatch or a cancel: nothing is sent, and the transfer ends."""
        self.failed = True
