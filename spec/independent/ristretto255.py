"""The ristretto255 group of RFC 9496, in pure Python, as a test oracle.

Written from RFC 9496 (sections 4.1 to 4.4) for the CPace suite CPACE-RISTR255-SHA512 of
docs/PROTOCOL.md section 16.2, which the ``cryptography`` package does not offer.  Field
elements are Python ints modulo p = 2^255 - 19; points are edwards25519 points in extended
coordinates (X : Y : Z : T) with x = X/Z, y = Y/Z, x*y = T/Z.  Nothing here runs in constant
time: it only recomputes values to compare with.

Only the group operations CPace needs are provided: decoding with every check of RFC 9496
section 4.3.1, encoding (4.3.2), equality (4.3.3), the element derivation from 64 bytes (4.3.4,
the one-way map), addition, negation and multiplication by a non-negative integer.
"""

from __future__ import annotations

from dataclasses import dataclass

# --------------------------------------------------------------------------------------------
# The field and the curve constants (RFC 9496 section 4.1)
# --------------------------------------------------------------------------------------------

P = 2**255 - 19
# The order of the ristretto255 group (and of edwards25519's prime-order subgroup).
L = 2**252 + 27742317777372353535851937790883648493

D = (-121665 * pow(121666, P - 2, P)) % P  # the edwards25519 d, with a = -1
SQRT_M1 = 19681161376707505956807079304988542015446066515923890162744021073123829784752
SQRT_AD_MINUS_ONE = (
    25063068953384623474111414158702152701244531502492656460079210482610430750235)
INVSQRT_A_MINUS_D = (
    54469307008909316920995813868745141605393597292927456921205312896311721017578)
ONE_MINUS_D_SQ = (
    1159843021668779879193775521855586647937357759715417654439879720876111806838)
D_MINUS_ONE_SQ = (
    40440834346308536858101042469323190826248399146238708352240133220865137265952)


def _check_constants() -> None:
    """The constants above are the ones RFC 9496 lists; each satisfies its definition."""
    a = P - 1
    assert SQRT_M1 * SQRT_M1 % P == P - 1
    assert SQRT_AD_MINUS_ONE * SQRT_AD_MINUS_ONE % P == (a * D - 1) % P
    assert INVSQRT_A_MINUS_D * INVSQRT_A_MINUS_D * (a - D) % P == 1
    assert ONE_MINUS_D_SQ == (1 - D * D) % P
    assert D_MINUS_ONE_SQ == (D - 1) * (D - 1) % P


_check_constants()


def is_negative(x: int) -> bool:
    """RFC 9496: a field element is negative when the least significant bit of its canonical
    (fully reduced) little-endian encoding is set."""
    return (x % P) & 1 == 1


def ct_abs(x: int) -> int:
    """CT_ABS: the non-negative one of x and -x (constant time is not needed here)."""
    x %= P
    return (P - x) % P if is_negative(x) else x


def sqrt_ratio_m1(u: int, v: int) -> tuple[bool, int]:
    """SQRT_RATIO_M1(u, v), RFC 9496 section 4.2: (was_square, r) with r the non-negative square
    root of u/v when it exists, otherwise of SQRT_M1 * u/v; (False, 0) for v = 0 and u != 0,
    (True, 0) for u = 0."""
    u %= P
    v %= P
    v3 = v * v % P * v % P
    v7 = v3 * v3 % P * v % P
    r = u * v3 % P * pow(u * v7 % P, (P - 5) // 8, P) % P
    check = v * r % P * r % P
    correct_sign_sqrt = check == u
    flipped_sign_sqrt = check == (-u) % P
    flipped_sign_sqrt_i = check == (-u) * SQRT_M1 % P
    if flipped_sign_sqrt or flipped_sign_sqrt_i:
        r = r * SQRT_M1 % P
    return correct_sign_sqrt or flipped_sign_sqrt, ct_abs(r)


# --------------------------------------------------------------------------------------------
# Edwards points (the internal representation)
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Point:
    """An edwards25519 point (X : Y : Z : T), standing for its ristretto255 element.  Several
    points stand for the same element (they differ by a point of order 4 or 2): compare with
    :func:`equal` or by encoding, never with ``==``."""
    x: int
    y: int
    z: int
    t: int


IDENTITY = Point(0, 1, 1, 0)


def add(p: Point, q: Point) -> Point:
    """Edwards addition for a = -1 in extended coordinates (Hisil-Wong-Carter-Dawson 2008,
    "add-2008-hwcd-3"); complete on edwards25519, so it also doubles."""
    a = (p.y - p.x) * (q.y - q.x) % P
    b = (p.y + p.x) * (q.y + q.x) % P
    c = 2 * D * p.t % P * q.t % P
    d = 2 * p.z * q.z % P
    e, f, g, h = (b - a) % P, (d - c) % P, (d + c) % P, (b + a) % P
    return Point(e * f % P, g * h % P, f * g % P, e * h % P)


def negate(p: Point) -> Point:
    return Point((-p.x) % P, p.y, p.z, (-p.t) % P)


def scalar_mult(n: int, p: Point) -> Point:
    """n * p for an integer n >= 0 (double and add, from the most significant bit)."""
    if n < 0:
        raise ValueError("negative scalar")
    acc = IDENTITY
    for bit in bin(n)[2:]:
        acc = add(acc, acc)
        if bit == "1":
            acc = add(acc, p)
    return acc


def equal(p: Point, q: Point) -> bool:
    """RFC 9496 section 4.3.3: x1*y2 == y1*x2 or y1*y2 == x1*x2."""
    return (p.x * q.y - p.y * q.x) % P == 0 or (p.y * q.y - p.x * q.x) % P == 0


def on_curve(p: Point) -> bool:
    """-x^2 + y^2 = 1 + d x^2 y^2 in projective form, and T = XY/Z."""
    x2, y2, z2 = p.x * p.x % P, p.y * p.y % P, p.z * p.z % P
    return ((y2 - x2) * z2 - z2 * z2 - D * x2 * y2) % P == 0 and p.z % P != 0 and (
        p.t * p.z - p.x * p.y) % P == 0


# --------------------------------------------------------------------------------------------
# Decoding and encoding (RFC 9496 sections 4.3.1 and 4.3.2)
# --------------------------------------------------------------------------------------------

class DecodeError(ValueError):
    """A 32-byte string that is not the encoding of a ristretto255 element."""


def _field_from_canonical(data: bytes) -> int:
    if len(data) != 32:
        raise DecodeError("a ristretto255 encoding is 32 bytes")
    s = int.from_bytes(data, "little")
    # The encoding of s must be canonical: below p, so also without the 256th bit.
    if s >= P:
        raise DecodeError("non-canonical field encoding")
    return s


def decode(data: bytes) -> Point:
    """RFC 9496 section 4.3.1, with all its checks: the field encoding is canonical, s is
    non-negative, and the computation's failure conditions (not a square, t = x*y negative,
    y = 0)."""
    s = _field_from_canonical(bytes(data))
    if is_negative(s):
        raise DecodeError("negative field element s")
    ss = s * s % P
    u1 = (1 - ss) % P
    u2 = (1 + ss) % P
    u2_sqr = u2 * u2 % P
    v = (-(D * u1 % P * u1) - u2_sqr) % P
    was_square, invsqrt = sqrt_ratio_m1(1, v * u2_sqr)
    den_x = invsqrt * u2 % P
    den_y = invsqrt * den_x % P * v % P
    x = ct_abs(2 * s * den_x)
    y = u1 * den_y % P
    t = x * y % P
    if not was_square:
        raise DecodeError("not a square: no point with this s")
    if is_negative(t):
        raise DecodeError("x*y is negative")
    if y == 0:
        raise DecodeError("y = 0")
    return Point(x, y, 1, t)


def decode_failure(data: bytes) -> str | None:
    """Which check of section 4.3.1 rejects data (None: it decodes): 'length', 'non-canonical',
    'negative', 'not-square', 'negative-xy' or 'y-zero'; for telling the RFC's groups of bad
    encodings apart in tests."""
    try:
        decode(data)
    except DecodeError as exc:
        message = str(exc)
        for key, name in (("32 bytes", "length"), ("non-canonical", "non-canonical"),
                          ("negative field", "negative"), ("not a square", "not-square"),
                          ("x*y", "negative-xy"), ("y = 0", "y-zero")):
            if key in message:
                return name
        raise AssertionError(message) from exc
    return None


def encode(p: Point) -> bytes:
    """RFC 9496 section 4.3.2: the one encoding of the element p stands for."""
    x0, y0, z0, t0 = p.x % P, p.y % P, p.z % P, p.t % P
    u1 = (z0 + y0) * (z0 - y0) % P
    u2 = x0 * y0 % P
    _, invsqrt = sqrt_ratio_m1(1, u1 * u2 % P * u2)
    den1 = invsqrt * u1 % P
    den2 = invsqrt * u2 % P
    z_inv = den1 * den2 % P * t0 % P
    ix0 = x0 * SQRT_M1 % P
    iy0 = y0 * SQRT_M1 % P
    enchanted_denominator = den1 * INVSQRT_A_MINUS_D % P
    rotate = is_negative(t0 * z_inv)
    if rotate:
        x, y, den_inv = iy0, ix0, enchanted_denominator
    else:
        x, y, den_inv = x0, y0, den2
    z = z0
    if is_negative(x * z_inv):
        y = (-y) % P
    s = ct_abs(den_inv * (z - y))
    return s.to_bytes(32, "little")


IDENTITY_ENCODING = bytes(32)


# --------------------------------------------------------------------------------------------
# Element derivation (RFC 9496 section 4.3.4)
# --------------------------------------------------------------------------------------------

def map_to_point(t: int) -> Point:
    """MAP(t), the Elligator-based map of RFC 9496 section 4.3.4."""
    t %= P
    r = SQRT_M1 * t % P * t % P
    u = (r + 1) * ONE_MINUS_D_SQ % P
    v = (-1 - r * D) * (r + D) % P
    was_square, s = sqrt_ratio_m1(u, v)
    s_prime = (-ct_abs(s * t)) % P
    if was_square:
        c = P - 1
    else:
        s, c = s_prime, r
    n = (c * (r - 1) % P * D_MINUS_ONE_SQ - v) % P
    w0 = 2 * s * v % P
    w1 = n * SQRT_AD_MINUS_ONE % P
    w2 = (1 - s * s) % P
    w3 = (1 + s * s) % P
    return Point(w0 * w3 % P, w2 * w1 % P, w1 * w3 % P, w0 * w2 % P)


def _half_to_field(half: bytes) -> int:
    """A 32-byte half of the input: little-endian, the most significant bit of the last byte
    cleared, reduced modulo p."""
    b = bytearray(half)
    b[31] &= 0x7F
    return int.from_bytes(b, "little") % P


def from_uniform_bytes(data: bytes) -> Point:
    """The element derivation function (one-way map) of 64 bytes: MAP of each 32-byte half,
    added.  This is libsodium's crypto_core_ristretto255_from_hash."""
    if len(data) != 64:
        raise ValueError("the element derivation takes exactly 64 bytes")
    return add(map_to_point(_half_to_field(data[:32])), map_to_point(_half_to_field(data[32:])))


# The generator: the edwards25519 base point (y = 4/5, x non-negative), RFC 9496 section 4.4.
_BY = 4 * pow(5, P - 2, P) % P
_ok, _BX = sqrt_ratio_m1((_BY * _BY - 1) % P, (D * _BY * _BY + 1) % P)
assert _ok
GENERATOR = Point(_BX, _BY, 1, _BX * _BY % P)
del _ok
