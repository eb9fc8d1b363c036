"""The invite-mailbox driver (``itsme_mailbox_session``, docs/PROTOCOL.md
16.5) and the Online Verify room rule (``itsme_online_verify_rendezvous``,
11.1): the library's rules, which :mod:`itsme.relay` carries over HTTP and
WebSocket."""

from __future__ import annotations

import enum
from ctypes import byref, c_size_t, c_uint32, c_void_p
from typing import List, Optional

from ._contacts import ContactStore, _wipe
from ._errors import NotFoundError, check
from ._exchange import REMOTE_MESSAGE_MAX, Exchange, _contact_store
from ._ffi import lib
from ._handle import DetailedHandle, encode_text, int_argument, new_handle, read_bytes, read_text, unix_time
from ._online_verify import ROOM_NAME_SIZE, OnlineVerify
from ._profile import bytes_in
from ._random import DeterministicRandom, use_random
from ._session import window_of
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

    def request_path(self) -> str:
        return self._read(read_text, lib.itsme_mailbox_session_request_path, 128)

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
