"""Identity: `itsme init` typed at its prompts, the PIN lockout, and the
passphrase-wrapped secret store."""

import json
import os
import re
import stat
import subprocess

import pexpect

FINGERPRINT = re.compile(r"^[0-9A-F]{16}$")
BAD_OUTPUT = ("Fatal error", "Stack dump", "backtrace", "Current stack trace")


def test_init_typed_at_the_prompts(people):
    alice = people("Alice")
    term = alice.spawn("init", pin_file=False)

    # A name: empty, then with a control character, are refused and asked again.
    term.expect_exact("Your name: ")
    term.sendline("")
    term.expect(r"display name is 1 to \d+ bytes[^\r\n]*without control, invisible or bidi-override characters; try again\.")
    term.expect_exact("Your name: ")
    term.sendline("Ali\x01ce")
    term.expect(r"without control, invisible or bidi-override characters; try again\.")
    # Bytes that are not UTF-8 are refused, not repaired into another name.
    term.expect_exact("Your name: ")
    os.write(term.child.child_fd, b"Al\xffice\n")
    term.expect(r"that is not valid UTF-8 text[^\r\n]*; try again\.")
    term.expect_exact("Your name: ")
    term.sendline("Alice")

    # A PIN that is not 6 digits, then two different PINs, then the PIN.
    term.expect_exact("Choose a PIN: ")
    term.sendline("12345")
    term.expect(r"a PIN is exactly 6 digits; try again\.")
    term.expect_exact("Choose a PIN: ")
    term.sendline(alice.pin)
    term.expect_exact("Type the PIN again: ")
    term.sendline("999999")
    term.expect(r"The two differ; try again\.")
    term.expect_exact("Choose a PIN: ")
    term.sendline(alice.pin)
    term.expect_exact("Type the PIN again: ")
    term.sendline(alice.pin)
    term.expect(r"Created the identity of Alice in ")
    fingerprint = term.expect(r"Fingerprint: ([0-9A-F]{4}(?: [0-9A-F]{4}){3})").group(1)
    assert term.finish() == 0
    # The PIN prompts do not echo.
    assert alice.pin not in term.transcript
    assert "999999" not in term.transcript

    who = alice.json("whoami", pin_file=False)
    assert who["name"] == "Alice"
    assert FINGERPRINT.match(who["fingerprint"]), who
    assert who["fingerprint"] == fingerprint.replace(" ", "")
    assert who["passphrase"] is False

    # The PIN chosen at the prompt is the PIN.
    assert alice.json("contacts")["contacts"] == []

    again = alice.run("init", "--name", "Alice Again")
    assert again.returncode == 2, again
    lines = again.stderr.splitlines()
    assert len(lines) == 1, again.stderr
    assert lines[0].startswith("itsme: ") and "already holds an identity" in lines[0]
    assert alice.json("whoami", pin_file=False)["name"] == "Alice"
    # Refused before it asks anything: no name, no PIN.
    again = alice.run("init", pin_file=False)
    assert again.returncode == 2 and "already holds an identity" in again.stderr, again
    assert "Your name" not in again.stdout + again.stderr and "PIN" not in again.stdout, again


def test_init_name_given_as_an_option_is_checked(people):
    alice = people("Alice")
    result = alice.run("init", "--name", "Al\x07ice")
    assert result.returncode == 2, result
    assert "control, invisible or bidi-override characters" in result.stderr
    assert not (alice.dir / "secrets").exists() or not any((alice.dir / "secrets").iterdir())


def test_a_name_option_that_is_not_utf8_is_refused(people):
    alice = people("Alice")
    result = alice.run("init", "--name", "Al\udcffice")  # the byte 0xFF, as the shell passes it
    assert result.returncode == 2, result
    assert "is not valid UTF-8 text" in result.stderr
    assert not (alice.dir / "secrets").exists() or not any((alice.dir / "secrets").iterdir())


def test_a_data_directory_others_may_write_is_narrowed(people):
    alice = people("Alice")
    alice.dir.mkdir(parents=True, exist_ok=True)
    os.chmod(alice.dir, 0o777)
    result = alice.run("init", "--name", "Alice")
    assert result.returncode == 0, result
    assert "could be written by others (mode 777)" in result.stderr
    assert stat.S_IMODE(os.stat(alice.dir).st_mode) == 0o700
    # The contact store and its logs are the owner's only, whatever the umask.
    alice.ok("contacts")
    for path in alice.dir.iterdir():
        if path.name.startswith("contacts.db"):
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path


def test_pin_lockout_after_five_wrong_pins(people, clock):
    alice = people("Alice", init=True)
    start = clock.get()

    # First run at a terminal: three wrong PINs, each counted and told.
    term = alice.spawn("contacts", "--test-clock", clock, pin_file=False)
    term.expect(r"using the test clock in ")
    for wrong, left in (("111111", 4), ("222222", 3), ("333333", 2)):
        term.expect_exact("PIN: ")
        term.sendline(wrong)
        term.expect(rf"wrong PIN \({left} more before a lockout\)")
    assert term.finish() == 1

    # Second run: two more wrong PINs; the fifth locks for 5 minutes.
    term = alice.spawn("contacts", "--test-clock", clock, pin_file=False)
    term.expect_exact("PIN: ")
    term.sendline("444444")
    term.expect(r"wrong PIN \(1 more before a lockout\)")
    term.expect_exact("PIN: ")
    term.sendline("555555")
    term.expect(r"wrong PIN; locked for 5 min after 5 wrong PINs")
    assert term.finish() == 3

    # Third run: not even asked.
    term = alice.spawn("contacts", "--test-clock", clock, pin_file=False)
    term.expect(r"the PIN is locked after 5 wrong PINs: try again in 5 min")
    assert term.finish() == 3
    assert "PIN: " not in term.transcript

    # The right PIN from a file is refused while locked.
    result = alice.run("contacts", "--test-clock", clock)
    assert result.returncode == 3, result
    assert "locked" in result.stderr
    assert "No contacts yet" not in result.stdout

    # One second before the end of the lock: still locked.
    clock.set(start + 299)
    result = alice.run("contacts", "--test-clock", clock)
    assert result.returncode == 3, result
    assert "try again in 1 s" in result.stderr

    # After 5 minutes the right PIN works (and clears the count).
    clock.set(start + 301)
    result = alice.run("contacts", "--test-clock", clock)
    assert result.returncode == 0, result
    assert "No contacts yet" in result.stdout
    assert "using the test clock" in result.stderr

    # The count was cleared: one wrong PIN is again "4 more".
    term = alice.spawn("contacts", "--test-clock", clock, pin_file=False)
    term.expect_exact("PIN: ")
    term.sendline("666666")
    term.expect(r"wrong PIN \(4 more before a lockout\)")
    term.expect_exact("PIN: ")
    term.sendline(alice.pin)
    term.expect("No contacts yet")
    assert term.finish() == 0


def test_pin_that_is_not_six_digits_is_not_counted(people, clock):
    alice = people("Alice", init=True)
    term = alice.spawn("contacts", "--test-clock", clock, pin_file=False)
    term.expect_exact("PIN: ")
    term.sendline("12")
    term.expect(r"a PIN is exactly 6 digits \(not counted as a wrong PIN\)")
    term.expect_exact("PIN: ")
    term.sendline("000000")
    term.expect(r"wrong PIN \(4 more before a lockout\)")
    term.expect_exact("PIN: ")
    term.sendline(alice.pin)
    term.expect("No contacts yet")
    assert term.finish() == 0


def test_passphrase_wraps_the_secret_store(people, tmp_path):
    name = "Zebulon Quince"
    wrapped = people("Zebulon")
    passphrase = tmp_path / "passphrase"
    passphrase.write_text("correct horse battery staple\n")
    wrong = tmp_path / "wrong-passphrase"
    wrong.write_text("incorrect horse battery staple\n")

    created = wrapped.run("init", "--name", name, "--passphrase", "--passphrase-file", passphrase, "--json")
    assert created.returncode == 0, created
    assert json.loads(created.stdout)["name"] == name

    who = wrapped.run("whoami", "--json", "--passphrase-file", passphrase)
    assert who.returncode == 0, who
    document = json.loads(who.stdout)
    assert document["name"] == name and document["passphrase"] is True

    # Contacts open too (passphrase, then PIN).
    assert wrapped.json("contacts", "--passphrase-file", passphrase)["contacts"] == []

    bad = wrapped.run("whoami", "--passphrase-file", wrong)
    assert bad.returncode == 1, bad
    assert bad.stderr.splitlines() == ["itsme: wrong passphrase"], bad.stderr
    assert name not in bad.stdout

    # No passphrase and no terminal to ask it on: an error, not a hang.
    none = wrapped.run("whoami")
    assert none.returncode == 2, none
    assert "--passphrase-fd" in none.stderr
    assert "PIN" not in none.stderr and "--pin-fd" not in none.stderr, "whoami needs no PIN"

    # init again, with or without the passphrase, never overwrites it.
    for extra in ([], ["--passphrase", "--passphrase-file", passphrase]):
        again = wrapped.run("init", "--name", "Other", *extra)
        assert again.returncode == 2, again
        assert "already holds an identity" in again.stderr
    assert wrapped.json("whoami", "--passphrase-file", passphrase)["fingerprint"] == document["fingerprint"]

    # Nothing under secrets/ holds the name in plain text.
    items = [p for p in (wrapped.dir / "secrets").iterdir() if p.is_file()]
    assert any(p.name == "itsme.identity" for p in items), items
    for item in items:
        assert name.encode() not in item.read_bytes(), item
    # Whereas an unwrapped store keeps the identity item, name included,
    # in plain text (files readable by the account only).
    plain = people("Plain")
    plain.ok("init", "--name", name)
    assert name.encode() in (plain.dir / "secrets" / "itsme.identity").read_bytes()


def test_passphrase_typed_at_the_prompt(people, tmp_path):
    wrapped = people("Alice")
    term = wrapped.spawn("init", "--name", "Alice", "--passphrase")
    term.expect_exact("Choose a passphrase: ")
    term.sendline("short")
    term.expect(r"a passphrase is at least 10 characters; try again\.")
    term.expect_exact("Choose a passphrase: ")
    term.sendline("a long enough passphrase")
    term.expect_exact("Type the passphrase again: ")
    term.sendline("a long enough passphrase")
    term.expect("Secret files: encrypted with your passphrase")
    assert term.finish() == 0
    assert "long enough" not in term.transcript

    term = wrapped.spawn("whoami", pin_file=False)
    term.expect(r"Passphrase of [^\r\n]*: ")
    term.sendline("a long enough passphrase")
    term.expect(r"Name:\s+Alice")
    term.expect(r"Secrets:\s+encrypted with a passphrase")
    assert term.finish() == 0


def test_name_limit_is_stated_as_it_is(people):
    """The name limit is 128 bytes of UTF-8 (the prompt says so); the
    refusal of `--name` states the same limit."""
    long_name = people("Long")
    accepted = long_name.run("init", "--name", "x" * 65)
    assert accepted.returncode == 0, accepted
    too_long = people("TooLong")
    refused = too_long.run("init", "--name", "x" * 129)
    assert refused.returncode == 2, refused
    assert "128" in refused.stderr, refused.stderr


def test_data_directory_from_the_environment(people, cli_bin):
    alice = people("Alice", init=True)
    alice.env["ITSME_DATA_DIR"] = str(alice.dir)
    who = subprocess.run(
        [str(cli_bin), "whoami", "--json"], env=alice.env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=30,
    )
    assert who.returncode == 0, who
    assert json.loads(who.stdout)["name"] == "Alice"


def test_interrupt_puts_the_terminal_back(people, cli_bin):
    """Ctrl-C at the PIN prompt (echo off): the terminal echoes again."""
    alice = people("Alice", init=True)
    script = (
        'trap "" INT; "$0" contacts --data-dir "$1"; echo "exit=$?"; '
        'if stty -a | grep -q -- "-echo "; then echo "echo=off"; else echo "echo=on"; fi'
    )
    term = pexpect.spawn(
        "sh", ["-c", script, str(cli_bin), str(alice.dir)], env=alice.env, encoding="utf-8", timeout=30,
    )
    try:
        term.expect_exact("PIN: ")
        term.sendintr()
        term.expect(r"itsme: interrupted")
        term.expect(r"exit=(\d+)")
        assert term.match.group(1) == "5"
        term.expect(r"echo=(on|off)")
        assert term.match.group(1) == "on"
        term.expect(pexpect.EOF)
    finally:
        term.close(force=True)
