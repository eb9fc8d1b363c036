//! The degradation code through the safe Rust API (docs/PROTOCOL.md
//! section 10.2): a person moves to a new device (the identity item copied
//! into a new secret store, the same contact file), gives a contact the
//! code, and the contact types it in: lower case with spaces, wrong, junk,
//! too often.

mod common;

use common::assert_kind;
use common::encoding::base32_decode;
use common::people::{befriended, labelled_seed, verify, Person, EXCHANGED, T0};
use itsme::{DeterministicRandom, ErrorKind, ExchangeMethod, VerificationState, VoiceOutcome};

/// When the contact types the code in: after the exchange, before the
/// voice sessions.
const NOW: i64 = EXCHANGED + 600;
/// Five wrong codes lock further attempts for five minutes.
const FREE_FAILURES: usize = 5;
const FIRST_LOCK: i64 = 300;

/// Alice and Bob, verified contacts of each other; then Alice on a new
/// device.  Returns (old Alice, new Alice, Bob): the old device is kept
/// for its directory.
fn moved() -> (Person, Person, Person) {
    let (alice, bob) = befriended();
    let new_alice = alice.on_new_device();
    assert_eq!(new_alice.contact().state, VerificationState::Verified, "the contacts came along");
    (alice, new_alice, bob)
}

/// Whether `code` has the form "ABCD-EFGH-IJKL-MNOP-QRST-UVWX".
fn well_formed(code: &str) -> bool {
    let groups: Vec<&str> = code.split('-').collect();
    groups.len() == 6
        && groups.iter().all(|g| g.len() == 4 && g.bytes().all(|c| c.is_ascii_uppercase() || (b'2'..=b'7').contains(&c)))
}

/// A well-formed code that differs from `code` in its last character.
fn a_wrong_code(code: &str) -> String {
    let last = if code.ends_with('A') { 'B' } else { 'A' };
    format!("{}{last}", &code[..code.len() - 1])
}

#[test]
fn the_contact_accepts_the_code_of_the_new_device() {
    let (_old, alice, bob) = moved();
    let code = alice.contacts.degradation_code(alice.peer, None).unwrap();
    assert!(well_formed(&code), "{code}");
    assert_eq!(code.len() + 1, itsme::sys::ITSME_DEGRADATION_CODE_SIZE);
    let typed = code.to_lowercase().replace('-', " ");
    bob.contacts.accept_degradation_code(bob.peer, &typed, NOW).unwrap();
    let contact = bob.contact();
    assert_eq!((contact.state, contact.acknowledged), (VerificationState::Degraded, true));
    // Bob now holds Alice's interim device secret: her tag matches again,
    // and the contact stays degraded.  Her new device holds no device
    // secret of Bob's: his tag is not checked.
    assert_eq!(verify(&alice, &bob, T0 - 20), (VoiceOutcome::VerifiedTagUnchecked, VoiceOutcome::Verified));
    let contact = bob.contact();
    assert_eq!((contact.state, contact.acknowledged), (VerificationState::Degraded, true));
}

#[test]
fn without_the_code_the_change_shows_as_a_changed_device() {
    let (_old, alice, bob) = moved();
    assert_eq!(verify(&alice, &bob, T0 - 20), (VoiceOutcome::VerifiedTagUnchecked, VoiceOutcome::DeviceChanged));
    let contact = bob.contact();
    assert_eq!((contact.state, contact.acknowledged), (VerificationState::Degraded, false));
    let code = alice.contacts.degradation_code(alice.peer, None).unwrap();
    bob.contacts.accept_degradation_code(bob.peer, &code, T0).unwrap();
    assert!(bob.contact().acknowledged);
}

#[test]
fn the_code_is_typed_leniently() {
    let (_old, alice, bob) = moved();
    let code = alice.contacts.degradation_code(alice.peer, None).unwrap();
    let bare = code.replace('-', "");
    for typed in [
        code.clone(),
        code.to_lowercase(),
        code.replace('-', " "),
        bare.clone(),
        format!("  {}  ", bare.to_lowercase()),
        code.to_lowercase().split('-').collect::<Vec<_>>().join(" - "),
    ] {
        bob.contacts.accept_degradation_code(bob.peer, &typed, NOW).unwrap_or_else(|e| panic!("{typed:?}: {e}"));
    }
    assert_eq!(bob.contact().state, VerificationState::Degraded);
}

#[test]
fn a_wrong_code_is_counted_and_junk_is_not() {
    let (_old, alice, bob) = moved();
    let code = alice.contacts.degradation_code(alice.peer, None).unwrap();
    let before = bob.contact();
    let junk = [
        String::new(),
        "   ".to_owned(),
        code[..code.len() - 1].to_owned(),
        format!("{code}A"),
        format!("{}1", &code[..code.len() - 1]),
        format!("{}0", &code[..code.len() - 1]),
        code.replace('-', "_"),
        format!("{}\u{e9}", &code[..code.len() - 1]),
        format!("{code}\n"),
        format!("{code}\0"),
    ];
    for _ in 0..2 {
        for typed in &junk {
            let error = assert_kind(bob.contacts.accept_degradation_code(bob.peer, typed, NOW), ErrorKind::InvalidArgument);
            assert!(!error.detail.is_empty() || typed.contains('\0'), "{typed:?}");
        }
    }
    // Junk is not counted: four wrong codes after it are each refused as
    // wrong, and the right one is still accepted.
    for _ in 1..FREE_FAILURES {
        let error = assert_kind(
            bob.contacts.accept_degradation_code(bob.peer, &a_wrong_code(&code), NOW),
            ErrorKind::AuthenticationFailed,
        );
        assert!(!error.detail.is_empty());
    }
    assert_eq!(bob.contact(), before, "nothing changed");
    bob.contacts.accept_degradation_code(bob.peer, &code, NOW).unwrap();
    assert_eq!(bob.contact().state, VerificationState::Degraded);
    // A right code resets the count.
    for _ in 1..FREE_FAILURES {
        assert_kind(bob.contacts.accept_degradation_code(bob.peer, &a_wrong_code(&code), NOW), ErrorKind::AuthenticationFailed);
    }
}

#[test]
fn too_many_wrong_codes_lock() {
    let (_old, alice, bob) = moved();
    let code = alice.contacts.degradation_code(alice.peer, None).unwrap();
    for _ in 0..FREE_FAILURES {
        assert_kind(bob.contacts.accept_degradation_code(bob.peer, &a_wrong_code(&code), NOW), ErrorKind::AuthenticationFailed);
    }
    // Locked, even for the right code, which is not checked.
    for attempt in [code.clone(), a_wrong_code(&code)] {
        assert_kind(bob.contacts.accept_degradation_code(bob.peer, &attempt, NOW + FIRST_LOCK - 1), ErrorKind::Locked);
    }
    assert_eq!(bob.contact().state, VerificationState::Verified);
    // A typing error is still a typing error.
    assert_kind(bob.contacts.accept_degradation_code(bob.peer, "junk", NOW), ErrorKind::InvalidArgument);
    bob.contacts.accept_degradation_code(bob.peer, &code, NOW + FIRST_LOCK).unwrap();
    assert_eq!(bob.contact().state, VerificationState::Degraded);
}

#[test]
fn only_the_latest_code_matches_the_new_device() {
    let (_old, alice, bob) = moved();
    // Fixed interim secrets: with drawn ones, the two tags would agree 1
    // time in 100 and the change would go unseen.
    let mut rng = DeterministicRandom::new(&labelled_seed("first and latest")).unwrap();
    let first = alice.contacts.degradation_code(alice.peer, Some(&mut rng)).unwrap();
    let latest = alice.contacts.degradation_code(alice.peer, Some(&mut rng)).unwrap();
    assert_ne!(first, latest);
    // An earlier code is still a code of Alice's (it carries its own
    // secret), so it is accepted; but her device says the latest secret.
    bob.contacts.accept_degradation_code(bob.peer, &first, NOW).unwrap();
    assert!(bob.contact().acknowledged);
    assert_eq!(verify(&alice, &bob, T0 - 20).1, VoiceOutcome::DeviceChanged);
    assert!(!bob.contact().acknowledged);
    bob.contacts.accept_degradation_code(bob.peer, &latest, T0).unwrap();
    assert_eq!(verify(&alice, &bob, T0 + 10).1, VoiceOutcome::Verified);
    assert!(bob.contact().acknowledged);
}

#[test]
fn the_code_is_the_pure_derivation_of_the_secret_drawn() {
    let (mut alice, mut bob) = (Person::new("Alice", 1), Person::new("Bob", 2));
    let seed = [9u8; 32];
    alice.peer = alice.contacts.add("Bob", &bob.public_key(), &seed, ExchangeMethod::Qr, EXCHANGED).unwrap();
    bob.peer = bob.contacts.add("Alice", &alice.public_key(), &seed, ExchangeMethod::Qr, EXCHANGED).unwrap();
    let code_with = |tag: u8| {
        let mut rng = DeterministicRandom::new(&[tag; 32]).unwrap();
        alice.contacts.degradation_code(alice.peer, Some(&mut rng)).unwrap()
    };
    let first = code_with(0);
    assert_eq!(code_with(0), first, "the same random source, the same code");
    let code = code_with(1);
    assert_ne!(code, first);
    let raw = base32_decode(&code.replace('-', "")).unwrap();
    assert_eq!(raw.len(), 15);
    let secret = &raw[..10];
    assert_eq!(itsme::derive_degradation_code(&seed, &alice.public_key(), secret).unwrap(), code);
    // The code names its person.
    assert_ne!(itsme::derive_degradation_code(&seed, &bob.public_key(), secret).unwrap(), code);
    bob.contacts.accept_degradation_code(bob.peer, &code, NOW).unwrap();
    let contact = bob.contact();
    assert_eq!((contact.state, contact.acknowledged), (VerificationState::Degraded, true));
}

#[test]
fn unknown_contacts_and_bad_arguments() {
    let (_old, alice, bob) = moved();
    let code = alice.contacts.degradation_code(alice.peer, None).unwrap();
    let error = assert_kind(alice.contacts.degradation_code(alice.peer + 100, None), ErrorKind::NotFound);
    assert!(!error.detail.is_empty());
    assert_kind(bob.contacts.accept_degradation_code(bob.peer + 100, &code, NOW), ErrorKind::NotFound);
    for now in [-1, 253_402_300_800] {
        assert_kind(bob.contacts.accept_degradation_code(bob.peer, &code, now), ErrorKind::InvalidArgument);
    }
    bob.contacts.accept_degradation_code(bob.peer, &code, NOW).unwrap();
}

#[test]
fn derive_degradation_code_checks_its_arguments() {
    let (seed, pid, secret) = ([0u8; 32], [7u8; 32], [3u8; 10]);
    let code = itsme::derive_degradation_code(&seed, &pid, &secret).unwrap();
    assert!(well_formed(&code), "{code}");
    assert_ne!(itsme::derive_degradation_code(&seed, &pid[..8], &secret).unwrap(), code, "a fingerprint pid");
    let bad: [(&[u8], &[u8], &[u8]); 4] =
        [(&seed[..31], &pid, &secret), (&seed, &pid[..31], &secret), (&seed, &pid, &secret[..9]), (&seed, &pid, &[0; 16])];
    for (s, p, r) in bad {
        let error = assert_kind(itsme::derive_degradation_code(s, p, r), ErrorKind::InvalidArgument);
        assert!(!error.detail.is_empty());
    }
}
