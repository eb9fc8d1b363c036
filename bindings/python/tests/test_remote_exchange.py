"""Contact exchange at a distance (invite and real-time) through the Python
binding, with the messages moved by hand: whole exchanges, a wrong
encryption code, typos caught by the codes' check character, sealing and
restoring between steps, the PAKE secret's life in the secret store, and
calls made in the wrong state.  docs/PROTOCOL.md section 16; the same
exchanges through a real relay are in apps/tests/test_remote_exchange.py.
"""

from __future__ import annotations

import hashlib
import re
from ctypes import byref, c_bool, c_size_t, c_void_p, create_string_buffer
from dataclasses import dataclass

import pytest

import itsme
from itsme import (
    AuthenticationFailedError,
    ContactStore,
    Exchange,
    ExchangeFlags,
    ExchangeMethod,
    ExchangeState,
    ExpiredError,
    Identity,
    InvalidArgumentError,
    InvalidStateError,
    MalformedMessageError,
    Result,
    SecretStore,
    VerificationState,
    check_remote_code,
)
from itsme._ffi import lib
from conftest import DictBackend
from itsme import _abi
from test_exchange import DAY, T0, rng

INVITE, ACCEPT, REPLY, DECISION = 1, 2, 3, 4
ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
CODE = re.compile(r"[2-9A-HJKMNP-Z]{4}-[2-9A-HJKMNP-Z]{4}")
PAKE_PREFIX = "itsme.pake."


@dataclass
class Person:
    """An identity whose secret store is a dict (to see the PAKE secrets), and its contacts."""

    name: str
    backend: DictBackend
    secrets: SecretStore
    identity: Identity
    contacts: ContactStore

    def parts(self):
        """The identity and its contact store, as an exchange is made with them."""
        return self.identity, self.contacts

    def pake_items(self):
        return sorted(name for name in self.backend.items if name.startswith(PAKE_PREFIX))


@pytest.fixture
def person(tmp_path):
    made = []

    def make(name: str) -> Person:
        backend = DictBackend()
        secrets = SecretStore.from_callbacks(backend)
        identity = Identity.create(secrets, name, random=rng(f"remote identity {name}"))
        contacts = ContactStore.open(identity, tmp_path / f"contacts-{len(made)}.db")
        made.append(Person(name, backend, secrets, identity, contacts))
        return made[-1]

    yield make
    for p in made:
        p.contacts.close()
        p.identity.close()
        p.secrets.close()


@pytest.fixture
def alice(person):
    return person("Alice")


@pytest.fixture
def bob(person):
    return person("Bob")


def lv_cat(*parts: bytes) -> bytes:
    out = b""
    for part in parts:
        n = len(part)
        while True:
            low, n = n & 0x7F, n >> 7
            out += bytes([low | (0x80 if n else 0)])
            if not n:
                break
        out += part
    return out


def canonical(code: str) -> str:
    return code.replace("-", "")


def other_valid_code(code: str, label: str = "other") -> str:
    """A code that passes the check but differs from ``code``."""
    values = [ALPHABET.index(c) for c in canonical(code)[:7]]
    values[0] = (values[0] + 1 + len(label)) % 31
    check = ((31 - sum((i + 1) * v for i, v in enumerate(values)) % 31) % 31) * 4 % 31
    text = "".join(ALPHABET[v] for v in values + [check])
    return text[:4] + "-" + text[4:]


def start(alice: Person, bob: Person, realtime: bool = False, label: str = "remote", code: str = None):
    """The inviter's exchange and the invitee's, which typed the codes."""
    inviter = Exchange.invite(alice.identity, alice.contacts, T0, realtime=realtime, random=rng(f"{label} inviter"))
    invitee = Exchange.accept_invite(
        bob.identity, bob.contacts,
        inviter.invite_code,
        code or inviter.encryption_code,
        T0,
        realtime=realtime,
        random=rng(f"{label} invitee"),
    )
    return inviter, invitee


def run(inviter: Exchange, invitee: Exchange, now: int = T0):
    """Moves the three messages by hand; returns them."""
    m1 = inviter.next_outgoing()
    invitee.receive(m1, now)
    m2 = invitee.next_outgoing()
    inviter.receive(m2, now)
    m3 = inviter.next_outgoing()
    invitee.receive(m3, now)
    return m1, m2, m3


# -- constants and codes ---------------------------------------------------------------


def test_constants_match_the_header():
    assert _abi.ITSME_REMOTE_CODE_SIZE == itsme.REMOTE_CODE_SIZE == len("K7X2-M9PM") + 1
    assert _abi.ITSME_REMOTE_MESSAGE_MAX == itsme.REMOTE_MESSAGE_MAX
    assert _abi.ITSME_RELAY_ID_SIZE == itsme.RELAY_ID_SIZE == 32 + 1
    # The longest message: an ACCEPT with a name of 128 bytes.
    assert itsme.REMOTE_MESSAGE_MAX == 2 + 32 + 32 + 145 + itsme.NAME_MAX_BYTES + 16


def test_check_remote_code_reads_what_people_type(alice):
    code = Exchange.invite(alice.identity, alice.contacts, T0, random=rng("codes")).invite_code
    assert CODE.fullmatch(code)
    plain = canonical(code)
    for typed in (code, plain, plain.lower(), f"  {plain[:4]} {plain[4:]} ", "-".join(plain), code.lower()):
        assert check_remote_code(typed) == code, typed


def test_check_remote_code_catches_every_single_typo_and_swap(alice):
    code = canonical(Exchange.invite(alice.identity, alice.contacts, T0, random=rng("typos")).encryption_code)
    for i in range(8):
        for c in ALPHABET:
            if c != code[i]:
                with pytest.raises(InvalidArgumentError, match="typo"):
                    check_remote_code(code[:i] + c + code[i + 1:])
    for i in range(8):
        for j in range(i + 1, 8):
            if code[i] != code[j]:
                swapped = list(code)
                swapped[i], swapped[j] = swapped[j], swapped[i]
                with pytest.raises(InvalidArgumentError, match="typo"):
                    check_remote_code("".join(swapped))


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "8 characters"),
        ("ABCD-EFG", "8 characters"),
        ("ABCD-EFGHJ", "8 characters"),
        ("ABCD-EF0H", "'0'"),
        ("OOOO-OOOO", "'O'"),
        ("ABCD_EFGH", "'_'"),
        ("ABCD EFG\u00e9", "never use"),
    ],
)
def test_check_remote_code_says_what_is_wrong(text, message):
    with pytest.raises(InvalidArgumentError, match=message) as caught:
        check_remote_code(text)
    assert caught.value.code == Result.ITSME_E_INVALID_ARGUMENT


def test_check_remote_code_arguments():
    with pytest.raises(TypeError):
        check_remote_code(None)
    with pytest.raises(TypeError):
        check_remote_code(b"ABCD-EFGH")
    with pytest.raises(InvalidArgumentError):
        check_remote_code("ABCD\0EFGH")


# -- a new exchange --------------------------------------------------------------------


@pytest.mark.parametrize("realtime", [False, True])
def test_a_new_invite(alice, realtime):
    with Exchange.invite(alice.identity, alice.contacts, T0, realtime=realtime, random=rng("new")) as inviter:
        assert inviter.method == (ExchangeMethod.REALTIME if realtime else ExchangeMethod.INVITE)
        assert inviter.state == ExchangeState.AWAITING_PEER
        assert inviter.is_inviter is True
        assert inviter.session_code is None
        invite_code, encryption_code = inviter.invite_code, inviter.encryption_code
        assert CODE.fullmatch(invite_code) and CODE.fullmatch(encryption_code)
        assert invite_code != encryption_code
        assert check_remote_code(invite_code) == invite_code
        # The relay ID, derived from the invite code alone (PROTOCOL.md 16.1).
        label = b"itsme-realtime-room-v1" if realtime else b"itsme-invite-id-v1"
        expected = hashlib.sha256(lv_cat(label, canonical(invite_code).encode())).digest()[:16].hex()
        assert inviter.relay_id == expected
        message = inviter.next_outgoing()
        assert len(message) == 82 and message[:2] == bytes([1, INVITE])
        assert inviter.next_outgoing() == b"", "the inviter waits for the ACCEPT"
        for reader in ("sas", "peer_name", "peer_fingerprint"):
            with pytest.raises(InvalidStateError):
                getattr(inviter, reader)
        # Deterministic randomness replays the codes; the system's draws new ones.
        again = Exchange.invite(alice.identity, alice.contacts, T0, realtime=realtime, random=rng("new"))
        assert (again.invite_code, again.encryption_code) == (invite_code, encryption_code)
        fresh = Exchange.invite(alice.identity, alice.contacts, T0, realtime=realtime)
        assert fresh.invite_code != invite_code


def test_invite_and_realtime_use_different_relay_ids(alice, bob):
    mailbox = Exchange.invite(alice.identity, alice.contacts, T0, random=rng("ids"))
    room = Exchange.invite(alice.identity, alice.contacts, T0, realtime=True, random=rng("ids"))
    assert mailbox.invite_code == room.invite_code
    assert mailbox.relay_id != room.relay_id
    invitee = Exchange.accept_invite(bob.identity, bob.contacts, room.invite_code, room.encryption_code, T0, realtime=True)
    assert invitee.relay_id == room.relay_id
    assert invitee.is_inviter is False
    assert invitee.next_outgoing() == b"", "the invitee speaks only after the INVITE"
    # Codes are read as typed and shown canonically.
    typed = Exchange.accept_invite(
        bob.identity, bob.contacts, canonical(room.invite_code).lower(), " " + room.encryption_code.lower(), T0, realtime=True
    )
    assert (typed.invite_code, typed.encryption_code) == (room.invite_code, room.encryption_code)


# -- whole exchanges ---------------------------------------------------------------------


@pytest.mark.parametrize("realtime", [False, True])
def test_round_trip(alice, bob, realtime):
    inviter, invitee = start(alice, bob, realtime)
    m1 = inviter.next_outgoing()
    invitee.receive(m1, T0 + 10)
    assert invitee.state == ExchangeState.AWAITING_PEER
    with pytest.raises(InvalidStateError):
        invitee.sas
    m2 = invitee.next_outgoing()
    assert m2[:2] == bytes([1, ACCEPT]) and len(m2) <= itsme.REMOTE_MESSAGE_MAX
    assert invitee.next_outgoing() == b""
    inviter.receive(m2, T0 + 3600)
    assert inviter.state == ExchangeState.COMPARE_SAS, "the inviter's SAS is ready on the ACCEPT"
    m3 = inviter.next_outgoing()
    assert m3[:2] == bytes([1, REPLY])
    invitee.receive(m3, T0 + 3601)
    assert invitee.state == ExchangeState.COMPARE_SAS, "the invitee's on the REPLY"
    assert inviter.sas == invitee.sas
    assert itsme.short_code_format(itsme.short_code_parse(inviter.sas)) == inviter.sas
    assert (inviter.peer_name, inviter.peer_public_key, inviter.peer_fingerprint) == (
        "Bob", bob.identity.public_key, bob.identity.fingerprint)
    assert (invitee.peer_name, invitee.peer_public_key) == ("Alice", alice.identity.public_key)
    # Each side's PAKE secret waits in its secret store until the end.
    assert len(alice.pake_items()) == 1 and alice.pake_items()[0].endswith(".inviter")
    assert len(bob.pake_items()) == 1 and bob.pake_items()[0].endswith(".invitee")

    id_a = inviter.confirm(T0 + 3700)
    held = inviter.next_outgoing()
    assert (held == b"") == (not realtime), "through the mailbox the inviter's confirmation waits for the invitee's"
    id_b = invitee.confirm(T0 + 3700)
    for party, contact_id in ((alice, id_a), (bob, id_b)):
        assert party.contacts.get(contact_id).state == VerificationState.AWAITING_PEER
        # Used for nothing until settled (8.1): no degradation code either.
        with pytest.raises(itsme.InvalidStateError):
            party.contacts.degradation_code(contact_id)
    assert inviter.state == invitee.state == ExchangeState.AWAITING_DECISION
    decision_b = invitee.next_outgoing()
    assert decision_b[:2] == bytes([1, DECISION]) and len(decision_b) == 19
    inviter.receive(decision_b, T0 + 3700)
    assert inviter.flags & ExchangeFlags.PEER_CONFIRMED
    assert inviter.settle(T0 + 3700) == id_a
    decision_a = held or inviter.next_outgoing()
    assert decision_a[:2] == bytes([1, DECISION])
    invitee.receive(decision_a, T0 + 3700)
    assert invitee.settle(T0 + 3700) == id_b
    method = ExchangeMethod.REALTIME if realtime else ExchangeMethod.INVITE
    for party, contact_id, peer in ((alice, id_a, bob), (bob, id_b, alice)):
        contact = party.contacts.get(contact_id)
        assert (contact.name, contact.public_key) == (peer.name, peer.identity.public_key)
        assert (contact.state, contact.method, contact.verified_at) == (VerificationState.VERIFIED, method, T0 + 3700)
        assert party.pake_items() == [], "the PAKE secret is wiped when the exchange ends"
    assert inviter.state == invitee.state == ExchangeState.CONFIRMED
    assert inviter.next_outgoing() == invitee.next_outgoing() == b""


def test_each_side_may_reject(alice, bob):
    inviter, invitee = start(alice, bob)
    run(inviter, invitee)
    contact_id = inviter.save(T0)
    assert alice.contacts.count() == 1
    inviter.reject()
    invitee.reject()
    assert alice.contacts.count() == bob.contacts.count() == 0
    assert inviter.state == invitee.state == ExchangeState.REJECTED
    assert alice.pake_items() == bob.pake_items() == []
    with pytest.raises(itsme.NotFoundError):
        alice.contacts.get(contact_id)


def test_an_inviter_that_confirmed_then_rejected_never_sends_its_held_confirmation(alice, bob):
    """8.1, 16.5: through the mailbox the inviter's confirmation waits for
    the invitee's decision; an inviter that rejects meanwhile (the person
    gave up waiting) drops it, so the invitee, confirming later, never
    reads a confirmation from a side that deleted the contact."""
    inviter, invitee = start(alice, bob)
    run(inviter, invitee)
    inviter.confirm(T0)
    assert inviter.next_outgoing() == b"", "held"
    inviter.reject()
    assert inviter.state == ExchangeState.REJECTED and alice.contacts.count() == 0
    invitee.confirm(T0)
    inviter.receive(invitee.next_outgoing(), T0)
    assert inviter.flags & ExchangeFlags.PEER_CONFIRMED
    assert inviter.next_outgoing() == b"", "the held confirmation was dropped"
    assert inviter.state == ExchangeState.REJECTED and alice.contacts.count() == 0


def test_wrong_encryption_code_fails_both_and_saves_nothing(alice, bob, person):
    inviter = Exchange.invite(alice.identity, alice.contacts, T0, random=rng("wrong inviter"))
    wrong = other_valid_code(inviter.encryption_code)
    assert wrong != inviter.encryption_code and check_remote_code(wrong) == wrong
    invitee = Exchange.accept_invite(bob.identity, bob.contacts, inviter.invite_code, wrong, T0, random=rng("wrong invitee"))
    m1 = inviter.next_outgoing()
    invitee.receive(m1, T0)  # nothing to check yet: the INVITE carries no secret
    accept = invitee.next_outgoing()
    with pytest.raises(AuthenticationFailedError) as caught:
        inviter.receive(accept, T0)
    assert "wrong encryption code" in str(caught.value)
    assert "wrong encryption code" in inviter.last_error()
    assert inviter.state == ExchangeState.FAILED
    assert inviter.next_outgoing() == b"", "the inviter never answers a wrong guess"
    assert alice.pake_items() == [], "the invite is spent: its PAKE secret is wiped"
    # The invitee gets no REPLY; once the relay says the invite ended, it gives up.
    assert invitee.state == ExchangeState.AWAITING_PEER
    invitee.reject()
    assert bob.pake_items() == []
    # The right code cannot be tried against the same invite any more.
    honest = Exchange.accept_invite(*person("Bob2").parts(), inviter.invite_code, inviter.encryption_code, T0)
    honest.receive(m1, T0)
    with pytest.raises(InvalidStateError):
        inviter.receive(honest.next_outgoing(), T0)
    assert alice.contacts.count() == bob.contacts.count() == 0


def test_a_changed_reply_fails_the_invitee(alice, bob):
    inviter, invitee = start(alice, bob)
    invitee.receive(inviter.next_outgoing(), T0)
    inviter.receive(invitee.next_outgoing(), T0)
    reply = bytearray(inviter.next_outgoing())
    reply[10] ^= 1
    with pytest.raises(AuthenticationFailedError):
        invitee.receive(bytes(reply), T0)
    assert invitee.state == ExchangeState.FAILED
    assert bob.pake_items() == []
    with pytest.raises(InvalidStateError):
        invitee.confirm(T0)
    assert bob.contacts.count() == 0


# -- typos -------------------------------------------------------------------------------


def test_typos_in_either_code_are_caught_before_anything_is_stored(alice, bob):
    inviter = Exchange.invite(alice.identity, alice.contacts, T0, random=rng("typo"))
    invite, encryption = inviter.invite_code, inviter.encryption_code
    before = dict(bob.backend.items)

    def swap(code, i, j):
        chars = list(canonical(code))
        chars[i], chars[j] = chars[j], chars[i]
        return "".join(chars)

    def substitute(code, i):
        chars = list(canonical(code))
        chars[i] = next(c for c in ALPHABET if c != chars[i])
        return "".join(chars)

    cases = [
        (substitute(invite, 3), encryption, "invite code has a typo"),
        (invite, substitute(encryption, 7), "encryption code has a typo"),
        (invite, swap(encryption, 0, 7) if canonical(encryption)[0] != canonical(encryption)[7] else swap(encryption, 1, 2),
         "encryption code has a typo"),
        (invite, "ABC", "encryption code has 8 characters"),
        ("I" + canonical(invite)[1:], encryption, "invite code contains 'I'"),
        (invite, invite, "the same"),
        (encryption, encryption, "the same"),
    ]
    for invite_code, encryption_code, message in cases:
        with pytest.raises(InvalidArgumentError, match=message):
            Exchange.accept_invite(bob.identity, bob.contacts, invite_code, encryption_code, T0)
    assert bob.backend.items == before, "nothing was stored"
    assert bob.pake_items() == []


# -- seal and restore --------------------------------------------------------------------


def test_the_inviter_sealed_and_restored_between_steps(alice, bob):
    inviter, invitee = start(alice, bob, label="sealed")
    codes = (inviter.invite_code, inviter.encryption_code, inviter.relay_id)
    m1 = inviter.next_outgoing()
    sealed = inviter.seal()
    # The seal holds neither code in the clear; the PAKE secret stays in the store.
    for code in codes[:2]:
        assert canonical(code).encode() not in sealed and code.encode() not in sealed
    [item] = alice.pake_items()
    assert alice.backend.items[item][9:] not in sealed
    inviter.close()

    # The device restarts between creating the invite and reading the ACCEPT.
    invitee.receive(m1, T0 + 60)
    m2 = invitee.next_outgoing()
    inviter = Exchange.restore(alice.identity, alice.contacts, sealed, T0 + 7200)
    assert (inviter.invite_code, inviter.encryption_code, inviter.relay_id) == codes
    assert inviter.is_inviter and inviter.method == ExchangeMethod.INVITE
    assert inviter.next_outgoing() == b"", "the INVITE was posted before the seal"
    inviter.receive(m2, T0 + 7200)
    assert inviter.state == ExchangeState.COMPARE_SAS

    # Sealed again with its REPLY still queued: the restored one still has it.
    sealed_at_sas = inviter.seal()
    sas = inviter.sas
    inviter.close()
    inviter = Exchange.restore(alice.identity, alice.contacts, sealed_at_sas, T0 + 7300)
    assert inviter.sas == sas and inviter.peer_name == "Bob"
    m3 = inviter.next_outgoing()
    assert m3[:2] == bytes([1, REPLY])

    # The invitee restarts too, after its ACCEPT went out.
    sealed_invitee = invitee.seal()
    invitee.close()
    invitee = Exchange.restore(bob.identity, bob.contacts, sealed_invitee, T0 + 7400)
    assert invitee.next_outgoing() == b"", "the ACCEPT was already taken"
    invitee.receive(m3, T0 + 7400)
    assert invitee.sas == sas

    inviter.confirm(T0 + 7500)
    invitee.confirm(T0 + 7500)
    # Awaiting Bob's decision, Alice's device restarts once more.
    sealed_deciding = inviter.seal()
    inviter.close()
    inviter = Exchange.restore(alice.identity, alice.contacts, sealed_deciding, T0 + 7500)
    assert inviter.state == ExchangeState.AWAITING_DECISION
    inviter.receive(invitee.next_outgoing(), T0 + 7500)
    assert inviter.settle(T0 + 7500) is not None
    invitee.receive(inviter.next_outgoing(), T0 + 7500)
    assert invitee.settle(T0 + 7500) is not None
    # The exchange ended: its PAKE secret is gone, so no old copy restores.
    for old in (sealed, sealed_at_sas, sealed_deciding):
        with pytest.raises(InvalidStateError):
            Exchange.restore(alice.identity, alice.contacts, old, T0 + 7600)
    with pytest.raises(InvalidStateError):
        Exchange.restore(bob.identity, bob.contacts, sealed_invitee, T0 + 7600)


def test_a_sealed_remote_exchange_is_bound_to_its_identity(alice, bob):
    inviter = Exchange.invite(alice.identity, alice.contacts, T0, random=rng("bound"))
    sealed = inviter.seal()
    with pytest.raises(AuthenticationFailedError):
        Exchange.restore(bob.identity, bob.contacts, sealed, T0)
    with pytest.raises(ExpiredError):
        Exchange.restore(alice.identity, alice.contacts, sealed, T0 + DAY + 1)


def test_the_invite_expires_after_a_day(alice, bob):
    inviter, invitee = start(alice, bob, label="expiry")
    with pytest.raises(ExpiredError):
        invitee.receive(inviter.next_outgoing(), T0 + DAY + 1)
    assert invitee.state == ExchangeState.FAILED


# -- misuse ------------------------------------------------------------------------------


def test_codes_of_an_exchange_in_person_are_invalid_state(alice):
    for exchange in (Exchange.qr(alice.identity, alice.contacts, T0), Exchange.bluetooth(alice.identity, alice.contacts, T0)):
        for reader in ("invite_code", "encryption_code", "relay_id", "is_inviter"):
            with pytest.raises(InvalidStateError, match="invite or real-time"):
                getattr(exchange, reader)


def test_wrong_arguments(alice, bob):
    inviter = Exchange.invite(alice.identity, alice.contacts, T0, random=rng("args"))
    with pytest.raises(TypeError):
        Exchange.invite(alice.secrets, alice.contacts, T0)
    with pytest.raises(TypeError):
        Exchange.invite(None, alice.contacts, T0)
    with pytest.raises(TypeError):
        Exchange.accept_invite(bob.identity, bob.contacts, None, inviter.encryption_code, T0)
    with pytest.raises(TypeError):
        Exchange.accept_invite(bob.identity, bob.contacts, inviter.invite_code, b"ABCD-EFGH", T0)
    with pytest.raises(InvalidArgumentError):
        Exchange.accept_invite(bob.identity, bob.contacts, inviter.invite_code + "\0", inviter.encryption_code, T0)
    with pytest.raises(TypeError):
        Exchange.invite(alice.identity, alice.contacts, T0, random=b"\0" * 32)
    with pytest.raises(InvalidArgumentError):
        Exchange.invite(alice.identity, alice.contacts, 2**63)
    closed = Exchange.invite(alice.identity, alice.contacts, T0)
    closed.close()
    with pytest.raises(ValueError):
        closed.invite_code


def test_messages_in_the_wrong_order_or_place(alice, bob, person):
    inviter, invitee = start(alice, bob, label="order")
    m1 = inviter.next_outgoing()
    # The inviter's own INVITE reflected back to it.
    reflected = Exchange.restore(alice.identity, alice.contacts, inviter.seal(), T0)
    with pytest.raises(MalformedMessageError):
        reflected.receive(m1, T0)
    assert reflected.state == ExchangeState.FAILED
    # The PAKE secret is shared by copies of one exchange: the failed copy
    # wiped it, so start again.
    inviter, invitee = start(alice, bob, label="order 2")
    m1 = inviter.next_outgoing()
    invitee.receive(m1, T0)
    m2 = invitee.next_outgoing()
    # A second INVITE, and an ACCEPT sent to the invitee.
    with pytest.raises(MalformedMessageError):
        invitee.receive(m1, T0)
    early = Exchange.accept_invite(*person("Carol").parts(), inviter.invite_code, inviter.encryption_code, T0)
    with pytest.raises(MalformedMessageError):
        early.receive(m2, T0)
    # Empty, truncated and oversized messages.
    for bad in (b"", b"\x01", m1[:-1], m1 + b"\0", b"\x01\x02" + b"\0" * itsme.REMOTE_MESSAGE_MAX):
        fresh = Exchange.accept_invite(*person("Dave").parts(), inviter.invite_code, inviter.encryption_code, T0)
        with pytest.raises(MalformedMessageError):
            fresh.receive(bad, T0)
        assert fresh.state == ExchangeState.FAILED


def test_calls_in_the_wrong_state(alice, bob):
    inviter, invitee = start(alice, bob, label="state")
    for exchange in (inviter, invitee):
        with pytest.raises(InvalidStateError):
            exchange.save(T0)
        with pytest.raises(InvalidStateError):
            exchange.confirm(T0)
    run(inviter, invitee)
    inviter.confirm(T0)
    # Awaiting the peer's decision, anything else from the peer is refused
    # without ending the exchange.
    with pytest.raises(MalformedMessageError):
        inviter.receive(b"\x01\x02" + b"\0" * 200, T0)
    assert inviter.state == ExchangeState.AWAITING_DECISION
    assert inviter.seal()
    with pytest.raises(InvalidStateError):
        inviter.settle(T0)  # no decision from the peer yet
    inviter.reject()  # giving up waiting
    assert inviter.state == ExchangeState.REJECTED and alice.contacts.count() == 0
    with pytest.raises(InvalidStateError):
        inviter.reject()
    with pytest.raises(InvalidStateError):
        inviter.seal()
    # A message once the SAS is shown ends the exchange; then every call is refused.
    with pytest.raises(MalformedMessageError):
        invitee.receive(b"\x01\x03", T0)
    for call in (lambda: invitee.sas, lambda: invitee.seal(), lambda: invitee.confirm(T0),
                 lambda: invitee.receive(b"\x01\x03", T0)):
        with pytest.raises(InvalidStateError):
            call()
    # Codes stay readable on a finished or failed exchange.
    assert CODE.fullmatch(invitee.invite_code) and invitee.relay_id == inviter.relay_id


# -- the C functions themselves ------------------------------------------------------------


def _text_out(size=64):
    return create_string_buffer(size), size, c_size_t(0)


def test_null_pointers_are_invalid_arguments(alice):
    R = Result.ITSME_E_INVALID_ARGUMENT
    buf, cap, out_len = _text_out()
    assert lib.itsme_remote_code_check(None, buf, cap, byref(out_len)) == R
    assert lib.itsme_remote_code_check(b"ABCD-EFGH", None, cap, byref(out_len)) == R
    assert lib.itsme_remote_code_check(b"ABCD-EFGH", buf, cap, None) == R
    with alice.identity._use() as identity_ptr:
        out = c_void_p()
        with alice.contacts._use() as store_ptr:
            assert lib.itsme_exchange_new_invite(None, store_ptr, 0, None, T0, byref(out)) == R
            assert lib.itsme_exchange_new_invite(identity_ptr, None, 0, None, T0, byref(out)) == R
            assert lib.itsme_exchange_new_invite(identity_ptr, store_ptr, 0, None, T0, None) == R
            assert lib.itsme_exchange_accept_invite(None, store_ptr, b"A", b"B", 0, None, T0, byref(out)) == R
            assert lib.itsme_exchange_accept_invite(identity_ptr, None, b"A", b"B", 0, None, T0, byref(out)) == R
        inviter = Exchange.invite(alice.identity, alice.contacts, T0)
        codes = inviter.invite_code.encode(), inviter.encryption_code.encode()
        with alice.contacts._use() as store_ptr:
            assert lib.itsme_exchange_accept_invite(identity_ptr, store_ptr, None, codes[1], 0, None, T0, byref(out)) == R
            assert lib.itsme_exchange_accept_invite(identity_ptr, store_ptr, codes[0], None, 0, None, T0, byref(out)) == R
            assert lib.itsme_exchange_accept_invite(identity_ptr, store_ptr, codes[0], codes[1], 0, None, T0, None) == R
        assert out.value is None, "no exchange was made"
    with inviter._use() as ptr:
        for function in (lib.itsme_exchange_invite_code, lib.itsme_exchange_encryption_code, lib.itsme_exchange_relay_id):
            buf, cap, out_len = _text_out()
            assert function(None, buf, cap, byref(out_len)) == R
            assert function(ptr, None, cap, byref(out_len)) == R
            assert function(ptr, buf, cap, None) == R
            assert buf.raw == b"\0" * cap, "nothing written on failure"
            # Too small: the size needed, nothing written.
            small = create_string_buffer(4)
            assert function(ptr, small, 4, byref(out_len)) == Result.ITSME_E_BUFFER_TOO_SMALL
            assert out_len.value in (itsme.REMOTE_CODE_SIZE, itsme.RELAY_ID_SIZE)
        flag = c_bool(False)
        assert lib.itsme_exchange_is_inviter(None, byref(flag)) == R
        assert lib.itsme_exchange_is_inviter(ptr, None) == R
        assert flag.value is False
        assert lib.itsme_exchange_is_inviter(ptr, byref(flag)) == Result.ITSME_OK and flag.value is True
