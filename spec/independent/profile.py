"""Section 18 of docs/PROTOCOL.md (profile records), built from that document only.

Also the paragraph "A profile reference in the PROOF" of section 11.3 (a PROOF plaintext of 96
bytes carrying the reference).  Sections 1 (encodings) and 11 (the PROOF message) come from
:mod:`independent.protocol`; ChaCha20 (RFC 8439 section 2.4, 96-bit nonce) is the
``cryptography`` package's.

Every random input (the record key, the three nonces) is a parameter: nothing here draws
randomness.  Every refusal raises a :class:`Refusal` whose ``refusal`` attribute is the class name
the document uses (``malformed_message``, ``authentication_failed``; ``invalid_argument`` for an
input the caller got wrong, which the document does not name for section 18).

Run ``python3 -m independent.profile`` from ``bindings/python/tests`` for the self-check.
"""

from __future__ import annotations

import hmac
import struct
import unicodedata
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from .protocol import (
    OV_PROOF,
    OV_VERSION,
    ProtocolError,
    bt_nonce,
    hkdf,
    hmac_sha256,
    lv_cat,
    u8,
    validate_name,
)


class Refusal(ProtocolError):
    """A refusal, carrying the document's class name in ``refusal``."""

    refusal = "refusal"

    def __init__(self, reason: str) -> None:
        super().__init__(f"{self.refusal}: {reason}")
        self.reason = reason


class MalformedMessage(Refusal):
    refusal = "malformed_message"


class AuthenticationFailed(Refusal):
    refusal = "authentication_failed"


class InvalidArgument(Refusal):
    refusal = "invalid_argument"


# --------------------------------------------------------------------------------------------
# 18.1 Fields
# --------------------------------------------------------------------------------------------

FIELD_NAMES = (b"name", b"photo", b"photo-filename")
RECORD_VERSION = 1
RECORD_MAX = 262_144
RECORD_KEY_BYTES = 16
NONCE_BYTES = 12
LENGTH_BYTES = 4
MAC_BYTES = 32
RECORD_ID_BYTES = 16
REFERENCE_BYTES = RECORD_ID_BYTES + RECORD_KEY_BYTES
FIELD_OVERHEAD = NONCE_BYTES + LENGTH_BYTES + MAC_BYTES
# version + three fields around their values + the record MAC; the document says 177.
RECORD_OVERHEAD = 1 + len(FIELD_NAMES) * FIELD_OVERHEAD + MAC_BYTES
FILENAME_MAX = 255
PROFILE_LABEL = b"itsme-profile-record-v1"


def validate_filename(filename: bytes) -> str:
    """1 to 255 bytes of UTF-8, no Cc character, no '/' and no '\\', not '.' or '..'."""
    if not 1 <= len(filename) <= FILENAME_MAX:
        raise ProtocolError("filename length is not 1 to 255 bytes")
    # validate_name checks UTF-8 and Cc, but also a 128-byte bound: check the text ourselves.
    try:
        text = filename.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise ProtocolError("filename is not valid UTF-8") from exc
    if any(unicodedata.category(c) == "Cc" for c in text):
        raise ProtocolError("filename contains a control character")
    if "/" in text or "\\" in text:
        raise ProtocolError("filename contains '/' or '\\'")
    if text in (".", ".."):
        raise ProtocolError("filename is '.' or '..'")
    return text


def check_values(name: bytes, photo: bytes, filename: bytes,
                 error: type[Refusal] = InvalidArgument) -> None:
    """The value rules of 18.1, raising ``error`` (InvalidArgument when sealing,
    MalformedMessage when opening, 18.4 step 3)."""
    try:
        if name:
            validate_name(name)
        if filename:
            validate_filename(filename)
    except ProtocolError as exc:
        raise error(str(exc)) from exc
    if not name and not photo:
        raise error("a profile needs a name or a photo")
    if filename and not photo:
        raise error("a filename needs a photo")


def record_size(name: bytes, photo: bytes, filename: bytes) -> int:
    """18.2: 177 + len(name) + len(photo) + len(filename)."""
    return RECORD_OVERHEAD + len(name) + len(photo) + len(filename)


def photo_max(name: bytes, filename: bytes) -> int:
    """18.1: 262,144 - 177 - len(name) - len(filename)."""
    return RECORD_MAX - RECORD_OVERHEAD - len(name) - len(filename)


# --------------------------------------------------------------------------------------------
# 18.2 Sealing
# --------------------------------------------------------------------------------------------

def record_keys(record_key: bytes) -> tuple[bytes, bytes, bytes]:
    """k1 || k2 || k3 = HKDF(ikm = record_key, salt = empty, info = label, L = 96)."""
    okm = hkdf(record_key, b"", PROFILE_LABEL, 96)
    return okm[:32], okm[32:64], okm[64:]


def chacha20_xor(key: bytes, nonce: bytes, data: bytes, counter: int = 0) -> bytes:
    """IETF ChaCha20 (RFC 8439 2.4): the ``cryptography`` nonce is the 4-byte little-endian
    block counter followed by the 12-byte nonce."""
    if len(key) != 32 or len(nonce) != NONCE_BYTES:
        raise ValueError("ChaCha20 takes a 32-byte key and a 12-byte nonce")
    full_nonce = struct.pack("<I", counter) + nonce
    return Cipher(algorithms.ChaCha20(key, full_nonce), mode=None).encryptor().update(data)


def field_mac(k2: bytes, field_name: bytes, nonce: bytes, ct: bytes) -> bytes:
    """mac_f = HMAC(k2, lv_cat(u8(1), field_name_f, nonce_f, ct_f))."""
    return hmac_sha256(k2, lv_cat(u8(RECORD_VERSION), field_name, nonce, ct))


def record_mac_of(k3: bytes, macs: list[bytes] | tuple[bytes, ...], identity_pk: bytes) -> bytes:
    """record_mac = HMAC(k3, lv_cat(u8(1), mac_1, mac_2, mac_3, identity_pk))."""
    return hmac_sha256(k3, lv_cat(u8(RECORD_VERSION), *macs, identity_pk))


def field_bytes(nonce: bytes, ct: bytes, mac: bytes) -> bytes:
    """field_f = nonce_f (12) || u32(len(ct_f)) || ct_f || mac_f (32)."""
    return nonce + struct.pack(">I", len(ct)) + ct + mac


@dataclass(frozen=True)
class Sealed:
    """Every intermediate of 18.2, and the reference of 18.3."""
    record_key: bytes
    k1: bytes
    k2: bytes
    k3: bytes
    nonces: tuple[bytes, bytes, bytes]
    values: tuple[bytes, bytes, bytes]
    cts: tuple[bytes, bytes, bytes]
    macs: tuple[bytes, bytes, bytes]
    record_mac: bytes
    record_id: bytes
    record: bytes
    reference: bytes

    @property
    def record_name(self) -> str:
        """The relay's name: the lowercase hex of record_id (32 digits)."""
        return self.record_id.hex()


def seal(record_key: bytes, nonces: tuple[bytes, bytes, bytes] | list[bytes], name: bytes,
         photo: bytes, filename: bytes, identity_pk: bytes) -> Sealed:
    """18.2 from explicit inputs.  Inputs of the wrong size, values breaking 18.1, or a record
    over 262,144 bytes raise InvalidArgument."""
    if len(record_key) != RECORD_KEY_BYTES:
        raise InvalidArgument("record key is not 16 bytes")
    if len(nonces) != 3 or any(len(n) != NONCE_BYTES for n in nonces):
        raise InvalidArgument("three 12-byte nonces are needed")
    if len(identity_pk) != 32:
        raise InvalidArgument("identity key is not 32 bytes")
    check_values(name, photo, filename, InvalidArgument)
    if record_size(name, photo, filename) > RECORD_MAX:
        raise InvalidArgument("record larger than the limit")
    k1, k2, k3 = record_keys(record_key)
    values = (bytes(name), bytes(photo), bytes(filename))
    cts = tuple(chacha20_xor(k1, n, v) for n, v in zip(nonces, values))
    macs = tuple(field_mac(k2, f, n, c) for f, n, c in zip(FIELD_NAMES, nonces, cts))
    rmac = record_mac_of(k3, macs, identity_pk)
    record = u8(RECORD_VERSION) + b"".join(
        field_bytes(n, c, m) for n, c, m in zip(nonces, cts, macs)) + rmac
    assert len(record) == record_size(name, photo, filename)
    record_id = rmac[:RECORD_ID_BYTES]
    return Sealed(record_key=bytes(record_key), k1=k1, k2=k2, k3=k3, nonces=tuple(nonces),
                  values=values, cts=cts, macs=macs, record_mac=rmac, record_id=record_id,
                  record=record, reference=record_id + bytes(record_key))


# --------------------------------------------------------------------------------------------
# 18.4 Opening
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ParsedRecord:
    nonces: tuple[bytes, bytes, bytes]
    cts: tuple[bytes, bytes, bytes]
    macs: tuple[bytes, bytes, bytes]
    record_mac: bytes


def parse_record(record: bytes) -> ParsedRecord:
    """18.4 step 1: size, then exact shape.  MalformedMessage on any failure."""
    if len(record) > RECORD_MAX:
        raise MalformedMessage("larger than the limit")
    if len(record) < 1 or record[0] != RECORD_VERSION:
        raise MalformedMessage("not a version 1 record")
    pos = 1
    nonces, cts, macs = [], [], []
    for _ in FIELD_NAMES:
        if len(record) - pos < NONCE_BYTES + LENGTH_BYTES:
            raise MalformedMessage("truncated field header")
        nonce = record[pos:pos + NONCE_BYTES]
        (n,) = struct.unpack(">I", record[pos + NONCE_BYTES:pos + NONCE_BYTES + LENGTH_BYTES])
        pos += NONCE_BYTES + LENGTH_BYTES
        if len(record) - pos < n + MAC_BYTES:
            raise MalformedMessage("field length does not fit")
        cts.append(record[pos:pos + n])
        macs.append(record[pos + n:pos + n + MAC_BYTES])
        nonces.append(nonce)
        pos += n + MAC_BYTES
    if len(record) - pos != MAC_BYTES:
        raise MalformedMessage("record MAC missing or bytes left over")
    return ParsedRecord(tuple(nonces), tuple(cts), tuple(macs), record[pos:])


@dataclass(frozen=True)
class Profile:
    name: bytes
    photo: bytes
    filename: bytes

    @property
    def name_text(self) -> str:
        return self.name.decode("utf-8")

    @property
    def filename_text(self) -> str:
        return self.filename.decode("utf-8")


def open_record(record: bytes, reference: bytes, owner_pk: bytes) -> Profile:
    """18.4, in order: size and shape; every MAC, the record MAC over the recomputed field MACs
    and the owner's key, and the record ID (all compared before anything is decrypted); then the
    values.  A reference or key of the wrong size is InvalidArgument (the document names no
    class for it)."""
    if len(reference) != REFERENCE_BYTES:
        raise InvalidArgument("reference is not 32 bytes")
    if len(owner_pk) != 32:
        raise InvalidArgument("owner key is not 32 bytes")
    parsed = parse_record(record)                                          # step 1
    record_id, record_key = reference[:RECORD_ID_BYTES], reference[RECORD_ID_BYTES:]
    k1, k2, k3 = record_keys(record_key)                                    # step 2
    macs = tuple(field_mac(k2, f, n, c)
                 for f, n, c in zip(FIELD_NAMES, parsed.nonces, parsed.cts))
    rmac = record_mac_of(k3, macs, owner_pk)
    ok = True
    for mine, stored in zip(macs, parsed.macs):
        ok &= hmac.compare_digest(mine, stored)
    ok &= hmac.compare_digest(rmac, parsed.record_mac)
    ok &= hmac.compare_digest(rmac[:RECORD_ID_BYTES], record_id)
    if not ok:
        raise AuthenticationFailed("a MAC or the record ID does not match")
    name, photo, filename = (chacha20_xor(k1, n, c)                          # step 3
                             for n, c in zip(parsed.nonces, parsed.cts))
    check_values(name, photo, filename, MalformedMessage)
    return Profile(name, photo, filename)


# --------------------------------------------------------------------------------------------
# 11.3 "A profile reference in the PROOF"
# --------------------------------------------------------------------------------------------

PROOF_PLAIN_BYTES = 64
PROOF_PLAIN_WITH_REFERENCE_BYTES = PROOF_PLAIN_BYTES + REFERENCE_BYTES   # 96
TAG_BYTES = 16
PROOF_MESSAGE_SIZES = (2 + PROOF_PLAIN_BYTES + TAG_BYTES,                # 82
                       2 + PROOF_PLAIN_WITH_REFERENCE_BYTES + TAG_BYTES)  # 114


def seal_proof(key: bytes, proof: bytes, dtag: bytes, reference: bytes | None = None) -> bytes:
    """A PROOF whose plaintext is proof || device tag [|| reference]."""
    if len(proof) != 32 or len(dtag) != 32:
        raise ValueError("proof and device tag are 32 bytes each")
    plain = proof + dtag
    if reference is not None:
        if len(reference) != REFERENCE_BYTES:
            raise ValueError("a reference is 32 bytes")
        plain += reference
    header = u8(OV_VERSION) + u8(OV_PROOF)
    return header + ChaCha20Poly1305(key).encrypt(bt_nonce(0), plain, header)


def open_proof(message: bytes, key: bytes) -> tuple[bytes, bytes, bytes | None]:
    """Returns (proof, device tag, reference or None).  A PROOF of any length other than 82 or
    114 bytes is malformed; the caller reads the reference only after checking the proof and
    the device tag, and offers the profile only once the SAS is confirmed."""
    if len(message) < 2 or message[0] != OV_VERSION or message[1] != OV_PROOF:
        raise MalformedMessage("not a PROOF")
    if len(message) not in PROOF_MESSAGE_SIZES:
        raise MalformedMessage("PROOF of the wrong length")
    try:
        plain = ChaCha20Poly1305(key).decrypt(bt_nonce(0), message[2:], message[:2])
    except InvalidTag as exc:
        raise AuthenticationFailed("PROOF does not decrypt") from exc
    return plain[:32], plain[32:64], (plain[64:] if len(plain) > 64 else None)


# --------------------------------------------------------------------------------------------
# Self-check
# --------------------------------------------------------------------------------------------

def _expect(refusal: str, fn, *args) -> None:
    try:
        fn(*args)
    except Refusal as exc:
        assert exc.refusal == refusal, (refusal, exc)
        return
    raise AssertionError(f"expected {refusal}")


def _self_check() -> None:
    from .protocol import ed25519_public

    # ChaCha20, RFC 8439 2.4.2 (counter 1).
    key = bytes(range(32))
    nonce = bytes.fromhex("000000000000004a00000000")
    text = (b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for "
            b"the future, sunscreen would be it.")
    assert chacha20_xor(key, nonce, text, counter=1)[:16].hex() == \
        "6e2e359a2568f98041ba0728dd0d6981"

    assert RECORD_OVERHEAD == 177
    owner = ed25519_public(bytes([7]) * 32)
    other = ed25519_public(bytes([8]) * 32)
    rk = bytes(range(16))
    nonces = [bytes([i]) * 12 for i in (1, 2, 3)]
    s = seal(rk, nonces, "Zoë".encode(), b"\x89PNG fake photo", b"me.png", owner)
    assert len(s.record) == 177 + len("Zoë".encode()) + 15 + 6
    assert s.reference == s.record_id + rk and len(s.record_name) == 32
    p = open_record(s.record, s.reference, owner)
    assert (p.name_text, p.photo, p.filename_text) == ("Zoë", b"\x89PNG fake photo", "me.png")

    # Empty fields still carry nonce and MAC.
    s2 = seal(rk, nonces, b"", b"x", b"", owner)
    assert len(s2.record) == 178 and open_record(s2.record, s2.reference, owner).photo == b"x"

    # Value rules when sealing.
    for args in ((b"", b"", b""), (b"A", b"", b"f.png"), (b"a\x07", b"", b""),
                 (b"A" * 129, b"", b""), (b"A", b"p", b"a/b"), (b"A", b"p", b".."),
                 (b"A", b"p", b"a\\b"), (b"A", b"p", b"f" * 256), (b"\xff", b"", b"")):
        _expect("invalid_argument", seal, rk, nonces, *args, owner)
    assert len(seal(rk, nonces, b"A", b"p" * photo_max(b"A", b""), b"", owner).record) == \
        RECORD_MAX
    _expect("invalid_argument", seal, rk, nonces, b"A", b"p" * (photo_max(b"A", b"") + 1), b"",
            owner)

    # Tamper every byte region: each must fail authentication (or shape, for lengths).
    rec = s.record
    for i in range(len(rec)):
        t = bytearray(rec)
        t[i] ^= 0x01
        try:
            open_record(bytes(t), s.reference, owner)
        except Refusal as exc:
            in_length = any(lo <= i < lo + 4 for lo in _length_offsets(rec))
            want = "malformed_message" if (i == 0 or in_length) else "authentication_failed"
            assert exc.refusal == want, (i, exc)
        else:
            raise AssertionError(f"byte {i} tampered and accepted")
    _expect("authentication_failed", open_record, rec, s.reference, other)
    _expect("authentication_failed", open_record, rec, bytes(16) + rk, owner)
    _expect("authentication_failed", open_record, rec, s.record_id + bytes(16), owner)
    _expect("malformed_message", open_record, rec[:-1], s.reference, owner)
    _expect("malformed_message", open_record, rec + b"\0", s.reference, owner)
    _expect("malformed_message", open_record, b"", s.reference, owner)
    _expect("malformed_message", open_record, b"\x01" + bytes(RECORD_MAX), s.reference, owner)
    _expect("invalid_argument", open_record, rec, s.reference[:31], owner)

    # Values that break 18.1 under good MACs: build such records by hand.
    for name, photo, fname in ((b"", b"", b""), (b"A", b"", b"f"), (b"a\n", b"", b""),
                               (b"A", b"p", b".")):
        k1, k2, k3 = record_keys(rk)
        vals = (name, photo, fname)
        cts = [chacha20_xor(k1, n, v) for n, v in zip(nonces, vals)]
        macs = [field_mac(k2, f, n, c) for f, n, c in zip(FIELD_NAMES, nonces, cts)]
        rmac = record_mac_of(k3, macs, owner)
        bad = u8(1) + b"".join(field_bytes(n, c, m) for n, c, m in zip(nonces, cts, macs)) + rmac
        _expect("malformed_message", open_record, bad, rmac[:16] + rk, owner)

    # 11.3: PROOF with and without a reference.
    k = bytes([9]) * 32
    m = seal_proof(k, b"p" * 32, b"d" * 32, s.reference)
    assert len(m) == 114 and open_proof(m, k) == (b"p" * 32, b"d" * 32, s.reference)
    m = seal_proof(k, b"p" * 32, b"d" * 32)
    assert len(m) == 82 and open_proof(m, k)[2] is None
    _expect("malformed_message", open_proof, m + b"\0", k)
    print("profile: self-check passed")


def _length_offsets(record: bytes) -> list[int]:
    offs, pos = [], 1
    for _ in FIELD_NAMES:
        offs.append(pos + NONCE_BYTES)
        (n,) = struct.unpack(">I", record[pos + NONCE_BYTES:pos + NONCE_BYTES + 4])
        pos += FIELD_OVERHEAD + n
    return offs


if __name__ == "__main__":
    _self_check()
