"""Profile records (``itsme_profile``), docs/PROTOCOL.md section 18."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_size_t, c_uint8, c_void_p
from typing import TYPE_CHECKING, Callable, Optional, Tuple, TypeVar

from ._errors import check
from ._ffi import lib
from ._handle import BufferCall, Detail, Handle, encode_text, new_handle, read_bytes, read_text, thread_last_error
from ._identity import Identity
from ._random import DeterministicRandom, use_random

__all__ = [
    "PHOTO_FILENAME_MAX_BYTES",
    "PROFILE_RECORD_MAX",
    "PROFILE_RECORD_OVERHEAD",
    "PROFILE_REFERENCE_BYTES",
    "RECORD_ID_BYTES",
    "RECORD_NAME_SIZE",
    "Profile",
]

#: Largest profile record, in bytes: the relay's default record limit
#: (``ITSME_PROFILE_RECORD_MAX``).
PROFILE_RECORD_MAX = 262144
#: Bytes of the record format around the three values
#: (``ITSME_PROFILE_RECORD_OVERHEAD``).
PROFILE_RECORD_OVERHEAD = 177
#: Bytes in a record ID (``ITSME_RECORD_ID_BYTES``).
RECORD_ID_BYTES = 16
#: Bytes in a reference: record ID || record key (``ITSME_PROFILE_REFERENCE_BYTES``).
PROFILE_REFERENCE_BYTES = 32
#: Buffer size for a record ID as text: 32 hex digits and the NUL (``ITSME_RECORD_NAME_SIZE``).
RECORD_NAME_SIZE = 33
#: Longest photo filename, in UTF-8 bytes (``ITSME_PHOTO_FILENAME_MAX_BYTES``).
PHOTO_FILENAME_MAX_BYTES = 255

# First guesses at output sizes; longer values take a second call.
_NAME_GUESS = 64
_PHOTO_GUESS = 4096

if TYPE_CHECKING:
    from ctypes import Array

_T = TypeVar("_T")


def bytes_in(value: object, what: str) -> Tuple[Array[c_uint8], int]:
    """Bytes as a C array (at least one element, so never NULL) and its length."""
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"{what} must be bytes, not {type(value).__name__}")
    data = bytes(value)
    return (c_uint8 * max(len(data), 1)).from_buffer_copy(data or b"\0"), len(data)


def wipe(array: Array[c_uint8]) -> None:
    """Overwrites a ctypes buffer with zeros."""
    ctypes.memset(array, 0, ctypes.sizeof(array))


def read_secret(call: BufferCall, size: int, detail: Optional[Detail] = None) -> bytes:
    """Reads a fixed-size secret output (a reference) and wipes the C buffer."""
    buffer, out_len = (c_uint8 * size)(), c_size_t(0)
    try:
        check(call(buffer, size, byref(out_len)), detail)
        return bytes(buffer[: min(out_len.value, size)])
    finally:
        wipe(buffer)


class Profile(Handle):
    """A profile record (``itsme_profile``): a person's name and photo,
    sealed field by field under a random record key and authenticated
    together with the owner's identity key (docs/PROTOCOL.md section 18).

    The owner makes one with :meth:`create`, publishes :attr:`record` on the
    relay under :attr:`record_name` (``PUT /v1/records/{record_name}``) and
    gives contacts :attr:`reference` only through an encrypted,
    authenticated channel (:meth:`OnlineVerify.share_profile`), never in a
    QR code.  A contact fetches the bytes and opens them with :meth:`open`,
    which checks every MAC and the record ID before decrypting anything, and
    applies the result with :meth:`ContactStore.apply_profile` if the person
    agrees.  Here Alice (``me``) shares hers with Bob (``their_contacts``)
    inside an Online Verify, both sides run at the fixed time ``now``, and
    a dict stands for the relay's records::

        >>> relay = {}
        >>> photo = b"\\xff\\xd8 a JPEG image"
        >>> with Profile.create(me, "Alice", photo, "alice.jpg") as mine:
        ...     relay[mine.record_name] = mine.record      # PUT /v1/records/...
        ...     session = OnlineVerify(contacts, contact_id, now=now)
        ...     session.share_profile(mine.reference)      # before the PROOF
        >>> bobs = OnlineVerify(their_contacts, their_id, now=now)
        >>> moved = True
        >>> while moved:                                   # the relay room
        ...     moved = False
        ...     for sender, receiver in ((session, bobs), (bobs, session)):
        ...         if message := sender.next_outgoing():
        ...             receiver.receive(message, now)
        ...             moved = True
        >>> outcome = bobs.confirm(now)                    # the SAS matched

    On the contact's device, once the SAS is confirmed::

        >>> reference = bobs.peer_profile()
        >>> owner_key = their_contacts.get(their_id).public_key
        >>> with Profile.open(relay[reference[:16].hex()], reference, owner_key) as theirs:
        ...     their_contacts.apply_profile(their_id, theirs)
        ...     print(theirs.name, theirs.photo_filename)
        Alice alice.jpg

    Immutable: a new name or photo is a new record.  Closing it wipes the
    record key.  The reference is a secret and never appears in ``repr``.
    """

    _kind = "profile"
    _free_function = lib.itsme_profile_free

    @classmethod
    def create(
        cls,
        identity: Identity,
        name: str = "",
        photo: bytes = b"",
        photo_filename: str = "",
        rng: Optional[DeterministicRandom] = None,
    ) -> "Profile":
        """A new record for ``identity``, with a fresh record key and nonces.

        ``name``: empty, or 1 to 128 bytes of UTF-8 without control
        characters.  ``photo``: the image's bytes (its format is the host's).
        ``photo_filename``: empty, or up to :data:`PHOTO_FILENAME_MAX_BYTES`
        bytes; it needs a photo.  A name or a photo is required, and the
        record must fit in :data:`PROFILE_RECORD_MAX` bytes.  ``rng`` (tests
        and vectors only) draws the record key and nonces from a
        :class:`DeterministicRandom`.  Raises :class:`InvalidArgumentError`
        otherwise.
        """
        if not isinstance(identity, Identity):
            raise TypeError(f"identity must be an Identity, not {type(identity).__name__}")
        encoded_name = encode_text(name, "name")
        encoded_filename = encode_text(photo_filename, "photo_filename")
        picture, picture_len = bytes_in(photo, "photo")
        out = c_void_p()
        with use_random(rng) as random_ptr, identity._use() as identity_ptr:
            check(
                lib.itsme_profile_create(
                    identity_ptr,
                    encoded_name,
                    picture if picture_len else None,
                    picture_len,
                    encoded_filename,
                    random_ptr,
                    byref(out),
                ),
                thread_last_error,
            )
        return cls(new_handle(out))

    @classmethod
    def open(cls, record: bytes, reference: bytes, owner_key: bytes) -> "Profile":
        """Opens record bytes fetched from the relay with the reference the
        owner sent (:data:`PROFILE_REFERENCE_BYTES`) and the owner's identity
        public key (the contact's ``public_key``).

        Checks the size and shape first, then every field MAC, the record
        MAC and the record ID (in constant time), and only then decrypts.
        Raises :class:`MalformedMessageError` for a record larger than
        :data:`PROFILE_RECORD_MAX`, truncated, of another version, or whose
        values break the rules; :class:`AuthenticationFailedError` for a
        tampered byte, a wrong record ID or key, or another owner;
        :class:`InvalidArgumentError` for a reference or key of the wrong
        size.
        """
        data, data_len = bytes_in(record, "record")
        secret, secret_len = bytes_in(reference, "reference")
        key, key_len = bytes_in(owner_key, "owner_key")
        out = c_void_p()
        try:
            check(
                lib.itsme_profile_open(data, data_len, secret, secret_len, key, key_len, byref(out)),
                thread_last_error,
            )
        finally:
            wipe(secret)
        return cls(new_handle(out))

    def _get(
        self,
        reader: Callable[[BufferCall, int], _T],
        function: Callable[..., int],
        guess: int,
    ) -> _T:
        with self._use() as ptr:
            return reader(lambda buf, cap, out_len: function(ptr, buf, cap, out_len), guess)

    @property
    def name(self) -> str:
        """The name; ``""`` if the profile has none."""
        return self._get(read_text, lib.itsme_profile_name, _NAME_GUESS)

    @property
    def photo(self) -> bytes:
        """The photo's bytes; ``b""`` if the profile has none."""
        return self._get(read_bytes, lib.itsme_profile_photo, _PHOTO_GUESS)

    @property
    def photo_filename(self) -> str:
        """The photo's filename; ``""`` if none."""
        return self._get(read_text, lib.itsme_profile_photo_filename, _NAME_GUESS)

    @property
    def record(self) -> bytes:
        """The sealed record, as stored on the relay."""
        return self._get(read_bytes, lib.itsme_profile_record, _PHOTO_GUESS)

    @property
    def record_id(self) -> bytes:
        """The record ID (:data:`RECORD_ID_BYTES`): the first 16 bytes of the record MAC."""
        return self._get(read_bytes, lib.itsme_profile_record_id, RECORD_ID_BYTES)

    @property
    def record_name(self) -> str:
        """The record ID as the relay names it: 32 lowercase hex digits."""
        return self._get(read_text, lib.itsme_profile_record_name, RECORD_NAME_SIZE)

    @property
    def reference(self) -> bytes:
        """The reference (:data:`PROFILE_REFERENCE_BYTES`: record ID || record
        key).  A secret: whoever holds it can read the profile.  Give it only
        through an encrypted, authenticated channel
        (:meth:`OnlineVerify.share_profile`)."""
        with self._use() as ptr:
            return read_secret(
                lambda buf, cap, out_len: lib.itsme_profile_reference(ptr, buf, cap, out_len),
                PROFILE_REFERENCE_BYTES,
            )

    def __repr__(self) -> str:
        if self.closed:
            return "<Profile closed>"
        return f"<Profile record={self.record_name} photo={len(self.photo)} bytes>"
