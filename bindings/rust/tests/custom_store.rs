//! Secret stores implemented in Rust.

mod common;

use common::{assert_kind, T0};
use itsme::{Error, ErrorKind, Identity, SecretStore, SecretStoreBackend};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

type Items = Arc<Mutex<HashMap<String, Vec<u8>>>>;

/// How a [`MapBackend`] misbehaves.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Normal,
    Fail,
    Panic,
}

/// A store over a shared map, recording what the library asks of it.
struct MapBackend {
    items: Items,
    mode: Arc<Mutex<Mode>>,
    accessibility: Arc<Mutex<BTreeSet<u32>>>,
    names: Arc<Mutex<BTreeSet<String>>>,
    busy: Arc<AtomicBool>,
    overlaps: Arc<AtomicUsize>,
    dropped: Arc<AtomicBool>,
}

impl MapBackend {
    fn new(items: &Items) -> MapBackend {
        MapBackend {
            items: items.clone(),
            mode: Arc::new(Mutex::new(Mode::Normal)),
            accessibility: Arc::default(),
            names: Arc::default(),
            busy: Arc::default(),
            overlaps: Arc::default(),
            dropped: Arc::default(),
        }
    }

    /// Runs one callback, noting whether another one was running.
    fn enter<T>(&self, name: &str, body: impl FnOnce() -> itsme::Result<T>) -> itsme::Result<T> {
        self.names.lock().unwrap().insert(name.to_owned());
        if self.busy.swap(true, Ordering::SeqCst) {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        let mode = *self.mode.lock().unwrap();
        let result = match mode {
            Mode::Normal => body(),
            Mode::Fail => Err(Error::secret_store("the backend is switched to fail")),
            Mode::Panic => {
                self.busy.store(false, Ordering::SeqCst);
                panic!("backend panic (expected by the test)");
            }
        };
        self.busy.store(false, Ordering::SeqCst);
        result
    }
}

impl SecretStoreBackend for MapBackend {
    fn get(&mut self, name: &str) -> itsme::Result<Option<Vec<u8>>> {
        self.enter(name, || Ok(self.items.lock().unwrap().get(name).cloned()))
    }

    fn put(&mut self, name: &str, value: &[u8], accessibility: u32) -> itsme::Result<()> {
        self.enter(name, || {
            self.accessibility.lock().unwrap().insert(accessibility);
            self.items.lock().unwrap().insert(name.to_owned(), value.to_vec());
            Ok(())
        })
    }

    fn remove(&mut self, name: &str) -> itsme::Result<bool> {
        self.enter(name, || Ok(self.items.lock().unwrap().remove(name).is_some()))
    }
}

impl Drop for MapBackend {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

/// Item names are 1 to 128 characters from [a-z0-9._-], not starting with
/// a dot.
fn valid_item_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && !name.starts_with('.')
        && name.bytes().all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-'))
}

fn snapshot(items: &Items) -> HashMap<String, Vec<u8>> {
    items.lock().unwrap().clone()
}

#[test]
fn create_writes_items_and_a_second_store_loads_them() {
    let items = Items::default();
    let backend = MapBackend::new(&items);
    let accessibility = backend.accessibility.clone();
    let names = backend.names.clone();
    let store = SecretStore::from_backend(Box::new(backend)).unwrap();
    assert!(items.lock().unwrap().is_empty());
    let identity = Identity::create(&store, "Custom").unwrap();
    let fingerprint = identity.fingerprint().unwrap();
    let stored = snapshot(&items);
    assert!(!stored.is_empty(), "create stored nothing");
    for name in stored.keys().chain(names.lock().unwrap().iter()) {
        assert!(valid_item_name(name), "{name:?}");
    }
    assert_eq!(
        *accessibility.lock().unwrap(),
        BTreeSet::from([itsme::ACCESSIBLE_WHEN_UNLOCKED_THIS_DEVICE_ONLY])
    );

    identity.set_pin("123456").unwrap();
    assert!(snapshot(&items).len() >= stored.len());

    let second = SecretStore::from_backend(Box::new(MapBackend::new(&items))).unwrap();
    let loaded = Identity::load(&second).unwrap();
    assert_eq!(loaded.fingerprint().unwrap(), fingerprint);
    assert_eq!(loaded.public_key().unwrap(), identity.public_key().unwrap());
    assert_eq!(loaded.name().unwrap(), "Custom");
    assert!(loaded.pin_is_set().unwrap());
    loaded.verify_pin("123456", T0).unwrap();
    assert_kind(Identity::create(&second, "Again"), ErrorKind::AlreadyExists);
}

#[test]
fn load_from_an_empty_backend_is_not_found() {
    let store = SecretStore::from_backend(Box::new(MapBackend::new(&Items::default()))).unwrap();
    assert_kind(Identity::load(&store), ErrorKind::NotFound);
}

#[test]
fn backend_errors_are_secret_store_errors() {
    let items = Items::default();
    let backend = MapBackend::new(&items);
    let mode = backend.mode.clone();
    let store = SecretStore::from_backend(Box::new(backend)).unwrap();

    *mode.lock().unwrap() = Mode::Fail;
    assert_kind(Identity::create(&store, "Failing"), ErrorKind::SecretStore);
    assert_kind(Identity::load(&store), ErrorKind::SecretStore);

    *mode.lock().unwrap() = Mode::Normal;
    let identity = Identity::create(&store, "Working").unwrap();
    *mode.lock().unwrap() = Mode::Fail;
    assert_kind(identity.set_name("Renamed"), ErrorKind::SecretStore);
    assert_kind(identity.set_pin("123456"), ErrorKind::SecretStore);
    assert_kind(identity.pin_is_set(), ErrorKind::SecretStore);

    *mode.lock().unwrap() = Mode::Normal;
    assert_eq!(identity.name().unwrap(), "Working");
    assert!(!identity.pin_is_set().unwrap());
    identity.set_pin("123456").unwrap();
    *mode.lock().unwrap() = Mode::Fail;
    assert_kind(identity.verify_pin("123456", T0), ErrorKind::SecretStore);
    assert_kind(identity.pin_status(T0), ErrorKind::SecretStore);
    *mode.lock().unwrap() = Mode::Normal;
    identity.verify_pin("123456", T0).unwrap();
}

#[test]
fn a_wrong_pin_that_cannot_be_counted_is_not_checked() {
    // The count is saved before the PIN is checked: if saving fails, the
    // attempt fails with a store error rather than WrongPin or success.
    let items = Items::default();
    let backend = MapBackend::new(&items);
    let mode = backend.mode.clone();
    let store = SecretStore::from_backend(Box::new(backend)).unwrap();
    let identity = Identity::create(&store, "Counted").unwrap();
    identity.set_pin("123456").unwrap();
    *mode.lock().unwrap() = Mode::Fail;
    assert_kind(identity.verify_pin("000000", T0), ErrorKind::SecretStore);
    assert_kind(identity.verify_pin("123456", T0), ErrorKind::SecretStore);
}

#[test]
fn a_panicking_backend_gives_an_error() {
    let items = Items::default();
    let backend = MapBackend::new(&items);
    let mode = backend.mode.clone();
    let dropped = backend.dropped.clone();
    let store = SecretStore::from_backend(Box::new(backend)).unwrap();

    *mode.lock().unwrap() = Mode::Panic;
    assert_kind(Identity::create(&store, "Panicking"), ErrorKind::SecretStore);
    assert_kind(Identity::load(&store), ErrorKind::SecretStore);

    *mode.lock().unwrap() = Mode::Normal;
    let identity = Identity::create(&store, "Calm").unwrap();
    *mode.lock().unwrap() = Mode::Panic;
    assert_kind(identity.set_name("Renamed"), ErrorKind::SecretStore);
    *mode.lock().unwrap() = Mode::Normal;
    assert_eq!(Identity::load(&store).unwrap().name().unwrap(), "Calm");

    drop(identity);
    drop(store);
    assert!(dropped.load(Ordering::SeqCst));
}

/// A backend whose Drop panics: the panic must not reach the library.
struct PanicOnDrop;

impl SecretStoreBackend for PanicOnDrop {
    fn get(&mut self, _: &str) -> itsme::Result<Option<Vec<u8>>> {
        Ok(None)
    }
    fn put(&mut self, _: &str, _: &[u8], _: u32) -> itsme::Result<()> {
        Ok(())
    }
    fn remove(&mut self, _: &str) -> itsme::Result<bool> {
        Ok(false)
    }
}

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("backend drop panic (expected by the test)");
    }
}

#[test]
fn a_backend_panicking_in_drop_does_not_abort() {
    let store = SecretStore::from_backend(Box::new(PanicOnDrop)).unwrap();
    drop(store);
}

#[test]
fn tampered_items_are_corrupt_data() {
    type Tamper = fn(&mut Vec<u8>);
    let tamperings: [(&str, Tamper); 4] = [
        ("truncated to half", |v| v.truncate(v.len() / 2)),
        ("truncated to one byte", |v| v.truncate(1)),
        ("emptied", |v| v.clear()),
        ("overwritten with 0xff", |v| v.iter_mut().for_each(|b| *b = 0xff)),
    ];
    for (what, tamper) in tamperings {
        let items = Items::default();
        let store = SecretStore::from_backend(Box::new(MapBackend::new(&items))).unwrap();
        Identity::create(&store, "Tampered").unwrap();
        for value in items.lock().unwrap().values_mut() {
            tamper(value);
        }
        let result = Identity::load(&store);
        let error = result.as_ref().err();
        assert_eq!(
            error.map(Error::kind),
            Some(ErrorKind::CorruptData),
            "{what}: {:?}",
            result.map(|_| "loaded")
        );
    }
}

#[test]
fn tampered_pin_items_are_corrupt_data() {
    let items = Items::default();
    let store = SecretStore::from_backend(Box::new(MapBackend::new(&items))).unwrap();
    let identity = Identity::create(&store, "Pin").unwrap();
    let before: BTreeSet<String> = items.lock().unwrap().keys().cloned().collect();
    identity.set_pin("123456").unwrap();
    identity.verify_pin("000000", T0).unwrap_err();
    let mut tampered = 0;
    for (name, value) in items.lock().unwrap().iter_mut() {
        if !before.contains(name) {
            value.truncate(1);
            tampered += 1;
        }
    }
    assert!(tampered > 0, "setting a PIN stored no new item");
    assert_kind(identity.verify_pin("123456", T0), ErrorKind::CorruptData);
}

#[test]
fn the_backend_is_dropped_after_the_store_and_its_identities() {
    let items = Items::default();
    let backend = MapBackend::new(&items);
    let dropped = backend.dropped.clone();
    let token = Arc::new(());
    struct Holder(#[allow(dead_code)] Arc<()>, MapBackend);
    impl SecretStoreBackend for Holder {
        fn get(&mut self, name: &str) -> itsme::Result<Option<Vec<u8>>> {
            self.1.get(name)
        }
        fn put(&mut self, name: &str, value: &[u8], a: u32) -> itsme::Result<()> {
            self.1.put(name, value, a)
        }
        fn remove(&mut self, name: &str) -> itsme::Result<bool> {
            self.1.remove(name)
        }
    }
    let store = SecretStore::from_backend(Box::new(Holder(token.clone(), backend))).unwrap();
    assert_eq!(Arc::strong_count(&token), 2);
    let identity = Identity::create(&store, "Owner").unwrap();
    let loaded = Identity::load(&store).unwrap();
    drop(store);
    assert!(!dropped.load(Ordering::SeqCst), "dropped while identities use it");
    identity.set_name("Still alive").unwrap();
    drop(identity);
    assert!(!dropped.load(Ordering::SeqCst), "dropped while an identity uses it");
    loaded.set_pin("123456").unwrap();
    loaded.verify_pin("123456", T0).unwrap();
    drop(loaded);
    assert!(dropped.load(Ordering::SeqCst), "never dropped");
    assert_eq!(Arc::strong_count(&token), 1);
    // The items outlive the backend.
    assert!(!items.lock().unwrap().is_empty());
}

#[test]
fn callbacks_are_never_concurrent() {
    let items = Items::default();
    let backend = MapBackend::new(&items);
    let overlaps = backend.overlaps.clone();
    let store = SecretStore::from_backend(Box::new(backend)).unwrap();
    let identity = Identity::create(&store, "Busy").unwrap();
    identity.set_pin("123456").unwrap();
    std::thread::scope(|scope| {
        for i in 0..6 {
            let store = &store;
            scope.spawn(move || {
                let own = Identity::load(store).unwrap();
                for j in 0..5 {
                    own.set_name(&format!("T{i}-{j}")).unwrap();
                    own.name().unwrap();
                    own.pin_status(T0).unwrap();
                }
                own.verify_pin("123456", T0).unwrap();
            });
        }
    });
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "callbacks of one store ran concurrently");
}

#[test]
fn large_values_go_through_the_buffer_protocol() {
    // A backend that stores each value behind 64 KiB of padding, so the
    // library's first buffer is too small for every get.
    struct Padded(Items);
    const PAD: usize = 64 * 1024;
    impl SecretStoreBackend for Padded {
        fn get(&mut self, name: &str) -> itsme::Result<Option<Vec<u8>>> {
            Ok(self.0.lock().unwrap().get(name).map(|v| {
                let mut out = vec![0u8; PAD];
                out.extend_from_slice(v);
                out
            }))
        }
        fn put(&mut self, name: &str, value: &[u8], _: u32) -> itsme::Result<()> {
            self.0.lock().unwrap().insert(name.to_owned(), value.to_vec());
            Ok(())
        }
        fn remove(&mut self, name: &str) -> itsme::Result<bool> {
            Ok(self.0.lock().unwrap().remove(name).is_some())
        }
    }
    let items = Items::default();
    let store = SecretStore::from_backend(Box::new(Padded(items.clone()))).unwrap();
    Identity::create(&store, "Padded").unwrap();
    // The library must ask again with a larger buffer and then reject the
    // padded record as corrupt (it is not a valid record), not fail with
    // a buffer error.
    let error = Identity::load(&store).unwrap_err();
    assert_ne!(error.kind(), ErrorKind::BufferTooSmall, "{error}");
    assert_eq!(error.kind(), ErrorKind::CorruptData, "{error}");
}
