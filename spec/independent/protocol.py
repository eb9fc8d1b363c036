"""A second implementation of docs/PROTOCOL.md, built from that document only.

It exists to check the document: the JSON vectors under Tests/ProtocolVectors are replayed through
this module (tests/test_protocol_independent.py), so any value the document does not determine
shows up as a mismatch.  Section numbers below refer to PROTOCOL.md.

Section 10.3 (Security PIN Update) includes the commit-order state model: ``ContactSecrets`` is
what one side keeps per contact (current secrets, a pending pair, a committed flag, the peer's
previous new secret), used by the update itself and by the tag checks of voice sessions (10.1)
and Online Verify (11.3).

Sections 9.7 and 11.4 (the call binding) take a call binding ``cb`` of 16 to 64 bytes
(``check_call_binding``; None: not bound): a bound voice session's session ID and code key
append the items u8(1) and cb (``session_id_input``, ``code_info``, ``voice_view(...,
binding)``); a bound Online Verify session appends ``bind`` to its KEY (98 bytes) and, once the
peer's PROOF is checked, ends in compare_sas, binding_differs or other_call
(``OnlineVerifySession(..., binding=...)``, ``ov_binding_state``).  The formulas, lengths,
states and checks are the document's own words, quoted at each place (a KEY of either length
is taken whatever this side's own binding: "A receiver checks a KEY as 11.2 says, whatever its
length").  A session not ended (its messages running, or its SAS compared) may be rejected at
any time, which ends it, and confirmed only while its SAS is compared; it expires more than
600 seconds after its creation (a message or a confirmation later is ``expired`` and ends it as
failed, checked first, before the state is looked at: a confirmation past 600 seconds fails
a session whose messages still run too).  Within the 600 seconds, confirming before the peer's
PROOF is in is ``invalid_state`` and changes nothing.  An ended session (confirmed, rejected,
failed, or in one of those end states) refuses a later message, confirmation or rejection with
``invalid_state`` at any time (11.3).

Section 16 (the exchange at a distance) runs CPace (CPACE-RISTR255-SHA512) from
:mod:`independent.cpace`, written from the CFRG draft, on the ristretto255 group of
:mod:`independent.ristretto255`, written from RFC 9496.

Section 17 (device transfer: the password export and the live transfer) is in
:mod:`independent.transfer`, on top of this module.

Only the Python standard library and the ``cryptography`` package (X25519, Ed25519,
ChaCha20-Poly1305, AES-256-GCM) are used; HKDF and base 32 are written out from RFC 5869 and
RFC 4648, ristretto255 from RFC 9496.
Every parser raises :class:`ProtocolError` on the first failed check; a typed code of the wrong
form (a heard code, a degradation code) raises its subclass :class:`TypingError`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import struct
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
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from . import cpace, ristretto255


class ProtocolError(ValueError):
    """An input the protocol says to reject."""


# Section 1.1's result codes, for the parts of this module that report them (the QR exchange,
# 5.2; the Bluetooth exchange, 7.1 to 7.4; Online Verify, 11.2 and 11.3; the exchange at a distance, 16.3's "Checks
# and result codes"; typed codes, 16.1).  Each is a ProtocolError,
# and ``result_code`` gives its name as the vectors spell it.

class MalformedMessage(ProtocolError):
    """``malformed_message``: a wrong size, encoding or layout, another version or type, out of
    order, or received twice."""
    code = "malformed_message"


class AuthenticationFailed(ProtocolError):
    """``authentication_failed``: a MAC, AEAD tag, commitment, confirmation or proof fails."""
    code = "authentication_failed"


class InvalidKey(ProtocolError):
    """``invalid_key``: an X25519 key giving an all-zero shared secret, or a reflection."""
    code = "invalid_key"


class InvalidState(ProtocolError):
    """``invalid_state``: a call or message that does not fit the state (after completion,
    after a failure); it changes nothing."""
    code = "invalid_state"


class InvalidArgument(ProtocolError):
    """``invalid_argument``: a value a host gave or a person typed breaks its rule (a typing
    error); it changes nothing, and the person may type again."""
    code = "invalid_argument"


class TypingError(InvalidArgument):
    """A typed text of the wrong form (section 1, "Typed input": "a typing error,
    `invalid_argument`: it changes nothing and is never counted against an attempt limit"): a
    short code (4), a heard code or tag (9.6), which "does not end the session", or a
    degradation code (section 10.2), which "is rejected without counting"."""


class NotFound(ProtocolError):
    """Section 1.1: ``not_found``, "what the request names is not held: a contact [...]"."""
    code = "not_found"


class Expired(ProtocolError):
    """``expired``: past the lifetime its section gives."""
    code = "expired"


class NotAWholePayload(InvalidArgument):
    """Section 5.2, "What a refusal ends": a scanned text that is not a whole payload, the
    ``invalid_argument`` of steps 1 to 3.  "It changes nothing, and the person reads the code
    again": the exchange still awaits a payload.  Its two kinds, which 5.2 says an
    implementation SHOULD tell apart, are the subclasses below."""


class NotAnExchangePayload(NotAWholePayload):
    """5.2 step 1: a text starting with neither ``ITSME1:`` nor ``5|`` "is not an exchange
    payload at all (another QR code was scanned)"."""


class CutReading(NotAWholePayload):
    """5.2 steps 2 and 3: a text with the prefix "whose encoding is not strict base64url or
    whose payload is shorter or longer than its name length says is a reading cut short or run
    on (a paste that lost its end or took in more, a partial scan, a misread character)"."""


def result_code(exc: BaseException) -> str | None:
    """The result code (section 1.1) an error reports, or None for one that names none."""
    return getattr(exc, "code", None)


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


MAX_WINDOW = 2**63 - 1  # 9.1: "The pure derivations take any window from 0 to 2^63 - 1"


def u64_window(window: int) -> bytes:
    """u64(W) for a window given rather than computed (9.1): "a negative one is refused as
    `invalid_argument`, never encoded as its 64-bit two's complement", and the derivations
    take windows from 0 to 2^63 - 1."""
    if isinstance(window, bool) or not isinstance(window, int) or not 0 <= window <= MAX_WINDOW:
        raise InvalidArgument(f"a window outside 0 to 2^63 - 1: {window!r}")
    return u64(window)


def be64(b: bytes) -> int:
    """The reverse of u64: the unsigned integer whose big-endian encoding is the 8 bytes b."""
    if len(b) != 8:
        raise ValueError("be64 takes exactly 8 bytes")
    return struct.unpack(">Q", b)[0]


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
        # A length under 128 is its own one-byte LEB128: most parts, written directly.
        out += (bytes((len(b),)) if len(b) < 0x80 else leb128(len(b))) + b
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
        raise InvalidKey("X25519 shared secret is all zero") from exc
    if not any(shared):
        raise InvalidKey("X25519 shared secret is all zero")
    return shared


def ed25519_public(seed: bytes) -> bytes:
    """The public key of an RFC 8032 32-byte private key."""
    return Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes(
        Encoding.Raw, PublicFormat.Raw
    )


def ed25519_sign(seed: bytes, message: bytes) -> bytes:
    return Ed25519PrivateKey.from_private_bytes(seed).sign(message)


def _ed25519_verify_cofactorless(public: bytes, signature: bytes, message: bytes) -> bool:
    """RFC 8032's cofactorless check as the ``cryptography`` package makes it (R compared as
    bytes with the one recomputed), without section 1's refusals of small-order points."""
    if len(public) != 32 or len(signature) != 64:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


# Section 1: "Verification is cofactorless and strict, as libsodium's
# crypto_sign_verify_detached: S must be below the group order, and the public key and R must be
# canonical encodings of points not of small order."

_ED_P = ristretto255.P
_ED_L = ristretto255.L
_ED_Y_MASK = (1 << 255) - 1


def _ed_decode_lenient(y: int, sign: int) -> "ristretto255.Point | None":
    """The edwards25519 point of y (reduced modulo p) and the sign of x (RFC 8032 5.1.3,
    without its canonical checks), or None when there is none."""
    p = _ED_P
    y %= p
    u, v = (y * y - 1) % p, (ristretto255.D * y * y + 1) % p
    x = u * pow(v, 3, p) % p * pow(u * pow(v, 7, p) % p, (p - 5) // 8, p) % p
    if v * x * x % p != u:
        if v * x * x % p != (-u) % p:
            return None
        x = x * pow(2, (p - 1) // 4, p) % p
    if (x & 1) != sign:
        x = (p - x) % p
    return ristretto255.Point(x, y, 1, x * y % p)


def _ed_small_order_ys() -> frozenset:
    """The y of every point of order 1, 2, 4 or 8, and each y + p below 2^255 (a non-canonical
    encoding of the same point).  L times a point of the curve lies in the torsion group,
    which is cyclic of order 8; one of order 8 gives all of it (5 values of y: 1, -1, 0 and
    those of the points of order 8)."""
    p, y = _ED_P, 2
    while True:
        q = _ed_decode_lenient(y, 0)
        y += 1
        if q is None:
            continue
        t = acc = ristretto255.scalar_mult(_ED_L, q)
        ys = {1}
        for _ in range(7):
            ys.add(acc.y * pow(acc.z, p - 2, p) % p)
            acc = ristretto255.add(acc, t)
        if len(ys) == 5:
            return frozenset(ys | {v + p for v in ys if v + p <= _ED_Y_MASK})


ED25519_SMALL_ORDER_Y = _ed_small_order_ys()


def ed25519_point_canonical(enc: bytes) -> bool:
    """The encoding's y (the sign bit left out) is below p."""
    return len(enc) == 32 and int.from_bytes(enc, "little") & _ED_Y_MASK < _ED_P


def ed25519_small_order(enc: bytes) -> bool:
    """The encoding stands for a point of small order, whatever its sign bit and whether its y
    is reduced (as libsodium compares against its list of such encodings)."""
    return int.from_bytes(enc, "little") & _ED_Y_MASK in ED25519_SMALL_ORDER_Y


def ed25519_verify(public: bytes, signature: bytes, message: bytes) -> bool:
    """Ed25519 (RFC 8032, pure), cofactorless and strict as section 1 says: S below the group
    order L, the public key canonical and not of small order, R not of small order; then the
    signature itself (a non-canonical R never equals the recomputed encoding, which is
    compared as bytes).  An identity public key with R the identity and S = 0, which a
    cofactorless check alone accepts for every message, is refused."""
    if len(public) != 32 or len(signature) != 64:
        return False
    if int.from_bytes(signature[32:], "little") >= _ED_L:
        return False
    if (not ed25519_point_canonical(public) or ed25519_small_order(public)
            or not ed25519_point_canonical(signature[:32])
            or ed25519_small_order(signature[:32])):
        return False
    return _ed25519_verify_cofactorless(public, signature, message)


# Section 1: the code points a name may not contain (controls, invisible characters, bidi overrides).
REFUSED_NAME_CODE_POINTS = (
    set(range(0x0000, 0x0020)) | set(range(0x007F, 0x00A0)) | {0x200B, 0xFEFF}
    | set(range(0x202A, 0x202F)) | set(range(0x2060, 0x2065)) | set(range(0x2066, 0x206A))
)


def validate_name(name: bytes) -> str:
    """Names: 1 to 128 bytes of UTF-8 with none of the code points section 1 refuses."""
    if not 1 <= len(name) <= 128:
        raise ProtocolError("name length is not 1 to 128 bytes")
    try:
        text = name.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise ProtocolError("name is not valid UTF-8") from exc
    if any(ord(c) in REFUSED_NAME_CODE_POINTS for c in text):
        raise ProtocolError("name contains a control, invisible or bidi-override character")
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
    """Section 4: leading and trailing spaces ignored, "any number of them"; the word in either
    ASCII case; between word and number exactly one separator, one space or one '-'; exactly
    four ASCII digits.  Anything else is a typing error (``invalid_argument``).  (The 64-byte
    bound of the library's C interface is an interface's, which the document allows and does
    not require; none is applied here.)"""
    m = _SHORT_CODE.fullmatch(text.strip(" "))
    if m is None:
        raise TypingError(f"not a short code: {text!r}")
    try:
        word = nato_index(m.group(1))
    except ProtocolError as exc:
        raise TypingError(f"not a NATO word: {m.group(1)!r}") from exc
    return word * 10_000 + int(m.group(2))


# 4.1 SAS

SAS_LABEL = b"itsme-sas-v1"


def sas_info(th: bytes) -> bytes:
    return lv_cat(SAS_LABEL, th)


def sas_okm(seed: bytes, th: bytes) -> bytes:
    return hkdf(seed, b"", sas_info(th), 8)


def sas_value(seed: bytes, th: bytes) -> int:
    """v = be64(okm) mod 260000."""
    return be64(sas_okm(seed, th)) % SHORT_CODE_VALUES


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
    """5.2 checks 3 to 8 on a decoded payload, in the document's order and with its result
    codes: a payload shorter than 155 bytes (``invalid_argument``), then the version and a
    name length of 0 (``malformed_message``), then a length other than 154 + the name length
    (``invalid_argument``), then the name (``malformed_message``), the fingerprint field and
    the signature (``authentication_failed``), then the own key and the shared secret
    (``invalid_key``).  The two ``invalid_argument`` refusals are :class:`CutReading`: the
    payload is not whole, and the exchange goes on (:func:`qr_refusal_ends_exchange`)."""
    # 3. length, version, name length, then the length the name length gives
    if len(payload) < QR_FIXED + 1:
        raise CutReading("QR payload shorter than 155 bytes")
    if payload[0] != QR_VERSION:
        raise MalformedMessage("QR payload version is not 1")
    name_len = payload[_QR_NAME_LEN_AT]
    if name_len < 1:
        raise MalformedMessage("QR name length is 0")
    if len(payload) != QR_FIXED + name_len:
        raise CutReading("QR payload length is not 154 + its name length")
    identity_pk = payload[1:33]
    fp_field = payload[33:41]
    ephemeral_pk = payload[41:73]
    device_secret = payload[73:89]
    name = payload[90:90 + name_len]
    body = payload[:90 + name_len]
    signature = payload[90 + name_len:]
    # 4. name (section 1, which also bounds it to 128 bytes)
    try:
        validate_name(name)
    except ProtocolError as exc:
        raise MalformedMessage(f"QR name: {exc}") from exc
    # 5. fingerprint field
    if fp_field != fingerprint_bytes(identity_pk):
        raise AuthenticationFailed("QR fingerprint does not match the identity key")
    # 6. signature
    if not ed25519_verify(identity_pk, signature, qr_signed_message(body)):
        raise AuthenticationFailed("QR signature does not verify")
    # 7. not our own key (a reflection)
    if identity_pk == own_identity_pk:
        raise InvalidKey("QR payload carries the receiver's own identity key")
    # 8. non-zero shared secret (x25519_shared raises InvalidKey)
    shared = x25519_shared(own_ephemeral_secret, ephemeral_pk)
    return QrPeer(payload, identity_pk, fingerprint(identity_pk), ephemeral_pk, device_secret,
                  name, signature, shared)


def parse_qr_text(text: str | bytes, own_identity_pk: bytes,
                  own_ephemeral_secret: bytes) -> "QrPeer | V5Import":
    """5.2, all checks: 1. the prefix (case-sensitive; a text starting with neither
    ``ITSME1:`` nor ``5|`` is no payload, :class:`NotAnExchangePayload`; a `5|` text is read by
    section 6, :func:`import_v5`, and gives its :class:`V5Import`), then the length (at most 383
    bytes, else :class:`CutReading`, unread), 2. the rest is UTF-8
    and strict base64url (else :class:`CutReading`; both ``invalid_argument``), then the
    payload checks.  The text is a ``str`` or the bytes scanned; a ``str`` is UTF-8 unless it
    holds a lone surrogate."""
    prefix, source = (QR_PREFIX, "5|") if isinstance(text, str) else (b"ITSME1:", b"5|")
    # 1. prefix, then the length: "at most 383 bytes, the longest payload text of 5.1 [...]
    #    else `invalid_argument`: it runs on, and none of it is decoded"
    if not text.startswith(prefix):
        if text.startswith(source):
            # "A text starting with `5|` is read by section 6 within the same exchange."
            return import_v5(text, own_identity_pk, own_ephemeral_secret)
        raise NotAnExchangePayload("not an exchange payload")
    if _text_bytes(text) > QR_TEXT_MAX:
        raise CutReading(f"QR text longer than {QR_TEXT_MAX} bytes (run on)")
    rest = text[len(prefix):]
    # 2. UTF-8, then strict base64url
    try:
        rest = rest.decode("utf-8") if isinstance(rest, bytes) else rest.encode("utf-8").decode()
    except UnicodeError as exc:
        raise CutReading("QR text after the prefix is not UTF-8") from exc
    try:
        payload = b64url_decode(rest)
    except ProtocolError as exc:
        raise CutReading(f"QR text: {exc}") from exc
    return parse_qr_payload(payload, own_identity_pk, own_ephemeral_secret)


# 5.1: "a text 7 + 207 = 214 to 7 + 376 = 383 characters"; 5.2 step 1 refuses a longer one
# unread.  Section 6: "So a text is at most [...] 327 bytes", and a longer `5|` text is the same
# retryable `invalid_argument`.
QR_TEXT_MAX = 383
V5_TEXT_MAX = 327


def _text_bytes(text: str | bytes) -> int:
    """The length in bytes of a text as scanned: a ``str`` counts its UTF-8 encoding (a lone
    surrogate, which is not UTF-8, as the three bytes it would take), since 5.2 bounds the
    text before it checks that it is UTF-8."""
    if isinstance(text, bytes):
        return len(text)
    return len(text.encode("utf-8", errors="surrogatepass"))


def qr_refusal_ends_exchange(exc: BaseException) -> bool:
    """5.2, "What a refusal ends", for a refusal of :func:`parse_qr_text`: an
    ``invalid_argument`` (the text is not a whole payload) "changes nothing", and the exchange
    still awaits a payload; "every other refusal [...] ends the exchange as failed"."""
    return not isinstance(exc, NotAWholePayload)


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
# Section 5 with 8.1 and 8.2: one device's QR exchange and what it stores
# --------------------------------------------------------------------------------------------

# The exchange method a QR exchange stores: 8.1, "`qr` (0), `bluetooth` (1), `invite` (2) or
# `realtime` (3)".
QR_METHOD = "qr"
# 5.2: "An exchange expires more than 24 hours (86,400 seconds) after its creation"; 8.1: "An
# exchange left pending [...] expires when the time is more than 24 hours after it began".
EXCHANGE_LIFETIME_SECONDS = 86_400


@dataclass
class StoredContact:
    """What a device stores for a contact made by an exchange (8.1, 8.2, 8.3): its identity key,
    the name stored, the seed, the two device secrets (``mine``, the one this side sent;
    ``theirs``, the one the peer sent), the exchange method, the state and, once verified, the
    time it was verified at (8.1: "the time given to the call that made the contact
    verified", for QR always this side's confirmation)."""
    contact_id: int
    identity_pk: bytes
    name: bytes
    seed: bytes
    mine: bytes
    theirs: bytes
    method: str
    state: str
    verified_at: int | None = None
    fingerprint_text: str | None = None  # a source-format contact's (6): no identity key
    # 8.2: what a re-exchange keeps besides the name: "The note, the photo, the creation time
    # and the last voice window `L` (9.1) are kept too".
    note: str | None = None
    photo: bytes | None = None
    created_at: int | None = None
    last_window: int | None = None
    # 8.1: when the exchange that left it *awaiting the peer* began, for the sweep.
    exchange_began_at: int | None = None

    @property
    def unauthenticated(self) -> bool:
        return self.fingerprint_text is not None


class ContactStore:
    """A device's contacts, one per identity key (2: "A contact is identified by its full
    32-byte identity public key"; 8.2)."""

    def __init__(self) -> None:
        self.contacts: dict[int, StoredContact] = {}
        self._next_id = 1
        self.sweeps = 0  # how many sweeps ran (8.1, "Saving": a second save sweeps nothing)

    def expire_awaiting(self, now: int) -> list[int]:
        """8.1: "a contact still awaiting the peer is deleted once the time is more than 24
        hours after its exchange began, whatever the method.  The library deletes it in one
        sweep over the store".  Returns the ids deleted."""
        self.sweeps += 1
        gone = [c.contact_id for c in self.contacts.values()
                if c.state == AWAITING_PEER and c.exchange_began_at is not None
                and now - c.exchange_began_at > EXCHANGE_LIFETIME_SECONDS]
        for contact_id in gone:
            del self.contacts[contact_id]
        return gone

    def find(self, identity_pk: bytes) -> StoredContact | None:
        for contact in self.contacts.values():
            if contact.identity_pk == identity_pk and not contact.unauthenticated:
                return contact
        return None

    def add(self, identity_pk: bytes, name: bytes, seed: bytes, mine: bytes, theirs: bytes,
            method: str) -> StoredContact:
        """8.1: "The new contact is saved **unverified** once the SAS is shown"."""
        if self.find(identity_pk) is not None:
            raise InvalidState("a contact with this identity key is already stored (8.2)")
        contact = StoredContact(self._next_id, identity_pk, name, seed, mine, theirs, method,
                                UNVERIFIED)
        self.contacts[contact.contact_id] = contact
        self._next_id += 1
        return contact

    def add_unauthenticated(self, fingerprint_text: str, name: bytes, seed: bytes, mine: bytes,
                            theirs: bytes) -> StoredContact:
        """Section 6: a source-format contact, "stored flagged *unauthenticated*, for good: it
        is never matched to, merged with, or allowed to replace a contact that has an identity
        key [...] stored with the exchange method of a QR exchange [...], no identity key, and
        the fingerprint from the text", unverified."""
        contact = StoredContact(self._next_id, b"", name, seed, mine, theirs, QR_METHOD,
                                UNVERIFIED, fingerprint_text=fingerprint_text)
        self.contacts[contact.contact_id] = contact
        self._next_id += 1
        return contact

    def delete(self, contact_id: int) -> None:
        del self.contacts[contact_id]

    def replace_exchange(self, contact_id: int, seed: bytes, mine: bytes, theirs: bytes,
                         method: str, now: int) -> StoredContact:
        """8.2: "Both confirmations replace the contact's seed, device secrets and exchange
        method in one transaction and marks it verified; the old seed is overwritten [...]. The
        stored name is kept".  Built as a new record swapped in at once (one transaction):
        the id and the name stay."""
        old = self.contacts[contact_id]
        # "The note, the photo, the creation time and the last voice window `L` (9.1) are kept
        # too: windows used with the old seed stay used.  The contact becomes verified
        # whatever its state was" (a degraded one, acknowledged or not, included: the
        # acknowledgement goes with the state).
        self.contacts[contact_id] = StoredContact(
            contact_id, old.identity_pk, old.name, seed, mine, theirs, method, VERIFIED, now,
            note=old.note, photo=old.photo, created_at=old.created_at,
            last_window=old.last_window)
        return self.contacts[contact_id]


@dataclass(frozen=True)
class QrDecided:
    """What a confirmed or rejected QR exchange leaves: the contact (None once deleted),
    whether it was already stored (8.2), and the name the peer sent, which 8.2 gives the host
    ("the host is given the name the peer sent and may apply it")."""
    contact: StoredContact | None
    known_contact: bool
    peer_name: bytes


class QrExchange:
    """One device of the QR exchange (5.2, 5.3) with 8.1's decision and 8.2's rules for a
    contact already stored.

    ``receive(text, now)`` makes 5.2's checks and gives 5.3's seed and SAS; a text that is not
    a whole payload (``invalid_argument``, :class:`NotAWholePayload`: another QR code, or a
    reading cut short or run on) changes nothing, and the exchange still awaits a payload
    (``awaiting_payload``); every other refusal ends the exchange as failed (``failed``), after
    which every call is ``invalid_state``; a second payload once one was accepted is
    ``invalid_state`` and changes nothing; after 24 hours a payload is ``expired``.  Once the
    SAS is shown a new contact is saved unverified (8.1); if a contact with the peer's identity
    key is stored, it is left untouched and the new seed and device secrets are kept with the
    exchange (8.2).  ``decide(confirmed, now)``: 8.1's table, "QR (5) | none: [...] a device's own
    confirmation suffices": confirming verifies the new contact, or replaces the stored
    contact's seed, device secrets and method and marks it verified, keeping its name (8.2);
    rejecting deletes the new contact and leaves a stored one exactly as it was.

    The device's own payload is given whole (``own_payload``, with its ephemeral secret), or
    made by :meth:`create` from an identity seed.  A source-format text (``5|``, section 6) is
    read by :func:`import_v5` within the exchange, which then is ``imported``: nothing is saved
    until :meth:`save`, confirming and settling are ``invalid_state``, rejecting deletes a saved
    contact and ends it as rejected (section 6, "The exchange after an import")."""

    def __init__(self, own_payload: bytes, ephemeral_secret: bytes, created_at: int,
                 store: ContactStore):
        if len(own_payload) < QR_FIXED + 1 or x25519_public(ephemeral_secret) != own_payload[41:73]:
            raise ValueError("the ephemeral secret is not the one of the own payload")
        self.own_payload = own_payload
        self.identity_pk = own_payload[1:33]
        self.device_secret = own_payload[73:89]
        self.ephemeral_secret = ephemeral_secret
        self.created_at = created_at
        self.store = store
        self.failed = False
        self.peer: QrPeer | None = None
        self.result: QrResult | None = None
        self.known_contact: bool | None = None
        self.contact_id: int | None = None  # the new contact, or the stored one (8.2)
        self.decided: bool | None = None
        self.v5: V5Import | None = None  # a source-format text read within this exchange (6)

    @classmethod
    def create(cls, identity_seed: bytes, ephemeral_secret: bytes, device_secret: bytes,
               name: bytes, created_at: int, store: ContactStore) -> "QrExchange":
        built = build_qr(identity_seed, ephemeral_secret, device_secret, name)
        return cls(built.payload, ephemeral_secret, created_at, store)

    @property
    def own_text(self) -> str:
        return QR_PREFIX + b64url_encode(self.own_payload)

    def _expired(self, now: int) -> bool:
        return now - self.created_at > EXCHANGE_LIFETIME_SECONDS

    @property
    def awaiting_payload(self) -> bool:
        """Whether a payload may still be received: none accepted yet and not failed (5.2)."""
        return not self.failed and self.peer is None and self.v5 is None

    def receive(self, text: str | bytes, now: int) -> QrResult:
        if self.failed or self.peer is not None or self.v5 is not None:
            raise InvalidState("a payload after a failure, or a second payload")
        if self._expired(now):
            self.failed = True
            raise Expired("the QR exchange is more than 24 hours old")
        if text.startswith("5|" if isinstance(text, str) else b"5|"):
            # 5.2: "A text starting with `5|` is read by section 6 within the same exchange";
            # its refusals end the exchange as in 5.2, except the retryable invalid_argument.
            try:
                imp = import_v5(text, self.identity_pk, self.ephemeral_secret)
            except ProtocolError as exc:
                if qr_refusal_ends_exchange(exc):
                    self.failed = True
                raise
            # 6, "The exchange after an import": "Accepting the text saves nothing: the
            # exchange enters a state of its own, imported"; the contact is saved by ``save``.
            self.v5 = imp
            return imp
        try:
            peer = parse_qr_text(text, self.identity_pk, self.ephemeral_secret)
        except ProtocolError as exc:
            # Not a whole payload (another QR code, a cut reading): changes nothing.
            if qr_refusal_ends_exchange(exc):
                self.failed = True
            raise
        result = qr_finish(self.own_payload, self.ephemeral_secret, peer)
        # 8.1, "Saving": the SAS is shown and nothing is stored until the host saves (or
        # confirms, which saves first).
        self.peer, self.result = peer, result
        return result

    @property
    def state(self) -> str:
        """The exchange's state: ``awaiting_payload``, ``comparing`` (the SAS is shown),
        ``imported`` (a source-format text accepted, section 6), ``confirmed``, ``rejected``
        or ``failed``."""
        if self.failed:
            return "failed"
        if self.decided is not None:
            return "confirmed" if self.decided else "rejected"
        if self.v5 is not None:
            return "imported"
        return "comparing" if self.peer is not None else "awaiting_payload"

    def _new_contact_saved(self) -> bool:
        """Whether this exchange saved a new contact (one a sweep or the person deleted since
        included): not a stored contact exchanged again (8.2), not an import never saved."""
        return self.contact_id is not None and not self.known_contact

    def _fail_expired(self, now: int) -> None:
        """8.1: "an expired exchange can only fail (`expired`)"."""
        if self.state in ("awaiting_payload", "comparing", "imported") and self._expired(now):
            self.failed = True
            raise Expired("the QR exchange is more than 24 hours old")

    def save(self, now: int) -> StoredContact:
        """8.1, "Saving" (and section 6, "The exchange after an import").  In this order: the
        time (``invalid_argument`` before 1970), a failed exchange (``invalid_state``), a
        pending one more than 24 hours old (``expired``, which fails it and leaves a contact
        it saved in place).  Then only *comparing the SAS* and *imported* may save; awaiting
        the payload, confirmed and rejected are ``invalid_state`` and change nothing.  The
        first save runs the sweep of contacts awaiting the peer, then looks up the peer's
        identity key: a stored contact is given as it is (``known_contact`` set), else the
        new contact is stored unverified with the seed, both device secrets and the method
        (an import always as a new, unauthenticated contact, section 6).  Saving again gives
        the same contact and writes and sweeps nothing; one the person deleted since is
        still given (its record, with its id), not saved again."""
        check_time(now)
        if self.failed:
            raise InvalidState("the exchange has failed")
        self._fail_expired(now)
        if self.state not in ("comparing", "imported"):
            raise InvalidState(f"nothing to save: the QR exchange is {self.state}")
        if self._saved is None:
            self._first_save(now)
        return self._saved

    _saved: StoredContact | None = None

    def _first_save(self, now: int) -> None:
        self.store.expire_awaiting(now)
        if self.v5 is not None:
            imp = self.v5
            self._saved = self.store.add_unauthenticated(
                imp.peer.fingerprint_text, imp.peer.name, imp.seed, self.device_secret,
                imp.peer.device_secret)
            self.known_contact = False
        else:
            assert self.peer is not None and self.result is not None
            stored = self.store.find(self.peer.identity_pk)
            self.known_contact = stored is not None
            if stored is not None:
                self._saved = stored  # 8.2: not touched until confirmed
            else:
                self._saved = self.store.add(self.peer.identity_pk, self.peer.name,
                                             self.result.seed, self.device_secret,
                                             self.peer.device_secret, QR_METHOD)
        self.contact_id = self._saved.contact_id

    def settle(self, now: int) -> None:
        """8.1, "Settling": a QR exchange carries no peer's decision, so settling it is
        ``invalid_state`` and changes nothing in every state (comparing the SAS or an import,
        section 6: "before this side confirmed"; confirmed or rejected: "once the exchange is
        settled"; failed); a pending one more than 24 hours old is ``expired`` instead and
        fails, the contact it saved left in place (8.1: one "nobody confirmed or rejected
        stays unverified"; 6: expiry "leaves a saved contact in place"), a failed one
        answering ``invalid_state`` first."""
        if self.failed:
            raise InvalidState("the exchange has failed")
        self._fail_expired(now)
        raise InvalidState(f"nothing to settle: the QR exchange is {self.state}")

    def decide(self, confirmed: bool, now: int) -> QrDecided:
        state = self.state
        if state == "failed":
            # 8.1, "Rejecting a failed exchange": sends nothing, leaves it failed, and deletes
            # the new contact it saved (one already deleted counts as deleted); one that saved
            # no new contact (nothing saved, or a stored contact exchanged again, 8.2), a
            # second rejection, or a confirmation is invalid_state and changes nothing.
            if confirmed:
                raise InvalidState("the exchange has failed: it can only be rejected")
            if getattr(self, "_failed_rejected", False):
                raise InvalidState("the failed exchange was rejected already")
            if not self._new_contact_saved():
                raise InvalidState("the failed exchange saved no new contact")
            self._failed_rejected = True
            if self.contact_id in self.store.contacts:
                self.store.delete(self.contact_id)
            return QrDecided(None, False, self._peer_name())
        if state in ("confirmed", "rejected", "awaiting_payload"):
            raise InvalidState("a decision before there is a SAS, or twice")
        check_time(now)
        if state == "imported":
            # 6: an expired import fails (`expired`, 8.1) and keeps a saved contact; "There is
            # nothing to confirm: confirming [...] is invalid_state and changes nothing";
            # "rejecting sends nothing (there is no peer to tell), deletes the contact if it
            # was saved, and ends the exchange as rejected".
            self._fail_expired(now)
            if confirmed:
                raise InvalidState("an import has nothing to confirm")
            if self.contact_id is not None and self.contact_id in self.store.contacts:
                self.store.delete(self.contact_id)
            self.decided = False
            return QrDecided(None, False, self._peer_name())
        assert self.result is not None and self.peer is not None
        # 8.1: "an expired exchange can only fail (`expired`). A contact it saved unverified
        # and nobody confirmed or rejected [...] stays unverified" until the failed exchange is
        # rejected ("Rejecting a failed exchange"); a stored one (8.2) is left as it was.
        self._fail_expired(now)
        # 8.1, "Saving": "`confirm` saves first when the host has not"; rejecting deletes the
        # new contact it saved (none if nothing was saved).  A contact the exchange saved and
        # the person deleted since: "confirming is `not_found` and changes nothing; rejecting
        # counts that contact as deleted and rejects as usual" (it ends rejected; a QR
        # exchange has no rejection to send).
        if confirmed and self._saved is None:
            self._first_save(now)
        deleted = self._saved is not None and self.contact_id not in self.store.contacts
        if confirmed and deleted:
            raise NotFound("the contact this exchange saved was deleted")
        if self._saved is None or deleted:
            self.decided = False
            return QrDecided(None, bool(self.known_contact), self.peer.name)
        self.decided = confirmed
        contact: StoredContact | None
        if not confirmed:
            contact = self.store.contacts[self.contact_id] if self.known_contact else None
            if not self.known_contact:
                self.store.delete(self.contact_id)  # 8.1: "deletes the new contact"
        elif self.known_contact:
            contact = self.store.replace_exchange(self.contact_id, self.result.seed,
                                                  self.device_secret, self.peer.device_secret,
                                                  QR_METHOD, now)
        else:
            contact = self.store.contacts[self.contact_id]
            contact.state = VERIFIED
            contact.verified_at = now
        return QrDecided(contact, bool(self.known_contact), self.peer.name)

    def _peer_name(self) -> bytes:
        if self.peer is not None:
            return self.peer.name
        return self.v5.peer.name if self.v5 is not None else b""


# --------------------------------------------------------------------------------------------
# Section 6: source-format (v5) import
# --------------------------------------------------------------------------------------------

_HEX16 = re.compile(r"[0-9A-Fa-f]{16}", re.ASCII)
_DIGITS6 = re.compile(r"[0-9]{6}", re.ASCII)


def _split_v5(text: str) -> list[str]:
    """Section 6's reading, left to right: "a `\\` escapes the character after it, which must
    be `|` or `\\` and is taken literally [...]; any other `\\` sequence, a `\\` at the end, or
    a `\\` outside the name field is rejected; every unescaped `|` separates fields".  The
    reading stops at the first such `\\` (``malformed_message``); the fields come back
    unescaped (only the name, the second field, can hold an escape)."""
    fields: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if len(fields) != 1:
                raise MalformedMessage("a '\\' outside the name field of a v5 text")
            if i + 1 >= len(text):
                raise MalformedMessage("a '\\' at the end of a v5 text")
            nxt = text[i + 1]
            if nxt not in ("|", "\\"):
                raise MalformedMessage("a '\\' in a v5 name escapes neither '|' nor '\\'")
            current.append(nxt)
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


@dataclass(frozen=True)
class V5Peer:
    name: bytes
    fingerprint_text: str
    ephemeral_pk: bytes
    device_secret: bytes  # the 6 ASCII digits


def parse_v5(text: str | bytes, own_fingerprint: str | None = None) -> V5Peer:
    """Section 6: '5|name|fingerprint|ephemeralKey|deviceSecret', checked in the order section
    6 gives, the first failure giving the code: 5.2's step 1 (a text that does not start with
    `5|` is no exchange payload, one longer than 327 bytes a reading run on: both the retryable
    ``invalid_argument``, nothing of the text read); then UTF-8; the reading left to right; the
    count of five fields; the name; the fingerprint's form; the ephemeral key's form; the device
    secret's form (each ``malformed_message``); only then the fingerprint compared with the
    receiver's own, ``own_fingerprint`` when given (``invalid_key``).  The text is a ``str`` or
    the bytes scanned."""
    source = "5|" if isinstance(text, str) else b"5|"
    if not text.startswith(source):
        raise NotAnExchangePayload("not a source-format text (no '5|')")
    if _text_bytes(text) > V5_TEXT_MAX:
        raise CutReading(f"source-format text longer than {V5_TEXT_MAX} bytes (run on)")
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        else:
            text.encode("utf-8")
    except UnicodeError as exc:
        raise MalformedMessage("a v5 text that is not UTF-8") from exc
    fields = _split_v5(text)
    if len(fields) != 5:
        raise MalformedMessage("a v5 text has exactly five fields")
    version, name_field, fp_field, key_field, secret_field = fields
    if version != "5":  # cannot happen: the text starts with "5|"
        raise MalformedMessage("the first v5 field is not '5'")
    name = name_field.encode("utf-8")
    try:
        validate_name(name)
    except ProtocolError as exc:
        raise MalformedMessage(f"v5 name: {exc}") from exc
    if not _HEX16.fullmatch(fp_field):
        raise MalformedMessage("v5 fingerprint is not 16 hex digits")
    fp = fp_field.upper()
    try:
        ephemeral_pk = b64_decode(key_field)
    except ProtocolError as exc:
        raise MalformedMessage(f"v5 ephemeral key: {exc}") from exc
    if len(ephemeral_pk) != 32:
        raise MalformedMessage("v5 ephemeral key is not 32 bytes")
    if not _DIGITS6.fullmatch(secret_field):
        raise MalformedMessage("v5 device secret is not 6 ASCII digits")
    if own_fingerprint is not None and fp == own_fingerprint.upper():
        raise InvalidKey("v5 fingerprint is the receiver's own (a reflection)")
    return V5Peer(name, fp, ephemeral_pk, secret_field.encode("ascii"))


@dataclass(frozen=True)
class V5Import:
    peer: V5Peer
    shared: bytes
    salt: bytes
    seed: bytes


def import_v5(text: str | bytes, own_identity_pk: bytes,
              own_ephemeral_secret: bytes) -> V5Import:
    """Section 6 parse plus the seed of section 3 (no SAS exists for a v5 peer); the shared
    secret is computed last (``invalid_key`` if all zero)."""
    own_fp = fingerprint(own_identity_pk)
    peer = parse_v5(text, own_fp)
    shared = x25519_shared(own_ephemeral_secret, peer.ephemeral_pk)
    salt = seed_salt(own_fp, peer.fingerprint_text)
    return V5Import(peer, shared, salt, hkdf(shared, salt, SEED_LABEL, 32))


# --------------------------------------------------------------------------------------------
# Section 7: Bluetooth exchange
# --------------------------------------------------------------------------------------------

TIME_MIN = 0  # 1.1: "a time before 1970" is invalid_argument


def check_time(now: int | None) -> None:
    """8.1, "Saving": "First the time is checked (`invalid_argument` if out of range)";
    section 1.1 names "a time before 1970"."""
    if now is not None and (not isinstance(now, int) or now < TIME_MIN):
        raise InvalidArgument("a time before 1970")


def _verified_at_once(exchange, decision: int, now: int | None) -> None:
    """8.1: "If the peer's confirmation has already arrived, the contact becomes **verified**
    at once", and "Verified" records the time given to this side's confirmation."""
    if decision == DECISION_CONFIRMED and exchange.peer_decision == DECISION_CONFIRMED:
        exchange.settled, exchange.verified_at = True, now


def _reject_failed(exchange, confirmed: bool, had_sas: bool) -> list[bytes]:
    """8.1, "Rejecting a failed exchange" (a refused message, 7.2, 16.3, or expiry): it "sends
    nothing, leaves it failed, and deletes the new contact it saved, awaiting the peer or
    unverified"; a failed exchange that saved no new contact (one that failed before its SAS,
    or whose host neither saved nor confirmed: 8.1, "Saving"), a second rejection, or a
    confirmation is ``invalid_state`` and changes nothing."""
    if confirmed:
        raise InvalidState("the exchange has failed: it can only be rejected")
    if exchange.rejected_after_failure:
        raise InvalidState("the failed exchange was rejected already")
    if not had_sas:
        raise InvalidState("the failed exchange saved no new contact")
    exchange.rejected_after_failure = True
    exchange.saved_contact_deleted = True
    return []


def _rejects_after_confirming(exchange, confirmed: bool) -> bool:
    """8.1: "Rejecting is allowed in every state before a decision is settled (comparing the
    SAS, or awaiting the peer's decision), whether or not the peer's decision is in": this
    side confirmed, and the exchange is neither settled nor rejected yet."""
    return (not confirmed and exchange.own_decision == DECISION_CONFIRMED
            and not (exchange.settled or exchange.settled_rejected
                     or exchange.rejected_after_confirming))


def _check_undecided(side, confirmed: bool) -> None:
    """8.1: a Bluetooth or remote side deciding for the first time, in this order."""
    if side.own_decision is not None:
        raise InvalidState("this side has decided already")
    if confirmed and side.peer_decision == DECISION_REJECTED:
        # 8.1: "A side whose person has not decided yet when the peer's rejection
        # arrives cannot confirm any more (`invalid_state`, checked before the saved
        # contact is looked up)".
        raise InvalidState("the peer rejected: this side can only reject")
    if confirmed and side.person_deleted:
        # 8.1, "Saving": confirming a contact the exchange saved and the person deleted
        # is not_found and changes nothing; rejecting it rejects as usual.
        raise NotFound("the contact this exchange saved was deleted")


def _reject_after_confirming(exchange) -> list[bytes]:
    """8.1: "a side that confirmed sends nothing (its confirmation is already out); either way
    the new contact is deleted (a stored one stays as it was) and the exchange ends
    *rejected*" (a contact the person deleted counts as deleted, 8.1 "Saving").  A
    confirmation the mailbox inviter still holds (16.3 step 5) is dropped, never sent: it
    rejected, and its `kd` seals exactly one message, so no rejection can follow it either.
    Rejecting it again, confirming, settling or saving it is then ``invalid_state``."""
    exchange.rejected_after_confirming = True
    exchange.saved_contact_deleted = True
    return []


def _save(exchange, now: int | None) -> str:
    """8.1, "Saving", for a Bluetooth or remote exchange (no store here: ``saved`` records
    that the new contact is stored, ``sweeps`` that the first save ran the sweep).  In this
    order: the time (``invalid_argument`` before 1970), a failed exchange (``invalid_state``),
    a pending one more than 24 hours old (``expired``, which fails it).  Then only *comparing
    the SAS* may save (the peer's data in and this side undecided, the peer's decision in or
    not); awaiting the peer's data, awaiting the peer's decision, confirmed and rejected are
    ``invalid_state`` and change nothing.  Saving again writes and sweeps nothing.  Returns
    the contact's state, unverified."""
    check_time(now)
    if exchange.failed:
        raise InvalidState("the exchange has failed")
    if (_pending(exchange) and now is not None and exchange.created_at is not None
            and now - exchange.created_at > EXCHANGE_LIFETIME_SECONDS):
        exchange._fail_by_expiry()
        raise Expired("the exchange is more than 24 hours old")
    if not exchange.has_sas:
        raise InvalidState("nothing to save yet: the peer's data has not arrived")
    if exchange.own_decision is not None:
        raise InvalidState("this side decided: confirming saved the contact, or rejecting "
                           "deleted it")
    # 8.1: "A wait that ends [...] is not a state of the exchange [...] Until then saving and
    # confirming act as in that state": the end of the wait is not checked here.
    _first_save(exchange)
    return UNVERIFIED


def _person_deletes(exchange) -> None:
    """The person deletes the contact a Bluetooth or remote exchange saved (there is no store
    here: ``person_deleted`` records it).  8.1, "Saving": it "is not saved again"; while the
    SAS is compared, confirming is ``not_found`` and changes nothing and rejecting counts it as
    deleted; once this side confirmed, settling a confirmation is ``not_found`` and changes
    nothing, while a rejection from the peer, and rejecting, count it as deleted."""
    if not exchange.saved:
        raise NotFound("this exchange saved no contact")
    if exchange.person_deleted:
        raise NotFound("the contact this exchange saved was deleted already")
    exchange.person_deleted = True


def _first_save(exchange) -> None:
    """8.1, "Saving": the first save runs the sweep and stores the new contact; a second
    writes and sweeps nothing."""
    if not exchange.saved:
        exchange.sweeps += 1
        exchange.saved = True


def _pending(exchange) -> bool:
    """8.1: an exchange left pending is awaiting the peer's data, comparing the SAS, or
    awaiting the peer's decision (this side confirmed, until settled, the peer's decision in
    or not); not once failed, rejected by this side, or settled."""
    return not (exchange.failed or exchange.own_decision == DECISION_REJECTED
                or exchange.settled or exchange.settled_rejected
                or exchange.rejected_after_confirming)


def _settle(exchange, now: int | None) -> str:
    """8.1, "Settling": applies the peer's decision, once it has arrived, to an exchange this
    side confirmed: a confirmation makes the contact verified (``verified_at`` the time given
    to the settling: "its arrival itself records nothing"); a rejection deletes the new
    contact and ends the exchange as rejected, giving no contact.  Returns the contact's
    state, VERIFIED or DELETED.  A failed exchange answers ``invalid_state`` first; a pending
    one more than 24 hours after ``created_at`` (when both it and ``now`` are known) is
    ``expired`` and fails; any other settling (before the peer's decision, before this side
    confirmed, once settled or rejected) is ``invalid_state`` and changes nothing."""
    if exchange.failed:
        raise InvalidState("the exchange has failed")
    if (_pending(exchange) and now is not None and exchange.created_at is not None
            and now - exchange.created_at > EXCHANGE_LIFETIME_SECONDS):
        exchange._fail_by_expiry()
        raise Expired("the exchange is more than 24 hours old")
    if exchange.own_decision != DECISION_CONFIRMED:
        raise InvalidState("nothing to settle: this side has not confirmed")
    if (exchange.settled or exchange.settled_rejected
            or exchange.rejected_after_confirming):
        raise InvalidState("the exchange is settled or rejected already")
    if exchange.peer_decision is None:
        raise InvalidState("nothing to settle: the peer's decision has not arrived")
    if exchange.peer_decision == DECISION_CONFIRMED:
        if exchange.person_deleted:
            # 8.1, "Saving": "once this side confirmed, a contact the person deleted makes
            # settling a confirmation `not_found` (changing nothing)".
            raise NotFound("the contact this exchange saved was deleted")
        exchange.settled, exchange.verified_at = True, now
        return VERIFIED
    exchange.settled_rejected = True  # a contact the person deleted counts as deleted
    return DELETED


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


_FRAME_NAMES = {HELLO: "HELLO", KEY: "KEY", DATA: "DATA", CONFIRM: "CONFIRM"}
FRAME_MAX = 2 + 257  # 259
FRAME_MIN = 2 + 1 + TAG_BYTES  # 19, CONFIRM's: the shortest row of 7.1's table


def parse_frame(data: bytes, expected_type: int) -> bytes:
    """7.1, in section 1.1's order: the length outside its row (the row of the type the frame
    names; for a frame too short to name one, or of another type, outside 19 to 259 bytes),
    the version, the type, the order (a type other than the one expected now).  Each is
    ``malformed_message``, so their order does not change the code.  Returns the body."""
    named = data[1] if len(data) >= 2 else None
    if named in _FRAME_NAMES:
        length_ok = _frame_body_ok(named, len(data) - 2)
    else:
        length_ok = FRAME_MIN <= len(data) <= FRAME_MAX
    if not length_ok:
        raise MalformedMessage(f"frame of {len(data)} bytes, outside its row")
    if data[0] != FRAME_VERSION:
        raise MalformedMessage("frame of another version")
    if named not in _FRAME_NAMES:
        raise MalformedMessage("frame of another type")
    if named != expected_type:
        raise MalformedMessage(f"{_FRAME_NAMES[named]} out of order "
                               f"(expected {_FRAME_NAMES[expected_type]})")
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
    if own == peer_fingerprint8:  # 7.1: "a reflection, invalid_key"
        raise InvalidKey("peer fingerprint equals our own (reflected HELLO)")
    return INITIATOR if own < peer_fingerprint8 else RESPONDER


def check_bt_key(peer_key_frame: bytes, own_ephemeral_secret: bytes) -> bytes:
    """7.1 and 7.2 step 3, a received KEY: its form (``malformed_message``), then an ephemeral
    key equal to the receiver's own is a reflection, ``invalid_key``; one giving an all-zero
    X25519 shared secret, ``invalid_key``.  Returns the shared secret."""
    peer_ephemeral = parse_frame(peer_key_frame, KEY)
    if hmac.compare_digest(peer_ephemeral, x25519_public(own_ephemeral_secret)):
        raise InvalidKey("the peer's ephemeral key equals our own (reflected KEY)")
    return x25519_shared(own_ephemeral_secret, peer_ephemeral)


def bt_th1_input(session_code_text: str, hello_i: bytes, hello_r: bytes,
                 key_i: bytes, key_r: bytes) -> bytes:
    """7.3: the lv_cat input of th1; hello_X and key_X are whole HELLO and KEY frames."""
    return lv_cat(BT_TH1_LABEL, session_code_text.encode("ascii"), hello_i, hello_r, key_i, key_r)


def bt_th1(session_code_text: str, hello_i: bytes, hello_r: bytes,
           key_i: bytes, key_r: bytes) -> bytes:
    return sha256(bt_th1_input(session_code_text, hello_i, hello_r, key_i, key_r))


def bt_prk(shared: bytes, th1: bytes) -> bytes:
    """7.3: prk = HKDF-Extract(salt = th1, ikm = shared)."""
    return hkdf_extract(th1, shared)


def bt_session_keys(shared: bytes, th1: bytes) -> tuple[bytes, bytes]:
    """7.3: (initiator key, responder key), each HKDF-Expand of :func:`bt_prk`."""
    prk = bt_prk(shared, th1)
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
    except InvalidTag as exc:  # 7.1: "its tag, authentication_failed"
        raise AuthenticationFailed(f"{_FRAME_NAMES[frame_type]} does not decrypt") from exc


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
    if value not in (b"\x00", b"\x01"):  # 7.1: malformed_message
        raise MalformedMessage("CONFIRM byte is neither 0 nor 1")
    return value == b"\x01"


@dataclass(frozen=True)
class BtPeerData:
    identity_pk: bytes
    device_secret: bytes
    name: bytes
    signature: bytes


def parse_bt_plaintext(plaintext: bytes, th1: bytes, peer_role: str, peer_hello: bytes,
                       peer_key: bytes, own_identity_pk: bytes) -> BtPeerData:
    """7.4, the receiver's checks "in this order, once the DATA frame's tag verified":
    1. the length (113 + n, n the byte after the device secret, 1 to 128) and the name
       (section 1): ``malformed_message``;
    2. fingerprint(identity_pk) equals the fingerprint in the peer's HELLO:
       ``authentication_failed``;
    3. the commitment recomputed from the received fields and the peer's KEY equals the one
       in the peer's HELLO (constant time): ``authentication_failed``;
    4. the signature: ``authentication_failed``;
    5. identity_pk differs from the receiver's own: ``invalid_key`` (a guard: unreachable
       after step 2 and the HELLO check)."""
    hello_body = parse_frame(peer_hello, HELLO)
    peer_fp, peer_commitment = hello_body[:8], hello_body[8:]
    peer_ephemeral = parse_frame(peer_key, KEY)
    # 1. length and name
    if len(plaintext) < BT_DATA_FIXED + 1:
        raise MalformedMessage("contact data too short")
    name_len = plaintext[_BT_NAME_LEN_AT]
    if not 1 <= name_len <= 128 or len(plaintext) != BT_DATA_FIXED + name_len:
        raise MalformedMessage("contact data of the wrong length")
    identity_pk = plaintext[:32]
    device_secret = plaintext[32:48]
    name = plaintext[49:49 + name_len]
    data = plaintext[:49 + name_len]
    signature = plaintext[49 + name_len:]
    try:
        validate_name(name)
    except ProtocolError as exc:  # section 1: a name in a peer's message
        raise MalformedMessage(str(exc)) from exc
    # 2. fingerprint against the peer's HELLO
    if fingerprint_bytes(identity_pk) != peer_fp:
        raise AuthenticationFailed("identity key does not match the HELLO fingerprint")
    # 3. commitment, constant-time
    recomputed = bt_commitment(identity_pk, peer_ephemeral, name, device_secret)
    if not hmac.compare_digest(recomputed, peer_commitment):
        raise AuthenticationFailed("commitment does not match")
    # 4. signature
    if not ed25519_verify(identity_pk, signature, bt_signed_message(th1, peer_role, data)):
        raise AuthenticationFailed("contact data signature does not verify")
    # 5. not our own key
    if identity_pk == own_identity_pk:
        raise InvalidKey("contact data carries the receiver's own identity key")
    return BtPeerData(identity_pk, device_secret, name, signature)


def bt_transcript_input(th1: bytes, plaintext_i: bytes, plaintext_r: bytes) -> bytes:
    """7.4: lv_cat('itsme-bluetooth-transcript-v1', th1, plaintext_I, plaintext_R)."""
    return lv_cat(BT_TRANSCRIPT_LABEL, th1, plaintext_i, plaintext_r)


def bt_transcript_hash(th1: bytes, plaintext_i: bytes, plaintext_r: bytes) -> bytes:
    """7.4: th = SHA-256(lv_cat(label, th1, plaintext_I, plaintext_R))."""
    return sha256(bt_transcript_input(th1, plaintext_i, plaintext_r))


class BluetoothExchange:
    """One device of the Bluetooth exchange (7.2), with 8.1's decisions.

    ``start()`` gives HELLO; ``receive(frame)`` checks a peer frame (7.1's checks and codes, in
    section 1.1's order) and returns the frames to send; ``decide()`` gives CONFIRM.  "A refused
    frame ends the exchange as failed, except once this side has decided": then it is refused
    with its code and the device goes on waiting for a valid CONFIRM.  A CONFIRM is accepted
    once the peer's DATA was received, before or after this side decided, at most once (a
    second one is out of order, ``malformed_message``).  Once both decisions are in, or after
    a failure, a frame is ``invalid_state`` (section 1.1: "a message after a session or
    exchange is complete", "anything after a failure").  The end of the Bluetooth session is
    not a state of the exchange (8.1): :meth:`end_session` only records it."""

    def __init__(self, identity_seed: bytes, ephemeral_secret: bytes, device_secret: bytes,
                 name: bytes, session_code_text: str):
        validate_name(name)
        if len(identity_seed) != 32 or len(ephemeral_secret) != 32 or len(device_secret) != 16:
            raise ValueError("wrong seed, ephemeral secret or device-secret length")
        self.identity_seed = identity_seed
        self.identity_pk = ed25519_public(identity_seed)
        self.ephemeral_secret = ephemeral_secret
        self.ephemeral_pk = x25519_public(ephemeral_secret)
        self.device_secret = device_secret
        self.name = name
        self.session_code_text = format_short_code(parse_short_code(session_code_text))
        self.commitment = bt_commitment(self.identity_pk, self.ephemeral_pk, name,
                                        device_secret)
        self.hello = hello_frame(self.identity_pk, self.commitment)
        self.key = key_frame(self.ephemeral_pk)
        self.role: str | None = None
        self.peer: BtPeerData | None = None
        self.failed = False
        self.session_ended = False  # recorded only: no state of the exchange (8.1)
        self.own_decision: int | None = None
        self.peer_decision: int | None = None
        self.confirm_message: bytes | None = None
        self.seed = self.th = self.sas_value = self.sas_text = None
        self._started = False
        self._expect = HELLO
        self._peer_confirmed_once = False

    def start(self) -> list[bytes]:
        """7.2 step 1: "At start each device sends HELLO"."""
        if self._started:
            raise InvalidState("already started")
        self._started = True
        return [self.hello]

    @property
    def peer_role(self) -> str:
        return RESPONDER if self.role == INITIATOR else INITIATOR

    @property
    def complete(self) -> bool:
        return self.own_decision is not None and self.peer_decision is not None

    @property
    def contact_state(self) -> str | None:
        """8.1, as for :class:`RemoteExchange`."""
        if self.failed or self.sas_value is None:
            return None
        if self.person_deleted:
            return DELETED
        # 8.1: this side's rejection, or the peer's once this side confirmed, deletes it; the
        # peer's rejection before this side decided leaves it until the host rejects.
        if self.own_decision == DECISION_REJECTED or (
                self.own_decision is not None and self.peer_decision == DECISION_REJECTED):
            return DELETED
        if self.rejected_after_confirming:
            return DELETED
        # 8.1: a wait that ends changes nothing here: the host rejects (or the sweep deletes
        # a contact left awaiting the peer).
        if self.own_decision is None or self.peer_decision is None:
            return UNVERIFIED if self.own_decision is None else AWAITING_PEER
        return VERIFIED if self.settled else AWAITING_PEER

    # 8.1: "If the peer's confirmation has already arrived, the contact becomes verified at
    # once. [...] Once the peer's confirmation has arrived, the host settles the exchange".
    settled = False
    verified_at: int | None = None
    rejected_after_failure = False
    saved_contact_deleted = False
    settled_rejected = False  # settled on the peer's rejection (8.1)
    rejected_after_confirming = False  # confirmed, then rejected before settling (8.1)
    created_at: int | None = None  # when the exchange began, for 8.1's 24 hours
    _had_sas = False
    saved = False  # 8.1, "Saving": the new contact is stored (by save, or by confirm)
    person_deleted = False  # the person deleted the contact it saved (8.1, "Saving")
    sweeps = 0

    def person_deletes(self) -> None:
        """The person deletes the contact this exchange saved (:func:`_person_deletes`)."""
        _person_deletes(self)

    def settle(self, now: int | None = None) -> str:
        """8.1, "Settling" (:func:`_settle`); `now` is the time a verified contact records."""
        return _settle(self, now)

    def _fail_by_expiry(self) -> None:
        self.failed = True

    def receive(self, data: bytes) -> list[bytes]:
        if self.failed:
            raise InvalidState("the exchange has failed")
        if self.complete:
            raise InvalidState("the exchange is complete")
        if not self._started:
            raise InvalidState("frame before the exchange started")
        keeps_waiting = self.own_decision is not None
        try:
            if self._expect == HELLO:
                return self._on_hello(data)
            if self._expect == KEY:
                return self._on_key(data)
            if self._expect == DATA:
                return self._on_data(data)
            return self._on_confirm(data)
        except ProtocolError:
            if not keeps_waiting:
                self.failed = True
            raise

    def _on_hello(self, data: bytes) -> list[bytes]:
        """7.2 step 2: the peer's fingerprint differs from ours (7.1: invalid_key), the roles
        are fixed, and only then KEY is sent."""
        body = parse_frame(data, HELLO)
        self.role = bt_role(self.identity_pk, body[:8])
        self.peer_hello = data
        self._expect = KEY
        return [self.key]

    def _on_key(self, data: bytes) -> list[bytes]:
        """7.2 step 3: a reflected KEY or a low-order key is invalid_key; derive 7.3's keys and
        send DATA."""
        shared = check_bt_key(data, self.ephemeral_secret)
        self.peer_key = data
        hello_i, hello_r = ((self.hello, self.peer_hello) if self.role == INITIATOR
                            else (self.peer_hello, self.hello))
        key_i, key_r = ((self.key, data) if self.role == INITIATOR else (data, self.key))
        self.th1 = bt_th1(self.session_code_text, hello_i, hello_r, key_i, key_r)
        k_i, k_r = bt_session_keys(shared, self.th1)
        self.my_key, self.their_key = (k_i, k_r) if self.role == INITIATOR else (k_r, k_i)
        self.plaintext = bt_plaintext(self.identity_seed, self.th1, self.role,
                                      self.device_secret, self.name)
        self._expect = DATA
        return [data_frame(self.my_key, self.plaintext)]

    def _on_data(self, data: bytes) -> list[bytes]:
        """7.2 step 4: the tag (authentication_failed), then 7.4's checks; the seed, th and
        the SAS."""
        plain = open_frame(data, DATA, self.their_key, DATA_COUNTER)
        peer_ephemeral = self.peer_key[2:]
        self.peer = parse_bt_plaintext(plain, self.th1, self.peer_role, self.peer_hello,
                                       self.peer_key, self.identity_pk)
        self.seed = derive_seed(self.ephemeral_secret, peer_ephemeral,
                                fingerprint(self.identity_pk), fingerprint(self.peer.identity_pk))
        p_i, p_r = ((self.plaintext, plain) if self.role == INITIATOR
                    else (plain, self.plaintext))
        self.th = bt_transcript_hash(self.th1, p_i, p_r)
        self.sas_value = sas_value(self.seed, self.th)
        self.sas_text = sas_text(self.seed, self.th)
        self._expect = CONFIRM
        return []

    def _on_confirm(self, data: bytes) -> list[bytes]:
        """7.2 step 5: the peer's CONFIRM, once (a second is out of order: malformed_message).
        8.1: the peer's rejection before this side's person decided sends nothing: "the
        library does not reject by itself: the person is told first"; this side cannot
        confirm any more, and the host then rejects (:meth:`decide`)."""
        if self._peer_confirmed_once:
            parse_frame(data, CONFIRM)  # its size, version and type first (section 1.1)
            raise MalformedMessage("a second CONFIRM")
        confirmed = open_confirm(data, self.their_key)
        self._peer_confirmed_once = True
        self.peer_decision = DECISION_CONFIRMED if confirmed else DECISION_REJECTED
        return []

    def decide(self, confirmed: bool, now: int | None = None) -> list[bytes]:
        """7.2 step 5 and 8.1: the person confirmed or rejected the SAS; returns CONFIRM.
        Before the SAS, or deciding twice: invalid_state, except that a side that confirmed
        may still reject until a decision is settled, the peer's CONFIRM in or not (sending
        nothing, 8.1); after a failure, only rejecting (8.1).  Once the peer's rejection
        arrived before this side decided, confirming is invalid_state (before the saved
        contact is looked up) and rejecting sends this side's rejection (8.1).  The end of the
        session changes none of this (8.1: "A wait that ends [...] is not a state of the
        exchange").  A confirmation after the peer's makes the contact verified at once, at
        `now`."""
        if self.failed:
            return _reject_failed(self, confirmed, self.saved)
        if self.sas_value is None:
            raise InvalidState("no SAS to confirm or reject yet")
        if _rejects_after_confirming(self, confirmed):
            return _reject_after_confirming(self)
        _check_undecided(self, confirmed)
        if confirmed:
            _first_save(self)  # 8.1, "Saving": "`confirm` saves first when the host has not"
        return self._decide(DECISION_CONFIRMED if confirmed else DECISION_REJECTED, now)

    def save(self, now: int | None = None) -> str:
        """8.1, "Saving" (:func:`_save`)."""
        return _save(self, now)

    @property
    def has_sas(self) -> bool:
        return self.sas_value is not None

    def _decide(self, decision: int, now: int | None = None) -> list[bytes]:
        _verified_at_once(self, decision, now)
        self.own_decision = decision
        self.confirm_message = confirm_frame(self.my_key, decision == DECISION_CONFIRMED)
        return [self.confirm_message]

    def end_session(self) -> None:
        """7.2: the host learns that the Bluetooth session was lost.  8.1: "A wait that ends
        [...] is not a state of the exchange: the library learns of it only from its host, and
        the exchange stays in its state until the host rejects it": this records the event and
        changes nothing that saving, confirming, rejecting, settling or a frame do."""
        self.session_ended = True


# --------------------------------------------------------------------------------------------
# Section 9: voice verification
# --------------------------------------------------------------------------------------------

WINDOW_SECONDS = 30
EARLY_START_SECONDS = 15


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def _be64_head(data: bytes) -> int:
    """be64(first 8 bytes of data)."""
    return be64(data[:8])


# 9.1 Windows

# 9.1: "The last window a time can reach is `window(253402300799)` = 8,446,743,359 (a time
# after 253402300799, the end of the year 9999, is `invalid_argument`)".
LAST_TIME = 253_402_300_799
LAST_WINDOW = LAST_TIME // 30  # 8,446,743,359


class WindowUsed(ProtocolError):
    """9.1: "If the store has recorded `L >= W` meanwhile (another session took the window),
    starting is `window_used` and ends the session"."""
    code = "window_used"


def window_of(t: int) -> int:
    """window(t) = floor(t / 30), for a time from 0 to 253402300799 (else
    ``invalid_argument``: "a time before 1970 is refused", and so is one after the year
    9999)."""
    if not 0 <= t <= LAST_TIME:
        raise InvalidArgument(f"a time outside 0 to {LAST_TIME}: {t}")
    return t // WINDOW_SECONDS


@dataclass(frozen=True)
class VoicePlan:
    window: int
    starts_at: int
    starts_in: int


def plan_session(now: int, last_window: int | None) -> VoicePlan:
    """9.1: W = max(window(t) + 1, L + 1); the session begins at 30 W, in 30 W - t seconds.
    "Planning for a contact whose last window is that one [the last a time can reach] is
    `invalid_state`"; planning within the last window gives a W beyond it, and the plan is
    made (starting it is refused, :func:`start_session`)."""
    if last_window is not None and last_window >= LAST_WINDOW:
        raise InvalidState("the contact's last window is the last one a time can reach")
    w = window_of(now) + 1
    if last_window is not None:
        w = max(w, last_window + 1)
    starts_at = WINDOW_SECONDS * w
    return VoicePlan(w, starts_at, starts_at - now)


def record_window(last_window: int | None, window: int) -> int:
    """9.1: starting a session stores L = W, and fails if W <= L.  Returns the new L."""
    if last_window is not None and window <= last_window:
        raise WindowUsed("window already used for this contact")
    return window


def start_session(window: int, now: int, last_window: int | None) -> int:
    """9.1, starting a planned session at ``now``: returns the new L.  In order: the time
    (``invalid_argument`` outside 0 to 253402300799); more than 15 seconds before 30 W,
    ``invalid_state`` (changes nothing); a W beyond the last window, ``invalid_argument`` from
    15 seconds before 30 W ("the store records no window beyond the last one"); at
    30 (W + 2) or later, ``expired``; then L >= W, ``window_used``."""
    window_of(now)
    if not session_may_start(window, now):
        raise InvalidState("too early: the session starts 15 seconds before its window")
    if window > LAST_WINDOW:
        raise InvalidArgument("a window beyond the last one a time can reach")
    # 9.1: "the time is checked first, so starting then is `expired` even if the store has
    # recorded `L >= W` meanwhile, and the store is neither read nor written".
    if session_expired(window, now):
        raise Expired("the session's window and the next have ended")
    return record_window(last_window, window)


def check_session_window(window: int, now: int | None) -> None:
    """10.3 and 11.1: the window of a Security PIN Update or an Online Verify session is
    `window(now)` or `window(now) - 1` ("any other window is `invalid_argument`"; checked
    against the time, so none beyond the last a time reaches, 9.1).  Without a time only the
    window's own range is checked."""
    u64_window(window)
    if now is not None and window not in (window_of(now), window_of(now) - 1):
        raise InvalidArgument(f"window {window} is neither window(now) nor the one before")


def session_may_start(window: int, t: int) -> bool:
    """9.1: a session may start from 15 seconds before 30 W."""
    return t >= WINDOW_SECONDS * window - EARLY_START_SECONDS


def session_may_finish(window: int, t: int) -> bool:
    """9.1: codes may be checked "before 30 * (W + 2)"; "at 30 * (W + 2) it has expired"."""
    return t < WINDOW_SECONDS * (window + 2)


def session_expired(window: int, t: int) -> bool:
    """9.1: the session has expired from 30 (W + 2) on."""
    return not session_may_finish(window, t)


# 9.7 The call binding (used by 9.2 and 9.6, and by Online Verify, 11.4)

CALL_BINDING_MIN, CALL_BINDING_MAX = 16, 64
BOUND_ITEM = 1  # the item u8(1) a bound session adds before cb
BOUND_MARK = "bound to this call"


def check_call_binding(binding: bytes | None) -> bytes | None:
    """9.7 and 11.4: a call binding cb is 16 to 64 bytes; "a binding of another length is
    invalid_argument".  None: the session is not bound (an empty byte string is a binding of
    length 0, refused like any other length)."""
    if binding is None:
        return None
    cb = bytes(binding)
    if not CALL_BINDING_MIN <= len(cb) <= CALL_BINDING_MAX:
        raise InvalidArgument(f"a call binding is 16 to 64 bytes, not {len(cb)}")
    return cb


def _bound_items(binding: bytes | None) -> tuple[bytes, ...]:
    """9.7: the two items u8(1), cb that a bound session appends; none for an unbound one."""
    cb = check_call_binding(binding)
    return () if cb is None else (u8(BOUND_ITEM), cb)


# 9.2 Session ID

SESSION_ID_LABEL = b"itsme-session-id-v1"
SESSION_ID_VALUES = 26 * 100  # 2600


def session_id_input(window: int, binding: bytes | None = None) -> bytes:
    """The HMAC message of the session ID: lv_cat(label, u64(W)) (9.2), or, for a session bound
    to a call by ``binding`` (9.7), lv_cat(label, u64(W), u8(1), cb): "a bound session's
    session ID and code key take u8(1) and cb as two more items"; an unbound one has "no u8(0)
    item"."""
    return lv_cat(SESSION_ID_LABEL, u64_window(window), *_bound_items(binding))


def session_id_value(seed: bytes, window: int, binding: bytes | None = None) -> int:
    """v = first 8 bytes of HMAC(seed, session_id_input), big-endian, mod 2600 (9.2; 9.7 for a
    bound session)."""
    return _be64_head(hmac_sha256(seed, session_id_input(window, binding))) % SESSION_ID_VALUES


def format_session_id(value: int) -> str:
    """The NATO word v / 100 and two digits v mod 100: 1007 -> 'KILO 07'."""
    if not 0 <= value < SESSION_ID_VALUES:
        raise ValueError("session ID value out of range")
    return f"{NATO_WORDS[value // 100]} {value % 100:02d}"


def session_id_text(seed: bytes, window: int, binding: bytes | None = None) -> str:
    return format_session_id(session_id_value(seed, window, binding))


def session_id_shown(text: str, bound: bool) -> str:
    """9.7: "The screen says beside the session ID that the session is bound ('KILO 07, bound
    to this call')"; an unbound session shows the ID alone."""
    return f"{text}, {BOUND_MARK}" if bound else text


# 9.3 The five words of each person

WORD_OPTIONS_INFO = b"itsme-word-options-v1"
WORD_OPTIONS_MESSAGE = b"word-options"
WORD_ACCEPT_BELOW = 9 * 26  # 234
WORDS_PER_PERSON = 5
LAST_WORD_BLOCK = 255  # block_i for i = 1, ..., 255 (u8(i)), block_0 without: 256 blocks in all


def words_key(seed: bytes, window: int, pid: bytes) -> bytes:
    """k_S = HKDF(ikm = seed, salt = lv_cat(u64(W), pid(S)), info = label, L = 32)."""
    return hkdf(seed, lv_cat(u64_window(window), pid), WORD_OPTIONS_INFO, 32)


def words_block(key: bytes, i: int) -> bytes:
    """block_0 = HMAC(k_S, 'word-options'); block_i = HMAC(k_S, 'word-options' || u8(i))
    for i = 1, 2, ..., 255."""
    if not 0 <= i <= LAST_WORD_BLOCK:
        raise ValueError("word blocks are numbered 0 to 255")
    message = WORD_OPTIONS_MESSAGE if i == 0 else WORD_OPTIONS_MESSAGE + u8(i)
    return hmac_sha256(key, message)


def read_word_blocks(blocks: Iterable[bytes]) -> list[int]:
    """9.3's reading over the blocks block_0, block_1, ... (32 bytes each, at most 256: "256
    blocks in all"): their bytes in order, until five indices.  Raises ProtocolError ("the
    derivation fails") when the blocks fall short."""
    def stream():
        for n, block in enumerate(blocks):
            if n > LAST_WORD_BLOCK:
                raise ValueError("9.3 reads at most 256 blocks")
            if len(block) != 32:
                raise ValueError("a word block is an HMAC-SHA256 output, 32 bytes")
            yield from block
    return pick_words(stream())


def read_word_stream(stream: bytes) -> list[int]:
    """9.3's reading applied to a byte stream taken as block_0 || block_1 || ... (32 bytes
    each): the five indices, in the order drawn."""
    if len(stream) % 32:
        raise ValueError("a stream of whole 32-byte blocks")
    return read_word_blocks(stream[k:k + 32] for k in range(0, len(stream), 32))


def pick_words(stream: Iterable[int]) -> list[int]:
    """Rejection sampling: a byte b < 234 gives index b mod 26, kept unless already chosen;
    other bytes are skipped; stop at five.  Returns the five in the order drawn."""
    chosen: list[int] = []
    for b in stream:
        if b < WORD_ACCEPT_BELOW:
            index = b % 26
            if index not in chosen:
                chosen.append(index)
                if len(chosen) == WORDS_PER_PERSON:
                    return chosen
    raise ProtocolError("byte stream ended before five words were drawn")


@dataclass(frozen=True)
class WordDraw:
    key: bytes
    blocks: tuple[bytes, ...]  # the blocks from which at least one byte was read
    words: tuple[int, ...]  # sorted by index (alphabetical order)


def draw_words(seed: bytes, window: int, pid: bytes) -> WordDraw:
    """9.3: the five word indices of the person whose id is ``pid``."""
    key = words_key(seed, window, pid)
    blocks: list[bytes] = []

    def made():
        # Blocks 0 to 255: "256 blocks in all".  "Should all 256 fall short [...] the
        # derivation fails": the reading raises ProtocolError when the blocks end.
        for i in range(LAST_WORD_BLOCK + 1):
            block = words_block(key, i)
            blocks.append(block)
            yield block

    words = read_word_blocks(made())
    return WordDraw(key, tuple(blocks), tuple(sorted(words)))


# 9.4 Who selects first

FIRST_SELECTOR_LABEL = b"itsme-first-selector-v1"


def first_selector_input(window: int) -> bytes:
    """9.4: the HMAC's message, lv_cat('itsme-first-selector-v1', u64(W))."""
    return lv_cat(FIRST_SELECTOR_LABEL, u64_window(window))


def first_selector_hmac(seed: bytes, window: int) -> bytes:
    """HMAC(seed, lv_cat('itsme-first-selector-v1', u64(W))), the whole 32 bytes."""
    return hmac_sha256(seed, first_selector_input(window))


def first_selector_byte(seed: bytes, window: int) -> int:
    """The first byte of HMAC(seed, lv_cat(label, u64(W)))."""
    return first_selector_hmac(seed, window)[0]


def lower_selects_first(seed: bytes, window: int) -> bool:
    """f = byte & 1; P0 (the lower pid) selects first if f = 0."""
    return first_selector_byte(seed, window) & 1 == 0


def order_pids(pid_x: bytes, pid_y: bytes) -> tuple[bytes, bytes]:
    """(P0, P1): the two ids ordered as byte strings, lexicographically, a proper prefix first
    (which is Python's ordering of ``bytes``).  Equal ids never occur (section 9)."""
    if pid_x == pid_y:
        raise ProtocolError("both parties have the same id")
    return (pid_x, pid_y) if pid_x < pid_y else (pid_y, pid_x)


def first_and_second(seed: bytes, window: int, pid_x: bytes,
                     pid_y: bytes) -> tuple[bytes, bytes]:
    """The ids of the first and the second selector."""
    p0, p1 = order_pids(pid_x, pid_y)
    return (p0, p1) if lower_selects_first(seed, window) else (p1, p0)


# 9.5 Selections

def check_selection(word: int, selector_words: Iterable[int]) -> int:
    """A listener's entry that is not among the selector's five ends the session as failed."""
    if not 0 <= word < 26:
        raise ProtocolError("not a NATO word index")
    if word not in tuple(selector_words):
        raise ProtocolError("the selected word is not among the selector's five")
    return word


# 9.6 Codes

CODE_INFO_LABEL = b"itsme-interactive-code-v1"
CODE_LABEL = b"itsme-code-v1"
VOICE_CODE_VALUES = 26 * 1000  # 26000


def code_info(pid_first: bytes, w1: int, pid_second: bytes, w2: int,
              binding: bytes | None = None) -> bytes:
    """lv_cat(label, pid(first), u8(w1), pid(second), u8(w2)), with the items u8(1), cb after
    them for a session bound to a call by ``binding`` (9.7)."""
    return lv_cat(CODE_INFO_LABEL, pid_first, u8(w1), pid_second, u8(w2), *_bound_items(binding))


def code_key(seed: bytes, window: int, pid_first: bytes, w1: int, pid_second: bytes,
             w2: int, binding: bytes | None = None) -> bytes:
    """K = HKDF(ikm = seed, salt = u64(W), info = code_info, L = 32) (9.6; 9.7 when bound)."""
    return hkdf(seed, u64_window(window), code_info(pid_first, w1, pid_second, w2, binding), 32)


def code_value(key: bytes, pid: bytes) -> int:
    """v(S) = first 8 bytes of HMAC(K, lv_cat('itsme-code-v1', pid(S))), big-endian, mod 26000."""
    return _be64_head(hmac_sha256(key, lv_cat(CODE_LABEL, pid))) % VOICE_CODE_VALUES


def format_voice_code(value: int) -> str:
    """NATO word v / 1000, a space, three digits v mod 1000: 4512 -> 'ECHO 512'."""
    if not 0 <= value < VOICE_CODE_VALUES:
        raise ValueError("code value out of range")
    return f"{NATO_WORDS[value // 1000]} {value % 1000:03d}"


_VOICE_CODE = re.compile(r"([A-Za-z]+)[ \-]([0-9]{3})", re.ASCII)


def parse_voice_code(text: str) -> int:
    """9.6, a heard code: the word (any ASCII case), one space or one '-', exactly three digits;
    leading and trailing spaces (U+0020 only) ignored; anything else is a typing error."""
    m = _VOICE_CODE.fullmatch(text.strip(" "))
    if m is None:
        raise TypingError(f"not a code: {text!r}")
    try:
        word = nato_index(m.group(1))
    except ProtocolError as exc:
        raise TypingError(f"not a NATO word: {m.group(1)!r}") from exc
    return word * 1000 + int(m.group(2))


def parse_typed_tag(text: str) -> int:
    """Section 1: "A device tag is typed as one or two digits, surrounding spaces ignored: `5`
    and `05` are both 5" (the host's rule: the library takes the number)."""
    digits = text.strip(" ")
    if not re.fullmatch(r"[0-9]{1,2}", digits, re.ASCII):
        raise TypingError(f"not a device tag: {text!r}")
    return int(digits)


def check_heard(code_text: str, heard_tag: int, expected_code: int) -> bool:
    """9.6 with section 1: the heard code's form first (a typing error), then the heard tag, a
    number 0 to 99 ("a larger one is `invalid_argument`, checked after the heard code's
    form"); returns whether the code matches."""
    matches = heard_code_matches(code_text, expected_code)
    if isinstance(heard_tag, bool) or not isinstance(heard_tag, int) \
            or not 0 <= heard_tag < DEVICE_TAG_VALUES:
        raise TypingError(f"a heard tag outside 0 to 99: {heard_tag!r}")
    return matches


def heard_code_matches(text: str, expected: int) -> bool:
    """9.6: compare a typed heard code with the expected one.  A typing error raises
    TypingError (the session goes on); a well-formed code returns whether it matches (a
    mismatch fails the session, 10.1)."""
    return parse_voice_code(text) == expected


# --------------------------------------------------------------------------------------------
# Section 10: device tags, the degradation code, Security PIN Update
# --------------------------------------------------------------------------------------------

# 10.1 Device tags

DEVICE_TAG_INFO = b"itsme-device-tag-v1"
DEVICE_TAG_VALUES = 100


def tag_key(seed: bytes) -> bytes:
    """T = HKDF(ikm = seed, salt = empty, info = 'itsme-device-tag-v1', L = 32)."""
    return hkdf(seed, b"", DEVICE_TAG_INFO, 32)


def device_tag(key: bytes, pid: bytes, window: int, device_secret: bytes | None) -> int:
    """tag(S) = be64(first 8 bytes of HMAC(T, lv_cat(pid(S), u64(W), device_secret(S))))
    mod 100.  A device that holds no device secret uses the empty string (None or b"")."""
    mac = hmac_sha256(key, device_tag_input(pid, window, device_secret))
    return _be64_head(mac) % DEVICE_TAG_VALUES


def device_tag_input(pid: bytes, window: int, device_secret: bytes | None) -> bytes:
    """10.1: the tag's HMAC message, lv_cat(pid(S), u64(W), device_secret(S)), keyed with T;
    the empty string for a device that holds no device secret."""
    secret = b"" if device_secret is None else device_secret
    return lv_cat(pid, u64_window(window), secret)


def expected_device_tag(key: bytes, pid: bytes, window: int,
                        stored_secret: bytes | None) -> int | None:
    """The tag the listener expects from the speaker, or None ("not checked") when it holds
    no device secret for the speaker.  Device secrets are never empty (8.3, 10.2), so an empty
    stored secret is read as none."""
    if not stored_secret:
        return None
    return device_tag(key, pid, window, stored_secret)


def format_device_tag(value: int) -> str:
    """The tag is said as two digits, zero-padded ('06')."""
    if not 0 <= value < DEVICE_TAG_VALUES:
        raise ValueError("tag value out of range")
    return f"{value:02d}"


UNVERIFIED, VERIFIED, DEGRADED = "unverified", "verified", "degraded"
# 10.2: "marks the contact degraded with the change acknowledged"; the table of 10.1 calls the
# other kind of degraded "not acknowledged".
DEGRADED_ACKNOWLEDGED = "degraded, acknowledged"
_DEGRADED_STATES = (DEGRADED, DEGRADED_ACKNOWLEDGED)
CONTACT_STATES = (UNVERIFIED, VERIFIED) + _DEGRADED_STATES
FAILED, VERIFIED_DEVICE_CHANGED = "failed", "verified, device changed"
VERIFIED_TAG_UNCHECKED = "verified, tag unchecked"


def session_outcome(code_matches: bool, tag_matches: bool | None,
                    state: str) -> tuple[str, str]:
    """The table of 10.1: (outcome, contact state afterwards).  ``tag_matches`` is None when
    the tag was not checked (the listener holds no device secret for the speaker)."""
    if state not in CONTACT_STATES:
        raise ValueError(f"unknown contact state {state!r}")
    if not code_matches:  # "differs | any": unchanged
        return FAILED, state
    as_verified = state if state in _DEGRADED_STATES else VERIFIED  # degraded stays degraded
    if tag_matches is None:  # "unverified or verified → verified; degraded stays degraded"
        return VERIFIED_TAG_UNCHECKED, as_verified
    if tag_matches:
        return VERIFIED, as_verified
    return VERIFIED_DEVICE_CHANGED, DEGRADED  # "degraded, not acknowledged"


# 10.2 The degradation code

DEGRADATION_INFO = b"itsme-degradation-code-v1"
DEGRADATION_SECRET_BYTES = 10
DEGRADATION_MAC_BYTES = 5
DEGRADATION_CODE_CHARS = 24  # (10 + 5) * 8 / 5: no padding, no unused bits
DEGRADATION_GROUP = 4
BASE32_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"  # RFC 4648 section 6
_BASE32_INDEX = {c: i for i, c in enumerate(BASE32_ALPHABET)}


def base32_encode(data: bytes) -> str:
    """RFC 4648 base 32, upper case, for byte strings whose bit length is a multiple of 5
    (no padding needed, as for the 15 bytes of a degradation code)."""
    nbits = len(data) * 8
    if nbits % 5:
        raise ValueError("base32 without padding needs a multiple of 5 bytes")
    n = int.from_bytes(data, "big")
    return "".join(BASE32_ALPHABET[(n >> (nbits - 5 * (i + 1))) & 31]
                   for i in range(nbits // 5))


def base32_decode(text: str) -> bytes:
    """Strict inverse of base32_encode: upper-case alphabet only, a multiple of 8 characters."""
    if len(text) % 8:
        raise ProtocolError("base32 text without padding is a multiple of 8 characters")
    n = 0
    for c in text:
        v = _BASE32_INDEX.get(c)
        if v is None:
            raise ProtocolError(f"character {c!r} outside the base32 alphabet")
        n = (n << 5) | v
    return n.to_bytes(len(text) * 5 // 8, "big")


def degradation_key(seed: bytes) -> bytes:
    """HKDF(ikm = seed, salt = empty, info = 'itsme-degradation-code-v1', L = 32)."""
    return hkdf(seed, b"", DEGRADATION_INFO, 32)


def degradation_mac(seed: bytes, pid_d: bytes, secret: bytes) -> bytes:
    """m = first 5 bytes of HMAC(key, lv_cat(pid(D), r))."""
    if len(secret) != DEGRADATION_SECRET_BYTES:
        raise ValueError("the interim device secret r is 10 bytes")
    return hmac_sha256(degradation_key(seed),
                       degradation_mac_input(pid_d, secret))[:DEGRADATION_MAC_BYTES]


def degradation_mac_input(pid_d: bytes, secret: bytes) -> bytes:
    """10.2: the MAC's message, lv_cat(pid(D), r)."""
    return lv_cat(pid_d, secret)


def format_degradation_code(code_bytes: bytes) -> str:
    """base32(r || m), 24 characters in six groups of four joined by '-'."""
    if len(code_bytes) != DEGRADATION_SECRET_BYTES + DEGRADATION_MAC_BYTES:
        raise ValueError("a degradation code holds 15 bytes")
    text = base32_encode(code_bytes)
    return "-".join(text[i:i + DEGRADATION_GROUP] for i in range(0, len(text), DEGRADATION_GROUP))


def degradation_code(seed: bytes, pid_d: bytes, secret: bytes) -> str:
    """The code D's device shows to C for the interim device secret r (10.2)."""
    return format_degradation_code(secret + degradation_mac(seed, pid_d, secret))


def parse_degradation_code(text: str) -> bytes:
    """A typed degradation code: any (ASCII) case, with or without spaces (U+0020) and '-',
    which are ignored wherever they are; then exactly 24 base-32 characters.  Returns the
    15 bytes r || m; a text of the wrong form raises TypingError (it does not count)."""
    if not isinstance(text, str):
        raise TypingError("a degradation code is a str")
    compact = text.replace(" ", "").replace("-", "")
    # ASCII first: str.upper() would map e.g. U+0131 to 'I' and U+017F to 'S'.
    if not compact.isascii():
        raise TypingError("a degradation code is ASCII")
    if len(compact) != DEGRADATION_CODE_CHARS:
        raise TypingError("a degradation code has 24 characters")
    try:
        return base32_decode(compact.upper())
    except ProtocolError as exc:
        raise TypingError(str(exc)) from exc


def check_degradation_code(seed: bytes, pid_d: bytes, text: str) -> bytes | None:
    """C's side of 10.2: parse (TypingError on the wrong form, not counted), recompute m for
    pid(D) and r and compare it in constant time.  Returns r for a right code (to store as D's
    device secret), None for a wrong one (a failure for the attempt limiter)."""
    raw = parse_degradation_code(text)
    secret, mac = raw[:DEGRADATION_SECRET_BYTES], raw[DEGRADATION_SECRET_BYTES:]
    expected = degradation_mac(seed, pid_d, secret)
    return secret if hmac.compare_digest(expected, mac) else None


def degradation_accepted_state(state: str) -> str:
    """10.2: "A right code, whatever the contact's state, [...] marks the contact degraded
    with the change acknowledged; it never restores 'verified' by itself".  "The
    acknowledgement lasts until a later session finds a wrong tag again" (session_outcome
    then gives degraded, not acknowledged)."""
    if state not in CONTACT_STATES:
        raise ValueError(f"unknown contact state {state!r}")
    return DEGRADED_ACKNOWLEDGED


LOCK_FROM_FAILURE = 5  # "the n-th failure, for n of 5 or more, locks further attempts"
FIRST_LOCK_SECONDS = 300  # "for 300 x 2^(n-5) seconds"
MAX_LOCK_SECONDS = 24 * 60 * 60  # "at most 24 hours"


def limiter_delay(failures: int) -> int:
    """10.2: the lock that the ``failures``-th counted failure sets: none for the first four,
    300 x 2^(n-5) seconds for the n-th failure from the fifth on, at most 24 hours ("so five
    wrong codes lock for 5 minutes")."""
    if failures < 0:
        raise ValueError("negative failure count")
    if failures < LOCK_FROM_FAILURE:
        return 0
    exponent = min(failures - LOCK_FROM_FAILURE, 9)  # 300 s * 2^9 already exceeds a day
    return min(FIRST_LOCK_SECONDS << exponent, MAX_LOCK_SECONDS)


class Locked(ProtocolError):
    """10.2: an attempt while the limiter locks further attempts ("while locked, a well-formed
    code is `locked` without being checked")."""
    code = "locked"


class AttemptLimiter:
    """The attempt limiter of 10.2 for one identity: a count of failures and the time until
    which further attempts are locked.  A right code resets the count; a typing error never
    reaches the limiter (it is rejected without counting).  Keeping the count across restarts
    is the store's business; this object holds what would be stored."""

    def __init__(self, failures: int = 0, locked_until: int | None = None):
        self.failures = failures
        self.locked_until = locked_until

    def check(self, now: int) -> None:
        """Raise Locked if an attempt at ``now`` is locked."""
        if self.locked_until is not None and now < self.locked_until:
            raise Locked(f"attempts locked for {self.locked_until - now} more seconds")

    def failure(self, now: int) -> int:
        """Count a wrong code entered at ``now``; returns the lock it sets, in seconds."""
        self.check(now)
        self.failures += 1
        delay = limiter_delay(self.failures)
        self.locked_until = now + delay if delay else None
        return delay

    def success(self, now: int) -> None:
        """A right code resets the count."""
        self.check(now)
        self.failures = 0
        self.locked_until = None


def attempt_degradation_code(limiter: AttemptLimiter, now: int, seed: bytes, pid_d: bytes,
                             text: str, awaiting_peer: bool = False) -> bytes | None:
    """10.2 under the limiter, in the document's order: a typing error raises TypingError
    without counting, "even while the limiter is locked"; a contact awaiting the peer's
    confirmation of an exchange (8.1) is ``invalid_state`` "(after the typing check, before the
    limiter), and changes nothing"; a locked attempt with a well-formed code raises Locked
    without being checked; a wrong code counts a failure and returns None; a right code
    resets the count and returns r."""
    parse_degradation_code(text)  # TypingError propagates, uncounted, even while locked
    if awaiting_peer:
        raise InvalidState("a degradation code typed for a contact awaiting the peer (8.1)")
    limiter.check(now)
    secret = check_degradation_code(seed, pid_d, text)
    if secret is None:
        limiter.failure(now)
        return None
    limiter.success(now)
    return secret


# 10.3 Security PIN Update

PIN_UPDATE_CODE_LABEL = b"itsme-pin-update-code-v1"
PU_TH_LABEL = b"itsme-pin-update-v1"
PU_SALT_LABEL = b"itsme-pin-update-salt-v1"
PU_KEY_LABEL = b"itsme-pin-update-key-v1"
PU_CONFIRM_LABEL = b"itsme-pin-update-confirm-v1"
PU_VERSION = 1
PU_KEY, PU_NEW, PU_DONE = 1, 2, 3
PU_NEW_COUNTER, PU_DONE_COUNTER = 0, 1
PU_DEVICE_SECRET_BYTES = 16
PU_CONFIRM_BYTES = 32
PU_UPDATE_SECONDS = 600
_PU_BODY_BYTES = {
    PU_KEY: 32,
    PU_NEW: PU_DEVICE_SECRET_BYTES + PU_CONFIRM_BYTES + TAG_BYTES,  # 64
    PU_DONE: TAG_BYTES,  # ChaCha20-Poly1305 of nothing: the tag alone
}
_PU_NAMES = {PU_KEY: "KEY", PU_NEW: "NEW", PU_DONE: "DONE"}


def pin_update_code_value(seed: bytes, window: int) -> int:
    """code(W) = be64(first 8 bytes of HMAC(seed, lv_cat(label, u64(W)))) mod 260000."""
    mac = hmac_sha256(seed, pin_update_code_input(window))
    return _be64_head(mac) % SHORT_CODE_VALUES


def pin_update_code_input(window: int) -> bytes:
    """10.3: the session code's HMAC message, lv_cat('itsme-pin-update-code-v1', u64(W))."""
    return lv_cat(PIN_UPDATE_CODE_LABEL, u64_window(window))


def pin_update_code_text(seed: bytes, window: int) -> str:
    """The code as a short code (section 4): 'UNIFORM 7763'."""
    return format_short_code(pin_update_code_value(seed, window))


def pin_update_codes(seed: bytes, now: int) -> tuple[tuple[int, str], tuple[int, str]]:
    """(W, code text) in the order tried: W = window(now) first, then, by a device that finds
    no peer, W - 1.  The update uses the W of the code the two met on."""
    w = window_of(now)
    return ((w, pin_update_code_text(seed, w)), (w - 1, pin_update_code_text(seed, w - 1)))


def pu_role(my_pid: bytes, their_pid: bytes) -> str:
    """The initiator is the party with the lower pid (ordered as in section 9)."""
    low, _ = order_pids(my_pid, their_pid)
    return INITIATOR if low == my_pid else RESPONDER


def pu_frame(frame_type: int, body: bytes) -> bytes:
    """frame = u8(1) || u8(type) || body."""
    if _PU_BODY_BYTES.get(frame_type) != len(body):
        raise ValueError("PIN Update frame body of the wrong length")
    return u8(PU_VERSION) + u8(frame_type) + body


def parse_pu_frame(data: bytes, expected_type: int) -> bytes:
    """A frame of another version or type, of the wrong length, or out of order (a type other
    than the one expected now) is rejected.  Returns the body."""
    if len(data) < 2 or data[0] != PU_VERSION:
        raise ProtocolError("PIN Update frame of another version")
    if data[1] not in _PU_BODY_BYTES:
        raise ProtocolError("PIN Update frame of another type")
    if data[1] != expected_type:
        raise ProtocolError(f"{_PU_NAMES[data[1]]} out of order (expected "
                            f"{_PU_NAMES[expected_type]})")
    if len(data) - 2 != _PU_BODY_BYTES[expected_type]:
        raise ProtocolError("PIN Update frame of the wrong length")
    return data[2:]


def pu_key_frame(ephemeral_pk: bytes) -> bytes:
    """KEY: a fresh X25519 public key (32)."""
    return pu_frame(PU_KEY, ephemeral_pk)


def pu_th_input(code_text: str, window: int, pid_i: bytes, pid_r: bytes, key_i: bytes,
                key_r: bytes) -> bytes:
    """lv_cat('itsme-pin-update-v1', code_text, u64(W), pid_I, pid_R, KEY_I, KEY_R), with the
    code's canonical text (as bytes) and the two whole KEY frames."""
    return lv_cat(PU_TH_LABEL, code_text.encode("ascii"), u64_window(window), pid_i, pid_r, key_i,
                  key_r)


def pu_th(code_text: str, window: int, pid_i: bytes, pid_r: bytes, key_i: bytes,
          key_r: bytes) -> bytes:
    return sha256(pu_th_input(code_text, window, pid_i, pid_r, key_i, key_r))


def pu_salt(seed: bytes, th: bytes) -> bytes:
    """salt = HMAC(seed, lv_cat('itsme-pin-update-salt-v1', th))."""
    return hmac_sha256(seed, lv_cat(PU_SALT_LABEL, th))


def pu_session_keys(salt: bytes, shared: bytes) -> tuple[bytes, bytes]:
    """(k_I, k_R) = HKDF-Expand(prk, lv_cat(label, role), 32) of :func:`pu_prk`."""
    prk = pu_prk(salt, shared)
    return (hkdf_expand(prk, lv_cat(PU_KEY_LABEL, INITIATOR), 32),
            hkdf_expand(prk, lv_cat(PU_KEY_LABEL, RESPONDER), 32))


def pu_prk(salt: bytes, shared: bytes) -> bytes:
    """10.3: prk = HKDF-Extract(salt, X25519(my_eph_secret, their_eph))."""
    return hkdf_extract(salt, shared)


def pu_confirm(seed: bytes, role: str, th: bytes) -> bytes:
    """confirm(S) = HMAC(seed, lv_cat('itsme-pin-update-confirm-v1', role(S), th))."""
    if role not in (INITIATOR, RESPONDER):
        raise ValueError("role is 'initiator' or 'responder'")
    return hmac_sha256(seed, lv_cat(PU_CONFIRM_LABEL, role, th))


def _pu_seal(frame_type: int, key: bytes, counter: int, plaintext: bytes) -> bytes:
    header = u8(PU_VERSION) + u8(frame_type)
    return pu_frame(frame_type, ChaCha20Poly1305(key).encrypt(bt_nonce(counter), plaintext,
                                                              header))


def _pu_open(data: bytes, frame_type: int, key: bytes, counter: int) -> bytes:
    body = parse_pu_frame(data, frame_type)
    try:
        return ChaCha20Poly1305(key).decrypt(bt_nonce(counter), body, data[:2])
    except InvalidTag as exc:
        raise ProtocolError(f"{_PU_NAMES[frame_type]} does not decrypt") from exc


def new_frame(key: bytes, new_device_secret: bytes, confirmation: bytes) -> bytes:
    """NEW: ChaCha20-Poly1305 under the sender's role key, counter 0, associated data the two
    header bytes, of the new device secret (16) || confirmation (32)."""
    if len(new_device_secret) != PU_DEVICE_SECRET_BYTES or len(confirmation) != PU_CONFIRM_BYTES:
        raise ValueError("a new device secret is 16 bytes, a confirmation 32")
    return _pu_seal(PU_NEW, key, PU_NEW_COUNTER, new_device_secret + confirmation)


def open_new(data: bytes, key: bytes) -> tuple[bytes, bytes]:
    """Decrypt a NEW with the sender's role key: (new device secret, confirmation)."""
    plain = _pu_open(data, PU_NEW, key, PU_NEW_COUNTER)
    return plain[:PU_DEVICE_SECRET_BYTES], plain[PU_DEVICE_SECRET_BYTES:]


def done_frame(key: bytes) -> bytes:
    """DONE: ChaCha20-Poly1305 (counter 1) of nothing, under the initiator's key."""
    return _pu_seal(PU_DONE, key, PU_DONE_COUNTER, b"")


def open_done(data: bytes, key: bytes) -> None:
    if _pu_open(data, PU_DONE, key, PU_DONE_COUNTER) != b"":  # cannot happen: 16-byte body
        raise ProtocolError("DONE carries data")


def pu_expired(created_at: int, now: int) -> bool:
    """"An update expires more than 600 seconds after its creation": at created_at + 600 it
    has not expired yet, one second later it has."""
    return now - created_at > PU_UPDATE_SECONDS


# The per-contact record of 10.1 and 10.3 -------------------------------------------------------

HEARD_CURRENT = "current"  # the tag of the peer's current secret
HEARD_NEW = "new"  # the tag of the peer's pending new secret (10.3)
HEARD_PREVIOUS = "previous"  # the tag of the peer's previous new secret (10.3)
HEARD_OTHER = "other"  # none of the accepted secrets, a current one held: their device changed
HEARD_UNCHECKED = "unchecked"  # no current secret stored, and no pending or previous one matched
HEARD_CLASSES = (HEARD_CURRENT, HEARD_NEW, HEARD_PREVIOUS, HEARD_OTHER, HEARD_UNCHECKED)


def read_heard_tag(current: bool, pending: bool, previous: bool, holds_current: bool) -> str:
    """10.3 on one heard tag, given which of the accepted secrets give it (``current``,
    ``pending``, ``previous``: True where that secret is held and gives the heard tag) and
    whether the listener holds a current secret for the peer at all.

    "When several secrets give the heard tag (1 in 100 for voice tags), the current one wins,
    then the previous one, then the pending one".  "A listener that holds no current secret
    for the peer accepts a match with a pending or previous one and otherwise reports the tag
    as not checked (never "their device changed")"."""
    if current:
        return HEARD_CURRENT
    if previous:
        return HEARD_PREVIOUS
    if pending:
        return HEARD_NEW
    return HEARD_OTHER if holds_current else HEARD_UNCHECKED


@dataclass
class ContactSecrets:
    """What one side keeps for one contact (10.1, 10.3): its current secrets (``mine``, the
    device secret this side gave the contact; ``theirs``, the one the contact gave it; None on
    a device that holds none), the contact state and, during a Security PIN Update, the new
    pair as *pending* with the flag saying whether this side has *committed*, and possibly
    the peer's *previous* new secret, from an earlier update that was interrupted."""
    mine: bytes | None
    theirs: bytes | None
    state: str = UNVERIFIED
    pending: tuple[bytes, bytes] | None = None  # (my new secret, their new secret)
    committed: bool = False
    previous: bytes | None = None  # the peer's new secret from an earlier, unresolved update

    def says(self) -> bytes | None:
        """10.3: "a side says its new secret once committed and its old one before"."""
        if self.pending is not None and self.committed:
            return self.pending[0]
        return self.mine

    def accepts(self) -> tuple[bytes | None, bytes | None, bytes | None]:
        """10.3: "as a listener it accepts the peer's current secret, the pending new one, or
        the previous new one": (current, pending new, previous new), None where there is none.
        Device secrets are never empty (8.3, 10.2), so an empty one is read as none."""
        return (self.theirs or None,
                (self.pending[1] or None) if self.pending is not None else None,
                self.previous or None)

    def shows(self) -> bytes | None:
        """10.3, "What a listener shows": "the tag of the peer's pending new secret once this
        side has committed [...], else the tag of the peer's current secret; no tag when the
        listener holds neither".  Returns that secret (None: no tag).  A side that committed
        but holds no pending secret of the peer shows the current one's ("also when this side
        committed but holds no pending secret of the peer"); one that holds the pending one and
        no current one shows the pending one's once committed and no tag before; one that
        holds only a previous one shows no tag."""
        if self.committed and self.pending is not None and self.pending[1]:
            return self.pending[1]
        return self.theirs or None

    def classify(self, matches: Callable[[bytes], bool]) -> str:
        """Which of the accepted secrets a heard tag is (``matches(secret)`` tells whether the
        heard tag is the one of ``secret``), by the order of 10.3 (see ``read_heard_tag``):
        the current secret, then the previous new one, then the pending new one; a tag of none
        of them is HEARD_OTHER ("their device changed") when a current secret is held, and
        HEARD_UNCHECKED when none is."""
        current, new, previous = self.accepts()
        return read_heard_tag(bool(current) and matches(current), bool(new) and matches(new),
                              bool(previous) and matches(previous), bool(current))

    def store_pending(self, my_new: bytes, their_new: bytes, committed: bool) -> None:
        """10.3 steps 1 (responder: not committed) and 2 (initiator: committed and verified).

        "Storing a new pending pair while an earlier update is unresolved must not lose a
        secret either side may be saying: the side's current secret becomes the one it says
        now (its earlier new secret if it had committed), and the peer's earlier pending new
        secret becomes the previous one (or the previous one is kept if nothing was
        pending)."  The peer's current secret is kept as it is."""
        if self.pending is not None:
            self.mine = self.says()
            self.previous = self.pending[1]
        self.pending = (my_new, their_new)
        self.committed = committed
        if committed:
            self.state = VERIFIED

    def commit(self) -> None:
        """10.3 step 3: the responder, on DONE, commits and marks the contact verified."""
        if self.pending is None:
            raise ProtocolError("nothing pending to commit")
        self.committed = True
        self.state = VERIFIED

    def complete(self) -> None:
        """"Hearing the peer's pending new secret completes the update on that side: the new
        pair replaces the old, nothing is pending or previous, and the contact is verified"."""
        if self.pending is None:
            raise ProtocolError("nothing pending to complete")
        self.mine, self.theirs = self.pending
        self.pending = None
        self.committed = False
        self.previous = None
        self.state = VERIFIED

    def adopt_previous(self) -> None:
        """"Hearing the previous new secret makes it the peer's current one and empties the
        previous slot (the pending pair and the committed flag stay)"; nothing else of the
        record moves.  (``record`` marks the contact verified.)"""
        if self.previous is None:
            raise ProtocolError("no previous new secret to adopt")
        self.theirs = self.previous
        self.previous = None

    def issue_degradation(self, r: bytes) -> None:
        """10.2, D's device issuing a code: it draws `r` and stores it as its own device secret
        for the contact.  "Issuing or accepting a code ends, on that device, any Security PIN
        Update still pending with the contact (10.3): the device secrets become the pair it
        writes, with nothing pending or previous and the committed flag cleared.  Issuing
        writes `r` and the peer's current secret".  Not refused for a contact awaiting the
        peer (the state is the exchange's, 8.1, and is not changed here)."""
        if len(r) != DEGRADATION_SECRET_BYTES:
            raise ValueError("r is 10 bytes")
        self.mine = r
        self.pending, self.previous, self.committed = None, None, False

    def accept_degradation(self, r: bytes) -> None:
        """10.2, C's device on a right code: "accepting writes `r` as the peer's and, as this
        device's own, its current secret, the one from before the update even if it had
        committed and was saying the new one", with nothing pending or previous and the
        committed flag cleared; the contact is degraded with the change acknowledged."""
        if len(r) != DEGRADATION_SECRET_BYTES:
            raise ValueError("r is 10 bytes")
        self.theirs = r
        self.pending, self.previous, self.committed = None, None, False
        self.state = degradation_accepted_state(self.state)

    def replace_by_exchange(self, mine: bytes, theirs: bytes) -> None:
        """8.2, a stored contact exchanged again and confirmed: "pending and previous secrets
        of a Security PIN Update (10.3) are dropped, the exchange's two device secrets
        replacing all of them", and the contact "becomes verified whatever its state was"."""
        self.mine, self.theirs = mine, theirs
        self.pending, self.previous, self.committed = None, None, False
        self.state = VERIFIED

    def record(self, code_matches: bool, heard: str, *, voice_tag: bool = False) -> str:
        """Record a session's outcome (10.1): ``heard`` is what ``classify`` gave for the
        peer's tag, ``voice_tag`` whether it was a two-digit voice tag (False: an Online
        Verify device tag of 32 bytes).  Returns the outcome."""
        if heard not in HEARD_CLASSES:
            raise ValueError(f"not a heard-tag class: {heard!r}")
        if not code_matches:
            return FAILED  # "differs | any": unchanged
        # 10.3: a listener that holds no current secret "accepts a match with a pending or
        # previous one"; "a voice tag then changes none of its stored device secrets (the
        # contact's state still follows the table of 10.1): only an Online Verify device
        # tag (32 bytes) completes or adopts there".
        if voice_tag and heard in (HEARD_NEW, HEARD_PREVIOUS) and not self.theirs:
            outcome, self.state = session_outcome(True, True, self.state)
            return outcome
        # 10.1: "A degraded contact returns to verified only through a Security PIN Update in
        # person (10.3), or by a tag that matches the peer's new secret from one."  10.3: the
        # pending new secret "completes the update on that side: ... the contact is
        # verified"; the previous one "makes it the peer's current one (the pending pair
        # stays) and marks the contact verified, since it too came from an update done in
        # person".
        if heard == HEARD_NEW:
            self.complete()
            return VERIFIED
        if heard == HEARD_PREVIOUS:
            self.adopt_previous()
            self.state = VERIFIED
            return VERIFIED
        # The current secret, a tag of none (a current secret held), or not checked: the table.
        tag_matches = {HEARD_CURRENT: True, HEARD_OTHER: False, HEARD_UNCHECKED: None}[heard]
        outcome, self.state = session_outcome(True, tag_matches, self.state)
        return outcome

    def hear_voice_tag(self, seed: bytes, window: int, their_pid: bytes, heard_tag: int,
                       code_matches: bool = True) -> str:
        """A voice session (9, 10.1): the peer's code was heard (``code_matches``) and its
        two-digit tag ``heard_tag``.  Returns the outcome and records it.  A tag outside 0 to
        99 is a typing error and records nothing (9.6)."""
        if isinstance(heard_tag, bool) or not isinstance(heard_tag, int) \
                or not 0 <= heard_tag < DEVICE_TAG_VALUES:
            raise TypingError(f"a heard tag outside 0 to 99: {heard_tag!r}")
        t = tag_key(seed)
        heard = self.classify(lambda s: device_tag(t, their_pid, window, s) == heard_tag)
        return self.record(code_matches, heard, voice_tag=True)


def voice_tag_said(seed: bytes, window: int, my_pid: bytes, contact: ContactSecrets) -> int:
    """The tag a side says (10.1 with 10.3): of its new secret once committed, else its old."""
    return device_tag(tag_key(seed), my_pid, window, contact.says())


@dataclass(frozen=True)
class PinUpdateResult:
    """What one side of a Security PIN Update holds once its last frame is handled."""
    role: str
    window: int
    code_text: str
    key_i: bytes
    key_r: bytes
    th_input: bytes
    th: bytes
    salt: bytes
    shared: bytes
    k_i: bytes
    k_r: bytes
    confirm_i: bytes
    confirm_r: bytes
    new_i: bytes
    new_r: bytes
    done: bytes
    my_new_secret: bytes
    their_new_secret: bytes


class PinUpdateSession:
    """One side of a Security PIN Update (10.3), from the seed, the window W of the code the
    two met on, both pids, a fresh ephemeral secret, this side's new device secret and the
    record it keeps for the contact (``ContactSecrets``, changed in the commit order of 10.3).

    ``start()`` returns this side's KEY; ``receive(frame)`` checks a frame from the peer and
    returns the frames to send in reply.  The first failed check raises ProtocolError and
    ends the update as failed (every later call raises too); what the commit order already
    stored stays stored.  ``result`` is set once this side is done (the initiator after
    sending DONE, the responder after receiving it); a done side refuses every further frame
    (ProtocolError) "without changing anything": it stays done, not failed, and the record is
    untouched.  ``code_text`` ("the session code's canonical text, 'ECHO 0042'") defaults to
    code(W) from the seed; it is a parameter only so that tests can build a peer without the
    seed, and a typed form of it is read as its canonical text (section 4)."""

    def __init__(self, seed: bytes, window: int, my_pid: bytes, their_pid: bytes,
                 ephemeral_secret: bytes, new_device_secret: bytes,
                 contact: ContactSecrets | None = None, created_at: int | None = None,
                 code_text: str | None = None):
        if len(seed) != 32 or len(ephemeral_secret) != 32:
            raise ValueError("seed and ephemeral secret are 32 bytes")
        if len(new_device_secret) != PU_DEVICE_SECRET_BYTES:
            raise ValueError("a new device secret is 16 bytes")
        u64_window(window)  # 9.1: a window given is 0 to 2^63 - 1 (see check_session_window)
        self.seed = seed
        self.window = window
        self.my_pid = my_pid
        self.their_pid = their_pid
        self.role = pu_role(my_pid, their_pid)
        self.peer_role = RESPONDER if self.role == INITIATOR else INITIATOR
        self.code_text = (pin_update_code_text(seed, window) if code_text is None
                          else format_short_code(parse_short_code(code_text)))
        self.ephemeral_secret = ephemeral_secret
        self.ephemeral_pk = x25519_public(ephemeral_secret)
        self.new_device_secret = new_device_secret
        self.contact = contact if contact is not None else ContactSecrets(None, None)
        self.created_at = created_at
        self.key_frame = pu_key_frame(self.ephemeral_pk)
        self.result: PinUpdateResult | None = None
        self.failed = False
        self._started = False
        self._expect = PU_KEY
        self._d: dict = {}

    @property
    def done(self) -> bool:
        return self.result is not None

    def start(self) -> list[bytes]:
        """Both send KEY at once."""
        if self._started or self.failed:
            raise ProtocolError("update already started")
        self._started = True
        return [self.key_frame]

    def receive(self, data: bytes, now: int | None = None) -> list[bytes]:
        if self.failed:
            raise ProtocolError("the update has failed")
        if self.done:
            # "once a side is done (the initiator after sending DONE, the responder after
            # receiving it) further frames are refused without changing anything".
            raise ProtocolError("frame after this side is done: refused")
        try:
            if not self._started:
                raise ProtocolError("frame before the update started")
            if now is not None and self.created_at is not None and pu_expired(self.created_at,
                                                                              now):
                raise ProtocolError("the update has expired")
            return self._receive(data)
        except ProtocolError:
            self.failed = True
            raise

    def _receive(self, data: bytes) -> list[bytes]:
        body = parse_pu_frame(data, self._expect)
        if self._expect == PU_KEY:
            if data == self.key_frame:
                raise ProtocolError("the peer's KEY is our own (reflected)")
            shared = x25519_shared(self.ephemeral_secret, body)
            self._derive(data, shared)
            self._expect = PU_NEW
            if self.role == INITIATOR:  # "initiator once it has both KEYs"
                self._d["new_i"] = new_frame(self._d["k_i"], self.new_device_secret,
                                             self._d["confirm_i"])
                return [self._d["new_i"]]
            return []
        if self._expect == PU_NEW:
            d = self._d
            peer_key = d["k_r"] if self.role == INITIATOR else d["k_i"]
            their_new, confirmation = open_new(data, peer_key)
            expected = d["confirm_r"] if self.role == INITIATOR else d["confirm_i"]
            if not hmac.compare_digest(confirmation, expected):
                raise ProtocolError("the peer's confirmation is wrong")
            self._their_new = their_new
            if self.role == INITIATOR:
                d["new_r"] = data
                # Step 2: pending and committed, verified, and then DONE.
                self.contact.store_pending(self.new_device_secret, their_new, committed=True)
                d["done"] = done_frame(d["k_i"])
                self._finish()
                return [d["done"]]
            d["new_i"] = data
            # Step 1: pending, not committed, and only then its own NEW.
            self.contact.store_pending(self.new_device_secret, their_new, committed=False)
            d["new_r"] = new_frame(d["k_r"], self.new_device_secret, d["confirm_r"])
            self._expect = PU_DONE
            return [d["new_r"]]
        # DONE, at the responder
        open_done(data, self._d["k_i"])
        self._d["done"] = data
        self.contact.commit()  # step 3
        self._finish()
        return []

    def _derive(self, peer_key_frame: bytes, shared: bytes) -> None:
        if self.role == INITIATOR:
            pid_i, pid_r, key_i, key_r = self.my_pid, self.their_pid, self.key_frame, peer_key_frame
        else:
            pid_i, pid_r, key_i, key_r = self.their_pid, self.my_pid, peer_key_frame, self.key_frame
        th_input = pu_th_input(self.code_text, self.window, pid_i, pid_r, key_i, key_r)
        th = sha256(th_input)
        salt = pu_salt(self.seed, th)
        k_i, k_r = pu_session_keys(salt, shared)
        self._d = dict(key_i=key_i, key_r=key_r, th_input=th_input, th=th, salt=salt,
                       shared=shared, k_i=k_i, k_r=k_r,
                       confirm_i=pu_confirm(self.seed, INITIATOR, th),
                       confirm_r=pu_confirm(self.seed, RESPONDER, th))

    def _finish(self) -> None:
        d = self._d
        self.result = PinUpdateResult(
            role=self.role, window=self.window, code_text=self.code_text, key_i=d["key_i"],
            key_r=d["key_r"], th_input=d["th_input"], th=d["th"], salt=d["salt"],
            shared=d["shared"], k_i=d["k_i"], k_r=d["k_r"], confirm_i=d["confirm_i"],
            confirm_r=d["confirm_r"], new_i=d["new_i"], new_r=d["new_r"], done=d["done"],
            my_new_secret=self.new_device_secret, their_new_secret=self._their_new)


# --------------------------------------------------------------------------------------------
# Sections 9 and 10 from one device's side
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class VoiceView:
    """What one device derives before the selections: it knows both ids (9)."""
    seed: bytes
    window: int
    my_pid: bytes
    their_pid: bytes
    session_id_value: int
    session_id_text: str
    my_words: WordDraw
    their_words: WordDraw  # needed to check the listener's entry (9.5)
    i_select_first: bool
    binding: bytes | None = None  # cb of a session bound to a call (9.7); None: not bound

    @property
    def bound(self) -> bool:
        return self.binding is not None

    @property
    def session_id_shown(self) -> str:
        """The session ID as the screen shows it, with the mark of a bound session (9.7)."""
        return session_id_shown(self.session_id_text, self.bound)


def voice_view(seed: bytes, window: int, my_pid: bytes, their_pid: bytes,
               binding: bytes | None = None) -> VoiceView:
    """9.2 to 9.4 from one device's side; ``binding``: the call binding cb of a session
    planned bound (9.7, 16 to 64 bytes, else invalid_argument).  Words and the first selector
    do not depend on it."""
    cb = check_call_binding(binding)
    first, _ = first_and_second(seed, window, my_pid, their_pid)
    sid = session_id_value(seed, window, cb)
    return VoiceView(seed, window, my_pid, their_pid, sid, format_session_id(sid),
                     draw_words(seed, window, my_pid), draw_words(seed, window, their_pid),
                     first == my_pid, cb)


@dataclass(frozen=True)
class VoiceCodes:
    info: bytes
    key: bytes
    my_code: int  # "Your Code", read aloud
    their_code: int  # "Their Code", expected from the other person


def voice_codes(view: VoiceView, w1: int, w2: int) -> VoiceCodes:
    """9.5 checks and 9.6 codes; w1 is the first selector's word, w2 the second's."""
    if view.i_select_first:
        first, second = view.my_pid, view.their_pid
        check_selection(w1, view.my_words.words)
        check_selection(w2, view.their_words.words)
    else:
        first, second = view.their_pid, view.my_pid
        check_selection(w1, view.their_words.words)
        check_selection(w2, view.my_words.words)
    info = code_info(first, w1, second, w2, view.binding)
    key = hkdf(view.seed, u64(view.window), info, 32)
    return VoiceCodes(info, key, code_value(key, view.my_pid), code_value(key, view.their_pid))


def voice_tags(view: VoiceView, my_device_secret: bytes | None,
               their_device_secret: bytes | None) -> tuple[int, int | None]:
    """(my tag, the tag expected from the other person), 10.1.  Without a device secret of my
    own I say the tag of the empty string; without one for the other person I check no tag
    (None)."""
    t = tag_key(view.seed)
    return (device_tag(t, view.my_pid, view.window, my_device_secret),
            expected_device_tag(t, view.their_pid, view.window, their_device_secret))


# --------------------------------------------------------------------------------------------
# Section 11: Online Verify
# --------------------------------------------------------------------------------------------

# 11.1 The room

ROOM_LABEL = b"itsme-room-id-v1"
ROOM_BYTES = 16


def room_id(seed: bytes, window: int) -> bytes:
    """room(W) = first 16 bytes of HMAC(seed, lv_cat('itsme-room-id-v1', u64(W)))."""
    return hmac_sha256(seed, room_input(window))[:ROOM_BYTES]


def room_input(window: int) -> bytes:
    """11.1: the room ID's HMAC message, lv_cat('itsme-room-id-v1', u64(W))."""
    return lv_cat(ROOM_LABEL, u64_window(window))


def room_name(room: bytes) -> str:
    """The room's name on the relay: its lowercase hex (32 characters)."""
    if len(room) != ROOM_BYTES:
        raise ValueError("a room ID is 16 bytes")
    return room.hex()


def rooms_to_join(seed: bytes, now: int) -> tuple[tuple[int, str], tuple[int, str]]:
    """11.1: (window, room name) in the order tried: room(window(now)) first, then, if no peer
    is found there, room(window(now) - 1).  The session uses the window of the room where the
    two met."""
    w = window_of(now)
    return ((w, room_name(room_id(seed, w))), (w - 1, room_name(room_id(seed, w - 1))))


# 11.2 Messages

OV_VERSION = 1
OV_COMMIT, OV_KEY, OV_PROOF = 1, 2, 3
OV_COMMIT_LABEL = b"itsme-ov-commit-v1"
OV_EPHEMERAL_BYTES = 32
OV_CHALLENGE_BYTES = 32
OV_KEY_BODY_BYTES = OV_EPHEMERAL_BYTES + OV_CHALLENGE_BYTES  # eph || chal
# 11.4: a session bound to a call appends bind (32 bytes) to its KEY: 98 bytes, not 66.
OV_BIND_BYTES = 32
OV_PROOF_PLAINTEXT_BYTES = 32 + 32  # proof || device tag
# 11.3 "A profile reference in the PROOF": the reference of 18.3, record_id (16) || record_key
# (16), may follow the device tag; the plaintext is then 96 bytes.
OV_REFERENCE_BYTES = 32
OV_PROOF_WITH_REFERENCE_PLAINTEXT_BYTES = OV_PROOF_PLAINTEXT_BYTES + OV_REFERENCE_BYTES
# The body lengths each type may have; ChaCha20-Poly1305 adds its 16-byte tag to a PROOF's
# plaintext: 80 or 112 bytes ("A PROOF of any other length is malformed").
_OV_BODY_LENGTHS = {
    OV_COMMIT: (32,),
    OV_KEY: (OV_KEY_BODY_BYTES, OV_KEY_BODY_BYTES + OV_BIND_BYTES),
    OV_PROOF: (OV_PROOF_PLAINTEXT_BYTES + TAG_BYTES,
               OV_PROOF_WITH_REFERENCE_PLAINTEXT_BYTES + TAG_BYTES),
}
_OV_NAMES = {OV_COMMIT: "COMMIT", OV_KEY: "KEY", OV_PROOF: "PROOF"}


def ov_message(message_type: int, body: bytes) -> bytes:
    """message = u8(1) || u8(type) || body."""
    if len(body) not in _OV_BODY_LENGTHS.get(message_type, ()):
        raise ValueError("Online Verify message body of the wrong length")
    return u8(OV_VERSION) + u8(message_type) + body


def parse_ov_message(message: bytes, expected_type: int) -> bytes:
    """11.2: a message of another version or type, of the wrong length, or out of order (a
    type other than the one expected now) is rejected, ``malformed_message`` each.  Returns
    the body."""
    if len(message) < 2 or message[0] != OV_VERSION:
        raise MalformedMessage("Online Verify message of another version")
    if message[1] not in _OV_BODY_LENGTHS:
        raise MalformedMessage("Online Verify message of another type")
    if message[1] != expected_type:
        raise MalformedMessage(f"{_OV_NAMES[message[1]]} out of order "
                               f"(expected {_OV_NAMES[expected_type]})")
    if len(message) - 2 not in _OV_BODY_LENGTHS[expected_type]:
        raise MalformedMessage("Online Verify message of the wrong length")
    return message[2:]


def ov_commitment(ephemeral_pk: bytes, challenge: bytes) -> bytes:
    """The COMMIT body: SHA-256(lv_cat('itsme-ov-commit-v1', eph_I, chal_I))."""
    return sha256(lv_cat(OV_COMMIT_LABEL, ephemeral_pk, challenge))


def commit_message(ephemeral_pk: bytes, challenge: bytes) -> bytes:
    return ov_message(OV_COMMIT, ov_commitment(ephemeral_pk, challenge))


def ov_key_message(ephemeral_pk: bytes, challenge: bytes, bind: bytes | None = None) -> bytes:
    """KEY: eph (32) || chal (32) [|| bind (32), 11.4: a session bound to a call]."""
    if bind is not None and len(bind) != OV_BIND_BYTES:
        raise ValueError("bind is 32 bytes")
    return ov_message(OV_KEY, ephemeral_pk + challenge + (b"" if bind is None else bind))


def ov_key_bind(key_message: bytes) -> bytes | None:
    """11.4: the bind a KEY carries (its last 32 bytes when it is 98 bytes long: "the length is
    the flag b"), or None for a KEY of 66 bytes (an unbound session)."""
    body = key_message[2:]
    return body[OV_KEY_BODY_BYTES:] or None


def ov_role(my_pid: bytes, their_pid: bytes) -> str:
    """11.2: the initiator is the party with the lower pid (ordered as in section 9)."""
    low, _ = order_pids(my_pid, their_pid)
    return INITIATOR if low == my_pid else RESPONDER


def check_ov_key(body: bytes, own_ephemeral_pk: bytes, own_challenge: bytes,
                 commitment: bytes | None, own_ephemeral_secret: bytes) -> tuple[bytes, bytes,
                                                                                   bytes]:
    """11.2, "Checks on a KEY, in this order (section 1.1)": for the responder (``commitment``
    given) the initiator's KEY opens its COMMIT, compared in constant time, else
    ``authentication_failed``; neither the peer's eph nor its chal equals one's own (a
    reflected message), else ``invalid_key``; the X25519 shared secret is not all zero, else
    ``invalid_key``.  Returns (eph, chal, shared).  11.4: "A receiver checks a KEY as 11.2
    says, whatever its length": a bind after eph and chal is not looked at here (the COMMIT
    covers eph_I and chal_I only)."""
    eph = body[:OV_EPHEMERAL_BYTES]
    chal = body[OV_EPHEMERAL_BYTES:OV_KEY_BODY_BYTES]
    if commitment is not None and not hmac.compare_digest(ov_commitment(eph, chal), commitment):
        raise AuthenticationFailed("the initiator's KEY does not open its COMMIT")
    if eph == own_ephemeral_pk or chal == own_challenge:
        raise InvalidKey("KEY carries our own ephemeral key or challenge (reflected)")
    return eph, chal, x25519_shared(own_ephemeral_secret, eph)


# 11.3 Keys, proofs, tags

OV_TH_LABEL = b"itsme-online-verify-v1"
OV_SALT_LABEL = b"itsme-ov-salt-v1"
OV_KEY_LABEL = b"itsme-ov-key-v1"
OV_PROOF_LABEL = b"itsme-ov-proof-v1"
OV_DEVICE_LABEL = b"itsme-ov-device-v1"
OV_PROOF_COUNTER = 0
OV_SESSION_SECONDS = 10 * 60


def ov_th_input(room: bytes, window: int, pid_i: bytes, pid_r: bytes, commit: bytes,
                key_r: bytes, key_i: bytes) -> bytes:
    """lv_cat('itsme-online-verify-v1', room(W), u64(W), pid_I, pid_R, COMMIT, KEY_R, KEY_I),
    with the room's 16 bytes and the three whole messages."""
    return lv_cat(OV_TH_LABEL, room, u64_window(window), pid_i, pid_r, commit, key_r, key_i)


def ov_th(room: bytes, window: int, pid_i: bytes, pid_r: bytes, commit: bytes, key_r: bytes,
          key_i: bytes) -> bytes:
    return sha256(ov_th_input(room, window, pid_i, pid_r, commit, key_r, key_i))


def ov_salt(seed: bytes, th: bytes) -> bytes:
    """salt = HMAC(seed, lv_cat('itsme-ov-salt-v1', th))."""
    return hmac_sha256(seed, lv_cat(OV_SALT_LABEL, th))


def ov_session_keys(salt: bytes, shared: bytes) -> tuple[bytes, bytes]:
    """(k_I, k_R) = HKDF-Expand(prk, lv_cat(label, role), 32) of :func:`ov_prk`."""
    prk = ov_prk(salt, shared)
    return (hkdf_expand(prk, lv_cat(OV_KEY_LABEL, INITIATOR), 32),
            hkdf_expand(prk, lv_cat(OV_KEY_LABEL, RESPONDER), 32))


def ov_prk(salt: bytes, shared: bytes) -> bytes:
    """11.3: prk = HKDF-Extract(salt, shared)."""
    return hkdf_extract(salt, shared)


def ov_proof(seed: bytes, role: str, th: bytes) -> bytes:
    """proof(S) = HMAC(seed, lv_cat('itsme-ov-proof-v1', role(S), th))."""
    if role not in (INITIATOR, RESPONDER):
        raise ValueError("role is 'initiator' or 'responder'")
    return hmac_sha256(seed, lv_cat(OV_PROOF_LABEL, role, th))


def ov_device_tag(key: bytes, pid: bytes, th: bytes, device_secret: bytes | None) -> bytes:
    """dtag(S) = HMAC(T, lv_cat('itsme-ov-device-v1', pid(S), th, device_secret(S))), T of
    10.1 (tag_key).  device_secret(S) is read as in 10.1: the empty string on a device that
    holds none (None or b"")."""
    secret = b"" if device_secret is None else device_secret
    return hmac_sha256(key, lv_cat(OV_DEVICE_LABEL, pid, th, secret))


def seal_proof(key: bytes, proof: bytes, dtag: bytes, reference: bytes | None = None) -> bytes:
    """PROOF: ChaCha20-Poly1305 under the sender's role key, nonce 00 00 00 00 || u64(0),
    associated data the two header bytes, of proof (32) || device tag (32) [|| reference (32)]
    (11.3: a device may append the reference of its current profile record, 18.3)."""
    if len(proof) != 32 or len(dtag) != 32:
        raise ValueError("proof and device tag are 32 bytes each")
    if reference is not None and len(reference) != OV_REFERENCE_BYTES:
        raise ValueError("a profile reference is 32 bytes")
    header = u8(OV_VERSION) + u8(OV_PROOF)
    plain = proof + dtag + (b"" if reference is None else reference)
    body = ChaCha20Poly1305(key).encrypt(bt_nonce(OV_PROOF_COUNTER), plain, header)
    return ov_message(OV_PROOF, body)


def open_proof_with_reference(message: bytes, key: bytes) -> tuple[bytes, bytes, bytes | None]:
    """Decrypt a PROOF with the sender's role key; returns (proof, device tag, profile
    reference or None).  The caller reads the reference only after checking the proof and the
    device tag (11.3)."""
    body = parse_ov_message(message, OV_PROOF)
    try:
        plain = ChaCha20Poly1305(key).decrypt(bt_nonce(OV_PROOF_COUNTER), body, message[:2])
    except InvalidTag as exc:
        raise AuthenticationFailed("PROOF does not decrypt") from exc
    reference = plain[OV_PROOF_PLAINTEXT_BYTES:] or None
    return plain[:32], plain[32:OV_PROOF_PLAINTEXT_BYTES], reference


def open_proof(message: bytes, key: bytes) -> tuple[bytes, bytes]:
    """Decrypt a PROOF with the sender's role key; returns (proof, device tag), leaving out any
    profile reference (see open_proof_with_reference)."""
    proof, dtag, _ = open_proof_with_reference(message, key)
    return proof, dtag


def ov_tag_heard(received_dtag: bytes, expected_dtag: bytes | None,
                 expected_new_dtag: bytes | None = None,
                 expected_previous_dtag: bytes | None = None) -> str:
    """11.3 with 10.3: which of the device tags computed from the stored secrets the received
    one is (each compared in constant time): the peer's current secret (HEARD_CURRENT), the
    pending new one (HEARD_NEW) or the previous new one (HEARD_PREVIOUS) of a Security PIN
    Update, read in the order of 10.3 as ContactSecrets.classify reads a heard tag (current,
    then previous, then pending); none of them is HEARD_OTHER with a current secret stored
    and HEARD_UNCHECKED without one."""
    def hit(expected: bytes | None) -> bool:
        return expected is not None and hmac.compare_digest(received_dtag, expected)

    return read_heard_tag(hit(expected_dtag), hit(expected_new_dtag),
                          hit(expected_previous_dtag), expected_dtag is not None)


_HEARD_OUTCOME = {HEARD_CURRENT: VERIFIED, HEARD_NEW: VERIFIED, HEARD_PREVIOUS: VERIFIED,
                  HEARD_OTHER: VERIFIED_DEVICE_CHANGED, HEARD_UNCHECKED: VERIFIED_TAG_UNCHECKED}


def ov_tag_outcome(received_dtag: bytes, expected_dtag: bytes | None,
                   expected_new_dtag: bytes | None = None,
                   expected_previous_dtag: bytes | None = None) -> str:
    """11.3: the outcome of 10.1 the device tag gives: verified (the current secret or,
    after a PIN Update, the pending or previous new one), their device changed (a current
    secret stored, and the tag of none of them), or not checked (no current secret stored,
    and the tag of neither the pending nor the previous one)."""
    return _HEARD_OUTCOME[ov_tag_heard(received_dtag, expected_dtag, expected_new_dtag,
                                       expected_previous_dtag)]


_OUTCOME_TAG_MATCHES = {VERIFIED: True, VERIFIED_DEVICE_CHANGED: False,
                        VERIFIED_TAG_UNCHECKED: None}


def ov_confirmed_state(outcome: str, state: str) -> str:
    """11.3: "confirming records the outcome on the contact as 10.1 does" (the SAS was
    confirmed and the proof was right, so the code column reads 'matches').  For a tag of the
    peer's pending or previous new secret from a PIN Update, which moves secrets and marks
    the contact verified whatever its state, see ov_record."""
    if outcome not in _OUTCOME_TAG_MATCHES:
        raise ValueError(f"not an Online Verify outcome: {outcome!r}")
    return session_outcome(True, _OUTCOME_TAG_MATCHES[outcome], state)[1]


def ov_session_expired(created_at: int, now: int) -> bool:
    """11.3: "A session that has not ended (its messages running, or its SAS compared) expires
    more than 600 seconds after its creation": at created_at + 600 it has not expired yet, one
    second later it has.  An ended session does not expire (OnlineVerifySession.ended)."""
    return now - created_at > OV_SESSION_SECONDS


# 11.4 The call binding

OV_BINDING_LABEL = b"itsme-ov-binding-v1"
# The states a session ends in once the peer's PROOF is checked (11.4), as the vectors spell
# them: the SAS is shown, or one of the two end states, which show none.
OV_COMPARE_SAS, OV_BINDING_DIFFERS, OV_OTHER_CALL = "compare_sas", "binding_differs", "other_call"
OV_END_STATES = (OV_BINDING_DIFFERS, OV_OTHER_CALL)


def ov_bind(seed: bytes, window: int, binding: bytes) -> bytes:
    """bind = HMAC(seed, lv_cat('itsme-ov-binding-v1', u64(W), cb)), 32 bytes; cb is 16 to 64
    bytes, "another length is invalid_argument"."""
    cb = check_call_binding(binding)
    if cb is None:
        raise ValueError("an unbound session has no bind")
    return hmac_sha256(seed, lv_cat(OV_BINDING_LABEL, u64_window(window), cb))


def ov_binding_state(my_bind: bytes | None, their_bind: bytes | None) -> str:
    """11.4, once the peer's PROOF is checked: "both unbound, or both bound with equal bind
    (constant-time comparison): the SAS is shown"; "one bound and the other not: ... binding
    differs"; "both bound, bind different: ... other call"."""
    if my_bind is None and their_bind is None:
        return OV_COMPARE_SAS
    if my_bind is None or their_bind is None:
        return OV_BINDING_DIFFERS
    return OV_COMPARE_SAS if hmac.compare_digest(my_bind, their_bind) else OV_OTHER_CALL


def ov_record(contact: ContactSecrets, result: "OvResult", sas_confirmed: bool) -> str | None:
    """11.3: "confirming records the outcome on the contact as 10.1 does; rejecting the SAS,
    or a failed session, changes nothing".  With a PIN Update pending, a device tag of the
    peer's pending new secret completes it, and one of its previous new secret makes that the
    peer's current one (10.1, 10.3).  11.4: the end states "record nothing" (and show no SAS
    to confirm).  Returns the recorded outcome (None: nothing recorded)."""
    if not sas_confirmed or result is None or result.state != OV_COMPARE_SAS:
        return None
    return contact.record(True, result.peer_tag_heard)


@dataclass(frozen=True)
class OvResult:
    """What one side holds once both PROOFs are in (11.3)."""
    role: str
    room: bytes
    window: int
    commit: bytes
    key_r: bytes
    key_i: bytes
    th_input: bytes
    th: bytes
    salt: bytes
    shared: bytes
    k_i: bytes
    k_r: bytes
    proof_i: bytes
    proof_r: bytes
    dtag_i: bytes  # as sent by the initiator (its own, or received)
    dtag_r: bytes  # as sent by the responder
    expected_peer_dtag: bytes | None  # from the stored device secret; None: not checked
    expected_peer_new_dtag: bytes | None  # from the peer's new secret of a pending PIN Update
    expected_peer_previous_dtag: bytes | None  # from the peer's previous new secret (10.3)
    peer_tag_heard: str  # one of HEARD_CLASSES
    proof_message_i: bytes
    proof_message_r: bytes
    tag_outcome: str
    sas_value: int | None  # None in an end state of 11.4: "show no SAS"
    sas_text: str | None
    # 11.3: the profile references the two PROOFs carried (None: none).  The peer's is read
    # only once its proof and device tag are checked, and offered only after the SAS is
    # confirmed (OnlineVerifySession.peer_profile).
    reference_i: bytes | None = None
    reference_r: bytes | None = None
    # 11.4: the bind each KEY carried (None: that side is not bound), and the state the
    # session ended in: compare_sas, binding_differs or other_call.
    bind_i: bytes | None = None
    bind_r: bytes | None = None
    state: str = OV_COMPARE_SAS


class OnlineVerifySession:
    """One side of an Online Verify session (11.2, 11.3), from the seed, the window of the room
    where the two met, both pids, this session's ephemeral secret and challenge, this side's
    device secret for the contact and the one stored for the contact (None or b"": none), and,
    after a Security PIN Update, the contact's new secret from the pending pair and its
    previous new secret (10.3; see ``for_contact``, which takes them all from a
    ContactSecrets).

    ``start()`` returns the messages to send first (the initiator's COMMIT); ``receive(m)``
    checks a message from the peer and returns the messages to send in reply.  The first
    failed check raises ProtocolError and ends the session: every later call raises too.
    Once both PROOFs are in, ``result`` holds the transcript, the tag outcome and the SAS;
    further messages are then refused (ProtocolError) without ending the session (11.2).

    11.3, "A profile reference in the PROOF": ``profile_reference`` (or ``share_profile``,
    before this side's PROOF is made) appends this side's reference (18.3) to its PROOF;
    ``peer_profile()`` gives the peer's only after ``confirm_sas()``.

    11.4, "The call binding": ``binding`` (cb, 16 to 64 bytes, else ``invalid_argument``)
    binds the session to a call: its KEY carries bind (98 bytes).  Once the peer's PROOF is
    checked, ``state`` (and ``result.state``) is compare_sas, or one of the final end states
    binding_differs and other_call, which show no SAS (``result.sas_value`` is None), record
    nothing and offer no profile; later messages are ``invalid_state``.

    11.3, deciding and the lifetime: "A session that has not ended (its messages running, or
    its SAS compared) may be rejected at any time (the SAS differs, or the host gives up),
    which ends it; confirming is allowed only while the SAS is compared.  A session that has
    not ended expires more than 600 seconds after its creation: a message or a confirmation
    later than that is expired (checked first: before the message is read, before the state is
    looked at) and ends it as failed.  Once it has ended (confirmed, rejected, failed, or in an
    end state of 11.4), a later message, confirmation or rejection is invalid_state, at any
    time.  Confirming before the peer's PROOF is in (within the 600 seconds) is invalid_state
    and changes nothing."  ``receive`` and ``confirm_sas`` take ``now`` for that;
    ``reject_sas`` (the SAS differs, or the host gives up) ends a session not ended as
    rejected, before the PROOFs too; ``ended`` and ``state`` say where it is."""

    def __init__(self, seed: bytes, window: int, my_pid: bytes, their_pid: bytes,
                 ephemeral_secret: bytes, challenge: bytes, my_device_secret: bytes | None,
                 their_device_secret: bytes | None, created_at: int | None = None,
                 their_new_device_secret: bytes | None = None,
                 their_previous_device_secret: bytes | None = None,
                 profile_reference: bytes | None = None, binding: bytes | None = None):
        binding = check_call_binding(binding)
        if len(seed) != 32 or len(ephemeral_secret) != 32:
            raise ValueError("seed and ephemeral secret are 32 bytes")
        if len(challenge) != OV_CHALLENGE_BYTES:
            raise ValueError("a challenge is 32 bytes")
        u64_window(window)  # 9.1: a window given is 0 to 2^63 - 1 (see check_session_window)
        self.seed = seed
        self.window = window
        self.my_pid = my_pid
        self.their_pid = their_pid
        self.role = ov_role(my_pid, their_pid)
        self.peer_role = RESPONDER if self.role == INITIATOR else INITIATOR
        self.room = room_id(seed, window)
        self.ephemeral_secret = ephemeral_secret
        self.ephemeral_pk = x25519_public(ephemeral_secret)
        self.challenge = challenge
        self.my_device_secret = my_device_secret
        self.their_device_secret = their_device_secret
        self.their_new_device_secret = their_new_device_secret
        self.their_previous_device_secret = their_previous_device_secret
        self.created_at = created_at
        self.binding = binding
        self.bind = None if binding is None else ov_bind(seed, window, binding)
        self.key_message = ov_key_message(self.ephemeral_pk, challenge, self.bind)
        self.commit: bytes | None = None
        self.key_r: bytes | None = None
        self.key_i: bytes | None = None
        self.result: OvResult | None = None
        self.failed = False
        self._started = False
        self._expect = OV_KEY if self.role == INITIATOR else OV_COMMIT
        self._derived: dict | None = None
        self.profile_reference: bytes | None = None
        self.sas_confirmed = False
        self.sas_rejected = False
        if profile_reference is not None:
            self.share_profile(profile_reference)

    def share_profile(self, reference: bytes) -> None:
        """11.3: append this side's profile reference to its PROOF.  "It must decide before it
        sends its PROOF": "a reference offered later is invalid_state" (once the PROOF is made,
        or the session ended before it: failed or rejected), "one of another length than 32
        bytes invalid_argument" (the size checked first, 1.1).  Calling again replaces it."""
        if len(reference) != OV_REFERENCE_BYTES:
            raise InvalidArgument("a profile reference is 32 bytes")
        if self.ended:
            raise InvalidState(f"the session has ended ({self.state}): no PROOF to carry it")
        if self._derived is not None:
            raise InvalidState("the PROOF is made already: too late to share a profile")
        self.profile_reference = bytes(reference)

    def confirm_sas(self, now: int | None = None) -> None:
        """The person confirmed the SAS.  11.3, in this order: once the session has ended
        (confirmed, rejected, failed, or in an end state of 11.4, which shows no SAS) "a later
        ... confirmation ... is invalid_state, at any time", changing nothing.  Not ended, a
        confirmation more than 600 seconds after the session's creation "is expired (checked
        first: ... before the state is looked at) and ends it as failed", its SAS compared or
        its messages still running (nothing is recorded).  Within the 600 seconds, "Confirming
        before the peer's PROOF is in ... is invalid_state and changes nothing" (the session
        runs on); "confirming is allowed only while the SAS is compared"."""
        if self.ended:
            raise InvalidState(f"the session has ended ({self.state}): no SAS to confirm")
        if now is not None and self.created_at is not None and ov_session_expired(
                self.created_at, now):
            self.failed = True
            self.result = None
            raise Expired("the session has expired (more than 600 seconds old)")
        if not self.done:
            raise InvalidState("the peer's PROOF is not in: no SAS to confirm")
        self.sas_confirmed = True

    def reject_sas(self) -> None:
        """The person rejected the SAS, or the host gave up (11.3: "A session that has not
        ended (its messages running, or its SAS compared) may be rejected at any time (the SAS
        differs, or the host gives up), which ends it"; "rejecting the SAS ... changes
        nothing").  Taken while the session has not ended, whatever the time (11.3 expires "a
        message or a confirmation", not a rejection), before the peer's PROOF too: the session
        ends rejected, and a later message, confirmation or rejection is invalid_state.  Once
        ended (confirmed, rejected, failed, or in an end state of 11.4), a rejection is
        invalid_state, changing nothing."""
        if self.ended:
            raise InvalidState(f"the session has ended ({self.state}): nothing to reject")
        self.sas_rejected = True

    @property
    def ended(self) -> bool:
        """11.3: "Once it has ended (confirmed, rejected, failed, or in an end state of
        11.4)"."""
        return (self.failed or self.sas_confirmed or self.sas_rejected
                or (self.result is not None and self.result.state != OV_COMPARE_SAS))

    @property
    def state(self) -> str:
        """'running', 'failed', the state of 11.4 once the peer's PROOF is checked
        (compare_sas, binding_differs, other_call), 'confirmed' once the person confirmed the
        SAS, 'rejected' once the session was rejected (the SAS differs, or the host gave up
        while its messages ran)."""
        if self.failed:
            return "failed"
        if self.sas_confirmed:
            return "confirmed"
        if self.sas_rejected:
            return "rejected"
        return "running" if self.result is None else self.result.state

    def peer_profile(self) -> bytes | None:
        """11.3: the peer's profile reference, offered "only once the person has confirmed the
        SAS"; None if the peer sent none.  11.4: the end states "offer no profile"."""
        if not self.sas_confirmed:
            raise InvalidState("the SAS is not confirmed: no profile to offer")
        return self.result.reference_r if self.role == INITIATOR else self.result.reference_i

    @classmethod
    def for_contact(cls, seed: bytes, window: int, my_pid: bytes, their_pid: bytes,
                    ephemeral_secret: bytes, challenge: bytes, contact: ContactSecrets,
                    created_at: int | None = None,
                    profile_reference: bytes | None = None,
                    binding: bytes | None = None) -> "OnlineVerifySession":
        """A session whose device secrets come from the contact record: this side's tag is of
        the secret it says (10.3: the new one once committed), and the peer's tag is checked
        against every secret the record accepts (10.3: "In tags (10.1, and the device tag of
        Online Verify) ... it accepts the peer's current secret, the pending new one, or the
        previous new one")."""
        current, new, previous = contact.accepts()
        return cls(seed, window, my_pid, their_pid, ephemeral_secret, challenge,
                   contact.says(), current, created_at=created_at, their_new_device_secret=new,
                   their_previous_device_secret=previous, profile_reference=profile_reference,
                   binding=binding)

    @property
    def done(self) -> bool:
        return self.result is not None

    def start(self) -> list[bytes]:
        """The initiator sends COMMIT first; the responder sends nothing until it has one.  A
        session started already, or ended (11.3: rejected before it started), is
        invalid_state."""
        if self.ended:
            raise InvalidState(f"the session has ended ({self.state})")
        if self._started:
            raise InvalidState("session already started")
        self._started = True
        if self.role == INITIATOR:
            self.commit = commit_message(self.ephemeral_pk, self.challenge)
            return [self.commit]
        return []

    def receive(self, message: bytes, now: int | None = None) -> list[bytes]:
        # 11.3: "Once it has ended (confirmed, rejected, failed, or in an end state of 11.4), a
        # later message, confirmation or rejection is invalid_state, at any time": an ended
        # session (rejected before its PROOFs too) neither expires nor fails afterwards.  Not
        # ended, a message later than 600 seconds is expired, "checked first: before the
        # message is read, before the state is looked at" (so before start() is looked at
        # too), and ends it as failed.
        if self.ended:
            raise InvalidState(f"message after the session ended ({self.state}): refused")
        try:
            if now is not None and self.created_at is not None and ov_session_expired(
                    self.created_at, now):
                raise Expired("the session has expired (more than 600 seconds old)")
            if not self._started:
                raise InvalidState("message before the session started")
        except ProtocolError:
            self.failed = True
            self.result = None
            raise
        if self.done:
            # 11.2: "Once both PROOFs are in, further messages are refused without ending the
            # session" (the outcome and SAS stay to be confirmed); past 600 seconds the SAS
            # compared has expired (above).
            raise InvalidState("message after both PROOFs: refused")
        try:
            return self._receive(message)
        except ProtocolError:
            self.failed = True
            self.result = None
            raise

    def _receive(self, message: bytes) -> list[bytes]:
        body = parse_ov_message(message, self._expect)
        if self._expect == OV_COMMIT:  # responder
            self.commit = message
            self.key_r = self.key_message
            self._expect = OV_KEY
            return [self.key_r]
        if self._expect == OV_KEY:
            commitment = self.commit[2:] if self.role == RESPONDER else None
            _, _, shared = check_ov_key(body, self.ephemeral_pk, self.challenge, commitment,
                                        self.ephemeral_secret)
            if self.role == INITIATOR:
                self.key_r, self.key_i = message, self.key_message
            else:
                self.key_i = message
            proof_message = self._derive(shared)
            self._expect = OV_PROOF
            return [self.key_i, proof_message] if self.role == INITIATOR else [proof_message]
        return self._check_proof(message)

    def _pids(self) -> tuple[bytes, bytes]:
        if self.role == INITIATOR:
            return self.my_pid, self.their_pid
        return self.their_pid, self.my_pid

    def _derive(self, shared: bytes) -> bytes:
        pid_i, pid_r = self._pids()
        th_input = ov_th_input(self.room, self.window, pid_i, pid_r, self.commit, self.key_r,
                               self.key_i)
        th = sha256(th_input)
        salt = ov_salt(self.seed, th)
        k_i, k_r = ov_session_keys(salt, shared)
        t = tag_key(self.seed)
        my_proof = ov_proof(self.seed, self.role, th)
        my_dtag = ov_device_tag(t, self.my_pid, th, self.my_device_secret)
        my_key = k_i if self.role == INITIATOR else k_r
        proof_message = seal_proof(my_key, my_proof, my_dtag, self.profile_reference)
        expected_dtag = (ov_device_tag(t, self.their_pid, th, self.their_device_secret)
                         if self.their_device_secret else None)
        expected_new = (ov_device_tag(t, self.their_pid, th, self.their_new_device_secret)
                        if self.their_new_device_secret else None)
        expected_previous = (ov_device_tag(t, self.their_pid, th,
                                           self.their_previous_device_secret)
                             if self.their_previous_device_secret else None)
        self._derived = dict(th_input=th_input, th=th, salt=salt, shared=shared, k_i=k_i,
                             k_r=k_r, my_proof=my_proof, my_dtag=my_dtag,
                             proof_message=proof_message, expected_dtag=expected_dtag,
                             expected_new=expected_new, expected_previous=expected_previous)
        return proof_message

    def _check_proof(self, message: bytes) -> list[bytes]:
        d = self._derived
        peer_key = d["k_r"] if self.role == INITIATOR else d["k_i"]
        proof, dtag, peer_reference = open_proof_with_reference(message, peer_key)
        if not hmac.compare_digest(proof, ov_proof(self.seed, self.peer_role, d["th"])):
            raise AuthenticationFailed("the peer's proof is wrong")
        heard = ov_tag_heard(dtag, d["expected_dtag"], d["expected_new"],
                             d["expected_previous"])
        outcome = _HEARD_OUTCOME[heard]
        # 11.4: only now, the proof and then the device tag checked, are the two sessions'
        # bindings compared ("never before (until then bind could be anyone's)").
        bind_i, bind_r = ov_key_bind(self.key_i), ov_key_bind(self.key_r)
        my_bind, peer_bind = (bind_i, bind_r) if self.role == INITIATOR else (bind_r, bind_i)
        assert my_bind == self.bind
        state = ov_binding_state(my_bind, peer_bind)
        value = sas_value(self.seed, d["th"]) if state == OV_COMPARE_SAS else None
        # Only now, with the proof and the device tag checked, is the reference read.
        mine = (d["my_proof"], d["my_dtag"], d["proof_message"], self.profile_reference)
        theirs = (proof, dtag, message, peer_reference)
        (p_i, t_i, m_i, ref_i), (p_r, t_r, m_r, ref_r) = (
            (mine, theirs) if self.role == INITIATOR else (theirs, mine))
        self.result = OvResult(
            role=self.role, room=self.room, window=self.window, commit=self.commit,
            key_r=self.key_r, key_i=self.key_i, th_input=d["th_input"], th=d["th"],
            salt=d["salt"], shared=d["shared"], k_i=d["k_i"], k_r=d["k_r"], proof_i=p_i,
            proof_r=p_r, dtag_i=t_i, dtag_r=t_r, expected_peer_dtag=d["expected_dtag"],
            expected_peer_new_dtag=d["expected_new"],
            expected_peer_previous_dtag=d["expected_previous"], peer_tag_heard=heard,
            proof_message_i=m_i, proof_message_r=m_r, tag_outcome=outcome, sas_value=value,
            sas_text=None if value is None else format_short_code(value), reference_i=ref_i,
            reference_r=ref_r, bind_i=bind_i, bind_r=bind_r, state=state)
        return []


# --------------------------------------------------------------------------------------------
# Section 16: exchange at a distance (invite and real-time)
# --------------------------------------------------------------------------------------------

# 16.1 Codes

CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"  # value = position; no 0, 1, I, L, O
CODE_BASE = len(CODE_ALPHABET)  # 31
CODE_CHARS = 8
CODE_DRAWN_CHARS = 7
CODE_DRAW_BELOW = 248  # the largest multiple of 31 not above 256
CODE_CHECK_FACTOR = 4  # the inverse of 8 modulo 31
_CODE_VALUE = {c: i for i, c in enumerate(CODE_ALPHABET)}
_CODE_IGNORED = " -"


def code_check_value(values: Iterable[int]) -> int:
    """The eighth character's value from the first seven:
    v_8 = ((31 - (sum(i * v_i, i = 1..7) mod 31)) mod 31) * 4 mod 31."""
    values = list(values)
    if len(values) != CODE_DRAWN_CHARS or not all(0 <= v < CODE_BASE for v in values):
        raise ValueError("a code's check is computed from 7 values 0 to 30")
    total = sum(i * v for i, v in enumerate(values, start=1)) % CODE_BASE
    return (CODE_BASE - total) % CODE_BASE * CODE_CHECK_FACTOR % CODE_BASE


def code_sum_ok(values: Iterable[int]) -> bool:
    """sum(i * v_i, i = 1..8) = 0 (mod 31)."""
    return sum(i * v for i, v in enumerate(values, start=1)) % CODE_BASE == 0


def code_from_values(values: Iterable[int]) -> str:
    """The canonical code of 7 drawn values: their characters, then the check character."""
    values = list(values)
    return "".join(CODE_ALPHABET[v] for v in values + [code_check_value(values)])


def typed_chars(text: str, count: int, what: str, error: type = ProtocolError) -> list[str]:
    """16.1 (and 17.1's generated passwords): characters typed in any case (ASCII), spaces
    and '-' ignored; any other character outside the alphabet, or a count other than
    `count`, is refused with `error`.  Returns the upper-case characters."""
    if not isinstance(text, str):
        raise error(f"{what} is text")
    chars = []
    for c in text:
        if c in _CODE_IGNORED:
            continue
        if not c.isascii():  # str.upper() maps some non-ASCII letters to ASCII ones
            raise error(f"character {c!r} outside the alphabet of {what}")
        u = c.upper()
        if u not in _CODE_VALUE:
            raise error(f"character {c!r} outside the alphabet of {what}")
        chars.append(u)
    if len(chars) != count:
        raise error(f"{what} has {count} characters, not {len(chars)}")
    return chars


def parse_code(text: str) -> str:
    """16.1: a typed code read case-insensitively (ASCII), spaces and '-' ignored; any other
    character, a count other than 8, or a failed check is refused.  Returns the canonical
    form: the 8 upper-case characters without separator."""
    chars = typed_chars(text, CODE_CHARS, "a code", InvalidArgument)
    if not code_sum_ok(_CODE_VALUE[c] for c in chars):
        raise InvalidArgument("the code's check character does not match")
    return "".join(chars)


def format_code(canonical: str) -> str:
    """How a code is shown: two groups of four, 'K7X2-M9PM'."""
    if parse_code(canonical) != canonical:
        raise ValueError("not a canonical code")
    return canonical[:4] + "-" + canonical[4:]


def _byte_source(random1: Callable[[], int] | Iterable[int]) -> Callable[[], int]:
    if callable(random1):
        return random1
    it = iter(random1)
    return lambda: next(it)


def draw_code(random1: Callable[[], int] | Iterable[int]) -> str:
    """16.1: 7 characters, each from one random byte r taken while r >= 248 is redrawn,
    v = r mod 31; then the check character."""
    next_byte = _byte_source(random1)
    values = []
    while len(values) < CODE_DRAWN_CHARS:
        r = next_byte()
        if not 0 <= r <= 0xFF:
            raise ValueError("codes are drawn one byte at a time")
        if r < CODE_DRAW_BELOW:
            values.append(r % CODE_BASE)
    return code_from_values(values)


def draw_codes(random1: Callable[[], int] | Iterable[int]) -> tuple[str, str]:
    """The inviter draws the invite code, then the encryption code; "the two must differ" (the
    document does not say how: here the encryption code is drawn again until it does)."""
    next_byte = _byte_source(random1)
    invite_code = draw_code(next_byte)
    while True:
        encryption_code = draw_code(next_byte)
        if encryption_code != invite_code:
            return invite_code, encryption_code


INVITE_ID_LABEL = b"itsme-invite-id-v1"
REALTIME_ROOM_LABEL = b"itsme-realtime-room-v1"
RELAY_ID_BYTES = 16


def _canonical_code(code: str) -> bytes:
    if parse_code(code) != code:
        raise ValueError("derivations take a code's canonical form")
    return code.encode("ascii")


def invite_id(invite_code: str) -> bytes:
    """invite_id = first 16 bytes of SHA-256(lv_cat('itsme-invite-id-v1', invite_code))."""
    return sha256(lv_cat(INVITE_ID_LABEL, _canonical_code(invite_code)))[:RELAY_ID_BYTES]


def realtime_room_id(invite_code: str) -> bytes:
    """room_id = first 16 bytes of SHA-256(lv_cat('itsme-realtime-room-v1', invite_code))."""
    return sha256(lv_cat(REALTIME_ROOM_LABEL, _canonical_code(invite_code)))[:RELAY_ID_BYTES]


# 16.2 CPace

REMOTE_EXCHANGE_LABEL = b"itsme-online-exchange-v1"  # CI's label and the key derivation's salt
REMOTE_CONFIRM_LABEL = b"itsme-online-confirm-v1"
REMOTE_PAYLOAD_KEY_LABEL = b"payload-encryption"
REMOTE_DECISION_LABEL = b"itsme-online-decision-v1"  # the decision keys' label and its aad's
SID_BYTES = 16


def remote_prs(encryption_code: str) -> bytes:
    """PRS = the encryption code's canonical form (8 ASCII bytes)."""
    return _canonical_code(encryption_code)


def remote_ci(invite_code: str) -> bytes:
    """CI = lv_cat('itsme-online-exchange-v1', invite code's canonical form)."""
    return lv_cat(REMOTE_EXCHANGE_LABEL, _canonical_code(invite_code))


def remote_generator_string(encryption_code: str, invite_code: str, sid: bytes) -> bytes:
    return cpace.generator_string(cpace.DSI, remote_prs(encryption_code), remote_ci(invite_code),
                                  sid, cpace.H_S_IN_BYTES)


def remote_generator(encryption_code: str, invite_code: str, sid: bytes) -> ristretto255.Point:
    """g = from_hash(SHA-512(generator_string('CPaceRistretto255', PRS, CI, sid, 128)))."""
    return cpace.calculate_generator(remote_prs(encryption_code), remote_ci(invite_code), sid)


def remote_shared_point(scalar: bytes, own_share: bytes, peer_share: bytes) -> bytes:
    """K = scalar * peer share.  16.3 "Checks and result codes": a share that does not decode
    as a canonical ristretto255 element, or that makes K the identity, is
    ``authentication_failed`` (CPace's abort, 16.2); a share equal to the receiver's own (a
    reflection) is ``invalid_key``.  (A reflected share always decodes, and K = y * Y is then
    not the identity, so the two checks never compete for one share.)"""
    try:
        k = cpace.shared_point(scalar, peer_share)
    except cpace.CPaceAbort as exc:
        raise AuthenticationFailed(str(exc)) from exc
    if hmac.compare_digest(peer_share, own_share):
        raise InvalidKey("the peer's CPace share equals our own (reflected)")
    return k


def remote_isk_input(sid: bytes, k: bytes, ya: bytes, commitment: bytes, yb: bytes) -> bytes:
    """lv_cat('CPaceRistretto255_ISK', sid, K) || lv_cat(Ya, ADa) || lv_cat(Yb, ADb) with
    ADa = the inviter's commitment and ADb empty."""
    return cpace.isk_input(sid, k, ya, commitment, yb, b"")


def remote_isk(sid: bytes, k: bytes, ya: bytes, commitment: bytes, yb: bytes) -> bytes:
    return cpace.h(remote_isk_input(sid, k, ya, commitment, yb))


@dataclass(frozen=True)
class RemoteKeys:
    kc_i: bytes
    kc_r: bytes
    kp_i: bytes
    kp_r: bytes
    kd_i: bytes
    kd_r: bytes

    def kd(self, role: str) -> bytes:
        """The DECISION key of ``role`` (the sender's: each side seals with its own)."""
        return {INITIATOR: self.kd_i, RESPONDER: self.kd_r}[role]


def remote_keys(isk: bytes) -> RemoteKeys:
    """prk = HKDF-Extract(salt = 'itsme-online-exchange-v1', ikm = ISK); the confirmation keys
    (label 'itsme-online-confirm-v1'), payload keys ('payload-encryption') and decision keys
    ('itsme-online-decision-v1') of each role."""
    prk = hkdf_extract(REMOTE_EXCHANGE_LABEL, isk)
    return RemoteKeys(
        hkdf_expand(prk, lv_cat(REMOTE_CONFIRM_LABEL, INITIATOR), 32),
        hkdf_expand(prk, lv_cat(REMOTE_CONFIRM_LABEL, RESPONDER), 32),
        hkdf_expand(prk, lv_cat(REMOTE_PAYLOAD_KEY_LABEL, INITIATOR), 32),
        hkdf_expand(prk, lv_cat(REMOTE_PAYLOAD_KEY_LABEL, RESPONDER), 32),
        hkdf_expand(prk, lv_cat(REMOTE_DECISION_LABEL, INITIATOR), 32),
        hkdf_expand(prk, lv_cat(REMOTE_DECISION_LABEL, RESPONDER), 32),
    )


# 16.3 Messages

REMOTE_VERSION = 1
REMOTE_INVITE, REMOTE_ACCEPT, REMOTE_REPLY, REMOTE_DECISION = 1, 2, 3, 4
_REMOTE_NAMES = {REMOTE_INVITE: "INVITE", REMOTE_ACCEPT: "ACCEPT", REMOTE_REPLY: "REPLY",
                 REMOTE_DECISION: "DECISION"}
REMOTE_TRANSCRIPT_LABEL = b"itsme-online-transcript-v1"
REMOTE_PAYLOAD_LABEL = b"itsme-online-payload-v1"
REMOTE_SAS_LABEL = b"itsme-online-sas-transcript-v1"
REMOTE_PAYLOAD_FIXED = 32 + 32 + 16 + 1 + 64  # 145: everything but the name
_REMOTE_NAME_LEN_AT = 32 + 32 + 16  # 80
GCM_TAG_BYTES = 16
REMOTE_NONCE = bytes(12)
INVITE_BYTES = 2 + SID_BYTES + 32 + 32  # 82
_BOX_MIN = REMOTE_PAYLOAD_FIXED + 1 + GCM_TAG_BYTES  # 162
_BOX_MAX = REMOTE_PAYLOAD_FIXED + 128 + GCM_TAG_BYTES  # 289
ACCEPT_MIN, ACCEPT_MAX = 2 + 32 + 32 + _BOX_MIN, 2 + 32 + 32 + _BOX_MAX  # 228, 355
REPLY_MIN, REPLY_MAX = 2 + 32 + _BOX_MIN, 2 + 32 + _BOX_MAX  # 196, 323
DECISION_BYTES = 2 + 1 + GCM_TAG_BYTES  # 19: u8(1) || u8(4) || decision_X (17)
_REMOTE_LENGTHS = {REMOTE_INVITE: (INVITE_BYTES, INVITE_BYTES),
                   REMOTE_ACCEPT: (ACCEPT_MIN, ACCEPT_MAX),
                   REMOTE_REPLY: (REPLY_MIN, REPLY_MAX),
                   REMOTE_DECISION: (DECISION_BYTES, DECISION_BYTES)}


def remote_message(message_type: int, body: bytes) -> bytes:
    """u8(1) || u8(type) || body."""
    message = u8(REMOTE_VERSION) + u8(message_type) + body
    low, high = _REMOTE_LENGTHS[message_type]
    if not low <= len(message) <= high:
        raise ValueError(f"{_REMOTE_NAMES[message_type]} of the wrong length")
    return message


def parse_remote_message(message: bytes, expected_type: int) -> bytes:
    """16.3 "Checks and result codes", in section 1.1's order: the length against the table's
    bounds, "checked before any key is used" (the row of the type the message names: 82, 228
    to 355, 196 to 323 or 19 bytes; "2 to 355 bytes when the type is unknown", which a message
    too short to name a type is outside), then the version, the type, and the order (a type
    other than the one expected now).  Each is ``malformed_message``, so their order does not
    change the code.  Returns the body."""
    named = message[1] if len(message) >= 2 else None
    low, high = _REMOTE_LENGTHS.get(named, (2, ACCEPT_MAX))
    if not low <= len(message) <= high:
        what = _REMOTE_NAMES.get(named, "message")
        raise MalformedMessage(f"{what} of {len(message)} bytes, outside {low} to {high}")
    if message[0] != REMOTE_VERSION:
        raise MalformedMessage("message of another version")
    if named not in _REMOTE_NAMES:
        raise MalformedMessage("message of another type")
    if named != expected_type:
        raise MalformedMessage(f"{_REMOTE_NAMES[named]} out of order "
                               f"(expected {_REMOTE_NAMES[expected_type]})")
    return message[2:]


def remote_commitment(identity_pk: bytes, ephemeral_pk: bytes, name: bytes,
                      device_secret: bytes) -> bytes:
    """Section 7.3's commitment: SHA-256(lv_cat('itsme-sas-commit-v1', u8(1), identity_pk,
    ephemeral_pk, SHA-256(lv_cat(name, device_secret))))."""
    return bt_commitment(identity_pk, ephemeral_pk, name, device_secret)


def invite_message(sid: bytes, ya: bytes, commitment: bytes) -> bytes:
    """INVITE = u8(1) || u8(1) || sid (16) || Ya (32) || commitment (32)."""
    if len(sid) != SID_BYTES or len(ya) != 32 or len(commitment) != 32:
        raise ValueError("INVITE fields of the wrong length")
    return remote_message(REMOTE_INVITE, sid + ya + commitment)


def parse_invite(message: bytes) -> tuple[bytes, bytes, bytes]:
    """(sid, Ya, commitment) of an INVITE of exactly 82 bytes."""
    body = parse_remote_message(message, REMOTE_INVITE)
    return body[:16], body[16:48], body[48:80]


def accept_message(yb: bytes, tag_r: bytes, box_r: bytes) -> bytes:
    """ACCEPT = u8(1) || u8(2) || Yb (32) || tag_R (32) || box_R."""
    if len(yb) != 32 or len(tag_r) != 32:
        raise ValueError("ACCEPT fields of the wrong length")
    return remote_message(REMOTE_ACCEPT, yb + tag_r + box_r)


def parse_accept(message: bytes) -> tuple[bytes, bytes, bytes]:
    """(Yb, tag_R, box_R) of an ACCEPT of 228 to 355 bytes."""
    body = parse_remote_message(message, REMOTE_ACCEPT)
    return body[:32], body[32:64], body[64:]


def reply_message(tag_i: bytes, box_i: bytes) -> bytes:
    """REPLY = u8(1) || u8(3) || tag_I (32) || box_I."""
    if len(tag_i) != 32:
        raise ValueError("tag_I is 32 bytes")
    return remote_message(REMOTE_REPLY, tag_i + box_i)


def parse_reply(message: bytes) -> tuple[bytes, bytes]:
    """(tag_I, box_I) of a REPLY; its length follows from box_I's (146 to 273 bytes of payload
    and the 16-byte GCM tag), 196 to 323 bytes."""
    body = parse_remote_message(message, REMOTE_REPLY)
    return body[:32], body[32:]


def tpake_input(invite_id_bytes: bytes, invite: bytes, yb: bytes) -> bytes:
    """lv_cat('itsme-online-transcript-v1', invite_id, INVITE, Yb)."""
    return lv_cat(REMOTE_TRANSCRIPT_LABEL, invite_id_bytes, invite, yb)


def tpake_hash(invite_id_bytes: bytes, invite: bytes, yb: bytes) -> bytes:
    return sha256(tpake_input(invite_id_bytes, invite, yb))


def remote_tag_r(kc_r: bytes, tpake: bytes) -> bytes:
    """tag_R = HMAC-SHA256(kc_R, lv_cat('itsme-online-confirm-v1', 'responder', tpake))."""
    return hmac_sha256(kc_r, lv_cat(REMOTE_CONFIRM_LABEL, RESPONDER, tpake))


def remote_tag_i(kc_i: bytes, tpake: bytes, accept: bytes) -> bytes:
    """tag_I = HMAC-SHA256(kc_I, lv_cat('itsme-online-confirm-v1', 'initiator', tpake,
    SHA-256(ACCEPT)))."""
    return hmac_sha256(kc_i, lv_cat(REMOTE_CONFIRM_LABEL, INITIATOR, tpake, sha256(accept)))


def remote_data(identity_pk: bytes, ephemeral_pk: bytes, device_secret: bytes,
                name: bytes) -> bytes:
    """data_X = identity_pk (32) || ephemeral_pk (32) || device_secret (16) || u8(n) || name."""
    validate_name(name)
    if len(identity_pk) != 32 or len(ephemeral_pk) != 32 or len(device_secret) != 16:
        raise ValueError("wrong key or device-secret length")
    return identity_pk + ephemeral_pk + device_secret + u8(len(name)) + name


def remote_signed_message(tpake: bytes, role: str, data: bytes) -> bytes:
    """lv_cat('itsme-online-payload-v1', tpake, role_X, data_X)."""
    return lv_cat(REMOTE_PAYLOAD_LABEL, tpake, role, data)


def remote_payload(identity_seed: bytes, ephemeral_secret: bytes, device_secret: bytes,
                   name: bytes, tpake: bytes, role: str) -> bytes:
    """payload_X = data_X || Ed25519-Sign(identity_sk, lv_cat(label, tpake, role_X, data_X))."""
    data = remote_data(ed25519_public(identity_seed), x25519_public(ephemeral_secret),
                       device_secret, name)
    return data + ed25519_sign(identity_seed, remote_signed_message(tpake, role, data))


def remote_aad(role: str, invite_id_bytes: bytes) -> bytes:
    """lv_cat('itsme-online-payload-v1', u8(1), role_X, invite_id)."""
    return lv_cat(REMOTE_PAYLOAD_LABEL, u8(1), role, invite_id_bytes)


def seal_remote_payload(kp: bytes, role: str, invite_id_bytes: bytes, payload: bytes) -> bytes:
    """box_X = AES-256-GCM(key = kp_X, nonce = 12 zero bytes, aad, payload_X): ciphertext and
    the 16-byte tag."""
    return AESGCM(kp).encrypt(REMOTE_NONCE, payload, remote_aad(role, invite_id_bytes))


def open_remote_payload(kp: bytes, role: str, invite_id_bytes: bytes, box: bytes) -> bytes:
    """16.3: "The box: authentication_failed if it does not open under the sender's kp_X"."""
    try:
        return AESGCM(kp).decrypt(REMOTE_NONCE, box, remote_aad(role, invite_id_bytes))
    except InvalidTag as exc:
        raise AuthenticationFailed(f"the {role}'s payload does not decrypt") from exc


@dataclass(frozen=True)
class RemotePeer:
    payload: bytes
    identity_pk: bytes
    fingerprint_text: str
    ephemeral_pk: bytes
    device_secret: bytes
    name: bytes
    signature: bytes


def parse_remote_payload(payload: bytes, sender_role: str, tpake: bytes,
                         own_identity_pk: bytes, commitment: bytes | None = None) -> RemotePeer:
    """16.3 "Checks and result codes", the payload, in the listed order: a length other than
    145 + n with n (the byte after the device secret) 1 to 128, or a name that breaks section
    1's rule, is ``malformed_message``; a signature that does not verify under identity_pk with
    the sender's role, ``authentication_failed``; on REPLY (``commitment`` given: INVITE's),
    the inviter's commitment recomputed differing from INVITE's, ``authentication_failed``;
    then identity_pk equal to the receiver's own, ``invalid_key``."""
    if len(payload) < REMOTE_PAYLOAD_FIXED + 1:
        raise MalformedMessage("payload too short")
    n = payload[_REMOTE_NAME_LEN_AT]
    if not 1 <= n <= 128 or len(payload) != REMOTE_PAYLOAD_FIXED + n:
        raise MalformedMessage("payload of the wrong length")
    identity_pk = payload[:32]
    ephemeral_pk = payload[32:64]
    device_secret = payload[64:80]
    name = payload[81:81 + n]
    data = payload[:81 + n]
    signature = payload[81 + n:]
    try:
        validate_name(name)
    except ProtocolError as exc:  # section 1: a peer's message carrying it
        raise MalformedMessage(str(exc)) from exc
    if not ed25519_verify(identity_pk, signature, remote_signed_message(tpake, sender_role,
                                                                       data)):
        raise AuthenticationFailed("payload signature does not verify")
    if commitment is not None:
        recomputed = remote_commitment(identity_pk, ephemeral_pk, name, device_secret)
        if not hmac.compare_digest(recomputed, commitment):
            raise AuthenticationFailed("the inviter's payload does not open its commitment")
    if identity_pk == own_identity_pk:
        raise InvalidKey("payload carries the receiver's own identity key")
    return RemotePeer(payload, identity_pk, fingerprint(identity_pk), ephemeral_pk,
                      device_secret, name, signature)


# 16.4 Seed and SAS

def remote_transcript_input(tpake: bytes, payload_i: bytes, payload_r: bytes) -> bytes:
    """lv_cat('itsme-online-sas-transcript-v1', tpake, payload_I, payload_R)."""
    return lv_cat(REMOTE_SAS_LABEL, tpake, payload_i, payload_r)


def remote_transcript_hash(tpake: bytes, payload_i: bytes, payload_r: bytes) -> bytes:
    return sha256(remote_transcript_input(tpake, payload_i, payload_r))


# 16.3 step 5 and 8.1: DECISION

DECISION_REJECTED, DECISION_CONFIRMED = 0, 1  # "d is 1 when the person confirmed the SAS, 0
#                                               when they rejected it"
# 8.1: what becomes of the new contact.  UNVERIFIED (saved once the SAS is shown) and VERIFIED
# are section 10's states; the two below are 8.1's.
AWAITING_PEER = "awaiting the peer"
DELETED = "deleted"


def decision_aad(role: str, th: bytes) -> bytes:
    """aad = lv_cat('itsme-online-decision-v1', u8(1), role_X, th), th the SAS transcript hash
    of 16.4."""
    if len(th) != 32:
        raise ValueError("th is 32 bytes")
    return lv_cat(REMOTE_DECISION_LABEL, u8(1), role, th)


def seal_decision(kd: bytes, role: str, th: bytes, decision: int) -> bytes:
    """DECISION = u8(1) || u8(4) || decision_X, decision_X = AES-256-GCM(key = kd_X, nonce = 12
    zero bytes, aad, u8(d)): 1 + 16 bytes, 19 in all."""
    if decision not in (DECISION_REJECTED, DECISION_CONFIRMED):
        raise ValueError("a decision is 1 (confirmed) or 0 (rejected)")
    box = AESGCM(kd).encrypt(REMOTE_NONCE, u8(decision), decision_aad(role, th))
    return remote_message(REMOTE_DECISION, box)


def open_decision(message: bytes, kd: bytes, sender_role: str, th: bytes) -> int:
    """16.3 step 5, a received DECISION: "exactly 19 bytes (malformed_message otherwise,
    before anything is decrypted)", then version and type (1.1: size, shape, version), "its
    box must open under the sender's kd_X with this exchange's th (authentication_failed
    otherwise), and its plaintext is one byte, 0 or 1 (malformed_message otherwise)".
    Returns the decision."""
    if len(message) != DECISION_BYTES:
        raise MalformedMessage(f"a DECISION of {len(message)} bytes, not {DECISION_BYTES}")
    box = parse_remote_message(message, REMOTE_DECISION)
    try:
        plain = AESGCM(kd).decrypt(REMOTE_NONCE, box, decision_aad(sender_role, th))
    except InvalidTag as exc:
        raise AuthenticationFailed(f"the {sender_role}'s DECISION does not open") from exc
    if len(plain) != 1 or plain[0] not in (DECISION_REJECTED, DECISION_CONFIRMED):
        raise MalformedMessage("a DECISION whose plaintext is not one byte, 0 or 1")
    return plain[0]


@dataclass(frozen=True)
class RemoteResult:
    """What one side holds once it can show the SAS (the inviter on ACCEPT, the invitee on
    REPLY): every value of 16.1 to 16.4, the same on both sides but ``role`` and ``peer``."""
    role: str
    realtime: bool
    invite_code: str
    encryption_code: str
    invite_id: bytes
    room_id: bytes
    relay_id: bytes  # the mailbox (invite_id) or, real-time, the room (room_id)
    sid: bytes
    prs: bytes
    ci: bytes
    generator_string: bytes
    generator_hash: bytes
    generator: bytes  # encoded
    ya: bytes
    yb: bytes
    commitment: bytes
    k: bytes
    isk_input: bytes
    isk: bytes
    keys: RemoteKeys
    invite: bytes
    accept: bytes
    reply: bytes
    tpake_input: bytes
    tpake: bytes
    tag_i: bytes
    tag_r: bytes
    payload_i: bytes
    payload_r: bytes
    box_i: bytes
    box_r: bytes
    peer: RemotePeer
    shared: bytes
    salt: bytes
    seed: bytes
    transcript_input: bytes
    transcript_hash: bytes
    sas_value: int
    sas_text: str


class RemoteExchange:
    """One side of the exchange at a distance (16.3).  Use :meth:`inviter` (the CPace
    initiator, holding the drawn codes, sid and its scalar) or :meth:`invitee` (the responder,
    holding the codes as typed, checked before anything else, and its scalar).

    ``start()`` returns the messages to send first (the inviter's INVITE); ``receive(m)`` checks
    a message from the peer and returns the messages to send in reply.  The first failed check,
    or a message out of the order INVITE, ACCEPT, REPLY, DECISION, raises the ProtocolError of
    its result code and, until this side decided, ends the exchange as failed: ``result`` is
    then None and every later call is ``invalid_state``.  Once the SAS is shown, ``decide()``
    gives this side's DECISION and ``receive`` reads the peer's (16.3 step 5); after this side
    decided, a refused message leaves the exchange waiting (8.1); once the peer's DECISION is
    in, any message is ``invalid_state`` and changes nothing.  ``contact_state`` is 8.1's
    outcome."""

    def __init__(self, role: str, identity_seed: bytes, ephemeral_secret: bytes,
                 device_secret: bytes, name: bytes, invite_code: str, encryption_code: str,
                 scalar: bytes, sid: bytes | None = None, realtime: bool = False):
        if role not in (INITIATOR, RESPONDER):
            raise ValueError("role is 'initiator' (the inviter) or 'responder' (the invitee)")
        if len(identity_seed) != 32 or len(ephemeral_secret) != 32 or len(device_secret) != 16:
            raise ValueError("wrong seed, ephemeral secret or device-secret length")
        validate_name(name)
        self.role = role
        self.realtime = realtime
        # 16.1: "A client checks both codes before any network call."  16.3: "a typo, a
        # character codes never use, or the same code typed for both is invalid_argument".
        self.invite_code = parse_code(invite_code)
        self.encryption_code = parse_code(encryption_code)
        if self.invite_code == self.encryption_code:
            raise InvalidArgument("the same code for the invite and the encryption code")
        self.identity_seed = identity_seed
        self.identity_pk = ed25519_public(identity_seed)
        self.ephemeral_secret = ephemeral_secret
        self.ephemeral_pk = x25519_public(ephemeral_secret)
        self.device_secret = device_secret
        self.name = name
        self.scalar = cpace.sample_scalar(scalar)
        self.invite_id = invite_id(self.invite_code)
        self.room_id = realtime_room_id(self.invite_code)
        self.sid = sid
        self.result: RemoteResult | None = None
        self.failed = False
        self._started = False
        self._expect = REMOTE_ACCEPT if role == INITIATOR else REMOTE_INVITE
        # 16.3 step 5 and 8.1: each side's decision (None: not yet), this side's DECISION
        # message, one held back (below), and whether the host reported that the wait for
        # the peer's has ended (recorded only: no state of the exchange, 8.1).
        self.own_decision: int | None = None
        self.peer_decision: int | None = None
        self.decision_message: bytes | None = None
        self._held: list[bytes] = []
        self.wait_ended = False
        self._v: dict = {}
        if role == INITIATOR:
            if sid is None or len(sid) != SID_BYTES:
                raise ValueError("the inviter draws a 16-byte sid")
            self._cpace_setup(sid)
            self.commitment = remote_commitment(self.identity_pk, self.ephemeral_pk, name,
                                                device_secret)
            self.share = cpace.scalar_mult(self.scalar, self._generator)
            self.invite = invite_message(sid, self.share, self.commitment)

    @classmethod
    def inviter(cls, identity_seed: bytes, ephemeral_secret: bytes, device_secret: bytes,
                name: bytes, invite_code: str, encryption_code: str, sid: bytes, scalar: bytes,
                realtime: bool = False) -> "RemoteExchange":
        return cls(INITIATOR, identity_seed, ephemeral_secret, device_secret, name, invite_code,
                   encryption_code, scalar, sid=sid, realtime=realtime)

    @classmethod
    def invitee(cls, identity_seed: bytes, ephemeral_secret: bytes, device_secret: bytes,
                name: bytes, invite_code_text: str, encryption_code_text: str, scalar: bytes,
                realtime: bool = False) -> "RemoteExchange":
        return cls(RESPONDER, identity_seed, ephemeral_secret, device_secret, name,
                   invite_code_text, encryption_code_text, scalar, realtime=realtime)

    @property
    def relay_id(self) -> bytes:
        """16.5: the mailbox invite_id, or in a real-time exchange the room room_id."""
        return self.room_id if self.realtime else self.invite_id

    @property
    def done(self) -> bool:
        return self.result is not None

    def _cpace_setup(self, sid: bytes) -> None:
        self._v.update(
            prs=remote_prs(self.encryption_code), ci=remote_ci(self.invite_code),
            generator_string=remote_generator_string(self.encryption_code, self.invite_code,
                                                     sid),
            generator_hash=cpace.generator_hash(remote_prs(self.encryption_code),
                                                remote_ci(self.invite_code), sid))
        self._generator = remote_generator(self.encryption_code, self.invite_code, sid)
        self._v["generator"] = ristretto255.encode(self._generator)

    def _derive(self, ya: bytes, yb: bytes, commitment: bytes, invite: bytes) -> None:
        own, peer = (ya, yb) if self.role == INITIATOR else (yb, ya)
        k = remote_shared_point(self.scalar, own, peer)
        isk_in = remote_isk_input(self.sid, k, ya, commitment, yb)
        isk = cpace.h(isk_in)
        t_in = tpake_input(self.invite_id, invite, yb)
        self._v.update(ya=ya, yb=yb, commitment=commitment, k=k, isk_input=isk_in, isk=isk,
                       keys=remote_keys(isk), invite=invite, tpake_input=t_in,
                       tpake=sha256(t_in))

    def _own_payload(self) -> bytes:
        return remote_payload(self.identity_seed, self.ephemeral_secret, self.device_secret,
                              self.name, self._v["tpake"], self.role)

    def _finish(self, peer: RemotePeer, payload_i: bytes, payload_r: bytes) -> None:
        v = self._v
        shared = x25519_shared(self.ephemeral_secret, peer.ephemeral_pk)
        salt = seed_salt(fingerprint(self.identity_pk), peer.fingerprint_text)
        seed = hkdf(shared, salt, SEED_LABEL, 32)
        t_in = remote_transcript_input(v["tpake"], payload_i, payload_r)
        th = sha256(t_in)
        value = sas_value(seed, th)
        self.result = RemoteResult(
            role=self.role, realtime=self.realtime, invite_code=self.invite_code,
            encryption_code=self.encryption_code, invite_id=self.invite_id,
            room_id=self.room_id, relay_id=self.relay_id, sid=self.sid, prs=v["prs"],
            ci=v["ci"], generator_string=v["generator_string"],
            generator_hash=v["generator_hash"], generator=v["generator"], ya=v["ya"],
            yb=v["yb"], commitment=v["commitment"], k=v["k"], isk_input=v["isk_input"],
            isk=v["isk"], keys=v["keys"], invite=v["invite"], accept=v["accept"],
            reply=v["reply"], tpake_input=v["tpake_input"], tpake=v["tpake"],
            tag_i=v["tag_i"], tag_r=v["tag_r"], payload_i=payload_i, payload_r=payload_r,
            box_i=v["box_i"], box_r=v["box_r"], peer=peer, shared=shared, salt=salt,
            seed=seed, transcript_input=t_in, transcript_hash=th, sas_value=value,
            sas_text=format_short_code(value))

    def start(self) -> list[bytes]:
        """16.3 step 1 (16.5: on ``peer-joined`` in a real-time exchange): the inviter sends
        INVITE; the invitee sends nothing first."""
        if self._started or self.failed:
            raise ProtocolError("exchange already started")
        self._started = True
        return [self.invite] if self.role == INITIATOR else []

    def receive(self, message: bytes) -> list[bytes]:
        """A message from the peer, checked as 16.3's "Checks and result codes" lists.

        - After a failure, or once the peer's DECISION is in ("the exchange has every message:
          anything further, a second DECISION included, is invalid_state and changes
          nothing"), a message is ``invalid_state`` and changes nothing.  The end of the wait
          the host reported is not a state of the exchange (8.1) and is not checked.
        - "Until a side decided, any refusal ends the exchange as failed".
        - "Once this side decided, a refused message of any type changes nothing and the side
          goes on waiting for the peer's DECISION": the only message it still reads is that
          DECISION, so any other is out of order (``malformed_message``)."""
        if self.failed:
            raise InvalidState("the exchange has failed")
        if self.peer_decision is not None:
            raise InvalidState("the peer's DECISION is in: the exchange has every message")
        if not self._started:
            raise InvalidState("message before the exchange started")
        keeps_waiting = self.own_decision is not None
        try:
            if self._expect == REMOTE_INVITE:
                return self._on_invite(message)
            if self._expect == REMOTE_ACCEPT:
                return self._on_accept(message)
            if self._expect == REMOTE_REPLY:
                return self._on_reply(message)
            return self._on_decision(message)
        except ProtocolError:
            if not keeps_waiting:
                self._had_sas = self.result is not None
                self.failed = True
                self.result = None
            raise

    def _on_invite(self, message: bytes) -> list[bytes]:
        """16.3 step 2, the invitee."""
        sid, ya, commitment = parse_invite(message)
        self.sid = sid
        self._cpace_setup(sid)
        yb = cpace.scalar_mult(self.scalar, self._generator)
        self.share = yb
        self._derive(ya, yb, commitment, message)
        v = self._v
        v["tag_r"] = remote_tag_r(v["keys"].kc_r, v["tpake"])
        v["payload_r"] = self._own_payload()
        v["box_r"] = seal_remote_payload(v["keys"].kp_r, RESPONDER, self.invite_id,
                                         v["payload_r"])
        v["accept"] = accept_message(yb, v["tag_r"], v["box_r"])
        self._expect = REMOTE_REPLY
        return [v["accept"]]

    def _on_accept(self, message: bytes) -> list[bytes]:
        """16.3 step 3, the inviter: tag_R is checked before anything else is opened."""
        yb, tag_r, box_r = parse_accept(message)
        self._derive(self.share, yb, self.commitment, self.invite)
        v = self._v
        if not hmac.compare_digest(tag_r, remote_tag_r(v["keys"].kc_r, v["tpake"])):
            raise AuthenticationFailed("tag_R does not match: a wrong encryption code or a "
                                       "changed message")
        payload_r = open_remote_payload(v["keys"].kp_r, RESPONDER, self.invite_id, box_r)
        peer = parse_remote_payload(payload_r, RESPONDER, v["tpake"], self.identity_pk)
        v.update(accept=message, tag_r=tag_r, box_r=box_r)
        payload_i = self._own_payload()
        v["tag_i"] = remote_tag_i(v["keys"].kc_i, v["tpake"], message)
        v["box_i"] = seal_remote_payload(v["keys"].kp_i, INITIATOR, self.invite_id, payload_i)
        v["reply"] = reply_message(v["tag_i"], v["box_i"])
        self._finish(peer, payload_i, payload_r)
        self._expect = REMOTE_DECISION  # "the inviter after ACCEPT"
        return [v["reply"]]

    def _on_reply(self, message: bytes) -> list[bytes]:
        """16.3 step 4, the invitee: tag_I, the payload, then the commitment of INVITE."""
        tag_i, box_i = parse_reply(message)
        v = self._v
        if not hmac.compare_digest(tag_i, remote_tag_i(v["keys"].kc_i, v["tpake"],
                                                       v["accept"])):
            raise AuthenticationFailed("tag_I does not match")
        payload_i = open_remote_payload(v["keys"].kp_i, INITIATOR, self.invite_id, box_i)
        peer = parse_remote_payload(payload_i, INITIATOR, v["tpake"], self.identity_pk,
                                    commitment=v["commitment"])
        v.update(reply=message, tag_i=tag_i, box_i=box_i)
        self._finish(peer, payload_i, v["payload_r"])
        self._expect = REMOTE_DECISION  # "the invitee after REPLY"
        return []

    # 16.3 step 5 and 8.1: the decisions ---------------------------------------------------

    @property
    def peer_role(self) -> str:
        return RESPONDER if self.role == INITIATOR else INITIATOR

    @property
    def complete(self) -> bool:
        """Both decisions are in: nothing more is read."""
        return self.own_decision is not None and self.peer_decision is not None

    @property
    def contact_state(self) -> str | None:
        """8.1: None while there is no SAS, or after a failure ("no contact is saved");
        UNVERIFIED once the SAS is shown and before this side decided; AWAITING_PEER once it
        confirmed and until the peer's confirmation arrives; VERIFIED when both confirmed;
        DELETED after this side's rejection (before or after it confirmed), the peer's once
        this side confirmed, or once the person deleted the contact it saved (8.1, "Saving").
        A wait that ends changes nothing here (8.1): the host rejects, or the sweep deletes a
        contact left awaiting the peer."""
        if self.failed or self.result is None:
            return None
        if self.person_deleted:
            return DELETED
        # 8.1: this side's rejection, or the peer's once this side confirmed, deletes it; the
        # peer's rejection before this side decided leaves it until the host rejects.
        if self.own_decision == DECISION_REJECTED or (
                self.own_decision is not None and self.peer_decision == DECISION_REJECTED):
            return DELETED
        if self.rejected_after_confirming:
            return DELETED
        if self.own_decision is None:
            return UNVERIFIED
        if self.peer_decision is None:
            return AWAITING_PEER
        return VERIFIED if self.settled else AWAITING_PEER

    settled = False
    verified_at: int | None = None
    rejected_after_failure = False
    saved_contact_deleted = False
    settled_rejected = False  # settled on the peer's rejection (8.1)
    rejected_after_confirming = False  # confirmed, then rejected before settling (8.1)
    created_at: int | None = None  # when the exchange began, for 8.1's 24 hours
    _had_sas = False
    saved = False  # 8.1, "Saving": the new contact is stored (by save, or by confirm)
    person_deleted = False  # the person deleted the contact it saved (8.1, "Saving")
    sweeps = 0

    def person_deletes(self) -> None:
        """The person deletes the contact this exchange saved (:func:`_person_deletes`)."""
        _person_deletes(self)

    def settle(self, now: int | None = None) -> str:
        """8.1, "Settling" (:func:`_settle`); `now` is the time a verified contact records."""
        return _settle(self, now)

    def _fail_by_expiry(self) -> None:
        self._had_sas = self.result is not None
        self.failed = True
        self.result = None

    def decide(self, confirmed: bool, now: int | None = None) -> list[bytes]:
        """This side's person confirmed (True) or rejected (False) the SAS: returns the
        DECISION to send now (a confirmation after the peer's makes the contact verified at
        once, at `now`, 8.1).  8.1: deciding before there is a SAS, or twice, is
        ``invalid_state``, except that a side that confirmed may still reject until a
        decision is settled, the peer's DECISION in or not, which sends nothing (and drops a
        confirmation still held); after a failure it can only reject.  Once the peer's
        rejection arrived before this side decided, confirming is ``invalid_state`` (before
        the saved contact is looked up) and rejecting sends this side's rejection ("the
        library does not reject by itself: the person is told first").  A wait that ends
        changes none of this (8.1).  16.3 step 5: "Through the
        mailbox the inviter sends a confirmation only after it has read the invitee's
        DECISION, whichever that is (a rejection it sends at once)": such a confirmation is
        held and returned by the ``receive`` that reads the invitee's DECISION."""
        if self.failed:
            return _reject_failed(self, confirmed, self.saved)
        if self.result is None:
            raise InvalidState("no SAS to confirm or reject yet")
        if _rejects_after_confirming(self, confirmed):
            self._held = []  # 8.1: it sends nothing; 16.3: kd seals one message only
            return _reject_after_confirming(self)
        _check_undecided(self, confirmed)
        if confirmed:
            _first_save(self)  # 8.1, "Saving": "`confirm` saves first when the host has not"
        decision = DECISION_CONFIRMED if confirmed else DECISION_REJECTED
        _verified_at_once(self, decision, now)
        self._seal_own(decision)
        if (confirmed and self.role == INITIATOR and not self.realtime
                and self.peer_decision is None):
            self._held = [self.decision_message]
            return []
        return [self.decision_message]

    def save(self, now: int | None = None) -> str:
        """8.1, "Saving" (:func:`_save`)."""
        return _save(self, now)

    @property
    def has_sas(self) -> bool:
        return self.result is not None

    def _seal_own(self, decision: int) -> None:
        self.own_decision = decision
        self.decision_message = seal_decision(self.result.keys.kd(self.role), self.role,
                                              self.result.transcript_hash, decision)

    def end_wait(self) -> None:
        """16.5: the host learns that the wait ended (an invite that ended, a ``peer-left`` or
        a closed room).  8.1: "A wait that ends [...] is not a state of the exchange: the
        library learns of it only from its host, and the exchange stays in its state until
        the host rejects it": this records the event and changes nothing that saving,
        confirming, rejecting, settling or a message do."""
        self.wait_ended = True

    def _on_decision(self, message: bytes) -> list[bytes]:
        """16.3 step 5: the peer's DECISION, sealed under the sender's kd_X with this
        exchange's th (a second one never gets here: ``receive`` refuses it as invalid_state).
        Returns what this side sends now: a confirmation it held (mailbox inviter).  When the
        peer rejected before this side's person decided, nothing: "the library does not reject
        by itself: the person is told first" (8.1); the host then rejects (:meth:`decide`)."""
        decision = open_decision(message, self.result.keys.kd(self.peer_role),
                                 self.peer_role, self.result.transcript_hash)
        self.peer_decision = decision
        held, self._held = self._held, []
        return held
