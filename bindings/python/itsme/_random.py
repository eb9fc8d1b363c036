"""Deterministic random sources (``itsme_random``), for tests and vectors."""

from __future__ import annotations

from contextlib import contextmanager
from ctypes import byref, c_uint8, c_void_p
from typing import Iterator, Optional

from ._errors import check
from ._ffi import lib
from ._handle import Handle, new_handle, thread_last_error

__all__ = ["DeterministicRandom"]

#: Bytes in a deterministic random source's seed.
RANDOM_SEED_BYTES = 32


class DeterministicRandom(Handle):
    """A deterministic random stream (``itsme_random``) under a 32-byte seed.

    The same seed replays the same bytes, so tests can reproduce the
    protocol's test vectors: pass it as ``random=`` to
    :meth:`Identity.create` and to the :class:`Exchange` constructors.
    **Never use one for real keys**: anyone who knows the seed knows every
    key drawn from it.  Calls drawing from one source are serialised.
    """

    _kind = "random source"
    _free_function = lib.itsme_random_free

    def __init__(self, seed: bytes) -> None:
        """A stream seeded with ``seed`` (exactly 32 bytes).

        Raises :class:`InvalidArgumentError` for another length.
        """
        if not isinstance(seed, (bytes, bytearray, memoryview)):
            raise TypeError(f"seed must be bytes, not {type(seed).__name__}")
        data = bytes(seed)
        buffer = (c_uint8 * max(len(data), 1)).from_buffer_copy(data or b"\0")
        out = c_void_p()
        check(lib.itsme_random_new_deterministic(buffer, len(data), byref(out)), thread_last_error)
        super().__init__(new_handle(out))

    def __repr__(self) -> str:
        return f"<DeterministicRandom {'closed' if self.closed else 'open'}>"


@contextmanager
def use_random(random: Optional[DeterministicRandom]) -> Iterator[Optional[int]]:
    """The handle pointer of ``random`` for one call (None: the system's)."""
    if random is None:
        yield None
        return
    if not isinstance(random, DeterministicRandom):
        raise TypeError(f"random must be a DeterministicRandom or None, not {type(random).__name__}")
    with random._use() as ptr:
        yield ptr
