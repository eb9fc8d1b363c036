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
    ApprovalRequestInfoStruct,
    ApprovalResultStruct,
    CredentialInfoStruct,
    DestroyCallback,
    GetCallback,
    ImportReportStruct,
    StoreLossStruct,
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
    """A QR (or Bluetooth) exchange on a raw identity, freed with the fixture."""
    out = c_void_p()
    if bluetooth:
        ok(lib.itsme_exchange_new_bluetooth(identity, session_code, None, T0, byref(out)))
    else:
        ok(lib.itsme_exchange_new_qr(identity, None, T0, byref(out)))
    env.exchanges.append(out.value)
    return out.value


def new_invite(env):
    """An inviter's exchange at a distance on the raw identity, freed with the fixture."""
    out = c_void_p()
    ok(lib.itsme_exchange_new_invite(env.identity, 0, None, T0, byref(out)))
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


def deciding(env):
    """A Bluetooth exchange of env.identity with env.bare_identity that
    confirmed and holds the peer's confirmation: ready to settle."""
    mine = new_exchange(env, env.identity, bluetooth=True)
    code = text_buf(16)
    n = size_out()
    ok(lib.itsme_exchange_session_code(mine, code, 16, byref(n)))
    theirs = new_exchange(env, env.bare_identity, session_code=code.value, bluetooth=True)
    moved = True
    while moved:
        moved = False
        for sender, receiver in ((mine, theirs), (theirs, mine)):
            data = outgoing(sender)
            if data:
                ok(receive(receiver, data))
                moved = True
    contact_id = c_int64()
    ok(lib.itsme_exchange_confirm(mine, env.contacts, T0, byref(contact_id)))
    peer_store = c_void_p()
    ok(lib.itsme_store_open(env.bare_identity, str(env.tmp_path / "deciding-peer.db").encode(), byref(peer_store)))
    try:
        ok(lib.itsme_exchange_confirm(theirs, peer_store, T0, byref(contact_id)))
    finally:
        lib.itsme_store_free(peer_store)
    ok(receive(mine, outgoing(theirs)))
    assert exchange_state(mine) == itsme.EXCHANGE_AWAITING_DECISION
    return mine


def _exchange_settle(env):
    out = c_int64(-5)
    return [deciding(env), env.contacts, T0, byref(out)], [out]


def exchange_state(exchange):
    state = c_uint32()
    ok(lib.itsme_exchange_status(exchange, byref(state), None))
    return state.value


def new_voice(env, now=T0):
    """A voice session with env's contact Carol, planned at ``now``; freed with the fixture."""
    out = c_void_p()
    ok(lib.itsme_voice_new(env.contacts, env.contact_id, now, byref(out)))
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
    ok(lib.itsme_voice_words(voice, out, 5))
    return list(out)


def carol_words(window):
    """Carol's five words: her pid is CONTACT_KEY, the seed is SEED."""
    out = (c_uint8 * 5)()
    ok(lib.itsme_derive_words(SEED, 32, window, CONTACT_KEY, 32, out, 5))
    return list(out)


def started_voice(env):
    """A voice session with Carol, started at its window."""
    voice = new_voice(env)
    ok(lib.itsme_voice_start(voice, env.contacts, 30 * voice_window(voice)))
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


def peer_contacts(env):
    """env.identity and env.bare_identity as each other's contacts, with
    SEED: (the id in env.contacts, the id in env.bare_contacts)."""
    if env.peer is None:
        mine, theirs = (public_key(identity) for identity in (env.identity, env.bare_identity))
        out = c_void_p()
        ok(lib.itsme_store_open(env.bare_identity, str(env.tmp_path / "bare-contacts.db").encode(), byref(out)))
        env.bare_contacts = out.value
        mine_id, theirs_id = c_int64(), c_int64()
        ok(lib.itsme_store_add(env.contacts, b"Bare", as_array(theirs), 32, SEED, 32, 0, T0, byref(mine_id)))
        ok(lib.itsme_store_add(env.bare_contacts, b"Raw", as_array(mine), 32, SEED, 32, 0, T0, byref(theirs_id)))
        env.peer = (mine_id.value, theirs_id.value)
    return env.peer


def new_online_verify(env, store=None, contact_id=None, now=T0):
    """An Online Verify session (default: with Carol), freed with the fixture."""
    out = c_void_p()
    store, contact_id = (env.contacts, env.contact_id) if store is None else (store, contact_id)
    ok(lib.itsme_online_verify_new(store, contact_id, now // 30, None, now, byref(out)))
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


def online_first_message(env):
    """(a session, a valid first message from its peer: the COMMIT)."""
    mine, theirs = online_pair(env)
    commit = online_outgoing(mine)
    return (theirs, commit) if commit else (mine, online_outgoing(theirs))


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


def pin_update_state(update):
    state = c_uint32()
    ok(lib.itsme_pin_update_status(update, byref(state)))
    return state.value


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


def _store_accept_loss(env):
    loss = StoreLossStruct()
    ctypes.memset(byref(loss), FILL, ctypes.sizeof(loss))
    return [env.identity, str(env.tmp_path / "accepted.db").encode(), byref(loss)], [loss]


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


def _store_expire_awaiting(env):
    out = c_uint64(0xAAAA)
    return [env.contacts, T0, byref(out)], [out]


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


def _random_new_deterministic(env):
    seed, out = (c_uint8 * 32)(*range(32)), handle_out()
    return [seed, 32, byref(out)], [out]


def _identity_create_with_random(env):
    out = handle_out()
    return [env.empty_store, b"Drawn", new_random(env), byref(out)], [out]


def _short_code_parse(env):
    out = c_uint32(0xAAAA)
    return [b"echo-0042", byref(out)], [out]


def _short_code_format(env):
    buf, n = text_buf(14), size_out()
    return [40042, buf, 14, byref(n)], [buf, n]


def _exchange_new_qr(env):
    out = handle_out()
    return [env.identity, new_random(env), T0, byref(out)], [out]


def _exchange_new_bluetooth(env):
    out = handle_out()
    return [env.identity, b"ECHO 0042", new_random(env), T0, byref(out)], [out]


def _remote_code_check(env):
    buf, n = text_buf(10), size_out()
    return [b"k7x2 m9pm", buf, 10, byref(n)], [buf, n]


def _exchange_new_invite(env):
    out = handle_out()
    return [env.identity, 0, new_random(env), T0, byref(out)], [out]


def _exchange_accept_invite(env):
    out = handle_out()
    return [env.bare_identity, b"K7X2-M9PM", b"5EXZ-9NQ2", 1, new_random(env), T0, byref(out)], [out]


def _exchange_is_inviter(env):
    inviter = ctypes.c_int(0xAAAA)
    return [new_invite(env), byref(inviter)], [inviter]


def _exchange_text(function_needs):
    """A (buf, cap, out_len) getter on an exchange made by function_needs(env)."""

    def case(env):
        buf, n = text_buf(256), size_out()
        return [function_needs(env), buf, 256, byref(n)], [buf, n]

    return case


def _exchange_status(env):
    state, flags = c_uint32(0xAAAA), c_uint32(0xAAAA)
    return [new_exchange(env, env.identity), byref(state), byref(flags)], [state, flags]


def _exchange_get_method(env):
    method = c_uint32(0xAAAA)
    return [new_exchange(env, env.identity), byref(method)], [method]


def _exchange_next_outgoing(env):
    buf, n = byte_buf(512), size_out()
    return [new_exchange(env, env.identity), buf, 512, byref(n)], [buf, n]


def _exchange_receive(env):
    payload = outgoing(new_exchange(env, env.bare_identity))
    return [new_exchange(env, env.identity), as_array(payload), len(payload), T0], []


def _exchange_peer_public_key(env):
    buf, n = byte_buf(32), size_out()
    return [comparing(env), buf, 32, byref(n)], [buf, n]


def _exchange_save(env):
    out = c_int64(-5)
    return [comparing(env), env.contacts, T0, byref(out)], [out]


def _exchange_reject(env):
    exchange, contact_id = comparing(env), c_int64()
    ok(lib.itsme_exchange_save(exchange, env.contacts, T0, byref(contact_id)))
    # Saved: the store is required to delete the contact again.
    return [exchange, env.contacts], []


def _exchange_seal(env):
    buf, n = byte_buf(1024), size_out()
    return [new_exchange(env, env.identity), buf, 1024, byref(n)], [buf, n]


def _exchange_restore(env):
    buf, n = byte_buf(1024), size_out()
    ok(lib.itsme_exchange_seal(new_exchange(env, env.identity), buf, 1024, byref(n)))
    sealed, out = as_array(bytes(buf)[: n.value]), handle_out()
    return [env.identity, sealed, n.value, T0 + 60, byref(out)], [out]


def _derive_seed(env):
    buf, n = byte_buf(32), size_out()
    return [EPHEMERAL_SECRET, 32, BASE_POINT, 32, FP_A, FP_B, buf, 32, byref(n)], [buf, n]


def _derive_sas(env):
    buf, n = text_buf(14), size_out()
    return [HASH, 32, HASH, 32, buf, 14, byref(n)], [buf, n]


def _qr_transcript_hash(env):
    a = outgoing(new_exchange(env, env.identity))
    b = outgoing(new_exchange(env, env.bare_identity))
    buf, n = byte_buf(32), size_out()
    return [as_array(a), len(a), as_array(b), len(b), buf, 32, byref(n)], [buf, n]


def _bluetooth_commitment(env):
    buf, n = byte_buf(32), size_out()
    return [CONTACT_KEY, 32, BASE_POINT, 32, b"Carol", DEVICE_SECRET, 16, buf, 32, byref(n)], [buf, n]


def _bluetooth_th1(env):
    buf, n = byte_buf(32), size_out()
    return [b"ECHO 0042", HELLO, 42, HELLO, 42, KEY_FRAME, 34, KEY_FRAME, 34, buf, 32, byref(n)], [buf, n]


def _bluetooth_session_keys(env):
    buf, n = byte_buf(64), size_out()
    return [EPHEMERAL_SECRET, 32, BASE_POINT, 32, HASH, 32, buf, 64, byref(n)], [buf, n]


def _bluetooth_transcript_hash(env):
    buf, n = byte_buf(32), size_out()
    return [HASH, 32, PLAINTEXT, 120, PLAINTEXT, 114, buf, 32, byref(n)], [buf, n]


def _voice_new(env):
    out = handle_out()
    return [env.contacts, env.contact_id, T0, byref(out)], [out]


def _voice_text(make):
    """A (buf, cap, out_len) getter on a voice session made by make(env)."""

    def case(env):
        buf, n = text_buf(256), size_out()
        return [make(env), buf, 256, byref(n)], [buf, n]

    return case


def _voice_status(env):
    state, turn = c_uint32(0xAAAA), c_uint32(0xAAAA)
    return [new_voice(env), byref(state), byref(turn)], [state, turn]


def _voice_timing(env):
    window, starts_in, ends_in = c_int64(-5), c_int64(-5), c_int64(-5)
    return [new_voice(env), T0, byref(window), byref(starts_in), byref(ends_in)], [window, starts_in, ends_in]


def _voice_start(env):
    voice = new_voice(env)
    return [voice, env.contacts, 30 * voice_window(voice)], []


def _voice_words(env):
    out = byte_buf(5)
    return [new_voice(env), out, 5], [out]


def _voice_select(env):
    voice = started_voice(env)
    return [voice, next_word(voice), 30 * voice_window(voice)], []


def _voice_code(env):
    buf, n, tag = text_buf(13), size_out(), c_uint32(0xAAAA)
    return [comparing_voice(env), buf, 13, byref(n), byref(tag)], [buf, n, tag]


def _voice_check(env):
    voice = comparing_voice(env)
    outcome = c_uint32(0xAAAA)
    return [voice, env.contacts, b"ECHO 512", 47, 30 * voice_window(voice), byref(outcome)], [outcome]


VOICE_WINDOW = T0 // 30


def _derive_session_id(env):
    buf, n = text_buf(12), size_out()
    return [SEED, 32, VOICE_WINDOW, buf, 12, byref(n)], [buf, n]


def _derive_words(env):
    out = byte_buf(5)
    return [SEED, 32, VOICE_WINDOW, CONTACT_KEY, 32, out, 5], [out]


def _derive_lower_selects_first(env):
    out = c_int(-5)
    return [SEED, 32, VOICE_WINDOW, byref(out)], [out]


def _derive_code(env):
    buf, n = text_buf(13), size_out()
    pids = [CONTACT_KEY, 32, 1, OTHER_KEY, 32, 2, CONTACT_KEY, 32]
    return [SEED, 32, VOICE_WINDOW, *pids, buf, 13, byref(n)], [buf, n]


def _derive_device_tag(env):
    # An empty secret, so that the case also shows it may then be NULL.
    tag = c_uint32(0xAAAA)
    return [SEED, 32, VOICE_WINDOW, CONTACT_KEY, 32, DEVICE_SECRET, 0, byref(tag)], [tag]


def _derive_voice(env):
    # Empty secrets, so that the case also shows they may then be NULL.
    out = VoiceDerivationStruct.from_buffer_copy(bytes([FILL]) * ctypes.sizeof(VoiceDerivationStruct))
    pids = [CONTACT_KEY, 32, OTHER_KEY, 32]
    return [SEED, 32, VOICE_WINDOW, *pids, DEVICE_SECRET, 0, DEVICE_SECRET, 0, 1, 2, byref(out)], [out]


DEGRADATION_SECRET = (c_uint8 * 10)(*range(10))


def degradation_code_of_carol():
    """The degradation code Carol (pid CONTACT_KEY, seed SEED) would send."""
    buf, n = text_buf(30), size_out()
    ok(lib.itsme_derive_degradation_code(SEED, 32, CONTACT_KEY, 32, DEGRADATION_SECRET, 10, buf, 30, byref(n)))
    return buf.raw[: n.value - 1]


def _store_degradation_code(env):
    buf, n = text_buf(30), size_out()
    return [env.contacts, env.contact_id, new_random(env), buf, 30, byref(n)], [buf, n]


def _store_accept_degradation_code(env):
    return [env.contacts, env.contact_id, degradation_code_of_carol(), T0], []


def _derive_degradation_code(env):
    buf, n = text_buf(30), size_out()
    return [SEED, 32, CONTACT_KEY, 32, DEGRADATION_SECRET, 10, buf, 30, byref(n)], [buf, n]


def _online_verify_new(env):
    out = handle_out()
    return [env.contacts, env.contact_id, T0 // 30, new_random(env), T0, byref(out)], [out]


def _session_text(make, function_size=256):
    """A (buf, cap, out_len) getter on a session or update made by make(env)."""

    def case(env):
        buf, n = text_buf(function_size), size_out()
        return [make(env), buf, function_size, byref(n)], [buf, n]

    return case


def _online_verify_status(env):
    state = c_uint32(0xAAAA)
    return [new_online_verify(env), byref(state)], [state]


def _online_verify_next_outgoing(env):
    buf, n = byte_buf(128), size_out()
    return [new_online_verify(env), buf, 128, byref(n)], [buf, n]


def _online_verify_receive(env):
    session, message = online_first_message(env)
    return [session, as_array(message), len(message), T0], []


def _online_verify_confirm(env):
    outcome = c_uint32(0xAAAA)
    return [online_comparing(env), env.contacts, T0, byref(outcome)], [outcome]


def _online_verify_reject(env):
    return [new_online_verify(env)], []


def _pin_update_new(env):
    out = handle_out()
    return [env.contacts, env.contact_id, T0 // 30, new_random(env), T0, byref(out)], [out]


def _pin_update_status(env):
    state = c_uint32(0xAAAA)
    return [new_pin_update(env), byref(state)], [state]


def _pin_update_next_outgoing(env):
    buf, n = byte_buf(128), size_out()
    return [new_pin_update(env), buf, 128, byref(n)], [buf, n]


def _pin_update_receive(env):
    mine_id, theirs_id = peer_contacts(env)
    mine, theirs = new_pin_update(env, env.contacts, mine_id), new_pin_update(env, env.bare_contacts, theirs_id)
    key = pin_update_outgoing(theirs)
    return [mine, as_array(key), len(key), T0], []


# Device transfer: exports, imports, live transfers.
EXPORT_PASSWORD = b"ABCD-EFGH-JKMNP"
_export = []


def an_export():
    """One export of a throwaway identity, made once (Argon2id, 256 MiB)."""
    if not _export:
        store = new_memory_store()
        identity = new_identity(store)
        ok(lib.itsme_pin_set(identity, PIN))
        buf, n = byte_buf(itsme.EXPORT_MAX), size_out()
        generated = int(itsme.EXPORT_PASSWORD_GENERATED)
        ok(lib.itsme_identity_export(identity, PIN, T0, EXPORT_PASSWORD, generated, None, buf, itsme.EXPORT_MAX, byref(n)))
        _export.append(bytes(buf)[: n.value])
        lib.itsme_identity_free(identity)
        lib.itsme_secret_store_free(store)
    return _export[0]


def new_receiver(env):
    """The new device's side of a live transfer, freed with the fixture."""
    out = c_void_p()
    ok(lib.itsme_transfer_new_receiver(None, T0, byref(out)))
    env.transfers.append(out.value)
    return out.value


def new_sender(env, receiver):
    """The old device's side (env.identity), answering receiver's offer."""
    offer, n, out = text_buf(itsme.TRANSFER_OFFER_SIZE), size_out(), c_void_p()
    ok(lib.itsme_transfer_offer(receiver, offer, itsme.TRANSFER_OFFER_SIZE, byref(n)))
    ok(lib.itsme_transfer_new_sender(env.identity, PIN, offer.value, None, T0, byref(out)))
    env.transfers.append(out.value)
    return out.value


def transfer_outgoing(transfer):
    buf, n = byte_buf(itsme.TRANSFER_MESSAGE_MAX), size_out()
    ok(lib.itsme_transfer_next_outgoing(transfer, buf, itsme.TRANSFER_MESSAGE_MAX, byref(n)))
    return bytes(buf)[: n.value]


def transfer_comparing(env):
    """A receiver and a sender, both showing the SAS."""
    receiver = new_receiver(env)
    sender = new_sender(env, receiver)
    key = transfer_outgoing(sender)
    ok(lib.itsme_transfer_receive(receiver, as_array(key), len(key), T0))
    return receiver, sender


def transfer_done(env):
    """A receiver holding the identity, ready to take."""
    receiver, sender = transfer_comparing(env)
    ok(lib.itsme_transfer_confirm(sender, T0))
    ok(lib.itsme_transfer_confirm(receiver, T0))
    identity = transfer_outgoing(sender)
    ok(lib.itsme_transfer_receive(receiver, as_array(identity), len(identity), T0))
    return receiver


def new_import(env):
    """An import taken from a live transfer (no Argon2id), freed with the fixture."""
    out = c_void_p()
    ok(lib.itsme_transfer_take_import(transfer_done(env), byref(out)))
    env.imports.append(out.value)
    return out.value


def _export_generate_password(env):
    buf, n = text_buf(itsme.EXPORT_PASSWORD_SIZE), size_out()
    return [new_random(env), buf, itsme.EXPORT_PASSWORD_SIZE, byref(n)], [buf, n]


def _identity_export(env):
    buf, n = byte_buf(itsme.EXPORT_MAX), size_out()
    generated = int(itsme.EXPORT_PASSWORD_GENERATED)
    return [env.identity, PIN, T0, EXPORT_PASSWORD, generated, new_random(env), buf, itsme.EXPORT_MAX, byref(n)], [buf, n]


def _export_to_text(env):
    blob, buf, n = an_export(), text_buf(itsme.EXPORT_TEXT_SIZE), size_out()
    return [as_array(blob), len(blob), buf, itsme.EXPORT_TEXT_SIZE, byref(n)], [buf, n]


def _export_from_text(env):
    blob = an_export()
    text, n = text_buf(itsme.EXPORT_TEXT_SIZE), size_out()
    ok(lib.itsme_export_to_text(as_array(blob), len(blob), text, itsme.EXPORT_TEXT_SIZE, byref(n)))
    buf, n = byte_buf(itsme.EXPORT_MAX), size_out()
    return [text.value, buf, itsme.EXPORT_MAX, byref(n)], [buf, n]


def _export_header(env):
    blob, passes, memory, kind = an_export(), c_uint32(FILL), c_uint32(FILL), c_uint32(FILL)
    return [as_array(blob), len(blob), byref(passes), byref(memory), byref(kind)], [passes, memory, kind]


def _import_open(env):
    blob, out = an_export(), handle_out()
    return [env.empty_store, as_array(blob), len(blob), EXPORT_PASSWORD, T0, byref(out)], [out]


def _import_status(env):
    failures, wait = c_uint32(FILL), c_uint64(FILL)
    return [env.empty_store, T0, byref(failures), byref(wait)], [failures, wait]


def _import_check(env):
    report = ImportReportStruct()
    ctypes.memset(byref(report), FILL, ctypes.sizeof(report))
    return [new_import(env), env.empty_store, str(env.tmp_path / "moved.db").encode(), byref(report)], [report]


def _import_install(env):
    # NULL, not a sentinel: out_identity may be NULL, and freeing NULL is allowed.
    out = c_void_p()
    return [new_import(env), env.empty_store, str(env.tmp_path / "moved.db").encode(), 0, byref(out)], [out]


def _transfer_new_receiver(env):
    out = handle_out()
    return [new_random(env), T0, byref(out)], [out]


def _transfer_new_sender(env):
    offer, n, out = text_buf(itsme.TRANSFER_OFFER_SIZE), size_out(), handle_out()
    ok(lib.itsme_transfer_offer(new_receiver(env), offer, itsme.TRANSFER_OFFER_SIZE, byref(n)))
    return [env.identity, PIN, offer.value, new_random(env), T0, byref(out)], [out]


def _transfer_status(env):
    state = c_uint32(0xAAAA)
    return [new_receiver(env), byref(state)], [state]


def _transfer_next_outgoing(env):
    buf, n = byte_buf(itsme.TRANSFER_MESSAGE_MAX), size_out()
    return [new_sender(env, new_receiver(env)), buf, itsme.TRANSFER_MESSAGE_MAX, byref(n)], [buf, n]


def _transfer_receive(env):
    receiver = new_receiver(env)
    key = transfer_outgoing(new_sender(env, receiver))
    return [receiver, as_array(key), len(key), T0], []


def _transfer_take_import(env):
    out = handle_out()
    return [transfer_done(env), byref(out)], [out]


def _store_backup(env):
    return [env.contacts, str(env.tmp_path / "backup.db").encode()], []


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


def carol_with_photo(env):
    """env.contacts, with a photo set on Carol."""
    ok(lib.itsme_store_set_photo(env.contacts, env.contact_id, PHOTO, 16, b"carol.jpg"))
    return env.contacts


def online_confirmed_with_profile(env):
    """My Online Verify session with env.bare_identity, confirmed, after
    the peer shared REFERENCE in its PROOF."""
    mine, theirs = online_pair(env)
    ok(lib.itsme_online_verify_share_profile(theirs, REFERENCE, 32))
    online_pump(mine, theirs)
    outcome = c_uint32()
    ok(lib.itsme_online_verify_confirm(mine, env.contacts, T0, byref(outcome)))
    return mine


def _online_verify_share_profile(env):
    return [new_online_verify(env), REFERENCE, 32], []


def _online_verify_peer_profile(env):
    buf, n = byte_buf(64), size_out()
    return [online_confirmed_with_profile(env), buf, 64, byref(n)], [buf, n]


def _profile_create(env):
    out = handle_out()
    return [env.identity, b"Raw", PHOTO, 16, b"raw.jpg", new_random(env), byref(out)], [out]


def _profile_open(env):
    profile = new_profile(env)
    record = profile_bytes(lib.itsme_profile_record, profile)
    reference = profile_bytes(lib.itsme_profile_reference, profile)
    out = handle_out()
    owner = as_array(public_key(env.identity))
    return [as_array(record), len(record), as_array(reference), 32, owner, 32, byref(out)], [out]


def _profile_bytes(env):
    buf, n = byte_buf(512), size_out()
    return [new_profile(env), buf, 512, byref(n)], [buf, n]


def _store_apply_profile(env):
    return [env.contacts, env.contact_id, new_profile(env)], []


def _store_set_photo(env):
    return [env.contacts, env.contact_id, PHOTO, 16, b"carol.jpg"], []


def _store_photo(env):
    buf, n = byte_buf(64), size_out()
    return [carol_with_photo(env), env.contact_id, buf, 64, byref(n)], [buf, n]


def _store_photo_filename(env):
    buf, n = text_buf(64), size_out()
    return [carol_with_photo(env), env.contact_id, buf, 64, byref(n)], [buf, n]


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


def _credential_enroll(env):
    buf, n = byte_buf(itsme.ENROLLMENT_MAX), size_out()
    return [env.store, SERVICE, b"Raw phone", NONCE, 16, new_random(env), buf, itsme.ENROLLMENT_MAX, byref(n)], [buf, n]


def _credential_id(env):
    enroll_raw(env.store)
    buf, n = byte_buf(32), size_out()
    return [env.store, SERVICE, buf, 32, byref(n)], [buf, n]


def _credential_remove(env):
    enroll_raw(env.store)
    return [env.store, SERVICE], []


def _approval_request_parse(env):
    request, info = request_raw(), ApprovalRequestInfoStruct()
    ctypes.memset(byref(info), FILL, ctypes.sizeof(info))
    return [as_array(request), len(request), APPROVAL_NOW, byref(info)], [info]


def _approval_sign(env):
    enroll_raw(env.store)
    request, buf, n = request_raw(), byte_buf(itsme.APPROVAL_MAX), size_out()
    return [env.store, as_array(request), len(request), 1, b"email", APPROVAL_NOW, buf, itsme.APPROVAL_MAX, byref(n)], [buf, n]


def _enrollment_verify(env):
    enrollment, info = enroll_raw(env.store), CredentialInfoStruct()
    ctypes.memset(byref(info), FILL, ctypes.sizeof(info))
    return [SERVICE, NONCE, 16, as_array(enrollment), len(enrollment), byref(info)], [info]


def _approval_request_create(env):
    buf, n = byte_buf(itsme.APPROVAL_REQUEST_MAX), size_out()
    args = [SERVICE, b"Example Bank", b"session-1", b"email", 300, new_random(env), APPROVAL_NOW]
    return args + [buf, itsme.APPROVAL_REQUEST_MAX, byref(n)], [buf, n]


def _replay_store_new_memory(env):
    out = handle_out()
    return [0, byref(out)], [out]


def _replay_store_new_callbacks(env):
    table, out = raw_replay_table(), handle_out()
    return [byref(table), byref(out)], [out]


def _approval_verify(env):
    enrollment = enroll_raw(env.store)
    request = request_raw()
    approval = approval_raw(env.store, request)
    key = as_array(enrollment[1:33])
    result = ApprovalResultStruct()
    ctypes.memset(byref(result), FILL, ctypes.sizeof(result))
    args = [as_array(request), len(request), as_array(approval), len(approval), key, 1, new_replay(env), APPROVAL_NOW]
    return args + [byref(result)], [result]


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
    "itsme_store_accept_loss": _store_accept_loss,
    "itsme_store_last_error": _contacts_last_error,
    "itsme_store_add": _store_add,
    "itsme_store_add_unauthenticated": _store_add_unauthenticated,
    "itsme_store_get": _store_get,
    "itsme_store_get_by_key": _store_get_by_key,
    "itsme_store_find_fingerprint": _store_find_fingerprint,
    "itsme_store_list": _store_list,
    "itsme_store_count": _store_count,
    "itsme_store_expire_awaiting": _store_expire_awaiting,
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
    "itsme_random_new_deterministic": _random_new_deterministic,
    "itsme_identity_create_with_random": _identity_create_with_random,
    "itsme_short_code_parse": _short_code_parse,
    "itsme_short_code_format": _short_code_format,
    "itsme_exchange_new_qr": _exchange_new_qr,
    "itsme_exchange_new_bluetooth": _exchange_new_bluetooth,
    "itsme_exchange_last_error": _exchange_text(lambda env: new_exchange(env, env.identity)),
    "itsme_exchange_status": _exchange_status,
    "itsme_exchange_get_method": _exchange_get_method,
    "itsme_exchange_session_code": _exchange_text(lambda env: new_exchange(env, env.identity, bluetooth=True)),
    "itsme_exchange_next_outgoing": _exchange_next_outgoing,
    "itsme_exchange_receive": _exchange_receive,
    "itsme_exchange_sas": _exchange_text(comparing),
    "itsme_exchange_peer_name": _exchange_text(comparing),
    "itsme_exchange_peer_fingerprint": _exchange_text(comparing),
    "itsme_exchange_peer_public_key": _exchange_peer_public_key,
    "itsme_exchange_save": _exchange_save,
    "itsme_exchange_confirm": _exchange_save,
    "itsme_exchange_settle": _exchange_settle,
    "itsme_exchange_reject": _exchange_reject,
    "itsme_exchange_seal": _exchange_seal,
    "itsme_exchange_restore": _exchange_restore,
    "itsme_remote_code_check": _remote_code_check,
    "itsme_exchange_new_invite": _exchange_new_invite,
    "itsme_exchange_accept_invite": _exchange_accept_invite,
    "itsme_exchange_invite_code": _exchange_text(new_invite),
    "itsme_exchange_encryption_code": _exchange_text(new_invite),
    "itsme_exchange_relay_id": _exchange_text(new_invite),
    "itsme_exchange_is_inviter": _exchange_is_inviter,
    "itsme_derive_seed": _derive_seed,
    "itsme_derive_sas": _derive_sas,
    "itsme_qr_transcript_hash": _qr_transcript_hash,
    "itsme_bluetooth_commitment": _bluetooth_commitment,
    "itsme_bluetooth_th1": _bluetooth_th1,
    "itsme_bluetooth_session_keys": _bluetooth_session_keys,
    "itsme_bluetooth_transcript_hash": _bluetooth_transcript_hash,
    "itsme_voice_new": _voice_new,
    "itsme_voice_last_error": _voice_text(new_voice),
    "itsme_voice_status": _voice_status,
    "itsme_voice_timing": _voice_timing,
    "itsme_voice_start": _voice_start,
    "itsme_voice_session_id": _voice_text(new_voice),
    "itsme_voice_words": _voice_words,
    "itsme_voice_select": _voice_select,
    "itsme_voice_your_code": _voice_code,
    "itsme_voice_their_code": _voice_code,
    "itsme_voice_check": _voice_check,
    "itsme_derive_session_id": _derive_session_id,
    "itsme_derive_words": _derive_words,
    "itsme_derive_lower_selects_first": _derive_lower_selects_first,
    "itsme_derive_code": _derive_code,
    "itsme_derive_device_tag": _derive_device_tag,
    "itsme_derive_voice": _derive_voice,
    "itsme_store_degradation_code": _store_degradation_code,
    "itsme_store_accept_degradation_code": _store_accept_degradation_code,
    "itsme_derive_degradation_code": _derive_degradation_code,
    "itsme_online_verify_new": _online_verify_new,
    "itsme_online_verify_last_error": _session_text(new_online_verify),
    "itsme_online_verify_status": _online_verify_status,
    "itsme_online_verify_room": _session_text(new_online_verify),
    "itsme_online_verify_next_outgoing": _online_verify_next_outgoing,
    "itsme_online_verify_receive": _online_verify_receive,
    "itsme_online_verify_sas": _session_text(online_comparing),
    "itsme_online_verify_confirm": _online_verify_confirm,
    "itsme_online_verify_reject": _online_verify_reject,
    "itsme_pin_update_new": _pin_update_new,
    "itsme_pin_update_last_error": _session_text(new_pin_update),
    "itsme_pin_update_status": _pin_update_status,
    "itsme_pin_update_session_code": _session_text(new_pin_update),
    "itsme_pin_update_next_outgoing": _pin_update_next_outgoing,
    "itsme_pin_update_receive": _pin_update_receive,
    "itsme_store_backup": _store_backup,
    "itsme_export_generate_password": _export_generate_password,
    "itsme_identity_export": _identity_export,
    "itsme_export_to_text": _export_to_text,
    "itsme_export_from_text": _export_from_text,
    "itsme_export_header": _export_header,
    "itsme_import_open": _import_open,
    "itsme_import_status": _import_status,
    "itsme_import_last_error": _session_text(new_import),
    "itsme_import_fingerprint": _session_text(new_import),
    "itsme_import_name": _session_text(new_import),
    "itsme_import_check": _import_check,
    "itsme_import_install": _import_install,
    "itsme_transfer_new_receiver": _transfer_new_receiver,
    "itsme_transfer_new_sender": _transfer_new_sender,
    "itsme_transfer_last_error": _session_text(new_receiver),
    "itsme_transfer_status": _transfer_status,
    "itsme_transfer_offer": _session_text(new_receiver),
    "itsme_transfer_room": _session_text(new_receiver),
    "itsme_transfer_next_outgoing": _transfer_next_outgoing,
    "itsme_transfer_receive": _transfer_receive,
    "itsme_transfer_sas": _session_text(lambda env: transfer_comparing(env)[0]),
    "itsme_transfer_confirm": lambda env: ([transfer_comparing(env)[1], T0], []),
    "itsme_transfer_reject": lambda env: ([new_receiver(env)], []),
    "itsme_transfer_take_import": _transfer_take_import,
    "itsme_online_verify_share_profile": _online_verify_share_profile,
    "itsme_online_verify_peer_profile": _online_verify_peer_profile,
    "itsme_profile_create": _profile_create,
    "itsme_profile_open": _profile_open,
    "itsme_profile_name": _session_text(new_profile),
    "itsme_profile_photo": _profile_bytes,
    "itsme_profile_photo_filename": _session_text(new_profile),
    "itsme_profile_record": _profile_bytes,
    "itsme_profile_record_id": _profile_bytes,
    "itsme_profile_record_name": _session_text(new_profile),
    "itsme_profile_reference": _profile_bytes,
    "itsme_store_apply_profile": _store_apply_profile,
    "itsme_store_set_photo": _store_set_photo,
    "itsme_store_photo": _store_photo,
    "itsme_store_photo_filename": _store_photo_filename,
    "itsme_credential_enroll": _credential_enroll,
    "itsme_credential_id": _credential_id,
    "itsme_credential_remove": _credential_remove,
    "itsme_approval_request_parse": _approval_request_parse,
    "itsme_approval_sign": _approval_sign,
    "itsme_enrollment_verify": _enrollment_verify,
    "itsme_approval_request_create": _approval_request_create,
    "itsme_replay_store_new_memory": _replay_store_new_memory,
    "itsme_replay_store_new_callbacks": _replay_store_new_callbacks,
    "itsme_approval_verify": _approval_verify,
}

# Constructors whose successful output is a handle to free.
FREE_OUTPUT = {
    "itsme_secret_store_new_callbacks": lib.itsme_secret_store_free,
    "itsme_secret_store_new_memory": lib.itsme_secret_store_free,
    "itsme_secret_store_open_file": lib.itsme_secret_store_free,
    "itsme_identity_create": lib.itsme_identity_free,
    "itsme_identity_load": lib.itsme_identity_free,
    "itsme_store_open": lib.itsme_store_free,
    "itsme_store_get": lib.itsme_contact_free,
    "itsme_store_get_by_key": lib.itsme_contact_free,
    "itsme_store_find_fingerprint": lib.itsme_contact_list_free,
    "itsme_store_list": lib.itsme_contact_list_free,
    "itsme_contact_list_get": lib.itsme_contact_free,
    "itsme_random_new_deterministic": lib.itsme_random_free,
    "itsme_identity_create_with_random": lib.itsme_identity_free,
    "itsme_exchange_new_qr": lib.itsme_exchange_free,
    "itsme_exchange_new_bluetooth": lib.itsme_exchange_free,
    "itsme_exchange_restore": lib.itsme_exchange_free,
    "itsme_exchange_new_invite": lib.itsme_exchange_free,
    "itsme_exchange_accept_invite": lib.itsme_exchange_free,
    "itsme_voice_new": lib.itsme_voice_free,
    "itsme_online_verify_new": lib.itsme_online_verify_free,
    "itsme_pin_update_new": lib.itsme_pin_update_free,
    "itsme_import_open": lib.itsme_import_free,
    "itsme_import_install": lib.itsme_identity_free,
    "itsme_transfer_new_receiver": lib.itsme_transfer_free,
    "itsme_transfer_new_sender": lib.itsme_transfer_free,
    "itsme_transfer_take_import": lib.itsme_import_free,
    "itsme_profile_create": lib.itsme_profile_free,
    "itsme_profile_open": lib.itsme_profile_free,
    "itsme_replay_store_new_memory": lib.itsme_replay_store_free,
    "itsme_replay_store_new_callbacks": lib.itsme_replay_store_free,
}

# Pointer arguments the header allows to be NULL: (function, index).
OPTIONAL_POINTERS = {
    ("itsme_identity_create_with_random", 2): "rng NULL: the operating system",
    ("itsme_exchange_new_qr", 1): "rng NULL: the operating system",
    ("itsme_exchange_new_bluetooth", 1): "session_code NULL: draw one",
    ("itsme_exchange_new_bluetooth", 2): "rng NULL: the operating system",
    ("itsme_exchange_new_invite", 2): "rng NULL: the operating system",
    ("itsme_exchange_accept_invite", 4): "rng NULL: the operating system",
    ("itsme_exchange_status", 2): "out_flags may be NULL",
    ("itsme_store_expire_awaiting", 2): "out_deleted may be NULL",
    ("itsme_voice_status", 2): "out_turn may be NULL",
    ("itsme_voice_timing", 2): "out_window may be NULL",
    ("itsme_voice_timing", 3): "out_starts_in may be NULL",
    ("itsme_voice_timing", 4): "out_ends_in may be NULL",
    ("itsme_derive_device_tag", 5): "secret may be NULL when secret_len is 0",
    ("itsme_derive_voice", 7): "my_secret may be NULL when my_secret_len is 0",
    ("itsme_derive_voice", 9): "their_secret may be NULL when their_secret_len is 0",
    ("itsme_store_degradation_code", 2): "rng NULL: the operating system",
    ("itsme_online_verify_new", 3): "rng NULL: the operating system",
    ("itsme_pin_update_new", 3): "rng NULL: the operating system",
    ("itsme_export_generate_password", 0): "rng NULL: the operating system",
    ("itsme_identity_export", 5): "rng NULL: the operating system",
    ("itsme_import_check", 2): "store_path NULL: no contact store",
    ("itsme_import_install", 2): "store_path NULL: no contact store",
    ("itsme_import_install", 4): "out_identity NULL: not wanted",
    ("itsme_transfer_new_receiver", 0): "rng NULL: the operating system",
    ("itsme_transfer_new_sender", 3): "rng NULL: the operating system",
    ("itsme_profile_create", 1): "name NULL: none (the profile has a photo)",
    ("itsme_profile_create", 4): "photo_filename NULL: none",
    ("itsme_profile_create", 5): "rng NULL: the operating system",
    ("itsme_store_set_photo", 4): "filename NULL: none",
    ("itsme_credential_enroll", 5): "rng NULL: the operating system",
    ("itsme_approval_sign", 4): "granted_scopes NULL: none",
    ("itsme_approval_request_create", 3): "scopes NULL: none",
    ("itsme_approval_request_create", 5): "rng NULL: the operating system",
}

POINTER_ARGUMENTS = [
    (name, index)
    for name, (restype, argtypes) in SIGNATURES.items()
    if restype is not None
    for index, argtype in enumerate(argtypes)
    if is_pointer(argtype)
]

NULL_CASES = [
    pytest.param(name, index, id=f"{name}[{index}]")
    for name, index in POINTER_ARGUMENTS
    if (name, index) not in OPTIONAL_POINTERS
]


def test_every_function_with_pointer_arguments_has_a_case():
    with_pointers = {name for name, index in POINTER_ARGUMENTS}
    assert with_pointers == set(CASES)
    assert set(OPTIONAL_POINTERS) <= set(POINTER_ARGUMENTS)


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


@pytest.mark.parametrize(
    "name, index", [pytest.param(name, index, id=f"{name}[{index}]") for name, index in OPTIONAL_POINTERS]
)
def test_optional_pointer_may_be_null(raw, name, index):
    args, outs = CASES[name](raw)
    args[index] = None
    ok(getattr(lib, name)(*args))
    if name in FREE_OUTPUT:
        FREE_OUTPUT[name](outs[0].value)


def test_reject_needs_no_store_when_nothing_was_saved(raw):
    exchange = comparing(raw)
    ok(lib.itsme_exchange_reject(exchange, None))
    assert exchange_state(exchange) == itsme.EXCHANGE_REJECTED


def test_null_pointers_leave_exchanges_unchanged(raw):
    exchange = new_exchange(raw, raw.identity)
    payload = outgoing(new_exchange(raw, raw.bare_identity))
    assert lib.itsme_exchange_receive(exchange, None, len(payload), T0) == R.ITSME_E_INVALID_ARGUMENT
    assert exchange_state(exchange) == itsme.EXCHANGE_AWAITING_PEER
    ok(receive(exchange, payload))
    out = c_int64(-5)
    assert lib.itsme_exchange_save(exchange, None, T0, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert lib.itsme_exchange_confirm(exchange, raw.contacts, T0, None) == R.ITSME_E_INVALID_ARGUMENT
    assert out.value == -5
    assert exchange_state(exchange) == itsme.EXCHANGE_COMPARE_SAS
    count = c_uint64()
    ok(lib.itsme_store_count(raw.contacts, byref(count)))
    assert count.value == 1, "nothing was saved"


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
    lib.itsme_store_free(None)
    lib.itsme_contact_free(None)
    lib.itsme_contact_list_free(None)
    lib.itsme_random_free(None)
    lib.itsme_exchange_free(None)
    lib.itsme_voice_free(None)
    lib.itsme_online_verify_free(None)
    lib.itsme_pin_update_free(None)
    lib.itsme_import_free(None)
    lib.itsme_transfer_free(None)
    lib.itsme_profile_free(None)
    lib.itsme_replay_store_free(None)


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
    compare = comparing(env)
    bluetooth = new_exchange(env, env.identity, bluetooth=True)
    assert receive(compare, b"hello") == R.ITSME_E_INVALID_STATE  # a last error, not a failure
    seed, th = HASH, (c_uint8 * 32)(*range(32))
    voice, tag = comparing_voice(env), c_uint32()
    assert lib.itsme_voice_select(voice, 0, T0) == R.ITSME_E_INVALID_STATE  # a last error, not a failure
    pids = [CONTACT_KEY, 32, 1, OTHER_KEY, 32, 2, OTHER_KEY, 32]
    online, update = online_comparing(env), new_pin_update(env)
    assert lib.itsme_online_verify_reject(online) == R.ITSME_OK
    assert lib.itsme_online_verify_reject(online) == R.ITSME_E_INVALID_STATE  # a last error, not a failure
    assert lib.itsme_pin_update_receive(update, as_array(b"\x09\x09"), 2, T0) == R.ITSME_E_MALFORMED_MESSAGE
    profile, photo_store, cid = new_profile(env), carol_with_photo(env), env.contact_id
    shared = online_confirmed_with_profile(env)
    return [
        ("fingerprint_from_public_key", lambda b, c, n: lib.itsme_fingerprint_from_public_key(key, 32, b, c, n), True),
        ("secret_store_last_error", lambda b, c, n: lib.itsme_secret_store_last_error(store, b, c, n), True),
        ("identity_last_error", lambda b, c, n: lib.itsme_identity_last_error(identity, b, c, n), True),
        ("identity_fingerprint", lambda b, c, n: lib.itsme_identity_fingerprint(identity, b, c, n), True),
        ("identity_public_key", lambda b, c, n: lib.itsme_identity_public_key(identity, b, c, n), False),
        ("identity_name", lambda b, c, n: lib.itsme_identity_name(identity, b, c, n), True),
        ("short_code_format", lambda b, c, n: lib.itsme_short_code_format(259999, b, c, n), True),
        ("exchange_last_error", lambda b, c, n: lib.itsme_exchange_last_error(compare, b, c, n), True),
        ("exchange_session_code", lambda b, c, n: lib.itsme_exchange_session_code(bluetooth, b, c, n), True),
        ("exchange_next_outgoing_qr", lambda b, c, n: lib.itsme_exchange_next_outgoing(compare, b, c, n), False),
        ("exchange_sas", lambda b, c, n: lib.itsme_exchange_sas(compare, b, c, n), True),
        ("exchange_peer_name", lambda b, c, n: lib.itsme_exchange_peer_name(compare, b, c, n), True),
        ("exchange_peer_fingerprint", lambda b, c, n: lib.itsme_exchange_peer_fingerprint(compare, b, c, n), True),
        ("exchange_peer_public_key", lambda b, c, n: lib.itsme_exchange_peer_public_key(compare, b, c, n), False),
        (
            "derive_seed",
            lambda b, c, n: lib.itsme_derive_seed(EPHEMERAL_SECRET, 32, BASE_POINT, 32, FP_A, FP_B, b, c, n),
            False,
        ),
        ("derive_sas", lambda b, c, n: lib.itsme_derive_sas(seed, 32, th, 32, b, c, n), True),
        (
            "bluetooth_session_keys",
            lambda b, c, n: lib.itsme_bluetooth_session_keys(EPHEMERAL_SECRET, 32, BASE_POINT, 32, th, 32, b, c, n),
            False,
        ),
        (
            "bluetooth_transcript_hash",
            lambda b, c, n: lib.itsme_bluetooth_transcript_hash(th, 32, PLAINTEXT, 120, PLAINTEXT, 114, b, c, n),
            False,
        ),
        ("voice_last_error", lambda b, c, n: lib.itsme_voice_last_error(voice, b, c, n), True),
        ("voice_session_id", lambda b, c, n: lib.itsme_voice_session_id(voice, b, c, n), True),
        ("voice_your_code", lambda b, c, n: lib.itsme_voice_your_code(voice, b, c, n, byref(tag)), True),
        ("voice_their_code", lambda b, c, n: lib.itsme_voice_their_code(voice, b, c, n, byref(tag)), True),
        ("derive_session_id", lambda b, c, n: lib.itsme_derive_session_id(seed, 32, 7, b, c, n), True),
        ("derive_code", lambda b, c, n: lib.itsme_derive_code(seed, 32, 7, *pids, b, c, n), True),
        (
            "derive_degradation_code",
            lambda b, c, n: lib.itsme_derive_degradation_code(seed, 32, CONTACT_KEY, 32, DEGRADATION_SECRET, 10, b, c, n),
            True,
        ),
        ("online_verify_last_error", lambda b, c, n: lib.itsme_online_verify_last_error(online, b, c, n), True),
        ("online_verify_room", lambda b, c, n: lib.itsme_online_verify_room(online, b, c, n), True),
        ("online_verify_sas", lambda b, c, n: lib.itsme_online_verify_sas(online, b, c, n), True),
        ("pin_update_last_error", lambda b, c, n: lib.itsme_pin_update_last_error(update, b, c, n), True),
        ("pin_update_session_code", lambda b, c, n: lib.itsme_pin_update_session_code(update, b, c, n), True),
        ("profile_name", lambda b, c, n: lib.itsme_profile_name(profile, b, c, n), True),
        ("profile_photo", lambda b, c, n: lib.itsme_profile_photo(profile, b, c, n), False),
        ("profile_photo_filename", lambda b, c, n: lib.itsme_profile_photo_filename(profile, b, c, n), True),
        ("profile_record", lambda b, c, n: lib.itsme_profile_record(profile, b, c, n), False),
        ("profile_record_id", lambda b, c, n: lib.itsme_profile_record_id(profile, b, c, n), False),
        ("profile_record_name", lambda b, c, n: lib.itsme_profile_record_name(profile, b, c, n), True),
        ("profile_reference", lambda b, c, n: lib.itsme_profile_reference(profile, b, c, n), False),
        ("store_photo", lambda b, c, n: lib.itsme_store_photo(photo_store, cid, b, c, n), False),
        ("store_photo_filename", lambda b, c, n: lib.itsme_store_photo_filename(photo_store, cid, b, c, n), True),
        ("online_verify_peer_profile", lambda b, c, n: lib.itsme_online_verify_peer_profile(shared, b, c, n), False),
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
        "short_code_format",
        "exchange_last_error",
        "exchange_session_code",
        "exchange_next_outgoing_qr",
        "exchange_sas",
        "exchange_peer_name",
        "exchange_peer_fingerprint",
        "exchange_peer_public_key",
        "derive_seed",
        "derive_sas",
        "bluetooth_session_keys",
        "bluetooth_transcript_hash",
        "voice_last_error",
        "voice_session_id",
        "voice_your_code",
        "voice_their_code",
        "derive_session_id",
        "derive_code",
        "derive_degradation_code",
        "online_verify_last_error",
        "online_verify_room",
        "online_verify_sas",
        "pin_update_last_error",
        "pin_update_session_code",
        "profile_name",
        "profile_photo",
        "profile_photo_filename",
        "profile_record",
        "profile_record_id",
        "profile_record_name",
        "profile_reference",
        "store_photo",
        "store_photo_filename",
        "online_verify_peer_profile",
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


def test_seal_buffer_protocol(raw):
    exchange = comparing(raw)
    n = size_out()
    assert lib.itsme_exchange_seal(exchange, None, 0, byref(n)) == R.ITSME_E_BUFFER_TOO_SMALL
    needed = n.value
    assert needed > 0
    buf, n = byte_buf(needed + 8), size_out()
    assert lib.itsme_exchange_seal(exchange, buf, needed - 1, byref(n)) == R.ITSME_E_BUFFER_TOO_SMALL
    assert (n.value, bytes(buf)) == (needed, bytes([FILL]) * (needed + 8))
    ok(lib.itsme_exchange_seal(exchange, buf, needed, byref(n)))
    assert n.value == needed
    assert bytes(buf)[needed:] == bytes([FILL]) * 8
    restored = c_void_p()
    ok(lib.itsme_exchange_restore(raw.identity, as_array(bytes(buf)[:needed]), needed, T0, byref(restored)))
    raw.exchanges.append(restored.value)
    assert exchange_state(restored.value) == itsme.EXCHANGE_COMPARE_SAS


def test_seal_writes_nothing_on_failure(raw):
    exchange = comparing(raw)
    ok(lib.itsme_exchange_reject(exchange, None))
    buf, n = byte_buf(1024), size_out()
    assert lib.itsme_exchange_seal(exchange, buf, 1024, byref(n)) == R.ITSME_E_INVALID_STATE
    assert (n.value, bytes(buf)) == (0x5EED, bytes([FILL]) * 1024)


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


@pytest.mark.parametrize("now", [-1, -(2**63)])
def test_negative_time_is_refused_by_exchanges(raw, now):
    out = handle_out()
    assert lib.itsme_exchange_new_qr(raw.identity, None, now, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert lib.itsme_exchange_new_bluetooth(raw.identity, None, None, now, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert out.value == 0xDEADBEEF
    exchange = new_exchange(raw, raw.identity)
    payload = outgoing(new_exchange(raw, raw.bare_identity))
    assert receive(exchange, payload, now) == R.ITSME_E_INVALID_ARGUMENT
    assert exchange_state(exchange) == itsme.EXCHANGE_AWAITING_PEER
    ok(receive(exchange, payload))
    contact_id = c_int64(-5)
    assert lib.itsme_exchange_save(exchange, raw.contacts, now, byref(contact_id)) == R.ITSME_E_INVALID_ARGUMENT
    assert lib.itsme_exchange_confirm(exchange, raw.contacts, now, byref(contact_id)) == R.ITSME_E_INVALID_ARGUMENT
    assert contact_id.value == -5
    assert exchange_state(exchange) == itsme.EXCHANGE_COMPARE_SAS


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
    assert lib.itsme_exchange_new_bluetooth(raw.identity, text, None, T0, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert out.value == 0xDEADBEEF


@pytest.mark.parametrize("name", INVALID_UTF8)
def test_invalid_utf8_in_derivations(name):
    buf, n = byte_buf(32), size_out()
    assert (
        lib.itsme_bluetooth_commitment(CONTACT_KEY, 32, BASE_POINT, 32, name, DEVICE_SECRET, 16, buf, 32, byref(n))
        == R.ITSME_E_INVALID_ARGUMENT
    )
    assert (
        lib.itsme_derive_seed(EPHEMERAL_SECRET, 32, BASE_POINT, 32, name, FP_B, buf, 32, byref(n))
        == R.ITSME_E_INVALID_ARGUMENT
    )
    assert (bytes(buf), n.value) == (bytes([FILL]) * 32, 0x5EED)


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
    ok(lib.itsme_exchange_reject(exchange, None))
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


@pytest.mark.parametrize("late", [MAX_TIME + 1, 2**63 - 1])
def test_times_after_the_year_9999_are_refused(raw, late):
    assert lib.itsme_pin_verify(raw.identity, PIN, late) == R.ITSME_E_INVALID_ARGUMENT
    failures, wait = c_uint32(7), c_uint64(7)
    assert lib.itsme_pin_status(raw.identity, late, byref(failures), byref(wait)) == R.ITSME_E_INVALID_ARGUMENT
    assert (failures.value, wait.value) == (7, 7), "written on failure"
    assert status(raw.identity) == (0, 0), "not counted"


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
    assert lib.itsme_voice_new(raw.contacts, raw.contact_id + 100, T0, byref(out)) == R.ITSME_E_NOT_FOUND
    assert contacts_detail(raw) != b"\0"
    assert lib.itsme_voice_new(raw.contacts, raw.contact_id, -1, byref(out)) == R.ITSME_E_INVALID_ARGUMENT
    assert out.value == 0xDEADBEEF


def test_voice_words_need_five_bytes(raw):
    voice = new_voice(raw)
    out = byte_buf(5)
    for cap in (0, 1, 4):
        assert lib.itsme_voice_words(voice, out, cap) == R.ITSME_E_BUFFER_TOO_SMALL
        assert lib.itsme_derive_words(SEED, 32, VOICE_WINDOW, CONTACT_KEY, 32, out, cap) == R.ITSME_E_BUFFER_TOO_SMALL
    assert bytes(out) == bytes([FILL]) * 5
    big = byte_buf(8)
    ok(lib.itsme_voice_words(voice, big, 8))
    assert bytes(big)[5:] == bytes([FILL]) * 3, "written past the five words"
    assert sorted(set(bytes(big)[:5])) == list(bytes(big)[:5]) and max(bytes(big)[:5]) < 26


def test_voice_codes_need_a_tag_output(raw):
    voice = comparing_voice(raw)
    buf, n = text_buf(13), size_out()
    tag = c_uint32(7)
    for function in (lib.itsme_voice_your_code, lib.itsme_voice_their_code):
        assert function(voice, buf, 13, byref(n), None) == R.ITSME_E_INVALID_ARGUMENT
        assert n.value == 0x5EED
        assert function(voice, buf, 4, byref(n), byref(tag)) == R.ITSME_E_BUFFER_TOO_SMALL
        assert 9 <= n.value <= itsme.VOICE_CODE_SIZE
        n = size_out()
    assert (bytes(buf), tag.value) == (bytes([FILL]) * 13, 7), "written on failure"


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
        assert lib.itsme_voice_check(voice, raw.contacts, code, tag, now, byref(outcome)) == R.ITSME_E_INVALID_ARGUMENT
        assert voice_state(voice) == (itsme.VOICE_COMPARING, itsme.VOICE_TURN_NONE), (code, tag)
    assert outcome.value == 0xAAAA
    ok(lib.itsme_voice_check(voice, raw.contacts, b"echo-512", 99, now, byref(outcome)))
    assert voice_state(voice)[0] == itsme.VOICE_FINISHED


def test_voice_needs_the_store_it_was_planned_on(raw, tmp_path):
    other = c_void_p()
    ok(lib.itsme_store_open(raw.bare_identity, str(tmp_path / "other-voice.db").encode(), byref(other)))
    try:
        voice = new_voice(raw)
        start = 30 * voice_window(voice)
        assert lib.itsme_voice_start(voice, other, start) == R.ITSME_E_INVALID_ARGUMENT
        assert voice_state(voice)[0] == itsme.VOICE_WAITING
        ok(lib.itsme_voice_start(voice, raw.contacts, start))
        for _ in range(2):
            ok(lib.itsme_voice_select(voice, next_word(voice), start))
        outcome = c_uint32(0xAAAA)
        assert lib.itsme_voice_check(voice, other, b"ECHO 512", 1, start, byref(outcome)) == R.ITSME_E_INVALID_ARGUMENT
        assert voice_state(voice)[0] == itsme.VOICE_COMPARING and outcome.value == 0xAAAA
    finally:
        lib.itsme_store_free(other.value)


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
    # Another handle on the same file is the same store.
    ok(lib.itsme_voice_start(voice, raw.contacts, start))
    contact, window = c_void_p(), c_int64()
    ok(lib.itsme_store_get(raw.contacts, raw.contact_id, byref(contact)))
    ok(lib.itsme_contact_last_window(contact.value, byref(window)))
    lib.itsme_contact_free(contact.value)
    assert window.value == voice_window(voice)


@pytest.mark.parametrize("length", [0, 7, 9, 31, 33])
def test_voice_derivations_check_pid_and_seed_sizes(length):
    data = (c_uint8 * 64)(*range(64))
    text, words, n, flag, tag = text_buf(13), byte_buf(5), size_out(), c_int(-5), c_uint32(7)
    window = VOICE_WINDOW
    calls = [
        lambda: lib.itsme_derive_session_id(data, length, window, text, 13, byref(n)),
        lambda: lib.itsme_derive_words(data, length, window, CONTACT_KEY, 32, words, 5),
        lambda: lib.itsme_derive_words(SEED, 32, window, data, length, words, 5),
        lambda: lib.itsme_derive_lower_selects_first(data, length, window, byref(flag)),
        lambda: lib.itsme_derive_code(SEED, 32, window, data, length, 1, OTHER_KEY, 32, 2, OTHER_KEY, 32, text, 13, byref(n)),
        lambda: lib.itsme_derive_code(SEED, 32, window, OTHER_KEY, 32, 1, data, length, 2, OTHER_KEY, 32, text, 13, byref(n)),
        lambda: lib.itsme_derive_code(SEED, 32, window, OTHER_KEY, 32, 1, OTHER_KEY, 32, 2, data, length, text, 13, byref(n)),
        lambda: lib.itsme_derive_device_tag(data, length, window, CONTACT_KEY, 32, None, 0, byref(tag)),
        lambda: lib.itsme_derive_device_tag(SEED, 32, window, data, length, None, 0, byref(tag)),
    ]
    for index, call in enumerate(calls):
        assert call() == R.ITSME_E_INVALID_ARGUMENT, index
    assert (bytes(text), bytes(words), n.value, flag.value, tag.value) == (bytes([FILL]) * 13, bytes([FILL]) * 5, 0x5EED, -5, 7)


def test_voice_derivations_accept_fingerprint_pids():
    fingerprint = (c_uint8 * 8)(*range(8))
    words, tag = byte_buf(5), c_uint32(7)
    ok(lib.itsme_derive_words(SEED, 32, VOICE_WINDOW, fingerprint, 8, words, 5))
    ok(lib.itsme_derive_device_tag(SEED, 32, VOICE_WINDOW, fingerprint, 8, DEVICE_SECRET, 16, byref(tag)))
    assert tag.value < 100


def test_derive_voice_checks_its_arguments():
    out = VoiceDerivationStruct.from_buffer_copy(bytes([FILL]) * 32)
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
    assert bytes(out) == bytes([FILL]) * 32, "written on failure"
    ok(call(my_len=8, their_secret_len=64))
    assert out.reserved == 0 and out.i_select_first in (0, 1)
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
    state, acknowledged = c_uint32(), c_int()
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


@pytest.mark.parametrize("kind", ["online_verify", "pin_update"])
def test_session_constructors_record_on_the_store(raw, kind):
    new = getattr(lib, f"itsme_{kind}_new")
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
    new, free = getattr(lib, f"itsme_{kind}_new"), getattr(lib, f"itsme_{kind}_free")
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


def test_null_bytes_leave_sessions_running(raw):
    session, message = online_first_message(raw)
    assert lib.itsme_online_verify_receive(session, None, len(message), T0) == R.ITSME_E_INVALID_ARGUMENT
    assert online_state(session) == itsme.ONLINE_VERIFY_RUNNING
    ok(lib.itsme_online_verify_receive(session, as_array(message), len(message), T0))
    update = new_pin_update(raw)
    assert lib.itsme_pin_update_receive(update, None, 34, T0) == R.ITSME_E_INVALID_ARGUMENT
    assert pin_update_state(update) == itsme.PIN_UPDATE_RUNNING


def test_online_verify_needs_the_store_it_was_started_on(raw, tmp_path):
    session = online_comparing(raw)
    other = c_void_p()
    ok(lib.itsme_store_open(raw.bare_identity, str(tmp_path / "other-online.db").encode(), byref(other)))
    try:
        outcome = c_uint32(0xAAAA)
        assert lib.itsme_online_verify_confirm(session, other, T0, byref(outcome)) == R.ITSME_E_INVALID_ARGUMENT
        assert (online_state(session), outcome.value) == (itsme.ONLINE_VERIFY_COMPARE_SAS, 0xAAAA)
        ok(lib.itsme_online_verify_confirm(session, raw.contacts, T0, byref(outcome)))
        assert outcome.value == itsme.VOICE_VERIFIED_TAG_UNCHECKED, "contacts added without device secrets"
        assert online_state(session) == itsme.ONLINE_VERIFY_CONFIRMED
    finally:
        lib.itsme_store_free(other.value)


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
    for session, store in ((mine, raw.contacts), (theirs, raw.bare_contacts)):
        ok(lib.itsme_online_verify_confirm(session, store, T0, byref(outcome)))
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
        result = ApprovalResultStruct()
        ctypes.memset(byref(result), FILL, ctypes.sizeof(result))
        got = lib.itsme_approval_verify(
            as_array(request), len(request), as_array(approval), len(approval), as_array(enrollment[1:33]), 1,
            store.value, APPROVAL_NOW, byref(result),
        )
        if code in itsme.RESULT_CODES.values():
            assert got == code
        else:  # a code this library does not know comes back as one it does
            assert got != R.ITSME_OK and got in itsme.RESULT_CODES.values() and got != R.ITSME_E_REPLAYED
        assert bytes(result) == bytes([FILL]) * ctypes.sizeof(result), "no result on failure"
        assert len(calls) == 1 and calls[0][0] == RAW_CTX and calls[0][2:] == (APPROVAL_NOW + 300, APPROVAL_NOW)
    finally:
        lib.itsme_replay_store_free(store.value)


def test_approval_verify_with_no_keys_is_not_found(raw):
    enroll_raw(raw.store)
    request = request_raw()
    approval = approval_raw(raw.store, request)
    result = ApprovalResultStruct()
    code = lib.itsme_approval_verify(
        as_array(request), len(request), as_array(approval), len(approval), as_array(b"\0"), 0, new_replay(raw),
        APPROVAL_NOW, byref(result),
    )
    assert code == R.ITSME_E_NOT_FOUND


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
    big = (ctypes.c_uint8 * 512)()
    results = {
        "version": lib.itsme_version_string().decode(),
        "message": lib.itsme_result_message(3).decode(),
        "sizes": [lib.itsme_public_key_bytes(), lib.itsme_fingerprint_size(), lib.itsme_name_max_bytes()],
        "new_memory": lib.itsme_secret_store_new_memory(ctypes.byref(out)),
        "open_file": lib.itsme_secret_store_open_file(sys.argv[2].encode(), ctypes.byref(out)),
        "new_callbacks": lib.itsme_secret_store_new_callbacks(None, ctypes.byref(out)),
        "identity_load": lib.itsme_identity_load(None, ctypes.byref(out)),
        "fingerprint": lib.itsme_fingerprint_from_public_key(key, 32, buf, 17, ctypes.byref(n)),
        "random": lib.itsme_random_new_deterministic(key, 32, ctypes.byref(out)),
        "exchange": lib.itsme_exchange_new_qr(None, None, 0, ctypes.byref(out)),
        "short_code": lib.itsme_short_code_parse(b"ECHO 0042", ctypes.byref(ctypes.c_uint32())),
        "derive_sas": lib.itsme_derive_sas(key, 32, key, 32, buf, 17, ctypes.byref(n)),
        "voice_new": lib.itsme_voice_new(None, 1, 0, ctypes.byref(out)),
        "online_verify_new": lib.itsme_online_verify_new(None, 1, 0, None, 0, ctypes.byref(out)),
        "pin_update_new": lib.itsme_pin_update_new(None, 1, 0, None, 0, ctypes.byref(out)),
        "derive_degradation_code": lib.itsme_derive_degradation_code(key, 32, key, 32, key, 10, buf, 17, ctypes.byref(n)),
        "derive_session_id": lib.itsme_derive_session_id(key, 32, 1, buf, 17, ctypes.byref(n)),
        "profile_create": lib.itsme_profile_create(None, b"Name", None, 0, None, None, ctypes.byref(out)),
        "profile_open": lib.itsme_profile_open(key, 32, key, 32, key, 32, ctypes.byref(out)),
        "credential_enroll": lib.itsme_credential_enroll(None, b"a.example", b"Phone", key, 16, None, big, 512, ctypes.byref(n)),
        "enrollment_verify": lib.itsme_enrollment_verify(
            b"a.example", key, 16, key, 32, ctypes.byref(ffi.CredentialInfoStruct())),
        "approval_request_create": lib.itsme_approval_request_create(
            b"a.example", b"A", b"s", None, 60, None, 1, big, 512, ctypes.byref(n)),
        "replay_store_new_memory": lib.itsme_replay_store_new_memory(0, ctypes.byref(out)),
        "replay_store_new_callbacks": lib.itsme_replay_store_new_callbacks(None, ctypes.byref(out)),
        "nato_word": lib.itsme_nato_word(0).decode(),
        "out": out.value,
        "init": [lib.itsme_init(), lib.itsme_init()],
        "after_init": lib.itsme_secret_store_new_memory(ctypes.byref(out)),
    }
    print(json.dumps(results))
    """
)


def uninitialised(tmp_path):
    """The results of _UNINITIALISED, run in a process that never called itsme_init."""
    ffi_path = os.path.join(os.path.dirname(itsme.__file__), "_ffi.py")
    directory = tmp_path / "never-created"
    result = subprocess.run(
        [sys.executable, "-c", _UNINITIALISED, ffi_path, str(directory)],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ),
    )
    return directory, json.loads(result.stdout)


def test_calls_before_init_are_refused(tmp_path):
    directory, got = uninitialised(tmp_path)
    assert got["version"] == itsme.version()
    assert got["message"] == itsme.result_message(R.ITSME_E_NOT_INITIALIZED)
    assert got["sizes"] == [32, 17, 128]
    for call in (
        "new_memory",
        "open_file",
        "new_callbacks",
        "identity_load",
        "fingerprint",
        "random",
        "exchange",
        "short_code",
        "derive_sas",
        "voice_new",
        "derive_session_id",
        "online_verify_new",
        "pin_update_new",
        "derive_degradation_code",
        "profile_create",
        "profile_open",
    ):
        assert got[call] == R.ITSME_E_NOT_INITIALIZED, call
    assert got["nato_word"] == "ALFA", "needs no itsme_init()"
    assert got["out"] == 0xDEADBEEF
    assert not directory.exists()
    assert got["init"] == [R.ITSME_OK, R.ITSME_OK]
    assert got["after_init"] == R.ITSME_OK


def test_approval_calls_before_init_are_refused(tmp_path):
    _, got = uninitialised(tmp_path)
    for call in (
        "credential_enroll",
        "enrollment_verify",
        "approval_request_create",
        "replay_store_new_memory",
        "replay_store_new_callbacks",
    ):
        assert got[call] == R.ITSME_E_NOT_INITIALIZED, call
    assert got["out"] == 0xDEADBEEF


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
            code = lib.itsme_voice_new(store, contact_id, 2**63 - 1, ctypes.byref(out))
        elif case == "last window near INT64_MAX":
            try:  # the store refuses a window past the year 9999
                contacts.use_window(contact_id, 2**63 // 30)
                raise SystemExit("use_window accepted a window past the year 9999")
            except itsme.InvalidArgumentError:
                pass
            contacts.use_window(contact_id, 253402300799 // 30 - 1)
            code = lib.itsme_voice_new(store, contact_id, 1_700_000_000, ctypes.byref(out))
        else:  # "timing at INT64_MIN"
            assert lib.itsme_voice_new(store, contact_id, 1_700_000_000, ctypes.byref(out)) == 0
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
