"""Online Verify through a relay room (``itsme_online_verify``),
docs/PROTOCOL.md section 11."""

from __future__ import annotations

import enum
from ctypes import byref, c_uint32, c_void_p
from typing import Optional, Union

from ._contacts import ContactStore, _bytes_argument, _enum_or_int
from ._errors import check
from ._exchange import SHORT_CODE_SIZE, _contact_store
from ._ffi import lib
from ._handle import DetailedHandle, int_argument, read_bytes, read_text, unix_time
from ._random import DeterministicRandom, use_random
from ._voice import VoiceOutcome

__all__ = [
    "ONLINE_VERIFY_MESSAGE_MAX",
    "ROOM_NAME_SIZE",
    "OnlineVerify",
    "OnlineVerifyState",
]

#: Buffer size for a room name: 32 hex digits and the NUL (``ITSME_ROOM_NAME_SIZE``).
ROOM_NAME_SIZE = 33
#: Longest Online Verify message, in bytes (``ITSME_ONLINE_VERIFY_MESSAGE_MAX``).
ONLINE_VERIFY_MESSAGE_MAX = 82

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# Seconds in a window.
_WINDOW_SECONDS = 30


class OnlineVerifyState(enum.IntEnum):
    """``itsme_online_verify_state`` (``ITSME_ONLINE_VERIFY_*``)."""

    #: Messages are still to be exchanged.
    RUNNING = 1
    #: Both proofs are checked: show the SAS for the two people to read aloud.
    COMPARE_SAS = 2
    CONFIRMED = 3
    REJECTED = 4
    #: A message was refused, or the time ran out.  Final: start a new session.
    FAILED = 5


def _window(window: Optional[int], now: int) -> int:
    """The window argument: the given one, or ``floor(now / 30)``."""
    if window is None:
        return now // _WINDOW_SECONDS
    return int_argument(window, "window", _INT64_MIN, _INT64_MAX)


class OnlineVerify(DetailedHandle):
    """One Online Verify session with a stored contact (``itsme_online_verify``).

    Two people who are apart let their devices prove, through a two-party
    relay room, that each holds the seed; the device tags are checked inside
    the encrypted session; both read the SAS aloud::

        session = OnlineVerify(contacts, contact_id)   # the current window
        join_relay_room(session.room)                  # no peer: try window - 1
        # send every message next_outgoing() gives, receive() every one that
        # arrives, until session.state is COMPARE_SAS
        print(session.sas)                             # both read it aloud
        outcome = session.confirm(contacts)            # or session.reject()

    No window is used up.  A failure is final: :attr:`state` is ``FAILED``
    and later calls raise :class:`InvalidStateError`.  A session expires 10
    minutes after its creation (:class:`ExpiredError`).  Times are unix
    seconds; None means now.

    The session keeps its contact store alive.  Not for use by two threads
    at once (calls on one session are serialised by a lock).  Closing it
    wipes its secrets.
    """

    _kind = "online verify session"
    _free_function = lib.itsme_online_verify_free
    _last_error_name = "itsme_online_verify_last_error"

    def __init__(
        self,
        store: ContactStore,
        contact_id: int,
        window: Optional[int] = None,
        now: Optional[int] = None,
        random: Optional[DeterministicRandom] = None,
    ) -> None:
        """Starts a session with contact ``contact_id`` of ``store`` in the
        room of ``window``: ``floor(now / 30)`` (the default) or the one
        before, for a host that found no peer in the current room.

        ``random`` (tests and vectors only) draws the ephemeral key and the
        challenge.  Raises :class:`NotFoundError` if there is no such
        contact and :class:`InvalidArgumentError` for another window; the
        error's detail is the store's last error.
        """
        store = _contact_store(store)
        contact_id = int_argument(contact_id, "contact id", _INT64_MIN, _INT64_MAX)
        when = unix_time(now)
        window = _window(window, when)
        out = c_void_p()
        with use_random(random) as rng, store._use() as store_ptr:
            check(
                lib.itsme_online_verify_new(store_ptr, contact_id, window, rng, when, byref(out)),
                lambda: ContactStore._detail(store_ptr),
            )
        super().__init__(out.value)
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
        """The contact the session verifies."""
        return self._contact_id

    @property
    def window(self) -> int:
        """The window whose room the session uses."""
        return self._window

    @property
    def state(self) -> OnlineVerifyState:
        """Where the session stands (:class:`OnlineVerifyState`)."""
        state = c_uint32()
        self._call(lib.itsme_online_verify_status, byref(state))
        return _enum_or_int(OnlineVerifyState, state.value)

    @property
    def room(self) -> str:
        """The relay room's name: 32 lowercase hex digits.  The same on both
        devices for the same seed and window."""
        return self._read(read_text, lib.itsme_online_verify_room, ROOM_NAME_SIZE)

    def next_outgoing(self) -> bytes:
        """The next message to send to the peer, removed from the queue;
        ``b""`` when there is none."""
        return self._read(read_bytes, lib.itsme_online_verify_next_outgoing, ONLINE_VERIFY_MESSAGE_MAX)

    def receive(self, data: Union[bytes, bytearray, memoryview], now: Optional[int] = None) -> None:
        """Feeds one message from the peer.

        Raises :class:`InvalidStateError` once the session failed or its
        messages are complete, and, ending the session as failed:
        :class:`MalformedMessageError` (malformed, out of order, received
        twice), :class:`AuthenticationFailedError` (a commitment, tag or
        proof is wrong: not the person, or a tampered or replayed message),
        :class:`InvalidKeyError` (a reflected key or challenge, a low-order
        key), :class:`ExpiredError`.
        """
        when = unix_time(now)
        buffer, length = _bytes_argument(data, "data")
        self._call(lib.itsme_online_verify_receive, buffer, length, when)

    @property
    def sas(self) -> str:
        """The SAS both people read aloud (``"ECHO 0042"``), once both proofs
        are checked; :class:`InvalidStateError` before."""
        return self._read(read_text, lib.itsme_online_verify_sas, SHORT_CODE_SIZE)

    def confirm(self, store: ContactStore, now: Optional[int] = None) -> VoiceOutcome:
        """The SAS matched: records the outcome on the contact in ``store``
        as voice verification does (``VERIFIED``, ``DEVICE_CHANGED`` or
        ``VERIFIED_TAG_UNCHECKED``) and returns it.

        Raises :class:`InvalidStateError` before the SAS exists or once the
        session finished, :class:`InvalidArgumentError` for another store
        than the session's, :class:`ExpiredError`.
        """
        store = _contact_store(store)
        when = unix_time(now)
        outcome = c_uint32()
        with self._use() as ptr, store._use() as store_ptr:
            check(
                lib.itsme_online_verify_confirm(ptr, store_ptr, when, byref(outcome)),
                lambda: self._detail(ptr),
            )
        return _enum_or_int(VoiceOutcome, outcome.value)

    def reject(self) -> None:
        """The SAS differed, or the person gave up: nothing is recorded.
        :class:`InvalidStateError` once the session finished or failed."""
        self._call(lib.itsme_online_verify_reject)

    def __repr__(self) -> str:
        if self.closed:
            return "<OnlineVerify closed>"
        state = self.state
        name = getattr(state, "name", str(state))
        return f"<OnlineVerify contact={self._contact_id} window={self._window} {name}>"
