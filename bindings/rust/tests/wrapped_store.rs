//! The passphrase-wrapped file store (docs/STORAGE.md): each create or open
//! runs Argon2id over 256 MiB, about a second.

mod common;

use common::{assert_kind, TempDir};
use itsme::{ErrorKind, Identity, SecretStore};

const PASSPHRASE: &[u8] = b"correct horse battery staple";
const NAME: &str = "Zebulon Quince";

#[test]
fn create_reopen_and_a_wrong_passphrase() {
    let dir = TempDir::new("wrapped");
    let directory = dir.path().join("secrets");
    assert!(!SecretStore::is_wrapped_file(&directory).unwrap());

    let fingerprint = {
        let store = SecretStore::create_wrapped_file(&directory, PASSPHRASE).unwrap();
        let identity = Identity::create(&store, NAME).unwrap();
        identity.fingerprint().unwrap()
    };
    assert!(SecretStore::is_wrapped_file(&directory).unwrap());
    // The wrap file sits beside the directory; the items are sealed.
    let wrap = std::fs::read_to_string(dir.path().join("secrets.wrap")).unwrap();
    assert!(wrap.contains("\"kdf\":\"argon2id13\""), "{wrap}");
    let item = std::fs::read(directory.join("itsme.identity")).unwrap();
    assert_eq!(item[0], 1);
    assert!(!item.windows(NAME.len()).any(|w| w == NAME.as_bytes()));

    // Reopened, the item reads back.
    {
        let store = SecretStore::open_wrapped_file(&directory, PASSPHRASE).unwrap();
        let identity = Identity::load(&store).unwrap();
        assert_eq!(identity.name().unwrap(), NAME);
        assert_eq!(identity.fingerprint().unwrap(), fingerprint);
    }

    let wrong = assert_kind(
        SecretStore::open_wrapped_file(&directory, b"incorrect horse battery staple"),
        ErrorKind::AuthenticationFailed,
    );
    assert!(wrong.detail.contains("wrong passphrase"), "{}", wrong.detail);
    assert!(!wrong.detail.contains("horse"));

    // Wrapped once only; and not readable as a plain store.
    assert_kind(SecretStore::create_wrapped_file(&directory, PASSPHRASE), ErrorKind::AlreadyExists);
    let plain = SecretStore::file(&directory).unwrap();
    assert_kind(Identity::load(&plain), ErrorKind::CorruptData);
}

#[test]
fn refusals_before_any_hashing() {
    let dir = TempDir::new("wrapped-refused");
    let directory = dir.path().join("secrets");
    assert_kind(SecretStore::open_wrapped_file(&directory, PASSPHRASE), ErrorKind::NotFound);
    assert_kind(SecretStore::create_wrapped_file(&directory, b""), ErrorKind::InvalidArgument);
    let too_long = vec![b'x'; itsme::PASSPHRASE_MAX_BYTES + 1];
    assert_kind(SecretStore::create_wrapped_file(&directory, &too_long), ErrorKind::InvalidArgument);
    assert_kind(SecretStore::open_wrapped_file(&directory, &too_long), ErrorKind::InvalidArgument);
    assert_kind(SecretStore::is_wrapped_file("/"), ErrorKind::InvalidArgument);

    std::fs::write(dir.path().join("secrets.wrap"), "{}").unwrap();
    assert!(SecretStore::is_wrapped_file(&directory).unwrap());
    assert_kind(SecretStore::open_wrapped_file(&directory, PASSPHRASE), ErrorKind::CorruptData);

    // Only a new, empty store is wrapped.
    let other = dir.path().join("plain");
    {
        let plain = SecretStore::file(&other).unwrap();
        Identity::create(&plain, NAME).unwrap();
    }
    assert_kind(SecretStore::create_wrapped_file(&other, PASSPHRASE), ErrorKind::AlreadyExists);
    assert!(!SecretStore::is_wrapped_file(&other).unwrap());
}
