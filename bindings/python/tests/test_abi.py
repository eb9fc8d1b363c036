"""The binding's side of the C interface.

The declarations themselves (constants, enumerations, structs, callback
types, function signatures) are generated from include/itsme.h into
``itsme._abi`` (abi/tools/python.py); ``scripts/abi check`` fails when that
file is stale, so nothing here reads the header.  What is checked here is
what the binding does with them: every function of the header is bound with
its generated signature and nothing else is, a function of the test header
is bound on first use or refused with a clear error, ctypes lays out every
struct as the C compiler did, and the idiomatic layer's names agree with the
header's.
"""

import ctypes
import inspect
import pathlib
import re
from ctypes import c_char_p, c_uint32

import pytest

import itsme
from itsme import _abi, _ffi
from itsme._handle import Handle

PACKAGE = pathlib.Path(itsme.__file__).resolve().parent


def bound_functions(library):
    """The C functions looked up on a library so far (ctypes caches each on
    the instance)."""
    return {name for name, value in vars(library).items() if isinstance(value, ctypes._CFuncPtr)}


# -- functions ---------------------------------------------------------------


def test_every_header_function_is_bound_with_its_generated_signature():
    for name, (restype, argtypes) in _abi.FUNCTIONS.items():
        function = getattr(_ffi.lib, name)
        assert function.restype == restype, name
        assert list(function.argtypes) == list(argtypes), name


def test_nothing_but_the_header_is_bound():
    bound = bound_functions(_ffi.lib)
    assert set(_abi.FUNCTIONS) <= bound, "bound at load"
    assert bound <= set(_abi.FUNCTIONS) | set(_abi.TESTING_FUNCTIONS)
    assert not set(_abi.FUNCTIONS) & set(_abi.TESTING_FUNCTIONS)


def test_loading_binds_every_header_function_at_once():
    library = _ffi.load_library(_ffi.lib._name)
    assert isinstance(library, _ffi.Library)
    assert bound_functions(library) == set(_abi.FUNCTIONS)


def test_the_package_calls_only_header_functions():
    """No module of the package calls a C function the header does not
    declare, or a deprecated one; the generated module is the only place
    that names them all."""
    known = set(_abi.FUNCTIONS) | set(_abi.TESTING_FUNCTIONS)
    for module in sorted(PACKAGE.glob("*.py")):
        if module.name == "_abi.py":
            continue
        source = module.read_text()
        called = set(re.findall(r"\blib\.(itsme_\w+)", source))
        assert called <= known, f"{module.name} calls {sorted(called - known)}"
        for name in _abi.DEPRECATED_FUNCTIONS:
            assert not re.search(rf"\b{name}\b", source), f"{module.name} uses the deprecated {name}"


def test_handles_are_released_by_their_free_function():
    releases = [getattr(_ffi.lib, handle.release) for handle in _abi.HANDLES.values()]
    classes = [cls for _, cls in inspect.getmembers(itsme, inspect.isclass) if issubclass(cls, Handle)]
    with_free = [cls for cls in classes if "_free_function" in vars(cls)]
    assert with_free, "the package's handle classes"
    for cls in with_free:
        assert any(cls._free_function is release for release in releases), cls.__name__
    assert itsme.ContactStore._free_function == _ffi.lib.itsme_store_free


# -- the functions of include/itsme_testing.h --------------------------------


@pytest.fixture
def fresh_library():
    """libitsme loaded anew, with nothing looked up yet."""
    return _ffi.Library(_ffi.lib._name)


def test_a_testing_function_is_bound_on_first_use(fresh_library, monkeypatch):
    # Pretend a function the library does export is the test header's only one.
    monkeypatch.setattr(_abi, "TESTING_FUNCTIONS", {"itsme_nato_word": _abi.Signature(c_char_p, (c_uint32,))})
    assert "itsme_nato_word" not in bound_functions(fresh_library)
    function = fresh_library.itsme_nato_word
    assert (function.restype, list(function.argtypes)) == (c_char_p, [c_uint32])
    assert function(0) == b"ALFA"
    assert fresh_library.itsme_nato_word is function, "looked up once"
    assert _ffi.testing_functions_available(fresh_library)


def test_a_release_library_refuses_a_testing_function(fresh_library, monkeypatch):
    monkeypatch.setattr(_abi, "TESTING_FUNCTIONS", {"itsme_testing_not_exported": _abi.Signature(None, ())})
    with pytest.raises(_ffi.TestBuildRequiredError) as caught:
        fresh_library.itsme_testing_not_exported
    error = caught.value
    assert isinstance(error, AttributeError)
    assert (error.function, error.path) == ("itsme_testing_not_exported", _ffi.lib._name)
    message = str(error)
    assert "itsme_testing_not_exported" in message and "itsme_testing.h" in message
    assert _ffi.TESTING_BUILD_COMMAND in message and _ffi.LIBRARY_ENV in message
    assert not hasattr(fresh_library, "itsme_testing_not_exported")
    assert not _ffi.testing_functions_available(fresh_library)


def test_other_missing_functions_stay_plain_attribute_errors(fresh_library):
    with pytest.raises(AttributeError) as caught:
        fresh_library.itsme_no_such_function
    assert not isinstance(caught.value, _ffi.TestBuildRequiredError)


# -- structs -----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(_abi.LAYOUTS))
def test_ctypes_lays_out_each_struct_as_the_c_compiler(name):
    struct, layout = _abi.STRUCTS[name], _abi.LAYOUTS[name]
    assert (ctypes.sizeof(struct), ctypes.alignment(struct)) == (layout.size, layout.align)
    assert [(field, getattr(struct, field).offset) for field, *_ in struct._fields_] == list(layout.offsets)


def test_structs_start_with_what_the_header_asks_the_caller_to_set():
    """A struct that starts with its size starts with it set, a callback
    table that starts with a version with the header's ITSME_<TABLE>_VERSION,
    whether its other fields are given or not."""
    for name, struct in _abi.STRUCTS.items():
        first = struct._fields_[0][0]
        if first == "size":
            assert struct().size == ctypes.sizeof(struct), name
        elif first == "version":
            assert struct().version == getattr(_abi, f"{name.upper()}_VERSION"), name
            assert struct(ctx=7).version == getattr(_abi, f"{name.upper()}_VERSION"), name


def test_every_struct_has_its_layout():
    assert set(_abi.STRUCTS) == set(_abi.LAYOUTS)


def test_the_package_uses_the_generated_declarations():
    """The names the package gives the structs and callbacks are the
    generated ones, not declarations of its own."""
    generated = {id(value) for value in vars(_abi).values()}
    for name in _ffi.__all__:
        value = getattr(_ffi, name)
        if isinstance(value, type) and issubclass(value, (ctypes.Structure, ctypes._CFuncPtr)):
            assert id(value) in generated, name
    assert itsme.Result is _abi.ItsmeResult


# -- the idiomatic layer's names -----------------------------------------------


def test_the_binding_is_for_the_generated_header():
    assert _ffi.ABI_VERSION == _abi.ABI_VERSION == (_abi.ITSME_VERSION_MAJOR, _abi.ITSME_VERSION_MINOR)
    assert _abi.HEADER_VERSION == _abi.ITSME_VERSION_STRING


def header_constants():
    """Every integer constant of the header, by name."""
    return {name: value for name, value in vars(_abi).items() if name.startswith("ITSME_") and type(value) is int}


def test_result_codes():
    codes = {name: value for name, value in header_constants().items() if name == "ITSME_OK" or name.startswith("ITSME_E_")}
    assert codes == itsme.RESULT_CODES == {member.name: member.value for member in itsme.Result}
    for name, value in codes.items():
        assert getattr(itsme, name) == value, name


def test_the_package_constants_are_the_headers():
    """A constant the package exports under the header's name without
    ITSME_ has the header's value."""
    compared = 0
    for name, value in header_constants().items():
        short = name[len("ITSME_"):]
        if hasattr(itsme, short):
            assert getattr(itsme, short) == value, name
            compared += 1
    assert compared, "the package exports constants under the header's names"


SIZE_NAME = re.compile(r"_(SIZE|BYTES|CHARS|LENGTH|MAX|MIN|OVERHEAD)$")

# The package's enumerations and the prefix of the header's constants they
# name without it.
ENUMERATIONS = [
    (itsme.Accessibility, "ITSME_ACCESSIBLE_"),
    (itsme.VerificationState, "ITSME_CONTACT_"),
    (itsme.ExchangeMethod, "ITSME_EXCHANGE_METHOD_"),
    (itsme.ExchangeState, "ITSME_EXCHANGE_STATE_"),
    (itsme.ExchangeFlags, "ITSME_EXCHANGE_FLAG_"),
    (itsme.VoiceState, "ITSME_VOICE_STATE_"),
    (itsme.VoiceTurn, "ITSME_VOICE_TURN_"),
    (itsme.VoiceOutcome, "ITSME_VOICE_OUTCOME_"),
    (itsme.OnlineVerifyState, "ITSME_ONLINE_VERIFY_STATE_"),
    (itsme.RollCallPhase, "ITSME_ROLLCALL_PHASE_"),
    (itsme.RollCallState, "ITSME_ROLLCALL_STATE_"),
    (itsme.PinUpdateState, "ITSME_PIN_UPDATE_STATE_"),
    (itsme.TransferState, "ITSME_TRANSFER_STATE_"),
    (itsme.PasswordKind, "ITSME_EXPORT_PASSWORD_"),
    (itsme.ApprovalDecision, "ITSME_APPROVAL_"),
]


@pytest.mark.parametrize("cls, prefix", ENUMERATIONS, ids=[cls.__name__ for cls, _ in ENUMERATIONS])
def test_each_enumeration_is_the_headers(cls, prefix):
    """Each enumeration of the package has exactly the header's values of
    its prefix (sizes and limits aside)."""
    expected = {
        name[len(prefix):]: value
        for name, value in header_constants().items()
        if name.startswith(prefix) and not SIZE_NAME.search(name)
    }
    assert {member.name: member.value for member in cls} == expected
