"""The binding against include/itsme.h, parsed with regular expressions.

Checks that the ctypes signature table declares exactly the header's
functions with the right types (see the rules in ``itsme._ffi``), that the
result codes and other constants agree, and that the loaded library reports
the header's version and exports nothing else.
"""

import ctypes
import pathlib
import re
import shutil
import subprocess
from ctypes import POINTER, c_char, c_char_p, c_int, c_int32, c_int64, c_size_t, c_uint8, c_uint32, c_uint64, c_void_p

import pytest

import itsme
from itsme import _ffi

HEADER = pathlib.Path(__file__).resolve().parent / ".." / ".." / ".." / "include" / "itsme.h"

SCALARS = {
    "int32_t": c_int32,
    "uint32_t": c_uint32,
    "int64_t": c_int64,
    "uint64_t": c_uint64,
    "size_t": c_size_t,
    "int": c_int,
    "uint8_t": c_uint8,
    "char": c_char,
}
# Structs the binding declares, by their C name.
STRUCTS = {
    "itsme_secret_store_callbacks": _ffi.SecretStoreCallbacks,
    "itsme_voice_derivation": _ffi.VoiceDerivationStruct,
    "itsme_import_report": _ffi.ImportReportStruct,
    "itsme_store_loss": _ffi.StoreLossStruct,
    "itsme_approval_request_info": _ffi.ApprovalRequestInfoStruct,
    "itsme_credential_info": _ffi.CredentialInfoStruct,
    "itsme_approval_result": _ffi.ApprovalResultStruct,
    "itsme_replay_store_callbacks": _ffi.ReplayStoreCallbacks,
}


class Header:
    """The declarations of a C header, as far as this interface uses C."""

    FUNCTION = re.compile(r"([A-Za-z_][\w\s*]*?)\b(itsme_\w+)\s*\(([^()]*)\)\s*;")
    STRUCT = re.compile(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", re.S)
    TYPEDEF = re.compile(r"typedef\s+([\w\s]+?)\s+(\w+)\s*;")
    DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(.+?)[ \t]*$", re.M)
    FUNCTION_POINTER = re.compile(r"(.*?)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)", re.S)
    # The header's attribute macros, written before a declaration: no part
    # of a type, and no constants.
    WARN_UNUSED_RESULT = re.compile(r"\bITSME_WARN_UNUSED_RESULT\b")
    DEPRECATED = re.compile(r"\bITSME_DEPRECATED\s*\(\s*\"[^\"]*\"\s*\)")
    ATTRIBUTE_MACROS = ("ITSME_WARN_UNUSED_RESULT", "ITSME_DEPRECATED")
    MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", re.M)

    def __init__(self, text):
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        text = re.sub(r"//[^\n]*", " ", text)
        self.macros = set(self.MACRO.findall(text))
        self.defines = {
            name: value for name, value in self.DEFINE.findall(text) if name not in self.ATTRIBUTE_MACROS
        }
        code = re.sub(r"^[ \t]*#[^\n]*", " ", text, flags=re.M)
        # The deprecated functions by name, then the declarations without the attributes.
        self.deprecated = set(re.findall(self.DEPRECATED.pattern + r"[^;(]*?\b(itsme_\w+)\s*\(", code))
        code = self.DEPRECATED.sub(" ", self.WARN_UNUSED_RESULT.sub(" ", code))
        for macro in self.ATTRIBUTE_MACROS:
            assert macro not in code, f"{macro} used in a form this parser does not know"
        self.structs = {}
        for tag, body, name in self.STRUCT.findall(code):
            self.structs[name] = [field.strip() for field in body.split(";") if field.strip()]
        code = self.STRUCT.sub(" ", code)
        self.handles = set()
        self.typedefs = {}
        for target, name in self.TYPEDEF.findall(code):
            target = " ".join(target.split())
            if target == f"struct {name}":
                self.handles.add(name)
            else:
                self.typedefs[name] = target
        code = self.TYPEDEF.sub(" ", code)
        self.functions = {}
        for restype, name, params in self.FUNCTION.findall(code):
            assert name not in self.functions, f"{name} declared twice"
            self.functions[name] = (self.parse_type(restype), self.parse_params(params))

    def resolve(self, base):
        while base in self.typedefs:
            base = self.typedefs[base]
        return base

    def parse_type(self, text, named=False):
        """(base type, pointer depth) of a declaration, without its name."""
        words = [word for word in re.findall(r"\w+", text) if word != "const"]
        if named:
            words = words[:-1]
        assert words, f"cannot parse C type {text!r}"
        return self.resolve(" ".join(words)), text.count("*")

    def parse_params(self, params):
        params = params.strip()
        if params == "void":
            return []
        return [self.parse_type(param, named=True) for param in params.split(",")]

    def ctype(self, c_type):
        """The ctypes type the binding's rules give a C type."""
        base, depth = c_type
        if depth == 0:
            return None if base == "void" else SCALARS[base]
        if base in self.handles:
            assert depth <= 2, c_type
            return c_void_p if depth == 1 else POINTER(c_void_p)
        assert depth == 1, f"unexpected pointer depth in {c_type}"
        if base == "char":
            return c_char_p
        if base == "void":
            return c_void_p
        if base in STRUCTS:
            return POINTER(STRUCTS[base])
        return POINTER(SCALARS[base])

    def int_define(self, name):
        return int(re.fullmatch(r"(\d+)[uU]?", self.defines[name]).group(1))

    def array_length(self, text):
        """An array length: a number, a macro, or a sum of them (``NAME + 1``)."""
        total = 0
        for term in text.split("+"):
            term = term.strip()
            total += int(term) if term.isdigit() else self.int_define(term)
        return total

    def string_define(self, name):
        value = self.defines[name]
        assert value.startswith('"') and value.endswith('"'), value
        return value[1:-1]


@pytest.fixture(scope="module")
def header():
    assert HEADER.is_file(), f"header not found at {HEADER}"
    return Header(HEADER.read_text())


def test_header_parses(header):
    assert len(header.functions) >= 20
    assert {"itsme_init", "itsme_pin_status", "itsme_identity_create"} <= set(header.functions)
    assert header.handles == {
        "itsme_secret_store",
        "itsme_identity",
        "itsme_store",
        "itsme_contact",
        "itsme_contact_list",
        "itsme_random",
        "itsme_exchange",
        "itsme_voice",
        "itsme_online_verify",
        "itsme_pin_update",
        "itsme_import",
        "itsme_transfer",
        "itsme_profile",
        "itsme_replay_store",
    }
    assert header.resolve("itsme_result") == "int32_t"


def test_attribute_macros_are_no_constants(header):
    assert set(Header.ATTRIBUTE_MACROS) <= header.macros
    assert not set(Header.ATTRIBUTE_MACROS) & set(header.defines)
    assert "itsme_pin_verify" in header.functions, "ITSME_WARN_UNUSED_RESULT before the return type"
    assert header.functions["itsme_pin_verify"][0] == ("int32_t", 0)


def test_same_functions(header):
    assert set(_ffi.SIGNATURES) == set(header.functions)


def test_safe_api_calls_no_deprecated_function(header):
    """A deprecated function stays declared in the raw table (the test above
    wants every header function there) but the safe API never calls it."""
    assert "itsme_store_free" in header.functions
    assert "itsme_store_close" in header.deprecated or "itsme_store_close" not in header.functions
    assert itsme.ContactStore._free_function == _ffi.lib.itsme_store_free
    package = pathlib.Path(itsme.__file__).parent
    for module in sorted(package.glob("*.py")):
        if module.name == "_ffi.py":
            continue
        source = module.read_text()
        for name in header.deprecated:
            assert not re.search(rf"\b{name}\b", source), f"{module.name} uses the deprecated {name}"


def test_signatures_match_the_header(header):
    mismatches = []
    for name, (restype, params) in header.functions.items():
        declared_restype, declared_argtypes = _ffi.SIGNATURES[name]
        if declared_restype != header.ctype(restype):
            mismatches.append(f"{name}: restype {declared_restype} != {header.ctype(restype)} for {restype}")
        if len(declared_argtypes) != len(params):
            mismatches.append(f"{name}: {len(declared_argtypes)} argtypes for {len(params)} parameters")
            continue
        for index, (declared, param) in enumerate(zip(declared_argtypes, params)):
            if declared != header.ctype(param):
                mismatches.append(f"{name}[{index}]: {declared} != {header.ctype(param)} for {param}")
    assert not mismatches, "\n".join(mismatches)


def test_loaded_functions_carry_the_table(header):
    for name, (restype, argtypes) in _ffi.SIGNATURES.items():
        function = getattr(_ffi.lib, name)
        assert function.restype == restype, name
        assert list(function.argtypes) == list(argtypes), name


def test_structs_match_the_header(header):
    assert set(header.structs) == set(STRUCTS)
    for struct_name, fields in header.structs.items():
        declared = STRUCTS[struct_name]._fields_
        assert len(declared) == len(fields), struct_name
        for (field_name, field_type), text in zip(declared, fields):
            array = re.fullmatch(r"(.*?)\s*\[\s*([\w\s+]+?)\s*\]", text)
            if array is not None:
                element, length = array.groups()
                length = header.array_length(length)
                assert field_name == re.findall(r"\w+", element)[-1], text
                assert issubclass(field_type, ctypes.Array) and field_type._length_ == int(length), text
                assert field_type._type_ == header.ctype(header.parse_type(element, named=True)), text
                continue
            pointer = Header.FUNCTION_POINTER.fullmatch(text)
            if pointer is None:
                assert field_name == re.findall(r"\w+", text)[-1], text
                assert field_type == header.ctype(header.parse_type(text, named=True)), text
                continue
            restype, name, params = pointer.groups()
            assert field_name == name
            assert field_type._restype_ == header.ctype(header.parse_type(restype)), text
            expected = [header.ctype(param) for param in header.parse_params(params)]
            assert list(field_type._argtypes_) == expected, text


def test_result_codes(header):
    codes = {
        name: header.int_define(name)
        for name in header.defines
        if name == "ITSME_OK" or name.startswith("ITSME_E_")
    }
    assert codes == itsme.RESULT_CODES
    assert codes == {member.name: member.value for member in itsme.Result}
    for name, value in codes.items():
        assert getattr(itsme, name) == value, name
    assert codes["ITSME_OK"] == 0
    assert sorted(codes.values()) == list(range(len(codes))), "codes are 0..N without gaps"


def test_other_constants(header):
    accessibility = {
        name: header.int_define(name) for name in header.defines if name.startswith("ITSME_ACCESSIBLE_")
    }
    assert accessibility == {f"ITSME_ACCESSIBLE_{m.name}": m.value for m in itsme.Accessibility}
    assert header.int_define("ITSME_PUBLIC_KEY_BYTES") == itsme.PUBLIC_KEY_BYTES == _ffi.lib.itsme_public_key_bytes()
    assert header.int_define("ITSME_FINGERPRINT_SIZE") == itsme.FINGERPRINT_SIZE == _ffi.lib.itsme_fingerprint_size()
    assert header.int_define("ITSME_FINGERPRINT_CHARS") == itsme.FINGERPRINT_CHARS
    assert header.int_define("ITSME_NAME_MAX_BYTES") == itsme.NAME_MAX_BYTES == _ffi.lib.itsme_name_max_bytes()
    assert header.int_define("ITSME_PIN_LENGTH") == itsme.PIN_LENGTH
    assert header.int_define("ITSME_SEED_BYTES") == itsme.SEED_BYTES
    assert header.int_define("ITSME_NOTE_MAX_BYTES") == itsme.NOTE_MAX_BYTES


def test_contact_constants(header):
    assert header.resolve("itsme_verification_state") == "uint32_t"
    assert header.resolve("itsme_exchange_method") == "uint32_t"
    states = {name: header.int_define(name) for name in header.defines if name.startswith("ITSME_CONTACT_")}
    assert states == {f"ITSME_CONTACT_{m.name}": m.value for m in itsme.VerificationState}
    # ITSME_EXCHANGE_ names methods, and also exchange states and flags.
    exchange_states = {f"ITSME_EXCHANGE_{m.name}" for m in itsme.ExchangeState}
    methods = {
        name: header.int_define(name)
        for name in header.defines
        if name.startswith("ITSME_EXCHANGE_")
        and not name.startswith("ITSME_EXCHANGE_FLAG_")
        and name not in exchange_states
    }
    assert methods == {f"ITSME_EXCHANGE_{m.name}": m.value for m in itsme.ExchangeMethod}
    for name, value in {**states, **methods}.items():
        assert getattr(itsme, name[len("ITSME_"):]) == value, name


def test_exchange_constants(header):
    assert header.resolve("itsme_exchange_state") == "uint32_t"
    states = {
        name: header.int_define(name)
        for name in header.defines
        if name.startswith("ITSME_EXCHANGE_")
        and not name.startswith("ITSME_EXCHANGE_FLAG_")
        and name[len("ITSME_EXCHANGE_"):] not in itsme.ExchangeMethod.__members__
    }
    assert states == {f"ITSME_EXCHANGE_{m.name}": m.value for m in itsme.ExchangeState}
    flags = {name: header.int_define(name) for name in header.defines if name.startswith("ITSME_EXCHANGE_FLAG_")}
    assert flags == {f"ITSME_EXCHANGE_FLAG_{m.name}": m.value for m in itsme.ExchangeFlags}
    for name, value in {**states, **flags}.items():
        assert getattr(itsme, name[len("ITSME_"):]) == value, name
    assert header.int_define("ITSME_SHORT_CODE_SIZE") == itsme.SHORT_CODE_SIZE
    assert header.int_define("ITSME_SHORT_CODE_VALUES") == itsme.SHORT_CODE_VALUES
    assert header.int_define("ITSME_QR_PAYLOAD_MAX") == itsme.QR_PAYLOAD_MAX
    assert header.int_define("ITSME_BLUETOOTH_FRAME_MAX") == itsme.BLUETOOTH_FRAME_MAX


def test_voice_constants(header):
    assert header.resolve("itsme_voice_state") == "uint32_t"
    assert header.resolve("itsme_voice_outcome") == "uint32_t"
    turns = {name: header.int_define(name) for name in header.defines if name.startswith("ITSME_VOICE_TURN_")}
    assert turns == {f"ITSME_VOICE_TURN_{m.name}": m.value for m in itsme.VoiceTurn}
    outcomes = {f"ITSME_VOICE_{m.name}": m.value for m in itsme.VoiceOutcome}
    states = {f"ITSME_VOICE_{m.name}": m.value for m in itsme.VoiceState}
    sizes = {"ITSME_VOICE_TAG_UNKNOWN", "ITSME_VOICE_CODE_SIZE", "ITSME_VOICE_SESSION_ID_SIZE"}
    others = {
        name: header.int_define(name)
        for name in header.defines
        if name.startswith("ITSME_VOICE_") and name not in turns and name not in sizes
    }
    assert others == {**states, **outcomes}, "every ITSME_VOICE_ constant is a state, turn, outcome or size"
    for name, value in {**states, **turns, **outcomes}.items():
        assert getattr(itsme, name[len("ITSME_"):]) == value, name
    assert header.int_define("ITSME_VOICE_TAG_UNKNOWN") == itsme.VOICE_TAG_UNKNOWN
    assert header.int_define("ITSME_VOICE_CODE_SIZE") == itsme.VOICE_CODE_SIZE
    assert header.int_define("ITSME_VOICE_SESSION_ID_SIZE") == itsme.VOICE_SESSION_ID_SIZE
    # The longest texts the sizes are for, NUL included.
    assert len("NOVEMBER 999") + 1 == itsme.VOICE_CODE_SIZE
    assert len("NOVEMBER 99") + 1 == itsme.VOICE_SESSION_ID_SIZE
    assert max(len(word) for word in itsme.NATO_WORDS) == len("NOVEMBER")
    # The derivation struct's layout is part of the ABI: no padding.
    derivation = _ffi.VoiceDerivationStruct
    assert ctypes.sizeof(derivation) == 32
    assert (derivation.my_words.offset, derivation.their_words.offset, derivation.my_code.offset) == (4, 9, 16)


def test_degradation_constants(header):
    assert header.int_define("ITSME_DEGRADATION_CODE_SIZE") == itsme.DEGRADATION_CODE_SIZE
    # Six groups of four characters, five dashes, the NUL.
    assert len("ABCD-EFGH-IJKL-MNOP-QRST-UVWX") + 1 == itsme.DEGRADATION_CODE_SIZE


def test_online_verify_constants(header):
    assert header.resolve("itsme_online_verify_state") == "uint32_t"
    sizes = {"ITSME_ONLINE_VERIFY_MESSAGE_MAX"}
    states = {
        name: header.int_define(name)
        for name in header.defines
        if name.startswith("ITSME_ONLINE_VERIFY_") and name not in sizes
    }
    assert states == {f"ITSME_ONLINE_VERIFY_{m.name}": m.value for m in itsme.OnlineVerifyState}
    for name, value in states.items():
        assert getattr(itsme, name[len("ITSME_"):]) == value, name
    assert header.int_define("ITSME_ONLINE_VERIFY_MESSAGE_MAX") == itsme.ONLINE_VERIFY_MESSAGE_MAX
    assert header.int_define("ITSME_ROOM_NAME_SIZE") == itsme.ROOM_NAME_SIZE == 32 + 1
    # The longest message: a PROOF carrying a profile reference, two header
    # bytes and 96 sealed bytes (proof, device tag, reference) with their tag.
    assert itsme.ONLINE_VERIFY_MESSAGE_MAX == 2 + 32 + 32 + itsme.PROFILE_REFERENCE_BYTES + 16


def test_pin_update_constants(header):
    assert header.resolve("itsme_pin_update_state") == "uint32_t"
    sizes = {"ITSME_PIN_UPDATE_FRAME_MAX"}
    states = {
        name: header.int_define(name)
        for name in header.defines
        if name.startswith("ITSME_PIN_UPDATE_") and name not in sizes
    }
    assert states == {f"ITSME_PIN_UPDATE_{m.name}": m.value for m in itsme.PinUpdateState}
    for name, value in states.items():
        assert getattr(itsme, name[len("ITSME_"):]) == value, name
    assert header.int_define("ITSME_PIN_UPDATE_FRAME_MAX") == itsme.PIN_UPDATE_FRAME_MAX
    # The longest frame: a NEW, two header bytes and 48 sealed bytes with their tag.
    assert itsme.PIN_UPDATE_FRAME_MAX == 2 + 16 + 32 + 16


def test_profile_constants(header):
    assert header.int_define("ITSME_PROFILE_RECORD_MAX") == itsme.PROFILE_RECORD_MAX == 262144
    assert header.int_define("ITSME_PROFILE_RECORD_OVERHEAD") == itsme.PROFILE_RECORD_OVERHEAD
    assert header.int_define("ITSME_RECORD_ID_BYTES") == itsme.RECORD_ID_BYTES == 16
    assert header.int_define("ITSME_PROFILE_REFERENCE_BYTES") == itsme.PROFILE_REFERENCE_BYTES
    assert itsme.PROFILE_REFERENCE_BYTES == itsme.RECORD_ID_BYTES + 16, "record ID || record key"
    assert header.int_define("ITSME_RECORD_NAME_SIZE") == itsme.RECORD_NAME_SIZE == 2 * itsme.RECORD_ID_BYTES + 1
    assert header.int_define("ITSME_PHOTO_FILENAME_MAX_BYTES") == itsme.PHOTO_FILENAME_MAX_BYTES
    # docs/PROTOCOL.md 18.2: version, three fields of nonce, length and MAC, the record MAC.
    assert itsme.PROFILE_RECORD_OVERHEAD == 1 + 3 * (12 + 4 + 32) + 32


def test_approval_constants(header):
    assert header.resolve("itsme_approval_decision") == "uint32_t"
    decisions = {name: header.int_define(name) for name in ("ITSME_APPROVAL_APPROVE", "ITSME_APPROVAL_DENY")}
    assert decisions == {f"ITSME_APPROVAL_{m.name}": m.value for m in itsme.ApprovalDecision}
    for name, value in decisions.items():
        assert getattr(itsme, name[len("ITSME_"):]) == value, name
    sizes = [
        "CREDENTIAL_ID_BYTES",
        "SERVICE_ID_MAX_BYTES",
        "SESSION_ID_MAX_BYTES",
        "OTP_SIZE",
        "SCOPES_MAX",
        "SCOPE_MAX_BYTES",
        "SCOPES_TEXT_SIZE",
        "ENROLLMENT_MAX",
        "APPROVAL_REQUEST_MAX",
        "APPROVAL_MAX",
        "APPROVAL_LIFETIME_MAX",
    ]
    others = {
        name
        for name in header.defines
        if name.startswith("ITSME_APPROVAL_") and name not in decisions and name[len("ITSME_"):] not in sizes
    }
    assert others == set(), "every ITSME_APPROVAL_ constant is a decision or a size"
    for name in sizes:
        assert header.int_define(f"ITSME_{name}") == getattr(itsme, name), name
    # A scope list as text: 32 scopes of 64 bytes, 31 separators, the NUL.
    assert itsme.SCOPES_TEXT_SIZE == itsme.SCOPES_MAX * itsme.SCOPE_MAX_BYTES + itsme.SCOPES_MAX - 1 + 1
    # An enrollment: version, key, label length, a label of 128 bytes, signature.
    assert itsme.ENROLLMENT_MAX == 1 + 32 + 1 + itsme.NAME_MAX_BYTES + 64


_LAYOUT_PROGRAM = """
#include <stddef.h>
#include <stdio.h>
#include "itsme.h"
#define FIELD(type, field) printf("%s.%s %zu %zu\\n", #type, #field, offsetof(type, field), sizeof(((type *)0)->field))
#define SIZE(type) printf("%s %zu\\n", #type, sizeof(type))
int main(void) {
BODY
    return 0;
}
"""


def test_struct_layouts_match_a_c_compiler(header, tmp_path):
    """The offsets and sizes of every struct's fields, as a C compiler lays
    them out, against ctypes."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler")
    lines, expected = [], []
    for struct_name, declared in sorted(STRUCTS.items()):
        lines.append(f"    SIZE({struct_name});")
        expected.append(f"{struct_name} {ctypes.sizeof(declared)}")
        for field_name, field_type in declared._fields_:
            lines.append(f"    FIELD({struct_name}, {field_name});")
            field = getattr(declared, field_name)
            expected.append(f"{struct_name}.{field_name} {field.offset} {field.size}")
    source = tmp_path / "layout.c"
    source.write_text(_LAYOUT_PROGRAM.replace("BODY", "\n".join(lines)))
    program = tmp_path / "layout"
    subprocess.run([compiler, "-I", str(HEADER.parent), "-o", str(program), str(source)], check=True)
    got = subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout.split("\n")
    assert [line for line in got if line] == expected


def test_version_matches_the_header(header):
    major, minor, patch = (header.int_define(f"ITSME_VERSION_{part}") for part in ("MAJOR", "MINOR", "PATCH"))
    string = header.string_define("ITSME_VERSION_STRING")
    number = header.int_define("ITSME_VERSION_NUMBER")
    assert string == f"{major}.{minor}.{patch}"
    assert number == major * 10000 + minor * 100 + patch
    assert itsme.version() == string
    assert _ffi.lib.itsme_version_string() == string.encode()
    assert itsme.version_number() == number
    assert _ffi.lib.itsme_version_number() == number


def test_library_exports_exactly_the_header(header):
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm is not available")
    listing = subprocess.run(
        [nm, "-D", "--defined-only", _ffi.lib._name], capture_output=True, text=True, check=True
    ).stdout
    exported = set()
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] != "A":  # "A": the version node
            exported.add(fields[2].split("@")[0])
    assert exported == set(header.functions)


def test_integer_types_have_the_c_sizes():
    assert ctypes.sizeof(c_size_t) == ctypes.sizeof(c_void_p)
    assert (ctypes.sizeof(c_int32), ctypes.sizeof(c_uint32)) == (4, 4)
    assert (ctypes.sizeof(c_int64), ctypes.sizeof(c_uint64)) == (8, 8)
