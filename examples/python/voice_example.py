#!/usr/bin/env python3
"""voice_example: Alice and Bob, who exchanged contacts by QR code, verify
each other during a call.

Both phones plan a session for the next unused 30-second window and count
down to it; when it begins, both read the session ID aloud, each chooses one
of five words in turn and the other enters it, then each reads a code and a
two-digit device tag aloud and enters what the other said.

The clock is simulated (it starts at 1_800_000_007 and is advanced to the
window rather than waited for), so the example runs at once; with
--real-time it uses the real clock and really waits (up to 30 s).

    ITSME_LIBRARY=.build/release/libitsme.so PYTHONPATH=bindings/python \\
        python3 examples/python/voice_example.py [--real-time]
"""

import contextlib
import os
import sys
import tempfile
import time
from typing import Dict, Iterable, Protocol, Tuple

try:
    import itsme
except Exception as error:  # the library is missing or cannot run here
    sys.exit(f"{sys.argv[0]}: cannot load libitsme: {error}")


OTHER = {"Alice": "Bob", "Bob": "Alice"}


class Clock(Protocol):
    """What the example reads the time from, in unix seconds."""

    @property
    def now(self) -> int: ...

    def advance(self, seconds: int) -> None: ...


class SimulatedClock:
    """A simulated clock, in unix seconds, moved forward by hand."""

    def __init__(self, now: int) -> None:
        self.now = now

    def advance(self, seconds: int) -> None:
        self.now += seconds


class RealClock:
    """The real clock: advancing it sleeps."""

    @property
    def now(self) -> int:
        return int(time.time())

    def advance(self, seconds: int) -> None:
        time.sleep(seconds)


def open_person(
    stack: contextlib.ExitStack, name: str, directory: str
) -> Tuple[itsme.Identity, itsme.ContactStore]:
    """A new identity in a memory secret store, and its contact store."""
    secrets = stack.enter_context(itsme.SecretStore.memory())
    identity = stack.enter_context(itsme.Identity.create(secrets, name))
    contacts = stack.enter_context(itsme.ContactStore.open(identity, os.path.join(directory, f"{name}.db")))
    return identity, contacts


def exchange_by_qr(
    stack: contextlib.ExitStack,
    clock: Clock,
    alice: itsme.Identity,
    alice_contacts: itsme.ContactStore,
    bob: itsme.Identity,
    bob_contacts: itsme.ContactStore,
) -> Tuple[int, int]:
    """The QR exchange of exchange_example.py; returns each one's contact id
    for the other."""
    at_alice = stack.enter_context(itsme.Exchange.qr(alice, alice_contacts, clock.now))
    at_bob = stack.enter_context(itsme.Exchange.qr(bob, bob_contacts, clock.now))
    at_alice.receive(at_bob.next_outgoing(), clock.now)
    at_bob.receive(at_alice.next_outgoing(), clock.now)
    if at_alice.sas != at_bob.sas:
        raise SystemExit("the SAS values differ")
    print(f"QR exchange: both phones show SAS {at_alice.sas}; both confirm")
    return at_alice.confirm(clock.now), at_bob.confirm(clock.now)


def words_text(words: Iterable[int]) -> str:
    return ", ".join(itsme.nato_word(word) for word in words)


def main() -> int:
    clock: Clock = RealClock() if "--real-time" in sys.argv[1:] else SimulatedClock(1_800_000_007)
    with tempfile.TemporaryDirectory(prefix="itsme-example-") as directory, contextlib.ExitStack() as stack:
        alice, alice_contacts = open_person(stack, "Alice", directory)
        bob, bob_contacts = open_person(stack, "Bob", directory)
        bob_at_alice, alice_at_bob = exchange_by_qr(stack, clock, alice, alice_contacts, bob, bob_contacts)

        # Later, on a call: both plan a session with the other.
        people: Dict[str, Tuple[itsme.VoiceSession, itsme.ContactStore]] = {
            "Alice": (stack.enter_context(itsme.VoiceSession(alice_contacts, bob_at_alice, clock.now)), alice_contacts),
            "Bob": (stack.enter_context(itsme.VoiceSession(bob_contacts, alice_at_bob, clock.now)), bob_contacts),
        }
        for name, (session, _) in people.items():
            window, starts_in, ends_in = session.timing(clock.now)
            print(f"{name}'s phone: window {window} begins in {starts_in} s, the session ends in {ends_in} s")

        # Both count down to the window; the simulated clock jumps there.
        alice_session = people["Alice"][0]
        wait = alice_session.timing(clock.now).starts_in
        print(f"waiting {wait} s for the window:", end="")
        while True:
            starts_in = alice_session.timing(clock.now).starts_in
            print(f" {starts_in}", end="")
            if starts_in <= 0:
                break
            clock.advance(starts_in % 5 or 5)  # to the next multiple of 5 s
        print()

        for name, (session, contacts) in people.items():
            session.start(clock.now)
            print(f"{name}'s phone: session ID {session.session_id}; {name}'s words: {words_text(session.words)}")

        # Whoever's turn it is picks their first word and says it; the other
        # enters the word they heard.  Twice.
        for _ in range(2):
            speaker = next(name for name, (session, _) in people.items() if session.turn == itsme.VoiceTurn.MINE)
            listener = OTHER[speaker]
            word = people[speaker][0].words[0]
            people[speaker][0].select(word, clock.now)
            people[listener][0].select(word, clock.now)
            print(f"{speaker} chooses and says {itsme.nato_word(word)}; {listener} enters it")
            clock.advance(3)

        # Each reads their code and tag aloud; the other enters what they heard.
        spoken: Dict[str, itsme.VoiceCode] = {}
        for name, (session, _) in people.items():
            spoken[name] = session.your_code
            print(f"{name} says: {spoken[name].text}, {spoken[name].tag:02d}")
        clock.advance(5)
        outcomes: Dict[str, itsme.VoiceOutcome] = {}
        for name, (session, contacts) in people.items():
            heard = spoken[OTHER[name]]
            if heard.tag is None:  # "Your Code" always comes with its device tag
                raise SystemExit(f"{OTHER[name]} said no device tag")
            outcomes[name] = session.check(heard.text, heard.tag, clock.now)
        for name, (session, contacts) in people.items():
            contact = contacts.get(session.contact_id)
            print(f"{name}'s check: {outcomes[name].name} ({contact.name} is {contact.state.name.lower()})")
    return 0 if all(outcome == itsme.VoiceOutcome.VERIFIED for outcome in outcomes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
