//! Online Verify through the safe Rust API (docs/PROTOCOL.md section 11):
//! two people who exchanged by QR meet in a relay room, here an in-memory
//! pipe; their devices prove to each other that each holds the seed, and
//! both read the SAS aloud.  Tampered, replayed and reflected messages, a
//! changed device, a rejected SAS, the window rule, expiry and calls in the
//! wrong state; profile references carried in the PROOFs; sessions bound to
//! a call, alike or differently (11.4).

mod common;

use common::assert_kind;
use common::people::{befriend, befriended, labelled_seed, Person, EXCHANGED, T0};
use itsme::{
    DeterministicRandom, Error, ErrorKind, ExchangeMethod, OnlineVerify, OnlineVerifyState, Profile,
    ProfileReference, VerificationState, VoiceOutcome,
};

/// Both start a session at NOW, in the room of its window.
const NOW: i64 = T0 + 100;
const WINDOW: i64 = NOW / 30;
const COMMIT: u8 = 1;
const KEY: u8 = 2;
const PROOF: u8 = 3;
const LIFETIME: i64 = 600;

/// Which of the two sessions: Alice's or Bob's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    A,
    B,
}

/// A session of `person` with its peer; deterministic when labelled.
fn start(person: &Person, label: Option<&str>, window: Option<i64>, now: i64) -> OnlineVerify {
    let mut rng = label.map(|label| DeterministicRandom::new(&labelled_seed(&format!("{label} {}", person.name))).unwrap());
    OnlineVerify::new(&person.contacts, person.peer, window, None, now, rng.as_mut()).unwrap()
}

fn start_both(a: &Person, b: &Person, label: Option<&str>) -> (OnlineVerify, OnlineVerify) {
    (start(a, label, None, NOW), start(b, label, None, NOW))
}

/// One message delivered by the pipe.
struct Delivered {
    from: Side,
    message: Vec<u8>,
}

/// The relay room: moves messages both ways, one at a time, until neither
/// session has one to send.  `tamper(index, message)` may replace the
/// index-th message.  Returns the messages delivered and the first error
/// each side raised as a receiver.
fn pump(
    a: &mut OnlineVerify,
    b: &mut OnlineVerify,
    mut tamper: impl FnMut(usize, Vec<u8>) -> Vec<u8>,
) -> (Vec<Delivered>, Vec<(Side, Error)>) {
    let (mut log, mut errors) = (Vec::new(), Vec::<(Side, Error)>::new());
    let mut moved = true;
    while moved {
        moved = false;
        for from in [Side::A, Side::B] {
            let (sender, receiver) = if from == Side::A { (&mut *a, &mut *b) } else { (&mut *b, &mut *a) };
            let message = sender.next_outgoing().unwrap();
            if message.is_empty() {
                continue;
            }
            moved = true;
            let message = tamper(log.len(), message);
            if let Err(error) = receiver.receive(&message, NOW) {
                let to = if from == Side::A { Side::B } else { Side::A };
                if !errors.iter().any(|(side, _)| *side == to) {
                    errors.push((to, error));
                }
            }
            log.push(Delivered { from, message });
        }
    }
    (log, errors)
}

fn honest(a: &mut OnlineVerify, b: &mut OnlineVerify) -> Vec<Delivered> {
    let (log, errors) = pump(a, b, |_, m| m);
    assert!(errors.is_empty(), "{:?}", errors.iter().map(|(s, e)| format!("{s:?}: {e}")).collect::<Vec<_>>());
    log
}

/// The side of the person with the lower pid.
fn initiator(alice: &Person, bob: &Person) -> Side {
    if alice.public_key() < bob.public_key() {
        Side::A
    } else {
        Side::B
    }
}

fn other(side: Side) -> Side {
    if side == Side::A {
        Side::B
    } else {
        Side::A
    }
}

/// The error `side` raised, which must be a refused message, and its
/// session failed.
#[track_caller]
fn assert_failed(errors: &[(Side, Error)], side: Side, session: &OnlineVerify, what: &str) {
    let error = &errors.iter().find(|(s, _)| *s == side).unwrap_or_else(|| panic!("{what}: {side:?} refused nothing")).1;
    assert!(
        matches!(error.kind(), ErrorKind::MalformedMessage | ErrorKind::AuthenticationFailed | ErrorKind::InvalidKey),
        "{what}: {error}"
    );
    assert_eq!(session.state().unwrap(), OnlineVerifyState::Failed, "{what}");
}

#[test]
fn end_to_end() {
    let (alice, bob) = befriended();
    let (mut sa, mut sb) = start_both(&alice, &bob, None);
    // Both join the same room, named by the seed and the window.
    let room = sa.room().unwrap();
    assert_eq!(room, sb.room().unwrap());
    assert!(room.len() == 32 && room.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)), "{room}");
    assert_eq!((sa.window(), sb.window()), (WINDOW, WINDOW));
    assert_eq!(sa.state().unwrap(), OnlineVerifyState::Running);
    assert_kind(sa.sas(), ErrorKind::InvalidState);
    let log = honest(&mut sa, &mut sb);
    // COMMIT, the responder's KEY, the initiator's KEY, the two PROOFs.
    let first = initiator(&alice, &bob);
    let kinds: Vec<(bool, u8, usize)> = log.iter().map(|d| (d.from == first, d.message[1], d.message.len())).collect();
    assert_eq!(kinds[..3], [(true, COMMIT, 34), (false, KEY, 66), (true, KEY, 66)]);
    let mut proofs = kinds[3..].to_vec();
    proofs.sort();
    assert_eq!(proofs, [(false, PROOF, 82), (true, PROOF, 82)]);
    // Without a profile reference a PROOF is 32 bytes shorter than the
    // longest message.
    assert_eq!(itsme::ONLINE_VERIFY_MESSAGE_MAX, 82 + itsme::PROFILE_REFERENCE_BYTES);
    assert!(log.iter().all(|d| d.message[0] == 1), "protocol version 1");
    // Both show the same SAS.
    assert_eq!((sa.state().unwrap(), sb.state().unwrap()), (OnlineVerifyState::CompareSas, OnlineVerifyState::CompareSas));
    let sas = sa.sas().unwrap();
    assert_eq!(sas, sb.sas().unwrap());
    assert!(itsme::short_code_parse(&sas).is_ok(), "{sas}");
    // It matched: both confirm.
    assert_eq!(sa.confirm(NOW + 20).unwrap(), VoiceOutcome::Verified);
    assert_eq!(sb.confirm(NOW + 21).unwrap(), VoiceOutcome::Verified);
    for (person, session, when) in [(&alice, &mut sa, NOW + 20), (&bob, &mut sb, NOW + 21)] {
        let contact = person.contact();
        assert_eq!((contact.state, contact.verified_at), (VerificationState::Verified, Some(when)));
        assert_eq!(contact.last_window, None, "Online Verify uses no window");
        assert_eq!(session.state().unwrap(), OnlineVerifyState::Confirmed);
        assert!(session.next_outgoing().unwrap().is_empty());
        assert_kind(session.confirm(NOW + 22), ErrorKind::InvalidState);
        assert_kind(session.reject(), ErrorKind::InvalidState);
    }
}

#[test]
fn an_unverified_contact_becomes_verified() {
    let (mut alice, mut bob) = (Person::new("Alice", 1), Person::new("Bob", 2));
    befriend(&mut alice, &mut bob, false);
    let (mut sa, mut sb) = start_both(&alice, &bob, None);
    honest(&mut sa, &mut sb);
    assert_eq!(sa.confirm(NOW).unwrap(), VoiceOutcome::Verified);
    assert_eq!(alice.contact().state, VerificationState::Verified);
    assert_eq!(bob.contact().state, VerificationState::Unverified, "until Bob confirms too");
}

#[test]
fn a_rejected_sas_records_nothing() {
    let (alice, bob) = befriended();
    let (mut sa, mut sb) = start_both(&alice, &bob, None);
    honest(&mut sa, &mut sb);
    let before = alice.contact();
    sa.reject().unwrap();
    assert_eq!(sa.state().unwrap(), OnlineVerifyState::Rejected);
    assert_eq!(alice.contact(), before);
    assert_kind(sa.confirm(NOW), ErrorKind::InvalidState);
    assert_kind(sa.reject(), ErrorKind::InvalidState);
    // A session may be given up before the SAS, too.
    let mut early = start(&alice, None, None, NOW);
    early.reject().unwrap();
    assert_eq!(early.state().unwrap(), OnlineVerifyState::Rejected);
}

#[test]
fn a_changed_device_is_detected_inside_the_session() {
    let (alice, bob) = befriended();
    let new_alice = alice.on_new_device();
    let (mut sa, mut sb) = start_both(&new_alice, &bob, None);
    honest(&mut sa, &mut sb);
    assert_eq!(sa.sas().unwrap(), sb.sas().unwrap(), "the seed is the same: so is the SAS");
    assert_eq!(sa.confirm(NOW).unwrap(), VoiceOutcome::VerifiedTagUnchecked);
    assert_eq!(sb.confirm(NOW).unwrap(), VoiceOutcome::DeviceChanged);
    let contact = bob.contact();
    assert_eq!((contact.state, contact.acknowledged), (VerificationState::Degraded, false));
}

#[test]
fn without_the_seed_the_rooms_differ_and_the_proofs_fail() {
    let (mut alice, mut bob) = (Person::new("Alice", 1), Person::new("Bob", 2));
    alice.peer = alice.contacts.add("Bob", &bob.public_key(), &[0; 32], ExchangeMethod::Qr, EXCHANGED).unwrap();
    bob.peer = bob.contacts.add("Alice", &alice.public_key(), &[1; 32], ExchangeMethod::Qr, EXCHANGED).unwrap();
    let (mut sa, mut sb) = start_both(&alice, &bob, None);
    assert_ne!(sa.room().unwrap(), sb.room().unwrap(), "the two would not even meet");
    let (_, errors) = pump(&mut sa, &mut sb, |_, m| m);
    assert!(!errors.is_empty());
    assert!(errors.iter().all(|(_, e)| e.kind() == ErrorKind::AuthenticationFailed), "{errors:?}");
    assert_ne!(sa.state().unwrap(), OnlineVerifyState::CompareSas);
    assert_ne!(sb.state().unwrap(), OnlineVerifyState::CompareSas);
}

#[test]
fn a_flipped_byte_in_any_message_fails_its_receiver() {
    let (alice, bob) = befriended();
    let (mut sa, mut sb) = start_both(&alice, &bob, Some("flip"));
    let log = honest(&mut sa, &mut sb);
    assert_eq!(log.len(), 5);
    for (index, delivered) in log.iter().enumerate() {
        for position in 0..delivered.message.len() {
            // The same random sources: the same messages, up to this one.
            let (mut xa, mut xb) = start_both(&alice, &bob, Some("flip"));
            let mut flipped = delivered.message.clone();
            flipped[position] ^= 0xFF;
            let (_, errors) = pump(&mut xa, &mut xb, |i, m| if i == index { flipped.clone() } else { m });
            let receiver = other(delivered.from);
            let session = if receiver == Side::A { &xa } else { &xb };
            assert_failed(&errors, receiver, session, &format!("message {index}, byte {position}"));
        }
    }
}

#[test]
fn a_message_of_the_wrong_length_fails_its_receiver() {
    let (alice, bob) = befriended();
    let (mut sa, mut sb) = start_both(&alice, &bob, Some("length"));
    let log = honest(&mut sa, &mut sb);
    for (index, delivered) in log.iter().enumerate() {
        for changed in [delivered.message[..delivered.message.len() - 1].to_vec(), [&delivered.message[..], &[0]].concat()] {
            let (mut xa, mut xb) = start_both(&alice, &bob, Some("length"));
            let (_, errors) = pump(&mut xa, &mut xb, |i, m| if i == index { changed.clone() } else { m });
            let receiver = other(delivered.from);
            let error = &errors.iter().find(|(s, _)| *s == receiver).expect("refused").1;
            assert_eq!(error.kind(), ErrorKind::MalformedMessage, "message {index}: {error}");
        }
    }
}

#[test]
fn a_message_replayed_from_another_session_fails_its_receiver() {
    let (alice, bob) = befriended();
    let (mut sa, mut sb) = start_both(&alice, &bob, Some("earlier"));
    let old = honest(&mut sa, &mut sb);
    for (index, delivered) in old.iter().enumerate() {
        let (mut xa, mut xb) = start_both(&alice, &bob, Some(&format!("later {index}")));
        let (_, errors) = pump(&mut xa, &mut xb, |i, m| if i == index { delivered.message.clone() } else { m });
        let receiver = other(delivered.from);
        let session = if receiver == Side::A { &xa } else { &xb };
        assert_failed(&errors, receiver, session, &format!("message {index}"));
    }
}

#[test]
fn reflected_messages_fail() {
    let (alice, bob) = befriended();
    let (first, second) = if initiator(&alice, &bob) == Side::A { (&alice, &bob) } else { (&bob, &alice) };
    // The initiator's own COMMIT: an initiator takes none.
    let mut i = start(first, Some("reflect"), None, NOW);
    let commit = i.next_outgoing().unwrap();
    assert_eq!(commit[1], COMMIT);
    assert_kind(i.receive(&commit, NOW), ErrorKind::MalformedMessage);
    assert_eq!(i.state().unwrap(), OnlineVerifyState::Failed);
    assert!(i.next_outgoing().unwrap().is_empty(), "a failed session sends nothing");
    assert_kind(i.receive(&commit, NOW), ErrorKind::InvalidState);
    // The responder's own KEY: the commitment is checked before the
    // reflection (PROTOCOL.md 1.1, 11.2), and the initiator's COMMIT does
    // not match it. (online-verify.json's refusals hold a COMMIT made over
    // the reflected values, which gives invalid_key.)
    let mut r = start(second, Some("reflect"), None, NOW);
    r.receive(&commit, NOW).unwrap();
    let key = r.next_outgoing().unwrap();
    assert_kind(r.receive(&key, NOW), ErrorKind::AuthenticationFailed);
    assert_eq!(r.state().unwrap(), OnlineVerifyState::Failed);
    // An initiator given its own KEY as the responder's (the same random
    // source: the same key and challenge).
    let mut i2 = start(first, Some("reflect"), None, NOW);
    let mut r2 = start(second, Some("reflect 2"), None, NOW);
    r2.receive(&i2.next_outgoing().unwrap(), NOW).unwrap();
    i2.receive(&r2.next_outgoing().unwrap(), NOW).unwrap();
    let own_key = i2.next_outgoing().unwrap();
    assert_eq!(own_key[1], KEY);
    let mut i3 = start(first, Some("reflect"), None, NOW);
    i3.next_outgoing().unwrap();
    assert_kind(i3.receive(&own_key, NOW), ErrorKind::InvalidKey);
}

#[test]
fn messages_out_of_order_or_twice_fail() {
    let (alice, bob) = befriended();
    let (first, second) = if initiator(&alice, &bob) == Side::A { (&alice, &bob) } else { (&bob, &alice) };
    let mut i = start(first, None, None, NOW);
    let mut r = start(second, None, None, NOW);
    let commit = i.next_outgoing().unwrap();
    r.receive(&commit, NOW).unwrap();
    assert_kind(r.receive(&commit, NOW), ErrorKind::MalformedMessage);
    assert_eq!(r.state().unwrap(), OnlineVerifyState::Failed);
    let junk: [Vec<u8>; 5] =
        [[&[1, KEY][..], &[7; 64]].concat(), [&[2, COMMIT][..], &[0; 32]].concat(), vec![1, 9, 0, 0], vec![], vec![1]];
    for message in junk {
        let mut r = start(second, None, None, NOW);
        assert_kind(r.receive(&message, NOW), ErrorKind::MalformedMessage);
        assert_eq!(r.state().unwrap(), OnlineVerifyState::Failed);
    }
}

#[test]
fn once_both_proofs_are_in_further_messages_are_refused_without_failing() {
    let (alice, bob) = befriended();
    let (mut sa, mut sb) = start_both(&alice, &bob, None);
    let log = honest(&mut sa, &mut sb);
    assert_kind(sa.receive(&log[4].message, NOW), ErrorKind::InvalidState);
    assert_eq!(sa.state().unwrap(), OnlineVerifyState::CompareSas);
    assert_eq!(sa.confirm(NOW).unwrap(), VoiceOutcome::Verified);
}

#[test]
fn the_current_window_or_the_one_before() {
    let (alice, bob) = befriended();
    assert_eq!(start(&alice, None, None, NOW).window(), WINDOW);
    let before = start(&alice, None, Some(WINDOW - 1), NOW);
    assert_eq!(before.window(), WINDOW - 1);
    assert_ne!(before.room().unwrap(), start(&alice, None, None, NOW).room().unwrap());
    // Two who meet in the room of the window before still agree.
    let (mut sa, mut sb) = (start(&alice, None, Some(WINDOW - 1), NOW), start(&bob, None, Some(WINDOW - 1), NOW));
    assert_eq!(sa.room().unwrap(), sb.room().unwrap());
    honest(&mut sa, &mut sb);
    assert_eq!(sa.sas().unwrap(), sb.sas().unwrap());
    for window in [WINDOW + 1, WINDOW - 2, 0] {
        let refused = OnlineVerify::new(&alice.contacts, alice.peer, Some(window), None, NOW, None);
        let error = assert_kind(refused, ErrorKind::InvalidArgument);
        assert!(!error.detail.is_empty(), "the store's detail");
    }
}

#[test]
fn a_session_expires_after_ten_minutes() {
    let (alice, bob) = befriended();
    let (first, second) = if initiator(&alice, &bob) == Side::A { (&alice, &bob) } else { (&bob, &alice) };
    let mut i = start(first, None, None, NOW);
    let mut r = start(second, None, None, NOW);
    r.receive(&i.next_outgoing().unwrap(), NOW + LIFETIME).unwrap();
    assert_kind(i.receive(&r.next_outgoing().unwrap(), NOW + LIFETIME + 1), ErrorKind::Expired);
    assert_eq!(i.state().unwrap(), OnlineVerifyState::Failed);
    // A SAS confirmed too late is refused, and changes nothing.
    let (mut sa, mut sb) = start_both(&alice, &bob, None);
    honest(&mut sa, &mut sb);
    let before = alice.contact();
    assert_kind(sa.confirm(NOW + LIFETIME + 1), ErrorKind::Expired);
    assert_eq!(alice.contact(), before);
    assert_eq!(sa.state().unwrap(), OnlineVerifyState::Failed);
}

#[test]
fn constructor_and_confirm_arguments() {
    let (alice, bob) = befriended();
    let error =
        assert_kind(OnlineVerify::new(&alice.contacts, alice.peer + 100, None, None, NOW, None), ErrorKind::NotFound);
    assert!(!error.detail.is_empty());
    assert_kind(OnlineVerify::new(&alice.contacts, alice.peer, None, None, -1, None), ErrorKind::InvalidArgument);
    // The same random source draws the same key and challenge: the same
    // COMMIT from the initiator.
    let first = if initiator(&alice, &bob) == Side::A { &alice } else { &bob };
    let (mut one, mut two, mut three) =
        (start(first, Some("same"), None, NOW), start(first, Some("same"), None, NOW), start(first, None, None, NOW));
    let commit = one.next_outgoing().unwrap();
    assert_eq!(commit.len(), 34);
    assert_eq!(commit, two.next_outgoing().unwrap());
    assert_ne!(commit, three.next_outgoing().unwrap());
    // Confirm writes to the session's own store.
    let (mut sa, mut sb) = start_both(&alice, &bob, None);
    honest(&mut sa, &mut sb);
    assert_eq!(sa.state().unwrap(), OnlineVerifyState::CompareSas);
    assert_eq!(sa.confirm(NOW).unwrap(), VoiceOutcome::Verified);
    assert_eq!(alice.contacts.get(alice.peer).unwrap().state, VerificationState::Verified);
}

#[test]
fn sessions_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<OnlineVerify>();
}

// ---------------------------------------------------------------------------
// Bound to a call (PROTOCOL.md 11.4)
// ---------------------------------------------------------------------------

/// Two call bindings: what the host of each call holds (the DTLS-SRTP
/// exporter of the call, 32 bytes, in a real host).
const OUR_CALL: [u8; 32] = [0x0c; 32];
const OTHER_CALL: [u8; 16] = [0x0d; 16];

fn start_bound(person: &Person, binding: Option<&[u8]>) -> OnlineVerify {
    OnlineVerify::new(&person.contacts, person.peer, None, binding, NOW, None).unwrap()
}

#[test]
fn both_bound_to_one_call_compare_the_sas_and_confirm() {
    let (alice, bob) = befriended();
    let (mut sa, mut sb) = (start_bound(&alice, Some(&OUR_CALL)), start_bound(&bob, Some(&OUR_CALL[..])));
    assert_eq!(sa.room().unwrap(), sb.room().unwrap(), "the room does not depend on the binding");
    let log = honest(&mut sa, &mut sb);
    // A bound KEY carries bind (32 bytes): 98 bytes.
    assert_eq!(log.iter().map(|d| d.message.len()).collect::<Vec<_>>(), [34, 98, 98, 82, 82]);
    assert_eq!(sa.state().unwrap(), OnlineVerifyState::CompareSas);
    assert_eq!(sb.state().unwrap(), OnlineVerifyState::CompareSas);
    assert_eq!(sa.sas().unwrap(), sb.sas().unwrap());
    assert_eq!(sa.confirm(NOW).unwrap(), VoiceOutcome::Verified);
    assert_eq!(sb.confirm(NOW).unwrap(), VoiceOutcome::Verified);
    assert_eq!(alice.contact().state, VerificationState::Verified);
    assert_eq!(bob.contact().state, VerificationState::Verified);
}

#[test]
fn bound_differently_both_end_without_a_sas_and_record_nothing() {
    let (ours, theirs): (&[u8], &[u8]) = (&OUR_CALL, &OTHER_CALL);
    let cases = [
        (Some(ours), None, OnlineVerifyState::BindingDiffers),
        (None, Some(ours), OnlineVerifyState::BindingDiffers),
        (Some(ours), Some(theirs), OnlineVerifyState::OtherCall),
    ];
    for (a_binding, b_binding, ends) in cases {
        let what = format!("{ends:?}, Alice bound: {}", a_binding.is_some());
        let (alice, bob) = befriended();
        let before = (alice.contact(), bob.contact());
        let (mut sa, mut sb) = (start_bound(&alice, a_binding), start_bound(&bob, b_binding));
        sa.share_profile(&reference(1)).unwrap();
        // Not a failure: each device proved it holds the seed.
        let log = honest(&mut sa, &mut sb);
        assert_eq!(log.len(), 5, "{what}");
        for delivered in log.iter().filter(|d| d.message[1] == KEY) {
            let bound = if delivered.from == Side::A { a_binding } else { b_binding }.is_some();
            assert_eq!(delivered.message.len(), if bound { 98 } else { 66 }, "{what}");
        }
        for session in [&mut sa, &mut sb] {
            assert_eq!(session.state().unwrap(), ends, "{what}");
            // Final: no SAS, nothing to confirm, reject or read, nothing more to send.
            assert_kind(session.sas(), ErrorKind::InvalidState);
            assert_kind(session.confirm(NOW), ErrorKind::InvalidState);
            assert_kind(session.reject(), ErrorKind::InvalidState);
            assert_kind(session.peer_profile(), ErrorKind::InvalidState);
            assert_kind(session.receive(&log[4].message, NOW), ErrorKind::InvalidState);
            assert!(session.next_outgoing().unwrap().is_empty(), "{what}");
            assert_eq!(session.state().unwrap(), ends, "{what}: still, after the refused calls");
        }
        assert_eq!((alice.contact(), bob.contact()), before, "{what}: nothing recorded");
    }
}

#[test]
fn a_binding_of_another_length_is_refused() {
    let (alice, _bob) = befriended();
    for length in [0, 1, itsme::CALL_BINDING_MIN - 1, itsme::CALL_BINDING_MAX + 1] {
        let binding = vec![7u8; length];
        let error = assert_kind(
            OnlineVerify::new(&alice.contacts, alice.peer, None, Some(&binding), NOW, None),
            ErrorKind::InvalidArgument,
        );
        assert!(error.detail.contains("binding"), "{length}: {}", error.detail);
    }
    for length in [itsme::CALL_BINDING_MIN, itsme::CALL_BINDING_MAX] {
        let session = start_bound(&alice, Some(&vec![7u8; length]));
        assert_eq!(session.state().unwrap(), OnlineVerifyState::Running);
    }
    assert_eq!((itsme::CALL_BINDING_MIN, itsme::CALL_BINDING_MAX), (16, 64));
}

// ---------------------------------------------------------------------------
// Profile references (PROTOCOL.md 11.3, 18.3)
// ---------------------------------------------------------------------------

/// A reference of fixed bytes, for sessions that only carry it.
fn reference(tag: u8) -> ProfileReference {
    ProfileReference::from_bytes(&[tag; itsme::PROFILE_REFERENCE_BYTES]).unwrap()
}

#[test]
fn a_shared_profile_reference_arrives_once_the_sas_is_confirmed() {
    let (alice, bob) = befriended();
    let (mut sa, mut sb) = start_both(&alice, &bob, None);
    // Alice shares hers; Bob shares none.
    let profile = Profile::create(&alice.identity, "Alice Smith", b"photo bytes", "alice.jpg", None).unwrap();
    let mine = profile.reference().unwrap();
    sa.share_profile(&mine).unwrap();
    assert_kind(sa.peer_profile(), ErrorKind::InvalidState);
    let log = honest(&mut sa, &mut sb);
    // Alice's PROOF carries 32 more bytes: the longest message.
    let proof_lengths: Vec<(Side, usize)> =
        log.iter().filter(|d| d.message[1] == PROOF).map(|d| (d.from, d.message.len())).collect();
    assert!(proof_lengths.contains(&(Side::A, itsme::ONLINE_VERIFY_MESSAGE_MAX)), "{proof_lengths:?}");
    assert!(proof_lengths.contains(&(Side::B, 82)), "{proof_lengths:?}");
    // Not before the SAS is confirmed: the proofs are checked, but the
    // person has not said the SAS matched.
    assert_eq!(sb.state().unwrap(), OnlineVerifyState::CompareSas);
    assert_kind(sb.peer_profile(), ErrorKind::InvalidState);
    assert_kind(sa.peer_profile(), ErrorKind::InvalidState);
    assert_eq!(sa.sas().unwrap(), sb.sas().unwrap());
    sb.confirm(NOW).unwrap();
    sa.confirm(NOW).unwrap();
    let received = sb.peer_profile().unwrap();
    assert_eq!(received, mine);
    assert_eq!(received.as_bytes(), mine.as_bytes());
    assert_eq!(format!("{received:?}"), "ProfileReference(..)", "no secret in Debug");
    // Alice received none.
    assert_kind(sa.peer_profile(), ErrorKind::NotFound);
    // Bob fetches the record the reference names, opens it with Alice's
    // key as he stored it, and applies it to his contact.
    assert_eq!(received.record_name(), profile.record_name().unwrap());
    let key = bob.contact().public_key.unwrap();
    let opened = Profile::open(&profile.record().unwrap(), &received, &key).unwrap();
    assert_eq!(opened.name().unwrap(), "Alice Smith");
    bob.contacts.apply_profile(bob.peer, &opened).unwrap();
    assert_eq!(bob.contact().name, "Alice Smith");
    assert_eq!(bob.contacts.photo(bob.peer).unwrap(), (b"photo bytes".to_vec(), "alice.jpg".to_owned()));
}

#[test]
fn both_may_share_and_the_last_reference_given_counts() {
    let (alice, bob) = befriended();
    let (mut sa, mut sb) = start_both(&alice, &bob, Some("share both"));
    sa.share_profile(&reference(1)).unwrap();
    sa.share_profile(&reference(2)).unwrap();
    sb.share_profile(&reference(3)).unwrap();
    let log = honest(&mut sa, &mut sb);
    assert!(log.iter().filter(|d| d.message[1] == PROOF).all(|d| d.message.len() == itsme::ONLINE_VERIFY_MESSAGE_MAX));
    sa.confirm(NOW).unwrap();
    sb.confirm(NOW).unwrap();
    assert_eq!(sb.peer_profile().unwrap(), reference(2));
    assert_eq!(sa.peer_profile().unwrap(), reference(3));
}

#[test]
fn a_reference_is_shared_before_the_proof_and_read_only_after_a_confirmed_sas() {
    let (alice, bob) = befriended();
    let (first, second) = if initiator(&alice, &bob) == Side::A { (&alice, &bob) } else { (&bob, &alice) };
    // Wrong sizes.
    let mut session = start(first, None, None, NOW);
    for length in [0usize, 16, 31, 33, 64] {
        assert_kind(session.share_profile(&vec![7u8; length]), ErrorKind::InvalidArgument);
    }
    assert_eq!(session.state().unwrap(), OnlineVerifyState::Running, "refused without failing");
    // The initiator makes its PROOF on the responder's KEY, the responder
    // on the initiator's KEY: sharing is refused from then on.
    let mut i = start(first, None, None, NOW);
    let mut r = start(second, None, None, NOW);
    r.receive(&i.next_outgoing().unwrap(), NOW).unwrap();
    r.share_profile(&reference(4)).unwrap();
    i.receive(&r.next_outgoing().unwrap(), NOW).unwrap();
    assert_kind(i.share_profile(&reference(5)), ErrorKind::InvalidState);
    let key_i = i.next_outgoing().unwrap();
    let proof_i = i.next_outgoing().unwrap();
    assert_eq!((proof_i[1], proof_i.len()), (PROOF, 82));
    r.share_profile(&reference(6)).unwrap();
    r.receive(&key_i, NOW).unwrap();
    assert_kind(r.share_profile(&reference(7)), ErrorKind::InvalidState);
    let proof_r = r.next_outgoing().unwrap();
    assert_eq!((proof_r[1], proof_r.len()), (PROOF, itsme::ONLINE_VERIFY_MESSAGE_MAX));
    r.receive(&proof_i, NOW).unwrap();
    i.receive(&proof_r, NOW).unwrap();
    assert_kind(i.peer_profile(), ErrorKind::InvalidState);
    // A rejected SAS gives no reference.
    i.reject().unwrap();
    assert_kind(i.peer_profile(), ErrorKind::InvalidState);
    assert_kind(i.share_profile(&reference(8)), ErrorKind::InvalidState);
    // A failed session neither takes nor gives one.
    let mut failed = start(first, None, None, NOW);
    let own = failed.next_outgoing().unwrap();
    assert_kind(failed.receive(&own, NOW), ErrorKind::MalformedMessage);
    assert_kind(failed.share_profile(&reference(9)), ErrorKind::InvalidState);
    assert_kind(failed.peer_profile(), ErrorKind::InvalidState);
}

#[test]
fn a_proof_with_a_reference_is_checked_like_any_other() {
    let (alice, bob) = befriended();
    let shared = |label: &str| {
        let (mut a, mut b) = start_both(&alice, &bob, Some(label));
        a.share_profile(&reference(1)).unwrap();
        b.share_profile(&reference(2)).unwrap();
        (a, b)
    };
    let (mut sa, mut sb) = shared("proof ref");
    let log = honest(&mut sa, &mut sb);
    for (index, delivered) in log.iter().enumerate().filter(|(_, d)| d.message[1] == PROOF) {
        assert_eq!(delivered.message.len(), itsme::ONLINE_VERIFY_MESSAGE_MAX);
        let receiver = other(delivered.from);
        // A flipped byte in the encrypted reference, or its tag.
        for position in [delivered.message.len() - 20, delivered.message.len() - 1] {
            let (mut xa, mut xb) = shared("proof ref");
            let mut flipped = delivered.message.clone();
            flipped[position] ^= 0x01;
            let (_, errors) = pump(&mut xa, &mut xb, |i, m| if i == index { flipped.clone() } else { m });
            let session = if receiver == Side::A { &xa } else { &xb };
            assert_failed(&errors, receiver, session, &format!("message {index}, byte {position}"));
        }
        // Any length but 82 and 114 is malformed.
        for changed in [delivered.message[..delivered.message.len() - 1].to_vec(), [&delivered.message[..], &[0]].concat()] {
            let (mut xa, mut xb) = shared("proof ref");
            let (_, errors) = pump(&mut xa, &mut xb, |i, m| if i == index { changed.clone() } else { m });
            let error = &errors.iter().find(|(s, _)| *s == receiver).expect("refused").1;
            assert_eq!(error.kind(), ErrorKind::MalformedMessage, "message {index}: {error}");
        }
    }
}
