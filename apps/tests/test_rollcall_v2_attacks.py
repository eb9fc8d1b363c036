"""What a stranger who knows the meeting code, a malicious colleague and a
relay across two calls can try against the roll call (docs/PROTOCOL.md 20,
version 2; the threat table of 20.8), each through a real relay's group room
(15.9), the devices driven through the Python binding's `itsme.RollCall` by
the host loop of rollcalltest.py (virtual time, a tick every second).

The attacker is a bare connection to the group room: it knows the meeting
code and nothing else, receives what the room forwards, and sends what the
test builds byte by byte from 20.1 to 20.5 (signing with a roll-call key of
its own, with the `cryptography` package's Ed25519). Each test plays one
finding against version 1, which took a HELLO as a participant and named it
by the relay slot that carried it, and fails on version 1's behaviour:

1. extend, copy, forge: a HELLO extended with more tags under its original
   signature, one with a tag changed, one in another's key signed by the
   stranger: refused; a copy of another's tags in the stranger's own HELLO
   names nobody; no one is listed twice (version 1 listed the extended copy
   as a second participant).
2. replay, stale HELLO: a participant's HELLO and VIEWs (and SAID) from a
   roll call three minutes earlier with the same meeting code, replayed from
   the very slot its device had then, are never shown or counted; the same
   HELLO re-sent by that person's device, restarted, is not the old
   participant (version 1 took the replayed HELLO as present).
3. blocker: the stranger answers a newcomer with Ana's HELLO before Ana's
   device does, then sends a SAID in her name: the newcomer still verifies
   Ana, whichever slot carried her real SAID (version 1 bound Ana's name to
   the first slot that brought her HELLO, and refused Ana's own).
4. clocks apart: HELLOs on either side of a 30-second boundary, from device
   clocks 3 seconds apart: one roster everywhere (version 1's tags were of a
   30-second window).
5. leave-then-join and drop-then-rejoin: after one leaves, a newcomer and the
   earlier ones are all checkable; a device whose connection dropped comes
   back under a new slot in its place, its round comes back, and the codes
   read before still verify.
6. the display after a new round: one who was wrong three times in the round
   before reads "not yet", not "wrong", when the new code is typed before its
   new SAID.
7. relaying both ways: two contacts in one room bound to two different calls
   show each other as "another call" and nobody is verified; without a
   binding both verify (the limit 20.8 documents); one bound and one not
   show "binding differs".
"""

from __future__ import annotations

import asyncio
import os

import pytest

from rollcalltest import (
    AUTHENTICATION_FAILED,
    HELLO,
    INVALID_KEY,
    INVALID_STATE,
    MALFORMED,
    NOW,
    SAID,
    SIGNATURE,
    VIEW,
    Hello,
    Room,
    Said,
    Stranger,
    View,
    all_pairs,
    assert_none_wrongly_verified,
    kind,
    make_people,
    name_of,
    participant,
    rcid,
    roster_hash,
    same_roster,
    signed_by_its_key,
    state_of,
    states,
)

import itsme  # noqa: E402  (on the path once rollcalltest is imported)
from itsme import LockedError, InvalidStateError, RollCallPhase, RollCallState  # noqa: E402

VERIFIED, NOT_YET, WRONG = RollCallState.VERIFIED, RollCallState.NOT_YET, RollCallState.WRONG


def other_code(code: str) -> str:
    """A valid code other than `code`."""
    return "BRAVO 000" if code.startswith("ALFA") else "ALFA 000"


def listed_as(listener, speaker) -> list:
    """Every participant of `listener`'s that is `speaker`'s contact."""
    contact = listener.person.contact_id(speaker.person)
    return [p for p in listener.call.participants[1:] if p.contact_id == contact]


# ---------------------------------------------------------------------------
# 1. Extend, copy, forge


def test_an_extended_altered_or_forged_hello_is_refused_a_copy_names_nobody_and_no_one_is_listed_twice(relay, tmp_path):
    """Ana and Ben are in the room with Mallory, a bare connection, who got
    Ana's HELLO. When Cai arrives (Ana's and Ben's hosts a moment behind),
    Mallory answers first with Ana's HELLO extended by 32 tags of her own
    under Ana's signature, with one of its tags changed, and in Ana's key
    signed by Mallory: Cai, Ana and Ben refuse all three
    (`authentication_failed`). Then Mallory sends a HELLO of her own key
    carrying Ana's tags, and a VIEW: she is present, as an unknown
    participant (Ana's tags are bound to Ana's key, 20.2), never as Ana; Ana's
    HELLO as it is, from Mallory's slot after hers, is refused (a slot brings
    one HELLO). Every device lists Ana once, from Ana's slot; the codes
    verify."""
    relay = relay()
    ana, ben, cai = make_people(tmp_path, ["Ana", "Ben", "Cai"])

    async def scenario():
        room = Room(relay)
        code = itsme.new_meeting_code()
        a, b, c = (room.device(p, code) for p in (ana, ben, cai))
        mallory = room.device(None, code, name="Mallory")
        stranger = Stranger(b"mallory", code)
        rc = rcid(code)
        try:
            await room.join(a, b, mallory)
            await room.run(2)
            hello = mallory.got(HELLO, a.slot)[0]
            assert hello == a.hello and signed_by_its_key(hello, rc)
            parsed = Hello.parse(hello)
            extra = sorted(os.urandom(16) for _ in range(32))
            signature = hello[-SIGNATURE:]
            extended = Hello(parsed.bound, parsed.key, parsed.bind, sorted(parsed.tags + extra)).body() + signature
            tags = list(parsed.tags)
            tags[5] = bytes([tags[5][0]]) + os.urandom(15)
            altered = Hello(parsed.bound, parsed.key, parsed.bind, sorted(tags)).body() + signature
            forged = stranger.sign(parsed.body())
            assert len(extended) == len(hello) + 32 * 16 and not signed_by_its_key(extended, rc)
            assert not signed_by_its_key(altered, rc) and not signed_by_its_key(forged, rc)

            # Cai arrives; Mallory answers before Ana's and Ben's devices do.
            a.paused = b.paused = True
            await room.join(c)
            for message in (extended, altered, forged):
                mallory.send(message)
            await room.settle()
            assert [(s, m) for s, m in c.received if kind(m) == HELLO][:3] == [
                (mallory.slot, extended), (mallory.slot, altered), (mallory.slot, forged)]
            a.paused = b.paused = False
            await room.run(2)
            for d in (a, b, c):
                from_mallory = [r.error for r in d.refusals if r.slot == mallory.slot]
                assert from_mallory == [AUTHENTICATION_FAILED] * 3, d.refusals
            assert same_roster([a, b, c]) and c.call.head_count == 3

            # Mallory's own HELLO with Ana's tags, and her VIEW of everyone.
            copy = stranger.sign(Hello(parsed.bound, stranger.key, parsed.bind, parsed.tags).body())
            names = sorted([name_of(copy)] + [d.h for d in (a, b, c)])
            view = View(stranger.key, 1, mallory.slot, roster_hash(rc, names), 0, names, bytes(1))
            mallory.send(copy)
            mallory.send(stranger.sign(view.body()))
            mallory.send(hello)  # Ana's own HELLO, from Mallory's slot
            await room.run(3)
            for d in (b, c):
                assert d.refusals[-1].error == MALFORMED and d.refusals[-1].slot == mallory.slot, d.refusals
            for d in (a, b, c):
                assert d.call.head_count == 4
                unknown = [p for p in d.call.participants[1:] if p.contact_id is None]
                assert [(p.slot, p.state) for p in unknown] == [(mallory.slot, RollCallState.UNKNOWN)], d.name
            for listener, speaker in ((b, a), (c, a), (a, b), (a, c)):
                shown = listed_as(listener, speaker)
                assert [p.slot for p in shown] == [speaker.slot], (listener.name, speaker.name, shown)
            assert same_roster([a, b, c])

            await room.say(a, b, c)
            for listener in (a, b, c):
                for speaker in (a, b, c):
                    if listener is not speaker:
                        room.hear(listener, speaker)
            await room.run(1)
            return a, b, c
        finally:
            await room.close()

    devices = asyncio.run(scenario())
    assert states(devices) == all_pairs(devices, VERIFIED)
    assert_none_wrongly_verified(devices)


# ---------------------------------------------------------------------------
# 2. Replay: a stale HELLO and VIEW


def test_a_hello_and_view_of_an_earlier_roll_call_with_the_same_code_never_make_anyone_present(relay, tmp_path):
    """Ana, Ben and Cai held a roll call with a meeting code; Mallory kept
    every message of it. Three minutes later Ana and Ben start a roll call
    with the same code, without Cai; Mallory joins the new room and gets the
    slot Cai had in the first (a room's slots start again from 1), and
    replays Cai's HELLO, every VIEW of Cai's and Cai's SAID. The VIEWs name
    Mallory's very slot, but none lists Ana's or Ben's new HELLO: Cai is
    never present, so never shown and never counted (20.3); the SAID is refused
    (a speaker not present). Then Cai's device, restarted (a new roll call,
    a new key), joins and its connection sends the old HELLO again after its
    new one: refused (a slot brings one HELLO); Cai is listed once, from its
    new slot, and verifies in the new round."""
    relay = relay()
    ana, ben, cai = make_people(tmp_path, ["Ana", "Ben", "Cai"])
    code = itsme.new_meeting_code()

    async def scenario():
        earlier = Room(relay, now=NOW)
        old = [earlier.device(p, code) for p in (ana, ben, cai)]
        spy = earlier.device(None, code, name="spy")
        await earlier.join(*old, spy)
        await earlier.run(2)
        await earlier.say(*old)
        await earlier.run(2)
        old_cai = old[2]
        kept = [m for s, m in spy.received if s == old_cai.slot]
        assert {kind(m) for m in kept} == {HELLO, VIEW, SAID}
        await earlier.close()

        room = Room(relay, now=NOW + 180)
        a, b = room.device(ana, code), room.device(ben, code)
        mallory = room.device(None, code, name="Mallory")
        try:
            await room.join(a, b, mallory)
            assert mallory.slot == old_cai.slot
            assert {View.parse(m).slot for m in kept if kind(m) == VIEW} == {mallory.slot}
            for message in kept:
                mallory.send(message)
            await room.run(10)
            for d in (a, b):
                assert d.call.head_count == 2 and len(d.call.participants) == 2, d.call.participants
                assert listed_as(d, old_cai) == []
                # Each copy of the SAID (Cai's device sent it more than once).
                assert [(r.error, r.kind) for r in d.refusals] == [(INVALID_STATE, SAID)] * len(
                    [m for m in kept if kind(m) == SAID]), d.refusals
            assert same_roster([a, b])

            # Cai's device, restarted: a new roll call; its connection re-sends the old HELLO.
            c = room.device(cai, code)
            await room.join(c)
            c.send(old_cai.hello)
            for message in kept:
                mallory.send(message)
            await room.run(3)
            for d in (a, b):
                assert [r.error for r in d.refusals if r.slot == c.slot] == [MALFORMED], d.refusals
                shown = listed_as(d, c)
                assert [(p.slot, p.left) for p in shown] == [(c.slot, False)], shown
                assert d.call.head_count == 3 and len(d.call.participants) == 3
            assert same_roster([a, b, c])
            await room.say(a, b, c)
            for listener in (a, b, c):
                for speaker in (a, b, c):
                    if listener is not speaker:
                        room.hear(listener, speaker)
            await room.run(1)
            return a, b, c
        finally:
            await room.close()

    devices = asyncio.run(scenario())
    assert states(devices) == all_pairs(devices, VERIFIED)
    assert_none_wrongly_verified(devices)


# ---------------------------------------------------------------------------
# 3. A blocker who answers first


def test_a_stranger_who_answers_a_newcomer_first_with_someones_hello_blocks_nobody(relay, tmp_path):
    """Ana is in the room, and so is Mallory, a bare connection that got
    Ana's HELLO. Ben arrives; Ana's host is a moment behind, and Mallory sends
    Ben Ana's HELLO first, from her own slot. Then Ana's device answers:
    Ben takes Ana's HELLO from her slot as the same HELLO, and Ana is present
    once her VIEW comes (20.3). Mallory sends a SAID in Ana's name signed by
    her own key: refused (`authentication_failed`), Ana stays "not yet".
    Ana's real SAID reaches Ben first through Mallory's slot: taken (a SAID
    counts by its signature, not by who carried it, 20.5), and Ben verifies
    Ana; Ana's own copy of it is a repeat. Ben's code verifies at Ana."""
    relay = relay()
    ana, ben = make_people(tmp_path, ["Ana", "Ben"])

    async def scenario():
        room = Room(relay)
        code = itsme.new_meeting_code()
        a, b = room.device(ana, code), room.device(ben, code)
        mallory = room.device(None, code, name="Mallory")
        stranger = Stranger(b"blocker", code)
        try:
            await room.join(a, mallory)
            await room.run(1)
            hello = mallory.got(HELLO, a.slot)[0]
            a.paused = True
            await room.join(b)
            mallory.send(hello)
            await room.settle()
            assert [s for s, m in b.received if kind(m) == HELLO] == [mallory.slot]
            assert b.call.head_count == 1  # a HELLO alone makes nobody present
            a.paused = False
            await room.run(3)
            assert same_roster([a, b]) and a.call.head_count == b.call.head_count == 2
            assert [p.slot for p in listed_as(b, a)] == [a.slot]
            # Ana refused her own HELLO, carried back to her by Mallory (a reflection).
            assert b.refusals == [] and [r.error for r in a.refusals] == [INVALID_KEY]

            room.confirm(a)
            room.confirm(b)
            forged = stranger.sign(Said(a.key, b.call.roster, [os.urandom(50)]).body())
            mallory.send(forged)
            await room.settle()
            assert [r.error for r in b.refusals] == [AUTHENTICATION_FAILED]
            assert room.hear(b, a) == NOT_YET

            a.withhold = lambda m: kind(m) == SAID
            a.call.confirm_said(a.time)
            room.flush(a)
            (said,) = a.withheld
            mallory.send(said)
            await room.settle()
            assert state_of(b, a) == VERIFIED
            room.release(a)
            b.call.confirm_said(b.time)
            room.flush(b)
            await room.run(2)
            assert room.hear(a, b) == VERIFIED
            return a, b
        finally:
            await room.close()

    a, b = asyncio.run(scenario())
    assert states([a, b]) == all_pairs([a, b], VERIFIED)
    assert [r.error for r in b.refusals] == [AUTHENTICATION_FAILED]
    # Ana refused her own HELLO and her own SAID, carried back by Mallory, and the forged SAID.
    assert [r.error for r in a.refusals] == [INVALID_KEY, AUTHENTICATION_FAILED, INVALID_KEY]
    assert_none_wrongly_verified([a, b])


# ---------------------------------------------------------------------------
# 4. Clocks apart around a window boundary


def test_hellos_either_side_of_a_30_second_boundary_from_clocks_3_seconds_apart_give_one_roster(relay, tmp_path):
    """Four devices whose clocks are 3 seconds apart (-3, 0, +3, +6) join in
    the same second, 2 seconds before a multiple of 30 on the room's clock:
    their HELLOs carry times on either side of the boundary. Every device
    holds the same roster of four, and every pair of contacts verifies
    (nothing of a device's clock decides who is in the roster, 20.3)."""
    relay = relay()
    people = make_people(tmp_path, ["Ana", "Ben", "Cai", "Dee"],
                         friends=[("Ana", "Ben"), ("Ana", "Cai"), ("Ana", "Dee"), ("Ben", "Dee")])
    boundary = (NOW // 30 + 1) * 30

    async def scenario():
        room = Room(relay, now=boundary - 2)
        code = itsme.new_meeting_code()
        devices = [room.device(p, code, offset=offset) for p, offset in zip(people, (-3, 0, 3, 6))]
        try:
            assert sorted(d.time // 30 for d in devices) == [boundary // 30 - 1] * 2 + [boundary // 30] * 2
            await room.join(*devices)
            await room.run(3)
            assert same_roster(devices)
            assert [d.call.head_count for d in devices] == [4] * 4
            await room.say(*devices)
            for listener in devices:
                for speaker in devices:
                    if listener is not speaker and listener.person.contact_id(speaker.person):
                        room.hear(listener, speaker)
            await room.run(1)
            return devices
        finally:
            await room.close()

    devices = asyncio.run(scenario())
    assert states(devices) == all_pairs(devices, VERIFIED)
    assert all(d.refusals == [] for d in devices), [d.refusals for d in devices]


# ---------------------------------------------------------------------------
# 5. Leave-then-join, drop-then-rejoin


def test_after_one_leaves_a_newcomer_and_the_earlier_ones_are_all_checkable(relay, tmp_path):
    """Ana, Ben and Cai join; Cai leaves; Dee joins. Ana, Ben and Dee hold
    the same roster of three (Cai shown as gone, not counted): each says
    their code and every pair of contacts verifies, the earlier ones as the
    newcomer."""
    relay = relay()
    ana, ben, cai, dee = make_people(tmp_path, ["Ana", "Ben", "Cai", "Dee"],
                                     friends=[("Ana", "Ben"), ("Ana", "Cai"), ("Ana", "Dee"), ("Ben", "Dee")])

    async def scenario():
        room = Room(relay)
        code = itsme.new_meeting_code()
        a, b, c, d = (room.device(p, code) for p in (ana, ben, cai, dee))
        try:
            await room.join(a, b, c)
            await room.run(2)
            await room.leave(c)
            await room.join(d)
            await room.run(3)
            assert same_roster([a, b, d])
            assert [x.call.head_count for x in (a, b, d)] == [3, 3, 3]
            gone = listed_as(a, c)
            assert len(gone) == 1 and gone[0].left
            assert len(a.call.participants) == 4
            await room.say(a, b, d)
            for listener in (a, b, d):
                for speaker in (a, b, d):
                    if listener is not speaker and listener.person.contact_id(speaker.person):
                        room.hear(listener, speaker)
            await room.run(1)
            return a, b, c, d
        finally:
            await room.close()

    a, b, c, d = asyncio.run(scenario())
    assert states([a, b, d]) == all_pairs([a, b, d], VERIFIED)
    assert state_of(a, c) == NOT_YET
    assert all(x.refusals == [] for x in (a, b, d)), [x.refusals for x in (a, b, d)]


def test_a_device_whose_connection_drops_and_comes_back_keeps_its_place_and_its_round(relay, tmp_path):
    """Ana, Ben and Cai confirm the roster; Ana and Ben say their codes, and
    Cai types Ben's (verified). Ben's connection drops (its TCP stream ends):
    Ana and Cai see him leave, a new round. His device joins again, under a
    new slot, with the same roll call: Ana and Cai see him come back in his
    place, the roster and its round come back (Ana's phase is "said" again,
    nobody confirms anew), and the codes Ana and Ben read before the drop
    still verify; Cai's, said after, verifies too."""
    relay = relay()
    ana, ben, cai = make_people(tmp_path, ["Ana", "Ben", "Cai"])

    async def scenario():
        room = Room(relay)
        code = itsme.new_meeting_code()
        a, b, c = (room.device(p, code) for p in (ana, ben, cai))
        try:
            await room.join(a, b, c)
            await room.run(2)
            roster = a.call.roster
            for x in (a, b, c):
                room.confirm(x)
            for x in (a, b):
                x.call.confirm_said(x.time)
                room.flush(x)
            await room.run(1)
            assert room.hear(c, b) == VERIFIED
            codes = {x.name: x.call.code for x in (a, b)}
            ben_at_ana = participant(a, b).index

            first_slot = b.slot
            await room.leave(b, abort=True)
            assert a.call.head_count == 2 and a.call.phase == RollCallPhase.GATHERING
            assert participant(a, b).left
            await room.join(b)
            assert b.slot != first_slot
            await room.run(2)
            assert a.call.roster == b.call.roster == c.call.roster == roster
            assert [x.call.phase for x in (a, b, c)] == [
                RollCallPhase.SAID, RollCallPhase.SAID, RollCallPhase.CONFIRMED]
            back = participant(a, b)
            assert (back.index, back.slot, back.left) == (ben_at_ana, b.slot, False)
            assert room.hear(a, b, codes["Ben"]) == VERIFIED
            assert room.hear(b, a, codes["Ana"]) == VERIFIED
            c.call.confirm_said(c.time)
            room.flush(c)
            await room.run(1)
            assert room.hear(a, c) == VERIFIED and room.hear(b, c) == VERIFIED and room.hear(c, a) == VERIFIED
            return a, b, c
        finally:
            await room.close()

    devices = asyncio.run(scenario())
    assert states(devices) == all_pairs(devices, VERIFIED)
    assert all(x.refusals == [] for x in devices), [x.refusals for x in devices]
    assert_none_wrongly_verified(devices)


# ---------------------------------------------------------------------------
# 6. The display after a new round


def test_after_a_new_round_one_wrong_three_times_before_reads_not_yet_when_a_new_code_is_typed_early(relay, tmp_path):
    """Ana and Ben say their codes; Ben types a wrong code for Ana three
    times (wrong, then locked for the round). Cai joins: a new round, and
    Ben's screen shows Ana "not yet". Both confirm the new roster; Ben types
    Ana's new code before her new SAID has come: "not yet" (not "wrong", not
    locked); when it comes, verified."""
    relay = relay()
    ana, ben, cai = make_people(tmp_path, ["Ana", "Ben", "Cai"], friends=[("Ana", "Ben")])

    async def scenario():
        room = Room(relay)
        code = itsme.new_meeting_code()
        a, b, c = (room.device(p, code) for p in (ana, ben, cai))
        try:
            await room.join(a, b)
            await room.run(2)
            await room.say(a, b)
            wrong = other_code(a.call.code)
            assert [room.hear(b, a, wrong) for _ in range(3)] == [WRONG] * 3
            with pytest.raises(LockedError):
                room.hear(b, a)
            assert state_of(b, a) == WRONG
            await room.join(c)
            await room.run(2)
            assert b.call.phase == RollCallPhase.GATHERING and same_roster([a, b, c])
            assert state_of(b, a) == NOT_YET
            room.confirm(a)
            room.confirm(b)
            assert room.hear(b, a) == NOT_YET
            assert state_of(b, a) == NOT_YET
            a.call.confirm_said(a.time)
            room.flush(a)
            await room.run(1)
            return state_of(b, a)
        finally:
            await room.close()

    assert asyncio.run(scenario()) == VERIFIED


# ---------------------------------------------------------------------------
# 7. Relaying both ways: call bindings


@pytest.mark.parametrize(
    "bindings, shown, verified",
    [
        pytest.param((b"call one " * 4, b"call two " * 4), RollCallState.OTHER_CALL, False, id="bound-to-two-calls"),
        pytest.param((None, None), VERIFIED, True, id="unbound-the-documented-limit"),
        pytest.param((b"call one " * 4, None), RollCallState.BINDING_DIFFERS, False, id="one-bound-one-not"),
        pytest.param((b"call one " * 4, b"call one " * 4), VERIFIED, True, id="bound-to-the-same-call"),
    ],
)
def test_relaying_both_ways_between_two_calls(relay, tmp_path, bindings, shown, verified):
    """Ana is on one call, Ben on another, and someone gave both calls the
    same meeting code: the relay puts their devices in one room, and a
    deepfake of each, on the other's call, repeats what the real one says
    (the test types each one's real code). Bound to their two calls, each
    device shows the other as "another call", typing a code for it is
    refused and nobody is verified; without a binding both are verified (the
    limit 20.8 documents: each owner should see a name they do not see on
    their call); one bound and one not: "binding differs" on both. Bound to
    the same call: verified."""
    relay = relay()
    ana, ben = make_people(tmp_path, ["Ana", "Ben"])

    async def scenario():
        room = Room(relay)
        code = itsme.new_meeting_code()
        a, b = (room.device(p, code, binding=cb) for p, cb in zip((ana, ben), bindings))
        try:
            await room.join(a, b)
            await room.run(2)
            assert same_roster([a, b]) and a.call.head_count == b.call.head_count == 2
            seen = [(x.call.participants[1].state, x.call.participants[1].contact_id is not None) for x in (a, b)]
            await room.say(a, b)
            results = []
            for listener, speaker in ((a, b), (b, a)):
                other = listener.call.participants[1]
                try:
                    results.append(listener.call.enter_heard(other.index, speaker.call.code, listener.time))
                except InvalidStateError:
                    results.append("refused")
            await room.run(1)
            final = [x.call.participants[1].state for x in (a, b)]
            return seen, results, final, a, b
        finally:
            await room.close()

    seen, results, final, a, b = asyncio.run(scenario())
    if verified:
        assert seen == [(RollCallState.NOT_YET, True)] * 2
        assert results == final == [VERIFIED, VERIFIED]
    else:
        assert seen == [(shown, False)] * 2
        assert results == ["refused", "refused"]
        assert final == [shown, shown]
    assert a.refusals == b.refusals == []
