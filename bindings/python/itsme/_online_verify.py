"""Online Verify through a relay room (``itsme_online_verify``),
docs/PROTOCOL.md section 11."""

from __future__ import annotations

import enum
from ctypes import byref, c_uint32
from typing import Optional, Union

from ._contacts import ContactStore, _wipe
from ._exchange import SHORT_CODE_SIZE
from ._ffi import lib
from ._handle import enum_or_int, read_text, unix_time
from ._profile import PROFILE_REFERENCE_BYTES, bytes_in, read_secret, wipe
from ._random import DeterministicRandom
from ._session import _WindowSession
from ._voice import CallBinding, VoiceOutcome, _call_binding

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
    #: The peer's device proved it holds the seed, but one of the two
    #: sessions is bound to a call and the other is not (docs/PROTOCOL.md
    #: 11.4).  Final; nothing recorded, no SAS.  Say so: verify again with
    #: both bound, or neither.
    BINDING_DIFFERS = 6
    #: The peer's device proved it holds the seed, but it is bound to
    #: another call than this one (11.4).  Final; nothing recorded, no SAS.
    #: Warn: the person on this call may not be the contact (someone may be
    #: relaying between two calls).
    OTHER_CALL = 7


class OnlineVerify(_WindowSession[OnlineVerifyState]):
    """One Online Verify session with a stored contact (``itsme_online_verify``).

    Two people who are apart let their devices prove, through a two-party
    relay room, that each holds the seed; the device tags are checked inside
    the encrypted session; both read the SAS aloud.  Here Alice's
    ``contacts`` and Bob's ``their_contacts`` run side by side at the fixed
    time ``now`` (a host passes None, or nothing, for the current time), and
    ``move`` stands for the relay room::

        >>> session = OnlineVerify(contacts, contact_id, now=now)   # the current window
        >>> bobs = OnlineVerify(their_contacts, their_id, now=now)  # on Bob's phone
        >>> session.room == bobs.room      # join it on the relay; no peer: try window - 1
        True
        >>> def move(a, b):
        ...     # send every message next_outgoing() gives, receive() every
        ...     # one that arrives, while the state is RUNNING
        ...     moved = True
        ...     while moved:
        ...         moved = False
        ...         for sender, receiver in ((a, b), (b, a)):
        ...             if message := sender.next_outgoing():
        ...                 receiver.receive(message, now)
        ...                 moved = True
        >>> move(session, bobs)
        >>> session.state
        <OnlineVerifyState.COMPARE_SAS: 2>
        >>> session.sas == bobs.sas                 # both read it aloud
        True
        >>> session.confirm(now)                    # or session.reject()
        <VoiceOutcome.VERIFIED: 1>

    With a profile (:class:`Profile`) shared inside the session, the peer
    gets its reference once it confirmed::

        >>> photo = b"\\xff\\xd8 a JPEG image"
        >>> mine = itsme.Profile.create(me, "Alice", photo, "alice.jpg")
        >>> session = OnlineVerify(contacts, contact_id, now=now)
        >>> session.share_profile(mine.reference)   # before the PROOF
        >>> bobs = OnlineVerify(their_contacts, their_id, now=now)
        >>> move(session, bobs)
        >>> bobs.confirm(now)
        <VoiceOutcome.VERIFIED: 1>
        >>> bobs.peer_profile() == mine.reference
        True

    A host that embeds ItsMe in the call itself binds the session to that
    call (``binding``, docs/PROTOCOL.md 11.4).  A peer bound differently
    ends the session, once its PROOF is checked, in ``BINDING_DIFFERS`` (one
    of the two is bound and the other is not) or ``OTHER_CALL`` (both are
    bound, to different calls: warn that the person on this call may not be
    the contact); both are final, record nothing and show no SAS.

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

    def __init__(
        self,
        store: ContactStore,
        contact_id: int,
        window: Optional[int] = None,
        now: Optional[int] = None,
        random: Optional[DeterministicRandom] = None,
        *,
        binding: CallBinding = None,
    ) -> None:
        """A session with contact ``contact_id`` of ``store`` in ``window``
        (``floor(now / 30)``, the default, or the one before, for a host
        that found no peer in the current one).  ``random`` (tests and
        vectors only) draws its ephemeral values.

        ``binding`` binds it to the host's own call:
        :data:`CALL_BINDING_MIN` to :data:`CALL_BINDING_MAX` bytes that
        both devices of the call hold, the same for the whole call, that the
        relay and the call's server never see (docs/PROTOCOL.md 20.1 says
        which values qualify); None: not bound.

        Raises :class:`NotFoundError` if there is no such contact,
        :class:`InvalidArgumentError` for another window, a binding of
        another length or a time out of range (the error's detail is the
        store's last error), ``TypeError`` for arguments of the wrong type.
        """
        buffer, length = _call_binding(binding)
        try:
            self._open(store, contact_id, window, now, random, (buffer, length))
        finally:
            if buffer is not None:
                _wipe(buffer)

    @property
    def state(self) -> OnlineVerifyState:
        """Where the session stands (:class:`OnlineVerifyState`): after
        each :meth:`receive`, ``RUNNING`` until the peer's PROOF is in, then
        ``COMPARE_SAS``, or ``BINDING_DIFFERS`` or ``OTHER_CALL`` when the
        two devices are bound differently."""
        return super().state

    @property
    def room(self) -> str:
        """The relay room's name: 32 lowercase hex digits.  The same on both
        devices for the same seed and window."""
        return self._read(read_text, lib.itsme_online_verify_room, ROOM_NAME_SIZE)

    def receive(self, data: Union[bytes, bytearray, memoryview], now: Optional[int] = None) -> None:
        """Feeds one message from the peer.  Check :attr:`state` after each:
        the peer's PROOF moves the session to ``COMPARE_SAS``, or (without
        an error) to ``BINDING_DIFFERS`` or ``OTHER_CALL`` when the two
        devices are bound differently.

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
        are checked; :class:`InvalidStateError` before, and in a session
        that failed or ended ``BINDING_DIFFERS`` or ``OTHER_CALL``."""
        return self._read(read_text, lib.itsme_online_verify_sas, SHORT_CODE_SIZE)

    def confirm(self, now: Optional[int] = None) -> VoiceOutcome:
        """The SAS matched: records the outcome on the contact in the
        session's store as voice verification does (``VERIFIED``,
        ``DEVICE_CHANGED`` or ``VERIFIED_TAG_UNCHECKED``) and returns it.

        Raises :class:`InvalidStateError` before the SAS exists, in a
        session that ended without one (``BINDING_DIFFERS``, ``OTHER_CALL``)
        or once the session finished, :class:`ExpiredError`.
        """
        outcome = c_uint32()
        self._call(lib.itsme_online_verify_confirm, unix_time(now), byref(outcome))
        return enum_or_int(VoiceOutcome, outcome.value)

    def reject(self) -> None:
        """The SAS differed, or the person gave up: nothing is recorded.
        :class:`InvalidStateError` once the session finished, failed or
        ended ``BINDING_DIFFERS`` or ``OTHER_CALL``."""
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
