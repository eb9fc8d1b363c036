"""The encrypted contact store (``itsme_store``) and contact snapshots."""

from __future__ import annotations

import ctypes
import enum
import os
from ctypes import byref, c_bool, c_int64, c_size_t, c_uint8, c_uint32, c_uint64, c_void_p
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, Tuple, Type, Union

from ._errors import Result, check
from ._ffi import StoreLossStruct, lib
from ._handle import (
    DetailedHandle,
    encode_text,
    enum_or_int,
    int_argument,
    new_handle,
    read_bytes,
    read_text,
    unix_time,
)
from ._identity import FINGERPRINT_SIZE, PUBLIC_KEY_BYTES, Identity
from ._profile import Profile
from ._random import DeterministicRandom, use_random

__all__ = [
    "ContactStore",
    "StoreLoss",
    "Contact",
    "VerificationState",
    "ExchangeMethod",
    "CONTACT_UNVERIFIED",
    "CONTACT_VERIFIED",
    "CONTACT_DEGRADED",
    "CONTACT_AWAITING_PEER",
    "EXCHANGE_QR",
    "EXCHANGE_BLUETOOTH",
    "EXCHANGE_INVITE",
    "EXCHANGE_REALTIME",
    "SEED_BYTES",
    "NOTE_MAX_BYTES",
    "DEGRADATION_CODE_SIZE",
    "PHOTO_MAX_BYTES",
]

#: A contact's verification seed, in bytes (``ITSME_SEED_BYTES``).
SEED_BYTES = 32
#: Longest note, in UTF-8 bytes (``ITSME_NOTE_MAX_BYTES``).
NOTE_MAX_BYTES = 4096
#: Buffer size for a degradation code's text: 24 characters, 5 dashes and
#: the NUL (``ITSME_DEGRADATION_CODE_SIZE``).
DEGRADATION_CODE_SIZE = 30
#: Largest contact photo, in bytes (see ``itsme_store_set_photo``).
PHOTO_MAX_BYTES = 524288

if TYPE_CHECKING:
    from ctypes import Array, _SimpleCData

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_UINT32_MAX = 2**32 - 1
_SIZE_MAX = 2 ** (8 * ctypes.sizeof(c_size_t)) - 1
# First guesses at text sizes; longer values take a second call.
_NAME_GUESS = 64
_NOTE_GUESS = 128
_PHOTO_GUESS = 4096


class VerificationState(enum.IntEnum):
    """``itsme_verification_state`` (``ITSME_CONTACT_*``)."""

    UNVERIFIED = 0
    VERIFIED = 1
    #: Their device changed: verification still works, the change is shown.
    DEGRADED = 2
    #: Added by an exchange whose SAS this side confirmed while the peer's
    #: confirmation has not arrived: not usable for verification yet; its
    #: exchange settles it (see :meth:`Exchange.settle`).
    AWAITING_PEER = 3


class ExchangeMethod(enum.IntEnum):
    """``itsme_exchange_method`` (``ITSME_EXCHANGE_*``): how keys were exchanged."""

    QR = 0
    BLUETOOTH = 1
    INVITE = 2
    REALTIME = 3


# The same values under the header's names (without the ITSME_ prefix).
CONTACT_UNVERIFIED = VerificationState.UNVERIFIED
CONTACT_VERIFIED = VerificationState.VERIFIED
CONTACT_DEGRADED = VerificationState.DEGRADED
CONTACT_AWAITING_PEER = VerificationState.AWAITING_PEER
EXCHANGE_QR = ExchangeMethod.QR
EXCHANGE_BLUETOOTH = ExchangeMethod.BLUETOOTH
EXCHANGE_INVITE = ExchangeMethod.INVITE
EXCHANGE_REALTIME = ExchangeMethod.REALTIME


@dataclass(frozen=True)
class Contact:
    """A contact as stored: an ``itsme_contact`` snapshot, read in one go.

    ``public_key`` is None and ``authenticated`` False for a contact from the
    source's version-5 format, which carries a fingerprint but no key.
    ``verified_at`` is None if the contact was never verified, and
    ``last_window`` None if no verification window was used yet.
    """

    id: int
    name: str
    fingerprint: str
    public_key: Optional[bytes]
    authenticated: bool
    state: VerificationState
    acknowledged: bool
    method: ExchangeMethod
    created_at: int
    verified_at: Optional[int]
    last_window: Optional[int]
    note: str

    @classmethod
    def _read(cls, ptr: int) -> "Contact":
        """Reads every field of a snapshot handle (which the caller frees)."""

        def scalar(function: Callable[..., int], ctype: Type[_SimpleCData[int]]) -> int:
            value = ctype()
            check(function(ptr, byref(value)))
            return value.value

        def optional(function: Callable[..., int]) -> Optional[int]:
            value = c_int64()
            code = function(ptr, byref(value))
            if code == Result.ITSME_E_NOT_FOUND:
                return None
            check(code)
            return value.value

        def text(function: Callable[..., int], guess: int) -> str:
            return read_text(lambda buf, cap, out_len: function(ptr, buf, cap, out_len), guess)

        state, acknowledged = c_uint32(), c_bool()
        check(lib.itsme_contact_state(ptr, byref(state), byref(acknowledged)))
        is_authenticated = c_bool()
        check(lib.itsme_contact_is_authenticated(ptr, byref(is_authenticated)))
        authenticated = bool(is_authenticated.value)
        key = None
        if authenticated:
            key = read_bytes(
                lambda buf, cap, out_len: lib.itsme_contact_public_key(ptr, buf, cap, out_len), PUBLIC_KEY_BYTES
            )
        return cls(
            id=scalar(lib.itsme_contact_id, c_int64),
            name=text(lib.itsme_contact_name, _NAME_GUESS),
            fingerprint=text(lib.itsme_contact_fingerprint, FINGERPRINT_SIZE),
            public_key=key,
            authenticated=authenticated,
            state=enum_or_int(VerificationState, state.value),
            acknowledged=bool(acknowledged.value),
            method=enum_or_int(ExchangeMethod, scalar(lib.itsme_contact_exchange_method, c_uint32)),
            created_at=scalar(lib.itsme_contact_created_at, c_int64),
            verified_at=optional(lib.itsme_contact_verified_at),
            last_window=optional(lib.itsme_contact_last_window),
            note=text(lib.itsme_contact_note, _NOTE_GUESS),
        )


def _bytes_argument(value: object, what: str) -> Tuple[Array[c_uint8], int]:
    """Bytes as a C array (at least one element, so never NULL) and its length."""
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"{what} must be bytes, not {type(value).__name__}")
    data = bytes(value)
    return (c_uint8 * max(len(data), 1)).from_buffer_copy(data or b"\0"), len(data)


def _wipe(array: Array[c_uint8]) -> None:
    ctypes.memset(array, 0, ctypes.sizeof(array))


def _id(value: int) -> int:
    return int_argument(value, "contact id", _INT64_MIN, _INT64_MAX)


def _uint32(value: int, what: str) -> int:
    return int_argument(value, what, 0, _UINT32_MAX)


@dataclass(frozen=True)
class StoreLoss:
    """What :meth:`ContactStore.accept_loss` gave up (``itsme_store_loss``)."""

    #: The file was not the store last seen at its path (emptied, deleted or
    #: swapped); ``commits_lost`` is then 0, as it cannot be known.
    replaced: bool
    #: Commits the file was behind the last one this device saw.
    commits_lost: int
    #: Contacts at the last commit seen, and in the file now.
    contacts_before: int
    contacts_now: int
    #: Rows the file's last commit counted that it lacked (a damaged file).
    contacts_missing: int
    photos_missing: int
    device_secrets_missing: int
    #: Contacts whose photo was lost (kept, without a photo).
    contacts_without_their_photo: int

    @property
    def nothing_lost(self) -> bool:
        """True when the store was whole: accepting changed nothing."""
        return not (
            self.replaced
            or self.commits_lost
            or self.contacts_missing
            or self.photos_missing
            or self.device_secrets_missing
            or self.contacts_without_their_photo
        )

    @classmethod
    def _from_struct(cls, s: StoreLossStruct) -> "StoreLoss":
        return cls(
            replaced=bool(s.replaced),
            commits_lost=s.commits_lost,
            contacts_before=s.contacts_before,
            contacts_now=s.contacts_now,
            contacts_missing=s.contacts_missing,
            photos_missing=s.photos_missing,
            device_secrets_missing=s.device_secrets_missing,
            contacts_without_their_photo=s.contacts_without_their_photo,
        )


class ContactStore(DetailedHandle):
    """The encrypted contact store of an identity (``itsme_store``).

    Contacts live in one SQLite file, each a row sealed under the identity's
    contacts key; lookups go through keyed indexes, so the file holds no
    name, key, fingerprint or seed in the clear.  A change is durable when
    its call returns.  Safe to use from several threads (calls on one store
    are serialised); several handles or processes may open one file.

    Failures raise :class:`ItsMeError` subclasses whose ``detail`` is the
    store's last-error message for that call.
    """

    _kind = "contact store"
    _free_function = lib.itsme_store_free
    _last_error_name = "itsme_store_last_error"

    @classmethod
    def open(cls, identity: Identity, path: Union[str, "os.PathLike[str]"]) -> "ContactStore":
        """Opens (creating if missing) the store at ``path`` for ``identity``.

        The store keeps what it needs of the identity, which may be closed
        first.  Raises :class:`WrongIdentityError` if the file belongs to
        another identity and :class:`DatabaseError` if it cannot be opened
        or is not a contact store; either way the file is left unchanged.
        The error's detail is the identity's last error.
        """
        if not isinstance(identity, Identity):
            raise TypeError(f"identity must be an Identity, not {type(identity).__name__}")
        encoded = encode_text(os.fspath(path), "path")
        out = c_void_p()
        with identity._use() as identity_ptr:
            check(
                lib.itsme_store_open(identity_ptr, encoded, byref(out)),
                lambda: Identity._detail(identity_ptr),
            )
        return cls(new_handle(out))

    @staticmethod
    def accept_loss(identity: Identity, path: Union[str, "os.PathLike[str]"]) -> "StoreLoss":
        """Accepts the loss that made :meth:`open` raise
        :class:`RolledBackError` (the file is behind, or is not, the store this
        device last saw at ``path``) or :class:`CorruptDataError` (rows or
        photos lost): the file becomes the store as it is, and this device's
        mark is set to it.  Returns what was lost.  Call it only when the
        person chose to, after being shown the error.
        """
        if not isinstance(identity, Identity):
            raise TypeError(f"identity must be an Identity, not {type(identity).__name__}")
        encoded = encode_text(os.fspath(path), "path")
        loss = StoreLossStruct()
        with identity._use() as identity_ptr:
            check(
                lib.itsme_store_accept_loss(identity_ptr, encoded, byref(loss)),
                lambda: Identity._detail(identity_ptr),
            )
        return StoreLoss._from_struct(loss)

    def _snapshot(self, function: Callable[..., int], *args: Any) -> Contact:
        out = c_void_p()
        self._call(function, *args, byref(out))
        try:
            return Contact._read(new_handle(out))
        finally:
            lib.itsme_contact_free(out.value)

    def _list(self, function: Callable[..., int], *args: Any) -> List[Contact]:
        out = c_void_p()
        self._call(function, *args, byref(out))
        try:
            count = c_size_t()
            check(lib.itsme_contact_list_count(out.value, byref(count)))
            contacts = []
            for index in range(count.value):
                item = c_void_p()
                check(lib.itsme_contact_list_get(out.value, index, byref(item)))
                try:
                    contacts.append(Contact._read(new_handle(item)))
                finally:
                    lib.itsme_contact_free(item.value)
            return contacts
        finally:
            lib.itsme_contact_list_free(out.value)

    def add(
        self,
        name: str,
        public_key: bytes,
        seed: bytes,
        method: ExchangeMethod = EXCHANGE_QR,
        now: Optional[int] = None,
    ) -> int:
        """Adds a contact identified by its identity public key; returns its id.

        ``seed`` is the verification seed (:data:`SEED_BYTES`).  ``now`` is
        the time added (unix seconds; the current time if None).  Raises
        :class:`AlreadyExistsError` if a contact has this key, and
        :class:`InvalidKeyError` for a key of the wrong size or our own.
        Ids only grow and are never reused.
        """
        encoded = encode_text(name, "name")
        method_code = _uint32(method, "method")
        when = unix_time(now)
        key, key_len = _bytes_argument(public_key, "public_key")
        secret, seed_len = _bytes_argument(seed, "seed")
        out = c_int64()
        try:
            self._call(lib.itsme_store_add, encoded, key, key_len, secret, seed_len, method_code, when, byref(out))
        finally:
            _wipe(secret)
        return out.value

    def add_unauthenticated(
        self,
        name: str,
        fingerprint: str,
        seed: bytes,
        method: ExchangeMethod = EXCHANGE_QR,
        now: Optional[int] = None,
    ) -> int:
        """Adds a contact from the source's version-5 format: a fingerprint
        (16 hex digits) but no key.  Such a contact is never merged with
        nor replaces a keyed one.  Returns its id."""
        encoded = encode_text(name, "name")
        encoded_fingerprint = encode_text(fingerprint, "fingerprint")
        method_code = _uint32(method, "method")
        when = unix_time(now)
        secret, seed_len = _bytes_argument(seed, "seed")
        out = c_int64()
        try:
            self._call(
                lib.itsme_store_add_unauthenticated, encoded, encoded_fingerprint, secret, seed_len, method_code, when,
                byref(out),
            )
        finally:
            _wipe(secret)
        return out.value

    def get(self, contact_id: int) -> Contact:
        """The contact with this id.

        Raises :class:`NotFoundError` if there is none, and
        :class:`AuthenticationFailedError` if its sealed row was altered.
        """
        return self._snapshot(lib.itsme_store_get, _id(contact_id))

    def get_by_key(self, public_key: bytes) -> Contact:
        """The contact with this identity public key."""
        key, key_len = _bytes_argument(public_key, "public_key")
        return self._snapshot(lib.itsme_store_get_by_key, key, key_len)

    def find_fingerprint(self, fingerprint: str) -> List[Contact]:
        """The contacts with this fingerprint (16 hex digits, either case):
        keyed contacts first, then unauthenticated ones; empty if none."""
        return self._list(lib.itsme_store_find_fingerprint, encode_text(fingerprint, "fingerprint"))

    def list(self, after_id: int = 0, limit: int = 0) -> List[Contact]:
        """Up to ``limit`` contacts (0: no limit) with ids above ``after_id``,
        in id order.  A record that fails authentication fails the call."""
        return self._list(
            lib.itsme_store_list, _id(after_id), int_argument(limit, "limit", 0, _SIZE_MAX)
        )

    def iterate(self, page_size: int = 500) -> Iterator[Contact]:
        """Every contact in id order, read ``page_size`` at a time."""
        page_size = int_argument(page_size, "page_size", 1, _SIZE_MAX)
        after = 0
        while True:
            page = self.list(after, page_size)
            yield from page
            if len(page) < page_size:
                return
            after = page[-1].id

    def count(self) -> int:
        """The number of contacts."""
        out = c_uint64()
        self._call(lib.itsme_store_count, byref(out))
        return out.value

    def expire_awaiting(self, now: Optional[int] = None) -> int:
        """Deletes every contact still awaiting the peer's decision more than
        24 hours after its exchange began; returns how many.  Exchanges do
        it when they save; call it at start, say, to clean up after
        exchanges that were abandoned."""
        out = c_uint64()
        self._call(lib.itsme_store_expire_awaiting, unix_time(now), byref(out))
        return out.value

    def set_name(self, contact_id: int, name: str) -> None:
        """Renames a contact."""
        self._call(lib.itsme_store_set_name, _id(contact_id), encode_text(name, "name"))

    def set_note(self, contact_id: int, note: str) -> None:
        """Replaces a contact's note (at most :data:`NOTE_MAX_BYTES` of UTF-8;
        empty for none)."""
        self._call(lib.itsme_store_set_note, _id(contact_id), encode_text(note, "note"))

    def set_state(
        self,
        contact_id: int,
        state: VerificationState,
        acknowledged: bool = False,
        now: Optional[int] = None,
    ) -> None:
        """Sets a contact's state.

        :data:`CONTACT_VERIFIED` records ``now`` as the verification time;
        ``acknowledged`` counts only with :data:`CONTACT_DEGRADED` (the person
        confirmed the device change).
        """
        self._call(
            lib.itsme_store_set_state, _id(contact_id), _uint32(state, "state"), bool(acknowledged),
            unix_time(now),
        )

    def use_window(self, contact_id: int, window: int) -> None:
        """Uses voice-verification window ``window`` for the contact.

        Raises :class:`WindowUsedError` unless it is greater than the last
        window used.  Atomic: of several handles or processes racing for one
        window, exactly one succeeds.
        """
        self._call(lib.itsme_store_use_window, _id(contact_id), int_argument(window, "window", _INT64_MIN, _INT64_MAX))

    def delete(self, contact_id: int) -> None:
        """Deletes a contact, with its photo and device secrets."""
        self._call(lib.itsme_store_delete, _id(contact_id))

    def backup(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes a consistent copy of the whole store as a new file at
        ``path``: a backup, or the file that moves to a new device with an
        identity export or transfer (docs/PROTOCOL.md section 17.4).

        Safe while the store is in use; the copy holds what was committed
        when it started.  Records stay sealed, and the copy's device secrets
        open only on this device.  Never overwrites a file: raises
        :class:`AlreadyExistsError` if ``path`` exists, and
        :class:`DatabaseError` if it cannot be written.
        """
        self._call(lib.itsme_store_backup, encode_text(os.fspath(path), "path"))

    # -- photos and profiles (docs/PROTOCOL.md section 18) ----------------------

    def apply_profile(self, contact_id: int, profile: Profile) -> None:
        """Applies an opened :class:`Profile` to contact ``contact_id``, in one
        transaction: its name (if the profile has one) and its photo and
        filename (if it has a photo).  Raises :class:`NotFoundError` if there
        is no such contact."""
        contact_id = _id(contact_id)
        if not isinstance(profile, Profile):
            raise TypeError(f"profile must be a Profile, not {type(profile).__name__}")
        with profile._use() as profile_ptr:
            self._call(lib.itsme_store_apply_profile, contact_id, profile_ptr)

    def set_photo(self, contact_id: int, photo: bytes, filename: str = "") -> None:
        """Sets contact ``contact_id``'s photo (at most :data:`PHOTO_MAX_BYTES`)
        and its filename (``""`` for none; at most 255 bytes of UTF-8), sealed
        like the contact.  An empty photo and filename remove the photo.
        Raises :class:`InvalidArgumentError` (too large, a bad filename, a
        filename without a photo) and :class:`NotFoundError`."""
        contact_id = _id(contact_id)
        encoded = encode_text(filename, "filename")
        picture, length = _bytes_argument(photo, "photo")
        self._call(lib.itsme_store_set_photo, contact_id, picture if length else None, length, encoded)

    def photo(self, contact_id: int) -> Tuple[bytes, str]:
        """Contact ``contact_id``'s photo and its filename (``""`` if none).

        Raises :class:`NotFoundError` if there is no such contact or it has
        no photo, and :class:`CorruptDataError` if the stored photo does not
        open.
        """
        contact_id = _id(contact_id)
        with self._use():  # both reads under one hold of the lock
            data = self._read(
                read_bytes,
                lambda ptr, buf, cap, out_len: lib.itsme_store_photo(ptr, contact_id, buf, cap, out_len),
                _PHOTO_GUESS,
            )
            filename = self._read(
                read_text,
                lambda ptr, buf, cap, out_len: lib.itsme_store_photo_filename(ptr, contact_id, buf, cap, out_len),
                _NAME_GUESS,
            )
        return data, filename

    # -- the degradation code (docs/PROTOCOL.md section 10.2) ------------------

    def degradation_code(self, contact_id: int, random: Optional[DeterministicRandom] = None) -> str:
        """For the person who changed devices: the code to give contact
        ``contact_id`` (``"ABCD-EFGH-IJKL-MNOP-QRST-UVWX"``), saying that the
        change is theirs.

        Draws a new interim device secret (from ``random``, tests only; None:
        the operating system) and stores it as this device's secret for the
        contact.  Each call draws a new one, so only the code from the latest
        call is valid.  Raises :class:`NotFoundError` if there is no such
        contact.
        """
        contact_id = _id(contact_id)
        with use_random(random) as rng:
            return self._read(
                read_text,
                lambda ptr, buf, cap, out_len: lib.itsme_store_degradation_code(
                    ptr, contact_id, rng, buf, cap, out_len
                ),
                DEGRADATION_CODE_SIZE,
            )

    def accept_degradation_code(self, contact_id: int, code: str, now: Optional[int] = None) -> None:
        """For the contact: checks the code the person who changed devices
        sent (any case; spaces and ``-`` are ignored) in constant time, under
        the attempt limiter.

        A right code stores their interim device secret and marks the contact
        degraded with the change acknowledged; it never restores "verified".
        Raises :class:`InvalidArgumentError` for text that is not a
        degradation code (not counted), :class:`AuthenticationFailedError`
        for a wrong code (counted), :class:`LockedError` after too many wrong
        codes (wait, and try again), :class:`NotFoundError`.
        """
        self._call(
            lib.itsme_store_accept_degradation_code, _id(contact_id), encode_text(code, "code"), unix_time(now)
        )

    def set_device_secrets(self, contact_id: int, mine: bytes, theirs: bytes) -> None:
        """Test build only (include/itsme_testing.h): stores the device
        secrets of contact ``contact_id`` as an exchange leaves them, this
        device's for the contact (``mine``) and the contact's (``theirs``),
        each at most 64 bytes, not both empty.  They replace the contact's
        secrets.  For tests and vectors that rebuild a store holding given
        secrets.  Raises :class:`TestBuildRequiredError` against a release
        library, :class:`InvalidArgumentError`, :class:`NotFoundError`."""
        mine_buffer, mine_length = _bytes_argument(mine, "mine")
        theirs_buffer, theirs_length = _bytes_argument(theirs, "theirs")
        try:
            self._call(
                lib.itsme_store_set_device_secrets,
                _id(contact_id),
                mine_buffer,
                mine_length,
                theirs_buffer,
                theirs_length,
            )
        finally:
            _wipe(mine_buffer)
            _wipe(theirs_buffer)

    def __repr__(self) -> str:
        return f"<ContactStore {'closed' if self.closed else 'open'}>"
