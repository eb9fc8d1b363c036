"""Secret stores implemented in Python through the callback table."""

import gc
import threading
import time
import re
from ctypes import byref, c_size_t, c_uint8

import pytest

import itsme
from itsme import ContactStore, Exchange, Identity, Result, SecretStore
from itsme import _store

from conftest import DictBackend

T0 = 1_700_000_000
ITEM_NAME = re.compile(r"[a-z0-9_-][a-z0-9._-]{0,127}")


def identity_items(backend):
    """Creates an identity in ``backend``; returns its fingerprint and item names."""
    with SecretStore.from_callbacks(backend) as store, Identity.create(store, "Dict") as ident:
        return ident.fingerprint, sorted(backend.items)


def test_create_writes_items_into_the_dict(backend):
    with SecretStore.from_callbacks(backend) as store:
        assert store.backend is backend
        with Identity.create(store, "Dict") as ident:
            ident.set_pin("123456")
            with pytest.raises(itsme.WrongPinError):
                ident.verify_pin("000000", T0)
    assert backend.items
    assert any(call == "put" for call, _ in backend.calls)
    for name, value in backend.items.items():
        assert ITEM_NAME.fullmatch(name), name
        assert isinstance(value, bytes) and value
    for name, level in backend.accessibility.items():
        assert level == itsme.Accessibility.WHEN_UNLOCKED_THIS_DEVICE_ONLY, name
        assert isinstance(level, int)


def test_items_are_those_documented(backend):
    # docs/STORAGE.md: the items, their version byte and the identity layout.
    name = "Zoë"
    with SecretStore.from_callbacks(backend) as store, Identity.create(store, name) as ident:
        assert sorted(backend.items) == ["itsme.identity"]
        ident.set_pin("123456")
        with pytest.raises(itsme.WrongPinError):
            ident.verify_pin("000000", T0)
    assert sorted(backend.items) == ["itsme.identity", "itsme.limiter.pin", "itsme.pin"]
    record = backend.items["itsme.identity"]
    encoded = name.encode()
    assert len(record) == 1 + 32 + 32 + 2 + len(encoded)
    assert record[0] == 1
    assert record[65:67] == len(encoded).to_bytes(2, "big") and record[67:] == encoded
    assert len(backend.items["itsme.pin"]) == 1 + 1 + 8 + 8 + 16 + 32
    limiter = backend.items["itsme.limiter.pin"]
    assert limiter == bytes([1]) + (1).to_bytes(4, "big") + T0.to_bytes(8, "big")


def identity_record(name_bytes, version=1):
    return bytes([version]) + bytes(64) + len(name_bytes).to_bytes(2, "big") + name_bytes


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(identity_record(b""), id="empty-name"),
        pytest.param(identity_record(b"a\x01b"), id="control-character"),
        pytest.param(identity_record(b"\xff\xfe"), id="invalid-utf8"),
        pytest.param(identity_record(b"a" * 129), id="name-too-long"),
        pytest.param(identity_record(b"ok", version=2), id="version-2"),
        pytest.param(identity_record(b"ok")[:-3], id="name-truncated"),
    ],
)
def test_planted_identity_records(backend, record):
    backend.items["itsme.identity"] = identity_record(b"ok")
    with SecretStore.from_callbacks(backend) as store, Identity.load(store) as ident:
        assert ident.name == "ok"  # the hand-made record is well-formed
    backend.items["itsme.identity"] = record
    with SecretStore.from_callbacks(backend) as store:
        with pytest.raises(itsme.CorruptDataError):
            Identity.load(store)


def test_planted_pin_parameters_are_refused_before_hashing(backend):
    with SecretStore.from_callbacks(backend) as store, Identity.create(store, "Pin") as ident:
        ident.set_pin("123456")
        record = bytearray(backend.items["itsme.pin"])
        record[10:18] = (1 << 40).to_bytes(8, "big")  # memlimit 1 TiB
        backend.items["itsme.pin"] = bytes(record)
        with pytest.raises(itsme.CorruptDataError):
            ident.verify_pin("123456", T0)


def test_tampered_limiter_is_corrupt(backend):
    with SecretStore.from_callbacks(backend) as store, Identity.create(store, "Pin") as ident:
        ident.set_pin("123456")
        backend.items["itsme.limiter.pin"] = backend.items["itsme.limiter.pin"][:-1]
        with pytest.raises(itsme.CorruptDataError):
            ident.pin_status(T0)
        with pytest.raises(itsme.CorruptDataError):
            ident.verify_pin("123456", T0)


def test_second_store_over_the_same_dict(backend):
    fingerprint, _ = identity_items(backend)
    other = type(backend)(backend.items)
    with SecretStore.from_callbacks(other) as store, Identity.load(store) as ident:
        assert ident.fingerprint == fingerprint
        assert ident.name == "Dict"
    assert any(call == "get" for call, _ in other.calls)


def test_pin_through_callbacks(backend):
    with SecretStore.from_callbacks(backend) as store, Identity.create(store, "Pin") as ident:
        ident.set_pin("123456")
        for _ in range(5):
            with pytest.raises(itsme.WrongPinError):
                ident.verify_pin("000000", T0)
    other = type(backend)(backend.items)
    with SecretStore.from_callbacks(other) as store, Identity.load(store) as ident:
        assert ident.pin_status(T0) == (5, 300)
        with pytest.raises(itsme.LockedError):
            ident.verify_pin("123456", T0)


class FlakyBackend:
    """A dict backend whose methods raise while ``failing`` names them."""

    def __init__(self):
        self.items = {}
        self.failing = set()

    def _maybe_fail(self, method):
        if method in self.failing:
            raise RuntimeError(f"{method} exploded")

    def get(self, name):
        self._maybe_fail("get")
        return self.items.get(name)

    def put(self, name, value, accessibility):
        self._maybe_fail("put")
        self.items[name] = value

    def remove(self, name):
        self._maybe_fail("remove")
        return self.items.pop(name, None) is not None


@pytest.mark.parametrize("method", ["get", "put"])
def test_callback_exception_becomes_secret_store_error(method, capfd):
    backend = FlakyBackend()
    backend.failing.add(method)
    with SecretStore.from_callbacks(backend) as store:
        with pytest.raises(itsme.ItsMeError) as info:
            Identity.create(store, "Boom")
        error = info.value
        assert isinstance(error, itsme.SecretStoreError)
        assert error.code == Result.ITSME_E_SECRET_STORE
        assert error.name == "ITSME_E_SECRET_STORE"
        assert isinstance(error.__cause__, RuntimeError)
        assert str(error.__cause__) == f"{method} exploded"
        # The store still works once the backend recovers.
        backend.failing.clear()
        with Identity.create(store, "Fine") as ident:
            assert ident.name == "Fine"
    # Nothing was printed by ctypes about an unhandled callback exception.
    assert "Traceback" not in capfd.readouterr().err


def test_callback_exception_during_pin_verify():
    flaky = FlakyBackend()
    with SecretStore.from_callbacks(flaky) as store, Identity.create(store, "Pin") as ident:
        ident.set_pin("123456")
        flaky.failing.add("put")
        with pytest.raises(itsme.SecretStoreError):
            ident.verify_pin("000000", T0)
        flaky.failing.clear()
        ident.verify_pin("123456", T0)


@pytest.mark.parametrize("bad_value", ["a string", 12345, object()])
def test_get_returning_a_non_bytes_value(bad_value):
    class Odd(FlakyBackend):
        def get(self, name):
            return bad_value

    with SecretStore.from_callbacks(Odd()) as store:
        with pytest.raises(itsme.SecretStoreError) as info:
            Identity.load(store)
        assert isinstance(info.value.__cause__, TypeError)


def test_get_may_return_any_bytes_like(backend):
    fingerprint, _ = identity_items(backend)

    class ByteArrays(type(backend)):
        def get(self, name):
            value = super().get(name)
            return None if value is None else memoryview(bytearray(value))

    with SecretStore.from_callbacks(ByteArrays(backend.items)) as store, Identity.load(store) as ident:
        assert ident.fingerprint == fingerprint


def test_backend_without_methods_is_a_type_error():
    class NoRemove:
        def get(self, name):
            return None

        def put(self, name, value, accessibility):
            pass

    with pytest.raises(TypeError):
        SecretStore.from_callbacks(NoRemove())


def tamper_all(backend, change):
    for name in list(backend.items):
        backend.items[name] = change(backend.items[name])


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda b: b[:-1], id="drop-last-byte"),
        pytest.param(lambda b: b[: len(b) // 2], id="truncate-half"),
        pytest.param(lambda b: b[:1], id="version-only"),
        pytest.param(lambda b: b"", id="empty"),
        pytest.param(lambda b: bytes([b[0] ^ 0xFF]) + b[1:], id="flip-version-byte"),
        pytest.param(lambda b: bytes([b[0] + 1]) + b[1:], id="next-version"),
        pytest.param(lambda b: b + b"\0", id="trailing-byte"),
        pytest.param(lambda b: b + bytes(1000), id="large-trailing"),
    ],
)
def test_tampered_identity_is_corrupt(backend, change):
    identity_items(backend)
    tamper_all(backend, change)
    with SecretStore.from_callbacks(backend) as store:
        with pytest.raises(itsme.ItsMeError) as info:
            Identity.load(store)
        assert info.value.code == Result.ITSME_E_CORRUPT_DATA, repr(info.value)
        assert isinstance(info.value, itsme.CorruptDataError)


def test_tampered_pin_record_is_corrupt(backend):
    with SecretStore.from_callbacks(backend) as store, Identity.create(store, "Pin") as ident:
        identity_names = set(backend.items)
        ident.set_pin("123456")
        pin_names = set(backend.items) - identity_names
        assert pin_names
        for name in pin_names:
            value = backend.items[name]
            backend.items[name] = bytes([value[0] ^ 0xFF]) + value[1:]
        for call in (ident.pin_is_set, lambda: ident.verify_pin("123456", T0), lambda: ident.pin_status(T0)):
            with pytest.raises(itsme.ItsMeError) as info:
                call()
            assert info.value.code == Result.ITSME_E_CORRUPT_DATA, repr(info.value)


def call_get(ctx, name, cap):
    """Calls the binding's C get entry point the way the library does."""
    buf = (c_uint8 * max(cap, 1)).from_buffer_copy(b"\xaa" * max(cap, 1))
    out_len = c_size_t(12345)
    code = _store._GET(ctx, name, buf, cap, byref(out_len))
    return code, bytes(buf)[:cap], out_len.value


def test_get_callback_buffer_protocol(backend):
    backend.items["big"] = bytes(range(256)) * 4
    with SecretStore.from_callbacks(backend) as store:
        ctx = store._ctx
        code, buf, length = call_get(ctx, b"big", 0)
        assert (code, length) == (Result.ITSME_E_BUFFER_TOO_SMALL, 1024)
        code, buf, length = call_get(ctx, b"big", 1023)
        assert (code, length) == (Result.ITSME_E_BUFFER_TOO_SMALL, 1024)
        assert buf == b"\xaa" * 1023, "nothing written to a too-small buffer"
        code, buf, length = call_get(ctx, b"big", 1024)
        assert (code, length, buf) == (Result.ITSME_OK, 1024, backend.items["big"])
        code, buf, length = call_get(ctx, b"missing", 16)
        assert (code, length, buf) == (Result.ITSME_E_NOT_FOUND, 12345, b"\xaa" * 16)


def test_remove_callback(backend):
    backend.items["there"] = b"x"
    with SecretStore.from_callbacks(backend) as store:
        assert _store._REMOVE(store._ctx, b"there") == Result.ITSME_OK
        assert "there" not in backend.items
        assert _store._REMOVE(store._ctx, b"there") == Result.ITSME_E_NOT_FOUND


def test_put_callback_copies_the_value(backend):
    data = (c_uint8 * 3)(1, 2, 3)
    with SecretStore.from_callbacks(backend) as store:
        assert _store._PUT(store._ctx, b"item", data, 3, 1) == Result.ITSME_OK
        data[0] = 9
        assert backend.items["item"] == b"\x01\x02\x03"
        assert backend.accessibility["item"] == itsme.Accessibility.AFTER_FIRST_UNLOCK_THIS_DEVICE_ONLY


def test_callbacks_refuse_unknown_ctx():
    assert _store._GET(987654321, b"x", None, 0, byref(c_size_t())) == Result.ITSME_E_SECRET_STORE
    assert _store._GET(None, b"x", None, 0, byref(c_size_t())) == Result.ITSME_E_INVALID_ARGUMENT
    itsme._errors.check(Result.ITSME_OK)  # forget the KeyError recorded above


def test_destroy_runs_when_store_and_identities_are_freed(backend):
    store = SecretStore.from_callbacks(backend)
    ctx = store._ctx
    assert _store._registry[ctx] is backend
    first = Identity.create(store, "One")
    second = Identity.load(store)
    store.close()
    assert ctx in _store._registry, "identities keep the store alive"
    first.close()
    assert ctx in _store._registry
    second.close()
    assert ctx not in _store._registry


def test_destroy_runs_on_garbage_collection(backend):
    store = SecretStore.from_callbacks(backend)
    ctx = store._ctx
    ident = Identity.create(store, "Collected")
    del store, ident
    gc.collect()
    assert ctx not in _store._registry


def test_registry_empties(backend):
    before = set(_store._registry)
    for _ in range(20):
        with SecretStore.from_callbacks(type(backend)()) as store:
            Identity.create(store, "Many").close()
    gc.collect()
    assert set(_store._registry) <= before


class SerialCheckingBackend(FlakyBackend):
    """Records how many callbacks ever ran at the same time."""

    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()
        self.active = 0
        self.most_active = 0

    def _enter(self):
        with self._lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        time.sleep(0.0005)  # give other threads a chance to overlap

    def _leave(self):
        with self._lock:
            self.active -= 1

    def get(self, name):
        self._enter()
        try:
            return super().get(name)
        finally:
            self._leave()

    def put(self, name, value, accessibility):
        self._enter()
        try:
            super().put(name, value, accessibility)
        finally:
            self._leave()


def test_callbacks_from_several_threads():
    backend = SerialCheckingBackend()
    errors = []

    def worker(ident):
        try:
            for _ in range(3):
                ident.verify_pin("123456", T0)
                ident.pin_status(T0)
        except BaseException as error:  # reported below
            errors.append(error)

    with SecretStore.from_callbacks(backend) as store, Identity.create(store, "Threads") as ident:
        ident.set_pin("123456")
        handles = [Identity.load(store) for _ in range(3)]
        threads = [threading.Thread(target=worker, args=(h,)) for h in handles + [ident]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for handle in handles:
            handle.close()
        assert errors == []
        assert ident.pin_status(T0) == (0, 0)
    assert backend.most_active == 1, "callbacks of one store ran concurrently"


def test_failed_set_name_keeps_the_old_name():
    backend = FlakyBackend()
    with SecretStore.from_callbacks(backend) as store, Identity.create(store, "Old") as ident:
        saved = dict(backend.items)
        backend.failing.add("put")
        with pytest.raises(itsme.SecretStoreError):
            ident.name = "New"
        assert ident.name == "Old"
        assert backend.items == saved
        backend.failing.clear()
        with Identity.load(store) as loaded:
            assert loaded.name == "Old"


class HookedBackend(DictBackend):
    """A dict backend that runs ``hook`` once, at the start of the next get."""

    def __init__(self):
        super().__init__()
        self.hook = None

    def get(self, name):
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()
        return super().get(name)


def raised_by(call):
    """The ItsMeError ``call`` raised, or None."""
    try:
        call()
    except itsme.ItsMeError as error:
        return error
    return None


def test_a_callback_calling_back_into_its_own_store_is_refused_not_a_crash():
    # A host's callback that uses the store (or the identity) it serves, on
    # the same thread, while the library holds that store's lock: the
    # inner call fails with a code, the outer one goes on.
    backend = HookedBackend()
    with SecretStore.from_callbacks(backend) as store, Identity.create(store, "Again") as ident:
        ident.set_pin("123456")
        inner = []
        backend.hook = lambda: inner.append(raised_by(lambda: Identity.load(store).close()))
        ident.verify_pin("123456", T0)
        assert isinstance(inner[0], itsme.SecretStoreError), inner
        assert "again" in str(inner[0]) or "inside" in str(inner[0]), str(inner[0])
        backend.hook = lambda: inner.append(raised_by(lambda: ident.verify_pin("123456", T0)))
        ident.verify_pin("123456", T0)
        assert isinstance(inner[1], itsme.InvalidStateError), inner
        # Nothing was left locked: both work from the outside.
        ident.verify_pin("123456", T0)
        with Identity.load(store) as again:
            assert again.fingerprint == ident.fingerprint


def store_mark_commits(backend):
    """The commit count of the one contact store mark in ``backend``
    (docs/STORAGE.md: version | store id (16) | commits (8) | contacts (8))."""
    (mark,) = [value for name, value in backend.items.items() if name.startswith("itsme.store-mark.")]
    return int.from_bytes(mark[17:25], "big")


@pytest.mark.parametrize("during", ["get", "get-under-exclusive-access"])
def test_a_store_released_inside_a_callback_leaves_its_mark_trailing(tmp_path, during):
    # Python's collector may run inside any callback and free an exchange
    # holding the last reference to a contact store whose mark is due: the
    # store's close raises the mark through the same secret store, whose
    # lock (and for the second case the process-wide read-modify-write lock)
    # this thread holds. That raise is refused, the mark trails, and the
    # next open raises it.
    backend = HookedBackend()
    secrets = SecretStore.from_callbacks(backend)
    ident = Identity.create(secrets, "Alice")
    ident.set_pin("123456")
    path = tmp_path / "contacts.db"
    contacts = ContactStore.open(ident, path)
    peer_secrets = SecretStore.memory()
    peer = Identity.create(peer_secrets, "Bob")
    peer_contacts = ContactStore.open(peer, tmp_path / "peer.db")
    held = [Exchange.qr(ident, contacts, T0)]
    other = Exchange.qr(peer, peer_contacts, T0)
    held[0].receive(other.next_outgoing(), T0)
    other.receive(held[0].next_outgoing(), T0)
    contact_id = held[0].save(T0)  # raises the mark at once
    held[0].confirm(T0)  # within 2 s: this commit's raise waits for the close
    contacts.close()  # the exchange now holds the last reference
    trailing = store_mark_commits(backend)

    def release():
        held.clear()
        gc.collect()

    backend.hook = release
    if during == "get":
        Identity.load(secrets).close()
    else:
        ident.verify_pin("123456", T0)  # the attempt limiter's read-modify-write
    assert not held and backend.hook is None, "the release ran inside the callback"
    assert store_mark_commits(backend) == trailing, "the refused raise wrote nothing"
    with ContactStore.open(ident, path) as reopened:
        assert reopened.get(contact_id).state == itsme.VerificationState.VERIFIED
    assert store_mark_commits(backend) > trailing, "the open raised the mark"
    for closing in (other, peer_contacts, peer, peer_secrets, ident, secrets):
        closing.close()
