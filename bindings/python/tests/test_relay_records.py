"""itsme.relay.RecordStore against a real itsme-relay (docs/PROTOCOL.md 15.4), and a profile
record (section 18) published and fetched through it.

The relay binary is $ITSME_RELAY_BIN, by default apps/.build/debug/itsme-relay (built by
`swift build --package-path apps`); without it these tests are skipped.  The relay runs on
127.0.0.1 (a free port, an in-memory database) for the whole module.
"""

import os
import pathlib
import re
import secrets
import subprocess
import threading

import pytest

import itsme
from itsme.relay import RecordNotFoundError, RecordStore, RelayError

REPO = pathlib.Path(__file__).resolve().parents[3]
RELAY_BIN = pathlib.Path(os.environ.get("ITSME_RELAY_BIN") or REPO / "apps" / ".build" / "debug" / "itsme-relay")
LISTENING = re.compile(r"itsme-relay listening on (https?://\S+)")
TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")
START_TIMEOUT = 30  # a debug build can be slow to start on a busy machine


def _first_line(stream, timeout):
    """The first line of `stream`, or "" if none arrives within `timeout` seconds."""
    lines = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return lines[0].decode("utf-8", "replace") if lines else ""


@pytest.fixture(scope="module")
def relay_url(tmp_path_factory):
    if not RELAY_BIN.exists():
        pytest.skip(
            f"no relay binary at {RELAY_BIN}: build it with `swift build --package-path apps` "
            f"or set ITSME_RELAY_BIN"
        )
    log = tmp_path_factory.mktemp("relay") / "relay.log"
    with open(log, "wb") as errors:
        process = subprocess.Popen(
            [str(RELAY_BIN), "--host", "127.0.0.1", "--port", "0", "--database", ":memory:",
             "--create-rate", "100000", "--lookup-rate", "100000"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors,
        )
    try:
        line = _first_line(process.stdout, START_TIMEOUT)
        match = LISTENING.search(line)
        if not match:
            pytest.fail(f"the relay printed {line!r}, not its listening line; log: {log.read_text()[-2000:]}")
        yield match.group(1)
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        process.stdout.close()


@pytest.fixture
def records(relay_url):
    with RecordStore(relay_url, timeout=10) as store:
        yield store


def new_id():
    return secrets.token_hex(16)


def test_put_then_get_returns_the_same_bytes(records):
    record_id, data = new_id(), bytes(range(256)) * 3 + b"\x00"
    token = records.put(record_id, data)
    assert isinstance(token, str) and TOKEN.fullmatch(token)
    assert records.get(record_id) == data


def test_the_same_bytes_again_return_no_token(records):
    record_id, data = new_id(), os.urandom(100)
    assert records.put(record_id, data) is not None
    assert records.put(record_id, data) is None
    assert records.put(record_id, bytearray(data)) is None
    assert records.get(record_id) == data


def test_other_bytes_under_a_stored_id_conflict(records):
    record_id, data = new_id(), os.urandom(100)
    records.put(record_id, data)
    with pytest.raises(RelayError) as caught:
        records.put(record_id, data + b"!")
    assert (caught.value.status, caught.value.kind) == (409, "conflict")
    assert not isinstance(caught.value, RecordNotFoundError)
    assert records.get(record_id) == data


def test_a_wrong_delete_token_is_forbidden(records):
    record_id, data = new_id(), os.urandom(64)
    token = records.put(record_id, data)
    wrong = "A" * 43 if token != "A" * 43 else "B" * 43
    with pytest.raises(RelayError) as caught:
        records.delete(record_id, wrong)
    assert (caught.value.status, caught.value.kind) == (403, "forbidden")
    assert records.get(record_id) == data


def test_delete_then_get_is_not_found(records):
    record_id = new_id()
    token = records.put(record_id, b"x")
    records.delete(record_id, token)
    with pytest.raises(RecordNotFoundError) as caught:
        records.get(record_id)
    assert (caught.value.status, caught.value.kind) == (404, "not-found")
    with pytest.raises(RecordNotFoundError):
        records.delete(record_id, token)


def test_an_unknown_id_is_not_found(records):
    with pytest.raises(RecordNotFoundError):
        records.get(new_id())


def test_arguments_are_checked_before_any_request(records):
    for bad in ("", "ABCDEF" * 5 + "00", new_id()[:-1], new_id() + "0", "../" + new_id()[3:]):
        with pytest.raises(ValueError):
            records.get(bad)
    with pytest.raises(ValueError):
        records.put(new_id(), b"")
    with pytest.raises(TypeError):
        records.put(new_id(), "text")
    with pytest.raises(ValueError):
        records.delete(new_id(), "short")


def test_an_unreachable_relay_is_a_connection_error():
    with RecordStore("http://127.0.0.1:1", timeout=5) as store:
        with pytest.raises(RelayError) as caught:
            store.get(new_id())
    assert caught.value.kind == "connection" and caught.value.status is None


def test_a_profile_published_and_fetched(records, identity):
    photo = os.urandom(2000)
    with itsme.Profile.create(identity, name="Alice Example", photo=photo, photo_filename="alice.jpg") as profile:
        record, record_name, reference = profile.record, profile.record_name, profile.reference
    assert record_name == record_name.lower() and len(record_name) == 32
    token = records.put(record_name, record)
    assert token is not None
    assert records.put(record_name, record) is None
    fetched = records.get(record_name)
    assert fetched == record
    with itsme.Profile.open(fetched, reference, identity.public_key) as opened:
        assert opened.name == "Alice Example"
        assert opened.photo == photo
        assert opened.photo_filename == "alice.jpg"
        assert opened.record_name == record_name
    records.delete(record_name, token)
    with pytest.raises(RecordNotFoundError):
        records.get(record_name)
