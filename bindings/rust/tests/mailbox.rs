//! The invite-mailbox driver (PROTOCOL.md 16.5) through the safe Rust API:
//! a whole invite exchange whose requests go to an in-memory double of the
//! relay's invite routes (15.2), answered with the relay's statuses and
//! JSON; a refusal, an ended invite, and resuming from saved state.  And
//! the Online Verify room rule (11.1) for two sides across a window
//! boundary.

mod common;

use common::encoding::{base64url_decode, base64url_encode};
use common::json::Json;
use common::{assert_kind, rng, state, TempDir};
use itsme::{
    ContactStore, ErrorKind, Exchange, ExchangeState, Identity, MailboxOutcome, MailboxRequest, MailboxSession,
    OnlineVerifyRendezvous, OnlineVerifyState, SecretStore,
};

const T0: i64 = 1_800_000_000;

/// The relay's invite routes, in memory: one invite, two tokens, messages
/// numbered in order of posting.  Answers are (status, body) as the relay
/// gives them.
#[derive(Default)]
struct FakeRelay {
    id: Option<String>,
    gone: bool,
    inviter_token: Option<String>,
    invitee_token: Option<String>,
    messages: Vec<(i64, bool, Vec<u8>)>,
    deletes: usize,
}

impl FakeRelay {
    fn handle(&mut self, method: &str, path: &str, token: Option<&str>, body: &[u8]) -> (u16, Vec<u8>) {
        let rest = path.strip_prefix("/v1/invites/").expect("an invite route");
        let (id, tail) = rest.split_at(32);
        let json = |status: u16, text: String| (status, text.into_bytes());
        let missing = || json(404, r#"{"error": "not-found", "message": "no such invite"}"#.to_string());
        match (method, tail) {
            ("POST", "") => {
                if self.id.is_some() {
                    return json(409, r#"{"error": "conflict"}"#.to_string());
                }
                self.id = Some(id.to_string());
                let t = base64url_encode(&[1u8; 32]);
                self.inviter_token = Some(t.clone());
                json(201, format!(r#"{{"token": "{t}", "expires": 1800086400.0}}"#))
            }
            ("POST", "/accept") => {
                if self.id.as_deref() != Some(id) || self.gone {
                    return missing();
                }
                if self.invitee_token.is_some() {
                    return json(409, r#"{"error": "conflict"}"#.to_string());
                }
                let t = base64url_encode(&[2u8; 32]);
                self.invitee_token = Some(t.clone());
                json(200, format!(r#"{{"token": "{t}", "expires": 1800086400}}"#))
            }
            _ => {
                if self.id.as_deref() != Some(id) || self.gone {
                    return missing();
                }
                let inviter = match token {
                    Some(t) if Some(t) == self.inviter_token.as_deref() => true,
                    Some(t) if Some(t) == self.invitee_token.as_deref() => false,
                    _ => return json(403, r#"{"error": "forbidden"}"#.to_string()),
                };
                match (method, tail) {
                    ("POST", "/messages") => {
                        let seq = self.messages.len() as i64 + 1;
                        self.messages.push((seq, inviter, body.to_vec()));
                        json(201, format!(r#"{{"seq": {seq}}}"#))
                    }
                    ("GET", query) if query.starts_with("/messages?after=") => {
                        let after: i64 = query["/messages?after=".len()..].split('&').next().unwrap().parse().unwrap();
                        let items: Vec<String> = self
                            .messages
                            .iter()
                            .filter(|(seq, from_inviter, _)| *from_inviter != inviter && *seq > after)
                            .map(|(seq, _, body)| format!(r#"{{"seq": {seq}, "body": "{}"}}"#, base64url_encode(body)))
                            .collect();
                        let accepted = self.invitee_token.is_some();
                        json(200, format!(r#"{{"accepted": {accepted}, "messages": [{}]}}"#, items.join(", ")))
                    }
                    ("DELETE", "") => {
                        self.deletes += 1;
                        self.gone = true;
                        (204, Vec::new())
                    }
                    _ => json(400, r#"{"error": "bad-request"}"#.to_string()),
                }
            }
        }
    }
}

/// One step of `session` against `relay`; the methods requested, in order,
/// and the last outcome.
fn step(session: &mut MailboxSession, relay: &mut FakeRelay, now: i64) -> itsme::Result<(Vec<&'static str>, MailboxOutcome)> {
    session.begin(0)?;
    let mut made = Vec::new();
    loop {
        let request = session.next_request()?;
        made.push(match request {
            MailboxRequest::Idle | MailboxRequest::Done => return Ok((made, MailboxOutcome::Proceed)),
            MailboxRequest::Create { .. } => "create",
            MailboxRequest::Accept { .. } => "accept",
            MailboxRequest::Post { .. } => "post",
            MailboxRequest::Fetch { .. } => "fetch",
            _ => "delete",
        });
        // The request as the library writes it: method, path, headers, body.
        let http = session.http_request()?;
        let bearer = http.headers.iter().find(|(name, _)| name == "Authorization").map(|(_, value)| value.clone());
        assert!(!format!("{http:?}").contains("Bearer"), "a request's Debug never shows the token");
        let token = bearer.as_deref().and_then(|value| value.strip_prefix("Bearer "));
        let (status, answer) = relay.handle(&http.method, &http.path, token, &http.body);
        let outcome = session.answer(status, &answer, now)?;
        if outcome != MailboxOutcome::Proceed {
            return Ok((made, outcome));
        }
    }
}

struct Party {
    _secrets: SecretStore,
    identity: Identity,
    contacts: ContactStore,
    _dir: TempDir,
}

impl Party {
    fn new(name: &str, tag: u8) -> Party {
        let dir = TempDir::new(&format!("mailbox-{}", name.to_lowercase()));
        let secrets = SecretStore::memory().unwrap();
        let identity = Identity::create_with_random(&secrets, name, Some(&mut rng(tag))).unwrap();
        let contacts = ContactStore::open(&identity, dir.path().join("contacts.db")).unwrap();
        Party { _secrets: secrets, identity, contacts, _dir: dir }
    }
}

fn pair() -> (Party, Exchange, Party, Exchange) {
    let alice = Party::new("Alice", 1);
    let bob = Party::new("Bob", 2);
    let inviter = Exchange::invite(&alice.identity, &alice.contacts, false, T0, Some(&mut rng(3))).unwrap();
    let invitee = Exchange::accept_invite(
        &bob.identity, &bob.contacts,
        &inviter.invite_code().unwrap(),
        &inviter.encryption_code().unwrap(),
        false,
        T0,
        Some(&mut rng(4)),
    )
    .unwrap();
    (alice, inviter, bob, invitee)
}

#[test]
fn a_whole_invite_exchange_through_a_fake_relay() {
    let (_alice, mut inviter, _bob, mut invitee) = pair();
    let mut relay = FakeRelay::default();
    let mut a = MailboxSession::new(&inviter).unwrap();
    let mut b = MailboxSession::new(&invitee).unwrap();
    assert_eq!(step(&mut a, &mut relay, T0).unwrap().0, ["create", "post", "fetch"]);
    assert_eq!(a.token().unwrap().as_deref(), relay.inviter_token.as_deref());
    assert_eq!(&step(&mut b, &mut relay, T0).unwrap().0[..2], ["accept", "fetch"]);
    for _ in 0..4 {
        step(&mut a, &mut relay, T0).unwrap();
        step(&mut b, &mut relay, T0).unwrap();
    }
    assert_eq!(state(&inviter), ExchangeState::CompareSas);
    assert_eq!(state(&invitee), ExchangeState::CompareSas);
    assert_eq!(inviter.sas().unwrap(), invitee.sas().unwrap());
    assert!(!format!("{a:?}").contains(relay.inviter_token.as_deref().unwrap()));

    invitee.confirm(T0 + 20).unwrap();
    inviter.confirm(T0 + 20).unwrap();
    for _ in 0..4 {
        step(&mut b, &mut relay, T0 + 25).unwrap();
        step(&mut a, &mut relay, T0 + 25).unwrap();
    }
    assert_eq!(a.next_request().unwrap(), MailboxRequest::Done);
    assert_eq!(b.next_request().unwrap(), MailboxRequest::Done);
    assert!(relay.gone, "the invitee ended the invite");
    assert_eq!(relay.deletes, 1);
    assert!(inviter.settle(T0 + 30).unwrap().is_some());
    assert!(invitee.settle(T0 + 30).unwrap().is_some());
    assert_eq!(state(&inviter), ExchangeState::Confirmed);
    assert_eq!(state(&invitee), ExchangeState::Confirmed);
}

#[test]
fn a_refused_message_ends_the_invite_and_the_other_side_sees_it_ended() {
    let (_alice, inviter, _bob, invitee) = pair();
    let mut relay = FakeRelay::default();
    let mut a = MailboxSession::new(&inviter).unwrap();
    let mut b = MailboxSession::new(&invitee).unwrap();
    step(&mut a, &mut relay, T0).unwrap();
    relay.messages[0].2 = vec![0xEE; 40];
    assert!(step(&mut b, &mut relay, T0).is_err());
    assert_eq!(state(&invitee), ExchangeState::Failed);
    assert!(matches!(b.next_request().unwrap(), MailboxRequest::Delete { .. }));
    let (status, body) = relay.handle("DELETE", &format!("/v1/invites/{}", inviter.relay_id().unwrap()), b.token().unwrap().as_deref(), &[]);
    assert_eq!(b.answer(status, &body, T0).unwrap(), MailboxOutcome::Proceed);
    assert_eq!(b.next_request().unwrap(), MailboxRequest::Done);

    let (_, outcome) = step(&mut a, &mut relay, T0).unwrap();
    assert_eq!(outcome, MailboxOutcome::InviteEnded);
    assert_eq!(state(&inviter), ExchangeState::Rejected);
    assert_eq!(a.next_request().unwrap(), MailboxRequest::Done);
}

#[test]
fn resume_from_saved_state_after_a_failed_post() {
    let (alice, inviter, _bob, invitee) = pair();
    let mut relay = FakeRelay::default();
    let mut a = MailboxSession::new(&inviter).unwrap();
    let mut b = MailboxSession::new(&invitee).unwrap();
    // The relay is unreachable for the create: nothing changes.
    a.begin(0).unwrap();
    assert!(matches!(a.next_request().unwrap(), MailboxRequest::Create { .. }));
    assert_eq!(a.answer(0, &[], T0).unwrap(), MailboxOutcome::StepEnded);
    assert_eq!(a.next_request().unwrap(), MailboxRequest::Idle);
    assert_eq!(a.token().unwrap(), None);

    step(&mut a, &mut relay, T0).unwrap();
    step(&mut b, &mut relay, T0).unwrap();
    let saved = a.save().unwrap();
    let parsed = Json::parse(&saved).unwrap();
    assert_eq!(parsed.int("version"), 1);
    assert_eq!(parsed.text("relay_id"), inviter.relay_id().unwrap());
    assert_eq!(parsed.int("last_seq"), 0);
    assert!(parsed.array("unsent").is_empty());
    let sealed = inviter.seal().unwrap();
    drop((a, inviter));

    let restored = Exchange::restore(&alice.identity, &alice.contacts, &sealed, T0 + 5).unwrap();
    let mut a = MailboxSession::resume(&restored, &saved).unwrap();
    for _ in 0..4 {
        step(&mut a, &mut relay, T0 + 5).unwrap();
        step(&mut b, &mut relay, T0 + 5).unwrap();
    }
    assert_eq!(state(&restored), ExchangeState::CompareSas);
    assert_eq!(restored.sas().unwrap(), invitee.sas().unwrap());

    // The saved state of another exchange, or of no known form, does not resume.
    assert_kind(MailboxSession::resume(&invitee, &saved), ErrorKind::InvalidArgument);
    assert_kind(MailboxSession::resume(&restored, "{\"version\": 9}"), ErrorKind::InvalidArgument);
    // Unsent messages survive as unpadded base64url.
    let python = saved.replace("\"unsent\": []", &format!("\"unsent\": [\"{}\"]", base64url_encode(&[1, 2, 3])));
    let resumed = MailboxSession::resume(&restored, &python).unwrap();
    drop(resumed);
    assert_eq!(base64url_decode("AQID").unwrap(), vec![1, 2, 3]);
}

#[test]
fn the_room_rule_across_a_window_boundary() {
    let alice = Party::new("Alice", 5);
    let bob = Party::new("Bob", 6);
    let seed = [9u8; 32];
    let bob_id = alice.contacts.add("Bob", &bob.identity.public_key().unwrap(), &seed, itsme::ExchangeMethod::Qr, T0).unwrap();
    let alice_id = bob.contacts.add("Alice", &alice.identity.public_key().unwrap(), &seed, itsme::ExchangeMethod::Qr, T0).unwrap();
    let boundary = (T0 / 30 + 1) * 30;
    let a = OnlineVerifyRendezvous::new(&alice.contacts, bob_id, None, boundary - 2, Some(&mut rng(7))).unwrap();
    let b = OnlineVerifyRendezvous::new(&bob.contacts, alice_id, None, boundary + 1, Some(&mut rng(8))).unwrap();
    let a_rooms = a.rooms().unwrap();
    let b_first = b.rooms().unwrap();
    assert_eq!(a_rooms.len(), 1);
    assert_eq!(b_first.len(), 1);
    assert_ne!(a_rooms[0], b_first[0]);
    b.alone(&b_first[0]).unwrap();
    let b_rooms = b.rooms().unwrap();
    assert_eq!(b_rooms.len(), 2);
    assert_eq!(b_rooms[1], a_rooms[0], "Bob's previous window is Alice's current one");
    assert_kind(a.peer_joined(&b_first[0]), ErrorKind::InvalidArgument);

    let mut sa = a.peer_joined(&a_rooms[0]).unwrap();
    let mut sb = b.peer_joined(&b_rooms[1]).unwrap();
    assert_eq!(sb.window(), boundary / 30 - 1);
    assert_eq!(b.rooms().unwrap(), vec![b_rooms[1].clone()]);
    loop {
        let (from_a, from_b) = (sa.next_outgoing().unwrap(), sb.next_outgoing().unwrap());
        if from_a.is_empty() && from_b.is_empty() {
            break;
        }
        if !from_a.is_empty() {
            sb.receive(&from_a, boundary + 2).unwrap();
        }
        if !from_b.is_empty() {
            sa.receive(&from_b, boundary + 2).unwrap();
        }
    }
    assert_eq!(sa.state().unwrap(), OnlineVerifyState::CompareSas);
    assert_eq!(sa.sas().unwrap(), sb.sas().unwrap());
}

/// The rendezvous binds both its sessions (PROTOCOL.md 11.4): bound alike
/// they reach the SAS, bound differently they end without one.
#[test]
fn the_room_rule_binds_both_sessions() {
    let (ours, theirs): (&[u8], &[u8]) = (&[0x0c; 32], &[0x0d; 16]);
    let cases = [
        (Some(ours), Some(ours), OnlineVerifyState::CompareSas),
        (Some(ours), None, OnlineVerifyState::BindingDiffers),
        (None, Some(ours), OnlineVerifyState::BindingDiffers),
        (Some(ours), Some(theirs), OnlineVerifyState::OtherCall),
    ];
    for (n, (a_binding, b_binding, ends)) in cases.into_iter().enumerate() {
        let alice = Party::new("Alice", 5);
        let bob = Party::new("Bob", 6);
        let seed = [9u8; 32];
        let (a_key, b_key) = (alice.identity.public_key().unwrap(), bob.identity.public_key().unwrap());
        let bob_id = alice.contacts.add("Bob", &b_key, &seed, itsme::ExchangeMethod::Qr, T0).unwrap();
        let alice_id = bob.contacts.add("Alice", &a_key, &seed, itsme::ExchangeMethod::Qr, T0).unwrap();
        let a = OnlineVerifyRendezvous::new(&alice.contacts, bob_id, a_binding, T0, Some(&mut rng(7))).unwrap();
        let b = OnlineVerifyRendezvous::new(&bob.contacts, alice_id, b_binding, T0, Some(&mut rng(8))).unwrap();
        let room = a.rooms().unwrap().remove(0);
        assert_eq!(b.rooms().unwrap(), vec![room.clone()], "case {n}: the rooms do not depend on the binding");
        let (mut sa, mut sb) = (a.peer_joined(&room).unwrap(), b.peer_joined(&room).unwrap());
        loop {
            let (from_a, from_b) = (sa.next_outgoing().unwrap(), sb.next_outgoing().unwrap());
            if from_a.is_empty() && from_b.is_empty() {
                break;
            }
            if !from_a.is_empty() {
                sb.receive(&from_a, T0).unwrap();
            }
            if !from_b.is_empty() {
                sa.receive(&from_b, T0).unwrap();
            }
        }
        assert_eq!((sa.state().unwrap(), sb.state().unwrap()), (ends, ends), "case {n}");
    }
    let alice = Party::new("Alice", 5);
    let bob = Party::new("Bob", 6);
    let bob_id =
        alice.contacts.add("Bob", &bob.identity.public_key().unwrap(), &[9u8; 32], itsme::ExchangeMethod::Qr, T0).unwrap();
    for length in [0, 15, 65] {
        let binding = vec![1u8; length];
        assert_kind(OnlineVerifyRendezvous::new(&alice.contacts, bob_id, Some(&binding), T0, None), ErrorKind::InvalidArgument);
    }
}
