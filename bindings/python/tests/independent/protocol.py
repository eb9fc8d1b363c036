"""A second implementation of docs/PROTOCOL.md, built from that document only.

It exists to check the document: the JSON vectors under Tests/ProtocolVectors are replayed through
this module (tests/test_protocol_independent.py), so any value the document does not determine
shows up as a mismatch.  Section numbers below refer to PROTOCOL.md.

Only the Python standard library and the ``cryptography`` package (X25519, Ed25519,
ChaCha20-Poly1305) are used; HKDF is written out from RFC 5869.  Every parser raises
:class:`ProtocolError` on the first failed check.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import struct
import unicodedata
from dataclasses import dataclass
from typing import Callable, Iterable

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.asymmetric.x25519 import (
    X25519PrivateKey,
    X25519PublicKey,
)
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


class ProtocolError(ValueError):
    """An input the protocol says to reject."""


class NotAnExchangePayload(ProtocolError):
    """Section 5.2: a scanned text starting with neither ``ITSME1:`` nor ``5|``."""


# --------------------------------------------------------------------------------------------
# Section 1: encodings
# --------------------------------------------------------------------------------------------

def u8(n: int) -> bytes:
    """One byte."""
    if not 0 <= n <= 0xFF:
        raise ValueError("u8 out of range")
    return bytes([n])


def u64(n: int) -> bytes:
    """8 bytes, big-endian, unsigned."""
    return struct.pack(">Q", n)


def leb128(n: int) -> bytes:
    """Unsigned LEB128: 7 bits per byte, least significant group first, high bit on all but last."""
    if n < 0:
        raise ValueError("LEB128 of a negative number")
    out = bytearray()
    while True:
        group = n & 0x7F
        n >>= 7
        if n:
            out.append(group | 0x80)
        else:
            out.append(group)
            return bytes(out)


def _as_bytes(part: bytes | str) -> bytes:
    # Labels and role texts are ASCII strings used as bytes with no terminator (section 1).
    return part.encode("ascii") if isinstance(part, str) else bytes(part)


def lv_cat(*parts: bytes | str) -> bytes:
    """CPace lv_cat: each part prefixed with its LEB128 length, then concatenated."""
    out = bytearray()
    for part in parts:
        b = _as_bytes(part)
        out += leb128(len(b)) + b
    return bytes(out)


_B64URL_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_B64STD_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _b64_decode_unpadded(text: str, alphabet: str) -> bytes:
    """Decode base64 digits (no padding) strictly: alphabet only, length not 1 mod 4,
    zero unused bits in the last character."""
    index = {c: i for i, c in enumerate(alphabet)}
    if len(text) % 4 == 1:
        raise ProtocolError("base64 length is 1 modulo 4")
    acc = 0
    nbits = 0
    out = bytearray()
    for c in text:
        v = index.get(c)
        if v is None:
            raise ProtocolError(f"character {c!r} outside the base64 alphabet")
        acc = (acc << 6) | v
        nbits += 6
        if nbits >= 8:
            nbits -= 8
            out.append((acc >> nbits) & 0xFF)
            acc &= (1 << nbits) - 1
    if acc != 0:  # the nbits (2 or 4) leftover bits of the last character
        raise ProtocolError("non-zero unused bits in the last base64 character")
    return bytes(out)


def b64url_encode(data: bytes) -> str:
    """Base64url (RFC 4648 section 5) without padding."""
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def b64url_decode(text: str) -> bytes:
    """Strict unpadded base64url: exactly one accepted text per byte string."""
    if not isinstance(text, str):
        raise ProtocolError("base64url text must be a str")
    data = _b64_decode_unpadded(text, _B64URL_ALPHABET)
    if b64url_encode(data) != text:  # canonical form, by construction; checked anyway
        raise ProtocolError("non-canonical base64url")
    return data


def b64_encode(data: bytes) -> str:
    """Base64 (RFC 4648 section 4), padded with '='."""
    return base64.b64encode(data).decode("ascii")


def b64_decode(text: str) -> bytes:
    """Strict padded base64: padding required, no whitespace, zero unused bits."""
    if not isinstance(text, str):
        raise ProtocolError("base64 text must be a str")
    if len(text) % 4 != 0:
        raise ProtocolError("padded base64 length is not a multiple of 4")
    digits = text.rstrip("=")
    pad = len(text) - len(digits)
    if pad > 2:
        raise ProtocolError("too much base64 padding")
    # With a multiple-of-4 total and at most two '=', the digits are 0, 2 or 3 mod 4, and the
    # padding is exactly what their length needs; '=' elsewhere fails the alphabet check.
    data = _b64_decode_unpadded(digits, _B64STD_ALPHABET)
    if b64_encode(data) != text:
        raise ProtocolError("non-canonical base64")
    return data


_HEX_UPPER = re.compile(r"[0-9A-F]*", re.ASCII)


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def hkdf_extract(salt: bytes, ikm: bytes) -> bytes:
    """RFC 5869 HKDF-Extract with SHA-256; an empty salt is 32 zero bytes."""
    if not salt:
        salt = bytes(32)
    return hmac.new(salt, ikm, hashlib.sha256).digest()


def hkdf_expand(prk: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 HKDF-Expand with SHA-256."""
    if not 0 <= length <= 255 * 32:
        raise ValueError("HKDF output too long")
    okm = bytearray()
    block = b""
    counter = 1
    while len(okm) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        okm += block
        counter += 1
    return bytes(okm[:length])


def hkdf(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """HKDF(ikm, salt, info, L): extract then expand (section 1)."""
    return hkdf_expand(hkdf_extract(salt, ikm), info, length)


def x25519_public(secret: bytes) -> bytes:
    return X25519PrivateKey.from_private_bytes(secret).public_key().public_bytes(
        Encoding.Raw, PublicFormat.Raw
    )


def x25519_shared(my_secret: bytes, their_public: bytes) -> bytes:
    """X25519 (RFC 7748); an all-zero result (a low-order peer key) is rejected (section 1)."""
    if len(my_secret) != 32 or len(their_public) != 32:
        raise ProtocolError("X25519 keys are 32 bytes")
    try:
        shared = X25519PrivateKey.from_private_bytes(my_secret).exchange(
            X25519PublicKey.from_public_bytes(their_public)
        )
    except ValueError as exc:  # the backend refuses an all-zero output itself
        raise ProtocolError("X25519 shared secret is all zero") from exc
    if not any(shared):
        raise ProtocolError("X25519 shared secret is all zero")
    return shared


def ed25519_public(seed: bytes) -> bytes:
    """The public key of an RFC 8032 32-byte private key."""
    return Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes(
        Encoding.Raw, PublicFormat.Raw
    )


def ed25519_sign(seed: bytes, message: bytes) -> bytes:
    return Ed25519PrivateKey.from_private_bytes(seed).sign(message)


def ed25519_verify(public: bytes, signature: bytes, message: bytes) -> bool:
    if len(public) != 32 or len(signature) != 64:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def validate_name(name: bytes) -> str:
    """Names: 1 to 128 bytes of UTF-8 with no character of general category Cc (section 1)."""
    if not 1 <= len(name) <= 128:
        raise ProtocolError("name length is not 1 to 128 bytes")
    try:
        text = name.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise ProtocolError("name is not valid UTF-8") from exc
    if any(unicodedata.category(c) == "Cc" for c in text):
        raise ProtocolError("name contains a control character")
    return text


NATO_WORDS = (
    "ALFA", "BRAVO", "CHARLIE", "DELTA", "ECHO", "FOXTROT", "GOLF", "HOTEL", "INDIA", "JULIET",
    "KILO", "LIMA", "MIKE", "NOVEMBER", "OSCAR", "PAPA", "QUEBEC", "ROMEO", "SIERRA", "TANGO",
    "UNIFORM", "VICTOR", "WHISKEY", "XRAY", "YANKEE", "ZULU",
)


def nato_index(word: str) -> int:
    """The index of a NATO word, matched case-insensitively (ASCII only)."""
    if not word.isascii():
        raise ProtocolError("NATO word is not ASCII")
    try:
        return NATO_WORDS.index(word.upper())
    except ValueError as exc:
        raise ProtocolError(f"unknown NATO word {word!r}") from exc


# --------------------------------------------------------------------------------------------
# Section 2: identity and fingerprint
# --------------------------------------------------------------------------------------------

def fingerprint_bytes(identity_pk: bytes) -> bytes:
    """The first 8 bytes of SHA-256(pk)."""
    return sha256(identity_pk)[:8]


def fingerprint(identity_pk: bytes) -> str:
    """Uppercase hex of the first 8 bytes of SHA-256(pk): 16 characters."""
    return fingerprint_bytes(identity_pk).hex().upper()


# --------------------------------------------------------------------------------------------
# Section 3: verification seed
# --------------------------------------------------------------------------------------------

SEED_LABEL = b"itsme-verification-seed-v1"


def seed_salt(fp_a: str, fp_b: str) -> bytes:
    """ASCII(fp_low || fp_high): the two 16-character fingerprints in ascending order."""
    for fp in (fp_a, fp_b):
        if len(fp) != 16 or not _HEX_UPPER.fullmatch(fp):
            raise ProtocolError("fingerprint is not 16 uppercase hex digits")
    low, high = sorted((fp_a, fp_b))
    return (low + high).encode("ascii")


def derive_seed(my_ephemeral_secret: bytes, their_ephemeral_public: bytes,
                fp_a: str, fp_b: str) -> bytes:
    shared = x25519_shared(my_ephemeral_secret, their_ephemeral_public)
    return hkdf(shared, seed_salt(fp_a, fp_b), SEED_LABEL, 32)


# --------------------------------------------------------------------------------------------
# Section 4: short codes
# --------------------------------------------------------------------------------------------

SHORT_CODE_VALUES = 26 * 10_000  # 260000


def format_short_code(value: int) -> str:
    """Word in capitals, one space, the number as exactly four digits: 40042 -> 'ECHO 0042'."""
    if not 0 <= value < SHORT_CODE_VALUES:
        raise ValueError("short code value out of range")
    return f"{NATO_WORDS[value // 10_000]} {value % 10_000:04d}"


_SHORT_CODE = re.compile(r"([A-Za-z]+)[ \-]([0-9]{4})", re.ASCII)


def parse_short_code(text: str) -> int:
    """Leading/trailing spaces ignored; word case-insensitive; separator one space or one '-';
    exactly four ASCII digits; anything else rejected (section 4)."""
    m = _SHORT_CODE.fullmatch(text.strip(" "))
    if m is None:
        raise ProtocolError(f"not a short code: {text!r}")
    return nato_index(m.group(1)) * 10_000 + int(m.group(2))


# 4.1 SAS

SAS_LABEL = b"itsme-sas-v1"


def sas_info(th: bytes) -> bytes:
    return lv_cat(SAS_LABEL, th)


def sas_okm(seed: bytes, th: bytes) -> bytes:
    return hkdf(seed, b"", sas_info(th), 8)


def sas_value(seed: bytes, th: bytes) -> int:
    return int.from_bytes(sas_okm(seed, th), "big") % SHORT_CODE_VALUES


def sas_text(seed: bytes, th: bytes) -> str:
    return format_short_code(sas_value(seed, th))


# 4.2 Bluetooth session code

SESSION_CODE_LIMIT = 4_294_940_000  # the largest multiple of 260000 not above 2^32


def draw_session_code(random4: Callable[[], bytes] | Iterable[bytes]) -> int:
    """Draw 4 bytes as a big-endian r until r < 4294940000; return r mod 260000."""
    if not callable(random4):
        it = iter(random4)
        random4 = lambda: next(it)  # noqa: E731
    while True:
        chunk = random4()
        if len(chunk) != 4:
            raise ValueError("session codes are drawn 4 bytes at a time")
        r = int.from_bytes(chunk, "big")
        if r < SESSION_CODE_LIMIT:
            return r % SHORT_CODE_VALUES


# --------------------------------------------------------------------------------------------
# Section 5: QR exchange
# --------------------------------------------------------------------------------------------

QR_PREFIX = "ITSME1:"
QR_VERSION = 1
QR_SIGN_LABEL = b"itsme-qr-payload-v1"
QR_TRANSCRIPT_LABEL = b"itsme-qr-transcript-v1"
QR_FIXED = 1 + 32 + 8 + 32 + 16 + 1 + 64  # 154: everything but the name
_QR_NAME_LEN_AT = 1 + 32 + 8 + 32 + 16  # 89


def qr_body(identity_pk: bytes, ephemeral_pk: bytes, device_secret: bytes, name: bytes) -> bytes:
    """5.1 body: version, identity key, raw fingerprint, ephemeral key, device secret, name."""
    validate_name(name)
    if len(identity_pk) != 32 or len(ephemeral_pk) != 32 or len(device_secret) != 16:
        raise ValueError("wrong key or device-secret length")
    return (u8(QR_VERSION) + identity_pk + fingerprint_bytes(identity_pk) + ephemeral_pk
            + device_secret + u8(len(name)) + name)


def qr_signed_message(body: bytes) -> bytes:
    return lv_cat(QR_SIGN_LABEL, body)


@dataclass(frozen=True)
class QrBuilt:
    body: bytes
    signed_message: bytes
    signature: bytes
    payload: bytes
    text: str


def build_qr(identity_seed: bytes, ephemeral_secret: bytes, device_secret: bytes,
             name: bytes) -> QrBuilt:
    """5.1: payload = body || Ed25519 signature; text = 'ITSME1:' || base64url(payload)."""
    body = qr_body(ed25519_public(identity_seed), x25519_public(ephemeral_secret),
                   device_secret, name)
    message = qr_signed_message(body)
    signature = ed25519_sign(identity_seed, message)
    payload = body + signature
    return QrBuilt(body, message, signature, payload, QR_PREFIX + b64url_encode(payload))


@dataclass(frozen=True)
class QrPeer:
    payload: bytes
    identity_pk: bytes
    fingerprint_text: str
    ephemeral_pk: bytes
    device_secret: bytes
    name: bytes
    signature: bytes
    shared: bytes


def parse_qr_payload(payload: bytes, own_identity_pk: bytes,
                     own_ephemeral_secret: bytes) -> QrPeer:
    """5.2 checks 2 to 7 on a decoded payload, in order."""
    # 2. lengths and version
    if len(payload) < QR_FIXED + 1:
        raise ProtocolError("QR payload shorter than 155 bytes")
    if payload[0] != QR_VERSION:
        raise ProtocolError("QR payload version is not 1")
    name_len = payload[_QR_NAME_LEN_AT]
    if len(payload) != QR_FIXED + name_len:
        raise ProtocolError("QR payload length does not match its name length")
    if not 1 <= name_len <= 128:
        raise ProtocolError("QR name length is not 1 to 128")
    identity_pk = payload[1:33]
    fp_field = payload[33:41]
    ephemeral_pk = payload[41:73]
    device_secret = payload[73:89]
    name = payload[90:90 + name_len]
    body = payload[:90 + name_len]
    signature = payload[90 + name_len:]
    # 3. name
    validate_name(name)
    # 4. fingerprint field
    if fp_field != fingerprint_bytes(identity_pk):
        raise ProtocolError("QR fingerprint does not match the identity key")
    # 5. not our own key
    if identity_pk == own_identity_pk:
        raise ProtocolError("QR payload carries the receiver's own identity key")
    # 6. signature
    if not ed25519_verify(identity_pk, signature, qr_signed_message(body)):
        raise ProtocolError("QR signature does not verify")
    # 7. non-zero shared secret
    shared = x25519_shared(own_ephemeral_secret, ephemeral_pk)
    return QrPeer(payload, identity_pk, fingerprint(identity_pk), ephemeral_pk, device_secret,
                  name, signature, shared)


def parse_qr_text(text: str, own_identity_pk: bytes, own_ephemeral_secret: bytes) -> QrPeer:
    """5.2, all checks: prefix (case-sensitive), strict base64url, then the payload checks."""
    if not text.startswith(QR_PREFIX):
        if text.startswith("5|"):
            raise ProtocolError("a source-format (v5) text, not an ITSME1 payload")
        raise NotAnExchangePayload("not an exchange payload")
    payload = b64url_decode(text[len(QR_PREFIX):])
    return parse_qr_payload(payload, own_identity_pk, own_ephemeral_secret)


def qr_transcript_input(payload_a: bytes, payload_b: bytes) -> bytes:
    """5.3: lv_cat(label, payload_low, payload_high), ordered by the 32-byte identity keys."""
    key_a, key_b = payload_a[1:33], payload_b[1:33]
    if key_a == key_b:
        raise ProtocolError("both payloads carry the same identity key")
    low, high = (payload_a, payload_b) if key_a < key_b else (payload_b, payload_a)
    return lv_cat(QR_TRANSCRIPT_LABEL, low, high)


def qr_transcript_hash(payload_a: bytes, payload_b: bytes) -> bytes:
    return sha256(qr_transcript_input(payload_a, payload_b))


@dataclass(frozen=True)
class QrResult:
    shared: bytes
    salt: bytes
    seed: bytes
    transcript_input: bytes
    transcript_hash: bytes
    sas_value: int
    sas_text: str


def qr_finish(own_payload: bytes, own_ephemeral_secret: bytes, peer: QrPeer) -> QrResult:
    """5.3: seed (section 3) and SAS (section 4.1) of one side of a QR exchange."""
    own_fp = fingerprint(own_payload[1:33])
    shared = x25519_shared(own_ephemeral_secret, peer.ephemeral_pk)
    salt = seed_salt(own_fp, peer.fingerprint_text)
    seed = hkdf(shared, salt, SEED_LABEL, 32)
    t_in = qr_transcript_input(own_payload, peer.payload)
    th = sha256(t_in)
    value = sas_value(seed, th)
    return QrResult(shared, salt, seed, t_in, th, value, format_short_code(value))


# --------------------------------------------------------------------------------------------
# Section 6: source-format (v5) import
# --------------------------------------------------------------------------------------------

_HEX16 = re.compile(r"[0-9A-Fa-f]{16}", re.ASCII)
_DIGITS6 = re.compile(r"[0-9]{6}", re.ASCII)


def _split_v5(text: str) -> list[str]:
    """Split on '|' not escaped.  Read left to right, a '\\' escapes the next character (so
    '\\\\|' is an escaped backslash followed by a separator); escapes are kept for later."""
    fields: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 >= len(text):
                raise ProtocolError("dangling '\\' at the end of a v5 text")
            current.append(text[i:i + 2])
            i += 2
        elif c == "|":
            fields.append("".join(current))
            current = []
            i += 1
        else:
            current.append(c)
            i += 1
    fields.append("".join(current))
    return fields


def _unescape_v5_name(field: str) -> str:
    """'\\|' -> '|', '\\\\' -> '\\'; any other '\\' sequence is rejected."""
    out: list[str] = []
    i = 0
    while i < len(field):
        c = field[i]
        if c == "\\":
            nxt = field[i + 1] if i + 1 < len(field) else ""
            if nxt not in ("|", "\\"):
                raise ProtocolError("invalid escape in a v5 name")
            out.append(nxt)
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


@dataclass(frozen=True)
class V5Peer:
    name: bytes
    fingerprint_text: str
    ephemeral_pk: bytes
    device_secret: bytes  # the 6 ASCII digits


def parse_v5(text: str, own_fingerprint: str | None = None) -> V5Peer:
    """Section 6: '5|name|fingerprint|ephemeralKey|deviceSecret'."""
    fields = _split_v5(text)
    if len(fields) != 5:
        raise ProtocolError("a v5 text has exactly five fields")
    version, name_field, fp_field, key_field, secret_field = fields
    if version != "5":
        raise ProtocolError("the first v5 field is not '5'")
    try:
        name = _unescape_v5_name(name_field).encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates in a str
        raise ProtocolError("v5 name is not encodable as UTF-8") from exc
    validate_name(name)
    if not _HEX16.fullmatch(fp_field):
        raise ProtocolError("v5 fingerprint is not 16 hex digits")
    fp = fp_field.upper()
    if own_fingerprint is not None and fp == own_fingerprint.upper():
        raise ProtocolError("v5 fingerprint is the receiver's own")
    ephemeral_pk = b64_decode(key_field)
    if len(ephemeral_pk) != 32:
        raise ProtocolError("v5 ephemeral key is not 32 bytes")
    if not _DIGITS6.fullmatch(secret_field):
        raise ProtocolError("v5 device secret is not 6 ASCII digits")
    return V5Peer(name, fp, ephemeral_pk, secret_field.encode("ascii"))


@dataclass(frozen=True)
class V5Import:
    peer: V5Peer
    shared: bytes
    salt: bytes
    seed: bytes


def import_v5(text: str, own_identity_pk: bytes, own_ephemeral_secret: bytes) -> V5Import:
    """Section 6 parse plus the seed of section 3 (no SAS exists for a v5 peer)."""
    own_fp = fingerprint(own_identity_pk)
    peer = parse_v5(text, own_fp)
    shared = x25519_shared(own_ephemeral_secret, peer.ephemeral_pk)
    salt = seed_salt(own_fp, peer.fingerprint_text)
    return V5Import(peer, shared, salt, hkdf(shared, salt, SEED_LABEL, 32))


# --------------------------------------------------------------------------------------------
# Section 7: Bluetooth exchange
# --------------------------------------------------------------------------------------------

FRAME_VERSION = 1
HELLO, KEY, DATA, CONFIRM = 1, 2, 3, 4
INITIATOR, RESPONDER = "initiator", "responder"
COMMIT_LABEL = b"itsme-sas-commit-v1"
BT_TH1_LABEL = b"itsme-bluetooth-v1"
BT_KEY_LABEL = b"itsme-bluetooth-key-v1"
BT_SIGN_LABEL = b"itsme-bluetooth-payload-v1"
BT_TRANSCRIPT_LABEL = b"itsme-bluetooth-transcript-v1"
DATA_COUNTER, CONFIRM_COUNTER = 0, 1
TAG_BYTES = 16
BT_DATA_FIXED = 32 + 16 + 1 + 64  # 113: plaintext bytes besides the name
_BT_NAME_LEN_AT = 32 + 16  # 48


def _frame_body_ok(frame_type: int, n: int) -> bool:
    """7.1 body lengths by type."""
    if frame_type == HELLO:
        return n == 8 + 32
    if frame_type == KEY:
        return n == 32
    if frame_type == DATA:
        return BT_DATA_FIXED + 1 + TAG_BYTES <= n <= BT_DATA_FIXED + 128 + TAG_BYTES
    if frame_type == CONFIRM:
        return n == 1 + TAG_BYTES
    return False


def frame(frame_type: int, body: bytes) -> bytes:
    """frame = u8(1) || u8(type) || body."""
    if not _frame_body_ok(frame_type, len(body)):
        raise ValueError("frame body of the wrong length")
    return u8(FRAME_VERSION) + u8(frame_type) + body


def parse_frame(data: bytes, expected_type: int) -> bytes:
    """Check version, type and length of a received frame; return its body."""
    if len(data) < 2 or data[0] != FRAME_VERSION:
        raise ProtocolError("frame of another version")
    if data[1] != expected_type:
        raise ProtocolError("frame of an unexpected type")
    if not _frame_body_ok(data[1], len(data) - 2):
        raise ProtocolError("frame of the wrong length")
    return data[2:]


def bt_rest(name: bytes, device_secret: bytes) -> bytes:
    return lv_cat(name, device_secret)


def bt_commitment(identity_pk: bytes, ephemeral_pk: bytes, name: bytes,
                  device_secret: bytes) -> bytes:
    """7.3: SHA-256(lv_cat(label, u8(1), identity_pk, ephemeral_pk, SHA-256(rest)))."""
    return sha256(lv_cat(COMMIT_LABEL, u8(1), identity_pk, ephemeral_pk,
                         sha256(bt_rest(name, device_secret))))


def hello_frame(identity_pk: bytes, commitment: bytes) -> bytes:
    return frame(HELLO, fingerprint_bytes(identity_pk) + commitment)


def key_frame(ephemeral_pk: bytes) -> bytes:
    return frame(KEY, ephemeral_pk)


def bt_role(own_identity_pk: bytes, peer_fingerprint8: bytes) -> str:
    """7.2: the device with the lower fingerprint is the initiator."""
    own = fingerprint_bytes(own_identity_pk)
    if own == peer_fingerprint8:
        raise ProtocolError("peer fingerprint equals our own")
    return INITIATOR if own < peer_fingerprint8 else RESPONDER


def bt_th1_input(session_code_text: str, hello_i: bytes, hello_r: bytes,
                 key_i: bytes, key_r: bytes) -> bytes:
    """7.3: the lv_cat input of th1; hello_X and key_X are whole HELLO and KEY frames."""
    return lv_cat(BT_TH1_LABEL, session_code_text.encode("ascii"), hello_i, hello_r, key_i, key_r)


def bt_th1(session_code_text: str, hello_i: bytes, hello_r: bytes,
           key_i: bytes, key_r: bytes) -> bytes:
    return sha256(bt_th1_input(session_code_text, hello_i, hello_r, key_i, key_r))


def bt_session_keys(shared: bytes, th1: bytes) -> tuple[bytes, bytes]:
    """7.3: (initiator key, responder key) from HKDF-Extract(salt=th1, ikm=shared)."""
    prk = hkdf_extract(th1, shared)
    return (hkdf_expand(prk, lv_cat(BT_KEY_LABEL, INITIATOR), 32),
            hkdf_expand(prk, lv_cat(BT_KEY_LABEL, RESPONDER), 32))


def bt_nonce(counter: int) -> bytes:
    """7.3: 00 00 00 00 || u64(counter)."""
    return bytes(4) + u64(counter)


def seal_frame(frame_type: int, key: bytes, counter: int, plaintext: bytes) -> bytes:
    """An encrypted frame: ChaCha20-Poly1305 (RFC 8439), AAD = the two header bytes."""
    header = u8(FRAME_VERSION) + u8(frame_type)
    body = ChaCha20Poly1305(key).encrypt(bt_nonce(counter), plaintext, header)
    return frame(frame_type, body)


def open_frame(data: bytes, frame_type: int, key: bytes, counter: int) -> bytes:
    body = parse_frame(data, frame_type)
    try:
        return ChaCha20Poly1305(key).decrypt(bt_nonce(counter), body, data[:2])
    except InvalidTag as exc:
        raise ProtocolError("frame does not decrypt") from exc


def bt_data(identity_pk: bytes, device_secret: bytes, name: bytes) -> bytes:
    """7.4: identity_pk || device_secret || u8(len(name)) || name."""
    validate_name(name)
    if len(identity_pk) != 32 or len(device_secret) != 16:
        raise ValueError("wrong key or device-secret length")
    return identity_pk + device_secret + u8(len(name)) + name


def bt_signed_message(th1: bytes, role: str, data: bytes) -> bytes:
    return lv_cat(BT_SIGN_LABEL, th1, role, data)


def bt_plaintext(identity_seed: bytes, th1: bytes, role: str, device_secret: bytes,
                 name: bytes) -> bytes:
    """7.4: data || Ed25519-Sign(identity_sk, lv_cat(label, th1, role, data))."""
    data = bt_data(ed25519_public(identity_seed), device_secret, name)
    return data + ed25519_sign(identity_seed, bt_signed_message(th1, role, data))


def data_frame(key: bytes, plaintext: bytes) -> bytes:
    return seal_frame(DATA, key, DATA_COUNTER, plaintext)


def confirm_frame(key: bytes, confirmed: bool) -> bytes:
    return seal_frame(CONFIRM, key, CONFIRM_COUNTER, u8(1 if confirmed else 0))


def open_confirm(data: bytes, key: bytes) -> bool:
    value = open_frame(data, CONFIRM, key, CONFIRM_COUNTER)
    if value not in (b"\x00", b"\x01"):
        raise ProtocolError("CONFIRM byte is neither 0 nor 1")
    return value == b"\x01"


@dataclass(frozen=True)
class BtPeerData:
    identity_pk: bytes
    device_secret: bytes
    name: bytes
    signature: bytes


def parse_bt_plaintext(plaintext: bytes, th1: bytes, peer_role: str, peer_hello: bytes,
                       peer_key: bytes, own_identity_pk: bytes) -> BtPeerData:
    """7.4 receiver checks, in the listed order."""
    hello_body = parse_frame(peer_hello, HELLO)
    peer_fp, peer_commitment = hello_body[:8], hello_body[8:]
    peer_ephemeral = parse_frame(peer_key, KEY)
    # length
    if len(plaintext) < BT_DATA_FIXED + 1:
        raise ProtocolError("contact data too short")
    name_len = plaintext[_BT_NAME_LEN_AT]
    if not 1 <= name_len <= 128 or len(plaintext) != BT_DATA_FIXED + name_len:
        raise ProtocolError("contact data of the wrong length")
    identity_pk = plaintext[:32]
    device_secret = plaintext[32:48]
    name = plaintext[49:49 + name_len]
    data = plaintext[:49 + name_len]
    signature = plaintext[49 + name_len:]
    # name
    validate_name(name)
    # fingerprint against the peer's HELLO
    if fingerprint_bytes(identity_pk) != peer_fp:
        raise ProtocolError("identity key does not match the HELLO fingerprint")
    # not our own key
    if identity_pk == own_identity_pk:
        raise ProtocolError("contact data carries the receiver's own identity key")
    # commitment, constant-time
    recomputed = bt_commitment(identity_pk, peer_ephemeral, name, device_secret)
    if not hmac.compare_digest(recomputed, peer_commitment):
        raise ProtocolError("commitment does not match")
    # signature
    if not ed25519_verify(identity_pk, signature, bt_signed_message(th1, peer_role, data)):
        raise ProtocolError("contact data signature does not verify")
    return BtPeerData(identity_pk, device_secret, name, signature)


def bt_transcript_hash(th1: bytes, plaintext_i: bytes, plaintext_r: bytes) -> bytes:
    """7.4: SHA-256(lv_cat(label, th1, plaintext_I, plaintext_R))."""
    return sha256(lv_cat(BT_TRANSCRIPT_LABEL, th1, plaintext_i, plaintext_r))
