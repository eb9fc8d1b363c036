"""In-person contact exchanges (QR and Bluetooth) through the Python binding:
whole exchanges between two identities, a man in the middle, tampered,
truncated, replayed and reordered messages, source-format imports,
exchanging again with a stored contact, sealing and restoring, expiry, and
calls made in the wrong state.  docs/PROTOCOL.md sections 4 to 8.
"""

from __future__ import annotations

import base64
import gc
import hashlib
from dataclasses import dataclass
from pathlib import Path

import pytest

import itsme
from itsme import (
    AuthenticationFailedError,
    ContactStore,
    CorruptDataError,
    DeterministicRandom,
    Exchange,
    ExchangeFlags,
    ExchangeState,
    ExpiredError,
    Identity,
    InvalidArgumentError,
    InvalidKeyError,
    InvalidStateError,
    ItsMeError,
    MalformedMessageError,
    SecretStore,
    VerificationState,
)

T0 = 1_800_000_000
DAY = 24 * 3600
PREFIX = b"ITSME1:"
HELLO, KEY, DATA, CONFIRM = 1, 2, 3, 4
FRAME_NAMES = {HELLO: "HELLO", KEY: "KEY", DATA: "DATA", CONFIRM: "CONFIRM"}
# What a rejected peer message may raise (the exchange then has failed).
REJECTED = (MalformedMessageError, AuthenticationFailedError, InvalidKeyError)


def rng(label: str) -> DeterministicRandom:
    """A deterministic random source named by a label."""
    return DeterministicRandom(hashlib.sha256(label.encode()).digest())


def b64url(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def qr_payload(text: bytes) -> bytes:
    """The decoded payload of a QR text."""
    assert text.startswith(PREFIX)
    body = text[len(PREFIX):]
    return base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4))


def qr_text(payload: bytes) -> bytes:
    return PREFIX + b64url(payload)


@dataclass
class Party:
    """A person: an identity in its own memory secret store, and its contacts."""

    name: str
    secrets: SecretStore
    identity: Identity
    contacts: ContactStore
    path: Path  # the contact store's file

    def contact(self, contact_id: int) -> itsme.Contact:
        return self.contacts.get(contact_id)


@pytest.fixture
def make_party(tmp_path):
    made = []

    def make(name: str, deterministic: bool = True) -> Party:
        secrets = SecretStore.memory()
        random = rng(f"identity {name}") if deterministic else None
        identity = Identity.create(secrets, name, random=random)
        path = tmp_path / f"contacts-{len(made)}.db"
        party = Party(name, secrets, identity, ContactStore.open(identity, path), path)
        made.append(party)
        return party

    yield make
    for party in made:
        party.contacts.close()
        party.identity.close()
        party.secrets.close()


@pytest.fixture
def alice(make_party):
    return make_party("Alice")


@pytest.fixture
def bob(make_party):
    return make_party("Bob")


@pytest.fixture
def mallory(make_party):
    return make_party("Mallory")


# -- helpers -----------------------------------------------------------------------


def qr_pair(a: Party, b: Party, now: int = T0, label: str = "qr"):
    """Two QR exchanges that have scanned each other's payloads."""
    xa = Exchange.qr(a.identity, a.contacts, now, random=rng(f"{label} {a.name}"))
    xb = Exchange.qr(b.identity, b.contacts, now, random=rng(f"{label} {b.name}"))
    xa.receive(xb.next_outgoing(), now)
    xb.receive(xa.next_outgoing(), now)
    return xa, xb


def bluetooth_pair(a: Party, b: Party, now: int = T0, label: str = "bt"):
    """Two fresh Bluetooth exchanges: ``a`` draws the session code, ``b`` types it."""
    xa = Exchange.bluetooth(a.identity, a.contacts, now, random=rng(f"{label} {a.name}"))
    xb = Exchange.bluetooth(b.identity, b.contacts, now, session_code=xa.session_code, random=rng(f"{label} {b.name}"))
    return xa, xb


def pump(x: Exchange, y: Exchange, now: int = T0, tamper=None, log=None):
    """Moves Bluetooth frames both ways until neither side has one to send.

    ``tamper(sender, frame)`` may replace a frame in transit; ``log`` gets
    every (sender, frame) sent.  Returns the first error each receiver
    raised, by receiver.
    """
    errors = {}
    moved = True
    while moved:
        moved = False
        for sender, receiver in ((x, y), (y, x)):
            frame = sender.next_outgoing()
            if not frame:
                continue
            moved = True
            if log is not None:
                log.append((sender, frame))
            if tamper is not None:
                frame = tamper(sender, frame)
            try:
                receiver.receive(frame, now)
            except ItsMeError as error:
                errors.setdefault(receiver, error)
    return errors


def tamper_once(sender: Exchange, frame_type: int, mutate):
    """A pump hook replacing the first ``frame_type`` frame ``sender`` sends."""
    applied = []

    def hook(from_exchange, frame):
        if not applied and from_exchange is sender and frame[1] == frame_type:
            applied.append(frame)
            return mutate(frame)
        return frame

    hook.applied = applied
    return hook


def mutations(message: bytes, longest: int):
    """(label, mutate) pairs: every byte flipped, truncations, extensions."""
    for index in range(len(message)):
        mask = 1 << (index % 8)
        yield f"byte {index} ^ {mask:#04x}", lambda m, i=index, k=mask: m[:i] + bytes([m[i] ^ k]) + m[i + 1:]
    for length in sorted({0, 1, 2, len(message) // 2, len(message) - 1}):
        yield f"truncated to {length}", lambda m, n=length: m[:n]
    yield "one byte more", lambda m: m + b"\0"
    yield "a copy appended", lambda m: m + m
    yield f"extended to {longest + 1}", lambda m: m + b"\xaa" * (longest + 1 - len(m))


def assert_failed(exchange: Exchange, error: BaseException, what: str = ""):
    assert isinstance(error, REJECTED), f"{what}: {error!r}"
    assert exchange.state == ExchangeState.FAILED, what
    assert exchange.last_error(), what


# -- the binding's types -----------------------------------------------------------


def test_deterministic_random_replays_identities(make_party):
    first = Identity.create(SecretStore.memory(), "Twin", random=rng("twin"))
    second = Identity.create(SecretStore.memory(), "Twin", random=rng("twin"))
    third = Identity.create(SecretStore.memory(), "Twin")
    assert first.public_key == second.public_key != third.public_key
    with pytest.raises(InvalidArgumentError):
        DeterministicRandom(bytes(31))
    with pytest.raises(TypeError):
        DeterministicRandom("0" * 32)


def test_short_codes():
    assert itsme.short_code_parse("ECHO 0042") == 40042
    assert itsme.short_code_parse("  zulu-9999 ") == 259999
    assert itsme.short_code_format(0) == "ALFA 0000"
    assert itsme.short_code_format(130000) == "NOVEMBER 0000"
    for text in ["ECHO 42", "", "ECHO  0042", "ALPHA 0042"]:
        with pytest.raises(InvalidArgumentError):
            itsme.short_code_parse(text)
    with pytest.raises(InvalidArgumentError):
        itsme.short_code_format(itsme.SHORT_CODE_VALUES)
    with pytest.raises(InvalidArgumentError):
        itsme.short_code_format(-1)
    for value in (1, 9999, 10000, 123456, 259998):
        assert itsme.short_code_parse(itsme.short_code_format(value)) == value


@pytest.mark.parametrize(
    "text",
    [
        "\u212aILO 0042",  # KELVIN SIGN, which Unicode normalises to K
        "\u0131ndia 0042",  # dotless i, which upper-cases to I
        "\u017fierra 0042",  # long s, which case-folds to s
        "\uff25CHO 0042",  # fullwidth E
        "ECHO \u0660042",  # ARABIC-INDIC DIGIT ZERO
        "ECHO \uff10042",  # fullwidth 0
        "ECHO\u00a00042",  # no-break space
        "ECHO\u20100042",  # hyphen
    ],
)
def test_short_codes_are_ascii_only(text):
    """PROTOCOL.md section 1: typed codes are read as ASCII, never through
    Unicode case folding or normalisation."""
    with pytest.raises(InvalidArgumentError):
        itsme.short_code_parse(text)


def test_a_new_exchange(alice):
    with Exchange.qr(alice.identity, alice.contacts, T0) as qr:
        assert qr.state == ExchangeState.AWAITING_PEER and qr.flags == ExchangeFlags(0)
        assert qr.identity is alice.identity
        assert qr.session_code is None
        payload = qr.next_outgoing()
        assert payload.startswith(PREFIX) and len(payload) <= itsme.QR_PAYLOAD_MAX
        assert qr.next_outgoing() == payload, "a QR payload is not consumed"
        for reader in ("sas", "peer_name", "peer_fingerprint", "peer_public_key"):
            with pytest.raises(InvalidStateError):
                getattr(qr, reader)
        assert "AWAITING_PEER" in repr(qr)
    assert qr.closed and repr(qr) == "<Exchange closed>"
    with pytest.raises(ValueError):
        qr.state
    with Exchange.bluetooth(alice.identity, alice.contacts, T0) as bt:
        code = bt.session_code
        assert 0 <= itsme.short_code_parse(code) < itsme.SHORT_CODE_VALUES
        assert itsme.short_code_format(itsme.short_code_parse(code)) == code
        hello = bt.next_outgoing()
        assert len(hello) == 42 and hello[:2] == bytes([1, HELLO])
        assert hello[2:10].hex().upper() == alice.identity.fingerprint[:16]
        assert bt.next_outgoing() == b"", "frames are consumed; KEY waits for the peer's HELLO"
    with Exchange.bluetooth(alice.identity, alice.contacts, T0, session_code="echo-0042") as typed:
        assert typed.session_code == "ECHO 0042"
    with pytest.raises(InvalidArgumentError):
        Exchange.bluetooth(alice.identity, alice.contacts, T0, session_code="ECHO 42")
    with pytest.raises(TypeError):
        Exchange.qr(alice.secrets, alice.contacts, T0)
    with pytest.raises(TypeError):
        Exchange.qr(alice.identity, alice.secrets, T0)


def test_an_exchange_is_given_a_store_of_its_identity(alice, bob):
    for start in (
        lambda: Exchange.qr(alice.identity, bob.contacts, T0),
        lambda: Exchange.bluetooth(alice.identity, bob.contacts, T0),
        lambda: Exchange.invite(alice.identity, bob.contacts, T0),
    ):
        with pytest.raises(itsme.WrongIdentityError):
            start()
    assert bob.contacts.count() == 0


def test_the_exchange_keeps_its_identity_and_store_alive(bob, tmp_path):
    identity = Identity.create(SecretStore.memory(), "Keeper")
    store = ContactStore.open(identity, tmp_path / "keeper.db")
    fingerprint = identity.fingerprint
    exchange = Exchange.qr(identity, store, T0)
    assert exchange.store is store
    del identity, store
    gc.collect()
    assert not exchange.identity.closed, "the exchange holds the Python identity"
    assert not exchange.store.closed, "and the Python store"
    exchange.identity.close()  # and the C exchange holds the C identity and store
    exchange.store.close()
    other = Exchange.qr(bob.identity, bob.contacts, T0)
    exchange.receive(other.next_outgoing(), T0)
    other.receive(exchange.next_outgoing(), T0)
    assert exchange.sas == other.sas
    assert other.peer_fingerprint == fingerprint
    assert exchange.confirm(T0) > 0, "the exchange writes through the store it holds"
    assert exchange.state == ExchangeState.CONFIRMED


# -- QR ----------------------------------------------------------------------------


def test_qr_end_to_end(alice, bob):
    xa = Exchange.qr(alice.identity, alice.contacts, T0)
    xb = Exchange.qr(bob.identity, bob.contacts, T0)
    payload_a, payload_b = xa.next_outgoing(), xb.next_outgoing()
    xa.receive(payload_b.decode("ascii"), T0 + 1)  # a scanned text may be given as str
    xb.receive(payload_a, T0 + 2)
    for exchange in (xa, xb):
        assert exchange.state == ExchangeState.COMPARE_SAS
        assert exchange.flags == ExchangeFlags(0)
    assert xa.sas == xb.sas
    assert itsme.short_code_format(itsme.short_code_parse(xa.sas)) == xa.sas
    assert (xa.peer_name, xa.peer_fingerprint, xa.peer_public_key) == (
        "Bob",
        bob.identity.fingerprint,
        bob.identity.public_key,
    )
    assert (xb.peer_name, xb.peer_fingerprint, xb.peer_public_key) == (
        "Alice",
        alice.identity.fingerprint,
        alice.identity.public_key,
    )
    # Saved unverified as soon as the SAS is shown.
    id_a, id_b = xa.save(T0 + 3), xb.save(T0 + 3)
    assert xa.save(T0 + 4) == id_a, "save is idempotent"
    for party, contact_id, peer in ((alice, id_a, bob), (bob, id_b, alice)):
        contact = party.contact(contact_id)
        assert (contact.name, contact.fingerprint, contact.public_key) == (
            peer.name,
            peer.identity.fingerprint,
            peer.identity.public_key,
        )
        assert contact.authenticated and contact.state == VerificationState.UNVERIFIED
        assert contact.method == itsme.ExchangeMethod.QR and contact.created_at == T0 + 3
        assert contact.verified_at is None
    # The SAS matches: both confirm.
    assert xa.confirm(T0 + 10) == id_a
    assert xb.confirm(T0 + 11) == id_b
    assert xa.state == xb.state == ExchangeState.CONFIRMED
    assert alice.contact(id_a).state == VerificationState.VERIFIED
    assert alice.contact(id_a).verified_at == T0 + 10
    assert bob.contact(id_b).state == VerificationState.VERIFIED
    assert xa.next_outgoing() == b"", "a finished QR exchange shows nothing"
    assert alice.contacts.count() == bob.contacts.count() == 1


def test_qr_confirm_saves_if_needed(alice, bob):
    xa, xb = qr_pair(alice, bob)
    contact_id = xa.confirm(T0)
    assert alice.contact(contact_id).state == VerificationState.VERIFIED
    assert alice.contacts.count() == 1


def test_qr_reject_deletes_the_saved_contact(alice, bob):
    xa, xb = qr_pair(alice, bob)
    contact_id = xa.save(T0)
    assert alice.contacts.count() == 1
    xa.reject()
    assert xa.state == ExchangeState.REJECTED
    assert alice.contacts.count() == 0
    with pytest.raises(itsme.NotFoundError):
        alice.contact(contact_id)
    xb.reject()  # nothing saved: nothing to delete
    assert xb.state == ExchangeState.REJECTED
    with pytest.raises(InvalidStateError):
        xb.reject()
    with pytest.raises(InvalidStateError):
        xa.confirm(T0)


def test_qr_not_a_payload_lets_the_person_scan_again(alice, bob):
    xa = Exchange.qr(alice.identity, alice.contacts, T0)
    xb = Exchange.qr(bob.identity, bob.contacts, T0)
    for text in ["hello", "https://example.com/", "", " ITSME1:" + xb.next_outgoing().decode()[7:], "itsme1:AAAA"]:
        with pytest.raises(InvalidArgumentError):
            xa.receive(text, T0)
        assert xa.state == ExchangeState.AWAITING_PEER
    xa.receive(xb.next_outgoing(), T0)
    xb.receive(xa.next_outgoing(), T0)
    assert xa.sas == xb.sas
    with pytest.raises(InvalidStateError):
        xa.receive(xb.next_outgoing(), T0)  # a payload was received already
    with pytest.raises(InvalidStateError):
        xa.receive("hello", T0)
    assert xa.state == ExchangeState.COMPARE_SAS, "neither ends the exchange"


def test_qr_own_payload_reflected(alice):
    exchange = Exchange.qr(alice.identity, alice.contacts, T0)
    with pytest.raises(InvalidKeyError):
        exchange.receive(exchange.next_outgoing(), T0)
    assert exchange.state == ExchangeState.FAILED
    # The payload of another exchange of the same identity is refused too.
    second, third = Exchange.qr(alice.identity, alice.contacts, T0), Exchange.qr(alice.identity, alice.contacts, T0)
    with pytest.raises(InvalidKeyError):
        second.receive(third.next_outgoing(), T0)
    assert second.state == ExchangeState.FAILED


def test_qr_every_byte_flipped_is_rejected(alice, bob):
    sender = Exchange.qr(alice.identity, alice.contacts, T0, random=rng("flip"))
    payload = qr_payload(sender.next_outgoing())
    assert len(payload) == 154 + len("Alice")
    cases = list(mutations(payload, len(payload)))
    for i in range(len(payload)):
        cases.append((f"byte {i} ^ 0xff", lambda m, i=i: m[:i] + bytes([m[i] ^ 0xFF]) + m[i + 1:]))
    read_again = 0
    for label, mutate in cases:
        tampered = mutate(payload)
        assert tampered != payload
        receiver = Exchange.qr(bob.identity, bob.contacts, T0)
        with pytest.raises(ItsMeError) as caught:
            receiver.receive(qr_text(tampered), T0)
        if not is_whole_qr_payload(tampered):
            # Cut short or run on (its length, or the name length byte):
            # not a whole reading, so the exchange waits for another (5.2).
            assert isinstance(caught.value, InvalidArgumentError), f"{label}: {caught.value!r}"
            assert receiver.state == ExchangeState.AWAITING_PEER, label
            receiver.receive(qr_text(payload), T0)
            assert receiver.state == ExchangeState.COMPARE_SAS, f"{label}: the whole payload is read after it"
            read_again += 1
            continue
        assert_failed(receiver, caught.value, label)
        with pytest.raises(InvalidStateError):
            receiver.sas
    assert read_again >= 9, "the truncations, the extensions and the name length byte's flips"
    receiver = Exchange.qr(bob.identity, bob.contacts, T0)
    receiver.receive(qr_text(payload), T0)
    assert receiver.state == ExchangeState.COMPARE_SAS, "the untouched payload is accepted"


@pytest.mark.parametrize("length", [384, 65_537, 131_074])
def test_qr_text_past_the_longest_payload_is_refused_unread(alice, bob, length):
    """A text longer than any payload text (383 bytes, 5.1) is a reading run
    on, refused before it is decoded: here it would decode to a payload of
    version 0, which ends an exchange; refused unread, the exchange goes on."""
    sender = Exchange.qr(alice.identity, alice.contacts, T0, random=rng("run-on"))
    receiver = Exchange.qr(bob.identity, bob.contacts, T0)
    n = length - len("ITSME1:")
    text = b"ITSME1:" + b"A" * (n + 1 if n % 4 == 1 else n)  # canonical base64url of zeros
    assert len(text) >= 384
    with pytest.raises(InvalidArgumentError, match="runs on"):
        receiver.receive(text, T0)
    assert receiver.state == ExchangeState.AWAITING_PEER
    source_text = b"5|" + b"x" * (length - 2)
    with pytest.raises(InvalidArgumentError, match="runs on"):
        receiver.receive(source_text, T0)
    assert receiver.state == ExchangeState.AWAITING_PEER
    receiver.receive(sender.next_outgoing(), T0)
    assert receiver.state == ExchangeState.COMPARE_SAS


def is_whole_qr_payload(payload: bytes) -> bool:
    """Section 5.2 step 3's length rule: at least 155 bytes, and, for a
    payload of version 1 with a name, exactly 154 + its name length."""
    if len(payload) < 155:
        return False
    return payload[0] != 1 or payload[89] == 0 or len(payload) == 154 + payload[89]


@pytest.mark.parametrize("name", ["Alice", "Bob", "Carol"])  # payload length 0, 1 and 2 modulo 3
def test_qr_non_canonical_base64url_is_read_again(make_party, name):
    sender = make_party(name)
    receiver_party = make_party("Receiver")
    text = Exchange.qr(sender.identity, sender.contacts, T0).next_outgoing()
    body = text[len(PREFIX):]
    assert b64url(qr_payload(text)) == body
    variants = {
        "padding": text + b"=" * (-len(body) % 4 or 4),
        "one =": text + b"=",
        "trailing newline": text + b"\n",
        "trailing space": text + b" ",
        "space inside": text[:40] + b" " + text[40:],
        "line break inside": text[:40] + b"\r\n" + text[40:],
        "tab inside": text[:40] + b"\t" + text[40:],
        "NUL at the end": text + b"\0",
        "standard alphabet": text[:40] + b"+" + text[41:],
        "slash": text[:40] + b"/" + text[41:],
        "one character more": text + b"A",
        "two characters fewer": text[:-2],
    }
    alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    leftover = len(qr_payload(text)) % 3
    if leftover:  # the last character carries unused bits: set one
        last = alphabet.index(body[-1:])
        variants["unused bits set"] = text[:-1] + alphabet[last ^ 1 : (last ^ 1) + 1]
        variants["all unused bits set"] = text[:-1] + alphabet[last | (0xF if leftover == 1 else 0x3) :][:1]
    # A misread or damaged encoding is not a whole reading: one exchange
    # refuses every variant, waits, and then reads the right text (5.2).
    receiver = Exchange.qr(receiver_party.identity, receiver_party.contacts, T0)
    for label, variant in variants.items():
        assert variant != text
        with pytest.raises(InvalidArgumentError):
            receiver.receive(variant, T0)
        assert receiver.state == ExchangeState.AWAITING_PEER, label
    receiver.receive(text, T0)
    assert receiver.state == ExchangeState.COMPARE_SAS


def test_qr_payload_of_the_longest_name(make_party):
    longest = make_party("é" * 64)
    peer = make_party("Peer")
    xa, xb = qr_pair(longest, peer)
    assert len(xa.next_outgoing()) == itsme.QR_PAYLOAD_MAX
    assert xb.peer_name == "é" * 64 and xa.sas == xb.sas


# -- man in the middle ------------------------------------------------------------


def test_qr_man_in_the_middle_changes_the_sas(alice, bob, mallory):
    # Mallory shows her own payload to each of them and scans theirs.
    xa, ma = qr_pair(alice, mallory, label="mitm a")
    mb, xb = qr_pair(mallory, bob, label="mitm b")
    assert xa.sas == ma.sas and mb.sas == xb.sas, "each half is a real exchange"
    assert xa.sas != xb.sas, "Alice and Bob read different SAS values aloud"
    assert xa.peer_fingerprint == mallory.identity.fingerprint != bob.identity.fingerprint
    assert xb.peer_fingerprint == mallory.identity.fingerprint


def test_qr_man_in_the_middle_posing_as_bob(alice, bob, mallory, tmp_path):
    # Mallory takes Bob's name: the SAS still differs, and the key is hers.
    impostor_identity = Identity.create(SecretStore.memory(), "Bob", random=rng("impostor"))
    impostor = Exchange.qr(impostor_identity, ContactStore.open(impostor_identity, tmp_path / "impostor.db"), T0)
    xa = Exchange.qr(alice.identity, alice.contacts, T0)
    xb = Exchange.qr(bob.identity, bob.contacts, T0)
    xa.receive(impostor.next_outgoing(), T0)
    impostor.receive(xa.next_outgoing(), T0)
    xb.receive(xa.next_outgoing(), T0)  # Bob scans Alice's real payload
    assert xa.peer_name == "Bob" and xa.peer_public_key != bob.identity.public_key
    assert xa.sas != xb.sas


# Fields of a QR payload (section 5.1) by (offset, length); the name follows.
QR_FIELDS = {
    "identity key": (1, 32),
    "identity key and fingerprint": (1, 40),
    "fingerprint": (33, 8),
    "ephemeral key": (41, 32),
    "device secret": (73, 16),
    "signature": (-64, 64),
}


@pytest.mark.parametrize("field", [*QR_FIELDS, "name"])
def test_qr_relayed_payload_with_a_substituted_field(alice, bob, field, tmp_path):
    # Mallory relays Bob's payload to Alice with one field of hers in it.
    mallory = Identity.create(SecretStore.memory(), "Eve", random=rng("relay"))
    mallory_contacts = ContactStore.open(mallory, tmp_path / "eve.db")
    ours = qr_payload(Exchange.qr(mallory, mallory_contacts, T0, random=rng("relay exchange")).next_outgoing())
    relayed = qr_payload(Exchange.qr(bob.identity, bob.contacts, T0).next_outgoing())
    start, length = QR_FIELDS.get(field, (90, 3))  # the name: "Bob" -> "Eve"
    ours_start = start % len(ours)
    start %= len(relayed)
    substituted = relayed[:start] + ours[ours_start : ours_start + length] + relayed[start + length :]
    assert substituted != relayed and len(substituted) == len(relayed)
    xa = Exchange.qr(alice.identity, alice.contacts, T0)
    with pytest.raises(AuthenticationFailedError):
        xa.receive(qr_text(substituted), T0)
    assert xa.state == ExchangeState.FAILED


# -- source format (v5) -------------------------------------------------------------

V5_KEY = base64.b64encode(hashlib.sha256(b"v5 ephemeral key").digest()).decode()
V5_FINGERPRINT = "a1b2c3d4e5f60718"


def v5_text(name: str = "Al\\|ice", fingerprint: str = V5_FINGERPRINT) -> str:
    return f"5|{name}|{fingerprint}|{V5_KEY}|123456"


def test_v5_import_is_unauthenticated(alice):
    exchange = Exchange.qr(alice.identity, alice.contacts, T0)
    exchange.receive(v5_text(), T0)
    assert exchange.state == ExchangeState.IMPORTED
    assert exchange.flags == ExchangeFlags.UNAUTHENTICATED
    assert exchange.peer_name == "Al|ice"
    assert exchange.peer_fingerprint == V5_FINGERPRINT.upper()
    assert exchange.peer_public_key is None
    with pytest.raises(InvalidStateError):
        exchange.sas
    assert exchange.next_outgoing() == b""
    contact_id = exchange.save(T0)
    contact = alice.contact(contact_id)
    assert not contact.authenticated and contact.public_key is None
    assert (contact.name, contact.fingerprint) == ("Al|ice", V5_FINGERPRINT.upper())
    assert contact.state == VerificationState.UNVERIFIED
    with pytest.raises(InvalidStateError):
        exchange.confirm(T0)
    assert exchange.state == ExchangeState.IMPORTED, "a refused confirm does not end the exchange"
    assert alice.contact(contact_id).state == VerificationState.UNVERIFIED
    exchange.reject()
    assert alice.contacts.count() == 0


def test_v5_name_changed_in_transit_still_imports(alice):
    # Nothing in a v5 text is authenticated: a changed name goes unnoticed,
    # which is why such an import is flagged UNAUTHENTICATED.
    for name in ["Mallory", "Al\\\\ice", "Zoë"]:
        exchange = Exchange.qr(alice.identity, alice.contacts, T0)
        exchange.receive(v5_text(name=name), T0)
        assert exchange.state == ExchangeState.IMPORTED
        assert exchange.flags & ExchangeFlags.UNAUTHENTICATED
        assert exchange.peer_name == name.replace("\\\\", "\\")
        assert exchange.peer_fingerprint == V5_FINGERPRINT.upper()


def test_v5_with_the_receivers_own_fingerprint_is_rejected(alice):
    for fingerprint in (alice.identity.fingerprint, alice.identity.fingerprint.lower()):
        exchange = Exchange.qr(alice.identity, alice.contacts, T0)
        with pytest.raises(InvalidKeyError):
            exchange.receive(v5_text(fingerprint=fingerprint), T0)
        assert exchange.state == ExchangeState.FAILED


@pytest.mark.parametrize(
    "text",
    [
        "5|Alice|A1B2C3D4E5F60718|" + V5_KEY,
        "5|Al\\ice|A1B2C3D4E5F60718|" + V5_KEY + "|123456",
        "5|Alice|A1B2C3D4E5F6071|" + V5_KEY + "|123456",
        "5|Alice|A1B2C3D4E5F60718|" + V5_KEY.rstrip("=") + "|123456",
        "5|Alice|A1B2C3D4E5F60718|" + V5_KEY + "|12345",
        "5||A1B2C3D4E5F60718|" + V5_KEY + "|123456",
    ],
)
def test_v5_malformed(alice, text):
    exchange = Exchange.qr(alice.identity, alice.contacts, T0)
    with pytest.raises(MalformedMessageError):
        exchange.receive(text, T0)
    assert exchange.state == ExchangeState.FAILED


def test_v5_contact_is_never_merged_with_a_keyed_one(alice, bob):
    xa, xb = qr_pair(alice, bob)
    keyed = xa.confirm(T0)
    exchange = Exchange.qr(alice.identity, alice.contacts, T0)
    exchange.receive(v5_text(name="Bob", fingerprint=bob.identity.fingerprint), T0)
    imported = exchange.save(T0)
    assert imported != keyed and not exchange.flags & ExchangeFlags.KNOWN_CONTACT
    assert alice.contact(keyed).state == VerificationState.VERIFIED
    assert [c.id for c in alice.contacts.find_fingerprint(bob.identity.fingerprint)] == [keyed, imported]


# -- exchanging again with a stored contact -----------------------------------------


def test_exchanging_again_with_a_stored_contact(alice, bob):
    xa, xb = qr_pair(alice, bob, label="first")
    contact_id = xa.confirm(T0)
    xb.confirm(T0)
    before = alice.contact(contact_id)
    assert before.state == VerificationState.VERIFIED and before.verified_at == T0

    # A second exchange, rejected: the stored contact stays exactly as it was.
    xa, xb = qr_pair(alice, bob, now=T0 + 100, label="second")
    assert xa.flags == ExchangeFlags(0)
    assert xa.save(T0 + 100) == contact_id
    assert xa.flags == ExchangeFlags.KNOWN_CONTACT
    assert alice.contact(contact_id) == before, "save changes nothing for a known contact"
    xa.reject()
    assert alice.contact(contact_id) == before
    assert alice.contacts.count() == 1

    # A third, confirmed (Bob renamed himself meanwhile): same id, verified
    # now, the stored name kept; the exchange gives the name Bob sent.
    bob.identity.name = "Robert"
    xa, xb = qr_pair(alice, bob, now=T0 + 200, label="third")
    assert xa.peer_name == "Robert"
    assert xa.confirm(T0 + 200) == contact_id
    assert xa.flags & ExchangeFlags.KNOWN_CONTACT
    after = alice.contact(contact_id)
    assert after.state == VerificationState.VERIFIED and after.verified_at == T0 + 200
    assert after.name == "Bob" and after.public_key == bob.identity.public_key
    assert alice.contacts.count() == 1


# -- Bluetooth ----------------------------------------------------------------------


def test_bluetooth_end_to_end(alice, bob):
    xa = Exchange.bluetooth(alice.identity, alice.contacts, T0)
    code = xa.session_code
    xb = Exchange.bluetooth(bob.identity, bob.contacts, T0, session_code=code.lower().replace(" ", "-"))
    assert xb.session_code == code
    assert xa.method == xb.method == itsme.ExchangeMethod.BLUETOOTH
    log = []
    assert pump(xa, xb, log=log) == {}
    types = [(sender is xa, frame[1]) for sender, frame in log]
    assert sorted(types) == sorted((side, t) for side in (True, False) for t in (HELLO, KEY, DATA))
    for sender, frame in log:
        assert len(frame) <= itsme.BLUETOOTH_FRAME_MAX and frame[0] == 1
    assert xa.state == xb.state == ExchangeState.COMPARE_SAS
    assert xa.sas == xb.sas
    assert (xa.peer_name, xa.peer_fingerprint, xa.peer_public_key) == (
        "Bob",
        bob.identity.fingerprint,
        bob.identity.public_key,
    )
    assert (xb.peer_name, xb.peer_public_key) == ("Alice", alice.identity.public_key)
    id_a = xa.save(T0)
    assert alice.contact(id_a).state == VerificationState.UNVERIFIED
    assert alice.contact(id_a).method == itsme.ExchangeMethod.BLUETOOTH
    assert xa.confirm(T0 + 5) == id_a
    # Alice confirmed first: her contact awaits Bob's decision.
    assert xa.state == ExchangeState.AWAITING_DECISION
    assert alice.contact(id_a).state == VerificationState.AWAITING_PEER
    with pytest.raises(InvalidStateError):
        xa.settle(T0 + 5)
    id_b = xb.confirm(T0 + 6)
    log.clear()
    assert pump(xa, xb, log=log) == {}
    assert [frame[1] for sender, frame in log] == [CONFIRM, CONFIRM]
    for exchange, store in ((xa, alice.contacts), (xb, bob.contacts)):
        assert exchange.flags == ExchangeFlags.PEER_CONFIRMED
        assert exchange.state == ExchangeState.AWAITING_DECISION
        exchange.settle(T0 + 7)
        assert exchange.state == ExchangeState.CONFIRMED
    assert alice.contact(id_a).state == VerificationState.VERIFIED
    assert bob.contact(id_b).state == VerificationState.VERIFIED
    assert bob.contact(id_b).public_key == alice.identity.public_key


def test_bluetooth_peer_rejects(alice, bob):
    xa, xb = bluetooth_pair(alice, bob)
    pump(xa, xb)
    xb.reject()
    xa.save(T0)
    assert pump(xa, xb) == {}
    assert xa.flags & ExchangeFlags.PEER_REJECTED
    assert xa.state == ExchangeState.COMPARE_SAS
    with pytest.raises(InvalidStateError):
        xa.confirm(T0)
    xa.reject()
    assert alice.contacts.count() == 0


def test_bluetooth_confirm_after_the_peer_confirmed(alice, bob):
    xa, xb = bluetooth_pair(alice, bob)
    pump(xa, xb)
    xb.confirm(T0)
    pump(xa, xb)
    assert xa.flags == ExchangeFlags.PEER_CONFIRMED and xa.state == ExchangeState.COMPARE_SAS
    contact_id = xa.confirm(T0)
    assert xa.state == ExchangeState.CONFIRMED, "Bob's confirmation came first: verified at once"
    assert alice.contact(contact_id).state == VerificationState.VERIFIED
    pump(xa, xb)
    assert xb.flags == ExchangeFlags.PEER_CONFIRMED
    assert xb.settle(T0) is not None
    assert xb.state == ExchangeState.CONFIRMED


def test_bluetooth_peer_rejects_after_this_side_confirmed(alice, bob):
    xa, xb = bluetooth_pair(alice, bob)
    pump(xa, xb)
    contact_id = xa.confirm(T0)
    assert alice.contact(contact_id).state == VerificationState.AWAITING_PEER
    xb.reject()
    pump(xa, xb)
    assert xa.flags & ExchangeFlags.PEER_REJECTED
    assert xa.settle(T0) is None
    assert xa.state == ExchangeState.REJECTED
    assert alice.contacts.count() == 0


def test_a_saved_contact_the_person_deleted_never_blocks_the_exchange(alice, bob):
    """8.1, "Saving": the person deletes the contact the exchange saved
    while the SAS is compared. Confirming is not_found and changes nothing;
    rejecting still ends the exchange and tells the peer."""
    xa, xb = bluetooth_pair(alice, bob)
    pump(xa, xb)
    contact_id = xa.save(T0)
    alice.contacts.delete(contact_id)
    with pytest.raises(itsme.NotFoundError):
        xa.confirm(T0)
    assert xa.state == ExchangeState.COMPARE_SAS and xa.next_outgoing() == b""
    assert xa.save(T0) == contact_id, "not saved again"
    assert alice.contacts.count() == 0
    xa.reject()
    assert xa.state == ExchangeState.REJECTED
    assert pump(xa, xb) == {}
    assert xb.flags & ExchangeFlags.PEER_REJECTED, "Bob learns of the rejection"


@pytest.mark.parametrize("peer_confirms", [True, False])
def test_a_contact_awaiting_the_peer_the_person_deleted(alice, bob, peer_confirms):
    """8.1: once this side confirmed, a deleted contact makes settling a
    confirmation not_found (nothing changes); a rejection, from the peer or
    this side, counts it as deleted."""
    xa, xb = bluetooth_pair(alice, bob)
    pump(xa, xb)
    contact_id = xa.confirm(T0)
    alice.contacts.delete(contact_id)
    xb.confirm(T0) if peer_confirms else xb.reject()
    pump(xa, xb)
    if peer_confirms:
        with pytest.raises(itsme.NotFoundError):
            xa.settle(T0)
        assert xa.state == ExchangeState.AWAITING_DECISION
        xa.reject()
    else:
        assert xa.settle(T0) is None
    assert xa.state == ExchangeState.REJECTED
    assert alice.contacts.count() == 0


def test_a_contact_awaiting_the_peer_expires(alice, bob):
    xa, xb = bluetooth_pair(alice, bob)
    pump(xa, xb)
    contact_id = xa.confirm(T0)
    # The session ends without Bob's CONFIRM; this device stops too.
    with pytest.raises(InvalidStateError):
        alice.contacts.set_state(contact_id, VerificationState.VERIFIED, now=T0)
    assert alice.contacts.expire_awaiting(T0 + 24 * 3600) == 0
    assert alice.contacts.expire_awaiting(T0 + 24 * 3600 + 1) == 1
    assert alice.contacts.count() == 0


def test_bluetooth_wrong_session_code_fails(alice, bob):
    xa = Exchange.bluetooth(alice.identity, alice.contacts, T0)
    value = itsme.short_code_parse(xa.session_code)
    xb = Exchange.bluetooth(bob.identity, bob.contacts, T0, session_code=itsme.short_code_format((value + 1) % 260000))
    errors = pump(xa, xb)
    assert errors, "the session code is bound into the keys"
    for exchange, error in errors.items():
        assert isinstance(error, AuthenticationFailedError)
        assert exchange.state == ExchangeState.FAILED
    for exchange in (xa, xb):
        assert exchange.state in (ExchangeState.FAILED, ExchangeState.AWAITING_PEER)


def test_bluetooth_man_in_the_middle_changes_the_sas(alice, bob, mallory):
    # Mallory runs one exchange with Alice and another with Bob, following
    # the protocol on each side.
    xa = Exchange.bluetooth(alice.identity, alice.contacts, T0, random=rng("mitm alice"))
    code = xa.session_code
    ma = Exchange.bluetooth(mallory.identity, mallory.contacts, T0, session_code=code, random=rng("mitm ma"))
    mb = Exchange.bluetooth(mallory.identity, mallory.contacts, T0, random=rng("mitm mb"))
    xb = Exchange.bluetooth(bob.identity, bob.contacts, T0, session_code=mb.session_code, random=rng("mitm bob"))
    assert pump(xa, ma) == {} and pump(mb, xb) == {}
    assert xa.sas == ma.sas and mb.sas == xb.sas
    assert xa.sas != xb.sas
    assert xa.peer_fingerprint == xb.peer_fingerprint == mallory.identity.fingerprint


def test_bluetooth_relay_with_a_substituted_key_fails(alice, bob, mallory):
    # Mallory relays every frame but puts her own ephemeral key in Bob's KEY.
    xa, xb = bluetooth_pair(alice, bob)
    ma = Exchange.bluetooth(mallory.identity, mallory.contacts, T0, session_code=xa.session_code)
    ma.next_outgoing()  # her HELLO
    hello_a = xa.next_outgoing()
    ma.receive(hello_a, T0)  # she reads Alice's HELLO on its way to Bob
    xb.receive(hello_a, T0)
    her_key = ma.next_outgoing()
    assert her_key[1] == KEY

    def substitute(sender, frame):
        return her_key if sender is xb and frame[1] == KEY else frame

    errors = pump(xa, xb, tamper=substitute)
    # Alice and Bob now hold different session keys: Bob cannot open
    # Alice's DATA, and neither of them ever shows a SAS.
    assert isinstance(errors.get(xb), AuthenticationFailedError)
    assert xb.state == ExchangeState.FAILED
    assert xa.state == ExchangeState.AWAITING_PEER
    with pytest.raises(InvalidStateError):
        xa.sas


def test_bluetooth_own_hello_reflected(alice):
    exchange = Exchange.bluetooth(alice.identity, alice.contacts, T0)
    with pytest.raises(InvalidKeyError):
        exchange.receive(exchange.next_outgoing(), T0)
    assert exchange.state == ExchangeState.FAILED


def honest_frames(alice, bob, label="bt"):
    """Every frame of an honest, confirmed Bluetooth exchange, by (sender, type)."""
    xa, xb = bluetooth_pair(alice, bob, label=label)
    log = []
    assert pump(xa, xb, log=log) == {}
    xa.confirm(T0)
    xb.confirm(T0)
    assert pump(xa, xb, log=log) == {}
    return {("a" if sender is xa else "b", frame[1]): frame for sender, frame in log}


@pytest.mark.parametrize("sender_name", ["a", "b"])
@pytest.mark.parametrize("frame_type", [HELLO, KEY, DATA, CONFIRM], ids=FRAME_NAMES.get)
def test_bluetooth_every_frame_tampered_is_rejected(alice, bob, sender_name, frame_type):
    frames = honest_frames(alice, bob)
    honest = frames[(sender_name, frame_type)]
    for label, mutate in mutations(honest, itsme.BLUETOOTH_FRAME_MAX):
        what = f"{FRAME_NAMES[frame_type]} from {sender_name}, {label}"
        xa, xb = bluetooth_pair(alice, bob)  # the same random: the same frames
        sender, receiver = (xa, xb) if sender_name == "a" else (xb, xa)
        hook = tamper_once(sender, frame_type, mutate)
        if frame_type == CONFIRM:
            assert pump(xa, xb) == {}
            sender.confirm(T0)
        errors = pump(xa, xb, tamper=hook)
        assert hook.applied == [honest], what
        for exchange, error in errors.items():
            assert_failed(exchange, error, what)
        if receiver not in errors:
            # A HELLO or KEY cannot be checked on arrival: the sender fails
            # first (on a DATA frame under other keys) and goes quiet.  The
            # receiver refuses what the sender would have sent next.
            assert frame_type in (HELLO, KEY) and sender in errors, f"{what}: accepted"
            assert receiver.state == ExchangeState.AWAITING_PEER, what
            with pytest.raises(ItsMeError) as caught:
                receiver.receive(frames[(sender_name, DATA)], T0)
            assert_failed(receiver, caught.value, what)
        assert receiver.next_outgoing() == b"", f"{what}: a failed exchange sends nothing"
        assert not (xa.state == xb.state == ExchangeState.COMPARE_SAS), what


def test_bluetooth_replayed_frames_are_rejected(alice, bob):
    frames = honest_frames(alice, bob)
    steps = [("a", HELLO), ("a", KEY), ("a", DATA), ("a", CONFIRM)]
    for replayed in range(len(steps)):
        xa, xb = bluetooth_pair(alice, bob)
        for step in steps[: replayed + 1]:
            xb.receive(frames[step], T0)
        if steps[replayed][1] == CONFIRM:
            # The peer's CONFIRM is its last frame: anything more is
            # invalid_state and changes nothing (PROTOCOL.md 7.1).
            with pytest.raises(InvalidStateError):
                xb.receive(frames[steps[replayed]], T0)
            assert xb.state == ExchangeState.COMPARE_SAS
            continue
        with pytest.raises((MalformedMessageError, AuthenticationFailedError)) as caught:
            xb.receive(frames[steps[replayed]], T0)
        assert isinstance(caught.value, MalformedMessageError), f"{steps[replayed]}: {caught.value!r}"
        assert xb.state == ExchangeState.FAILED


@pytest.mark.parametrize(
    "order",
    [
        ["KEY"],
        ["DATA"],
        ["CONFIRM"],
        ["HELLO", "DATA"],
        ["HELLO", "CONFIRM"],
        ["HELLO", "KEY", "CONFIRM"],
        ["HELLO", "KEY", "KEY"],
    ],
    ids="-".join,
)
def test_bluetooth_reordered_frames_are_rejected(alice, bob, order):
    frames = honest_frames(alice, bob)
    types = {name: t for t, name in FRAME_NAMES.items()}
    xa, xb = bluetooth_pair(alice, bob)
    *accepted, last = order
    for name in accepted:
        xb.receive(frames[("a", types[name])], T0)
    with pytest.raises((MalformedMessageError, AuthenticationFailedError)):
        xb.receive(frames[("a", types[last])], T0)
    assert xb.state == ExchangeState.FAILED


def test_bluetooth_frames_of_another_exchange_are_rejected(alice, bob):
    # A DATA frame from an earlier run with other keys does not decrypt.
    old = honest_frames(alice, bob, label="earlier")
    xa, xb = bluetooth_pair(alice, bob)
    errors = pump(xa, xb, tamper=lambda sender, frame: old[("a", DATA)] if sender is xa and frame[1] == DATA else frame)
    assert isinstance(errors.get(xb), AuthenticationFailedError)
    assert xb.state == ExchangeState.FAILED
    assert xb.last_error()


# -- seal and restore -----------------------------------------------------------------


def test_qr_seal_and_restore(alice, bob):
    xa = Exchange.qr(alice.identity, alice.contacts, T0)
    xb = Exchange.qr(bob.identity, bob.contacts, T0)
    sealed = xa.seal()  # awaiting the peer
    payload = xa.next_outgoing()
    xa.close()
    xa = Exchange.restore(alice.identity, alice.contacts, sealed, T0 + 60)
    assert xa.state == ExchangeState.AWAITING_PEER
    assert xa.next_outgoing() == payload
    xa.receive(xb.next_outgoing(), T0 + 60)
    xb.receive(payload, T0 + 60)
    sas = xa.sas
    assert sas == xb.sas
    contact_id = xa.save(T0 + 61)
    sealed = xa.seal()  # comparing the SAS, saved
    xa.close()
    with Identity.load(alice.secrets) as loaded:  # another handle on the same identity
        restored = Exchange.restore(loaded, alice.contacts, sealed, T0 + 120)
    assert restored.state == ExchangeState.COMPARE_SAS
    assert restored.method == itsme.ExchangeMethod.QR
    assert (restored.sas, restored.peer_name, restored.peer_public_key) == (sas, "Bob", bob.identity.public_key)
    assert restored.save(T0 + 120) == contact_id
    assert restored.confirm(T0 + 120) == contact_id
    assert alice.contact(contact_id).state == VerificationState.VERIFIED
    with pytest.raises(InvalidStateError):
        restored.seal()  # only a pending exchange can be sealed


def test_qr_restored_after_save_rejects_what_was_saved(alice, bob):
    xa, xb = qr_pair(alice, bob)
    xa.save(T0)
    restored = Exchange.restore(alice.identity, alice.contacts, xa.seal(), T0)
    restored.reject()
    assert alice.contacts.count() == 0


def test_v5_import_seal_and_restore(alice):
    exchange = Exchange.qr(alice.identity, alice.contacts, T0)
    exchange.receive(v5_text(), T0)
    restored = Exchange.restore(alice.identity, alice.contacts, exchange.seal(), T0)
    assert restored.state == ExchangeState.IMPORTED
    assert restored.flags == ExchangeFlags.UNAUTHENTICATED
    assert restored.peer_name == "Al|ice"


@pytest.mark.parametrize("after", [HELLO, KEY])
def test_bluetooth_seal_and_restore(alice, bob, after):
    xa, xb = bluetooth_pair(alice, bob)
    xb.receive(xa.next_outgoing(), T0)  # Alice's HELLO
    xa.receive(xb.next_outgoing(), T0)  # Bob's HELLO
    if after == KEY:
        xb.receive(xa.next_outgoing(), T0)  # Alice's KEY, sent before sealing
    sealed = xa.seal()
    xa.close()
    xa = Exchange.restore(alice.identity, alice.contacts, sealed, T0 + 30)
    assert xa.session_code == xb.session_code
    assert pump(xa, xb, now=T0 + 30) == {}
    assert xa.state == xb.state == ExchangeState.COMPARE_SAS
    assert xa.sas == xb.sas
    # Sealed again while comparing, restored, confirmed: Bob gets the CONFIRM.
    xa = Exchange.restore(alice.identity, alice.contacts, xa.seal(), T0 + 40)
    xa.confirm(T0 + 40)
    assert pump(xa, xb, now=T0 + 40) == {}
    assert xb.flags == ExchangeFlags.PEER_CONFIRMED


@pytest.mark.parametrize("decision", ["confirm", "reject"])
def test_bluetooth_finished_exchange_sealed_with_its_confirm_frame(alice, bob, decision):
    xa, xb = bluetooth_pair(alice, bob)
    assert pump(xa, xb) == {}
    if decision == "confirm":
        xa.confirm(T0)
    else:
        xa.reject()
    finished = xa.state
    sealed = xa.seal()  # before its CONFIRM frame went out
    xa.close()
    xa = Exchange.restore(alice.identity, alice.contacts, sealed, T0 + 10)
    assert xa.state == finished
    frame = xa.next_outgoing()
    assert frame[1] == CONFIRM
    xb.receive(frame, T0 + 10)
    expected = ExchangeFlags.PEER_CONFIRMED if decision == "confirm" else ExchangeFlags.PEER_REJECTED
    assert xb.flags == expected
    # Sealed again after sending: nothing is sent twice, the peer's CONFIRM is taken.
    xa = Exchange.restore(alice.identity, alice.contacts, xa.seal(), T0 + 20)
    assert xa.next_outgoing() == b""
    if decision == "confirm":
        xb.confirm(T0 + 20)
    else:
        xb.reject()
    xa.receive(xb.next_outgoing(), T0 + 20)
    assert xa.state == finished
    assert xa.flags == (ExchangeFlags.PEER_CONFIRMED if decision == "confirm" else ExchangeFlags.PEER_REJECTED)


def test_sealed_exchange_tampered(alice, bob):
    xa, xb = qr_pair(alice, bob)
    sealed = xa.seal()
    assert Exchange.restore(alice.identity, alice.contacts, sealed, T0).sas == xa.sas
    for label, mutate in mutations(sealed, 2 * len(sealed)):
        with pytest.raises((AuthenticationFailedError, CorruptDataError)):
            Exchange.restore(alice.identity, alice.contacts, mutate(sealed), T0)


def test_sealed_exchange_of_another_identity(alice, bob, make_party, tmp_path):
    xa, xb = qr_pair(alice, bob)
    sealed = xa.seal()
    with pytest.raises(AuthenticationFailedError):
        Exchange.restore(bob.identity, bob.contacts, sealed, T0)
    # The same identity on another device (another secret store, so another
    # device key) cannot restore it either.
    clone = Identity.create(SecretStore.memory(), "Alice", random=rng("identity Alice"))
    assert clone.public_key == alice.identity.public_key
    with pytest.raises(AuthenticationFailedError):
        Exchange.restore(clone, ContactStore.open(clone, tmp_path / "clone.db"), sealed, T0)


def test_expiry(alice, bob):
    xa = Exchange.qr(alice.identity, alice.contacts, T0)
    sealed = xa.seal()
    assert Exchange.restore(alice.identity, alice.contacts, sealed, T0 + DAY).state == ExchangeState.AWAITING_PEER
    with pytest.raises(ExpiredError):
        Exchange.restore(alice.identity, alice.contacts, sealed, T0 + DAY + 1)
    payload_b = Exchange.qr(bob.identity, bob.contacts, T0).next_outgoing()
    with pytest.raises(ExpiredError):
        xa.receive(payload_b, T0 + DAY + 1)
    assert xa.state == ExchangeState.FAILED
    with pytest.raises(InvalidStateError):
        xa.receive(payload_b, T0)

    # Comparing the SAS for too long: save fails the exchange.
    xa, xb = qr_pair(alice, bob)
    xa.save(T0 + DAY)
    with pytest.raises(ExpiredError):
        xa.confirm(T0 + DAY + 1)
    assert xa.state == ExchangeState.FAILED

    bt = Exchange.bluetooth(alice.identity, alice.contacts, T0)
    with pytest.raises(ExpiredError):
        bt.receive(b"\x01\x01" + bytes(40), T0 + DAY + 1)
    assert bt.state == ExchangeState.FAILED


# -- calls in the wrong state ------------------------------------------------------------


def test_calls_before_the_sas(alice, bob):
    xa = Exchange.qr(alice.identity, alice.contacts, T0)
    with pytest.raises(InvalidStateError):
        xa.confirm(T0)
    with pytest.raises(InvalidStateError):
        xa.save(T0)
    with pytest.raises(InvalidStateError):
        xa.sas
    assert xa.state == ExchangeState.AWAITING_PEER, "the exchange has not failed"
    assert xa.last_error()
    xb = Exchange.qr(bob.identity, bob.contacts, T0)
    xa.receive(xb.next_outgoing(), T0)
    xb.receive(xa.next_outgoing(), T0)
    assert xa.sas == xb.sas

    bt_a, bt_b = bluetooth_pair(alice, bob)
    bt_b.receive(bt_a.next_outgoing(), T0)
    with pytest.raises(InvalidStateError):
        bt_b.confirm(T0)
    assert bt_b.state == ExchangeState.AWAITING_PEER
    assert pump(bt_a, bt_b) == {}
    assert bt_a.sas == bt_b.sas


def test_calls_after_failure(alice, bob):
    xa = Exchange.qr(alice.identity, alice.contacts, T0)
    payload_b = Exchange.qr(bob.identity, bob.contacts, T0).next_outgoing()
    with pytest.raises(MalformedMessageError):
        xa.receive(qr_text(b"\x02" + qr_payload(payload_b)[1:]), T0)  # a whole payload of another version
    assert xa.state == ExchangeState.FAILED
    reason = xa.last_error()
    assert reason
    for call in [
        lambda: xa.receive(payload_b, T0),
        lambda: xa.save(T0),
        lambda: xa.confirm(T0),
        lambda: xa.reject(),
        lambda: xa.reject(),
        lambda: xa.seal(),
        lambda: xa.sas,
        lambda: xa.peer_name,
        lambda: xa.peer_fingerprint,
        lambda: xa.peer_public_key,
    ]:
        with pytest.raises(InvalidStateError):
            call()
    assert xa.state == ExchangeState.FAILED
    assert xa.next_outgoing() == b"", "a failed exchange shows nothing"
    assert alice.contacts.count() == 0


def test_failure_after_the_peer_was_received_hides_the_peer(alice, bob):
    xa, xb = bluetooth_pair(alice, bob)
    pump(xa, xb)
    assert xa.peer_name == "Bob"
    with pytest.raises(MalformedMessageError):
        xa.receive(b"\x02\x04" + bytes(17), T0)  # unknown version
    with pytest.raises(InvalidStateError):
        xa.peer_name
    with pytest.raises(InvalidStateError):
        xa.sas


@pytest.mark.parametrize("whose", ["peer", "stranger"])
def test_a_store_of_another_identity_is_refused(alice, bob, make_party, whose):
    # The header: `store` must belong to the exchange's identity, at creation
    # and at restore; nothing is written to it.
    store = bob.contacts if whose == "peer" else make_party("Carol").contacts
    with pytest.raises(itsme.WrongIdentityError):
        Exchange.qr(alice.identity, store, T0)
    xa, xb = qr_pair(alice, bob)
    contact_id = xa.save(T0)
    with pytest.raises(itsme.WrongIdentityError):
        Exchange.restore(alice.identity, store, xa.seal(), T0)
    assert store.count() == 0
    assert alice.contacts.get(contact_id).name == "Bob"
    xa.reject()
    assert alice.contacts.count() == 0


def test_once_saved_only_that_store_will_do(alice, bob, tmp_path):
    other = ContactStore.open(alice.identity, tmp_path / "another.db")  # the same identity
    try:
        xa, xb = qr_pair(alice, bob)
        unsaved = xa.seal()
        contact_id = xa.save(T0)
        # Restored after it saved, it takes only the store it saved in (the
        # same file through another handle will do); before, any of hers.
        with pytest.raises(InvalidArgumentError):
            Exchange.restore(alice.identity, other, xa.seal(), T0)
        assert Exchange.restore(alice.identity, other, unsaved, T0).state == ExchangeState.COMPARE_SAS
        same_file = ContactStore.open(alice.identity, alice.path)
        try:
            restored = Exchange.restore(alice.identity, same_file, xa.seal(), T0)
            assert restored.confirm(T0) == contact_id
        finally:
            same_file.close()
        assert other.count() == 0
        assert alice.contacts.get(contact_id).state == itsme.VerificationState.VERIFIED
    finally:
        other.close()


def test_store_argument_types(alice, bob):
    for wrong in (alice.secrets, alice.identity, None, "contacts.db"):
        with pytest.raises(TypeError):
            Exchange.qr(alice.identity, wrong, T0)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            Exchange.restore(alice.identity, wrong, b"sealed", T0)  # type: ignore[arg-type]
    xa, xb = qr_pair(alice, bob)
    with pytest.raises(TypeError):
        xa.receive(12345, T0)
