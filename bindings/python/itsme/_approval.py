"""Service approvals (docs/PROTOCOL.md section 19): a person approves a
login or a transaction on their device; the service verifies the answer.

Device side: :func:`enroll` makes a fresh Ed25519 key for one service, kept
in the secret store, and the enrollment message the service stores; later
:meth:`ApprovalRequest.parse` shows a request and :func:`sign_approval`
answers it (approve with some scopes, or deny).

Service side: :func:`verify_enrollment` checks an enrollment against the
nonce the service issued; :func:`create_approval_request` makes a request
(keep its bytes: they are the service's record); :func:`verify_approval`
checks an answer against that record, the user's enrolled keys, the
service's clock and a :class:`ReplayStore`.  Here the device is Alice's
(her ``secrets``) and both clocks read ``now``::

    >>> import os
    >>> nonce = os.urandom(32)                     # service: spend it once
    >>> enrollment = enroll(secrets, "bank.example", "Alice's phone", nonce)   # device
    >>> credential = verify_enrollment("bank.example", nonce, enrollment)     # service
    >>> credential.label
    "Alice's phone"

A login: the service makes a request, the device shows it and, once the
person compared the OTP, answers; the service verifies the answer::

    >>> request = create_approval_request("bank.example", "Example Bank", "login-1", ["email"], 120, now)
    >>> shown = ApprovalRequest.parse(request, now)
    >>> shown.service_name, len(shown.otp), shown.scopes
    ('Example Bank', 6, ('email',))
    >>> approval = sign_approval(secrets, request, ApprovalDecision.APPROVE, ["email"], now)
    >>> replay = ReplayStore.memory()
    >>> result = verify_approval(request, approval, [credential.public_key], replay, now)
    >>> result.decision, result.granted_scopes
    (<ApprovalDecision.APPROVE: 1>, ('email',))

Scopes are 1 to 64 bytes of printable ASCII (no spaces), at most 32; inputs
may come in any order but must not repeat one; outputs are sorted (by
bytes).  Times are unix seconds.

Comparing the OTP ties the screen the person sees to the request on the
device; it does not stop a phishing site that relays a real request in real
time (PROTOCOL.md 19.6).
"""

from __future__ import annotations

import ctypes
import enum
import functools
import itertools
from ctypes import byref, c_int32, c_size_t, c_uint8, c_void_p
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Optional, Sequence, Tuple

from ._errors import InvalidArgumentError, ItsMeError, Result, check, record_callback_exception
from ._ffi import (
    ApprovalRequestInfoStruct,
    ApprovalResultStruct,
    CredentialInfoStruct,
    ReplayDestroyCallback,
    ReplayInsertCallback,
    ReplayStoreCallbacks,
    lib,
)
from ._handle import (
    BufferCall,
    Detail,
    Handle,
    encode_text,
    enum_or_int,
    int_argument,
    new_handle,
    thread_last_error,
    unix_time,
)
from ._profile import bytes_in
from ._random import DeterministicRandom, use_random
from ._store import SecretStore

if TYPE_CHECKING:
    from ctypes import _Pointer

__all__ = [
    "APPROVAL_LIFETIME_MAX",
    "APPROVAL_MAX",
    "APPROVAL_REQUEST_MAX",
    "CREDENTIAL_ID_BYTES",
    "ENROLLMENT_MAX",
    "OTP_SIZE",
    "SCOPES_MAX",
    "SCOPES_TEXT_SIZE",
    "SCOPE_MAX_BYTES",
    "SERVICE_ID_MAX_BYTES",
    "SESSION_ID_MAX_BYTES",
    "ApprovalDecision",
    "ApprovalRequest",
    "ApprovalResult",
    "Credential",
    "ReplayStore",
    "create_approval_request",
    "credential_id",
    "enroll",
    "remove_credential",
    "sign_approval",
    "verify_approval",
    "verify_enrollment",
]

#: Bytes in a credential ID (``ITSME_CREDENTIAL_ID_BYTES``).
CREDENTIAL_ID_BYTES = 16
#: Longest service ID, in bytes (``ITSME_SERVICE_ID_MAX_BYTES``).
SERVICE_ID_MAX_BYTES = 255
#: Longest session ID, in bytes (``ITSME_SESSION_ID_MAX_BYTES``).
SESSION_ID_MAX_BYTES = 128
#: Buffer size for an OTP: six digits and the NUL (``ITSME_OTP_SIZE``).
OTP_SIZE = 7
#: Most scopes in a list (``ITSME_SCOPES_MAX``).
SCOPES_MAX = 32
#: Longest scope, in bytes (``ITSME_SCOPE_MAX_BYTES``).
SCOPE_MAX_BYTES = 64
#: Buffer size for a scope list as text (``ITSME_SCOPES_TEXT_SIZE``).
SCOPES_TEXT_SIZE = 2080
#: Longest enrollment message, in bytes (``ITSME_ENROLLMENT_MAX``).
ENROLLMENT_MAX = 226
#: Longest request, in bytes (``ITSME_APPROVAL_REQUEST_MAX``).
APPROVAL_REQUEST_MAX = 2650
#: Longest approval, in bytes (``ITSME_APPROVAL_MAX``).
APPROVAL_MAX = 2177
#: The longest a request lives, in seconds (``ITSME_APPROVAL_LIFETIME_MAX``).
APPROVAL_LIFETIME_MAX = 600

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_UINT32_MAX = 2**32 - 1
_SIZE_MAX = 2 ** (8 * ctypes.sizeof(c_size_t)) - 1
_PUBLIC_KEY_BYTES = 32
_REPLAY_KEY_BYTES = 32


class ApprovalDecision(enum.IntEnum):
    """``itsme_approval_decision`` (``ITSME_APPROVAL_*``)."""

    APPROVE = 1
    #: The person refused; no scope is granted.
    DENY = 2


@dataclass(frozen=True)
class ApprovalRequest:
    """A request as the device reads it (``itsme_approval_request_info``):
    what to show the person before they approve or deny."""

    service_id: str
    #: The name the service gives itself (shown; the ``service_id`` is what
    #: the credential was enrolled for).
    service_name: str
    session_id: str
    #: Six digits, to compare with the ones on the service's screen.
    otp: str
    issued_at: int
    expires_at: int
    #: The requested scopes, sorted.
    scopes: Tuple[str, ...]

    @classmethod
    def parse(cls, request: bytes, now: Optional[int]) -> "ApprovalRequest":
        """Reads a request to show it: strictly parsed, and refused once
        ``now`` (None: the current time) is past its expiry.

        Raises :class:`MalformedMessageError` and :class:`ExpiredError`.
        """
        when = unix_time(now)
        data, length = bytes_in(request, "request")
        info = ApprovalRequestInfoStruct()
        check(lib.itsme_approval_request_parse(data, length, when, byref(info)), thread_last_error)
        return cls(
            service_id=_text(info.service_id),
            service_name=_text(info.service_name),
            session_id=_text(info.session_id),
            otp=_text(info.otp),
            issued_at=info.issued_at,
            expires_at=info.expires_at,
            scopes=_scopes_out(info.scopes),
        )


@dataclass(frozen=True)
class Credential:
    """What a service learns from a valid enrollment (``itsme_credential_info``):
    store all three with the user's account."""

    credential_id: bytes
    #: The device's Ed25519 public key for this service.
    public_key: bytes
    #: The device's label, as the person named it.
    label: str


@dataclass(frozen=True)
class ApprovalResult:
    """What a verified approval says (``itsme_approval_result``)."""

    #: APPROVE, or DENY: the person refused (a verified answer all the same).
    decision: ApprovalDecision
    #: Which enrolled key signed.
    credential_id: bytes
    #: The device's clock when it signed (informational).
    timestamp: int
    #: The granted scopes, sorted; empty for a denial.
    granted_scopes: Tuple[str, ...]


def _text(field: bytes) -> str:
    """A NUL-terminated ``char`` array of a struct (which ctypes reads as
    bytes, up to the NUL) as text."""
    try:
        return bytes(field).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ItsMeError(Result.ITSME_E_INTERNAL, "library returned invalid UTF-8") from error


def _scopes_out(field: bytes) -> Tuple[str, ...]:
    text = _text(field)
    return tuple(text.split(" ")) if text else ()


def _scopes_in(scopes: Optional[Iterable[str]], what: str) -> bytes:
    """A scope list as the C text: the scopes separated by single spaces."""
    if scopes is None:
        return b""
    if isinstance(scopes, (str, bytes, bytearray)):
        raise TypeError(f"{what} must be an iterable of str (a list of scopes), not one {type(scopes).__name__}")
    items = []
    for scope in scopes:
        if not isinstance(scope, str):
            raise TypeError(f"a scope must be str, not {type(scope).__name__}")
        # A space (or any other separator) would split one scope in two.
        if not scope or any(not "\x21" <= c <= "\x7e" for c in scope):
            raise InvalidArgumentError(
                Result.ITSME_E_INVALID_ARGUMENT, f"{what}: a scope is 1 to 64 bytes of printable ASCII without spaces"
            )
        items.append(scope)
    return encode_text(" ".join(items), what)


def _decision(decision: ApprovalDecision) -> int:
    return int_argument(decision, "decision", 0, _UINT32_MAX)


def _store(secret_store: SecretStore) -> SecretStore:
    if not isinstance(secret_store, SecretStore):
        raise TypeError(f"secret_store must be a SecretStore, not {type(secret_store).__name__}")
    return secret_store


def _output(call: BufferCall, cap: int, detail: Detail) -> bytes:
    """One call into a buffer of the largest size the output can have."""
    buffer, out_len = (c_uint8 * cap)(), c_size_t(0)
    check(call(buffer, cap, byref(out_len)), detail)
    if out_len.value > cap:
        raise ItsMeError(Result.ITSME_E_INTERNAL, f"library reported a length of {out_len.value}")
    return bytes(buffer[: out_len.value])


# -- device side -------------------------------------------------------------------------


def enroll(
    secret_store: SecretStore,
    service_id: str,
    label: str,
    nonce: bytes,
    rng: Optional[DeterministicRandom] = None,
) -> bytes:
    """Makes a new Ed25519 key pair for ``service_id`` (1 to 255 bytes of
    printable ASCII), replacing the one this device had for that service,
    saves it in ``secret_store``, and returns the enrollment message for the
    service, signed over ``nonce`` (16 to 64 bytes, the service's).

    ``label`` names the device for the service (1 to 128 bytes of UTF-8).
    ``rng`` (tests and vectors only) draws the key from a
    :class:`DeterministicRandom`.  Raises :class:`InvalidArgumentError` and
    :class:`SecretStoreError`; the detail is the store's last error.
    """
    store = _store(secret_store)
    service = encode_text(service_id, "service_id")
    name = encode_text(label, "label")
    data, length = bytes_in(nonce, "nonce")
    with use_random(rng) as random_ptr, store._use() as store_ptr:
        return _output(
            lambda buf, cap, out_len: lib.itsme_credential_enroll(
                store_ptr, service, name, data, length, random_ptr, buf, cap, out_len
            ),
            ENROLLMENT_MAX,
            lambda: SecretStore._detail(store_ptr),
        )


def credential_id(secret_store: SecretStore, service_id: str) -> bytes:
    """The credential ID (:data:`CREDENTIAL_ID_BYTES`) this device holds for
    ``service_id``.  Raises :class:`NotFoundError` if it is not enrolled."""
    store = _store(secret_store)
    service = encode_text(service_id, "service_id")
    with store._use() as store_ptr:
        return _output(
            lambda buf, cap, out_len: lib.itsme_credential_id(store_ptr, service, buf, cap, out_len),
            CREDENTIAL_ID_BYTES,
            lambda: SecretStore._detail(store_ptr),
        )


def remove_credential(secret_store: SecretStore, service_id: str) -> None:
    """Deletes this device's key for ``service_id`` (the service should
    remove the credential too).  Raises :class:`NotFoundError` if there is
    none."""
    store = _store(secret_store)
    service = encode_text(service_id, "service_id")
    with store._use() as store_ptr:
        check(lib.itsme_credential_remove(store_ptr, service), lambda: SecretStore._detail(store_ptr))


def sign_approval(
    secret_store: SecretStore,
    request: bytes,
    decision: ApprovalDecision,
    granted_scopes: Optional[Iterable[str]],
    now: Optional[int],
) -> bytes:
    """Answers a request with the key enrolled for its service, at time
    ``now`` (None: the current time).

    ``decision`` APPROVE grants ``granted_scopes`` (a subset of the requested
    ones; empty for none); DENY grants none (``granted_scopes`` must be
    empty or None).  Have the person compare the OTP first, and unlock the
    device.  Raises :class:`InvalidArgumentError` (a scope not requested or
    repeated, an unknown decision), :class:`MalformedMessageError`,
    :class:`ExpiredError`, :class:`NotFoundError` (not enrolled for the
    service).
    """
    store = _store(secret_store)
    code = _decision(decision)
    scopes = _scopes_in(granted_scopes, "granted_scopes")
    when = unix_time(now)
    data, length = bytes_in(request, "request")
    with store._use() as store_ptr:
        return _output(
            lambda buf, cap, out_len: lib.itsme_approval_sign(
                store_ptr, data, length, code, scopes, when, buf, cap, out_len
            ),
            APPROVAL_MAX,
            lambda: SecretStore._detail(store_ptr),
        )


# -- service side ------------------------------------------------------------------------


def verify_enrollment(service_id: str, nonce: bytes, enrollment: bytes) -> Credential:
    """Checks an enrollment against the service's own ``service_id`` and the
    ``nonce`` it issued (spend the nonce: it is good for one enrollment).

    Raises :class:`InvalidArgumentError` (a bad service ID or nonce),
    :class:`MalformedMessageError`, :class:`AuthenticationFailedError` (a bad
    signature, another nonce or service), :class:`InvalidKeyError`.
    """
    service = encode_text(service_id, "service_id")
    data, length = bytes_in(nonce, "nonce")
    message, message_len = bytes_in(enrollment, "enrollment")
    info = CredentialInfoStruct()
    check(lib.itsme_enrollment_verify(service, data, length, message, message_len, byref(info)), thread_last_error)
    return Credential(
        credential_id=bytes(info.credential_id),
        public_key=bytes(info.public_key),
        label=_text(info.label),
    )


def create_approval_request(
    service_id: str,
    service_name: str,
    session_id: str,
    scopes: Iterable[str],
    lifetime: int,
    now: Optional[int],
    rng: Optional[DeterministicRandom] = None,
) -> bytes:
    """Makes a request with a fresh nonce and a uniform six-digit OTP,
    issued at ``now`` (None: the current time) and expiring ``lifetime``
    seconds later (1 to :data:`APPROVAL_LIFETIME_MAX`).

    ``service_name`` is a name (1 to 128 bytes of UTF-8); ``session_id`` 1
    to 128 bytes of printable ASCII; ``scopes`` the scopes asked for (may be
    empty).  Keep the bytes: they are the record :func:`verify_approval`
    checks against.  Show the OTP (:meth:`ApprovalRequest.parse` gives it).
    ``rng`` (tests only) draws the nonce and OTP from a
    :class:`DeterministicRandom`.  Raises :class:`InvalidArgumentError`.
    """
    service = encode_text(service_id, "service_id")
    name = encode_text(service_name, "service_name")
    session = encode_text(session_id, "session_id")
    asked = _scopes_in(scopes, "scopes")
    seconds = int_argument(lifetime, "lifetime", _INT64_MIN, _INT64_MAX)
    when = unix_time(now)
    with use_random(rng) as random_ptr:
        return _output(
            lambda buf, cap, out_len: lib.itsme_approval_request_create(
                service, name, session, asked, seconds, random_ptr, when, buf, cap, out_len
            ),
            APPROVAL_REQUEST_MAX,
            thread_last_error,
        )


def verify_approval(
    request: bytes,
    approval: bytes,
    public_keys: Sequence[bytes],
    replay: "ReplayStore",
    now: Optional[int],
) -> ApprovalResult:
    """Verifies ``approval`` against the service's own record of the request
    (the bytes :func:`create_approval_request` gave), the user's enrolled
    public keys, the service's clock ``now`` (None: the current time) and
    ``replay``, in the order of docs/PROTOCOL.md 19.5.  Only a valid answer
    is recorded in ``replay``.  A verified denial is returned with decision
    DENY, not raised.

    Raises :class:`InvalidArgumentError` (a request that does not parse, a
    key that is not 32 bytes), :class:`MalformedMessageError` (the approval
    does not parse, or grants a scope not requested), :class:`ExpiredError`,
    :class:`NotFoundError` (signed by no enrolled key),
    :class:`AuthenticationFailedError` (wrong OTP, bad signature),
    :class:`ReplayedError` (the request was answered already),
    :class:`LockedError` (an in-memory replay store is full), or the error a
    callback replay store reported.
    """
    if not isinstance(replay, ReplayStore):
        raise TypeError(f"replay must be a ReplayStore, not {type(replay).__name__}")
    if isinstance(public_keys, (bytes, bytearray, memoryview, str)):
        raise TypeError("public_keys must be a sequence of keys (a list of bytes), not one value")
    keys = []
    for key in public_keys:
        if not isinstance(key, (bytes, bytearray, memoryview)):
            raise TypeError(f"a public key must be bytes, not {type(key).__name__}")
        key = bytes(key)
        if len(key) != _PUBLIC_KEY_BYTES:
            raise InvalidArgumentError(Result.ITSME_E_INVALID_ARGUMENT, "a public key is 32 bytes")
        keys.append(key)
    when = unix_time(now)
    record, record_len = bytes_in(request, "request")
    answer, answer_len = bytes_in(approval, "approval")
    joined, _ = bytes_in(b"".join(keys), "public_keys")
    result = ApprovalResultStruct()
    with replay._use() as replay_ptr:
        check(
            lib.itsme_approval_verify(
                record, record_len, answer, answer_len, joined, len(keys), replay_ptr, when, byref(result)
            ),
            thread_last_error,
        )
    return ApprovalResult(
        decision=enum_or_int(ApprovalDecision, result.decision),
        credential_id=bytes(result.credential_id),
        timestamp=result.timestamp,
        granted_scopes=_scopes_out(result.granted_scopes),
    )


# -- replay stores -----------------------------------------------------------------------

#: What :meth:`ReplayStore.from_callback` expects: ``insert(key, expires_at,
#: now)`` records ``key`` (32 bytes) until ``expires_at`` and returns True if
#: it was recorded already.
ReplayInsert = Callable[[bytes, int, int], bool]

# Python callbacks by the integer the C side holds as their ctx.  An entry
# lives from from_callback() until the library calls destroy (or until
# from_callback fails, when the caller keeps ctx).
_registry: Dict[int, ReplayInsert] = {}
_ctx_ids = itertools.count(1)

_OK = int(Result.ITSME_OK)
_E_INVALID_ARGUMENT = int(Result.ITSME_E_INVALID_ARGUMENT)
#: The code a callback that raised (anything but an ItsMeError) or returned
#: something other than a bool fails the verification with.
CALLBACK_FAILURE = Result.ITSME_E_DATABASE


def _guarded(body: Callable[..., int]) -> Callable[..., int]:
    """Wraps a callback body so that no exception ever reaches C."""

    @functools.wraps(body)
    def callback(*args: Any) -> int:
        try:
            return body(*args)
        except BaseException as error:  # nothing may unwind into C
            try:
                record_callback_exception(error)
            except BaseException:
                pass
            if isinstance(error, ItsMeError) and int(error.code) != _OK:
                return int(error.code)
            return int(CALLBACK_FAILURE)

    return callback


@_guarded
def _insert(
    ctx: Optional[int], key: _Pointer[c_uint8], expires_at: int, now: int, out_seen: _Pointer[c_int32]
) -> int:
    """insert: asks the Python callable whether ``key`` was seen already."""
    if ctx is None or not key or not out_seen:
        return _E_INVALID_ARGUMENT
    seen = _registry[ctx](ctypes.string_at(key, _REPLAY_KEY_BYTES), expires_at, now)
    if not isinstance(seen, int):
        # Fail closed: None (a forgotten return) must not let a replay through.
        raise TypeError(f"a replay store's insert must return a bool, not {type(seen).__name__}")
    out_seen[0] = 1 if seen else 0
    return _OK


def _destroy(ctx: Optional[int]) -> None:
    """destroy: the library dropped the store; forget its callback."""
    try:
        if ctx is not None:
            _registry.pop(ctx, None)
    except BaseException:  # nothing may unwind into C
        pass


# One pair of C entry points serves every Python replay store (ctx tells them
# apart).  They live as long as the module, hence as long as any store.
_INSERT = ReplayInsertCallback(_insert)
_DESTROY = ReplayDestroyCallback(_destroy)


class ReplayStore(Handle):
    """A service's record of single-use values (``itsme_replay_store``):
    approval requests already answered.

    :meth:`memory` keeps them in this process; :meth:`from_callback` lets a
    Python callable keep them (a database table, a shared cache), so that
    every verifier of a service shares one record.  A store may be used by
    several threads at once (the in-memory one locks; a callback store must
    make its insert atomic).
    """

    _kind = "replay store"
    _free_function = lib.itsme_replay_store_free

    def __init__(self, ptr: int, insert: Optional[ReplayInsert] = None) -> None:
        """Wraps an owned handle; use the classmethods instead."""
        super().__init__(ptr)
        self._insert = insert
        # The C entry points the library calls, kept with the store.
        self._callbacks = (_INSERT, _DESTROY) if insert is not None else None

    @classmethod
    def memory(cls, capacity: int = 0) -> "ReplayStore":
        """An in-memory store: entries are dropped once expired; at most
        ``capacity`` live entries (0: 1,000,000).  A verification that would
        insert into a full store is refused with :class:`LockedError` rather
        than forgetting a live entry."""
        capacity = int_argument(capacity, "capacity", 0, _SIZE_MAX)
        out = c_void_p()
        check(lib.itsme_replay_store_new_memory(capacity, byref(out)), thread_last_error)
        return cls(new_handle(out))

    @classmethod
    def from_callback(cls, insert: ReplayInsert) -> "ReplayStore":
        """A store whose entries live wherever ``insert`` puts them.

        ``insert(key: bytes, expires_at: int, now: int) -> bool`` records
        ``key`` (32 bytes) until ``expires_at`` (it may be forgotten after
        that) and returns True if it was recorded already (leaving it), else
        False.  It must be atomic across every verifier sharing the store,
        and must not call into ``itsme``.  If it raises, or returns something
        other than a bool, the verification fails: with the exception's code
        for an :class:`ItsMeError`, else with ``ITSME_E_DATABASE``; the
        exception becomes the error's ``__cause__``.  The callable is kept
        alive until the library has released the store.
        """
        if not callable(insert):
            raise TypeError("insert must be callable")
        ctx = next(_ctx_ids)
        _registry[ctx] = insert
        table = ReplayStoreCallbacks(ctx=ctx, insert=_INSERT, destroy=_DESTROY)
        out = c_void_p()
        try:
            check(lib.itsme_replay_store_new_callbacks(byref(table), byref(out)), thread_last_error)
        except BaseException:
            _registry.pop(ctx, None)  # on failure the caller keeps ctx
            raise
        return cls(new_handle(out), insert)

    def __repr__(self) -> str:
        kind = "callback" if self._insert is not None else "memory"
        return f"<ReplayStore {kind} {'closed' if self.closed else 'open'}>"
