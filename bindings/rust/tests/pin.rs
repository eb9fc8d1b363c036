//! PIN setting, checking, changing and the attempt limiter.

mod common;

use common::{assert_kind, TempDir, T0};
use itsme::{ErrorKind, Identity, SecretStore};

const PIN: &str = "123456";
const WRONG: &str = "000000";
const FIRST_LOCK: u64 = 300;
const MAX_WAIT: u64 = 86_400;

fn identity_with_pin() -> (SecretStore, Identity) {
    let store = SecretStore::memory().unwrap();
    let identity = Identity::create(&store, "Pin").unwrap();
    identity.set_pin(PIN).unwrap();
    (store, identity)
}

/// Fails `n` well-formed attempts at `now`, each of which must be counted.
fn fail_times(identity: &Identity, n: usize, now: i64) {
    for _ in 0..n {
        assert_kind(identity.verify_pin(WRONG, now), ErrorKind::WrongPin);
    }
}

#[test]
fn set_verify_change() {
    let store = SecretStore::memory().unwrap();
    let identity = Identity::create(&store, "Pin").unwrap();
    assert!(!identity.pin_is_set().unwrap());
    assert_kind(identity.verify_pin(PIN, T0), ErrorKind::NotFound);
    identity.set_pin(PIN).unwrap();
    assert!(identity.pin_is_set().unwrap());
    assert!(Identity::load(&store).unwrap().pin_is_set().unwrap());
    identity.verify_pin(PIN, T0).unwrap();
    assert_kind(identity.set_pin("654321"), ErrorKind::AlreadyExists);
    identity.verify_pin(PIN, T0).unwrap();

    identity.change_pin(PIN, "654321", T0).unwrap();
    identity.verify_pin("654321", T0).unwrap();
    assert_kind(identity.verify_pin(PIN, T0), ErrorKind::WrongPin);
    assert_eq!(identity.pin_status(T0).unwrap(), (1, 0));
    identity.verify_pin("654321", T0).unwrap();
    assert_eq!(identity.pin_status(T0).unwrap(), (0, 0));

    // A second handle on the same store sees the new PIN.
    let other = Identity::load(&store).unwrap();
    other.verify_pin("654321", T0).unwrap();
}

#[test]
fn wrong_pin_is_counted() {
    let (_store, identity) = identity_with_pin();
    assert_eq!(identity.pin_status(T0).unwrap(), (0, 0));
    assert_kind(identity.verify_pin(WRONG, T0), ErrorKind::WrongPin);
    assert_eq!(identity.pin_status(T0).unwrap(), (1, 0));
    assert_kind(identity.verify_pin("123457", T0), ErrorKind::WrongPin);
    assert_eq!(identity.pin_status(T0).unwrap(), (2, 0));
}

#[test]
fn malformed_pins_are_invalid_and_not_counted() {
    let store = SecretStore::memory().unwrap();
    let identity = Identity::create(&store, "Pin").unwrap();
    let malformed = [
        "", "12345", "1234567", "abcdef", "12345a", "12 456", " 123456", "123456 ", "-12345",
        "１２３４５６", "12345\0", "123\u{0}56",
    ];
    for pin in malformed {
        assert_kind(identity.set_pin(pin), ErrorKind::InvalidPin);
    }
    assert!(!identity.pin_is_set().unwrap());
    identity.set_pin(PIN).unwrap();
    for pin in malformed {
        assert_kind(identity.verify_pin(pin, T0), ErrorKind::InvalidPin);
    }
    assert_eq!(identity.pin_status(T0).unwrap(), (0, 0));
    for pin in malformed {
        // A malformed new PIN is refused before the old one is checked.
        assert_kind(identity.change_pin(PIN, pin, T0), ErrorKind::InvalidPin);
        assert_kind(identity.change_pin(WRONG, pin, T0), ErrorKind::InvalidPin);
        assert_kind(identity.change_pin(pin, "654321", T0), ErrorKind::InvalidPin);
    }
    assert_eq!(identity.pin_status(T0).unwrap(), (0, 0));
    identity.verify_pin(PIN, T0).unwrap();
}

#[test]
fn wrong_old_pin_in_change_is_counted() {
    let (_store, identity) = identity_with_pin();
    assert_kind(identity.change_pin(WRONG, "654321", T0), ErrorKind::WrongPin);
    assert_eq!(identity.pin_status(T0).unwrap(), (1, 0));
    identity.verify_pin(PIN, T0).unwrap();
}

#[test]
fn negative_time_is_rejected() {
    let (_store, identity) = identity_with_pin();
    assert_kind(identity.verify_pin(PIN, -1), ErrorKind::InvalidArgument);
    assert_kind(identity.verify_pin(WRONG, i64::MIN), ErrorKind::InvalidArgument);
    assert_kind(identity.change_pin(PIN, "654321", -1), ErrorKind::InvalidArgument);
    assert_kind(identity.pin_status(-1), ErrorKind::InvalidArgument);
    assert_eq!(identity.pin_status(T0).unwrap(), (0, 0));
    identity.verify_pin(PIN, T0).unwrap();
}

#[test]
fn lockout_after_five_failures() {
    let (_store, identity) = identity_with_pin();
    fail_times(&identity, 4, T0);
    assert_eq!(identity.pin_status(T0).unwrap(), (4, 0));
    fail_times(&identity, 1, T0);
    assert_eq!(identity.pin_status(T0).unwrap(), (5, FIRST_LOCK));

    // Refused without being checked or counted, even with the right PIN.
    let error = assert_kind(identity.verify_pin(PIN, T0), ErrorKind::Locked);
    assert_eq!(error.code, itsme::sys::ITSME_E_LOCKED);
    assert_kind(identity.verify_pin(WRONG, T0 + 100), ErrorKind::Locked);
    assert_kind(identity.change_pin(PIN, "654321", T0 + 100), ErrorKind::Locked);
    assert_eq!(identity.pin_status(T0).unwrap(), (5, FIRST_LOCK));
    assert_eq!(identity.pin_status(T0 + 100).unwrap(), (5, FIRST_LOCK - 100));
    assert_eq!(identity.pin_status(T0 + 299).unwrap(), (5, 1));
    assert_kind(identity.verify_pin(PIN, T0 + 299), ErrorKind::Locked);
    assert_eq!(identity.pin_status(T0 + 300).unwrap(), (5, 0));

    // After the wait, the right PIN works and clears the count.
    identity.verify_pin(PIN, T0 + 300).unwrap();
    assert_eq!(identity.pin_status(T0 + 300).unwrap(), (0, 0));
}

#[test]
fn waits_double_up_to_a_day() {
    let (_store, identity) = identity_with_pin();
    let mut now = T0;
    fail_times(&identity, 5, now);
    let mut expected = FIRST_LOCK;
    assert_eq!(identity.pin_status(now).unwrap(), (5, expected));
    let mut failures = 5;
    let mut saw_cap = false;
    while !saw_cap || failures < 16 {
        now += expected as i64;
        fail_times(&identity, 1, now);
        failures += 1;
        expected = (expected * 2).min(MAX_WAIT);
        saw_cap |= expected == MAX_WAIT;
        assert_eq!(identity.pin_status(now).unwrap(), (failures, expected), "after failure {failures}");
        assert_kind(identity.verify_pin(PIN, now + expected as i64 - 1), ErrorKind::Locked);
    }
    assert_eq!(identity.pin_status(now).unwrap().1, MAX_WAIT);
    now += MAX_WAIT as i64;
    identity.verify_pin(PIN, now).unwrap();
    assert_eq!(identity.pin_status(now).unwrap(), (0, 0));
}

#[test]
fn second_lock_is_600_seconds() {
    let (_store, identity) = identity_with_pin();
    fail_times(&identity, 5, T0);
    let t1 = T0 + FIRST_LOCK as i64;
    fail_times(&identity, 1, t1);
    assert_eq!(identity.pin_status(t1).unwrap(), (6, 600));
    assert_kind(identity.verify_pin(PIN, t1 + 599), ErrorKind::Locked);
    identity.verify_pin(PIN, t1 + 600).unwrap();
}

#[test]
fn clock_set_back_does_not_lengthen_the_wait() {
    let (_store, identity) = identity_with_pin();
    fail_times(&identity, 5, T0);
    for earlier in [T0 - 1, T0 - 1_000, T0 - 1_000_000, 0] {
        let (failures, wait) = identity.pin_status(earlier).unwrap();
        assert_eq!(failures, 5);
        assert!(wait <= FIRST_LOCK, "wait {wait} at {earlier}");
    }
}

#[test]
fn success_resets_the_count() {
    let (_store, identity) = identity_with_pin();
    fail_times(&identity, 4, T0);
    identity.verify_pin(PIN, T0).unwrap();
    assert_eq!(identity.pin_status(T0).unwrap(), (0, 0));
    fail_times(&identity, 4, T0);
    assert_eq!(identity.pin_status(T0).unwrap(), (4, 0));
    identity.change_pin(PIN, "654321", T0).unwrap();
    assert_eq!(identity.pin_status(T0).unwrap(), (0, 0));
    fail_times(&identity, 4, T0);
    identity.verify_pin("654321", T0).unwrap();
}

#[test]
fn lockout_survives_reloading_a_file_store() {
    let temp = TempDir::new("pin");
    {
        let store = SecretStore::file(temp.path()).unwrap();
        let identity = Identity::create(&store, "Persistent").unwrap();
        identity.set_pin(PIN).unwrap();
        fail_times(&identity, 5, T0);
    }
    {
        let store = SecretStore::file(temp.path()).unwrap();
        let identity = Identity::load(&store).unwrap();
        assert!(identity.pin_is_set().unwrap());
        assert_eq!(identity.pin_status(T0).unwrap(), (5, FIRST_LOCK));
        assert_kind(identity.verify_pin(PIN, T0 + 10), ErrorKind::Locked);
        fail_times(&identity, 1, T0 + FIRST_LOCK as i64);
    }
    let store = SecretStore::file(temp.path()).unwrap();
    let identity = Identity::load(&store).unwrap();
    let t1 = T0 + FIRST_LOCK as i64;
    assert_eq!(identity.pin_status(t1).unwrap(), (6, 600));
    assert_kind(identity.verify_pin(PIN, t1 + 1), ErrorKind::Locked);
    identity.verify_pin(PIN, t1 + 600).unwrap();
    drop(identity);
    let identity = Identity::load(&store).unwrap();
    assert_eq!(identity.pin_status(t1 + 600).unwrap(), (0, 0));
}

#[test]
fn limiter_is_shared_by_handles_on_one_store() {
    let (store, identity) = identity_with_pin();
    let other = Identity::load(&store).unwrap();
    fail_times(&identity, 3, T0);
    fail_times(&other, 2, T0);
    assert_eq!(identity.pin_status(T0).unwrap(), (5, FIRST_LOCK));
    assert_kind(other.verify_pin(PIN, T0), ErrorKind::Locked);
}
