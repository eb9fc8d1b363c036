"""The roll call (docs/PROTOCOL.md 20) through a real relay's group room
(15.9) when the relay itself lies: a tampering proxy (remotetest's
GroupRoomProxy) stands between the devices and the relay's
`/v1/groups/{id}` and drops, holds back, repeats, replays, moves between
roll calls and re-labels the messages the relay forwards, and shows
different participants to different devices. The devices are driven
through the Python binding's `itsme.RollCall`, as in test_rollcall_relay.py.

20.6 says what a relay can do: dropped messages leave participants "not
yet"; a SAID that arrives before a HELLO its roster includes is refused as
another roster's; a repeat is ignored, and one of another round or another
roll call refused; different participants shown to different devices give
different rosters, whose SAIDs each refuses. None of it makes anyone
verified. Each test checks the refusals' kinds, the state shown beside each
contact, and that every "verified" shown rests on a SAID its contact's
device really sent in that room with the listener's roster.

Every person says the same code in every round and roll call (drawn from a
deterministic random source of their own), and each listener types the
code really said: a replayed or moved SAID would verify if it were taken.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Callable, Dict, List, Optional

import pytest

from remotetest import GroupRoomProxy
from rollcalltest import NOW, Person, befriend, flush, join, participant, pump

import itsme  # noqa: E402  (on the path once rollcalltest is imported)
from itsme import RollCallPhase, RollCallState  # noqa: E402

HELLO, SAID = 1, 2
INVALID_STATE, MALFORMED = "InvalidStateError", "MalformedMessageError"
VERIFIED, NOT_YET = RollCallState.VERIFIED, RollCallState.NOT_YET
# The states that say "the code matched".
MATCHED = {RollCallState.VERIFIED, RollCallState.VERIFIED_TAG_UNCHECKED, RollCallState.DEVICE_CHANGED}
# A slot the relay never gave in these rooms (a room of a few joins).
UNUSED_SLOT = 40_000


def kind(payload: bytes) -> Optional[int]:
    """HELLO or SAID for a roll-call message, None for anything else."""
    return payload[1] if len(payload) > 1 and payload[0] == 1 else None


def code_random(person: Person) -> itsme.DeterministicRandom:
    """The random source `person` draws each round's code from: a fresh
    one each time, so that their code is the same in every round and in
    every roll call."""
    return itsme.DeterministicRandom(hashlib.sha256(b"code of " + person.name.encode()).digest())


@pytest.fixture
def lying_relay(relay):
    """A GroupRoomProxy in front of a fresh relay."""
    proxy = GroupRoomProxy(relay())
    yield proxy
    proxy.close()


@pytest.fixture
def people(tmp_path):
    """Factory: `people("Ana", "Ben", ...)`, each the contact of every other
    (or only of the pairs in `friends`)."""

    def make(*names: str, friends=None) -> List[Person]:
        made = [Person(name, tmp_path) for name in names]
        by_name = {p.name: p for p in made}
        pairs = friends if friends is not None else [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
        for a, b in pairs:
            befriend(by_name[a], by_name[b])
        return made

    return make


class Call:
    """One roll call through the lying relay: its people, in the order
    they join, and what the relay gave each device (`logs`)."""

    def __init__(self, proxy: GroupRoomProxy, people: List[Person], code: Optional[str] = None):
        self.proxy = proxy
        self.people = list(people)
        self.code = code or itsme.new_meeting_code()
        self.logs: Dict[str, list] = {p.name: [] for p in people}

    async def join(self, *people: Person) -> None:
        """Each of `people` (default: everyone) joins the room, in turn; one
        not in the call yet is added to it."""
        for person in people or self.people:
            if person not in self.people:
                self.people.append(person)
                self.logs[person.name] = []
            await join(person, self.proxy, self.code)

    def link(self, person: Person):
        """`person`'s connection through the proxy."""
        return self.proxy.link(person.call.room, person.slot)

    def by_slot(self, slot: int) -> Person:
        return next(p for p in self.people if p.slot == slot)

    def got(self, person: Person, message_kind: int, count: int) -> Callable[[], bool]:
        """Whether `person`'s device has been given `count` messages of that kind."""
        return lambda: sum(kind(m) == message_kind for _, m in self.logs[person.name]) >= count

    async def settle(self, until: Dict[Person, Callable[[], bool]]) -> None:
        """Pumps each device of `until` until its condition holds."""
        await asyncio.gather(*(pump(p, self.logs[p.name], cond) for p, cond in until.items()))

    async def gather(self, counts: Optional[Dict[Person, int]] = None) -> None:
        """Pumps every device until it holds `counts[person]` participants
        (default: everyone) and has been told of every later joiner (so that
        it sent them its HELLO)."""
        counts = counts or {}
        n = len(self.people)

        def ready(p: Person, later: int) -> Callable[[], bool]:
            return lambda: (
                len(p.call.participants) == counts.get(p, n)
                and sum(e["type"] == "peer-joined" for e in p.events) >= later
            )

        await self.settle({p: ready(p, n - 1 - i) for i, p in enumerate(self.people)})

    async def say(self, *people: Person) -> None:
        """Each of `people` (default: everyone) confirms the roster shown,
        reads their code and confirms "I said it": their SAID goes out."""
        for p in people or self.people:
            p.call.confirm_roster(p.call.roster, NOW + 60, random=code_random(p))
            p.call.confirm_said(NOW + 60)
            await flush(p)

    def type_codes(self) -> None:
        """Each listener who confirmed this round's roster types the code
        each contact listed really said."""
        for listener in self.people:
            if listener.call.phase not in (RollCallPhase.CONFIRMED, RollCallPhase.SAID):
                continue
            for speaker in self.people:
                target = participant(listener, speaker) if speaker is not listener else None
                if target is None or speaker.call.phase not in (RollCallPhase.CONFIRMED, RollCallPhase.SAID):
                    continue
                listener.call.enter_heard(target.index, speaker.call.code, NOW + 60)

    def states(self) -> Dict[tuple, RollCallState]:
        """{(listener, speaker): the state shown} for every contact listed."""
        shown = {}
        for listener in self.people:
            for speaker in self.people:
                target = participant(listener, speaker) if speaker is not listener else None
                if target is not None:
                    shown[(listener.name, speaker.name)] = target.state
        return shown

    def refusals(self) -> Dict[str, list]:
        return {p.name: sorted(p.refusals) for p in self.people}

    def assert_none_wrongly_verified(self) -> None:
        """Every contact is listed once, from the slot its device joined
        with, and each one shown verified (or device changed) has a SAID its
        device really sent to the relay in this room, for this listener's
        roster."""
        for listener in self.people:
            mine = [q for q in listener.call.participants if q.contact_id]
            for speaker in self.people:
                listed = [
                    q for q in mine
                    if listener.contacts.get(q.contact_id).fingerprint == speaker.identity.fingerprint
                ]
                assert len(listed) <= 1, (listener.name, speaker.name, listed)
                if not listed:
                    continue
                assert listed[0].slot == speaker.slot, (listener.name, speaker.name, listed)
                if listed[0].state not in MATCHED:
                    continue
                sent = self.link(speaker).sent
                hello = hashlib.sha256(next(m for m in sent if kind(m) == HELLO)).digest()
                assert any(
                    kind(m) == SAID and m[2:34] == hello and m[34:66] == listener.call.roster for m in sent
                ), f"{listener.name} shows {speaker.name} {listed[0].state.name} without a SAID of its roster"
            unknown = [q for q in listener.call.participants[1:] if not q.contact_id]
            assert all(q.state == RollCallState.UNKNOWN for q in unknown), (listener.name, unknown)

    async def close(self) -> None:
        for p in self.people:
            await p.ws.close()


def all_pairs(people: List[Person], state: RollCallState) -> dict:
    return {(a.name, b.name): state for a in people for b in people if a is not b}


# ---------------------------------------------------------------------------
# 1. Drops


def test_a_said_the_relay_drops_for_one_listener_leaves_that_pair_not_yet(lying_relay, people):
    """The relay drops Ben's SAID on its way to Cai: Cai shows Ben "not yet"
    although she typed the code Ben said; every other pair verifies, and no
    device refused anything."""
    ana, ben, cai = people("Ana", "Ben", "Cai")
    call = Call(lying_relay, [ana, ben, cai])

    async def scenario():
        await call.join()
        await call.gather()
        to_cai = call.link(cai)
        dropped = lying_relay.drop(lambda link, slot, m: link is to_cai and slot == ben.slot and kind(m) == SAID)
        await call.say()
        await call.settle({
            ana: call.got(ana, SAID, 2),
            ben: call.got(ben, SAID, 2),
            cai: lambda: call.got(cai, SAID, 1)() and bool(dropped),
        })
        call.type_codes()
        await call.close()
        return dropped

    dropped = asyncio.run(scenario())
    assert [(slot, kind(m)) for _, slot, m in dropped] == [(ben.slot, SAID)]
    expected = all_pairs(call.people, VERIFIED)
    expected[("Cai", "Ben")] = NOT_YET
    assert call.states() == expected
    assert call.refusals() == {"Ana": [], "Ben": [], "Cai": []}
    call.assert_none_wrongly_verified()


def test_a_hello_the_relay_drops_for_one_device_gives_it_another_roster_and_its_saids_are_refused(
    lying_relay, people
):
    """The relay never gives Ana Cai's HELLO: Ana's roster holds Ana and Ben,
    the others' all three. Ana refuses Ben's SAID (another roster's) and
    Cai's (a speaker whose HELLO she does not hold), Ben and Cai refuse
    Ana's, all `invalid_state`; Ana and Ben stay "not yet" for each other,
    Cai is not listed on Ana's screen (one participant fewer than the head
    count), and Ben and Cai verify each other."""
    ana, ben, cai = people("Ana", "Ben", "Cai")
    call = Call(lying_relay, [ana, ben, cai])

    async def scenario():
        await call.join(ana, ben)
        to_ana = call.link(ana)
        dropped = lying_relay.drop(lambda link, slot, m: link is to_ana and slot == cai.slot and kind(m) == HELLO)
        await call.join(cai)
        await call.gather({ana: 2})
        assert ana.call.roster != ben.call.roster == cai.call.roster
        await call.say()
        await call.settle({p: call.got(p, SAID, 2) for p in call.people})
        call.type_codes()
        await call.close()
        return dropped

    dropped = asyncio.run(scenario())
    assert [(slot, kind(m)) for _, slot, m in dropped] == [(cai.slot, HELLO)]
    assert len(ana.call.participants) == 2
    assert call.states() == {
        ("Ana", "Ben"): NOT_YET,
        ("Ben", "Ana"): NOT_YET,
        ("Ben", "Cai"): VERIFIED,
        ("Cai", "Ana"): NOT_YET,
        ("Cai", "Ben"): VERIFIED,
    }
    assert call.refusals() == {"Ana": [INVALID_STATE] * 2, "Ben": [INVALID_STATE], "Cai": [INVALID_STATE]}
    call.assert_none_wrongly_verified()


# ---------------------------------------------------------------------------
# 2. Reordering


def test_saids_the_relay_delivers_before_a_hello_their_roster_includes_are_refused(lying_relay, people):
    """The relay holds Cai's HELLO back from Ben until Ana's and Cai's SAIDs
    (whose rosters include Cai) have reached him: Ben refuses both
    (`invalid_state`: another roster's, and a speaker whose HELLO he does
    not hold) and shows Ana and Cai "not yet" when the HELLO arrives and he
    types their codes; Ben's own SAID, said after, verifies at Ana and Cai.
    The refusals left nothing behind: when the relay delivers the same
    SAIDs again, now after the HELLO, Ben takes them and they verify (they
    are the real ones of his roster)."""
    ana, ben, cai = people("Ana", "Ben", "Cai")
    call = Call(lying_relay, [ana, ben, cai])

    async def scenario():
        await call.join(ana, ben)
        to_ben = call.link(ben)
        held = lying_relay.hold(lambda link, slot, m: link is to_ben and slot == cai.slot and kind(m) == HELLO)
        await call.join(cai)
        await call.gather({ben: 2})
        await call.say(ana, cai)
        await call.settle({ben: call.got(ben, SAID, 2), ana: call.got(ana, SAID, 1), cai: call.got(cai, SAID, 1)})
        assert sorted(ben.refusals) == [INVALID_STATE] * 2 and len(ben.call.participants) == 2
        assert [(slot, kind(m)) for _, slot, m in held.messages] == [(cai.slot, HELLO)]
        held.release()
        await call.settle({ben: lambda: len(ben.call.participants) == 3})
        assert ana.call.roster == ben.call.roster == cai.call.roster
        await call.say(ben)
        await call.settle({ana: call.got(ana, SAID, 2), cai: call.got(cai, SAID, 2)})
        call.type_codes()
        before = call.states()
        # The relay delivers Ana's and Cai's SAIDs to Ben again, now in order.
        for link, slot, m in list(lying_relay.forwarded):
            if link is to_ben and kind(m) == SAID:
                lying_relay.inject(link, slot, m)
        await call.settle({ben: call.got(ben, SAID, 4)})
        await call.close()
        return before

    before = asyncio.run(scenario())
    expected = all_pairs(call.people, VERIFIED)
    expected[("Ben", "Ana")] = expected[("Ben", "Cai")] = NOT_YET
    assert before == expected
    assert call.states() == all_pairs(call.people, VERIFIED)
    assert call.refusals() == {"Ana": [], "Ben": [INVALID_STATE] * 2, "Cai": []}
    call.assert_none_wrongly_verified()


# ---------------------------------------------------------------------------
# 3. Replays


def test_every_message_the_relay_repeats_is_ignored(lying_relay, people):
    """The relay gives every device each HELLO and SAID twice, and every
    SAID a third time once the codes are checked: no repeat is refused
    (20.2, 20.4: the same bytes are ignored), every pair verifies, and the
    late repeats change no state."""
    ana, ben, cai = people("Ana", "Ben", "Cai")
    call = Call(lying_relay, [ana, ben, cai])

    async def scenario():
        lying_relay.add_rule(lambda link, slot, m: [(slot, m), (slot, m)])
        await call.join()
        await call.gather()
        await call.say()
        await call.settle({p: call.got(p, SAID, 4) for p in call.people})
        call.type_codes()
        checked = call.states()
        for link, slot, m in list(lying_relay.forwarded):
            if kind(m) == SAID:
                lying_relay.inject(link, slot, m)
        await call.settle({p: call.got(p, SAID, 6) for p in call.people})
        await call.close()
        return checked

    checked = asyncio.run(scenario())
    # Each device got each of the two other SAIDs three times.
    assert {p.name: sum(kind(m) == SAID for _, m in call.logs[p.name]) for p in call.people} == {
        "Ana": 6, "Ben": 6, "Cai": 6}
    assert checked == call.states() == all_pairs(call.people, VERIFIED)
    assert call.refusals() == {"Ana": [], "Ben": [], "Cai": []}
    call.assert_none_wrongly_verified()


def test_a_said_of_an_earlier_round_with_the_same_code_is_refused(lying_relay, people):
    """Ana, Ben and Cai say their codes; before anyone types them, Dan
    (no one's contact) joins, which starts a new round, and each draws the
    same code again. The relay drops Ben's new SAID and gives Ana and Cai
    his SAID of the round before, from his slot: both refuse it
    (`invalid_state`: another roster's) and show Ben "not yet" although they
    typed the very code sealed in it; the other pairs verify."""
    ana, ben, cai, dan = people("Ana", "Ben", "Cai", "Dan", friends=[("Ana", "Ben"), ("Ana", "Cai"), ("Ben", "Cai")])
    call = Call(lying_relay, [ana, ben, cai])

    async def scenario():
        await call.join()
        await call.gather()
        await call.say()
        await call.settle({p: call.got(p, SAID, 2) for p in call.people})
        first_codes = {p.name: p.call.code for p in call.people}
        first_roster = ana.call.roster
        earlier = [(link, slot, m) for link, slot, m in lying_relay.forwarded if slot == ben.slot and kind(m) == SAID]
        dropped = lying_relay.drop(lambda link, slot, m: slot == ben.slot and kind(m) == SAID)
        await call.join(dan)
        await call.gather()
        assert ana.call.roster == ben.call.roster == cai.call.roster != first_roster
        await call.say(ana, ben, cai)
        assert {p.name: p.call.code for p in (ana, ben, cai)} == first_codes
        await call.settle({p: lambda p=p: call.got(p, SAID, 3)() and len(dropped) == 3 for p in (ana, cai)})
        for link, slot, m in earlier:
            lying_relay.inject(link, slot, m)
        await call.settle({ana: call.got(ana, SAID, 4), ben: call.got(ben, SAID, 4), cai: call.got(cai, SAID, 4),
                           dan: call.got(dan, SAID, 2)})
        call.type_codes()
        await call.close()

    asyncio.run(scenario())
    expected = all_pairs([ana, ben, cai], VERIFIED)
    expected[("Ana", "Ben")] = expected[("Cai", "Ben")] = NOT_YET
    assert call.states() == expected
    assert call.refusals() == {"Ana": [INVALID_STATE], "Ben": [], "Cai": [INVALID_STATE], "Dan": []}
    call.assert_none_wrongly_verified()


def test_the_hello_and_said_of_an_earlier_roll_call_with_the_same_code_are_refused(lying_relay, people):
    """Ana, Ben and Cai held a roll call and checked each other's codes;
    the relay kept Ben's HELLO and SAID. In their next roll call (a new
    meeting code; each says the same code as before) it drops Ben's SAID
    and replays his old messages: the old HELLO from Ben's slot is refused
    (`malformed_message`: a second HELLO from a slot), from a slot of the
    relay's own it is an unknown participant (its tags are bound to the
    earlier roll call), not a second Ben; the old SAID is refused from
    Ben's slot (`invalid_state`: not the slot of its speaker's HELLO) and
    from that other slot (`invalid_state`: another roster's). Ana and Cai
    show Ben "not yet" and verify each other."""
    ana, ben, cai = people("Ana", "Ben", "Cai")
    earlier = Call(lying_relay, [ana, ben, cai])
    now = Call(lying_relay, [p.in_another_roll_call() for p in (ana, ben, cai)])
    ana2, ben2, cai2 = now.people

    async def scenario():
        await earlier.join()
        await earlier.gather()
        await earlier.say()
        await earlier.settle({p: earlier.got(p, SAID, 2) for p in earlier.people})
        earlier.type_codes()
        assert earlier.states() == all_pairs(earlier.people, VERIFIED)
        sent = earlier.link(ben).sent
        old_hello, old_said = next(m for m in sent if kind(m) == HELLO), next(m for m in sent if kind(m) == SAID)
        await earlier.close()

        await now.join()
        await now.gather()
        for listener in (ana2, cai2):
            lying_relay.inject(now.link(listener), ben2.slot, old_hello)
        for listener in now.people:
            lying_relay.inject(now.link(listener), UNUSED_SLOT, old_hello)
        await now.settle({p: lambda p=p: len(p.call.participants) == 4 for p in now.people})
        assert ana2.call.roster == ben2.call.roster == cai2.call.roster
        dropped = lying_relay.drop(lambda link, slot, m: slot == ben2.slot and kind(m) == SAID)
        await now.say()
        assert {p.name: p.call.code for p in now.people} == {p.name: p.call.code for p in earlier.people}
        await now.settle({p: lambda p=p: now.got(p, SAID, 1)() and len(dropped) == 2 for p in (ana2, cai2)})
        await now.settle({ben2: now.got(ben2, SAID, 2)})
        for listener in (ana2, cai2):
            lying_relay.inject(now.link(listener), ben2.slot, old_said)
            lying_relay.inject(now.link(listener), UNUSED_SLOT, old_said)
        await now.settle({p: now.got(p, SAID, 3) for p in (ana2, cai2)})
        now.type_codes()
        await now.close()

    asyncio.run(scenario())
    for p in now.people:
        ghost = p.call.participants[-1]
        assert (ghost.slot, ghost.contact_id, ghost.state) == (UNUSED_SLOT, None, RollCallState.UNKNOWN), p.name
    expected = all_pairs(now.people, VERIFIED)
    expected[("Ana", "Ben")] = expected[("Cai", "Ben")] = NOT_YET
    assert now.states() == expected
    assert now.refusals() == {
        "Ana": [INVALID_STATE, INVALID_STATE, MALFORMED],
        "Ben": [],
        "Cai": [INVALID_STATE, INVALID_STATE, MALFORMED],
    }
    now.assert_none_wrongly_verified()


# ---------------------------------------------------------------------------
# 4. Messages moved between two roll calls at once


def test_messages_the_relay_moves_between_two_roll_calls_at_once_are_refused(lying_relay, people):
    """Ana, Ben and Cai are in two roll calls at once (two meeting codes,
    two rooms), saying the same code in both. The relay holds back every
    SAID of both rooms and gives each device, in each room, the other
    room's HELLOs and SAIDs instead, each from the slot its speaker has in
    this room: every moved HELLO is refused (`malformed_message`: a second
    HELLO from a slot), every moved SAID (`invalid_state`: a speaker whose
    HELLO is not held), and every pair shows "not yet" although each typed
    the right code. Then the relay delivers the real SAIDs: every pair of
    both roll calls verifies."""
    ana, ben, cai = people("Ana", "Ben", "Cai")
    first = Call(lying_relay, [ana, ben, cai])
    second = Call(lying_relay, [p.in_another_roll_call() for p in (ana, ben, cai)])
    calls = (first, second)

    async def scenario():
        for call in calls:
            await call.join()
        for call in calls:
            await call.gather()
        held = lying_relay.hold(lambda link, slot, m: kind(m) == SAID)
        for call in calls:
            await call.say()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while len(held.messages) < 12 and loop.time() < deadline:
            await asyncio.sleep(0.01)
        assert len(held.messages) == 12
        for source, target in ((first, second), (second, first)):
            path = f"/v1/groups/{source.people[0].call.room}"
            hellos = {(link.slot, slot): m for link, slot, m in list(lying_relay.forwarded)
                      if link.path == path and kind(m) == HELLO}
            saids = [((link.slot, slot), m) for link, slot, m in held.messages if link.path == path]
            for (listener_slot, speaker_slot), m in list(hellos.items()) + saids:
                listener = source.people.index(source.by_slot(listener_slot))
                speaker = source.people.index(source.by_slot(speaker_slot))
                lying_relay.inject(target.link(target.people[listener]), target.people[speaker].slot, m)
        await asyncio.gather(*(
            call.settle({p: lambda p=p: len(p.refusals) >= 4 for p in call.people}) for call in calls
        ))
        for call in calls:
            call.type_codes()
        unverified = [call.states() for call in calls]
        held.release()
        await asyncio.gather(*(call.settle({p: call.got(p, SAID, 4) for p in call.people}) for call in calls))
        for call in calls:
            await call.close()
        return unverified

    unverified = asyncio.run(scenario())
    for call, before in zip(calls, unverified):
        assert before == all_pairs(call.people, NOT_YET)
        assert call.states() == all_pairs(call.people, VERIFIED)
        assert call.refusals() == {p.name: [INVALID_STATE] * 2 + [MALFORMED] * 2 for p in call.people}
        call.assert_none_wrongly_verified()


# ---------------------------------------------------------------------------
# 5. Slots rewritten


def test_a_said_the_relay_shows_from_another_slot_is_refused(lying_relay, people):
    """The relay re-labels SAIDs with another sender's slot: Ben's SAID
    reaches Ana only as Cai's; Ana's reaches Cai as Ben's, then as her own;
    Cai's reaches Ben from a slot no one has, then as hers. Each re-labelled
    one is refused (`invalid_state`: a SAID must come from its speaker's
    HELLO slot) and blocks nothing: Ana shows Ben "not yet", every pair that
    got the real SAID from the real slot verifies."""
    ana, ben, cai = people("Ana", "Ben", "Cai")
    call = Call(lying_relay, [ana, ben, cai])

    async def scenario():
        await call.join()
        await call.gather()
        to_ana, to_ben, to_cai = (call.link(p) for p in call.people)

        def relabel(link, slot, m):
            if kind(m) != SAID:
                return None
            if link is to_ana and slot == ben.slot:
                return [(cai.slot, m)]
            if link is to_cai and slot == ana.slot:
                return [(ben.slot, m), (slot, m)]
            if link is to_ben and slot == cai.slot:
                return [(UNUSED_SLOT, m), (slot, m)]
            return None

        lying_relay.add_rule(relabel)
        await call.say()
        await call.settle({ana: call.got(ana, SAID, 2), ben: call.got(ben, SAID, 3), cai: call.got(cai, SAID, 3)})
        call.type_codes()
        await call.close()

    asyncio.run(scenario())
    expected = all_pairs(call.people, VERIFIED)
    expected[("Ana", "Ben")] = NOT_YET
    assert call.states() == expected
    assert call.refusals() == {"Ana": [INVALID_STATE], "Ben": [INVALID_STATE], "Cai": [INVALID_STATE]}
    call.assert_none_wrongly_verified()


# ---------------------------------------------------------------------------
# 6. Different participants for different devices


def test_a_hello_the_relay_hides_from_half_the_room_splits_the_rosters_and_no_said_crosses(lying_relay, people):
    """Four contacts of each other; the relay never gives Ana and Ben Dan's
    HELLO. Ana and Ben hold a roster of three, Cai and Dan one of four: each
    device refuses the two SAIDs from the other half (`invalid_state`), the
    pairs across the split stay "not yet" (and Dan is not listed on Ana's
    and Ben's screens), and Ana-Ben and Cai-Dan verify each other."""
    ana, ben, cai, dan = people("Ana", "Ben", "Cai", "Dan")
    call = Call(lying_relay, [ana, ben, cai, dan])

    async def scenario():
        await call.join(ana, ben, cai)
        hidden_from = {call.link(ana), call.link(ben)}
        lying_relay.drop(lambda link, slot, m: link in hidden_from and slot == dan.slot and kind(m) == HELLO)
        await call.join(dan)
        await call.gather({ana: 3, ben: 3})
        assert ana.call.roster == ben.call.roster != cai.call.roster == dan.call.roster
        await call.say()
        await call.settle({p: call.got(p, SAID, 3) for p in call.people})
        call.type_codes()
        await call.close()

    asyncio.run(scenario())
    expected = all_pairs(call.people, NOT_YET)
    del expected[("Ana", "Dan")], expected[("Ben", "Dan")]
    for pair in (("Ana", "Ben"), ("Ben", "Ana"), ("Cai", "Dan"), ("Dan", "Cai")):
        expected[pair] = VERIFIED
    assert call.states() == expected
    assert call.refusals() == {p.name: [INVALID_STATE] * 2 for p in call.people}
    call.assert_none_wrongly_verified()
