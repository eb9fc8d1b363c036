"""The passphrase-wrapped file store (docs/STORAGE.md): each create or open
runs Argon2id over 256 MiB, about a second."""

import json

import pytest

import itsme
from itsme import Identity, SecretStore

PASSPHRASE = b"correct horse battery staple"
NAME = "Zebulon Quince"


def test_create_reopen_and_a_wrong_passphrase(tmp_path):
    directory = tmp_path / "secrets"
    assert SecretStore.is_wrapped_file(directory) is False

    with SecretStore.create_wrapped_file(directory, bytearray(PASSPHRASE)) as store:
        with Identity.create(store, NAME) as identity:
            fingerprint = identity.fingerprint
    assert SecretStore.is_wrapped_file(directory) is True
    assert SecretStore.is_wrapped_file(str(directory) + "/") is True

    # The wrap file sits beside the directory; the items are sealed.
    wrap = json.loads((tmp_path / "secrets.wrap").read_text())
    assert wrap["version"] == 1 and wrap["kdf"] == "argon2id13"
    assert (wrap["opsLimit"], wrap["memLimit"]) == (3, 256 * 1024 * 1024)
    item = (directory / "itsme.identity").read_bytes()
    assert item[0] == 1 and NAME.encode() not in item

    # Reopened (a str passphrase is its UTF-8), the item reads back.
    with SecretStore.open_wrapped_file(directory, PASSPHRASE.decode()) as store:
        with Identity.load(store) as identity:
            assert identity.name == NAME
            assert identity.fingerprint == fingerprint

    with pytest.raises(itsme.AuthenticationFailedError) as wrong:
        SecretStore.open_wrapped_file(directory, b"incorrect horse battery staple")
    assert "wrong passphrase" in str(wrong.value)
    assert "horse" not in str(wrong.value)

    # Wrapped once only; and not readable as a plain store.
    with pytest.raises(itsme.AlreadyExistsError):
        SecretStore.create_wrapped_file(directory, PASSPHRASE)
    with SecretStore.file(directory) as plain, pytest.raises(itsme.CorruptDataError):
        Identity.load(plain)


def test_refusals_before_any_hashing(tmp_path):
    directory = tmp_path / "secrets"
    with pytest.raises(itsme.NotFoundError):
        SecretStore.open_wrapped_file(directory, PASSPHRASE)
    with pytest.raises(itsme.InvalidArgumentError):
        SecretStore.create_wrapped_file(directory, b"")
    too_long = b"x" * (itsme.PASSPHRASE_MAX_BYTES + 1)
    with pytest.raises(itsme.InvalidArgumentError):
        SecretStore.create_wrapped_file(directory, too_long)
    with pytest.raises(itsme.InvalidArgumentError):
        SecretStore.open_wrapped_file(directory, too_long)
    with pytest.raises(itsme.InvalidArgumentError):
        SecretStore.is_wrapped_file("/")
    with pytest.raises(TypeError):
        SecretStore.create_wrapped_file(directory, 12345)  # type: ignore[arg-type]

    (tmp_path / "secrets.wrap").write_text("{}")
    assert SecretStore.is_wrapped_file(directory) is True
    with pytest.raises(itsme.CorruptDataError):
        SecretStore.open_wrapped_file(directory, PASSPHRASE)

    # Only a new, empty store is wrapped.
    other = tmp_path / "plain"
    with SecretStore.file(other) as plain, Identity.create(plain, NAME):
        pass
    with pytest.raises(itsme.AlreadyExistsError):
        SecretStore.create_wrapped_file(other, PASSPHRASE)
    assert SecretStore.is_wrapped_file(other) is False


def test_the_constant_matches_the_library():
    assert itsme.PASSPHRASE_MAX_BYTES == itsme._ffi.lib.itsme_passphrase_max_bytes() == 4096
