//! Raw declarations of the C interface in `include/itsme.h`.
//!
//! Everything here mirrors the header one to one: the same names, the same
//! parameter order and the same types (`size_t` is `usize`, `int` is
//! [`c_int`]).  The header is the documentation; read it before calling
//! these functions directly.  `tests/abi.rs` checks this file against the
//! header.

#![allow(non_camel_case_types)]
// Each item is documented in include/itsme.h.
#![allow(missing_docs)]

use std::marker::{PhantomData, PhantomPinned};
use std::os::raw::{c_char, c_int, c_void};

// ---------------------------------------------------------------------------
// Version
// ---------------------------------------------------------------------------

pub const ITSME_VERSION_MAJOR: u32 = 0;
pub const ITSME_VERSION_MINOR: u32 = 2;
pub const ITSME_VERSION_PATCH: u32 = 0;
pub const ITSME_VERSION_STRING: &str = "0.2.0";
/// `MAJOR * 10000 + MINOR * 100 + PATCH`.
pub const ITSME_VERSION_NUMBER: u32 = 200;

// ---------------------------------------------------------------------------
// Result codes
// ---------------------------------------------------------------------------

pub type itsme_result = i32;

pub const ITSME_OK: itsme_result = 0;
pub const ITSME_E_INVALID_ARGUMENT: itsme_result = 1;
pub const ITSME_E_BUFFER_TOO_SMALL: itsme_result = 2;
pub const ITSME_E_NOT_INITIALIZED: itsme_result = 3;
pub const ITSME_E_UNSUPPORTED_PLATFORM: itsme_result = 4;
pub const ITSME_E_NOT_FOUND: itsme_result = 5;
pub const ITSME_E_ALREADY_EXISTS: itsme_result = 6;
pub const ITSME_E_INVALID_PIN: itsme_result = 7;
pub const ITSME_E_WRONG_PIN: itsme_result = 8;
pub const ITSME_E_LOCKED: itsme_result = 9;
pub const ITSME_E_SECRET_STORE: itsme_result = 10;
pub const ITSME_E_CORRUPT_DATA: itsme_result = 11;
pub const ITSME_E_AUTHENTICATION_FAILED: itsme_result = 12;
pub const ITSME_E_INVALID_KEY: itsme_result = 13;
pub const ITSME_E_INVALID_STATE: itsme_result = 14;
pub const ITSME_E_DATABASE: itsme_result = 15;
pub const ITSME_E_OUT_OF_MEMORY: itsme_result = 16;
pub const ITSME_E_INTERNAL: itsme_result = 17;
pub const ITSME_E_WRONG_IDENTITY: itsme_result = 18;
pub const ITSME_E_WINDOW_USED: itsme_result = 19;
pub const ITSME_E_MALFORMED_MESSAGE: itsme_result = 20;
pub const ITSME_E_EXPIRED: itsme_result = 21;
pub const ITSME_E_REPLAYED: itsme_result = 22;
pub const ITSME_E_ROLLED_BACK: itsme_result = 23;

// ---------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------

pub const ITSME_PUBLIC_KEY_BYTES: usize = 32;
pub const ITSME_FINGERPRINT_CHARS: usize = 16;
/// Buffer size for a fingerprint: 16 characters and the NUL.
pub const ITSME_FINGERPRINT_SIZE: usize = 17;
pub const ITSME_PIN_LENGTH: usize = 6;
/// Longest display name, in UTF-8 bytes (without the NUL).
pub const ITSME_TEXT_MAX: usize = 65536;
pub const ITSME_TYPED_CODE_MAX: usize = 64;
pub const ITSME_EXPORT_TEXT_MAX: usize = 1024;
pub const ITSME_NAME_MAX_BYTES: usize = 128;

// ---------------------------------------------------------------------------
// Secret store
// ---------------------------------------------------------------------------

pub type itsme_accessibility = u32;

pub const ITSME_ACCESSIBLE_WHEN_UNLOCKED_THIS_DEVICE_ONLY: itsme_accessibility = 0;
pub const ITSME_ACCESSIBLE_AFTER_FIRST_UNLOCK_THIS_DEVICE_ONLY: itsme_accessibility = 1;
pub const ITSME_ACCESSIBLE_WHEN_UNLOCKED: itsme_accessibility = 2;

/// Opaque secret-store handle (`itsme_secret_store`).
#[repr(C)]
pub struct itsme_secret_store {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Opaque identity handle (`itsme_identity`).
#[repr(C)]
pub struct itsme_identity {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Opaque contact store handle (`itsme_store`).
#[repr(C)]
pub struct itsme_store {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Opaque contact snapshot (`itsme_contact`).
#[repr(C)]
pub struct itsme_contact {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Opaque list of contact snapshots (`itsme_contact_list`).
#[repr(C)]
pub struct itsme_contact_list {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

pub type itsme_verification_state = u32;
pub const ITSME_CONTACT_UNVERIFIED: itsme_verification_state = 0;
pub const ITSME_CONTACT_VERIFIED: itsme_verification_state = 1;
pub const ITSME_CONTACT_DEGRADED: itsme_verification_state = 2;
pub const ITSME_CONTACT_AWAITING_PEER: itsme_verification_state = 3;

pub type itsme_exchange_method = u32;
pub const ITSME_EXCHANGE_QR: itsme_exchange_method = 0;
pub const ITSME_EXCHANGE_BLUETOOTH: itsme_exchange_method = 1;
pub const ITSME_EXCHANGE_INVITE: itsme_exchange_method = 2;
pub const ITSME_EXCHANGE_REALTIME: itsme_exchange_method = 3;

pub const ITSME_SEED_BYTES: usize = 32;
pub const ITSME_NOTE_MAX_BYTES: usize = 4096;

// ---------------------------------------------------------------------------
// Deterministic randomness, short codes, exchanges
// ---------------------------------------------------------------------------

/// Opaque random source (`itsme_random`).
#[repr(C)]
pub struct itsme_random {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Buffer size for a short code's text: "NOVEMBER 0000" and the NUL.
pub const ITSME_SHORT_CODE_SIZE: usize = 14;
pub const ITSME_SHORT_CODE_VALUES: u32 = 260000;

/// Opaque exchange handle (`itsme_exchange`).
#[repr(C)]
pub struct itsme_exchange {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

pub type itsme_exchange_state = u32;
pub const ITSME_EXCHANGE_AWAITING_PEER: itsme_exchange_state = 1;
pub const ITSME_EXCHANGE_COMPARE_SAS: itsme_exchange_state = 2;
pub const ITSME_EXCHANGE_IMPORTED: itsme_exchange_state = 3;
pub const ITSME_EXCHANGE_CONFIRMED: itsme_exchange_state = 4;
pub const ITSME_EXCHANGE_REJECTED: itsme_exchange_state = 5;
pub const ITSME_EXCHANGE_FAILED: itsme_exchange_state = 6;
pub const ITSME_EXCHANGE_AWAITING_DECISION: itsme_exchange_state = 7;

pub const ITSME_EXCHANGE_FLAG_UNAUTHENTICATED: u32 = 1;
pub const ITSME_EXCHANGE_FLAG_KNOWN_CONTACT: u32 = 2;
pub const ITSME_EXCHANGE_FLAG_PEER_CONFIRMED: u32 = 4;
pub const ITSME_EXCHANGE_FLAG_PEER_REJECTED: u32 = 8;

/// Longest QR payload text (bytes, no NUL).
pub const ITSME_QR_PAYLOAD_MAX: usize = 383;
/// Longest Bluetooth frame.
pub const ITSME_BLUETOOTH_FRAME_MAX: usize = 259;

/// Buffer size for a code as shown, "K7X2-M9PM", and the NUL.
pub const ITSME_REMOTE_CODE_SIZE: usize = 10;
/// Longest remote exchange message (bytes).
pub const ITSME_REMOTE_MESSAGE_MAX: usize = 355;
/// Buffer size for a relay ID: 32 lower-case hex characters and the NUL.
pub const ITSME_RELAY_ID_SIZE: usize = 33;

// ---------------------------------------------------------------------------
// Voice verification
// ---------------------------------------------------------------------------

/// Opaque voice verification session (`itsme_voice`).
#[repr(C)]
pub struct itsme_voice {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

pub type itsme_voice_state = u32;
pub const ITSME_VOICE_WAITING: itsme_voice_state = 1;
pub const ITSME_VOICE_SELECTING: itsme_voice_state = 2;
pub const ITSME_VOICE_COMPARING: itsme_voice_state = 3;
pub const ITSME_VOICE_FINISHED: itsme_voice_state = 4;
pub const ITSME_VOICE_FAILED: itsme_voice_state = 5;

pub const ITSME_VOICE_TURN_NONE: u32 = 0;
pub const ITSME_VOICE_TURN_MINE: u32 = 1;
pub const ITSME_VOICE_TURN_THEIRS: u32 = 2;

pub type itsme_voice_outcome = u32;
pub const ITSME_VOICE_VERIFIED: itsme_voice_outcome = 1;
pub const ITSME_VOICE_DEVICE_CHANGED: itsme_voice_outcome = 2;
pub const ITSME_VOICE_MISMATCH: itsme_voice_outcome = 3;
pub const ITSME_VOICE_VERIFIED_TAG_UNCHECKED: itsme_voice_outcome = 4;

/// The tag of an unknown device secret (`itsme_voice_their_code`).
pub const ITSME_VOICE_TAG_UNKNOWN: u32 = 100;
/// Buffer size for a code's text: "NOVEMBER 999" and the NUL.
pub const ITSME_VOICE_CODE_SIZE: usize = 13;
/// Buffer size for a session ID: "NOVEMBER 99" and the NUL.
pub const ITSME_VOICE_SESSION_ID_SIZE: usize = 12;

/// What one side derives in a session (`itsme_voice_derivation`), filled by
/// [`itsme_derive_voice`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct itsme_voice_derivation {
    pub session_id: u32,
    pub my_words: [u8; 5],
    pub their_words: [u8; 5],
    pub i_select_first: u8,
    pub reserved: u8,
    pub my_code: u32,
    pub their_code: u32,
    pub my_tag: u32,
    pub their_tag: u32,
}

// ---------------------------------------------------------------------------
// The degradation code, Online Verify, Security PIN Update
// ---------------------------------------------------------------------------

/// Buffer size for a degradation code: 24 characters, 5 dashes, the NUL.
pub const ITSME_DEGRADATION_CODE_SIZE: usize = 30;

/// Opaque Online Verify session (`itsme_online_verify`).
#[repr(C)]
pub struct itsme_online_verify {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

pub type itsme_online_verify_state = u32;
pub const ITSME_ONLINE_VERIFY_RUNNING: itsme_online_verify_state = 1;
pub const ITSME_ONLINE_VERIFY_COMPARE_SAS: itsme_online_verify_state = 2;
pub const ITSME_ONLINE_VERIFY_CONFIRMED: itsme_online_verify_state = 3;
pub const ITSME_ONLINE_VERIFY_REJECTED: itsme_online_verify_state = 4;
pub const ITSME_ONLINE_VERIFY_FAILED: itsme_online_verify_state = 5;

/// Buffer size for a room name: 32 hex digits and the NUL.
pub const ITSME_ROOM_NAME_SIZE: usize = 33;
/// Longest Online Verify message (a PROOF carrying a profile reference).
pub const ITSME_ONLINE_VERIFY_MESSAGE_MAX: usize = 114;

/// Opaque Security PIN Update (`itsme_pin_update`).
#[repr(C)]
pub struct itsme_pin_update {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

pub type itsme_pin_update_state = u32;
pub const ITSME_PIN_UPDATE_RUNNING: itsme_pin_update_state = 1;
pub const ITSME_PIN_UPDATE_DONE: itsme_pin_update_state = 2;
pub const ITSME_PIN_UPDATE_FAILED: itsme_pin_update_state = 3;

/// Longest PIN Update frame.
pub const ITSME_PIN_UPDATE_FRAME_MAX: usize = 66;

// ---------------------------------------------------------------------------
// Device transfer
// ---------------------------------------------------------------------------

pub const ITSME_EXPORT_PASSWORD_GENERATED: u32 = 1;
pub const ITSME_EXPORT_PASSWORD_CHOSEN: u32 = 2;
/// Buffer size for a generated password, "ABCD-EFGH-JKMNP" and the NUL.
pub const ITSME_EXPORT_PASSWORD_SIZE: usize = 16;
/// Shortest chosen password, in characters.
pub const ITSME_EXPORT_CHOSEN_PASSWORD_MIN: usize = 8;
/// A buffer size that holds any export blob: 144 bytes plus the name's
/// length, 272 at most.
pub const ITSME_EXPORT_MAX: usize = 272;
/// A buffer size that holds any export text with the NUL (372 characters
/// at most).
pub const ITSME_EXPORT_TEXT_SIZE: usize = 373;

/// Opaque opened import (`itsme_import`).
#[repr(C)]
pub struct itsme_import {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// What accepting a store's loss gave up (`itsme_store_loss`), filled by
/// [`itsme_store_accept_loss`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct itsme_store_loss {
    pub replaced: i32,
    pub commits_lost: u64,
    pub contacts_before: u64,
    pub contacts_now: u64,
    pub contacts_missing: u64,
    pub photos_missing: u64,
    pub device_secrets_missing: u64,
    pub contacts_without_their_photo: u64,
}

/// What installing an import would do on this device
/// (`itsme_import_report`), filled by [`itsme_import_check`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct itsme_import_report {
    pub wrong_identity: i32,
    pub other_fingerprint: [c_char; ITSME_FINGERPRINT_SIZE],
    pub store_exists: i32,
    pub contacts_readable: u64,
    pub contacts_unreadable: u64,
    pub device_secrets: u64,
}

/// Install flag: proceed over a wrong identity.
pub const ITSME_IMPORT_REPLACE: u32 = 1;

/// Opaque live transfer (`itsme_transfer`).
#[repr(C)]
pub struct itsme_transfer {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

pub type itsme_transfer_state = u32;
pub const ITSME_TRANSFER_AWAITING_PEER: itsme_transfer_state = 1;
pub const ITSME_TRANSFER_COMPARE_SAS: itsme_transfer_state = 2;
pub const ITSME_TRANSFER_AWAITING_IDENTITY: itsme_transfer_state = 3;
pub const ITSME_TRANSFER_DONE: itsme_transfer_state = 4;
pub const ITSME_TRANSFER_REJECTED: itsme_transfer_state = 5;
pub const ITSME_TRANSFER_FAILED: itsme_transfer_state = 6;

/// Buffer size for the offer text ("ITSMETR1:..."), with the NUL.
pub const ITSME_TRANSFER_OFFER_SIZE: usize = 76;
/// Longest transfer message.
pub const ITSME_TRANSFER_MESSAGE_MAX: usize = 228;

// ---------------------------------------------------------------------------
// Profile records
// ---------------------------------------------------------------------------

/// Opaque opened or created profile record (`itsme_profile`).
#[repr(C)]
pub struct itsme_profile {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

pub const ITSME_PROFILE_RECORD_MAX: usize = 262144;
pub const ITSME_PROFILE_RECORD_OVERHEAD: usize = 177;
pub const ITSME_RECORD_ID_BYTES: usize = 16;
pub const ITSME_PROFILE_REFERENCE_BYTES: usize = 32;
/// Buffer size for a record ID as text: 32 lowercase hex digits and the NUL.
pub const ITSME_RECORD_NAME_SIZE: usize = 33;
pub const ITSME_PHOTO_FILENAME_MAX_BYTES: usize = 255;

// ---------------------------------------------------------------------------
// Service approvals
// ---------------------------------------------------------------------------

pub const ITSME_CREDENTIAL_ID_BYTES: usize = 16;
pub const ITSME_SERVICE_ID_MAX_BYTES: usize = 255;
pub const ITSME_SESSION_ID_MAX_BYTES: usize = 128;
/// Buffer size for an OTP: six digits and the NUL.
pub const ITSME_OTP_SIZE: usize = 7;
pub const ITSME_SCOPES_MAX: usize = 32;
pub const ITSME_SCOPE_MAX_BYTES: usize = 64;
/// Buffer size for a scope list as text, with its NUL.
pub const ITSME_SCOPES_TEXT_SIZE: usize = 2080;
pub const ITSME_ENROLLMENT_MAX: usize = 226;
pub const ITSME_APPROVAL_REQUEST_MAX: usize = 2650;
pub const ITSME_APPROVAL_MAX: usize = 2177;
/// The longest lifetime of a request, in seconds.
pub const ITSME_APPROVAL_LIFETIME_MAX: i64 = 600;

pub type itsme_approval_decision = u32;
pub const ITSME_APPROVAL_APPROVE: itsme_approval_decision = 1;
pub const ITSME_APPROVAL_DENY: itsme_approval_decision = 2;

/// A request as read by `itsme_approval_request_parse`
/// (`itsme_approval_request_info`); every text NUL-terminated.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct itsme_approval_request_info {
    pub service_id: [c_char; ITSME_SERVICE_ID_MAX_BYTES + 1],
    pub service_name: [c_char; 129],
    pub session_id: [c_char; ITSME_SESSION_ID_MAX_BYTES + 1],
    pub otp: [c_char; ITSME_OTP_SIZE],
    pub issued_at: i64,
    pub expires_at: i64,
    pub scopes: [c_char; ITSME_SCOPES_TEXT_SIZE],
}

impl Default for itsme_approval_request_info {
    fn default() -> Self {
        itsme_approval_request_info {
            service_id: [0; ITSME_SERVICE_ID_MAX_BYTES + 1],
            service_name: [0; 129],
            session_id: [0; ITSME_SESSION_ID_MAX_BYTES + 1],
            otp: [0; ITSME_OTP_SIZE],
            issued_at: 0,
            expires_at: 0,
            scopes: [0; ITSME_SCOPES_TEXT_SIZE],
        }
    }
}

/// What a service learns from a valid enrollment (`itsme_credential_info`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct itsme_credential_info {
    pub credential_id: [u8; ITSME_CREDENTIAL_ID_BYTES],
    pub public_key: [u8; 32],
    pub label: [c_char; 129],
}

impl Default for itsme_credential_info {
    fn default() -> Self {
        itsme_credential_info { credential_id: [0; ITSME_CREDENTIAL_ID_BYTES], public_key: [0; 32], label: [0; 129] }
    }
}

/// Opaque replay store of a service (`itsme_replay_store`).
#[repr(C)]
pub struct itsme_replay_store {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// A host-implemented replay store (`itsme_replay_store_callbacks`).
/// `insert` must be `Some`; `destroy` may be `None`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct itsme_replay_store_callbacks {
    pub ctx: *mut c_void,
    pub insert: Option<
        unsafe extern "C" fn(
            ctx: *mut c_void,
            key: *const u8,
            expires_at: i64,
            now: i64,
            out_seen: *mut i32,
        ) -> itsme_result,
    >,
    pub destroy: Option<unsafe extern "C" fn(ctx: *mut c_void)>,
}

/// What a verified approval says (`itsme_approval_result`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct itsme_approval_result {
    pub decision: itsme_approval_decision,
    pub credential_id: [u8; ITSME_CREDENTIAL_ID_BYTES],
    pub timestamp: i64,
    pub granted_scopes: [c_char; ITSME_SCOPES_TEXT_SIZE],
}

impl Default for itsme_approval_result {
    fn default() -> Self {
        itsme_approval_result {
            decision: 0,
            credential_id: [0; ITSME_CREDENTIAL_ID_BYTES],
            timestamp: 0,
            granted_scopes: [0; ITSME_SCOPES_TEXT_SIZE],
        }
    }
}

/// A host-implemented secret store (`itsme_secret_store_callbacks`).
/// `get`, `put` and `remove` must be `Some`; `destroy` may be `None`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct itsme_secret_store_callbacks {
    pub ctx: *mut c_void,
    pub get: Option<
        unsafe extern "C" fn(
            ctx: *mut c_void,
            name: *const c_char,
            out: *mut u8,
            cap: usize,
            out_len: *mut usize,
        ) -> itsme_result,
    >,
    pub put: Option<
        unsafe extern "C" fn(
            ctx: *mut c_void,
            name: *const c_char,
            value: *const u8,
            len: usize,
            accessibility: itsme_accessibility,
        ) -> itsme_result,
    >,
    pub remove: Option<unsafe extern "C" fn(ctx: *mut c_void, name: *const c_char) -> itsme_result>,
    pub destroy: Option<unsafe extern "C" fn(ctx: *mut c_void)>,
}

// ---------------------------------------------------------------------------
// Functions
// ---------------------------------------------------------------------------

extern "C" {
    // Version
    pub fn itsme_version_string() -> *const c_char;
    pub fn itsme_version_number() -> u32;

    // Result codes
    pub fn itsme_result_message(code: itsme_result) -> *const c_char;

    // Initialisation and sizes
    pub fn itsme_init() -> itsme_result;
    pub fn itsme_last_error(buf: *mut c_char, cap: usize, out_len: *mut usize) -> itsme_result;
    pub fn itsme_public_key_bytes() -> usize;
    pub fn itsme_fingerprint_size() -> usize;
    pub fn itsme_name_max_bytes() -> usize;
    pub fn itsme_fingerprint_from_public_key(
        public_key: *const u8,
        key_len: usize,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;

    // Secret store
    pub fn itsme_secret_store_new_callbacks(
        callbacks: *const itsme_secret_store_callbacks,
        out: *mut *mut itsme_secret_store,
    ) -> itsme_result;
    pub fn itsme_secret_store_new_memory(out: *mut *mut itsme_secret_store) -> itsme_result;
    pub fn itsme_secret_store_open_file(
        directory: *const c_char,
        out: *mut *mut itsme_secret_store,
    ) -> itsme_result;
    pub fn itsme_secret_store_free(store: *mut itsme_secret_store);
    pub fn itsme_secret_store_last_error(
        store: *const itsme_secret_store,
        buf: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;

    // Identity
    pub fn itsme_identity_create(
        store: *mut itsme_secret_store,
        name: *const c_char,
        out: *mut *mut itsme_identity,
    ) -> itsme_result;
    pub fn itsme_identity_load(
        store: *mut itsme_secret_store,
        out: *mut *mut itsme_identity,
    ) -> itsme_result;
    pub fn itsme_identity_free(identity: *mut itsme_identity);
    pub fn itsme_identity_last_error(
        identity: *const itsme_identity,
        buf: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_identity_fingerprint(
        identity: *const itsme_identity,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_identity_public_key(
        identity: *const itsme_identity,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_identity_name(
        identity: *const itsme_identity,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_identity_set_name(identity: *mut itsme_identity, name: *const c_char) -> itsme_result;

    // PIN
    pub fn itsme_pin_is_set(identity: *mut itsme_identity, out_is_set: *mut c_int) -> itsme_result;
    pub fn itsme_pin_set(identity: *mut itsme_identity, pin: *const c_char) -> itsme_result;
    pub fn itsme_pin_verify(identity: *mut itsme_identity, pin: *const c_char, now: i64) -> itsme_result;
    pub fn itsme_pin_change(
        identity: *mut itsme_identity,
        old_pin: *const c_char,
        new_pin: *const c_char,
        now: i64,
    ) -> itsme_result;
    pub fn itsme_pin_status(
        identity: *mut itsme_identity,
        now: i64,
        out_failures: *mut u32,
        out_wait_seconds: *mut u64,
    ) -> itsme_result;

    // Contact store
    pub fn itsme_store_open(
        identity: *mut itsme_identity,
        path: *const c_char,
        out: *mut *mut itsme_store,
    ) -> itsme_result;
    pub fn itsme_store_accept_loss(
        identity: *mut itsme_identity,
        path: *const c_char,
        out_loss: *mut itsme_store_loss,
    ) -> itsme_result;
    pub fn itsme_store_free(store: *mut itsme_store);
    #[deprecated(note = "use itsme_store_free (itsme_store_close is removed in libitsme 0.2)")]
    pub fn itsme_store_close(store: *mut itsme_store);
    pub fn itsme_store_last_error(
        store: *const itsme_store,
        buf: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_store_add(
        store: *mut itsme_store,
        name: *const c_char,
        public_key: *const u8,
        key_len: usize,
        seed: *const u8,
        seed_len: usize,
        method: itsme_exchange_method,
        now: i64,
        out_id: *mut i64,
    ) -> itsme_result;
    pub fn itsme_store_add_unauthenticated(
        store: *mut itsme_store,
        name: *const c_char,
        fingerprint: *const c_char,
        seed: *const u8,
        seed_len: usize,
        method: itsme_exchange_method,
        now: i64,
        out_id: *mut i64,
    ) -> itsme_result;
    pub fn itsme_store_get(store: *mut itsme_store, id: i64, out: *mut *mut itsme_contact) -> itsme_result;
    pub fn itsme_store_get_by_key(
        store: *mut itsme_store,
        public_key: *const u8,
        key_len: usize,
        out: *mut *mut itsme_contact,
    ) -> itsme_result;
    pub fn itsme_store_find_fingerprint(
        store: *mut itsme_store,
        fingerprint: *const c_char,
        out: *mut *mut itsme_contact_list,
    ) -> itsme_result;
    pub fn itsme_store_list(
        store: *mut itsme_store,
        after_id: i64,
        limit: usize,
        out: *mut *mut itsme_contact_list,
    ) -> itsme_result;
    pub fn itsme_store_count(store: *mut itsme_store, out_count: *mut u64) -> itsme_result;
    pub fn itsme_store_expire_awaiting(store: *mut itsme_store, now: i64, out_deleted: *mut u64) -> itsme_result;
    pub fn itsme_store_set_name(store: *mut itsme_store, id: i64, name: *const c_char) -> itsme_result;
    pub fn itsme_store_set_note(store: *mut itsme_store, id: i64, note: *const c_char) -> itsme_result;
    pub fn itsme_store_set_state(
        store: *mut itsme_store,
        id: i64,
        state: itsme_verification_state,
        acknowledged: c_int,
        now: i64,
    ) -> itsme_result;
    pub fn itsme_store_use_window(store: *mut itsme_store, id: i64, window: i64) -> itsme_result;
    pub fn itsme_store_delete(store: *mut itsme_store, id: i64) -> itsme_result;
    pub fn itsme_store_backup(store: *mut itsme_store, path: *const c_char) -> itsme_result;
    pub fn itsme_contact_free(contact: *mut itsme_contact);
    pub fn itsme_contact_id(contact: *const itsme_contact, out_id: *mut i64) -> itsme_result;
    pub fn itsme_contact_name(
        contact: *const itsme_contact,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_contact_fingerprint(
        contact: *const itsme_contact,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_contact_public_key(
        contact: *const itsme_contact,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_contact_is_authenticated(
        contact: *const itsme_contact,
        out_authenticated: *mut c_int,
    ) -> itsme_result;
    pub fn itsme_contact_state(
        contact: *const itsme_contact,
        out_state: *mut itsme_verification_state,
        out_acknowledged: *mut c_int,
    ) -> itsme_result;
    pub fn itsme_contact_exchange_method(
        contact: *const itsme_contact,
        out_method: *mut itsme_exchange_method,
    ) -> itsme_result;
    pub fn itsme_contact_created_at(contact: *const itsme_contact, out_time: *mut i64) -> itsme_result;
    pub fn itsme_contact_verified_at(contact: *const itsme_contact, out_time: *mut i64) -> itsme_result;
    pub fn itsme_contact_last_window(contact: *const itsme_contact, out_window: *mut i64) -> itsme_result;
    pub fn itsme_contact_note(
        contact: *const itsme_contact,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_contact_list_free(list: *mut itsme_contact_list);
    pub fn itsme_contact_list_count(list: *const itsme_contact_list, out_count: *mut usize) -> itsme_result;
    pub fn itsme_contact_list_get(
        list: *const itsme_contact_list,
        index: usize,
        out: *mut *mut itsme_contact,
    ) -> itsme_result;

    // Deterministic randomness
    pub fn itsme_random_new_deterministic(seed: *const u8, seed_len: usize, out: *mut *mut itsme_random) -> itsme_result;
    pub fn itsme_random_free(rng: *mut itsme_random);
    pub fn itsme_identity_create_with_random(
        store: *mut itsme_secret_store,
        name: *const c_char,
        rng: *mut itsme_random,
        out: *mut *mut itsme_identity,
    ) -> itsme_result;

    // Short codes
    pub fn itsme_short_code_parse(text: *const c_char, out_value: *mut u32) -> itsme_result;
    pub fn itsme_short_code_format(value: u32, out: *mut c_char, cap: usize, out_len: *mut usize) -> itsme_result;

    // Contact exchange in person: QR and Bluetooth
    pub fn itsme_exchange_new_qr(
        identity: *mut itsme_identity,
        rng: *mut itsme_random,
        now: i64,
        out: *mut *mut itsme_exchange,
    ) -> itsme_result;
    pub fn itsme_exchange_new_bluetooth(
        identity: *mut itsme_identity,
        session_code: *const c_char,
        rng: *mut itsme_random,
        now: i64,
        out: *mut *mut itsme_exchange,
    ) -> itsme_result;
    pub fn itsme_exchange_free(exchange: *mut itsme_exchange);
    pub fn itsme_exchange_last_error(
        exchange: *const itsme_exchange,
        buf: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_exchange_status(
        exchange: *const itsme_exchange,
        out_state: *mut itsme_exchange_state,
        out_flags: *mut u32,
    ) -> itsme_result;
    pub fn itsme_exchange_get_method(
        exchange: *const itsme_exchange,
        out_method: *mut itsme_exchange_method,
    ) -> itsme_result;
    pub fn itsme_exchange_session_code(
        exchange: *const itsme_exchange,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_exchange_next_outgoing(
        exchange: *mut itsme_exchange,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_exchange_receive(exchange: *mut itsme_exchange, bytes: *const u8, len: usize, now: i64) -> itsme_result;
    pub fn itsme_exchange_sas(
        exchange: *const itsme_exchange,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_exchange_peer_name(
        exchange: *const itsme_exchange,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_exchange_peer_fingerprint(
        exchange: *const itsme_exchange,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_exchange_peer_public_key(
        exchange: *const itsme_exchange,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_exchange_save(
        exchange: *mut itsme_exchange,
        store: *mut itsme_store,
        now: i64,
        out_contact_id: *mut i64,
    ) -> itsme_result;
    pub fn itsme_exchange_settle(
        exchange: *mut itsme_exchange,
        store: *mut itsme_store,
        now: i64,
        out_contact_id: *mut i64,
    ) -> itsme_result;
    pub fn itsme_exchange_confirm(
        exchange: *mut itsme_exchange,
        store: *mut itsme_store,
        now: i64,
        out_contact_id: *mut i64,
    ) -> itsme_result;
    pub fn itsme_exchange_reject(exchange: *mut itsme_exchange, store: *mut itsme_store) -> itsme_result;
    pub fn itsme_exchange_seal(
        exchange: *mut itsme_exchange,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_exchange_restore(
        identity: *mut itsme_identity,
        sealed: *const u8,
        len: usize,
        now: i64,
        out: *mut *mut itsme_exchange,
    ) -> itsme_result;

    // Contact exchange at a distance: invite and real-time
    pub fn itsme_remote_code_check(text: *const c_char, out: *mut c_char, cap: usize, out_len: *mut usize) -> itsme_result;
    pub fn itsme_exchange_new_invite(
        identity: *mut itsme_identity,
        realtime: c_int,
        rng: *mut itsme_random,
        now: i64,
        out: *mut *mut itsme_exchange,
    ) -> itsme_result;
    pub fn itsme_exchange_accept_invite(
        identity: *mut itsme_identity,
        invite_code: *const c_char,
        encryption_code: *const c_char,
        realtime: c_int,
        rng: *mut itsme_random,
        now: i64,
        out: *mut *mut itsme_exchange,
    ) -> itsme_result;
    pub fn itsme_exchange_invite_code(
        exchange: *const itsme_exchange,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_exchange_encryption_code(
        exchange: *const itsme_exchange,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_exchange_relay_id(
        exchange: *const itsme_exchange,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_exchange_is_inviter(exchange: *const itsme_exchange, out_inviter: *mut c_int) -> itsme_result;

    // Pure derivations
    pub fn itsme_derive_seed(
        ephemeral_secret: *const u8,
        secret_len: usize,
        peer_ephemeral_public: *const u8,
        public_len: usize,
        fingerprint_a: *const c_char,
        fingerprint_b: *const c_char,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_derive_sas(
        seed: *const u8,
        seed_len: usize,
        transcript_hash: *const u8,
        th_len: usize,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_qr_transcript_hash(
        payload_a: *const u8,
        a_len: usize,
        payload_b: *const u8,
        b_len: usize,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_bluetooth_commitment(
        identity_public: *const u8,
        identity_len: usize,
        ephemeral_public: *const u8,
        ephemeral_len: usize,
        name: *const c_char,
        device_secret: *const u8,
        device_secret_len: usize,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_bluetooth_th1(
        session_code: *const c_char,
        hello_i: *const u8,
        hello_i_len: usize,
        hello_r: *const u8,
        hello_r_len: usize,
        key_i: *const u8,
        key_i_len: usize,
        key_r: *const u8,
        key_r_len: usize,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_bluetooth_session_keys(
        ephemeral_secret: *const u8,
        secret_len: usize,
        peer_ephemeral_public: *const u8,
        public_len: usize,
        th1: *const u8,
        th1_len: usize,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_bluetooth_transcript_hash(
        th1: *const u8,
        th1_len: usize,
        plaintext_i: *const u8,
        plaintext_i_len: usize,
        plaintext_r: *const u8,
        plaintext_r_len: usize,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;

    // Voice verification
    pub fn itsme_nato_word(index: u32) -> *const c_char;
    pub fn itsme_voice_new(
        store: *mut itsme_store,
        contact_id: i64,
        now: i64,
        out: *mut *mut itsme_voice,
    ) -> itsme_result;
    pub fn itsme_voice_free(voice: *mut itsme_voice);
    pub fn itsme_voice_last_error(
        voice: *const itsme_voice,
        buf: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_voice_status(
        voice: *const itsme_voice,
        out_state: *mut itsme_voice_state,
        out_turn: *mut u32,
    ) -> itsme_result;
    pub fn itsme_voice_timing(
        voice: *const itsme_voice,
        now: i64,
        out_window: *mut i64,
        out_starts_in: *mut i64,
        out_ends_in: *mut i64,
    ) -> itsme_result;
    pub fn itsme_voice_start(voice: *mut itsme_voice, store: *mut itsme_store, now: i64) -> itsme_result;
    pub fn itsme_voice_session_id(
        voice: *const itsme_voice,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_voice_words(voice: *const itsme_voice, out: *mut u8, cap: usize) -> itsme_result;
    pub fn itsme_voice_select(voice: *mut itsme_voice, word: u32, now: i64) -> itsme_result;
    pub fn itsme_voice_your_code(
        voice: *const itsme_voice,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
        out_tag: *mut u32,
    ) -> itsme_result;
    pub fn itsme_voice_their_code(
        voice: *const itsme_voice,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
        out_tag: *mut u32,
    ) -> itsme_result;
    pub fn itsme_voice_check(
        voice: *mut itsme_voice,
        store: *mut itsme_store,
        heard_code: *const c_char,
        heard_tag: u32,
        now: i64,
        out_outcome: *mut itsme_voice_outcome,
    ) -> itsme_result;
    pub fn itsme_derive_session_id(
        seed: *const u8,
        seed_len: usize,
        window: i64,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_derive_words(
        seed: *const u8,
        seed_len: usize,
        window: i64,
        pid: *const u8,
        pid_len: usize,
        out: *mut u8,
        cap: usize,
    ) -> itsme_result;
    pub fn itsme_derive_lower_selects_first(
        seed: *const u8,
        seed_len: usize,
        window: i64,
        out_lower_first: *mut c_int,
    ) -> itsme_result;
    pub fn itsme_derive_code(
        seed: *const u8,
        seed_len: usize,
        window: i64,
        first: *const u8,
        first_len: usize,
        first_word: u32,
        second: *const u8,
        second_len: usize,
        second_word: u32,
        speaker: *const u8,
        speaker_len: usize,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_derive_device_tag(
        seed: *const u8,
        seed_len: usize,
        window: i64,
        speaker: *const u8,
        speaker_len: usize,
        secret: *const u8,
        secret_len: usize,
        out_tag: *mut u32,
    ) -> itsme_result;
    pub fn itsme_derive_voice(
        seed: *const u8,
        seed_len: usize,
        window: i64,
        my_pid: *const u8,
        my_pid_len: usize,
        their_pid: *const u8,
        their_pid_len: usize,
        my_secret: *const u8,
        my_secret_len: usize,
        their_secret: *const u8,
        their_secret_len: usize,
        first_word: u32,
        second_word: u32,
        out: *mut itsme_voice_derivation,
    ) -> itsme_result;

    // The degradation code
    pub fn itsme_store_degradation_code(
        store: *mut itsme_store,
        contact_id: i64,
        rng: *mut itsme_random,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_store_accept_degradation_code(
        store: *mut itsme_store,
        contact_id: i64,
        code: *const c_char,
        now: i64,
    ) -> itsme_result;
    pub fn itsme_derive_degradation_code(
        seed: *const u8,
        seed_len: usize,
        pid: *const u8,
        pid_len: usize,
        secret: *const u8,
        secret_len: usize,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;

    // Online Verify
    pub fn itsme_online_verify_new(
        store: *mut itsme_store,
        contact_id: i64,
        window: i64,
        rng: *mut itsme_random,
        now: i64,
        out: *mut *mut itsme_online_verify,
    ) -> itsme_result;
    pub fn itsme_online_verify_free(session: *mut itsme_online_verify);
    pub fn itsme_online_verify_last_error(
        session: *const itsme_online_verify,
        buf: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_online_verify_status(
        session: *const itsme_online_verify,
        out_state: *mut itsme_online_verify_state,
    ) -> itsme_result;
    pub fn itsme_online_verify_room(
        session: *const itsme_online_verify,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_online_verify_next_outgoing(
        session: *mut itsme_online_verify,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_online_verify_receive(
        session: *mut itsme_online_verify,
        bytes: *const u8,
        len: usize,
        now: i64,
    ) -> itsme_result;
    pub fn itsme_online_verify_sas(
        session: *const itsme_online_verify,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_online_verify_confirm(
        session: *mut itsme_online_verify,
        store: *mut itsme_store,
        now: i64,
        out_outcome: *mut itsme_voice_outcome,
    ) -> itsme_result;
    pub fn itsme_online_verify_reject(session: *mut itsme_online_verify) -> itsme_result;

    // Security PIN Update
    pub fn itsme_pin_update_new(
        store: *mut itsme_store,
        contact_id: i64,
        window: i64,
        rng: *mut itsme_random,
        now: i64,
        out: *mut *mut itsme_pin_update,
    ) -> itsme_result;
    pub fn itsme_pin_update_free(update: *mut itsme_pin_update);
    pub fn itsme_pin_update_last_error(
        update: *const itsme_pin_update,
        buf: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_pin_update_status(
        update: *const itsme_pin_update,
        out_state: *mut itsme_pin_update_state,
    ) -> itsme_result;
    pub fn itsme_pin_update_session_code(
        update: *const itsme_pin_update,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_pin_update_next_outgoing(
        update: *mut itsme_pin_update,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_pin_update_receive(
        update: *mut itsme_pin_update,
        bytes: *const u8,
        len: usize,
        now: i64,
    ) -> itsme_result;

    // Device transfer: the password export
    pub fn itsme_export_generate_password(
        rng: *mut itsme_random,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_identity_export(
        identity: *mut itsme_identity,
        pin: *const c_char,
        now: i64,
        password: *const c_char,
        password_kind: u32,
        rng: *mut itsme_random,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_export_to_text(
        blob: *const u8,
        len: usize,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_export_from_text(text: *const c_char, out: *mut u8, cap: usize, out_len: *mut usize) -> itsme_result;
    pub fn itsme_export_header(
        blob: *const u8,
        len: usize,
        out_passes: *mut u32,
        out_memory_kib: *mut u32,
        out_password_kind: *mut u32,
    ) -> itsme_result;

    // Device transfer: imports
    pub fn itsme_import_open(
        store: *mut itsme_secret_store,
        blob: *const u8,
        len: usize,
        password: *const c_char,
        now: i64,
        out: *mut *mut itsme_import,
    ) -> itsme_result;
    pub fn itsme_import_status(
        store: *mut itsme_secret_store,
        now: i64,
        out_failures: *mut u32,
        out_wait_seconds: *mut u64,
    ) -> itsme_result;
    pub fn itsme_import_free(import: *mut itsme_import);
    pub fn itsme_import_last_error(
        import: *const itsme_import,
        buf: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_import_fingerprint(
        import: *const itsme_import,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_import_name(
        import: *const itsme_import,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_import_check(
        import: *mut itsme_import,
        store: *mut itsme_secret_store,
        store_path: *const c_char,
        out_report: *mut itsme_import_report,
    ) -> itsme_result;
    pub fn itsme_import_install(
        import: *mut itsme_import,
        store: *mut itsme_secret_store,
        store_path: *const c_char,
        flags: u32,
        out_identity: *mut *mut itsme_identity,
    ) -> itsme_result;

    // Device transfer: the live transfer
    pub fn itsme_transfer_new_receiver(rng: *mut itsme_random, now: i64, out: *mut *mut itsme_transfer) -> itsme_result;
    pub fn itsme_transfer_new_sender(
        identity: *mut itsme_identity,
        pin: *const c_char,
        offer: *const c_char,
        rng: *mut itsme_random,
        now: i64,
        out: *mut *mut itsme_transfer,
    ) -> itsme_result;
    pub fn itsme_transfer_free(transfer: *mut itsme_transfer);
    pub fn itsme_transfer_last_error(
        transfer: *const itsme_transfer,
        buf: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_transfer_status(transfer: *const itsme_transfer, out_state: *mut itsme_transfer_state) -> itsme_result;
    pub fn itsme_transfer_offer(
        transfer: *const itsme_transfer,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_transfer_room(
        transfer: *const itsme_transfer,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_transfer_next_outgoing(
        transfer: *mut itsme_transfer,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_transfer_receive(transfer: *mut itsme_transfer, bytes: *const u8, len: usize, now: i64) -> itsme_result;
    pub fn itsme_transfer_sas(
        transfer: *const itsme_transfer,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_transfer_confirm(transfer: *mut itsme_transfer, now: i64) -> itsme_result;
    pub fn itsme_transfer_reject(transfer: *mut itsme_transfer) -> itsme_result;
    pub fn itsme_transfer_take_import(transfer: *mut itsme_transfer, out: *mut *mut itsme_import) -> itsme_result;

    // Online Verify: profile references
    pub fn itsme_online_verify_share_profile(
        session: *mut itsme_online_verify,
        reference: *const u8,
        reference_len: usize,
    ) -> itsme_result;
    pub fn itsme_online_verify_peer_profile(
        session: *const itsme_online_verify,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;

    // Profile records
    pub fn itsme_profile_create(
        identity: *const itsme_identity,
        name: *const c_char,
        photo: *const u8,
        photo_len: usize,
        photo_filename: *const c_char,
        rng: *mut itsme_random,
        out: *mut *mut itsme_profile,
    ) -> itsme_result;
    pub fn itsme_profile_open(
        record: *const u8,
        record_len: usize,
        reference: *const u8,
        reference_len: usize,
        owner_key: *const u8,
        key_len: usize,
        out: *mut *mut itsme_profile,
    ) -> itsme_result;
    pub fn itsme_profile_free(profile: *mut itsme_profile);
    pub fn itsme_profile_name(
        profile: *const itsme_profile,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_profile_photo(profile: *const itsme_profile, out: *mut u8, cap: usize, out_len: *mut usize) -> itsme_result;
    pub fn itsme_profile_photo_filename(
        profile: *const itsme_profile,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_profile_record(profile: *const itsme_profile, out: *mut u8, cap: usize, out_len: *mut usize) -> itsme_result;
    pub fn itsme_profile_record_id(
        profile: *const itsme_profile,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_profile_record_name(
        profile: *const itsme_profile,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_profile_reference(
        profile: *const itsme_profile,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_store_apply_profile(store: *mut itsme_store, id: i64, profile: *const itsme_profile) -> itsme_result;
    pub fn itsme_store_set_photo(
        store: *mut itsme_store,
        id: i64,
        photo: *const u8,
        photo_len: usize,
        filename: *const c_char,
    ) -> itsme_result;
    pub fn itsme_store_photo(store: *mut itsme_store, id: i64, out: *mut u8, cap: usize, out_len: *mut usize) -> itsme_result;
    pub fn itsme_store_photo_filename(
        store: *mut itsme_store,
        id: i64,
        out: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;

    // Service approvals: the device
    pub fn itsme_credential_enroll(
        store: *mut itsme_secret_store,
        service_id: *const c_char,
        label: *const c_char,
        nonce: *const u8,
        nonce_len: usize,
        rng: *mut itsme_random,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_credential_id(
        store: *mut itsme_secret_store,
        service_id: *const c_char,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_credential_remove(store: *mut itsme_secret_store, service_id: *const c_char) -> itsme_result;
    pub fn itsme_approval_request_parse(
        request: *const u8,
        len: usize,
        now: i64,
        out: *mut itsme_approval_request_info,
    ) -> itsme_result;
    pub fn itsme_approval_sign(
        store: *mut itsme_secret_store,
        request: *const u8,
        request_len: usize,
        decision: itsme_approval_decision,
        granted_scopes: *const c_char,
        now: i64,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;

    // Service approvals: the service
    pub fn itsme_enrollment_verify(
        service_id: *const c_char,
        nonce: *const u8,
        nonce_len: usize,
        enrollment: *const u8,
        len: usize,
        out: *mut itsme_credential_info,
    ) -> itsme_result;
    pub fn itsme_approval_request_create(
        service_id: *const c_char,
        service_name: *const c_char,
        session_id: *const c_char,
        scopes: *const c_char,
        lifetime: i64,
        rng: *mut itsme_random,
        now: i64,
        out: *mut u8,
        cap: usize,
        out_len: *mut usize,
    ) -> itsme_result;
    pub fn itsme_replay_store_new_memory(capacity: usize, out: *mut *mut itsme_replay_store) -> itsme_result;
    pub fn itsme_replay_store_new_callbacks(
        callbacks: *const itsme_replay_store_callbacks,
        out: *mut *mut itsme_replay_store,
    ) -> itsme_result;
    pub fn itsme_replay_store_free(store: *mut itsme_replay_store);
    pub fn itsme_approval_verify(
        request: *const u8,
        request_len: usize,
        approval: *const u8,
        approval_len: usize,
        public_keys: *const u8,
        key_count: usize,
        replay: *mut itsme_replay_store,
        now: i64,
        out: *mut itsme_approval_result,
    ) -> itsme_result;
}
