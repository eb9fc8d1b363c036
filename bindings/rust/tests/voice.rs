//! Voice verification through the safe Rust API (docs/PROTOCOL.md sections
//! 9 and 10): two people who added each other by a real QR exchange run
//! sessions at fixed times: verified end to end, a wrong code, a changed
//! device, a word that is not the selector's, a used window, a session
//! that ran out; and a contact without device secrets against the pure
//! derivations; sessions bound to one call, to different calls, or one
//! bound and one not (9.7).

mod common;

use common::{assert_kind, TempDir};
use itsme::{
    Contact, ContactStore, DeterministicRandom, ErrorKind, Exchange, ExchangeMethod, Identity, SecretStore,
    VerificationState, VoiceOutcome, VoiceSession, VoiceState, VoiceTiming, VoiceTurn,
};

/// A window boundary: the window W0 begins at T0.
const T0: i64 = 1_800_000_000;
const W0: i64 = T0 / 30;
/// They met an hour earlier, and plan 20 seconds before W0 begins.
const EXCHANGED: i64 = T0 - 3600;
const PLAN: i64 = T0 - 20;
/// A session lasts until the end of the window after its own.
const END: i64 = 30 * (W0 + 2);

/// A person: an identity in its own memory secret store, its contacts, and
/// the id under which it stored the other person.
struct Party {
    _secrets: SecretStore,
    identity: Identity,
    contacts: ContactStore,
    peer: i64,
    _dir: TempDir,
}

impl Party {
    fn new(name: &str, tag: u8) -> Party {
        let dir = TempDir::new(&format!("voice-{}", name.to_lowercase()));
        let secrets = SecretStore::memory().unwrap();
        let mut rng = DeterministicRandom::new(&[tag; 32]).unwrap();
        let identity = Identity::create_with_random(&secrets, name, Some(&mut rng)).unwrap();
        let contacts = ContactStore::open(&identity, dir.path().join("contacts.db")).unwrap();
        Party { _secrets: secrets, identity, contacts, peer: 0, _dir: dir }
    }

    fn contact(&self) -> Contact {
        self.contacts.get(self.peer).unwrap()
    }

    fn plan(&self, now: i64) -> VoiceSession {
        self.plan_bound(now, None)
    }

    /// A session bound to the call `binding` (`None`: not bound).
    fn plan_bound(&self, now: i64, binding: Option<&[u8]>) -> VoiceSession {
        VoiceSession::new(&self.contacts, self.peer, binding, now).unwrap()
    }
}

/// Alice and Bob after a whole QR exchange: each scans the other's code,
/// the SAS match, both confirm.
fn befriended() -> (Party, Party) {
    let (mut alice, mut bob) = (Party::new("Alice", 1), Party::new("Bob", 2));
    let mut xa = Exchange::qr(&alice.identity, &alice.contacts, EXCHANGED, None).unwrap();
    let mut xb = Exchange::qr(&bob.identity, &bob.contacts, EXCHANGED, None).unwrap();
    let (from_a, from_b) = (xa.next_outgoing().unwrap(), xb.next_outgoing().unwrap());
    xa.receive(&from_b, EXCHANGED).unwrap();
    xb.receive(&from_a, EXCHANGED).unwrap();
    assert_eq!(xa.sas().unwrap(), xb.sas().unwrap());
    alice.peer = xa.confirm(EXCHANGED).unwrap();
    bob.peer = xb.confirm(EXCHANGED).unwrap();
    (alice, bob)
}

/// Both sessions started when their window begins; returns that time.
fn start_both(sa: &mut VoiceSession, sb: &mut VoiceSession) -> i64 {
    assert_eq!(sa.window().unwrap(), sb.window().unwrap());
    let now = 30 * sa.window().unwrap();
    sa.start(now).unwrap();
    sb.start(now).unwrap();
    now
}

/// Whether `a` selects first; checks that the two sides agree.
fn a_selects_first(a: &VoiceSession, b: &VoiceSession) -> bool {
    match (a.turn().unwrap(), b.turn().unwrap()) {
        (VoiceTurn::Mine, VoiceTurn::Theirs) => true,
        (VoiceTurn::Theirs, VoiceTurn::Mine) => false,
        turns => panic!("the two sides disagree on whose turn it is: {turns:?}"),
    }
}

/// The two selections: each selector says their first word, the other
/// enters it.  Returns (w1, w2).
fn select_both(sa: &mut VoiceSession, sb: &mut VoiceSession, now: i64) -> (u32, u32) {
    let (first, second) = if a_selects_first(sa, sb) { (sa, sb) } else { (sb, sa) };
    let w1 = u32::from(first.words().unwrap()[0]);
    first.select(w1, now).unwrap();
    second.select(w1, now).unwrap();
    assert_eq!((first.turn().unwrap(), second.turn().unwrap()), (VoiceTurn::Theirs, VoiceTurn::Mine));
    let w2 = u32::from(second.words().unwrap()[0]);
    second.select(w2, now).unwrap();
    first.select(w2, now).unwrap();
    (w1, w2)
}

/// Two sessions planned at `plan`, started, and with both words entered.
fn to_codes(alice: &Party, bob: &Party, plan: i64) -> (VoiceSession, VoiceSession, i64) {
    let (mut sa, mut sb) = (alice.plan(plan), bob.plan(plan));
    let now = start_both(&mut sa, &mut sb);
    select_both(&mut sa, &mut sb, now);
    assert_eq!(sa.state().unwrap(), VoiceState::Comparing);
    assert_eq!(sb.state().unwrap(), VoiceState::Comparing);
    (sa, sb, now)
}

/// A well-formed code that differs from `text`.
fn other_code(text: &str) -> String {
    let (word, digits) = text.split_once(' ').unwrap();
    format!("{word} {:03}", (digits.parse::<u32>().unwrap() + 1) % 1000)
}

#[test]
fn end_to_end_verified() {
    let (alice, bob) = befriended();
    let (mut sa, mut sb) = (alice.plan(PLAN), bob.plan(PLAN));
    // Both plan the same window, and wait as long.
    let expected = VoiceTiming { window: W0, starts_in: 20, ends_in: END - PLAN };
    assert_eq!(sa.timing(PLAN).unwrap(), expected);
    assert_eq!(sb.timing(PLAN).unwrap(), expected);
    assert_eq!(sa.status().unwrap(), (VoiceState::Waiting, VoiceTurn::None));
    // Too early: refused, nothing changes.
    let error = assert_kind(sa.start(PLAN), ErrorKind::InvalidState);
    assert!(!error.detail.is_empty());
    assert_eq!(sa.state().unwrap(), VoiceState::Waiting);
    assert_eq!(alice.contact().last_window, None);

    let now = start_both(&mut sa, &mut sb);
    assert_eq!((alice.contact().last_window, bob.contact().last_window), (Some(W0), Some(W0)));
    let id = sa.session_id().unwrap();
    assert_eq!(id, sb.session_id().unwrap());
    let (word, digits) = id.split_once(' ').unwrap();
    assert!((0..26).any(|i| itsme::nato_word(i) == Some(word)), "{id}");
    assert_eq!(digits.len(), 2);
    for session in [&sa, &sb] {
        let words = session.words().unwrap();
        assert!(words.windows(2).all(|w| w[0] < w[1]) && words[4] < 26, "{words:?}");
    }
    assert_kind(sa.your_code(), ErrorKind::InvalidState);
    select_both(&mut sa, &mut sb, now);
    for session in [&sa, &sb] {
        assert_eq!(session.status().unwrap(), (VoiceState::Comparing, VoiceTurn::None));
    }
    // What each reads aloud is what the other expects, tags included.
    let (a_code, a_tag) = sa.your_code().unwrap();
    let (b_code, b_tag) = sb.your_code().unwrap();
    assert_eq!(sb.their_code().unwrap(), (a_code.clone(), Some(a_tag)));
    assert_eq!(sa.their_code().unwrap(), (b_code.clone(), Some(b_tag)));
    assert_ne!(a_code, b_code);
    assert!(a_tag < 100 && b_tag < 100);

    assert_eq!(sa.check(&b_code, b_tag, now + 5).unwrap(), VoiceOutcome::Verified);
    assert_eq!(sb.check(&a_code, a_tag, now + 6).unwrap(), VoiceOutcome::Verified);
    for (party, session, when) in [(&alice, &sa, now + 5), (&bob, &sb, now + 6)] {
        let contact = party.contact();
        assert_eq!((contact.state, contact.verified_at), (VerificationState::Verified, Some(when)));
        assert_eq!(session.status().unwrap(), (VoiceState::Finished, VoiceTurn::None));
    }
    assert_kind(sa.check(&b_code, b_tag, now + 7), ErrorKind::InvalidState);
    // The window is used: the next session gets the next one.
    assert_eq!(alice.plan(PLAN).window().unwrap(), W0 + 1);
}

#[test]
fn wrong_code_and_echo_are_mismatches() {
    let (alice, bob) = befriended();
    let (mut sa, sb, now) = to_codes(&alice, &bob, PLAN);
    let before = alice.contact();
    let (b_code, b_tag) = sb.your_code().unwrap();
    assert_eq!(sa.check(&other_code(&b_code), b_tag, now).unwrap(), VoiceOutcome::Mismatch);
    assert_eq!(alice.contact(), before, "nothing changed");
    assert_eq!(sa.state().unwrap(), VoiceState::Finished);
    // Next window: Alice echoes Bob's code back, so Bob hears his own.
    let (_sa2, mut sb2, later) = to_codes(&alice, &bob, PLAN + 30);
    let before = bob.contact();
    let (own, own_tag) = sb2.your_code().unwrap();
    assert_eq!(sb2.check(&own, own_tag, later).unwrap(), VoiceOutcome::Mismatch);
    assert_eq!(bob.contact(), before, "nothing changed");
}

#[test]
fn right_code_wrong_tag_is_a_changed_device() {
    let (alice, bob) = befriended();
    let (mut sa, sb, now) = to_codes(&alice, &bob, PLAN);
    let (code, tag) = sb.your_code().unwrap();
    assert_eq!(sa.check(&code, (tag + 1) % 100, now).unwrap(), VoiceOutcome::DeviceChanged);
    let contact = alice.contact();
    assert_eq!((contact.state, contact.acknowledged), (VerificationState::Degraded, false));
    // A degraded contact verifies with the right tag, and stays degraded.
    let (mut sa2, sb2, later) = to_codes(&alice, &bob, PLAN + 30);
    let (code, tag) = sb2.your_code().unwrap();
    assert_eq!(sa2.check(&code, tag, later).unwrap(), VoiceOutcome::Verified);
    assert_eq!(alice.contact().state, VerificationState::Degraded);
}

#[test]
fn a_word_not_among_the_selectors_five_fails_the_session() {
    let (alice, bob) = befriended();
    let (mut sa, mut sb) = (alice.plan(PLAN), bob.plan(PLAN));
    let now = start_both(&mut sa, &mut sb);
    let (first, second) = if a_selects_first(&sa, &sb) { (&mut sa, &mut sb) } else { (&mut sb, &mut sa) };
    let words = first.words().unwrap();
    let not_theirs = (0..26u32).find(|w| !words.contains(&(*w as u8))).unwrap();
    // On my turn, a word that is not mine changes nothing.
    assert_kind(first.select(not_theirs, now), ErrorKind::InvalidArgument);
    assert_eq!(first.status().unwrap(), (VoiceState::Selecting, VoiceTurn::Mine));
    assert_kind(first.select(26, now), ErrorKind::InvalidArgument);
    // On their turn, it ends the session: no retry.
    let error = assert_kind(second.select(not_theirs, now), ErrorKind::AuthenticationFailed);
    assert!(!error.detail.is_empty());
    assert_eq!(second.status().unwrap(), (VoiceState::Failed, VoiceTurn::None));
    assert_kind(second.select(u32::from(words[0]), now), ErrorKind::InvalidState);
    assert_kind(second.your_code(), ErrorKind::InvalidState);
}

#[test]
fn words_in_the_wrong_order_give_codes_that_differ() {
    let (alice, bob) = befriended();
    // A window in which both have two words in common, so that either order
    // can be entered: planning uses no window.
    let (mut sa, mut sb, common) = (0..300)
        .find_map(|k| {
            let (sa, sb) = (alice.plan(PLAN + 30 * k), bob.plan(PLAN + 30 * k));
            let theirs = sb.words().unwrap();
            let common: Vec<u32> =
                sa.words().unwrap().iter().filter(|w| theirs.contains(w)).map(|w| u32::from(*w)).collect();
            (common.len() >= 2).then_some((sa, sb, common))
        })
        .expect("a window with two common words");
    let now = start_both(&mut sa, &mut sb);
    let (x, y) = (common[0], common[1]);
    sa.select(x, now).unwrap();
    sa.select(y, now).unwrap();
    sb.select(y, now).unwrap();
    sb.select(x, now).unwrap();
    assert_ne!(sa.your_code().unwrap().0, sb.their_code().unwrap().0);
    let (code, tag) = sb.your_code().unwrap();
    assert_eq!(sa.check(&code, tag, now).unwrap(), VoiceOutcome::Mismatch);
}

#[test]
fn a_window_is_used_once() {
    let (alice, _bob) = befriended();
    let (mut one, mut two) = (alice.plan(PLAN), alice.plan(PLAN));
    assert_eq!((one.window().unwrap(), two.window().unwrap()), (W0, W0));
    one.start(T0).unwrap();
    assert_kind(two.start(T0), ErrorKind::WindowUsed);
    assert_eq!(two.state().unwrap(), VoiceState::Failed);
    assert_kind(two.start(T0), ErrorKind::InvalidState);
    // Planned at the same time again, or with the clock set back: the next
    // window.
    let three = alice.plan(PLAN);
    assert_eq!(three.timing(PLAN).unwrap(), VoiceTiming { window: W0 + 1, starts_in: 50, ends_in: 30 * (W0 + 3) - PLAN });
    assert_eq!(alice.plan(PLAN - 3600).window().unwrap(), W0 + 1);
}

#[test]
fn a_session_runs_out_at_the_end_of_the_next_window() {
    let (alice, bob) = befriended();
    let (mut sa, mut sb) = (alice.plan(PLAN), bob.plan(PLAN));
    start_both(&mut sa, &mut sb);
    let (first, second) = if a_selects_first(&sa, &sb) { (&mut sa, &mut sb) } else { (&mut sb, &mut sa) };
    let word = u32::from(first.words().unwrap()[0]);
    first.select(word, END - 1).unwrap();
    assert_kind(second.select(word, END), ErrorKind::Expired);
    assert_eq!(second.state().unwrap(), VoiceState::Failed);
    assert_kind(second.select(word, END - 1), ErrorKind::InvalidState);
    // A check at the end is too late as well, and changes nothing.
    let (mut sa2, sb2, _) = to_codes(&alice, &bob, PLAN + 60);
    let window = sa2.window().unwrap();
    let before = alice.contact();
    let (code, tag) = sb2.your_code().unwrap();
    assert_kind(sa2.check(&code, tag, 30 * (window + 2)), ErrorKind::Expired);
    assert_eq!(alice.contact(), before);
    // So is a start.
    let mut late = alice.plan(PLAN);
    let window = late.window().unwrap();
    assert_kind(late.start(30 * (window + 2)), ErrorKind::Expired);
    assert_eq!(late.state().unwrap(), VoiceState::Failed);
}

#[test]
fn heard_codes_are_parsed_leniently_and_junk_is_refused() {
    let (alice, bob) = befriended();
    let (mut sa, sb, now) = to_codes(&alice, &bob, PLAN);
    let (code, tag) = sb.your_code().unwrap();
    let (word, digits) = code.split_once(' ').unwrap();
    for junk in ["", word, digits, &format!("{word}  {digits}"), &format!("{word}_{digits}"), &format!("{code}, {tag}")] {
        assert_kind(sa.check(junk, tag, now), ErrorKind::InvalidArgument);
        assert_eq!(sa.state().unwrap(), VoiceState::Comparing, "{junk:?}");
    }
    assert_kind(sa.check(&code, 100, now), ErrorKind::InvalidArgument);
    assert_kind(sa.check("ECHO\0 512", tag, now), ErrorKind::InvalidArgument);
    let typed = format!("  {}-{digits} ", word.to_lowercase());
    assert_eq!(sa.check(&typed, tag, now).unwrap(), VoiceOutcome::Verified);
}

#[test]
fn without_device_secrets_the_tag_is_unchecked_and_the_session_matches_the_derivations() {
    let (mut alice, mut bob) = (Party::new("Alice", 1), Party::new("Bob", 2));
    let seed = [9u8; 32];
    let (pa, pb) = (alice.identity.public_key().unwrap(), bob.identity.public_key().unwrap());
    alice.peer = alice.contacts.add("Bob", &pb, &seed, ExchangeMethod::Qr, EXCHANGED).unwrap();
    bob.peer = bob.contacts.add("Alice", &pa, &seed, ExchangeMethod::Qr, EXCHANGED).unwrap();
    let (mut sa, mut sb) = (alice.plan(PLAN), bob.plan(PLAN));
    let now = start_both(&mut sa, &mut sb);
    assert_eq!(sa.session_id().unwrap(), itsme::derive_session_id(&seed, W0).unwrap());
    assert_eq!(sa.words().unwrap(), itsme::derive_words(&seed, W0, &pa).unwrap());
    assert_eq!(sb.words().unwrap(), itsme::derive_words(&seed, W0, &pb).unwrap());
    let alice_first = a_selects_first(&sa, &sb);
    assert_eq!(alice_first, (pa < pb) == itsme::derive_lower_selects_first(&seed, W0).unwrap());
    let (w1, w2) = select_both(&mut sa, &mut sb, now);
    let (first, second) = if alice_first { (&pa, &pb) } else { (&pb, &pa) };
    let (a_code, a_tag) = sa.your_code().unwrap();
    assert_eq!(a_code, itsme::derive_code(&seed, W0, first, w1, second, w2, &pa).unwrap());
    assert_eq!(a_tag, itsme::derive_device_tag(&seed, W0, &pa, &[]).unwrap());
    assert_eq!(sb.their_code().unwrap(), (a_code.clone(), None));
    // The one-call derivation agrees with the session.
    let d = itsme::derive_voice(&seed, W0, &pb, &pa, &[], &[], w1, w2).unwrap();
    let session_id = format!("{} {:02}", itsme::nato_word(d.session_id / 100).unwrap(), d.session_id % 100);
    assert_eq!(session_id, sa.session_id().unwrap());
    assert_eq!((d.my_words, d.their_words), (sb.words().unwrap(), sa.words().unwrap()));
    assert_eq!(d.i_select_first, !alice_first);
    let text = |v: u32| format!("{} {:03}", itsme::nato_word(v / 1000).unwrap(), v % 1000);
    assert_eq!(text(d.their_code), a_code);
    assert_eq!(text(d.my_code), sb.your_code().unwrap().0);
    assert_eq!((d.my_tag, d.their_tag), (sb.your_code().unwrap().1, a_tag));
    assert_eq!(sb.check(&a_code, 0, now).unwrap(), VoiceOutcome::VerifiedTagUnchecked);
    assert_eq!(bob.contact().state, VerificationState::Verified);
}

#[test]
fn a_session_needs_a_contact() {
    let (alice, _bob) = befriended();
    let error = assert_kind(VoiceSession::new(&alice.contacts, alice.peer + 1, None, PLAN), ErrorKind::NotFound);
    assert!(!error.detail.is_empty(), "the store's detail");
    assert_kind(VoiceSession::new(&alice.contacts, alice.peer, None, -1), ErrorKind::InvalidArgument);
}

// ---------------------------------------------------------------------------
// Bound to a call (PROTOCOL.md 9.7)
// ---------------------------------------------------------------------------

/// Two call bindings: what the host of each call holds (the DTLS-SRTP
/// exporter of the call, 32 bytes, in a real host).
const OUR_CALL: [u8; 32] = [0x0c; 32];
const OTHER_CALL: [u8; 16] = [0x0d; 16];

#[test]
fn both_bound_to_one_call_agree_and_verify() {
    let (alice, bob) = befriended();
    let mut plan = PLAN;
    for binding in [&OUR_CALL[..], &[1u8; itsme::CALL_BINDING_MIN][..], &[2u8; itsme::CALL_BINDING_MAX][..]] {
        let (mut sa, mut sb) = (alice.plan_bound(plan, Some(binding)), bob.plan_bound(plan, Some(binding)));
        let now = start_both(&mut sa, &mut sb);
        assert_eq!(sa.session_id().unwrap(), sb.session_id().unwrap(), "{} bytes", binding.len());
        select_both(&mut sa, &mut sb, now);
        assert_eq!(sa.your_code().unwrap().0, sb.their_code().unwrap().0);
        assert_eq!(sb.your_code().unwrap().0, sa.their_code().unwrap().0);
        let ((a_code, a_tag), (b_code, b_tag)) = (sa.your_code().unwrap(), sb.your_code().unwrap());
        assert_eq!(sa.check(&b_code, b_tag, now).unwrap(), VoiceOutcome::Verified);
        assert_eq!(sb.check(&a_code, a_tag, now).unwrap(), VoiceOutcome::Verified);
        assert_eq!(alice.contact().state, VerificationState::Verified);
        plan = now + 60;
    }
}

#[test]
fn bound_differently_the_session_ids_differ_and_the_codes_do_not_match() {
    let (alice, bob) = befriended();
    let (ours, theirs): (&[u8], &[u8]) = (&OUR_CALL, &OTHER_CALL);
    let cases = [(Some(ours), None), (None, Some(ours)), (Some(ours), Some(theirs))];
    let mut plan = PLAN;
    for (a_binding, b_binding) in cases {
        let what = format!("Alice bound: {}, Bob bound: {}", a_binding.is_some(), b_binding.is_some());
        let (mut sa, mut sb) = (alice.plan_bound(plan, a_binding), bob.plan_bound(plan, b_binding));
        let now = start_both(&mut sa, &mut sb);
        // The two read different session IDs before anyone chooses a word.
        assert_ne!(sa.session_id().unwrap(), sb.session_id().unwrap(), "{what}");
        // The words and who selects first do not change (9.3, 9.4): people
        // who go on regardless get to the codes, and they do not match.
        select_both(&mut sa, &mut sb, now);
        assert_ne!(sa.your_code().unwrap().0, sb.their_code().unwrap().0, "{what}");
        assert_ne!(sb.your_code().unwrap().0, sa.their_code().unwrap().0, "{what}");
        let before = (alice.contact(), bob.contact());
        let ((a_code, a_tag), (b_code, b_tag)) = (sa.your_code().unwrap(), sb.your_code().unwrap());
        assert_eq!(sa.check(&b_code, b_tag, now).unwrap(), VoiceOutcome::Mismatch, "{what}");
        assert_eq!(sb.check(&a_code, a_tag, now).unwrap(), VoiceOutcome::Mismatch, "{what}");
        assert_eq!((alice.contact(), bob.contact()), before, "{what}: a mismatch records nothing");
        plan = now + 60;
    }
}

#[test]
fn a_binding_of_another_length_is_refused() {
    let (alice, _bob) = befriended();
    for length in [0, 1, itsme::CALL_BINDING_MIN - 1, itsme::CALL_BINDING_MAX + 1, 1000] {
        let binding = vec![7u8; length];
        let error =
            assert_kind(VoiceSession::new(&alice.contacts, alice.peer, Some(&binding), PLAN), ErrorKind::InvalidArgument);
        assert!(error.detail.contains("binding"), "{length}: {}", error.detail);
    }
    assert_eq!(alice.contact().last_window, None);
    assert_eq!((itsme::CALL_BINDING_MIN, itsme::CALL_BINDING_MAX), (16, 64));
}

#[test]
fn sessions_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<VoiceSession>();
}
