"""Deleted data is gone from the database file and its write-ahead log
(PROTOCOL.md 15.2: secure_delete, checkpoint after each deletion)."""

import base64
import os
import stat
import time

import pytest

from relaytest import new_id, unb64url


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
    deadline = time.monotonic() + 2.0
    while True:
        data = stored_bytes(r)
        left = {i: found(data, m) for i, m in enumerate(markers) if found(data, m)}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not left, f"deleted message bytes still in the database files: {left}"
    r.assert_serving()


def test_deleting_one_invite_keeps_the_others(relay):
    r = relay()
    api = r.api()
    doomed, kept = api.open_invite(), api.open_invite()
    doomed_marker, kept_marker = os.urandom(64), os.urandom(64)
    assert api.post(doomed.id, doomed.inviter, doomed_marker).status_code == 201
    assert api.post(kept.id, kept.inviter, kept_marker).status_code == 201
    assert api.delete(doomed.id, doomed.invitee).status_code == 204
    time.sleep(0.2)
    data = stored_bytes(r)
    assert not found(data, doomed_marker)
    assert found(data, kept_marker)
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
