"""Adding a contact: by invite through the relay, in a real-time room, and
in person by QR code, typed at the prompts."""

import re
import time

CODE = r"([2-9A-Z]{4}-[2-9A-Z]{4})"
SAS = r"SAS: ([A-Z]+ \d{4})"
ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"


def with_typo(code: str) -> str:
    """The code with one character changed (its check character catches it)."""
    first = code[0]
    other = ALPHABET[(ALPHABET.index(first) + 1) % len(ALPHABET)]
    return other + code[1:]


def contact_named(person, name):
    contacts = person.json("contacts")["contacts"]
    matching = [c for c in contacts if c["name"] == name]
    assert len(matching) == 1, contacts
    return matching[0]


def other_sas(sas: str) -> str:
    """A SAS with the same word and other digits."""
    word, digits = sas.split()
    return f"{word} {(int(digits) + 1) % 10000:04d}"


def start_invite(alice, bob, relay_url):
    """At terminals, with the PIN typed: Alice runs `invite create`, Bob
    `invite accept` with the two codes she gave him. Each command waits for
    the other; returns both terminals at their SAS prompts and the SAS."""
    create = alice.spawn("invite", "create", "--relay", relay_url, pin_file=False)
    create.expect_exact("PIN: ")
    create.sendline(alice.pin)
    invite = create.expect(r"Invite code:\s+" + CODE).group(1)
    encryption = create.expect(r"Encryption code:\s+" + CODE).group(1)
    create.expect(r"They run: itsme invite accept\r\n")
    assert invite != encryption

    accept = bob.spawn("invite", "accept", "--relay", relay_url, pin_file=False)
    accept.expect_exact("PIN: ")
    accept.sendline(bob.pin)
    accept.expect_exact("Invite code: ")
    accept.sendline(with_typo(invite))
    accept.expect(r"the invite code has a typo: check it character by character; try again\.")
    accept.expect_exact("Invite code: ")
    accept.sendline(invite.lower().replace("-", " "))
    accept.expect_exact("Encryption code: ")
    accept.sendline(encryption)
    accept.expect(r"Joining the invite; waiting up to 10 min")

    sas_alice = create.expect(SAS).group(1)
    sas_bob = accept.expect(SAS).group(1)
    assert sas_alice == sas_bob
    create.expect(r"It is Bob's device \(fingerprint [0-9A-F ]+\) only if Bob has the same SAS\.")
    create.expect_exact("Type the SAS Bob reads to you (or reject): ")
    accept.expect_exact("Type the SAS Alice reads to you (or reject): ")
    return create, accept, sas_alice


def test_invite_is_one_command_per_side_with_one_pin_prompt(people, relay_url):
    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    create, accept, sas = start_invite(alice, bob, relay_url)

    # Alice mishears once: the CLI says so and asks again; nothing is sent.
    create.sendline(other_sas(sas))
    create.expect(r"is not the SAS on this screen")
    create.expect_exact("Type the SAS Bob reads to you (or reject): ")
    create.sendline(sas.lower())
    create.expect(r"The same SAS: your confirmation goes to Bob")
    # Bob takes his time; Alice's command waits for his decision.
    time.sleep(1)
    accept.sendline(sas)
    create.expect(r"Bob confirmed too: Bob \(#\d+\) is a verified contact\.")
    accept.expect(r"Alice confirmed too: Alice \(#\d+\) is a verified contact\.")
    assert create.finish() == 0
    assert accept.finish() == 0
    # One command and one PIN prompt per side.
    for terminal in (create, accept):
        assert terminal.transcript.count("PIN: ") == 1, terminal.transcript
    at_alice = contact_named(alice, "Bob")
    at_bob = contact_named(bob, "Alice")
    assert at_alice["state"] == "verified" and at_alice["method"] == "invite"
    assert at_bob["state"] == "verified" and at_bob["method"] == "invite"
    assert at_alice["fingerprint"] == bob.json("whoami")["fingerprint"]
    assert at_bob["fingerprint"] == alice.json("whoami")["fingerprint"]
    assert alice.json("sas", "show") == {"state": "none"}
    assert bob.json("sas", "show") == {"state": "none"}


def test_invite_rejected_by_one_side_tells_the_other(people, relay_url):
    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    create, accept, sas = start_invite(alice, bob, relay_url)
    accept.sendline(sas)
    accept.expect(r"The same SAS: your confirmation goes to Alice")
    create.sendline("reject")
    create.expect(r"Rejected: nothing was kept\. Bob's side is told the exchange ended\.")
    accept.expect(r"Alice ended the exchange \(rejected the SAS, or gave up\): nothing was kept\.")
    assert create.finish() == 1
    assert accept.finish() == 1
    assert alice.json("contacts")["contacts"] == [] and bob.json("contacts")["contacts"] == []
    assert alice.json("sas", "show") == {"state": "none"}
    assert bob.json("sas", "show") == {"state": "none"}


def test_invite_step_by_step_with_no_wait(people, relay_url):
    """The resumable flow: each command does one step and returns; `invite
    status` carries the exchange on and `sas confirm` decides."""
    alice = people("Alice", init=True)
    bob = people("Bob", init=True)

    create = alice.spawn("invite", "create", "--relay", relay_url, "--no-wait")
    invite = create.expect(r"Invite code:\s+" + CODE).group(1)
    encryption = create.expect(r"Encryption code:\s+" + CODE).group(1)
    create.expect(r"Then: itsme invite status --data-dir \S+")
    assert create.finish() == 0

    accept = bob.spawn("invite", "accept", invite, "--relay", relay_url, "--no-wait")
    accept.expect_exact("Encryption code: ")
    accept.sendline(encryption)
    accept.expect(r"Still waiting for the other side\. Later: itsme invite status")
    assert accept.finish() == 0

    # Alice carries the invite on (a script: no terminal, so no prompt).
    sas_alice = alice.json("invite", "status", "--wait", "20")["sas"]
    sas_bob = bob.json("invite", "status", "--wait", "20")["sas"]
    assert sas_alice == sas_bob

    # `sas show` shows the same SAS while it waits for confirmation.
    assert alice.json("sas", "show")["sas"] == sas_alice
    assert bob.json("sas", "show")["sas"] == sas_bob

    # Each confirms on their own time; a contact is verified only once the
    # other's confirmation arrived too.
    confirmed = alice.json("sas", "confirm", "--wait", "0")
    assert confirmed["state"] == "awaiting-peer", confirmed
    assert contact_named(alice, "Bob")["state"] == "awaiting-peer"
    assert alice.json("sas", "show")["state"] == "awaiting-decision"
    assert bob.json("sas", "confirm", "--wait", "0")["state"] == "awaiting-peer"
    # Alice reads Bob's decision and posts hers; Bob reads hers.
    assert alice.json("invite", "status", "--wait", "10")["state"] == "verified"
    assert bob.json("invite", "status", "--wait", "10")["state"] == "verified"
    assert contact_named(alice, "Bob")["state"] == "verified"
    assert contact_named(bob, "Alice")["state"] == "verified"
    assert alice.json("sas", "show") == {"state": "none"}


def test_invite_cancel(people, relay_url):
    alice = people("Alice", init=True)
    created = alice.json("invite", "create", "--relay", relay_url)
    assert re.fullmatch(CODE, created["inviteCode"]), created
    assert created["state"] == "awaiting-peer"
    # A second exchange is refused while this one is in progress.
    second = alice.run("invite", "create", "--relay", relay_url)
    assert second.returncode == 2, second
    assert "in progress" in second.stderr
    alice.ok("invite", "cancel")
    assert alice.json("sas", "show") == {"state": "none"}


def start_realtime(alice, bob, relay_url, typo=False):
    """Alice hosts a real-time exchange; Bob joins with the codes she reads
    to him (first with a typo in the encryption code, if asked)."""
    host = alice.spawn("realtime", "--relay", relay_url, "--timeout", "40")
    invite = host.expect(r"Invite code:\s+" + CODE).group(1)
    encryption = host.expect(r"Encryption code:\s+" + CODE).group(1)
    host.expect(r"Waiting for the other person in the room")
    join = bob.spawn("realtime", "--join", "--relay", relay_url, "--timeout", "40")
    join.expect_exact("Invite code: ")
    join.sendline(invite)
    if typo:
        join.expect_exact("Encryption code: ")
        join.sendline(with_typo(encryption))
        join.expect(r"the encryption code has a typo: check it character by character; try again\.")
    join.expect_exact("Encryption code: ")
    join.sendline(encryption)
    return host, join


def test_realtime_exchange(people, relay_url):
    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    host, join = start_realtime(alice, bob, relay_url, typo=True)

    # Each types the SAS the other reads on the call, inside the room; Bob
    # takes his time, and the contacts are verified only once both agreed.
    sas_alice = host.expect(SAS).group(1)
    sas_bob = join.expect(SAS).group(1)
    assert sas_alice == sas_bob
    host.expect_exact("Type the SAS Bob reads to you (or reject): ")
    host.sendline(sas_bob)
    join.expect_exact("Type the SAS Alice reads to you (or reject): ")
    time.sleep(1)
    join.sendline(sas_alice)
    host.expect(r"Bob confirmed too: Bob \(#\d+\) is a verified contact")
    join.expect(r"Alice confirmed too: Alice \(#\d+\) is a verified contact")
    assert host.finish() == 0
    assert join.finish() == 0
    assert contact_named(alice, "Bob")["method"] == "realtime"
    assert contact_named(bob, "Alice")["state"] == "verified"


def test_realtime_exchange_rejected_by_one_side(people, relay_url):
    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    host, join = start_realtime(alice, bob, relay_url)
    # Alice types the SAS Bob reads; Bob says it differs: neither keeps
    # anything, and each screen says who rejected.
    sas = host.expect(SAS).group(1)
    host.expect_exact("Type the SAS Bob reads to you (or reject): ")
    host.sendline(sas)
    join.expect_exact("Type the SAS Alice reads to you (or reject): ")
    join.sendline("reject")
    host.expect(r"Bob rejected the SAS: nothing was kept")
    join.expect(r"Rejected: nothing was kept\. Alice's side is told")
    assert host.finish() == 1
    assert join.finish() == 1
    assert alice.json("contacts")["contacts"] == [] and bob.json("contacts")["contacts"] == []


def test_qr_exchange_and_reject(people):
    alice = people("Alice", init=True)
    bob = people("Bob", init=True)

    payload_a = alice.json("qr", "show")["payload"]
    payload_b = bob.json("qr", "show")["payload"]
    assert payload_a.startswith("ITSME") and payload_b.startswith("ITSME")
    assert payload_a != payload_b
    # Shown again, the same exchange (and payload) goes on.
    assert alice.json("qr", "show")["payload"] == payload_a

    scan = alice.spawn("qr", "scan")
    scan.expect_exact("Their payload (ITSME1:...): ")
    scan.sendline("hello, this is not a payload")
    scan.expect(r"not an ItsMe exchange payload[^\r\n]*; try again\.")
    # A paste that lost its end is not a whole payload: asked again, the
    # exchange goes on.
    scan.expect_exact("Their payload (ITSME1:...): ")
    scan.sendline(payload_b[:120])
    scan.expect(r"cut short[^\r\n]*; try again\.")
    scan.expect_exact("Their payload (ITSME1:...): ")
    scan.sendline(payload_b)
    sas_scan = scan.expect(SAS).group(1)
    # At a terminal it asks for the SAS on Bob's screen; input ends: the
    # exchange waits, for `sas confirm|reject` later.
    scan.expect_exact("Type the SAS on Bob's screen (or reject): ")
    scan.sendeof()
    scan.expect(r"itsme: input ended before the SAS was compared")
    assert scan.finish() == 5

    bob.ok("qr", "scan", payload_a)
    sas_a = alice.json("sas", "show")
    sas_b = bob.json("sas", "show")
    assert sas_a["sas"] == sas_b["sas"] == sas_scan
    assert sas_a["state"] == sas_b["state"] == "compare-sas"
    assert sas_a["peer"]["name"] == "Bob" and sas_b["peer"]["name"] == "Alice"

    # Until confirmed, the contact is saved unverified.
    assert contact_named(alice, "Bob")["state"] == "unverified"

    rejected = alice.run("sas", "reject")
    assert rejected.returncode == 0, rejected
    assert "Rejected" in rejected.stdout
    assert alice.json("contacts")["contacts"] == []
    assert "No contacts yet" in alice.ok("contacts", "list")
    assert alice.json("sas", "show") == {"state": "none"}


def test_qr_exchange_at_terminals(people):
    """In person: each reads the other's code and types the SAS shown on the
    other screen; both are verified without another command."""
    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    payload_a = alice.json("qr", "show")["payload"]
    payload_b = bob.json("qr", "show")["payload"]
    scan_a = alice.spawn("qr", "scan", payload_b)
    sas = scan_a.expect(SAS).group(1)
    scan_a.expect_exact("Type the SAS on Bob's screen (or reject): ")
    scan_b = bob.spawn("qr", "scan", payload_a)
    assert scan_b.expect(SAS).group(1) == sas
    scan_b.expect_exact("Type the SAS on Alice's screen (or reject): ")
    scan_a.sendline(sas)
    scan_a.expect(r"Bob \(#\d+\) is a verified contact\.")
    scan_b.sendline(sas.replace(" ", "-"))
    scan_b.expect(r"Alice \(#\d+\) is a verified contact\.")
    assert scan_a.finish() == 0 and scan_b.finish() == 0
    assert contact_named(alice, "Bob")["state"] == "verified"
    assert contact_named(bob, "Alice")["state"] == "verified"


def test_invite_with_a_wrong_encryption_code_fails_on_both_sides(people, relay_url):
    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    carol = people("Carol", init=True)
    invite = alice.json("invite", "create", "--relay", relay_url)["inviteCode"]
    # A well-formed code (its check character holds), but not Alice's.
    wrong = carol.json("invite", "create", "--relay", relay_url)["encryptionCode"]

    accept = bob.spawn("invite", "accept", invite, "--relay", relay_url)
    accept.expect_exact("Encryption code: ")
    accept.sendline(wrong)
    accept.expect(r"Joining the invite")
    status = alice.run("invite", "status", "--wait", "20")
    assert status.returncode == 1, status
    assert "wrong encryption code" in status.stderr
    accept.expect(r"itsme: relay: the invite is no longer on the relay")
    assert accept.finish() == 4
    for person in (alice, bob):
        assert person.json("contacts")["contacts"] == []
        assert person.json("sas", "show") == {"state": "none"}


def test_qr_scan_of_ones_own_payload_is_refused(people):
    alice = people("Alice", init=True)
    payload = alice.json("qr", "show")["payload"]
    result = alice.run("qr", "scan", payload)
    assert result.returncode == 2, result
    assert result.stderr.splitlines() == ["itsme: the scanned payload carries our own identity key"]
    assert alice.json("contacts")["contacts"] == []


def test_contacts_rename_and_remove_at_the_terminal(pair):
    alice, bob = pair
    alice.ok("contacts", "rename", "Bob", "Robert")
    assert alice.json("contacts", "show", "Robert")["name"] == "Robert"

    remove = alice.spawn("contacts", "remove", "Robert")
    remove.expect(r"Remove Robert \(#\d+\)\? Codes with them stop working\. \[y/n\] ")
    remove.sendline("n")
    remove.expect(r"Kept Robert\.")
    assert remove.finish() == 0
    assert len(alice.json("contacts")["contacts"]) == 1

    remove = alice.spawn("contacts", "remove", "#1")
    remove.expect(r"\[y/n\] ")
    remove.sendline("y")
    remove.expect(r"Removed Robert\.")
    assert remove.finish() == 0
    assert alice.json("contacts")["contacts"] == []


def test_device_reset_asks_first(pair):
    alice, bob = pair
    reset = bob.spawn("device", "reset")
    reset.expect(r"Forget this device's secrets for all 1 contacts\? Each will see a device change\. \[y/n\] ")
    reset.sendline("n")
    reset.expect(r"Nothing changed\.")
    assert reset.finish() == 0


def test_qr_show_draws_a_code(people):
    alice = people("Alice", init=True)
    shown = alice.ok("qr", "show")
    lines = shown.splitlines()
    # Each line of the drawing sets its colours (dark on light) and resets them.
    colours, reset = "\x1b[38;5;16;48;5;231m", "\x1b[0m"
    drawing = [line[len(colours):-len(reset)] for line in lines if line.startswith(colours) and line.endswith(reset)]
    assert len(drawing) >= 10, shown
    assert all(set(line) <= set("\u2588\u2580\u2584 ") for line in drawing), shown
    assert len({len(line) for line in drawing}) == 1, "the drawing is not a square of equal lines"
    payload = alice.json("qr", "show")["payload"]
    assert payload in lines


def test_two_contacts_with_the_same_name(people):
    alice = people("Alice", init=True)
    bobs = [people("Bob"), people("Bob2")]
    for bob in bobs:
        bob.ok("init", "--name", "Bob")
        payload_bob = bob.json("qr", "show")["payload"]
        payload_alice = alice.json("qr", "show")["payload"]
        alice.ok("qr", "scan", payload_bob)
        bob.ok("qr", "scan", payload_alice)
        alice.ok("sas", "confirm")
        bob.ok("sas", "confirm")
    ambiguous = alice.run("contacts", "show", "bob")
    assert ambiguous.returncode == 2, ambiguous
    assert ambiguous.stderr.splitlines() == [
        f"itsme: 2 contacts are named bob: give the id (itsme contacts list --data-dir {alice.dir})"
    ]
    # By id and by fingerprint (spaces as printed) it is found.
    contacts = alice.json("contacts")["contacts"]
    assert {c["name"] for c in contacts} == {"Bob"}
    second = contacts[1]
    assert alice.json("contacts", "show", f"#{second['id']}")["fingerprint"] == second["fingerprint"]
    spaced = " ".join(second["fingerprint"][i:i + 4] for i in range(0, 16, 4))
    assert alice.json("contacts", "show", spaced)["id"] == second["id"]


def test_accept_refuses_before_asking_when_an_exchange_is_in_progress(people, relay_url):
    """A QR exchange is in progress: `invite accept` says so before the
    person types two codes for nothing."""
    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    invite = alice.json("invite", "create", "--relay", relay_url)
    bob.ok("qr", "show", "--text-only")
    accept = bob.spawn("invite", "accept", "--relay", relay_url)
    first = accept.expect([r"itsme: a qr exchange is in progress", r"Invite code: "])
    if first == 1:
        accept.sendline(invite["inviteCode"])
        accept.expect_exact("Encryption code: ")
        accept.sendline(invite["encryptionCode"])
        accept.expect(r"itsme: a qr exchange is in progress")
    assert accept.finish() == 2
    assert first == 0, "the codes were asked, then refused:\n" + accept.transcript


def test_an_expired_exchange_is_dropped(people, clock):
    """A QR exchange left pending past its 24 hours can only be dropped:
    `sas reject` says so and clears it, and a new one can start."""
    alice = people("Alice", init=True)
    assert alice.json("qr", "show", "--test-clock", clock)["payload"].startswith("ITSME")
    clock.advance(25 * 3600)
    shown = alice.run("sas", "show", "--test-clock", clock)
    assert shown.returncode == 2, shown
    assert len(shown.stderr.strip().splitlines()) == 2, shown.stderr  # the test-clock warning, then one line
    dropped = alice.run("sas", "reject", "--test-clock", clock)
    assert dropped.returncode == 0, dropped
    assert "dropped the exchange in progress" in dropped.stderr
    assert alice.json("sas", "show", "--test-clock", clock) == {"state": "none"}
    assert alice.json("qr", "show", "--test-clock", clock)["payload"].startswith("ITSME")
