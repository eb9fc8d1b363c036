"""Profile records (docs/PROTOCOL.md 18): `itsme profile set|show|clear`
publishes, shows and deletes the person's sealed name and photo on a real
relay, and `itsme online-verify` carries the record's key to the contact,
who fetches, opens and applies it once the SAS is confirmed.

What "done" means: the contact's stored name (and photo) change only when
the person says yes; a new profile replaces the record on the relay (the
old one is gone); the reference (the record's key) is never printed; a
relay that cannot be reached, or a record that cannot be fetched, is a
clean error or a warning and never changes a verification's result."""

import json
import os
import socket
import stat
import urllib.error
import urllib.request

SAS = r"SAS: ([A-Z]+ \d{4})"
CRASH = ("Fatal error", "Stack dump", "backtrace", "Current stack trace")
PHOTO = bytes(range(256)) * 12  # 3,072 bytes: the format is not read


# MARK: helpers


def record_status(relay_url: str, record: str) -> int:
    """The relay's HTTP status for GET /v1/records/RECORD."""
    try:
        with urllib.request.urlopen(f"{relay_url}/v1/records/{record}", timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def saved(person) -> dict:
    return json.loads((person.dir / "profile.json").read_text())


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_one_error_line(result, code, fragment):
    everything = result.stdout + result.stderr
    for crash in CRASH:
        assert crash not in everything, everything
    assert result.returncode == code, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("itsme: "), result.stderr
    assert fragment in lines[0], lines


def online_verify(alice, bob, relay_url, clock, alice_args=(), bob_args=()):
    """Alice and Bob run online-verify together and confirm the SAS; returns
    both terminals, still running (the profile offers come next)."""
    common = ("--relay", relay_url, "--timeout", "40", "--test-clock", clock)
    ta = alice.spawn("online-verify", "Bob", *common, *alice_args)
    tb = bob.spawn("online-verify", "Alice", *common, *bob_args)
    sas = [term.expect(SAS).group(1) for term in (ta, tb)]
    assert sas[0] == sas[1], sas
    for term, peer in ((ta, "Bob"), (tb, "Alice")):
        term.expect_exact(f"Type the SAS {peer} reads to you (or reject): ")
        term.sendline(sas[0])
        term.expect(rf"Verified: this is {peer}\.")
    return ta, tb


# MARK: tests


def test_profile_shared_at_online_verify_and_applied(pair, relay_url, clock, tmp_path):
    alice, bob = pair
    photo = tmp_path / "alice.jpg"
    photo.write_bytes(PHOTO)
    out = alice.ok("profile", "set", "--name", "Alice Liddell", "--photo", photo, "--relay", relay_url)
    assert f'Published your profile: name "Alice Liddell", photo {len(PHOTO)} bytes.' in out, out
    kept = saved(alice)
    assert stat.S_IMODE(os.stat(alice.dir / "profile.json").st_mode) == 0o600
    assert len(kept["reference"]) == 64 and kept["reference"].startswith(kept["record"])
    assert record_status(relay_url, kept["record"]) == 200

    shown = alice.ok("profile", "show")
    assert f"Record: {kept['record']}" in shown
    assert "Name:   Alice Liddell" in shown
    assert f"Photo:  {len(PHOTO)} bytes (alice.jpg)" in shown
    document = alice.json("profile", "show")
    assert document["name"] == "Alice Liddell" and document["photoBytes"] == len(PHOTO)
    # The reference opens the record: it is never printed.
    secret = kept["reference"][32:]
    assert secret not in shown and secret not in json.dumps(document) and secret not in out

    ta, tb = online_verify(alice, bob, relay_url, clock)
    tb.expect_exact(f'Alice shares a profile: name "Alice Liddell", photo {len(PHOTO)} bytes')
    tb.expect_exact("Apply to your contact? [y/N] ")
    tb.sendline("y")
    tb.expect(r"Applied: #\d+ is now Alice Liddell; photo saved")
    assert tb.finish() == 0
    # Bob shares nothing: Alice is offered nothing.
    assert ta.finish() == 0
    assert "shares a profile" not in ta.transcript
    assert "Your profile is shared with Bob in this session." in ta.transcript
    for term in (ta, tb):
        assert secret not in term.transcript.lower()

    listed = bob.json("contacts")["contacts"]
    assert [(c["name"], c["state"]) for c in listed] == [("Alice Liddell", "verified")]
    assert bob.json("contacts", "show", "Alice Liddell")["state"] == "verified"
    assert "Alice Liddell" in bob.ok("contacts", "show", "Alice Liddell")


def test_profile_declined_or_ignored_changes_nothing(pair, relay_url, clock):
    alice, bob = pair
    alice.ok("profile", "set", "--relay", relay_url)  # the name defaults to the identity's
    assert saved(alice)["name"] == "Alice"
    alice.ok("profile", "set", "--name", "Alice L.", "--relay", relay_url)

    # The default answer is no.
    ta, tb = online_verify(alice, bob, relay_url, clock)
    tb.expect_exact('Alice shares a profile: name "Alice L."')
    tb.expect_exact("Apply to your contact? [y/N] ")
    tb.sendline("")
    tb.expect_exact("Profile not applied.")
    assert tb.finish() == 0 and ta.finish() == 0
    assert [c["name"] for c in bob.json("contacts")["contacts"]] == ["Alice"]

    # --ignore-profile: not fetched, not asked.
    ta, tb = online_verify(alice, bob, relay_url, clock, bob_args=("--ignore-profile",))
    assert tb.finish() == 0 and ta.finish() == 0
    assert "shares a profile" not in tb.transcript
    assert [c["name"] for c in bob.json("contacts")["contacts"]] == ["Alice"]

    # --apply-profile: applied without asking.
    ta, tb = online_verify(alice, bob, relay_url, clock, bob_args=("--apply-profile",))
    tb.expect(r"Applied: #\d+ is now Alice L\.")
    assert tb.finish() == 0 and ta.finish() == 0
    assert "Apply to your contact?" not in tb.transcript
    assert [c["name"] for c in bob.json("contacts")["contacts"]] == ["Alice L."]

    both = bob.run("online-verify", "Alice", "--relay", relay_url, "--apply-profile", "--ignore-profile")
    assert both.returncode == 64, both


def test_profile_set_again_replaces_the_record(people, relay_url):
    alice = people("Alice", init=True)
    alice.ok("profile", "set", "--name", "Alice One", "--relay", relay_url)
    first = saved(alice)["record"]
    assert record_status(relay_url, first) == 200

    out = alice.ok("profile", "set", "--name", "Alice Two", "--relay", relay_url)
    second = saved(alice)["record"]
    assert second != first
    assert f"Deleted the previous record {first} from the relay." in out, out
    assert record_status(relay_url, first) == 404
    assert record_status(relay_url, second) == 200
    assert "Name:   Alice Two" in alice.ok("profile", "show")

    # A previous record the relay no longer holds is no error.
    token = saved(alice)["deleteToken"]
    request = urllib.request.Request(
        f"{relay_url}/v1/records/{second}", method="DELETE", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 204
    third = alice.run("profile", "set", "--name", "Alice Three", "--relay", relay_url)
    assert third.returncode == 0 and "warning" not in third.stderr, third

    last = saved(alice)["record"]
    assert record_status(relay_url, last) == 200
    cleared = alice.ok("profile", "clear")
    assert f"Deleted your profile record {last} from the relay." in cleared, cleared
    assert record_status(relay_url, last) == 404
    assert not (alice.dir / "profile.json").exists()
    assert "No profile set" in alice.ok("profile", "show")
    assert_one_error_line(alice.run("profile", "clear"), 2, "no profile set")


def test_relay_down(pair, relay_url, clock, tmp_path):
    alice, bob = pair
    down = f"http://127.0.0.1:{closed_port()}"
    result = alice.run("profile", "set", "--relay", down)
    assert_one_error_line(result, 4, "relay: cannot reach the relay")
    assert not (alice.dir / "profile.json").exists()

    # The old record cannot be deleted: a warning, the new one is kept.
    alice.ok("profile", "set", "--name", "Alice One", "--relay", relay_url)
    kept = saved(alice)
    kept["relay"] = down
    (alice.dir / "profile.json").write_text(json.dumps(kept))
    replaced = alice.run("profile", "set", "--name", "Alice Two", "--relay", relay_url)
    assert replaced.returncode == 0, replaced
    assert "warning: could not delete the previous profile record" in replaced.stderr, replaced.stderr
    assert saved(alice)["name"] == "Alice Two"

    # Clearing with the relay down: an error, and the saved profile stays.
    kept = saved(alice)
    kept["relay"] = down
    (alice.dir / "profile.json").write_text(json.dumps(kept))
    assert_one_error_line(alice.run("profile", "clear"), 4, "relay: cannot reach the relay")
    assert (alice.dir / "profile.json").exists()

    # A record gone from the relay: Bob is warned, the verification stands.
    kept["relay"] = relay_url
    (alice.dir / "profile.json").write_text(json.dumps(kept))
    alice.ok("profile", "clear")
    alice.ok("profile", "set", "--name", "Alice Gone", "--relay", relay_url)
    kept = saved(alice)
    request = urllib.request.Request(
        f"{relay_url}/v1/records/{kept['record']}", method="DELETE",
        headers={"Authorization": f"Bearer {kept['deleteToken']}"})
    urllib.request.urlopen(request, timeout=10).close()
    ta, tb = online_verify(alice, bob, relay_url, clock)
    tb.expect(r"warning: could not fetch Alice's profile from the relay \([^\r\n]*no such record \(the relay answered HTTP 404\)\)")
    assert tb.finish() == 0 and ta.finish() == 0
    assert bob.json("contacts", "show", "Alice")["state"] == "verified"
    assert [c["name"] for c in bob.json("contacts")["contacts"]] == ["Alice"]
