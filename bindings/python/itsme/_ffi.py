"""Loads libitsme and declares its C interface (include/itsme.h) from the
generated declarations in :mod:`itsme._abi`.

Nothing here is safe to call carelessly: these are the C functions as they
are, with the header's ownership and buffer rules.  The safe API lives in the
package itself.

Every function of include/itsme.h gets its ctypes signature
(:data:`itsme._abi.FUNCTIONS`) when the library is loaded; a library without
one of them is refused.  The functions of include/itsme_testing.h
(:data:`itsme._abi.TESTING_FUNCTIONS`), which only a test build of the
library exports, are looked up and declared when first used: against a
release build that use raises :class:`TestBuildRequiredError`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import TYPE_CHECKING, List, Mapping, Optional, Tuple

from . import _abi

if TYPE_CHECKING:
    from ctypes import _NamedFuncPointer

__all__ = [
    "ABI_VERSION",
    "BUNDLED_LIBRARY_FILE",
    "LIBRARY_ENV",
    "Library",
    "LibraryVersionError",
    "SYSTEM_LIBRARY_FILE",
    "TESTING_BUILD_COMMAND",
    "TestBuildRequiredError",
    "GetCallback",
    "PutCallback",
    "RemoveCallback",
    "DestroyCallback",
    "SecretStoreCallbacks",
    "VoiceDerivationStruct",
    "ImportReportStruct",
    "StoreLossStruct",
    "ApprovalRequestInfoStruct",
    "CredentialInfoStruct",
    "ApprovalResultStruct",
    "RollCallParticipantStruct",
    "ReplayInsertCallback",
    "ReplayDestroyCallback",
    "ReplayStoreCallbacks",
    "check_version",
    "find_library_path",
    "load_library",
    "lib",
    "testing_functions_available",
    "version_text",
]

#: Environment variable naming the shared library to load (a path).
LIBRARY_ENV = "ITSME_LIBRARY"
#: The library's file name inside the package, where the wheel bundles it.
BUNDLED_LIBRARY_FILE = "libitsme.so"
#: The name left to the dynamic loader when ctypes.util.find_library finds nothing.
SYSTEM_LIBRARY_FILE = "libitsme.so"
#: The ABI this binding was written for, (MAJOR, MINOR): that of the header
#: :mod:`itsme._abi` was generated from.  While the major version is 0 the
#: minor names the ABI (include/itsme.h, "Compatibility"), so any libitsme
#: of that MAJOR.MINOR will do, whatever its patch level, and no other.
ABI_VERSION: Tuple[int, int] = _abi.ABI_VERSION
#: How to build a library that exports the functions of include/itsme_testing.h.
TESTING_BUILD_COMMAND = "make lib-testing"

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

# The generated declarations under the names the package uses.
SecretStoreCallbacks = _abi.itsme_secret_store_callbacks
GetCallback = _abi.itsme_secret_store_callbacks_get
PutCallback = _abi.itsme_secret_store_callbacks_put
RemoveCallback = _abi.itsme_secret_store_callbacks_remove
DestroyCallback = _abi.itsme_secret_store_callbacks_destroy
VoiceDerivationStruct = _abi.itsme_voice_derivation
ImportReportStruct = _abi.itsme_import_report
StoreLossStruct = _abi.itsme_store_loss
ApprovalRequestInfoStruct = _abi.itsme_approval_request_info
CredentialInfoStruct = _abi.itsme_credential_info
ApprovalResultStruct = _abi.itsme_approval_result
RollCallParticipantStruct = _abi.itsme_rollcall_participant_info
ReplayStoreCallbacks = _abi.itsme_replay_store_callbacks
ReplayInsertCallback = _abi.itsme_replay_store_callbacks_insert
ReplayDestroyCallback = _abi.itsme_replay_store_callbacks_destroy


class TestBuildRequiredError(AttributeError):
    """A function of include/itsme_testing.h was called on a library that
    does not export it: a release build.  Only a test build
    (``make lib-testing``) exports those functions.

    Attributes:
        function: the function's name.
        path: the library that was loaded.
    """

    __test__ = False  # not a test class, whatever pytest thinks of the name

    def __init__(self, function: str, path: str) -> None:
        self.function = function
        self.path = path
        super().__init__(
            f"{function} is exported only by a test build of libitsme (include/itsme_testing.h), "
            f"and {path!r} is not one: build it with `{TESTING_BUILD_COMMAND}` and set "
            f"{LIBRARY_ENV} to the library it makes"
        )

    def __reduce__(self) -> Tuple[type, Tuple[str, str]]:
        return (type(self), (self.function, self.path))


class Library(ctypes.CDLL):
    """libitsme: a ``ctypes.CDLL`` that declares a function of
    include/itsme_testing.h the first time it is looked up, and raises
    :class:`TestBuildRequiredError` for one the library does not export."""

    def __getattr__(self, name: str) -> _NamedFuncPointer:
        signature = _abi.TESTING_FUNCTIONS.get(name)
        if signature is None:
            return super().__getattr__(name)
        try:
            function = super().__getattr__(name)  # cached on the instance from now on
        except AttributeError:
            raise TestBuildRequiredError(name, self._name) from None
        function.restype = signature.restype
        function.argtypes = list(signature.argtypes)
        return function


def testing_functions_available(library: Optional[ctypes.CDLL] = None) -> bool:
    """Whether ``library`` (default: the loaded one) exports every function of
    include/itsme_testing.h: a test build does, a release build does not
    (True while that header declares none)."""
    library = lib if library is None else library
    for name in _abi.TESTING_FUNCTIONS:
        try:
            getattr(library, name)
        except AttributeError:
            return False
    return True


def _system_library() -> Tuple[str, str]:
    """The system's libitsme: what ``ctypes.util.find_library`` finds, else
    plain ``"libitsme.so"`` left to the dynamic loader's search path.
    Returns (what to load, how it was found)."""
    found = ctypes.util.find_library("itsme")
    if found:
        return found, f"the system's libitsme ({found!r}, found by ctypes.util.find_library)"
    return (
        SYSTEM_LIBRARY_FILE,
        f"the system's libitsme (ctypes.util.find_library found none; "
        f"{SYSTEM_LIBRARY_FILE!r} on the dynamic loader's search path)",
    )


def _search(
    environ: Optional[Mapping[str, str]] = None, package_dir: Optional[str] = None
) -> Tuple[str, List[str]]:
    """(what to load, every place looked at on the way, in order)."""
    environ = os.environ if environ is None else environ
    package_dir = _PACKAGE_DIR if package_dir is None else package_dir
    override = environ.get(LIBRARY_ENV)
    if override:
        return override, [f"{LIBRARY_ENV}={override!r}"]
    tried = [f"{LIBRARY_ENV} (not set)"]
    bundled = os.path.join(package_dir, BUNDLED_LIBRARY_FILE)
    if os.path.exists(bundled):
        return bundled, tried + [f"the library bundled in the package ({bundled!r})"]
    tried.append(f"the library bundled in the package ({bundled!r}: not there)")
    path, how = _system_library()
    return path, tried + [how]


def find_library_path(
    environ: Optional[Mapping[str, str]] = None, package_dir: Optional[str] = None
) -> str:
    """Where to load libitsme from.

    In order: the ``ITSME_LIBRARY`` environment variable (a path), which
    overrides everything; else ``libitsme.so`` in the package's directory
    (the library bundled in the wheel), if it is there; else the system's:
    ``ctypes.util.find_library("itsme")``, then plain ``"libitsme.so"`` left
    to the dynamic loader's search path.

    ``environ`` (default ``os.environ``) and ``package_dir`` (default this
    package's directory) are for tests.
    """
    return _search(environ, package_dir)[0]


def version_text(number: int) -> str:
    """An ``itsme_version_number()`` value as ``"MAJOR.MINOR.PATCH"``."""
    return f"{number // 10000}.{number // 100 % 100}.{number % 100}"


class LibraryVersionError(OSError):
    """The libitsme found is of another ABI than this binding's.

    While the major version is 0 the minor version names the ABI, so the
    binding accepts a library whose ``MAJOR.MINOR`` is :data:`ABI_VERSION`,
    whatever its patch level.  Importing :mod:`itsme` raises this error for
    another library; as the import fails, catch it there as ``OSError``
    (which every failure to load the library is).

    Attributes:
        path: the library that was loaded.
        found: its ``itsme_version_number()`` (MAJOR * 10000 + MINOR * 100 + PATCH).
        expected: the ABI this binding was written for, (MAJOR, MINOR).
    """

    def __init__(self, path: str, found: int, expected: Tuple[int, int] = ABI_VERSION) -> None:
        self.path = path
        self.found = found
        self.expected = expected
        wanted = f"{expected[0]}.{expected[1]}"
        super().__init__(
            f"{path!r} is libitsme {version_text(found)}, but this binding of itsme "
            f"was written for libitsme {wanted} (any {wanted}.x): install the matching "
            f"library or binding, or set {LIBRARY_ENV} to the path of a libitsme {wanted}.x"
        )

    def __reduce__(self) -> Tuple[type, Tuple[str, int, Tuple[int, int]]]:
        return (type(self), (self.path, self.found, self.expected))


def check_version(library: ctypes.CDLL, path: str) -> int:
    """Refuses a library whose MAJOR.MINOR is not :data:`ABI_VERSION`.

    Calls ``itsme_version_number()`` (which needs no ``itsme_init()``) and
    returns it; raises :class:`LibraryVersionError` for another ABI and
    ``OSError`` if the library does not export the function.
    """
    try:
        function = library.itsme_version_number
    except AttributeError as error:
        raise OSError(f"{path!r} does not export itsme_version_number: it is not libitsme") from error
    signature = _abi.FUNCTIONS["itsme_version_number"]
    function.restype = signature.restype
    function.argtypes = list(signature.argtypes)
    number = int(function())
    if (number // 10000, number // 100 % 100) != ABI_VERSION:
        raise LibraryVersionError(path, number)
    return number


_FIX = (
    "install the itsme-verify wheel (it bundles the library), install libitsme "
    f"(make install), or set {LIBRARY_ENV} to the path of libitsme.so"
)


def load_library(path: Optional[str] = None) -> Library:
    """Loads libitsme, checks its version and declares every function of
    include/itsme.h (:data:`itsme._abi.FUNCTIONS`).

    Without ``path``, the library is looked for as :func:`find_library_path`
    says.  Does not call ``itsme_init()``.  Raises :class:`LibraryVersionError`
    for a library of another ABI, and ``OSError`` if the library cannot be
    loaded or lacks one of the functions.
    """
    if path is None:
        path, tried = _search()
    else:
        tried = [f"{path!r} (given)"]
    try:
        library = Library(path)
    except OSError as error:
        raise OSError(
            f"cannot load libitsme from {path!r} ({error}).  Looked at: "
            + "; ".join(tried)
            + f".  To fix it, {_FIX}."
        ) from error
    check_version(library, path)
    for name, (restype, argtypes) in _abi.FUNCTIONS.items():
        try:
            function = getattr(library, name)
        except AttributeError as error:
            raise OSError(f"{path!r} does not export {name}") from error
        function.restype = restype
        function.argtypes = list(argtypes)
    return library


#: The loaded library, with every signature declared.
lib = load_library()
