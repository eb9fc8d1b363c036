"""Invite expiry (PROTOCOL.md 15.2), driven by the relay's test clock file."""

from relaytest import assert_error, new_id

START = 1_800_000_000.25


def set_clock(path, now):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(repr(float(now)))
    tmp.replace(path)


def start_with_clock(relay, tmp_path, now=START):
    clock = tmp_path / "clock"
    set_clock(clock, now)
    return relay(clock_file=clock), clock


def test_expires_is_24_hours_after_creation_on_the_relay_clock(relay, tmp_path):
    r, clock = start_with_clock(relay, tmp_path)
    api = r.api()
    response = api.create(new_id())
    assert response.status_code == 201
    assert abs(response.json()["expires"] - (START + 86400)) <= 1
    set_clock(clock, START + 1000)
    response = api.create(new_id())
    assert abs(response.json()["expires"] - (START + 1000 + 86400)) <= 1


def test_invite_still_works_just_before_expiry(relay, tmp_path):
    r, clock = start_with_clock(relay, tmp_path)
    api = r.api()
    invite = api.open_invite(accept=False)
    set_clock(clock, START + 86399)
    invitee = api.accept(invite.id)
    assert invitee.status_code == 200, invitee.text
    assert api.post(invite.id, invite.inviter, b"in time").status_code == 201
    assert api.messages(invite.id, invitee.json()["token"]) == [(1, b"in time")]


def test_expired_invite_answers_like_an_unknown_one_on_every_route(relay, tmp_path):
    r, clock = start_with_clock(relay, tmp_path)
    api = r.api()
    invite = api.open_invite()
    pending = api.open_invite(accept=False)
    assert api.post(invite.id, invite.inviter, b"soon gone").status_code == 201
    set_clock(clock, START + 86401)

    unknown = assert_error(api.fetch(new_id(), invite.inviter), 404, "not-found")
    for token in (invite.inviter, invite.invitee):
        assert assert_error(api.fetch(invite.id, token), 404, "not-found") == unknown
        assert assert_error(api.post(invite.id, token, b"late"), 404, "not-found") == unknown
    assert assert_error(api.accept(pending.id), 404, "not-found") == unknown
    assert assert_error(api.delete(invite.id, invite.invitee), 404, "not-found") == unknown
    assert assert_error(api.delete(pending.id, pending.inviter), 404, "not-found") == unknown


def test_an_expired_invite_id_can_be_created_again(relay, tmp_path):
    r, clock = start_with_clock(relay, tmp_path)
    api = r.api()
    invite = api.open_invite()
    assert api.post(invite.id, invite.inviter, b"from the old invite").status_code == 201
    set_clock(clock, START + 86401)
    response = api.create(invite.id)
    assert response.status_code == 201, response.text
    fresh = response.json()["token"]
    assert abs(response.json()["expires"] - (START + 86401 + 86400)) <= 1
    # A new invite: nobody bound, no messages, the old tokens are worthless.
    invitee = api.accept(invite.id)
    assert invitee.status_code == 200, invitee.text
    assert api.messages(invite.id, invitee.json()["token"]) == []
    assert api.fetch(invite.id, fresh).json() == {"accepted": True, "messages": []}
    assert_error(api.fetch(invite.id, invite.inviter), 404, "not-found")
    assert_error(api.fetch(invite.id, invite.invitee), 404, "not-found")
