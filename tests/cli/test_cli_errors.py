"""Errors: one line on standard error ("itsme: ..."), never a crash or a
stack trace, and the documented exit code (`itsme --help`)."""

import os
import subprocess

import pytest

from cli_errors import CRASH, assert_error


def test_exit_codes_are_documented(run):
    result = run("--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for documented in ("0 success", "2 an error", "3 locked", "4 the relay", "5 input ended", "64 a usage error"):
        assert documented in text, documented


def test_unknown_contact(people):
    alice = people("Alice", init=True)
    assert_error(alice.run("contacts", "show", "Nobody"), 2, 'no contact "Nobody"')
    assert_error(alice.run("verify", "Nobody"), 2, 'no contact "Nobody"')
    assert_error(alice.run("device-change-code", "#42"), 2, 'no contact "#42"')


def test_no_identity(people):
    nobody = people("Nobody")
    assert_error(nobody.run("whoami"), 2, "no identity in ")
    assert_error(nobody.run("contacts"), 2, "run itsme init --data-dir ")
    assert_error(nobody.run("qr", "show"), 2, "no identity in ")


def test_unreachable_relay(people):
    alice = people("Alice", init=True)
    result = alice.run("invite", "create", "--relay", "http://127.0.0.1:1")
    assert_error(result, 4, "relay")
    # Nothing is left in progress.
    assert alice.json("sas", "show") == {"state": "none"}
    assert_error(alice.run("online-verify", "Bob", "--relay", "http://127.0.0.1:1"), 2, 'no contact "Bob"')


def test_unreachable_relay_from_the_environment(people):
    alice = people("Alice", init=True)
    alice.env["ITSME_RELAY"] = "http://127.0.0.1:1"
    assert_error(alice.run("invite", "create"), 4, "relay")


@pytest.mark.parametrize("url", ["ftp://example.com", "not a url", "http://"])
def test_bad_relay_url(people, url):
    alice = people("Alice", init=True)
    assert_error(alice.run("invite", "create", "--relay", url), 2, f"bad relay URL {url}")
    assert_error(alice.run("relay", "set", url), 2, f"bad relay URL {url}")


def test_no_relay(people):
    alice = people("Alice", init=True)
    assert_error(alice.run("invite", "create"), 2, "no relay: pass --relay URL")


def test_nothing_in_progress(people):
    alice = people("Alice", init=True)
    assert_error(alice.run("invite", "status"), 2, "no exchange in progress")
    assert_error(alice.run("invite", "cancel"), 2, "no exchange in progress")
    assert_error(alice.run("sas", "confirm"), 2, "no exchange is waiting for its SAS")
    assert_error(alice.run("sas", "reject"), 2, "no exchange in progress")
    assert_error(alice.run("qr", "scan", "ITSME1:AAAA"), 2, "no QR exchange in progress")


def test_input_ended_at_a_prompt(people):
    alice = people("Alice")
    # Standard input closed: the name prompt gets no answer.
    result = alice.run("init")
    assert_error(result, 5, "input ended")
    assert "Your name: " in result.stdout
    assert not (alice.dir / "secrets" / "itsme.identity").exists()


def test_input_ended_at_a_terminal_prompt(people, relay_url):
    alice = people("Alice", init=True)
    term = alice.spawn("invite", "accept", "--relay", relay_url)
    term.expect_exact("Invite code: ")
    term.sendeof()
    term.expect(r"itsme: input ended")
    assert term.finish() == 5
    for crash in CRASH:
        assert crash not in term.transcript


def test_interrupt_at_the_pin_prompt(people):
    alice = people("Alice", init=True)
    term = alice.spawn("contacts", pin_file=False)
    term.expect_exact("PIN: ")
    term.child.sendintr()
    term.expect(r"itsme: interrupted")
    assert term.finish() == 5
    assert alice.pin not in term.transcript


def test_pin_prompt_without_a_terminal(people):
    alice = people("Alice", init=True)
    result = alice.run("contacts", pin_file=False)
    assert_error(result, 2, "no terminal to ask for the PIN: pass --pin-fd N or --pin-file PATH")
    # whoami touches no secret: it needs no PIN, with or without a terminal.
    who = alice.run("whoami", pin_file=False)
    assert who.returncode == 0 and "Alice" in who.stdout, who


def test_pin_file_missing_or_wrong(people, tmp_path):
    alice = people("Alice", init=True)
    assert_error(alice.run("contacts", "--pin-file", tmp_path / "missing", pin_file=False), 2, "cannot read")
    wrong = tmp_path / "wrong.pin"
    wrong.write_text("000000\n")
    assert_error(
        alice.run("contacts", "--pin-file", wrong, pin_file=False), 1, "wrong PIN (4 more before a lockout)"
    )


def test_pin_from_a_file_descriptor(people):
    alice = people("Alice", init=True)
    read, write = os.pipe()
    os.write(write, (alice.pin + "\n").encode())
    os.close(write)
    try:
        result = subprocess.run(
            alice.argv(["contacts", "--pin-fd", str(read)], pin_file=False), env=alice.env, pass_fds=(read,),
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
        )
    finally:
        os.close(read)
    assert result.returncode == 0, result
    assert "No contacts yet" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["verify"],  # missing argument
        ["no-such-command"],
        ["whoami", "--no-such-option"],
        ["invite", "create", "--wait", "soon"],
    ],
)
def test_usage_error(run, args):
    result = run(*args)
    assert result.returncode == 64, result
    assert result.stderr.startswith("Error: "), result.stderr
    for crash in CRASH:
        assert crash not in result.stdout + result.stderr
