//! Contact exchanges at a distance (invite and real-time, PROTOCOL.md
//! section 16) through the safe Rust API, with the relay's messages moved
//! by hand: whole exchanges in both modes, a wrong encryption code, typos in
//! the codes, changed messages, sealing and restoring between the steps,
//! expiry, and the remote accessors on exchanges in person.
//!
//! Every identity, code and key is drawn from a `DeterministicRandom`, so
//! each run replays the same exchanges.

mod common;

use common::{assert_kind, rng, state, TempDir};
use itsme::{
    ContactStore, ErrorKind, Exchange, ExchangeFlags, ExchangeMethod, ExchangeState, Identity,
    SecretStore, VerificationState,
};

const T0: i64 = 1_800_000_000;
/// A pending exchange expires this long after it began.
const LIFETIME: i64 = 24 * 3600;
/// The 31 characters of the codes, in value order (PROTOCOL.md 16.1).
const ALPHABET: &str = "23456789ABCDEFGHJKMNPQRSTUVWXYZ";
/// Characters the codes never use: they look like others.
const LOOK_ALIKES: &str = "01ILO";
/// Message types (PROTOCOL.md 16.3), after the version byte 1.
const INVITE: u8 = 1;
const ACCEPT: u8 = 2;
const REPLY: u8 = 3;
/// INVITE: version, type, sid (16), Ya (32), commitment (32).
const INVITE_LEN: usize = 82;
/// The shortest ACCEPT: version, type, Yb, tag_R and a sealed payload with
/// a one-byte name.
const ACCEPT_MIN: usize = 2 + 32 + 32 + 162;

/// An identity with its secret store and contact store.
struct Party {
    _secrets: SecretStore,
    identity: Identity,
    contacts: ContactStore,
    _dir: TempDir,
}

impl Party {
    /// A party whose identity is drawn from the seed `[tag; 32]`.
    fn new(name: &str, tag: u8) -> Party {
        let dir = TempDir::new(&format!("remote-{}", name.to_lowercase()));
        let secrets = SecretStore::memory().unwrap();
        let identity = Identity::create_with_random(&secrets, name, Some(&mut rng(tag))).unwrap();
        let contacts = ContactStore::open(&identity, dir.path().join("contacts.db")).unwrap();
        Party { _secrets: secrets, identity, contacts, _dir: dir }
    }

    fn key(&self) -> [u8; 32] {
        self.identity.public_key().unwrap()
    }

    /// An invite (or a real-time exchange) created at `T0`.
    fn invite(&self, realtime: bool, tag: u8) -> Exchange {
        Exchange::invite(&self.identity, &self.contacts, realtime, T0, Some(&mut rng(tag))).unwrap()
    }

    /// Joins `inviter`'s exchange with its two codes, in its mode, at `T0`.
    fn accept(&self, inviter: &Exchange, tag: u8) -> Exchange {
        let realtime = inviter.method().unwrap() == ExchangeMethod::Realtime;
        let (invite_code, encryption_code) = (inviter.invite_code().unwrap(), inviter.encryption_code().unwrap());
        Exchange::accept_invite(&self.identity, &self.contacts, &invite_code, &encryption_code, realtime, T0, Some(&mut rng(tag)))
            .unwrap()
    }

    /// Joins an invite (not real-time) with codes as typed, at `T0`.
    fn accept_with_codes(&self, invite_code: &str, encryption_code: &str, tag: u8) -> Exchange {
        Exchange::accept_invite(&self.identity, &self.contacts, invite_code, encryption_code, false, T0, Some(&mut rng(tag))).unwrap()
    }
}

/// The next message to post, which must exist.
#[track_caller]
fn take(exchange: &mut Exchange) -> Vec<u8> {
    let bytes = exchange.next_outgoing().unwrap();
    assert!(!bytes.is_empty(), "nothing to send");
    assert!(bytes.len() <= itsme::REMOTE_MESSAGE_MAX, "{} bytes", bytes.len());
    bytes
}

#[track_caller]
fn assert_nothing_to_send(exchange: &mut Exchange, why: &str) {
    assert_eq!(exchange.next_outgoing().unwrap(), Vec::<u8>::new(), "{why}");
}

/// The values of a code's eight characters ("ABCD-EFGH").
fn values(code: &str) -> Vec<usize> {
    code.chars().filter(|&c| c != '-').map(|c| ALPHABET.find(c).expect("a code character")).collect()
}

/// Eight characters shown as two groups of four.
fn shown(chars: &[char]) -> String {
    let text: String = chars.iter().collect();
    format!("{}-{}", &text[..4], &text[4..])
}

/// The code whose first seven values are `first`, completed with the check
/// character as PROTOCOL.md 16.1 defines it.
fn with_check(first: [usize; 7]) -> String {
    let sum: usize = first.iter().enumerate().map(|(i, v)| (i + 1) * v).sum::<usize>() % 31;
    let check = (31 - sum) % 31 * 4 % 31;
    let chars: Vec<char> =
        first.iter().chain([check].iter()).map(|&v| ALPHABET.as_bytes()[v] as char).collect();
    shown(&chars)
}

/// A code as the library shows it: "ABCD-EFGH", from the alphabet, with a
/// check character that holds.
#[track_caller]
fn assert_code(code: &str) {
    assert_eq!(code.len(), itsme::sys::ITSME_REMOTE_CODE_SIZE - 1, "{code:?}");
    assert_eq!(code.as_bytes()[4], b'-', "{code:?}");
    let values = values(code);
    assert_eq!(values.len(), 8, "{code:?}");
    let sum: usize = values.iter().enumerate().map(|(i, v)| (i + 1) * v).sum();
    assert_eq!(sum % 31, 0, "the check character of {code:?}");
}

/// A relay ID: 32 lower-case hexadecimal digits.
#[track_caller]
fn assert_relay_id(id: &str) {
    assert_eq!(id.len(), itsme::sys::ITSME_RELAY_ID_SIZE - 1, "{id:?}");
    assert!(id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{id:?}");
}

/// Whether `needle` occurs in `haystack`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

/// A failed exchange refuses everything, and has nothing to send.
#[track_caller]
fn assert_failed(exchange: &mut Exchange) {
    assert_eq!(state(exchange), ExchangeState::Failed);
    assert_kind(exchange.sas(), ErrorKind::InvalidState);
    assert_kind(exchange.peer_name(), ErrorKind::InvalidState);
    assert_kind(exchange.save(T0), ErrorKind::InvalidState);
    assert_kind(exchange.confirm(T0), ErrorKind::InvalidState);
    assert_kind(exchange.seal(), ErrorKind::InvalidState);
    assert_nothing_to_send(exchange, "a failed exchange sent something");
    assert_eq!(state(exchange), ExchangeState::Failed);
}

// ---------------------------------------------------------------------------
// Whole exchanges
// ---------------------------------------------------------------------------

/// A whole exchange in one mode, with every check along the way.
fn round_trip(realtime: bool) {
    let method = if realtime { ExchangeMethod::Realtime } else { ExchangeMethod::Invite };
    let alice = Party::new("Alice", 1);
    let bob = Party::new("Bob", 2);

    // The inviter: two codes to share, a relay ID, the INVITE queued.
    let mut a = alice.invite(realtime, 3);
    assert_eq!(a.status().unwrap(), (ExchangeState::AwaitingPeer, ExchangeFlags::empty()));
    assert_eq!(a.method().unwrap(), method);
    assert!(a.is_inviter().unwrap());
    let invite_code = a.invite_code().unwrap();
    let encryption_code = a.encryption_code().unwrap();
    let relay_id = a.relay_id().unwrap();
    assert_code(&invite_code);
    assert_code(&encryption_code);
    assert_ne!(invite_code, encryption_code);
    assert_relay_id(&relay_id);
    assert_eq!(itsme::check_remote_code(&invite_code).unwrap(), invite_code);
    assert_kind(a.session_code(), ErrorKind::InvalidState);
    assert_kind(a.sas(), ErrorKind::InvalidState);
    assert_kind(a.peer_name(), ErrorKind::InvalidState);

    let invite = take(&mut a);
    assert_eq!(invite.len(), INVITE_LEN);
    assert_eq!(invite[..2], [1, INVITE]);
    assert_nothing_to_send(&mut a, "the inviter waits for the ACCEPT");

    // The invitee types the codes, loosely.
    let typed = invite_code.to_lowercase().replace('-', " ");
    let mut b =
        Exchange::accept_invite(&bob.identity, &bob.contacts, &typed, &encryption_code, realtime, T0 + 60, Some(&mut rng(4))).unwrap();
    assert_eq!(b.status().unwrap(), (ExchangeState::AwaitingPeer, ExchangeFlags::empty()));
    assert_eq!(b.method().unwrap(), method);
    assert!(!b.is_inviter().unwrap());
    assert_eq!(b.invite_code().unwrap(), invite_code);
    assert_eq!(b.encryption_code().unwrap(), encryption_code);
    assert_eq!(b.relay_id().unwrap(), relay_id, "both sides meet at the same relay ID");
    assert_nothing_to_send(&mut b, "the invitee speaks only after the INVITE");

    b.receive(&invite, T0 + 60).unwrap();
    let accept = take(&mut b);
    assert!(accept.len() >= ACCEPT_MIN, "{} bytes", accept.len());
    assert_eq!(accept[..2], [1, ACCEPT]);
    assert_eq!(state(&b), ExchangeState::AwaitingPeer, "the invitee's SAS waits for the REPLY");
    assert_kind(b.sas(), ErrorKind::InvalidState);
    assert_nothing_to_send(&mut b, "the invitee sends one message");

    // The inviter sees the SAS on the ACCEPT, an hour later.
    a.receive(&accept, T0 + 3600).unwrap();
    assert_eq!(a.status().unwrap(), (ExchangeState::CompareSas, ExchangeFlags::empty()));
    assert_eq!(a.peer_name().unwrap(), "Bob");
    assert_eq!(a.peer_fingerprint().unwrap(), bob.identity.fingerprint().unwrap());
    assert_eq!(a.peer_public_key().unwrap(), Some(bob.key()));
    let reply = take(&mut a);
    assert_eq!(reply[..2], [1, REPLY]);
    assert_nothing_to_send(&mut a, "the inviter sends two messages");

    b.receive(&reply, T0 + 3660).unwrap();
    assert_eq!(b.status().unwrap(), (ExchangeState::CompareSas, ExchangeFlags::empty()));
    assert_eq!(b.peer_name().unwrap(), "Alice");
    assert_eq!(b.peer_fingerprint().unwrap(), alice.identity.fingerprint().unwrap());
    assert_eq!(b.peer_public_key().unwrap(), Some(alice.key()));

    let sas = a.sas().unwrap();
    assert_eq!(b.sas().unwrap(), sas);
    assert_eq!(itsme::short_code_format(itsme::short_code_parse(&sas).unwrap()).unwrap(), sas);

    // Alice saves Bob unverified while the call is set up; both confirm
    // once the SAS matched aloud.
    let id_a = a.save(T0 + 3700).unwrap();
    let saved = alice.contacts.get(id_a).unwrap();
    assert_eq!((saved.state, saved.method), (VerificationState::Unverified, method));
    assert_eq!(a.confirm(T0 + 3760).unwrap(), id_a);
    assert_eq!(state(&a), ExchangeState::AwaitingDecision);
    assert_eq!(alice.contacts.get(id_a).unwrap().state, VerificationState::AwaitingPeer);
    // Through the mailbox the inviter's DECISION waits for the invitee's.
    let held = a.next_outgoing().unwrap();
    assert_eq!(held.is_empty(), !realtime);
    let id_b = b.confirm(T0 + 3760).unwrap();
    let decision_b = take(&mut b);
    assert_eq!((decision_b.len(), &decision_b[..2]), (19, &[1u8, 4][..]));
    a.receive(&decision_b, T0 + 3760).unwrap();
    assert_eq!(a.status().unwrap(), (ExchangeState::AwaitingDecision, ExchangeFlags::PEER_CONFIRMED));
    assert_eq!(a.settle(T0 + 3760).unwrap(), Some(id_a));
    let decision_a = if realtime { held } else { take(&mut a) };
    b.receive(&decision_a, T0 + 3760).unwrap();
    assert_eq!(b.settle(T0 + 3760).unwrap(), Some(id_b));
    for (party, peer, exchange, id) in [(&alice, &bob, &mut a, id_a), (&bob, &alice, &mut b, id_b)] {
        assert_eq!(state(exchange), ExchangeState::Confirmed);
        assert_nothing_to_send(exchange, "a confirmed exchange at a distance has nothing more to send");
        let contact = party.contacts.get(id).unwrap();
        assert_eq!(
            (contact.name.as_str(), contact.state, contact.method, contact.public_key, contact.verified_at),
            (peer.identity.name().unwrap().as_str(), VerificationState::Verified, method, Some(peer.key()), Some(T0 + 3760))
        );
        assert_eq!(contact.fingerprint, peer.identity.fingerprint().unwrap());
        assert_eq!(party.contacts.count().unwrap(), 1);
    }
}

#[test]
fn invite_end_to_end() {
    round_trip(false);
}

#[test]
fn realtime_end_to_end() {
    round_trip(true);
}

#[test]
fn the_same_randomness_replays_the_same_exchange() {
    // Everything the library draws comes from the DeterministicRandom: two
    // runs with the same seeds give the same codes, messages and SAS.
    let run = |realtime: bool| {
        let (alice, bob) = (Party::new("Alice", 1), Party::new("Bob", 2));
        let mut a = alice.invite(realtime, 3);
        let mut b = bob.accept(&a, 4);
        let invite = take(&mut a);
        b.receive(&invite, T0).unwrap();
        let accept = take(&mut b);
        a.receive(&accept, T0).unwrap();
        let reply = take(&mut a);
        b.receive(&reply, T0).unwrap();
        let sas = a.sas().unwrap();
        assert_eq!(b.sas().unwrap(), sas);
        let codes = (a.invite_code().unwrap(), a.encryption_code().unwrap(), a.relay_id().unwrap());
        (codes, [invite, accept, reply], sas)
    };
    let first = run(false);
    assert_eq!(run(false), first);
    // The mode changes the relay ID only: the mailbox and the room of one
    // invite code are different places.
    let realtime = run(true);
    assert_eq!(realtime, run(true));
    assert_eq!(((realtime.0).0.as_str(), (realtime.0).1.as_str()), ((first.0).0.as_str(), (first.0).1.as_str()));
    assert_ne!((realtime.0).2, (first.0).2);
    // Another seed, other codes.
    let other = Party::new("Alice", 1).invite(false, 5);
    assert_ne!(other.invite_code().unwrap(), (first.0).0);
    assert_ne!(other.encryption_code().unwrap(), (first.0).1);
    assert_ne!(other.relay_id().unwrap(), (first.0).2);
}

#[test]
fn a_sas_that_differs_is_rejected_on_both_sides() {
    let (alice, bob) = (Party::new("Alice", 1), Party::new("Bob", 2));
    let mut a = alice.invite(false, 3);
    let mut b = bob.accept(&a, 4);
    b.receive(&take(&mut a), T0).unwrap();
    a.receive(&take(&mut b), T0).unwrap();
    b.receive(&take(&mut a), T0).unwrap();
    let sealed_a = a.seal().unwrap();
    let id_a = a.save(T0).unwrap();
    let id_b = b.save(T0).unwrap();
    a.reject().unwrap();
    b.reject().unwrap();
    for (party, exchange, id) in [(&alice, &mut a, id_a), (&bob, &mut b, id_b)] {
        assert_eq!(state(exchange), ExchangeState::Rejected);
        assert_kind(party.contacts.get(id), ErrorKind::NotFound);
        assert_eq!(party.contacts.count().unwrap(), 0);
        assert_kind(exchange.confirm(T0), ErrorKind::InvalidState);
        // Its DECISION, saying so, is the one thing it sends.
        let decision = take(exchange);
        assert_eq!((decision.len(), &decision[..2]), (19, &[1u8, 4][..]));
        assert_nothing_to_send(exchange, "a rejected exchange sends its DECISION only");
    }
    // The exchange has ended: a copy sealed before cannot bring it back.
    assert_kind(Exchange::restore(&alice.identity, &alice.contacts, &sealed_a, T0), ErrorKind::InvalidState);
}

// ---------------------------------------------------------------------------
// A wrong encryption code
// ---------------------------------------------------------------------------

#[test]
fn a_wrong_encryption_code_fails_and_spends_the_invite() {
    let (alice, bob) = (Party::new("Alice", 1), Party::new("Bob", 2));
    let mut a = alice.invite(false, 3);
    let invite = take(&mut a);
    let invite_code = a.invite_code().unwrap();
    let right = a.encryption_code().unwrap();

    // A code that passes the typo check but is not the inviter's: the
    // first character changed, the check character recomputed.
    let mut first: [usize; 7] = values(&right)[..7].try_into().unwrap();
    first[0] = (first[0] + 1) % 31;
    let wrong = with_check(first);
    assert_ne!(wrong, right);
    assert_eq!(itsme::check_remote_code(&wrong).unwrap(), wrong);

    let mut b = bob.accept_with_codes(&invite_code, &wrong, 4);
    // The invitee cannot tell: the INVITE reveals nothing about the code.
    b.receive(&invite, T0).unwrap();
    let accept = take(&mut b);

    // The inviter sees it on the ACCEPT, fails, and never answers.
    let error = assert_kind(a.receive(&accept, T0 + 60), ErrorKind::AuthenticationFailed);
    assert!(error.detail.contains("encryption code"), "{error}");
    assert_failed(&mut a);

    // The invite is spent: someone with the right code cannot use it now.
    let carol = Party::new("Carol", 5);
    let mut c = carol.accept_with_codes(&invite_code, &right, 6);
    c.receive(&invite, T0).unwrap();
    assert_kind(a.receive(&take(&mut c), T0 + 120), ErrorKind::InvalidState);
    assert_failed(&mut a);

    // The invitee gets no REPLY, so never a SAS: nothing to compare, save
    // or confirm.  Its host learns from the relay that the invite ended
    // and gives up.
    assert_eq!(state(&b), ExchangeState::AwaitingPeer);
    assert_kind(b.sas(), ErrorKind::InvalidState);
    assert_kind(b.save(T0), ErrorKind::InvalidState);
    assert_kind(b.confirm(T0), ErrorKind::InvalidState);
    assert_nothing_to_send(&mut b, "the invitee sends one message");
    let sealed_b = b.seal().unwrap();
    b.reject().unwrap();
    assert_eq!(state(&b), ExchangeState::Rejected);
    assert_kind(Exchange::restore(&bob.identity, &bob.contacts, &sealed_b, T0 + 180), ErrorKind::InvalidState);
    // Left alone instead, it cannot be resumed once the day is over.
    let mut left = bob.accept_with_codes(&invite_code, &wrong, 7);
    left.receive(&invite, T0).unwrap();
    take(&mut left);
    let sealed_left = left.seal().unwrap();
    assert_kind(Exchange::restore(&bob.identity, &bob.contacts, &sealed_left, T0 + LIFETIME + 1), ErrorKind::Expired);

    // No contact anywhere.
    for party in [&alice, &bob, &carol] {
        assert_eq!(party.contacts.count().unwrap(), 0);
    }
}

// ---------------------------------------------------------------------------
// Codes
// ---------------------------------------------------------------------------

#[test]
fn codes_follow_the_protocol_check_character() {
    // Codes built here by PROTOCOL.md 16.1 are accepted as they are.
    let mut seed = 7usize;
    for _ in 0..200 {
        let mut first = [0usize; 7];
        for value in &mut first {
            seed = (seed * 1_103_515_245 + 12_345) % (1 << 31);
            *value = seed % 31;
        }
        let code = with_check(first);
        assert_eq!(itsme::check_remote_code(&code).unwrap(), code);
    }
    // And every code the library draws satisfies it.
    let alice = Party::new("Alice", 1);
    for tag in 10..30 {
        let exchange = alice.invite(tag % 2 == 0, tag);
        assert_code(&exchange.invite_code().unwrap());
        assert_code(&exchange.encryption_code().unwrap());
    }
}

#[test]
fn typed_codes_are_read_loosely() {
    let alice = Party::new("Alice", 1);
    let code = alice.invite(false, 3).invite_code().unwrap();
    let bare = code.replace('-', "");
    for typed in [
        code.clone(),
        code.to_lowercase(),
        bare.clone(),
        bare.to_lowercase(),
        format!("  {}  ", code.replace('-', " ")),
        bare.chars().flat_map(|c| [c, ' ']).collect::<String>(),
        format!("{}--{}", &bare[..2], &bare[2..]),
    ] {
        assert_eq!(itsme::check_remote_code(&typed).unwrap(), code, "{typed:?}");
    }
}

#[test]
fn every_single_typo_and_swap_is_caught() {
    let (alice, bob) = (Party::new("Alice", 1), Party::new("Bob", 2));
    let a = alice.invite(false, 3);
    let invite_code = a.invite_code().unwrap();
    let encryption_code = a.encryption_code().unwrap();
    for code in [&invite_code, &encryption_code] {
        let chars: Vec<char> = code.chars().filter(|&c| c != '-').collect();
        // Every single changed character: one of the alphabet is caught by
        // the check character, a look-alike is never used.
        for i in 0..8 {
            for c in ALPHABET.chars().chain(LOOK_ALIKES.chars()).filter(|&c| c != chars[i]) {
                let mut typo = chars.clone();
                typo[i] = c;
                let typo = shown(&typo);
                let error = assert_kind(itsme::check_remote_code(&typo), ErrorKind::InvalidArgument);
                if ALPHABET.contains(c) {
                    assert!(error.detail.contains("typo"), "{typo:?}: {error}");
                } else {
                    assert!(!error.detail.is_empty(), "{typo:?}");
                }
            }
        }
        // Every swap of two different characters, adjacent or not.
        let mut swaps = 0;
        for i in 0..8 {
            for j in i + 1..8 {
                if chars[i] == chars[j] {
                    continue;
                }
                let mut swapped = chars.clone();
                swapped.swap(i, j);
                let swapped = shown(&swapped);
                let error = assert_kind(itsme::check_remote_code(&swapped), ErrorKind::InvalidArgument);
                assert!(error.detail.contains("typo"), "{swapped:?}: {error}");
                swaps += 1;
            }
        }
        assert!(swaps > 0);
    }

    // Joining with a code that has one wrong character or a swap is
    // refused before anything else: no exchange starts.
    let mut typo: Vec<char> = invite_code.chars().filter(|&c| c != '-').collect();
    let i = 3;
    typo[i] = ALPHABET.chars().find(|&c| c != typo[i]).unwrap();
    let typo = shown(&typo);
    let mut swapped: Vec<char> = encryption_code.chars().filter(|&c| c != '-').collect();
    let j = (1..8).find(|&j| swapped[j] != swapped[0]).unwrap();
    swapped.swap(0, j);
    let swapped = shown(&swapped);
    for (invite_code, encryption_code) in
        [(typo.as_str(), encryption_code.as_str()), (invite_code.as_str(), swapped.as_str())]
    {
        for realtime in [false, true] {
            let error = assert_kind(
                Exchange::accept_invite(&bob.identity, &bob.contacts, invite_code, encryption_code, realtime, T0, Some(&mut rng(4))),
                ErrorKind::InvalidArgument,
            );
            assert!(error.detail.contains("typo"), "{error}");
        }
    }
}

#[test]
fn malformed_codes_are_refused() {
    let (alice, bob) = (Party::new("Alice", 1), Party::new("Bob", 2));
    let a = alice.invite(false, 3);
    let (invite_code, encryption_code) = (a.invite_code().unwrap(), a.encryption_code().unwrap());
    let seven = invite_code[..8].to_owned();
    let nine = format!("{invite_code}2");
    let accented = format!("{}\u{e9}", &invite_code[..8]);
    let with_nul = format!("{}\0{}", &invite_code[..4], &invite_code[5..]);
    for bad in ["", "-", "    ", "0000-0000", "OOOO-OOOO", "ABCD_EFGH", &seven, &nine, &accented, &with_nul] {
        let error = assert_kind(itsme::check_remote_code(bad), ErrorKind::InvalidArgument);
        assert!(!error.detail.is_empty(), "{bad:?}");
        assert_kind(
            Exchange::accept_invite(&bob.identity, &bob.contacts, bad, &encryption_code, false, T0, Some(&mut rng(4))),
            ErrorKind::InvalidArgument,
        );
        assert_kind(
            Exchange::accept_invite(&bob.identity, &bob.contacts, &invite_code, bad, false, T0, Some(&mut rng(4))),
            ErrorKind::InvalidArgument,
        );
    }
    // The same code twice.
    for code in [&invite_code, &encryption_code] {
        assert_kind(
            Exchange::accept_invite(&bob.identity, &bob.contacts, code, code, false, T0, Some(&mut rng(4))),
            ErrorKind::InvalidArgument,
        );
    }
    // A negative time.
    assert_kind(Exchange::invite(&alice.identity, &alice.contacts, false, -1, Some(&mut rng(3))), ErrorKind::InvalidArgument);
    assert_kind(
        Exchange::accept_invite(&bob.identity, &bob.contacts, &invite_code, &encryption_code, false, -1, Some(&mut rng(4))),
        ErrorKind::InvalidArgument,
    );
    // After all these refusals the right codes still work.
    let mut a = alice.invite(false, 3);
    let mut b = bob.accept(&a, 4);
    b.receive(&take(&mut a), T0).unwrap();
    a.receive(&take(&mut b), T0).unwrap();
    assert_eq!(state(&a), ExchangeState::CompareSas);
}

// ---------------------------------------------------------------------------
// Changed, replayed and late messages
// ---------------------------------------------------------------------------

#[test]
fn a_changed_message_ends_the_exchange() {
    let (alice, bob) = (Party::new("Alice", 1), Party::new("Bob", 2));
    // One honest run, for its messages; the same seeds replay each side.
    let mut a = alice.invite(false, 3);
    let invite = take(&mut a);
    let mut b = bob.accept(&a, 4);
    b.receive(&invite, T0).unwrap();
    let accept = take(&mut b);
    a.receive(&accept, T0).unwrap();
    let reply = take(&mut a);
    let fresh_inviter = || {
        let mut a = alice.invite(false, 3);
        assert_eq!(take(&mut a), invite);
        a
    };
    let fresh_invitee = |inviter: &Exchange| {
        let mut b = bob.accept(inviter, 4);
        b.receive(&invite, T0).unwrap();
        assert_eq!(take(&mut b), accept);
        b
    };
    // Unchanged, the replayed messages complete the exchange.
    let mut b2 = fresh_invitee(&a);
    b2.receive(&reply, T0).unwrap();
    assert_eq!(b2.sas().unwrap(), a.sas().unwrap());

    for position in [0, 1, 2, 40, 70, 100, accept.len() - 1] {
        let mut changed = accept.clone();
        changed[position] ^= 0x01;
        let mut a = fresh_inviter();
        assert!(a.receive(&changed, T0).is_err(), "byte {position} of the ACCEPT");
        assert_failed(&mut a);
    }
    for position in [0, 1, 2, 30, 60, reply.len() - 1] {
        let mut changed = reply.clone();
        changed[position] ^= 0x01;
        let mut b = fresh_invitee(&a);
        assert!(b.receive(&changed, T0).is_err(), "byte {position} of the REPLY");
        assert_failed(&mut b);
    }
    // Cut short or extended.
    let mut a2 = fresh_inviter();
    assert!(a2.receive(&accept[..accept.len() - 1], T0).is_err());
    assert_failed(&mut a2);
    let mut b3 = fresh_invitee(&a);
    let mut longer = reply.clone();
    longer.push(0);
    assert!(b3.receive(&longer, T0).is_err());
    assert_failed(&mut b3);

    // Out of order: the inviter's own INVITE reflected, a second INVITE.
    let mut a3 = fresh_inviter();
    assert_kind(a3.receive(&invite, T0), ErrorKind::MalformedMessage);
    assert_failed(&mut a3);
    let mut b4 = fresh_invitee(&a);
    assert_kind(b4.receive(&invite, T0), ErrorKind::MalformedMessage);
    assert_failed(&mut b4);
    assert_eq!(alice.contacts.count().unwrap() + bob.contacts.count().unwrap(), 0);
}

#[test]
fn a_pending_exchange_expires_after_a_day() {
    let (alice, bob) = (Party::new("Alice", 1), Party::new("Bob", 2));
    let mut a = alice.invite(false, 3);
    let invite = take(&mut a);
    let sealed = a.seal().unwrap();
    let late = T0 + LIFETIME + 1;
    let mut b = bob.accept(&a, 4);
    assert_kind(b.receive(&invite, late), ErrorKind::Expired);
    assert_failed(&mut b);
    assert_kind(Exchange::restore(&alice.identity, &alice.contacts, &sealed, late), ErrorKind::Expired);

    // Within the day, the inviter still reads an ACCEPT.
    let mut b = bob.accept(&a, 5);
    b.receive(&invite, T0 + LIFETIME).unwrap();
    let accept = take(&mut b);
    let mut restored = Exchange::restore(&alice.identity, &alice.contacts, &sealed, T0 + LIFETIME).unwrap();
    restored.receive(&accept, T0 + LIFETIME).unwrap();
    assert_eq!(state(&restored), ExchangeState::CompareSas);
    // A moment later, the original copy no longer does.
    assert_kind(a.receive(&accept, late), ErrorKind::Expired);
    assert_failed(&mut a);
}

// ---------------------------------------------------------------------------
// Sealing and restoring
// ---------------------------------------------------------------------------

#[test]
fn each_side_restores_between_its_steps() {
    let (alice, bob) = (Party::new("Alice", 1), Party::new("Bob", 2));

    // The inviter posts the INVITE, seals the exchange and goes offline.
    let mut a = alice.invite(false, 3);
    let (invite_code, encryption_code, relay_id) =
        (a.invite_code().unwrap(), a.encryption_code().unwrap(), a.relay_id().unwrap());
    let invite = take(&mut a);
    let sealed_a = a.seal().unwrap();
    assert!(!sealed_a.is_empty());
    // The encryption code is the password: the sealed bytes do not hold it.
    assert!(!contains(&sealed_a, encryption_code.as_bytes()));
    assert!(!contains(&sealed_a, encryption_code.replace('-', "").as_bytes()));
    drop(a);

    // The invitee answers later, then goes offline too.
    let mut b = bob.accept_with_codes(&invite_code, &encryption_code, 4);
    b.receive(&invite, T0 + 600).unwrap();
    let accept = take(&mut b);
    let sealed_b = b.seal().unwrap();
    drop(b);

    // The inviter's device restarts and reads the ACCEPT.
    let mut a = Exchange::restore(&alice.identity, &alice.contacts, &sealed_a, T0 + 7200).unwrap();
    assert_eq!(a.status().unwrap(), (ExchangeState::AwaitingPeer, ExchangeFlags::empty()));
    assert_eq!(a.method().unwrap(), ExchangeMethod::Invite);
    assert!(a.is_inviter().unwrap());
    assert_eq!(
        (a.invite_code().unwrap(), a.encryption_code().unwrap(), a.relay_id().unwrap()),
        (invite_code.clone(), encryption_code.clone(), relay_id.clone())
    );
    assert_nothing_to_send(&mut a, "the INVITE was posted before sealing");
    a.receive(&accept, T0 + 7200).unwrap();
    assert_eq!(state(&a), ExchangeState::CompareSas);
    let reply = take(&mut a);

    // So does the invitee's, for the REPLY.
    let mut b = Exchange::restore(&bob.identity, &bob.contacts, &sealed_b, T0 + 7300).unwrap();
    assert!(!b.is_inviter().unwrap());
    assert_eq!(b.relay_id().unwrap(), relay_id);
    assert_nothing_to_send(&mut b, "the ACCEPT was posted before sealing");
    b.receive(&reply, T0 + 7300).unwrap();
    let sas = a.sas().unwrap();
    assert_eq!(b.sas().unwrap(), sas);

    // Sealed while comparing, restored, confirmed.
    let sealed_comparing = a.seal().unwrap();
    drop(a);
    let mut a = Exchange::restore(&alice.identity, &alice.contacts, &sealed_comparing, T0 + 7400).unwrap();
    assert_eq!(state(&a), ExchangeState::CompareSas);
    assert_eq!(a.sas().unwrap(), sas);
    assert_eq!(a.peer_public_key().unwrap(), Some(bob.key()));
    let id_a = a.confirm(T0 + 7400).unwrap();
    let id_b = b.confirm(T0 + 7400).unwrap();
    // Awaiting Bob's decision, Alice stops again: sealed and restored.
    let sealed_deciding = a.seal().unwrap();
    drop(a);
    let mut a = Exchange::restore(&alice.identity, &alice.contacts, &sealed_deciding, T0 + 7450).unwrap();
    assert_eq!(state(&a), ExchangeState::AwaitingDecision);
    a.receive(&take(&mut b), T0 + 7450).unwrap();
    assert_eq!(a.settle(T0 + 7450).unwrap(), Some(id_a));
    b.receive(&take(&mut a), T0 + 7450).unwrap();
    assert_eq!(b.settle(T0 + 7450).unwrap(), Some(id_b));
    assert_eq!(alice.contacts.get(id_a).unwrap().state, VerificationState::Verified);
    assert_eq!(bob.contacts.get(id_b).unwrap().state, VerificationState::Verified);
    assert_eq!(alice.contacts.get(id_a).unwrap().method, ExchangeMethod::Invite);

    // The exchange has ended: its secrets are gone and no sealed copy
    // restores.
    for sealed in [&sealed_a, &sealed_comparing, &sealed_deciding] {
        assert_kind(Exchange::restore(&alice.identity, &alice.contacts, sealed, T0 + 7500), ErrorKind::InvalidState);
    }
    assert_kind(Exchange::restore(&bob.identity, &bob.contacts, &sealed_b, T0 + 7500), ErrorKind::InvalidState);
    // And a sealed exchange restores only for its own identity.
    let mut other = alice.invite(true, 9);
    take(&mut other);
    let sealed = other.seal().unwrap();
    assert_kind(Exchange::restore(&bob.identity, &bob.contacts, &sealed, T0), ErrorKind::AuthenticationFailed);
    let restored = Exchange::restore(&alice.identity, &alice.contacts, &sealed, T0).unwrap();
    assert_eq!(restored.method().unwrap(), ExchangeMethod::Realtime);
    assert_eq!(restored.relay_id().unwrap(), other.relay_id().unwrap());
}

// ---------------------------------------------------------------------------
// Exchanges in person
// ---------------------------------------------------------------------------

#[test]
fn exchanges_in_person_have_no_codes_nor_relay() {
    let alice = Party::new("Alice", 1);
    let mut qr = Exchange::qr(&alice.identity, &alice.contacts, T0, Some(&mut rng(3))).unwrap();
    let mut bluetooth = Exchange::bluetooth(&alice.identity, &alice.contacts, None, T0, Some(&mut rng(4))).unwrap();
    for exchange in [&mut qr, &mut bluetooth] {
        for error in [
            exchange.invite_code().unwrap_err(),
            exchange.encryption_code().unwrap_err(),
            exchange.relay_id().unwrap_err(),
            exchange.is_inviter().unwrap_err(),
        ] {
            assert_eq!(error.kind(), ErrorKind::InvalidState, "{error}");
            assert!(!error.detail.is_empty(), "{error}");
        }
        // The refusals leave the exchange as it was.
        assert_eq!(state(exchange), ExchangeState::AwaitingPeer);
        assert!(!exchange.next_outgoing().unwrap().is_empty());
    }
    // And an exchange at a distance has no Bluetooth session code.
    let remote = alice.invite(false, 5);
    assert_kind(remote.session_code(), ErrorKind::InvalidState);
}
