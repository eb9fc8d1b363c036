"""Online Verify through a relay room (``itsme_online_verify``),
docs/PROTOCOL.md section 11."""

from __future__ import annotations

import enum
from ctypes import byref, c_uint32
from typing import Optional, Union

from ._exchange import SHORT_CODE_SIZE
from ._ffi import lib
from ._handle import enum_or_int, read_text, unix_time
from ._profile import PROFILE_REFERENCE_BYTES, bytes_in, read_secret, wipe
from ._session import _WindowSession
from ._voice import VoiceOutcome

__all__ = [
    "ONLINE_VERIFY_MESSAGE_MAX",
    "ROOM_NAME_SIZE",
    "OnlineVerify",
    "OnlineVerifyState",
]

#: Buffer size for a room name: 32 hex digits and the NUL (``ITSME_ROOM_NAME_SIZE``).
ROOM_NAME_SIZE = 33
#: Longest Online Verify message, in bytes: a PROOF carrying a profile
#: reference (``ITSME_ONLINE_VERIFY_MESSAGE_MAX``).
ONLINE_VERIFY_MESSAGE_MAX = 114


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


class OnlineVerify(_WindowSession[OnlineVerifyState]):
    """One Online Verify session with a stored contact (``itsme_online_verify``).

    Two people who are apart let their devices prove, through a two-party
    relay room, that each holds the seed; the device tags are checked inside
    the encrypted session; both read the SAS aloud::

        session = OnlineVerify(contacts, contact_id)   # the current window
        session.share_profile(profile.reference)       # optional, before the PROOF
        join_relay_room(session.room)                  # no peer: try window - 1
        # send every message next_outgoing() gives, receive() every one that
        # arrives, until session.state is COMPARE_SAS
        print(session.sas)                             # both read it aloud
        outcome = session.confirm(contacts)            # or session.reject()
        reference = session.peer_profile()             # if the peer shared one

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
    _new_function = lib.itsme_online_verify_new
    _status_function = lib.itsme_online_verify_status
    _next_function = lib.itsme_online_verify_next_outgoing
    _receive_function = lib.itsme_online_verify_receive
    _state_enum = OnlineVerifyState
    _message_max = ONLINE_VERIFY_MESSAGE_MAX

    @property
    def state(self) -> OnlineVerifyState:
        """Where the session stands (:class:`OnlineVerifyState`)."""
        return super().state

    @property
    def room(self) -> str:
        """The relay room's name: 32 lowercase hex digits.  The same on both
        devices for the same seed and window."""
        return self._read(read_text, lib.itsme_online_verify_room, ROOM_NAME_SIZE)

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
        super().receive(data, now)

    @property
    def sas(self) -> str:
        """The SAS both people read aloud (``"ECHO 0042"``), once both proofs
        are checked; :class:`InvalidStateError` before."""
        return self._read(read_text, lib.itsme_online_verify_sas, SHORT_CODE_SIZE)

    def confirm(self, now: Optional[int] = None) -> VoiceOutcome:
        """The SAS matched: records the outcome on the contact in the
        session's store as voice verification does (``VERIFIED``,
        ``DEVICE_CHANGED`` or ``VERIFIED_TAG_UNCHECKED``) and returns it.

        Raises :class:`InvalidStateError` before the SAS exists or once the
        session finished, :class:`ExpiredError`.
        """
        outcome = c_uint32()
        self._call(lib.itsme_online_verify_confirm, unix_time(now), byref(outcome))
        return enum_or_int(VoiceOutcome, outcome.value)

    def reject(self) -> None:
        """The SAS differed, or the person gave up: nothing is recorded.
        :class:`InvalidStateError` once the session finished or failed."""
        self._call(lib.itsme_online_verify_reject)

    def share_profile(self, reference: bytes) -> None:
        """Sends the reference of this person's profile record
        (:attr:`Profile.reference`, :data:`PROFILE_REFERENCE_BYTES`) inside
        this session's PROOF, encrypted for the peer (docs/PROTOCOL.md 11.3).

        Call it before the PROOF is made, that is before receiving the peer's
        KEY message: right after creating the session is safe.  Calling it
        again replaces the reference.  Raises :class:`InvalidArgumentError`
        for a reference of another size and :class:`InvalidStateError` once
        the PROOF is made or the session failed.
        """
        buffer, length = bytes_in(reference, "reference")
        try:
            self._call(lib.itsme_online_verify_share_profile, buffer, length)
        finally:
            wipe(buffer)

    def peer_profile(self) -> bytes:
        """The profile reference the peer sent in its PROOF, once the SAS is
        confirmed (``CONFIRMED``): fetch the record it names
        (``reference[:16].hex()``) and open it with :meth:`Profile.open`.  A
        secret.  Raises :class:`InvalidStateError` before the SAS is
        confirmed and :class:`NotFoundError` if the peer sent none."""
        with self._use() as ptr:
            return read_secret(
                lambda buf, cap, out_len: lib.itsme_online_verify_peer_profile(ptr, buf, cap, out_len),
                PROFILE_REFERENCE_BYTES,
                lambda: self._detail(ptr),
            )

    def __repr__(self) -> str:
        if self.closed:
            return "<OnlineVerify closed>"
        state = self.state
        name = getattr(state, "name", str(state))
        return f"<OnlineVerify contact={self._contact_id} window={self._window} {name}>"
