"""The client address behind a trusted proxy (PROTOCOL.md 15.5)."""

import pytest

from relaytest import assert_error, new_id


def lookup(api, forwarded_for):
    return api.accept(new_id(), headers={"X-Forwarded-For": forwarded_for})


def one_client(api, *forwarded_fors):
    """Lookups with these X-Forwarded-For headers, on a relay with
    lookup_rate=2: the relay counts them against one budget, so the first
    two are answered (404) and the third is refused."""
    first, second, third = forwarded_fors
    assert_error(lookup(api, first), 404, "not-found")
    assert_error(lookup(api, second), 404, "not-found")
    assert_error(lookup(api, third), 429, "rate-limited")


def test_behind_the_trusted_proxy_each_forwarded_address_has_its_own_budget(relay):
    r = relay(trusted_proxy="127.0.0.1", lookup_rate=2)
    api = r.api()
    one_client(api, "10.0.0.1", "10.0.0.1", "10.0.0.1")
    one_client(api, "10.0.0.2", "10.0.0.2", "10.0.0.2")
    assert_error(lookup(api, "10.0.0.3"), 404, "not-found")


def test_the_last_forwarded_address_is_the_client(relay):
    r = relay(trusted_proxy="127.0.0.1", lookup_rate=2)
    api = r.api()
    # The proxy appends the address it saw; what the client wrote before is not trusted.
    one_client(api, "10.0.0.1", "10.0.0.1", "10.9.9.9, 10.0.0.1")
    assert_error(lookup(api, "10.0.0.1, 10.0.0.4"), 404, "not-found")


@pytest.mark.parametrize("proxy", [None, "127.0.0.9"], ids=["no-proxy", "other-proxy"])
def test_without_a_trusted_proxy_the_header_is_ignored(relay, proxy):
    r = relay(trusted_proxy=proxy, lookup_rate=2)
    api = r.api()
    # All three came from 127.0.0.1, whatever the header says.
    one_client(api, "10.0.0.1", "10.0.0.2", "10.0.0.3")
    assert_error(api.accept(new_id()), 429, "rate-limited")
    r.assert_serving()


# ---------------------------------------------------------------------------
# Several proxies: addresses and CIDR ranges, IPv4 and IPv6


@pytest.mark.parametrize("proxies", ["127.0.0.0/8", "10.1.2.3,127.0.0.1", "192.0.2.0/24, 127.0.0.0/30"])
def test_a_range_or_list_of_proxies_is_trusted(relay, proxies):
    r = relay(trusted_proxy=proxies, lookup_rate=2)
    api = r.api()
    one_client(api, "10.0.0.1", "10.0.0.1", "10.0.0.1")
    assert_error(lookup(api, "10.0.0.2"), 404, "not-found")


def test_a_range_that_does_not_hold_the_peer_is_not_trusted(relay):
    r = relay(trusted_proxy="127.0.0.2/31,::1/128", lookup_rate=2)
    one_client(r.api(), "10.0.0.1", "10.0.0.2", "10.0.0.3")


def test_trusted_proxies_in_the_chain_are_skipped(relay):
    """A client behind two trusted proxies (a load balancer, then nginx) is
    the last address that is not a trusted proxy."""
    r = relay(trusted_proxy="127.0.0.1,10.0.0.0/8", lookup_rate=2)
    api = r.api()
    one_client(api, "192.0.2.7, 10.0.0.5", "192.0.2.7, 10.0.0.6", "192.0.2.7, 10.9.0.1")
    # The same address written differently is the same client.
    one_client(api, "2001:db8::1", "2001:0db8:0:0::1", "2001:DB8::1")


def _launch(tmp_path, args, env=None):
    from operatortest import Launched

    relay = Launched(tmp_path, ["--port", "0", "--database", ":memory:", "--lookup-rate", "2"] + args, env)
    relay.wait_listening()
    return relay


def _lookups(base_url, forwarded):
    import httpx

    with httpx.Client(base_url=base_url, timeout=10) as client:
        return [client.post(f"/v1/invites/{new_id()}/accept", headers={"X-Forwarded-For": f}) for f in forwarded]


def test_the_flag_may_be_repeated(tmp_path):
    relay = _launch(tmp_path, ["--trusted-proxy", "10.0.0.1", "--trusted-proxy", "127.0.0.1/32"])
    try:
        answers = _lookups(relay.url, ["10.0.0.1", "10.0.0.1", "10.0.0.1", "10.0.0.2"])
        assert [a.status_code for a in answers] == [404, 404, 429, 404]
    finally:
        relay.stop()


def test_the_environment_variable_takes_a_comma_list(tmp_path):
    relay = _launch(tmp_path, [], env={"ITSME_RELAY_TRUSTED_PROXY": "fd00::/8, 127.0.0.1"})
    try:
        answers = _lookups(relay.url, ["10.0.0.1", "10.0.0.1", "10.0.0.1", "10.0.0.2"])
        assert [a.status_code for a in answers] == [404, 404, 429, 404]
    finally:
        relay.stop()


def test_an_ipv6_proxy_is_trusted(tmp_path):
    import socket

    try:
        probe = socket.socket(socket.AF_INET6)
        probe.bind(("::1", 0))
        probe.close()
    except OSError:
        pytest.skip("no IPv6 loopback here")
    from operatortest import Launched

    relay = Launched(tmp_path, ["--host", "::1", "--port", "0", "--database", ":memory:", "--lookup-rate", "2",
                                "--trusted-proxy", "::1/128"])
    try:
        relay.wait_listening()
        assert relay.host == "[::1]"
        answers = _lookups(relay.url, ["10.0.0.1", "10.0.0.1", "10.0.0.1", "2001:db8::5"])
        assert [a.status_code for a in answers] == [404, 404, 429, 404]
    finally:
        relay.stop()


@pytest.mark.parametrize(
    "entry, shown",
    [
        ("10.0.0.300", "10.0.0.300"),
        ("proxy.example", "proxy.example"),
        ("10.0.0.0/33", "10.0.0.0/33"),
        ("10.0.0.1/8", "10.0.0.1/8"),
        ("fd00::/129", "fd00::/129"),
        ("10.0.0.0/", "10.0.0.0/"),
        ("127.0.0.1,,10.0.0.1", "127.0.0.1,,10.0.0.1"),
    ],
)
def test_an_invalid_entry_is_a_clear_error(entry, shown):
    from operatortest import run_relay

    for args, env in (
        (["--port", "0", "--database", ":memory:", "--trusted-proxy", entry], {}),
        (["--port", "0", "--database", ":memory:"], {"ITSME_RELAY_TRUSTED_PROXY": entry}),
    ):
        result = run_relay(args, env)
        assert result.code != 0, f"{entry!r} was accepted"
        assert "listening" not in result.stdout
        assert "--trusted-proxy" in result.stderr and shown in result.stderr, result.stderr
        assert "Fatal" not in result.stderr and "Stack" not in result.stderr
