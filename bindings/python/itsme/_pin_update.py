"""Security PIN Update in person (``itsme_pin_update``), docs/PROTOCOL.md
section 10.3."""

from __future__ import annotations

import enum
from ctypes import byref, c_uint32, c_void_p
from typing import Optional, Union

from ._contacts import ContactStore, _bytes_argument, _enum_or_int
from ._errors import check
from ._exchange import SHORT_CODE_SIZE, _contact_store
from ._ffi import lib
from ._handle import DetailedHandle, int_argument, read_bytes, read_text, unix_time
from ._online_verify import _window
from ._random import DeterministicRandom, use_random

__all__ = [
    "PIN_UPDATE_FRAME_MAX",
    "PinUpdate",
    "PinUpdateState",
]

#: Longest PIN Update frame, in bytes (``ITSME_PIN_UPDATE_FRAME_MAX``).
PIN_UPDATE_FRAME_MAX = 66

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class PinUpdateState(enum.IntEnum):
    """``itsme_pin_update_state`` (``ITSME_PIN_UPDATE_*``)."""

    #: Frames are still to be exchanged.
    RUNNING = 1
    #: This side has committed its new secret.  The initiator may still have
    #: DONE to send: keep sending what :meth:`PinUpdate.next_outgoing` gives.
    DONE = 2
    #: A frame was refused, or the time ran out.  Final: start a new update.
    FAILED = 3


class PinUpdate(DetailedHandle):
    """One Security PIN Update with a stored contact (``itsme_pin_update``).

    Two people together replace the device secrets of their contact; this
    restores a degraded contact::

        update = PinUpdate(contacts, contact_id)   # the current window
        print(update.session_code)                 # find the peer showing it
        # over Bluetooth: send every frame next_outgoing() gives, receive()
        # every one that arrives, until next_outgoing() gives b"" and the
        # state is DONE

    The update writes to the contact store as the protocol requires, so
    stopping at any point leaves both sides able to verify.  A failure is
    final: :attr:`state` is ``FAILED`` and later calls raise
    :class:`InvalidStateError`.  An update expires 10 minutes after its
    creation (:class:`ExpiredError`).  Times are unix seconds; None means
    now.

    The update keeps its contact store alive.  Not for use by two threads at
    once (calls on one update are serialised by a lock).  Closing it wipes
    its secrets.
    """

    _kind = "PIN update"
    _free_function = lib.itsme_pin_update_free
    _last_error_name = "itsme_pin_update_last_error"

    def __init__(
        self,
        store: ContactStore,
        contact_id: int,
        window: Optional[int] = None,
        now: Optional[int] = None,
        random: Optional[DeterministicRandom] = None,
    ) -> None:
        """Starts an update with contact ``contact_id`` of ``store`` in
        ``window``: ``floor(now / 30)`` (the default) or the one before, for
        a host that found no peer with the current session code.

        ``random`` (tests and vectors only) draws the ephemeral key and the
        new device secret.  Raises :class:`NotFoundError` if there is no
        such contact and :class:`InvalidArgumentError` for another window;
        the error's detail is the store's last error.
        """
        store = _contact_store(store)
        contact_id = int_argument(contact_id, "contact id", _INT64_MIN, _INT64_MAX)
        when = unix_time(now)
        window = _window(window, when)
        out = c_void_p()
        with use_random(random) as rng, store._use() as store_ptr:
            check(
                lib.itsme_pin_update_new(store_ptr, contact_id, window, rng, when, byref(out)),
                lambda: ContactStore._detail(store_ptr),
            )
        super().__init__(out.value)
        # The C update holds its store; the Python object is kept too, so
        # that it is not collected (and closed) while the update lives.
        self._store = store
        self._contact_id = contact_id
        self._window = window

    @property
    def store(self) -> ContactStore:
        """The contact store the update was started on."""
        return self._store

    @property
    def contact_id(self) -> int:
        """The contact whose device secrets the update replaces."""
        return self._contact_id

    @property
    def window(self) -> int:
        """The window of the session code."""
        return self._window

    @property
    def state(self) -> PinUpdateState:
        """Where the update stands on this side (:class:`PinUpdateState`)."""
        state = c_uint32()
        self._call(lib.itsme_pin_update_status, byref(state))
        return _enum_or_int(PinUpdateState, state.value)

    @property
    def session_code(self) -> str:
        """The session code both devices show (``"ECHO 0042"``), from the
        seed and the window."""
        return self._read(read_text, lib.itsme_pin_update_session_code, SHORT_CODE_SIZE)

    def next_outgoing(self) -> bytes:
        """The next frame to send to the peer, removed from the queue;
        ``b""`` when there is none."""
        return self._read(read_bytes, lib.itsme_pin_update_next_outgoing, PIN_UPDATE_FRAME_MAX)

    def receive(self, data: Union[bytes, bytearray, memoryview], now: Optional[int] = None) -> None:
        """Feeds one frame from the peer; stores the new device secrets when
        the protocol says so.

        Raises :class:`InvalidStateError` once the update failed or is done
        on this side, and, ending the update as failed:
        :class:`MalformedMessageError`, :class:`AuthenticationFailedError`
        (a tampered frame, or a peer without the seed),
        :class:`InvalidKeyError` (a reflected key), :class:`ExpiredError`.
        """
        when = unix_time(now)
        buffer, length = _bytes_argument(data, "data")
        self._call(lib.itsme_pin_update_receive, buffer, length, when)

    def __repr__(self) -> str:
        if self.closed:
            return "<PinUpdate closed>"
        state = self.state
        name = getattr(state, "name", str(state))
        return f"<PinUpdate contact={self._contact_id} window={self._window} {name}>"
