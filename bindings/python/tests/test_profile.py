"""Profile records through the Python binding (docs/PROTOCOL.md section 18):
made by the owner, opened by a contact with the reference and the owner's
key, applied to the stored contact; every refusal of 18.4 by its exception;
contact photos set and read back.
"""

from __future__ import annotations

import hashlib

import pytest

import itsme
from itsme import (
    AuthenticationFailedError,
    ContactStore,
    DeterministicRandom,
    Identity,
    InvalidArgumentError,
    MalformedMessageError,
    NotFoundError,
    Profile,
    SecretStore,
)

T0 = 1_800_000_000
PHOTO = bytes((i * 7 + 3) & 0xFF for i in range(300))
NAME = "Alice Smith"
FILENAME = "alice.jpg"
# docs/PROTOCOL.md 18.2: version, then each field as nonce (12), u32 length,
# ciphertext, MAC (32), then the record MAC (32).
FIELD_HEAD = 12 + 4
MAC = 32


def rng(label: str) -> DeterministicRandom:
    return DeterministicRandom(hashlib.sha256(label.encode()).digest())


class People:
    """Identities with contact stores, closed at the end."""

    def __init__(self, directory):
        self.directory = directory
        self.handles = []

    def identity(self, name: str) -> Identity:
        secrets = SecretStore.memory()
        identity = Identity.create(secrets, name, random=rng(f"identity {name}"))
        self.handles += [secrets, identity]
        return identity

    def contacts(self, identity: Identity) -> ContactStore:
        store = ContactStore.open(identity, self.directory / f"contacts-{len(self.handles)}.db")
        self.handles.append(store)
        return store

    def keep(self, handle):
        self.handles.append(handle)
        return handle

    def close(self):
        for handle in reversed(self.handles):
            handle.close()


@pytest.fixture
def people(tmp_path):
    made = People(tmp_path)
    yield made
    made.close()


@pytest.fixture
def alice(people):
    return people.identity("Alice")


@pytest.fixture
def made(people, alice):
    """Alice's profile: name, photo, filename."""
    return people.keep(Profile.create(alice, NAME, PHOTO, FILENAME))


def field_offsets(record: bytes):
    """(start of each field, start of its ciphertext, ciphertext length), from the record's lengths."""
    offsets, at = [], 1
    for _ in range(3):
        length = int.from_bytes(record[at + 12 : at + 16], "big")
        offsets.append((at, at + FIELD_HEAD, length))
        at += FIELD_HEAD + length + MAC
    assert at + MAC == len(record)
    return offsets


def flipped(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


# -- a whole round trip ------------------------------------------------------------------


def test_round_trip(people, alice, made):
    record, reference = made.record, made.reference
    assert (made.name, made.photo, made.photo_filename) == (NAME, PHOTO, FILENAME)
    assert len(record) == itsme.PROFILE_RECORD_OVERHEAD + len(NAME.encode()) + len(PHOTO) + len(FILENAME)
    assert record[0] == 1, "record format version 1"
    assert len(reference) == itsme.PROFILE_REFERENCE_BYTES
    assert len(made.record_id) == itsme.RECORD_ID_BYTES
    assert reference[: itsme.RECORD_ID_BYTES] == made.record_id, "reference = record ID || record key"
    assert made.record_name == made.record_id.hex() and len(made.record_name) == itsme.RECORD_NAME_SIZE - 1
    # The record ID is the first 16 bytes of the record MAC, at the end of the record.
    assert record[-MAC:][: itsme.RECORD_ID_BYTES] == made.record_id
    # Nothing is in the clear.
    for value in (NAME.encode(), PHOTO[:16], FILENAME.encode(), reference[16:]):
        assert value not in record
    with Profile.open(record, reference, alice.public_key) as opened:
        assert (opened.name, opened.photo, opened.photo_filename) == (NAME, PHOTO, FILENAME)
        assert (opened.record, opened.record_id, opened.record_name) == (record, made.record_id, made.record_name)
        assert opened.reference == reference
    # Each record is new: a new key, new nonces, a new ID.
    again = people.keep(Profile.create(alice, NAME, PHOTO, FILENAME))
    assert again.record_id != made.record_id and again.reference[16:] != reference[16:]
    assert again.record != record and len(again.record) == len(record)


def test_the_same_random_source_makes_the_same_record(people, alice):
    one = people.keep(Profile.create(alice, NAME, PHOTO, FILENAME, rng=rng("profile")))
    two = people.keep(Profile.create(alice, NAME, PHOTO, FILENAME, rng=rng("profile")))
    three = people.keep(Profile.create(alice, NAME, PHOTO, FILENAME, rng=rng("another")))
    assert one.record == two.record != three.record
    assert one.reference == two.reference != three.reference


@pytest.mark.parametrize(
    "name, photo, filename",
    [("Élodie 🌻", b"", ""), ("", PHOTO, "portrait.webp"), ("", b"\x00", ""), ("B" * 128, b"", "")],
)
def test_a_name_or_a_photo_alone(people, alice, name, photo, filename):
    profile = people.keep(Profile.create(alice, name, photo, filename))
    size = itsme.PROFILE_RECORD_OVERHEAD + len(name.encode()) + len(photo) + len(filename.encode())
    assert len(profile.record) == size
    with Profile.open(profile.record, profile.reference, alice.public_key) as opened:
        assert (opened.name, opened.photo, opened.photo_filename) == (name, photo, filename)


def test_the_largest_record(people, alice):
    largest = itsme.PROFILE_RECORD_MAX - itsme.PROFILE_RECORD_OVERHEAD - len("A") - len("a.png")
    photo = bytes(range(256)) * (largest // 256) + bytes(largest % 256)
    profile = people.keep(Profile.create(alice, "A", photo, "a.png"))
    assert len(profile.record) == itsme.PROFILE_RECORD_MAX
    with Profile.open(profile.record, profile.reference, alice.public_key) as opened:
        assert opened.photo == photo
    with pytest.raises(InvalidArgumentError):
        Profile.create(alice, "A", photo + b"\0", "a.png")


@pytest.mark.parametrize(
    "name, photo, filename",
    [
        ("", b"", ""),  # neither a name nor a photo
        ("Alice", b"", "a.jpg"),  # a filename needs a photo
        ("Al\x07ice", b"", ""),  # a control character
        ("A" * 129, b"", ""),  # too long a name
        ("Alice", b"x", "a/b.jpg"),
        ("Alice", b"x", "a\\b.jpg"),
        ("Alice", b"x", "."),
        ("Alice", b"x", ".."),
        ("Alice", b"x", "f" * 256),
        ("Alice", b"x", "a\nb"),
    ],
)
def test_create_refuses_values_that_break_the_rules(alice, name, photo, filename):
    with pytest.raises(InvalidArgumentError) as caught:
        Profile.create(alice, name, photo, filename)
    assert caught.value.detail


def test_create_arguments(alice):
    with pytest.raises(TypeError):
        Profile.create(b"not an identity", NAME)
    with pytest.raises(TypeError):
        Profile.create(alice, NAME, "a photo as text")
    with pytest.raises(TypeError):
        Profile.create(alice, NAME, rng=b"\0" * 32)
    with pytest.raises(InvalidArgumentError):
        Profile.create(alice, "A\0B")
    alice.close()
    with pytest.raises(ValueError):
        Profile.create(alice, NAME)


def test_the_reference_stays_out_of_repr_and_str(made):
    reference = made.reference
    for text in (repr(made), str(made)):
        assert reference.hex() not in text and reference[16:].hex() not in text
        assert reference.hex().upper() not in text and repr(reference)[2:-1] not in text
        assert repr(reference[16:])[2:-1] not in text
    assert made.record_name in repr(made)


def test_close_and_context_manager(alice):
    with Profile.create(alice, NAME) as profile:
        assert not profile.closed
    assert profile.closed and repr(profile) == "<Profile closed>"
    for name in ("name", "photo", "photo_filename", "record", "record_id", "record_name", "reference"):
        with pytest.raises(ValueError):
            getattr(profile, name)
    profile.close()
    with pytest.raises(AttributeError):
        profile.name = "Mallory"


# -- what opening refuses (18.4) -----------------------------------------------------------


def test_a_tampered_field_is_refused(alice, made):
    record = made.record
    for index, (start, ciphertext, length) in enumerate(field_offsets(record)):
        if length:
            with pytest.raises(AuthenticationFailedError):
                Profile.open(flipped(record, ciphertext), made.reference, alice.public_key)
            with pytest.raises(AuthenticationFailedError):
                Profile.open(flipped(record, ciphertext + length - 1), made.reference, alice.public_key)
        with pytest.raises(AuthenticationFailedError):
            Profile.open(flipped(record, start), made.reference, alice.public_key)  # its nonce


def test_a_tampered_field_mac_is_refused(alice, made):
    record = made.record
    for start, ciphertext, length in field_offsets(record):
        for at in (ciphertext + length, ciphertext + length + MAC - 1):
            with pytest.raises(AuthenticationFailedError):
                Profile.open(flipped(record, at), made.reference, alice.public_key)


def test_a_tampered_record_mac_is_refused(alice, made):
    record = made.record
    for at in (len(record) - MAC, len(record) - MAC + 16, len(record) - 1):
        with pytest.raises(AuthenticationFailedError):
            Profile.open(flipped(record, at), made.reference, alice.public_key)


def test_a_reference_naming_another_record_is_refused(people, alice, made):
    other = people.keep(Profile.create(alice, "Another", b"", ""))
    # Another record's ID with this record's key, this record's ID with
    # another key, and one flipped bit of the ID.
    for reference in (
        other.record_id + made.reference[16:],
        made.record_id + other.reference[16:],
        flipped(made.reference, 0),
        flipped(made.reference, 15),
        flipped(made.reference, 31),
    ):
        with pytest.raises(AuthenticationFailedError):
            Profile.open(made.record, reference, alice.public_key)
    # Another record under this record's reference.
    with pytest.raises(AuthenticationFailedError):
        Profile.open(other.record, made.reference, alice.public_key)


def test_another_owner_is_refused(people, alice, made):
    bob = people.identity("Bob")
    with pytest.raises(AuthenticationFailedError):
        Profile.open(made.record, made.reference, bob.public_key)
    with pytest.raises(AuthenticationFailedError):
        Profile.open(made.record, made.reference, flipped(alice.public_key, 0))


def test_an_oversize_record_is_malformed(alice, made):
    with pytest.raises(MalformedMessageError) as caught:
        Profile.open(bytes(itsme.PROFILE_RECORD_MAX + 1), made.reference, alice.public_key)
    assert caught.value.detail
    with pytest.raises(MalformedMessageError):
        Profile.open(made.record + bytes(itsme.PROFILE_RECORD_MAX + 1 - len(made.record)), made.reference, alice.public_key)


@pytest.mark.parametrize("change", ["truncated", "trailing", "version", "length", "empty", "one byte"])
def test_a_record_of_the_wrong_shape_is_malformed(alice, made, change):
    record = made.record
    start, ciphertext, length = field_offsets(record)[0]
    changed = {
        "truncated": record[:-1],
        "trailing": record + b"\0",
        "version": b"\x02" + record[1:],
        "length": flipped(record, ciphertext - 1),
        "empty": b"",
        "one byte": b"\x01",
    }[change]
    with pytest.raises(MalformedMessageError):
        Profile.open(changed, made.reference, alice.public_key)


@pytest.mark.parametrize("which, size", [("reference", 31), ("reference", 33), ("reference", 0), ("key", 31), ("key", 33)])
def test_wrong_sizes_are_invalid_arguments(alice, made, which, size):
    reference, key = made.reference, alice.public_key
    if which == "reference":
        reference = (reference * 2)[:size]
    else:
        key = (key * 2)[:size]
    with pytest.raises(InvalidArgumentError):
        Profile.open(made.record, reference, key)


def test_open_arguments(alice, made):
    with pytest.raises(TypeError):
        Profile.open(made.record.hex(), made.reference, alice.public_key)
    with pytest.raises(TypeError):
        Profile.open(made.record, None, alice.public_key)
    opened = Profile.open(bytearray(made.record), memoryview(made.reference), bytearray(alice.public_key))
    assert opened.name == NAME
    opened.close()


# -- applied to a contact, and contact photos ------------------------------------------------


@pytest.fixture
def bob_holds_alice(people, alice):
    """Bob's contact store, holding Alice under another name: (store, id)."""
    bob = people.identity("Bob")
    contacts = people.contacts(bob)
    return contacts, contacts.add("Ally", alice.public_key, bytes(range(32)), now=T0)


def test_apply_a_profile_to_a_contact(alice, made, bob_holds_alice):
    contacts, contact_id = bob_holds_alice
    with pytest.raises(NotFoundError):
        contacts.photo(contact_id)
    with Profile.open(made.record, made.reference, contacts.get(contact_id).public_key) as opened:
        contacts.apply_profile(contact_id, opened)
    assert contacts.get(contact_id).name == NAME
    assert contacts.photo(contact_id) == (PHOTO, FILENAME)


def test_a_profile_without_a_photo_keeps_the_photo_and_one_without_a_name_keeps_the_name(
    people, alice, bob_holds_alice
):
    contacts, contact_id = bob_holds_alice
    contacts.set_photo(contact_id, b"old photo", "old.png")
    name_only = people.keep(Profile.create(alice, "Alice A."))
    contacts.apply_profile(contact_id, Profile.open(name_only.record, name_only.reference, alice.public_key))
    assert contacts.get(contact_id).name == "Alice A."
    assert contacts.photo(contact_id) == (b"old photo", "old.png")
    photo_only = people.keep(Profile.create(alice, "", b"new photo"))
    contacts.apply_profile(contact_id, photo_only)
    assert contacts.get(contact_id).name == "Alice A."
    assert contacts.photo(contact_id) == (b"new photo", "")


def test_apply_profile_arguments(made, bob_holds_alice):
    contacts, contact_id = bob_holds_alice
    with pytest.raises(NotFoundError):
        contacts.apply_profile(contact_id + 100, made)
    with pytest.raises(TypeError):
        contacts.apply_profile(contact_id, made.record)
    made.close()
    with pytest.raises(ValueError):
        contacts.apply_profile(contact_id, made)
    assert contacts.get(contact_id).name == "Ally", "nothing applied"


def test_set_photo_and_read_it_back(bob_holds_alice):
    contacts, contact_id = bob_holds_alice
    contacts.set_photo(contact_id, PHOTO, "p.jpg")
    assert contacts.photo(contact_id) == (PHOTO, "p.jpg")
    contacts.set_photo(contact_id, b"\x89PNG")
    assert contacts.photo(contact_id) == (b"\x89PNG", "")
    large = bytes(range(256)) * (itsme.PHOTO_MAX_BYTES // 256)
    contacts.set_photo(contact_id, large, "large.raw")
    assert contacts.photo(contact_id) == (large, "large.raw")
    with pytest.raises(InvalidArgumentError):
        contacts.set_photo(contact_id, large + b"\0")
    with pytest.raises(InvalidArgumentError):
        contacts.set_photo(contact_id, b"x", "f" * 256)
    assert contacts.photo(contact_id) == (large, "large.raw"), "a refused photo changes nothing"
    # An empty photo and filename remove it.
    contacts.set_photo(contact_id, b"")
    with pytest.raises(NotFoundError):
        contacts.photo(contact_id)
    with pytest.raises(NotFoundError):
        contacts.set_photo(contact_id + 100, b"x")
    with pytest.raises(TypeError):
        contacts.set_photo(contact_id, "text")


def test_the_photo_is_sealed_at_rest_and_goes_with_the_contact(people, alice, bob_holds_alice, tmp_path):
    contacts, contact_id = bob_holds_alice
    marker = b"PHOTO-AT-REST-" * 8
    contacts.set_photo(contact_id, marker, "marker-name.jpg")
    files = b"".join(path.read_bytes() for path in tmp_path.glob("contacts-*.db*"))
    assert b"PHOTO-AT-REST-" not in files and b"marker-name" not in files
    contacts.delete(contact_id)
    again = contacts.add("Ally", alice.public_key, bytes(range(32)), now=T0)
    with pytest.raises(NotFoundError):
        contacts.photo(again)
