//! Security PIN Update through the safe Rust API (docs/PROTOCOL.md section
//! 10.3): two people who exchanged by QR replace their device secrets over
//! an in-memory link standing in for Bluetooth.  A whole update, every
//! point at which the link can break, a degraded contact restored,
//! tampered, replayed and reflected frames, a peer without the seed, the
//! window rule and expiry.

mod common;

use common::assert_kind;
use common::people::{befriended, labelled_seed, verify, Person, EXCHANGED, T0};
use itsme::{DeterministicRandom, Error, ErrorKind, ExchangeMethod, PinUpdate, PinUpdateState, VerificationState, VoiceOutcome};

/// Both start the update at NOW; voice verifications follow.
const NOW: i64 = T0 + 300;
const WINDOW: i64 = NOW / 30;
const KEY: u8 = 1;
const NEW: u8 = 2;
const DONE: u8 = 3;
const FRAMES: usize = 5;
const LIFETIME: i64 = 600;
const BOTH_VERIFIED: (VoiceOutcome, VoiceOutcome) = (VoiceOutcome::Verified, VoiceOutcome::Verified);

/// An update of `person` with its peer at `now`; deterministic when
/// labelled.
fn start(person: &Person, label: Option<&str>, window: Option<i64>, now: i64) -> PinUpdate {
    let mut rng = label.map(|label| DeterministicRandom::new(&labelled_seed(&format!("{label} {}", person.name))).unwrap());
    PinUpdate::new(&person.contacts, person.peer, window, now, rng.as_mut()).unwrap()
}

/// The two people, the initiator (the lower pid) first.
fn by_role<'a>(alice: &'a Person, bob: &'a Person) -> (&'a Person, &'a Person) {
    if alice.public_key() < bob.public_key() {
        (alice, bob)
    } else {
        (bob, alice)
    }
}

/// The two updates, the initiator's first.
fn start_both(alice: &Person, bob: &Person, label: Option<&str>, now: i64) -> (PinUpdate, PinUpdate) {
    let (first, second) = by_role(alice, bob);
    (start(first, label, None, now), start(second, label, None, now))
}

/// One frame delivered by the link.
struct Delivered {
    from_initiator: bool,
    frame: Vec<u8>,
}

/// The link: moves frames both ways, one at a time, the initiator's first,
/// until neither side has one to send.  Only the first `limit` frames are
/// delivered; then the link breaks.  `tamper(index, frame)` may replace
/// the index-th frame.  Returns the frames delivered, and the first error
/// each side raised as a receiver (true: the initiator).
fn pump(
    initiator: &mut PinUpdate,
    responder: &mut PinUpdate,
    now: i64,
    limit: usize,
    mut tamper: impl FnMut(usize, Vec<u8>) -> Vec<u8>,
) -> (Vec<Delivered>, Vec<(bool, Error)>) {
    let (mut log, mut errors) = (Vec::new(), Vec::<(bool, Error)>::new());
    let mut moved = true;
    while moved {
        moved = false;
        for from_initiator in [true, false] {
            if log.len() >= limit {
                return (log, errors);
            }
            let (sender, receiver) =
                if from_initiator { (&mut *initiator, &mut *responder) } else { (&mut *responder, &mut *initiator) };
            let frame = sender.next_outgoing().unwrap();
            if frame.is_empty() {
                continue;
            }
            moved = true;
            let frame = tamper(log.len(), frame);
            if let Err(error) = receiver.receive(&frame, now) {
                let to_initiator = !from_initiator;
                if !errors.iter().any(|(side, _)| *side == to_initiator) {
                    errors.push((to_initiator, error));
                }
            }
            log.push(Delivered { from_initiator, frame });
        }
    }
    (log, errors)
}

fn honest(initiator: &mut PinUpdate, responder: &mut PinUpdate, now: i64) -> Vec<Delivered> {
    let (log, errors) = pump(initiator, responder, now, usize::MAX, |_, f| f);
    assert!(errors.is_empty(), "{:?}", errors.iter().map(|(s, e)| format!("{s}: {e}")).collect::<Vec<_>>());
    log
}

/// A refused frame: the error is one of a refused frame's, and the update
/// failed.
#[track_caller]
fn assert_refused(error: &Error, update: &PinUpdate, what: &str) {
    assert!(
        matches!(error.kind(), ErrorKind::MalformedMessage | ErrorKind::AuthenticationFailed | ErrorKind::InvalidKey),
        "{what}: {error}"
    );
    assert_eq!(update.state().unwrap(), PinUpdateState::Failed, "{what}");
}

#[test]
fn end_to_end() {
    let (alice, bob) = befriended();
    let (mut initiator, mut responder) = start_both(&alice, &bob, None, NOW);
    // Both show the same session code, from the seed and the window.
    let code = initiator.session_code().unwrap();
    assert_eq!(code, responder.session_code().unwrap());
    assert!(itsme::short_code_parse(&code).is_ok(), "{code}");
    assert_eq!((initiator.window(), responder.window()), (WINDOW, WINDOW));
    assert_eq!(initiator.state().unwrap(), PinUpdateState::Running);
    let log = honest(&mut initiator, &mut responder, NOW);
    // Both KEYs, the initiator's NEW, the responder's NEW, DONE.
    let frames: Vec<(bool, u8, usize)> = log.iter().map(|d| (d.from_initiator, d.frame[1], d.frame.len())).collect();
    assert_eq!(frames, [(true, KEY, 34), (false, KEY, 34), (true, NEW, 66), (false, NEW, 66), (true, DONE, 18)]);
    assert_eq!(log.iter().map(|d| d.frame.len()).max(), Some(itsme::PIN_UPDATE_FRAME_MAX));
    for update in [&mut initiator, &mut responder] {
        assert_eq!(update.state().unwrap(), PinUpdateState::Done);
        assert!(update.next_outgoing().unwrap().is_empty());
    }
    assert_eq!((alice.contact().state, bob.contact().state), (VerificationState::Verified, VerificationState::Verified));
    // Done on this side: no more frames.
    assert_kind(responder.receive(&log[4].frame, NOW), ErrorKind::InvalidState);
    assert_eq!(responder.state().unwrap(), PinUpdateState::Done);
    // The new device secrets are in use on both sides.
    assert_eq!(verify(&alice, &bob, NOW + 60), BOTH_VERIFIED);
    assert_eq!(verify(&alice, &bob, NOW + 150), BOTH_VERIFIED);
}

#[test]
fn every_interruption_point_leaves_both_able_to_verify() {
    for delivered in 0..=FRAMES {
        let (alice, bob) = befriended();
        let (mut initiator, mut responder) = start_both(&alice, &bob, None, NOW);
        let (log, errors) = pump(&mut initiator, &mut responder, NOW, delivered, |_, f| f);
        assert_eq!(log.len(), delivered);
        assert!(errors.is_empty(), "{delivered}");
        // The initiator is done once the responder's NEW arrived, the
        // responder once DONE did.
        let done = |yes: bool| if yes { PinUpdateState::Done } else { PinUpdateState::Running };
        assert_eq!(initiator.state().unwrap(), done(delivered >= 4), "{delivered}");
        assert_eq!(responder.state().unwrap(), done(delivered == 5), "{delivered}");
        // Two verifications in a row: both verified, never a false "device
        // changed".
        for plan in [NOW + 60, NOW + 150] {
            assert_eq!(verify(&alice, &bob, plan), BOTH_VERIFIED, "{delivered} frames, plan {plan}");
        }
        assert_eq!((alice.contact().state, bob.contact().state), (VerificationState::Verified, VerificationState::Verified));
        // A whole update afterwards, and verification still works.
        let later = NOW + 600;
        let (mut initiator, mut responder) = start_both(&alice, &bob, None, later);
        assert_eq!(honest(&mut initiator, &mut responder, later).len(), FRAMES);
        assert_eq!(verify(&alice, &bob, later + 60), BOTH_VERIFIED, "{delivered}");
    }
}

#[test]
fn an_update_restores_a_degraded_contact() {
    let (alice, bob) = befriended();
    let new_alice = alice.on_new_device();
    assert_eq!(verify(&new_alice, &bob, NOW - 120), (VoiceOutcome::VerifiedTagUnchecked, VoiceOutcome::DeviceChanged));
    assert_eq!(bob.contact().state, VerificationState::Degraded);
    let (mut initiator, mut responder) = start_both(&new_alice, &bob, None, NOW);
    assert_eq!(initiator.session_code().unwrap(), responder.session_code().unwrap());
    assert_eq!(honest(&mut initiator, &mut responder, NOW).len(), FRAMES);
    assert_eq!((new_alice.contact().state, bob.contact().state), (VerificationState::Verified, VerificationState::Verified));
    // Both check each other's tags again.
    assert_eq!(verify(&new_alice, &bob, NOW + 60), BOTH_VERIFIED);
    assert_eq!(bob.contact().state, VerificationState::Verified);
}

#[test]
fn a_flipped_byte_in_any_frame_fails() {
    let (alice, bob) = befriended();
    let (mut i, mut r) = start_both(&alice, &bob, Some("flip"), NOW);
    let log = honest(&mut i, &mut r, NOW);
    for (index, delivered) in log.iter().enumerate() {
        for position in 0..delivered.frame.len() {
            let what = format!("frame {index}, byte {position}");
            let (mut initiator, mut responder) = start_both(&alice, &bob, Some("flip"), NOW);
            let mut flipped = delivered.frame.clone();
            flipped[position] ^= 0xFF;
            let (_, errors) =
                pump(&mut initiator, &mut responder, NOW, usize::MAX, |i, f| if i == index { flipped.clone() } else { f });
            let receiver_is_initiator = !delivered.from_initiator;
            if delivered.frame[1] == KEY {
                // A changed KEY is found out by the NEW that follows: then
                // one side or the other refuses a frame.
                assert!(!errors.is_empty(), "{what}");
            } else {
                assert!(errors.iter().any(|(side, _)| *side == receiver_is_initiator), "{what}");
            }
            for (side, error) in &errors {
                assert_refused(error, if *side { &initiator } else { &responder }, &what);
            }
            let receiver = if receiver_is_initiator { &initiator } else { &responder };
            assert_ne!(receiver.state().unwrap(), PinUpdateState::Done, "{what}");
        }
    }
}

#[test]
fn frames_replayed_from_another_update_fail() {
    let (alice, bob) = befriended();
    let (mut i, mut r) = start_both(&alice, &bob, Some("earlier"), NOW);
    let old = honest(&mut i, &mut r, NOW);
    for (index, delivered) in old.iter().enumerate() {
        let (mut initiator, mut responder) = start_both(&alice, &bob, Some(&format!("later {index}")), NOW);
        let (_, errors) =
            pump(&mut initiator, &mut responder, NOW, usize::MAX, |i, f| if i == index { delivered.frame.clone() } else { f });
        assert!(!errors.is_empty(), "frame {index}");
        assert!(errors.iter().all(|(_, e)| e.kind() == ErrorKind::AuthenticationFailed), "frame {index}: {errors:?}");
        if delivered.frame[1] != KEY {
            // A KEY is not authenticated by itself: the NEW frames find it
            // out.  Any other frame is refused by its receiver.
            let to_initiator = !delivered.from_initiator;
            assert!(errors.iter().any(|(side, _)| *side == to_initiator), "frame {index}");
        }
    }
}

#[test]
fn a_reflected_key_fails() {
    let (alice, bob) = befriended();
    let (initiator, responder) = start_both(&alice, &bob, None, NOW);
    for mut update in [initiator, responder] {
        let key = update.next_outgoing().unwrap();
        assert_kind(update.receive(&key, NOW), ErrorKind::InvalidKey);
        assert_eq!(update.state().unwrap(), PinUpdateState::Failed);
        assert!(update.next_outgoing().unwrap().is_empty());
        assert_kind(update.receive(&key, NOW), ErrorKind::InvalidState);
    }
}

#[test]
fn frames_out_of_order_or_twice_fail() {
    let (alice, bob) = befriended();
    let (mut initiator, mut responder) = start_both(&alice, &bob, None, NOW);
    let key = initiator.next_outgoing().unwrap();
    responder.receive(&key, NOW).unwrap();
    assert_kind(responder.receive(&key, NOW), ErrorKind::MalformedMessage);
    assert_eq!(responder.state().unwrap(), PinUpdateState::Failed);
    let junk: [Vec<u8>; 7] = [
        [&[1, NEW][..], &[0; 64]].concat(),
        [&[1, DONE][..], &[0; 16]].concat(),
        [&[2, KEY][..], &[9; 32]].concat(),
        key[..33].to_vec(),
        vec![1, 9],
        vec![],
        vec![1],
    ];
    for frame in junk {
        let (_, mut responder) = start_both(&alice, &bob, None, NOW);
        assert_kind(responder.receive(&frame, NOW), ErrorKind::MalformedMessage);
        assert_eq!(responder.state().unwrap(), PinUpdateState::Failed);
    }
}

#[test]
fn a_peer_without_the_seed_fails() {
    let (mut alice, mut bob) = (Person::new("Alice", 1), Person::new("Bob", 2));
    alice.peer = alice.contacts.add("Bob", &bob.public_key(), &[0; 32], ExchangeMethod::Qr, EXCHANGED).unwrap();
    bob.peer = bob.contacts.add("Alice", &alice.public_key(), &[1; 32], ExchangeMethod::Qr, EXCHANGED).unwrap();
    let (mut initiator, mut responder) = start_both(&alice, &bob, None, NOW);
    assert_ne!(initiator.session_code().unwrap(), responder.session_code().unwrap(), "they would not even meet");
    let (_, errors) = pump(&mut initiator, &mut responder, NOW, usize::MAX, |_, f| f);
    assert!(!errors.is_empty());
    assert!(errors.iter().all(|(_, e)| e.kind() == ErrorKind::AuthenticationFailed), "{errors:?}");
    assert_ne!(initiator.state().unwrap(), PinUpdateState::Done);
    assert_ne!(responder.state().unwrap(), PinUpdateState::Done);
}

#[test]
fn the_current_window_or_the_one_before() {
    let (alice, bob) = befriended();
    assert_eq!(start(&alice, None, None, NOW).window(), WINDOW);
    let before = start(&alice, None, Some(WINDOW - 1), NOW);
    assert_eq!(before.window(), WINDOW - 1);
    assert_ne!(before.session_code().unwrap(), start(&alice, None, None, NOW).session_code().unwrap());
    // Two who meet on the code of the window before still complete.
    let (first, second) = by_role(&alice, &bob);
    let (mut initiator, mut responder) = (start(first, None, Some(WINDOW - 1), NOW), start(second, None, Some(WINDOW - 1), NOW));
    assert_eq!(initiator.session_code().unwrap(), responder.session_code().unwrap());
    assert_eq!(honest(&mut initiator, &mut responder, NOW).len(), FRAMES);
    for window in [WINDOW + 1, WINDOW - 2, 0] {
        let error = assert_kind(PinUpdate::new(&alice.contacts, alice.peer, Some(window), NOW, None), ErrorKind::InvalidArgument);
        assert!(!error.detail.is_empty(), "the store's detail");
    }
}

#[test]
fn an_update_expires_after_ten_minutes() {
    let (alice, bob) = befriended();
    let (mut initiator, mut responder) = start_both(&alice, &bob, None, NOW);
    responder.receive(&initiator.next_outgoing().unwrap(), NOW + LIFETIME).unwrap();
    assert_kind(initiator.receive(&responder.next_outgoing().unwrap(), NOW + LIFETIME + 1), ErrorKind::Expired);
    assert_eq!(initiator.state().unwrap(), PinUpdateState::Failed);
    assert_eq!((alice.contact().state, bob.contact().state), (VerificationState::Verified, VerificationState::Verified));
}

#[test]
fn constructor_arguments() {
    let (alice, _bob) = befriended();
    let error = assert_kind(PinUpdate::new(&alice.contacts, alice.peer + 100, None, NOW, None), ErrorKind::NotFound);
    assert!(!error.detail.is_empty());
    assert_kind(PinUpdate::new(&alice.contacts, alice.peer, None, -1, None), ErrorKind::InvalidArgument);
    // The same random source draws the same key.
    let (mut one, mut two, mut three) =
        (start(&alice, Some("same"), None, NOW), start(&alice, Some("same"), None, NOW), start(&alice, None, None, NOW));
    let key = one.next_outgoing().unwrap();
    assert_eq!(key.len(), 34);
    assert_eq!(key, two.next_outgoing().unwrap());
    assert_ne!(key, three.next_outgoing().unwrap());
}

#[test]
fn updates_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<PinUpdate>();
}
