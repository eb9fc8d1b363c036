"""The roll call (``itsme_rollcall``), docs/PROTOCOL.md section 20: everyone
on a conference call checks at once which participants are contacts whose
devices hold the seed exchanged with them."""

from __future__ import annotations

import collections.abc
import enum
from ctypes import byref, c_bool, c_size_t, c_uint32, c_void_p
from dataclasses import dataclass
from typing import Iterable, List, Optional, Union

from ._contacts import ContactStore, _bytes_argument, _wipe
from ._errors import check
from ._exchange import REMOTE_CODE_SIZE, _contact_store
from ._ffi import RollCallParticipantStruct, lib
from ._handle import (
    DetailedHandle,
    encode_text,
    enum_or_int,
    int_argument,
    new_handle,
    read_bytes,
    read_text,
    thread_last_error,
    unix_time,
)
from ._online_verify import ROOM_NAME_SIZE
from ._random import DeterministicRandom, use_random
from ._voice import VOICE_CODE_SIZE, CallBinding, _call_binding

__all__ = [
    "ROLLCALL_MESSAGE_MAX",
    "ROLLCALL_ROSTER_BYTES",
    "RollCall",
    "RollCallParticipant",
    "RollCallPhase",
    "RollCallState",
    "new_meeting_code",
]

#: Longest roll-call message, in bytes: a HELLO of 2048 presence tags,
#: 133 + 16 * 2048 (a VIEW is at most 3351 bytes, a SAID 2581)
#: (``ITSME_ROLLCALL_MESSAGE_MAX``).
ROLLCALL_MESSAGE_MAX = 32901
#: A roster hash, in bytes (``ITSME_ROLLCALL_ROSTER_BYTES``).
ROLLCALL_ROSTER_BYTES = 32

# A relay slot in itsme_rollcall_joined's list: 2 bytes, big-endian
# (ITSME_ROLLCALL_SLOT_BYTES).
_SLOT_BYTES = 2
_SLOT_MAX = 0xFFFF
_SIZE_MAX = 2**64 - 1


class RollCallPhase(enum.IntEnum):
    """``itsme_rollcall_phase`` (``ITSME_ROLLCALL_PHASE_*``): where the roll
    call stands on this device."""

    #: Participants arrive; this round's roster is not confirmed.
    GATHERING = 1
    #: The roster is confirmed: read :attr:`RollCall.code` aloud, then
    #: :meth:`RollCall.confirm_said`.
    CONFIRMED = 2
    #: This device's sealed codes went out for this round.
    SAID = 3
    #: The lifetime (10 minutes) passed: final.
    EXPIRED = 4


class RollCallState(enum.IntEnum):
    """``itsme_rollcall_state`` (``ITSME_ROLLCALL_STATE_*``): a participant's
    state as shown beside it (docs/PROTOCOL.md 20.5)."""

    #: A contact whose code is not checked yet.
    NOT_YET = 1
    #: The code heard is the one their device sealed, from the device known.
    VERIFIED = 2
    #: The code heard is not the one their device sealed (type it again:
    #: three times in a round at most).
    WRONG = 3
    #: The code matched, from another device than the one known: their
    #: device changed.
    DEVICE_CHANGED = 4
    #: The code matched; no device secret of theirs is known here.
    VERIFIED_TAG_UNCHECKED = 5
    #: Their sealed code of this round did not open: their own device
    #: signed a code not sealed for this one (a faulty or malicious device;
    #: a code changed on the way fails its signature and changes nothing).
    #: Neither verified nor wrong.
    REFUSED = 6
    #: This device, or a device that holds no seed with this one.
    UNKNOWN = 7
    #: One of the two devices binds the roll call to its call and the other
    #: does not: nothing can be checked between them (have the other start
    #: the roll call from the call).
    BINDING_DIFFERS = 8
    #: Both devices bind the roll call to a call, and the calls differ: a
    #: device in another call.
    OTHER_CALL = 9


@dataclass(frozen=True)
class RollCallParticipant:
    """One device of the roll call as this device sees it."""

    #: 0 for this device; the others in the order they became present.
    index: int
    #: The relay slot it speaks from (None for this device).
    slot: Optional[int]
    #: The contact it is (None for this device and for a device that is not
    #: a contact, or whose binding differs).
    contact_id: Optional[int]
    state: RollCallState
    #: It is not present now (its connection left; it may come back under
    #: the same place).
    left: bool
    #: Its device holds the same roster as this one (always for this
    #: device): show the others as "not agreeing yet".
    agrees: bool


def new_meeting_code(random: Optional[DeterministicRandom] = None) -> str:
    """A new meeting code, as shown (``"ABCD-EFGH"``), to share on the call:
    the form of an invite code (docs/PROTOCOL.md 16.1), drawn from
    ``random`` (tests only; None: the operating system).  Check what a person
    typed with :func:`check_remote_code`."""
    with use_random(random) as rng:
        return read_text(
            lambda buf, cap, out_len: lib.itsme_meeting_code_new(rng, buf, cap, out_len),
            REMOTE_CODE_SIZE,
            thread_last_error,
        )


def _slot(slot: int, what: str = "slot") -> int:
    return int_argument(slot, what, 1, _SLOT_MAX)


def _peers(peers: Iterable[int]) -> bytes:
    """The slots of ``peers`` as itsme_rollcall_joined takes them: 2 bytes
    each, big-endian."""
    if isinstance(peers, (str, bytes, bytearray, memoryview)) or not isinstance(peers, collections.abc.Iterable):
        raise TypeError(f"peers must be an iterable of relay slots (int), not {type(peers).__name__}")
    return b"".join(_slot(peer, "a peer's slot").to_bytes(_SLOT_BYTES, "big") for peer in peers)


class RollCall(DetailedHandle):
    """A roll call on this device (``itsme_rollcall``), docs/PROTOCOL.md 20.

    Everyone on a call enters one meeting code; each device takes every
    contact of its store and signs what it sends with a key drawn for the
    roll call.  The library does no I/O and decides every message; the host
    joins the relay's group room :attr:`room`, reports its events and moves
    the messages.  Here Alice's ``contacts`` and Bob's ``their_contacts``
    run side by side at the fixed time ``now`` (a host passes None, or
    nothing, for the current time)::

        >>> meeting_code = new_meeting_code()             # one shares it on the call
        >>> call = RollCall(contacts, meeting_code, now)  # binding=...: see below
        >>> bobs = RollCall(their_contacts, meeting_code, now)
        >>> call.room == bobs.room                        # join the relay's group room
        True
        >>> call.joined(1, [], now)             # the relay's "joined": slot 1, no one else
        >>> bobs.joined(2, [1], now)            # (again after a reconnection)
        >>> call.peer_joined(2, now)            # the relay's events: peer_joined, peer_left

    Then :meth:`receive` every message of the room with its sender's slot,
    :meth:`tick` about once a second, and after each call send every message
    :meth:`next_outgoing` gives until it gives ``b""``; ``move`` stands for
    the room::

        >>> def move():
        ...     moved = True
        ...     while moved:
        ...         moved = False
        ...         for slot, sender, receiver in ((1, call, bobs), (2, bobs, call)):
        ...             while message := sender.next_outgoing():
        ...                 receiver.receive(message, slot, now)
        ...                 moved = True
        >>> move()
        >>> roster = call.roster                # read when showing who is here
        >>> call.head_count, [p.contact_id for p in call.participants] == [None, contact_id]
        (2, True)
        >>> call.confirm_roster(roster, now)    # the owner: they are on my call
        >>> bobs.confirm_roster(bobs.roster, now)
        >>> said = bobs.code                    # Bob reads his aloud ("ECHO 042")
        >>> call.confirm_said(now)              # once each read theirs
        >>> bobs.confirm_said(now)
        >>> move()
        >>> call.enter_heard(1, said, now)      # what the contact said
        <RollCallState.VERIFIED: 2>

    A participant is present only once its device signed a message naming
    this device, from a slot in the room: a copied or replayed HELLO never
    makes anyone present.  A new roster starts a new round (:attr:`phase`
    is ``GATHERING`` again): confirm it and read the new code; checks made
    stay, and a roster that comes back (a connection dropped and came back)
    brings its round back.  A refused message changes nothing and the roll
    call goes on.  It lasts 10 minutes from its creation
    (:class:`ExpiredError` after that, for good).  Times are unix seconds;
    None means now.  Relay slots are 1 to 65535.

    The roll call keeps its contact store alive.  Not for use by two
    threads at once (calls on one roll call are serialised by a lock).
    Closing it wipes its secrets.
    """

    _kind = "roll call"
    _free_function = lib.itsme_rollcall_free
    _last_error_name = "itsme_rollcall_last_error"

    def __init__(
        self,
        contacts: ContactStore,
        meeting_code: str,
        now: Optional[int] = None,
        *,
        binding: CallBinding = None,
        random: Optional[DeterministicRandom] = None,
    ) -> None:
        """A roll call named by ``meeting_code`` (as typed: either case,
        spaces and ``-`` ignored) with every contact of ``contacts`` (but
        those awaiting the peer), started at ``now``.

        ``binding`` binds it to the host's own call:
        :data:`CALL_BINDING_MIN` to :data:`CALL_BINDING_MAX` bytes
        that every participant of that call holds, the same for the whole
        call, that the relay never sees (docs/PROTOCOL.md 20.1 says which
        values qualify); None: not bound.  A device bound to another call
        checks nobody of this one.  ``random`` (tests only) draws the
        roll-call key and the HELLO's padding.  Nothing is queued before
        :meth:`joined`.

        Raises :class:`InvalidArgumentError` for a code with a typo, a
        binding of another length, a store of more than 2048 contacts or a
        time out of range (the detail is the store's last error), ``TypeError``
        for arguments of the wrong type.
        """
        store = _contact_store(contacts)
        encoded = encode_text(meeting_code, "meeting code")
        when = unix_time(now)
        buffer, length = _call_binding(binding)
        out = c_void_p()
        try:
            with use_random(random) as rng, store._use() as store_ptr:
                check(
                    lib.itsme_rollcall_new(store_ptr, encoded, buffer, length, rng, when, byref(out)),
                    lambda: ContactStore._detail(store_ptr),
                )
        finally:
            if buffer is not None:
                _wipe(buffer)
        super().__init__(new_handle(out))
        # The C roll call holds its store; the Python object is kept too, so
        # that it is not collected (and closed) while the roll call lives.
        self._store = store

    @property
    def store(self) -> ContactStore:
        """The contact store the roll call was made with."""
        return self._store

    @property
    def phase(self) -> RollCallPhase:
        """Where the roll call stands (:class:`RollCallPhase`); ``EXPIRED``
        from the first call with a time past the lifetime."""
        phase = c_uint32()
        self._call(lib.itsme_rollcall_status, byref(phase))
        return enum_or_int(RollCallPhase, phase.value)

    @property
    def room(self) -> str:
        """The relay group room's name: 32 lowercase hex digits, the same on
        every device for the same meeting code."""
        return self._read(read_text, lib.itsme_rollcall_room, ROOM_NAME_SIZE)

    def joined(self, slot: int, peers: Iterable[int], now: Optional[int] = None) -> None:
        """The relay's "joined" event: this device's relay ``slot`` and the
        slots of the peers already in the room (``peers``, ints; empty when
        alone).  Call it at the first join and again after every
        reconnection (a new slot): the HELLO and a VIEW are queued, and the
        roll call goes on in its place.

        Raises :class:`InvalidArgumentError` (a slot out of 1 to 65535, a
        time out of range), ``TypeError`` (peers not an iterable of ints),
        :class:`ExpiredError`.
        """
        slot = _slot(slot)
        packed = _peers(peers)
        when = unix_time(now)
        if packed:
            buffer, length = _bytes_argument(packed, "peers")
            self._call(lib.itsme_rollcall_joined, slot, buffer, length // 2, when)
        else:
            self._call(lib.itsme_rollcall_joined, slot, None, 0, when)

    def peer_joined(self, slot: int, now: Optional[int] = None) -> None:
        """The relay announced a new peer in ``slot``: this device's HELLO is
        queued, since the newcomer has not seen it.  Raises
        :class:`InvalidArgumentError`, :class:`ExpiredError`."""
        slot = _slot(slot)
        self._call(lib.itsme_rollcall_peer_joined, slot, unix_time(now))

    def peer_left(self, slot: int, now: Optional[int] = None) -> None:
        """The peer of ``slot`` left the room: its participant is no longer
        present (:attr:`RollCallParticipant.left`; a new round), and comes
        back if it rejoins.  Raises :class:`InvalidArgumentError`,
        :class:`ExpiredError`."""
        slot = _slot(slot)
        self._call(lib.itsme_rollcall_peer_left, slot, unix_time(now))

    def tick(self, now: Optional[int] = None) -> None:
        """Call about once a second: a VIEW that is due, and what may have
        been lost, are queued (docs/PROTOCOL.md 20.6); send them.  Raises
        :class:`InvalidArgumentError`, :class:`ExpiredError`."""
        self._call(lib.itsme_rollcall_tick, unix_time(now))

    def next_outgoing(self) -> bytes:
        """The next message to send to the group room (at most
        :data:`ROLLCALL_MESSAGE_MAX` bytes), removed from the queue; ``b""``
        when there is none.  A VIEW is made when it is taken, from the state
        at that moment."""
        return self._read(read_bytes, lib.itsme_rollcall_next_outgoing, ROLLCALL_MESSAGE_MAX)

    def receive(
        self, message: Union[bytes, bytearray, memoryview], slot: int, now: Optional[int] = None
    ) -> None:
        """Feeds one message of the group room carried by relay slot
        ``slot`` (1 to 65535; the relay's 2-byte prefix removed).  A HELLO
        already held, an older VIEW or a SAID already taken is ignored.

        A refused message changes nothing, and the roll call goes on:
        :class:`MalformedMessageError` (not a roll-call message of this
        version, a second HELLO for one key or from one slot, a second SAID
        from one participant in a round), :class:`AuthenticationFailedError`
        (a signature that does not verify; or a contact's sealed code that
        does not open against the code typed: the participant is
        ``REFUSED`` for the round), :class:`InvalidStateError` (a VIEW or
        SAID from a participant this device does not hold or see present, a
        VIEW carried by another slot than its sender's, a SAID of another
        roster), :class:`InvalidKeyError` (this device's own message,
        reflected), :class:`InvalidArgumentError` (a slot out of range, too
        many HELLOs or participants), :class:`ExpiredError`,
        :class:`DatabaseError` (recording an outcome failed).
        """
        buffer, length = _bytes_argument(message, "message")
        slot = _slot(slot)
        when = unix_time(now)
        self._call(lib.itsme_rollcall_receive, buffer, length, slot, when)

    def room_text(self, text: Union[bytes, bytearray, memoryview, str], now: Optional[int] = None) -> None:
        """A text frame of the group room, as the relay sent it (one of its
        events): ``joined``, ``peer-joined`` and ``peer-left`` are applied as
        :meth:`joined`, :meth:`peer_joined` and :meth:`peer_left` apply
        them, with their errors; ``refused`` and an event this version does
        not know change nothing.  A host hands over what the room sends as
        it came (this and :meth:`room_binary`) and parses nothing.

        Raises :class:`MalformedMessageError` for a text that is not a group
        room's event (nothing changes), then the errors of the event's
        method.
        """
        if isinstance(text, str):
            text = text.encode("utf-8")
        buffer, length = _bytes_argument(text, "text")
        self._call(lib.itsme_rollcall_room_text, buffer, length, unix_time(now))

    def room_binary(self, frame: Union[bytes, bytearray, memoryview], now: Optional[int] = None) -> None:
        """A binary frame of the group room, as the relay sent it: the
        sender's relay slot (2 bytes, big-endian), then its message, which
        is fed as :meth:`receive` feeds it.

        Raises :class:`MalformedMessageError` for a frame shorter than a
        slot (nothing changes), then the errors of :meth:`receive`.
        """
        buffer, length = _bytes_argument(frame, "frame")
        self._call(lib.itsme_rollcall_room_binary, buffer, length, unix_time(now))

    @property
    def head_count(self) -> int:
        """How many devices are present now, this one included (1 to 50):
        the head count to compare with the faces on the call."""
        count = c_size_t()
        self._call(lib.itsme_rollcall_head_count, byref(count))
        return count.value

    @property
    def split(self) -> bool:
        """True when the roster has not changed for 5 seconds and a present
        participant holds another one: someone (the relay) shows different
        participants to different devices.  Show it: a split that stays is
        not a slow network."""
        split = c_bool()
        self._call(lib.itsme_rollcall_split, byref(split))
        return bool(split.value)

    @property
    def roster(self) -> bytes:
        """The hash of the roster held now (:data:`ROLLCALL_ROSTER_BYTES`):
        read it when showing the participants, and pass it to
        :meth:`confirm_roster`."""
        return self._read(read_bytes, lib.itsme_rollcall_roster, ROLLCALL_ROSTER_BYTES)

    def confirm_roster(
        self,
        roster: Union[bytes, bytearray, memoryview],
        now: Optional[int] = None,
        random: Optional[DeterministicRandom] = None,
    ) -> None:
        """The owner confirmed that the contacts listed are on their call;
        ``roster`` is the :attr:`roster` read when the list was shown.  Draws
        this round's code (from ``random``, tests only).

        Raises :class:`InvalidStateError` if no one else is present yet, if
        the roster changed since it was read (show the participants again
        and confirm that one) or if this round's roster is confirmed
        already, :class:`InvalidArgumentError` for a roster of another size
        than :data:`ROLLCALL_ROSTER_BYTES`, :class:`ExpiredError`.
        """
        buffer, length = _bytes_argument(roster, "roster")
        when = unix_time(now)
        with use_random(random) as rng:
            self._call(lib.itsme_rollcall_confirm_roster, buffer, length, rng, when)

    @property
    def code(self) -> str:
        """This device's code for this round, to read aloud (``"ECHO 042"``),
        once the roster is confirmed; :class:`InvalidStateError` before (and
        once the roll call expired)."""
        return self._read(read_text, lib.itsme_rollcall_code, VOICE_CODE_SIZE)

    def confirm_said(self, now: Optional[int] = None, random: Optional[DeterministicRandom] = None) -> None:
        """The owner read :attr:`code` aloud: the SAID, one sealed entry for
        every other participant, is queued (:meth:`next_outgoing`); nothing
        derived from the code leaves the device before.  ``random`` (tests
        only) draws the entries of those that are not contacts.  Raises
        :class:`InvalidStateError` before the roster is confirmed or once
        this round's SAID went out, :class:`ExpiredError`."""
        when = unix_time(now)
        with use_random(random) as rng:
            self._call(lib.itsme_rollcall_confirm_said, rng, when)

    def participant(self, index: int) -> RollCallParticipant:
        """Participant ``index`` (0, this device, to ``len(participants) - 1``);
        :class:`InvalidArgumentError` out of range."""
        index = int_argument(index, "index", 0, _SIZE_MAX)
        info = RollCallParticipantStruct()
        self._call(lib.itsme_rollcall_participant, index, byref(info))
        return RollCallParticipant(
            index=info.index,
            slot=info.slot or None,
            contact_id=info.contact_id or None,
            state=enum_or_int(RollCallState, info.state),
            left=bool(info.left),
            agrees=bool(info.agrees),
        )

    @property
    def participants(self) -> List[RollCallParticipant]:
        """Every device that has been present in the roll call, this one
        first, the others in the order they became present; those not
        present now are marked :attr:`RollCallParticipant.left`."""
        count = c_size_t()
        self._call(lib.itsme_rollcall_participant_count, byref(count))
        return [self.participant(index) for index in range(count.value)]

    def enter_heard(self, index: int, code: str, now: Optional[int] = None) -> RollCallState:
        """The owner typed ``code`` (``"ECHO 042"``, the word in any case), the
        code participant ``index`` read aloud.  Compared at once if their
        sealed code is in, else when it arrives (:meth:`receive`); the
        outcome is recorded on the contact.  Returns the participant's state
        (``NOT_YET`` while their sealed code is to come, ``WRONG``: type
        again, ``VERIFIED``, ``DEVICE_CHANGED``, ``VERIFIED_TAG_UNCHECKED``,
        ``REFUSED``).

        Raises :class:`InvalidArgumentError` (not a NATO word and three
        digits, no such participant, this device), :class:`InvalidStateError`
        (the roster of this round is not confirmed; not a contact, or not
        present now; checked already), :class:`LockedError` (three wrong
        codes in this round: wait for a new round),
        :class:`AuthenticationFailedError` (their sealed code does not open:
        ``REFUSED``), :class:`ExpiredError`, :class:`DatabaseError`.
        """
        index = int_argument(index, "index", 0, _SIZE_MAX)
        encoded = encode_text(code, "code")
        when = unix_time(now)
        state = c_uint32()
        self._call(lib.itsme_rollcall_enter_heard, index, encoded, when, byref(state))
        return enum_or_int(RollCallState, state.value)

    def __repr__(self) -> str:
        if self.closed:
            return "<RollCall closed>"
        phase = self.phase
        count = c_size_t()
        self._call(lib.itsme_rollcall_participant_count, byref(count))
        return f"<RollCall participants={count.value} {getattr(phase, 'name', str(phase))}>"
