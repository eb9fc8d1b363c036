"""The C interface misused on purpose, through the binding's raw functions.

Every call here goes straight to ``itsme._ffi.lib``.  The conventions every
function shares (each pointer argument NULL alone, calls before itsme_init,
the size query and ``cap - 1`` of every output buffer, sentinel bytes and
outputs untouched on failure, invalid UTF-8, times out of range, releasing
NULL and releasing once) are checked for every function by the C contract
suite generated from abi/itsme.abi.json (abi/tools/c_contract.py), under
AddressSanitizer and LeakSanitizer.  What is left here is particular to
functions: their own value ranges and sizes, their states, optional
arguments, host callbacks that misbehave, the last error per thread, and
extreme times.
"""

import ctypes
import os
import subprocess
import sys
import textwrap
import threading
from ctypes import c_int64, byref, c_size_t, c_uint8, c_uint32, c_uint64, c_void_p
from types import SimpleNamespace

import pytest

import itsme
from itsme import _abi
from itsme._ffi import (
    ApprovalResultStruct,
    DestroyCallback,
    GetCallback,
    PutCallback,
    RemoveCallback,
    ReplayDestroyCallback,
    ReplayInsertCallback,
    ReplayStoreCallbacks,
    SecretStoreCallbacks,
    VoiceDerivationStruct,
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


def ok(code):
    assert code == R.ITSME_OK, f"expected ITSME_OK, got {code}"


def signature(name):
    """A function's generated signature, of itsme.h or of itsme_testing.h."""
    return _abi.FUNCTIONS[name] if name in _abi.FUNCTIONS else _abi.TESTING_FUNCTIONS[name]


def filled_out(name, index):
    """The output parameter ``index`` of a function (a scalar, an int or a
    bool as the header says), every byte a sentinel."""
    pointee = signature(name).argtypes[index]._type_
    return pointee.from_buffer_copy(bytes([FILL]) * ctypes.sizeof(pointee))


def filled_struct(struct):
    """A struct of sentinel bytes, but for the size field a struct the caller
    passes starts with where the header has one (set to its size)."""
    value = struct.from_buffer_copy(bytes([FILL]) * ctypes.sizeof(struct))
    if "size" in [name for name, *_ in struct._fields_]:
        value.size = ctypes.sizeof(struct)
    return value


def call_words(function, *args):
    """Calls a function whose last arguments are a word-index buffer and its
    capacity, with a written-length output where it has one (ignored)."""
    if len(signature(function.__name__).argtypes) > len(args):
        return function(*args, byref(size_out()))
    return function(*args)


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


def status(identity, now=T0):
    failures, wait = c_uint32(), c_uint64()
    ok(lib.itsme_pin_status(identity, now, byref(failures), byref(wait)))
    return failures.value, wait.value


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
    env = SimpleNamespace(
        tmp_path=tmp_path, exchanges=[], randoms=[], voices=[], online=[], updates=[], transfers=[], imports=[], compare=None,
        bare_contacts=None, peer=None, profiles=[], replays=[],
    )
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
    for exchange in env.exchanges:
        lib.itsme_exchange_free(exchange)
    for voice in env.voices:
        lib.itsme_voice_free(voice)
    for session in env.online:
        lib.itsme_online_verify_free(session)
    for update in env.updates:
        lib.itsme_pin_update_free(update)
    for transfer in env.transfers:
        lib.itsme_transfer_free(transfer)
    for opened in env.imports:
        lib.itsme_import_free(opened)
    for profile in env.profiles:
        lib.itsme_profile_free(profile)
    for replay in env.replays:
        lib.itsme_replay_store_free(replay)
    for rng in env.randoms:
        lib.itsme_random_free(rng)
    lib.itsme_contact_free(env.contact)
    lib.itsme_contact_list_free(env.list)
    lib.itsme_store_free(env.contacts)
    lib.itsme_store_free(env.bare_contacts)
    lib.itsme_identity_free(env.identity)
    lib.itsme_identity_free(env.bare_identity)
    for store in (env.store, env.empty_store, env.bare_store):
        lib.itsme_secret_store_free(store)


def new_random(env, first=0):
    """A deterministic random source, freed with the fixture."""
    seed, out = (c_uint8 * 32)(*range(first, first + 32)), c_void_p()
    ok(lib.itsme_random_new_deterministic(seed, 32, byref(out)))
    env.randoms.append(out.value)
    return out.value


def new_exchange(env, identity, session_code=None, bluetooth=False):
    """A QR (or Bluetooth) exchange on a raw identity (env.identity or
    env.bare_identity) and its contact store, freed with the fixture."""
    out = c_void_p()
    store = env.contacts if identity == env.identity else bare_contacts(env)
    if bluetooth:
        ok(lib.itsme_exchange_new_bluetooth(identity, store, session_code, None, T0, byref(out)))
    else:
        ok(lib.itsme_exchange_new_qr(identity, store, None, T0, byref(out)))
    env.exchanges.append(out.value)
    return out.value


def outgoing(exchange):
    """The exchange's next outgoing bytes."""
    buf, n = byte_buf(512), size_out()
    ok(lib.itsme_exchange_next_outgoing(exchange, buf, 512, byref(n)))
    return bytes(buf)[: n.value]


def as_array(data):
    return (c_uint8 * max(len(data), 1)).from_buffer_copy(data or b"\0")


def receive(exchange, data, now=T0):
    return lib.itsme_exchange_receive(exchange, as_array(data), len(data), now)


def comparing(env):
    """A QR exchange of env.identity with env.bare_identity, comparing the SAS."""
    if env.compare is None:
        mine, theirs = new_exchange(env, env.identity), new_exchange(env, env.bare_identity)
        ok(receive(mine, outgoing(theirs)))
        ok(receive(theirs, outgoing(mine)))
        env.compare = mine
    return env.compare


def exchange_state(exchange):
    state = c_uint32()
    ok(lib.itsme_exchange_status(exchange, byref(state), None))
    return state.value


def new_voice(env, now=T0):
    """A voice session with env's contact Carol, planned at ``now``; freed with the fixture."""
    out = c_void_p()
    ok(lib.itsme_voice_new(env.contacts, env.contact_id, None, 0, now, byref(out)))
    env.voices.append(out.value)
    return out.value


def voice_state(voice):
    state, turn = c_uint32(), c_uint32()
    ok(lib.itsme_voice_status(voice, byref(state), byref(turn)))
    return state.value, turn.value


def voice_window(voice):
    window = c_int64()
    ok(lib.itsme_voice_timing(voice, 0, byref(window), None, None))
    return window.value


def voice_words(voice):
    out = (c_uint8 * 5)()
    ok(call_words(lib.itsme_voice_words, voice, out, 5))
    return list(out)


def carol_words(window):
    """Carol's five words: her pid is CONTACT_KEY, the seed is SEED."""
    out = (c_uint8 * 5)()
    ok(call_words(lib.itsme_derive_words, SEED, 32, window, CONTACT_KEY, 32, out, 5))
    return list(out)


def started_voice(env):
    """A voice session with Carol, started at its window."""
    voice = new_voice(env)
    ok(lib.itsme_voice_start(voice, 30 * voice_window(voice)))
    return voice


def next_word(voice):
    """A word that is right for the next selection: mine or Carol's."""
    window = voice_window(voice)
    state, turn = voice_state(voice)
    assert (state, turn != itsme.VOICE_TURN_NONE) == (itsme.VOICE_SELECTING, True)
    return voice_words(voice)[0] if turn == itsme.VOICE_TURN_MINE else carol_words(window)[0]


def comparing_voice(env):
    """A voice session with Carol whose codes are ready."""
    voice = started_voice(env)
    now = 30 * voice_window(voice)
    for _ in range(2):
        ok(lib.itsme_voice_select(voice, next_word(voice), now))
    assert voice_state(voice) == (itsme.VOICE_COMPARING, itsme.VOICE_TURN_NONE)
    return voice


def public_key(identity):
    buf, n = byte_buf(32), size_out()
    ok(lib.itsme_identity_public_key(identity, buf, 32, byref(n)))
    return bytes(buf)[: n.value]


def bare_contacts(env):
    """env.bare_identity's contact store, opened once."""
    if env.bare_contacts is None:
        out = c_void_p()
        ok(lib.itsme_store_open(env.bare_identity, str(env.tmp_path / "bare-contacts.db").encode(), byref(out)))
        env.bare_contacts = out.value
    return env.bare_contacts


def peer_contacts(env):
    """env.identity and env.bare_identity as each other's contacts, with
    SEED: (the id in env.contacts, the id in env.bare_contacts)."""
    if env.peer is None:
        mine, theirs = (public_key(identity) for identity in (env.identity, env.bare_identity))
        bare_contacts(env)
        mine_id, theirs_id = c_int64(), c_int64()
        ok(lib.itsme_store_add(env.contacts, b"Bare", as_array(theirs), 32, SEED, 32, 0, T0, byref(mine_id)))
        ok(lib.itsme_store_add(env.bare_contacts, b"Raw", as_array(mine), 32, SEED, 32, 0, T0, byref(theirs_id)))
        env.peer = (mine_id.value, theirs_id.value)
    return env.peer


def new_online_verify(env, store=None, contact_id=None, now=T0):
    """An Online Verify session (default: with Carol), freed with the fixture."""
    out = c_void_p()
    store, contact_id = (env.contacts, env.contact_id) if store is None else (store, contact_id)
    ok(lib.itsme_online_verify_new(store, contact_id, now // 30, None, 0, None, now, byref(out)))
    env.online.append(out.value)
    return out.value


def online_state(session):
    state = c_uint32()
    ok(lib.itsme_online_verify_status(session, byref(state)))
    return state.value


def online_outgoing(session):
    buf, n = byte_buf(128), size_out()
    ok(lib.itsme_online_verify_next_outgoing(session, buf, 128, byref(n)))
    return bytes(buf)[: n.value]


def online_pair(env):
    """Online Verify sessions of env.identity and env.bare_identity with
    each other: (mine, theirs)."""
    mine_id, theirs_id = peer_contacts(env)
    return new_online_verify(env, env.contacts, mine_id), new_online_verify(env, env.bare_contacts, theirs_id)


def online_pump(mine, theirs):
    """Moves Online Verify messages between two sessions until both are quiet."""
    moved = True
    while moved:
        moved = False
        for sender, receiver in ((mine, theirs), (theirs, mine)):
            message = online_outgoing(sender)
            if message:
                ok(lib.itsme_online_verify_receive(receiver, as_array(message), len(message), T0))
                moved = True


def online_comparing(env):
    """My Online Verify session with env.bare_identity, its SAS ready."""
    mine, theirs = online_pair(env)
    online_pump(mine, theirs)
    assert online_state(mine) == itsme.ONLINE_VERIFY_COMPARE_SAS
    return mine


def new_pin_update(env, store=None, contact_id=None, now=T0):
    """A PIN Update (default: with Carol), freed with the fixture."""
    out = c_void_p()
    store, contact_id = (env.contacts, env.contact_id) if store is None else (store, contact_id)
    ok(lib.itsme_pin_update_new(store, contact_id, now // 30, None, now, byref(out)))
    env.updates.append(out.value)
    return out.value


def pin_update_outgoing(update):
    buf, n = byte_buf(128), size_out()
    ok(lib.itsme_pin_update_next_outgoing(update, buf, 128, byref(n)))
    return bytes(buf)[: n.value]


# The X25519 base point: a public key whose shared secret is never zero.
BASE_POINT = (c_uint8 * 32)(9, *([0] * 31))
EPHEMERAL_SECRET = (c_uint8 * 32)(*range(1, 33))
HASH = (c_uint8 * 32)(*range(100, 132))
DEVICE_SECRET = (c_uint8 * 16)(*range(16))
FP_A, FP_B = b"0123456789ABCDEF", b"FEDCBA9876543210"
HELLO = (c_uint8 * 42)(1, 1, *range(40))
KEY_FRAME = (c_uint8 * 34)(1, 2, *range(32))
PLAINTEXT = (c_uint8 * 120)(*range(120))


VOICE_WINDOW = T0 // 30
DEGRADATION_SECRET = (c_uint8 * 10)(*range(10))


def degradation_code_of_carol():
    """The degradation code Carol (pid CONTACT_KEY, seed SEED) would send."""
    buf, n = text_buf(30), size_out()
    ok(lib.itsme_derive_degradation_code(SEED, 32, CONTACT_KEY, 32, DEGRADATION_SECRET, 10, buf, 30, byref(n)))
    return buf.raw[: n.value - 1]


# Profile records and contact photos (docs/PROTOCOL.md section 18).
PHOTO = (c_uint8 * 16)(*range(0x40, 0x50))
REFERENCE = (c_uint8 * 32)(*range(0x60, 0x80))


def new_profile(env, identity=None):
    """A profile of env.identity (name, 16-byte photo, filename), freed with the fixture."""
    out = c_void_p()
    ok(lib.itsme_profile_create(env.identity if identity is None else identity, b"Raw", PHOTO, 16, b"raw.jpg", None, byref(out)))
    env.profiles.append(out.value)
    return out.value


def profile_bytes(function, profile, size=512):
    buf, n = byte_buf(size), size_out()
    ok(function(profile, buf, size, byref(n)))
    return bytes(buf)[: n.value]


# Service approvals (docs/PROTOCOL.md section 19).
SERVICE = b"bank.example"
NONCE = (c_uint8 * 16)(*range(0x20, 0x30))
APPROVAL_NOW = T0


def enroll_raw(store, rng=None, service=SERVICE):
    """Enrolls a raw secret store for SERVICE; returns the enrollment."""
    buf, n = byte_buf(itsme.ENROLLMENT_MAX), size_out()
    ok(lib.itsme_credential_enroll(store, service, b"Raw phone", NONCE, 16, rng, buf, itsme.ENROLLMENT_MAX, byref(n)))
    return bytes(buf)[: n.value]


def request_raw(scopes=b"email profile", rng=None):
    """A request of SERVICE issued at APPROVAL_NOW, living 300 seconds."""
    buf, n = byte_buf(itsme.APPROVAL_REQUEST_MAX), size_out()
    ok(
        lib.itsme_approval_request_create(
            SERVICE, b"Example Bank", b"session-1", scopes, 300, rng, APPROVAL_NOW, buf, itsme.APPROVAL_REQUEST_MAX, byref(n)
        )
    )
    return bytes(buf)[: n.value]


def approval_raw(store, request, decision=1, granted=b"email"):
    buf, n = byte_buf(itsme.APPROVAL_MAX), size_out()
    ok(
        lib.itsme_approval_sign(
            store, as_array(request), len(request), decision, granted, APPROVAL_NOW, buf, itsme.APPROVAL_MAX, byref(n)
        )
    )
    return bytes(buf)[: n.value]


def new_replay(env):
    """An in-memory replay store, freed with the fixture."""
    out = c_void_p()
    ok(lib.itsme_replay_store_new_memory(0, byref(out)))
    env.replays.append(out.value)
    return out.value


# A raw replay-store callback table; destroy records ctx as the secret store's does.
RAW_INSERT = ReplayInsertCallback(lambda ctx, key, expires_at, now, out_seen: R.ITSME_OK)
RAW_REPLAY_DESTROY = ReplayDestroyCallback(lambda ctx: destroyed.append(ctx))


def raw_replay_table(**overrides):
    fields = dict(ctx=RAW_CTX, insert=RAW_INSERT, destroy=RAW_REPLAY_DESTROY)
    fields.update(overrides)
    return ReplayStoreCallbacks(**fields)


# -- optional arguments and callback tables ------------------------------------


def test_reject_when_nothing_was_saved(raw):
    exchange = comparing(raw)
    ok(lib.itsme_exchange_reject(exchange))
    assert exchange_state(exchange) == itsme.EXCHANGE_REJECTED


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


# -- messages and last errors ------------------------------------------------


def test_bluetooth_frame_is_not_consumed_by_a_too_small_buffer(raw):
    exchange = new_exchange(raw, raw.identity, bluetooth=True)
    n = size_out()
    assert lib.itsme_exchange_next_outgoing(exchange, None, 0, byref(n)) == R.ITSME_E_BUFFER_TOO_SMALL
    assert n.value == 42, "a HELLO frame is 42 bytes"
    buf, n = byte_buf(64), size_out()
    assert lib.itsme_exchange_next_outgoing(exchange, buf, 41, byref(n)) == R.ITSME_E_BUFFER_TOO_SMALL
    assert (n.value, bytes(buf)) == (42, bytes([FILL]) * 64)
    hello = outgoing(exchange)
    assert len(hello) == 42 and hello[:2] == b"\x01\x01"
    # Nothing left to send: OK with *out_len 0, even with a NULL buffer.
    n = size_out()
    ok(lib.itsme_exchange_next_outgoing(exchange, None, 0, byref(n)))
    assert n.value == 0
    buf, n = byte_buf(8), size_out()
    ok(lib.itsme_exchange_next_outgoing(exchange, buf, 8, byref(n)))
    assert (n.value, bytes(buf)) == (0, bytes([FILL]) * 8)
    assert lib.itsme_exchange_next_outgoing(exchange, None, 8, byref(n)) == R.ITSME_E_INVALID_ARGUMENT


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


@pytest.mark.parametrize("length", [0, 16, 31, 33, 64])
def test_random_seed_must_be_32_bytes(length):
    seed, out = (c_uint8 * 64)(), handle_out()
    assert lib.itsme_random_new_deterministic(seed, length, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert out.value == 0xDEADBEEF
    assert read(lib.itsme_last_error) != b"\0"


@pytest.mark.parametrize("value", [260000, 2**32 - 1])
def test_short_code_value_out_of_range(value):
    buf, n = text_buf(14), size_out()
    assert lib.itsme_short_code_format(value, buf, 14, byref(n)) == R.ITSME_E_INVALID_ARGUMENT
    assert (bytes(buf), n.value) == (bytes([FILL]) * 14, 0x5EED)


@pytest.mark.parametrize("text", [b"ECHO 42", b"", b"ALPHA 0042", b"ECH\xc3\x28 0042", b"\xff"])
def test_bad_session_codes(raw, text):
    out, value = handle_out(), c_uint32(7)
    assert lib.itsme_short_code_parse(text, byref(value)) == R.ITSME_E_INVALID_ARGUMENT
    assert value.value == 7
    assert lib.itsme_exchange_new_bluetooth(raw.identity, raw.contacts, text, None, T0, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert out.value == 0xDEADBEEF


@pytest.mark.parametrize("length", [0, 31, 33])
def test_derivations_check_sizes(length):
    data = (c_uint8 * 64)(*range(64))
    buf, text, n = byte_buf(64), text_buf(14), size_out()
    calls = [
        lambda: lib.itsme_derive_seed(data, length, BASE_POINT, 32, FP_A, FP_B, buf, 64, byref(n)),
        lambda: lib.itsme_derive_seed(EPHEMERAL_SECRET, 32, data, length, FP_A, FP_B, buf, 64, byref(n)),
        lambda: lib.itsme_derive_sas(data, length, HASH, 32, text, 14, byref(n)),
        lambda: lib.itsme_derive_sas(HASH, 32, data, length, text, 14, byref(n)),
        lambda: lib.itsme_bluetooth_session_keys(data, length, BASE_POINT, 32, HASH, 32, buf, 64, byref(n)),
        lambda: lib.itsme_bluetooth_session_keys(EPHEMERAL_SECRET, 32, BASE_POINT, 32, data, length, buf, 64, byref(n)),
        lambda: lib.itsme_bluetooth_transcript_hash(data, length, PLAINTEXT, 1, PLAINTEXT, 1, buf, 64, byref(n)),
    ]
    for index, call in enumerate(calls):
        assert call() == R.ITSME_E_INVALID_ARGUMENT, index
    assert (bytes(buf), bytes(text), n.value) == (bytes([FILL]) * 64, bytes([FILL]) * 14, 0x5EED)


def test_derivations_check_frame_and_plaintext_sizes():
    data = (c_uint8 * 300)(*([1] * 300))
    buf, n = byte_buf(32), size_out()
    for hello, key in ((41, 34), (43, 34), (42, 33), (42, 35), (0, 34)):
        frames = [data, hello, HELLO, 42, KEY_FRAME, 34, data, key]
        code = lib.itsme_bluetooth_th1(b"ECHO 0042", *frames, buf, 32, byref(n))
        assert code == R.ITSME_E_INVALID_ARGUMENT, (hello, key)
    for length in (0, 6, 15, 17):
        keys = [CONTACT_KEY, 32, BASE_POINT, 32]
        code = lib.itsme_bluetooth_commitment(*keys, b"Carol", data, length, buf, 32, byref(n))
        assert code == R.ITSME_E_INVALID_ARGUMENT, length
    for length in (0, 113, 242):
        code = lib.itsme_bluetooth_transcript_hash(HASH, 32, data, length, PLAINTEXT, 114, buf, 32, byref(n))
        assert code == R.ITSME_E_INVALID_ARGUMENT, length
    assert (bytes(buf), n.value) == (bytes([FILL]) * 32, 0x5EED)
    ok(lib.itsme_bluetooth_transcript_hash(HASH, 32, data, 241, PLAINTEXT, 114, buf, 32, byref(n)))


def test_output_arguments_are_checked_first(raw):
    # An argument error is reported as such whatever else is wrong.
    n = size_out()
    zero = (c_uint8 * 32)()
    seed = lib.itsme_derive_seed(EPHEMERAL_SECRET, 32, zero, 32, FP_A, FP_B, None, 32, byref(n))
    assert seed == R.ITSME_E_INVALID_ARGUMENT, "not ITSME_E_INVALID_KEY"
    assert lib.itsme_short_code_format(260000, None, 14, byref(n)) == R.ITSME_E_INVALID_ARGUMENT
    exchange = comparing(raw)
    ok(lib.itsme_exchange_reject(exchange))
    assert lib.itsme_exchange_seal(exchange, None, 64, byref(n)) == R.ITSME_E_INVALID_ARGUMENT
    assert lib.itsme_exchange_seal(exchange, byte_buf(64), 64, None) == R.ITSME_E_INVALID_ARGUMENT
    assert n.value == 0x5EED


def test_low_order_keys_are_invalid_key():
    zero = (c_uint8 * 32)()
    buf, n = byte_buf(64), size_out()
    seed = lib.itsme_derive_seed(EPHEMERAL_SECRET, 32, zero, 32, FP_A, FP_B, buf, 64, byref(n))
    keys = lib.itsme_bluetooth_session_keys(EPHEMERAL_SECRET, 32, zero, 32, HASH, 32, buf, 64, byref(n))
    assert (seed, keys) == (R.ITSME_E_INVALID_KEY, R.ITSME_E_INVALID_KEY)
    assert (bytes(buf), n.value) == (bytes([FILL]) * 64, 0x5EED)


# The latest time the header allows: the end of the year 9999.
MAX_TIME = 253402300799


def test_large_times_are_fine(raw):
    ok(lib.itsme_pin_verify(raw.identity, PIN, MAX_TIME))
    assert status(raw.identity, MAX_TIME) == (0, 0)
    ok(lib.itsme_pin_verify(raw.identity, PIN, 0))


@pytest.mark.parametrize("length", [0, 31, 33])
def test_fingerprint_of_a_wrong_sized_key(length):
    key = (c_uint8 * 64)()
    buf, n = text_buf(17), size_out()
    assert lib.itsme_fingerprint_from_public_key(key, length, buf, 17, byref(n)) == R.ITSME_E_INVALID_ARGUMENT
    assert (bytes(buf), n.value) == (bytes([FILL]) * 17, 0x5EED)


@pytest.mark.parametrize("code", [24, 100, 1000, -1, -17, 2**31 - 1, -(2**31)])
def test_result_message_of_unknown_code(code):
    assert lib.itsme_result_message(code) == UNKNOWN


def test_result_message_of_known_codes():
    messages = [lib.itsme_result_message(code) for code in itsme.RESULT_CODES.values()]
    assert all(message and message != UNKNOWN for message in messages)
    assert len(set(messages)) == len(messages)


# -- voice verification -----------------------------------------------------


def voice_detail(voice):
    return read(lib.itsme_voice_last_error, voice)


def contacts_detail(env):
    return read(lib.itsme_store_last_error, env.contacts)


def test_nato_words():
    words = [lib.itsme_nato_word(index) for index in range(26)]
    assert words[0] == b"ALFA" and words[23] == b"XRAY" and words[25] == b"ZULU"
    assert len(set(words)) == 26 and max(map(len, words)) == len(b"NOVEMBER")
    for index in (26, 100, 2**32 - 1):
        assert lib.itsme_nato_word(index) is None


def test_voice_new_failures_are_recorded_on_the_store(raw):
    out = handle_out()
    assert lib.itsme_voice_new(raw.contacts, raw.contact_id + 100, None, 0, T0, byref(out)) == R.ITSME_E_NOT_FOUND
    assert contacts_detail(raw) != b"\0"
    assert lib.itsme_voice_new(raw.contacts, raw.contact_id, None, 0, -1, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert out.value == 0xDEADBEEF


def test_call_bindings_are_checked_by_the_library(raw):
    """The three constructors that take a call binding (docs/PROTOCOL.md
    9.7, 11.4): NULL with 0 is none; 16 to 64 bytes bind; NULL with a
    length, an empty binding that is not NULL, and any other length are
    ITSME_E_INVALID_ARGUMENT, with the store's detail and *out untouched."""
    assert (lib.itsme_call_binding_min(), lib.itsme_call_binding_max()) == (16, 64)
    assert (_abi.ITSME_CALL_BINDING_MIN, _abi.ITSME_CALL_BINDING_MAX) == (16, 64)
    window = T0 // 30
    constructors = {
        "itsme_voice_new": (
            lambda binding, length, out: lib.itsme_voice_new(raw.contacts, raw.contact_id, binding, length, T0, out),
            lib.itsme_voice_free,
        ),
        "itsme_online_verify_new": (
            lambda binding, length, out: lib.itsme_online_verify_new(
                raw.contacts, raw.contact_id, window, binding, length, None, T0, out
            ),
            lib.itsme_online_verify_free,
        ),
        "itsme_online_verify_rendezvous_new": (
            lambda binding, length, out: lib.itsme_online_verify_rendezvous_new(
                raw.contacts, raw.contact_id, binding, length, None, T0, out
            ),
            lib.itsme_online_verify_rendezvous_free,
        ),
    }
    data = byte_buf(65)
    for name, (new, free) in constructors.items():
        for binding, length in ((None, 16), (None, 32), (data, 0), (data, 15), (data, 65), (data, 1)):
            out = handle_out()
            assert new(binding, length, byref(out)) == R.ITSME_E_INVALID_ARGUMENT, (name, binding is None, length)
            assert out.value == 0xDEADBEEF, name
            assert b"binding" in contacts_detail(raw), (name, length)
        for binding, length in ((None, 0), (data, 16), (data, 32), (data, 64)):
            out = c_void_p()
            ok(new(binding, length, byref(out)))
            assert out.value, name
            free(out.value)


def test_voice_words_need_five_bytes(raw):
    voice = new_voice(raw)
    out = byte_buf(5)
    for cap in (0, 1, 4):
        assert call_words(lib.itsme_voice_words, voice, out, cap) == R.ITSME_E_BUFFER_TOO_SMALL
        words = call_words(lib.itsme_derive_words, SEED, 32, VOICE_WINDOW, CONTACT_KEY, 32, out, cap)
        assert words == R.ITSME_E_BUFFER_TOO_SMALL
    assert bytes(out) == bytes([FILL]) * 5
    big = byte_buf(8)
    ok(call_words(lib.itsme_voice_words, voice, big, 8))
    assert bytes(big)[5:] == bytes([FILL]) * 3, "written past the five words"
    assert sorted(set(bytes(big)[:5])) == list(bytes(big)[:5]) and max(bytes(big)[:5]) < 26


def test_voice_codes_before_the_selections_are_invalid_state(raw):
    voice = started_voice(raw)
    buf, n, tag = text_buf(13), size_out(), c_uint32(7)
    assert lib.itsme_voice_your_code(voice, buf, 13, byref(n), byref(tag)) == R.ITSME_E_INVALID_STATE
    assert lib.itsme_voice_their_code(voice, buf, 13, byref(n), byref(tag)) == R.ITSME_E_INVALID_STATE
    assert (bytes(buf), n.value, tag.value) == (bytes([FILL]) * 13, 0x5EED, 7)
    assert voice_detail(voice) != b"\0"


@pytest.mark.parametrize("word", [26, 100, 2**32 - 1])
def test_voice_select_word_out_of_range(raw, word):
    voice = started_voice(raw)
    before = voice_state(voice)
    assert lib.itsme_voice_select(voice, word, 30 * voice_window(voice)) == R.ITSME_E_INVALID_ARGUMENT
    assert voice_state(voice) == before, "nothing changes"


def test_voice_check_arguments_change_nothing(raw):
    voice = comparing_voice(raw)
    now = 30 * voice_window(voice)
    outcome = c_uint32(0xAAAA)
    for code, tag in [(b"ECHO 512", 100), (b"ECHO 512", 2**32 - 1), (b"ECH\xc3\x28 512", 1), (b"ECHO 51", 1), (b"", 1)]:
        assert lib.itsme_voice_check(voice, code, tag, now, byref(outcome)) == R.ITSME_E_INVALID_ARGUMENT
        assert voice_state(voice) == (itsme.VOICE_COMPARING, itsme.VOICE_TURN_NONE), (code, tag)
    assert outcome.value == 0xAAAA
    ok(lib.itsme_voice_check(voice, b"echo-512", 99, now, byref(outcome)))
    assert voice_state(voice)[0] == itsme.VOICE_FINISHED


def test_voice_keeps_its_store_alive(raw):
    voice = new_voice(raw)
    start = 30 * voice_window(voice)
    lib.itsme_store_free(raw.contacts)
    out = c_void_p()
    # The fixture closes env.contacts later: reopen a handle under that name.
    ok(lib.itsme_store_open(raw.identity, str(raw.tmp_path / "contacts.db").encode(), byref(out)))
    raw.contacts = out.value
    buf, n = text_buf(12), size_out()
    ok(lib.itsme_voice_session_id(voice, buf, 12, byref(n)))
    assert 8 <= n.value <= 12
    # The session writes through the store handle it holds.
    ok(lib.itsme_voice_start(voice, start))
    contact, window = c_void_p(), c_int64()
    ok(lib.itsme_store_get(raw.contacts, raw.contact_id, byref(contact)))
    ok(lib.itsme_contact_last_window(contact.value, byref(window)))
    lib.itsme_contact_free(contact.value)
    assert window.value == voice_window(voice)


@pytest.mark.parametrize("length", [0, 7, 9, 31, 33])
def test_voice_derivations_check_pid_and_seed_sizes(length):
    data = (c_uint8 * 64)(*range(64))
    text, words, n, tag = text_buf(13), byte_buf(5), size_out(), c_uint32(7)
    flag = filled_out("itsme_derive_lower_selects_first", 3)
    window = VOICE_WINDOW
    calls = [
        lambda: lib.itsme_derive_session_id(data, length, window, text, 13, byref(n)),
        lambda: call_words(lib.itsme_derive_words, data, length, window, CONTACT_KEY, 32, words, 5),
        lambda: call_words(lib.itsme_derive_words, SEED, 32, window, data, length, words, 5),
        lambda: lib.itsme_derive_lower_selects_first(data, length, window, byref(flag)),
        lambda: lib.itsme_derive_code(SEED, 32, window, data, length, 1, OTHER_KEY, 32, 2, OTHER_KEY, 32, text, 13, byref(n)),
        lambda: lib.itsme_derive_code(SEED, 32, window, OTHER_KEY, 32, 1, data, length, 2, OTHER_KEY, 32, text, 13, byref(n)),
        lambda: lib.itsme_derive_code(SEED, 32, window, OTHER_KEY, 32, 1, OTHER_KEY, 32, 2, data, length, text, 13, byref(n)),
        lambda: lib.itsme_derive_device_tag(data, length, window, CONTACT_KEY, 32, None, 0, byref(tag)),
        lambda: lib.itsme_derive_device_tag(SEED, 32, window, data, length, None, 0, byref(tag)),
    ]
    for index, call in enumerate(calls):
        assert call() == R.ITSME_E_INVALID_ARGUMENT, index
    assert (bytes(text), bytes(words), n.value, tag.value) == (bytes([FILL]) * 13, bytes([FILL]) * 5, 0x5EED, 7)
    assert bytes(flag) == bytes([FILL]) * ctypes.sizeof(flag)


def test_voice_derivations_accept_fingerprint_pids():
    fingerprint = (c_uint8 * 8)(*range(8))
    words, tag = byte_buf(5), c_uint32(7)
    ok(call_words(lib.itsme_derive_words, SEED, 32, VOICE_WINDOW, fingerprint, 8, words, 5))
    ok(lib.itsme_derive_device_tag(SEED, 32, VOICE_WINDOW, fingerprint, 8, DEVICE_SECRET, 16, byref(tag)))
    assert tag.value < 100


def test_derive_voice_checks_its_arguments():
    out = filled_struct(VoiceDerivationStruct)
    before = bytes(out)
    secret = (c_uint8 * 65)(*range(65))

    def call(seed_len=32, my_len=32, their_len=32, my_secret=DEVICE_SECRET, my_secret_len=16, their_secret_len=16,
             first=1, second=2):
        return lib.itsme_derive_voice(
            SEED, seed_len, VOICE_WINDOW, CONTACT_KEY, my_len, OTHER_KEY, their_len, my_secret, my_secret_len,
            secret, their_secret_len, first, second, byref(out),
        )

    bad = [
        dict(seed_len=31), dict(my_len=31), dict(their_len=0), dict(my_secret=None), dict(their_secret_len=65),
        dict(first=26), dict(second=2**32 - 1),
    ]
    for arguments in bad:
        assert call(**arguments) == R.ITSME_E_INVALID_ARGUMENT, arguments
    assert bytes(out) == before, "written on failure"
    ok(call(my_len=8, their_secret_len=64))
    assert out.i_select_first in (0, 1)
    assert list(out.my_words) == sorted(set(out.my_words)) and max(out.their_words) < 26
    assert out.my_code < 26000 and out.their_code < 26000 and out.my_tag < 100 and out.their_tag < 100


def test_voice_derivations_check_words_and_secrets():
    text, n, tag = text_buf(13), size_out(), c_uint32(7)
    secret = (c_uint8 * 65)(*range(65))
    for first, second in ((26, 0), (0, 26), (2**32 - 1, 0)):
        code = lib.itsme_derive_code(SEED, 32, 1, CONTACT_KEY, 32, first, OTHER_KEY, 32, second, CONTACT_KEY, 32, text, 13, byref(n))
        assert code == R.ITSME_E_INVALID_ARGUMENT, (first, second)
    assert lib.itsme_derive_device_tag(SEED, 32, 1, CONTACT_KEY, 32, None, 16, byref(tag)) == R.ITSME_E_INVALID_ARGUMENT
    assert lib.itsme_derive_device_tag(SEED, 32, 1, CONTACT_KEY, 32, secret, 65, byref(tag)) == R.ITSME_E_INVALID_ARGUMENT
    assert (bytes(text), n.value, tag.value) == (bytes([FILL]) * 13, 0x5EED, 7)
    ok(lib.itsme_derive_device_tag(SEED, 32, 1, CONTACT_KEY, 32, secret, 64, byref(tag)))
    assert tag.value < 100
    assert read(lib.itsme_last_error) != b"\0"


# -- the degradation code, Online Verify, PIN Update --------------------------


def test_a_degradation_code_too_large_for_the_buffer_draws_nothing(raw):
    def code(rng, cap):
        buf, n = text_buf(64), size_out()
        result = lib.itsme_store_degradation_code(raw.contacts, raw.contact_id, rng, buf, cap, byref(n))
        return result, buf.raw[: n.value], n.value

    refused = new_random(raw, first=40)
    for cap in (0, 1, 29):
        result, _, needed = code(refused, cap)
        assert (result, needed) == (R.ITSME_E_BUFFER_TOO_SMALL, itsme.DEGRADATION_CODE_SIZE)
    assert code(None, 0)[0] == R.ITSME_E_BUFFER_TOO_SMALL
    # The source the refused calls were given drew nothing: it gives the
    # code a fresh source with the same seed gives.
    result, after_refusals, length = code(refused, 30)
    assert (result, length) == (R.ITSME_OK, 30)
    ok(code(new_random(raw, first=40), 30)[0])
    assert code(new_random(raw, first=40), 30)[1] == after_refusals
    assert after_refusals[-1] == 0 and after_refusals.count(b"-") == 5
    # Another contact id: not found, recorded on the store.
    buf, n = text_buf(30), size_out()
    assert lib.itsme_store_degradation_code(raw.contacts, raw.contact_id + 100, None, buf, 30, byref(n)) == R.ITSME_E_NOT_FOUND
    assert (bytes(buf), n.value) == (bytes([FILL]) * 30, 0x5EED)
    assert contacts_detail(raw) != b"\0"


@pytest.mark.parametrize(
    "typed",
    [b"", b"ABCD", b"ABCD-EFGH-IJKL-MNOP-QRST-UVW1", b"ABCD_EFGH_IJKL_MNOP_QRST_UVWX", b"ABCD-EFGH-\xc3(JKL-MNOP-QRST-UVWX"],
)
def test_accept_degradation_code_refuses_junk_uncounted(raw, typed):
    for _ in range(6):
        assert lib.itsme_store_accept_degradation_code(raw.contacts, raw.contact_id, typed, T0) == R.ITSME_E_INVALID_ARGUMENT
    assert contacts_detail(raw) != b"\0"
    # Not counted: the right code is still accepted.
    ok(lib.itsme_store_accept_degradation_code(raw.contacts, raw.contact_id, degradation_code_of_carol(), T0))
    state, acknowledged = c_uint32(), filled_out("itsme_contact_state", 2)
    contact = c_void_p()
    ok(lib.itsme_store_get(raw.contacts, raw.contact_id, byref(contact)))
    ok(lib.itsme_contact_state(contact.value, byref(state), byref(acknowledged)))
    lib.itsme_contact_free(contact.value)
    assert (state.value, acknowledged.value) == (itsme.CONTACT_DEGRADED, 1)


def test_accept_degradation_code_checks_the_time_and_the_contact(raw):
    code = degradation_code_of_carol()
    for now in (-1, MAX_TIME + 1):
        assert lib.itsme_store_accept_degradation_code(raw.contacts, raw.contact_id, code, now) == R.ITSME_E_INVALID_ARGUMENT
    assert lib.itsme_store_accept_degradation_code(raw.contacts, raw.contact_id + 100, code, T0) == R.ITSME_E_NOT_FOUND


def test_derive_degradation_code_checks_its_sizes():
    data = (c_uint8 * 64)(*range(64))
    buf, n = text_buf(30), size_out()
    bad = [(31, 32, 10), (33, 32, 10), (32, 0, 10), (32, 31, 10), (32, 32, 9), (32, 32, 11), (32, 32, 0), (32, 32, 16)]
    for seed_len, pid_len, secret_len in bad:
        result = lib.itsme_derive_degradation_code(data, seed_len, data, pid_len, data, secret_len, buf, 30, byref(n))
        assert result == R.ITSME_E_INVALID_ARGUMENT, (seed_len, pid_len, secret_len)
    assert (bytes(buf), n.value) == (bytes([FILL]) * 30, 0x5EED)
    assert read(lib.itsme_last_error) != b"\0"
    # A fingerprint pid (8 bytes) is a pid.
    ok(lib.itsme_derive_degradation_code(data, 32, data, 8, data, 10, buf, 30, byref(n)))
    assert n.value == 30


def window_session_new(kind):
    """itsme_online_verify_new (not bound to a call) or itsme_pin_update_new,
    as (store, contact_id, window, rng, now, out)."""
    new = getattr(lib, f"itsme_{kind}_new")
    if kind == "online_verify":
        return lambda store, contact_id, window, rng, now, out: new(store, contact_id, window, None, 0, rng, now, out)
    return new


@pytest.mark.parametrize("kind", ["online_verify", "pin_update"])
def test_session_constructors_record_on_the_store(raw, kind):
    new = window_session_new(kind)
    window = T0 // 30
    out = handle_out()
    assert new(raw.contacts, raw.contact_id + 100, window, None, T0, byref(out)) == R.ITSME_E_NOT_FOUND
    assert contacts_detail(raw) != b"\0"
    # Only the current window or the one before.
    for other in (window + 1, window - 2, 0):
        assert new(raw.contacts, raw.contact_id, other, None, T0, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    for now in (-1, MAX_TIME + 1):
        assert new(raw.contacts, raw.contact_id, now // 30, None, now, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert out.value == 0xDEADBEEF


@pytest.mark.parametrize("kind", ["online_verify", "pin_update"])
def test_the_previous_window_is_allowed(raw, kind):
    new, free = window_session_new(kind), getattr(lib, f"itsme_{kind}_free")
    out = c_void_p()
    ok(new(raw.contacts, raw.contact_id, T0 // 30 - 1, None, T0, byref(out)))
    free(out.value)


def test_online_verify_messages_are_not_consumed_by_a_too_small_buffer(raw):
    mine, theirs = online_pair(raw)
    # The lower pid initiates: it has the COMMIT to send.
    initiator = mine if public_key(raw.identity) < public_key(raw.bare_identity) else theirs
    n = size_out()
    assert lib.itsme_online_verify_next_outgoing(initiator, None, 0, byref(n)) == R.ITSME_E_BUFFER_TOO_SMALL
    assert n.value == 34, "a COMMIT is 34 bytes"
    buf, n = byte_buf(64), size_out()
    assert lib.itsme_online_verify_next_outgoing(initiator, buf, 33, byref(n)) == R.ITSME_E_BUFFER_TOO_SMALL
    assert (n.value, bytes(buf)) == (34, bytes([FILL]) * 64)
    commit = online_outgoing(initiator)
    assert len(commit) == 34 and commit[:2] == b"\x01\x01"
    n = size_out()
    ok(lib.itsme_online_verify_next_outgoing(initiator, None, 0, byref(n)))
    assert n.value == 0, "nothing left to send"
    assert lib.itsme_online_verify_next_outgoing(initiator, None, 8, byref(n)) == R.ITSME_E_INVALID_ARGUMENT


def test_pin_update_frames_are_not_consumed_by_a_too_small_buffer(raw):
    update = new_pin_update(raw)
    n = size_out()
    assert lib.itsme_pin_update_next_outgoing(update, None, 0, byref(n)) == R.ITSME_E_BUFFER_TOO_SMALL
    assert n.value == 34, "a KEY frame is 34 bytes"
    buf, n = byte_buf(64), size_out()
    assert lib.itsme_pin_update_next_outgoing(update, buf, 33, byref(n)) == R.ITSME_E_BUFFER_TOO_SMALL
    assert (n.value, bytes(buf)) == (34, bytes([FILL]) * 64)
    key = pin_update_outgoing(update)
    assert len(key) == 34 and key[:2] == b"\x01\x01"
    assert pin_update_outgoing(update) == b""


def test_online_verify_confirm_writes_to_its_own_store(raw):
    session = online_comparing(raw)
    outcome = c_uint32(0xAAAA)
    assert lib.itsme_online_verify_confirm(session, T0, None) == R.ITSME_E_INVALID_ARGUMENT
    assert (online_state(session), outcome.value) == (itsme.ONLINE_VERIFY_COMPARE_SAS, 0xAAAA)
    ok(lib.itsme_online_verify_confirm(session, T0, byref(outcome)))
    assert outcome.value == itsme.VOICE_VERIFIED_TAG_UNCHECKED, "contacts added without device secrets"
    assert online_state(session) == itsme.ONLINE_VERIFY_CONFIRMED


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


# -- profile records and contact photos ---------------------------------------


def profile_state(session):
    """The result of itsme_online_verify_peer_profile on a session."""
    buf, n = byte_buf(32), size_out()
    return lib.itsme_online_verify_peer_profile(session, buf, 32, byref(n))


@pytest.mark.parametrize("length", [0, 16, 31, 33, 64])
def test_share_profile_needs_a_32_byte_reference(raw, length):
    session = new_online_verify(raw)
    reference = (c_uint8 * 64)(*range(64))
    assert lib.itsme_online_verify_share_profile(session, reference, length) == R.ITSME_E_INVALID_ARGUMENT
    assert online_state(session) == itsme.ONLINE_VERIFY_RUNNING


def test_share_profile_only_before_the_proof(raw):
    mine, theirs = online_pair(raw)
    ok(lib.itsme_online_verify_share_profile(mine, REFERENCE, 32))
    ok(lib.itsme_online_verify_share_profile(mine, REFERENCE, 32))  # calling again replaces it
    online_pump(mine, theirs)
    for session in (mine, theirs):
        assert lib.itsme_online_verify_share_profile(session, REFERENCE, 32) == R.ITSME_E_INVALID_STATE
        assert online_state(session) == itsme.ONLINE_VERIFY_COMPARE_SAS, "refused without failing"
        # Not before the SAS is confirmed, even though the PROOF is in.
        assert profile_state(session) == R.ITSME_E_INVALID_STATE
    outcome = c_uint32()
    for session in (mine, theirs):
        ok(lib.itsme_online_verify_confirm(session, T0, byref(outcome)))
    buf, n = byte_buf(40), size_out()
    ok(lib.itsme_online_verify_peer_profile(theirs, buf, 40, byref(n)))
    assert bytes(buf)[: n.value] == bytes(REFERENCE)
    assert profile_state(mine) == R.ITSME_E_NOT_FOUND, "the peer sent none"


def test_peer_profile_of_a_rejected_session_is_invalid_state(raw):
    mine, theirs = online_pair(raw)
    ok(lib.itsme_online_verify_share_profile(theirs, REFERENCE, 32))
    online_pump(mine, theirs)
    ok(lib.itsme_online_verify_reject(mine))
    assert profile_state(mine) == R.ITSME_E_INVALID_STATE


@pytest.mark.parametrize(
    "name, photo_len, filename",
    [
        (None, 0, None),  # neither a name nor a photo
        (b"", 0, b""),
        (b"Raw", 0, b"raw.jpg"),  # a filename needs a photo
        (b"\x01Raw", 0, None),  # a control character
        (b"R" * 129, 0, None),  # a name too long
        (b"Raw", 16, b"a/b.jpg"),  # a path
        (b"Raw", 16, b".."),
        (b"Raw", 16, b"f" * 256),  # a filename too long
        (b"\xffRaw", 0, None),  # not UTF-8
    ],
)
def test_profile_create_refuses_bad_values(raw, name, photo_len, filename):
    out = handle_out()
    photo = PHOTO if photo_len else None
    assert lib.itsme_profile_create(raw.identity, name, photo, photo_len, filename, None, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert out.value == 0xDEADBEEF
    assert read(lib.itsme_last_error) != b"\0"


def test_profile_create_needs_the_record_to_fit(raw):
    largest = itsme.PROFILE_RECORD_MAX - itsme.PROFILE_RECORD_OVERHEAD - len(b"Raw")
    photo, out = (c_uint8 * (largest + 1))(), c_void_p()
    assert lib.itsme_profile_create(raw.identity, b"Raw", photo, largest + 1, None, None, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    ok(lib.itsme_profile_create(raw.identity, b"Raw", photo, largest, None, None, byref(out)))
    raw.profiles.append(out.value)
    n = size_out()
    assert lib.itsme_profile_record(out.value, None, 0, byref(n)) == R.ITSME_E_BUFFER_TOO_SMALL
    assert n.value == itsme.PROFILE_RECORD_MAX


@pytest.mark.parametrize("which, length", [("reference", 31), ("reference", 33), ("key", 31), ("key", 33), ("key", 0)])
def test_profile_open_checks_sizes(raw, which, length):
    profile = new_profile(raw)
    record = profile_bytes(lib.itsme_profile_record, profile)
    reference = profile_bytes(lib.itsme_profile_reference, profile) + b"\0"
    owner = public_key(raw.identity) + b"\0"
    sizes = {"reference": 32, "key": 32, which: length}
    out = handle_out()
    code = lib.itsme_profile_open(
        as_array(record), len(record), as_array(reference), sizes["reference"], as_array(owner), sizes["key"], byref(out)
    )
    assert code == R.ITSME_E_INVALID_ARGUMENT
    assert out.value == 0xDEADBEEF


def test_profile_open_refuses_a_record_of_nothing(raw):
    out = handle_out()
    owner = as_array(public_key(raw.identity))
    for record, length in ((None, 0), (as_array(b"\x01"), 1), (as_array(b""), 0)):
        assert lib.itsme_profile_open(record, length, REFERENCE, 32, owner, 32, byref(out)) in (
            R.ITSME_E_INVALID_ARGUMENT,
            R.ITSME_E_MALFORMED_MESSAGE,
        )
        assert out.value == 0xDEADBEEF


def test_store_photo_of_a_contact_without_one(raw):
    buf, text, n = byte_buf(64), text_buf(64), size_out()
    assert lib.itsme_store_photo(raw.contacts, raw.contact_id, buf, 64, byref(n)) == R.ITSME_E_NOT_FOUND
    assert lib.itsme_store_photo_filename(raw.contacts, raw.contact_id, text, 64, byref(n)) == R.ITSME_E_NOT_FOUND
    assert lib.itsme_store_photo(raw.contacts, raw.contact_id + 100, buf, 64, byref(n)) == R.ITSME_E_NOT_FOUND
    assert (bytes(buf), bytes(text), n.value) == (bytes([FILL]) * 64, bytes([FILL]) * 64, 0x5EED)
    assert lib.itsme_store_set_photo(raw.contacts, raw.contact_id + 100, PHOTO, 16, None) == R.ITSME_E_NOT_FOUND
    assert lib.itsme_store_apply_profile(raw.contacts, raw.contact_id + 100, new_profile(raw)) == R.ITSME_E_NOT_FOUND


def test_store_set_photo_checks_its_arguments(raw):
    too_big = (c_uint8 * (itsme.PHOTO_MAX_BYTES + 1))()
    assert lib.itsme_store_set_photo(raw.contacts, raw.contact_id, too_big, itsme.PHOTO_MAX_BYTES + 1, None) == R.ITSME_E_INVALID_ARGUMENT
    assert lib.itsme_store_set_photo(raw.contacts, raw.contact_id, PHOTO, 16, b"f" * 256) == R.ITSME_E_INVALID_ARGUMENT
    assert lib.itsme_store_set_photo(raw.contacts, raw.contact_id, PHOTO, 16, b"\xff") == R.ITSME_E_INVALID_ARGUMENT
    assert lib.itsme_store_set_photo(raw.contacts, raw.contact_id, None, 16, None) == R.ITSME_E_INVALID_ARGUMENT
    buf, n = byte_buf(64), size_out()
    assert lib.itsme_store_photo(raw.contacts, raw.contact_id, buf, 64, byref(n)) == R.ITSME_E_NOT_FOUND, "nothing set"
    ok(lib.itsme_store_set_photo(raw.contacts, raw.contact_id, too_big, itsme.PHOTO_MAX_BYTES, None))
    n = size_out()
    assert lib.itsme_store_photo(raw.contacts, raw.contact_id, None, 0, byref(n)) == R.ITSME_E_BUFFER_TOO_SMALL
    assert n.value == itsme.PHOTO_MAX_BYTES
    # An empty photo and filename remove it.
    ok(lib.itsme_store_set_photo(raw.contacts, raw.contact_id, None, 0, None))
    assert lib.itsme_store_photo(raw.contacts, raw.contact_id, buf, 64, byref(n)) == R.ITSME_E_NOT_FOUND


# -- service approvals ---------------------------------------------------------


def test_enroll_with_too_small_a_buffer_saves_nothing(raw):
    buf, n = byte_buf(itsme.ENROLLMENT_MAX), size_out()
    needed = 98 + len(b"Raw phone")
    code = lib.itsme_credential_enroll(raw.empty_store, SERVICE, b"Raw phone", NONCE, 16, None, buf, needed - 1, byref(n))
    assert code == R.ITSME_E_BUFFER_TOO_SMALL
    assert n.value == needed
    assert bytes(buf) == bytes([FILL]) * itsme.ENROLLMENT_MAX
    assert lib.itsme_credential_id(raw.empty_store, SERVICE, buf, 16, byref(n)) == R.ITSME_E_NOT_FOUND
    assert len(enroll_raw(raw.empty_store)) == needed
    ok(lib.itsme_credential_id(raw.empty_store, SERVICE, buf, 16, byref(n)))


@pytest.mark.parametrize("decision", [0, 3, 2**32 - 1])
def test_approval_sign_refuses_an_unknown_decision(raw, decision):
    enroll_raw(raw.store)
    request, buf, n = request_raw(), byte_buf(itsme.APPROVAL_MAX), size_out()
    code = lib.itsme_approval_sign(raw.store, as_array(request), len(request), decision, None, APPROVAL_NOW, buf, itsme.APPROVAL_MAX, byref(n))
    assert code == R.ITSME_E_INVALID_ARGUMENT
    assert bytes(buf) == bytes([FILL]) * itsme.APPROVAL_MAX


def test_replay_callback_table_needs_insert():
    destroyed.clear()
    table, out = raw_replay_table(insert=ReplayInsertCallback()), handle_out()
    assert lib.itsme_replay_store_new_callbacks(byref(table), byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert out.value == 0xDEADBEEF
    assert destroyed == []


def test_replay_callback_destroy_is_optional_and_called_once():
    destroyed.clear()
    table, out = raw_replay_table(destroy=ReplayDestroyCallback()), c_void_p()
    ok(lib.itsme_replay_store_new_callbacks(byref(table), byref(out)))
    lib.itsme_replay_store_free(out.value)
    assert destroyed == []
    table = raw_replay_table()
    ok(lib.itsme_replay_store_new_callbacks(byref(table), byref(out)))
    lib.itsme_replay_store_free(out.value)
    assert destroyed == [RAW_CTX]


@pytest.mark.parametrize("code", [R.ITSME_E_DATABASE, R.ITSME_E_SECRET_STORE, 42])
def test_replay_callback_failure_refuses_the_approval_with_its_code(raw, code):
    calls = []

    def insert(ctx, key, expires_at, now, out_seen):
        calls.append((ctx, ctypes.string_at(key, 32), expires_at, now))
        return code

    callback = ReplayInsertCallback(insert)
    table, store = raw_replay_table(insert=callback, destroy=ReplayDestroyCallback()), c_void_p()
    ok(lib.itsme_replay_store_new_callbacks(byref(table), byref(store)))
    try:
        enrollment = enroll_raw(raw.store)
        request = request_raw()
        approval = approval_raw(raw.store, request)
        result = filled_struct(ApprovalResultStruct)
        before = bytes(result)
        got = lib.itsme_approval_verify(
            as_array(request), len(request), as_array(approval), len(approval), as_array(enrollment[1:33]), 1,
            store.value, APPROVAL_NOW, byref(result),
        )
        if code in itsme.RESULT_CODES.values():
            assert got == code
        else:  # a code this library does not know comes back as one it does
            assert got != R.ITSME_OK and got in itsme.RESULT_CODES.values() and got != R.ITSME_E_REPLAYED
        assert bytes(result) == before, "no result on failure"
        assert len(calls) == 1 and calls[0][0] == RAW_CTX and calls[0][2:] == (APPROVAL_NOW + 300, APPROVAL_NOW)
    finally:
        lib.itsme_replay_store_free(store.value)


def test_approval_verify_with_no_keys_is_not_found(raw):
    enroll_raw(raw.store)
    request = request_raw()
    approval = approval_raw(raw.store, request)
    result = filled_struct(ApprovalResultStruct)
    code = lib.itsme_approval_verify(
        as_array(request), len(request), as_array(approval), len(approval), as_array(b"\0"), 0, new_replay(raw),
        APPROVAL_NOW, byref(result),
    )
    assert code == R.ITSME_E_NOT_FOUND


# -- extreme times in voice sessions -------------------------------------------

_VOICE_EXTREME = textwrap.dedent(
    """
    import ctypes, sys
    import itsme
    from itsme._ffi import lib
    secrets = itsme.SecretStore.memory()
    identity = itsme.Identity.create(secrets, "Extreme")
    contacts = itsme.ContactStore.open(identity, sys.argv[1])
    contact_id = contacts.add("Carol", bytes([0x42]) * 32, bytes([7]) * 32, now=1_700_000_000)
    case = sys.argv[2]
    out = ctypes.c_void_p()
    with contacts._use() as store:
        if case == "plan at INT64_MAX":
            code = lib.itsme_voice_new(store, contact_id, None, 0, 2**63 - 1, ctypes.byref(out))
        elif case == "last window near INT64_MAX":
            try:  # the store refuses a window past the year 9999
                contacts.use_window(contact_id, 2**63 // 30)
                raise SystemExit("use_window accepted a window past the year 9999")
            except itsme.InvalidArgumentError:
                pass
            contacts.use_window(contact_id, 253402300799 // 30 - 1)
            code = lib.itsme_voice_new(store, contact_id, None, 0, 1_700_000_000, ctypes.byref(out))
        else:  # "timing at INT64_MIN"
            assert lib.itsme_voice_new(store, contact_id, None, 0, 1_700_000_000, ctypes.byref(out)) == 0
            outputs = [ctypes.byref(ctypes.c_int64()) for _ in range(3)]
            code = lib.itsme_voice_timing(out.value, -(2**63), *outputs)
    print("result", code)
    """
)


@pytest.mark.parametrize(
    "case, expected",
    [("plan at INT64_MAX", 1), ("last window near INT64_MAX", 0), ("timing at INT64_MIN", 1)],
)
def test_voice_extreme_times_give_a_result_not_a_crash(tmp_path, case, expected):
    # Run apart: a trap would end the test process.
    result = subprocess.run(
        [sys.executable, "-c", _VOICE_EXTREME, str(tmp_path / "contacts.db"), case],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(itsme.__file__))),
    )
    assert result.returncode == 0, f"{case}: exit status {result.returncode}\n{result.stderr}"
    assert result.stdout.strip() == f"result {expected}", result.stdout
