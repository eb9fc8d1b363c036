//! The raw C interface where the binding relies on the library's behaviour
//! beyond what the C contract suite checks for every function (NULL
//! pointers, calls before itsme_init, buffer sizes, outputs left alone on
//! failure, release functions): initialisation from the safe layer and from
//! several threads, callback tables (copied, destroyed once, a lying get),
//! a key of the wrong length (tests/contacts.rs relies on it), snapshots
//! that outlive their store, a QR payload read twice, a voice session bound
//! to its store.

mod common;

use itsme::sys::*;
use std::ffi::CStr;
use std::os::raw::{c_char, c_void};
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
        version: ITSME_SECRET_STORE_CALLBACKS_VERSION,
        ctx: null_mut(),
        get: Some(cb_get),
        put: Some(cb_put),
        remove: Some(cb_remove),
        destroy: Some(cb_destroy),
    }
}

/// Runs in a child process of this test binary, where nothing has called
/// itsme_init yet: the safe binding initialises the library by itself.
fn before_init_checks() {
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

// ---------------------------------------------------------------------------
// Contact store
// ---------------------------------------------------------------------------

const CONTACT_KEY: [u8; 32] = [0x42; 32];
const SEED: [u8; 32] = [7; 32];

/// A Fixture with a contact store in a temporary directory holding one
/// keyed contact ("Carol", with a note).
struct Contacts {
    f: Fixture,
    /// Holds the store's directory.
    _dir: common::TempDir,
    store: *mut itsme_store,
    keyed: i64,
}

impl Contacts {
    fn new(tag: &str) -> Contacts {
        let f = Fixture::new();
        let dir = common::TempDir::new(tag);
        let path = cstr(dir.path().join("contacts.db").to_str().unwrap());
        let mut store = null_mut();
        let mut keyed = 0i64;
        let (name, note) = (cstr("Carol"), cstr("met at the bakery"));
        unsafe {
            assert_eq!(itsme_store_open(f.identity, ptr(&path), &mut store), ITSME_OK);
            assert_eq!(
                itsme_store_add(store, ptr(&name), CONTACT_KEY.as_ptr(), 32, SEED.as_ptr(), 32, ITSME_EXCHANGE_QR, T0, &mut keyed),
                ITSME_OK
            );
            assert_eq!(itsme_store_set_note(store, keyed, ptr(&note)), ITSME_OK);
        }
        Contacts { f, _dir: dir, store, keyed }
    }

    /// A new snapshot of a contact; the caller frees it.
    fn snapshot(&self, id: i64) -> *mut itsme_contact {
        let mut contact = null_mut();
        assert_eq!(unsafe { itsme_store_get(self.store, id, &mut contact) }, ITSME_OK);
        assert!(!contact.is_null());
        contact
    }
}

impl Drop for Contacts {
    fn drop(&mut self) {
        unsafe { itsme_store_free(self.store) };
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

// ---------------------------------------------------------------------------
// Exchanges
// ---------------------------------------------------------------------------

/// Two identities (A with a contact store) and a Bluetooth exchange each,
/// run through the raw interface until both compare the SAS.
struct Exchanges {
    /// A's and B's identities and stores, held for the exchanges.
    _c: Contacts,
    _b: Contacts,
    a_ex: *mut itsme_exchange,
    b_ex: *mut itsme_exchange,
    /// A QR exchange of A, awaiting the peer.
    qr: *mut itsme_exchange,
}

impl Exchanges {
    fn new(tag: &str) -> Exchanges {
        let c = Contacts::new(tag);
        let b = Contacts::new(&format!("{tag}-b"));
        let (mut a_ex, mut b_ex, mut qr) = (null_mut(), null_mut(), null_mut());
        let mut code = [0u8; ITSME_SHORT_CODE_SIZE];
        let mut len = 0usize;
        unsafe {
            assert_eq!(itsme_exchange_new_bluetooth(c.f.identity, c.store, null(), null_mut(), T0, &mut a_ex), ITSME_OK);
            assert_eq!(itsme_exchange_session_code(a_ex, code.as_mut_ptr().cast(), code.len(), &mut len), ITSME_OK);
            assert_eq!(itsme_exchange_new_bluetooth(b.f.identity, b.store, code.as_ptr().cast(), null_mut(), T0, &mut b_ex), ITSME_OK);
            assert_eq!(itsme_exchange_new_qr(c.f.identity, c.store, null_mut(), T0, &mut qr), ITSME_OK);
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
        let x = Exchanges { _c: c, _b: b, a_ex, b_ex, qr };
        assert_eq!(x.state(a_ex), ITSME_EXCHANGE_COMPARE_SAS);
        assert_eq!(x.state(b_ex), ITSME_EXCHANGE_COMPARE_SAS);
        x
    }

    fn state(&self, exchange: *mut itsme_exchange) -> itsme_exchange_state {
        let mut state = 0;
        assert_eq!(unsafe { itsme_exchange_status(exchange, &mut state, null_mut()) }, ITSME_OK);
        state
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
        assert_eq!(unsafe { itsme_voice_new(c.store, c.keyed, null(), 0, T0, &mut voice) }, ITSME_OK);
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
        assert_eq!(unsafe { itsme_voice_start(self.voice, now) }, ITSME_OK);
        now
    }

    /// A right word for the next selection: mine, or Carol's.
    fn next_word(&self) -> u32 {
        let mut words = [0u8; 5];
        let mut len = 0usize;
        let turn = self.status().1;
        unsafe {
            if turn == ITSME_VOICE_TURN_MINE {
                assert_eq!(itsme_voice_words(self.voice, words.as_mut_ptr(), 5, &mut len), ITSME_OK);
            } else {
                assert_eq!(turn, ITSME_VOICE_TURN_THEIRS);
                let window = self.window();
                assert_eq!(itsme_derive_words(SEED.as_ptr(), 32, window, CONTACT_KEY.as_ptr(), 32, words.as_mut_ptr(), 5, &mut len), ITSME_OK);
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
fn voice_writes_through_its_own_store() {
    let v = Voice::new("misuse-voice-store");
    unsafe {
        assert_eq!(itsme_voice_start(null_mut(), 30 * v.window()), ITSME_E_INVALID_ARGUMENT);
        assert_eq!(v.status().0, ITSME_VOICE_WAITING);
        let now = v.comparing();
        let mut outcome = 42u32;
        assert_eq!(itsme_voice_check(v.voice, null(), 1, now, &mut outcome), ITSME_E_INVALID_ARGUMENT);
        assert_eq!((v.status().0, outcome), (ITSME_VOICE_COMPARING, 42));
        // Starting used the window for the contact in the session's store.
        let (mut contact, mut window) = (null_mut(), 0i64);
        assert_eq!(itsme_store_get(v.c.store, v.c.keyed, &mut contact), ITSME_OK);
        assert_eq!(itsme_contact_last_window(contact, &mut window), ITSME_OK);
        itsme_contact_free(contact);
        assert_eq!(window, v.window());
    }
}
