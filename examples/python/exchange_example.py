#!/usr/bin/env python3
"""exchange_example: Alice and Bob exchange contacts in person by QR code.

Each phone shows a payload text (as a QR code) that the other scans; both then
show the same SAS, which the two people compare aloud before confirming.

    ITSME_LIBRARY=.build/release/libitsme.so PYTHONPATH=bindings/python \\
        python3 examples/python/exchange_example.py
"""

import contextlib
import os
import sys
import tempfile
from typing import Tuple

try:
    import itsme
except Exception as error:  # the library is missing or cannot run here
    sys.exit(f"{sys.argv[0]}: cannot load libitsme: {error}")


def open_person(
    stack: contextlib.ExitStack, name: str, directory: str
) -> Tuple[itsme.Identity, itsme.ContactStore]:
    """A new identity in a memory secret store, and its contact store."""
    secrets = stack.enter_context(itsme.SecretStore.memory())
    identity = stack.enter_context(itsme.Identity.create(secrets, name))
    contacts = stack.enter_context(itsme.ContactStore.open(identity, os.path.join(directory, f"{name}.db")))
    return identity, contacts


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="itsme-example-") as directory, contextlib.ExitStack() as stack:
        alice, alice_contacts = open_person(stack, "Alice", directory)
        bob, bob_contacts = open_person(stack, "Bob", directory)
        at_alice = stack.enter_context(itsme.Exchange.qr(alice, alice_contacts))
        at_bob = stack.enter_context(itsme.Exchange.qr(bob, bob_contacts))

        # Each phone shows its payload; the other one scans it.
        alice_text, bob_text = at_alice.next_outgoing(), at_bob.next_outgoing()
        print(f"Alice's payload: {len(alice_text)} characters")
        print(f"Bob's payload: {len(bob_text)} characters")
        at_alice.receive(bob_text)
        at_bob.receive(alice_text)

        print(f"Alice's phone: {at_alice.peer_name}, SAS {at_alice.sas}")
        print(f"Bob's phone: {at_bob.peer_name}, SAS {at_bob.sas}")
        if at_alice.sas != at_bob.sas:  # the two people would reject
            at_alice.reject()
            at_bob.reject()
            print("the SAS values differ: rejected", file=sys.stderr)
            return 1

        # They read the SAS aloud and it matches: both confirm.
        for owner, exchange, contacts in (("Alice", at_alice, alice_contacts), ("Bob", at_bob, bob_contacts)):
            contact = contacts.get(exchange.confirm())
            print(f"{owner}'s new contact: {contact.name} {contact.fingerprint} {contact.state.name.lower()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
