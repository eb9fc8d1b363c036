"""CPace with the group ristretto255 and SHA-512 (CPACE-RISTR255-SHA512), from the CFRG draft.

Written from draft-irtf-cfrg-cpace (sections "Definitions and notation", "The CPace protocol",
"CPace group objects G_Ristretto255 and G_Decaf448" and the appendix's string functions) on the
group of :mod:`ristretto255`; docs/PROTOCOL.md section 16.2 uses it in initiator-responder
mode.  The draft's own ristretto255 test vectors check it (tests/test_protocol_independent.py).

Scalars are 32-byte strings read little-endian, as the draft's vectors give them; group elements
on the wire are their 32-byte encodings, and ``G.I`` is the encoding of the identity (32 zero
bytes).
"""

from __future__ import annotations

import hashlib

from . import ristretto255 as R

DSI = b"CPaceRistretto255"
DSI_ISK = DSI + b"_ISK"
H_S_IN_BYTES = 128  # SHA-512's input block size
FIELD_SIZE_BYTES = 32
GROUP_SIZE_BITS = 252
GROUP_ORDER = R.L
IDENTITY = R.IDENTITY_ENCODING  # G.I


class CPaceAbort(ValueError):
    """A condition on which the draft says a party MUST abort (K = G.I)."""


def h(data: bytes) -> bytes:
    """H.hash(m) for H = SHA-512 (64 bytes)."""
    return hashlib.sha512(data).digest()


# --------------------------------------------------------------------------------------------
# String functions (draft appendix "CPace function definitions")
# --------------------------------------------------------------------------------------------

def prepend_len(data: bytes) -> bytes:
    """The LEB128 encoding of len(data), then data (the draft's reference code)."""
    length = len(data)
    encoded = b""
    while True:
        if length < 128:
            encoded += bytes([length])
        else:
            encoded += bytes([(length & 0x7F) + 0x80])
        length >>= 7
        if length == 0:
            break
    return encoded + bytes(data)


def lv_cat(*args: bytes) -> bytes:
    return b"".join(prepend_len(a) for a in args)


def zero_bytes(n: int) -> bytes:
    return bytes(n)


def generator_string(dsi: bytes, prs: bytes, ci: bytes, sid: bytes, s_in_bytes: int) -> bytes:
    """lv_cat(DSI, PRS, zero_bytes(len_zpad), CI, sid), the zero padding making DSI and PRS fill
    the hash's first input block."""
    len_zpad = max(0, s_in_bytes - 1 - len(prepend_len(prs)) - len(prepend_len(dsi)))
    return lv_cat(dsi, prs, zero_bytes(len_zpad), ci, sid)


def o_cat(bytes1: bytes, bytes2: bytes) -> bytes:
    """Ordered concatenation: b"oc", then the lexicographically larger string first."""
    if bytes1 > bytes2:
        return b"oc" + bytes1 + bytes2
    return b"oc" + bytes2 + bytes1


def transcript_ir(ya: bytes, ada: bytes, yb: bytes, adb: bytes) -> bytes:
    """The initiator-responder transcript: lv_cat(Ya, ADa) || lv_cat(Yb, ADb)."""
    return lv_cat(ya, ada) + lv_cat(yb, adb)


def transcript_oc(ya: bytes, ada: bytes, yb: bytes, adb: bytes) -> bytes:
    """The transcript for runs without fixed roles: o_cat(lv_cat(Ya, ADa), lv_cat(Yb, ADb))."""
    return o_cat(lv_cat(ya, ada), lv_cat(yb, adb))


# --------------------------------------------------------------------------------------------
# The group object G_Ristretto255
# --------------------------------------------------------------------------------------------

def generator_hash(prs: bytes, ci: bytes, sid: bytes) -> bytes:
    """gen_str_hash = H.hash(generator_string(G.DSI, PRS, CI, sid, H.s_in_bytes), 64)."""
    return h(generator_string(DSI, prs, ci, sid, H_S_IN_BYTES))[:2 * FIELD_SIZE_BYTES]


def calculate_generator(prs: bytes, ci: bytes, sid: bytes) -> R.Point:
    """G.calculate_generator: the element derivation of the generator string's hash (a decoded
    point, in the internal representation)."""
    return R.from_uniform_bytes(generator_hash(prs, ci, sid))


def sample_scalar(random_bytes: bytes) -> bytes:
    """G.sample_scalar from 32 random bytes: the bits above group_size_bits (252) cleared; the
    result is read little-endian."""
    if len(random_bytes) != 32:
        raise ValueError("a ristretto255 scalar is drawn from 32 bytes")
    b = bytearray(random_bytes)
    b[31] &= 0x0F
    return bytes(b)


def _scalar(y: bytes) -> int:
    if len(y) != 32:
        raise ValueError("a scalar is 32 bytes")
    return int.from_bytes(y, "little")


def scalar_mult(y: bytes, g: R.Point) -> bytes:
    """G.scalar_mult(y, _g) = encode(y * _g)."""
    return R.encode(R.scalar_mult(_scalar(y), g))


def scalar_mult_vfy(y: bytes, x: bytes) -> bytes:
    """G.scalar_mult_vfy(y, X): G.I if X does not decode, otherwise encode(y * decode(X))."""
    try:
        point = R.decode(x)
    except R.DecodeError:
        return IDENTITY
    return R.encode(R.scalar_mult(_scalar(y), point))


def isk_input(sid: bytes, k: bytes, ya: bytes, ada: bytes, yb: bytes, adb: bytes,
              ordered: bool = True) -> bytes:
    """lv_cat(G.DSI || b"_ISK", sid, K) || transcript(Ya, ADa, Yb, ADb), with transcript_ir
    (``ordered``, the initiator-responder setting) or transcript_oc."""
    transcript = transcript_ir if ordered else transcript_oc
    return lv_cat(DSI_ISK, sid, k) + transcript(ya, ada, yb, adb)


def isk(sid: bytes, k: bytes, ya: bytes, ada: bytes, yb: bytes, adb: bytes,
        ordered: bool = True) -> bytes:
    return h(isk_input(sid, k, ya, ada, yb, adb, ordered))


def sid_output(ya: bytes, ada: bytes, yb: bytes, adb: bytes, ordered: bool = True) -> bytes:
    """The optional session-id output: H.hash(b"CPaceSidOutput" || transcript)."""
    transcript = transcript_ir if ordered else transcript_oc
    return h(b"CPaceSidOutput" + transcript(ya, ada, yb, adb))


def shared_point(y: bytes, peer_share: bytes) -> bytes:
    """K = G.scalar_mult_vfy(y, peer share); the party MUST abort if K = G.I."""
    k = scalar_mult_vfy(y, peer_share)
    if k == IDENTITY:
        raise CPaceAbort("K is the neutral element (the peer's share is invalid or the identity)")
    return k
