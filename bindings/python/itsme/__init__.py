"""Python binding of libitsme, the ItsMe identity-verification library.

ItsMe lets two people who exchanged keys once prove to each other, during
any later call, that each still holds the secret they exchanged.  This
package wraps the library's C interface (include/itsme.h) with ctypes::

    import itsme

    with itsme.SecretStore.file("/path/to/store") as store:
        try:
            me = itsme.Identity.load(store)
        except itsme.NotFoundError:
            me = itsme.Identity.create(store, "Alice")
        with me:
            print(me.fingerprint)          # 16 uppercase hex digits
            if not me.pin_is_set():
                me.set_pin("123456")
            me.verify_pin("123456")        # raises WrongPinError, LockedError...
            with itsme.ContactStore.open(me, "/path/to/contacts.db") as contacts:
                cid = contacts.add("Bob", bob_public_key, seed, itsme.EXCHANGE_QR)
                contacts.use_window(cid, window)  # raises WindowUsedError if used

Contacts are normally added by an in-person exchange (QR or Bluetooth)::

    with itsme.Exchange.qr(me, contacts) as exchange:
        show_as_qr_code(exchange.next_outgoing())
        exchange.receive(scanned_text)
        print(exchange.peer_name, exchange.sas)   # the two people compare the SAS
        exchange.save()                   # stored unverified
        exchange.confirm()                # or exchange.reject()

During a call, the two people verify each other with a voice session::

    with itsme.VoiceSession(contacts, contact_id) as session:
        wait = session.timing().starts_in         # both wait for the window
        session.start()
        print(session.session_id, [itsme.nato_word(w) for w in session.words])
        session.select(word)                      # twice: see session.turn
        print(session.your_code)                  # read aloud: code and tag
        outcome = session.check(heard_code, heard_tag)

People who are apart exchange contacts through a relay: the inviter shows
two codes, the other person types them, and :mod:`itsme.relay` moves the
messages (``itsme.relay.InviteSession`` through the invite mailbox, each
side free to go offline between steps; ``itsme.relay.realtime_exchange``
through a room while both are on a call)::

    exchange = itsme.Exchange.invite(me, my_contacts)
    tell_them(exchange.invite_code, exchange.encryption_code)
    session = itsme.relay.InviteSession(itsme.relay.InviteMailbox(url), exchange)
    session.step(wait=30)                         # until exchange.state is COMPARE_SAS
    # ... and on the other side, with the two codes typed:
    theirs = itsme.Exchange.accept_invite(them, their_contacts, invite_code, encryption_code)

Apart, over a relay, the same people verify each other with Online
Verify; after a device change, a degradation code tells each contact the
change is the person's own, and a Security PIN Update in person replaces
the device secrets::

    with itsme.OnlineVerify(contacts, contact_id) as session:
        join_relay_room(session.room)             # move the messages both ways
        print(session.sas)                        # both read it aloud
        outcome = session.confirm()       # or session.reject()
    code = contacts.degradation_code(contact_id)  # on the new device: send it
    # ... and on the contact's device, what they typed:
    their_contacts.accept_degradation_code(their_id, typed_code)
    with itsme.PinUpdate(contacts, contact_id) as update:
        print(update.session_code)                # move the frames over Bluetooth

Everyone on a conference call checks at once which participants are
contacts (a roll call, docs/PROTOCOL.md 20): one shares a meeting code, each
device moves the messages of the relay's group room ``call.room``::

    call = itsme.RollCall(contacts, itsme.new_meeting_code())  # or the code typed
    call.joined(slot, peers)                      # the relay's "joined"; then its
    # events (peer_joined, peer_left), receive() for each message, tick()
    # once a second, and send what next_outgoing() gives after each call
    roster = call.roster
    show(call.participants, call.head_count)      # the owner confirms who is here
    call.confirm_roster(roster)
    print(call.code)                              # read aloud, then
    call.confirm_said()
    state = call.enter_heard(index, heard_code)   # for each contact who spoke

A person moving to a new device takes the identity along (the device
secrets stay behind), by a password export or by a live transfer; either
gives an :class:`Import` to check and install on the new device::

    password = itsme.generate_export_password()   # show it to the person
    blob = me.export(pin, password)               # the PIN is checked first
    text = itsme.export_to_text(blob)             # "ITSMEXP1:...": one QR code
    # ... on the new device, with the contact store file copied along:
    with itsme.Import.open(secrets, itsme.export_from_text(text), typed) as received:
        report = received.check(secrets, contacts_path)   # changes nothing
        me = received.install(secrets, contacts_path, replace=False)
    # or with the contact store inside (a file only: no text form)
    blob = me.export_with_contacts(pin, password, contacts)
    with itsme.Import.open(secrets, blob, typed) as received:
        received.write_contacts(contacts_path)    # a new file; then check and install
    # or live, with no password: the new device shows an offer as a QR code
    receiver = itsme.Transfer.receiver()
    sender = itsme.Transfer.sender(me, pin, scanned_offer)  # on the old device
    receiver.receive(sender.next_outgoing())      # through the room receiver.room
    print(receiver.sas, sender.sas)               # the person compares them
    sender.include_contacts(contacts)             # optional: the contact store too
    sender.confirm(); receiver.confirm()          # or reject()
    while message := sender.next_outgoing():      # the identity, then the store's chunks
        receiver.receive(message)
    received = receiver.take_import()             # write_contacts, check and install as above

A person shares a name and photo as a sealed :class:`Profile` record kept on
the relay; its secret reference travels inside Online Verify, and the
contact opens the record and applies it::

    mine = itsme.Profile.create(me, "Alice", photo_bytes, "alice.jpg")
    put_on_relay(mine.record_name, mine.record)
    session.share_profile(mine.reference)         # before the PROOF
    # ... on the contact's device, once the SAS is confirmed:
    reference = session.peer_profile()
    theirs = itsme.Profile.open(fetched_record, reference, contact.public_key)
    contacts.apply_profile(contact_id, theirs)

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
path.  The binding was written for the library's ABI 0.1: importing the
package refuses a library whose ``MAJOR.MINOR`` differs with
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
