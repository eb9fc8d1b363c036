//! The encrypted contact store through the safe Rust API.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use common::TempDir;
use itsme::{ContactStore, ErrorKind, ExchangeMethod, Identity, SecretStore, VerificationState};

const T0: i64 = 1_800_000_000;

fn key(n: u32) -> Vec<u8> {
    let mut k = vec![0u8; 32];
    k[..4].copy_from_slice(&n.to_be_bytes());
    k[31] = 0x5a;
    k
}

fn seed(n: u32) -> Vec<u8> {
    vec![(n % 251) as u8; 32]
}

struct Env {
    _dir: TempDir,
    path: std::path::PathBuf,
    identity: Identity,
    _secrets: SecretStore,
}

fn env(tag: &str) -> Env {
    let dir = TempDir::new(tag);
    let secrets = SecretStore::memory().unwrap();
    let identity = Identity::create(&secrets, "Me").unwrap();
    let path = dir.path().join("contacts.db");
    Env { _dir: dir, path, identity, _secrets: secrets }
}

#[test]
fn round_trip_and_updates() {
    let e = env("contacts-round-trip");
    let store = ContactStore::open(&e.identity, &e.path).unwrap();
    let id = store.add("Alice", &key(1), &seed(1), ExchangeMethod::Invite, T0).unwrap();
    let c = store.get(id).unwrap();
    assert_eq!((c.id, c.name.as_str(), c.method, c.created_at), (id, "Alice", ExchangeMethod::Invite, T0));
    assert_eq!(c.public_key.map(|k| k.to_vec()), Some(key(1)));
    assert_eq!(c.fingerprint, itsme::fingerprint_from_public_key(&key(1)).unwrap());
    assert_eq!((c.state, c.acknowledged, c.verified_at, c.last_window), (VerificationState::Unverified, false, None, None));
    assert_eq!(store.get_by_key(&key(1)).unwrap(), c);
    assert_eq!(store.find_fingerprint(&c.fingerprint.to_lowercase()).unwrap(), vec![c.clone()]);
    store.set_name(id, "Alicia").unwrap();
    store.set_note(id, "neighbour").unwrap();
    store.set_state(id, VerificationState::Verified, false, T0 + 3).unwrap();
    let c = store.get(id).unwrap();
    assert_eq!((c.name.as_str(), c.note.as_str(), c.verified_at), ("Alicia", "neighbour", Some(T0 + 3)));
    store.set_state(id, VerificationState::Degraded, true, T0 + 4).unwrap();
    assert!(store.get(id).unwrap().acknowledged);
    assert_eq!(store.count().unwrap(), 1);
    store.delete(id).unwrap();
    assert_eq!(store.get(id).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(store.delete(id).unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn refusals() {
    let e = env("contacts-refusals");
    let store = ContactStore::open(&e.identity, &e.path).unwrap();
    store.add("A", &key(1), &seed(1), ExchangeMethod::Qr, T0).unwrap();
    assert_eq!(store.add("B", &key(1), &seed(2), ExchangeMethod::Qr, T0).unwrap_err().kind(), ErrorKind::AlreadyExists);
    let own = e.identity.public_key().unwrap();
    assert_eq!(store.add("Me", &own, &seed(2), ExchangeMethod::Qr, T0).unwrap_err().kind(), ErrorKind::InvalidKey);
    assert_eq!(store.add("S", &key(2)[..31], &seed(2), ExchangeMethod::Qr, T0).unwrap_err().kind(), ErrorKind::InvalidKey);
    assert_eq!(
        store.add("S", &key(2), &seed(2)[..31], ExchangeMethod::Qr, T0).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(store.add("", &key(2), &seed(2), ExchangeMethod::Qr, T0).unwrap_err().kind(), ErrorKind::InvalidArgument);
    let error = store.add("B", &key(1), &seed(2), ExchangeMethod::Qr, T0).unwrap_err();
    assert!(error.detail.contains("exists"), "{error}");
    assert_eq!(store.count().unwrap(), 1);
}

#[test]
fn unauthenticated_contacts_never_merge() {
    let e = env("contacts-v5");
    let store = ContactStore::open(&e.identity, &e.path).unwrap();
    let keyed = store.add("Keyed", &key(1), &seed(1), ExchangeMethod::Qr, T0).unwrap();
    let fingerprint = store.get(keyed).unwrap().fingerprint;
    let old = store.add_unauthenticated("Old", &fingerprint, &seed(2), ExchangeMethod::Qr, T0).unwrap();
    let found = store.find_fingerprint(&fingerprint).unwrap();
    assert_eq!(found.iter().map(|c| c.id).collect::<Vec<_>>(), vec![keyed, old]);
    assert_eq!(found[1].public_key, None);
    assert_eq!(
        store.add_unauthenticated("Bad", "xyz", &seed(2), ExchangeMethod::Qr, T0).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn windows_only_move_forward() {
    let e = env("contacts-windows");
    let store = ContactStore::open(&e.identity, &e.path).unwrap();
    let id = store.add("A", &key(1), &seed(1), ExchangeMethod::Qr, T0).unwrap();
    store.use_window(id, 50).unwrap();
    for again in [50, 49] {
        assert_eq!(store.use_window(id, again).unwrap_err().kind(), ErrorKind::WindowUsed);
    }
    store.use_window(id, 51).unwrap();
    assert_eq!(store.get(id).unwrap().last_window, Some(51));
}

#[test]
fn two_handles_racing_for_one_window_have_one_winner() {
    let e = env("contacts-race");
    let first = Arc::new(ContactStore::open(&e.identity, &e.path).unwrap());
    let second = Arc::new(ContactStore::open(&e.identity, &e.path).unwrap());
    let id = first.add("A", &key(1), &seed(1), ExchangeMethod::Qr, T0).unwrap();
    for window in 100..110 {
        let wins = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let store = if i % 2 == 0 { Arc::clone(&first) } else { Arc::clone(&second) };
                let wins = Arc::clone(&wins);
                thread::spawn(move || match store.use_window(id, window) {
                    Ok(()) => {
                        wins.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(error) => assert_eq!(error.kind(), ErrorKind::WindowUsed),
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(wins.load(Ordering::SeqCst), 1, "window {window}");
    }
}

#[test]
fn one_handle_shared_by_threads() {
    let e = env("contacts-threads");
    let store = Arc::new(ContactStore::open(&e.identity, &e.path).unwrap());
    let threads: Vec<_> = (0..8u32)
        .map(|t| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                for i in 0..20u32 {
                    let id = store.add(&format!("T{t}-{i}"), &key(1000 * t + i), &seed(i), ExchangeMethod::Qr, T0).unwrap();
                    store.set_note(id, &format!("note {i}")).unwrap();
                    assert_eq!(store.get(id).unwrap().note, format!("note {i}"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(store.count().unwrap(), 160);
}

#[test]
fn paging_yields_every_contact_in_order() {
    let e = env("contacts-paging");
    let store = ContactStore::open(&e.identity, &e.path).unwrap();
    let ids: Vec<i64> =
        (0..1050u32).map(|i| store.add(&format!("C{i}"), &key(i), &seed(i), ExchangeMethod::Qr, T0).unwrap()).collect();
    let seen: Vec<i64> = store.iter(100).map(|c| c.unwrap().id).collect();
    assert_eq!(seen, ids);
    assert_eq!(store.list(ids[99], 3).unwrap().iter().map(|c| c.id).collect::<Vec<_>>(), ids[100..103].to_vec());
}

#[test]
fn another_identity_or_a_non_database_file_is_refused_unchanged() {
    let e = env("contacts-wrong");
    {
        let store = ContactStore::open(&e.identity, &e.path).unwrap();
        store.add("A", &key(1), &seed(1), ExchangeMethod::Qr, T0).unwrap();
    }
    let before = std::fs::read(&e.path).unwrap();
    let other_secrets = SecretStore::memory().unwrap();
    let other = Identity::create(&other_secrets, "Other").unwrap();
    assert_eq!(ContactStore::open(&other, &e.path).err().unwrap().kind(), ErrorKind::WrongIdentity);
    assert_eq!(std::fs::read(&e.path).unwrap(), before);
    let text = e.path.with_file_name("notes.txt");
    std::fs::write(&text, "not a database\n".repeat(100)).unwrap();
    assert_eq!(ContactStore::open(&e.identity, &text).err().unwrap().kind(), ErrorKind::Database);
    assert_eq!(std::fs::read_to_string(&text).unwrap(), "not a database\n".repeat(100));
}
