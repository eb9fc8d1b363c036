"""Section 17 of docs/PROTOCOL.md (device transfer), built from that document only.

The contents carried and the contact store beside them (17), the password export of format
version 1 (identity only, blob or ``ITSMEXP1:`` text) and of format version 2 (with the contact
store, blob only) (17.1) and opening it (17.2), and the live transfer of version 2 (17.3: the
offer, the key message, the identity message announcing ``len(store)``, then the store messages,
one per 32,768-byte chunk; a receiver that holds what arrives before its confirmation).
Section 4.1 (SAS), the encodings of section 1, the alphabet of 16.1 and the attempt limiter of
10.2 come from :mod:`independent.protocol`.  Argon2id, AES-256-GCM and X25519 are the
``cryptography`` package's.

Every refusal raises a subclass of :class:`protocol.ProtocolError`, one per reason class:
:class:`Malformed` (a foreign or truncated export, a malformed, out-of-order or repeated
message, a store message of the wrong length, more held than can be due), :class:`InvalidInput`
(a typed or chosen password of the wrong form, a contact store an exporter refuses; its subclass
:class:`UnsupportedExport`, an export of another version, key derivation or password kind, with
parameters outside the window, of the source's format, or a text holding an export of format
version 2), :class:`AuthenticationFailed` (an AES-GCM tag that fails: a wrong password, an
altered export, identity or store message, a chunk moved, repeated or of another transfer),
:class:`CorruptContents` (contents that opened but do not parse, whose fingerprint does not
match the key, a ``len(store)`` over 64 MiB, a store that is empty in an export of format
version 2 or not a SQLite file), :class:`InvalidKey` (a peer key refused: an all-zero X25519
result, S = R) and :class:`InvalidState` (a call out of turn, or any call once the transfer has
ended or is done; it changes nothing).
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
    """A typed password that is not of its kind's form, a chosen password that is too short,
    or a contact store an exporter refuses (17: over 64 MiB, or not a SQLite file)."""


class UnsupportedExport(InvalidInput):
    """An export this version does not read: another version (also in the text's prefix, and
    an export of format version 2 in a text, which that version does not have), key derivation
    or password kind, or parameters outside the window, refused before any key is derived."""


class SourceFormatExport(UnsupportedExport):
    """17.1, refused formats: the source's export (base64 QR text, or JSON naming version 3),
    never accepted; the person should make a new export on the old device."""


class AuthenticationFailed(ProtocolError):
    """The AES-GCM tag fails: a wrong password or an altered export (17.2), an identity or a
    store message that does not open (17.3)."""


class CorruptContents(ProtocolError):
    """Contents that opened but are not of the form of section 17, whose fingerprint differs
    from the one recomputed from the key, or whose contact store is not one (17: 1 to 64 MiB,
    beginning with SQLite's header; 17.3: a ``len(store)`` over 64 MiB)."""


class InvalidKey(ProtocolError):
    """17.3: the peer's X25519 key is refused: an all-zero shared secret, or S = R."""


class InvalidState(ProtocolError):
    """17.3: a step out of turn (a confirmation before the key message, a second one), a
    message once the transfer is done, or any step once the transfer has ended.  It changes
    nothing."""


class TransferExpired(ProtocolError):
    """17.3: a transfer lasts at most 10 minutes."""


def _be16(n: int) -> bytes:
    return struct.pack(">H", n)


def _be32(n: int) -> bytes:
    return struct.pack(">I", n)


def _be96(n: int) -> bytes:
    """u96(n) of 17.3: n as 12 bytes, big-endian."""
    return n.to_bytes(12, "big")


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


def split_contents(data: bytes) -> tuple[bytes, bytes]:
    """17.1, format version 2: "contents is parsed as in version 1 (the name's length says
    where it ends) and the rest is store".  Returns (contents, rest); too short to hold the
    name's length, or the name it announces, is corrupt."""
    if len(data) < SEED_BYTES + CONTACTS_KEY_BYTES + 2:
        raise CorruptContents(f"contents of {len(data)} bytes")
    (n,) = struct.unpack(">H", data[64:66])
    end = CONTENTS_FIXED + n
    if len(data) < end:
        raise CorruptContents("the name length runs past the contents")
    return bytes(data[:end]), bytes(data[end:])


# 17: the contact store, one file: a consistent copy of the SQLite database, 1 to 64 MiB,
# beginning with SQLite's 16-byte header.
STORE_HEADER = b"SQLite format 3\x00"
STORE_MAX = 64 * 1024 * 1024  # 67,108,864 bytes


def check_store(store: bytes, error: type[ProtocolError] = CorruptContents) -> bytes:
    """17: a contact store is 1 to 67,108,864 bytes beginning with "SQLite format 3" || 0x00.
    An importer refuses another as corrupt_data (``error`` by default); an exporter refuses
    one as invalid_argument (:class:`InvalidInput`)."""
    if not isinstance(store, (bytes, bytearray)):
        raise TypeError("a contact store is bytes")
    if not store:
        raise error("an empty contact store")
    if len(store) > STORE_MAX:
        raise error(f"a contact store of {len(store)} bytes, over 64 MiB")
    if store[:len(STORE_HEADER)] != STORE_HEADER:
        raise error("the contact store does not begin with SQLite's header")
    return bytes(store)


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
EXPORT_VERSION = 1  # the identity only; the only one with a text form
EXPORT_VERSION_CONTACTS = 2  # with the contact store: contents || store sealed, a file only
EXPORT_VERSIONS = (EXPORT_VERSION, EXPORT_VERSION_CONTACTS)
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
EXPORT_MIN = HEADER_BYTES + CONTENTS_MIN + GCM_TAG_BYTES  # 145
EXPORT_MAX = HEADER_BYTES + CONTENTS_MAX + GCM_TAG_BYTES  # 272
# Format version 2: "144 bytes plus the name's length plus the store's: 146 to 67,109,136".
EXPORT2_MIN = EXPORT_MIN + 1  # 146
EXPORT2_MAX = EXPORT_MAX + STORE_MAX  # 67,109,136


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
                  memory_kib: int = MEMORY_KIB_WRITTEN, version: int = EXPORT_VERSION) -> bytes:
    """header (format version 1) or header2 (format version 2): the same fields but the
    version byte."""
    if version not in EXPORT_VERSIONS:
        raise ValueError("the format version is 1 (identity only) or 2 (with the contacts)")
    if kind not in PASSWORD_KINDS:
        raise ValueError("password kind is 1 (generated) or 2 (chosen)")
    if len(salt) != SALT_BYTES or len(nonce) != NONCE_BYTES:
        raise ValueError("the salt is 16 bytes and the nonce 12")
    return ExportHeader(version, KDF_ARGON2ID13, passes, memory_kib, kind, salt,
                        nonce).encode()


def export_size_window(version: int) -> tuple[int, int]:
    """17.2: "the size window of that version, 145 to 272 bytes for version 1 (the sizes of a
    1-byte and a 128-byte name) and 146 to 67,109,136 for version 2"."""
    if version == EXPORT_VERSION_CONTACTS:
        return EXPORT2_MIN, EXPORT2_MAX
    if version == EXPORT_VERSION:
        return EXPORT_MIN, EXPORT_MAX
    raise ValueError(f"no size window for format version {version}")


def parse_export_header(export: bytes, from_text: bool = False) -> ExportHeader:
    """17.2: the export's length and its header, checked before any key is derived, "in this
    order: at least 145 bytes and the `ITSMEXP` magic (else `malformed_message`); format
    version 1 or 2 (else `invalid_argument`, whatever the length); the size window of that
    version [...] (else `malformed_message`); then the key derivation, the parameters and the
    password kind (else `invalid_argument`)" (3 to 10 passes over 256 MiB to 1 GiB).
    ``from_text``: the export came in a text, which is format version 1 only ("a text holding
    a version-2 blob is invalid_argument")."""
    if len(export) < EXPORT_MIN:
        raise Malformed(f"an export of {len(export)} bytes, shorter than {EXPORT_MIN}")
    if export[:len(EXPORT_MAGIC)] != EXPORT_MAGIC:
        raise Malformed("not an ItsMe export")
    magic, version, kdf, passes, memory_kib, kind, salt, nonce = _HEADER.unpack_from(export)
    if version not in EXPORT_VERSIONS:
        raise UnsupportedExport(f"unknown export version {version}")
    lo, hi = export_size_window(version)
    if not lo <= len(export) <= hi:
        raise Malformed(f"an export of format version {version} of {len(export)} bytes, "
                        f"not {lo} to {hi}")
    if from_text and version != EXPORT_VERSION:
        raise UnsupportedExport(f"an export of format version {version} has no text form")
    if kdf != KDF_ARGON2ID13:
        raise UnsupportedExport(f"unknown key derivation {kdf}")
    if not PASSES_MIN <= passes <= PASSES_MAX:
        raise UnsupportedExport(f"{passes} passes, outside 3 to 10")
    if not MEMORY_KIB_MIN <= memory_kib <= MEMORY_KIB_MAX:
        raise UnsupportedExport(f"{memory_kib} KiB, outside 256 MiB to 1 GiB")
    if kind not in PASSWORD_KINDS:
        raise UnsupportedExport(f"unknown password kind {kind}")
    return ExportHeader(version, kdf, passes, memory_kib, kind, salt, nonce)


def export_text(export: bytes) -> str:
    """'ITSMEXP1:' || base64url(export), for an export of format version 1 only."""
    if export[7:8] != bytes([EXPORT_VERSION]):
        raise ValueError("only an export of format version 1 has a text form")
    return EXPORT_TEXT_PREFIX + b64url_encode(export)


def read_export_file(data: bytes) -> bytes | str:
    """17.1: an export's file holds the blob or the text (the text only for format version 1):
    "an importer tells a blob from a text by its eighth byte, 0x01 or 0x02 after ITSMEXP, where
    a text has 1 = 0x31".  Returns the blob, or the text to read as :func:`decode_export_text`
    does (a file that is neither, not even UTF-8, is no export: malformed_message)."""
    data = bytes(data)
    if data[:len(EXPORT_MAGIC)] == EXPORT_MAGIC and data[7:8] in (b"\x01", b"\x02"):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Malformed("neither an export nor an export text") from exc


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
    """One password export and every value of 17.1 that makes it.  ``store`` is the contact
    store of an export of format version 2 (empty for version 1), whose ``text`` is None."""
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
    text: str | None
    store: bytes = b""

    @property
    def version(self) -> int:
        return self.header[7]


def make_export(identity_seed: bytes, contacts_key: bytes, name: bytes, password: str,
                kind: int, salt: bytes, nonce: bytes, passes: int = PASSES_WRITTEN,
                memory_kib: int = MEMORY_KIB_WRITTEN, kdf: Kdf = argon2id,
                store: bytes | None = None) -> Export:
    """17.1.  ``password`` is the generated password (any typed form of it) for kind 1, or the
    chosen one for kind 2.  Without ``store``, format version 1 (the blob and its text); with
    it, format version 2: header2 || AES-256-GCM(key, nonce, contents || store, header2), with
    no text form.  A store the exporter refuses (empty, over 64 MiB, not a SQLite file) is
    invalid_argument, before any key is derived."""
    secret = password_bytes(kind, password)
    contents = build_contents(identity_seed, contacts_key, name)
    if store is None:
        version, plaintext, store = EXPORT_VERSION, contents, b""
    else:
        store = check_store(store, InvalidInput)
        version, plaintext = EXPORT_VERSION_CONTACTS, contents + store
    header = export_header(kind, salt, nonce, passes, memory_kib, version)
    parse_export_header(header + bytes(len(plaintext) + GCM_TAG_BYTES))  # in the window
    key = kdf(secret, salt, passes, memory_kib)
    export = header + AESGCM(key).encrypt(nonce, plaintext, header)
    return Export(kind, secret, passes, memory_kib, salt, nonce, header, key, contents, export,
                  export_text(export) if version == EXPORT_VERSION else None, store)


@dataclass(frozen=True)
class Opened:
    """An opened export: its header, its key, the contents, and the contact store (format
    version 2; empty for version 1)."""
    header: ExportHeader
    key: bytes
    contents: Contents
    store: bytes = b""


def open_export(export: bytes | str, typed: str, limiter: AttemptLimiter | None = None,
                now: int = 0, kdf: Kdf = argon2id) -> Opened:
    """17.2: the header first (refused without counting), the typed password read in the
    header's kind (refused without counting), then one counted attempt under the limiter of
    10.2: a tag that fails counts a failure; contents that opened are parsed strictly and the
    fingerprint checked (corrupt contents leave the count as it was); only an identity that
    opens and parses resets it.  The blob (of format version 1 or 2) or its text (version 1
    only) is accepted.  Format version 2: the contents are parsed up to the end the name's
    length gives, and the rest is the contact store, refused as corrupt when empty, not a
    SQLite file, or over 64 MiB (a name shorter than 128 bytes leaves room in the window for a
    longer one)."""
    from_text = isinstance(export, str)
    data = decode_export_text(export) if from_text else bytes(export)
    header = parse_export_header(data, from_text)
    secret = password_bytes(header.kind, typed)
    if limiter is not None:
        limiter.check(now)
    key = kdf(secret, header.salt, header.passes, header.memory_kib)
    try:
        plaintext = _aes_gcm_open(key, header.nonce, data[HEADER_BYTES:], data[:HEADER_BYTES])
    except AuthenticationFailed:
        if limiter is not None:
            limiter.failure(now)
        raise
    if header.version == EXPORT_VERSION_CONTACTS:
        contents, store = split_contents(plaintext)
        parsed = parse_contents(contents)
        store = check_store(store, CorruptContents)
    else:
        parsed, store = parse_contents(plaintext), b""
    if limiter is not None:
        limiter.success(now)
    return Opened(header, key, parsed, store)


# --------------------------------------------------------------------------------------------
# 17.3: the live transfer
# --------------------------------------------------------------------------------------------

TRANSFER_VERSION = 2  # version 1 (identity only) is no longer spoken
TRANSFER_ID_BYTES = 16
OFFER_BYTES = 1 + TRANSFER_ID_BYTES + 32  # 49
OFFER_TEXT_PREFIX = "ITSMETR2:"
MSG_KEY = 1
MSG_IDENTITY = 2
MSG_STORE = 3
MESSAGE_TYPES = (MSG_KEY, MSG_IDENTITY, MSG_STORE)
KEY_MESSAGE_BYTES = 2 + 32
STORE_LENGTH_BYTES = 4  # u32(len(store)), after the contents in the identity message
IDENTITY_PLAINTEXT_MIN = CONTENTS_MIN + STORE_LENGTH_BYTES  # 87
IDENTITY_PLAINTEXT_MAX = CONTENTS_MAX + STORE_LENGTH_BYTES  # 214
IDENTITY_MESSAGE_MIN = 2 + IDENTITY_PLAINTEXT_MIN + GCM_TAG_BYTES  # 105
IDENTITY_MESSAGE_MAX = 2 + IDENTITY_PLAINTEXT_MAX + GCM_TAG_BYTES  # 232
CHUNK_BYTES = 32768
STORE_CHUNKS_MAX = STORE_MAX // CHUNK_BYTES  # 2,048
STORE_MESSAGE_MIN = 2 + 1 + GCM_TAG_BYTES  # 19: a last chunk of 1 byte
STORE_MESSAGE_MAX = 2 + CHUNK_BYTES + GCM_TAG_BYTES  # 32,786
TRANSFER_TH_LABEL = b"itsme-transfer-v2"
TRANSFER_SEED_LABEL = b"itsme-transfer-seed-v2"
TRANSFER_KEY_LABEL = b"itsme-transfer-key-v2"
TRANSFER_ROOM_LABEL = b"itsme-transfer-room-v1"  # the room keeps its label
TRANSFER_NONCE = bytes(12)  # the identity message's: u96(0)
TRANSFER_SECONDS = 10 * 60


def offer(transfer_id: bytes, receiver_public: bytes) -> bytes:
    """u8(2) version | transfer_id (16) | R (32)."""
    if len(transfer_id) != TRANSFER_ID_BYTES or len(receiver_public) != 32:
        raise ValueError("the transfer id is 16 bytes and R 32")
    return u8(TRANSFER_VERSION) + transfer_id + receiver_public


def offer_text(offer_bytes: bytes) -> str:
    return OFFER_TEXT_PREFIX + b64url_encode(offer_bytes)


def parse_offer(data: bytes | str) -> tuple[bytes, bytes]:
    """An offer, or its text as scanned: (transfer_id, R).  17.3: "The sender reads the offer
    text as 17.1 reads an export text (tabs, line feeds, carriage returns and spaces around it
    dropped, nothing else)"; one that is not 'ITSMETR2:' and strict base64url of 49 bytes with
    version 2 is malformed_message (so is an offer of version 1, 'ITSMETR1:', no longer
    spoken)."""
    if isinstance(data, str):
        data = strip_text(data)
        if not data.startswith(OFFER_TEXT_PREFIX):
            raise Malformed("not a transfer offer of version 2")
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
    """u8(2) | u8(1) type | S (32)."""
    if len(sender_public) != 32:
        raise ValueError("S is 32 bytes")
    return u8(TRANSFER_VERSION) + u8(MSG_KEY) + sender_public


def message_type(message: bytes) -> int:
    """The type of a message of 17.3, after its header's checks: at least the two header
    bytes, version 2 (a message of version 1 is of another version), a known type (1 key,
    2 identity, 3 store); otherwise malformed_message."""
    if len(message) < 2:
        raise Malformed("a message of fewer than 2 bytes")
    if message[0] != TRANSFER_VERSION:
        raise Malformed(f"unknown message version {message[0]}")
    if message[1] not in MESSAGE_TYPES:
        raise Malformed(f"unknown message type {message[1]}")
    return message[1]


def _message_body(message: bytes, expected_type: int) -> bytes:
    """The message's body after its header, its type and its length (the lengths one can
    check on arrival: 34 bytes for a key message, 105 to 232 for an identity message, 19 to
    32,786 for a store message, whose exact length :func:`open_store_message` checks)."""
    kind = message_type(message)
    if kind != expected_type:
        raise Malformed(f"message of type {kind} where {expected_type} was expected")
    lo, hi = {MSG_KEY: (KEY_MESSAGE_BYTES, KEY_MESSAGE_BYTES),
              MSG_IDENTITY: (IDENTITY_MESSAGE_MIN, IDENTITY_MESSAGE_MAX),
              MSG_STORE: (STORE_MESSAGE_MIN, STORE_MESSAGE_MAX)}[expected_type]
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


def store_chunks(store: bytes) -> list[bytes]:
    """17.3: the store cut into chunks of 32,768 bytes, the last one holding the rest (1 to
    32,768 bytes): ceil(len(store) / 32768) of them, none for an empty store."""
    return [bytes(store[at:at + CHUNK_BYTES]) for at in range(0, len(store), CHUNK_BYTES)]


def chunk_count(store_length: int) -> int:
    return -(-store_length // CHUNK_BYTES)


def chunk_length(store_length: int, i: int) -> int:
    """The length of chunk i of a store of ``store_length`` bytes (0 <= i < chunk_count)."""
    if not 0 <= i < chunk_count(store_length):
        raise ValueError("no such chunk")
    return min(CHUNK_BYTES, store_length - i * CHUNK_BYTES)


def identity_plaintext(contents: bytes, store_length: int) -> bytes:
    """contents || u32(len(store))."""
    return contents + _be32(store_length)


def identity_message_aad(th: bytes) -> bytes:
    """u8(2) | u8(2) | th, concatenated."""
    return u8(TRANSFER_VERSION) + u8(MSG_IDENTITY) + th


def identity_message(key: bytes, th: bytes, plaintext: bytes) -> bytes:
    """u8(2) | u8(2) | AES-256-GCM(key, 12 zero bytes, contents || u32(len(store)),
    u8(2) | u8(2) | th).  ``plaintext`` is :func:`identity_plaintext`'s."""
    return (u8(TRANSFER_VERSION) + u8(MSG_IDENTITY)
            + AESGCM(key).encrypt(TRANSFER_NONCE, plaintext, identity_message_aad(th)))


@dataclass(frozen=True)
class OpenedIdentity:
    """An identity message opened: the contents and the store's length it announces."""
    contents: Contents
    store_length: int

    @property
    def chunks(self) -> int:
        return chunk_count(self.store_length)


def open_identity_message(message: bytes, key: bytes, th: bytes) -> OpenedIdentity:
    """Its length (105 to 232 bytes) before any decryption, then the tag, then the contents
    (parsed strictly) and len(store) (at most 64 MiB), corrupt otherwise."""
    sealed = _message_body(message, MSG_IDENTITY)
    plaintext = _aes_gcm_open(key, TRANSFER_NONCE, sealed, identity_message_aad(th))
    contents = parse_contents(plaintext[:-STORE_LENGTH_BYTES])
    (store_length,) = struct.unpack(">I", plaintext[-STORE_LENGTH_BYTES:])
    if store_length > STORE_MAX:
        raise CorruptContents(f"a store of {store_length} bytes announced, over 64 MiB")
    return OpenedIdentity(contents, store_length)


def store_message_nonce(i: int) -> bytes:
    """u96(i + 1): the identity message has nonce 0, chunk i nonce i + 1."""
    return _be96(i + 1)


def store_message_aad(th: bytes, i: int) -> bytes:
    """u8(2) | u8(3) | th | u32(i), concatenated."""
    return u8(TRANSFER_VERSION) + u8(MSG_STORE) + th + _be32(i)


def store_message(key: bytes, th: bytes, i: int, chunk: bytes) -> bytes:
    """u8(2) | u8(3) | AES-256-GCM(key, u96(i + 1), chunk_i, u8(2) | u8(3) | th | u32(i))."""
    if not 0 <= i < STORE_CHUNKS_MAX or not 1 <= len(chunk) <= CHUNK_BYTES:
        raise ValueError("a chunk index below 2,048 and a chunk of 1 to 32,768 bytes")
    return (u8(TRANSFER_VERSION) + u8(MSG_STORE)
            + AESGCM(key).encrypt(store_message_nonce(i), chunk, store_message_aad(th, i)))


def store_messages(key: bytes, th: bytes, store: bytes) -> list[bytes]:
    return [store_message(key, th, i, chunk) for i, chunk in enumerate(store_chunks(store))]


def open_store_message(message: bytes, key: bytes, th: bytes, i: int,
                       store_length: int) -> bytes:
    """Store message i of a store of ``store_length`` bytes: of exactly 2 + len(chunk_i) + 16
    bytes (known from len(store), checked before any decryption: malformed_message), then its
    tag under nonce u96(i + 1) and its index in the associated data (a chunk dropped, moved,
    repeated or of another transfer: authentication_failed)."""
    sealed = _message_body(message, MSG_STORE)
    if i >= chunk_count(store_length):
        raise Malformed(f"a store message beyond the {chunk_count(store_length)} announced")
    expected = 2 + chunk_length(store_length, i) + GCM_TAG_BYTES
    if len(message) != expected:
        raise Malformed(f"store message {i} of {len(message)} bytes, not {expected}")
    return _aes_gcm_open(key, store_message_nonce(i), sealed, store_message_aad(th, i))


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
        self.rejected = False

    @property
    def ended(self) -> bool:
        """17.3: "A transfer that has ended (done, rejected or failed)"."""
        return self.failed or self.rejected or self._done()

    def _done(self) -> bool:
        return False

    def _check_time(self, now: int | None) -> None:
        """17.3: "a message received or a confirmation made more than 600 seconds after that
        side's creation, in whole Unix seconds (`now - created > 600`; at 600 it is still on
        time), is `expired`, and the transfer fails"."""
        if self.created_at is not None and now is not None and \
                now - self.created_at > TRANSFER_SECONDS:
            raise TransferExpired("a transfer lasts at most 10 minutes")

    def reject(self) -> None:
        """The person rejects (a SAS mismatch or a cancel): the transfer ends, rejected, and
        nothing is sent; "a rejection is not checked against the time"; an ended transfer
        answers invalid_state."""
        if self.ended:
            raise InvalidState("the transfer has ended")
        self.rejected = True

    def _guard(self, now: int | None, step: Callable[[], object]):
        """Any refusal ends the transfer, except invalid_state, which changes nothing (17.3:
        "A confirmation with no SAS yet, and any message after the transfer is done, are
        refused as invalid_state without changing anything").  "A transfer that has ended
        (done, rejected or failed) answers `invalid_state` instead, at any time": before the
        time is checked."""
        if self.failed or self.rejected:
            raise InvalidState("the transfer has ended")
        if self._done():
            raise InvalidState("the transfer is done")
        try:
            self._check_time(now)
            return step()
        except InvalidState:
            raise
        except ProtocolError:
            self._fail()
            raise

    def _fail(self) -> None:
        self.failed = True


class TransferReceiver(_Timed):
    """The new device: shows the offer, takes the key message (then shows the SAS), and opens
    the identity message and the store messages only after its own confirmation; what arrives
    before it is held unopened, in order (at most the identity message and 2,048 store
    messages).  The transfer is done once the identity message and every store message it
    announced have opened and the store begins with SQLite's header: then ``contents`` and
    ``store`` (empty when none travelled) are set, and not before.  Any refused step but
    invalid_state ends the transfer: every later call raises invalid_state."""

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
        self.held: list[bytes] = []  # before the confirmation: the identity, then the store's
        self.identity_received = False
        self.identity: OpenedIdentity | None = None  # once opened
        self.chunks: list[bytes] = []  # the store's chunks opened so far
        self.contents: Contents | None = None  # once done
        self.store: bytes | None = None  # once done

    @property
    def done(self) -> bool:
        return self.contents is not None

    def _done(self) -> bool:
        return self.done

    def _fail(self) -> None:
        """A failed transfer gives nothing, not even what had opened before the refusal."""
        self.failed = True
        self.contents = self.store = None

    def receive(self, message: bytes, now: int | None = None) -> None:
        self._guard(now, lambda: self._receive(bytes(message)))

    def confirm(self, now: int | None = None) -> Contents | None:
        """The person confirmed the SAS on this device: the identity, if it and the whole
        store arrived (then ``store`` holds the store)."""
        return self._guard(now, self._confirm)

    def _receive(self, message: bytes) -> None:
        if self.done:
            raise InvalidState("the transfer is done")
        if self.keys is None:
            s = parse_key_message(message)  # an identity or store message first is refused
            self.keys = transfer_keys(self.ephemeral_secret, self.public, s, self.transfer_id,
                                      self.public, s)
            return
        kind = message_type(message)
        if kind == MSG_KEY:
            raise Malformed("a second key message")
        if kind == MSG_IDENTITY:
            if self.identity_received:
                raise Malformed("a second identity message")
            _message_body(message, MSG_IDENTITY)  # its length, before any decryption
            self.identity_received = True
            if self.confirmed:
                self._open_identity(message)
            else:
                self.held.append(message)
            return
        if not self.identity_received:
            raise Malformed("a store message before the identity message")
        if self.confirmed:
            self._open_store(message)
            return
        _message_body(message, MSG_STORE)  # within the longest a store message can be
        if len(self.held) - 1 >= STORE_CHUNKS_MAX:
            raise Malformed("more store messages held than can be due")
        self.held.append(message)

    def _confirm(self) -> Contents | None:
        if self.keys is None:
            raise InvalidState("nothing to confirm: no key message yet")
        if self.confirmed:
            raise InvalidState("already confirmed")
        self.confirmed = True
        held, self.held = self.held, []
        if held:
            # Opened in turn, in the order they came: the identity first, which says how many
            # store messages are due, then each chunk.  One held beyond the count is opened
            # "after the transfer completed, and is `malformed_message` (out of order), which
            # ends the transfer as failed" (17.3).
            self._open_identity(held[0])
            for message in held[1:]:
                self._open_store(message)
        return self.contents

    def _open_identity(self, message: bytes) -> None:
        self.identity = open_identity_message(message, self.keys.key,
                                              self.keys.transcript_hash)
        self._finish_if_complete()

    def _open_store(self, message: bytes) -> None:
        if self.contents is not None:
            raise Malformed(f"a store message beyond the {self.identity.chunks} announced")
        self.chunks.append(open_store_message(message, self.keys.key,
                                              self.keys.transcript_hash, len(self.chunks),
                                              self.identity.store_length))
        self._finish_if_complete()

    def _finish_if_complete(self) -> None:
        if len(self.chunks) < self.identity.chunks:
            return
        store = b"".join(self.chunks)
        assert len(store) == self.identity.store_length
        if store:
            check_store(store, CorruptContents)
        self.store = store
        self.contents = self.identity.contents


class TransferSender(_Timed):
    """The old device: scans the offer, sends the key message, shows the SAS, and seals the
    identity message and the store messages only when the person confirms.  ``store`` is the
    contact store (empty: none travels); one the sender refuses (over 64 MiB, not a SQLite
    file) is invalid_argument."""

    def __init__(self, scanned_offer: bytes | str, ephemeral_secret: bytes,
                 identity_seed: bytes, contacts_key: bytes, name: bytes,
                 created_at: int | None = None, store: bytes = b""):
        super().__init__(created_at)
        self.transfer_id, self.receiver_public = parse_offer(scanned_offer)
        self.ephemeral_secret = ephemeral_secret
        self.public = x25519_public(ephemeral_secret)
        self.contents = build_contents(identity_seed, contacts_key, name)  # the bytes sealed
        self.store = check_store(store, InvalidInput) if store else b""
        self.identity_plaintext = identity_plaintext(self.contents, len(self.store))
        self.keys = transfer_keys(ephemeral_secret, self.public, self.receiver_public,
                                  self.transfer_id, self.receiver_public, self.public)
        self.key_message = key_message(self.public)
        self.sent_identity = False

    def _done(self) -> bool:
        return self.sent_identity

    def confirm(self, now: int | None = None) -> list[bytes]:
        """The person confirmed the SAS on this device: the identity message, then the store
        messages, in order."""
        def step() -> list[bytes]:
            self.sent_identity = True
            th = self.keys.transcript_hash
            return ([identity_message(self.keys.key, th, self.identity_plaintext)]
                    + store_messages(self.keys.key, th, self.store))
        return self._guard(now, step)

    def cancel(self) -> None:
        """A SAS mismatch or a cancel: nothing is sent, and the transfer ends."""
        self.failed = True
