"""The degradation code through the Python binding (docs/PROTOCOL.md section
10.2): a person moves to a new device (the identity item copied into a new
secret store, the same contact file), gives a contact the code, and the
contact types it in: lower case with spaces, wrong, junk, too often.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Dict, Optional

import pytest

import itsme
from itsme import (
    AuthenticationFailedError,
    ContactStore,
    DeterministicRandom,
    Identity,
    InvalidArgumentError,
    LockedError,
    NotFoundError,
    SecretStore,
    VerificationState,
    VoiceOutcome,
)
from test_voice import EXCHANGED, Party, befriend, rng, sessions, to_codes  # noqa: F401  (sessions: a fixture)

# Typed after the exchange and before the voice sessions of test_voice.
NOW = EXCHANGED + 600
CODE = re.compile(r"[A-Z2-7]{4}(-[A-Z2-7]{4}){5}")
IDENTITY_ITEM = "itsme.identity"
# Five wrong codes lock further attempts for five minutes.
FREE_FAILURES, FIRST_LOCK = 5, 300


class Items:
    """A secret-store backend over a dict, so that a test can read an item
    the library wrote (a memory store has no reading function)."""

    def __init__(self, items: Optional[Dict[str, bytes]] = None) -> None:
        self.items = {} if items is None else items

    def get(self, name: str) -> Optional[bytes]:
        return self.items.get(name)

    def put(self, name: str, value: bytes, accessibility: int) -> None:
        self.items[name] = value

    def remove(self, name: str) -> bool:
        return self.items.pop(name, None) is not None


@dataclass
class Device:
    """Where a person's secrets and contacts live on one device."""

    party: Party
    path: object


@pytest.fixture
def make_person(tmp_path):
    """Makes people whose secret store a test can read, as test_voice's
    parties; and moves them to new devices."""
    made = []

    def close_later(party: Party) -> Party:
        made.append(party)
        return party

    def make(name: str) -> Device:
        secrets = SecretStore.from_callbacks(Items())
        identity = Identity.create(secrets, name, random=rng(f"identity {name}"))
        path = tmp_path / f"{name.lower()}-{len(made)}.db"
        party = close_later(Party(name, secrets, identity, ContactStore.open(identity, path)))
        return Device(party, path)

    def move(device: Device) -> Device:
        """The same person on a new device: a new secret store holding a copy
        of the identity item, and the same contact file.  The device key
        stays behind, so the new device reads no device secret."""
        old = device.party
        copy = old.secrets.backend.items[IDENTITY_ITEM]
        secrets = SecretStore.from_callbacks(Items({IDENTITY_ITEM: copy}))
        identity = Identity.load(secrets)
        assert identity.public_key == old.identity.public_key
        party = close_later(Party(old.name, secrets, identity, ContactStore.open(identity, device.path), old.peer))
        return Device(party, device.path)

    make.move = move
    yield make
    for party in reversed(made):
        party.contacts.close()
        party.identity.close()
        party.secrets.close()


@pytest.fixture
def moved(make_person):
    """Alice and Bob, verified contacts of each other; then Alice on a new
    device: (new Alice, Bob)."""
    alice, bob = make_person("Alice"), make_person("Bob")
    befriend(alice.party, bob.party)
    new_alice = make_person.move(alice)
    assert new_alice.party.contact().state == VerificationState.VERIFIED, "the contacts came along"
    return new_alice.party, bob.party


def typed_as(code: str) -> str:
    """The code as someone might type it: lower case, spaces for dashes."""
    return code.lower().replace("-", " ")


def a_wrong_code(code: str) -> str:
    """A well-formed code that differs from ``code`` in one character."""
    last = code[-1]
    return code[:-1] + ("A" if last != "A" else "B")


def test_the_contact_accepts_the_code_of_the_new_device(moved, sessions):
    alice, bob = moved
    code = alice.contacts.degradation_code(alice.peer)
    assert CODE.fullmatch(code), code
    assert len(code) + 1 == itsme.DEGRADATION_CODE_SIZE
    bob.contacts.accept_degradation_code(bob.peer, typed_as(code), NOW)
    contact = bob.contact()
    assert (contact.state, contact.acknowledged) == (VerificationState.DEGRADED, True)
    # Bob now holds Alice's interim device secret: her tag matches again,
    # and the contact stays degraded (only a PIN Update restores it).  Her
    # new device holds no device secret of Bob's: his tag is not checked.
    sa, sb, now = to_codes((alice, bob), sessions)
    assert sa.their_code.tag is None and sb.their_code.tag is not None
    assert sb.check(*sa.your_code, now) == VoiceOutcome.VERIFIED
    assert sa.check(*sb.your_code, now) == VoiceOutcome.VERIFIED_TAG_UNCHECKED
    contact = bob.contact()
    assert (contact.state, contact.acknowledged) == (VerificationState.DEGRADED, True)


def test_without_the_code_the_change_shows_as_a_changed_device(moved, sessions):
    alice, bob = moved
    sa, sb, now = to_codes((alice, bob), sessions)
    assert sb.check(*sa.your_code, now) == VoiceOutcome.DEVICE_CHANGED
    contact = bob.contact()
    assert (contact.state, contact.acknowledged) == (VerificationState.DEGRADED, False)
    # The code, accepted afterwards, acknowledges the change.
    bob.contacts.accept_degradation_code(bob.peer, alice.contacts.degradation_code(alice.peer), now)
    assert bob.contact().acknowledged


@pytest.mark.parametrize(
    "typed",
    ["{code}", "{lower}", "{spaced}", "{bare}", "  {bare_lower}  ", "{lower_dashes_spaced}"],
)
def test_the_code_is_typed_leniently(moved, typed):
    alice, bob = moved
    code = alice.contacts.degradation_code(alice.peer)
    bare = code.replace("-", "")
    text = typed.format(
        code=code,
        lower=code.lower(),
        spaced=code.replace("-", " "),
        bare=bare,
        bare_lower=bare.lower(),
        lower_dashes_spaced=" - ".join(code.lower().split("-")),
    )
    bob.contacts.accept_degradation_code(bob.peer, text, NOW)
    assert bob.contact().state == VerificationState.DEGRADED


def test_a_wrong_code_is_counted_and_junk_is_not(moved):
    alice, bob = moved
    code = alice.contacts.degradation_code(alice.peer)
    before = bob.contact()
    junk = [
        "",
        "   ",
        code[:-1],
        code + "A",
        code[:-1] + "1",
        code[:-1] + "0",
        code.replace("-", "_"),
        code[:-1] + "\u00e9",
        code + "\n",
    ]
    for text in junk * 2:
        with pytest.raises(InvalidArgumentError) as caught:
            bob.contacts.accept_degradation_code(bob.peer, text, NOW)
        assert caught.value.detail
    # Junk is not counted: four wrong codes after it are each refused as
    # wrong, and the right one is still accepted.
    for _ in range(FREE_FAILURES - 1):
        with pytest.raises(AuthenticationFailedError) as caught:
            bob.contacts.accept_degradation_code(bob.peer, a_wrong_code(code), NOW)
        assert caught.value.detail == bob.contacts.last_error() != ""
    assert bob.contact() == before, "nothing changed"
    bob.contacts.accept_degradation_code(bob.peer, code, NOW)
    assert bob.contact().state == VerificationState.DEGRADED
    # A right code resets the count: four more wrong ones are not locked.
    for _ in range(FREE_FAILURES - 1):
        with pytest.raises(AuthenticationFailedError):
            bob.contacts.accept_degradation_code(bob.peer, a_wrong_code(code), NOW)


def test_too_many_wrong_codes_lock(moved):
    alice, bob = moved
    code = alice.contacts.degradation_code(alice.peer)
    for _ in range(FREE_FAILURES):
        with pytest.raises(AuthenticationFailedError):
            bob.contacts.accept_degradation_code(bob.peer, a_wrong_code(code), NOW)
    # Locked, even for the right code, which is not checked.
    for attempt in (code, a_wrong_code(code)):
        with pytest.raises(LockedError):
            bob.contacts.accept_degradation_code(bob.peer, attempt, NOW + FIRST_LOCK - 1)
    assert bob.contact().state == VerificationState.VERIFIED
    # A typing error is still a typing error.
    with pytest.raises(InvalidArgumentError):
        bob.contacts.accept_degradation_code(bob.peer, "junk", NOW)
    bob.contacts.accept_degradation_code(bob.peer, code, NOW + FIRST_LOCK)
    assert bob.contact().state == VerificationState.DEGRADED


def test_only_the_latest_code_matches_the_new_device(moved, sessions):
    alice, bob = moved
    # Fixed interim secrets: with drawn ones, the two tags would agree 1
    # time in 100 and the change would go unseen.
    random = rng("first and latest")
    first = alice.contacts.degradation_code(alice.peer, random=random)
    latest = alice.contacts.degradation_code(alice.peer, random=random)
    assert first != latest
    # An earlier code is still a code of Alice's (it carries its own
    # secret), so it is accepted; but her device now says the latest
    # secret, and Bob's sees a changed device again.
    bob.contacts.accept_degradation_code(bob.peer, first, NOW)
    assert bob.contact().acknowledged
    sa, sb, now = to_codes((alice, bob), sessions)
    assert sb.check(*sa.your_code, now) == VoiceOutcome.DEVICE_CHANGED
    contact = bob.contact()
    assert (contact.state, contact.acknowledged) == (VerificationState.DEGRADED, False)
    # The latest code: her tags match.
    bob.contacts.accept_degradation_code(bob.peer, latest, now)
    sa, sb, now = to_codes((alice, bob), sessions, now)
    assert sb.check(*sa.your_code, now) == VoiceOutcome.VERIFIED
    assert bob.contact().acknowledged


def test_the_code_is_the_pure_derivation_of_the_secret_drawn(make_person):
    alice, bob = make_person("Alice").party, make_person("Bob").party
    seed = bytes(range(32))
    alice.peer = alice.contacts.add("Bob", bob.identity.public_key, seed, now=EXCHANGED)
    bob.peer = bob.contacts.add("Alice", alice.identity.public_key, seed, now=EXCHANGED)
    first = alice.contacts.degradation_code(alice.peer, random=DeterministicRandom(bytes(32)))
    # The same random source gives the same code; another, another.
    assert alice.contacts.degradation_code(alice.peer, random=DeterministicRandom(bytes(32))) == first
    code = alice.contacts.degradation_code(alice.peer, random=DeterministicRandom(bytes([1]) * 32))
    assert code != first
    raw = base64.b32decode(code.replace("-", ""))
    secret, mac = raw[:10], raw[10:]
    assert len(mac) == 5
    assert itsme.derive_degradation_code(seed, alice.identity.public_key, secret) == code
    # The code names its person: with Bob's pid it is another.
    assert itsme.derive_degradation_code(seed, bob.identity.public_key, secret) != code
    bob.contacts.accept_degradation_code(bob.peer, code, NOW)
    contact = bob.contact()
    assert (contact.state, contact.acknowledged) == (VerificationState.DEGRADED, True)


def test_unknown_contacts_and_bad_arguments(moved):
    alice, bob = moved
    code = alice.contacts.degradation_code(alice.peer)
    with pytest.raises(NotFoundError):
        alice.contacts.degradation_code(alice.peer + 100)
    with pytest.raises(NotFoundError):
        bob.contacts.accept_degradation_code(bob.peer + 100, code, NOW)
    for now in (-1, 253402300800):
        with pytest.raises(InvalidArgumentError):
            bob.contacts.accept_degradation_code(bob.peer, code, now)
    with pytest.raises(InvalidArgumentError):
        bob.contacts.accept_degradation_code(bob.peer, code + "\0", NOW)
    with pytest.raises(TypeError):
        bob.contacts.accept_degradation_code(bob.peer, code.encode(), NOW)
    with pytest.raises(TypeError):
        alice.contacts.degradation_code(alice.peer, random=b"\0" * 32)
    bob.contacts.accept_degradation_code(bob.peer, code, NOW)


def test_derive_degradation_code_checks_its_arguments():
    seed, pid, secret = bytes(32), bytes(range(32)), bytes(range(10))
    code = itsme.derive_degradation_code(seed, pid, secret)
    assert CODE.fullmatch(code)
    assert itsme.derive_degradation_code(seed, pid[:8], secret) != code, "a fingerprint pid"
    for bad in [(seed[:31], pid, secret), (seed, pid[:31], secret), (seed, pid, secret[:9]), (seed, pid, bytes(16))]:
        with pytest.raises(InvalidArgumentError):
            itsme.derive_degradation_code(*bad)
    with pytest.raises(TypeError):
        itsme.derive_degradation_code(seed, pid, "0123456789")
