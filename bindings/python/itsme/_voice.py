"""Voice verification during a call (``itsme_voice``), NATO words and the
pure derivations of docs/PROTOCOL.md sections 9 and 10."""

from __future__ import annotations

import enum
from ctypes import byref, c_bool, c_int64, c_size_t, c_uint8, c_uint32, c_void_p
from typing import TYPE_CHECKING, Callable, List, NamedTuple, Optional, Tuple, TypeVar, Union

from ._contacts import DEGRADATION_CODE_SIZE, ContactStore, _bytes_argument, _wipe
from ._errors import InvalidArgumentError, Result, check
from ._exchange import _contact_store
from ._ffi import VoiceDerivationStruct, lib
from ._handle import (
    DetailedHandle,
    encode_text,
    enum_or_int,
    int_argument,
    new_handle,
    read_text,
    thread_last_error,
    unix_time,
)

if TYPE_CHECKING:
    from ctypes import Array

_T = TypeVar("_T")

__all__ = [
    "CALL_BINDING_MAX",
    "CALL_BINDING_MIN",
    "NATO_WORDS",
    "VOICE_CODE_SIZE",
    "VOICE_SESSION_ID_SIZE",
    "VOICE_TAG_UNKNOWN",
    "VOICE_WORDS",
    "VoiceCode",
    "VoiceDerivation",
    "VoiceOutcome",
    "VoiceSession",
    "VoiceState",
    "VoiceTiming",
    "VoiceTurn",
    "derive_code",
    "derive_degradation_code",
    "derive_device_tag",
    "derive_lower_selects_first",
    "derive_session_id",
    "derive_voice",
    "derive_words",
    "nato_word",
]

#: The tag :meth:`VoiceSession.their_code` reports as None: this device
#: holds no device secret for the contact (``ITSME_VOICE_TAG_UNKNOWN``).
VOICE_TAG_UNKNOWN = 100
#: Buffer size for a code's text, NUL included (``ITSME_VOICE_CODE_SIZE``).
VOICE_CODE_SIZE = 13
#: Buffer size for a session ID's text, NUL included
#: (``ITSME_VOICE_SESSION_ID_SIZE``).
VOICE_SESSION_ID_SIZE = 12
#: Words offered to each selector.
VOICE_WORDS = 5
#: The shortest call binding, in bytes (``ITSME_CALL_BINDING_MIN``): what
#: :class:`VoiceSession`, :class:`OnlineVerify`, its rendezvous and
#: :class:`RollCall` take as ``binding``.
CALL_BINDING_MIN = 16
#: The longest call binding, in bytes (``ITSME_CALL_BINDING_MAX``).
CALL_BINDING_MAX = 64

#: What a ``binding`` argument may be: bytes-like, or None for none.
CallBinding = Optional[Union[bytes, bytearray, memoryview]]

_NATO_COUNT = 26
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_UINT32_MAX = 2**32 - 1


class VoiceState(enum.IntEnum):
    """``itsme_voice_state`` (``ITSME_VOICE_*``)."""

    #: Planned: waiting for the window to begin (see :meth:`VoiceSession.timing`).
    WAITING = 1
    #: Started (the window is used): the two selections.
    SELECTING = 2
    #: The codes are ready: read yours aloud, enter what you heard.
    COMPARING = 3
    FINISHED = 4
    #: A heard word that is not the selector's, a used window, or the time
    #: ran out.  Final: plan a new session.
    FAILED = 5


class VoiceTurn(enum.IntEnum):
    """Whose word is entered next (``ITSME_VOICE_TURN_*``)."""

    #: Not selecting (before the start, or both words entered).
    NONE = 0
    #: Choose one of your five words and say it.
    MINE = 1
    #: Enter the word the other person said, from all 26.
    THEIRS = 2


class VoiceOutcome(enum.IntEnum):
    """What :meth:`VoiceSession.check` found (``itsme_voice_outcome``)."""

    #: Code and device tag as expected: the contact is verified (a degraded
    #: contact stays degraded until a Security PIN Update).
    VERIFIED = 1
    #: The code is right, the tag is not: their device changed.  The
    #: contact is now degraded; tell the person.
    DEVICE_CHANGED = 2
    #: The code is wrong: not the person, or a mistake.  Nothing changed.
    MISMATCH = 3
    #: The code is right; this device holds no device secret for the
    #: contact, so the tag was not checked.
    VERIFIED_TAG_UNCHECKED = 4


class VoiceTiming(NamedTuple):
    """When a session runs, as seen at a given time."""

    #: The window (``floor(t / 30)``) the session uses.
    window: int
    #: Seconds until the window begins; negative once it has.
    starts_in: int
    #: Seconds until the session ends (the end of the next window).
    ends_in: int


class VoiceCode(NamedTuple):
    """A code to read aloud or to hear, with its device tag."""

    #: ``"ECHO 512"``.
    text: str
    #: 0 to 99; None for :meth:`VoiceSession.their_code` when this device
    #: holds no device secret for the contact.
    tag: Optional[int]


def nato_word(index: int) -> str:
    """The NATO word of index 0 to 25 (``"ALFA"`` ... ``"ZULU"``).

    Raises :class:`InvalidArgumentError` for another index.
    """
    index = int_argument(index, "index", 0, _UINT32_MAX)
    word: Optional[bytes] = lib.itsme_nato_word(index)  # static text, or NULL for another index
    if word is None:
        raise InvalidArgumentError(Result.ITSME_E_INVALID_ARGUMENT, f"no NATO word has index {index}")
    return word.decode("ascii")


#: The 26 NATO words by index, as the library spells them.
NATO_WORDS: Tuple[str, ...] = tuple(nato_word(index) for index in range(_NATO_COUNT))


def _window(value: int) -> int:
    return int_argument(value, "window", _INT64_MIN, _INT64_MAX)


def _call_binding(binding: CallBinding) -> "Tuple[Optional[Array[c_uint8]], int]":
    """A call binding as the C functions take it: None (NULL, length 0) for
    none, else a copy of its bytes, :data:`CALL_BINDING_MIN` to
    :data:`CALL_BINDING_MAX` long (the caller wipes the copy).  The library
    checks the length too (an empty binding that is not NULL included);
    this says which length it got.  Raises :class:`InvalidArgumentError`,
    and ``TypeError`` for a binding that is not bytes-like."""
    if binding is None:
        return None, 0
    buffer, length = _bytes_argument(binding, "binding")
    if not CALL_BINDING_MIN <= length <= CALL_BINDING_MAX:
        _wipe(buffer)
        raise InvalidArgumentError(
            Result.ITSME_E_INVALID_ARGUMENT,
            f"a call binding is {CALL_BINDING_MIN} to {CALL_BINDING_MAX} bytes, not {length}",
        )
    return buffer, length


def _word(value: int, what: str = "word") -> int:
    return int_argument(value, what, 0, _UINT32_MAX)


class VoiceSession(DetailedHandle):
    """One voice verification with a stored contact (``itsme_voice``).

    Both people, on a call, run a session with each other's contact (here
    Alice's ``contacts`` and Bob's ``their_contacts``, side by side, at
    the fixed time ``now``; a host passes None, or nothing, for the
    current time)::

        >>> session = VoiceSession(contacts, contact_id, now)   # plans the next window
        >>> window, starts_in, ends_in = session.timing(now)    # count down starts_in
        >>> bobs = VoiceSession(their_contacts, their_id, now)  # on Bob's phone
        >>> session.window == bobs.window
        True
        >>> session.start(now + starts_in)                      # when the window begins
        >>> bobs.start(now + starts_in)
        >>> session.session_id == bobs.session_id               # both read it aloud
        True
        >>> len(session.words), nato_word(session.words[0]).isalpha()  # my five words
        (5, True)

    :attr:`turn` says who speaks: ``MINE``, select one of my words and say
    it; ``THEIRS``, select the word I heard (offer all 26).  Twice::

        >>> first, second = (session, bobs) if session.turn == VoiceTurn.MINE else (bobs, session)
        >>> word = first.words[0]
        >>> first.select(word, now + starts_in)                 # says it
        >>> second.select(word, now + starts_in)                # as heard
        >>> word = second.words[0]
        >>> second.select(word, now + starts_in)
        >>> first.select(word, now + starts_in)
        >>> code, tag = session.your_code                       # say "ECHO 512, 47"
        >>> heard_code, heard_tag = bobs.your_code              # what Alice heard
        >>> session.check(heard_code, heard_tag, now + starts_in)
        <VoiceOutcome.VERIFIED: 1>

    A word entered on their turn that is not among their five ends the
    session (:class:`AuthenticationFailedError`), with no retry.  A session
    may start from 15 seconds before its window and lasts until the end of
    the next window (:class:`ExpiredError` after that).  A failure is final:
    :attr:`state` is ``FAILED`` and later calls raise
    :class:`InvalidStateError`.  Times are unix seconds; None means now.

    A host that embeds ItsMe in the call itself binds the session to that
    call (``binding``, docs/PROTOCOL.md 9.7): the session ID and the codes
    take it, so a device bound to another call, or not bound, reads another
    session ID, and codes repeated from another call do not match.  Show
    beside the session ID that the session is bound.

    The session keeps its contact store alive.  Not for use by two threads
    at once (calls on one session are serialised by a lock).  Closing it
    wipes its secrets.
    """

    _kind = "voice session"
    _free_function = lib.itsme_voice_free
    _last_error_name = "itsme_voice_last_error"

    def __init__(
        self,
        store: ContactStore,
        contact_id: int,
        now: Optional[int] = None,
        *,
        binding: CallBinding = None,
    ) -> None:
        """Plans a session with contact ``contact_id`` of ``store`` at
        ``now``: the next window after ``now`` and after the last one used.

        ``binding`` binds it to the host's own call:
        :data:`CALL_BINDING_MIN` to :data:`CALL_BINDING_MAX` bytes that
        both devices of the call hold, the same for the whole call, that the
        relay and the call's server never see (docs/PROTOCOL.md 20.1 says
        which values qualify); None: not bound.

        Raises :class:`NotFoundError` if there is no such contact,
        :class:`InvalidArgumentError` for a binding of another length or a
        time out of range (the error's detail is the store's last error),
        ``TypeError`` for arguments of the wrong type.
        """
        store = _contact_store(store)
        contact_id = int_argument(contact_id, "contact id", _INT64_MIN, _INT64_MAX)
        when = unix_time(now)
        buffer, length = _call_binding(binding)
        out = c_void_p()
        try:
            with store._use() as store_ptr:
                check(
                    lib.itsme_voice_new(store_ptr, contact_id, buffer, length, when, byref(out)),
                    lambda: ContactStore._detail(store_ptr),
                )
        finally:
            if buffer is not None:
                _wipe(buffer)
        super().__init__(new_handle(out))
        # The C session holds its store; the Python object is kept too, so
        # that it is not collected (and closed) while the session lives.
        self._store = store
        self._contact_id = contact_id

    # -- plumbing ------------------------------------------------------------

    @property
    def store(self) -> ContactStore:
        """The contact store the session was planned on."""
        return self._store

    @property
    def contact_id(self) -> int:
        """The contact the session verifies."""
        return self._contact_id

    def _status(self) -> "tuple[int, int]":
        state, turn = c_uint32(), c_uint32()
        self._call(lib.itsme_voice_status, byref(state), byref(turn))
        return state.value, turn.value

    def _code(self, function: Callable[..., int]) -> "tuple[str, int]":
        tag = c_uint32()
        text = self._read(
            read_text,
            lambda ptr, buf, cap, out_len: function(ptr, buf, cap, out_len, byref(tag)),
            VOICE_CODE_SIZE,
        )
        return text, tag.value

    # -- state and timing ----------------------------------------------------

    @property
    def state(self) -> VoiceState:
        """Where the session stands (:class:`VoiceState`)."""
        return enum_or_int(VoiceState, self._status()[0])

    @property
    def turn(self) -> VoiceTurn:
        """Whose word is entered next (:class:`VoiceTurn`); ``NONE`` unless selecting."""
        return enum_or_int(VoiceTurn, self._status()[1])

    def timing(self, now: Optional[int] = None) -> VoiceTiming:
        """The session's window and, from ``now``, the seconds until it
        begins (negative once it has) and until the session ends."""
        when = unix_time(now)
        window, starts_in, ends_in = c_int64(), c_int64(), c_int64()
        self._call(lib.itsme_voice_timing, when, byref(window), byref(starts_in), byref(ends_in))
        return VoiceTiming(window.value, starts_in.value, ends_in.value)

    @property
    def window(self) -> int:
        """The window the session uses (it begins at ``30 * window``)."""
        window = c_int64()
        self._call(lib.itsme_voice_timing, 0, byref(window), None, None)
        return window.value

    # -- the session ---------------------------------------------------------

    def start(self, now: Optional[int] = None) -> None:
        """Starts the session when its window begins (from 15 seconds
        before, for clock skew): uses the window for the contact in the
        session's store, atomically.

        Raises :class:`InvalidStateError` if it is too early (nothing
        changes: try again) or started already; :class:`WindowUsedError`
        if another session took the window (this one has failed: plan a new
        one); :class:`ExpiredError`.
        """
        self._call(lib.itsme_voice_start, unix_time(now))

    @property
    def session_id(self) -> str:
        """The session ID both people read aloud (``"KILO 07"``): the same
        text on both devices means the same seed and window (and, for a
        session bound to a call, the same call: say beside it that the
        session is bound, "KILO 07, bound to this call")."""
        return self._read(read_text, lib.itsme_voice_session_id, VOICE_SESSION_ID_SIZE)

    @property
    def words(self) -> List[int]:
        """This person's five word indices (0 to 25), sorted; show them as
        :func:`nato_word` texts."""
        out = (c_uint8 * VOICE_WORDS)()
        self._call(lib.itsme_voice_words, out, VOICE_WORDS, byref(c_size_t()))
        return list(out)

    def select(self, word: int, now: Optional[int] = None) -> None:
        """Enters the next selection (see :attr:`turn`): on my turn one of
        my five words, on theirs the word I heard (from all 26).

        Raises :class:`InvalidArgumentError` for an index above 25 or, on my
        turn, a word not among mine (nothing changes);
        :class:`AuthenticationFailedError` on their turn for a word not
        among theirs (the session has failed); :class:`InvalidStateError`
        when not selecting; :class:`ExpiredError`.
        """
        self._call(lib.itsme_voice_select, _word(word), unix_time(now))

    @property
    def your_code(self) -> VoiceCode:
        """"Your Code" to read aloud (``"ECHO 512"``) and the device tag
        (0 to 99) to say after it.  :class:`InvalidStateError` before both
        words are entered."""
        return VoiceCode(*self._code(lib.itsme_voice_your_code))

    @property
    def their_code(self) -> VoiceCode:
        """"Their Code": the code and tag this device expects to hear; the
        tag is None when this device holds no device secret for the
        contact.  :class:`InvalidStateError` before both words are entered."""
        text, tag = self._code(lib.itsme_voice_their_code)
        return VoiceCode(text, None if tag == VOICE_TAG_UNKNOWN else tag)

    def check(self, heard_code: str, heard_tag: int, now: Optional[int] = None) -> VoiceOutcome:
        """Checks what was heard (a code such as ``"echo-512"``: a NATO word,
        one space or ``-``, three digits; and the tag, 0 to 99) in constant
        time, records the outcome on the contact in the session's store and
        finishes the session.

        Raises :class:`InvalidArgumentError` for a code that does not parse
        or a tag above 99 (nothing changes: enter it again);
        :class:`InvalidStateError` before the codes exist;
        :class:`ExpiredError`.
        """
        encoded = encode_text(heard_code, "heard_code")
        tag = _word(heard_tag, "heard_tag")
        when = unix_time(now)
        outcome = c_uint32()
        self._call(lib.itsme_voice_check, encoded, tag, when, byref(outcome))
        return enum_or_int(VoiceOutcome, outcome.value)

    def __repr__(self) -> str:
        if self.closed:
            return "<VoiceSession closed>"
        state, turn = self._status()
        state_name = getattr(enum_or_int(VoiceState, state), "name", str(state))
        turn_name = getattr(enum_or_int(VoiceTurn, turn), "name", str(turn))
        return f"<VoiceSession contact={self._contact_id} window={self.window} {state_name} turn={turn_name}>"


# -- pure derivations -------------------------------------------------------------
#
# ``pid`` is a party's id (section 9): its 32-byte identity public key, or the
# 8 fingerprint bytes of an unauthenticated contact.


def _with_seed(seed: bytes, call: Callable[[Array[c_uint8], int], _T]) -> _T:
    """Runs ``call(seed_array, seed_len)``, wiping the copy of the seed after."""
    array, length = _bytes_argument(seed, "seed")
    try:
        return call(array, length)
    finally:
        _wipe(array)


def derive_session_id(seed: bytes, window: int) -> str:
    """The session ID text (section 9.2) of a 32-byte seed and a window."""
    window = _window(window)
    return _with_seed(
        seed,
        lambda s, n: read_text(
            lambda buf, cap, out_len: lib.itsme_derive_session_id(s, n, window, buf, cap, out_len),
            VOICE_SESSION_ID_SIZE,
            thread_last_error,
        ),
    )


def derive_words(seed: bytes, window: int, pid: bytes) -> List[int]:
    """The five word indices (section 9.3) of the selector ``pid``, sorted."""
    window = _window(window)
    pid_array, pid_len = _bytes_argument(pid, "pid")
    out = (c_uint8 * VOICE_WORDS)()

    def call(s: Array[c_uint8], n: int) -> None:
        check(
            lib.itsme_derive_words(s, n, window, pid_array, pid_len, out, VOICE_WORDS, byref(c_size_t())),
            thread_last_error,
        )

    _with_seed(seed, call)
    return list(out)


def derive_lower_selects_first(seed: bytes, window: int) -> bool:
    """Whether the party with the lower pid selects first (section 9.4)."""
    window = _window(window)
    out = c_bool()
    _with_seed(
        seed, lambda s, n: check(lib.itsme_derive_lower_selects_first(s, n, window, byref(out)), thread_last_error)
    )
    return bool(out.value)


def derive_code(
    seed: bytes, window: int, first: bytes, first_word: int, second: bytes, second_word: int, speaker: bytes
) -> str:
    """The code text of ``speaker`` (section 9.6) for the selections
    (``first``, ``first_word``) then (``second``, ``second_word``)."""
    window = _window(window)
    first_word, second_word = _word(first_word, "first_word"), _word(second_word, "second_word")
    first_array, first_len = _bytes_argument(first, "first")
    second_array, second_len = _bytes_argument(second, "second")
    speaker_array, speaker_len = _bytes_argument(speaker, "speaker")

    def call(s: Array[c_uint8], n: int) -> str:
        return read_text(
            lambda buf, cap, out_len: lib.itsme_derive_code(
                s, n, window, first_array, first_len, first_word, second_array, second_len, second_word,
                speaker_array, speaker_len, buf, cap, out_len,
            ),
            VOICE_CODE_SIZE,
            thread_last_error,
        )

    return _with_seed(seed, call)


def derive_device_tag(seed: bytes, window: int, speaker: bytes, device_secret: bytes = b"") -> int:
    """The device tag (0 to 99, section 10.1) of ``speaker`` with its device
    secret (0 to 64 bytes; empty when there is none)."""
    window = _window(window)
    speaker_array, speaker_len = _bytes_argument(speaker, "speaker")
    secret_array, secret_len = _bytes_argument(device_secret, "device_secret")
    out = c_uint32()

    def call(s: Array[c_uint8], n: int) -> None:
        check(
            lib.itsme_derive_device_tag(s, n, window, speaker_array, speaker_len, secret_array, secret_len, byref(out)),
            thread_last_error,
        )

    try:
        _with_seed(seed, call)
    finally:
        _wipe(secret_array)
    return out.value


class VoiceDerivation(NamedTuple):
    """Everything one side derives in a session (:func:`derive_voice`):
    codes and the session ID as values, words as indices."""

    #: 0 to 2599: the word ``session_id // 100`` and two digits.
    session_id: int
    #: This side's five words, sorted.
    my_words: List[int]
    #: The other side's five words, sorted.
    their_words: List[int]
    #: Whether this side selects first.
    i_select_first: bool
    #: 0 to 25999: the word ``my_code // 1000`` and three digits.
    my_code: int
    #: The other side's code.
    their_code: int
    #: This side's device tag, 0 to 99.
    my_tag: int
    #: The other side's device tag.
    their_tag: int


def derive_voice(
    seed: bytes,
    window: int,
    my_pid: bytes,
    their_pid: bytes,
    my_secret: bytes,
    their_secret: bytes,
    first_word: int,
    second_word: int,
) -> VoiceDerivation:
    """One side of a session in one call (sections 9.2 to 10.1): its pid and
    device secret, the other side's, and the two selections in order (the
    first selector's word first).  Secrets are 0 to 64 bytes."""
    window = _window(window)
    first_word, second_word = _word(first_word, "first_word"), _word(second_word, "second_word")
    my_array, my_len = _bytes_argument(my_pid, "my_pid")
    their_array, their_len = _bytes_argument(their_pid, "their_pid")
    my_secret_array, my_secret_len = _bytes_argument(my_secret, "my_secret")
    their_secret_array, their_secret_len = _bytes_argument(their_secret, "their_secret")
    out = VoiceDerivationStruct()

    def call(s: Array[c_uint8], n: int) -> None:
        check(
            lib.itsme_derive_voice(
                s, n, window, my_array, my_len, their_array, their_len, my_secret_array, my_secret_len,
                their_secret_array, their_secret_len, first_word, second_word, byref(out),
            ),
            thread_last_error,
        )

    try:
        _with_seed(seed, call)
        return VoiceDerivation(
            session_id=out.session_id,
            my_words=list(out.my_words),
            their_words=list(out.their_words),
            i_select_first=bool(out.i_select_first),
            my_code=out.my_code,
            their_code=out.their_code,
            my_tag=out.my_tag,
            their_tag=out.their_tag,
        )
    finally:
        _wipe(my_secret_array)
        _wipe(their_secret_array)


def derive_degradation_code(seed: bytes, pid: bytes, secret: bytes) -> str:
    """The degradation code (section 10.2) of the person ``pid`` for the
    10-byte interim device secret ``secret``: ``"ABCD-EFGH-IJKL-MNOP-QRST-UVWX"``."""
    pid_array, pid_len = _bytes_argument(pid, "pid")
    secret_array, secret_len = _bytes_argument(secret, "secret")

    def call(s: Array[c_uint8], n: int) -> str:
        return read_text(
            lambda buf, cap, out_len: lib.itsme_derive_degradation_code(
                s, n, pid_array, pid_len, secret_array, secret_len, buf, cap, out_len
            ),
            DEGRADATION_CODE_SIZE,
            thread_last_error,
        )

    try:
        return _with_seed(seed, call)
    finally:
        _wipe(secret_array)
