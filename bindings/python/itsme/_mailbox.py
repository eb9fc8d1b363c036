"""The invite-mailbox driver (``itsme_mailbox_session``, docs/PROTOCOL.md
16.5), the room driver (``itsme_room_session``, 16.5, 15.3) and the Online
Verify room rule (``itsme_online_verify_rendezvous``, 11.1): the library's
rules, which :mod:`itsme.relay` carries over HTTP and WebSocket."""

from __future__ import annotations

import enum
from ctypes import byref, c_bool, c_size_t, c_uint32, c_void_p
from typing import Any, Dict, List, Optional, Tuple

from ._contacts import ContactStore, _wipe
from ._errors import NotFoundError, check
from ._exchange import REMOTE_MESSAGE_MAX, Exchange, _contact_store
from ._ffi import lib
from ._handle import (
    DetailedHandle,
    encode_text,
    int_argument,
    new_handle,
    read_bytes,
    read_text,
    thread_last_error,
    unix_time,
)
from ._online_verify import ROOM_NAME_SIZE, OnlineVerify
from ._profile import bytes_in
from ._random import DeterministicRandom, use_random
from ._session import window_of
from ._transfer import TRANSFER_MESSAGE_MAX, Transfer
from ._voice import CallBinding, _call_binding

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class MailboxRequest(enum.IntEnum):
    """``itsme_mailbox_request`` (``ITSME_MAILBOX_REQUEST_*``)."""

    CREATE = 1
    ACCEPT = 2
    POST = 3
    FETCH = 4
    DELETE = 5
    #: Nothing more in this step.
    IDLE = 6
    #: Nothing more to do on the relay.
    DONE = 7


class MailboxOutcome(enum.IntEnum):
    """``itsme_mailbox_outcome`` (``ITSME_MAILBOX_OUTCOME_*``)."""

    PROCEED = 1
    INVITE_ENDED = 2
    CONFLICT = 3
    #: The relay refused or did not answer: the step ended, nothing changed.
    STEP_ENDED = 4


def _exchange(exchange: object) -> Exchange:
    if not isinstance(exchange, Exchange):
        raise TypeError(f"exchange must be an Exchange, not {type(exchange).__name__}")
    return exchange


class MailboxSession(DetailedHandle):
    """The library's invite-mailbox driver over ``exchange``: which request
    to make next (:meth:`next_request`, :meth:`request_path`,
    :meth:`request_body`, :meth:`token`) and what the relay's answer means
    (:meth:`answer`, given the HTTP status and body).  Its state is
    :meth:`save` (JSON).  Not for use by two threads at once."""

    _kind = "mailbox session"
    _free_function = lib.itsme_mailbox_session_free
    _last_error_name = "itsme_mailbox_session_last_error"

    def __init__(self, exchange: Exchange, saved: Optional[str] = None) -> None:
        exchange = _exchange(exchange)
        out = c_void_p()
        with exchange._use() as exchange_ptr:
            if saved is None:
                code = lib.itsme_mailbox_session_new(exchange_ptr, byref(out))
            else:
                code = lib.itsme_mailbox_session_resume(exchange_ptr, encode_text(saved, "saved"), byref(out))
            check(code, lambda: Exchange._detail(exchange_ptr))
        super().__init__(new_handle(out))
        # The C session holds its exchange; the Python object is kept too.
        self._exchange = exchange

    def begin(self, wait: int) -> None:
        self._call(lib.itsme_mailbox_session_begin, int_argument(wait, "wait", 0, 2**32 - 1))

    def next_request(self) -> MailboxRequest:
        request = c_uint32()
        self._call(lib.itsme_mailbox_session_next_request, byref(request))
        return MailboxRequest(request.value)

    def request_method(self) -> str:
        return self._read(read_text, lib.itsme_mailbox_session_request_method, 8)

    def request_path(self) -> str:
        return self._read(read_text, lib.itsme_mailbox_session_request_path, 128)

    def request_headers(self) -> Dict[str, str]:
        """The pending request's headers; they hold the relay token."""
        return _header_lines(self._read(read_text, lib.itsme_mailbox_session_request_headers, 256))

    def request_body(self) -> bytes:
        return self._read(read_bytes, lib.itsme_mailbox_session_request_body, REMOTE_MESSAGE_MAX)

    def token(self) -> Optional[str]:
        try:
            return self._read(read_text, lib.itsme_mailbox_session_token, 44)
        except NotFoundError:
            return None

    def answer(self, status: int, body: bytes, now: Optional[int]) -> MailboxOutcome:
        outcome = c_uint32()
        array, length = bytes_in(body, "body")
        self._call(
            lib.itsme_mailbox_session_answer,
            int_argument(status, "status", 0, 999),
            array,
            length,
            unix_time(now),
            byref(outcome),
        )
        return MailboxOutcome(outcome.value)

    def finish(self, give_up: bool = False) -> None:
        self._call(lib.itsme_mailbox_session_finish, bool(give_up))

    def save(self) -> str:
        return self._read(read_text, lib.itsme_mailbox_session_save, 512)


class RelayRoute(enum.IntEnum):
    """``itsme_relay_route`` (``ITSME_RELAY_ROUTE_*``): the relay's routes."""

    INVITE = 1
    INVITE_ACCEPT = 2
    INVITE_MESSAGES = 3
    ROOM = 4
    GROUP = 5
    RECORD = 6


def relay_path(route: RelayRoute, relay_id: str) -> str:
    """The relay's path of ``route`` for the ID ``relay_id`` (32 lower-case
    hex characters), from the library (``itsme_relay_path``).  Raises
    :class:`InvalidArgumentError` for an ID of another form."""
    route = RelayRoute(route)
    encoded = encode_text(relay_id, "id")

    def call(buf: object, cap: int, out_len: object) -> int:
        return int(lib.itsme_relay_path(int(route), encoded, buf, cap, out_len))

    return read_text(call, 64, thread_last_error)


class RelayAnswer(enum.IntEnum):
    """``itsme_relay_answer`` (``ITSME_RELAY_ANSWER_*``): what a status means."""

    SUCCESS = 1
    #: Nothing there (404).
    GONE = 2
    #: A refusal, or no answer.
    REFUSED = 3


class RelayHeader(enum.IntEnum):
    """``itsme_relay_header`` (``ITSME_RELAY_HEADER_*``)."""

    AUTHORIZATION = 1
    RETRY_AFTER = 2
    CONTENT_TYPE = 3
    ACCEPT = 4
    ALLOW = 5


def relay_answer(route: RelayRoute, method: str, status: int) -> RelayAnswer:
    """What the relay's ``status`` (0: none came) means for ``method`` on
    ``route`` (``itsme_relay_answer_of``)."""
    out = c_uint32()
    check(
        lib.itsme_relay_answer_of(
            int(RelayRoute(route)), encode_text(method, "method"), int_argument(status, "status", 0, 999), byref(out)
        ),
        thread_last_error,
    )
    return RelayAnswer(out.value)


def _header_lines(text: str) -> Dict[str, str]:
    """Header lines ("Name: value", CRLF between) as a dict."""
    return dict(line.split(": ", 1) for line in text.split("\r\n") if line)


def relay_request_headers(route: RelayRoute, method: str, token: Optional[str] = None) -> Dict[str, str]:
    """The headers of ``method`` on ``route`` (``itsme_relay_request_headers``):
    the answer taken, ``token`` where the route takes one, the type of the
    bytes it carries."""
    route = RelayRoute(route)
    encoded_method = encode_text(method, "method")
    encoded_token = None if token is None else encode_text(token, "token")

    def call(buf: object, cap: int, out_len: object) -> int:
        return int(lib.itsme_relay_request_headers(int(route), encoded_method, encoded_token, buf, cap, out_len))

    return _header_lines(read_text(call, 256, thread_last_error))


def relay_refusal(status: int, body: bytes) -> Tuple[Optional[str], str]:
    """The relay's refusal (``itsme_relay_refusal_kind`` and ``_message``):
    the kind its body names (None if none) and a line for a person."""
    array, length = bytes_in(body, "body")
    code = int_argument(status, "status", 0, 999)

    def reader(function: Any) -> str:
        def call(buf: object, cap: int, out_len: object) -> int:
            return int(function(code, array, length, buf, cap, out_len))

        return read_text(call, 512, thread_last_error)

    kind = reader(lib.itsme_relay_refusal_kind)
    return (kind or None), reader(lib.itsme_relay_refusal_message)


def relay_record_stored(body: bytes) -> Optional[str]:
    """What the body of a record's successful PUT says
    (``itsme_relay_record_stored``): the new record's delete token, or None
    when these very bytes were stored already.  Raises
    :class:`MalformedMessageError` for any other body."""
    array, length = bytes_in(body, "body")

    def call(buf: object, cap: int, out_len: object) -> int:
        return int(lib.itsme_relay_record_stored(array, length, buf, cap, out_len))

    return read_text(call, 64, thread_last_error) or None


def relay_header_name(header: RelayHeader) -> str:
    """The name of ``header`` as the relay spells it (``itsme_relay_header_name``)."""
    header = RelayHeader(header)

    def call(buf: object, cap: int, out_len: object) -> int:
        return int(lib.itsme_relay_header_name(int(header), buf, cap, out_len))

    return read_text(call, 32, thread_last_error)


class RoomStep(enum.IntEnum):
    """``itsme_room_step`` (``ITSME_ROOM_STEP_*``)."""

    #: Send :meth:`RoomSession.message` as one binary message.
    SEND = 1
    #: Wait for what the room sends next.
    RECEIVE = 2
    #: The person compares the SAS: confirm or reject the exchange.
    DECIDE = 3
    #: Close the connection, then :meth:`RoomSession.left`.
    LEAVE = 4
    #: Nothing more.
    DONE = 5
    #: As :attr:`RECEIVE`, for at most :data:`ROOM_PEER_CHECK_WAIT_MS`, then
    #: :meth:`RoomSession.timed_out`: the peer is still there.
    CHECK_PEER = 6
    #: Join the room again after :data:`ROOM_REJOIN_PAUSE_MS`, then
    #: :meth:`RoomSession.rejoined`.
    REJOIN = 7


class RoomFailure(enum.IntEnum):
    """``itsme_room_failure`` (``ITSME_ROOM_FAILURE_*``)."""

    NONE = 0
    PEER_LEFT = 1
    REFUSED = 2
    ROOM_FULL = 3
    CLOSED = 4
    TIMEOUT = 5
    BAD_RESPONSE = 6


#: How often to ping the room from :attr:`RoomStep.DECIDE` on, in seconds.
ROOM_PING_INTERVAL = 30
#: How long :attr:`RoomStep.CHECK_PEER` reads the room, in milliseconds.
ROOM_PEER_CHECK_WAIT_MS = 200
#: How long to wait before :attr:`RoomStep.REJOIN`, in milliseconds.
ROOM_REJOIN_PAUSE_MS = 500


class RoomSession(DetailedHandle):
    """The library's room driver over a real-time :class:`Exchange`, an
    :class:`OnlineVerify` session (``peer_present``: the host already saw
    the peer join) or a live :class:`Transfer` on either device: the WebSocket :meth:`path` to join, what to do next
    (:meth:`next`) and what the room sent (:meth:`text`, :meth:`binary`,
    :meth:`connection_closed`, :meth:`timed_out`); every rule is the
    library's.  Not for use by two threads at once."""

    _kind = "room session"
    _free_function = lib.itsme_room_session_free
    _last_error_name = "itsme_room_session_last_error"

    def __init__(self, flow: object, *, peer_present: bool = False) -> None:
        out = c_void_p()
        if isinstance(flow, Exchange):
            with flow._use() as ptr:
                check(lib.itsme_room_session_for_exchange(ptr, byref(out)), lambda: Exchange._detail(ptr))
        elif isinstance(flow, OnlineVerify):
            with flow._use() as ptr:
                check(
                    lib.itsme_room_session_for_online_verify(ptr, bool(peer_present), byref(out)),
                    lambda: OnlineVerify._detail(ptr),
                )
        elif isinstance(flow, Transfer):
            with flow._use() as ptr:
                check(lib.itsme_room_session_for_transfer(ptr, byref(out)), lambda: Transfer._detail(ptr))
        else:
            raise TypeError(f"flow must be an Exchange, an OnlineVerify or a Transfer, not {type(flow).__name__}")
        super().__init__(new_handle(out))
        # The C session holds its flow; the Python object is kept too.
        self._flow = flow

    def path(self) -> str:
        """The room's path below the relay's base URL."""
        return self._read(read_text, lib.itsme_room_session_path, 64)

    def next(self, now: Optional[int] = None) -> RoomStep:
        step = c_uint32()
        self._call(lib.itsme_room_session_next, unix_time(now), byref(step))
        return RoomStep(step.value)

    def message(self) -> bytes:
        """The message of the :attr:`RoomStep.SEND` step."""
        largest = TRANSFER_MESSAGE_MAX if isinstance(self._flow, Transfer) else REMOTE_MESSAGE_MAX
        return self._read(read_bytes, lib.itsme_room_session_message, largest)

    def sent(self) -> None:
        self._call(lib.itsme_room_session_sent)

    def send_failed(self) -> None:
        self._call(lib.itsme_room_session_send_failed)

    def text(self, text: bytes) -> None:
        """A text frame from the relay, as it came."""
        array, length = bytes_in(text, "text")
        self._call(lib.itsme_room_session_text, array, length)

    def binary(self, frame: bytes, now: Optional[int] = None) -> None:
        """A binary frame from the peer; raises the flow's error for one it refuses."""
        array, length = bytes_in(frame, "frame")
        self._call(lib.itsme_room_session_binary, array, length, unix_time(now))

    def connection_closed(self, code: Optional[int]) -> None:
        """The connection ended with the relay's close ``code`` (None: none came)."""
        self._call(lib.itsme_room_session_closed, int_argument(code or 0, "code", 0, 4999))

    def timed_out(self) -> None:
        self._call(lib.itsme_room_session_timed_out)

    def rejoined(self) -> None:
        """The room was joined again after :attr:`RoomStep.REJOIN`."""
        self._call(lib.itsme_room_session_rejoined)

    def left(self) -> None:
        self._call(lib.itsme_room_session_left)

    def abandon(self) -> None:
        self._call(lib.itsme_room_session_abandon)

    def peer_present(self) -> bool:
        """Whether the peer has been in the room (the relay said so)."""
        present = c_bool()
        self._call(lib.itsme_room_session_peer_present, byref(present))
        return present.value

    def failure(self) -> RoomFailure:
        failure = c_uint32()
        self._call(lib.itsme_room_session_failure, byref(failure))
        return RoomFailure(failure.value)

    def failure_kind(self) -> str:
        """The failure's name, as the relay and the clients name it ("" for none)."""
        return self._read(read_text, lib.itsme_room_session_failure_kind, 32)

    def failure_message(self) -> str:
        """The failure as a line for a person ("" for none)."""
        return self._read(read_text, lib.itsme_room_session_failure_message, 128)


def _adopt(ptr: int, store: ContactStore, contact_id: int, window: int) -> OnlineVerify:
    """An :class:`OnlineVerify` around a session handle the rendezvous gave."""
    session = OnlineVerify.__new__(OnlineVerify)
    DetailedHandle.__init__(session, ptr)
    session._store = store
    session._contact_id = contact_id
    session._window = window
    return session


class OnlineVerifyRendezvous(DetailedHandle):
    """The room rule of section 11.1 (``itsme_online_verify_rendezvous``):
    the two sessions with contact ``contact_id`` (the current window's and
    the previous one's), the rooms to be in (:meth:`rooms`), and which
    session goes on (:meth:`peer_joined`).  ``binding`` binds both sessions
    to the host's own call, as :class:`OnlineVerify` says (None: not
    bound).  Not for use by two threads at once."""

    _kind = "online verify rendezvous"
    _free_function = lib.itsme_online_verify_rendezvous_free
    _last_error_name = "itsme_online_verify_rendezvous_last_error"

    def __init__(
        self,
        store: ContactStore,
        contact_id: int,
        now: Optional[int] = None,
        random: Optional[DeterministicRandom] = None,
        *,
        binding: CallBinding = None,
    ) -> None:
        store = _contact_store(store)
        contact_id = int_argument(contact_id, "contact id", _INT64_MIN, _INT64_MAX)
        when = unix_time(now)
        buffer, length = _call_binding(binding)
        out = c_void_p()
        try:
            with use_random(random) as rng, store._use() as store_ptr:
                check(
                    lib.itsme_online_verify_rendezvous_new(
                        store_ptr, contact_id, buffer, length, rng, when, byref(out)
                    ),
                    lambda: ContactStore._detail(store_ptr),
                )
        finally:
            if buffer is not None:
                _wipe(buffer)
        super().__init__(new_handle(out))
        self._store = store
        self._contact_id = contact_id
        self._window = window_of(when)
        self._candidate_rooms = [self.session(0).room, self.session(1).room]

    def rooms(self) -> List[str]:
        """The rooms to be in now, in order of joining."""
        count = c_size_t()
        self._call(lib.itsme_online_verify_rendezvous_room_count, byref(count))
        rooms = []
        for index in range(count.value):
            with self._use() as ptr:
                rooms.append(
                    read_text(
                        lambda buf, cap, out_len: lib.itsme_online_verify_rendezvous_room(ptr, index, buf, cap, out_len),
                        ROOM_NAME_SIZE,
                        lambda: self._detail(ptr),
                    )
                )
        return rooms

    def _session(self, ptr: int, index: int) -> OnlineVerify:
        return _adopt(ptr, self._store, self._contact_id, self._window - index)

    def session(self, index: int) -> OnlineVerify:
        """Candidate ``index``'s session: 0 the current window's, 1 the previous one's."""
        out = c_void_p()
        self._call(lib.itsme_online_verify_rendezvous_session, int_argument(index, "index", 0, 2**63), byref(out))
        return self._session(new_handle(out), index)

    def alone(self, room: str) -> None:
        """The first event of the current window's room was not the peer's arrival."""
        self._call(lib.itsme_online_verify_rendezvous_alone, encode_text(room, "room"))

    def peer_joined(self, room: str) -> OnlineVerify:
        """The peer joined ``room``: the session to run there."""
        out = c_void_p()
        self._call(lib.itsme_online_verify_rendezvous_peer_joined, encode_text(room, "room"), byref(out))
        index = self._candidate_rooms.index(room) if room in self._candidate_rooms else 0
        return self._session(new_handle(out), index)
