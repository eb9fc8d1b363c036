"""Identities: creation, loading, fingerprint, name, file store layout."""

import gc
import hashlib
import os
import re
import stat

import pytest

import itsme
from itsme import Identity, ItsMeError, Result, SecretStore

ITEM_NAME = re.compile(r"[a-z0-9_-][a-z0-9._-]{0,127}")


def sha256_fingerprint(public_key):
    return hashlib.sha256(public_key).digest()[:8].hex().upper()


def test_create_and_load_in_memory(store):
    with Identity.create(store, "Alice") as created:
        fingerprint, public_key = created.fingerprint, created.public_key
    with Identity.load(store) as loaded:
        assert loaded.fingerprint == fingerprint
        assert loaded.public_key == public_key
        assert loaded.name == "Alice"


def test_create_and_load_in_file_store(tmp_path):
    directory = tmp_path / "store"
    with SecretStore.file(directory) as store, Identity.create(store, "Bob") as created:
        fingerprint, public_key = created.fingerprint, created.public_key
    with SecretStore.file(str(directory)) as store, Identity.load(store) as loaded:
        assert loaded.fingerprint == fingerprint
        assert loaded.public_key == public_key
        assert loaded.name == "Bob"


def test_identities_differ(store):
    with Identity.create(store, "One") as one, SecretStore.memory() as other_store:
        with Identity.create(other_store, "Two") as two:
            assert one.public_key != two.public_key
            assert one.fingerprint != two.fingerprint


def test_fingerprint_is_truncated_sha256_of_public_key(identity):
    public_key = identity.public_key
    assert isinstance(public_key, bytes)
    assert len(public_key) == itsme.PUBLIC_KEY_BYTES == 32
    fingerprint = identity.fingerprint
    assert re.fullmatch(r"[0-9A-F]{16}", fingerprint)
    assert fingerprint == sha256_fingerprint(public_key)
    assert itsme.fingerprint_from_public_key(public_key) == fingerprint
    assert itsme.fingerprint_from_public_key(bytearray(public_key)) == fingerprint


@pytest.mark.parametrize("key", [bytes(32), bytes(range(32)), b"\xff" * 32])
def test_fingerprint_from_public_key(key):
    assert itsme.fingerprint_from_public_key(key) == sha256_fingerprint(key)


@pytest.mark.parametrize("length", [0, 31, 33, 64])
def test_fingerprint_from_public_key_wrong_length(length):
    with pytest.raises(itsme.InvalidArgumentError) as info:
        itsme.fingerprint_from_public_key(bytes(length))
    assert info.value.code == Result.ITSME_E_INVALID_ARGUMENT


@pytest.mark.parametrize(
    "name",
    ["Alice", "Zoë 👋", "名前", "x", "a" * 128, "é" * 64, "Ünïcödé " * 10],
)
def test_name_round_trip(store, name):
    with Identity.create(store, name) as ident:
        assert ident.name == name
    with Identity.load(store) as ident:
        assert ident.name == name


def test_set_name_persists(tmp_path):
    directory = tmp_path / "store"
    with SecretStore.file(directory) as store, Identity.create(store, "Before") as ident:
        fingerprint = ident.fingerprint
        ident.name = "After ✓"
        assert ident.name == "After ✓"
    with SecretStore.file(directory) as store, Identity.load(store) as ident:
        assert ident.name == "After ✓"
        assert ident.fingerprint == fingerprint


def test_set_name_persists_in_memory(store):
    with Identity.create(store, "Before") as ident:
        ident.name = "b" * 128
    with Identity.load(store) as ident:
        assert ident.name == "b" * 128


@pytest.mark.parametrize(
    "name", ["", "a" * 129, "€" * 43, "tab\there", "new\nline", "bell\x07", "del\x7f", "c1\x85", "nul\0byte"]
)
def test_invalid_names_are_rejected(store, name):
    with pytest.raises(itsme.InvalidArgumentError) as info:
        Identity.create(store, name)
    assert info.value.code == Result.ITSME_E_INVALID_ARGUMENT
    with pytest.raises(itsme.NotFoundError):
        Identity.load(store)


@pytest.mark.parametrize("name", ["", "a" * 129, "ctl\x01"])
def test_invalid_set_name_keeps_old_name(store, name):
    with Identity.create(store, "Kept") as ident:
        with pytest.raises(itsme.InvalidArgumentError):
            ident.name = name
        assert ident.name == "Kept"
    with Identity.load(store) as ident:
        assert ident.name == "Kept"


def test_non_str_name_is_a_type_error(store):
    with pytest.raises(TypeError):
        Identity.create(store, b"bytes")


def test_create_twice_already_exists(store):
    with Identity.create(store, "First") as first:
        with pytest.raises(ItsMeError) as info:
            Identity.create(store, "Second")
        error = info.value
        assert isinstance(error, itsme.AlreadyExistsError)
        assert error.code == Result.ITSME_E_ALREADY_EXISTS == itsme.ITSME_E_ALREADY_EXISTS
        assert error.name == "ITSME_E_ALREADY_EXISTS"
        assert error.message == itsme.result_message(Result.ITSME_E_ALREADY_EXISTS)
        assert error.detail, "the store's last error should explain the failure"
        assert error.message in str(error) and error.detail in str(error)
        with Identity.load(store) as loaded:
            assert loaded.fingerprint == first.fingerprint
            assert loaded.name == "First"


def test_load_from_empty_store_not_found(store):
    with pytest.raises(ItsMeError) as info:
        Identity.load(store)
    assert isinstance(info.value, itsme.NotFoundError)
    assert info.value.code == Result.ITSME_E_NOT_FOUND
    assert info.value.name == "ITSME_E_NOT_FOUND"
    assert store.last_error() == info.value.detail


def test_load_from_empty_file_store_not_found(tmp_path):
    with SecretStore.file(tmp_path / "empty") as store:
        with pytest.raises(itsme.NotFoundError):
            Identity.load(store)


def test_file_store_permissions(tmp_path):
    directory = tmp_path / "missing" / "parents" / "store"
    with SecretStore.file(directory) as store, Identity.create(store, "Perm") as ident:
        ident.set_pin("123456")
        with pytest.raises(itsme.WrongPinError):
            ident.verify_pin("000000")
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    entries = sorted(os.listdir(directory))
    assert entries, "the store should hold the identity's items"
    for entry in entries:
        # Items, and the lock file the store takes for counter updates.
        assert entry == ".lock" or ITEM_NAME.fullmatch(entry), f"unexpected file {entry!r} (temporary file left behind?)"
        info = os.lstat(directory / entry)
        assert stat.S_ISREG(info.st_mode)
        assert stat.S_IMODE(info.st_mode) == 0o600, entry


def test_file_store_on_a_regular_file(tmp_path):
    path = tmp_path / "file"
    path.write_bytes(b"not a directory")
    with pytest.raises(itsme.SecretStoreError) as info:
        SecretStore.file(path)
    assert info.value.code == Result.ITSME_E_SECRET_STORE
    assert info.value.detail


def test_identity_outlives_its_store_handle():
    store = SecretStore.memory()
    ident = Identity.create(store, "Alone")
    store.close()
    assert ident.name == "Alone"
    ident.set_pin("123456")
    ident.verify_pin("123456")
    ident.close()


def test_close_is_idempotent_and_final(store):
    ident = Identity.create(store, "Closing")
    assert not ident.closed
    ident.close()
    ident.close()
    assert ident.closed
    with pytest.raises(ValueError):
        ident.fingerprint
    with pytest.raises(ValueError):
        ident.verify_pin("123456")
    assert repr(ident) == "<Identity closed>"
    store.close()
    store.close()
    with pytest.raises(ValueError):
        Identity.load(store)


def test_context_manager_closes(store):
    with Identity.create(store, "Ctx") as ident:
        assert not ident.closed
    assert ident.closed


def test_garbage_collection_frees_handles():
    for _ in range(50):
        store = SecretStore.memory()
        Identity.create(store, "Garbage")
        del store
    gc.collect()


def test_repr_shows_only_the_fingerprint(identity):
    assert repr(identity) == f"<Identity {identity.fingerprint}>"


def test_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", itsme.version())
    major, minor, patch = (int(part) for part in itsme.version().split("."))
    assert itsme.version_number() == major * 10000 + minor * 100 + patch


def test_sizes():
    assert itsme.PUBLIC_KEY_BYTES == 32
    assert itsme.FINGERPRINT_SIZE == 17
    assert itsme.FINGERPRINT_CHARS == 16
    assert itsme.NAME_MAX_BYTES == 128


def test_file_store_accepts_path_types(tmp_path):
    with SecretStore.file(tmp_path / "pathlib") as store, Identity.create(store, "P") as ident:
        fingerprint = ident.fingerprint
    with SecretStore.file(str(tmp_path / "pathlib")) as store, Identity.load(store) as ident:
        assert ident.fingerprint == fingerprint
    with SecretStore.file(os.fsencode(tmp_path / "pathlib")) as store, Identity.load(store) as ident:
        assert ident.fingerprint == fingerprint
    with pytest.raises(itsme.InvalidArgumentError):
        SecretStore.file(os.fsencode(tmp_path) + b"/\xff")
    with pytest.raises(itsme.InvalidArgumentError):
        SecretStore.file("")
