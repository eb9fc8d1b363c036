//! Misuse of the raw C interface: NULL pointers, short buffers, calls
//! before initialisation.  Every case must give a result code, never a
//! crash, and failed calls must leave their outputs untouched.

mod common;

use itsme::sys::*;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};

const T0: i64 = 1_800_000_000;
/// The latest time the header allows: the end of the year 9999.
const MAX_TIME: i64 = 253_402_300_799;

fn cstr(text: &str) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    bytes.push(0);
    bytes
}

fn ptr(bytes: &[u8]) -> *const c_char {
    bytes.as_ptr().cast()
}

/// A sentinel for output handles: any failed call must leave it in place.
fn sentinel<T>() -> *mut T {
    0x10 as *mut T
}

fn init() {
    assert_eq!(unsafe { itsme_init() }, ITSME_OK);
}

/// A memory store and an identity on it, with PIN 123456.
struct Fixture {
    store: *mut itsme_secret_store,
    identity: *mut itsme_identity,
}

impl Fixture {
    fn new() -> Fixture {
        init();
        let mut store = null_mut();
        let mut identity = null_mut();
        let name = cstr("Misuse");
        let pin = cstr("123456");
        unsafe {
            assert_eq!(itsme_secret_store_new_memory(&mut store), ITSME_OK);
            assert_eq!(itsme_identity_create(store, ptr(&name), &mut identity), ITSME_OK);
            assert_eq!(itsme_pin_set(identity, ptr(&pin)), ITSME_OK);
        }
        assert!(!store.is_null() && !identity.is_null());
        Fixture { store, identity }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        unsafe {
            itsme_identity_free(self.identity);
            itsme_secret_store_free(self.store);
        }
    }
}

static DESTROYED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn cb_get(_: *mut c_void, _: *const c_char, _: *mut u8, _: usize, _: *mut usize) -> itsme_result {
    ITSME_E_NOT_FOUND
}
unsafe extern "C" fn cb_put(_: *mut c_void, _: *const c_char, _: *const u8, _: usize, _: itsme_accessibility) -> itsme_result {
    ITSME_OK
}
unsafe extern "C" fn cb_remove(_: *mut c_void, _: *const c_char) -> itsme_result {
    ITSME_E_NOT_FOUND
}
unsafe extern "C" fn cb_destroy(_: *mut c_void) {
    DESTROYED.fetch_add(1, Ordering::SeqCst);
}

fn callbacks() -> itsme_secret_store_callbacks {
    itsme_secret_store_callbacks {
        ctx: null_mut(),
        get: Some(cb_get),
        put: Some(cb_put),
        remove: Some(cb_remove),
        destroy: Some(cb_destroy),
    }
}

/// Runs in a child process of this test binary, where nothing has called
/// itsme_init yet.
fn before_init_checks() {
    unsafe {
        // These need no initialisation.
        assert_eq!(CStr::from_ptr(itsme_version_string()).to_str().unwrap(), ITSME_VERSION_STRING);
        assert_eq!(itsme_version_number(), ITSME_VERSION_NUMBER);
        assert_eq!(itsme_public_key_bytes(), ITSME_PUBLIC_KEY_BYTES);
        assert_eq!(itsme_fingerprint_size(), ITSME_FINGERPRINT_SIZE);
        assert_eq!(itsme_name_max_bytes(), ITSME_NAME_MAX_BYTES);
        assert!(!CStr::from_ptr(itsme_result_message(ITSME_E_NOT_INITIALIZED)).to_bytes().is_empty());

        // Every other fallible function refuses.
        let mut store = sentinel();
        assert_eq!(itsme_secret_store_new_memory(&mut store), ITSME_E_NOT_INITIALIZED);
        assert_eq!(store, sentinel());
        let dir = cstr(&std::env::temp_dir().to_string_lossy());
        assert_eq!(itsme_secret_store_open_file(ptr(&dir), &mut store), ITSME_E_NOT_INITIALIZED);
        assert_eq!(store, sentinel());
        let table = callbacks();
        assert_eq!(itsme_secret_store_new_callbacks(&table, &mut store), ITSME_E_NOT_INITIALIZED);
        assert_eq!(store, sentinel());
        assert_eq!(DESTROYED.load(Ordering::SeqCst), 0, "destroy called for a store never made");

        let key = [0u8; 32];
        let mut out = [0xAAu8; 17];
        let mut len = 12345usize;
        assert_eq!(
            itsme_fingerprint_from_public_key(key.as_ptr(), 32, out.as_mut_ptr().cast(), 17, &mut len),
            ITSME_E_NOT_INITIALIZED
        );
        assert_eq!((out, len), ([0xAA; 17], 12345));

        // The contact store too; releasing NULL and reading a last error
        // need no initialisation.
        let path = cstr(&std::env::temp_dir().join("itsme-never-created.db").to_string_lossy());
        let mut contacts = sentinel();
        assert_ne!(itsme_store_open(null_mut(), ptr(&path), &mut contacts), ITSME_OK);
        assert_eq!(contacts, sentinel());
        itsme_store_free(null_mut());
        itsme_contact_free(null_mut());
        itsme_contact_list_free(null_mut());
        let mut len = 12345usize;
        assert_eq!(itsme_store_last_error(null(), out.as_mut_ptr().cast(), 17, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(len, 12345);

        // Randomness, short codes, exchanges and derivations too.
        let seed = [1u8; 32];
        let mut rng = sentinel();
        assert_eq!(itsme_random_new_deterministic(seed.as_ptr(), 32, &mut rng), ITSME_E_NOT_INITIALIZED);
        assert_eq!(rng, sentinel());
        itsme_random_free(null_mut());
        itsme_exchange_free(null_mut());
        let code = cstr("ECHO 0042");
        let mut value = 42u32;
        assert_eq!(itsme_short_code_parse(ptr(&code), &mut value), ITSME_E_NOT_INITIALIZED);
        assert_eq!(value, 42);
        assert_eq!(itsme_short_code_format(1, out.as_mut_ptr().cast(), 17, &mut len), ITSME_E_NOT_INITIALIZED);
        let fp = cstr("0123456789ABCDEF");
        assert_eq!(
            itsme_derive_seed(seed.as_ptr(), 32, key.as_ptr(), 32, ptr(&fp), ptr(&fp), out.as_mut_ptr(), 17, &mut len),
            ITSME_E_NOT_INITIALIZED
        );
        assert_eq!(itsme_derive_sas(seed.as_ptr(), 32, key.as_ptr(), 32, out.as_mut_ptr().cast(), 17, &mut len), ITSME_E_NOT_INITIALIZED);
        assert_eq!((out, len), ([0xAA; 17], 12345));
        let mut exchange = sentinel();
        assert_ne!(itsme_exchange_new_qr(null_mut(), null_mut(), T0, &mut exchange), ITSME_OK);
        assert_eq!(exchange, sentinel());
        assert_ne!(itsme_exchange_new_invite(null_mut(), 0, null_mut(), T0, &mut exchange), ITSME_OK);
        assert_eq!(exchange, sentinel());
        let remote_code = cstr("K7X2-M9PM");
        assert_eq!(itsme_remote_code_check(ptr(&remote_code), out.as_mut_ptr().cast(), 17, &mut len), ITSME_E_NOT_INITIALIZED);
        assert_eq!((out, len), ([0xAA; 17], 12345));
        let mut len = 12345usize;
        assert_eq!(itsme_exchange_last_error(null(), out.as_mut_ptr().cast(), 17, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(len, 12345);

        // Voice verification: the NATO words need no initialisation.
        assert_eq!(CStr::from_ptr(itsme_nato_word(0)).to_str().unwrap(), "ALFA");
        let mut voice = sentinel();
        assert_eq!(itsme_voice_new(null_mut(), 1, T0, &mut voice), ITSME_E_NOT_INITIALIZED);
        assert_eq!(voice, sentinel());
        itsme_voice_free(null_mut());
        assert_eq!(itsme_derive_session_id(seed.as_ptr(), 32, 1, out.as_mut_ptr().cast(), 17, &mut len), ITSME_E_NOT_INITIALIZED);
        assert_eq!((out, len), ([0xAA; 17], 12345));

        // The degradation code, Online Verify and PIN Update too.
        assert_eq!(
            itsme_derive_degradation_code(seed.as_ptr(), 32, key.as_ptr(), 32, seed.as_ptr(), 10, out.as_mut_ptr().cast(), 17, &mut len),
            ITSME_E_NOT_INITIALIZED
        );
        assert_eq!((out, len), ([0xAA; 17], 12345));
        let mut session = sentinel();
        assert_eq!(itsme_online_verify_new(null_mut(), 1, T0 / 30, null_mut(), T0, &mut session), ITSME_E_NOT_INITIALIZED);
        assert_eq!(session, sentinel());
        let mut update = sentinel();
        assert_eq!(itsme_pin_update_new(null_mut(), 1, T0 / 30, null_mut(), T0, &mut update), ITSME_E_NOT_INITIALIZED);
        assert_eq!(update, sentinel());
        itsme_online_verify_free(null_mut());
        itsme_pin_update_free(null_mut());

        // Profile records.
        let mut profile = sentinel();
        let reference = [1u8; 32];
        let record = [1u8; 200];
        assert_eq!(
            itsme_profile_open(record.as_ptr(), 200, reference.as_ptr(), 32, key.as_ptr(), 32, &mut profile),
            ITSME_E_NOT_INITIALIZED
        );
        let name = cstr("Alice");
        assert_ne!(itsme_profile_create(null(), ptr(&name), null(), 0, null(), null_mut(), &mut profile), ITSME_OK);
        assert_eq!(profile, sentinel());
        itsme_profile_free(null_mut());

        // Service approvals.
        let service = cstr("bank.example");
        let label = cstr("Phone");
        let mut info = itsme_credential_info::default();
        info.label[0] = 0x55;
        assert_eq!(itsme_enrollment_verify(ptr(&service), seed.as_ptr(), 16, record.as_ptr(), 111, &mut info), ITSME_E_NOT_INITIALIZED);
        assert_eq!(info.label[0], 0x55, "written on failure");
        let mut big = [0xAAu8; 64];
        let mut big_len = 12345usize;
        assert_eq!(
            itsme_approval_request_create(ptr(&service), ptr(&label), ptr(&label), null(), 60, null_mut(), T0, big.as_mut_ptr(), 64, &mut big_len),
            ITSME_E_NOT_INITIALIZED
        );
        assert_eq!((big, big_len), ([0xAA; 64], 12345));
        assert_ne!(
            itsme_credential_enroll(null_mut(), ptr(&service), ptr(&label), seed.as_ptr(), 16, null_mut(), big.as_mut_ptr(), 64, &mut big_len),
            ITSME_OK
        );
        let mut replay = sentinel();
        assert_eq!(itsme_replay_store_new_memory(0, &mut replay), ITSME_E_NOT_INITIALIZED);
        assert_eq!(replay, sentinel());
        let table = itsme_replay_store_callbacks { ctx: null_mut(), insert: Some(replay_seen_never), destroy: Some(replay_destroy) };
        let destroyed = REPLAY_DESTROYED.load(Ordering::SeqCst);
        assert_eq!(itsme_replay_store_new_callbacks(&table, &mut replay), ITSME_E_NOT_INITIALIZED);
        assert_eq!(replay, sentinel());
        assert_eq!(REPLAY_DESTROYED.load(Ordering::SeqCst), destroyed, "destroy called for a store never made");
        let mut result = itsme_approval_result { decision: 42, ..Default::default() };
        assert_ne!(
            itsme_approval_verify(record.as_ptr(), 100, record.as_ptr(), 100, key.as_ptr(), 1, null_mut(), T0, &mut result),
            ITSME_OK
        );
        assert_eq!(result.decision, 42, "written on failure");
        itsme_replay_store_free(null_mut());
    }

    // And the safe binding initialises by itself.
    let store = itsme::SecretStore::memory().unwrap();
    itsme::Identity::create(&store, "Late").unwrap();
}

#[test]
fn before_init() {
    if std::env::var_os("ITSME_MISUSE_CHILD").is_some() {
        before_init_checks();
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["before_init", "--exact", "--test-threads=1", "--nocapture"])
        .env("ITSME_MISUSE_CHILD", "1")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "child failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 passed"), "the child ran no test");
}

#[test]
fn result_messages() {
    unsafe {
        for code in [-1, ITSME_E_ROLLED_BACK + 1, 100, i32::MAX, i32::MIN] {
            assert_eq!(CStr::from_ptr(itsme_result_message(code)).to_str().unwrap(), "unknown result code");
        }
        let mut seen = std::collections::BTreeSet::new();
        for code in ITSME_OK..=ITSME_E_ROLLED_BACK {
            let text = CStr::from_ptr(itsme_result_message(code)).to_str().unwrap();
            assert!(!text.is_empty() && text != "unknown result code", "code {code}: {text:?}");
            assert!(seen.insert(text), "code {code} shares its message {text:?}");
        }
    }
    assert_eq!(itsme::result_message(999), "unknown result code");
}

#[test]
fn free_accepts_null() {
    unsafe {
        itsme_secret_store_free(null_mut());
        itsme_identity_free(null_mut());
    }
}

#[test]
fn init_is_idempotent() {
    for _ in 0..3 {
        init();
    }
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(init);
        }
    });
}

#[test]
fn last_error_arguments() {
    init();
    let mut buf = [0xAAu8; 64];
    let mut len = 777usize;
    unsafe {
        assert_eq!(itsme_last_error(null_mut(), 64, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_last_error(buf.as_mut_ptr().cast(), 64, null_mut()), ITSME_E_INVALID_ARGUMENT);

        // Make a constructor fail so the slot holds a detail.
        let mut store = sentinel();
        assert_eq!(itsme_secret_store_open_file(null(), &mut store), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(store, sentinel());
        assert_eq!(itsme_last_error(buf.as_mut_ptr().cast(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert!(len >= 1, "needed size {len} does not count the NUL");
        let needed = len;
        assert_eq!(buf, [0xAA; 64], "written on failure");
        if needed > 1 {
            assert_eq!(
                itsme_last_error(buf.as_mut_ptr().cast(), needed - 1, &mut len),
                ITSME_E_BUFFER_TOO_SMALL
            );
            assert_eq!(len, needed);
        }
        let mut big = vec![0xAAu8; needed];
        assert_eq!(itsme_last_error(big.as_mut_ptr().cast(), needed, &mut len), ITSME_OK);
        assert_eq!(len, needed);
        assert_eq!(big[needed - 1], 0);
        assert!(!big[..needed - 1].contains(&0));
        std::str::from_utf8(&big[..needed - 1]).unwrap();
    }
}

#[test]
fn fingerprint_from_public_key_arguments() {
    init();
    let key = [7u8; 32];
    let mut out = [0xAAu8; 32];
    let mut len = 777usize;
    unsafe {
        let o: *mut c_char = out.as_mut_ptr().cast();
        assert_eq!(itsme_fingerprint_from_public_key(null(), 32, o, 32, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_fingerprint_from_public_key(key.as_ptr(), 31, o, 32, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_fingerprint_from_public_key(key.as_ptr(), 33, o, 32, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_fingerprint_from_public_key(key.as_ptr(), 0, o, 32, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(
            itsme_fingerprint_from_public_key(key.as_ptr(), 32, null_mut(), 32, &mut len),
            ITSME_E_INVALID_ARGUMENT
        );
        assert_eq!(
            itsme_fingerprint_from_public_key(key.as_ptr(), 32, o, 32, null_mut()),
            ITSME_E_INVALID_ARGUMENT
        );
        for cap in [0usize, 1, 16] {
            assert_eq!(
                itsme_fingerprint_from_public_key(key.as_ptr(), 32, o, cap, &mut len),
                ITSME_E_BUFFER_TOO_SMALL,
                "cap {cap}"
            );
            assert_eq!(len, ITSME_FINGERPRINT_SIZE, "cap {cap}");
            len = 777;
        }
        assert_eq!(out, [0xAA; 32], "written on failure");
        assert_eq!(itsme_fingerprint_from_public_key(key.as_ptr(), 32, o, 17, &mut len), ITSME_OK);
        assert_eq!(len, 17);
        assert_eq!(out[16], 0);
        assert!(out[..16].iter().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(b)));
    }
}

#[test]
fn store_constructor_arguments() {
    init();
    let before = DESTROYED.load(Ordering::SeqCst);
    unsafe {
        assert_eq!(itsme_secret_store_new_memory(null_mut()), ITSME_E_INVALID_ARGUMENT);

        let mut store = sentinel();
        let table = callbacks();
        assert_eq!(itsme_secret_store_new_callbacks(null(), &mut store), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_secret_store_new_callbacks(&table, null_mut()), ITSME_E_INVALID_ARGUMENT);
        for missing in 0..3 {
            let mut table = callbacks();
            match missing {
                0 => table.get = None,
                1 => table.put = None,
                _ => table.remove = None,
            }
            assert_eq!(itsme_secret_store_new_callbacks(&table, &mut store), ITSME_E_INVALID_ARGUMENT);
        }
        assert_eq!(store, sentinel());
        assert_eq!(DESTROYED.load(Ordering::SeqCst), before, "destroy called although the caller keeps ctx");

        // A table without destroy is fine.
        let mut table = callbacks();
        table.destroy = None;
        let mut ok = null_mut();
        assert_eq!(itsme_secret_store_new_callbacks(&table, &mut ok), ITSME_OK);
        itsme_secret_store_free(ok);

        let dir = cstr(&std::env::temp_dir().to_string_lossy());
        assert_eq!(itsme_secret_store_open_file(null(), &mut store), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_secret_store_open_file(ptr(&dir), null_mut()), ITSME_E_INVALID_ARGUMENT);
        let bad_utf8 = b"/tmp/\xff\xfe\0";
        assert_eq!(itsme_secret_store_open_file(ptr(bad_utf8), &mut store), ITSME_E_INVALID_ARGUMENT);
        let empty = cstr("");
        let rc = itsme_secret_store_open_file(ptr(&empty), &mut store);
        assert_ne!(rc, ITSME_OK, "an empty directory path was accepted");
        assert_eq!(store, sentinel());
    }
}

#[test]
fn callbacks_store_destroys_ctx_once() {
    init();
    static OWN: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn destroy(ctx: *mut c_void) {
        assert_eq!(ctx as usize, 0x1234);
        OWN.fetch_add(1, Ordering::SeqCst);
    }
    let mut table = callbacks();
    table.ctx = 0x1234 as *mut c_void;
    table.destroy = Some(destroy);
    unsafe {
        let mut store = null_mut();
        assert_eq!(itsme_secret_store_new_callbacks(&table, &mut store), ITSME_OK);
        // The table was copied: changing ours changes nothing.
        std::ptr::write_volatile(&mut table.get, None);
        let mut identity = sentinel();
        assert_eq!(itsme_identity_load(store, &mut identity), ITSME_E_NOT_FOUND);
        assert_eq!(identity, sentinel());
        itsme_secret_store_free(store);
    }
    assert_eq!(OWN.load(Ordering::SeqCst), 1);
}

#[test]
fn store_last_error_arguments() {
    let f = Fixture::new();
    let mut buf = [0xAAu8; 64];
    let mut len = 777usize;
    unsafe {
        let b: *mut c_char = buf.as_mut_ptr().cast();
        assert_eq!(itsme_secret_store_last_error(null(), b, 64, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_secret_store_last_error(f.store, null_mut(), 64, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_secret_store_last_error(f.store, b, 64, null_mut()), ITSME_E_INVALID_ARGUMENT);
        // A failure on the store leaves a detail.
        let mut identity = sentinel();
        let name = cstr("Second");
        assert_eq!(itsme_identity_create(f.store, ptr(&name), &mut identity), ITSME_E_ALREADY_EXISTS);
        assert_eq!(identity, sentinel());
        assert_eq!(itsme_secret_store_last_error(f.store, b, 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        let needed = len;
        assert!(needed >= 1);
        assert_eq!(buf, [0xAA; 64]);
        let mut big = vec![0xAAu8; needed];
        assert_eq!(itsme_secret_store_last_error(f.store, big.as_mut_ptr().cast(), needed, &mut len), ITSME_OK);
        assert_eq!((len, big[needed - 1]), (needed, 0));
    }
}

#[test]
fn identity_constructor_arguments() {
    let f = Fixture::new();
    let name = cstr("Name");
    unsafe {
        let mut out = sentinel();
        assert_eq!(itsme_identity_create(null_mut(), ptr(&name), &mut out), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_identity_create(f.store, null(), &mut out), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_identity_create(f.store, ptr(&name), null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_identity_load(null_mut(), &mut out), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_identity_load(f.store, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(out, sentinel());

        // Name checks on an empty store: argument errors come first.
        let mut empty = null_mut();
        assert_eq!(itsme_secret_store_new_memory(&mut empty), ITSME_OK);
        for bad in [&b"\0"[..], b"bad\xff\0", b"line\nbreak\0"] {
            assert_eq!(itsme_identity_create(empty, ptr(bad), &mut out), ITSME_E_INVALID_ARGUMENT, "{bad:?}");
        }
        let long = cstr(&"x".repeat(ITSME_NAME_MAX_BYTES + 1));
        assert_eq!(itsme_identity_create(empty, ptr(&long), &mut out), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(out, sentinel());
        assert_eq!(itsme_identity_load(empty, &mut out), ITSME_E_NOT_FOUND);
        assert_eq!(out, sentinel());
        itsme_secret_store_free(empty);
    }
}

#[test]
fn identity_output_arguments() {
    let f = Fixture::new();
    let id = f.identity;
    let mut buf = [0xAAu8; 256];
    let mut len = 777usize;
    unsafe {
        let b: *mut c_char = buf.as_mut_ptr().cast();
        type Getter = unsafe extern "C" fn(*const itsme_identity, *mut c_char, usize, *mut usize) -> itsme_result;
        let text_getters: [(&str, Getter, usize); 3] = [
            ("last_error", itsme_identity_last_error, 0),
            ("fingerprint", itsme_identity_fingerprint, ITSME_FINGERPRINT_SIZE),
            ("name", itsme_identity_name, "Misuse".len() + 1),
        ];
        for (what, getter, size) in text_getters {
            assert_eq!(getter(null(), b, 256, &mut len), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(getter(id, null_mut(), 256, &mut len), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(getter(id, b, 256, null_mut()), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(getter(id, b, 0, &mut len), ITSME_E_BUFFER_TOO_SMALL, "{what}");
            let needed = len;
            if size > 0 {
                assert_eq!(needed, size, "{what}: needed size");
            }
            assert!(needed >= 1, "{what}");
            if needed > 1 {
                assert_eq!(getter(id, b, needed - 1, &mut len), ITSME_E_BUFFER_TOO_SMALL, "{what}");
                assert_eq!(len, needed, "{what}");
            }
            assert_eq!(buf, [0xAA; 256], "{what}: written on failure");
            assert_eq!(getter(id, b, needed, &mut len), ITSME_OK, "{what}");
            assert_eq!((len, buf[needed - 1]), (needed, 0), "{what}");
            buf = [0xAA; 256];
            len = 777;
        }

        let k: *mut u8 = buf.as_mut_ptr();
        assert_eq!(itsme_identity_public_key(null(), k, 32, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_identity_public_key(id, null_mut(), 32, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_identity_public_key(id, k, 32, null_mut()), ITSME_E_INVALID_ARGUMENT);
        for cap in [0usize, 1, 31] {
            assert_eq!(itsme_identity_public_key(id, k, cap, &mut len), ITSME_E_BUFFER_TOO_SMALL, "cap {cap}");
            assert_eq!(len, ITSME_PUBLIC_KEY_BYTES);
            len = 777;
        }
        assert_eq!(buf, [0xAA; 256]);
        assert_eq!(itsme_identity_public_key(id, k, 256, &mut len), ITSME_OK);
        assert_eq!(len, 32);
        assert_eq!(buf[32..], [0xAA; 224], "written past *out_len");
    }
}

#[test]
fn identity_input_arguments() {
    let f = Fixture::new();
    let id = f.identity;
    let name = cstr("New name");
    let pin = cstr("123456");
    let new_pin = cstr("654321");
    unsafe {
        assert_eq!(itsme_identity_set_name(null_mut(), ptr(&name)), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_identity_set_name(id, null()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_identity_set_name(id, ptr(b"\xc3\0")), ITSME_E_INVALID_ARGUMENT);

        let mut is_set: c_int = 42;
        assert_eq!(itsme_pin_is_set(null_mut(), &mut is_set), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_pin_is_set(id, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(is_set, 42);
        assert_eq!(itsme_pin_is_set(id, &mut is_set), ITSME_OK);
        assert_eq!(is_set, 1);

        assert_eq!(itsme_pin_set(null_mut(), ptr(&pin)), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_pin_set(id, null()), ITSME_E_INVALID_ARGUMENT);

        assert_eq!(itsme_pin_verify(null_mut(), ptr(&pin), T0), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_pin_verify(id, null(), T0), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_pin_verify(id, ptr(&pin), -1), ITSME_E_INVALID_ARGUMENT);

        assert_eq!(itsme_pin_change(null_mut(), ptr(&pin), ptr(&new_pin), T0), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_pin_change(id, null(), ptr(&new_pin), T0), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_pin_change(id, ptr(&pin), null(), T0), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_pin_change(id, ptr(&pin), ptr(&new_pin), -1), ITSME_E_INVALID_ARGUMENT);

        let mut failures = 42u32;
        let mut wait = 42u64;
        assert_eq!(itsme_pin_status(null_mut(), T0, &mut failures, &mut wait), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_pin_status(id, T0, null_mut(), &mut wait), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_pin_status(id, T0, &mut failures, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_pin_status(id, -1, &mut failures, &mut wait), ITSME_E_INVALID_ARGUMENT);
        assert_eq!((failures, wait), (42, 42));

        // None of that counted as an attempt or changed anything.
        assert_eq!(itsme_pin_status(id, T0, &mut failures, &mut wait), ITSME_OK);
        assert_eq!((failures, wait), (0, 0));
        assert_eq!(itsme_pin_verify(id, ptr(&pin), T0), ITSME_OK);
        let mut out = [0u8; 64];
        let mut len = 0usize;
        assert_eq!(itsme_identity_name(id, out.as_mut_ptr().cast(), 64, &mut len), ITSME_OK);
        assert_eq!(&out[..len], b"Misuse\0");
    }
}

#[test]
fn a_lying_get_callback_is_a_store_error() {
    init();
    // Reports more bytes than the buffer holds, with ITSME_OK.
    unsafe extern "C" fn lying_get(_: *mut c_void, _: *const c_char, _: *mut u8, cap: usize, out_len: *mut usize) -> itsme_result {
        *out_len = cap + 1;
        ITSME_OK
    }
    // Keeps asking for more.
    unsafe extern "C" fn greedy_get(_: *mut c_void, _: *const c_char, _: *mut u8, cap: usize, out_len: *mut usize) -> itsme_result {
        *out_len = cap + 1;
        ITSME_E_BUFFER_TOO_SMALL
    }
    // Asks for a smaller buffer than it was given.
    unsafe extern "C" fn shrinking_get(_: *mut c_void, _: *const c_char, _: *mut u8, _: usize, out_len: *mut usize) -> itsme_result {
        *out_len = 0;
        ITSME_E_BUFFER_TOO_SMALL
    }
    for get in [lying_get as unsafe extern "C" fn(_, _, _, _, _) -> _, greedy_get, shrinking_get] {
        let mut table = callbacks();
        table.get = Some(get);
        table.destroy = None;
        unsafe {
            let mut store = null_mut();
            assert_eq!(itsme_secret_store_new_callbacks(&table, &mut store), ITSME_OK);
            let mut identity = sentinel();
            assert_eq!(itsme_identity_load(store, &mut identity), ITSME_E_SECRET_STORE);
            assert_eq!(identity, sentinel());
            itsme_secret_store_free(store);
        }
    }
}

/// The header: "On failure nothing is written to any output argument,
/// except *out_len on ITSME_E_BUFFER_TOO_SMALL".  Every (out, cap, out_len)
/// function, refused with ITSME_E_INVALID_ARGUMENT, must leave *out_len
/// alone, including when the refused pointer is `out` itself.
#[test]
fn invalid_arguments_leave_out_len_alone() {
    let f = Fixture::new();
    let id = f.identity;
    let key = [7u8; 32];
    let mut buf = [0u8; 256];
    let b: *mut c_char = buf.as_mut_ptr().cast();
    let mut failures = Vec::new();
    let mut check = |call: &str, run: &dyn Fn(*mut usize) -> itsme_result| {
        let mut len = 777usize;
        let rc = run(&mut len);
        if rc != ITSME_E_INVALID_ARGUMENT {
            failures.push(format!("{call}: returned {rc}, expected ITSME_E_INVALID_ARGUMENT"));
        } else if len != 777 {
            failures.push(format!("{call}: returned ITSME_E_INVALID_ARGUMENT but set *out_len to {len}"));
        }
    };
    unsafe {
        check("itsme_last_error(NULL, 256, &len)", &|l| itsme_last_error(null_mut(), 256, l));
        check("itsme_fingerprint_from_public_key(NULL, 32, buf, 256, &len)", &|l| {
            itsme_fingerprint_from_public_key(null(), 32, b, 256, l)
        });
        check("itsme_fingerprint_from_public_key(key, 31, buf, 256, &len)", &|l| {
            itsme_fingerprint_from_public_key(key.as_ptr(), 31, b, 256, l)
        });
        check("itsme_fingerprint_from_public_key(key, 32, NULL, 256, &len)", &|l| {
            itsme_fingerprint_from_public_key(key.as_ptr(), 32, null_mut(), 256, l)
        });
        check("itsme_secret_store_last_error(NULL, buf, 256, &len)", &|l| {
            itsme_secret_store_last_error(null(), b, 256, l)
        });
        check("itsme_secret_store_last_error(store, NULL, 256, &len)", &|l| {
            itsme_secret_store_last_error(f.store, null_mut(), 256, l)
        });
        check("itsme_identity_last_error(NULL, buf, 256, &len)", &|l| itsme_identity_last_error(null(), b, 256, l));
        check("itsme_identity_last_error(identity, NULL, 256, &len)", &|l| {
            itsme_identity_last_error(id, null_mut(), 256, l)
        });
        check("itsme_identity_fingerprint(NULL, buf, 256, &len)", &|l| itsme_identity_fingerprint(null(), b, 256, l));
        check("itsme_identity_fingerprint(identity, NULL, 256, &len)", &|l| {
            itsme_identity_fingerprint(id, null_mut(), 256, l)
        });
        check("itsme_identity_name(NULL, buf, 256, &len)", &|l| itsme_identity_name(null(), b, 256, l));
        check("itsme_identity_name(identity, NULL, 256, &len)", &|l| itsme_identity_name(id, null_mut(), 256, l));
        check("itsme_identity_public_key(NULL, buf, 256, &len)", &|l| {
            itsme_identity_public_key(null(), b.cast(), 256, l)
        });
        check("itsme_identity_public_key(identity, NULL, 256, &len)", &|l| {
            itsme_identity_public_key(id, null_mut(), 256, l)
        });
    }
    assert!(failures.is_empty(), "{} disagreements with itsme.h:\n{}", failures.len(), failures.join("\n"));
}

// ---------------------------------------------------------------------------
// Contact store
// ---------------------------------------------------------------------------

const CONTACT_KEY: [u8; 32] = [0x42; 32];
const OTHER_KEY: [u8; 32] = [0x43; 32];
const SEED: [u8; 32] = [7; 32];
const V5_FINGERPRINT: &str = "0123456789ABCDEF";

/// A Fixture with a contact store in a temporary directory holding one
/// keyed contact ("Carol", with a note) and one unauthenticated one.
struct Contacts {
    f: Fixture,
    dir: common::TempDir,
    store: *mut itsme_store,
    keyed: i64,
    v5: i64,
}

impl Contacts {
    fn new(tag: &str) -> Contacts {
        let f = Fixture::new();
        let dir = common::TempDir::new(tag);
        let path = cstr(dir.path().join("contacts.db").to_str().unwrap());
        let mut store = null_mut();
        let (mut keyed, mut v5) = (0i64, 0i64);
        let (name, old, fp, note) = (cstr("Carol"), cstr("Old"), cstr(V5_FINGERPRINT), cstr("met at the bakery"));
        unsafe {
            assert_eq!(itsme_store_open(f.identity, ptr(&path), &mut store), ITSME_OK);
            assert_eq!(
                itsme_store_add(store, ptr(&name), CONTACT_KEY.as_ptr(), 32, SEED.as_ptr(), 32, ITSME_EXCHANGE_QR, T0, &mut keyed),
                ITSME_OK
            );
            assert_eq!(itsme_store_set_note(store, keyed, ptr(&note)), ITSME_OK);
            assert_eq!(
                itsme_store_add_unauthenticated(store, ptr(&old), ptr(&fp), SEED.as_ptr(), 32, ITSME_EXCHANGE_INVITE, T0, &mut v5),
                ITSME_OK
            );
        }
        Contacts { f, dir, store, keyed, v5 }
    }

    fn count(&self) -> u64 {
        let mut count = 0u64;
        assert_eq!(unsafe { itsme_store_count(self.store, &mut count) }, ITSME_OK);
        count
    }

    /// A new snapshot of a contact; the caller frees it.
    fn snapshot(&self, id: i64) -> *mut itsme_contact {
        let mut contact = null_mut();
        assert_eq!(unsafe { itsme_store_get(self.store, id, &mut contact) }, ITSME_OK);
        assert!(!contact.is_null());
        contact
    }

    /// The store's last-error detail.
    fn detail(&self) -> String {
        let mut buf = [0u8; 512];
        let mut len = 0usize;
        assert_eq!(unsafe { itsme_store_last_error(self.store, buf.as_mut_ptr().cast(), 512, &mut len) }, ITSME_OK);
        String::from_utf8(buf[..len - 1].to_vec()).unwrap()
    }
}

impl Drop for Contacts {
    fn drop(&mut self) {
        unsafe { itsme_store_free(self.store) };
    }
}

/// The identity's last-error detail.
fn identity_detail(identity: *mut itsme_identity) -> String {
    let mut buf = [0u8; 512];
    let mut len = 0usize;
    assert_eq!(unsafe { itsme_identity_last_error(identity, buf.as_mut_ptr().cast(), 512, &mut len) }, ITSME_OK);
    String::from_utf8(buf[..len - 1].to_vec()).unwrap()
}

#[test]
fn contact_free_functions_accept_null() {
    unsafe {
        itsme_store_free(null_mut());
        #[allow(deprecated)]
        itsme_store_close(null_mut());
        itsme_contact_free(null_mut());
        itsme_contact_list_free(null_mut());
    }
}

#[test]
fn store_open_arguments() {
    let f = Fixture::new();
    let dir = common::TempDir::new("misuse-open");
    let file = dir.path().join("contacts.db");
    let path = cstr(file.to_str().unwrap());
    unsafe {
        let mut out = sentinel();
        assert_eq!(itsme_store_open(null_mut(), ptr(&path), &mut out), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_open(f.identity, null(), &mut out), ITSME_E_INVALID_ARGUMENT);
        assert!(!identity_detail(f.identity).is_empty(), "no detail on the identity");
        assert_eq!(itsme_store_open(f.identity, ptr(&path), null_mut()), ITSME_E_INVALID_ARGUMENT);
        let bad_utf8 = cstr(&format!("{}/", dir.path().to_str().unwrap()));
        let bad_utf8 = [&bad_utf8[..bad_utf8.len() - 1], b"\xff\xfe.db\0"].concat();
        assert_eq!(itsme_store_open(f.identity, ptr(&bad_utf8), &mut out), ITSME_E_INVALID_ARGUMENT);
        let empty = cstr("");
        assert_ne!(itsme_store_open(f.identity, ptr(&empty), &mut out), ITSME_OK, "an empty path was accepted");
        assert_eq!(out, sentinel());
        let created: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(created.is_empty(), "refused calls created {created:?}");

        assert_eq!(itsme_store_open(f.identity, ptr(&path), &mut out), ITSME_OK);
        assert!(!out.is_null() && out != sentinel());
        itsme_store_free(out);

        // The deprecated alias, kept through the 0.2 series, releases a store
        // as itsme_store_free does.
        let mut again = sentinel();
        assert_eq!(itsme_store_open(f.identity, ptr(&path), &mut again), ITSME_OK);
        assert!(!again.is_null() && again != sentinel());
        #[allow(deprecated)]
        itsme_store_close(again);
    }
}

#[test]
fn store_last_error_buffer() {
    let c = Contacts::new("misuse-store-last-error");
    let mut buf = [0xAAu8; 64];
    let mut len = 777usize;
    let name = cstr("Dup");
    unsafe {
        let b: *mut c_char = buf.as_mut_ptr().cast();
        assert_eq!(itsme_store_last_error(null(), b, 64, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_last_error(c.store, null_mut(), 64, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_last_error(c.store, b, 64, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(len, 777);
        // A failure leaves a detail.
        let mut id = -1i64;
        assert_eq!(
            itsme_store_add(c.store, ptr(&name), CONTACT_KEY.as_ptr(), 32, SEED.as_ptr(), 32, ITSME_EXCHANGE_QR, T0, &mut id),
            ITSME_E_ALREADY_EXISTS
        );
        assert_eq!(id, -1);
        assert_eq!(itsme_store_last_error(c.store, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        let needed = len;
        assert!(needed > 1, "an empty detail after a failure");
        assert_eq!(itsme_store_last_error(c.store, b, needed - 1, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(len, needed);
        assert_eq!(buf, [0xAA; 64], "written on failure");
        let mut big = vec![0xAAu8; needed + 8];
        assert_eq!(itsme_store_last_error(c.store, big.as_mut_ptr().cast(), needed + 8, &mut len), ITSME_OK);
        assert_eq!((len, big[needed - 1]), (needed, 0));
        assert_eq!(big[needed..], [0xAA; 8], "written past *out_len");
        assert!(std::str::from_utf8(&big[..needed - 1]).unwrap().contains("exists"));
    }
}

#[test]
fn store_add_arguments() {
    let c = Contacts::new("misuse-add");
    let s = c.store;
    let mut own = [0u8; 32];
    let mut len = 0usize;
    let name = cstr("Dave");
    let (k, sd) = (OTHER_KEY.as_ptr(), SEED.as_ptr());
    unsafe {
        assert_eq!(itsme_identity_public_key(c.f.identity, own.as_mut_ptr(), 32, &mut len), ITSME_OK);
        let mut id = -1i64;
        let n = ptr(&name);
        let q = ITSME_EXCHANGE_QR;
        assert_eq!(itsme_store_add(null_mut(), n, k, 32, sd, 32, q, T0, &mut id), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_add(s, null(), k, 32, sd, 32, q, T0, &mut id), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_add(s, n, null(), 32, sd, 32, q, T0, &mut id), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_add(s, n, k, 32, null(), 32, q, T0, &mut id), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_add(s, n, k, 32, sd, 32, q, T0, null_mut()), ITSME_E_INVALID_ARGUMENT);
        for key_len in [0usize, 1, 31, 33, 64] {
            let long = [0x44u8; 64];
            assert_eq!(itsme_store_add(s, n, long.as_ptr(), key_len, sd, 32, q, T0, &mut id), ITSME_E_INVALID_KEY, "key_len {key_len}");
        }
        assert_eq!(itsme_store_add(s, n, own.as_ptr(), 32, sd, 32, q, T0, &mut id), ITSME_E_INVALID_KEY, "own key");
        for seed_len in [0usize, 1, 31, 33] {
            let long = [1u8; 64];
            assert_eq!(itsme_store_add(s, n, k, 32, long.as_ptr(), seed_len, q, T0, &mut id), ITSME_E_INVALID_ARGUMENT, "seed_len {seed_len}");
        }
        for method in [ITSME_EXCHANGE_REALTIME + 1, 99, u32::MAX] {
            assert_eq!(itsme_store_add(s, n, k, 32, sd, 32, method, T0, &mut id), ITSME_E_INVALID_ARGUMENT, "method {method}");
        }
        for now in [-1i64, i64::MIN] {
            assert_eq!(itsme_store_add(s, n, k, 32, sd, 32, q, now, &mut id), ITSME_E_INVALID_ARGUMENT, "now {now}");
        }
        let long_name = cstr(&"x".repeat(ITSME_NAME_MAX_BYTES + 1));
        for bad in [&b"\0"[..], b"bad\xff\0", b"line\nbreak\0", &long_name] {
            assert_eq!(itsme_store_add(s, ptr(bad), k, 32, sd, 32, q, T0, &mut id), ITSME_E_INVALID_ARGUMENT, "{bad:?}");
        }
        assert_eq!(id, -1, "id written on failure");
        assert_eq!(c.count(), 2, "a refused add changed the store");

        // Every method is accepted.
        for (i, method) in [ITSME_EXCHANGE_QR, ITSME_EXCHANGE_BLUETOOTH, ITSME_EXCHANGE_INVITE, ITSME_EXCHANGE_REALTIME]
            .into_iter()
            .enumerate()
        {
            let key = [0x50 + i as u8; 32];
            assert_eq!(itsme_store_add(s, n, key.as_ptr(), 32, sd, 32, method, T0, &mut id), ITSME_OK);
            let contact = c.snapshot(id);
            let mut got = 99u32;
            assert_eq!(itsme_contact_exchange_method(contact, &mut got), ITSME_OK);
            assert_eq!(got, method);
            itsme_contact_free(contact);
        }
    }
}

#[test]
fn store_add_unauthenticated_arguments() {
    let c = Contacts::new("misuse-add-v5");
    let s = c.store;
    let name = cstr("Old");
    let fp = cstr(V5_FINGERPRINT);
    let (n, f, sd, q) = (ptr(&name), ptr(&fp), SEED.as_ptr(), ITSME_EXCHANGE_QR);
    unsafe {
        let mut id = -1i64;
        assert_eq!(itsme_store_add_unauthenticated(null_mut(), n, f, sd, 32, q, T0, &mut id), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_add_unauthenticated(s, null(), f, sd, 32, q, T0, &mut id), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_add_unauthenticated(s, n, null(), sd, 32, q, T0, &mut id), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_add_unauthenticated(s, n, f, null(), 32, q, T0, &mut id), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_add_unauthenticated(s, n, f, sd, 32, q, T0, null_mut()), ITSME_E_INVALID_ARGUMENT);
        for bad in [&b"\0"[..], b"0123456789ABCDE\0", b"0123456789ABCDEF0\0", b"0123456789ABCDEG\0", b"0123456789ABCDE\xff\0"] {
            assert_eq!(itsme_store_add_unauthenticated(s, n, ptr(bad), sd, 32, q, T0, &mut id), ITSME_E_INVALID_ARGUMENT, "{bad:?}");
        }
        for seed_len in [0usize, 31, 33] {
            let long = [1u8; 64];
            assert_eq!(itsme_store_add_unauthenticated(s, n, f, long.as_ptr(), seed_len, q, T0, &mut id), ITSME_E_INVALID_ARGUMENT);
        }
        assert_eq!(itsme_store_add_unauthenticated(s, n, f, sd, 32, 4, T0, &mut id), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_add_unauthenticated(s, n, f, sd, 32, q, -1, &mut id), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_add_unauthenticated(s, ptr(b"\0"), f, sd, 32, q, T0, &mut id), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(id, -1, "id written on failure");
        assert_eq!(c.count(), 2);
    }
}

#[test]
fn store_lookup_arguments() {
    let c = Contacts::new("misuse-lookups");
    let s = c.store;
    let fp = cstr(V5_FINGERPRINT);
    unsafe {
        let mut out = sentinel();
        assert_eq!(itsme_store_get(null_mut(), c.keyed, &mut out), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_get(s, c.keyed, null_mut()), ITSME_E_INVALID_ARGUMENT);
        for missing in [c.v5 + 100, 0, -1, i64::MIN, i64::MAX] {
            assert_eq!(itsme_store_get(s, missing, &mut out), ITSME_E_NOT_FOUND, "id {missing}");
        }
        assert!(!c.detail().is_empty());

        assert_eq!(itsme_store_get_by_key(null_mut(), CONTACT_KEY.as_ptr(), 32, &mut out), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_get_by_key(s, null(), 32, &mut out), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_get_by_key(s, CONTACT_KEY.as_ptr(), 32, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_get_by_key(s, OTHER_KEY.as_ptr(), 32, &mut out), ITSME_E_NOT_FOUND);
        assert_eq!(out, sentinel(), "written on failure");

        let mut list = sentinel();
        assert_eq!(itsme_store_find_fingerprint(null_mut(), ptr(&fp), &mut list), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_find_fingerprint(s, null(), &mut list), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_find_fingerprint(s, ptr(&fp), null_mut()), ITSME_E_INVALID_ARGUMENT);
        for bad in [&b"\0"[..], b"0123\0", b"0123456789ABCDEF0\0", b"nothex!!nothex!!\0", b"0123456789ABCDE\xff\0"] {
            assert_eq!(itsme_store_find_fingerprint(s, ptr(bad), &mut list), ITSME_E_INVALID_ARGUMENT, "{bad:?}");
        }
        assert_eq!(itsme_store_list(null_mut(), 0, 0, &mut list), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_list(s, 0, 0, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(list, sentinel(), "written on failure");

        let mut count = 42u64;
        assert_eq!(itsme_store_count(null_mut(), &mut count), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_count(s, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(count, 42);
        assert_eq!(itsme_store_expire_awaiting(null_mut(), T0, &mut count), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_expire_awaiting(s, -1, &mut count), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(count, 42, "written on failure");
        assert_eq!(itsme_store_expire_awaiting(s, T0, null_mut()), ITSME_OK);
        assert_eq!(itsme_store_expire_awaiting(s, T0, &mut count), ITSME_OK);
        assert_eq!(count, 0, "no contact awaits a peer");

        // No match is an empty list, not an error; either case is accepted.
        let mut n = 99usize;
        let unknown = cstr("FEDCBA9876543210");
        let mut empty = null_mut();
        assert_eq!(itsme_store_find_fingerprint(s, ptr(&unknown), &mut empty), ITSME_OK);
        assert_eq!(itsme_contact_list_count(empty, &mut n), ITSME_OK);
        assert_eq!(n, 0);
        itsme_contact_list_free(empty);
        let lower = cstr(&V5_FINGERPRINT.to_lowercase());
        let mut found = null_mut();
        assert_eq!(itsme_store_find_fingerprint(s, ptr(&lower), &mut found), ITSME_OK);
        assert_eq!(itsme_contact_list_count(found, &mut n), ITSME_OK);
        assert_eq!(n, 1);
        itsme_contact_list_free(found);
        // A page after the last id is empty.
        let mut page = null_mut();
        assert_eq!(itsme_store_list(s, c.v5, 10, &mut page), ITSME_OK);
        assert_eq!(itsme_contact_list_count(page, &mut n), ITSME_OK);
        assert_eq!(n, 0);
        itsme_contact_list_free(page);
    }
}

/// The header lists, for itsme_store_get_by_key, the errors of
/// itsme_store_get (no ITSME_E_INVALID_KEY), and its conventions make a
/// length out of range ITSME_E_INVALID_ARGUMENT.
#[test]
fn store_get_by_key_length() {
    let c = Contacts::new("misuse-get-by-key-length");
    let long = [0x42u8; 64];
    let mut failures = Vec::new();
    for key_len in [0usize, 1, 31, 33, 64] {
        let mut out = sentinel();
        let rc = unsafe { itsme_store_get_by_key(c.store, long.as_ptr(), key_len, &mut out) };
        if rc != ITSME_E_INVALID_ARGUMENT {
            failures.push(format!(
                "itsme_store_get_by_key(store, key, {key_len}, &out): returned {rc} ({}), expected ITSME_E_INVALID_ARGUMENT",
                itsme::result_message(rc)
            ));
        }
        assert_eq!(out, sentinel(), "written on failure");
    }
    assert!(failures.is_empty(), "{} disagreements with itsme.h:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn store_update_arguments() {
    let c = Contacts::new("misuse-updates");
    let s = c.store;
    let id = c.keyed;
    let name = cstr("Caroline");
    let note = cstr("changed");
    unsafe {
        assert_eq!(itsme_store_set_name(null_mut(), id, ptr(&name)), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_set_name(s, id, null()), ITSME_E_INVALID_ARGUMENT);
        let long_name = cstr(&"x".repeat(ITSME_NAME_MAX_BYTES + 1));
        for bad in [&b"\0"[..], b"bad\xff\0", b"tab\there\0", &long_name] {
            assert_eq!(itsme_store_set_name(s, id, ptr(bad)), ITSME_E_INVALID_ARGUMENT, "{bad:?}");
        }
        assert_eq!(itsme_store_set_name(s, 999, ptr(&name)), ITSME_E_NOT_FOUND);

        assert_eq!(itsme_store_set_note(null_mut(), id, ptr(&note)), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_set_note(s, id, null()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_set_note(s, id, ptr(b"bad\xc3\0")), ITSME_E_INVALID_ARGUMENT);
        let too_long = cstr(&"n".repeat(ITSME_NOTE_MAX_BYTES + 1));
        assert_eq!(itsme_store_set_note(s, id, ptr(&too_long)), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_set_note(s, 999, ptr(&note)), ITSME_E_NOT_FOUND);

        let v = ITSME_CONTACT_VERIFIED;
        assert_eq!(itsme_store_set_state(null_mut(), id, v, 0, T0), ITSME_E_INVALID_ARGUMENT);
        for state in [ITSME_CONTACT_AWAITING_PEER + 1, 7, u32::MAX] {
            assert_eq!(itsme_store_set_state(s, id, state, 0, T0), ITSME_E_INVALID_ARGUMENT, "state {state}");
        }
        // Only an exchange puts a contact in the state awaiting the peer.
        assert_eq!(itsme_store_set_state(s, id, ITSME_CONTACT_AWAITING_PEER, 0, T0), ITSME_E_INVALID_STATE);
        for acknowledged in [2 as c_int, -1, c_int::MAX] {
            assert_eq!(
                itsme_store_set_state(s, id, ITSME_CONTACT_DEGRADED, acknowledged, T0),
                ITSME_E_INVALID_ARGUMENT,
                "acknowledged {acknowledged}"
            );
        }
        assert_eq!(itsme_store_set_state(s, id, v, 0, -1), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_set_state(s, 999, v, 0, T0), ITSME_E_NOT_FOUND);

        assert_eq!(itsme_store_use_window(null_mut(), id, 1), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_use_window(s, id, -1), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_use_window(s, id, i64::MIN), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_use_window(s, 999, 1), ITSME_E_NOT_FOUND);

        assert_eq!(itsme_store_delete(null_mut(), id), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_delete(s, 999), ITSME_E_NOT_FOUND);

        // Nothing changed.
        assert_eq!(c.count(), 2);
        let contact = c.snapshot(id);
        let mut buf = [0u8; 64];
        let mut len = 0usize;
        assert_eq!(itsme_contact_name(contact, buf.as_mut_ptr().cast(), 64, &mut len), ITSME_OK);
        assert_eq!(&buf[..len], b"Carol\0");
        assert_eq!(itsme_contact_note(contact, buf.as_mut_ptr().cast(), 64, &mut len), ITSME_OK);
        assert_eq!(&buf[..len], b"met at the bakery\0");
        let (mut state, mut ack) = (99u32, 99 as c_int);
        assert_eq!(itsme_contact_state(contact, &mut state, &mut ack), ITSME_OK);
        assert_eq!((state, ack), (ITSME_CONTACT_UNVERIFIED, 0));
        let mut t = 42i64;
        assert_eq!(itsme_contact_verified_at(contact, &mut t), ITSME_E_NOT_FOUND);
        assert_eq!(itsme_contact_last_window(contact, &mut t), ITSME_E_NOT_FOUND);
        assert_eq!(t, 42, "written on failure");
        itsme_contact_free(contact);

        // Window rules: 0 is a window; only greater ones follow.
        assert_eq!(itsme_store_use_window(s, id, 0), ITSME_OK);
        assert_eq!(itsme_store_use_window(s, id, 0), ITSME_E_WINDOW_USED);
        assert!(!c.detail().is_empty());
        assert_eq!(itsme_store_use_window(s, id, 1), ITSME_OK);
        // The last window is the last of the year 9999; none beyond it.
        let last = MAX_TIME / 30;
        assert_eq!(itsme_store_use_window(s, id, last + 1), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_use_window(s, id, i64::MAX), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_store_use_window(s, id, last), ITSME_OK);
        assert_eq!(itsme_store_use_window(s, id, last), ITSME_E_WINDOW_USED);
        // Windows are per contact.
        assert_eq!(itsme_store_use_window(s, c.v5, 1), ITSME_OK);
        // The longest note fits.
        let longest = cstr(&"n".repeat(ITSME_NOTE_MAX_BYTES));
        assert_eq!(itsme_store_set_note(s, id, ptr(&longest)), ITSME_OK);
    }
}

#[test]
fn contact_scalar_getter_arguments() {
    let c = Contacts::new("misuse-scalar-getters");
    let contact = c.snapshot(c.keyed);
    let old = c.snapshot(c.v5);
    unsafe {
        let mut i = 42i64;
        type I64Getter = unsafe extern "C" fn(*const itsme_contact, *mut i64) -> itsme_result;
        let getters: [(&str, I64Getter); 4] = [
            ("id", itsme_contact_id),
            ("created_at", itsme_contact_created_at),
            ("verified_at", itsme_contact_verified_at),
            ("last_window", itsme_contact_last_window),
        ];
        for (what, getter) in getters {
            assert_eq!(getter(null(), &mut i), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(getter(contact, null_mut()), ITSME_E_INVALID_ARGUMENT, "{what}");
        }
        assert_eq!(i, 42, "written on failure");
        assert_eq!(itsme_contact_id(contact, &mut i), ITSME_OK);
        assert_eq!(i, c.keyed);
        assert_eq!(itsme_contact_created_at(contact, &mut i), ITSME_OK);
        assert_eq!(i, T0);

        let mut flag: c_int = 42;
        assert_eq!(itsme_contact_is_authenticated(null(), &mut flag), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_contact_is_authenticated(contact, null_mut()), ITSME_E_INVALID_ARGUMENT);
        let mut state = 42u32;
        assert_eq!(itsme_contact_state(null(), &mut state, &mut flag), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_contact_state(contact, null_mut(), &mut flag), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_contact_state(contact, &mut state, null_mut()), ITSME_E_INVALID_ARGUMENT);
        let mut method = 42u32;
        assert_eq!(itsme_contact_exchange_method(null(), &mut method), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_contact_exchange_method(contact, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!((flag, state, method), (42, 42, 42), "written on failure");

        assert_eq!(itsme_contact_is_authenticated(contact, &mut flag), ITSME_OK);
        assert_eq!(flag, 1);
        assert_eq!(itsme_contact_is_authenticated(old, &mut flag), ITSME_OK);
        assert_eq!(flag, 0);
        assert_eq!(itsme_contact_exchange_method(old, &mut method), ITSME_OK);
        assert_eq!(method, ITSME_EXCHANGE_INVITE);
        itsme_contact_free(contact);
        itsme_contact_free(old);
    }
}

#[test]
fn contact_text_getter_arguments() {
    let c = Contacts::new("misuse-text-getters");
    let contact = c.snapshot(c.keyed);
    let old = c.snapshot(c.v5);
    let mut buf = [0xAAu8; 256];
    let mut len = 777usize;
    unsafe {
        let b: *mut c_char = buf.as_mut_ptr().cast();
        type Getter = unsafe extern "C" fn(*const itsme_contact, *mut c_char, usize, *mut usize) -> itsme_result;
        let getters: [(&str, Getter, *const itsme_contact, &[u8]); 5] = [
            ("name", itsme_contact_name, contact, b"Carol\0"),
            ("note", itsme_contact_note, contact, b"met at the bakery\0"),
            ("empty note", itsme_contact_note, old, b"\0"),
            ("fingerprint", itsme_contact_fingerprint, old, b"0123456789ABCDEF\0"),
            ("keyed fingerprint", itsme_contact_fingerprint, contact, b""),
        ];
        for (what, getter, snapshot, expected) in getters {
            assert_eq!(getter(null(), b, 256, &mut len), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(getter(snapshot, null_mut(), 256, &mut len), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(getter(snapshot, b, 256, null_mut()), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(len, 777, "{what}: *out_len set by a refused call");
            // NULL with cap 0 asks for the size.
            assert_eq!(getter(snapshot, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL, "{what}");
            let needed = len;
            if !expected.is_empty() {
                assert_eq!(needed, expected.len(), "{what}: needed size");
            } else {
                assert_eq!(needed, ITSME_FINGERPRINT_SIZE, "{what}: needed size");
            }
            assert_eq!(getter(snapshot, b, 0, &mut len), ITSME_E_BUFFER_TOO_SMALL, "{what}");
            assert_eq!(len, needed, "{what}");
            if needed > 1 {
                assert_eq!(getter(snapshot, b, needed - 1, &mut len), ITSME_E_BUFFER_TOO_SMALL, "{what}");
                assert_eq!(len, needed, "{what}");
            }
            assert_eq!(buf, [0xAA; 256], "{what}: written on failure");
            assert_eq!(getter(snapshot, b, needed, &mut len), ITSME_OK, "{what}");
            assert_eq!((len, buf[needed - 1]), (needed, 0), "{what}");
            if !expected.is_empty() {
                assert_eq!(&buf[..needed], expected, "{what}");
            } else {
                assert!(buf[..16].iter().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(b)), "{what}");
            }
            buf = [0xAA; 256];
            assert_eq!(getter(snapshot, b, 256, &mut len), ITSME_OK, "{what}");
            assert_eq!(buf[needed..], [0xAA; 256][needed..], "{what}: written past *out_len");
            buf = [0xAA; 256];
            len = 777;
        }

        // The public key.
        let k: *mut u8 = buf.as_mut_ptr();
        assert_eq!(itsme_contact_public_key(null(), k, 32, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_contact_public_key(contact, null_mut(), 32, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_contact_public_key(contact, k, 32, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(len, 777);
        for cap in [0usize, 1, 31] {
            assert_eq!(itsme_contact_public_key(contact, k, cap, &mut len), ITSME_E_BUFFER_TOO_SMALL, "cap {cap}");
            assert_eq!(len, ITSME_PUBLIC_KEY_BYTES, "cap {cap}");
            len = 777;
        }
        assert_eq!(itsme_contact_public_key(contact, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(len, ITSME_PUBLIC_KEY_BYTES);
        assert_eq!(buf, [0xAA; 256], "written on failure");
        assert_eq!(itsme_contact_public_key(contact, k, 256, &mut len), ITSME_OK);
        assert_eq!((len, &buf[..32]), (32, &CONTACT_KEY[..]));
        assert_eq!(buf[32..], [0xAA; 224], "written past *out_len");
        // An unauthenticated contact has no key: nothing is written.
        buf = [0xAA; 256];
        len = 777;
        assert_eq!(itsme_contact_public_key(old, k, 256, &mut len), ITSME_E_NOT_FOUND);
        assert_eq!((len, buf), (777, [0xAA; 256]), "written on failure");
        itsme_contact_free(contact);
        itsme_contact_free(old);
    }
}

#[test]
fn contact_list_arguments() {
    let c = Contacts::new("misuse-lists");
    unsafe {
        let mut list = null_mut();
        assert_eq!(itsme_store_list(c.store, 0, 0, &mut list), ITSME_OK);
        let mut n = 42usize;
        assert_eq!(itsme_contact_list_count(null(), &mut n), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_contact_list_count(list, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(n, 42);
        assert_eq!(itsme_contact_list_count(list, &mut n), ITSME_OK);
        assert_eq!(n, 2);
        let mut out = sentinel();
        assert_eq!(itsme_contact_list_get(null(), 0, &mut out), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_contact_list_get(list, 0, null_mut()), ITSME_E_INVALID_ARGUMENT);
        for index in [2usize, 3, usize::MAX] {
            assert_eq!(itsme_contact_list_get(list, index, &mut out), ITSME_E_INVALID_ARGUMENT, "index {index}");
        }
        assert_eq!(out, sentinel(), "written on failure");

        // Snapshots taken from a list outlive it, and each is its own.
        let (mut first, mut again) = (null_mut(), null_mut());
        assert_eq!(itsme_contact_list_get(list, 0, &mut first), ITSME_OK);
        assert_eq!(itsme_contact_list_get(list, 0, &mut again), ITSME_OK);
        itsme_contact_list_free(list);
        let mut id = 0i64;
        assert_eq!(itsme_contact_id(first, &mut id), ITSME_OK);
        assert_eq!(id, c.keyed);
        itsme_contact_free(first);
        assert_eq!(itsme_contact_id(again, &mut id), ITSME_OK);
        assert_eq!(id, c.keyed);
        itsme_contact_free(again);

        // Paging: limit, after_id.
        let mut page = null_mut();
        assert_eq!(itsme_store_list(c.store, c.keyed, 1, &mut page), ITSME_OK);
        assert_eq!(itsme_contact_list_count(page, &mut n), ITSME_OK);
        assert_eq!(n, 1);
        let mut item = null_mut();
        assert_eq!(itsme_contact_list_get(page, 0, &mut item), ITSME_OK);
        assert_eq!(itsme_contact_id(item, &mut id), ITSME_OK);
        assert_eq!(id, c.v5);
        itsme_contact_free(item);
        itsme_contact_list_free(page);
    }
    // The directory goes with the fixture.
    assert!(c.dir.path().exists());
}

/// A snapshot is immutable: later changes to the store do not reach it, and
/// it survives the store being closed.
#[test]
fn snapshots_are_immutable() {
    let c = Contacts::new("misuse-snapshots");
    let contact = c.snapshot(c.keyed);
    let name = cstr("Renamed");
    unsafe {
        assert_eq!(itsme_store_set_name(c.store, c.keyed, ptr(&name)), ITSME_OK);
        assert_eq!(itsme_store_delete(c.store, c.keyed), ITSME_OK);
    }
    drop(c);
    let mut buf = [0u8; 64];
    let mut len = 0usize;
    unsafe {
        assert_eq!(itsme_contact_name(contact, buf.as_mut_ptr().cast(), 64, &mut len), ITSME_OK);
        assert_eq!(&buf[..len], b"Carol\0");
        itsme_contact_free(contact);
    }
}

/// As invalid_arguments_leave_out_len_alone, for the contact store's
/// (out, cap, out_len) functions.
#[test]
fn contact_invalid_arguments_leave_out_len_alone() {
    let c = Contacts::new("misuse-out-len");
    let contact = c.snapshot(c.keyed);
    let old = c.snapshot(c.v5);
    let mut buf = [0u8; 256];
    let b: *mut c_char = buf.as_mut_ptr().cast();
    let mut failures = Vec::new();
    let mut check = |call: &str, expected: itsme_result, run: &dyn Fn(*mut usize) -> itsme_result| {
        let mut len = 777usize;
        let rc = run(&mut len);
        if rc != expected {
            failures.push(format!("{call}: returned {rc}, expected {expected}"));
        } else if len != 777 {
            failures.push(format!("{call}: returned {rc} but set *out_len to {len}"));
        }
    };
    let inv = ITSME_E_INVALID_ARGUMENT;
    unsafe {
        check("itsme_store_last_error(NULL, buf, 256, &len)", inv, &|l| itsme_store_last_error(null(), b, 256, l));
        check("itsme_store_last_error(store, NULL, 256, &len)", inv, &|l| itsme_store_last_error(c.store, null_mut(), 256, l));
        check("itsme_contact_name(NULL, buf, 256, &len)", inv, &|l| itsme_contact_name(null(), b, 256, l));
        check("itsme_contact_name(contact, NULL, 256, &len)", inv, &|l| itsme_contact_name(contact, null_mut(), 256, l));
        check("itsme_contact_fingerprint(NULL, buf, 256, &len)", inv, &|l| itsme_contact_fingerprint(null(), b, 256, l));
        check("itsme_contact_fingerprint(contact, NULL, 256, &len)", inv, &|l| {
            itsme_contact_fingerprint(contact, null_mut(), 256, l)
        });
        check("itsme_contact_note(NULL, buf, 256, &len)", inv, &|l| itsme_contact_note(null(), b, 256, l));
        check("itsme_contact_note(contact, NULL, 256, &len)", inv, &|l| itsme_contact_note(contact, null_mut(), 256, l));
        check("itsme_contact_public_key(NULL, buf, 256, &len)", inv, &|l| itsme_contact_public_key(null(), b.cast(), 256, l));
        check("itsme_contact_public_key(contact, NULL, 256, &len)", inv, &|l| {
            itsme_contact_public_key(contact, null_mut(), 256, l)
        });
        check("itsme_contact_public_key(unauthenticated, buf, 256, &len)", ITSME_E_NOT_FOUND, &|l| {
            itsme_contact_public_key(old, b.cast(), 256, l)
        });
        itsme_contact_free(contact);
        itsme_contact_free(old);
    }
    assert!(failures.is_empty(), "{} disagreements with itsme.h:\n{}", failures.len(), failures.join("\n"));
}

// ---------------------------------------------------------------------------
// Randomness, short codes, exchanges, derivations
// ---------------------------------------------------------------------------

/// Two identities (A with a contact store) and a Bluetooth exchange each,
/// run through the raw interface until both compare the SAS.
struct Exchanges {
    c: Contacts,
    b: Fixture,
    a_ex: *mut itsme_exchange,
    b_ex: *mut itsme_exchange,
    /// A QR exchange of A, awaiting the peer.
    qr: *mut itsme_exchange,
}

impl Exchanges {
    fn new(tag: &str) -> Exchanges {
        let c = Contacts::new(tag);
        let b = Fixture::new();
        let (mut a_ex, mut b_ex, mut qr) = (null_mut(), null_mut(), null_mut());
        let mut code = [0u8; ITSME_SHORT_CODE_SIZE];
        let mut len = 0usize;
        unsafe {
            assert_eq!(itsme_exchange_new_bluetooth(c.f.identity, null(), null_mut(), T0, &mut a_ex), ITSME_OK);
            assert_eq!(itsme_exchange_session_code(a_ex, code.as_mut_ptr().cast(), code.len(), &mut len), ITSME_OK);
            assert_eq!(itsme_exchange_new_bluetooth(b.identity, code.as_ptr().cast(), null_mut(), T0, &mut b_ex), ITSME_OK);
            assert_eq!(itsme_exchange_new_qr(c.f.identity, null_mut(), T0, &mut qr), ITSME_OK);
            loop {
                let mut moved = false;
                for (from, to) in [(a_ex, b_ex), (b_ex, a_ex)] {
                    let mut frame = [0u8; ITSME_BLUETOOTH_FRAME_MAX];
                    assert_eq!(itsme_exchange_next_outgoing(from, frame.as_mut_ptr(), frame.len(), &mut len), ITSME_OK);
                    if len > 0 {
                        assert_eq!(itsme_exchange_receive(to, frame.as_ptr(), len, T0), ITSME_OK);
                        moved = true;
                    }
                }
                if !moved {
                    break;
                }
            }
        }
        let x = Exchanges { c, b, a_ex, b_ex, qr };
        assert_eq!(x.state(a_ex), ITSME_EXCHANGE_COMPARE_SAS);
        assert_eq!(x.state(b_ex), ITSME_EXCHANGE_COMPARE_SAS);
        x
    }

    fn state(&self, exchange: *mut itsme_exchange) -> itsme_exchange_state {
        let mut state = 0;
        assert_eq!(unsafe { itsme_exchange_status(exchange, &mut state, null_mut()) }, ITSME_OK);
        state
    }

    /// The exchange's last-error detail.
    fn detail(&self, exchange: *mut itsme_exchange) -> String {
        let mut buf = [0u8; 512];
        let mut len = 0usize;
        assert_eq!(unsafe { itsme_exchange_last_error(exchange, buf.as_mut_ptr().cast(), 512, &mut len) }, ITSME_OK);
        String::from_utf8(buf[..len - 1].to_vec()).unwrap()
    }
}

impl Drop for Exchanges {
    fn drop(&mut self) {
        unsafe {
            itsme_exchange_free(self.a_ex);
            itsme_exchange_free(self.b_ex);
            itsme_exchange_free(self.qr);
        }
    }
}

#[test]
fn exchange_free_functions_accept_null() {
    unsafe {
        itsme_random_free(null_mut());
        itsme_exchange_free(null_mut());
    }
}

#[test]
fn random_arguments() {
    init();
    let seed = [3u8; 64];
    unsafe {
        let mut rng = sentinel();
        assert_eq!(itsme_random_new_deterministic(null(), 32, &mut rng), ITSME_E_INVALID_ARGUMENT);
        for seed_len in [0usize, 1, 31, 33, 64] {
            assert_eq!(itsme_random_new_deterministic(seed.as_ptr(), seed_len, &mut rng), ITSME_E_INVALID_ARGUMENT, "{seed_len}");
        }
        assert_eq!(itsme_random_new_deterministic(seed.as_ptr(), 32, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(rng, sentinel(), "written on failure");

        let mut rng = null_mut();
        assert_eq!(itsme_random_new_deterministic(seed.as_ptr(), 32, &mut rng), ITSME_OK);
        let mut store = null_mut();
        assert_eq!(itsme_secret_store_new_memory(&mut store), ITSME_OK);
        let name = cstr("Random");
        let mut identity = sentinel();
        assert_eq!(itsme_identity_create_with_random(null_mut(), ptr(&name), rng, &mut identity), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_identity_create_with_random(store, null(), rng, &mut identity), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_identity_create_with_random(store, ptr(b"bad\xff\0"), rng, &mut identity), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_identity_create_with_random(store, ptr(&name), rng, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(identity, sentinel(), "written on failure");
        assert_eq!(itsme_identity_create_with_random(store, ptr(&name), rng, &mut identity), ITSME_OK);
        let mut again = sentinel();
        assert_eq!(itsme_identity_create_with_random(store, ptr(&name), null_mut(), &mut again), ITSME_E_ALREADY_EXISTS);
        assert_eq!(again, sentinel());
        itsme_identity_free(identity);
        itsme_secret_store_free(store);
        itsme_random_free(rng);
    }
}

#[test]
fn short_code_arguments() {
    init();
    let text = cstr("ECHO 0042");
    let mut buf = [0xAAu8; 32];
    let mut len = 777usize;
    unsafe {
        let mut value = 42u32;
        assert_eq!(itsme_short_code_parse(null(), &mut value), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_short_code_parse(ptr(&text), null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_short_code_parse(ptr(b"ECHO 004\xff\0"), &mut value), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(value, 42, "written on failure");
        assert_eq!(itsme_short_code_parse(ptr(&text), &mut value), ITSME_OK);
        assert_eq!(value, 40042);

        let b: *mut c_char = buf.as_mut_ptr().cast();
        assert_eq!(itsme_short_code_format(ITSME_SHORT_CODE_VALUES, b, 32, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_short_code_format(u32::MAX, b, 32, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_short_code_format(1, null_mut(), 32, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_short_code_format(1, b, 32, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(len, 777);
        // The longest text needs ITSME_SHORT_CODE_SIZE.
        assert_eq!(itsme_short_code_format(130_000, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(len, ITSME_SHORT_CODE_SIZE);
        assert_eq!(itsme_short_code_format(130_000, b, ITSME_SHORT_CODE_SIZE - 1, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(buf, [0xAA; 32], "written on failure");
        assert_eq!(itsme_short_code_format(130_000, b, ITSME_SHORT_CODE_SIZE, &mut len), ITSME_OK);
        assert_eq!(&buf[..len], b"NOVEMBER 0000\0");
    }
}

#[test]
fn exchange_constructor_arguments() {
    let f = Fixture::new();
    let code = cstr("ECHO 0042");
    unsafe {
        let mut out = sentinel();
        assert_eq!(itsme_exchange_new_qr(null_mut(), null_mut(), T0, &mut out), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_exchange_new_qr(f.identity, null_mut(), T0, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_exchange_new_qr(f.identity, null_mut(), -1, &mut out), ITSME_E_INVALID_ARGUMENT);
        assert!(!identity_detail(f.identity).is_empty(), "no detail on the identity");
        assert_eq!(itsme_exchange_new_bluetooth(null_mut(), ptr(&code), null_mut(), T0, &mut out), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_exchange_new_bluetooth(f.identity, ptr(&code), null_mut(), T0, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_exchange_new_bluetooth(f.identity, ptr(&code), null_mut(), -1, &mut out), ITSME_E_INVALID_ARGUMENT);
        for bad in [&b"\0"[..], b"ECHO 42\0", b"ECHO 004\xff\0", b"OMEGA 0042\0"] {
            assert_eq!(itsme_exchange_new_bluetooth(f.identity, ptr(bad), null_mut(), T0, &mut out), ITSME_E_INVALID_ARGUMENT, "{bad:?}");
        }
        let sealed = [1u8; 64];
        assert_eq!(itsme_exchange_restore(null_mut(), sealed.as_ptr(), 64, T0, &mut out), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_exchange_restore(f.identity, null(), 64, T0, &mut out), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_exchange_restore(f.identity, sealed.as_ptr(), 64, T0, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_exchange_restore(f.identity, sealed.as_ptr(), 64, -1, &mut out), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_exchange_restore(f.identity, sealed.as_ptr(), 0, T0, &mut out), ITSME_E_CORRUPT_DATA);
        assert_eq!(out, sentinel(), "written on failure");

        // A valid call with a NULL random source uses the system's.
        let mut ok = null_mut();
        assert_eq!(itsme_exchange_new_bluetooth(f.identity, ptr(&code), null_mut(), T0, &mut ok), ITSME_OK);
        itsme_exchange_free(ok);
    }
}

#[test]
fn remote_exchange_arguments() {
    let a = Fixture::new();
    let b = Fixture::new();
    let valid = cstr("K7X2-M9PM");
    let typo = cstr("K7X2-M9PN");
    let mut buf = [0xAAu8; 64];
    let mut len = 777usize;
    let out: *mut c_char = buf.as_mut_ptr().cast();
    unsafe {
        // The code check: NULLs, typos and short buffers write nothing.
        assert_eq!(itsme_remote_code_check(null(), out, 64, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_remote_code_check(ptr(&valid), null_mut(), 64, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_remote_code_check(ptr(&valid), out, 64, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_remote_code_check(ptr(&typo), out, 64, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(len, 777, "*out_len set by a refused call");
        assert_eq!(itsme_remote_code_check(ptr(&valid), out, ITSME_REMOTE_CODE_SIZE - 1, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(len, ITSME_REMOTE_CODE_SIZE);
        assert_eq!(buf, [0xAA; 64], "written on failure");
        let typed = cstr(" k7x2 m9pm ");
        assert_eq!(itsme_remote_code_check(ptr(&typed), out, ITSME_REMOTE_CODE_SIZE, &mut len), ITSME_OK);
        assert_eq!(&buf[..len], b"K7X2-M9PM\0");

        // The constructors.
        let mut ex = sentinel();
        assert_eq!(itsme_exchange_new_invite(null_mut(), 0, null_mut(), T0, &mut ex), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_exchange_new_invite(a.identity, 0, null_mut(), T0, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_exchange_new_invite(a.identity, 1, null_mut(), -1, &mut ex), ITSME_E_INVALID_ARGUMENT);
        assert!(!identity_detail(a.identity).is_empty(), "no detail on the identity");
        let other = cstr("2222-2222");
        for (invite, encryption) in [
            (null(), ptr(&valid)),
            (ptr(&valid), null()),
            (ptr(&valid), ptr(&valid)),
            (ptr(&typo), ptr(&other)),
            (ptr(&other), ptr(&typo)),
        ] {
            assert_eq!(
                itsme_exchange_accept_invite(b.identity, invite, encryption, 0, null_mut(), T0, &mut ex),
                ITSME_E_INVALID_ARGUMENT
            );
        }
        assert_eq!(
            itsme_exchange_accept_invite(null_mut(), ptr(&valid), ptr(&other), 0, null_mut(), T0, &mut ex),
            ITSME_E_INVALID_ARGUMENT
        );
        assert_eq!(
            itsme_exchange_accept_invite(b.identity, ptr(&valid), ptr(&other), 0, null_mut(), T0, null_mut()),
            ITSME_E_INVALID_ARGUMENT
        );
        assert_eq!(
            itsme_exchange_accept_invite(b.identity, ptr(&valid), ptr(&other), 0, null_mut(), -1, &mut ex),
            ITSME_E_INVALID_ARGUMENT
        );
        assert_eq!(ex, sentinel(), "written on failure");

        // The accessors, on an invite and on a QR exchange.
        let (mut invite, mut qr) = (null_mut(), null_mut());
        assert_eq!(itsme_exchange_new_invite(a.identity, 0, null_mut(), T0, &mut invite), ITSME_OK);
        assert_eq!(itsme_exchange_new_qr(a.identity, null_mut(), T0, &mut qr), ITSME_OK);
        type Getter = unsafe extern "C" fn(*const itsme_exchange, *mut c_char, usize, *mut usize) -> itsme_result;
        let getters: [(&str, Getter, usize); 3] = [
            ("invite_code", itsme_exchange_invite_code, ITSME_REMOTE_CODE_SIZE),
            ("encryption_code", itsme_exchange_encryption_code, ITSME_REMOTE_CODE_SIZE),
            ("relay_id", itsme_exchange_relay_id, ITSME_RELAY_ID_SIZE),
        ];
        for (what, getter, size) in getters {
            buf = [0xAA; 64];
            len = 777;
            assert_eq!(getter(null(), out, 64, &mut len), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(getter(invite, null_mut(), 64, &mut len), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(getter(invite, out, 64, null_mut()), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(getter(qr, out, 64, &mut len), ITSME_E_INVALID_STATE, "{what}");
            assert_eq!(len, 777, "{what}: *out_len set by a refused call");
            assert_eq!(getter(invite, out, size - 1, &mut len), ITSME_E_BUFFER_TOO_SMALL, "{what}");
            assert_eq!(len, size, "{what}");
            assert_eq!(buf, [0xAA; 64], "{what}: written on failure");
            assert_eq!(getter(invite, out, size, &mut len), ITSME_OK, "{what}");
            assert_eq!((len, buf[size - 1]), (size, 0), "{what}");
            assert_eq!(buf[size..], [0xAA; 64][size..], "{what}: written past *out_len");
        }
        let mut inviter: c_int = 7;
        assert_eq!(itsme_exchange_is_inviter(null(), &mut inviter), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_exchange_is_inviter(invite, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_exchange_is_inviter(qr, &mut inviter), ITSME_E_INVALID_STATE);
        assert_eq!(inviter, 7, "written on failure");
        assert_eq!(itsme_exchange_is_inviter(invite, &mut inviter), ITSME_OK);
        assert_eq!(inviter, 1);
        itsme_exchange_free(invite);
        itsme_exchange_free(qr);
    }
}

#[test]
fn exchange_output_arguments() {
    let x = Exchanges::new("misuse-exchange-outputs");
    let ex = x.a_ex;
    let mut buf = [0xAAu8; 256];
    let mut len = 777usize;
    unsafe {
        // A failure on the exchange leaves a detail to read.
        let mut id = 0i64;
        assert_eq!(itsme_exchange_reject(x.qr, null_mut()), ITSME_OK);
        assert_eq!(itsme_exchange_confirm(x.qr, x.c.store, T0, &mut id), ITSME_E_INVALID_STATE);
        assert!(!x.detail(x.qr).is_empty());

        let b: *mut c_char = buf.as_mut_ptr().cast();
        type Getter = unsafe extern "C" fn(*const itsme_exchange, *mut c_char, usize, *mut usize) -> itsme_result;
        let getters: [(&str, Getter, usize); 5] = [
            ("last_error", itsme_exchange_last_error, 0),
            ("session_code", itsme_exchange_session_code, 0),
            ("sas", itsme_exchange_sas, 0),
            ("peer_name", itsme_exchange_peer_name, "Misuse".len() + 1),
            ("peer_fingerprint", itsme_exchange_peer_fingerprint, ITSME_FINGERPRINT_SIZE),
        ];
        for (what, getter, size) in getters {
            assert_eq!(getter(null(), b, 256, &mut len), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(getter(ex, null_mut(), 256, &mut len), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(getter(ex, b, 256, null_mut()), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(len, 777, "{what}: *out_len set by a refused call");
            assert_eq!(getter(ex, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL, "{what}");
            let needed = len;
            if size > 0 {
                assert_eq!(needed, size, "{what}: needed size");
            }
            assert!((1..=256).contains(&needed), "{what}: {needed}");
            if what != "last_error" {
                assert!(needed <= ITSME_SHORT_CODE_SIZE || size > 0, "{what}: {needed}");
            }
            if needed > 1 {
                assert_eq!(getter(ex, b, needed - 1, &mut len), ITSME_E_BUFFER_TOO_SMALL, "{what}");
                assert_eq!(len, needed, "{what}");
            }
            assert_eq!(buf, [0xAA; 256], "{what}: written on failure");
            assert_eq!(getter(ex, b, needed, &mut len), ITSME_OK, "{what}");
            assert_eq!((len, buf[needed - 1]), (needed, 0), "{what}");
            buf = [0xAA; 256];
            assert_eq!(getter(ex, b, 256, &mut len), ITSME_OK, "{what}");
            assert_eq!(buf[needed..], [0xAA; 256][needed..], "{what}: written past *out_len");
            buf = [0xAA; 256];
            len = 777;
        }

        // Byte outputs: the peer's key, the next frame, the sealed exchange.
        let mut buf = [0xAAu8; 1024];
        let k: *mut u8 = buf.as_mut_ptr();
        type ByteGetter = unsafe extern "C" fn(*mut itsme_exchange, *mut u8, usize, *mut usize) -> itsme_result;
        unsafe extern "C" fn peer_key(ex: *mut itsme_exchange, out: *mut u8, cap: usize, len: *mut usize) -> itsme_result {
            itsme_exchange_peer_public_key(ex, out, cap, len)
        }
        let byte_getters: [(&str, ByteGetter, *mut itsme_exchange); 3] = [
            ("peer_public_key", peer_key, ex),
            ("next_outgoing", itsme_exchange_next_outgoing, x.b_ex),
            ("seal", itsme_exchange_seal, ex),
        ];
        // B confirms so that it has a CONFIRM frame to send.
        let mut bstore_id = 0i64;
        let dir = common::TempDir::new("misuse-exchange-b");
        let path = cstr(dir.path().join("b.db").to_str().unwrap());
        let mut bstore = null_mut();
        assert_eq!(itsme_store_open(x.b.identity, ptr(&path), &mut bstore), ITSME_OK);
        assert_eq!(itsme_exchange_confirm(x.b_ex, bstore, T0, &mut bstore_id), ITSME_OK);
        assert!(bstore_id > 0);
        for (what, getter, handle) in byte_getters {
            assert_eq!(getter(null_mut(), k, 1024, &mut len), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(getter(handle, null_mut(), 1024, &mut len), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(getter(handle, k, 1024, null_mut()), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(len, 777, "{what}: *out_len set by a refused call");
            assert_eq!(getter(handle, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL, "{what}");
            let needed = len;
            assert!(needed > 1 && needed <= 1024, "{what}: {needed}");
            assert_eq!(getter(handle, k, needed - 1, &mut len), ITSME_E_BUFFER_TOO_SMALL, "{what}");
            assert_eq!(len, needed, "{what}");
            assert_eq!(buf, [0xAA; 1024], "{what}: written on failure");
            assert_eq!(getter(handle, k, needed, &mut len), ITSME_OK, "{what}");
            assert_eq!(len, needed, "{what}");
            assert_eq!(buf[needed..], [0xAA; 1024][needed..], "{what}: written past *out_len");
            if what == "peer_public_key" {
                assert_eq!(needed, ITSME_PUBLIC_KEY_BYTES);
            }
            if what == "next_outgoing" {
                // The CONFIRM frame went out once, after the refusals.
                assert_eq!(buf[..2], [1, 4]);
                assert_eq!(getter(handle, null_mut(), 0, &mut len), ITSME_OK, "nothing left to send");
                assert_eq!(len, 0);
            }
            buf = [0xAA; 1024];
            len = 777;
        }
        itsme_store_free(bstore);
    }
}

#[test]
fn exchange_input_arguments() {
    let x = Exchanges::new("misuse-exchange-inputs");
    let (ex, s) = (x.a_ex, x.c.store);
    unsafe {
        let (mut state, mut flags) = (42u32, 42u32);
        assert_eq!(itsme_exchange_status(null(), &mut state, &mut flags), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_exchange_status(ex, null_mut(), &mut flags), ITSME_E_INVALID_ARGUMENT);
        assert_eq!((state, flags), (42, 42), "written on failure");
        assert_eq!(itsme_exchange_status(ex, &mut state, &mut flags), ITSME_OK);
        assert_eq!((state, flags), (ITSME_EXCHANGE_COMPARE_SAS, 0));

        let frame = [1u8, 4, 0];
        assert_eq!(itsme_exchange_receive(null_mut(), frame.as_ptr(), 3, T0), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_exchange_receive(ex, null(), 3, T0), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_exchange_receive(ex, frame.as_ptr(), 3, -1), ITSME_E_INVALID_ARGUMENT);

        let mut id = -1i64;
        for (what, call) in [
            ("save", itsme_exchange_save as unsafe extern "C" fn(_, _, _, _) -> _),
            ("confirm", itsme_exchange_confirm),
            ("settle", itsme_exchange_settle),
        ] {
            assert_eq!(call(null_mut(), s, T0, &mut id), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(call(ex, null_mut(), T0, &mut id), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(call(ex, s, T0, null_mut()), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(call(ex, s, -1, &mut id), ITSME_E_INVALID_ARGUMENT, "{what}");
            assert_eq!(id, -1, "{what}: written on failure");
        }
        assert_eq!(itsme_exchange_reject(null_mut(), s), ITSME_E_INVALID_ARGUMENT);

        // None of that changed the exchange or the store.
        assert_eq!(x.state(ex), ITSME_EXCHANGE_COMPARE_SAS);
        assert_eq!(x.c.count(), 2);
        assert_eq!(itsme_exchange_save(ex, s, T0, &mut id), ITSME_OK);
        assert_eq!(x.c.count(), 3);
        // A store is needed to undo the save.
        assert_eq!(itsme_exchange_reject(ex, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert!(x.detail(ex).contains("store"), "{}", x.detail(ex));
        assert_eq!(itsme_exchange_reject(ex, s), ITSME_OK);
        assert_eq!(x.c.count(), 2);
        assert_eq!(x.state(ex), ITSME_EXCHANGE_REJECTED);
    }
}

#[test]
fn exchange_next_outgoing_with_nothing_to_send() {
    let x = Exchanges::new("misuse-exchange-nothing");
    let mut len = 777usize;
    unsafe {
        // Nothing queued: OK with a NULL buffer, and *out_len 0.
        assert_eq!(itsme_exchange_next_outgoing(x.a_ex, null_mut(), 0, &mut len), ITSME_OK);
        assert_eq!(len, 0);
        len = 777;
        // Still refused: a NULL out_len, a NULL buffer with a capacity.
        assert_eq!(itsme_exchange_next_outgoing(x.a_ex, null_mut(), 0, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_exchange_next_outgoing(x.a_ex, null_mut(), 8, &mut len), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(len, 777);
        // A QR payload is not consumed by a size query, nor by reading it.
        let mut text = [0u8; ITSME_QR_PAYLOAD_MAX];
        assert_eq!(itsme_exchange_next_outgoing(x.qr, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        let needed = len;
        assert!(needed > 7 && needed <= ITSME_QR_PAYLOAD_MAX);
        for _ in 0..2 {
            assert_eq!(itsme_exchange_next_outgoing(x.qr, text.as_mut_ptr(), text.len(), &mut len), ITSME_OK);
            assert_eq!(len, needed);
            assert_eq!(&text[..7], b"ITSME1:");
        }
    }
}

#[test]
fn derivation_arguments() {
    init();
    let k = [9u8; 64];
    let (fa, fb) = (cstr("0123456789ABCDEF"), cstr("fedcba9876543210"));
    let code = cstr("ECHO 0042");
    let name = cstr("Alice");
    let mut out = [0xAAu8; 128];
    let mut len = 777usize;
    let o = out.as_mut_ptr();
    let inv = ITSME_E_INVALID_ARGUMENT;
    unsafe {
        // derive_seed
        assert_eq!(itsme_derive_seed(null(), 32, k.as_ptr(), 32, ptr(&fa), ptr(&fb), o, 64, &mut len), inv);
        assert_eq!(itsme_derive_seed(k.as_ptr(), 32, null(), 32, ptr(&fa), ptr(&fb), o, 64, &mut len), inv);
        assert_eq!(itsme_derive_seed(k.as_ptr(), 32, k.as_ptr(), 32, null(), ptr(&fb), o, 64, &mut len), inv);
        assert_eq!(itsme_derive_seed(k.as_ptr(), 32, k.as_ptr(), 32, ptr(&fa), null(), o, 64, &mut len), inv);
        assert_eq!(itsme_derive_seed(k.as_ptr(), 32, k.as_ptr(), 32, ptr(&fa), ptr(&fb), null_mut(), 64, &mut len), inv);
        assert_eq!(itsme_derive_seed(k.as_ptr(), 32, k.as_ptr(), 32, ptr(&fa), ptr(&fb), o, 64, null_mut()), inv);
        for n in [0usize, 31, 33] {
            assert_eq!(itsme_derive_seed(k.as_ptr(), n, k.as_ptr(), 32, ptr(&fa), ptr(&fb), o, 64, &mut len), inv, "{n}");
            assert_eq!(itsme_derive_seed(k.as_ptr(), 32, k.as_ptr(), n, ptr(&fa), ptr(&fb), o, 64, &mut len), inv, "{n}");
        }
        for bad in [&b"\0"[..], b"0123456789ABCDE\0", b"0123456789ABCDEG\0", b"0123456789ABCDEF0\0"] {
            assert_eq!(itsme_derive_seed(k.as_ptr(), 32, k.as_ptr(), 32, ptr(bad), ptr(&fb), o, 64, &mut len), inv, "{bad:?}");
        }
        // A low-order peer key gives an all-zero shared secret.
        let zero = [0u8; 32];
        assert_eq!(
            itsme_derive_seed(k.as_ptr(), 32, zero.as_ptr(), 32, ptr(&fa), ptr(&fb), o, 64, &mut len),
            ITSME_E_INVALID_KEY
        );
        assert_eq!(len, 777);
        assert_eq!(out, [0xAA; 128], "written on failure");
        assert_eq!(itsme_derive_seed(k.as_ptr(), 32, k.as_ptr(), 32, ptr(&fa), ptr(&fb), o, 31, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(len, 32);
        assert_eq!(out, [0xAA; 128], "written on failure");
        assert_eq!(itsme_derive_seed(k.as_ptr(), 32, k.as_ptr(), 32, ptr(&fa), ptr(&fb), o, 64, &mut len), ITSME_OK);
        assert_eq!(len, 32);
        assert_eq!(out[32..], [0xAA; 96], "written past *out_len");
        let mut seed = [0u8; 32];
        seed.copy_from_slice(&out[..32]);
        out = [0xAA; 128];
        len = 777;

        // derive_sas
        let s: *mut c_char = o.cast();
        assert_eq!(itsme_derive_sas(null(), 32, k.as_ptr(), 32, s, 64, &mut len), inv);
        assert_eq!(itsme_derive_sas(seed.as_ptr(), 32, null(), 32, s, 64, &mut len), inv);
        assert_eq!(itsme_derive_sas(seed.as_ptr(), 31, k.as_ptr(), 32, s, 64, &mut len), inv);
        assert_eq!(itsme_derive_sas(seed.as_ptr(), 32, k.as_ptr(), 33, s, 64, &mut len), inv);
        assert_eq!(itsme_derive_sas(seed.as_ptr(), 32, k.as_ptr(), 32, null_mut(), 64, &mut len), inv);
        assert_eq!(itsme_derive_sas(seed.as_ptr(), 32, k.as_ptr(), 32, s, 64, null_mut()), inv);
        assert_eq!(len, 777);
        assert_eq!(itsme_derive_sas(seed.as_ptr(), 32, k.as_ptr(), 32, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert!(len <= ITSME_SHORT_CODE_SIZE);
        assert_eq!(out, [0xAA; 128], "written on failure");
        assert_eq!(itsme_derive_sas(seed.as_ptr(), 32, k.as_ptr(), 32, s, 64, &mut len), ITSME_OK);
        assert_eq!(out[len - 1], 0);
        out = [0xAA; 128];
        len = 777;

        // qr_transcript_hash, with two genuine payloads.
        let (a, b) = (Fixture::new(), Fixture::new());
        let mut payloads = Vec::new();
        for identity in [a.identity, b.identity] {
            let mut qr = null_mut();
            let mut text = [0u8; ITSME_QR_PAYLOAD_MAX];
            assert_eq!(itsme_exchange_new_qr(identity, null_mut(), T0, &mut qr), ITSME_OK);
            assert_eq!(itsme_exchange_next_outgoing(qr, text.as_mut_ptr(), text.len(), &mut len), ITSME_OK);
            payloads.push(text[..len].to_vec());
            itsme_exchange_free(qr);
        }
        let (pa, pb) = (&payloads[0], &payloads[1]);
        len = 777;
        assert_eq!(itsme_qr_transcript_hash(null(), pa.len(), pb.as_ptr(), pb.len(), o, 64, &mut len), inv);
        assert_eq!(itsme_qr_transcript_hash(pa.as_ptr(), pa.len(), null(), pb.len(), o, 64, &mut len), inv);
        assert_eq!(itsme_qr_transcript_hash(pa.as_ptr(), pa.len(), pb.as_ptr(), pb.len(), null_mut(), 64, &mut len), inv);
        assert_eq!(itsme_qr_transcript_hash(pa.as_ptr(), pa.len(), pb.as_ptr(), pb.len(), o, 64, null_mut()), inv);
        assert_eq!(itsme_qr_transcript_hash(b"junk".as_ptr(), 4, pb.as_ptr(), pb.len(), o, 64, &mut len), inv);
        let text = b"ITSME1:AAAA";
        assert_eq!(itsme_qr_transcript_hash(text.as_ptr(), 11, pb.as_ptr(), pb.len(), o, 64, &mut len), ITSME_E_MALFORMED_MESSAGE);
        let mut tampered = pa.clone();
        let last = tampered.len() - 2;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        assert_eq!(
            itsme_qr_transcript_hash(tampered.as_ptr(), tampered.len(), pb.as_ptr(), pb.len(), o, 64, &mut len),
            ITSME_E_AUTHENTICATION_FAILED
        );
        assert_eq!(len, 777);
        assert_eq!(out, [0xAA; 128], "written on failure");
        assert_eq!(itsme_qr_transcript_hash(pa.as_ptr(), pa.len(), pb.as_ptr(), pb.len(), o, 31, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(len, 32);
        let mut th = [0u8; 32];
        assert_eq!(itsme_qr_transcript_hash(pa.as_ptr(), pa.len(), pb.as_ptr(), pb.len(), th.as_mut_ptr(), 32, &mut len), ITSME_OK);
        let mut reversed = [0u8; 32];
        assert_eq!(
            itsme_qr_transcript_hash(pb.as_ptr(), pb.len(), pa.as_ptr(), pa.len(), reversed.as_mut_ptr(), 32, &mut len),
            ITSME_OK
        );
        assert_eq!(th, reversed, "either order");
        len = 777;

        // bluetooth_commitment
        let commit = |i: *const u8, il: usize, e: *const u8, el: usize, n: *const c_char, d: *const u8, out: *mut u8, l: *mut usize| {
            itsme_bluetooth_commitment(i, il, e, el, n, d, 16, out, 64, l)
        };
        assert_eq!(commit(null(), 32, k.as_ptr(), 32, ptr(&name), k.as_ptr(), o, &mut len), inv);
        assert_eq!(commit(k.as_ptr(), 32, null(), 32, ptr(&name), k.as_ptr(), o, &mut len), inv);
        assert_eq!(commit(k.as_ptr(), 32, k.as_ptr(), 32, null(), k.as_ptr(), o, &mut len), inv);
        assert_eq!(commit(k.as_ptr(), 32, k.as_ptr(), 32, ptr(&name), null(), o, &mut len), inv);
        assert_eq!(commit(k.as_ptr(), 31, k.as_ptr(), 32, ptr(&name), k.as_ptr(), o, &mut len), inv);
        assert_eq!(commit(k.as_ptr(), 32, k.as_ptr(), 33, ptr(&name), k.as_ptr(), o, &mut len), inv);
        assert_eq!(commit(k.as_ptr(), 32, k.as_ptr(), 32, ptr(b"\0"), k.as_ptr(), o, &mut len), inv);
        assert_eq!(commit(k.as_ptr(), 32, k.as_ptr(), 32, ptr(b"a\nb\0"), k.as_ptr(), o, &mut len), inv);
        assert_eq!(commit(k.as_ptr(), 32, k.as_ptr(), 32, ptr(&name), k.as_ptr(), null_mut(), &mut len), inv);
        assert_eq!(commit(k.as_ptr(), 32, k.as_ptr(), 32, ptr(&name), k.as_ptr(), o, null_mut()), inv);

        // bluetooth_th1
        let f = k.as_ptr();
        assert_eq!(itsme_bluetooth_th1(null(), f, 42, f, 42, f, 34, f, 34, o, 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_th1(ptr(b"ECHO 42\0"), f, 42, f, 42, f, 34, f, 34, o, 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_th1(ptr(&code), null(), 42, f, 42, f, 34, f, 34, o, 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_th1(ptr(&code), f, 42, null(), 42, f, 34, f, 34, o, 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_th1(ptr(&code), f, 42, f, 42, null(), 34, f, 34, o, 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_th1(ptr(&code), f, 42, f, 42, f, 34, null(), 34, o, 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_th1(ptr(&code), f, 42, f, 42, f, 34, f, 34, null_mut(), 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_th1(ptr(&code), f, 42, f, 42, f, 34, f, 34, o, 64, null_mut()), inv);

        // bluetooth_session_keys: 64 bytes out.
        assert_eq!(itsme_bluetooth_session_keys(null(), 32, f, 32, f, 32, o, 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_session_keys(f, 32, null(), 32, f, 32, o, 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_session_keys(f, 32, f, 32, null(), 32, o, 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_session_keys(f, 31, f, 32, f, 32, o, 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_session_keys(f, 32, f, 33, f, 32, o, 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_session_keys(f, 32, f, 32, f, 31, o, 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_session_keys(f, 32, f, 32, f, 32, null_mut(), 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_session_keys(f, 32, f, 32, f, 32, o, 64, null_mut()), inv);
        assert_eq!(itsme_bluetooth_session_keys(f, 32, zero.as_ptr(), 32, f, 32, o, 64, &mut len), ITSME_E_INVALID_KEY);
        assert_eq!(len, 777);
        assert_eq!(out, [0xAA; 128], "written on failure");
        assert_eq!(itsme_bluetooth_session_keys(f, 32, f, 32, f, 32, o, 63, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(len, 64);
        assert_eq!(out, [0xAA; 128], "written on failure");
        len = 777;

        // bluetooth_transcript_hash
        assert_eq!(itsme_bluetooth_transcript_hash(null(), 32, f, 10, f, 10, o, 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_transcript_hash(f, 31, f, 10, f, 10, o, 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_transcript_hash(f, 32, null(), 10, f, 10, o, 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_transcript_hash(f, 32, f, 10, null(), 10, o, 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_transcript_hash(f, 32, f, 10, f, 10, null_mut(), 64, &mut len), inv);
        assert_eq!(itsme_bluetooth_transcript_hash(f, 32, f, 10, f, 10, o, 64, null_mut()), inv);
        assert_eq!(len, 777);
        assert_eq!(out, [0xAA; 128], "written on failure");

        // Each failure left a detail in the thread's slot.
        assert_eq!(itsme_bluetooth_transcript_hash(f, 31, f, 10, f, 10, o, 64, &mut len), inv);
        let mut detail = [0u8; 256];
        assert_eq!(itsme_last_error(detail.as_mut_ptr().cast(), 256, &mut len), ITSME_OK);
        assert!(len > 1, "no detail");
    }
}

/// As invalid_arguments_leave_out_len_alone, for the exchange functions.
#[test]
fn exchange_invalid_arguments_leave_out_len_alone() {
    let x = Exchanges::new("misuse-exchange-out-len");
    let ex = x.a_ex;
    let k = [9u8; 32];
    let mut buf = [0u8; 256];
    let b: *mut c_char = buf.as_mut_ptr().cast();
    let mut failures = Vec::new();
    let mut check = |call: &str, run: &dyn Fn(*mut usize) -> itsme_result| {
        let mut len = 777usize;
        let rc = run(&mut len);
        if rc != ITSME_E_INVALID_ARGUMENT {
            failures.push(format!("{call}: returned {rc}, expected ITSME_E_INVALID_ARGUMENT"));
        } else if len != 777 {
            failures.push(format!("{call}: returned ITSME_E_INVALID_ARGUMENT but set *out_len to {len}"));
        }
    };
    unsafe {
        check("itsme_short_code_format(260000, buf, 256, &len)", &|l| itsme_short_code_format(ITSME_SHORT_CODE_VALUES, b, 256, l));
        check("itsme_short_code_format(1, NULL, 256, &len)", &|l| itsme_short_code_format(1, null_mut(), 256, l));
        type Getter = unsafe extern "C" fn(*const itsme_exchange, *mut c_char, usize, *mut usize) -> itsme_result;
        let getters: [(&str, Getter); 5] = [
            ("itsme_exchange_last_error", itsme_exchange_last_error),
            ("itsme_exchange_session_code", itsme_exchange_session_code),
            ("itsme_exchange_sas", itsme_exchange_sas),
            ("itsme_exchange_peer_name", itsme_exchange_peer_name),
            ("itsme_exchange_peer_fingerprint", itsme_exchange_peer_fingerprint),
        ];
        for (name, getter) in getters {
            check(&format!("{name}(NULL, buf, 256, &len)"), &|l| getter(null(), b, 256, l));
            check(&format!("{name}(exchange, NULL, 256, &len)"), &|l| getter(ex, null_mut(), 256, l));
        }
        check("itsme_exchange_peer_public_key(NULL, buf, 256, &len)", &|l| itsme_exchange_peer_public_key(null(), b.cast(), 256, l));
        check("itsme_exchange_peer_public_key(exchange, NULL, 256, &len)", &|l| {
            itsme_exchange_peer_public_key(ex, null_mut(), 256, l)
        });
        check("itsme_exchange_next_outgoing(NULL, buf, 256, &len)", &|l| itsme_exchange_next_outgoing(null_mut(), b.cast(), 256, l));
        check("itsme_exchange_next_outgoing(qr, NULL, 256, &len)", &|l| itsme_exchange_next_outgoing(x.qr, null_mut(), 256, l));
        check("itsme_exchange_seal(NULL, buf, 256, &len)", &|l| itsme_exchange_seal(null_mut(), b.cast(), 256, l));
        check("itsme_exchange_seal(exchange, NULL, 256, &len)", &|l| itsme_exchange_seal(ex, null_mut(), 256, l));
        check("itsme_derive_seed(NULL, ...)", &|l| {
            itsme_derive_seed(null(), 32, k.as_ptr(), 32, ptr(b"0123456789ABCDEF\0"), ptr(b"0123456789ABCDEF\0"), b.cast(), 256, l)
        });
        check("itsme_derive_sas(seed, 31, ...)", &|l| itsme_derive_sas(k.as_ptr(), 31, k.as_ptr(), 32, b, 256, l));
        check("itsme_qr_transcript_hash(NULL, ...)", &|l| itsme_qr_transcript_hash(null(), 1, k.as_ptr(), 1, b.cast(), 256, l));
        check("itsme_bluetooth_commitment(key, 31, ...)", &|l| {
            itsme_bluetooth_commitment(k.as_ptr(), 31, k.as_ptr(), 32, ptr(b"A\0"), k.as_ptr(), 16, b.cast(), 256, l)
        });
        check("itsme_bluetooth_th1(NULL, ...)", &|l| {
            itsme_bluetooth_th1(null(), k.as_ptr(), 1, k.as_ptr(), 1, k.as_ptr(), 1, k.as_ptr(), 1, b.cast(), 256, l)
        });
        check("itsme_bluetooth_session_keys(secret, 31, ...)", &|l| {
            itsme_bluetooth_session_keys(k.as_ptr(), 31, k.as_ptr(), 32, k.as_ptr(), 32, b.cast(), 256, l)
        });
        check("itsme_bluetooth_transcript_hash(th1, 31, ...)", &|l| {
            itsme_bluetooth_transcript_hash(k.as_ptr(), 31, k.as_ptr(), 1, k.as_ptr(), 1, b.cast(), 256, l)
        });
    }
    assert!(failures.is_empty(), "{} disagreements with itsme.h:\n{}", failures.len(), failures.join("\n"));
}

// ---------------------------------------------------------------------------
// Voice verification
// ---------------------------------------------------------------------------

/// A voice session with Carol (the keyed contact of [`Contacts`], whose
/// seed is SEED and whose pid is CONTACT_KEY), planned at T0.
struct Voice {
    c: Contacts,
    voice: *mut itsme_voice,
}

impl Voice {
    fn new(tag: &str) -> Voice {
        let c = Contacts::new(tag);
        let mut voice = null_mut();
        assert_eq!(unsafe { itsme_voice_new(c.store, c.keyed, T0, &mut voice) }, ITSME_OK);
        assert!(!voice.is_null());
        Voice { c, voice }
    }

    fn window(&self) -> i64 {
        let mut window = 0i64;
        assert_eq!(unsafe { itsme_voice_timing(self.voice, T0, &mut window, null_mut(), null_mut()) }, ITSME_OK);
        window
    }

    fn status(&self) -> (itsme_voice_state, u32) {
        let (mut state, mut turn) = (0, 0);
        assert_eq!(unsafe { itsme_voice_status(self.voice, &mut state, &mut turn) }, ITSME_OK);
        (state, turn)
    }

    /// Starts the session at its window.
    fn start(&self) -> i64 {
        let now = 30 * self.window();
        assert_eq!(unsafe { itsme_voice_start(self.voice, self.c.store, now) }, ITSME_OK);
        now
    }

    /// A right word for the next selection: mine, or Carol's.
    fn next_word(&self) -> u32 {
        let mut words = [0u8; 5];
        let turn = self.status().1;
        unsafe {
            if turn == ITSME_VOICE_TURN_MINE {
                assert_eq!(itsme_voice_words(self.voice, words.as_mut_ptr(), 5), ITSME_OK);
            } else {
                assert_eq!(turn, ITSME_VOICE_TURN_THEIRS);
                let window = self.window();
                assert_eq!(itsme_derive_words(SEED.as_ptr(), 32, window, CONTACT_KEY.as_ptr(), 32, words.as_mut_ptr(), 5), ITSME_OK);
            }
        }
        u32::from(words[0])
    }

    /// Started, with both words entered.
    fn comparing(&self) -> i64 {
        let now = self.start();
        for _ in 0..2 {
            assert_eq!(unsafe { itsme_voice_select(self.voice, self.next_word(), now) }, ITSME_OK);
        }
        assert_eq!(self.status(), (ITSME_VOICE_COMPARING, ITSME_VOICE_TURN_NONE));
        now
    }

    fn detail(&self) -> String {
        let mut buf = [0u8; 512];
        let mut len = 0usize;
        assert_eq!(unsafe { itsme_voice_last_error(self.voice, buf.as_mut_ptr().cast(), 512, &mut len) }, ITSME_OK);
        String::from_utf8(buf[..len - 1].to_vec()).unwrap()
    }
}

impl Drop for Voice {
    fn drop(&mut self) {
        unsafe { itsme_voice_free(self.voice) };
    }
}

#[test]
fn nato_words() {
    unsafe {
        let words: Vec<&str> = (0..26).map(|i| CStr::from_ptr(itsme_nato_word(i)).to_str().unwrap()).collect();
        assert_eq!((words[0], words[23], words[25]), ("ALFA", "XRAY", "ZULU"));
        for index in [26, 100, u32::MAX] {
            assert!(itsme_nato_word(index).is_null(), "{index}");
        }
    }
}

#[test]
fn voice_constructor_arguments() {
    let c = Contacts::new("misuse-voice-new");
    unsafe {
        let mut out = sentinel();
        assert_eq!(itsme_voice_new(null_mut(), c.keyed, T0, &mut out), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_voice_new(c.store, c.keyed, T0, null_mut()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_voice_new(c.store, c.keyed, -1, &mut out), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(itsme_voice_new(c.store, 9999, T0, &mut out), ITSME_E_NOT_FOUND);
        assert!(!c.detail().is_empty(), "recorded on the store");
        assert_eq!(out, sentinel(), "written on failure");
        // An unauthenticated contact has a voice session too (its pid is
        // its fingerprint).
        let mut ok = null_mut();
        assert_eq!(itsme_voice_new(c.store, c.v5, T0, &mut ok), ITSME_OK);
        itsme_voice_free(ok);
        itsme_voice_free(null_mut());
    }
}

#[test]
fn voice_arguments() {
    let v = Voice::new("misuse-voice");
    let (voice, store) = (v.voice, v.c.store);
    let inv = ITSME_E_INVALID_ARGUMENT;
    unsafe {
        // status: out_turn may be NULL, out_state may not.
        let (mut state, mut turn) = (42u32, 42u32);
        assert_eq!(itsme_voice_status(null(), &mut state, &mut turn), inv);
        assert_eq!(itsme_voice_status(voice, null_mut(), &mut turn), inv);
        assert_eq!((state, turn), (42, 42), "written on failure");
        assert_eq!(itsme_voice_status(voice, &mut state, null_mut()), ITSME_OK);
        assert_eq!(state, ITSME_VOICE_WAITING);

        // timing: every output may be NULL, the handle may not.
        let (mut window, mut starts_in, mut ends_in) = (7i64, 7i64, 7i64);
        assert_eq!(itsme_voice_timing(null(), T0, &mut window, &mut starts_in, &mut ends_in), inv);
        assert_eq!((window, starts_in, ends_in), (7, 7, 7));
        assert_eq!(itsme_voice_timing(voice, T0, null_mut(), null_mut(), null_mut()), ITSME_OK);
        assert_eq!(itsme_voice_timing(voice, T0, &mut window, &mut starts_in, &mut ends_in), ITSME_OK);
        assert_eq!((starts_in, ends_in), (30 * window - T0, 30 * (window + 2) - T0));

        // session_id, last_error: text outputs.
        let mut buf = [0xAAu8; 64];
        let mut len = 777usize;
        let b: *mut c_char = buf.as_mut_ptr().cast();
        type Getter = unsafe extern "C" fn(*const itsme_voice, *mut c_char, usize, *mut usize) -> itsme_result;
        for (what, getter) in [("session_id", itsme_voice_session_id as Getter), ("last_error", itsme_voice_last_error)] {
            assert_eq!(getter(null(), b, 64, &mut len), inv, "{what}");
            assert_eq!(getter(voice, null_mut(), 64, &mut len), inv, "{what}");
            assert_eq!(getter(voice, b, 64, null_mut()), inv, "{what}");
            assert_eq!(len, 777, "{what}: *out_len set by a refused call");
            assert_eq!(buf, [0xAA; 64], "{what}: written on failure");
        }
        assert_eq!(itsme_voice_session_id(voice, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert!((8..=ITSME_VOICE_SESSION_ID_SIZE).contains(&len), "{len}");
        assert_eq!(itsme_voice_session_id(voice, b, len - 1, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(buf, [0xAA; 64], "written on failure");

        // words: five bytes, no out_len.
        let mut words = [0xAAu8; 8];
        assert_eq!(itsme_voice_words(null(), words.as_mut_ptr(), 5), inv);
        assert_eq!(itsme_voice_words(voice, null_mut(), 5), inv);
        assert_eq!(itsme_voice_words(voice, words.as_mut_ptr(), 4), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(words, [0xAA; 8], "written on failure");
        assert_eq!(itsme_voice_words(voice, words.as_mut_ptr(), 8), ITSME_OK);
        assert_eq!(words[5..], [0xAA; 3], "written past the five words");

        // start: the handle and the store.
        let now = 30 * v.window();
        assert_eq!(itsme_voice_start(null_mut(), store, now), inv);
        assert_eq!(itsme_voice_start(voice, null_mut(), now), inv);
        assert_eq!(itsme_voice_start(voice, store, now - 16), ITSME_E_INVALID_STATE, "too early");
        assert!(!v.detail().is_empty());
        assert_eq!(v.status().0, ITSME_VOICE_WAITING, "nothing changed");

        // select
        assert_eq!(itsme_voice_select(voice, 0, now), ITSME_E_INVALID_STATE, "not started");
        assert_eq!(itsme_voice_start(voice, store, now), ITSME_OK);
        assert_eq!(itsme_voice_select(null_mut(), v.next_word(), now), inv);
        assert_eq!(itsme_voice_select(voice, 26, now), inv);
        assert_eq!(itsme_voice_select(voice, u32::MAX, now), inv);
        assert_eq!(v.status().0, ITSME_VOICE_SELECTING, "nothing changed");

        // your_code, their_code: before the codes, and NULLs.
        let mut tag = 42u32;
        type Code = unsafe extern "C" fn(*const itsme_voice, *mut c_char, usize, *mut usize, *mut u32) -> itsme_result;
        for (what, code) in [("your_code", itsme_voice_your_code as Code), ("their_code", itsme_voice_their_code)] {
            assert_eq!(code(voice, b, 64, &mut len, &mut tag), ITSME_E_INVALID_STATE, "{what}");
        }
        for _ in 0..2 {
            assert_eq!(itsme_voice_select(voice, v.next_word(), now), ITSME_OK);
        }
        len = 777;
        for (what, code) in [("your_code", itsme_voice_your_code as Code), ("their_code", itsme_voice_their_code)] {
            assert_eq!(code(null(), b, 64, &mut len, &mut tag), inv, "{what}");
            assert_eq!(code(voice, null_mut(), 64, &mut len, &mut tag), inv, "{what}");
            assert_eq!(code(voice, b, 64, null_mut(), &mut tag), inv, "{what}");
            assert_eq!(code(voice, b, 64, &mut len, null_mut()), inv, "{what}");
            assert_eq!((len, tag, buf), (777, 42, [0xAA; 64]), "{what}: written on failure");
            assert_eq!(code(voice, null_mut(), 0, &mut len, &mut tag), ITSME_E_BUFFER_TOO_SMALL, "{what}");
            assert!((9..=ITSME_VOICE_CODE_SIZE).contains(&len), "{what}: {len}");
            assert_eq!(code(voice, b, len - 1, &mut len, &mut tag), ITSME_E_BUFFER_TOO_SMALL, "{what}");
            assert_eq!((tag, buf), (42, [0xAA; 64]), "{what}: written on failure");
            assert_eq!(code(voice, b, len, &mut len, &mut tag), ITSME_OK, "{what}");
            assert_eq!(buf[len - 1], 0, "{what}");
            buf = [0xAA; 64];
            len = 777;
            tag = 42;
        }
        // Carol was added without device secrets: her tag is unknown.
        assert_eq!(itsme_voice_their_code(voice, b, 64, &mut len, &mut tag), ITSME_OK);
        assert_eq!(tag, ITSME_VOICE_TAG_UNKNOWN);

        // check
        let heard = cstr("ECHO 512");
        let mut outcome = 42u32;
        assert_eq!(itsme_voice_check(null_mut(), store, ptr(&heard), 1, now, &mut outcome), inv);
        assert_eq!(itsme_voice_check(voice, null_mut(), ptr(&heard), 1, now, &mut outcome), inv);
        assert_eq!(itsme_voice_check(voice, store, null(), 1, now, &mut outcome), inv);
        assert_eq!(itsme_voice_check(voice, store, ptr(&heard), 1, now, null_mut()), inv);
        assert_eq!(itsme_voice_check(voice, store, ptr(&heard), 100, now, &mut outcome), inv);
        assert_eq!(itsme_voice_check(voice, store, ptr(b"ECHO 5\xff2\0"), 1, now, &mut outcome), inv);
        assert_eq!(itsme_voice_check(voice, store, ptr(b"ECHO 51\0"), 1, now, &mut outcome), inv);
        assert_eq!(outcome, 42, "written on failure");
        assert_eq!(v.status().0, ITSME_VOICE_COMPARING, "nothing changed");
        assert_eq!(itsme_voice_check(voice, store, ptr(&heard), 99, now, &mut outcome), ITSME_OK);
        assert!(outcome == ITSME_VOICE_MISMATCH || outcome == ITSME_VOICE_VERIFIED_TAG_UNCHECKED, "{outcome}");
        assert_eq!(v.status(), (ITSME_VOICE_FINISHED, ITSME_VOICE_TURN_NONE));
    }
}

#[test]
fn voice_needs_its_own_store() {
    let v = Voice::new("misuse-voice-store");
    let other = Contacts::new("misuse-voice-other");
    unsafe {
        let now = 30 * v.window();
        assert_eq!(itsme_voice_start(v.voice, other.store, now), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(v.status().0, ITSME_VOICE_WAITING);
        let now = v.comparing();
        let heard = cstr("ECHO 512");
        let mut outcome = 42u32;
        assert_eq!(itsme_voice_check(v.voice, other.store, ptr(&heard), 1, now, &mut outcome), ITSME_E_INVALID_ARGUMENT);
        assert_eq!((v.status().0, outcome), (ITSME_VOICE_COMPARING, 42));
    }
}

#[test]
fn voice_derivation_arguments() {
    init();
    let (k, s) = (CONTACT_KEY, SEED);
    let secret = [3u8; 65];
    let inv = ITSME_E_INVALID_ARGUMENT;
    let mut text = [0xAAu8; 32];
    let t: *mut c_char = text.as_mut_ptr().cast();
    let mut len = 777usize;
    let mut words = [0xAAu8; 5];
    let mut flag: c_int = 42;
    let mut tag = 42u32;
    let mut derivation = itsme_voice_derivation { session_id: 42, ..Default::default() };
    unsafe {
        // derive_session_id
        assert_eq!(itsme_derive_session_id(null(), 32, 1, t, 32, &mut len), inv);
        assert_eq!(itsme_derive_session_id(s.as_ptr(), 31, 1, t, 32, &mut len), inv);
        assert_eq!(itsme_derive_session_id(s.as_ptr(), 32, 1, null_mut(), 32, &mut len), inv);
        assert_eq!(itsme_derive_session_id(s.as_ptr(), 32, 1, t, 32, null_mut()), inv);
        // derive_words: pids of 32 or 8 bytes.
        assert_eq!(itsme_derive_words(null(), 32, 1, k.as_ptr(), 32, words.as_mut_ptr(), 5), inv);
        assert_eq!(itsme_derive_words(s.as_ptr(), 32, 1, null(), 32, words.as_mut_ptr(), 5), inv);
        assert_eq!(itsme_derive_words(s.as_ptr(), 32, 1, k.as_ptr(), 32, null_mut(), 5), inv);
        for n in [0usize, 7, 9, 31] {
            assert_eq!(itsme_derive_words(s.as_ptr(), 32, 1, k.as_ptr(), n, words.as_mut_ptr(), 5), inv, "{n}");
        }
        assert_eq!(itsme_derive_words(s.as_ptr(), 32, 1, k.as_ptr(), 32, words.as_mut_ptr(), 4), ITSME_E_BUFFER_TOO_SMALL);
        // derive_lower_selects_first
        assert_eq!(itsme_derive_lower_selects_first(null(), 32, 1, &mut flag), inv);
        assert_eq!(itsme_derive_lower_selects_first(s.as_ptr(), 32, 1, null_mut()), inv);
        // derive_code
        let p = k.as_ptr();
        assert_eq!(itsme_derive_code(null(), 32, 1, p, 32, 1, p, 32, 2, p, 32, t, 32, &mut len), inv);
        assert_eq!(itsme_derive_code(s.as_ptr(), 32, 1, null(), 32, 1, p, 32, 2, p, 32, t, 32, &mut len), inv);
        assert_eq!(itsme_derive_code(s.as_ptr(), 32, 1, p, 32, 1, null(), 32, 2, p, 32, t, 32, &mut len), inv);
        assert_eq!(itsme_derive_code(s.as_ptr(), 32, 1, p, 32, 1, p, 32, 2, null(), 32, t, 32, &mut len), inv);
        assert_eq!(itsme_derive_code(s.as_ptr(), 32, 1, p, 32, 1, p, 32, 2, p, 32, null_mut(), 32, &mut len), inv);
        assert_eq!(itsme_derive_code(s.as_ptr(), 32, 1, p, 32, 1, p, 32, 2, p, 32, t, 32, null_mut()), inv);
        assert_eq!(itsme_derive_code(s.as_ptr(), 32, 1, p, 32, 26, p, 32, 2, p, 32, t, 32, &mut len), inv);
        assert_eq!(itsme_derive_code(s.as_ptr(), 32, 1, p, 32, 1, p, 32, 26, p, 32, t, 32, &mut len), inv);
        // derive_device_tag: the secret may be NULL only when empty.
        assert_eq!(itsme_derive_device_tag(null(), 32, 1, p, 32, secret.as_ptr(), 16, &mut tag), inv);
        assert_eq!(itsme_derive_device_tag(s.as_ptr(), 32, 1, null(), 32, secret.as_ptr(), 16, &mut tag), inv);
        assert_eq!(itsme_derive_device_tag(s.as_ptr(), 32, 1, p, 32, null(), 16, &mut tag), inv);
        assert_eq!(itsme_derive_device_tag(s.as_ptr(), 32, 1, p, 32, secret.as_ptr(), 65, &mut tag), inv);
        assert_eq!(itsme_derive_device_tag(s.as_ptr(), 32, 1, p, 32, secret.as_ptr(), 16, null_mut()), inv);
        // derive_voice: both secrets may be NULL only when empty.
        let d = &mut derivation as *mut itsme_voice_derivation;
        let sp = secret.as_ptr();
        assert_eq!(itsme_derive_voice(null(), 32, 1, p, 32, p, 8, sp, 16, sp, 16, 1, 2, d), inv);
        assert_eq!(itsme_derive_voice(s.as_ptr(), 32, 1, null(), 32, p, 8, sp, 16, sp, 16, 1, 2, d), inv);
        assert_eq!(itsme_derive_voice(s.as_ptr(), 32, 1, p, 32, null(), 8, sp, 16, sp, 16, 1, 2, d), inv);
        assert_eq!(itsme_derive_voice(s.as_ptr(), 32, 1, p, 32, p, 8, null(), 16, sp, 16, 1, 2, d), inv);
        assert_eq!(itsme_derive_voice(s.as_ptr(), 32, 1, p, 32, p, 8, sp, 16, null(), 16, 1, 2, d), inv);
        assert_eq!(itsme_derive_voice(s.as_ptr(), 32, 1, p, 32, p, 8, sp, 65, sp, 16, 1, 2, d), inv);
        assert_eq!(itsme_derive_voice(s.as_ptr(), 32, 1, p, 32, p, 8, sp, 16, sp, 16, 26, 2, d), inv);
        assert_eq!(itsme_derive_voice(s.as_ptr(), 32, 1, p, 32, p, 8, sp, 16, sp, 16, 1, 2, null_mut()), inv);

        assert_eq!((text, len, words, flag, tag), ([0xAA; 32], 777, [0xAA; 5], 42, 42), "written on failure");
        assert_eq!(derivation.session_id, 42, "written on failure");

        // And with valid arguments (NULL secrets of length 0).
        assert_eq!(itsme_derive_device_tag(s.as_ptr(), 32, 1, p, 32, null(), 0, &mut tag), ITSME_OK);
        assert!(tag < 100);
        assert_eq!(itsme_derive_voice(s.as_ptr(), 32, 1, p, 32, p, 8, null(), 0, null(), 0, 1, 2, d), ITSME_OK);
        assert_eq!(derivation.my_tag, tag, "the same empty secret");
        assert_eq!(derivation.reserved, 0);
        assert_eq!(itsme_derive_code(s.as_ptr(), 32, 1, p, 32, 1, p, 8, 2, p, 32, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert!((9..=ITSME_VOICE_CODE_SIZE).contains(&len), "{len}");
    }
}

// ---------------------------------------------------------------------------
// The degradation code, Online Verify, PIN Update
// ---------------------------------------------------------------------------

const DEGRADATION_SECRET: [u8; 10] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];

/// The degradation code Carol (pid CONTACT_KEY, seed SEED) would send, with
/// its NUL.
fn carol_code() -> Vec<u8> {
    init();
    let mut buf = [0u8; 64];
    let mut len = 0usize;
    let code = unsafe {
        let (seed, pid, secret) = (SEED.as_ptr(), CONTACT_KEY.as_ptr(), DEGRADATION_SECRET.as_ptr());
        itsme_derive_degradation_code(seed, 32, pid, 32, secret, 10, buf.as_mut_ptr().cast(), 64, &mut len)
    };
    assert_eq!((code, len), (ITSME_OK, ITSME_DEGRADATION_CODE_SIZE));
    buf[..len].to_vec()
}

/// A deterministic random source; the caller frees it.
fn random(first: u8) -> *mut itsme_random {
    let seed: Vec<u8> = (first..first + 32).collect();
    let mut rng = null_mut();
    assert_eq!(unsafe { itsme_random_new_deterministic(seed.as_ptr(), 32, &mut rng) }, ITSME_OK);
    rng
}

#[test]
fn session_free_functions_accept_null() {
    unsafe {
        itsme_online_verify_free(null_mut());
        itsme_pin_update_free(null_mut());
    }
}

#[test]
fn degradation_code_arguments() {
    let c = Contacts::new("misuse-degradation");
    let (s, id) = (c.store, c.keyed);
    let inv = ITSME_E_INVALID_ARGUMENT;
    unsafe {
        let mut buf = [0xAAu8; 64];
        let mut len = 777usize;
        let b: *mut c_char = buf.as_mut_ptr().cast();
        assert_eq!(itsme_store_degradation_code(null_mut(), id, null_mut(), b, 64, &mut len), inv);
        assert_eq!(itsme_store_degradation_code(s, id, null_mut(), null_mut(), 64, &mut len), inv);
        assert_eq!(itsme_store_degradation_code(s, id, null_mut(), b, 64, null_mut()), inv);
        assert_eq!((buf, len), ([0xAA; 64], 777), "written on failure");
        assert_eq!(itsme_store_degradation_code(s, 9999, null_mut(), b, 64, &mut len), ITSME_E_NOT_FOUND);
        assert!(!c.detail().is_empty(), "recorded on the store");
        assert_eq!((buf, len), ([0xAA; 64], 777), "written on failure");
        // Too small: the size, and nothing drawn from the random source.
        let refused = random(40);
        for cap in [0usize, 1, ITSME_DEGRADATION_CODE_SIZE - 1] {
            let out = if cap == 0 { null_mut() } else { b };
            assert_eq!(itsme_store_degradation_code(s, id, refused, out, cap, &mut len), ITSME_E_BUFFER_TOO_SMALL);
            assert_eq!(len, ITSME_DEGRADATION_CODE_SIZE);
            assert_eq!(buf, [0xAA; 64], "written on failure");
        }
        assert_eq!(itsme_store_degradation_code(s, id, refused, b, 64, &mut len), ITSME_OK);
        let after_refusals = buf[..len].to_vec();
        let fresh = random(40);
        assert_eq!(itsme_store_degradation_code(s, id, fresh, b, 64, &mut len), ITSME_OK);
        assert_eq!(buf[..len], after_refusals[..], "the refused calls drew nothing");
        itsme_random_free(refused);
        itsme_random_free(fresh);
        assert_eq!(buf[len - 1], 0);
        assert_eq!(buf[..len - 1].iter().filter(|&&c| c == b'-').count(), 5);
        // The operating system's random source.
        assert_eq!(itsme_store_degradation_code(s, id, null_mut(), b, 64, &mut len), ITSME_OK);

        // accept: junk is an invalid argument, and not counted.
        let code = carol_code();
        let now = T0;
        assert_eq!(itsme_store_accept_degradation_code(null_mut(), id, ptr(&code), now), inv);
        assert_eq!(itsme_store_accept_degradation_code(s, id, null(), now), inv);
        for junk in [&b"\0"[..], b"ABCD\0", b"ABCD-EFGH-IJKL-MNOP-QRST-UVW1\0", b"ABCD-EFGH-\xc3(JKL-MNOP-QRST-UVWX\0"] {
            for _ in 0..6 {
                assert_eq!(itsme_store_accept_degradation_code(s, id, ptr(junk), now), inv, "{junk:?}");
            }
        }
        for bad in [-1, MAX_TIME + 1] {
            assert_eq!(itsme_store_accept_degradation_code(s, id, ptr(&code), bad), inv);
        }
        assert_eq!(itsme_store_accept_degradation_code(s, 9999, ptr(&code), now), ITSME_E_NOT_FOUND);
        assert_eq!(itsme_store_accept_degradation_code(s, id, ptr(&code), now), ITSME_OK);
        let contact = c.snapshot(id);
        let (mut state, mut acknowledged) = (0u32, 0 as c_int);
        assert_eq!(itsme_contact_state(contact, &mut state, &mut acknowledged), ITSME_OK);
        itsme_contact_free(contact);
        assert_eq!((state, acknowledged), (ITSME_CONTACT_DEGRADED, 1));
    }
}

#[test]
fn derive_degradation_code_arguments() {
    init();
    let (seed, pid, secret) = (SEED, CONTACT_KEY, [3u8; 16]);
    let inv = ITSME_E_INVALID_ARGUMENT;
    let mut buf = [0xAAu8; 64];
    let mut len = 777usize;
    let b: *mut c_char = buf.as_mut_ptr().cast();
    unsafe {
        let (s, p, r) = (seed.as_ptr(), pid.as_ptr(), secret.as_ptr());
        assert_eq!(itsme_derive_degradation_code(null(), 32, p, 32, r, 10, b, 64, &mut len), inv);
        assert_eq!(itsme_derive_degradation_code(s, 32, null(), 32, r, 10, b, 64, &mut len), inv);
        assert_eq!(itsme_derive_degradation_code(s, 32, p, 32, null(), 10, b, 64, &mut len), inv);
        assert_eq!(itsme_derive_degradation_code(s, 32, p, 32, r, 10, null_mut(), 64, &mut len), inv);
        assert_eq!(itsme_derive_degradation_code(s, 32, p, 32, r, 10, b, 64, null_mut()), inv);
        let sizes = [(31, 32, 10), (33, 32, 10), (32, 0, 10), (32, 7, 10), (32, 31, 10), (32, 32, 9), (32, 32, 11), (32, 32, 0)];
        for (seed_len, pid_len, secret_len) in sizes.into_iter().chain([(32, 32, 16)]) {
            let code = itsme_derive_degradation_code(s, seed_len, p, pid_len, r, secret_len, b, 64, &mut len);
            assert_eq!(code, inv, "{seed_len} {pid_len} {secret_len}");
        }
        assert_eq!((buf, len), ([0xAA; 64], 777), "written on failure");
        assert_eq!(itsme_derive_degradation_code(s, 32, p, 32, r, 10, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(len, ITSME_DEGRADATION_CODE_SIZE);
        let short = ITSME_DEGRADATION_CODE_SIZE - 1;
        assert_eq!(itsme_derive_degradation_code(s, 32, p, 32, r, 10, b, short, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(buf, [0xAA; 64], "written on failure");
        // A fingerprint pid (8 bytes) is a pid.
        assert_eq!(itsme_derive_degradation_code(s, 32, p, 8, r, 10, b, 64, &mut len), ITSME_OK);
        assert_eq!(len, ITSME_DEGRADATION_CODE_SIZE);
        assert_eq!(buf[len..], [0xAA; 64 - ITSME_DEGRADATION_CODE_SIZE], "written past the code");
    }
}

/// One side of two identities that hold each other as contacts (seed
/// SEED): its contact store and the id of the other.
struct Side {
    store: *mut itsme_store,
    peer: i64,
    key: [u8; 32],
    _f: Fixture,
    _dir: common::TempDir,
}

impl Drop for Side {
    fn drop(&mut self) {
        unsafe { itsme_store_free(self.store) };
    }
}

/// Two such sides, the initiator (the lower pid) first.
fn sides(tag: &str) -> (Side, Side) {
    let made: Vec<(Fixture, common::TempDir, *mut itsme_store, [u8; 32])> = (0..2)
        .map(|n| {
            let f = Fixture::new();
            let dir = common::TempDir::new(&format!("{tag}-{n}"));
            let path = cstr(dir.path().join("contacts.db").to_str().unwrap());
            let mut store = null_mut();
            let mut key = [0u8; 32];
            let mut len = 0usize;
            unsafe {
                assert_eq!(itsme_store_open(f.identity, ptr(&path), &mut store), ITSME_OK);
                assert_eq!(itsme_identity_public_key(f.identity, key.as_mut_ptr(), 32, &mut len), ITSME_OK);
            }
            (f, dir, store, key)
        })
        .collect();
    let mut made = made.into_iter();
    let (fa, da, sa, ka) = made.next().unwrap();
    let (fb, db, sb, kb) = made.next().unwrap();
    let (mut pa, mut pb) = (0i64, 0i64);
    let name = cstr("Peer");
    unsafe {
        assert_eq!(itsme_store_add(sa, ptr(&name), kb.as_ptr(), 32, SEED.as_ptr(), 32, ITSME_EXCHANGE_QR, T0, &mut pa), ITSME_OK);
        assert_eq!(itsme_store_add(sb, ptr(&name), ka.as_ptr(), 32, SEED.as_ptr(), 32, ITSME_EXCHANGE_QR, T0, &mut pb), ITSME_OK);
    }
    let a = Side { store: sa, peer: pa, key: ka, _f: fa, _dir: da };
    let b = Side { store: sb, peer: pb, key: kb, _f: fb, _dir: db };
    if a.key < b.key {
        (a, b)
    } else {
        (b, a)
    }
}

/// An Online Verify session, freed when dropped.
struct Ov(*mut itsme_online_verify);

impl Ov {
    fn new(side: &Side) -> Ov {
        let mut out = null_mut();
        assert_eq!(unsafe { itsme_online_verify_new(side.store, side.peer, T0 / 30, null_mut(), T0, &mut out) }, ITSME_OK);
        Ov(out)
    }

    fn state(&self) -> itsme_online_verify_state {
        let mut state = 0;
        assert_eq!(unsafe { itsme_online_verify_status(self.0, &mut state) }, ITSME_OK);
        state
    }

    fn next(&self) -> Vec<u8> {
        let mut buf = [0u8; ITSME_ONLINE_VERIFY_MESSAGE_MAX];
        let mut len = 0usize;
        assert_eq!(unsafe { itsme_online_verify_next_outgoing(self.0, buf.as_mut_ptr(), buf.len(), &mut len) }, ITSME_OK);
        buf[..len].to_vec()
    }

    fn detail(&self) -> String {
        let mut buf = [0u8; 512];
        let mut len = 0usize;
        assert_eq!(unsafe { itsme_online_verify_last_error(self.0, buf.as_mut_ptr().cast(), 512, &mut len) }, ITSME_OK);
        String::from_utf8(buf[..len - 1].to_vec()).unwrap()
    }
}

impl Drop for Ov {
    fn drop(&mut self) {
        unsafe { itsme_online_verify_free(self.0) };
    }
}

/// Moves messages between two sessions until neither has one.
fn ov_pump(a: &Ov, b: &Ov) {
    loop {
        let mut moved = false;
        for (from, to) in [(a, b), (b, a)] {
            let message = from.next();
            if !message.is_empty() {
                assert_eq!(unsafe { itsme_online_verify_receive(to.0, message.as_ptr(), message.len(), T0) }, ITSME_OK);
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
}

#[test]
fn online_verify_constructor_arguments() {
    let c = Contacts::new("misuse-ov-new");
    let window = T0 / 30;
    let inv = ITSME_E_INVALID_ARGUMENT;
    unsafe {
        let mut out = sentinel();
        assert_eq!(itsme_online_verify_new(null_mut(), c.keyed, window, null_mut(), T0, &mut out), inv);
        assert_eq!(itsme_online_verify_new(c.store, c.keyed, window, null_mut(), T0, null_mut()), inv);
        for other in [window + 1, window - 2, 0, -1, i64::MAX] {
            assert_eq!(itsme_online_verify_new(c.store, c.keyed, other, null_mut(), T0, &mut out), inv, "{other}");
        }
        assert!(!c.detail().is_empty(), "recorded on the store");
        for now in [-1, MAX_TIME + 1] {
            assert_eq!(itsme_online_verify_new(c.store, c.keyed, now.div_euclid(30), null_mut(), now, &mut out), inv, "{now}");
        }
        assert_eq!(itsme_online_verify_new(c.store, 9999, window, null_mut(), T0, &mut out), ITSME_E_NOT_FOUND);
        assert_eq!(out, sentinel(), "written on failure");
        // The window before, a deterministic random source, and an
        // unauthenticated contact (its pid is its fingerprint).
        let rng = random(1);
        for (id, window, rng) in [(c.keyed, window - 1, null_mut()), (c.keyed, window, rng), (c.v5, window, null_mut())] {
            let mut ok = null_mut();
            assert_eq!(itsme_online_verify_new(c.store, id, window, rng, T0, &mut ok), ITSME_OK);
            assert!(!ok.is_null());
            itsme_online_verify_free(ok);
        }
        itsme_random_free(rng);
    }
}

#[test]
fn online_verify_arguments() {
    let (i_side, r_side) = sides("misuse-ov");
    let (i, r) = (Ov::new(&i_side), Ov::new(&r_side));
    let inv = ITSME_E_INVALID_ARGUMENT;
    unsafe {
        // status
        let mut state = 42u32;
        assert_eq!(itsme_online_verify_status(null(), &mut state), inv);
        assert_eq!(itsme_online_verify_status(i.0, null_mut()), inv);
        assert_eq!(state, 42, "written on failure");
        assert_eq!(i.state(), ITSME_ONLINE_VERIFY_RUNNING);

        // room, last_error: text outputs.
        let mut buf = [0xAAu8; 64];
        let mut len = 777usize;
        let b: *mut c_char = buf.as_mut_ptr().cast();
        type Getter = unsafe extern "C" fn(*const itsme_online_verify, *mut c_char, usize, *mut usize) -> itsme_result;
        for (what, getter) in [("room", itsme_online_verify_room as Getter), ("last_error", itsme_online_verify_last_error)] {
            assert_eq!(getter(null(), b, 64, &mut len), inv, "{what}");
            assert_eq!(getter(i.0, null_mut(), 64, &mut len), inv, "{what}");
            assert_eq!(getter(i.0, b, 64, null_mut()), inv, "{what}");
            assert_eq!((buf, len), ([0xAA; 64], 777), "{what}: written on failure");
        }
        assert_eq!(itsme_online_verify_room(i.0, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(len, ITSME_ROOM_NAME_SIZE);
        assert_eq!(itsme_online_verify_room(i.0, b, ITSME_ROOM_NAME_SIZE - 1, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(buf, [0xAA; 64], "written on failure");
        assert_eq!(itsme_online_verify_room(i.0, b, 64, &mut len), ITSME_OK);
        assert_eq!(buf[32], 0);
        assert!(buf[..32].iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)));
        len = 777;
        buf = [0xAA; 64];
        assert_eq!(itsme_online_verify_sas(i.0, b, 64, &mut len), ITSME_E_INVALID_STATE, "no SAS yet");
        assert_eq!((buf, len), ([0xAA; 64], 777));
        assert!(!i.detail().is_empty());
        assert_eq!(i.state(), ITSME_ONLINE_VERIFY_RUNNING, "refused without failing");

        // next_outgoing: the initiator's COMMIT, not consumed by a refusal.
        let mut out = [0xAAu8; 128];
        assert_eq!(itsme_online_verify_next_outgoing(null_mut(), out.as_mut_ptr(), 128, &mut len), inv);
        assert_eq!(itsme_online_verify_next_outgoing(i.0, null_mut(), 128, &mut len), inv);
        assert_eq!(itsme_online_verify_next_outgoing(i.0, out.as_mut_ptr(), 128, null_mut()), inv);
        assert_eq!(itsme_online_verify_next_outgoing(i.0, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(len, 34, "a COMMIT is 34 bytes");
        assert_eq!(itsme_online_verify_next_outgoing(i.0, out.as_mut_ptr(), 33, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(out, [0xAA; 128], "written on failure");
        let commit = i.next();
        assert_eq!((commit.len(), commit[0], commit[1]), (34, 1, 1));
        assert_eq!(itsme_online_verify_next_outgoing(i.0, null_mut(), 0, &mut len), ITSME_OK);
        assert_eq!(len, 0, "nothing more to send");
        assert!(r.next().is_empty(), "the responder waits for the COMMIT");

        // receive: NULLs leave the session running.
        assert_eq!(itsme_online_verify_receive(null_mut(), commit.as_ptr(), commit.len(), T0), inv);
        assert_eq!(itsme_online_verify_receive(r.0, null(), commit.len(), T0), inv);
        assert_eq!(r.state(), ITSME_ONLINE_VERIFY_RUNNING);
        assert_eq!(itsme_online_verify_receive(r.0, commit.as_ptr(), commit.len(), T0), ITSME_OK);

        // confirm: not before the SAS.
        let mut outcome = 42u32;
        assert_eq!(itsme_online_verify_confirm(i.0, i_side.store, T0, &mut outcome), ITSME_E_INVALID_STATE);
        assert_eq!(outcome, 42);
        ov_pump(&i, &r);
        assert_eq!((i.state(), r.state()), (ITSME_ONLINE_VERIFY_COMPARE_SAS, ITSME_ONLINE_VERIFY_COMPARE_SAS));

        // sas: a text output, once there is one.
        len = 777;
        assert_eq!(itsme_online_verify_sas(null(), b, 64, &mut len), inv);
        assert_eq!(itsme_online_verify_sas(i.0, null_mut(), 64, &mut len), inv);
        assert_eq!(itsme_online_verify_sas(i.0, b, 64, null_mut()), inv);
        assert_eq!((buf, len), ([0xAA; 64], 777), "written on failure");
        assert_eq!(itsme_online_verify_sas(i.0, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert!((10..=ITSME_SHORT_CODE_SIZE).contains(&len), "{len}");
        assert_eq!(itsme_online_verify_sas(i.0, b, len - 1, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(buf, [0xAA; 64], "written on failure");
        let mut theirs = [0u8; 64];
        let mut theirs_len = 0usize;
        assert_eq!(itsme_online_verify_sas(i.0, b, 64, &mut len), ITSME_OK);
        assert_eq!(itsme_online_verify_sas(r.0, theirs.as_mut_ptr().cast(), 64, &mut theirs_len), ITSME_OK);
        assert_eq!(buf[..len], theirs[..theirs_len], "both show the same SAS");
        assert_eq!(itsme_online_verify_confirm(null_mut(), i_side.store, T0, &mut outcome), inv);
        assert_eq!(itsme_online_verify_confirm(i.0, null_mut(), T0, &mut outcome), inv);
        assert_eq!(itsme_online_verify_confirm(i.0, i_side.store, T0, null_mut()), inv);
        assert_eq!(itsme_online_verify_confirm(i.0, r_side.store, T0, &mut outcome), inv, "another store");
        assert_eq!(itsme_online_verify_confirm(i.0, i_side.store, -1, &mut outcome), inv);
        assert_eq!(outcome, 42, "written on failure");
        assert_eq!(i.state(), ITSME_ONLINE_VERIFY_COMPARE_SAS);
        assert_eq!(itsme_online_verify_confirm(i.0, i_side.store, T0, &mut outcome), ITSME_OK);
        assert_eq!(outcome, ITSME_VOICE_VERIFIED_TAG_UNCHECKED, "contacts added without device secrets");

        // reject
        assert_eq!(itsme_online_verify_reject(null_mut()), inv);
        assert_eq!(itsme_online_verify_reject(r.0), ITSME_OK);
        assert_eq!(r.state(), ITSME_ONLINE_VERIFY_REJECTED);
        assert_eq!(itsme_online_verify_reject(r.0), ITSME_E_INVALID_STATE);
    }
}

/// A PIN Update, freed when dropped.
struct Pu(*mut itsme_pin_update);

impl Pu {
    fn new(side: &Side) -> Pu {
        let mut out = null_mut();
        assert_eq!(unsafe { itsme_pin_update_new(side.store, side.peer, T0 / 30, null_mut(), T0, &mut out) }, ITSME_OK);
        Pu(out)
    }

    fn state(&self) -> itsme_pin_update_state {
        let mut state = 0;
        assert_eq!(unsafe { itsme_pin_update_status(self.0, &mut state) }, ITSME_OK);
        state
    }

    fn next(&self) -> Vec<u8> {
        let mut buf = [0u8; ITSME_PIN_UPDATE_FRAME_MAX];
        let mut len = 0usize;
        assert_eq!(unsafe { itsme_pin_update_next_outgoing(self.0, buf.as_mut_ptr(), buf.len(), &mut len) }, ITSME_OK);
        buf[..len].to_vec()
    }
}

impl Drop for Pu {
    fn drop(&mut self) {
        unsafe { itsme_pin_update_free(self.0) };
    }
}

#[test]
fn pin_update_constructor_arguments() {
    let c = Contacts::new("misuse-pu-new");
    let window = T0 / 30;
    let inv = ITSME_E_INVALID_ARGUMENT;
    unsafe {
        let mut out = sentinel();
        assert_eq!(itsme_pin_update_new(null_mut(), c.keyed, window, null_mut(), T0, &mut out), inv);
        assert_eq!(itsme_pin_update_new(c.store, c.keyed, window, null_mut(), T0, null_mut()), inv);
        for other in [window + 1, window - 2, 0, -1, i64::MAX] {
            assert_eq!(itsme_pin_update_new(c.store, c.keyed, other, null_mut(), T0, &mut out), inv, "{other}");
        }
        assert!(!c.detail().is_empty(), "recorded on the store");
        for now in [-1, MAX_TIME + 1] {
            assert_eq!(itsme_pin_update_new(c.store, c.keyed, now.div_euclid(30), null_mut(), now, &mut out), inv, "{now}");
        }
        assert_eq!(itsme_pin_update_new(c.store, 9999, window, null_mut(), T0, &mut out), ITSME_E_NOT_FOUND);
        assert_eq!(out, sentinel(), "written on failure");
        let rng = random(2);
        for (id, window, rng) in [(c.keyed, window - 1, null_mut()), (c.keyed, window, rng), (c.v5, window, null_mut())] {
            let mut ok = null_mut();
            assert_eq!(itsme_pin_update_new(c.store, id, window, rng, T0, &mut ok), ITSME_OK);
            assert!(!ok.is_null());
            itsme_pin_update_free(ok);
        }
        itsme_random_free(rng);
    }
}

#[test]
fn pin_update_arguments() {
    let (i_side, r_side) = sides("misuse-pu");
    let (i, r) = (Pu::new(&i_side), Pu::new(&r_side));
    let inv = ITSME_E_INVALID_ARGUMENT;
    unsafe {
        // status
        let mut state = 42u32;
        assert_eq!(itsme_pin_update_status(null(), &mut state), inv);
        assert_eq!(itsme_pin_update_status(i.0, null_mut()), inv);
        assert_eq!(state, 42, "written on failure");
        assert_eq!(i.state(), ITSME_PIN_UPDATE_RUNNING);

        // session_code, last_error: text outputs.
        let mut buf = [0xAAu8; 64];
        let mut len = 777usize;
        let b: *mut c_char = buf.as_mut_ptr().cast();
        type Getter = unsafe extern "C" fn(*const itsme_pin_update, *mut c_char, usize, *mut usize) -> itsme_result;
        let getters = [("session_code", itsme_pin_update_session_code as Getter), ("last_error", itsme_pin_update_last_error)];
        for (what, getter) in getters {
            assert_eq!(getter(null(), b, 64, &mut len), inv, "{what}");
            assert_eq!(getter(i.0, null_mut(), 64, &mut len), inv, "{what}");
            assert_eq!(getter(i.0, b, 64, null_mut()), inv, "{what}");
            assert_eq!((buf, len), ([0xAA; 64], 777), "{what}: written on failure");
        }
        assert_eq!(itsme_pin_update_session_code(i.0, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert!((10..=ITSME_SHORT_CODE_SIZE).contains(&len), "{len}");
        assert_eq!(itsme_pin_update_session_code(i.0, b, len - 1, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(buf, [0xAA; 64], "written on failure");
        let mut other = [0u8; 64];
        let mut other_len = 0usize;
        assert_eq!(itsme_pin_update_session_code(i.0, b, 64, &mut len), ITSME_OK);
        assert_eq!(itsme_pin_update_session_code(r.0, other.as_mut_ptr().cast(), 64, &mut other_len), ITSME_OK);
        assert_eq!(buf[..len], other[..other_len], "both show the same session code");

        // next_outgoing: the KEY, not consumed by a refusal.
        let mut out = [0xAAu8; 128];
        assert_eq!(itsme_pin_update_next_outgoing(null_mut(), out.as_mut_ptr(), 128, &mut len), inv);
        assert_eq!(itsme_pin_update_next_outgoing(i.0, null_mut(), 128, &mut len), inv);
        assert_eq!(itsme_pin_update_next_outgoing(i.0, out.as_mut_ptr(), 128, null_mut()), inv);
        assert_eq!(itsme_pin_update_next_outgoing(i.0, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(len, 34, "a KEY frame is 34 bytes");
        assert_eq!(itsme_pin_update_next_outgoing(i.0, out.as_mut_ptr(), 33, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(out, [0xAA; 128], "written on failure");
        let key = i.next();
        assert_eq!((key.len(), key[0], key[1]), (34, 1, 1));
        assert!(i.next().is_empty(), "nothing more to send before the peer's KEY");

        // receive: NULLs leave the update running.
        assert_eq!(itsme_pin_update_receive(null_mut(), key.as_ptr(), key.len(), T0), inv);
        assert_eq!(itsme_pin_update_receive(r.0, null(), key.len(), T0), inv);
        assert_eq!(r.state(), ITSME_PIN_UPDATE_RUNNING);
        assert_eq!(itsme_pin_update_receive(r.0, key.as_ptr(), key.len(), T0), ITSME_OK);
        // A frame received twice fails the update, which says why.
        assert_eq!(itsme_pin_update_receive(r.0, key.as_ptr(), key.len(), T0), ITSME_E_MALFORMED_MESSAGE);
        assert_eq!(r.state(), ITSME_PIN_UPDATE_FAILED);
        assert_eq!(itsme_pin_update_last_error(r.0, b, 64, &mut len), ITSME_OK);
        assert!(len > 1);
        assert_eq!(itsme_pin_update_receive(r.0, key.as_ptr(), key.len(), T0), ITSME_E_INVALID_STATE);
        assert!(r.next().is_empty(), "a failed update sends nothing");
    }
}

// ---------------------------------------------------------------------------
// Profile records
// ---------------------------------------------------------------------------

/// A profile of the fixture's identity ("Alice", a photo of 100 bytes,
/// "a.jpg"); the caller frees it.
fn profile(f: &Fixture) -> *mut itsme_profile {
    let (name, filename, photo) = (cstr("Alice"), cstr("a.jpg"), [9u8; 100]);
    let mut out = null_mut();
    let code = unsafe { itsme_profile_create(f.identity, ptr(&name), photo.as_ptr(), 100, ptr(&filename), null_mut(), &mut out) };
    assert_eq!(code, ITSME_OK);
    assert!(!out.is_null());
    out
}

/// (record, reference, owner key) of a profile.
fn profile_parts(f: &Fixture, p: *const itsme_profile) -> (Vec<u8>, [u8; 32], [u8; 32]) {
    let mut record = vec![0u8; 512];
    let (mut reference, mut key) = ([0u8; 32], [0u8; 32]);
    let mut len = 0usize;
    unsafe {
        assert_eq!(itsme_profile_record(p, record.as_mut_ptr(), 512, &mut len), ITSME_OK);
        record.truncate(len);
        assert_eq!(itsme_profile_reference(p, reference.as_mut_ptr(), 32, &mut len), ITSME_OK);
        assert_eq!(len, ITSME_PROFILE_REFERENCE_BYTES);
        assert_eq!(itsme_identity_public_key(f.identity, key.as_mut_ptr(), 32, &mut len), ITSME_OK);
    }
    (record, reference, key)
}

#[test]
fn profile_free_accepts_null() {
    unsafe { itsme_profile_free(null_mut()) };
}

#[test]
fn profile_create_arguments() {
    let f = Fixture::new();
    let inv = ITSME_E_INVALID_ARGUMENT;
    let (name, filename, photo) = (cstr("Alice"), cstr("a.jpg"), [9u8; 10]);
    unsafe {
        let mut out = sentinel();
        assert_eq!(itsme_profile_create(null(), ptr(&name), null(), 0, null(), null_mut(), &mut out), inv);
        assert_eq!(itsme_profile_create(f.identity, ptr(&name), null(), 0, null(), null_mut(), null_mut()), inv);
        assert_eq!(itsme_profile_create(f.identity, ptr(&name), null(), 10, null(), null_mut(), &mut out), inv, "photo NULL with a length");
        assert_eq!(itsme_profile_create(f.identity, null(), null(), 0, null(), null_mut(), &mut out), inv, "nothing at all");
        assert_eq!(itsme_profile_create(f.identity, ptr(&name), null(), 0, ptr(&filename), null_mut(), &mut out), inv, "a filename without a photo");
        let bad_utf8 = b"Al\xffce\0";
        assert_eq!(itsme_profile_create(f.identity, ptr(bad_utf8), null(), 0, null(), null_mut(), &mut out), inv, "not UTF-8");
        assert_eq!(out, sentinel(), "written on failure");
        let mut detail = [0u8; 256];
        let mut len = 0usize;
        assert_eq!(itsme_last_error(detail.as_mut_ptr().cast(), 256, &mut len), ITSME_OK);
        assert!(len > 1, "a detail in itsme_last_error");
        // NULL and "" both mean none; a deterministic source is taken.
        let rng = random(60);
        for (name, filename) in [(null(), ptr(&filename)), (ptr(b"\0"), ptr(&filename)), (ptr(&name), null()), (ptr(&name), ptr(b"\0"))] {
            let mut ok = null_mut();
            assert_eq!(itsme_profile_create(f.identity, name, photo.as_ptr(), 10, filename, rng, &mut ok), ITSME_OK);
            assert!(!ok.is_null());
            itsme_profile_free(ok);
        }
        itsme_random_free(rng);
    }
}

#[test]
fn profile_open_arguments() {
    let f = Fixture::new();
    let p = profile(&f);
    let (record, reference, key) = profile_parts(&f, p);
    let inv = ITSME_E_INVALID_ARGUMENT;
    unsafe {
        let (r, rl, rf, k) = (record.as_ptr(), record.len(), reference.as_ptr(), key.as_ptr());
        let mut out = sentinel();
        assert_eq!(itsme_profile_open(null(), rl, rf, 32, k, 32, &mut out), inv);
        assert_eq!(itsme_profile_open(r, rl, null(), 32, k, 32, &mut out), inv);
        assert_eq!(itsme_profile_open(r, rl, rf, 32, null(), 32, &mut out), inv);
        assert_eq!(itsme_profile_open(r, rl, rf, 32, k, 32, null_mut()), inv);
        for size in [0usize, 16, 31, 33] {
            assert_eq!(itsme_profile_open(r, rl, rf, size, k, 32, &mut out), inv, "reference of {size}");
            assert_eq!(itsme_profile_open(r, rl, rf, 32, k, size, &mut out), inv, "key of {size}");
        }
        assert_eq!(itsme_profile_open(r, rl - 1, rf, 32, k, 32, &mut out), ITSME_E_MALFORMED_MESSAGE);
        let zeros = vec![0u8; ITSME_PROFILE_RECORD_MAX + 1];
        assert_eq!(itsme_profile_open(zeros.as_ptr(), zeros.len(), rf, 32, k, 32, &mut out), ITSME_E_MALFORMED_MESSAGE);
        let mut other = key;
        other[0] ^= 1;
        assert_eq!(itsme_profile_open(r, rl, rf, 32, other.as_ptr(), 32, &mut out), ITSME_E_AUTHENTICATION_FAILED);
        assert_eq!(out, sentinel(), "written on failure");
        assert_eq!(itsme_profile_open(r, rl, rf, 32, k, 32, &mut out), ITSME_OK);
        assert!(!out.is_null() && out != sentinel());
        itsme_profile_free(out);
        itsme_profile_free(p);
    }
}

#[test]
fn profile_getter_arguments() {
    let f = Fixture::new();
    let p = profile(&f);
    let inv = ITSME_E_INVALID_ARGUMENT;
    type Getter = unsafe extern "C" fn(*const itsme_profile, *mut u8, usize, *mut usize) -> itsme_result;
    type TextGetter = unsafe extern "C" fn(*const itsme_profile, *mut c_char, usize, *mut usize) -> itsme_result;
    // (name, getter, the size it writes, text)
    let getters: [(&str, Getter, usize, bool); 7] = unsafe {
        [
            ("name", std::mem::transmute::<TextGetter, Getter>(itsme_profile_name), 6, true),
            ("photo", itsme_profile_photo, 100, false),
            ("photo_filename", std::mem::transmute::<TextGetter, Getter>(itsme_profile_photo_filename), 6, true),
            ("record", itsme_profile_record, ITSME_PROFILE_RECORD_OVERHEAD + 5 + 100 + 5, false),
            ("record_id", itsme_profile_record_id, ITSME_RECORD_ID_BYTES, false),
            ("record_name", std::mem::transmute::<TextGetter, Getter>(itsme_profile_record_name), ITSME_RECORD_NAME_SIZE, true),
            ("reference", itsme_profile_reference, ITSME_PROFILE_REFERENCE_BYTES, false),
        ]
    };
    unsafe {
        for (what, getter, size, text) in getters {
            let mut buf = vec![0xAAu8; 512];
            let mut len = 777usize;
            assert_eq!(getter(null(), buf.as_mut_ptr(), 512, &mut len), inv, "{what}");
            assert_eq!(getter(p, null_mut(), 512, &mut len), inv, "{what}");
            assert_eq!(getter(p, buf.as_mut_ptr(), 512, null_mut()), inv, "{what}");
            assert_eq!(len, 777, "{what}: out_len written on failure");
            assert_eq!(getter(p, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL, "{what}");
            assert_eq!(len, size, "{what}: the size it needs");
            assert_eq!(getter(p, buf.as_mut_ptr(), size - 1, &mut len), ITSME_E_BUFFER_TOO_SMALL, "{what}");
            assert!(buf.iter().all(|&b| b == 0xAA), "{what}: written on failure");
            assert_eq!(getter(p, buf.as_mut_ptr(), size, &mut len), ITSME_OK, "{what}");
            assert_eq!(len, size, "{what}");
            if text {
                assert_eq!(buf[size - 1], 0, "{what}: NUL-terminated");
                assert!(!buf[..size - 1].contains(&0), "{what}");
            }
            assert_eq!(buf[size], 0xAA, "{what}: written past its size");
        }
        itsme_profile_free(p);
    }
}

#[test]
fn store_profile_and_photo_arguments() {
    let c = Contacts::new("misuse-photo");
    let p = profile(&c.f);
    let (s, id) = (c.store, c.keyed);
    let inv = ITSME_E_INVALID_ARGUMENT;
    let photo = [3u8; 50];
    let filename = cstr("carol.png");
    unsafe {
        // apply_profile
        assert_eq!(itsme_store_apply_profile(null_mut(), id, p), inv);
        assert_eq!(itsme_store_apply_profile(s, id, null()), inv);
        assert_eq!(itsme_store_apply_profile(s, 9999, p), ITSME_E_NOT_FOUND);
        assert!(!c.detail().is_empty(), "recorded on the store");
        // set_photo
        assert_eq!(itsme_store_set_photo(null_mut(), id, photo.as_ptr(), 50, ptr(&filename)), inv);
        assert_eq!(itsme_store_set_photo(s, id, null(), 50, ptr(&filename)), inv, "photo NULL with a length");
        assert_eq!(itsme_store_set_photo(s, 9999, photo.as_ptr(), 50, ptr(&filename)), ITSME_E_NOT_FOUND);
        let too_long = cstr(&"f".repeat(ITSME_PHOTO_FILENAME_MAX_BYTES + 1));
        assert_eq!(itsme_store_set_photo(s, id, photo.as_ptr(), 50, ptr(&too_long)), inv);
        // photo and photo_filename: none yet.
        let mut buf = [0xAAu8; 128];
        let mut len = 777usize;
        let b = buf.as_mut_ptr();
        assert_eq!(itsme_store_photo(s, id, b, 128, &mut len), ITSME_E_NOT_FOUND);
        assert_eq!(itsme_store_photo_filename(s, id, b.cast(), 128, &mut len), ITSME_E_NOT_FOUND);
        assert_eq!((buf, len), ([0xAA; 128], 777), "written on failure");
        assert_eq!(itsme_store_set_photo(s, id, photo.as_ptr(), 50, ptr(&filename)), ITSME_OK);
        assert_eq!(itsme_store_photo(null_mut(), id, b, 128, &mut len), inv);
        assert_eq!(itsme_store_photo(s, id, null_mut(), 128, &mut len), inv);
        assert_eq!(itsme_store_photo(s, id, b, 128, null_mut()), inv);
        assert_eq!(itsme_store_photo_filename(null_mut(), id, b.cast(), 128, &mut len), inv);
        assert_eq!(itsme_store_photo_filename(s, id, null_mut(), 128, &mut len), inv);
        assert_eq!(itsme_store_photo_filename(s, id, b.cast(), 128, null_mut()), inv);
        assert_eq!(len, 777, "out_len written on failure");
        assert_eq!(itsme_store_photo(s, id, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(len, 50);
        assert_eq!(itsme_store_photo(s, id, b, 49, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(buf, [0xAA; 128], "written on failure");
        assert_eq!(itsme_store_photo(s, id, b, 128, &mut len), ITSME_OK);
        assert_eq!((len, &buf[..50], buf[50]), (50, &photo[..], 0xAA));
        assert_eq!(itsme_store_photo_filename(s, id, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(len, 10, "nine bytes and the NUL");
        assert_eq!(itsme_store_photo_filename(s, id, b.cast(), 128, &mut len), ITSME_OK);
        assert_eq!(&buf[..10], b"carol.png\0");
        // An opened profile replaces name and photo; a photo without a
        // filename reads back "".
        assert_eq!(itsme_store_apply_profile(s, id, p), ITSME_OK);
        assert_eq!(itsme_store_photo(s, id, b, 128, &mut len), ITSME_OK);
        assert_eq!((len, &buf[..100]), (100, &[9u8; 100][..]));
        assert_eq!(itsme_store_set_photo(s, id, photo.as_ptr(), 50, null()), ITSME_OK);
        assert_eq!(itsme_store_photo_filename(s, id, b.cast(), 128, &mut len), ITSME_OK);
        assert_eq!((len, buf[0]), (1, 0));
        // NULL photo and filename remove it.
        assert_eq!(itsme_store_set_photo(s, id, null(), 0, null()), ITSME_OK);
        assert_eq!(itsme_store_photo(s, id, b, 128, &mut len), ITSME_E_NOT_FOUND);
        itsme_profile_free(p);
    }
}

#[test]
fn online_verify_profile_arguments() {
    let (i_side, r_side) = sides("misuse-ov-profile");
    let (i, r) = (Ov::new(&i_side), Ov::new(&r_side));
    let inv = ITSME_E_INVALID_ARGUMENT;
    let reference = [0x77u8; 32];
    unsafe {
        assert_eq!(itsme_online_verify_share_profile(null_mut(), reference.as_ptr(), 32), inv);
        assert_eq!(itsme_online_verify_share_profile(i.0, null(), 32), inv);
        for size in [0usize, 31, 33] {
            assert_eq!(itsme_online_verify_share_profile(i.0, reference.as_ptr(), size), inv, "{size}");
        }
        assert_eq!(i.state(), ITSME_ONLINE_VERIFY_RUNNING, "refused without failing");
        assert_eq!(itsme_online_verify_share_profile(i.0, reference.as_ptr(), 32), ITSME_OK);
        let mut buf = [0xAAu8; 64];
        let mut len = 777usize;
        let b = buf.as_mut_ptr();
        assert_eq!(itsme_online_verify_peer_profile(null(), b, 64, &mut len), inv);
        assert_eq!(itsme_online_verify_peer_profile(r.0, null_mut(), 64, &mut len), inv);
        assert_eq!(itsme_online_verify_peer_profile(r.0, b, 64, null_mut()), inv);
        assert_eq!(itsme_online_verify_peer_profile(r.0, b, 64, &mut len), ITSME_E_INVALID_STATE, "not confirmed");
        assert_eq!((buf, len), ([0xAA; 64], 777), "written on failure");
        ov_pump(&i, &r);
        assert_eq!(itsme_online_verify_share_profile(i.0, reference.as_ptr(), 32), ITSME_E_INVALID_STATE, "the PROOF is made");
        assert_eq!(itsme_online_verify_peer_profile(r.0, b, 64, &mut len), ITSME_E_INVALID_STATE, "the SAS is not confirmed");
        let mut outcome = 0u32;
        assert_eq!(itsme_online_verify_confirm(r.0, r_side.store, T0, &mut outcome), ITSME_OK);
        assert_eq!(itsme_online_verify_confirm(i.0, i_side.store, T0, &mut outcome), ITSME_OK);
        assert_eq!(itsme_online_verify_peer_profile(r.0, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(len, ITSME_PROFILE_REFERENCE_BYTES);
        assert_eq!(itsme_online_verify_peer_profile(r.0, b, 31, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(buf, [0xAA; 64], "written on failure");
        assert_eq!(itsme_online_verify_peer_profile(r.0, b, 64, &mut len), ITSME_OK);
        assert_eq!((len, &buf[..32], buf[32]), (32, &reference[..], 0xAA));
        // The initiator received none.
        assert_eq!(itsme_online_verify_peer_profile(i.0, b, 64, &mut len), ITSME_E_NOT_FOUND);
    }
}

// ---------------------------------------------------------------------------
// Service approvals
// ---------------------------------------------------------------------------

static REPLAY_DESTROYED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn replay_seen_never(_: *mut c_void, _: *const u8, _: i64, _: i64, out_seen: *mut i32) -> itsme_result {
    unsafe { *out_seen = 0 };
    ITSME_OK
}
unsafe extern "C" fn replay_fails(_: *mut c_void, _: *const u8, _: i64, _: i64, _: *mut i32) -> itsme_result {
    ITSME_E_DATABASE
}
unsafe extern "C" fn replay_destroy(ctx: *mut c_void) {
    assert_eq!(ctx as usize, 0x5EED, "destroy gets the ctx");
    REPLAY_DESTROYED.fetch_add(1, Ordering::SeqCst);
}

const SERVICE: &str = "bank.example";
const NONCE: [u8; 16] = [0x5A; 16];

/// The secret store's last-error detail.
fn store_detail(store: *mut itsme_secret_store) -> String {
    let mut buf = [0u8; 512];
    let mut len = 0usize;
    assert_eq!(unsafe { itsme_secret_store_last_error(store, buf.as_mut_ptr().cast(), 512, &mut len) }, ITSME_OK);
    String::from_utf8(buf[..len - 1].to_vec()).unwrap()
}

/// A request from SERVICE with the scopes "email profile", issued at T0.
fn approval_request() -> Vec<u8> {
    let (service, name, session, scopes) = (cstr(SERVICE), cstr("Bank"), cstr("s-1"), cstr("profile email"));
    let mut out = vec![0u8; ITSME_APPROVAL_REQUEST_MAX];
    let mut len = 0usize;
    let code = unsafe {
        itsme_approval_request_create(ptr(&service), ptr(&name), ptr(&session), ptr(&scopes), 60, null_mut(), T0, out.as_mut_ptr(), out.len(), &mut len)
    };
    assert_eq!(code, ITSME_OK);
    out.truncate(len);
    out
}

#[test]
fn credential_arguments() {
    let f = Fixture::new();
    let s = f.store;
    let inv = ITSME_E_INVALID_ARGUMENT;
    let (service, label) = (cstr(SERVICE), cstr("Phone"));
    let (sv, lb, n) = (ptr(&service), ptr(&label), NONCE.as_ptr());
    let mut buf = [0xAAu8; 256];
    let mut len = 777usize;
    let b = buf.as_mut_ptr();
    unsafe {
        assert_eq!(itsme_credential_enroll(null_mut(), sv, lb, n, 16, null_mut(), b, 256, &mut len), inv);
        assert_eq!(itsme_credential_enroll(s, null(), lb, n, 16, null_mut(), b, 256, &mut len), inv);
        assert_eq!(itsme_credential_enroll(s, sv, null(), n, 16, null_mut(), b, 256, &mut len), inv);
        assert_eq!(itsme_credential_enroll(s, sv, lb, null(), 16, null_mut(), b, 256, &mut len), inv);
        assert_eq!(itsme_credential_enroll(s, sv, lb, n, 16, null_mut(), null_mut(), 256, &mut len), inv);
        assert_eq!(itsme_credential_enroll(s, sv, lb, n, 16, null_mut(), b, 256, null_mut()), inv);
        for size in [0usize, 15, 65] {
            let long = [1u8; 65];
            assert_eq!(itsme_credential_enroll(s, sv, lb, long.as_ptr(), size, null_mut(), b, 256, &mut len), inv, "nonce of {size}");
        }
        assert!(!store_detail(s).is_empty(), "recorded on the store");
        assert_eq!((buf, len), ([0xAA; 256], 777), "written on failure");
        // Too small: the size, and nothing saved.
        let size = 98 + 5;
        assert_eq!(itsme_credential_enroll(s, sv, lb, n, 16, null_mut(), null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(len, size);
        assert_eq!(itsme_credential_enroll(s, sv, lb, n, 16, null_mut(), b, size - 1, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(buf, [0xAA; 256], "written on failure");
        let mut id = [0xAAu8; 32];
        let mut id_len = 777usize;
        assert_eq!(itsme_credential_id(s, sv, id.as_mut_ptr(), 32, &mut id_len), ITSME_E_NOT_FOUND, "nothing saved");
        assert_eq!(itsme_credential_remove(s, sv), ITSME_E_NOT_FOUND);
        assert_eq!(itsme_credential_enroll(s, sv, lb, n, 16, null_mut(), b, size, &mut len), ITSME_OK);
        assert_eq!((len, buf[0], buf[size]), (size, 1, 0xAA));

        // credential_id
        assert_eq!(itsme_credential_id(null_mut(), sv, id.as_mut_ptr(), 32, &mut id_len), inv);
        assert_eq!(itsme_credential_id(s, null(), id.as_mut_ptr(), 32, &mut id_len), inv);
        assert_eq!(itsme_credential_id(s, sv, null_mut(), 32, &mut id_len), inv);
        assert_eq!(itsme_credential_id(s, sv, id.as_mut_ptr(), 32, null_mut()), inv);
        assert_eq!(itsme_credential_id(s, sv, null_mut(), 0, &mut id_len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(id_len, ITSME_CREDENTIAL_ID_BYTES);
        assert_eq!(itsme_credential_id(s, sv, id.as_mut_ptr(), 15, &mut id_len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(id, [0xAA; 32], "written on failure");
        assert_eq!(itsme_credential_id(s, sv, id.as_mut_ptr(), 32, &mut id_len), ITSME_OK);
        assert_eq!((id_len, id[16]), (16, 0xAA));
        let other = cstr("shop.example");
        assert_eq!(itsme_credential_id(s, ptr(&other), id.as_mut_ptr(), 32, &mut id_len), ITSME_E_NOT_FOUND);

        // remove
        assert_eq!(itsme_credential_remove(null_mut(), sv), inv);
        assert_eq!(itsme_credential_remove(s, null()), inv);
        assert_eq!(itsme_credential_remove(s, sv), ITSME_OK);
        assert_eq!(itsme_credential_remove(s, sv), ITSME_E_NOT_FOUND);
    }
}

#[test]
fn approval_device_arguments() {
    let f = Fixture::new();
    let s = f.store;
    let inv = ITSME_E_INVALID_ARGUMENT;
    let (service, label) = (cstr(SERVICE), cstr("Phone"));
    let mut enrollment = [0u8; 256];
    let mut len = 0usize;
    unsafe {
        assert_eq!(
            itsme_credential_enroll(s, ptr(&service), ptr(&label), NONCE.as_ptr(), 16, null_mut(), enrollment.as_mut_ptr(), 256, &mut len),
            ITSME_OK
        );
    }
    let request = approval_request();
    let (rq, rl) = (request.as_ptr(), request.len());
    unsafe {
        // parse
        let mut info = itsme_approval_request_info { issued_at: 42, ..Default::default() };
        assert_eq!(itsme_approval_request_parse(null(), rl, T0, &mut info), inv);
        assert_eq!(itsme_approval_request_parse(rq, rl, T0, null_mut()), inv);
        assert_eq!(itsme_approval_request_parse(rq, rl - 1, T0, &mut info), ITSME_E_MALFORMED_MESSAGE);
        assert_eq!(itsme_approval_request_parse(rq, rl, T0 + 61, &mut info), ITSME_E_EXPIRED);
        assert_eq!(info.issued_at, 42, "written on failure");
        assert_eq!(itsme_approval_request_parse(rq, rl, T0 + 60, &mut info), ITSME_OK);
        assert_eq!((info.issued_at, info.expires_at), (T0, T0 + 60));
        let text = |field: &[c_char]| CStr::from_ptr(field.as_ptr()).to_str().unwrap().to_owned();
        assert_eq!(text(&info.service_id), SERVICE);
        assert_eq!(text(&info.service_name), "Bank");
        assert_eq!(text(&info.session_id), "s-1");
        assert_eq!(text(&info.scopes), "email profile", "sorted");
        assert_eq!(text(&info.otp).len(), 6);

        // sign
        let mut out = [0xAAu8; 256];
        let mut out_len = 777usize;
        let o = out.as_mut_ptr();
        let email = cstr("email");
        let approve = ITSME_APPROVAL_APPROVE;
        assert_eq!(itsme_approval_sign(null_mut(), rq, rl, approve, null(), T0, o, 256, &mut out_len), inv);
        assert_eq!(itsme_approval_sign(s, null(), rl, approve, null(), T0, o, 256, &mut out_len), inv);
        assert_eq!(itsme_approval_sign(s, rq, rl, approve, null(), T0, null_mut(), 256, &mut out_len), inv);
        assert_eq!(itsme_approval_sign(s, rq, rl, approve, null(), T0, o, 256, null_mut()), inv);
        for decision in [0u32, 3, u32::MAX] {
            assert_eq!(itsme_approval_sign(s, rq, rl, decision, null(), T0, o, 256, &mut out_len), inv, "decision {decision}");
        }
        assert_eq!(itsme_approval_sign(s, rq, rl, ITSME_APPROVAL_DENY, ptr(&email), T0, o, 256, &mut out_len), inv, "a denial with a scope");
        let unrequested = cstr("email admin");
        assert_eq!(itsme_approval_sign(s, rq, rl, approve, ptr(&unrequested), T0, o, 256, &mut out_len), inv);
        for junk in [&b" email\0"[..], b"email  profile\0", b"email email\0", b"em\xffail\0"] {
            assert_eq!(itsme_approval_sign(s, rq, rl, approve, ptr(junk), T0, o, 256, &mut out_len), inv, "{junk:?}");
        }
        assert!(!store_detail(s).is_empty(), "recorded on the store");
        assert_eq!(itsme_approval_sign(s, rq, rl, approve, null(), T0 + 61, o, 256, &mut out_len), ITSME_E_EXPIRED);
        assert_eq!((out, out_len), ([0xAA; 256], 777), "written on failure");
        // The size: 1 + 16 + 1 + 8 + 6 + scopes (1 + 1 + 5) + 64.
        let size = 1 + 16 + 1 + 8 + 6 + 7 + 64;
        assert_eq!(itsme_approval_sign(s, rq, rl, approve, ptr(&email), T0, null_mut(), 0, &mut out_len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(out_len, size);
        assert_eq!(itsme_approval_sign(s, rq, rl, approve, ptr(&email), T0, o, size - 1, &mut out_len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(out, [0xAA; 256], "written on failure");
        assert_eq!(itsme_approval_sign(s, rq, rl, approve, ptr(&email), T0, o, size, &mut out_len), ITSME_OK);
        assert_eq!((out_len, out[0], out[size]), (size, 1, 0xAA));
        // NULL and "" grant nothing.
        assert_eq!(itsme_approval_sign(s, rq, rl, ITSME_APPROVAL_DENY, null(), T0, o, 256, &mut out_len), ITSME_OK);
        assert_eq!(itsme_approval_sign(s, rq, rl, ITSME_APPROVAL_DENY, ptr(b"\0"), T0, o, 256, &mut out_len), ITSME_OK);
        assert_eq!(out_len, size - 5 - 1);
    }
}

#[test]
fn approval_service_arguments() {
    init();
    let inv = ITSME_E_INVALID_ARGUMENT;
    let (service, name, session, scopes) = (cstr(SERVICE), cstr("Bank"), cstr("s-1"), cstr("email"));
    let (sv, nm, ss, sc) = (ptr(&service), ptr(&name), ptr(&session), ptr(&scopes));
    let mut buf = [0xAAu8; 256];
    let mut len = 777usize;
    let b = buf.as_mut_ptr();
    unsafe {
        // request_create
        assert_eq!(itsme_approval_request_create(null(), nm, ss, sc, 60, null_mut(), T0, b, 256, &mut len), inv);
        assert_eq!(itsme_approval_request_create(sv, null(), ss, sc, 60, null_mut(), T0, b, 256, &mut len), inv);
        assert_eq!(itsme_approval_request_create(sv, nm, null(), sc, 60, null_mut(), T0, b, 256, &mut len), inv);
        assert_eq!(itsme_approval_request_create(sv, nm, ss, sc, 60, null_mut(), T0, null_mut(), 256, &mut len), inv);
        assert_eq!(itsme_approval_request_create(sv, nm, ss, sc, 60, null_mut(), T0, b, 256, null_mut()), inv);
        for lifetime in [0, -1, ITSME_APPROVAL_LIFETIME_MAX + 1] {
            assert_eq!(itsme_approval_request_create(sv, nm, ss, sc, lifetime, null_mut(), T0, b, 256, &mut len), inv, "{lifetime}");
        }
        for now in [-1, MAX_TIME] {
            assert_eq!(itsme_approval_request_create(sv, nm, ss, sc, 60, null_mut(), now, b, 256, &mut len), inv, "{now}");
        }
        let repeated = cstr("email email");
        assert_eq!(itsme_approval_request_create(sv, nm, ss, ptr(&repeated), 60, null_mut(), T0, b, 256, &mut len), inv);
        assert_eq!((buf, len), ([0xAA; 256], 777), "written on failure");
        // The size: 1 + (1 + 12) + (1 + 4) + (1 + 3) + 6 + 32 + 8 + 8 + (1 + 1 + 5).
        let size = 1 + 13 + 5 + 4 + 6 + 32 + 16 + 7;
        assert_eq!(itsme_approval_request_create(sv, nm, ss, sc, 60, null_mut(), T0, null_mut(), 0, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(len, size);
        assert_eq!(itsme_approval_request_create(sv, nm, ss, sc, 60, null_mut(), T0, b, size - 1, &mut len), ITSME_E_BUFFER_TOO_SMALL);
        assert_eq!(buf, [0xAA; 256], "written on failure");
        assert_eq!(itsme_approval_request_create(sv, nm, ss, null(), 60, null_mut(), T0, b, 256, &mut len), ITSME_OK, "NULL scopes: none");
        assert_eq!(len, size - 6);

        // enrollment_verify, with an enrollment whose signature is off.
        let f = Fixture::new();
        let label = cstr("Phone");
        let mut junk = [0u8; 103];
        assert_eq!(
            itsme_credential_enroll(f.store, sv, ptr(&label), NONCE.as_ptr(), 16, null_mut(), junk.as_mut_ptr(), 103, &mut len),
            ITSME_OK
        );
        junk[102] ^= 0x01;
        let mut info = itsme_credential_info::default();
        info.label[0] = 0x55;
        assert_eq!(itsme_enrollment_verify(null(), NONCE.as_ptr(), 16, junk.as_ptr(), 103, &mut info), inv);
        assert_eq!(itsme_enrollment_verify(sv, null(), 16, junk.as_ptr(), 103, &mut info), inv);
        assert_eq!(itsme_enrollment_verify(sv, NONCE.as_ptr(), 16, null(), 103, &mut info), inv);
        assert_eq!(itsme_enrollment_verify(sv, NONCE.as_ptr(), 16, junk.as_ptr(), 103, null_mut()), inv);
        assert_eq!(itsme_enrollment_verify(sv, NONCE.as_ptr(), 15, junk.as_ptr(), 103, &mut info), inv);
        assert_eq!(itsme_enrollment_verify(sv, NONCE.as_ptr(), 16, junk.as_ptr(), 103, &mut info), ITSME_E_AUTHENTICATION_FAILED);
        assert_eq!(itsme_enrollment_verify(sv, NONCE.as_ptr(), 16, junk.as_ptr(), 10, &mut info), ITSME_E_MALFORMED_MESSAGE);
        assert_eq!(info.label[0], 0x55, "written on failure");
    }
}

#[test]
fn replay_store_arguments() {
    init();
    let inv = ITSME_E_INVALID_ARGUMENT;
    unsafe {
        assert_eq!(itsme_replay_store_new_memory(0, null_mut()), inv);
        let mut out = sentinel();
        assert_eq!(itsme_replay_store_new_callbacks(null(), &mut out), inv);
        let before = REPLAY_DESTROYED.load(Ordering::SeqCst);
        let ctx = 0x5EED as *mut c_void;
        let no_insert = itsme_replay_store_callbacks { ctx, insert: None, destroy: Some(replay_destroy) };
        assert_eq!(itsme_replay_store_new_callbacks(&no_insert, &mut out), inv);
        let table = itsme_replay_store_callbacks { ctx, insert: Some(replay_seen_never), destroy: Some(replay_destroy) };
        assert_eq!(itsme_replay_store_new_callbacks(&table, null_mut()), inv);
        assert_eq!(out, sentinel(), "written on failure");
        assert_eq!(REPLAY_DESTROYED.load(Ordering::SeqCst), before, "the caller keeps ctx on failure");
        // destroy once, when freed; it may be NULL.
        assert_eq!(itsme_replay_store_new_callbacks(&table, &mut out), ITSME_OK);
        itsme_replay_store_free(out);
        assert_eq!(REPLAY_DESTROYED.load(Ordering::SeqCst), before + 1);
        let no_destroy = itsme_replay_store_callbacks { ctx, insert: Some(replay_seen_never), destroy: None };
        assert_eq!(itsme_replay_store_new_callbacks(&no_destroy, &mut out), ITSME_OK);
        itsme_replay_store_free(out);
        assert_eq!(REPLAY_DESTROYED.load(Ordering::SeqCst), before + 1);
    }
}

#[test]
fn approval_verify_arguments() {
    let f = Fixture::new();
    let (service, label) = (cstr(SERVICE), cstr("Phone"));
    let mut enrollment = [0u8; 256];
    let mut len = 0usize;
    let mut info = itsme_credential_info::default();
    let request = approval_request();
    let mut approval = [0u8; 256];
    let mut approval_len = 0usize;
    unsafe {
        assert_eq!(
            itsme_credential_enroll(f.store, ptr(&service), ptr(&label), NONCE.as_ptr(), 16, null_mut(), enrollment.as_mut_ptr(), 256, &mut len),
            ITSME_OK
        );
        assert_eq!(itsme_enrollment_verify(ptr(&service), NONCE.as_ptr(), 16, enrollment.as_ptr(), len, &mut info), ITSME_OK);
        let email = cstr("email");
        assert_eq!(
            itsme_approval_sign(f.store, request.as_ptr(), request.len(), ITSME_APPROVAL_APPROVE, ptr(&email), T0, approval.as_mut_ptr(), 256, &mut approval_len),
            ITSME_OK
        );
    }
    let (rq, rl, ap, al, k) = (request.as_ptr(), request.len(), approval.as_ptr(), approval_len, info.public_key.as_ptr());
    let inv = ITSME_E_INVALID_ARGUMENT;
    let mut replay = null_mut();
    let mut failing = null_mut();
    let ctx = 0x5EED as *mut c_void;
    unsafe {
        assert_eq!(itsme_replay_store_new_memory(1, &mut replay), ITSME_OK);
        let table = itsme_replay_store_callbacks { ctx, insert: Some(replay_fails), destroy: Some(replay_destroy) };
        assert_eq!(itsme_replay_store_new_callbacks(&table, &mut failing), ITSME_OK);
        let mut out = itsme_approval_result { decision: 42, ..Default::default() };
        assert_eq!(itsme_approval_verify(null(), rl, ap, al, k, 1, replay, T0, &mut out), inv);
        assert_eq!(itsme_approval_verify(rq, rl, null(), al, k, 1, replay, T0, &mut out), inv);
        assert_eq!(itsme_approval_verify(rq, rl, ap, al, null(), 1, replay, T0, &mut out), inv);
        assert_eq!(itsme_approval_verify(rq, rl, ap, al, k, 1, null_mut(), T0, &mut out), inv);
        assert_eq!(itsme_approval_verify(rq, rl, ap, al, k, 1, replay, T0, null_mut()), inv);
        assert_eq!(itsme_approval_verify(rq, rl - 1, ap, al, k, 1, replay, T0, &mut out), inv, "a request that does not parse");
        assert_eq!(itsme_approval_verify(rq, rl, ap, al - 1, k, 1, replay, T0, &mut out), ITSME_E_MALFORMED_MESSAGE);
        assert_eq!(itsme_approval_verify(rq, rl, ap, al, k, 0, replay, T0, &mut out), ITSME_E_NOT_FOUND, "no key");
        assert_eq!(itsme_approval_verify(rq, rl, ap, al, k, 1, replay, T0 + 61, &mut out), ITSME_E_EXPIRED);
        // A callback's code refuses the approval.
        assert_eq!(itsme_approval_verify(rq, rl, ap, al, k, 1, failing, T0, &mut out), ITSME_E_DATABASE);
        assert_eq!(out.decision, 42, "written on failure");
        let mut detail = [0u8; 256];
        let mut detail_len = 0usize;
        assert_eq!(itsme_last_error(detail.as_mut_ptr().cast(), 256, &mut detail_len), ITSME_OK);
        assert!(detail_len > 1, "a detail in itsme_last_error");
        // Two keys, the enrolled one second.
        let keys = [[0x11u8; 32], info.public_key].concat();
        assert_eq!(itsme_approval_verify(rq, rl, ap, al, keys.as_ptr(), 2, replay, T0, &mut out), ITSME_OK);
        assert_eq!(out.decision, ITSME_APPROVAL_APPROVE);
        assert_eq!(out.credential_id, info.credential_id);
        assert_eq!(out.timestamp, T0);
        assert_eq!(CStr::from_ptr(out.granted_scopes.as_ptr()).to_str().unwrap(), "email");
        assert_eq!(itsme_approval_verify(rq, rl, ap, al, k, 1, replay, T0, &mut out), ITSME_E_REPLAYED);
        // The memory store of capacity 1 is full until the entry expires.
        let other = approval_request();
        let mut other_approval = [0u8; 256];
        let mut other_len = 0usize;
        assert_eq!(
            itsme_approval_sign(f.store, other.as_ptr(), other.len(), ITSME_APPROVAL_DENY, null(), T0, other_approval.as_mut_ptr(), 256, &mut other_len),
            ITSME_OK
        );
        assert_eq!(itsme_approval_verify(other.as_ptr(), other.len(), other_approval.as_ptr(), other_len, k, 1, replay, T0, &mut out), ITSME_E_LOCKED);
        itsme_replay_store_free(replay);
        let destroyed = REPLAY_DESTROYED.load(Ordering::SeqCst);
        itsme_replay_store_free(failing);
        assert!(REPLAY_DESTROYED.load(Ordering::SeqCst) > destroyed, "destroy called on free");
    }
}
