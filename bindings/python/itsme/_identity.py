"""Identities and their PIN."""

from __future__ import annotations

from ctypes import byref, c_bool, c_uint8, c_uint32, c_uint64, c_void_p
from typing import TYPE_CHECKING, Callable, NamedTuple, Optional

from ._errors import check
from ._ffi import lib
from ._handle import DetailedHandle, encode_text, new_handle, read_bytes, read_text, unix_time
from ._random import DeterministicRandom, use_random
from ._store import SecretStore

if TYPE_CHECKING:
    from ctypes import _CArgObject

    from ._contacts import ContactStore

__all__ = ["Identity", "PinStatus", "fingerprint_from_public_key"]

PUBLIC_KEY_BYTES: int = lib.itsme_public_key_bytes()
FINGERPRINT_SIZE: int = lib.itsme_fingerprint_size()
NAME_MAX_BYTES: int = lib.itsme_name_max_bytes()
# A first guess at a display name's size; longer names take a second call.
_NAME_GUESS = 64


class PinStatus(NamedTuple):
    """The PIN attempt limiter's state at a given time."""

    #: Consecutive failed attempts.
    failures: int
    #: Seconds before the next attempt is allowed; 0 if one is allowed now.
    wait_seconds: int


def fingerprint_from_public_key(public_key: bytes) -> str:
    """The fingerprint of an Ed25519 public key.

    That is the first 8 bytes of its SHA-256 as 16 uppercase hex digits.
    Raises :class:`InvalidArgumentError` unless the key is 32 bytes.
    """
    data = bytes(memoryview(public_key))
    key = (c_uint8 * len(data)).from_buffer_copy(data)
    return read_text(
        lambda buf, cap, out_len: lib.itsme_fingerprint_from_public_key(key, len(data), buf, cap, out_len),
        FINGERPRINT_SIZE,
    )


class Identity(DetailedHandle):
    """A person's identity on this device (``itsme_identity``).

    An Ed25519 key pair, a contacts key and a display name kept in a secret
    store; the private key never leaves the library.  Open one with
    :meth:`create` or :meth:`load`; release it with :meth:`close` or a
    ``with`` block.  Safe to use from several threads (calls are serialised).
    """

    _kind = "identity"
    _free_function = lib.itsme_identity_free
    _last_error_name = "itsme_identity_last_error"

    @classmethod
    def create(cls, store: SecretStore, name: str, random: Optional[DeterministicRandom] = None) -> "Identity":
        """Creates a new identity named ``name`` and saves it in ``store``.

        ``name`` is 1 to 128 bytes of UTF-8 without control, invisible or
        bidi-override characters (docs/PROTOCOL.md section 1).
        ``random`` (tests and vectors only) draws the keys from a
        :class:`DeterministicRandom` instead of the operating system.
        Raises :class:`AlreadyExistsError` if the store holds an identity.
        """
        encoded = encode_text(name, "name")
        if random is None:
            return cls._open(store, lambda ptr, out: lib.itsme_identity_create(ptr, encoded, out))
        with use_random(random) as rng:
            return cls._open(store, lambda ptr, out: lib.itsme_identity_create_with_random(ptr, encoded, rng, out))

    @classmethod
    def load(cls, store: SecretStore) -> "Identity":
        """Loads the identity kept in ``store``.

        Raises :class:`NotFoundError` if there is none and
        :class:`CorruptDataError` if its record is malformed.
        """
        return cls._open(store, lib.itsme_identity_load)

    @classmethod
    def _open(cls, store: SecretStore, constructor: Callable[[int, _CArgObject], int]) -> "Identity":
        if not isinstance(store, SecretStore):
            raise TypeError(f"store must be a SecretStore, not {type(store).__name__}")
        out = c_void_p()
        with store._use() as store_ptr:
            check(constructor(store_ptr, byref(out)), store.last_error)
        return cls(new_handle(out))

    @property
    def fingerprint(self) -> str:
        """The fingerprint: 16 uppercase hex digits."""
        return self._read(read_text, lib.itsme_identity_fingerprint, FINGERPRINT_SIZE)

    @property
    def public_key(self) -> bytes:
        """The Ed25519 public key (32 bytes)."""
        return self._read(read_bytes, lib.itsme_identity_public_key, PUBLIC_KEY_BYTES)

    @property
    def name(self) -> str:
        """The display name; setting it saves the identity."""
        return self._read(read_text, lib.itsme_identity_name, _NAME_GUESS)

    @name.setter
    def name(self, value: str) -> None:
        self._call(lib.itsme_identity_set_name, encode_text(value, "name"))

    def pin_is_set(self) -> bool:
        """Whether a PIN has been set."""
        is_set = c_bool(False)
        self._call(lib.itsme_pin_is_set, byref(is_set))
        return bool(is_set.value)

    def set_pin(self, pin: str) -> None:
        """Sets the first PIN (exactly six ASCII digits).

        Raises :class:`InvalidPinError` for a malformed PIN and
        :class:`AlreadyExistsError` if one is set (use :meth:`change_pin`).
        """
        self._call(lib.itsme_pin_set, encode_text(pin, "pin"))

    def verify_pin(self, pin: str, now: Optional[int] = None) -> None:
        """Checks the PIN at unix time ``now`` (default: the current time).

        Returns normally if it matches.  Raises :class:`WrongPinError` (a
        counted failure), :class:`LockedError` (refused, not counted; see
        :meth:`pin_status`), :class:`InvalidPinError` (malformed, not
        counted) or :class:`NotFoundError` (no PIN set).
        """
        self._call(lib.itsme_pin_verify, encode_text(pin, "pin"), unix_time(now))

    def change_pin(self, old_pin: str, new_pin: str, now: Optional[int] = None) -> None:
        """Replaces the PIN after checking the old one as :meth:`verify_pin` does.

        A malformed new PIN raises :class:`InvalidPinError` before the old
        one is checked.
        """
        self._call(
            lib.itsme_pin_change,
            encode_text(old_pin, "old PIN"),
            encode_text(new_pin, "new PIN"),
            unix_time(now),
        )

    def pin_status(self, now: Optional[int] = None) -> PinStatus:
        """The attempt limiter at unix time ``now`` (default: the current time).

        Returns ``(failures, wait_seconds)``.
        """
        failures = c_uint32(0)
        wait = c_uint64(0)
        self._call(lib.itsme_pin_status, unix_time(now), byref(failures), byref(wait))
        return PinStatus(failures.value, wait.value)

    def export(
        self,
        pin: str,
        password: str,
        kind: int = 1,
        now: Optional[int] = None,
        random: Optional[DeterministicRandom] = None,
    ) -> bytes:
        """Exports the identity for a new device (docs/PROTOCOL.md 17.1):
        the blob :meth:`Import.open` opens there (:func:`export_to_text`
        gives its text, one QR code).

        Checks ``pin`` at unix time ``now`` (default: the current time) as
        :meth:`verify_pin` does, a counted attempt, then seals the identity
        key, the contacts key and the name under ``password`` of ``kind``
        (:class:`PasswordKind`: ``GENERATED``, the default, for one from
        :func:`generate_export_password`, typed in any case with spaces or
        dashes; ``CHOSEN`` for one of at least 8 characters the person
        chose).  ``random`` (tests and vectors only) draws the salt and
        nonce.  Device secrets never leave the device.  Takes about a
        second (Argon2id, 256 MiB).

        Raises :class:`InvalidArgumentError` for an unknown kind or a
        password not of its kind (checked before the PIN: no attempt is
        spent), and the errors of :meth:`verify_pin` (:class:`NotFoundError`
        if no PIN is set: no PIN, no export).
        """
        from ._transfer import _export_identity  # the transfer module builds on this one

        return _export_identity(self, pin, password, kind, now, random)

    def export_with_contacts(
        self,
        pin: str,
        password: str,
        contacts: "ContactStore",
        kind: int = 1,
        now: Optional[int] = None,
        random: Optional[DeterministicRandom] = None,
    ) -> bytes:
        """Exports the identity and its contact store in one blob
        (docs/PROTOCOL.md 17.1, format version 2), as :meth:`export` does,
        with a consistent copy of ``contacts`` (a :class:`ContactStore` of
        this identity; safe while it is in use) sealed along.

        The blob is a file only: it has no text form (:func:`export_to_text`
        refuses it).  It is 144 bytes plus the name's length plus the
        store's (up to :data:`EXPORT_CONTACTS_MAX`).  :meth:`Import.open`
        opens it on the new device, and :meth:`Import.write_contacts` writes
        the store there.  The buffer's size is asked of the library first,
        before the PIN is checked, so that costs no attempt; the store is
        copied for each call.

        Raises the errors of :meth:`export`, and
        :class:`WrongIdentityError` for a store of another identity,
        :class:`InvalidArgumentError` for a store larger than
        :data:`EXPORT_CONTACTS_MAX`, :class:`DatabaseError` if the copy could
        not be made.
        """
        from ._transfer import _export_identity_with_contacts  # the transfer module builds on this one

        return _export_identity_with_contacts(self, pin, password, contacts, kind, now, random)

    def __repr__(self) -> str:
        if self.closed:
            return "<Identity closed>"
        return f"<Identity {self.fingerprint}>"
