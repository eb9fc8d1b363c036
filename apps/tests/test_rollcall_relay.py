"""The roll call (docs/PROTOCOL.md 20, version 2) through a real relay's
group room (15.9), devices through the Python binding driven by the host
loop of rollcalltest.py, and Mallory in the room: she knows the meeting
code, has a device of her own that is no one's contact (an unknown
participant), and sends what she likes on its connection besides what her
device sends. She replays the messages of an earlier roll call she sat in,
sends a SAID in Ben's name before Ben does (signed by a key of hers),
garbage and a version-1 message, altered copies of every real SAID, and the
real SAIDs themselves from her slot. Every forgery is refused and never
makes anyone verified who was not; a real SAID she carries counts as its
speaker's (20.5: whoever carried it does not matter), and the real codes
verify.
"""

from __future__ import annotations

import asyncio

from rollcalltest import (
    AUTHENTICATION_FAILED,
    INVALID_KEY,
    MALFORMED,
    SAID,
    Room,
    Said,
    Stranger,
    all_pairs,
    assert_none_wrongly_verified,
    kind,
    make_people,
    participant,
    same_roster,
    states,
)

import itsme  # noqa: E402  (on the path once rollcalltest is imported)
from itsme import RollCallState  # noqa: E402


def test_an_insider_with_the_meeting_code_cannot_make_anyone_verified(relay, tmp_path):
    relay = relay()
    ana, ben, cai, mallory = make_people(tmp_path, ["Ana", "Ben", "Cai", "Mallory"],
                                         friends=[("Ana", "Ben"), ("Ana", "Cai")])

    async def scenario():
        room = Room(relay)
        # An earlier roll call, which Mallory records from inside its room.
        earlier_code = itsme.new_meeting_code()
        earlier = [room.device(p, earlier_code) for p in (ana, ben, cai)]
        spy = room.device(None, earlier_code, name="spy")
        await room.join(*earlier, spy)
        await room.run(2)
        await room.say(*earlier)
        await room.run(1)
        recorded = [m for _, m in spy.received if kind(m)]
        assert len({m for m in recorded if kind(m) == SAID}) == 3
        for d in earlier + [spy]:
            await room.leave(d)

        # The roll call that matters; Mallory's device joins it too.
        code = itsme.new_meeting_code()
        a, b, c, m = (room.device(p, code) for p in (ana, ben, cai, mallory))
        try:
            await room.join(a, b, c, m)
            await room.run(2)
            honest = [a, b, c]
            # The earlier roll call's HELLOs, VIEWs and SAIDs: another roll call's ID in each signature.
            for message in recorded:
                m.send(message)
            await room.run(1)
            refused = {d.name: [r.error for r in d.refusals] for d in honest}
            assert refused == {d.name: [AUTHENTICATION_FAILED] * len(recorded) for d in honest}
            assert same_roster(honest + [m]) and all(d.call.head_count == 4 for d in honest)

            # Mallory speaks for Ben before Ben does: a SAID in Ben's name, signed by her.
            for d in honest + [m]:
                room.confirm(d)
            forged = Stranger(b"mallory", code).sign(Said(b.key, a.call.roster, [bytes(50)] * 3).body())
            m.send(forged)
            m.send(b"\x02\x02garbage")
            m.send(b"\x01\x02" + bytes(200))  # a version-1 SAID's shape: refused like any unknown version
            await room.settle()
            for d in honest:
                assert [r.error for r in d.refusals[len(recorded):]] == [AUTHENTICATION_FAILED, MALFORMED, MALFORMED]

            # Everyone says their code; Mallory sends altered copies of each real SAID, then the real ones.
            for d in honest + [m]:
                d.call.confirm_said(d.time)
                room.flush(d)
            await room.settle()
            real = [msg for slot, msg in m.received if kind(msg) == SAID]
            assert len(real) == 3
            for said in real:
                altered = bytearray(said)
                altered[67 + 5] ^= 1  # in the first entry
                m.send(bytes(altered))
            for said in real:
                m.send(said)
            await room.settle()
            for d in honest:
                assert [r.error for r in d.refusals[len(recorded) + 3:]] == [AUTHENTICATION_FAILED] * 3 + [INVALID_KEY]

            # Each types the real codes of its contacts.
            results = {}
            for listener in honest:
                for speaker in honest:
                    target = participant(listener, speaker) if speaker is not listener else None
                    if target is not None and target.contact_id is not None:
                        results[(listener.name, speaker.name)] = listener.call.enter_heard(
                            target.index, speaker.call.code, listener.time)
            await room.run(1)
            shown = {d.name: [p.state for p in d.call.participants[1:] if p.slot == m.slot] for d in honest}
            return honest, results, shown
        finally:
            await room.close()

    honest, results, shown = asyncio.run(scenario())
    # The real codes verified, Mallory's forgeries changed nothing.
    assert results == {
        ("Ana", "Ben"): RollCallState.VERIFIED,
        ("Ana", "Cai"): RollCallState.VERIFIED,
        ("Ben", "Ana"): RollCallState.VERIFIED,
        ("Cai", "Ana"): RollCallState.VERIFIED,
    }, results
    assert states(honest) == all_pairs(honest, RollCallState.VERIFIED)
    # Mallory's device is listed once everywhere, as unknown.
    assert shown == {"Ana": [RollCallState.UNKNOWN], "Ben": [RollCallState.UNKNOWN], "Cai": [RollCallState.UNKNOWN]}
    assert_none_wrongly_verified(honest)
