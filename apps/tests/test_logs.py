"""The relay's logs carry no body, no token and no full ID (PROTOCOL.md 15.7)."""

import base64
import json
import os
import re
import signal
import time

import pytest

from relaytest import pair, random_token, recv_binary, run


def encodings(secret: bytes) -> dict:
    return {
        "raw": secret,
        "hex": secret.hex().encode(),
        "base64url": base64.urlsafe_b64encode(secret).rstrip(b"="),
        "base64": base64.b64encode(secret).rstrip(b"="),
    }


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_logs_carry_no_bodies_tokens_or_full_ids(relay, log_format):
    r = relay(log_format=log_format)
    api = r.api()
    secrets_seen = {}

    # A whole invite exchange, with a few refusals on the way.
    invite = api.open_invite()
    secrets_seen.update(invite_id=invite.id.encode(), inviter_token=invite.inviter.encode(),
                        invitee_token=invite.invitee.encode())
    bodies = [b"MARKER-A-" + os.urandom(24), b"MARKER-B-" + os.urandom(24)]
    assert api.post(invite.id, invite.inviter, bodies[0]).status_code == 201
    assert api.post(invite.id, invite.invitee, bodies[1]).status_code == 201
    assert api.messages(invite.id, invite.invitee) == [(1, bodies[0])]
    assert api.messages(invite.id, invite.inviter) == [(1, bodies[1])]
    wrong_token = random_token()
    assert api.fetch(invite.id, wrong_token).status_code == 404
    secrets_seen["wrong_token"] = wrong_token.encode()
    assert api.create(invite.id).status_code == 409
    assert api.post(invite.id, invite.inviter, b"").status_code == 400
    assert api.delete(invite.id, invite.invitee).status_code == 204
    assert api.fetch(invite.id, invite.inviter).status_code == 404

    # A record.
    record_id = os.urandom(16).hex()
    record = b"RECORD-" + os.urandom(24)
    put = api.put_record(record_id, record)
    assert put.status_code == 201
    delete_token = put.json()["delete_token"]
    assert api.get_record(record_id).content == record
    assert api.delete_record(record_id, random_token()).status_code == 403
    assert api.delete_record(record_id, delete_token).status_code == 204
    secrets_seen.update(record_id=record_id.encode(), delete_token=delete_token.encode())

    # A room exchange.
    frame = b"FRAME-" + os.urandom(24)

    async def scenario():
        room, a, b = await pair(r)
        await a.send(frame)
        assert await recv_binary(b) == frame
        await b.send(frame[::-1])
        assert await recv_binary(a) == frame[::-1]
        await a.send("text closes the connection")
        await b.close()
        await a.close()
        return room

    room = run(scenario())
    secrets_seen["room_id"] = room.encode()

    r.signal(signal.SIGTERM)
    r.wait(10)
    logs = r.stderr_bytes()
    for name, secret in secrets_seen.items():
        assert secret not in logs, f"the logs contain the {name}"
        if name.endswith("_id"):
            assert secret[:9] not in logs, f"the logs contain more than the first 8 characters of the {name}"
    for n, body in enumerate(bodies + [record, frame, frame[::-1]]):
        for form, encoded in encodings(body).items():
            assert encoded not in logs, f"the logs contain body {n} ({form})"
    for marker in (b"MARKER-A-", b"MARKER-B-", b"RECORD-", b"FRAME-"):
        assert marker not in logs, f"the logs contain the body marker {marker!r}"


TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def test_json_logs_are_one_object_a_line(relay):
    r = relay(log_format="json", shutdown_timeout=2)
    api = r.api()
    invite = api.open_invite()
    assert api.delete(invite.id, invite.inviter).status_code == 204
    r.signal(signal.SIGHUP)  # logged: there is no certificate to reload
    deadline = time.monotonic() + 10
    while "SIGHUP" not in r.stderr_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    r.signal(signal.SIGTERM)
    r.wait(10)
    lines = r.stderr_text().splitlines()
    assert len(lines) >= 2, lines
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            pytest.fail(f"not a JSON line: {line!r}")
        assert set(entry) == {"time", "level", "label", "message", "metadata"}, entry
        assert TIME.fullmatch(entry["time"]), entry["time"]
        assert entry["level"] in ("info", "notice", "warning", "error", "critical"), entry
        assert isinstance(entry["message"], str) and entry["message"], entry
        assert isinstance(entry["metadata"], dict), entry
    messages = [json.loads(line)["message"] for line in lines]
    assert any("SIGHUP" in m for m in messages), messages


def test_an_unknown_log_format_is_refused():
    from operatortest import run_relay

    result = run_relay(["--port", "0", "--database", ":memory:", "--log-format", "xml"])
    assert result.code != 0
    assert "--log-format" in result.stderr and "json" in result.stderr, result.stderr
