"""Result codes and the exceptions raised for them."""

from __future__ import annotations

import threading
from typing import Callable, Dict, Optional, Tuple, Type

from . import _abi
from ._ffi import lib

__all__ = [
    "Result",
    "RESULT_CODES",
    "ItsMeError",
    "InvalidArgumentError",
    "NotFoundError",
    "AlreadyExistsError",
    "InvalidPinError",
    "WrongPinError",
    "LockedError",
    "SecretStoreError",
    "CorruptDataError",
    "AuthenticationFailedError",
    "InvalidKeyError",
    "InvalidStateError",
    "DatabaseError",
    "WrongIdentityError",
    "WindowUsedError",
    "MalformedMessageError",
    "ExpiredError",
    "ReplayedError",
    "RolledBackError",
    "result_message",
]


#: The result codes of include/itsme.h, named as there: the generated
#: ``IntEnum`` of ``itsme_result`` (``Result.ITSME_OK``, ...).  The library
#: may return codes this version does not know; they are errors too, and
#: surface as plain ints.
Result = _abi.ItsmeResult


#: Every result code by its header name, e.g. ``RESULT_CODES["ITSME_OK"] == 0``.
RESULT_CODES: Dict[str, int] = {member.name: member.value for member in Result}


def result_message(code: int) -> str:
    """The library's static English text for a result code."""
    text: bytes = lib.itsme_result_message(code)  # static text, never NULL
    return text.decode("utf-8", "replace")


class ItsMeError(Exception):
    """A libitsme call failed.

    Attributes:
        code: the result code (a :class:`Result` member, or a plain int for
            a code this binding does not know).
        name: the code's name in the header, e.g. ``"ITSME_E_WRONG_PIN"``.
        message: the library's static text for the code
            (``itsme_result_message``).
        detail: the handle's last-error detail for this failure (may be
            empty); never contains secrets.

    ``str(error)`` combines both: ``"message (detail)"``.
    """

    def __init__(self, code: int, detail: str = "") -> None:
        try:
            self.code: int = Result(code)
            self.name: str = Result(code).name
        except ValueError:
            self.code = int(code)
            self.name = "ITSME_E_UNKNOWN"
        self.message: str = result_message(code)
        self.detail: str = detail
        text = f"{self.message} ({detail})" if detail else self.message
        super().__init__(text)

    def __reduce__(self) -> Tuple[Type[ItsMeError], Tuple[int, str]]:
        return (type(self), (int(self.code), self.detail))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, {str(self)!r})"


class InvalidArgumentError(ItsMeError, ValueError):
    """ITSME_E_INVALID_ARGUMENT: NULL, out-of-range value, or invalid UTF-8."""


class NotFoundError(ItsMeError):
    """ITSME_E_NOT_FOUND: no such identity, secret or PIN."""


class AlreadyExistsError(ItsMeError):
    """ITSME_E_ALREADY_EXISTS: the identity or PIN to create exists already."""


class InvalidPinError(ItsMeError, ValueError):
    """ITSME_E_INVALID_PIN: not exactly six ASCII digits (not counted)."""


class WrongPinError(ItsMeError):
    """ITSME_E_WRONG_PIN: a well-formed PIN that does not match (counted)."""


class LockedError(ItsMeError):
    """ITSME_E_LOCKED: too many failures; see ``Identity.pin_status``."""


class SecretStoreError(ItsMeError):
    """ITSME_E_SECRET_STORE: the secret store (or a host callback) failed."""


class CorruptDataError(ItsMeError):
    """ITSME_E_CORRUPT_DATA: stored data malformed, truncated or unknown."""


class AuthenticationFailedError(ItsMeError):
    """ITSME_E_AUTHENTICATION_FAILED: a sealed record, tag, signature or
    commitment did not verify, or a word heard in a voice session is not
    among the selector's (the session failed)."""


class InvalidKeyError(ItsMeError, ValueError):
    """ITSME_E_INVALID_KEY: a public key of the wrong size, low order, or our own."""


class InvalidStateError(ItsMeError):
    """ITSME_E_INVALID_STATE: a call the object's state does not allow."""


class DatabaseError(ItsMeError):
    """ITSME_E_DATABASE: SQLite failed, or the file is not a contact store."""


class WrongIdentityError(ItsMeError):
    """ITSME_E_WRONG_IDENTITY: the contact store belongs to another identity,
    or installing an import would replace another identity or contacts its
    key cannot read (see ``Import.check``); nothing was changed."""


class WindowUsedError(ItsMeError):
    """ITSME_E_WINDOW_USED: the window is not after the last one used."""


class MalformedMessageError(ItsMeError):
    """ITSME_E_MALFORMED_MESSAGE: a peer message is malformed, of an unknown
    version, or out of order (replayed, reordered); the exchange failed."""


class ExpiredError(ItsMeError):
    """ITSME_E_EXPIRED: the exchange began more than 24 hours ago, or the
    time of a voice session, Online Verify, PIN Update or device transfer
    ran out; it failed.  Also a service approval request past its expiry."""


class ReplayedError(ItsMeError):
    """ITSME_E_REPLAYED: a single-use message was presented again: a service
    approval whose request has been answered already (docs/PROTOCOL.md
    19.5)."""


class RolledBackError(ItsMeError):
    """ITSME_E_ROLLED_BACK: the contact store is behind the last commit this
    device saw of the store at its path, or is another store than that one
    (emptied, deleted or replaced); nothing was changed.
    :meth:`ContactStore.accept_loss` says what was lost and accepts it."""


_ERROR_CLASSES: Dict[int, Type[ItsMeError]] = {
    Result.ITSME_E_INVALID_ARGUMENT: InvalidArgumentError,
    Result.ITSME_E_NOT_FOUND: NotFoundError,
    Result.ITSME_E_ALREADY_EXISTS: AlreadyExistsError,
    Result.ITSME_E_INVALID_PIN: InvalidPinError,
    Result.ITSME_E_WRONG_PIN: WrongPinError,
    Result.ITSME_E_LOCKED: LockedError,
    Result.ITSME_E_SECRET_STORE: SecretStoreError,
    Result.ITSME_E_CORRUPT_DATA: CorruptDataError,
    Result.ITSME_E_AUTHENTICATION_FAILED: AuthenticationFailedError,
    Result.ITSME_E_INVALID_KEY: InvalidKeyError,
    Result.ITSME_E_INVALID_STATE: InvalidStateError,
    Result.ITSME_E_DATABASE: DatabaseError,
    Result.ITSME_E_WRONG_IDENTITY: WrongIdentityError,
    Result.ITSME_E_WINDOW_USED: WindowUsedError,
    Result.ITSME_E_MALFORMED_MESSAGE: MalformedMessageError,
    Result.ITSME_E_EXPIRED: ExpiredError,
    Result.ITSME_E_REPLAYED: ReplayedError,
    Result.ITSME_E_ROLLED_BACK: RolledBackError,
}


def error_for(code: int, detail: str = "") -> ItsMeError:
    """The exception for a non-zero result code: a subclass where one exists."""
    return _ERROR_CLASSES.get(code, ItsMeError)(code, detail)


# An exception raised by a host secret-store callback on this thread, kept
# so that the error the library then returns can name it as its cause.
# Callbacks run on the thread that called into the library.
_pending = threading.local()


def record_callback_exception(error: BaseException) -> None:
    """Remembers an exception a host callback (secret store, replay store)
    could not raise."""
    _pending.error = error


def check(code: int, detail: Optional[Callable[[], str]] = None) -> None:
    """Raises the error for ``code`` unless it is ``ITSME_OK``.

    ``detail`` reads the last-error detail of the handle the call was made on.
    An exception raised meanwhile by a host callback (secret store, replay
    store) on this thread becomes the error's ``__cause__``.
    """
    cause = getattr(_pending, "error", None)
    _pending.error = None
    if code == Result.ITSME_OK:
        return
    error = error_for(code, detail() if detail is not None else "")
    raise error from cause
