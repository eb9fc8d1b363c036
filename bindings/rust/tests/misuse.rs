//! Misuse of the raw C interface: NULL pointers, short buffers, calls
//! before initialisation.  Every case must give a result code, never a
//! crash, and failed calls must leave their outputs untouched.

use itsme::sys::*;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};

const T0: i64 = 1_800_000_000;

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
        for code in [-1, ITSME_E_WINDOW_USED + 1, 100, i32::MAX, i32::MIN] {
            assert_eq!(CStr::from_ptr(itsme_result_message(code)).to_str().unwrap(), "unknown result code");
        }
        let mut seen = std::collections::BTreeSet::new();
        for code in ITSME_OK..=ITSME_E_WINDOW_USED {
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
