//! The encrypted contact store through the safe Rust API.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use common::{assert_kind, TempDir};
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

#[test]
fn handles_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<ContactStore>();
    check::<itsme::Contact>();
}

#[test]
fn every_method_and_state_round_trips() {
    let e = env("contacts-enums");
    let store = ContactStore::open(&e.identity, &e.path).unwrap();
    let methods = [ExchangeMethod::Qr, ExchangeMethod::Bluetooth, ExchangeMethod::Invite, ExchangeMethod::Realtime];
    for (n, method) in methods.into_iter().enumerate() {
        assert_eq!(u32::from(method), n as u32);
        assert_eq!(ExchangeMethod::try_from(n as u32).unwrap(), method);
        let id = store.add(&format!("M{n}"), &key(n as u32), &seed(1), method, T0 + n as i64).unwrap();
        let c = store.get(id).unwrap();
        assert_eq!((c.method, c.created_at), (method, T0 + n as i64));
    }
    assert_kind(ExchangeMethod::try_from(4), ErrorKind::InvalidArgument);
    for (n, state) in [
        VerificationState::Unverified,
        VerificationState::Verified,
        VerificationState::Degraded,
        VerificationState::AwaitingPeer,
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(u32::from(state), n as u32);
        assert_eq!(VerificationState::try_from(n as u32).unwrap(), state);
    }
    assert_kind(VerificationState::try_from(4), ErrorKind::InvalidArgument);

    let id = store.add("S", &key(10), &seed(1), ExchangeMethod::Qr, T0).unwrap();
    // Only an exchange puts a contact in the state awaiting the peer.
    assert_kind(store.set_state(id, VerificationState::AwaitingPeer, false, T0), ErrorKind::InvalidState);
    store.set_state(id, VerificationState::Verified, false, T0 + 10).unwrap();
    let c = store.get(id).unwrap();
    assert_eq!((c.state, c.acknowledged, c.verified_at), (VerificationState::Verified, false, Some(T0 + 10)));
    store.set_state(id, VerificationState::Degraded, false, T0 + 20).unwrap();
    let c = store.get(id).unwrap();
    assert_eq!((c.state, c.acknowledged), (VerificationState::Degraded, false));
    store.set_state(id, VerificationState::Degraded, true, T0 + 30).unwrap();
    let c = store.get(id).unwrap();
    assert_eq!((c.state, c.acknowledged), (VerificationState::Degraded, true));
    store.set_state(id, VerificationState::Unverified, false, T0 + 40).unwrap();
    assert_eq!(store.get(id).unwrap().state, VerificationState::Unverified);
}

#[test]
fn lookups_lists_and_ids() {
    let e = env("contacts-lookups");
    let store = ContactStore::open(&e.identity, &e.path).unwrap();
    assert_eq!(store.count().unwrap(), 0);
    assert_eq!(store.list(0, 0).unwrap(), vec![]);
    assert_eq!(store.iter(10).count(), 0);
    assert_kind(store.get(1), ErrorKind::NotFound);

    let array: [u8; 32] = key(1).try_into().unwrap();
    let a = store.add("A", &array, &seed(1), ExchangeMethod::Qr, T0).unwrap();
    let b = store.add("B", &key(2), &seed(2), ExchangeMethod::Qr, T0).unwrap();
    let c = store.add("C", &key(3), &seed(3), ExchangeMethod::Qr, T0).unwrap();
    assert!(a < b && b < c);
    assert_eq!(store.get_by_key(&array).unwrap().id, a);
    assert_kind(store.get_by_key(&key(4)), ErrorKind::NotFound);
    // A short key finds nothing.  (itsme.h makes it InvalidArgument; the
    // exact code is checked on the raw call in tests/misuse.rs.)
    assert!(store.get_by_key(&key(1)[..31]).is_err());
    let unknown = itsme::fingerprint_from_public_key(&key(4)).unwrap();
    assert_eq!(store.find_fingerprint(&unknown).unwrap(), vec![]);
    assert_kind(store.find_fingerprint("0123"), ErrorKind::InvalidArgument);

    let all = store.list(0, 0).unwrap();
    assert_eq!(all.iter().map(|c| c.id).collect::<Vec<_>>(), vec![a, b, c]);
    assert_eq!(store.list(a, 1).unwrap(), vec![all[1].clone()]);
    assert_eq!(store.list(c, 10).unwrap(), vec![]);
    assert_eq!(store.iter(0).map(Result::unwrap).collect::<Vec<_>>(), all);
    assert_eq!(store.iter(3).map(Result::unwrap).collect::<Vec<_>>(), all);

    // Ids are never reused, and a deleted key may be added again.
    store.delete(c).unwrap();
    assert_eq!(store.count().unwrap(), 2);
    let again = store.add("C again", &key(3), &seed(3), ExchangeMethod::Qr, T0).unwrap();
    assert!(again > c, "id {again} reused after deleting {c}");
    assert_eq!(store.get_by_key(&key(3)).unwrap().name, "C again");
}

#[test]
fn notes_names_and_times_are_checked() {
    let e = env("contacts-checks");
    let store = ContactStore::open(&e.identity, &e.path).unwrap();
    let id = store.add("A", &key(1), &seed(1), ExchangeMethod::Qr, T0).unwrap();
    let longest = "n".repeat(itsme::NOTE_MAX_BYTES);
    store.set_note(id, &longest).unwrap();
    assert_eq!(store.get(id).unwrap().note, longest);
    assert_kind(store.set_note(id, &"n".repeat(itsme::NOTE_MAX_BYTES + 1)), ErrorKind::InvalidArgument);
    store.set_note(id, "Grüße, 日本 🎉\nsecond line").unwrap();
    assert_eq!(store.get(id).unwrap().note, "Grüße, 日本 🎉\nsecond line");
    store.set_note(id, "").unwrap();
    assert_eq!(store.get(id).unwrap().note, "");
    assert_kind(store.set_note(id, "a\0b"), ErrorKind::InvalidArgument);

    let longest_name = "x".repeat(itsme::NAME_MAX_BYTES);
    store.set_name(id, &longest_name).unwrap();
    assert_eq!(store.get(id).unwrap().name, longest_name);
    for bad in ["", "a\0b", "line\nbreak"] {
        assert_kind(store.set_name(id, bad), ErrorKind::InvalidArgument);
        assert_kind(store.add(bad, &key(2), &seed(2), ExchangeMethod::Qr, T0), ErrorKind::InvalidArgument);
    }
    assert_kind(store.set_name(id, &"x".repeat(itsme::NAME_MAX_BYTES + 1)), ErrorKind::InvalidArgument);

    assert_kind(store.add("B", &key(2), &seed(2), ExchangeMethod::Qr, -1), ErrorKind::InvalidArgument);
    assert_kind(store.add("B", &key(2), &[], ExchangeMethod::Qr, T0), ErrorKind::InvalidArgument);
    assert_kind(store.add("B", &key(2), &[1u8; 33], ExchangeMethod::Qr, T0), ErrorKind::InvalidArgument);
    assert_kind(store.add("B", &[], &seed(2), ExchangeMethod::Qr, T0), ErrorKind::InvalidKey);
    assert_kind(store.set_state(id, VerificationState::Verified, false, -1), ErrorKind::InvalidArgument);
    assert_kind(store.use_window(id, -1), ErrorKind::InvalidArgument);
    assert_eq!(store.count().unwrap(), 1);
    let c = store.get(id).unwrap();
    assert_eq!((c.name.as_str(), c.state, c.last_window), (longest_name.as_str(), VerificationState::Unverified, None));

    for missing in [id + 1000, 0, -5] {
        assert_kind(store.set_name(missing, "X"), ErrorKind::NotFound);
        assert_kind(store.set_note(missing, "X"), ErrorKind::NotFound);
        assert_kind(store.set_state(missing, VerificationState::Verified, false, T0), ErrorKind::NotFound);
        assert_kind(store.use_window(missing, 1), ErrorKind::NotFound);
        assert_kind(store.delete(missing), ErrorKind::NotFound);
        assert_kind(store.get(missing), ErrorKind::NotFound);
    }
}

#[test]
fn unauthenticated_contacts_round_trip() {
    let e = env("contacts-v5-round-trip");
    let store = ContactStore::open(&e.identity, &e.path).unwrap();
    let fingerprint = "0123456789ABCDEF";
    let id = store.add_unauthenticated("Old", fingerprint, &seed(5), ExchangeMethod::Bluetooth, T0).unwrap();
    let c = store.get(id).unwrap();
    assert_eq!(
        (c.name.as_str(), c.fingerprint.as_str(), c.public_key, c.method, c.created_at),
        ("Old", fingerprint, None, ExchangeMethod::Bluetooth, T0)
    );
    assert_eq!(store.find_fingerprint("0123456789abcdef").unwrap(), vec![c.clone()]);
    // Updates work as for keyed contacts.
    store.set_note(id, "from the old app").unwrap();
    store.set_state(id, VerificationState::Verified, false, T0 + 1).unwrap();
    store.use_window(id, 7).unwrap();
    assert_kind(store.use_window(id, 7), ErrorKind::WindowUsed);
    let c = store.get(id).unwrap();
    assert_eq!((c.note.as_str(), c.verified_at, c.last_window), ("from the old app", Some(T0 + 1), Some(7)));
    // A second unauthenticated contact with the same fingerprint is its
    // own contact, and a keyed contact never replaces either.
    let twin = store.add_unauthenticated("Twin", fingerprint, &seed(6), ExchangeMethod::Qr, T0).unwrap();
    assert_ne!(twin, id);
    assert_eq!(store.find_fingerprint(fingerprint).unwrap().len(), 2);
    for bad in ["", "0123456789ABCDE", "0123456789ABCDEF0", "0123456789ABCDEG", "0123456789ABCDE\u{e9}"] {
        assert_kind(store.add_unauthenticated("Bad", bad, &seed(1), ExchangeMethod::Qr, T0), ErrorKind::InvalidArgument);
    }
    assert_kind(store.add_unauthenticated("Bad", fingerprint, &seed(1)[..31], ExchangeMethod::Qr, T0), ErrorKind::InvalidArgument);
    assert_kind(store.add_unauthenticated("Bad", fingerprint, &seed(1), ExchangeMethod::Qr, -1), ErrorKind::InvalidArgument);
    assert_eq!(store.count().unwrap(), 2);
    store.delete(id).unwrap();
    assert_eq!(store.find_fingerprint(fingerprint).unwrap().iter().map(|c| c.id).collect::<Vec<_>>(), vec![twin]);
}

#[test]
fn contacts_persist_and_the_store_outlives_its_identity() {
    let e = env("contacts-persist");
    let secrets = SecretStore::memory().unwrap();
    let identity = Identity::create(&secrets, "Me").unwrap();
    let store = ContactStore::open(&identity, &e.path).unwrap();
    drop(identity);
    let id = store.add("A", &key(1), &seed(1), ExchangeMethod::Realtime, T0).unwrap();
    store.set_note(id, "kept").unwrap();
    store.use_window(id, 12).unwrap();
    let before = store.get(id).unwrap();
    drop(store);

    let identity = Identity::load(&secrets).unwrap();
    let store = ContactStore::open(&identity, &e.path).unwrap();
    assert_eq!(store.get(id).unwrap(), before);
    assert_kind(store.use_window(id, 12), ErrorKind::WindowUsed);
    assert_eq!(store.count().unwrap(), 1);
}

#[test]
fn errors_carry_the_detail_of_the_right_handle() {
    let e = env("contacts-details");
    let store = ContactStore::open(&e.identity, &e.path).unwrap();
    let id = store.add("A", &key(1), &seed(1), ExchangeMethod::Qr, T0).unwrap();
    store.use_window(id, 5).unwrap();
    let error = assert_kind(store.use_window(id, 5), ErrorKind::WindowUsed);
    assert!(!error.detail.is_empty(), "{error:?}");
    assert_eq!(error.to_string(), format!("{} ({})", error.message, error.detail));
    let error = assert_kind(store.get(999), ErrorKind::NotFound);
    assert!(!error.detail.is_empty(), "{error:?}");

    // open reports through the identity.
    let other_secrets = SecretStore::memory().unwrap();
    let other = Identity::create(&other_secrets, "Other").unwrap();
    let error = assert_kind(ContactStore::open(&other, &e.path), ErrorKind::WrongIdentity);
    assert!(!error.detail.is_empty(), "{error:?}");
    let missing_dir = e.path.with_file_name("no-such-dir").join("contacts.db");
    let error = assert_kind(ContactStore::open(&e.identity, &missing_dir), ErrorKind::Database);
    assert!(!error.detail.is_empty(), "{error:?}");
    assert!(!missing_dir.exists());
    let error = assert_kind(ContactStore::open(&e.identity, e.path.with_file_name("a\0b")), ErrorKind::InvalidArgument);
    assert!(error.detail.contains("NUL"), "{error:?}");
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let bad = e.path.with_file_name(std::ffi::OsStr::from_bytes(b"bad-\xff.db"));
        assert_kind(ContactStore::open(&e.identity, &bad), ErrorKind::InvalidArgument);
        assert!(!bad.exists());
    }
    // The store still works after all that.
    assert_eq!(store.get(id).unwrap().last_window, Some(5));
}

#[test]
fn a_directory_or_an_empty_file_as_the_store() {
    let e = env("contacts-odd-files");
    let dir = e.path.with_file_name("a-directory");
    std::fs::create_dir(&dir).unwrap();
    assert_kind(ContactStore::open(&e.identity, &dir), ErrorKind::Database);
    // An empty file is a new, empty database.
    let empty = e.path.with_file_name("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let store = ContactStore::open(&e.identity, &empty).unwrap();
    assert_eq!(store.count().unwrap(), 0);
}

#[test]
fn a_rolled_back_store_is_refused_until_the_loss_is_accepted() {
    let e = env("rolled-back");
    let older = e.path.with_file_name("older.db");
    {
        let store = ContactStore::open(&e.identity, &e.path).unwrap();
        for n in 0..2 {
            store.add(&format!("Early {n}"), &key(n), &seed(n), ExchangeMethod::Qr, T0).unwrap();
        }
        store.backup(&older).unwrap();
        for n in 2..5 {
            store.add(&format!("Late {n}"), &key(n), &seed(n), ExchangeMethod::Qr, T0).unwrap();
        }
    }
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", e.path.display()));
    }
    std::fs::copy(&older, &e.path).unwrap();
    let error = assert_kind(ContactStore::open(&e.identity, &e.path), ErrorKind::RolledBack);
    assert!(error.detail.contains("3 committed changes behind"), "{error}");

    let loss = ContactStore::accept_loss(&e.identity, &e.path).unwrap();
    assert!(!loss.replaced);
    assert_eq!((loss.commits_lost, loss.contacts_before, loss.contacts_now), (3, 5, 2));
    assert!(!loss.nothing_lost());
    assert_eq!(ContactStore::open(&e.identity, &e.path).unwrap().count().unwrap(), 2);
    assert!(ContactStore::accept_loss(&e.identity, &e.path).unwrap().nothing_lost());
}
