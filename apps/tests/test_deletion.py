"""Deleted data is gone from the database file and its write-ahead log
within a second (PROTOCOL.md 15.2: secure_delete, and one truncating
checkpoint for the deletions of each moment). SQLite only: the PostgreSQL
backend keeps no file of the relay's (15.8)."""

import base64
import os
import stat
import time

import pytest

from relaytest import new_id, unb64url

pytestmark = pytest.mark.sqlite_file

# The relay's promise: erased bytes leave the file and its log within 1 s.
WITHIN = 1.0


def stored_bytes(relay) -> bytes:
    data = b""
    for suffix in ("", "-wal", "-journal"):
        path = relay.database.with_name(relay.database.name + suffix)
        if path.exists():
            data += path.read_bytes()
    return data


def forms(marker: bytes) -> dict:
    return {
        "raw": marker,
        "hex": marker.hex().encode(),
        "HEX": marker.hex().upper().encode(),
        "base64url": base64.urlsafe_b64encode(marker).rstrip(b"="),
        "base64": base64.b64encode(marker).rstrip(b"="),
        # A 48-byte piece catches a copy split at an unaligned base64 offset.
        "base64url-part": base64.urlsafe_b64encode(marker[3:51]),
        "raw-part": marker[8:40],
    }


def found(data: bytes, marker: bytes) -> list:
    return [name for name, form in forms(marker).items() if form in data]


def left_after_deletion(relay, markers) -> dict:
    """The markers still in the files once WITHIN seconds have passed since
    the deletion's answer (read at once if they are already gone)."""
    deadline = time.monotonic() + WITHIN
    while True:
        data = stored_bytes(relay)
        left = {i: found(data, m) for i, m in enumerate(markers) if found(data, m)}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


@pytest.mark.parametrize("deleter", ["inviter", "invitee"])
def test_no_byte_of_a_deleted_invite_stays_in_the_database_or_its_log(relay, deleter):
    r = relay()
    api = r.api()
    invite = api.open_invite()
    markers = [os.urandom(64), os.urandom(64)]
    assert api.post(invite.id, invite.inviter, markers[0]).status_code == 201
    assert api.post(invite.id, invite.invitee, markers[1]).status_code == 201
    # Positive control: the messages are on disk before the deletion, so the
    # search below can find them.
    for marker in markers:
        assert found(stored_bytes(r), marker), "control: a posted message is not found in the database files"

    assert api.delete(invite.id, getattr(invite, deleter)).status_code == 204
    left = left_after_deletion(r, markers)
    assert not left, f"deleted message bytes still in the database files: {left}"
    r.assert_serving()


def test_many_deletions_in_a_row_are_all_gone_within_the_second(relay):
    # One checkpoint takes the deletions of a moment together.
    r = relay()
    api = r.api()
    invites, markers = [], []
    for _ in range(20):
        invite = api.open_invite()
        marker = os.urandom(64)
        assert api.post(invite.id, invite.invitee, marker).status_code == 201
        invites.append(invite)
        markers.append(marker)
    kept = api.open_invite()
    kept_marker = os.urandom(64)
    assert api.post(kept.id, kept.inviter, kept_marker).status_code == 201
    for invite in invites:
        assert api.delete(invite.id, invite.inviter).status_code == 204
    left = left_after_deletion(r, markers)
    assert not left, f"{len(left)} of 20 deleted invites still in the database files"
    assert found(stored_bytes(r), kept_marker), "a live invite's message left the files"
    assert api.messages(kept.id, kept.invitee) == [(1, kept_marker)]


def test_a_deleted_record_is_gone_within_the_second(relay):
    r = relay()
    api = r.api()
    marker = os.urandom(200)
    record_id = new_id()
    created = api.put_record(record_id, marker)
    assert created.status_code == 201
    assert found(stored_bytes(r), marker), "control: the record is not found in the database files"
    assert api.delete_record(record_id, created.json()["delete_token"]).status_code == 204
    left = left_after_deletion(r, [marker])
    assert not left, f"deleted record bytes still in the database files: {left}"


def test_a_relay_killed_right_after_a_deletion_erases_at_its_next_start(relay, tmp_path):
    database = tmp_path / "kept.sqlite"
    r = relay(database=database)
    api = r.api()
    invite = api.open_invite()
    marker = os.urandom(64)
    assert api.post(invite.id, invite.inviter, marker).status_code == 201
    assert api.delete(invite.id, invite.inviter).status_code == 204
    r.kill()
    again = relay(database=database)
    again.assert_serving()
    assert not found(stored_bytes(again), marker), "a deletion before a kill left bytes after the restart"


def test_deleting_one_invite_keeps_the_others(relay):
    r = relay()
    api = r.api()
    doomed, kept = api.open_invite(), api.open_invite()
    doomed_marker, kept_marker = os.urandom(64), os.urandom(64)
    assert api.post(doomed.id, doomed.inviter, doomed_marker).status_code == 201
    assert api.post(kept.id, kept.inviter, kept_marker).status_code == 201
    assert api.delete(doomed.id, doomed.invitee).status_code == 204
    assert not left_after_deletion(r, [doomed_marker])
    assert found(stored_bytes(r), kept_marker)
    assert api.messages(kept.id, kept.invitee) == [(1, kept_marker)]


def test_the_database_and_its_log_are_the_relays_only(relay):
    # Created 0600 whatever the umask: the invites' messages are ciphertext,
    # but their sizes, times and the token hashes are the relay's alone.
    old = os.umask(0)
    try:
        r = relay()
    finally:
        os.umask(old)
    api = r.api()
    invite = api.open_invite()
    assert api.post(invite.id, invite.inviter, b"x").status_code == 201
    files = [p for p in r.database.parent.iterdir() if p.name.startswith(r.database.name)]
    assert r.database in files and len(files) >= 2, files
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_tokens_are_not_stored_in_the_clear(relay):
    r = relay()
    api = r.api()
    invite = api.open_invite()
    record = api.put_record(new_id(), b"record")
    tokens = [invite.inviter, invite.invitee, record.json()["delete_token"]]
    assert api.post(invite.id, invite.inviter, b"x").status_code == 201
    data = stored_bytes(r)
    assert invite.id.encode() in data or bytes.fromhex(invite.id) in data, "control: the invite ID is not on disk"
    for token in tokens:
        raw = unb64url(token)
        for form in (token.encode(), raw, raw.hex().encode()):
            assert form not in data, "a token is stored in the clear"
