"""Service approvals through the Python binding (docs/PROTOCOL.md section 19):
a device enrolls with a service, the service asks, the person approves some
scopes or denies, the service verifies; every refusal of 19.5 by its
exception; replay stores in memory and in Python.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import os
import threading

import pytest

import itsme
from itsme import (
    ApprovalDecision,
    ApprovalRequest,
    ApprovalResult,
    AuthenticationFailedError,
    Credential,
    DeterministicRandom,
    ExpiredError,
    InvalidArgumentError,
    ItsMeError,
    LockedError,
    MalformedMessageError,
    NotFoundError,
    ReplayedError,
    ReplayStore,
    SecretStore,
    create_approval_request,
    credential_id,
    enroll,
    remove_credential,
    sign_approval,
    verify_approval,
    verify_enrollment,
)
from itsme import _approval

T0 = 1_800_000_000
SERVICE = "bank.example"
NAME = "Example Bank"
APPROVE, DENY = ApprovalDecision.APPROVE, ApprovalDecision.DENY
# docs/PROTOCOL.md 19.4: u8(1) || credential_id (16) || u8(decision) || u64(timestamp) || otp (6) || ...
OTP_AT = 1 + 16 + 1 + 8


def rng(label: str) -> DeterministicRandom:
    return DeterministicRandom(hashlib.sha256(label.encode()).digest())


class Device:
    """A device: a secret store holding its credential for SERVICE."""

    def __init__(self, label: str, store: SecretStore):
        self.label = label
        self.store = store
        self.nonce = os.urandom(32)
        self.enrollment = enroll(store, SERVICE, label, self.nonce)
        self.credential = verify_enrollment(SERVICE, self.nonce, self.enrollment)

    @property
    def key(self) -> bytes:
        return self.credential.public_key

    def sign(self, request, decision=APPROVE, granted=(), now=T0 + 5):
        return sign_approval(self.store, request, decision, granted, now)


@pytest.fixture
def devices():
    """Makes enrolled devices; closes their stores afterwards."""
    stores = []

    def make(label="Alice's phone", store=None):
        store = store or SecretStore.memory()
        stores.append(store)
        return Device(label, store)

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def replay():
    with ReplayStore.memory() as store:
        yield store


def ask(scopes=("profile", "email", "payments"), lifetime=120, now=T0, session="login-1", random=None):
    return create_approval_request(SERVICE, NAME, session, list(scopes), lifetime, now, rng=random)


# -- the whole flow ------------------------------------------------------------------------


def test_enroll_request_parse_sign_verify(devices, replay):
    phone = devices("Alice's phone")
    assert len(phone.enrollment) == 98 + len("Alice's phone".encode())
    assert phone.enrollment[0] == 1 and phone.enrollment[1:33] == phone.key
    assert phone.credential == Credential(credential_id(phone.store, SERVICE), phone.key, "Alice's phone")
    cid = hashlib.sha256(b"\x16itsme-credential-id-v1\x20" + phone.key).digest()[:16]
    assert phone.credential.credential_id == cid, "docs/PROTOCOL.md 19.2"
    request = ask(now=T0)
    shown = ApprovalRequest.parse(request, T0 + 1)
    assert (shown.service_id, shown.service_name, shown.session_id) == (SERVICE, NAME, "login-1")
    assert (shown.issued_at, shown.expires_at) == (T0, T0 + 120)
    assert shown.scopes == ("email", "payments", "profile"), "sorted"
    assert len(shown.otp) == 6 and shown.otp.isdigit()
    assert shown.otp.encode() in request
    approval = phone.sign(request, APPROVE, ["profile", "email"], now=T0 + 5)
    assert approval[0] == 1 and approval[1:17] == phone.credential.credential_id
    assert approval[OTP_AT : OTP_AT + 6] == shown.otp.encode()
    result = verify_approval(request, approval, [phone.key], replay, T0 + 6)
    assert result == ApprovalResult(APPROVE, phone.credential.credential_id, T0 + 5, ("email", "profile"))
    assert isinstance(result.decision, ApprovalDecision)
    # Nothing granted is an approval too.
    other = ask(session="login-2")
    nothing = phone.sign(other, APPROVE, [])
    assert verify_approval(other, nothing, [phone.key], replay, T0 + 6).granted_scopes == ()


def test_every_request_is_new(devices):
    first, second = ask(), ask()
    assert first != second
    assert ApprovalRequest.parse(first, T0).session_id == ApprovalRequest.parse(second, T0).session_id
    # The same random source makes the same request.
    assert ask(random=rng("request")) == ask(random=rng("request")) != ask(random=rng("other"))
    # A request without scopes.
    assert ApprovalRequest.parse(ask(scopes=()), T0).scopes == ()


def test_two_devices_of_one_user(devices, replay):
    phone, tablet = devices("Alice's phone"), devices("Alice's tablet")
    assert phone.credential.credential_id != tablet.credential.credential_id
    assert phone.key != tablet.key
    keys = [phone.key, tablet.key]
    for index, device in enumerate((phone, tablet)):
        request = ask(session=f"login-{index}")
        result = verify_approval(request, device.sign(request, APPROVE, ["email"]), keys, replay, T0 + 6)
        assert result.credential_id == device.credential.credential_id
        assert result.granted_scopes == ("email",)
    # Both answer one request: the first answer spends it.
    request = ask(session="both")
    verify_approval(request, tablet.sign(request, APPROVE, ["email"]), keys, replay, T0 + 6)
    with pytest.raises(ReplayedError):
        verify_approval(request, phone.sign(request, APPROVE, ["email"]), keys, replay, T0 + 7)


def test_deny(devices, replay):
    phone = devices()
    request = ask()
    denial = phone.sign(request, DENY, [])
    assert phone.sign(request, DENY, None) == denial, "None is no scope; the signature is deterministic"
    result = verify_approval(request, denial, [phone.key], replay, T0 + 6)
    assert (result.decision, result.granted_scopes, result.timestamp) == (DENY, (), T0 + 5)
    # A denial and an approval of one request share its replay key: the first counts.
    with pytest.raises(ReplayedError):
        verify_approval(request, phone.sign(request, APPROVE, ["email"]), [phone.key], replay, T0 + 7)
    with pytest.raises(InvalidArgumentError):
        phone.sign(request, DENY, ["email"])
    with pytest.raises(InvalidArgumentError):
        phone.sign(request, 3, [])
    assert int(itsme.APPROVAL_APPROVE) == 1 and int(itsme.APPROVAL_DENY) == 2


# -- what verification refuses (19.5) --------------------------------------------------------


def test_a_bad_signature_is_refused_and_does_not_spend_the_request(devices, replay):
    phone = devices()
    request = ask()
    approval = phone.sign(request, APPROVE, ["email"])
    for at in (len(approval) - 1, len(approval) - 64, len(approval) - 33):
        forged = approval[:at] + bytes([approval[at] ^ 0x01]) + approval[at + 1 :]
        with pytest.raises(AuthenticationFailedError) as caught:
            verify_approval(request, forged, [phone.key], replay, T0 + 6)
        assert caught.value.detail
    # The timestamp and the decision are signed too.
    for at in (OTP_AT - 1, 17):
        forged = approval[:at] + bytes([approval[at] ^ 0x03]) + approval[at + 1 :]
        with pytest.raises((AuthenticationFailedError, MalformedMessageError)):
            verify_approval(request, forged, [phone.key], replay, T0 + 6)
    assert verify_approval(request, approval, [phone.key], replay, T0 + 6).decision == APPROVE


def test_an_unknown_key_is_not_found(devices, replay):
    phone, stranger = devices("phone"), devices("stranger")
    request = ask()
    approval = phone.sign(request, APPROVE, ["email"])
    with pytest.raises(NotFoundError):
        verify_approval(request, approval, [stranger.key], replay, T0 + 6)
    with pytest.raises(NotFoundError):
        verify_approval(request, approval, [], replay, T0 + 6)
    # Another key under the signer's credential ID is not the signer's key.
    assert verify_approval(request, approval, [stranger.key, phone.key], replay, T0 + 6).decision == APPROVE


def test_a_wrong_otp_is_refused(devices, replay):
    phone = devices()
    request = ask()
    approval = phone.sign(request, APPROVE, ["email"])
    otp = approval[OTP_AT : OTP_AT + 6]
    for digit in range(6):
        wrong = bytearray(otp)
        wrong[digit] = ord("0") + (wrong[digit] - ord("0") + 1) % 10
        forged = approval[:OTP_AT] + bytes(wrong) + approval[OTP_AT + 6 :]
        with pytest.raises(AuthenticationFailedError):
            verify_approval(request, forged, [phone.key], replay, T0 + 6)
    # An approval of another request (another OTP) is refused for this one.
    other = ask(session="login-2")
    if ApprovalRequest.parse(other, T0).otp != ApprovalRequest.parse(request, T0).otp:
        with pytest.raises(AuthenticationFailedError):
            verify_approval(request, phone.sign(other, APPROVE, ["email"]), [phone.key], replay, T0 + 6)


def test_expiry(devices, replay):
    phone = devices()
    request = ask(lifetime=60)
    approval = phone.sign(request, APPROVE, ["email"], now=T0 + 59)
    with pytest.raises(ExpiredError):
        verify_approval(request, approval, [phone.key], replay, T0 + 61)
    # At the expiry itself it is still good.
    assert verify_approval(request, approval, [phone.key], replay, T0 + 60).timestamp == T0 + 59
    # The device refuses to show or sign it once its clock is past the expiry.
    assert ApprovalRequest.parse(request, T0 + 60).expires_at == T0 + 60
    with pytest.raises(ExpiredError):
        ApprovalRequest.parse(request, T0 + 61)
    with pytest.raises(ExpiredError):
        phone.sign(request, APPROVE, ["email"], now=T0 + 61)
    for lifetime in (0, -1, itsme.APPROVAL_LIFETIME_MAX + 1):
        with pytest.raises(InvalidArgumentError):
            ask(lifetime=lifetime)
    assert ApprovalRequest.parse(ask(lifetime=600), T0).expires_at == T0 + 600


def test_a_replayed_approval_is_refused(devices, replay):
    phone = devices()
    request = ask()
    approval = phone.sign(request, APPROVE, ["email"])
    verify_approval(request, approval, [phone.key], replay, T0 + 6)
    with pytest.raises(ReplayedError) as caught:
        verify_approval(request, approval, [phone.key], replay, T0 + 7)
    assert caught.value.code == itsme.ITSME_E_REPLAYED == 22
    assert caught.value.name == "ITSME_E_REPLAYED"
    # Signed again, later: the same request, spent.
    with pytest.raises(ReplayedError):
        verify_approval(request, phone.sign(request, APPROVE, [], now=T0 + 8), [phone.key], replay, T0 + 9)
    # Another replay store has not seen it.
    with ReplayStore.memory() as fresh:
        assert verify_approval(request, approval, [phone.key], fresh, T0 + 6).decision == APPROVE


def test_a_scope_not_requested(devices, replay):
    phone = devices()
    request = ask(scopes=["email"])
    # The device refuses to grant it.
    for granted in (["payments"], ["email", "payments"], ["email", "email"]):
        with pytest.raises(InvalidArgumentError):
            phone.sign(request, APPROVE, granted)
    # The same random source makes two requests with the same nonce and OTP
    # but other scopes: an approval of the wider one grants, for the
    # narrower one, a scope it never asked for.
    narrow = ask(scopes=["email"], random=rng("scopes"))
    wide = ask(scopes=["email", "payments"], random=rng("scopes"))
    assert ApprovalRequest.parse(narrow, T0).otp == ApprovalRequest.parse(wide, T0).otp
    approval = phone.sign(wide, APPROVE, ["payments"])
    with pytest.raises(MalformedMessageError):
        verify_approval(narrow, approval, [phone.key], replay, T0 + 6)
    # With a scope it did ask for, the signature (over the other request) fails.
    with pytest.raises(AuthenticationFailedError):
        verify_approval(narrow, phone.sign(wide, APPROVE, ["email"]), [phone.key], replay, T0 + 6)
    assert verify_approval(wide, approval, [phone.key], replay, T0 + 6).granted_scopes == ("payments",)


def test_malformed_answers_and_records(devices, replay):
    phone = devices()
    request = ask()
    approval = phone.sign(request, APPROVE, ["email"])
    for broken in (b"", approval[:-1], approval + b"\0", b"\x02" + approval[1:]):
        with pytest.raises(MalformedMessageError):
            verify_approval(request, broken, [phone.key], replay, T0 + 6)
    # The service's own record does not parse: an argument error.
    for broken in (b"", request[:-1], request + b"\0"):
        with pytest.raises(InvalidArgumentError):
            verify_approval(broken, approval, [phone.key], replay, T0 + 6)
        with pytest.raises(MalformedMessageError):
            ApprovalRequest.parse(broken, T0)
        with pytest.raises(MalformedMessageError):
            phone.sign(broken, APPROVE, [])
    assert verify_approval(request, approval, [phone.key], replay, T0 + 6).decision == APPROVE


# -- replay stores ---------------------------------------------------------------------------


class DictReplay:
    """A replay store in a dict, as a service's database table would be."""

    def __init__(self):
        self.entries = {}
        self.calls = []
        self.lock = threading.Lock()

    def __call__(self, key, expires_at, now):
        self.calls.append((key, expires_at, now))
        with self.lock:
            if key in self.entries:
                return True
            self.entries[key] = expires_at
            return False


def test_a_python_replay_store(devices):
    phone = devices()
    table = DictReplay()
    with ReplayStore.from_callback(table) as store:
        request = ask()
        approval = phone.sign(request, APPROVE, ["email"])
        # A forgery is not recorded: it cannot spend the request.
        with pytest.raises(AuthenticationFailedError):
            verify_approval(request, approval[:-1] + bytes([approval[-1] ^ 1]), [phone.key], store, T0 + 6)
        assert table.calls == []
        verify_approval(request, approval, [phone.key], store, T0 + 6)
        assert len(table.calls) == 1
        key, expires_at, now = table.calls[0]
        assert (len(key), expires_at, now) == (32, T0 + 120, T0 + 6)
        with pytest.raises(ReplayedError):
            verify_approval(request, approval, [phone.key], store, T0 + 7)
        assert len(table.calls) == 2 and table.calls[1][0] == key
        # The key depends on the request's nonce, not the answer.
        other = ask(session="login-2")
        verify_approval(other, phone.sign(other, DENY), [phone.key], store, T0 + 8)
        assert table.calls[2][0] != key
    assert "callback" in repr(store) and "closed" in repr(store)


def test_the_replay_key_is_the_documented_one(devices):
    phone = devices()
    table = DictReplay()
    request = ask()
    with ReplayStore.from_callback(table) as store:
        verify_approval(request, phone.sign(request, APPROVE), [phone.key], store, T0 + 6)
    # u8(1) || lv(service_id) || lv(service_name) || lv(session_id) || otp (6) || nonce (32) || ...
    at = 1
    for _ in range(3):
        at += 1 + request[at]
    nonce = request[at + 6 : at + 6 + 32]
    lv = lambda part: bytes([len(part)]) + part  # noqa: E731
    expected = hashlib.sha256(lv(b"itsme-approval-replay-v1") + lv(SERVICE.encode()) + lv(nonce)).digest()
    assert table.calls[0][0] == expected


@pytest.mark.parametrize(
    "failure, expected",
    [
        (RuntimeError("the database is down"), ItsMeError),
        (KeyError("x"), ItsMeError),
        (LockedError(itsme.ITSME_E_LOCKED, "table full"), LockedError),
    ],
)
def test_a_raising_callback_is_a_clean_error(devices, failure, expected):
    phone = devices()
    calls = []

    def insert(key, expires_at, now):
        calls.append(key)
        raise failure

    request = ask()
    approval = phone.sign(request, APPROVE, ["email"])
    with ReplayStore.from_callback(insert) as store:
        with pytest.raises(expected) as caught:
            verify_approval(request, approval, [phone.key], store, T0 + 6)
        assert caught.value.__cause__ is failure, "the callback's exception is the cause"
        if expected is ItsMeError:
            assert type(caught.value) is not ReplayedError
            assert caught.value.code == _approval.CALLBACK_FAILURE == itsme.ITSME_E_DATABASE
        assert len(calls) == 1
        # Nothing was spent: a working store afterwards accepts it.
    with ReplayStore.memory() as fresh:
        assert verify_approval(request, approval, [phone.key], fresh, T0 + 6).decision == APPROVE


@pytest.mark.parametrize("returned", [None, "yes", 1.0, b"\x01"])
def test_a_callback_that_returns_no_bool_fails_closed(devices, returned):
    phone = devices()
    request = ask()
    approval = phone.sign(request, APPROVE, ["email"])
    with ReplayStore.from_callback(lambda key, expires_at, now: returned) as store:
        with pytest.raises(ItsMeError) as caught:
            verify_approval(request, approval, [phone.key], store, T0 + 6)
    assert isinstance(caught.value.__cause__, TypeError)


def test_the_callback_lives_as_long_as_the_store(devices):
    phone = devices()
    seen = set()

    def make():
        def insert(key, expires_at, now):
            was = key in seen
            seen.add(key)
            return was

        return ReplayStore.from_callback(insert)

    store = make()
    gc.collect()
    registered = len(_approval._registry)
    request = ask()
    approval = phone.sign(request, APPROVE)
    verify_approval(request, approval, [phone.key], store, T0 + 6)
    with pytest.raises(ReplayedError):
        verify_approval(request, approval, [phone.key], store, T0 + 6)
    store.close()
    assert len(_approval._registry) == registered - 1, "released with the store"
    store.close()
    with pytest.raises(ValueError):
        verify_approval(request, approval, [phone.key], store, T0 + 6)
    with pytest.raises(TypeError):
        ReplayStore.from_callback("not callable")


def test_memory_store_capacity(devices):
    phone = devices()
    short = ask(lifetime=10, session="short")
    longer = ask(lifetime=100, session="longer")
    third = ask(lifetime=100, session="third")
    with ReplayStore.memory(capacity=1) as store:
        verify_approval(short, phone.sign(short, APPROVE, now=T0 + 1), [phone.key], store, T0 + 1)
        # Full: refused rather than forgetting a live entry, and nothing recorded.
        answer = phone.sign(longer, APPROVE, now=T0 + 5)
        with pytest.raises(LockedError):
            verify_approval(longer, answer, [phone.key], store, T0 + 5)
        with pytest.raises(ReplayedError):
            verify_approval(short, phone.sign(short, DENY, now=T0 + 6), [phone.key], store, T0 + 6)
        # Once the first has expired, its entry is dropped.
        assert verify_approval(longer, answer, [phone.key], store, T0 + 11).decision == APPROVE
        with pytest.raises(LockedError):
            verify_approval(third, phone.sign(third, APPROVE, now=T0 + 12), [phone.key], store, T0 + 12)
    with ReplayStore.memory(capacity=3) as store:
        for session in ("a", "b", "c"):
            request = ask(session=session)
            verify_approval(request, phone.sign(request, APPROVE), [phone.key], store, T0 + 6)
        request = ask(session="d")
        with pytest.raises(LockedError):
            verify_approval(request, phone.sign(request, APPROVE), [phone.key], store, T0 + 6)
    with pytest.raises(InvalidArgumentError):
        ReplayStore.memory(capacity=-1)
    with ReplayStore.memory() as store:
        assert repr(store) == "<ReplayStore memory open>"


def test_a_replay_store_shared_by_threads(devices):
    phone = devices()
    request = ask()
    approval = phone.sign(request, APPROVE, ["email"])
    outcomes = []
    barrier = threading.Barrier(8)
    with ReplayStore.memory() as store:

        def verify():
            barrier.wait()
            try:
                verify_approval(request, approval, [phone.key], store, T0 + 6)
                outcomes.append("ok")
            except ReplayedError:
                outcomes.append("replayed")

        threads = [threading.Thread(target=verify) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(outcomes) == ["ok"] + ["replayed"] * 7


# -- credentials on the device -----------------------------------------------------------------


def test_credentials_in_the_secret_store(backend):
    with SecretStore.from_callbacks(backend) as store:
        with pytest.raises(NotFoundError):
            credential_id(store, SERVICE)
        nonce = bytes(range(16))
        first = enroll(store, SERVICE, "Phone", nonce)
        items = [name for name in backend.items if name.startswith("itsme.credential.")]
        assert len(items) == 1
        cid = credential_id(store, SERVICE)
        # Enrolling again replaces the key.
        second = enroll(store, SERVICE, "Phone", nonce)
        assert second[1:33] != first[1:33] and credential_id(store, SERVICE) != cid
        assert [name for name in backend.items if name.startswith("itsme.credential.")] == items
        # Another service, another key.
        enroll(store, "shop.example", "Phone", nonce)
        assert len([name for name in backend.items if name.startswith("itsme.credential.")]) == 2
        remove_credential(store, SERVICE)
        with pytest.raises(NotFoundError):
            credential_id(store, SERVICE)
        with pytest.raises(NotFoundError):
            remove_credential(store, SERVICE)
        with pytest.raises(NotFoundError):
            sign_approval(store, ask(), APPROVE, [], T0 + 5)
        assert len(credential_id(store, "shop.example")) == itsme.CREDENTIAL_ID_BYTES


def test_the_same_random_source_enrolls_the_same_key():
    with SecretStore.memory() as one, SecretStore.memory() as two:
        nonce = bytes(range(32))
        assert enroll(one, SERVICE, "Phone", nonce, rng=rng("key")) == enroll(two, SERVICE, "Phone", nonce, rng=rng("key"))
        assert credential_id(one, SERVICE) == credential_id(two, SERVICE)


def test_enrollment_refusals(devices):
    phone = devices()
    with pytest.raises(AuthenticationFailedError):
        verify_enrollment(SERVICE, bytes(32), phone.enrollment)  # another nonce
    with pytest.raises(AuthenticationFailedError):
        verify_enrollment("shop.example", phone.nonce, phone.enrollment)  # another service
    with pytest.raises(AuthenticationFailedError):
        verify_enrollment(SERVICE, phone.nonce, phone.enrollment[:-1] + bytes([phone.enrollment[-1] ^ 1]))
    for broken in (b"", phone.enrollment[:-1], phone.enrollment + b"\0", b"\x02" + phone.enrollment[1:]):
        with pytest.raises(MalformedMessageError):
            verify_enrollment(SERVICE, phone.nonce, broken)
    for service, nonce in (("bank example", phone.nonce), ("", phone.nonce), (SERVICE, bytes(15)), (SERVICE, bytes(65))):
        with pytest.raises(InvalidArgumentError):
            verify_enrollment(service, nonce, phone.enrollment)
    with SecretStore.memory() as store:
        for service, label, nonce in (
            ("bank example", "Phone", bytes(16)),
            ("b" * 256, "Phone", bytes(16)),
            (SERVICE, "", bytes(16)),
            (SERVICE, "P" * 129, bytes(16)),
            (SERVICE, "Pho\x07ne", bytes(16)),
            (SERVICE, "Phone", bytes(15)),
            (SERVICE, "Phone", bytes(65)),
        ):
            with pytest.raises(InvalidArgumentError):
                enroll(store, service, label, nonce)
        with pytest.raises(NotFoundError):
            credential_id(store, SERVICE)
        longest = enroll(store, "b" * 255, "P" * 128, bytes(64))
        assert len(longest) == itsme.ENROLLMENT_MAX


# -- arguments and values ------------------------------------------------------------------------


def test_argument_types(devices, replay):
    phone = devices()
    request = ask()
    approval = phone.sign(request, APPROVE, ["email"])
    with pytest.raises(TypeError):
        create_approval_request(SERVICE, NAME, "s", "email", 60, T0)  # one str is not a list of scopes
    with pytest.raises(TypeError):
        phone.sign(request, APPROVE, "email")
    with pytest.raises(TypeError):
        ask(scopes=[b"email"])
    for scopes in (["two words"], [""], ["tab\there"], ["é"]):
        with pytest.raises(InvalidArgumentError):
            ask(scopes=scopes)
    with pytest.raises(InvalidArgumentError):
        ask(scopes=["s%d" % i for i in range(itsme.SCOPES_MAX + 1)])
    assert len(ApprovalRequest.parse(ask(scopes=["s%02d" % i for i in range(32)]), T0).scopes) == 32
    with pytest.raises(InvalidArgumentError):
        ask(scopes=["x" * (itsme.SCOPE_MAX_BYTES + 1)])
    with pytest.raises(InvalidArgumentError):
        ask(scopes=["email", "email"])
    with pytest.raises(TypeError):
        verify_approval(request, approval, phone.key, replay, T0 + 6)  # one key, not a list
    with pytest.raises(InvalidArgumentError):
        verify_approval(request, approval, [phone.key[:31]], replay, T0 + 6)
    with pytest.raises(TypeError):
        verify_approval(request, approval, [phone.key], object(), T0 + 6)
    with pytest.raises(TypeError):
        sign_approval(b"not a store", request, APPROVE, [], T0)
    with pytest.raises(TypeError):
        verify_enrollment(SERVICE, phone.nonce.hex(), phone.enrollment)
    for service, name, session in (("", NAME, "s"), (SERVICE, "", "s"), (SERVICE, NAME, ""), (SERVICE, NAME, "a b")):
        with pytest.raises(InvalidArgumentError):
            create_approval_request(service, name, session, [], 60, T0)
    # Nothing here spent the request.
    assert verify_approval(request, approval, [phone.key], replay, T0 + 6).decision == APPROVE


def test_values_are_frozen_and_printable(devices):
    phone = devices()
    request = ask()
    shown = ApprovalRequest.parse(request, T0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        shown.otp = "000000"
    with pytest.raises(dataclasses.FrozenInstanceError):
        phone.credential.label = "Mallory"
    with ReplayStore.memory() as store:
        result = verify_approval(request, phone.sign(request, APPROVE), [phone.key], store, T0 + 6)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.granted_scopes = ("all",)
    assert "ApprovalResult" in repr(result) and "APPROVE" in repr(result)
