"""A client of ``itsme-relay`` (docs/PROTOCOL.md section 15) that moves the
library's messages.

The library does no I/O: an :class:`~itsme.Exchange` at a distance and an
:class:`~itsme.OnlineVerify` session only say what to send and take what
arrives.  This module carries those bytes, and nothing else, to and from a
relay:

* :class:`InviteMailbox`: the invite mailbox's HTTP routes (15.2), over one
  keep-alive connection of the standard library's ``http.client``.
* :class:`InviteSession`: drives an invite exchange through the mailbox, one
  :meth:`~InviteSession.step` at a time; its small state is saved next to
  the sealed exchange (:meth:`~InviteSession.to_dict`), so each side may go
  offline between its steps.
* :class:`Room`: a relay room (15.3), a WebSocket through the
  ``websockets`` package (imported on first use; ``pip install websockets``).
* :func:`realtime_exchange`: a real-time exchange through a room, while
  both people are on a call.
* :func:`online_verify` and :func:`start_online_verify`: Online Verify
  through a room (section 11).

An invite exchange, on each side; here both sides run in one program,
Alice's (``me``, ``contacts``) and Carol's, against the relay at
``relay_url`` (``"https://relay.example"``)::

    >>> exchange = itsme.Exchange.invite(me, contacts)        # Alice invites
    >>> session = InviteSession(InviteMailbox(relay_url), exchange)
    >>> session.step()                                       # posts the invite
    <ExchangeState.AWAITING_PEER: ...>
    >>> codes = exchange.invite_code, exchange.encryption_code   # Alice tells Carol both
    >>> carol = itsme.Identity.create(itsme.SecretStore.memory(), "Carol")
    >>> carols_contacts = itsme.ContactStore.open(carol, tmp + "/carol.db")
    >>> theirs = itsme.Exchange.accept_invite(carol, carols_contacts, *codes)
    >>> their_session = InviteSession(InviteMailbox(relay_url), theirs)
    >>> for _ in range(10):    # step(wait=30) in turn; or save, go offline, come back
    ...     if exchange.state == theirs.state == ExchangeState.COMPARE_SAS:
    ...         break
    ...     _ = their_session.step(); _ = session.step()
    >>> exchange.sas == theirs.sas                           # compare it on a call
    True

Failures raise :class:`RelayError` (the relay refused, or could not be
reached: ``status``, ``kind``, ``message``, ``retry_after``), its subclass
:class:`InviteEndedError` (the invite is gone: the other side ended it, or it
expired), or the library's :class:`~itsme.ItsMeError` when a message the
relay delivered is refused by the exchange.
"""

from __future__ import annotations

import base64
import binascii
import http.client
import inspect
import json
import re
import socket
import ssl
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Optional, Tuple

from ._contacts import ContactStore, ExchangeMethod
from ._errors import ItsMeError, MalformedMessageError
from ._exchange import Exchange, ExchangeState
from ._mailbox import (
    ROOM_PEER_CHECK_WAIT_MS,
    ROOM_PING_INTERVAL,
    MailboxOutcome,
    MailboxRequest,
    MailboxSession,
    OnlineVerifyRendezvous,
    RelayAnswer,
    RelayHeader,
    RelayRoute,
    RoomFailure,
    RoomSession,
    RoomStep,
    relay_answer,
    relay_header_name,
    relay_path,
    relay_record_stored,
    relay_refusal,
    relay_request_headers,
)
from ._online_verify import OnlineVerify, OnlineVerifyState
from ._random import DeterministicRandom
from ._voice import CallBinding

__all__ = [
    "InviteEndedError",
    "InviteMailbox",
    "InviteSession",
    "RelayError",
    "Room",
    "online_verify",
    "realtime_exchange",
    "start_online_verify",
]

_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")
# The relay holds a fetch for at most 30 seconds (15.2).
_WAIT_MAX = 30.0
# The relay closes a connection that sends no request for 10 seconds
# (--request-timeout); a connection idle for longer than this is replaced
# before use rather than found dead.
_IDLE_REUSE = 5.0
# Rooms forward at most 65,536 bytes a frame (--max-frame).
_FRAME_MAX = 65536
# Errors of a connection that the other end closed or reset.
_DROPPED = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


def _tls_failure(host: Optional[str], port: Optional[int], error: ssl.SSLError) -> str:
    """One line: which relay, and why its TLS failed (OpenSSL's reason,
    e.g. "certificate has expired", or "unable to get local issuer
    certificate" for a private CA: pass an ``ssl_context`` that trusts it,
    or set SSL_CERT_FILE), without OpenSSL's source file and line."""
    where = f"{host}:{port or 443}"
    if isinstance(error, ssl.SSLCertVerificationError) and error.verify_message:
        return f"TLS with the relay at {where} failed: {error.verify_message}"
    return f"TLS with the relay at {where} failed: {error.reason or 'handshake failed'}"


class RelayError(Exception):
    """The relay refused a request, answered something unexpected, or could
    not be reached.

    ``status`` is the HTTP status (None when there was no answer, and for
    room events), ``kind`` the relay's error kind (``"not-found"``,
    ``"conflict"``, ``"rate-limited"``, ``"busy"``...; the client's own:
    ``"connection"`` (also a failed TLS handshake: the message says why,
    e.g. the relay's certificate is not trusted, expired, or for another
    name), ``"timeout"``, ``"bad-response"``; for rooms:
    ``"peer-left"``, ``"refused"``, ``"room-full"``, ``"closed"``),
    ``message`` a line for a person, and ``retry_after`` the seconds the
    relay asked to wait (429 and 503), else None.
    """

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        kind: Optional[str] = None,
        retry_after: Optional[int] = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = " ".join(str(part) for part in (self.status, self.kind) if part is not None)
        return f"{self.message} ({where})" if where else self.message


class InviteEndedError(RelayError):
    """The invite is no longer on the relay (``404 not-found``): the other
    side ended it (its check of a message failed, or it gave up), it
    expired, or it never existed.  Start a new exchange."""


# -- HTTP ------------------------------------------------------------------------------


def _is_token(token: object) -> bool:
    """Whether ``token`` has a relay token's form, by the library's rule
    (a token it would present)."""
    if not isinstance(token, str):
        return False
    try:
        relay_request_headers(RelayRoute.INVITE, "DELETE", token)
    except ValueError:
        return False
    return True


def _b64url_decode(text: Any) -> bytes:
    if not isinstance(text, str) or not _BASE64URL.fullmatch(text) or len(text) % 4 == 1:
        raise RelayError("the relay sent a message body that is not unpadded base64url", kind="bad-response")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as error:
        raise RelayError("the relay sent a message body that is not base64url", kind="bad-response") from error


def _refusal(
    cls: "type[RelayError]", status: int, headers: Any, body: bytes, message: Optional[str] = None
) -> RelayError:
    """The relay's refusal as the library reads it (its kind and message),
    with the seconds it asked to wait; ``message`` says it in the caller's
    words instead."""
    kind, said = relay_refusal(status, body)
    retry_after = None
    header = headers.get(relay_header_name(RelayHeader.RETRY_AFTER))
    if header is not None and header.strip().isdigit():
        retry_after = int(header.strip())
    return cls(message or said, status=status, kind=kind, retry_after=retry_after)


class InviteMailbox:
    """The relay's invite mailbox (docs/PROTOCOL.md 15.2) at ``base_url``
    (``http://`` or ``https://``, with an optional path prefix).

    One keep-alive connection per object, replaced when the relay dropped
    it: a request that finds its reused connection closed before any answer
    is sent once more on a new one.  ``timeout`` bounds each request (a
    held fetch gets its ``wait`` on top); ``ssl_context`` is for HTTPS
    (default: the system's certificate checks).  Not for use by two threads
    at once.  Refusals raise :class:`RelayError`; ``404`` raises
    :class:`InviteEndedError`.
    """

    def __init__(self, base_url: str, *, timeout: float = 15.0, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"base_url must be an http:// or https:// URL, not {base_url!r}")
        if parsed.query or parsed.fragment:
            raise ValueError("base_url must not carry a query or fragment")
        self.base_url = base_url
        self._https = parsed.scheme == "https"
        self._host = parsed.hostname
        self._port = parsed.port
        self._prefix = parsed.path.rstrip("/")
        self._timeout = float(timeout)
        self._ssl_context = ssl_context
        self._connection: Optional[http.client.HTTPConnection] = None
        self._last_used = 0.0
        #: The ``expires`` (unix seconds) of the last invite created or accepted.
        self.last_expires: Optional[float] = None

    # -- the connection ------------------------------------------------------

    def _new_connection(self) -> http.client.HTTPConnection:
        if self._https:
            context = self._ssl_context or ssl.create_default_context()
            return http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout, context=context)
        return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)

    def close(self) -> None:
        """Closes the connection (the next request opens a new one)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def __enter__(self) -> "InviteMailbox":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _request(
        self,
        method: str,
        path: str,
        *,
        headers: Dict[str, str],
        body: Optional[bytes] = None,
        timeout: Optional[float] = None,
    ) -> Tuple[int, Any, bytes]:
        headers = dict(headers)
        if body is None and method in ("POST", "PUT"):
            headers["Content-Length"] = "0"
        limit = self._timeout if timeout is None else timeout
        for attempt in (1, 2):
            if self._connection is not None and time.monotonic() - self._last_used > _IDLE_REUSE:
                self.close()
            reused = self._connection is not None
            if self._connection is None:
                self._connection = self._new_connection()
            connection = self._connection
            connection.timeout = limit
            if connection.sock is not None:
                connection.sock.settimeout(limit)
            try:
                connection.request(method, self._prefix + path, body=body, headers=headers)
                response = connection.getresponse()
                data = response.read()
            except _DROPPED as error:
                self.close()
                if reused and attempt == 1:
                    continue  # the relay had closed the idle connection
                raise RelayError(f"the connection to the relay was lost ({error})", kind="connection") from error
            except (TimeoutError, socket.timeout) as error:
                self.close()
                raise RelayError("the relay did not answer in time", kind="timeout") from error
            except ssl.SSLError as error:
                self.close()
                raise RelayError(_tls_failure(self._host, self._port, error), kind="connection") from error
            except (OSError, http.client.HTTPException) as error:
                self.close()
                raise RelayError(f"cannot reach the relay ({error})", kind="connection") from error
            if response.will_close:
                self.close()
            else:
                self._last_used = time.monotonic()
            return response.status, response.headers, data
        raise AssertionError("unreachable")

    @staticmethod
    def _json(data: bytes) -> Dict[str, Any]:
        try:
            value = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            raise RelayError("the relay's answer is not JSON", kind="bad-response") from error
        if not isinstance(value, dict):
            raise RelayError("the relay's answer is not a JSON object", kind="bad-response")
        return value

    def _call(
        self,
        route: RelayRoute,
        method: str,
        relay_id: str,
        *,
        path: Optional[str] = None,
        token: Optional[str] = None,
        body: Optional[bytes] = None,
        timeout: Optional[float] = None,
    ) -> bytes:
        """Makes ``method`` on ``route`` for ``relay_id`` (at ``path`` when
        it carries a query) with the library's headers for it; the body of a
        success, else the refusal raised as the library reads it."""
        where = relay_path(route, relay_id)
        headers = relay_request_headers(route, method, token)
        status, answer_headers, data = self._request(method, path or where, headers=headers, body=body, timeout=timeout)
        meaning = relay_answer(route, method, status)
        if meaning == RelayAnswer.SUCCESS:
            return data
        raise _refusal(InviteEndedError if meaning == RelayAnswer.GONE else RelayError, status, answer_headers, data)

    def _token_answer(self, data: bytes) -> str:
        answer = self._json(data)
        token = answer.get("token")
        if not isinstance(token, str) or not _is_token(token):
            raise RelayError("the relay's answer carries no valid token", kind="bad-response")
        expires = answer.get("expires")
        self.last_expires = float(expires) if isinstance(expires, (int, float)) else None
        return token

    # -- the routes ------------------------------------------------------------

    def create(self, invite_id: str) -> str:
        """Creates the invite ``invite_id``; returns the inviter's token.
        ``409 conflict`` if the ID is in use."""
        return self._token_answer(self._call(RelayRoute.INVITE, "POST", invite_id))

    def accept(self, invite_id: str) -> str:
        """Binds the caller as the invitee; returns the invitee's token.
        ``409 conflict`` if someone accepted it already."""
        return self._token_answer(self._call(RelayRoute.INVITE_ACCEPT, "POST", invite_id))

    def post(self, invite_id: str, token: str, body: bytes) -> int:
        """Posts one message (1 to 65,536 bytes); returns its sequence number."""
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise TypeError(f"body must be bytes, not {type(body).__name__}")
        body = bytes(body)
        answer = self._json(self._call(RelayRoute.INVITE_MESSAGES, "POST", invite_id, token=token, body=body))
        seq = answer.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
            raise RelayError("the relay's answer carries no sequence number", kind="bad-response")
        return seq

    def fetch(self, invite_id: str, token: str, after: int = 0, wait: float = 0) -> Tuple[bool, List[Tuple[int, bytes]]]:
        """The other side's messages with ``seq > after``, oldest first, as
        ``(accepted, [(seq, body), ...])``; ``accepted`` tells whether an
        invitee is bound.  With ``wait`` (0 to 30 seconds) and nothing to
        return, the relay holds the request until something arrives."""
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise ValueError("after must be a non-negative integer")
        if not 0 <= wait <= _WAIT_MAX:
            raise ValueError("wait must be 0 to 30 seconds")
        seconds = int(wait)
        query = urllib.parse.urlencode({"after": after, "wait": seconds})
        path = f"{relay_path(RelayRoute.INVITE_MESSAGES, invite_id)}?{query}"
        answer = self._json(
            self._call(RelayRoute.INVITE_MESSAGES, "GET", invite_id, path=path, token=token, timeout=self._timeout + seconds)
        )
        accepted, messages = answer.get("accepted"), answer.get("messages")
        if not isinstance(accepted, bool) or not isinstance(messages, list):
            raise RelayError("the relay's answer is not a list of messages", kind="bad-response")
        result = []
        for message in messages:
            seq = message.get("seq") if isinstance(message, dict) else None
            if not isinstance(seq, int) or isinstance(seq, bool):
                raise RelayError("the relay sent a message without a sequence number", kind="bad-response")
            result.append((seq, _b64url_decode(message.get("body"))))
        return accepted, result

    def delete(self, invite_id: str, token: str) -> None:
        """Ends the invite (either side's token): the relay erases it."""
        self._call(RelayRoute.INVITE, "DELETE", invite_id, token=token)

    def __repr__(self) -> str:
        return f"<InviteMailbox {self.base_url}>"


# -- the invite exchange, step by step ------------------------------------------------------


_PENDING = (ExchangeState.AWAITING_PEER, ExchangeState.COMPARE_SAS, ExchangeState.AWAITING_DECISION)


class InviteSession:
    """Drives an invite exchange (:meth:`Exchange.invite` or
    :meth:`Exchange.accept_invite`, not real-time) through ``mailbox``.

    Each :meth:`step` creates (inviter) or accepts (invitee) the invite on
    first use, posts what the exchange has to send, fetches the other
    side's new messages and feeds them to the exchange in order (a message
    already seen, by its sequence number, is skipped), posts the answers,
    and returns the exchange's state.  Then:

    * once the SAS is ready, the session goes on carrying the two decisions
      (docs/PROTOCOL.md 8.1, 16.3 step 5): it posts this side's (after
      :meth:`Exchange.confirm` or ``reject``; the inviter's confirmation
      goes out once the invitee's decision arrived) and fetches the
      peer's, which sets ``PEER_CONFIRMED`` or ``PEER_REJECTED``: then call
      :meth:`Exchange.settle`;
    * the invitee ends the invite on the relay once it has read the
      inviter's decision, so nothing about a completed exchange stays
      there (a side that rejects ends it at once: for the peer, no decision
      counts as a rejection);
    * a message the exchange refuses (a wrong encryption code, a relay that
      changed, replayed or reordered messages) ends the invite on the relay
      too, so the other side fails as well, and the library's error is
      raised;
    * an invite that is gone (the other side ended it, or it expired)
      rejects the exchange and raises :class:`InviteEndedError`.

    Between steps either side may go offline: save :meth:`to_dict` with the
    sealed exchange (:meth:`Exchange.seal`), and later :meth:`from_dict`
    with the restored one.  Save both after every step: a step that ran
    after the last save may have posted messages the saved state does not
    know about.  The dict holds the side's relay token: keep it as
    privately as the sealed exchange.
    """

    def __init__(self, mailbox: InviteMailbox, exchange: Exchange, _saved: Optional[str] = None) -> None:
        if not isinstance(exchange, Exchange):
            raise TypeError(f"exchange must be an Exchange, not {type(exchange).__name__}")
        if exchange.method != ExchangeMethod.INVITE:
            raise ValueError("an InviteSession carries an invite exchange (a real-time one goes through a room)")
        self.mailbox = mailbox
        self.exchange = exchange
        self.relay_id = exchange.relay_id
        self.is_inviter = exchange.is_inviter
        # The library's driver (docs/PROTOCOL.md 16.5): this class only
        # moves its requests over HTTP.
        self._core = MailboxSession(exchange, _saved)
        # The relay may hold the step's fetch this many seconds.
        self._wait = 0

    # -- state ---------------------------------------------------------------

    def _state(self) -> Dict[str, Any]:
        state: Dict[str, Any] = json.loads(self._core.save())
        return state

    @property
    def token(self) -> Optional[str]:
        """This side's relay token, once the invite was created or accepted."""
        return self._core.token()

    @property
    def last_seq(self) -> int:
        """The sequence number of the last message fed to the exchange."""
        return int(self._state()["last_seq"])

    @property
    def done(self) -> bool:
        """Nothing more to do on the relay (the exchange has its SAS and
        its messages are out, or it ended)."""
        return bool(self._state()["done"])

    @property
    def accepted(self) -> Optional[bool]:
        """Whether an invitee is bound, as of the last fetch (None before one)."""
        accepted = self._state().get("accepted")
        return accepted if isinstance(accepted, bool) else None

    def to_dict(self) -> Dict[str, Any]:
        """The session's state, JSON-serialisable, to save with the sealed
        exchange: the keys ``version``, ``relay_id``, ``inviter``, ``token``,
        ``last_seq``, ``unsent``, ``done`` and, once known, ``accepted``."""
        return self._state()

    @classmethod
    def from_dict(cls, mailbox: InviteMailbox, exchange: Exchange, state: Dict[str, Any]) -> "InviteSession":
        """A session resumed from :meth:`to_dict`, with the exchange restored
        from the seal saved at the same time.  Raises ValueError for a state
        of another exchange or of an unknown form."""
        if not isinstance(state, dict):
            raise ValueError("not a saved InviteSession state of a known version")
        try:
            text = json.dumps(state)
        except (TypeError, ValueError) as error:
            raise ValueError("the saved state is malformed") from error
        return cls(mailbox, exchange, text)

    # -- running ---------------------------------------------------------------

    def step(self, wait: float = 0, now: Optional[int] = None) -> ExchangeState:
        """One round with the relay; returns :attr:`Exchange.state`.

        ``wait`` (0 to 30 seconds) holds the fetch on the relay until the
        other side posts: the exchange then moves at network speed.
        ``now`` is passed to :meth:`Exchange.receive`.  Transient failures
        (:class:`RelayError` other than :class:`InviteEndedError`: the
        relay unreachable, busy or rate-limiting) change nothing: step
        again later.
        """
        if not 0 <= wait <= _WAIT_MAX:
            raise ValueError("wait must be 0 to 30 seconds")
        self._wait = int(wait)
        self._core.begin(self._wait)
        self._run(now)
        return self.exchange.state

    def _run(self, now: Optional[int]) -> None:
        """Makes the library's requests, as it writes them, until it says
        the step is over; gives it each answer as the relay sent it."""
        core, mailbox = self._core, self.mailbox
        while True:
            request = core.next_request()
            if request in (MailboxRequest.IDLE, MailboxRequest.DONE):
                return
            method, path, headers = core.request_method(), core.request_path(), core.request_headers()
            body = core.request_body() or None
            try:
                status, answer_headers, data = mailbox._request(
                    method, path, headers=headers, body=body, timeout=mailbox._timeout + self._wait
                )
            except RelayError:
                core.answer(0, b"", now)  # no answer: the step ends, nothing changed
                raise
            try:
                outcome = core.answer(status, data, now)
            except ItsMeError:
                # Refused: the exchange has failed.  End the invite now, so
                # that the other side fails too instead of waiting (if the
                # relay cannot be reached now, the next step tries again).
                if self.exchange.state == ExchangeState.FAILED:
                    try:
                        self._run(now)
                    except RelayError:
                        pass
                raise
            if outcome == MailboxOutcome.PROCEED:
                continue
            if outcome == MailboxOutcome.INVITE_ENDED:
                raise _refusal(
                    InviteEndedError,
                    status,
                    answer_headers,
                    data,
                    "the invite is no longer on the relay: the other side ended it (its check failed, or it "
                    "gave up), or it expired; this exchange is rejected, start a new one",
                )
            if outcome == MailboxOutcome.CONFLICT:
                what = (
                    "an invite with this ID already exists: start a new exchange"
                    if self.is_inviter
                    else "someone else already accepted this invite: ask for a new one"
                )
                raise _refusal(RelayError, status, answer_headers, data, what)
            raise _refusal(RelayError, status, answer_headers, data)

    def finish(self) -> None:
        """Ends the invite on the relay now (idempotent).  :meth:`step`
        does it by itself once both decisions were read; a host calls it
        only to give up without rejecting (:meth:`cancel` rejects)."""
        self._core.finish()
        self._run(None)

    def cancel(self) -> None:
        """Gives up: ends the invite on the relay (so the other side fails)
        and rejects the exchange if it is still pending, deleting a contact
        saved for it.  The exchange is rejected even if
        the relay cannot be reached (:class:`RelayError` is then raised, and
        the invite stays on the relay until it expires)."""
        try:
            self._core.finish(give_up=True)
            self._run(None)
        finally:
            if self.exchange.state in _PENDING:
                self.exchange.reject()

    def __repr__(self) -> str:
        role = "inviter" if self.is_inviter else "invitee"
        return f"<InviteSession {role} {self.relay_id[:8]}... last_seq={self.last_seq} done={self.done}>"


# -- rooms -------------------------------------------------------------------------------


def _websocket_connect() -> Callable[..., Any]:
    try:
        from websockets.sync.client import connect
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "relay rooms need the websockets package (version 12 or later): pip install websockets"
        ) from error
    return connect


def _room_base(base_url: str) -> str:
    parsed = urllib.parse.urlsplit(base_url)
    schemes = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}
    if parsed.scheme not in schemes or not parsed.netloc:
        raise ValueError(f"base_url must be an http(s):// or ws(s):// URL, not {base_url!r}")
    return urllib.parse.urlunsplit((schemes[parsed.scheme], parsed.netloc, parsed.path.rstrip("/"), "", ""))


class Room:
    """A connection to the relay room ``room_id`` (docs/PROTOCOL.md 15.3), a
    WebSocket at the path the library gives.

    It moves frames and nothing else: what the relay and the peer send is
    read as it came (:meth:`next_input`), and the library's room driver
    (:func:`realtime_exchange`, :func:`online_verify`) gives it its meaning.
    ``base_url`` is the relay's (``https://`` becomes ``wss://``).  Needs
    the ``websockets`` package.  Joining fails with :class:`RelayError`
    (``kind`` ``"timeout"`` or ``"connection"``).
    """

    def __init__(
        self,
        base_url: str,
        room_id: str,
        *,
        open_timeout: float = 10.0,
        ssl_context: Optional[ssl.SSLContext] = None,
    ) -> None:
        connect = _websocket_connect()
        self.room_id = room_id
        self.url = _room_base(base_url) + relay_path(RelayRoute.ROOM, room_id)
        options: Dict[str, Any] = {"open_timeout": open_timeout, "close_timeout": 2, "max_size": _FRAME_MAX}
        options["compression"] = None
        if "ping_interval" in inspect.signature(connect).parameters:
            # Keeps the room alive while a person decides (15.3): a ping
            # counts as activity and is not forwarded.
            options["ping_interval"] = ROOM_PING_INTERVAL
        if ssl_context is not None:
            options["ssl"] = ssl_context
        try:
            # Entered as a context manager, as every websockets version
            # since 12 allows (17.1 and later require it).
            self._context = connect(self.url, **options)
            self._ws = self._context.__enter__()
        except TimeoutError as error:
            raise RelayError("the relay did not open the room in time", kind="timeout") from error
        except ssl.SSLError as error:
            where = urllib.parse.urlsplit(self.url)
            raise RelayError(_tls_failure(where.hostname, where.port, error), kind="connection") from error
        except Exception as error:  # websockets' handshake errors, OSError
            status = getattr(getattr(error, "response", None), "status_code", None)
            raise RelayError(f"cannot join the room ({error})", status=status, kind="connection") from error

    def close(self) -> None:
        """Leaves the room (the peer gets ``peer-left``); idempotent."""
        try:
            self._context.__exit__(None, None, None)
        except Exception:
            pass

    def __enter__(self) -> "Room":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def next_input(self, timeout: Optional[float]) -> Tuple[str, Any]:
        """What the room sends next, as it came: ``("text", bytes)`` (an
        event of the relay, JSON), ``("binary", bytes)`` (the peer's
        frame), ``("closed", code)`` (the connection ended; the relay's
        close code, None when none came), or ``("timeout", None)`` when
        nothing arrived within ``timeout`` seconds (None waits)."""
        from websockets.exceptions import ConnectionClosed

        try:
            message = self._ws.recv(timeout=timeout)
        except TimeoutError:
            return "timeout", None
        except ConnectionClosed as error:
            received = getattr(error, "rcvd", None)  # the close frame, if one came
            code = getattr(received, "code", None)
            return "closed", code if isinstance(code, int) else None
        if isinstance(message, bytes):
            return "binary", message
        return "text", message.encode("utf-8")

    def send(self, data: bytes) -> None:
        """Sends one binary frame to the peer; :class:`RelayError`
        (``"closed"``) when the connection has ended."""
        from websockets.exceptions import ConnectionClosed

        try:
            self._ws.send(bytes(data))
        except ConnectionClosed as error:
            raise RelayError("the room connection closed", kind="closed") from error

    def ping(self) -> None:
        """Sends a WebSocket ping: it keeps the room from closing as idle
        while a person decides (docs/PROTOCOL.md 15.3), and is not
        forwarded.  The connection also pings by itself every
        ``ROOM_PING_INTERVAL`` seconds."""
        from websockets.exceptions import ConnectionClosed

        try:
            self._ws.ping()
        except ConnectionClosed as error:
            raise RelayError("the room connection closed", kind="closed") from error

    def __repr__(self) -> str:
        return f"<Room {self.room_id[:8]}...>"


def _feed(session: RoomSession, arrived: Tuple[str, Any], now: Optional[int]) -> None:
    """Gives the room driver what the room sent."""
    kind, value = arrived
    if kind == "text":
        session.text(value)
    elif kind == "binary":
        session.binary(value, now)
    elif kind == "closed":
        session.connection_closed(value)
    else:
        session.timed_out()


def _room_failure(session: RoomSession) -> Optional[RelayError]:
    """The error for a room that ended the session early, else None."""
    if session.failure() == RoomFailure.NONE:
        return None
    return RelayError(session.failure_message(), kind=session.failure_kind())


def _drive(
    room: Room,
    session: RoomSession,
    deadline: float,
    now: Optional[int],
    decide: Callable[[], None] = lambda: None,
) -> None:
    """Carries ``session`` through ``room`` until it is done: the host's
    side of the library's room driver (``itsme_room_session``), which holds
    every rule; this moves frames and keeps time (the connection pings by
    itself).  ``decide`` answers the DECIDE step.  A frame the flow refuses
    is raised (the room is left, so the peer fails too); a room that failed
    raises :class:`RelayError`."""
    try:
        while True:
            step = session.next(now)
            if step == RoomStep.SEND:
                try:
                    room.send(session.message())
                except RelayError:
                    session.send_failed()
                else:
                    session.sent()
            elif step == RoomStep.RECEIVE:
                _feed(session, room.next_input(max(0.0, deadline - time.monotonic())), now)
            elif step == RoomStep.CHECK_PEER:
                wait = min(ROOM_PEER_CHECK_WAIT_MS / 1000, max(0.0, deadline - time.monotonic()))
                _feed(session, room.next_input(wait), now)
            elif step == RoomStep.DECIDE:
                decide()
            elif step == RoomStep.LEAVE:
                room.close()
                session.left()
            elif step == RoomStep.DONE:
                failure = _room_failure(session)
                if failure is not None:
                    raise failure
                return
            else:
                # REJOIN: only a transfer's session asks it, which this
                # module does not carry.
                raise RelayError(f"the room driver asked for {step.name}, which this client does not do")
    except BaseException:
        if session.failure() == RoomFailure.NONE:
            session.abandon()
        room.close()
        raise


def realtime_exchange(
    base_url: str,
    exchange: Exchange,
    *,
    decide: Callable[[Exchange], bool],
    timeout: float = 300.0,
    now: Optional[int] = None,
    ssl_context: Optional[ssl.SSLContext] = None,
) -> ExchangeState:
    """Runs a real-time exchange (``Exchange.invite(..., realtime=True)`` or
    ``accept_invite(..., realtime=True)``) through the relay room
    :attr:`Exchange.relay_id`, to the end, both decisions included
    (docs/PROTOCOL.md 8.1, 16.5); returns the final state: ``CONFIRMED``
    (the contact is verified in the exchange's store) or ``REJECTED``
    (nothing kept).

    Both sides call it while on a call; the inviter sends its INVITE once
    the other person is in the room.  When the SAS is ready the contact is
    saved and ``decide(exchange)`` is called: it shows
    :attr:`Exchange.sas` and returns True when the person says it matches
    (the connection pings the room meanwhile, so it does not close as
    idle).  This side's decision is sent, the peer's awaited and applied;
    the room is left once both passed.  A ``peer-left`` before the peer's
    decision counts as none: the exchange is rejected.  Every rule is the
    library's room driver's.  Raises the library's error when a frame is
    refused before the SAS (the room is left, so the peer fails too), and
    :class:`RelayError` (``"peer-left"``, ``"timeout"``...) when the room
    fails before the SAS, after rejecting the exchange.  A room that cannot
    be joined at all (``"connection"``) leaves the exchange as it was: try
    again.
    """
    session = RoomSession(exchange)
    deadline = time.monotonic() + timeout

    def decide_now() -> None:
        if decide(exchange):
            exchange.confirm(now)
        else:
            exchange.reject()

    room = Room(base_url, exchange.relay_id, open_timeout=timeout, ssl_context=ssl_context)
    try:
        _drive(room, session, deadline, now, decide_now)
    finally:
        session.close()
    return exchange.state


def online_verify(
    base_url: str,
    session: OnlineVerify,
    *,
    timeout: float = 60.0,
    now: Optional[int] = None,
    room: Optional[Room] = None,
    ssl_context: Optional[ssl.SSLContext] = None,
) -> OnlineVerifyState:
    """Runs an Online Verify session through its relay room
    (:attr:`OnlineVerify.room`, or the ``room`` given, already joined and
    the peer in it) until the peer's proof is checked (the state is no
    longer ``RUNNING``), and leaves the room; returns the state:

    * ``COMPARE_SAS``: both read the SAS aloud, then
      :meth:`OnlineVerify.confirm` or ``reject``;
    * ``BINDING_DIFFERS``: the peer's device holds the seed, but one of the
      two sessions is bound to the call (``binding``) and the other is not:
      nothing was recorded; tell the person to verify again with both
      bound, or neither;
    * ``OTHER_CALL``: the peer's device holds the seed but is bound to
      another call than this session's: nothing was recorded; warn the
      person that whoever is on this call may not be the contact.

    Raises the library's error when a message is refused (the room is left,
    so the peer fails too), :class:`RelayError` when the room fails (the
    session is then rejected: start a new one).
    """
    deadline = time.monotonic() + timeout
    driver = RoomSession(session, peer_present=room is not None)
    try:
        if room is None:
            room = Room(base_url, session.room, open_timeout=timeout, ssl_context=ssl_context)
        _drive(room, driver, deadline, now)
    finally:
        driver.close()
    return session.state


def start_online_verify(
    base_url: str,
    store: ContactStore,
    contact_id: int,
    *,
    now: Optional[int] = None,
    timeout: float = 60.0,
    random: Optional[DeterministicRandom] = None,
    ssl_context: Optional[ssl.SSLContext] = None,
    binding: CallBinding = None,
) -> OnlineVerify:
    """Online Verify with contact ``contact_id`` by the room rule of
    section 11.1 (the library's rendezvous), run until the peer's proof is
    checked: joins the room of the current window and, finding no peer
    there, also the one of the window before; the session of the room where
    the two meet goes on, the other is closed.  Returns that session, in the
    state
    :func:`online_verify` returns: ``COMPARE_SAS`` (show
    :attr:`OnlineVerify.sas`), or ``BINDING_DIFFERS`` or ``OTHER_CALL``
    (no SAS, nothing recorded: say why) when the two devices are bound to
    the call differently.

    ``binding`` binds the sessions to the host's own call
    (:class:`OnlineVerify` says what it is; None: not bound).  ``now`` (unix
    seconds) picks the window and is passed to the session.  Raises
    :class:`RelayError` (``"timeout"`` if nobody came), or the library's
    error for a refused message or a binding of another length.
    """
    when = int(time.time()) if now is None else now
    deadline = time.monotonic() + timeout
    rendezvous = OnlineVerifyRendezvous(store, contact_id, when, random=random, binding=binding)
    candidates = [rendezvous.session(index) for index in (0, 1)]
    # One room driver per room joined: it reads the room's events, so it
    # says whether the peer is there.
    joined: Dict[str, Tuple[Room, RoomSession]] = {}
    chosen: Optional[OnlineVerify] = None

    def arrived(name: str, what: Tuple[str, Any]) -> bool:
        """Feeds what came in room ``name``; whether the peer is there."""
        driver = joined[name][1]
        _feed(driver, what, now)
        failure = _room_failure(driver)
        if failure is not None:
            raise failure
        return driver.peer_present()

    try:
        # Each room's first event says whether the peer is there already.
        while chosen is None:
            rooms = [name for name in rendezvous.rooms() if name not in joined]
            if not rooms:
                break
            name = rooms[0]
            [candidate] = [c for c in candidates if c.room == name]
            room = Room(base_url, name, open_timeout=timeout, ssl_context=ssl_context)
            joined[name] = (room, RoomSession(candidate))
            if arrived(name, room.next_input(max(0.0, deadline - time.monotonic()))):
                chosen = rendezvous.peer_joined(name)
            else:
                rendezvous.alone(name)
        while chosen is None:
            if time.monotonic() > deadline:
                raise RelayError("nobody joined the room in time", kind="timeout")
            for name, (room, _) in list(joined.items()):
                what = room.next_input(0.05)
                if what[0] == "timeout":
                    continue
                if arrived(name, what):
                    chosen = rendezvous.peer_joined(name)
                    break
        [meeting] = rendezvous.rooms()
        room, driver = joined[meeting]
        _drive(room, driver, deadline, now)
        return chosen
    except BaseException:
        if chosen is not None:
            chosen.close()
        raise
    finally:
        for room, driver in joined.values():
            room.close()
            driver.close()
        for candidate in candidates:
            candidate.close()
        rendezvous.close()


# -- records (15.4) ----------------------------------------------------------------------------


class RecordNotFoundError(RelayError):
    """The record is not on the relay (``404 not-found``): it was never
    stored, or its owner deleted it."""


class RecordStore:
    """The relay's records (docs/PROTOCOL.md 15.4) at ``base_url``: immutable
    bytes under a 16-byte ID (32 lowercase hex digits), deleted by the token
    the first PUT returned.  A profile record (section 18) is stored under
    :attr:`~itsme.Profile.record_name` (here on the relay at
    ``relay_url``)::

        >>> records = RecordStore(relay_url)                        # "https://relay.example"
        >>> profile = itsme.Profile.create(me, "Alice")
        >>> token = records.put(profile.record_name, profile.record)   # keep it
        >>> records.get(profile.record_name) == profile.record         # a contact
        True
        >>> records.delete(profile.record_name, token)                 # the owner, later

    It speaks through an :class:`InviteMailbox`'s HTTP layer: one keep-alive
    connection, the same ``timeout`` and ``ssl_context``, the same errors.
    Not for use by two threads at once.  Refusals raise :class:`RelayError`
    (``kind`` ``"conflict"``: other bytes under a stored ID; ``"forbidden"``:
    a wrong delete token; ``"too-large"``...); ``404`` raises
    :class:`RecordNotFoundError`.
    """

    def __init__(self, base_url: str, *, timeout: float = 15.0, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self._http = InviteMailbox(base_url, timeout=timeout, ssl_context=ssl_context)
        self.base_url = base_url

    def close(self) -> None:
        """Closes the connection (the next request opens a new one)."""
        self._http.close()

    def __enter__(self) -> "RecordStore":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _call(self, method: str, record_id: str, **kwargs: Any) -> bytes:
        try:
            return self._http._call(RelayRoute.RECORD, method, record_id, **kwargs)
        except InviteEndedError as error:  # the mailbox's name for a 404
            raise RecordNotFoundError(
                error.message, status=error.status, kind=error.kind, retry_after=error.retry_after
            ) from None

    def put(self, record_id: str, data: bytes) -> Optional[str]:
        """Stores ``data`` (1 byte or more; the relay's limit is 262,144 by
        default) under ``record_id``.  Returns the delete token (43
        base64url characters, given only this once: keep it) when the
        record was created, or None when the relay held these very bytes
        already.  Other bytes under a stored ID: :class:`RelayError` with
        ``kind`` ``"conflict"``."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, not {type(data).__name__}")
        data = bytes(data)
        if not data:
            raise ValueError("a record holds at least one byte")
        try:
            return relay_record_stored(self._call("PUT", record_id, body=data))
        except MalformedMessageError:
            raise RelayError("the relay's answer carries no valid delete token", kind="bad-response") from None

    def get(self, record_id: str) -> bytes:
        """The bytes stored under ``record_id``; :class:`RecordNotFoundError`
        if there are none."""
        return self._call("GET", record_id)

    def delete(self, record_id: str, token: str) -> None:
        """Deletes the record with the delete token :meth:`put` returned.  A
        wrong token: :class:`RelayError` with ``kind`` ``"forbidden"``; no
        such record: :class:`RecordNotFoundError`."""
        self._call("DELETE", record_id, token=token)

    def __repr__(self) -> str:
        return f"<RecordStore {self.base_url}>"


__all__ += ["RecordNotFoundError", "RecordStore"]
