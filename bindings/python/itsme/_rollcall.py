"""The roll call (``itsme_rollcall``), docs/PROTOCOL.md section 20: everyone
on a conference call checks at once which participants are contacts whose
devices hold the seed exchanged with them."""

from __future__ import annotations

import enum
from ctypes import byref, c_size_t, c_uint32, c_void_p
from dataclasses import dataclass
from typing import List, Optional, Union

from ._contacts import ContactStore, _bytes_argument
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
from ._voice import VOICE_CODE_SIZE

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
#: 28 + 16 * 2048 (``ITSME_ROLLCALL_MESSAGE_MAX``).
ROLLCALL_MESSAGE_MAX = 32796
#: A roster hash, in bytes (``ITSME_ROLLCALL_ROSTER_BYTES``).
ROLLCALL_ROSTER_BYTES = 32

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
    state as shown beside it."""

    #: A contact whose code is not checked yet.
    NOT_YET = 1
    #: The code heard is the one their device sealed, from the device known.
    VERIFIED = 2
    #: The code heard is not the one their device sealed (type it again:
    #: three times in a round at most).
    WRONG = 3
    #: The code matched, from another device than the one known.
    DEVICE_CHANGED = 4
    #: The code matched; no device secret of theirs is known here.
    VERIFIED_TAG_UNCHECKED = 5
    #: Their sealed code did not open (tampered with, or sealed for another
    #: device): neither verified nor wrong.
    REFUSED = 6
    #: This device, or a device that holds no seed with this one.
    UNKNOWN = 7


@dataclass(frozen=True)
class RollCallParticipant:
    """One device of the roll call as this device sees it."""

    #: 0 for this device; the others in the order their HELLOs arrived.
    index: int
    #: The relay slot it speaks from (None for this device).
    slot: Optional[int]
    #: The contact it is (None for this device and for a device that is not
    #: a contact).
    contact_id: Optional[int]
    state: RollCallState
    #: Its slot left the room (it stays in the roster).
    left: bool


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


def _slot(slot: int) -> int:
    return int_argument(slot, "slot", 1, _SLOT_MAX)


class RollCall(DetailedHandle):
    """A roll call on this device (``itsme_rollcall``), docs/PROTOCOL.md 20.

    Everyone on a call enters one meeting code; each device takes every
    contact of its store.  The library does no I/O; the host joins the
    relay's group room :attr:`room` and moves the messages::

        call = RollCall(contacts, meeting_code)
        join_group_room(call.room)
        # send every message next_outgoing() gives (the HELLO now, again
        # after peer_joined(), the SAID after confirm_said()); receive()
        # every message of the room with its slot; peer_left() on leaving
        roster = call.roster                  # read when showing...
        show(call.participants)               # ...who is here
        call.confirm_roster(roster)           # the owner: they are on my call
        print(call.code)                      # read aloud, then
        call.confirm_said()
        state = call.enter_heard(index, "ECHO 042")   # what a contact said

    A new participant starts a new round (:attr:`phase` is ``GATHERING``
    again): confirm the new roster and read the new code; checks made stay.
    A refused message changes nothing and the roll call goes on.  It lasts
    10 minutes from its creation (:class:`ExpiredError` after that).  Times
    are unix seconds; None means now.

    The roll call keeps its contact store alive.  Not for use by two
    threads at once (calls on one roll call are serialised by a lock).
    Closing it wipes its secrets.
    """

    _kind = "roll call"
    _free_function = lib.itsme_rollcall_free
    _last_error_name = "itsme_rollcall_last_error"

    def __init__(
        self,
        store: ContactStore,
        meeting_code: str,
        now: Optional[int] = None,
        random: Optional[DeterministicRandom] = None,
    ) -> None:
        """A roll call named by ``meeting_code`` (as typed: either case,
        spaces and ``-`` ignored) with every contact of ``store`` (but those
        awaiting the peer); ``random`` (tests only) draws its HELLO's nonce
        and padding.  Raises :class:`InvalidArgumentError` for a code with a
        typo or a store of more than 2048 contacts; the detail is the
        store's last error."""
        store = _contact_store(store)
        encoded = encode_text(meeting_code, "meeting code")
        when = unix_time(now)
        out = c_void_p()
        with use_random(random) as rng, store._use() as store_ptr:
            check(
                lib.itsme_rollcall_new(store_ptr, encoded, rng, when, byref(out)),
                lambda: ContactStore._detail(store_ptr),
            )
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
        """Where the roll call stands (:class:`RollCallPhase`)."""
        phase = c_uint32()
        self._call(lib.itsme_rollcall_status, byref(phase))
        return enum_or_int(RollCallPhase, phase.value)

    @property
    def room(self) -> str:
        """The relay group room's name: 32 lowercase hex digits, the same on
        every device for the same meeting code."""
        return self._read(read_text, lib.itsme_rollcall_room, ROOM_NAME_SIZE)

    def next_outgoing(self) -> bytes:
        """The next message to send to the group room, removed from the
        queue; ``b""`` when there is none."""
        return self._read(read_bytes, lib.itsme_rollcall_next_outgoing, ROLLCALL_MESSAGE_MAX)

    def receive(self, data: Union[bytes, bytearray, memoryview], slot: int, now: Optional[int] = None) -> None:
        """Feeds one message of the group room from relay slot ``slot`` (1 to
        65535; the relay's 2-byte prefix removed).  A HELLO or SAID already
        taken is ignored.

        A refused message changes nothing: :class:`MalformedMessageError`
        (not a roll-call message, a second HELLO from a slot, a second SAID
        in a round), :class:`InvalidArgumentError` (a HELLO of another time,
        a 51st participant), :class:`InvalidStateError` (a SAID of a device
        without a HELLO here, or of another roster), :class:`InvalidKeyError`
        (this device's own SAID reflected), :class:`AuthenticationFailedError`
        (a contact's sealed code that does not open against the code typed:
        the participant is ``REFUSED``), :class:`ExpiredError`.
        """
        when = unix_time(now)
        buffer, length = _bytes_argument(data, "data")
        self._call(lib.itsme_rollcall_receive, buffer, length, _slot(slot), when)

    def peer_joined(self, slot: int) -> None:
        """The relay announced a new participant in ``slot``: this device's
        HELLO is queued again for the newcomer."""
        self._call(lib.itsme_rollcall_peer_joined, _slot(slot))

    def peer_left(self, slot: int) -> None:
        """The participant of ``slot`` left the room: it is marked
        :attr:`RollCallParticipant.left` and stays in the roster."""
        self._call(lib.itsme_rollcall_peer_left, _slot(slot))

    @property
    def roster(self) -> bytes:
        """The hash of the roster held now (:data:`ROLLCALL_ROSTER_BYTES`):
        read it when showing the participants, and pass it to
        :meth:`confirm_roster`."""
        return self._read(read_bytes, lib.itsme_rollcall_roster, ROLLCALL_ROSTER_BYTES)

    def confirm_roster(
        self, roster: bytes, now: Optional[int] = None, random: Optional[DeterministicRandom] = None
    ) -> None:
        """The owner confirmed that the contacts listed are on their call;
        ``roster`` is the :attr:`roster` read when the list was shown.  Draws
        this round's code (from ``random``, tests only).

        Raises :class:`InvalidStateError` if no one else has joined yet, if
        the roster changed since (show the participants again) or if it is
        confirmed already in this round,
        :class:`InvalidArgumentError` for a roster of another size,
        :class:`ExpiredError`.
        """
        when = unix_time(now)
        buffer, length = _bytes_argument(roster, "roster")
        with use_random(random) as rng:
            self._call(lib.itsme_rollcall_confirm_roster, buffer, length, rng, when)

    @property
    def code(self) -> str:
        """This device's code for this round, to read aloud (``"ECHO 042"``),
        once the roster is confirmed; :class:`InvalidStateError` before."""
        return self._read(read_text, lib.itsme_rollcall_code, VOICE_CODE_SIZE)

    def confirm_said(self, now: Optional[int] = None, random: Optional[DeterministicRandom] = None) -> None:
        """The owner read :attr:`code` aloud: the SAID, with the code sealed
        for each contact present, is queued (:meth:`next_outgoing`).  Raises
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
        )

    @property
    def participants(self) -> List[RollCallParticipant]:
        """Every device in the roll call, this one first."""
        count = c_size_t()
        self._call(lib.itsme_rollcall_participant_count, byref(count))
        return [self.participant(index) for index in range(count.value)]

    def enter_heard(self, index: int, code: str, now: Optional[int] = None) -> RollCallState:
        """The owner typed ``code`` (``"ECHO 042"``, the word in any case), the
        code participant ``index`` read aloud.  Compared at once if their
        sealed code is in, else when it arrives; the outcome is recorded on
        the contact.  Returns the participant's state (``NOT_YET`` while
        their sealed code is to come, ``WRONG``: type again).

        Raises :class:`InvalidArgumentError` (not a NATO word and three
        digits, no such participant, this device), :class:`InvalidStateError`
        (the roster is not confirmed; not a contact; checked already in this
        round), :class:`LockedError` (three wrong codes in this round),
        :class:`AuthenticationFailedError` (their sealed code does not open:
        ``REFUSED``), :class:`ExpiredError`.
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
