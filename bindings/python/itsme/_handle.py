"""Shared machinery of the safe wrappers: handles, buffers and arguments."""

from __future__ import annotations

import ctypes
import enum
import operator
import threading
import time
from contextlib import contextmanager
from ctypes import byref, c_size_t, c_uint8, c_void_p
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Tuple, Type, TypeVar, Union, cast

from ._errors import InvalidArgumentError, ItsMeError, Result, check
from ._ffi import lib

if TYPE_CHECKING:
    from ctypes import Array, _CArgObject

# A C call that fills (buf, cap, out_len) and returns a result code: buf is
# a char or uint8_t array of cap elements, out_len a byref(c_size_t).
BufferCall = Callable[[Union["Array[ctypes.c_char]", "Array[c_uint8]"], int, "_CArgObject"], int]
# The detail of a failure, read after it (a handle's last error).
Detail = Callable[[], str]

_Buffer = TypeVar("_Buffer", "Array[ctypes.c_char]", "Array[c_uint8]")
_T = TypeVar("_T")
_H = TypeVar("_H", bound="Handle")
_E = TypeVar("_E", bound=enum.IntEnum)

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
# How many times a buffer read grows its buffer before giving up.
_BUFFER_ATTEMPTS = 4


def _text_buffer(cap: int) -> Array[ctypes.c_char]:
    return ctypes.create_string_buffer(cap)


def _byte_buffer(cap: int) -> Array[c_uint8]:
    return (c_uint8 * cap)()


def _fill(call: BufferCall, guess: int, new_buffer: Callable[[int], _Buffer]) -> Tuple[int, _Buffer, int]:
    """Runs ``call`` with the too-small protocol, in buffers ``new_buffer``
    makes (of a char or a uint8_t array).

    Returns (result code, buffer, *out_len) of the last call.
    """
    cap = max(guess, 1)
    for _ in range(_BUFFER_ATTEMPTS):
        buf = new_buffer(cap)
        out_len = c_size_t(0)
        code = call(buf, cap, byref(out_len))
        if code == Result.ITSME_E_BUFFER_TOO_SMALL and out_len.value > cap:
            cap = out_len.value
            continue
        return code, buf, out_len.value
    return code, buf, out_len.value


def read_text(call: BufferCall, guess: int, detail: Optional[Detail] = None) -> str:
    """Reads a NUL-terminated UTF-8 output, growing the buffer as told."""
    code, buf, length = _fill(call, guess, _text_buffer)
    check(code, detail)
    raw = buf.raw
    if not 1 <= length <= len(raw) or raw[length - 1] != 0:
        raise ItsMeError(Result.ITSME_E_INTERNAL, f"library reported a text length of {length}")
    try:
        return raw[: length - 1].decode("utf-8")
    except UnicodeDecodeError as error:
        raise ItsMeError(Result.ITSME_E_INTERNAL, "library returned invalid UTF-8") from error


def read_bytes(call: BufferCall, guess: int, detail: Optional[Detail] = None) -> bytes:
    """Reads a byte-string output, growing the buffer as told."""
    code, buf, length = _fill(call, guess, _byte_buffer)
    check(code, detail)
    if length > len(buf):
        raise ItsMeError(Result.ITSME_E_INTERNAL, f"library reported a length of {length}")
    return bytes(buf[:length])


def read_detail(call: BufferCall) -> str:
    """Reads a last-error message; an empty string if that fails."""
    try:
        code, buf, length = _fill(call, 256, _text_buffer)
        if code != Result.ITSME_OK or not 1 <= length <= len(buf.raw):
            return ""
        return buf.raw[: length - 1].decode("utf-8", "replace")
    except Exception:
        return ""


def thread_last_error() -> str:
    """The detail of this thread's last failed call, whatever handle it was
    given (itsme_last_error)."""
    return read_detail(lib.itsme_last_error)


def enum_or_int(kind: Type[_E], value: int) -> _E:
    """A member of ``kind``, or the plain int for a value a newer library
    added.

    Typed as the enum, as the standard library's ``socket.family`` (converted
    the same way) is: such an int compares and hashes as a member of its
    value would; only the member's attributes (``name``) are missing.
    """
    try:
        return kind(value)
    except ValueError:
        return cast(_E, value)


def new_handle(out: c_void_p) -> int:
    """The handle a successful constructor wrote to ``out``.

    The header promises a handle on success; a NULL one is the library's
    fault (``ITSME_E_INTERNAL``), never a closed wrapper.
    """
    if out.value is None:
        raise ItsMeError(Result.ITSME_E_INTERNAL, "library returned no handle")
    return out.value


def encode_text(value: str, what: str) -> bytes:
    """A text argument as NUL-terminated UTF-8 bytes for the C side."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be str, not {type(value).__name__}")
    if "\0" in value:
        raise InvalidArgumentError(Result.ITSME_E_INVALID_ARGUMENT, f"{what} contains a NUL character")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidArgumentError(Result.ITSME_E_INVALID_ARGUMENT, f"{what} is not valid Unicode") from error


def int_argument(value: int, what: str, low: int, high: int) -> int:
    """An integer argument checked against its C type's range.

    ctypes would silently wrap a value out of range (``2**64 + 1`` passed as
    an ``int64_t`` arrives as 1), so such values are refused here.
    """
    value = operator.index(value)
    if not low <= value <= high:
        raise InvalidArgumentError(Result.ITSME_E_INVALID_ARGUMENT, f"{what} is out of range")
    return value


def unix_time(now: Optional[int]) -> int:
    """A ``now`` argument: the given unix seconds, or the current time."""
    if now is None:
        return int(time.time())
    now = operator.index(now)
    if not _INT64_MIN <= now <= _INT64_MAX:
        raise InvalidArgumentError(Result.ITSME_E_INVALID_ARGUMENT, "time is out of the int64 range")
    return now


class Handle:
    """An owned C handle, freed by :meth:`close`, ``with`` or garbage collection.

    Calls on the handle and its release are serialised by a lock, so closing
    from another thread cannot free the handle under a running call (the
    lock is not what pairs a call with its failure's detail: that is read
    from the calling thread's slot).
    """

    _kind = "handle"
    _ptr: Optional[int] = None
    # Set by subclasses to the C function that frees their handle.
    _free_function: Callable[[Optional[int]], None]

    def __init__(self, ptr: int) -> None:
        self._lock = threading.RLock()
        self._ptr = ptr

    @property
    def closed(self) -> bool:
        """Whether the handle has been released."""
        return self._ptr is None

    def close(self) -> None:
        """Releases the handle.  Safe to call more than once."""
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        with lock:
            ptr, self._ptr = self._ptr, None
            if ptr:
                type(self)._free_function(ptr)

    @contextmanager
    def _use(self) -> Iterator[int]:
        """The live handle pointer, held for the duration of one call."""
        with self._lock:
            if self._ptr is None:
                raise ValueError(f"operation on a closed {self._kind}")
            yield self._ptr

    def __enter__(self: _H) -> _H:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class DetailedHandle(Handle):
    """A handle whose C type keeps a last-error message (:meth:`last_error`).
    A failed call's detail is read from the calling thread's slot, which
    every failure sets."""

    # Set by subclasses to the name of their C *_last_error function.
    _last_error_name: str

    def last_error(self) -> str:
        """The detail of the last failed call made on this handle."""
        function = getattr(lib, self._last_error_name)
        with self._use() as ptr:
            return read_detail(lambda buf, cap, out_len: function(ptr, buf, cap, out_len))

    @classmethod
    def _detail(cls, ptr: int) -> str:
        """The detail of the call that just failed on this thread (on the
        handle ``ptr`` or any other)."""
        return thread_last_error()

    def _call(self, function: Callable[..., int], *args: Any) -> None:
        with self._use() as ptr:
            check(function(ptr, *args), lambda: self._detail(ptr))

    def _read(
        self,
        reader: Callable[[BufferCall, int, Optional[Detail]], _T],
        function: Callable[..., int],
        guess: int,
    ) -> _T:
        with self._use() as ptr:
            return reader(
                lambda buf, cap, out_len: function(ptr, buf, cap, out_len),
                guess,
                lambda: self._detail(ptr),
            )
