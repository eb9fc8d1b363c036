//! Service approvals through the safe Rust API (docs/PROTOCOL.md section
//! 19): devices enroll with a service, read its requests and approve or
//! deny them; the service verifies enrollments and answers against its
//! replay store.  Every refusal of 19.5 with its error kind, replay stores
//! of the library and of Rust closures (errors, panics), and the in-memory
//! store's capacity.

mod common;

use common::assert_kind;
use itsme::{
    ApprovalDecision, ApprovalRequest, Error, ErrorKind, ReplayStore, ReplayStoreBackend, SecretStore,
    APPROVAL_LIFETIME_MAX, CREDENTIAL_ID_BYTES,
};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

const NOW: i64 = 1_800_000_000;
const SERVICE: &str = "bank.example";
const NONCE: [u8; 16] = [0x5A; 16];
const LIFETIME: i64 = 120;
/// Offsets in an approval: version, credential ID, decision, timestamp,
/// OTP, scopes, signature.
const DECISION_AT: usize = 1 + CREDENTIAL_ID_BYTES;
const OTP_AT: usize = DECISION_AT + 1 + 8;
const SCOPES_AT: usize = OTP_AT + 6;

/// A device enrolled with SERVICE: its secret store and what the service
/// stored for it.
struct Device {
    store: SecretStore,
    public_key: [u8; 32],
    credential_id: [u8; CREDENTIAL_ID_BYTES],
}

fn enrolled(label: &str) -> Device {
    let store = SecretStore::memory().unwrap();
    let enrollment = store.enroll(SERVICE, label, &NONCE, None).unwrap();
    assert_eq!(enrollment.len(), 98 + label.len());
    let credential = itsme::verify_enrollment(SERVICE, &NONCE, &enrollment).unwrap();
    assert_eq!(credential.label, label);
    assert_eq!(store.credential_id(SERVICE).unwrap(), credential.credential_id);
    Device { store, public_key: credential.public_key, credential_id: credential.credential_id }
}

fn request_with(session: &str, scopes: &[&str]) -> Vec<u8> {
    itsme::create_approval_request(SERVICE, "Example Bank", session, scopes, LIFETIME, NOW, None).unwrap()
}

fn request() -> Vec<u8> {
    request_with("login-1", &["profile", "email", "payments"])
}

fn approve(device: &Device, request: &[u8], scopes: &[&str]) -> Vec<u8> {
    device.store.sign_approval(request, ApprovalDecision::Approve, scopes, NOW + 10).unwrap()
}

fn verify(request: &[u8], approval: &[u8], keys: &[[u8; 32]], replay: &ReplayStore) -> itsme::Result<itsme::ApprovalResult> {
    itsme::verify_approval(request, approval, keys, replay, NOW + 11)
}

fn memory() -> ReplayStore {
    ReplayStore::memory(0).unwrap()
}

#[test]
fn enroll_request_parse_sign_verify() {
    let phone = enrolled("Alice's phone");
    let request = request();
    let shown = ApprovalRequest::parse(&request, NOW + 5).unwrap();
    assert_eq!(shown.service_id, SERVICE);
    assert_eq!(shown.service_name, "Example Bank");
    assert_eq!(shown.session_id, "login-1");
    assert_eq!((shown.issued_at, shown.expires_at), (NOW, NOW + LIFETIME));
    assert_eq!(shown.scopes, ["email", "payments", "profile"], "in increasing byte order");
    assert!(shown.otp.len() == 6 && shown.otp.bytes().all(|c| c.is_ascii_digit()), "{}", shown.otp);
    // The person compares the OTP, grants two of the three scopes, in any
    // order.
    let approval = approve(&phone, &request, &["profile", "email"]);
    assert_eq!(&approval[OTP_AT..OTP_AT + 6], shown.otp.as_bytes());
    let replay = memory();
    let result = verify(&request, &approval, &[phone.public_key], &replay).unwrap();
    assert_eq!(result.decision, ApprovalDecision::Approve);
    assert_eq!(result.credential_id, phone.credential_id);
    assert_eq!(result.timestamp, NOW + 10);
    assert_eq!(result.granted_scopes, ["email", "profile"]);
    // A request without scopes, approved with none.
    let plain = request_with("login-2", &[]);
    assert_eq!(ApprovalRequest::parse(&plain, NOW).unwrap().scopes, Vec::<String>::new());
    let result = verify(&plain, &approve(&phone, &plain, &[]), &[phone.public_key], &replay).unwrap();
    assert_eq!((result.decision, result.granted_scopes.len()), (ApprovalDecision::Approve, 0));
}

#[test]
fn two_devices_of_one_user() {
    let phone = enrolled("Alice's phone");
    let tablet = enrolled("Zoë's tablet");
    assert_ne!(phone.credential_id, tablet.credential_id);
    assert_ne!(phone.public_key, tablet.public_key);
    let keys = [phone.public_key, tablet.public_key];
    let replay = memory();
    // Either device answers; the result names the one that did.
    let first = request_with("login-1", &["email"]);
    let result = verify(&first, &approve(&tablet, &first, &["email"]), &keys, &replay).unwrap();
    assert_eq!(result.credential_id, tablet.credential_id);
    let second = request_with("login-2", &["email"]);
    let result = verify(&second, &approve(&phone, &second, &[]), &keys, &replay).unwrap();
    assert_eq!(result.credential_id, phone.credential_id);
    // The other device cannot answer the same request again.
    assert_kind(verify(&second, &approve(&tablet, &second, &[]), &keys, &replay), ErrorKind::Replayed);
}

#[test]
fn a_denial_verifies_as_a_denial() {
    let phone = enrolled("Alice's phone");
    let request = request();
    let denial = phone.store.sign_approval(&request, ApprovalDecision::Deny, &[], NOW + 10).unwrap();
    let result = verify(&request, &denial, &[phone.public_key], &memory()).unwrap();
    assert_eq!(result.decision, ApprovalDecision::Deny);
    assert!(result.granted_scopes.is_empty());
    assert_eq!(result.credential_id, phone.credential_id);
    // No scope is granted with a denial.
    let refused = phone.store.sign_approval(&request, ApprovalDecision::Deny, &["email"], NOW + 10);
    let error = assert_kind(refused, ErrorKind::InvalidArgument);
    assert!(!error.detail.is_empty(), "the store's detail");
    // A denial and an approval of one request share the replay key: the
    // first one counts.
    let replay = memory();
    verify(&request, &denial, &[phone.public_key], &replay).unwrap();
    assert_kind(verify(&request, &approve(&phone, &request, &["email"]), &[phone.public_key], &replay), ErrorKind::Replayed);
}

#[test]
fn every_refusal_of_the_service() {
    let phone = enrolled("Alice's phone");
    let tablet = enrolled("Alice's tablet");
    let request = request();
    let approval = approve(&phone, &request, &["email"]);
    let keys = [phone.public_key];
    let check = |approval: &[u8], keys: &[[u8; 32]], now: i64, kind: ErrorKind, what: &str| {
        let error = assert_kind(itsme::verify_approval(&request, approval, keys, &memory(), now), kind);
        assert!(!error.detail.is_empty(), "{what}: a detail");
    };
    // A bad signature.
    let mut bad = approval.clone();
    *bad.last_mut().unwrap() ^= 0x01;
    check(&bad, &keys, NOW + 11, ErrorKind::AuthenticationFailed, "bad signature");
    // An altered timestamp breaks the signature too.
    let mut altered = approval.clone();
    altered[OTP_AT - 1] ^= 0x01;
    check(&altered, &keys, NOW + 11, ErrorKind::AuthenticationFailed, "timestamp");
    // Signed by a key the user did not enroll, or none at all.
    check(&approval, &[tablet.public_key], NOW + 11, ErrorKind::NotFound, "unknown key");
    check(&approval, &[], NOW + 11, ErrorKind::NotFound, "no key");
    // The wrong OTP: the field changed, or the answer to another request.
    let mut wrong_otp = approval.clone();
    wrong_otp[OTP_AT] = if wrong_otp[OTP_AT] == b'9' { b'0' } else { wrong_otp[OTP_AT] + 1 };
    check(&wrong_otp, &keys, NOW + 11, ErrorKind::AuthenticationFailed, "wrong OTP");
    let other = request_with("login-other", &["email"]);
    // (Another OTP, or by a one-in-a-million chance the same one and a
    // signature over another nonce: refused either way.)
    check(&approve(&phone, &other, &["email"]), &keys, NOW + 11, ErrorKind::AuthenticationFailed, "another request's answer");
    // Too late by the service's clock: at the expiry still in time.
    itsme::verify_approval(&request, &approval, &keys, &memory(), NOW + LIFETIME).unwrap();
    check(&approval, &keys, NOW + LIFETIME + 1, ErrorKind::Expired, "expired");
    // A scope that was not requested: "email" made "emaik".
    let granted = approval.len() - 64;
    assert_eq!(&approval[SCOPES_AT..granted], b"\x01\x05email");
    let mut unrequested = approval.clone();
    unrequested[granted - 1] = b'k';
    check(&unrequested, &keys, NOW + 11, ErrorKind::MalformedMessage, "a scope not requested");
    // A decision that is neither, an approval cut short.
    let mut decision = approval.clone();
    decision[DECISION_AT] = 3;
    check(&decision, &keys, NOW + 11, ErrorKind::MalformedMessage, "decision 3");
    check(&approval[..approval.len() - 1], &keys, NOW + 11, ErrorKind::MalformedMessage, "truncated");
    // The service's own request must parse.
    let refused = itsme::verify_approval(&request[1..], &approval, &keys, &memory(), NOW + 11);
    let error = assert_kind(refused, ErrorKind::InvalidArgument);
    assert!(!error.detail.is_empty());
    // Replayed; a forgery presented after the real answer is still
    // refused as a forgery (the signature is checked before the store).
    let replay = memory();
    verify(&request, &approval, &keys, &replay).unwrap();
    assert_kind(verify(&request, &bad, &keys, &replay), ErrorKind::AuthenticationFailed);
    let error = assert_kind(verify(&request, &approval, &keys, &replay), ErrorKind::Replayed);
    assert!(!error.detail.is_empty());
}

#[test]
fn a_forged_approval_spends_nothing() {
    let phone = enrolled("Alice's phone");
    let request = request();
    let approval = approve(&phone, &request, &["email"]);
    let mut forged = approval.clone();
    forged[approval.len() - 10] ^= 0x40;
    let replay = memory();
    for _ in 0..3 {
        assert_kind(verify(&request, &forged, &[phone.public_key], &replay), ErrorKind::AuthenticationFailed);
    }
    verify(&request, &approval, &[phone.public_key], &replay).unwrap();
    assert_kind(verify(&request, &approval, &[phone.public_key], &replay), ErrorKind::Replayed);
}

#[test]
fn the_device_refuses_what_it_should() {
    let phone = enrolled("Alice's phone");
    let request = request();
    let sign = |decision, scopes: &[&str], now| phone.store.sign_approval(&request, decision, scopes, now);
    // A scope not requested, a repeated one, one with a space.
    assert_kind(sign(ApprovalDecision::Approve, &["email", "admin"], NOW), ErrorKind::InvalidArgument);
    assert_kind(sign(ApprovalDecision::Approve, &["email", "email"], NOW), ErrorKind::InvalidArgument);
    assert_kind(sign(ApprovalDecision::Approve, &["email profile"], NOW), ErrorKind::InvalidArgument);
    assert_kind(sign(ApprovalDecision::Approve, &[""], NOW), ErrorKind::InvalidArgument);
    // Too late by the device's clock, for showing and for signing.
    assert_kind(sign(ApprovalDecision::Approve, &[], NOW + LIFETIME + 1), ErrorKind::Expired);
    assert_kind(ApprovalRequest::parse(&request, NOW + LIFETIME + 1), ErrorKind::Expired);
    // Not a request.
    assert_kind(phone.store.sign_approval(&request[..10], ApprovalDecision::Approve, &[], NOW), ErrorKind::MalformedMessage);
    assert_kind(ApprovalRequest::parse(&[], NOW), ErrorKind::MalformedMessage);
    assert_kind(ApprovalRequest::parse(&[&request[..], &[0]].concat(), NOW), ErrorKind::MalformedMessage);
    // A service this device never enrolled with.
    let elsewhere = itsme::create_approval_request("shop.example", "Shop", "s", &[], 60, NOW, None).unwrap();
    let error = assert_kind(phone.store.sign_approval(&elsewhere, ApprovalDecision::Approve, &[], NOW), ErrorKind::NotFound);
    assert!(!error.detail.is_empty(), "the store's detail");
}

#[test]
fn credentials_are_per_service_replaced_and_removed() {
    let device = SecretStore::memory().unwrap();
    assert_kind(device.credential_id(SERVICE), ErrorKind::NotFound);
    let enroll = |service: &str| {
        let enrollment = device.enroll(service, "Phone", &NONCE, None).unwrap();
        itsme::verify_enrollment(service, &NONCE, &enrollment).unwrap()
    };
    let first = enroll(SERVICE);
    let shop = enroll("shop.example");
    assert_ne!(first.public_key, shop.public_key, "a key per service");
    // Enrolling again replaces the key for that service only.
    let second = enroll(SERVICE);
    assert_ne!(first.credential_id, second.credential_id);
    assert_eq!(device.credential_id(SERVICE).unwrap(), second.credential_id);
    assert_eq!(device.credential_id("shop.example").unwrap(), shop.credential_id);
    let request = request();
    let approval = device.sign_approval(&request, ApprovalDecision::Approve, &[], NOW + 1).unwrap();
    assert_kind(verify(&request, &approval, &[first.public_key], &memory()), ErrorKind::NotFound);
    let both = [first.public_key, second.public_key];
    assert_eq!(verify(&request, &approval, &both, &memory()).unwrap().credential_id, second.credential_id);
    // Removed: gone for that service.
    device.remove_credential(SERVICE).unwrap();
    assert_kind(device.credential_id(SERVICE), ErrorKind::NotFound);
    assert_kind(device.remove_credential(SERVICE), ErrorKind::NotFound);
    assert_kind(device.sign_approval(&request, ApprovalDecision::Approve, &[], NOW + 1), ErrorKind::NotFound);
    assert_eq!(device.credential_id("shop.example").unwrap(), shop.credential_id);
}

#[test]
fn enrollment_arguments_and_checks() {
    let device = SecretStore::memory().unwrap();
    let long_service = "s".repeat(itsme::SERVICE_ID_MAX_BYTES + 1);
    for (service, label, nonce) in [
        ("", "Phone", &NONCE[..]),
        ("bank example", "Phone", &NONCE[..]),
        (long_service.as_str(), "Phone", &NONCE[..]),
        ("bänk.example", "Phone", &NONCE[..]),
        (SERVICE, "", &NONCE[..]),
        (SERVICE, "Pho\nne", &NONCE[..]),
        (SERVICE, "Phone", &[1u8; 15][..]),
        (SERVICE, "Phone", &[1u8; 65][..]),
        (SERVICE, "Pho\0ne", &NONCE[..]),
    ] {
        assert_kind(device.enroll(service, label, nonce, None), ErrorKind::InvalidArgument);
    }
    assert_kind(device.credential_id(SERVICE), ErrorKind::NotFound);
    // The nonce may be 16 to 64 bytes; the service checks its own ID and
    // nonce, never values read from the message.
    let enrollment = device.enroll(SERVICE, "Phone", &[7u8; 64], None).unwrap();
    itsme::verify_enrollment(SERVICE, &[7u8; 64], &enrollment).unwrap();
    assert_kind(itsme::verify_enrollment(SERVICE, &[8u8; 64], &enrollment), ErrorKind::AuthenticationFailed);
    assert_kind(itsme::verify_enrollment("shop.example", &[7u8; 64], &enrollment), ErrorKind::AuthenticationFailed);
    let mut flipped = enrollment.clone();
    flipped[40] ^= 0x01;
    assert_kind(itsme::verify_enrollment(SERVICE, &[7u8; 64], &flipped), ErrorKind::AuthenticationFailed);
    assert_kind(itsme::verify_enrollment(SERVICE, &[7u8; 64], &enrollment[..97]), ErrorKind::MalformedMessage);
    assert_kind(itsme::verify_enrollment("", &[7u8; 64], &enrollment), ErrorKind::InvalidArgument);
    assert_kind(itsme::verify_enrollment(SERVICE, &[7u8; 8], &enrollment), ErrorKind::InvalidArgument);
    // The same random source: the same key and enrollment.
    let (a, b) = (SecretStore::memory().unwrap(), SecretStore::memory().unwrap());
    let one = a.enroll(SERVICE, "Phone", &NONCE, Some(&mut common::rng(3))).unwrap();
    let two = b.enroll(SERVICE, "Phone", &NONCE, Some(&mut common::rng(3))).unwrap();
    assert_eq!(one, two);
}

#[test]
fn request_arguments() {
    let make = |service: &str, name: &str, session: &str, scopes: &[&str], lifetime: i64| {
        itsme::create_approval_request(service, name, session, scopes, lifetime, NOW, None)
    };
    let many: Vec<String> = (0..=itsme::SCOPES_MAX).map(|i| format!("scope{i:02}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let long_scope = "x".repeat(itsme::SCOPE_MAX_BYTES + 1);
    let long_session = "x".repeat(itsme::SESSION_ID_MAX_BYTES + 1);
    for (what, result) in [
        ("lifetime 0", make(SERVICE, "Bank", "s", &[], 0)),
        ("lifetime 601", make(SERVICE, "Bank", "s", &[], APPROVAL_LIFETIME_MAX + 1)),
        ("a repeated scope", make(SERVICE, "Bank", "s", &["a", "a"], 60)),
        ("a scope with a space", make(SERVICE, "Bank", "s", &["a b"], 60)),
        ("an empty scope", make(SERVICE, "Bank", "s", &[""], 60)),
        ("a scope too long", make(SERVICE, "Bank", "s", &[&long_scope], 60)),
        ("33 scopes", make(SERVICE, "Bank", "s", &many, 60)),
        ("an empty session", make(SERVICE, "Bank", "", &[], 60)),
        ("a session too long", make(SERVICE, "Bank", &long_session, &[], 60)),
        ("an empty name", make(SERVICE, "", "s", &[], 60)),
        ("a bad service", make("a b", "Bank", "s", &[], 60)),
    ] {
        let error = assert_kind(result, ErrorKind::InvalidArgument);
        assert!(!error.detail.is_empty(), "{what}: a detail");
    }
    // The limits themselves are taken.
    let request = make(SERVICE, "Bank", "s", &many[..itsme::SCOPES_MAX], APPROVAL_LIFETIME_MAX).unwrap();
    assert!(request.len() <= itsme::APPROVAL_REQUEST_MAX);
    assert_eq!(ApprovalRequest::parse(&request, NOW).unwrap().scopes.len(), itsme::SCOPES_MAX);
    // Fresh nonce and OTP each time, unless the random source repeats.
    let r1 = itsme::create_approval_request(SERVICE, "Bank", "s", &[], 60, NOW, Some(&mut common::rng(5))).unwrap();
    let r2 = itsme::create_approval_request(SERVICE, "Bank", "s", &[], 60, NOW, Some(&mut common::rng(5))).unwrap();
    let r3 = make(SERVICE, "Bank", "s", &[], 60).unwrap();
    assert_eq!(r1, r2);
    assert_ne!(r1, r3);
}

// ---------------------------------------------------------------------------
// Replay stores
// ---------------------------------------------------------------------------

/// Sets a flag when dropped: shows that a store released its closure.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_closure_replay_store_sees_each_valid_answer_once() {
    let phone = enrolled("Alice's phone");
    let request = request();
    let expires_at = ApprovalRequest::parse(&request, NOW).unwrap().expires_at;
    let approval = approve(&phone, &request, &["email"]);
    let dropped = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(Mutex::new(Vec::new()));
    let replay = {
        let flag = DropFlag(dropped.clone());
        let calls = calls.clone();
        let mut keys = HashSet::new();
        ReplayStore::from_fn(move |key, until, now| {
            let _flag = &flag;
            calls.lock().unwrap().push((*key, until, now));
            Ok(!keys.insert(*key))
        })
        .unwrap()
    };
    // A forgery never reaches the store.
    let mut forged = approval.clone();
    *forged.last_mut().unwrap() ^= 1;
    assert_kind(verify(&request, &forged, &[phone.public_key], &replay), ErrorKind::AuthenticationFailed);
    assert!(calls.lock().unwrap().is_empty());
    verify(&request, &approval, &[phone.public_key], &replay).unwrap();
    assert_kind(verify(&request, &approval, &[phone.public_key], &replay), ErrorKind::Replayed);
    let calls_made = calls.lock().unwrap().clone();
    assert_eq!(calls_made.len(), 2);
    assert_eq!(calls_made[0], calls_made[1], "the same key for the same request");
    assert_eq!((calls_made[0].1, calls_made[0].2), (expires_at, NOW + 11));
    // Another request, another key.
    let other = request_with("login-2", &[]);
    verify(&other, &approve(&phone, &other, &[]), &[phone.public_key], &replay).unwrap();
    assert_ne!(calls.lock().unwrap()[2].0, calls_made[0].0);
    assert!(!dropped.load(Ordering::SeqCst));
    drop(replay);
    assert!(dropped.load(Ordering::SeqCst), "dropping the store drops the closure");
}

#[test]
fn a_store_that_has_seen_the_key_refuses_as_replayed() {
    let phone = enrolled("Alice's phone");
    let request = request();
    let approval = approve(&phone, &request, &["email"]);
    let always_seen = ReplayStore::from_fn(|_, _, _| Ok(true)).unwrap();
    let error = assert_kind(verify(&request, &approval, &[phone.public_key], &always_seen), ErrorKind::Replayed);
    assert!(!error.detail.is_empty());
}

#[test]
fn a_failing_or_panicking_replay_store_refuses_without_unwinding() {
    let phone = enrolled("Alice's phone");
    let request = request();
    let approval = approve(&phone, &request, &["email"]);
    let keys = [phone.public_key];
    // An error: its code and detail refuse the approval.
    let failing =
        ReplayStore::from_fn(|_, _, _| Err(Error::new(itsme::sys::ITSME_E_DATABASE, "the replay table is offline")))
            .unwrap();
    let error = assert_kind(verify(&request, &approval, &keys, &failing), ErrorKind::Database);
    assert_eq!(error.detail, "the replay table is offline");
    // An error without a code is a bug: internal.
    let confused = ReplayStore::from_fn(|_, _, _| Err(Error::new(itsme::sys::ITSME_OK, "no code"))).unwrap();
    assert_kind(verify(&request, &approval, &keys, &confused), ErrorKind::Internal);
    // A panic is caught at the boundary: an error, no abort.
    let panics = Arc::new(AtomicUsize::new(0));
    let counter = panics.clone();
    let panicking = ReplayStore::from_fn(move |_, _, _| {
        if counter.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("replay store panic (expected by the test)");
        }
        Ok(false)
    })
    .unwrap();
    let error = assert_kind(verify(&request, &approval, &keys, &panicking), ErrorKind::Internal);
    assert!(error.detail.contains("panicked"), "{}", error.detail);
    // The request was not spent, and the store still works.
    verify(&request, &approval, &keys, &panicking).unwrap();
    assert_eq!(panics.load(Ordering::SeqCst), 2);
    // A panicking trait object, dropped without trouble.
    struct Exploding;
    impl ReplayStoreBackend for Exploding {
        fn insert(&mut self, _: &[u8; 32], _: i64, _: i64) -> itsme::Result<bool> {
            panic!("replay store panic (expected by the test)");
        }
    }
    let exploding = ReplayStore::from_backend(Box::new(Exploding)).unwrap();
    assert_kind(verify(&request, &approval, &keys, &exploding), ErrorKind::Internal);
    drop(exploding);
}

#[test]
fn the_memory_store_keeps_at_most_its_capacity_of_live_entries() {
    let phone = enrolled("Alice's phone");
    let keys = [phone.public_key];
    let replay = ReplayStore::memory(2).unwrap();
    let requests: Vec<Vec<u8>> = (0..3).map(|i| request_with(&format!("login-{i}"), &[])).collect();
    let approvals: Vec<Vec<u8>> = requests.iter().map(|r| approve(&phone, r, &[])).collect();
    verify(&requests[0], &approvals[0], &keys, &replay).unwrap();
    verify(&requests[1], &approvals[1], &keys, &replay).unwrap();
    // Full: refused rather than forgetting a live entry.
    let error = assert_kind(verify(&requests[2], &approvals[2], &keys, &replay), ErrorKind::Locked);
    assert!(!error.detail.is_empty());
    // The live entries still refuse their replays.
    assert_kind(verify(&requests[0], &approvals[0], &keys, &replay), ErrorKind::Replayed);
    // Each request of a later batch lives past the first batch: once those
    // expired, their entries make room.
    let later = NOW + LIFETIME + 1;
    let late_request =
        itsme::create_approval_request(SERVICE, "Example Bank", "late", &[], LIFETIME, later, None).unwrap();
    let late_approval = phone.store.sign_approval(&late_request, ApprovalDecision::Approve, &[], later).unwrap();
    itsme::verify_approval(&late_request, &late_approval, &keys, &replay, later).unwrap();
    // Capacity 0 is the default, a million.
    let roomy = ReplayStore::memory(0).unwrap();
    for (request, approval) in requests.iter().zip(&approvals) {
        verify(request, approval, &keys, &roomy).unwrap();
    }
}

#[test]
fn one_replay_store_shared_by_threads_lets_one_answer_through() {
    let phone = enrolled("Alice's phone");
    let request = Arc::new(request());
    let approval = Arc::new(approve(&phone, &request, &["email"]));
    let key = phone.public_key;
    let mut seen = HashSet::new();
    let stores = [
        Arc::new(ReplayStore::memory(0).unwrap()),
        Arc::new(ReplayStore::from_fn(move |key, _, _| Ok(!seen.insert(*key))).unwrap()),
    ];
    for store in stores {
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (request, approval, store) = (request.clone(), approval.clone(), store.clone());
                std::thread::spawn(move || verify(&request, &approval, &[key], &store).map(|_| ()).map_err(|e| e.kind()))
            })
            .collect();
        let outcomes: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), 1, "{outcomes:?}");
        assert!(outcomes.iter().all(|o| matches!(o, Ok(()) | Err(ErrorKind::Replayed))), "{outcomes:?}");
    }
}

#[test]
fn types_are_send_and_sync_and_show_no_secrets() {
    fn check<T: Send + Sync>() {}
    check::<ReplayStore>();
    check::<SecretStore>();
    let phone = enrolled("Alice's phone");
    let shown = format!("{:?} {:?}", phone.store, ReplayStore::memory(1).unwrap());
    assert!(!shown.contains("Alice"), "{shown}");
    let kinds = [ApprovalDecision::Approve, ApprovalDecision::Deny].map(u32::from);
    assert_eq!(kinds, [itsme::sys::ITSME_APPROVAL_APPROVE, itsme::sys::ITSME_APPROVAL_DENY]);
}
