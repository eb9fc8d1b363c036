"""Replay Tests/ProtocolVectors/profile.json and approval.json through the independent
implementations of docs/PROTOCOL.md sections 18 (spec/independent/profile.py) and 19
(spec/independent/approval.py), written from that document alone.

Agreement here shows that the document determines every value in those vectors: for
profile.json every intermediate of every record (k1 to k3, each field's ciphertext, MAC input
and MAC, the record MAC input and MAC, the record ID, the record, the reference) is recomputed
from the record key, the nonces, the values and the owner's key, and every refusal is refused
with the class the vectors name; for approval.json every listed value is recomputed from the
inputs the vectors give, and every refusal is refused with its class.  Then the two
implementations are run against each other: a record sealed here opens with the binding's
``Profile.open``, and an enrollment and approval made here verify with the binding's
``verify_enrollment`` and ``verify_approval``.
"""

from __future__ import annotations

import os
import pathlib
import sys

import pytest

import itsme

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from independent import approval as A  # noqa: E402
from independent import profile as PR  # noqa: E402
from independent import protocol as P  # noqa: E402
from test_protocol_independent import _cases, expect_keys, h, load  # noqa: E402


def refused(refusal: str, fn, *args, **kwargs):
    """``fn`` raises the independent code's refusal of class ``refusal``."""
    with pytest.raises(PR.Refusal) as caught:
        fn(*args, **kwargs)
    assert caught.value.refusal == refusal, f"expected {refusal}, got {caught.value}"


# The binding's error class for each of the document's refusal names.
BINDING_ERRORS = {
    "invalid_argument": itsme.InvalidArgumentError,
    "malformed_message": itsme.MalformedMessageError,
    "authentication_failed": itsme.AuthenticationFailedError,
    "expired": itsme.ExpiredError,
    "not_found": itsme.NotFoundError,
    "replayed": itsme.ReplayedError,
}


# --------------------------------------------------------------------------------------------
# profile.json (section 18)
# --------------------------------------------------------------------------------------------

RECORD_KEYS = ("fields k1 k2 k3 name_text photo_filename_text random_seed record record_id "
               "record_key record_mac record_mac_input record_name_text reference size")
FIELD_KEYS = "ciphertext field_name_text mac mac_input nonce value"


def _profile():
    data = load("profile.json")
    expect_keys(data, "max_record_bytes owner_public owner_seed records refusals")
    return data


def test_profile_constants_and_owner():
    data = _profile()
    assert data["max_record_bytes"] == PR.RECORD_MAX == 262_144
    assert PR.RECORD_OVERHEAD == 177
    assert P.ed25519_public(h(data["owner_seed"])).hex() == data["owner_public"]


def _record_ids():
    try:
        return [case["name_text"] or case["photo_filename_text"] or str(i)
                for i, case in enumerate(load("profile.json")["records"])]
    except BaseException:  # collected without vectors: the test itself skips or fails
        return None


@pytest.mark.parametrize("index", range(3), ids=_record_ids())
def test_profile_record_every_intermediate(index):
    data = _profile()
    records = _cases(data, "records")
    assert len(records) == 3, "profile.json now has another number of records: update this test"
    case = records[index]
    expect_keys(case, RECORD_KEYS)
    owner = h(data["owner_public"])
    fields = case["fields"]
    assert [f["field_name_text"].encode() for f in fields] == list(PR.FIELD_NAMES)
    for f in fields:
        expect_keys(f, FIELD_KEYS)
    name, photo, filename = (h(f["value"]) for f in fields)
    assert name == case["name_text"].encode()
    assert filename == case["photo_filename_text"].encode()
    record_key = h(case["record_key"])
    nonces = [h(f["nonce"]) for f in fields]

    # Step by step, each value from the document's formulas.
    k1, k2, k3 = PR.record_keys(record_key)
    assert (k1.hex(), k2.hex(), k3.hex()) == (case["k1"], case["k2"], case["k3"])
    macs = []
    for f, field_name, nonce, value in zip(fields, PR.FIELD_NAMES, nonces, (name, photo, filename)):
        ct = PR.chacha20_xor(k1, nonce, value)
        assert ct.hex() == f["ciphertext"], f["field_name_text"]
        mac_input = P.lv_cat(P.u8(1), field_name, nonce, ct)
        assert mac_input.hex() == f["mac_input"], f["field_name_text"]
        mac = PR.field_mac(k2, field_name, nonce, ct)
        assert mac == P.hmac_sha256(k2, mac_input)
        assert mac.hex() == f["mac"], f["field_name_text"]
        macs.append(mac)
    record_mac_input = P.lv_cat(P.u8(1), *macs, owner)
    assert record_mac_input.hex() == case["record_mac_input"]
    record_mac = PR.record_mac_of(k3, macs, owner)
    assert record_mac == P.hmac_sha256(k3, record_mac_input)
    assert record_mac.hex() == case["record_mac"]
    assert record_mac[:16].hex() == case["record_id"] == case["record_name_text"]

    # The whole seal.
    sealed = PR.seal(record_key, nonces, name, photo, filename, owner)
    assert sealed.record.hex() == case["record"]
    assert sealed.record_id.hex() == case["record_id"]
    assert sealed.record_name == case["record_name_text"]
    assert sealed.reference.hex() == case["reference"] == case["record_id"] + case["record_key"]
    assert len(sealed.record) == case["size"] == PR.record_size(name, photo, filename)
    assert [c.hex() for c in sealed.cts] == [f["ciphertext"] for f in fields]
    assert [m.hex() for m in sealed.macs] == [f["mac"] for f in fields]

    # The record's layout, and opening it.
    record = h(case["record"])
    expected = P.u8(1) + b"".join(
        h(f["nonce"]) + len(h(f["ciphertext"])).to_bytes(4, "big") + h(f["ciphertext"]) + h(f["mac"])
        for f in fields) + h(case["record_mac"])
    assert record == expected
    opened = PR.open_record(record, h(case["reference"]), owner)
    assert (opened.name, opened.photo, opened.filename) == (name, photo, filename)


def _refusal_ids():
    try:
        return [case["case_text"] for case in load("profile.json")["refusals"]]
    except BaseException:
        return None


def _refusal_cases():
    try:
        return list(range(len(load("profile.json")["refusals"])))
    except BaseException:
        return [0]


def _refusal_record(case) -> bytes:
    if "record_zero_bytes" in case:
        expect_keys(case, "case_text error_text owner_public record_zero_bytes reference")
        return bytes(int(case["record_zero_bytes"]))
    expect_keys(case, "case_text error_text owner_public record reference")
    return h(case["record"])


@pytest.mark.parametrize("index", _refusal_cases(), ids=_refusal_ids())
def test_profile_refusal(index):
    case = _cases(_profile(), "refusals")[index]
    record = _refusal_record(case)
    refused(case["error_text"], PR.open_record, record, h(case["reference"]), h(case["owner_public"]))


def test_profile_refusals_agree_with_the_binding():
    for case in _cases(_profile(), "refusals"):
        record = _refusal_record(case)
        with pytest.raises(BINDING_ERRORS[case["error_text"]]):
            itsme.Profile.open(record, h(case["reference"]), h(case["owner_public"]))


def test_profile_vectors_open_with_the_binding():
    data = _profile()
    owner = h(data["owner_public"])
    for case in _cases(data, "records"):
        name, photo, filename = (h(f["value"]) for f in case["fields"])
        with itsme.Profile.open(h(case["record"]), h(case["reference"]), owner) as opened:
            assert opened.name == name.decode()
            assert opened.photo == photo
            assert opened.photo_filename == filename.decode()
            assert opened.record == h(case["record"])
            assert opened.record_id == h(case["record_id"])
            assert opened.record_name == case["record_name_text"]
            assert opened.reference == h(case["reference"])


def test_a_record_sealed_here_opens_with_the_binding(identity):
    owner = identity.public_key
    photo = os.urandom(3000)
    for name, picture, filename in (("Zoë Example", photo, "zoe.png"), ("名前", b"", ""), ("", b"\xff", "")):
        sealed = PR.seal(os.urandom(16), [os.urandom(12) for _ in range(3)], name.encode(), picture,
                         filename.encode(), owner)
        with itsme.Profile.open(sealed.record, sealed.reference, owner) as opened:
            assert (opened.name, opened.photo, opened.photo_filename) == (name, picture, filename)
            assert opened.record_name == sealed.record_name
        # The same record read as another owner's, or with another reference, is refused.
        with pytest.raises(itsme.AuthenticationFailedError):
            itsme.Profile.open(sealed.record, sealed.reference, P.ed25519_public(os.urandom(32)))
        wrong = bytearray(sealed.reference)
        wrong[-1] ^= 1
        with pytest.raises(itsme.AuthenticationFailedError):
            itsme.Profile.open(sealed.record, bytes(wrong), owner)


def test_a_record_sealed_by_the_binding_opens_here(identity):
    photo = os.urandom(500)
    with itsme.Profile.create(identity, name="Alice", photo=photo, photo_filename="a.jpg") as profile:
        record, reference, record_id = profile.record, profile.reference, profile.record_id
    assert reference[:16] == record_id
    opened = PR.open_record(record, reference, identity.public_key)
    assert (opened.name, opened.photo, opened.filename) == (b"Alice", photo, b"a.jpg")
    refused("authentication_failed", PR.open_record, record, reference, P.ed25519_public(bytes(32)))


# --------------------------------------------------------------------------------------------
# approval.json (section 19)
# --------------------------------------------------------------------------------------------

ENROLLMENT_KEYS = ("random_seed credential_seed service_id_text nonce label_text public_key "
                   "credential_id signed_message signature enrollment credential_item_text "
                   "credential_item")
REQUEST_KEYS = ("random_seed service_id_text service_name_text session_id_text scopes_given_text "
                "scopes_text lifetime now nonce otp_random otp_text issued_at expires_at request "
                "request_hash replay_key")
APPROVAL_KEYS = ("case_text enrollment request decision granted_given_text granted_text timestamp "
                 "request_hash signed_message signature approval public_keys verify_now "
                 "credential_id")
OTP_BOUND = 4_294_000_000


def _approval():
    data = load("approval.json")
    expect_keys(data, "enrollments requests approvals refusals request_refusals enrollment_refusals")
    return data


def scopes_of(text: str) -> list:
    """A space-separated scope list as bytes ("" for none)."""
    return [s.encode() for s in text.split(" ")] if text else []


def draw_otp(blocks) -> str:
    """19.3: r = be32 of 4 random bytes, drawn again while r >= 4,294,000,000; r mod 10^6 as
    six digits.  ``blocks`` are the draws in order; every one but the last is rejected."""
    for i, block in enumerate(blocks):
        assert len(block) == 4
        r = int.from_bytes(block, "big")
        if r < OTP_BOUND:
            assert i == len(blocks) - 1, "a draw after an accepted one"
            return f"{r % 1_000_000:06d}"
    raise AssertionError("every draw was rejected")


def credential_item_name(service_id: bytes) -> str:
    """docs/STORAGE.md: itsme.credential.<first 16 bytes of SHA-256(lv_cat(label, service_id))>."""
    return "itsme.credential." + P.sha256(P.lv_cat(b"itsme-credential-name-v1", service_id))[:16].hex()


def test_otp_draw_rule():
    assert draw_otp([(4_293_999_999).to_bytes(4, "big")]) == "999999"
    assert draw_otp([(OTP_BOUND).to_bytes(4, "big"), (0xFFFFFFFF).to_bytes(4, "big"),
                     (1_000_042).to_bytes(4, "big")]) == "000042"


@pytest.mark.parametrize("index", range(2))
def test_approval_enrollment(index):
    enrollments = _cases(_approval(), "enrollments")
    assert len(enrollments) == 2, "approval.json now has another number of enrollments: update this test"
    case = enrollments[index]
    expect_keys(case, ENROLLMENT_KEYS)
    seed, nonce = h(case["credential_seed"]), h(case["nonce"])
    service_id, label = case["service_id_text"].encode(), case["label_text"].encode()
    pk = P.ed25519_public(seed)
    assert pk.hex() == case["public_key"]
    assert A.credential_id(pk).hex() == case["credential_id"]
    assert P.sha256(P.lv_cat(b"itsme-credential-id-v1", pk))[:16].hex() == case["credential_id"]
    message = P.lv_cat(b"itsme-enroll-v1", service_id, nonce, pk, label)
    assert message.hex() == case["signed_message"]
    enrollment = A.enroll(seed, service_id, nonce, label)
    assert enrollment.signed_message.hex() == case["signed_message"]
    assert enrollment.signature.hex() == case["signature"]
    assert enrollment.enrollment.hex() == case["enrollment"]
    assert h(case["enrollment"]) == P.u8(1) + pk + P.u8(len(label)) + label + h(case["signature"])
    credential = A.verify_enrollment(service_id, nonce, h(case["enrollment"]))
    assert (credential.credential_id.hex(), credential.public_key.hex(), credential.label) == (
        case["credential_id"], case["public_key"], label)
    # The device's secret store item (docs/STORAGE.md, not PROTOCOL.md).
    assert case["credential_item_text"] == credential_item_name(service_id)
    item = P.u8(1) + seed + P.u8(len(service_id)) + service_id + P.u8(len(label)) + label
    assert item.hex() == case["credential_item"]


def test_approval_enrollments_are_two_devices_of_one_service():
    first, second = _cases(_approval(), "enrollments")
    assert first["service_id_text"] == second["service_id_text"]
    assert first["credential_id"] != second["credential_id"]


@pytest.mark.parametrize("index", range(3))
def test_approval_request(index):
    requests = _cases(_approval(), "requests")
    assert len(requests) == 3, "approval.json now has another number of requests: update this test"
    case = requests[index]
    expect_keys(case, REQUEST_KEYS)
    given = scopes_of(case["scopes_given_text"])
    scopes = tuple(sorted(given))
    assert b" ".join(scopes).decode() == case["scopes_text"]
    otp = draw_otp([h(block) for block in case["otp_random"]])
    assert otp == case["otp_text"]
    assert case["issued_at"] == case["now"]
    assert case["expires_at"] == case["now"] + case["lifetime"]
    fields = A.Request(service_id=case["service_id_text"].encode(),
                       service_name=case["service_name_text"].encode(),
                       session_id=case["session_id_text"].encode(), otp=otp.encode(),
                       nonce=h(case["nonce"]), issued_at=case["issued_at"],
                       expires_at=case["expires_at"], scopes=scopes)
    request = A.encode_request(fields)
    assert request.hex() == case["request"]
    assert A.parse_request(request) == fields
    assert P.sha256(request).hex() == case["request_hash"]
    assert A.replay_key(fields.service_id, fields.nonce).hex() == case["replay_key"]
    assert P.sha256(P.lv_cat(b"itsme-approval-replay-v1", fields.service_id, fields.nonce)).hex() == \
        case["replay_key"]
    shown = A.device_read_request(request, case["expires_at"], [fields.service_id])
    assert shown == fields
    refused("expired", A.device_read_request, request, case["expires_at"] + 1, [fields.service_id])
    refused("not_found", A.device_read_request, request, case["now"], [b"other.example"])


def test_approval_second_request_has_no_scope():
    assert _cases(_approval(), "requests")[1]["scopes_text"] == ""


@pytest.mark.parametrize("index", range(3))
def test_approval_answer(index):
    data = _approval()
    approvals = _cases(data, "approvals")
    assert len(approvals) == 3, "approval.json now has another number of approvals: update this test"
    case = approvals[index]
    expect_keys(case, APPROVAL_KEYS)
    enrollment = data["enrollments"][case["enrollment"]]
    request_case = data["requests"][case["request"]]
    seed, request = h(enrollment["credential_seed"]), h(request_case["request"])
    assert P.sha256(request).hex() == case["request_hash"] == request_case["request_hash"]
    given = scopes_of(case["granted_given_text"])
    granted = sorted(given)
    assert b" ".join(granted).decode() == case["granted_text"]
    fields = A.parse_request(request)

    message = P.lv_cat(b"itsme-approval-v1", fields.service_id, h(enrollment["credential_id"]),
                       fields.nonce, P.sha256(request), fields.session_id, fields.otp,
                       P.u64(case["timestamp"]), P.lv_cat(*granted), P.u8(case["decision"]))
    assert message.hex() == case["signed_message"]
    answer = A.sign_approval(seed, request, case["decision"], given, case["timestamp"])
    assert answer.message.hex() == case["signed_message"]
    assert answer.signature.hex() == case["signature"]
    assert answer.approval.hex() == case["approval"]
    assert h(case["approval"]) == (P.u8(1) + h(enrollment["credential_id"]) + P.u8(case["decision"])
                                   + P.u64(case["timestamp"]) + fields.otp
                                   + A.encode_scopes(granted) + h(case["signature"]))
    assert case["credential_id"] == enrollment["credential_id"]
    keys = [h(k) for k in case["public_keys"]]
    assert sorted(case["public_keys"]) == sorted(e["public_key"] for e in data["enrollments"])
    store: dict = {}
    result = A.verify_approval(request, h(case["approval"]), keys, case["verify_now"], store)
    assert result == A.Verified(case["decision"], h(case["credential_id"]), case["timestamp"], tuple(granted))
    assert list(store) == [h(request_case["replay_key"])]
    refused("replayed", A.verify_approval, request, h(case["approval"]), keys, case["verify_now"], store)


def _ids(key, field="case_text"):
    try:
        return [case[field] for case in load("approval.json")[key]]
    except BaseException:  # collected without vectors: the test itself skips or fails
        return None


def _indices(key):
    try:
        return list(range(len(load("approval.json")[key])))
    except BaseException:
        return [0]


@pytest.mark.parametrize("index", _indices("refusals"), ids=_ids("refusals"))
def test_approval_refusal(index):
    case = _cases(_approval(), "refusals")[index]
    expect_keys(case, "case_text request approvals public_keys now error_text")
    request, keys, now = h(case["request"]), [h(k) for k in case["public_keys"]], case["now"]
    answers = [h(a) for a in case["approvals"]]
    assert answers
    store: dict = {}
    for answer in answers[:-1]:
        before = dict(store)
        try:
            A.verify_approval(request, answer, keys, now, store)
        except PR.Refusal:
            assert store == before, "a refused answer changed the replay store"
            assert not store, "a forgery before the last answer must leave the replay store empty"
    refused(case["error_text"], A.verify_approval, request, answers[-1], keys, now, store)


@pytest.mark.parametrize("index", _indices("request_refusals"), ids=_ids("request_refusals"))
def test_approval_request_refusal(index):
    data = _approval()
    case = _cases(data, "request_refusals")[index]
    expect_keys(case, "case_text request now error_text")
    enrolled = {e["service_id_text"].encode() for e in data["enrollments"]}
    refused(case["error_text"], A.device_read_request, h(case["request"]), case["now"], enrolled)


@pytest.mark.parametrize("index", _indices("enrollment_refusals"), ids=_ids("enrollment_refusals"))
def test_approval_enrollment_refusal(index):
    case = _cases(_approval(), "enrollment_refusals")[index]
    expect_keys(case, "case_text service_id_text nonce enrollment error_text")
    refused(case["error_text"], A.verify_enrollment, case["service_id_text"].encode(), h(case["nonce"]),
            h(case["enrollment"]))


# --------------------------------------------------------------------------------------------
# Section 19: the independent code and the binding, against each other
# --------------------------------------------------------------------------------------------

SERVICE = "bank.example"


def test_an_enrollment_and_approval_made_here_verify_with_the_binding():
    seed, nonce, now = os.urandom(32), os.urandom(32), 1_800_000_000
    enrollment = A.enroll(seed, SERVICE.encode(), nonce, "Zoë's tablet".encode())
    credential = itsme.verify_enrollment(SERVICE, nonce, enrollment.enrollment)
    assert (credential.credential_id, credential.public_key, credential.label) == (
        enrollment.credential_id, enrollment.credential_pk, "Zoë's tablet")
    with pytest.raises(itsme.AuthenticationFailedError):
        itsme.verify_enrollment(SERVICE, os.urandom(32), enrollment.enrollment)

    other_key = P.ed25519_public(os.urandom(32))
    keys = [other_key, credential.public_key]
    # A request made by the binding, answered here.
    request = itsme.create_approval_request(SERVICE, "Example Bank", "login-1", ["profile", "email", "pay"], 120, now)
    answer = A.sign_approval(seed, request, A.APPROVE, [b"pay", b"email"], now + 5)
    with itsme.ReplayStore.memory() as replay:
        result = itsme.verify_approval(request, answer.approval, keys, replay, now + 6)
        assert result.decision == itsme.ApprovalDecision.APPROVE
        assert result.credential_id == enrollment.credential_id
        assert result.timestamp == now + 5
        assert result.granted_scopes == ("email", "pay")
        with pytest.raises(itsme.ReplayedError):
            itsme.verify_approval(request, answer.approval, keys, replay, now + 7)
    # A request made here, denied here.
    fields = A.Request(SERVICE.encode(), "Exämple Bänk".encode(), b"tx-9", b"000123", os.urandom(32),
                       now, now + 600, ())
    request = A.encode_request(fields)
    denial = A.sign_approval(seed, request, A.DENY, [], now + 600)
    shown = itsme.ApprovalRequest.parse(request, now + 600)
    assert (shown.service_name, shown.otp, shown.scopes, shown.expires_at) == (
        "Exämple Bänk", "000123", (), now + 600)
    with itsme.ReplayStore.memory() as replay:
        result = itsme.verify_approval(request, denial.approval, keys, replay, now + 600)
        assert (result.decision, result.granted_scopes) == (itsme.ApprovalDecision.DENY, ())
        with pytest.raises(itsme.ExpiredError):
            itsme.verify_approval(request, denial.approval, keys, replay, now + 601)
    # A tampered answer made here is refused by the binding too.
    # (and, being refused, it does not spend the request).
    request = itsme.create_approval_request(SERVICE, "Example Bank", "login-2", ["email"], 60, now)
    answer = A.sign_approval(seed, request, A.APPROVE, [b"email"], now)
    tampered = bytearray(answer.approval)
    tampered[-1] ^= 1
    with itsme.ReplayStore.memory() as replay:
        with pytest.raises(itsme.AuthenticationFailedError):
            itsme.verify_approval(request, bytes(tampered), keys, replay, now)
        assert itsme.verify_approval(request, answer.approval, keys, replay, now).granted_scopes == ("email",)


def test_an_approval_signed_by_the_binding_verifies_here():
    now = 1_800_000_000
    with itsme.SecretStore.memory() as device:
        nonce = os.urandom(16)
        enrollment = itsme.enroll(device, SERVICE, "Phone", nonce)
        credential = A.verify_enrollment(SERVICE.encode(), nonce, enrollment)
        assert credential.credential_id == itsme.credential_id(device, SERVICE)
        fields = A.Request(SERVICE.encode(), b"Example Bank", b"s-1", b"424242", os.urandom(32), now, now + 30,
                           (b"a", b"ab", b"b"))
        request = A.encode_request(fields)
        approval = itsme.sign_approval(device, request, itsme.ApprovalDecision.APPROVE, ["b", "a"], now)
    store: dict = {}
    result = A.verify_approval(request, approval, [credential.public_key], now + 30, store)
    assert result == A.Verified(A.APPROVE, credential.credential_id, now, (b"a", b"b"))
    refused("replayed", A.verify_approval, request, approval, [credential.public_key], now + 30, store)


def test_approval_vectors_with_the_binding():
    """The vectors' draws through the binding's deterministic source, and its verifier on
    every answer and refusal, so that both implementations refuse with the same class."""
    data = _approval()
    for case in data["enrollments"]:
        with itsme.SecretStore.memory() as device:
            enrollment = itsme.enroll(device, case["service_id_text"], case["label_text"], h(case["nonce"]),
                                      rng=itsme.DeterministicRandom(h(case["random_seed"])))
            assert enrollment.hex() == case["enrollment"]
            assert itsme.credential_id(device, case["service_id_text"]).hex() == case["credential_id"]
    for case in data["requests"]:
        request = itsme.create_approval_request(
            case["service_id_text"], case["service_name_text"], case["session_id_text"],
            case["scopes_given_text"].split(), case["lifetime"], case["now"],
            rng=itsme.DeterministicRandom(h(case["random_seed"])))
        assert request.hex() == case["request"]
        assert itsme.ApprovalRequest.parse(request, case["now"]).otp == case["otp_text"]
    for case in data["approvals"]:
        with itsme.ReplayStore.memory() as replay:
            result = itsme.verify_approval(h(data["requests"][case["request"]]["request"]), h(case["approval"]),
                                           [h(k) for k in case["public_keys"]], replay, case["verify_now"])
        assert (int(result.decision), result.credential_id.hex(), result.timestamp,
                " ".join(result.granted_scopes)) == (case["decision"], case["credential_id"], case["timestamp"],
                                                     case["granted_text"])
    for case in data["refusals"]:
        keys = [h(k) for k in case["public_keys"]]
        with itsme.ReplayStore.memory() as replay:
            for answer in case["approvals"][:-1]:
                try:
                    itsme.verify_approval(h(case["request"]), h(answer), keys, replay, case["now"])
                except itsme.ItsMeError:
                    pass
            with pytest.raises(BINDING_ERRORS[case["error_text"]]):
                itsme.verify_approval(h(case["request"]), h(case["approvals"][-1]), keys, replay, case["now"])
    for case in data["request_refusals"]:
        with pytest.raises(BINDING_ERRORS[case["error_text"]]):
            itsme.ApprovalRequest.parse(h(case["request"]), case["now"])
    for case in data["enrollment_refusals"]:
        with pytest.raises(BINDING_ERRORS[case["error_text"]]):
            itsme.verify_enrollment(case["service_id_text"], h(case["nonce"]), h(case["enrollment"]))
