"""The roll call (docs/PROTOCOL.md 20) through a real relay's group room
(15.9), devices through the Python binding, and Mallory in the room: she
knows the meeting code, has a device of her own that is no one's contact
(an unknown participant), and sends what she likes. She replays the
messages of an earlier roll call, sends a SAID in Ben's name before Ben
does, copies every real SAID with its entries changed, and sends garbage.
Every such message is refused and never makes anyone verified who was not;
the real codes still verify.
"""

from __future__ import annotations

import asyncio
import hashlib
import os

from relaytest import recv_event, ws_connect
from rollcalltest import NOW, Person, befriend, flush, group_url, join, participant, pump

import itsme  # noqa: E402  (on the path once rollcalltest is imported)
from itsme import RollCallState  # noqa: E402


def test_an_insider_with_the_meeting_code_cannot_make_anyone_verified(relay, tmp_path):
    relay = relay()
    ana, ben, cai, mallory = (Person(n, tmp_path) for n in ("Ana", "Ben", "Cai", "Mallory"))
    befriend(ana, ben)
    befriend(ana, cai)
    everyone = [ana, ben, cai]

    async def scenario():
        # An earlier roll call, which Mallory records from inside its room.
        earlier_code = itsme.new_meeting_code()
        earlier_log: list = []
        for p in everyone:
            await join(p, relay, earlier_code)
        spy = await ws_connect(group_url(relay, ana.call.room))
        await recv_event(spy)
        for p in everyone:
            await pump(p, [], lambda p=p: len(p.call.participants) == 3)
        for p in everyone:
            p.call.confirm_roster(p.call.roster, NOW + 60)
            p.call.confirm_said(NOW + 60)
            await flush(p)
        while True:
            try:
                message = await asyncio.wait_for(spy.recv(), 1)
            except asyncio.TimeoutError:
                break
            if isinstance(message, bytes):
                earlier_log.append(message[2:])
        assert len([m for m in earlier_log if m[1] == 2]) == 3
        for p in everyone:
            await p.ws.close()
        await spy.close()

        # The roll call that matters; Mallory's device joins it too.
        code = itsme.new_meeting_code()
        for p in everyone + [mallory]:
            await join(p, relay, code)
        logs = {p.name: [] for p in everyone + [mallory]}
        # Mallory replays the earlier roll call's HELLOs and SAIDs.
        for message in earlier_log:
            await mallory.ws.send(message)
        await asyncio.gather(*(pump(p, logs[p.name]) for p in everyone + [mallory]))
        # The earlier HELLOs come from Mallory's slot, which has sent one
        # already; the earlier SAIDs name speakers not in this roll call.
        for p in everyone:
            assert len(p.call.participants) == 4, (p.name, p.call.participants)  # Ana, Ben, Cai, Mallory
            assert p.refusals.count("MalformedMessageError") >= 3, p.refusals
            assert p.refusals.count("InvalidStateError") >= 3, p.refusals
        # Mallory speaks for Ben before Ben does: a SAID in Ben's name.
        ben_hello = next(m for s, m in logs["Ana"] if s == ben.slot and m[1] == 1)
        ben_hash = hashlib.sha256(ben_hello).digest()
        for p in everyone:
            p.call.confirm_roster(p.call.roster, NOW + 60)
        k = len(ana.call.participants) - 1
        forged = bytes([1, 2]) + ben_hash + ana.call.roster + bytes([k]) + os.urandom(50 * k)
        await mallory.ws.send(forged)
        await mallory.ws.send(b"\x01\x02garbage")
        await asyncio.gather(*(pump(p, logs[p.name]) for p in everyone))
        # Now everyone says their code; Mallory sends altered copies of each real SAID.
        for p in everyone:
            p.call.confirm_said(NOW + 60)
            await flush(p)
        await pump(mallory, logs["Mallory"], lambda: len([m for s, m in logs["Mallory"] if m[1] == 2 and s != 0]) >= 3)
        for slot, message in list(logs["Mallory"]):
            if message[1] == 2:
                altered = bytearray(message)
                for i in range(67 + 5, len(altered), 50):
                    altered[i] ^= 1
                await mallory.ws.send(bytes(altered))
        await asyncio.gather(*(pump(p, logs[p.name]) for p in everyone))
        # Each types the real codes of its contacts.
        codes = {p.name: p.call.code for p in everyone}
        results = {}
        for listener in everyone:
            for speaker in everyone:
                if speaker is listener:
                    continue
                target = participant(listener, speaker)
                if target is None:
                    continue
                results[(listener.name, speaker.name)] = listener.call.enter_heard(target.index, codes[speaker.name], NOW + 60)
        for p in everyone + [mallory]:
            await p.ws.close()
        return results

    results = asyncio.run(scenario())
    # The real codes verified, Mallory's forgeries changed nothing.
    assert results == {
        ("Ana", "Ben"): RollCallState.VERIFIED,
        ("Ana", "Cai"): RollCallState.VERIFIED,
        ("Ben", "Ana"): RollCallState.VERIFIED,
        ("Cai", "Ana"): RollCallState.VERIFIED,
    }, results
    # Mallory's forged SAID in Ben's name, and her altered copies, were refused.
    assert "InvalidStateError" in ana.refusals
    for p in (ana, ben, cai):
        assert all(q.state != RollCallState.VERIFIED or q.contact_id for q in p.call.participants)
