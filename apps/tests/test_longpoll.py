"""Held fetches (`wait`, PROTOCOL.md 15.2): an exchange at network speed."""

import threading
import time

import pytest

from relaytest import assert_error, unb64url


class HeldFetch(threading.Thread):
    """A fetch on its own connection, timed from its start to its answer."""

    def __init__(self, relay, invite_id, token, **params):
        super().__init__(daemon=True)
        self.api = relay.api()
        self.args = (invite_id, token)
        self.params = params
        self.response = None
        self.error = None
        self.started_at = None
        self.answered_at = None

    def run(self):
        self.started_at = time.monotonic()
        try:
            self.response = self.api.fetch(*self.args, timeout=40, **self.params)
        except Exception as exc:  # reported by the test
            self.error = exc
        self.answered_at = time.monotonic()

    def result(self, timeout):
        self.join(timeout)
        assert not self.is_alive(), f"the held fetch did not answer within {timeout} s"
        assert self.error is None, f"the held fetch failed: {self.error!r}"
        return self.response


@pytest.mark.parametrize("waiter", ["invitee", "inviter"])
def test_held_fetch_answers_as_soon_as_the_other_side_posts(relay, waiter):
    r = relay()
    api = r.api()
    invite = api.open_invite()
    poster = "inviter" if waiter == "invitee" else "invitee"
    held = HeldFetch(r, invite.id, getattr(invite, waiter), wait=5)
    held.start()
    time.sleep(0.5)
    assert held.is_alive(), "the fetch answered before anything was posted"
    posted_at = time.monotonic()
    assert api.post(invite.id, getattr(invite, poster), b"\x00now\xff").status_code == 201
    response = held.result(5)
    delay = held.answered_at - posted_at
    assert response.status_code == 200, response.text
    messages = response.json()["messages"]
    assert [(m["seq"], unb64url(m["body"])) for m in messages] == [(1, b"\x00now\xff")]
    assert delay < 1.0, f"the held fetch answered {delay:.2f} s after the post"


def test_held_fetch_with_after_waits_for_a_newer_message(relay):
    r = relay()
    api = r.api()
    invite = api.open_invite()
    assert api.post(invite.id, invite.inviter, b"old").status_code == 201
    held = HeldFetch(r, invite.id, invite.invitee, after=1, wait=5)
    held.start()
    time.sleep(0.5)
    assert held.is_alive(), "a fetch after=1 answered although only seq 1 exists"
    posted_at = time.monotonic()
    assert api.post(invite.id, invite.inviter, b"new").status_code == 201
    response = held.result(5)
    assert response.status_code == 200, response.text
    assert [(m["seq"], unb64url(m["body"])) for m in response.json()["messages"]] == [(2, b"new")]
    assert held.answered_at - posted_at < 1.0


def test_held_fetch_with_a_message_already_there_answers_at_once(relay):
    api = relay().api()
    invite = api.open_invite()
    assert api.post(invite.id, invite.inviter, b"waiting for you").status_code == 201
    start = time.monotonic()
    response = api.fetch(invite.id, invite.invitee, wait=10)
    assert time.monotonic() - start < 1.0
    assert response.status_code == 200
    assert len(response.json()["messages"]) == 1


def test_held_fetch_with_nothing_answers_an_empty_list_when_the_time_is_up(relay):
    api = relay().api()
    invite = api.open_invite()
    start = time.monotonic()
    response = api.fetch(invite.id, invite.invitee, wait=1)
    elapsed = time.monotonic() - start
    assert response.status_code == 200, response.text
    assert response.json() == {"accepted": True, "messages": []}
    assert 0.9 <= elapsed < 2.5, f"wait=1 answered after {elapsed:.2f} s"


def test_own_posts_do_not_wake_a_held_fetch(relay):
    r = relay()
    api = r.api()
    invite = api.open_invite()
    held = HeldFetch(r, invite.id, invite.invitee, wait=2)
    held.start()
    time.sleep(0.3)
    assert api.post(invite.id, invite.invitee, b"talking to myself").status_code == 201
    response = held.result(5)
    assert response.status_code == 200
    assert response.json()["messages"] == []
    assert held.answered_at - held.started_at >= 1.8


@pytest.mark.parametrize(
    "params",
    [{"wait": 31}, {"wait": -1}, {"wait": "x"}, {"wait": 1000000}, {"after": "x"}, {"after": "1x"}],
    ids=["wait-31", "wait-negative", "wait-text", "wait-huge", "after-text", "after-suffix"],
)
def test_out_of_range_or_malformed_parameters_are_bad_requests(relay, params):
    r = relay()
    api = r.api()
    invite = api.open_invite()
    start = time.monotonic()
    assert_error(api.fetch(invite.id, invite.invitee, **params), 400, "bad-request")
    assert time.monotonic() - start < 1.0, "a refused fetch was held"
    r.assert_serving()


def test_wait_30_is_accepted(relay):
    r = relay()
    api = r.api()
    invite = api.open_invite()
    held = HeldFetch(r, invite.id, invite.invitee, wait=30)
    held.start()
    time.sleep(0.3)
    assert held.is_alive(), "wait=30 was not held"
    assert api.post(invite.id, invite.inviter, b"x").status_code == 201
    assert held.result(5).status_code == 200


@pytest.mark.parametrize("deleter", ["inviter", "invitee"])
def test_held_fetch_answers_not_found_when_the_invite_ends(relay, deleter):
    r = relay()
    api = r.api()
    invite = api.open_invite()
    waiter = "invitee" if deleter == "inviter" else "inviter"
    held = HeldFetch(r, invite.id, getattr(invite, waiter), wait=10)
    held.start()
    time.sleep(0.5)
    assert held.is_alive()
    deleted_at = time.monotonic()
    assert api.delete(invite.id, getattr(invite, deleter)).status_code == 204
    response = held.result(5)
    assert_error(response, 404, "not-found")
    assert held.answered_at - deleted_at < 1.0


def test_every_held_fetch_of_a_side_answers_when_the_other_side_posts(relay):
    r = relay()
    api = r.api()
    invite = api.open_invite()
    held = [HeldFetch(r, invite.id, invite.invitee, wait=5) for _ in range(3)]
    for fetch in held:
        fetch.start()
    time.sleep(0.5)
    posted_at = time.monotonic()
    assert api.post(invite.id, invite.inviter, b"to all").status_code == 201
    for fetch in held:
        response = fetch.result(5)
        assert response.status_code == 200
        assert [unb64url(m["body"]) for m in response.json()["messages"]] == [b"to all"]
        assert fetch.answered_at - posted_at < 1.0
