"""The encrypted contact store through the Python binding, including the
cross-process guarantees: one winner per verification window, and no
committed change lost when a writer is killed."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading

import pytest

import itsme
from itsme import ContactStore, ExchangeMethod, Identity, SecretStore, VerificationState

T0 = 1_800_000_000
BINDING = os.path.join(os.path.dirname(__file__), "..")


def key(n: int) -> bytes:
    return hashlib.sha256(b"key %d" % n).digest()


def seed(n: int) -> bytes:
    return hashlib.sha256(b"seed %d" % n).digest()


@pytest.fixture
def me(tmp_path):
    with SecretStore.file(tmp_path / "secrets") as secrets:
        identity = Identity.create(secrets, "Me")
        yield identity
        identity.close()


@pytest.fixture
def store(me, tmp_path):
    with ContactStore.open(me, tmp_path / "contacts.db") as s:
        yield s


def test_round_trip(store):
    cid = store.add("Alice", key(1), seed(1), ExchangeMethod.BLUETOOTH, now=T0)
    c = store.get(cid)
    assert (c.id, c.name, c.public_key, c.method, c.created_at) == (cid, "Alice", key(1), ExchangeMethod.BLUETOOTH, T0)
    assert c.fingerprint == hashlib.sha256(key(1)).digest()[:8].hex().upper()
    assert c.authenticated and c.state == VerificationState.UNVERIFIED and not c.acknowledged
    assert c.verified_at is None and c.last_window is None and c.note == ""
    assert store.get_by_key(key(1)) == c
    assert store.find_fingerprint(c.fingerprint.lower()) == [c]
    assert store.count() == 1 and store.list() == [c]
    store.set_name(cid, "Alicia")
    store.set_note(cid, "met at the bakery")
    store.set_state(cid, VerificationState.VERIFIED, now=T0 + 9)
    c = store.get(cid)
    assert (c.name, c.note, c.state, c.verified_at) == ("Alicia", "met at the bakery", VerificationState.VERIFIED, T0 + 9)
    store.set_state(cid, VerificationState.DEGRADED, acknowledged=True, now=T0 + 10)
    assert store.get(cid).acknowledged
    store.delete(cid)
    with pytest.raises(itsme.NotFoundError):
        store.get(cid)
    assert store.count() == 0


def test_ids_are_never_reused(store):
    a = store.add("A", key(1), seed(1), now=T0)
    b = store.add("B", key(2), seed(2), now=T0)
    store.delete(b)
    assert store.add("C", key(3), seed(3), now=T0) > b > a


def test_refusals(store, me):
    store.add("A", key(1), seed(1), now=T0)
    with pytest.raises(itsme.AlreadyExistsError):
        store.add("A again", key(1), seed(2), now=T0)
    with pytest.raises(itsme.InvalidKeyError):
        store.add("Me", me.public_key, seed(1), now=T0)
    with pytest.raises(itsme.InvalidKeyError):
        store.add("Short", key(2)[:31], seed(1), now=T0)
    with pytest.raises(itsme.InvalidArgumentError):
        store.add("Bad seed", key(2), seed(1)[:31], now=T0)
    with pytest.raises(itsme.InvalidArgumentError):
        store.add("", key(2), seed(1), now=T0)
    with pytest.raises(itsme.InvalidArgumentError):
        store.set_note(1, "x" * 4097)
    assert store.count() == 1


def test_unauthenticated_contacts_never_merge(store):
    keyed = store.add("Keyed", key(1), seed(1), now=T0)
    fingerprint = store.get(keyed).fingerprint
    old = store.add_unauthenticated("Old format", fingerprint, seed(2), now=T0)
    found = store.find_fingerprint(fingerprint)
    assert [c.id for c in found] == [keyed, old]
    assert not found[1].authenticated and found[1].public_key is None
    with pytest.raises(itsme.InvalidArgumentError):
        store.add_unauthenticated("Bad", "not-a-fingerprint", seed(3), now=T0)


def test_windows(store):
    cid = store.add("A", key(1), seed(1), now=T0)
    store.use_window(cid, 100)
    for again in (100, 99, 0):
        with pytest.raises(itsme.WindowUsedError):
            store.use_window(cid, again)
    store.use_window(cid, 101)
    assert store.get(cid).last_window == 101


def test_paging(store):
    ids = [store.add(f"C{i}", key(i), seed(i), now=T0) for i in range(23)]
    assert [c.id for c in store.iterate(page_size=5)] == ids
    assert [c.id for c in store.list(after_id=ids[9], limit=3)] == ids[10:13]


def test_wrong_identity_and_non_database_files_change_nothing(me, tmp_path):
    path = tmp_path / "contacts.db"
    with ContactStore.open(me, path) as s:
        s.add("A", key(1), seed(1), now=T0)
    before = path.read_bytes()
    with SecretStore.memory() as other_secrets, Identity.create(other_secrets, "Other") as other:
        with pytest.raises(itsme.WrongIdentityError):
            ContactStore.open(other, path)
    assert path.read_bytes() == before
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    with pytest.raises(itsme.DatabaseError) as info:
        ContactStore.open(me, text)
    assert "not" in info.value.detail
    assert text.read_text() == "not a database\n" * 100


def test_nothing_readable_at_rest(me, tmp_path):
    path = tmp_path / "contacts.db"
    name, note = "Zebediah Quonset-Marlowe", "lives above the lighthouse"
    with ContactStore.open(me, path) as s:
        cid = s.add(name, key(1), seed(1), now=T0)
        s.set_note(cid, note)
        fingerprint = s.get(cid).fingerprint
        files = [p for p in tmp_path.iterdir() if p.name.startswith("contacts.db")]
        assert any(p.name.endswith("-wal") for p in files)
        for p in files:
            data = p.read_bytes()
            for secret in (name.encode(), note.encode(), fingerprint.encode(), bytes.fromhex(fingerprint), key(1), seed(1)):
                assert secret not in data, (p.name, secret)


def test_tampered_records_are_reported_not_skipped(me, tmp_path):
    path = tmp_path / "contacts.db"
    with ContactStore.open(me, path) as s:
        a = s.add("A", key(1), seed(1), now=T0)
        b = s.add("B", key(2), seed(2), now=T0)
    db = sqlite3.connect(path)
    ra, rb = (db.execute("SELECT record FROM contacts WHERE id = ?", (i,)).fetchone()[0] for i in (a, b))
    db.execute("UPDATE contacts SET record = ? WHERE id = ?", (rb, a))  # swap one row's record
    db.commit()
    db.close()
    with ContactStore.open(me, path) as s:
        with pytest.raises(itsme.AuthenticationFailedError):
            s.get(a)
        with pytest.raises(itsme.AuthenticationFailedError):
            s.list()
        assert s.get(b).name == "B"


def test_one_handle_from_many_threads(store):
    errors = []

    def worker(n):
        try:
            for i in range(20):
                cid = store.add(f"T{n}-{i}", key(1000 * n + i), seed(i), now=T0)
                store.set_note(cid, f"note {i}")
                assert store.get(cid).note == f"note {i}"
        except Exception as error:  # noqa: BLE001 - collected for the assertion
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.count() == 160


# -- several processes -----------------------------------------------------


def _race_for_windows(secrets_dir, db_path, contact_id, windows, barrier, results):
    import itsme as child_itsme

    with child_itsme.SecretStore.file(secrets_dir) as secrets, child_itsme.Identity.load(secrets) as identity:
        with child_itsme.ContactStore.open(identity, db_path) as s:
            won = []
            barrier.wait()
            for w in windows:
                try:
                    s.use_window(contact_id, w)
                    won.append(w)
                except child_itsme.WindowUsedError:
                    pass
            results.put(won)


def test_processes_racing_for_windows_win_each_once(me, tmp_path):
    db_path = str(tmp_path / "contacts.db")
    with ContactStore.open(me, db_path) as s:
        cid = s.add("A", key(1), seed(1), now=T0)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    windows = list(range(1000, 1020))
    procs = [
        ctx.Process(target=_race_for_windows, args=(str(tmp_path / "secrets"), db_path, cid, windows, barrier, results))
        for _ in range(4)
    ]
    for p in procs:
        p.start()
    won = [w for _ in procs for w in results.get(timeout=120)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    # Windows only grow: every window is won at most once, and the last one
    # by someone.
    assert len(won) == len(set(won))
    assert max(won) == windows[-1]


WRITER = textwrap.dedent(
    """
    import hashlib, sys
    import itsme
    secrets_dir, db_path, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with itsme.SecretStore.file(secrets_dir) as secrets, itsme.Identity.load(secrets) as me:
        with itsme.ContactStore.open(me, db_path) as s:
            ids = []
            for i in range(start, start + 100000):
                if i % 3 == 2 and ids:
                    cid = ids[i % len(ids)]
                    s.set_note(cid, "note %d" % i)
                    print("note", cid, i, flush=True)
                else:
                    cid = s.add("Contact %d" % i, hashlib.sha256(b"k%d" % i).digest(),
                                hashlib.sha256(b"s%d" % i).digest(), now=1800000000)
                    ids.append(cid)
                    print("add", cid, i, flush=True)
    """
)


def test_killed_writer_loses_no_committed_change(me, tmp_path):
    """A writer reports each change after its call returned; it is killed
    with SIGKILL at random moments; every reported change must be there."""
    secrets_dir, db_path = str(tmp_path / "secrets"), str(tmp_path / "contacts.db")
    env = dict(os.environ, PYTHONPATH=BINDING)
    rng = random.Random(20261121)
    added, latest_note = {}, {}
    start = 0
    for _ in range(8):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, secrets_dir, db_path, str(start)],
            stdout=subprocess.PIPE, env=env, text=True,
        )
        stop_after = rng.randint(1, 150)
        for _ in range(stop_after):
            line = proc.stdout.readline()
            if not line:
                break
            kind, cid, i = line.split()
            if kind == "add":
                added[int(cid)] = f"Contact {i}"
            else:
                latest_note[int(cid)] = int(i)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
        start += 100000

        check = sqlite3.connect(db_path)
        assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        check.close()
        with ContactStore.open(me, db_path) as s:
            for cid, name in added.items():
                assert s.get(cid).name == name
            for cid, i in latest_note.items():
                note = s.get(cid).note
                # The reported note, or a later one the writer made but had
                # not reported yet when it was killed.
                assert note.startswith("note ") and int(note.split()[1]) >= i, (cid, note, i)
    assert len(added) > 8
