//! The roll call through the safe Rust API (docs/PROTOCOL.md section 20,
//! version 2): people who exchanged by QR meet in a relay group room (an
//! in-memory one that delivers in order and reports the relay's events,
//! tests/common/room.rs).  Each confirms the roster, reads a code aloud and
//! types what each contact said: verified, a device changed, a stranger
//! unknown.  A late joiner, a participant who leaves and comes back as a new
//! one, a connection that drops and comes back with its round, the call
//! binding (the same call, another call, a binding on one side only), a
//! split when the room hides one device from another, a SAID tampered with
//! on the way, wrong and locked codes, the lifetime, and argument errors.

mod common;

use common::assert_kind;
use common::people::{befriend, labelled_seed, Person, T0};
use common::room::GroupRoom;
use itsme::{
    new_meeting_code, DeterministicRandom, ErrorKind, Participant, RollCall, RollCallPhase, RollCallState,
    VerificationState, CALL_BINDING_MAX, CALL_BINDING_MIN,
};
use std::collections::HashMap;

const NOW: i64 = T0 + 500;

/// Bytes of a HELLO of 32 tags, of a VIEW listing `k` names, of a SAID for
/// a roster of `m + 1` (PROTOCOL.md 20.2, 20.3, 20.5).
const HELLO_BYTES: usize = 133 + 16 * 32;
fn view_bytes(k: usize) -> usize {
    138 + 32 * k + k.div_ceil(8)
}
fn said_bytes(m: usize) -> usize {
    131 + 50 * m
}

/// Ana knows Ben and Cai (verified by QR); Ben and Cai do not know each
/// other; Dee knows no one.  The contact ids each holds, by name.
fn people() -> (Vec<Person>, Vec<HashMap<&'static str, i64>>) {
    let mut p: Vec<Person> =
        ["Ana", "Ben", "Cai", "Dee"].iter().zip(1u8..).map(|(name, tag)| Person::new(name, tag)).collect();
    let mut ids = vec![HashMap::new(), HashMap::new(), HashMap::new(), HashMap::new()];
    for (other, name) in [(1usize, "Ben"), (2, "Cai")] {
        let (ana, rest) = p.split_at_mut(1);
        befriend(&mut ana[0], &mut rest[other - 1], true);
        ids[0].insert(name, ana[0].peer);
        ids[other].insert("Ana", rest[other - 1].peer);
    }
    (p, ids)
}

/// Everyone's roll call, unbound, entering the room at `now` in this order.
fn room_of(people: &[&Person], code: &str, now: i64) -> GroupRoom {
    let mut room = GroupRoom::default();
    for person in people {
        room.enter(RollCall::new(&person.contacts, code, None, now, None).unwrap(), now);
    }
    room
}

/// The participant that is contact `contact_id`, present now.
fn participant_of(call: &RollCall, contact_id: i64) -> Participant {
    call.participants()
        .unwrap()
        .into_iter()
        .filter(|p| p.contact_id == Some(contact_id) && !p.left)
        .last()
        .expect("the contact, present")
}

fn index_of(call: &RollCall, contact_id: i64) -> usize {
    participant_of(call, contact_id).index
}

/// The participant speaking from relay slot `slot`.
fn at_slot(call: &RollCall, slot: u16) -> Participant {
    call.participants().unwrap().into_iter().find(|p| p.slot == Some(slot)).expect("a participant in that slot")
}

/// Every connected member confirms the roster it holds, then says its code
/// (nothing delivered in between): the codes, by seat.
fn confirm_and_say(room: &mut GroupRoom, now: i64) -> Vec<String> {
    let mut codes = Vec::new();
    for seat in &mut room.seats {
        let call = &mut seat.call;
        let roster = call.roster().unwrap();
        call.confirm_roster(&roster, now, None).unwrap();
        assert_eq!(call.phase().unwrap(), RollCallPhase::Confirmed);
        codes.push(call.code().unwrap());
        call.confirm_said(now, None).unwrap();
        assert_eq!(call.phase().unwrap(), RollCallPhase::Said);
    }
    codes
}

/// A well-formed code that is not `code`.
fn other_than(code: &str) -> &'static str {
    if code == "ALFA 000" {
        "ALFA 001"
    } else {
        "ALFA 000"
    }
}

/// Every member holds one roster, everyone present agrees, no split.
#[track_caller]
fn settled(room: &GroupRoom, head_count: usize) {
    let roster = room.seats[0].call.roster().unwrap();
    for seat in &room.seats {
        let call = &seat.call;
        assert_eq!(call.roster().unwrap(), roster, "one roster everywhere");
        assert_eq!(call.head_count().unwrap(), head_count);
        assert!(!call.split().unwrap());
        let present: Vec<Participant> = call.participants().unwrap().into_iter().filter(|p| !p.left).collect();
        assert_eq!(present.len(), head_count);
        assert!(present.iter().all(|p| p.agrees), "{present:?}");
    }
}

#[test]
fn meeting_codes() {
    let code = new_meeting_code(None).unwrap();
    assert_eq!(code.len(), 9);
    assert_eq!(&code[4..5], "-");
    assert_eq!(itsme::check_remote_code(&code.to_lowercase().replace('-', " ")).unwrap(), code);
    let seed = labelled_seed("meeting");
    let again = |seed| new_meeting_code(Some(&mut DeterministicRandom::new(seed).unwrap())).unwrap();
    assert_eq!(again(&seed), again(&seed));
    assert_eq!((CALL_BINDING_MIN, CALL_BINDING_MAX), (16, 64));
    assert_eq!(itsme::ROLLCALL_MESSAGE_MAX, 133 + 16 * 2048);
}

#[test]
fn several_people_verified_a_device_changed_and_a_stranger_unknown() {
    let (people, ids) = people();
    // Cai moved to a new device: Ana still holds the device secret of his
    // old one, and his new one holds none of Ana's.
    let cai = people[2].on_new_device();
    let code = new_meeting_code(None).unwrap();
    let mut room = room_of(&[&people[0], &people[1], &cai, &people[3]], &code.to_lowercase(), NOW);
    let rooms: Vec<String> = room.seats.iter().map(|s| s.call.room().unwrap()).collect();
    assert!(rooms.iter().all(|r| r == &rooms[0] && r.len() == 32));
    // The re-sends and due VIEWs of the next seconds: everyone agrees.
    room.run(NOW + 1, NOW + 3);
    settled(&room, 4);
    for seat in &room.seats {
        let all = seat.call.participants().unwrap();
        assert_eq!(all.len(), 4);
        assert_eq!(
            all[0],
            Participant {
                index: 0,
                slot: None,
                contact_id: None,
                state: RollCallState::Unknown,
                left: false,
                agrees: true
            }
        );
        assert_eq!(seat.call.phase().unwrap(), RollCallPhase::Gathering);
    }
    let at_ana = &room.seats[0].call;
    let ben = at_slot(at_ana, 2);
    assert_eq!((ben.contact_id, ben.state), (Some(ids[0]["Ben"]), RollCallState::NotYet));
    let cai_at_ana = at_slot(at_ana, 3);
    assert_eq!((cai_at_ana.contact_id, cai_at_ana.state), (Some(ids[0]["Cai"]), RollCallState::NotYet));
    let dee = at_slot(at_ana, 4);
    assert_eq!((dee.contact_id, dee.state), (None, RollCallState::Unknown));
    let at_ben = &room.seats[1].call;
    assert_eq!(at_slot(at_ben, 1).state, RollCallState::NotYet);
    let cai_at_ben = at_slot(at_ben, 3);
    assert_eq!((cai_at_ben.contact_id, cai_at_ben.state), (None, RollCallState::Unknown));
    assert!(room.seats[3].call.participants().unwrap().iter().all(|p| p.state == RollCallState::Unknown));

    let codes = confirm_and_say(&mut room, NOW + 4);
    assert!(room.pump(NOW + 4).is_empty());
    let names = ["Ana", "Ben", "Cai", "Dee"];
    let expected = [
        ("Ana", "Ben", RollCallState::Verified),
        ("Ana", "Cai", RollCallState::DeviceChanged),
        ("Ben", "Ana", RollCallState::Verified),
        ("Cai", "Ana", RollCallState::VerifiedTagUnchecked),
    ];
    for (listener, speaker, outcome) in expected {
        let l = names.iter().position(|n| *n == listener).unwrap();
        let call = room.call(l);
        let index = index_of(call, ids[l][speaker]);
        let spoken = &codes[names.iter().position(|n| *n == speaker).unwrap()];
        assert_eq!(
            call.enter_heard(index, &spoken.to_lowercase(), NOW + 5).unwrap(),
            outcome,
            "{listener} hearing {speaker}"
        );
        assert_eq!(call.participant(index).unwrap().state, outcome);
    }
    // Each outcome is recorded on the contact, as Online Verify records one.
    assert_eq!(people[0].contacts.get(ids[0]["Ben"]).unwrap().state, VerificationState::Verified);
    assert_eq!(people[0].contacts.get(ids[0]["Cai"]).unwrap().state, VerificationState::Degraded);
    // A stranger's code: nothing to check it against; a contact checked already.
    assert_kind(room.call(1).enter_heard(cai_at_ben.index, &codes[2], NOW + 5), ErrorKind::InvalidState);
    assert_kind(room.call(0).enter_heard(ben.index, &codes[1], NOW + 5), ErrorKind::InvalidState);
    assert_kind(room.call(0).enter_heard(dee.index, &codes[3], NOW + 5), ErrorKind::InvalidState);
}

#[test]
fn a_late_joiner_starts_a_new_round_and_the_checks_stay() {
    let (people, ids) = people();
    let code = new_meeting_code(None).unwrap();
    let mut room = room_of(&[&people[0], &people[1], &people[2]], &code, NOW);
    room.run(NOW + 1, NOW + 2);
    settled(&room, 3);
    let first_roster = room.seats[0].call.roster().unwrap();
    let codes = confirm_and_say(&mut room, NOW + 2);
    assert!(room.pump(NOW + 2).is_empty());
    let ben = index_of(&room.seats[0].call, ids[0]["Ben"]);
    assert_eq!(room.call(0).enter_heard(ben, &codes[1], NOW + 3).unwrap(), RollCallState::Verified);
    let cai = index_of(&room.seats[0].call, ids[0]["Cai"]);
    assert_eq!(room.call(0).enter_heard(cai, other_than(&codes[2]), NOW + 3).unwrap(), RollCallState::Wrong);

    // Dee joins: a new roster, a new round for everyone.
    let dee = room.enter(RollCall::new(&people[3].contacts, &code, None, NOW + 4, None).unwrap(), NOW + 4);
    room.run(NOW + 5, NOW + 6);
    settled(&room, 4);
    assert_ne!(room.seats[0].call.roster().unwrap(), first_roster);
    for seat in &room.seats {
        assert_eq!(seat.call.participants().unwrap().len(), 4);
        assert_eq!(seat.call.phase().unwrap(), RollCallPhase::Gathering);
        assert_kind(seat.call.code(), ErrorKind::InvalidState);
    }
    assert!(room.seats[dee].call.participants().unwrap().iter().all(|p| p.state == RollCallState::Unknown));
    // Typing before this round's roster is confirmed.
    assert_kind(room.call(0).enter_heard(cai, &codes[2], NOW + 6), ErrorKind::InvalidState);
    // The check made stays, shown and not to be typed again; a wrong code
    // was of its round.
    assert_eq!(room.seats[0].call.participant(ben).unwrap().state, RollCallState::Verified);
    assert_eq!(room.seats[0].call.participant(cai).unwrap().state, RollCallState::NotYet);
    let codes = confirm_and_say(&mut room, NOW + 7);
    assert!(room.pump(NOW + 7).is_empty());
    assert_kind(room.call(0).enter_heard(ben, &codes[1], NOW + 7), ErrorKind::InvalidState);
    assert_eq!(room.call(0).enter_heard(cai, &codes[2], NOW + 7).unwrap(), RollCallState::Verified);
    let ana_at_cai = index_of(&room.seats[2].call, ids[2]["Ana"]);
    assert_eq!(room.call(2).enter_heard(ana_at_cai, &codes[0], NOW + 8).unwrap(), RollCallState::Verified);
}

#[test]
fn one_who_leaves_and_starts_again_is_a_new_participant() {
    let (people, ids) = people();
    let code = new_meeting_code(None).unwrap();
    let mut room = room_of(&[&people[0], &people[1]], &code, NOW);
    room.run(NOW + 1, NOW + 2);
    settled(&room, 2);
    let first = participant_of(&room.seats[0].call, ids[0]["Ben"]);

    // Ben leaves (his application stops: his roll-call key is gone).
    assert!(room.disconnect(1, NOW + 3).is_empty());
    let at_ana = &room.seats[0].call;
    assert_eq!(at_ana.head_count().unwrap(), 1);
    let gone = at_ana.participant(first.index).unwrap();
    assert!(gone.left);
    assert_eq!((gone.contact_id, gone.slot), (Some(ids[0]["Ben"]), Some(2)));
    assert_eq!(at_ana.phase().unwrap(), RollCallPhase::Gathering);
    let alone = at_ana.roster().unwrap();
    assert_kind(room.call(0).confirm_roster(&alone, NOW + 3, None), ErrorKind::InvalidState);

    // He starts the roll call again: a new participant in a new slot, the
    // old one listed as left.
    room.seats[1].call = RollCall::new(&people[1].contacts, &code, None, NOW + 4, None).unwrap();
    assert!(room.connect(1, NOW + 4).is_empty());
    room.run(NOW + 5, NOW + 6);
    settled(&room, 2);
    let at_ana = &room.seats[0].call;
    let all = at_ana.participants().unwrap();
    assert_eq!(all.len(), 3);
    assert!(all[first.index].left);
    let again = participant_of(at_ana, ids[0]["Ben"]);
    assert_ne!(again.index, first.index);
    assert_eq!((again.slot, again.state, again.left), (Some(3), RollCallState::NotYet, false));
    assert_eq!(room.seats[1].call.participants().unwrap().len(), 2, "Ben's new roll call knows only Ana");
    let codes = confirm_and_say(&mut room, NOW + 7);
    assert!(room.pump(NOW + 7).is_empty());
    assert_kind(room.call(0).enter_heard(first.index, &codes[1], NOW + 7), ErrorKind::InvalidState);
    assert_eq!(room.call(0).enter_heard(again.index, &codes[1], NOW + 7).unwrap(), RollCallState::Verified);
}

#[test]
fn a_dropped_connection_that_comes_back_brings_its_round_back() {
    let (people, ids) = people();
    let code = new_meeting_code(None).unwrap();
    let mut room = room_of(&[&people[0], &people[1], &people[2]], &code, NOW);
    room.run(NOW + 1, NOW + 2);
    settled(&room, 3);
    let roster = room.seats[0].call.roster().unwrap();
    let codes = confirm_and_say(&mut room, NOW + 3);
    assert!(room.pump(NOW + 3).is_empty());
    room.run(NOW + 4, NOW + 5);
    let ben = index_of(&room.seats[0].call, ids[0]["Ben"]);

    // Ben's connection drops before Ana typed his code.
    assert!(room.disconnect(1, NOW + 6).is_empty());
    for seat in [0, 2] {
        let call = &room.seats[seat].call;
        assert_eq!(call.head_count().unwrap(), 2);
        assert_eq!(call.phase().unwrap(), RollCallPhase::Gathering, "a new roster, a new round");
        assert_ne!(call.roster().unwrap(), roster);
    }
    assert!(room.seats[0].call.participant(ben).unwrap().left);
    assert_kind(room.call(0).enter_heard(ben, &codes[1], NOW + 6), ErrorKind::InvalidState);
    room.run(NOW + 7, NOW + 8);

    // It comes back in a new slot, under the same name: the round is back,
    // with its confirmation, its code and the SAIDs taken.
    assert!(room.connect(1, NOW + 9).is_empty());
    room.run(NOW + 10, NOW + 11);
    settled(&room, 3);
    for (seat, said) in room.seats.iter().zip(&codes) {
        assert_eq!(seat.call.roster().unwrap(), roster);
        assert_eq!(seat.call.phase().unwrap(), RollCallPhase::Said);
        assert_eq!(&seat.call.code().unwrap(), said);
    }
    let back = room.seats[0].call.participant(ben).unwrap();
    assert_eq!((back.left, back.slot, back.state), (false, Some(4), RollCallState::NotYet));
    assert_eq!(room.seats[0].call.participants().unwrap().len(), 3);
    assert_eq!(room.call(0).enter_heard(ben, &codes[1], NOW + 12).unwrap(), RollCallState::Verified);
    let ana_at_ben = index_of(&room.seats[1].call, ids[1]["Ana"]);
    assert_eq!(room.call(1).enter_heard(ana_at_ben, &codes[0], NOW + 12).unwrap(), RollCallState::Verified);
}

#[test]
fn the_call_binding_same_call_other_call_and_a_binding_on_one_side() {
    let (people, ids) = people();
    let code = new_meeting_code(None).unwrap();
    let (one, other) = ([0x11u8; 32], [0x22u8; 16]);
    // Ana and Ben bound to one call, Cai to another, Dee not bound.
    let bindings: [Option<&[u8]>; 4] = [Some(&one), Some(&one), Some(&other), None];
    let mut room = GroupRoom::default();
    for (person, binding) in people.iter().zip(bindings) {
        room.enter(RollCall::new(&person.contacts, &code, binding, NOW, None).unwrap(), NOW);
    }
    room.run(NOW + 1, NOW + 3);
    settled(&room, 4);
    let seen = |seat: usize| -> Vec<(u16, RollCallState, Option<i64>)> {
        room.seats[seat].call.participants().unwrap()[1..]
            .iter()
            .map(|p| (p.slot.unwrap(), p.state, p.contact_id))
            .collect()
    };
    let mut at_ana = seen(0);
    at_ana.sort_by_key(|seen| seen.0);
    assert_eq!(
        at_ana,
        [
            (2, RollCallState::NotYet, Some(ids[0]["Ben"])),
            (3, RollCallState::OtherCall, None),
            (4, RollCallState::BindingDiffers, None)
        ]
    );
    let mut at_cai = seen(2);
    at_cai.sort_by_key(|seen| seen.0);
    assert_eq!(
        at_cai,
        [
            (1, RollCallState::OtherCall, None),
            (2, RollCallState::OtherCall, None),
            (4, RollCallState::BindingDiffers, None)
        ]
    );
    assert!(seen(3).iter().all(|(_, state, _)| *state == RollCallState::BindingDiffers));

    let codes = confirm_and_say(&mut room, NOW + 4);
    assert!(room.pump(NOW + 4).is_empty());
    let ben = index_of(&room.seats[0].call, ids[0]["Ben"]);
    assert_eq!(room.call(0).enter_heard(ben, &codes[1], NOW + 5).unwrap(), RollCallState::Verified);
    // Cai, Ana's contact in another call: nothing to check his code against.
    let cai = at_slot(&room.seats[0].call, 3);
    assert_kind(room.call(0).enter_heard(cai.index, &codes[2], NOW + 5), ErrorKind::InvalidState);
    assert_eq!(people[0].contacts.get(ids[0]["Cai"]).unwrap().state, VerificationState::Verified, "as the QR left it");
}

#[test]
fn a_device_hidden_from_another_shows_a_split_after_five_seconds() {
    let (people, _) = people();
    let code = new_meeting_code(None).unwrap();
    // The room hides Cai from Ben, and Ben from Cai; Ana sees both.
    let mut room = GroupRoom::default();
    room.hide(1, 2);
    for person in &people[..3] {
        room.enter(RollCall::new(&person.contacts, &code, None, NOW, None).unwrap(), NOW);
    }
    let heads: Vec<usize> = room.seats.iter().map(|s| s.call.head_count().unwrap()).collect();
    assert_eq!(heads, [3, 2, 2]);
    room.run(NOW + 1, NOW + 4);
    assert!(room.seats.iter().all(|s| !s.call.split().unwrap()), "not yet: the roster changed less than 5 s ago");
    room.run(NOW + 5, NOW + 5);
    assert!(room.seats.iter().all(|s| s.call.split().unwrap()), "every device sees the split");
    let at_ana = room.seats[0].call.participants().unwrap();
    assert!(at_ana[1..].iter().all(|p| !p.left && !p.agrees), "{at_ana:?}");

    // The same three in an honest room: no split, however long it lasts.
    let mut room = room_of(&[&people[0], &people[1], &people[2]], &code, NOW);
    room.run(NOW + 1, NOW + 9);
    settled(&room, 3);
}

#[test]
fn a_tampered_said_is_refused_and_wrong_codes_lock_a_round() {
    let (people, ids) = people();
    let code = new_meeting_code(None).unwrap();
    let mut room = room_of(&[&people[0], &people[1], &people[2]], &code, NOW);
    room.run(NOW + 1, NOW + 2);
    let codes = confirm_and_say(&mut room, NOW + 2);
    // Cai types Ana's code first; her SAID reaches everyone with one bit of
    // an entry flipped: its signature no longer verifies.
    let ana_at_cai = index_of(&room.seats[2].call, ids[2]["Ana"]);
    assert_eq!(room.call(2).enter_heard(ana_at_cai, &codes[0], NOW + 2).unwrap(), RollCallState::NotYet);
    let errors = room.pump_through(NOW + 2, |seat, mut message| {
        if seat == 0 && message[1] == 2 {
            assert_eq!(message.len(), said_bytes(2));
            message[67 + 49] ^= 1;
        }
        message
    });
    let mut refused: Vec<(usize, ErrorKind)> = errors.iter().map(|(seat, e)| (*seat, e.kind())).collect();
    refused.sort_by_key(|refusal| refusal.0);
    assert_eq!(refused, [(1, ErrorKind::AuthenticationFailed), (2, ErrorKind::AuthenticationFailed)], "{errors:?}");
    // It changed nothing; the SAID sent again gets through and is checked.
    assert_eq!(room.seats[2].call.participant(ana_at_cai).unwrap().state, RollCallState::NotYet);
    room.run(NOW + 3, NOW + 6);
    assert_eq!(room.seats[2].call.participant(ana_at_cai).unwrap().state, RollCallState::Verified);
    // Three wrong codes lock the round; wrong codes record nothing.
    let ben_at_ana = index_of(&room.seats[0].call, ids[0]["Ben"]);
    for _ in 0..3 {
        assert_eq!(room.call(0).enter_heard(ben_at_ana, other_than(&codes[1]), NOW + 7).unwrap(), RollCallState::Wrong);
    }
    assert_eq!(room.seats[0].call.participant(ben_at_ana).unwrap().state, RollCallState::Wrong);
    assert_kind(room.call(0).enter_heard(ben_at_ana, &codes[1], NOW + 7), ErrorKind::Locked);
    assert_eq!(people[0].contacts.get(ids[0]["Ben"]).unwrap().state, VerificationState::Verified);
}

#[test]
fn refusals_and_argument_errors_change_nothing() {
    let (people, _) = people();
    let code = new_meeting_code(None).unwrap();
    let mut a = RollCall::new(&people[0].contacts, &code, None, NOW, None).unwrap();
    let mut b = RollCall::new(&people[1].contacts, &code, None, NOW, None).unwrap();
    // Nothing is queued before the relay's "joined"; a tick does nothing.
    assert!(a.next_outgoing().unwrap().is_empty());
    a.tick(NOW).unwrap();
    assert!(a.next_outgoing().unwrap().is_empty());
    assert_eq!((a.head_count().unwrap(), a.split().unwrap()), (1, false));
    // Slots are 1 to 65535: 0 is no slot.
    assert_kind(a.joined(0, &[], NOW), ErrorKind::InvalidArgument);
    assert_kind(a.joined(1, &[2, 0], NOW), ErrorKind::InvalidArgument);
    assert_kind(a.joined(1, &[], -1), ErrorKind::InvalidArgument);
    assert!(a.next_outgoing().unwrap().is_empty(), "a refused join queues nothing");
    a.joined(1, &[], NOW).unwrap();
    a.peer_joined(2, NOW).unwrap();
    b.joined(2, &[1], NOW).unwrap();
    let hello_a = a.next_outgoing().unwrap();
    let view_a = a.next_outgoing().unwrap();
    // The HELLO for the newcomer is still waiting: not queued twice (PROTOCOL.md 20.6).
    assert!(a.next_outgoing().unwrap().is_empty());
    assert_eq!((hello_a.len(), view_a.len()), (HELLO_BYTES, view_bytes(1)));
    assert_eq!(&hello_a[..3], &[2, 1, 0], "version 2, HELLO, not bound");
    assert_eq!(&view_a[..2], &[2, 3]);
    let hello_b = b.next_outgoing().unwrap();
    // Its VIEW waits for the HELLO of slot 1, on its way (PROTOCOL.md 20.6, rule 4), or for the tick.
    assert!(b.next_outgoing().unwrap().is_empty());
    b.tick(NOW).unwrap();
    let view_b = b.next_outgoing().unwrap();
    assert_eq!((&view_b[..2], view_b.len()), (&[2u8, 3][..], view_bytes(1)));
    assert!(b.next_outgoing().unwrap().is_empty());
    for garbage in
        [&b""[..], b"\x02", b"\x01\x01", b"\x02\x09", b"\x02\x01", &hello_b[..hello_b.len() - 1], b"hello, roll call"]
    {
        assert_kind(a.receive(garbage, 2, NOW), ErrorKind::MalformedMessage);
    }
    let mut forged = hello_b.clone();
    forged[100] ^= 1;
    assert_kind(a.receive(&forged, 2, NOW), ErrorKind::AuthenticationFailed);
    assert_kind(a.receive(&hello_a, 2, NOW), ErrorKind::InvalidKey);
    assert_kind(a.receive(&view_b, 2, NOW), ErrorKind::InvalidState); // before its HELLO
    assert_kind(a.receive(&hello_b, 0, NOW), ErrorKind::InvalidArgument);
    assert_kind(a.receive(&hello_b, 2, -1), ErrorKind::InvalidArgument);
    assert_kind(a.peer_joined(0, NOW), ErrorKind::InvalidArgument);
    assert_kind(a.peer_left(0, NOW), ErrorKind::InvalidArgument);
    assert_kind(a.tick(-1), ErrorKind::InvalidArgument);
    assert_eq!(a.participants().unwrap().len(), 1);
    assert_eq!(a.phase().unwrap(), RollCallPhase::Gathering);
    let alone = a.roster().unwrap();
    assert_kind(a.confirm_roster(&alone, NOW, None), ErrorKind::InvalidState); // no one else is present
    a.receive(&hello_b, 2, NOW).unwrap();
    a.receive(&hello_b, 2, NOW).unwrap(); // a repeat: ignored
    assert_eq!((a.participants().unwrap().len(), a.head_count().unwrap()), (1, 1), "a HELLO makes no one present");
    assert_kind(a.receive(&view_b, 3, NOW), ErrorKind::InvalidState); // carried by another slot
    a.receive(&view_b, 2, NOW).unwrap();
    a.receive(&view_b, 2, NOW).unwrap(); // a repeat: ignored
    assert_eq!(a.head_count().unwrap(), 1, "Bob's VIEW does not list Ana yet");
    let view_a = a.next_outgoing().unwrap(); // listing Bob now
    assert_eq!(view_a.len(), view_bytes(2));
    b.receive(&hello_a, 1, NOW).unwrap();
    b.receive(&view_a, 1, NOW).unwrap();
    assert_eq!(b.head_count().unwrap(), 2);
    let view_b = std::iter::from_fn(|| Some(b.next_outgoing().unwrap()))
        .take_while(|m| !m.is_empty())
        .filter(|m| m[1] == 3)
        .last()
        .expect("Bob's VIEW listing Ana");
    a.receive(&view_b, 2, NOW).unwrap();
    assert_eq!(a.head_count().unwrap(), 2);
    assert_eq!(a.participants().unwrap().len(), 2);
    assert_kind(a.code(), ErrorKind::InvalidState);
    assert_kind(a.confirm_said(NOW, None), ErrorKind::InvalidState);
    assert_kind(a.enter_heard(1, "ECHO 042", NOW), ErrorKind::InvalidState);
    let roster = a.roster().unwrap();
    assert_kind(a.confirm_roster(&roster[..31], NOW, None), ErrorKind::InvalidArgument);
    assert_kind(a.confirm_roster(&alone, NOW, None), ErrorKind::InvalidState); // no longer the roster
    a.confirm_roster(&roster, NOW, None).unwrap();
    assert_kind(a.confirm_roster(&roster, NOW, None), ErrorKind::InvalidState);
    for bad in ["ECHO 42", "ECHO 0042", "", "NOPE 042", "ECHO\0 042"] {
        assert_kind(a.enter_heard(1, bad, NOW), ErrorKind::InvalidArgument);
    }
    for index in [0, 2, usize::MAX] {
        assert_kind(a.enter_heard(index, "ECHO 042", NOW), ErrorKind::InvalidArgument);
    }
    assert_kind(a.participant(2), ErrorKind::InvalidArgument);
    a.confirm_said(NOW, None).unwrap();
    assert_kind(a.confirm_said(NOW, None), ErrorKind::InvalidState);
    let said = std::iter::from_fn(|| Some(a.next_outgoing().unwrap()))
        .take_while(|m| !m.is_empty())
        .find(|m| m[1] == 2)
        .expect("the SAID");
    assert_eq!(said.len(), said_bytes(1));
    assert_kind(a.receive(&said, 2, NOW), ErrorKind::InvalidKey);
    b.receive(&said, 1, NOW).unwrap(); // kept until Bob's owner confirms and types
    b.receive(&said, 1, NOW).unwrap(); // a repeat: ignored

    // The lifetime: 600 seconds, and a clock set back more than 30.
    assert_kind(b.tick(NOW - 31), ErrorKind::Expired);
    assert_eq!(b.phase().unwrap(), RollCallPhase::Expired);
    assert_kind(a.receive(&hello_b, 2, NOW + 601), ErrorKind::Expired);
    assert_eq!(a.phase().unwrap(), RollCallPhase::Expired);
    assert_kind(a.enter_heard(1, "ECHO 042", NOW + 1), ErrorKind::Expired);
    assert_kind(a.tick(NOW + 1), ErrorKind::Expired);

    // A meeting code with a typo; a NUL; bindings of the wrong length.
    let mut typo = code.clone().into_bytes();
    typo[0] = if typo[0] == b'A' { b'B' } else { b'A' };
    let error = assert_kind(
        RollCall::new(&people[0].contacts, std::str::from_utf8(&typo).unwrap(), None, NOW, None),
        ErrorKind::InvalidArgument,
    );
    assert!(error.detail.contains("typo"), "{error}");
    assert_kind(RollCall::new(&people[0].contacts, "ABCD\0EFGH", None, NOW, None), ErrorKind::InvalidArgument);
    for length in [0, CALL_BINDING_MIN - 1, CALL_BINDING_MAX + 1] {
        let binding = vec![7u8; length];
        assert_kind(RollCall::new(&people[0].contacts, &code, Some(&binding), NOW, None), ErrorKind::InvalidArgument);
    }
    for length in [CALL_BINDING_MIN, CALL_BINDING_MAX] {
        let mut bound = RollCall::new(&people[0].contacts, &code, Some(&vec![7u8; length]), NOW, None).unwrap();
        bound.joined(1, &[], NOW).unwrap();
        assert_eq!(&bound.next_outgoing().unwrap()[..3], &[2, 1, 1], "version 2, HELLO, bound");
    }
    assert_kind(RollCall::new(&people[0].contacts, &code, None, -1, None), ErrorKind::InvalidArgument);
}

#[test]
fn the_roll_call_outlives_its_store_handle() {
    let (people, ids) = people();
    let code = new_meeting_code(None).unwrap();
    // A store handle of Ana's own, dropped while the roll call goes on.
    let contacts = itsme::ContactStore::open(&people[0].identity, &people[0].path).unwrap();
    let mut room = GroupRoom::default();
    room.enter(RollCall::new(&contacts, &code, None, NOW, None).unwrap(), NOW);
    drop(contacts);
    room.enter(RollCall::new(&people[1].contacts, &code, None, NOW, None).unwrap(), NOW);
    room.run(NOW + 1, NOW + 1);
    let codes = confirm_and_say(&mut room, NOW + 2);
    assert!(room.pump(NOW + 2).is_empty());
    assert_eq!(room.call(0).enter_heard(1, &codes[1], NOW + 2).unwrap(), RollCallState::Verified);
    assert!(format!("{:?}", room.seats[0].call).starts_with("RollCall"));
    drop(room);
    assert_eq!(people[0].contacts.get(ids[0]["Ben"]).unwrap().state, VerificationState::Verified);
}

#[test]
fn a_roll_call_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<RollCall>();
}

#[test]
fn a_host_that_hands_over_the_group_rooms_frames_as_they_came() {
    let (people, _) = people();
    let code = new_meeting_code(None).unwrap();
    let mut a = RollCall::new(&people[0].contacts, &code, None, NOW, None).unwrap();
    let mut b = RollCall::new(&people[1].contacts, &code, None, NOW, None).unwrap();
    // What no group room sends is refused and queues nothing.
    for junk in [&b""[..], b"hello", br#"{"type":"peer-joined"}"#, br#"{"type":"waiting"}"#, br#"{"type":"peer-left","slot":0}"#] {
        assert_kind(a.room_text(junk, NOW), ErrorKind::MalformedMessage);
    }
    assert_kind(a.room_binary(b"\x00", NOW), ErrorKind::MalformedMessage);
    a.room_text(br#"{"type":"refused","reason":"no-peer"}"#, NOW).unwrap();
    assert!(a.next_outgoing().unwrap().is_empty());
    // The relay's events as it writes them, each message behind its sender's slot.
    a.room_text(br#"{"type":"joined","slot":1,"peers":[]}"#, NOW).unwrap();
    a.room_text(br#"{"type":"peer-joined","slot":2}"#, NOW).unwrap();
    b.room_text(br#"{"type":"joined","slot":2,"peers":[1]}"#, NOW).unwrap();
    let framed = |slot: u16, message: Vec<u8>| [slot.to_be_bytes().to_vec(), message].concat();
    for now in [NOW, NOW + 1] {
        a.tick(now).unwrap();
        b.tick(now).unwrap();
        loop {
            let (from_a, from_b) = (a.next_outgoing().unwrap(), b.next_outgoing().unwrap());
            if from_a.is_empty() && from_b.is_empty() {
                break;
            }
            if !from_a.is_empty() {
                b.room_binary(&framed(1, from_a), now).unwrap();
            }
            if !from_b.is_empty() {
                a.room_binary(&framed(2, from_b), now).unwrap();
            }
        }
    }
    assert_eq!((a.head_count().unwrap(), b.head_count().unwrap()), (2, 2));
    assert_eq!(a.roster().unwrap(), b.roster().unwrap());
    a.room_text(br#"{"type":"peer-left","slot":2}"#, NOW + 2).unwrap();
    assert_eq!(a.head_count().unwrap(), 1);
}
