"""The roll call (docs/PROTOCOL.md 20, version 2) through a real relay's
group room (15.9) when the relay itself lies: a WebSocket-frame-aware proxy
(rollcalltest.FrameProxy) stands between the devices and the relay's
`/v1/groups/{id}` and drops, holds back, repeats, replays, moves between
roll calls and re-labels the messages the relay forwards, and shows
different participants to different devices. The devices are driven
through the Python binding's `itsme.RollCall` by the host loop of
rollcalltest.py, ticked every virtual second.

20.8 says what a relay can do, and cannot: a dropped message leaves its
pair "not yet" only as long as the relay keeps dropping it (the core sends
it again, 20.6); a SAID that arrives before the HELLO its roster includes
is refused as another roster's, and comes again; a repeat is ignored; a
message of another round is refused, and one of another roll call fails its
signature (the roll call's ID is signed); a SAID counts by its signature,
whoever carried it, while a VIEW must come from its own slot; a HELLO kept
from some devices gives them other rosters, whose SAIDs each refuses, and
a split on every screen. None of it makes anyone verified. Each test checks
the refusals, the state shown beside each contact, and that every
"verified" shown rests on a SAID its contact's device really sent.

Every person says the same code in every round and roll call (drawn from a
deterministic random source of their own), and each listener types the
code really said: a replayed or moved SAID would verify if it were taken.
"""

from __future__ import annotations

import asyncio
from typing import List

import pytest

from rollcalltest import (
    AUTHENTICATION_FAILED,
    HELLO,
    INVALID_STATE,
    SAID,
    VIEW,
    Device,
    FrameProxy,
    Room,
    all_pairs,
    assert_none_wrongly_verified,
    kind,
    make_people,
    participant,
    same_roster,
    seeded,
    state_of,
    states,
)

import itsme  # noqa: E402  (on the path once rollcalltest is imported)
from itsme import RollCallPhase, RollCallState  # noqa: E402

VERIFIED, NOT_YET = RollCallState.VERIFIED, RollCallState.NOT_YET
# A slot the relay never gave in these rooms (a room of a few joins).
UNUSED_SLOT = 40_000


@pytest.fixture
def people(tmp_path):
    """Factory: `people("Ana", "Ben", ...)`, each the contact of every other
    (or only of the pairs in `friends`)."""

    def make(*names: str, friends=None):
        return make_people(tmp_path, names, friends)

    return make


def code_random(name: str):
    """The random source `name` draws each round's code from: a fresh one
    each time, so that their code is the same in every round and in every
    roll call."""
    return lambda: seeded(f"code of {name}")


def lying(relay, scenario):
    """Runs `scenario(proxy, room, code)` with a FrameProxy in front of a fresh relay."""

    async def run():
        real = relay()
        proxy = await FrameProxy.start(real)
        room = Room(real, proxy)
        try:
            return await scenario(proxy, room, itsme.new_meeting_code())
        finally:
            await room.close()
            await proxy.close()

    return asyncio.run(run())


def join_all(room: Room, people, code: str) -> List[Device]:
    return [room.device(p, code, code_random=code_random(p.name)) for p in people]


def hear_all(room: Room, devices) -> None:
    """Each listener whose roster is confirmed types the code each contact
    that confirmed it said (those already verified are left alone)."""
    for listener in devices:
        if listener.call.phase not in (RollCallPhase.CONFIRMED, RollCallPhase.SAID):
            continue
        for speaker in devices:
            if speaker is listener or listener.person.contact_id(speaker.person) is None:
                continue
            if speaker.call.phase not in (RollCallPhase.CONFIRMED, RollCallPhase.SAID):
                continue
            target = participant(listener, speaker)
            if target is None or target.left or target.state == VERIFIED:
                continue
            listener.call.enter_heard(target.index, speaker.call.code, listener.time)
            room.flush(listener)


def errors(device: Device, message_kind=None) -> List[str]:
    return [r.error for r in device.refusals if message_kind is None or r.kind == message_kind]


# ---------------------------------------------------------------------------
# 1. Drops


def test_a_said_the_relay_drops_for_one_listener_leaves_that_pair_not_yet_until_it_gets_through(relay, people):
    """The relay drops every copy of Ben's SAID on its way to Cai: for 20
    seconds Cai shows Ben "not yet" although she typed the code Ben said,
    while Ben's device sends it again (20.6, rule 6); every other
    pair verifies, and nothing is refused. Once the relay lets it through,
    Cai verifies Ben within one re-send."""

    async def scenario(proxy, room, code):
        ana, ben, cai = devices = join_all(room, people("Ana", "Ben", "Cai"), code)
        await room.join(*devices)
        await room.run(2)
        dropping = []
        rule = proxy.withhold(lambda link, slot, m: link is cai.conn.link and slot == ben.slot and kind(m) == SAID,
                              dropping)
        await room.say(*devices)
        hear_all(room, devices)
        await room.run(20)
        before = states(devices)
        sent_before = len(ben.sent_of(SAID))
        proxy.remove_rule(rule)
        took = await room.run_until(lambda: state_of(cai, ben) == VERIFIED, 10, "Cai verifies Ben")
        return devices, before, len(dropping), sent_before, took

    devices, before, dropped, sent, took = lying(relay, scenario)
    expected = all_pairs(devices, VERIFIED)
    expected[("Cai", "Ben")] = NOT_YET
    assert before == expected
    assert dropped == sent >= 3, (dropped, sent)  # the first SAID and two re-sends, at least
    assert states(devices) == all_pairs(devices, VERIFIED)
    assert all(d.refusals == [] for d in devices), [d.refusals for d in devices]
    assert_none_wrongly_verified(devices)


def test_a_hello_the_relay_keeps_from_one_device_gives_three_rosters_a_split_and_no_check_until_it_comes(relay, people):
    """The relay never gives Ana Cai's HELLO. Ana holds Ana and Ben; Ben all
    three; Cai, whom Ana's VIEWs never list, Ben and Cai: three rosters, so
    each device refuses the SAIDs of the others (`invalid_state`: another
    roster's, or a speaker not present), every pair stays "not yet", and
    every screen shows a split. Cai is never listed on Ana's screen. Once the
    relay gives Ana the HELLO (Cai's device sends it again, 20.6), the
    rosters meet, each confirms the new round and says the same code again,
    and every pair verifies."""

    async def scenario(proxy, room, code):
        ana, ben, cai = devices = join_all(room, people("Ana", "Ben", "Cai"), code)
        await room.join(ana, ben)
        proxy.drop(lambda link, slot, m: link is ana.conn.link and slot == cai.slot and kind(m) == HELLO)
        # The relay gives Cai's slot in order: its events still pass, only the HELLO is kept.
        await room.join(cai)
        await room.run(2)
        rosters = [d.call.roster for d in devices]
        counts = [d.call.head_count for d in devices]
        await room.say(*devices)
        hear_all(room, devices)
        await room.run(6)
        split = [d.call.split for d in devices]
        before = states(devices)
        listed = len(ana.call.participants)
        refused = [errors(d) for d in devices]
        proxy.rules.clear()
        await room.run_until(lambda: same_roster(devices) and ana.call.head_count == 3, 20, "the rosters meet")
        # Ben's round did not change: his SAID of it, refused before, comes again (20.6, rule 6).
        assert ben.call.phase == RollCallPhase.SAID
        await room.say(*devices)
        hear_all(room, devices)
        await room.run_until(lambda: set(states(devices).values()) == {VERIFIED}, 20, "every pair verified")
        return devices, rosters, counts, split, before, listed, refused

    devices, rosters, counts, split, before, listed, refused = lying(relay, scenario)
    assert len(set(rosters)) == 3
    assert counts == [2, 3, 2]
    assert split == [True, True, True]
    # Ana never lists Cai, and Cai never lists Ana (Ana's VIEWs never list Cai's HELLO).
    assert before == {("Ana", "Ben"): NOT_YET, ("Ben", "Ana"): NOT_YET, ("Ben", "Cai"): NOT_YET,
                      ("Cai", "Ben"): NOT_YET}, before
    assert listed == 2
    for name, kinds in zip(("Ana", "Ben", "Cai"), refused):
        assert kinds and set(kinds) == {INVALID_STATE}, (name, kinds)
    assert states(devices) == all_pairs(devices, VERIFIED)
    assert_none_wrongly_verified(devices)


# ---------------------------------------------------------------------------
# 2. Reordering


def test_a_said_the_relay_delivers_before_a_hello_its_roster_includes_is_refused_and_comes_again(relay, people):
    """The relay holds Cai's HELLO back from Ben. Ana sees all three, Ben
    Ana and himself, Cai Ana and herself. Ana says her code: Ben refuses her
    SAID (another roster: he does not see Cai), and so does Cai (she does not
    see Ben), and both show Ana "not yet" although they typed her code. The
    relay gives Ben the HELLO: the rosters meet, Ana's device sends its SAID
    again (their VIEWs lack it: 20.6, rule 6), Ben and Cai take it
    and verify Ana; then everyone says and every pair verifies. The refusals
    left nothing behind: the same SAID delivered once more is a repeat."""

    async def scenario(proxy, room, code):
        ana, ben, cai = devices = join_all(room, people("Ana", "Ben", "Cai"), code)
        await room.join(ana, ben)
        held = proxy.hold(lambda link, slot, m: link is ben.conn.link and slot == cai.slot and kind(m) == HELLO)
        await room.join(cai)
        await room.run(2)
        counts = [d.call.head_count for d in devices]
        await room.say(ana)
        for d in (ben, cai):
            room.confirm(d)
        hear_all(room, devices)
        await room.run(1)
        before = {(d.name, "Ana"): state_of(d, ana) for d in (ben, cai)}
        refused = [errors(d, SAID) for d in (ben, cai)]
        assert held.messages, "the relay held no HELLO"
        held.release()
        await room.run_until(lambda: same_roster(devices) and ben.call.head_count == 3, 10, "the rosters meet")
        for d in (ben, cai):
            room.confirm(d)
        hear_all(room, devices)
        await room.run_until(lambda: state_of(ben, ana) == state_of(cai, ana) == VERIFIED, 10, "Ana's SAID again")
        await room.say(*(d for d in devices if d.call.phase != RollCallPhase.SAID))
        hear_all(room, devices)
        await room.run(1)
        for link, slot, m in list(proxy.forwarded):
            if link is ben.conn.link and slot == ana.slot and kind(m) == SAID:
                proxy.inject(link, slot, m)
        await room.run(1)
        return devices, counts, before, refused

    devices, counts, before, refused = lying(relay, scenario)
    assert counts == [3, 2, 2]
    assert before == {("Ben", "Ana"): NOT_YET, ("Cai", "Ana"): NOT_YET}
    assert all(kinds and set(kinds) == {INVALID_STATE} for kinds in refused), refused
    assert states(devices) == all_pairs(devices, VERIFIED)
    assert {r.error for d in devices for r in d.refusals} <= {INVALID_STATE}
    assert_none_wrongly_verified(devices)


# ---------------------------------------------------------------------------
# 3. Replays


def test_every_message_the_relay_repeats_is_ignored(relay, people):
    """The relay gives every device each HELLO, VIEW and SAID twice, and
    every SAID a third time once the codes are checked: no repeat is refused
    (20.2, 20.3, 20.5: the same HELLO, an older VIEW and the same SAID are
    ignored), every pair verifies, and the late repeats change nothing."""

    async def scenario(proxy, room, code):
        devices = join_all(room, people("Ana", "Ben", "Cai"), code)
        proxy.add_rule(lambda link, slot, m: [(slot, m), (slot, m)] if kind(m) else None)
        await room.join(*devices)
        await room.run(2)
        await room.say(*devices)
        hear_all(room, devices)
        await room.run(1)
        checked = states(devices)
        for link, slot, m in list(proxy.forwarded):
            if kind(m) == SAID:
                proxy.inject(link, slot, m)
        await room.run(2)
        return devices, checked

    devices, checked = lying(relay, scenario)
    for d in devices:
        saids = [m for s, m in d.received if kind(m) == SAID]
        assert len(saids) >= 6 and len(set(saids)) == 2, (d.name, len(saids))
    assert checked == states(devices) == all_pairs(devices, VERIFIED)
    assert all(d.refusals == [] for d in devices), [d.refusals for d in devices]
    assert_none_wrongly_verified(devices)


def test_a_said_of_an_earlier_round_with_the_same_code_is_refused(relay, people):
    """Ana, Ben and Cai say their codes; before anyone types them, Dan (no
    one's contact) joins, which starts a new round, and each draws the same
    code again. The relay drops every copy of Ben's new SAID and gives Ana
    and Cai his SAID of the round before: both refuse it (`invalid_state`:
    another roster's) and show Ben "not yet" although they typed the very
    code sealed in it; the other pairs verify."""

    async def scenario(proxy, room, code):
        devices = join_all(room, people("Ana", "Ben", "Cai", "Dan",
                                        friends=[("Ana", "Ben"), ("Ana", "Cai"), ("Ben", "Cai")]), code)
        ana, ben, cai, dan = devices
        await room.join(ana, ben, cai)
        await room.run(2)
        await room.say(ana, ben, cai)
        first = {d.name: d.call.code for d in (ana, ben, cai)}
        first_roster = ana.call.roster
        earlier = ben.sent_of(SAID)[-1]
        proxy.drop(lambda link, slot, m: slot == ben.slot and kind(m) == SAID)
        await room.join(dan)
        await room.run(2)
        assert same_roster(devices) and ana.call.roster != first_roster
        await room.say(*devices)
        assert {d.name: d.call.code for d in (ana, ben, cai)} == first
        for d in (ana, cai):
            proxy.inject(d.conn.link, ben.slot, earlier)
        await room.settle()
        hear_all(room, devices)
        await room.run(10)
        return devices

    devices = lying(relay, scenario)
    ana, ben, cai, dan = devices
    expected = all_pairs(devices, VERIFIED)
    expected[("Ana", "Ben")] = expected[("Cai", "Ben")] = NOT_YET
    assert states(devices) == expected
    assert [(r.error, r.kind, r.slot) for r in ana.refusals] == [(INVALID_STATE, SAID, ben.slot)]
    assert [(r.error, r.kind, r.slot) for r in cai.refusals] == [(INVALID_STATE, SAID, ben.slot)]
    assert ben.refusals == dan.refusals == []
    assert_none_wrongly_verified(devices)


def test_the_hello_view_and_said_of_an_earlier_roll_call_are_refused(relay, people):
    """Ana, Ben and Cai held a roll call and checked each other's codes; the
    relay kept everything Ben's device sent. In their next roll call (a new
    meeting code; each says the same code as before) it drops Ben's SAIDs
    and replays his old HELLO, VIEWs and SAID from Ben's slot and from a slot
    of its own: every one fails its signature (`authentication_failed`: the
    roll call's ID is signed into each, 20.1), no ghost appears, and Ana and
    Cai show Ben "not yet" and verify each other."""

    async def scenario(proxy, room, code):
        trio = people("Ana", "Ben", "Cai")
        earlier = join_all(room, trio, code)
        await room.join(*earlier)
        await room.run(2)
        await room.say(*earlier)
        hear_all(room, earlier)
        await room.run(1)
        assert states(earlier) == all_pairs(earlier, VERIFIED)
        old = list(earlier[1].sent)
        old_codes = [d.call.code for d in earlier]
        for d in earlier:
            await room.leave(d)

        now = join_all(room, trio, itsme.new_meeting_code())
        ana, ben, cai = now
        await room.join(*now)
        await room.run(2)
        proxy.drop(lambda link, slot, m: slot == ben.slot and kind(m) == SAID)
        for d in (ana, cai):
            for m in old:
                proxy.inject(d.conn.link, ben.slot, m)
                proxy.inject(d.conn.link, UNUSED_SLOT, m)
        await room.run(2)
        await room.say(*now)
        assert [d.call.code for d in now] == old_codes
        hear_all(room, now)
        await room.run(10)
        return now, old

    (ana, ben, cai), old = lying(relay, scenario)
    assert {kind(m) for m in old} == {HELLO, VIEW, SAID}
    for d in (ana, cai):
        assert [r.error for r in d.refusals] == [AUTHENTICATION_FAILED] * (2 * len(old)), d.refusals
        assert d.call.head_count == 3 and len(d.call.participants) == 3
    expected = all_pairs([ana, ben, cai], VERIFIED)
    expected[("Ana", "Ben")] = expected[("Cai", "Ben")] = NOT_YET
    assert states([ana, ben, cai]) == expected
    assert ben.refusals == []
    assert_none_wrongly_verified([ana, ben, cai])


# ---------------------------------------------------------------------------
# 4. Messages moved between two roll calls at once


def test_messages_the_relay_moves_between_two_roll_calls_at_once_are_refused(relay, people):
    """Ana, Ben and Cai are in two roll calls at once (two meeting codes, two
    rooms), saying the same code in both. The relay holds back every SAID of
    both rooms and gives each device, in each room, the other room's HELLOs,
    VIEWs and SAIDs instead, each from the slot its sender has in this room:
    every moved message fails its signature (`authentication_failed`), and
    every pair shows "not yet" although each typed the right code. Then the
    relay delivers the real SAIDs: every pair of both roll calls verifies."""

    async def scenario(proxy, room, code):
        trio = people("Ana", "Ben", "Cai")
        first = join_all(room, trio, code)
        second = join_all(room, trio, itsme.new_meeting_code())
        await room.join(*first, *second)
        await room.run(2)
        held = proxy.hold(lambda link, slot, m: kind(m) == SAID)
        await room.say(*first, *second)
        assert len(held.messages) == 12
        moved = 0
        for source, target in ((first, second), (second, first)):
            by_link = {d.conn.link: i for i, d in enumerate(source)}
            by_slot = {d.slot: i for i, d in enumerate(source)}
            for link, slot, m in list(proxy.forwarded):
                if link in by_link and kind(m):
                    listener, speaker = target[by_link[link]], target[by_slot[slot]]
                    proxy.inject(listener.conn.link, speaker.slot, m)
                    moved += 1
        await room.settle()
        hear_all(room, first + second)
        await room.run(1)
        before = [states(first), states(second)]
        held.release()
        await room.run(2)
        return first, second, before, moved

    first, second, before, moved = lying(relay, scenario)
    assert before == [all_pairs(first, NOT_YET), all_pairs(second, NOT_YET)]
    for call in (first, second):
        assert states(call) == all_pairs(call, VERIFIED)
        assert_none_wrongly_verified(call)
    refused = [r.error for d in first + second for r in d.refusals]
    assert refused == [AUTHENTICATION_FAILED] * moved


# ---------------------------------------------------------------------------
# 5. Slots rewritten


def test_a_said_the_relay_shows_from_another_slot_is_taken_and_a_view_is_refused(relay, people):
    """The relay re-labels SAIDs with another sender's slot: Ben's SAID
    reaches Ana only as Cai's; Ana's reaches Cai as Ben's, then as her own;
    Cai's reaches Ben from a slot no one has, then as hers. Each is taken by
    its signature (20.5: whoever carried it does not matter), the second
    copies are repeats, and every pair verifies. Then the relay gives Ana
    each VIEW of Ben's first as Cai's: refused (`invalid_state`: a VIEW must
    come from its sender's slot, 20.3), and the real one, after it, is taken
    (Ana still sees Ben present and agreeing)."""

    async def scenario(proxy, room, code):
        ana, ben, cai = devices = join_all(room, people("Ana", "Ben", "Cai"), code)
        await room.join(*devices)
        await room.run(2)

        def relabel(link, slot, m):
            if kind(m) != SAID:
                return None
            if link is ana.conn.link and slot == ben.slot:
                return [(cai.slot, m)]
            if link is cai.conn.link and slot == ana.slot:
                return [(ben.slot, m), (slot, m)]
            if link is ben.conn.link and slot == cai.slot:
                return [(UNUSED_SLOT, m), (slot, m)]
            return None

        proxy.add_rule(relabel)
        await room.say(*devices)
        hear_all(room, devices)
        await room.run(1)
        said = [d.refusals[:] for d in devices]
        proxy.add_rule(lambda link, slot, m: [(cai.slot, m), (slot, m)]
                       if link is ana.conn.link and slot == ben.slot and kind(m) == VIEW else None)
        # Ben's device sends a VIEW when a new participant comes: Dan, no one's contact.
        dan = room.device(people("Dan")[0], code)
        await room.join(dan)
        await room.run(3)
        return devices, said, participant(ana, ben)

    (ana, ben, cai), said, ben_at_ana = lying(relay, scenario)
    assert said == [[], [], []]
    assert states([ana, ben, cai]) == all_pairs([ana, ben, cai], VERIFIED)
    moved_views = [r for r in ana.refusals if r.kind == VIEW]
    assert moved_views and all((r.error, r.slot) == (INVALID_STATE, cai.slot) for r in moved_views), ana.refusals
    assert len(moved_views) == len(ana.refusals)
    assert not ben_at_ana.left and ben_at_ana.agrees and ben_at_ana.slot == ben.slot
    assert ben.refusals == cai.refusals == []
    assert_none_wrongly_verified([ana, ben, cai])


# ---------------------------------------------------------------------------
# 6. Different participants for different devices


def test_a_hello_the_relay_hides_from_half_the_room_splits_the_rosters_and_no_said_crosses(relay, people):
    """Four contacts of each other; the relay never gives Ana and Ben Dan's
    HELLO. Ana and Ben hold a roster of three (Dan not listed on their
    screens); Cai sees all four; Dan, whom neither Ana's nor Ben's VIEWs
    list, sees Cai and himself. Only Ana and Ben share a roster: they verify
    each other, every other pair stays "not yet" (each SAID from another
    roster is refused, `invalid_state`), and every screen shows a split."""

    async def scenario(proxy, room, code):
        ana, ben, cai, dan = devices = join_all(room, people("Ana", "Ben", "Cai", "Dan"), code)
        await room.join(ana, ben, cai)
        hidden_from = {ana.conn.link, ben.conn.link}
        dan_slot = cai.slot + 1  # the relay gives a room's slots in order (15.9)
        proxy.drop(lambda link, slot, m: link in hidden_from and slot == dan_slot and kind(m) == HELLO)
        await room.join(dan)
        assert dan.slot == dan_slot
        await room.run(2)
        rosters = [d.call.roster for d in devices]
        await room.say(*devices)
        hear_all(room, devices)
        await room.run(6)
        return devices, rosters

    devices, rosters = lying(relay, scenario)
    ana, ben, cai, dan = devices
    assert rosters[0] == rosters[1] and len(set(rosters)) == 3
    assert [d.call.head_count for d in devices] == [3, 3, 4, 2]
    assert [len(d.call.participants) for d in devices] == [3, 3, 4, 2]
    expected = all_pairs(devices, NOT_YET)
    del expected[("Ana", "Dan")], expected[("Ben", "Dan")], expected[("Dan", "Ana")], expected[("Dan", "Ben")]
    expected[("Ana", "Ben")] = expected[("Ben", "Ana")] = VERIFIED
    assert states(devices) == expected
    assert all(d.call.split for d in devices)
    for d in devices:
        assert d.refusals and {r.error for r in d.refusals} == {INVALID_STATE}, (d.name, d.refusals)
    assert_none_wrongly_verified(devices)
