"""Device transfer through the Python binding (docs/PROTOCOL.md section 17):
a password export opened on another device, the contact store file copied
along, the export-password limiter, installing over another identity (with
and without consent), live transfers (a whole one, a mismatched SAS, a
tampered identity message, expiry), bad inputs, and the raw functions given
NULL pointers.

Each password export and each opening of one costs an Argon2id call (about
a second and 256 MiB), so one export made per module serves most tests, and
installs are tested on identities moved by live transfers, which cost none.
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import pathlib
import re
import shutil
import sqlite3
from ctypes import byref, c_size_t, c_uint8, c_void_p
from types import SimpleNamespace

import pytest

import itsme
from itsme import (
    AuthenticationFailedError,
    ContactStore,
    DatabaseError,
    DeterministicRandom,
    ExpiredError,
    Identity,
    Import,
    ImportReport,
    InvalidArgumentError,
    InvalidKeyError,
    InvalidPinError,
    InvalidStateError,
    LockedError,
    MalformedMessageError,
    NotFoundError,
    PasswordKind,
    SecretStore,
    Transfer,
    TransferState,
    WrongIdentityError,
    WrongPinError,
)
from itsme import _abi
from itsme._ffi import ImportReportStruct, lib

R = itsme.Result
T0 = 1_800_000_000
PIN = "123456"
OTHER_PIN = "654321"
ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
PASSWORD = re.compile(f"[{ALPHABET}]{{4}}-[{ALPHABET}]{{4}}-[{ALPHABET}]{{5}}")
FIRST_LOCK = 300
LIFETIME = 600
# A generated password of the right form that no export here is made with.
WRONG_PASSWORD = "ABCD-EFGH-JKMNP"


def rng(label):
    """A deterministic random source named by a label."""
    return DeterministicRandom(hashlib.sha256(label.encode()).digest())


def header_defines():
    """The header's integer constants, as the generated raw layer has them."""
    return {name: value for name, value in vars(_abi).items() if name.startswith("ITSME_") and type(value) is int}


class Device:
    """A device: a memory secret store, maybe an identity with a PIN, a
    directory for its contact store file; closes what it opened."""

    def __init__(self, directory, name=None, pin=PIN):
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.contacts_path = self.directory / "contacts.db"
        self.secrets = SecretStore.memory()
        self.handles = [self.secrets]
        self.identity = None
        if name is not None:
            self.identity = self.keep(Identity.create(self.secrets, name))
            if pin is not None:
                self.identity.set_pin(pin)

    def keep(self, handle):
        self.handles.append(handle)
        return handle

    def add_contacts(self, *names, degradation_code_for=()):
        """Adds contacts (other identities' keys) to this device's store,
        draws a degradation code (a device secret) for those named in
        ``degradation_code_for``, and closes the store (checkpointing it)."""
        with ContactStore.open(self.identity, self.contacts_path) as contacts:
            for name in names:
                with SecretStore.memory() as theirs, Identity.create(theirs, name) as them:
                    contact_id = contacts.add(name, them.public_key, bytes(range(32)), now=T0)
                if name in degradation_code_for:
                    contacts.degradation_code(contact_id)

    def contact_names(self, identity=None):
        with ContactStore.open(identity or self.identity, self.contacts_path) as contacts:
            return sorted(contact.name for contact in contacts.list())

    def close(self):
        for handle in reversed(self.handles):
            handle.close()


@pytest.fixture
def devices(tmp_path):
    made = []

    def make(label, name=None, **kwargs):
        device = Device(tmp_path / label, name, **kwargs)
        made.append(device)
        return device

    yield make
    for device in reversed(made):
        device.close()


def live_import(identity, pin=PIN, now=T0):
    """The identity moved by a live transfer: the receiver's Import."""
    with Transfer.receiver(now) as receiver, Transfer.sender(identity, pin, receiver.offer, now) as sender:
        receiver.receive(sender.next_outgoing(), now)
        assert receiver.sas == sender.sas
        sender.confirm(now)
        receiver.confirm(now)
        receiver.receive(sender.next_outgoing(), now)
        return receiver.take_import()


def store_rows(path):
    """The logical content of a contact store file, read with sqlite3."""
    db = sqlite3.connect(path)
    try:
        return {
            table: db.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("meta", "contacts", "device_secrets")
        }
    finally:
        db.close()


# -- the module's one password export ------------------------------------------------------


@pytest.fixture(scope="module")
def old_device(tmp_path_factory):
    """A device with identity "Zoë Old" (PIN set), two contacts, one with a
    device secret, and its export under a generated password."""
    device = Device(tmp_path_factory.mktemp("old"), "Zoë Old")
    device.add_contacts("Bob", "Carol", degradation_code_for=("Bob",))
    password = itsme.generate_export_password()
    blob = device.identity.export(PIN, password, now=T0)
    yield SimpleNamespace(device=device, identity=device.identity, password=password, blob=blob)
    device.close()


def test_constants_match_the_header():
    defines = header_defines()
    assert defines["ITSME_EXPORT_PASSWORD_GENERATED"] == PasswordKind.GENERATED == itsme.EXPORT_PASSWORD_GENERATED
    assert defines["ITSME_EXPORT_PASSWORD_CHOSEN"] == PasswordKind.CHOSEN == itsme.EXPORT_PASSWORD_CHOSEN
    assert {m.name: m.value for m in PasswordKind} == {"GENERATED": 1, "CHOSEN": 2}
    for name in ("EXPORT_PASSWORD_SIZE", "EXPORT_CHOSEN_PASSWORD_MIN", "EXPORT_MAX", "EXPORT_TEXT_SIZE",
                 "IMPORT_REPLACE", "TRANSFER_OFFER_SIZE", "TRANSFER_MESSAGE_MAX", "EXPORT_CONTACTS_MAX"):
        assert defines[f"ITSME_{name}"] == getattr(itsme, name), name
    states = {
        name[len("ITSME_TRANSFER_STATE_"):]: value
        for name, value in defines.items()
        if name.startswith("ITSME_TRANSFER_STATE_")
    }
    assert states == {m.name: m.value for m in TransferState}
    for name, value in states.items():
        assert getattr(itsme, f"TRANSFER_{name}") == value
    # The largest export, 144 bytes plus a 128-byte name, and its text,
    # unpadded base64url after "ITSMEXP1:", with a NUL.
    assert itsme.EXPORT_MAX == 144 + itsme.NAME_MAX_BYTES
    assert itsme.EXPORT_TEXT_SIZE == len("ITSMEXP1:") + -(-itsme.EXPORT_MAX * 4 // 3) + 1
    assert itsme.EXPORT_PASSWORD_SIZE == len("ABCD-EFGH-JKMNP") + 1
    assert itsme.TRANSFER_OFFER_SIZE == len("ITSMETR2:") + -(-49 * 4 // 3) + 1
    # A store message of a whole 32 KiB chunk: version, type, chunk, tag.
    assert itsme.TRANSFER_MESSAGE_MAX == 2 + 32768 + 16
    assert itsme.EXPORT_CONTACTS_MAX == 64 * 1024 * 1024


def test_import_report_struct_matches_the_header():
    fields = [name for name, _ in _abi.LAYOUTS["itsme_import_report"].offsets]
    assert fields == [name for name, _ in ImportReportStruct._fields_]
    assert ImportReportStruct.other_fingerprint.size == itsme.FINGERPRINT_SIZE
    assert ctypes.sizeof(ImportReportStruct) == _abi.LAYOUTS["itsme_import_report"].size


# -- the password export ----------------------------------------------------------------------


def test_generated_passwords():
    drawn = {itsme.generate_export_password() for _ in range(8)}
    assert len(drawn) == 8
    for password in drawn:
        assert PASSWORD.fullmatch(password), password
    with rng("password") as a, rng("password") as b, rng("another") as c:
        first = itsme.generate_export_password(a)
        assert itsme.generate_export_password(b) == first
        assert itsme.generate_export_password(c) != first
        assert itsme.generate_export_password(a) != first, "the source moves on"
        assert PASSWORD.fullmatch(first)


def test_export_blob_header_and_text(old_device):
    blob = old_device.blob
    assert isinstance(blob, bytes)
    assert len(blob) == 144 + len("Zoë Old".encode())
    assert blob.startswith(b"ITSMEXP\x01\x01")
    header = itsme.export_header(blob)
    assert header == (3, 256 * 1024, PasswordKind.GENERATED)
    assert (header.passes, header.memory_kib, header.password_kind) == header
    assert isinstance(header.password_kind, PasswordKind)
    text = itsme.export_to_text(blob)
    assert text.startswith("ITSMEXP1:")
    assert base64.urlsafe_b64decode(text[9:] + "=" * (-len(text[9:]) % 4)) == blob
    assert "=" not in text and len(text) == 9 + -(-len(blob) * 4 // 3)
    assert itsme.export_from_text(text) == blob
    assert itsme.export_to_text(bytearray(blob)) == itsme.export_to_text(memoryview(blob)) == text
    # The largest blob (a 128-byte name) and its text fit the buffers.
    largest = blob[:46] + bytes(range(itsme.EXPORT_MAX - 46))
    largest_text = itsme.export_to_text(largest)
    assert len(largest_text) + 1 == itsme.EXPORT_TEXT_SIZE
    assert itsme.export_from_text(largest_text) == largest


@pytest.mark.parametrize("around", [(" ", ""), ("", "\n"), ("\t ", " \n"), ("\n", "\r\n"), ("\r\n", "\r\n")])
def test_export_text_ignores_white_space_around_it(old_device, around):
    before, after = around
    text = itsme.export_to_text(old_device.blob)
    assert itsme.export_from_text(before + text + after) == old_device.blob


def test_export_checks_the_password_before_the_pin(devices):
    device = devices("old", "Alice")
    me = device.identity
    for password, kind in (
        ("ABCD-EFGH-JKMNO", PasswordKind.GENERATED),  # O is not in the alphabet
        ("ABCD-EFGH-JKMN", PasswordKind.GENERATED),  # 12 characters
        ("ABCD-EFGH-JKMNPQ", PasswordKind.GENERATED),  # 14
        ("", PasswordKind.GENERATED),
        ("seven!!", PasswordKind.CHOSEN),  # shorter than 8
        (WRONG_PASSWORD, 0),
        (WRONG_PASSWORD, 3),
        (WRONG_PASSWORD, 2**32 - 1),
    ):
        with pytest.raises(InvalidArgumentError) as caught:
            me.export("000000", password, kind, now=T0)
        assert caught.value.code == R.ITSME_E_INVALID_ARGUMENT
        assert me.pin_status(T0) == (0, 0), f"{password!r} of kind {kind} cost a PIN attempt"
    # A valid password reaches the PIN: wrong, malformed, counted or not.
    with pytest.raises(WrongPinError):
        me.export("000000", WRONG_PASSWORD, now=T0)
    assert me.pin_status(T0) == (1, 0)
    with pytest.raises(InvalidPinError):
        me.export("12345", "a chosen password", PasswordKind.CHOSEN, now=T0)
    assert me.pin_status(T0) == (1, 0)
    # No PIN, no export.
    no_pin = devices("no-pin", "Bob", pin=None)
    with pytest.raises(NotFoundError):
        no_pin.identity.export(PIN, WRONG_PASSWORD, now=T0)


def test_export_after_five_wrong_pins_is_locked(devices):
    me = devices("old", "Alice").identity
    for _ in range(5):
        with pytest.raises(WrongPinError):
            me.export("000000", WRONG_PASSWORD, now=T0)
    with pytest.raises(LockedError):
        me.export(PIN, WRONG_PASSWORD, now=T0)
    assert me.pin_status(T0) == (5, FIRST_LOCK)


def test_export_then_import_on_another_device(old_device, devices):
    new = devices("new")
    # The contact store moves as a file: copied after the old device closed it.
    shutil.copyfile(old_device.device.contacts_path, new.contacts_path)
    assert itsme.import_status(new.secrets, T0) == (0, 0)
    typed = old_device.password.lower().replace("-", " ")
    with Import.open(new.secrets, old_device.blob, typed, T0) as received:
        assert received.fingerprint == old_device.identity.fingerprint
        assert received.name == "Zoë Old"
        assert itsme.import_status(new.secrets, T0) == (0, 0)
        report = received.check(new.secrets, new.contacts_path)
        assert report == ImportReport(
            wrong_identity=False,
            other_fingerprint=None,
            store_exists=True,
            contacts_readable=2,
            contacts_unreadable=0,
            device_secrets=1,
        )
        assert received.check(new.secrets, new.contacts_path) == report, "check changes nothing"
        installed = new.keep(received.install(new.secrets, new.contacts_path))
    assert isinstance(installed, Identity)
    assert installed.fingerprint == old_device.identity.fingerprint
    assert installed.public_key == old_device.identity.public_key
    assert installed.name == "Zoë Old"
    assert not installed.pin_is_set(), "the PIN stays on the old device"
    with Identity.load(new.secrets) as loaded:
        assert loaded.public_key == old_device.identity.public_key
    # The contacts key came along: the copied store opens and reads.
    assert new.contact_names(installed) == ["Bob", "Carol"]
    # Every device secret was forgotten; the identity is now the store's.
    with live_import(old_device.identity) as again:
        assert again.check(new.secrets, new.contacts_path) == ImportReport(False, None, True, 2, 0, 0)
    # The old device is as it was.
    assert old_device.device.contact_names() == ["Bob", "Carol"]
    assert old_device.identity.pin_status(T0) == (0, 0)


def test_a_chosen_password_must_be_typed_exactly_and_other_kinds_are_refused(old_device, devices):
    new = devices("new")
    # The export is of a generated password: a chosen-looking one is not of its kind.
    with pytest.raises(InvalidArgumentError):
        Import.open(new.secrets, old_device.blob, "a chosen password", T0)
    with pytest.raises(InvalidArgumentError):
        Import.open(new.secrets, old_device.blob, old_device.password + "2", T0)
    assert itsme.import_status(new.secrets, T0) == (0, 0), "refused before any attempt"


def test_wrong_passwords_are_counted_and_lock(old_device, devices):
    new = devices("new")
    for failure in range(1, 6):
        with pytest.raises(AuthenticationFailedError) as caught:
            Import.open(new.secrets, old_device.blob, WRONG_PASSWORD, T0)
        assert caught.value.code == R.ITSME_E_AUTHENTICATION_FAILED
        assert caught.value.detail, "the store's last error says what failed"
        assert itsme.import_status(new.secrets, T0) == (failure, FIRST_LOCK if failure == 5 else 0)
    # Locked: even the right password is not checked, and nothing is counted.
    with pytest.raises(LockedError):
        Import.open(new.secrets, old_device.blob, old_device.password, T0 + FIRST_LOCK - 1)
    assert itsme.import_status(new.secrets, T0 + 100) == (5, FIRST_LOCK - 100)
    with pytest.raises(LockedError):
        Import.open(new.secrets, old_device.blob, WRONG_PASSWORD, T0)
    assert itsme.import_status(new.secrets, T0) == (5, FIRST_LOCK)
    # A header refused costs nothing, locked or not.
    with pytest.raises(MalformedMessageError):
        Import.open(new.secrets, old_device.blob[:40], old_device.password, T0)
    assert itsme.import_status(new.secrets, T0 + FIRST_LOCK) == (5, 0), "the lock ends"
    # The limiter is the new device's: another store has counted nothing.
    assert itsme.import_status(old_device.device.secrets, T0) == (0, 0)


def test_altered_exports(old_device, devices):
    new = devices("new")
    blob = bytearray(old_device.blob)
    # Header refusals cost nothing and need no key derivation.
    for at, value, error in (
        (0, ord("X"), MalformedMessageError),  # not an export
        (7, 3, InvalidArgumentError),  # format version 3
        (8, 2, InvalidArgumentError),  # unknown key derivation
        (12, 2, InvalidArgumentError),  # 2 passes
        (14, 0x02, InvalidArgumentError),  # 128 MiB
        (13, 0x01, InvalidArgumentError),  # 16 GiB + 256 MiB
        (17, 3, InvalidArgumentError),  # unknown password kind
    ):
        altered = bytes(blob[:at]) + bytes([value]) + bytes(blob[at + 1:])
        with pytest.raises(error):
            itsme.export_header(altered)
        with pytest.raises(error):
            itsme.export_to_text(altered)
        with pytest.raises(error):
            Import.open(new.secrets, altered, old_device.password, T0)
    # The header is 46 bytes; AES-GCM's tag is 16.
    for truncated in (b"", bytes(blob[:45]), bytes(blob[:46]), bytes(blob[:61])):
        with pytest.raises(MalformedMessageError):
            itsme.export_header(truncated)
        with pytest.raises(MalformedMessageError):
            Import.open(new.secrets, truncated, old_device.password, T0)
    assert itsme.import_status(new.secrets, T0) == (0, 0), "refused headers cost nothing"
    # Relabelled format version 2 (with the contacts), the header reads as
    # such, but it is authenticated: opening fails as a wrong password
    # would, and counts.  It has no text form.
    relabelled = bytes(blob[:7]) + b"\x02" + bytes(blob[8:])
    assert itsme.export_header(relabelled) == itsme.export_header(old_device.blob)
    with pytest.raises(InvalidArgumentError):
        itsme.export_to_text(relabelled)
    with pytest.raises(AuthenticationFailedError):
        Import.open(new.secrets, relabelled, old_device.password, T0)
    assert itsme.import_status(new.secrets, T0) == (1, 0)
    # An altered body is not seen in the header (the vectors' replay shows
    # that opening it counts as a wrong password).
    altered = bytes(blob[:-1]) + bytes([blob[-1] ^ 1])
    assert itsme.export_header(altered) == itsme.export_header(old_device.blob)
    assert itsme.export_from_text(itsme.export_to_text(altered)) == altered


def test_source_app_exports_are_refused():
    sealed_box = bytes(range(7, 7 + 120))
    for text in (
        base64.b64encode(sealed_box).decode(),  # the source's QR text: base64 of a sealed box
        base64.urlsafe_b64encode(sealed_box).decode().rstrip("="),
        base64.b64encode(sealed_box[:64]).decode(),  # the shortest recognised
        '{"version": 3, "name": "Alice", "privateKey": "AAAA"}',
        '{ "version" : 3 }',
        "ITSMEXP2:" + base64.urlsafe_b64encode(sealed_box).decode(),  # an export text version we do not read
    ):
        with pytest.raises(InvalidArgumentError) as caught:
            itsme.export_from_text(text)
        assert caught.value.detail, "the last error says why"
    too_short = base64.b64encode(sealed_box[:63]).decode()  # base64, but of too few bytes
    for text in ("", "   ", "hello", too_short, "ITSMEXP1:SVRT*TUVY", "ITSMEXP1:SVRTTUVYUAE=", "ITSMEXP1:S", "ITSMETR1:AAAA"):
        with pytest.raises(MalformedMessageError):
            itsme.export_from_text(text)


# -- installing ------------------------------------------------------------------------------


def test_install_without_a_contact_store(devices):
    old = devices("old", "Alice")
    new = devices("new")
    with live_import(old.identity) as received:
        empty = ImportReport(False, None, False, 0, 0, 0)
        assert received.check(new.secrets, None) == empty
        assert received.check(new.secrets, new.directory / "missing.db") == empty
        installed = new.keep(received.install(new.secrets, None))
        assert installed.public_key == old.identity.public_key
        # The same identity again: not a wrong identity.
        assert received.check(new.secrets, None) == empty
        new.keep(received.install(new.secrets, None))
    # A new store for it opens from scratch.
    assert new.contact_names(installed) == []


def test_install_keeps_a_pin_set_on_the_device(devices):
    old = devices("old", "Alice")
    new = devices("new", "Placeholder", pin=OTHER_PIN)
    with live_import(old.identity) as received:
        installed = new.keep(received.install(new.secrets, None, replace=True))
    assert installed.public_key == old.identity.public_key
    assert installed.pin_is_set()
    installed.verify_pin(OTHER_PIN, T0)
    with pytest.raises(WrongPinError):
        installed.verify_pin(PIN, T0)


def test_install_over_another_identity(devices):
    """The new device holds identity B and B's contact store: every contact
    is unreadable for the imported key.  Without consent nothing changes;
    with it, B and its contacts are gone and the store is A's."""
    old = devices("old", "Alice")
    new = devices("new", "Bea", pin=OTHER_PIN)
    new.add_contacts("Mallory", "Trent", degradation_code_for=("Trent",))
    before = store_rows(new.contacts_path)
    with live_import(old.identity) as received:
        report = received.check(new.secrets, new.contacts_path)
        assert report == ImportReport(True, new.identity.fingerprint, True, 0, 2, 1)
        with pytest.raises(WrongIdentityError) as caught:
            received.install(new.secrets, new.contacts_path)
        assert caught.value.code == R.ITSME_E_WRONG_IDENTITY
        assert caught.value.detail
        # Nothing was changed.
        assert store_rows(new.contacts_path) == before
        with Identity.load(new.secrets) as still:
            assert still.public_key == new.identity.public_key
        assert new.contact_names() == ["Mallory", "Trent"]
        assert received.check(new.secrets, new.contacts_path) == report
        # With consent.
        installed = new.keep(received.install(new.secrets, new.contacts_path, replace=True))
        assert installed.public_key == old.identity.public_key
        assert received.check(new.secrets, new.contacts_path) == ImportReport(False, None, True, 0, 0, 0)
    with Identity.load(new.secrets) as loaded:
        assert loaded.public_key == old.identity.public_key
    assert new.contact_names(installed) == []
    with pytest.raises(WrongIdentityError):
        ContactStore.open(new.identity, new.contacts_path)
    # B's PIN stays on the device.
    installed.verify_pin(OTHER_PIN, T0)


def test_install_with_replace_keeps_the_readable_contacts(devices, tmp_path):
    """A contact store file that mixes rows: a copy of A's store with the
    rows of B's store appended under B's owner check, so the owner check
    fails for A and each row is tried.  Replacing deletes B's rows and keeps
    A's."""
    old = devices("old", "Alice")
    old.add_contacts("Bob", "Carol", degradation_code_for=("Bob",))
    new = devices("new", "Bea", pin=OTHER_PIN)
    new.add_contacts("Mallory", "Trent", degradation_code_for=("Trent",))
    mixed = tmp_path / "mixed.db"
    shutil.copyfile(old.contacts_path, mixed)
    db = sqlite3.connect(mixed)
    try:
        db.execute("ATTACH DATABASE ? AS b", (str(new.contacts_path),))
        with db:
            db.execute(
                "INSERT INTO contacts (id, fingerprint_index, key_index, record) "
                "SELECT id + 1000, fingerprint_index, key_index, record FROM b.contacts"
            )
            db.execute("INSERT INTO device_secrets (contact_id, record) SELECT contact_id + 1000, record FROM b.device_secrets")
            db.execute(
                "UPDATE meta SET value = (SELECT value FROM b.meta WHERE name = 'owner_check') WHERE name = 'owner_check'"
            )
        db.execute("DETACH DATABASE b")
    finally:
        db.close()
    before = store_rows(mixed)
    assert len(before["contacts"]) == 4 and len(before["device_secrets"]) == 2
    with live_import(old.identity) as received:
        report = received.check(new.secrets, mixed)
        assert report == ImportReport(
            wrong_identity=True,
            other_fingerprint=new.identity.fingerprint,
            store_exists=True,
            contacts_readable=2,
            contacts_unreadable=2,
            device_secrets=2,
        )
        with pytest.raises(WrongIdentityError):
            received.install(new.secrets, mixed)
        assert store_rows(mixed) == before
        with Identity.load(new.secrets) as still:
            assert still.public_key == new.identity.public_key
        installed = new.keep(received.install(new.secrets, mixed, replace=True))
        assert received.check(new.secrets, mixed) == ImportReport(False, None, True, 2, 0, 0)
    after = store_rows(mixed)
    assert after["contacts"] == before["contacts"][:2], "the readable rows are kept as they were"
    assert after["device_secrets"] == []
    with ContactStore.open(installed, mixed) as contacts:
        assert sorted(contact.name for contact in contacts.list()) == ["Bob", "Carol"]
        assert contacts.count() == 2


def test_check_refuses_a_file_that_is_not_a_contact_store(devices):
    old = devices("old", "Alice")
    new = devices("new")
    junk = new.directory / "junk.db"
    junk.write_bytes(b"not a database " * 20)
    with live_import(old.identity) as received:
        with pytest.raises(DatabaseError):
            received.check(new.secrets, junk)
        assert "junk.db" in received.last_error(), "the import's last error says why"
        with pytest.raises(DatabaseError):
            received.install(new.secrets, junk)
        assert junk.read_bytes() == b"not a database " * 20
        with pytest.raises(NotFoundError):
            Identity.load(new.secrets)


# -- the live transfer ------------------------------------------------------------------------


def test_live_transfer(devices):
    old = devices("old", "Zoë Old")
    old.add_contacts("Bob")
    new = devices("new")
    # The contact store moves as a backup, made while the store is in use.
    with ContactStore.open(old.identity, old.contacts_path) as contacts:
        contacts.backup(new.contacts_path)
        with pytest.raises(itsme.AlreadyExistsError):
            contacts.backup(new.contacts_path)
        with SecretStore.memory() as theirs, Identity.create(theirs, "Dave") as dave:
            contacts.add("Dave", dave.public_key, bytes(32), now=T0)  # after the backup
    receiver = new.keep(Transfer.receiver(T0))
    assert receiver.state == TransferState.AWAITING_PEER and not receiver.is_sender
    offer = receiver.offer
    assert re.fullmatch(r"ITSMETR2:[A-Za-z0-9_-]{66}", offer)
    assert len(offer) + 1 == itsme.TRANSFER_OFFER_SIZE
    assert base64.urlsafe_b64decode(offer[9:] + "==")[0] == 2
    assert re.fullmatch(r"[0-9a-f]{32}", receiver.room)
    with pytest.raises(InvalidStateError):
        receiver.sas
    with pytest.raises(InvalidStateError):
        receiver.take_import()
    # A wrong PIN on the old device is a counted attempt.
    with pytest.raises(WrongPinError):
        Transfer.sender(old.identity, "000000", offer, T0)
    assert old.identity.pin_status(T0) == (1, 0)
    sender = old.keep(Transfer.sender(old.identity, PIN, offer, T0 + 5))
    assert old.identity.pin_status(T0) == (0, 0)
    assert sender.is_sender and sender.state == TransferState.COMPARE_SAS
    assert sender.room == receiver.room
    assert sender.offer == offer
    key_message = sender.next_outgoing()
    assert len(key_message) == 34 and key_message[:2] == b"\x02\x01"
    assert sender.next_outgoing() == b""
    receiver.receive(key_message, T0 + 10)
    assert receiver.state == TransferState.COMPARE_SAS
    assert re.fullmatch(r"[A-Z]+ \d{4}", receiver.sas)
    assert receiver.sas == sender.sas
    sender.confirm(T0 + 20)
    assert sender.state == TransferState.DONE
    identity_message = sender.next_outgoing()
    name = "Zoë Old".encode()
    assert identity_message[:2] == b"\x02\x02"
    # contents || u32(len(store)) sealed, with no store: no store messages follow.
    assert len(identity_message) == 2 + 32 + 32 + 2 + len(name) + 16 + 4 + 16 <= itsme.TRANSFER_MESSAGE_MAX
    assert sender.next_outgoing() == b""
    receiver.confirm(T0 + 30)
    assert receiver.state == TransferState.AWAITING_IDENTITY
    receiver.receive(bytearray(identity_message), T0 + 40)
    assert receiver.state == TransferState.DONE
    with receiver.take_import() as received:
        with pytest.raises(InvalidStateError):
            receiver.take_import()
        assert received.fingerprint == old.identity.fingerprint
        assert received.name == "Zoë Old"
        assert received.contacts_size == 0
        assert received.check(new.secrets, new.contacts_path) == ImportReport(False, None, True, 1, 0, 0)
        installed = new.keep(received.install(new.secrets, new.contacts_path))
    assert installed.public_key == old.identity.public_key
    assert new.contact_names(installed) == ["Bob"]
    # The transfer is over on both sides.
    with pytest.raises(InvalidStateError):
        receiver.receive(identity_message, T0 + 50)
    with pytest.raises(InvalidStateError):
        sender.confirm(T0 + 50)
    with pytest.raises(InvalidStateError):
        sender.receive(key_message, T0 + 50)


def test_an_identity_arriving_before_the_confirmation_waits(devices):
    old = devices("old", "Alice")
    with Transfer.receiver(T0) as receiver, Transfer.sender(old.identity, PIN, receiver.offer, T0) as sender:
        receiver.receive(sender.next_outgoing(), T0)
        sender.confirm(T0)
        receiver.receive(sender.next_outgoing(), T0)
        assert receiver.state == TransferState.COMPARE_SAS, "held unopened"
        with pytest.raises(InvalidStateError):
            receiver.take_import()
        receiver.confirm(T0)
        assert receiver.state == TransferState.DONE
        with receiver.take_import() as received:
            assert received.fingerprint == old.identity.fingerprint


def test_a_mismatched_sas_is_rejected_and_nothing_is_sent(devices):
    """Someone else in the room answers the offer first: the receiver's SAS
    is then not the old device's, the person rejects on both, and the old
    device sends nothing."""
    old = devices("old", "Alice")
    intruder = devices("intruder", "Mallory")
    with rng("receiver") as r, rng("sender") as s, rng("intruder") as m:
        receiver = old.keep(Transfer.receiver(T0, random=r))
        sender = old.keep(Transfer.sender(old.identity, PIN, receiver.offer, T0, random=s))
        theirs = intruder.keep(Transfer.sender(intruder.identity, PIN, receiver.offer, T0, random=m))
    # Both answer in the room; the intruder's key reaches the receiver first.
    assert len(sender.next_outgoing()) == 34
    receiver.receive(theirs.next_outgoing(), T0)
    assert receiver.room == sender.room == theirs.room
    assert receiver.sas == theirs.sas
    assert receiver.sas != sender.sas
    sender.reject()
    assert sender.state == TransferState.REJECTED
    assert sender.next_outgoing() == b"", "nothing is sent"
    with pytest.raises(InvalidStateError):
        sender.confirm(T0)
    assert sender.next_outgoing() == b""
    with pytest.raises(InvalidStateError):
        sender.reject()
    receiver.reject()
    assert receiver.state == TransferState.REJECTED
    theirs.confirm(T0)
    with pytest.raises(InvalidStateError):
        receiver.receive(theirs.next_outgoing(), T0)
    with pytest.raises(InvalidStateError):
        receiver.take_import()


def test_an_identity_from_another_sender_does_not_open(devices):
    old = devices("old", "Alice")
    intruder = devices("intruder", "Mallory")
    receiver = old.keep(Transfer.receiver(T0))
    sender = old.keep(Transfer.sender(old.identity, PIN, receiver.offer, T0))
    theirs = intruder.keep(Transfer.sender(intruder.identity, PIN, receiver.offer, T0))
    receiver.receive(sender.next_outgoing(), T0)
    receiver.confirm(T0)
    assert len(theirs.next_outgoing()) == 34, "its key, which came too late"
    theirs.confirm(T0)
    with pytest.raises(AuthenticationFailedError):
        receiver.receive(theirs.next_outgoing(), T0)
    assert receiver.state == TransferState.FAILED


@pytest.mark.parametrize("where", [0, 2, 40, -1])
def test_a_tampered_identity_message_fails(devices, where):
    old = devices("old", "Alice")
    receiver = old.keep(Transfer.receiver(T0))
    sender = old.keep(Transfer.sender(old.identity, PIN, receiver.offer, T0))
    receiver.receive(sender.next_outgoing(), T0)
    sender.confirm(T0)
    receiver.confirm(T0)
    message = bytearray(sender.next_outgoing())
    message[where] ^= 0x01
    # The version byte is checked first; any other change fails to open.
    with pytest.raises(MalformedMessageError if where == 0 else AuthenticationFailedError):
        receiver.receive(message, T0)
    assert receiver.state == TransferState.FAILED
    assert receiver.last_error()
    with pytest.raises(InvalidStateError):
        receiver.take_import()
    with pytest.raises(InvalidStateError):
        receiver.sas
    message[where] ^= 0x01
    with pytest.raises(InvalidStateError):
        receiver.receive(message, T0)


def test_bad_transfer_messages(devices):
    old = devices("old", "Alice")
    with Transfer.sender(old.identity, PIN, Transfer.receiver(T0).offer, T0) as sender:
        key_message = sender.next_outgoing()
    for message, error in (
        (b"", MalformedMessageError),
        (key_message[:-1], MalformedMessageError),
        (key_message + b"\0", MalformedMessageError),
        (b"\x01" + key_message[1:], MalformedMessageError),  # version 1 is no longer spoken
        (b"\x03" + key_message[1:], MalformedMessageError),
        (b"\x02\x03" + key_message[2:], MalformedMessageError),  # a store message first
        (b"\x02\x04" + key_message[2:], MalformedMessageError),
        (b"\x02\x01" + bytes(32), InvalidKeyError),
    ):
        with Transfer.receiver(T0) as receiver:
            with pytest.raises(error):
                receiver.receive(message, T0)
            assert receiver.state == TransferState.FAILED
    with Transfer.receiver(T0) as receiver:
        reflected = b"\x02\x01" + base64.urlsafe_b64decode(receiver.offer[9:] + "==")[17:]
        with pytest.raises(InvalidKeyError):
            receiver.receive(reflected, T0)
    with Transfer.receiver(T0) as receiver:
        receiver.receive(key_message, T0)
        with pytest.raises(MalformedMessageError):
            receiver.receive(key_message, T0)
        assert receiver.state == TransferState.FAILED


def test_a_transfer_lasts_ten_minutes(devices):
    old = devices("old", "Alice")
    with Transfer.receiver(T0) as receiver, Transfer.sender(old.identity, PIN, receiver.offer, T0) as sender:
        receiver.receive(sender.next_outgoing(), T0 + LIFETIME)
        with pytest.raises(ExpiredError):
            sender.confirm(T0 + LIFETIME + 1)
        assert sender.state == TransferState.FAILED
        assert sender.next_outgoing() == b""
        with pytest.raises(ExpiredError):
            receiver.confirm(T0 + LIFETIME + 1)
        assert receiver.state == TransferState.FAILED


def test_bad_offers_are_refused_before_the_pin(devices):
    old = devices("old", "Alice")
    with Transfer.receiver(T0) as receiver:
        offer = receiver.offer
    raw = base64.urlsafe_b64decode(offer[9:] + "==")

    def text(data, prefix="ITSMETR2:"):
        return prefix + base64.urlsafe_b64encode(data).decode().rstrip("=")

    for bad in (
        "",
        "hello",
        offer[9:],
        "ITSMETR1:" + offer[9:],  # version 1 is no longer spoken
        text(b"\x01" + raw[1:], "ITSMETR1:"),
        "ITSMETR3:" + offer[9:],
        offer[:-1],
        offer + "A",
        offer[:20] + "*" + offer[21:],
        offer + "=",
        text(b"\x01" + raw[1:]),
        text(b"\x03" + raw[1:]),
        text(raw[:-1]),
        text(raw + b"\0"),
        "ITSMEXP1:SVRTTUVYUAEBAAAAAwAEAAAB",
    ):
        with pytest.raises(MalformedMessageError):
            Transfer.sender(old.identity, "000000", bad, T0)
    assert old.identity.pin_status(T0) == (0, 0), "no PIN attempt was spent"
    with pytest.raises(InvalidKeyError):
        Transfer.sender(old.identity, PIN, text(raw[:17] + bytes(32)), T0)
    with pytest.raises(InvalidPinError):
        Transfer.sender(old.identity, "12", offer, T0)
    no_pin = devices("no-pin", "Bob", pin=None)
    with pytest.raises(NotFoundError):
        Transfer.sender(no_pin.identity, PIN, offer, T0)


# -- the contact store inside: exports of format version 2, store messages ---------------------

CHUNK = 32768
# A photo large enough that the store takes several 32 KiB chunks.
PHOTO = hashlib.shake_256(b"a photo").digest(100_000)


def add_contacts_with_a_photo(device, *names):
    """Adds contacts to the device's store, gives the first the photo PHOTO,
    draws a degradation code (a device secret) for the second, and closes
    the store."""
    device.add_contacts(*names, degradation_code_for=names[1:2])
    with ContactStore.open(device.identity, device.contacts_path) as contacts:
        first = next(contact for contact in contacts.list() if contact.name == names[0])
        contacts.set_photo(first.id, PHOTO, "first.jpg")


def photo_of(device, identity, name):
    with ContactStore.open(identity, device.contacts_path) as contacts:
        contact = next(contact for contact in contacts.list() if contact.name == name)
        return contacts.photo(contact.id)


def pump(sender):
    """Every message the sender has queued, in order."""
    messages = []
    while message := sender.next_outgoing():
        assert len(message) <= itsme.TRANSFER_MESSAGE_MAX
        messages.append(message)
    return messages


def test_export_with_contacts_then_import_on_another_device(devices):
    old = devices("old", "Zoë Old")
    add_contacts_with_a_photo(old, "Bob", "Carol", "Dave")
    new = devices("new")
    password = itsme.generate_export_password()
    # The store is in use (open) while the export copies it.
    with ContactStore.open(old.identity, old.contacts_path) as contacts:
        blob = old.identity.export_with_contacts(PIN, password, contacts, now=T0)
        assert contacts.count() == 3
    assert old.identity.pin_status(T0) == (0, 0), "one PIN attempt, a right one"
    name = "Zoë Old".encode()
    assert isinstance(blob, bytes)
    assert blob.startswith(b"ITSMEXP\x02\x01"), "format version 2"
    assert itsme.export_header(blob) == (3, 256 * 1024, PasswordKind.GENERATED)
    store_size = len(blob) - 144 - len(name)
    assert store_size > len(PHOTO)
    with pytest.raises(InvalidArgumentError):
        itsme.export_to_text(blob)  # a file only: no text form
    typed = password.lower().replace("-", " ")
    with Import.open(new.secrets, blob, typed, T0) as received:
        assert received.fingerprint == old.identity.fingerprint
        assert received.name == "Zoë Old"
        assert received.contacts_size == store_size
        # Not written yet: the file is not there.
        assert received.check(new.secrets, new.contacts_path) == ImportReport(False, None, False, 0, 0, 0)
        received.write_contacts(new.contacts_path)
        written = new.contacts_path.read_bytes()
        assert len(written) == store_size and written.startswith(b"SQLite format 3\0")
        assert new.contacts_path.stat().st_mode & 0o777 == 0o600
        with pytest.raises(itsme.AlreadyExistsError):
            received.write_contacts(new.contacts_path)
        assert new.contacts_path.read_bytes() == written, "nothing is overwritten"
        report = received.check(new.secrets, new.contacts_path)
        assert report == ImportReport(False, None, True, 3, 0, 1)
        installed = new.keep(received.install(new.secrets, new.contacts_path))
    assert installed.public_key == old.identity.public_key
    # The contacts are all there, as they were.
    assert new.contact_names(installed) == old.contact_names() == ["Bob", "Carol", "Dave"]
    assert store_rows(new.contacts_path)["contacts"] == store_rows(old.contacts_path)["contacts"]
    assert photo_of(new, installed, "Bob") == (PHOTO, "first.jpg")
    # Every device secret was forgotten.
    assert store_rows(new.contacts_path)["device_secrets"] == []
    assert len(store_rows(old.contacts_path)["device_secrets"]) == 1


def test_export_with_contacts_checks_before_the_pin(devices):
    old = devices("old", "Alice")
    old.add_contacts("Bob")
    other = devices("other", "Mallory")
    other.add_contacts("Trent")
    me = old.identity
    with ContactStore.open(me, old.contacts_path) as mine, ContactStore.open(other.identity, other.contacts_path) as theirs:
        # A store of another identity, a bad password: refused before the PIN.
        with pytest.raises(WrongIdentityError) as caught:
            me.export_with_contacts(PIN, WRONG_PASSWORD, theirs, now=T0)
        assert caught.value.code == R.ITSME_E_WRONG_IDENTITY and caught.value.detail
        for password, kind in (("ABCD-EFGH-JKMNO", PasswordKind.GENERATED), ("seven!!", PasswordKind.CHOSEN),
                               (WRONG_PASSWORD, 3)):
            with pytest.raises(InvalidArgumentError):
                me.export_with_contacts("000000", password, mine, kind, now=T0)
        assert me.pin_status(T0) == (0, 0), "no PIN attempt was spent"
        # The size is asked for before the PIN: only the real call counts.
        with pytest.raises(WrongPinError):
            me.export_with_contacts("000000", WRONG_PASSWORD, mine, now=T0)
        assert me.pin_status(T0) == (1, 0)
        with pytest.raises(InvalidPinError):
            me.export_with_contacts("12", WRONG_PASSWORD, mine, now=T0)
        # The identity's own store through a second handle is fine; wrong types are not.
        with pytest.raises(TypeError):
            me.export_with_contacts(PIN, WRONG_PASSWORD, None, now=T0)
        with pytest.raises(TypeError):
            me.export_with_contacts(PIN, WRONG_PASSWORD, old.secrets, now=T0)
        with pytest.raises(TypeError):
            me.export_with_contacts(PIN, WRONG_PASSWORD, str(old.contacts_path), now=T0)
        with pytest.raises(TypeError):
            me.export_with_contacts(None, WRONG_PASSWORD, mine, now=T0)
        with pytest.raises(TypeError):
            me.export_with_contacts(PIN, WRONG_PASSWORD, mine, "generated", now=T0)
        assert me.pin_status(T0) == (1, 0)
    # A closed store.
    with pytest.raises(ValueError):
        me.export_with_contacts(PIN, WRONG_PASSWORD, mine, now=T0)
    # No PIN, no export.
    no_pin = devices("no-pin", "Bob", pin=None)
    with ContactStore.open(no_pin.identity, no_pin.contacts_path) as contacts:
        with pytest.raises(NotFoundError):
            no_pin.identity.export_with_contacts(PIN, WRONG_PASSWORD, contacts, now=T0)


def test_live_transfer_with_contacts(devices):
    old = devices("old", "Zoë Old")
    add_contacts_with_a_photo(old, "Bob", "Carol")
    new = devices("new")
    receiver = new.keep(Transfer.receiver(T0))
    sender = old.keep(Transfer.sender(old.identity, PIN, receiver.offer, T0))
    receiver.receive(sender.next_outgoing(), T0)
    assert receiver.sas == sender.sas
    with ContactStore.open(old.identity, old.contacts_path) as contacts:
        sender.include_contacts(contacts)
        # The copy is made now: a contact added after it does not travel.
        with SecretStore.memory() as theirs, Identity.create(theirs, "Late") as late:
            contacts.add("Late", late.public_key, bytes(32), now=T0)
        assert sender.state == TransferState.COMPARE_SAS
        sender.confirm(T0)
    assert sender.state == TransferState.DONE
    messages = pump(sender)
    identity_message, store_messages = messages[0], messages[1:]
    name = "Zoë Old".encode()
    assert identity_message[:2] == b"\x02\x02"
    assert len(identity_message) == 2 + 32 + 32 + 2 + len(name) + 16 + 4 + 16
    assert len(store_messages) >= 4, "a store over 96 KiB takes at least four chunks"
    assert all(message[:2] == b"\x02\x03" for message in store_messages)
    assert all(len(message) == itsme.TRANSFER_MESSAGE_MAX for message in store_messages[:-1])
    assert 2 + 1 + 16 <= len(store_messages[-1]) <= itsme.TRANSFER_MESSAGE_MAX
    store_size = sum(len(message) - 18 for message in store_messages)
    assert len(store_messages) == -(-store_size // CHUNK)
    receiver.confirm(T0)
    receiver.receive(identity_message, T0)
    for message in store_messages:
        assert receiver.state == TransferState.AWAITING_IDENTITY, "the store has not all arrived"
        with pytest.raises(InvalidStateError):
            receiver.take_import()
        receiver.receive(message, T0)
    assert receiver.state == TransferState.DONE
    with receiver.take_import() as received:
        assert received.fingerprint == old.identity.fingerprint
        assert received.contacts_size == store_size
        received.write_contacts(new.contacts_path)
        assert new.contacts_path.stat().st_size == store_size
        assert received.check(new.secrets, new.contacts_path) == ImportReport(False, None, True, 2, 0, 1)
        installed = new.keep(received.install(new.secrets, new.contacts_path))
    assert installed.public_key == old.identity.public_key
    assert new.contact_names(installed) == ["Bob", "Carol"]
    assert photo_of(new, installed, "Bob") == (PHOTO, "first.jpg")
    assert old.contact_names() == ["Bob", "Carol", "Late"]
    with pytest.raises(InvalidStateError):
        receiver.receive(store_messages[-1], T0)


def test_store_messages_arriving_before_the_confirmation_wait(devices):
    old = devices("old", "Alice")
    add_contacts_with_a_photo(old, "Bob", "Carol")
    with Transfer.receiver(T0) as receiver, Transfer.sender(old.identity, PIN, receiver.offer, T0) as sender:
        receiver.receive(sender.next_outgoing(), T0)
        with ContactStore.open(old.identity, old.contacts_path) as contacts:
            sender.include_contacts(contacts)
        sender.confirm(T0)
        messages = pump(sender)
        for message in messages:
            receiver.receive(message, T0)
        assert receiver.state == TransferState.COMPARE_SAS, "held unopened"
        receiver.confirm(T0)
        assert receiver.state == TransferState.DONE
        with receiver.take_import() as received:
            assert received.contacts_size == sum(len(message) - 18 for message in messages[1:])


@pytest.mark.parametrize("change", ["altered", "swapped", "repeated", "extra"])
def test_altered_store_messages_fail(devices, change):
    old = devices("old", "Alice")
    add_contacts_with_a_photo(old, "Bob", "Carol")
    receiver = old.keep(Transfer.receiver(T0))
    sender = old.keep(Transfer.sender(old.identity, PIN, receiver.offer, T0))
    receiver.receive(sender.next_outgoing(), T0)
    with ContactStore.open(old.identity, old.contacts_path) as contacts:
        sender.include_contacts(contacts)
    sender.confirm(T0)
    receiver.confirm(T0)
    identity_message, *chunks = pump(sender)
    receiver.receive(identity_message, T0)
    if change == "altered":
        altered = bytearray(chunks[0])
        altered[100] ^= 0x01
        chunks[0], error = bytes(altered), AuthenticationFailedError
    elif change == "swapped":  # two whole chunks of the same length, out of order
        chunks[0], chunks[1], error = chunks[1], chunks[0], AuthenticationFailedError
    elif change == "repeated":
        chunks[1], error = chunks[0], AuthenticationFailedError
    else:  # one beyond the count the identity message announced
        chunks.append(chunks[-1])
        error = None
    for index, chunk in enumerate(chunks):
        if error is None and index == len(chunks) - 1:
            with pytest.raises(InvalidStateError):  # done: the transfer is over
                receiver.receive(chunk, T0)
            break
        try:
            receiver.receive(chunk, T0)
        except error:
            break
    else:
        pytest.fail("every store message was accepted")
    if error is not None:
        assert receiver.state == TransferState.FAILED
        with pytest.raises(InvalidStateError):
            receiver.take_import()
    else:
        assert receiver.state == TransferState.DONE


def test_include_contacts_errors(devices):
    old = devices("old", "Alice")
    old.add_contacts("Bob")
    other = devices("other", "Mallory")
    other.add_contacts("Trent")
    with ContactStore.open(old.identity, old.contacts_path) as mine, \
            ContactStore.open(other.identity, other.contacts_path) as theirs:
        receiver = old.keep(Transfer.receiver(T0))
        # On the receiver: it sends nothing.
        with pytest.raises(InvalidStateError) as caught:
            receiver.include_contacts(mine)
        assert caught.value.code == R.ITSME_E_INVALID_STATE
        sender = old.keep(Transfer.sender(old.identity, PIN, receiver.offer, T0))
        receiver.receive(sender.next_outgoing(), T0)
        with pytest.raises(InvalidStateError):
            receiver.include_contacts(mine)
        # A store of another identity than the sender's.
        with pytest.raises(WrongIdentityError) as caught:
            sender.include_contacts(theirs)
        assert caught.value.code == R.ITSME_E_WRONG_IDENTITY and caught.value.detail
        assert sender.state == TransferState.COMPARE_SAS, "the transfer goes on"
        with pytest.raises(TypeError):
            sender.include_contacts(None)
        with pytest.raises(TypeError):
            sender.include_contacts(old.secrets)
        with pytest.raises(TypeError):
            sender.include_contacts(str(old.contacts_path))
        # Nothing was included: the identity alone goes, and the import carries no store.
        sender.confirm(T0)
        messages = pump(sender)
        assert len(messages) == 1
        # Once confirmed, it is too late.
        with pytest.raises(InvalidStateError):
            sender.include_contacts(mine)
        receiver.confirm(T0)
        receiver.receive(messages[0], T0)
        with receiver.take_import() as received:
            assert received.contacts_size == 0
        # Rejected: too late as well.
        other_receiver = old.keep(Transfer.receiver(T0))
        rejected = old.keep(Transfer.sender(old.identity, PIN, other_receiver.offer, T0))
        rejected.reject()
        with pytest.raises(InvalidStateError):
            rejected.include_contacts(mine)
    # A closed store.
    third = old.keep(Transfer.sender(old.identity, PIN, old.keep(Transfer.receiver(T0)).offer, T0))
    with pytest.raises(ValueError):
        third.include_contacts(mine)


def test_write_contacts_errors(devices):
    old = devices("old", "Alice")
    old.add_contacts("Bob")
    new = devices("new")
    target = new.directory / "written.db"
    # An import that carries no store.
    with live_import(old.identity) as received:
        assert received.contacts_size == 0
        with pytest.raises(NotFoundError) as caught:
            received.write_contacts(target)
        assert caught.value.code == R.ITSME_E_NOT_FOUND
        assert not target.exists()
    # One that does.
    with Transfer.receiver(T0) as receiver, Transfer.sender(old.identity, PIN, receiver.offer, T0) as sender:
        receiver.receive(sender.next_outgoing(), T0)
        with ContactStore.open(old.identity, old.contacts_path) as contacts:
            sender.include_contacts(contacts)
        sender.confirm(T0)
        receiver.confirm(T0)
        for message in pump(sender):
            receiver.receive(message, T0)
        received = new.keep(receiver.take_import())
    assert received.contacts_size > 0
    existing = new.directory / "existing.db"
    existing.write_bytes(b"keep me")
    with pytest.raises(itsme.AlreadyExistsError) as caught:
        received.write_contacts(existing)
    assert caught.value.code == R.ITSME_E_ALREADY_EXISTS
    assert existing.read_bytes() == b"keep me"
    with pytest.raises(itsme.AlreadyExistsError):
        received.write_contacts(new.directory)  # a directory is something too
    with pytest.raises(InvalidArgumentError):
        received.write_contacts("")
    with pytest.raises(InvalidArgumentError):
        received.write_contacts(str(target) + "\0")
    with pytest.raises(TypeError):
        received.write_contacts(None)
    with pytest.raises(TypeError):
        received.write_contacts(str(target).encode())
    with pytest.raises(DatabaseError):
        received.write_contacts(new.directory / "missing" / "written.db")
    assert not (new.directory / "missing").exists()
    # Written once, then again elsewhere: the import keeps the store.
    received.write_contacts(target)
    received.write_contacts(str(new.directory / "again.db"))
    assert target.read_bytes() == (new.directory / "again.db").read_bytes()
    assert len(target.read_bytes()) == received.contacts_size
    received.close()
    with pytest.raises(ValueError):
        received.contacts_size
    with pytest.raises(ValueError):
        received.write_contacts(new.directory / "closed.db")


def test_raw_export_with_contacts_gives_its_size_before_the_pin(devices):
    old = devices("old", "Alice")
    add_contacts_with_a_photo(old, "Bob", "Carol")
    password = itsme.generate_export_password().encode()
    with ContactStore.open(old.identity, old.contacts_path) as contacts, contacts._use() as store, \
            old.identity._use() as identity:
        buf, _, n = _bytes_out(itsme.EXPORT_MAX)
        assert lib.itsme_identity_export_with_contacts(
            identity, b"000000", T0, password, 1, store, None, buf, itsme.EXPORT_MAX, byref(n)
        ) == R.ITSME_E_BUFFER_TOO_SMALL
        needed = n.value
        assert needed > itsme.EXPORT_MAX + len(PHOTO)
        assert bytes(buf) == b"\xaa" * itsme.EXPORT_MAX, "nothing written"
        assert old.identity.pin_status(T0) == (0, 0), "the size query costs no PIN attempt"
        # The size told fits; a wrong PIN is then checked, and counted.
        buf, _, n = _bytes_out(needed)
        assert lib.itsme_identity_export_with_contacts(
            identity, b"000000", T0, password, 1, store, None, buf, needed, byref(n)
        ) == R.ITSME_E_WRONG_PIN
        assert old.identity.pin_status(T0) == (1, 0)
        assert lib.itsme_identity_export_with_contacts(
            identity, PIN.encode(), T0, password, 1, None, None, buf, needed, byref(n)
        ) == R.ITSME_E_INVALID_ARGUMENT
        n = c_size_t(0)
        assert lib.itsme_identity_export_with_contacts(
            identity, PIN.encode(), T0, password, 1, store, None, buf, needed, byref(n)
        ) == R.ITSME_OK
        assert n.value == needed
        assert bytes(buf[:9]) == b"ITSMEXP\x02\x01"
        assert lib.itsme_transfer_include_contacts(None, store) == R.ITSME_E_INVALID_ARGUMENT


# -- the Python API ---------------------------------------------------------------------------


def test_wrong_types_and_none(old_device, devices):
    new = devices("new", "Bea")
    blob = old_device.blob
    with pytest.raises(TypeError):
        Import.open(None, blob, old_device.password, T0)
    with pytest.raises(TypeError):
        Import.open(new.identity, blob, old_device.password, T0)
    with pytest.raises(TypeError):
        Import.open(new.secrets, itsme.export_to_text(blob), old_device.password, T0)
    with pytest.raises(TypeError):
        Import.open(new.secrets, None, old_device.password, T0)
    with pytest.raises(TypeError):
        Import.open(new.secrets, blob, None, T0)
    with pytest.raises(TypeError):
        Import.open(new.secrets, blob, old_device.password.encode(), T0)
    with pytest.raises(InvalidArgumentError):
        Import.open(new.secrets, blob, "ABCD-EFGH\0-JKMNP", T0)
    with pytest.raises(InvalidArgumentError):
        Import.open(new.secrets, blob, old_device.password, 2**63)
    with pytest.raises(TypeError):
        itsme.import_status(None, T0)
    with pytest.raises(TypeError):
        itsme.export_header(None)
    with pytest.raises(TypeError):
        itsme.export_header(itsme.export_to_text(blob))
    with pytest.raises(TypeError):
        itsme.export_to_text(None)
    with pytest.raises(TypeError):
        itsme.export_from_text(None)
    with pytest.raises(TypeError):
        itsme.export_from_text(blob)
    with pytest.raises(TypeError):
        itsme.generate_export_password(b"\0" * 32)
    me = new.identity
    with pytest.raises(TypeError):
        me.export(None, WRONG_PASSWORD, now=T0)
    with pytest.raises(TypeError):
        me.export(PIN, None, now=T0)
    with pytest.raises(TypeError):
        me.export(PIN, WRONG_PASSWORD, "generated", now=T0)
    with pytest.raises(InvalidArgumentError):
        me.export(PIN, WRONG_PASSWORD, -1, now=T0)
    with pytest.raises(InvalidArgumentError):
        me.export(PIN, WRONG_PASSWORD, 2**32 + 1, now=T0)
    with pytest.raises(TypeError):
        me.export(PIN, WRONG_PASSWORD, random=b"\0" * 32, now=T0)
    assert me.pin_status(T0) == (0, 0)
    offer = new.keep(Transfer.receiver(T0)).offer
    with pytest.raises(TypeError):
        Transfer.sender(None, PIN, offer, T0)
    with pytest.raises(TypeError):
        Transfer.sender(new.secrets, PIN, offer, T0)
    with pytest.raises(TypeError):
        Transfer.sender(me, None, offer, T0)
    with pytest.raises(TypeError):
        Transfer.sender(me, PIN, None, T0)
    with pytest.raises(TypeError):
        Transfer.sender(me, PIN, offer.encode(), T0)
    with pytest.raises(TypeError):
        Transfer.receiver(T0, random="seed")
    with pytest.raises(InvalidArgumentError):
        Transfer.receiver(-(2**63) - 1)
    with pytest.raises(InvalidArgumentError):
        Transfer.receiver(-1)
    assert me.pin_status(T0) == (0, 0)
    sender = new.keep(Transfer.sender(me, PIN, offer, T0))
    receiver = new.keep(Transfer.receiver(T0))
    with pytest.raises(TypeError):
        receiver.receive(None, T0)
    with pytest.raises(TypeError):
        receiver.receive(sender.next_outgoing().hex(), T0)
    assert receiver.state == TransferState.AWAITING_PEER
    with live_import(old_device.identity) as received:
        with pytest.raises(TypeError):
            received.check(None, None)
        with pytest.raises(TypeError):
            received.check(new.secrets, b"contacts.db")
        with pytest.raises(TypeError):
            received.install(new.secrets, 42)
        with pytest.raises(InvalidArgumentError):
            received.check(new.secrets, "contacts\0.db")
        with pytest.raises(WrongIdentityError):
            received.install(new.secrets, None)


def test_handles_close(old_device):
    with Transfer.receiver(T0) as receiver:
        assert repr(receiver) == "<Transfer receiver AWAITING_PEER>"
    assert receiver.closed and repr(receiver) == "<Transfer closed>"
    with pytest.raises(ValueError):
        receiver.offer
    receiver.close()
    sender = Transfer.sender(old_device.identity, PIN, Transfer.receiver(T0).offer, T0)
    assert repr(sender) == "<Transfer sender COMPARE_SAS>"
    sender.close()
    with pytest.raises(ValueError):
        sender.confirm(T0)
    received = live_import(old_device.identity)
    assert repr(received) == f"<Import {old_device.identity.fingerprint}>"
    with received:
        assert not received.closed
    assert received.closed and repr(received) == "<Import closed>"
    with pytest.raises(ValueError):
        received.fingerprint
    with SecretStore.memory() as secrets:
        with pytest.raises(ValueError):
            received.install(secrets, None)
        with pytest.raises(NotFoundError):
            Identity.load(secrets)


# -- the raw functions ------------------------------------------------------------------------


def _byte_array(data):
    return (c_uint8 * max(len(data), 1)).from_buffer_copy(data or b"\0")


@pytest.fixture
def raw(old_device, devices):
    """Handles for the raw calls: a store, an identity with a PIN, an open
    import, a receiver, a sender and the export blob."""
    device = devices("raw", "Raw")
    receiver = device.keep(Transfer.receiver(T0))
    sender = device.keep(Transfer.sender(device.identity, PIN, receiver.offer, T0))
    received = device.keep(live_import(old_device.identity))
    with device.secrets._use() as secrets, device.identity._use() as identity, received._use() as imported, \
            receiver._use() as receiving, sender._use() as sending:
        yield SimpleNamespace(
            device=device,
            secrets=secrets,
            identity=identity,
            imported=imported,
            receiver=receiving,
            sender=sending,
            offer=receiver.offer.encode(),
            blob=_byte_array(old_device.blob),
            blob_len=len(old_device.blob),
            password=old_device.password.encode(),
            path=str(device.directory / "raw.db").encode(),
        )


def _text_out(size=512):
    return ctypes.create_string_buffer(b"\xaa" * size, size), size, c_size_t(0x5EED)


def _bytes_out(size=512):
    return (c_uint8 * size).from_buffer_copy(b"\xaa" * size), size, c_size_t(0x5EED)


def test_optional_pointers_may_be_null(raw):
    buf, cap, n = _text_out()
    assert lib.itsme_export_generate_password(None, buf, cap, byref(n)) == R.ITSME_OK
    assert PASSWORD.fullmatch(buf.value.decode()) and n.value == itsme.EXPORT_PASSWORD_SIZE
    report = ImportReportStruct()
    assert lib.itsme_import_check(raw.imported, raw.secrets, None, byref(report)) == R.ITSME_OK
    assert (report.wrong_identity, report.other_fingerprint, report.store_exists) == (
        1, raw.device.identity.fingerprint.encode(), 0
    )
    out = c_void_p()
    assert lib.itsme_transfer_new_receiver(None, T0, byref(out)) == R.ITSME_OK
    lib.itsme_transfer_free(out.value)
    out = c_void_p()
    assert lib.itsme_transfer_new_sender(raw.identity, PIN.encode(), raw.offer, None, T0, byref(out)) == R.ITSME_OK
    lib.itsme_transfer_free(out.value)
    assert lib.itsme_import_install(raw.imported, raw.secrets, None, 1, None) == R.ITSME_OK
    with Identity.load(raw.device.secrets) as installed:
        buf, cap, n = _text_out()
        assert lib.itsme_import_fingerprint(raw.imported, buf, cap, byref(n)) == R.ITSME_OK
        assert installed.fingerprint == buf.value.decode()


def test_raw_calls_change_nothing_on_failure(raw):
    out = c_void_p(0xDEADBEEF)
    assert lib.itsme_import_install(raw.imported, raw.secrets, raw.path, 2, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert lib.itsme_import_install(raw.imported, raw.secrets, raw.path, 0, byref(out)) == R.ITSME_E_WRONG_IDENTITY
    assert out.value == 0xDEADBEEF
    assert not pathlib.Path(raw.path.decode()).exists()
    with Identity.load(raw.device.secrets) as still:
        assert still.fingerprint == raw.device.identity.fingerprint
    # Too small buffers: the size needed, and no message is consumed.
    buf, _, n = _bytes_out(8)
    assert lib.itsme_transfer_next_outgoing(raw.sender, buf, 8, byref(n)) == R.ITSME_E_BUFFER_TOO_SMALL
    assert n.value == 34
    buf, _, n = _bytes_out(64)
    assert lib.itsme_transfer_next_outgoing(raw.sender, buf, 64, byref(n)) == R.ITSME_OK
    assert n.value == 34 and bytes(buf[:2]) == b"\x02\x01"
    buf, _, n = _text_out(10)
    assert lib.itsme_export_generate_password(None, buf, 10, byref(n)) == R.ITSME_E_BUFFER_TOO_SMALL
    assert n.value == itsme.EXPORT_PASSWORD_SIZE
    buf, _, n = _bytes_out(100)
    assert lib.itsme_identity_export(raw.identity, b"000000", T0, raw.password, 1, None, buf, 100, byref(n)) == (
        R.ITSME_E_BUFFER_TOO_SMALL
    )
    assert raw.device.identity.pin_status(T0) == (0, 0), "a too small buffer costs no PIN attempt"
    buf, _, n = _text_out(itsme.TRANSFER_OFFER_SIZE - 1)
    assert lib.itsme_transfer_offer(raw.receiver, buf, itsme.TRANSFER_OFFER_SIZE - 1, byref(n)) == (
        R.ITSME_E_BUFFER_TOO_SMALL
    )
    assert n.value == itsme.TRANSFER_OFFER_SIZE
    # Role misuse.
    assert lib.itsme_transfer_receive(raw.sender, _byte_array(b"\x02\x01"), 2, T0) == R.ITSME_E_INVALID_STATE
    out = c_void_p(0xDEADBEEF)
    assert lib.itsme_transfer_take_import(raw.sender, byref(out)) == R.ITSME_E_INVALID_STATE
    assert out.value == 0xDEADBEEF


def test_backup_checks_its_arguments(devices):
    old = devices("old", "Alice")
    target = old.directory / "backup.db"
    with ContactStore.open(old.identity, old.contacts_path) as contacts, contacts._use() as store:
        assert lib.itsme_store_backup(None, str(target).encode()) == R.ITSME_E_INVALID_ARGUMENT
        assert lib.itsme_store_backup(store, None) == R.ITSME_E_INVALID_ARGUMENT
        assert not target.exists()
        with pytest.raises(TypeError):
            contacts.backup(None)
        with pytest.raises(DatabaseError):
            contacts.backup(old.directory / "missing" / "backup.db")
        contacts.backup(target)
    with pytest.raises(itsme.AlreadyExistsError):
        with ContactStore.open(old.identity, old.contacts_path) as contacts:
            contacts.backup(old.contacts_path)
    assert old.contact_names() == []


def _transfer_room(receiver, sender, decide=(True, True), after=None):
    """Steps the room drivers of a transfer (the new device joins first)
    through test_mailbox's room in memory; returns the sessions and each
    side's steps."""
    from itsme._mailbox import RoomSession
    from test_mailbox import _room_run

    sessions = [RoomSession(receiver), RoomSession(sender)]
    steps = [[], []]
    assert _room_run(list(zip(sessions, (receiver, sender))), decide=decide, after=after, steps=steps) == [None, None]
    return sessions, steps


def test_a_live_transfer_through_the_room_driver(devices):
    """The library's room driver carries a live transfer: the old device
    sends its key once the new one is in, checks that the new one is still
    there once its person confirmed, sends the identity, and both leave."""
    from itsme._mailbox import RoomFailure, RoomStep

    old = devices("old", "Alice")
    with Transfer.receiver(T0) as receiver, Transfer.sender(old.identity, PIN, receiver.offer, T0) as sender:
        sessions, steps = _transfer_room(receiver, sender)
        assert sessions[0].path() == sessions[1].path() == f"/v1/rooms/{receiver.room}"
        assert [s.failure() for s in sessions] == [RoomFailure.NONE, RoomFailure.NONE]
        assert RoomStep.CHECK_PEER in steps[1] and RoomStep.CHECK_PEER not in steps[0]
        assert receiver.state == sender.state == TransferState.DONE
        with receiver.take_import() as received:
            assert received.fingerprint == old.identity.fingerprint


def test_a_new_device_that_rejected_and_left_is_sent_nothing(devices):
    from itsme._mailbox import RoomFailure

    old = devices("old", "Alice")
    with Transfer.receiver(T0) as receiver, Transfer.sender(old.identity, PIN, receiver.offer, T0) as sender:
        sessions, steps = _transfer_room(receiver, sender, decide=(False, True), after=1)
        assert receiver.state == TransferState.REJECTED
        assert sessions[1].failure() == RoomFailure.PEER_LEFT and sessions[1].failure_kind() == "peer-left"
        # The old device confirmed, but its check found the new one gone: no
        # identity message went out (only its key did).
        assert [s.name for s in steps[1]].count("SEND") == 1


def test_a_quiet_room_is_joined_again(devices):
    from itsme._mailbox import ROOM_PEER_CHECK_WAIT_MS, ROOM_REJOIN_PAUSE_MS, RoomFailure, RoomSession, RoomStep
    import itsme._abi as abi

    assert (ROOM_PEER_CHECK_WAIT_MS, ROOM_REJOIN_PAUSE_MS) == (
        abi.ITSME_ROOM_PEER_CHECK_WAIT_MS,
        abi.ITSME_ROOM_REJOIN_PAUSE_MS,
    )
    with Transfer.receiver(T0) as receiver:
        session = RoomSession(receiver)
        assert session.next(T0) == RoomStep.RECEIVE
        session.text(b'{"type":"waiting"}')
        session.connection_closed(4000)  # idle
        assert session.next(T0) == RoomStep.REJOIN
        session.rejoined()
        assert session.next(T0) == RoomStep.RECEIVE and session.failure() == RoomFailure.NONE
        session.connection_closed(4009)
        assert session.failure() == RoomFailure.ROOM_FULL
        assert session.next(T0) == RoomStep.LEAVE
        assert receiver.state == TransferState.REJECTED

