"""What a person or a script reads: output in order when standard output is
not a terminal (`itsme ... | tee log`), and `--json` runs that must give
the other person the codes while they wait."""

import os
import re
import subprocess

from conftest import read_until

CODE = r"[2-9A-Z]{4}-[2-9A-Z]{4}"


def test_refusal_comes_before_the_next_prompt_through_a_pipe(people):
    """`printf 'junk\\nPAYLOAD\\n' | itsme qr scan | cat`: the refusal of the
    first line is printed before the prompt asks again."""
    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    alice.ok("qr", "show", "--text-only")
    payload = bob.json("qr", "show")["payload"]
    result = alice.run("qr", "scan", input=f"junk\n{payload}\n")
    assert result.returncode == 0, result
    out = result.stdout
    first_prompt = out.index("Their payload (ITSME1:...): ")
    second_prompt = out.index("Their payload (ITSME1:...): ", first_prompt + 1)
    refusal = out.index("not an ItsMe exchange payload")
    assert first_prompt < refusal < second_prompt, repr(out)


def test_verify_shows_the_words_before_asking_when_output_is_piped(pair, clock):
    """`itsme verify Bob | tee log` at a terminal: the session ID and the
    words are on the screen before the prompt asks to choose one."""
    alice, bob = pair
    master, slave = os.openpty()
    process = subprocess.Popen(
        alice.argv(["verify", "Bob", "--test-clock", clock]), env=alice.env, stdin=slave,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    os.close(slave)
    try:
        seen = read_until(process.stdout, r"Starting in \d+ s")
        target = clock.get() + int(re.search(r"Starting in (\d+) s", seen).group(1))
        clock.set(target)
        seen += read_until(process.stdout, r"Your turn: |'s turn: ")
        assert re.search(r"turn: ", seen), repr(seen)
        prompt = re.search(r"Your turn: |'s turn: ", seen).start()
        assert "Session ID: " in seen[:prompt], repr(seen)
        assert "Your words: " in seen[:prompt], repr(seen)
    finally:
        process.kill()
        process.wait(timeout=10)
        os.close(master)


def test_realtime_json_shows_the_codes(people, relay_url):
    """`itsme realtime --json`: the codes the other person needs are shown
    while it waits for them (here nobody comes: it gives up after 6 s)."""
    alice = people("Alice", init=True)
    host = alice.spawn("realtime", "--json", "--relay", relay_url, "--timeout", "6")
    host.expect([CODE, r"itsme: relay"])
    assert re.search(CODE, host.transcript), (
        "no invite or encryption code was shown before the wait ended:\n" + host.transcript
    )
    host.kill()


def test_invite_create_json_wait_shows_the_codes_before_waiting(people, relay_url):
    """`itsme invite create --json --wait 6`: Bob can accept during the
    wait with the codes it printed, and the document shows the SAS."""
    alice = people("Alice", init=True)
    bob = people("Bob", init=True)
    create = alice.spawn("invite", "create", "--json", "--wait", "6", "--relay", relay_url)
    # With --json the codes go to standard error (standard output stays one
    # document); the terminal shows both.
    create.expect(r"Encryption code: +" + CODE)
    found = dict(re.findall(r"(Invite|Encryption) code: +(" + CODE + ")", create.transcript))
    codes = {"inviteCode": found.get("Invite"), "encryptionCode": found.get("Encryption")}
    assert create.child.isalive() and all(codes.values()), (
        "the codes were not printed before the wait:\n" + create.transcript
    )
    accept = bob.run(
        "invite", "accept", codes["inviteCode"], "--relay", relay_url, "--wait", "6",
        input=codes["encryptionCode"] + "\n",
    )
    assert accept.returncode == 0, accept
    assert create.finish() == 0
    assert re.search(r'"state" : "compare-sas"', create.transcript), create.transcript
    assert re.search(r'"sas" : "[A-Z]+ \d{4}"', create.transcript), create.transcript
