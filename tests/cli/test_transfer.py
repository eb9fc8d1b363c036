"""Moving an identity to a new device: the password export (`itsme export`,
`itsme import`) and the live transfer through a real relay (`itsme transfer
receive` on the new device, `itsme transfer send` on the old one).

What "done" means: on the new data directory the same fingerprint, every
contact readable (contacts.db copied along), no device secret, so the
contact sees "device changed" at the next verification and the
device-change code acknowledges it. And every refusal changes nothing.
Each export or import runs Argon2id over 256 MiB, so they are counted."""

import base64
import os
import re
import shutil
import sqlite3
import stat
import struct
import time

import pytest

EXPORT_TEXT = re.compile(r"ITSMEXP1:[A-Za-z0-9_-]+")
OFFER = re.compile(r"ITSMETR2:[A-Za-z0-9_-]+")
# 13 characters of the alphabet 2-9, A-Z without I, L, O; shown 4-4-5.
PASSWORD = re.compile(r"Export password: ([2-9A-HJKMNP-Z]{4}-[2-9A-HJKMNP-Z]{4}-[2-9A-HJKMNP-Z]{5})")
SAS = r"SAS: ([A-Z]+ \d{4})"
GENERATED_PROMPT = "Export password (like ABCD-EFGH-JKMNP): "
CRASH = ("Fatal error", "Stack dump", "backtrace", "Current stack trace")

MY_TURN = r"Your turn: choose one of your words, say it, and type it: "
THEIR_TURN = r"'s turn: type the word \S+ says: "
YOUR_CODE = r"Your Code:  ([A-Z]+ \d{3})  tag (\d{2})"
CODE_PROMPT = r"Type the code \S+ says \(like ECHO 512\): "
TAG_PROMPT = r"Type the two-digit tag \S+ says: "
OUTCOME = r"(Verified: [^\r\n]*|The code is right, but [^\r\n]*|NOT VERIFIED[^\r\n]*)"


# MARK: helpers


def grouped(fingerprint: str) -> str:
    return " ".join(fingerprint[i:i + 4] for i in range(0, len(fingerprint), 4))


def add_each_other(a, b):
    """A QR exchange, SAS compared and confirmed on both sides."""
    payload_a = a.json("qr", "show")["payload"]
    payload_b = b.json("qr", "show")["payload"]
    assert a.json("qr", "scan", payload_b)["sas"] == b.json("qr", "scan", payload_a)["sas"]
    a.ok("sas", "confirm")
    b.ok("sas", "confirm")


def export_to_file(person, path):
    """`itsme export --output PATH`; returns the generated password, which
    the output shows exactly once."""
    result = person.run("export", "--output", path)
    assert result.returncode == 0, result
    found = PASSWORD.findall(result.stdout)
    assert len(found) == 1, result.stdout
    password = found[0]
    assert result.stdout.count(password) == 1 and password not in result.stderr
    return password


def write_secret(path, text):
    path.write_text(text + "\n")
    return path


def device_secrets(person) -> int:
    with sqlite3.connect(person.dir / "contacts.db") as db:
        return db.execute("SELECT count(*) FROM device_secrets").fetchone()[0]


def assert_error(result, code, fragment):
    everything = result.stdout + result.stderr
    for crash in CRASH:
        assert crash not in everything, everything
    assert result.returncode == code, (
        f"exit {result.returncode}, expected {code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    )
    lines = [line for line in result.stderr.splitlines() if line.strip() and "test clock" not in line]
    assert len(lines) == 1, f"stderr is not one line: {result.stderr!r}"
    assert lines[0].startswith("itsme: "), lines
    assert fragment in lines[0], lines


def assert_no_identity(person):
    who = person.run("whoami")
    assert who.returncode == 2 and "no identity in" in who.stderr, who


def verify_by_voice(one, one_knows_as, other, other_knows_as, clock, other_untagged=False):
    """`one` and `other` verify each other by voice at the next window of the
    test clock, each typing what the other says; returns each side's
    outcome line. `other_untagged`: the other holds no device secret of
    one's, so it is not asked for a tag."""
    terms = [
        one.spawn("verify", one_knows_as, "--test-clock", clock),
        other.spawn("verify", other_knows_as, "--test-clock", clock),
    ]
    now = clock.get()
    targets = {now + int(term.expect(r"Starting in (\d+) s").group(1)) for term in terms}
    assert len(targets) == 1, targets
    clock.set(targets.pop())
    words = []
    for term in terms:
        term.expect(r"Starting now\.")
        words.append(term.expect(r"Your words: ([A-Z, ]+)\r\n").group(1).split(", "))
    for turn in range(2):
        prompts = [term.expect([MY_TURN, THEIR_TURN]) for term in terms]
        assert sorted(prompts) == [0, 1], prompts
        speaker = prompts.index(0)
        word = words[speaker][turn]
        terms[speaker].sendline(word)
        terms[1 - speaker].sendline(word)
    codes = [term.expect(YOUR_CODE).groups() for term in terms]
    for term, (code, tag) in ((terms[0], codes[1]), (terms[1], codes[0])):
        term.expect(CODE_PROMPT)
        term.sendline(code)
        if term is terms[1] and other_untagged:
            assert term.expect([TAG_PROMPT, r"No tag to type: "]) == 1, "no tag is asked that it could not check"
            continue
        term.expect(TAG_PROMPT)
        term.sendline(tag)
    outcomes = [term.expect(OUTCOME).group(1) for term in terms]
    for term in terms:
        assert term.finish() == 0, term.transcript
    return outcomes


def check_moved(old, new, contact, contacts_before):
    """The new data directory holds the old one's identity and contacts,
    and none of its device secrets."""
    old_who = old.json("whoami")
    new_who = new.json("whoami")
    assert new_who["fingerprint"] == old_who["fingerprint"]
    assert new_who["name"] == old_who["name"]
    listed = new.json("contacts")["contacts"]
    assert [(c["name"], c["fingerprint"], c["state"]) for c in listed] == [
        (contact.name, contact.json("whoami")["fingerprint"], "verified")
    ]
    assert device_secrets(new) == 0
    # The old device keeps its own, untouched.
    assert device_secrets(old) == contacts_before


def check_device_change_seen(contact, mover, moved_name, clock):
    """At the next verification the contact sees the device change; the
    moved side (holding no device secret) does not check the tag. A tag is
    two digits: in one window in 100 the new device's matches the old one's
    by chance, and the next window's is drawn afresh, so that window is
    tried again (PROTOCOL.md 10.1)."""
    for _ in range(4):
        seen, own = verify_by_voice(contact, moved_name, mover, contact.name, clock, other_untagged=True)
        if not seen.startswith("Verified: this is"):
            break
        clock.advance(30)
    assert seen.startswith(f"The code is right, but {moved_name}'s device changed"), seen
    assert own.startswith(f"Verified: this is {contact.name}. (This device holds no device secret"), own
    shown = contact.json("contacts", "show", moved_name)
    assert shown["state"] == "device-changed" and shown["deviceChangeAcknowledged"] is False


# MARK: the password export


def test_export_and_import_move_the_identity_and_its_contacts(people, clock, tmp_path):
    alice = people("Alice", init=True)
    carol = people("Carol", init=True)
    add_each_other(alice, carol)
    fingerprint = alice.json("whoami")["fingerprint"]

    export = tmp_path / "alice.export"
    result = alice.run("export", "--output", export)
    assert result.returncode == 0, result
    password = PASSWORD.search(result.stdout).group(1)
    assert result.stdout.count(password) == 1
    assert "not stored anywhere" in result.stdout
    # It says how to bring the contacts too.
    assert "Your contacts are not in this export. To move them too: itsme export --with-contacts FILE" in result.stdout
    assert stat.S_IMODE(os.stat(export).st_mode) == 0o600
    assert EXPORT_TEXT.fullmatch(export.read_text().strip())

    # The contact store, copied to the new device.
    copied = tmp_path / "copied-contacts.db"
    shutil.copy(alice.dir / "contacts.db", copied)
    new = people("AliceNew", pin="250731")
    # Typed in any case, with spaces for the dashes.
    typed = write_secret(tmp_path / "password", password.lower().replace("-", " "))
    imported = new.run("import", export, "--contacts", copied, "--password-file", typed)
    assert imported.returncode == 0, imported
    assert "Installed the identity of Alice" in imported.stdout
    assert f"Fingerprint: {grouped(fingerprint)}" in imported.stdout
    assert re.search(r"Contacts:\s+1\n", imported.stdout), imported.stdout
    assert "itsme device-change-code" in imported.stdout
    check_moved(alice, new, carol, contacts_before=1)
    assert stat.S_IMODE(os.stat(new.dir / "contacts.db").st_mode) == 0o600

    # The new device's PIN is the one chosen at the import (from its PIN
    # file); the old device's does not open it.
    other_pin = new.run("contacts", "--pin-file", write_secret(tmp_path / "old-pin", "482916"), pin_file=False)
    assert_error(other_pin, 1, "wrong PIN")

    check_device_change_seen(carol, new, "Alice", clock)

    # The device-change code from the new device acknowledges the change...
    code = re.search(r"Device-change code for Carol: (\S+)", new.ok("device-change-code", "Carol")).group(1)
    ack = carol.spawn("acknowledge-device-change", "Alice")
    ack.expect_exact("Alice's device-change code: ")
    ack.sendline(code)
    ack.expect(r"Acknowledged: Alice's new device is theirs\.")
    assert ack.finish() == 0
    shown = carol.json("contacts", "show", "Alice")
    assert shown["state"] == "device-changed" and shown["deviceChangeAcknowledged"] is True

    # ...and from then on the new device's tags match.
    seen, _ = verify_by_voice(carol, "Alice", new, "Carol", clock, other_untagged=True)
    assert seen == "Verified: this is Alice.", seen


def test_chosen_password_typed_at_the_prompts(people):
    alice = people("Alice", init=True)
    term = alice.spawn("export", "--chosen-password")
    term.expect_exact("Choose an export password: ")
    term.sendline("seven77")
    term.expect(r"an export password is at least 8 characters; try again\.")
    term.expect_exact("Choose an export password: ")
    term.sendline("correct staple 42")
    term.expect_exact("Type the export password again: ")
    term.sendline("correct staple 43")
    term.expect(r"The two differ; try again\.")
    term.expect_exact("Choose an export password: ")
    term.sendline("correct staple 42")
    term.expect_exact("Type the export password again: ")
    term.sendline("correct staple 42")
    # Up to the end of the line: a terminal may deliver it in pieces.
    text = term.expect(EXPORT_TEXT.pattern + r"\r\n").group(0).strip()
    term.expect(r"The password is the one you chose")
    assert term.finish() == 0
    # Without --output: a QR code (half blocks) above the text line.
    assert "\u2588" in term.transcript.split(text)[0]
    assert "correct staple" not in term.transcript
    assert "Export password:" not in term.transcript

    new = people("AliceNew")
    term = new.spawn("import", "--text", text, pin_file=False)
    term.expect_exact("Export password: ")
    term.sendline("short")
    term.expect(r"at least 8 characters \(not counted as a wrong password\)")
    term.expect_exact("Export password: ")
    term.sendline("correct staple 24")
    term.expect(r"wrong export password, or an altered export \(4 more before a lockout\)")
    term.expect_exact("Export password: ")
    term.sendline("correct staple 42")
    # No PIN here yet: one is chosen, as `init` does.
    term.expect_exact("Choose a PIN: ")
    term.sendline(new.pin)
    term.expect_exact("Type the PIN again: ")
    term.sendline(new.pin)
    term.expect(r"Installed the identity of Alice")
    assert term.finish() == 0
    assert "correct staple" not in term.transcript and new.pin not in term.transcript
    assert new.json("whoami")["fingerprint"] == alice.json("whoami")["fingerprint"]


def test_wrong_export_passwords_lock_after_five(people, clock, tmp_path):
    alice = people("Alice", init=True)
    export = tmp_path / "alice.export"
    right = write_secret(tmp_path / "right", export_to_file(alice, export))
    wrong = write_secret(tmp_path / "wrong", "ABCD-EFGH-JKMN2")
    new = people("AliceNew")
    start = clock.get()

    # At a terminal: three tries, each counted and told.
    term = new.spawn("import", export, "--test-clock", clock, pin_file=False)
    for left in (4, 3, 2):
        term.expect_exact(GENERATED_PROMPT)
        term.sendline("ABCD-EFGH-JKMN2")
        term.expect(rf"wrong export password, or an altered export \({left} more before a lockout\)")
    assert term.finish() == 1

    # From a file: one try a run. The fifth locks for 5 minutes.
    assert_error(new.run("import", export, "--password-file", wrong, "--test-clock", clock), 1, "(1 more before a lockout)")
    assert_error(
        new.run("import", export, "--password-file", wrong, "--test-clock", clock), 3,
        "locked for 5 min after 5 wrong passwords",
    )
    # While locked even the right password is not tried; nor asked at a terminal.
    assert_error(new.run("import", export, "--password-file", right, "--test-clock", clock), 3, "try again in 5 min")
    term = new.spawn("import", export, "--test-clock", clock, pin_file=False)
    term.expect(r"itsme: export passwords are locked after 5 wrong ones: try again in 5 min")
    assert term.finish() == 3
    assert GENERATED_PROMPT not in term.transcript
    clock.set(start + 299)
    assert_error(new.run("import", export, "--password-file", right, "--test-clock", clock), 3, "try again in 1 s")
    assert_no_identity(new)

    clock.set(start + 301)
    done = new.run("import", export, "--password-file", right, "--test-clock", clock)
    assert done.returncode == 0, done
    assert new.json("whoami")["fingerprint"] == alice.json("whoami")["fingerprint"]


def test_refused_exports_cost_nothing(people, tmp_path):
    alice = people("Alice", init=True)
    made = alice.json("export")
    assert made["passwordKind"] == "generated" and PASSWORD.match("Export password: " + made["password"])
    text = made["export"]
    assert EXPORT_TEXT.fullmatch(text)
    right = write_secret(tmp_path / "right", made["password"])
    body = text[len("ITSMEXP1:"):]
    blob = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))

    def as_text(data: bytes) -> str:
        return "ITSMEXP1:" + base64.urlsafe_b64encode(data).decode().rstrip("=")

    new = people("AliceNew")
    half = tmp_path / "half.export"
    # Cut at whole groups of base64 characters, so that what is left decodes.
    half.write_text(text[: len("ITSMEXP1:") + 96] + "\n")
    other_version = bytearray(blob)
    other_version[7] = 3
    with_contacts = bytearray(blob)
    with_contacts[7] = 2
    huge_cost = bytearray(blob)
    huge_cost[9:13] = struct.pack(">I", 1000)
    refused = [
        (["--text", text[: len("ITSMEXP1:") + 60]], "truncated"),
        ([half], "truncated"),
        (["--text", as_text(bytes(other_version))], "format version 3"),
        (["--text", as_text(bytes(with_contacts))], "format version 2; a text holds format version 1 only"),
        (["--text", as_text(bytes(huge_cost))], "outside the accepted"),
        (["--text", as_text(blob + b"\0" * 200)], "damaged"),
        (["--text", "ITSMEXP2:" + text[len("ITSMEXP1:"):]], "text format this library does not read"),
        (["--text", "hello"], "not the text of an ItsMe identity export"),
    ]
    for args, fragment in refused:
        result = new.run("import", *args, "--password-file", right)
        assert_error(result, 2, fragment)

    # The older app's exports (a bare base64 box, or its JSON) are refused
    # with the library's explanation.
    source = base64.b64encode(os.urandom(120)).decode()
    for old in (source, '{"version": 3, "data": "' + source + '"}'):
        result = new.run("import", "--text", old, "--password-file", right)
        assert_error(result, 2, "older app format")
        assert "Make a new export, or a live transfer, on the old device" in result.stderr
    assert_no_identity(new)

    # None of these counted: an altered export, with the right password,
    # is the first counted failure (it looks like a wrong password).
    position = len(text) - 20
    replacement = "A" if text[position] != "A" else "B"
    altered = text[:position] + replacement + text[position + 1:]
    assert_error(
        new.run("import", "--text", altered, "--password-file", right), 1,
        "wrong export password, or an altered export (4 more before a lockout)",
    )
    assert_no_identity(new)
    # The password was right: the intact export opens with it (here as a
    # file holding the raw export rather than its text).
    raw = tmp_path / "raw.export"
    raw.write_bytes(blob)
    assert new.run("import", raw, "--password-file", right).returncode == 0
    assert new.json("whoami")["fingerprint"] == made["fingerprint"]


def test_export_refusals_write_nothing(people, tmp_path):
    alice = people("Alice", init=True)
    existing = tmp_path / "existing.export"
    existing.write_text("keep me\n")
    assert_error(alice.run("export", "--output", existing), 2, "already exists")
    assert existing.read_text() == "keep me\n"
    # Nor through a link.
    link = tmp_path / "link.export"
    os.symlink(tmp_path / "elsewhere", link)
    assert_error(alice.run("export", "--output", link), 2, "already exists")
    assert not (tmp_path / "elsewhere").exists()

    target = tmp_path / "new.export"
    short = write_secret(tmp_path / "short", "seven77")
    assert_error(
        alice.run("export", "--output", target, "--chosen-password", "--password-file", short), 2,
        "at least 8 characters",
    )
    # A chosen password needs a terminal, or a file or descriptor.
    assert_error(alice.run("export", "--output", target, "--chosen-password"), 2, "--password-fd")
    assert not target.exists()


def test_wrong_identity_cancelled_then_replaced(people, tmp_path):
    alice = people("Alice", init=True)
    bob = people("Bob", init=True, pin="135790")
    carol = people("Carol", init=True)
    add_each_other(bob, carol)
    export = tmp_path / "alice.export"
    password = export_to_file(alice, export)
    right = write_secret(tmp_path / "right", password)
    bob_fingerprint = bob.json("whoami")["fingerprint"]

    def unchanged():
        assert bob.json("whoami")["fingerprint"] == bob_fingerprint
        assert [c["name"] for c in bob.json("contacts")["contacts"]] == ["Carol"]

    # At a terminal it says what would be replaced, and asks (no by default).
    term = bob.spawn("import", export, "--password-file", right)
    term.expect(r"Importing here would replace what this data directory holds:")
    term.expect(rf"the identity of Bob \(fingerprint {grouped(bob_fingerprint)}\) would be replaced by that of Alice")
    term.expect(r"1 contact in \S*contacts\.db that Alice's contacts key cannot read")
    term.expect_exact("Replace? [y/N] ")
    term.sendline("")
    term.expect(r"Cancelled: nothing was changed\.")
    assert term.finish() == 1
    unchanged()

    # Without a terminal: refused, naming --replace.
    result = bob.run("import", export, "--password-file", right)
    assert_error(result, 2, "--replace")
    assert "the identity of Bob" in result.stderr
    unchanged()

    # Replacing asks this data directory's PIN first (it stays): a wrong
    # one changes nothing.
    wrong_pin = write_secret(tmp_path / "wrong-pin", alice.pin)
    result = bob.run("import", export, "--replace", "--password-file", right, "--pin-file", wrong_pin, pin_file=False)
    assert_error(result, 1, "wrong PIN")
    unchanged()

    # With Bob's PIN (and the password through a descriptor): replaced, the
    # contact Alice's key cannot read deleted.
    read, write = os.pipe()
    os.write(write, (password + "\n").encode())
    os.close(write)
    try:
        result = bob.run("import", export, "--replace", "--password-fd", read, pass_fds=(read,))
    finally:
        os.close(read)
    assert result.returncode == 0, result
    assert f"Replaced the identity {grouped(bob_fingerprint)}." in result.stdout
    assert "Deleted 1 contact that this identity could not read." in result.stdout
    assert re.search(r"Contacts:\s+0\n", result.stdout), result.stdout
    who = bob.json("whoami")
    assert who["fingerprint"] == alice.json("whoami")["fingerprint"] and who["name"] == "Alice"
    # Bob's PIN opens it (bob.json passes his PIN file).
    assert bob.json("contacts")["contacts"] == []


def test_contacts_copy_never_overwrites_a_different_store(people, tmp_path):
    alice = people("Alice", init=True)
    carol = people("Carol", init=True)
    add_each_other(alice, carol)
    export = tmp_path / "alice.export"
    right = write_secret(tmp_path / "right", export_to_file(alice, export))
    new = people("AliceNew")
    (new.dir).mkdir(mode=0o700)
    (new.dir / "contacts.db").write_bytes(b"SQLite format 3\0" + b"\0" * 200)
    # Refused before the password is tried or anything asked.
    result = new.run("import", export, "--contacts", alice.dir / "contacts.db", "--password-file", right)
    assert_error(result, 2, "--replace")
    assert (new.dir / "contacts.db").read_bytes() == b"SQLite format 3\0" + b"\0" * 200
    # Not a contact store at all: refused too.
    not_a_store = tmp_path / "notes.txt"
    not_a_store.write_text("hello\n")
    assert_error(new.run("import", export, "--contacts", not_a_store, "--password-file", right), 2, "not a contact store")
    assert_no_identity(new)


def test_import_into_a_passphrase_wrapped_store(people, tmp_path):
    alice = people("Alice", init=True)
    export = tmp_path / "alice.export"
    right = write_secret(tmp_path / "right", export_to_file(alice, export))
    passphrase = write_secret(tmp_path / "passphrase", "correct horse battery staple")
    new = people("AliceNew")
    result = new.run("import", export, "--passphrase", "--passphrase-file", passphrase, "--password-file", right)
    assert result.returncode == 0, result
    who = new.json("whoami", "--passphrase-file", passphrase)
    assert who["passphrase"] is True and who["fingerprint"] == alice.json("whoami")["fingerprint"]
    # The identity item is sealed: the name is not in it in plain text.
    assert b"Alice" not in (new.dir / "secrets" / "itsme.identity").read_bytes()


# MARK: the live transfer


def start_transfer(old, new, relay_url, *receive_args, picture=None):
    """The new device shows its code; the old one sends to it, given the
    code's text, or with `picture` (a path) a PNG image of its QR code.
    Returns both terminals, each at its SAS question, and the code."""
    if picture is not None:
        receive_args += ("--png", str(picture))
    rx = new.spawn("transfer", "receive", "--relay", relay_url, *receive_args)
    offer = rx.expect(OFFER.pattern + r"\r\n").group(0).strip()
    rx.expect(r"Waiting for the old device in the relay room")
    given = ("--image", str(picture)) if picture is not None else (offer,)
    tx = old.spawn("transfer", "send", *given, "--relay", relay_url)
    sas = [term.expect(SAS).group(1) for term in (tx, rx)]
    assert sas[0] == sas[1], sas
    # Each device asks for the SAS the other one shows (typed, not y/n).
    tx.expect_exact("Type the SAS the new device shows (or reject): ")
    rx.expect_exact("Type the SAS the old device shows (or reject): ")
    tx.sas = rx.sas = sas[0]
    return tx, rx, offer


def test_live_transfer_moves_the_identity_and_its_contacts(people, relay_url, clock, tmp_path):
    """One command per device: the contacts travel with the identity."""
    alice = people("Alice", init=True)
    carol = people("Carol", init=True)
    add_each_other(alice, carol)
    new = people("AliceNew", pin="250731")

    # The old device reads the new one's QR code from a picture of it.
    tx, rx, offer = start_transfer(alice, new, relay_url, picture=tmp_path / "offer.png")
    # The code is drawn as a QR code above its text line.
    assert "\u2588" in rx.transcript.split(offer)[0]
    tx.sendline(rx.sas)
    tx.expect(r"Sent: the new device has the identity of Alice \(fingerprint [0-9A-F ]+\) and 1 contact, and installs them\.")
    assert tx.finish() == 0
    rx.sendline(tx.sas.lower())
    rx.expect(r"Received the identity of Alice and the contacts\.")
    rx.expect(r"Installed the identity of Alice")
    rx.expect(r"Contacts:\s+1\r\n")
    rx.expect(r"itsme device-change-code")
    assert rx.finish() == 0
    check_moved(alice, new, carol, contacts_before=1)
    check_device_change_seen(carol, new, "Alice", clock)


def test_live_transfer_without_contacts_then_a_copy(people, relay_url, tmp_path):
    """`send --without-contacts` sends the identity alone; the receiver's
    --contacts copy is then what it installs (the flow before contacts
    travelled)."""
    alice = people("Alice", init=True)
    carol = people("Carol", init=True)
    add_each_other(alice, carol)
    copied = tmp_path / "copied-contacts.db"
    shutil.copy(alice.dir / "contacts.db", copied)
    new = people("AliceNew")
    rx = new.spawn("transfer", "receive", "--relay", relay_url, "--text-only", "--contacts", copied)
    offer = rx.expect(OFFER.pattern + r"\r\n").group(0).strip()
    rx.expect(r"Waiting for the old device in the relay room")
    tx = alice.spawn("transfer", "send", offer, "--without-contacts", "--relay", relay_url)
    sas = tx.expect(SAS).group(1)
    assert rx.expect(SAS).group(1) == sas
    for term in (tx, rx):
        term.expect(r"\(or reject\): ")
        term.sendline(sas)
    tx.expect(r"Sent: the new device has the identity of Alice \(fingerprint [0-9A-F ]+\), and installs them\.")
    assert tx.finish() == 0
    rx.expect(r"Received the identity of Alice \(no contacts came with it\)\.")
    rx.expect(r"Contacts:\s+1\r\n")
    assert rx.finish() == 0
    assert [c["name"] for c in new.json("contacts")["contacts"]] == ["Carol"]


def test_export_with_contacts_then_import_in_one_command(people, clock, tmp_path):
    """`export --with-contacts FILE`: one file, one password; `import FILE`
    on an empty machine installs the identity and every contact, asking
    the password once and a new PIN."""
    alice = people("Alice", init=True)
    carol = people("Carol", init=True)
    add_each_other(alice, carol)
    bundle = tmp_path / "alice-with-contacts.itsme"
    result = alice.run("export", "--with-contacts", bundle)
    assert result.returncode == 0, result
    assert f"Wrote the export of Alice and 1 contact to {bundle}" in result.stdout
    assert "Your contacts are not in this export" not in result.stdout
    password = PASSWORD.search(result.stdout).group(1)
    assert stat.S_IMODE(os.stat(bundle).st_mode) == 0o600
    assert bundle.read_bytes()[:8] == b"ITSMEXP\x02", "a file of format version 2, no text form"
    # Never over an existing file; not with the QR options.
    assert_error(alice.run("export", "--with-contacts", bundle), 2, "already exists")
    assert alice.run("export", "--with-contacts", tmp_path / "x", "--png", tmp_path / "x.png").returncode == 64

    new = people("AliceNew", pin="250731")
    term = new.spawn("import", bundle, pin_file=False)
    term.expect(r"Export password \(like [^)]*\): ")
    term.sendline(password)
    term.expect_exact("Choose a PIN: ")
    term.sendline(new.pin)
    term.expect_exact("Type the PIN again: ")
    term.sendline(new.pin)
    term.expect(r"Installed the identity of Alice")
    term.expect(r"Contacts:\s+1\r\n")
    assert term.finish() == 0
    assert term.transcript.count("Export password") == 1
    check_moved(alice, new, carol, contacts_before=1)
    assert not list(new.dir.glob("contacts.db.*")), "nothing staged is left behind"
    # --contacts as well is refused before anything is asked.
    other = people("Other")
    assert_error(other.run("import", bundle, "--contacts", alice.dir / "contacts.db"), 2, "carries the contacts already")
    check_device_change_seen(carol, new, "Alice", clock)


@pytest.mark.parametrize("rejected_on", ["new device", "old device"])
def test_live_transfer_sas_rejected(people, relay_url, tmp_path, rejected_on):
    alice = people("Alice", init=True)
    carol = people("Carol", init=True)
    add_each_other(alice, carol)
    copied = tmp_path / "copied-contacts.db"
    shutil.copy(alice.dir / "contacts.db", copied)
    new = people("AliceNew")

    tx, rx, _ = start_transfer(alice, new, relay_url, "--contacts", copied)
    if rejected_on == "new device":
        rx.sendline("reject")
        rx.expect(r"Rejected: nothing was installed\.")
        assert rx.finish() == 1
        # The old device, given the SAS, finds the new one gone and sends nothing.
        tx.sendline(tx.sas)
        tx.expect(r"itsme: the new device left the transfer [^\r\n]*nothing was sent")
        assert tx.finish() == 1
    else:
        # A SAS that differs, three times, is a rejection.
        word, digits = tx.sas.split()
        other = f"{word} {(int(digits) + 1) % 10000:04d}"
        for _ in range(3):
            tx.sendline(other)
        tx.expect(r"Three times a SAS that differs")
        tx.expect(r"Rejected: nothing was sent\.")
        assert tx.finish() == 1
        rx.sendline(rx.sas)
        rx.expect(r"itsme: the old device sent no identity [^\r\n]*nothing was installed")
        assert rx.finish() == 1
    assert "Installed" not in rx.transcript and "Sent:" not in tx.transcript
    assert_no_identity(new)
    # The copied contact store did not take its place.
    assert not (new.dir / "contacts.db").exists()
    assert [p.name for p in new.dir.iterdir() if p.name.startswith("contacts")] == []
    assert alice.json("whoami")["name"] == "Alice"
    assert device_secrets(alice) == 1


def test_receiver_waits_through_a_quiet_room(people, relay_bin, server, tmp_path):
    """A relay closes a room where no message passed for a while (here 3 s):
    the new device, waiting alone, joins it again."""
    process, line = server([relay_bin, "--host", "127.0.0.1", "--port", "0", "--database", ":memory:", "--room-idle", "3"])
    url = re.search(r"listening on (\S+)", line).group(1)
    alice = people("Alice", init=True)
    new = people("AliceNew")
    rx = new.spawn("transfer", "receive", "--relay", url, "--text-only")
    offer = rx.expect(OFFER.pattern + r"\r\n").group(0).strip()
    rx.expect(r"Waiting for the old device in the relay room")
    time.sleep(5)
    tx = alice.spawn("transfer", "send", offer, "--relay", url)
    sas = tx.expect(SAS).group(1)
    assert rx.expect(SAS).group(1) == sas
    for term in (tx, rx):
        term.expect(r"\(or reject\): ")
        term.sendline(sas)
    assert tx.finish() == 0
    rx.expect(r"Installed the identity of Alice")
    assert rx.finish() == 0
    assert new.json("whoami")["fingerprint"] == alice.json("whoami")["fingerprint"]


def test_transfer_failures(people, relay_url):
    alice = people("Alice", init=True)
    new = people("AliceNew")

    # A code that is not one is refused before the PIN (none could be read here).
    result = alice.run("transfer", "send", "ITSMETR2:not-a-code", "--relay", relay_url, pin_file=False)
    assert_error(result, 2, "not a device transfer code")
    # One of the version before contacts travelled: update the other device.
    result = alice.run("transfer", "send", "ITSMETR1:AVX3TedMID1ziw1NO", "--relay", relay_url, pin_file=False)
    assert_error(result, 2, "of another version (ITSMETR1:); this device reads ITSMETR2: update the other device")

    # A relay that cannot be reached: exit 4, nothing installed.
    assert_error(new.run("transfer", "receive", "--relay", "http://127.0.0.1:1"), 4, "relay")
    assert_no_identity(new)

    # Ctrl-C while the new device waits: exit 5, nothing installed.
    rx = new.spawn("transfer", "receive", "--relay", relay_url, "--text-only")
    rx.expect(r"Waiting for the old device in the relay room")
    rx.child.sendintr()
    rx.expect(r"itsme: interrupted")
    assert rx.finish() == 5
    assert_no_identity(new)


def test_live_transfer_carries_a_store_of_many_chunks_through_the_relay(people, relay_url, clock, tmp_path):
    """A contact store with a photo of 200 kB travels in seven chunks of at
    most 32 KiB through a real relay room, and arrives whole."""
    from test_profile import online_verify

    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    add_each_other(alice, bob)
    photo = tmp_path / "alice.jpg"
    photo.write_bytes(os.urandom(200_000))
    alice.ok("profile", "set", "--name", "Alice Liddell", "--photo", photo, "--relay", relay_url)
    ta, tb = online_verify(alice, bob, relay_url, clock, bob_args=("--apply-profile",))
    tb.expect(r"Applied: #\d+ is now Alice Liddell; photo saved")
    assert ta.finish() == 0 and tb.finish() == 0
    bob.ok("contacts", "list")  # every handle closed: the file holds it all
    assert (bob.dir / "contacts.db").stat().st_size > 200_000

    new = people("BobNew")
    tx, rx, _ = start_transfer(bob, new, relay_url)
    tx.sendline(rx.sas)
    tx.expect(r"and 1 contact, and installs them\.")
    assert tx.finish() == 0
    rx.sendline(tx.sas)
    rx.expect(r"Received the identity of Bob and the contacts\.")
    rx.expect(r"Contacts:\s+1\r\n")
    assert rx.finish() == 0
    assert [c["name"] for c in new.json("contacts")["contacts"]] == ["Alice Liddell"]
    assert (new.dir / "contacts.db").stat().st_size > 200_000, "the photo came along"
    assert new.json("contacts", "show", "Alice Liddell")["state"] == "verified"
