//! Identities in memory and file stores.

mod common;

use common::{assert_kind, TempDir};
use itsme::{ErrorKind, Identity, SecretStore};

fn is_fingerprint(text: &str) -> bool {
    text.len() == itsme::FINGERPRINT_CHARS
        && text.bytes().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b))
}

#[test]
fn init_and_version() {
    itsme::init().unwrap();
    itsme::init().unwrap();
    assert_eq!(itsme::version(), itsme::sys::ITSME_VERSION_STRING);
    assert_eq!(itsme::version_number(), itsme::sys::ITSME_VERSION_NUMBER);
}

#[test]
fn memory_round_trip() {
    let store = SecretStore::memory().unwrap();
    let created = Identity::create(&store, "Alice").unwrap();
    let fingerprint = created.fingerprint().unwrap();
    assert!(is_fingerprint(&fingerprint), "{fingerprint:?}");
    let public_key = created.public_key().unwrap();
    assert_ne!(public_key, [0u8; 32]);
    assert_eq!(itsme::fingerprint_from_public_key(&public_key).unwrap(), fingerprint);
    assert_eq!(created.name().unwrap(), "Alice");

    let loaded = Identity::load(&store).unwrap();
    assert_eq!(loaded.fingerprint().unwrap(), fingerprint);
    assert_eq!(loaded.public_key().unwrap(), public_key);
    assert_eq!(loaded.name().unwrap(), "Alice");
}

#[test]
fn identities_differ() {
    let a = Identity::create(&SecretStore::memory().unwrap(), "A").unwrap();
    let b = Identity::create(&SecretStore::memory().unwrap(), "B").unwrap();
    assert_ne!(a.public_key().unwrap(), b.public_key().unwrap());
    assert_ne!(a.fingerprint().unwrap(), b.fingerprint().unwrap());
}

#[test]
fn file_round_trip() {
    let temp = TempDir::new("identity");
    let dir = temp.path().join("store");
    let (fingerprint, public_key) = {
        let store = SecretStore::file(&dir).unwrap();
        let identity = Identity::create(&store, "Bob").unwrap();
        identity.set_name("Bobby").unwrap();
        (identity.fingerprint().unwrap(), identity.public_key().unwrap())
    };
    assert!(dir.is_dir());

    let store = SecretStore::file(&dir).unwrap();
    let identity = Identity::load(&store).unwrap();
    assert_eq!(identity.fingerprint().unwrap(), fingerprint);
    assert_eq!(identity.public_key().unwrap(), public_key);
    assert_eq!(identity.name().unwrap(), "Bobby");
    assert_kind(Identity::create(&store, "Again"), ErrorKind::AlreadyExists);

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "store directory mode {mode:o}");
        let mut files = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_file() {
                files += 1;
                let mode = meta.permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{:?} has mode {mode:o}", entry.file_name());
            }
        }
        assert!(files > 0, "the file store wrote no files");
    }
}

#[test]
fn file_store_on_a_regular_file_fails() {
    let temp = TempDir::new("notadir");
    let file = temp.path().join("plain");
    std::fs::write(&file, b"not a directory").unwrap();
    let error = assert_kind(SecretStore::file(&file), ErrorKind::SecretStore);
    assert!(error.to_string().starts_with(&error.message));
}

#[test]
fn file_store_path_with_nul_is_rejected() {
    assert_kind(SecretStore::file("bad\0path"), ErrorKind::InvalidArgument);
}

#[test]
fn create_twice_is_already_exists() {
    let store = SecretStore::memory().unwrap();
    let first = Identity::create(&store, "First").unwrap();
    let error = assert_kind(Identity::create(&store, "Second"), ErrorKind::AlreadyExists);
    assert_eq!(error.code, itsme::sys::ITSME_E_ALREADY_EXISTS);
    // The first identity is untouched.
    let loaded = Identity::load(&store).unwrap();
    assert_eq!(loaded.fingerprint().unwrap(), first.fingerprint().unwrap());
    assert_eq!(loaded.name().unwrap(), "First");
}

#[test]
fn load_from_empty_store_is_not_found() {
    let store = SecretStore::memory().unwrap();
    assert_kind(Identity::load(&store), ErrorKind::NotFound);
    let temp = TempDir::new("empty");
    let store = SecretStore::file(temp.path()).unwrap();
    assert_kind(Identity::load(&store), ErrorKind::NotFound);
}

#[test]
fn name_round_trip() {
    let store = SecretStore::memory().unwrap();
    let identity = Identity::create(&store, "Alice").unwrap();
    for name in ["Bob", "Zoë 🙂", "a", &"x".repeat(itsme::NAME_MAX_BYTES), &"é".repeat(64)] {
        identity.set_name(name).unwrap();
        assert_eq!(identity.name().unwrap(), name);
        assert_eq!(Identity::load(&store).unwrap().name().unwrap(), name);
    }
}

#[test]
fn bad_names_are_invalid_arguments() {
    let store = SecretStore::memory().unwrap();
    let long = "x".repeat(itsme::NAME_MAX_BYTES + 1);
    let long_multibyte = "é".repeat(65); // 130 bytes
    for name in ["", "a\nb", "tab\there", "bell\u{7}", "nul\0inside", &long, &long_multibyte] {
        assert_kind(Identity::create(&store, name), ErrorKind::InvalidArgument);
    }
    assert_kind(Identity::load(&store), ErrorKind::NotFound);
    let identity = Identity::create(&store, "Good").unwrap();
    for name in ["", "a\nb", "nul\0inside", &long] {
        assert_kind(identity.set_name(name), ErrorKind::InvalidArgument);
    }
    assert_eq!(identity.name().unwrap(), "Good");
}

#[test]
fn fingerprint_of_a_known_key() {
    // SHA-256 of 32 zero bytes starts 66687aadf862bd77.
    assert_eq!(itsme::fingerprint_from_public_key(&[0u8; 32]).unwrap(), "66687AADF862BD77");
    for len in [0usize, 31, 33, 64] {
        assert_kind(itsme::fingerprint_from_public_key(&vec![1u8; len]), ErrorKind::InvalidArgument);
    }
}

#[test]
fn identity_outlives_its_store_handle() {
    let store = SecretStore::memory().unwrap();
    let identity = Identity::create(&store, "Keeper").unwrap();
    drop(store);
    identity.set_name("Still here").unwrap();
    assert_eq!(identity.name().unwrap(), "Still here");
    identity.set_pin("123456").unwrap();
    identity.verify_pin("123456", common::T0).unwrap();
}

#[test]
fn handles_are_shared_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Identity>();
    send_sync::<SecretStore>();

    let store = SecretStore::memory().unwrap();
    let identity = Identity::create(&store, "Shared").unwrap();
    let expected = identity.fingerprint().unwrap();
    std::thread::scope(|scope| {
        for i in 0..8 {
            let identity = &identity;
            let store = &store;
            let expected = &expected;
            scope.spawn(move || {
                for _ in 0..20 {
                    assert_eq!(&identity.fingerprint().unwrap(), expected);
                    assert_eq!(Identity::load(store).unwrap().fingerprint().unwrap(), *expected);
                    assert_kind(Identity::create(store, "Other"), ErrorKind::AlreadyExists);
                }
                identity.set_name(&format!("Thread {i}")).unwrap();
            });
        }
    });
    assert!(identity.name().unwrap().starts_with("Thread "));
}

#[test]
fn error_display_and_source() {
    let store = SecretStore::memory().unwrap();
    let error = Identity::load(&store).unwrap_err();
    let as_dyn: &dyn std::error::Error = &error;
    let text = as_dyn.to_string();
    assert!(text.starts_with(itsme::result_message(itsme::sys::ITSME_E_NOT_FOUND)), "{text}");
    if !error.detail.is_empty() {
        assert_eq!(text, format!("{} ({})", error.message, error.detail));
    }
}
