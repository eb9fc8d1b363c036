"""Helpers of the roll-call tests through a real relay's group room
(docs/PROTOCOL.md 20 over 15.9): people with a device each, contacts made
by a QR exchange, and the host's loop that moves the room's messages to and
from each device's `itsme.RollCall` (test_rollcall_relay.py,
test_rollcall_tampering.py).
"""

from __future__ import annotations

import asyncio
import copy
import json

from relaytest import recv_event, ws_connect
from remotetest import REPO  # noqa: F401  (loads the binding)

import itsme  # noqa: E402
from itsme import ContactStore, Exchange, Identity, RollCall, SecretStore  # noqa: E402

NOW = 1_800_000_000


class Person:
    def __init__(self, name: str, tmp_path):
        self.name = name
        self.identity = Identity.create(SecretStore.memory(), name)
        self.contacts = ContactStore.open(self.identity, tmp_path / f"{name}.db")
        self._seat()

    def _seat(self) -> None:
        self.call = None
        self.ws = None
        self.slot = None
        self.refusals = []
        self.events = []

    def in_another_roll_call(self) -> "Person":
        """The same device (identity and contacts) in a second roll call at
        once, with a roll call, room connection and refusals of its own."""
        other = copy.copy(self)
        other._seat()
        return other


def befriend(a: Person, b: Person) -> None:
    with Exchange.qr(a.identity, a.contacts, NOW) as xa, Exchange.qr(b.identity, b.contacts, NOW) as xb:
        xa.receive(xb.next_outgoing(), NOW)
        xb.receive(xa.next_outgoing(), NOW)
        xa.confirm(NOW)
        xb.confirm(NOW)


def group_url(relay, room: str) -> str:
    return f"{relay.ws_base}/v1/groups/{room}"


async def pump(person: Person, log: list, until=None) -> None:
    """Feeds what the room says to `person`'s roll call (and sends what it
    queues) until `until()` holds, or without `until` until a second
    passes with nothing; 10 seconds at most.  The relay's events go to
    `person.events`, each message to `log` as (slot, payload), and the kind
    of each refusal to `person.refusals`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    quiet_since = loop.time()
    while loop.time() < deadline and not (until() if until else loop.time() - quiet_since > 1.0):
        try:
            message = await asyncio.wait_for(person.ws.recv(), 0.2)
        except asyncio.TimeoutError:
            continue
        quiet_since = loop.time()
        if isinstance(message, str):
            event = json.loads(message)
            person.events.append(event)
            if event["type"] == "peer-joined":
                person.call.peer_joined(event["slot"])
        else:
            slot = int.from_bytes(message[:2], "big")
            log.append((slot, message[2:]))
            try:
                person.call.receive(message[2:], slot, NOW + 60)
            except itsme.ItsMeError as error:
                person.refusals.append(type(error).__name__)
        await flush(person)


async def flush(person: Person) -> None:
    while True:
        message = person.call.next_outgoing()
        if not message:
            return
        await person.ws.send(message)


async def join(person: Person, relay, code: str) -> None:
    person.call = RollCall(person.contacts, code, NOW + 60)
    person.ws = await ws_connect(group_url(relay, person.call.room))
    joined = await recv_event(person.ws)
    person.events.append(joined)
    person.slot = joined["slot"]
    await flush(person)


def participant(person: Person, other: Person):
    """`other`'s device among `person`'s participants, if it is a contact."""
    for p in person.call.participants:
        if p.contact_id and person.contacts.get(p.contact_id).fingerprint == other.identity.fingerprint:
            return p
    return None
