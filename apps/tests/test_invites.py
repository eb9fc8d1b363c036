"""Invite mailbox (PROTOCOL.md 15.2): create, accept, messages, delete, errors."""

import time

import pytest

from relaytest import assert_error, assert_token, new_id, random_token, retry_after, unb64url


def test_create_returns_a_token_and_an_expiry_24_hours_ahead(relay):
    api = relay().api()
    before = time.time()
    response = api.create(new_id())
    after = time.time()
    assert response.status_code == 201, response.text
    body = response.json()
    assert_token(body["token"])
    assert isinstance(body["expires"], (int, float))
    assert before + 86400 - 2 <= body["expires"] <= after + 86400 + 2


def test_create_on_an_id_in_use_is_a_conflict(relay):
    api = relay().api()
    invite_id = new_id()
    assert api.create(invite_id).status_code == 201
    assert_error(api.create(invite_id), 409, "conflict")
    # The first invite is untouched.
    assert api.accept(invite_id).status_code == 200


def test_accept_returns_the_invitee_token_once(relay):
    api = relay().api()
    invite_id = new_id()
    created = api.create(invite_id).json()
    response = api.accept(invite_id)
    assert response.status_code == 200, response.text
    body = response.json()
    assert_token(body["token"])
    assert body["token"] != created["token"]
    assert abs(body["expires"] - created["expires"]) <= 1
    assert_error(api.accept(invite_id), 409, "conflict")


def test_accept_of_an_unknown_invite_is_not_found(relay):
    api = relay().api()
    assert_error(api.accept(new_id()), 404, "not-found")


def test_inviter_may_post_before_anyone_accepted(relay):
    api = relay().api()
    invite = api.open_invite(accept=False)
    response = api.post(invite.id, invite.inviter, b"first")
    assert response.status_code == 201, response.text
    assert response.json() == {"seq": 1}
    fetched = api.fetch(invite.id, invite.inviter)
    assert fetched.status_code == 200, fetched.text
    assert fetched.json() == {"accepted": False, "messages": []}
    invitee = api.accept(invite.id).json()["token"]
    assert api.messages(invite.id, invitee) == [(1, b"first")]


def test_accepted_flag_tells_whether_an_invitee_is_bound(relay):
    api = relay().api()
    invite = api.open_invite(accept=False)
    assert api.fetch(invite.id, invite.inviter).json()["accepted"] is False
    invitee = api.accept(invite.id).json()["token"]
    assert api.fetch(invite.id, invite.inviter).json()["accepted"] is True
    assert api.fetch(invite.id, invitee).json()["accepted"] is True


def test_both_sides_read_the_other_sides_messages_in_order_with_exact_bytes(relay):
    api = relay().api()
    invite = api.open_invite()
    from_inviter = [bytes(range(256)), b"\x00", b"\xff" * 3, b"\x00\xff\x00\xff" + b"tail"]
    from_invitee = [b"\xff\xfe\xfd", bytes(reversed(range(256))) * 4]
    for n, body in enumerate(from_inviter, 1):
        response = api.post(invite.id, invite.inviter, body)
        assert response.status_code == 201, response.text
        assert response.json() == {"seq": n}
    for n, body in enumerate(from_invitee, 1):
        response = api.post(invite.id, invite.invitee, body)
        assert response.status_code == 201, response.text
        assert response.json() == {"seq": n}

    raw = api.fetch(invite.id, invite.invitee).json()
    assert raw["accepted"] is True
    for message in raw["messages"]:
        assert set(message) == {"seq", "body"}
        assert isinstance(message["body"], str) and "=" not in message["body"]
    assert api.messages(invite.id, invite.invitee) == list(enumerate(from_inviter, 1))
    assert api.messages(invite.id, invite.inviter) == list(enumerate(from_invitee, 1))


def test_fetch_returns_only_messages_after_the_given_seq(relay):
    api = relay().api()
    invite = api.open_invite()
    for body in (b"one", b"two", b"three"):
        assert api.post(invite.id, invite.inviter, body).status_code == 201
    assert api.messages(invite.id, invite.invitee, after=0) == [(1, b"one"), (2, b"two"), (3, b"three")]
    assert api.messages(invite.id, invite.invitee, after=1) == [(2, b"two"), (3, b"three")]
    assert api.messages(invite.id, invite.invitee, after=2) == [(3, b"three")]
    assert api.messages(invite.id, invite.invitee, after=3) == []
    assert api.messages(invite.id, invite.invitee, after=100) == []


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Basic dXNlcjpwYXNz",
        "Bearer " + "A" * 42,
        "Bearer " + "A" * 44,
        "Bearer " + "A" * 42 + "=",
        "Bearer " + "A" * 42 + "+",
        "Bearer " + "A" * 42 + "/",
        "Token " + "A" * 43,
    ],
    ids=["absent", "empty", "scheme-only", "basic", "short", "long", "padded",
         "plus", "slash", "other-scheme"],
)
def test_missing_or_malformed_token_is_unauthorized(relay, authorization):
    r = relay()
    api = r.api()
    invite = api.open_invite()
    headers = {} if authorization is None else {"Authorization": authorization}
    assert_error(api.post(invite.id, None, b"x", headers=headers), 401, "unauthorized")
    assert_error(api.fetch(invite.id, None, headers=headers), 401, "unauthorized")
    assert_error(api.delete(invite.id, None, headers=headers), 401, "unauthorized")
    # Nothing happened to the invite.
    assert api.messages(invite.id, invite.invitee) == []
    assert api.post(invite.id, invite.inviter, b"still here").status_code == 201


def test_well_formed_wrong_token_answers_like_an_unknown_invite(relay):
    api = relay().api()
    invite = api.open_invite()
    other = api.open_invite()
    unknown = assert_error(api.fetch(new_id(), invite.inviter), 404, "not-found")
    wrong = random_token()
    for token in (wrong, other.inviter, other.invitee):
        assert assert_error(api.fetch(invite.id, token), 404, "not-found") == unknown
        assert assert_error(api.post(invite.id, token, b"x"), 404, "not-found") == unknown
        assert assert_error(api.delete(invite.id, token), 404, "not-found") == unknown
    # The invite itself is intact.
    assert api.post(invite.id, invite.inviter, b"ok").status_code == 201
    assert api.messages(invite.id, invite.invitee) == [(1, b"ok")]


def test_each_side_may_post_at_most_max_messages(relay):
    api = relay(max_messages=3).api()
    invite = api.open_invite()
    for n in (1, 2, 3):
        assert api.post(invite.id, invite.inviter, b"m%d" % n).json() == {"seq": n}
    assert_error(api.post(invite.id, invite.inviter, b"m4"), 409, "limit")
    assert_error(api.post(invite.id, invite.inviter, b"m5"), 409, "limit")
    # The limit is per side: the invitee still posts, and nothing was lost.
    assert api.post(invite.id, invite.invitee, b"reply").json() == {"seq": 1}
    assert api.messages(invite.id, invite.invitee) == [(1, b"m1"), (2, b"m2"), (3, b"m3")]
    api.relay.assert_serving()


def test_default_message_limit_is_65536_bytes(relay):
    api = relay().api()
    invite = api.open_invite()
    biggest = bytes(range(256)) * 256
    assert len(biggest) == 65536
    assert api.post(invite.id, invite.inviter, biggest).status_code == 201
    assert_error(api.post(invite.id, invite.inviter, biggest + b"!"), 413, "too-large")
    assert api.messages(invite.id, invite.invitee) == [(1, biggest)]


def test_message_over_max_message_is_too_large(relay):
    r = relay(max_message=1024)
    api = r.api()
    invite = api.open_invite()
    assert api.post(invite.id, invite.inviter, b"\xab" * 1024).status_code == 201
    assert_error(api.post(invite.id, invite.inviter, b"\xab" * 1025), 413, "too-large")
    assert_error(api.post(invite.id, invite.inviter, b"\xab" * 100_000), 413, "too-large")
    # The refused posts took no sequence number.
    assert api.post(invite.id, invite.inviter, b"next").json() == {"seq": 2}
    r.assert_serving()


def test_empty_message_body_is_a_bad_request(relay):
    api = relay().api()
    invite = api.open_invite()
    assert_error(api.post(invite.id, invite.inviter, b""), 400, "bad-request")
    assert api.post(invite.id, invite.inviter, b"x").json() == {"seq": 1}


@pytest.mark.parametrize("side", ["inviter", "invitee"])
def test_delete_by_either_side_ends_the_invite(relay, side):
    api = relay().api()
    invite = api.open_invite()
    assert api.post(invite.id, invite.inviter, b"hello").status_code == 201
    assert api.post(invite.id, invite.invitee, b"hi").status_code == 201
    unknown = assert_error(api.fetch(new_id(), invite.inviter), 404, "not-found")

    response = api.delete(invite.id, getattr(invite, side))
    assert response.status_code == 204, response.text
    assert response.content == b""

    for token in (invite.inviter, invite.invitee):
        assert assert_error(api.fetch(invite.id, token), 404, "not-found") == unknown
        assert assert_error(api.post(invite.id, token, b"x"), 404, "not-found") == unknown
        assert assert_error(api.delete(invite.id, token), 404, "not-found") == unknown
    assert assert_error(api.accept(invite.id), 404, "not-found") == unknown


def test_unknown_invite_answers_not_found_on_every_route(relay):
    api = relay().api()
    token = random_token()
    invite_id = new_id()
    bodies = [
        assert_error(api.accept(invite_id), 404, "not-found"),
        assert_error(api.fetch(invite_id, token), 404, "not-found"),
        assert_error(api.post(invite_id, token, b"x"), 404, "not-found"),
        assert_error(api.delete(invite_id, token), 404, "not-found"),
    ]
    assert all(body == bodies[0] for body in bodies), bodies


BAD_IDS = [
    ("uppercase", "0123456789ABCDEF0123456789ABCDEF"),
    ("31-chars", "0" * 31),
    ("33-chars", "0" * 33),
    ("non-hex", "g" * 32),
    ("prefix", "0x" + "0" * 30),
    ("dashes", "01234567-89ab-cdef-0123-456789abcdef"[:32]),
]


@pytest.mark.parametrize("bad_id", [b for _, b in BAD_IDS], ids=[n for n, _ in BAD_IDS])
def test_malformed_invite_ids_are_refused_with_bad_id(relay, bad_id):
    r = relay()
    api = r.api()
    token = random_token()
    assert_error(api.create(bad_id), 400, "bad-id")
    assert_error(api.accept(bad_id), 400, "bad-id")
    assert_error(api.post(bad_id, token, b"x"), 400, "bad-id")
    assert_error(api.fetch(bad_id, token), 400, "bad-id")
    assert_error(api.delete(bad_id, token), 400, "bad-id")
    r.assert_serving()


def test_an_inviter_does_not_read_its_own_messages(relay):
    api = relay().api()
    invite = api.open_invite()
    assert api.post(invite.id, invite.inviter, b"mine").status_code == 201
    assert api.messages(invite.id, invite.inviter) == []
    assert api.messages(invite.id, invite.invitee) == [(1, b"mine")]


def test_message_bodies_are_base64url_not_base64(relay):
    api = relay().api()
    invite = api.open_invite()
    body = b"\xfb\xff\xbf" * 10  # base64 '+' and '/' territory
    assert api.post(invite.id, invite.inviter, body).status_code == 201
    encoded = api.fetch(invite.id, invite.invitee).json()["messages"][0]["body"]
    assert "+" not in encoded and "/" not in encoded
    assert unb64url(encoded) == body


def test_live_invites_beyond_max_invites_get_503_busy(relay):
    r = relay(max_invites=2)
    api = r.api()
    first = api.open_invite()
    api.open_invite(accept=False)
    response = api.create(new_id())
    assert_error(response, 503, "busy")
    assert retry_after(response.headers) >= 1
    # Existing invites keep working, and an ended invite frees its place.
    assert api.post(first.id, first.inviter, b"x").status_code == 201
    assert api.delete(first.id, first.invitee).status_code == 204
    assert api.create(new_id()).status_code == 201
    r.assert_serving()


def test_the_default_is_16_messages_per_side(relay):
    api = relay().api()
    invite = api.open_invite()
    for n in range(1, 17):
        assert api.post(invite.id, invite.invitee, b"%d" % n).json() == {"seq": n}
    assert_error(api.post(invite.id, invite.invitee, b"17"), 409, "limit")
    assert len(api.messages(invite.id, invite.inviter)) == 16
