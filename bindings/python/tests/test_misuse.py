"""The C interface misused on purpose, through the binding's raw functions.

Every call here goes straight to ``itsme._ffi.lib``: the header promises
ITSME_E_INVALID_ARGUMENT (never a crash) for NULL pointers and values out of
range, the too-small protocol for every output buffer, and that outputs are
written only on success.
"""

import ctypes
import json
import os
import subprocess
import sys
import textwrap
import threading
from ctypes import c_int64, byref, c_char_p, c_int, c_size_t, c_uint8, c_uint32, c_uint64, c_void_p
from types import SimpleNamespace

import pytest

import itsme
from itsme._ffi import (
    SIGNATURES,
    DestroyCallback,
    GetCallback,
    PutCallback,
    RemoveCallback,
    SecretStoreCallbacks,
    lib,
)

R = itsme.Result
T0 = 1_700_000_000
PIN = b"123456"
FILL = 0xAA
UNKNOWN = b"unknown result code"


# -- helpers ---------------------------------------------------------------


def text_buf(size):
    """A char buffer pre-filled with a sentinel."""
    return ctypes.create_string_buffer(bytes([FILL]) * size, size)


def byte_buf(size):
    """A uint8_t buffer pre-filled with a sentinel."""
    return (c_uint8 * size).from_buffer_copy(bytes([FILL]) * size)


def size_out():
    return c_size_t(0x5EED)


def handle_out():
    return c_void_p(0xDEADBEEF)


def snapshot(objects):
    return [bytes(o) for o in objects]


def ok(code):
    assert code == R.ITSME_OK, f"expected ITSME_OK, got {code}"


def new_memory_store():
    out = c_void_p()
    ok(lib.itsme_secret_store_new_memory(byref(out)))
    return out.value


def new_identity(store, name=b"Raw"):
    out = c_void_p()
    ok(lib.itsme_identity_create(store, name, byref(out)))
    return out.value


def read(function, *args, size=256):
    """Calls a (buf, cap, out_len) function with a large buffer; returns the bytes."""
    buf, n = text_buf(size), size_out()
    ok(function(*args, buf, size, byref(n)))
    return buf.raw[: n.value]


def store_detail(store):
    return read(lib.itsme_secret_store_last_error, store)


def identity_detail(identity):
    return read(lib.itsme_identity_last_error, identity)


def status(identity, now=T0):
    failures, wait = c_uint32(), c_uint64()
    ok(lib.itsme_pin_status(identity, now, byref(failures), byref(wait)))
    return failures.value, wait.value


def is_pointer(argtype):
    return argtype in (c_void_p, c_char_p) or issubclass(argtype, ctypes._Pointer)


# Raw host callbacks for itsme_secret_store_new_callbacks; destroy records ctx.
destroyed = []
RAW_CTX = 4242
RAW_GET = GetCallback(lambda ctx, name, out, cap, out_len: R.ITSME_E_NOT_FOUND)
RAW_PUT = PutCallback(lambda ctx, name, value, length, accessibility: R.ITSME_OK)
RAW_REMOVE = RemoveCallback(lambda ctx, name: R.ITSME_E_NOT_FOUND)
RAW_DESTROY = DestroyCallback(lambda ctx: destroyed.append(ctx))


CONTACT_KEY = (c_uint8 * 32)(*([0x42] * 32))
OTHER_KEY = (c_uint8 * 32)(*([0x43] * 32))
SEED = (c_uint8 * 32)(*([7] * 32))


def raw_table(**overrides):
    fields = dict(ctx=RAW_CTX, get=RAW_GET, put=RAW_PUT, remove=RAW_REMOVE, destroy=RAW_DESTROY)
    fields.update(overrides)
    return SecretStoreCallbacks(**fields)


@pytest.fixture
def raw(tmp_path):
    """Raw handles: a store with a PIN-protected identity, an empty store,
    and an identity without a PIN.  Freed afterwards."""
    env = SimpleNamespace(tmp_path=tmp_path)
    env.store = new_memory_store()
    env.identity = new_identity(env.store)
    ok(lib.itsme_pin_set(env.identity, PIN))
    env.empty_store = new_memory_store()
    env.bare_store = new_memory_store()
    env.bare_identity = new_identity(env.bare_store)
    # A contact store with one contact, a snapshot of it and a list of it.
    out = c_void_p()
    ok(lib.itsme_store_open(env.identity, str(tmp_path / "contacts.db").encode(), byref(out)))
    env.contacts = out.value
    contact_id = c_int64()
    ok(lib.itsme_store_add(env.contacts, b"Carol", CONTACT_KEY, 32, SEED, 32, 0, T0, byref(contact_id)))
    env.contact_id = contact_id.value
    ok(lib.itsme_store_get(env.contacts, env.contact_id, byref(out)))
    env.contact = out.value
    ok(lib.itsme_store_list(env.contacts, 0, 0, byref(out)))
    env.list = out.value
    yield env
    lib.itsme_contact_free(env.contact)
    lib.itsme_contact_list_free(env.list)
    lib.itsme_store_close(env.contacts)
    lib.itsme_identity_free(env.identity)
    lib.itsme_identity_free(env.bare_identity)
    for store in (env.store, env.empty_store, env.bare_store):
        lib.itsme_secret_store_free(store)


# -- NULL pointers ---------------------------------------------------------

# For each function with pointer arguments: valid arguments (a call with them
# succeeds) and the output objects that must stay untouched on failure.


def _last_error(env):
    buf, n = text_buf(256), size_out()
    return [buf, 256, byref(n)], [buf, n]


def _fingerprint_from_public_key(env):
    key = (c_uint8 * 32)(*range(32))
    buf, n = text_buf(17), size_out()
    return [key, 32, buf, 17, byref(n)], [buf, n]


def _new_callbacks(env):
    table, out = raw_table(), handle_out()
    return [byref(table), byref(out)], [out]


def _new_memory(env):
    out = handle_out()
    return [byref(out)], [out]


def _open_file(env):
    out = handle_out()
    return [str(env.tmp_path / "store").encode(), byref(out)], [out]


def _store_last_error(env):
    buf, n = text_buf(256), size_out()
    return [env.store, buf, 256, byref(n)], [buf, n]


def _identity_create(env):
    out = handle_out()
    return [env.empty_store, b"Created", byref(out)], [out]


def _identity_load(env):
    out = handle_out()
    return [env.store, byref(out)], [out]


def _identity_last_error(env):
    buf, n = text_buf(256), size_out()
    return [env.identity, buf, 256, byref(n)], [buf, n]


def _identity_fingerprint(env):
    buf, n = text_buf(17), size_out()
    return [env.identity, buf, 17, byref(n)], [buf, n]


def _identity_public_key(env):
    buf, n = byte_buf(32), size_out()
    return [env.identity, buf, 32, byref(n)], [buf, n]


def _identity_name(env):
    buf, n = text_buf(256), size_out()
    return [env.identity, buf, 256, byref(n)], [buf, n]


def _identity_set_name(env):
    return [env.identity, b"Renamed"], []


def _pin_is_set(env):
    out = c_int(-7)
    return [env.identity, byref(out)], [out]


def _pin_set(env):
    return [env.bare_identity, PIN], []


def _pin_verify(env):
    return [env.identity, PIN, T0], []


def _pin_change(env):
    return [env.identity, PIN, b"654321", T0], []


def _pin_status(env):
    failures, wait = c_uint32(0xAAAAAAAA), c_uint64(0xAAAAAAAAAAAAAAAA)
    return [env.identity, T0, byref(failures), byref(wait)], [failures, wait]


def _store_open(env):
    out = handle_out()
    return [env.identity, str(env.tmp_path / "other.db").encode(), byref(out)], [out]


def _contacts_last_error(env):
    buf, n = text_buf(256), size_out()
    return [env.contacts, buf, 256, byref(n)], [buf, n]


def _store_add(env):
    out = c_int64(-5)
    return [env.contacts, b"Dave", OTHER_KEY, 32, SEED, 32, 0, T0, byref(out)], [out]


def _store_add_unauthenticated(env):
    out = c_int64(-5)
    return [env.contacts, b"Old", b"0123456789ABCDEF", SEED, 32, 0, T0, byref(out)], [out]


def _store_get(env):
    out = handle_out()
    return [env.contacts, env.contact_id, byref(out)], [out]


def _store_get_by_key(env):
    out = handle_out()
    return [env.contacts, CONTACT_KEY, 32, byref(out)], [out]


def _store_find_fingerprint(env):
    out = handle_out()
    return [env.contacts, b"0123456789ABCDEF", byref(out)], [out]


def _store_list(env):
    out = handle_out()
    return [env.contacts, 0, 10, byref(out)], [out]


def _store_count(env):
    out = c_uint64(0xAAAA)
    return [env.contacts, byref(out)], [out]


def _store_set_name(env):
    return [env.contacts, env.contact_id, b"Caroline"], []


def _store_set_note(env):
    return [env.contacts, env.contact_id, b"a note"], []


def _store_set_state(env):
    return [env.contacts, env.contact_id, 1, 0, T0], []


def _store_use_window(env):
    return [env.contacts, env.contact_id, 100], []


def _store_delete(env):
    return [env.contacts, env.contact_id], []


def _contact_int64(function):
    def case(env):
        out = c_int64(-5)
        return [env.contact, byref(out)], [out]

    return case


def _contact_text(env):
    buf, n = text_buf(256), size_out()
    return [env.contact, buf, 256, byref(n)], [buf, n]


def _contact_public_key(env):
    buf, n = byte_buf(32), size_out()
    return [env.contact, buf, 32, byref(n)], [buf, n]


def _contact_is_authenticated(env):
    out = c_int(-5)
    return [env.contact, byref(out)], [out]


def _contact_state(env):
    state, acknowledged = c_uint32(0xAAAA), c_int(-5)
    return [env.contact, byref(state), byref(acknowledged)], [state, acknowledged]


def _contact_exchange_method(env):
    out = c_uint32(0xAAAA)
    return [env.contact, byref(out)], [out]


def _contact_verified_at(env):
    ok(lib.itsme_store_set_state(env.contacts, env.contact_id, 1, 0, T0))
    out = c_void_p()
    ok(lib.itsme_store_get(env.contacts, env.contact_id, byref(out)))
    lib.itsme_contact_free(env.contact)
    env.contact = out.value
    return _contact_int64(None)(env)


def _contact_last_window(env):
    ok(lib.itsme_store_use_window(env.contacts, env.contact_id, 7))
    out = c_void_p()
    ok(lib.itsme_store_get(env.contacts, env.contact_id, byref(out)))
    lib.itsme_contact_free(env.contact)
    env.contact = out.value
    return _contact_int64(None)(env)


def _list_count(env):
    out = size_out()
    return [env.list, byref(out)], [out]


def _list_get(env):
    out = handle_out()
    return [env.list, 0, byref(out)], [out]


CASES = {
    "itsme_last_error": _last_error,
    "itsme_fingerprint_from_public_key": _fingerprint_from_public_key,
    "itsme_secret_store_new_callbacks": _new_callbacks,
    "itsme_secret_store_new_memory": _new_memory,
    "itsme_secret_store_open_file": _open_file,
    "itsme_secret_store_last_error": _store_last_error,
    "itsme_identity_create": _identity_create,
    "itsme_identity_load": _identity_load,
    "itsme_identity_last_error": _identity_last_error,
    "itsme_identity_fingerprint": _identity_fingerprint,
    "itsme_identity_public_key": _identity_public_key,
    "itsme_identity_name": _identity_name,
    "itsme_identity_set_name": _identity_set_name,
    "itsme_pin_is_set": _pin_is_set,
    "itsme_pin_set": _pin_set,
    "itsme_pin_verify": _pin_verify,
    "itsme_pin_change": _pin_change,
    "itsme_pin_status": _pin_status,
    "itsme_store_open": _store_open,
    "itsme_store_last_error": _contacts_last_error,
    "itsme_store_add": _store_add,
    "itsme_store_add_unauthenticated": _store_add_unauthenticated,
    "itsme_store_get": _store_get,
    "itsme_store_get_by_key": _store_get_by_key,
    "itsme_store_find_fingerprint": _store_find_fingerprint,
    "itsme_store_list": _store_list,
    "itsme_store_count": _store_count,
    "itsme_store_set_name": _store_set_name,
    "itsme_store_set_note": _store_set_note,
    "itsme_store_set_state": _store_set_state,
    "itsme_store_use_window": _store_use_window,
    "itsme_store_delete": _store_delete,
    "itsme_contact_id": _contact_int64(None),
    "itsme_contact_name": _contact_text,
    "itsme_contact_fingerprint": _contact_text,
    "itsme_contact_public_key": _contact_public_key,
    "itsme_contact_is_authenticated": _contact_is_authenticated,
    "itsme_contact_state": _contact_state,
    "itsme_contact_exchange_method": _contact_exchange_method,
    "itsme_contact_created_at": _contact_int64(None),
    "itsme_contact_verified_at": _contact_verified_at,
    "itsme_contact_last_window": _contact_last_window,
    "itsme_contact_note": _contact_text,
    "itsme_contact_list_count": _list_count,
    "itsme_contact_list_get": _list_get,
}

# Constructors whose successful output is a handle to free.
FREE_OUTPUT = {
    "itsme_secret_store_new_callbacks": lib.itsme_secret_store_free,
    "itsme_secret_store_new_memory": lib.itsme_secret_store_free,
    "itsme_secret_store_open_file": lib.itsme_secret_store_free,
    "itsme_identity_create": lib.itsme_identity_free,
    "itsme_identity_load": lib.itsme_identity_free,
    "itsme_store_open": lib.itsme_store_close,
    "itsme_store_get": lib.itsme_contact_free,
    "itsme_store_get_by_key": lib.itsme_contact_free,
    "itsme_store_find_fingerprint": lib.itsme_contact_list_free,
    "itsme_store_list": lib.itsme_contact_list_free,
    "itsme_contact_list_get": lib.itsme_contact_free,
}

NULL_CASES = [
    pytest.param(name, index, id=f"{name}[{index}]")
    for name, (restype, argtypes) in SIGNATURES.items()
    if restype is not None
    for index, argtype in enumerate(argtypes)
    if is_pointer(argtype)
]


def test_every_function_with_pointer_arguments_has_a_case():
    with_pointers = {name for name, index in (p.values for p in NULL_CASES)}
    assert with_pointers == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_valid_arguments_succeed(raw, name):
    args, outs = CASES[name](raw)
    ok(getattr(lib, name)(*args))
    if name in FREE_OUTPUT:
        FREE_OUTPUT[name](outs[0].value)


@pytest.mark.parametrize("name, index", NULL_CASES)
def test_null_pointer_is_invalid_argument(raw, name, index):
    args, outs = CASES[name](raw)
    before = snapshot(outs)
    destroyed.clear()
    args[index] = None
    assert getattr(lib, name)(*args) == R.ITSME_E_INVALID_ARGUMENT
    assert snapshot(outs) == before, "an output was written on failure"
    assert destroyed == [], "on failure the caller keeps ctx: destroy must not run"


def test_null_pointers_leave_no_trace(raw):
    out = handle_out()
    assert lib.itsme_identity_create(raw.empty_store, b"Ghost", None) == R.ITSME_E_INVALID_ARGUMENT
    assert lib.itsme_identity_load(raw.empty_store, byref(out)) == R.ITSME_E_NOT_FOUND
    assert lib.itsme_pin_set(raw.bare_identity, None) == R.ITSME_E_INVALID_ARGUMENT
    is_set = c_int(-1)
    ok(lib.itsme_pin_is_set(raw.bare_identity, byref(is_set)))
    assert is_set.value == 0
    assert lib.itsme_pin_verify(raw.identity, None, T0) == R.ITSME_E_INVALID_ARGUMENT
    assert status(raw.identity) == (0, 0)


def test_free_accepts_null():
    lib.itsme_secret_store_free(None)
    lib.itsme_identity_free(None)


@pytest.mark.parametrize("missing", ["get", "put", "remove"])
def test_callback_table_needs_get_put_remove(missing):
    destroyed.clear()
    null_function = {"get": GetCallback, "put": PutCallback, "remove": RemoveCallback}[missing]()
    table, out = raw_table(**{missing: null_function}), handle_out()
    assert lib.itsme_secret_store_new_callbacks(byref(table), byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert out.value == 0xDEADBEEF
    assert destroyed == []


def test_callback_table_destroy_is_optional_and_called_once():
    destroyed.clear()
    table, out = raw_table(destroy=DestroyCallback()), c_void_p()
    ok(lib.itsme_secret_store_new_callbacks(byref(table), byref(out)))
    lib.itsme_secret_store_free(out.value)
    table = raw_table()
    ok(lib.itsme_secret_store_new_callbacks(byref(table), byref(out)))
    store = out.value
    identity = c_void_p()
    ok(lib.itsme_identity_create(store, b"Cb", byref(identity)))
    lib.itsme_secret_store_free(store)
    assert destroyed == []
    lib.itsme_identity_free(identity.value)
    assert destroyed == [RAW_CTX]


# -- buffers ---------------------------------------------------------------


def buffer_functions(env):
    """(name, call(buf, cap, out_len), is_text) for every output buffer."""
    key = (c_uint8 * 32)(*range(32))
    # Give every last-error slot a message first.
    out = c_void_p()
    assert lib.itsme_identity_load(env.empty_store, byref(out)) == R.ITSME_E_NOT_FOUND
    assert lib.itsme_pin_verify(env.identity, b"000000", T0) == R.ITSME_E_WRONG_PIN
    store, identity = env.empty_store, env.identity
    return [
        ("fingerprint_from_public_key", lambda b, c, n: lib.itsme_fingerprint_from_public_key(key, 32, b, c, n), True),
        ("secret_store_last_error", lambda b, c, n: lib.itsme_secret_store_last_error(store, b, c, n), True),
        ("identity_last_error", lambda b, c, n: lib.itsme_identity_last_error(identity, b, c, n), True),
        ("identity_fingerprint", lambda b, c, n: lib.itsme_identity_fingerprint(identity, b, c, n), True),
        ("identity_public_key", lambda b, c, n: lib.itsme_identity_public_key(identity, b, c, n), False),
        ("identity_name", lambda b, c, n: lib.itsme_identity_name(identity, b, c, n), True),
    ]


@pytest.mark.parametrize(
    "which",
    [
        "fingerprint_from_public_key",
        "secret_store_last_error",
        "identity_last_error",
        "identity_fingerprint",
        "identity_public_key",
        "identity_name",
    ],
)
def test_buffer_protocol(raw, which):
    name, call, is_text = next(entry for entry in buffer_functions(raw) if entry[0] == which)
    make = text_buf if is_text else byte_buf
    big, n = make(512), size_out()
    ok(call(big, 512, byref(n)))
    needed = n.value
    expected = bytes(big)[:needed]
    assert 0 < needed < 512
    if is_text:
        assert expected[-1] == 0 and 0 not in expected[:-1], "text counts exactly one NUL"
    n = size_out()
    assert call(None, 0, byref(n)) == R.ITSME_E_BUFFER_TOO_SMALL, f"{name}: size query"
    assert n.value == needed, f"{name}: a size query gives the size needed"
    for cap in sorted({0, 1, needed - 1}):
        buf, n = make(needed + 8), size_out()
        assert call(buf, cap, byref(n)) == R.ITSME_E_BUFFER_TOO_SMALL, f"{name} cap={cap}"
        assert n.value == needed, f"{name} cap={cap}: *out_len should be the size needed"
        assert bytes(buf) == bytes([FILL]) * (needed + 8), f"{name} cap={cap}: buffer written"
    buf, n = make(needed + 8), size_out()
    ok(call(buf, needed, byref(n)))
    assert n.value == needed
    assert bytes(buf)[:needed] == expected
    assert bytes(buf)[needed:] == bytes([FILL]) * 8, f"{name}: wrote past cap"


def test_fingerprint_size_is_the_buffer_size(raw):
    assert lib.itsme_fingerprint_size() == 17
    buf, n = text_buf(17), size_out()
    ok(lib.itsme_identity_fingerprint(raw.identity, buf, 17, byref(n)))
    assert n.value == 17 and len(buf.value) == 16


def test_last_error_buffer_protocol(tmp_path):
    path = tmp_path / "regular"
    path.write_bytes(b"x")
    out = handle_out()
    assert lib.itsme_secret_store_open_file(str(path).encode(), byref(out)) == R.ITSME_E_SECRET_STORE
    assert out.value == 0xDEADBEEF
    message = read(lib.itsme_last_error)
    assert len(message) > 1 and message[-1] == 0
    n = size_out()
    assert lib.itsme_last_error(None, 0, byref(n)) == R.ITSME_E_BUFFER_TOO_SMALL
    assert n.value == len(message)
    for cap in (0, 1, len(message) - 1):
        buf, n = text_buf(len(message)), size_out()
        assert lib.itsme_last_error(buf, cap, byref(n)) == R.ITSME_E_BUFFER_TOO_SMALL
        assert n.value == len(message)
        assert bytes(buf) == bytes([FILL]) * len(message)
    assert read(lib.itsme_last_error) == message


def test_last_error_after_open_file_on_a_regular_file(tmp_path):
    path = tmp_path / "regular"
    path.write_bytes(b"x")
    out = handle_out()
    assert lib.itsme_secret_store_open_file(str(path).encode(), byref(out)) == R.ITSME_E_SECRET_STORE
    assert out.value == 0xDEADBEEF
    message = read(lib.itsme_last_error)[:-1].decode()
    assert message.strip()


def test_last_error_is_per_thread(tmp_path):
    path = tmp_path / "regular"
    path.write_bytes(b"x")
    assert lib.itsme_secret_store_open_file(str(path).encode(), byref(handle_out())) == R.ITSME_E_SECRET_STORE
    assert read(lib.itsme_last_error) != b"\0"
    seen = []
    thread = threading.Thread(target=lambda: seen.append(read(lib.itsme_last_error)))
    thread.start()
    thread.join()
    assert seen == [b"\0"], "a fresh thread has an empty last error"


# -- values out of range ---------------------------------------------------

INVALID_UTF8 = [
    b"\xff",
    b"abc\x80",
    b"\xc3",  # truncated sequence
    b"Al\xc3\x28ce",
    b"\xc0\xaf",  # overlong "/"
    b"\xe0\x80\xaf",  # overlong "/"
    b"\xed\xa0\x80",  # UTF-16 surrogate
    b"\xf4\x90\x80\x80",  # beyond U+10FFFF
    b"\xf8\x88\x80\x80\x80",
]


@pytest.mark.parametrize("name", INVALID_UTF8)
def test_invalid_utf8_name_on_create(raw, name):
    out = handle_out()
    assert lib.itsme_identity_create(raw.empty_store, name, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert out.value == 0xDEADBEEF
    assert lib.itsme_identity_load(raw.empty_store, byref(out)) == R.ITSME_E_NOT_FOUND


@pytest.mark.parametrize("name", INVALID_UTF8)
def test_invalid_utf8_name_on_set_name(raw, name):
    assert lib.itsme_identity_set_name(raw.identity, name) == R.ITSME_E_INVALID_ARGUMENT
    assert read(lib.itsme_identity_name, raw.identity) == b"Raw\0"


@pytest.mark.parametrize("name", INVALID_UTF8)
def test_invalid_utf8_directory(raw, name):
    out = handle_out()
    path = str(raw.tmp_path).encode() + b"/" + name
    assert lib.itsme_secret_store_open_file(path, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert out.value == 0xDEADBEEF
    assert not os.path.exists(path)


@pytest.mark.parametrize("pin", [b"12345\xff", b"\xff" * 6, b"\xc0\xb1" * 3])
def test_invalid_utf8_pin_is_invalid_pin(raw, pin):
    # The header's PIN section: anything but six ASCII digits, UTF-8 or not,
    # is ITSME_E_INVALID_PIN, and is not counted.
    assert lib.itsme_pin_verify(raw.identity, pin, T0) == R.ITSME_E_INVALID_PIN
    assert lib.itsme_pin_change(raw.identity, PIN, pin, T0) == R.ITSME_E_INVALID_PIN
    assert lib.itsme_pin_set(raw.bare_identity, pin) == R.ITSME_E_INVALID_PIN
    assert status(raw.identity) == (0, 0)


def test_name_length_limit(raw):
    out = handle_out()
    assert lib.itsme_name_max_bytes() == 128
    assert lib.itsme_identity_create(raw.empty_store, b"a" * 129, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert out.value == 0xDEADBEEF
    assert lib.itsme_identity_create(raw.empty_store, "é".encode() * 65, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert lib.itsme_identity_create(raw.empty_store, b"", byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert lib.itsme_identity_set_name(raw.identity, b"b" * 129) == R.ITSME_E_INVALID_ARGUMENT
    assert lib.itsme_identity_set_name(raw.identity, b"") == R.ITSME_E_INVALID_ARGUMENT
    assert read(lib.itsme_identity_name, raw.identity) == b"Raw\0"
    ok(lib.itsme_identity_set_name(raw.identity, b"b" * 128))
    assert read(lib.itsme_identity_name, raw.identity) == b"b" * 128 + b"\0"
    ok(lib.itsme_identity_create(raw.empty_store, b"a" * 128, byref(out)))
    lib.itsme_identity_free(out.value)


@pytest.mark.parametrize("now", [-1, -T0, -(2**63)])
def test_negative_time_is_invalid_argument(raw, now):
    assert lib.itsme_pin_verify(raw.identity, PIN, now) == R.ITSME_E_INVALID_ARGUMENT
    assert lib.itsme_pin_verify(raw.identity, b"000000", now) == R.ITSME_E_INVALID_ARGUMENT
    assert lib.itsme_pin_change(raw.identity, PIN, b"654321", now) == R.ITSME_E_INVALID_ARGUMENT
    failures, wait = c_uint32(7), c_uint64(7)
    assert lib.itsme_pin_status(raw.identity, now, byref(failures), byref(wait)) == R.ITSME_E_INVALID_ARGUMENT
    assert (failures.value, wait.value) == (7, 7)
    assert status(raw.identity) == (0, 0)
    ok(lib.itsme_pin_verify(raw.identity, PIN, T0))


def test_large_times_are_fine(raw):
    ok(lib.itsme_pin_verify(raw.identity, PIN, 2**63 - 1))
    assert status(raw.identity, 2**63 - 1) == (0, 0)
    ok(lib.itsme_pin_verify(raw.identity, PIN, 0))


@pytest.mark.parametrize("length", [0, 31, 33])
def test_fingerprint_of_a_wrong_sized_key(length):
    key = (c_uint8 * 64)()
    buf, n = text_buf(17), size_out()
    assert lib.itsme_fingerprint_from_public_key(key, length, buf, 17, byref(n)) == R.ITSME_E_INVALID_ARGUMENT
    assert (bytes(buf), n.value) == (bytes([FILL]) * 17, 0x5EED)


def test_fingerprint_of_null_key_with_zero_length():
    buf, n = text_buf(17), size_out()
    assert lib.itsme_fingerprint_from_public_key(None, 0, buf, 17, byref(n)) == R.ITSME_E_INVALID_ARGUMENT
    assert n.value == 0x5EED


@pytest.mark.parametrize("code", [20, 100, 1000, -1, -17, 2**31 - 1, -(2**31)])
def test_result_message_of_unknown_code(code):
    assert lib.itsme_result_message(code) == UNKNOWN


def test_result_message_of_known_codes():
    messages = [lib.itsme_result_message(code) for code in itsme.RESULT_CODES.values()]
    assert all(message and message != UNKNOWN for message in messages)
    assert len(set(messages)) == len(messages)


# -- failures write nothing -------------------------------------------------


def test_failed_constructors_write_no_handle(raw, tmp_path):
    out = handle_out()
    assert lib.itsme_identity_create(raw.store, b"Again", byref(out)) == R.ITSME_E_ALREADY_EXISTS
    assert out.value == 0xDEADBEEF
    assert store_detail(raw.store) != b"\0"
    assert lib.itsme_identity_load(raw.empty_store, byref(out)) == R.ITSME_E_NOT_FOUND
    assert out.value == 0xDEADBEEF
    path = tmp_path / "regular"
    path.write_bytes(b"")
    assert lib.itsme_secret_store_open_file(str(path).encode(), byref(out)) == R.ITSME_E_SECRET_STORE
    assert out.value == 0xDEADBEEF
    assert lib.itsme_secret_store_open_file(b"", byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert out.value == 0xDEADBEEF


def test_failed_pin_calls_write_no_output():
    failing = []

    def get(ctx, name, out, cap, out_len):
        return R.ITSME_E_SECRET_STORE if failing else R.ITSME_E_NOT_FOUND

    keep, store = open_with_get(get)
    identity = c_void_p()
    ok(lib.itsme_identity_create(store, b"Cb", byref(identity)))
    failing.append(True)
    is_set = c_int(-7)
    assert lib.itsme_pin_is_set(identity, byref(is_set)) == R.ITSME_E_SECRET_STORE
    assert is_set.value == -7
    failures, wait = c_uint32(7), c_uint64(7)
    assert lib.itsme_pin_status(identity, T0, byref(failures), byref(wait)) == R.ITSME_E_SECRET_STORE
    assert (failures.value, wait.value) == (7, 7)
    assert identity_detail(identity.value) != b"\0"
    lib.itsme_identity_free(identity.value)
    lib.itsme_secret_store_free(store)


# -- hostile host callbacks --------------------------------------------------


def open_with_get(get):
    callback = GetCallback(get)
    table, store = raw_table(get=callback, destroy=DestroyCallback()), c_void_p()
    ok(lib.itsme_secret_store_new_callbacks(byref(table), byref(store)))
    return callback, store.value


@pytest.mark.parametrize(
    "behaviour",
    ["unknown-code", "length-beyond-cap", "always-too-small", "huge-size", "too-small-not-larger"],
)
def test_misbehaving_get_is_a_secret_store_error(behaviour):
    def get(ctx, name, out, cap, out_len):
        if behaviour == "unknown-code":
            return 42
        if behaviour == "length-beyond-cap":
            out_len[0] = cap + 100
            return R.ITSME_OK
        if behaviour == "always-too-small":
            out_len[0] = cap * 2
            return R.ITSME_E_BUFFER_TOO_SMALL
        if behaviour == "huge-size":
            out_len[0] = 2**62
            return R.ITSME_E_BUFFER_TOO_SMALL
        out_len[0] = cap
        return R.ITSME_E_BUFFER_TOO_SMALL

    keep, store = open_with_get(get)
    out = handle_out()
    assert lib.itsme_identity_load(store, byref(out)) == R.ITSME_E_SECRET_STORE
    assert out.value == 0xDEADBEEF
    assert store_detail(store) != b"\0"
    lib.itsme_secret_store_free(store)


# -- initialisation ----------------------------------------------------------

_UNINITIALISED = textwrap.dedent(
    """
    import ctypes, importlib.util, json, sys
    spec = importlib.util.spec_from_file_location("raw_ffi", sys.argv[1])
    ffi = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ffi)  # declares signatures, does not call itsme_init
    lib = ffi.lib
    out = ctypes.c_void_p(0xDEADBEEF)
    key = (ctypes.c_uint8 * 32)()
    buf, n = ctypes.create_string_buffer(17), ctypes.c_size_t()
    results = {
        "version": lib.itsme_version_string().decode(),
        "message": lib.itsme_result_message(3).decode(),
        "sizes": [lib.itsme_public_key_bytes(), lib.itsme_fingerprint_size(), lib.itsme_name_max_bytes()],
        "new_memory": lib.itsme_secret_store_new_memory(ctypes.byref(out)),
        "open_file": lib.itsme_secret_store_open_file(sys.argv[2].encode(), ctypes.byref(out)),
        "new_callbacks": lib.itsme_secret_store_new_callbacks(None, ctypes.byref(out)),
        "identity_load": lib.itsme_identity_load(None, ctypes.byref(out)),
        "fingerprint": lib.itsme_fingerprint_from_public_key(key, 32, buf, 17, ctypes.byref(n)),
        "out": out.value,
        "init": [lib.itsme_init(), lib.itsme_init()],
        "after_init": lib.itsme_secret_store_new_memory(ctypes.byref(out)),
    }
    print(json.dumps(results))
    """
)


def test_calls_before_init_are_refused(tmp_path):
    ffi_path = os.path.join(os.path.dirname(itsme.__file__), "_ffi.py")
    directory = tmp_path / "never-created"
    result = subprocess.run(
        [sys.executable, "-c", _UNINITIALISED, ffi_path, str(directory)],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ),
    )
    got = json.loads(result.stdout)
    assert got["version"] == itsme.version()
    assert got["message"] == itsme.result_message(R.ITSME_E_NOT_INITIALIZED)
    assert got["sizes"] == [32, 17, 128]
    for call in ("new_memory", "open_file", "new_callbacks", "identity_load", "fingerprint"):
        assert got[call] == R.ITSME_E_NOT_INITIALIZED, call
    assert got["out"] == 0xDEADBEEF
    assert not directory.exists()
    assert got["init"] == [R.ITSME_OK, R.ITSME_OK]
    assert got["after_init"] == R.ITSME_OK
