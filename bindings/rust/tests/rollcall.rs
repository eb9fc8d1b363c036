//! The roll call through the safe Rust API (docs/PROTOCOL.md section 20):
//! three people who exchanged by QR, and a fourth who is no one's contact,
//! meet in a relay group room (here an in-memory one that gives each
//! message its sender's slot, as the relay does).  Each confirms the
//! roster, reads a code aloud and types what each contact said.  A late
//! joiner's new round, wrong and locked codes, a tampered SAID, garbage
//! from a slot, the lifetime, and calls in the wrong state.

mod common;

use common::assert_kind;
use common::people::{befriend, labelled_seed, Person, T0};
use itsme::{
    new_meeting_code, DeterministicRandom, ErrorKind, Participant, RollCall, RollCallPhase, RollCallState,
    VerificationState,
};
use std::collections::HashMap;

const NOW: i64 = T0 + 500;

/// The relay's group room in memory: members in slots from 1, in the order
/// they joined; each message goes to every other member with its sender's
/// slot, and a join is announced to those present.
#[derive(Default)]
struct GroupRoom {
    members: Vec<RollCall>,
}

impl GroupRoom {
    fn join(&mut self, call: RollCall) -> u16 {
        let slot = u16::try_from(self.members.len() + 1).unwrap();
        for other in &mut self.members {
            other.peer_joined(slot).unwrap();
        }
        self.members.push(call);
        slot
    }

    fn call(&mut self, slot: u16) -> &mut RollCall {
        &mut self.members[usize::from(slot) - 1]
    }

    /// Sends every queued message (through `tamper`) until quiet; the first
    /// error each receiver raised.
    fn pump(&mut self, now: i64, mut tamper: impl FnMut(u16, Vec<u8>) -> Vec<u8>) -> Vec<(u16, itsme::Error)> {
        let mut errors = Vec::new();
        loop {
            let mut sent = Vec::new();
            for (i, call) in self.members.iter_mut().enumerate() {
                let slot = u16::try_from(i + 1).unwrap();
                loop {
                    let message = call.next_outgoing().unwrap();
                    if message.is_empty() {
                        break;
                    }
                    sent.push((slot, tamper(slot, message)));
                }
            }
            if sent.is_empty() {
                return errors;
            }
            for (from, message) in sent {
                for (i, call) in self.members.iter_mut().enumerate() {
                    let slot = u16::try_from(i + 1).unwrap();
                    if slot != from {
                        if let Err(error) = call.receive(&message, from, now) {
                            errors.push((slot, error));
                        }
                    }
                }
            }
        }
    }
}

fn untouched(_: u16, message: Vec<u8>) -> Vec<u8> {
    message
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

fn index_of(call: &RollCall, contact_id: i64) -> usize {
    call.participants().unwrap().iter().find(|p| p.contact_id == Some(contact_id)).expect("the contact").index
}

/// Every member confirms the roster it holds, then says its code: the codes, by slot.
fn confirm_and_say(room: &mut GroupRoom, now: i64) -> Vec<String> {
    let mut codes = Vec::new();
    for call in &mut room.members {
        let roster = call.roster().unwrap();
        call.confirm_roster(&roster, now, None).unwrap();
        assert_eq!(call.phase().unwrap(), RollCallPhase::Confirmed);
        codes.push(call.code().unwrap());
        call.confirm_said(now, None).unwrap();
        assert_eq!(call.phase().unwrap(), RollCallPhase::Said);
    }
    codes
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
}

#[test]
fn three_people_check_each_other_and_a_stranger_is_unknown() {
    let (people, ids) = people();
    let code = new_meeting_code(None).unwrap();
    let mut room = GroupRoom::default();
    let rooms: Vec<String> = (0..3)
        .map(|i| {
            let call = RollCall::new(&people[i].contacts, &code.to_lowercase(), NOW, None).unwrap();
            let name = call.room().unwrap();
            room.join(call);
            name
        })
        .collect();
    assert!(rooms.iter().all(|r| r == &rooms[0] && r.len() == 32));
    assert!(room.pump(NOW, untouched).is_empty());
    let roster = room.members[0].roster().unwrap();
    for call in &room.members {
        assert_eq!(call.phase().unwrap(), RollCallPhase::Gathering);
        assert_eq!(call.roster().unwrap(), roster, "one roster everywhere");
        let all = call.participants().unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(
            all[0],
            Participant { index: 0, slot: None, contact_id: None, state: RollCallState::Unknown, left: false }
        );
    }
    let at_ana = room.members[0].participants().unwrap();
    let mut contacts: Vec<(Option<i64>, Option<u16>)> = at_ana[1..].iter().map(|p| (p.contact_id, p.slot)).collect();
    contacts.sort();
    let mut expected = vec![(Some(ids[0]["Ben"]), Some(2)), (Some(ids[0]["Cai"]), Some(3))];
    expected.sort();
    assert_eq!(contacts, expected);
    assert!(at_ana[1..].iter().all(|p| p.state == RollCallState::NotYet));
    let cai_at_ben = room.members[1].participants().unwrap().into_iter().find(|p| p.slot == Some(3)).unwrap();
    assert_eq!((cai_at_ben.state, cai_at_ben.contact_id), (RollCallState::Unknown, None));

    let codes = confirm_and_say(&mut room, NOW);
    assert!(room.pump(NOW, untouched).is_empty());
    let names = ["Ana", "Ben", "Cai"];
    for (listener, known) in ids.iter().take(3).enumerate() {
        for (speaker, id) in known {
            let call = &mut room.members[listener];
            let index = index_of(call, *id);
            let spoken = &codes[names.iter().position(|n| n == speaker).unwrap()];
            let state = call.enter_heard(index, &spoken.to_lowercase(), NOW + 1).unwrap();
            assert_eq!(state, RollCallState::Verified, "{} hearing {speaker}", names[listener]);
        }
    }
    assert_eq!(people[0].contacts.get(ids[0]["Ben"]).unwrap().state, VerificationState::Verified);
    // A stranger's code: nothing to check it against; a second typing in the round.
    assert_kind(room.call(2).enter_heard(cai_at_ben.index, &codes[2], NOW + 1), ErrorKind::InvalidState);
    let ben_at_ana = index_of(&room.members[0], ids[0]["Ben"]);
    assert_kind(room.call(1).enter_heard(ben_at_ana, &codes[1], NOW + 1), ErrorKind::InvalidState);

    // Dee joins late: a new round for everyone; the checks made stay.
    room.join(RollCall::new(&people[3].contacts, &code, NOW + 2, None).unwrap());
    assert!(room.pump(NOW + 2, untouched).is_empty());
    for call in &room.members {
        assert_eq!(call.participants().unwrap().len(), 4);
        assert_eq!(call.phase().unwrap(), RollCallPhase::Gathering);
        assert_kind(call.code(), ErrorKind::InvalidState);
    }
    assert!(room.members[3].participants().unwrap().iter().all(|p| p.state == RollCallState::Unknown));
    assert_eq!(room.members[0].participant(ben_at_ana).unwrap().state, RollCallState::Verified);
    let codes = confirm_and_say(&mut room, NOW + 3);
    assert!(room.pump(NOW + 3, untouched).is_empty());
    let ana_at_cai = index_of(&room.members[2], ids[2]["Ana"]);
    assert_eq!(room.call(3).enter_heard(ana_at_cai, &codes[0], NOW + 4).unwrap(), RollCallState::Verified);

    // Ben leaves: he stays, marked.
    room.call(1).peer_left(2).unwrap();
    let ben = room.members[0].participant(ben_at_ana).unwrap();
    assert!(ben.left);
    assert_eq!(ben.state, RollCallState::Verified);
}

#[test]
fn wrong_codes_lock_a_round_and_a_tampered_said_is_refused() {
    let (people, ids) = people();
    let code = new_meeting_code(None).unwrap();
    let mut room = GroupRoom::default();
    for person in &people[..3] {
        room.join(RollCall::new(&person.contacts, &code, NOW, None).unwrap());
    }
    assert!(room.pump(NOW, untouched).is_empty());
    let codes = confirm_and_say(&mut room, NOW);
    // Cai types Ana's code first; her SAID reaches everyone with one bit of
    // every entry flipped.
    let ana_at_cai = index_of(&room.members[2], ids[2]["Ana"]);
    assert_eq!(room.call(3).enter_heard(ana_at_cai, &codes[0], NOW).unwrap(), RollCallState::NotYet);
    let errors = room.pump(NOW, |slot, mut message| {
        if slot == 1 && message[1] == 2 {
            let mut at = 67;
            while at < message.len() {
                message[at + 49] ^= 1;
                at += 50;
            }
        }
        message
    });
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!((errors[0].0, errors[0].1.kind()), (3, ErrorKind::AuthenticationFailed));
    assert_eq!(room.members[2].participant(ana_at_cai).unwrap().state, RollCallState::Refused);
    // Typed again, nothing sealed is left to compare in this round.
    assert_eq!(room.call(3).enter_heard(ana_at_cai, &codes[0], NOW).unwrap(), RollCallState::Refused);
    // Three wrong codes lock the round.
    let ben_at_ana = index_of(&room.members[0], ids[0]["Ben"]);
    let wrong = if codes[1] == "ALFA 000" { "ALFA 001" } else { "ALFA 000" };
    for _ in 0..3 {
        assert_eq!(room.call(1).enter_heard(ben_at_ana, wrong, NOW).unwrap(), RollCallState::Wrong);
    }
    assert_kind(room.call(1).enter_heard(ben_at_ana, &codes[1], NOW), ErrorKind::Locked);
    // Wrong codes record nothing: Ben stays as the QR exchange left him.
    assert_eq!(people[0].contacts.get(ids[0]["Ben"]).unwrap().state, VerificationState::Verified);
}

#[test]
fn refusals_change_nothing() {
    let (people, _) = people();
    let code = new_meeting_code(None).unwrap();
    let mut a = RollCall::new(&people[0].contacts, &code, NOW, None).unwrap();
    let mut b = RollCall::new(&people[1].contacts, &code, NOW, None).unwrap();
    let (hello_a, hello_b) = (a.next_outgoing().unwrap(), b.next_outgoing().unwrap());
    assert_eq!(hello_a.len(), 28 + 16 * 32);
    assert!(a.next_outgoing().unwrap().is_empty());
    for garbage in [&b""[..], b"\x01\x09", b"\x02\x01", &hello_b[..hello_b.len() - 1], b"hello, roll call"] {
        assert_kind(a.receive(garbage, 2, NOW), ErrorKind::MalformedMessage);
    }
    assert_kind(a.receive(&hello_b, 0, NOW), ErrorKind::InvalidArgument);
    assert_kind(a.peer_joined(0), ErrorKind::InvalidArgument);
    assert_kind(a.peer_left(0), ErrorKind::InvalidArgument);
    assert_eq!(a.participants().unwrap().len(), 1);
    assert_eq!(a.phase().unwrap(), RollCallPhase::Gathering);
    let alone = a.roster().unwrap();
    assert_kind(a.confirm_roster(&alone, NOW, None), ErrorKind::InvalidState); // nothing to confirm
    a.receive(&hello_a, 1, NOW).unwrap(); // its own: ignored
    assert_eq!(a.participants().unwrap().len(), 1);
    a.receive(&hello_b, 2, NOW).unwrap();
    a.receive(&hello_b, 2, NOW).unwrap(); // a repeat: ignored
    let mut second = hello_a.clone();
    let end = second.len();
    second[end - 16..].fill(0xff);
    assert_kind(a.receive(&second, 2, NOW), ErrorKind::MalformedMessage);
    assert_kind(a.code(), ErrorKind::InvalidState);
    assert_kind(a.confirm_said(NOW, None), ErrorKind::InvalidState);
    assert_kind(a.enter_heard(1, "ECHO 042", NOW), ErrorKind::InvalidState);
    let roster = a.roster().unwrap();
    b.receive(&hello_a, 1, NOW).unwrap();
    assert_kind(a.confirm_roster(&roster[..31], NOW, None), ErrorKind::InvalidArgument);
    assert_kind(a.confirm_roster(&[0u8; 32], NOW, None), ErrorKind::InvalidState);
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
    let said = a.next_outgoing().unwrap();
    assert_eq!(said.len(), 67 + 50);
    assert_kind(a.receive(&said, 2, NOW), ErrorKind::InvalidKey);
    b.receive(&said, 1, NOW).unwrap(); // kept until b's owner confirms and types
    let mut other = said.clone();
    *other.last_mut().unwrap() ^= 1;
    assert_kind(b.receive(&other, 1, NOW), ErrorKind::MalformedMessage);
    assert_kind(a.receive(&hello_b, 2, NOW + 601), ErrorKind::Expired);
    assert_eq!(a.phase().unwrap(), RollCallPhase::Expired);
    assert_kind(a.enter_heard(1, "ECHO 042", NOW + 1), ErrorKind::Expired);
    let mut typo = code.clone().into_bytes();
    typo[0] = if typo[0] == b'A' { b'B' } else { b'A' };
    let error = assert_kind(
        RollCall::new(&people[0].contacts, std::str::from_utf8(&typo).unwrap(), NOW, None),
        ErrorKind::InvalidArgument,
    );
    assert!(error.detail.contains("typo"), "{error}");
    assert_kind(RollCall::new(&people[0].contacts, "ABCD\0EFGH", NOW, None), ErrorKind::InvalidArgument);
}

#[test]
fn the_roll_call_outlives_its_store_handle() {
    let (people, ids) = people();
    let code = new_meeting_code(None).unwrap();
    // A store handle of Ana's own, dropped while the roll call goes on.
    let contacts = itsme::ContactStore::open(&people[0].identity, &people[0].path).unwrap();
    let mut room = GroupRoom::default();
    room.join(RollCall::new(&contacts, &code, NOW, None).unwrap());
    drop(contacts);
    room.join(RollCall::new(&people[1].contacts, &code, NOW, None).unwrap());
    assert!(room.pump(NOW, untouched).is_empty());
    let codes = confirm_and_say(&mut room, NOW);
    assert!(room.pump(NOW, untouched).is_empty());
    assert_eq!(room.call(1).enter_heard(1, &codes[1], NOW).unwrap(), RollCallState::Verified);
    assert!(format!("{:?}", room.members[0]).starts_with("RollCall"));
    drop(room);
    assert_eq!(people[0].contacts.get(ids[0]["Ben"]).unwrap().state, VerificationState::Verified);
}

#[test]
fn a_roll_call_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<RollCall>();
}
