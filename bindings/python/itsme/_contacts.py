"""The encrypted contact store (``itsme_store``) and contact snapshots."""

from __future__ import annotations

import enum
import os
from ctypes import byref, c_int, c_int64, c_size_t, c_uint8, c_uint32, c_uint64, c_void_p
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Union

from ._errors import Result, check, error_for
from ._ffi import lib
from ._handle import Handle, encode_text, read_bytes, read_detail, read_text, unix_time
from ._identity import FINGERPRINT_SIZE, PUBLIC_KEY_BYTES, Identity

__all__ = ["ContactStore", "Contact", "VerificationState", "ExchangeMethod", "SEED_BYTES", "NOTE_MAX_BYTES"]

SEED_BYTES = 32
NOTE_MAX_BYTES = 4096


class VerificationState(enum.IntEnum):
    """``itsme_verification_state``."""

    UNVERIFIED = 0
    VERIFIED = 1
    DEGRADED = 2


class ExchangeMethod(enum.IntEnum):
    """``itsme_exchange_method``."""

    QR = 0
    BLUETOOTH = 1
    INVITE = 2
    REALTIME = 3


@dataclass(frozen=True)
class Contact:
    """A contact as stored (an ``itsme_contact`` snapshot, read at once)."""

    id: int
    name: str
    fingerprint: str
    public_key: Optional[bytes]
    state: VerificationState
    acknowledged: bool
    method: ExchangeMethod
    created_at: int
    verified_at: Optional[int]
    last_window: Optional[int]
    note: str

    @property
    def authenticated(self) -> bool:
        """False for a contact from the source's version-5 format (no key)."""
        return self.public_key is not None

    @classmethod
    def _read(cls, ptr: int) -> "Contact":
        def get(function: Callable[..., int], ctype: Any) -> Any:
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

        state, acknowledged = c_uint32(), c_int()
        check(lib.itsme_contact_state(ptr, byref(state), byref(acknowledged)))
        authenticated = get(lib.itsme_contact_is_authenticated, c_int)
        key = None
        if authenticated:
            key = read_bytes(lambda buf, cap, out_len: lib.itsme_contact_public_key(ptr, buf, cap, out_len), PUBLIC_KEY_BYTES)
        return cls(
            id=get(lib.itsme_contact_id, c_int64),
            name=text(lib.itsme_contact_name, 64),
            fingerprint=text(lib.itsme_contact_fingerprint, FINGERPRINT_SIZE),
            public_key=key,
            state=VerificationState(state.value),
            acknowledged=bool(acknowledged.value),
            method=ExchangeMethod(get(lib.itsme_contact_exchange_method, c_uint32)),
            created_at=get(lib.itsme_contact_created_at, c_int64),
            verified_at=optional(lib.itsme_contact_verified_at),
            last_window=optional(lib.itsme_contact_last_window),
            note=text(lib.itsme_contact_note, 128),
        )


def _bytes_argument(value: bytes, what: str) -> Any:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"{what} must be bytes, not {type(value).__name__}")
    data = bytes(value)
    return (c_uint8 * max(len(data), 1)).from_buffer_copy(data or b"\0"), len(data)


class ContactStore(Handle):
    """The encrypted contact store of an identity (``itsme_store``).

    Every contact is a sealed row; lookups go through keyed indexes.  A change
    is durable when its call returns.  Safe to use from several threads;
    several handles or processes may open one file.
    """

    _kind = "contact store"
    _free_function = lib.itsme_store_close

    @classmethod
    def open(cls, identity: Identity, path: Union[str, "os.PathLike[str]"]) -> "ContactStore":
        """Opens (creating if missing) the store at ``path`` for ``identity``.

        Raises :class:`WrongIdentityError` if the file belongs to another
        identity and :class:`DatabaseError` if it is not a contact store.
        """
        if not isinstance(identity, Identity):
            raise TypeError(f"identity must be an Identity, not {type(identity).__name__}")
        encoded = encode_text(os.fspath(path), "path")
        out = c_void_p()
        with identity._use() as identity_ptr:
            check(lib.itsme_store_open(identity_ptr, encoded, byref(out)), identity.last_error)
        return cls(out.value)

    def last_error(self) -> str:
        """The detail of the last failed call made on this store."""
        with self._use() as ptr:
            return self._detail(ptr)

    @staticmethod
    def _detail(ptr: int) -> str:
        return read_detail(lambda buf, cap, out_len: lib.itsme_store_last_error(ptr, buf, cap, out_len))

    def _call(self, function: Callable[..., int], *args: Any) -> None:
        with self._use() as ptr:
            check(function(ptr, *args), lambda: self._detail(ptr))

    def _snapshot(self, function: Callable[..., int], *args: Any) -> Contact:
        out = c_void_p()
        self._call(function, *args, byref(out))
        try:
            return Contact._read(out.value)
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
                    contacts.append(Contact._read(item.value))
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
        method: ExchangeMethod = ExchangeMethod.QR,
        now: Optional[int] = None,
    ) -> int:
        """Adds a contact identified by its identity key; returns its id."""
        key, key_len = _bytes_argument(public_key, "public_key")
        secret, seed_len = _bytes_argument(seed, "seed")
        out = c_int64()
        try:
            self._call(
                lib.itsme_store_add, encode_text(name, "name"), key, key_len, secret, seed_len,
                int(method), unix_time(now), byref(out),
            )
        finally:
            for i in range(len(secret)):
                secret[i] = 0
        return out.value

    def add_unauthenticated(
        self,
        name: str,
        fingerprint: str,
        seed: bytes,
        method: ExchangeMethod = ExchangeMethod.QR,
        now: Optional[int] = None,
    ) -> int:
        """Adds a contact from the source's version-5 format (no key)."""
        secret, seed_len = _bytes_argument(seed, "seed")
        out = c_int64()
        try:
            self._call(
                lib.itsme_store_add_unauthenticated, encode_text(name, "name"), encode_text(fingerprint, "fingerprint"),
                secret, seed_len, int(method), unix_time(now), byref(out),
            )
        finally:
            for i in range(len(secret)):
                secret[i] = 0
        return out.value

    def get(self, contact_id: int) -> Contact:
        """The contact with this id; :class:`NotFoundError` if none."""
        return self._snapshot(lib.itsme_store_get, contact_id)

    def get_by_key(self, public_key: bytes) -> Contact:
        """The contact with this identity key."""
        key, key_len = _bytes_argument(public_key, "public_key")
        return self._snapshot(lib.itsme_store_get_by_key, key, key_len)

    def find_fingerprint(self, fingerprint: str) -> List[Contact]:
        """Contacts with this fingerprint: keyed ones first."""
        return self._list(lib.itsme_store_find_fingerprint, encode_text(fingerprint, "fingerprint"))

    def list(self, after_id: int = 0, limit: int = 0) -> List[Contact]:
        """Up to ``limit`` contacts (0: all) with ids above ``after_id``."""
        return self._list(lib.itsme_store_list, after_id, limit)

    def iterate(self, page_size: int = 500) -> Iterator[Contact]:
        """Every contact in id order, read a page at a time."""
        if page_size <= 0:
            raise ValueError("page_size must be positive")
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

    def set_name(self, contact_id: int, name: str) -> None:
        self._call(lib.itsme_store_set_name, contact_id, encode_text(name, "name"))

    def set_note(self, contact_id: int, note: str) -> None:
        self._call(lib.itsme_store_set_note, contact_id, encode_text(note, "note"))

    def set_state(
        self, contact_id: int, state: VerificationState, acknowledged: bool = False, now: Optional[int] = None
    ) -> None:
        """Sets the state; VERIFIED records ``now`` as the verification time."""
        self._call(lib.itsme_store_set_state, contact_id, int(state), 1 if acknowledged else 0, unix_time(now))

    def use_window(self, contact_id: int, window: int) -> None:
        """Uses a voice-verification window: :class:`WindowUsedError` unless
        it is after the last one used.  Atomic across handles and processes."""
        self._call(lib.itsme_store_use_window, contact_id, window)

    def delete(self, contact_id: int) -> None:
        self._call(lib.itsme_store_delete, contact_id)
