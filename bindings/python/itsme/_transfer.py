"""Device transfer (``itsme_import``, ``itsme_transfer``), docs/PROTOCOL.md
section 17.

A person moving to a new device takes the identity key, the contacts key and
the name along; the device secrets stay behind, so every contact sees a
changed device at the next verification.  Two ways carry the identity:

* a password export: :meth:`Identity.export` seals it under a password
  (:func:`generate_export_password`) into a blob, or its text
  (:func:`export_to_text`, one QR code); :meth:`Identity.export_with_contacts`
  seals the contact store along (a file only: no text form); the new device
  opens either with :meth:`Import.open`;
* a live transfer with no password: :meth:`Transfer.receiver` on the new
  device, :meth:`Transfer.sender` on the old one, a SAS both show, and
  :meth:`Transfer.take_import` once the identity (and the contact store, if
  the sender called :meth:`Transfer.include_contacts`) has arrived.

Either way the new device holds an :class:`Import`, which it checks
(:meth:`Import.check`) and installs (:meth:`Import.install`) into its secret
store and contact store.  The contact store comes inside the import (an
export with the contacts, or a transfer that included them:
:meth:`Import.write_contacts` writes it as a new file), or moves as a file:
a backup (:meth:`ContactStore.backup`), or a copy made while no program has
it open.
"""

from __future__ import annotations

import enum
import os
from ctypes import byref, c_uint32, c_uint64, c_void_p
from dataclasses import dataclass
from typing import NamedTuple, Optional, Union

from ._contacts import ContactStore, _bytes_argument
from ._errors import check
from ._exchange import SHORT_CODE_SIZE
from ._ffi import ImportReportStruct, lib
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
from ._identity import FINGERPRINT_SIZE, Identity, PinStatus
from ._online_verify import ROOM_NAME_SIZE
from ._random import DeterministicRandom, use_random
from ._store import SecretStore

__all__ = [
    "EXPORT_CONTACTS_MAX",
    "EXPORT_CHOSEN_PASSWORD_MIN",
    "EXPORT_MAX",
    "EXPORT_PASSWORD_SIZE",
    "EXPORT_TEXT_SIZE",
    "IMPORT_REPLACE",
    "TRANSFER_MESSAGE_MAX",
    "TRANSFER_OFFER_SIZE",
    "ExportHeader",
    "Import",
    "ImportReport",
    "PasswordKind",
    "Transfer",
    "TransferState",
    "export_from_text",
    "export_header",
    "export_to_text",
    "generate_export_password",
    "import_status",
]

#: Buffer size for a generated password, ``"ABCD-EFGH-JKMNP"`` and the NUL
#: (``ITSME_EXPORT_PASSWORD_SIZE``).
EXPORT_PASSWORD_SIZE = 16
#: Shortest chosen password, in characters (``ITSME_EXPORT_CHOSEN_PASSWORD_MIN``).
EXPORT_CHOSEN_PASSWORD_MIN = 8
#: A buffer size that holds any export blob of the identity alone
#: (``ITSME_EXPORT_MAX``): an export is 144 bytes plus the name's length, 272
#: bytes at most.  An export with the contacts is larger by the store's size.
EXPORT_MAX = 272
#: A buffer size that holds any export text, NUL included
#: (``ITSME_EXPORT_TEXT_SIZE``): the largest text is 372 characters.
EXPORT_TEXT_SIZE = 373
#: :meth:`Import.install` flag: proceed over a wrong identity (``ITSME_IMPORT_REPLACE``).
IMPORT_REPLACE = 1
#: Buffer size for a transfer offer's text, NUL included (``ITSME_TRANSFER_OFFER_SIZE``).
TRANSFER_OFFER_SIZE = 76
#: Longest transfer message, in bytes (``ITSME_TRANSFER_MESSAGE_MAX``): a
#: store message carrying a whole 32 KiB chunk of the contact store.
TRANSFER_MESSAGE_MAX = 32786
#: The largest contact store an export or a transfer carries, in bytes (64 MiB,
#: ``ITSME_EXPORT_CONTACTS_MAX``); a larger one is copied as a file instead.
EXPORT_CONTACTS_MAX = 67108864

_UINT32_MAX = 2**32 - 1
# A first guess at a display name's size; longer names take a second call.
_NAME_GUESS = 64

PathArgument = Union[str, "os.PathLike[str]"]


class PasswordKind(enum.IntEnum):
    """How an export's password was made (``ITSME_EXPORT_PASSWORD_*``)."""

    #: Drawn by the library (:func:`generate_export_password`): 13
    #: characters, 64.4 bits, typed back in any case with spaces or dashes.
    GENERATED = 1
    #: Chosen by the person, only where the host insists: at least 8
    #: characters, used exactly as typed.
    CHOSEN = 2


class TransferState(enum.IntEnum):
    """``itsme_transfer_state`` (``ITSME_TRANSFER_*``)."""

    #: Receiver: waiting for the old device's key.
    AWAITING_PEER = 1
    #: Both keys known: show the SAS for the person to compare.
    COMPARE_SAS = 2
    #: Receiver: confirmed; the identity (or all of the contact store that
    #: comes with it) has not arrived yet.
    AWAITING_IDENTITY = 3
    #: Sender: the identity is queued.  Receiver: call :meth:`Transfer.take_import`.
    DONE = 4
    REJECTED = 5
    #: A message was refused, or the time ran out.  Final: start a new transfer.
    FAILED = 6


class ExportHeader(NamedTuple):
    """What an export's header asks for, read without any key derivation."""

    #: Argon2id passes (3 to 10 are accepted).
    passes: int
    #: Argon2id memory, in KiB (256 MiB to 1 GiB are accepted).
    memory_kib: int
    #: The password's kind (:class:`PasswordKind`).
    password_kind: PasswordKind


@dataclass(frozen=True)
class ImportReport:
    """What installing an import would do on this device (``itsme_import_report``)."""

    #: Installing needs ``replace=True``: another identity is in the secret
    #: store, or some contacts are sealed under another contacts key.
    wrong_identity: bool
    #: The other identity's fingerprint, ``"unreadable"`` if its record
    #: cannot be read, or None if there is none (or it is the same identity).
    other_fingerprint: Optional[str]
    #: Whether the contact store file exists.
    store_exists: bool
    #: Contacts the imported contacts key opens.
    contacts_readable: int
    #: Contacts it cannot open: a replacing install deletes them.
    contacts_unreadable: int
    #: Contacts with device secrets: every install forgets them all.
    device_secrets: int

    @classmethod
    def _from_struct(cls, report: ImportReportStruct) -> "ImportReport":
        other = report.other_fingerprint.decode("utf-8", "replace")
        return cls(
            wrong_identity=bool(report.wrong_identity),
            other_fingerprint=other or None,
            store_exists=bool(report.store_exists),
            contacts_readable=report.contacts_readable,
            contacts_unreadable=report.contacts_unreadable,
            device_secrets=report.device_secrets,
        )


def _secret_store(store: object) -> SecretStore:
    if not isinstance(store, SecretStore):
        raise TypeError(f"store must be a SecretStore, not {type(store).__name__}")
    return store


def _identity(identity: object) -> Identity:
    if not isinstance(identity, Identity):
        raise TypeError(f"identity must be an Identity, not {type(identity).__name__}")
    return identity


def _contact_store(contacts: object) -> ContactStore:
    if not isinstance(contacts, ContactStore):
        raise TypeError(f"contacts must be a ContactStore, not {type(contacts).__name__}")
    return contacts


def _path(path: Optional[PathArgument]) -> Optional[bytes]:
    """A contact store path for the C side; None stays NULL (no store)."""
    if path is None:
        return None
    return encode_text(os.fspath(path), "store_path")


# -- the password export (section 17.1) -------------------------------------------


def generate_export_password(random: Optional[DeterministicRandom] = None) -> str:
    """A new generated export password, ``"ABCD-EFGH-JKMNP"``.

    13 characters of the invite alphabet (no 0, 1, I, L or O), 64.4 bits,
    drawn from ``random`` (tests and vectors only; None: the operating
    system).  Show it to the person to copy; it is typed back in any case,
    with spaces or dashes or neither.
    """
    with use_random(random) as rng:
        return read_text(
            lambda buf, cap, out_len: lib.itsme_export_generate_password(rng, buf, cap, out_len),
            EXPORT_PASSWORD_SIZE,
            thread_last_error,
        )


def _export_identity(
    identity: Identity,
    pin: str,
    password: str,
    kind: int = PasswordKind.GENERATED,
    now: Optional[int] = None,
    random: Optional[DeterministicRandom] = None,
) -> bytes:
    """The body of :meth:`Identity.export`."""
    identity = _identity(identity)
    encoded_pin = encode_text(pin, "pin")
    encoded_password = encode_text(password, "password")
    kind_code = int_argument(kind, "kind", 0, _UINT32_MAX)
    when = unix_time(now)
    with use_random(random) as rng:
        return identity._read(
            read_bytes,
            lambda ptr, buf, cap, out_len: lib.itsme_identity_export(
                ptr, encoded_pin, when, encoded_password, kind_code, rng, buf, cap, out_len
            ),
            EXPORT_MAX,
        )


def _export_identity_with_contacts(
    identity: Identity,
    pin: str,
    password: str,
    contacts: ContactStore,
    kind: int = PasswordKind.GENERATED,
    now: Optional[int] = None,
    random: Optional[DeterministicRandom] = None,
) -> bytes:
    """The body of :meth:`Identity.export_with_contacts`."""
    identity = _identity(identity)
    contacts = _contact_store(contacts)
    encoded_pin = encode_text(pin, "pin")
    encoded_password = encode_text(password, "password")
    kind_code = int_argument(kind, "kind", 0, _UINT32_MAX)
    when = unix_time(now)
    # The identity's lock before the store's, as an exchange takes them.
    with use_random(random) as rng, identity._use() as identity_ptr, contacts._use() as store_ptr:
        # The first call, with a buffer for the identity alone, fails with
        # the size needed (before the PIN: no attempt is spent); the second,
        # with a buffer of that size, makes the export (copying the store
        # again: should it have grown in between, the buffer grows again).
        return read_bytes(
            lambda buf, cap, out_len: lib.itsme_identity_export_with_contacts(
                identity_ptr, encoded_pin, when, encoded_password, kind_code, store_ptr, rng, buf, cap, out_len
            ),
            EXPORT_MAX,
            lambda: Identity._detail(identity_ptr),
        )


def export_to_text(blob: Union[bytes, bytearray, memoryview]) -> str:
    """The text form of an export blob: ``"ITSMEXP1:"`` and unpadded
    base64url, at most 372 characters (one QR code).

    The blob's header is checked first: raises the errors of
    :func:`export_header`.  An export with the contacts
    (:meth:`Identity.export_with_contacts`) has no text form: it is refused
    with :class:`InvalidArgumentError`.
    """
    data, length = _bytes_argument(blob, "blob")
    return read_text(
        lambda buf, cap, out_len: lib.itsme_export_to_text(data, length, buf, cap, out_len),
        EXPORT_TEXT_SIZE,
        thread_last_error,
    )


def export_from_text(text: str) -> bytes:
    """The blob from an export's text (white space around it is ignored).

    Raises :class:`InvalidArgumentError` for another text version
    (``"ITSMEXP2:"``), or for text shaped like an export of the source app
    (base64 or base64url of at least 64 bytes, or JSON naming version 3),
    which is never accepted: its version 3 sealed the identity under an
    unsalted SHA-256 of a PIN, its version 5 under PBKDF2.  The error's
    detail says why, and that a new export must be made on the old device.
    Raises :class:`MalformedMessageError` for any other text that is not an
    export's, or damaged base64url.
    """
    encoded = encode_text(text, "text")
    return read_bytes(
        lambda buf, cap, out_len: lib.itsme_export_from_text(encoded, buf, cap, out_len),
        EXPORT_MAX,
        thread_last_error,
    )


def export_header(blob: Union[bytes, bytearray, memoryview]) -> ExportHeader:
    """Reads and range-checks an export's header without any key
    derivation: ``(passes, memory_kib, password_kind)``.

    Raises :class:`MalformedMessageError` for a truncated blob or one that
    is not an export, and :class:`InvalidArgumentError` for an unknown
    format version, key derivation or password kind, or Argon2id parameters
    outside the accepted 3 to 10 passes over 256 MiB to 1 GiB.
    """
    data, length = _bytes_argument(blob, "blob")
    passes, memory, kind = c_uint32(), c_uint32(), c_uint32()
    check(
        lib.itsme_export_header(data, length, byref(passes), byref(memory), byref(kind)),
        thread_last_error,
    )
    return ExportHeader(passes.value, memory.value, enum_or_int(PasswordKind, kind.value))


def import_status(store: SecretStore, now: Optional[int] = None) -> PinStatus:
    """The export-password limiter of ``store`` at unix time ``now``
    (default: the current time), as :meth:`Identity.pin_status`:
    ``(failures, wait_seconds)``.

    Five wrong passwords lock :meth:`Import.open` for 5 minutes; each
    further one doubles the wait, up to 24 hours.
    """
    store = _secret_store(store)
    when = unix_time(now)
    failures, wait = c_uint32(), c_uint64()
    with store._use() as store_ptr:
        check(
            lib.itsme_import_status(store_ptr, when, byref(failures), byref(wait)),
            lambda: SecretStore._detail(store_ptr),
        )
    return PinStatus(failures.value, wait.value)


# -- the import (sections 17.2, 17.4) --------------------------------------------------


class Import(DetailedHandle):
    """An identity received on the new device (``itsme_import``), from a
    password export (:meth:`open`) or a live transfer
    (:meth:`Transfer.take_import`), to check and install.  Here Alice
    (``me``) exports hers at the fixed time ``now``, and the new device has
    an empty secret store and copies her contact store file along::

        >>> me.set_pin("123456")
        >>> password = generate_export_password()     # show it to the person
        >>> blob = me.export("123456", password, now=now)
        >>> new_secrets = SecretStore.memory()        # on the new device
        >>> contacts.backup(tmp + "/contacts.db")     # the store file, copied
        >>> with Import.open(new_secrets, blob, password, now) as received:
        ...     report = received.check(new_secrets, tmp + "/contacts.db")   # changes nothing
        ...     print(received.name, report.wrong_identity)
        ...     # with report.wrong_identity, ask the person before replace=True
        ...     moved = received.install(new_secrets, tmp + "/contacts.db", replace=False)
        Alice False
        >>> moved.fingerprint == me.fingerprint
        True

    An import that carries the contact store (:attr:`contacts_size` > 0)
    writes it first, as a new file, with :meth:`write_contacts`, and that
    file is then the ``contacts_path`` checked and installed.

    Closing it wipes the keys it holds.  Not for use by two threads at once
    (calls on one import are serialised by a lock).
    """

    _kind = "import"
    _free_function = lib.itsme_import_free
    _last_error_name = "itsme_import_last_error"

    @classmethod
    def open(
        cls,
        store: SecretStore,
        blob: Union[bytes, bytearray, memoryview],
        password: str,
        now: Optional[int] = None,
    ) -> "Import":
        """Opens an export blob (:func:`export_from_text` reads its text)
        with the password the person typed, at unix time ``now`` (default:
        the current time).

        The header is checked first (a refused header costs nothing), then
        the password, as a counted attempt under the export-password limiter
        kept in ``store`` (:func:`import_status`), then the contents.  Takes
        about a second (Argon2id, 256 MiB).

        Raises :class:`InvalidArgumentError` (the header's refusals, or a
        password not of the kind the header names: a generated password is
        13 characters of its alphabet, a chosen one at least 8),
        :class:`MalformedMessageError` (truncated, or not an export),
        :class:`AuthenticationFailedError` (a wrong password or an altered
        export: counted), :class:`LockedError` (too many wrong passwords:
        not checked, not counted), :class:`CorruptDataError` (malformed
        contents, or a fingerprint that does not match the key).  The
        error's detail is the store's last error.
        """
        store = _secret_store(store)
        data, length = _bytes_argument(blob, "blob")
        encoded = encode_text(password, "password")
        when = unix_time(now)
        out = c_void_p()
        with store._use() as store_ptr:
            check(
                lib.itsme_import_open(store_ptr, data, length, encoded, when, byref(out)),
                lambda: SecretStore._detail(store_ptr),
            )
        return cls(new_handle(out))

    @property
    def fingerprint(self) -> str:
        """The imported identity's fingerprint: 16 uppercase hex digits."""
        return self._read(read_text, lib.itsme_import_fingerprint, FINGERPRINT_SIZE)

    @property
    def name(self) -> str:
        """The imported identity's display name."""
        return self._read(read_text, lib.itsme_import_name, _NAME_GUESS)

    @property
    def contacts_size(self) -> int:
        """The size in bytes of the contact store the import carries (an
        export with the contacts, or a transfer whose sender included
        them), 0 if none."""
        size = c_uint64()
        self._call(lib.itsme_import_contacts_size, byref(size))
        return size.value

    def write_contacts(self, path: PathArgument) -> None:
        """Writes the contact store the import carries as a new file at
        ``path`` (mode 0600, synced), to pass as ``store_path`` to
        :meth:`check` and :meth:`install`, as a copied store file would be.

        Never overwrites anything: raises :class:`AlreadyExistsError` if
        something is at ``path``, :class:`NotFoundError` if the import
        carries no store (:attr:`contacts_size` is 0),
        :class:`InvalidArgumentError` for an empty path, and
        :class:`DatabaseError` if the file could not be written (nothing is
        left at ``path`` then).
        """
        encoded = encode_text(os.fspath(path), "path")
        self._call(lib.itsme_import_write_contacts, encoded)

    def check(self, store: SecretStore, store_path: Optional[PathArgument]) -> ImportReport:
        """What installing into ``store`` and the contact store file at
        ``store_path`` (None: no contact store; a missing file is fine)
        would do, changing nothing.

        Raises :class:`DatabaseError` if the file is not a contact store,
        :class:`CorruptDataError`, :class:`SecretStoreError`.
        """
        store = _secret_store(store)
        path = _path(store_path)
        report = ImportReportStruct()
        with self._use() as ptr, store._use() as store_ptr:
            check(lib.itsme_import_check(ptr, store_ptr, path, byref(report)), lambda: self._detail(ptr))
        return ImportReport._from_struct(report)

    def install(self, store: SecretStore, store_path: Optional[PathArgument], replace: bool = False) -> Identity:
        """Installs the imported identity; returns it, open on ``store``.

        Saves the identity in ``store`` (keeping its PIN, if one is set) and
        makes the contact store at ``store_path`` (None: none) its store, in
        one transaction: every device secret is forgotten, so every contact
        sees a changed device at the next verification (give each a
        degradation code).  With ``replace``, another identity in ``store``
        is replaced and the contacts the imported key cannot read are
        deleted; every other contact is kept.

        Raises :class:`WrongIdentityError`, changing nothing, if
        :meth:`check` reports ``wrong_identity`` and ``replace`` is False;
        and :class:`DatabaseError`, :class:`CorruptDataError`,
        :class:`SecretStoreError`.  Running an interrupted install again
        finishes it.
        """
        store = _secret_store(store)
        path = _path(store_path)
        flags = IMPORT_REPLACE if replace else 0
        out = c_void_p()
        with self._use() as ptr, store._use() as store_ptr:
            check(lib.itsme_import_install(ptr, store_ptr, path, flags, byref(out)), lambda: self._detail(ptr))
        return Identity(new_handle(out))

    def __repr__(self) -> str:
        if self.closed:
            return "<Import closed>"
        return f"<Import {self.fingerprint}>"


# -- the live transfer (section 17.3) --------------------------------------------------


class Transfer(DetailedHandle):
    """A live device transfer (``itsme_transfer``): no password, the two
    devices side by side; messages go one way, old device to new.

    Here Alice's old device (``me``, her ``contacts``) and her new one run
    side by side at the fixed time ``now``; what the sender gives goes to
    the receiver through the relay room :attr:`room`.  On the new device
    (the receiver), then on the old one (the sender), after scanning the
    offer::

        >>> new = Transfer.receiver(now)
        >>> offer = new.offer                         # shown as a QR code
        >>> me.set_pin("123456")
        >>> old = Transfer.sender(me, "123456", offer, now)
        >>> new.room == old.room                      # both join it
        True
        >>> new.receive(old.next_outgoing(), now)     # the key message
        >>> new.sas == old.sas                        # the person compares the two
        True
        >>> old.include_contacts(contacts)            # optional: the contact store too
        >>> old.confirm(now)                          # only if the SAS matched
        >>> new.confirm(now)                          # or reject()
        >>> while message := old.next_outgoing():     # the identity, then the store's chunks
        ...     new.receive(message, now)
        >>> new.state
        <TransferState.DONE: ...>
        >>> received = new.take_import()              # write_contacts, check and install
        >>> received.contacts_size > 0
        True

    With the contact store included, the identity message is followed by
    store messages (32 KiB chunks, each up to :data:`TRANSFER_MESSAGE_MAX`
    bytes); the receiver feeds them all to :meth:`receive` and is ``DONE``
    once the last has arrived; its import then carries the store
    (:meth:`Import.write_contacts`).

    A failure is final: :attr:`state` is ``FAILED`` and later calls raise
    :class:`InvalidStateError`.  A transfer lasts at most 10 minutes
    (:class:`ExpiredError`).  Times are unix seconds; None means now.

    Closing it wipes its secrets.  Not for use by two threads at once
    (calls on one transfer are serialised by a lock).
    """

    _kind = "transfer"
    _free_function = lib.itsme_transfer_free
    _last_error_name = "itsme_transfer_last_error"

    def __init__(self, ptr: int, identity: Optional[Identity] = None) -> None:
        """Wraps an owned handle; use :meth:`receiver` or :meth:`sender`."""
        super().__init__(ptr)
        # The sender's identity, kept so that it outlives the transfer.
        self._identity = identity

    @classmethod
    def receiver(cls, now: Optional[int] = None, random: Optional[DeterministicRandom] = None) -> "Transfer":
        """The new device's side: draws a one-time key and a transfer id
        (from ``random``, tests and vectors only; None: the operating
        system).  Show :attr:`offer` as a QR code and join :attr:`room`."""
        when = unix_time(now)
        out = c_void_p()
        with use_random(random) as rng:
            check(lib.itsme_transfer_new_receiver(rng, when, byref(out)), thread_last_error)
        return cls(new_handle(out))

    @classmethod
    def sender(
        cls,
        identity: Identity,
        pin: str,
        offer: str,
        now: Optional[int] = None,
        random: Optional[DeterministicRandom] = None,
    ) -> "Transfer":
        """The old device's side: reads the ``offer`` text the new device
        shows, checks the PIN (a counted attempt, as
        :meth:`Identity.verify_pin`), and queues its key for
        :meth:`next_outgoing`.  The SAS is known at once.

        Raises :class:`MalformedMessageError` for a text that is not an
        offer (checked before the PIN), the errors of
        :meth:`Identity.verify_pin` (:class:`WrongPinError`,
        :class:`LockedError`, :class:`InvalidPinError`,
        :class:`NotFoundError`), :class:`InvalidKeyError` (a low-order key).
        The error's detail is the identity's last error.
        """
        identity = _identity(identity)
        encoded_pin = encode_text(pin, "pin")
        encoded_offer = encode_text(offer, "offer")
        when = unix_time(now)
        out = c_void_p()
        with use_random(random) as rng, identity._use() as identity_ptr:
            check(
                lib.itsme_transfer_new_sender(identity_ptr, encoded_pin, encoded_offer, rng, when, byref(out)),
                lambda: Identity._detail(identity_ptr),
            )
        return cls(new_handle(out), identity)

    @property
    def is_sender(self) -> bool:
        """True on the old device, False on the new one."""
        return self._identity is not None

    @property
    def state(self) -> TransferState:
        """Where the transfer stands on this side (:class:`TransferState`)."""
        state = c_uint32()
        self._call(lib.itsme_transfer_status, byref(state))
        return enum_or_int(TransferState, state.value)

    @property
    def offer(self) -> str:
        """The offer text (``"ITSMETR2:..."``, 75 characters) the receiver
        shows as a QR code; on the sender, the offer it read."""
        return self._read(read_text, lib.itsme_transfer_offer, TRANSFER_OFFER_SIZE)

    @property
    def room(self) -> str:
        """The relay room both devices join: 32 lowercase hex digits."""
        return self._read(read_text, lib.itsme_transfer_room, ROOM_NAME_SIZE)

    def next_outgoing(self) -> bytes:
        """The next message to send (sender only), removed from the queue;
        ``b""`` when there is none."""
        return self._read(read_bytes, lib.itsme_transfer_next_outgoing, TRANSFER_MESSAGE_MAX)

    def receive(self, data: Union[bytes, bytearray, memoryview], now: Optional[int] = None) -> None:
        """Feeds one message from the old device (receiver only).

        Raises :class:`InvalidStateError` on a sender or once the transfer
        is over, and, ending the transfer as failed:
        :class:`MalformedMessageError` (malformed, out of order, twice),
        :class:`AuthenticationFailedError` (the identity message does not
        open: tampered, or from another sender), :class:`InvalidKeyError`
        (a low-order or reflected key), :class:`CorruptDataError` (the
        contents are malformed), :class:`ExpiredError`.
        """
        when = unix_time(now)
        buffer, length = _bytes_argument(data, "data")
        self._call(lib.itsme_transfer_receive, buffer, length, when)

    @property
    def sas(self) -> str:
        """The SAS both devices show (``"ECHO 0042"``).  Raises
        :class:`InvalidStateError` before it is known or once the transfer
        failed."""
        return self._read(read_text, lib.itsme_transfer_sas, SHORT_CODE_SIZE)

    def include_contacts(self, contacts: ContactStore) -> None:
        """Sender, before confirming: sends the contact store too.

        A consistent copy of ``contacts`` (a store of the sender's identity;
        safe while it is in use) is made now and, at :meth:`confirm`, sealed
        after the identity in chunks of 32 KiB, queued as store messages for
        :meth:`next_outgoing`; the receiver's import then carries it
        (:attr:`Import.contacts_size`, :meth:`Import.write_contacts`).

        Raises :class:`InvalidStateError` on a receiver or once the SAS is
        no longer being compared, :class:`WrongIdentityError` for a store
        of another identity than the sender's, :class:`InvalidArgumentError`
        for a store larger than :data:`EXPORT_CONTACTS_MAX`, and
        :class:`DatabaseError` if the copy could not be made.
        """
        contacts = _contact_store(contacts)
        with self._use() as ptr, contacts._use() as store_ptr:
            check(lib.itsme_transfer_include_contacts(ptr, store_ptr), lambda: self._detail(ptr))

    def confirm(self, now: Optional[int] = None) -> None:
        """The SAS matched.  Sender: seals and queues the identity (and the
        contact store, if included).  Receiver: opens what has arrived, else
        waits for it.

        Raises :class:`InvalidStateError` without a SAS to confirm,
        :class:`ExpiredError`, and, for an identity that arrived early, the
        errors of :meth:`receive`.
        """
        self._call(lib.itsme_transfer_confirm, unix_time(now))

    def reject(self) -> None:
        """The SAS differed, or the person gave up: nothing is sent or kept.
        :class:`InvalidStateError` once the transfer is over."""
        self._call(lib.itsme_transfer_reject)

    def take_import(self) -> Import:
        """The received identity (receiver, state ``DONE``), to check and
        install like an opened export.  Once only: later calls raise
        :class:`InvalidStateError`."""
        out = c_void_p()
        self._call(lib.itsme_transfer_take_import, byref(out))
        return Import(new_handle(out))

    def __repr__(self) -> str:
        if self.closed:
            return "<Transfer closed>"
        state = self.state
        name = getattr(state, "name", str(state))
        return f"<Transfer {'sender' if self.is_sender else 'receiver'} {name}>"
