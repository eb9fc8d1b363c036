"""The roll call through the Python binding (docs/PROTOCOL.md section 20,
version 2).  People who exchanged by QR (one of them since moved to a new
device) and one who is no one's contact meet in a relay group room: here an
in-memory one that gives slots in order, reports the relay's events
(joined, peer-joined, peer-left) and delivers every message in order to the
others with its sender's slot.  Each confirms the roster, reads a code
aloud, and types what each contact said: verified, device changed, tag
unchecked, unknown.  A late joiner's new round; a participant who leaves
and starts again; a connection that drops and comes back (its round comes
back, with no new confirmation); call bindings (the same call, another
call, one bound and one not); a stale HELLO replayed by a stranger; a relay
that hides one device from another (a split, after 5 seconds); wrong codes,
a sealed code that does not open, the lifetime, and arguments the binding
refuses.
"""

from __future__ import annotations

import hashlib
import json

import pytest

import itsme
from itsme import (
    AuthenticationFailedError,
    ExpiredError,
    InvalidArgumentError,
    InvalidKeyError,
    InvalidStateError,
    ItsMeError,
    LockedError,
    MalformedMessageError,
    RollCall,
    RollCallParticipant,
    RollCallPhase,
    RollCallState,
    VerificationState,
)
from test_degradation import make_person  # noqa: F401  (a fixture)
from test_protocol_vectors import lv_cat
from test_voice import T0, befriend, make_party, rng  # noqa: F401  (fixtures)

NOW = T0 + 500
HELLO, SAID, VIEW = 1, 2, 3
SIGNATURE = 64
# A HELLO of 32 presence tags (a store of up to 32 contacts).
HELLO_SIZE = 133 + 16 * 32


def view_size(k):
    return 138 + 32 * k + (k + 7) // 8


def listed(view):
    """The names a VIEW lists (20.3)."""
    return [view[74 + 32 * i : 106 + 32 * i] for i in range(view[73])]


class GroupRoom:
    """The relay's group room (15.9) in memory.  Slots are given in order
    from 1 (a device that reconnects gets a new one); a join is reported to
    the newcomer (``joined``, with the slots already there) and to the
    others (``peer_joined``), a leave to the others (``peer_left``).  Each
    message a device sends goes, in order, to every other one with its
    sender's slot (``log`` keeps every message taken, even one sent alone,
    which the relay refuses).  A refusal is recorded in ``refusals`` as
    (from slot, to slot, error) and the room goes on.

    ``hide(a, b)`` makes the relay lie: the devices of slots ``a`` and ``b``
    are never told of each other and get nothing of each other's.  A raw
    slot (``join(None)``) is a bare connection that knows only the meeting
    code: what it receives is kept in ``inbox``, and it sends what
    ``inject`` gives."""

    def __init__(self):
        self.members = {}  # slot -> RollCall, or None for a raw slot
        self.next_slot = 1
        self.hidden = set()
        self.log = []
        self.inbox = {}
        self.refusals = []

    def hide(self, a, b):
        self.hidden.add(frozenset((a, b)))

    def sees(self, a, b):
        return a != b and frozenset((a, b)) not in self.hidden

    def slot_of(self, call):
        return next(slot for slot, member in self.members.items() if member is call)

    def join(self, call, now=NOW):
        slot = self.next_slot
        self.next_slot += 1
        peers = [other for other in self.members if self.sees(other, slot)]
        for other in peers:
            if self.members[other] is not None:
                self.members[other].peer_joined(slot, now)
        self.members[slot] = call
        if call is None:
            self.inbox[slot] = []
        else:
            call.joined(slot, peers, now)
        self.pump(now)
        return slot

    def leave(self, slot, now=NOW):
        self.members.pop(slot)
        for other, call in self.members.items():
            if call is not None and self.sees(other, slot):
                call.peer_left(slot, now)
        self.pump(now)

    def send(self, slot, message, now, tamper=None):
        for other, call in list(self.members.items()):
            if not self.sees(other, slot):
                continue
            delivered = message if tamper is None else tamper(slot, other, message)
            if delivered is None:
                continue
            if call is None:
                self.inbox[other].append((slot, delivered))
                continue
            try:
                call.receive(delivered, slot, now)
            except ItsMeError as error:
                self.refusals.append((slot, other, error))

    def inject(self, slot, message, now=NOW):
        """A raw slot sends ``message``."""
        assert self.members[slot] is None
        self.send(slot, message, now)
        return self.pump(now)

    def pump(self, now=NOW, tamper=None):
        """Sends what every device has to send, until all are quiet;
        returns the refusals of this pump.  ``tamper(from, to, message)``
        may change a message on its way to one receiver, or drop it (None)."""
        first = len(self.refusals)
        moved = True
        while moved:
            moved = False
            for slot, call in list(self.members.items()):
                if call is None:
                    continue
                while message := call.next_outgoing():
                    moved = True
                    self.log.append((slot, message))
                    self.send(slot, message, now, tamper)
        return self.refusals[first:]

    def tick(self, now, tamper=None):
        """Each device's tick at ``now``, then the pump."""
        for call in self.members.values():
            if call is not None:
                call.tick(now)
        return self.pump(now, tamper)

    def run(self, first, last):
        """Ticks every second from ``first`` to ``last``; no refusals."""
        for now in range(first, last + 1):
            assert self.tick(now) == []

    def sent(self, slot, kind):
        return [message for s, message in self.log if s == slot and message[1] == kind]


class FramesRoom(GroupRoom):
    """The same room, speaking as the relay does (15.9): each device is
    handed its events as the relay's JSON text (``room_text``) and each
    message behind its sender's 2-byte slot (``room_binary``), as a host
    that parses nothing hands them over."""

    def join(self, call, now=NOW):
        slot = self.next_slot
        self.next_slot += 1
        peers = [other for other in self.members if self.sees(other, slot)]
        for other in peers:
            if self.members[other] is not None:
                self.members[other].room_text(json.dumps({"type": "peer-joined", "slot": slot}), now)
        self.members[slot] = call
        if call is None:
            self.inbox[slot] = []
        else:
            call.room_text(json.dumps({"type": "joined", "slot": slot, "peers": peers}).encode(), now)
        self.pump(now)
        return slot

    def leave(self, slot, now=NOW):
        self.members.pop(slot)
        for other, call in self.members.items():
            if call is not None and self.sees(other, slot):
                call.room_text(json.dumps({"type": "peer-left", "slot": slot}), now)
        self.pump(now)

    def send(self, slot, message, now, tamper=None):
        for other, call in list(self.members.items()):
            if not self.sees(other, slot) or call is None:
                continue
            try:
                call.room_binary(slot.to_bytes(2, "big") + message, now)
            except ItsMeError as error:
                self.refusals.append((slot, other, error))


@pytest.fixture
def calls():
    made = []
    yield made
    for call in made:
        call.close()


def start(party, calls, code, now=NOW, label=None, binding=None):
    random = None if label is None else rng(f"rc {label} {party.name}")
    call = RollCall(party.contacts, code, now, binding=binding, random=random)
    calls.append(call)
    return call


def index_of(call, contact_id):
    return next(p.index for p in call.participants if p.contact_id == contact_id)


def by_contact(call):
    """{contact id or None: [state, ...]} of the participants but this device."""
    seen = {}
    for p in call.participants[1:]:
        seen.setdefault(p.contact_id, []).append(p.state)
    return seen


def confirm_and_say(named, now=NOW):
    """Each confirms the roster it holds and says its code; returns the codes."""
    for call in named.values():
        call.confirm_roster(call.roster, now)
    codes = {name: call.code for name, call in named.items()}
    for call in named.values():
        call.confirm_said(now)
    return codes


# -- meeting codes -----------------------------------------------------------------------


def test_meeting_codes():
    code = itsme.new_meeting_code()
    assert len(code) == 9 and code[4] == "-"
    assert itsme.check_remote_code(code.lower().replace("-", " ")) == code
    assert itsme.new_meeting_code(random=rng("meeting")) == itsme.new_meeting_code(random=rng("meeting"))
    with pytest.raises(TypeError):
        itsme.new_meeting_code(random=b"not a source")  # type: ignore[arg-type]


def test_constants():
    assert itsme.ROLLCALL_MESSAGE_MAX == 32901 == itsme._ffi.lib.itsme_rollcall_message_max()
    assert itsme.ROLLCALL_ROSTER_BYTES == 32 == itsme._ffi.lib.itsme_rollcall_roster_bytes()
    assert itsme.CALL_BINDING_MIN == 16 == itsme._ffi.lib.itsme_call_binding_min()
    assert itsme.CALL_BINDING_MAX == 64 == itsme._ffi.lib.itsme_call_binding_max()
    assert not hasattr(itsme, "ROLLCALL_BINDING_MIN") and not hasattr(itsme, "ROLLCALL_BINDING_MAX"), "renamed"
    assert RollCallState.BINDING_DIFFERS == 8 and RollCallState.OTHER_CALL == 9


# -- a roll call of several people -----------------------------------------------------


@pytest.fixture
def four(make_person):
    """Ana knows Ben and Cai; Cai has since moved to a new device (which
    holds no device secret); Ben and Cai do not know each other; Dee knows
    no one.  Returns the parties and {(owner, peer): contact id}."""
    ana, ben, cai, dee = (make_person(name) for name in ("Ana", "Ben", "Cai", "Dee"))
    ids = {}
    befriend(ana.party, ben.party)
    ids["Ana", "Ben"], ids["Ben", "Ana"] = ana.party.peer, ben.party.peer
    befriend(ana.party, cai.party)
    ids["Ana", "Cai"], ids["Cai", "Ana"] = ana.party.peer, cai.party.peer
    new_cai = make_person.move(cai)
    return {"Ana": ana.party, "Ben": ben.party, "Cai": new_cai.party, "Dee": dee.party}, ids


def test_a_roll_call_of_four_verified_device_changed_tag_unchecked_unknown(four, calls):
    people, ids = four
    code = itsme.new_meeting_code()
    call = {name: start(party, calls, code.lower() if name == "Ana" else code) for name, party in people.items()}
    assert len({c.room for c in call.values()}) == 1 and all(len(c.room) == 32 for c in call.values())
    for c in call.values():
        assert c.next_outgoing() == b"", "nothing is queued before joined"
        assert c.head_count == 1 and not c.split
    room = GroupRoom()
    for name in ("Ana", "Ben", "Cai", "Dee"):
        room.join(call[name])
    assert room.refusals == []
    # Ana joined alone: her HELLO and VIEW went nowhere; then each sent
    # its HELLO again for each newcomer.
    assert [len(m) for m in room.sent(1, HELLO)] == [HELLO_SIZE] * 4
    assert len(room.sent(1, VIEW)[0]) == view_size(1)
    # Within a second, each one's due VIEW says it holds the same roster.
    room.run(NOW + 1, NOW + 1)
    assert len({c.roster for c in call.values()}) == 1
    for c in call.values():
        assert c.phase == RollCallPhase.GATHERING
        assert c.head_count == 4 and len(c.participants) == 4
        assert c.participants[0] == RollCallParticipant(0, None, None, RollCallState.UNKNOWN, False, True)
        assert all(p.agrees and not p.left for p in c.participants)
        assert {p.slot for p in c.participants[1:]} == {1, 2, 3, 4} - {room.slot_of(c)}
        assert not c.split
    assert by_contact(call["Ana"]) == {
        ids["Ana", "Ben"]: [RollCallState.NOT_YET],
        ids["Ana", "Cai"]: [RollCallState.NOT_YET],
        None: [RollCallState.UNKNOWN],
    }
    assert by_contact(call["Ben"]) == {ids["Ben", "Ana"]: [RollCallState.NOT_YET], None: [RollCallState.UNKNOWN] * 2}
    assert by_contact(call["Cai"]) == {ids["Cai", "Ana"]: [RollCallState.NOT_YET], None: [RollCallState.UNKNOWN] * 2}
    assert by_contact(call["Dee"]) == {None: [RollCallState.UNKNOWN] * 3}

    codes = confirm_and_say(call, NOW + 1)
    for c in call.values():
        assert c.phase == RollCallPhase.SAID
        word, digits = c.code.split(" ")
        assert word in itsme.NATO_WORDS and len(digits) == 3
    assert room.pump(NOW + 1) == []
    for slot in (1, 2, 3, 4):
        [said] = room.sent(slot, SAID)
        assert len(said) == 131 + 50 * 3
    heard = {}
    for listener, speaker in (("Ana", "Ben"), ("Ana", "Cai"), ("Ben", "Ana"), ("Cai", "Ana")):
        c = call[listener]
        heard[listener, speaker] = c.enter_heard(index_of(c, ids[listener, speaker]), codes[speaker].lower(), NOW + 2)
    assert heard == {
        ("Ana", "Ben"): RollCallState.VERIFIED,
        ("Ana", "Cai"): RollCallState.DEVICE_CHANGED,
        ("Ben", "Ana"): RollCallState.VERIFIED,
        ("Cai", "Ana"): RollCallState.VERIFIED_TAG_UNCHECKED,
    }
    assert call["Ana"].participant(index_of(call["Ana"], ids["Ana", "Cai"])).state == RollCallState.DEVICE_CHANGED
    # Each outcome is recorded on its contact.
    assert people["Ana"].contacts.get(ids["Ana", "Ben"]).state == VerificationState.VERIFIED
    assert people["Ben"].contacts.get(ids["Ben", "Ana"]).state == VerificationState.VERIFIED
    cai_at_ana = people["Ana"].contacts.get(ids["Ana", "Cai"])
    assert (cai_at_ana.state, cai_at_ana.acknowledged) == (VerificationState.DEGRADED, False)
    # Nothing to check a stranger's code against; a check is made once.
    dee_at_ana = next(p.index for p in call["Ana"].participants[1:] if p.contact_id is None)
    with pytest.raises(InvalidStateError):
        call["Ana"].enter_heard(dee_at_ana, codes["Dee"], NOW + 2)
    with pytest.raises(InvalidStateError):
        call["Ana"].enter_heard(index_of(call["Ana"], ids["Ana", "Ben"]), codes["Ben"], NOW + 2)
    with pytest.raises(InvalidArgumentError):
        call["Ana"].enter_heard(0, codes["Ana"], NOW + 2)
    # The VIEWs of the next tick say who holds whose SAID (what went out
    # 2 seconds after the roster changed goes out again with them): then all
    # is settled, and nothing more is sent.
    room.run(NOW + 2, NOW + 2)
    for slot in (1, 2, 3, 4):
        last = room.sent(slot, VIEW)[-1]
        assert last[72] == 1, "its SAID went out"
        assert bin(last[74 + 32 * 4]).count("1") == 3, "it holds the three others' SAIDs"
    settled = len(room.log)
    room.run(NOW + 3, NOW + 30)
    assert len(room.log) == settled


def test_a_late_joiner_starts_a_new_round(four, calls):
    people, ids = four
    code = itsme.new_meeting_code()
    call = {name: start(people[name], calls, code) for name in ("Ana", "Ben")}
    room = GroupRoom()
    for name in call:
        room.join(call[name])
    room.run(NOW + 1, NOW + 1)
    first_roster = call["Ana"].roster
    codes = confirm_and_say(call, NOW + 1)
    assert room.pump(NOW + 1) == []
    ana_ben = index_of(call["Ana"], ids["Ana", "Ben"])
    assert call["Ana"].enter_heard(ana_ben, codes["Ben"], NOW + 2) == RollCallState.VERIFIED

    # Cai joins late: a new round for everyone; the check made stays.
    call["Cai"] = start(people["Cai"], calls, code)
    room.join(call["Cai"], NOW + 3)
    room.run(NOW + 4, NOW + 4)
    assert room.refusals == []
    for c in call.values():
        assert c.phase == RollCallPhase.GATHERING
        assert c.head_count == 3 and len(c.participants) == 3
        assert c.roster != first_roster
        with pytest.raises(InvalidStateError):
            _ = c.code
    assert call["Ana"].participant(ana_ben).state == RollCallState.VERIFIED
    ben_ana = index_of(call["Ben"], ids["Ben", "Ana"])
    assert call["Ben"].participant(ben_ana).state == RollCallState.NOT_YET
    with pytest.raises(InvalidStateError):
        call["Ben"].enter_heard(ben_ana, codes["Ana"], NOW + 4)  # the new roster is not confirmed
    with pytest.raises(InvalidStateError):
        call["Ana"].confirm_roster(first_roster, NOW + 4)  # the list shown then is not the list now
    codes = confirm_and_say(call, NOW + 4)
    assert room.pump(NOW + 4) == []
    assert call["Ben"].enter_heard(ben_ana, codes["Ana"], NOW + 5) == RollCallState.VERIFIED
    ana_cai = index_of(call["Ana"], ids["Ana", "Cai"])
    assert call["Ana"].enter_heard(ana_cai, codes["Cai"], NOW + 5) == RollCallState.DEVICE_CHANGED
    cai_ana = index_of(call["Cai"], ids["Cai", "Ana"])
    assert call["Cai"].enter_heard(cai_ana, codes["Ana"], NOW + 5) == RollCallState.VERIFIED_TAG_UNCHECKED


# -- leaving, rejoining, restarting -------------------------------------------------------


def test_leave_then_join_again_as_a_new_participant(four, calls):
    people, ids = four
    code = itsme.new_meeting_code()
    ana, ben = start(people["Ana"], calls, code), start(people["Ben"], calls, code)
    room = GroupRoom()
    room.join(ana)
    ben_slot = room.join(ben)
    room.run(NOW + 1, NOW + 1)
    codes = confirm_and_say({"Ana": ana, "Ben": ben}, NOW + 1)
    room.pump(NOW + 1)
    ana_ben = index_of(ana, ids["Ana", "Ben"])
    assert ana.enter_heard(ana_ben, codes["Ben"], NOW + 2) == RollCallState.VERIFIED

    # Ben leaves (his application stops): no longer present, still verified.
    room.leave(ben_slot, NOW + 3)
    ben.close()
    assert ana.head_count == 1 and len(ana.participants) == 2
    gone = ana.participant(ana_ben)
    assert gone.left and gone.state == RollCallState.VERIFIED and gone.slot == ben_slot
    assert ana.phase == RollCallPhase.GATHERING
    with pytest.raises(InvalidStateError):
        ana.confirm_roster(ana.roster, NOW + 3)  # alone
    with pytest.raises(InvalidStateError):
        ana.enter_heard(ana_ben, codes["Ben"], NOW + 3)

    # He starts again: a new participant (a new roll-call key), checked again.
    ben = start(people["Ben"], calls, code, NOW + 4)
    new_slot = room.join(ben, NOW + 4)
    room.run(NOW + 5, NOW + 5)
    assert room.refusals == []
    assert ana.head_count == 2 and len(ana.participants) == 3
    old, new = ana.participants[1:]
    assert (old.contact_id, old.left, old.state) == (ids["Ana", "Ben"], True, RollCallState.VERIFIED)
    assert (new.contact_id, new.left, new.state, new.slot) == (ids["Ana", "Ben"], False, RollCallState.NOT_YET, new_slot)
    with pytest.raises(InvalidStateError):
        ana.enter_heard(old.index, codes["Ben"], NOW + 5)  # not present
    codes = confirm_and_say({"Ana": ana, "Ben": ben}, NOW + 5)
    room.pump(NOW + 5)
    assert ana.enter_heard(new.index, codes["Ben"], NOW + 6) == RollCallState.VERIFIED
    assert ben.enter_heard(index_of(ben, ids["Ben", "Ana"]), codes["Ana"], NOW + 6) == RollCallState.VERIFIED


def test_a_dropped_connection_that_comes_back_brings_its_round_back(four, calls):
    people, ids = four
    code = itsme.new_meeting_code()
    call = {name: start(people[name], calls, code) for name in ("Ana", "Ben", "Cai")}
    room = GroupRoom()
    for name in call:
        room.join(call[name])
    room.run(NOW + 1, NOW + 1)
    roster = call["Ana"].roster
    codes = confirm_and_say(call, NOW + 1)
    assert room.pump(NOW + 1) == []
    ana_cai = index_of(call["Ana"], ids["Ana", "Cai"])
    assert call["Ana"].enter_heard(ana_cai, codes["Cai"], NOW + 2) == RollCallState.DEVICE_CHANGED
    ana_ben = index_of(call["Ana"], ids["Ana", "Ben"])

    # Ben's connection drops: for the others he is gone, a new round.
    room.leave(room.slot_of(call["Ben"]), NOW + 3)
    for name in ("Ana", "Cai"):
        assert call[name].head_count == 2
        assert call[name].phase == RollCallPhase.GATHERING
        assert call[name].roster != roster
    assert call["Ana"].participant(ana_ben).left
    with pytest.raises(InvalidStateError):
        call["Ana"].enter_heard(ana_ben, codes["Ben"], NOW + 3)

    # It comes back: the same roll call joined again, under a new slot.
    new_slot = room.join(call["Ben"], NOW + 4)
    assert new_slot == 4
    room.run(NOW + 5, NOW + 6)
    assert room.refusals == []
    for name, c in call.items():
        assert c.roster == roster, name
        assert c.phase == RollCallPhase.SAID, "the round came back, confirmed and said"
        assert c.code == codes[name]
        assert c.head_count == 3 and len(c.participants) == 3
        assert all(p.agrees and not p.left for p in c.participants)
    back = call["Ana"].participant(ana_ben)
    assert (back.index, back.slot, back.contact_id, back.left) == (ana_ben, new_slot, ids["Ana", "Ben"], False)
    # Ben's SAID of the round came back with it: no new confirmation, no new code.
    assert call["Ana"].enter_heard(ana_ben, codes["Ben"], NOW + 7) == RollCallState.VERIFIED
    assert call["Ana"].participant(ana_cai).state == RollCallState.DEVICE_CHANGED


# -- the call binding ----------------------------------------------------------------


def test_bindings_the_same_call_another_call_and_one_not_bound(four, calls):
    people, ids = four
    # Dee becomes Ana's contact too, to show a contact whose binding differs.
    befriend(people["Ana"], people["Dee"])
    ids["Ana", "Dee"] = people["Ana"].peer
    code = itsme.new_meeting_code()
    ours, theirs = hashlib.sha256(b"our call").digest(), bytearray(hashlib.sha256(b"another call").digest())
    call = {
        "Ana": start(people["Ana"], calls, code, binding=ours),
        "Ben": start(people["Ben"], calls, code, binding=memoryview(ours)),
        "Cai": start(people["Cai"], calls, code, binding=theirs),
        "Dee": start(people["Dee"], calls, code),
    }
    room = GroupRoom()
    for name in call:
        room.join(call[name])
    room.run(NOW + 1, NOW + 1)
    assert room.refusals == []
    # Everyone is in the roster, bound or not; only those of one call check each other.
    assert len({c.roster for c in call.values()}) == 1
    assert all(c.head_count == 4 for c in call.values())

    def names_and_states(name):
        c = call[name]
        slots = {room.slot_of(call[other]): other for other in call}
        return [(slots[p.slot], p.state) for p in c.participants[1:]]

    assert dict(names_and_states("Ana")) == {
        "Ben": RollCallState.NOT_YET,
        "Cai": RollCallState.OTHER_CALL,
        "Dee": RollCallState.BINDING_DIFFERS,
    }
    assert dict(names_and_states("Cai")) == {
        "Ana": RollCallState.OTHER_CALL,
        "Ben": RollCallState.OTHER_CALL,
        "Dee": RollCallState.BINDING_DIFFERS,
    }
    assert set(dict(names_and_states("Dee")).values()) == {RollCallState.BINDING_DIFFERS}
    assert dict(names_and_states("Ben"))["Ana"] == RollCallState.NOT_YET
    # A contact in another call, or bound differently, is not shown as the contact.
    assert [p.contact_id for p in call["Ana"].participants[1:] if p.state != RollCallState.NOT_YET] == [None, None]
    codes = confirm_and_say(call, NOW + 1)
    assert room.pump(NOW + 1) == []
    assert call["Ana"].enter_heard(index_of(call["Ana"], ids["Ana", "Ben"]), codes["Ben"], NOW + 2) == (
        RollCallState.VERIFIED
    )
    assert call["Ben"].enter_heard(index_of(call["Ben"], ids["Ben", "Ana"]), codes["Ana"], NOW + 2) == (
        RollCallState.VERIFIED
    )
    for other in ("Cai", "Dee"):
        index = next(p.index for p in call["Ana"].participants if p.slot == room.slot_of(call[other]))
        with pytest.raises(InvalidStateError):
            call["Ana"].enter_heard(index, codes[other], NOW + 2)
    # The binding's length is checked.
    for bad in (b"", bytes(itsme.CALL_BINDING_MIN - 1), bytes(itsme.CALL_BINDING_MAX + 1)):
        with pytest.raises(InvalidArgumentError, match=f"16 to 64 bytes, not {len(bad)}"):
            RollCall(people["Ana"].contacts, code, NOW, binding=bad)
    with pytest.raises(TypeError):
        RollCall(people["Ana"].contacts, code, NOW, binding="our call, 16+ chars")  # type: ignore[arg-type]
    RollCall(people["Ana"].contacts, code, NOW, binding=bytes(16)).close()
    RollCall(people["Ana"].contacts, code, NOW, binding=bytes(64)).close()


# -- what a stranger or the relay can do -------------------------------------------------


def test_a_stale_hello_never_makes_anyone_present(four, calls):
    people, ids = four
    code = itsme.new_meeting_code()
    # An earlier roll call with the same meeting code: Ben's HELLO and VIEW.
    old = GroupRoom()
    old.join(start(people["Ana"], calls, code, NOW - 200), NOW - 200)
    old_ben = start(people["Ben"], calls, code, NOW - 200)
    old.join(old_ben, NOW - 200)
    old_hello, old_view = old.sent(2, HELLO)[0], old.sent(2, VIEW)[-1]
    assert old.members[1].head_count == 2

    ana = start(people["Ana"], calls, code)
    room = GroupRoom()
    room.join(ana)
    stranger = room.join(None)
    assert stranger == 2 and [m[1] for _, m in room.inbox[stranger]] == [HELLO]
    # The stranger replays them from its own slot (the slot Ben had then).
    assert room.inject(stranger, old_hello) == []
    assert room.inject(stranger, old_view) == []
    assert room.refusals == []
    for now in range(NOW + 1, NOW + 12):
        assert room.tick(now) == []
        assert ana.head_count == 1 and len(ana.participants) == 1
        assert not ana.split
        with pytest.raises(InvalidStateError):
            ana.confirm_roster(ana.roster, now)
    # Ana's VIEWs listed the held HELLO (its bringer is in the room); she
    # sent her HELLO again for the one whose VIEW did not list her.
    assert len(listed(room.sent(1, VIEW)[-1])) == 2
    assert len(room.sent(1, HELLO)) >= 3
    # The real Ben, in this roll call, is present at once.
    ben = start(people["Ben"], calls, code, NOW + 12)
    room.join(ben, NOW + 12)
    room.run(NOW + 13, NOW + 13)
    assert room.refusals == []
    assert ana.head_count == 2 and len(ana.participants) == 2
    assert ana.participants[1].contact_id == ids["Ana", "Ben"] and ana.participants[1].slot == 3
    assert len(listed(room.sent(1, VIEW)[-1])) == 3, "Ana, the stale HELLO still held, Ben"
    # The stranger leaves: the pending HELLO it brought is forgotten.
    room.leave(stranger, NOW + 14)
    assert len(listed(room.sent(1, VIEW)[-1])) == 2
    assert ana.head_count == 2


def test_a_relay_that_hides_one_device_from_another_shows_a_split(four, calls):
    people, _ = four
    code = itsme.new_meeting_code()
    call = {name: start(people[name], calls, code) for name in ("Ana", "Ben", "Cai")}
    room = GroupRoom()
    room.hide(1, 3)  # Ana's and Cai's slots
    for name in call:
        room.join(call[name])
    assert room.refusals == []
    room.run(NOW + 1, NOW + 4)
    assert [call[name].head_count for name in call] == [2, 3, 2]
    assert all(not c.split for c in call.values()), "not before 5 seconds"
    # Each sees the others' VIEWs: Ana and Cai do not agree with Ben.
    assert [p.agrees for p in call["Ana"].participants[1:]] == [False]
    assert [p.agrees for p in call["Ben"].participants[1:]] == [False, False]
    room.run(NOW + 5, NOW + 5)
    assert all(c.split for c in call.values())
    room.run(NOW + 6, NOW + 20)
    assert all(c.split for c in call.values()), "a split that stays"


def test_an_honest_room_shows_no_split(four, calls):
    people, _ = four
    code = itsme.new_meeting_code()
    call = {name: start(people[name], calls, code) for name in ("Ana", "Ben", "Cai")}
    room = GroupRoom()
    for name in call:
        room.join(call[name])
    room.run(NOW + 1, NOW + 20)
    assert room.refusals == []
    for c in call.values():
        assert c.head_count == 3 and not c.split
        assert all(p.agrees for p in c.participants)


# -- codes: wrong, locked, a sealed code that does not open -----------------------------


def test_wrong_codes_lock_a_round_until_the_next(four, calls):
    people, ids = four
    code = itsme.new_meeting_code()
    call = {name: start(people[name], calls, code) for name in ("Ana", "Ben")}
    room = GroupRoom()
    for name in call:
        room.join(call[name])
    room.run(NOW + 1, NOW + 1)
    codes = confirm_and_say(call, NOW + 1)
    ana_ben = index_of(call["Ana"], ids["Ana", "Ben"])
    wrong = "ALFA 001" if codes["Ben"] == "ALFA 000" else "ALFA 000"
    # Typed before the SAID arrives: kept, not compared.
    assert call["Ana"].enter_heard(ana_ben, wrong, NOW + 1) == RollCallState.NOT_YET
    assert room.pump(NOW + 1) == []
    assert call["Ana"].participant(ana_ben).state == RollCallState.WRONG
    for _ in range(2):
        assert call["Ana"].enter_heard(ana_ben, wrong, NOW + 2) == RollCallState.WRONG
    with pytest.raises(LockedError):
        call["Ana"].enter_heard(ana_ben, codes["Ben"], NOW + 2)
    # A new round (Dee joins) shows not yet, and takes codes again.
    call["Dee"] = start(people["Dee"], calls, code)
    room.join(call["Dee"], NOW + 3)
    room.run(NOW + 4, NOW + 4)
    assert call["Ana"].participant(ana_ben).state == RollCallState.NOT_YET
    codes = confirm_and_say(call, NOW + 4)
    assert room.pump(NOW + 4) == []
    assert call["Ana"].enter_heard(ana_ben, codes["Ben"], NOW + 5) == RollCallState.VERIFIED


def test_a_signed_sealed_code_that_does_not_open_is_refused(four, calls):
    """A SAID signed by its speaker whose entry for a listener does not open
    (what a device that sealed for another would send): the listener shows
    the speaker refused for the round, neither verified nor wrong.  Ana's
    roll-call key is the first 32 bytes her deterministic source draws
    (libsodium's randombytes_buf_deterministic: ChaCha20 under the seed,
    nonce "LibsodiumDRG")."""
    ed25519 = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    ciphers = pytest.importorskip("cryptography.hazmat.primitives.ciphers")
    people, ids = four
    code = itsme.new_meeting_code()
    label = "forged"
    call = {name: start(people[name], calls, code, label=label) for name in ("Ana", "Ben")}
    seed = hashlib.sha256(f"rc {label} Ana".encode()).digest()
    stream = ciphers.Cipher(ciphers.algorithms.ChaCha20(seed, bytes(4) + b"LibsodiumDRG"), None).encryptor()
    key = ed25519.Ed25519PrivateKey.from_private_bytes(stream.update(bytes(32)))
    canonical = code.replace("-", "").encode()
    rcid = hashlib.sha256(lv_cat(b"itsme-rollcall-v2", canonical)).digest()

    def forge(sender, receiver, message):
        if sender != 1 or message[1] != SAID:
            return message
        body = bytearray(message[:-SIGNATURE])
        body[67 + 10] ^= 1  # Ben's entry, the only one
        return bytes(body) + key.sign(lv_cat(b"itsme-rc-sign-v2", rcid, bytes(body)))

    room = GroupRoom()
    for name in call:
        room.join(call[name])
    assert room.sent(1, HELLO)[0][3:35] == key.public_key().public_bytes_raw(), "Ana's roll-call key"
    room.run(NOW + 1, NOW + 1)
    codes = confirm_and_say(call, NOW + 1)
    ben_ana = index_of(call["Ben"], ids["Ben", "Ana"])
    assert call["Ben"].enter_heard(ben_ana, codes["Ana"], NOW + 1) == RollCallState.NOT_YET
    refusals = room.pump(NOW + 1, tamper=forge)
    assert [(s, r, type(e)) for s, r, e in refusals] == [(1, 2, AuthenticationFailedError)]
    assert call["Ben"].participant(ben_ana).state == RollCallState.REFUSED
    # Typed again, the code finds no sealed code of this round left; the
    # real SAID, a second one from Ana in the round, is refused.
    # Refused for the round: typing again is refused too (PROTOCOL.md 20.5).
    with pytest.raises(itsme.InvalidStateError):
        call["Ben"].enter_heard(ben_ana, codes["Ana"], NOW + 2)
    assert call["Ben"].participant(ben_ana).state == RollCallState.REFUSED
    with pytest.raises(MalformedMessageError):
        call["Ben"].receive(room.sent(1, SAID)[0], 1, NOW + 2)
    # Ana is not affected: Ben's SAID opens for her.
    assert call["Ana"].enter_heard(index_of(call["Ana"], ids["Ana", "Ben"]), codes["Ben"], NOW + 2) == (
        RollCallState.VERIFIED
    )


# -- refusals and arguments ------------------------------------------------------------


def test_messages_refused_change_nothing(four, calls):
    people, ids = four
    code = itsme.new_meeting_code(random=rng("refusals"))
    a = start(people["Ana"], calls, code, label="refusals")
    b = start(people["Ben"], calls, code, label="refusals")
    a.joined(1, [], NOW)
    hello_a, view_a = a.next_outgoing(), a.next_outgoing()
    assert (len(hello_a), hello_a[:2]) == (HELLO_SIZE, bytes([2, HELLO]))
    assert (len(view_a), view_a[:2], a.next_outgoing()) == (view_size(1), bytes([2, VIEW]), b"")
    b.joined(2, [1], NOW)
    hello_b = b.next_outgoing()
    assert b.next_outgoing() == b"", "its VIEW waits for the HELLO of slot 1 (20.6, rule 4)..."
    b.tick(NOW)
    view_b = b.next_outgoing()  # ...or for the tick
    assert view_b[1] == VIEW and len(listed(view_b)) == 1
    c = start(people["Cai"], calls, code, label="refusals")
    c.joined(3, [], NOW)
    hello_c = c.next_outgoing()
    a.peer_joined(2, NOW)
    assert a.next_outgoing() == hello_a, "the same HELLO every time"
    for garbage in (b"", b"\x02", b"\x02\x09", b"\x01\x01" + hello_b[2:], hello_b[:-1], b"hello, roll call"):
        with pytest.raises(MalformedMessageError):
            a.receive(garbage, 2, NOW)
    with pytest.raises(AuthenticationFailedError):
        a.receive(hello_b[:100] + bytes([hello_b[100] ^ 1]) + hello_b[101:], 2, NOW)
    with pytest.raises(InvalidKeyError):
        a.receive(hello_a, 2, NOW)  # its own HELLO, reflected
    with pytest.raises(InvalidStateError):
        a.receive(view_b, 2, NOW)  # a VIEW before its sender's HELLO
    assert len(a.participants) == 1 and a.phase == RollCallPhase.GATHERING and a.head_count == 1
    a.receive(hello_b, 2, NOW)
    a.receive(hello_b, 2, NOW)  # a repeat: ignored
    with pytest.raises(MalformedMessageError):
        a.receive(hello_c, 2, NOW)  # another HELLO from slot 2
    with pytest.raises(AuthenticationFailedError):
        a.receive(hello_b[:-16] + b"\xff" * 16, 2, NOW)  # its signature broken
    with pytest.raises(InvalidStateError):
        a.receive(view_b, 3, NOW)  # carried by another slot than its own
    assert a.head_count == 1, "held, not present: Ben's VIEW did not list Ana"
    a.receive(view_b, 2, NOW)
    assert a.head_count == 1
    b.receive(hello_a, 1, NOW)
    b.receive(view_a, 1, NOW)
    view_b2 = b.next_outgoing()
    assert view_b2[1] == VIEW and len(listed(view_b2)) == 2
    a.receive(view_b2, 2, NOW)
    a.receive(view_b, 2, NOW)  # an older VIEW: ignored
    assert a.head_count == 2 and a.participants[1].contact_id == ids["Ana", "Ben"]
    with pytest.raises(InvalidStateError):
        _ = a.code
    with pytest.raises(InvalidStateError):
        a.confirm_said(NOW)
    with pytest.raises(InvalidStateError):
        a.enter_heard(1, "ECHO 042", NOW)
    roster = a.roster
    with pytest.raises(InvalidArgumentError):
        a.confirm_roster(roster[:31], NOW)
    with pytest.raises(InvalidStateError):
        a.confirm_roster(bytes(32), NOW)
    a.confirm_roster(bytearray(roster), NOW, random=rng("code"))
    assert a.phase == RollCallPhase.CONFIRMED
    with pytest.raises(InvalidStateError):
        a.confirm_roster(roster, NOW)
    for bad in ("ECHO 42", "ECHO 0042", "", "NOPE 042", "ECHO\0042"):
        with pytest.raises(InvalidArgumentError):
            a.enter_heard(1, bad, NOW)
    for index in (0, 2, 2**64 - 1, -1, 2**64):
        with pytest.raises(InvalidArgumentError):
            a.enter_heard(index, "ECHO 042", NOW)
    for index in (2, -1):
        with pytest.raises(InvalidArgumentError):
            a.participant(index)
    a.confirm_said(NOW)
    queued = []
    while message := a.next_outgoing():
        queued.append(message)
    [said] = [m for m in queued if m[1] == SAID]
    assert len(said) == 131 + 50
    with pytest.raises(InvalidStateError):
        a.confirm_said(NOW)
    with pytest.raises(InvalidKeyError):
        a.receive(said, 2, NOW)  # reflected
    with pytest.raises(InvalidStateError):
        b.receive(said, 1, NOW)  # Ana is not present for Ben: no VIEW of hers lists him
    # Expiry: 10 minutes after the start, and for good.
    with pytest.raises(ExpiredError):
        a.receive(hello_b, 2, NOW + 601)
    assert a.phase == RollCallPhase.EXPIRED
    for late in (lambda: a.tick(NOW + 1), lambda: a.enter_heard(1, "ECHO 042", NOW + 1), lambda: a.joined(5, [], NOW)):
        with pytest.raises(ExpiredError):
            late()
    with pytest.raises(InvalidStateError):
        _ = a.code
    # A clock set back more than 30 seconds ends it too.
    with pytest.raises(ExpiredError):
        b.tick(NOW - 31)
    assert b.phase == RollCallPhase.EXPIRED


def test_arguments(four, calls):
    people, _ = four
    code = itsme.new_meeting_code()
    with pytest.raises(InvalidArgumentError) as caught:
        RollCall(people["Ana"].contacts, code[:-1] + ("A" if code[-1] != "A" else "B"), NOW)
    assert "typo" in caught.value.detail
    with pytest.raises(TypeError):
        RollCall(b"not a store", code, NOW)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RollCall(people["Ana"].contacts, b"ABCD-EFGH", NOW)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        RollCall(people["Ana"].contacts, code, 2**63)
    with pytest.raises(InvalidArgumentError):
        RollCall(people["Ana"].contacts, code, -1)
    with pytest.raises(TypeError):
        RollCall(people["Ana"].contacts, code, NOW, bytes(32))  # type: ignore[misc]  # binding is keyword-only
    a = start(people["Ana"], calls, code)
    # Before joined nothing is queued, and the events are taken.
    a.tick(NOW)
    a.peer_joined(7, NOW)
    assert a.next_outgoing() == b""
    for slot in (0, 65536, -1):
        with pytest.raises(InvalidArgumentError):
            a.joined(slot, [], NOW)
        with pytest.raises(InvalidArgumentError):
            a.joined(1, [2, slot], NOW)
        with pytest.raises(InvalidArgumentError):
            a.receive(b"\x02\x01", slot, NOW)
        with pytest.raises(InvalidArgumentError):
            a.peer_joined(slot, NOW)
        with pytest.raises(InvalidArgumentError):
            a.peer_left(slot, NOW)
    for peers in (b"\x00\x02", "2", 2, None, ["2"], [2.0]):
        with pytest.raises(TypeError):
            a.joined(1, peers, NOW)  # type: ignore[arg-type]
    for slot in ("1", 1.0, None):
        with pytest.raises(TypeError):
            a.peer_joined(slot, NOW)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        a.receive("not bytes", 2, NOW)  # type: ignore[arg-type]
    for now in (-1, 2**63, 253402300800):
        with pytest.raises(InvalidArgumentError):
            a.tick(now)
        with pytest.raises(InvalidArgumentError):
            a.joined(1, [], now)
        with pytest.raises(InvalidArgumentError):
            a.peer_left(2, now)
    with pytest.raises(TypeError):
        a.confirm_roster("not bytes", NOW)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        a.enter_heard(1, b"ECHO 042", NOW)  # type: ignore[arg-type]
    assert a.next_outgoing() == b"" and a.head_count == 1, "nothing changed"
    # Joined: the slots as a generator, a tuple or a list.
    a.joined(1, (slot for slot in [2, 3]), NOW)
    assert a.next_outgoing()[1] == HELLO and a.next_outgoing() == b"", "its VIEW waits for the HELLOs of 2 and 3"
    a.tick(NOW)
    assert a.next_outgoing()[1] == VIEW
    a.joined(4, (2, 3), NOW + 1)  # after a reconnection
    assert a.next_outgoing()[1] == HELLO
    assert a.phase == RollCallPhase.GATHERING and not a.split


def test_the_roll_call_outlives_its_store_handle_and_closes(four, calls, tmp_path):
    people, ids = four
    code = itsme.new_meeting_code()
    # A store handle of Ana's own, closed while the roll call goes on.
    ana = people["Ana"]
    path = tmp_path / "ana-own.db"
    contacts = itsme.ContactStore.open(ana.identity, path)
    ben_id = contacts.add("Ben", people["Ben"].identity.public_key, bytes(range(32)), now=T0)
    people["Ben"].contacts.delete(ids["Ben", "Ana"])
    ana_id = people["Ben"].contacts.add("Ana", ana.identity.public_key, bytes(range(32)), now=T0)
    a = RollCall(contacts, code, NOW)
    assert a.store is contacts
    b = start(people["Ben"], calls, code)
    contacts.close()
    room = GroupRoom()
    room.join(a)
    room.join(b)
    room.run(NOW + 1, NOW + 1)
    codes = confirm_and_say({"Ana": a, "Ben": b}, NOW + 1)
    room.pump(NOW + 1)
    assert a.enter_heard(1, codes["Ben"], NOW + 2) == RollCallState.VERIFIED_TAG_UNCHECKED
    assert b.enter_heard(index_of(b, ana_id), codes["Ana"], NOW + 2) == RollCallState.VERIFIED_TAG_UNCHECKED
    assert "RollCall participants=2 SAID" in repr(a)
    a.close()
    a.close()
    assert repr(a) == "<RollCall closed>"
    for closed in (a.next_outgoing, lambda: a.tick(NOW), lambda: a.head_count, lambda: a.split):
        with pytest.raises(ValueError):
            closed()
    with itsme.ContactStore.open(ana.identity, path) as again:
        assert again.get(ben_id).state == VerificationState.VERIFIED
    assert b.last_error() == ""


def test_a_host_that_hands_over_the_rooms_frames_as_they_came(four, calls):
    """The group room's frames as the relay sent them: the core reads the
    events and the slots; what no group room sends is refused and changes
    nothing."""
    people, ids = four
    code = itsme.new_meeting_code()
    call = {name: start(people[name], calls, code) for name in ("Ana", "Ben", "Dee")}
    room = FramesRoom()
    for name in ("Ana", "Ben", "Dee"):
        room.join(call[name])
    room.run(NOW + 1, NOW + 1)
    assert room.refusals == []
    assert len({c.roster for c in call.values()}) == 1
    ben = call["Ben"]
    roster, shown = ben.roster, ben.participants
    for junk in (b"hello", b'{"type":"peer-joined"}', b'{"type":"waiting"}', b'{"type":"peer-left","slot":70000}'):
        with pytest.raises(MalformedMessageError):
            ben.room_text(junk, NOW + 1)
    for frame in (b"", b"\x00"):
        with pytest.raises(MalformedMessageError):
            ben.room_binary(frame, NOW + 1)
    ben.room_text(b'{"type":"refused","reason":"no-peer"}', NOW + 1)
    ben.room_text(b'{"type":"a-later-event"}', NOW + 1)
    assert (ben.roster, ben.participants, ben.next_outgoing()) == (roster, shown, b"")
    # A message goes to receive with its slot: one that is not a roll
    # call's message is refused as receive refuses it.
    with pytest.raises(MalformedMessageError):
        ben.room_binary((3).to_bytes(2, "big") + b"\x09junk", NOW + 1)
    codes = confirm_and_say(call, NOW + 1)
    assert room.pump(NOW + 1) == []
    for listener, speaker in (("Ana", "Ben"), ("Ben", "Ana")):
        c = call[listener]
        assert c.enter_heard(index_of(c, ids[listener, speaker]), codes[speaker], NOW + 2) == RollCallState.VERIFIED
    room.leave(room.slot_of(call["Dee"]), NOW + 2)
    assert call["Ana"].head_count == 2

