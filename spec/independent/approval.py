"""Section 19 of docs/PROTOCOL.md (service approvals), built from that document only.

Enrollment (19.2), the request (19.3), the approval (19.4) and its verification (19.5) with a
dict as the replay store.  Encodings, Ed25519 signing and
section 1's strict Ed25519 verification (libsodium's rules: S below the group order, the public
key and R canonical and not of small order) come from :mod:`independent.protocol`.

Every random input (the credential key's seed, the nonces, the OTP) is a parameter: nothing here
draws randomness.  Every refusal raises a :class:`profile.Refusal` whose ``refusal`` attribute
is the class name the document uses: ``invalid_argument``, ``malformed_message``, ``expired``,
``not_found``, ``authentication_failed``, ``replayed``.

Run ``python3 -m independent.approval`` from ``bindings/python/tests`` for the self-check.
"""

from __future__ import annotations

import hmac
import struct
from dataclasses import dataclass
from typing import Iterable

from .profile import AuthenticationFailed, InvalidArgument, MalformedMessage, Refusal
from .protocol import (
    ProtocolError,
    ed25519_public,
    ed25519_sign,
    ed25519_verify,
    lv_cat,
    sha256,
    u8,
    u64,
    validate_name,
)


class Expired(Refusal):
    refusal = "expired"


class NotFound(Refusal):
    refusal = "not_found"


class Replayed(Refusal):
    refusal = "replayed"


# --------------------------------------------------------------------------------------------
# 19.1 Values
# --------------------------------------------------------------------------------------------

VERSION = 1
APPROVE, DENY = 1, 2
SERVICE_ID_MAX = 255
SESSION_ID_MAX = 128
NAME_MAX = 128
OTP_BYTES = 6
REQUEST_NONCE_BYTES = 32
ENROLL_NONCE_MIN, ENROLL_NONCE_MAX = 16, 64
SCOPES_MAX = 32
SCOPE_MAX = 64
TIME_MAX = 253_402_300_799
LIFETIME_MAX = 600
CREDENTIAL_ID_BYTES = 16

CREDENTIAL_ID_LABEL = b"itsme-credential-id-v1"
ENROLL_LABEL = b"itsme-enroll-v1"
APPROVAL_LABEL = b"itsme-approval-v1"
REPLAY_LABEL = b"itsme-approval-replay-v1"

SCOPES_LIST_MAX = 1 + SCOPES_MAX * (1 + SCOPE_MAX)                          # 2081
ENROLLMENT_FIXED = 1 + 32 + 1 + 64                                          # 98
ENROLLMENT_MAX = ENROLLMENT_FIXED + NAME_MAX                                 # 226
REQUEST_MAX = (1 + 1 + SERVICE_ID_MAX + 1 + NAME_MAX + 1 + SESSION_ID_MAX + OTP_BYTES
               + REQUEST_NONCE_BYTES + 8 + 8 + SCOPES_LIST_MAX)             # 2650
APPROVAL_FIXED = 1 + CREDENTIAL_ID_BYTES + 1 + 8 + OTP_BYTES + 64           # 96 + scopes(...)
APPROVAL_MAX = APPROVAL_FIXED + SCOPES_LIST_MAX                              # 2177


def _printable(value: bytes, lo: int, hi: int, what: str) -> None:
    if not lo <= len(value) <= hi:
        raise ProtocolError(f"{what} length is not {lo} to {hi} bytes")
    if any(not 0x21 <= b <= 0x7E for b in value):
        raise ProtocolError(f"{what} is not printable ASCII (0x21 to 0x7E)")


def check_service_id(value: bytes) -> None:
    _printable(value, 1, SERVICE_ID_MAX, "service_id")


def check_session_id(value: bytes) -> None:
    # "printable ASCII" read as 19.1 defines it for service_id: 0x21 to 0x7E (no space).
    _printable(value, 1, SESSION_ID_MAX, "session_id")


def check_otp(value: bytes) -> None:
    if len(value) != OTP_BYTES or any(not 0x30 <= b <= 0x39 for b in value):
        raise ProtocolError("otp is not 6 ASCII digits")


def check_time(t: int, what: str) -> None:
    if not 0 <= t <= TIME_MAX:
        raise ProtocolError(f"{what} outside 0 to 253402300799")


def check_scopes(scopes: Iterable[bytes]) -> list[bytes]:
    """0 to 32 scopes, each 1 to 64 bytes of printable ASCII, strictly increasing."""
    scopes = [bytes(s) for s in scopes]
    if len(scopes) > SCOPES_MAX:
        raise ProtocolError("more than 32 scopes")
    for s in scopes:
        _printable(s, 1, SCOPE_MAX, "scope")
    for a, b in zip(scopes, scopes[1:]):
        if not a < b:  # bytes compare lexicographically, a proper prefix first
            raise ProtocolError("scopes not in strictly increasing byte order")
    return scopes


def encode_scopes(scopes: Iterable[bytes]) -> bytes:
    """scopes(s_1..s_n) = u8(n) || u8(len(s_1)) || s_1 || ... ."""
    scopes = list(scopes)
    return u8(len(scopes)) + b"".join(u8(len(s)) + s for s in scopes)


def signed_scopes(scopes: Iterable[bytes]) -> bytes:
    """Inside a signed message: lv_cat(s_1, ..., s_n), the empty string for none."""
    return lv_cat(*scopes)


class _Reader:
    """Reads a message strictly; any shortfall raises ProtocolError."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = bytes(data), 0

    def take(self, n: int) -> bytes:
        if len(self.data) - self.pos < n:
            raise ProtocolError("truncated")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u8(self) -> int:
        return self.take(1)[0]

    def u64(self) -> int:
        return struct.unpack(">Q", self.take(8))[0]

    def lv8(self) -> bytes:
        return self.take(self.u8())

    def scopes(self) -> list[bytes]:
        return [self.lv8() for _ in range(self.u8())]

    def end(self) -> None:
        if self.pos != len(self.data):
            raise ProtocolError("bytes left over")


# --------------------------------------------------------------------------------------------
# Section 1's strict Ed25519 verification: protocol.ed25519_verify is that check (one for every
# section), kept here under the name this module used.
# --------------------------------------------------------------------------------------------

ed25519_verify_strict = ed25519_verify


# --------------------------------------------------------------------------------------------
# 19.2 Enrollment
# --------------------------------------------------------------------------------------------

def credential_id(credential_pk: bytes) -> bytes:
    """SHA-256(lv_cat('itsme-credential-id-v1', credential_pk))[0..16]."""
    return sha256(lv_cat(CREDENTIAL_ID_LABEL, credential_pk))[:CREDENTIAL_ID_BYTES]


def enroll_message(service_id: bytes, nonce: bytes, credential_pk: bytes, label: bytes) -> bytes:
    return lv_cat(ENROLL_LABEL, service_id, nonce, credential_pk, label)


@dataclass(frozen=True)
class Enrollment:
    credential_pk: bytes
    credential_id: bytes
    signed_message: bytes
    signature: bytes
    enrollment: bytes


def enroll(seed: bytes, service_id: bytes, nonce: bytes, label: bytes) -> Enrollment:
    """The device side of 19.2 with the credential key's 32-byte seed given."""
    try:
        if len(seed) != 32:
            raise ProtocolError("seed is not 32 bytes")
        check_service_id(service_id)
        if not ENROLL_NONCE_MIN <= len(nonce) <= ENROLL_NONCE_MAX:
            raise ProtocolError("enrollment nonce is not 16 to 64 bytes")
        validate_name(label)
    except ProtocolError as exc:
        raise InvalidArgument(str(exc)) from exc
    pk = ed25519_public(seed)
    msg = enroll_message(service_id, nonce, pk, label)
    sig = ed25519_sign(seed, msg)
    data = u8(VERSION) + pk + u8(len(label)) + label + sig
    assert len(data) == ENROLLMENT_FIXED + len(label)
    return Enrollment(pk, credential_id(pk), msg, sig, data)


@dataclass(frozen=True)
class Credential:
    credential_id: bytes
    public_key: bytes
    label: bytes


def verify_enrollment(service_id: bytes, nonce: bytes, enrollment: bytes) -> Credential:
    """The service side of 19.2: its own service_id and nonce (invalid_argument if bad), then
    the length and version and the label (malformed_message), then the strict signature
    (authentication_failed; a public key that is not canonical or of small order fails here
    too: the document names no other class)."""
    try:
        check_service_id(service_id)
        if not ENROLL_NONCE_MIN <= len(nonce) <= ENROLL_NONCE_MAX:
            raise ProtocolError("enrollment nonce is not 16 to 64 bytes")
    except ProtocolError as exc:
        raise InvalidArgument(str(exc)) from exc
    if len(enrollment) > ENROLLMENT_MAX or len(enrollment) < ENROLLMENT_FIXED + 1:
        raise MalformedMessage("enrollment of the wrong length")
    if enrollment[0] != VERSION:
        raise MalformedMessage("enrollment of another version")
    pk, n = enrollment[1:33], enrollment[33]
    if len(enrollment) != ENROLLMENT_FIXED + n:
        raise MalformedMessage("enrollment of the wrong length")
    label, sig = enrollment[34:34 + n], enrollment[34 + n:]
    try:
        validate_name(label)
    except ProtocolError as exc:
        raise MalformedMessage(str(exc)) from exc
    if not ed25519_verify_strict(pk, sig, enroll_message(service_id, nonce, pk, label)):
        raise AuthenticationFailed("enrollment signature does not verify")
    return Credential(credential_id(pk), pk, label)


# --------------------------------------------------------------------------------------------
# 19.3 The request
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Request:
    service_id: bytes
    service_name: bytes
    session_id: bytes
    otp: bytes
    nonce: bytes
    issued_at: int
    expires_at: int
    scopes: tuple[bytes, ...]


def _check_request(r: Request) -> None:
    check_service_id(r.service_id)
    validate_name(r.service_name)
    check_session_id(r.session_id)
    check_otp(r.otp)
    if len(r.nonce) != REQUEST_NONCE_BYTES:
        raise ProtocolError("request nonce is not 32 bytes")
    check_time(r.issued_at, "issued_at")
    check_time(r.expires_at, "expires_at")
    if not r.issued_at < r.expires_at <= r.issued_at + LIFETIME_MAX:
        raise ProtocolError("a request lives 1 to 600 seconds")
    check_scopes(r.scopes)


def encode_request(r: Request) -> bytes:
    """The request bytes from its fields; fields breaking 19.1 raise InvalidArgument."""
    try:
        _check_request(r)
    except ProtocolError as exc:
        raise InvalidArgument(str(exc)) from exc
    return (u8(VERSION) + u8(len(r.service_id)) + r.service_id
            + u8(len(r.service_name)) + r.service_name + u8(len(r.session_id)) + r.session_id
            + r.otp + r.nonce + u64(r.issued_at) + u64(r.expires_at) + encode_scopes(r.scopes))


def parse_request(data: bytes, error: type[Refusal] = MalformedMessage) -> Request:
    """Strict parse (19.3): version 1, every rule of 19.1, the exact length, the lifetime."""
    try:
        if len(data) > REQUEST_MAX:
            raise ProtocolError("request longer than the maximum")
        rd = _Reader(data)
        if rd.u8() != VERSION:
            raise ProtocolError("request of another version")
        r = Request(service_id=rd.lv8(), service_name=rd.lv8(), session_id=rd.lv8(),
                    otp=rd.take(OTP_BYTES), nonce=rd.take(REQUEST_NONCE_BYTES),
                    issued_at=rd.u64(), expires_at=rd.u64(), scopes=tuple(rd.scopes()))
        rd.end()
        _check_request(r)
    except ProtocolError as exc:
        if isinstance(exc, Refusal):
            raise
        raise error(str(exc)) from exc
    return r


def device_read_request(data: bytes, now: int, enrolled_service_ids: Iterable[bytes]) -> Request:
    """The device side of 19.3, in order: malformed_message, expired, not_found."""
    r = parse_request(data)
    if now > r.expires_at:
        raise Expired("the request has expired")
    if r.service_id not in set(enrolled_service_ids):
        raise NotFound("no credential for this service_id")
    return r


# --------------------------------------------------------------------------------------------
# 19.4 The approval
# --------------------------------------------------------------------------------------------

def approval_message(request: bytes, r: Request, cred_id: bytes, timestamp: int,
                     granted: Iterable[bytes], decision: int) -> bytes:
    """lv_cat('itsme-approval-v1', service_id, credential_id, nonce, SHA-256(request),
    session_id, otp, u64(timestamp), lv_cat(granted...), u8(decision))."""
    return lv_cat(APPROVAL_LABEL, r.service_id, cred_id, r.nonce, sha256(request), r.session_id,
                  r.otp, u64(timestamp), signed_scopes(granted), u8(decision))


@dataclass(frozen=True)
class Approval:
    credential_id: bytes
    decision: int
    timestamp: int
    otp: bytes
    granted: tuple[bytes, ...]
    signature: bytes
    message: bytes | None = None    # the signed message (when built here)
    approval: bytes | None = None   # the encoded approval (when built here)


def sign_approval(seed: bytes, request: bytes, decision: int, granted: Iterable[bytes],
                  now: int) -> Approval:
    """The device side of 19.4, signing at ``now``.  The request is read as in 19.3
    (malformed_message, expired); a decision other than 1 or 2, a scope with a deny, or a
    granted scope not requested is invalid_argument."""
    r = parse_request(request)
    if now > r.expires_at:
        raise Expired("the request has expired")
    granted = tuple(sorted(set(bytes(s) for s in granted)))
    try:
        check_time(now, "timestamp")
    except ProtocolError as exc:
        raise InvalidArgument(str(exc)) from exc
    if decision not in (APPROVE, DENY):
        raise InvalidArgument("decision is 1 (approve) or 2 (deny)")
    if decision == DENY and granted:
        raise InvalidArgument("a denial grants no scope")
    if any(s not in r.scopes for s in granted):
        raise InvalidArgument("a granted scope was not requested")
    pk = ed25519_public(seed)
    cid = credential_id(pk)
    msg = approval_message(request, r, cid, now, granted, decision)
    sig = ed25519_sign(seed, msg)
    data = (u8(VERSION) + cid + u8(decision) + u64(now) + r.otp + encode_scopes(granted) + sig)
    assert len(data) <= APPROVAL_MAX
    return Approval(cid, decision, now, r.otp, granted, sig, msg, data)


def parse_approval(data: bytes) -> Approval:
    """Strict parse (19.5 step 1): version 1, decision 1 or 2, no scope with a deny, scopes in
    strictly increasing order, the exact length.  The other rules of 19.1 (six digits, the time
    range, the scope format and count) are applied too: see the notes on 19.5."""
    try:
        if len(data) > APPROVAL_MAX:
            raise ProtocolError("approval longer than the maximum")
        rd = _Reader(data)
        if rd.u8() != VERSION:
            raise ProtocolError("approval of another version")
        cid = rd.take(CREDENTIAL_ID_BYTES)
        decision = rd.u8()
        if decision not in (APPROVE, DENY):
            raise ProtocolError("decision is not 1 or 2")
        timestamp = rd.u64()
        otp = rd.take(OTP_BYTES)
        granted = tuple(rd.scopes())
        sig = rd.take(64)
        rd.end()
        if decision == DENY and granted:
            raise ProtocolError("a denial carries a scope")
        check_scopes(granted)
        check_otp(otp)
        check_time(timestamp, "timestamp")
    except ProtocolError as exc:
        raise MalformedMessage(str(exc)) from exc
    return Approval(cid, decision, timestamp, otp, granted, sig, None, bytes(data))


# --------------------------------------------------------------------------------------------
# 19.5 Verifying
# --------------------------------------------------------------------------------------------

def replay_key(service_id: bytes, nonce: bytes) -> bytes:
    return sha256(lv_cat(REPLAY_LABEL, service_id, nonce))


@dataclass(frozen=True)
class Verified:
    decision: int
    credential_id: bytes
    timestamp: int
    granted: tuple[bytes, ...]


def verify_approval(request: bytes, approval: bytes, enrolled_keys: Iterable[bytes], now: int,
                    replay_store: dict[bytes, int]) -> Verified:
    """19.5 in order.  ``replay_store`` maps replay keys to the expires_at they are kept until;
    entries whose expires_at is before ``now`` are dropped (step 2 refuses them anyway)."""
    try:                                                                     # step 1
        r = parse_request(request)
    except MalformedMessage as exc:
        raise InvalidArgument(f"own request: {exc.reason}") from exc
    a = parse_approval(approval)
    if now > r.expires_at:                                                   # step 2
        raise Expired("the request has expired")
    keys = {credential_id(pk): pk for pk in enrolled_keys}                  # step 3
    pk = keys.get(a.credential_id)
    if pk is None:
        raise NotFound("credential not enrolled")
    if not hmac.compare_digest(a.otp, r.otp):                                # step 4
        raise AuthenticationFailed("OTP differs")
    if any(s not in r.scopes for s in a.granted):                            # step 5
        raise MalformedMessage("a granted scope was not requested")
    msg = approval_message(request, r, a.credential_id, a.timestamp, a.granted, a.decision)
    if not ed25519_verify_strict(pk, a.signature, msg):                      # step 6
        raise AuthenticationFailed("signature does not verify")
    for k in [k for k, exp in replay_store.items() if exp < now]:            # step 7
        del replay_store[k]
    key = replay_key(r.service_id, r.nonce)
    if key in replay_store:
        raise Replayed("this request was answered already")
    replay_store[key] = r.expires_at
    return Verified(a.decision, a.credential_id, a.timestamp, a.granted)


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
    assert (ENROLLMENT_MAX, REQUEST_MAX, APPROVAL_MAX) == (226, 2650, 2177)
    assert SCOPES_LIST_MAX + SCOPES_MAX * 0 == 2081

    seed, other_seed = bytes([1]) * 32, bytes([2]) * 32
    sid, enonce = b"bank.example", bytes(range(16))
    e = enroll(seed, sid, enonce, "Alice's phone".encode())
    assert len(e.enrollment) == 98 + len("Alice's phone")
    c = verify_enrollment(sid, enonce, e.enrollment)
    assert (c.public_key, c.credential_id) == (e.credential_pk, e.credential_id)
    _expect("authentication_failed", verify_enrollment, sid, bytes(16), e.enrollment)
    _expect("authentication_failed", verify_enrollment, b"other.example", enonce, e.enrollment)
    _expect("invalid_argument", verify_enrollment, sid, bytes(15), e.enrollment)
    _expect("invalid_argument", verify_enrollment, b"a b", enonce, e.enrollment)
    _expect("malformed_message", verify_enrollment, sid, enonce, e.enrollment[:-1])
    _expect("malformed_message", verify_enrollment, sid, enonce, b"\x02" + e.enrollment[1:])
    t = bytearray(e.enrollment)
    t[-1] ^= 1
    _expect("authentication_failed", verify_enrollment, sid, enonce, bytes(t))
    # A small-order public key (the identity point) with a forged signature: refused.
    ident = (1).to_bytes(32, "little")
    forged = u8(1) + ident + u8(1) + b"L" + ident + bytes(32)
    _expect("authentication_failed", verify_enrollment, sid, enonce, forged)
    # Largest enrollment.
    assert len(enroll(seed, sid, enonce, b"L" * 128).enrollment) == ENROLLMENT_MAX

    req = Request(sid, b"Bank", b"sess-1", b"042137", bytes([5]) * 32, 1_700_000_000,
                  1_700_000_120, (b"email", b"pay", b"profile"))
    rb = encode_request(req)
    assert parse_request(rb) == req
    assert device_read_request(rb, 1_700_000_120, [sid]) == req
    _expect("expired", device_read_request, rb, 1_700_000_121, [sid])
    _expect("not_found", device_read_request, rb, 1_700_000_000, [b"x"])
    for bad in (rb + b"\0", rb[:-1], b"\x02" + rb[1:]):
        _expect("malformed_message", parse_request, bad)
    for field, value in (("scopes", (b"pay", b"email")), ("scopes", (b"a", b"a")),
                         ("otp", b"12345a"), ("expires_at", 1_700_000_601),
                         ("expires_at", 1_700_000_000), ("session_id", b"a b"),
                         ("nonce", bytes(31)), ("service_name", b""),
                         ("scopes", tuple(bytes([0x41 + i]) for i in range(33)))):
        _expect("invalid_argument", encode_request, Request(**{**req.__dict__, field: value}))
    big = Request(b"s" * 255, b"n" * 128, b"i" * 128, b"000000", bytes(32), TIME_MAX - 600,
                  TIME_MAX, tuple(bytes([0x21 + i]) + b"x" * 63 for i in range(32)))
    bb = encode_request(big)
    assert len(bb) == REQUEST_MAX and parse_request(bb) == big
    big_ap = sign_approval(seed, bb, APPROVE, big.scopes, TIME_MAX)
    assert len(big_ap.approval) == APPROVAL_MAX

    now, keys = 1_700_000_010, [ed25519_public(other_seed), e.credential_pk]

    # Approve with some scopes; verify; replay.
    ap = sign_approval(seed, rb, APPROVE, [b"pay", b"email"], now)
    store: dict[bytes, int] = {}
    v = verify_approval(rb, ap.approval, keys, now + 5, store)
    assert v == Verified(APPROVE, e.credential_id, now, (b"email", b"pay"))
    _expect("replayed", verify_approval, rb, ap.approval, keys, now + 6, store)
    # A denial of the same request shares the key.
    dn = sign_approval(seed, rb, DENY, [], now)
    _expect("replayed", verify_approval, rb, dn.approval, keys, now + 6, store)
    store = {}
    assert verify_approval(rb, dn.approval, keys, now, store).decision == DENY
    # Each refusal.
    _expect("invalid_argument", verify_approval, rb[:-1], ap.approval, keys, now, {})
    _expect("malformed_message", verify_approval, rb, ap.approval[:-1], keys, now, {})
    _expect("expired", verify_approval, rb, ap.approval, keys, req.expires_at + 1, {})
    _expect("not_found", verify_approval, rb, ap.approval, keys[:1], now, {})
    wrong_otp = bytearray(ap.approval)
    wrong_otp[26] = ord("9") if wrong_otp[26] != ord("9") else ord("8")
    _expect("authentication_failed", verify_approval, rb, bytes(wrong_otp), keys, now, {})
    # Scope not requested: a device that signs it anyway.
    other_req = encode_request(Request(**{**req.__dict__, "scopes": (b"admin", b"email")}))
    rogue = sign_approval(seed, other_req, APPROVE, [b"admin"], now)
    _expect("malformed_message", verify_approval, rb, rogue.approval, keys, now, {})
    _expect("invalid_argument", sign_approval, seed, rb, APPROVE, [b"admin"], now)
    _expect("invalid_argument", sign_approval, seed, rb, DENY, [b"pay"], now)
    _expect("invalid_argument", sign_approval, seed, rb, 3, [], now)
    # Bad signature; an answer to another request; a changed decision or timestamp.
    bad_sig = bytearray(ap.approval)
    bad_sig[-1] ^= 1
    _expect("authentication_failed", verify_approval, rb, bytes(bad_sig), keys, now, {})
    other_nonce = encode_request(Request(**{**req.__dict__, "nonce": bytes([6]) * 32}))
    ap2 = sign_approval(seed, other_nonce, APPROVE, [b"pay"], now)
    _expect("authentication_failed", verify_approval, rb, ap2.approval, keys, now, {})
    flipped = bytearray(dn.approval)
    flipped[17] = APPROVE
    _expect("authentication_failed", verify_approval, rb, bytes(flipped), keys, now, {})
    later = bytearray(ap.approval)
    later[25] ^= 1
    _expect("authentication_failed", verify_approval, rb, bytes(later), keys, now, {})
    # A failed answer does not spend the request.
    store = {}
    _expect("authentication_failed", verify_approval, rb, bytes(bad_sig), keys, now, store)
    assert not store and verify_approval(rb, ap.approval, keys, now, store)
    # Malformed approvals.
    deny_scope = bytearray(ap.approval)
    deny_scope[17] = DENY
    _expect("malformed_message", verify_approval, rb, bytes(deny_scope), keys, now, {})
    dec3 = bytearray(ap.approval)
    dec3[17] = 3
    _expect("malformed_message", verify_approval, rb, bytes(dec3), keys, now, {})
    print("approval: self-check passed")


if __name__ == "__main__":
    _self_check()
