"""Every command a message suggests runs as printed.

The CLI builds each suggested command with one function, which (with
$ITSME_TEST_SUGGESTIONS set) also appends it to a log. These tests bring
about the states in which each suggestion is printed, take what the log
recorded, and run each command exactly as printed, through a shell, at a
terminal, with `itsme` on the PATH; only a word the person fills in (shown in
capitals: URL, FILE, NAME) is replaced. A suggestion must run: no usage
error, no crash, and the outcome the state calls for. The last test checks
that every place in the CLI's source that suggests a command was run here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pexpect
import pytest

from conftest import CLI_BIN, ROOT, TIMEOUT

SOURCES = ROOT / "apps" / "Sources" / "itsme-cli"
SAS = r"SAS: ([A-Z]+ \d{4})"
PASSWORD = re.compile(r"Export password: ([2-9A-Z]{4}-[2-9A-Z]{4}-[2-9A-Z]{5})")
USAGE = ("Error: ", "Usage: ", "Help:  ")
CRASH = ("Fatal error", "Stack dump", "backtrace", "Segmentation", "Illegal instruction")

# The suggestions run by the tests of this file, by their command words.
ran: set[str] = set()


class Log:
    """The suggestions the CLI recorded, read in order."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0

    def new(self) -> list[dict]:
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        lines = data[self.offset:].decode().splitlines()
        self.offset = len(data)
        return [json.loads(line) for line in lines if line.strip()]

    def take(self, words: str) -> dict:
        """The last new suggestion whose command starts `itsme WORDS`."""
        found = [entry for entry in self.new() if entry["command"].startswith("itsme " + words)]
        assert found, f"no suggestion of `itsme {words}` was printed"
        return found[-1]


def words_of(command: str) -> str:
    """The command words before the first option or value: the call site."""
    parts = shlex.split(command)[1:]
    kept = []
    for part in parts:
        if part.startswith("--") and part not in ("--image", "--join", "--text", "--with-contacts"):
            break
        if part.isupper() or part.startswith("/") or part.startswith("ITSME") or not re.fullmatch(r"[a-z-]+", part.lstrip("-")):
            break
        kept.append(part)
    return " ".join(kept)


@pytest.fixture
def log(env, tmp_path):
    """Turns the log on for every `itsme` of the test, and puts `itsme` on
    the PATH (as an installed CLI is)."""
    path = tmp_path / "suggestions.jsonl"
    env["ITSME_TEST_SUGGESTIONS"] = str(path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "itsme").symlink_to(CLI_BIN)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return Log(path)


def printed(entry: dict, fill=None) -> str:
    """The recorded command, its blank (if any) filled with `fill`."""
    command = entry["command"]
    if entry.get("blank"):
        assert fill is not None, f"{command}: the blank {entry['blank']} needs a value"
        words = command.split(" ")
        assert words.count(entry["blank"]) == 1, command
        command = " ".join(shlex.quote(str(fill)) if word == entry["blank"] else word for word in words)
    return command


def spawn_printed(entry: dict, person, fill=None) -> pexpect.spawn:
    """Starts a recorded suggestion as printed through `sh -c` at a
    terminal in `person`'s environment; a suggestion for another device,
    or one printed by a command that found its data directory in
    $ITSME_DATA_DIR (no --data-dir), runs with `person`'s as
    $ITSME_DATA_DIR, as in the shell it was printed in."""
    env = dict(person.env)
    if entry.get("elsewhere") or "--data-dir" not in entry["command"]:
        env["ITSME_DATA_DIR"] = str(person.dir)
    ran.add(words_of(entry["command"]))
    return pexpect.spawn("/bin/sh", ["-c", printed(entry, fill)], env=env, cwd=str(person.root), encoding="utf-8",
                         codec_errors="replace", timeout=TIMEOUT, dimensions=(50, 250))


def run_printed(entry: dict, person, answers=(), exits=(0,), until=None, fill=None) -> str:
    """Runs a recorded suggestion as printed (`spawn_printed`), answering
    the PIN prompt and the prompts in `answers` ((regex, text) pairs, each
    as often as asked; text None ends the input). With `until`, the run
    stops once that text appears (a command that then waits for the other
    person). No usage error, no crash, and an exit in `exits`. Returns the
    transcript."""
    command = printed(entry, fill)
    child = spawn_printed(entry, person, fill)
    prompts = [re.escape("PIN: ")] + [pattern for pattern, _ in answers]
    replies = [person.pin] + [text for _, text in answers]
    transcript = ""
    stopped = False
    patterns = prompts + ([re.escape(until)] if until else []) + [pexpect.EOF]
    while True:
        try:
            index = child.expect(patterns, timeout=TIMEOUT * 2)
        except pexpect.TIMEOUT:
            child.terminate(force=True)
            raise AssertionError(f"`{command}` waited for no known prompt:\n{transcript}{child.before}")
        transcript += (child.before or "") + (child.after if isinstance(child.after, str) else "")
        if patterns[index] is pexpect.EOF:
            break
        if until and index == len(prompts):
            stopped = True
            child.terminate(force=True)
            break
        if replies[index] is None:
            child.sendeof()
        else:
            child.sendline(replies[index])
    child.close()
    for text in USAGE + CRASH:
        assert text not in transcript, f"`{command}`:\n{transcript}"
    if not stopped:
        assert child.exitstatus in exits, f"`{command}` exited {child.exitstatus} (expected {exits}):\n{transcript}"
    return transcript


def qr_pair(alice, bob):
    payload_a = alice.json("qr", "show")["payload"]
    payload_b = bob.json("qr", "show")["payload"]
    alice.ok("qr", "scan", payload_b)
    bob.ok("qr", "scan", payload_a)
    alice.ok("sas", "confirm")
    bob.ok("sas", "confirm")


# MARK: the first steps


def test_first_steps(people, log, tmp_path):
    alice = people("Alice")
    # No identity yet: `init` is suggested.
    assert alice.run("whoami").returncode == 2
    run_printed(log.take("init"), alice, answers=[("Your name: ", "Alice"), ("Choose a PIN: ", alice.pin),
                                                  ("Type the PIN again: ", alice.pin)])
    # An identity exists: `init` again points at `whoami`.
    assert alice.run("init", "--name", "Alice").returncode == 2
    assert "Fingerprint" in run_printed(log.take("whoami"), alice)

    # No contacts yet: the two ways to add one.
    alice.ok("contacts", "list")
    suggested = log.new()
    qr_show = next(e for e in suggested if e["command"].startswith("itsme qr show"))
    invite_create = next(e for e in suggested if e["command"].startswith("itsme invite create"))
    run_printed(qr_show, alice)
    log.new()  # what qr show suggests is taken below
    # `invite create` while the QR exchange waits: carry it on or drop it.
    assert alice.run("invite", "create", "--relay", "http://127.0.0.1:1").returncode == 2
    entries = log.new()
    scan = next(e for e in entries if e["command"].startswith("itsme qr scan"))
    reject = next(e for e in entries if e["command"].startswith("itsme sas reject"))
    # Asked for a payload at a terminal; input ends: nothing changes.
    run_printed(scan, alice, answers=[(re.escape("Their payload (ITSME1:...): "), None)], exits=(5,))
    run_printed(reject, alice)
    # No relay: `relay set URL`, then `invite create` runs.
    run_printed(invite_create, alice, exits=(2,))
    run_printed(log.take("relay set"), alice, fill="http://127.0.0.1:9")
    assert "No relay set" not in alice.ok("relay", "show")


def test_qr_and_sas_suggestions(people, log, tmp_path):
    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    bob_png = tmp_path / "bob.png"
    payload_b = bob.json("qr", "show", "--png", bob_png)["payload"]
    log.new()
    alice.ok("qr", "show")
    entries = log.new()
    by_image = next(e for e in entries if e["command"].startswith("itsme qr scan --image"))
    # The suggestion reads Bob's code from the photo; at a terminal it asks
    # for the SAS on Bob's screen; input ends, and the exchange waits.
    transcript = run_printed(by_image, alice, answers=[(r"\(or reject\): ", None)], fill=bob_png, exits=(5,))
    sas = re.search(SAS, transcript).group(1)
    # Scanning again says the payload was read: confirm or reject.
    assert alice.run("qr", "scan", payload_b).returncode == 2
    entries = log.new()
    confirm = next(e for e in entries if e["command"].startswith("itsme sas confirm"))
    assert any(e["command"].startswith("itsme sas reject") for e in entries)
    # A new exchange meanwhile: the SAS waits for its decision.
    assert alice.run("qr", "show").returncode == 2
    assert log.take("sas confirm")["command"] == confirm["command"]
    # `sas show` (the SAS's own suggestions) then `sas confirm`, as printed.
    alice.ok("sas", "show")
    run_printed(log.take("sas confirm"), alice)
    assert alice.json("contacts", "show", "Bob")["state"] == "verified"
    assert sas


def test_invite_suggestions(people, log, relay_url):
    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    for person in (alice, bob):
        person.ok("relay", "set", relay_url)
    created = alice.run("invite", "create", "--no-wait")
    assert created.returncode == 0, created
    entries = log.new()
    accept = next(e for e in entries if e["command"].startswith("itsme invite accept"))
    status = next(e for e in entries if e["command"].startswith("itsme invite status"))
    assert accept["elsewhere"] and not status["elsewhere"]
    invite = re.search(r"Invite code:\s+(\S+)", created.stdout).group(1)
    encryption = re.search(r"Encryption code:\s+(\S+)", created.stdout).group(1)
    # Alice runs what her screen said: it carries the invite on and waits.
    carry_on = spawn_printed(status, alice)
    carry_on.expect_exact("PIN: ")
    carry_on.sendline(alice.pin)
    # Bob runs what Alice's screen told him to, in his data directory.
    run_printed(accept, bob, answers=[("Invite code: ", invite), ("Encryption code: ", encryption)],
                until="Type the SAS Alice reads to you")
    carry_on.expect_exact("Type the SAS Bob reads to you (or reject): ")
    carry_on.sendline("reject")
    carry_on.expect(r"Rejected: nothing was kept")
    carry_on.expect(pexpect.EOF)
    carry_on.close()
    assert carry_on.exitstatus == 1
    # Bob's command stopped at its SAS prompt: his side drops it.
    assert bob.run("sas", "reject").returncode == 0
    log.new()

    # Step by step from scripts: after this side's confirmation, the
    # message says what carries the exchange on.
    created = alice.run("invite", "create", "--no-wait", "--json")
    codes = json.loads(created.stdout)
    accepted = bob.run("invite", "accept", codes["inviteCode"], "--no-wait", input=codes["encryptionCode"] + "\n")
    assert accepted.returncode == 0, accepted
    assert alice.json("invite", "status", "--wait", "20")["state"] == "compare-sas"
    result = alice.run("sas", "confirm", "--wait", "0")
    assert result.returncode == 0, result
    run_printed(log.take("invite status"), alice, until="Waiting for")


def test_realtime_suggestion(people, log, relay_url):
    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    host = alice.spawn("realtime", "--relay", relay_url, "--timeout", "30")
    invite = host.expect(r"Invite code:\s+(\S+)").group(1)
    encryption = host.expect(r"Encryption code:\s+(\S+)").group(1)
    host.expect(r"Waiting for the other person")
    join = log.take("realtime --join")
    assert join["elsewhere"]
    bob.ok("relay", "set", relay_url)
    run_printed(join, bob, answers=[("Invite code: ", invite), ("Encryption code: ", encryption)],
                until="Type the SAS Alice reads to you")
    host.kill()


def test_contact_suggestions(people, log):
    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    qr_pair(alice, bob)
    assert alice.run("contacts", "show", "Nobody").returncode == 2
    assert "Bob" in run_printed(log.take("contacts list"), alice)
    # Two contacts of one name: the list shows their ids.
    other_bob = people("Bob2")
    other_bob.ok("init", "--name", "Bob")
    qr_pair(alice, other_bob)
    assert alice.run("contacts", "show", "Bob").returncode == 2
    assert "#2" in run_printed(log.take("contacts list"), alice)


def test_unlock_suggestion(people, log, env, tmp_path):
    import tempfile

    runtime = tempfile.mkdtemp(prefix="itr", dir="/tmp")
    env["XDG_RUNTIME_DIR"] = runtime
    env.pop("ITSME_NO_CACHE")
    alice = people("Alice", init=True)
    try:
        # One terminal session (a window belongs to one): the PIN, then
        # `unlock-time` until the agent started by the first command answers.
        data = shlex.quote(str(alice.dir))
        script = (
            f"itsme contacts list --data-dir {data}; i=0; while [ $i -lt 100 ]; do "
            f"itsme unlock-time --data-dir {data} | grep 'Unlocked now' && break; i=$((i+1)); sleep 0.1; done; read line"
        )
        # The session lasts until the line is typed: the window with it.
        term = pexpect.spawn("/bin/sh", ["-c", script], env=alice.env, cwd=str(alice.root), encoding="utf-8", timeout=60)
        term.expect_exact("PIN: ")
        term.sendline(alice.pin)
        term.expect("Unlocked now")
        assert "Locked" in run_printed(log.take("lock"), alice)
        assert "Nothing to lock" in alice.ok("lock")
        term.sendline("")
        term.expect(pexpect.EOF)
    finally:
        alice.run("lock", "--all")
        os.system(f"rm -rf {shlex.quote(runtime)}")


def test_roll_call_suggestion(people, log, relay_url):
    ana = people("Ana", init=True)
    ben = people("Ben", init=True)
    host = ana.spawn("roll-call", "--relay", relay_url)
    host.expect(r"Meeting code: ")
    host.expect_exact("Joined roll call")
    # What the host prints for the others, run as printed on Ben's device:
    # it joins the same roll call, and both see the other's device.
    env = dict(ben.env, ITSME_RELAY=relay_url)
    ben.env = env
    transcript = run_printed(log.take("roll-call"), ben, until="Joined roll call")
    assert "Joined roll call" in transcript
    host.sendline("done")
    host.sendline("1")
    assert host.finish() in (0, 1)


def test_device_change_suggestions(people, log, clock):
    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    qr_pair(alice, bob)
    bob.ok("device", "reset", "--yes")
    # `device reset` names the command that makes the code.
    transcript = run_printed(log.take("device-change-code"), bob, fill="Alice")
    code = re.search(r"Device-change code for Alice: (\S+)", transcript).group(1)
    # That names what Alice runs, on her device.
    ack = log.take("acknowledge-device-change")
    assert ack["elsewhere"]
    run_printed(ack, alice, answers=[(re.escape("Bob's device-change code: "), code)])


def test_verify_suggestions(people, log, clock):
    from test_cli_verify import CODE_PROMPT, TAG_PROMPT, YOUR_CODE, exchange_codes, select_words, start_voice

    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    qr_pair(alice, bob)
    bob.ok("device", "reset", "--yes")
    # Alice verifies Bob's new device: the code is right, the device
    # changed: `acknowledge-device-change` is suggested, on her device.
    # (A tag is two digits: in one window in 100 the new device's matches the
    # old one's by chance; the next window tells, PROTOCOL.md 10.1.)
    for _ in range(4):
        ta, tb = start_voice(alice, bob, clock)
        select_words(ta, tb)
        exchange_codes(ta, tb, untagged=(tb,))
        seen = ta.expect([r"device changed", r"Verified: this is Bob\."])
        assert ta.finish() == 0 and tb.finish() == 0
        if seen == 0:
            break
    ack = log.take("acknowledge-device-change")
    assert not ack["elsewhere"]
    code = re.search(r"Device-change code for Alice: (\S+)", bob.ok("device-change-code", "Alice")).group(1)
    log.new()
    run_printed(ack, alice, answers=[(re.escape("Bob's device-change code: "), code)])

    # A wrong code: start again, as printed.
    ta, tb = start_voice(alice, bob, clock)
    select_words(ta, tb)
    ta.expect(YOUR_CODE)
    ta.expect(CODE_PROMPT)
    ta.sendline("ECHO 000")
    ta.expect(TAG_PROMPT)
    ta.sendline("00")
    ta.expect(r"NOT VERIFIED")
    ta.finish()
    tb.kill()
    again = log.take("verify")
    assert shlex.split(again["command"])[:3] == ["itsme", "verify", "Bob"]
    run_printed(again, alice, until="The session starts with the next 30-second window")


def test_profile_suggestions(people, log, relay_url):
    alice = people("Alice", init=True)
    alice.ok("relay", "set", relay_url)
    alice.ok("profile", "show")
    run_printed(log.take("profile set"), alice)
    online = log.take("online-verify")
    bob = people("Bob", init=True)
    qr_pair(alice, bob)
    run_printed(online, alice, fill="Bob", until="Waiting for Bob in the relay room")
    # A damaged profile.json: remove it and set it again.
    (alice.dir / "profile.json").write_text("{")
    assert alice.run("profile", "show").returncode == 2
    (alice.dir / "profile.json").unlink()
    run_printed(log.take("profile set"), alice)


def test_store_loss_suggestion(people, log, tmp_path):
    import shutil

    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    qr_pair(alice, bob)
    older = tmp_path / "older.db"
    shutil.copyfile(alice.dir / "contacts.db", older)
    alice.ok("contacts", "rename", "Bob", "Robert")
    for name in ("contacts.db", "contacts.db-wal", "contacts.db-shm"):
        (alice.dir / name).unlink(missing_ok=True)
    shutil.copyfile(older, alice.dir / "contacts.db")
    assert alice.run("contacts", "list").returncode == 2
    run_printed(log.take("contacts accept-loss"), alice, answers=[(r"\[y/n\] ", "n")])


def test_export_and_transfer_suggestions(people, log, relay_url, tmp_path):
    alice = people("Alice", init=True)
    export = tmp_path / "alice.export"
    result = alice.run("export", "--output", export)
    assert result.returncode == 0, result
    password = PASSWORD.search(result.stdout).group(1)
    new = people("AliceNew")
    answers = [(r"Export password \(like [^)]*\): ", password), ("Choose a PIN: ", new.pin), ("Type the PIN again: ", new.pin)]
    entries = log.new()
    entry = next(e for e in entries if e["command"].startswith("itsme import"))
    assert entry["elsewhere"]
    # The identity alone: it says how to bring the contacts too.
    with_contacts = next(e for e in entries if e["command"].startswith("itsme export --with-contacts"))
    receive = next(e for e in entries if e["command"].startswith("itsme transfer receive"))
    assert not with_contacts["elsewhere"] and receive["elsewhere"]
    transcript = run_printed(entry, new, answers=answers)
    assert "Installed the identity of Alice" in transcript
    # The new device, with no contacts, names the same two ways.
    entries = log.new()
    assert any(e["command"].startswith("itsme export --with-contacts") and e["elsewhere"] for e in entries), entries
    here = next(e for e in entries if e["command"].startswith("itsme transfer receive"))
    assert not here["elsewhere"]
    alice.ok("relay", "set", relay_url)
    bundle = tmp_path / "bundle.itsme"
    assert "Wrote the export of Alice and 0 contacts" in run_printed(with_contacts, alice, fill=bundle)
    other = people("Other")
    other.ok("relay", "set", relay_url, pin_file=False)
    run_printed(receive, other, until="Waiting for the old device in the relay room")
    new.ok("relay", "set", relay_url)
    run_printed(here, new, until="Waiting for the old device in the relay room")

    # The text form: the QR code's photo, or the text line itself.
    made = alice.run("export", "--png", tmp_path / "export.png")
    assert made.returncode == 0, made
    password = PASSWORD.search(made.stdout).group(1)
    entries = log.new()
    by_image = next(e for e in entries if e["command"].startswith("itsme import --image"))
    by_text = next(e for e in entries if e["command"].startswith("itsme import --text"))
    answers = [(r"Export password \(like [^)]*\): ", password), ("Choose a PIN: ", "111111"), ("Type the PIN again: ", "111111")]
    for entry in (by_image, by_text):
        target = people(f"Target{len(ran)}", pin="111111")
        transcript = run_printed(entry, target, answers=answers, fill=tmp_path / "export.png")
        assert "Installed the identity of Alice" in transcript

    # The live transfer: the new device's screen says what the old runs,
    # from a photo of its code or with the code's text.
    alice.ok("relay", "set", relay_url)
    for form in ("--image", "text"):
        receiver = people(f"Receiver{form.strip('-')}")
        picture = tmp_path / f"offer-{form.strip('-')}.png"
        rx = receiver.spawn("transfer", "receive", "--relay", relay_url, "--png", picture, pin_file=False)
        rx.expect(r"Waiting for the old device in the relay room")
        entries = [e for e in log.new() if e["command"].startswith("itsme transfer send")]
        entry = next(e for e in entries if (e["command"].startswith("itsme transfer send --image")) == (form == "--image"))
        assert entry["elsewhere"]
        run_printed(entry, alice, fill=picture, until="Type the SAS the new device shows")
        rx.kill()


# MARK: coverage


def call_sites() -> set[str]:
    """The command words of every `suggest(...)` in the CLI's source."""
    found = set()
    for path in SOURCES.glob("*.swift"):
        for match in re.finditer(r'\bsuggest\(((?:"[^"]*"(?:,\s*)?)+)', path.read_text()):
            words = re.findall(r'"([^"]*)"', match.group(1))
            found.add(" ".join(words))
    return found


def test_every_call_site_was_run():
    sites = call_sites()
    assert len(sites) > 15, sites
    missing = sorted(sites - ran)
    assert not missing, f"suggestions never run as printed: {missing}; run: {sorted(ran)}"
