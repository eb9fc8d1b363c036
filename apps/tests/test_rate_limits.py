"""Per-address rate limits on invite misses and on creation (PROTOCOL.md 15.2, 15.4)."""

import time

from relaytest import assert_error, new_id, random_token, retry_after


def test_invite_misses_beyond_the_lookup_rate_are_rate_limited(relay):
    r = relay(lookup_rate=5)
    api = r.api()
    for _ in range(5):
        assert_error(api.accept(new_id()), 404, "not-found")
    response = api.accept(new_id())
    assert_error(response, 429, "rate-limited")
    assert retry_after(response.headers) >= 1
    # Every miss route is limited for this address now, not just accept.
    token = random_token()
    assert_error(api.fetch(new_id(), token), 429, "rate-limited")
    assert_error(api.post(new_id(), token, b"x"), 429, "rate-limited")
    assert_error(api.delete(new_id(), token), 429, "rate-limited")
    assert r.api().health().status_code == 200
    r.assert_serving()


def test_every_kind_of_miss_counts(relay):
    r = relay(lookup_rate=4)
    api = r.api()
    invite = api.open_invite()
    token = random_token()
    assert_error(api.accept(new_id()), 404, "not-found")
    assert_error(api.fetch(new_id(), token), 404, "not-found")
    assert_error(api.post(new_id(), token, b"x"), 404, "not-found")
    assert_error(api.fetch(invite.id, token), 404, "not-found")  # wrong token on a live invite
    assert_error(api.delete(new_id(), token), 429, "rate-limited")


def test_a_rate_limited_address_is_limited_on_invite_routes_even_with_a_valid_token(relay):
    r = relay(lookup_rate=5)
    api = r.api()
    invite = api.open_invite()
    for _ in range(5):
        assert_error(api.accept(new_id()), 404, "not-found")
    assert_error(api.accept(new_id()), 429, "rate-limited")
    assert_error(api.fetch(invite.id, invite.invitee), 429, "rate-limited")
    assert_error(api.post(invite.id, invite.inviter, b"x"), 429, "rate-limited")
    assert r.api().health().status_code == 200


def test_successful_requests_are_not_counted_as_misses(relay):
    r = relay(lookup_rate=3)
    api = r.api()
    invite = api.open_invite()
    for _ in range(12):
        assert api.fetch(invite.id, invite.invitee).status_code == 200
        assert api.post(invite.id, invite.inviter, b"x").status_code == 201
    for _ in range(3):
        assert_error(api.accept(new_id()), 404, "not-found")
    assert_error(api.accept(new_id()), 429, "rate-limited")


def test_the_lookup_budget_refills_continuously(relay):
    """One miss comes back each second: never all at once, never none.

    The bounds are counted from the clock, not assumed: on a loaded machine
    the requests themselves take time, and that time refills the budget too.
    """
    r = relay(lookup_rate=60)  # one miss back per second
    api = r.api()

    def misses_until_limited(limit: int) -> tuple[int, object]:
        for n in range(limit + 1):
            response = api.accept(new_id())
            if response.status_code == 429:
                return n, response
            assert_error(response, 404, "not-found")
        raise AssertionError(f"{limit + 1} misses in a row and no 429")

    start = time.monotonic()
    taken, response = misses_until_limited(200)
    elapsed = time.monotonic() - start
    assert 60 <= taken <= 60 + elapsed + 1, f"{taken} misses in {elapsed:.2f} s from a budget of 60"
    assert_error(response, 429, "rate-limited")
    wait = retry_after(response.headers)
    assert 1 <= wait <= 2, f"Retry-After {wait} s although one miss comes back each second"

    limited_at = time.monotonic()
    time.sleep(1.3)
    taken, _ = misses_until_limited(200)
    elapsed = time.monotonic() - limited_at
    # Less than one miss was left when the 429 came; 1.3 s and more passed since.
    assert 1 <= taken <= elapsed + 1, f"{taken} misses came back in {elapsed:.2f} s"


def test_invite_creation_beyond_the_create_rate_is_rate_limited(relay):
    r = relay(create_rate=3)
    api = r.api()
    for _ in range(3):
        assert api.create(new_id()).status_code == 201
    response = api.create(new_id())
    assert_error(response, 429, "rate-limited")
    assert retry_after(response.headers) >= 1
    assert r.api().health().status_code == 200
    r.assert_serving()


def test_record_puts_count_against_the_create_rate(relay):
    r = relay(create_rate=3)
    api = r.api()
    assert api.create(new_id()).status_code == 201
    assert api.put_record(new_id(), b"record one").status_code == 201
    assert api.create(new_id()).status_code == 201
    response = api.put_record(new_id(), b"record two")
    assert_error(response, 429, "rate-limited")
    assert retry_after(response.headers) >= 1
    assert_error(api.create(new_id()), 429, "rate-limited")


def test_the_default_lookup_rate_is_20_misses_a_minute(relay):
    api = relay(lookup_rate=None).api()
    for _ in range(20):
        assert_error(api.accept(new_id()), 404, "not-found")
    assert_error(api.accept(new_id()), 429, "rate-limited")


def test_the_default_create_rate_is_60_a_minute(relay):
    api = relay(create_rate=None).api()
    for _ in range(60):
        assert api.create(new_id()).status_code == 201
    assert_error(api.create(new_id()), 429, "rate-limited")
