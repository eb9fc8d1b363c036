//! Rust binding of libitsme.
//!
//! ItsMe lets two people who exchanged keys once prove to each other, during
//! any later call, that each still holds the secret they exchanged.  This
//! crate wraps the C interface of libitsme (`include/itsme.h`) in safe
//! types:
//!
//! - [`SecretStore`]: where the library keeps every secret: in memory, in a
//!   directory of files, or in a store of your own ([`SecretStoreBackend`]).
//! - [`Identity`]: an Ed25519 key pair and a display name kept in a store,
//!   with a 6-digit PIN guarded by an attempt limiter.
//! - [`ContactStore`]: an identity's contacts in one encrypted SQLite file,
//!   read as plain [`Contact`] values.
//! - [`Exchange`]: a contact exchange in person, by QR codes or Bluetooth,
//!   or at a distance, through a relay, with an invite code and an
//!   encryption code ([`Exchange::invite`], [`check_remote_code`]), ending
//!   in a short authentication string (SAS) the two people compare; with
//!   [`short_code_parse`], [`short_code_format`] and the protocol's pure
//!   derivations ([`derive_seed`], [`derive_sas`], ...) for test vectors.
//!   [`DeterministicRandom`] replays exchanges in tests.
//! - [`VoiceSession`]: a voice verification during a call: both people
//!   wait for a fresh window, each chooses one of five words, and each
//!   reads aloud a code with a device tag that the other checks; with
//!   [`nato_word`] and the pure derivations ([`derive_session_id`],
//!   [`derive_code`], ...).
//! - [`OnlineVerify`]: the same proof between two people who are apart,
//!   through a two-party relay room, ending in a SAS they read aloud.
//! - [`RollCall`]: everyone on a conference call checks at once which
//!   participants are contacts, by codes read aloud and sealed per contact
//!   through the relay's group room; with [`new_meeting_code`].
//! - The degradation code: after a device change, the person gives each
//!   contact a code ([`ContactStore::degradation_code`]) that the contact
//!   enters ([`ContactStore::accept_degradation_code`]); with
//!   [`derive_degradation_code`].
//! - [`PinUpdate`]: a Security PIN Update, in person, replacing the device
//!   secrets of a contact; it restores a degraded contact.
//! - Device transfer, to move an identity to a new device: a password
//!   export ([`Identity::export`], [`generate_export_password`],
//!   [`export_to_text`]; with the contact store inside,
//!   [`Identity::export_with_contacts`]) opened on the new device
//!   ([`Import::open`]), or a live transfer between the two devices side by
//!   side ([`TransferReceiver`], [`TransferSender`], which may carry the
//!   contact store: [`TransferSender::include_contacts`]) ending in a SAS;
//!   either gives an [`Import`] to [`Import::check`] and [`Import::install`]
//!   with the contact store file ([`Import::write_contacts`] writes the one
//!   the import carries; else [`ContactStore::backup`]).
//! - [`Profile`]: a person's name and photo sealed in a profile record for
//!   the relay, opened by contacts with the [`ProfileReference`] the owner
//!   sends inside an Online Verify ([`OnlineVerify::share_profile`],
//!   [`OnlineVerify::peer_profile`]), and applied to the contact
//!   ([`ContactStore::apply_profile`], [`ContactStore::photo`]).
//! - Service approvals: a device enrolls a key per service
//!   ([`SecretStore::enroll`]), reads a service's request
//!   ([`ApprovalRequest::parse`]) and approves or denies it
//!   ([`SecretStore::sign_approval`]); the service checks enrollments
//!   ([`verify_enrollment`]), makes requests ([`create_approval_request`])
//!   and verifies answers ([`verify_approval`]) against a [`ReplayStore`].
//! - [`Error`]: a library result code, its message and the detail the
//!   library recorded for the failure.
//! - [`init`]: checks that the loaded library is of the ABI this crate was
//!   written for ([`ABI_VERSION`]), then initialises it; every constructor
//!   calls it.
//!
//! The raw declarations are in [`sys`].
//!
//! ```
//! let store = itsme::SecretStore::memory()?;
//! let identity = itsme::Identity::create(&store, "Alice")?;
//! assert_eq!(identity.fingerprint()?.len(), itsme::FINGERPRINT_CHARS);
//! identity.set_pin("123456")?;
//! identity.verify_pin("123456", 1_800_000_000)?;
//! # Ok::<(), itsme::Error>(())
//! ```

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

// The code of README.md, compiled (and run where it may) as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub mod sys;

mod contacts;
pub use contacts::{
    Contact, ContactIter, ContactStore, ExchangeMethod, StoreLoss, VerificationState, NOTE_MAX_BYTES, SEED_BYTES,
};

mod exchange;
pub use exchange::{
    bluetooth_commitment, bluetooth_session_keys, bluetooth_th1, bluetooth_transcript_hash, check_remote_code,
    derive_sas, derive_seed, qr_transcript_hash, short_code_format, short_code_parse, DeterministicRandom, Exchange,
    ExchangeFlags, ExchangeState, BLUETOOTH_FRAME_MAX, QR_PAYLOAD_MAX, REMOTE_MESSAGE_MAX, SHORT_CODE_VALUES,
};

mod voice;
pub use voice::{
    derive_code, derive_degradation_code, derive_device_tag, derive_lower_selects_first, derive_session_id,
    derive_voice, derive_words, nato_word, VoiceDerivation, VoiceOutcome, VoiceSession, VoiceState, VoiceTiming,
    VoiceTurn, CALL_BINDING_MAX, CALL_BINDING_MIN, VOICE_WORDS,
};

mod online_verify;
pub use online_verify::{window_of, OnlineVerify, OnlineVerifyRendezvous, OnlineVerifyState, ONLINE_VERIFY_MESSAGE_MAX};

mod mailbox;
pub use mailbox::{HttpRequest, MailboxOutcome, MailboxRequest, MailboxSession};

mod rollcall;
pub use rollcall::{
    new_meeting_code, Participant, RollCall, RollCallPhase, RollCallState, ROLLCALL_MESSAGE_MAX, ROLLCALL_ROSTER_BYTES,
};

mod pin_update;
pub use pin_update::{PinUpdate, PinUpdateState, PIN_UPDATE_FRAME_MAX};

mod profile;
pub use profile::{
    Profile, ProfileReference, PHOTO_FILENAME_MAX_BYTES, PROFILE_RECORD_MAX, PROFILE_RECORD_OVERHEAD,
    PROFILE_REFERENCE_BYTES, RECORD_ID_BYTES,
};

mod approval;
pub use approval::{
    create_approval_request, verify_approval, verify_enrollment, ApprovalDecision, ApprovalRequest, ApprovalResult,
    Credential, ReplayStore, ReplayStoreBackend, APPROVAL_LIFETIME_MAX, APPROVAL_MAX, APPROVAL_REQUEST_MAX,
    CREDENTIAL_ID_BYTES, ENROLLMENT_MAX, SCOPES_MAX, SCOPE_MAX_BYTES, SERVICE_ID_MAX_BYTES, SESSION_ID_MAX_BYTES,
};

mod transfer;
pub use transfer::{
    export_from_text, export_header, export_to_text, generate_export_password, ExportHeader, ExportPassword, Import,
    ImportReport, OtherIdentity, PasswordKind, TransferReceiver, TransferSender, TransferState, EXPORT_CONTACTS_MAX,
    EXPORT_CHOSEN_PASSWORD_MIN, EXPORT_MAX, EXPORT_TEXT_MAX, TRANSFER_MESSAGE_MAX,
};

use std::ffi::CStr;
use std::fmt;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::atomic::{compiler_fence, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Size of an Ed25519 public key in bytes.
pub const PUBLIC_KEY_BYTES: usize = sys::ITSME_PUBLIC_KEY_BYTES;
/// Number of hexadecimal digits in a fingerprint.
pub const FINGERPRINT_CHARS: usize = sys::ITSME_FINGERPRINT_CHARS;
/// Number of digits in a PIN.
pub const PIN_LENGTH: usize = sys::ITSME_PIN_LENGTH;
/// Longest display name, in UTF-8 bytes.
pub const NAME_MAX_BYTES: usize = sys::ITSME_NAME_MAX_BYTES;
/// Longest passphrase of a wrapped file store, in bytes.
pub const PASSPHRASE_MAX_BYTES: usize = sys::ITSME_PASSPHRASE_MAX_BYTES;

/// Accessibility class: only on this device, only while it is unlocked (the
/// default for everything the library stores).
pub const ACCESSIBLE_WHEN_UNLOCKED_THIS_DEVICE_ONLY: u32 =
    sys::ITSME_ACCESSIBLE_WHEN_UNLOCKED_THIS_DEVICE_ONLY;
/// Accessibility class: only on this device, after the first unlock since
/// boot.
pub const ACCESSIBLE_AFTER_FIRST_UNLOCK_THIS_DEVICE_ONLY: u32 =
    sys::ITSME_ACCESSIBLE_AFTER_FIRST_UNLOCK_THIS_DEVICE_ONLY;
/// Accessibility class: while unlocked; may travel in encrypted backups.
pub const ACCESSIBLE_WHEN_UNLOCKED: u32 = sys::ITSME_ACCESSIBLE_WHEN_UNLOCKED;

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// The kind of an [`Error`], one per result code of the C interface, and
/// [`ErrorKind::IncompatibleVersion`] and [`ErrorKind::TestBuildRequired`],
/// which this binding makes.
///
/// Later library versions may add codes; those appear as
/// [`ErrorKind::Other`] with the raw code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A required value was missing or out of range, or text was not valid
    /// UTF-8 (`ITSME_E_INVALID_ARGUMENT`).
    InvalidArgument,
    /// An output buffer was too small (`ITSME_E_BUFFER_TOO_SMALL`).  The
    /// safe API retries with a larger buffer, so it does not return this.
    BufferTooSmall,
    /// The library is not initialised (`ITSME_E_NOT_INITIALIZED`).
    NotInitialized,
    /// This CPU lacks AES-256-GCM in hardware
    /// (`ITSME_E_UNSUPPORTED_PLATFORM`).
    UnsupportedPlatform,
    /// The requested identity, secret or PIN does not exist
    /// (`ITSME_E_NOT_FOUND`).
    NotFound,
    /// The item to create exists already (`ITSME_E_ALREADY_EXISTS`).
    AlreadyExists,
    /// A PIN that is not exactly six ASCII digits; not counted as an
    /// attempt (`ITSME_E_INVALID_PIN`).
    InvalidPin,
    /// A well-formed PIN that does not match; counted as a failed attempt
    /// (`ITSME_E_WRONG_PIN`).
    WrongPin,
    /// Too many failed attempts: wait (see [`Identity::pin_status`], or
    /// for export passwords [`SecretStore::import_status`]) and try again
    /// (`ITSME_E_LOCKED`).
    Locked,
    /// The secret store failed (`ITSME_E_SECRET_STORE`).
    SecretStore,
    /// Stored data is malformed, truncated or of an unknown version
    /// (`ITSME_E_CORRUPT_DATA`).
    CorruptData,
    /// A tag or signature did not verify, or a word heard in a voice
    /// session is not among the selector's; opening an export, a wrong
    /// password or an altered export (counted)
    /// (`ITSME_E_AUTHENTICATION_FAILED`).
    AuthenticationFailed,
    /// A public key was rejected (`ITSME_E_INVALID_KEY`).
    InvalidKey,
    /// A call was made in a state that does not allow it
    /// (`ITSME_E_INVALID_STATE`).
    InvalidState,
    /// A database operation failed (`ITSME_E_DATABASE`).
    Database,
    /// Memory could not be allocated (`ITSME_E_OUT_OF_MEMORY`).
    OutOfMemory,
    /// A bug in the library or in this binding (`ITSME_E_INTERNAL`).
    Internal,
    /// The contact store belongs to another identity; installing an
    /// import, the device holds another identity or contacts the imported
    /// key cannot read, and nothing was changed (`ITSME_E_WRONG_IDENTITY`).
    WrongIdentity,
    /// The verification window is not after the last one used
    /// (`ITSME_E_WINDOW_USED`).
    WindowUsed,
    /// A message from the peer (a QR payload, a Bluetooth frame, a
    /// transfer message) is malformed, of an unknown version, or arrived
    /// out of order, and the exchange has failed; or an export or transfer
    /// offer is truncated or not one (`ITSME_E_MALFORMED_MESSAGE`).
    MalformedMessage,
    /// The exchange began more than 24 hours ago, or the time of a voice
    /// session, an Online Verify, a PIN Update or a live transfer ran out,
    /// and it has failed; or a service approval request is past its expiry
    /// (`ITSME_E_EXPIRED`).
    Expired,
    /// A single-use message was presented again: a service approval whose
    /// request has been answered already (`ITSME_E_REPLAYED`).
    Replayed,
    /// The contact store is behind the last commit this device saw of the
    /// store at its path, or is another store than that one (emptied,
    /// deleted or replaced); nothing was changed.
    /// [`ContactStore::accept_loss`] says what was lost and accepts it
    /// (`ITSME_E_ROLLED_BACK`).
    RolledBack,
    /// The loaded libitsme is of another ABI version than the one this
    /// crate was written for ([`ABI_VERSION`]); [`init`] refuses it and
    /// every call fails with this.  Not a code of the C interface: this
    /// binding makes it, with the code [`INCOMPATIBLE_VERSION_CODE`].
    IncompatibleVersion,
    /// A function of `include/itsme_testing.h` (a deterministic random
    /// source, a pure derivation) was called on a release build of
    /// libitsme, which does not export it: use the test build (`make
    /// install-testing`).  Not a code of the C interface: this binding
    /// makes it, with the code [`TEST_BUILD_REQUIRED_CODE`].
    TestBuildRequired,
    /// A code this binding does not know.
    Other(i32),
}

/// The [`Error::code`] of [`ErrorKind::IncompatibleVersion`]: negative, so
/// never a code of the C interface.
pub const INCOMPATIBLE_VERSION_CODE: i32 = -1;

/// The [`Error::code`] of [`ErrorKind::TestBuildRequired`].
pub const TEST_BUILD_REQUIRED_CODE: i32 = -2;

/// Refuses, with [`ErrorKind::TestBuildRequired`], to call `function` of
/// the test build on a library that does not export it.
fn test_build(function: &str) -> Result<()> {
    if sys::testing_functions_available() {
        return Ok(());
    }
    Err(Error::new(
        TEST_BUILD_REQUIRED_CODE,
        format!("{function} is exported only by the test build of libitsme (include/itsme_testing.h)"),
    ))
}

impl ErrorKind {
    /// The kind of a C result code.
    pub fn from_code(code: i32) -> ErrorKind {
        match code {
            sys::ITSME_E_INVALID_ARGUMENT => ErrorKind::InvalidArgument,
            sys::ITSME_E_BUFFER_TOO_SMALL => ErrorKind::BufferTooSmall,
            sys::ITSME_E_NOT_INITIALIZED => ErrorKind::NotInitialized,
            sys::ITSME_E_UNSUPPORTED_PLATFORM => ErrorKind::UnsupportedPlatform,
            sys::ITSME_E_NOT_FOUND => ErrorKind::NotFound,
            sys::ITSME_E_ALREADY_EXISTS => ErrorKind::AlreadyExists,
            sys::ITSME_E_INVALID_PIN => ErrorKind::InvalidPin,
            sys::ITSME_E_WRONG_PIN => ErrorKind::WrongPin,
            sys::ITSME_E_LOCKED => ErrorKind::Locked,
            sys::ITSME_E_SECRET_STORE => ErrorKind::SecretStore,
            sys::ITSME_E_CORRUPT_DATA => ErrorKind::CorruptData,
            sys::ITSME_E_AUTHENTICATION_FAILED => ErrorKind::AuthenticationFailed,
            sys::ITSME_E_INVALID_KEY => ErrorKind::InvalidKey,
            sys::ITSME_E_INVALID_STATE => ErrorKind::InvalidState,
            sys::ITSME_E_DATABASE => ErrorKind::Database,
            sys::ITSME_E_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
            sys::ITSME_E_INTERNAL => ErrorKind::Internal,
            sys::ITSME_E_WRONG_IDENTITY => ErrorKind::WrongIdentity,
            sys::ITSME_E_WINDOW_USED => ErrorKind::WindowUsed,
            sys::ITSME_E_MALFORMED_MESSAGE => ErrorKind::MalformedMessage,
            sys::ITSME_E_EXPIRED => ErrorKind::Expired,
            sys::ITSME_E_REPLAYED => ErrorKind::Replayed,
            sys::ITSME_E_ROLLED_BACK => ErrorKind::RolledBack,
            INCOMPATIBLE_VERSION_CODE => ErrorKind::IncompatibleVersion,
            TEST_BUILD_REQUIRED_CODE => ErrorKind::TestBuildRequired,
            other => ErrorKind::Other(other),
        }
    }

    /// The C result code of this kind.
    pub fn code(self) -> i32 {
        match self {
            ErrorKind::InvalidArgument => sys::ITSME_E_INVALID_ARGUMENT,
            ErrorKind::BufferTooSmall => sys::ITSME_E_BUFFER_TOO_SMALL,
            ErrorKind::NotInitialized => sys::ITSME_E_NOT_INITIALIZED,
            ErrorKind::UnsupportedPlatform => sys::ITSME_E_UNSUPPORTED_PLATFORM,
            ErrorKind::NotFound => sys::ITSME_E_NOT_FOUND,
            ErrorKind::AlreadyExists => sys::ITSME_E_ALREADY_EXISTS,
            ErrorKind::InvalidPin => sys::ITSME_E_INVALID_PIN,
            ErrorKind::WrongPin => sys::ITSME_E_WRONG_PIN,
            ErrorKind::Locked => sys::ITSME_E_LOCKED,
            ErrorKind::SecretStore => sys::ITSME_E_SECRET_STORE,
            ErrorKind::CorruptData => sys::ITSME_E_CORRUPT_DATA,
            ErrorKind::AuthenticationFailed => sys::ITSME_E_AUTHENTICATION_FAILED,
            ErrorKind::InvalidKey => sys::ITSME_E_INVALID_KEY,
            ErrorKind::InvalidState => sys::ITSME_E_INVALID_STATE,
            ErrorKind::Database => sys::ITSME_E_DATABASE,
            ErrorKind::OutOfMemory => sys::ITSME_E_OUT_OF_MEMORY,
            ErrorKind::Internal => sys::ITSME_E_INTERNAL,
            ErrorKind::WrongIdentity => sys::ITSME_E_WRONG_IDENTITY,
            ErrorKind::WindowUsed => sys::ITSME_E_WINDOW_USED,
            ErrorKind::MalformedMessage => sys::ITSME_E_MALFORMED_MESSAGE,
            ErrorKind::Expired => sys::ITSME_E_EXPIRED,
            ErrorKind::Replayed => sys::ITSME_E_REPLAYED,
            ErrorKind::RolledBack => sys::ITSME_E_ROLLED_BACK,
            ErrorKind::IncompatibleVersion => INCOMPATIBLE_VERSION_CODE,
            ErrorKind::TestBuildRequired => TEST_BUILD_REQUIRED_CODE,
            ErrorKind::Other(code) => code,
        }
    }
}

/// An error from libitsme or from this binding.
///
/// `message` is the library's static text for `code`
/// ([`result_message`]); `detail` is the human-readable detail the library
/// recorded for this failure (the handle's last error), or empty.  Neither
/// ever contains secrets.  `Display` shows `message (detail)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The C result code (never `ITSME_OK`), or
    /// [`INCOMPATIBLE_VERSION_CODE`].
    pub code: i32,
    /// The static English text for `code`.
    pub message: String,
    /// What went wrong in this instance; empty if nothing was recorded.
    pub detail: String,
}

impl Error {
    /// An error with `code`, its static message and a detail.
    ///
    /// A [`SecretStoreBackend`] returns errors made with this; the code is
    /// passed on to the library (conventionally `ITSME_E_SECRET_STORE`,
    /// see [`Error::secret_store`]).
    pub fn new(code: i32, detail: impl Into<String>) -> Error {
        let message = match code {
            INCOMPATIBLE_VERSION_CODE => "incompatible libitsme version",
            TEST_BUILD_REQUIRED_CODE => "needs the test build of libitsme",
            code => result_message(code),
        };
        Error { code, message: message.to_owned(), detail: detail.into() }
    }

    /// An `ITSME_E_SECRET_STORE` error with a detail, for
    /// [`SecretStoreBackend`] implementations.
    pub fn secret_store(detail: impl Into<String>) -> Error {
        Error::new(sys::ITSME_E_SECRET_STORE, detail)
    }

    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::from_code(self.code)
    }

    fn internal(detail: impl Into<String>) -> Error {
        Error::new(sys::ITSME_E_INTERNAL, detail)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.detail.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{} ({})", self.message, self.detail)
        }
    }
}

impl std::error::Error for Error {}

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// The library's static English text for a result code, or
/// `"unknown result code"` for codes it does not know.
pub fn result_message(code: i32) -> &'static str {
    // SAFETY: the library returns a static NUL-terminated string.
    let text = unsafe { sys::itsme_result_message(code) };
    if text.is_null() {
        return "unknown result code";
    }
    // SAFETY: non-null, NUL-terminated, static storage.
    unsafe { CStr::from_ptr(text) }.to_str().unwrap_or("unknown result code")
}

// ---------------------------------------------------------------------------
// Initialisation and version
// ---------------------------------------------------------------------------

include!("abi_version.rs");

static INIT: OnceLock<Result<()>> = OnceLock::new();

/// Checks the version of the loaded library, then initialises it
/// (libsodium and the CPU check for AES-256-GCM).
///
/// Every constructor of this crate calls it, so calling it yourself is only
/// needed to detect an unsupported platform or library early.  The outcome
/// of the first call is remembered.
///
/// Errors: [`ErrorKind::IncompatibleVersion`] if the loaded library's
/// `MAJOR.MINOR` is not [`ABI_VERSION`] (the library is then left
/// uninitialised), [`ErrorKind::UnsupportedPlatform`] where the CPU lacks
/// AES-256-GCM support, [`ErrorKind::Internal`] if libsodium cannot
/// initialise.
pub fn init() -> Result<()> {
    INIT.get_or_init(|| {
        check_version(version_number())?;
        // SAFETY: itsme_init takes no arguments and is thread-safe.
        match unsafe { sys::itsme_init() } {
            sys::ITSME_OK => Ok(()),
            code => Err(Error::new(code, "")),
        }
    })
    .clone()
}

/// Accepts a library version number (`MAJOR * 10000 + MINOR * 100 +
/// PATCH`) of [`ABI_VERSION`]: the same major and minor, any patch.
fn check_version(loaded: u32) -> Result<()> {
    let (major, minor, patch) = (loaded / 10_000, loaded / 100 % 100, loaded % 100);
    let (want_major, want_minor) = ABI_VERSION;
    if (major, minor) == ABI_VERSION {
        return Ok(());
    }
    Err(Error::new(
        INCOMPATIBLE_VERSION_CODE,
        format!(
            "the loaded libitsme is {major}.{minor}.{patch}, but this crate (itsme {}) was written for \
             libitsme {want_major}.{want_minor} (any {want_major}.{want_minor}.x)",
            env!("CARGO_PKG_VERSION")
        ),
    ))
}

/// The version of the library actually loaded, as `"MAJOR.MINOR.PATCH"`.
pub fn version() -> &'static str {
    // SAFETY: static NUL-terminated string; needs no initialisation.
    let text = unsafe { sys::itsme_version_string() };
    if text.is_null() {
        return "";
    }
    // SAFETY: non-null, NUL-terminated, static storage.
    unsafe { CStr::from_ptr(text) }.to_str().unwrap_or("")
}

/// The version of the library actually loaded, as
/// `MAJOR * 10000 + MINOR * 100 + PATCH`.
pub fn version_number() -> u32 {
    // SAFETY: no arguments; needs no initialisation.
    unsafe { sys::itsme_version_number() }
}

/// The fingerprint of an Ed25519 public key: the first 8 bytes of its
/// SHA-256 as 16 uppercase hexadecimal digits.
///
/// Errors: [`ErrorKind::InvalidArgument`] if the key is not
/// [`PUBLIC_KEY_BYTES`] long.
pub fn fingerprint_from_public_key(public_key: &[u8]) -> Result<String> {
    init()?;
    read_string(sys::ITSME_FINGERPRINT_SIZE, |out, cap, out_len| {
        // SAFETY: the key slice is valid for its length; out/out_len come
        // from read_string and are valid for cap bytes / one usize.
        unsafe {
            sys::itsme_fingerprint_from_public_key(
                public_key.as_ptr(),
                public_key.len(),
                out,
                cap,
                out_len,
            )
        }
    })
    .map_err(|failure| failure.into_error(String::new))
}

// ---------------------------------------------------------------------------
// Buffers and text
// ---------------------------------------------------------------------------

/// A failed call: a library code whose detail is still to be read from the
/// right last-error slot, or a complete error made by this binding.
enum Failure {
    Code(i32),
    Binding(Error),
}

impl Failure {
    fn into_error(self, detail: impl FnOnce() -> String) -> Error {
        match self {
            Failure::Code(code) => Error::new(code, detail()),
            Failure::Binding(error) => error,
        }
    }
}

/// Calls `call(out, cap, out_len)` following the header's buffer protocol:
/// on ITSME_E_BUFFER_TOO_SMALL, retries with a buffer of the size the
/// library asked for.
fn read_bytes(
    initial_cap: usize,
    mut call: impl FnMut(*mut u8, usize, *mut usize) -> i32,
) -> std::result::Result<Vec<u8>, Failure> {
    let mut cap = initial_cap.max(1);
    for _ in 0..8 {
        let mut buf = vec![0u8; cap];
        let mut len: usize = 0;
        match call(buf.as_mut_ptr(), cap, &mut len) {
            sys::ITSME_OK => {
                if len > cap {
                    return Err(Failure::Binding(Error::internal(format!(
                        "libitsme reported {len} bytes written to a buffer of {cap}"
                    ))));
                }
                buf.truncate(len);
                return Ok(buf);
            }
            sys::ITSME_E_BUFFER_TOO_SMALL => {
                if len <= cap {
                    return Err(Failure::Binding(Error::internal(format!(
                        "libitsme asked for {len} bytes after refusing a buffer of {cap}"
                    ))));
                }
                cap = len;
            }
            code => return Err(Failure::Code(code)),
        }
    }
    Err(Failure::Binding(Error::internal("libitsme kept asking for a larger buffer")))
}

/// [`read_bytes`] for NUL-terminated UTF-8 text whose length counts the NUL.
fn read_string(
    initial_cap: usize,
    mut call: impl FnMut(*mut c_char, usize, *mut usize) -> i32,
) -> std::result::Result<String, Failure> {
    let mut bytes = read_bytes(initial_cap, |out, cap, len| call(out.cast(), cap, len))?;
    match bytes.last() {
        Some(0) => {
            bytes.pop();
        }
        _ => {
            return Err(Failure::Binding(Error::internal(
                "libitsme returned text whose length does not end at its NUL",
            )))
        }
    }
    if bytes.contains(&0) {
        return Err(Failure::Binding(Error::internal(
            "libitsme returned text whose length does not end at its NUL",
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| Failure::Binding(Error::internal("libitsme returned text that is not UTF-8")))
}

/// Reads a last-error slot; empty if it cannot be read.
fn read_detail(call: impl FnMut(*mut c_char, usize, *mut usize) -> i32) -> String {
    read_string(256, call).unwrap_or_default()
}

/// The detail of the last failed constructor on this thread.
fn thread_detail() -> String {
    // SAFETY: buffer pointers come from read_string.
    read_detail(|buf, cap, len| unsafe { sys::itsme_last_error(buf, cap, len) })
}

/// A NUL-terminated copy of a text argument.
/// A path as the library's NUL-terminated text.
fn directory_text(path: &Path) -> Result<CText> {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes()
    };
    #[cfg(not(unix))]
    let bytes = path
        .to_str()
        .ok_or_else(|| Error::new(sys::ITSME_E_INVALID_ARGUMENT, "the path is not valid UTF-8"))?
        .as_bytes();
    CText::new(bytes)
        .ok_or_else(|| Error::new(sys::ITSME_E_INVALID_ARGUMENT, "the path contains a NUL byte"))
}

struct CText(Vec<u8>);

impl CText {
    fn new(text: &[u8]) -> Option<CText> {
        if text.contains(&0) {
            return None;
        }
        let mut bytes = Vec::with_capacity(text.len() + 1);
        bytes.extend_from_slice(text);
        bytes.push(0);
        Some(CText(bytes))
    }

    /// A text argument; a NUL byte inside it is an invalid argument.
    fn arg(text: &str, what: &str) -> Result<CText> {
        CText::new(text.as_bytes()).ok_or_else(|| {
            Error::new(sys::ITSME_E_INVALID_ARGUMENT, format!("{what} contains a NUL byte"))
        })
    }

    fn as_ptr(&self) -> *const c_char {
        self.0.as_ptr().cast()
    }
}

/// A NUL-terminated copy of a PIN or another typed secret, wiped when
/// dropped.
struct SecretText(CText);

impl SecretText {
    /// A PIN argument; a NUL byte makes it something other than six digits.
    fn pin(pin: &str) -> Result<SecretText> {
        CText::new(pin.as_bytes())
            .map(SecretText)
            .ok_or_else(|| Error::new(sys::ITSME_E_INVALID_PIN, "the PIN contains a NUL byte"))
    }

    /// Another typed secret (a degradation code); a NUL byte inside it is
    /// an invalid argument.
    fn arg(text: &str, what: &str) -> Result<SecretText> {
        CText::arg(text, what).map(SecretText)
    }

    fn as_ptr(&self) -> *const c_char {
        self.0.as_ptr()
    }
}

impl Drop for SecretText {
    fn drop(&mut self) {
        wipe(&mut (self.0).0);
    }
}

/// Overwrites bytes with zeros in a way the compiler does not remove.
fn wipe(bytes: &mut [u8]) {
    for byte in bytes.iter_mut() {
        // SAFETY: a valid, aligned, exclusive reference.
        unsafe { ptr::write_volatile(byte, 0) };
    }
    compiler_fence(Ordering::SeqCst);
}

fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `body` and adds to a failure the detail it left in the calling
/// thread's slot (include/itsme.h: every failure leaves one there, so no
/// lock is needed to pair a call with its detail).
fn detailed<T>(body: impl FnOnce() -> std::result::Result<T, Failure>) -> Result<T> {
    body().map_err(|failure| failure.into_error(thread_detail))
}

/// [`detailed`] for a handle two threads must not use at once (an exchange,
/// a session): `mutex` serialises the calls, which is what makes the
/// handle's owner `Sync`.
fn locked_call<H, T>(
    mutex: &Mutex<()>,
    raw: *mut H,
    body: impl FnOnce(*mut H) -> std::result::Result<T, Failure>,
) -> Result<T> {
    let _guard = lock(mutex);
    detailed(|| body(raw))
}

/// A result code as a call's outcome.
fn code_result(code: i32) -> std::result::Result<(), Failure> {
    match code {
        sys::ITSME_OK => Ok(()),
        code => Err(Failure::Code(code)),
    }
}

// ---------------------------------------------------------------------------
// Secret store
// ---------------------------------------------------------------------------

/// A secret store implemented in Rust, for [`SecretStore::from_backend`].
///
/// The library keeps every secret of an identity (identity key, contacts
/// key, PIN hash, attempt counters) as named items in the store.  Item
/// names are 1 to 128 characters from `[a-z0-9._-]`, not starting with a
/// dot.
///
/// The library never calls the methods of one store concurrently, but it
/// may call them from any thread that uses a handle on the store, hence
/// `Send`.  The backend is dropped when the last [`SecretStore`] or
/// [`Identity`] using it is dropped.  A panic in a method is caught and
/// reported to the library as `ITSME_E_SECRET_STORE`.  Methods must not
/// call back into this crate.
pub trait SecretStoreBackend: Send {
    /// The item's bytes, or `None` if it does not exist.
    fn get(&mut self, name: &str) -> Result<Option<Vec<u8>>>;

    /// Creates or replaces the item atomically: after a crash the old or
    /// the new value is there.  `accessibility` is one of the
    /// `ACCESSIBLE_*` constants.
    fn put(&mut self, name: &str, value: &[u8], accessibility: u32) -> Result<()>;

    /// Deletes the item; `Ok(false)` if it did not exist.
    fn remove(&mut self, name: &str) -> Result<bool>;
}

type BackendBox = Box<dyn SecretStoreBackend>;

/// The code to hand the library for a backend error.  Codes that carry
/// protocol meaning in a callback's reply, or success, become
/// ITSME_E_SECRET_STORE.
fn backend_code(error: &Error) -> i32 {
    match error.code {
        sys::ITSME_OK | sys::ITSME_E_BUFFER_TOO_SMALL => sys::ITSME_E_SECRET_STORE,
        code => code,
    }
}

/// Runs a callback body, turning a panic into ITSME_E_SECRET_STORE.
fn guarded(body: impl FnOnce() -> i32) -> i32 {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(code) => code,
        Err(payload) => {
            // Dropping the payload could itself panic; leak it instead.
            std::mem::forget(payload);
            sys::ITSME_E_SECRET_STORE
        }
    }
}

/// The backend and item name behind a callback's raw arguments.
///
/// # Safety
/// `ctx` must be null or the pointer made by [`SecretStore::from_backend`],
/// not used concurrently; `name` null or NUL-terminated.
unsafe fn callback_args<'a>(
    ctx: *mut c_void,
    name: *const c_char,
) -> std::result::Result<(&'a mut BackendBox, &'a str), i32> {
    if ctx.is_null() || name.is_null() {
        return Err(sys::ITSME_E_INVALID_ARGUMENT);
    }
    // SAFETY: guaranteed by the caller.
    let backend = unsafe { &mut *ctx.cast::<BackendBox>() };
    // SAFETY: guaranteed by the caller.
    let name = unsafe { CStr::from_ptr(name) }.to_str().map_err(|_| sys::ITSME_E_INVALID_ARGUMENT)?;
    Ok((backend, name))
}

unsafe extern "C" fn backend_get(
    ctx: *mut c_void,
    name: *const c_char,
    out: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> i32 {
    guarded(|| {
        // SAFETY: the library passes the ctx it was given and a NUL-terminated
        // name, and never calls one store's callbacks concurrently.
        let (backend, name) = match unsafe { callback_args(ctx, name) } {
            Ok(args) => args,
            Err(code) => return code,
        };
        if out_len.is_null() {
            return sys::ITSME_E_INVALID_ARGUMENT;
        }
        match backend.get(name) {
            Ok(Some(mut value)) => {
                let len = value.len();
                let code = if len > cap {
                    // SAFETY: checked non-null above.
                    unsafe { *out_len = len };
                    sys::ITSME_E_BUFFER_TOO_SMALL
                } else if len > 0 && out.is_null() {
                    sys::ITSME_E_INVALID_ARGUMENT
                } else {
                    if len > 0 {
                        // SAFETY: out is valid for cap >= len bytes.
                        unsafe { ptr::copy_nonoverlapping(value.as_ptr(), out, len) };
                    }
                    // SAFETY: checked non-null above.
                    unsafe { *out_len = len };
                    sys::ITSME_OK
                };
                wipe(&mut value);
                code
            }
            Ok(None) => sys::ITSME_E_NOT_FOUND,
            Err(error) => backend_code(&error),
        }
    })
}

unsafe extern "C" fn backend_put(
    ctx: *mut c_void,
    name: *const c_char,
    value: *const u8,
    len: usize,
    accessibility: u32,
) -> i32 {
    guarded(|| {
        // SAFETY: as in backend_get.
        let (backend, name) = match unsafe { callback_args(ctx, name) } {
            Ok(args) => args,
            Err(code) => return code,
        };
        let value: &[u8] = if len == 0 {
            &[]
        } else if value.is_null() {
            return sys::ITSME_E_INVALID_ARGUMENT;
        } else {
            // SAFETY: the library passes `len` readable bytes.
            unsafe { std::slice::from_raw_parts(value, len) }
        };
        match backend.put(name, value, accessibility) {
            Ok(()) => sys::ITSME_OK,
            Err(error) => backend_code(&error),
        }
    })
}

unsafe extern "C" fn backend_remove(ctx: *mut c_void, name: *const c_char) -> i32 {
    guarded(|| {
        // SAFETY: as in backend_get.
        let (backend, name) = match unsafe { callback_args(ctx, name) } {
            Ok(args) => args,
            Err(code) => return code,
        };
        match backend.remove(name) {
            Ok(true) => sys::ITSME_OK,
            Ok(false) => sys::ITSME_E_NOT_FOUND,
            Err(error) => backend_code(&error),
        }
    })
}

unsafe extern "C" fn backend_destroy(ctx: *mut c_void) {
    if ctx.is_null() {
        return;
    }
    guarded(|| {
        // SAFETY: ctx was made by Box::into_raw in from_backend and the
        // library calls destroy exactly once.
        drop(unsafe { Box::from_raw(ctx.cast::<BackendBox>()) });
        sys::ITSME_OK
    });
}

/// A secret store: where an identity keeps its secrets.
///
/// Dropping it releases this handle; identities opened on the store keep
/// the store alive until they are dropped too.
pub struct SecretStore {
    raw: NonNull<sys::itsme_secret_store>,
}

// SAFETY: the header allows an itsme_secret_store to be used from several
// threads at once; a backend is Send and the library serialises its calls.
unsafe impl Send for SecretStore {}
// SAFETY: see above.
unsafe impl Sync for SecretStore {}

impl SecretStore {
    /// A store that keeps items in guarded memory, wiped when it is
    /// released.  For tests and short-lived sessions.
    pub fn memory() -> Result<SecretStore> {
        init()?;
        let mut out = ptr::null_mut();
        // SAFETY: out is a valid place for the handle.
        let code = unsafe { sys::itsme_secret_store_new_memory(&mut out) };
        SecretStore::constructed(code, out, "itsme_secret_store_new_memory")
    }

    /// A store in a directory, one file per item, created with mode 0700
    /// if missing.  Items are written atomically with mode 0600.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] for a path that is not valid
    /// UTF-8 or contains a NUL byte, [`ErrorKind::SecretStore`] if the
    /// directory cannot be created or opened or is not a directory.
    pub fn file(path: impl AsRef<Path>) -> Result<SecretStore> {
        init()?;
        let directory = directory_text(path.as_ref())?;
        let mut out = ptr::null_mut();
        // SAFETY: directory is NUL-terminated; out is a valid place.
        let code = unsafe { sys::itsme_secret_store_open_file(directory.as_ptr(), &mut out) };
        SecretStore::constructed(code, out, "itsme_secret_store_open_file")
    }

    /// Wraps a new, empty file store in `path` under `passphrase`, as
    /// ssh does for keys: every item is then sealed with ChaCha20-Poly1305
    /// under a key Argon2id derives from the passphrase (256 MiB, about a
    /// second: this call and [`SecretStore::open_wrapped_file`] take that
    /// long).  The wrap file is written beside the directory, named after
    /// it with `.wrap` appended (docs/STORAGE.md).  The passphrase is 1 to
    /// [`PASSPHRASE_MAX_BYTES`] bytes; the library copies it into guarded
    /// memory and wipes it after hashing (your copy is yours to wipe).
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (the path, the passphrase's
    /// length), [`ErrorKind::AlreadyExists`] (the store is wrapped
    /// already, or the directory holds items), [`ErrorKind::SecretStore`],
    /// [`ErrorKind::OutOfMemory`].
    pub fn create_wrapped_file(path: impl AsRef<Path>, passphrase: &[u8]) -> Result<SecretStore> {
        init()?;
        let directory = directory_text(path.as_ref())?;
        let mut out = ptr::null_mut();
        // SAFETY: directory is NUL-terminated; passphrase is valid for its
        // length; out is a valid place.
        let code = unsafe {
            sys::itsme_secret_store_create_file_passphrase(
                directory.as_ptr(),
                passphrase.as_ptr(),
                passphrase.len(),
                &mut out,
            )
        };
        SecretStore::constructed(code, out, "itsme_secret_store_create_file_passphrase")
    }

    /// Opens the file store in `path` wrapped by `passphrase`.
    ///
    /// Errors: [`ErrorKind::AuthenticationFailed`] (a wrong passphrase),
    /// [`ErrorKind::NotFound`] (the store is not wrapped: see
    /// [`SecretStore::is_wrapped_file`]), [`ErrorKind::CorruptData`] (a
    /// damaged wrap file), [`ErrorKind::SecretStore`],
    /// [`ErrorKind::InvalidArgument`], [`ErrorKind::OutOfMemory`].
    pub fn open_wrapped_file(path: impl AsRef<Path>, passphrase: &[u8]) -> Result<SecretStore> {
        init()?;
        let directory = directory_text(path.as_ref())?;
        let mut out = ptr::null_mut();
        // SAFETY: as in create_wrapped_file.
        let code = unsafe {
            sys::itsme_secret_store_open_file_passphrase(
                directory.as_ptr(),
                passphrase.as_ptr(),
                passphrase.len(),
                &mut out,
            )
        };
        SecretStore::constructed(code, out, "itsme_secret_store_open_file_passphrase")
    }

    /// Whether the file store in `path` is wrapped by a passphrase
    /// (anything at its wrap file's path says so).  Reads no file.
    pub fn is_wrapped_file(path: impl AsRef<Path>) -> Result<bool> {
        init()?;
        let directory = directory_text(path.as_ref())?;
        let mut wrapped = false;
        // SAFETY: directory is NUL-terminated; wrapped is a valid place.
        let code =
            unsafe { sys::itsme_secret_store_is_passphrase_wrapped(directory.as_ptr(), &mut wrapped) };
        if code != sys::ITSME_OK {
            return Err(Error::new(code, thread_detail()));
        }
        Ok(wrapped)
    }

    /// A store backed by your own [`SecretStoreBackend`].
    ///
    /// The store owns the backend and drops it when the last handle using
    /// it (this store and every identity opened on it) is dropped.
    pub fn from_backend(backend: Box<dyn SecretStoreBackend>) -> Result<SecretStore> {
        init()?;
        let ctx = Box::into_raw(Box::new(backend));
        let callbacks = sys::itsme_secret_store_callbacks {
            version: sys::ITSME_SECRET_STORE_CALLBACKS_VERSION,
            ctx: ctx.cast(),
            get: Some(backend_get),
            put: Some(backend_put),
            remove: Some(backend_remove),
            destroy: Some(backend_destroy),
        };
        let mut out = ptr::null_mut();
        // SAFETY: the table is valid for the call (the library copies it);
        // out is a valid place.
        let code = unsafe { sys::itsme_secret_store_new_callbacks(&callbacks, &mut out) };
        if code != sys::ITSME_OK {
            // On failure the caller keeps ctx.
            // SAFETY: ctx came from Box::into_raw above and was not taken.
            drop(unsafe { Box::from_raw(ctx) });
        }
        SecretStore::constructed(code, out, "itsme_secret_store_new_callbacks")
    }

    fn constructed(
        code: i32,
        out: *mut sys::itsme_secret_store,
        function: &str,
    ) -> Result<SecretStore> {
        if code != sys::ITSME_OK {
            return Err(Error::new(code, thread_detail()));
        }
        match NonNull::new(out) {
            Some(raw) => Ok(SecretStore { raw }),
            None => Err(Error::internal(format!("{function} succeeded without a handle"))),
        }
    }

    /// The error for `code` with this store's last-error detail.  Call with
    /// `lock` held, right after the failed call.
    fn error(&self, code: i32) -> Error {
        Error::new(code, thread_detail())
    }

    /// Runs a constructor of an identity on this store.
    fn open_identity(
        &self,
        call: impl FnOnce(*mut sys::itsme_secret_store, *mut *mut sys::itsme_identity) -> i32,
        function: &str,
    ) -> Result<Identity> {
        let mut out = ptr::null_mut();
        let code = call(self.raw.as_ptr(), &mut out);
        if code != sys::ITSME_OK {
            return Err(self.error(code));
        }
        match NonNull::new(out) {
            Some(raw) => Ok(Identity { raw }),
            None => Err(Error::internal(format!("{function} succeeded without a handle"))),
        }
    }
}

impl Drop for SecretStore {
    fn drop(&mut self) {
        // SAFETY: the handle is live and released exactly once.
        unsafe { sys::itsme_secret_store_free(self.raw.as_ptr()) };
    }
}

impl fmt::Debug for SecretStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretStore").field("raw", &self.raw).finish()
    }
}

// ---------------------------------------------------------------------------
// Identity
// ---------------------------------------------------------------------------

/// An identity: an Ed25519 key pair, a contacts key and a display name kept
/// in a secret store, with an optional 6-digit PIN.
///
/// The private key never leaves the library.  An identity keeps its store
/// alive, and may be shared between threads.  Dropping it wipes its secrets
/// from memory; the stored identity is untouched.
pub struct Identity {
    raw: NonNull<sys::itsme_identity>,
}

// SAFETY: the header allows an itsme_identity to be used from several
// threads at once; the library serialises the calls on it.
unsafe impl Send for Identity {}
// SAFETY: see above.
unsafe impl Sync for Identity {}

impl Identity {
    /// Creates a new identity with a display name (1 to
    /// [`NAME_MAX_BYTES`] bytes, no control characters) and saves it in
    /// the store.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] for a bad name,
    /// [`ErrorKind::AlreadyExists`] if the store holds an identity already,
    /// [`ErrorKind::SecretStore`].
    pub fn create(store: &SecretStore, name: &str) -> Result<Identity> {
        init()?;
        let name = CText::arg(name, "the name")?;
        store.open_identity(
            // SAFETY: live store handle, NUL-terminated name, valid out.
            |raw, out| unsafe { sys::itsme_identity_create(raw, name.as_ptr(), out) },
            "itsme_identity_create",
        )
    }

    /// Loads the identity kept in the store.
    ///
    /// Errors: [`ErrorKind::NotFound`] if there is none,
    /// [`ErrorKind::CorruptData`] if the stored record is malformed or of
    /// an unknown version, [`ErrorKind::SecretStore`].
    pub fn load(store: &SecretStore) -> Result<Identity> {
        init()?;
        store.open_identity(
            // SAFETY: live store handle, valid out.
            |raw, out| unsafe { sys::itsme_identity_load(raw, out) },
            "itsme_identity_load",
        )
    }

    /// Runs a call on the handle and adds the handle's last-error detail to
    /// a failure.
    fn call<T>(&self, body: impl FnOnce(*mut sys::itsme_identity) -> std::result::Result<T, Failure>) -> Result<T> {
        let raw = self.raw.as_ptr();
        detailed(|| body(raw))
    }

    /// Runs a call that only returns a result code.
    fn call_code(&self, body: impl FnOnce(*mut sys::itsme_identity) -> i32) -> Result<()> {
        self.call(|raw| code_result(body(raw)))
    }

    /// The identity's fingerprint: 16 uppercase hexadecimal digits.
    pub fn fingerprint(&self) -> Result<String> {
        self.call(|raw| {
            read_string(sys::ITSME_FINGERPRINT_SIZE, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_identity_fingerprint(raw, out, cap, len) }
            })
        })
    }

    /// The identity's Ed25519 public key.
    pub fn public_key(&self) -> Result<[u8; PUBLIC_KEY_BYTES]> {
        let bytes = self.call(|raw| {
            read_bytes(PUBLIC_KEY_BYTES, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_identity_public_key(raw, out, cap, len) }
            })
        })?;
        <[u8; PUBLIC_KEY_BYTES]>::try_from(bytes.as_slice()).map_err(|_| {
            Error::internal(format!("libitsme returned a public key of {} bytes", bytes.len()))
        })
    }

    /// The identity's display name.
    pub fn name(&self) -> Result<String> {
        self.call(|raw| {
            read_string(NAME_MAX_BYTES + 1, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_identity_name(raw, out, cap, len) }
            })
        })
    }

    /// Changes the display name (1 to [`NAME_MAX_BYTES`] bytes, no control
    /// characters) and saves it.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`], [`ErrorKind::SecretStore`].
    pub fn set_name(&self, name: &str) -> Result<()> {
        let name = CText::arg(name, "the name")?;
        // SAFETY: live handle; NUL-terminated name.
        self.call_code(|raw| unsafe { sys::itsme_identity_set_name(raw, name.as_ptr()) })
    }

    /// Whether a PIN is set.
    ///
    /// Errors: [`ErrorKind::CorruptData`], [`ErrorKind::SecretStore`].
    pub fn pin_is_set(&self) -> Result<bool> {
        let mut is_set = false;
        // SAFETY: live handle; is_set is a valid place.
        self.call_code(|raw| unsafe { sys::itsme_pin_is_set(raw, &mut is_set) })?;
        Ok(is_set)
    }

    /// Sets the first PIN: exactly six ASCII digits.
    ///
    /// Errors: [`ErrorKind::InvalidPin`], [`ErrorKind::AlreadyExists`] (use
    /// [`Identity::change_pin`]), [`ErrorKind::SecretStore`].
    pub fn set_pin(&self, pin: &str) -> Result<()> {
        let pin = SecretText::pin(pin)?;
        // SAFETY: live handle; NUL-terminated PIN.
        self.call_code(|raw| unsafe { sys::itsme_pin_set(raw, pin.as_ptr()) })
    }

    /// Checks a PIN at `now` (unix seconds, not negative).
    ///
    /// Five failures are free; the fifth locks further attempts for five
    /// minutes, and each further failure doubles the wait, up to 24 hours.
    /// A success clears the count.
    ///
    /// Errors: [`ErrorKind::InvalidPin`] (not six digits; not counted),
    /// [`ErrorKind::NotFound`] (no PIN set), [`ErrorKind::WrongPin`]
    /// (counted), [`ErrorKind::Locked`] (refused and not counted; see
    /// [`Identity::pin_status`]), [`ErrorKind::InvalidArgument`] (negative
    /// `now`), [`ErrorKind::CorruptData`], [`ErrorKind::SecretStore`].
    pub fn verify_pin(&self, pin: &str, now: i64) -> Result<()> {
        let pin = SecretText::pin(pin)?;
        // SAFETY: live handle; NUL-terminated PIN.
        self.call_code(|raw| unsafe { sys::itsme_pin_verify(raw, pin.as_ptr(), now) })
    }

    /// Replaces the PIN after checking the old one exactly as
    /// [`Identity::verify_pin`] does (a wrong old PIN counts).
    ///
    /// Errors: those of [`Identity::verify_pin`], and
    /// [`ErrorKind::InvalidPin`] for a malformed new PIN (checked first,
    /// not counted).
    pub fn change_pin(&self, old_pin: &str, new_pin: &str, now: i64) -> Result<()> {
        let new_pin = SecretText::pin(new_pin)?;
        let old_pin = SecretText::pin(old_pin)?;
        // SAFETY: live handle; NUL-terminated PINs.
        self.call_code(|raw| unsafe {
            sys::itsme_pin_change(raw, old_pin.as_ptr(), new_pin.as_ptr(), now)
        })
    }

    /// The attempt limiter at `now`: the number of consecutive failed
    /// attempts, and the seconds to wait before the next attempt is allowed
    /// (0 if one is allowed now).
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] (negative `now`),
    /// [`ErrorKind::CorruptData`], [`ErrorKind::SecretStore`].
    pub fn pin_status(&self, now: i64) -> Result<(u32, u64)> {
        let mut failures: u32 = 0;
        let mut wait: u64 = 0;
        // SAFETY: live handle; both outputs are valid places.
        self.call_code(|raw| unsafe { sys::itsme_pin_status(raw, now, &mut failures, &mut wait) })?;
        Ok((failures, wait))
    }
}

impl Drop for Identity {
    fn drop(&mut self) {
        // SAFETY: the handle is live and released exactly once.
        unsafe { sys::itsme_identity_free(self.raw.as_ptr()) };
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity").field("raw", &self.raw).finish()
    }
}

#[cfg(test)]
mod tests {
    //! The callback trampolines, called directly as the library would.

    use super::*;
    use std::collections::HashMap;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    struct Map {
        items: HashMap<String, Vec<u8>>,
        dropped: Arc<AtomicBool>,
        fail: Option<i32>,
        panic: bool,
    }

    impl SecretStoreBackend for Map {
        fn get(&mut self, name: &str) -> Result<Option<Vec<u8>>> {
            if self.panic {
                panic!("backend panic (expected by the test)");
            }
            if let Some(code) = self.fail {
                return Err(Error::new(code, "failing"));
            }
            Ok(self.items.get(name).cloned())
        }
        fn put(&mut self, name: &str, value: &[u8], _accessibility: u32) -> Result<()> {
            if self.panic {
                panic!("backend panic (expected by the test)");
            }
            if let Some(code) = self.fail {
                return Err(Error::new(code, "failing"));
            }
            self.items.insert(name.to_owned(), value.to_vec());
            Ok(())
        }
        fn remove(&mut self, name: &str) -> Result<bool> {
            if self.panic {
                panic!("backend panic (expected by the test)");
            }
            if let Some(code) = self.fail {
                return Err(Error::new(code, "failing"));
            }
            Ok(self.items.remove(name).is_some())
        }
    }

    fn ctx(fail: Option<i32>, panic: bool) -> (*mut c_void, Arc<AtomicBool>) {
        let dropped = Arc::new(AtomicBool::new(false));
        let backend: BackendBox =
            Box::new(Map { items: HashMap::new(), dropped: dropped.clone(), fail, panic });
        (Box::into_raw(Box::new(backend)).cast(), dropped)
    }

    impl Drop for Map {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::SeqCst);
        }
    }

    const NAME: &[u8] = b"item.one\0";

    #[test]
    fn get_follows_the_buffer_protocol() {
        let (ctx, dropped) = ctx(None, false);
        let name = NAME.as_ptr().cast();
        unsafe {
            let mut len = 0usize;
            let mut buf = [0xAAu8; 4];
            assert_eq!(backend_get(ctx, name, buf.as_mut_ptr(), 4, &mut len), sys::ITSME_E_NOT_FOUND);
            assert_eq!(backend_put(ctx, name, b"0123456789".as_ptr(), 10, 0), sys::ITSME_OK);
            assert_eq!(
                backend_get(ctx, name, buf.as_mut_ptr(), 4, &mut len),
                sys::ITSME_E_BUFFER_TOO_SMALL
            );
            assert_eq!(len, 10);
            assert_eq!(buf, [0xAA; 4], "nothing written on failure");
            let mut big = [0u8; 10];
            assert_eq!(backend_get(ctx, name, big.as_mut_ptr(), 10, &mut len), sys::ITSME_OK);
            assert_eq!((len, &big), (10, b"0123456789"));
            assert_eq!(backend_put(ctx, name, ptr::null(), 0, 0), sys::ITSME_OK);
            assert_eq!(backend_get(ctx, name, ptr::null_mut(), 0, &mut len), sys::ITSME_OK);
            assert_eq!(len, 0);
            assert_eq!(backend_get(ctx, ptr::null(), big.as_mut_ptr(), 10, &mut len), sys::ITSME_E_INVALID_ARGUMENT);
            assert_eq!(backend_get(ctx, name, big.as_mut_ptr(), 10, ptr::null_mut()), sys::ITSME_E_INVALID_ARGUMENT);
            assert_eq!(backend_remove(ctx, name), sys::ITSME_OK);
            assert_eq!(backend_remove(ctx, name), sys::ITSME_E_NOT_FOUND);
            let bad_utf8 = b"\xff\0";
            assert_eq!(backend_remove(ctx, bad_utf8.as_ptr().cast()), sys::ITSME_E_INVALID_ARGUMENT);
            assert!(!dropped.load(Ordering::SeqCst));
            backend_destroy(ctx);
        }
        assert!(dropped.load(Ordering::SeqCst));
    }

    #[test]
    fn errors_and_panics_become_codes() {
        let name = NAME.as_ptr().cast();
        for (fail, expected) in [
            (sys::ITSME_E_SECRET_STORE, sys::ITSME_E_SECRET_STORE),
            (sys::ITSME_E_OUT_OF_MEMORY, sys::ITSME_E_OUT_OF_MEMORY),
            (sys::ITSME_OK, sys::ITSME_E_SECRET_STORE),
            (sys::ITSME_E_BUFFER_TOO_SMALL, sys::ITSME_E_SECRET_STORE),
        ] {
            let (ctx, _) = ctx(Some(fail), false);
            let mut len = 0usize;
            let mut buf = [0u8; 8];
            unsafe {
                assert_eq!(backend_get(ctx, name, buf.as_mut_ptr(), 8, &mut len), expected);
                assert_eq!(backend_put(ctx, name, buf.as_ptr(), 8, 0), expected);
                assert_eq!(backend_remove(ctx, name), expected);
                backend_destroy(ctx);
            }
        }
        let (ctx, dropped) = ctx(None, true);
        let mut len = 0usize;
        let mut buf = [0u8; 8];
        unsafe {
            assert_eq!(backend_get(ctx, name, buf.as_mut_ptr(), 8, &mut len), sys::ITSME_E_SECRET_STORE);
            assert_eq!(backend_put(ctx, name, buf.as_ptr(), 8, 0), sys::ITSME_E_SECRET_STORE);
            assert_eq!(backend_remove(ctx, name), sys::ITSME_E_SECRET_STORE);
            backend_destroy(ctx);
        }
        assert!(dropped.load(Ordering::SeqCst));
    }

    #[test]
    fn error_kinds_round_trip() {
        for code in 1..=sys::ITSME_E_ROLLED_BACK {
            let kind = ErrorKind::from_code(code);
            assert!(!matches!(kind, ErrorKind::Other(_)), "code {code}");
            assert_eq!(kind.code(), code);
        }
        assert_eq!(ErrorKind::from_code(18), ErrorKind::WrongIdentity);
        assert_eq!(ErrorKind::from_code(19), ErrorKind::WindowUsed);
        assert_eq!(ErrorKind::from_code(20), ErrorKind::MalformedMessage);
        assert_eq!(ErrorKind::from_code(21), ErrorKind::Expired);
        assert_eq!(ErrorKind::from_code(22), ErrorKind::Replayed);
        assert_eq!(ErrorKind::from_code(23), ErrorKind::RolledBack);
        assert_eq!(ErrorKind::from_code(24), ErrorKind::Other(24));
        assert_eq!(ErrorKind::from_code(99), ErrorKind::Other(99));
        assert_eq!(ErrorKind::Other(99).code(), 99);
        assert_eq!(ErrorKind::from_code(INCOMPATIBLE_VERSION_CODE), ErrorKind::IncompatibleVersion);
        assert_eq!(ErrorKind::IncompatibleVersion.code(), INCOMPATIBLE_VERSION_CODE);
    }

    #[test]
    fn the_expected_version_is_the_headers() {
        // sys.rs and abi_version.rs are generated from the same header
        // (scripts/abi generate); ABI_VERSION must name its MAJOR.MINOR.
        assert_eq!(ABI_VERSION, (sys::ITSME_VERSION_MAJOR, sys::ITSME_VERSION_MINOR));
    }

    #[test]
    fn versions_of_another_major_or_minor_are_refused() {
        let (major, minor) = ABI_VERSION;
        let number = |major: u32, minor: u32, patch: u32| major * 10_000 + minor * 100 + patch;
        for patch in [0, 1, 99] {
            assert_eq!(check_version(number(major, minor, patch)), Ok(()), "patch {patch}");
        }
        for (other_major, other_minor) in [(major, minor + 1), (major + 1, minor), (major + 1, 0)]
            .into_iter()
            .chain(minor.checked_sub(1).map(|m| (major, m)))
        {
            let error = check_version(number(other_major, other_minor, 3)).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::IncompatibleVersion);
            assert_eq!(error.code, INCOMPATIBLE_VERSION_CODE);
            let text = error.to_string();
            assert!(text.contains(&format!("{other_major}.{other_minor}.3")), "{text}");
            assert!(text.contains(&format!("written for libitsme {major}.{minor} ")), "{text}");
        }
        // The loaded library is the one the crate was written for.
        assert_eq!(check_version(version_number()), Ok(()));
        assert_eq!(init(), Ok(()));
    }
}
