"""Security PIN Update in person (``itsme_pin_update``), docs/PROTOCOL.md
section 10.3."""

from __future__ import annotations

import enum
from typing import Optional, Union

from ._exchange import SHORT_CODE_SIZE
from ._ffi import lib
from ._handle import read_text
from ._session import _WindowSession

__all__ = [
    "PIN_UPDATE_FRAME_MAX",
    "PinUpdate",
    "PinUpdateState",
]

#: Longest PIN Update frame, in bytes (``ITSME_PIN_UPDATE_FRAME_MAX``).
PIN_UPDATE_FRAME_MAX = 66



class PinUpdateState(enum.IntEnum):
    """``itsme_pin_update_state`` (``ITSME_PIN_UPDATE_*``)."""

    #: Frames are still to be exchanged.
    RUNNING = 1
    #: This side has committed its new secret.  The initiator may still have
    #: DONE to send: keep sending what :meth:`PinUpdate.next_outgoing` gives.
    DONE = 2
    #: A frame was refused, or the time ran out.  Final: start a new update.
    FAILED = 3


class PinUpdate(_WindowSession[PinUpdateState]):
    """One Security PIN Update with a stored contact (``itsme_pin_update``).

    Two people together replace the device secrets of their contact; this
    restores a degraded contact.  Here Alice's ``contacts`` and Bob's
    ``their_contacts`` run side by side at the fixed time ``now`` (a host
    passes None, or nothing, for the current time)::

        >>> update = PinUpdate(contacts, contact_id, now=now)   # the current window
        >>> bobs = PinUpdate(their_contacts, their_id, now=now)
        >>> update.session_code == bobs.session_code  # find the peer showing it
        True

    Over Bluetooth, send every frame :meth:`next_outgoing` gives and
    :meth:`receive` every one that arrives, until :meth:`next_outgoing`
    gives ``b""`` and the state is ``DONE``::

        >>> moved = True
        >>> while moved:
        ...     moved = False
        ...     for sender, receiver in ((update, bobs), (bobs, update)):
        ...         if frame := sender.next_outgoing():
        ...             receiver.receive(frame, now)
        ...             moved = True
        >>> update.state, bobs.state
        (<PinUpdateState.DONE: 2>, <PinUpdateState.DONE: 2>)

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
    _new_function = lib.itsme_pin_update_new
    _status_function = lib.itsme_pin_update_status
    _next_function = lib.itsme_pin_update_next_outgoing
    _receive_function = lib.itsme_pin_update_receive
    _state_enum = PinUpdateState
    _message_max = PIN_UPDATE_FRAME_MAX

    @property
    def state(self) -> PinUpdateState:
        """Where the update stands on this side (:class:`PinUpdateState`)."""
        return super().state

    @property
    def session_code(self) -> str:
        """The session code both devices show (``"ECHO 0042"``), from the
        seed and the window."""
        return self._read(read_text, lib.itsme_pin_update_session_code, SHORT_CODE_SIZE)

    def receive(self, data: Union[bytes, bytearray, memoryview], now: Optional[int] = None) -> None:
        """Feeds one frame from the peer; stores the new device secrets when
        the protocol says so, before the frame that follows them is queued.

        Raises :class:`InvalidStateError` once the update failed or is done
        on this side, :class:`DatabaseError` when a write failed (nothing
        changed: feed the same frame again), and, ending the update as
        failed:
        :class:`MalformedMessageError`, :class:`AuthenticationFailedError`
        (a tampered frame, or a peer without the seed),
        :class:`InvalidKeyError` (a reflected key), :class:`ExpiredError`.
        """
        super().receive(data, now)

    def __repr__(self) -> str:
        if self.closed:
            return "<PinUpdate closed>"
        state = self.state
        name = getattr(state, "name", str(state))
        return f"<PinUpdate contact={self._contact_id} window={self._window} {name}>"
