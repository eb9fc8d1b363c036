"""Python binding of libitsme, the ItsMe identity-verification library.

ItsMe lets two people who exchanged keys once prove to each other, during
any later call, that each still holds the secret they exchanged.  This
package wraps the library's C interface (include/itsme.h) with ctypes.
Each example below runs as written (the tests run them): ``tmp`` is an
empty directory, ``now`` a fixed unix time (the start of a 30-second
window; a host passes None, or nothing, for the current time), and the
other person, Bob, is ``them`` with ``their_contacts`` on his own phone::

    >>> import itsme
    >>> store = itsme.SecretStore.file(tmp + "/secrets")
    >>> try:
    ...     me = itsme.Identity.load(store)
    ... except itsme.NotFoundError:
    ...     me = itsme.Identity.create(store, "Alice")
    >>> len(me.fingerprint)                # 16 uppercase hex digits
    16
    >>> if not me.pin_is_set():
    ...     me.set_pin("123456")
    >>> me.verify_pin("123456", now)       # raises WrongPinError, LockedError...
    >>> contacts = itsme.ContactStore.open(me, tmp + "/contacts.db")

Contacts are normally added by an in-person exchange (QR or Bluetooth): each
phone shows its payload as a QR code and scans the other's::

    >>> met = now - 3600
    >>> exchange = itsme.Exchange.qr(me, contacts, met)
    >>> bobs = itsme.Exchange.qr(them, their_contacts, met)
    >>> exchange.receive(bobs.next_outgoing(), met)    # scanned from his screen
    >>> bobs.receive(exchange.next_outgoing(), met)
    >>> exchange.peer_name, exchange.sas == bobs.sas   # the two compare the SAS
    ('Bob', True)
    >>> contact_id = exchange.confirm(met)             # or exchange.reject()
    >>> bob_id = bobs.confirm(met)
    >>> contacts.get(contact_id).state
    <VerificationState.VERIFIED: ...>

During a call, the two people verify each other with a voice session (see
:class:`VoiceSession` for the two turns of words)::

    >>> session = itsme.VoiceSession(contacts, contact_id, now)
    >>> bob = itsme.VoiceSession(their_contacts, bob_id, now)
    >>> starts = now + session.timing(now).starts_in  # both wait for the window
    >>> session.start(starts); bob.start(starts)
    >>> session.session_id == bob.session_id          # both read it aloud
    True
    >>> for _ in range(2):                            # session.turn: whose word
    ...     speaker, hearer = (session, bob) if session.turn == itsme.VoiceTurn.MINE else (bob, session)
    ...     word = speaker.words[0]
    ...     speaker.select(word, starts); hearer.select(word, starts)
    >>> heard_code, heard_tag = bob.your_code         # read aloud: code and tag
    >>> session.check(heard_code, heard_tag, starts)
    <VoiceOutcome.VERIFIED: 1>

People who are apart exchange contacts through a relay: the inviter shows
two codes, the other person types them, and :mod:`itsme.relay` moves the
messages (``itsme.relay.InviteSession`` through the invite mailbox, each
side free to go offline between steps; ``itsme.relay.realtime_exchange``
through a room while both are on a call).  Here Carol's phone is beside
Alice's, and the messages are handed across::

    >>> carol = itsme.Identity.create(itsme.SecretStore.memory(), "Carol")
    >>> carols_contacts = itsme.ContactStore.open(carol, tmp + "/carol.db")
    >>> invite = itsme.Exchange.invite(me, contacts, now)
    >>> codes = invite.invite_code, invite.encryption_code     # tell them both
    >>> theirs = itsme.Exchange.accept_invite(carol, carols_contacts, *codes, now)
    >>> def move(a, b):                    # the relay: each side's messages to the other
    ...     moved = True
    ...     while moved:
    ...         moved = False
    ...         for sender, receiver in ((a, b), (b, a)):
    ...             if message := sender.next_outgoing():
    ...                 receiver.receive(message, now)
    ...                 moved = True
    >>> move(invite, theirs)
    >>> invite.state, invite.sas == theirs.sas                 # compared on a call
    (<ExchangeState.COMPARE_SAS: ...>, True)

Apart, over a relay, the same people verify each other with Online
Verify (:class:`OnlineVerify`; the relay room is ``session.room``)::

    >>> session = itsme.OnlineVerify(contacts, contact_id, now=now)
    >>> bob = itsme.OnlineVerify(their_contacts, bob_id, now=now)
    >>> move(session, bob)
    >>> session.sas == bob.sas                                 # both read it aloud
    True
    >>> session.confirm(now)                                   # or session.reject()
    <VoiceOutcome.VERIFIED: 1>

After a device change, a degradation code tells each contact the change is
the person's own, and a Security PIN Update in person (:class:`PinUpdate`,
over Bluetooth) replaces the device secrets::

    >>> code = contacts.degradation_code(contact_id)           # on the new device: send it
    >>> their_contacts.accept_degradation_code(bob_id, code, now)   # what Bob typed
    >>> their_contacts.get(bob_id).state
    <VerificationState.DEGRADED: ...>
    >>> update = itsme.PinUpdate(contacts, contact_id, now=now)
    >>> bobs_update = itsme.PinUpdate(their_contacts, bob_id, now=now)
    >>> update.session_code == bobs_update.session_code        # find the peer showing it
    True
    >>> move(update, bobs_update)
    >>> their_contacts.get(bob_id).state
    <VerificationState.VERIFIED: ...>

Everyone on a conference call checks at once which participants are
contacts with a :class:`RollCall` (docs/PROTOCOL.md 20): one shares a
meeting code, each device moves the messages of the relay's group room
``call.room``; its documentation runs one through.

A person moving to a new device takes the identity along (the device
secrets stay behind), by a password export or by a live
:class:`Transfer`; either gives an :class:`Import` to check and install on
the new device (each class runs one through).  The export::

    >>> password = itsme.generate_export_password()            # show it to the person
    >>> blob = me.export("123456", password, now=now)          # the PIN is checked first
    >>> text = itsme.export_to_text(blob)                      # one QR code
    >>> text[:9]
    'ITSMEXP1:'
    >>> itsme.export_from_text(text) == blob                   # on the new device
    True

A person shares a name and photo as a sealed :class:`Profile` record kept on
the relay; its secret reference travels inside Online Verify, and the
contact opens the record and applies it (:class:`Profile` runs it
through).

A service lets a person approve a login on their device (service
approvals, :mod:`itsme._approval`): :func:`enroll` and
:func:`verify_enrollment` once, then for each login
:func:`create_approval_request`, :meth:`ApprovalRequest.parse`,
:func:`sign_approval` and :func:`verify_approval` with a
:class:`ReplayStore`.

The shared library is the one named by the ``ITSME_LIBRARY`` environment
variable (a path), if set; else the ``libitsme.so`` bundled in the package
(as the wheel installs it); else the system's, found by
``ctypes.util.find_library("itsme")`` or as ``libitsme.so`` on the loader's
path.  The binding was written for the library's ABI :data:`ABI_VERSION`
(0.3): importing the package refuses a library whose ``MAJOR.MINOR`` differs with
:class:`LibraryVersionError` (an ``OSError``, like every failure to load the
library; as the import fails, catch it as ``OSError``).  Importing the
package then initialises the library (``itsme_init``) and raises
:class:`ItsMeError` if it cannot run on this machine.

Failures raise :class:`ItsMeError` (or one of its subclasses) carrying the
result ``code``, its header ``name``, the library's ``message`` and the
handle's ``detail``.
"""

from __future__ import annotations

from ._approval import (
    APPROVAL_LIFETIME_MAX,
    APPROVAL_MAX,
    APPROVAL_REQUEST_MAX,
    CREDENTIAL_ID_BYTES,
    ENROLLMENT_MAX,
    OTP_SIZE,
    SCOPE_MAX_BYTES,
    SCOPES_MAX,
    SCOPES_TEXT_SIZE,
    SERVICE_ID_MAX_BYTES,
    SESSION_ID_MAX_BYTES,
    ApprovalDecision,
    ApprovalRequest,
    ApprovalResult,
    Credential,
    ReplayStore,
    create_approval_request,
    credential_id,
    enroll,
    remove_credential,
    sign_approval,
    verify_approval,
    verify_enrollment,
)
from ._contacts import (
    CONTACT_AWAITING_PEER,
    CONTACT_DEGRADED,
    CONTACT_UNVERIFIED,
    CONTACT_VERIFIED,
    DEGRADATION_CODE_SIZE,
    EXCHANGE_BLUETOOTH,
    EXCHANGE_INVITE,
    EXCHANGE_QR,
    EXCHANGE_REALTIME,
    NOTE_MAX_BYTES,
    PHOTO_MAX_BYTES,
    SEED_BYTES,
    Contact,
    ContactStore,
    ExchangeMethod,
    StoreLoss,
    VerificationState,
)
from ._errors import (
    AlreadyExistsError,
    AuthenticationFailedError,
    CorruptDataError,
    DatabaseError,
    ExpiredError,
    InvalidArgumentError,
    InvalidKeyError,
    InvalidPinError,
    InvalidStateError,
    ItsMeError,
    LockedError,
    MalformedMessageError,
    NotFoundError,
    RESULT_CODES,
    ReplayedError,
    RolledBackError,
    Result,
    SecretStoreError,
    WindowUsedError,
    WrongIdentityError,
    WrongPinError,
    check as _check,
    result_message,
)
from ._exchange import (
    BLUETOOTH_FRAME_MAX,
    QR_PAYLOAD_MAX,
    RELAY_ID_SIZE,
    REMOTE_CODE_SIZE,
    REMOTE_MESSAGE_MAX,
    SHORT_CODE_SIZE,
    SHORT_CODE_VALUES,
    Exchange,
    ExchangeFlags,
    ExchangeState,
    SessionKeys,
    bluetooth_commitment,
    bluetooth_session_keys,
    bluetooth_th1,
    bluetooth_transcript_hash,
    check_remote_code,
    derive_sas,
    derive_seed,
    qr_transcript_hash,
    short_code_format,
    short_code_parse,
)
from ._ffi import LibraryVersionError, TestBuildRequiredError
from ._ffi import lib as _lib
from ._handle import thread_last_error as _thread_last_error
from ._identity import (
    FINGERPRINT_SIZE,
    NAME_MAX_BYTES,
    PUBLIC_KEY_BYTES,
    Identity,
    PinStatus,
    fingerprint_from_public_key,
)
from ._online_verify import ONLINE_VERIFY_MESSAGE_MAX, ROOM_NAME_SIZE, OnlineVerify, OnlineVerifyState
from ._pin_update import PIN_UPDATE_FRAME_MAX, PinUpdate, PinUpdateState
from ._session import window_of
from ._profile import (
    PHOTO_FILENAME_MAX_BYTES,
    PROFILE_RECORD_MAX,
    PROFILE_RECORD_OVERHEAD,
    PROFILE_REFERENCE_BYTES,
    RECORD_ID_BYTES,
    RECORD_NAME_SIZE,
    Profile,
)
from ._random import DeterministicRandom
from ._rollcall import (
    ROLLCALL_MESSAGE_MAX,
    ROLLCALL_ROSTER_BYTES,
    RollCall,
    RollCallParticipant,
    RollCallPhase,
    RollCallState,
    new_meeting_code,
)
from ._store import PASSPHRASE_MAX_BYTES, Accessibility, SecretStore, SecretStoreBackend
from ._transfer import (
    EXPORT_CONTACTS_MAX,
    EXPORT_CHOSEN_PASSWORD_MIN,
    EXPORT_MAX,
    EXPORT_PASSWORD_SIZE,
    EXPORT_TEXT_SIZE,
    IMPORT_REPLACE,
    TRANSFER_MESSAGE_MAX,
    TRANSFER_OFFER_SIZE,
    ExportHeader,
    Import,
    ImportReport,
    PasswordKind,
    Transfer,
    TransferState,
    export_from_text,
    export_header,
    export_to_text,
    generate_export_password,
    import_status,
)
from ._voice import (
    CALL_BINDING_MAX,
    CALL_BINDING_MIN,
    NATO_WORDS,
    VOICE_CODE_SIZE,
    VOICE_SESSION_ID_SIZE,
    VOICE_TAG_UNKNOWN,
    VOICE_WORDS,
    VoiceCode,
    VoiceDerivation,
    VoiceOutcome,
    VoiceSession,
    VoiceState,
    VoiceTiming,
    VoiceTurn,
    derive_code,
    derive_degradation_code,
    derive_device_tag,
    derive_lower_selects_first,
    derive_session_id,
    derive_voice,
    derive_words,
    nato_word,
)
from . import relay  # imports websockets only when a room is joined

__version__ = "0.1.0"

#: Characters in a fingerprint (without the NUL).
FINGERPRINT_CHARS = FINGERPRINT_SIZE - 1
#: Digits in a PIN.
PIN_LENGTH = 6

# The result codes as module constants, named as in the header.
ITSME_OK = Result.ITSME_OK
ITSME_E_INVALID_ARGUMENT = Result.ITSME_E_INVALID_ARGUMENT
ITSME_E_BUFFER_TOO_SMALL = Result.ITSME_E_BUFFER_TOO_SMALL
ITSME_E_NOT_INITIALIZED = Result.ITSME_E_NOT_INITIALIZED
ITSME_E_UNSUPPORTED_PLATFORM = Result.ITSME_E_UNSUPPORTED_PLATFORM
ITSME_E_NOT_FOUND = Result.ITSME_E_NOT_FOUND
ITSME_E_ALREADY_EXISTS = Result.ITSME_E_ALREADY_EXISTS
ITSME_E_INVALID_PIN = Result.ITSME_E_INVALID_PIN
ITSME_E_WRONG_PIN = Result.ITSME_E_WRONG_PIN
ITSME_E_LOCKED = Result.ITSME_E_LOCKED
ITSME_E_SECRET_STORE = Result.ITSME_E_SECRET_STORE
ITSME_E_CORRUPT_DATA = Result.ITSME_E_CORRUPT_DATA
ITSME_E_AUTHENTICATION_FAILED = Result.ITSME_E_AUTHENTICATION_FAILED
ITSME_E_INVALID_KEY = Result.ITSME_E_INVALID_KEY
ITSME_E_INVALID_STATE = Result.ITSME_E_INVALID_STATE
ITSME_E_DATABASE = Result.ITSME_E_DATABASE
ITSME_E_OUT_OF_MEMORY = Result.ITSME_E_OUT_OF_MEMORY
ITSME_E_INTERNAL = Result.ITSME_E_INTERNAL
ITSME_E_WRONG_IDENTITY = Result.ITSME_E_WRONG_IDENTITY
ITSME_E_WINDOW_USED = Result.ITSME_E_WINDOW_USED
ITSME_E_MALFORMED_MESSAGE = Result.ITSME_E_MALFORMED_MESSAGE
ITSME_E_EXPIRED = Result.ITSME_E_EXPIRED
ITSME_E_REPLAYED = Result.ITSME_E_REPLAYED
ITSME_E_ROLLED_BACK = Result.ITSME_E_ROLLED_BACK

# Approval decisions under the header's names (without ITSME_).
APPROVAL_APPROVE = ApprovalDecision.APPROVE
APPROVAL_DENY = ApprovalDecision.DENY

# Exchange states and flags under the header's names (without ITSME_).
EXCHANGE_AWAITING_PEER = ExchangeState.AWAITING_PEER
EXCHANGE_COMPARE_SAS = ExchangeState.COMPARE_SAS
EXCHANGE_IMPORTED = ExchangeState.IMPORTED
EXCHANGE_CONFIRMED = ExchangeState.CONFIRMED
EXCHANGE_REJECTED = ExchangeState.REJECTED
EXCHANGE_FAILED = ExchangeState.FAILED
EXCHANGE_AWAITING_DECISION = ExchangeState.AWAITING_DECISION
EXCHANGE_FLAG_UNAUTHENTICATED = ExchangeFlags.UNAUTHENTICATED
EXCHANGE_FLAG_KNOWN_CONTACT = ExchangeFlags.KNOWN_CONTACT
EXCHANGE_FLAG_PEER_CONFIRMED = ExchangeFlags.PEER_CONFIRMED
EXCHANGE_FLAG_PEER_REJECTED = ExchangeFlags.PEER_REJECTED

# Voice states, turns and outcomes under the header's names (without ITSME_).
VOICE_WAITING = VoiceState.WAITING
VOICE_SELECTING = VoiceState.SELECTING
VOICE_COMPARING = VoiceState.COMPARING
VOICE_FINISHED = VoiceState.FINISHED
VOICE_FAILED = VoiceState.FAILED
VOICE_TURN_NONE = VoiceTurn.NONE
VOICE_TURN_MINE = VoiceTurn.MINE
VOICE_TURN_THEIRS = VoiceTurn.THEIRS
VOICE_VERIFIED = VoiceOutcome.VERIFIED
VOICE_DEVICE_CHANGED = VoiceOutcome.DEVICE_CHANGED
VOICE_MISMATCH = VoiceOutcome.MISMATCH
VOICE_VERIFIED_TAG_UNCHECKED = VoiceOutcome.VERIFIED_TAG_UNCHECKED

# Online Verify and PIN Update states under the header's names (without ITSME_).
ONLINE_VERIFY_RUNNING = OnlineVerifyState.RUNNING
ONLINE_VERIFY_COMPARE_SAS = OnlineVerifyState.COMPARE_SAS
ONLINE_VERIFY_CONFIRMED = OnlineVerifyState.CONFIRMED
ONLINE_VERIFY_REJECTED = OnlineVerifyState.REJECTED
ONLINE_VERIFY_FAILED = OnlineVerifyState.FAILED
PIN_UPDATE_RUNNING = PinUpdateState.RUNNING
PIN_UPDATE_DONE = PinUpdateState.DONE
PIN_UPDATE_FAILED = PinUpdateState.FAILED

# Export password kinds and transfer states under the header's names (without ITSME_).
EXPORT_PASSWORD_GENERATED = PasswordKind.GENERATED
EXPORT_PASSWORD_CHOSEN = PasswordKind.CHOSEN
TRANSFER_AWAITING_PEER = TransferState.AWAITING_PEER
TRANSFER_COMPARE_SAS = TransferState.COMPARE_SAS
TRANSFER_AWAITING_IDENTITY = TransferState.AWAITING_IDENTITY
TRANSFER_DONE = TransferState.DONE
TRANSFER_REJECTED = TransferState.REJECTED
TRANSFER_FAILED = TransferState.FAILED

__all__ = [
    "APPROVAL_APPROVE",
    "APPROVAL_DENY",
    "APPROVAL_LIFETIME_MAX",
    "APPROVAL_MAX",
    "APPROVAL_REQUEST_MAX",
    "Accessibility",
    "AlreadyExistsError",
    "ApprovalDecision",
    "ApprovalRequest",
    "ApprovalResult",
    "AuthenticationFailedError",
    "BLUETOOTH_FRAME_MAX",
    "CALL_BINDING_MAX",
    "CALL_BINDING_MIN",
    "CONTACT_AWAITING_PEER",
    "CONTACT_DEGRADED",
    "CONTACT_UNVERIFIED",
    "EXPORT_CONTACTS_MAX",
    "CONTACT_VERIFIED",
    "CREDENTIAL_ID_BYTES",
    "Contact",
    "ContactStore",
    "StoreLoss",
    "CorruptDataError",
    "Credential",
    "DEGRADATION_CODE_SIZE",
    "DatabaseError",
    "DeterministicRandom",
    "ENROLLMENT_MAX",
    "EXCHANGE_AWAITING_DECISION",
    "EXCHANGE_AWAITING_PEER",
    "EXCHANGE_BLUETOOTH",
    "EXCHANGE_COMPARE_SAS",
    "EXCHANGE_CONFIRMED",
    "EXCHANGE_FAILED",
    "EXCHANGE_FLAG_KNOWN_CONTACT",
    "EXCHANGE_FLAG_PEER_CONFIRMED",
    "EXCHANGE_FLAG_PEER_REJECTED",
    "EXCHANGE_FLAG_UNAUTHENTICATED",
    "EXCHANGE_IMPORTED",
    "EXCHANGE_INVITE",
    "EXCHANGE_QR",
    "EXCHANGE_REALTIME",
    "EXCHANGE_REJECTED",
    "EXPORT_CHOSEN_PASSWORD_MIN",
    "EXPORT_MAX",
    "EXPORT_PASSWORD_CHOSEN",
    "EXPORT_PASSWORD_GENERATED",
    "EXPORT_PASSWORD_SIZE",
    "EXPORT_TEXT_SIZE",
    "Exchange",
    "ExchangeFlags",
    "ExchangeMethod",
    "ExchangeState",
    "ExpiredError",
    "ExportHeader",
    "FINGERPRINT_CHARS",
    "FINGERPRINT_SIZE",
    "IMPORT_REPLACE",
    "Identity",
    "Import",
    "ImportReport",
    "InvalidArgumentError",
    "InvalidKeyError",
    "InvalidPinError",
    "InvalidStateError",
    "ItsMeError",
    "LibraryVersionError",
    "TestBuildRequiredError",
    "LockedError",
    "MalformedMessageError",
    "NAME_MAX_BYTES",
    "NATO_WORDS",
    "NOTE_MAX_BYTES",
    "NotFoundError",
    "ONLINE_VERIFY_COMPARE_SAS",
    "ONLINE_VERIFY_CONFIRMED",
    "ONLINE_VERIFY_FAILED",
    "ONLINE_VERIFY_MESSAGE_MAX",
    "ONLINE_VERIFY_REJECTED",
    "ONLINE_VERIFY_RUNNING",
    "OTP_SIZE",
    "OnlineVerify",
    "OnlineVerifyState",
    "PASSPHRASE_MAX_BYTES",
    "PHOTO_FILENAME_MAX_BYTES",
    "PHOTO_MAX_BYTES",
    "PIN_LENGTH",
    "PIN_UPDATE_DONE",
    "PIN_UPDATE_FAILED",
    "PIN_UPDATE_FRAME_MAX",
    "PIN_UPDATE_RUNNING",
    "PROFILE_RECORD_MAX",
    "PROFILE_RECORD_OVERHEAD",
    "PROFILE_REFERENCE_BYTES",
    "PUBLIC_KEY_BYTES",
    "PasswordKind",
    "PinStatus",
    "PinUpdate",
    "PinUpdateState",
    "Profile",
    "QR_PAYLOAD_MAX",
    "RECORD_ID_BYTES",
    "RECORD_NAME_SIZE",
    "RELAY_ID_SIZE",
    "REMOTE_CODE_SIZE",
    "REMOTE_MESSAGE_MAX",
    "RESULT_CODES",
    "ROLLCALL_MESSAGE_MAX",
    "ROLLCALL_ROSTER_BYTES",
    "ROOM_NAME_SIZE",
    "ReplayStore",
    "ReplayedError",
    "RollCall",
    "RollCallParticipant",
    "RollCallPhase",
    "RollCallState",
    "RolledBackError",
    "Result",
    "SCOPES_MAX",
    "SCOPES_TEXT_SIZE",
    "SCOPE_MAX_BYTES",
    "SEED_BYTES",
    "SERVICE_ID_MAX_BYTES",
    "SESSION_ID_MAX_BYTES",
    "SHORT_CODE_SIZE",
    "SHORT_CODE_VALUES",
    "SecretStore",
    "SecretStoreBackend",
    "SecretStoreError",
    "SessionKeys",
    "TRANSFER_AWAITING_IDENTITY",
    "TRANSFER_AWAITING_PEER",
    "TRANSFER_COMPARE_SAS",
    "TRANSFER_DONE",
    "TRANSFER_FAILED",
    "TRANSFER_MESSAGE_MAX",
    "TRANSFER_OFFER_SIZE",
    "TRANSFER_REJECTED",
    "Transfer",
    "TransferState",
    "VOICE_CODE_SIZE",
    "VOICE_COMPARING",
    "VOICE_DEVICE_CHANGED",
    "VOICE_FAILED",
    "VOICE_FINISHED",
    "VOICE_MISMATCH",
    "VOICE_SELECTING",
    "VOICE_SESSION_ID_SIZE",
    "VOICE_TAG_UNKNOWN",
    "VOICE_TURN_MINE",
    "VOICE_TURN_NONE",
    "VOICE_TURN_THEIRS",
    "VOICE_VERIFIED",
    "VOICE_VERIFIED_TAG_UNCHECKED",
    "VOICE_WAITING",
    "VOICE_WORDS",
    "VerificationState",
    "VoiceCode",
    "VoiceDerivation",
    "VoiceOutcome",
    "VoiceSession",
    "VoiceState",
    "VoiceTiming",
    "VoiceTurn",
    "WindowUsedError",
    "WrongIdentityError",
    "WrongPinError",
    "bluetooth_commitment",
    "bluetooth_session_keys",
    "bluetooth_th1",
    "bluetooth_transcript_hash",
    "check_remote_code",
    "create_approval_request",
    "credential_id",
    "derive_code",
    "derive_degradation_code",
    "derive_device_tag",
    "derive_lower_selects_first",
    "derive_sas",
    "derive_seed",
    "derive_session_id",
    "derive_voice",
    "derive_words",
    "enroll",
    "export_from_text",
    "export_header",
    "export_to_text",
    "fingerprint_from_public_key",
    "generate_export_password",
    "import_status",
    "init",
    "nato_word",
    "new_meeting_code",
    "qr_transcript_hash",
    "relay",
    "remove_credential",
    "result_message",
    "short_code_format",
    "short_code_parse",
    "sign_approval",
    "verify_approval",
    "verify_enrollment",
    "version",
    "version_number",
    "window_of",
    *Result.__members__,
]


def version() -> str:
    """The version of the loaded library, as ``"MAJOR.MINOR.PATCH"``."""
    text: bytes = _lib.itsme_version_string()  # static text, never NULL
    return text.decode("ascii")


def version_number() -> int:
    """The version of the loaded library as ``MAJOR * 10000 + MINOR * 100 + PATCH``."""
    number: int = _lib.itsme_version_number()
    return number


def init() -> None:
    """Initialises the library (``itsme_init``); idempotent and thread-safe.

    Called on import; raises :class:`ItsMeError` (for example
    ``ITSME_E_UNSUPPORTED_PLATFORM``) if the library cannot run here.
    """
    _check(_lib.itsme_init(), _thread_last_error)


init()
