"""Verification: by voice (`itsme verify`, both sides typed at the prompts,
the window controlled by `--test-clock`), a device change and its
acknowledgement, and Online Verify through the relay."""

import re

NATO = (
    "ALFA BRAVO CHARLIE DELTA ECHO FOXTROT GOLF HOTEL INDIA JULIET KILO LIMA MIKE NOVEMBER OSCAR PAPA "
    "QUEBEC ROMEO SIERRA TANGO UNIFORM VICTOR WHISKEY XRAY YANKEE ZULU"
).split()

MY_TURN = r"Your turn: choose one of your words, say it, and type it: "
THEIR_TURN = r"'s turn: type the word \S+ says: "
YOUR_CODE = r"Your Code:  ([A-Z]+ \d{3})  tag (\d{2})"
CODE_PROMPT = r"Type the code (\S+) says \(like ECHO 512\): "
TAG_PROMPT = r"Type the two-digit tag (\S+) says: "
NO_TAG = r"No tag to type: this device holds no device secret for (\S+)"


def start_voice(a, b, clock):
    """Both run `itsme verify` at once; the test clock jumps to the window
    both countdowns point at. Returns the two terminals, each with its
    words."""
    ta = a.spawn("verify", b.name, "--test-clock", clock)
    tb = b.spawn("verify", a.name, "--test-clock", clock)
    now = clock.get()
    targets = []
    for term, peer in ((ta, b), (tb, a)):
        term.expect(rf"Verifying {peer.name}\. The session starts with the next 30-second window\.")
        targets.append(now + int(term.expect(r"Starting in (\d+) s").group(1)))
    # Both plan the same window: the next multiple of 30.
    assert targets[0] == targets[1], targets
    assert targets[0] % 30 == 0 and 0 < targets[0] - now <= 30 + 30, (now, targets)
    clock.set(targets[0])

    ids = []
    for term in (ta, tb):
        term.expect(r"Starting now\.")
        ids.append(term.expect(r"Session ID: ([A-Z]+ \d{2})").group(1))
        words = term.expect(r"Your words: ([A-Z, ]+)\r\n").group(1).split(", ")
        assert len(words) == 5 and set(words) <= set(NATO), words
        term.words = words
    assert ids[0] == ids[1], ids
    return ta, tb


def select_words(ta, tb, wrong_word_first=False):
    """Two turns: the one whose prompt says "Your turn" types one of its
    words, the other types what it heard. Turns alternate."""
    speakers = []
    for turn in range(2):
        prompts = [term.expect([MY_TURN, THEIR_TURN]) for term in (ta, tb)]
        assert sorted(prompts) == [0, 1], f"turn {turn}: prompts {prompts}"
        speaker, listener = (ta, tb) if prompts[0] == 0 else (tb, ta)
        if wrong_word_first:
            wrong = next(w for w in NATO if w not in speaker.words)
            speaker.sendline(wrong)
            speaker.expect(r"that is not one of your words \(" + re.escape(", ".join(speaker.words)) + r"\); try again\.")
            speaker.expect_exact(MY_TURN)
        word = speaker.words[turn]
        speaker.sendline(word.lower() if turn else word)
        listener.sendline(word)
        speakers.append(speaker)
    # Turns alternate: the second word was the other side's.
    assert speakers[0] is not speakers[1]


def exchange_codes(ta, tb, malformed_first=False, untagged=()):
    """Each side says its code and tag; the other types them. A terminal
    in `untagged` (a device holding no secret of the other's) is not asked
    for the tag, and says so."""
    codes = [term.expect(YOUR_CODE).groups() for term in (ta, tb)]
    for term, (code, tag) in ((ta, codes[1]), (tb, codes[0])):
        term.expect(CODE_PROMPT)
        if term in untagged:
            term.sendline(code)
            assert term.expect([TAG_PROMPT, NO_TAG]) == 1, "no tag is asked that the device could not check"
            continue
        if malformed_first:
            term.sendline("ECHO 12")
            term.expect(r"a code is a word of the alphabet and three digits, like ECHO 512; try again\.")
            term.expect(CODE_PROMPT)
        term.sendline(code)
        term.expect(TAG_PROMPT)
        if malformed_first:
            term.sendline("123")
            term.expect(r"a tag is two digits, 00 to 99 \(7 is read as 07\); try again\.")
            term.expect(TAG_PROMPT)
        term.sendline(tag)
    for term, (code, tag) in ((ta, codes[1]), (tb, codes[0])):
        # What the other device says is what was typed.
        their = term.expect(r"Their Code: ([A-Z]+ \d{3})  tag (\d{2}|--)").groups()
        assert their[0] == code, (their, code)
    return codes


def test_voice_verification_typed_at_the_prompts(pair, clock):
    alice, bob = pair
    ta, tb = start_voice(alice, bob, clock)
    select_words(ta, tb, wrong_word_first=True)
    codes = exchange_codes(ta, tb, malformed_first=True)
    ta.expect(r"Verified: this is Bob\.")
    tb.expect(r"Verified: this is Alice\.")
    assert ta.finish() == 0
    assert tb.finish() == 0
    # The clock did not move while the people typed.
    assert clock.get() % 30 == 0
    # Each side's "Your Code" is its own: the two differ as codes.
    assert codes[0] != codes[1]
    assert alice.json("contacts", "show", "Bob")["state"] == "verified"
    assert bob.json("contacts", "show", "Alice")["state"] == "verified"


def test_voice_verification_wrong_code_is_not_verified(pair, clock):
    alice, bob = pair
    ta, tb = start_voice(alice, bob, clock)
    select_words(ta, tb)
    codes = [term.expect(YOUR_CODE).groups() for term in (ta, tb)]
    # Alice mishears Bob's code (one digit off); Bob hears Alice right.
    word, digits = codes[1][0].split()
    misheard = f"{word} {(int(digits) + 1) % 1000:03d}"
    for term, (code, tag) in ((ta, (misheard, codes[1][1])), (tb, codes[0])):
        term.expect(CODE_PROMPT)
        term.sendline(code)
        term.expect(TAG_PROMPT)
        term.sendline(tag)
    ta.expect(r"NOT VERIFIED: the code is wrong")
    tb.expect(r"Verified: this is Alice\.")
    assert ta.finish() == 1
    assert tb.finish() == 0


def test_voice_heard_word_that_is_not_theirs_ends_the_session(pair, clock):
    alice, bob = pair
    ta, tb = start_voice(alice, bob, clock)
    prompts = [term.expect([MY_TURN, THEIR_TURN]) for term in (ta, tb)]
    speaker, listener = (ta, tb) if prompts[0] == 0 else (tb, ta)
    # The listener types a word the speaker's device cannot have offered.
    listener.sendline(next(w for w in NATO if w not in speaker.words))
    listener.expect(r"NOT VERIFIED: \S+'s device could not have offered")
    assert listener.finish() == 1
    speaker.kill()


def test_device_change_detected_and_acknowledged(pair, clock):
    alice, bob = pair
    # A first verification: each side knows the other's device tag.
    ta, tb = start_voice(alice, bob, clock)
    select_words(ta, tb)
    exchange_codes(ta, tb)
    ta.expect(r"Verified: this is Bob\.")
    tb.expect(r"Verified: this is Alice\.")
    assert ta.finish() == 0 and tb.finish() == 0

    reset = bob.run("device", "reset", "--yes")
    assert reset.returncode == 0, reset
    assert "Forgot the device secrets of 1 contact." in reset.stdout

    # The next window (the clock moves on by 30 s). A tag is two digits: in
    # one window in 100 the new device's matches the old one's by chance,
    # and the next window's is drawn afresh (PROTOCOL.md 10.1).
    for attempt in range(4):
        window = clock.get()
        ta, tb = start_voice(alice, bob, clock)
        assert clock.get() == window + 30
        select_words(ta, tb)
        exchange_codes(ta, tb, untagged=(tb,))
        seen = ta.expect([r"The code is right, but Bob's device changed: Bob is now marked \"device changed\"", r"Verified: this is Bob\."])
        if seen == 0:
            break
        assert attempt < 3, "four windows in a row, the new device's tag matched the old one's"
        assert ta.finish() == 0 and tb.finish() == 0
    # Bob's device, new, has no secret of Alice's device: verified, tag unchecked.
    tb.expect(r"Verified: this is Alice\. \(This device holds no device secret for Alice")
    assert ta.finish() == 0 and tb.finish() == 0

    shown = alice.json("contacts", "show", "Bob")
    assert shown["state"] == "device-changed"
    assert shown["deviceChangeAcknowledged"] is False
    listed = alice.ok("contacts", "list")
    assert re.search(r"Bob\s+[0-9A-F ]+\s+device changed\s*$", listed, re.M), listed

    code = bob.ok("device-change-code", "Alice")
    found = re.search(r"Device-change code for Alice: (\S[^\r\n]*)", code)
    assert found, code
    # The command it suggests to Alice is whole: it names Bob.
    assert "they run: itsme acknowledge-device-change Bob " in code, code
    code = found.group(1).strip()

    ack = alice.spawn("acknowledge-device-change", "Bob")
    ack.expect_exact("Bob's device-change code: ")
    ack.sendline("NOT-A-CODE-1")
    ack.expect(r"a device-change code is 24 letters A-Z and digits 2-7; try again\.")
    ack.expect_exact("Bob's device-change code: ")
    ack.sendline(code.lower())
    ack.expect(r"Acknowledged: Bob's new device is theirs\.")
    assert ack.finish() == 0

    shown = alice.json("contacts", "show", "Bob")
    assert shown["state"] == "device-changed"
    assert shown["deviceChangeAcknowledged"] is True
    assert "device changed (acknowledged)" in alice.ok("contacts", "show", "Bob")

    # At the next verification Bob's new device tag matches again (Bob's
    # device still holds no secret of Alice's: it asks no tag).
    ta, tb = start_voice(alice, bob, clock)
    select_words(ta, tb)
    exchange_codes(ta, tb, untagged=(tb,))
    ta.expect(r"Verified: this is Bob\.\r\n")
    tb.expect(r"Verified: this is Alice\.")
    assert ta.finish() == 0 and tb.finish() == 0


def test_online_verify(pair, relay_url, clock):
    alice, bob = pair
    ta = alice.spawn("online-verify", "Bob", "--relay", relay_url, "--timeout", "40", "--test-clock", clock)
    tb = bob.spawn("online-verify", "Alice", "--relay", relay_url, "--timeout", "40", "--test-clock", clock)
    ta.expect(r"Waiting for Bob in the relay room")
    sas = [term.expect(r"SAS: ([A-Z]+ \d{4})").group(1) for term in (ta, tb)]
    assert sas[0] == sas[1], sas
    # Each types the SAS the other reads aloud: not a word and four digits
    # is asked again; a yes is no answer.
    ta.expect_exact("Type the SAS Bob reads to you (or reject): ")
    ta.sendline("yes")
    ta.expect(r"A SAS is a word and four digits, as ECHO 0042; type it again\.")
    ta.expect_exact("Type the SAS Bob reads to you (or reject): ")
    ta.sendline(sas[1])
    tb.expect_exact("Type the SAS Alice reads to you (or reject): ")
    tb.sendline(sas[0].lower().replace(" ", "-"))
    ta.expect(r"Verified: this is Bob\.")
    tb.expect(r"Verified: this is Alice\.")
    assert ta.finish() == 0
    assert tb.finish() == 0
    assert alice.json("contacts", "show", "Bob")["state"] == "verified"


def test_online_verify_against_an_app_bound_to_the_call(pair, relay_url, clock):
    """PROTOCOL.md 11.4: Bob verifies from an app that binds its session to
    the call (here the Python binding, on Bob's own data directory); the
    command binds to none. Both sides end without a SAS: the command says
    why, in words, and exits 1; nothing is recorded on either side."""
    import itsme
    from itsme.relay import start_online_verify

    alice, bob = pair
    identity = itsme.Identity.load(itsme.SecretStore.file(bob.dir / "secrets"))
    contacts = itsme.ContactStore.open(identity, bob.dir / "contacts.db")
    (alice_at_bob,) = [c for c in contacts.list() if c.name == "Alice"]
    before = alice.json("contacts", "show", "Bob")
    ta = alice.spawn("online-verify", "Bob", "--relay", relay_url, "--timeout", "40", "--test-clock", clock)
    ta.expect(r"Waiting for Bob in the relay room")
    session = start_online_verify(relay_url, contacts, alice_at_bob.id, now=clock.get(), timeout=30, binding=bytes(range(32)))
    assert session.state == itsme.OnlineVerifyState.BINDING_DIFFERS
    ta.expect(r"NOT VERIFIED: Bob's app bound its session to a call, and this command cannot\.")
    assert ta.finish() == 1
    assert alice.json("contacts", "show", "Bob") == before
    assert contacts.get(alice_at_bob.id).verified_at == alice_at_bob.verified_at


def test_online_verify_sas_rejected(pair, relay_url, clock):
    alice, bob = pair
    ta = alice.spawn("online-verify", "Bob", "--relay", relay_url, "--timeout", "40", "--test-clock", clock)
    tb = bob.spawn("online-verify", "Alice", "--relay", relay_url, "--timeout", "40", "--test-clock", clock)
    sas = [term.expect(r"SAS: ([A-Z]+ \d{4})").group(1) for term in (ta, tb)]
    assert sas[0] == sas[1], sas
    ta.expect(r"\(or reject\): ")
    ta.sendline("reject")
    ta.expect(r"NOT VERIFIED: the SAS differs")
    assert ta.finish() == 1
    tb.expect(r"\(or reject\): ")
    tb.sendline("reject")
    tb.expect(r"NOT VERIFIED: the SAS differs")
    assert tb.finish() == 1


def test_online_verify_across_a_window_boundary(pair, relay_url, clocks):
    """Alice starts in the last second of a window, Bob in the first of
    the next: both meet (each also tries the window before its own)."""
    alice, bob = pair
    boundary = (clocks().get() // 30 + 1) * 30
    early, late = clocks(boundary - 1), clocks(boundary + 1)
    ta = alice.spawn("online-verify", "Bob", "--relay", relay_url, "--timeout", "40", "--test-clock", early)
    ta.expect(r"Waiting for Bob in the relay room")
    tb = bob.spawn("online-verify", "Alice", "--relay", relay_url, "--timeout", "40", "--test-clock", late)
    sas = [term.expect(r"SAS: ([A-Z]+ \d{4})").group(1) for term in (ta, tb)]
    assert sas[0] == sas[1], sas
    for term, peer in ((ta, "Bob"), (tb, "Alice")):
        term.expect(r"\(or reject\): ")
        term.sendline(sas[0])
        term.expect(rf"Verified: this is {peer}\.")
        assert term.finish() == 0


def test_acknowledge_with_a_wrong_code(pair):
    alice, bob = pair
    ack = alice.spawn("acknowledge-device-change", "Bob")
    for _ in range(3):
        ack.expect_exact("Bob's device-change code: ")
        ack.sendline("A" * 24)
    last = ack.expect(r"itsme: ([^\r\n]*)\r\n").group(1)
    assert ack.finish() == 1
    refusals = re.findall(r"that device-change code is wrong \((\d) more before a lockout\); try again\.", ack.transcript)
    assert refusals == ["4", "3"], ack.transcript
    # The last refusal speaks of the device-change code, as the prompt does
    # (not of the library's "degradation code").
    assert "device-change code" in last, last
    shown = alice.json("contacts", "show", "Bob")
    assert shown["state"] == "verified" and shown["deviceChangeAcknowledged"] is False


def test_device_change_codes_lock_after_five_wrong(pair, clock):
    """Wrong device-change codes count as wrong PINs do: the fifth locks
    entry for 5 minutes, and says so then; while locked, no code is asked."""
    alice, bob = pair
    locked = r"itsme: [^\r\n]*(?:locked|try again in)[^\r\n]*\r\n"
    prompt = "Bob's device-change code: "
    ack = alice.spawn("acknowledge-device-change", "Bob", "--test-clock", clock)
    for _ in range(3):
        ack.expect_exact(prompt)
        ack.sendline("B" * 24)
    assert ack.finish() == 1

    ack = alice.spawn("acknowledge-device-change", "Bob", "--test-clock", clock)
    ack.expect_exact(prompt)
    ack.sendline("C" * 24)  # the fourth
    ack.expect_exact("that device-change code is wrong (1 more before a lockout); try again.")
    ack.expect_exact(prompt)
    ack.sendline("D" * 24)  # the fifth: locked now
    after_fifth = ack.expect([locked, re.escape(prompt)])
    ack.kill()
    assert after_fifth == 0, "the fifth wrong code was answered \"try again\", not the lockout:\n" + ack.transcript

    # While locked, the code is not even asked (as the PIN is not).
    ack = alice.spawn("acknowledge-device-change", "Bob", "--test-clock", clock)
    while_locked = ack.expect([locked, re.escape(prompt)])
    if while_locked == 1:
        ack.sendline("E" * 24)
        ack.expect(locked)
    assert ack.finish() == 3
    assert while_locked == 0, "a code was asked while entry is locked:\n" + ack.transcript

    # After 5 minutes the right code is accepted.
    code = re.search(r"Device-change code for Alice: (\S+)", bob.ok("device-change-code", "Alice")).group(1)
    clock.advance(301)
    ack = alice.spawn("acknowledge-device-change", "Bob", "--test-clock", clock)
    ack.expect_exact(prompt)
    ack.sendline(code)
    ack.expect(r"Acknowledged: Bob's new device is theirs\.")
    assert ack.finish() == 0
