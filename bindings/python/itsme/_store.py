"""Secret stores: built-in (memory, files) or implemented in Python."""

from __future__ import annotations

import contextlib
import ctypes
import enum
import functools
import itertools
import os
from ctypes import byref, c_bool, c_size_t, c_uint8, c_void_p
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, Optional, Protocol, Tuple, Union

from . import _abi
from ._errors import Result, check, record_callback_exception
from ._ffi import (
    DestroyCallback,
    GetCallback,
    PutCallback,
    RemoveCallback,
    SecretStoreCallbacks,
    lib,
)
from ._handle import DetailedHandle, encode_text, new_handle, thread_last_error

if TYPE_CHECKING:
    from ctypes import Array, _Pointer

__all__ = ["Accessibility", "PASSPHRASE_MAX_BYTES", "SecretStore", "SecretStoreBackend"]


class Accessibility(enum.IntEnum):
    """How strictly a host should keep an item (``ITSME_ACCESSIBLE_*``)."""

    WHEN_UNLOCKED_THIS_DEVICE_ONLY = 0
    AFTER_FIRST_UNLOCK_THIS_DEVICE_ONLY = 1
    WHEN_UNLOCKED = 2


class SecretStoreBackend(Protocol):
    """What :meth:`SecretStore.from_callbacks` expects of a Python object.

    Item names are 1 to 128 characters from ``[a-z0-9._-]``.  The methods of
    one store are never called concurrently, but may be called from any
    thread that calls into the library; they must not call into ``itsme``.
    An exception raised by a method fails the library call with
    ``ITSME_E_SECRET_STORE`` (the exception becomes the error's cause).
    """

    def get(self, name: str) -> Optional[bytes]:
        """The item's bytes, or None if there is no such item."""

    def put(self, name: str, value: bytes, accessibility: int) -> None:
        """Creates or atomically replaces the item."""

    def remove(self, name: str) -> bool:
        """Deletes the item; False if there was none."""


# Python backends by the integer the C side holds as their ctx.  An entry
# lives from from_callbacks() until the library calls destroy (or until
# from_callbacks fails, when the caller keeps ctx).
_registry: Dict[int, SecretStoreBackend] = {}
_ctx_ids = itertools.count(1)

_OK = int(Result.ITSME_OK)
_E_INVALID_ARGUMENT = int(Result.ITSME_E_INVALID_ARGUMENT)
_E_BUFFER_TOO_SMALL = int(Result.ITSME_E_BUFFER_TOO_SMALL)
_E_NOT_FOUND = int(Result.ITSME_E_NOT_FOUND)
_E_SECRET_STORE = int(Result.ITSME_E_SECRET_STORE)


def _guarded(body: Callable[..., int]) -> Callable[..., int]:
    """Wraps a callback body so that no exception ever reaches C."""

    @functools.wraps(body)
    def callback(*args: Any) -> int:
        try:
            return body(*args)
        except BaseException as error:  # nothing may unwind into C
            try:
                record_callback_exception(error)
            except BaseException:
                pass
            return _E_SECRET_STORE

    return callback


@_guarded
def _get(
    ctx: Optional[int], name: Optional[bytes], out: _Pointer[c_uint8], cap: int, out_len: _Pointer[c_size_t]
) -> int:
    """get: copies the item to out, or reports the size it needs."""
    if ctx is None or name is None or not out_len:
        return _E_INVALID_ARGUMENT
    value = _registry[ctx].get(name.decode("utf-8"))
    if value is None:
        return _E_NOT_FOUND
    data = bytes(memoryview(value))
    if len(data) > cap:
        out_len[0] = len(data)
        return _E_BUFFER_TOO_SMALL
    if data:
        if not out:
            return _E_INVALID_ARGUMENT
        ctypes.memmove(out, data, len(data))
    out_len[0] = len(data)
    return _OK


@_guarded
def _put(ctx: Optional[int], name: Optional[bytes], value: _Pointer[c_uint8], length: int, accessibility: int) -> int:
    """put: stores a copy of the value."""
    if ctx is None or name is None or (length and not value):
        return _E_INVALID_ARGUMENT
    data = ctypes.string_at(value, length) if length else b""
    try:
        level: int = Accessibility(accessibility)
    except ValueError:
        level = accessibility
    _registry[ctx].put(name.decode("utf-8"), data, level)
    return _OK


@_guarded
def _remove(ctx: Optional[int], name: Optional[bytes]) -> int:
    """remove: deletes the item; ITSME_E_NOT_FOUND if there was none."""
    if ctx is None or name is None:
        return _E_INVALID_ARGUMENT
    return _OK if _registry[ctx].remove(name.decode("utf-8")) else _E_NOT_FOUND


def _destroy(ctx: Optional[int]) -> None:
    """destroy: the library dropped the store; forget its backend."""
    try:
        if ctx is not None:
            _registry.pop(ctx, None)
    except BaseException:  # nothing may unwind into C
        pass


# One set of C entry points serves every Python store (ctx tells them
# apart).  They live as long as the module, hence as long as any store.
_GET = GetCallback(_get)
_PUT = PutCallback(_put)
_REMOVE = RemoveCallback(_remove)
_DESTROY = DestroyCallback(_destroy)


_Path = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
_Passphrase = Union[bytes, bytearray, memoryview, str]

#: The longest passphrase of a wrapped file store, in bytes
#: (``ITSME_PASSPHRASE_MAX_BYTES``).
PASSPHRASE_MAX_BYTES: int = _abi.ITSME_PASSPHRASE_MAX_BYTES


def _directory_argument(directory: _Path) -> bytes:
    path = os.fspath(directory)
    return encode_text(path if isinstance(path, str) else os.fsdecode(path), "directory")


@contextlib.contextmanager
def _passphrase_argument(passphrase: _Passphrase) -> Iterator[Tuple["Array[c_uint8]", int]]:
    """The passphrase in a ctypes buffer, wiped when the block ends."""
    if isinstance(passphrase, str):
        passphrase = passphrase.encode("utf-8")
    if not isinstance(passphrase, (bytes, bytearray, memoryview)):
        raise TypeError(f"passphrase must be bytes or str, not {type(passphrase).__name__}")
    view = memoryview(passphrase).cast("B")
    length = view.nbytes
    # At least one element, so never NULL; filled byte by byte, so that no
    # other copy of the passphrase is made.
    buffer = (c_uint8 * max(length, 1))()
    try:
        for index, byte in enumerate(view):
            buffer[index] = byte
        yield buffer, length
    finally:
        ctypes.memset(buffer, 0, max(length, 1))


class SecretStore(DetailedHandle):
    """Where the library keeps every secret (``itsme_secret_store``).

    Create one with :meth:`memory`, :meth:`file` or :meth:`from_callbacks`.
    Release it with :meth:`close` or a ``with`` block; identities opened on
    it keep the underlying store alive until they are closed too.
    """

    _kind = "secret store"
    _free_function = lib.itsme_secret_store_free
    _last_error_name = "itsme_secret_store_last_error"

    def __init__(self, ptr: int, backend: Optional[SecretStoreBackend] = None, ctx: Optional[int] = None) -> None:
        """Wraps an owned handle; use the classmethods instead."""
        super().__init__(ptr)
        self._backend = backend
        self._ctx = ctx

    @classmethod
    def memory(cls) -> "SecretStore":
        """A store in guarded memory, wiped when freed (tests, short sessions)."""
        out = c_void_p()
        check(lib.itsme_secret_store_new_memory(byref(out)), thread_last_error)
        return cls(new_handle(out))

    @classmethod
    def file(cls, directory: _Path) -> "SecretStore":
        """A store in ``directory``, one 0600 file per item.

        The directory (a str, bytes or path-like UTF-8 path) is created with
        mode 0700 if missing.  Raises :class:`SecretStoreError` if it cannot
        be created or is not a directory.
        """
        path = _directory_argument(directory)
        out = c_void_p()
        check(lib.itsme_secret_store_open_file(path, byref(out)), thread_last_error)
        return cls(new_handle(out))

    @classmethod
    def create_wrapped_file(cls, directory: _Path, passphrase: _Passphrase) -> "SecretStore":
        """Wraps a new, empty file store in ``directory`` under ``passphrase``.

        Every item is then sealed with ChaCha20-Poly1305 under a key Argon2id
        derives from the passphrase (256 MiB, about a second: this call and
        :meth:`open_wrapped_file` take that long); the wrap file is written
        beside the directory, named after it with ``.wrap`` appended
        (docs/STORAGE.md).  ``passphrase`` is 1 to
        :data:`PASSPHRASE_MAX_BYTES` bytes (a str is encoded as UTF-8); the
        copy handed to the library is wiped after the call, and a
        ``bytearray`` of yours you may wipe yourself.

        Raises :class:`InvalidArgumentError` (the path or the passphrase's
        length), :class:`AlreadyExistsError` (the store is wrapped already,
        or the directory holds items), :class:`SecretStoreError`,
        :class:`OutOfMemoryError`.
        """
        path = _directory_argument(directory)
        out = c_void_p()
        with _passphrase_argument(passphrase) as (data, length):
            check(lib.itsme_secret_store_create_file_passphrase(path, data, length, byref(out)), thread_last_error)
        return cls(new_handle(out))

    @classmethod
    def open_wrapped_file(cls, directory: _Path, passphrase: _Passphrase) -> "SecretStore":
        """Opens the file store in ``directory`` wrapped by ``passphrase``.

        Raises :class:`AuthenticationFailedError` for a wrong passphrase,
        :class:`NotFoundError` if the store is not wrapped (see
        :meth:`is_wrapped_file`), :class:`CorruptDataError` for a damaged
        wrap file, :class:`SecretStoreError`, :class:`InvalidArgumentError`,
        :class:`OutOfMemoryError`.
        """
        path = _directory_argument(directory)
        out = c_void_p()
        with _passphrase_argument(passphrase) as (data, length):
            check(lib.itsme_secret_store_open_file_passphrase(path, data, length, byref(out)), thread_last_error)
        return cls(new_handle(out))

    @staticmethod
    def is_wrapped_file(directory: _Path) -> bool:
        """Whether the file store in ``directory`` is wrapped by a passphrase
        (anything at its wrap file's path says so).  Reads no file."""
        path = _directory_argument(directory)
        wrapped = c_bool(False)
        check(lib.itsme_secret_store_is_passphrase_wrapped(path, byref(wrapped)), thread_last_error)
        return bool(wrapped.value)

    @classmethod
    def from_callbacks(cls, backend: SecretStoreBackend) -> "SecretStore":
        """A store whose items live wherever ``backend`` puts them.

        ``backend`` has ``get(name) -> bytes | None``,
        ``put(name, value: bytes, accessibility: int)`` and
        ``remove(name) -> bool`` (see :class:`SecretStoreBackend`).  It is
        kept alive until the library has released the store, that is until
        this object and every identity opened on it are closed.
        """
        for method in ("get", "put", "remove"):
            if not callable(getattr(backend, method, None)):
                raise TypeError(f"secret store backend has no {method}() method")
        ctx = next(_ctx_ids)
        _registry[ctx] = backend
        table = SecretStoreCallbacks(ctx=ctx, get=_GET, put=_PUT, remove=_REMOVE, destroy=_DESTROY)
        out = c_void_p()
        try:
            check(lib.itsme_secret_store_new_callbacks(byref(table), byref(out)), thread_last_error)
        except BaseException:
            _registry.pop(ctx, None)  # on failure the caller keeps ctx
            raise
        return cls(new_handle(out), backend, ctx)

    @property
    def backend(self) -> Optional[SecretStoreBackend]:
        """The Python object behind a :meth:`from_callbacks` store, else None."""
        return self._backend

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<SecretStore {state}>"
