"""The roll call through the Python binding (docs/PROTOCOL.md section 20):
three people who exchanged by QR, and a fourth who is no one's contact,
meet in a relay group room (here an in-memory one that prefixes each
message with its sender's slot, as the relay does).  Each confirms the
roster, reads a code aloud, and types what each contact said.  A late
joiner's new round, wrong and locked codes, a tampered code, garbage, the
lifetime, and calls in the wrong state.
"""

from __future__ import annotations

import pytest

import itsme
from itsme import (
    AuthenticationFailedError,
    ExpiredError,
    InvalidArgumentError,
    InvalidKeyError,
    InvalidStateError,
    LockedError,
    MalformedMessageError,
    RollCall,
    RollCallParticipant,
    RollCallPhase,
    RollCallState,
    VerificationState,
)
from test_voice import T0, befriend, make_party, rng  # noqa: F401  (fixtures)

NOW = T0 + 500


class GroupRoom:
    """The relay's group room in memory: each member has a slot (from 1, in
    the order of joining); a message goes to every other member behind the
    sender's 2-byte slot, and a join is announced to those present."""

    def __init__(self):
        self.members = {}  # slot -> roll call
        self.inbox = {}  # slot -> [(slot, bytes)]

    def join(self, call):
        slot = len(self.members) + 1
        for other in self.members.values():
            other.peer_joined(slot)
        self.members[slot] = call
        self.inbox[slot] = []
        return slot

    def pump(self, now=NOW, tamper=None):
        """Sends every queued message, then delivers; until quiet."""
        moved = True
        while moved:
            moved = False
            for slot, call in list(self.members.items()):
                while message := call.next_outgoing():
                    if tamper is not None:
                        message = tamper(slot, message)
                    framed = slot.to_bytes(2, "big") + message
                    for other in self.members:
                        if other != slot:
                            self.inbox[other].append(framed)
                    moved = True
            for slot, call in self.members.items():
                for framed in self.inbox[slot]:
                    call.receive(framed[2:], int.from_bytes(framed[:2], "big"), now)
                self.inbox[slot] = []


@pytest.fixture
def calls():
    made = []
    yield made
    for call in made:
        call.close()


@pytest.fixture
def people(make_party):
    """Ana knows Ben and Cai; Ben and Cai do not know each other; Dee knows
    no one."""
    ana, ben, cai, dee = (make_party(name) for name in ("Ana", "Ben", "Cai", "Dee"))
    befriend(ana, ben)
    ana_ben, ben_ana = ana.peer, ben.peer
    befriend(ana, cai)
    ana_cai, cai_ana = ana.peer, cai.peer
    ana.ids = {"Ben": ana_ben, "Cai": ana_cai}
    ben.ids = {"Ana": ben_ana}
    cai.ids = {"Ana": cai_ana}
    dee.ids = {}
    return ana, ben, cai, dee


def start(party, calls, code, now=NOW, label=None):
    call = RollCall(party.contacts, code, now, random=None if label is None else rng(f"rc {label} {party.name}"))
    calls.append(call)
    return call


def index_of(call, contact_id):
    return next(p.index for p in call.participants if p.contact_id == contact_id)


def confirm_and_say(calls_by_name, now=NOW):
    for call in calls_by_name.values():
        call.confirm_roster(call.roster, now)
    codes = {name: call.code for name, call in calls_by_name.items()}
    for call in calls_by_name.values():
        call.confirm_said(now)
    return codes


def test_meeting_codes():
    code = itsme.new_meeting_code()
    assert len(code) == 9 and code[4] == "-"
    assert itsme.check_remote_code(code.lower().replace("-", " ")) == code
    assert itsme.new_meeting_code(random=rng("meeting")) == itsme.new_meeting_code(random=rng("meeting"))
    with pytest.raises(TypeError):
        itsme.new_meeting_code(random=b"not a source")  # type: ignore[arg-type]


def test_three_people_check_each_other_and_a_stranger_is_unknown(people, calls):
    ana, ben, cai, dee = people
    code = itsme.new_meeting_code()
    room = GroupRoom()
    call = {p.name: start(p, calls, code.lower()) for p in (ana, ben, cai)}
    assert len({c.room for c in call.values()}) == 1
    assert all(len(c.room) == 32 for c in call.values())
    for name in ("Ana", "Ben", "Cai"):
        room.join(call[name])
    room.pump()
    for c in call.values():
        assert c.phase == RollCallPhase.GATHERING
        assert len(c.participants) == 3
        assert c.participants[0] == RollCallParticipant(0, None, None, RollCallState.UNKNOWN, False)
    assert len({c.roster for c in call.values()}) == 1
    ana_view = {p.contact_id: p for p in call["Ana"].participants[1:]}
    assert set(ana_view) == {ana.ids["Ben"], ana.ids["Cai"]}
    assert {p.slot for p in ana_view.values()} == {2, 3}
    assert all(p.state == RollCallState.NOT_YET for p in ana_view.values())
    strangers = [p for p in call["Ben"].participants[1:] if p.contact_id is None]
    assert [p.state for p in strangers] == [RollCallState.UNKNOWN]

    codes = confirm_and_say(call)
    for c in call.values():
        assert c.phase == RollCallPhase.SAID
        word, digits = c.code.split(" ")
        assert word in itsme.NATO_WORDS and len(digits) == 3
    room.pump()
    outcomes = {}
    for listener, party in (("Ana", ana), ("Ben", ben), ("Cai", cai)):
        for speaker, contact_id in party.ids.items():
            outcomes[listener, speaker] = call[listener].enter_heard(
                index_of(call[listener], contact_id), codes[speaker].lower(), NOW + 1
            )
    assert set(outcomes.values()) == {RollCallState.VERIFIED}, outcomes
    assert ana.contacts.get(ana.ids["Ben"]).state == VerificationState.VERIFIED
    # A stranger's code is not checked: there is nothing to check it against.
    with pytest.raises(InvalidStateError):
        call["Ben"].enter_heard(strangers[0].index, codes["Cai"], NOW + 1)
    with pytest.raises(InvalidStateError):
        call["Ana"].enter_heard(index_of(call["Ana"], ana.ids["Ben"]), codes["Ben"], NOW + 1)

    # Dee joins late: a new round for everyone; the checks made stay.
    call["Dee"] = start(dee, calls, code)
    room.join(call["Dee"])
    room.pump(NOW + 2)
    for c in call.values():
        assert len(c.participants) == 4
        assert c.phase == RollCallPhase.GATHERING
        with pytest.raises(InvalidStateError):
            _ = c.code
    assert {p.state for p in call["Dee"].participants} == {RollCallState.UNKNOWN}
    kept = {p.contact_id: p.state for p in call["Ana"].participants[1:] if p.contact_id}
    assert set(kept.values()) == {RollCallState.VERIFIED}
    codes = confirm_and_say(call, NOW + 3)
    room.pump(NOW + 3)
    ben_at_cai = index_of(call["Cai"], cai.ids["Ana"])
    assert call["Cai"].enter_heard(ben_at_cai, codes["Ana"], NOW + 4) == RollCallState.VERIFIED

    # Ben leaves: he stays, marked.
    call["Ana"].peer_left(2)
    assert call["Ana"].participant(index_of(call["Ana"], ana.ids["Ben"])).left


def test_wrong_codes_lock_a_round_and_a_tampered_code_is_refused(people, calls):
    ana, ben, cai, _ = people
    code = itsme.new_meeting_code()
    room = GroupRoom()
    call = {p.name: start(p, calls, code) for p in (ana, ben, cai)}
    for name in call:
        room.join(call[name])
    room.pump()
    codes = confirm_and_say(call)

    def flip_entries_of_ana(slot, message):
        if slot != 1 or message[1] != 2:
            return message
        tampered = bytearray(message)
        for start_ in range(67, len(message), 50):
            tampered[start_ + 49] ^= 1
        return bytes(tampered)

    # Cai types Ana's code first; her SAID arrives tampered with.
    cai_ana = index_of(call["Cai"], cai.ids["Ana"])
    assert call["Cai"].enter_heard(cai_ana, codes["Ana"], NOW) == RollCallState.NOT_YET
    with pytest.raises(AuthenticationFailedError):
        room.pump(tamper=flip_entries_of_ana)
    room.pump()
    assert call["Cai"].participant(cai_ana).state == RollCallState.REFUSED
    # Three wrong codes lock a round.
    ana_ben = index_of(call["Ana"], ana.ids["Ben"])
    wrong = "ALFA 001" if codes["Ben"] == "ALFA 000" else "ALFA 000"
    for _ in range(3):
        assert call["Ana"].enter_heard(ana_ben, wrong, NOW) == RollCallState.WRONG
    with pytest.raises(LockedError):
        call["Ana"].enter_heard(ana_ben, codes["Ben"], NOW)
    # Typed again, Ana's code finds no sealed code of this round left.
    assert call["Cai"].enter_heard(cai_ana, codes["Ana"], NOW) == RollCallState.REFUSED


def test_refusals_change_nothing(people, calls, tmp_path):
    ana, ben, _, _ = people
    code = itsme.new_meeting_code(random=rng("refusals"))
    a = start(ana, calls, code, label="refusals")
    b = start(ben, calls, code, label="refusals")
    hello_a, hello_b = a.next_outgoing(), b.next_outgoing()
    assert len(hello_a) == 28 + 16 * 32 and a.next_outgoing() == b""
    for garbage, error in ((b"", MalformedMessageError), (b"\x01\x09", MalformedMessageError),
                           (hello_b[:-1], MalformedMessageError), (b"hello, roll call", MalformedMessageError)):
        with pytest.raises(error):
            a.receive(garbage, 2, NOW)
    for slot in (0, 65536, -1):
        with pytest.raises(InvalidArgumentError):
            a.receive(hello_b, slot, NOW)
        with pytest.raises(InvalidArgumentError):
            a.peer_joined(slot)
    assert len(a.participants) == 1 and a.phase == RollCallPhase.GATHERING
    with pytest.raises(InvalidStateError):
        a.confirm_roster(a.roster, NOW)  # alone: nothing to confirm
    a.receive(hello_a, 1, NOW)  # its own HELLO: ignored
    assert len(a.participants) == 1
    a.receive(hello_b, 2, NOW)
    a.receive(hello_b, 2, NOW)  # a repeat: ignored
    with pytest.raises(MalformedMessageError):
        a.receive(hello_a[:-16] + b"\xff" * 16, 2, NOW)  # a second HELLO from slot 2
    with pytest.raises(InvalidStateError):
        _ = a.code
    with pytest.raises(InvalidStateError):
        a.confirm_said(NOW)
    with pytest.raises(InvalidStateError):
        a.enter_heard(1, "ECHO 042", NOW)
    roster = a.roster
    b.receive(hello_a, 1, NOW)
    with pytest.raises(InvalidArgumentError):
        a.confirm_roster(roster[:31], NOW)
    with pytest.raises(InvalidStateError):
        a.confirm_roster(bytes(32), NOW)
    a.confirm_roster(roster, NOW, random=rng("code"))
    with pytest.raises(InvalidStateError):
        a.confirm_roster(roster, NOW)
    for bad in ("ECHO 42", "ECHO 0042", "", "NOPE 042"):
        with pytest.raises(InvalidArgumentError):
            a.enter_heard(1, bad, NOW)
    for index in (0, 2, 2**64 - 1):
        with pytest.raises(InvalidArgumentError):
            a.enter_heard(index, "ECHO 042", NOW)
    with pytest.raises(InvalidArgumentError):
        a.participant(2)
    a.confirm_said(NOW)
    said = a.next_outgoing()
    assert len(said) == 67 + 50
    with pytest.raises(InvalidKeyError):
        a.receive(said, 2, NOW)  # reflected
    b.receive(said, 1, NOW)  # kept until b's owner confirms the roster and types the code
    with pytest.raises(MalformedMessageError):
        b.receive(said[:-1] + bytes([said[-1] ^ 1]), 1, NOW)  # a second, different SAID
    with pytest.raises(ExpiredError):
        a.receive(hello_b, 2, NOW + 601)
    assert a.phase == RollCallPhase.EXPIRED
    with pytest.raises(ExpiredError):
        a.enter_heard(1, "ECHO 042", NOW + 1)
    with pytest.raises(InvalidArgumentError) as caught:
        RollCall(ana.contacts, code[:-1] + ("A" if code[-1] != "A" else "B"), NOW)
    assert "typo" in caught.value.detail
    with pytest.raises(TypeError):
        RollCall(b"not a store", code, NOW)  # type: ignore[arg-type]


def test_the_roll_call_outlives_its_store_handle_and_closes(people, calls, tmp_path):
    ana, ben, _, _ = people
    code = itsme.new_meeting_code()
    # A store handle of Ana's own, closed while the roll call goes on.
    contacts = itsme.ContactStore.open(ana.identity, tmp_path / "contacts-0.db")
    a = RollCall(contacts, code, NOW)
    b = start(ben, calls, code)
    contacts.close()
    room = GroupRoom()
    room.join(a)
    room.join(b)
    room.pump()
    codes = confirm_and_say({"Ana": a, "Ben": b})
    room.pump()
    assert a.enter_heard(1, codes["Ben"], NOW) == RollCallState.VERIFIED
    assert "RollCall participants=2 SAID" in repr(a)
    a.close()
    a.close()
    assert repr(a) == "<RollCall closed>"
    with pytest.raises(ValueError):
        a.next_outgoing()
    assert ana.contacts.get(ana.ids["Ben"]).state == VerificationState.VERIFIED
    assert b.last_error() == ""
