"""What Online Verify and Security PIN Update share: a session on a stored
contact, in a window, that moves opaque messages with its peer."""

from __future__ import annotations

import enum
from ctypes import byref, c_int64, c_uint32, c_void_p
from typing import Any, Callable, Generic, Optional, Tuple, Type, TypeVar, Union

from ._contacts import ContactStore, _bytes_argument
from ._errors import check
from ._exchange import _contact_store
from ._ffi import lib
from ._handle import DetailedHandle, enum_or_int, int_argument, new_handle, read_bytes, thread_last_error, unix_time
from ._random import DeterministicRandom, use_random

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# The state enum of a session type.
_S = TypeVar("_S", bound=enum.IntEnum)


def window_of(now: Optional[int] = None) -> int:
    """The window of ``now`` (Unix seconds, default the current time):
    ``floor(now / 30)``, computed by the library (``itsme_window_of``), the
    one place that does this arithmetic.  Raises
    :class:`InvalidArgumentError` for a time before 1970 or after 9999."""
    out = c_int64()
    check(lib.itsme_window_of(unix_time(now), byref(out)), thread_last_error)
    return out.value


def _window(window: Optional[int], now: int) -> int:
    """The window argument: the given one, or the window of ``now``."""
    if window is None:
        return window_of(now)
    return int_argument(window, "window", _INT64_MIN, _INT64_MAX)


class _WindowSession(DetailedHandle, Generic[_S]):
    """A session with contact ``contact_id`` of ``store`` in ``window``
    (``floor(now / 30)``, the default, or the one before, for a host that
    found no peer in the current one).  ``random`` (tests and vectors only)
    draws its ephemeral values.  Raises :class:`NotFoundError` if there is
    no such contact and :class:`InvalidArgumentError` for another window;
    the error's detail is the store's last error."""

    # Set by subclasses: the C functions and sizes of the session type.
    _new_function: Callable[..., int]
    _status_function: Callable[..., int]
    _next_function: Callable[..., int]
    _receive_function: Callable[..., int]
    _state_enum: Type[_S]
    _message_max: int

    def __init__(
        self,
        store: ContactStore,
        contact_id: int,
        window: Optional[int] = None,
        now: Optional[int] = None,
        random: Optional[DeterministicRandom] = None,
    ) -> None:
        self._open(store, contact_id, window, now, random)

    def _open(
        self,
        store: ContactStore,
        contact_id: int,
        window: Optional[int],
        now: Optional[int],
        random: Optional[DeterministicRandom],
        extra: Tuple[Any, ...] = (),
    ) -> None:
        """Makes the C session; ``extra`` are the arguments the subclass's
        ``_new_function`` takes between the window and the random source
        (Online Verify's call binding)."""
        store = _contact_store(store)
        contact_id = int_argument(contact_id, "contact id", _INT64_MIN, _INT64_MAX)
        when = unix_time(now)
        window = _window(window, when)
        out = c_void_p()
        with use_random(random) as rng, store._use() as store_ptr:
            check(
                type(self)._new_function(store_ptr, contact_id, window, *extra, rng, when, byref(out)),
                lambda: ContactStore._detail(store_ptr),
            )
        super().__init__(new_handle(out))
        # The C session holds its store; the Python object is kept too, so
        # that it is not collected (and closed) while the session lives.
        self._store = store
        self._contact_id = contact_id
        self._window = window

    @property
    def store(self) -> ContactStore:
        """The contact store the session was started on."""
        return self._store

    @property
    def contact_id(self) -> int:
        """The contact the session is with."""
        return self._contact_id

    @property
    def window(self) -> int:
        """The session's window."""
        return self._window

    @property
    def state(self) -> _S:
        """Where the session stands on this side."""
        state = c_uint32()
        self._call(type(self)._status_function, byref(state))
        return enum_or_int(self._state_enum, state.value)

    def next_outgoing(self) -> bytes:
        """The next message to send to the peer, removed from the queue;
        ``b""`` when there is none."""
        return self._read(read_bytes, type(self)._next_function, self._message_max)

    def receive(self, data: Union[bytes, bytearray, memoryview], now: Optional[int] = None) -> None:
        """Feeds one message from the peer (errors: see the subclass)."""
        when = unix_time(now)
        buffer, length = _bytes_argument(data, "data")
        self._call(type(self)._receive_function, buffer, length, when)
