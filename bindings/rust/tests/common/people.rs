//! People for the verification tests: each an identity in a secret store a
//! test can read, and a contact store; two of them befriended by a real QR
//! exchange; a person moved to a new device; a whole voice verification.

use super::TempDir;
use itsme::{
    Contact, ContactStore, DeterministicRandom, Exchange, Identity, SecretStore, SecretStoreBackend, VoiceOutcome,
    VoiceSession, VoiceTurn,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A window boundary: the window `T0 / 30` begins at T0.
pub const T0: i64 = 1_800_000_000;
/// When the people met and exchanged by QR.
pub const EXCHANGED: i64 = T0 - 3600;
/// The secret-store item of the identity (docs/STORAGE.md).
pub const IDENTITY_ITEM: &str = "itsme.identity";

/// A secret store's items in a map the test keeps a handle on (a memory
/// store has no function to read an item).
#[derive(Clone, Default)]
pub struct Items(Arc<Mutex<HashMap<String, Vec<u8>>>>);

impl Items {
    pub fn get(&self, name: &str) -> Option<Vec<u8>> {
        self.0.lock().unwrap().get(name).cloned()
    }
}

impl SecretStoreBackend for Items {
    fn get(&mut self, name: &str) -> itsme::Result<Option<Vec<u8>>> {
        Ok(Items::get(self, name))
    }

    fn put(&mut self, name: &str, value: &[u8], _accessibility: u32) -> itsme::Result<()> {
        self.0.lock().unwrap().insert(name.to_owned(), value.to_vec());
        Ok(())
    }

    fn remove(&mut self, name: &str) -> itsme::Result<bool> {
        Ok(self.0.lock().unwrap().remove(name).is_some())
    }
}

/// A person on one device: an identity, its secrets, its contacts, and the
/// id under which it stored the other person.
pub struct Person {
    pub name: String,
    pub items: Items,
    pub contacts: ContactStore,
    pub identity: Identity,
    pub secrets: SecretStore,
    pub path: PathBuf,
    pub peer: i64,
    _dir: Arc<TempDir>,
}

impl Person {
    /// A person whose identity is drawn from a random source seeded with
    /// `tag`.
    pub fn new(name: &str, tag: u8) -> Person {
        let dir = Arc::new(TempDir::new(&format!("people-{}", name.to_lowercase())));
        let items = Items::default();
        let secrets = SecretStore::from_backend(Box::new(items.clone())).unwrap();
        let mut rng = DeterministicRandom::new(&[tag; 32]).unwrap();
        let identity = Identity::create_with_random(&secrets, name, Some(&mut rng)).unwrap();
        let path = dir.path().join("contacts.db");
        let contacts = ContactStore::open(&identity, &path).unwrap();
        Person { name: name.to_owned(), items, contacts, identity, secrets, path, peer: 0, _dir: dir }
    }

    /// The same person on a new device: a new secret store holding a copy
    /// of the identity item, and the same contact file.  The device key
    /// stays behind, so the new device reads no device secret.
    pub fn on_new_device(&self) -> Person {
        let items = Items::default();
        let copy = self.items.get(IDENTITY_ITEM).expect("the identity item");
        items.0.lock().unwrap().insert(IDENTITY_ITEM.to_owned(), copy);
        let secrets = SecretStore::from_backend(Box::new(items.clone())).unwrap();
        let identity = Identity::load(&secrets).unwrap();
        assert_eq!(identity.public_key().unwrap(), self.identity.public_key().unwrap());
        let contacts = ContactStore::open(&identity, &self.path).unwrap();
        Person {
            name: self.name.clone(),
            items,
            contacts,
            identity,
            secrets,
            path: self.path.clone(),
            peer: self.peer,
            _dir: self._dir.clone(),
        }
    }

    /// The stored contact of the other person.
    pub fn contact(&self) -> Contact {
        self.contacts.get(self.peer).unwrap()
    }

    pub fn public_key(&self) -> [u8; 32] {
        self.identity.public_key().unwrap()
    }
}

/// A whole QR exchange at EXCHANGED: each scans the other's code, the SAS
/// match, both confirm (or only save, leaving the contact unverified).
/// Each side draws from a random source named after its person, so the
/// seed and device secrets, and with them every code and two-digit tag a
/// test sees, are fixed: no assertion holds or fails by a 1-in-100 chance.
pub fn befriend(a: &mut Person, b: &mut Person, confirm: bool) {
    let mut ra = DeterministicRandom::new(&labelled_seed(&format!("qr {}", a.name))).unwrap();
    let mut rb = DeterministicRandom::new(&labelled_seed(&format!("qr {}", b.name))).unwrap();
    let mut xa = Exchange::qr(&a.identity, &a.contacts, EXCHANGED, Some(&mut ra)).unwrap();
    let mut xb = Exchange::qr(&b.identity, &b.contacts, EXCHANGED, Some(&mut rb)).unwrap();
    let (from_a, from_b) = (xa.next_outgoing().unwrap(), xb.next_outgoing().unwrap());
    xa.receive(&from_b, EXCHANGED).unwrap();
    xb.receive(&from_a, EXCHANGED).unwrap();
    assert_eq!(xa.sas().unwrap(), xb.sas().unwrap());
    if confirm {
        a.peer = xa.confirm(EXCHANGED).unwrap();
        b.peer = xb.confirm(EXCHANGED).unwrap();
    } else {
        a.peer = xa.save(EXCHANGED).unwrap();
        b.peer = xb.save(EXCHANGED).unwrap();
    }
}

/// Alice and Bob, verified contacts of each other.
pub fn befriended() -> (Person, Person) {
    let (mut alice, mut bob) = (Person::new("Alice", 1), Person::new("Bob", 2));
    befriend(&mut alice, &mut bob, true);
    (alice, bob)
}

/// A whole voice verification planned at `plan`: both start at the window,
/// each selector says their first word, each checks the code and tag the
/// other reads aloud.  Returns (a's outcome, b's outcome).
pub fn verify(a: &Person, b: &Person, plan: i64) -> (VoiceOutcome, VoiceOutcome) {
    let mut sa = VoiceSession::new(&a.contacts, a.peer, None, plan).unwrap();
    let mut sb = VoiceSession::new(&b.contacts, b.peer, None, plan).unwrap();
    assert_eq!(sa.window().unwrap(), sb.window().unwrap());
    let now = 30 * sa.window().unwrap();
    sa.start(now).unwrap();
    sb.start(now).unwrap();
    for _ in 0..2 {
        let (selector, listener) =
            if sa.turn().unwrap() == VoiceTurn::Mine { (&mut sa, &mut sb) } else { (&mut sb, &mut sa) };
        let word = u32::from(selector.words().unwrap()[0]);
        selector.select(word, now).unwrap();
        listener.select(word, now).unwrap();
    }
    let (a_code, a_tag) = sa.your_code().unwrap();
    let (b_code, b_tag) = sb.your_code().unwrap();
    (sa.check(&b_code, b_tag, now).unwrap(), sb.check(&a_code, a_tag, now).unwrap())
}

/// A random seed named by a label: the label's bytes, zero-padded.
pub fn labelled_seed(label: &str) -> [u8; 32] {
    assert!(label.len() <= 32, "{label:?} is too long for a seed");
    let mut seed = [0u8; 32];
    seed[..label.len()].copy_from_slice(label.as_bytes());
    seed
}
