"""`itsme demo` and `itsme relay serve|set|show`."""

import re


def test_demo(run):
    result = run("demo", timeout=60)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines[-1].startswith("Summary: all"), lines[-5:]
    assert "FAIL" not in result.stdout
    assert re.search(r"Summary: all \d+ checks held\.", lines[-1])


def test_relay_serve(cli_bin, server):
    process, line = server(
        [cli_bin, "relay", "serve", "--", "--host", "127.0.0.1", "--port", "0", "--database", ":memory:"]
    )
    assert re.fullmatch(r"itsme-relay listening on http://127\.0\.0\.1:\d+\n", line), line
    assert process.poll() is None
    process.terminate()
    # SIGTERM: the relay stops cleanly.
    assert process.wait(timeout=30) == 0


def test_relay_set_and_show(people, relay_url):
    alice = people("Alice", init=True)
    assert alice.json("relay", "show", pin_file=False) == {"source": "none"}
    alice.ok("relay", "set", relay_url, pin_file=False)
    shown = alice.json("relay", "show", pin_file=False)
    assert shown["source"] == "config" and shown["relay"].rstrip("/") == relay_url.rstrip("/")
    # The relay set is used by the commands that need one.
    created = alice.json("invite", "create")
    assert created["state"] == "awaiting-peer"
    alice.ok("invite", "cancel")
    # The environment wins over the setting.
    alice.env["ITSME_RELAY"] = "http://127.0.0.1:1"
    assert alice.json("relay", "show", pin_file=False) == {"source": "ITSME_RELAY", "relay": "http://127.0.0.1:1"}
