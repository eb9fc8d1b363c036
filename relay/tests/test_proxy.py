"""The client address behind a trusted proxy (PROTOCOL.md 15.5)."""

import pytest

from relaytest import assert_error, new_id


def lookup(api, forwarded_for):
    return api.accept(new_id(), headers={"X-Forwarded-For": forwarded_for})


def test_behind_the_trusted_proxy_each_forwarded_address_has_its_own_budget(relay):
    r = relay(trusted_proxy="127.0.0.1", lookup_rate=2)
    api = r.api()
    assert_error(lookup(api, "10.0.0.1"), 404, "not-found")
    assert_error(lookup(api, "10.0.0.1"), 404, "not-found")
    assert_error(lookup(api, "10.0.0.1"), 429, "rate-limited")
    assert_error(lookup(api, "10.0.0.2"), 404, "not-found")
    assert_error(lookup(api, "10.0.0.2"), 404, "not-found")
    assert_error(lookup(api, "10.0.0.2"), 429, "rate-limited")
    assert_error(lookup(api, "10.0.0.3"), 404, "not-found")


def test_the_last_forwarded_address_is_the_client(relay):
    r = relay(trusted_proxy="127.0.0.1", lookup_rate=2)
    api = r.api()
    assert_error(lookup(api, "10.0.0.1"), 404, "not-found")
    assert_error(lookup(api, "10.0.0.1"), 404, "not-found")
    # The proxy appends the address it saw; what the client wrote before is not trusted.
    assert_error(lookup(api, "10.9.9.9, 10.0.0.1"), 429, "rate-limited")
    assert_error(lookup(api, "10.0.0.1, 10.0.0.4"), 404, "not-found")


@pytest.mark.parametrize("proxy", [None, "127.0.0.9"], ids=["no-proxy", "other-proxy"])
def test_without_a_trusted_proxy_the_header_is_ignored(relay, proxy):
    r = relay(trusted_proxy=proxy, lookup_rate=2)
    api = r.api()
    assert_error(lookup(api, "10.0.0.1"), 404, "not-found")
    assert_error(lookup(api, "10.0.0.2"), 404, "not-found")
    # All three came from 127.0.0.1, whatever the header says.
    assert_error(lookup(api, "10.0.0.3"), 429, "rate-limited")
    assert_error(api.accept(new_id()), 429, "rate-limited")
    r.assert_serving()
