"""Contact exchange in person (QR and Bluetooth) and at a distance (invite
and real-time), short codes, and the protocol's pure derivations
(docs/PROTOCOL.md sections 3 to 8)."""

from __future__ import annotations

import enum
from ctypes import byref, c_bool, c_int64, c_uint32, c_void_p
from typing import TYPE_CHECKING, Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

from ._contacts import ContactStore, ExchangeMethod, _bytes_argument, _wipe
from ._errors import InvalidStateError, ItsMeError, NotFoundError, Result, check
from ._ffi import lib
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
from ._identity import FINGERPRINT_SIZE, PUBLIC_KEY_BYTES, Identity
from ._random import DeterministicRandom, use_random

if TYPE_CHECKING:
    from ctypes import _CArgObject

__all__ = [
    "BLUETOOTH_FRAME_MAX",
    "Exchange",
    "ExchangeFlags",
    "ExchangeState",
    "QR_PAYLOAD_MAX",
    "RELAY_ID_SIZE",
    "REMOTE_CODE_SIZE",
    "REMOTE_MESSAGE_MAX",
    "SHORT_CODE_SIZE",
    "SHORT_CODE_VALUES",
    "SessionKeys",
    "bluetooth_commitment",
    "bluetooth_session_keys",
    "bluetooth_th1",
    "bluetooth_transcript_hash",
    "check_remote_code",
    "derive_sas",
    "derive_seed",
    "qr_transcript_hash",
    "short_code_format",
    "short_code_parse",
]

#: Buffer size for a short code's text, NUL included (``ITSME_SHORT_CODE_SIZE``).
SHORT_CODE_SIZE = 14
#: Number of short code values (``ITSME_SHORT_CODE_VALUES``).
SHORT_CODE_VALUES = 260000
#: Longest QR payload text, in bytes (``ITSME_QR_PAYLOAD_MAX``).
QR_PAYLOAD_MAX = 383
#: Longest Bluetooth frame, in bytes (``ITSME_BLUETOOTH_FRAME_MAX``).
BLUETOOTH_FRAME_MAX = 259
#: Buffer size for an invite or encryption code as shown, ``"K7X2-M9PM"``,
#: NUL included (``ITSME_REMOTE_CODE_SIZE``).
REMOTE_CODE_SIZE = 10
#: Longest message of an exchange at a distance, in bytes (``ITSME_REMOTE_MESSAGE_MAX``).
REMOTE_MESSAGE_MAX = 355
#: Buffer size for a relay ID: 32 lowercase hex digits and the NUL (``ITSME_RELAY_ID_SIZE``).
RELAY_ID_SIZE = 33

_HASH_BYTES = 32
_UINT32_MAX = 2**32 - 1
# First guesses at output sizes; larger outputs take a second call.
_NAME_GUESS = 64
_SEAL_GUESS = 1024


class ExchangeState(enum.IntEnum):
    """``itsme_exchange_state`` (``ITSME_EXCHANGE_*``)."""

    #: Waiting for the peer's payload (QR) or next frame (Bluetooth).
    AWAITING_PEER = 1
    #: The SAS is ready: show it for the two people to compare.
    COMPARE_SAS = 2
    #: A source-format (v5) payload was read: no SAS, nothing authenticated.
    IMPORTED = 3
    #: Both decisions are in: the contact is verified.
    CONFIRMED = 4
    #: This side or the peer rejected, or this side stopped waiting.
    REJECTED = 5
    FAILED = 6
    #: This side confirmed; the peer's decision is not settled yet: wait for
    #: ``PEER_CONFIRMED`` or ``PEER_REJECTED``, then :meth:`Exchange.settle`.
    AWAITING_DECISION = 7


class ExchangeFlags(enum.IntFlag):
    """The events of an exchange (``ITSME_EXCHANGE_FLAG_*``)."""

    #: The peer sent the source format: its name cannot be verified.
    UNAUTHENTICATED = 1
    #: A contact with the peer's identity key is stored (set by save).
    KNOWN_CONTACT = 2
    #: The peer's authenticated confirmation arrived (Bluetooth, invite,
    #: real-time).
    PEER_CONFIRMED = 4
    #: The peer rejected the SAS: confirm is refused; settle or reject
    #: deletes the new contact.
    PEER_REJECTED = 8


class SessionKeys(NamedTuple):
    """The two Bluetooth frame keys (section 7.3)."""

    #: key_I: encrypts the initiator's frames.
    initiator: bytes
    #: key_R: encrypts the responder's frames.
    responder: bytes


def _state(value: int) -> ExchangeState:
    return enum_or_int(ExchangeState, value)  # an int for a state a newer library added


def _peer_bytes(data: Union[bytes, bytearray, memoryview, str]) -> bytes:
    """What the peer sent: bytes, or a scanned text (sent as UTF-8)."""
    if isinstance(data, str):
        return data.encode("utf-8", "surrogatepass")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes or str, not {type(data).__name__}")
    return bytes(data)


def _contact_store(store: object) -> ContactStore:
    if not isinstance(store, ContactStore):
        raise TypeError(f"store must be a ContactStore, not {type(store).__name__}")
    return store


class Exchange(DetailedHandle):
    """A contact exchange (``itsme_exchange``): a state machine, in person
    (QR, Bluetooth) or at a distance (invite, real-time).

    The host moves the bytes; the library never touches a camera or radio.
    Here Alice (``me``, ``contacts``) meets Carol, whose phone is set up
    alongside::

        >>> carol = Identity.create(SecretStore.memory(), "Carol")
        >>> carols_contacts = ContactStore.open(carol, tmp + "/carol.db")
        >>> exchange = Exchange.qr(me, contacts, now)          # saves to contacts
        >>> payload = exchange.next_outgoing()                 # our payload: show it
        >>> payload[:7]
        b'ITSME1:'
        >>> carols = Exchange.qr(carol, carols_contacts, now)
        >>> carols.receive(payload, now)                       # Carol scans ours
        >>> exchange.receive(carols.next_outgoing(), now)      # and we scan hers
        >>> exchange.peer_name, exchange.sas == carols.sas     # compare the SAS aloud
        ('Carol', True)
        >>> carol_id = exchange.save(now)                      # stored unverified
        >>> exchange.confirm(now) == carol_id                  # or exchange.reject()
        True

    For Bluetooth, send every frame :meth:`next_outgoing` gives and pass each
    frame received to :meth:`receive`; after :meth:`confirm` or
    :meth:`reject`, send the CONFIRM frame it queues.

    Both decisions (docs/PROTOCOL.md 8.1): a contact becomes verified only
    when its person confirmed and the peer's confirmation arrived (QR
    excepted: both screens are seen in person).  If the peer's has not
    arrived, :meth:`confirm` leaves the state ``AWAITING_DECISION`` and the
    contact ``AWAITING_PEER``; when :meth:`receive` sets ``PEER_CONFIRMED``
    or ``PEER_REJECTED``, call :meth:`settle`.  If the room or the Bluetooth
    session ends first, call :meth:`reject`.

    At a distance, the inviter shows two codes that the other person types;
    the messages go through a relay (:mod:`itsme.relay` moves them; here
    they are handed across directly)::

        >>> dave = Identity.create(SecretStore.memory(), "Dave")
        >>> daves_contacts = ContactStore.open(dave, tmp + "/dave.db")
        >>> exchange = Exchange.invite(me, contacts, now)      # the inviter
        >>> codes = exchange.invite_code, exchange.encryption_code   # tell them both
        >>> theirs = Exchange.accept_invite(dave, daves_contacts, *codes, now)
        >>> moved = True
        >>> while moved:  # post what next_outgoing() gives to the mailbox (or room)
        ...     moved = False
        ...     for sender, receiver in ((exchange, theirs), (theirs, exchange)):
        ...         if message := sender.next_outgoing():
        ...             receiver.receive(message, now)
        ...             moved = True
        >>> exchange.state
        <ExchangeState.COMPARE_SAS: ...>
        >>> exchange.sas == theirs.sas                         # on a call, compare it
        True
        >>> dave_id = exchange.confirm(now)                    # or reject()

    A failure is final: once :meth:`receive` has rejected a peer message
    (any error but :class:`InvalidArgumentError` for a QR text that is not
    an exchange payload, and :class:`InvalidStateError`), :attr:`state` is
    ``FAILED`` and every later call raises :class:`InvalidStateError`.  A
    pending exchange expires 24 hours after it began
    (:class:`ExpiredError`).  Times are unix seconds; None means now.

    An exchange is given its identity and a contact store of that identity
    when it is made, and keeps both alive: every call that writes uses that
    store.  Not for use by two threads at once (calls on one exchange are
    serialised by a lock).
    """

    _kind = "exchange"
    _free_function = lib.itsme_exchange_free
    _last_error_name = "itsme_exchange_last_error"

    def __init__(self, ptr: int, identity: Identity, store: ContactStore) -> None:
        """Wraps an owned handle; use :meth:`qr`, :meth:`bluetooth`,
        :meth:`invite`, :meth:`accept_invite` or :meth:`restore`."""
        super().__init__(ptr)
        # The C exchange holds its identity and store; the Python objects are
        # kept too, so that they are not collected (and closed) while the
        # exchange lives.
        self._identity = identity
        self._store = store

    # -- construction --------------------------------------------------------

    @classmethod
    def _new(
        cls, identity: Identity, store: ContactStore, constructor: Callable[[int, int, _CArgObject], int]
    ) -> "Exchange":
        if not isinstance(identity, Identity):
            raise TypeError(f"identity must be an Identity, not {type(identity).__name__}")
        store = _contact_store(store)
        out = c_void_p()
        with identity._use() as identity_ptr, store._use() as store_ptr:
            check(constructor(identity_ptr, store_ptr, byref(out)), lambda: Identity._detail(identity_ptr))
        return cls(new_handle(out), identity, store)

    @classmethod
    def qr(
        cls,
        identity: Identity,
        store: ContactStore,
        now: Optional[int] = None,
        random: Optional[DeterministicRandom] = None,
    ) -> "Exchange":
        """Starts a QR exchange: show :meth:`next_outgoing` as a QR code.
        The exchange saves the new contact to ``store``, a contact store of
        ``identity`` (else :class:`WrongIdentityError`).

        ``random`` (tests and vectors only) draws the ephemeral key and
        device secret from a :class:`DeterministicRandom`.
        """
        when = unix_time(now)
        with use_random(random) as rng:
            return cls._new(identity, store, lambda ptr, sp, out: lib.itsme_exchange_new_qr(ptr, sp, rng, when, out))

    @classmethod
    def bluetooth(
        cls,
        identity: Identity,
        store: ContactStore,
        now: Optional[int] = None,
        session_code: Optional[str] = None,
        random: Optional[DeterministicRandom] = None,
    ) -> "Exchange":
        """Starts a Bluetooth exchange.

        ``session_code`` is the code the other device shows (typed as
        :func:`short_code_parse` accepts), or None to draw one for this
        device to show (:attr:`session_code`).  Raises
        :class:`InvalidArgumentError` for a code that does not parse.
        ``store`` as for :meth:`qr`.
        """
        when = unix_time(now)
        code = None if session_code is None else encode_text(session_code, "session_code")
        with use_random(random) as rng:
            return cls._new(
                identity, store, lambda ptr, sp, out: lib.itsme_exchange_new_bluetooth(ptr, sp, code, rng, when, out)
            )

    @classmethod
    def invite(
        cls,
        identity: Identity,
        store: ContactStore,
        now: Optional[int] = None,
        *,
        realtime: bool = False,
        random: Optional[DeterministicRandom] = None,
    ) -> "Exchange":
        """Starts an exchange at a distance as the inviter.

        Draws the invite code and the encryption code (:attr:`invite_code`,
        :attr:`encryption_code`: show both; the other person types them in
        :meth:`accept_invite`) and queues the INVITE message for
        :meth:`next_outgoing`.  ``realtime``: the messages go through a
        relay room while both people are on a call (method ``REALTIME``);
        otherwise through the relay's invite mailbox, where each side may go
        offline between its steps (method ``INVITE``).  Either way the ID on
        the relay is :attr:`relay_id`.  ``store`` as for :meth:`qr`.

        The exchange's PAKE secret is kept in the identity's secret store
        until the exchange ends.  Raises :class:`SecretStoreError` if it
        cannot be stored.
        """
        when = unix_time(now)
        flag = bool(realtime)
        with use_random(random) as rng:
            return cls._new(
                identity, store, lambda ptr, sp, out: lib.itsme_exchange_new_invite(ptr, sp, flag, rng, when, out)
            )

    @classmethod
    def accept_invite(
        cls,
        identity: Identity,
        store: ContactStore,
        invite_code: str,
        encryption_code: str,
        now: Optional[int] = None,
        *,
        realtime: bool = False,
        random: Optional[DeterministicRandom] = None,
    ) -> "Exchange":
        """Joins an exchange at a distance as the invitee, with the two codes
        the inviter shared (typed as :func:`check_remote_code` accepts).
        ``realtime`` must be what the inviter chose; ``store`` as for
        :meth:`qr`.

        Raises :class:`InvalidArgumentError`, storing nothing, for a code
        with a typo, a character codes never use, or the same code twice;
        its message says which code and what is wrong.
        """
        when = unix_time(now)
        invite = encode_text(invite_code, "invite_code")
        encryption = encode_text(encryption_code, "encryption_code")
        flag = bool(realtime)
        with use_random(random) as rng:
            return cls._new(
                identity,
                store,
                lambda ptr, sp, out: lib.itsme_exchange_accept_invite(ptr, sp, invite, encryption, flag, rng, when, out),
            )

    @classmethod
    def restore(
        cls, identity: Identity, store: ContactStore, sealed: bytes, now: Optional[int] = None
    ) -> "Exchange":
        """Restores an exchange :meth:`seal` gave, on this device, for
        ``identity``, saving to ``store`` as at creation: once the exchange
        had saved its contact, the store it saved in (any handle on that
        file; another is :class:`InvalidArgumentError`).

        Restore a sealed exchange at most once.  Raises
        :class:`CorruptDataError` (not a sealed exchange),
        :class:`AuthenticationFailedError` (another device or identity, or
        altered), :class:`ExpiredError` (begun more than 24 hours ago) or,
        for an exchange at a distance that has ended since (its PAKE secret
        is gone from the secret store), :class:`InvalidStateError`.
        """
        when = unix_time(now)
        data, length = _bytes_argument(sealed, "sealed")
        return cls._new(
            identity, store, lambda ptr, sp, out: lib.itsme_exchange_restore(ptr, sp, data, length, when, out)
        )

    # -- plumbing ------------------------------------------------------------

    @property
    def identity(self) -> Identity:
        """The identity this exchange is for."""
        return self._identity

    @property
    def store(self) -> ContactStore:
        """The contact store this exchange saves to."""
        return self._store

    def _status(self) -> "tuple[int, int]":
        state, flags = c_uint32(), c_uint32()
        self._call(lib.itsme_exchange_status, byref(state), byref(flags))
        return state.value, flags.value

    # -- state ---------------------------------------------------------------

    @property
    def state(self) -> ExchangeState:
        """Where the exchange stands (:class:`ExchangeState`)."""
        return _state(self._status()[0])

    @property
    def flags(self) -> ExchangeFlags:
        """What happened so far (:class:`ExchangeFlags`)."""
        return ExchangeFlags(self._status()[1])

    @property
    def method(self) -> ExchangeMethod:
        """How the exchange was started: ``ExchangeMethod.QR``,
        ``BLUETOOTH``, ``INVITE`` or ``REALTIME``."""
        method = c_uint32()
        self._call(lib.itsme_exchange_get_method, byref(method))
        return ExchangeMethod(method.value)

    @property
    def session_code(self) -> Optional[str]:
        """Bluetooth: the session code text (``"ECHO 0042"``); None for the
        other methods."""
        try:
            return self._read(read_text, lib.itsme_exchange_session_code, SHORT_CODE_SIZE)
        except InvalidStateError:  # the header's only reason: not Bluetooth
            return None

    # -- at a distance -------------------------------------------------------

    @property
    def invite_code(self) -> str:
        """The invite code as shown (``"ABCD-EFGH"``).  Not secret from the
        relay.  :class:`InvalidStateError` for an exchange in person."""
        return self._read(read_text, lib.itsme_exchange_invite_code, REMOTE_CODE_SIZE)

    @property
    def encryption_code(self) -> str:
        """The encryption code as shown: the exchange's password.  Show it
        to the person; never log it.  :class:`InvalidStateError` for an
        exchange in person."""
        return self._read(read_text, lib.itsme_exchange_encryption_code, REMOTE_CODE_SIZE)

    @property
    def relay_id(self) -> str:
        """The ID on the relay (32 lowercase hex digits): the invite mailbox
        or, for a real-time exchange, the room.  The same on both sides.
        :class:`InvalidStateError` for an exchange in person."""
        return self._read(read_text, lib.itsme_exchange_relay_id, RELAY_ID_SIZE)

    @property
    def is_inviter(self) -> bool:
        """True on the side that created the invite, False on the invitee's.
        :class:`InvalidStateError` for an exchange in person."""
        inviter = c_bool()
        self._call(lib.itsme_exchange_is_inviter, byref(inviter))
        return bool(inviter.value)

    # -- bytes out and in ----------------------------------------------------

    def next_outgoing(self) -> bytes:
        """The next bytes to send; ``b""`` when there is nothing to send.

        QR: our payload text (ASCII; show it as a QR code while the exchange
        is pending), not consumed.  Bluetooth: the next frame, removed from
        the queue.  At a distance: the next message to post, removed from
        the queue (the inviter's INVITE from the start, the invitee's ACCEPT
        after the INVITE, the inviter's REPLY after the ACCEPT).
        """
        return self._read(read_bytes, lib.itsme_exchange_next_outgoing, QR_PAYLOAD_MAX)

    def receive(self, data: Union[bytes, str], now: Optional[int] = None) -> None:
        """Feeds the peer's bytes: a scanned QR text (str or bytes), one
        Bluetooth frame, or one message of an exchange at a distance.

        Raises :class:`InvalidArgumentError` for a QR text that is not an
        exchange payload (scan again: the exchange goes on), and, ending the
        exchange as failed, :class:`MalformedMessageError`,
        :class:`AuthenticationFailedError`, :class:`InvalidKeyError` or
        :class:`ExpiredError`.  At a distance,
        :class:`AuthenticationFailedError` means a wrong encryption code or
        a relay that changed the messages: the invite is spent, end it on
        the relay so that the other side fails too.
        """
        when = unix_time(now)
        buffer, length = _bytes_argument(_peer_bytes(data), "data")
        self._call(lib.itsme_exchange_receive, buffer, length, when)

    # -- the peer ------------------------------------------------------------

    @property
    def sas(self) -> str:
        """The SAS to compare aloud (``"ECHO 0042"``).

        Raises :class:`InvalidStateError` before it exists, for a
        source-format import (which has none), and once the exchange failed.
        """
        return self._read(read_text, lib.itsme_exchange_sas, SHORT_CODE_SIZE)

    @property
    def peer_name(self) -> str:
        """The name the peer sent.  :class:`InvalidStateError` before it arrived."""
        return self._read(read_text, lib.itsme_exchange_peer_name, _NAME_GUESS)

    @property
    def peer_fingerprint(self) -> str:
        """The peer's fingerprint (16 uppercase hex digits)."""
        return self._read(read_text, lib.itsme_exchange_peer_fingerprint, FINGERPRINT_SIZE)

    @property
    def peer_public_key(self) -> Optional[bytes]:
        """The peer's identity public key; None for a source-format peer,
        which has none."""
        try:
            return self._read(read_bytes, lib.itsme_exchange_peer_public_key, PUBLIC_KEY_BYTES)
        except NotFoundError:
            return None

    # -- finishing -----------------------------------------------------------

    def _contact_call(self, function: Callable[..., int], now: Optional[int]) -> int:
        when = unix_time(now)
        out = c_int64()
        with self._use() as ptr:
            check(function(ptr, when, byref(out)), lambda: self._detail(ptr))
        return out.value

    def save(self, now: Optional[int] = None) -> int:
        """Stores the new contact unverified in the exchange's store;
        returns its id.

        If a contact with the peer's identity key exists, stores nothing,
        sets ``KNOWN_CONTACT`` and returns its id.  Calling it again returns
        the same id.
        """
        return self._contact_call(lib.itsme_exchange_save, now)

    def confirm(self, now: Optional[int] = None) -> int:
        """The SAS matches: saves if needed and queues this side's decision
        for :meth:`next_outgoing`; returns the contact's id.  QR, or the
        peer's confirmation already received: the contact is verified
        (a known contact gets the new seed and device secrets), state
        ``CONFIRMED``.  Otherwise state ``AWAITING_DECISION`` until
        :meth:`settle`.

        Raises :class:`InvalidStateError` without a SAS, for an import, or
        after the peer rejected; :class:`NotFoundError` when the contact
        :meth:`save` added was deleted since (nothing changes;
        :meth:`reject` still ends the exchange).
        """
        return self._contact_call(lib.itsme_exchange_confirm, now)

    def settle(self, now: Optional[int] = None) -> Optional[int]:
        """Applies the peer's decision once it arrived (state
        ``AWAITING_DECISION`` with ``PEER_CONFIRMED`` or ``PEER_REJECTED``).
        Confirmed: the contact becomes verified, state ``CONFIRMED``, its id
        is returned.  Rejected: a new contact is deleted (a known one keeps
        its old seed), state ``REJECTED``, None is returned.

        Raises :class:`InvalidStateError` before the peer's decision;
        :class:`NotFoundError` for a confirmation when the contact was
        deleted since (nothing changes; :meth:`reject` ends the exchange).
        """
        contact_id = self._contact_call(lib.itsme_exchange_settle, now)
        return contact_id if self.state == ExchangeState.CONFIRMED else None

    def reject(self) -> None:
        """The SAS differs, or the person gave up: deletes the contact
        :meth:`save` added (a known contact is left as it was).  Bluetooth:
        queues a CONFIRM frame saying so once the peer's data has arrived."""
        with self._use() as ptr:
            check(lib.itsme_exchange_reject(ptr), lambda: self._detail(ptr))

    def seal(self) -> bytes:
        """The exchange as bytes, encrypted under a key only this device
        has, to :meth:`restore` later.  The exchange stays usable.

        A pending exchange can be sealed, and so can a finished Bluetooth
        one (its CONFIRM frame may still be unsent, or the peer's to come).
        """
        return self._read(read_bytes, lib.itsme_exchange_seal, _SEAL_GUESS)

    def __repr__(self) -> str:
        if self.closed:
            return "<Exchange closed>"
        state, flags = self._status()
        state_name = getattr(_state(state), "name", str(state))
        flag_names = "|".join(name for name, flag in ExchangeFlags.__members__.items() if flags & flag) or "0"
        return f"<Exchange {state_name} flags={flag_names}>"


# -- short codes ---------------------------------------------------------------


def short_code_parse(text: str) -> int:
    """The value (0 to 259999) of a typed short code such as ``"echo-0042"``.

    Surrounding spaces are ignored, the word matches in any case, the
    separator is one space or ``-``, the number exactly four digits.
    Raises :class:`InvalidArgumentError` for anything else.
    """
    encoded = encode_text(text, "text")
    out = c_uint32()
    check(lib.itsme_short_code_parse(encoded, byref(out)), thread_last_error)
    return out.value


def short_code_format(value: int) -> str:
    """The canonical text of a short code value (``40042`` -> ``"ECHO 0042"``)."""
    value = int_argument(value, "value", 0, _UINT32_MAX)
    return read_text(
        lambda buf, cap, out_len: lib.itsme_short_code_format(value, buf, cap, out_len),
        SHORT_CODE_SIZE,
        thread_last_error,
    )


def check_remote_code(text: str) -> str:
    """An invite or encryption code as a person typed it (either case;
    spaces and ``-`` ignored), checked and written as shown
    (``"ABCD-EFGH"``).

    A code carries a check character: every single wrong character and
    every swap of two is caught here, before any network call.  Raises
    :class:`InvalidArgumentError`, whose message says what is wrong.
    """
    encoded = encode_text(text, "text")
    return read_text(
        lambda buf, cap, out_len: lib.itsme_remote_code_check(encoded, buf, cap, out_len),
        REMOTE_CODE_SIZE,
        thread_last_error,
    )


# -- pure derivations -------------------------------------------------------------


class _Text(NamedTuple):
    """A text argument of a pure derivation (the others are bytes)."""

    value: str


def _derive(function: Callable[..., int], inputs: Sequence[Tuple[object, str]], guess: int = _HASH_BYTES) -> bytes:
    """Calls a pure derivation on (value, what) inputs: bytes become
    (pointer, length) pairs, wiped afterwards; :class:`_Text` a C string."""
    arrays = []
    args: List[object] = []
    for value, what in inputs:
        if isinstance(value, _Text):
            args.append(encode_text(value.value, what))
            continue
        array, length = _bytes_argument(value, what)
        arrays.append(array)
        args += [array, length]
    try:
        return read_bytes(lambda buf, cap, out_len: function(*args, buf, cap, out_len), guess, thread_last_error)
    finally:
        for array in arrays:
            _wipe(array)


def derive_seed(
    ephemeral_secret: bytes, peer_ephemeral_public: bytes, fingerprint_a: str, fingerprint_b: str
) -> bytes:
    """The 32-byte verification seed (section 3).

    Raises :class:`InvalidArgumentError` for wrong sizes or a fingerprint
    that is not 16 hex digits, :class:`InvalidKeyError` for an all-zero
    shared secret.
    """
    return _derive(
        lib.itsme_derive_seed,
        [
            (ephemeral_secret, "ephemeral_secret"),
            (peer_ephemeral_public, "peer_ephemeral_public"),
            (_Text(fingerprint_a), "fingerprint_a"),
            (_Text(fingerprint_b), "fingerprint_b"),
        ],
    )


def derive_sas(seed: bytes, transcript_hash: bytes) -> str:
    """The SAS text (section 4.1) of a 32-byte seed and transcript hash."""
    seed_array, seed_len = _bytes_argument(seed, "seed")
    th_array, th_len = _bytes_argument(transcript_hash, "transcript_hash")
    try:
        return read_text(
            lambda buf, cap, out_len: lib.itsme_derive_sas(seed_array, seed_len, th_array, th_len, buf, cap, out_len),
            SHORT_CODE_SIZE,
            thread_last_error,
        )
    finally:
        _wipe(seed_array)


def qr_transcript_hash(payload_a: Union[str, bytes], payload_b: Union[str, bytes]) -> bytes:
    """The QR transcript hash (section 5.3) of two ``ITSME1:`` payload texts,
    in either order.  Each payload's signature is checked."""
    return _derive(
        lib.itsme_qr_transcript_hash,
        [(_peer_bytes(payload_a), "payload_a"), (_peer_bytes(payload_b), "payload_b")],
    )


def bluetooth_commitment(identity_public: bytes, ephemeral_public: bytes, name: str, device_secret: bytes) -> bytes:
    """The Bluetooth commitment (section 7.3)."""
    return _derive(
        lib.itsme_bluetooth_commitment,
        [
            (identity_public, "identity_public"),
            (ephemeral_public, "ephemeral_public"),
            (_Text(name), "name"),
            (device_secret, "device_secret"),
        ],
    )


def bluetooth_th1(session_code: str, hello_i: bytes, hello_r: bytes, key_i: bytes, key_r: bytes) -> bytes:
    """th1 (section 7.3) from the session code text and the four frames."""
    return _derive(
        lib.itsme_bluetooth_th1,
        [
            (_Text(session_code), "session_code"),
            (hello_i, "hello_i"),
            (hello_r, "hello_r"),
            (key_i, "key_i"),
            (key_r, "key_r"),
        ],
    )


def bluetooth_session_keys(ephemeral_secret: bytes, peer_ephemeral_public: bytes, th1: bytes) -> SessionKeys:
    """key_I and key_R (section 7.3) from our ephemeral secret, the peer's
    ephemeral public key and th1."""
    keys = _derive(
        lib.itsme_bluetooth_session_keys,
        [(ephemeral_secret, "ephemeral_secret"), (peer_ephemeral_public, "peer_ephemeral_public"), (th1, "th1")],
        2 * _HASH_BYTES,
    )
    if len(keys) != 2 * _HASH_BYTES:
        raise ItsMeError(Result.ITSME_E_INTERNAL, f"library returned {len(keys)} bytes of keys")
    return SessionKeys(keys[:_HASH_BYTES], keys[_HASH_BYTES:])


def bluetooth_transcript_hash(th1: bytes, plaintext_i: bytes, plaintext_r: bytes) -> bytes:
    """The Bluetooth transcript hash (section 7.4) from th1 and the two
    decrypted contact data plaintexts."""
    return _derive(
        lib.itsme_bluetooth_transcript_hash,
        [(th1, "th1"), (plaintext_i, "plaintext_i"), (plaintext_r, "plaintext_r")],
    )

