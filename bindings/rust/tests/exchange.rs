//! Contact exchanges in person (QR and Bluetooth) through the safe Rust
//! API: whole exchanges, a man in the middle, tampered, replayed and
//! reordered messages, source-format imports, sealing and restoring, and
//! calls in the wrong order.

mod common;

use common::encoding::{base64url_decode, base64url_encode};
use common::{assert_kind, rng, state, TempDir};
use itsme::{
    ContactStore, DeterministicRandom, ErrorKind, Exchange, ExchangeFlags, ExchangeMethod, ExchangeState, Identity,
    SecretStore, VerificationState,
};

const T0: i64 = 1_800_000_000;
/// A pending exchange expires this long after it began.
const LIFETIME: i64 = 24 * 3600;

/// An identity with its secret store and contact store.
struct Party {
    secrets: SecretStore,
    identity: Identity,
    contacts: ContactStore,
    _dir: TempDir,
}

impl Party {
    /// A party whose identity comes from the operating system's randomness.
    fn new(name: &str) -> Party {
        Party::make(name, None)
    }

    /// A party whose identity is drawn from `rng`.
    fn with_random(name: &str, rng: &mut DeterministicRandom) -> Party {
        Party::make(name, Some(rng))
    }

    fn make(name: &str, rng: Option<&mut DeterministicRandom>) -> Party {
        let dir = TempDir::new(&format!("exchange-{}", name.to_lowercase().replace(' ', "-")));
        let secrets = SecretStore::memory().unwrap();
        let identity = Identity::create_with_random(&secrets, name, rng).unwrap();
        let contacts = ContactStore::open(&identity, dir.path().join("contacts.db")).unwrap();
        Party { secrets, identity, contacts, _dir: dir }
    }

    fn key(&self) -> [u8; 32] {
        self.identity.public_key().unwrap()
    }

    fn fingerprint(&self) -> String {
        self.identity.fingerprint().unwrap()
    }

    fn qr(&self) -> Exchange {
        Exchange::qr(&self.identity, &self.contacts, T0, None).unwrap()
    }
}

fn flags(exchange: &Exchange) -> ExchangeFlags {
    exchange.status().unwrap().1
}

/// The next outgoing bytes, which must not be empty.
#[track_caller]
fn take(exchange: &mut Exchange) -> Vec<u8> {
    let bytes = exchange.next_outgoing().unwrap();
    assert!(!bytes.is_empty(), "nothing to send");
    bytes
}

/// Scans each QR code with the other device.
fn swap_qr(a: &mut Exchange, b: &mut Exchange) {
    let (from_a, from_b) = (take(a), take(b));
    a.receive(&from_b, T0).unwrap();
    b.receive(&from_a, T0).unwrap();
}

/// Moves Bluetooth frames both ways until neither side has one to send;
/// returns how many were moved.
fn pump(a: &mut Exchange, b: &mut Exchange) -> usize {
    let mut moved = 0;
    loop {
        let from_a = a.next_outgoing().unwrap();
        if !from_a.is_empty() {
            b.receive(&from_a, T0).unwrap();
            moved += 1;
        }
        let from_b = b.next_outgoing().unwrap();
        if !from_b.is_empty() {
            a.receive(&from_b, T0).unwrap();
            moved += 1;
        }
        if from_a.is_empty() && from_b.is_empty() {
            return moved;
        }
    }
}

/// A's session code, typed on B.
fn bluetooth_pair(a: &Party, b: &Party) -> (Exchange, Exchange) {
    let ea = Exchange::bluetooth(&a.identity, &a.contacts, None, T0, None).unwrap();
    let code = ea.session_code().unwrap();
    let eb = Exchange::bluetooth(&b.identity, &b.contacts, Some(&code), T0, None).unwrap();
    (ea, eb)
}

/// The frames of a Bluetooth exchange, in the order they were made.
struct Frames {
    hello_a: Vec<u8>,
    hello_b: Vec<u8>,
    key_a: Vec<u8>,
    key_b: Vec<u8>,
    data_a: Vec<u8>,
    data_b: Vec<u8>,
}

/// Runs a Bluetooth exchange up to the DATA frames, which are taken from
/// their queues but not delivered: both sides are still awaiting the peer.
fn up_to_data(a: &mut Exchange, b: &mut Exchange) -> Frames {
    let hello_a = take(a);
    let hello_b = take(b);
    assert!(a.next_outgoing().unwrap().is_empty(), "KEY sent before the peer's HELLO");
    b.receive(&hello_a, T0).unwrap();
    a.receive(&hello_b, T0).unwrap();
    let key_a = take(a);
    let key_b = take(b);
    b.receive(&key_a, T0).unwrap();
    a.receive(&key_b, T0).unwrap();
    let data_a = take(a);
    let data_b = take(b);
    assert_eq!((state(a), state(b)), (ExchangeState::AwaitingPeer, ExchangeState::AwaitingPeer));
    Frames { hello_a, hello_b, key_a, key_b, data_a, data_b }
}

/// A failed exchange refuses everything, and has nothing to send.
#[track_caller]
fn assert_failed(exchange: &mut Exchange) {
    assert_eq!(state(exchange), ExchangeState::Failed);
    assert_kind(exchange.sas(), ErrorKind::InvalidState);
    assert_kind(exchange.peer_name(), ErrorKind::InvalidState);
    assert_kind(exchange.save(T0), ErrorKind::InvalidState);
    assert_kind(exchange.confirm(T0), ErrorKind::InvalidState);
    assert_kind(exchange.reject(), ErrorKind::InvalidState);
    assert_kind(exchange.seal(), ErrorKind::InvalidState);
    assert_eq!(exchange.next_outgoing().unwrap(), Vec::<u8>::new());
    assert_eq!(state(exchange), ExchangeState::Failed);
}

#[test]
fn exchange_types_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Exchange>();
    check::<DeterministicRandom>();
}

// ---------------------------------------------------------------------------
// QR
// ---------------------------------------------------------------------------

#[test]
fn qr_end_to_end() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let mut a = alice.qr();
    let mut b = bob.qr();
    assert_eq!(a.status().unwrap(), (ExchangeState::AwaitingPeer, ExchangeFlags::empty()));
    assert_kind(a.session_code(), ErrorKind::InvalidState);
    assert_eq!(a.method().unwrap(), itsme::ExchangeMethod::Qr);

    // The payload is text, stays on screen, and fits the limit.
    let shown = take(&mut a);
    assert!(shown.starts_with(b"ITSME1:"), "{:?}", String::from_utf8_lossy(&shown));
    assert!(shown.len() <= itsme::QR_PAYLOAD_MAX && shown.is_ascii());
    assert_eq!(take(&mut a), shown, "the QR payload was consumed");

    // Another QR code is not an exchange payload: scan again.
    let error = assert_kind(a.receive(b"https://example.com/", T0), ErrorKind::InvalidArgument);
    assert!(!error.detail.is_empty());
    assert_eq!(state(&a), ExchangeState::AwaitingPeer);

    swap_qr(&mut a, &mut b);
    for (me, peer, ex) in [(&alice, &bob, &a), (&bob, &alice, &b)] {
        assert_eq!(ex.status().unwrap(), (ExchangeState::CompareSas, ExchangeFlags::empty()));
        assert_eq!(ex.peer_name().unwrap(), peer.identity.name().unwrap());
        assert_eq!(ex.peer_fingerprint().unwrap(), peer.fingerprint());
        assert_eq!(ex.peer_public_key().unwrap(), Some(peer.key()));
        assert_ne!(ex.peer_public_key().unwrap(), Some(me.key()));
    }
    let sas = a.sas().unwrap();
    assert_eq!(b.sas().unwrap(), sas);
    let value = itsme::short_code_parse(&sas).unwrap();
    assert_eq!(itsme::short_code_format(value).unwrap(), sas);

    // The payload is shown while comparing; a second one is refused
    // without failing the exchange.
    assert_eq!(take(&mut a), shown);
    let again = take(&mut b);
    assert_kind(a.receive(&again, T0), ErrorKind::InvalidState);
    assert_eq!(state(&a), ExchangeState::CompareSas);

    // Saved unverified, then confirmed: verified.
    let id = a.save(T0 + 1).unwrap();
    let contact = alice.contacts.get(id).unwrap();
    assert_eq!(
        (contact.name.as_str(), contact.state, contact.method, contact.public_key),
        ("Bob", VerificationState::Unverified, ExchangeMethod::Qr, Some(bob.key()))
    );
    assert_eq!(contact.created_at, T0 + 1);
    assert_eq!(a.save(T0 + 2).unwrap(), id, "saving again");
    assert_eq!(a.confirm(T0 + 3).unwrap(), id);
    assert_eq!(a.status().unwrap(), (ExchangeState::Confirmed, ExchangeFlags::empty()));
    let contact = alice.contacts.get(id).unwrap();
    assert_eq!((contact.state, contact.verified_at), (VerificationState::Verified, Some(T0 + 3)));
    assert_eq!(a.next_outgoing().unwrap(), Vec::<u8>::new(), "a finished exchange shows no code");
    assert_kind(a.confirm(T0 + 4), ErrorKind::InvalidState);
    assert_kind(a.reject(), ErrorKind::InvalidState);
    assert_eq!(alice.contacts.count().unwrap(), 1);

    // Saved, then rejected: deleted.
    let id = b.save(T0 + 1).unwrap();
    assert_eq!(bob.contacts.count().unwrap(), 1);
    b.reject().unwrap();
    assert_eq!(state(&b), ExchangeState::Rejected);
    assert_kind(bob.contacts.get(id), ErrorKind::NotFound);
    assert_eq!(bob.contacts.count().unwrap(), 0);
    assert_kind(b.confirm(T0 + 2), ErrorKind::InvalidState);
}

#[test]
fn qr_reject_without_saving_and_while_awaiting() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let (mut a, mut b) = (alice.qr(), bob.qr());
    swap_qr(&mut a, &mut b);
    a.reject().unwrap();
    assert_eq!(state(&a), ExchangeState::Rejected);
    assert_eq!(alice.contacts.count().unwrap(), 0);
    let mut waiting = alice.qr();
    waiting.reject().unwrap();
    assert_eq!(state(&waiting), ExchangeState::Rejected);
    assert_kind(waiting.reject(), ErrorKind::InvalidState);
}

/// Exchanging again with a stored contact changes nothing until confirm.
#[test]
fn qr_known_contact() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let (mut a, mut b) = (alice.qr(), bob.qr());
    swap_qr(&mut a, &mut b);
    let id = a.confirm(T0).unwrap();
    alice.contacts.set_name(id, "Bobby").unwrap();

    // Again, rejected: the contact is left as it was.
    let (mut a, mut b) = (alice.qr(), bob.qr());
    swap_qr(&mut a, &mut b);
    assert_eq!(a.save(T0 + 10).unwrap(), id);
    assert!(flags(&a).contains(ExchangeFlags::KNOWN_CONTACT));
    a.reject().unwrap();
    let kept = alice.contacts.get(id).unwrap();
    assert_eq!((kept.name.as_str(), kept.state, kept.verified_at), ("Bobby", VerificationState::Verified, Some(T0)));

    // Again, confirmed: the same contact, verified anew, its name kept.
    let (mut a, mut b) = (alice.qr(), bob.qr());
    swap_qr(&mut a, &mut b);
    assert_eq!(a.confirm(T0 + 20).unwrap(), id);
    assert!(flags(&a).contains(ExchangeFlags::KNOWN_CONTACT));
    let renewed = alice.contacts.get(id).unwrap();
    assert_eq!((renewed.name.as_str(), renewed.verified_at), ("Bobby", Some(T0 + 20)));
    assert_eq!(alice.contacts.count().unwrap(), 1);
}

/// M runs one exchange with A and another with B.  Each side's SAS is the
/// one M sees on that side, and the two differ, however M names himself.
#[test]
fn qr_man_in_the_middle_changes_the_sas() {
    let alice = Party::with_random("Alice", &mut rng(1));
    let bob = Party::with_random("Bob", &mut rng(2));
    let mallory = Party::with_random("Bob", &mut rng(3));
    let mut a = Exchange::qr(&alice.identity, &alice.contacts, T0, Some(&mut rng(11))).unwrap();
    let mut b = Exchange::qr(&bob.identity, &bob.contacts, T0, Some(&mut rng(12))).unwrap();
    let mut ma = Exchange::qr(&mallory.identity, &mallory.contacts, T0, Some(&mut rng(13))).unwrap();
    let mut mb = Exchange::qr(&mallory.identity, &mallory.contacts, T0, Some(&mut rng(14))).unwrap();
    swap_qr(&mut a, &mut ma);
    swap_qr(&mut mb, &mut b);
    assert_eq!(a.sas().unwrap(), ma.sas().unwrap());
    assert_eq!(b.sas().unwrap(), mb.sas().unwrap());
    assert_ne!(a.sas().unwrap(), b.sas().unwrap(), "the man in the middle went unnoticed");
    // A sees the name M chose, but not Bob's key.
    assert_eq!(a.peer_name().unwrap(), "Bob");
    assert_ne!(a.peer_public_key().unwrap(), Some(bob.key()));
}

/// Every byte of a decoded QR payload, changed and re-encoded, is refused;
/// every change but the name length's fails the exchange.
#[test]
fn qr_tampered_payload_is_rejected() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let text = take(&mut alice.qr());
    let text = std::str::from_utf8(&text).unwrap();
    let payload = base64url_decode(text.strip_prefix("ITSME1:").unwrap()).unwrap();
    assert_eq!(format!("ITSME1:{}", base64url_encode(&payload)), text, "the test's base64url");
    assert_eq!(payload.len(), 154 + "Alice".len());

    // The untouched payload is accepted.
    let mut b = bob.qr();
    b.receive(text.as_bytes(), T0).unwrap();

    let mut kinds = std::collections::BTreeSet::new();
    for position in 0..payload.len() {
        for mask in [0x01u8, 0xFF] {
            let mut tampered = payload.clone();
            tampered[position] ^= mask;
            let tampered = format!("ITSME1:{}", base64url_encode(&tampered));
            let mut b = bob.qr();
            let error = b.receive(tampered.as_bytes(), T0).expect_err(&format!("byte {position} ^ {mask:#04x} accepted"));
            if position == 89 {
                // The name length byte: the payload no longer has the
                // length it says, a reading cut short or run on, which
                // leaves the exchange waiting for a whole one (5.2).
                assert_eq!(error.kind(), ErrorKind::InvalidArgument, "byte {position} ^ {mask:#04x}: {error}");
                assert_eq!(state(&b), ExchangeState::AwaitingPeer, "byte {position} ^ {mask:#04x}");
                b.receive(text.as_bytes(), T0).unwrap();
                continue;
            }
            assert!(
                matches!(
                    error.kind(),
                    ErrorKind::MalformedMessage | ErrorKind::AuthenticationFailed | ErrorKind::InvalidKey
                ),
                "byte {position} ^ {mask:#04x}: {error}"
            );
            kinds.insert(format!("{:?}", error.kind()));
            assert_eq!(state(&b), ExchangeState::Failed, "byte {position} ^ {mask:#04x}");
            // The genuine payload cannot revive it.
            assert_kind(b.receive(text.as_bytes(), T0), ErrorKind::InvalidState);
        }
    }
    assert!(kinds.contains("MalformedMessage") && kinds.contains("AuthenticationFailed"), "{kinds:?}");

    // Cut short: refused, and the exchange reads the whole payload after it.
    let mut b = bob.qr();
    for cut in [&text[..7], &text[..11], &text[..text.len() - 1]] {
        assert_kind(b.receive(cut.as_bytes(), T0), ErrorKind::InvalidArgument);
        assert_eq!(state(&b), ExchangeState::AwaitingPeer, "{cut}");
    }
    b.receive(text.as_bytes(), T0).unwrap();
    // A whole payload of another version ends the exchange.
    let mut other_version = payload.clone();
    other_version[0] = 2;
    let mut b = bob.qr();
    assert_kind(b.receive(format!("ITSME1:{}", base64url_encode(&other_version)).as_bytes(), T0), ErrorKind::MalformedMessage);
    assert_failed(&mut b);
}

/// Our own payload, reflected back, is refused.
#[test]
fn qr_reflected_payload_is_rejected() {
    let alice = Party::new("Alice");
    let mut a = alice.qr();
    let mut other = alice.qr();
    let own = take(&mut other);
    assert_kind(a.receive(&own, T0), ErrorKind::InvalidKey);
    assert_failed(&mut a);
}

// ---------------------------------------------------------------------------
// Source format (v5)
// ---------------------------------------------------------------------------

/// A version-5 text: name "Al|ice", an ephemeral key of 32 bytes.
const V5_TEXT: &str = "5|Al\\|ice|0123456789abcdef|cGvFEwD7RJge6up05hIJFS42fkEw22BoM7ANe/tPyh4=|123456";

#[test]
fn source_v5_import() {
    let bob = Party::new("Bob");
    let mut b = bob.qr();
    b.receive(V5_TEXT.as_bytes(), T0).unwrap();
    assert_eq!(
        b.status().unwrap(),
        (ExchangeState::Imported, ExchangeFlags::UNAUTHENTICATED)
    );
    assert_eq!(b.peer_name().unwrap(), "Al|ice");
    assert_eq!(b.peer_fingerprint().unwrap(), "0123456789ABCDEF");
    assert_eq!(b.peer_public_key().unwrap(), None);
    assert_kind(b.sas(), ErrorKind::InvalidState);
    assert_eq!(b.next_outgoing().unwrap(), Vec::<u8>::new());

    // Cannot be confirmed; saved, it is an unauthenticated contact.
    let error = assert_kind(b.confirm(T0), ErrorKind::InvalidState);
    assert!(!error.detail.is_empty());
    assert_eq!(state(&b), ExchangeState::Imported);
    let id = b.save(T0 + 5).unwrap();
    let contact = bob.contacts.get(id).unwrap();
    assert_eq!(
        (contact.name.as_str(), contact.fingerprint.as_str(), contact.public_key, contact.state, contact.method),
        ("Al|ice", "0123456789ABCDEF", None, VerificationState::Unverified, ExchangeMethod::Qr)
    );
    assert_eq!(bob.contacts.find_fingerprint("0123456789ABCDEF").unwrap(), vec![contact]);
    assert_eq!(b.save(T0 + 6).unwrap(), id);

    // Rejecting it deletes it.
    b.reject().unwrap();
    assert_eq!(bob.contacts.count().unwrap(), 0);
}

#[test]
fn source_v5_refusals() {
    let bob = Party::new("Bob");
    // Our own fingerprint.
    let own = V5_TEXT.replace("0123456789abcdef", &bob.fingerprint());
    let mut b = bob.qr();
    b.receive(own.as_bytes(), T0).unwrap_err();
    assert_eq!(state(&b), ExchangeState::Failed);
    // Malformed: not five fields, an unknown escape.
    for bad in ["5|Alice|0123456789ABCDEF|123456", "5|Al\\ice|0123456789ABCDEF|cGvFEwD7RJge6up05hIJFS42fkEw22BoM7ANe/tPyh4=|123456"] {
        let mut b = bob.qr();
        assert_kind(b.receive(bad.as_bytes(), T0), ErrorKind::MalformedMessage);
        assert_eq!(state(&b), ExchangeState::Failed, "{bad}");
    }
}

// ---------------------------------------------------------------------------
// Bluetooth
// ---------------------------------------------------------------------------

#[test]
fn bluetooth_end_to_end() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let mut a = Exchange::bluetooth(&alice.identity, &alice.contacts, None, T0, None).unwrap();
    let code = a.session_code().unwrap();
    assert_eq!(a.method().unwrap(), itsme::ExchangeMethod::Bluetooth);
    let value = itsme::short_code_parse(&code).unwrap();
    assert!(value < itsme::SHORT_CODE_VALUES);
    assert_eq!(itsme::short_code_format(value).unwrap(), code);
    // Bob types it his own way.
    let typed = format!("  {}  ", code.to_lowercase().replace(' ', "-"));
    let mut b = Exchange::bluetooth(&bob.identity, &bob.contacts, Some(&typed), T0, None).unwrap();
    assert_eq!(b.session_code().unwrap(), code);

    let frames = up_to_data(&mut a, &mut b);
    for frame in [&frames.hello_a, &frames.hello_b, &frames.key_a, &frames.key_b, &frames.data_a, &frames.data_b] {
        assert!(frame.len() <= itsme::BLUETOOTH_FRAME_MAX);
        assert_eq!(frame[0], 1, "version");
    }
    assert_eq!((frames.hello_a[1], frames.key_a[1], frames.data_a[1]), (1, 2, 3));
    assert_eq!((frames.hello_a.len(), frames.key_a.len()), (42, 34));
    assert_kind(a.sas(), ErrorKind::InvalidState);
    assert_kind(a.peer_name(), ErrorKind::InvalidState);
    b.receive(&frames.data_a, T0).unwrap();
    a.receive(&frames.data_b, T0).unwrap();
    assert_eq!(a.next_outgoing().unwrap(), Vec::<u8>::new());

    for (peer, ex) in [(&bob, &a), (&alice, &b)] {
        assert_eq!(ex.status().unwrap(), (ExchangeState::CompareSas, ExchangeFlags::empty()));
        assert_eq!(ex.peer_name().unwrap(), peer.identity.name().unwrap());
        assert_eq!(ex.peer_fingerprint().unwrap(), peer.fingerprint());
        assert_eq!(ex.peer_public_key().unwrap(), Some(peer.key()));
    }
    let sas = a.sas().unwrap();
    assert_eq!(b.sas().unwrap(), sas);

    // A saves and confirms: a CONFIRM frame goes to B.
    let id_a = a.save(T0).unwrap();
    assert_eq!(alice.contacts.get(id_a).unwrap().state, VerificationState::Unverified);
    assert_eq!(a.confirm(T0 + 1).unwrap(), id_a);
    // B has not decided: A's contact awaits B's confirmation.
    assert_eq!(state(&a), ExchangeState::AwaitingDecision);
    assert_eq!(alice.contacts.get(id_a).unwrap().state, VerificationState::AwaitingPeer);
    assert_kind(a.settle(T0 + 1), ErrorKind::InvalidState);
    let confirm_a = take(&mut a);
    assert_eq!(confirm_a[..2], [1, 4]);
    assert_eq!(a.next_outgoing().unwrap(), Vec::<u8>::new());
    b.receive(&confirm_a, T0 + 1).unwrap();
    assert_eq!(b.status().unwrap(), (ExchangeState::CompareSas, ExchangeFlags::PEER_CONFIRMED));

    // B confirms (without saving first), A's confirmation in hand: B's
    // contact is verified at once. A learns it and settles.
    let id_b = b.confirm(T0 + 2).unwrap();
    let confirm_b = take(&mut b);
    a.receive(&confirm_b, T0 + 2).unwrap();
    assert_eq!(a.status().unwrap(), (ExchangeState::AwaitingDecision, ExchangeFlags::PEER_CONFIRMED));
    assert_eq!(a.settle(T0 + 2).unwrap(), Some(id_a));
    assert_eq!(a.status().unwrap(), (ExchangeState::Confirmed, ExchangeFlags::PEER_CONFIRMED));
    assert_eq!(b.status().unwrap(), (ExchangeState::Confirmed, ExchangeFlags::PEER_CONFIRMED));

    for (store, id, peer) in [(&alice.contacts, id_a, &bob), (&bob.contacts, id_b, &alice)] {
        let contact = store.get(id).unwrap();
        assert_eq!(contact.state, VerificationState::Verified);
        assert_eq!(contact.method, ExchangeMethod::Bluetooth);
        assert_eq!(contact.public_key, Some(peer.key()));
        assert_eq!(contact.name, peer.identity.name().unwrap());
    }
    // The SAS stays readable after the exchange finished.
    assert_eq!(a.sas().unwrap(), sas);
}

#[test]
fn bluetooth_pump_helper_moves_every_frame() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let (mut a, mut b) = bluetooth_pair(&alice, &bob);
    assert_eq!(pump(&mut a, &mut b), 6);
    assert_eq!(a.sas().unwrap(), b.sas().unwrap());
    a.confirm(T0).unwrap();
    b.confirm(T0).unwrap();
    assert_eq!(pump(&mut a, &mut b), 2);
    assert!(flags(&a).contains(ExchangeFlags::PEER_CONFIRMED));
    assert!(flags(&b).contains(ExchangeFlags::PEER_CONFIRMED));
    assert!(a.settle(T0).unwrap().is_some());
    assert!(b.settle(T0).unwrap().is_some());
}

#[test]
fn bluetooth_peer_rejects_after_this_side_confirmed() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let (mut a, mut b) = bluetooth_pair(&alice, &bob);
    pump(&mut a, &mut b);
    let id = a.confirm(T0).unwrap();
    assert_eq!(alice.contacts.get(id).unwrap().state, VerificationState::AwaitingPeer);
    b.reject().unwrap();
    pump(&mut a, &mut b);
    assert_eq!(a.status().unwrap(), (ExchangeState::AwaitingDecision, ExchangeFlags::PEER_REJECTED));
    assert_eq!(a.settle(T0).unwrap(), None);
    assert_eq!(state(&a), ExchangeState::Rejected);
    assert_eq!(alice.contacts.count().unwrap(), 0);
    // A contact awaiting the peer that never answers expires after a day.
    let (mut a, mut b) = bluetooth_pair(&alice, &bob);
    pump(&mut a, &mut b);
    a.confirm(T0).unwrap();
    assert_eq!(alice.contacts.expire_awaiting(T0 + 86_400).unwrap(), 0);
    assert_eq!(alice.contacts.expire_awaiting(T0 + 86_401).unwrap(), 1);
    assert_eq!(alice.contacts.count().unwrap(), 0);
}

#[test]
fn bluetooth_peer_rejects() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let (mut a, mut b) = bluetooth_pair(&alice, &bob);
    pump(&mut a, &mut b);
    a.save(T0).unwrap();
    b.reject().unwrap();
    assert_eq!(state(&b), ExchangeState::Rejected);
    let no = take(&mut b);
    a.receive(&no, T0).unwrap();
    assert_eq!(a.status().unwrap(), (ExchangeState::CompareSas, ExchangeFlags::PEER_REJECTED));
    assert_kind(a.confirm(T0), ErrorKind::InvalidState);
    a.reject().unwrap();
    assert_eq!(alice.contacts.count().unwrap(), 0);
    // A tells B it rejected too.
    let no_a = take(&mut a);
    b.receive(&no_a, T0).unwrap();
    assert!(flags(&b).contains(ExchangeFlags::PEER_REJECTED));
}

/// A rejection before the peer's data arrived sends no CONFIRM frame.
#[test]
fn bluetooth_reject_before_data_sends_nothing() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let (mut a, mut b) = bluetooth_pair(&alice, &bob);
    let hello_b = take(&mut b);
    a.receive(&hello_b, T0).unwrap();
    a.reject().unwrap();
    // Only the frames queued before: HELLO and KEY.
    assert_eq!(take(&mut a)[1], 1);
    assert_eq!(take(&mut a)[1], 2);
    assert_eq!(a.next_outgoing().unwrap(), Vec::<u8>::new());
}

/// Two devices that disagree on the session code fail instead of pairing.
#[test]
fn bluetooth_wrong_session_code_fails() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let mut a = Exchange::bluetooth(&alice.identity, &alice.contacts, None, T0, None).unwrap();
    let code = itsme::short_code_parse(&a.session_code().unwrap()).unwrap();
    let other = itsme::short_code_format((code + 1) % itsme::SHORT_CODE_VALUES).unwrap();
    let mut b = Exchange::bluetooth(&bob.identity, &bob.contacts, Some(&other), T0, None).unwrap();
    let frames = up_to_data(&mut a, &mut b);
    assert_kind(b.receive(&frames.data_a, T0), ErrorKind::AuthenticationFailed);
    assert_failed(&mut b);
    assert_kind(a.receive(&frames.data_b, T0), ErrorKind::AuthenticationFailed);
    assert_failed(&mut a);
}

#[test]
fn bluetooth_man_in_the_middle_changes_the_sas() {
    let alice = Party::with_random("Alice", &mut rng(21));
    let bob = Party::with_random("Bob", &mut rng(22));
    let mallory = Party::with_random("Alice", &mut rng(23));
    // Alice shows a code; Mallory's device answers it.  Mallory shows his
    // own code to Bob.
    let mut a = Exchange::bluetooth(&alice.identity, &alice.contacts, None, T0, Some(&mut rng(31))).unwrap();
    let mut ma = Exchange::bluetooth(&mallory.identity, &mallory.contacts, Some(&a.session_code().unwrap()), T0, Some(&mut rng(32))).unwrap();
    let mut mb = Exchange::bluetooth(&mallory.identity, &mallory.contacts, None, T0, Some(&mut rng(33))).unwrap();
    let mut b = Exchange::bluetooth(&bob.identity, &bob.contacts, Some(&mb.session_code().unwrap()), T0, Some(&mut rng(34))).unwrap();
    pump(&mut a, &mut ma);
    pump(&mut mb, &mut b);
    assert_eq!(a.sas().unwrap(), ma.sas().unwrap());
    assert_eq!(b.sas().unwrap(), mb.sas().unwrap());
    assert_ne!(a.sas().unwrap(), b.sas().unwrap(), "the man in the middle went unnoticed");
    assert_eq!(b.peer_name().unwrap(), "Alice");
    assert_ne!(b.peer_public_key().unwrap(), Some(alice.key()));

    // Relaying Alice's frames to Bob unchanged does not work either: Bob's
    // session code differs from Alice's, so the keys differ.
    let mut a = Exchange::bluetooth(&alice.identity, &alice.contacts, None, T0, None).unwrap();
    let mut b = Exchange::bluetooth(&bob.identity, &bob.contacts, Some(&mb.session_code().unwrap()), T0, None).unwrap();
    let frames = up_to_data(&mut a, &mut b);
    assert_kind(b.receive(&frames.data_a, T0), ErrorKind::AuthenticationFailed);
}

/// Every byte of a DATA frame, changed, is refused and fails the exchange.
#[test]
fn bluetooth_tampered_data_frame_is_rejected() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let mut kinds = std::collections::BTreeSet::new();
    let mut length = 0;
    let mut position = 0;
    while position == 0 || position < length {
        for mask in [0x01u8, 0xFF] {
            let (mut a, mut b) = bluetooth_pair(&alice, &bob);
            let frames = up_to_data(&mut a, &mut b);
            length = frames.data_a.len();
            let mut tampered = frames.data_a.clone();
            tampered[position] ^= mask;
            let error = b.receive(&tampered, T0).expect_err(&format!("byte {position} ^ {mask:#04x} accepted"));
            assert!(
                matches!(error.kind(), ErrorKind::MalformedMessage | ErrorKind::AuthenticationFailed),
                "byte {position} ^ {mask:#04x}: {error}"
            );
            kinds.insert(format!("{:?}", error.kind()));
            assert_eq!(state(&b), ExchangeState::Failed, "byte {position} ^ {mask:#04x}");
            // The genuine frame cannot revive it.
            assert_kind(b.receive(&frames.data_a, T0), ErrorKind::InvalidState);
            if position == 0 && mask == 0x01 {
                assert_failed(&mut b);
            }
        }
        position += 1;
    }
    assert_eq!(length, 2 + 113 + "Alice".len() + 16);
    assert!(kinds.contains("MalformedMessage") && kinds.contains("AuthenticationFailed"), "{kinds:?}");
    // Cut short or lengthened.
    for cut in [0usize, 1, 2, 17, length - 1] {
        let (mut a, mut b) = bluetooth_pair(&alice, &bob);
        let frames = up_to_data(&mut a, &mut b);
        b.receive(&frames.data_a[..cut], T0).expect_err(&format!("cut at {cut}"));
        assert_eq!(state(&b), ExchangeState::Failed, "cut at {cut}");
    }
    let (mut a, mut b) = bluetooth_pair(&alice, &bob);
    let frames = up_to_data(&mut a, &mut b);
    let mut longer = frames.data_a.clone();
    longer.push(0);
    b.receive(&longer, T0).unwrap_err();
    assert_eq!(state(&b), ExchangeState::Failed);
}

/// Gives a fresh exchange B frames of A in a wrong order, chosen by `pick`
/// from A's HELLO, KEY, DATA and CONFIRM frames: every frame but the last
/// is accepted, the last fails with MalformedMessage and fails the exchange.
fn out_of_order(what: &str, pick: fn(&[Vec<u8>; 4]) -> Vec<Vec<u8>>) {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let mut a = Exchange::bluetooth(&alice.identity, &alice.contacts, None, T0, None).unwrap();
    let code = a.session_code().unwrap();
    // A runs its exchange with a first Bob device, to the end.
    let mut first = Exchange::bluetooth(&bob.identity, &bob.contacts, Some(&code), T0, None).unwrap();
    let frames = up_to_data(&mut a, &mut first);
    a.receive(&frames.data_b, T0).unwrap();
    a.confirm(T0).unwrap();
    let confirm_a = take(&mut a);
    let sent = [frames.hello_a, frames.key_a, frames.data_a, confirm_a];

    // A second Bob device gets A's frames in the wrong order.
    let mut b = Exchange::bluetooth(&bob.identity, &bob.contacts, Some(&code), T0, None).unwrap();
    let sequence = pick(&sent);
    let (last, accepted) = sequence.split_last().unwrap();
    for (i, frame) in accepted.iter().enumerate() {
        b.receive(frame, T0).unwrap_or_else(|e| panic!("{what}: frame {i}: {e}"));
    }
    let error = b.receive(last, T0).expect_err(what);
    assert_eq!(error.kind(), ErrorKind::MalformedMessage, "{what}: {error}");
    assert!(!error.detail.is_empty(), "{what}");
    assert_failed(&mut b);
}

#[test]
fn bluetooth_replayed_frames_are_rejected() {
    out_of_order("HELLO twice", |[hello, ..]| vec![hello.clone(), hello.clone()]);
    out_of_order("KEY twice", |[hello, key, ..]| vec![hello.clone(), key.clone(), key.clone()]);
}

/// Replays of DATA and CONFIRM, and a frame of an earlier exchange.
#[test]
fn bluetooth_replayed_data_and_confirm_are_rejected() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");

    let (mut a, mut b) = bluetooth_pair(&alice, &bob);
    let frames = up_to_data(&mut a, &mut b);
    b.receive(&frames.data_a, T0).unwrap();
    assert_kind(b.receive(&frames.data_a, T0), ErrorKind::MalformedMessage);
    assert_failed(&mut b);

    let (mut a, mut b) = bluetooth_pair(&alice, &bob);
    pump(&mut a, &mut b);
    a.confirm(T0).unwrap();
    let confirm = take(&mut a);
    b.receive(&confirm, T0).unwrap();
    // The peer's CONFIRM is its last frame: anything more is invalid_state
    // and changes nothing (PROTOCOL.md 7.1).
    assert_kind(b.receive(&confirm, T0), ErrorKind::InvalidState);
    assert_eq!(b.status().unwrap(), (ExchangeState::CompareSas, ExchangeFlags::PEER_CONFIRMED));

    // A DATA frame of an earlier exchange between the same two: other keys.
    let (mut a1, mut b1) = bluetooth_pair(&alice, &bob);
    let old = up_to_data(&mut a1, &mut b1);
    let (mut a2, mut b2) = bluetooth_pair(&alice, &bob);
    let _ = up_to_data(&mut a2, &mut b2);
    assert_kind(b2.receive(&old.data_a, T0), ErrorKind::AuthenticationFailed);
    assert_failed(&mut b2);
}

#[test]
fn bluetooth_reordered_frames_are_rejected() {
    out_of_order("KEY before HELLO", |[_, key, ..]| vec![key.clone()]);
    out_of_order("DATA before HELLO", |[_, _, data, _]| vec![data.clone()]);
    out_of_order("DATA before KEY", |[hello, _, data, _]| vec![hello.clone(), data.clone()]);
    out_of_order("CONFIRM before HELLO", |[.., confirm]| vec![confirm.clone()]);
    out_of_order("CONFIRM before KEY", |[hello, .., confirm]| vec![hello.clone(), confirm.clone()]);
    out_of_order("CONFIRM before DATA", |[hello, key, _, confirm]| vec![hello.clone(), key.clone(), confirm.clone()]);
}

#[test]
fn bluetooth_unknown_version_and_type_are_rejected() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    for header in [[2u8, 1], [0, 1], [1, 0], [1, 5], [1, 0xFF]] {
        let (mut a, mut b) = bluetooth_pair(&alice, &bob);
        let mut hello = take(&mut a);
        hello[..2].copy_from_slice(&header);
        assert_kind(b.receive(&hello, T0), ErrorKind::MalformedMessage);
        assert_eq!(state(&b), ExchangeState::Failed, "{header:?}");
    }
    // Our own HELLO, reflected.
    let (_, mut b) = bluetooth_pair(&alice, &bob);
    let mut own = Exchange::bluetooth(&bob.identity, &bob.contacts, None, T0, None).unwrap();
    let reflected = take(&mut own);
    assert_kind(b.receive(&reflected, T0), ErrorKind::InvalidKey);
    assert_failed(&mut b);
}

// ---------------------------------------------------------------------------
// Sealing and restoring
// ---------------------------------------------------------------------------

#[test]
fn bluetooth_seal_and_restore_mid_exchange() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let (mut a, mut b) = bluetooth_pair(&alice, &bob);
    let hello_a = take(&mut a);
    let hello_b = take(&mut b);
    a.receive(&hello_b, T0).unwrap();
    b.receive(&hello_a, T0).unwrap();
    let key_a = take(&mut a);

    // A stops here, and comes back later through a new identity handle.
    let sealed = a.seal().unwrap();
    assert!(!sealed.is_empty());
    drop(a);
    let later = Identity::load(&alice.secrets).unwrap();
    let mut a = Exchange::restore(&later, &alice.contacts, &sealed, T0 + 60).unwrap();
    assert_eq!(state(&a), ExchangeState::AwaitingPeer);
    assert_eq!(a.next_outgoing().unwrap(), Vec::<u8>::new(), "KEY was sent before sealing");
    assert_eq!(a.session_code().unwrap(), b.session_code().unwrap());

    b.receive(&key_a, T0 + 60).unwrap();
    pump(&mut a, &mut b);
    let sas = a.sas().unwrap();
    assert_eq!(b.sas().unwrap(), sas);

    // Sealed again while comparing, after saving: the restored exchange
    // knows the saved contact.
    let id = a.save(T0 + 70).unwrap();
    let sealed = a.seal().unwrap();
    drop(a);
    let mut a = Exchange::restore(&alice.identity, &alice.contacts, &sealed, T0 + 80).unwrap();
    assert_eq!(a.status().unwrap(), (ExchangeState::CompareSas, ExchangeFlags::empty()));
    assert_eq!(a.sas().unwrap(), sas);
    assert_eq!(a.peer_name().unwrap(), "Bob");
    assert_eq!(a.confirm(T0 + 90).unwrap(), id);
    assert_eq!(alice.contacts.count().unwrap(), 1);
    b.confirm(T0 + 90).unwrap();
    pump(&mut a, &mut b);
    assert!(flags(&a).contains(ExchangeFlags::PEER_CONFIRMED));
    assert!(flags(&b).contains(ExchangeFlags::PEER_CONFIRMED));
    a.settle(T0 + 90).unwrap();

    // A finished Bluetooth exchange still seals (it may have a CONFIRM
    // frame to send or receive) and restores finished.
    let sealed = a.seal().unwrap();
    let a = Exchange::restore(&alice.identity, &alice.contacts, &sealed, T0 + 100).unwrap();
    assert_eq!(state(&a), ExchangeState::Confirmed);
}

#[test]
fn qr_seal_and_restore() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let (mut a, mut b) = (alice.qr(), bob.qr());
    let shown = take(&mut a);
    let sealed = a.seal().unwrap();
    drop(a);
    let mut a = Exchange::restore(&alice.identity, &alice.contacts, &sealed, T0 + 1).unwrap();
    assert_eq!(take(&mut a), shown, "the restored exchange shows the same code");
    swap_qr(&mut a, &mut b);
    assert_eq!(a.sas().unwrap(), b.sas().unwrap());

    // Imported (source format) exchanges seal too.
    let mut v5 = bob.qr();
    v5.receive(V5_TEXT.as_bytes(), T0).unwrap();
    let restored = Exchange::restore(&bob.identity, &bob.contacts, &v5.seal().unwrap(), T0 + 1).unwrap();
    assert_eq!(restored.status().unwrap(), (ExchangeState::Imported, ExchangeFlags::UNAUTHENTICATED));
    assert_eq!(restored.peer_name().unwrap(), "Al|ice");
}

#[test]
fn restore_refusals() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let sealed = alice.qr().seal().unwrap();
    // Another identity (and another device key).
    assert_kind(Exchange::restore(&bob.identity, &bob.contacts, &sealed, T0), ErrorKind::AuthenticationFailed);
    // Altered anywhere.
    for position in 0..sealed.len() {
        let mut altered = sealed.clone();
        altered[position] ^= 0x01;
        let error = Exchange::restore(&alice.identity, &alice.contacts, &altered, T0).expect_err(&format!("byte {position}"));
        assert!(
            matches!(error.kind(), ErrorKind::CorruptData | ErrorKind::AuthenticationFailed),
            "byte {position}: {error}"
        );
    }
    assert_kind(Exchange::restore(&alice.identity, &alice.contacts, &sealed[..sealed.len() - 1], T0), ErrorKind::AuthenticationFailed);
    assert_kind(Exchange::restore(&alice.identity, &alice.contacts, b"", T0), ErrorKind::CorruptData);
    assert_kind(Exchange::restore(&alice.identity, &alice.contacts, b"not sealed", T0), ErrorKind::CorruptData);
    // Expired.
    assert_kind(Exchange::restore(&alice.identity, &alice.contacts, &sealed, T0 + LIFETIME + 1), ErrorKind::Expired);
    assert_kind(Exchange::restore(&alice.identity, &alice.contacts, &sealed, -1), ErrorKind::InvalidArgument);
    let restored = Exchange::restore(&alice.identity, &alice.contacts, &sealed, T0 + LIFETIME).unwrap();
    assert_eq!(state(&restored), ExchangeState::AwaitingPeer);
    // The error went to the identity.
    let error = Exchange::restore(&alice.identity, &alice.contacts, b"", T0).unwrap_err();
    assert!(!error.detail.is_empty(), "{error}");
}

// ---------------------------------------------------------------------------
// Misuse and lifetime
// ---------------------------------------------------------------------------

#[test]
fn calls_in_the_wrong_order() {
    let alice = Party::new("Alice");
    for mut ex in [alice.qr(), Exchange::bluetooth(&alice.identity, &alice.contacts, None, T0, None).unwrap()] {
        let error = assert_kind(ex.confirm(T0), ErrorKind::InvalidState);
        assert!(!error.detail.is_empty(), "no detail for {error}");
        assert_kind(ex.save(T0), ErrorKind::InvalidState);
        assert_kind(ex.sas(), ErrorKind::InvalidState);
        assert_kind(ex.peer_name(), ErrorKind::InvalidState);
        assert_kind(ex.peer_fingerprint(), ErrorKind::InvalidState);
        assert_kind(ex.peer_public_key(), ErrorKind::InvalidState);
        // None of that ended the exchange.
        assert_eq!(state(&ex), ExchangeState::AwaitingPeer);
        assert_kind(ex.receive(b"x", -1), ErrorKind::InvalidArgument);
        assert_eq!(state(&ex), ExchangeState::AwaitingPeer);
    }
}

#[test]
fn constructor_refusals() {
    let alice = Party::new("Alice");
    assert_kind(Exchange::qr(&alice.identity, &alice.contacts, -1, None), ErrorKind::InvalidArgument);
    assert_kind(Exchange::bluetooth(&alice.identity, &alice.contacts, None, -1, None), ErrorKind::InvalidArgument);
    for bad in ["", "ECHO 42", "ECHO", "ALPHA 0042", "ECHO 0042 X", "EC\0HO 0042"] {
        let error = assert_kind(Exchange::bluetooth(&alice.identity, &alice.contacts, Some(bad), T0, None), ErrorKind::InvalidArgument);
        assert!(!error.detail.is_empty(), "{bad:?}");
    }
    Exchange::bluetooth(&alice.identity, &alice.contacts, Some("zulu-9999"), T0, None).unwrap();
}

#[test]
fn expired_exchanges_fail() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let (mut a, mut b) = (alice.qr(), bob.qr());
    let from_b = take(&mut b);
    assert_kind(a.receive(&from_b, T0 + LIFETIME + 1), ErrorKind::Expired);
    assert_failed(&mut a);

    // Just in time, then too late to save.
    let (mut a, mut b) = (alice.qr(), bob.qr());
    let from_b = take(&mut b);
    a.receive(&from_b, T0 + LIFETIME).unwrap();
    assert_kind(a.save(T0 + LIFETIME + 1), ErrorKind::Expired);
    assert_eq!(state(&a), ExchangeState::Failed);

    let (mut a, mut b) = bluetooth_pair(&alice, &bob);
    let hello_b = take(&mut b);
    assert_kind(a.receive(&hello_b, T0 + LIFETIME + 1), ErrorKind::Expired);
    assert_failed(&mut a);
}

/// The library keeps the exchange's identity and contact store alive.
#[test]
fn an_exchange_outlives_its_identity_and_store_handles() {
    let bob = Party::new("Bob");
    let secrets = SecretStore::memory().unwrap();
    let carol = Identity::create(&secrets, "Carol").unwrap();
    let dir = TempDir::new("exchange-outlives");
    let contacts = ContactStore::open(&carol, dir.path().join("carol.db")).unwrap();
    let mut c = Exchange::bluetooth(&carol, &contacts, None, T0, None).unwrap();
    let code = c.session_code().unwrap();
    drop(contacts);
    drop(carol);
    drop(secrets);
    let mut b = Exchange::bluetooth(&bob.identity, &bob.contacts, Some(&code), T0, None).unwrap();
    pump(&mut c, &mut b);
    assert_eq!(c.sas().unwrap(), b.sas().unwrap());
    assert_eq!(b.peer_name().unwrap(), "Carol");
    // Carol's confirmation is written through the store the exchange holds.
    let id = c.confirm(T0).unwrap();
    b.confirm(T0).unwrap();
    pump(&mut c, &mut b);
    assert_eq!(c.settle(T0).unwrap(), Some(id));
    drop(c);
    let carol = Identity::load(&SecretStore::memory().unwrap());
    assert!(carol.is_err(), "a new memory store holds no identity");
}

/// An exchange is made with a contact store of its own identity.
#[test]
fn an_exchange_refuses_a_store_of_another_identity() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    assert_kind(Exchange::qr(&alice.identity, &bob.contacts, T0, None), ErrorKind::WrongIdentity);
    assert_kind(Exchange::bluetooth(&alice.identity, &bob.contacts, None, T0, None), ErrorKind::WrongIdentity);
    assert_kind(Exchange::invite(&alice.identity, &bob.contacts, false, T0, None), ErrorKind::WrongIdentity);
    let mut a = Exchange::qr(&alice.identity, &alice.contacts, T0, None).unwrap();
    let mut b = Exchange::qr(&bob.identity, &bob.contacts, T0, None).unwrap();
    let (from_a, from_b) = (take(&mut a), take(&mut b));
    a.receive(&from_b, T0).unwrap();
    b.receive(&from_a, T0).unwrap();
    a.save(T0).unwrap();
    let sealed = a.seal().unwrap();
    assert_kind(Exchange::restore(&alice.identity, &bob.contacts, &sealed, T0), ErrorKind::WrongIdentity);
    let other = TempDir::new("exchange-other-store");
    let second = ContactStore::open(&alice.identity, other.path().join("second.db")).unwrap();
    assert_kind(Exchange::restore(&alice.identity, &second, &sealed, T0), ErrorKind::InvalidArgument);
    assert_eq!(bob.contacts.count().unwrap(), 0);
    assert_eq!(second.count().unwrap(), 0);
}

#[test]
fn exchanges_move_between_threads() {
    let alice = Party::new("Alice");
    let bob = Party::new("Bob");
    let (mut a, mut b) = bluetooth_pair(&alice, &bob);
    let (a, b) = std::thread::scope(|scope| {
        let handle = scope.spawn(move || {
            pump(&mut a, &mut b);
            (a, b)
        });
        handle.join().unwrap()
    });
    // Shared: read from several threads at once.
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| assert_eq!(a.sas().unwrap(), b.sas().unwrap()));
        }
    });
}

#[test]
fn deterministic_random_replays() {
    let store_1 = SecretStore::memory().unwrap();
    let store_2 = SecretStore::memory().unwrap();
    let mut r1 = rng(9);
    let mut r2 = rng(9);
    let one = Identity::create_with_random(&store_1, "Same", Some(&mut r1)).unwrap();
    let two = Identity::create_with_random(&store_2, "Same", Some(&mut r2)).unwrap();
    assert_eq!(one.public_key().unwrap(), two.public_key().unwrap());
    let dir = TempDir::new("exchange-replays");
    let contacts_1 = ContactStore::open(&one, dir.path().join("one.db")).unwrap();
    let contacts_2 = ContactStore::open(&two, dir.path().join("two.db")).unwrap();
    let mut q1 = Exchange::qr(&one, &contacts_1, T0, Some(&mut r1)).unwrap();
    let mut q2 = Exchange::qr(&two, &contacts_2, T0, Some(&mut r2)).unwrap();
    assert_eq!(take(&mut q1), take(&mut q2));
    // The stream moved on: the next exchange differs.
    let mut q3 = Exchange::qr(&one, &contacts_1, T0, Some(&mut r1)).unwrap();
    assert_ne!(take(&mut q3), take(&mut q1));
    // Other seeds, other keys; None is the system's randomness.
    let three = Identity::create_with_random(&SecretStore::memory().unwrap(), "Same", Some(&mut rng(10))).unwrap();
    assert_ne!(three.public_key().unwrap(), one.public_key().unwrap());
    let system = Identity::create_with_random(&SecretStore::memory().unwrap(), "Same", None).unwrap();
    assert_ne!(system.public_key().unwrap(), one.public_key().unwrap());
    // The store still refuses a second identity.
    assert_kind(Identity::create_with_random(&store_1, "Again", Some(&mut r1)), ErrorKind::AlreadyExists);
    assert_kind(Identity::create_with_random(&store_1, "", None), ErrorKind::InvalidArgument);
}

#[test]
fn short_codes() {
    assert_eq!(itsme::short_code_parse("ECHO 0042").unwrap(), 40042);
    assert_eq!(itsme::short_code_parse(" echo-0042 ").unwrap(), 40042);
    assert_eq!(itsme::short_code_format(0).unwrap(), "ALFA 0000");
    assert_eq!(itsme::short_code_format(itsme::SHORT_CODE_VALUES - 1).unwrap(), "ZULU 9999");
    assert_eq!(itsme::short_code_format(130_000).unwrap(), "NOVEMBER 0000");
    let error = assert_kind(itsme::short_code_format(itsme::SHORT_CODE_VALUES), ErrorKind::InvalidArgument);
    assert!(!error.detail.is_empty());
    for bad in ["", "ECHO 42", "ECHO  0042", "ECHO\t0042", "ECHO 0042\0"] {
        let error = assert_kind(itsme::short_code_parse(bad), ErrorKind::InvalidArgument);
        assert!(!error.detail.is_empty(), "{bad:?}");
    }
}
